#include "collectives/peer_silence.hpp"

#include <fmt/format.h>

namespace canopy::collectives {

PeerSilence::PeerSilence(std::shared_ptr<Store> store, std::vector<int> family_ranks, LivenessSettings settings,
                         bool beating)
    : store_(std::move(store)),
      family_ranks_(std::move(family_ranks)),
      settings_(settings),
      beating_(beating && store_ != nullptr && settings.enabled()),
      seen_(family_ranks_.size()) {}

std::string PeerSilence::gone(int rank) {
  if (!beating_) return {};
  const int watched = family_ranks_[static_cast<std::size_t>(rank)];
  // The monitor's keys (liveness_monitor.cpp): it marks a rank that destroyed its family as left.
  if (store_->check({fmt::format("liveness/left/{}", watched)}))
    return fmt::format("rank {} destroyed its communicator", rank);
  const std::string key = fmt::format("liveness/beats/{}", watched);
  const std::string beats = store_->check({key}) ? store_->get(key) : std::string();
  Seen& seen = seen_[static_cast<std::size_t>(rank)];
  const Clock::time_point now = Clock::now();
  if (!seen.looked || beats != seen.beats) {
    seen = {beats, now, true};
    return {};
  }
  const double still = std::chrono::duration<double>(now - seen.since).count();
  if (now - seen.since < settings_.timeout) return {};
  return fmt::format("rank {} sent no heartbeat for {:.1f} s (its counter stayed at {})", rank, still,
                     beats.empty() ? "none" : beats);
}

}  // namespace canopy::collectives
