// The TCP transport: a full mesh of sockets among the ranks of a group, set up through the store.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "canopy/store.hpp"
#include "transport/transport.hpp"

namespace canopy::transport {

struct TcpOptions {
  std::uint64_t comm_id = 0;   // keys in the store and handshakes are scoped by it
  std::string job_token;       // presented in every handshake; connections with another are dropped
  std::string socket_ifname;   // CANOPY_SOCKET_IFNAME syntax: "eth,ib" prefixes, "^lo" excludes, "=eth0" exact
  Duration connect_timeout = std::chrono::seconds(60);
  // Reads the defaults above from CANOPY_JOB_TOKEN, CANOPY_SOCKET_IFNAME and CANOPY_TIMEOUT.
  static TcpOptions from_environment();
};

// Every rank calls this with the same store, its rank, the group size and comm_id; returns once all
// connections to all peers are up. Throws Error(Timeout) naming the ranks that never appeared.
std::unique_ptr<Transport> connect_tcp_mesh(Store& store, int rank, int size, const TcpOptions& options);

}  // namespace canopy::transport
