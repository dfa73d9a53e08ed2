// The table of algorithms: for each collective, the schedules Canopy can build and their names
// (used alike by CANOPY_ALGO, canopy-bench --algo and the benchmark's JSON).
#pragma once

#include <span>
#include <string_view>

#include "collectives/schedules/schedule.hpp"

namespace canopy::collectives {

using ScheduleBuilder = Schedule (*)(const CollectiveCall& call);

struct Algorithm {
  Collective collective;
  std::string_view name;     // "ring", "binomial", ...
  std::string_view summary;  // one line for --help and the tracer
  ScheduleBuilder build;
  // Built of a level inside each host and a level between hosts (from CollectiveCall::hosts); with one
  // host, or one rank per host, it is a flat algorithm by another name.
  bool two_level = false;
  // Goes through the host's cells where the call fits them (CollectiveCall::through_cells): every rank
  // writes its part once and reads the others' where they lie (one_shot_schedules.cpp). Elsewhere its
  // schedule computes the same bits with messages.
  bool one_shot = false;
  // The messages of the longest chain every call of it sends, each waiting for the one before (a ring
  // all-reduce's 2(p-1)): its latency is at least that many alphas, which rules it out of a choice
  // before its schedules are built. Null where no such chain is worth stating.
  std::uint64_t (*chain_of_messages)(const CollectiveCall& call) = nullptr;
};

// The algorithms of one collective, in a fixed order (an algorithm's index travels in frame headers).
std::span<const Algorithm> algorithms(Collective collective);
// nullptr when no algorithm of that name exists for the collective.
const Algorithm* find_algorithm(Collective collective, std::string_view name);
// Index of `algorithm` within algorithms(algorithm.collective).
std::uint8_t algorithm_index(const Algorithm& algorithm);

}  // namespace canopy::collectives
