#!/usr/bin/env bash
# mpirun-cluster.sh: Open MPI's mpirun (Debian's openmpi-bin) across emulated hosts made for one command.
#
#   tests/slurm_mpi/mpirun-cluster.sh [--nodes N] [--cpus C] [--rate RATE] [--timeout S] -- MPIRUN-ARGS...
#
# The hosts (--nodes, default 1) are emulated (tests/slurm_mpi/private-cluster.sh): host K is cnpy-m-nK,
# with a network namespace, an address and a host name of its own, links capped at RATE (default 1gbit).
# mpirun runs on host 0 as `mpirun --allow-run-as-root --hostfile <the hosts, C slots each (default 2)>
# MPIRUN-ARGS`;
# it reaches the other hosts through an rsh agent that enters their namespaces (where a real cluster
# would use ssh). Its status is the script's. Bounded by --timeout (default 120 s); everything it made
# vanishes with it, however it ends.
#
# Exit status 77, with the reason on stderr, when this machine cannot run it: not root, no namespaces,
# or no mpirun (apt-get install openmpi-bin).
set -Eeuo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/private-cluster.sh"

if [[ "${1:-}" != --inside ]]; then
  command -v mpirun >/dev/null || private_cluster_skip "no mpirun (apt-get install openmpi-bin)"
  enter_private_cluster "$@"
fi

# Inside the namespaces.
hosts=$2 slots=$3 rate=$4
shift 4
make_private_cluster m "$hosts" "$rate"
for name in "${names[@]}"; do echo "$name slots=$slots"; done >"$private_run/hostfile"
# mpirun calls its agent as `agent HOST COMMAND...`, as it would call ssh.
cat >"$private_run/agent" <<EOF
#!/usr/bin/env bash
host=\$1
shift
. "$here/private-cluster.sh"
on_node "\$host" sh -c "\$*"
EOF
chmod +x "$private_run/agent"
echo "# mpirun-cluster: $hosts host(s) ${names[*]}, $slots slots each, links $rate"
on_node "${names[0]}" timeout --kill-after=5 "$(time_left)" mpirun --allow-run-as-root \
  --hostfile "$private_run/hostfile" --mca plm_rsh_agent "$private_run/agent" "$@"
