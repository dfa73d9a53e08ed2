// The collectives that move blocks (all-to-all, all-to-all-v, gather, scatter), every algorithm run by the
// simulator on every world size from 1 to 17, counts from 0 up, every root, small and large chunks, in
// place and out of place where the collective has both, every dtype: against a plain reference, exactly.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "collectives/schedules/algorithms.hpp"
#include "collectives/schedules/simulator.hpp"
#include "tests/schedules/algorithm_list.hpp"
#include "tests/support/oracle.hpp"

namespace canopy::collectives {
namespace {

constexpr std::uint64_t kLargeChunk = 1 << 20;

std::vector<const Algorithm*> movement_algorithms() {
  std::vector<const Algorithm*> all;
  for (Collective c : {Collective::AllToAll, Collective::AllToAllV, Collective::Gather, Collective::Scatter})
    for (const Algorithm& algorithm : algorithms(c)) all.push_back(&algorithm);
  return all;
}

// Rank r's calls for one case. All-to-all-v draws a count matrix with zeros in it (every third pair
// or so), so that empty blocks sit between full ones.
std::vector<CollectiveCall> calls_for(const Algorithm& algorithm, int p, std::uint64_t count, int root,
                                      std::uint64_t chunk, bool in_place, testing::Random& random) {
  CollectiveCall call{algorithm.collective, 0, p, count, root, chunk, in_place};
  std::vector<CollectiveCall> calls = every_rank(call);
  if (algorithm.collective == Collective::AllToAllV) {
    std::vector<std::vector<std::uint64_t>> matrix(static_cast<std::size_t>(p),
                                                   std::vector<std::uint64_t>(p));
    for (auto& row : matrix)
      for (auto& cell : row)
        cell = random.between(0, 2) == 0
                   ? 0
                   : static_cast<std::uint64_t>(random.between(1, static_cast<std::int64_t>(count) + 1));
    for (int r = 0; r < p; ++r) {
      auto& own = calls[static_cast<std::size_t>(r)];
      own.send_counts = matrix[static_cast<std::size_t>(r)];
      for (int j = 0; j < p; ++j)
        own.recv_counts.push_back(matrix[static_cast<std::size_t>(j)][static_cast<std::size_t>(r)]);
    }
  }
  for (CollectiveCall& own : calls)
    if (!own.input_in_data() && !(own.collective == Collective::Scatter && own.rank == own.root))
      own.in_place = false;
  return calls;
}

std::string check(const Algorithm& algorithm, std::vector<CollectiveCall> calls, DataType type,
                  testing::Random& random) {
  const CollectiveCall& call = calls[0];
  const std::string where =
      fmt::format("P={} count={} root={} chunk={} in_place={} {}", call.size, call.count, call.root,
                  call.chunk_count, calls[static_cast<std::size_t>(call.root)].in_place, to_string(type));
  try {
    const testing::MovementCase inputs = testing::movement_inputs(calls, type, random);
    const testing::Expected expected = testing::movement_reference(calls, type, inputs);
    std::vector<RankBuffers> buffers;
    for (std::size_t r = 0; r < calls.size(); ++r) buffers.push_back({inputs.data[r], inputs.input[r]});
    const Simulation simulation =
        simulate(algorithm, std::move(calls), type, ReduceOp::Sum, std::move(buffers));
    const std::string mismatch = testing::compare(expected, simulation.data, type);
    return mismatch.empty() ? "" : where + ": " + mismatch;
  } catch (const std::exception& error) {
    return where + ": " + error.what();
  }
}

std::vector<int> roots_for(const Algorithm& algorithm, int p) {
  if (algorithm.collective != Collective::Gather && algorithm.collective != Collective::Scatter) return {0};
  std::vector<int> roots;
  for (int r = 0; r < p; ++r) roots.push_back(r);
  return roots;
}

class EveryMovement : public ::testing::TestWithParam<const Algorithm*> {};

TEST_P(EveryMovement, MatchesTheReferenceOnEverySizeCountRootAndChunk) {
  const Algorithm& algorithm = *GetParam();
  testing::Random random(7);
  int cases = 0;
  for (int p = 1; p <= 17; ++p) {
    for (std::uint64_t count : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{3},
                                static_cast<std::uint64_t>(p), std::uint64_t{101}}) {
      for (std::uint64_t chunk : {std::uint64_t{1}, std::uint64_t{7}, kLargeChunk}) {
        if (chunk == 1 && count > 3) continue;  // one element a message: thousands of them
        for (int root : roots_for(algorithm, p)) {
          for (bool in_place : {false, true}) {
            auto calls = calls_for(algorithm, p, count, root, chunk, in_place, random);
            ASSERT_EQ(check(algorithm, std::move(calls), DataType::Int32, random), "") << algorithm.name;
            ++cases;
          }
        }
      }
    }
  }
  EXPECT_GT(cases, 17 * 5);
}

TEST_P(EveryMovement, MatchesTheReferenceForEveryType) {
  const Algorithm& algorithm = *GetParam();
  testing::Random random(8);
  for (int p : {1, 2, 3, 5, 8}) {
    for (DataType type : kAllDataTypes) {
      for (int root : roots_for(algorithm, p)) {
        auto calls = calls_for(algorithm, p, 9, root, 4, false, random);
        ASSERT_EQ(check(algorithm, std::move(calls), type, random), "") << algorithm.name;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Schedules, EveryMovement, ::testing::ValuesIn(movement_algorithms()),
                         [](const ::testing::TestParamInfo<const Algorithm*>& param) {
                           return testing::name_of(*param.param);
                         });

// The checks above can fail: a gather that puts block 1 where block 2 belongs is caught.
TEST(MovementCheck, ABlockInTheWrongPlaceIsCaught) {
  testing::Random random(9);
  CollectiveCall call{Collective::AllToAll, 0, 3, 2, 0, kLargeChunk, false};
  std::vector<CollectiveCall> calls = every_rank(call);
  const testing::MovementCase inputs = testing::movement_inputs(calls, DataType::Int32, random);
  const testing::Expected expected = testing::movement_reference(calls, DataType::Int32, inputs);
  testing::Buffers swapped = expected.data;
  std::swap_ranges(swapped[1].begin(), swapped[1].begin() + 8, swapped[1].begin() + 8);
  EXPECT_NE(testing::compare(expected, swapped, DataType::Int32), "");
  EXPECT_EQ(testing::compare(expected, expected.data, DataType::Int32), "");
}

}  // namespace
}  // namespace canopy::collectives
