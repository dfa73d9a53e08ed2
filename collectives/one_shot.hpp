// Runs a one-shot algorithm's call through the host's cells (transport/shm/host_cells.hpp): each rank
// that contributes writes its buffer into its cell once (a barrier's, nothing but the stamp); each rank
// that needs the result reads the cells where they lie and reduces them in the algorithm's order
// (collectives/schedules/one_shot_schedules.cpp), after checking every cell's envelope, so that a mismatched
// call leaves the output untouched. The executor runs it where a call's plan is Route::Cells.
#pragma once

#include <cstdint>

#include "canopy/types.hpp"
#include "collectives/execution_context.hpp"

namespace canopy::collectives {

// What a call through the cells needs of its description (CollectiveCall): no schedule, no layout.
struct CellsCall {
  Collective collective = Collective::AllReduce;
  int rank = 0;
  int size = 1;
  int root = 0;
  std::uint64_t count = 0;  // elements of every contributed buffer
};

// `context` holds the call's cells, buffers, envelope and deadline (its transport is not used). Returns the
// flags the cells it read carried (Executor::heard_flags). Throws the cells' Error (Mismatch, PeerFailed,
// Timeout, Aborted).
std::uint8_t run_through_cells(const CellsCall& call, const ExecutionContext& context);

}  // namespace canopy::collectives
