// reduce_into and finish_average for every dtype x op against a naive per-element reference, on lengths
// that exercise vector bodies and scalar tails, from pointers at different offsets; then the corner cases
// by name: wraparound, NaN, infinities, signed zeros, operand order, errors.
#include "collectives/kernels/reduce_kernels.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "canopy/error.hpp"

namespace canopy::collectives {
namespace {

__extension__ typedef __int128 Int128;

constexpr std::uint32_t kCanonicalNaN32 = 0x7FC00000u;

// ---- The reference: one element at a time, written from the documented semantics. ----

template <typename F>
F reference_float_op(ReduceOp op, F a, F b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<F>::quiet_NaN();
  F result = 0;
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      result = a + b;
      break;
    case ReduceOp::Prod:
      result = a * b;
      break;
    case ReduceOp::Min:
      if (a == 0 && b == 0) return (std::signbit(a) || std::signbit(b)) ? F(-0.0) : F(0.0);
      result = std::fmin(a, b);
      break;
    case ReduceOp::Max:
      if (a == 0 && b == 0) return (std::signbit(a) && std::signbit(b)) ? F(-0.0) : F(0.0);
      result = std::fmax(a, b);
      break;
  }
  return std::isnan(result) ? std::numeric_limits<F>::quiet_NaN() : result;  // inf - inf, 0 * inf
}

// Integers: the exact result in 128 bits, then wrapped to the width of T (modular since C++20).
template <typename T>
T reference_int_op(ReduceOp op, T a, T b) {
  const Int128 x = a;
  const Int128 y = b;
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      return static_cast<T>(x + y);
    case ReduceOp::Prod:
      return static_cast<T>(static_cast<std::uint64_t>(x * y));
    case ReduceOp::Min:
      return x < y ? a : b;
    case ReduceOp::Max:
      return x > y ? a : b;
  }
  return 0;
}

// Applies the reference to one element of `type` stored at a and b, writing to out.
void reference_element(DataType type, ReduceOp op, const void* a, const void* b, void* out) {
  auto run = [&]<typename T>(auto compute) {
    T x, y;
    std::memcpy(&x, a, sizeof(T));
    std::memcpy(&y, b, sizeof(T));
    const T result = compute(x, y);
    std::memcpy(out, &result, sizeof(T));
  };
  switch (type) {
    case DataType::Float32:
      return run.operator()<float>([&](float x, float y) { return reference_float_op(op, x, y); });
    case DataType::Float64:
      return run.operator()<double>([&](double x, double y) { return reference_float_op(op, x, y); });
    case DataType::Float16:
      return run.operator()<std::uint16_t>([&](std::uint16_t x, std::uint16_t y) {
        return float_to_half(reference_float_op(op, half_to_float(x), half_to_float(y)));
      });
    case DataType::BFloat16:
      return run.operator()<std::uint16_t>([&](std::uint16_t x, std::uint16_t y) {
        return float_to_bfloat16(reference_float_op(op, bfloat16_to_float(x), bfloat16_to_float(y)));
      });
    case DataType::Int8:
      return run.operator()<std::int8_t>(
          [&](std::int8_t x, std::int8_t y) { return reference_int_op(op, x, y); });
    case DataType::UInt8:
      return run.operator()<std::uint8_t>(
          [&](std::uint8_t x, std::uint8_t y) { return reference_int_op(op, x, y); });
    case DataType::Int32:
      return run.operator()<std::int32_t>(
          [&](std::int32_t x, std::int32_t y) { return reference_int_op(op, x, y); });
    case DataType::Int64:
      return run.operator()<std::int64_t>(
          [&](std::int64_t x, std::int64_t y) { return reference_int_op(op, x, y); });
  }
}

// ---- Inputs: random bit patterns mixed with moderate values and the special ones. ----

void fill_random(DataType type, std::byte* data, std::size_t count, std::mt19937_64& random) {
  const std::size_t size = size_of(type);
  std::uniform_real_distribution<double> moderate(-100.0, 100.0);
  const float specials32[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 0x1p-149f, 3.4e38f, 1.0f, -1.0f};
  for (std::size_t i = 0; i < count; ++i) {
    std::uint64_t bits = random();
    const unsigned kind = bits % 8;  // the low bits choose the kind, the high bits are the value
    bits >>= 3;
    std::byte* element = data + i * size;
    if (type == DataType::Float32 && kind < 3) {
      const float value = kind == 0 ? specials32[bits % 10] : static_cast<float>(moderate(random));
      std::memcpy(element, &value, size);
    } else if (type == DataType::Float64 && kind < 3) {
      const double value = kind == 0 ? static_cast<double>(specials32[bits % 10]) : moderate(random);
      std::memcpy(element, &value, size);
    } else if ((type == DataType::Float16 || type == DataType::BFloat16) && kind < 3) {
      const float value = kind == 0 ? specials32[bits % 10] : static_cast<float>(moderate(random));
      const std::uint16_t half = type == DataType::Float16 ? float_to_half(value) : float_to_bfloat16(value);
      std::memcpy(element, &half, size);
    } else {
      std::memcpy(element, &bits, size);  // any bit pattern: NaN payloads, subnormals, extremes
    }
  }
}

// Compares element by element, so a failure names the element and both operands.
void expect_same_bytes(DataType type, ReduceOp op, const std::byte* got, const std::byte* want,
                       const std::byte* dst_in, const std::byte* src_in, std::size_t count) {
  const std::size_t size = size_of(type);
  for (std::size_t i = 0; i < count; ++i) {
    if (std::memcmp(got + i * size, want + i * size, size) == 0) continue;
    auto hex = [size](const std::byte* p) {
      std::uint64_t v = 0;
      std::memcpy(&v, p, size);
      return std::to_string(v);
    };
    FAIL() << to_string(type) << " " << to_string(op) << " element " << i << " of " << count << ": dst "
           << hex(dst_in + i * size) << " src " << hex(src_in + i * size) << " gave " << hex(got + i * size)
           << ", reference " << hex(want + i * size) << " (bits as unsigned)";
  }
}

// ---- Every dtype x op, many lengths and offsets. ----

class ReduceEveryTypeAndOp : public ::testing::TestWithParam<std::tuple<DataType, ReduceOp>> {};

TEST_P(ReduceEveryTypeAndOp, MatchesTheReferenceOnAwkwardLengthsAndOffsets) {
  const auto [type, op] = GetParam();
  const std::size_t size = size_of(type);
  std::mt19937_64 random(static_cast<std::uint64_t>(type) * 16 + static_cast<std::uint64_t>(op));
  struct Case {
    std::size_t count, dst_offset, src_offset;  // offsets in elements: vector alignment differs
  };
  const Case cases[] = {{0, 0, 0},  {1, 0, 0},  {3, 1, 0},    {15, 0, 3},   {16, 0, 0},
                        {17, 1, 2}, {63, 5, 0}, {1000, 0, 1}, {4099, 3, 7}, {1000003, 1, 0}};
  for (const Case& c : cases) {
    SCOPED_TRACE("count " + std::to_string(c.count) + " offsets " + std::to_string(c.dst_offset) + "/" +
                 std::to_string(c.src_offset));
    // Backed by 8-byte elements so that every pointer is aligned to its element size; the bytes around
    // the ranges hold patterns that an overrun would change (for most ops).
    std::vector<std::uint64_t> dst_store(c.count + 8, 0xA5A5A5A5A5A5A5A5u),
        src_store(c.count + 8, 0x3C3C3C3C3C3C3C3Cu);
    std::byte* dst = reinterpret_cast<std::byte*>(dst_store.data()) + c.dst_offset * size;
    std::byte* src = reinterpret_cast<std::byte*>(src_store.data()) + c.src_offset * size;
    fill_random(type, dst, c.count, random);
    fill_random(type, src, c.count, random);
    const std::vector<std::byte> dst_in(dst, dst + c.count * size);
    const std::vector<std::byte> src_in(src, src + c.count * size);
    std::vector<std::byte> want(c.count * size);
    for (std::size_t i = 0; i < c.count; ++i) {
      reference_element(type, op, dst + i * size, src + i * size, want.data() + i * size);
    }

    reduce_into(type, op, dst, src, c.count);

    expect_same_bytes(type, op, dst, want.data(), dst_in.data(), src_in.data(), c.count);
    EXPECT_TRUE(std::equal(src_in.begin(), src_in.end(), src)) << "src was modified";
    const auto* store_begin = reinterpret_cast<const std::byte*>(dst_store.data());
    const auto* store_end = store_begin + dst_store.size() * sizeof(std::uint64_t);
    auto expect_untouched = [&](const std::byte* from, const std::byte* to) {
      for (const std::byte* p = from; p < to; ++p) {
        ASSERT_EQ(*p, std::byte{0xA5}) << "wrote outside dst, at byte " << (p - store_begin);
      }
    };
    expect_untouched(store_begin, dst);
    expect_untouched(dst + c.count * size, store_end);
    if (::testing::Test::HasFailure()) return;
  }
}

// incoming_first asks for src (op) dst; every op is commutative bit for bit, NaN and signed zeros included.
TEST_P(ReduceEveryTypeAndOp, IncomingFirstComputesSrcOpDst) {
  const auto [type, op] = GetParam();
  const std::size_t size = size_of(type);
  const std::size_t count = 4099;
  std::mt19937_64 random(99 + static_cast<std::uint64_t>(type) * 16 + static_cast<std::uint64_t>(op));
  std::vector<std::uint64_t> dst_store(count), src_store(count);
  auto* dst = reinterpret_cast<std::byte*>(dst_store.data());
  auto* src = reinterpret_cast<std::byte*>(src_store.data());
  fill_random(type, dst, count, random);
  fill_random(type, src, count, random);
  const std::vector<std::byte> dst_in(dst, dst + count * size), src_in(src, src + count * size);
  std::vector<std::byte> want(count * size);
  for (std::size_t i = 0; i < count; ++i) {
    reference_element(type, op, src + i * size, dst + i * size, want.data() + i * size);
  }
  reduce_into(type, op, dst, src, count, /*incoming_first=*/true);
  expect_same_bytes(type, op, dst, want.data(), dst_in.data(), src_in.data(), count);
}

// The three-operand form gives the bytes of copying `in` to `out` and reducing into it, in either
// operand order, from misaligned offsets; it reads `in` and `incoming` without changing them and
// writes nothing outside `out`. out == in is the two-operand reduce.
TEST_P(ReduceEveryTypeAndOp, ReduceToEqualsCopyThenReduceInto) {
  const auto [type, op] = GetParam();
  const std::size_t size = size_of(type);
  std::mt19937_64 random(7 + static_cast<std::uint64_t>(type) * 16 + static_cast<std::uint64_t>(op));
  struct Case {
    std::size_t count, out_offset, in_offset, incoming_offset;
  };
  const Case cases[] = {{0, 0, 0, 0},    {1, 0, 0, 0},    {17, 1, 2, 3},
                        {1000, 0, 1, 0}, {4099, 3, 7, 5}, {1000003, 1, 0, 2}};
  for (const Case& c : cases) {
    for (bool incoming_first : {false, true}) {
      SCOPED_TRACE("count " + std::to_string(c.count) + (incoming_first ? " incoming first" : ""));
      std::vector<std::uint64_t> out_store(c.count + 8, 0xA5A5A5A5A5A5A5A5u), in_store(c.count + 8),
          incoming_store(c.count + 8);
      std::byte* out = reinterpret_cast<std::byte*>(out_store.data()) + c.out_offset * size;
      std::byte* in = reinterpret_cast<std::byte*>(in_store.data()) + c.in_offset * size;
      std::byte* incoming = reinterpret_cast<std::byte*>(incoming_store.data()) + c.incoming_offset * size;
      fill_random(type, in, c.count, random);
      fill_random(type, incoming, c.count, random);
      const std::vector<std::byte> in_before(in, in + c.count * size);
      const std::vector<std::byte> incoming_before(incoming, incoming + c.count * size);
      std::vector<std::byte> want = in_before;
      reduce_into(type, op, want.data(), incoming, c.count, incoming_first);

      reduce_to(type, op, out, in, incoming, c.count, incoming_first);

      expect_same_bytes(type, op, out, want.data(), in_before.data(), incoming_before.data(), c.count);
      EXPECT_TRUE(std::equal(in_before.begin(), in_before.end(), in)) << "in was modified";
      EXPECT_TRUE(std::equal(incoming_before.begin(), incoming_before.end(), incoming))
          << "incoming was modified";
      const auto* store_begin = reinterpret_cast<const std::byte*>(out_store.data());
      const auto* store_end = store_begin + out_store.size() * sizeof(std::uint64_t);
      for (const std::byte* p = store_begin; p < store_end; ++p) {
        if (p >= out && p < out + c.count * size) continue;
        ASSERT_EQ(*p, std::byte{0xA5}) << "wrote outside out, at byte " << (p - store_begin);
      }

      // In place: out is in.
      reduce_to(type, op, in, in, incoming, c.count, incoming_first);
      expect_same_bytes(type, op, in, want.data(), in_before.data(), incoming_before.data(), c.count);
      if (::testing::Test::HasFailure()) return;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, ReduceEveryTypeAndOp,
                         ::testing::Combine(::testing::ValuesIn(kAllDataTypes),
                                            ::testing::ValuesIn(kAllReduceOps)),
                         [](const auto& param_info) {
                           return std::string(to_string(std::get<0>(param_info.param))) + "_" +
                                  std::string(to_string(std::get<1>(param_info.param)));
                         });

// ---- Corner cases by name. ----

template <typename T>
std::vector<T> reduced(DataType type, ReduceOp op, std::vector<T> dst, const std::vector<T>& src) {
  reduce_into(type, op, dst.data(), src.data(), dst.size());
  return dst;
}

TEST(ReduceInto, IntegersWrapAround) {
  using I8 = std::int8_t;
  EXPECT_EQ(reduced<I8>(DataType::Int8, ReduceOp::Sum, {127, -128, -1}, {1, -1, -128}),
            (std::vector<I8>{-128, 127, 127}));
  EXPECT_EQ(reduced<I8>(DataType::Int8, ReduceOp::Prod, {-128, 16, -1}, {-1, 16, 127}),
            (std::vector<I8>{-128, 0, -127}));
  EXPECT_EQ(reduced<std::uint8_t>(DataType::UInt8, ReduceOp::Sum, {255, 200}, {1, 100}),
            (std::vector<std::uint8_t>{0, 44}));
  EXPECT_EQ(reduced<std::uint8_t>(DataType::UInt8, ReduceOp::Prod, {255, 16}, {255, 16}),
            (std::vector<std::uint8_t>{1, 0}));
  constexpr auto kMax32 = std::numeric_limits<std::int32_t>::max();
  constexpr auto kMin32 = std::numeric_limits<std::int32_t>::min();
  EXPECT_EQ(reduced<std::int32_t>(DataType::Int32, ReduceOp::Sum, {kMax32, kMin32}, {1, -1}),
            (std::vector<std::int32_t>{kMin32, kMax32}));
  EXPECT_EQ(reduced<std::int32_t>(DataType::Int32, ReduceOp::Prod, {kMin32, 65536}, {-1, 65536}),
            (std::vector<std::int32_t>{kMin32, 0}));
  constexpr auto kMax64 = std::numeric_limits<std::int64_t>::max();
  constexpr auto kMin64 = std::numeric_limits<std::int64_t>::min();
  EXPECT_EQ(reduced<std::int64_t>(DataType::Int64, ReduceOp::Sum, {kMax64, kMin64}, {1, -1}),
            (std::vector<std::int64_t>{kMin64, kMax64}));
  EXPECT_EQ(reduced<std::int64_t>(DataType::Int64, ReduceOp::Prod, {kMin64, std::int64_t{1} << 32},
                                  {-1, std::int64_t{1} << 32}),
            (std::vector<std::int64_t>{kMin64, 0}));
  EXPECT_EQ(reduced<std::int64_t>(DataType::Int64, ReduceOp::Min, {kMin64, 5}, {kMax64, -5}),
            (std::vector<std::int64_t>{kMin64, -5}));
}

std::vector<std::uint32_t> float_bits(const std::vector<float>& values) {
  std::vector<std::uint32_t> bits;
  for (float v : values) bits.push_back(std::bit_cast<std::uint32_t>(v));
  return bits;
}

TEST(ReduceInto, EveryNaNResultIsTheCanonicalQuietNaN) {
  const float payload_nan = std::bit_cast<float>(0xFF800123u);  // negative signalling NaN with a payload
  for (ReduceOp op : kAllReduceOps) {
    SCOPED_TRACE(std::string(to_string(op)));
    const auto got = reduced<float>(DataType::Float32, op, {payload_nan, 1.0f, NAN, -0.0f},
                                    {2.0f, payload_nan, -NAN, NAN});
    EXPECT_EQ(float_bits(got), (std::vector<std::uint32_t>(4, kCanonicalNaN32)));
  }
  // Invalid operations make a NaN from no NaN: the canonical one too (x86 would give the negative one).
  EXPECT_EQ(float_bits(reduced<float>(DataType::Float32, ReduceOp::Sum, {INFINITY}, {-INFINITY})),
            (std::vector<std::uint32_t>{kCanonicalNaN32}));
  EXPECT_EQ(float_bits(reduced<float>(DataType::Float32, ReduceOp::Prod, {0.0f}, {INFINITY})),
            (std::vector<std::uint32_t>{kCanonicalNaN32}));
  const auto f64 = reduced<double>(DataType::Float64, ReduceOp::Max, {-NAN, 1.0}, {1.0, INFINITY});
  EXPECT_EQ(std::bit_cast<std::uint64_t>(f64[0]), 0x7FF8000000000000u);
  EXPECT_EQ(f64[1], INFINITY);
  EXPECT_EQ(reduced<std::uint16_t>(DataType::Float16, ReduceOp::Min, {0xFE01, 0x3C00}, {0x3C00, 0x7C01}),
            (std::vector<std::uint16_t>{0x7E00, 0x7E00}));
  EXPECT_EQ(reduced<std::uint16_t>(DataType::BFloat16, ReduceOp::Sum, {0x7F80, 0xFFC1}, {0xFF80, 0x3F80}),
            (std::vector<std::uint16_t>{0x7FC0, 0x7FC0}));
}

TEST(ReduceInto, MinAndMaxOrderSignedZerosEitherWayRound) {
  const std::vector<float> a = {-0.0f, 0.0f, -0.0f, 0.0f, -INFINITY, 1.0f};
  const std::vector<float> b = {0.0f, -0.0f, -0.0f, 0.0f, 3.0f, INFINITY};
  EXPECT_EQ(float_bits(reduced(DataType::Float32, ReduceOp::Min, a, b)),
            float_bits({-0.0f, -0.0f, -0.0f, 0.0f, -INFINITY, 1.0f}));
  EXPECT_EQ(float_bits(reduced(DataType::Float32, ReduceOp::Max, a, b)),
            float_bits({0.0f, 0.0f, -0.0f, 0.0f, 3.0f, INFINITY}));
  const auto min64 = reduced<double>(DataType::Float64, ReduceOp::Min, {0.0, -0.0}, {-0.0, 0.0});
  EXPECT_TRUE(std::signbit(min64[0]) && std::signbit(min64[1]));
  EXPECT_EQ(reduced<std::uint16_t>(DataType::Float16, ReduceOp::Max, {0x8000, 0x0000}, {0x0000, 0x8000}),
            (std::vector<std::uint16_t>{0x0000, 0x0000}));
}

TEST(ReduceInto, HalfPrecisionRoundsOnceAndOverflowsToInfinity) {
  // 65504 + 65504 overflows float16; 1 + 2^-11 is a tie that rounds to even (1.0); bfloat16 keeps 8 bits.
  EXPECT_EQ(reduced<std::uint16_t>(DataType::Float16, ReduceOp::Sum, {0x7BFF, 0x3C00, 0xFBFF},
                                   {0x7BFF, 0x1000, 0xFBFF}),
            (std::vector<std::uint16_t>{0x7C00, 0x3C00, 0xFC00}));
  EXPECT_EQ(reduced<std::uint16_t>(DataType::BFloat16, ReduceOp::Prod, {0x4040, 0x7F7F}, {0x4040, 0x4000}),
            (std::vector<std::uint16_t>{0x4110, 0x7F80}));  // 3 * 3 = 9; FLT_MAX-ish * 2 = infinity
}

TEST(FinishAverage, IntegersTruncateTowardZero) {
  std::vector<std::int32_t> i32 = {
      7, -7, 8, -8, std::numeric_limits<std::int32_t>::min(), std::numeric_limits<std::int32_t>::max(), 0};
  finish_average(DataType::Int32, i32.data(), i32.size(), 2);
  EXPECT_EQ(i32, (std::vector<std::int32_t>{3, -3, 4, -4, -1073741824, 1073741823, 0}));
  std::vector<std::int8_t> i8 = {-128, 127, -5, 5};
  finish_average(DataType::Int8, i8.data(), i8.size(), 3);
  EXPECT_EQ(i8, (std::vector<std::int8_t>{-42, 42, -1, 1}));
  std::vector<std::uint8_t> u8 = {255, 1};
  finish_average(DataType::UInt8, u8.data(), u8.size(), 2);
  EXPECT_EQ(u8, (std::vector<std::uint8_t>{127, 0}));
  std::vector<std::int64_t> i64 = {std::numeric_limits<std::int64_t>::min(), 9007199254740993,
                                   -9007199254740993};
  finish_average(DataType::Int64, i64.data(), i64.size(), 3);
  EXPECT_EQ(i64, (std::vector<std::int64_t>{-3074457345618258602, 3002399751580331, -3002399751580331}));
}

// The 8- and 32-bit path divides in double; integer division is the reference, over the whole range.
TEST(FinishAverage, Int32MatchesIntegerDivisionForManyValuesAndDivisors) {
  std::mt19937 random(7);
  std::vector<std::int32_t> values(100003);
  for (auto& v : values) v = static_cast<std::int32_t>(random());
  values[0] = std::numeric_limits<std::int32_t>::min();
  values[1] = std::numeric_limits<std::int32_t>::max();
  for (int divisor : {1, 2, 3, 7, 10, 64, 1000, 65537, 2147483647}) {
    std::vector<std::int32_t> got = values;
    finish_average(DataType::Int32, got.data(), got.size(), divisor);
    for (std::size_t i = 0; i < values.size(); ++i) {
      ASSERT_EQ(got[i], values[i] / divisor) << values[i] << " / " << divisor;
    }
  }
}

TEST(FinishAverage, FloatsDivideInTheirOwnPrecision) {
  std::vector<float> f32 = {1.0f, -3.0f, 0.1f, INFINITY};
  finish_average(DataType::Float32, f32.data(), f32.size(), 3);
  EXPECT_EQ(float_bits(f32), float_bits({1.0f / 3.0f, -1.0f, 0.1f / 3.0f, INFINITY}));
  std::vector<double> f64 = {1.0, 2.0};
  finish_average(DataType::Float64, f64.data(), f64.size(), 3);
  EXPECT_EQ(f64, (std::vector<double>{1.0 / 3.0, 2.0 / 3.0}));
  std::vector<std::uint16_t> f16 = {0x3C00, 0x4200, 0x7C00, 0x0001};  // 1, 3, inf, smallest subnormal
  finish_average(DataType::Float16, f16.data(), f16.size(), 3);
  EXPECT_EQ(f16, (std::vector<std::uint16_t>{float_to_half(1.0f / 3.0f), 0x3C00, 0x7C00, 0x0000}));
  std::vector<std::uint16_t> bf16 = {0x3F80, 0x4040};  // 1, 3
  finish_average(DataType::BFloat16, bf16.data(), bf16.size(), 3);
  EXPECT_EQ(bf16, (std::vector<std::uint16_t>{float_to_bfloat16(1.0f / 3.0f), 0x3F80}));
  // Long enough for several 16-bit blocks and a tail.
  std::vector<std::uint16_t> many(5000, 0x4200);
  finish_average(DataType::Float16, many.data(), many.size(), 3);
  EXPECT_EQ(many, (std::vector<std::uint16_t>(5000, 0x3C00)));
}

void expect_invalid_argument(const std::function<void()>& call, const std::string& mentions) {
  try {
    call();
    ADD_FAILURE() << "no error; expected one mentioning '" << mentions << "'";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::InvalidArgument) << error.what();
    EXPECT_NE(std::string(error.what()).find(mentions), std::string::npos) << error.what();
  }
}

TEST(ReduceInto, RejectsWhatCanNeverWorkWithAnError) {
  std::vector<float> a(16), b(16);
  expect_invalid_argument([&] { finish_average(DataType::Float32, a.data(), a.size(), 0); }, "divisor=0");
  expect_invalid_argument([&] { reduce_into(DataType::Float32, ReduceOp::Sum, nullptr, b.data(), 4); },
                          "dst is null");
  expect_invalid_argument(
      [&] { reduce_into(static_cast<DataType>(77), ReduceOp::Sum, a.data(), b.data(), 4); },
      "unknown DataType value 77");
  expect_invalid_argument(
      [&] { reduce_into(DataType::Float32, static_cast<ReduceOp>(9), a.data(), b.data(), 4); },
      "unknown ReduceOp value 9");
  expect_invalid_argument([&] { reduce_into(DataType::Float32, ReduceOp::Sum, a.data(), a.data() + 2, 4); },
                          "overlap");
  expect_invalid_argument(
      [&] {
        reduce_into(DataType::Float32, ReduceOp::Sum, reinterpret_cast<std::byte*>(a.data()) + 1, b.data(),
                    4);
      },
      "not aligned");
  std::vector<float> c(16);
  expect_invalid_argument(
      [&] { reduce_to(DataType::Float32, ReduceOp::Sum, a.data(), a.data() + 1, b.data(), 4); }, "overlap");
  expect_invalid_argument(
      [&] { reduce_to(DataType::Float32, ReduceOp::Sum, a.data(), b.data(), a.data(), 4); }, "overlap");
  expect_invalid_argument(
      [&] { reduce_to(DataType::Float32, ReduceOp::Sum, a.data(), b.data(), b.data() + 3, 4); }, "overlap");
  expect_invalid_argument(
      [&] { reduce_to(DataType::Float32, ReduceOp::Max, a.data(), nullptr, c.data(), 4); }, "in is null");
  // Nothing to do is not an error, whatever the pointers.
  reduce_into(DataType::Float32, ReduceOp::Sum, nullptr, nullptr, 0);
  finish_average(DataType::Int64, nullptr, 0, 4);
}

}  // namespace
}  // namespace canopy::collectives
