#include "transport/spin_rule.hpp"

namespace canopy::transport {

std::chrono::microseconds choose_spin(std::optional<std::chrono::microseconds> requested, int local_ranks,
                                      int cores, std::chrono::microseconds default_spin) {
  if (requested) return *requested;
  return local_ranks <= kMostRanksPerCoreToSpin * cores ? default_spin : std::chrono::microseconds(0);
}

std::chrono::nanoseconds looks_between_yields(int local_ranks, int cores) {
  return local_ranks <= cores ? kLooksBetweenYields : std::chrono::nanoseconds(0);
}

}  // namespace canopy::transport
