#include "transport/spin_rule.hpp"

#include "common/log.hpp"

namespace canopy::transport {

std::chrono::microseconds choose_spin(std::optional<std::chrono::microseconds> requested, int local_ranks,
                                      int cores, std::chrono::microseconds default_spin) {
  if (requested) return *requested;
  return local_ranks <= kMostRanksPerCoreToSpin * cores ? default_spin : std::chrono::microseconds(0);
}

std::chrono::microseconds announce_spin(std::string_view links, std::string_view setting,
                                        std::optional<std::chrono::microseconds> requested, int local_ranks,
                                        int cores, std::chrono::microseconds default_spin) {
  const auto spin = choose_spin(requested, local_ranks, cores, default_spin);
  log::debug("{} busy-poll for {} us before blocking ({}; {} local rank(s), {} usable core(s))", links,
             spin.count(), requested ? setting : "chosen", local_ranks, cores);
  return spin;
}

std::chrono::nanoseconds looks_between_yields(int local_ranks, int cores) {
  return local_ranks <= cores ? kLooksBetweenYields : std::chrono::nanoseconds(0);
}

}  // namespace canopy::transport
