// --min-time's rule: -n is the least, the warm-up's pace says how many fill the window, within a bound.
#include "bench/collectives/timing.hpp"

#include <gtest/gtest.h>

namespace canopy::bench {
namespace {

TEST(TimedIterations, GrowsTheCountToFillTheWindow) {
  EXPECT_EQ(timed_iterations(20, 0.1, 1e-5), 10000);  // 100 ms of 10 us calls
  EXPECT_EQ(timed_iterations(20, 0.1, 3e-5), 3334);   // rounded up: the window is at least 100 ms
}

TEST(TimedIterations, NeverBelowTheCountAsked) {
  EXPECT_EQ(timed_iterations(20, 0.1, 0.5), 20);  // 20 calls of 0.5 s already last 10 s
  EXPECT_EQ(timed_iterations(20, 0, 1e-6), 20);   // no window: exactly -n
  EXPECT_EQ(timed_iterations(20, 0.1, 0), 20);    // no estimate (a rank measured nothing)
}

TEST(TimedIterations, BoundedWhenCallsAreAlmostFree) {
  EXPECT_EQ(timed_iterations(20, 10, 1e-9), kMostTimedIterations);
  EXPECT_EQ(timed_iterations(kMostTimedIterations * 2, 10, 1e-9), kMostTimedIterations * 2);  // -n wins
}

}  // namespace
}  // namespace canopy::bench
