// A Store on an etcd v3 cluster (docs/ETCD.md): for jobs across nodes whose store
// must outlive any one of them. Optional at build time (libcurl); without it connect_etcd_store says so.
#pragma once

#include <memory>
#include <string>

#include "canopy/store.hpp"

namespace canopy::rendezvous {

// True when this build has the etcd store (CMake found libcurl).
bool etcd_built();

// Connects to the cluster named by `address` (etcd://host1:2379,host2:2379/PREFIX,
// rendezvous/etcd_address.hpp) within `timeout`, which also becomes the store's default timeout. The job
// token is checked against the prefix's: the first client of a prefix records it, and a client with another
// token is an Error(Config) (another job on the same prefix). With `lease_ttl` > 0 every key this handle
// writes is attached to a lease it keeps alive, so that the keys vanish `lease_ttl` after the process dies:
// for a rank's own keys (its claim, its address, its heartbeat), not for what the group shares.
std::shared_ptr<Store> connect_etcd_store(const std::string& address, const std::string& job_token,
                                          Duration timeout, Duration lease_ttl = Duration::zero());

}  // namespace canopy::rendezvous
