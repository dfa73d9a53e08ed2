// How many join tickets the job's store has handed out, as the liveness monitor's thread last read it.
//
// An elastic loop asks "is anyone waiting to join?" after every step. Read from the store each time, that
// question puts the store on every step's path: on etcd a linearizable read is a round trip through the
// leader, and while the members elect a new one it waits for seconds. Once asked, the monitor's thread
// reads the count once a heartbeat round instead, so the answer is at most one interval old and costs a
// step nothing. A job that never asks never pays for the read. A reading older than the heartbeat timeout
// (the store failed, the monitor stopped) is not used: the caller asks the store itself, and meets its error.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>

#include "canopy/store.hpp"
#include "common/deadline.hpp"

namespace canopy::collectives {

class JoinTicketCount {
 public:
  // `job_store`: the job's store, as the communicator holds it; `timeout` (the heartbeat timeout) bounds
  // the monitor's reads and how old a reading may be.
  JoinTicketCount(std::shared_ptr<Store> job_store, Duration timeout)
      : job_store_(std::move(job_store)), timeout_(timeout) {}

  // The count as the monitor last read it, no older than the timeout; else read from the store now (and
  // from here on, the monitor keeps it). Throws what the store throws.
  std::uint64_t read();
  // On the monitor's thread, once a round, once read() has been called: reads the count through a handle
  // of its own (Store::open_another), which no call waits behind. A failed read leaves the count unknown,
  // so read() meets the store's error itself.
  void refresh() noexcept;

 private:
  struct Reading {
    std::uint64_t tickets = 0;
    Clock::time_point at{};
  };

  const std::shared_ptr<Store> job_store_;
  const Duration timeout_;
  std::shared_ptr<Store> own_handle_;  // the monitor's thread alone
  std::atomic<bool> asked_{false};
  std::mutex mutex_;
  std::optional<Reading> last_;  // under mutex_; none before the first reading, or after a failed one
};

}  // namespace canopy::collectives
