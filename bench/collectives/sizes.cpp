#include "bench/collectives/sizes.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace canopy::bench {

std::uint64_t parse_size(const std::string& text) {
  std::size_t used = 0;
  std::uint64_t value = 0;
  try {
    value = std::stoull(text, &used);
  } catch (const std::exception&) {
    throw std::invalid_argument(fmt::format("'{}' is not a size (examples: 8, 64K, 16M, 1G)", text));
  }
  std::string suffix = text.substr(used);
  if (suffix == "K" || suffix == "k" || suffix == "KiB")
    value <<= 10;
  else if (suffix == "M" || suffix == "m" || suffix == "MiB")
    value <<= 20;
  else if (suffix == "G" || suffix == "g" || suffix == "GiB")
    value <<= 30;
  else if (!suffix.empty() && suffix != "B")
    throw std::invalid_argument(fmt::format("'{}' has an unknown suffix (use K, M or G)", text));
  return value;
}

std::string format_size(std::uint64_t bytes) {
  if (bytes >= (1ull << 30) && bytes % (1ull << 30) == 0) return fmt::format("{}G", bytes >> 30);
  if (bytes >= (1ull << 20) && bytes % (1ull << 20) == 0) return fmt::format("{}M", bytes >> 20);
  if (bytes >= (1ull << 10) && bytes % (1ull << 10) == 0) return fmt::format("{}K", bytes >> 10);
  return fmt::format("{}", bytes);
}

std::vector<std::uint64_t> size_sweep(std::uint64_t min, std::uint64_t max, std::uint64_t factor) {
  if (factor < 2) throw std::invalid_argument("the size factor (-f) must be at least 2");
  std::vector<std::uint64_t> sizes;
  for (std::uint64_t size = min; size <= max; size *= factor) {
    sizes.push_back(size);
    if (size == 0) break;
  }
  return sizes;
}

}  // namespace canopy::bench
