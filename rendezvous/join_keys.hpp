// Where a process started later waits to join a running group, in the job's store beside every
// communicator's keys (a newcomer knows no communicator yet): Communicator::join and grow write them,
// canopy-run --elastic reads them to tell a replacement the group admitted from one still waiting.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>

namespace canopy::rendezvous {

// Tickets taken so far (an add counter): a newcomer's ticket is the counter after its add of 1.
inline constexpr const char* kJoinTickets = "canopy/elastic/joiners";

// The grown group's plan for the newcomer holding `ticket`, written by the members that admit it.
inline std::string join_plan_key(std::uint64_t ticket) {
  return fmt::format("canopy/elastic/admitted/{}", ticket);
}

// Why the members gave up the grow that admitted the newcomer holding `ticket`, written by each of them:
// the newcomer's waits for them end on it.
inline std::string join_abandoned_key(std::uint64_t ticket) {
  return fmt::format("canopy/elastic/abandoned/{}", ticket);
}

// The newcomer's process (common/process_identity.hpp), written as it takes the ticket: a member on its
// host sees at once that it died, and canopy-run which of its replacements it is.
inline std::string joiner_process_key(std::uint64_t ticket) {
  return fmt::format("canopy/elastic/joiner/{}", ticket);
}

}  // namespace canopy::rendezvous
