#include "transport/verbs/verbs_transport.hpp"

namespace canopy::transport {

VerbsOptions VerbsOptions::from(const MeshOptions& mesh) {
  const VerbsSettings& settings = mesh.settings.verbs;
  VerbsOptions options;
  take_mesh_facts(mesh, options);
  options.hca = settings.hca;
  options.gid_index = settings.gid_index;
  if (settings.spin) options.spin = *settings.spin;
  if (!mesh.spin) options.spin = std::chrono::microseconds(0);
  options.max_chunk_bytes = settings.max_chunk_bytes;
  options.keep_registrations = settings.keep_registrations;
  return options;
}

}  // namespace canopy::transport
