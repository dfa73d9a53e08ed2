// A size timed in windows: the median window is the time, the windows' range its spread, and a large spread
// is flagged in the table (windows.hpp, report.cpp).
#include "bench/collectives/windows.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "bench/collectives/report.hpp"

namespace canopy::bench {
namespace {

TEST(Windows, SplitTheCallsEvenlyAndNeverOutnumberThem) {
  EXPECT_EQ(windows_for(20, 5), 5);
  EXPECT_EQ(windows_for(3, 5), 3);  // one call a window at most
  EXPECT_EQ(windows_for(1, 0), 1);
  int total = 0;
  for (int w = 0; w < 5; ++w) total += calls_in_window(23, 5, w);
  EXPECT_EQ(total, 23);
  EXPECT_EQ(calls_in_window(23, 5, 0), 5);
  EXPECT_EQ(calls_in_window(23, 5, 4), 4);
}

// One unlucky window (the scheduler ran something else) moves the median little and the spread much.
TEST(Windows, TheMedianWindowIsTheTimeAndTheRangeItsSpread) {
  const std::vector<std::vector<double>> seconds{{10e-6, 11e-6, 30e-6, 10e-6, 12e-6},
                                                 {12e-6, 11e-6, 32e-6, 12e-6, 10e-6}};
  const WindowSummary s = summarize_windows(seconds, {4, 4, 4, 4, 4});
  EXPECT_NEAR(s.time, 11e-6, 1e-12);  // windows' means 11, 11, 31, 11, 11
  EXPECT_NEAR(s.fastest_window, 11e-6, 1e-12);
  EXPECT_NEAR(s.slowest_window, 31e-6, 1e-12);
  EXPECT_NEAR(s.spread(), 20.0 / 11.0, 1e-9);
  EXPECT_TRUE(s.spread_is_large());
  EXPECT_NEAR(s.fastest_rank, 14.6e-6, 1e-12);
  EXPECT_NEAR(s.slowest_rank, 15.4e-6, 1e-12);
}

TEST(Windows, CloseWindowsAreNotFlagged) {
  const WindowSummary s = summarize_windows({{10e-6, 10.5e-6, 11e-6, 10.2e-6}}, {5, 5, 5, 5});
  EXPECT_NEAR(s.time, 10.35e-6, 1e-12);  // an even count: the mean of the middle two
  EXPECT_FALSE(s.spread_is_large());
}

std::string table_of(const std::vector<BenchResult>& rows) {
  std::FILE* out = std::tmpfile();
  TablePrinter table(out);
  table.header(Collective::AllReduce, RunInfo{});
  for (const auto& r : rows) table.row(r);
  table.footer();
  std::rewind(out);
  std::string text;
  for (int c; (c = std::fgetc(out)) != EOF;) text.push_back(static_cast<char>(c));
  std::fclose(out);
  return text;
}

TEST(Windows, TheTableFlagsALargeSpreadAndSaysSo) {
  BenchResult steady, noisy;
  steady.algorithm = noisy.algorithm = "ring";
  steady.time_us = noisy.time_us = 100;
  steady.spread = 0.08;
  noisy.spread = 0.9;
  noisy.spread_is_large = true;
  const std::string calm = table_of({steady});
  EXPECT_NE(calm.find(" 8 "), std::string::npos) << calm;
  EXPECT_EQ(calm.find("flagged"), std::string::npos) << calm;
  const std::string flagged = table_of({steady, noisy});
  EXPECT_NE(flagged.find(" 90!"), std::string::npos) << flagged;
  EXPECT_NE(flagged.find("# 1 of 2 rows flagged (!)"), std::string::npos) << flagged;
}

}  // namespace
}  // namespace canopy::bench
