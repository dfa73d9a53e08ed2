// Slow, obviously-correct float16/bfloat16 encoding and decoding for the tests, written from the
// definition (value = mantissa * 2^exponent, round to nearest even with nearbyint) and sharing no code or
// bit tricks with the kernels.
#pragma once

#include <algorithm>
#include <cfenv>
#include <cmath>
#include <cstdint>

namespace canopy::collectives::testing {

struct BinaryFormat {
  int exponent_bits;
  int mantissa_bits;  // stored bits, without the implicit leading one
};
inline constexpr BinaryFormat kFloat16{5, 10};
inline constexpr BinaryFormat kBFloat16{8, 7};

inline int bias(BinaryFormat f) {
  return (1 << (f.exponent_bits - 1)) - 1;
}

// The value of a non-NaN encoding.
inline double reference_decode(std::uint16_t bits, BinaryFormat f) {
  const int mantissa = bits & ((1 << f.mantissa_bits) - 1);
  const int exponent = (bits >> f.mantissa_bits) & ((1 << f.exponent_bits) - 1);
  const double sign = (bits >> (f.exponent_bits + f.mantissa_bits)) & 1 ? -1.0 : 1.0;
  if (exponent == (1 << f.exponent_bits) - 1) return sign * INFINITY;  // callers keep NaN out
  if (exponent == 0) return sign * std::ldexp(mantissa, 1 - bias(f) - f.mantissa_bits);
  return sign * std::ldexp(mantissa + (1 << f.mantissa_bits), exponent - bias(f) - f.mantissa_bits);
}

inline bool is_nan_encoding(std::uint16_t bits, BinaryFormat f) {
  const int exponent = (bits >> f.mantissa_bits) & ((1 << f.exponent_bits) - 1);
  return exponent == (1 << f.exponent_bits) - 1 && (bits & ((1 << f.mantissa_bits) - 1)) != 0;
}

// The encoding of a non-NaN value, rounded to nearest, ties to even.
inline std::uint16_t reference_encode(double value, BinaryFormat f) {
  const std::uint16_t sign = std::signbit(value)
                                 ? static_cast<std::uint16_t>(1 << (f.exponent_bits + f.mantissa_bits))
                                 : std::uint16_t{0};
  const int min_exponent = 1 - bias(f);
  const int all_ones = (1 << f.exponent_bits) - 1;
  const double magnitude = std::fabs(value);
  int exponent =
      std::isinf(magnitude) || magnitude == 0 ? min_exponent : std::max(std::ilogb(magnitude), min_exponent);
  if (std::isinf(magnitude)) {
    return static_cast<std::uint16_t>(sign | (all_ones << f.mantissa_bits));
  }
  // Count in units of the spacing of representable values at this exponent and round that count.
  std::fesetround(FE_TONEAREST);
  double units = std::nearbyint(std::ldexp(magnitude, f.mantissa_bits - exponent));
  if (units == std::ldexp(1.0, f.mantissa_bits + 1)) {  // rounded up into the next binade
    units /= 2;
    exponent += 1;
  }
  const bool normal = units >= std::ldexp(1.0, f.mantissa_bits);
  int biased = normal ? exponent + bias(f) : 0;
  int mantissa = static_cast<int>(normal ? units - std::ldexp(1.0, f.mantissa_bits) : units);
  if (biased >= all_ones) {  // overflow: infinity
    biased = all_ones;
    mantissa = 0;
  }
  return static_cast<std::uint16_t>(sign | (biased << f.mantissa_bits) | mantissa);
}

}  // namespace canopy::collectives::testing
