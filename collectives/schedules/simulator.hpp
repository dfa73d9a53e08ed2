// Runs the schedules of all ranks of one call in one process, on plain memory: checks them (every
// message received is the one sent, nothing deadlocks, nothing writes outside its buffer) and, under
// an alpha-beta-gamma model, predicts the time. Also records who sent what to whom for the tracer.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "collectives/schedules/algorithms.hpp"
#include "collectives/schedules/host_layout.hpp"
#include "collectives/schedules/schedule.hpp"

namespace canopy::collectives {

// alpha: seconds per message; beta: seconds per byte on a link; gamma: seconds per byte reduced.
// A message's first eager_bytes cost beta_eager each instead of beta: a socket takes that much from the
// sender without waiting for the reader, so a message that fits is two memory copies, while a longer one
// streams at the pace of sender and receiver waking each other (on loopback 2-5 times slower per byte).
// Messages sent back to back on one connection share its eager bytes (the simulator keeps the account).
struct LinkModel {
  LinkModel() = default;
  // Every byte at beta: no eager part, every rank on a host of its own.
  LinkModel(double alpha_seconds, double beta_seconds_per_byte, double gamma_seconds_per_byte)
      : alpha(alpha_seconds), beta(beta_seconds_per_byte), gamma(gamma_seconds_per_byte) {}

  double alpha = 20e-6;
  double beta = 1.0 / 1.0e9;
  double gamma = 1.0 / 10.0e9;
  double beta_eager = 1.0 / 1.0e9;
  std::uint64_t eager_bytes = 0;
  HostLayout hosts;

  // A message whose first `eager` bytes (at most eager_bytes) fit the socket buffer.
  double message_seconds(std::uint64_t bytes, std::uint64_t eager) const {
    return alpha + byte_seconds(bytes, eager);
  }
  // Its bytes alone, without the per-message alpha.
  double byte_seconds(std::uint64_t bytes, std::uint64_t eager) const {
    return static_cast<double>(eager) * beta_eager + static_cast<double>(bytes - eager) * beta;
  }
  // A message sent on an idle connection.
  double message_seconds(std::uint64_t bytes) const {
    return message_seconds(bytes, std::min(bytes, eager_bytes));
  }
};

// One message as the simulator timed it.
struct TransferEvent {
  int from = 0;
  int to = 0;
  std::uint32_t tag = 0;
  Block block;  // the sender's source block
  std::uint64_t bytes = 0;
  double start = 0;  // seconds
  double finish = 0;
  int round = 0;  // logical round: 1 + the latest round this message depends on
};

struct Simulation {
  std::vector<std::vector<std::byte>> data;  // each rank's Data buffer afterwards
  std::vector<TransferEvent> transfers;
  double predicted_seconds = 0;  // when the last rank finishes
  int rounds = 0;
};

// One rank's buffers when the call starts: Data (call.data_count() elements) and, where the input is a
// buffer of its own (out of place, or a collective whose input is not in Data), Input
// (call.input_count() elements; empty otherwise).
struct RankBuffers {
  std::vector<std::byte> data;
  std::vector<std::byte> input;
};

// `calls[r]` is rank r's view of the call (its rank, and for all-to-all-v its counts); every rank's
// schedule is built and run. Throws Error(Protocol) with a precise description when the schedules are
// inconsistent (tag or size mismatch, deadlock, a block out of range).
Simulation simulate(const Algorithm& algorithm, std::vector<CollectiveCall> calls, DataType type, ReduceOp op,
                    std::vector<RankBuffers> buffers, const LinkModel& model = {});

// The same for a call every rank sees alike but for its rank (`call.rank` is ignored). Where the input
// lies in Data (CollectiveCall::input_in_data), `inputs[r]` is rank r's Data before the call
// (call.data_count() elements of `type`) and an out-of-place call takes its input region from there;
// elsewhere `inputs[r]` is rank r's Input (call.input_count() elements) and Data starts as garbage.
Simulation simulate(const Algorithm& algorithm, const CollectiveCall& call, DataType type, ReduceOp op,
                    std::vector<std::vector<std::byte>> inputs, const LinkModel& model = {});

// `call` as seen by each rank 0..call.size-1.
std::vector<CollectiveCall> every_rank(const CollectiveCall& call);

// What the cost model asks (no data moved): the predicted seconds of one call, how many messages all
// ranks send, and the seconds per call in a stream of such calls back to back, where one call's
// messages overlap the next's and the busiest rank (or a host's shared cores) sets the pace.
struct Prediction {
  double seconds = 0;
  std::size_t messages = 0;
  double stream_seconds = 0;
};
Prediction predict(const Algorithm& algorithm, const CollectiveCall& call, std::size_t element_size,
                   const LinkModel& model);

// The predicted seconds alone.
double predict_seconds(const Algorithm& algorithm, const CollectiveCall& call, std::size_t element_size,
                       const LinkModel& model);

}  // namespace canopy::collectives
