#!/usr/bin/env bash
# host-cut.sh: 4 emulated hosts x 2 ranks training over TCP; at a random step one host (never host 0,
# which holds the store) has its traffic dropped by an nftables rule in its namespace. Its ranks stay
# alive but unreachable, so only the heartbeat can find them. The other 6 ranks must go on (shrink,
# restore the last step they all committed, train) within the heartbeat timeout + 2 s, with nothing
# committed lost and every weight exact; the cut ranks must end by themselves with a clear error.
#
#   sudo bench/elastic/host-cut.sh [--trials 3] [--seed 1] [--heartbeat 0.25] [--heartbeat-timeout 2]
#                                  [--call-timeout 8] [--bound 40] [--no-heal] [--end] [--bin DIR] [--out DIR]
#
# With --end every rank reports its first failed call and ends instead (no shrink, no heal): the trial
# passes when every process, the cut ones included, has exited within the call timeout + 2 s of the cut
# with Revoked, PeerFailed or Timeout and a message naming another rank.
#
# The hosts are made for this run alone (tests/slurm_mpi/private-cluster.sh: mount, PID, network and UTS
# namespaces, host K = cnpy-hc-nK on a bridge, bench/cluster/cluster-network.sh); the rule, the hosts and
# every process vanish with the run, however it ends (Ctrl-C and SIGKILL included). Each rank is
# canopy-host-cut-rank (host_cut_rank.cpp), formed torchrun-style, rank 0 hosting the store on host 0.
# Once the survivors have trained a step in their new group the rule is deleted (unless --no-heal), so
# that the cut ranks, reachable again, learn that they were left out rather than only timing out.
# A rank still running --bound seconds after its start is killed and counted as a hang.
# One line per trial and a table (host-cut-table.py); the exit status is 0 when every trial passed,
# 1 when one failed, 77 when this machine cannot run it (not root, no namespaces, no nft).
set -Eeuo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../../tests/slurm_mpi/private-cluster.sh"

if [[ "${1:-}" != --inside ]]; then
  trials=3 seed=1 heartbeat=0.25 heartbeat_timeout=2 call_timeout=8 bound=40 heal=1 end=0 out=""
  bin="$(cd "$here/../.." && pwd)/build/bin"
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --trials) trials="$2"; shift 2 ;;
      --seed) seed="$2"; shift 2 ;;
      --heartbeat) heartbeat="$2"; shift 2 ;;
      --heartbeat-timeout) heartbeat_timeout="$2"; shift 2 ;;
      --call-timeout) call_timeout="$2"; shift 2 ;;
      --bound) bound="$2"; shift 2 ;;
      --no-heal) heal=0; shift ;;
      --end) end=1 heal=0; shift ;;
      --bin) bin="$2"; shift 2 ;;
      --out) out="$2"; shift 2 ;;
      -h | --help) sed -n '2,26p' "$0"; exit 0 ;;
      *) echo "host-cut.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
  done
  private_cluster_check "$trials" '^[1-9][0-9]*$' "--trials must be a positive count"
  private_cluster_check "$seed" '^[0-9]+$' "--seed must be a number"
  private_cluster_check "$bound" '^[1-9][0-9]*$' "--bound must be whole seconds"
  command -v nft >/dev/null || private_cluster_skip "no nft (apt-get install nftables)"
  [[ -x "$bin/canopy-host-cut-rank" ]] ||
    { echo "host-cut.sh: no canopy-host-cut-rank in $bin (cmake --build build --target canopy-host-cut-rank)" >&2; exit 1; }
  [[ -n "$out" ]] || out=$(mktemp -d /tmp/canopy-host-cut-XXXXXX)
  mkdir -p "$out"
  out=$(cd "$out" && pwd)
  enter_private_cluster --nodes 4 --rate 1gbit --timeout $((trials * (bound + 10) + 30)) -- \
    "$trials" "$seed" "$heartbeat" "$heartbeat_timeout" "$call_timeout" "$bound" "$heal" "$end" "$bin" "$out"
fi

# Inside the namespaces.
shift 4  # --inside, nodes, cpus, rate
trials=$1 seed=$2 heartbeat=$3 heartbeat_timeout=$4 call_timeout=$5 bound=$6 heal=$7 end=$8 bin=$9
out=${10}
make_private_cluster hc 4 1gbit  # the hosts: names[] and addresses[] (private-cluster.sh)
share_with_nodes "$bin"
ranks_per_host=2
world=$((4 * ranks_per_host))
now() { date +%s.%N; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
# Under CANOPY_DEBUG each line of a rank's stderr gets the time it came (date +%s.%N's clock): where a
# rank waits shows against the cut.
stamped() {
  if [[ -n "${CANOPY_DEBUG:-}" ]]; then perl -MTime::HiRes=time -ne '$|=1; printf "%.3f %s", time, $_'; else cat; fi
}
rank_options=()
((end)) && rank_options=(--end-on-failure)
# What a trial's times are held to: the heartbeat timeout for the survivors going on, the call timeout for
# every rank ending (--end).
bound_from=$heartbeat_timeout
((end)) && bound_from=$call_timeout

# Drops everything that crosses the host's link, both ways; its own ranks still reach each other.
cut_off() {  # node
  on_node "$1" nft -f - <<'RULES'
table inet canopy_cut {
  chain in { type filter hook input priority 0; policy accept; iifname "eth0" drop; }
  chain out { type filter hook output priority 0; policy accept; oifname "eth0" drop; }
}
RULES
}
reconnect() { on_node "$1" nft delete table inet canopy_cut; }

# Waits until `count` lines of the logs match `pattern`, or `until` (date +%s); false then.
wait_for_lines() {  # pattern count until logs...
  local pattern=$1 count=$2 until=$3
  shift 3
  while (($(cat "$@" 2>/dev/null | grep -c -- "$pattern") < count)); do
    (($(date +%s) < until)) || return 1
    sleep 0.005
  done
}

echo "# host-cut: 4 hosts (${names[*]}) x $ranks_per_host ranks over TCP, heartbeat $heartbeat s," \
  "timeout $heartbeat_timeout s, calls $call_timeout s, seed $seed, logs in $out"
RANDOM=$seed
for ((trial = 1; trial <= trials; trial++)); do
  dir="$out/trial-$trial"
  rm -rf "$dir"
  mkdir -p "$dir"
  cut_host=$((1 + RANDOM % 3))
  cut_step=$((10 + RANDOM % 21))
  echo "load $(load)" >"$dir/facts"
  echo "plan $cut_host $cut_step $bound_from $( ((end)) && echo end || echo shrink)" >>"$dir/facts"
  token=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
  pids=()
  for ((rank = 0; rank < world; rank++)); do
    host=$((rank / ranks_per_host))
    {  # "exit <rank> <status> <t>" as soon as the process has ended, destructors and all
      status=0
      on_node "${names[host]}" env RANK=$rank WORLD_SIZE=$world LOCAL_RANK=$((rank % ranks_per_host)) \
        LOCAL_WORLD_SIZE=$ranks_per_host MASTER_ADDR="${addresses[0]}" MASTER_PORT=$((29500 + trial)) \
        CANOPY_JOB_TOKEN="$token" CANOPY_SOCKET_IFNAME=eth0 CANOPY_TRANSPORT=tcp \
        CANOPY_HEARTBEAT_SECONDS="$heartbeat" CANOPY_HEARTBEAT_TIMEOUT_SECONDS="$heartbeat_timeout" \
        CANOPY_TIMEOUT="$call_timeout" timeout --kill-after=2 "$bound" "$bin/canopy-host-cut-rank" \
        "${rank_options[@]}" >"$dir/rank-$rank.log" 2> >(stamped >"$dir/rank-$rank.err") || status=$?
      echo "exit $rank $status $(now)" >>"$dir/facts"
    } &
    pids+=($!)
  done
  deadline=$(($(date +%s) + bound))
  if wait_for_lines "^step 0 $cut_step " 1 "$deadline" "$dir/rank-0.log"; then
    cut_off "${names[cut_host]}"
    echo "cut $(now)" >>"$dir/facts"
    survivors=()
    for ((rank = 0; rank < world; rank++)); do
      ((rank / ranks_per_host == cut_host)) || survivors+=("$dir/rank-$rank.log")
    done
    if ((heal)) && wait_for_lines "^recovered " "${#survivors[@]}" "$deadline" "${survivors[@]}"; then
      reconnect "${names[cut_host]}"
      echo "healed $(now)" >>"$dir/facts"
    fi
  fi
  wait "${pids[@]}"
  if grep -q "^cut " "$dir/facts" && ! grep -q "^healed " "$dir/facts"; then  # the next trial starts connected
    reconnect "${names[cut_host]}" 2>/dev/null || true
  fi
  python3 "$here/host-cut-table.py" --line "$dir"
done
python3 "$here/host-cut-table.py" "$out"/trial-*
