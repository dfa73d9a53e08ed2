#include "collectives/flight_recorder.hpp"

#include <fmt/format.h>

namespace canopy::collectives {

std::size_t FlightRecorder::start(const Entry& entry, std::chrono::steady_clock::time_point now) {
  std::size_t slot = recorded_++ % entries_.size();
  entries_[slot] = entry;
  entries_[slot].state = State::Running;
  entries_[slot].started = now;
  return slot;
}

void FlightRecorder::finish(std::size_t slot, bool ok, std::chrono::steady_clock::time_point now) {
  Entry& entry = entries_[slot];
  entry.state = ok ? State::Done : State::Failed;
  entry.seconds = std::chrono::duration<double>(now - entry.started).count();
}

std::string FlightRecorder::dump() const {
  std::string text;
  std::size_t kept = std::min<std::uint64_t>(recorded_, entries_.size());
  auto now = std::chrono::steady_clock::now();
  for (std::uint64_t i = recorded_ - kept; i < recorded_; ++i) {
    const Entry& e = entries_[i % entries_.size()];
    double seconds =
        e.state == State::Running ? std::chrono::duration<double>(now - e.started).count() : e.seconds;
    const char* state = e.state == State::Running ? "RUNNING for" : e.state == State::Done ? "done in" : "FAILED after";
    text += fmt::format("\n  #{} {} {} ({} x {} {}, root {}): {} {:.1f} ms", e.seq, to_string(e.collective),
                        e.algorithm, e.count, to_string(e.dtype), to_string(e.op), e.root, state, seconds * 1e3);
  }
  return text;
}

}  // namespace canopy::collectives
