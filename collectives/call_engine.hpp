// One rank's collective calls on a communicator's links: describes each call, chooses its algorithm (the
// one asked for, or the cost model's, at a stream's pace or one call's), and runs it, through its compiled
// schedule and the executor, or through the host's cells. Communicator::Impl owns one and keeps what a
// call does not need: the group's identity, lineage and failure state (docs/ARCHITECTURE.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "canopy/communicator.hpp"
#include "collectives/broadcast_stream.hpp"
#include "collectives/executor.hpp"
#include "collectives/flight_recorder.hpp"
#include "collectives/selection/cost_model.hpp"
#include "collectives/selection/schedule_cache.hpp"
#include "transport/shm/host_cells.hpp"
#include "transport/transport.hpp"

namespace canopy::collectives {

// What the engine is made of, once the communicator's links are up and its model is known.
struct CallEngineSetup {
  int rank = 0;
  int size = 1;
  std::uint64_t comm_id = 0;
  Duration timeout{0};                      // a call's, unless its options say otherwise
  std::shared_ptr<const HostLayout> hosts;  // every call carries it (CollectiveCall::hosts)
  transport::Transport* transport = nullptr;
  CostModel cost_model;
  std::map<Collective, std::string> algorithm_overrides;  // CANOPY_ALGO
  std::size_t chunk_bytes = 0;                            // CANOPY_CHUNK_BYTES
};

// A call failed while it ran (a peer died, a mismatch, a timeout): its messages may be in flight, so the
// communicator must end. A call refused before it ran (bad arguments, an unknown algorithm) throws the
// Error itself, and the communicator stays usable.
struct CallFailed {
  Error error;
};

class CallEngine {
 public:
  explicit CallEngine(CallEngineSetup setup);

  // Runs call #`seq`, whose arguments the caller validated: throws Error for a call refused (an unknown
  // algorithm), CallFailed for one that failed.
  void run(const CollectiveArgs& args, const CollectiveOptions& options, std::uint64_t seq);

  // Fills `call` for these arguments. Refilled call after call, as run() does with one of its own, it copies
  // no layout pointer (an atomic count each way) and allocates nothing.
  void describe_call(const CollectiveArgs& args, const CollectiveOptions& options,
                     CollectiveCall& call) const;
  // Error(InvalidArgument) for a root outside the group, a missing buffer or missing counts.
  void validate(const CollectiveArgs& args) const;
  // The algorithm asked for (the call's options, else CANOPY_ALGO); empty for auto.
  std::string_view requested_algorithm(Collective collective, const CollectiveOptions& options) const;
  bool follows_stream(const CollectiveArgs& args, std::string_view requested) const;
  Pace pace(bool follows_stream) const { return stream_.pace(follows_stream); }
  // `requested`: requested_algorithm(), looked up once per call. `remember`: whether the cost model may
  // keep the choice (only on the calls' own turn: choose_algorithm() may run beside a call on another
  // thread).
  const Algorithm& select(const CollectiveCall& call, std::size_t element_size, std::string_view requested,
                          Pace pace, std::string* explanation, bool remember = true);
  double predict(const Algorithm& algorithm, const CollectiveCall& call, std::size_t element_size,
                 Pace pace) const;
  const LinkModel& link() const { return cost_model_.link(); }
  // This rank's recent calls, for a timeout's message.
  std::string recent_calls() const { return recorder_.dump(); }

 private:
  const int rank_;
  const int size_;
  const std::uint64_t comm_id_;
  const Duration timeout_;
  const std::shared_ptr<const HostLayout> hosts_;
  transport::Transport* const transport_;
  transport::HostCells* const host_cells_;  // the transport's, read once; null: none
  CostModel cost_model_;
  const std::map<Collective, std::string> algorithm_overrides_;
  const std::size_t chunk_bytes_;
  ScheduleCache schedules_;
  Executor executor_;
  std::vector<std::byte> staging_;  // grows to the largest call's need, then is reused
  std::vector<std::byte> scratch_;  // a working copy where the user's buffer must stay intact
  CollectiveCall call_;             // the call under way: only the call holding the sequencer's turn uses it
  FlightRecorder recorder_;
  BroadcastStream stream_;  // whether auto chooses broadcasts for a stream's pace
};

}  // namespace canopy::collectives
