// The loopback ceiling: measured between two real processes, and the busbw bound it implies.
#include "bench/collectives/ceiling.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "bench/collectives/cpu_speed.hpp"
#include "bench/collectives/memory_ceiling.hpp"
#include "canopy/error.hpp"
#include "tests/support/child_process.hpp"

namespace canopy::bench {
namespace {

TEST(Ceiling, BusbwBoundPerCollective) {
  // The numbers: 3.2 GB/s in all gives 1.6 with 2 ranks and 0.8 with 4 for all-reduce.
  EXPECT_DOUBLE_EQ(ceiling_busbw_gbps(Collective::AllReduce, 2, 3.2), 1.6);
  EXPECT_DOUBLE_EQ(ceiling_busbw_gbps(Collective::AllReduce, 4, 3.2), 0.8);
  EXPECT_DOUBLE_EQ(ceiling_busbw_gbps(Collective::AllGather, 4, 3.2), 0.8);
  EXPECT_DOUBLE_EQ(ceiling_busbw_gbps(Collective::Broadcast, 2, 3.2), 3.2);  // one stream carries it all
  EXPECT_DOUBLE_EQ(ceiling_busbw_gbps(Collective::Reduce, 5, 3.2), 0.8);
  EXPECT_EQ(ceiling_busbw_gbps(Collective::Barrier, 4, 3.2), 0);
  EXPECT_EQ(ceiling_busbw_gbps(Collective::AllReduce, 1, 3.2), 0);
  EXPECT_EQ(ceiling_busbw_gbps(Collective::AllReduce, 4, 0), 0);
}

TEST(Ceiling, MeasuresTwoProcessesExchanging) {
  CeilingOptions options;
  options.message_bytes = 4 << 20;
  options.repetitions = 3;
  LoopbackCeiling ceiling = measure_loopback_ceiling(options);
  EXPECT_GT(ceiling.each_way_gbps, 0);
  EXPECT_GE(ceiling.best_each_way_gbps, ceiling.each_way_gbps);
  EXPECT_DOUBLE_EQ(ceiling.aggregate_gbps(), 2 * ceiling.each_way_gbps);
}

TEST(Ceiling, RefusesAnEmptyMeasurement) {
  CeilingOptions options;
  options.message_bytes = 0;
  EXPECT_THROW(measure_loopback_ceiling(options), Error);
}

TEST(MemoryCeiling, MeasuresEveryCpuCopyingAndReducingAtOnce) {
  const MemoryRates rates = measure_memory_rates({0, 0}, {.bytes = 1 << 20, .repetitions = 2});
  EXPECT_EQ(rates.cores, 2);
  EXPECT_GT(rates.copy_gbps, 0);
  EXPECT_GT(rates.reduce_gbps, 0);
  EXPECT_THROW(measure_memory_rates({}), Error);
}

// The bound counts what the schedules do: a ring all-reduce of n bytes on P ranks makes each rank send
// 2(P-1)/P n (each copied in and out of a ring) and reduce (P-1)/P n of it, 3(P-1)n copied and (P-1)n
// reduced on the host in all.
TEST(MemoryCeiling, TheBoundIsTheAlgorithmsCopiesAndReducesAtTheRates) {
  const MemoryRates rates{2, 10.0, 5.0};
  const std::uint64_t count = 1 << 20;  // float32: 4 MiB
  const double n = 4.0 * count;
  for (int p : {2, 4}) {
    const double expected = 3 * (p - 1) * n / 10e9 + (p - 1) * n / 5e9;
    EXPECT_NEAR(memory_bound_seconds(Collective::AllReduce, "ring", p, count, 4, 1 << 20, 0, true, rates),
                expected, expected * 1e-9)
        << p << " ranks";
  }
  // A broadcast's leaves each receive n once: P-1 messages, each copied in and out.
  const double chain = 2 * 3 * n / 10e9;
  EXPECT_NEAR(memory_bound_seconds(Collective::Broadcast, "chain", 4, count, 4, 1 << 20, 0, true, rates),
              chain, chain * 1e-9);
  // By single copy, each of those messages is copied once, by its receiver; a reduction's are not.
  EXPECT_NEAR(
      memory_bound_seconds(Collective::Broadcast, "chain", 4, count, 4, 1 << 20, 0, true, rates, 64 << 10),
      chain / 2, chain * 1e-9);
  EXPECT_NEAR(
      memory_bound_seconds(Collective::AllReduce, "ring", 2, count, 4, 1 << 20, 0, true, rates, 64 << 10),
      3 * n / 10e9 + n / 5e9, n * 1e-18);
  EXPECT_EQ(
      memory_bound_seconds(Collective::AllReduce, "no such algorithm", 2, count, 4, 1 << 20, 0, true, rates),
      0);
  EXPECT_EQ(memory_bound_seconds(Collective::AllReduce, "ring", 2, count, 4, 1 << 20, 0, true, MemoryRates{}),
            0);
}

// The CPU's speed now, as compare.sh reads it: one "cpu fixed work: X ms" line per --times.
TEST(CpuSpeed, TimesTheFixedWork) {
  EXPECT_GT(fixed_work_milliseconds(), 0);
  const auto result = testing::run_shell(std::string(CANOPY_BENCH_PATH) + " cpu --times 2");
  ASSERT_EQ(result.exit_code, 0) << result.out;
  double first = 0, second = 0;
  ASSERT_EQ(
      std::sscanf(result.out.c_str(), "cpu fixed work: %lf ms\ncpu fixed work: %lf ms", &first, &second), 2)
      << result.out;
  EXPECT_GT(first, 0);
  EXPECT_GT(second, 0);
  EXPECT_NE(testing::run_shell(std::string(CANOPY_BENCH_PATH) + " cpu --times 0").exit_code, 0);
}

}  // namespace
}  // namespace canopy::bench
