#include "collectives/elastic/peer_silence.hpp"

#include <fmt/format.h>

#include "collectives/elastic/liveness_keys.hpp"
#include "common/process_identity.hpp"

namespace canopy::collectives {

PeerSilence::PeerSilence(std::shared_ptr<Store> store, std::vector<int> family_ranks,
                         LivenessSettings settings, bool beating)
    : store_(std::move(store)),
      family_ranks_(std::move(family_ranks)),
      settings_(settings),
      beating_(beating && store_ != nullptr && settings.enabled()),
      seen_(family_ranks_.size()) {}

std::string PeerSilence::gone(int rank) {
  if (!beating_) return {};
  const int watched = family_ranks_[static_cast<std::size_t>(rank)];
  // The monitor's keys (liveness_monitor.cpp): it marks a rank that destroyed its family as left.
  if (store_->check({left_key(watched)})) return fmt::format("rank {} destroyed its communicator", rank);
  Seen& seen = seen_[static_cast<std::size_t>(rank)];
  // Its monitor names its process once; where this rank shares its kernel, the kernel says at once
  // whether it ended.
  if (seen.process.empty()) {
    const std::string identity_key = process_key(watched);
    if (store_->check({identity_key})) seen.process = store_->get(identity_key);
  }
  if (!seen.process.empty())
    if (const std::string ended = process_end(seen.process); !ended.empty())
      return fmt::format("rank {} {}", rank, ended);
  const std::string key = beat_key(watched);
  const std::string beats = store_->check({key}) ? store_->get(key) : std::string();
  // A watcher's monitor already found it silent for the timeout: gone at once, while its counter still
  // stands where the verdict saw it stop (a stopped rank that was continued beats again).
  const std::string verdict_key = silent_key(watched);
  if (store_->check({verdict_key}) && heartbeat_count(store_->get(verdict_key)) == heartbeat_count(beats))
    return fmt::format(
        "rank {} sent no heartbeat for the heartbeat timeout ({:.1f} s), as its watcher found (its "
        "counter stayed at {})",
        rank, std::chrono::duration<double>(settings_.timeout).count(), beats.empty() ? "none" : beats);
  const Clock::time_point now = Clock::now();
  if (!seen.looked || beats != seen.beats) {
    seen.beats = beats;
    seen.since = now;
    seen.looked = true;
    return {};
  }
  const double still = std::chrono::duration<double>(now - seen.since).count();
  if (now - seen.since < settings_.timeout) return {};
  return fmt::format("rank {} sent no heartbeat for {:.1f} s (its counter stayed at {})", rank, still,
                     beats.empty() ? "none" : beats);
}

}  // namespace canopy::collectives
