// CANOPY_TRANSPORT=auto|shm+tcp|tcp|verbs: which transport a communicator's mesh is built on.
//   shm+tcp  shared memory between the ranks of one host (transport/shm), TCP between hosts
//   tcp      the TCP mesh (transport/tcp) for every pair: shared memory off
//   verbs    the RDMA verbs mesh; Error(Config) "no RDMA device ..." where there is none
//   auto     (the default) verbs when every rank of the group can open an RDMA device, else shm+tcp; the
//            ranks agree through the store, so a group never splits between the two. CANOPY_DEBUG=INFO
//            says which was chosen and why.
#pragma once

#include <memory>

#include "canopy/store.hpp"
#include "common/env.hpp"
#include "transport/shm/shm_options.hpp"
#include "transport/tcp/tcp_transport.hpp"
#include "transport/transport.hpp"
#include "transport/verbs/verbs_transport.hpp"

namespace canopy::transport {

enum class TransportKind { ShmTcp, Tcp, Verbs, Auto };

// CANOPY_TRANSPORT from `env`; unset means Auto. Throws Error(Config) naming the variable otherwise.
TransportKind transport_kind_from(const EnvMap& env);

// Builds the mesh of the kind asked for. `verbs` carries the RDMA settings; its comm_id and
// connect_timeout are taken from `tcp`, so both transports scope their store keys alike. `shm` carries the
// shared-memory settings; which ranks share a host comes from tcp.host_of_rank.
std::unique_ptr<Transport> connect_mesh(Store& store, int rank, int size, const TcpOptions& tcp,
                                        TransportKind kind, VerbsOptions verbs, const ShmOptions& shm = {});

// The same with the kind and the RDMA and shared-memory settings read from the environment: what a
// communicator calls.
std::unique_ptr<Transport> connect_mesh(Store& store, int rank, int size, const TcpOptions& tcp);

}  // namespace canopy::transport
