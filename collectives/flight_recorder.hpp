// The last few collectives of this rank, kept in memory so that a timeout can say who was stuck where
// (as Horovod's stall inspector and NCCL's flight recorder do): printed with every Timeout error.
// Only the call being run touches it, and the CallSequencer runs one call at a time, so it needs no lock.
// The caller passes the times it reads anyway, so that recording costs no clock read of its own; a call that
// succeeds is not timed at its end (a clock read is a measurable part of a small call), so the dump times
// only the call that failed and the one still running, which are what a timeout's reader looks for.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "canopy/types.hpp"

namespace canopy::collectives {

class FlightRecorder {
 public:
  enum class State { Running, Done, Failed };

  struct Entry {
    std::uint64_t seq = 0;
    Collective collective = Collective::AllReduce;
    std::string_view algorithm;  // points into the static algorithm table
    std::uint64_t count = 0;
    DataType dtype = DataType::Float32;
    ReduceOp op = ReduceOp::Sum;
    int root = 0;
    State state = State::Running;
    std::chrono::steady_clock::time_point started;
    double seconds = 0;  // how long a failed call ran
  };

  explicit FlightRecorder(std::size_t capacity = 16) : entries_(capacity) {}

  // Records the start of a call at `now`; returns the slot to pass to done() or failed().
  std::size_t start(const Entry& entry, std::chrono::steady_clock::time_point now);
  void done(std::size_t slot) { entries_[slot].state = State::Done; }
  void failed(std::size_t slot, std::chrono::steady_clock::time_point now);

  // The recorded calls, oldest first, one per line:
  // "#12 all_reduce ring (1000 x float32 sum, root 0): done", "... FAILED after 2000.1 ms", "... RUNNING
  // for 5.2 ms".
  std::string dump() const;

 private:
  std::vector<Entry> entries_;
  std::uint64_t recorded_ = 0;
  std::size_t next_slot_ = 0;
};

}  // namespace canopy::collectives
