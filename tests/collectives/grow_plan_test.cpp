// The plan a grow hands its newcomers (collectives/elastic/grow_plan.hpp) reads back exactly, link figures
// included, and places each ticket's newcomer after the members.
#include "collectives/elastic/grow_plan.hpp"

#include <gtest/gtest.h>

#include "canopy/error.hpp"

namespace canopy::collectives {
namespace {

TEST(GrowPlan, ReadsBackExactly) {
  GrowPlan plan;
  plan.prefix = "canopy/comm/1/shrink/1/grow/3";
  plan.comm_id = 0x8000000000000001ull;
  plan.generation = 2;
  plan.size = 5;
  plan.first_newcomer = 3;
  plan.first_ticket = 4;
  plan.admitted = 5;
  plan.world_ranks = {0, 1, 3, 4, 5};
  plan.link = LinkModel(12e-6, 1.0 / 3e9, 1.0 / 9e9);
  plan.link.between_hosts.alpha = 40e-6;
  plan.link.gamma_in_cache = 1.0 / 20e9;
  const GrowPlan back = GrowPlan::decode(plan.encode());
  EXPECT_EQ(back.prefix, plan.prefix);
  EXPECT_EQ(back.comm_id, plan.comm_id);
  EXPECT_EQ(back.generation, 2u);
  EXPECT_EQ(back.size, 5);
  EXPECT_EQ(back.world_ranks, plan.world_ranks);
  EXPECT_EQ(back.link.within_host.alpha, plan.link.within_host.alpha);  // hex floats: bit for bit
  EXPECT_EQ(back.link.between_hosts.alpha, 40e-6);
  EXPECT_EQ(back.link.gamma, plan.link.gamma);
  EXPECT_EQ(back.link.gamma_in_cache, plan.link.gamma_in_cache);
  EXPECT_EQ(back.rank_of_ticket(4), 3);
  EXPECT_EQ(back.rank_of_ticket(5), 4);
}

TEST(GrowPlan, RefusesWhatItNeverWrote) {
  EXPECT_THROW(GrowPlan::decode("hello"), Error);
  EXPECT_THROW(GrowPlan::decode("grow\nprefix\n1 0 3 2 1 1\n0,1\n"), Error);  // 2 ranks for a group of 3
  EXPECT_THROW(GrowPlan::decode("grow\nprefix\n1 0 2 1 1 1\n0,x\na\nb\n"), Error);
}

}  // namespace
}  // namespace canopy::collectives
