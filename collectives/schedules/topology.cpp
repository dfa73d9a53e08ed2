#include "collectives/schedules/topology.hpp"

#include <algorithm>

namespace canopy::collectives {
namespace {

int lowest_bit(int v) {
  return v & -v;
}

int highest_power_of_two_at_most(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

// Children of position x in the in-order bit tree over positions 0..n-1: a position with lowest set
// bit b covers (x - b, x + b); its children are the middles of the two halves, x - b/2 and (the
// right half being cut by n) the largest x + b/2^k still below n. Odd positions are leaves; position
// 0 is the root with the single child that covers everything else.
std::vector<int> bit_tree_children(int x, int n) {
  if (x == 0) {
    if (n <= 1) return {};
    return {highest_power_of_two_at_most(n - 1)};
  }
  const int half = lowest_bit(x) / 2;
  if (half == 0) return {};
  std::vector<int> children{x - half};
  for (int step = half; step >= 1; step /= 2) {
    if (x + step < n) {
      children.push_back(x + step);
      break;
    }
  }
  return children;
}

// Tree links of position x in the bit tree over n positions (the parent found by inverting children).
// A child is a power of two away from its parent, so only those positions are asked: O(lg^2 n), where
// asking every position made each rank's tree O(n) and a simulated call at thousands of ranks O(n^2).
TreeLinks bit_tree(int x, int n) {
  TreeLinks links;
  links.children = bit_tree_children(x, n);
  for (int distance = 1; distance < n; distance *= 2) {
    for (int y : {x - distance, x + distance}) {
      if (y < 0 || y >= n || (links.parent >= 0 && y > links.parent)) continue;
      for (int child : bit_tree_children(y, n))
        if (child == x) links.parent = y;  // the lowest such y, as a scan of every position finds
    }
  }
  return links;
}

}  // namespace

int binomial_subtree_size(int vrank, int size) {
  if (vrank == 0) return size;
  return std::min(lowest_bit(vrank), size - vrank);
}

TreeLinks binomial_tree(int vrank, int size) {
  TreeLinks links;
  const int low = vrank == 0 ? highest_power_of_two_at_most(size) * 2 : lowest_bit(vrank);
  if (vrank != 0) links.parent = vrank - low;
  for (int mask = low / 2; mask >= 1; mask /= 2) {
    if (vrank + mask < size) links.children.push_back(vrank + mask);
  }
  return links;
}

TreeLinks heap_tree(int vrank, int size) {
  TreeLinks links;
  if (vrank != 0) links.parent = (vrank - 1) / 2;
  for (int child : {2 * vrank + 1, 2 * vrank + 2}) {
    if (child < size) links.children.push_back(child);
  }
  return links;
}

TreeLinks double_tree(int rank, int size, int which) {
  const int n = size % 2 == 0 ? size : size - 1;  // the ranks the two mirrored bit trees span
  const int last = size - 1;                      // with an odd size: the leaf under both roots
  auto to_rank = [&](int position) { return which == 0 ? position : n - 1 - position; };
  const int root = to_rank(0);
  TreeLinks links;
  if (size % 2 == 1 && rank == last) {
    if (size > 1) links.parent = root;
    return links;
  }
  const TreeLinks position_links = bit_tree(to_rank(rank), n);  // to_rank is its own inverse
  if (position_links.parent >= 0) links.parent = to_rank(position_links.parent);
  for (int child : position_links.children) links.children.push_back(to_rank(child));
  if (size % 2 == 1 && rank == root) links.children.push_back(last);
  return links;
}

Fold::Fold(int world_size) : size(world_size), pow2(highest_power_of_two_at_most(world_size)) {
  extra = size - pow2;
}

int ceil_log2(int n) {
  int rounds = 0;
  while ((1 << rounds) < n) ++rounds;
  return rounds;
}

}  // namespace canopy::collectives
