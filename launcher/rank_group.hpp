// One attempt of the job on this node: start every local rank, relay their output, and supervise them until
// all have ended. The first rank to fail stops the others (SIGTERM, then SIGKILL after the grace period);
// a stop request to canopy-run (SIGINT, SIGTERM, SIGHUP) is forwarded to them the same way.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "launcher/launch_options.hpp"
#include "launcher/rank_process.hpp"

namespace canopy::launcher {

struct GroupOutcome {
  std::optional<RankExit> first_failure;  // the rank whose failure stopped the group
  int stop_signal = 0;                    // the signal that asked canopy-run to stop, if one did
  std::string launch_error;               // the program could not be started ("cannot run 'foo': ...")
  int launch_errno = 0;

  bool succeeded() const { return !first_failure && stop_signal == 0 && launch_error.empty(); }
};

// Runs one attempt: rank_envps[i] is the environment ("NAME=value") of local rank i. Returns once every
// rank has been reaped; never leaves a started rank behind, even when it throws.
GroupOutcome run_rank_group(const LaunchOptions& options,
                            const std::vector<std::vector<std::string>>& rank_envps, SignalWatch& signals);

}  // namespace canopy::launcher
