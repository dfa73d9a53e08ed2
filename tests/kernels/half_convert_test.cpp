// float16 and bfloat16 conversions: every one of the 65536 encodings, and floats placed on, beside and
// exactly between representable values, against the slow reference and (float16) the compiler's own
// _Float16; the bulk paths (portable, F16C) against the scalar one.
#include "collectives/kernels/half_convert.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "collectives/kernels/reduce_kernels.hpp"
#include "tests/kernels/reference_float.hpp"

namespace canopy::collectives {
namespace {

using testing::BinaryFormat;
using testing::is_nan_encoding;
using testing::kBFloat16;
using testing::kFloat16;
using testing::reference_decode;
using testing::reference_encode;

std::uint32_t bits_of(float value) {
  return std::bit_cast<std::uint32_t>(value);
}

// Floats that probe the rounding of `format`: every representable value, the exact midpoints between
// neighbours (the ties) and the floats just either side of them, plus random floats of every magnitude.
std::vector<float> probe_floats(BinaryFormat format, float (*decode)(std::uint16_t)) {
  std::vector<float> floats;
  for (std::uint32_t bits = 0; bits < 0x10000; ++bits) {
    const auto encoding = static_cast<std::uint16_t>(bits);
    const auto next = static_cast<std::uint16_t>(bits + 1);
    if (is_nan_encoding(encoding, format) || is_nan_encoding(next, format)) continue;
    const float here = decode(encoding);
    floats.push_back(here);
    if (std::isinf(here) || std::isinf(decode(next)) || next == 0x8000) continue;
    const float midpoint = static_cast<float>((static_cast<double>(here) + decode(next)) / 2);
    floats.push_back(midpoint);
    floats.push_back(std::nextafter(midpoint, 0.0f));
    floats.push_back(std::nextafter(midpoint, midpoint * 2));
  }
  std::mt19937 random(20261129);
  std::uniform_int_distribution<std::uint32_t> any_bits;
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-40, 40);
  for (int i = 0; i < 200000; ++i) {
    floats.push_back(std::bit_cast<float>(any_bits(random)));
    floats.push_back(std::ldexp(mantissa(random), exponent(random)) * (i % 2 ? 1.0f : -1.0f));
  }
  floats.push_back(0x1p-149f);  // float subnormals
  floats.push_back(-0x1p-130f);
  return floats;
}

TEST(HalfConvert, EveryFloat16DecodesExactly) {
  for (std::uint32_t bits = 0; bits < 0x10000; ++bits) {
    const auto half = static_cast<std::uint16_t>(bits);
    const float value = half_to_float(half);
    if (is_nan_encoding(half, kFloat16)) {
      // Quiet NaN, same sign, payload moved to the top of the float mantissa.
      const std::uint32_t expected = (static_cast<std::uint32_t>(half & 0x8000) << 16) | 0x7FC00000u |
                                     (static_cast<std::uint32_t>(half & 0x03FF) << 13);
      ASSERT_EQ(bits_of(value), expected) << "half 0x" << std::hex << bits;
    } else {
      const double expected = reference_decode(half, kFloat16);
      ASSERT_EQ(static_cast<double>(value), expected) << "half 0x" << std::hex << bits;
      ASSERT_EQ(std::signbit(value), std::signbit(expected)) << "half 0x" << std::hex << bits;
    }
  }
}

TEST(HalfConvert, EveryFloat16RoundTrips) {
  for (std::uint32_t bits = 0; bits < 0x10000; ++bits) {
    const auto half = static_cast<std::uint16_t>(bits);
    // A NaN comes back quiet (0x0200 set), with its sign and payload.
    const auto expected = is_nan_encoding(half, kFloat16) ? static_cast<std::uint16_t>(half | 0x0200) : half;
    ASSERT_EQ(float_to_half(half_to_float(half)), expected) << "half 0x" << std::hex << bits;
  }
}

TEST(HalfConvert, FloatToFloat16RoundsToNearestEven) {
  for (float value : probe_floats(kFloat16, half_to_float)) {
    if (std::isnan(value)) continue;
    ASSERT_EQ(float_to_half(value), reference_encode(value, kFloat16))
        << "float " << value << " bits 0x" << std::hex << bits_of(value);
  }
  // The corners by name: largest half, the overflow tie, the smallest subnormal and its half-way point.
  EXPECT_EQ(float_to_half(65504.0f), 0x7BFF);
  EXPECT_EQ(float_to_half(65519.996f), 0x7BFF);
  EXPECT_EQ(float_to_half(65520.0f), 0x7C00);
  EXPECT_EQ(float_to_half(-1e10f), 0xFC00);
  EXPECT_EQ(float_to_half(0x1p-24f), 0x0001);
  EXPECT_EQ(float_to_half(0x1p-25f), 0x0000);         // tie between 0 and 2^-24: even is 0
  EXPECT_EQ(float_to_half(0x1.8p-24f), 0x0002);       // tie between 1 and 2 units: even is 2
  EXPECT_EQ(float_to_half(-0x1p-26f), 0x8000);        // keeps the sign of zero
  EXPECT_EQ(float_to_half(1.0f + 0x1p-11f), 0x3C00);  // tie: even is 1.0
  EXPECT_EQ(float_to_half(1.0f + 0x3p-11f), 0x3C02);  // tie: even is 1 + 2^-9
}

#ifdef __FLT16_MANT_DIG__
TEST(HalfConvert, FloatToFloat16MatchesTheCompiler) {
  for (float value : probe_floats(kFloat16, half_to_float)) {
    if (std::isnan(value)) continue;
    ASSERT_EQ(float_to_half(value), std::bit_cast<std::uint16_t>(static_cast<_Float16>(value)))
        << "float " << value;
  }
}
#endif

TEST(HalfConvert, FloatNaNStaysNaNWithSignAndTopPayload) {
  const std::uint32_t nans[] = {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u, 0x7FBFFFFFu, 0x7FC02000u};
  for (std::uint32_t nan : nans) {
    const float value = std::bit_cast<float>(nan);
    const std::uint16_t half = float_to_half(value);
    EXPECT_TRUE(is_nan_encoding(half, kFloat16)) << std::hex << nan;
    EXPECT_EQ(half, static_cast<std::uint16_t>(((nan >> 16) & 0x8000) | 0x7E00 | ((nan >> 13) & 0x03FF)))
        << std::hex << nan;
    const std::uint16_t bf16 = float_to_bfloat16(value);
    EXPECT_TRUE(is_nan_encoding(bf16, kBFloat16)) << std::hex << nan;
    EXPECT_EQ(bf16, static_cast<std::uint16_t>((nan >> 16) | 0x0040)) << std::hex << nan;
  }
}

TEST(BFloat16Convert, EveryBFloat16DecodesExactlyAndRoundTrips) {
  for (std::uint32_t bits = 0; bits < 0x10000; ++bits) {
    const auto bf16 = static_cast<std::uint16_t>(bits);
    const float value = bfloat16_to_float(bf16);
    ASSERT_EQ(bits_of(value), bits << 16) << "bfloat16 0x" << std::hex << bits;  // every bit kept, NaN too
    if (!is_nan_encoding(bf16, kBFloat16)) {
      ASSERT_EQ(static_cast<double>(value), reference_decode(bf16, kBFloat16)) << std::hex << bits;
      ASSERT_EQ(float_to_bfloat16(value), bf16) << "bfloat16 0x" << std::hex << bits;
    } else {
      ASSERT_EQ(float_to_bfloat16(value), bf16 | 0x0040) << "bfloat16 0x" << std::hex << bits;
    }
  }
}

TEST(BFloat16Convert, FloatToBFloat16RoundsToNearestEven) {
  for (float value : probe_floats(kBFloat16, bfloat16_to_float)) {
    if (std::isnan(value)) continue;
    ASSERT_EQ(float_to_bfloat16(value), reference_encode(value, kBFloat16))
        << "float " << value << " bits 0x" << std::hex << bits_of(value);
  }
  EXPECT_EQ(float_to_bfloat16(std::bit_cast<float>(0x7F7FFFFFu)), 0x7F80);  // FLT_MAX rounds to infinity
  EXPECT_EQ(float_to_bfloat16(std::bit_cast<float>(0x3F808000u)), 0x3F80);  // tie: even
  EXPECT_EQ(float_to_bfloat16(std::bit_cast<float>(0x3F818000u)), 0x3F82);  // tie: even (up)
  EXPECT_EQ(float_to_bfloat16(0x1p-149f), 0x0000);                          // below half the smallest
}

// Every 16-bit encoding, converted in bulk from an offset that leaves the array unaligned and with a
// length that leaves a tail, must match the scalar conversion bit for bit.
TEST(BulkConvert, EveryPathMatchesTheScalarConversion) {
  std::vector<std::uint16_t> halves(0x10000 + 3);
  for (std::size_t i = 0; i < halves.size(); ++i) halves[i] = static_cast<std::uint16_t>(i * 40503u);
  std::vector<float> probes = probe_floats(kFloat16, half_to_float);
  for (std::uint32_t nan : {0x7FC00000u, 0xFF800001u, 0x7FBFFFFFu})
    probes.push_back(std::bit_cast<float>(nan));

  using Widen = void (*)(const std::uint16_t*, float*, std::size_t);
  using Narrow = void (*)(const float*, std::uint16_t*, std::size_t);
  struct Path {
    const char* name;
    Widen widen;
    Narrow narrow;
    float (*scalar_widen)(std::uint16_t);
    std::uint16_t (*scalar_narrow)(float);
  };
  std::vector<Path> paths = {
      {"float16 dispatched", detail::convert_float16_to_float, detail::convert_float_to_float16,
       half_to_float, float_to_half},
      {"float16 portable", detail::convert_float16_to_float_portable,
       detail::convert_float_to_float16_portable, half_to_float, float_to_half},
      {"bfloat16", detail::convert_bfloat16_to_float, detail::convert_float_to_bfloat16, bfloat16_to_float,
       float_to_bfloat16},
  };
  if (detail::cpu_has_f16c()) {
    paths.push_back({"float16 F16C", detail::convert_float16_to_float_f16c,
                     detail::convert_float_to_float16_f16c, half_to_float, float_to_half});
  } else {
    std::printf("this CPU has no F16C: its path is not compared here\n");
  }
  for (const Path& path : paths) {
    SCOPED_TRACE(path.name);
    std::vector<float> widened(halves.size());
    path.widen(halves.data() + 1, widened.data() + 1, halves.size() - 1);
    for (std::size_t i = 1; i < halves.size(); ++i) {
      ASSERT_EQ(bits_of(widened[i]), bits_of(path.scalar_widen(halves[i]))) << "element " << i;
    }
    std::vector<std::uint16_t> narrowed(probes.size());
    path.narrow(probes.data() + 1, narrowed.data() + 1, probes.size() - 1);
    for (std::size_t i = 1; i < probes.size(); ++i) {
      ASSERT_EQ(narrowed[i], path.scalar_narrow(probes[i]))
          << "float bits 0x" << std::hex << bits_of(probes[i]);
    }
  }
}

}  // namespace
}  // namespace canopy::collectives
