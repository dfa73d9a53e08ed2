// Which transport a sweep runs on, for the table's header and the rows' `transport` key: what the
// communicator runs on, beside what CANOPY_TRANSPORT asked for.
#pragma once

#include <string>

#include "canopy/canopy.hpp"

namespace canopy::bench {

struct TransportInUse {
  std::string name;       // "tcp" or "verbs"
  std::string requested;  // CANOPY_TRANSPORT as given: "tcp", "verbs" or "auto" (its default)

  // "tcp", or "tcp (auto)" when the choice was left to connect_mesh.
  std::string describe() const;
};

TransportInUse transport_in_use(const Communicator& comm);

}  // namespace canopy::bench
