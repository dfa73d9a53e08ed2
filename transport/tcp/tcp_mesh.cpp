// Forming a TCP mesh: all of it before the first message (CANOPY_CONNECT=eager), or links made on first use.
// Either way the connections come from a TcpConnector (tcp_connector.hpp): the higher rank of a pair dials
// the lower one, so the waits form no cycle.
#include <poll.h>

#include <algorithm>
#include <cerrno>

#include "common/cpu_list.hpp"
#include "common/env.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "transport/mesh_transport.hpp"
#include "transport/spin_rule.hpp"
#include "transport/tcp/tcp_connector.hpp"
#include "transport/tcp/tcp_links.hpp"
#include "transport/tcp/tcp_transport.hpp"

namespace canopy::transport {
namespace {

std::string rank_list(const std::vector<int>& ranks) {
  std::string text;
  for (int r : ranks) text += (text.empty() ? "" : ", ") + std::to_string(r);
  return text;
}

}  // namespace

std::string tcp_address_key(std::uint64_t comm_id, int rank) {
  return fmt::format("tcp/{}/addr/{}", comm_id, rank);
}

TcpOptions TcpOptions::from(const MeshOptions& mesh) {
  const TcpSettings& settings = mesh.settings.tcp;
  TcpOptions options;
  take_mesh_facts(mesh, options);
  options.job_token = mesh.job_token;
  options.store_for_first_use = mesh.store_for_first_use;
  options.address_book = mesh.tcp_address_book;
  options.address_book_mesh = mesh.tcp_address_book_mesh;
  options.socket_ifname = settings.socket_ifname;
  options.socket_family = settings.socket_family;
  if (settings.spin) options.spin = *settings.spin;
  if (!mesh.spin) options.spin = std::chrono::microseconds(0);
  return options;
}

std::vector<PeerLink> connect_tcp_links(Store& store, int rank, int size, const TcpOptions& options,
                                        const std::vector<int>* only) {
  if (size < 1 || rank < 0 || rank >= size)
    fail(ErrorCode::InvalidArgument, "connect_tcp_mesh: rank {} is not in a group of size {}", rank, size);
  std::vector<PeerLink> links(static_cast<std::size_t>(size));
  if (size == 1) return links;
  const Deadline deadline = Deadline::after(options.connect_timeout);
  // The connector reads the store only while this runs: it need not own it.
  TcpConnector connector(std::shared_ptr<Store>(std::shared_ptr<Store>(), &store), rank, size, options);
  int missing = 0;
  for (int peer = 0; peer < size; ++peer)
    if (peer != rank && (only == nullptr || std::find(only->begin(), only->end(), peer) != only->end())) {
      connector.request(peer);
      ++missing;
    }
  std::vector<TcpConnector::Outcome> outcomes;
  std::vector<pollfd> fds;
  for (;;) {
    outcomes.clear();
    connector.drive(outcomes);
    for (auto& outcome : outcomes) {
      if (outcome.failure) throw *outcome.failure;
      links[outcome.peer] = std::move(outcome.link);
      --missing;
    }
    if (missing <= 0) break;
    if (deadline.expired() && !connector.dialling())  // a dial ends by itself, saying why
      fail(ErrorCode::Timeout,
           "rank {}: TCP mesh set-up for comm {} timed out after {} ms: ranks {} never connected (they "
           "published no address, could not reach {}, or were refused: see their logs)",
           rank, options.comm_id, options.connect_timeout.count(), rank_list(connector.awaited()),
           connector.address());
    fds.clear();
    Clock::time_point wake_by = deadline.at();
    connector.prepare_to_block(fds, wake_by);
    if (::poll(fds.data(), fds.size(), Deadline(wake_by).poll_timeout_ms()) < 0) {
      if (errno != EINTR) fail_errno("poll");
      for (auto& fd : fds) fd.revents = 0;
    }
    connector.after_poll(fds);
  }
  log::info("rank {}: TCP mesh of {} ranks for comm {} is up", rank, size, options.comm_id);
  return links;
}

TcpLinkSet form_tcp_links(Store& store, int rank, int size, const TcpOptions& options,
                          const std::vector<int>* only) {
  if (!options.store_for_first_use)
    return TcpLinkSet{connect_tcp_links(store, rank, size, options, only), nullptr};
  if (size < 1 || rank < 0 || rank >= size)
    fail(ErrorCode::InvalidArgument, "connect_tcp_mesh: rank {} is not in a group of size {}", rank, size);
  log::debug("rank {}: TCP links of comm {} are made on first use", rank, options.comm_id);
  return TcpLinkSet{{}, std::make_unique<TcpConnector>(options.store_for_first_use, rank, size, options)};
}

std::chrono::microseconds chosen_spin(const TcpOptions& options, int size) {
  const int local_ranks = options.local_size > 0 ? options.local_size : size;
  const int cores = options.host_cores > 0 ? options.host_cores : usable_cores();
  return announce_spin("sockets", "CANOPY_SOCKET_SPIN_US", options.spin, local_ranks, cores, kDefaultSpin);
}

std::unique_ptr<Transport> connect_tcp_mesh(Store& store, int rank, int size, const TcpOptions& options) {
  auto mesh = std::make_unique<MeshTransport>(rank, size, "tcp");
  mesh->add_part(
      std::make_unique<TcpLinks>(rank, size, form_tcp_links(store, rank, size, options), mesh->abort_state()),
      chosen_spin(options, size));
  return mesh;
}

}  // namespace canopy::transport
