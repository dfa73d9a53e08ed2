// A stream of broadcasts (docs/SCHEDULES.md, *A stream of broadcasts*). Auto chooses a broadcast for one
// call's latency, except when the previous call was a broadcast whose root called it back to back with the
// one before: then for the pace of a stream of calls, where every rank's own messages per call count. Only
// the root knows how soon it calls again, so it says so in its messages' flags (kFlagRootInStream,
// transport/envelope.hpp); the executor forwards what a rank heard with the data it sends on, so after the
// call every rank holds the same bit, and every rank chooses the next broadcast alike. The rule lives here.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>

#include "canopy/communicator.hpp"
#include "collectives/selection/cost_model.hpp"
#include "common/deadline.hpp"

namespace canopy::collectives {

class BroadcastStream {
 public:
  // Whether a call takes part: a broadcast with data whose algorithm is left to auto, on a transport whose
  // messages carry flags. Every rank answers alike; a call that does not take part ends a stream.
  static bool follows(const CollectiveArgs& args, bool algorithm_requested, bool transport_carries_flags) {
    return args.collective == Collective::Broadcast && args.count > 0 && !algorithm_requested &&
           transport_carries_flags;
  }

  // What auto chooses a call for.
  Pace pace(bool follows) const {
    return follows && in_stream_.load(std::memory_order_relaxed) ? Pace::Stream : Pace::OneCall;
  }

  // At the start of a call: the flags of this rank's own messages. The root calls back to back when its
  // previous broadcast may still be on its way: sooner than `one_call_seconds` (one call's predicted
  // latency) after it returned.
  std::uint8_t flags_at_start(bool follows, bool is_root, Clock::time_point started, double one_call_seconds);
  // The root's question for flags_at_start: whether `one_call_seconds` is needed at all (a cost-model lookup
  // every other call is spared).
  bool root_may_be_back_to_back(bool follows, bool is_root) const { return follows && is_root && last_end_; }

  // At the end of a call: the flags it heard (Executor::heard_flags) decide the next broadcast's pace. Reads
  // the clock for a call that follows, the only kind whose end a later call compares with.
  void finished(bool follows, bool is_root, std::uint8_t heard_flags);

 private:
  std::atomic<bool> in_stream_{false};         // read by choose_algorithm() from any thread
  bool root_back_to_back_ = false;             // this rank, as the root of the call under way
  std::optional<Clock::time_point> last_end_;  // this rank's, while broadcasts follow each other
};

}  // namespace canopy::collectives
