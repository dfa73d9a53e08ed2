// What every test of a collective's result checks against: inputs for which every evaluation order
// gives exactly the same result (as nccl-tests chooses them), and the results they must give.
//
// Two forms: a whole group's buffers in one process with a plain reference implementation of each
// collective (the schedule tests, which simulate every rank), and one rank's inputs and expected result
// computed from its rank and element index alone (ranks in processes of their own, which cannot see the
// others' inputs).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "canopy/types.hpp"
#include "collectives/schedules/schedule.hpp"

namespace canopy::testing {

using collectives::CollectiveCall;

using Buffers = std::vector<std::vector<std::byte>>;

// SplitMix64: the tests draw millions of values, and a Mersenne twister behind uniform distributions
// was most of their time.
class Random {
 public:
  explicit Random(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform enough in [low, high] for test data.
  std::int64_t between(std::int64_t low, std::int64_t high) {
    const auto range = static_cast<std::uint64_t>(high - low + 1);  // small: multiply-shift, no division
    return low + static_cast<std::int64_t>(((next() >> 32) * range) >> 32);
  }
  double unit() { return static_cast<double>(next() >> 11) * 0x1p-53; }

 private:
  std::uint64_t state_;
};

// Element i of a buffer of `type` as an exact integer (the tests only store integer values), and back.
// Integer types wrap around on store, as the kernels do.
std::int64_t load_integer(DataType type, const std::byte* buffer, std::size_t i);
void store_integer(DataType type, std::byte* buffer, std::size_t i, std::int64_t value);

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

// --- One rank's view ---

// The value rank `rank` contributes at element `index`, exact in every type and order (as exact_inputs).
std::int64_t input_value(DataType type, ReduceOp op, int rank, std::uint64_t index);

// Fills `count` elements of `type` at `data` with rank's inputs, starting at element `first_index`.
void fill_inputs(DataType type, ReduceOp op, int rank, std::uint64_t first_index, void* data,
                 std::uint64_t count);

// Counts the elements of `data` that differ from the reduction over `ranks` ranks of element
// first_index + i (or, with from_rank >= 0, from that rank's input alone: broadcast, all-gather).
std::uint64_t count_wrong(DataType type, ReduceOp op, int ranks, int from_rank, std::uint64_t first_index,
                          const void* data, std::uint64_t count);

}  // namespace canopy::testing
