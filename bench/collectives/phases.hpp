// Where a sweep's time goes, from the launch to the end: printed by rank 0 at CANOPY_DEBUG=INFO, so that a
// start at hundreds of ranks can be read phase by phase (launch, forming, calibration, first call,
// bookkeeping, ...). The launch is CANOPY_PROBE_LAUNCH_NS: canopy-run's start, or an earlier clock a script
// gave it (bench/startup/startup.sh, `CANOPY_PROBE_LAUNCH_NS=$(date +%s%N) canopy-run ...`); the launcher's
// own exit comes after the line.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace canopy::bench {

class Phases {
 public:
  using Clock = std::chrono::steady_clock;

  // Adds the seconds since the last mark (or since construction) to `phase`; phases keep their first order.
  void mark(const std::string& phase);
  double seconds(const std::string& phase) const;
  // A remark the line ends with.
  void note(std::string text) { note_ = std::move(text); }
  // "launch 0.41 s, forming 1.20 s, ..., ended 3.10 s after the launch" (or "... in all" without a launch).
  // `since_launch_at_start`: seconds from the launch to this object's construction, if known.
  std::string line(double since_launch_at_start) const;

 private:
  Clock::time_point last_ = Clock::now();
  const Clock::time_point start_ = last_;
  std::vector<std::pair<std::string, double>> seconds_;
  std::string note_;
};

}  // namespace canopy::bench
