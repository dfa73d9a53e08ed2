// Runs a communicator's calls one at a time, in the order they were issued: blocking calls on the
// caller's own thread (no hand-off, no context switch), asynchronous ones on the communicator's one
// progress thread. Every rank issues the same calls in the same order, so the n-th call is the same
// collective everywhere: its ticket is its sequence number in every frame header.
//
// The progress thread also keeps the communicator's point-to-point engine moving (SideWork): between calls
// it waits in that engine's poll(); while it runs an asynchronous call, the engine is the call's
// transport's companion (transport.hpp), its descriptors in the same poll() as the call's links, so that
// messages move while the collective waits and a pending receive never holds the collectives back. One
// thread serves both, instead of one each, because the two never need to run at the same instant: each
// waits on descriptors, and one poll() can wait on both. Blocking calls never touch the side work: they
// stay on the caller's thread while the progress thread drives the messages beside them.
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
#include "transport/transport.hpp"

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

// What the progress thread keeps moving beside the calls (a communicator's point-to-point engine). Every
// function but wake() is called on the progress thread only.
class SideWork {
 public:
  // Whether it has anything to move or wait for: operations not taken up yet, or I/O under way.
  virtual bool busy() = 0;
  // Moves what can move; waits, when nothing could, until its I/O, its own deadlines or wake().
  virtual void progress_once() = 0;
  // Makes a waiting progress_once() return at once (the next one, if none waits). Any thread.
  virtual void wake() = 0;
  // What an asynchronous call's transport keeps moving while the call waits.
  virtual transport::Companion& companion() = 0;

 protected:
  ~SideWork() = default;
};

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

  // From now on the progress thread keeps `side` moving beside the calls, and every call it runs has
  // `side`'s companion on `calls_transport`. Before the first call; both outlive the thread (stop()).
  void keep_moving(SideWork& side, transport::Transport& calls_transport);
  // The side work has something new: starts the progress thread if it is not running yet, and wakes it.
  void side_work_arrived();
  // Runs what is queued, then joins the progress thread; the side work is left as it stands. Idempotent.
  void stop();

 private:
  struct Queued {
    std::uint64_t ticket = 0;
    Call call;
    std::shared_ptr<Work::State> state;
  };

  void progress_loop();
  void start_thread_locked();  // under mutex_
  // An asynchronous call, with the side work as its transport's companion.
  void run_queued(Queued& next);
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
  SideWork* side_ = nullptr;
  bool in_side_ = false;  // the progress thread waits in the side work's progress_once(): wake it there
  transport::Transport* calls_transport_ = nullptr;
  std::thread progress_thread_;
};

}  // namespace canopy::collectives
