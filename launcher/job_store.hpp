// The job's store, which canopy-run hosts on node 0 for every attempt (so that no rank has to host it and a
// restarted group finds it still there): the token that keeps strangers out, hosting it, and, with several
// nodes, keeping it up until every other node is done with it (each other node's canopy-run reports its end
// through the store; node 0 waits for those reports, bounded, before it exits).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "canopy/store.hpp"
#include "launcher/launch_options.hpp"
#include "launcher/rank_environment.hpp"
#include "launcher/rank_process.hpp"

namespace canopy::launcher {

// 128 random bits from /dev/urandom as 32 lowercase hex digits; throws Error(System) when it cannot read
// them.
std::string generate_job_token();

// Listens on options.listen_addr (every address when empty) and options.master_port (0: a free port; the
// real one is server->port()). Throws canopy::Error naming the address when it cannot listen.
std::unique_ptr<TcpStoreServer> host_store(const LaunchOptions& options, const std::string& job_token);

// Where node 0 reaches the store it hosts: the address it listens on (loopback when it listens everywhere).
std::string local_store_host(const LaunchOptions& options);

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
