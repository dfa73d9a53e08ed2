// What canopy-run --elastic does when a rank dies (docs/LAUNCHER.md, "Elastic jobs"): start a replacement
// in its slot, let the group go on without it, or stop the job. Pure: the supervisor (rank_group.cpp)
// counts the ranks and acts.
#pragma once

#include <string>

#include "common/elastic_range.hpp"

namespace canopy::launcher {

enum class AfterDeath { Replace, GoOn, StopTheJob };

// The group at the moment a rank has died, the dead rank not counted.
struct GroupCount {
  int running = 0;               // still running (replacements that have not joined yet included)
  int finished = 0;              // exited 0: the job is ending
  int replacements_started = 0;  // so far, each one restart spent
};

struct DeathVerdict {
  AfterDeath action = AfterDeath::StopTheJob;
  std::string why;  // for canopy-run's report: "--max-restarts 1 is spent; 3 ranks go on (--elastic 2:4)"
};

// The job fails when fewer than range.min ranks are left (running or finished); otherwise the dead rank
// is replaced while restarts remain and no rank has finished (once one has, nobody would grow to admit
// a replacement), and the group goes on without it when not. A group on one node never has more than
// --nproc <= range.max ranks, so a replacement never takes it above MAX.
// `label` names the range in the verdict's words ("--elastic 3:4" when empty).
DeathVerdict after_death(const ElasticRange& range, int max_restarts, const GroupCount& group,
                         const std::string& label = {});

}  // namespace canopy::launcher
