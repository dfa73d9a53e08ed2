// The liveness keys of a family in its store (liveness_monitor.hpp writes them, peer_silence.hpp reads
// them), and the counter they hold.
#pragma once

#include <fmt/format.h>

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>

namespace canopy::collectives {

// The rank's heartbeat counter ("1", "2", ...; absent before its first beat).
inline std::string beat_key(int rank) {
  return fmt::format("liveness/beats/{}", rank);
}
// Set when the rank destroyed its family's communicators: it left on purpose.
inline std::string left_key(int rank) {
  return fmt::format("liveness/left/{}", rank);
}
// Set by a watcher's monitor that found the rank silent, to the counter it stopped at.
inline std::string silent_key(int rank) {
  return fmt::format("liveness/silent/{}", rank);
}
// The rank's process (common/process_identity.hpp): a survivor on its host sees at once that it ended.
inline std::string process_key(int rank) {
  return fmt::format("liveness/process/{}", rank);
}

// A counter as the store holds it; 0 where the rank has not beaten yet ("").
inline std::int64_t heartbeat_count(std::string_view text) {
  std::int64_t value = 0;
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;
}

}  // namespace canopy::collectives
