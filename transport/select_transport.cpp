#include "transport/select_transport.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/log.hpp"
#include "rendezvous/bootstrap.hpp"
#include "transport/link_mesh.hpp"
#include "transport/shm/shm_mesh.hpp"

namespace canopy::transport {
namespace {

// The first rank that cannot use verbs, and why, from a verdict ("1", or "<rank>:<reason>"); nullopt when
// every rank can.
std::optional<std::pair<int, std::string>> rank_without_verbs(const std::string& verdict, int rank, int size,
                                                              std::uint64_t comm_id) {
  if (verdict == "1") return std::nullopt;
  const std::size_t colon = verdict.find(':');
  int without = -1;
  if (colon != std::string::npos) std::from_chars(verdict.data(), verdict.data() + colon, without);
  if (without < 0 || without >= size)
    fail(ErrorCode::Protocol,
         "rank {}: rank 0's verdict on verbs for comm {} is '{}', not a rank and a reason", rank, comm_id,
         verdict);
  return std::make_pair(without, verdict.substr(colon + 1));
}

// Every rank publishes whether it can use verbs ("transport/<comm>/verbs_usable/<rank>": "1", or "0" and
// why not); rank 0 gathers them and publishes the group's verdict ("transport/<comm>/verbs_usable": "1", or
// "<rank>:<reason>" for the first rank that cannot), which every rank reads
// (rendezvous::agree_through_rank_zero: two store requests a rank, three for rank 0). Verbs only if all can.
// Returns the first rank that cannot and its reason, or nullopt.
std::optional<std::pair<int, std::string>> first_rank_without_verbs(Store& store, int rank, int size,
                                                                    const VerbsOptions& verbs) {
  const std::string reason = verbs_unavailable_reason(verbs);
  const std::string what = fmt::format("transport/{}/verbs_usable", verbs.comm_id);
  StoreUntil bounded(store, Deadline::after(verbs.connect_timeout));
  std::string answer;
  try {
    answer = rendezvous::agree_through_rank_zero(
        bounded, what, rank, size, reason.empty() ? "1" : "0" + reason,
        [](const std::vector<std::string>& verdicts) {
          for (std::size_t r = 0; r < verdicts.size(); ++r)
            if (verdicts[r] != "1")
              return fmt::format("{}:{}", r, verdicts[r].substr(verdicts[r].empty() ? 0 : 1));
          return std::string("1");
        });
  } catch (const Error& e) {
    if (e.code() != ErrorCode::Timeout) throw;
    std::vector<std::string> keys;
    for (int r = 0; r < size; ++r) keys.push_back(fmt::format("{}/{}", what, r));
    fail(ErrorCode::Timeout,
         "rank {}: choosing the transport of comm {} (CANOPY_TRANSPORT=auto) timed out: {}", rank,
         verbs.comm_id, rank == 0 ? std::string(e.what()) : why_no_agreement(store, keys, 0));
  }
  return rank_without_verbs(answer, rank, size, verbs.comm_id);
}

// The ranks of this group on this rank's host, by the layout (1 without one).
int group_ranks_on_this_host(const MeshOptions& options, int rank) {
  const auto& hosts = options.host_of_rank;
  if (hosts.size() <= static_cast<std::size_t>(rank)) return 1;
  return static_cast<int>(std::count(hosts.begin(), hosts.end(), hosts[static_cast<std::size_t>(rank)]));
}

}  // namespace

TransportKind kind_taken(TransportKind kind, const Transport& first) {
  if (kind != TransportKind::Auto) return kind;
  // With verbs links the group's verdict was "every rank can": the second mesh plans its links alike.
  if (first.name().find("verbs") != std::string_view::npos) return TransportKind::Auto;
  return first.name() == "tcp" ? TransportKind::Tcp : TransportKind::ShmTcp;  // tcp: no peer on the host
}

std::unique_ptr<Transport> connect_mesh(Store& store, int rank, int size, const MeshOptions& options,
                                        TransportKind kind, std::string_view why) {
  auto said = [&](std::string_view setting) {
    return why.empty() ? fmt::format("CANOPY_TRANSPORT={}", setting) : std::string(why);
  };
  // The meshes of one kind for every peer: said here, as connect_link_mesh says its own.
  auto one_kind = [&](std::unique_ptr<Transport> mesh, LinkKind link, const std::string& reason) {
    log::info("rank {}: transport: {} ({}): {}", rank, mesh->name(), reason,
              describe_links(plan_links(rank, size, {}, LinkChoice{.network = link})));
    return mesh;
  };
  switch (kind) {
    case TransportKind::ShmTcp:
      return connect_link_mesh(store, rank, size, LinkOptions::from(options),
                               choose_links(kind, false, 0, options.settings), said("shm+tcp"));
    case TransportKind::Tcp:
      return one_kind(connect_tcp_mesh(store, rank, size, TcpOptions::from(options)), LinkKind::Tcp,
                      said("tcp"));
    case TransportKind::Verbs:
      return one_kind(connect_verbs_mesh(store, rank, size, VerbsOptions::from(options)), LinkKind::Verbs,
                      said("verbs"));
    case TransportKind::Auto:
      break;
  }
  const VerbsOptions verbs = VerbsOptions::from(options);
  // Agreed in the ranks' records already where the communicator put it there: no request of its own.
  const auto without = options.verbs_verdict.empty()
                           ? first_rank_without_verbs(store, rank, size, verbs)
                           : rank_without_verbs(options.verbs_verdict, rank, size, verbs.comm_id);
  // Every rank of a host counts the same ranks there, so all of them make the same choice.
  const int host_ranks = group_ranks_on_this_host(options, rank);
  const LinkChoice choice = choose_links(TransportKind::Auto, !without, host_ranks, options.settings);
  std::string reason = without ? fmt::format("CANOPY_TRANSPORT=auto; rank {} cannot use verbs: {}",
                                             without->first, without->second)
                               : std::string("CANOPY_TRANSPORT=auto; every rank has an RDMA device");
  if (!choice.shared_memory)
    reason +=
        fmt::format("; {} ranks of this group on this host, more than CANOPY_SHM_MAX_RANKS={} share memory",
                    host_ranks, options.settings.shm.max_ranks);
  if (!why.empty()) reason = why;  // a second mesh of the group, as the first chose
  if (!choice.shared_memory && choice.network == LinkKind::Tcp)
    return one_kind(connect_tcp_mesh(store, rank, size, TcpOptions::from(options)), LinkKind::Tcp, reason);
  return connect_link_mesh(store, rank, size, LinkOptions::from(options), choice, reason);
}

LinkChoice choose_links(TransportKind kind, bool every_rank_has_verbs, int host_ranks,
                        const TransportSettings& settings) {
  switch (kind) {
    case TransportKind::Tcp:
      return LinkChoice{.shared_memory = false, .network = LinkKind::Tcp};
    case TransportKind::Verbs:
      return LinkChoice{.shared_memory = false, .network = LinkKind::Verbs};
    case TransportKind::ShmTcp:
    case TransportKind::Auto:
      break;
  }
  return LinkChoice{
      .shared_memory = host_may_share_memory(kind, host_ranks, settings),
      .network = kind == TransportKind::Auto && every_rank_has_verbs ? LinkKind::Verbs : LinkKind::Tcp};
}

bool host_may_share_memory(TransportKind kind, int host_ranks, const TransportSettings& settings) {
  return kind == TransportKind::ShmTcp ||
         (kind == TransportKind::Auto && host_ranks <= settings.shm.max_ranks);
}

std::unique_ptr<Transport> connect_mesh(Store& store, int rank, int size, const MeshOptions& options) {
  return connect_mesh(store, rank, size, options, options.settings.kind);
}

}  // namespace canopy::transport
