#!/usr/bin/env bash
# slurm-cluster.sh: a real SLURM (Debian's munge, slurmctld and slurmd) made on this machine for one
# command, then taken down.
#
#   tests/slurm_mpi/slurm-cluster.sh [--nodes N] [--cpus C] [--rate RATE] [--timeout S] -- COMMAND [ARGS...]
#
# The nodes (default 1) are emulated (tests/slurm_mpi/private-cluster.sh): node K is SLURM node cnpy-s-nK
# with a network namespace, an address (NodeAddr) and a host name of its own, links capped at RATE
# (default 1gbit), C CPUs (default 2) and a slurmd; slurmctld runs on node 0. COMMAND runs on node 0 with
# SLURM_CONF set once every node is idle (`srun -N 4 -n 8 canopy-bench ...`); its status is the
# script's, and the daemons' logs are shown when it fails. The whole run is bounded by --timeout (default
# 120 s); everything it made vanishes with it, however it ends.
#
# Exit status 77, with the reason on stderr, when this machine cannot run it: not root, no namespaces,
# or SLURM missing (apt-get install slurmctld slurmd slurm-client munge).
set -Eeuo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/private-cluster.sh"

if [[ "${1:-}" != --inside ]]; then
  for tool in munged slurmctld slurmd srun sinfo; do
    command -v "$tool" >/dev/null ||
      private_cluster_skip "no $tool (apt-get install slurmctld slurmd slurm-client munge)"
  done
  enter_private_cluster "$@"
fi

# Inside the namespaces.
nodes=$2 cpus=$3 rate=$4
shift 4
run=$private_run

show_logs() {
  for log in "$run"/log/*.log; do
    [[ -e "$log" ]] || continue
    echo "----- $(basename "$log") (last 30 lines)" >&2
    tail -n 30 "$log" >&2
  done
}
trap 'status=$?; echo "slurm-cluster: setting up failed at line $LINENO" >&2; show_logs; exit $status' ERR

# SLURM's daemons bind with AI_ADDRCONFIG, which finds nothing where loopback is the only interface: even
# one node gets the emulated network.
make_private_cluster s "$nodes" "$rate"
mkdir -p "$run"/{munge,key,state,log}
chmod 700 "$run/key"
for name in "${names[@]}"; do mkdir -p "$run/spool/$name"; done

dd if=/dev/urandom of="$run/key/munge.key" bs=1024 count=1 status=none
chmod 400 "$run/key/munge.key"
munged --origin=127.0.0.1 --socket="$run/munge/munge.socket" --key-file="$run/key/munge.key" \
  --pid-file="$run/munged.pid" --log-file="$run/log/munged.log" --seed-file="$run/key/munge.seed"

export SLURM_CONF="$run/slurm.conf"
cat >"$SLURM_CONF" <<EOF
ClusterName=canopy
SlurmctldHost=${names[0]}(${addresses[0]})
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$run/munge/munge.socket
StateSaveLocation=$run/state
SlurmdSpoolDir=$run/spool/%n
SlurmctldPidFile=$run/slurmctld.pid
SlurmdPidFile=$run/slurmd.%n.pid
SlurmctldLogFile=$run/log/slurmctld.log
SlurmdLogFile=$run/log/slurmd.%n.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
MpiParams=ports=12000-12999
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=3
MinJobAge=2
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName=DEFAULT CPUs=$cpus RealMemory=1000 State=UNKNOWN
EOF
for ((i = 0; i < nodes; i++)); do echo "NodeName=${names[i]} NodeAddr=${addresses[i]}" >>"$SLURM_CONF"; done
echo "PartitionName=canopy Nodes=ALL Default=YES MaxTime=INFINITE State=UP" >>"$SLURM_CONF"

on_node "${names[0]}" slurmctld -i
for name in "${names[@]}"; do on_node "$name" slurmd; done

ready_by=$((SECONDS + 30))
while true; do
  idle=$(on_node "${names[0]}" timeout 5 sinfo -h -N -t idle -o %N 2>/dev/null | wc -l) || idle=0
  ((idle == nodes)) && break
  if ((SECONDS >= ready_by)); then
    echo "slurm-cluster: only $idle of $nodes nodes became idle within 30 s" >&2
    on_node "${names[0]}" timeout 5 sinfo -N -l >&2 || true
    show_logs
    exit 1
  fi
  sleep 0.2
done
echo "# slurm-cluster: $nodes node(s) ${names[*]} idle, $cpus CPUs each, links $rate"

left=$(time_left)
trap - ERR
status=0
on_node "${names[0]}" timeout --kill-after=5 "$left" "$@" || status=$?
((status == 0)) || show_logs
exit "$status"
