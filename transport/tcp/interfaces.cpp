#include "transport/tcp/interfaces.hpp"

#include <fmt/format.h>
#include <netinet/in.h>

#include "common/error.hpp"
#include "rendezvous/host_addresses.hpp"

namespace canopy::transport {
namespace {

std::vector<std::string> split(std::string_view text, char separator) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (start <= text.size()) {
    auto end = text.find(separator, start);
    if (end == std::string_view::npos) end = text.size();
    if (end > start) parts.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

int parse_family(std::string_view family) {
  if (family.empty()) return AF_UNSPEC;
  if (family == "ipv4" || family == "AF_INET" || family == "4") return AF_INET;
  if (family == "ipv6" || family == "AF_INET6" || family == "6") return AF_INET6;
  fail(ErrorCode::Config, "CANOPY_SOCKET_FAMILY='{}' is not one of ipv4, ipv6, AF_INET, AF_INET6", family);
}

std::string describe_all(const std::vector<InterfaceAddress>& interfaces) {
  std::string text;
  for (const auto& i : interfaces) {
    if (!text.empty()) text += ", ";
    auto address = i.address.to_string();
    text += i.name + " " + address.substr(0, address.rfind(':'));
  }
  return text.empty() ? "(none)" : text;
}

}  // namespace

InterfaceFilter InterfaceFilter::parse(std::string_view spec) {
  InterfaceFilter filter;
  if (!spec.empty() && spec.front() == '^') {
    filter.exclude = true;
    spec.remove_prefix(1);
  }
  if (!spec.empty() && spec.front() == '=') {
    filter.exact = true;
    spec.remove_prefix(1);
  }
  filter.names = split(spec, ',');
  return filter;
}

bool InterfaceFilter::matches(std::string_view interface_name) const {
  bool listed = false;
  for (const auto& name : names) {
    listed = exact ? interface_name == name : interface_name.substr(0, name.size()) == name;
    if (listed) break;
  }
  return listed != exclude;
}

std::vector<InterfaceAddress> list_interfaces() {
  std::vector<InterfaceAddress> result;
  for (const rendezvous::HostAddress& host : rendezvous::host_addresses()) {
    std::string with_port = host.family == AF_INET6 ? fmt::format("[{}]:0", host.ip) : host.ip + ":0";
    result.push_back({host.interface, SocketAddress::parse(with_port), host.loopback});
  }
  return result;
}

InterfaceAddress choose_interface(const std::vector<InterfaceAddress>& interfaces, std::string_view spec,
                                  std::string_view family_name) {
  int family = parse_family(family_name);
  auto family_fits = [&](const InterfaceAddress& i) {
    return family == AF_UNSPEC || i.address.family() == family;
  };

  if (!spec.empty()) {
    InterfaceFilter filter = InterfaceFilter::parse(spec);
    for (const auto& i : interfaces)
      if (family_fits(i) && filter.matches(i.name)) return i;
    fail(ErrorCode::Config, "CANOPY_SOCKET_IFNAME='{}'{} matches no interface that is up; available: {}",
         spec, family == AF_UNSPEC ? "" : fmt::format(" with CANOPY_SOCKET_FAMILY='{}'", family_name),
         describe_all(interfaces));
  }
  InterfaceFilter fallback_excluded = InterfaceFilter::parse("docker,virbr");
  for (const auto& i : interfaces)
    if (family_fits(i) && !i.loopback && !fallback_excluded.matches(i.name)) return i;
  for (const auto& i : interfaces)
    if (family_fits(i) && i.loopback) return i;
  fail(ErrorCode::Config, "no usable network interface{}; available: {}",
       family == AF_UNSPEC ? "" : fmt::format(" of CANOPY_SOCKET_FAMILY='{}'", family_name),
       describe_all(interfaces));
}

}  // namespace canopy::transport
