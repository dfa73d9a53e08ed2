// What a communicator keeps from call to call so that a repeated call costs little: compiled schedules, the
// cost model's choices, the flight recorder's ring. Each remembers its last answer; these tests hold the
// remembered answer to the one worked out afresh, across misses, evictions and wrap-arounds.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "collectives/selection/cost_model.hpp"
#include "collectives/flight_recorder.hpp"
#include "collectives/selection/schedule_cache.hpp"
#include "collectives/schedules/algorithms.hpp"

namespace canopy::collectives {
namespace {

const Algorithm& algorithm(Collective collective, std::string_view name) {
  const Algorithm* found = find_algorithm(collective, name);
  EXPECT_NE(found, nullptr) << name;
  return *found;
}

CollectiveCall all_reduce(std::uint64_t count) {
  return {Collective::AllReduce, 1, 4, count, 0, 1 << 18};
}

TEST(ScheduleCache, ARepeatedCallGetsTheSameScheduleAndAnotherCallItsOwn) {
  ScheduleCache cache;
  const Algorithm& ring = algorithm(Collective::AllReduce, "ring");
  const CompiledSchedule& first = cache.get(ring, all_reduce(1000));
  EXPECT_EQ(&cache.get(ring, all_reduce(1000)), &first);
  const CompiledSchedule& other = cache.get(ring, all_reduce(2000));
  EXPECT_NE(&other, &first);
  EXPECT_EQ(&cache.get(ring, all_reduce(1000)), &first);  // kept, found again after another call
  CollectiveCall out_of_place = all_reduce(1000);
  out_of_place.in_place = false;
  EXPECT_NE(&cache.get(ring, out_of_place), &first);
  EXPECT_NE(&cache.get(algorithm(Collective::AllReduce, "recursive-doubling"), all_reduce(1000)), &first);
}

TEST(ScheduleCache, ACallOnAnotherLayoutGetsItsOwnSchedule) {
  ScheduleCache cache;
  const Algorithm& ring = algorithm(Collective::AllReduce, "ring");
  CollectiveCall call = all_reduce(1000);
  call.hosts = std::make_shared<const HostLayout>(HostLayout{{0, 0, 1, 1}, {2, 2}});
  const CompiledSchedule& first = cache.get(ring, call);
  call.hosts = std::make_shared<const HostLayout>(*call.hosts);  // equal, but another layout
  EXPECT_NE(&cache.get(ring, call), &first);
}

// A one-shot call that fits the host's cells has a plan of its own, with no steps, beside the same call's
// schedule (the same algorithm, the same count: only the element size decides which route a call takes).
TEST(ScheduleCache, ACallThroughTheCellsGetsAPlanOfItsOwn) {
  ScheduleCache cache;
  const Algorithm& one_shot = algorithm(Collective::AllReduce, "one-shot");
  const CompiledSchedule& messages = cache.get(one_shot, all_reduce(1000), Route::Messages);
  const CompiledSchedule& cells = cache.get(one_shot, all_reduce(1000), Route::Cells);
  EXPECT_NE(&cells, &messages);
  EXPECT_EQ(messages.route, Route::Messages);
  EXPECT_FALSE(messages.schedule.steps.empty());
  EXPECT_EQ(cells.route, Route::Cells);
  EXPECT_TRUE(cells.schedule.steps.empty());
  EXPECT_EQ(cells.cells_call.count, 1000u);
  EXPECT_EQ(cells.cells_call.rank, 1);
  EXPECT_EQ(cells.cells_call.size, 4);
  EXPECT_EQ(&cache.get(one_shot, all_reduce(1000), Route::Cells), &cells);
  EXPECT_EQ(&cache.get(one_shot, all_reduce(1000), Route::Messages), &messages);
}

TEST(ScheduleCache, TheLastScheduleEvictedIsNeverReturned) {
  ScheduleCache cache(1);
  const Algorithm& ring = algorithm(Collective::AllReduce, "ring");
  for (int i = 0; i < 4; ++i) {
    const std::uint64_t count = 1000 + 1000 * (i % 2);
    const CompiledSchedule& compiled = cache.get(ring, all_reduce(count));
    EXPECT_EQ(compiled.schedule.steps.size(), ring.build(all_reduce(count)).steps.size());
    EXPECT_EQ(&cache.get(ring, all_reduce(count)), &compiled);
  }
}

TEST(CostModel, RemembersEachPaceAndAnswersAsAFreshModelWould) {
  const LinkModel link{10e-6, 1e-9, 1e-10};
  CostModel model(link);
  // Alternating paces, and more sizes than the model keeps (it starts over): every answer is a fresh model's.
  for (int i = 0; i < 1200; ++i) {
    const CollectiveCall call{
        Collective::Broadcast, 0, 8, static_cast<std::uint64_t>(1 + 7 * (i % 600)), 0, 1 << 20};
    for (Pace pace : {Pace::OneCall, Pace::Stream}) {
      CostModel fresh(link);
      const AlgorithmChoice& expected = fresh.choose(call, 1, pace);
      const AlgorithmChoice& got = model.choose(call, 1, pace);
      ASSERT_EQ(got.algorithm, expected.algorithm) << i;
      ASSERT_EQ(got.predicted_seconds, expected.predicted_seconds) << i;
      ASSERT_EQ(&model.choose(call, 1, pace), &got) << i;
    }
  }
}

TEST(FlightRecorder, KeepsTheLastCallsOldestFirstAndTimesOnlyTheFailedAndTheRunning) {
  FlightRecorder recorder(4);
  const auto start = std::chrono::steady_clock::now();
  for (std::uint64_t seq = 0; seq < 6; ++seq) {
    const std::size_t slot = recorder.start({seq,
                                             Collective::AllReduce,
                                             "ring",
                                             100,
                                             DataType::Float32,
                                             ReduceOp::Sum,
                                             0,
                                             FlightRecorder::State::Running,
                                             {},
                                             0},
                                            start);
    if (seq < 4) recorder.done(slot);
    if (seq == 4) recorder.failed(slot, start + std::chrono::milliseconds(1500));
  }
  const std::string dump = recorder.dump();
  EXPECT_EQ(dump.find("#0 "), std::string::npos) << dump;
  EXPECT_EQ(dump.find("#1 "), std::string::npos) << dump;
  const std::size_t done = dump.find("#2 all_reduce ring (100 x float32 sum, root 0): done");
  const std::size_t failed =
      dump.find("#4 all_reduce ring (100 x float32 sum, root 0): FAILED after 1500.0 ms");
  const std::size_t running = dump.find("#5 all_reduce ring (100 x float32 sum, root 0): RUNNING for");
  EXPECT_NE(done, std::string::npos) << dump;
  EXPECT_NE(failed, std::string::npos) << dump;
  EXPECT_NE(running, std::string::npos) << dump;
  EXPECT_LT(done, failed);
  EXPECT_LT(failed, running);
}

}  // namespace
}  // namespace canopy::collectives
