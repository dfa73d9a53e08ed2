// The flags a sweep of sizes takes, the same in canopy-bench and in its MPI peer (bench/compare), so that
// both time the same sizes the same way: nccl-tests' -b -e -f -n -w, and --min-time, --root, --latency,
// --json. Sizes and durations read in the settings' grammars (docs/SETTINGS.md).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace canopy::bench {

struct SweepFlags {
  std::string collective = "allreduce";
  std::string min_size = "8", max_size = "64M";
  std::uint64_t factor = 2;
  int iterations = 20, warmup = 5;
  std::string min_time = "0";  // milliseconds unless it says otherwise (200, 0.2s)
  int root = 0;
  bool latency = false;
  std::string json;

  // min, min*factor, ... up to and including max. Throws Error(Config) for a size that is not one.
  std::vector<std::uint64_t> sizes() const;
  // --min-time; throws Error(Config) for one that is not a duration of at most a minute.
  double min_time_seconds() const;
};

// Adds the flags above to `app` (with `flags`' values as the defaults shown); `collectives` is the
// positional's help ("allreduce|broadcast|...").
void add_sweep_flags(CLI::App& app, SweepFlags& flags, const std::string& collectives);

}  // namespace canopy::bench
