// What every Transport implementation shares besides the interface: the abort that any thread may raise
// and the thread driving the transport reports, and the check of a peer before a post.
#pragma once

#include <atomic>
#include <mutex>
#include <string>

#include "common/error.hpp"

namespace canopy::transport {

class AbortFlag {
 public:
  // The first reason wins; false when the transport was aborted already. Thread-safe.
  bool raise(const std::string& reason) {
    std::lock_guard lock(mutex_);
    if (raised_.load(std::memory_order_relaxed)) return false;
    reason_ = reason;
    raised_.store(true, std::memory_order_release);
    return true;
  }
  bool raised() const { return raised_.load(std::memory_order_acquire); }
  // Error(Aborted) with the reason, when raised.
  void throw_if_raised(int rank) const {
    if (!raised()) return;
    std::lock_guard lock(mutex_);
    fail(ErrorCode::Aborted, "rank {}: transport aborted: {}", rank, reason_);
  }

 private:
  std::atomic<bool> raised_{false};
  mutable std::mutex mutex_;
  std::string reason_;
};

// Error(InvalidArgument) unless `peer` is another rank of the group: what `call` (post_send, post_recv)
// may address.
inline void check_peer(int rank, int size, int peer, const char* call) {
  if (peer < 0 || peer >= size)
    fail(ErrorCode::InvalidArgument, "rank {}: {} to/from rank {}, but the group has ranks 0..{}", rank, call,
         peer, size - 1);
  if (peer == rank)
    fail(ErrorCode::InvalidArgument, "rank {}: {} with itself: a schedule must copy locally instead", rank,
         call);
}

}  // namespace canopy::transport
