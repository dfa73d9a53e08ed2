#include "transport/tcp/ring_queue.hpp"

#include <gtest/gtest.h>

#include <string>

namespace canopy::transport {
namespace {

// A rank holds these queues for every peer, most of which never see a message: no slots before a push.
TEST(RingQueue, HoldsNoSlotsUntilItsFirstPush) {
  RingQueue<std::string> queue(5);
  EXPECT_TRUE(queue.empty());
  EXPECT_EQ(queue.capacity(), 0u);
  queue.push_back("first");
  EXPECT_EQ(queue.capacity(), 8u);  // the capacity asked for, rounded up to a power of two
  EXPECT_EQ(queue.front(), "first");
}

TEST(RingQueue, KeepsItsOrderAcrossGrowthAndWrapping) {
  RingQueue<int> queue(2);
  int next_in = 0, next_out = 0;
  for (int round = 0; round < 50; ++round) {
    for (int i = 0; i < round % 7 + 1; ++i) queue.push_back(next_in++);
    for (int i = 0; i < round % 5 && !queue.empty(); ++i) {
      EXPECT_EQ(queue.front(), next_out++);
      queue.pop_front();
    }
  }
  EXPECT_EQ(queue.size(), static_cast<std::size_t>(next_in - next_out));
  const std::size_t grown = queue.capacity();
  queue.clear();
  EXPECT_TRUE(queue.empty());
  EXPECT_EQ(queue.capacity(), grown);  // cleared, it keeps its slots for the next burst
}

}  // namespace
}  // namespace canopy::transport
