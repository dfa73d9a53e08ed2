#include "launcher/status_line.hpp"

#include "launcher/console.hpp"

namespace canopy::launcher {

namespace {
// Back to the line's start, erase to its end.
constexpr std::string_view kClearLine = "\r\033[K";
}  // namespace

StatusLine::StatusLine(std::function<bool(int fd)> is_terminal) : is_terminal_(std::move(is_terminal)) {}

void StatusLine::write_lines(int fd, std::string_view lines) {
  if (lines.empty()) return;
  if (source_ == kNone) {
    write_fully(fd, lines);
    return;
  }
  if (fd == fd_) {
    // One write: erase, the lines, the transient line again.
    write_fully(fd, std::string(kClearLine).append(lines).append(text_));
    return;
  }
  // Another descriptor on (most likely) the same terminal: erase there first, redraw after.
  write_fully(fd_, kClearLine);
  write_fully(fd, lines);
  write_fully(fd_, text_);
}

void StatusLine::show(int source, int fd, std::string text) {
  if (text.empty()) {
    if (source == source_) erase();
    return;
  }
  if (!is_terminal_(fd)) return;
  if (source_ != kNone && fd_ != fd) write_fully(fd_, kClearLine);
  write_fully(fd, std::string(kClearLine).append(text));
  source_ = source;
  fd_ = fd;
  text_ = std::move(text);
}

void StatusLine::erase() {
  if (source_ == kNone) return;
  write_fully(fd_, kClearLine);
  source_ = kNone;
  fd_ = -1;
  text_.clear();
}

}  // namespace canopy::launcher
