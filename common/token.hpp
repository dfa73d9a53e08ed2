// Comparing job tokens, the shared secret every connection to a store or a peer presents.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string_view>

namespace canopy {

// Equal, in a time that does not depend on where the first difference lies (a stranger probing a port
// learns nothing of the token from how soon it is refused).
inline bool tokens_equal(std::string_view a, std::string_view b) {
  unsigned char difference = a.size() == b.size() ? 0 : 1;
  const std::size_t n = std::max(a.size(), b.size());
  for (std::size_t i = 0; i < n; ++i) {
    const auto x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const auto y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    difference |= static_cast<unsigned char>(x ^ y);
  }
  return difference == 0;
}

}  // namespace canopy
