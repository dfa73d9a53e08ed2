#include "collectives/schedules/algorithms.hpp"

#include <array>
#include <cstdint>

#include "collectives/schedules/builders.hpp"
#include "collectives/schedules/host_groups.hpp"
#include "common/error.hpp"
#include "transport/envelope.hpp"

namespace canopy::collectives {
namespace {

// Algorithm::chain_of_messages of a ring (p-1 hops: a block reaches the rank before its owner) and of a
// ring all-reduce (a reduce-scatter's p-1 hops, then an all-gather's).
std::uint64_t ring_hops(const CollectiveCall& call) {
  return call.count == 0 ? 0 : static_cast<std::uint64_t>(call.size - 1);
}
std::uint64_t ring_all_reduce_hops(const CollectiveCall& call) {
  return 2 * ring_hops(call);
}
// The two-level all-reduce's: a slice with data goes round the hosts' ring twice, 2(H-1) hops.
std::uint64_t across_hosts_hops(const CollectiveCall& call) {
  return call.count == 0 ? 0 : 2 * static_cast<std::uint64_t>(HostGroups::of(call).hosts() - 1);
}

// The order within a collective is part of the wire format (an algorithm's index travels in frame
// headers): append, never reorder.
constexpr std::array kBroadcast{
    Algorithm{Collective::Broadcast, "flat", "the root sends the whole buffer to each rank in turn",
              broadcast_flat},
    Algorithm{Collective::Broadcast, "binomial", "binomial tree: holders double every round",
              broadcast_binomial},
    Algorithm{Collective::Broadcast, "chain", "pipelined chain from the root, chunk by chunk",
              broadcast_chain, false, false, ring_hops},
    Algorithm{Collective::Broadcast, "binary-tree", "pipelined binary tree, chunk by chunk",
              broadcast_binary_tree},
    Algorithm{Collective::Broadcast, "scatter-allgather",
              "van de Geijn: binomial scatter, then ring all-gather", broadcast_scatter_allgather},
    Algorithm{Collective::Broadcast, "two-level",
              "binomial tree among one rank per host, then inside each host", broadcast_two_level, true},
    Algorithm{Collective::Broadcast, "one-shot",
              "through the host's cells: the root writes the buffer once, every rank reads it",
              broadcast_flat, false, true},
};
constexpr std::array kReduce{
    Algorithm{Collective::Reduce, "binomial", "binomial tree towards the root", reduce_binomial},
    Algorithm{Collective::Reduce, "tree", "pipelined binary tree towards the root, chunk by chunk",
              reduce_tree},
    Algorithm{Collective::Reduce, "two-level",
              "binomial reduce inside each host, then among one rank per host", reduce_two_level, true},
    Algorithm{
        Collective::Reduce, "one-shot",
        "through the host's cells: every rank writes its buffer once, the root reduces them in rank order",
        reduce_one_shot, false, true},
};
constexpr std::array kAllReduce{
    Algorithm{Collective::AllReduce, "reduce-broadcast", "binomial reduce to rank 0, then binomial broadcast",
              all_reduce_reduce_broadcast},
    Algorithm{Collective::AllReduce, "tree", "pipelined binary tree: reduce up and broadcast down at once",
              all_reduce_tree},
    Algorithm{Collective::AllReduce, "double-tree",
              "two complementary pipelined binary trees, half the data each", all_reduce_double_tree},
    Algorithm{Collective::AllReduce, "recursive-doubling", "lg p exchanges of the whole buffer",
              all_reduce_recursive_doubling},
    Algorithm{Collective::AllReduce, "rabenseifner",
              "recursive-halving reduce-scatter, then recursive-doubling all-gather",
              all_reduce_rabenseifner},
    Algorithm{Collective::AllReduce, "ring", "pipelined ring: reduce-scatter, then all-gather",
              all_reduce_ring, false, false, ring_all_reduce_hops},
    Algorithm{
        Collective::AllReduce, "two-level",
        "reduce-scatter inside each host, ring all-reduce of each slice across hosts, all-gather inside",
        all_reduce_two_level, true, false, across_hosts_hops},
    Algorithm{
        Collective::AllReduce, "one-shot",
        "through the host's cells: every rank writes its buffer once, then reduces all of them in rank order",
        all_reduce_one_shot, false, true},
};
constexpr std::array kAllGather{
    Algorithm{Collective::AllGather, "ring", "p-1 rounds passing blocks to the next rank", all_gather_ring,
              false, false, ring_hops},
    Algorithm{Collective::AllGather, "recursive-doubling", "lg p exchanges, doubling what each rank holds",
              all_gather_recursive_doubling},
};
constexpr std::array kReduceScatter{
    Algorithm{Collective::ReduceScatter, "ring", "p-1 rounds passing partial blocks to the next rank",
              reduce_scatter_ring, false, false, ring_hops},
    Algorithm{Collective::ReduceScatter, "recursive-halving",
              "lg p exchanges, halving what each rank reduces", reduce_scatter_recursive_halving},
};
constexpr std::array kBarrier{
    Algorithm{Collective::Barrier, "dissemination", "ceil(lg p) rounds of zero-byte signals to r + 2^k",
              barrier_dissemination},
    Algorithm{Collective::Barrier, "one-shot",
              "through the host's cells: every rank stamps its cell, then waits for all", barrier_one_shot,
              false, true},
};

constexpr std::array kAllToAll{
    Algorithm{Collective::AllToAll, "pairwise", "p-1 rounds: block r+k to rank r+k, block r-k from rank r-k",
              all_to_all_pairwise},
    Algorithm{Collective::AllToAll, "bruck",
              "ceil(lg p) rounds, each moving the blocks whose index has bit k set", all_to_all_bruck},
};
constexpr std::array kAllToAllV{
    Algorithm{Collective::AllToAllV, "pairwise", "p-1 rounds: counts to rank r+k, from rank r-k",
              all_to_all_v_pairwise},
};
constexpr std::array kGather{
    Algorithm{Collective::Gather, "flat", "every rank sends its block to the root", gather_flat},
    Algorithm{Collective::Gather, "binomial", "binomial tree: each rank sends its subtree's blocks up",
              gather_binomial},
};
constexpr std::array kScatter{
    Algorithm{Collective::Scatter, "flat", "the root sends each rank its block in turn", scatter_flat},
    Algorithm{Collective::Scatter, "binomial", "binomial tree: each rank passes its children their subtrees",
              scatter_binomial},
};

}  // namespace

std::span<const Algorithm> algorithms(Collective collective) {
  switch (collective) {
    case Collective::Broadcast:
      return kBroadcast;
    case Collective::Reduce:
      return kReduce;
    case Collective::AllReduce:
      return kAllReduce;
    case Collective::AllGather:
      return kAllGather;
    case Collective::ReduceScatter:
      return kReduceScatter;
    case Collective::Barrier:
      return kBarrier;
    case Collective::AllToAll:
      return kAllToAll;
    case Collective::AllToAllV:
      return kAllToAllV;
    case Collective::Gather:
      return kGather;
    case Collective::Scatter:
      return kScatter;
    case Collective::PointToPoint:
    case Collective::Bootstrap:
      break;
  }
  return {};
}

const Algorithm* find_algorithm(Collective collective, std::string_view name) {
  for (const Algorithm& algorithm : algorithms(collective)) {
    if (algorithm.name == name) return &algorithm;
  }
  return nullptr;
}

std::uint8_t algorithm_index(const Algorithm& algorithm) {
  const std::span<const Algorithm> table = algorithms(algorithm.collective);
  // Every call passes an entry of the table itself, found by its address; a copy is found by its name.
  for (std::size_t i = 0; i < table.size(); ++i)
    if (&table[i] == &algorithm) return static_cast<std::uint8_t>(i);
  for (std::size_t i = 0; i < table.size(); ++i) {
    if (table[i].name == algorithm.name) return static_cast<std::uint8_t>(i);
  }
  fail(ErrorCode::InvalidArgument, "algorithm_index: \"{}\" is not a {} algorithm of the table",
       algorithm.name, to_string(algorithm.collective));
}

namespace {

// Messages about an envelope (a mismatch, a timeout) name its algorithm, not its index.
std::string_view name_of(Collective collective, std::uint8_t index) {
  const std::span<const Algorithm> table = algorithms(collective);
  return index < table.size() ? table[index].name : std::string_view{};
}

[[maybe_unused]] const bool g_names_registered = (transport::set_algorithm_namer(&name_of), true);

}  // namespace

}  // namespace canopy::collectives
