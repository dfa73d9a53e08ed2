// canopy-run raises the soft RLIMIT_NOFILE of its ranks to the hard limit, saying so only when asked; under a
// low hard limit, --output auto gives up the "[rank] " prefixes (2 pipes per rank) when they and the store's
// connections would not fit, saying why.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <fstream>
#include <map>
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

// canopy-run under a soft and hard limit of 256 descriptors; exit status 125 when the shell cannot set it.
CommandResult run_under_256(const std::string& arguments) {
  return run_shell(fmt::format("ulimit -S -n 256 && ulimit -H -n 256 || exit 125; exec '{}' {}",
                               canopy_run_path(), arguments),
                   std::chrono::seconds(60));
}

// 100 ranks under 256: prefixed would need 200 pipes beside the store's 100 connections (1 per rank); the
// ranks write to canopy-run's own streams instead, and each one still joins the store and meets the rest.
TEST(CanopyRunLimit, AutoWritesDirectlyWhenThePipesAndTheStoreDoNotFitAndSaysWhy) {
  CommandResult r = run_under_256(fmt::format("--nproc 100 '{}' rendezvous", launcher_probe_path()));
  if (r.exit_code == 125) GTEST_SKIP() << "cannot set the limit to 256: " << r.describe();
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  std::map<std::string, int> lines;
  for (const std::string& line : lines_of(r.out)) ++lines[line];
  for (int rank = 0; rank < 100; ++rank) {
    EXPECT_EQ(lines[fmt::format("store rank={} world=100 count=100 hosted=by-launcher", rank)], 1)
        << "rank " << rank << "\n"
        << r.describe();
  }
  EXPECT_EQ(count_of(r.out, "[0] "), 0) << "no prefixes\n" << r.describe();
  EXPECT_EQ(count_of(r.out,
                     "canopy-run: 100 ranks write straight to canopy-run's stdout and stderr, without "
                     "\"[rank] \" prefixes: prefixing them needs 200 pipes (2 per rank), 100 store "
                     "connections (1 per rank), canopy-run's own "),
            1)
      << r.describe();
  EXPECT_EQ(count_of(r.out, "over the limit of 256 (RLIMIT_NOFILE); to keep the prefixes, raise the limit"),
            1)
      << r.describe();
  EXPECT_EQ(count_of(r.out, "warning"), 0) << "the store's 100 connections fit without the pipes\n"
                                           << r.describe();
}

// 40 ranks under 256: 80 pipes + 40 store connections fit, with room to spare: the prefixes stay.
TEST(CanopyRunLimit, AutoKeepsThePrefixesWhileTheyFit) {
  CommandResult r = run_under_256("--nproc 40 /bin/sh -c 'echo rank=$RANK limit=$(ulimit -n)'");
  if (r.exit_code == 125) GTEST_SKIP() << "cannot set the limit to 256: " << r.describe();
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  for (int rank = 0; rank < 40; ++rank)
    EXPECT_EQ(count_of(r.out, fmt::format("[{}] rank={} limit=256\n", rank, rank)), 1) << r.describe();
  EXPECT_EQ(count_of(r.out, "canopy-run:"), 0) << r.describe();
}

// --output prefixed is obeyed while its pipes fit, and refused before any rank starts when they cannot.
TEST(CanopyRunLimit, PrefixedThatCannotFitItsPipesStartsNoRank) {
  CommandResult r = run_under_256("--output prefixed --nproc 128 /bin/sh -c 'echo started'");
  if (r.exit_code == 125) GTEST_SKIP() << "cannot set the limit to 256: " << r.describe();
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_EQ(count_of(r.out, "started"), 0) << r.describe();
  EXPECT_EQ(count_of(r.out, "canopy-run: --output prefixed for 128 ranks needs 256 pipes (2 per rank)"), 1)
      << r.describe();
  EXPECT_EQ(count_of(r.out, "over the limit of 256 (RLIMIT_NOFILE)"), 1) << r.describe();
}

}  // namespace
}  // namespace canopy::testing
