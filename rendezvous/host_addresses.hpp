// This host's addresses, as a rank publishes them for others to reach it (the store's host under PMIx) and
// as the TCP transport chooses among them.
#pragma once

#include <string>
#include <vector>

namespace canopy::rendezvous {

struct HostAddress {
  std::string interface;  // "eth0"
  std::string ip;         // numeric: "198.18.0.1", "fd00::2"
  int family = 0;         // AF_INET or AF_INET6
  bool loopback = false;
};

// The addresses of every interface that is up, IPv4 first and otherwise in the kernel's order, without IPv6
// link-local addresses (they need a scope and cannot be published as they are). Throws Error(System) when
// the kernel cannot list them.
std::vector<HostAddress> host_addresses();

}  // namespace canopy::rendezvous
