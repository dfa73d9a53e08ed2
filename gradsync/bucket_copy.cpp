#include "gradsync/bucket_copy.hpp"

#include <algorithm>
#include <cstring>

#include "collectives/kernels/reduce_kernels.hpp"
#include "common/error.hpp"

namespace canopy::gradsync {

bool is_floating_point(DataType type) {
  return type == DataType::Float32 || type == DataType::Float64 || type == DataType::Float16 ||
         type == DataType::BFloat16;
}

void copy_averaged(DataType type, void* dst, const void* src, std::size_t count, int contributions) {
  if (!is_floating_point(type))
    fail(ErrorCode::InvalidArgument, "copy_averaged: {} gradients cannot be averaged", to_string(type));
  // Block by block, so that the division finds the block still in cache: one pass through memory.
  constexpr std::size_t kBlockBytes = 64 << 10;
  const std::size_t element = size_of(type), block = kBlockBytes / element;
  auto* out = static_cast<std::byte*>(dst);
  const auto* in = static_cast<const std::byte*>(src);
  for (std::size_t done = 0; done < count; done += block) {
    const std::size_t n = std::min(block, count - done);
    std::memcpy(out + done * element, in + done * element, n * element);
    if (contributions != 1) collectives::finish_average(type, out + done * element, n, contributions);
  }
}

}  // namespace canopy::gradsync
