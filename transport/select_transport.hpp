// CANOPY_TRANSPORT=auto|shm+tcp|tcp|verbs: which transport a communicator's mesh is built on.
//   shm+tcp  shared memory between the ranks of one host (transport/shm), TCP between hosts
//   tcp      the TCP mesh (transport/tcp) for every pair: shared memory off
//   verbs    the RDMA verbs mesh; Error(Config) "no RDMA device ..." where there is none
//   auto     (the default) verbs when every rank of the group can open an RDMA device, else shm+tcp; the
//            ranks agree through the store (in their host layout records where the communicator
//            forms: MeshOptions::verbs_verdict), so a group never splits between the two. CANOPY_DEBUG=INFO
//            says which was chosen and why.
#pragma once

#include <memory>

#include "canopy/store.hpp"
#include "common/env.hpp"
#include "common/settings.hpp"
#include "transport/mesh_options.hpp"
#include "transport/tcp/tcp_transport.hpp"
#include "transport/transport.hpp"
#include "transport/verbs/verbs_transport.hpp"

namespace canopy::transport {

enum class TransportKind { ShmTcp, Tcp, Verbs, Auto };

// CANOPY_TRANSPORT; unset means Auto.
TransportKind transport_kind_from(const Settings& settings);
inline TransportKind transport_kind_from(const EnvMap& env) {
  return transport_kind_from(Settings::parse(env));
}

// Builds the mesh of `kind`; each transport takes its options from `options` (TcpOptions::from,
// VerbsOptions::from). `why`, for a kind given: how it was chosen, for the log (empty: CANOPY_TRANSPORT).
std::unique_ptr<Transport> connect_mesh(Store& store, int rank, int size, const MeshOptions& options,
                                        TransportKind kind, std::string_view why = {});

// The kind that a second mesh of the same group takes where `first` was built with `kind`: what auto
// resolved to (verbs, or shm+tcp), so that the group agrees on verbs once, not once a mesh.
// Whether the ranks of a host with `host_ranks` of the group's ranks may share memory under `kind`:
// shm+tcp always, auto within CANOPY_SHM_MAX_RANKS (where not every rank can use verbs), others never.
bool host_may_share_memory(TransportKind kind, int host_ranks, const Settings& settings);

TransportKind kind_taken(TransportKind kind, const Transport& first);

// The same with the kind from the options' settings (CANOPY_TRANSPORT): what a communicator calls.
std::unique_ptr<Transport> connect_mesh(Store& store, int rank, int size, const MeshOptions& options);

}  // namespace canopy::transport
