// Built without libcurl (Debian: libcurl4-openssl-dev): an etcd:// store address cannot be used.
#include "common/error.hpp"
#include "rendezvous/etcd_address.hpp"
#include "rendezvous/etcd_store.hpp"

namespace canopy::rendezvous {

bool etcd_built() {
  return false;
}

std::shared_ptr<Store> connect_etcd_store(const std::string& address, const std::string&, Duration,
                                          Duration) {
  parse_etcd_address(address);  // a malformed address is named as such first
  fail(ErrorCode::Config,
       "the store address {} names an etcd store, and this build of Canopy has no etcd store: CMake did not "
       "find "
       "libcurl (Debian: apt-get install libcurl4-openssl-dev, then rebuild)",
       address);
}

}  // namespace canopy::rendezvous
