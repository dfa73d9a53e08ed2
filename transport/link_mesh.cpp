#include "transport/link_mesh.hpp"

#include <algorithm>

#include "common/cpu_list.hpp"
#include "common/log.hpp"
#include "transport/mesh_transport.hpp"
#include "transport/shm/host_cells.hpp"
#include "transport/shm/shm_links.hpp"
#include "transport/shm/shm_mesh.hpp"
#include "transport/spin_rule.hpp"
#include "transport/tcp/tcp_links.hpp"

namespace canopy::transport {
namespace {

int ranks_on_this_host(const ShmOptions& options, int rank, int size) {
  if (options.local_size > 0) return options.local_size;
  if (options.host_of_rank.size() != static_cast<std::size_t>(size)) return 1;
  const int host = options.host_of_rank[rank];
  return static_cast<int>(std::count(options.host_of_rank.begin(), options.host_of_rank.end(), host));
}

void route(MeshTransport& mesh, const std::vector<int>& peers, std::size_t part) {
  for (int peer : peers) {
    mesh.route_sends(peer, part);
    mesh.route_recvs(peer, part);
  }
}

}  // namespace

LinkOptions LinkOptions::from(const MeshOptions& mesh) {
  return LinkOptions{TcpOptions::from(mesh), ShmOptions::from(mesh), VerbsOptions::from(mesh)};
}

std::unique_ptr<Transport> connect_link_mesh(Store& store, int rank, int size, const LinkOptions& options,
                                             const LinkChoice& choice, std::string_view why) {
  const TcpOptions& tcp = options.tcp;
  const ShmOptions& shm = options.shm;
  std::vector<LinkKind> kinds = plan_links(rank, size, shm.host_of_rank, choice);
  const std::vector<int> same_host = ranks_of_kind(kinds, LinkKind::SharedMemory);
  // TCP carries the network's peers, or is the fallback of rings that cannot be made: made before use with
  // the same-host peers only, where verbs carries the others.
  const bool tcp_part = choice.network == LinkKind::Tcp || !same_host.empty();
  TcpLinkSet tcp_links;
  if (tcp_part)
    tcp_links =
        form_tcp_links(store, rank, size, tcp, choice.network == LinkKind::Tcp ? nullptr : &same_host);
  ShmPeers peers;
  if (!same_host.empty()) peers = connect_shm_peers(store, rank, size, shm);
  for (int peer : same_host)
    if (std::find(peers.sharing.begin(), peers.sharing.end(), peer) == peers.sharing.end())
      kinds[peer] = choice.network;  // another namespace, kernel or user: the network carries it
  const std::vector<int> verbs_peers = ranks_of_kind(kinds, LinkKind::Verbs);

  const int cores = shm.host_cores > 0 ? shm.host_cores : usable_cores();
  const int host_ranks = ranks_on_this_host(shm, rank, size);
  auto mesh = std::make_unique<MeshTransport>(
      rank, size, mesh_name(kinds, tcp_part),
      peers.sharing.empty() ? std::chrono::nanoseconds(0) : looks_between_yields(host_ranks, cores));
  std::size_t tcp_index = 0;
  if (tcp_part) {
    tcp_index =
        mesh->add_part(std::make_unique<TcpLinks>(rank, size, std::move(tcp_links), mesh->abort_state()),
                       chosen_spin(tcp, size));
    route(*mesh, ranks_of_kind(kinds, LinkKind::Tcp), tcp_index);
  }
  std::string port;
  if (!verbs_peers.empty()) {
    VerbsPart verbs = connect_verbs_links(store, rank, size, options.verbs, verbs_peers, mesh->abort_state());
    port = " on " + verbs.port;
    route(*mesh, verbs_peers, mesh->add_part(std::move(verbs.links), verbs.spin));
  }
  if (!peers.sharing.empty()) {
    MeshTransport& routes = *mesh;
    auto reroute = [&routes, tcp_index](int peer, bool sends) {
      if (sends)
        routes.route_sends(peer, tcp_index);
      else
        routes.route_recvs(peer, tcp_index);
    };
    const auto ring_spin =
        announce_spin("rings", "CANOPY_SHM_SPIN_US", shm.spin, host_ranks, cores, kDefaultMemorySpin);
    // Before the links take the sockets: the cells come over them.
    mesh->set_host_cells(share_host_cells(
        rank, size, peers, shm, {ring_spin, looks_between_yields(host_ranks, cores)}, mesh->abort_state()));
    const std::vector<int> sharing = peers.sharing;
    const std::size_t shm_index =
        mesh->add_part(std::make_unique<ShmLinks>(rank, std::move(peers.links), std::move(peers.doorbell),
                                                  shm, host_ranks, mesh->abort_state(), mesh->part(tcp_index),
                                                  reroute, std::move(peers.dialer)),
                       ring_spin);
    route(*mesh, sharing, shm_index);
  }
  log::info("rank {}: transport: {} ({}): {}{}", rank, mesh->name(), why, describe_links(kinds), port);
  return mesh;
}

std::unique_ptr<Transport> connect_shm_tcp_mesh(Store& store, int rank, int size, const TcpOptions& tcp,
                                                const ShmOptions& shm) {
  return connect_link_mesh(store, rank, size, LinkOptions{tcp, shm, VerbsOptions{}},
                           LinkChoice{.shared_memory = true, .network = LinkKind::Tcp},
                           "CANOPY_TRANSPORT=shm+tcp");
}

std::unique_ptr<Transport> connect_shm_tcp_mesh(Store& store, int rank, int size,
                                                const MeshOptions& options) {
  return connect_shm_tcp_mesh(store, rank, size, TcpOptions::from(options), ShmOptions::from(options));
}

}  // namespace canopy::transport
