// Forming a mesh that carries the messages between ranks of one host in shared memory and the rest over TCP.
//
// Which peers share this host comes from the communicator's host layout (MeshOptions::host_of_rank), never
// from a launcher's local world size; that they really share a kernel (and so the rings' memory) is then
// proven by reaching each other's abstract Unix socket, which exists only within one network namespace of
// one kernel, and by the handshake on it (the job token, the same user). A pair that fails either uses TCP.
#pragma once

#include <memory>
#include <vector>

#include "canopy/store.hpp"
#include "transport/shm/shm_links.hpp"
#include "transport/shm/shm_options.hpp"
#include "transport/tcp/tcp_transport.hpp"
#include "transport/transport.hpp"

namespace canopy::transport {

struct ShmPeers {
  UniqueFd doorbell;               // this rank's, given to every peer reached
  std::vector<ShmPeerLink> links;  // by rank; invalid where the peer is not reached
  std::vector<int> reached;        // the peers with a link, in rank order
};

// Every rank calls this after its TCP links are up. Each rank publishes "shm/<comm_id>/socket/<rank>" (its
// listener's name) and "shm/<comm_id>/reached/<rank>" (which lower ranks of its host it reached); it
// connects to the lower ranks of its host and accepts the higher ones, as the TCP mesh does, so the waits
// form no cycle. Throws Error(Timeout) naming the ranks that never answered.
ShmPeers connect_shm_peers(Store& store, int rank, int size, const ShmOptions& options);

// TCP links to every peer, shared memory to those of this host that connect_shm_peers() reached: what
// CANOPY_TRANSPORT=shm+tcp builds. Its name() is "shm+tcp" when any peer is reached, else "tcp".
std::unique_ptr<Transport> connect_shm_tcp_mesh(Store& store, int rank, int size, const TcpOptions& tcp,
                                                const ShmOptions& shm);
// The same with both transports' options taken from the mesh's (TcpOptions::from, ShmOptions::from).
std::unique_ptr<Transport> connect_shm_tcp_mesh(Store& store, int rank, int size, const MeshOptions& options);

}  // namespace canopy::transport
