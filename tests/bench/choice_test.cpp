// canopy-bench choice: auto's measured time against the fastest explicit algorithm's.
#include "bench/collectives/choice.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

namespace canopy::bench {
namespace {

nlohmann::ordered_json row(const std::string& requested, const std::string& ran, std::uint64_t bytes, double time_us) {
  return {{"collective", "allreduce"}, {"algo", ran},         {"requested_algo", requested},
          {"bytes", bytes},            {"ranks", 4},          {"in_place", false},
          {"time_us", time_us},        {"predicted_time_us", 1.0}};
}

TEST(Choice, SetsAutoBesideTheFastestExplicitAlgorithmPerSize) {
  nlohmann::ordered_json rows = {row("ring", "ring", 8, 40),         row("tree", "tree", 8, 20),
                                 row("auto", "ring", 8, 41),         row("ring", "ring", 1024, 50),
                                 row("auto", "ring", 1024, 50),      row("tree", "tree", 4096, 9)};
  std::string table = choice_table(rows);
  EXPECT_NE(table.find("2.05"), std::string::npos) << table;  // 41 / 20 at 8 bytes: the wrong choice
  EXPECT_NE(table.find("1.00"), std::string::npos) << table;  // 50 / 50 at 1 KiB
  EXPECT_EQ(table.find("4096"), std::string::npos) << table;  // no auto row at 4 KiB
  EXPECT_NE(table.find("over 2 sizes: geometric mean 1.43, worst 2.05"), std::string::npos) << table;
}

TEST(Choice, ASweepWithoutAutoIsAnError) {
  EXPECT_THROW(choice_table(nlohmann::ordered_json::array({row("ring", "ring", 8, 1)})), std::invalid_argument);
}

}  // namespace
}  // namespace canopy::bench
