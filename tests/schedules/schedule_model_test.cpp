// The simulator's cost model against the textbook formulas, its checks against broken schedules, and
// the shapes (trees, fold, staging) the algorithms are built from.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "canopy/error.hpp"
#include "collectives/selection/cost_model.hpp"
#include "collectives/schedules/algorithms.hpp"
#include "collectives/schedules/simulator.hpp"
#include "collectives/schedules/step_writer.hpp"
#include "collectives/schedules/topology.hpp"

namespace canopy::collectives {
namespace {

const Algorithm& algorithm(Collective collective, std::string_view name) {
  const Algorithm* found = find_algorithm(collective, name);
  if (found == nullptr) throw std::runtime_error(std::string("no algorithm ") + std::string(name));
  return *found;
}

std::vector<std::vector<std::byte>> zeros(const CollectiveCall& call, DataType type) {
  return std::vector<std::vector<std::byte>>(static_cast<std::size_t>(call.size),
                                             std::vector<std::byte>(call.data_count() * size_of(type)));
}

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
  EXPECT_EQ(names(Collective::Broadcast),
            (Names{"flat", "binomial", "chain", "binary-tree", "scatter-allgather", "two-level", "one-shot"}));
  EXPECT_EQ(names(Collective::Reduce), (Names{"binomial", "tree", "two-level", "one-shot"}));
  EXPECT_EQ(names(Collective::AllReduce), (Names{"reduce-broadcast", "tree", "double-tree", "recursive-doubling",
                                                 "rabenseifner", "ring", "two-level", "one-shot"}));
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
  latency_only.within_host.through_memory = true;
  const CollectiveCall shared = on_one_host({Collective::AllReduce, 0, 8, 2, 0, 2}, 2);
  const Algorithm& tree = algorithm(Collective::AllReduce, "reduce-broadcast");
  const Algorithm& doubling = algorithm(Collective::AllReduce, "recursive-doubling");
  EXPECT_NEAR(predict_seconds(doubling, shared, 4, latency_only), 3e-5, 1e-15);
  EXPECT_LT(predict_seconds(doubling, shared, 4, latency_only),
            predict_seconds(tree, shared, 4, latency_only));
  LinkModel bytes_only{0, 1e-9, 0};
  bytes_only.within_host.through_memory = true;
  const CollectiveCall large = on_one_host({Collective::AllReduce, 0, 8, 1 << 20, 0, 1 << 20}, 2);
  LinkModel bytes_only_own_cores = bytes_only;
  EXPECT_GT(predict_seconds(doubling, large, 4, bytes_only),
            predict_seconds(doubling, on_one_host(large, 8), 4, bytes_only_own_cores));
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

// --- the step writer derives deps from memory --------------------------------------------------

TEST(StepWriter, ForwardingAChunkWaitsForThatChunkOnly) {
  StepWriter writer(CollectiveCall{Collective::Broadcast, 1, 3, 8, 0, 4});
  const StepIndex recv0 = writer.recv(0, data_block(0, 4), 0);
  const StepIndex recv1 = writer.recv(0, data_block(4, 4), 1);
  const StepIndex send0 = writer.send(2, data_block(0, 4), 0);
  const StepIndex send1 = writer.send(2, data_block(4, 4), 1);
  const StepIndex overwrite = writer.recv(0, data_block(2, 4), 2);  // after both sends read it
  const Schedule schedule = std::move(writer).finish();
  EXPECT_TRUE(schedule.steps[recv0].deps.empty());
  EXPECT_TRUE(schedule.steps[recv1].deps.empty());
  EXPECT_EQ(schedule.steps[send0].deps, std::vector<std::uint32_t>{recv0});
  EXPECT_EQ(schedule.steps[send1].deps, std::vector<std::uint32_t>{recv1});
  EXPECT_EQ(schedule.steps[overwrite].deps, (std::vector<std::uint32_t>{recv0, recv1, send0, send1}));
}

TEST(StepWriter, ReusesStagingSlotsAfterTheirLastUse) {
  StepWriter writer(CollectiveCall{Collective::Reduce, 0, 2, 100, 0, 10}, /*staging_slots=*/2);
  std::vector<StepIndex> steps;
  for (int c = 0; c < 4; ++c) steps.push_back(writer.recv_reduce(1, data_block(10 * c, 10), c, false));
  const Schedule schedule = std::move(writer).finish();
  EXPECT_EQ(schedule.staging_count, 20u);
  EXPECT_EQ(schedule.steps[steps[2]].staging.offset, 0u);
  EXPECT_EQ(schedule.steps[steps[3]].staging.offset, 10u);
  EXPECT_EQ(schedule.steps[steps[2]].deps, std::vector<std::uint32_t>{steps[0]});
  EXPECT_EQ(schedule.steps[steps[3]].deps, std::vector<std::uint32_t>{steps[1]});
}

TEST(WrittenRanges, MergesWhatIsWrittenAndListsTheGaps) {
  WrittenRanges written;
  using Gaps = std::vector<std::pair<std::uint64_t, std::uint64_t>>;
  EXPECT_EQ(written.missing(0, 10), (Gaps{{0, 10}}));
  written.add(2, 3);  // [2, 5)
  written.add(7, 1);  // [7, 8)
  EXPECT_EQ(written.missing(0, 10), (Gaps{{0, 2}, {5, 2}, {8, 2}}));
  EXPECT_EQ(written.missing(3, 2), Gaps{});
  EXPECT_EQ(written.missing(4, 4), (Gaps{{5, 2}}));
  written.add(5, 2);  // touches both neighbours: one range [2, 8)
  EXPECT_EQ(written.missing(0, 10), (Gaps{{0, 2}, {8, 2}}));
  written.add(0, 0);
  written.add(0, 10);
  EXPECT_EQ(written.missing(0, 10), Gaps{});
}

// Out of place, what the program has not written yet is read from Input; in place, from Data.
TEST(StepWriter, OutOfPlaceReadsTheInputUntilDataIsWritten) {
  CollectiveCall call{Collective::AllReduce, 0, 2, 8, 0, 4};
  for (bool in_place : {true, false}) {
    call.in_place = in_place;
    StepWriter writer(call);
    const StepIndex send = writer.send(1, data_block(0, 4), 0);
    const StepIndex reduce = writer.recv_reduce(1, data_block(4, 4), 0, false);
    const StepIndex forward = writer.send(1, data_block(4, 4), 1);
    const Schedule schedule = std::move(writer).finish();
    const Buffer first = in_place ? Buffer::Data : Buffer::Input;
    EXPECT_EQ(schedule.steps[send].src.buffer, first);
    EXPECT_EQ(schedule.steps[reduce].src.buffer, first);
    EXPECT_EQ(schedule.steps[reduce].src.offset, 4u);
    EXPECT_EQ(schedule.steps[reduce].dst.buffer, Buffer::Data);
    EXPECT_EQ(schedule.steps[forward].src.buffer, Buffer::Data);  // the reduced values
    EXPECT_EQ(schedule.steps[forward].deps, std::vector<std::uint32_t>{reduce});
    // Out of place, Data[0..4) was never written: finish() copies it from Input for the result.
    ASSERT_EQ(schedule.steps.size(), in_place ? 3u : 4u);
    if (!in_place) {
      const Step& copy = schedule.steps.back();
      EXPECT_EQ(copy.kind, StepKind::Copy);
      EXPECT_EQ(copy.src.buffer, Buffer::Input);
      EXPECT_EQ(copy.dst.offset, 0u);
      EXPECT_EQ(copy.dst.count, 4u);
      EXPECT_TRUE(copy.deps.empty());
    }
  }
}

// A read that straddles written and unwritten elements copies only the unwritten ones first.
TEST(StepWriter, OutOfPlaceCopiesOnlyTheUnwrittenPartOfAStraddlingRead) {
  CollectiveCall call{Collective::AllReduce, 0, 2, 8, 0, 8};
  call.in_place = false;
  StepWriter writer(call);
  const StepIndex recv = writer.recv(1, data_block(0, 3), 0);
  const StepIndex send = writer.send(1, data_block(0, 8), 1);
  const Schedule schedule = std::move(writer).finish();
  ASSERT_EQ(schedule.steps.size(), 3u);
  const Step& copy = schedule.steps[1];
  EXPECT_EQ(copy.kind, StepKind::Copy);
  EXPECT_EQ(copy.src.buffer, Buffer::Input);
  EXPECT_EQ(copy.src.offset, 3u);
  EXPECT_EQ(copy.dst.offset, 3u);
  EXPECT_EQ(copy.dst.count, 5u);
  EXPECT_EQ(recv, 0u);
  EXPECT_EQ(send, 2u);
  EXPECT_EQ(schedule.steps[send].src.buffer, Buffer::Data);
  EXPECT_EQ(schedule.steps[send].deps, (std::vector<std::uint32_t>{0, 1}));
}

// An all-gather's input is its own block of Data: sends of that block read Input at offset 0.
TEST(StepWriter, AllGatherInputStandsForTheRanksOwnBlock) {
  CollectiveCall call{Collective::AllGather, 2, 3, 5, 0, 100};
  call.in_place = false;
  StepWriter writer(call);
  writer.send(0, data_block(10, 5), 0);
  writer.recv(0, data_block(0, 5), 0);
  const Schedule schedule = std::move(writer).finish();
  EXPECT_EQ(schedule.steps[0].src.buffer, Buffer::Input);
  EXPECT_EQ(schedule.steps[0].src.offset, 0u);
  // Its own block is part of the result and was never written: one copy, of that block only.
  ASSERT_EQ(schedule.steps.size(), 3u);
  EXPECT_EQ(schedule.steps[2].kind, StepKind::Copy);
  EXPECT_EQ(schedule.steps[2].dst.offset, 10u);
  EXPECT_EQ(schedule.steps[2].dst.count, 5u);
}

// Out of place, no all-reduce copies anything on two or more ranks: every block's first send and
// first reduce read the input, and every element of the result is written by a receive or a reduce.
TEST(Schedules, OutOfPlaceAllReduceCopiesNothing) {
  for (const Algorithm& algorithm : algorithms(Collective::AllReduce)) {
    for (int p = 2; p <= 17; ++p) {
      for (std::uint64_t count : {std::uint64_t{1}, static_cast<std::uint64_t>(p + 1), std::uint64_t{1000}}) {
        for (std::uint64_t chunk : {std::uint64_t{7}, std::uint64_t{1} << 20}) {
          for (int rank = 0; rank < p; ++rank) {
            CollectiveCall call{Collective::AllReduce, rank, p, count, 0, chunk};
            call.in_place = false;
            const Schedule schedule = algorithm.build(call);
            const auto copies = std::count_if(schedule.steps.begin(), schedule.steps.end(),
                                              [](const Step& step) { return step.kind == StepKind::Copy; });
            ASSERT_EQ(copies, 0) << algorithm.name << " P=" << p << " count=" << count << " chunk=" << chunk
                                 << " rank " << rank;
          }
        }
      }
    }
  }
}

TEST(Partition, PartsCoverTheBufferAndDifferByAtMostOne) {
  for (std::uint64_t total : {0, 1, 5, 16, 17}) {
    for (int parts : {1, 3, 4, 17}) {
      std::uint64_t next = 0;
      for (int i = 0; i < parts; ++i) {
        const Block part = part_of(total, parts, i);
        EXPECT_EQ(part.offset, next);
        EXPECT_LE(part.count, total / static_cast<std::uint64_t>(parts) + 1);
        next += part.count;
      }
      EXPECT_EQ(next, total);
    }
  }
}

// --- topology ----------------------------------------------------------------------------------

// Every rank reachable from the root exactly once, parents and children agreeing.
void expect_spanning_tree(const std::vector<TreeLinks>& tree, const std::string& what) {
  const int p = static_cast<int>(tree.size());
  int roots = 0;
  std::vector<int> parent_seen(static_cast<std::size_t>(p), -1);
  for (int r = 0; r < p; ++r) {
    if (tree[static_cast<std::size_t>(r)].parent < 0) ++roots;
    for (int child : tree[static_cast<std::size_t>(r)].children) {
      ASSERT_GE(child, 0) << what;
      ASSERT_LT(child, p) << what;
      EXPECT_EQ(tree[static_cast<std::size_t>(child)].parent, r) << what << " child " << child;
      EXPECT_EQ(parent_seen[static_cast<std::size_t>(child)], -1) << what << " child " << child << " twice";
      parent_seen[static_cast<std::size_t>(child)] = r;
    }
  }
  EXPECT_EQ(roots, 1) << what;
  for (int r = 0; r < p; ++r) {
    if (tree[static_cast<std::size_t>(r)].parent >= 0) {
      EXPECT_NE(parent_seen[static_cast<std::size_t>(r)], -1) << what;
    }
  }
}

TEST(Topology, TreesSpanEverySize) {
  for (int p = 1; p <= 70; ++p) {
    std::vector<TreeLinks> binomial, heap, first, second;
    for (int r = 0; r < p; ++r) {
      binomial.push_back(binomial_tree(r, p));
      heap.push_back(heap_tree(r, p));
      first.push_back(double_tree(r, p, 0));
      second.push_back(double_tree(r, p, 1));
    }
    expect_spanning_tree(binomial, fmt::format("binomial p={}", p));
    expect_spanning_tree(heap, fmt::format("heap p={}", p));
    expect_spanning_tree(first, fmt::format("double tree 0 p={}", p));
    expect_spanning_tree(second, fmt::format("double tree 1 p={}", p));
    int depth_limit = 2 * ceil_log2(p) + 2;
    for (int r = 0; r < p; ++r) {
      EXPECT_LE(first[static_cast<std::size_t>(r)].children.size(), 2u);
      EXPECT_LE(second[static_cast<std::size_t>(r)].children.size(), 2u);
      // NCCL's property: interior in at most one of the two trees.
      EXPECT_FALSE(!first[static_cast<std::size_t>(r)].children.empty() &&
                   !second[static_cast<std::size_t>(r)].children.empty())
          << "p=" << p << " rank " << r << " is interior in both trees";
      int depth = 0;
      for (int x = r; first[static_cast<std::size_t>(x)].parent >= 0;
           x = first[static_cast<std::size_t>(x)].parent) {
        ++depth;
      }
      EXPECT_LE(depth, depth_limit) << "p=" << p;
    }
  }
}

TEST(Topology, FoldRenumbersTheRemainingRanksContiguously) {
  for (int p = 1; p <= 40; ++p) {
    const Fold fold(p);
    EXPECT_EQ(fold.pow2 + fold.extra, p);
    EXPECT_LE(fold.extra, fold.pow2 - 1 + (p == 1 ? 1 : 0));
    std::set<int> new_ranks;
    for (int r = 0; r < p; ++r) {
      if (fold.sits_out(r)) continue;
      const int v = fold.new_rank(r);
      EXPECT_EQ(fold.real_rank(v), r);
      new_ranks.insert(v);
    }
    EXPECT_EQ(static_cast<int>(new_ranks.size()), fold.pow2);
    EXPECT_EQ(fold.first_rank(0), 0);
    EXPECT_EQ(fold.first_rank(fold.pow2), p);
  }
}

// --- the simulator's checks ----------------------------------------------------------------------

void expect_protocol_error(ScheduleBuilder build, const std::string& needle) {
  const Algorithm broken{Collective::AllReduce, "broken", "a deliberately broken schedule", build};
  const CollectiveCall call{Collective::AllReduce, 0, 2, 4, 0, 4};
  try {
    simulate(broken, call, DataType::Int32, ReduceOp::Sum, zeros(call, DataType::Int32));
    ADD_FAILURE() << "no error; expected one mentioning \"" << needle << "\"";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::Protocol) << error.what();
    EXPECT_NE(std::string(error.what()).find(needle), std::string::npos) << error.what();
  }
}

TEST(SimulatorChecks, TagMismatch) {
  expect_protocol_error(
      [](const CollectiveCall& call) {
        StepWriter writer(call);
        if (call.rank == 0) writer.send(1, data_block(0, 4), 7);
        if (call.rank == 1) writer.recv(0, data_block(0, 4), 8);
        return std::move(writer).finish();
      },
      "rank 1 step 0 (Recv Data[0..4) from rank 0, tag 0x8): the next message from rank 0 is its step 0");
}

TEST(SimulatorChecks, SizeMismatch) {
  expect_protocol_error(
      [](const CollectiveCall& call) {
        StepWriter writer(call);
        if (call.rank == 0) writer.send(1, data_block(0, 4), 7);
        if (call.rank == 1) writer.recv(0, data_block(0, 3), 7);
        return std::move(writer).finish();
      },
      "with tag 0x7 and 4 elements");
}

TEST(SimulatorChecks, Deadlock) {
  expect_protocol_error(
      [](const CollectiveCall& call) {
        // Each rank receives into the block it must send first: a cycle.
        StepWriter writer(call);
        const int peer = 1 - call.rank;
        writer.recv(peer, data_block(0, 4), 1);
        writer.send(peer, data_block(0, 4), 1);
        return std::move(writer).finish();
      },
      "deadlock");
}

TEST(SimulatorChecks, MessageNeverReceived) {
  expect_protocol_error(
      [](const CollectiveCall& call) {
        StepWriter writer(call);
        if (call.rank == 0) writer.send(1, data_block(0, 4), 3);
        return std::move(writer).finish();
      },
      "rank 0 step 0 (Send Data[0..4) to rank 1, tag 0x3) was never received");
}

TEST(SimulatorChecks, BlockOutOfRange) {
  expect_protocol_error(
      [](const CollectiveCall& call) {
        StepWriter writer(call);
        if (call.rank == 0) writer.send(1, data_block(2, 4), 3);
        if (call.rank == 1) writer.recv(0, data_block(0, 4), 3);
        return std::move(writer).finish();
      },
      "outside the Data buffer of 4 elements");
}

TEST(SimulatorChecks, BadPeerAndDependency) {
  expect_protocol_error(
      [](const CollectiveCall& call) {
        StepWriter writer(call);
        writer.send(call.rank, data_block(0, 4), 3);
        return std::move(writer).finish();
      },
      "is not another rank");
  expect_protocol_error(
      [](const CollectiveCall& call) {
        Schedule schedule;
        Step step;
        step.kind = StepKind::Copy;
        step.src = data_block(0, 1);
        step.dst = data_block(1, 1);
        step.deps = {0};
        schedule.steps.push_back(step);
        (void)call;
        return schedule;
      },
      "dependency 0 is not an earlier step");
}

TEST(SimulatorChecks, InputIsReadOnlyAndOnlyOutOfPlace) {
  expect_protocol_error(
      [](const CollectiveCall& call) {
        StepWriter writer(call);
        if (call.rank == 0) writer.send(1, Block{Buffer::Input, 0, 4}, 3);
        if (call.rank == 1) writer.recv(0, data_block(0, 4), 3);
        return std::move(writer).finish();
      },
      "reads Input in an in-place call");
  expect_protocol_error(
      [](const CollectiveCall& call) {
        StepWriter writer(call);
        if (call.rank == 0) writer.send(1, data_block(0, 4), 3);
        if (call.rank == 1) writer.recv(0, Block{Buffer::Input, 0, 4}, 3);
        return std::move(writer).finish();
      },
      "it writes Input[0..4), not Data");
}

TEST(SimulatorChecks, RejectsInputsOfTheWrongSize) {
  const CollectiveCall call{Collective::AllReduce, 0, 2, 4, 0, 4};
  auto inputs = zeros(call, DataType::Int32);
  inputs[1].pop_back();
  try {
    simulate(algorithm(Collective::AllReduce, "ring"), call, DataType::Int32, ReduceOp::Sum, inputs);
    ADD_FAILURE() << "no error";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(error.what()).find("rank 1's input holds 15 bytes, expected 16"), std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace canopy::collectives
