// The element operations behind reduce_into, one struct per ReduceOp, each a single expression without
// branches so that loops over them auto-vectorise.
//
// Bit-for-bit rules (so that every rank, every CPU and every code path -- vector body or scalar tail,
// AVX2 or SSE2 -- produces identical bytes):
//  - integers wrap around: computed in the unsigned type of the same width;
//  - every NaN a floating-point operation produces is the canonical quiet NaN (positive, payload only
//    the quiet bit), whichever NaN went in: otherwise the payload would depend on operand order inside
//    the CPU's vector unit;
//  - Min and Max are IEEE 754-2019 minimum/maximum: NaN if either operand is NaN, and -0 < +0.
// With these rules every op is commutative bit-for-bit, which reduce_into relies on.
#pragma once

#include <bit>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace canopy::collectives::detail {

template <typename T>
[[gnu::always_inline]] inline T canonical_nan_if_nan(T value) {
  return value != value ? std::numeric_limits<T>::quiet_NaN() : value;
}

// Bitwise OR / AND of two floats' representations (std::signbit would need 64-bit vector compares,
// which SSE2 lacks; these vectorise everywhere).
template <typename T>
using FloatBits = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
template <typename T>
[[gnu::always_inline]] inline T bits_or(T a, T b) {
  return std::bit_cast<T>(std::bit_cast<FloatBits<T>>(a) | std::bit_cast<FloatBits<T>>(b));
}
template <typename T>
[[gnu::always_inline]] inline T bits_and(T a, T b) {
  return std::bit_cast<T>(std::bit_cast<FloatBits<T>>(a) & std::bit_cast<FloatBits<T>>(b));
}

// The unsigned type integer arithmetic is done in: at least `unsigned int`, so that uint8 * uint8 is not
// promoted to a signed int.
template <typename T>
using WrapType = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

struct SumOp {
  template <typename T>
  [[gnu::always_inline]] static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      return canonical_nan_if_nan<T>(a + b);
    } else {
      using U = WrapType<T>;
      return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    }
  }
};

struct ProdOp {
  template <typename T>
  [[gnu::always_inline]] static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      return canonical_nan_if_nan<T>(a * b);
    } else {
      using U = WrapType<T>;
      return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
    }
  }
};

struct MinOp {
  template <typename T>
  [[gnu::always_inline]] static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      T lower = a < b ? a : b;  // b when equal or unordered
      // Equal values differ only for zeros: OR of the bits picks -0 from (-0, +0) in either order.
      lower = a == b ? bits_or(a, b) : lower;
      return (a != a || b != b) ? std::numeric_limits<T>::quiet_NaN() : lower;
    } else {
      return a < b ? a : b;
    }
  }
};

struct MaxOp {
  template <typename T>
  [[gnu::always_inline]] static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      T upper = a > b ? a : b;  // b when equal or unordered
      // Equal values differ only for zeros: AND of the bits picks +0 from (-0, +0) in either order.
      upper = a == b ? bits_and(a, b) : upper;
      return (a != a || b != b) ? std::numeric_limits<T>::quiet_NaN() : upper;
    } else {
      return a > b ? a : b;
    }
  }
};

// The last step of Avg: divides by the number of contributions.
struct DivideOp {
  template <typename T>
  [[gnu::always_inline]] static T apply(T value, int divisor) {
    if constexpr (std::is_floating_point_v<T>) {
      return canonical_nan_if_nan<T>(value / static_cast<T>(divisor));
    } else if constexpr (sizeof(T) <= 4) {
      // Exact: for |value| < 2^53 the rounded double quotient never crosses an integer the true quotient
      // does not reach, so truncating it truncates the true quotient toward zero. Unlike integer
      // division, this vectorises.
      return static_cast<T>(static_cast<double>(value) / static_cast<double>(divisor));
    } else {
      return static_cast<T>(value / divisor);  // C++ integer division truncates toward zero
    }
  }
};

}  // namespace canopy::collectives::detail
