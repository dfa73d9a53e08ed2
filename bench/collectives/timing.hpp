// How a size is timed, the same in canopy-bench and canopy-mpi-bench, so that Canopy and Open MPI are
// measured alike: how many iterations (by count or by time), and whether back to back or one at a time.
//
// A fixed count times 200 small broadcasts in about 1.2 ms: a window that short measures how the
// ranks happen to line up after the barrier, and the CPU's hiccups, more than the steady stream (a
// 4-rank 64-byte broadcast read 6.6-9.3 us over 200 iterations and 4.7-8.5 over 20000). --min-time
// keeps a fixed count as the least, and grows it so that the window lasts about that long at the
// warm-up's pace (the Intel MPI Benchmarks' time-based policy). Warm-up calls run slower than the
// stream that follows (cold caches, the first call's schedule), so the window comes out somewhat
// shorter: with -w 20, 127-232 ms for --min-time 200 on 2 ranks.
#pragma once

#include <chrono>

namespace canopy::bench {

// The most iterations --min-time may ask for: a 4-byte call takes about 2 us here, so 1 s of them.
inline constexpr int kMostTimedIterations = 500'000;

// `iterations`, or more where the warm-up's slowest rank took `seconds_per_iteration` and `min_seconds`
// of them would need more (never above kMostTimedIterations). Every rank must pass the same figures
// (the slowest rank's), so that all run the same count.
int timed_iterations(int iterations, double min_seconds, double seconds_per_iteration);

// Runs the `warmup` untimed calls (at least one when `min_seconds` asks for a window: the estimate needs
// one) and returns how many calls to time: `iterations`, or more by timed_iterations at the pace of the
// slowest rank's warm-up, which `slowest(seconds_per_call)` (a maximum over the ranks) supplies.
template <class Call, class Slowest>
int warm_up(int warmup, int iterations, double min_seconds, Call&& call, Slowest&& slowest) {
  using Clock = std::chrono::steady_clock;
  if (min_seconds > 0 && warmup < 1) warmup = 1;
  const auto begin = Clock::now();
  for (int i = 0; i < warmup; ++i) call();
  if (min_seconds <= 0) return iterations;
  const double mine = std::chrono::duration<double>(Clock::now() - begin).count() / warmup;
  return timed_iterations(iterations, min_seconds, slowest(mine));
}

// Seconds `iterations` calls took: back to back, a stream (nccl-tests' method), or with `latency` each
// alone after `barrier`, only the calls counted (OSU's method). In a stream a broadcast's root never
// waits for its leaves; one call at a time measures what the cost model predicts.
template <class Call, class Barrier>
double time_calls(int iterations, bool latency, Call&& call, Barrier&& barrier) {
  using Clock = std::chrono::steady_clock;
  if (!latency) {
    const auto begin = Clock::now();
    for (int i = 0; i < iterations; ++i) call();
    return std::chrono::duration<double>(Clock::now() - begin).count();
  }
  double seconds = 0;
  for (int i = 0; i < iterations; ++i) {
    barrier();
    const auto begin = Clock::now();
    call();
    seconds += std::chrono::duration<double>(Clock::now() - begin).count();
  }
  return seconds;
}

}  // namespace canopy::bench
