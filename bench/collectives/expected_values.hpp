// Inputs chosen so that every reduction order gives exactly the same result (small integers, as
// nccl-tests does), and the results every rank must then hold, for exact checking.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "canopy/types.hpp"

namespace canopy::bench {

// The value rank `rank` contributes at element `index`.
std::int64_t input_value(DataType type, ReduceOp op, int rank, std::uint64_t index);

// Fills `count` elements of `type` at `data` with rank's inputs, starting at element `first_index`.
void fill_inputs(DataType type, ReduceOp op, int rank, std::uint64_t first_index, void* data,
                 std::uint64_t count);

// Counts the elements of `data` that differ from the reduction over `ranks` ranks of element
// first_index + i (or, with from_rank >= 0, from that rank's input alone: broadcast, all-gather).
std::uint64_t count_wrong(DataType type, ReduceOp op, int ranks, int from_rank, std::uint64_t first_index,
                          const void* data, std::uint64_t count);

}  // namespace canopy::bench
