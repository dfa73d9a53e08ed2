// The tracer's text and SVG views of a simulated collective.
#include "bench/collectives/tracer.hpp"

#include <gtest/gtest.h>

#include "collectives/schedules/algorithms.hpp"
#include "collectives/schedules/simulator.hpp"

namespace canopy::bench {

using namespace canopy::collectives;
namespace {

Simulation run(Collective collective, std::string_view name, const CollectiveCall& call,
               const LinkModel& model) {
  std::vector<std::vector<std::byte>> inputs(static_cast<std::size_t>(call.size),
                                             std::vector<std::byte>(call.data_count() * 4));
  return simulate(*find_algorithm(collective, name), call, DataType::Float32, ReduceOp::Sum, inputs, model);
}

std::size_t occurrences(const std::string& text, const std::string& needle) {
  std::size_t count = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++count;
  return count;
}

TEST(Tracer, TextShowsWhoSendsWhatToWhomRoundByRound) {
  const CollectiveCall call{Collective::Broadcast, 0, 4, 8, 0, 1 << 20};
  const Simulation simulation = run(Collective::Broadcast, "binomial", call, LinkModel{1e-6, 1e-9, 0});
  const std::string text = trace_text(simulation, call);
  EXPECT_NE(text.find("broadcast on 4 ranks, 8 elements, root 0"), std::string::npos) << text;
  EXPECT_NE(text.find("3 messages in 2 rounds"), std::string::npos) << text;
  EXPECT_NE(text.find("round 1: 0 -> 2 [0..8)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("round 2: 0 -> 1 [0..8), 2 -> 3 [0..8)\n"), std::string::npos) << text;
}

// A binomial gather to root 2 of 5 ranks: leaves send their input, a subtree that wraps past the last rank
// reaches the root as two messages.
TEST(Tracer, TextShowsAGatherMovingSubtrees) {
  const CollectiveCall call{Collective::Gather, 0, 5, 1, 2, 1 << 20, false};
  std::vector<std::vector<std::byte>> inputs;  // the root's Data, every other rank's Input
  for (const CollectiveCall& own : every_rank(call))
    inputs.emplace_back((own.input_in_data() ? own.data_count() : own.input_count()) * 4);
  const Simulation simulation = simulate(*find_algorithm(Collective::Gather, "binomial"), call,
                                         DataType::Float32, ReduceOp::Sum, inputs, LinkModel{1e-6, 1e-9, 0});
  const std::string text = trace_text(simulation, call);
  EXPECT_NE(text.find("5 messages"), std::string::npos) << text;
  EXPECT_NE(text.find("round 1: 0 -> 4 input[0..1), 1 -> 2 input[0..1)\n"), std::string::npos) << text;
  EXPECT_EQ(occurrences(text, "4 -> 2 staging"), 2u) << text;
}

// Out of place, the first round of a ring goes straight from each rank's input; later rounds forward
// what was reduced into Data.
TEST(Tracer, TextShowsMessagesReadStraightFromTheInput) {
  CollectiveCall call{Collective::AllReduce, 0, 4, 8, 0, 1 << 20};
  call.in_place = false;
  const std::string text = trace_text(run(Collective::AllReduce, "ring", call, LinkModel{}), call);
  EXPECT_NE(
      text.find("round 1: 0 -> 1 input[0..2), 1 -> 2 input[2..4), 2 -> 3 input[4..6), 3 -> 0 input[6..8)\n"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("round 2: 0 -> 1 [6..8), "), std::string::npos) << text;
}

TEST(Tracer, TextWrapsLongRoundsAndNamesSignals) {
  const CollectiveCall call{Collective::Barrier, 0, 16, 0, 0, 1};
  const std::string text = trace_text(run(Collective::Barrier, "dissemination", call, LinkModel{}), call);
  EXPECT_NE(text.find("round 4: "), std::string::npos) << text;
  EXPECT_EQ(text.find("round 5"), std::string::npos) << text;
  EXPECT_NE(text.find("15 -> 7 signal"), std::string::npos) << text;
  for (std::size_t start = 0, end; (end = text.find('\n', start)) != std::string::npos; start = end + 1) {
    EXPECT_LE(end - start, 110u) << text;
  }
}

TEST(Tracer, SvgDrawsOneArrowPerMessageAndOneLanePerRank) {
  const CollectiveCall call{Collective::AllReduce, 0, 5, 40, 0, 4};
  const Simulation simulation = run(Collective::AllReduce, "ring", call, LinkModel{1e-6, 1e-9, 1e-10});
  const std::string svg = trace_svg(simulation, call);
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_NE(svg.find("</svg>\n"), std::string::npos);
  EXPECT_EQ(occurrences(svg, "marker-end=\"url(#head)\""), simulation.transfers.size());
  EXPECT_EQ(occurrences(svg, ">rank "), 5u);
  EXPECT_NE(svg.find("<title>0 -&gt; 1 [0..4)"), std::string::npos);  // escaped
  EXPECT_EQ(svg.find("->"), std::string::npos);
}

// On hosts, lanes sit host after host on alternating bands named by host, whatever the rank numbers.
TEST(Tracer, SvgGroupsLanesByHost) {
  CollectiveCall call{Collective::AllReduce, 0, 4, 8, 0, 4};
  HostLayout hosts;
  hosts.host_of_rank = {0, 1, 0, 1};
  hosts.cores_of_host = {8, 8};
  call.hosts = std::make_shared<const HostLayout>(hosts);
  const std::string svg = trace_svg(run(Collective::AllReduce, "two-level", call, LinkModel{}), call);
  EXPECT_EQ(occurrences(svg, ">host "), 2u);
  // Rank 2 shares host 0 with rank 0: it takes the second lane (labels 36 apart from 62), rank 1 the third.
  EXPECT_NE(svg.find("y=\"98\">rank 2<"), std::string::npos) << svg;
  EXPECT_NE(svg.find("y=\"134\">rank 1<"), std::string::npos) << svg;
}

TEST(Tracer, SvgFallsBackToRoundsWhenTheModelIsFree) {
  const CollectiveCall call{Collective::Barrier, 0, 3, 0, 0, 1};
  const std::string svg =
      trace_svg(run(Collective::Barrier, "dissemination", call, LinkModel{0, 0, 0}), call);
  EXPECT_NE(svg.find(">round 2</text>"), std::string::npos) << svg;
}

TEST(Tracer, FormatsSecondsForPeople) {
  EXPECT_EQ(format_seconds(0), "0 s");
  EXPECT_EQ(format_seconds(35), "35 s");
  EXPECT_EQ(format_seconds(12.5e-6), "12.5 us");
  EXPECT_EQ(format_seconds(3.25e-3), "3.25 ms");
}

}  // namespace
}  // namespace canopy::bench
