#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) with clang, AddressSanitizer and UBSan in build-fuzz, and runs
# each for a bounded time on a working copy of its committed seed corpus (docs/RELIABILITY.md).
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
stage "fuzz: configure (clang)" 300 cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_CXX_COMPILER=clang++ \
  -DCANOPY_FUZZ=ON -DCANOPY_SANITIZE=address,undefined -DCANOPY_BUILD_TESTS=OFF -DCANOPY_BUILD_BENCH=OFF \
  -DCANOPY_WERROR=OFF
stage "fuzz: build ${TARGETS[*]}" 1800 cmake --build "$BUILD" -j "$JOBS" --target "${TARGETS[@]}"

for target in "${TARGETS[@]}"; do
  name=${target%_fuzzer}
  corpus="$BUILD/corpus/$name"  # grows while fuzzing; the committed seeds stay small
  artifacts="$BUILD/artifacts/$target"
  mkdir -p "$corpus" "$artifacts"
  options=(-max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
           -artifact_prefix="$artifacts/")
  [ -f "$ROOT/fuzz/$name.dict" ] && options+=(-dict="$ROOT/fuzz/$name.dict")
  stage "fuzz: $target for ${SECONDS_EACH}s" $((SECONDS_EACH + 120)) \
    "$BUILD/bin/$target" "${options[@]}" "$corpus" "$ROOT/fuzz/corpus/$name"
done
echo "+++ fuzzing passed in $((SECONDS - start))s"
