// Learning the group's host layout at start-up: every rank tells the store its host and its cores.
#pragma once

#include <string>

#include "canopy/store.hpp"
#include "collectives/schedules/host_layout.hpp"

namespace canopy::collectives {

// Every rank publishes its host id (CANOPY_HOST_ID or the host name) and the cores it may use; rank 0
// reads them all and publishes the layout, which every rank reads (O(P) store requests, not P^2). Hosts
// are numbered in the order of their lowest rank; a host's cores are the fewest any of its ranks reported
// (a rank pinned to fewer cores sees fewer). Every rank returns the same layout.
HostLayout exchange_host_layout(Store& store, int rank, int size, const std::string& host_id, int cores);

}  // namespace canopy::collectives
