#include "bench/collectives/expected_values.hpp"

#include <cstring>
#include <vector>

#include "collectives/kernels/reduce_kernels.hpp"

namespace canopy::bench {
namespace {

// One element of `type` holding the integer `value`, as raw bytes (integers wrap like the kernels).
void encode(DataType type, std::int64_t value, std::byte* out) {
  auto put = [out](auto v) { std::memcpy(out, &v, sizeof(v)); };
  switch (type) {
    case DataType::Float32:
      put(static_cast<float>(value));
      break;
    case DataType::Float64:
      put(static_cast<double>(value));
      break;
    case DataType::Float16:
      put(collectives::float_to_half(static_cast<float>(value)));
      break;
    case DataType::BFloat16:
      put(collectives::float_to_bfloat16(static_cast<float>(value)));
      break;
    case DataType::Int8:
      put(static_cast<std::int8_t>(static_cast<std::uint8_t>(value)));
      break;
    case DataType::UInt8:
      put(static_cast<std::uint8_t>(value));
      break;
    case DataType::Int32:
      put(static_cast<std::int32_t>(static_cast<std::uint32_t>(value)));
      break;
    case DataType::Int64:
      put(value);
      break;
  }
}

std::int64_t reduce_all(DataType type, ReduceOp op, int ranks, std::uint64_t index) {
  std::int64_t result = input_value(type, op, 0, index);
  for (int r = 1; r < ranks; ++r) {
    std::int64_t v = input_value(type, op, r, index);
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Avg:
        result += v;
        break;
      case ReduceOp::Prod:
        result *= v;
        break;
      case ReduceOp::Min:
        result = std::min(result, v);
        break;
      case ReduceOp::Max:
        result = std::max(result, v);
        break;
    }
  }
  return result;
}

}  // namespace

std::int64_t input_value(DataType type, ReduceOp op, int rank, std::uint64_t index) {
  std::uint64_t mix = index * 7 + static_cast<std::uint64_t>(rank) * 3;
  // Products of +1 and -1 stay exact in every type (and wrap consistently in uint8); sums of -4..4
  // stay exact for hundreds of ranks. Min and max of an unsigned type need non-negative inputs.
  if (op == ReduceOp::Prod) return mix % 3 == 0 ? -1 : 1;
  bool unsigned_order = type == DataType::UInt8 && (op == ReduceOp::Min || op == ReduceOp::Max);
  return static_cast<std::int64_t>(mix % 9) - (unsigned_order ? 0 : 4);
}

void fill_inputs(DataType type, ReduceOp op, int rank, std::uint64_t first_index, void* data,
                 std::uint64_t count) {
  auto* out = static_cast<std::byte*>(data);
  std::size_t size = size_of(type);
  for (std::uint64_t i = 0; i < count; ++i)
    encode(type, input_value(type, op, rank, first_index + i), out + i * size);
}

std::uint64_t count_wrong(DataType type, ReduceOp op, int ranks, int from_rank, std::uint64_t first_index,
                          const void* data, std::uint64_t count) {
  const auto* in = static_cast<const std::byte*>(data);
  std::size_t size = size_of(type);
  std::vector<std::byte> expected(size);
  std::uint64_t wrong = 0;
  for (std::uint64_t i = 0; i < count; ++i) {
    std::uint64_t index = first_index + i;
    std::int64_t value =
        from_rank >= 0 ? input_value(type, op, from_rank, index) : reduce_all(type, op, ranks, index);
    encode(type, value, expected.data());
    if (op == ReduceOp::Avg && from_rank < 0) collectives::finish_average(type, expected.data(), 1, ranks);
    if (std::memcmp(expected.data(), in + i * size, size) != 0) ++wrong;
  }
  return wrong;
}

}  // namespace canopy::bench
