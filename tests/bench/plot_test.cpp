// Plots: the gnuplot script for one run and for a rank sweep, and a real drawing when gnuplot exists.
#include "bench/collectives/plot.hpp"

#include <gtest/gtest.h>

#include "canopy/error.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/ranks.hpp"

namespace canopy::bench {
namespace {

nlohmann::ordered_json row(const std::string& algo, int ranks, double bytes, double time_us) {
  return {{"collective", "allreduce"},
          {"algo", algo},
          {"bytes", bytes},
          {"ranks", ranks},
          {"time_us", time_us},
          {"busbw_gbps", bytes / time_us / 1e3}};
}

nlohmann::ordered_json one_run() {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (double bytes : {1024.0, 1048576.0}) {
    rows.push_back(row("ring", 4, bytes, bytes / 500));
    rows.push_back(row("tree", 4, bytes, bytes / 400));
  }
  rows.back()["ceiling_busbw_gbps"] = 0.8;
  return rows;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(Plot, OneRunIsBusbwAgainstSizePerAlgorithm) {
  PlotScript plot = plot_script(one_run(), "out.svg", "/data");
  EXPECT_TRUE(contains(plot.script, "set terminal svg")) << plot.script;
  EXPECT_TRUE(contains(plot.script, "set multiplot layout 1,1")) << plot.script;
  EXPECT_TRUE(contains(plot.script, "title 'ring'")) << plot.script;
  EXPECT_TRUE(contains(plot.script, "ceiling 0.80 GB/s")) << plot.script;
  ASSERT_EQ(plot.data_files.size(), 2u);
  EXPECT_EQ(plot.data_files[0].first, "/data/series0.dat");
  EXPECT_TRUE(contains(plot.data_files[0].second, "1048576 ")) << plot.data_files[0].second;
}

TEST(Plot, ARankSweepAddsTimeAgainstRanks) {
  nlohmann::ordered_json rows = one_run();
  rows.push_back(row("ring", 2, 1048576, 900));
  rows.push_back(row("ring", 8, 1024, 90));  // 8 ranks only reached 1 KiB: the common size is 1 KiB
  PlotScript plot = plot_script(rows, "out.png", "/d");
  EXPECT_TRUE(contains(plot.script, "set terminal pngcairo")) << plot.script;
  EXPECT_TRUE(contains(plot.script, "set multiplot layout 2,1")) << plot.script;
  EXPECT_TRUE(contains(plot.script, "time against the number of ranks, 1024 bytes")) << plot.script;
  EXPECT_TRUE(contains(plot.script, "'ring P=2'")) << plot.script;
}

TEST(Plot, ARankSweepAtOneSizeIsTimeAgainstRanksBesideTheModel) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (int ranks : {2, 4, 8}) {
    rows.push_back(row("ring", ranks, 5e6, 4e5 * ranks));
    rows.back()["predicted_time_us"] = 3.9e5 * ranks;
  }
  PlotScript plot = plot_script(rows, "out.svg", "/d");
  EXPECT_TRUE(contains(plot.script, "set multiplot layout 1,1")) << plot.script;
  EXPECT_TRUE(contains(plot.script, "'ring (model)'")) << plot.script;
  EXPECT_TRUE(contains(plot.script, "time (ms)")) << plot.script;
  ASSERT_EQ(plot.data_files.size(), 2u);
  EXPECT_TRUE(contains(plot.data_files[1].second, "8 3120\n")) << plot.data_files[1].second;
}

TEST(Plot, RefusesOtherFormatsAndEmptyRows) {
  EXPECT_THROW(require_plot_tools("out.pdf"), Error);
  EXPECT_THROW(plot_script(nlohmann::ordered_json::array(), "out.svg", "/d"), Error);
}

TEST(Plot, DrawsWithGnuplot) {
  if (find_gnuplot().empty()) GTEST_SKIP() << "gnuplot is not installed (apt-get install gnuplot-nox)";
  canopy::testing::TempDir dir;
  draw_plot(one_run(), dir.path() + "/busbw.svg");
  std::string svg = testing::read_file(dir.path() + "/busbw.svg");
  EXPECT_TRUE(contains(svg, "<svg")) << svg.substr(0, 200);
  EXPECT_TRUE(contains(svg, "allreduce: bus bandwidth on 4 ranks"));
}

}  // namespace
}  // namespace canopy::bench
