// How many timed iterations a size gets, by count or by time (both benches use it, so that Canopy and
// Open MPI are timed over the same kind of window).
//
// A fixed count times 200 small broadcasts in about 1.2 ms: a window that short measures how the
// ranks happen to line up after the barrier, and the CPU's hiccups, more than the steady stream (a
// 4-rank 64-byte broadcast read 6.6-9.3 us over 200 iterations and 4.7-8.5 over 20000). --min-time
// keeps a fixed count as the least, and grows it so that the window lasts about that long at the
// warm-up's pace (the Intel MPI Benchmarks' time-based policy). Warm-up calls run slower than the
// stream that follows (cold caches, the first call's schedule), so the window comes out somewhat
// shorter: with -w 20, 127-232 ms for --min-time 200 on 2 ranks.
#pragma once

namespace canopy::bench {

// The most iterations --min-time may ask for: a 4-byte call takes about 2 us here, so 1 s of them.
inline constexpr int kMostTimedIterations = 500'000;

// `iterations`, or more where the warm-up's slowest rank took `seconds_per_iteration` and `min_seconds`
// of them would need more (never above kMostTimedIterations). Every rank must pass the same figures
// (the slowest rank's), so that all run the same count.
int timed_iterations(int iterations, double min_seconds, double seconds_per_iteration);

}  // namespace canopy::bench
