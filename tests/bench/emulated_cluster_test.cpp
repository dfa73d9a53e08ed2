// The emulated cluster script, for real: 2 network namespaces on a bridge, links capped, one rank each,
// or two ranks each dealt round-robin.
// Needs root and `ip netns`; skips with the reason otherwise.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "tests/bench/command.hpp"

namespace canopy::bench {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string why_not_runnable() {
  if (::geteuid() != 0) return "needs root to make network namespaces";
  auto probe = testing::run_command("ip netns list", 10);
  if (probe.exit_code != 0) return "ip netns is unavailable: " + probe.output;
  return "";
}

TEST(EmulatedCluster, RefusesWithoutACommand) {
  auto result = testing::run_command(std::string("bash ") + EMULATED_CLUSTER_PATH + " --nodes 2", 20);
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_TRUE(contains(result.output, "usage")) << result.output;
}

// Runs the script with `options` (and a tag of its own, canopy-bench's directory), then checks that no
// namespace of that tag is left.
testing::CommandResult run_cluster(const std::string& options, int timeout_seconds) {
  const std::string tag = "t" + std::to_string(::getpid() % 100000);
  const std::string bench = CANOPY_BENCH_PATH;
  auto result = testing::run_command(fmt::format("bash {} --tag {} --bench-dir {} {}", EMULATED_CLUSTER_PATH,
                                                 tag, bench.substr(0, bench.rfind('/')), options),
                                     timeout_seconds);
  auto left = testing::run_command("ip netns list", 10);
  EXPECT_FALSE(contains(left.output, "cnpy-" + tag)) << left.output;
  return result;
}

TEST(EmulatedCluster, TwoNodesRunABenchmarkAndLeaveNothingBehind) {
  if (std::string reason = why_not_runnable(); !reason.empty()) GTEST_SKIP() << reason;
  auto result =
      run_cluster("--nodes 2 --rate 200mbit -- allreduce --algo ring -b 1K -e 64K -f 64 -n 2 -w 1", 60);
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(contains(result.output, "configured 200mbit")) << result.output;
  EXPECT_TRUE(contains(result.output, "achieved")) << result.output;
  EXPECT_TRUE(contains(result.output, "Avg bus bandwidth")) << result.output;
}

// Two ranks on each node, dealt round-robin: each node's ranks share its namespace and its link, the
// benchmark sees 2 hosts, and the two-level all-reduce runs exactly beside the ring.
TEST(EmulatedCluster, TwoNodesOfTwoRanksRoundRobinRunTwoLevelsAndLeaveNothingBehind) {
  if (std::string reason = why_not_runnable(); !reason.empty()) GTEST_SKIP() << reason;
  auto result = run_cluster(
      "--nodes 2 --ranks-per-node 2 --placement round-robin --rate 200mbit --no-link-test -- allreduce "
      "--algo ring,two-level -b 1K -e 64K -f 64 -n 2 -w 1",
      90);
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(contains(result.output, "2 rank(s) per node (round-robin)")) << result.output;
  EXPECT_TRUE(contains(result.output, "on 4 ranks (2 hosts)")) << result.output;
  EXPECT_TRUE(contains(result.output, "two-level")) << result.output;
  EXPECT_TRUE(contains(result.output, "Avg bus bandwidth")) << result.output;
}

}  // namespace
}  // namespace canopy::bench
