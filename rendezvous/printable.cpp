#include "rendezvous/printable.hpp"

#include <fmt/format.h>

namespace canopy::rendezvous {

std::string printable(std::string_view key, std::size_t limit) {
  std::string out = "'";
  for (std::size_t i = 0; i < key.size() && i < limit; ++i) {
    auto c = static_cast<unsigned char>(key[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
      out.push_back(static_cast<char>(c));
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  out += "'";
  if (key.size() > limit) out += fmt::format("...({} bytes)", key.size());
  return out;
}

}  // namespace canopy::rendezvous
