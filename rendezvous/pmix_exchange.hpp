// The launcher's PMIx server (Open MPI's mpirun, srun --mpi=pmix) as a way to share one value: rank 0 puts
// it, every rank fences, every other rank gets it. Built with PMIx when libpmix-dev is installed
// (CANOPY_WITH_PMIX); without it, pmix_unavailable.cpp says so.
#pragma once

#include <string>

#include "canopy/store.hpp"  // Duration

namespace canopy::rendezvous {

// Whether this build can talk to a PMIx server.
bool pmix_built();

// Every rank of the job calls it with its own rank and world size: returns rank 0's `value` on every rank.
// Throws Error(Config) when there is no PMIx server to reach or it disagrees about the rank or world size,
// Error(Timeout) when the others do not arrive within `timeout`, Error(System) for other PMIx failures.
std::string share_from_rank_zero_through_pmix(int rank, int world_size, const std::string& value,
                                              Duration timeout);

}  // namespace canopy::rendezvous
