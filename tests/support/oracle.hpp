// What every test of a collective's result checks against: inputs for which every evaluation order
// gives exactly the same result (as nccl-tests chooses them), and the results they must give.
//
// A whole group's buffers in one process with a plain reference implementation of each collective (the
// schedule tests, which simulate every rank). One rank's view (ranks in processes of their own) is
// oracle/rank_result.hpp, which canopy-bench's check shares.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "canopy/types.hpp"
#include "collectives/schedules/schedule.hpp"
#include "oracle/exact_values.hpp"

namespace canopy::testing {

using collectives::CollectiveCall;

using Buffers = std::vector<std::vector<std::byte>>;

using oracle::Random;
using oracle::load_integer;
using oracle::store_integer;

// Inputs for `call` (all ranks) whose reduction with `op` is exact in `type` in any order: small
// integers for sums, +-1 (and a few 2s) for float products, any integer for integer types (which wrap
// identically in any order), anything for min and max. Blocks an all-gather does not read are filled
// with garbage, so a schedule that forgets to overwrite them is caught.
Buffers exact_inputs(const CollectiveCall& call, DataType type, ReduceOp op, Random& random);

// Random finite floats (not exactly summable): for the bit-identity check.
Buffers random_float_inputs(const CollectiveCall& call, DataType type, Random& random);

// The result the collective must leave in each rank's Data, and which elements of it are defined (a
// reduce defines only the root's buffer, a reduce-scatter only block r of rank r).
struct Expected {
  Buffers data;
  std::vector<std::vector<char>> defined;  // per rank, per element
};
Expected reference(const CollectiveCall& call, DataType type, ReduceOp op, const Buffers& inputs);

// The collectives that move blocks without reducing them and whose input is a buffer of its own
// (all-to-all, all-to-all-v, gather, scatter), rank r's view being calls[r]: random inputs (so that a
// block in the wrong place shows) and the Data each rank must end with. In place (a gather's or
// scatter's root, where calls[root].in_place), the root's own block starts in its Data.
struct MovementCase {
  std::vector<std::vector<std::byte>> data;   // each rank's Data before the call
  std::vector<std::vector<std::byte>> input;  // each rank's Input (empty where it has none)
};
MovementCase movement_inputs(const std::vector<CollectiveCall>& calls, DataType type, Random& random);
Expected movement_reference(const std::vector<CollectiveCall>& calls, DataType type,
                            const MovementCase& inputs);

// "" when `actual` matches `expected` on every defined element, else a description of the first
// mismatch (rank, element, expected, got).
std::string compare(const Expected& expected, const Buffers& actual, DataType type);

}  // namespace canopy::testing
