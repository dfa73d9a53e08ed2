// Building one MeshTransport with a link kind per peer (link_kinds.hpp): shared-memory rings with the ranks
// of this host that connect_shm_peers() reaches, RDMA queue pairs (verbs) or TCP sockets with the others,
// all driven by the mesh's one progress loop and waited for in its one poll().
#pragma once

#include <memory>
#include <string_view>

#include "canopy/store.hpp"
#include "transport/link_kinds.hpp"
#include "transport/shm/shm_options.hpp"
#include "transport/tcp/tcp_transport.hpp"
#include "transport/transport.hpp"
#include "transport/verbs/verbs_transport.hpp"

namespace canopy::transport {

// The options of every kind of link a mesh may hold. `verbs` is read only where `choice.network` is verbs.
struct LinkOptions {
  TcpOptions tcp;
  ShmOptions shm;  // its host_of_rank is the layout the links are planned from
  VerbsOptions verbs;
  static LinkOptions from(const MeshOptions& mesh);
};

// Every rank of the group calls this with the same choice. Shared memory is set up first (with the peers of
// this host, where `choice.shared_memory`); a same-host peer it cannot reach takes `choice.network` too.
// Verbs links are made with the verbs peers only; TCP links where TCP carries a peer, or as the fallback of
// rings that cannot be made (with the same-host peers only, where links are made before use). Says at
// INFO, in one line: "rank R: transport: NAME (`why`): shared memory with rank 1 of this host, verbs with
// ranks 2-3".
std::unique_ptr<Transport> connect_link_mesh(Store& store, int rank, int size, const LinkOptions& options,
                                             const LinkChoice& choice, std::string_view why);

// TCP links to every peer, shared memory to those of this host that connect_shm_peers() found sharing it
// (reached, or linked on first use): what CANOPY_TRANSPORT=shm+tcp builds. Its name() is "shm+tcp" when
// any peer shares memory, else "tcp".
std::unique_ptr<Transport> connect_shm_tcp_mesh(Store& store, int rank, int size, const TcpOptions& tcp,
                                                const ShmOptions& shm);
// The same with both transports' options taken from the mesh's (TcpOptions::from, ShmOptions::from).
std::unique_ptr<Transport> connect_shm_tcp_mesh(Store& store, int rank, int size, const MeshOptions& options);

}  // namespace canopy::transport
