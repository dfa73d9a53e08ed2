// At most one transient line (a rank's progress line, see LinePrefixer::transient_line) kept below
// everything else canopy-run writes to a terminal: other lines first erase it and then redraw it, so
// that they never land in the middle of it. Nothing transient is ever written to a pipe or a file.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace canopy::launcher {

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
