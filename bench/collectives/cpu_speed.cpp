#include "bench/collectives/cpu_speed.hpp"

#include <chrono>
#include <cstdint>

namespace canopy::bench {

double fixed_work_milliseconds() {
  constexpr std::uint64_t kSteps = 15'000'000;
  // xorshift64: each step needs the last, so the time is the chain's latency, which no compiler or
  // CPU can shorten by doing steps at once.
  std::uint64_t x = 88172645463325252ULL;
  const auto begin = std::chrono::steady_clock::now();
  for (std::uint64_t i = 0; i < kSteps; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
  }
  const auto end = std::chrono::steady_clock::now();
  // Keeps the loop: its result is observed.
  volatile std::uint64_t sink = x;
  (void)sink;
  return std::chrono::duration<double, std::milli>(end - begin).count();
}

}  // namespace canopy::bench
