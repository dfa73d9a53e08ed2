// Times one collective with one algorithm at one size across the group, and checks its result.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

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
  double min_seconds = 0;  // --min-time: more iterations until the timed window lasts this long
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
  double time_us = 0;       // average over ranks of the per-iteration time
  double min_time_us = 0;   // fastest rank
  double max_time_us = 0;   // slowest rank
  double predicted_time_us = 0;
  double algbw_gbps = 0;    // bytes / time, 10^9 bytes per second
  double busbw_gbps = 0;    // algbw x the collective's bus factor (nccl-tests)
  std::uint64_t wrong = 0;  // elements differing from the exact result, summed over ranks
};

// nccl-tests' bus bandwidth factor.
double bus_factor(Collective collective, int ranks);

class Measurement {
 public:
  explicit Measurement(Communicator& comm) : comm_(comm) {}
  BenchResult run(const BenchCase& bench_case);

 private:
  std::pair<std::uint64_t, std::uint64_t> buffer_elements(Collective c, std::uint64_t block) const;
  CollectiveArgs arguments(const BenchCase& c, std::uint64_t block);
  void fill(const BenchCase& c, std::uint64_t block);
  std::uint64_t count_wrong(const BenchCase& c, std::uint64_t block) const;

  Communicator& comm_;
  std::vector<std::byte> input_, output_;  // reused across cases: no fresh pages while timing
};

}  // namespace canopy::bench
