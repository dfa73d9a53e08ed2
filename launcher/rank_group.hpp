// One attempt of the job on this node: start every local rank, relay their output, and supervise them until
// all have ended. The first rank to fail stops the others (SIGTERM, then SIGKILL after the grace period);
// a stop request to canopy-run (SIGINT, SIGTERM, SIGHUP) is forwarded to them the same way. With
// --elastic, a rank that fails does not stop the others: elastic_policy.hpp decides whether a replacement
// starts in its slot, and only a group left with fewer than MIN ranks is stopped, or one where no member
// is left to admit the replacements still waiting.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "launcher/join_admissions.hpp"
#include "launcher/launch_options.hpp"
#include "launcher/node_watch.hpp"
#include "launcher/rank_process.hpp"

namespace canopy::launcher {

struct GroupOutcome {
  std::optional<RankExit> first_failure;  // the rank whose failure stopped the group (with --elastic: the
                                          // death that left fewer than MIN ranks)
  int replacements_started = 0;           // --elastic: dead ranks replaced
  int stop_signal = 0;                    // the signal that asked canopy-run to stop, if one did
  std::string launch_error;               // the program could not be started ("cannot run 'foo': ...")
  int launch_errno = 0;
  std::string job_lost;                   // --rdzv-backend etcd: why this node stopped (too few nodes left)

  bool succeeded() const {
    return !first_failure && stop_signal == 0 && launch_error.empty() && job_lost.empty();
  }
};

// The environment of the replacement of local rank `local_rank`, the `replacement`-th of the job (from 1).
using ReplacementEnvironment = std::function<std::vector<std::string>(int local_rank, int replacement)>;

// What an --elastic group needs beyond its ranks' environments.
struct ElasticHooks {
  ReplacementEnvironment replacement_env;
  // Where the replacement with this pid stands in joining the group (join_admissions.hpp); empty: never
  // asked, and a replacement nobody admits waits out its own timeout.
  JoinQuery join_state;
  // --rdzv-backend etcd: what the node watch says, asked once a loop (node_watch.hpp); empty: never asked.
  std::function<JobNews()> job_news;
};

// Runs one attempt: rank_envps[i] is the environment ("NAME=value") of local rank i; with --elastic,
// `elastic` starts and follows the replacements. Returns once every rank has been reaped; never leaves a
// started rank behind, even when it throws.
GroupOutcome run_rank_group(const LaunchOptions& options,
                            const std::vector<std::vector<std::string>>& rank_envps, SignalWatch& signals,
                            const ElasticHooks& elastic = {});

}  // namespace canopy::launcher
