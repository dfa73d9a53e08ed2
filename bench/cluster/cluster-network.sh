# cluster-network.sh: emulated nodes on one machine, sourced by emulated-cluster.sh and by the SLURM and
# Open MPI tests (tests/slurm_mpi/).
#
# Every node is a network namespace cnpy-TAG-nK with one veth link (eth0) to a bridge in a namespace of its
# own, cnpy-TAG-sw. Each link is shaped with tbf at RATE in both directions (node side = the node's egress,
# switch side = the node's ingress: the bridge device's own qdisc is never traversed). Burst is about 2 ms
# of traffic and at least 4 MTU. Addresses come from the benchmarking range 198.18.0.0/15.
#
#   source bench/cluster/cluster-network.sh
#   make_cluster_network TAG NODES RATE WORK_DIR   # fills cluster_namespaces (switch first); call it
#                                                  # under `set -e`, which stops at the first failure
#   cluster_node TAG K; cluster_address K          # a node's namespace and address
#
#   stop_cluster_processes SIGNAL                  # every process inside the namespaces made here
#   delete_cluster_network                         # what was made, in reverse order
# Processes are ended inside the namespaces, since killing a backgrounded `ip netns exec` wrapper would leave
# its child running; deleting a node's namespace deletes its veth pair, the switch's takes the bridge with it.

cluster_namespaces=()

cluster_node() { echo "cnpy-$1-n$2"; }
cluster_address() { echo "198.18.$(($1 / 250)).$(($1 % 250 + 1))"; }

# tc's rate syntax -> bits per second.
cluster_rate_bits() {
  local text="${1,,}" number unit
  [[ "$text" =~ ^([0-9]+)(bit|kbit|mbit|gbit)?$ ]] || { echo "cluster-network: rate '$1' is not like 100mbit or 1gbit" >&2; return 2; }
  number="${BASH_REMATCH[1]}"; unit="${BASH_REMATCH[2]:-bit}"
  case "$unit" in
    bit) echo "$number" ;;
    kbit) echo $((number * 1000)) ;;
    mbit) echo $((number * 1000000)) ;;
    gbit) echo $((number * 1000000000)) ;;
  esac
}

# The tbf burst for a rate: 2 ms of traffic, and at least 96 KiB, so that a whole 64 KiB GSO packet fits:
# tbf cuts a packet larger than its burst into MTU-sized ones in software, which costs the 2 cores
# more than the flows themselves (8 capped links at once then reach 75-85% of their rate, not 95%).
cluster_burst() {
  local burst=$(($1 / 8 / 500))
  ((burst >= 96 * 1024)) || burst=$((96 * 1024))
  echo "$burst"
}

cluster_make_namespace() {  # name work-dir
  if ! ip netns add "$1" 2>"$2/netns.err"; then
    echo "cluster-network: cannot make network namespace '$1': $(cat "$2/netns.err")" >&2
    echo "  (namespaces are unavailable here, or a namespace of that name exists: choose another tag)" >&2
    return 1
  fi
  cluster_namespaces+=("$1")
  ip -n "$1" link set lo up
}

make_cluster_network() {  # tag nodes rate work-dir
  local tag=$1 nodes=$2 rate=$3 work=$4 bits burst switch="cnpy-$1-sw" ns i
  bits=$(cluster_rate_bits "$rate") || return 2
  burst=$(cluster_burst "$bits")
  cluster_make_namespace "$switch" "$work" || return 1
  ip -n "$switch" link add br0 type bridge
  ip -n "$switch" link set br0 up
  for ((i = 0; i < nodes; i++)); do
    ns=$(cluster_node "$tag" "$i")
    cluster_make_namespace "$ns" "$work" || return 1
    ip -n "$ns" link add eth0 type veth peer name "p$i" netns "$switch"
    ip -n "$ns" addr add "$(cluster_address "$i")/16" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$switch" link set "p$i" master br0 up
    tc -n "$ns" qdisc add dev eth0 root tbf rate "$rate" burst "$burst" latency 20ms
    tc -n "$switch" qdisc add dev "p$i" root tbf rate "$rate" burst "$burst" latency 20ms
  done
}

stop_cluster_processes() {  # signal
  local ns pid
  for ns in "${cluster_namespaces[@]}"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill "-$1" "$pid" 2>/dev/null || true; done
  done
}

delete_cluster_network() {
  local i
  for ((i = ${#cluster_namespaces[@]} - 1; i >= 0; i--)); do
    ip netns del "${cluster_namespaces[i]}" 2>/dev/null || true
  done
}
