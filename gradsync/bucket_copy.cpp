#include "gradsync/bucket_copy.hpp"

#include <cstdint>
#include <cstring>

#include "collectives/kernels/reduce_kernels.hpp"
#include "common/error.hpp"

namespace canopy::gradsync {
namespace {

template <typename T>
void scale_plain(void* dst, const void* src, std::size_t count, T scale) {
  T* out = static_cast<T*>(dst);
  const T* in = static_cast<const T*>(src);
  for (std::size_t i = 0; i < count; ++i) out[i] = in[i] * scale;
}

template <float (*ToFloat)(std::uint16_t), std::uint16_t (*FromFloat)(float)>
void scale_half(void* dst, const void* src, std::size_t count, float scale) {
  auto* out = static_cast<std::uint16_t*>(dst);
  const auto* in = static_cast<const std::uint16_t*>(src);
  for (std::size_t i = 0; i < count; ++i) out[i] = FromFloat(ToFloat(in[i]) * scale);
}

}  // namespace

bool is_floating_point(DataType type) {
  return type == DataType::Float32 || type == DataType::Float64 || type == DataType::Float16 ||
         type == DataType::BFloat16;
}

void copy_scaled(DataType type, void* dst, const void* src, std::size_t count, double scale) {
  if (count == 0) return;
  if (scale == 1.0) {
    if (dst != src) std::memcpy(dst, src, count * size_of(type));
    return;
  }
  switch (type) {
    case DataType::Float32:
      return scale_plain<float>(dst, src, count, static_cast<float>(scale));
    case DataType::Float64:
      return scale_plain<double>(dst, src, count, scale);
    case DataType::Float16:
      return scale_half<collectives::half_to_float, collectives::float_to_half>(dst, src, count,
                                                                                static_cast<float>(scale));
    case DataType::BFloat16:
      return scale_half<collectives::bfloat16_to_float, collectives::float_to_bfloat16>(
          dst, src, count, static_cast<float>(scale));
    default:
      fail(ErrorCode::InvalidArgument, "copy_scaled: {} gradients cannot be averaged", to_string(type));
  }
}

}  // namespace canopy::gradsync
