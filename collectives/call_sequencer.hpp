// Runs a communicator's calls one at a time, in the order they were issued: blocking calls on the
// caller's own thread (no hand-off, no context switch), asynchronous ones on a progress thread.
// Every rank issues the same calls in the same order, so the n-th call is the same collective
// everywhere: its ticket is its sequence number in every frame header.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "canopy/communicator.hpp"

namespace canopy {

struct Work::State {
  std::mutex mutex;
  std::condition_variable done_changed;
  bool done = false;
  std::exception_ptr error;
  std::vector<std::function<void()>> on_completion;  // run by finish()

  void finish(std::exception_ptr e);
};

}  // namespace canopy

namespace canopy::collectives {

class CallSequencer {
 public:
  using Call = std::function<void(std::uint64_t sequence_number)>;

  CallSequencer() = default;
  ~CallSequencer();  // runs what is queued, then joins the progress thread
  CallSequencer(const CallSequencer&) = delete;
  CallSequencer& operator=(const CallSequencer&) = delete;

  // Waits for the turn of this call, runs it here, rethrows what it threw. A template, not a Call: the
  // blocking path is the small-message path, and a std::function of a capturing lambda may allocate.
  template <typename F>
  void run(F&& call) {
    const std::uint64_t ticket = wait_for_turn();
    try {
      call(ticket);
    } catch (...) {
      finish_turn(ticket);
      throw;
    }
    finish_turn(ticket);
  }
  // Queues the call for the progress thread.
  Work submit(Call call);

 private:
  struct Queued {
    std::uint64_t ticket = 0;
    Call call;
    std::shared_ptr<Work::State> state;
  };

  void progress_loop();
  std::uint64_t wait_for_turn();  // takes the next ticket and returns once it is served
  void finish_turn(std::uint64_t ticket);

  // A blocking call that finds its turn free takes and passes it with atomics alone; only a thread that must
  // wait for its turn (a blocking call behind others, the progress thread) sleeps on the condition variable,
  // and says so in waiters_, so that a finishing call notifies only when someone sleeps.
  std::atomic<std::uint64_t> next_ticket_{0};
  std::atomic<std::uint64_t> serving_{0};
  std::atomic<int> waiters_{0};
  std::mutex mutex_;  // guards the queue and stopping_; held to sleep on turn_changed_
  std::condition_variable turn_changed_;
  std::deque<Queued> queue_;  // in ticket order: submit() takes its ticket under the mutex
  bool stopping_ = false;
  std::thread progress_thread_;
};

}  // namespace canopy::collectives
