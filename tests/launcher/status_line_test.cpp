// The transient line below canopy-run's output: kept under other lines on a terminal, never written
// elsewhere. Pipes stand in for the terminal (the test tells StatusLine which descriptor "is" one).
#include "launcher/status_line.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <string>

namespace canopy::launcher {
namespace {

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
