#include "transport/link_kinds.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace canopy::transport {

std::vector<LinkKind> plan_links(int rank, int size, const std::vector<int>& host_of_rank,
                                 const LinkChoice& choice) {
  const bool layout = host_of_rank.size() == static_cast<std::size_t>(size);
  std::vector<LinkKind> kinds(static_cast<std::size_t>(size), choice.network);
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank)
      kinds[peer] = LinkKind::Self;
    else if (choice.shared_memory && layout && host_of_rank[peer] == host_of_rank[rank])
      kinds[peer] = LinkKind::SharedMemory;
  }
  return kinds;
}

std::vector<int> ranks_of_kind(const std::vector<LinkKind>& kinds, LinkKind kind) {
  std::vector<int> ranks;
  for (std::size_t r = 0; r < kinds.size(); ++r)
    if (kinds[r] == kind) ranks.push_back(static_cast<int>(r));
  return ranks;
}

std::string mesh_name(const std::vector<LinkKind>& kinds, bool tcp_part) {
  auto uses = [&](LinkKind kind) { return std::find(kinds.begin(), kinds.end(), kind) != kinds.end(); };
  const std::string network = uses(LinkKind::Verbs)               ? "verbs"
                              : (tcp_part || uses(LinkKind::Tcp)) ? "tcp"
                                                                  : "";
  if (!uses(LinkKind::SharedMemory)) return network.empty() ? "tcp" : network;
  return network.empty() ? "shm" : "shm+" + network;
}

std::string rank_runs(const std::vector<int>& ranks) {
  std::string text;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t end = i + 1;
    while (end < ranks.size() && ranks[end] == ranks[end - 1] + 1) ++end;
    if (!text.empty()) text += ',';
    text += end - i == 1 ? fmt::format("{}", ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[end - 1]);
    i = end;
  }
  return text;
}

std::string describe_links(const std::vector<LinkKind>& kinds) {
  std::string text;
  for (const auto& [kind, what, where] :
       {std::tuple{LinkKind::SharedMemory, "shared memory", " of this host"},
        std::tuple{LinkKind::Verbs, "verbs", ""}, std::tuple{LinkKind::Tcp, "TCP", ""}}) {
    const std::vector<int> ranks = ranks_of_kind(kinds, kind);
    if (ranks.empty()) continue;
    if (!text.empty()) text += ", ";
    text += fmt::format("{} with rank{} {}{}", what, ranks.size() == 1 ? "" : "s", rank_runs(ranks), where);
  }
  return text.empty() ? "no peers" : text;
}

}  // namespace canopy::transport
