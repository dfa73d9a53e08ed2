// Where one call's buffers live and what its messages carry: what the executor needs besides the plan it
// runs (a compiled schedule, or a call through the host's cells).
#pragma once

#include <cstddef>

#include "canopy/types.hpp"
#include "common/deadline.hpp"
#include "transport/shm/host_cells.hpp"
#include "transport/transport.hpp"

namespace canopy::collectives {

struct ExecutionContext {
  transport::Transport* transport = nullptr;
  transport::HostCells* cells = nullptr;  // the host's cells, where the group has them
  transport::Envelope envelope;           // step is filled in per message
  std::byte* data = nullptr;
  std::byte* staging = nullptr;
  const std::byte* input = nullptr;  // an out-of-place call's input (Buffer::Input); read only
  std::size_t element_size = 1;
  DataType dtype = DataType::Float32;
  ReduceOp op = ReduceOp::Sum;  // Avg arrives here as Sum
  Deadline deadline = Deadline::never();
};

}  // namespace canopy::collectives
