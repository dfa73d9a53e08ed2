// float16 (IEEE binary16) and bfloat16 <-> float32 conversions: one element (inline, branch-free so that
// loops over them auto-vectorise) and whole arrays (F16C instructions when the CPU has them).
//
// Every path gives the same bits, so ranks on machines with and without F16C agree:
//  - to float: exact (every half and bfloat16 value is a float); a float16 NaN keeps its payload and is
//    made quiet (as VCVTPH2PS does); a bfloat16 NaN keeps all its bits.
//  - from float: round to nearest, ties to even; overflow gives infinity; results below the smallest
//    subnormal round to (signed) zero; a NaN stays NaN of the same sign, made quiet, keeping the top
//    payload bits (as VCVTPS2PH does).
// The float16 software path rounds subnormal results with one float addition and so assumes the default
// rounding mode (to nearest); flush-to-zero and denormals-are-zero do not change any result.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace canopy::collectives::detail {

// condition ? if_true : if_false, as bit masks. A plain ?: whose operands include floating-point
// arithmetic is compiled to a branch (the arithmetic may not be speculated under -ftrapping-math), and a
// branch stops the vectoriser.
[[gnu::always_inline]] inline std::uint32_t select_bits(bool condition, std::uint32_t if_true,
                                                        std::uint32_t if_false) {
  const std::uint32_t mask = 0u - static_cast<std::uint32_t>(condition);
  return (if_true & mask) | (if_false & ~mask);
}

inline float float16_bits_to_float(std::uint16_t half) {
  const std::uint32_t sign = static_cast<std::uint32_t>(half & 0x8000u) << 16;
  const std::uint32_t magnitude = half & 0x7FFFu;  // exponent and mantissa
  // Normal: move the 15-bit field into place and rebias the exponent from 15 to 127.
  const std::uint32_t normal = (magnitude << 13) + ((127u - 15u) << 23);
  // Infinity and NaN: exponent all ones; a NaN also gets the quiet bit.
  const std::uint32_t special =
      (magnitude << 13) | 0x7F800000u | select_bits(magnitude > 0x7C00u, 0x00400000u, 0u);
  // Zero and subnormal: the mantissa counts units of 2^-24, which a float holds exactly. (Converted as
  // signed: SSE2 has no unsigned conversion.)
  const std::uint32_t tiny =
      std::bit_cast<std::uint32_t>(static_cast<float>(static_cast<std::int32_t>(magnitude)) * 0x1p-24f);
  const std::uint32_t bits =
      select_bits(magnitude >= 0x7C00u, special, select_bits(magnitude >= 0x0400u, normal, tiny));
  return std::bit_cast<float>(sign | bits);
}

inline std::uint16_t float_to_float16_bits(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  const std::uint32_t magnitude = bits & 0x7FFFFFFFu;
  // |value| >= 65520 rounds to infinity (65504 is the largest half; 65520 is the tie, rounding to even).
  // NaN keeps its top 10 payload bits and the quiet bit.
  const std::uint32_t special =
      select_bits(magnitude > 0x7F800000u, 0x7E00u | ((magnitude >> 13) & 0x03FFu), 0x7C00u);
  // Normal half (|value| >= 2^-14): drop 13 mantissa bits, adding just under half an ulp plus the lowest
  // kept bit so that ties go to even; a carry into the exponent is the correct result.
  const std::uint32_t odd = (magnitude >> 13) & 1u;
  const std::uint32_t normal = (magnitude - ((127u - 15u) << 23) + 0x0FFFu + odd) >> 13;
  // Subnormal half or zero: adding 0.5 puts units of 2^-24 in the low mantissa bits and the float adder
  // rounds to nearest even for us.
  const float magic = 0.5f;
  const std::uint32_t tiny = std::bit_cast<std::uint32_t>(std::bit_cast<float>(magnitude) + magic) -
                             std::bit_cast<std::uint32_t>(magic);
  const std::uint32_t result =
      select_bits(magnitude >= 0x477FF000u, special, select_bits(magnitude >= 0x38800000u, normal, tiny));
  return static_cast<std::uint16_t>(sign | result);
}

inline float bfloat16_bits_to_float(std::uint16_t half) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(half) << 16);
}

inline std::uint16_t float_to_bfloat16_bits(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  // A NaN keeps sign and top payload bits and becomes quiet (its payload may live in the dropped bits).
  const std::uint32_t nan = (bits >> 16) | 0x0040u;
  // Round to nearest even by adding just under half an ulp plus the lowest kept bit; a carry out of the
  // mantissa moves to the next binade or to infinity, both correct.
  const std::uint32_t rounded = (bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16;
  return static_cast<std::uint16_t>(select_bits((bits & 0x7FFFFFFFu) > 0x7F800000u, nan, rounded));
}

// Whole arrays; the kernels convert blocks with these. Dispatched once to F16C when the CPU has it.
void convert_float16_to_float(const std::uint16_t* src, float* dst, std::size_t count);
void convert_float_to_float16(const float* src, std::uint16_t* dst, std::size_t count);
void convert_bfloat16_to_float(const std::uint16_t* src, float* dst, std::size_t count);
void convert_float_to_bfloat16(const float* src, std::uint16_t* dst, std::size_t count);

// The two float16 implementations behind the dispatch, so tests can hold them to the same bits.
void convert_float16_to_float_portable(const std::uint16_t* src, float* dst, std::size_t count);
void convert_float_to_float16_portable(const float* src, std::uint16_t* dst, std::size_t count);
bool cpu_has_f16c();  // whether the two below may be called
void convert_float16_to_float_f16c(const std::uint16_t* src, float* dst, std::size_t count);
void convert_float_to_float16_f16c(const float* src, std::uint16_t* dst, std::size_t count);

}  // namespace canopy::collectives::detail
