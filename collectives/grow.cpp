// A running group admits processes started later (docs/RELIABILITY.md, *Grow and join*): each newcomer
// takes a ticket in the job's store and waits; at a grow() the members agree on who of them is alive and
// how many tickets to admit, write the new group's plan for each admitted newcomer, and every one of them,
// members and newcomers, forms the group that plan describes.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "canopy/communicator.hpp"
#include "collectives/communicator_impl.hpp"
#include "collectives/grow_plan.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "common/settings.hpp"

namespace canopy {
namespace {

// In the job's store, beside every communicator's keys: a newcomer knows no communicator yet.
constexpr const char* kJoiners = "canopy/elastic/joiners";  // tickets taken so far

std::string plan_key(std::uint64_t ticket) {
  return fmt::format("canopy/elastic/admitted/{}", ticket);
}

std::uint64_t parse_count(const std::string& text) {
  std::uint64_t value = 0;
  if (std::from_chars(text.data(), text.data() + text.size(), value).ec != std::errc())
    fail(ErrorCode::Protocol, "grow: '{}' in the store where a count of tickets should be", text);
  return value;
}

}  // namespace

Communicator Communicator::grow() {
  Impl& old = impl();
  std::uint64_t number = 0;
  const collectives::Agreement members = old.agree(~std::uint32_t{0}, "grow", number);
  // The first member here fixes how many tickets this grow admits; every member reads its count, so a
  // newcomer that comes a moment later waits for the next grow instead of splitting the members.
  Store& job = *old.base_store();
  const std::string waiting = std::to_string(job.add(kJoiners, 0));
  const std::uint64_t admitted =
      parse_count(old.store()->compare_set(fmt::format("grow/{}/admitted", number), "", waiting));
  const collectives::GrowPlan plan = old.grow_plan(members.participants, number, old.admitted() + 1, admitted);
  const std::string text = plan.encode();
  for (std::uint64_t ticket = plan.first_ticket; ticket <= plan.admitted; ++ticket)
    job.set(plan_key(ticket), text);  // every member writes the same plan: any one of them may die
  const int rank = static_cast<int>(
      std::find(members.participants.begin(), members.participants.end(), old.rank) - members.participants.begin());
  log::info("rank {}: grow #{} of {}: {} members and {} newcomers", old.rank, number, old.describe(),
            plan.first_newcomer, plan.size - plan.first_newcomer);
  return Communicator(std::make_unique<Impl>(old.base_store(), rank, plan.size, old.options(), &plan, &old));
}

Communicator Communicator::join(std::shared_ptr<Store> store, const CommunicatorOptions& options) {
  const auto ticket = static_cast<std::uint64_t>(store->add(kJoiners, 1));
  const Duration timeout = options.timeout.count() > 0
                               ? options.timeout
                               : std::chrono::duration_cast<Duration>(
                                     Settings::from_environment().duration("CANOPY_TIMEOUT"));
  std::string text;
  try {
    text = store->get(plan_key(ticket), timeout);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::Timeout) throw;
    fail(ErrorCode::Timeout,
         "join: this process (ticket {}) was not admitted within {} s: no member of the running group called "
         "grow() (or this process met another job's store)",
         ticket, std::chrono::duration<double>(timeout).count());
  }
  const collectives::GrowPlan plan = collectives::GrowPlan::decode(text);
  return Communicator(
      std::make_unique<Impl>(std::move(store), plan.rank_of_ticket(ticket), plan.size, options, &plan, nullptr));
}

}  // namespace canopy
