#include "tests/support/oracle.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "collectives/kernels/reduce_kernels.hpp"

namespace canopy::testing {
namespace {

using namespace canopy::collectives;  // the schedules' model and the kernels' conversions

bool is_float(DataType type) {
  return type == DataType::Float32 || type == DataType::Float64 || type == DataType::Float16 ||
         type == DataType::BFloat16;
}

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

// One value for rank `rank` whose reduction with `op` is exact in `type` in any order.
std::int64_t exact_value(DataType type, ReduceOp op, int rank, Random& random) {
  auto pick = [&](std::int64_t low, std::int64_t high) { return random.between(low, high); };
  if (!is_float(type)) {
    // Integers wrap identically whatever the order, so any value is exact; keep products varied.
    if (op == ReduceOp::Prod) return is_signed(type) ? pick(-3, 3) : pick(1, 5);
    return is_signed(type) ? pick(-100, 100) : pick(0, 200);
  }
  switch (op) {
    case ReduceOp::Sum:
      return pick(-3, 4);  // |partial sums| <= 17 * 4, exact even in bfloat16
    case ReduceOp::Prod: {
      // +-1, and 2 on the first 8 ranks: |products| <= 256, exact in every float type.
      const std::int64_t magnitude = rank < 8 && pick(0, 2) == 0 ? 2 : 1;
      return pick(0, 1) == 0 ? magnitude : -magnitude;
    }
    default:
      return pick(-50, 50);
  }
}

std::int64_t combine(DataType type, ReduceOp op, std::int64_t a, std::int64_t b) {
  // Sum and product wrap: computed in uint64 and truncated to the type on store (the same modulo 2^w).
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
  (void)type;
  return 0;
}

std::uint64_t block_offset(const CollectiveCall& call, int rank) {
  return static_cast<std::uint64_t>(rank) * call.count;
}

}  // namespace

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
      return write_as<std::uint8_t>(buffer, i, static_cast<std::uint8_t>(bits));
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

Buffers exact_inputs(const CollectiveCall& call, DataType type, ReduceOp op, Random& random) {
  const std::size_t n = call.data_count();
  Buffers inputs(static_cast<std::size_t>(call.size), std::vector<std::byte>(n * size_of(type)));
  for (int r = 0; r < call.size; ++r) {
    std::byte* buffer = inputs[static_cast<std::size_t>(r)].data();
    for (std::size_t i = 0; i < n; ++i) store_integer(type, buffer, i, exact_value(type, op, r, random));
  }
  return inputs;
}

Buffers random_float_inputs(const CollectiveCall& call, DataType type, Random& random) {
  const std::size_t n = call.data_count();
  Buffers inputs(static_cast<std::size_t>(call.size), std::vector<std::byte>(n * size_of(type)));
  for (auto& input : inputs) {
    for (std::size_t i = 0; i < n; ++i)
      store_double(type, input.data(), i,
                   std::ldexp(2000 * random.unit() - 1000, static_cast<int>(random.between(-20, 20))));
  }
  return inputs;
}

Expected reference(const CollectiveCall& call, DataType type, ReduceOp op, const Buffers& inputs) {
  const std::size_t n = call.data_count();
  const auto p = static_cast<std::size_t>(call.size);
  Expected expected;
  expected.data = inputs;
  expected.defined.assign(p, std::vector<char>(n, 0));
  // The reduction of element i over all ranks, stored into `out`.
  auto reduce_element = [&](std::size_t i, std::byte* out) {
    if (is_float(type)) {
      double value = load_double(type, inputs[0].data(), i);
      for (std::size_t r = 1; r < p; ++r) {
        const double other = load_double(type, inputs[r].data(), i);
        switch (op) {
          case ReduceOp::Prod:
            value *= other;
            break;
          case ReduceOp::Min:
            value = std::min(value, other);
            break;
          case ReduceOp::Max:
            value = std::max(value, other);
            break;
          default:
            value += other;
        }
      }
      store_double(type, out, i, value);
    } else {
      std::int64_t value = load_integer(type, inputs[0].data(), i);
      for (std::size_t r = 1; r < p; ++r)
        value = combine(type, op, value, load_integer(type, inputs[r].data(), i));
      store_integer(type, out, i, value);
    }
  };
  const std::size_t element = size_of(type);
  switch (call.collective) {
    case Collective::Broadcast:
      for (std::size_t r = 0; r < p; ++r) {
        expected.data[r] = inputs[static_cast<std::size_t>(call.root)];
        std::fill(expected.defined[r].begin(), expected.defined[r].end(), 1);
      }
      break;
    case Collective::Reduce: {
      const auto root = static_cast<std::size_t>(call.root);
      for (std::size_t i = 0; i < n; ++i) reduce_element(i, expected.data[root].data());
      std::fill(expected.defined[root].begin(), expected.defined[root].end(), 1);
      break;
    }
    case Collective::AllReduce:
      for (std::size_t i = 0; i < n; ++i) reduce_element(i, expected.data[0].data());
      for (std::size_t r = 0; r < p; ++r) {
        expected.data[r] = expected.data[0];
        std::fill(expected.defined[r].begin(), expected.defined[r].end(), 1);
      }
      break;
    case Collective::AllGather:
      for (std::size_t r = 0; r < p; ++r) {
        for (std::size_t owner = 0; owner < p; ++owner) {
          const std::size_t offset = block_offset(call, static_cast<int>(owner)) * element;
          if (call.count > 0)  // an empty buffer's data() may be null
            std::memcpy(expected.data[r].data() + offset, inputs[owner].data() + offset,
                        call.count * element);
        }
        std::fill(expected.defined[r].begin(), expected.defined[r].end(), 1);
      }
      break;
    case Collective::ReduceScatter:
      for (std::size_t r = 0; r < p; ++r) {
        const std::uint64_t offset = block_offset(call, static_cast<int>(r));
        for (std::uint64_t i = offset; i < offset + call.count; ++i) {
          reduce_element(i, expected.data[r].data());
          expected.defined[r][i] = 1;
        }
      }
      break;
    default:
      break;
  }
  return expected;
}

namespace {

// Where block j starts in a buffer of blocks of the given counts, back to back.
std::vector<std::uint64_t> offsets_of(const std::vector<std::uint64_t>& counts) {
  std::vector<std::uint64_t> offsets(counts.size() + 1, 0);
  for (std::size_t j = 0; j < counts.size(); ++j) offsets[j + 1] = offsets[j] + counts[j];
  return offsets;
}

void copy_elements(std::byte* to, const std::byte* from, std::uint64_t count, DataType type) {
  if (count > 0) std::memcpy(to, from, count * size_of(type));
}

bool has_separate_input(const CollectiveCall& call) {
  return !call.in_place || !call.input_in_data();
}

}  // namespace

MovementCase movement_inputs(const std::vector<CollectiveCall>& calls, DataType type, Random& random) {
  MovementCase inputs;
  const std::size_t element = size_of(type);
  for (const CollectiveCall& call : calls) {
    std::vector<std::byte> data(call.data_count() * element);
    std::vector<std::byte> input(has_separate_input(call) ? call.input_count() * element : 0);
    for (std::size_t i = 0; i < data.size() / element; ++i)
      store_integer(type, data.data(), i, random.between(-100, 100));
    for (std::size_t i = 0; i < input.size() / element; ++i)
      store_integer(type, input.data(), i, random.between(-100, 100));
    // An in-place scatter's root holds its own block in Data already.
    if (call.collective == Collective::Scatter && call.in_place && call.rank == call.root)
      copy_elements(data.data(), input.data() + static_cast<std::uint64_t>(call.root) * call.count * element,
                    call.count, type);
    inputs.data.push_back(std::move(data));
    inputs.input.push_back(std::move(input));
  }
  return inputs;
}

Expected movement_reference(const std::vector<CollectiveCall>& calls, DataType type,
                            const MovementCase& inputs) {
  const auto p = calls.size();
  const std::size_t element = size_of(type);
  Expected expected;
  expected.data = inputs.data;
  for (const CollectiveCall& call : calls) expected.defined.emplace_back(call.data_count(), 1);
  const CollectiveCall& any = calls.at(0);
  const std::uint64_t n = any.count;
  const auto root = static_cast<std::size_t>(any.root);
  // Rank r's own input, wherever the call keeps it.
  auto input_of = [&](std::size_t r) -> const std::byte* {
    const CollectiveCall& call = calls[r];
    if (has_separate_input(call)) return inputs.input[r].data();
    return inputs.data[r].data() + call.input_offset() * element;
  };
  switch (any.collective) {
    case Collective::AllToAll:
      for (std::size_t r = 0; r < p; ++r)
        for (std::size_t j = 0; j < p; ++j)
          copy_elements(expected.data[r].data() + j * n * element, input_of(j) + r * n * element, n, type);
      break;
    case Collective::AllToAllV:
      for (std::size_t r = 0; r < p; ++r) {
        const auto recv_offsets = offsets_of(calls[r].recv_counts);
        for (std::size_t j = 0; j < p; ++j) {
          const auto send_offsets = offsets_of(calls[j].send_counts);
          copy_elements(expected.data[r].data() + recv_offsets[j] * element,
                        input_of(j) + send_offsets[r] * element, calls[r].recv_counts[j], type);
        }
      }
      break;
    case Collective::Gather:
      for (std::size_t j = 0; j < p; ++j)
        copy_elements(expected.data[root].data() + j * n * element, input_of(j), n, type);
      break;
    case Collective::Scatter:
      for (std::size_t r = 0; r < p; ++r)
        copy_elements(expected.data[r].data(), inputs.input[root].data() + r * n * element, n, type);
      break;
    default:
      break;
  }
  return expected;
}

std::string compare(const Expected& expected, const Buffers& actual, DataType type) {
  const std::size_t element = size_of(type);
  for (std::size_t r = 0; r < expected.data.size(); ++r) {
    for (std::size_t i = 0; i < expected.defined[r].size(); ++i) {
      if (!expected.defined[r][i]) continue;
      if (std::memcmp(expected.data[r].data() + i * element, actual[r].data() + i * element, element) != 0) {
        return fmt::format("rank {} element {}: expected {}, got {}", r, i,
                           load_double(type, expected.data[r].data(), i),
                           load_double(type, actual[r].data(), i));
      }
    }
  }
  return "";
}

std::int64_t input_value(DataType type, ReduceOp op, int rank, std::uint64_t index) {
  // The whole-group inputs' rule, drawn from a generator seeded by the element alone: every rank computes
  // any rank's value without seeing it.
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
      value = combine(type, op, value, input_value(type, op, r, index));
    store_integer(type, expected.data(), 0, value);
    if (op == ReduceOp::Avg && from_rank < 0) collectives::finish_average(type, expected.data(), 1, ranks);
    if (std::memcmp(expected.data(), in + i * element, element) != 0) ++wrong;
  }
  return wrong;
}

}  // namespace canopy::testing
