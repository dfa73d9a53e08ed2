#include "collectives/forming/group_split.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

#include "common/error.hpp"

namespace canopy::collectives {

std::vector<int> split_members(std::span<const SplitRequest> requests, int rank) {
  const auto size = static_cast<int>(requests.size());
  for (int r = 1; r < size; ++r)
    if (requests[static_cast<std::size_t>(r)].list != requests[0].list)
      fail(ErrorCode::Mismatch,
           "rank {} and rank 0 passed different lists of ranks to subgroup (or one called split)", r);
  const SplitRequest& mine = requests[static_cast<std::size_t>(rank)];
  if (mine.color < 0) return {};
  std::vector<int> members;
  for (int r = 0; r < size; ++r)
    if (requests[static_cast<std::size_t>(r)].color == mine.color) members.push_back(r);
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
    return requests[static_cast<std::size_t>(a)].key < requests[static_cast<std::size_t>(b)].key;
  });
  return members;
}

SplitRequest subgroup_request(std::span<const int> ranks, int rank, int size) {
  if (ranks.empty()) fail(ErrorCode::InvalidArgument, "subgroup: the list of ranks is empty");
  std::set<int> seen;
  for (int r : ranks) {
    if (r < 0 || r >= size)
      fail(ErrorCode::InvalidArgument, "subgroup {}: rank {} is not a rank of this group of {}",
           describe_ranks(ranks), r, size);
    if (!seen.insert(r).second)
      fail(ErrorCode::InvalidArgument, "subgroup {}: rank {} is listed twice", describe_ranks(ranks), r);
  }
  // FNV-1a over the list: every rank must pass the same one.
  std::uint32_t digest = 2166136261u;
  for (int r : ranks) {
    digest ^= static_cast<std::uint32_t>(r);
    digest *= 16777619u;
  }
  SplitRequest request{-1, 0, static_cast<std::int32_t>(digest | 1u)};  // never 0, split's digest
  const auto position = std::find(ranks.begin(), ranks.end(), rank);
  if (position != ranks.end()) {
    request.color = 0;
    request.key = static_cast<std::int32_t>(position - ranks.begin());
  }
  return request;
}

std::string describe_ranks(std::span<const int> ranks) {
  return fmt::format("[{}]", fmt::join(ranks, ", "));
}

}  // namespace canopy::collectives
