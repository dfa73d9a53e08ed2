#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) with clang, AddressSanitizer and UBSan in build-fuzz, and runs
# each for a bounded time on a working copy of its committed seed corpus (docs/RELIABILITY.md), as many
# at a time as CANOPY_CI_JOBS (default 2): each fuzzer is one process on one core.
#
#   scripts/ci/fuzz.sh                    # every target, CANOPY_FUZZ_SECONDS (default 60) each
#   scripts/ci/fuzz.sh frame_fuzzer       # one target
#
# A crash leaves its input in build-fuzz/artifacts/<target>/ and makes the script exit non-zero:
# reproduce with build-fuzz/bin/<target> <input>, then add it as a regression test in the owning
# layer's tests. Each step prints what it ran and how long it took.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD="$ROOT/build-fuzz"
JOBS=${CANOPY_CI_JOBS:-2}
SECONDS_EACH=${CANOPY_FUZZ_SECONDS:-60}
ALL_TARGETS=(frame_fuzzer handshake_fuzzer store_protocol_fuzzer launch_environment_fuzzer settings_fuzzer
             slurm_hostlist_fuzzer)
if [ $# -gt 0 ]; then TARGETS=("$@"); else TARGETS=("${ALL_TARGETS[@]}"); fi

source "$ROOT/scripts/ci/stage.sh"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

start=$SECONDS
# libFuzzer comes with clang's runtime (Debian: clang and libclang-rt-14-dev).
stage "fuzz: clang and libFuzzer" 600 bash -c \
  "$(declare -f install_missing); install_missing clang libclang-rt-14-dev"
# Tests and benchmarks are not needed; warnings are not errors here, where clang (not the project's
# GCC) compiles the layers: this stage is about the parsers' behaviour, the GCC stages about warnings.
# One file a unit (no unity batches), as build-tsan: CI's check that every library source compiles alone.
stage "fuzz: configure (clang)" 300 cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_CXX_COMPILER=clang++ \
  -DCANOPY_FUZZ=ON -DCANOPY_SANITIZE=address,undefined -DCANOPY_BUILD_TESTS=OFF -DCANOPY_BUILD_BENCH=OFF \
  -DCANOPY_BUILD_EXAMPLES=OFF -DCANOPY_UNITY_BUILD=OFF -DCANOPY_WERROR=OFF
stage "fuzz: build ${TARGETS[*]}" 1800 cmake --build "$BUILD" -j "$JOBS" --target "${TARGETS[@]}"
# The launcher's library too, for the same check: every source compiles on its own (the collectives'
# kernels need GCC's target_clones on templates, so build-tsan checks that layer with GCC).
stage "fuzz: the launcher's library, one file a unit" 600 cmake --build "$BUILD" -j "$JOBS" --target canopy_launcher_core

# fuzz_one TARGET: one bounded run, its output kept in build-fuzz/logs/TARGET.log.
fuzz_one() {
  local target=$1 name=${1%_fuzzer}
  local corpus="$BUILD/corpus/$name"  # grows while fuzzing; the committed seeds stay small
  local artifacts="$BUILD/artifacts/$target"
  mkdir -p "$corpus" "$artifacts" "$BUILD/logs"
  local options=(-max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
                 -artifact_prefix="$artifacts/")
  [ -f "$ROOT/fuzz/$name.dict" ] && options+=(-dict="$ROOT/fuzz/$name.dict")
  stage "fuzz: $target for ${SECONDS_EACH}s" $((SECONDS_EACH + 120)) \
    "$BUILD/bin/$target" "${options[@]}" "$corpus" "$ROOT/fuzz/corpus/$name" >"$BUILD/logs/$target.log" 2>&1
}

# JOBS fuzzers at a time; each one's log is printed when it ends, and any failure fails the script.
failed=0
for ((first = 0; first < ${#TARGETS[@]}; first += JOBS)); do
  batch=("${TARGETS[@]:first:JOBS}")
  pids=()
  for target in "${batch[@]}"; do
    (fuzz_one "$target") &
    pids+=($!)
  done
  for i in "${!batch[@]}"; do
    wait "${pids[$i]}" || failed=1
    tail -n 25 "$BUILD/logs/${batch[$i]}.log"
  done
done
[ "$failed" -eq 0 ] || { echo "+++ fuzzing FAILED: see the logs above and $BUILD/artifacts/"; exit 1; }
echo "+++ fuzzing passed in $((SECONDS - start))s"
