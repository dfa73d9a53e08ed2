// Every algorithm, run by the simulator on every world size from 1 to 17, many counts (0, tiny, around
// P, a large odd prime), every root, small and large chunks, every dtype and op, against a plain
// reference: exactly. Then bit-identical replicas for random floats after every all-reduce.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "collectives/schedules/algorithms.hpp"
#include "collectives/schedules/simulator.hpp"
#include "tests/schedules/algorithm_list.hpp"
#include "tests/support/oracle.hpp"

namespace canopy::collectives {
namespace {

using testing::Buffers;
using testing::every_algorithm;
using testing::name_of;

constexpr std::uint64_t kLargeChunk = 1 << 20;
constexpr std::uint64_t kLargeOddPrime = 10007;
// All-gather and reduce-scatter buffers hold P blocks: a smaller prime keeps them near 10^4 elements.
constexpr std::uint64_t kLargeOddPrimeBlock = 1009;
constexpr ReduceOp kOps[] = {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max};

bool reduces(Collective collective) {
  return collective == Collective::Reduce || collective == Collective::AllReduce ||
         collective == Collective::ReduceScatter;
}
bool rooted(Collective collective) {
  return collective == Collective::Broadcast || collective == Collective::Reduce;
}

// Runs one case; "" when the result matches the reference, else what went wrong.
std::string check(const Algorithm& algorithm, const CollectiveCall& call, DataType type, ReduceOp op,
                  testing::Random& random) {
  const std::string where = fmt::format("P={} count={} root={} chunk={} {} {}", call.size, call.count,
                                        call.root, call.chunk_count, to_string(type), to_string(op));
  try {
    Buffers inputs = testing::exact_inputs(call, type, op, random);
    const testing::Expected expected = testing::reference(call, type, op, inputs);
    const Simulation simulation = simulate(algorithm, call, type, op, std::move(inputs));
    const std::string mismatch = testing::compare(expected, simulation.data, type);
    return mismatch.empty() ? "" : where + ": " + mismatch;
  } catch (const std::exception& error) {
    return where + ": " + error.what();
  }
}

std::vector<std::uint64_t> counts_for(Collective collective, int p) {
  const bool blocked = collective == Collective::AllGather || collective == Collective::ReduceScatter;
  std::vector<std::uint64_t> counts{0,
                                    1,
                                    2,
                                    3,
                                    7,
                                    static_cast<std::uint64_t>(p - 1),
                                    static_cast<std::uint64_t>(p),
                                    static_cast<std::uint64_t>(p + 1),
                                    blocked ? kLargeOddPrimeBlock : kLargeOddPrime};
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  return counts;
}

std::vector<std::uint64_t> chunks_for(int p, std::uint64_t count) {
  if (count == kLargeOddPrime || count == kLargeOddPrimeBlock) {
    // One element per chunk makes ~10^5 messages: only on the smallest worlds.
    return p <= 3 ? std::vector<std::uint64_t>{1, 1000, kLargeChunk}
                  : std::vector<std::uint64_t>{1000, kLargeChunk};
  }
  return {1, 2, kLargeChunk};
}

std::vector<int> roots_for(const Algorithm& algorithm, int p, std::uint64_t count) {
  if (!rooted(algorithm.collective)) return {0};
  if (count == kLargeOddPrime) return {0, p - 1};  // the large count proves the chunking, not the roots
  if (p <= 6) {
    std::vector<int> all(static_cast<std::size_t>(p));
    for (int r = 0; r < p; ++r) all[static_cast<std::size_t>(r)] = r;
    return all;
  }
  return {0, 1, p / 2, p - 1};
}

class EveryAlgorithm : public ::testing::TestWithParam<const Algorithm*> {};

// Every P from 1 to 17, every count, chunk and root: in place (Data holds the input), or out of place
// (the input is the read-only Input buffer and Data starts as garbage).
void check_every_size_count_root_and_chunk(const Algorithm& algorithm, bool in_place) {
  testing::Random random(1);
  int cases = 0;
  for (int p = 1; p <= 17; ++p) {
    const std::vector<std::uint64_t> counts = algorithm.collective == Collective::Barrier
                                                  ? std::vector<std::uint64_t>{0}
                                                  : counts_for(algorithm.collective, p);
    for (std::uint64_t count : counts) {
      for (std::uint64_t chunk : chunks_for(p, count)) {
        for (int root : roots_for(algorithm, p, count)) {
          CollectiveCall call{algorithm.collective, 0, p, count, root, chunk, in_place};
          // An integer and a float type, each with an op whose result any order gives exactly.
          for (auto [type, op] :
               {std::pair{DataType::Int32, ReduceOp::Sum}, {DataType::Float32, ReduceOp::Prod}}) {
            const std::string failure = check(algorithm, call, type, op, random);
            ASSERT_EQ(failure, "") << algorithm.name;
            ++cases;
          }
        }
      }
    }
  }
  EXPECT_GT(cases, 17 * 2);
}

TEST_P(EveryAlgorithm, MatchesTheReferenceOnEverySizeCountRootAndChunk) {
  check_every_size_count_root_and_chunk(*GetParam(), /*in_place=*/true);
}

TEST_P(EveryAlgorithm, MatchesTheReferenceOutOfPlaceOnEverySizeCountRootAndChunk) {
  check_every_size_count_root_and_chunk(*GetParam(), /*in_place=*/false);
}

TEST_P(EveryAlgorithm, MatchesTheReferenceForEveryTypeAndOp) {
  const Algorithm& algorithm = *GetParam();
  if (algorithm.collective == Collective::Barrier) GTEST_SKIP() << "a barrier moves no data";
  testing::Random random(2);
  for (int p : {1, 2, 3, 5, 8, 13}) {
    for (std::uint64_t count :
         {std::uint64_t{0}, std::uint64_t{7}, static_cast<std::uint64_t>(p + 1), std::uint64_t{100}}) {
      for (std::uint64_t chunk : {std::uint64_t{3}, kLargeChunk}) {
        for (int root : rooted(algorithm.collective) ? std::vector<int>{0, p - 1} : std::vector<int>{0}) {
          CollectiveCall call{algorithm.collective, 0, p, count, root, chunk};
          call.in_place = (count % 2) == 0;  // half the counts out of place
          for (DataType type : kAllDataTypes) {
            for (ReduceOp op : kOps) {
              if (!reduces(algorithm.collective) && op != ReduceOp::Sum) continue;  // the op is not used
              ASSERT_EQ(check(algorithm, call, type, op, random), "") << algorithm.name;
            }
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Schedules, EveryAlgorithm, ::testing::ValuesIn(every_algorithm()),
                         [](const ::testing::TestParamInfo<const Algorithm*>& param) {
                           return name_of(*param.param);
                         });

// The same all-reduce must leave the same bits on every rank even where the evaluation order changes
// the result (random floats): each element is computed as one expression tree everywhere.
class EveryAllReduce : public ::testing::TestWithParam<const Algorithm*> {};

TEST_P(EveryAllReduce, LeavesBitIdenticalReplicasOfRandomFloats) {
  const Algorithm& algorithm = *GetParam();
  testing::Random random(3);
  for (int p = 2; p <= 17; ++p) {
    for (std::uint64_t count : {std::uint64_t{1}, std::uint64_t{33}, std::uint64_t{500}}) {
      for (std::uint64_t chunk : {std::uint64_t{7}, kLargeChunk}) {
        for (DataType type : {DataType::Float32, DataType::Float64, DataType::Float16, DataType::BFloat16}) {
          for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Prod}) {  // the order-sensitive ones
            // Out of place for the sums: the first reduce of a block reads Input (out = in + staging).
            const CollectiveCall call{Collective::AllReduce, 0, p, count, 0, chunk, op == ReduceOp::Prod};
            const Simulation simulation =
                simulate(algorithm, call, type, op, testing::random_float_inputs(call, type, random));
            for (int r = 1; r < p; ++r) {
              ASSERT_EQ(simulation.data[static_cast<std::size_t>(r)], simulation.data[0])
                  << algorithm.name << ": rank " << r << " differs from rank 0, P=" << p << " count=" << count
                  << " chunk=" << chunk << " " << to_string(type) << " " << to_string(op);
            }
          }
        }
      }
    }
  }
}

std::vector<const Algorithm*> every_all_reduce() {
  std::vector<const Algorithm*> all;
  for (const Algorithm& algorithm : algorithms(Collective::AllReduce)) all.push_back(&algorithm);
  return all;
}

INSTANTIATE_TEST_SUITE_P(Schedules, EveryAllReduce, ::testing::ValuesIn(every_all_reduce()),
                         [](const ::testing::TestParamInfo<const Algorithm*>& param) {
                           return name_of(*param.param);
                         });

// The bit-identity check above can fail: these inputs do give different sums in different orders.
TEST(BitIdentityCheck, RandomFloatSumsDependOnTheOrder) {
  testing::Random random(3);
  const CollectiveCall call{Collective::AllReduce, 0, 8, 500, 0, kLargeChunk};
  const Buffers inputs = testing::random_float_inputs(call, DataType::Float32, random);
  int differ = 0;
  for (std::size_t i = 0; i < call.count; ++i) {
    float forward = 0;
    float backward = 0;
    for (std::size_t r = 0; r < inputs.size(); ++r) {
      float a;
      float b;
      std::memcpy(&a, inputs[r].data() + i * 4, 4);
      std::memcpy(&b, inputs[inputs.size() - 1 - r].data() + i * 4, 4);
      forward += a;
      backward += b;
    }
    if (forward != backward) ++differ;
  }
  EXPECT_GT(differ, 0);
}

}  // namespace
}  // namespace canopy::collectives
