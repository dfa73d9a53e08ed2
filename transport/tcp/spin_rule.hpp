// When progress() should busy-poll its sockets before it blocks in poll(), and for how long.
//
// Busy-polling saves the wake-up of a blocked process (several microseconds on loopback, more than the
// message itself for small ones), which is why MPI implementations spin. A spinner that held its core
// would starve the peer it waits for when ranks outnumber cores; ours offers the core (sched_yield)
// between rounds, as Open MPI does when oversubscribed, so the peer runs at once instead of after a
// wake-up. Measured on 2 cores, quiet: a 4-rank 8-byte all-reduce took 21-33 us spinning against 39-58 us
// blocking, 8 ranks 71-109 us against 77-146, two 4-rank jobs at once 34-41 us against 44-84.
// So: spin for a bounded time unless the host's ranks outnumber its cores by more than measured.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

namespace canopy::transport {

// Spinning was measured to pay up to 4 ranks per core; beyond that a rank blocks by default.
inline constexpr int kMostRanksPerCoreToSpin = 4;

// How long a rank spins by default: several small-message round
// trips on loopback, so that a collective's next message usually arrives while still spinning, yet short
// enough that a rank waiting on a slow peer soon gives its core back.
inline constexpr std::chrono::microseconds kDefaultSpin{50};

// How many CPUs this process may run on (allowed_cpus(): taskset, cgroup cpusets, a launcher's binding);
// at least 1. A rank bound to one core sees 1: the group's view of a host is the union of its ranks' CPUs
// (the host layout), which TcpOptions::host_cores carries.
int usable_cores();

// The spin to use: `requested` (CANOPY_SOCKET_SPIN_US) when given; otherwise kDefaultSpin when
// `local_ranks` (this group's ranks on this host) are at most kMostRanksPerCoreToSpin per core, and none
// beyond.
std::chrono::microseconds choose_spin(std::optional<std::chrono::microseconds> requested, int local_ranks,
                                      int cores);

// Spinning pays only while the awaited bytes arrive within the spin. On a machine busy with other work
// (or a group that shares cores after all) the peer is often descheduled, every spin runs out, and the
// spinner only pushes the peer further back in the run queue: two 2-rank jobs at once on a 2-core machine
// already loaded by builds took 2.6 ms per 4-byte all-reduce spinning, 87 us blocking. So after a few spins
// in a row ran out, the next waits block without spinning, and each further run of misses doubles how many.
class SpinBackoff {
 public:
  static constexpr int kMissesInARow = 3;                 // that many spins in a row ran out: back off
  static constexpr std::uint32_t kLongestBackoff = 1024;  // waits

  // Whether the next wait should spin first.
  bool should_spin() {
    if (blocking_waits_left_ == 0) return true;
    --blocking_waits_left_;
    return false;
  }
  // What a spin came to: something completed while spinning, or the spin ran out.
  void record(bool completed) {
    if (completed) {
      misses_ = 0;
      next_backoff_ = 1;
      return;
    }
    if (++misses_ < kMissesInARow) return;
    misses_ = 0;
    blocking_waits_left_ = next_backoff_;
    next_backoff_ = next_backoff_ >= kLongestBackoff ? kLongestBackoff : 2 * next_backoff_;
  }

 private:
  int misses_ = 0;
  std::uint32_t blocking_waits_left_ = 0;
  std::uint32_t next_backoff_ = 1;
};

}  // namespace canopy::transport
