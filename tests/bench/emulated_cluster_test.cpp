// The emulated cluster script, for real: 2 network namespaces on a bridge, links capped, one rank each,
// or two ranks each dealt round-robin. Needs root and `ip netns`; skips with the reason otherwise.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "tests/support/child_process.hpp"

namespace canopy::bench {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string why_not_runnable() {
  if (::geteuid() != 0) return "needs root to make network namespaces";
  auto probe = testing::run_shell("ip netns list", std::chrono::seconds(10));
  if (probe.exit_code != 0) return "ip netns is unavailable: " + probe.out;
  return "";
}

TEST(EmulatedCluster, RefusesWithoutACommand) {
  auto result = testing::run_shell(std::string("bash ") + EMULATED_CLUSTER_PATH + " --nodes 2",
                                   std::chrono::seconds(20));
  EXPECT_EQ(result.exit_code, 2) << result.out;
  EXPECT_TRUE(contains(result.out, "usage")) << result.out;
}

// Runs the script with `options` (and a tag of its own, canopy-bench's directory), then checks that no
// namespace of that tag is left.
testing::CommandResult run_cluster(const std::string& options, std::chrono::seconds limit) {
  const std::string tag = "t" + std::to_string(::getpid() % 100000);
  const std::string bench = CANOPY_BENCH_PATH;
  auto result = testing::run_shell(fmt::format("bash {} --tag {} --bench-dir {} {}", EMULATED_CLUSTER_PATH,
                                               tag, bench.substr(0, bench.rfind('/')), options),
                                   limit);
  auto left = testing::run_shell("ip netns list", std::chrono::seconds(10));
  EXPECT_FALSE(contains(left.out, "cnpy-" + tag)) << left.out;
  return result;
}

TEST(EmulatedCluster, TwoNodesRunABenchmarkAndLeaveNothingBehind) {
  if (std::string reason = why_not_runnable(); !reason.empty()) GTEST_SKIP() << reason;
  auto result = run_cluster("--nodes 2 --rate 200mbit -- allreduce --algo ring -b 1K -e 64K -f 64 -n 2 -w 1 --min-time 0",
                            std::chrono::seconds(60));
  EXPECT_EQ(result.exit_code, 0) << result.out;
  EXPECT_TRUE(contains(result.out, "configured 200mbit")) << result.out;
  EXPECT_TRUE(contains(result.out, "achieved")) << result.out;
  EXPECT_TRUE(contains(result.out, "Avg bus bandwidth")) << result.out;
}

// Two ranks on each node, dealt round-robin: each node's ranks share its namespace and its link, the
// benchmark sees 2 hosts, and the two-level all-reduce runs exactly beside the ring.
TEST(EmulatedCluster, TwoNodesOfTwoRanksRoundRobinRunTwoLevelsAndLeaveNothingBehind) {
  if (std::string reason = why_not_runnable(); !reason.empty()) GTEST_SKIP() << reason;
  auto result = run_cluster(
      "--nodes 2 --ranks-per-node 2 --placement round-robin --rate 200mbit --no-link-test -- allreduce "
      "--algo ring,two-level -b 1K -e 64K -f 64 -n 2 -w 1 --min-time 0",
      std::chrono::seconds(90));
  EXPECT_EQ(result.exit_code, 0) << result.out;
  EXPECT_TRUE(contains(result.out, "2 rank(s) per node (round-robin)")) << result.out;
  EXPECT_TRUE(contains(result.out, "on 4 ranks (2 hosts)")) << result.out;
  EXPECT_TRUE(contains(result.out, "two-level")) << result.out;
  EXPECT_TRUE(contains(result.out, "Avg bus bandwidth")) << result.out;
}

// --command: each rank runs the given command in its node's namespace (here, a shell that prints what it
// sees), with the launch variables set; a rank that fails fails the run and is named.
TEST(EmulatedCluster, RanksRunTheGivenCommandInTheirNamespaces) {
  if (std::string reason = why_not_runnable(); !reason.empty()) GTEST_SKIP() << reason;
  auto result = run_cluster(
      "--nodes 2 --rate 200mbit --no-link-test --command -- sh -c "
      "'echo rank $RANK of $WORLD_SIZE via $MASTER_ADDR on $GLOO_SOCKET_IFNAME; ip -4 -o addr show dev eth0'",
      std::chrono::seconds(60));
  EXPECT_EQ(result.exit_code, 0) << result.out;
  EXPECT_TRUE(contains(result.out, "rank 0 of 2 via 198.18.0.1 on eth0")) << result.out;
  EXPECT_TRUE(contains(result.out, "inet 198.18.0.1/16")) << result.out;

  auto failed = run_cluster("--nodes 2 --rate 200mbit --no-link-test --command -- sh -c 'exit $RANK'",
                            std::chrono::seconds(60));
  EXPECT_EQ(failed.exit_code, 1) << failed.out;
  EXPECT_TRUE(contains(failed.out, "rank 1 (namespace")) << failed.out;
}

}  // namespace
}  // namespace canopy::bench
