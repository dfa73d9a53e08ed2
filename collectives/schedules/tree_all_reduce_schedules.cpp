// All-reduce along trees: the reduction of each element is computed once, at a tree's root, and
// copied down, so every rank ends with the same bits.
#include "collectives/schedules/builders.hpp"
#include "collectives/schedules/topology.hpp"

namespace canopy::collectives {
namespace {

// The reduce-up half of chunk `c` of `block` through `tree` (links in real ranks), in round `round`.
// A child lower than this rank covers lower ranks in an in-order tree, so its partial goes on the left.
void write_up(StepWriter& writer, const TreeLinks& tree, const Block& chunk, std::uint64_t c,
              std::uint32_t round) {
  for (int child : tree.children) {
    writer.recv_reduce(child, chunk, message_tag(round, c), /*incoming_first=*/child < writer.rank());
  }
  if (tree.parent >= 0) writer.send(tree.parent, chunk, message_tag(round, c));
}

// The broadcast-down half, in round `round`: the result comes from the root and goes on to the children.
void write_down(StepWriter& writer, const TreeLinks& tree, const Block& chunk, std::uint64_t c,
                std::uint32_t round) {
  if (tree.parent >= 0) writer.recv(tree.parent, chunk, message_tag(round, c));
  for (int child : tree.children) writer.send(child, chunk, message_tag(round, c));
}

}  // namespace

// The seed's two steps: a binomial reduce to rank 0, then a binomial broadcast from it.
// 2 lg p (alpha + n beta) + lg p n gamma.
Schedule all_reduce_reduce_broadcast(const CollectiveCall& call) {
  StepWriter writer(call);
  write_binomial_reduce(writer, /*root=*/0, /*round=*/0);
  write_binomial_broadcast(writer, /*root=*/0, /*round=*/1);
  return std::move(writer).finish();
}

// Reduce up and broadcast down a binary tree at once, chunk by chunk: while chunk c comes down,
// chunk c+1 goes up. ~ n beta + 2 lg p alpha for large n (an interior rank sends 3 n bytes in all:
// one copy up, two down; leaves send n).
Schedule all_reduce_tree(const CollectiveCall& call) {
  StepWriter writer(call);
  TreeLinks tree = heap_tree(call.rank, call.size);  // rooted at rank 0; heap ranks are real ranks
  const Block data = data_block(0, call.count);
  for (std::uint64_t c = 0; c < chunk_total(data, call.chunk_count); ++c) {
    const Block chunk = chunk_of(data, call.chunk_count, c);
    write_up(writer, tree, chunk, c, 0);
    write_down(writer, tree, chunk, c, 1);
  }
  return std::move(writer).finish();
}

// Two complementary binary trees, each carrying half of the buffer (NCCL's double binary tree):
// every rank is interior in at most one tree, so the sends that a single tree leaves to the interior
// ranks are shared out: a rank sends about 2n bytes instead of 3n.
// A pair of ranks may be parent and child in one tree and child and parent in the other, so one
// (ordered) connection carries both the early messages of one tree's reduce and the late ones of the
// other's broadcast. Interleaving them chunk for chunk would make every reduce message wait in line
// behind a broadcast message that needs a whole round trip through the tree: the broadcast of chunk
// c is written `lag` chunks after its reduce, about the time that round trip takes.
Schedule all_reduce_double_tree(const CollectiveCall& call) {
  StepWriter writer(call);
  const TreeLinks trees[2] = {double_tree(call.rank, call.size, 0), double_tree(call.rank, call.size, 1)};
  const Block halves[2] = {data_block(0, call.count / 2),
                           data_block(call.count / 2, call.count - call.count / 2)};
  const std::uint64_t chunks = chunk_total(halves[1], call.chunk_count);  // the larger half
  const auto lag = static_cast<std::uint64_t>(2 * ceil_log2(call.size) + 2);
  auto each_tree = [&](std::uint64_t c, auto write) {
    for (int which = 0; which < 2; ++which) {
      if (c < chunk_total(halves[which], call.chunk_count)) {
        write(writer, trees[which], chunk_of(halves[which], call.chunk_count, c), c,
              static_cast<std::uint32_t>(2 * which));
      }
    }
  };
  for (std::uint64_t i = 0; i < chunks + lag; ++i) {
    if (i < chunks) each_tree(i, write_up);
    if (i >= lag) {
      each_tree(i - lag, [](StepWriter& w, const TreeLinks& tree, const Block& chunk, std::uint64_t c,
                            std::uint32_t round) { write_down(w, tree, chunk, c, round + 1); });
    }
  }
  return std::move(writer).finish();
}

}  // namespace canopy::collectives
