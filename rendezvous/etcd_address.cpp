#include "rendezvous/etcd_address.hpp"

#include <charconv>

#include "common/error.hpp"
#include "rendezvous/printable.hpp"

namespace canopy::rendezvous {
namespace {

constexpr std::string_view kDefaultClientPort = "2379";

[[noreturn]] void fail_address(std::string_view address, std::string_view why) {
  fail(ErrorCode::Config,
       "{} is not an etcd store address ({}); write etcd://host1:2379,host2:2379,host3:2379/PREFIX",
       printable(address), why);
}

// "host:port", "host" or "[v6]:port" as the URL of the member's client port.
std::string endpoint_url(std::string_view address, std::string_view member) {
  std::string_view host = member, port = kDefaultClientPort;
  if (member.front() == '[') {
    auto close = member.find(']');
    if (close == std::string_view::npos) fail_address(address, "an IPv6 member without its closing ']'");
    host = member.substr(0, close + 1);
    std::string_view rest = member.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') fail_address(address, "text after an IPv6 member's ']' that is not ':port'");
      port = rest.substr(1);
    }
  } else if (auto colon = member.rfind(':'); colon != std::string_view::npos) {
    host = member.substr(0, colon);
    port = member.substr(colon + 1);
  }
  if (host.empty() || host == "[]") fail_address(address, "a member without a host");
  unsigned number = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), number);
  if (ec != std::errc() || end != port.data() + port.size() || number < 1 || number > 65535)
    fail_address(address, "a member's port is not a TCP port (1-65535)");
  return "http://" + std::string(host) + ":" + std::string(port);
}

}  // namespace

bool is_etcd_address(std::string_view address) {
  return address.substr(0, kEtcdScheme.size()) == kEtcdScheme;
}

EtcdAddress parse_etcd_address(std::string_view address) {
  if (!is_etcd_address(address)) fail_address(address, "it does not start with etcd://");
  EtcdAddress parsed;
  parsed.text = std::string(address);
  std::string_view rest = address.substr(kEtcdScheme.size());
  auto slash = rest.find('/');
  std::string_view members = rest.substr(0, slash);
  std::string_view prefix = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
  while (!prefix.empty() && prefix.back() == '/') prefix.remove_suffix(1);
  if (prefix.empty())
    fail_address(address, "no key prefix after the members: every job needs its own, as in /canopy/job42");
  parsed.prefix = std::string(prefix);
  if (!members.empty() && members.back() == ',')
    fail_address(address, "an empty member after the last comma");
  while (!members.empty()) {
    auto comma = members.find(',');
    std::string_view member = members.substr(0, comma);
    if (member.empty()) fail_address(address, "an empty member between commas");
    parsed.endpoints.push_back(endpoint_url(address, member));
    members = comma == std::string_view::npos ? std::string_view() : members.substr(comma + 1);
  }
  if (parsed.endpoints.empty()) fail_address(address, "no member");
  return parsed;
}

}  // namespace canopy::rendezvous
