#!/usr/bin/env bash
# The test suite under the sanitizers (docs/RELIABILITY.md).
#
#   scripts/ci/sanitizers.sh asan   # -fsanitize=address,undefined in build-asan: the layers' tests (below)
#   scripts/ci/sanitizers.sh tsan   # -fsanitize=thread in build-tsan: the layers with threads and sockets
#   scripts/ci/sanitizers.sh        # both
#
# Each step prints what it runs and how long it took, is bounded by `timeout`, and a failure anywhere
# makes the script exit non-zero. CANOPY_CI_JOBS (default 2) sets build and test parallelism;
# CANOPY_CI_WERROR=OFF builds without -Werror (only to measure while another part is mid-change).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
JOBS=${CANOPY_CI_JOBS:-2}
WERROR=${CANOPY_CI_WERROR:-ON}
WHICH=${1:-all}

# The ThreadSanitizer subset: the labels whose code starts threads or shares sockets across them (the
# store server's Asio thread and its clients, the transport's abort() from another thread, forked groups).
# Plus communicator_test: the progress thread of asynchronous collectives against blocking callers and
# abort(); liveness_monitor_test: the heartbeat thread against the communicator's abort and destruction;
# point_to_point_test and groups_test (below).
# (The kernels skip target_clones under TSan: ifunc resolvers would run before its runtime.)
# The reliability label is left out to keep CI within its time; docs/RELIABILITY.md has the command.
TSAN_LABELS='rendezvous|transport'
TSAN_TARGETS=(rendezvous_test transport_frame_test transport_tcp_test transport_data_test transport_shm_test
              communicator_test liveness_monitor_test point_to_point_test progress_thread_test groups_test)

# The AddressSanitizer + UBSan subset: every test binary of the layers that own buffers, frames, parsers
# and failure paths (common, rendezvous, transport, kernels, schedules, collectives, gradsync, the launcher's
# units, the store under hostile input, chaos). Left out, each run unsanitized by the README's command: the
# rank out of descriptors (fd_limit_test: the sanitizers' runtime needs descriptors of its own, and under
# UBSan the starved rank reports an invalid vptr not yet explained, docs/BUILDING.md), the soak (10,000
# collectives repeating what the collectives' tests call once), bench_tools_test and canopy_run_test (programs driving the same library calls end to end), the example
# trainers and slurm_mpi (whole jobs under daemons), verbs_transport_test (no RDMA device; the soft-RoCE
# guest runs it) and canopy_torch (libtorch is not instrumented).
ASAN_TARGETS=(common_test rendezvous_test transport_frame_test transport_tcp_test transport_data_test
              transport_shm_test verbs_parts_test kernels_test schedules_test communicator_test executor_test
              liveness_monitor_test host_layout_exchange_test point_to_point_test groups_test
              movement_collectives_test collective_settings_test call_sequencer_test per_call_state_test
              gradsync_unit_test gradsync_synchronizer_test gradsync_checkpoint_test launcher_unit_test
              hostile_store_test chaos_test)
# ctest runs what was built, of these layers' labels: each test binary left unbuilt stands in ctest as one
# <target>_NOT_BUILT test, and the bench, slurm_mpi and pytorch labels run programs left unbuilt. Also left
# out: PredictionBound, thousands of timing-only simulations (no data moved) that took 47 s instrumented,
# where the schedule tests already run the same simulator with data under the sanitizers.
ASAN_LABELS='common|rendezvous|transport|verbs|collectives|gradsync|launcher|reliability'
ASAN_LEFT_OUT='_NOT_BUILT$|^PredictionBound\.'

source "$ROOT/scripts/ci/stage.sh"

# Sanitizer reports stop the process with an error status, with a stack a person can read.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$ROOT/scripts/ci/lsan-suppressions.txt}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}
# The reliability tests at their quick default scale; the soak shorter (sanitized calls are slow).
export CANOPY_SOAK_COLLECTIVES=${CANOPY_SOAK_COLLECTIVES:-2000}

run_asan() {
  local build="$ROOT/build-asan"
  stage "asan: configure" 300 cmake -S "$ROOT" -B "$build" -G Ninja -DCANOPY_SANITIZE=address,undefined \
    -DCANOPY_WERROR="$WERROR"
  stage "asan: build ${#ASAN_TARGETS[@]} test binaries" 3600 cmake --build "$build" -j "$JOBS" --target "${ASAN_TARGETS[@]}"
  # Tests that fork ranks run their store server as a process of its own (tests/support/
  # store_server_process.hpp): a server thread in the forking process could hold an allocator lock that
  # a child inherits held forever (seen under ASan with the TcpData tests before that change).
  stage "asan: ctest -L '$ASAN_LABELS'" 2400 ctest --test-dir "$build" --output-on-failure -j "$JOBS" \
    -L "$ASAN_LABELS" -E "$ASAN_LEFT_OUT"
}

run_tsan() {
  local build="$ROOT/build-tsan"
  # One file a unit (no unity batches), as build-fuzz: CI's check that every source of the layers these
  # tests link (collectives and gradsync among them) compiles on its own.
  stage "tsan: configure" 300 cmake -S "$ROOT" -B "$build" -G Ninja -DCANOPY_SANITIZE=thread -DCANOPY_WERROR="$WERROR" \
    -DCANOPY_UNITY_BUILD=OFF
  stage "tsan: build ${TSAN_TARGETS[*]}" 2400 cmake --build "$build" -j "$JOBS" --target "${TSAN_TARGETS[@]}"
  stage "tsan: ctest -L '$TSAN_LABELS'" 2400 ctest --test-dir "$build" --output-on-failure -j "$JOBS" \
    -L "$TSAN_LABELS"
  stage "tsan: communicator_test" 900 env CANOPY_SOCKET_IFNAME=lo "$build/bin/communicator_test"
  stage "tsan: liveness_monitor_test" 300 "$build/bin/liveness_monitor_test"
  # The progress thread's point-to-point against its callers, abort and destruction, and beside the
  # asynchronous collectives it also runs; sub-communicators on two threads. Without the 1 GiB exchange,
  # whose shadow memory would not fit.
  stage "tsan: point_to_point_test" 600 env CANOPY_SOCKET_IFNAME=lo "$build/bin/point_to_point_test" \
    --gtest_filter=-*OneGibibyte*
  stage "tsan: progress_thread_test" 300 env CANOPY_SOCKET_IFNAME=lo "$build/bin/progress_thread_test"
  stage "tsan: groups_test" 600 env CANOPY_SOCKET_IFNAME=lo "$build/bin/groups_test"
}

start=$SECONDS
case "$WHICH" in
  asan) run_asan ;;
  tsan) run_tsan ;;
  all) run_asan; run_tsan ;;
  *) echo "usage: $0 [asan|tsan|all]" >&2; exit 2 ;;
esac
echo "+++ sanitizers ($WHICH) passed in $((SECONDS - start))s"
