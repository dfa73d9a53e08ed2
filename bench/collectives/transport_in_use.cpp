#include "bench/collectives/transport_in_use.hpp"

#include "common/env.hpp"
#include "transport/select_transport.hpp"

namespace canopy::bench {

std::string TransportInUse::describe() const { return requested == name ? name : name + " (" + requested + ")"; }

TransportInUse transport_in_use(const Communicator& comm) {
  const char* requested = "auto";
  switch (transport::transport_kind_from(current_environment())) {
    case transport::TransportKind::ShmTcp: requested = "shm+tcp"; break;
    case transport::TransportKind::Tcp: requested = "tcp"; break;
    case transport::TransportKind::Verbs: requested = "verbs"; break;
    case transport::TransportKind::Auto: break;
  }
  return {std::string(comm.transport_name()), requested};
}

}  // namespace canopy::bench
