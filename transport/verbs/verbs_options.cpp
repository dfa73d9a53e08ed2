#include "transport/verbs/verbs_transport.hpp"

namespace canopy::transport {

VerbsOptions VerbsOptions::from(const MeshOptions& mesh) {
  const Settings& settings = mesh.settings;
  VerbsOptions options;
  take_mesh_facts(mesh, options);
  options.hca = settings.text("CANOPY_IB_HCA");
  options.gid_index =
      settings.has("CANOPY_IB_GID_INDEX") ? static_cast<int>(settings.integer("CANOPY_IB_GID_INDEX")) : -1;
  if (settings.has("CANOPY_IB_SPIN_US")) options.spin = settings.duration("CANOPY_IB_SPIN_US");
  if (!mesh.spin) options.spin = std::chrono::microseconds(0);
  options.max_chunk_bytes = static_cast<std::size_t>(settings.size("CANOPY_IB_CHUNK_BYTES"));
  options.keep_registrations = settings.flag("CANOPY_IB_REG_CACHE");
  return options;
}

}  // namespace canopy::transport
