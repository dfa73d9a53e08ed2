// A Canopy call as torch sees it: a c10d::Work whose Future completes by itself.
//
// DDP's reducer never waits on the Work of a gradient all-reduce, only on its Future, so something must
// complete the Future when Canopy's call ends. canopy::Work has no callback, so a CompletionLane thread
// waits on the calls of one ordered stream (a communicator's collectives run one after another; point-to-
// point messages are ordered per peer, direction and tag) and completes each torch Work in turn. The
// Future's callbacks (DDP's, or a Python comm hook that issues the next call) then run on that thread,
// never on Canopy's progress thread, so a callback that waits on another call cannot stall the calls.
// wait() and isCompleted() look at the Canopy call directly, so neither waits behind the lane.
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

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
};

class CanopyWork final : public c10d::Work {
 public:
  CanopyWork(int rank, CallRecord record);

  // The Canopy call this Work stands for; called once, right after the call was started.
  void attach(canopy::Work call) { call_ = std::move(call); }

  bool isCompleted() override;
  // Waits for the call (up to `timeout`, kNoTimeout = for ever) and rethrows its error as RuntimeError.
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  std::vector<at::Tensor> result() override { return record_.results; }

  // The lane's part: blocks until the Canopy call ends, then completes this Work unless a thread in wait()
  // will (a blocking call's caller then never waits for the lane thread to be scheduled).
  void complete_when_done();
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

// One thread completing the Works of one ordered stream of calls, in order.
class CompletionLane {
 public:
  CompletionLane();
  ~CompletionLane();  // completes what is queued (each call ends by its deadline), then joins
  CompletionLane(const CompletionLane&) = delete;
  CompletionLane& operator=(const CompletionLane&) = delete;

  void push(c10::intrusive_ptr<CanopyWork> work);

 private:
  void loop();

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<c10::intrusive_ptr<CanopyWork>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace canopy::pytorch
