#include "transport/verbs/verbs_transport.hpp"

namespace canopy::transport {

VerbsOptions VerbsOptions::from_settings(const Settings& settings) {
  VerbsOptions options;
  options.hca = settings.text("CANOPY_IB_HCA");
  options.gid_index =
      settings.has("CANOPY_IB_GID_INDEX") ? static_cast<int>(settings.integer("CANOPY_IB_GID_INDEX")) : -1;
  options.spin = settings.duration("CANOPY_IB_SPIN_US");
  options.max_chunk_bytes = static_cast<std::size_t>(settings.size("CANOPY_IB_CHUNK_BYTES"));
  options.keep_registrations = settings.flag("CANOPY_IB_REG_CACHE");
  options.connect_timeout = std::chrono::duration_cast<Duration>(settings.duration("CANOPY_TIMEOUT"));
  return options;
}

}  // namespace canopy::transport
