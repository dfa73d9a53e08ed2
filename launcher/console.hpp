// canopy-run's terminal side: its own writes (whole lines in one write(), so that they never land in the
// middle of a rank's line, and a closed terminal or pipe never kills the launcher), the "[rank] " prefix on
// every line a rank prints, and the one transient line (a rank's progress line) kept below the rest.
#pragma once

#include <fmt/format.h>
#include <unistd.h>

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace canopy::launcher {

// Writes all of `text` to `fd`, retrying short writes; drops it when the reader is gone (EPIPE).
void write_fully(int fd, std::string_view text);

// "canopy-run: <message>\n" on stderr.
template <typename... Args>
void report(fmt::format_string<Args...> format, Args&&... args) {
  write_fully(STDERR_FILENO,
              fmt::format("canopy-run: {}\n", fmt::format(format, std::forward<Args>(args)...)));
}

// Turns a rank's byte stream into whole lines that start with "[rank] ", so that the lines of several ranks
// can share one terminal without being cut into each other.
//
// Carriage returns: a program that draws a progress line rewrites it in place with "\r" (often followed by
// "\033[K", erase to the end of the line) and no newline. On a terminal, a "\r" lets what follows overwrite
// what came before on the line, so the prefixer keeps only what follows the last "\r" of a line: a finished
// line carries what the terminal would have shown, and an unfinished one is a transient line, which
// canopy-run may draw below the other output while it lasts (see StatusLine). "\r\n" is a line end.
class LinePrefixer {
 public:
  // A line longer than max_line bytes is cut there, so one rank cannot make the launcher buffer without
  // bound; each piece becomes a line of its own.
  explicit LinePrefixer(std::string prefix, std::size_t max_line = 1 << 20);

  // Appends to `out` every line completed by `bytes`; keeps the unfinished tail for the next call.
  void feed(std::string_view bytes, std::string& out);
  // Appends the unfinished tail, if it shows anything, as a line of its own (the stream has ended).
  void finish(std::string& out);

  bool has_partial_line() const { return !partial_.empty() || carriage_return_pending_; }

  // The unfinished line being rewritten with carriage returns, prefixed, without a newline; "" when
  // there is none or it shows nothing (a progress line that was erased).
  std::string transient_line() const;

 private:
  void emit(std::string_view tail, std::string& out);
  // What a terminal shows of the text after a "\r": without a leading "erase to end of line".
  static std::string_view visible(std::string_view text);

  std::string prefix_;
  std::size_t max_line_;
  std::string partial_;                   // the unfinished line since its start or its last "\r"
  bool rewritten_ = false;                // the unfinished line has had a "\r"
  bool carriage_return_pending_ = false;  // the last byte was "\r": a line end if "\n" follows
};

// At most one transient line (a rank's progress line, see LinePrefixer::transient_line) kept below
// everything else canopy-run writes to a terminal: other lines first erase it and then redraw it, so
// that they never land in the middle of it. Nothing transient is ever written to a pipe or a file.
class StatusLine {
 public:
  // `is_terminal` says whether a descriptor is a terminal (isatty; tests pass their own).
  explicit StatusLine(std::function<bool(int fd)> is_terminal);

  // Writes whole lines to `fd`, below them the transient line again, if one is shown.
  void write_lines(int fd, std::string_view lines);

  // Shows `text` (one line, no newline) as the transient line of `source` (any number >= 0 naming a
  // stream) on terminal `fd`, in place of
  // whatever is shown; "" erases it if `source` drew it. Does nothing when `fd` is not a terminal.
  void show(int source, int fd, std::string text);

  // Erases the transient line (before canopy-run's own messages); a later show() draws it again.
  void erase();

 private:
  static constexpr int kNone = -1;
  std::function<bool(int)> is_terminal_;
  int source_ = kNone;  // who drew the line shown now
  int fd_ = -1;
  std::string text_;
};

}  // namespace canopy::launcher
