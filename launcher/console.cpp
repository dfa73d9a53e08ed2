#include "launcher/console.hpp"

#include <poll.h>

#include <algorithm>
#include <cerrno>

namespace canopy::launcher {
namespace {

constexpr std::string_view kEraseToEndOfLine = "\033[K";
// Back to the line's start, erase to its end.
constexpr std::string_view kClearLine = "\r\033[K";

}  // namespace

void write_fully(int fd, std::string_view text) {
  // A sink that inherited O_NONBLOCK may refuse for a while; a full minute of refusal means nobody reads it.
  int refusals_left = 600;
  while (!text.empty()) {
    ssize_t n = ::write(fd, text.data(), text.size());
    if (n > 0) {
      text.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && refusals_left-- > 0) {
      pollfd waiter{fd, POLLOUT, 0};
      ::poll(&waiter, 1, 100);
      continue;
    }
    return;  // EPIPE, a closed descriptor, a full disk: the text is lost, the job goes on
  }
}

LinePrefixer::LinePrefixer(std::string prefix, std::size_t max_line)
    : prefix_(std::move(prefix)), max_line_(std::max<std::size_t>(max_line, 1)) {}

void LinePrefixer::feed(std::string_view bytes, std::string& out) {
  while (!bytes.empty()) {
    if (carriage_return_pending_) {
      carriage_return_pending_ = false;
      if (bytes.front() == '\n') {
        emit("\r", out);  // "\r\n": an ordinary line end, kept as it came
        bytes.remove_prefix(1);
        continue;
      }
      partial_.clear();  // overwritten on a terminal
      rewritten_ = true;
    }
    std::size_t end = bytes.find_first_of("\r\n");
    std::size_t room = max_line_ - partial_.size();
    if (end == std::string_view::npos || end > room) {
      std::size_t take = std::min(room, bytes.size());
      partial_.append(bytes.substr(0, take));
      bytes.remove_prefix(take);
      if (partial_.size() == max_line_) emit({}, out);
      continue;
    }
    if (bytes[end] == '\n') {
      emit(bytes.substr(0, end), out);
    } else {
      partial_.append(bytes.substr(0, end));
      carriage_return_pending_ = true;
    }
    bytes.remove_prefix(end + 1);
  }
}

void LinePrefixer::finish(std::string& out) {
  bool shows_something =
      rewritten_ || carriage_return_pending_ ? !visible(partial_).empty() : !partial_.empty();
  if (shows_something) emit({}, out);
  partial_.clear();
  rewritten_ = carriage_return_pending_ = false;
}

std::string LinePrefixer::transient_line() const {
  if (!rewritten_ && !carriage_return_pending_) return {};
  std::string_view shown = visible(partial_);
  return shown.empty() ? std::string() : prefix_ + std::string(shown);
}

std::string_view LinePrefixer::visible(std::string_view text) {
  if (text.starts_with(kEraseToEndOfLine)) text.remove_prefix(kEraseToEndOfLine.size());
  return text;
}

void LinePrefixer::emit(std::string_view tail, std::string& out) {
  std::string_view line = partial_;
  if (rewritten_) line = visible(line);
  out.append(prefix_).append(line).append(tail).push_back('\n');
  partial_.clear();
  rewritten_ = false;
}

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
