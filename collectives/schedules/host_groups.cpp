#include "collectives/schedules/host_groups.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <numeric>

#include "common/error.hpp"

namespace canopy::collectives {

HostGroups::HostGroups(const CollectiveCall& call)
    : host_of_(static_cast<std::size_t>(call.size)), local_of_(static_cast<std::size_t>(call.size)) {
  const HostLayout& layout = call.layout();
  if (!layout.host_of_rank.empty() && layout.host_of_rank.size() != static_cast<std::size_t>(call.size))
    fail(ErrorCode::InvalidArgument, "the host layout names {} ranks for a call of {}",
         layout.host_of_rank.size(), call.size);
  std::map<int, int> renumbered;  // the layout's host -> ours, in the order of their lowest rank
  for (int rank = 0; rank < call.size; ++rank) {
    const auto [it, added] = renumbered.emplace(layout.host_of(rank), hosts());
    if (added) members_.emplace_back();
    std::vector<int>& group = members_[static_cast<std::size_t>(it->second)];
    host_of_[static_cast<std::size_t>(rank)] = it->second;
    local_of_[static_cast<std::size_t>(rank)] = static_cast<int>(group.size());
    group.push_back(rank);
    largest_ = std::max(largest_, static_cast<int>(group.size()));
  }
}

const HostGroups& HostGroups::of(const CollectiveCall& call) {
  // The layout is held, not only its address compared, so that no other layout can take its address.
  struct Last {
    std::shared_ptr<const HostLayout> layout;
    int size = -1;
    std::optional<HostGroups> groups;
  };
  thread_local Last last;
  if (!last.groups || last.layout != call.hosts || last.size != call.size) {
    last.groups.emplace(call);
    last.layout = call.hosts;
    last.size = call.size;
  }
  return *last.groups;
}

std::vector<int> HostGroups::ring_order() const {
  std::vector<int> order;
  order.reserve(host_of_.size());
  for (const std::vector<int>& group : members_) order.insert(order.end(), group.begin(), group.end());
  return order;
}

std::vector<int> HostGroups::rooted_order(int root) const {
  std::vector<int> order;
  order.reserve(host_of_.size());
  const int first = host_of(root);
  for (int h = 0; h < hosts(); ++h) {
    const std::vector<int>& group = members((first + h) % hosts());
    const int start = h == 0 ? local_of(root) : 0;
    for (std::size_t i = 0; i < group.size(); ++i) order.push_back(group[(start + i) % group.size()]);
  }
  return order;
}

std::vector<int> all_ranks(const CollectiveCall& call) {
  std::vector<int> ranks(static_cast<std::size_t>(call.size));
  std::iota(ranks.begin(), ranks.end(), 0);
  return ranks;
}

int RingOf::position_at(int steps) const {
  const int n = size();
  return ((position + steps) % n + n) % n;
}

int RingOf::at(int steps) const {
  return members[static_cast<std::size_t>(position_at(steps))];
}

RingOf ring_through(std::vector<int> members, int rank) {
  const auto it = std::find(members.begin(), members.end(), rank);
  if (it == members.end())
    fail(ErrorCode::InvalidArgument, "rank {} is not a member of the ring it walks", rank);
  const int position = static_cast<int>(it - members.begin());
  return RingOf{std::move(members), position};
}

VirtualRanks::VirtualRanks(std::vector<int> order, int root) : order_(std::move(order)) {
  root_index_ = of(root);
  if (root_index_ < 0) fail(ErrorCode::InvalidArgument, "root {} is not a member of its tree", root);
}

int VirtualRanks::of(int rank) const {
  const auto it = std::find(order_.begin(), order_.end(), rank);
  if (it == order_.end()) return -1;
  const int index = static_cast<int>(it - order_.begin());
  return (index - root_index_ + size()) % size();
}

}  // namespace canopy::collectives
