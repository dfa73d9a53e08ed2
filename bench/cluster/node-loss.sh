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
# --kill-etcd leader|follower|two kills etcd members instead, and no host: the leading member, a follower, or
# both (quorum lost). Printed per trial: the step-to-step gaps of every rank before the kill (median and
# largest) and the largest from it on (the pause), whether the weights came out exact, when the last canopy-run ended (seconds after the kill)
# and their exit codes, and how many of the ranks that failed name the store in their error. --and-host also
# kills the last host whole a second after the members (so that a shrink needs the store); --restart then
# brings the killed members back and starts the job again (a new --rdzv-id), which resumes from the
# checkpoint that elastic_trainer's rank 0 writes every 10 steps. --timeout sets CANOPY_TIMEOUT (60 s);
# --etcd-timing 50:300 the members' heartbeat interval and election timeout (etcd's defaults: 100:1000).
#
# --trainer ddp runs bench/elastic/ddp_recovery.py's worker instead (DDP under canopy_torch.elastic, torch from
# /usr/bin/python3, canopy_torch from build/python): printed, the kill to the survivors' next step, and
# whether their final parameters and momentum are bit-identical (a DDP run that lost ranks trains on fewer
# samples, so it is compared with itself, not with a failure-free run).
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
kill_etcd=""
and_host=0
restart=0
timeout=60
trainer=elastic
etcd_timing=100:1000  # etcd's defaults: --heartbeat-interval, --election-timeout (ms)
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
    --kill-etcd) kill_etcd="$2"; shift 2 ;;
    --and-host) and_host=1; shift ;;
    --restart) restart=1; shift ;;
    --timeout) timeout="$2"; shift 2 ;;
    --etcd-timing) etcd_timing="$2"; shift 2 ;;
    --trainer) trainer="$2"; shift 2 ;;
    *) echo "usage: node-loss.sh [--nodes N>=3] [--ranks-per-node R] [--rate RATE] [--heartbeat-timeout S]" \
            "[--trials T] [--kill-step K] [--steps S] [--tag TAG] [--bin-dir DIR] [--keep-logs DIR] [--shared-pids] [--later]" \
            "[--kill-etcd leader|follower|two [--and-host] [--restart]] [--timeout S] [--etcd-timing HEARTBEAT_MS:ELECTION_MS] [--trainer elastic|ddp]" >&2; exit 2 ;;
  esac
done
((nodes >= 3)) || { echo "node-loss.sh: --nodes must be at least 3 (etcd's members live on hosts 0-2)" >&2; exit 2; }
[[ $trainer =~ ^(elastic|ddp)$ ]] || { echo "node-loss.sh: --trainer elastic|ddp" >&2; exit 2; }
[[ $trainer == elastic || ( -z $kill_etcd && $later == 0 ) ]] || { echo "node-loss.sh: --trainer ddp loses host 0 only" >&2; exit 2; }
[[ -z $kill_etcd || $kill_etcd =~ ^(leader|follower|two)$ ]] || { echo "node-loss.sh: --kill-etcd leader|follower|two" >&2; exit 2; }
((!and_host || nodes >= 4)) || { echo "node-loss.sh: --and-host kills the last host, which needs --nodes 4 or more" >&2; exit 2; }
[[ ( $and_host == 1 || $restart == 1 ) && -z $kill_etcd ]] && { echo "node-loss.sh: --and-host and --restart go with --kill-etcd" >&2; exit 2; }
[[ -x /usr/bin/etcd ]] || { echo "node-loss.sh: /usr/bin/etcd is missing (Debian: etcd-server)" >&2; exit 2; }
bench_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$bench_dir/cluster-network.sh"

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

start_etcd_member() {  # trial member: a fresh one, or one killed before, from its data directory
  local t=$1 i=$2 initial="" k
  for k in 0 1 2; do initial+="${initial:+,}m$k=http://$(address "$k"):2380"; done
  ip netns exec "$(node "$i")" /usr/bin/etcd --name "m$i" --data-dir "$work/etcd-$t-$i" \
    --listen-client-urls "http://$(address "$i"):2379" --advertise-client-urls "http://$(address "$i"):2379" \
    --listen-peer-urls "http://$(address "$i"):2380" --initial-advertise-peer-urls "http://$(address "$i"):2380" \
    --heartbeat-interval "${etcd_timing%:*}" --election-timeout "${etcd_timing#*:}" \
    --initial-cluster "$initial" --initial-cluster-token "node-loss-$t" >>"$work/etcd-$t-$i.log" 2>&1 &
  disown  # killed by namespace below; no "Killed" notice from bash
}

start_etcd() {  # trial: a fresh cluster of 3 members on hosts 0-2
  local i
  for i in 0 1 2; do start_etcd_member "$1" "$i"; done
  etcd_healthy
}

etcd_healthy() {
  for _ in $(seq 100); do
    ip netns exec "$(node 1)" curl -s -m 1 "http://$(address 1):2379/health" 2>/dev/null | grep -q '"health":"true"' && return 0
    sleep 0.1
  done
  echo "node-loss.sh: etcd did not become healthy" >&2; return 1
}

# A host's processes get a pid namespace of their own as well, as on a machine of their own: the survivors
# cannot see in /proc that the dead ranks are gone, and judge them by their heartbeat (--shared-pids: they
# can, at once). The log's last line stamps canopy-run's exit with the wall clock.
start_node() {  # trial host [log-suffix]
  local own_pids=() checkpoints=()
  ((pid_namespaces)) && own_pids=(unshare --pid --fork --mount-proc)
  [[ -n $kill_etcd ]] && checkpoints=(--checkpoint-dir "$work/checkpoints-${1%-restart}" --checkpoint-every 10)
  local trainer_command=("$bin_dir/elastic_trainer" --steps "$steps" --step-ms "$step_ms")
  if [[ $trainer == ddp ]]; then
    mkdir -p "$work/events-$1"
    trainer_command=(env PYTHONPATH="$bin_dir/../python" /usr/bin/python3 "$bench_dir/../elastic/ddp_recovery.py"
      --worker --events "$work/events-$1" --ranks $((nodes * per_node)) --min-ranks 2 --steps "$steps"
      --compute-ms "$step_ms" --victim -1)
  fi
  {
    local status=0  # set -e would end this group at a failing canopy-run, before its stamp
    ip netns exec "$(node "$2")" "${own_pids[@]}" env CANOPY_JOB_TOKEN="node-loss-$tag" CANOPY_SOCKET_IFNAME=eth0 \
      CANOPY_TIMEOUT="$timeout" CANOPY_HEARTBEAT_TIMEOUT_SECONDS="$heartbeat_timeout" timeout --kill-after=5 300 \
      "$bin_dir/canopy-run" --nproc "$per_node" --nnodes "2:$nodes" --rdzv-backend etcd --rdzv-endpoint "$endpoints" \
      --rdzv-id "trial-$1" --rdzv-conf "node_ttl=2,last_call_timeout=$last_call" \
      "${trainer_command[@]}" "${checkpoints[@]}" || status=$?
    echo "canopy-run exit $status at $EPOCHREALTIME"
  } >"$work/t$1-n$2${3:-}.out" 2>&1 &
  disown
}

monotonic_and_wall() { python3 -c 'import time; print(f"{time.clock_gettime(time.CLOCK_MONOTONIC):.6f} {time.time():.6f}")'; }

kill_namespace() {  # host [command]: every process in it, or those running that command
  local pid
  for pid in $(ip netns pids "$(node "$1")"); do
    if [[ -z ${2:-} || $(ps -o comm= -p "$pid" 2>/dev/null) == "$2" ]]; then kill -9 "$pid" 2>/dev/null || true; fi
  done
}

# The hosts of etcd's members, the leader's first: "2 0 1".
etcd_members_leader_first() {
  ip netns exec "$(node 1)" env ETCDCTL_API=3 etcdctl --endpoints "$endpoints" endpoint status -w json 2>/dev/null |
    python3 -c '
import json, sys
status = json.load(sys.stdin)
leads = [s["Status"]["leader"] == s["Status"]["header"]["member_id"] for s in status]
print(" ".join(str(i) for i in sorted(range(len(status)), key=lambda i: not leads[i])))'
}

# Whether host 0's etcd member leads: its death then costs an election before the store answers again.
host0_leads() {
  local members
  members=$(etcd_members_leader_first) || { echo "?"; return; }
  [[ ${members%% *} == 0 ]] && echo yes || echo no
}

any_canopy_run() {  # host...
  local k
  for k in "$@"; do
    ip netns pids "$(node "$k")" | xargs -r ps -o comm= -p 2>/dev/null | grep -q canopy-run && return 0
  done
  return 1
}

summary() { python3 "$bench_dir/node-loss-summary.py" "$@"; }

reached_step() {  # trial step: host 0's rank 0 has done it
  if [[ $trainer == ddp ]]; then
    cat "$work/events-$1"/*.jsonl 2>/dev/null | grep -q "\"kind\": \"step\", .*\"step\": $2, .*\"rank\": 0,"
  else
    grep -q "\] step $2 rank 0 " "$work/t$1-n0.out" 2>/dev/null
  fi
}

# The first hosts: all of them, or all but the last with --later (whose start is then timed).
first_hosts=$((nodes - later))
last_call=$((later ? 1 : 10))  # every first host comes at once: wait for all, but not for the late one
if [[ -z $kill_etcd ]]; then
  echo "# node-loss: $nodes hosts x $per_node ranks, links $rate, etcd on hosts 0-2," \
       "CANOPY_HEARTBEAT_TIMEOUT_SECONDS=$heartbeat_timeout, host 0 killed at step $kill_step of $steps"
  if [[ $trainer == ddp ]]; then
    echo "# trial  kill->next_step_s  kill->failure_s  survivors_identical  etcd_leader_killed  final_steps"
  else
    echo "# trial  kill->next_step_s  kill->shrunk_s  survivors_exact  etcd_leader_killed  later_start->joined_s"
  fi
else
  echo "# node-loss: $nodes hosts x $per_node ranks, links $rate, etcd on hosts 0-2 (timing $etcd_timing), CANOPY_TIMEOUT=$timeout," \
       "etcd's $kill_etcd killed at step $kill_step of $steps$( ((and_host)) && echo ", host $((nodes - 1)) a second later")"
  echo "#   trial  killed(m)  steady_gap_s(med/max)  gap_from_kill_s  weights_exact  last_end_after_s  exit_codes  errors_name_store"
fi
for ((t = 1; t <= trials; t++)); do
  start_etcd "$t"
  start_node "$t" 0
  sleep 0.5
  for ((k = 1; k < first_hosts; k++)); do start_node "$t" "$k"; done
  for _ in $(seq 1200); do reached_step "$t" "$kill_step" && break; sleep 0.05; done
  survivors=$(seq 1 $((nodes - 1)))
  if [[ -z $kill_etcd ]]; then
    leader_killed=$(host0_leads)
    read -r kill_time kill_wall < <(monotonic_and_wall)
    kill_namespace 0
  else
    read -r -a members < <(etcd_members_leader_first)
    case "$kill_etcd" in
      leader) victims=("${members[0]}") ;;
      follower) victims=("${members[1]}") ;;
      two) victims=("${members[@]:0:2}") ;;
    esac
    read -r kill_time kill_wall < <(monotonic_and_wall)
    for v in "${victims[@]}"; do kill_namespace "$v" etcd; done
    survivors=$(seq 0 $((nodes - 1 - and_host)))
    if ((and_host)); then sleep 1; kill_namespace $((nodes - 1)); fi
  fi
  later_start=none
  if ((later)); then
    later_start=$(monotonic_and_wall | cut -d' ' -f1)
    start_node "$t" "$((nodes - 1))"
  fi
  wait_deadline=$((SECONDS + 240))
  # shellcheck disable=SC2086
  while ((SECONDS < wait_deadline)) && any_canopy_run $survivors; do sleep 0.2; done
  sleep 0.3  # each log's exit stamp
  logs=(); for k in $survivors; do logs+=("$work/t$t-n$k.out"); done
  if [[ $trainer == ddp ]]; then
    summary ddp "$kill_wall" "$(((first_hosts - 1) * per_node))" "$t" "$leader_killed" "$work/events-$t"
  elif [[ -z $kill_etcd ]]; then
    summary host "$kill_time" "$(((first_hosts - 1) * per_node))" "$t" "$leader_killed" "$later_start" "${logs[@]}"
  else
    summary etcd "$kill_time" "$kill_wall" "$t" "$(IFS=+; echo "${victims[*]}")" "$(address 0):2379" "${logs[@]}"
  fi
  if ((restart)); then  # the members back from their data, and the job again
    for v in "${victims[@]}"; do start_etcd_member "$t" "$v"; done
    etcd_healthy
    last_call=10
    # A job's --rdzv-id is not taken again once it has ended (docs/LAUNCHER.md): the restart is a new job.
    for ((k = 0; k < nodes; k++)); do start_node "$t-restart" "$k"; done
    wait_deadline=$((SECONDS + 120))
    # shellcheck disable=SC2046
    while ((SECONDS < wait_deadline)) && any_canopy_run $(seq 0 $((nodes - 1))); do sleep 0.2; done
    sleep 0.3
    summary restart "$work"/t"$t"-restart-n*.out
  fi
  for ((k = 0; k < nodes; k++)); do kill_namespace "$k"; done
  if [[ -n $keep_logs ]]; then
    mkdir -p "$keep_logs" && cp "$work"/t"$t"*-n*.out "$keep_logs"/
    [[ $trainer == ddp ]] && cp -r "$work/events-$t" "$keep_logs"/
  fi
  sleep 0.5  # the killed processes' sockets and namespaces settle before the next trial
done
