// With several nodes, node 0's canopy-run hosts the store for all of them: it must not take the store down
// while another node's ranks may still be using it. Each other node's canopy-run reports its end through the
// store; node 0 waits for those reports (bounded) before it exits.
#pragma once

#include <chrono>

#include "launcher/launch_options.hpp"
#include "launcher/rank_environment.hpp"
#include "launcher/signal_watch.hpp"

namespace canopy::launcher {

// How long node 0 waits for the other nodes to finish once its own ranks have ended.
inline constexpr std::chrono::seconds kOtherNodesLimit{60};

// On node K > 0: tells node 0 that this node is done with the store. Never throws; a node 0 that is
// already gone is only logged.
void report_node_finished(const LaunchOptions& options, const LaunchRound& round);

// On node 0: returns once every other node has reported, a stop request arrives, or `limit` passes
// (each of the last two is reported on stderr). Never throws.
void wait_for_other_nodes(const LaunchOptions& options, const LaunchRound& round, SignalWatch& signals,
                          std::chrono::milliseconds limit);

}  // namespace canopy::launcher
