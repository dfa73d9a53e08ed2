// Times one collective with one algorithm at one size across the group, and checks its result.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "bench/collectives/phases.hpp"
#include "canopy/communicator.hpp"

namespace canopy::bench {

struct BenchCase {
  Collective collective = Collective::AllReduce;
  std::string algorithm = "auto";
  std::uint64_t bytes =
      0;  // of the whole buffer (all-gather: the gathered output; reduce-scatter: the input)
  DataType dtype = DataType::Float32;
  ReduceOp op = ReduceOp::Sum;
  int root = 0;
  bool in_place = false;
  int iterations = 20;
  int warmup = 5;
  double min_seconds = 0;  // --min-time: more iterations until the timed calls last this long
  int windows = 1;         // --windows: the timed calls split into this many windows, back to back
  // --latency: a barrier before every timed call, and only the calls timed (OSU's method): each call's own
  // latency. Without it, back-to-back calls are timed as a stream (nccl-tests' method), which hides what a
  // broadcast's leaves wait, since its root never waits for them.
  bool latency = false;
  bool check = true;
  std::size_t chunk_bytes =
      0;  // pipelining granularity; 0 = the library's default (CANOPY_CHUNK_BYTES or 1 MiB)
};

struct BenchResult {
  BenchCase with;
  std::string algorithm;    // what ran (auto resolved)
  std::uint64_t bytes = 0;  // after rounding to whole elements (and blocks)
  std::uint64_t count = 0;  // elements of the whole buffer
  int iterations = 0;       // timed (with --min-time, possibly more than asked for)
  int windows = 1;          // they were timed in (windows.hpp)
  double time_us = 0;       // the median window's time per call (each window's: the mean over ranks)
  double min_time_us = 0;   // fastest rank, over all its windows
  double max_time_us = 0;   // slowest rank
  double fastest_window_us = 0;
  double slowest_window_us = 0;
  double spread = 0;        // (slowest - fastest window) / time
  bool spread_is_large = false;  // above kLargeSpread: flagged in the table
  double predicted_time_us = 0;
  double algbw_gbps = 0;    // bytes / time, 10^9 bytes per second
  double busbw_gbps = 0;    // algbw x the collective's bus factor (nccl-tests)
  // Elements differing from the exact result: summed over ranks on rank 0, this rank's own elsewhere (only
  // rank 0 reports; each rank's exit status says whether its own were right).
  std::uint64_t wrong = 0;
};

// nccl-tests' bus bandwidth factor.
double bus_factor(Collective collective, int ranks);

// On rank 0 the result describes every rank, with the algorithm auto would run next and its prediction;
// elsewhere only the count and its own wrong elements. Its phases (first call, calibration, timed calls, bookkeeping) go to `phases`.
class Measurement {
 public:
  // `formed_since_launch`: seconds from the launch to this rank's group formed (negative: not known).
  Measurement(Communicator& comm, Phases& phases, double formed_since_launch)
      : comm_(comm), phases_(phases), formed_since_launch_(formed_since_launch) {}
  BenchResult run(const BenchCase& bench_case);
  // On rank 0, after a run: the latest any rank's group formed, in seconds from the launch (negative where
  // not known), gathered with the results. Rank 0's own phases wait for that rank.
  double last_formed_since_launch() const { return last_formed_since_launch_; }

 private:
  std::pair<std::uint64_t, std::uint64_t> buffer_elements(Collective c, std::uint64_t block) const;
  CollectiveArgs arguments(const BenchCase& c, std::uint64_t block);
  void fill(const BenchCase& c, std::uint64_t block);
  std::uint64_t count_wrong(const BenchCase& c, std::uint64_t block) const;

  Communicator& comm_;
  Phases& phases_;
  double formed_since_launch_ = -1;
  double last_formed_since_launch_ = -1;
  bool first_call_done_ = false;
  std::vector<std::byte> input_, output_;  // reused across cases: no fresh pages while timing
};

}  // namespace canopy::bench
