// Which ranks share a host, and how many cores each host has: what the cost model needs to know that
// eight ranks on two cores cannot move eight messages at once.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace canopy::collectives {

struct HostLayout {
  std::vector<int> host_of_rank;   // empty: every rank on a host of its own
  std::vector<int> cores_of_host;  // indexed by host

  int host_of(int rank) const {
    return host_of_rank.empty() ? rank : host_of_rank[static_cast<std::size_t>(rank)];
  }
  int ranks_on(int host) const {
    if (host_of_rank.empty()) return 1;
    return static_cast<int>(std::count(host_of_rank.begin(), host_of_rank.end(), host));
  }
  int cores_of(int host) const {
    return cores_of_host.empty() ? 1 : cores_of_host[static_cast<std::size_t>(host)];
  }
  // Ranks outnumber cores: messages between them queue for cores (loopback is the kernel copying).
  bool shares_cores(int host) const { return ranks_on(host) > cores_of(host); }
  // The cores the bytes of a message between two ranks of `host` take: the sender's copy into the
  // socket and the receiver's copy out of it run at once, each on a core (one where the host has one).
  int cores_per_message(int host) const { return std::min(2, cores_of(host)); }
  // How many of the host's ranks take turns for each of its cores (1 where they fit).
  int ranks_per_core(int host) const { return (ranks_on(host) + cores_of(host) - 1) / cores_of(host); }
  // How many turns the ranks of `host` take when all of them move a large message at once.
  int turns_when_all_busy(int host) const {
    if (!shares_cores(host)) return 1;
    const int cores_wanted = ranks_on(host) * cores_per_message(host);
    return (cores_wanted + cores_of(host) - 1) / cores_of(host);
  }
  // The layout of a group made of `ranks` of this one (new rank i is ranks[i]): hosts renumbered in the
  // order of their first member, each keeping its cores.
  HostLayout subset(const std::vector<int>& ranks) const {
    if (host_of_rank.empty()) return {};
    HostLayout layout;
    std::vector<int> renumbered(cores_of_host.size(), -1);
    for (int rank : ranks) {
      int& host = renumbered[static_cast<std::size_t>(host_of(rank))];
      if (host < 0) {
        host = static_cast<int>(layout.cores_of_host.size());
        layout.cores_of_host.push_back(cores_of(host_of(rank)));
      }
      layout.host_of_rank.push_back(host);
    }
    return layout;
  }
  // The rank's position among the ranks of its host, by global rank.
  int local_rank_of(int rank) const {
    if (host_of_rank.empty()) return 0;
    const int host = host_of(rank);
    return static_cast<int>(std::count(host_of_rank.begin(), host_of_rank.begin() + rank, host));
  }
};

}  // namespace canopy::collectives
