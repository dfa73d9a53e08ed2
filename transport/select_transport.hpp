// CANOPY_TRANSPORT=auto|shm+tcp|tcp|verbs: which links a communicator's mesh is built on, per peer
// (link_kinds.hpp, link_mesh.hpp).
//   shm+tcp  shared memory between the ranks of one host (transport/shm), TCP between hosts
//   tcp      TCP (transport/tcp) for every pair: shared memory off
//   verbs    RDMA verbs for every pair, the same host's included; Error(Config) "no RDMA device ..." where
//            there is none
//   auto     (the default) shared memory between the ranks of one host (within CANOPY_SHM_MAX_RANKS), and
//            between hosts verbs when every rank of the group can open an RDMA device, else TCP ("shm+verbs"
//            or "shm+tcp"); the ranks agree on verbs through the store (in their host layout records where
//            the communicator forms: MeshOptions::verbs_verdict), so a pair never splits between the two.
//            CANOPY_DEBUG=INFO says, one line a rank, which link each peer got and why.
#pragma once

#include <memory>

#include "canopy/store.hpp"
#include "common/env.hpp"
#include "common/settings.hpp"
#include "transport/link_kinds.hpp"
#include "transport/mesh_options.hpp"
#include "transport/tcp/tcp_transport.hpp"
#include "transport/transport.hpp"
#include "transport/verbs/verbs_transport.hpp"

namespace canopy::transport {

// Builds the mesh of `kind`; each transport takes its options from `options` (TcpOptions::from,
// VerbsOptions::from). `why`, for a kind given: how it was chosen, for the log (empty: CANOPY_TRANSPORT).
std::unique_ptr<Transport> connect_mesh(Store& store, int rank, int size, const MeshOptions& options,
                                        TransportKind kind, std::string_view why = {});

// Whether the ranks of a host with `host_ranks` of the group's ranks may share memory under `kind`:
// shm+tcp always, auto within CANOPY_SHM_MAX_RANKS, others never.
bool host_may_share_memory(TransportKind kind, int host_ranks, const TransportSettings& settings);

// What `kind` makes of a peer's link (link_kinds.hpp), where `every_rank_has_verbs` is the group's verdict
// (read only under auto) and this host has `host_ranks` of the group's ranks: shm+tcp shares memory and
// uses TCP between hosts, tcp and verbs one kind for every peer, auto shares memory within
// CANOPY_SHM_MAX_RANKS and uses verbs between hosts where every rank can, else TCP.
LinkChoice choose_links(TransportKind kind, bool every_rank_has_verbs, int host_ranks,
                        const TransportSettings& settings);

// The kind that a second mesh of the same group takes where `first` was built with `kind`: what auto
// resolved to (shm+tcp or tcp; auto again where the first has verbs links, for the same verdict, which
// the communicator hands both meshes), so that the group agrees on verbs once, not once a mesh.
TransportKind kind_taken(TransportKind kind, const Transport& first);

// The same with the kind from the options' settings (CANOPY_TRANSPORT): what a communicator calls.
std::unique_ptr<Transport> connect_mesh(Store& store, int rank, int size, const MeshOptions& options);

}  // namespace canopy::transport
