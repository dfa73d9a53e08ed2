// Keys are arbitrary bytes; error messages and logs show them quoted, escaped and cut short.
#pragma once

#include <string>
#include <string_view>

namespace canopy::rendezvous {

// 'key' with non-printable bytes as \xNN, at most `limit` bytes of the key shown.
std::string printable(std::string_view key, std::size_t limit = 120);

// The printable keys joined by ", ", at most `count` of them ("... and N more").
template <typename Keys>
std::string printable_list(const Keys& keys, std::size_t count = 8) {
  std::string out;
  std::size_t shown = 0;
  for (const auto& key : keys) {
    if (shown == count) {
      out += ", ... and " + std::to_string(keys.size() - count) + " more";
      break;
    }
    if (shown++ > 0) out += ", ";
    out += printable(key);
  }
  return out;
}

}  // namespace canopy::rendezvous
