// Barrier: nobody leaves before everybody has arrived.
#include <optional>

#include "collectives/schedules/builders.hpp"

namespace canopy::collectives {

// Dissemination (Hensgen, Finkel, Manber): in round k, signal rank r + 2^k and wait for r - 2^k.
// After round k a rank has heard, directly or not, from the 2^(k+1) - 1 ranks before it, so after
// ceil(lg p) rounds from everyone. Zero-byte messages; a round's signal waits for the previous
// round's wait (no memory says so: that dependency is written out). ceil(lg p) alpha.
Schedule barrier_dissemination(const CollectiveCall& call) {
  StepWriter writer(call);
  const int p = call.size;
  const Block nothing = data_block(0, 0);
  std::optional<StepIndex> previous_wait;
  for (int k = 0, distance = 1; distance < p; ++k, distance *= 2) {
    const std::uint32_t tag = message_tag(static_cast<std::uint32_t>(k), 0);
    if (previous_wait) {
      writer.send((call.rank + distance) % p, nothing, tag, {*previous_wait});
    } else {
      writer.send((call.rank + distance) % p, nothing, tag);
    }
    previous_wait = writer.recv((call.rank - distance + p) % p, nothing, tag);
  }
  return std::move(writer).finish();
}

}  // namespace canopy::collectives
