// What canopy-bench runs besides the calls it measures: lining the ranks up before the timed calls (sizing
// them to the slowest rank's warm-up, where --min-time asks), and bringing every rank's times and wrong
// count to rank 0. Each runs an algorithm fixed here, so that the bookkeeping never depends on what is
// measured (CANOPY_ALGO, the cost model's choice), and each takes O(lg P) dependent messages: a ring's
// 2(P - 1), with 512 ranks taking turns on 2 cores, cost about half a minute of a one-call sweep. All run
// on one binomial tree rooted at rank 0 (reduce-broadcast's and the binomial gather's), so that they make
// no link beyond its own: links are made on first use, each a connect and a store read.
#pragma once

#include <array>
#include <string_view>

#include "canopy/types.hpp"

namespace canopy::bench {

struct BookkeepingCall {
  Collective collective;
  std::string_view algorithm;
};

// Before the timed calls: the slowest rank's warm-up pace, on every rank (all must run the same count);
// being an all-reduce, also what lines the ranks up.
inline constexpr BookkeepingCall kLineUp{Collective::AllReduce, "reduce-broadcast"};
// After a size: every rank's window times and wrong count, to rank 0, which alone prints them.
inline constexpr BookkeepingCall kResultsToRankZero{Collective::Gather, "binomial"};

inline constexpr std::array kBookkeeping{kLineUp, kResultsToRankZero};

}  // namespace canopy::bench
