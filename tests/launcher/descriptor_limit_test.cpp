// The soft RLIMIT_NOFILE canopy-run asks for, and raising it in this process.
#include "launcher/descriptor_limit.hpp"

#include <gtest/gtest.h>

namespace canopy::launcher {
namespace {

TEST(DescriptorLimit, TargetIsTheHardLimitOrTheKernelsCeiling) {
  EXPECT_EQ(descriptor_limit_target(4096, 1 << 20), 4096u);
  EXPECT_EQ(descriptor_limit_target(RLIM_INFINITY, 1 << 20), static_cast<rlim_t>(1 << 20));
}

TEST(DescriptorLimit, RaisesTheSoftLimitAndNeverLowersIt) {
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  if (saved.rlim_max != RLIM_INFINITY && saved.rlim_max <= 64)
    GTEST_SKIP() << "hard limit " << saved.rlim_max;
  rlimit low = saved;
  low.rlim_cur = 64;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  const DescriptorLimitRaise first = raise_descriptor_limit();
  const DescriptorLimitRaise second = raise_descriptor_limit();
  rlimit now{};
  ::getrlimit(RLIMIT_NOFILE, &now);
  ::setrlimit(RLIMIT_NOFILE, &saved);
  EXPECT_EQ(first.before, 64u);
  EXPECT_EQ(first.problem, "");
  EXPECT_GT(first.after, 64u);
  EXPECT_EQ(now.rlim_cur, first.after);
  if (saved.rlim_max != RLIM_INFINITY) {
    EXPECT_EQ(first.after, saved.rlim_max);
  }
  EXPECT_EQ(second.before, first.after);  // already there: nothing to do
  EXPECT_EQ(second.after, first.after);
}

}  // namespace
}  // namespace canopy::launcher
