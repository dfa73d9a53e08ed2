#!/usr/bin/env bash
# The GPU checks of gradsync, for a machine with an NVIDIA GPU (none here: CI and the development machines
# build the CUDA code but cannot run it; CI runs it there all the same, the GPU steps skipped, so that it
# keeps working). One short script, about a minute:
#   1. the CUDA gradsync tests (device gradients of two ranks averaged through pinned staging; parameters
#      broadcast from device memory) and the CPU synchronizer tests beside them;
#   2. the same CUDA test under compute-sanitizer (CUDA API errors, leaks), where it is installed;
#   3. device <-> pinned host bandwidth (pinned vs pageable, both directions at once);
#   4. step time of CUDA gradients, overlapped with backward vs after it (gradsync_overlap_bench --device
#      cuda), next to the same model with host gradients: what the staging costs;
#   5. canopy-bench all-reduce on that machine's cores (more cores than ranks, unlike here).
# The executables come either from a pack made here (bench/gpu/pack.sh; CANOPY_GPU_PACK=DIR), for a machine
# that has the driver but none of Canopy's build dependencies, or from a build on that machine
# (CANOPY_GPU_PACK unset: needs the CUDA toolkit and scripts/install-deps.sh's packages).
# Usage, from the repository root:  [CANOPY_GPU_PACK=gpu-pack] bench/gpu/run.sh
# Results: $OUT (default build-gpu/results): summary.txt and log.txt (everything, step by step).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build-gpu}
OUT=${OUT:-$BUILD/results}
mkdir -p "$OUT"
SUMMARY=$OUT/summary.txt
LOG=$OUT/log.txt
: > "$SUMMARY"
: > "$LOG"
log() { echo "[gpu $(date +%T)] $*" | tee -a "$SUMMARY" | tee -a "$LOG" >&2; }
# step NAME SECONDS COMMAND...: runs COMMAND under a timeout, its output into log.txt.
step() {
  local name=$1 seconds=$2; shift 2
  echo "===== $name: $*" >> "$LOG"
  local begin=$SECONDS
  timeout "$seconds" "$@" >> "$LOG" 2>&1
  local rc=$?
  echo "===== $name: status $rc after $((SECONDS - begin)) s" >> "$LOG"
  [ $rc -eq 0 ] || { log "$name failed with status $rc ($((SECONDS - begin)) s)"; status=1; }
  return $rc
}
# step_output NAME: what step NAME printed, from log.txt.
step_output() { sed -n "/^===== $1: /,/^===== $1: status/p" "$LOG" | grep -v '^====='; }
status=0
export PATH=$PATH:/usr/local/cuda/bin

log "host: $(uname -n), $(nproc) cores, $(uname -r)"
# Without a GPU (CI runs this to keep it working) the steps that need one are skipped, and said so.
have_gpu=false
if nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  have_gpu=true
  nvidia-smi >> "$LOG" 2>&1
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee -a "$SUMMARY"
else
  log "no GPU here (nvidia-smi -L lists none): the GPU steps are skipped, the CUDA test skips itself"
fi

if [ -n "${CANOPY_GPU_PACK:-}" ]; then
  BIN=$(cd "$CANOPY_GPU_PACK/bin" && pwd)
  export LD_LIBRARY_PATH=$(cd "$CANOPY_GPU_PACK/lib" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  log "executables from the pack $CANOPY_GPU_PACK"
  ldd "$BIN/gradsync_cuda_test" >> "$LOG" 2>&1
  if ldd "$BIN/gradsync_cuda_test" | grep -q 'not found'; then
    log "missing libraries:"; ldd "$BIN/gradsync_cuda_test" | grep 'not found' | tee -a "$SUMMARY"
  fi
else
  BIN=$BUILD/canopy/bin
  log "building with CUDA in $BUILD/canopy"
  step configure 120 cmake -S "$ROOT" -B "$BUILD/canopy" -G "$(command -v ninja >/dev/null && echo Ninja || echo 'Unix Makefiles')" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCANOPY_WITH_CUDA=ON -DCANOPY_BUILD_EXAMPLES=OFF &&
  step build 300 cmake --build "$BUILD/canopy" -j "$(nproc)" --target gradsync_cuda_test \
    gradsync_synchronizer_test gradsync_pinned_bandwidth gradsync_overlap_bench canopy-run canopy-bench ||
  { log "configure or build failed (log.txt)"; tail -30 "$LOG" >> "$SUMMARY"; exit 1; }
fi

log "1. gradsync tests"
for test in gradsync_cuda_test gradsync_synchronizer_test; do
  CANOPY_DEBUG=${CANOPY_DEBUG:-WARN} step "$test" 120 "$BIN/$test"
  step_output "$test" | grep -E '^\[ +(OK|FAILED|SKIPPED|PASSED) +\]|Skipped|Failure' | tee -a "$SUMMARY"
done

log "2. compute-sanitizer"
if ! $have_gpu; then
  log "no GPU: skipped"
elif command -v compute-sanitizer >/dev/null; then
  step sanitizer 150 compute-sanitizer --tool memcheck --leak-check full --target-processes all \
    --error-exitcode 3 "$BIN/gradsync_cuda_test" --gtest_filter='*Averages*'
  step_output sanitizer | grep -E 'ERROR SUMMARY|LEAK SUMMARY|Program hit' | sort | uniq -c | tee -a "$SUMMARY"
else
  log "compute-sanitizer not installed: skipped"
fi

log "3. device <-> host bandwidth"
step bandwidth 60 "$BIN/gradsync_pinned_bandwidth" 256 && step_output bandwidth | tee -a "$SUMMARY"

log "4. step time with CUDA gradients (16 layers x 6.25 MiB = 100 MiB, buckets of 25 MiB, 3 ms per layer)"
model=(--layers 16 --layer-mib 6.25 --bucket-mib 25 --first-bucket-mib 1 --wait-ms 3 --steps 8 --warmup 2)
for run in "2 cuda" "2 cpu" "4 cuda"; do
  set -- $run
  [ "$2" = cuda ] && ! $have_gpu && { log "overlap-$1-$2: no GPU, skipped"; continue; }
  step "overlap-$1-$2" 120 "$BIN/canopy-run" --nproc "$1" "$BIN/gradsync_overlap_bench" --device "$2" \
    --backward wait "${model[@]}" && step_output "overlap-$1-$2" | grep '^\[0\]' | tee -a "$SUMMARY"
done

log "5. canopy-bench all-reduce, 4 and 8 ranks on $(nproc) cores"
for ranks in 4 8; do
  step "allreduce-$ranks" 150 "$BIN/canopy-run" --nproc "$ranks" "$BIN/canopy-bench" allreduce --algo all \
    -b 4 -e 16M -f 16 -n 20 -w 3 -c 1 && step_output "allreduce-$ranks" | sed 's/^\[0\] //' >> "$SUMMARY"
done

log "done, status $status"
exit $status
