// What every transport needs to form a group's mesh, whatever carries the bytes: connect_mesh takes this
// one value (select_transport.hpp), and each transport derives its own options from it, reading its own
// settings (TcpOptions::from, VerbsOptions::from). docs/TRANSPORT.md, *One options value for every
// transport*, says how a third transport plugs in.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "canopy/store.hpp"
#include "common/settings.hpp"
#include "transport/transport_settings.hpp"

namespace canopy::transport {

class TcpAddressBook;
class UnixListenerBook;

struct MeshOptions {
  // Scopes the store keys and handshakes of one mesh: one communicator's never meet another's.
  std::uint64_t comm_id = 0;
  Duration connect_timeout = std::chrono::seconds(60);  // for the whole set-up
  std::string job_token;  // every connection presents it; one with another is refused
  // Connections on first use (CANOPY_CONNECT=lazy): the store the mesh is formed on, kept by the mesh to
  // read a peer's address when a message first needs it. Null: every link is made before connect_mesh()
  // returns. Transports that cannot connect later (verbs) ignore it.
  std::shared_ptr<Store> store_for_first_use;
  // TCP: the listener made, and the peers' addresses published, in the ranks' own records
  // (tcp/tcp_address_book.hpp); this mesh is the book's `tcp_address_book_mesh`-th. Null: the TCP mesh
  // listens and publishes its address itself.
  std::shared_ptr<TcpAddressBook> tcp_address_book;
  int tcp_address_book_mesh = 0;
  // Shared memory: the Unix listener made, and its name published, in the ranks' own records
  // (shm/unix_listener_book.hpp); this mesh is the book's `unix_listener_book_mesh`-th. Null: the host's
  // ranks agree on their listeners' names through the store.
  std::shared_ptr<UnixListenerBook> unix_listener_book;
  int unix_listener_book_mesh = 0;
  // The host layout, as the group learned it: each rank's host (an index; equal for ranks of one host);
  // empty: every rank on a host of its own. A transport that joins same-host pairs its own way (shared
  // memory) reads it.
  std::vector<int> host_of_rank;
  // This group's ranks on this host, and the CPUs they may use together (0: unknown): whether a rank may
  // busy-poll without starving the peer it waits for (spin_rule.hpp).
  int local_size = 0;
  int host_cores = 0;
  // false: never busy-poll, whatever the spin rule and settings say (a mesh driven by a thread of its
  // own, which may wait in poll() at no one's expense).
  bool spin = true;
  // Whether the group's collectives may go through cells shared by the whole host (shm/host_cells.hpp),
  // where every rank is on one host: a mesh that carries only point-to-point messages needs none.
  bool host_cells = true;
  // CANOPY_TRANSPORT=auto: the group's verdict on verbs where the ranks agreed on it already, in the
  // records of the host layout (collectives/forming/host_layout_exchange.hpp): "1" when every rank can use verbs,
  // "<rank>:<reason>" for the first that cannot. Empty: connect_mesh agrees on it through the store.
  std::string verbs_verdict;
  // The transport layer's settings, parsed once: CANOPY_TRANSPORT, and each kind of link's own.
  TransportSettings settings = TransportSettings::from(Settings::parse({}));

  // From the settings alone: CANOPY_TIMEOUT and CANOPY_JOB_TOKEN, no layout (tests, tools).
  static MeshOptions from_settings(const Settings& settings, std::uint64_t comm_id);
};

// What a transport's own options take from the mesh's: the same four fields in each.
template <typename TransportOptions>
void take_mesh_facts(const MeshOptions& mesh, TransportOptions& options) {
  options.comm_id = mesh.comm_id;
  options.connect_timeout = mesh.connect_timeout;
  options.local_size = mesh.local_size;
  options.host_cores = mesh.host_cores;
}

inline MeshOptions MeshOptions::from_settings(const Settings& settings, std::uint64_t comm_id) {
  MeshOptions options;
  options.comm_id = comm_id;
  options.connect_timeout = std::chrono::duration_cast<Duration>(settings.duration("CANOPY_TIMEOUT"));
  options.job_token = settings.text("CANOPY_JOB_TOKEN");
  options.settings = TransportSettings::from(settings);
  return options;
}

}  // namespace canopy::transport
