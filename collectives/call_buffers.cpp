#include "collectives/call_buffers.hpp"

#include <cstring>

#include "collectives/kernels/reduce_kernels.hpp"

namespace canopy::collectives {
namespace {

std::byte* grown(std::vector<std::byte>& buffer, std::size_t bytes) {
  if (buffer.size() < bytes) buffer.resize(bytes);
  return buffer.data();
}

// The elements of an all-to-all's input: size() blocks, or the sum of the send counts.
std::size_t all_to_all_input_count(const CollectiveArgs& args, int size) {
  if (args.collective == Collective::AllToAll) return args.count * static_cast<std::size_t>(size);
  std::size_t total = 0;
  for (int j = 0; j < size; ++j) total += args.send_counts[j];
  return total;
}

}  // namespace

CallBuffers prepare_call_buffers(const CollectiveArgs& args, int rank, int size,
                                 std::vector<std::byte>& scratch) {
  auto* input = static_cast<const std::byte*>(args.input);
  auto* output = static_cast<std::byte*>(args.output);
  const std::size_t element = size_of(args.dtype);
  const std::size_t bytes = args.count * element;
  switch (args.collective) {
    case Collective::AllReduce:
      return {output, input, input == output};
    case Collective::Broadcast:
      // Only the root's input is read; elsewhere Data is received whole.
      return {output, input, rank != args.root || input == output};
    case Collective::Reduce:
      if (rank == args.root) return {output, input, input == output};
      // Intermediate ranks accumulate partial sums: keep the caller's input intact.
      return {grown(scratch, bytes), input, false};
    case Collective::AllGather:
      return {output, input, input == output + rank * bytes};
    case Collective::ReduceScatter:
      // The partial sums of every block, allocated once and reused.
      return {grown(scratch, bytes * static_cast<std::size_t>(size)), input, false};
    case Collective::AllToAll:
    case Collective::AllToAllV:
      if (input == output && input != nullptr) {
        // One buffer for both: blocks arrive where others still wait to be sent, so send from a copy.
        const std::size_t input_bytes = all_to_all_input_count(args, size) * element;
        if (input_bytes > 0) std::memcpy(grown(scratch, input_bytes), input, input_bytes);
        return {output, scratch.data(), false};
      }
      return {output, input, false};
    case Collective::Gather:
      if (rank != args.root) return {nullptr, input, false};  // no Data away from the root
      return {output, input, input == output + args.root * bytes};
    case Collective::Scatter:
      // At an in-place root the output already is the root's block of the input.
      return {output, rank == args.root ? input : nullptr,
              rank == args.root && output == input + args.root * bytes};
    default:
      return {output, input, true};
  }
}

void finish_call_buffers(const CollectiveArgs& args, int rank, int size, const std::byte* data) {
  const std::size_t bytes = args.count * size_of(args.dtype);
  const bool holds_result = args.collective == Collective::AllReduce ||
                            args.collective == Collective::ReduceScatter ||
                            (args.collective == Collective::Reduce && rank == args.root);
  if (args.collective == Collective::ReduceScatter && bytes > 0)
    std::memcpy(args.output, data + rank * bytes, bytes);
  if (args.op == ReduceOp::Avg && holds_result) finish_average(args.dtype, args.output, args.count, size);
}

}  // namespace canopy::collectives
