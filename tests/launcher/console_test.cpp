// The launcher's terminal side: the "[rank] " prefixer, and the transient line below canopy-run's output,
// kept under other lines on a terminal, never written elsewhere. Pipes stand in for the terminal (the test
// tells StatusLine which descriptor "is" one).
#include "launcher/console.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <string>

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

// A pipe whose read end returns what was written so far.
class Pipe {
 public:
  Pipe() { EXPECT_EQ(::pipe2(fds_.data(), O_NONBLOCK), 0); }
  ~Pipe() {
    ::close(fds_[0]);
    ::close(fds_[1]);
  }
  int write_end() const { return fds_[1]; }
  std::string take() {
    std::string text;
    std::array<char, 4096> buffer;
    for (ssize_t n; (n = ::read(fds_[0], buffer.data(), buffer.size())) > 0;)
      text.append(buffer.data(), static_cast<std::size_t>(n));
    return text;
  }

 private:
  std::array<int, 2> fds_{-1, -1};
};

TEST(StatusLine, WritesLinesUntouchedWhileNothingIsShown) {
  Pipe terminal;
  StatusLine status([&](int fd) { return fd == terminal.write_end(); });
  status.write_lines(terminal.write_end(), "[1] hello\n");
  EXPECT_EQ(terminal.take(), "[1] hello\n");
}

TEST(StatusLine, KeepsTheTransientLineBelowOtherLines) {
  Pipe terminal;
  StatusLine status([&](int fd) { return fd == terminal.write_end(); });
  status.show(1, terminal.write_end(), "[0] [ 1/4 ] ring 8");
  EXPECT_EQ(terminal.take(), "\r\033[K[0] [ 1/4 ] ring 8");
  status.write_lines(terminal.write_end(), "[1] a line\n");
  EXPECT_EQ(terminal.take(), "\r\033[K[1] a line\n[0] [ 1/4 ] ring 8");
  status.show(1, terminal.write_end(), "");  // the rank erased its line
  EXPECT_EQ(terminal.take(), "\r\033[K");
  status.write_lines(terminal.write_end(), "[0] row\n");
  EXPECT_EQ(terminal.take(), "[0] row\n");
}

// Rank 0's table rows come on stdout while its progress line lives on stderr: both on one terminal.
TEST(StatusLine, ErasesOnItsOwnDescriptorBeforeLinesOnAnother) {
  Pipe out, err;
  StatusLine status([](int) { return true; });
  status.show(1, err.write_end(), "[0] progress");
  err.take();
  status.write_lines(out.write_end(), "[0] row\n");
  EXPECT_EQ(out.take(), "[0] row\n");
  EXPECT_EQ(err.take(), "\r\033[K[0] progress");  // erased, then drawn again below the row
}

TEST(StatusLine, AnotherSourcesEmptyTextDoesNotEraseIt) {
  Pipe terminal;
  StatusLine status([](int) { return true; });
  status.show(1, terminal.write_end(), "[0] progress");
  status.show(3, terminal.write_end(), "");
  EXPECT_EQ(terminal.take(), "\r\033[K[0] progress");
  status.erase();
  EXPECT_EQ(terminal.take(), "\r\033[K");
  status.erase();  // nothing shown: nothing written
  EXPECT_EQ(terminal.take(), "");
}

TEST(StatusLine, NeverDrawsOnAPipeOrAFile) {
  Pipe file;
  StatusLine status([](int) { return false; });
  status.show(1, file.write_end(), "[0] progress");
  status.write_lines(file.write_end(), "[0] row\n");
  EXPECT_EQ(file.take(), "[0] row\n");
}

}  // namespace
}  // namespace canopy::launcher
