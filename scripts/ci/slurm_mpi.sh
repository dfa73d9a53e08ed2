#!/usr/bin/env bash
# Canopy under a real SLURM and a real Open MPI (tests/slurm_mpi/, docs/LAUNCHER.md): installs Debian's
# slurmctld, slurmd, slurm-client, munge and openmpi-bin where missing (only these tests use them, so
# scripts/install-deps.sh leaves them out: 13.6 MB of packages, about 15 s to install), then runs
# `ctest -L slurm_mpi` on the build in $1 (default build/) with CANOPY_REQUIRE_SLURM_MPI=1, which makes a
# test that would skip (no root, no namespaces, a package missing) fail instead.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-$ROOT/build}" && pwd)
source "$ROOT/scripts/ci/stage.sh"

start=$SECONDS
stage "slurm_mpi: SLURM, munge and Open MPI" 600 bash -c \
  "$(declare -f install_missing); install_missing slurmctld slurmd slurm-client munge openmpi-bin"
stage "slurm_mpi: ctest -L slurm_mpi" 900 env CANOPY_REQUIRE_SLURM_MPI=1 \
  ctest --test-dir "$BUILD" -L slurm_mpi --output-on-failure
echo "+++ srun and mpirun passed in $((SECONDS - start))s"
