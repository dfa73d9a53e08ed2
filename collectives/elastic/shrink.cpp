// Going on after a failure: revoke, agree and shrink (docs/RELIABILITY.md, *Revoke, agree, shrink*).
// revoke ends a communicator for every member; agree and shrink run in the store, not on the
// communicator's links, so they work on a communicator that has failed or been revoked.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <optional>

#include "canopy/communicator.hpp"
#include "collectives/communicator_impl.hpp"
#include "collectives/elastic/fault_agreement.hpp"
#include "collectives/elastic/peer_silence.hpp"
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
  collectives::AgreementRound round;
  round.rank = rank;
  round.size = size;
  round.purpose = std::string(purpose);
  round.what = what;
  round.deadline = Deadline::after(timeout_);
  // Often enough that a rank found gone costs little more than the heartbeat timeout.
  const Duration interval = family_->liveness_settings().interval;
  round.poll = family_->watching() ? std::clamp(interval / 2, Duration(10), Duration(250)) : Duration(250);
  collectives::Agreement agreement = collectives::agree_in_store(store, round, flags, *silence());
  for (const auto& [gone, why] : agreement.left_out)
    log::warn("rank {}: {} went on without rank {} (world rank {}): {}", rank, what, gone,
              world_ranks_[static_cast<std::size_t>(gone)], why);
  return agreement;
}

const std::shared_ptr<collectives::PeerSilence>& Communicator::Impl::silence() {
  if (!silence_)
    silence_ = std::make_shared<collectives::PeerSilence>(family_->failure_store, family_ranks_,
                                                          family_->liveness_settings(), family_->watching());
  return silence_;
}

Communicator::Impl::Origin Communicator::Impl::shrunk_origin(const std::vector<int>& members) {
  Origin origin;
  origin.new_family = true;
  origin.check_members = [silence = silence(), members, me = rank, world = world_ranks_] {
    for (int member : members) {
      if (member == me) continue;
      const std::string why = silence->gone(member);
      if (!why.empty())
        fail(ErrorCode::PeerFailed, "rank {}: rank {} (world rank {}) died while the shrunk group formed: {}", me,
             member, world[static_cast<std::size_t>(member)], why);
    }
  };
  origin.check_every = std::clamp(family_->liveness_settings().interval, Duration(50), Duration(1000));
  return origin;
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
// shrink. Then, until a round holds: agree on the members (the survivors, in the old order), form their
// group, and agree that every member formed it; a member that died in between fails that second
// agreement on every survivor alike, and the next round leaves it out.
Communicator Communicator::shrink() {
  Impl& old = impl();
  old.revoke("shrink() was called");
  for (;;) {
    std::uint64_t number = 0;
    const collectives::Agreement members = old.agree(~std::uint32_t{0}, "shrink", number);
    log::info("rank {}: shrinking {} to ranks [{}]", old.rank, old.describe(), fmt::join(members.participants, ", "));
    std::unique_ptr<Impl> formed;
    std::optional<Error> failure;
    try {
      formed = std::make_unique<Impl>(old, members.participants, fmt::format("shrink/{}", number), 0,
                                      old.shrunk_origin(members.participants));
    } catch (const Error& e) {
      failure = e;
    }
    std::uint64_t confirmation = 0;
    const collectives::Agreement everywhere = old.agree(formed ? 1 : 0, "shrink confirmation", confirmation);
    if (everywhere.participants != members.participants) {
      log::warn("rank {}: a member died while the shrunk group of {} formed; shrinking again", old.rank,
                old.describe());
      continue;  // strictly fewer members: the rounds end
    }
    if (everywhere.value == 1) {
      formed->family()->peers_formed();  // a member that dies before its first heartbeat is now silent
      return Communicator(std::move(formed));
    }
    // Every member is alive, yet one could not form the group: no later round would do better.
    if (failure) throw Error(failure->code(), fmt::format("rank {}: shrink #{} of {}: {}", old.rank, number,
                                                          old.describe(), failure->what()));
    fail(ErrorCode::PeerFailed, "rank {}: shrink #{} of {}: another member could not form the new group (its "
         "error says why)", old.rank, number, old.describe());
  }
}

}  // namespace canopy
