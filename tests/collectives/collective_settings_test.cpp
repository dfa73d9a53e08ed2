// The parsers behind the collectives' own settings: CANOPY_ALGO and CANOPY_COST_MODEL. Each bad value is
// Error(Config) naming the variable, the value and what it accepts.
#include <gtest/gtest.h>

#include <string>

#include "canopy/error.hpp"
#include "collectives/algorithm_overrides.hpp"
#include "collectives/link_calibration.hpp"
#include "tests/support/config_error.hpp"

namespace canopy::collectives {
namespace {

using testing::config_error_of;

TEST(AlgorithmOverrides, ANameAppliesWhereverACollectiveHasIt) {
  const auto overrides = parse_algorithm_overrides("ring");
  EXPECT_EQ(overrides.at(Collective::AllReduce), "ring");
  EXPECT_EQ(overrides.at(Collective::AllGather), "ring");
  EXPECT_EQ(overrides.count(Collective::Barrier), 0u);  // no barrier is a ring
  EXPECT_TRUE(parse_algorithm_overrides("").empty());
}

TEST(AlgorithmOverrides, PairsNameCollectivesInAnySpelling) {
  const auto overrides = parse_algorithm_overrides("all_reduce=tree,Broadcast=binomial,allgather=auto,,");
  EXPECT_EQ(overrides.at(Collective::AllReduce), "tree");
  EXPECT_EQ(overrides.at(Collective::Broadcast), "binomial");
  EXPECT_EQ(overrides.at(Collective::AllGather), "auto");
  EXPECT_EQ(parse_algorithm_overrides("all-reduce=ring").at(Collective::AllReduce), "ring");
}

TEST(AlgorithmOverrides, BadValuesSayWhatIsAccepted) {
  std::string message = config_error_of([] { parse_algorithm_overrides("allreduce=nosuch"); });
  EXPECT_MENTIONS(message, "CANOPY_ALGO='allreduce=nosuch'");
  EXPECT_MENTIONS(message, "has no algorithm 'nosuch'");
  EXPECT_MENTIONS(message, "ring");  // the known ones
  message = config_error_of([] { parse_algorithm_overrides("allsum=ring"); });
  EXPECT_MENTIONS(message, "unknown collective 'allsum'");
  EXPECT_MENTIONS(message, "allreduce");
  message = config_error_of([] { parse_algorithm_overrides("rnig"); });
  EXPECT_MENTIONS(message, "no collective has an algorithm 'rnig'");
}

TEST(CostModelSetting, ThreeOrFiveFigures) {
  const LinkModel three = parse_cost_model("5e-3,1e-9,1e-10");
  EXPECT_DOUBLE_EQ(three.alpha, 5e-3);
  EXPECT_DOUBLE_EQ(three.beta, 1e-9);
  EXPECT_DOUBLE_EQ(three.gamma, 1e-10);
  EXPECT_DOUBLE_EQ(three.beta_eager, three.beta);  // no eager rate given: the stream's
  EXPECT_EQ(three.eager_bytes, 0u);
  const LinkModel five = parse_cost_model("2e-5,1e-9,1e-10,5e-10,1048576");
  EXPECT_DOUBLE_EQ(five.beta_eager, 5e-10);
  EXPECT_EQ(five.eager_bytes, 1048576u);
}

TEST(CostModelSetting, BadValuesSayWhatIsAccepted) {
  for (const char* bad : {"fast", "1,2", "1,2,3,4", "1e-5,0,1e-10", "-1,1e-9,0", "1e-5,1e-9,1e-10x",
                          "1e-5,1e-9,1e-10,1e-9,12,7"}) {
    const std::string message = config_error_of([&] { parse_cost_model(bad); });
    EXPECT_MENTIONS(message, std::string("CANOPY_COST_MODEL='") + bad + "'");
    EXPECT_MENTIONS(message, "alpha,beta,gamma");
  }
}

}  // namespace
}  // namespace canopy::collectives
