// join_training_job: Communicator::from_environment, keeping the store for the program's own use.
#include "canopy/gradsync.hpp"
#include "common/env.hpp"
#include "common/log.hpp"
#include "rendezvous/bootstrap.hpp"

namespace canopy {

TrainingJob join_training_job(const CommunicatorOptions& options) {
  Duration timeout = options.timeout.count() > 0 ? options.timeout : default_timeout();
  rendezvous::Rendezvous group = rendezvous::rendezvous(current_environment(), timeout);
  CommunicatorOptions resolved = options;
  resolved.timeout = timeout;
  if (resolved.local_rank < 0) {
    resolved.local_rank = group.info.local_rank;
    resolved.local_size = group.info.local_world_size;
  }
  if (resolved.job_token.empty()) resolved.job_token = group.info.job_token;
  // Members are built in order: the server (if this rank hosts it) must exist before the communicator
  // connects through the store.
  TrainingJob job{std::move(group.server), group.store,
                  Communicator(group.store, group.info.rank, group.info.world_size, resolved),
                  group.info.restart_count};
  log::info("training job: rank {} of {}, attempt {}", job.comm.rank(), job.comm.size(), job.restart_count);
  return job;
}

}  // namespace canopy
