#include "python/work.hpp"

#include <ATen/core/ivalue.h>

#include <set>

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

namespace {

// The Completers alive, for finish_before_interpreter_exit(). Never destroyed: a process group may
// outlive static destruction.
struct LiveCompleters {
  std::mutex mutex;
  std::set<Completer*> all;
  std::atomic<bool> interpreter_exiting{false};
};

LiveCompleters& live_completers() {
  static auto* live = new LiveCompleters;
  return *live;
}

}  // namespace

Completer::Completer() : thread_([this] { loop(); }) {
  std::lock_guard lock(live_completers().mutex);
  live_completers().all.insert(this);
}

Completer::~Completer() {
  {
    std::lock_guard lock(live_completers().mutex);
    live_completers().all.erase(this);
  }
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  ended_changed_.notify_all();
  thread_.join();
}

void Completer::finish_before_interpreter_exit(Duration bound) {
  LiveCompleters& live = live_completers();
  std::lock_guard lock(live.mutex);
  const auto deadline = std::chrono::steady_clock::now() + bound;
  // A forked child's copies of its parent's Completers have no thread to wait for: they are skipped.
  for (Completer* completer : live.all)
    if (!completer->inherited()) completer->quiet_by(deadline);
  live.interpreter_exiting.store(true);
  // A completion that began before the store above still runs: wait for it, as long as the bound allows.
  std::size_t busy = 0;
  for (Completer* completer : live.all)
    if (!completer->inherited()) busy += completer->quiet_by(deadline) ? 0 : 1;
  if (busy > 0)
    log::warn("canopy_torch: at interpreter exit, {} process group(s) still complete a call's Work after {} "
              "ms; a Python callback that runs now may abort the process",
              busy, bound.count());
}

bool Completer::quiet_by(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  return finished_.wait_until(lock, deadline, [this] {
    return !completing_ && (ended_.empty() || live_completers().interpreter_exiting.load());
  });
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
      completing_ = !live_completers().interpreter_exiting.load();
      if (!completing_) {
        // Neither completed nor dropped: both may take the GIL, which the exiting interpreter refuses.
        static_cast<void>(work.release());
        --unfinished_;
        lock.unlock();
        finished_.notify_all();
        continue;
      }
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
      completing_ = false;
    }
    finished_.notify_all();
  }
}

void Completer::wait_until_idle() {
  std::unique_lock lock(mutex_);
  finished_.wait(lock, [this] { return unfinished_ == 0; });
}

}  // namespace canopy::pytorch
