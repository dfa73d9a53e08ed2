// What one rank's result of a collective must hold, when every rank filled its input with fill_inputs
// (exact_values.hpp) from element 0: the check canopy-bench makes after each size and the tests of
// ranks in processes of their own make after each call.
#pragma once

#include <cstdint>

#include "canopy/types.hpp"

namespace canopy::oracle {

struct RankResult {
  Collective collective = Collective::AllReduce;
  DataType type = DataType::Float32;
  ReduceOp op = ReduceOp::Sum;
  int rank = 0;
  int ranks = 1;
  int root = 0;
  std::uint64_t block = 0;  // elements per rank: a reduce-scatter's, all-gather's or all-to-all's block
};

// The elements of `result` that differ from what `call.rank` must hold. `result` is where that rank's
// result lies: its whole output (ranks x block for all-gather, all-to-all and a gather's root; block
// elements otherwise), or for a reduce-scatter its own block. A rank that receives nothing (a reduce's
// or gather's other ranks) has nothing wrong. Block j of an all-to-all's or a scatter's input holds the
// sender's elements j * block.., so the receiver checks which sender's block landed where.
std::uint64_t count_wrong(const RankResult& call, const void* result);

}  // namespace canopy::oracle
