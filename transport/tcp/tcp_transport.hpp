// The TCP transport: a full mesh of sockets among the ranks of a group, set up through the store.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "canopy/store.hpp"
#include "common/settings.hpp"
#include "transport/mesh_options.hpp"
#include "transport/transport.hpp"

namespace canopy::transport {

class TcpAddressBook;

struct TcpOptions {
  std::uint64_t comm_id = 0;  // keys in the store and handshakes are scoped by it
  std::string job_token;      // presented in every handshake; connections with another are dropped
  std::string socket_ifname;  // CANOPY_SOCKET_IFNAME syntax: "eth,ib" prefixes, "^lo" excludes, "=eth0" exact
  std::string socket_family;  // CANOPY_SOCKET_FAMILY: "" (IPv4 first, then IPv6), "ipv4" or "ipv6"
  Duration connect_timeout = std::chrono::seconds(60);
  // Connections on first use: the store (the one the mesh is formed on) kept to read a peer's address when
  // a message first needs that peer. Null: every connection is made before the mesh is returned.
  std::shared_ptr<Store> store_for_first_use;
  // Where the listener and the peers' addresses come from when every rank publishes them in a record of
  // its own (tcp_address_book.hpp): this mesh is its `address_book_mesh`-th. Null: this mesh listens and
  // publishes "tcp/<comm_id>/addr/<rank>" itself, and reads the peers' from there.
  std::shared_ptr<TcpAddressBook> address_book;
  int address_book_mesh = 0;
  // An accepted connection that has not completed its handshake by then is dropped (port scanners,
  // stray clients): it never holds up the mesh.
  Duration handshake_timeout = std::chrono::seconds(2);
  // How long progress() busy-polls before it blocks in poll(): cuts small-message latency by the
  // wake-up (a few us) but burns a core, so not when ranks outnumber cores many times (spin_rule.hpp).
  // CANOPY_SOCKET_SPIN_US (0: never spins); unset, choose_spin() decides from local_size and the cores.
  std::optional<std::chrono::microseconds> spin;
  // This group's ranks on this host, from the bootstrap; 0 when unknown (then taken to be the whole group,
  // which errs toward blocking).
  int local_size = 0;
  // The CPUs this group's ranks on this host may use together (the host layout); 0 when unknown (then this
  // process's own, which a rank bound to one core sees as 1).
  int host_cores = 0;
  // The mesh's facts, and CANOPY_SOCKET_IFNAME, CANOPY_SOCKET_FAMILY and CANOPY_SOCKET_SPIN_US from its
  // settings.
  static TcpOptions from(const MeshOptions& mesh);
  static TcpOptions from_environment() {
    return from(MeshOptions::from_settings(Settings::from_environment(), 0));
  }
};

// Every rank calls this with the same store, its rank, the group size and comm_id. Each rank publishes
// "tcp/<comm_id>/addr/<rank>" = "ip:port" in the store (unless an address book has it in the rank's own
// record). Without `store_for_first_use` it connects to
// every lower rank and accepts every higher one, returns once all are up and closes its listener; throws
// Error(Timeout) naming the ranks that never appeared. With it, the mesh returns at once and keeps its
// listener: each link is made when a message first goes to or comes from that peer.
std::unique_ptr<Transport> connect_tcp_mesh(Store& store, int rank, int size, const TcpOptions& options);

// The store key under which `rank` publishes its listening address.
std::string tcp_address_key(std::uint64_t comm_id, int rank);

}  // namespace canopy::transport
