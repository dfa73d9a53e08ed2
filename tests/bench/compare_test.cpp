// canopy-bench compare: matching Canopy's rows with a peer's and the ratios.
#include "bench/collectives/compare.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <stdexcept>

#include "canopy/error.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/ranks.hpp"

namespace canopy::bench {
namespace {

nlohmann::ordered_json row(const std::string& algo, std::uint64_t bytes, double time_us, double busbw) {
  return {{"collective", "allreduce"}, {"algo", algo},       {"bytes", bytes}, {"ranks", 2},
          {"time_us", time_us},        {"busbw_gbps", busbw}};
}

TEST(Compare, TakesCanopysFastestAlgorithmAndDividesByThePeer) {
  nlohmann::ordered_json ours = {row("ring", 4, 20, 0.1), row("tree", 4, 10, 0.2), row("ring", 8, 5, 1)};
  ours[1]["ceiling_busbw_gbps"] = 0.4;
  nlohmann::ordered_json theirs = {row("openmpi", 4, 13, 0.15)};
  std::string table = compare_table(ours, theirs, "mpi");
  EXPECT_NE(table.find("tree"), std::string::npos) << table;
  EXPECT_NE(table.find("0.77"), std::string::npos) << table;  // time 10 / 13
  EXPECT_NE(table.find("1.33"), std::string::npos) << table;  // busbw 0.2 / 0.15
  EXPECT_NE(table.find(" 50 "), std::string::npos) << table;  // 0.2 of a 0.4 ceiling
  EXPECT_EQ(table.find(" 8 "), std::string::npos) << table;   // no peer row at 8 bytes
}

TEST(Compare, NothingInCommonIsAnError) {
  EXPECT_THROW(compare_table(nlohmann::ordered_json::array({row("ring", 4, 1, 1)}),
                             nlohmann::ordered_json::array({row("x", 8, 1, 1)}), "mpi"),
               std::invalid_argument);
}

TEST(Compare, ReadsRowsAndNamesABadFile) {
  canopy::testing::TempDir dir;
  std::ofstream(dir.path() + "/rows.json") << R"([{"collective": "allreduce"}])";
  std::ofstream(dir.path() + "/bad.json") << "{not json";
  EXPECT_EQ(read_rows(dir.path() + "/rows.json").size(), 1u);
  EXPECT_THROW(read_rows(dir.path() + "/bad.json"), Error);
  EXPECT_THROW(read_rows(dir.path() + "/missing.json"), Error);
}

// compare.sh --repeat: the median of the rounds' ratios, every round's ratio beside it; a round whose
// fixed CPU work moved by more than 20% around its runs is marked and left out of the steady median.
TEST(Compare, MedianRatiosOverRounds) {
  canopy::testing::TempDir dir;
  const double canopy_us[] = {10, 30, 12};
  const char* mpi_cpu_ms[] = {"34 35", "35 70", "33 34"};  // round 2's CPU halved its speed
  for (int round = 0; round < 3; ++round) {
    const std::string round_dir = dir.path() + "/round-" + std::to_string(round + 1);
    ASSERT_EQ(testing::run_shell("mkdir -p " + round_dir).exit_code, 0);
    std::ofstream(round_dir + "/canopy-allreduce-2.json")
        << nlohmann::ordered_json{row("tree", 4, canopy_us[round], 0)};
    std::ofstream(round_dir + "/mpi-allreduce-2.json") << nlohmann::ordered_json{row("openmpi", 4, 20, 0)};
    std::ofstream(round_dir + "/cpu-canopy-allreduce-2.txt") << "34 34\n";
    std::ofstream(round_dir + "/cpu-mpi-allreduce-2.txt") << mpi_cpu_ms[round] << "\n";
  }
  const auto result = testing::run_shell("python3 " CANOPY_SOURCE_DIR "/bench/compare/median-ratios.py " +
                                         dir.path() + "/round-*");
  ASSERT_EQ(result.exit_code, 0) << result.out;
  // Ratios 0.5, 1.5, 0.6: median 0.6; median times 12 and 20; steady rounds 0.5 and 0.6: 0.55.
  EXPECT_NE(result.out.find("tree       12.0       20.0         0.60    0.55  0.50 1.50~ 0.60"),
            std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find("0.60  [0.50, 1.50]"), std::string::npos) << result.out;  // the bootstrap interval
  EXPECT_NE(result.out.find("1 row-rounds met a CPU whose speed moved"), std::string::npos) << result.out;
  EXPECT_NE(testing::run_shell("python3 " CANOPY_SOURCE_DIR "/bench/compare/median-ratios.py " + dir.path())
                .exit_code,
            0);
}

}  // namespace
}  // namespace canopy::bench
