# startup-hosts.sh: startup.sh's --hosts NxR, sourced by it. N emulated hosts (network namespaces on a
# bridge, bench/cluster/cluster-network.sh), one canopy-run --nnodes N --node-rank K --nproc R in each,
# every one launched at the same recorded instant; node 0 hosts the store on its own address. Each host is
# named by CANOPY_HOST_ID, since the namespaces share the machine's host name. Uses run, out, rate,
# transport, timeout_s and canopy_probe of startup.sh.

hosts_namespaces_cleanup() {  # trapped only once cluster-network.sh is sourced
  stop_cluster_processes KILL
  delete_cluster_network
  cluster_namespaces=()
}

# One node's launcher, as run() starts it: enters the namespace, then canopy-run.
hosts_node_command() {  # node-rank nodes per-node tag dir
  local k=$1 n=$2 r=$3 tag=$4 dir=$5
  echo ip netns exec "$(cluster_node "$tag" "$k")" env CANOPY_HOST_ID="$(cluster_node "$tag" "$k")" \
    CANOPY_TRANSPORT="$transport" "$bin/canopy-run" --nnodes "$n" --node-rank "$k" --nproc "$r" \
    --master-addr "$(cluster_address 0)" --master-port 29500 "${canopy_probe[@]}" --out "$dir"
}

# Runs every node's launcher under one `timeout` (run's), so the launch time and the limit are one.
run_hosts() {  # nodes per-node
  local n=$1 r=$2 tag="st$$" dir="$out/${1}x${2}-canopy" k script
  if [[ $(id -u) -ne 0 ]]; then
    echo "startup.sh: --hosts must run as root: it makes network namespaces, veth pairs and a bridge" >&2
    exit 1
  fi
  source "$(dirname "$here")/cluster/cluster-network.sh"
  trap hosts_namespaces_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  mkdir -p "$out/net"
  set -e
  make_cluster_network "$tag" "$n" "$rate" "$out/net"
  set +e
  echo
  echo "## $n emulated hosts x $r ranks = $((n * r)) ranks, links $rate each way, store on $(cluster_address 0) (load $(load))"
  rm -rf "$dir"
  mkdir -p "$dir"
  # The nodes share one job token; each launcher's output goes to a log of its own, node 0's to run's.
  script="$dir/launch.sh"
  {
    echo "export CANOPY_JOB_TOKEN=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')"
    for ((k = n - 1; k >= 1; k--)); do echo "$(hosts_node_command "$k" "$n" "$r" "$tag" "$dir") >$dir/node-$k.log 2>&1 &"; done
    echo "$(hosts_node_command 0 "$n" "$r" "$tag" "$dir") &"
    echo 'status=0; for job in $(jobs -p); do wait "$job" || status=$?; done; exit $status'
  } >"$script"
  run "$dir" "$((n * r))" bash "$script"
  for ((k = 1; k < n; k++)); do
    [[ $(cut -d' ' -f1 "$dir/status") == 0 ]] || { echo "# node $k's log ends:" >&2; tail -n 4 "$dir/node-$k.log" | sed 's/^/#   /' >&2; }
  done
  python3 "$here/startup-table.py" "$((n * r))" "$dir"
}
