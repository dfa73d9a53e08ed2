// Going on after a failure: revoke, agree and shrink (docs/RELIABILITY.md, *Revoke, agree, shrink*).
// revoke ends a communicator for every member; agree and shrink run in the store, not on the
// communicator's links, so they work on a communicator that has failed or been revoked.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "canopy/communicator.hpp"
#include "collectives/communicator_impl.hpp"
#include "collectives/fault_agreement.hpp"
#include "collectives/peer_silence.hpp"
#include "common/error.hpp"
#include "common/log.hpp"

namespace canopy {

collectives::Agreement Communicator::Impl::agree(std::uint32_t flags, std::string_view purpose,
                                                 std::uint64_t& number) {
  number = ++agreements_;
  const std::string what = fmt::format("{} #{} of {}", purpose, number, describe());
  if (!failure_store_)
    fail(ErrorCode::PeerFailed, "rank {}: {} cannot run: the store could not be reached when this communicator formed",
         rank, what);
  PrefixStore store(failure_store_, fmt::format("agreement/{}", number));
  collectives::PeerSilence silence(family_->failure_store, family_ranks_, family_->liveness_settings(),
                                   family_->watching());
  collectives::AgreementRound round;
  round.rank = rank;
  round.size = size;
  round.what = what;
  round.deadline = Deadline::after(timeout_);
  // Often enough that a rank found gone costs little more than the heartbeat timeout.
  const Duration interval = family_->liveness_settings().interval;
  round.poll = family_->watching() ? std::clamp(interval / 2, Duration(10), Duration(250)) : Duration(250);
  collectives::Agreement agreement = collectives::agree_in_store(store, round, flags, silence);
  for (const auto& [gone, why] : agreement.left_out)
    log::warn("rank {}: {} went on without rank {} (world rank {}): {}", rank, what, gone,
              world_ranks_[static_cast<std::size_t>(gone)], why);
  return agreement;
}

std::uint32_t Communicator::generation() const {
  return impl().generation();
}

void Communicator::revoke(const std::string& reason) {
  impl().revoke(reason);
}

std::uint32_t Communicator::agree(std::uint32_t flags) {
  std::uint64_t number = 0;
  return impl().agree(flags, "agreement", number).value;
}

// Revokes first, so that a survivor still waiting in a call of the old group wakes and comes to the
// shrink; the members are the survivors the agreement counted, in the old order.
Communicator Communicator::shrink() {
  Impl& old = impl();
  old.revoke("shrink() was called");
  std::uint64_t number = 0;
  const collectives::Agreement agreement = old.agree(~std::uint32_t{0}, "shrink", number);
  log::info("rank {}: shrinking {} to ranks [{}]", old.rank, old.describe(), fmt::join(agreement.participants, ", "));
  return Communicator(std::make_unique<Impl>(old, agreement.participants, fmt::format("shrink/{}", number), 0,
                                             Impl::Lineage::NewFamily));
}

}  // namespace canopy
