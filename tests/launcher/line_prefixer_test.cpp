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

// A progress line: "\r", erase to end of line, text, no newline. It never becomes a line of its own;
// the prefixer offers the latest text as the transient line, prefixed, until it is erased.
TEST(LinePrefixer, OffersACarriageReturnLineAsTransientAndEmitsNothing) {
  LinePrefixer prefixer("[0] ");
  std::string out;
  prefixer.feed("\r\033[K[ 1/4 ] allreduce ring 8", out);
  EXPECT_EQ(out, "");
  EXPECT_EQ(prefixer.transient_line(), "[0] [ 1/4 ] allreduce ring 8");
  prefixer.feed("\r\033[K[ 2/4 ] allreduce ", out);
  prefixer.feed("ring 64K", out);  // a frame may arrive in pieces
  EXPECT_EQ(prefixer.transient_line(), "[0] [ 2/4 ] allreduce ring 64K");
  prefixer.feed("\r\033[K", out);  // erased
  EXPECT_EQ(prefixer.transient_line(), "");
  prefixer.finish(out);
  EXPECT_EQ(out, "");  // nothing was left showing: nothing for the log
}

TEST(LinePrefixer, AFinishedLineKeepsWhatFollowsItsLastCarriageReturn) {
  LinePrefixer prefixer("[1] ");
  std::string out;
  prefixer.feed("10%\r50%\r100%\nnext\n", out);
  EXPECT_EQ(out, "[1] 100%\n[1] next\n");
  EXPECT_EQ(prefixer.transient_line(), "");
  EXPECT_FALSE(prefixer.has_partial_line());
}

TEST(LinePrefixer, OrdinaryPartialLinesAreNotTransient) {
  LinePrefixer prefixer("[0] ");
  std::string out;
  prefixer.feed("half a line", out);
  EXPECT_EQ(prefixer.transient_line(), "");
  prefixer.feed("\n", out);
  EXPECT_EQ(out, "[0] half a line\n");
}

// A "\r" at the end of one read may begin "\r\n" with the next: a line end, not a rewrite.
TEST(LinePrefixer, CarriageReturnNewlineSplitAcrossReadsEndsTheLine) {
  LinePrefixer prefixer("[0] ");
  std::string out;
  prefixer.feed("dos line\r", out);
  EXPECT_EQ(prefixer.transient_line(), "[0] dos line");  // until "\n" comes, a terminal shows it
  prefixer.feed("\nafter\n", out);
  EXPECT_EQ(out, "[0] dos line\r\n[0] after\n");
}

TEST(LinePrefixer, FinishKeepsTheLastProgressTextLeftShowing) {
  LinePrefixer prefixer("[2] ");
  std::string out;
  prefixer.feed("\r\033[Kstep 3/3", out);
  prefixer.finish(out);
  EXPECT_EQ(out, "[2] step 3/3\n");
  EXPECT_FALSE(prefixer.has_partial_line());
}

}  // namespace
}  // namespace canopy::launcher
