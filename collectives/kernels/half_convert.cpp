#include "collectives/kernels/half_convert.hpp"

#include "collectives/kernels/multiversion.hpp"
#include "collectives/kernels/reduce_kernels.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CANOPY_HAVE_F16C_PATH 1
#endif

namespace canopy::collectives {

float half_to_float(std::uint16_t bits) {
  return detail::float16_bits_to_float(bits);
}
std::uint16_t float_to_half(float value) {
  return detail::float_to_float16_bits(value);
}
float bfloat16_to_float(std::uint16_t bits) {
  return detail::bfloat16_bits_to_float(bits);
}
std::uint16_t float_to_bfloat16(float value) {
  return detail::float_to_bfloat16_bits(value);
}

namespace detail {

CANOPY_MULTIVERSION void convert_float16_to_float_portable(const std::uint16_t* __restrict src,
                                                           float* __restrict dst, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) dst[i] = float16_bits_to_float(src[i]);
}

CANOPY_MULTIVERSION void convert_float_to_float16_portable(const float* __restrict src,
                                                           std::uint16_t* __restrict dst, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) dst[i] = float_to_float16_bits(src[i]);
}

CANOPY_MULTIVERSION void convert_bfloat16_to_float(const std::uint16_t* __restrict src, float* __restrict dst,
                                                   std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) dst[i] = bfloat16_bits_to_float(src[i]);
}

CANOPY_MULTIVERSION void convert_float_to_bfloat16(const float* __restrict src, std::uint16_t* __restrict dst,
                                                   std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) dst[i] = float_to_bfloat16_bits(src[i]);
}

#ifdef CANOPY_HAVE_F16C_PATH

bool cpu_has_f16c() {
  static const bool has = __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
  return has;
}

// Eight elements per instruction; the few left over take the software path, which gives the same bits.
__attribute__((target("avx,f16c"))) void convert_float16_to_float_f16c(const std::uint16_t* src, float* dst,
                                                                       std::size_t count) {
  std::size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m128i halves = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(halves));
  }
  for (; i < count; ++i) dst[i] = float16_bits_to_float(src[i]);
}

__attribute__((target("avx,f16c"))) void convert_float_to_float16_f16c(const float* src, std::uint16_t* dst,
                                                                       std::size_t count) {
  std::size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m128i halves = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), halves);
  }
  for (; i < count; ++i) dst[i] = float_to_float16_bits(src[i]);
}

#else

bool cpu_has_f16c() {
  return false;
}
void convert_float16_to_float_f16c(const std::uint16_t* src, float* dst, std::size_t count) {
  convert_float16_to_float_portable(src, dst, count);
}
void convert_float_to_float16_f16c(const float* src, std::uint16_t* dst, std::size_t count) {
  convert_float_to_float16_portable(src, dst, count);
}

#endif

void convert_float16_to_float(const std::uint16_t* src, float* dst, std::size_t count) {
  static const auto convert =
      cpu_has_f16c() ? convert_float16_to_float_f16c : convert_float16_to_float_portable;
  convert(src, dst, count);
}

void convert_float_to_float16(const float* src, std::uint16_t* dst, std::size_t count) {
  static const auto convert =
      cpu_has_f16c() ? convert_float_to_float16_f16c : convert_float_to_float16_portable;
  convert(src, dst, count);
}

}  // namespace detail
}  // namespace canopy::collectives
