// Choosing the address a rank listens on, with the CANOPY_SOCKET_IFNAME syntax NCCL and Gloo users
// know: "eth,ib" (name prefixes), "^docker,lo" (exclude prefixes), "=eth0" (exact names), "^=eth0".
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "transport/tcp/socket.hpp"

namespace canopy::transport {

struct InterfaceAddress {
  std::string name;       // "eth0"
  SocketAddress address;  // port 0
  bool loopback = false;
};

struct InterfaceFilter {
  bool exclude = false;  // '^': the names listed are the ones NOT to use
  bool exact = false;    // '=': whole names instead of prefixes
  std::vector<std::string> names;

  static InterfaceFilter parse(std::string_view spec);
  bool matches(std::string_view interface_name) const;
};

// The addresses of every interface that is up, in the kernel's order (IPv4 before IPv6), without IPv6
// link-local addresses (they need a scope and cannot be published as is).
std::vector<InterfaceAddress> list_interfaces();

// Picks the address to listen on. `spec` empty: the first non-loopback interface that is not a docker
// bridge, else loopback. `family`: "" (IPv4 first, then IPv6), "ipv4"/"AF_INET" or "ipv6"/"AF_INET6".
// Throws Error(Config) naming the setting and the interfaces available when nothing fits.
InterfaceAddress choose_interface(const std::vector<InterfaceAddress>& interfaces, std::string_view spec,
                                  std::string_view family);

}  // namespace canopy::transport
