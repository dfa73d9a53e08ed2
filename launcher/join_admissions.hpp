// Which of canopy-run's replacements an elastic group has admitted (docs/LAUNCHER.md, "Elastic jobs"),
// read from the job's store: each newcomer names its process beside its join ticket, and the members
// write a plan for every ticket they admit (rendezvous/join_keys.hpp). With it canopy-run stops the
// replacements that no member is left to admit, instead of letting each wait out its CANOPY_TIMEOUT.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>

#include "canopy/store.hpp"
#include "launcher/launch_options.hpp"
#include "launcher/rank_environment.hpp"

namespace canopy::launcher {

// Where a replacement stands: no ticket (it has not called join() yet, joins some other way, or the store
// cannot tell), a ticket the group has not admitted (it waits in join()), or admitted (a member).
enum class JoinState { NoTicket, Waiting, Admitted };

// The JoinState of the process `pid`.
using JoinQuery = std::function<JoinState(pid_t pid)>;

class JoinAdmissions {
 public:
  // `store`: the job's store as its ranks see it (with their round's prefix).
  explicit JoinAdmissions(std::shared_ptr<Store> store) : store_(std::move(store)) {}

  // A store that cannot be read says NoTicket: canopy-run never stops a rank on a doubt.
  JoinState state_of(pid_t pid) const;

 private:
  std::shared_ptr<Store> store_;
};

// The admissions of a job whose store `store` is (without a round's prefix: an elastic job meets in round 0).
JoinQuery admissions_in(std::shared_ptr<Store> store);

// The admissions of the --elastic job whose store this canopy-run hosts (node 0, one round), through a
// connection of its own made on the first question.
JoinQuery admissions_of_job(const LaunchOptions& options, const LaunchRound& round);

}  // namespace canopy::launcher
