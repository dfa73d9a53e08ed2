// Learning the group's host layout at start-up: every rank tells the store its host and its cores.
#pragma once

#include <string>
#include <string_view>
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
  // Whether this rank can use verbs, where CANOPY_TRANSPORT=auto must choose: "1", or "0<reason>"
  // (transport::verbs_unavailable_reason, on one line); empty where it does not ask.
  std::string verbs;
  // Its Unix listeners' names, where it shares memory (transport/shm/unix_listener_book.hpp); empty where
  // it publishes none.
  std::string listeners;
};

// What the group agrees on in one exchange of records: the host layout, and, where the ranks said whether
// they can use verbs, the verdict (transport::MeshOptions::verbs_verdict: "1" when every rank can,
// "<rank>:<reason>" for the first that cannot; empty where no rank said).
struct LayoutAgreement {
  HostLayout layout;
  std::string verbs_verdict;
  std::vector<std::string> records;    // rank 0: every rank's, as it gathered them; empty elsewhere
  std::vector<std::string> also_read;  // another rank: the values of `also_read`'s keys, in their order
};

// Every rank publishes its record: its host id (CANOPY_HOST_ID or the host name), the CPUs it may use and
// `extra` ("<addresses>\n<claim>\n<verbs>\n<listeners>\n<cpu list> <host id>" under "layout/<rank>"); rank 0
// reads them all and publishes the layout and the verbs verdict, which every rank reads (O(P) store requests,
// not P^2: two requests a rank, three for rank 0). Hosts are numbered in the order of their lowest rank; a
// host's cores are the union of its ranks' CPUs (ranks bound to a core each, by canopy-run --bind-to core or
// mpirun, add up; unbound ranks all see every core). Every rank returns the same layout.
// `also_read`: other ranks' record keys that a rank other than 0 reads in the same request as the layout
// (the ranks its launcher says share its host); rank 0 has them all anyway.
LayoutAgreement exchange_host_layout(Store& store, int rank, int size, const std::string& host_id,
                                     const std::vector<int>& cpus, const RankRecord& extra = {},
                                     const std::vector<std::string>& also_read = {});

// The store key of `rank`'s record, under the communicator's prefix.
std::string rank_record_key(int rank);

// The TCP addresses in rank `rank`'s record (RankRecord::addresses); Error(Protocol) for a malformed one.
std::string addresses_in_record(const std::string& record, int rank);

// The group's verbs verdict from the ranks' RankRecord::verbs, in rank order: "1" when every one is "1",
// "<rank>:<reason>" for the first that is not (one that said nothing is asked to run the same settings);
// empty where none said anything.
std::string verbs_verdict_of(const std::vector<std::string_view>& said);

// The Unix listeners in rank `rank`'s record (RankRecord::listeners); Error(Protocol) for a malformed one.
std::string listeners_in_record(const std::string& record, int rank);

// The layout from the ranks' entries ("<cpu list> <host id>", in rank order); Error(Protocol) naming a
// malformed one.
HostLayout layout_from_entries(const std::vector<std::string>& entries);

}  // namespace canopy::collectives
