// The host layout from the ranks' entries: hosts in the order of their lowest rank, a host's cores the
// union of its ranks' CPUs (ranks bound to a core each add up; unbound ranks do not double count).
#include "collectives/host_layout_exchange.hpp"

#include <gtest/gtest.h>

#include "canopy/error.hpp"

namespace canopy::collectives {
namespace {

TEST(HostLayoutEntries, CoresAreTheUnionOfTheRanksCpus) {
  HostLayout bound = layout_from_entries({"0 node a", "1 node a", "2 node a", "3 node a", "0-15 b"});
  EXPECT_EQ(bound.host_of_rank, (std::vector<int>{0, 0, 0, 0, 1}));
  EXPECT_EQ(bound.cores_of_host, (std::vector<int>{4, 16}));
  HostLayout unbound = layout_from_entries({"0-1 a", "0-1 a", "0-1 a", "0-1 a"});
  EXPECT_EQ(unbound.cores_of_host, (std::vector<int>{2}));
  EXPECT_TRUE(unbound.shares_cores(0));
  HostLayout wrapped = layout_from_entries({"0 a", "1 a", "0 a"});  // --bind-to core, 3 ranks on 2 CPUs
  EXPECT_EQ(wrapped.cores_of_host, (std::vector<int>{2}));
}

TEST(HostLayoutEntries, AMalformedEntryNamesItsRank) {
  for (const char* bad : {"a", "x a", " a", "1-0 a"}) {
    try {
      layout_from_entries({"0 a", bad});
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::Protocol) << e.what();
    }
  }
}

}  // namespace
}  // namespace canopy::collectives
