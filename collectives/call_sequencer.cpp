#include "collectives/call_sequencer.hpp"

#include "canopy/error.hpp"

namespace canopy {

void Work::State::finish(std::exception_ptr e) {
  std::vector<std::function<void()>> callbacks;
  {
    std::lock_guard lock(mutex);
    error = std::move(e);
    done = true;
    callbacks.swap(on_completion);
  }
  done_changed.notify_all();
  for (auto& callback : callbacks) callback();
}

void Work::on_completion(std::function<void()> f) const {
  if (state_) {
    std::unique_lock lock(state_->mutex);
    if (!state_->done) {
      state_->on_completion.push_back(std::move(f));
      return;
    }
  }
  f();
}

bool Work::completed() const {
  if (!state_) return true;
  std::lock_guard lock(state_->mutex);
  return state_->done;
}

bool Work::wait_for(Duration timeout) const {
  if (!state_) return true;
  std::unique_lock lock(state_->mutex);
  return state_->done_changed.wait_for(lock, timeout, [&] { return state_->done; });
}

void Work::wait() const {
  if (!state_) return;
  std::unique_lock lock(state_->mutex);
  state_->done_changed.wait(lock, [&] { return state_->done; });
  if (!state_->error) return;
  // The caller gets a copy of its own: the stored exception may be freed by the thread that ended the
  // call, which a handler reading it after this Work is gone must not race with.
  try {
    std::rethrow_exception(state_->error);
  } catch (const Error& error) {
    throw Error(error.code(), error.what());
  }
}

std::exception_ptr Work::error() const {
  if (!state_) return nullptr;
  std::lock_guard lock(state_->mutex);
  return state_->error;
}

}  // namespace canopy

namespace canopy::collectives {

CallSequencer::~CallSequencer() {
  stop();
}

void CallSequencer::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  turn_changed_.notify_all();
  if (!progress_thread_.joinable()) return;
  if (side_) side_->wake();
  progress_thread_.join();
}

void CallSequencer::keep_moving(SideWork& side, transport::Transport& calls_transport) {
  std::lock_guard lock(mutex_);
  side_ = &side;
  calls_transport_ = &calls_transport;
}

void CallSequencer::side_work_arrived() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    start_thread_locked();
  }
  turn_changed_.notify_all();
  side_->wake();
}

void CallSequencer::start_thread_locked() {
  if (!progress_thread_.joinable()) progress_thread_ = std::thread([this] { progress_loop(); });
}

std::uint64_t CallSequencer::wait_for_turn() {
  const std::uint64_t ticket = next_ticket_.fetch_add(1);
  if (serving_.load() == ticket) return ticket;
  std::unique_lock lock(mutex_);
  ++waiters_;  // before the predicate's first look at serving_: see finish_turn()
  turn_changed_.wait(lock, [&] { return serving_.load() == ticket; });
  --waiters_;
  return ticket;
}

Work CallSequencer::submit(Call call) {
  auto state = std::make_shared<Work::State>();
  bool in_side = false;
  {
    std::lock_guard lock(mutex_);
    queue_.push_back({next_ticket_.fetch_add(1), std::move(call), state});
    start_thread_locked();
    in_side = in_side_;
  }
  turn_changed_.notify_all();
  if (in_side) side_->wake();
  return Work(state);
}

void CallSequencer::finish_turn(std::uint64_t ticket) {
  // No wake-up is lost: a waiter counts itself in waiters_ before it reads serving_, this reads waiters_
  // after storing serving_, all seq_cst, so either this sees the waiter or the waiter sees the new turn; and
  // taking the mutex before notifying means a waiter that saw the old turn is already asleep, not on its way
  // to sleep (or, for the progress thread in the side work's poll(), that the wake-up below reaches it).
  serving_.store(ticket + 1);
  if (waiters_.load() == 0) return;
  bool in_side = false;
  {
    std::lock_guard lock(mutex_);
    in_side = in_side_;
  }
  turn_changed_.notify_all();
  if (in_side) side_->wake();
}

void CallSequencer::progress_loop() {
  for (;;) {
    std::unique_lock lock(mutex_);
    const bool queued = !queue_.empty();
    if (stopping_ && !queued) return;
    // A queued call waits for its turn, counted in waiters_ as a blocking call is, so that the call
    // ahead of it wakes this thread when it finishes.
    if (queued) ++waiters_;
    if (queued && queue_.front().ticket == serving_.load()) {
      --waiters_;
      Queued next = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      run_queued(next);
      continue;
    }
    if (side_ && side_->busy()) {
      // Until the side work's I/O, its deadlines, or wake(): a call submitted, a turn passed, the end.
      in_side_ = true;
      lock.unlock();
      side_->progress_once();
      lock.lock();
      in_side_ = false;
    } else {
      // An empty queue waits for submit(), side_work_arrived() or stop(), which notify under the mutex.
      turn_changed_.wait(lock);
    }
    if (queued) --waiters_;
  }
}

void CallSequencer::run_queued(Queued& next) {
  if (side_) calls_transport_->set_companion(&side_->companion());
  std::exception_ptr error;
  try {
    next.call(next.ticket);
  } catch (...) {
    error = std::current_exception();
  }
  if (side_) calls_transport_->set_companion(nullptr);
  finish_turn(next.ticket);
  next.state->finish(error);
}

}  // namespace canopy::collectives
