// What every rank of a grown group must know to form it (Communicator::grow, Communicator::join): the
// members derive it from what they share, and hand it to each newcomer through the store
// (docs/ELASTIC.md, *Grow and join*).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collectives/schedules/simulator.hpp"

namespace canopy::collectives {

struct GrowPlan {
  std::string prefix;          // the group's keys in the job's store
  std::uint64_t comm_id = 0;   // derived from the old group's id and the grow's number
  std::uint32_t generation = 0;
  int size = 0;
  int first_newcomer = 0;      // the members are ranks 0 .. first_newcomer - 1, in their old order
  std::uint64_t first_ticket = 0;  // the newcomer with this join ticket is rank first_newcomer, and so on
  std::uint64_t admitted = 0;      // tickets admitted so far, this grow's included
  std::vector<int> world_ranks;    // by rank: the job's ranks (a newcomer gets the next unused one)
  LinkModel link;                  // the members' measured links: a newcomer runs no probe

  int rank_of_ticket(std::uint64_t ticket) const {
    return first_newcomer + static_cast<int>(ticket - first_ticket);
  }
  std::string encode() const;
  static GrowPlan decode(const std::string& text);  // Error(Protocol) for what encode() never wrote
};

}  // namespace canopy::collectives
