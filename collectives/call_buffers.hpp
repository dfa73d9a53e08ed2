// Where one call's schedule works, per collective: Data (where the result ends) and the caller's input
// (see CollectiveCall for their shapes), and what is left to do once the schedule ran.
#pragma once

#include <cstddef>
#include <vector>

#include "canopy/communicator.hpp"

namespace canopy::collectives {

struct CallBuffers {
  std::byte* data = nullptr;
  const std::byte* input = nullptr;
  bool in_place = true;  // CollectiveCall::in_place
};

// Nothing here copies the input where a schedule can read it as Buffer::Input (its first send and first
// reduce of each block) instead; `scratch` (kept by the communicator, grown to the largest need) holds a
// working copy where the caller's buffer must stay intact, or the input of an all-to-all that was given
// one buffer for both.
CallBuffers prepare_call_buffers(const CollectiveArgs& args, int rank, int size,
                                 std::vector<std::byte>& scratch);

// After the schedule: a reduce-scatter's block moves to the output; an average divides.
void finish_call_buffers(const CollectiveArgs& args, int rank, int size, const std::byte* data);

}  // namespace canopy::collectives
