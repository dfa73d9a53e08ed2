// join_training_job: Communicator::from_environment, keeping the store for the program's own use.
#include "canopy/gradsync.hpp"
#include "collectives/forming/environment_group.hpp"
#include "common/log.hpp"

namespace canopy {

TrainingJob join_training_job(const CommunicatorOptions& options) {
  auto joined = collectives::join_environment_group(options);
  const rendezvous::LaunchInfo& info = joined.rendezvous.info;
  // Members are built in order: the server (if this rank hosts it) must exist before the communicator
  // connects through the store.
  // A replacement (CANOPY_ELASTIC_JOIN=1) joins the running group, as from_environment does.
  TrainingJob job{std::move(joined.rendezvous.server), joined.rendezvous.store,
                  info.elastic_join
                      ? Communicator::join(joined.rendezvous.store, joined.options)
                      : Communicator(joined.rendezvous.store, info.rank, info.world_size, joined.options),
                  info.restart_count};
  log::info("training job: rank {} of {}, attempt {}", job.comm.rank(), job.comm.size(), job.restart_count);
  return job;
}

}  // namespace canopy
