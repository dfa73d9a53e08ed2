// The physical ceiling of a benchmark on one machine: how fast two processes can exchange data both
// ways at once over loopback TCP. On one host the kernel's copies, not the algorithm, bound large
// transfers, and the whole machine shares that capacity, so it caps every collective's busbw.
#pragma once

#include <chrono>
#include <cstddef>

#include "canopy/types.hpp"

namespace canopy::bench {

struct CeilingOptions {
  std::size_t message_bytes = 64 << 20;  // each way, per repetition
  int repetitions = 5;                   // timed, after one untimed warm-up
  std::chrono::seconds timeout{60};      // for the whole measurement
};

struct LoopbackCeiling {
  double each_way_gbps = 0;  // median over repetitions, 10^9 bytes per second
  double best_each_way_gbps = 0;
  // Bytes per second the machine moves through loopback in total (both directions).
  double aggregate_gbps() const { return 2 * each_way_gbps; }
};

// Forks one child process (it only uses sockets and memory allocated before the fork, then _exits,
// so it is safe from a process with threads) and exchanges `message_bytes` both ways at once over a
// 127.0.0.1 TCP connection with poll()-driven non-blocking writes of up to the whole message.
// Throws canopy::Error (System, Timeout, PeerFailed) naming what failed.
LoopbackCeiling measure_loopback_ceiling(const CeilingOptions& options = {});

// The highest busbw (GB/s) a collective can reach on `ranks` ranks of one host whose loopback moves
// `aggregate_gbps` in total: busbw at the time it takes to push the fewest bytes the collective must
// move through the machine (all-reduce 2(p-1)n, all-gather / reduce-scatter (p-1)n, broadcast /
// reduce (p-1)n). All-reduce: aggregate / p; broadcast: aggregate / (p-1). 0 when it does not apply
// (barrier, one rank).
double ceiling_busbw_gbps(Collective collective, int ranks, double aggregate_gbps);

}  // namespace canopy::bench
