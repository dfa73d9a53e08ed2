// How schedules are built and checked: the step writer's dependencies and copies, partitions, the trees
// and the fold the algorithms are built from, and the simulator's checks against broken schedules.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "canopy/error.hpp"
#include "collectives/schedules/algorithms.hpp"
#include "collectives/schedules/simulator.hpp"
#include "collectives/schedules/step_writer.hpp"
#include "collectives/schedules/topology.hpp"
#include "tests/schedules/schedule_test_support.hpp"

namespace canopy::collectives {
namespace {

using schedule_tests::algorithm;
using schedule_tests::zeros;

// --- the step writer derives deps from memory --------------------------------------------------

TEST(StepWriter, ForwardingAChunkWaitsForThatChunkOnly) {
  StepWriter writer(CollectiveCall{Collective::Broadcast, 1, 3, 8, 0, 4});
  const StepIndex recv0 = writer.recv(0, data_block(0, 4), 0);
  const StepIndex recv1 = writer.recv(0, data_block(4, 4), 1);
  const StepIndex send0 = writer.send(2, data_block(0, 4), 0);
  const StepIndex send1 = writer.send(2, data_block(4, 4), 1);
  const StepIndex overwrite = writer.recv(0, data_block(2, 4), 2);  // after both sends read it
  const Schedule schedule = std::move(writer).finish();
  EXPECT_TRUE(schedule.steps[recv0].deps.empty());
  EXPECT_TRUE(schedule.steps[recv1].deps.empty());
  EXPECT_EQ(schedule.steps[send0].deps, std::vector<std::uint32_t>{recv0});
  EXPECT_EQ(schedule.steps[send1].deps, std::vector<std::uint32_t>{recv1});
  EXPECT_EQ(schedule.steps[overwrite].deps, (std::vector<std::uint32_t>{recv0, recv1, send0, send1}));
}

TEST(StepWriter, ReusesStagingSlotsAfterTheirLastUse) {
  StepWriter writer(CollectiveCall{Collective::Reduce, 0, 2, 100, 0, 10}, /*staging_slots=*/2);
  std::vector<StepIndex> steps;
  for (int c = 0; c < 4; ++c) steps.push_back(writer.recv_reduce(1, data_block(10 * c, 10), c, false));
  const Schedule schedule = std::move(writer).finish();
  EXPECT_EQ(schedule.staging_count, 20u);
  EXPECT_EQ(schedule.steps[steps[2]].staging.offset, 0u);
  EXPECT_EQ(schedule.steps[steps[3]].staging.offset, 10u);
  EXPECT_EQ(schedule.steps[steps[2]].deps, std::vector<std::uint32_t>{steps[0]});
  EXPECT_EQ(schedule.steps[steps[3]].deps, std::vector<std::uint32_t>{steps[1]});
}

TEST(WrittenRanges, MergesWhatIsWrittenAndListsTheGaps) {
  WrittenRanges written;
  using Gaps = std::vector<std::pair<std::uint64_t, std::uint64_t>>;
  EXPECT_EQ(written.missing(0, 10), (Gaps{{0, 10}}));
  written.add(2, 3);  // [2, 5)
  written.add(7, 1);  // [7, 8)
  EXPECT_EQ(written.missing(0, 10), (Gaps{{0, 2}, {5, 2}, {8, 2}}));
  EXPECT_EQ(written.missing(3, 2), Gaps{});
  EXPECT_EQ(written.missing(4, 4), (Gaps{{5, 2}}));
  written.add(5, 2);  // touches both neighbours: one range [2, 8)
  EXPECT_EQ(written.missing(0, 10), (Gaps{{0, 2}, {8, 2}}));
  written.add(0, 0);
  written.add(0, 10);
  EXPECT_EQ(written.missing(0, 10), Gaps{});
}

// Out of place, what the program has not written yet is read from Input; in place, from Data.
TEST(StepWriter, OutOfPlaceReadsTheInputUntilDataIsWritten) {
  CollectiveCall call{Collective::AllReduce, 0, 2, 8, 0, 4};
  for (bool in_place : {true, false}) {
    call.in_place = in_place;
    StepWriter writer(call);
    const StepIndex send = writer.send(1, data_block(0, 4), 0);
    const StepIndex reduce = writer.recv_reduce(1, data_block(4, 4), 0, false);
    const StepIndex forward = writer.send(1, data_block(4, 4), 1);
    const Schedule schedule = std::move(writer).finish();
    const Buffer first = in_place ? Buffer::Data : Buffer::Input;
    EXPECT_EQ(schedule.steps[send].src.buffer, first);
    EXPECT_EQ(schedule.steps[reduce].src.buffer, first);
    EXPECT_EQ(schedule.steps[reduce].src.offset, 4u);
    EXPECT_EQ(schedule.steps[reduce].dst.buffer, Buffer::Data);
    EXPECT_EQ(schedule.steps[forward].src.buffer, Buffer::Data);  // the reduced values
    EXPECT_EQ(schedule.steps[forward].deps, std::vector<std::uint32_t>{reduce});
    // Out of place, Data[0..4) was never written: finish() copies it from Input for the result.
    ASSERT_EQ(schedule.steps.size(), in_place ? 3u : 4u);
    if (!in_place) {
      const Step& copy = schedule.steps.back();
      EXPECT_EQ(copy.kind, StepKind::Copy);
      EXPECT_EQ(copy.src.buffer, Buffer::Input);
      EXPECT_EQ(copy.dst.offset, 0u);
      EXPECT_EQ(copy.dst.count, 4u);
      EXPECT_TRUE(copy.deps.empty());
    }
  }
}

// A read that straddles written and unwritten elements copies only the unwritten ones first.
TEST(StepWriter, OutOfPlaceCopiesOnlyTheUnwrittenPartOfAStraddlingRead) {
  CollectiveCall call{Collective::AllReduce, 0, 2, 8, 0, 8};
  call.in_place = false;
  StepWriter writer(call);
  const StepIndex recv = writer.recv(1, data_block(0, 3), 0);
  const StepIndex send = writer.send(1, data_block(0, 8), 1);
  const Schedule schedule = std::move(writer).finish();
  ASSERT_EQ(schedule.steps.size(), 3u);
  const Step& copy = schedule.steps[1];
  EXPECT_EQ(copy.kind, StepKind::Copy);
  EXPECT_EQ(copy.src.buffer, Buffer::Input);
  EXPECT_EQ(copy.src.offset, 3u);
  EXPECT_EQ(copy.dst.offset, 3u);
  EXPECT_EQ(copy.dst.count, 5u);
  EXPECT_EQ(recv, 0u);
  EXPECT_EQ(send, 2u);
  EXPECT_EQ(schedule.steps[send].src.buffer, Buffer::Data);
  EXPECT_EQ(schedule.steps[send].deps, (std::vector<std::uint32_t>{0, 1}));
}

// An all-gather's input is its own block of Data: sends of that block read Input at offset 0.
TEST(StepWriter, AllGatherInputStandsForTheRanksOwnBlock) {
  CollectiveCall call{Collective::AllGather, 2, 3, 5, 0, 100};
  call.in_place = false;
  StepWriter writer(call);
  writer.send(0, data_block(10, 5), 0);
  writer.recv(0, data_block(0, 5), 0);
  const Schedule schedule = std::move(writer).finish();
  EXPECT_EQ(schedule.steps[0].src.buffer, Buffer::Input);
  EXPECT_EQ(schedule.steps[0].src.offset, 0u);
  // Its own block is part of the result and was never written: one copy, of that block only.
  ASSERT_EQ(schedule.steps.size(), 3u);
  EXPECT_EQ(schedule.steps[2].kind, StepKind::Copy);
  EXPECT_EQ(schedule.steps[2].dst.offset, 10u);
  EXPECT_EQ(schedule.steps[2].dst.count, 5u);
}

// Out of place, no all-reduce copies anything on two or more ranks: every block's first send and
// first reduce read the input, and every element of the result is written by a receive or a reduce.
TEST(Schedules, OutOfPlaceAllReduceCopiesNothing) {
  for (const Algorithm& algorithm : algorithms(Collective::AllReduce)) {
    for (int p = 2; p <= 17; ++p) {
      for (std::uint64_t count : {std::uint64_t{1}, static_cast<std::uint64_t>(p + 1), std::uint64_t{1000}}) {
        for (std::uint64_t chunk : {std::uint64_t{7}, std::uint64_t{1} << 20}) {
          for (int rank = 0; rank < p; ++rank) {
            CollectiveCall call{Collective::AllReduce, rank, p, count, 0, chunk};
            call.in_place = false;
            const Schedule schedule = algorithm.build(call);
            const auto copies = std::count_if(schedule.steps.begin(), schedule.steps.end(),
                                              [](const Step& step) { return step.kind == StepKind::Copy; });
            ASSERT_EQ(copies, 0) << algorithm.name << " P=" << p << " count=" << count << " chunk=" << chunk
                                 << " rank " << rank;
          }
        }
      }
    }
  }
}

TEST(Partition, PartsCoverTheBufferAndDifferByAtMostOne) {
  for (std::uint64_t total : {0, 1, 5, 16, 17}) {
    for (int parts : {1, 3, 4, 17}) {
      std::uint64_t next = 0;
      for (int i = 0; i < parts; ++i) {
        const Block part = part_of(total, parts, i);
        EXPECT_EQ(part.offset, next);
        EXPECT_LE(part.count, total / static_cast<std::uint64_t>(parts) + 1);
        next += part.count;
      }
      EXPECT_EQ(next, total);
    }
  }
}

// --- topology ----------------------------------------------------------------------------------

// Every rank reachable from the root exactly once, parents and children agreeing.
void expect_spanning_tree(const std::vector<TreeLinks>& tree, const std::string& what) {
  const int p = static_cast<int>(tree.size());
  int roots = 0;
  std::vector<int> parent_seen(static_cast<std::size_t>(p), -1);
  for (int r = 0; r < p; ++r) {
    if (tree[static_cast<std::size_t>(r)].parent < 0) ++roots;
    for (int child : tree[static_cast<std::size_t>(r)].children) {
      ASSERT_GE(child, 0) << what;
      ASSERT_LT(child, p) << what;
      EXPECT_EQ(tree[static_cast<std::size_t>(child)].parent, r) << what << " child " << child;
      EXPECT_EQ(parent_seen[static_cast<std::size_t>(child)], -1) << what << " child " << child << " twice";
      parent_seen[static_cast<std::size_t>(child)] = r;
    }
  }
  EXPECT_EQ(roots, 1) << what;
  for (int r = 0; r < p; ++r) {
    if (tree[static_cast<std::size_t>(r)].parent >= 0) {
      EXPECT_NE(parent_seen[static_cast<std::size_t>(r)], -1) << what;
    }
  }
}

TEST(Topology, TreesSpanEverySize) {
  for (int p = 1; p <= 70; ++p) {
    std::vector<TreeLinks> binomial, heap, first, second;
    for (int r = 0; r < p; ++r) {
      binomial.push_back(binomial_tree(r, p));
      heap.push_back(heap_tree(r, p));
      first.push_back(double_tree(r, p, 0));
      second.push_back(double_tree(r, p, 1));
    }
    expect_spanning_tree(binomial, fmt::format("binomial p={}", p));
    expect_spanning_tree(heap, fmt::format("heap p={}", p));
    expect_spanning_tree(first, fmt::format("double tree 0 p={}", p));
    expect_spanning_tree(second, fmt::format("double tree 1 p={}", p));
    int depth_limit = 2 * ceil_log2(p) + 2;
    for (int r = 0; r < p; ++r) {
      EXPECT_LE(first[static_cast<std::size_t>(r)].children.size(), 2u);
      EXPECT_LE(second[static_cast<std::size_t>(r)].children.size(), 2u);
      // NCCL's property: interior in at most one of the two trees.
      EXPECT_FALSE(!first[static_cast<std::size_t>(r)].children.empty() &&
                   !second[static_cast<std::size_t>(r)].children.empty())
          << "p=" << p << " rank " << r << " is interior in both trees";
      int depth = 0;
      for (int x = r; first[static_cast<std::size_t>(x)].parent >= 0;
           x = first[static_cast<std::size_t>(x)].parent) {
        ++depth;
      }
      EXPECT_LE(depth, depth_limit) << "p=" << p;
    }
  }
}

TEST(Topology, FoldRenumbersTheRemainingRanksContiguously) {
  for (int p = 1; p <= 40; ++p) {
    const Fold fold(p);
    EXPECT_EQ(fold.pow2 + fold.extra, p);
    EXPECT_LE(fold.extra, fold.pow2 - 1 + (p == 1 ? 1 : 0));
    std::set<int> new_ranks;
    for (int r = 0; r < p; ++r) {
      if (fold.sits_out(r)) continue;
      const int v = fold.new_rank(r);
      EXPECT_EQ(fold.real_rank(v), r);
      new_ranks.insert(v);
    }
    EXPECT_EQ(static_cast<int>(new_ranks.size()), fold.pow2);
    EXPECT_EQ(fold.first_rank(0), 0);
    EXPECT_EQ(fold.first_rank(fold.pow2), p);
  }
}

// --- the simulator's checks ----------------------------------------------------------------------

void expect_protocol_error(ScheduleBuilder build, const std::string& needle) {
  const Algorithm broken{Collective::AllReduce, "broken", "a deliberately broken schedule", build};
  const CollectiveCall call{Collective::AllReduce, 0, 2, 4, 0, 4};
  try {
    simulate(broken, call, DataType::Int32, ReduceOp::Sum, zeros(call, DataType::Int32));
    ADD_FAILURE() << "no error; expected one mentioning \"" << needle << "\"";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::Protocol) << error.what();
    EXPECT_NE(std::string(error.what()).find(needle), std::string::npos) << error.what();
  }
}

TEST(SimulatorChecks, TagMismatch) {
  expect_protocol_error(
      [](const CollectiveCall& call) {
        StepWriter writer(call);
        if (call.rank == 0) writer.send(1, data_block(0, 4), 7);
        if (call.rank == 1) writer.recv(0, data_block(0, 4), 8);
        return std::move(writer).finish();
      },
      "rank 1 step 0 (Recv Data[0..4) from rank 0, tag 0x8): the next message from rank 0 is its step 0");
}

TEST(SimulatorChecks, SizeMismatch) {
  expect_protocol_error(
      [](const CollectiveCall& call) {
        StepWriter writer(call);
        if (call.rank == 0) writer.send(1, data_block(0, 4), 7);
        if (call.rank == 1) writer.recv(0, data_block(0, 3), 7);
        return std::move(writer).finish();
      },
      "with tag 0x7 and 4 elements");
}

TEST(SimulatorChecks, Deadlock) {
  expect_protocol_error(
      [](const CollectiveCall& call) {
        // Each rank receives into the block it must send first: a cycle.
        StepWriter writer(call);
        const int peer = 1 - call.rank;
        writer.recv(peer, data_block(0, 4), 1);
        writer.send(peer, data_block(0, 4), 1);
        return std::move(writer).finish();
      },
      "deadlock");
}

TEST(SimulatorChecks, MessageNeverReceived) {
  expect_protocol_error(
      [](const CollectiveCall& call) {
        StepWriter writer(call);
        if (call.rank == 0) writer.send(1, data_block(0, 4), 3);
        return std::move(writer).finish();
      },
      "rank 0 step 0 (Send Data[0..4) to rank 1, tag 0x3) was never received");
}

TEST(SimulatorChecks, BlockOutOfRange) {
  expect_protocol_error(
      [](const CollectiveCall& call) {
        StepWriter writer(call);
        if (call.rank == 0) writer.send(1, data_block(2, 4), 3);
        if (call.rank == 1) writer.recv(0, data_block(0, 4), 3);
        return std::move(writer).finish();
      },
      "outside the Data buffer of 4 elements");
}

TEST(SimulatorChecks, BadPeerAndDependency) {
  expect_protocol_error(
      [](const CollectiveCall& call) {
        StepWriter writer(call);
        writer.send(call.rank, data_block(0, 4), 3);
        return std::move(writer).finish();
      },
      "is not another rank");
  expect_protocol_error(
      [](const CollectiveCall& call) {
        Schedule schedule;
        Step step;
        step.kind = StepKind::Copy;
        step.src = data_block(0, 1);
        step.dst = data_block(1, 1);
        step.deps = {0};
        schedule.steps.push_back(step);
        (void)call;
        return schedule;
      },
      "dependency 0 is not an earlier step");
}

TEST(SimulatorChecks, InputIsReadOnlyAndOnlyOutOfPlace) {
  expect_protocol_error(
      [](const CollectiveCall& call) {
        StepWriter writer(call);
        if (call.rank == 0) writer.send(1, Block{Buffer::Input, 0, 4}, 3);
        if (call.rank == 1) writer.recv(0, data_block(0, 4), 3);
        return std::move(writer).finish();
      },
      "reads Input in an in-place call");
  expect_protocol_error(
      [](const CollectiveCall& call) {
        StepWriter writer(call);
        if (call.rank == 0) writer.send(1, data_block(0, 4), 3);
        if (call.rank == 1) writer.recv(0, Block{Buffer::Input, 0, 4}, 3);
        return std::move(writer).finish();
      },
      "it writes Input[0..4), not Data");
}

TEST(SimulatorChecks, RejectsInputsOfTheWrongSize) {
  const CollectiveCall call{Collective::AllReduce, 0, 2, 4, 0, 4};
  auto inputs = zeros(call, DataType::Int32);
  inputs[1].pop_back();
  try {
    simulate(algorithm(Collective::AllReduce, "ring"), call, DataType::Int32, ReduceOp::Sum, inputs);
    ADD_FAILURE() << "no error";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(error.what()).find("rank 1's input holds 15 bytes, expected 16"), std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace canopy::collectives
