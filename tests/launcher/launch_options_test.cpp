#include "launcher/launch_options.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace canopy::launcher {
namespace {

ParsedCommandLine parse(std::vector<std::string> args, const EnvMap& env = {}) {
  args.insert(args.begin(), "canopy-run");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  return parse_command_line(static_cast<int>(argv.size()), argv.data(), env);
}

TEST(LaunchOptions, SingleNodeDefaultsPickAFreeLoopbackPort) {
  auto parsed = parse({"--nproc", "4", "train", "--lr", "0.1"});
  ASSERT_TRUE(parsed.options) << parsed.message;
  const LaunchOptions& o = *parsed.options;
  EXPECT_EQ(o.nproc, 4);
  EXPECT_EQ(o.nnodes, 1);
  EXPECT_EQ(o.node_rank, 0);
  EXPECT_EQ(o.master_addr, "127.0.0.1");
  EXPECT_EQ(o.master_port, 0);
  EXPECT_EQ(o.listen_addr, "127.0.0.1");
  EXPECT_EQ(o.max_restarts, 0);
  EXPECT_EQ(o.output, OutputMode::Auto);
  EXPECT_FALSE(o.job_token);
  EXPECT_EQ(o.command, (std::vector<std::string>{"train", "--lr", "0.1"}));
}

TEST(LaunchOptions, TheProgramsOwnFlagsAreLeftAlone) {
  auto parsed = parse({"--nproc", "2", "--", "prog", "--nproc", "7", "--help"});
  ASSERT_TRUE(parsed.options) << parsed.message;
  EXPECT_EQ(parsed.options->nproc, 2);
  EXPECT_EQ(parsed.options->command, (std::vector<std::string>{"prog", "--nproc", "7", "--help"}));

  auto without_dashes = parse({"prog", "--nproc", "7"});
  ASSERT_TRUE(without_dashes.options) << without_dashes.message;
  EXPECT_EQ(without_dashes.options->nproc, 1);
  EXPECT_EQ(without_dashes.options->command, (std::vector<std::string>{"prog", "--nproc", "7"}));
}

TEST(LaunchOptions, MultiNodeUsesPort29500AndListensEverywhere) {
  auto parsed = parse({"--nproc-per-node", "8", "--nnodes", "2", "--node-rank", "1", "--master-addr",
                       "10.0.0.1", "--max-restarts", "3", "--no-prefix", "--stop-grace", "0.25", "prog"},
                      {{"CANOPY_JOB_TOKEN", "secret"}});
  ASSERT_TRUE(parsed.options) << parsed.message;
  const LaunchOptions& o = *parsed.options;
  EXPECT_EQ(o.nproc, 8);
  EXPECT_EQ(o.world_size(), 16);
  EXPECT_EQ(o.global_rank(3), 11);
  EXPECT_EQ(o.master_port, kDefaultMultiNodePort);
  EXPECT_EQ(o.listen_addr, "");
  EXPECT_EQ(o.max_restarts, 3);
  EXPECT_EQ(o.output, OutputMode::Direct);
  EXPECT_EQ(o.stop_grace, std::chrono::milliseconds(250));
  EXPECT_EQ(o.job_token, "secret");
  EXPECT_FALSE(o.hosts_store());
}

TEST(LaunchOptions, OutputIsAutoPrefixedOrDirectAndNoPrefixMeansDirect) {
  for (auto [word, mode] : {std::pair{"auto", OutputMode::Auto}, std::pair{"prefixed", OutputMode::Prefixed},
                            std::pair{"direct", OutputMode::Direct}}) {
    auto parsed = parse({"--output", word, "prog"});
    ASSERT_TRUE(parsed.options) << parsed.message;
    EXPECT_EQ(parsed.options->output, mode) << word;
  }
  auto no_prefix = parse({"--no-prefix", "prog"});
  ASSERT_TRUE(no_prefix.options) << no_prefix.message;
  EXPECT_EQ(no_prefix.options->output, OutputMode::Direct);

  auto unknown = parse({"--output", "tee", "prog"});
  EXPECT_FALSE(unknown.options);
  EXPECT_EQ(unknown.exit_code, 2);
  auto both = parse({"--no-prefix", "--output", "prefixed", "prog"});
  EXPECT_FALSE(both.options) << "--no-prefix and --output contradict each other";
  EXPECT_EQ(both.exit_code, 2);
}

TEST(LaunchOptions, HelpIsNotAnError) {
  auto parsed = parse({"--help"});
  EXPECT_FALSE(parsed.options);
  EXPECT_EQ(parsed.exit_code, 0);
  EXPECT_NE(parsed.message.find("--nproc"), std::string::npos) << parsed.message;
  EXPECT_NE(parsed.message.find("--max-restarts"), std::string::npos) << parsed.message;
}

TEST(LaunchOptions, ElasticTakesARangeThatHoldsTheJob) {
  auto parsed = parse({"--nproc", "4", "--elastic", "3:8", "--max-restarts", "2", "train"});
  ASSERT_TRUE(parsed.options) << parsed.message;
  ASSERT_TRUE(parsed.options->elastic);
  EXPECT_EQ(parsed.options->elastic->min, 3);
  EXPECT_EQ(parsed.options->elastic->max, 8);
  EXPECT_EQ(parsed.options->max_restarts, 2);
  EXPECT_FALSE(parse({"--nproc", "4", "train"}).options->elastic);
  EXPECT_TRUE(parse({"--nproc", "4", "--elastic", "4:4", "train"}).options);
}

TEST(LaunchOptions, EtcdRendezvousTakesANodeRangeAndNoPlaceOfItsOwn) {
  auto parsed = parse({"--nproc", "2", "--nnodes", "2:3", "--rdzv-backend", "etcd", "--rdzv-endpoint",
                       "10.0.0.1:2379,[::1]:2380", "--rdzv-id", "job-42", "--rdzv-conf",
                       "last_call_timeout=250ms,node_ttl=2", "train"},
                      {{"CANOPY_JOB_TOKEN", "secret"}});
  ASSERT_TRUE(parsed.options) << parsed.message;
  const LaunchOptions& o = *parsed.options;
  EXPECT_EQ(o.rdzv.backend, RdzvBackend::Etcd);
  EXPECT_EQ(o.rdzv.nodes.min, 2);
  EXPECT_EQ(o.rdzv.nodes.max, 3);
  EXPECT_EQ(o.nnodes, 3);
  EXPECT_EQ(o.rdzv.endpoints, (std::vector<std::string>{"10.0.0.1:2379", "[::1]:2380"}));
  EXPECT_EQ(o.rdzv.last_call, std::chrono::milliseconds(250));
  EXPECT_EQ(o.rdzv.node_ttl, std::chrono::seconds(2));
  EXPECT_EQ(o.rdzv.join_timeout, std::chrono::seconds(600));
  EXPECT_FALSE(o.hosts_store()) << "no node hosts a store with etcd";
  EXPECT_EQ(etcd_job_address(o.rdzv), "etcd://10.0.0.1:2379,[::1]:2380/canopy-run/job-42");

  auto fixed = parse({"--nnodes", "2", "--rdzv-backend", "etcd", "--rdzv-endpoint", "h:2379", "--rdzv-id",
                      "j", "prog"},
                     {{"CANOPY_JOB_TOKEN", "t"}});
  ASSERT_TRUE(fixed.options) << fixed.message;
  EXPECT_EQ(fixed.options->rdzv.nodes.min, 2);
  EXPECT_EQ(fixed.options->rdzv.nodes.max, 2);
}

TEST(LaunchOptions, C10dIsNodeZerosStoreAtTheEndpoint) {
  auto parsed = parse({"--nnodes", "2", "--node-rank", "1", "--rdzv-backend", "c10d", "--rdzv-endpoint",
                       "node0:29400", "--rdzv-id", "j", "prog"},
                      {{"CANOPY_JOB_TOKEN", "t"}});
  ASSERT_TRUE(parsed.options) << parsed.message;
  EXPECT_EQ(parsed.options->rdzv.backend, RdzvBackend::C10d);
  EXPECT_EQ(parsed.options->master_addr, "node0");
  EXPECT_EQ(parsed.options->master_port, 29400);
  EXPECT_FALSE(parsed.options->placement);

  auto no_backend = parse({"--nnodes", "2", "--node-rank", "0", "--rdzv-endpoint", "[::1]:29400", "prog"},
                          {{"CANOPY_JOB_TOKEN", "t"}});
  ASSERT_TRUE(no_backend.options) << no_backend.message;
  EXPECT_EQ(no_backend.options->rdzv.backend, RdzvBackend::C10d) << "an endpoint alone means c10d";
  EXPECT_EQ(no_backend.options->master_addr, "::1");
  EXPECT_TRUE(no_backend.options->hosts_store());
}

struct BadCommandLine {
  std::vector<std::string> args;
  EnvMap env;
  std::string expected_in_message;
};

class LaunchOptionsErrors : public ::testing::TestWithParam<BadCommandLine> {};

TEST_P(LaunchOptionsErrors, AreUsageErrorsThatNameTheProblem) {
  auto parsed = parse(GetParam().args, GetParam().env);
  EXPECT_FALSE(parsed.options);
  EXPECT_EQ(parsed.exit_code, 2);
  EXPECT_EQ(parsed.message.rfind("canopy-run: ", 0), 0u) << parsed.message;
  EXPECT_NE(parsed.message.find(GetParam().expected_in_message), std::string::npos) << parsed.message;
}

const EnvMap kToken{{"CANOPY_JOB_TOKEN", "t"}};

INSTANTIATE_TEST_SUITE_P(
    LaunchOptions, LaunchOptionsErrors,
    ::testing::Values(
        BadCommandLine{{}, {}, "no program given"}, BadCommandLine{{"--nproc", "2"}, {}, "no program"},
        BadCommandLine{{"--nproc", "0", "prog"}, {}, "--nproc"},
        BadCommandLine{{"--nproc", "two", "prog"}, {}, "--nproc"},
        BadCommandLine{{"--frobnicate", "prog"}, {}, "--frobnicate"},
        BadCommandLine{{"--master-port", "70000", "prog"}, {}, "--master-port"},
        BadCommandLine{{"--nnodes", "2", "--node-rank", "2", "--master-addr", "h", "prog"},
                       kToken,
                       "--node-rank 2 is out of range"},
        BadCommandLine{{"--nnodes", "2", "prog"}, kToken, "--master-addr"},
        BadCommandLine{{"--nnodes", "2", "--master-addr", "h", "prog"}, {}, "CANOPY_JOB_TOKEN"},
        BadCommandLine{
            {"--nnodes", "2", "--node-rank", "1", "--master-addr", "h", "--master-port", "0", "prog"},
            kToken,
            "real --master-port"},
        BadCommandLine{{"--elastic", "3", "prog"}, {}, "--elastic '3' is not MIN:MAX"},
        BadCommandLine{{"--elastic", "2:x", "prog"}, {}, "is not MIN:MAX"},
        BadCommandLine{{"--elastic", "0:2", "prog"}, {}, "MIN must be at least 1"},
        BadCommandLine{{"--nproc", "2", "--elastic", "3:1", "prog"}, {}, "MIN is more than MAX"},
        BadCommandLine{{"--nproc", "4", "--elastic", "5:8", "prog"},
                       {},
                       "--elastic 5:8 does not hold the job's 4 ranks"},
        BadCommandLine{{"--nproc", "4", "--elastic", "1:3", "prog"}, {}, "MIN <= 4 <= MAX"},
        BadCommandLine{{"--nnodes", "2", "--master-addr", "h", "--elastic", "1:4", "prog"},
                       kToken,
                       "--elastic needs --nnodes 1"}));

const std::vector<std::string> kEtcd{"--rdzv-backend", "etcd", "--rdzv-endpoint", "127.0.0.1:2379",
                                     "--rdzv-id", "j"};

std::vector<std::string> etcd_with(std::vector<std::string> more) {
  std::vector<std::string> args = kEtcd;
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

INSTANTIATE_TEST_SUITE_P(
    NodeRendezvous, LaunchOptionsErrors,
    ::testing::Values(
        BadCommandLine{{"--nnodes", "2:3", "prog"}, kToken, "--nnodes 2:3 needs --rdzv-backend etcd"},
        BadCommandLine{{"--nnodes", "2:3", "--rdzv-backend", "c10d", "--rdzv-endpoint", "h:1", "prog"},
                       kToken,
                       "c10d's store lives in node 0's canopy-run"},
        BadCommandLine{{"--nnodes", "3:2", "prog"}, kToken, "--nnodes 3:2: MIN is more than MAX"},
        BadCommandLine{{"--nnodes", "0:2", "prog"}, kToken, "nodes are counted from 1"},
        BadCommandLine{{"--nnodes", "two", "prog"}, kToken, "--nnodes 'two' is not N or MIN:MAX"},
        BadCommandLine{{"--rdzv-backend", "zookeeper", "prog"}, kToken, "none of etcd, c10d, static"},
        BadCommandLine{{"--nnodes", "2:3", "--rdzv-backend", "etcd", "--rdzv-id", "j", "prog"},
                       kToken,
                       "needs --rdzv-endpoint"},
        BadCommandLine{{"--rdzv-backend", "etcd", "--rdzv-endpoint", "h:2379", "prog"},
                       kToken,
                       "needs --rdzv-id"},
        BadCommandLine{etcd_with({"prog"}), {}, "needs CANOPY_JOB_TOKEN"},
        BadCommandLine{{"--rdzv-backend", "etcd", "--rdzv-endpoint", "h", "--rdzv-id", "j", "prog"},
                       kToken,
                       "--rdzv-endpoint 'h' is not HOST:PORT"},
        BadCommandLine{{"--rdzv-backend", "etcd", "--rdzv-endpoint", "h:1,", "--rdzv-id", "j", "prog"},
                       kToken,
                       "--rdzv-endpoint '' is not HOST:PORT"},
        BadCommandLine{{"--rdzv-backend", "etcd", "--rdzv-endpoint", "h:70000", "--rdzv-id", "j", "prog"},
                       kToken,
                       "is not HOST:PORT"},
        BadCommandLine{{"--rdzv-backend", "etcd", "--rdzv-endpoint", "h:1", "--rdzv-id", "a/b", "prog"},
                       kToken,
                       "--rdzv-id 'a/b' may hold only"},
        BadCommandLine{etcd_with({"--node-rank", "1", "prog"}), kToken, "--node-rank has no meaning"},
        BadCommandLine{etcd_with({"--master-addr", "h", "prog"}), kToken, "--master-addr has no meaning"},
        BadCommandLine{etcd_with({"--master-port", "1", "prog"}), kToken, "--master-port has no meaning"},
        BadCommandLine{etcd_with({"--elastic", "1:2", "--nproc", "2", "prog"}),
                       kToken,
                       "the job is elastic in nodes: --nnodes MIN:MAX"},
        BadCommandLine{etcd_with({"--rdzv-conf", "last_call=1", "prog"}), kToken, "knows no 'last_call'"},
        BadCommandLine{etcd_with({"--rdzv-conf", "node_ttl=500ms", "prog"}), kToken, "at least 1 s"},
        BadCommandLine{etcd_with({"--rdzv-conf", "join_timeout", "prog"}), kToken, "is not KEY=VALUE"},
        BadCommandLine{{"--rdzv-conf", "node_ttl=2", "prog"}, kToken, "--rdzv-conf is read with"},
        BadCommandLine{{"--rdzv-id", "j", "prog"}, kToken, "without a backend it has no use"},
        BadCommandLine{{"--nnodes", "2", "--node-rank", "0", "--rdzv-backend", "c10d", "prog"},
                       kToken,
                       "c10d needs one --rdzv-endpoint"},
        BadCommandLine{{"--nnodes", "2", "--node-rank", "0", "--rdzv-endpoint", "h:1", "--master-addr", "h",
                        "prog"},
                       kToken,
                       "name the same store"},
        BadCommandLine{{"--nnodes", "2", "--rdzv-endpoint", "h:1", "prog"},
                       kToken,
                       "c10d needs --node-rank on every node"}));

}  // namespace
}  // namespace canopy::launcher
