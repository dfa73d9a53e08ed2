#include "collectives/one_shot.hpp"

#include <cstring>
#include <vector>

#include "collectives/kernels/reduce_kernels.hpp"

namespace canopy::collectives {
namespace {

// x_root (op) x_0 (op) x_1 ... into `out`, from every rank's cell.
void reduce_cells(const std::vector<const std::byte*>& cells, int root, const ExecutionContext& context,
                  std::uint64_t count) {
  const int size = static_cast<int>(cells.size());
  const std::byte* first = cells[static_cast<std::size_t>(root)];
  bool started = false;
  for (int rank = 0; rank < size; ++rank) {
    if (rank == root) continue;
    const std::byte* next = cells[static_cast<std::size_t>(rank)];
    if (!started)
      reduce_to(context.dtype, context.op, context.data, first, next, count);
    else
      reduce_into(context.dtype, context.op, context.data, next, count);
    started = true;
  }
}

}  // namespace

std::uint8_t run_through_cells(const CellsCall& call, const ExecutionContext& context) {
  transport::HostCells& cells = *context.cells;
  const std::uint64_t bytes = call.count * context.element_size;
  const std::byte* input = context.input != nullptr ? context.input : context.data;
  const bool contributes = call.collective != Collective::Broadcast || call.rank == call.root;
  cells.start(context.envelope, bytes);
  if (contributes) {
    std::byte* mine = cells.claim(context.deadline);
    if (bytes > 0) std::memcpy(mine, input, bytes);
    cells.publish();
  }
  if (call.collective == Collective::Broadcast) {
    if (call.rank == call.root) {
      if (context.data != input) std::memcpy(context.data, input, bytes);
    } else {
      std::memcpy(context.data, cells.wait_for(call.root, context.deadline), bytes);
    }
  } else if (call.collective == Collective::Barrier) {
    for (int rank = 0; rank < call.size; ++rank) cells.wait_for(rank, context.deadline);
  } else if (call.collective == Collective::AllReduce || call.rank == call.root) {
    // Every cell is there and checked before the output is written.
    thread_local std::vector<const std::byte*> everyone;
    everyone.resize(static_cast<std::size_t>(call.size));
    for (int rank = 0; rank < call.size; ++rank)
      everyone[static_cast<std::size_t>(rank)] = cells.wait_for(rank, context.deadline);
    reduce_cells(everyone, call.collective == Collective::AllReduce ? 0 : call.root, context, call.count);
  }
  cells.finish();
  return cells.heard_flags();
}

}  // namespace canopy::collectives
