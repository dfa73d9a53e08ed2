#include "launcher/rank_environment.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "canopy/error.hpp"
#include "launcher/torch_port.hpp"

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

// Across nodes on etcd the ranks' store is etcd itself: no port, and ranks placed by the member list.
TEST(RankEnvironment, NodesOnEtcdGetTheStoreAddressAndTheirPlaceInTheList) {
  LaunchOptions options;
  options.nproc = 2;
  options.nnodes = 3;
  options.rdzv.backend = RdzvBackend::Etcd;
  options.rdzv.nodes = ElasticRange{2, 3};
  options.elastic = ElasticRange{1, 2};  // this node's own ranks, as canopy-run sets it
  options.placement =
      NodePlacement{1, 2, 6, false, "etcd://e1:2379/canopy-run/job", ElasticRange{4, 6}};
  LaunchRound round{0, "cafe", 0};
  const EnvMap base{{"MASTER_PORT", "29500"}, {"CANOPY_MASTER_PORT", "1"}, {"CANOPY_ELASTIC_JOIN", "1"}};
  EnvMap env = rank_environment(base, options, round, 1);
  EXPECT_EQ(env["RANK"], "3");
  EXPECT_EQ(env["WORLD_SIZE"], "6");
  EXPECT_EQ(env["LOCAL_RANK"], "1");
  EXPECT_EQ(env["GROUP_RANK"], "1");
  EXPECT_EQ(env["MASTER_ADDR"], "etcd://e1:2379/canopy-run/job");
  EXPECT_EQ(env["CANOPY_MASTER_ADDR"], "etcd://e1:2379/canopy-run/job");
  EXPECT_EQ(env.count("MASTER_PORT"), 0u) << "an etcd store has no port of its own";
  EXPECT_EQ(env.count("CANOPY_MASTER_PORT"), 0u);
  EXPECT_EQ(env["CANOPY_ELASTIC"], "4:6") << "the job's range in ranks, not this node's";
  EXPECT_EQ(env.count("CANOPY_ELASTIC_JOIN"), 0u) << "a member of the list forms the group";

  options.placement->joins = true;  // a node that came after the list was fixed
  EXPECT_EQ(rank_environment(base, options, round, 0)["CANOPY_ELASTIC_JOIN"], "1");
}

// Every rank of an elastic job learns its range; a replacement also that it joins, and how many came before.
TEST(RankEnvironment, ElasticRanksGetTheRangeAndAReplacementJoins) {
  LaunchOptions options;
  options.nproc = 4;
  options.elastic = ElasticRange{3, 4};
  const EnvMap inherited{{"CANOPY_ELASTIC_JOIN", "1"}, {"CANOPY_ELASTIC", "1:99"}};
  EnvMap first = rank_environment(inherited, options, LaunchRound{29501, "cafe", 0}, 2);
  EXPECT_EQ(first["CANOPY_ELASTIC"], "3:4");
  EXPECT_EQ(first.count("CANOPY_ELASTIC_JOIN"), 0u);  // an outer job's value would make it join
  EnvMap replacement =
      rank_environment(inherited, options, LaunchRound{29501, "cafe", 2}, 2, RankStart::Replacement);
  EXPECT_EQ(replacement["CANOPY_ELASTIC"], "3:4");
  EXPECT_EQ(replacement["CANOPY_ELASTIC_JOIN"], "1");
  EXPECT_EQ(replacement["CANOPY_RESTART_COUNT"], "2");
  EXPECT_EQ(replacement["TORCHELASTIC_RESTART_COUNT"], "2");
  EXPECT_EQ(replacement["RANK"], "2");  // the dead rank's; the grow decides its rank in the group
  EXPECT_EQ(replacement["LOCAL_RANK"], "2");
  EXPECT_EQ(replacement["WORLD_SIZE"], "4");

  options.elastic.reset();
  EnvMap fixed = rank_environment(inherited, options, LaunchRound{29501, "cafe", 0}, 2);
  EXPECT_EQ(fixed.count("CANOPY_ELASTIC"), 0u);
  EXPECT_EQ(fixed.count("CANOPY_ELASTIC_JOIN"), 0u);
}

// torch's env:// rendezvous has rank 0 listen on MASTER_PORT: never the port canopy-run's store holds.
TEST(RankEnvironment, PointsTorchAtAPortOfItsOwn) {
  LaunchOptions options;
  options.nproc = 2;
  LaunchRound round{29501, "cafe", 0};
  round.torch_master_port = 40123;
  EnvMap env = rank_environment({}, options, round, 0);
  EXPECT_EQ(env["CANOPY_MASTER_PORT"], "29501");
  EXPECT_EQ(env["MASTER_PORT"], "40123");
}

// Ranks count their start-up from canopy-run's own start, unless a script gave canopy-run an earlier launch.
TEST(RankEnvironment, CarriesTheLaunchTimeUnlessGivenOne) {
  LaunchOptions options;
  options.nproc = 2;
  LaunchRound round{29501, "cafe", 0};
  round.launch_ns = 1'765'000'000'123'456'789;
  EXPECT_EQ(rank_environment({}, options, round, 0)["CANOPY_PROBE_LAUNCH_NS"], "1765000000123456789");
  EXPECT_EQ(rank_environment({{"CANOPY_PROBE_LAUNCH_NS", ""}}, options, round, 0)["CANOPY_PROBE_LAUNCH_NS"],
            "1765000000123456789");  // empty counts as unset
  EXPECT_EQ(rank_environment({{"CANOPY_PROBE_LAUNCH_NS", "1765000000000000000"}}, options, round, 1)
                .at("CANOPY_PROBE_LAUNCH_NS"),
            "1765000000000000000");
  EXPECT_EQ(rank_environment({}, options, LaunchRound{29501, "cafe", 0}, 0).count("CANOPY_PROBE_LAUNCH_NS"),
            0u);
}

TEST(TorchMasterPort, IsAFreePortOnOneNodeAndTheStoresNextOnSeveral) {
  LaunchOptions one_node;
  const std::uint16_t port = torch_master_port(one_node, 29501);
  EXPECT_GT(port, 0);
  EXPECT_NE(port, 29501);
  LaunchOptions two_nodes;
  two_nodes.nnodes = 2;
  EXPECT_EQ(torch_master_port(two_nodes, 29501), 29502);  // every node computes the same
  EXPECT_THROW(torch_master_port(two_nodes, 65535), Error);
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
