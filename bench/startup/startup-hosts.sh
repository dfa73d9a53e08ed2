# startup-hosts.sh: startup.sh's --hosts NxR, sourced by it. N emulated hosts (network namespaces on a
# bridge, bench/cluster/cluster-network.sh), one canopy-run --nnodes N --node-rank K --nproc R in each,
# every one launched at the same recorded instant. The `canopy` peer: node 0's canopy-run hosts the store on
# its own address. The `etcd` peer: one etcd member in node 0's namespace, the launchers meeting through it
# (--nnodes N:N --rdzv-backend etcd, no node rank given). Uses run, out, rate, transport, timeout_s, peers
# and canopy_probe of startup.sh.

hosts_namespaces_cleanup() {  # trapped only once cluster-network.sh is sourced
  stop_cluster_processes KILL
  delete_cluster_network
  cluster_namespaces=()
}

# One node's launcher, as run() starts it: enters the namespace, then canopy-run.
hosts_node_command() {  # peer node-rank nodes per-node tag dir
  local peer=$1 k=$2 n=$3 r=$4 tag=$5 dir=$6 store
  if [[ $peer == etcd ]]; then
    store="--nnodes $n:$n --rdzv-backend etcd --rdzv-endpoint $(cluster_address 0):2379 --rdzv-id startup-hosts-$$"
  else
    store="--nnodes $n --node-rank $k --master-addr $(cluster_address 0) --master-port 29500"
  fi
  echo ip netns exec "$(cluster_node "$tag" "$k")" env CANOPY_HOST_ID="$(cluster_node "$tag" "$k")" \
    CANOPY_TRANSPORT="$transport" "$bin/canopy-run" "$store" --nproc "$r" "${canopy_probe[@]}" --out "$dir"
}

# The `etcd` peer's store: one member in node 0's namespace, on its address; ends with the namespaces.
hosts_start_etcd() {  # tag dir
  local node
  node=$(cluster_node "$1" 0)
  start_etcd_member "$2" "$(cluster_address 0)" 2379 2380 ip netns exec "$node" || return 1
  disown "$etcd_pid"  # killed with the namespaces; no "Killed" notice from bash
}

# Runs every node's launcher under one `timeout` (run's), so the launch time and the limit are one; once per
# peer asked for (canopy, etcd).
run_hosts() {  # nodes per-node
  local n=$1 r=$2 tag="st$$" dir k script peer dirs=()
  if [[ $(id -u) -ne 0 ]]; then
    echo "startup.sh: --hosts must run as root: it makes network namespaces, veth pairs and a bridge" >&2
    exit 1
  fi
  source "$(dirname "$here")/cluster/cluster-network.sh"
  source "$(dirname "$here")/etcd-on-loopback.sh"
  trap hosts_namespaces_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  mkdir -p "$out/net"
  set -e
  make_cluster_network "$tag" "$n" "$rate" "$out/net"
  set +e
  echo
  echo "## $n emulated hosts x $r ranks = $((n * r)) ranks, links $rate each way, store on $(cluster_address 0) (load $(load))"
  for peer in ${peers//,/ }; do
    [[ $peer == canopy || $peer == etcd ]] || continue  # mpi and gloo run on one host only
    dir="$out/${n}x${r}-$peer"
    rm -rf "$dir"
    mkdir -p "$dir"
    [[ $peer != etcd ]] || hosts_start_etcd "$tag" "$dir" || continue
    # The nodes share one job token; each launcher's output goes to a log of its own, node 0's to run's.
    script="$dir/launch.sh"
    {
      echo "export CANOPY_JOB_TOKEN=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')"
      for ((k = n - 1; k >= 1; k--)); do
        echo "$(hosts_node_command "$peer" "$k" "$n" "$r" "$tag" "$dir") >$dir/node-$k.log 2>&1 &"
      done
      echo "$(hosts_node_command "$peer" 0 "$n" "$r" "$tag" "$dir") &"
      echo 'status=0; for job in $(jobs -p); do wait "$job" || status=$?; done; exit $status'
    } >"$script"
    run "$dir" "$((n * r))" bash "$script"
    for ((k = 1; k < n; k++)); do
      [[ $(cut -d' ' -f1 "$dir/status") == 0 ]] || { echo "# node $k's log ends:" >&2; tail -n 4 "$dir/node-$k.log" | sed 's/^/#   /' >&2; }
    done
    dirs+=("$dir")
  done
  ((${#dirs[@]} == 0)) || python3 "$here/startup-table.py" "$((n * r))" "${dirs[@]}"
}
