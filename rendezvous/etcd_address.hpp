// An etcd store's address: etcd://host1:2379,host2:2379,host3:2379/PREFIX, the members of one etcd cluster
// and the key prefix the job's keys live under. Parsed whether or not this build has the etcd store, so that
// a build without libcurl still names the address it cannot use.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace canopy::rendezvous {

struct EtcdAddress {
  std::vector<std::string> endpoints;  // "http://host:port", in the order given (the first is tried first)
  std::string prefix;                  // the job's key prefix, without a trailing '/': "canopy/job42"
  std::string text;                    // the address as given, for messages
};

inline constexpr std::string_view kEtcdScheme = "etcd://";

// True when `address` names an etcd store (starts with etcd://).
bool is_etcd_address(std::string_view address);

// Error(Config) naming the address and what is wrong: no member, a port outside 1-65535, an empty prefix.
// A member without a port gets etcd's client port, 2379; an IPv6 member is written [::1]:2379.
EtcdAddress parse_etcd_address(std::string_view address);

}  // namespace canopy::rendezvous
