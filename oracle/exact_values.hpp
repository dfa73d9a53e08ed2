// Inputs for which every order of reduction gives exactly the same result (as nccl-tests chooses them),
// as exact integers: the values every check of a collective's result starts from, in canopy-bench and in
// the tests alike.
#pragma once

#include <cstddef>
#include <cstdint>

#include "canopy/types.hpp"

namespace canopy::oracle {

// SplitMix64: checks draw millions of values, and a Mersenne twister behind uniform distributions was
// most of the tests' time.
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

bool is_float(DataType type);

// Element i of a buffer of `type` as a number, and back. Integer types wrap around on store, as the
// kernels do; the exact values are integers, so every float type holds them exactly.
std::int64_t load_integer(DataType type, const std::byte* buffer, std::size_t i);
void store_integer(DataType type, std::byte* buffer, std::size_t i, std::int64_t value);
double load_double(DataType type, const std::byte* buffer, std::size_t i);
void store_double(DataType type, std::byte* buffer, std::size_t i, double value);

// One value for rank `rank` whose reduction with `op` is exact in `type` in any order: small integers
// for float sums, +-1 (and a few 2s) for float products, any integer for integer types (which wrap
// identically in any order), anything for min and max.
std::int64_t exact_value(DataType type, ReduceOp op, int rank, Random& random);

// a op b as the kernels compute it on exact values: sums and products wrap modulo 2^64 (and the type's
// width on store); Avg combines as Sum (the division comes after).
std::int64_t combine(ReduceOp op, std::int64_t a, std::int64_t b);

// --- One rank's view: ranks in processes of their own, which cannot see the others' inputs ---

// The value rank `rank` contributes at element `index`: exact_value drawn from a generator seeded by the
// element and the rank alone, so that every rank computes any rank's value.
std::int64_t input_value(DataType type, ReduceOp op, int rank, std::uint64_t index);

// Fills `count` elements of `type` at `data` with rank's inputs, starting at element `first_index`.
void fill_inputs(DataType type, ReduceOp op, int rank, std::uint64_t first_index, void* data,
                 std::uint64_t count);

// Counts the elements of `data` that differ from the reduction over `ranks` ranks of element
// first_index + i (or, with from_rank >= 0, from that rank's input alone: broadcast, all-gather).
std::uint64_t count_wrong(DataType type, ReduceOp op, int ranks, int from_rank, std::uint64_t first_index,
                          const void* data, std::uint64_t count);

}  // namespace canopy::oracle
