// What the schedule tests check against: inputs for which every evaluation order gives exactly the
// same result (as nccl-tests chooses them), and a plain reference implementation of each collective.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "canopy/types.hpp"
#include "collectives/schedules/schedule.hpp"

namespace canopy::collectives::testing {

using Buffers = std::vector<std::vector<std::byte>>;

// Element i of a buffer of `type` as an exact integer (the tests only store integer values), and back.
// Integer types wrap around on store, as the kernels do.
std::int64_t load_integer(DataType type, const std::byte* buffer, std::size_t i);
void store_integer(DataType type, std::byte* buffer, std::size_t i, std::int64_t value);

// Inputs for `call` (all ranks) whose reduction with `op` is exact in `type` in any order: small
// integers for sums, +-1 (and a few 2s) for float products, any integer for integer types (which wrap
// identically in any order), anything for min and max. Blocks an all-gather does not read are filled
// with garbage, so a schedule that forgets to overwrite them is caught.
Buffers exact_inputs(const CollectiveCall& call, DataType type, ReduceOp op, std::mt19937_64& random);

// Random finite floats (not exactly summable): for the bit-identity check.
Buffers random_float_inputs(const CollectiveCall& call, DataType type, std::mt19937_64& random);

// The result the collective must leave in each rank's Data, and which elements of it are defined (a
// reduce defines only the root's buffer, a reduce-scatter only block r of rank r).
struct Expected {
  Buffers data;
  std::vector<std::vector<char>> defined;  // per rank, per element
};
Expected reference(const CollectiveCall& call, DataType type, ReduceOp op, const Buffers& inputs);

// "" when `actual` matches `expected` on every defined element, else a description of the first
// mismatch (rank, element, expected, got).
std::string compare(const Expected& expected, const Buffers& actual, DataType type);

}  // namespace canopy::collectives::testing
