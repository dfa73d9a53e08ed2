#include "launcher/rank_process.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launcher/job_store.hpp"

namespace canopy::launcher {
namespace {

// A real wait status, from a real child, rather than one built by hand.
int wait_status_of(void (*body)()) {
  pid_t pid = fork();
  if (pid == 0) {
    body();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

TEST(RankExit, DescribesAnExitStatus) {
  int status = wait_status_of([] { _exit(3); });
  RankExit exit = RankExit::from_wait_status(2, 1234, status);
  EXPECT_TRUE(exit.failed());
  EXPECT_EQ(exit.describe(), "rank 2 (pid 1234) exited with status 3");
  EXPECT_EQ(exit.shell_status(), 3);
}

TEST(RankExit, DescribesADeathBySignal) {
  int status = wait_status_of([] { raise(SIGKILL); });
  RankExit exit = RankExit::from_wait_status(0, 77, status);
  EXPECT_TRUE(exit.failed());
  EXPECT_EQ(exit.describe(), "rank 0 (pid 77) was killed by signal 9 (Killed)");
  EXPECT_EQ(exit.shell_status(), 137);
}

TEST(RankExit, SuccessIsNotAFailure) {
  RankExit exit = RankExit::from_wait_status(1, 5, wait_status_of([] { _exit(0); }));
  EXPECT_FALSE(exit.failed());
  EXPECT_EQ(exit.shell_status(), 0);
}

TEST(JobToken, Is128RandomBitsInHex) {
  std::string a = generate_job_token();
  std::string b = generate_job_token();
  EXPECT_EQ(a.size(), 32u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos) << a;
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace canopy::launcher
