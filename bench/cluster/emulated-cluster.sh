#!/usr/bin/env bash
# emulated-cluster.sh: N "nodes" on one machine, canopy-bench ranks on each, links capped.
#
# Every node is a network namespace with one veth link to a bridge, links capped at --rate each way
# (bench/cluster/cluster-network.sh). Addresses come from the benchmarking range 198.18.0.0/15, inside
# namespaces this script made; nothing outside them is touched, and everything made is removed on
# exit, also when interrupted.
#
#   sudo bench/cluster/emulated-cluster.sh --nodes 8 --rate 100mbit -- broadcast --algo all -b 5M -e 5M
#
# Everything after `--` goes to canopy-bench, or with --command is the command every rank runs (say, a
# torch.distributed script with gloo) in the same network. Ranks meet torchrun-style: RANK, WORLD_SIZE, LOCAL_RANK,
# LOCAL_WORLD_SIZE, MASTER_ADDR = node 0's address, MASTER_PORT; CANOPY_SOCKET_IFNAME (and gloo's
# GLOO_SOCKET_IFNAME) select the veth.
# No CANOPY_HOST_ID: a node's namespace makes it a host of its own, as a machine would be. With --ranks-per-node R, a node's R ranks share its namespace (they
# reach each other over its loopback, unshaped) and its one shaped link; --placement deals the ranks to
# the nodes in blocks (ranks 0..R-1 on node 0) or round-robin (rank r on node r mod N).
# Before the benchmark, the achieved rate of one link (node 1 -> node 0) is measured (iperf3 when
# installed, else a 2-rank canopy-bench broadcast) and printed beside the configured rate: on 2 cores
# above about 1 Gbit/s per link the CPU, not the cap, sets the rate. With iperf3 and 3 nodes or more, so is
# the rate of every link busy at once (each node sending to the next).
set -euo pipefail

usage() {
  cat >&2 <<'EOF'
usage: emulated-cluster.sh [--nodes N] [--ranks-per-node R] [--placement block|round-robin] [--rate RATE]
                           [--bench-dir DIR] [--tag TAG] [--port PORT] [--timeout SECONDS] [--no-link-test]
                           [--command] -- <canopy-bench arguments | with --command, a command>
  --nodes N        nodes (network namespaces) (2..64; default 8)
  --ranks-per-node R   ranks on each node (1..16; default 1)
  --placement P    block (rank r on node r / R, the default) or round-robin (node r mod N)
  --rate RATE      cap of every link, each direction, as tc writes it: 8mbit, 100mbit, 1gbit (default 100mbit)
  --bench-dir DIR  where canopy-bench is (default: build/bin of this checkout)
  --tag TAG        names the namespaces cnpy-TAG-* (default: this script's pid), so runs never collide
  --port PORT      the store's port on node 0 (default 29500; namespaces are private, nothing else uses it)
  --timeout S      stop the ranks after S seconds (default 1800)
  --no-link-test   skip measuring the achieved link rate
  --command        what follows `--` is the command every rank runs instead of canopy-bench
EOF
  exit 2
}

nodes=8
per_node=1
placement=block
rate=100mbit
bench_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/build/bin"
tag=$$
port=29500
timeout_s=1800
link_test=1
own_command=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --nodes) nodes="$2"; shift 2 ;;
    --ranks-per-node) per_node="$2"; shift 2 ;;
    --placement) placement="$2"; shift 2 ;;
    --rate) rate="$2"; shift 2 ;;
    --bench-dir) bench_dir="$2"; shift 2 ;;
    --tag) tag="$2"; shift 2 ;;
    --port) port="$2"; shift 2 ;;
    --timeout) timeout_s="$2"; shift 2 ;;
    --no-link-test) link_test=0; shift ;;
    --command) own_command=1; shift ;;
    --) shift; break ;;
    -h|--help) usage ;;
    *) echo "emulated-cluster: unknown option '$1'" >&2; usage ;;
  esac
done
[[ $# -gt 0 ]] || usage
[[ "$nodes" =~ ^[0-9]+$ && "$nodes" -ge 2 && "$nodes" -le 64 ]] || { echo "emulated-cluster: --nodes must be 2..64, got '$nodes'" >&2; exit 2; }
[[ "$per_node" =~ ^[0-9]+$ && "$per_node" -ge 1 && "$per_node" -le 16 ]] || { echo "emulated-cluster: --ranks-per-node must be 1..16, got '$per_node'" >&2; exit 2; }
[[ "$placement" == block || "$placement" == round-robin ]] || { echo "emulated-cluster: --placement must be block or round-robin, got '$placement'" >&2; exit 2; }
[[ "$tag" =~ ^[A-Za-z0-9]{1,8}$ ]] || { echo "emulated-cluster: --tag must be 1-8 letters or digits, got '$tag'" >&2; exit 2; }

source "$(dirname "${BASH_SOURCE[0]}")/cluster-network.sh"
bits=$(cluster_rate_bits "$rate") || exit 2
burst=$(cluster_burst "$bits")

if [[ $(id -u) -ne 0 ]]; then
  echo "emulated-cluster: must run as root: it makes network namespaces, veth pairs, a bridge and tc qdiscs" >&2
  exit 1
fi
bench="$bench_dir/canopy-bench"
[[ -x "$bench" ]] || { echo "emulated-cluster: no canopy-bench at '$bench' (build it, or pass --bench-dir)" >&2; exit 1; }
if ((own_command)); then rank_command=("$@"); else rank_command=("$bench" "$@"); fi

pids=()        # processes this script started
work=$(mktemp -d /tmp/cnpy-cluster-XXXXXX)
cleanup() {
  local status=$?
  trap - EXIT INT TERM
  stop_cluster_processes TERM  # everything inside the namespaces is this script's (ranks, iperf3)
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  delete_cluster_network
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

node() { cluster_node "$tag" "$1"; }
address() { cluster_address "$1"; }

make_cluster_network "$tag" "$nodes" "$rate" "$work"
world=$((nodes * per_node))
echo "# emulated cluster: $nodes nodes on a bridge, every link configured $rate each way" \
     "(tbf burst $burst B), addresses $(address 0)..$(address $((nodes - 1)))," \
     "$per_node rank(s) per node ($placement)"

run_on_node() {  # node rank world-size local-rank local-world-size log-file command...
  local on=$1 rank=$2 size=$3 local_rank=$4 local_size=$5 log=$6
  shift 6
  ip netns exec "$(node "$on")" env RANK="$rank" WORLD_SIZE="$size" LOCAL_RANK="$local_rank" \
    LOCAL_WORLD_SIZE="$local_size" MASTER_ADDR="$(address 0)" MASTER_PORT="$port" CANOPY_SOCKET_IFNAME==eth0 GLOO_SOCKET_IFNAME=eth0 \
    timeout --kill-after=5 "$timeout_s" "$@" >"$log" 2>&1
}

node_of() { if [[ $placement == block ]]; then echo $(($1 / per_node)); else echo $(($1 % nodes)); fi; }
local_of() { if [[ $placement == block ]]; then echo $(($1 % per_node)); else echo $(($1 / nodes)); fi; }

run_rank() {  # rank log-file command...
  local rank=$1 log=$2
  shift 2
  run_on_node "$(node_of "$rank")" "$rank" "$world" "$(local_of "$rank")" "$per_node" "$log" "$@"
}

# The achieved rate of one link, node 1 -> node 0 (both tbf on the path).
if ((link_test)); then
  achieved=""
  if command -v iperf3 >/dev/null; then
    ip netns exec "$(node 0)" timeout 20 iperf3 -s -1 -B "$(address 0)" >"$work/iperf-server.log" 2>&1 &
    pids+=($!)
    sleep 0.3
    if ip netns exec "$(node 1)" timeout 20 iperf3 -c "$(address 0)" -t 2 -f m >"$work/iperf.log" 2>&1; then
      achieved=$(awk '/receiver/ {print $(NF-2) " Mbit/s (iperf3, TCP payload, 1 flow)"}' "$work/iperf.log")
    fi
  else
    # No iperf3: a 2-rank broadcast of 4 MiB carries the whole buffer over one link; busbw is its rate.
    run_on_node 0 0 2 0 1 "$work/link0.log" "$bench" broadcast --algo flat -b 4M -e 4M -n 3 -w 1 -c 0 &
    pids+=($!)
    if run_on_node 1 1 2 0 1 "$work/link1.log" "$bench" broadcast --algo flat -b 4M -e 4M -n 3 -w 1 -c 0 &&
      wait "${pids[-1]}"; then
      achieved=$(awk '$1 ~ /^[0-9]+$/ && NF >= 12 {printf "%.0f Mbit/s (2-rank canopy-bench broadcast)", $12 * 8000}' "$work/link0.log")
    fi
  fi
  echo "# link rate: configured $rate, achieved ${achieved:-unknown (the link test failed)}"
  # Every link busy at once (node i -> node i+1), as a ring all-reduce keeps them: on a small machine the
  # CPU forwarding all their packets, not the cap, may set this rate, and with it what a collective can reach.
  if command -v iperf3 >/dev/null && ((nodes > 2)); then
    for ((i = 0; i < nodes; i++)); do
      ip netns exec "$(node "$i")" timeout 20 iperf3 -s -1 -p 5202 -B "$(address "$i")" >/dev/null 2>&1 &
      pids+=($!)
    done
    sleep 0.3
    ring_pids=()
    for ((i = 0; i < nodes; i++)); do
      ip netns exec "$(node "$i")" timeout 20 iperf3 -c "$(address $(((i + 1) % nodes)))" -p 5202 -t 3 -f m \
        >"$work/iperf-ring-$i.log" 2>&1 &
      ring_pids+=($!)
    done
    wait "${ring_pids[@]}" || true
    cat "$work"/iperf-ring-*.log | awk '/receiver/ {r = $(NF-2); n++; sum += r; if (n == 1 || r < low) low = r}
      END {if (n) printf "# every link at once (node i -> i+1, iperf3, %d flows): min %.0f, mean %.0f Mbit/s\n", n, low, sum / n}'
  fi
fi

# Rank 0's output is the benchmark's, the others' are shown only when they fail.
rank_pids=()
for ((i = 1; i < world; i++)); do
  run_rank "$i" "$work/rank$i.log" "${rank_command[@]}" &
  rank_pids+=($!)
  pids+=($!)
done
# Rank 0 runs in the background too: bash runs a trap only once the foreground command ends, and a
# signal must stop the ranks now, not when the benchmark finishes.
run_rank 0 "$work/rank0.log" "${rank_command[@]}" &
pids+=($!)
status=0
wait "${pids[-1]}" || status=$?
cat "$work/rank0.log"
for ((i = 1; i < world; i++)); do
  rc=0
  wait "${rank_pids[i - 1]}" || rc=$?
  if ((rc != 0)); then
    echo "# rank $i (namespace $(node "$(node_of "$i")")) failed with status $rc:" >&2
    tail -n 20 "$work/rank$i.log" >&2
    ((status != 0)) || status=$rc
  fi
done
pids=()
exit "$status"
