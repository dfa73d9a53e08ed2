// The last few collectives of this rank, kept in memory so that a timeout can say who was stuck where
// (as Horovod's stall inspector and NCCL's flight recorder do): printed with every Timeout error.
// Only the call being run touches it, and the CallSequencer runs one call at a time, so it needs no lock.
// The caller passes the times it reads anyway, so that recording costs no clock read of its own.
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
    double seconds = 0;  // how long it ran (so far, for a running entry)
  };

  explicit FlightRecorder(std::size_t capacity = 16) : entries_(capacity) {}

  // Records the start of a call at `now`; returns the slot to pass to finish().
  std::size_t start(const Entry& entry, std::chrono::steady_clock::time_point now);
  void finish(std::size_t slot, bool ok, std::chrono::steady_clock::time_point now);

  // The recorded calls, oldest first, one per line: "#12 all_reduce ring 1000 x float32 sum: done in 35 us".
  std::string dump() const;

 private:
  std::vector<Entry> entries_;
  std::uint64_t recorded_ = 0;
};

}  // namespace canopy::collectives
