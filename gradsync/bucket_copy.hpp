// Moving gradients into a bucket's flat buffer and the reduced sums back out, averaged on the way.
#pragma once

#include <cstddef>

#include "canopy/types.hpp"

namespace canopy::gradsync {

// dst[i] = src[i] * scale, in the precision of `type` (float16 / bfloat16 computed in float32 and rounded
// once). The averaging 1/world rides on the copy out of the bucket instead of a pass of its own.
void copy_scaled(DataType type, void* dst, const void* src, std::size_t count, double scale);

bool is_floating_point(DataType type);

}  // namespace canopy::gradsync
