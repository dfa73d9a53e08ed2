// What the schedule tests share: an algorithm by name, and zeroed buffers for every rank of a call.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "collectives/schedules/algorithms.hpp"

namespace canopy::collectives::schedule_tests {

// The algorithm of `collective` called `name`; a test that names one that does not exist fails loudly.
inline const Algorithm& algorithm(Collective collective, std::string_view name) {
  const Algorithm* found = find_algorithm(collective, name);
  if (found == nullptr) throw std::runtime_error("no algorithm " + std::string(name));
  return *found;
}

// Each rank's Data, zeroed: for the simulations whose values do not matter.
inline std::vector<std::vector<std::byte>> zeros(const CollectiveCall& call,
                                                 DataType type = DataType::Float32) {
  return std::vector<std::vector<std::byte>>(static_cast<std::size_t>(call.size),
                                             std::vector<std::byte>(call.data_count() * size_of(type)));
}

}  // namespace canopy::collectives::schedule_tests
