// Who forms which group when the ranks of a communicator split (MPI_Comm_split, torch's new_group).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace canopy::collectives {

// What one rank asked for: its color (negative: no group) and its key (its place in the group). `list`
// is a digest of the rank list a subgroup call passed (0 for split), which every rank must agree on.
struct SplitRequest {
  std::int32_t color = 0;
  std::int32_t key = 0;
  std::int32_t list = 0;
};

// The members (ranks of the parent) of `rank`'s new group in their new order: the ranks of its color
// ordered by (key, rank). Empty when its color is negative. Throws Error(Mismatch) naming two ranks
// whose lists differ.
std::vector<int> split_members(std::span<const SplitRequest> requests, int rank);

// The requests a subgroup of `ranks` (in that order) makes on `rank`: color 0 and key = the position in
// the list for a member, color -1 for the others. Throws Error(InvalidArgument) for a rank out of range
// or listed twice, or an empty list.
SplitRequest subgroup_request(std::span<const int> ranks, int rank, int size);

// "[0, 2, 5]"
std::string describe_ranks(std::span<const int> ranks);

}  // namespace canopy::collectives
