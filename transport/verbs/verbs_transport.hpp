// The RDMA verbs links: reliable-connected queue pairs between a rank and the peers a mesh routes to them,
// set up through the store, moving every message by an RDMA write with immediate into the place the
// receiver advertised; one part of a MeshTransport (io_part.hpp), beside shared memory and TCP. See
// docs/VERBS.md for the protocol and what has run where.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "canopy/store.hpp"
#include "common/env.hpp"
#include "common/settings.hpp"
#include "transport/abort_flag.hpp"
#include "transport/io_part.hpp"
#include "transport/mesh_options.hpp"
#include "transport/transport.hpp"

namespace canopy::transport {

struct VerbsOptions {
  std::uint64_t comm_id = 0;  // scopes the store keys
  // CANOPY_IB_HCA (NCCL_IB_HCA syntax, see verbs/hca_spec.hpp): which devices and ports; "" = any
  // device with an ACTIVE port.
  std::string hca;
  // CANOPY_IB_GID_INDEX: a fixed GID index; -1 (default) chooses RoCE v2 IPv4 first.
  int gid_index = -1;
  Duration connect_timeout = std::chrono::seconds(60);
  // CANOPY_IB_SPIN_US: how long progress() polls the completion queue before it sleeps on the
  // completion channel; unset, the spin rule decides (spin_rule.hpp: kDefaultVerbsSpin unless this
  // host's ranks outnumber its cores 4 to 1).
  std::optional<std::chrono::microseconds> spin;
  // This group's ranks on this host and their CPUs (0: unknown), for the spin rule.
  int local_size = 0;
  int host_cores = 0;
  // CANOPY_IB_CHUNK_BYTES: the most one RDMA write carries; 0 = the port's maximum message size.
  std::size_t max_chunk_bytes = 0;
  // CANOPY_IB_REG_CACHE=1 keeps registrations of user buffers after use (safe only when buffers are
  // not freed while the communicator lives: see verbs/registration_cache.hpp).
  bool keep_registrations = false;

  // The mesh's facts, and the CANOPY_IB_* settings.
  static VerbsOptions from(const MeshOptions& mesh);
  static VerbsOptions from_environment(const EnvMap& env) {
    return from(MeshOptions::from_settings(Settings::parse(env), 0));
  }
  static VerbsOptions from_environment() { return from_environment(current_environment()); }
};

// The verbs part of a mesh, connected.
struct VerbsPart {
  std::unique_ptr<IoPart> links;
  std::chrono::microseconds spin;  // how long the mesh may busy-poll the completion queue before it blocks
  std::string port;                // the device and port in use, for the log
};

// Opens the device and connects a queue pair with each of `peers` (none with the others), through the
// store: every rank calls it with the peers that route to it, which must agree pairwise (both sides of
// a pair name each other). Returns once every queue pair is connected and each of `peers` has posted its
// receives. `abort` is the mesh's. Throws Error(Config) "no RDMA device ..." when there is none to use
// (also with no peers), Error(Timeout) naming the rank that never appeared.
VerbsPart connect_verbs_links(Store& store, int rank, int size, const VerbsOptions& options,
                              std::span<const int> peers, const AbortFlag& abort);

// A mesh of verbs links with every peer, the same host's included (CANOPY_TRANSPORT=verbs): every rank
// calls this with the same store, its rank, the group size and comm_id.
std::unique_ptr<Transport> connect_verbs_mesh(Store& store, int rank, int size, const VerbsOptions& options);

// Empty when this process can open a device and ACTIVE port that `options` allow; otherwise the
// reason, starting with "no RDMA device" (also when Canopy was built without verbs).
std::string verbs_unavailable_reason(const VerbsOptions& options);

}  // namespace canopy::transport
