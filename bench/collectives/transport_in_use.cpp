#include "bench/collectives/transport_in_use.hpp"

#include "common/env.hpp"
#include "common/settings.hpp"
#include "transport/transport_settings.hpp"

namespace canopy::bench {

std::string TransportInUse::describe() const { return requested == name ? name : name + " (" + requested + ")"; }

TransportInUse transport_in_use(const Communicator& comm) {
  const char* requested = "auto";
  switch (transport::TransportSettings::from(Settings::from_environment()).kind) {
    case transport::TransportKind::ShmTcp: requested = "shm+tcp"; break;
    case transport::TransportKind::Tcp: requested = "tcp"; break;
    case transport::TransportKind::Verbs: requested = "verbs"; break;
    case transport::TransportKind::Auto: break;
  }
  return {std::string(comm.transport_name()), requested};
}

}  // namespace canopy::bench
