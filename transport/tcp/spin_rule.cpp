#include "transport/tcp/spin_rule.hpp"

#include <sched.h>

#include <algorithm>
#include <thread>

namespace canopy::transport {

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

std::chrono::microseconds choose_spin(std::optional<std::chrono::microseconds> requested, int local_ranks,
                                      int cores) {
  if (requested) return *requested;
  return local_ranks <= kMostRanksPerCoreToSpin * cores ? kDefaultSpin : std::chrono::microseconds(0);
}

}  // namespace canopy::transport
