// When a transport's progress() should busy-poll (its sockets, its completion queue) before it blocks, and
// for how long: the same rule for every transport.
//
// Busy-polling saves the wake-up of a blocked process (several microseconds on loopback, more than the
// message itself for small ones); ours offers the core (sched_yield) between rounds, so that a peer waiting
// for it runs at once. So: spin for a bounded time unless the host's ranks outnumber its cores by more than
// spinning was measured to pay (docs/TRANSPORT.md, *Spinning*).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

namespace canopy::transport {

// Spinning was measured to pay up to 4 ranks per core; beyond that a rank blocks by default.
inline constexpr int kMostRanksPerCoreToSpin = 4;

// How long TCP spins by default: several small-message round trips on loopback, so that a collective's
// next message usually arrives while still spinning, yet short enough that a rank waiting on a slow peer
// soon gives its core back.
inline constexpr std::chrono::microseconds kDefaultSpin{50};

// How long a rank spins on its shared-memory rings by default. A look into a ring costs no syscall, and
// where ranks share cores the awaited peer often needs several turns of its core's run queue (other
// ranks' copies) before it writes: a 50 us spin runs out there, and every miss then costs a wake-up.
inline constexpr std::chrono::microseconds kDefaultMemorySpin{500};

// The spin to use: `requested` (CANOPY_SOCKET_SPIN_US, CANOPY_SHM_SPIN_US, CANOPY_IB_SPIN_US) when given;
// otherwise `default_spin` when `local_ranks` (this group's ranks on this host) are at most
// kMostRanksPerCoreToSpin per core, and none beyond.
std::chrono::microseconds choose_spin(std::optional<std::chrono::microseconds> requested, int local_ranks,
                                      int cores, std::chrono::microseconds default_spin = kDefaultSpin);

// choose_spin(), said at DEBUG: "`links` busy-poll for N us before blocking (`setting` or chosen; ...)".
std::chrono::microseconds announce_spin(std::string_view links, std::string_view setting,
                                        std::optional<std::chrono::microseconds> requested, int local_ranks,
                                        int cores, std::chrono::microseconds default_spin);

// How long a spin over memory (shared-memory rings: a look costs no syscall) keeps looking between two
// sched_yield()s: a yield is a syscall that costs more than a small message through a ring, and where every
// rank of the host has a core of its own, no peer waits for ours. Where ranks outnumber cores, 0: every
// round of looks yields, so that the peer we wait for, queued behind us, runs at once.
inline constexpr std::chrono::nanoseconds kLooksBetweenYields{1000};
std::chrono::nanoseconds looks_between_yields(int local_ranks, int cores);

// Tells the core that this thread only waits (x86 PAUSE, Arm YIELD): the sibling hyperthread runs faster.
inline void pause_briefly() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spinning pays only while the awaited bytes arrive within the spin; on a busy machine every spin runs out
// and only pushes the peer further back in the run queue (docs/TRANSPORT.md, *Spinning*). So after a few
// spins in a row ran out, the next waits block without spinning, and each further run of misses doubles how
// many.
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
