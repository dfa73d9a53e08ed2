// Turns a rank's byte stream into whole lines that start with "[rank] ", so that the lines of several ranks
// can share one terminal without being cut into each other.
//
// Carriage returns: a program that draws a progress line rewrites it in place with "\r" (often followed by
// "\033[K", erase to the end of the line) and no newline. On a terminal, a "\r" lets what follows overwrite
// what came before on the line, so the prefixer keeps only what follows the last "\r" of a line: a finished
// line carries what the terminal would have shown, and an unfinished one is a transient line, which
// canopy-run may draw below the other output while it lasts (see StatusLine). "\r\n" is a line end.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace canopy::launcher {

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

}  // namespace canopy::launcher
