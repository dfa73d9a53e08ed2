// The call sequencer: calls run one at a time in ticket order, whether blocking (on the caller's thread, the
// fast path when the turn is free) or queued for the progress thread, and from any number of threads at once.
#include "collectives/call_sequencer.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

namespace canopy::collectives {
namespace {

// Counts the calls run so far and fails a call that runs out of its ticket's turn or beside another.
class TurnChecker {
 public:
  void run(std::uint64_t ticket) {
    if (inside_.exchange(true)) overlapped_ = true;
    if (ticket != ran_.load()) out_of_order_ = true;
    ran_.store(ran_.load() + 1);
    inside_.store(false);
  }
  std::uint64_t ran() const { return ran_.load(); }
  bool overlapped() const { return overlapped_.load(); }
  bool out_of_order() const { return out_of_order_.load(); }

 private:
  std::atomic<bool> inside_{false};
  std::atomic<std::uint64_t> ran_{0};
  std::atomic<bool> overlapped_{false};
  std::atomic<bool> out_of_order_{false};
};

// Runs body(t) on `count` threads at once and waits for all of them.
template <typename Body>
void on_threads(int count, Body body) {
  std::vector<std::thread> threads;
  for (int t = 0; t < count; ++t) threads.emplace_back([&body, t] { body(t); });
  for (auto& thread : threads) thread.join();
}

void expect_every_call_in_its_turn(const TurnChecker& checker, std::uint64_t calls) {
  EXPECT_EQ(checker.ran(), calls);
  EXPECT_FALSE(checker.overlapped());
  EXPECT_FALSE(checker.out_of_order());
}

TEST(CallSequencer, BlockingCallsOnOneThreadTakeTheFastPathInOrder) {
  CallSequencer sequencer;
  TurnChecker checker;
  for (int i = 0; i < 1000; ++i) sequencer.run([&](std::uint64_t ticket) { checker.run(ticket); });
  EXPECT_EQ(checker.ran(), 1000u);
  EXPECT_FALSE(checker.out_of_order());
}

TEST(CallSequencer, BlockingCallsFromManyThreadsRunOneAtATimeInTicketOrder) {
  CallSequencer sequencer;
  TurnChecker checker;
  constexpr int kThreads = 4;
  constexpr int kCalls = 5000;
  on_threads(kThreads, [&](int) {
    for (int i = 0; i < kCalls; ++i) sequencer.run([&](std::uint64_t ticket) { checker.run(ticket); });
  });
  expect_every_call_in_its_turn(checker, std::uint64_t{kThreads} * kCalls);
}

// The progress thread and blocking callers hand the turn to each other: a lost wake-up would hang this.
TEST(CallSequencer, BlockingAndAsynchronousCallsInterleavedKeepTheirOrder) {
  CallSequencer sequencer;
  TurnChecker checker;
  constexpr int kThreads = 3;
  constexpr int kRounds = 2000;
  on_threads(kThreads, [&](int t) {
    std::vector<Work> pending;
    for (int i = 0; i < kRounds; ++i) {
      if ((i + t) % 3 == 0) {
        sequencer.run([&](std::uint64_t ticket) { checker.run(ticket); });
      } else {
        pending.push_back(sequencer.submit([&](std::uint64_t ticket) { checker.run(ticket); }));
      }
      if (pending.size() > 8) {
        pending.front().wait();
        pending.erase(pending.begin());
      }
    }
    for (auto& work : pending) work.wait();
  });
  expect_every_call_in_its_turn(checker, std::uint64_t{kThreads} * kRounds);
}

TEST(CallSequencer, ABlockingCallThatThrowsPassesTheTurnOn) {
  CallSequencer sequencer;
  Work queued = sequencer.submit([](std::uint64_t) {});
  EXPECT_THROW(sequencer.run([](std::uint64_t) { throw std::runtime_error("failed call"); }),
               std::runtime_error);
  std::uint64_t next = 0;
  sequencer.run([&](std::uint64_t ticket) { next = ticket; });
  EXPECT_EQ(next, 2u);
  EXPECT_TRUE(queued.wait_for(std::chrono::seconds(10)));
}

TEST(CallSequencer, DestructionRunsWhatIsQueued) {
  std::atomic<int> ran{0};
  std::vector<Work> work;
  {
    CallSequencer sequencer;
    for (int i = 0; i < 100; ++i) work.push_back(sequencer.submit([&](std::uint64_t) { ++ran; }));
  }
  EXPECT_EQ(ran.load(), 100);
  for (auto& w : work) EXPECT_TRUE(w.completed());
}

}  // namespace
}  // namespace canopy::collectives
