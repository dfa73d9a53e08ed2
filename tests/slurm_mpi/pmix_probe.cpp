// Shares one value from rank 0 through the launcher's PMIx server (rendezvous/pmix_exchange.hpp) and
// prints what this rank got: "pmix: rank R of W got 'rank 0 on HOST (net BOOT/NAMESPACE)'". Run by
// slurm_mpi_test under srun --mpi=pmix and mpirun.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <exception>

#include "common/env.hpp"
#include "rendezvous/bootstrap.hpp"
#include "rendezvous/pmix_exchange.hpp"

int main() {
  try {
    const canopy::EnvMap env = canopy::current_environment();
    const auto info = canopy::rendezvous::parse_launch_environment(env);
    const std::string mine = fmt::format("rank 0 on {}", canopy::rendezvous::host_identity(env));
    const std::string got = canopy::rendezvous::share_from_rank_zero_through_pmix(
        info.rank, info.world_size, info.rank == 0 ? mine : "", std::chrono::seconds(30));
    fmt::print("pmix: rank {} of {} got '{}'\n", info.rank, info.world_size, got);
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "pmix_probe: {}\n", e.what());
    return 1;
  }
}
