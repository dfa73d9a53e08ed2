#include "tests/support/oracle.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "collectives/kernels/reduce_kernels.hpp"

namespace canopy::testing {
namespace {

using namespace canopy::collectives;  // the schedules' model
using namespace canopy::oracle;       // exact values and conversions

std::uint64_t block_offset(const CollectiveCall& call, int rank) {
  return static_cast<std::uint64_t>(rank) * call.count;
}

}  // namespace

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
        value = combine(op, value, load_integer(type, inputs[r].data(), i));
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

}  // namespace canopy::testing
