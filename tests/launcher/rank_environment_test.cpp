#include "launcher/rank_environment.hpp"

#include <gtest/gtest.h>

#include <algorithm>

namespace canopy::launcher {
namespace {

TEST(RankEnvironment, NumbersRanksByNodeAndLocalIndex) {
  LaunchOptions options;
  options.nproc = 4;
  options.nnodes = 3;
  options.node_rank = 2;
  options.master_addr = "node0.example";
  options.max_restarts = 5;
  LaunchRound round{29501, "cafe", 2};
  EnvMap env =
      rank_environment({{"PATH", "/bin"}, {"RANK", "stale"}, {"CANOPY_MASTER_PORT", "1"}}, options, round, 1);

  EXPECT_EQ(env["PATH"], "/bin");
  EXPECT_EQ(env["RANK"], "9");
  EXPECT_EQ(env["CANOPY_RANK"], "9");
  EXPECT_EQ(env["WORLD_SIZE"], "12");
  EXPECT_EQ(env["CANOPY_WORLD_SIZE"], "12");
  EXPECT_EQ(env["LOCAL_RANK"], "1");
  EXPECT_EQ(env["CANOPY_LOCAL_RANK"], "1");
  EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "4");
  EXPECT_EQ(env["CANOPY_LOCAL_WORLD_SIZE"], "4");
  EXPECT_EQ(env["GROUP_RANK"], "2");
  EXPECT_EQ(env["MASTER_ADDR"], "node0.example");
  EXPECT_EQ(env["MASTER_PORT"], "29501");
  EXPECT_EQ(env["CANOPY_MASTER_PORT"], "29501");
  EXPECT_EQ(env["CANOPY_MASTER_ADDR"], "node0.example");
  EXPECT_EQ(env["CANOPY_JOB_TOKEN"], "cafe");
  EXPECT_EQ(env["CANOPY_STORE_HOSTED"], "1");
  EXPECT_EQ(env["CANOPY_RESTART_COUNT"], "2");
  EXPECT_EQ(env["TORCHELASTIC_RESTART_COUNT"], "2");
  EXPECT_EQ(env["TORCHELASTIC_MAX_RESTARTS"], "5");
  EXPECT_EQ(env.count("CANOPY_MAX_RESTARTS"), 0u);  // nothing reads it
}

// Ranks learn whether canopy-run's stderr is a terminal (their own is a pipe to it); an inherited value,
// which describes some outer launcher's stderr, is replaced either way.
TEST(RankEnvironment, SaysWhetherTheLaunchersStderrIsATerminal) {
  LaunchOptions options;
  options.nproc = 2;
  for (bool terminal : {false, true}) {
    LaunchRound round{29501, "cafe", 0, terminal};
    for (const char* inherited : {"0", "1"}) {
      EnvMap env = rank_environment({{"CANOPY_STDERR_IS_TERMINAL", inherited}}, options, round, 0);
      EXPECT_EQ(env["CANOPY_STDERR_IS_TERMINAL"], terminal ? "1" : "0") << "inherited " << inherited;
    }
  }
}

TEST(RankEnvironment, EnvpStringsAreNameEqualsValue) {
  auto strings = to_envp_strings({{"A", "1"}, {"B", "x=y"}});
  ASSERT_EQ(strings.size(), 2u);
  EXPECT_NE(std::find(strings.begin(), strings.end(), "A=1"), strings.end());
  EXPECT_NE(std::find(strings.begin(), strings.end(), "B=x=y"), strings.end());
}

}  // namespace
}  // namespace canopy::launcher
