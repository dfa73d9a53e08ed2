#include "launcher/line_prefixer.hpp"

#include <gtest/gtest.h>

namespace canopy::launcher {
namespace {

TEST(LinePrefixer, PrefixesEveryCompleteLine) {
  LinePrefixer prefixer("[3] ");
  std::string out;
  prefixer.feed("one\ntwo\n", out);
  EXPECT_EQ(out, "[3] one\n[3] two\n");
  EXPECT_FALSE(prefixer.has_partial_line());
}

TEST(LinePrefixer, HoldsAPartialLineUntilItsNewlineArrives) {
  LinePrefixer prefixer("[0] ");
  std::string out;
  prefixer.feed("hel", out);
  EXPECT_EQ(out, "");
  EXPECT_TRUE(prefixer.has_partial_line());
  prefixer.feed("lo", out);
  prefixer.feed(" world\nnext", out);
  EXPECT_EQ(out, "[0] hello world\n");
  prefixer.feed("\n", out);
  EXPECT_EQ(out, "[0] hello world\n[0] next\n");
}

TEST(LinePrefixer, KeepsEmptyLines) {
  LinePrefixer prefixer("[1] ");
  std::string out;
  prefixer.feed("\n\na\n", out);
  EXPECT_EQ(out, "[1] \n[1] \n[1] a\n");
}

TEST(LinePrefixer, FinishFlushesThePartialLastLineWithANewline) {
  LinePrefixer prefixer("[2] ");
  std::string out;
  prefixer.feed("done\nno newline", out);
  prefixer.finish(out);
  EXPECT_EQ(out, "[2] done\n[2] no newline\n");
  prefixer.finish(out);  // nothing left: nothing more
  EXPECT_EQ(out, "[2] done\n[2] no newline\n");
}

TEST(LinePrefixer, CutsALineLongerThanTheLimit) {
  LinePrefixer prefixer("[0] ", 4);
  std::string out;
  prefixer.feed("abcdefghij", out);
  EXPECT_EQ(out, "[0] abcd\n[0] efgh\n");
  prefixer.feed("\n", out);
  EXPECT_EQ(out, "[0] abcd\n[0] efgh\n[0] ij\n");
}

TEST(LinePrefixer, KeepsBinaryBytesAndCarriageReturns) {
  LinePrefixer prefixer("[0] ");
  std::string out;
  prefixer.feed(std::string_view("a\0b\r\n", 5), out);
  EXPECT_EQ(out, std::string("[0] a\0b\r\n", 9));
}

}  // namespace
}  // namespace canopy::launcher
