// One tiny real sweep: 2 ranks under canopy-run, small sizes, with the ceiling, JSON and a plot.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "bench/collectives/plot.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/ranks.hpp"

namespace canopy::bench {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(CanopyBenchRun, TwoRanksWithCeilingJsonAndPlot) {
  canopy::testing::TempDir dir;
  const bool plot = !find_gnuplot().empty();
  std::string command = fmt::format(
      "env CANOPY_TRANSPORT=tcp {} --nproc 2 --master-port 0 {} allreduce --algo ring,tree -b 8 -e 64K -f 32 "
      "-n "
      "2 -w 1 --ceiling "
      "--json {}/rows.json{}",
      CANOPY_RUN_PATH, CANOPY_BENCH_PATH, dir.path(),
      plot ? fmt::format(" --plot {}/rows.svg", dir.path()) : "");
  auto result = testing::run_shell(command, std::chrono::seconds(90));
  ASSERT_EQ(result.exit_code, 0) << command << "\n" << result.out;
  EXPECT_TRUE(contains(result.out, "ceiling, measured now")) << result.out;
  EXPECT_TRUE(contains(result.out, "Avg bus bandwidth")) << result.out;
  EXPECT_TRUE(contains(result.out, "transport tcp;")) << result.out;
  EXPECT_TRUE(contains(result.out, "timed: a stream of back-to-back calls")) << result.out;
  // Not a terminal: no progress line (its carriage returns would litter logs).
  EXPECT_FALSE(contains(result.out, "\r")) << result.out;

  auto rows = nlohmann::json::parse(testing::read_file(dir.path() + "/rows.json"));
  ASSERT_EQ(rows.size(), 6u) << rows.dump(1);  // 8, 256, 64K x ring, tree
  for (const auto& row : rows) {
    EXPECT_EQ(row.at("wrong"), 0) << row.dump();
    EXPECT_EQ(row.at("transport"), "tcp") << row.dump();  // CANOPY_TRANSPORT=tcp below
    EXPECT_EQ(row.at("ranks"), 2) << row.dump();
    EXPECT_GT(row.at("ceiling_busbw_gbps").get<double>(), 0) << row.dump();
    EXPECT_GT(row.at("busbw_of_ceiling").get<double>(), 0) << row.dump();
  }
  if (plot) {
    EXPECT_TRUE(contains(testing::read_file(dir.path() + "/rows.svg"), "<svg"));
  }
}

// One sweep of canopy-bench on 2 ranks with `arguments`; its output, and its --json rows.
struct Sweep {
  std::string output;
  nlohmann::json rows;
};
Sweep sweep_on_two_ranks(const std::string& arguments) {
  canopy::testing::TempDir dir;
  std::string command =
      fmt::format("env CANOPY_TRANSPORT=tcp {} --nproc 2 --master-port 0 {} {} --json {}/rows.json",
                  CANOPY_RUN_PATH, CANOPY_BENCH_PATH, arguments, dir.path());
  auto result = testing::run_shell(command, std::chrono::seconds(90));
  EXPECT_EQ(result.exit_code, 0) << command << "\n" << result.out;
  if (result.exit_code != 0) return {result.out, nlohmann::json::array()};
  return {result.out, nlohmann::json::parse(testing::read_file(dir.path() + "/rows.json"))};
}

// --min-time: -n is the least; the warm-up says how many iterations fill the window, the same on every
// rank (or the collectives would not match), and the rows say how many ran.
TEST(CanopyBenchRun, MinTimeGrowsTheIterationsToFillTheWindow) {
  const Sweep sweep = sweep_on_two_ranks("allreduce --algo ring -b 8 -e 8 -n 3 -w 2 --min-time 200");
  ASSERT_EQ(sweep.rows.size(), 1u) << sweep.rows.dump(1);
  const int iterations = sweep.rows[0].at("iterations").get<int>();
  // An 8-byte all-reduce takes well under 66 ms even under sanitizers, so 200 ms need more than 3.
  EXPECT_GT(iterations, 3) << sweep.rows.dump(1);
}

// With -w 0 no warm-up call runs: the checked call's pace sizes the window instead.
TEST(CanopyBenchRun, MinTimeWithoutWarmUpIsSizedByTheCheckedCall) {
  const Sweep sweep = sweep_on_two_ranks("allreduce --algo ring -b 8 -e 8 -n 3 -w 0 --min-time 200");
  ASSERT_EQ(sweep.rows.size(), 1u) << sweep.rows.dump(1);
  EXPECT_GT(sweep.rows[0].at("iterations").get<int>(), 3) << sweep.rows.dump(1);
  EXPECT_EQ(sweep.rows[0].at("wrong"), 0) << sweep.rows.dump(1);
}

// The calls of a size are timed in windows (--windows): the rows say how many, and how far apart they fell.
TEST(CanopyBenchRun, WindowsAndTheirSpreadReachTheRows) {
  const Sweep sweep = sweep_on_two_ranks("allreduce --algo ring -b 8 -e 64 -f 8 -n 8 -w 1 --min-time 0 --windows 4");
  EXPECT_TRUE(contains(sweep.output, "spread")) << sweep.output;
  EXPECT_TRUE(contains(sweep.output, "(1 host)")) << sweep.output;  // the layout's count
  ASSERT_EQ(sweep.rows.size(), 2u) << sweep.rows.dump(1);
  for (const auto& row : sweep.rows) {
    EXPECT_EQ(row.at("windows"), 4) << row.dump();
    EXPECT_EQ(row.at("iterations"), 8) << row.dump();
    EXPECT_GE(row.at("slowest_window_us").get<double>(), row.at("time_us").get<double>()) << row.dump();
    EXPECT_LE(row.at("fastest_window_us").get<double>(), row.at("time_us").get<double>()) << row.dump();
    EXPECT_GE(row.at("spread").get<double>(), 0) << row.dump();
  }
}

// CANOPY_DEBUG=INFO: rank 0 says where the run's time went, from the launch the caller stamped.
TEST(CanopyBenchRun, InfoPrintsWhereTheTimeWentFromTheLaunch) {
  std::string command = fmt::format(
      "env CANOPY_TRANSPORT=tcp CANOPY_DEBUG=INFO CANOPY_PROBE_LAUNCH_NS=$(date +%s%N) {} --nproc 2 --master-port 0 "
      "{} allreduce -b 4 -e 4 -n 1 -w 0",
      CANOPY_RUN_PATH, CANOPY_BENCH_PATH);
  auto result = testing::run_shell(command, std::chrono::seconds(90));
  ASSERT_EQ(result.exit_code, 0) << command << "\n" << result.out;
  for (const char* phase : {"canopy-bench: launch ", ", forming ", ", bookkeeping ", ", first call ", ", calibration ",
                            ", timed calls ", ", closing ", "s after the launch",
                            "; the last rank formed its group "})
    EXPECT_TRUE(contains(result.out, phase)) << phase << " in\n" << result.out;
}

// --latency: each call timed alone after a barrier; the header and the rows say which timing ran.
TEST(CanopyBenchRun, LatencyTimesOneCallAtATime) {
  const Sweep sweep = sweep_on_two_ranks("broadcast --algo flat -b 8 -e 8 -n 3 -w 1 --latency");
  EXPECT_TRUE(contains(sweep.output, "timed: one call at a time, after a barrier")) << sweep.output;
  ASSERT_EQ(sweep.rows.size(), 1u) << sweep.rows.dump(1);
  EXPECT_EQ(sweep.rows[0].at("timing"), "latency") << sweep.rows.dump(1);
  EXPECT_EQ(sweep.rows[0].at("wrong"), 0) << sweep.rows.dump(1);
  EXPECT_GT(sweep.rows[0].at("time_us").get<double>(), 0) << sweep.rows.dump(1);
}

// In place the result is checked where it is: in the one buffer every collective was given.
TEST(CanopyBenchRun, InPlaceResultsCheckExact) {
  std::string command = fmt::format(
      "env CANOPY_TRANSPORT=tcp {} --nproc 3 --master-port 0 {} all --algo all -b 8 -e 4K -f 512 -n 1 -w 0 "
      "--min-time 0 -c 1 --inplace",
      CANOPY_RUN_PATH, CANOPY_BENCH_PATH);
  auto result = testing::run_shell(command, std::chrono::seconds(90));
  ASSERT_EQ(result.exit_code, 0) << command << "\n" << result.out;
  EXPECT_TRUE(contains(result.out, "Avg bus bandwidth")) << result.out;
}

// On a terminal (a pseudo-terminal made by script(1)), under canopy-run: rank 0's progress line comes
// through canopy-run's prefixer as a carriage-return line, prefixed, and no other rank draws one. The
// steps are long (40 all-reduces of 2 MiB, a tenth of a second or more) as in the sweeps the line is for:
// canopy-run draws the line it finds when it reads, and a step that ends before it reads is never seen.
TEST(CanopyBenchRun, ProgressReachesTheTerminalThroughCanopyRun) {
  if (testing::run_shell("script --version").exit_code != 0) GTEST_SKIP() << "no script(1) here";
  std::string sweep = fmt::format(
      "env -u CANOPY_TRANSPORT {} --nproc 2 --master-port 0 {} allreduce --algo ring,tree -b 2M -e 2M -n 40 "
      "-w 1",
      CANOPY_RUN_PATH, CANOPY_BENCH_PATH);
  auto result = testing::run_shell(fmt::format("script -qec '{}' /dev/null < /dev/null", sweep),
                                   std::chrono::seconds(90));
  ASSERT_EQ(result.exit_code, 0) << sweep << "\n" << result.out;
  EXPECT_TRUE(contains(result.out, "\r\033[K[0] [ 1/2 ] allreduce ring 2M")) << result.out;
  EXPECT_TRUE(contains(result.out, "\r\033[K[0] [ 2/2 ] allreduce tree 2M")) << result.out;
  EXPECT_FALSE(contains(result.out, "[1] [ ")) << result.out;
  EXPECT_TRUE(contains(result.out, "Avg bus bandwidth")) << result.out;
  EXPECT_TRUE(contains(result.out, " (auto);")) << result.out;  // CANOPY_TRANSPORT unset: auto
}

TEST(CanopyBenchRun, BadArgumentsFailBeforeAnyGroupForms) {
  // No canopy-run around it: an error must come from the argument check, not from a missing group.
  auto result = testing::run_shell(std::string(CANOPY_BENCH_PATH) + " broadcast --algo ring");
  EXPECT_EQ(result.exit_code, 1) << result.out;
  EXPECT_TRUE(contains(result.out, "broadcast has no algorithm 'ring'")) << result.out;
  auto plot = testing::run_shell(std::string(CANOPY_BENCH_PATH) + " allreduce --plot out.pdf");
  EXPECT_EQ(plot.exit_code, 1) << plot.out;
  EXPECT_TRUE(contains(plot.out, ".svg or .png")) << plot.out;
}

}  // namespace
}  // namespace canopy::bench
