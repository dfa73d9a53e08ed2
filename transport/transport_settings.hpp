// The transport layer's CANOPY_* settings, parsed once from the registry (docs/SETTINGS.md): which
// transport, and each kind of link's own. MeshOptions carries this value to every transport, each of which
// reads its part as typed fields.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "common/settings.hpp"

namespace canopy::transport {

enum class TransportKind { ShmTcp, Tcp, Verbs, Auto };

struct ShmSettings {
  int max_ranks = 0;                    // CANOPY_SHM_MAX_RANKS: auto shares memory on hosts of at most these
  std::uint64_t ring_bytes = 0;         // CANOPY_SHM_RING_BYTES, a power of two
  std::uint64_t slot_bytes = 0;         // CANOPY_SHM_SLOT_BYTES, a multiple of the ring's line
  std::uint64_t single_copy_bytes = 0;  // CANOPY_SHM_SINGLE_COPY_BYTES
  std::uint64_t host_budget_bytes = 0;  // CANOPY_SHM_BYTES
  std::uint64_t cell_bytes = 0;         // CANOPY_SHM_CELL_BYTES
  std::optional<std::chrono::microseconds> spin;  // CANOPY_SHM_SPIN_US; unset: the spin rule decides
};

struct TcpSettings {
  std::string socket_ifname;                      // CANOPY_SOCKET_IFNAME
  std::string socket_family;                      // CANOPY_SOCKET_FAMILY
  std::optional<std::chrono::microseconds> spin;  // CANOPY_SOCKET_SPIN_US
};

struct VerbsSettings {
  std::string hca;                                // CANOPY_IB_HCA
  int gid_index = -1;                             // CANOPY_IB_GID_INDEX; -1: chosen
  std::optional<std::chrono::microseconds> spin;  // CANOPY_IB_SPIN_US
  std::size_t max_chunk_bytes = 0;                // CANOPY_IB_CHUNK_BYTES; 0: the port's maximum
  bool keep_registrations = false;                // CANOPY_IB_REG_CACHE
};

struct TransportSettings {
  TransportKind kind = TransportKind::Auto;  // CANOPY_TRANSPORT
  ShmSettings shm;
  TcpSettings tcp;
  VerbsSettings verbs;

  // Throws Error(Config) naming a bad value, as Settings::parse does (and a ring or slot size the rings
  // cannot use).
  static TransportSettings from(const Settings& settings);
};

}  // namespace canopy::transport
