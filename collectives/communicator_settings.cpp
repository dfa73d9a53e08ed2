#include "collectives/communicator_settings.hpp"

#include <chrono>

#include "collectives/selection/algorithm_overrides.hpp"

namespace canopy::collectives {

CommunicatorSettings CommunicatorSettings::from(const Settings& settings) {
  CommunicatorSettings parsed;
  parsed.timeout = std::chrono::duration_cast<Duration>(settings.duration("CANOPY_TIMEOUT"));
  parsed.algorithm_overrides = parse_algorithm_overrides(settings.text("CANOPY_ALGO"));
  parsed.chunk_bytes = settings.size("CANOPY_CHUNK_BYTES");
  parsed.calibrate = settings.flag("CANOPY_CALIBRATE");
  parsed.cost_model = settings.text("CANOPY_COST_MODEL");
  parsed.host_id = settings.text("CANOPY_HOST_ID");
  parsed.connect_eagerly = settings.choice("CANOPY_CONNECT") == "eager";
  parsed.liveness = LivenessSettings::from_settings(settings);
  parsed.mesh = transport::MeshOptions::from_settings(settings, 0);
  return parsed;
}

}  // namespace canopy::collectives
