#include "python/work.hpp"

#include <ATen/core/ivalue.h>

#include "common/error.hpp"
#include "common/log.hpp"
#include "python/errors.hpp"

namespace canopy::pytorch {

CanopyWork::CanopyWork(int rank, CallRecord record)
    : c10d::Work(rank, record.type, record.title, record.inputs),
      record_(std::move(record)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

int CanopyWork::sourceRank() const {
  if (!record_.source) return c10d::Work::sourceRank();
  return *record_.source;
}

bool CanopyWork::isCompleted() {
  if (!call_.completed()) return false;
  complete();
  return true;
}

bool CanopyWork::wait(std::chrono::milliseconds timeout) {
  waiters_.fetch_add(1);  // from here until this Work is complete, the Completer leaves it to this thread
  if (timeout <= kNoTimeout) {
    try {
      call_.wait();
    } catch (...) {
      // complete() takes the error from the call and rethrows it below
    }
  } else if (!call_.wait_for(timeout)) {
    waiters_.fetch_sub(1);
    // Still running: the Completer completes it when it ends. Unless it ended just now, while the
    // Completer still left it to this thread.
    if (!call_.completed())
      fail(ErrorCode::Timeout,
           "{}: Work.wait(timeout) gave up after {} ms; the call itself goes on until it ends or meets the "
           "process group's timeout",
           record_.title, timeout.count());
    waiters_.fetch_add(1);
  }
  complete();
  waiters_.fetch_sub(1);
  std::exception_ptr error;
  {
    std::lock_guard lock(mutex_);
    error = exception_;
  }
  if (error) std::rethrow_exception(error);
  return true;
}

void CanopyWork::complete_unless_awaited() {
  if (!awaited()) complete();
}

void CanopyWork::complete() {
  if (claimed_.exchange(true)) {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [this] { return completed_; });
    return;
  }
  std::exception_ptr error = torch_facing(call_.error());
  if (!error && record_.copy_out) {
    try {
      record_.copy_out();
    } catch (...) {
      error = std::current_exception();
    }
  }
  record_.copy_out = nullptr;
  record_.staging.clear();
  if (error) {
    future_->setError(error);
    finish(error);
  } else {
    future_->markCompleted(c10::IValue(record_.results));  // runs the Future's callbacks, here
    finish();
  }
}

void CanopyWork::fail_to_start(std::exception_ptr error) {
  claimed_.store(true);
  future_->setError(error);
  finish(error);
}

Completer::Completer() : thread_([this] { loop(); }) {}

Completer::~Completer() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  ended_changed_.notify_all();
  thread_.join();
}

void Completer::complete_when_done(const c10::intrusive_ptr<CanopyWork>& work, const canopy::Work& call) {
  {
    std::lock_guard lock(mutex_);
    ++unfinished_;
  }
  // On the thread that ends the call (Canopy's): only queue the Work, as on_completion asks; a blocking
  // call's caller, already woken in wait(), completes it without this thread waking at all.
  call.on_completion([this, work] {
    std::unique_lock lock(mutex_);
    if (work->awaited()) {
      --unfinished_;
      lock.unlock();
      finished_.notify_all();
      return;
    }
    ended_.push_back(work);
    lock.unlock();
    ended_changed_.notify_one();
  });
}

void Completer::loop() {
  for (;;) {
    c10::intrusive_ptr<CanopyWork> work;
    {
      std::unique_lock lock(mutex_);
      ended_changed_.wait(lock, [this] { return stopping_ || !ended_.empty(); });
      if (ended_.empty()) return;  // stopping, and every ended call's Work completed
      work = std::move(ended_.front());
      ended_.pop_front();
    }
    try {
      work->complete_unless_awaited();
    } catch (const std::exception& e) {
      // A Future callback threw past the Future: the Work itself is complete; keep serving the others.
      log::warn("canopy_torch: a completion callback threw: {}", e.what());
    }
    work.reset();  // the tensors go before wait_until_idle() returns
    {
      std::lock_guard lock(mutex_);
      --unfinished_;
    }
    finished_.notify_all();
  }
}

void Completer::wait_until_idle() {
  std::unique_lock lock(mutex_);
  finished_.wait(lock, [this] { return unfinished_ == 0; });
}

}  // namespace canopy::pytorch
