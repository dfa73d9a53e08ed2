// The shapes the algorithms move data along: binomial trees, binary trees, the double binary tree,
// and the fold that lets power-of-two algorithms (recursive doubling and halving) run on any size.
#pragma once

#include <vector>

namespace canopy::collectives {

// One node's links in a tree over ranks 0..size-1 (or virtual ranks; see to_real).
struct TreeLinks {
  int parent = -1;            // -1 at the root
  std::vector<int> children;  // in the order the algorithm serves them
};

// Rank relative to a root and back: the algorithms build trees rooted at virtual rank 0.
inline int to_virtual(int rank, int root, int size) {
  return (rank - root + size) % size;
}
inline int to_real(int vrank, int root, int size) {
  return (vrank + root) % size;
}

// MPICH's binomial tree rooted at 0: v's parent is v without its lowest set bit, its children are
// v + 2^k for every 2^k below that bit. Children come largest subtree first (what a broadcast wants:
// the child with the most to forward starts first); a reduce may serve them in reverse.
TreeLinks binomial_tree(int vrank, int size);

// The virtual ranks in v's subtree of that tree: [v, v + binomial_subtree_size(v, size)).
int binomial_subtree_size(int vrank, int size);

// The binary heap rooted at 0: parent (v - 1) / 2, children 2v + 1 and 2v + 2.
TreeLinks heap_tree(int vrank, int size);

// Tree `which` (0 or 1) of the double binary tree over ranks 0..size-1. The two trees are built so
// that every rank is interior in at most one of them: tree 0 is an in-order "bit" tree on an even
// number N of ranks (N = size, or size - 1 when size is odd) whose interior nodes are the even ranks;
// tree 1 is its mirror (rank N-1-x) whose interior nodes are the odd ones. With an odd size the last
// rank hangs as a leaf under both roots (each root has one child in the bit tree).
TreeLinks double_tree(int rank, int size, int which);

// The fold of recursive doubling / halving on a size that is not a power of two: with pow2 the
// largest power of two <= size and extra = size - pow2, each even rank r < 2 * extra hands its data to
// r + 1 and sits out; the pow2 remaining ranks are renumbered 0..pow2-1 ("new ranks") and run the
// power-of-two algorithm; at the end the odd ranks hand the result back.
struct Fold {
  int size = 1;
  int pow2 = 1;
  int extra = 0;

  explicit Fold(int world_size);
  // The rank that sits out hands its data to the next one.
  bool sits_out(int rank) const { return rank < 2 * extra && rank % 2 == 0; }
  bool absorbs(int rank) const { return rank < 2 * extra && rank % 2 == 1; }
  // New rank of a participating rank, and back.
  int new_rank(int rank) const { return rank < 2 * extra ? rank / 2 : rank - extra; }
  int real_rank(int new_rank) const { return new_rank < extra ? 2 * new_rank + 1 : new_rank + extra; }
  // The first original rank new rank `v` speaks for (v == pow2 gives size): new ranks [a, b) speak
  // for original ranks [first_rank(a), first_rank(b)), a contiguous range.
  int first_rank(int v) const { return v < extra ? 2 * v : v + extra; }
};

// Ceiling of log2(n) for n >= 1.
int ceil_log2(int n);

}  // namespace canopy::collectives
