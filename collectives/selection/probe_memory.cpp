#include "collectives/selection/probe_memory.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/error.hpp"

namespace canopy::collectives {

ProbeMemory::~ProbeMemory() {
  if (buffers_ != nullptr) ::munmap(buffers_, 2 * kBytes);
}

std::byte* ProbeMemory::map() {
  if (buffers_ != nullptr) return buffers_;
  // Mapped rather than allocated: a plan that streams less than kBytes never touches the rest.
  void* mapping = ::mmap(nullptr, 2 * kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapping == MAP_FAILED)
    fail(ErrorCode::Resource, "the start-up probe cannot map {} MiB: {}", (2 * kBytes) >> 20,
         std::strerror(errno));
  buffers_ = static_cast<std::byte*>(mapping);
  return buffers_;
}

std::span<float> ProbeMemory::sums(std::size_t count) {
  auto* floats = reinterpret_cast<float*>(map());
  std::fill(floats, floats + count, 1.0f);
  return {floats, count};
}

std::span<const float> ProbeMemory::operands(std::size_t count) {
  auto* floats = reinterpret_cast<float*>(map() + kBytes);
  std::fill(floats, floats + count, 2.0f);
  return {floats, count};
}

}  // namespace canopy::collectives
