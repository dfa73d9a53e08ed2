// The algorithms the schedule tests walk, and the names their parameterized tests take.
#pragma once

#include <fmt/format.h>

#include <string>
#include <vector>

#include "collectives/schedules/algorithms.hpp"

namespace canopy::testing {

// Every algorithm of the collectives that reduce or spread one buffer (broadcast, reduce, all-reduce,
// all-gather, reduce-scatter, barrier), in the table's order.
inline std::vector<const collectives::Algorithm*> every_algorithm() {
  std::vector<const collectives::Algorithm*> all;
  for (Collective collective : {Collective::Broadcast, Collective::Reduce, Collective::AllReduce,
                                Collective::AllGather, Collective::ReduceScatter, Collective::Barrier}) {
    for (const collectives::Algorithm& algorithm : collectives::algorithms(collective))
      all.push_back(&algorithm);
  }
  return all;
}

// "all_reduce_two_level": a test name for the algorithm.
inline std::string name_of(const collectives::Algorithm& algorithm) {
  std::string name = fmt::format("{}_{}", to_string(algorithm.collective), algorithm.name);
  for (char& c : name)
    if (c == '-') c = '_';
  return name;
}

}  // namespace canopy::testing
