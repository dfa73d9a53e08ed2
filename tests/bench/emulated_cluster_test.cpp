// The emulated cluster script, for real: 2 network namespaces on a bridge, links capped, one rank each.
// Needs root and `ip netns`; skips with the reason otherwise.
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

TEST(EmulatedCluster, TwoNodesRunABenchmarkAndLeaveNothingBehind) {
  if (std::string reason = why_not_runnable(); !reason.empty()) GTEST_SKIP() << reason;
  const std::string tag = "t" + std::to_string(::getpid() % 100000);
  const std::string bench = CANOPY_BENCH_PATH;
  const std::string bench_dir = bench.substr(0, bench.rfind('/'));
  auto result =
      testing::run_shell(fmt::format("bash {} --nodes 2 --rate 200mbit --tag {} --bench-dir {} -- allreduce "
                                     "--algo ring -b 1K -e 64K -f 64 -n 2 -w 1",
                                     EMULATED_CLUSTER_PATH, tag, bench_dir),
                         std::chrono::seconds(60));
  EXPECT_EQ(result.exit_code, 0) << result.out;
  EXPECT_TRUE(contains(result.out, "configured 200mbit")) << result.out;
  EXPECT_TRUE(contains(result.out, "achieved")) << result.out;
  EXPECT_TRUE(contains(result.out, "Avg bus bandwidth")) << result.out;
  auto left = testing::run_shell("ip netns list", std::chrono::seconds(10));
  EXPECT_FALSE(contains(left.out, "cnpy-" + tag)) << left.out;
}

}  // namespace
}  // namespace canopy::bench
