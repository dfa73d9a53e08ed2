// Algorithms on ranks spread over hosts: every algorithm exact on layouts from 1x1 to 4x4, ranks dealt
// in blocks or round-robin, and uneven hosts; the two-level all-reduce bit-identical everywhere; rings
// and chains that cross between hosts once per host whatever the rank numbering; the bytes each host's
// network link carries; and the model's two classes of links.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "collectives/selection/cost_model.hpp"
#include "collectives/schedules/algorithms.hpp"
#include "collectives/schedules/host_groups.hpp"
#include "collectives/schedules/simulator.hpp"
#include "tests/schedules/schedule_test_support.hpp"
#include "tests/schedules/algorithm_list.hpp"
#include "tests/support/oracle.hpp"

namespace canopy::collectives {
namespace {

using schedule_tests::algorithm;
using schedule_tests::zeros;

using Layout = std::shared_ptr<const HostLayout>;

// Hosts of `ranks[h]` ranks, filled in blocks (ranks 0..a-1 on host 0, ...) or dealt round-robin
// (skipping hosts that are full).
Layout hosts_of(const std::vector<int>& ranks, bool round_robin = false) {
  HostLayout layout;
  layout.cores_of_host.assign(ranks.size(), 64);
  if (!round_robin) {
    for (std::size_t h = 0; h < ranks.size(); ++h)
      layout.host_of_rank.insert(layout.host_of_rank.end(), static_cast<std::size_t>(ranks[h]),
                                 static_cast<int>(h));
  } else {
    std::vector<int> left = ranks;
    const std::size_t total = static_cast<std::size_t>(std::accumulate(ranks.begin(), ranks.end(), 0));
    for (std::size_t turn = 0; layout.host_of_rank.size() < total; ++turn) {
      const std::size_t h = turn % ranks.size();
      if (left[h] == 0) continue;
      --left[h];
      layout.host_of_rank.push_back(static_cast<int>(h));
    }
  }
  return std::make_shared<const HostLayout>(std::move(layout));
}

struct NamedLayout {
  std::string name;
  Layout hosts;
};

// 1x1 to 4x4 in blocks, the same dealt round-robin where that differs, and uneven hosts.
std::vector<NamedLayout> every_layout() {
  std::vector<NamedLayout> layouts;
  for (int hosts = 1; hosts <= 4; ++hosts) {
    for (int each = 1; each <= 4; ++each) {
      const std::vector<int> ranks(static_cast<std::size_t>(hosts), each);
      layouts.push_back({fmt::format("{}x{}", hosts, each), hosts_of(ranks)});
      if (hosts > 1 && each > 1)
        layouts.push_back({fmt::format("{}x{} round-robin", hosts, each), hosts_of(ranks, true)});
    }
  }
  for (const std::vector<int>& uneven :
       std::vector<std::vector<int>>{{3, 1}, {1, 3}, {4, 2, 2}, {2, 3, 1}, {1, 1, 2}, {5, 2}, {2, 4, 1, 3}}) {
    layouts.push_back({fmt::format("{}", fmt::join(uneven, "+")), hosts_of(uneven)});
    layouts.push_back({fmt::format("{} round-robin", fmt::join(uneven, "+")), hosts_of(uneven, true)});
  }
  return layouts;
}

int ranks_of(const Layout& hosts) {
  return static_cast<int>(hosts->host_of_rank.size());
}

int hosts_in(const Layout& hosts) {
  CollectiveCall call{Collective::AllReduce, 0, ranks_of(hosts), 0, 0, 1};
  call.hosts = hosts;
  return HostGroups(call).hosts();
}

class EveryAlgorithmOnHosts : public ::testing::TestWithParam<const Algorithm*> {};

// Exact against the reference on every layout, in place and out of place, every root of the small
// layouts, counts around the number of ranks and slices, small and large chunks.
TEST_P(EveryAlgorithmOnHosts, MatchesTheReferenceOnEveryLayout) {
  const Algorithm& a = *GetParam();
  testing::Random random(7);
  int cases = 0;
  for (const NamedLayout& layout : every_layout()) {
    const int p = ranks_of(layout.hosts);
    const bool rooted = a.collective == Collective::Broadcast || a.collective == Collective::Reduce;
    std::vector<int> roots{0};
    if (rooted)
      roots = p <= 6 ? all_ranks(CollectiveCall{a.collective, 0, p}) : std::vector<int>{0, 1, p / 2, p - 1};
    const std::vector<std::uint64_t> counts =
        a.collective == Collective::Barrier
            ? std::vector<std::uint64_t>{0}
            : std::vector<std::uint64_t>{0, 1, static_cast<std::uint64_t>(p + 1), 101};
    for (std::uint64_t count : counts) {
      for (std::uint64_t chunk : {std::uint64_t{3}, std::uint64_t{1} << 20}) {
        for (int root : roots) {
          for (bool in_place : {true, false}) {
            CollectiveCall call{a.collective, 0, p, count, root, chunk, in_place};
            call.hosts = layout.hosts;
            const std::string where =
                fmt::format("{} on {} (P={} count={} root={} chunk={} {})", a.name, layout.name, p, count,
                            root, chunk, in_place ? "in place" : "out of place");
            try {
              testing::Buffers inputs = testing::exact_inputs(call, DataType::Int32, ReduceOp::Sum, random);
              const testing::Expected expected =
                  testing::reference(call, DataType::Int32, ReduceOp::Sum, inputs);
              const Simulation simulation =
                  simulate(a, call, DataType::Int32, ReduceOp::Sum, std::move(inputs));
              ASSERT_EQ(testing::compare(expected, simulation.data, DataType::Int32), "") << where;
            } catch (const std::exception& error) {
              FAIL() << where << ": " << error.what();
            }
            ++cases;
          }
        }
      }
    }
  }
  EXPECT_GT(cases, 100);
}

INSTANTIATE_TEST_SUITE_P(Hosts, EveryAlgorithmOnHosts, ::testing::ValuesIn(testing::every_algorithm()),
                         [](const ::testing::TestParamInfo<const Algorithm*>& param) {
                           return testing::name_of(*param.param);
                         });

// Random floats sum differently in different orders: every rank must still hold the same bits.
TEST(TwoLevel, AllReduceLeavesBitIdenticalReplicasOnEveryLayout) {
  testing::Random random(11);
  const Algorithm& two_level = algorithm(Collective::AllReduce, "two-level");
  for (const NamedLayout& layout : every_layout()) {
    const int p = ranks_of(layout.hosts);
    for (std::uint64_t count : {std::uint64_t{1}, std::uint64_t{37}, std::uint64_t{500}}) {
      for (std::uint64_t chunk : {std::uint64_t{7}, std::uint64_t{1} << 20}) {
        for (DataType type : {DataType::Float32, DataType::BFloat16}) {
          CollectiveCall call{Collective::AllReduce, 0, p, count, 0, chunk, type == DataType::Float32};
          call.hosts = layout.hosts;
          const Simulation simulation = simulate(two_level, call, type, ReduceOp::Sum,
                                                 testing::random_float_inputs(call, type, random));
          for (int r = 1; r < p; ++r)
            ASSERT_EQ(simulation.data[static_cast<std::size_t>(r)], simulation.data[0])
                << layout.name << ": rank " << r << " differs, count=" << count << " chunk=" << chunk;
        }
      }
    }
  }
}

// Out of place, no rank copies its input into its output first: the first sends and reduces read it.
TEST(TwoLevel, AllReduceCopiesNothingOutOfPlace) {
  for (const NamedLayout& layout : every_layout()) {
    const int p = ranks_of(layout.hosts);
    if (p < 2) continue;
    for (int rank = 0; rank < p; ++rank) {
      CollectiveCall call{Collective::AllReduce, rank, p, 1000, 0, 64, /*in_place=*/false};
      call.hosts = layout.hosts;
      for (const Step& step : algorithm(Collective::AllReduce, "two-level").build(call).steps)
        ASSERT_NE(step.kind, StepKind::Copy) << layout.name << " rank " << rank;
    }
  }
}

// Across hosts a slice goes in pieces of a chunk per host, their rounds a wavefront: rank 0's messages
// to the next host carry round s of piece k in the order of s + k, so piece 1's first round goes on the
// wire before piece 0's last, and no link waits for a piece to drain.
TEST(TwoLevel, PiecesCrossBetweenHostsAsAWavefront) {
  const std::uint64_t chunk = 4;
  CollectiveCall call{Collective::AllReduce, 0, 8, 2 * 4 * chunk * 3, 0, chunk};  // 2 slices of 3 pieces
  call.hosts = hosts_of({2, 2, 2, 2});
  const int next_host = 2;                     // slice 0's ring: ranks 0, 2, 4, 6
  const std::uint32_t first_round_across = 1;  // after the reduce-scatter among a host's 2 ranks
  std::vector<std::pair<std::uint32_t, std::uint64_t>> sent;  // (round s, piece k)
  for (const Step& step : algorithm(Collective::AllReduce, "two-level").build(call).steps)
    if (step.kind == StepKind::Send && step.peer == next_host)
      sent.emplace_back((step.tag >> 20) - first_round_across, step.tag & 0xFFFFF);
  ASSERT_EQ(sent.size(), 6u * 3);  // 2(H-1) rounds of 3 pieces
  for (std::size_t i = 1; i < sent.size(); ++i)
    EXPECT_LE(sent[i - 1].first + sent[i - 1].second, sent[i].first + sent[i].second) << "message " << i;
  const auto position = [&](std::uint32_t s, std::uint64_t k) {
    return std::find(sent.begin(), sent.end(), std::pair{s, k}) - sent.begin();
  };
  EXPECT_LT(position(0, 1), position(5, 0));
}

std::uint64_t bytes_between_hosts(const Simulation& simulation, const HostLayout& hosts) {
  std::uint64_t bytes = 0;
  for (const TransferEvent& t : simulation.transfers)
    if (hosts.host_of(t.from) != hosts.host_of(t.to)) bytes += t.bytes;
  return bytes;
}

// Whatever the numbering, a ring through every rank crosses between hosts H times a round, and a chain
// enters every other host once.
TEST(HostAwareOrder, RingsAndChainsCrossBetweenHostsOncePerHost) {
  for (const NamedLayout& layout : every_layout()) {
    const int p = ranks_of(layout.hosts);
    const int h = hosts_in(layout.hosts);
    if (h < 2 || h == p) continue;
    CollectiveCall ring{Collective::AllReduce, 0, p, 64 * static_cast<std::uint64_t>(p), 0, 1 << 20};
    ring.hosts = layout.hosts;
    const Simulation all_reduce = simulate(algorithm(Collective::AllReduce, "ring"), ring, DataType::Float32,
                                           ReduceOp::Sum, zeros(ring));
    int across = 0;
    for (const TransferEvent& t : all_reduce.transfers)
      if (layout.hosts->host_of(t.from) != layout.hosts->host_of(t.to)) ++across;
    EXPECT_EQ(across, 2 * (p - 1) * h) << layout.name;

    for (int root = 0; root < p; ++root) {
      CollectiveCall chain{Collective::Broadcast, 0, p, 16, root, 4};
      chain.hosts = layout.hosts;
      const Simulation broadcast = simulate(algorithm(Collective::Broadcast, "chain"), chain,
                                            DataType::Float32, ReduceOp::Sum, zeros(chain));
      EXPECT_EQ(bytes_between_hosts(broadcast, *layout.hosts), 64u * static_cast<std::uint64_t>(h - 1))
          << layout.name << " root " << root;
    }
  }
}

// The arithmetic of issue 20: on H hosts of L ranks, each host's link carries 2(P-1)/P n in the flat
// ring and 2(H-1)/H n in two levels, each way.
TEST(TwoLevel, EachHostsLinkCarriesTwoHMinusOneOverHOfTheBuffer) {
  for (auto [hosts, each] : {std::pair{2, 4}, {4, 2}, {3, 3}, {2, 2}}) {
    const int p = hosts * each;
    const std::uint64_t count = 240 * static_cast<std::uint64_t>(p);
    const double n = 4.0 * static_cast<double>(count);
    for (bool round_robin : {false, true}) {
      CollectiveCall call{Collective::AllReduce, 0, p, count, 0, 1 << 20};
      call.hosts = hosts_of(std::vector<int>(static_cast<std::size_t>(hosts), each), round_robin);
      for (auto [name, expected] :
           {std::pair{"ring", 2.0 * (p - 1) / p}, {"two-level", 2.0 * (hosts - 1) / hosts}}) {
        const Simulation simulation = simulate(algorithm(Collective::AllReduce, name), call,
                                               DataType::Float32, ReduceOp::Sum, zeros(call));
        std::map<int, std::uint64_t> sent;
        for (const TransferEvent& t : simulation.transfers)
          if (call.hosts->host_of(t.from) != call.hosts->host_of(t.to))
            sent[call.hosts->host_of(t.from)] += t.bytes;
        ASSERT_EQ(sent.size(), static_cast<std::size_t>(hosts)) << name;
        for (const auto& [host, bytes] : sent)
          EXPECT_DOUBLE_EQ(static_cast<double>(bytes), expected * n)
              << name << " on " << hosts << "x" << each << (round_robin ? " round-robin" : "") << ", host "
              << host;
      }
    }
  }
}

// With one host, or a rank per host, the two levels are one: the two-level algorithms send the messages
// of their flat counterparts (the all-reduce in another order: chunk by chunk, within 1% of the ring's
// time) and the broadcast predicts exactly the binomial tree's time.
TEST(TwoLevel, DegeneratesIntoTheFlatAlgorithm) {
  const LinkModel model{10e-6, 1e-9, 1e-10};
  for (const std::vector<int>& ranks : std::vector<std::vector<int>>{{5}, {1, 1, 1, 1, 1}}) {
    CollectiveCall all_reduce{Collective::AllReduce, 0, 5, 5000, 0, 256};
    all_reduce.hosts = hosts_of(ranks);
    const Prediction two_level = predict(algorithm(Collective::AllReduce, "two-level"), all_reduce, 4, model);
    const Prediction ring = predict(algorithm(Collective::AllReduce, "ring"), all_reduce, 4, model);
    EXPECT_EQ(two_level.messages, ring.messages) << ranks.size() << " hosts";
    EXPECT_NEAR(two_level.seconds, ring.seconds, 0.01 * ring.seconds) << ranks.size() << " hosts";
    CollectiveCall broadcast{Collective::Broadcast, 0, 5, 5000, 2, 256};
    broadcast.hosts = all_reduce.hosts;
    EXPECT_DOUBLE_EQ(predict_seconds(algorithm(Collective::Broadcast, "two-level"), broadcast, 4, model),
                     predict_seconds(algorithm(Collective::Broadcast, "binomial"), broadcast, 4, model));
  }
}

// The emulated cluster's links: loopback inside hosts, 200 Mbit/s between them.
LinkModel cluster_links() {
  LinkModel model;
  model.within_host = LinkCost{20e-6, 1 / 2e9, 1 / 2e9, 0};
  model.between_hosts = LinkCost{100e-6, 1 / 25e6, 1 / 25e6, 0};
  model.gamma = 1 / 10e9;
  return model;
}

// A host's ranks share its network link: recursive doubling on 2 hosts of 4 has all four ranks of a host
// send across in the same round, and their bytes go through the link one after another.
TEST(HostModel, RanksOfAHostShareItsNetworkLink) {
  const LinkModel model = cluster_links();
  CollectiveCall call{Collective::AllGather, 0, 8, 25000, 0, 1 << 20};  // 100 kB per rank
  call.hosts = hosts_of({4, 4});
  const Simulation simulation = simulate(algorithm(Collective::AllGather, "recursive-doubling"), call,
                                         DataType::Float32, ReduceOp::Sum, zeros(call), model);
  std::uint64_t sent_across = 0;  // by host 0
  for (const TransferEvent& t : simulation.transfers)
    if (call.hosts->host_of(t.from) == 0 && call.hosts->host_of(t.to) == 1) sent_across += t.bytes;
  EXPECT_EQ(sent_across, 4u * 400000);  // the last round: each rank's 4 blocks
  const double wire = static_cast<double>(sent_across) * model.between_hosts.beta;
  EXPECT_GT(simulation.predicted_seconds, wire);
  EXPECT_LT(simulation.predicted_seconds, wire + 1e-3);  // alphas and the loopback rounds
}

// 16 MiB on 2 hosts x 4 ranks: the ring moves 1.75 n through each host's link, two levels 1 n; on 4 x 2,
// 1.75 n against 1.5 n. The model sees it, and auto takes two levels and says why.
TEST(TwoLevel, TheModelPrefersTwoLevelsWhereTheNetworkIsTheSlowLink) {
  const LinkModel model = cluster_links();
  for (auto [hosts, each, at_least] : {std::tuple{2, 4, 1.6}, {4, 2, 1.12}}) {
    const int p = hosts * each;
    CollectiveCall call{Collective::AllReduce, 0, p, 4 << 20, 0, 1 << 18};
    call.hosts = hosts_of(std::vector<int>(static_cast<std::size_t>(hosts), each));
    const double ring = predict_seconds(algorithm(Collective::AllReduce, "ring"), call, 4, model);
    const double two_level = predict_seconds(algorithm(Collective::AllReduce, "two-level"), call, 4, model);
    EXPECT_GT(ring / two_level, at_least) << hosts << "x" << each;
    CostModel cost(model);
    const AlgorithmChoice& choice = cost.choose(call, 4);
    EXPECT_EQ(choice.algorithm->name, "two-level") << choice.explanation;
    EXPECT_NE(choice.explanation.find(fmt::format("on {} hosts x {} ranks the best two-level", hosts, each)),
              std::string::npos)
        << choice.explanation;
  }
}

TEST(HostGroups, OrdersRanksHostAfterHost) {
  CollectiveCall call{Collective::Broadcast, 0, 7, 0, 0, 1};
  call.hosts = hosts_of({3, 2, 2}, /*round_robin=*/true);  // hosts 0 1 2 0 1 2 0
  const HostGroups groups(call);
  EXPECT_EQ(groups.hosts(), 3);
  EXPECT_EQ(groups.largest(), 3);
  EXPECT_EQ(groups.members(0), (std::vector<int>{0, 3, 6}));
  EXPECT_EQ(groups.local_of(4), 1);
  EXPECT_EQ(groups.ring_order(), (std::vector<int>{0, 3, 6, 1, 4, 2, 5}));
  EXPECT_EQ(groups.rooted_order(3), (std::vector<int>{3, 6, 0, 1, 4, 2, 5}));
  EXPECT_EQ(groups.rooted_order(5), (std::vector<int>{5, 2, 0, 3, 6, 1, 4}));
  const HostGroups alone(CollectiveCall{Collective::Broadcast, 0, 3, 0, 0, 1});
  EXPECT_EQ(alone.hosts(), 3);
  EXPECT_EQ(alone.rooted_order(1), (std::vector<int>{1, 2, 0}));
}

}  // namespace
}  // namespace canopy::collectives
