#include "rendezvous/host_addresses.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <memory>

#include "common/error.hpp"

namespace canopy::rendezvous {

std::vector<HostAddress> host_addresses() {
  ifaddrs* raw = nullptr;
  if (::getifaddrs(&raw) != 0) fail_errno("getifaddrs");
  std::unique_ptr<ifaddrs, decltype(&::freeifaddrs)> list(raw, &::freeifaddrs);
  std::vector<HostAddress> result;
  for (ifaddrs* entry = raw; entry != nullptr; entry = entry->ifa_next) {
    if (entry->ifa_addr == nullptr || (entry->ifa_flags & IFF_UP) == 0) continue;
    const int family = entry->ifa_addr->sa_family;
    const void* address = nullptr;
    if (family == AF_INET) {
      address = &reinterpret_cast<const sockaddr_in*>(entry->ifa_addr)->sin_addr;
    } else if (family == AF_INET6) {
      const auto* v6 = reinterpret_cast<const sockaddr_in6*>(entry->ifa_addr);
      if (IN6_IS_ADDR_LINKLOCAL(&v6->sin6_addr)) continue;
      address = &v6->sin6_addr;
    } else {
      continue;
    }
    char text[INET6_ADDRSTRLEN] = {};
    if (::inet_ntop(family, address, text, sizeof text) == nullptr) continue;
    result.push_back({entry->ifa_name, text, family, (entry->ifa_flags & IFF_LOOPBACK) != 0});
  }
  // getifaddrs usually lists IPv4 first already; stable_partition keeps the kernel's order otherwise.
  std::stable_partition(result.begin(), result.end(),
                        [](const HostAddress& a) { return a.family == AF_INET; });
  return result;
}

}  // namespace canopy::rendezvous
