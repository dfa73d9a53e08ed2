// Element-wise reduction kernels for every dtype and op, vectorised (the compiler's auto-vectoriser
// over plain loops, checked by bench/micro) so that a reduce runs near memory bandwidth.
// Integers wrap around on overflow (computed in unsigned arithmetic: no undefined behaviour).
// float16 and bfloat16 are computed in float32 and rounded to nearest-even once per operation.
#pragma once

#include <cstddef>
#include <cstdint>

#include "canopy/types.hpp"

namespace canopy::collectives {

// dst[i] = dst[i] (op) src[i], or src[i] (op) dst[i] when incoming_first. Avg reduces as Sum;
// the division happens once at the end (finish_average).
void reduce_into(DataType type, ReduceOp op, void* dst, const void* src, std::size_t count,
                 bool incoming_first = false);

// out[i] = in[i] (op) incoming[i] (incoming[i] (op) in[i] when incoming_first): the first reduce of a
// block in an out-of-place call, reading the caller's input where a two-operand reduce would need it
// copied into `out` first. Same bits as copying `in` to `out` and calling reduce_into. `out` may be
// `in` itself; otherwise no two buffers may overlap.
void reduce_to(DataType type, ReduceOp op, void* out, const void* in, const void* incoming, std::size_t count,
               bool incoming_first = false);

// data[i] /= divisor: the last step of an Avg reduction (integer types truncate toward zero).
void finish_average(DataType type, void* data, std::size_t count, int divisor);

// Half-precision conversions, round to nearest even; NaN stays NaN.
float half_to_float(std::uint16_t bits);
std::uint16_t float_to_half(float value);
float bfloat16_to_float(std::uint16_t bits);
std::uint16_t float_to_bfloat16(float value);

}  // namespace canopy::collectives
