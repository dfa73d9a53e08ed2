// A running group admits processes started later (docs/ELASTIC.md, *Grow and join*): each newcomer
// takes a ticket in the job's store and waits; at a grow() the members agree on who of them is alive and
// how many tickets to admit, write the new group's plan for each admitted newcomer, and every one of them,
// members and newcomers, forms the group that plan describes.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <optional>

#include "canopy/communicator.hpp"
#include "collectives/communicator_impl.hpp"
#include "collectives/elastic/communicator_family.hpp"
#include "collectives/elastic/grow_plan.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "common/process_identity.hpp"
#include "common/settings.hpp"
#include "rendezvous/join_keys.hpp"

namespace canopy {
namespace {

using rendezvous::join_abandoned_key;
using rendezvous::join_plan_key;
using rendezvous::joiner_process_key;
using rendezvous::kJoinTickets;

std::uint64_t parse_count(const std::string& text) {
  std::uint64_t value = 0;
  if (std::from_chars(text.data(), text.data() + text.size(), value).ec != std::errc())
    fail(ErrorCode::Protocol, "grow: '{}' in the store where a count of tickets should be", text);
  return value;
}

}  // namespace

// Every rank of the grown group, members and newcomers alike, agrees that it formed the group. Where a
// newcomer is gone (it died while the group formed), the others shrink the group at once, so that nobody
// is handed a communicator with a dead rank it would find only at its first call; where a member is
// gone, the members gave the grow up (grow() says so), and a newcomer fails with them.
Communicator Communicator::confirm_grown(Communicator grown, int members) {
  std::uint64_t number = 0;
  const collectives::Agreement formed = grown.impl().agree(1, "grow confirmation", number);
  if (static_cast<int>(formed.participants.size()) == grown.size()) {
    grown.impl().family()->peers_formed();
    return grown;
  }
  for (const auto& [rank, why] : formed.left_out)
    if (rank < members)
      fail(ErrorCode::PeerFailed, "rank {}: the members gave up {}: member rank {} is gone ({})",
           grown.rank(), grown.impl().describe(), rank, why);
  log::warn("rank {}: a newcomer died while the grown group of {} formed; shrinking it", grown.rank(),
            grown.impl().describe());
  return grown.shrink();
}

Communicator Communicator::grow() {
  Impl& old = impl();
  std::uint64_t number = 0;
  const collectives::Agreement members = old.agree(~std::uint32_t{0}, "grow", number);
  // The first member here fixes how many tickets this grow admits; every member reads its count, so a
  // newcomer that comes a moment later waits for the next grow instead of splitting the members.
  Store& job = *old.base_store();
  const std::string waiting = std::to_string(job.add(kJoinTickets, 0));
  const std::uint64_t admitted =
      parse_count(old.store()->compare_set(fmt::format("grow_admitted/{}", number), "", waiting));
  const collectives::GrowPlan plan =
      old.grow_plan(members.participants, number, old.admitted() + 1, admitted);
  const std::string text = plan.encode();
  for (std::uint64_t ticket = plan.first_ticket; ticket <= plan.admitted; ++ticket)
    job.set(join_plan_key(ticket), text);  // every member writes the same plan: any one of them may die
  old.spend_tickets(plan.admitted);        // the next grow admits later tickets, whatever happens to these
  const int rank =
      static_cast<int>(std::find(members.participants.begin(), members.participants.end(), old.rank) -
                       members.participants.begin());
  log::info("rank {}: grow #{} of {}: {} members and {} newcomers", old.rank, number, old.describe(),
            plan.first_newcomer, plan.size - plan.first_newcomer);
  std::unique_ptr<Impl> formed;
  std::optional<Error> failure;
  try {
    formed = std::make_unique<Impl>(old.base_store(), rank, plan.size, old.options(), &plan, &old,
                                    old.grow_check(members.participants, plan));
  } catch (const Error& e) {
    failure = e;
  }
  // The members decide together whether the grow holds: then either all of them go on in the new group
  // or all keep the old one (which a grow never revokes).
  std::uint64_t confirmation = 0;
  const collectives::Agreement everywhere = old.agree(formed ? 1 : 0, "grow confirmation", confirmation);
  if (everywhere.value != 1 || everywhere.participants != members.participants) {
    const std::string why = fmt::format(
        "rank {}: grow #{} of {} did not form, so this communicator goes on as it was: {}", old.rank, number,
        old.describe(),
        failure                 ? std::string(failure->what())
        : everywhere.value != 1 ? std::string("another member could not form it (its error says why)")
                                : std::string("a member died while it formed"));
    // A newcomer may still wait for a member that will never come (a key of the group's set-up).
    for (std::uint64_t ticket = plan.first_ticket; ticket <= plan.admitted; ++ticket)
      job.compare_set(join_abandoned_key(ticket), "", why);
    throw Error(ErrorCode::PeerFailed, why);
  }
  return confirm_grown(Communicator(std::move(formed)), plan.first_newcomer);
}

Communicator Communicator::join(std::shared_ptr<Store> store, const CommunicatorOptions& options) {
  const auto ticket = static_cast<std::uint64_t>(store->add(kJoinTickets, 1));
  store->set(joiner_process_key(ticket), this_process_identity());
  const Duration timeout =
      options.timeout.count() > 0
          ? options.timeout
          : std::chrono::duration_cast<Duration>(Settings::from_environment().duration("CANOPY_TIMEOUT"));
  std::string text;
  try {
    text = store->get(join_plan_key(ticket), timeout);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::Timeout) throw;
    fail(ErrorCode::Timeout,
         "join: this process (ticket {}) was not admitted within {} s: no member of the running group called "
         "grow() (or this process met another job's store)",
         ticket, std::chrono::duration<double>(timeout).count());
  }
  const collectives::GrowPlan plan = collectives::GrowPlan::decode(text);
  // The members give the grow up together (grow() says why in the store): then this process's waits for
  // them end at once, not at the deadline.
  auto members_gave_up = [store, ticket] {
    if (store->check({join_abandoned_key(ticket)}))
      fail(ErrorCode::PeerFailed, "join: the members gave up the grow that admitted this process (ticket {}): {}",
           ticket, store->get(join_abandoned_key(ticket)));
  };
  return confirm_grown(Communicator(std::make_unique<Impl>(store, plan.rank_of_ticket(ticket), plan.size, options,
                                                          &plan, nullptr, members_gave_up)),
                       plan.first_newcomer);
}

std::uint64_t Communicator::joiners_waiting() const {
  const Impl& comm = impl();
  collectives::JoinTicketCount* count = comm.family()->join_tickets();
  const std::uint64_t tickets =
      count ? count->read() : static_cast<std::uint64_t>(comm.base_store()->add(kJoinTickets, 0));
  return tickets > comm.admitted() ? tickets - comm.admitted() : 0;
}

std::function<void()> Communicator::Impl::grow_check(const std::vector<int>& members,
                                                     const collectives::GrowPlan& plan) {
  return [silence = silence(), job = base_store_, members, me = rank, world = world_ranks_,
          first = plan.first_ticket, last = plan.admitted] {
    for (int member : members) {
      if (member == me) continue;
      if (const std::string why = silence->gone(member); !why.empty())
        fail(ErrorCode::PeerFailed,
             "rank {}: member rank {} (world rank {}) died while the grown group formed: {}", me, member,
             world[static_cast<std::size_t>(member)], why);
    }
    for (std::uint64_t ticket = first; ticket <= last; ++ticket) {
      if (!job->check({joiner_process_key(ticket)})) continue;
      if (const std::string ended = process_end(job->get(joiner_process_key(ticket))); !ended.empty())
        fail(ErrorCode::PeerFailed, "rank {}: the newcomer with ticket {} {} while the grown group formed",
             me, ticket, ended);
    }
  };
}

}  // namespace canopy
