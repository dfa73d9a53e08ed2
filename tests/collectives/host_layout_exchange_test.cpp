// The host layout from the ranks' entries: hosts in the order of their lowest rank, a host's cores the
// union of its ranks' CPUs (ranks bound to a core each add up; unbound ranks do not double count); and the
// verbs verdict that travels with it.
#include "collectives/forming/host_layout_exchange.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "canopy/error.hpp"
#include "tests/transport/memory_store.hpp"

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

TEST(HostLayoutVerbsVerdict, EveryRankMustSayYesForVerbs) {
  EXPECT_EQ(verbs_verdict_of({"1", "1", "1"}), "1");
  EXPECT_EQ(verbs_verdict_of({"1", "0no RDMA device: none", "0no RDMA device: other"}),
            "1:no RDMA device: none");
  EXPECT_EQ(verbs_verdict_of({"", "", ""}), "");  // nobody asks: not auto
  const std::string silent = verbs_verdict_of({"1", "1", ""});
  EXPECT_EQ(silent.rfind("2:", 0), 0u) << silent;
  EXPECT_NE(silent.find("CANOPY_TRANSPORT"), std::string::npos) << silent;
}

// Every rank learns the same layout and the same verdict from the one exchange of records, a reason with
// a newline in it included, and reads other records in the same request where it asks.
TEST(HostLayoutVerbsVerdict, EveryRankLearnsTheSameVerdictWithTheLayout) {
  constexpr int kRanks = 3;
  testing::MemoryStore store;
  std::vector<LayoutAgreement> agreed(kRanks);
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < kRanks; ++rank)
    ranks.emplace_back([&, rank] {
      RankRecord record;
      record.verbs = rank == 1 ? "0no RDMA device:\nnone here" : "1";
      record.listeners = fmt::format("space {}", rank);
      // Ranks 1 and 2 read each other's record with the layout.
      const std::vector<std::string> also =
          rank == 0 ? std::vector<std::string>{} : std::vector<std::string>{rank_record_key(3 - rank)};
      agreed[static_cast<std::size_t>(rank)] =
          exchange_host_layout(store, rank, kRanks, rank == 2 ? "b" : "a", {rank}, record, also);
    });
  for (std::thread& t : ranks) t.join();
  EXPECT_EQ(agreed[0].records.size(), 3u);
  for (int rank : {1, 2}) {
    const std::vector<std::string>& also = agreed[static_cast<std::size_t>(rank)].also_read;
    ASSERT_EQ(also.size(), 1u);
    EXPECT_EQ(listeners_in_record(also[0], 3 - rank), fmt::format("space {}", 3 - rank));
  }
  for (const LayoutAgreement& a : agreed) {
    EXPECT_EQ(a.verbs_verdict, "1:no RDMA device: none here");
    EXPECT_EQ(a.layout.host_of_rank, (std::vector<int>{0, 0, 1}));
    EXPECT_EQ(a.layout.cores_of_host, (std::vector<int>{2, 1}));
  }
}

}  // namespace
}  // namespace canopy::collectives
