// The ranks of a call grouped by host, as host-aware and two-level algorithms walk them: whatever the
// rank numbering (hosts in blocks, round-robin, uneven), a ring or chain that visits one host's ranks
// one after another crosses between hosts once per host, not once per rank.
#pragma once

#include <vector>

#include "collectives/schedules/schedule.hpp"

namespace canopy::collectives {

class HostGroups {
 public:
  // From call.layout(); without one, every rank is a host of its own. Hosts are numbered in the order
  // of their lowest rank, each host's ranks in ascending order.
  explicit HostGroups(const CollectiveCall& call);
  // The same, made once per layout and thread: the simulator builds every rank's schedule of a call in
  // turn, and each of them grouping all P ranks again made a choice at thousands of ranks O(P^2). Valid
  // until this thread asks for another layout's.
  static const HostGroups& of(const CollectiveCall& call);

  int hosts() const { return static_cast<int>(members_.size()); }
  const std::vector<int>& members(int host) const { return members_[static_cast<std::size_t>(host)]; }
  int host_of(int rank) const { return host_of_[static_cast<std::size_t>(rank)]; }
  // The rank's position among members(host_of(rank)).
  int local_of(int rank) const { return local_of_[static_cast<std::size_t>(rank)]; }
  // The most ranks any host has.
  int largest() const { return largest_; }

  // Every rank, host after host: members(0), then members(1), ...
  std::vector<int> ring_order() const;
  // `root` first, then the other ranks of its host (those after it, then those before it), then the
  // following hosts in turn: a chain in this order enters every other host once.
  std::vector<int> rooted_order(int root) const;

 private:
  std::vector<std::vector<int>> members_;
  std::vector<int> host_of_;
  std::vector<int> local_of_;
  int largest_ = 0;
};

// 0, 1, ..., call.size - 1: the order of the flat trees.
std::vector<int> all_ranks(const CollectiveCall& call);

// A ring through `members` (ranks, in ring order), seen from the one at `position`.
struct RingOf {
  std::vector<int> members;
  int position = 0;

  int size() const { return static_cast<int>(members.size()); }
  // The member `steps` places after this one (before it, for negative steps).
  int at(int steps) const;
  int next() const { return at(1); }
  int prev() const { return at(-1); }
  // The ring position of `steps` places after this one, in 0..size()-1.
  int position_at(int steps) const;
};

// The ring through `members` seen from `rank` (one of them).
RingOf ring_through(std::vector<int> members, int rank);

// The virtual ranks of a rooted algorithm over an ordered list of ranks: virtual rank v is the rank v
// places after `root` in `order` (cyclically), so the root is virtual rank 0.
class VirtualRanks {
 public:
  VirtualRanks(std::vector<int> order, int root);

  int size() const { return static_cast<int>(order_.size()); }
  // -1 for a rank that is not in the order.
  int of(int rank) const;
  int real(int vrank) const { return order_[static_cast<std::size_t>((root_index_ + vrank) % size())]; }

 private:
  std::vector<int> order_;
  int root_index_ = 0;
};

}  // namespace canopy::collectives
