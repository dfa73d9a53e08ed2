// Message sizes as people type them: 8, 64K, 16M, 1G (powers of 1024).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace canopy::bench {

// Throws std::invalid_argument with the offending text.
std::uint64_t parse_size(const std::string& text);
std::string format_size(std::uint64_t bytes);
// min, min*factor, ... up to and including max (nccl-tests' -b -e -f).
std::vector<std::uint64_t> size_sweep(std::uint64_t min, std::uint64_t max, std::uint64_t factor);

}  // namespace canopy::bench
