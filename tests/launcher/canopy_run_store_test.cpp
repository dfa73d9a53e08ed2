// The store canopy-run hosts: ranks find it through the environment alone, and a restart gets a fresh round.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tests/launcher/launcher_runner.hpp"
#include "tests/support/ranks.hpp"

namespace canopy::testing {
namespace {

TEST(CanopyRunStore, RanksJoinThroughTheHostedStore) {
  LauncherResult r = run_launcher({"--nproc", "3", launcher_probe_path(), "rendezvous"}, {{"CANOPY_JOB_TOKEN", ""}});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_EQ(count_of(r.out, fmt::format("[{}] store rank={} world=3 count=3 hosted=by-launcher\n", rank, rank)),
              1)
        << r.describe();
  }
}

TEST(CanopyRunStore, ARestartedGroupMeetsInAFreshRound) {
  // Attempt 0: both ranks meet, then rank 1 fails. Attempt 1 meets again: a stale round would already hold
  // the claims and the count of attempt 0.
  TempDir barrier;
  LauncherResult r = run_launcher({"--nproc", "2", "--max-restarts", "1", launcher_probe_path(), "rendezvous",
                                   "barrier:" + barrier.path(), "fail-before-restart:1@1"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  for (int rank : {0, 1}) {
    EXPECT_EQ(count_of(r.out, fmt::format("[{}] store rank={} world=2 count=2 hosted=by-launcher\n", rank, rank)),
              2)
        << r.describe();
  }
}

TEST(CanopyRunStore, AStrangerWithoutTheTokenIsTurnedAway) {
  // The ranks are given the launcher's token; one that presents another cannot join.
  LauncherResult r = run_launcher({"--nproc", "2", "--", "/usr/bin/env", "CANOPY_JOB_TOKEN=wrong",
                                   launcher_probe_path(), "rendezvous"},
                                  {}, std::chrono::seconds(60));
  EXPECT_NE(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find("rendezvous failed"), std::string::npos) << r.describe();
}

}  // namespace
}  // namespace canopy::testing
