// canopy-bench trace: the schedule round by round from the simulator, as text and as SVG files.
#include <gtest/gtest.h>

#include <stdexcept>

#include "bench/collectives/trace_command.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/ranks.hpp"

namespace canopy::bench {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(Trace, BinomialBroadcastOnEightRanksTakesThreeRounds) {
  TraceSettings s;
  s.collective = "broadcast";
  s.algorithms = "binomial";
  s.ranks = 8;
  std::string text = run_trace(s);
  EXPECT_TRUE(contains(text, "7 messages in 3 rounds")) << text;
  EXPECT_TRUE(contains(text, "round 3:")) << text;
  EXPECT_FALSE(contains(text, "round 4:")) << text;
}

TEST(Trace, SeveralAlgorithmsEndWithTheirPredictionsSideBySide) {
  TraceSettings s;
  s.collective = "broadcast";
  s.algorithms = "flat,binomial";
  s.ranks = 8;
  s.count = 1250000;    // 5 MB of float32: the seed's file
  s.link_gbps = 0.001;  // 1 MB/s
  s.alpha_us = 0;
  std::string text = run_trace(s);
  // 7 x 5 s for flat, 3 x 5 s for the binomial tree: the seed's 35 s and 15 s.
  EXPECT_TRUE(contains(text, "# predicted: flat 35 s, binomial 15 s")) << text;
}

// --cores: 8 ranks on 2 cores move 2 messages at a time, so recursive doubling's 24 messages take 12 turns
// of alpha, the binomial reduce-broadcast's 14 take 9 (a reduction waits for a core that a message holds);
// with a host per rank, 3 against 6.
TEST(Trace, RanksSharingCoresMakeRecursiveDoublingSlowerThanTheTree) {
  TraceSettings s;
  s.collective = "allreduce";
  s.algorithms = "reduce-broadcast,recursive-doubling";
  s.ranks = 8;
  s.count = 2;
  s.alpha_us = 10;
  s.link_gbps = 1e6;  // bytes all but free: rounds of alpha alone
  s.reduce_gbps = 1e6;
  EXPECT_TRUE(contains(run_trace(s), "# predicted: reduce-broadcast 60 us, recursive-doubling 30 us"))
      << run_trace(s);
  s.cores = 2;
  const std::string text = run_trace(s);
  EXPECT_TRUE(contains(text, "8 ranks sharing 2 cores")) << text;
  EXPECT_TRUE(contains(text, "# predicted: reduce-broadcast 90 us, recursive-doubling 120 us")) << text;
}

// --hosts: ranks dealt round-robin to 2 hosts of 4, the network 80 times slower than the links inside: the
// ring, host-aware, crosses twice a round (messages between hosts shown as =>), and two levels send half
// of what it sends across.
TEST(Trace, HostsShowWhoIsWhereAndWhichMessagesCross) {
  TraceSettings s;
  s.collective = "allreduce";
  s.algorithms = "ring,two-level";
  s.hosts = "2x4";
  s.round_robin = true;
  s.count = 16;
  s.between_gbps = 0.025;
  s.link_gbps = 2;
  const std::string text = run_trace(s);
  EXPECT_TRUE(contains(text, "hosts 0: 0 2 4 6 | 1: 1 3 5 7")) << text;
  EXPECT_TRUE(contains(text, "112 messages in 14 rounds")) << text;
  EXPECT_TRUE(contains(text, "28 of them between hosts (=>)")) << text;
  EXPECT_TRUE(contains(text, "16 of them between hosts (=>)")) << text;
  EXPECT_TRUE(contains(text, "round 4: 0 => 1 [0..2)")) << text;
  s.hosts = "2x";
  EXPECT_THROW(run_trace(s), std::invalid_argument);
}

// Out of place, a ring's first round sends straight from each rank's input.
TEST(Trace, OutOfPlaceShowsMessagesReadFromTheInput) {
  TraceSettings s;
  s.collective = "allreduce";
  s.algorithms = "ring";
  s.ranks = 4;
  s.out_of_place = true;
  std::string text = run_trace(s);
  EXPECT_TRUE(contains(text, "round 1: 0 -> 1 input[0..2), 1 -> 2 input[2..4)")) << text;
  s.out_of_place = false;
  EXPECT_FALSE(contains(run_trace(s), "input[")) << text;
}

TEST(Trace, WritesOneSvgPerAlgorithm) {
  canopy::testing::TempDir dir;
  TraceSettings s;
  s.collective = "allreduce";
  s.algorithms = "ring,tree";
  s.ranks = 4;
  s.svg = dir.path() + "/allreduce.svg";
  std::string text = run_trace(s);
  for (const char* algo : {"ring", "tree"}) {
    std::string svg = testing::read_file(dir.path() + "/allreduce-" + algo + ".svg");
    EXPECT_EQ(svg.rfind("<svg", 0), 0u) << algo;
    EXPECT_TRUE(contains(svg, "</svg>")) << algo;
  }
  EXPECT_EQ(svg_path_for("a/b.svg", "ring", false), "a/b.svg");
  EXPECT_EQ(svg_path_for("a.b/trace", "ring", true), "a.b/trace-ring");
}

TEST(Trace, RefusesWhatCannotBeTraced) {
  TraceSettings s;
  s.ranks = 0;
  EXPECT_THROW(run_trace(s), std::invalid_argument);
  s.ranks = 4;
  s.root = 4;
  EXPECT_THROW(run_trace(s), std::invalid_argument);
  s.root = 0;
  s.algorithms = "auto";
  EXPECT_THROW(run_trace(s), std::invalid_argument);
  s.algorithms = "all";
  s.collective = "all";
  EXPECT_THROW(run_trace(s), std::invalid_argument);
}

TEST(Trace, TheCommandLine) {
  auto result =
      testing::run_shell(std::string(CANOPY_BENCH_PATH) + " trace barrier -p 5 --algo dissemination");
  EXPECT_EQ(result.exit_code, 0) << result.out;
  EXPECT_TRUE(contains(result.out, "3 rounds")) << result.out;
  auto bad = testing::run_shell(std::string(CANOPY_BENCH_PATH) + " trace allreduce --algo nosuch -p 4");
  EXPECT_EQ(bad.exit_code, 1) << bad.out;
  EXPECT_TRUE(contains(bad.out, "no algorithm 'nosuch'")) << bad.out;
}

}  // namespace
}  // namespace canopy::bench
