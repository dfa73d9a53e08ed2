#include "collectives/flight_recorder.hpp"

#include <fmt/format.h>

namespace canopy::collectives {

std::size_t FlightRecorder::start(const Entry& entry, std::chrono::steady_clock::time_point now) {
  const std::size_t slot = next_slot_;
  next_slot_ = slot + 1 == entries_.size() ? 0 : slot + 1;  // recorded_ % size without dividing every call
  ++recorded_;
  entries_[slot] = entry;
  entries_[slot].state = State::Running;
  entries_[slot].started = now;
  return slot;
}

void FlightRecorder::failed(std::size_t slot, std::chrono::steady_clock::time_point now) {
  Entry& entry = entries_[slot];
  entry.state = State::Failed;
  entry.seconds = std::chrono::duration<double>(now - entry.started).count();
}

std::string FlightRecorder::dump() const {
  std::string text;
  std::size_t kept = std::min<std::uint64_t>(recorded_, entries_.size());
  auto now = std::chrono::steady_clock::now();
  for (std::uint64_t i = recorded_ - kept; i < recorded_; ++i) {
    const Entry& e = entries_[i % entries_.size()];
    text += fmt::format("\n  #{} {} {} ({} x {} {}, root {}): ", e.seq, to_string(e.collective), e.algorithm,
                        e.count, to_string(e.dtype), to_string(e.op), e.root);
    if (e.state == State::Done)
      text += "done";
    else if (e.state == State::Failed)
      text += fmt::format("FAILED after {:.1f} ms", e.seconds * 1e3);
    else
      text +=
          fmt::format("RUNNING for {:.1f} ms", std::chrono::duration<double>(now - e.started).count() * 1e3);
  }
  return text;
}

}  // namespace canopy::collectives
