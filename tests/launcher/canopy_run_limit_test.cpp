// canopy-run raises the soft RLIMIT_NOFILE of its ranks to the hard limit, saying so only when asked.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <fstream>
#include <string>

#include "tests/launcher/launcher_runner.hpp"

namespace canopy::testing {
namespace {

// What the ranks should see: the hard limit, or the kernel's ceiling when that is unlimited.
std::string expected_soft_limit(const rlimit& limit) {
  if (limit.rlim_max != RLIM_INFINITY) return std::to_string(limit.rlim_max);
  std::ifstream nr_open("/proc/sys/fs/nr_open");
  std::string value;
  nr_open >> value;
  return value;
}

// canopy-run under `ulimit -S -n 256`, its two ranks printing the soft limit they got.
CommandResult run_with_a_low_soft_limit(const std::string& debug) {
  return run_shell(fmt::format("ulimit -S -n 256 && CANOPY_DEBUG={} exec '{}' --nproc 2 /bin/sh -c 'echo "
                               "soft=$(ulimit -S -n)'",
                               debug, canopy_run_path()),
                   std::chrono::seconds(30));
}

TEST(CanopyRunLimit, RanksGetTheHardLimitAsTheirSoftLimit) {
  rlimit limit{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &limit), 0);
  if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max <= 256)
    GTEST_SKIP() << "hard limit " << limit.rlim_max;
  const std::string soft = expected_soft_limit(limit);
  CommandResult r = run_with_a_low_soft_limit("WARN");
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(count_of(r.out, "soft=" + soft + "\n"), 2) << "expected soft=" << soft << "\n" << r.describe();
  EXPECT_EQ(count_of(r.out, "RLIMIT_NOFILE"), 0) << "the raise is said at CANOPY_DEBUG=INFO only\n"
                                                 << r.describe();
}

TEST(CanopyRunLimit, SaysOnceAtInfoWhatItRaised) {
  rlimit limit{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &limit), 0);
  if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max <= 256)
    GTEST_SKIP() << "hard limit " << limit.rlim_max;
  CommandResult r = run_with_a_low_soft_limit("INFO");
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(
      count_of(r.out, "canopy-run: raised the ranks' file descriptor limit (RLIMIT_NOFILE) from 256 to " +
                          expected_soft_limit(limit)),
      1)
      << r.describe();
}

}  // namespace
}  // namespace canopy::testing
