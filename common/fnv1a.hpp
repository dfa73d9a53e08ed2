// FNV-1a, 64 bits: a short, stable digest of a few bytes (a name, a key). Not for anything an adversary
// chooses: collisions are easy to make on purpose, so a user of it checks what it digested where that
// matters.
#pragma once

#include <cstdint>
#include <string_view>

namespace canopy {

constexpr std::uint64_t fnv1a64(std::string_view bytes, std::uint64_t seed = 0) {
  std::uint64_t digest = 14695981039346656037ull ^ seed;
  for (char c : bytes) {
    digest ^= static_cast<unsigned char>(c);
    digest *= 1099511628211ull;
  }
  return digest;
}

}  // namespace canopy
