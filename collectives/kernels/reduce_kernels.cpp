// reduce_into and finish_average: a switch on (type, op) picks one instantiation of a plain loop, which
// the compiler vectorises (this file is built with -O3; CANOPY_MULTIVERSION adds an AVX2 copy). float16
// and bfloat16 are widened to float a block at a time, reduced as float and rounded back once.
#include "collectives/kernels/reduce_kernels.hpp"

#include <algorithm>
#include <cstdint>

#include "collectives/kernels/half_convert.hpp"
#include "collectives/kernels/multiversion.hpp"
#include "collectives/kernels/reduce_ops.hpp"
#include "common/error.hpp"

namespace canopy::collectives {
namespace {

using detail::DivideOp;
using detail::MaxOp;
using detail::MinOp;
using detail::ProdOp;
using detail::SumOp;

template <typename T, typename Op>
CANOPY_MULTIVERSION void combine(T* __restrict dst, const T* __restrict src, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) dst[i] = Op::apply(dst[i], src[i]);
}

template <typename T, typename Op>
CANOPY_MULTIVERSION void combine_to(T* __restrict out, const T* __restrict in, const T* __restrict incoming,
                                    std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) out[i] = Op::apply(in[i], incoming[i]);
}

template <typename T>
CANOPY_MULTIVERSION void divide(T* data, std::size_t count, int divisor) {
  for (std::size_t i = 0; i < count; ++i) data[i] = DivideOp::apply(data[i], divisor);
}

// The two 16-bit float formats, as the block loops below see them.
struct Float16Format {
  static void widen(const std::uint16_t* src, float* dst, std::size_t n) {
    detail::convert_float16_to_float(src, dst, n);
  }
  static void narrow(const float* src, std::uint16_t* dst, std::size_t n) {
    detail::convert_float_to_float16(src, dst, n);
  }
};
struct BFloat16Format {
  static void widen(const std::uint16_t* src, float* dst, std::size_t n) {
    detail::convert_bfloat16_to_float(src, dst, n);
  }
  static void narrow(const float* src, std::uint16_t* dst, std::size_t n) {
    detail::convert_float_to_bfloat16(src, dst, n);
  }
};

// Two 4 KiB float blocks stay in L1 while they are widened, combined and narrowed. They sit a little
// more than 4 KiB apart: exactly 4 KiB would make every load of one look like it depends on the store
// to the other (4K aliasing), which halves the speed.
constexpr std::size_t kBlock = 1024;
constexpr std::size_t kBlockGap = 32;

// out = in (op) incoming; `out` may be `in` (each block is read whole before it is written).
template <typename Format, typename Op>
void combine_to_16bit(std::uint16_t* out, const std::uint16_t* in, const std::uint16_t* incoming,
                      std::size_t count) {
  alignas(64) float scratch[2 * kBlock + kBlockGap];
  float* acc = scratch;
  float* other = scratch + kBlock + kBlockGap;
  for (std::size_t done = 0; done < count; done += kBlock) {
    const std::size_t n = std::min(kBlock, count - done);
    Format::widen(in + done, acc, n);
    Format::widen(incoming + done, other, n);
    combine<float, Op>(acc, other, n);
    Format::narrow(acc, out + done, n);
  }
}

template <typename Format, typename Op>
void combine_16bit(std::uint16_t* dst, const std::uint16_t* src, std::size_t count) {
  combine_to_16bit<Format, Op>(dst, dst, src, count);
}

template <typename Format>
void divide_16bit(std::uint16_t* data, std::size_t count, int divisor) {
  alignas(64) float values[kBlock];
  for (std::size_t done = 0; done < count; done += kBlock) {
    const std::size_t n = std::min(kBlock, count - done);
    Format::widen(data + done, values, n);
    divide<float>(values, n, divisor);
    Format::narrow(values, data + done, n);
  }
}

// Calls body.template operator()<Op>() with the op's element operation (Avg accumulates as Sum).
template <typename Body>
void with_op(ReduceOp op, Body&& body) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      return body.template operator()<SumOp>();
    case ReduceOp::Prod:
      return body.template operator()<ProdOp>();
    case ReduceOp::Min:
      return body.template operator()<MinOp>();
    case ReduceOp::Max:
      return body.template operator()<MaxOp>();
  }
  fail(ErrorCode::InvalidArgument, "reduce_into: unknown ReduceOp value {}", static_cast<int>(op));
}

// Calls body.template operator()<T>() with the element type (float16/bfloat16: their format tag).
template <typename Body>
void with_type(DataType type, const char* call, Body&& body) {
  switch (type) {
    case DataType::Float32:
      return body.template operator()<float>();
    case DataType::Float64:
      return body.template operator()<double>();
    case DataType::Float16:
      return body.template operator()<Float16Format>();
    case DataType::BFloat16:
      return body.template operator()<BFloat16Format>();
    case DataType::Int8:
      return body.template operator()<std::int8_t>();
    case DataType::UInt8:
      return body.template operator()<std::uint8_t>();
    case DataType::Int32:
      return body.template operator()<std::int32_t>();
    case DataType::Int64:
      return body.template operator()<std::int64_t>();
  }
  fail(ErrorCode::InvalidArgument, "{}: unknown DataType value {}", call, static_cast<int>(type));
}

template <typename T>
constexpr bool kIs16BitFloat = std::is_same_v<T, Float16Format> || std::is_same_v<T, BFloat16Format>;

// Pointers must be usable as arrays of the element type: the loops load whole elements.
void check_buffer(const char* call, const char* name, const void* buffer, std::size_t count, DataType type) {
  if (count == 0) return;
  if (buffer == nullptr) fail(ErrorCode::InvalidArgument, "{}: {} is null with count={}", call, name, count);
  const std::size_t size = size_of(type);
  if (reinterpret_cast<std::uintptr_t>(buffer) % size != 0) {
    fail(ErrorCode::InvalidArgument, "{}: {} ({}) is not aligned to the {}-byte size of {}", call, name,
         buffer, size, to_string(type));
  }
  if (count > SIZE_MAX / size) {
    fail(ErrorCode::InvalidArgument, "{}: count={} of {} overflows the address space", call, count,
         to_string(type));
  }
}

bool overlap(const void* a, const void* b, std::size_t bytes) {
  const auto a_begin = reinterpret_cast<std::uintptr_t>(a);
  const auto b_begin = reinterpret_cast<std::uintptr_t>(b);
  return bytes != 0 && a_begin < b_begin + bytes && b_begin < a_begin + bytes;
}

}  // namespace

void reduce_into(DataType type, ReduceOp op, void* dst, const void* src, std::size_t count,
                 bool incoming_first) {
  // Every op is commutative bit-for-bit (see reduce_ops.hpp), so src (op) dst gives the same bytes as
  // dst (op) src: incoming_first needs no code of its own. The tests hold the kernels to that.
  static_cast<void>(incoming_first);
  static constexpr const char* kCall = "reduce_into";
  with_type(type, kCall, [&]<typename T>() {
    check_buffer(kCall, "dst", dst, count, type);
    check_buffer(kCall, "src", src, count, type);
    const std::size_t bytes = count * size_of(type);
    if (overlap(dst, src, bytes)) {
      fail(ErrorCode::InvalidArgument, "reduce_into: dst ({}) and src ({}) overlap over {} bytes of {}", dst,
           src, bytes, to_string(type));
    }
    with_op(op, [&]<typename Op>() {
      if constexpr (kIs16BitFloat<T>) {
        combine_16bit<T, Op>(static_cast<std::uint16_t*>(dst), static_cast<const std::uint16_t*>(src), count);
      } else {
        combine<T, Op>(static_cast<T*>(dst), static_cast<const T*>(src), count);
      }
    });
  });
}

void reduce_to(DataType type, ReduceOp op, void* out, const void* in, const void* incoming, std::size_t count,
               bool incoming_first) {
  // In place, the three-operand form is the two-operand one (whose loop may assume no aliasing).
  if (out == in) return reduce_into(type, op, out, incoming, count, incoming_first);
  static_cast<void>(incoming_first);  // every op is commutative bit for bit, as in reduce_into
  static constexpr const char* kCall = "reduce_to";
  with_type(type, kCall, [&]<typename T>() {
    check_buffer(kCall, "out", out, count, type);
    check_buffer(kCall, "in", in, count, type);
    check_buffer(kCall, "incoming", incoming, count, type);
    const std::size_t bytes = count * size_of(type);
    if (overlap(out, in, bytes) || overlap(out, incoming, bytes) || overlap(in, incoming, bytes)) {
      fail(ErrorCode::InvalidArgument,
           "reduce_to: out ({}), in ({}) and incoming ({}) overlap within {} bytes of {}", out, in, incoming,
           bytes, to_string(type));
    }
    with_op(op, [&]<typename Op>() {
      if constexpr (kIs16BitFloat<T>) {
        combine_to_16bit<T, Op>(static_cast<std::uint16_t*>(out), static_cast<const std::uint16_t*>(in),
                                static_cast<const std::uint16_t*>(incoming), count);
      } else {
        combine_to<T, Op>(static_cast<T*>(out), static_cast<const T*>(in), static_cast<const T*>(incoming),
                          count);
      }
    });
  });
}

void finish_average(DataType type, void* data, std::size_t count, int divisor) {
  static constexpr const char* kCall = "finish_average";
  if (divisor < 1) {
    fail(ErrorCode::InvalidArgument, "finish_average: divisor={} (the number of contributions) must be >= 1",
         divisor);
  }
  with_type(type, kCall, [&]<typename T>() {
    check_buffer(kCall, "data", data, count, type);
    if constexpr (kIs16BitFloat<T>) {
      divide_16bit<T>(static_cast<std::uint16_t*>(data), count, divisor);
    } else {
      divide<T>(static_cast<T*>(data), count, divisor);
    }
  });
}

}  // namespace canopy::collectives
