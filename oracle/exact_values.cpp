#include "oracle/exact_values.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "collectives/kernels/reduce_kernels.hpp"

namespace canopy::oracle {
namespace {

using collectives::bfloat16_to_float;
using collectives::float_to_bfloat16;
using collectives::float_to_half;
using collectives::half_to_float;

bool is_signed(DataType type) {
  return type != DataType::UInt8;
}

template <typename T>
T read_as(const std::byte* buffer, std::size_t i) {
  T value;
  std::memcpy(&value, buffer + i * sizeof(T), sizeof(T));
  return value;
}

template <typename T>
void write_as(std::byte* buffer, std::size_t i, T value) {
  std::memcpy(buffer + i * sizeof(T), &value, sizeof(T));
}

}  // namespace

bool is_float(DataType type) {
  return type == DataType::Float32 || type == DataType::Float64 || type == DataType::Float16 ||
         type == DataType::BFloat16;
}

double load_double(DataType type, const std::byte* buffer, std::size_t i) {
  switch (type) {
    case DataType::Float32:
      return read_as<float>(buffer, i);
    case DataType::Float64:
      return read_as<double>(buffer, i);
    case DataType::Float16:
      return half_to_float(read_as<std::uint16_t>(buffer, i));
    case DataType::BFloat16:
      return bfloat16_to_float(read_as<std::uint16_t>(buffer, i));
    default:
      return static_cast<double>(load_integer(type, buffer, i));
  }
}

void store_double(DataType type, std::byte* buffer, std::size_t i, double value) {
  switch (type) {
    case DataType::Float32:
      return write_as<float>(buffer, i, static_cast<float>(value));
    case DataType::Float64:
      return write_as<double>(buffer, i, value);
    case DataType::Float16:
      return write_as<std::uint16_t>(buffer, i, float_to_half(static_cast<float>(value)));
    case DataType::BFloat16:
      return write_as<std::uint16_t>(buffer, i, float_to_bfloat16(static_cast<float>(value)));
    default:
      return store_integer(type, buffer, i, static_cast<std::int64_t>(value));
  }
}

std::int64_t load_integer(DataType type, const std::byte* buffer, std::size_t i) {
  switch (type) {
    case DataType::Int8:
      return read_as<std::int8_t>(buffer, i);
    case DataType::UInt8:
      return read_as<std::uint8_t>(buffer, i);
    case DataType::Int32:
      return read_as<std::int32_t>(buffer, i);
    case DataType::Int64:
      return read_as<std::int64_t>(buffer, i);
    default:
      return static_cast<std::int64_t>(load_double(type, buffer, i));
  }
}

void store_integer(DataType type, std::byte* buffer, std::size_t i, std::int64_t value) {
  const auto bits = static_cast<std::uint64_t>(value);
  switch (type) {
    case DataType::Int8:
    case DataType::UInt8:
      return write_as<std::uint8_t>(buffer, i, static_cast<std::uint8_t>(bits));
    case DataType::Int32:
      return write_as<std::uint32_t>(buffer, i, static_cast<std::uint32_t>(bits));
    case DataType::Int64:
      return write_as<std::uint64_t>(buffer, i, bits);
    default:
      return store_double(type, buffer, i, static_cast<double>(value));
  }
}

std::int64_t exact_value(DataType type, ReduceOp op, int rank, Random& random) {
  auto pick = [&](std::int64_t low, std::int64_t high) { return random.between(low, high); };
  if (!is_float(type)) {
    // Integers wrap identically whatever the order, so any value is exact; keep products varied.
    if (op == ReduceOp::Prod) return is_signed(type) ? pick(-3, 3) : pick(1, 5);
    return is_signed(type) ? pick(-100, 100) : pick(0, 200);
  }
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      return pick(-3, 4);  // |partial sums| stay small: exact even in bfloat16 for the ranks tests use
    case ReduceOp::Prod: {
      // +-1, and 2 on the first 8 ranks: |products| <= 256, exact in every float type.
      const std::int64_t magnitude = rank < 8 && pick(0, 2) == 0 ? 2 : 1;
      return pick(0, 1) == 0 ? magnitude : -magnitude;
    }
    default:
      return pick(-50, 50);
  }
}

std::int64_t combine(ReduceOp op, std::int64_t a, std::int64_t b) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) + static_cast<std::uint64_t>(b));
    case ReduceOp::Prod:
      return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) * static_cast<std::uint64_t>(b));
    case ReduceOp::Min:
      return std::min(a, b);
    case ReduceOp::Max:
      return std::max(a, b);
  }
  return 0;
}

std::int64_t input_value(DataType type, ReduceOp op, int rank, std::uint64_t index) {
  Random random(index * 0x9E3779B97F4A7C15ull ^
                (static_cast<std::uint64_t>(rank) + 1) * 0xBF58476D1CE4E5B9ull);
  return exact_value(type, op, rank, random);
}

void fill_inputs(DataType type, ReduceOp op, int rank, std::uint64_t first_index, void* data,
                 std::uint64_t count) {
  auto* out = static_cast<std::byte*>(data);
  for (std::uint64_t i = 0; i < count; ++i)
    store_integer(type, out, i, input_value(type, op, rank, first_index + i));
}

std::uint64_t count_wrong(DataType type, ReduceOp op, int ranks, int from_rank, std::uint64_t first_index,
                          const void* data, std::uint64_t count) {
  const auto* in = static_cast<const std::byte*>(data);
  const std::size_t element = size_of(type);
  std::vector<std::byte> expected(element);
  std::uint64_t wrong = 0;
  for (std::uint64_t i = 0; i < count; ++i) {
    const std::uint64_t index = first_index + i;
    std::int64_t value = input_value(type, op, from_rank >= 0 ? from_rank : 0, index);
    for (int r = 1; from_rank < 0 && r < ranks; ++r)
      value = combine(op, value, input_value(type, op, r, index));
    store_integer(type, expected.data(), 0, value);
    if (op == ReduceOp::Avg && from_rank < 0) collectives::finish_average(type, expected.data(), 1, ranks);
    if (std::memcmp(expected.data(), in + i * element, element) != 0) ++wrong;
  }
  return wrong;
}

}  // namespace canopy::oracle
