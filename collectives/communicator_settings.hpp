// The CANOPY_* settings a communicator runs by, parsed once from the registry when a family's first
// communicator forms (docs/SETTINGS.md lists them): each is a typed field its readers use, and a
// sub-communicator, a shrunk or a grown one keeps its family's.
#pragma once

#include <cstddef>
#include <map>
#include <string>

#include "canopy/types.hpp"
#include "collectives/elastic/liveness_monitor.hpp"
#include "common/settings.hpp"
#include "transport/mesh_options.hpp"

namespace canopy::collectives {

struct CommunicatorSettings {
  Duration timeout{0};                                    // CANOPY_TIMEOUT, unless the options give one
  std::map<Collective, std::string> algorithm_overrides;  // CANOPY_ALGO
  std::size_t chunk_bytes = 0;                            // CANOPY_CHUNK_BYTES
  bool calibrate = true;                                  // CANOPY_CALIBRATE: run the start-up probe
  std::string cost_model;                                 // CANOPY_COST_MODEL: figures fixed instead
  std::string host_id;                                    // CANOPY_HOST_ID: this rank's host, by name
  bool connect_eagerly = false;                           // CANOPY_CONNECT=eager: every link at forming
  LivenessSettings liveness;                              // CANOPY_HEARTBEAT_SECONDS, ..._TIMEOUT_SECONDS
  transport::MeshOptions mesh;  // the transport layer's settings (CANOPY_TRANSPORT among them), no comm id

  // Throws Error(Config) naming a bad value, as Settings::parse does.
  static CommunicatorSettings from(const Settings& settings);
};

}  // namespace canopy::collectives
