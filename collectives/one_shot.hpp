// Runs a one-shot algorithm's call through the host's cells (transport/shm/host_cells.hpp): each rank
// that contributes writes its buffer into its cell once (a barrier's, nothing but the stamp); each rank
// that needs the result reads the cells where they lie and reduces them in the algorithm's order
// (collectives/schedules/one_shot_schedules.cpp), after checking every cell's envelope, so that a mismatched
// call leaves the output untouched.
#pragma once

#include "collectives/executor.hpp"
#include "collectives/schedules/schedule.hpp"
#include "transport/shm/host_cells.hpp"

namespace canopy::collectives {

// `call` satisfies call.through_cells(); `context` holds its buffers, envelope and deadline (its transport
// is not used). Returns the flags the cells it read carried (Executor::heard_flags). Throws the cells' Error
// (Mismatch, PeerFailed, Timeout, Aborted).
std::uint8_t run_through_cells(transport::HostCells& cells, const CollectiveCall& call,
                               const ExecutionContext& context);

}  // namespace canopy::collectives
