// Moving gradients into a bucket's flat buffer and the reduced sums back out, averaged on the way.
#pragma once

#include <cstddef>

#include "canopy/types.hpp"

namespace canopy::gradsync {

// dst[i] = src[i] / contributions, divided as an all-reduce with ReduceOp::Avg divides (the communicator's
// finish_average: float16 / bfloat16 in float32, rounded once), so that a gradient averaged on its way out
// of a bucket and one averaged in place are rounded alike. Floating-point types only.
void copy_averaged(DataType type, void* dst, const void* src, std::size_t count, int contributions);

bool is_floating_point(DataType type);

}  // namespace canopy::gradsync
