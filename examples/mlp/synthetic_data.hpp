// The training set as a pure function of the sample's global index: every rank (and a single-rank run)
// computes the same sample i without files, so that runs with different rank counts see the same data.
#pragma once

#include <cstdint>
#include <vector>

namespace mlp {

enum class DataKind {
  Integer,  // features in {-2..2}, integer targets: with zero-initialised weights, power-of-two batches
            // and learning rate, every intermediate of a few steps is an exact float64
  Random,   // features uniform in [-1, 1], smooth targets: the general case (float tolerance)
};

struct Batch {
  std::vector<double> x, y;
};

// Samples [first, first + count) for a model with `inputs` features and `outputs` targets.
Batch make_batch(DataKind kind, std::uint64_t seed, std::uint64_t first, int count, int inputs, int outputs);

}  // namespace mlp
