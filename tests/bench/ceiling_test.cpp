// The loopback ceiling: measured between two real processes, and the busbw bound it implies.
#include "bench/collectives/ceiling.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "bench/collectives/cpu_speed.hpp"
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

// The CPU's speed now, as compare.sh reads it: one "cpu fixed work: X ms" line per --times.
TEST(CpuSpeed, TimesTheFixedWork) {
  EXPECT_GT(fixed_work_milliseconds(), 0);
  const auto result = testing::run_shell(std::string(CANOPY_BENCH_PATH) + " cpu --times 2");
  ASSERT_EQ(result.exit_code, 0) << result.out;
  double first = 0, second = 0;
  ASSERT_EQ(
      std::sscanf(result.out.c_str(), "cpu fixed work: %lf ms\ncpu fixed work: %lf ms", &first, &second),
      2)
      << result.out;
  EXPECT_GT(first, 0);
  EXPECT_GT(second, 0);
  EXPECT_NE(testing::run_shell(std::string(CANOPY_BENCH_PATH) + " cpu --times 0").exit_code, 0);
}

}  // namespace
}  // namespace canopy::bench
