#!/usr/bin/env bash
# The GPU checks of gradsync, for a machine with an NVIDIA GPU and the CUDA toolkit (none here: CI and
# the development machines build the CUDA code but cannot run it). One short script, under 5 minutes:
#   1. device <-> pinned host bandwidth (pinned vs pageable, both directions at once), built with nvcc
#      alone so that it runs even where Canopy's other build dependencies are missing;
#   2. Canopy configured with CUDA and the gradsync tests built and run (the CUDA staging test averages
#      device gradients of two ranks through pinned staging; the CPU synchronizer tests ride along).
# Usage, from the repository root:  bench/gpu/run.sh      Results: $OUT (default build-gpu/results).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build-gpu}
OUT=${OUT:-$BUILD/results}
mkdir -p "$BUILD" "$OUT"
SUMMARY=$OUT/summary.txt
: > "$SUMMARY"
log() { echo "[gpu $(date +%T)] $*" | tee -a "$SUMMARY"; }
status=0

export PATH=$PATH:/usr/local/cuda/bin
log "host: $(uname -n), $(nproc) cores"
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || log "nvidia-smi failed (see nvidia-smi.txt)"
head -15 "$OUT/nvidia-smi.txt" | tee -a "$SUMMARY"
nvcc --version > "$OUT/nvcc.txt" 2>&1 || log "nvcc not found: is the CUDA toolkit installed?"

log "1. bandwidth check"
if timeout 90 nvcc -O2 -std=c++17 "$ROOT/bench/gpu/pinned_bandwidth.cpp" -o "$BUILD/pinned_bandwidth" \
    > "$OUT/bandwidth_build.txt" 2>&1; then
  timeout 60 "$BUILD/pinned_bandwidth" 256 2>&1 | tee "$OUT/bandwidth.txt" | tee -a "$SUMMARY" || status=1
else
  log "building the bandwidth check failed (bandwidth_build.txt)"; status=1
fi

log "2. configure and build the gradsync tests with CUDA"
jobs=$(nproc)
if timeout 90 cmake -S "$ROOT" -B "$BUILD/canopy" -G "$(command -v ninja >/dev/null && echo Ninja || echo 'Unix Makefiles')" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCANOPY_WITH_CUDA=ON -DCANOPY_BUILD_BENCH=OFF -DCANOPY_BUILD_EXAMPLES=ON \
    > "$OUT/configure.txt" 2>&1 &&
   timeout 150 cmake --build "$BUILD/canopy" -j "$jobs" --target gradsync_cuda_test gradsync_synchronizer_test \
    > "$OUT/build.txt" 2>&1; then
  for test in gradsync_cuda_test gradsync_synchronizer_test; do
    log "running $test"
    CANOPY_DEBUG=${CANOPY_DEBUG:-WARN} timeout 120 "$BUILD/canopy/bin/$test" --gtest_output="json:$OUT/$test.json" \
      > "$OUT/$test.txt" 2>&1
    rc=$?
    grep -E '^\[ +(OK|FAILED|SKIPPED) +\]|Skipped|Failure' "$OUT/$test.txt" | tee -a "$SUMMARY"
    [ $rc -eq 0 ] || { log "$test failed with status $rc"; status=1; }
  done
else
  log "configure or build failed: tail of configure.txt / build.txt:"
  tail -20 "$OUT/configure.txt" "$OUT/build.txt" 2>/dev/null | tee -a "$SUMMARY"
  status=1
fi
log "done, status $status"
exit $status
