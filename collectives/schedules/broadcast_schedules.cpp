// Broadcast: the root's Data reaches every rank's Data.
#include <algorithm>

#include "collectives/schedules/builders.hpp"
#include "collectives/schedules/host_groups.hpp"
#include "collectives/schedules/topology.hpp"

namespace canopy::collectives {
namespace {

Block whole_buffer(const StepWriter& writer) {
  return data_block(0, writer.call().count);
}

}  // namespace

// The root sends the whole buffer to each rank in turn: (p-1)(alpha + n beta) on the root's link.
Schedule broadcast_flat(const CollectiveCall& call) {
  StepWriter writer(call);
  const int root = call.root;
  if (call.rank == root) {
    for (int v = 1; v < call.size; ++v)
      writer.send_chunks(to_real(v, root, call.size), whole_buffer(writer), 0);
  } else {
    writer.recv_chunks(root, whole_buffer(writer), 0);
  }
  return std::move(writer).finish();
}

// Receive from the parent, forward to each child (largest subtree first): the number of holders
// doubles every round, lg p (alpha + n beta). Chunks are forwarded as they arrive.
void write_binomial_broadcast(StepWriter& writer, const std::vector<int>& members, int root_index,
                              std::uint32_t round) {
  const VirtualRanks ranks(members, members[static_cast<std::size_t>(root_index)]);
  const TreeLinks tree = binomial_tree(ranks.of(writer.rank()), ranks.size());
  if (tree.parent >= 0) writer.recv_chunks(ranks.real(tree.parent), whole_buffer(writer), round);
  for (int child : tree.children) writer.send_chunks(ranks.real(child), whole_buffer(writer), round);
}

void write_binomial_broadcast(StepWriter& writer, int root, std::uint32_t round) {
  write_binomial_broadcast(writer, all_ranks(writer.call()), root, round);
}

Schedule broadcast_binomial(const CollectiveCall& call) {
  StepWriter writer(call);
  write_binomial_broadcast(writer, call.root, 0);
  return std::move(writer).finish();
}

// A pipelined chain from the root through every rank, host after host (HostGroups::rooted_order: it
// enters every other host once): chunk c moves one hop per round while chunk c+1 follows,
// (p + k - 2)(alpha + n beta / k) for k chunks.
Schedule broadcast_chain(const CollectiveCall& call) {
  StepWriter writer(call);
  const VirtualRanks chain(HostGroups::of(call).rooted_order(call.root), call.root);
  const int v = chain.of(call.rank);
  const Block data = whole_buffer(writer);
  for (std::uint64_t c = 0; c < chunk_total(data, call.chunk_count); ++c) {
    const Block chunk = chunk_of(data, call.chunk_count, c);
    if (v > 0) writer.recv(chain.real(v - 1), chunk, message_tag(0, c));
    if (v + 1 < call.size) writer.send(chain.real(v + 1), chunk, message_tag(0, c));
  }
  return std::move(writer).finish();
}

// A pipelined binary tree (heap order from the root): chunk by chunk, receive from the parent and
// send to both children. Depth lg p, each interior rank sends everything twice.
Schedule broadcast_binary_tree(const CollectiveCall& call) {
  StepWriter writer(call);
  const TreeLinks tree = heap_tree(to_virtual(call.rank, call.root, call.size), call.size);
  const Block data = whole_buffer(writer);
  for (std::uint64_t c = 0; c < chunk_total(data, call.chunk_count); ++c) {
    const Block chunk = chunk_of(data, call.chunk_count, c);
    if (tree.parent >= 0) writer.recv(to_real(tree.parent, call.root, call.size), chunk, message_tag(0, c));
    for (int child : tree.children)
      writer.send(to_real(child, call.root, call.size), chunk, message_tag(0, c));
  }
  return std::move(writer).finish();
}

// Van de Geijn: split the buffer into p parts, part i for virtual rank i; a binomial scatter gives
// each rank its part (every rank receives its whole subtree's parts from its parent and passes each
// child the child's subtree's parts), then a ring all-gather circulates the parts. Virtual ranks run
// host after host from the root (HostGroups::rooted_order), so the ring crosses between hosts once per
// host. (lg p + p - 1) alpha + 2 (p-1)/p n beta.
Schedule broadcast_scatter_allgather(const CollectiveCall& call) {
  StepWriter writer(call);
  const int size = call.size;
  const VirtualRanks ranks(HostGroups::of(call).rooted_order(call.root), call.root);
  const int v = ranks.of(call.rank);
  auto parts = [&](int first, int last) { return parts_of(call.count, size, first, last); };

  // Scatter: each rank receives its binomial subtree's parts and passes each child the child's.
  const TreeLinks tree = binomial_tree(v, size);
  auto subtree_end = [&](int u) { return u + binomial_subtree_size(u, size); };
  if (tree.parent >= 0) writer.recv_chunks(ranks.real(tree.parent), parts(v, subtree_end(v)), 0);
  for (int child : tree.children) writer.send_chunks(ranks.real(child), parts(child, subtree_end(child)), 0);

  // Ring all-gather over virtual ranks: in round s, pass on the part received in round s-1.
  const int next = ranks.real((v + 1) % size);
  const int prev = ranks.real((v - 1 + size) % size);
  for (int s = 0; s + 1 < size; ++s) {
    writer.exchange_chunks(next, part_of(call.count, size, (v - s + size) % size), prev,
                           part_of(call.count, size, (v - s - 1 + 2 * size) % size),
                           static_cast<std::uint32_t>(1 + s));
  }
  return std::move(writer).finish();
}

}  // namespace canopy::collectives
