// Whether this process has a shared library mapped, read from /proc/self/maps: the tests of the libraries
// loaded when first used (common/shared_library.hpp) check that none is loaded before its first call.
#pragma once

#include <fstream>
#include <string>
#include <string_view>

namespace canopy::testing {

// True when a mapped file's name starts with `name` ("libibverbs.so", "libpmix.so").
inline bool library_is_mapped(std::string_view name) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    const std::size_t slash = line.rfind('/');
    if (slash != std::string::npos && std::string_view(line).substr(slash + 1).starts_with(name)) return true;
  }
  return false;
}

}  // namespace canopy::testing
