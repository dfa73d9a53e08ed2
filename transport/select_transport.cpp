#include "transport/select_transport.hpp"

#include <fmt/format.h>

#include "common/error.hpp"
#include "common/log.hpp"
#include "transport/shm/shm_mesh.hpp"

namespace canopy::transport {
namespace {

std::string verdict_key(std::uint64_t comm_id, int rank) {
  return fmt::format("transport/{}/verbs_usable/{}", comm_id, rank);
}

// Every rank publishes whether it can use verbs ("1", or "0" and why not) and reads everyone's:
// verbs only if all can. Returns the first rank that cannot and its reason, or nullopt.
std::optional<std::pair<int, std::string>> first_rank_without_verbs(Store& store, int rank, int size,
                                                                    const VerbsOptions& verbs) {
  std::string reason = verbs_unavailable_reason(verbs);
  store.set(verdict_key(verbs.comm_id, rank), reason.empty() ? "1" : "0" + reason);
  Deadline deadline = Deadline::after(verbs.connect_timeout);
  for (int peer = 0; peer < size; ++peer) {
    std::string verdict = peer == rank
                              ? (reason.empty() ? "1" : "0" + reason)
                              : store.get(verdict_key(verbs.comm_id, peer),
                                          std::chrono::duration_cast<Duration>(deadline.remaining()));
    if (verdict != "1") return std::make_pair(peer, verdict.substr(verdict.empty() ? 0 : 1));
  }
  return std::nullopt;
}

}  // namespace

TransportKind transport_kind_from(const Settings& settings) {
  const std::string& value = settings.choice("CANOPY_TRANSPORT");
  if (value == "shm+tcp") return TransportKind::ShmTcp;
  return value == "tcp" ? TransportKind::Tcp : value == "verbs" ? TransportKind::Verbs : TransportKind::Auto;
}

std::unique_ptr<Transport> connect_mesh(Store& store, int rank, int size, const MeshOptions& options,
                                        TransportKind kind) {
  switch (kind) {
    case TransportKind::ShmTcp:
      log::info("rank {}: transport: shm+tcp (CANOPY_TRANSPORT=shm+tcp)", rank);
      return connect_shm_tcp_mesh(store, rank, size, options);
    case TransportKind::Tcp:
      log::info("rank {}: transport: tcp (CANOPY_TRANSPORT=tcp)", rank);
      return connect_tcp_mesh(store, rank, size, TcpOptions::from(options));
    case TransportKind::Verbs:
      log::info("rank {}: transport: verbs (CANOPY_TRANSPORT=verbs)", rank);
      return connect_verbs_mesh(store, rank, size, VerbsOptions::from(options));
    case TransportKind::Auto:
      break;
  }
  const VerbsOptions verbs = VerbsOptions::from(options);
  if (auto without = first_rank_without_verbs(store, rank, size, verbs)) {
    log::info("rank {}: transport: shm+tcp (CANOPY_TRANSPORT=auto; rank {} cannot use verbs: {})", rank,
              without->first, without->second);
    return connect_shm_tcp_mesh(store, rank, size, options);
  }
  log::info("rank {}: transport: verbs (CANOPY_TRANSPORT=auto; every rank has an RDMA device)", rank);
  return connect_verbs_mesh(store, rank, size, verbs);
}

std::unique_ptr<Transport> connect_mesh(Store& store, int rank, int size, const MeshOptions& options) {
  return connect_mesh(store, rank, size, options, transport_kind_from(options.settings));
}

}  // namespace canopy::transport
