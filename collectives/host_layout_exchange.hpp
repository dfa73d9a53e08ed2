// Learning the group's host layout at start-up: every rank tells the store its host and its cores.
#pragma once

#include <string>
#include <vector>

#include "canopy/store.hpp"
#include "collectives/schedules/host_layout.hpp"

namespace canopy::collectives {

// What a rank's record ("layout/<rank>") holds beside its host and CPUs, so that forming a group
// publishes everything a rank has to say in one store request.
struct RankRecord {
  // The rank's TCP listening addresses, one for each of its meshes ("<address> <address>",
  // transport/tcp/tcp_address_book.hpp); empty where it publishes none.
  std::string addresses;
  // rendezvous::rank_claim(): the record claims the rank (compare-and-set from absent), and a second
  // process with the same rank, or an earlier run's record, is an Error(Config) naming its holder. Empty:
  // the record is simply set.
  std::string claim;
};

// Every rank publishes its record: its host id (CANOPY_HOST_ID or the host name), the CPUs it may use and
// `extra` ("<addresses>\n<claim>\n<cpu list> <host id>" under "layout/<rank>"); rank 0 reads them all and
// publishes the layout, which every rank reads (O(P) store requests, not P^2: one request a rank, three
// for rank 0). Hosts are numbered in the order of their lowest rank; a host's cores are the union of its
// ranks' CPUs (ranks bound to a core each, by canopy-run --bind-to core or mpirun, add up; unbound ranks
// all see every core). Every rank returns the same layout.
HostLayout exchange_host_layout(Store& store, int rank, int size, const std::string& host_id,
                                const std::vector<int>& cpus, const RankRecord& extra = {});

// The store key of `rank`'s record, under the communicator's prefix.
std::string rank_record_key(int rank);

// The TCP addresses in rank `rank`'s record (RankRecord::addresses); Error(Protocol) for a malformed one.
std::string addresses_in_record(const std::string& record, int rank);

// The layout from the ranks' entries ("<cpu list> <host id>", in rank order); Error(Protocol) naming a
// malformed one.
HostLayout layout_from_entries(const std::vector<std::string>& entries);

}  // namespace canopy::collectives
