// A process named by process_identity.hpp: alive while it runs, ended once it exits (a zombie included,
// and after it is reaped), never judged from another kernel or pid namespace.
#include "common/process_identity.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

namespace canopy {
namespace {

TEST(ProcessIdentity, ThisProcessIsRunning) {
  const std::string me = this_process_identity();
  ASSERT_FALSE(me.empty());
  EXPECT_EQ(process_end(me), "");
}

TEST(ProcessIdentity, AChildThatWasKilledHasEndedBeforeAndAfterItIsReaped) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const std::string me = this_process_identity();
    [[maybe_unused]] auto n = ::write(ready[1], me.data(), me.size());
    ::close(ready[1]);
    ::pause();
    ::_exit(0);
  }
  ::close(ready[1]);
  char buffer[512] = {};
  const ssize_t n = ::read(ready[0], buffer, sizeof(buffer) - 1);
  ::close(ready[0]);
  ASSERT_GT(n, 0);
  const std::string identity(buffer, static_cast<std::size_t>(n));
  EXPECT_EQ(process_end(identity), "");
  ::kill(child, SIGKILL);
  for (int i = 0; i < 1000 && process_end(identity).empty(); ++i) ::usleep(1000);
  EXPECT_NE(process_end(identity).find("has exited"), std::string::npos);  // a zombie, not yet reaped
  EXPECT_TRUE(names_process(identity, child));
  EXPECT_FALSE(names_process(identity, ::getpid()));
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_NE(process_end(identity).find("has exited"), std::string::npos) << process_end(identity);
}

TEST(ProcessIdentity, AnotherKernelOrARecordOfNoSenseIsNeverJudged) {
  EXPECT_EQ(process_end("00000000-0000-0000-0000-000000000000 pid:[1] 1 1"), "");
  EXPECT_EQ(process_end("nonsense"), "");
  EXPECT_EQ(process_end(""), "");
  EXPECT_FALSE(names_process("00000000-0000-0000-0000-000000000000 pid:[1] 1 1", 1));
  EXPECT_FALSE(names_process("nonsense", 1));
}

}  // namespace
}  // namespace canopy
