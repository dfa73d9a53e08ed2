#include "transport/transport_settings.hpp"

#include "common/error.hpp"
#include "transport/shm/shm_ring.hpp"

namespace canopy::transport {

TransportSettings TransportSettings::from(const Settings& settings) {
  TransportSettings parsed;
  const std::string& kind = settings.choice("CANOPY_TRANSPORT");
  parsed.kind = kind == "shm+tcp" ? TransportKind::ShmTcp
                : kind == "tcp"   ? TransportKind::Tcp
                : kind == "verbs" ? TransportKind::Verbs
                                  : TransportKind::Auto;

  ShmSettings& shm = parsed.shm;
  shm.max_ranks = static_cast<int>(settings.integer("CANOPY_SHM_MAX_RANKS"));
  shm.ring_bytes = settings.size("CANOPY_SHM_RING_BYTES");
  shm.slot_bytes = settings.size("CANOPY_SHM_SLOT_BYTES");
  shm.single_copy_bytes = settings.size("CANOPY_SHM_SINGLE_COPY_BYTES");
  shm.host_budget_bytes = settings.size("CANOPY_SHM_BYTES");
  shm.cell_bytes = settings.size("CANOPY_SHM_CELL_BYTES");
  if (settings.has("CANOPY_SHM_SPIN_US")) shm.spin = settings.duration("CANOPY_SHM_SPIN_US");
  if ((shm.ring_bytes & (shm.ring_bytes - 1)) != 0)
    fail(ErrorCode::Config, "CANOPY_SHM_RING_BYTES={} must be a power of two", shm.ring_bytes);
  if (shm.slot_bytes % kRingLine != 0)
    fail(ErrorCode::Config, "CANOPY_SHM_SLOT_BYTES={} must be a multiple of {} bytes", shm.slot_bytes,
         kRingLine);

  parsed.tcp.socket_ifname = settings.text("CANOPY_SOCKET_IFNAME");
  parsed.tcp.socket_family = settings.choice("CANOPY_SOCKET_FAMILY");
  if (settings.has("CANOPY_SOCKET_SPIN_US")) parsed.tcp.spin = settings.duration("CANOPY_SOCKET_SPIN_US");

  VerbsSettings& verbs = parsed.verbs;
  verbs.hca = settings.text("CANOPY_IB_HCA");
  if (settings.has("CANOPY_IB_GID_INDEX"))
    verbs.gid_index = static_cast<int>(settings.integer("CANOPY_IB_GID_INDEX"));
  if (settings.has("CANOPY_IB_SPIN_US")) verbs.spin = settings.duration("CANOPY_IB_SPIN_US");
  verbs.max_chunk_bytes = static_cast<std::size_t>(settings.size("CANOPY_IB_CHUNK_BYTES"));
  verbs.keep_registrations = settings.flag("CANOPY_IB_REG_CACHE");
  return parsed;
}

}  // namespace canopy::transport
