// The progress line: its text, and silence when the output is not a terminal.
#include "bench/collectives/progress.hpp"

#include <gtest/gtest.h>

#include <cstdio>

namespace canopy::bench {
namespace {

TEST(Progress, DescribesTheStepAboutToRun) {
  EXPECT_EQ(ProgressLine::describe(0, 10, "allreduce ring 64M", 0), "[ 1/10 ] allreduce ring 64M  (0 s)");
  EXPECT_EQ(ProgressLine::describe(4, 10, "x", 8), "[ 5/10 ] x  (8 s, about 12 s left)");
}

TEST(Progress, PrintsNothingOnAFileOrWhenDisabled) {
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  {
    ProgressLine progress(file, 3, /*enabled=*/true);
    EXPECT_FALSE(progress.enabled());
    progress.starting(0, "broadcast flat 8");
    progress.clear();
  }
  EXPECT_EQ(std::ftell(file), 0);
  std::fclose(file);
  ProgressLine disabled(stderr, 3, /*enabled=*/false);
  EXPECT_FALSE(disabled.enabled());
}

}  // namespace
}  // namespace canopy::bench
