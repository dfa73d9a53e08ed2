// Reduce: the reduction of every rank's Data lands in the root's Data (other ranks' Data is used as
// the accumulator of their subtree and left clobbered).
#include <algorithm>

#include "collectives/schedules/builders.hpp"
#include "collectives/schedules/host_groups.hpp"
#include "collectives/schedules/topology.hpp"

namespace canopy::collectives {

// The binomial tree upside down: chunk by chunk, fold in each child's subtree (smallest first, the
// one that finishes first) and pass the sum to the parent. lg p (alpha + n beta + n gamma).
// A child's subtree covers higher virtual ranks than this rank's own part, so it goes on the right.
void write_binomial_reduce(StepWriter& writer, const std::vector<int>& members, int root_index,
                           std::uint32_t round) {
  const VirtualRanks ranks(members, members[static_cast<std::size_t>(root_index)]);
  TreeLinks tree = binomial_tree(ranks.of(writer.rank()), ranks.size());
  std::reverse(tree.children.begin(), tree.children.end());
  const Block data = data_block(0, writer.call().count);
  for (std::uint64_t c = 0; c < chunk_total(data, writer.chunk_count()); ++c) {
    const Block chunk = chunk_of(data, writer.chunk_count(), c);
    for (int child : tree.children) {
      writer.recv_reduce(ranks.real(child), chunk, message_tag(round, c), /*incoming_first=*/false);
    }
    if (tree.parent >= 0) writer.send(ranks.real(tree.parent), chunk, message_tag(round, c));
  }
}

void write_binomial_reduce(StepWriter& writer, int root, std::uint32_t round) {
  write_binomial_reduce(writer, all_ranks(writer.call()), root, round);
}

Schedule reduce_binomial(const CollectiveCall& call) {
  StepWriter writer(call);
  write_binomial_reduce(writer, call.root, 0);
  return std::move(writer).finish();
}

// A pipelined binary tree (heap order from the root): chunk by chunk, reduce both children's chunk
// into this rank's and send it up, so chunk c+1 climbs while chunk c is a level higher.
Schedule reduce_tree(const CollectiveCall& call) {
  StepWriter writer(call);
  const TreeLinks tree = heap_tree(to_virtual(call.rank, call.root, call.size), call.size);
  const Block data = data_block(0, call.count);
  for (std::uint64_t c = 0; c < chunk_total(data, call.chunk_count); ++c) {
    const Block chunk = chunk_of(data, call.chunk_count, c);
    for (int child : tree.children) {
      writer.recv_reduce(to_real(child, call.root, call.size), chunk, message_tag(0, c), false);
    }
    if (tree.parent >= 0) writer.send(to_real(tree.parent, call.root, call.size), chunk, message_tag(0, c));
  }
  return std::move(writer).finish();
}

}  // namespace canopy::collectives
