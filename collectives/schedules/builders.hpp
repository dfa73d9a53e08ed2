// The schedule builders behind the algorithm table (algorithms.cpp), one family per file. Each is a
// pure function of the call; see docs/SCHEDULES.md for the algorithms and their costs.
#pragma once

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

// Pieces the all-reduce builders compose: each acts on the whole Data buffer and tags its messages
// with round `round`.
void write_binomial_broadcast(StepWriter& writer, int root, std::uint32_t round);
void write_binomial_reduce(StepWriter& writer, int root, std::uint32_t round);

}  // namespace canopy::collectives
