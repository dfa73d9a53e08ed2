#include "collectives/forming/environment_group.hpp"

#include "common/env.hpp"

namespace canopy::collectives {

EnvironmentGroup join_environment_group(const CommunicatorOptions& options, rendezvous::RankClaim claim) {
  Duration timeout = options.timeout.count() > 0 ? options.timeout : default_timeout();
  EnvironmentGroup joined{rendezvous::rendezvous(current_environment(), timeout, claim), options};
  const rendezvous::LaunchInfo& info = joined.rendezvous.info;
  joined.options.timeout = timeout;
  if (joined.options.local_rank < 0) {
    joined.options.local_rank = info.local_rank;
    joined.options.local_size = info.local_world_size;
  }
  if (joined.options.job_token.empty()) joined.options.job_token = info.job_token;
  return joined;
}

}  // namespace canopy::collectives
