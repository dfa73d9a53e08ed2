#!/bin/sh
# Runs inside the soft-RoCE guest, serially (rxe has dropped completions with many concurrent queue
# pairs): the verbs tests; 2- and 3-rank all-reduce and broadcast over verbs with every algorithm; then 4
# ranks as 2 emulated hosts x 2 (CANOPY_HOST_ID, two canopy-run nodes) with every collective and algorithm,
# under CANOPY_TRANSPORT=auto (shared memory within a host, verbs between: shm+verbs), verbs and shm+tcp.
# canopy-bench checks every result exactly. Never judges timings: emulation is slow and noisy.
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
    canopy-bench "$collective" --algo all -c 1 -b 8 -e 256K -f 8 -n 2 -w 1 --min-time 0 > /tmp/bench.log 2>&1
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

# 4 ranks on 2 emulated hosts: two canopy-run nodes, each naming its host. Every rank's meshes must be
# `expected` (the word after 'transport: '), and under shm+verbs each must name both kinds of peers.
two_hosts() {
  transport=$1
  expected=$2
  port=$3
  export CANOPY_TRANSPORT=$transport CANOPY_DEBUG=INFO CANOPY_JOB_TOKEN=rxe-two-hosts
  for node in 0 1; do
    CANOPY_HOST_ID="emulated host $node" canopy-run --nnodes 2 --node-rank $node --nproc 2 \
      --master-addr 127.0.0.1 --master-port "$port" -- \
      canopy-bench all --algo all -c 1 -b 8 -e 256K -f 8 -n 1 -w 1 --min-time 0 > /tmp/node$node.log 2>&1 &
    eval "node${node}_pid=$!"
  done
  wait "$node0_pid"
  rc0=$?
  wait "$node1_pid"
  rc1=$?
  unset CANOPY_TRANSPORT CANOPY_DEBUG CANOPY_JOB_TOKEN
  cat /tmp/node0.log /tmp/node1.log > /tmp/bench.log
  cat /tmp/bench.log
  [ $rc0 -eq 0 ] || return $rc0
  [ $rc1 -eq 0 ] || return $rc1
  ranks_as_expected=$(grep -o "rank [0-9]*: transport: $expected (" /tmp/bench.log | sort -u | wc -l)
  meshes=$(grep -c 'rank [0-9]*: transport: ' /tmp/bench.log)
  meshes_as_expected=$(grep -c "rank [0-9]*: transport: $expected (" /tmp/bench.log)
  if [ "$ranks_as_expected" -ne 4 ] || [ "$meshes" -ne "$meshes_as_expected" ]; then
    echo "[rxe-test] $ranks_as_expected of 4 ranks reported 'transport: $expected'; $meshes_as_expected of $meshes meshes"
    return 97
  fi
  if [ "$expected" = shm+verbs ] &&
    [ "$(grep -c 'transport: shm+verbs (.*shared memory with rank [0-9] of this host, verbs with ranks [0-9]-[0-9]' /tmp/bench.log)" -ne "$meshes" ]; then
    echo "[rxe-test] not every mesh has shared memory within its host and verbs with the other host's ranks"
    return 96
  fi
  return 0
}
step "canopy-bench all, 2 hosts x 2 ranks, auto: shm+verbs" two_hosts auto shm+verbs 29511
step "canopy-bench all, 2 hosts x 2 ranks, verbs" two_hosts verbs verbs 29512
step "canopy-bench all, 2 hosts x 2 ranks, shm+tcp" two_hosts shm+tcp shm+tcp 29513

echo "[rxe-test] $failures step(s) failed"
exit $failures
