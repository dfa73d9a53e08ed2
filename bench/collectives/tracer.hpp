// The teaching view of a simulated collective (canopy-bench trace): who sends what to whom, round by round
// (text) and over time (an SVG picture with one lane per rank and one arrow per message).
#pragma once

#include <string>

#include "collectives/schedules/schedule.hpp"
#include "collectives/schedules/simulator.hpp"

namespace canopy::bench {

using collectives::CollectiveCall;
using collectives::Simulation;

// One line per logical round, e.g. "round 2: 0 -> 2 [0..4), 1 -> 3 [4..8)" (element ranges of the
// sender's Data; "signal" for a zero-byte message), after a header with the call and the prediction.
std::string trace_text(const Simulation& simulation, const CollectiveCall& call);

// A self-contained SVG document: ranks as horizontal lanes, time to the right, each message an arrow
// from its sender's lane at its start to its receiver's lane at its finish, coloured by the part of the
// buffer it carries (so a chunk keeps its colour as it travels). Hover an arrow for its details.
// When the model predicts no time at all (alpha = beta = 0), rounds are used as the time axis.
std::string trace_svg(const Simulation& simulation, const CollectiveCall& call);

// "12.5 us", "3.2 ms", "35 s": seconds as a person reads them.
std::string format_seconds(double seconds);

}  // namespace canopy::bench
