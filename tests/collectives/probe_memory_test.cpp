#include "collectives/selection/probe_memory.hpp"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

namespace canopy::collectives {
namespace {

// Pages of [data, data + bytes) that are resident: the ones the process has touched.
std::size_t resident_pages(const std::byte* data, std::size_t bytes) {
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> flags((bytes + page - 1) / page);
  EXPECT_EQ(::mincore(const_cast<std::byte*>(data), bytes, flags.data()), 0);
  return static_cast<std::size_t>(
      std::count_if(flags.begin(), flags.end(), [](unsigned char f) { return f & 1; }));
}

// The probe's buffers cost a page fault per page touched: none until a probe writes them, and every probe
// reuses the same bytes (what a 1 MiB exchange touched, the next one finds resident).
TEST(ProbeMemory, TouchesOnlyWhatTheProbesWriteAndReusesIt) {
  ProbeMemory memory;
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::span<std::byte> in = memory.received(ProbeMemory::kBytes);
  const std::span<const std::byte> out = memory.sent(ProbeMemory::kBytes);
  ASSERT_EQ(in.size(), ProbeMemory::kBytes);
  EXPECT_EQ(resident_pages(in.data(), in.size()), 0u);
  EXPECT_EQ(resident_pages(out.data(), out.size()), 0u);

  const std::span<float> sums = memory.sums((1 << 20) / sizeof(float));  // 1 MiB of what is sent
  EXPECT_EQ(static_cast<const void*>(sums.data()), static_cast<const void*>(out.data()));
  EXPECT_EQ(sums[0], 1.0f);
  EXPECT_EQ(resident_pages(out.data(), out.size()), (1u << 20) / page);
  std::fill(in.begin(), in.begin() + (1 << 20), std::byte{7});
  EXPECT_EQ(memory.received(1 << 20).data(), in.data());  // the same bytes again
  EXPECT_EQ(resident_pages(in.data(), in.size()), (1u << 20) / page);
  EXPECT_EQ(memory.operands(4)[3], 2.0f);
}

}  // namespace
}  // namespace canopy::collectives
