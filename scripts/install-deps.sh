#!/usr/bin/env bash
# Installs what Canopy builds with, from Debian 12's archive. Run as root (or with sudo).
#
#   scripts/install-deps.sh         # everything the whole build and its tests use
#   scripts/install-deps.sh bench   # what canopy-run and canopy-bench need: no PyTorch (the README's first command)
#
# Optional extras are detected at configure time: libibverbs-dev (RDMA) and libpmix-dev (ranks that mpirun
# spreads over hosts find the store through PMIx) are installed here so that both are always compiled; the
# CUDA toolkit is used when present but never installed here. libcurl4-openssl-dev (the etcd store, optional
# like those) and etcd-server (the real etcd members its tests start) are in the full set only. SLURM and
# Open MPI themselves, which only the tests of tests/slurm_mpi/ run, are installed by CI's stage for them
# (scripts/ci/slurm_mpi.sh).
# libtorch-dev (1.13, CPU) is installed so that examples/torch_trainer and its test are compiled and run
# here and in CI: about 120 MB to download and 500 MB on disk, measured at about 70 s to install and 70 s
# of CPU to compile (docs/GRADSYNC.md). python3-torch, pybind11-dev and python3-dev come with it for
# canopy_torch, the torch.distributed backend, and its tests (docs/TORCH.md). CANOPY_NO_TORCH=1 leaves all
# four out; CMake then skips the example and canopy_torch.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  libasio-dev libfmt-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libibverbs-dev
  libpmix-dev
  python3  # bench scripts' tables: compare.sh --repeat (and its test), record-figures.sh
  gnuplot-nox  # canopy-bench --plot and canopy-bench plot (SVG and PNG, no X)
  nftables  # nft: bench/elastic/host-cut.sh and its test cut one emulated host off (skipped without it)
)
case "${1:-all}" in
  all)
    # The etcd store (docs/ETCD.md): libcurl to build it, etcd's server for its tests' members.
    packages+=(libcurl4-openssl-dev etcd-server)
    [ "${CANOPY_NO_TORCH:-0}" = 1 ] || packages+=(libtorch-dev python3-torch pybind11-dev python3-dev) ;;
  bench) ;;
  *) echo "usage: $0 [all|bench]" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: everything is installed"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
