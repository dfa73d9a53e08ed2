// The simulator's cost model against the textbook formulas, and the staging the algorithms keep
// (schedule_building_test.cpp has the shapes they are built from and the simulator's checks).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "canopy/error.hpp"
#include "collectives/schedules/algorithms.hpp"
#include "collectives/schedules/simulator.hpp"
#include "collectives/schedules/step_writer.hpp"
#include "collectives/schedules/topology.hpp"
#include "collectives/selection/cost_model.hpp"
#include "tests/schedules/schedule_test_support.hpp"

namespace canopy::collectives {
namespace {

using schedule_tests::algorithm;
using schedule_tests::zeros;

// `call` with all its ranks on one host of `cores` cores.
CollectiveCall on_one_host(CollectiveCall call, int cores) {
  HostLayout hosts;
  hosts.host_of_rank.assign(static_cast<std::size_t>(call.size), 0);
  hosts.cores_of_host = {cores};
  call.hosts = std::make_shared<const HostLayout>(std::move(hosts));
  return call;
}

TEST(AlgorithmTable, HasEveryAlgorithmInItsOrder) {
  auto names = [](Collective collective) {
    std::vector<std::string_view> list;
    for (const Algorithm& a : algorithms(collective)) list.push_back(a.name);
    return list;
  };
  using Names = std::vector<std::string_view>;
  EXPECT_EQ(names(Collective::Broadcast), (Names{"flat", "binomial", "chain", "binary-tree",
                                                 "scatter-allgather", "two-level", "one-shot"}));
  EXPECT_EQ(names(Collective::Reduce), (Names{"binomial", "tree", "two-level", "one-shot"}));
  EXPECT_EQ(names(Collective::AllReduce),
            (Names{"reduce-broadcast", "tree", "double-tree", "recursive-doubling", "rabenseifner", "ring",
                   "two-level", "one-shot"}));
  EXPECT_EQ(names(Collective::AllGather), (Names{"ring", "recursive-doubling"}));
  EXPECT_EQ(names(Collective::ReduceScatter), (Names{"ring", "recursive-halving"}));
  EXPECT_EQ(names(Collective::Barrier), (Names{"dissemination", "one-shot"}));
  EXPECT_EQ(names(Collective::AllToAll), (Names{"pairwise", "bruck"}));
  EXPECT_EQ(names(Collective::AllToAllV), (Names{"pairwise"}));
  EXPECT_EQ(names(Collective::Gather), (Names{"flat", "binomial"}));
  EXPECT_EQ(names(Collective::Scatter), (Names{"flat", "binomial"}));
  EXPECT_TRUE(algorithms(Collective::PointToPoint).empty());
  EXPECT_EQ(find_algorithm(Collective::AllReduce, "bcube"), nullptr);
  EXPECT_EQ(algorithm_index(algorithm(Collective::AllReduce, "ring")), 5);
  EXPECT_EQ(algorithm_index(algorithm(Collective::Broadcast, "flat")), 0);
}

// The seed: a 5 MB file to 7 friends at 1 MB/s takes 35 s one after another, 15 s when every holder
// forwards it.
TEST(CostModel, FlatBroadcastTakesSevenTimesTheLinkAndBinomialThree) {
  const LinkModel one_megabyte_per_second{0, 1e-6, 0};
  const CollectiveCall call{Collective::Broadcast, 0, 8, 5'000'000, 0, 5'000'000};
  EXPECT_NEAR(predict_seconds(algorithm(Collective::Broadcast, "flat"), call, 1, one_megabyte_per_second), 35,
              1e-9);
  EXPECT_NEAR(predict_seconds(algorithm(Collective::Broadcast, "binomial"), call, 1, one_megabyte_per_second),
              15, 1e-9);
}

TEST(CostModel, PredictionMatchesTheFullSimulation) {
  const LinkModel model{5e-6, 1e-9, 2e-10};
  for (const Algorithm& a : algorithms(Collective::AllReduce)) {
    const CollectiveCall call{Collective::AllReduce, 0, 6, 1000, 0, 64};
    const Simulation simulation =
        simulate(a, call, DataType::Float32, ReduceOp::Sum, zeros(call, DataType::Float32), model);
    EXPECT_DOUBLE_EQ(predict_seconds(a, call, 4, model), simulation.predicted_seconds) << a.name;
    EXPECT_GT(simulation.predicted_seconds, 0) << a.name;
  }
}

// A pipelined chain of k chunks: (p + k - 2)(alpha + n beta / k).
TEST(CostModel, PipelinedChainMatchesItsFormula) {
  const LinkModel model{10e-6, 1e-9, 0};
  const double n = 1 << 20;
  for (int p : {2, 3, 8}) {
    for (int k : {1, 4, 16}) {
      const CollectiveCall call{
          Collective::Broadcast, 0, p, 1 << 20, 0, (1u << 20) / static_cast<unsigned>(k)};
      const double expected = (p + k - 2) * (model.between_hosts.alpha + n * model.between_hosts.beta / k);
      EXPECT_NEAR(predict_seconds(algorithm(Collective::Broadcast, "chain"), call, 1, model), expected, 1e-12)
          << "p=" << p << " k=" << k;
    }
  }
}

// Without reduce costs, a ring all-reduce is 2(p-1) rounds of one part each.
TEST(CostModel, RingAllReduceMatchesItsFormula) {
  const LinkModel model{10e-6, 1e-9, 0};
  for (int p : {2, 3, 5, 8}) {
    const std::uint64_t count = 1000 * static_cast<std::uint64_t>(p);
    const CollectiveCall call{Collective::AllReduce, 0, p, count, 0, 1 << 20};
    const double part_bytes = 4.0 * static_cast<double>(count) / p;
    const double expected = 2 * (p - 1) * (model.between_hosts.alpha + part_bytes * model.between_hosts.beta);
    EXPECT_NEAR(predict_seconds(algorithm(Collective::AllReduce, "ring"), call, 4, model), expected, 1e-12);
  }
}

// Latency-bound algorithms take their number of rounds times alpha.
TEST(CostModel, BinomialBroadcastAndBarrierTakeCeilLog2Rounds) {
  const LinkModel latency_only{1e-5, 0, 0};
  for (int p = 1; p <= 17; ++p) {
    const CollectiveCall broadcast{Collective::Broadcast, 0, p, 1, 0, 1};
    const Simulation simulation =
        simulate(algorithm(Collective::Broadcast, "binomial"), broadcast, DataType::UInt8, ReduceOp::Sum,
                 zeros(broadcast, DataType::UInt8), latency_only);
    EXPECT_EQ(simulation.rounds, ceil_log2(p)) << p;
    EXPECT_NEAR(simulation.predicted_seconds, ceil_log2(p) * latency_only.between_hosts.alpha, 1e-15) << p;

    const CollectiveCall barrier{Collective::Barrier, 0, p, 0, 0, 1};
    const Simulation dissemination =
        simulate(algorithm(Collective::Barrier, "dissemination"), barrier, DataType::UInt8, ReduceOp::Sum,
                 zeros(barrier, DataType::UInt8), latency_only);
    EXPECT_EQ(dissemination.rounds, ceil_log2(p)) << p;
    EXPECT_EQ(dissemination.transfers.size(), static_cast<std::size_t>(p * ceil_log2(p))) << p;
    EXPECT_NEAR(dissemination.predicted_seconds, ceil_log2(p) * latency_only.between_hosts.alpha, 1e-15) << p;
  }
}

// The lower bound every all-reduce must pay, and the ring meets it exactly: 2(p-1)/p n per rank.
TEST(CostModel, RingAllReduceSendsTwoPMinusOneOverPOfTheBufferPerRank) {
  for (int p : {2, 3, 4, 5, 8, 12}) {
    const std::uint64_t count = 840 * static_cast<std::uint64_t>(p);
    const CollectiveCall call{Collective::AllReduce, 0, p, count, 0, 100};
    const Simulation simulation = simulate(algorithm(Collective::AllReduce, "ring"), call, DataType::Float32,
                                           ReduceOp::Sum, zeros(call, DataType::Float32));
    std::map<int, std::uint64_t> sent;
    std::map<int, std::uint64_t> received;
    for (const TransferEvent& transfer : simulation.transfers) {
      sent[transfer.from] += transfer.bytes;
      received[transfer.to] += transfer.bytes;
    }
    const std::uint64_t expected =
        2 * static_cast<std::uint64_t>(p - 1) * count * 4 / static_cast<std::uint64_t>(p);
    for (int r = 0; r < p; ++r) {
      EXPECT_EQ(sent[r], expected) << "p=" << p << " rank " << r;
      EXPECT_EQ(received[r], expected) << "p=" << p << " rank " << r;
    }
  }
}

// The double tree shares out the sends a single tree leaves to interior ranks.
// In a stream of broadcasts each rank's own messages set the pace: the chain's ranks send one each,
// the binomial tree's root log2(p), the flat root p-1.
TEST(CostModel, InAStreamEachRanksOwnMessagesSetThePace) {
  const LinkModel model{10e-6, 1e-9, 0};
  const CollectiveCall call{Collective::Broadcast, 0, 8, 16, 0, 16};
  const double message = model.between_hosts.message_seconds(16);
  auto pace = [&](std::string_view name) {
    return predict(algorithm(Collective::Broadcast, name), call, 1, model).stream_seconds;
  };
  EXPECT_NEAR(pace("chain"), message, 1e-12);
  EXPECT_NEAR(pace("binomial"), 3 * message, 1e-12);
  EXPECT_NEAR(pace("flat"), 7 * message, 1e-12);
  // One call at a time the chain is the slowest of the three trees: 7 hops against 3.
  EXPECT_NEAR(predict(algorithm(Collective::Broadcast, "chain"), call, 1, model).seconds, 7 * message, 1e-12);
}

// Bruck's lg p rounds win while alpha outweighs the bytes; pairwise's p-1 rounds of one block each win once
// the blocks are large (Bruck moves about half the data in every round and copies it on each side).
TEST(CostModel, AllToAllTakesBruckForSmallBlocksAndPairwiseForLargeOnes) {
  CostModel model(LinkModel{20e-6, 1e-9, 1e-10});
  const CollectiveCall small{Collective::AllToAll, 0, 16, 4, 0, 1 << 18};
  const CollectiveCall large{Collective::AllToAll, 0, 16, 1 << 20, 0, 1 << 18};
  EXPECT_EQ(model.choose(small, 4).algorithm->name, "bruck") << model.choose(small, 4).explanation;
  EXPECT_EQ(model.choose(large, 4).algorithm->name, "pairwise") << model.choose(large, 4).explanation;
  const auto bruck = predict(algorithm(Collective::AllToAll, "bruck"), small, 4, model.link());
  const auto pairwise = predict(algorithm(Collective::AllToAll, "pairwise"), small, 4, model.link());
  EXPECT_EQ(pairwise.messages, 16u * 15u);
  EXPECT_EQ(bruck.messages, 16u * 4u);  // ceil(lg 16) = 4 rounds
}

// With a single algorithm there is nothing to time: all-to-all-v could not be, as a rank knows only its own
// counts.
TEST(CostModel, AllToAllVHasOneAlgorithmAndNeedsNoPrediction) {
  CostModel model(LinkModel{20e-6, 1e-9, 1e-10});
  CollectiveCall call{Collective::AllToAllV, 1, 3, 0, 0, 1 << 18};
  call.send_counts = {1, 0, 5};
  call.recv_counts = {2, 0, 9};
  EXPECT_EQ(model.choose(call, 4).algorithm->name, "pairwise");
  EXPECT_NE(model.choose(call, 4).explanation.find("the only algorithm"), std::string::npos);
}

TEST(CostModel, ChoosesForOneCallOrForAStream) {
  CostModel model(LinkModel{10e-6, 1e-9, 1e-10});
  const CollectiveCall small{Collective::Broadcast, 0, 8, 16, 0, 1 << 20};
  EXPECT_EQ(model.choose(small, 1).algorithm->name, "binomial");
  const AlgorithmChoice& streamed = model.choose(small, 1, Pace::Stream);
  EXPECT_EQ(streamed.algorithm->name, "chain");
  EXPECT_NEAR(streamed.predicted_seconds, 10e-6 + 16e-9, 1e-12);
  EXPECT_NE(streamed.explanation.find("in a stream"), std::string::npos) << streamed.explanation;
}

// Where ranks share a host's cores, the copies of every message's bytes queue for those cores whoever
// sends them: large broadcasts pace alike, and the tie goes to what wins one call.
TEST(CostModel, SharedCoresPaceLargeBroadcastsAlike) {
  const LinkModel link{10e-6, 1e-9, 1e-10};
  const CollectiveCall large = on_one_host({Collective::Broadcast, 0, 4, 64 << 20, 0, 1 << 20}, 2);
  const double copies = 3.0 * 2 * (64 << 20) * 1e-9 / 2;  // 3 messages, copied on both ends, 2 cores
  for (std::string_view name : {"flat", "binomial", "chain"})
    EXPECT_NEAR(predict(algorithm(Collective::Broadcast, name), large, 1, link).stream_seconds, copies,
                0.05 * copies)
        << name;
  CostModel model(link);
  EXPECT_EQ(model.choose(large, 1, Pace::Stream).algorithm, model.choose(large, 1).algorithm);
}

TEST(CostModel, DoubleTreeBeatsOneTreeForLargeBuffers) {
  const LinkModel model{10e-6, 1e-9, 0};
  for (int p : {7, 8, 16}) {  // heap trees with interior ranks of two children
    const CollectiveCall call{Collective::AllReduce, 0, p, 1 << 22, 0, 1 << 14};
    const double one_tree = predict_seconds(algorithm(Collective::AllReduce, "tree"), call, 4, model);
    const double two_trees = predict_seconds(algorithm(Collective::AllReduce, "double-tree"), call, 4, model);
    EXPECT_LT(two_trees, 0.8 * one_tree) << "p=" << p;
  }
}

// Eight ranks on two cores move two messages at a time: recursive doubling's three rounds of eight
// messages take twelve turns, the barrier's dissemination too; a host with a core per rank changes nothing.
TEST(HostModel, RanksSharingCoresMoveAtMostCoresMessagesAtOnce) {
  const LinkModel latency_only{1e-5, 0, 0};
  const CollectiveCall all_reduce{Collective::AllReduce, 0, 8, 2, 0, 2};
  const Algorithm& doubling = algorithm(Collective::AllReduce, "recursive-doubling");
  EXPECT_NEAR(predict_seconds(doubling, all_reduce, 4, latency_only), 3e-5, 1e-15);
  EXPECT_NEAR(predict_seconds(doubling, on_one_host(all_reduce, 2), 4, latency_only), 12e-5, 1e-15);
  EXPECT_NEAR(predict_seconds(doubling, on_one_host(all_reduce, 8), 4, latency_only), 3e-5, 1e-15);

  const CollectiveCall barrier{Collective::Barrier, 0, 8, 0, 0, 1};
  const Algorithm& dissemination = algorithm(Collective::Barrier, "dissemination");
  EXPECT_NEAR(predict_seconds(dissemination, on_one_host(barrier, 2), 1, latency_only), 12e-5, 1e-15);
}

// Why the host term matters: on 8 ranks sharing 2 cores (measured: tree 69 us, recursive doubling
// 120 us for 8 bytes) the tree sends fewer messages at once and wins; on 8 hosts recursive doubling's
// three rounds beat the tree's six.
TEST(HostModel, TreeBeatsRecursiveDoublingOnlyWhereRanksShareCores) {
  const LinkModel latency_only{1e-5, 0, 0};
  const CollectiveCall call{Collective::AllReduce, 0, 8, 2, 0, 2};
  const Algorithm& tree = algorithm(Collective::AllReduce, "reduce-broadcast");
  const Algorithm& doubling = algorithm(Collective::AllReduce, "recursive-doubling");
  EXPECT_LT(predict_seconds(doubling, call, 4, latency_only), predict_seconds(tree, call, 4, latency_only));
  const CollectiveCall shared = on_one_host(call, 2);
  EXPECT_LT(predict_seconds(tree, shared, 4, latency_only),
            predict_seconds(doubling, shared, 4, latency_only));
}

// Through shared memory a small message takes no core for its alpha (flight and the receiver's turn), so
// where 8 ranks share 2 cores recursive doubling's three rounds beat the tree's six again (measured over
// shared memory: recursive doubling 10.9-15.6 us, tree 16.6-19.1 us for 4-64 bytes), while bytes still
// queue for the cores.
TEST(HostModel, ThroughMemoryOnlyTheBytesQueueForSharedCores) {
  LinkModel latency_only{1e-5, 0, 0};
  latency_only.within_host.alpha_share_on_core = 0;
  const CollectiveCall shared = on_one_host({Collective::AllReduce, 0, 8, 2, 0, 2}, 2);
  const Algorithm& tree = algorithm(Collective::AllReduce, "reduce-broadcast");
  const Algorithm& doubling = algorithm(Collective::AllReduce, "recursive-doubling");
  EXPECT_NEAR(predict_seconds(doubling, shared, 4, latency_only), 3e-5, 1e-15);
  EXPECT_LT(predict_seconds(doubling, shared, 4, latency_only),
            predict_seconds(tree, shared, 4, latency_only));
  LinkModel bytes_only{0, 1e-9, 0};
  bytes_only.within_host.alpha_share_on_core = 0;
  const CollectiveCall large = on_one_host({Collective::AllReduce, 0, 8, 1 << 20, 0, 1 << 20}, 2);
  LinkModel bytes_only_own_cores = bytes_only;
  EXPECT_GT(predict_seconds(doubling, large, 4, bytes_only),
            predict_seconds(doubling, on_one_host(large, 8), 4, bytes_only_own_cores));
}

// Over loopback a small message holds a shared core for the share of alpha the start-up probe measured:
// all of it, and 4 ranks on 2 cores run recursive doubling's 2 rounds in the binomial tree's 4 rounds' time
// (each round's 4 messages take 2 turns); a quarter, and each round costs alpha and a quarter more, as
// measured (4 bytes: recursive doubling 47-62 us, the tree 57-87, alpha 22-26).
TEST(HostModel, TheShareOfAlphaOnACoreSetsWhatEveryRankSendingCosts) {
  LinkModel model{1e-5, 0, 0};
  const CollectiveCall shared = on_one_host({Collective::AllReduce, 0, 4, 2, 0, 2}, 2);
  const Algorithm& tree = algorithm(Collective::AllReduce, "reduce-broadcast");
  const Algorithm& doubling = algorithm(Collective::AllReduce, "recursive-doubling");
  EXPECT_NEAR(predict_seconds(tree, shared, 4, model), 4e-5, 1e-15);
  EXPECT_NEAR(predict_seconds(doubling, shared, 4, model), 4e-5, 1e-15);
  model.within_host.alpha_share_on_core = 0.25;
  EXPECT_NEAR(predict_seconds(tree, shared, 4, model), 4e-5, 1e-15);
  EXPECT_NEAR(predict_seconds(doubling, shared, 4, model), 2 * 1.25e-5, 1e-15);
}

// Messages between hosts take no core: two hosts of four ranks on one core each still exchange
// across hosts at full concurrency, while the four ranks within a host queue for its core.
TEST(HostModel, OnlyMessagesWithinAHostQueueForItsCores) {
  const LinkModel model{1e-5, 0, 0};
  HostLayout hosts;
  hosts.host_of_rank = {0, 0, 0, 0, 1, 1, 1, 1};
  hosts.cores_of_host = {1, 1};
  // Ring all-gather: rank r sends to r+1, so 6 of the 8 messages of each round stay within a host.
  CollectiveCall call{Collective::AllGather, 0, 8, 1, 0, 1};
  call.hosts = std::make_shared<const HostLayout>(hosts);
  const Simulation simulation = simulate(algorithm(Collective::AllGather, "ring"), call, DataType::Float32,
                                         ReduceOp::Sum, zeros(call, DataType::Float32), model);
  for (const TransferEvent& transfer : simulation.transfers) {
    if (hosts.host_of(transfer.from) != hosts.host_of(transfer.to)) continue;
    for (const TransferEvent& other : simulation.transfers) {
      if (&other == &transfer || hosts.host_of(other.from) != hosts.host_of(transfer.from) ||
          hosts.host_of(other.to) != hosts.host_of(transfer.from))
        continue;
      EXPECT_TRUE(other.finish <= transfer.start || other.start >= transfer.finish)
          << "two messages within host " << hosts.host_of(transfer.from) << " overlap on its one core";
    }
  }
  // 7 rounds, each with 3 messages within each host on its one core: 21 turns.
  EXPECT_NEAR(simulation.predicted_seconds, 21e-5, 1e-15);
}

// The bytes of a message between ranks sharing cores take two of them (the copies into and out of the
// socket), so on 4 ranks sharing 2 cores the all-gather's four messages at once move one after the
// other: a 1 MiB broadcast as scatter (1 MiB in all, through a tree) + all-gather (3 MiB) then copies
// 4 MiB in turn against flat's 3 MiB (measured: flat 430-630 us, scatter-allgather 940-1220). On 4 hosts the
// all-gather's messages move at once and scatter-allgather wins, as the textbook says.
TEST(HostModel, MessageBytesTakeTwoCoresSoFlatBeatsScatterAllgatherOnOneHost) {
  const LinkModel bytes_only{0, 1e-9, 0};
  const CollectiveCall call{Collective::Broadcast, 0, 4, 1 << 20, 0, 1 << 20};
  const Algorithm& flat = algorithm(Collective::Broadcast, "flat");
  const Algorithm& split = algorithm(Collective::Broadcast, "scatter-allgather");
  const CollectiveCall shared = on_one_host(call, 2);
  EXPECT_NEAR(predict_seconds(flat, shared, 1, bytes_only), 3 * (1 << 20) * 1e-9, 1e-12);
  EXPECT_NEAR(predict_seconds(split, shared, 1, bytes_only), 4 * (1 << 20) * 1e-9, 1e-12);
  EXPECT_LT(predict_seconds(split, call, 1, bytes_only), predict_seconds(flat, call, 1, bytes_only));
}

// The eager allowance must cover the messages that move at the eager rate. Measured on 4 ranks sharing 2
// cores (alpha 7.5 us, 4.3 GB/s streamed, 8.5 GB/s for what sockets take at once): a binomial broadcast
// of 1 MiB in 340-460 us, scatter-allgather in 780-890. With an allowance of 256 KiB a 1 MiB message paid
// the stream rate for its last 768 KiB while the all-gather's 256 KiB pieces went all at the eager rate,
// and scatter-allgather came out fastest; with 1 MiB (what the probe now measures) a tree does.
TEST(HostModel, AnEagerAllowanceCoveringTheMessagesKeepsATreeAheadOfScatterAllgather) {
  LinkCost loopback{7.5e-6, 1 / 4.3e9, 1 / 8.5e9, 256 << 10};
  LinkModel model{7.5e-6, 1 / 4.3e9, 1e-10};
  model.set_every_link(loopback);
  const CollectiveCall call = on_one_host({Collective::Broadcast, 0, 4, 1 << 20, 0, 1 << 20}, 2);
  const Algorithm& split = algorithm(Collective::Broadcast, "scatter-allgather");
  EXPECT_EQ(CostModel(model).choose(call, 1).algorithm, &split) << "the failure this test guards against";
  loopback.eager_bytes = 1 << 20;
  model.set_every_link(loopback);
  for (Pace pace : {Pace::OneCall, Pace::Stream}) {
    const Algorithm* chosen = CostModel(model).choose(call, 1, pace).algorithm;
    EXPECT_NE(chosen, &split);
    EXPECT_LT(predict_seconds(*chosen, call, 1, model), predict_seconds(split, call, 1, model));
  }
}

// Reductions on a host whose ranks share its cores take a core too: 2 ranks exchanging and reducing 4000
// bytes each (recursive doubling, messages free) reduce one after the other on 1 core, at once on 2.
TEST(HostModel, ReductionsQueueForTheHostsCores) {
  const LinkModel reduce_only{0, 0, 1e-9};
  const CollectiveCall call{Collective::AllReduce, 0, 2, 1000, 0, 1000};
  const Algorithm& doubling = algorithm(Collective::AllReduce, "recursive-doubling");
  EXPECT_NEAR(predict_seconds(doubling, call, 4, reduce_only), 4000e-9, 1e-15);
  EXPECT_NEAR(predict_seconds(doubling, on_one_host(call, 1), 4, reduce_only), 8000e-9, 1e-15);
  EXPECT_NEAR(predict_seconds(doubling, on_one_host(call, 2), 4, reduce_only), 4000e-9, 1e-15);
}

// A message's first eager_bytes cost beta_eager each, the rest beta.
TEST(HostModel, EagerBytesAreCheaperThanStreamedOnes) {
  const LinkCost link{1e-6, 1e-9, 1e-10, 1000};
  EXPECT_DOUBLE_EQ(link.message_seconds(500), 1e-6 + 500 * 1e-10);
  EXPECT_DOUBLE_EQ(link.message_seconds(3000), 1e-6 + 1000 * 1e-10 + 2000 * 1e-9);
  EXPECT_DOUBLE_EQ(LinkModel(1e-6, 1e-9, 0).between_hosts.message_seconds(3000), 1e-6 + 3000 * 1e-9);
}

// Messages sent back to back on one connection share its eager bytes: scatter-allgather's two halves on
// 2 ranks cost what one whole message costs, not two eager allowances (which made it look faster than
// flat for 1 MiB, where it measured 1.1-1.3x slower).
TEST(HostModel, BackToBackMessagesShareOneSocketsEagerBytes) {
  LinkModel model{0, 1e-9, 0};
  model.set_every_link(LinkCost{0, 1e-9, 1e-10, 1000});
  const CollectiveCall call{Collective::Broadcast, 0, 2, 4000, 0, 4000};
  const double flat = predict_seconds(algorithm(Collective::Broadcast, "flat"), call, 1, model);
  EXPECT_DOUBLE_EQ(flat, model.between_hosts.message_seconds(4000));
  const Simulation split = simulate(algorithm(Collective::Broadcast, "scatter-allgather"), call,
                                    DataType::UInt8, ReduceOp::Sum, zeros(call, DataType::UInt8), model);
  double eager_bytes_used = 0;
  for (const TransferEvent& transfer : split.transfers) {
    if (transfer.from != 0) continue;
    const double seconds = transfer.finish - transfer.start;
    eager_bytes_used += (static_cast<double>(transfer.bytes) * 1e-9 - seconds) / (1e-9 - 1e-10);
  }
  EXPECT_NEAR(eager_bytes_used, 1000, 1e-6)
      << "the root's back-to-back halves had one allowance between them";
  EXPECT_GE(split.predicted_seconds, flat);
}

TEST(HostModel, LayoutAnswersItsQuestions) {
  HostLayout layout;
  layout.host_of_rank = {0, 1, 0, 1, 0};
  layout.cores_of_host = {2, 4};
  EXPECT_EQ(layout.ranks_on(0), 3);
  EXPECT_TRUE(layout.shares_cores(0));
  EXPECT_FALSE(layout.shares_cores(1));
  EXPECT_EQ(layout.cores_per_message(0), 2);
  EXPECT_EQ(layout.turns_when_all_busy(0), 3);  // 3 messages at once, each taking 2 of the 2 cores
  EXPECT_EQ(layout.turns_when_all_busy(1), 1);
  EXPECT_EQ(layout.ranks_per_core(0), 2);  // 3 ranks on 2 cores: one core runs two of them
  EXPECT_EQ(layout.ranks_per_core(1), 1);
  EXPECT_EQ(layout.local_rank_of(4), 2);
  EXPECT_EQ(layout.local_rank_of(3), 1);
  const HostLayout alone;
  EXPECT_EQ(alone.host_of(5), 5);
  EXPECT_FALSE(alone.shares_cores(5));
}

TEST(HostModel, RejectsALayoutOfTheWrongSize) {
  const LinkModel model{1e-5, 0, 0};
  HostLayout hosts;
  hosts.host_of_rank = {0, 0, 0};
  hosts.cores_of_host = {1};
  CollectiveCall call{Collective::AllReduce, 0, 4, 4, 0, 4};
  call.hosts = std::make_shared<const HostLayout>(hosts);
  EXPECT_THROW(predict_seconds(algorithm(Collective::AllReduce, "ring"), call, 4, model), Error);
}

TEST(Staging, StaysWithinAFewChunksForLargeBuffers) {
  for (Collective collective : {Collective::Broadcast, Collective::Reduce, Collective::AllReduce,
                                Collective::AllGather, Collective::ReduceScatter}) {
    for (const Algorithm& a : algorithms(collective)) {
      for (int rank = 0; rank < 8; ++rank) {
        const CollectiveCall call{collective, rank, 8, 1 << 20, 0, 1 << 12};
        const Schedule schedule = a.build(call);
        EXPECT_LE(schedule.staging_count, 4u * call.chunk_count) << a.name << " rank " << rank;
      }
    }
  }
}

TEST(Schedules, ArePureFunctionsOfTheCall) {
  const CollectiveCall call{Collective::AllReduce, 3, 7, 1000, 0, 64};
  for (const Algorithm& a : algorithms(Collective::AllReduce)) {
    const Schedule first = a.build(call);
    const Schedule second = a.build(call);
    ASSERT_EQ(first.steps.size(), second.steps.size()) << a.name;
    for (std::size_t i = 0; i < first.steps.size(); ++i) {
      EXPECT_EQ(first.steps[i].tag, second.steps[i].tag);
      EXPECT_EQ(first.steps[i].deps, second.steps[i].deps);
    }
  }
}

}  // namespace
}  // namespace canopy::collectives
