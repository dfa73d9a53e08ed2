#!/bin/sh
# Runs inside the soft-RoCE guest, serially (rxe has dropped completions with many concurrent queue
# pairs): the verbs tests, then 2- and 3-rank all-reduce and broadcast over verbs with every algorithm,
# checked exactly by canopy-bench. Never judges timings: emulation is slow and noisy.
export HOME=/root TMPDIR=/tmp
export CANOPY_IB_HCA==rxe0
# A hang must end as an error long before the harness gives up on the guest.
export CANOPY_TIMEOUT=60
failures=0
step() {
  name=$1
  shift
  echo "[rxe-test] START $name"
  "$@" > /tmp/step.log 2>&1
  rc=$?
  cat /tmp/step.log
  # Only the test that needs a machine WITHOUT a device may skip here.
  if [ $rc -eq 0 ] && grep -E '\[  SKIPPED \] [A-Za-z]+\.' /tmp/step.log | grep -v -q 'WithoutADevice'; then
    echo "[rxe-test] $name skipped device tests although rxe0 is here: counted as a failure"
    rc=99
  fi
  echo "[rxe-test] END $name rc=$rc"
  [ $rc -eq 0 ] || failures=$((failures + 1))
}

step verbs_parts_test verbs_parts_test
step verbs_transport_test verbs_transport_test

# canopy-bench exits non-zero on any wrong element (-c 1). CANOPY_DEBUG=INFO makes every rank say
# which transport each of its meshes was built on (a communicator has two: collectives and point-to-point):
# every rank must say verbs, and none tcp.
bench() {
  ranks=$1
  collective=$2
  CANOPY_TRANSPORT=verbs CANOPY_DEBUG=INFO canopy-run --nproc "$ranks" -- \
    canopy-bench "$collective" --algo all -c 1 -b 8 -e 256K -f 8 -n 2 -w 1 > /tmp/bench.log 2>&1
  rc=$?
  cat /tmp/bench.log
  on_verbs=$(grep -o 'rank [0-9]*: transport: verbs' /tmp/bench.log | sort -u | wc -l)
  on_tcp=$(grep -c 'transport: tcp' /tmp/bench.log)
  if [ $rc -eq 0 ] && { [ "$on_verbs" -ne "$ranks" ] || [ "$on_tcp" -ne 0 ]; }; then
    echo "[rxe-test] $on_verbs of $ranks ranks reported 'transport: verbs', $on_tcp meshes 'transport: tcp'"
    return 98
  fi
  return $rc
}
for ranks in 2 3; do
  for collective in allreduce broadcast; do
    step "canopy-bench $collective, $ranks ranks, verbs" bench "$ranks" "$collective"
  done
done

echo "[rxe-test] $failures step(s) failed"
exit $failures
