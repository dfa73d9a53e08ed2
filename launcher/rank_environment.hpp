// The environment a rank starts with: the launcher's own, plus the variables that tell the rank who it is
// and where the store is (torchrun's names and Canopy's own).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/env.hpp"
#include "launcher/launch_options.hpp"

namespace canopy::launcher {

// What is known only once the job runs: the store's real port, the token, the attempt number.
struct LaunchRound {
  std::uint16_t master_port = 0;  // canopy-run's store: CANOPY_MASTER_PORT
  std::string job_token;
  int restart_count = 0;  // the attempt; with --elastic, the replacements started so far (this one too)
  // canopy-run's own stderr is a terminal: ranks may draw progress lines on their stderr (a pipe to
  // canopy-run), which passes them through (CANOPY_STDERR_IS_TERMINAL; see docs/LAUNCHER.md).
  bool stderr_is_terminal = false;
  // MASTER_PORT, where torch's env:// store listens (torch_port.hpp); 0: master_port.
  std::uint16_t torch_master_port = 0;
  // When canopy-run started, in ns since 1970 (CLOCK_REALTIME): CANOPY_PROBE_LAUNCH_NS unless it was given
  // one (a script's earlier clock); 0: not set.
  std::int64_t launch_ns = 0;
};

// How a rank starts: with the group (every rank of an attempt), or as the replacement of a dead rank in
// an --elastic job (CANOPY_ELASTIC_JOIN=1: it joins the running group instead of forming one).
enum class RankStart { WithTheGroup, Replacement };

EnvMap rank_environment(const EnvMap& base, const LaunchOptions& options, const LaunchRound& round,
                        int local_rank, RankStart start = RankStart::WithTheGroup);

// "NAME=value" strings, the shape execve wants.
std::vector<std::string> to_envp_strings(const EnvMap& env);

}  // namespace canopy::launcher
