// CANOPY_ALGO: the algorithms a program asks for in place of the cost model's choice.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "canopy/types.hpp"

namespace canopy::collectives {

// "ring" (for every collective that has an algorithm of that name), or a list such as
// "allreduce=ring,broadcast=binomial" ("all_reduce" and "all-reduce" name the same collective; "auto"
// leaves one to the cost model). Throws Error(Config) naming the variable, the value and what it accepts.
std::map<Collective, std::string> parse_algorithm_overrides(std::string_view text);

}  // namespace canopy::collectives
