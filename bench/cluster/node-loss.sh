#!/usr/bin/env bash
# node-loss.sh: how long the survivors of a lost node take to train on, under canopy-run --rdzv-backend etcd.
#
# N emulated hosts (network namespaces on a bridge, links capped: bench/cluster/cluster-network.sh), each with
# one canopy-run and R ranks of examples/elastic_trainer; etcd with 3 members on hosts 0, 1 and 2. Host 0's
# canopy-run starts first, so that it takes the first node ticket and holds rank 0. At step K every process of
# host 0 (canopy-run, its ranks, its etcd member) is SIGKILLed at once. Printed per trial: the time from the
# kill to the survivors' first step in the shrunk group (the latest survivor's, CLOCK_MONOTONIC, which all
# namespaces share), to their "shrunk" line, whether every survivor ended with the failure-free weights, and
# whether host 0's etcd member was the leader.
#
#   sudo bench/cluster/node-loss.sh --nodes 4 --ranks-per-node 2 --heartbeat-timeout 2 --trials 5
#
# --later holds the last host back and starts it right after the kill: it joins the running job, and the
# time from its canopy-run's start to its ranks' "joined" lines is printed too.
#
# Everything it makes (namespaces, etcd data) is removed on exit, also when interrupted.
set -euo pipefail

nodes=4
per_node=2
rate=1gbit
heartbeat_timeout=2
trials=3
kill_step=40
steps=300
step_ms=20
tag=$$
keep_logs=""
pid_namespaces=1
later=0
bin_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/build/bin"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --nodes) nodes="$2"; shift 2 ;;
    --ranks-per-node) per_node="$2"; shift 2 ;;
    --rate) rate="$2"; shift 2 ;;
    --heartbeat-timeout) heartbeat_timeout="$2"; shift 2 ;;
    --trials) trials="$2"; shift 2 ;;
    --kill-step) kill_step="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --tag) tag="$2"; shift 2 ;;
    --bin-dir) bin_dir="$2"; shift 2 ;;
    --keep-logs) keep_logs="$2"; shift 2 ;;
    --shared-pids) pid_namespaces=0; shift ;;
    --later) later=1; shift ;;
    *) echo "usage: node-loss.sh [--nodes N>=3] [--ranks-per-node R] [--rate RATE] [--heartbeat-timeout S]" \
            "[--trials T] [--kill-step K] [--steps S] [--tag TAG] [--bin-dir DIR] [--keep-logs DIR] [--shared-pids] [--later]" >&2; exit 2 ;;
  esac
done
((nodes >= 3)) || { echo "node-loss.sh: --nodes must be at least 3 (etcd's members live on hosts 0-2)" >&2; exit 2; }
[[ -x /usr/bin/etcd ]] || { echo "node-loss.sh: /usr/bin/etcd is missing (Debian: etcd-server)" >&2; exit 2; }
source "$(dirname "${BASH_SOURCE[0]}")/cluster-network.sh"

work=$(mktemp -d /tmp/cnpy-node-loss-XXXXXX)
cleanup() {
  local status=$?
  trap - EXIT INT TERM
  stop_cluster_processes KILL
  sleep 0.5
  delete_cluster_network
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

make_cluster_network "$tag" "$nodes" "$rate" "$work"
node() { cluster_node "$tag" "$1"; }
address() { cluster_address "$1"; }
endpoints="$(address 0):2379,$(address 1):2379,$(address 2):2379"

start_etcd() {  # trial: a fresh cluster of 3 members on hosts 0-2
  local t=$1 i initial=""
  for i in 0 1 2; do initial+="${initial:+,}m$i=http://$(address "$i"):2380"; done
  for i in 0 1 2; do
    ip netns exec "$(node "$i")" /usr/bin/etcd --name "m$i" --data-dir "$work/etcd-$t-$i" \
      --listen-client-urls "http://$(address "$i"):2379" --advertise-client-urls "http://$(address "$i"):2379" \
      --listen-peer-urls "http://$(address "$i"):2380" --initial-advertise-peer-urls "http://$(address "$i"):2380" \
      --initial-cluster "$initial" --initial-cluster-token "node-loss-$t" >"$work/etcd-$t-$i.log" 2>&1 &
    disown  # killed by namespace below; no "Killed" notice from bash
  done
  for _ in $(seq 100); do
    ip netns exec "$(node 1)" curl -s -m 1 "http://$(address 1):2379/health" 2>/dev/null | grep -q '"health":"true"' && return 0
    sleep 0.1
  done
  echo "node-loss.sh: etcd did not become healthy" >&2; return 1
}

# A host's processes get a pid namespace of their own as well, as on a machine of their own: the survivors
# cannot see in /proc that the dead ranks are gone, and judge them by their heartbeat (--shared-pids: they
# can, at once).
start_node() {  # trial host
  local own_pids=()
  ((pid_namespaces)) && own_pids=(unshare --pid --fork --mount-proc)
  ip netns exec "$(node "$2")" "${own_pids[@]}" env CANOPY_JOB_TOKEN="node-loss-$tag" CANOPY_SOCKET_IFNAME=eth0 CANOPY_TIMEOUT=60 \
    CANOPY_HEARTBEAT_TIMEOUT_SECONDS="$heartbeat_timeout" timeout --kill-after=5 300 \
    "$bin_dir/canopy-run" --nproc "$per_node" --nnodes "2:$nodes" --rdzv-backend etcd --rdzv-endpoint "$endpoints" \
    --rdzv-id "trial-$1" --rdzv-conf "node_ttl=2,last_call_timeout=$last_call" \
    "$bin_dir/elastic_trainer" --steps "$steps" --step-ms "$step_ms" >"$work/t$1-n$2.out" 2>&1 &
  disown
}

# The first hosts: all of them, or all but the last with --later (whose start is then timed).
first_hosts=$((nodes - later))
last_call=$((later ? 1 : 10))  # every first host comes at once: wait for all, but not for the late one
echo "# node-loss: $nodes hosts x $per_node ranks, links $rate, etcd on hosts 0-2," \
     "CANOPY_HEARTBEAT_TIMEOUT_SECONDS=$heartbeat_timeout, host 0 killed at step $kill_step of $steps"
echo "# trial  kill->next_step_s  kill->shrunk_s  survivors_exact  etcd_leader_killed  later_start->joined_s"
for ((t = 1; t <= trials; t++)); do
  start_etcd "$t"
  start_node "$t" 0
  sleep 0.5
  for ((k = 1; k < first_hosts; k++)); do start_node "$t" "$k"; done
  for _ in $(seq 600); do grep -q "\] step $kill_step rank 0 " "$work/t$t-n0.out" 2>/dev/null && break; sleep 0.05; done
  # Whether host 0's etcd member leads: its death then costs an election before the store answers again.
  leader_killed=$(ip netns exec "$(node 1)" env ETCDCTL_API=3 etcdctl --endpoints "http://$(address 0):2379" \
    endpoint status -w json 2>/dev/null | python3 -c '
import json, sys
try:
    status = json.load(sys.stdin)[0]["Status"]
    print("yes" if status["leader"] == status["header"]["member_id"] else "no")
except Exception:
    print("?")')
  kill_time=$(python3 -c '
import os, sys, time
pids = [int(p) for p in sys.argv[1:]]
t = time.clock_gettime(time.CLOCK_MONOTONIC)
for p in pids:
    try: os.kill(p, 9)
    except ProcessLookupError: pass
print(f"{t:.6f}")' $(ip netns pids "$(node 0)"))
  later_start=none
  if ((later)); then
    later_start=$(python3 -c 'import time; print(f"{time.clock_gettime(time.CLOCK_MONOTONIC):.6f}")')
    start_node "$t" "$((nodes - 1))"
  fi
  wait_deadline=$((SECONDS + 240))
  survivors_running() {
    local k
    for ((k = 1; k < nodes; k++)); do
      ip netns pids "$(node "$k")" | xargs -r ps -o comm= -p 2>/dev/null | grep -q canopy-run && return 0
    done
    return 1
  }
  while ((SECONDS < wait_deadline)) && survivors_running; do sleep 0.2; done
  python3 - "$kill_time" "$(((first_hosts - 1) * per_node))" "$t" "$leader_killed" "$later_start" \
    "$work"/t"$t"-n[1-9]*.out <<'EOF'
import re, sys
kill, size, trial, leader, later, files = float(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6:]
joined = []
first_step, shrunk, exact = [], [], True
for name in files:
    text = open(name).read()
    steps = [float(m) for m in re.findall(r"\] step \d+ rank \d+ size " + size + r" at ([0-9.]+)", text)]
    shr = [float(m) for m in re.findall(r"\] shrunk to size \d+, restored step \d+ at ([0-9.]+)", text)]
    finals = re.findall(r"final step \d+ digest (\w+) expected (\w+)", text)
    exact = exact and len(finals) > 0 and all(d == e for d, e in finals)
    if steps: first_step.append(min(s for s in steps if s > kill) if any(s > kill for s in steps) else float("nan"))
    if shr: shrunk.append(min(shr))
    joined += [float(m) for m in re.findall(r"\] joined as rank \d+ of \d+, restored step \d+ at ([0-9.]+)", text)]
fmt = lambda xs: f"{max(xs) - kill:.3f}" if xs else "none"
late = f"{max(joined) - float(later):.3f}" if later != "none" and joined else ("none" if later == "none" else "never")
print(f"{trial:>7}  {fmt(first_step):>16}  {fmt(shrunk):>14}  {'yes' if exact else 'NO':>15}  {leader:>17}  {late:>20}")
EOF
  for ((k = 1; k < nodes; k++)); do for pid in $(ip netns pids "$(node "$k")"); do kill -9 "$pid" 2>/dev/null || true; done; done
  if [[ -n $keep_logs ]]; then mkdir -p "$keep_logs" && cp "$work"/t"$t"-n*.out "$keep_logs"/; fi
  sleep 0.5  # the killed processes' sockets and namespaces settle before the next trial
done
