// The simulator's inputs for a call that every rank sees alike: each rank's view of it, and its buffers
// from one buffer per rank (see simulator.hpp).
#include <fmt/format.h>

#include <algorithm>

#include "collectives/schedules/simulator.hpp"
#include "common/error.hpp"

namespace canopy::collectives {

std::vector<CollectiveCall> every_rank(const CollectiveCall& call) {
  std::vector<CollectiveCall> calls(static_cast<std::size_t>(std::max(call.size, 0)), call);
  for (int r = 0; r < call.size; ++r) calls[static_cast<std::size_t>(r)].rank = r;
  return calls;
}

Simulation simulate(const Algorithm& algorithm, const CollectiveCall& call, DataType type, ReduceOp op,
                    std::vector<std::vector<std::byte>> inputs, const LinkModel& model) {
  const std::size_t element_size = size_of(type);
  std::vector<CollectiveCall> calls = every_rank(call);
  if (inputs.size() != calls.size())
    fail(ErrorCode::InvalidArgument, "simulate {} {}: {} input buffers for {} ranks",
         to_string(call.collective), algorithm.name, inputs.size(), call.size);
  std::vector<RankBuffers> buffers(calls.size());
  for (std::size_t r = 0; r < calls.size(); ++r) {
    const CollectiveCall& own = calls[r];
    std::vector<std::byte>& given = inputs[r];
    if (!own.input_in_data()) {
      // The input is a buffer of its own; Data starts as garbage.
      buffers[r].input = std::move(given);
      buffers[r].data.assign(own.data_count() * element_size, std::byte{0x5A});
      continue;
    }
    if (given.size() != own.data_count() * element_size)
      fail(ErrorCode::InvalidArgument,
           "simulate {} {}: rank {}'s input holds {} bytes, expected {} ({} x {})",
           to_string(call.collective), algorithm.name, r, given.size(), own.data_count() * element_size,
           own.data_count(), to_string(type));
    if (!call.in_place) {
      // The input moves to its own buffer; Data starts as garbage where the input was, so a schedule
      // that reads what it never wrote (instead of Input) is caught.
      const auto begin = static_cast<std::ptrdiff_t>(own.input_offset() * element_size);
      const auto end = begin + static_cast<std::ptrdiff_t>(own.input_count() * element_size);
      buffers[r].input.assign(given.begin() + begin, given.begin() + end);
      std::fill(given.begin() + begin, given.begin() + end, std::byte{0x5A});
    }
    buffers[r].data = std::move(given);
  }
  return simulate(algorithm, std::move(calls), type, op, std::move(buffers), model);
}

}  // namespace canopy::collectives
