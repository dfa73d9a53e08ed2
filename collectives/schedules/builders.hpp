// The schedule builders behind the algorithm table (algorithms.cpp), one family per file. Each is a
// pure function of the call; see docs/SCHEDULES.md for the algorithms and their costs.
#pragma once

#include <functional>
#include <vector>

#include "collectives/schedules/schedule.hpp"
#include "collectives/schedules/step_writer.hpp"

namespace canopy::collectives {

// broadcast_schedules.cpp
Schedule broadcast_flat(const CollectiveCall& call);
Schedule broadcast_binomial(const CollectiveCall& call);
Schedule broadcast_chain(const CollectiveCall& call);
Schedule broadcast_binary_tree(const CollectiveCall& call);
Schedule broadcast_scatter_allgather(const CollectiveCall& call);

// reduce_schedules.cpp
Schedule reduce_binomial(const CollectiveCall& call);
Schedule reduce_tree(const CollectiveCall& call);

// tree_all_reduce_schedules.cpp
Schedule all_reduce_reduce_broadcast(const CollectiveCall& call);
Schedule all_reduce_tree(const CollectiveCall& call);
Schedule all_reduce_double_tree(const CollectiveCall& call);

// recursive_schedules.cpp
Schedule all_reduce_recursive_doubling(const CollectiveCall& call);
Schedule all_reduce_rabenseifner(const CollectiveCall& call);
Schedule all_gather_recursive_doubling(const CollectiveCall& call);
Schedule reduce_scatter_recursive_halving(const CollectiveCall& call);

// ring_schedules.cpp
Schedule all_reduce_ring(const CollectiveCall& call);
Schedule all_gather_ring(const CollectiveCall& call);
Schedule reduce_scatter_ring(const CollectiveCall& call);

// all_to_all_schedules.cpp
Schedule all_to_all_pairwise(const CollectiveCall& call);
Schedule all_to_all_bruck(const CollectiveCall& call);
Schedule all_to_all_v_pairwise(const CollectiveCall& call);

// gather_scatter_schedules.cpp
Schedule gather_flat(const CollectiveCall& call);
Schedule gather_binomial(const CollectiveCall& call);
Schedule scatter_flat(const CollectiveCall& call);
Schedule scatter_binomial(const CollectiveCall& call);

// barrier_schedules.cpp
Schedule barrier_dissemination(const CollectiveCall& call);

// two_level_schedules.cpp: a level inside each host and a level between hosts.
Schedule all_reduce_two_level(const CollectiveCall& call);
Schedule broadcast_two_level(const CollectiveCall& call);
Schedule reduce_two_level(const CollectiveCall& call);

// one_shot_schedules.cpp: where no host cells carry them, the one-shot algorithms' bits by messages.
Schedule all_reduce_one_shot(const CollectiveCall& call);
Schedule reduce_one_shot(const CollectiveCall& call);
Schedule barrier_one_shot(const CollectiveCall& call);

// Pieces the builders compose. The binomial ones act on the whole Data buffer among `members` (ranks;
// the tree's virtual rank 0 is members[root_index]) and tag their messages with round `round`.
void write_binomial_broadcast(StepWriter& writer, const std::vector<int>& members, int root_index,
                              std::uint32_t round);
void write_binomial_reduce(StepWriter& writer, const std::vector<int>& members, int root_index,
                           std::uint32_t round);
// The same over every rank of the call, rooted at `root`.
void write_binomial_broadcast(StepWriter& writer, int root, std::uint32_t round);
void write_binomial_reduce(StepWriter& writer, int root, std::uint32_t round);

// The ring pieces (ring_schedules.cpp), through ring.members. `part(i)` is the block of ring position
// i; each piece tags its rounds from `round` on and returns the first round it did not use. Chunk by
// chunk, the rounds of chunk k of the parts run as a wavefront behind chunk k-1's (round s of chunk k
// with round s+1 of chunk k-1): a part is complete, chunk by chunk, after m-1 hops of one chunk, where
// whole parts round by round take m-2 parts and a chunk (what a second level waiting for each part's
// first chunk wants).
struct RingOf;
using PartOfPosition = std::function<Block(int position)>;
// m-1 rounds; position i ends with part(i) reduced from every member's.
std::uint32_t write_ring_reduce_scatter(StepWriter& writer, const RingOf& ring, const PartOfPosition& part,
                                        std::uint32_t round, bool chunk_by_chunk = false);
// m-1 rounds; position i starts with part(i) and ends with every part.
std::uint32_t write_ring_all_gather(StepWriter& writer, const RingOf& ring, const PartOfPosition& part,
                                    std::uint32_t round, bool chunk_by_chunk = false);
// 2(m-1) rounds: `block` reduced from every member's, on every member. With a piece_count, the block
// goes as pieces of that many elements, each in m parts of at most a chunk, their rounds a wavefront as
// above (0: the whole block in m parts).
std::uint32_t write_ring_all_reduce(StepWriter& writer, const RingOf& ring, const Block& block,
                                    std::uint32_t round, std::uint64_t piece_count = 0);
// Part `index` of `parts` near-equal parts of `whole` (part_of within a block).
Block part_of_block(const Block& whole, int parts, int index);

}  // namespace canopy::collectives
