// Lower bounds on a call's time that need no simulation of every rank: predict() (simulator.hpp) asks
// them first, so that an algorithm certainly slower than the best one found so far costs one rank's
// schedule, not a whole simulation.
#pragma once

#include <cstddef>
#include <optional>

#include "collectives/schedules/simulator.hpp"

namespace canopy::collectives {

// What rank `rank`'s schedule alone says the call takes at least (cut_off set: it is a bound).
Prediction one_rank_bound(const Algorithm& algorithm, CollectiveCall call, int rank, std::size_t element_size,
                          const LinkModel& model);

// A lower bound past `bound`, or nothing where these bounds do not rule the algorithm out.
std::optional<Prediction> ruled_out(const Algorithm& algorithm, const CollectiveCall& call,
                                    std::size_t element_size, const LinkModel& model,
                                    const PredictionBound& bound);

}  // namespace canopy::collectives
