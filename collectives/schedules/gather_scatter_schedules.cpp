// Gather: every rank's Input block lands in block r of the root's Data. Scatter: block r of the root's
// Input lands in rank r's Data.
//
// The binomial versions move whole subtrees: in virtual ranks (the root is 0), rank v's subtree is
// [v, v + binomial_subtree_size(v)), and a rank between the root and the leaves keeps its subtree's
// blocks in Staging, in virtual order. At the root the blocks lie in real order, so a subtree that
// wraps past the last rank moves as two messages, one for each side of the wrap.
#include <algorithm>

#include "collectives/schedules/builders.hpp"
#include "collectives/schedules/topology.hpp"

namespace canopy::collectives {
namespace {

// A run of virtual ranks [first, last), and where the root keeps them: pieces that are contiguous in
// real rank order (at most two).
struct Piece {
  int first = 0;  // virtual ranks
  int last = 0;
};
std::vector<Piece> real_order_pieces(int first, int last, int root, int size) {
  const int wrap = size - root;  // the first virtual rank whose real rank is 0
  std::vector<Piece> pieces;
  if (first < std::min(last, wrap)) pieces.push_back({first, std::min(last, wrap)});
  if (std::max(first, wrap) < last) pieces.push_back({std::max(first, wrap), last});
  return pieces;
}

// The blocks of virtual ranks [piece.first, piece.last) in a buffer that starts with virtual rank
// `base` (a subtree in Staging or Input), or, for base < 0, in the root's buffer in real order.
struct Layout {
  Buffer buffer;
  std::uint64_t offset;  // of virtual rank `base`
  int base;              // -1: real order
};
Block blocks_of(const Layout& layout, const Piece& piece, const CollectiveCall& call) {
  const std::uint64_t n = call.count;
  const auto count = static_cast<std::uint64_t>(piece.last - piece.first) * n;
  const int start = layout.base < 0 ? to_real(piece.first, call.root, call.size) : piece.first - layout.base;
  return Block{layout.buffer, layout.offset + static_cast<std::uint64_t>(start) * n, count};
}

// How the blocks of virtual ranks [first, last) move between a rank and its parent or child: as one
// message, or split at the wrap where one of the two is the root.
std::vector<Piece> pieces_between(int first, int last, bool either_is_root, const CollectiveCall& call) {
  if (!either_is_root) return {{first, last}};
  return real_order_pieces(first, last, call.root, call.size);
}

}  // namespace

// Every rank sends its block to the root: (p-1)(alpha + n beta) on the root's link. The root also sends
// each rank an empty message, which the rank takes last: two ranks that both believe they are the root
// (a mismatched call) would otherwise wait for each other's block until the deadline; this way each one's
// empty message meets the other's receive, and both report the mismatch at once.
Schedule gather_flat(const CollectiveCall& call) {
  StepWriter writer(call);
  constexpr std::uint32_t kBlocks = 0;
  constexpr std::uint32_t kRootSignal = 1;
  if (call.rank != call.root) {
    writer.send_chunks(call.root, input_block(0, call.count), kBlocks);
    writer.recv(call.root, data_block(0, 0), message_tag(kRootSignal, 0));
  } else {
    for (int v = 1; v < call.size; ++v)
      writer.send(to_real(v, call.root, call.size), data_block(0, 0), message_tag(kRootSignal, 0));
    for (int v = 1; v < call.size; ++v) {
      const int from = to_real(v, call.root, call.size);
      writer.recv_chunks(from, data_block(static_cast<std::uint64_t>(from) * call.count, call.count),
                         kBlocks);
    }
  }
  return std::move(writer).finish();
}

// Each rank gathers its children's subtrees (smallest first, as they finish first), then sends its own
// subtree to its parent: lg p rounds, the root receiving (p-1) n bytes.
Schedule gather_binomial(const CollectiveCall& call) {
  StepWriter writer(call);
  const int size = call.size;
  const int v = to_virtual(call.rank, call.root, size);
  const TreeLinks tree = binomial_tree(v, size);
  const int span = binomial_subtree_size(v, size);
  Layout mine{Buffer::Data, 0, -1};  // the root gathers straight into its Data, in real order
  if (v != 0) {
    mine = tree.children.empty() ? Layout{Buffer::Input, 0, v} : Layout{Buffer::Staging, 0, v};
    if (!tree.children.empty()) {
      const Block subtree = writer.scratch(static_cast<std::uint64_t>(span) * call.count);
      mine.offset = subtree.offset;
      writer.copy(input_block(0, call.count), blocks_of(mine, {v, v + 1}, call));
    }
  }
  for (auto child = tree.children.rbegin(); child != tree.children.rend(); ++child) {
    const int from = to_real(*child, call.root, size);
    const std::vector<Piece> pieces =
        pieces_between(*child, *child + binomial_subtree_size(*child, size), v == 0, call);
    for (std::size_t i = 0; i < pieces.size(); ++i)
      writer.recv_chunks(from, blocks_of(mine, pieces[i], call), static_cast<std::uint32_t>(i));
  }
  if (tree.parent >= 0) {
    const int to = to_real(tree.parent, call.root, size);
    const std::vector<Piece> pieces = pieces_between(v, v + span, tree.parent == 0, call);
    for (std::size_t i = 0; i < pieces.size(); ++i)
      writer.send_chunks(to, blocks_of(mine, pieces[i], call), static_cast<std::uint32_t>(i));
  }
  return std::move(writer).finish();
}

// The root sends each rank its block in turn: (p-1)(alpha + n beta) on the root's link.
Schedule scatter_flat(const CollectiveCall& call) {
  StepWriter writer(call);
  const std::uint64_t n = call.count;
  if (call.rank != call.root) {
    writer.recv_chunks(call.root, data_block(0, n), 0);
  } else {
    for (int v = 1; v < call.size; ++v) {
      const int to = to_real(v, call.root, call.size);
      writer.send_chunks(to, input_block(static_cast<std::uint64_t>(to) * n, n), 0);
    }
    if (!call.in_place)
      writer.copy(input_block(static_cast<std::uint64_t>(call.root) * n, n), data_block(0, n));
  }
  return std::move(writer).finish();
}

// Each rank receives its subtree's blocks from its parent and passes each child the child's subtree
// (largest first, as it has the most to pass on): lg p rounds, the root sending (p-1) n bytes.
Schedule scatter_binomial(const CollectiveCall& call) {
  StepWriter writer(call);
  const int size = call.size;
  const std::uint64_t n = call.count;
  const int v = to_virtual(call.rank, call.root, size);
  const TreeLinks tree = binomial_tree(v, size);
  const int span = binomial_subtree_size(v, size);
  Layout mine{Buffer::Input, 0, -1};  // the root sends from its Input, in real order
  if (v != 0) {
    mine = tree.children.empty() ? Layout{Buffer::Data, 0, v} : Layout{Buffer::Staging, 0, v};
    if (!tree.children.empty()) mine.offset = writer.scratch(static_cast<std::uint64_t>(span) * n).offset;
    const int from = to_real(tree.parent, call.root, size);
    const std::vector<Piece> pieces = pieces_between(v, v + span, tree.parent == 0, call);
    for (std::size_t i = 0; i < pieces.size(); ++i)
      writer.recv_chunks(from, blocks_of(mine, pieces[i], call), static_cast<std::uint32_t>(i));
  }
  if (mine.buffer != Buffer::Data && !(v == 0 && call.in_place))
    writer.copy(blocks_of(mine, {v, v + 1}, call), data_block(0, n));
  for (int child : tree.children) {
    const int to = to_real(child, call.root, size);
    const std::vector<Piece> pieces =
        pieces_between(child, child + binomial_subtree_size(child, size), v == 0, call);
    for (std::size_t i = 0; i < pieces.size(); ++i)
      writer.send_chunks(to, blocks_of(mine, pieces[i], call), static_cast<std::uint32_t>(i));
  }
  return std::move(writer).finish();
}

}  // namespace canopy::collectives
