// Runs the schedules of all ranks of one call in one process, on plain memory: checks them (every
// message received is the one sent, nothing deadlocks, nothing writes outside its buffer) and, under
// an alpha-beta-gamma model, predicts the time. Also records who sent what to whom for the tracer.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "collectives/schedules/algorithms.hpp"
#include "collectives/schedules/schedule.hpp"

namespace canopy::collectives {

// alpha: seconds per message; beta: seconds per byte on a link; gamma: seconds per byte reduced.
struct LinkModel {
  double alpha = 20e-6;
  double beta = 1.0 / 1.0e9;
  double gamma = 1.0 / 10.0e9;
};

// One message as the simulator timed it.
struct TransferEvent {
  int from = 0;
  int to = 0;
  std::uint32_t tag = 0;
  Block block;              // the sender's source block
  std::uint64_t bytes = 0;
  double start = 0;         // seconds
  double finish = 0;
  int round = 0;            // logical round: 1 + the latest round this message depends on
};

struct Simulation {
  std::vector<std::vector<std::byte>> data;  // each rank's Data buffer afterwards
  std::vector<TransferEvent> transfers;
  double predicted_seconds = 0;               // when the last rank finishes
  int rounds = 0;
};

// `inputs[r]` is rank r's Data buffer before the call (call.data_count() elements of `type`).
// `call.rank` is ignored: every rank 0..call.size-1 is built and run. Throws Error(Protocol) with a
// precise description when the schedules are inconsistent (tag or size mismatch, deadlock, a block
// out of range).
Simulation simulate(const Algorithm& algorithm, const CollectiveCall& call, DataType type, ReduceOp op,
                    std::vector<std::vector<std::byte>> inputs, const LinkModel& model = {});

// The predicted seconds alone (no data moved): what the cost model asks.
double predict_seconds(const Algorithm& algorithm, const CollectiveCall& call, std::size_t element_size,
                       const LinkModel& model);

}  // namespace canopy::collectives
