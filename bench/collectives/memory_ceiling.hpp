// The memory ceiling of ranks that share one host's memory: how fast its cores copy and reduce when all of
// them do at once, and what that allows a collective whose messages go through shared memory, where every
// byte sent is copied into a ring and copied (or reduced) out of it by the receiver.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "canopy/types.hpp"

namespace canopy::bench {

struct MemoryRates {
  int cores = 0;           // processes that ran at once, one on each of these CPUs
  double copy_gbps = 0;    // bytes copied per second by all of them together (memcpy), 10^9 B/s
  double reduce_gbps = 0;  // bytes of output per second of out = a + b over float32 (the library's kernel)
};

struct MemoryRateOptions {
  std::size_t bytes = std::size_t{32} << 20;  // per buffer: out of the caches
  int repetitions = 5;                        // timed, after one untimed; the median counts
};

// Forks one process per CPU of `cpus` (each bound to its CPU where the kernel lets it), which copy, then
// reduce, buffers of `bytes` at the same moment, repetition after repetition. The children use only memory
// mapped before the fork and _exit, so a process with threads may call this. Throws Error naming what failed.
MemoryRates measure_memory_rates(const std::vector<int>& cpus, const MemoryRateOptions& options = {});

// What the memory allows one call: the copies and reduces the algorithm's schedules make on every rank
// (a send copies into the ring, a receive out of it, a received chunk to reduce is reduced where it lies, a
// local copy copies; a message that goes by single copy, from `single_copy_bytes` up, is copied once, by its
// receiver), at the rates of all cores at once. `count`: the call's count as the communicator takes it;
// `chunk_bytes`: its pipelining chunk. Seconds; 0 where the algorithm is unknown.
double memory_bound_seconds(Collective collective, std::string_view algorithm, int ranks, std::uint64_t count,
                            std::size_t element_size, std::size_t chunk_bytes, int root, bool in_place,
                            const MemoryRates& rates, std::uint64_t single_copy_bytes = 0);

}  // namespace canopy::bench
