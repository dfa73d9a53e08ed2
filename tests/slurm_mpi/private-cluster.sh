# private-cluster.sh: emulated nodes that exist only for one command, sourced by slurm-cluster.sh and
# mpirun-cluster.sh.
#
#   source tests/slurm_mpi/private-cluster.sh
#   enter_private_cluster "$@"   # outside: parses [--nodes N] [--cpus C] [--rate RATE] [--timeout S] --
#                                # COMMAND..., runs "$0" --inside N C RATE COMMAND... there, and exits
#   make_private_cluster TAG NODES RATE             # inside: the nodes, names[] and addresses[]
#   share_with_nodes PATH...                        # inside: PATH, under /tmp, seen on every node too
#   on_node NAME COMMAND...                         # inside: COMMAND on one node
#   time_left                                       # inside: seconds until the TIMEOUT passes
#
# "There" is a set of namespaces made for the command: mount (a tmpfs on /run holds the network
# namespaces, a hosts file naming the nodes, each node's /tmp, and whatever the caller keeps in
# $private_run; the rest of the file system is shared, as a cluster's home directories are), PID (every
# process the command starts) and network and UTS (the nodes are network namespaces inside it, on the
# bridge of bench/cluster/cluster-network.sh). When the caller ends, however it ends (SIGKILL and the time
# limit included), the kernel removes all of it: nothing is left on the machine.

private_run=/run/canopy-cluster
private_cluster_checkout=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

private_cluster_skip() {
  echo "${0##*/}: cannot run here: $*" >&2
  exit 77
}

enter_private_cluster() {  # options -- command...
  local nodes=1 cpus=2 rate=1gbit limit=120
  local usage="usage: ${0##*/} [--nodes N] [--cpus C] [--rate RATE] [--timeout SECONDS] -- COMMAND..."
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --nodes) nodes="$2"; shift 2 ;;
      --cpus) cpus="$2"; shift 2 ;;
      --rate) rate="$2"; shift 2 ;;
      --timeout) limit="$2"; shift 2 ;;
      --) shift; break ;;
      *) echo "${0##*/}: unknown option '$1'" >&2; echo "$usage" >&2; exit 2 ;;
    esac
  done
  [[ $# -gt 0 ]] || { echo "$usage" >&2; exit 2; }
  private_cluster_check "$nodes" '^([1-9]|1[0-6])$' "--nodes must be 1..16"
  private_cluster_check "$cpus" '^[1-9][0-9]*$' "--cpus must be a positive number"
  private_cluster_check "$limit" '^[1-9][0-9]*$' "--timeout must be a positive number of seconds"
  enter_private_namespaces "$limit" "$0" --inside "$nodes" "$cpus" "$rate" "$@"
}

private_cluster_check() {  # value regex message
  [[ "$1" =~ $2 ]] || { echo "${0##*/}: $3, not '$1'" >&2; exit 2; }
}

enter_private_namespaces() {  # timeout-seconds script args...
  local limit=$1
  shift
  [[ $(id -u) -eq 0 ]] || private_cluster_skip "needs root (namespaces)"
  local tool
  for tool in unshare nsenter setpriv ip tc timeout; do
    command -v "$tool" >/dev/null || private_cluster_skip "no $tool (util-linux, iproute2, coreutils)"
  done
  unshare --mount --pid --fork --net --uts true 2>/dev/null ||
    private_cluster_skip "unshare cannot make mount, PID, network and UTS namespaces"
  # The namespace's first process is "$0" --inside, a shell, which reaps what is orphaned there (SLURM
  # waits for a step's processes to be gone, zombies included) and bounds its command by the time left
  # (time_left). unshare ignores SIGINT and SIGTERM while it waits, so this shell stays to turn them into
  # SIGKILL for unshare; --kill-child passes that on to the namespace, and --pdeathsig makes unshare end
  # with this shell even when the shell is SIGKILLed.
  PRIVATE_CLUSTER_DEADLINE=$(($(date +%s) + limit)) setpriv --pdeathsig KILL \
    unshare --mount --pid --fork --net --uts --mount-proc --propagation private --kill-child "$@" &
  local namespaces=$!
  trap 'kill -KILL '"$namespaces"' 2>/dev/null; wait '"$namespaces"' || true; exit 130' INT
  trap 'kill -KILL '"$namespaces"' 2>/dev/null; wait '"$namespaces"' || true; exit 143' TERM
  trap 'kill -KILL '"$namespaces"' 2>/dev/null; wait '"$namespaces"' || true; exit 129' HUP
  local status=0
  wait "$namespaces" || status=$?
  exit "$status"
}

# The seconds left before the deadline enter_private_namespaces set; fails when none are.
time_left() {
  local left=$((PRIVATE_CLUSTER_DEADLINE - $(date +%s)))
  ((left > 0)) || { echo "${0##*/}: out of time" >&2; return 124; }
  echo "$left"
}

make_private_cluster() {  # tag nodes rate
  local tag=$1 count=$2 rate=$3 i
  mount -t tmpfs -o mode=755 tmpfs /run
  mkdir -p "$private_run"
  ip link set lo up
  source "$(dirname "${BASH_SOURCE[0]}")/../../bench/cluster/cluster-network.sh"
  make_cluster_network "$tag" "$count" "$rate" "$private_run"
  names=() addresses=()
  for ((i = 0; i < count; i++)); do
    names+=("$(cluster_node "$tag" "$i")")
    addresses+=("$(cluster_address "$i")")
  done
  # Every node finds every other by name, as on a real cluster.
  {
    echo "127.0.0.1 localhost"
    for ((i = 0; i < count; i++)); do echo "${addresses[i]} ${names[i]}"; done
  } >"$private_run/hosts"
  mount --bind "$private_run/hosts" /etc/hosts
  # Each node gets a /tmp of its own (on_node); this view of the machine's keeps what lies there reachable.
  mkdir -p "$private_run/machine-tmp"
  mount --bind /tmp "$private_run/machine-tmp"
  local given=()
  mapfile -t given < <(printf '%s' "${PRIVATE_CLUSTER_SHARED:-}")
  export PRIVATE_CLUSTER_SHARED=""
  share_with_nodes "$private_cluster_checkout" "$PWD" "${given[@]}"
}

# A checkout, a build or an output folder under /tmp stays visible on every node, as a cluster's home
# directories are: the checkout, the working directory and those the caller exported in
# PRIVATE_CLUSTER_SHARED (one a line). Paths elsewhere are shared already. The list stays exported for
# the scripts that call on_node from a node (mpirun's agent).
share_with_nodes() {  # path...
  local path
  for path; do
    path=$(realpath -m "$path")
    [[ $path == /tmp/?* && -e $path ]] && PRIVATE_CLUSTER_SHARED+="$path"$'\n'
  done
  return 0
}

# nsenter rather than `ip netns exec`, which would mount a fresh /sys without the cgroup file systems
# slurmd needs; a UTS namespace of its own so that the node knows itself by its name; and a /tmp of its
# own (SLURM's PMIx plugin keeps per-step directories there that two nodes must not share), with the
# shared paths (share_with_nodes) bound back into it.
on_node() {  # name command...
  local node=$1 shared=()
  shift
  mapfile -t shared < <(printf '%s' "${PRIVATE_CLUSTER_SHARED:-}")
  mkdir -p "$private_run/tmp/$node"
  nsenter --net="/run/netns/$node" unshare --uts --mount bash -c '
    node=$1 own_tmp=$2 machine_tmp=$3 shared=$4
    shift 4
    hostname "$node" && mount --bind "$own_tmp" /tmp || exit
    for ((i = 0; i < shared; i++)); do
      mkdir -p "$1" && mount --bind "$machine_tmp/${1#/tmp/}" "$1" || exit
      shift
    done
    exec "$@"' on_node "$node" "$private_run/tmp/$node" "$private_run/machine-tmp" "${#shared[@]}" "${shared[@]}" "$@"
}
