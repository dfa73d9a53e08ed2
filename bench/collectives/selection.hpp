// What the command line names: collectives ("allreduce", "all") and algorithms ("ring,tree", "all", "auto").
#pragma once

#include <string>
#include <vector>

#include "canopy/types.hpp"

namespace canopy::bench {

// The name used on the command line and in JSON: "allreduce", "broadcast", ...
std::string command_name(Collective collective);

// "all" or one command name. Throws std::invalid_argument listing the known names.
std::vector<Collective> collectives_named(const std::string& name);

// A comma-separated list of algorithm names of `collective`, "all", or (when allowed) "auto".
// Throws std::invalid_argument naming the unknown algorithm and the known ones.
std::vector<std::string> algorithms_for(Collective collective, const std::string& list,
                                        bool allow_auto = true);

}  // namespace canopy::bench
