#include "launcher/line_prefixer.hpp"

#include <algorithm>

namespace canopy::launcher {

namespace {
constexpr std::string_view kEraseToEndOfLine = "\033[K";
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

}  // namespace canopy::launcher
