// Integers on the wire: little-endian, byte by byte, whatever the host's order (frames, handshakes,
// verbs control messages). Callers say `using little_endian::put, little_endian::get;`.
#pragma once

#include <cstddef>
#include <cstdint>

namespace canopy::little_endian {

template <typename T>
void put(std::byte* out, T value) {
  for (std::size_t i = 0; i < sizeof(T); ++i)
    out[i] = static_cast<std::byte>(static_cast<std::uint64_t>(value) >> (8 * i));
}

template <typename T>
T get(const std::byte* in) {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) value |= std::to_integer<std::uint64_t>(in[i]) << (8 * i);
  return static_cast<T>(value);
}

}  // namespace canopy::little_endian
