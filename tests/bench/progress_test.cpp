// The progress line: its text, silence when the output is not a terminal, and where canopy-run's word
// that its stderr is a terminal counts (a pipe) and where it does not (a file).
#include "bench/collectives/progress.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

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

TEST(Progress, AFileNeverReachesATerminal) {
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  EXPECT_FALSE(ProgressLine::reaches_terminal(::fileno(file), false));
  EXPECT_FALSE(
      ProgressLine::reaches_terminal(::fileno(file), true));  // redirected: the launcher's word is moot
  std::fclose(file);
}

TEST(Progress, APipeReachesATerminalOnlyOnTheLaunchersWord) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  EXPECT_FALSE(ProgressLine::reaches_terminal(fds[1], false));
  EXPECT_TRUE(ProgressLine::reaches_terminal(fds[1], true));
  ::close(fds[0]);
  ::close(fds[1]);
}

TEST(Progress, APseudoTerminalIsATerminal) {
  int leader = ::posix_openpt(O_RDWR | O_NOCTTY);
  if (leader < 0) GTEST_SKIP() << "no pseudo-terminals here";
  ASSERT_EQ(::grantpt(leader), 0);
  ASSERT_EQ(::unlockpt(leader), 0);
  int follower = ::open(::ptsname(leader), O_RDWR | O_NOCTTY);
  ASSERT_GE(follower, 0);
  EXPECT_TRUE(ProgressLine::reaches_terminal(follower, false));
  // And a ProgressLine on it draws: "\r", erase to end of line, the text; clear() erases it again.
  std::FILE* terminal = ::fdopen(follower, "w");
  ASSERT_NE(terminal, nullptr);
  {
    ProgressLine progress(terminal, 2, /*enabled=*/true);
    EXPECT_TRUE(progress.enabled());
    progress.starting(0, "broadcast flat 8");
  }
  std::fclose(terminal);
  std::string drawn(256, '\0');
  ssize_t n = ::read(leader, drawn.data(), drawn.size());
  ASSERT_GT(n, 0);
  drawn.resize(static_cast<std::size_t>(n));
  EXPECT_EQ(drawn.rfind("\r\033[K[ 1/2 ] broadcast flat 8", 0), 0u) << drawn;
  ::close(leader);
}

}  // namespace
}  // namespace canopy::bench
