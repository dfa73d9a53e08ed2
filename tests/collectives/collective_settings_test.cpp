// The parsers behind the collectives' own settings: CANOPY_ALGO and CANOPY_COST_MODEL. Each bad value is
// Error(Config) naming the variable, the value and what it accepts.
#include <gtest/gtest.h>

#include <string>

#include "canopy/error.hpp"
#include "collectives/selection/algorithm_overrides.hpp"
#include "collectives/selection/link_calibration.hpp"
#include "collectives/selection/link_model_text.hpp"
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

// CANOPY_ALGO=two-level takes the two levels for the three collectives that have them.
TEST(AlgorithmOverrides, TwoLevelNamesTheAllReduceBroadcastAndReduce) {
  const auto overrides = parse_algorithm_overrides("two-level");
  EXPECT_EQ(overrides.size(), 3u);
  for (Collective c : {Collective::AllReduce, Collective::Broadcast, Collective::Reduce})
    EXPECT_EQ(overrides.at(c), "two-level") << to_string(c);
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
  EXPECT_DOUBLE_EQ(three.within_host.alpha, 5e-3);
  EXPECT_DOUBLE_EQ(three.within_host.beta, 1e-9);
  EXPECT_DOUBLE_EQ(three.gamma, 1e-10);
  EXPECT_DOUBLE_EQ(three.within_host.beta_eager,
                   three.within_host.beta);  // no eager rate given: the stream's
  EXPECT_EQ(three.within_host.eager_bytes, 0u);
  EXPECT_DOUBLE_EQ(three.between_hosts.beta, 1e-9);  // one group sets every link
  const LinkModel five = parse_cost_model("2e-5,1e-9,1e-10,5e-10,1048576");
  EXPECT_DOUBLE_EQ(five.within_host.beta_eager, 5e-10);
  EXPECT_EQ(five.within_host.eager_bytes, 1048576u);
  EXPECT_EQ(five.between_hosts.eager_bytes, 1048576u);
}

// A second group after ';' sets the links between hosts apart.
TEST(CostModelSetting, ASecondGroupSetsTheLinksBetweenHosts) {
  const LinkModel two = parse_cost_model("2e-5,1e-9,1e-10;1e-4,4e-8");
  EXPECT_DOUBLE_EQ(two.within_host.alpha, 2e-5);
  EXPECT_DOUBLE_EQ(two.between_hosts.alpha, 1e-4);
  EXPECT_DOUBLE_EQ(two.between_hosts.beta, 4e-8);
  EXPECT_DOUBLE_EQ(two.between_hosts.beta_eager, 4e-8);
  const LinkModel both = parse_cost_model("2e-5,1e-9,1e-10,5e-10,1048576;1e-4,4e-8,2e-8,65536");
  EXPECT_DOUBLE_EQ(both.between_hosts.beta_eager, 2e-8);
  EXPECT_EQ(both.between_hosts.eager_bytes, 65536u);
  EXPECT_EQ(both.within_host.eager_bytes, 1048576u);
}

// What rank 0 shares through the store comes back exactly, the share of alpha on a core included; a share
// outside 0-1 is refused.
TEST(CostModelSetting, TheStoresTextCarriesEveryFigureExactly) {
  MeasuredLink measured;
  measured.link = LinkCost{1.25e-6, 1.0 / 3e9, 1.0 / 7e9, 1 << 20, 0.375};
  measured.gamma = 1.0 / 11e9;
  measured.gamma_in_cache = 1.0 / 47e9;
  const MeasuredLink back = decode_measured_link(encode(measured));
  EXPECT_EQ(back.link.alpha, measured.link.alpha);
  EXPECT_EQ(back.link.beta, measured.link.beta);
  EXPECT_EQ(back.link.beta_eager, measured.link.beta_eager);
  EXPECT_EQ(back.link.eager_bytes, measured.link.eager_bytes);
  EXPECT_EQ(back.link.alpha_share_on_core, measured.link.alpha_share_on_core);
  EXPECT_EQ(back.gamma, measured.gamma);
  EXPECT_EQ(back.gamma_in_cache, measured.gamma_in_cache);
  EXPECT_THROW(decode_measured_link("0x1p+0,0x1p+0,0x1p+0,0x1p+0,5"), Error);
  EXPECT_THROW(decode_measured_link("0x1p+0,0x1p+0,0x1p+0,0x1p+0,5,0x1.8p+0,0x1p+0"), Error);
}

TEST(CostModelSetting, BadValuesSayWhatIsAccepted) {
  for (const char* bad : {"fast", "1,2", "1,2,3,4", "1e-5,0,1e-10", "-1,1e-9,0", "1e-5,1e-9,1e-10x",
                          "1e-5,1e-9,1e-10,1e-9,12,7", "1e-5,1e-9,1e-10;1e-4", "1e-5,1e-9,1e-10;1e-4,0",
                          "1e-5,1e-9,1e-10;1e-4,1e-9,1e-10"}) {
    const std::string message = config_error_of([&] { parse_cost_model(bad); });
    EXPECT_MENTIONS(message, std::string("CANOPY_COST_MODEL='") + bad + "'");
    EXPECT_MENTIONS(message, "alpha,beta,gamma");
  }
}

}  // namespace
}  // namespace canopy::collectives
