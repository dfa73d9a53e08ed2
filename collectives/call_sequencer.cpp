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
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  turn_changed_.notify_all();
  if (progress_thread_.joinable()) progress_thread_.join();
}

std::uint64_t CallSequencer::wait_for_turn() {
  std::unique_lock lock(mutex_);
  const std::uint64_t ticket = next_ticket_++;
  turn_changed_.wait(lock, [&] { return serving_ == ticket; });
  return ticket;
}

Work CallSequencer::submit(Call call) {
  auto state = std::make_shared<Work::State>();
  {
    std::lock_guard lock(mutex_);
    queue_.push_back({next_ticket_++, std::move(call), state});
    if (!progress_thread_.joinable()) progress_thread_ = std::thread([this] { progress_loop(); });
  }
  turn_changed_.notify_all();
  return Work(state);
}

void CallSequencer::finish_turn() {
  {
    std::lock_guard lock(mutex_);
    ++serving_;
  }
  turn_changed_.notify_all();
}

void CallSequencer::progress_loop() {
  for (;;) {
    Queued next;
    {
      std::unique_lock lock(mutex_);
      turn_changed_.wait(lock, [&] {
        return (!queue_.empty() && queue_.front().ticket == serving_) || (stopping_ && queue_.empty());
      });
      if (queue_.empty()) return;
      next = std::move(queue_.front());
      queue_.pop_front();
    }
    std::exception_ptr error;
    try {
      next.call(next.ticket);
    } catch (...) {
      error = std::current_exception();
    }
    finish_turn();
    next.state->finish(error);
  }
}

}  // namespace canopy::collectives
