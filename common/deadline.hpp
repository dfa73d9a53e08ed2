// A point in time by which a blocking call must return: every wait in Canopy takes one.
#pragma once

#include <chrono>

namespace canopy {

using Clock = std::chrono::steady_clock;

class Deadline {
 public:
  static Deadline after(Clock::duration d) { return Deadline(Clock::now() + d); }
  static Deadline never() { return Deadline(Clock::time_point::max()); }
  explicit Deadline(Clock::time_point at) : at_(at) {}

  Clock::time_point at() const { return at_; }
  bool expired() const { return Clock::now() >= at_; }
  bool is_never() const { return at_ == Clock::time_point::max(); }
  // Time left, never negative.
  Clock::duration remaining() const {
    if (is_never()) return Clock::duration::max();
    auto left = at_ - Clock::now();
    return left > Clock::duration::zero() ? left : Clock::duration::zero();
  }
  // Milliseconds left for poll(): -1 for never, rounded up so a wait never ends early.
  int poll_timeout_ms() const {
    if (is_never()) return -1;
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(remaining()).count();
    auto ms = (us + 999) / 1000;
    return ms > 1'000'000'000 ? 1'000'000'000 : static_cast<int>(ms);
  }
  Deadline earlier(Deadline other) const { return at_ < other.at_ ? *this : other; }

 private:
  Clock::time_point at_;
};

}  // namespace canopy
