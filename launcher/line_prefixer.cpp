#include "launcher/line_prefixer.hpp"

#include <algorithm>

namespace canopy::launcher {

LinePrefixer::LinePrefixer(std::string prefix, std::size_t max_line)
    : prefix_(std::move(prefix)), max_line_(std::max<std::size_t>(max_line, 1)) {}

void LinePrefixer::feed(std::string_view bytes, std::string& out) {
  while (!bytes.empty()) {
    std::size_t newline = bytes.find('\n');
    if (newline == std::string_view::npos) {
      std::size_t room = max_line_ - partial_.size();
      std::size_t take = std::min(room, bytes.size());
      partial_.append(bytes.substr(0, take));
      bytes.remove_prefix(take);
      if (partial_.size() == max_line_) emit({}, out);
      continue;
    }
    emit(bytes.substr(0, newline), out);
    bytes.remove_prefix(newline + 1);
  }
}

void LinePrefixer::finish(std::string& out) {
  if (!partial_.empty()) emit({}, out);
}

void LinePrefixer::emit(std::string_view tail, std::string& out) {
  out.append(prefix_).append(partial_).append(tail).push_back('\n');
  partial_.clear();
}

}  // namespace canopy::launcher
