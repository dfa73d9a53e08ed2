// Joining the group the launcher described: the rendezvous (store, hosted or reached) and the
// communicator options it implies. Shared by Communicator::from_environment and gradsync's
// join_training_job, which also keeps the store for the program's own use.
#pragma once

#include "canopy/communicator.hpp"
#include "rendezvous/bootstrap.hpp"

namespace canopy::collectives {

struct EnvironmentGroup {
  rendezvous::Rendezvous rendezvous;  // the store (and its server on the rank that hosts it)
  CommunicatorOptions options;        // timeout, local ranks and job token filled in from the environment
};

// `claim`: ByCaller where the communicator formed on the store claims the rank in its first request and
// learns the local ranks from its host layout (Communicator::from_environment).
EnvironmentGroup join_environment_group(const CommunicatorOptions& options,
                                        rendezvous::RankClaim claim = rendezvous::RankClaim::Here);

}  // namespace canopy::collectives
