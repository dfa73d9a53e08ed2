#!/usr/bin/env bash
# CI: the GPU check as a lent GPU machine runs it (bench/gpu/pack.sh here, then bench/gpu/run.sh from the
# pack), on a machine without a GPU: the packing, the carried libraries and every step that needs no GPU
# are exercised, so the check still works the day a GPU is lent. Skipped when the build has no CUDA.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
if ! grep -q '^CANOPY_WITH_CUDA:BOOL=ON' "$BUILD/CMakeCache.txt"; then
  echo "gpu_check: $BUILD was configured without CUDA (no nvcc): nothing to pack, skipped"
  exit 0
fi
work=$(mktemp -d /tmp/canopy-gpu-check-XXXXXX)
trap 'rm -rf "$work"' EXIT
BUILD=$BUILD bench/gpu/pack.sh "$work/pack"
CANOPY_GPU_PACK="$work/pack" OUT="$work/out" bench/gpu/run.sh
