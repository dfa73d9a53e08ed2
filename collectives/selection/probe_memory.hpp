// What the start-up probes of one rank send, receive and sum (collectives/selection/link_calibration.cpp): one pair
// of buffers that every probe reuses, mapped but not touched until a probe writes them. A page a process
// touches for the first time is dear on a virtual machine: about 20 us a 4 KiB page on this 2-core one (160
// MB/s), where each probe's own fresh buffers (44 MiB a sampled rank) cost about as much as its exchanges.
// The buffers stay the stream probe's full size, larger than the caches, and on the pages a user's buffer
// has: huge pages (MADV_HUGEPAGE) took 1/20 of the faults, but moved 1 MiB between 8 ranks sharing memory
// 4-20 times faster than ordinary pages did, which no collective on a user's buffer would see.
#pragma once

#include <cstddef>
#include <span>

namespace canopy::collectives {

class ProbeMemory {
 public:
  static constexpr std::size_t kBytes = 16 << 20;  // each buffer: the stream probe's largest message

  ProbeMemory() = default;  // maps nothing until the first use: a rank outside every probe touches none
  ~ProbeMemory();
  ProbeMemory(const ProbeMemory&) = delete;
  ProbeMemory& operator=(const ProbeMemory&) = delete;

  // The first `bytes` (at most kBytes) of what is sent and of what is received into.
  std::span<const std::byte> sent(std::size_t bytes) { return std::span<const std::byte>(map(), bytes); }
  std::span<std::byte> received(std::size_t bytes) { return std::span(map() + kBytes, bytes); }
  // The gamma probe sums `count` received floats into as many sent ones.
  std::span<float> sums(std::size_t count);
  std::span<const float> operands(std::size_t count);

 private:
  std::byte* map();  // both buffers, back to back; Error(Resource) where the memory cannot be had

  std::byte* buffers_ = nullptr;  // 2 x kBytes
};

}  // namespace canopy::collectives
