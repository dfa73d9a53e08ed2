// How long a store call may wait: never negative, and never so long that a deadline's clock overflows.
#pragma once

#include <algorithm>
#include <chrono>

#include "canopy/store.hpp"

namespace canopy::rendezvous {

inline constexpr Duration kLongestStoreWait = std::chrono::hours(24 * 365);

inline Duration clamp_store_wait(Duration timeout) {
  return std::clamp(timeout, Duration::zero(), kLongestStoreWait);
}

}  // namespace canopy::rendezvous
