// The message of running out of file descriptors: the limit, the count, the need and the fix.
#include "common/fd_limit.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "canopy/error.hpp"

namespace canopy {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

rlimit current_limit() {
  rlimit limit{};
  EXPECT_EQ(::getrlimit(RLIMIT_NOFILE, &limit), 0);
  return limit;
}

// Lowers this process's soft limit for one scope; the destructor puts it back (below the hard limit,
// raising it again is allowed).
class LowerSoftLimit {
 public:
  explicit LowerSoftLimit(rlim_t soft) : saved_(current_limit()) {
    rlimit lowered = saved_;
    lowered.rlim_cur = soft;
    EXPECT_EQ(::setrlimit(RLIMIT_NOFILE, &lowered), 0);
  }
  ~LowerSoftLimit() { ::setrlimit(RLIMIT_NOFILE, &saved_); }
  LowerSoftLimit(const LowerSoftLimit&) = delete;
  LowerSoftLimit& operator=(const LowerSoftLimit&) = delete;

 private:
  rlimit saved_;
};

TEST(FdLimitMessage, ResourceIsAnErrorCodeOfItsOwn) {
  EXPECT_EQ(to_string(ErrorCode::Resource), "resource limit");
}

TEST(FdLimitMessage, CountsTheOpenDescriptors) {
  const int before = open_descriptor_count();
  ASSERT_GE(before, 0);
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  EXPECT_EQ(open_descriptor_count(), before + 2);
  ::close(fds[0]);
  ::close(fds[1]);
  EXPECT_EQ(open_descriptor_count(), before);
}

TEST(FdLimitMessage, EmfileNamesTheLimitsTheCountTheNeedAndTheFix) {
  const rlimit limit = current_limit();
  const std::string message =
      descriptor_limit_message("socket() to connect to 127.0.0.1:5", EMFILE, "this mesh needs 9 descriptors");
  EXPECT_TRUE(contains(message, "socket() to connect to 127.0.0.1:5")) << message;
  EXPECT_TRUE(contains(message, "RLIMIT_NOFILE is " + limit_text(limit.rlim_cur) + " (soft), " +
                                    limit_text(limit.rlim_max) + " (hard)"))
      << message;
  EXPECT_TRUE(contains(message, "this process has ")) << message;
  EXPECT_TRUE(contains(message, "this mesh needs 9 descriptors")) << message;
  if (limit.rlim_cur < limit.rlim_max) {
    EXPECT_TRUE(contains(message, "ulimit -n " + limit_text(limit.rlim_max)) &&
                contains(message, "canopy-run"))
        << message;
  } else {
    EXPECT_TRUE(contains(message, "hard limit")) << message;
  }
}

TEST(FdLimitMessage, EnfileNamesTheSystemTable) {
  const std::string message = descriptor_limit_message("eventfd()", ENFILE);
  EXPECT_TRUE(contains(message, "eventfd(): the system's table of open files is full")) << message;
  EXPECT_TRUE(contains(message, "fs.file-max")) << message;
}

TEST(FdLimitMessage, OnlyRunningOutIsAResourceError) {
  for (int err : {EMFILE, ENFILE}) {
    try {
      fail_descriptor_call("open()", err);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::Resource) << e.what();
      EXPECT_TRUE(contains(e.what(), "RLIMIT_NOFILE")) << e.what();
    }
  }
  try {
    fail_descriptor_call("open('/nowhere')", ENOENT);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::System);
    EXPECT_EQ(std::string(e.what()), "open('/nowhere'): No such file or directory");
  }
}

// At the limit itself, /proc/self/fd cannot be listed (that needs a descriptor too): the message says
// what EMFILE means instead of a count.
TEST(FdLimitMessage, AtTheLimitTheMessageStillSaysHowManyAreOpen) {
  const int open = open_descriptor_count();
  ASSERT_GE(open, 0);
  std::vector<int> held;
  std::string message;
  {
    LowerSoftLimit lowered(static_cast<rlim_t>(open + 4));
    for (;;) {
      int fds[2];
      if (::pipe(fds) != 0) {
        ASSERT_EQ(errno, EMFILE);
        message = descriptor_limit_message("pipe()", EMFILE);
        break;
      }
      held.insert(held.end(), {fds[0], fds[1]});
    }
    for (int fd : held) ::close(fd);
  }
  EXPECT_TRUE(contains(message, fmt::format("RLIMIT_NOFILE is {} (soft)", open + 4))) << message;
  EXPECT_TRUE(contains(message, fmt::format("this process has {} open", open + 4)) ||
              contains(message, fmt::format("this process has all {} open", open + 4)))
      << message;
}

}  // namespace
}  // namespace canopy
