#include "collectives/elastic/join_ticket_count.hpp"

#include "common/log.hpp"
#include "rendezvous/join_keys.hpp"

namespace canopy::collectives {

std::uint64_t JoinTicketCount::read() {
  {
    std::lock_guard lock(mutex_);
    if (last_ && Clock::now() - last_->at <= timeout_) return last_->tickets;
  }
  asked_.store(true);
  return static_cast<std::uint64_t>(job_store_->add(rendezvous::kJoinTickets, 0));  // add(key, 0) only reads
}

void JoinTicketCount::refresh() noexcept {
  if (!asked_.load()) return;
  std::optional<Reading> reading;
  try {
    if (!own_handle_) own_handle_ = job_store_->open_another(timeout_);
    if (!own_handle_) return;  // this kind of store has none to give: read() goes on asking the store itself
    reading = Reading{static_cast<std::uint64_t>(own_handle_->add(rendezvous::kJoinTickets, 0)), Clock::now()};
  } catch (const std::exception& e) {
    log::debug("the monitor could not read the join tickets: {}", e.what());
  }
  std::lock_guard lock(mutex_);
  last_ = reading;
}

}  // namespace canopy::collectives
