#include "examples/mlp/synthetic_data.hpp"

#include <cmath>

namespace mlp {
namespace {

std::uint64_t mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::uint64_t value_bits(std::uint64_t seed, std::uint64_t sample, std::uint64_t feature) {
  return mix(seed * 0x9e3779b97f4a7c15ull + mix(sample * 1315423911ull + feature + 1));
}

}  // namespace

Batch make_batch(DataKind kind, std::uint64_t seed, std::uint64_t first, int count, int inputs, int outputs) {
  Batch batch;
  batch.x.resize(static_cast<std::size_t>(count) * static_cast<std::size_t>(inputs));
  batch.y.resize(static_cast<std::size_t>(count) * static_cast<std::size_t>(outputs));
  for (int s = 0; s < count; ++s) {
    std::uint64_t sample = first + static_cast<std::uint64_t>(s);
    double sum = 0;
    for (int i = 0; i < inputs; ++i) {
      std::uint64_t bits = value_bits(seed, sample, static_cast<std::uint64_t>(i));
      double v = kind == DataKind::Integer ? static_cast<double>(static_cast<int>(bits % 5) - 2)
                                           : static_cast<double>(bits >> 11) * 0x1p-53 * 2.0 - 1.0;
      batch.x[static_cast<std::size_t>(s * inputs + i)] = v;
      sum += v * ((i % 3) - 1);  // a fixed teacher, integer coefficients
    }
    for (int o = 0; o < outputs; ++o) {
      std::uint64_t noise = value_bits(seed ^ 0x5bd1e995ull, sample, static_cast<std::uint64_t>(o));
      batch.y[static_cast<std::size_t>(s * outputs + o)] =
          kind == DataKind::Integer ? sum + static_cast<double>(static_cast<int>(noise % 3) - 1)
                                    : std::sin(sum + o) + 0.1 * (static_cast<double>(noise >> 11) * 0x1p-53);
    }
  }
  return batch;
}

}  // namespace mlp
