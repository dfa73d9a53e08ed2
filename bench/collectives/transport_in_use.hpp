// Which transport a sweep runs on, for the table's header and the rows' `transport` key.
//
// The communicator does not say, so this asks the question connect_mesh (transport/select_transport.hpp)
// asks, the same way: CANOPY_TRANSPORT=tcp or verbs is what runs (a forced verbs without a device has
// already failed to form the group); auto runs verbs only when every rank can open an RDMA device.
#pragma once

#include <string>

#include "canopy/canopy.hpp"
#include "transport/select_transport.hpp"

namespace canopy::bench {

struct TransportInUse {
  std::string name;       // "tcp" or "verbs"
  std::string requested;  // CANOPY_TRANSPORT as given: "tcp", "verbs" or "auto"

  // "tcp", or "tcp (auto)" when the choice was left to connect_mesh.
  std::string describe() const;
};

// The rule alone: what `requested` resolves to, given whether every rank of the group can use verbs.
TransportInUse resolve_transport(transport::TransportKind requested, bool every_rank_has_verbs);

// Collective: every rank calls it (auto needs every rank's answer: one all-reduce on `comm`).
TransportInUse transport_in_use(Communicator& comm);

}  // namespace canopy::bench
