#include "collectives/elastic/join_ticket_count.hpp"

#include "common/log.hpp"
#include "rendezvous/join_keys.hpp"

namespace canopy::collectives {

std::uint64_t JoinTicketCount::read() {
  const std::int64_t tickets = tickets_.load();
  const Clock::time_point read_at{Clock::duration(read_at_.load())};
  if (tickets != kUnknown && Clock::now() - read_at <= timeout_) return static_cast<std::uint64_t>(tickets);
  asked_.store(true);
  return static_cast<std::uint64_t>(job_store_->add(rendezvous::kJoinTickets, 0));  // add(key, 0) only reads
}

void JoinTicketCount::refresh() noexcept {
  if (!asked_.load()) return;
  try {
    if (!own_handle_) own_handle_ = job_store_->open_another(timeout_);
    if (!own_handle_) return;  // this kind of store has none to give: read() goes on asking the store itself
    const std::int64_t tickets = own_handle_->add(rendezvous::kJoinTickets, 0);
    read_at_.store(Clock::now().time_since_epoch().count());  // before the count: read() never pairs a
    tickets_.store(tickets);                                    // fresh time with an old count for long
  } catch (const std::exception& e) {
    tickets_.store(kUnknown);
    log::debug("the monitor could not read the join tickets: {}", e.what());
  }
}

}  // namespace canopy::collectives
