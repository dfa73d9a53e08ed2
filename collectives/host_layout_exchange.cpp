#include "collectives/host_layout_exchange.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <vector>

#include "common/error.hpp"
#include "rendezvous/bootstrap.hpp"

namespace canopy::collectives {

HostLayout exchange_host_layout(Store& store, int rank, int size, const std::string& host_id, int cores) {
  // "<cores> <host id>": the host id is last because it may hold spaces (CANOPY_HOST_ID is free text).
  const std::vector<std::string> entries =
      rendezvous::exchange_with_all_ranks(store, "layout", rank, size, fmt::format("{} {}", cores, host_id));
  HostLayout layout;
  std::map<std::string, int> host_index;
  for (int r = 0; r < size; ++r) {
    const std::string& entry = entries[static_cast<std::size_t>(r)];
    const std::size_t space = entry.find(' ');
    int their_cores = 0;
    auto parsed = std::from_chars(entry.data(), entry.data() + std::min(space, entry.size()), their_cores);
    if (space == std::string::npos || parsed.ec != std::errc{} || parsed.ptr != entry.data() + space ||
        their_cores < 1)
      fail(ErrorCode::Protocol,
           "rank {} published a malformed host entry '{}' (expected '<cores> <host id>')", r, entry);
    auto [it, added] =
        host_index.emplace(entry.substr(space + 1), static_cast<int>(layout.cores_of_host.size()));
    if (added) layout.cores_of_host.push_back(their_cores);
    int& host_cores = layout.cores_of_host[static_cast<std::size_t>(it->second)];
    host_cores = std::min(host_cores, their_cores);
    layout.host_of_rank.push_back(it->second);
  }
  return layout;
}

}  // namespace canopy::collectives
