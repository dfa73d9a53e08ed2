// Which kind of link carries each peer's messages, from the host layout: shared memory with the ranks of
// this host (where they may share it), and verbs or TCP with the others (verbs where every rank of the group
// can use an RDMA device). Pure functions of the layout and the group's verdict, so every rank of a pair
// reaches the same answer with no word exchanged; link_mesh.hpp builds the mesh they describe.
#pragma once

#include <string>
#include <vector>

namespace canopy::transport {

enum class LinkKind { Self, SharedMemory, Verbs, Tcp };

// What a mesh's CANOPY_TRANSPORT and the group's facts allow.
struct LinkChoice {
  // The ranks of this host share memory (shm+tcp; auto within CANOPY_SHM_MAX_RANKS).
  bool shared_memory = false;
  // What carries the other peers' messages, and a same-host peer's that shared memory cannot reach:
  // LinkKind::Verbs or LinkKind::Tcp.
  LinkKind network = LinkKind::Tcp;
};

// Each rank's link kind as seen from `rank` (Self for itself). `host_of_rank` is the layout (each rank's
// host; empty or short: every rank on a host of its own).
std::vector<LinkKind> plan_links(int rank, int size, const std::vector<int>& host_of_rank,
                                 const LinkChoice& choice);

// The ranks of `kinds` that are `kind`, in order.
std::vector<int> ranks_of_kind(const std::vector<LinkKind>& kinds, LinkKind kind);

// "shm+verbs", "shm+tcp", "verbs", "tcp": the kinds a mesh's links use, as Transport::name() says them.
// `tcp_part` says whether the mesh has TCP links (a same-host mesh keeps them for what its rings cannot
// carry), which a mesh without verbs names even where no peer uses them yet.
std::string mesh_name(const std::vector<LinkKind>& kinds, bool tcp_part);

// For CANOPY_DEBUG=INFO, one line a rank: "shared memory with rank 1 of this host, verbs with ranks 2-3"
// (runs of ranks as a-b, others listed: "TCP with ranks 0,4-6"); "no peers" for a group of one.
std::string describe_links(const std::vector<LinkKind>& kinds);

// "0-3,5,7-8": ascending ranks, runs joined.
std::string rank_runs(const std::vector<int>& ranks);

}  // namespace canopy::transport
