#include "bench/collectives/timing.hpp"

#include <algorithm>
#include <cmath>

namespace canopy::bench {

int timed_iterations(int iterations, double min_seconds, double seconds_per_iteration) {
  if (min_seconds <= 0 || !(seconds_per_iteration > 0)) return iterations;
  const double wanted = std::ceil(min_seconds / seconds_per_iteration);
  if (wanted <= iterations) return iterations;
  return static_cast<int>(std::min<double>(wanted, std::max(iterations, kMostTimedIterations)));
}

}  // namespace canopy::bench
