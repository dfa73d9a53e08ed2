// Where the job's store is: the address a user gave, or, when none is given, what the launcher implies
// (docs/RENDEZVOUS.md, "The store's address"): under SLURM the first host of the step's node list and a
// port derived from the job and step ids; under Open MPI's mpirun loopback when every rank is on one
// host, else PMIx.
#pragma once

#include <cstdint>

#include "common/env.hpp"
#include "rendezvous/bootstrap.hpp"

namespace canopy::rendezvous {

// The ports a derived store port is taken from: CANOPY_STORE_PORT_RANGE=low-high, else 20000-28999.
struct PortRange {
  std::uint16_t low = 20000, high = 28999;
};
PortRange store_port_range(const EnvMap& env);

// low + (scatter(job) + step) mod (high - low + 1): the steps of one job take consecutive ports (so that
// they never share one while there are fewer steps than ports), from a start the job id scatters.
std::uint16_t derived_store_port(PortRange range, std::uint64_t job, std::uint64_t step);

// Fills info.store_host, store_port, store_through_pmix and store_origin from `env` (or store_etcd, when
// CANOPY_MASTER_ADDR or MASTER_ADDR is an etcd:// address); info's rank, world
// sizes, source and store_file must be set. Throws Error(Config) naming the variables when the store
// cannot be found.
void find_store_address(const EnvMap& env, LaunchInfo& info);

}  // namespace canopy::rendezvous
