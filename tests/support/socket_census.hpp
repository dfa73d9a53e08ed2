// The sockets this process holds, read from /proc: its socket descriptors (/proc/self/fd) matched against
// the kernel's TCP tables (/proc/net/tcp and tcp6), so a test can say how many listen, how many are
// connected to the store and how many carry data.
#pragma once

#include <cstdint>
#include <string>

namespace canopy::testing {

struct SocketCensus {
  int listening = 0;        // TCP sockets in LISTEN
  int to_store = 0;         // TCP connections whose far end is the store's port
  int other_connected = 0;  // every other TCP connection (the data links)
  int not_tcp = 0;          // Unix sockets and the like
  int total() const { return listening + to_store + other_connected + not_tcp; }
  std::string describe() const;
};

// This process's sockets now; `store_port` tells the store's connections from the rest.
SocketCensus take_socket_census(std::uint16_t store_port);

}  // namespace canopy::testing
