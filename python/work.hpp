// A Canopy call as torch sees it: a c10d::Work whose Future completes by itself.
//
// DDP's reducer never waits on the Work of a gradient all-reduce, only on its Future, so the Future must
// complete when Canopy's call ends. The call's on_completion hands the Work to its process group's
// Completer thread, which completes it: the Future's callbacks (DDP's, or a Python comm hook that issues
// the next call) then run there, never on Canopy's own threads, so a callback that waits on another call
// cannot stall the calls. A thread in wait() completes the Work itself, never waiting for the Completer.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <vector>

#include <unistd.h>

#include "canopy/communicator.hpp"

namespace canopy::pytorch {

// What one torch call needs besides the Canopy call itself.
struct CallRecord {
  CallRecord(c10d::OpType type_, const char* title_, std::vector<at::Tensor> inputs_,
             std::vector<at::Tensor> results_)
      : type(type_), title(title_), inputs(std::move(inputs_)), results(std::move(results_)) {}

  c10d::OpType type;
  const char* title;                // "canopy:all_reduce": the torch.profiler event (static storage)
  std::vector<at::Tensor> inputs;   // shown by the profiler
  std::vector<at::Tensor> results;  // the Future's value and result()
  std::vector<at::Tensor> staging;  // flat buffers the call works on, kept until it ends
  std::vector<std::size_t> counts;  // all_to_all_v's send and receive counts, read while the call runs
  std::function<void()> copy_out;   // after success: staged results into the caller's tensors
  std::shared_ptr<int> source;      // a receive from any source: the sender's rank, written by Canopy
};

class CanopyWork final : public c10d::Work {
 public:
  CanopyWork(int rank, CallRecord record);

  // The Canopy call this Work stands for; set once, right after the call was started.
  void attach(canopy::Work call) { call_ = std::move(call); }

  bool isCompleted() override;
  // Waits for the call (up to `timeout`, kNoTimeout = for ever) and rethrows its error as RuntimeError.
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  std::vector<at::Tensor> result() override { return record_.results; }
  // The sender of a receive from any source (torch reads it after wait()); torch's refusal otherwise.
  int sourceRank() const override;

  // Whether a thread is inside wait(): it completes this Work itself once the call ends.
  bool awaited() const { return waiters_.load() > 0; }
  // The Completer's part, once the call has ended: completes this Work unless a thread in wait() will.
  void complete_unless_awaited();
  // Ends the profiler event and fails the Work (the call could not be started).
  void fail_to_start(std::exception_ptr error);

 private:
  // Copies results out, completes the Future, then finishes the Work; runs once, on whichever thread
  // sees the call end first; the others wait until it is done.
  void complete();

  CallRecord record_;
  canopy::Work call_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::atomic<bool> claimed_{false};
  std::atomic<int> waiters_{0};  // threads inside wait(), each of which completes the Work itself
};

// One thread completing a process group's Works as their calls end, in the order they end.
class Completer {
 public:
  Completer();
  ~Completer();  // completes what is queued (or, once the interpreter exits, abandons it), then joins
  Completer(const Completer&) = delete;
  Completer& operator=(const Completer&) = delete;

  // Completes `work` on this thread once `call` ends (at once if it has ended).
  void complete_when_done(const c10::intrusive_ptr<CanopyWork>& work, const canopy::Work& call);
  // Returns once every call handed over so far has ended and its Work is complete (as gloo's group
  // finishes its queued work before it goes); each call ends by its deadline.
  void wait_until_idle();

  // Run by Python's atexit, with the GIL released: every Completer first completes the Works whose calls
  // have ended (waiting up to `bound` in all), then stops completing any. Once the interpreter finalizes,
  // a thread that takes the GIL, as a Future callback or a dropped Python reference does, is ended by
  // pthread_exit, which aborts the process from inside C++; a Work that ends after this is left as it is.
  static void finish_before_interpreter_exit(Duration bound);

  // The process whose thread completes the Works; another when this is a forked child's copy.
  pid_t owner() const { return owner_; }
  bool inherited() const { return ::getpid() != owner_; }

 private:
  void loop();
  // Whether no ended call waits for its Work to be completed and none is being completed, by `deadline`.
  bool quiet_by(std::chrono::steady_clock::time_point deadline);

  std::mutex mutex_;
  std::condition_variable ended_changed_;             // wakes this thread
  std::condition_variable finished_;                  // wakes wait_until_idle()
  std::deque<c10::intrusive_ptr<CanopyWork>> ended_;  // calls that ended, Works not yet completed
  std::size_t unfinished_ = 0;                        // handed over, Works not yet completed
  bool completing_ = false;                           // this thread is inside a Work's completion
  bool stopping_ = false;
  const pid_t owner_ = ::getpid();
  std::thread thread_;
};

}  // namespace canopy::pytorch
