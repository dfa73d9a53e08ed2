// Learning the group's host layout at start-up: every rank tells the store its host and its cores.
#pragma once

#include <string>
#include <vector>

#include "canopy/store.hpp"
#include "collectives/schedules/host_layout.hpp"

namespace canopy::collectives {

// Every rank publishes its host id (CANOPY_HOST_ID or the host name) and the CPUs it may use; rank 0
// reads them all and publishes the layout, which every rank reads (O(P) store requests, not P^2). Hosts
// are numbered in the order of their lowest rank; a host's cores are the union of its ranks' CPUs (ranks
// bound to a core each, by canopy-run --bind-to core or mpirun, add up; unbound ranks all see every core).
// Every rank returns the same layout.
HostLayout exchange_host_layout(Store& store, int rank, int size, const std::string& host_id,
                                const std::vector<int>& cpus);

// The layout from the ranks' entries ("<cpu list> <host id>", in rank order); Error(Protocol) naming a
// malformed one.
HostLayout layout_from_entries(const std::vector<std::string>& entries);

}  // namespace canopy::collectives
