// canopy-bench compare: matching Canopy's rows with a peer's and the ratios.
#include "bench/collectives/compare.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <stdexcept>

#include "canopy/error.hpp"
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

}  // namespace
}  // namespace canopy::bench
