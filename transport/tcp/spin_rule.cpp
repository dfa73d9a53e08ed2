#include "transport/tcp/spin_rule.hpp"

namespace canopy::transport {

std::chrono::microseconds choose_spin(std::optional<std::chrono::microseconds> requested, int local_ranks,
                                      int cores) {
  if (requested) return *requested;
  return local_ranks <= kMostRanksPerCoreToSpin * cores ? kDefaultSpin : std::chrono::microseconds(0);
}

}  // namespace canopy::transport
