#!/usr/bin/env bash
# startup.sh: how long a job of P ranks takes to start and what each rank holds once it has; Canopy beside
# Open MPI over TCP and torch.distributed's gloo, in the same run, each as its users launch it.
#
#   bench/startup/startup.sh [--ranks "64 128 256 512"] [--peers canopy,etcd,bench,mpi,gloo] [--timeout 120]
#                            [--ulimit N] [--out DIR] [--transport tcp|auto] [--sweep] [--bin DIR]
#   sudo bench/startup/startup.sh --hosts 4x32 [--rate 10gbit] ...   # 4 emulated hosts of 32 ranks each
#
# Every rank runs a probe (canopy-startup-probe, canopy-mpi-startup-probe, gloo_startup_probe.py) that forms
# the world group, runs one 4-byte float all-reduce, checks it and writes a JSON line: seconds from the
# launch (`date +%s%N` here, CANOPY_PROBE_LAUNCH_NS) to the end of that all-reduce and of construction
# alone, sockets and descriptors open, VmRSS and VmHWM. Canopy's rank also records its sockets after a ring
# all-reduce; --sweep adds every all-reduce algorithm at 4 B and 64 KiB (MPI and gloo: their own
# all-reduce at those sizes) and records them again. Per P it prints a table (bench/startup/startup-table.py)
# and the Canopy/MPI ratio of the slowest rank's time. Every run's "wall s" is from the launch to the
# launcher's exit. The `bench` peer is canopy-bench itself as a user starts it, one 4-byte all-reduce
# (`canopy-bench allreduce -b 4 -e 4 -n 1 -w 0`): its row is its wall time, and with CANOPY_DEBUG=INFO in the
# environment its log (DIR/log) says where the time went (launch, forming, first call, bookkeeping, ...).
#
# The `etcd` peer is Canopy's probe under canopy-run --nnodes 1:1 --rdzv-backend etcd, the store one etcd member
# on loopback that the script starts (and ends) itself: its rows' store requests are etcd's (docs/ETCD.md).
#
# Canopy runs under canopy-run --nproc P with CANOPY_TRANSPORT=--transport (default tcp, as Open MPI's
# --mca btl tcp,self; auto lets ranks of one host use shared memory); Open MPI under `mpirun --oversubscribe
# --allow-run-as-root -np P --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo`; gloo under
# canopy-run running /usr/bin/python3 (torch's env:// store on the MASTER_PORT canopy-run gives).
# Each run is bounded by --timeout seconds; one that fails or runs out of time prints why and the tail of
# its log, and the next one starts. Gloo is skipped where P processes importing torch (about 115 MiB of
# private memory each) would not fit in half of MemAvailable, or would need more CPU time than --timeout.
#
# --ulimit N runs each launcher under `ulimit -n N`, soft and hard limit alike (bash's `ulimit -n` sets
# both): canopy-run raises its ranks' soft limit to the hard one, so a soft limit alone would test nothing.
#
# --hosts NxR (root only): N network namespaces on a bridge (bench/cluster/cluster-network.sh, links capped
# at --rate), one canopy-run --nproc R in each: the `canopy` peer with the store on node 0 (--nnodes N
# --node-rank K), the `etcd` peer through one etcd member in node 0's namespace; mpi and gloo are not run.
# Everything made is removed on exit, also when interrupted.
#
# The machine is shared: the load average is printed beside every run.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin="$(cd "$here/../.." && pwd)/build/bin"
ranks="64 128 256 512"
peers="canopy,mpi,gloo"
timeout_s=120
ulimit_n=""
out=""
transport=tcp
sweep=()
hosts=""
rate=10gbit
usage() { sed -n '2,38p' "$0"; exit "${1:-0}"; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --ranks) ranks="$2"; shift 2 ;;
    --peers) peers="$2"; shift 2 ;;
    --timeout) timeout_s="$2"; shift 2 ;;
    --ulimit) ulimit_n="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --transport) transport="$2"; shift 2 ;;
    --sweep) sweep=(--sweep); shift ;;
    --bin) bin="$2"; shift 2 ;;
    --hosts) hosts="$2"; shift 2 ;;
    --rate) rate="$2"; shift 2 ;;
    -h|--help) usage ;;
    *) echo "startup.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$timeout_s" =~ ^[1-9][0-9]*$ ]] || { echo "startup.sh: --timeout must be whole seconds, not '$timeout_s'" >&2; exit 2; }
[[ -z "$ulimit_n" || "$ulimit_n" =~ ^[1-9][0-9]*$ ]] || { echo "startup.sh: --ulimit must be a count, not '$ulimit_n'" >&2; exit 2; }
[[ "$transport" == tcp || "$transport" == auto ]] || { echo "startup.sh: --transport is tcp or auto, not '$transport'" >&2; exit 2; }
[[ -z "$hosts" || "$hosts" =~ ^([2-9]|[1-5][0-9]|6[0-4])x[1-9][0-9]*$ ]] || { echo "startup.sh: --hosts is NxR with 2..64 hosts, not '$hosts'" >&2; exit 2; }
tools=(canopy-run canopy-startup-probe)
[[ ",$peers," != *,bench,* ]] || tools+=(canopy-bench)
for tool in "${tools[@]}"; do
  [[ -x "$bin/$tool" ]] || { echo "startup.sh: no $tool in $bin (cmake --build build --target $tool)" >&2; exit 1; }
done
[[ -n "$out" ]] || out=$(mktemp -d /tmp/canopy-startup-XXXXXX)
mkdir -p "$out"
out=$(cd "$out" && pwd)
echo "# runs in $out; $(nproc) cores; limit ${timeout_s} s a run; ulimit -n ${ulimit_n:-$(ulimit -n) (unchanged)}; Canopy transport $transport"

# The load average lags (it still counts the previous run's ranks), so the processes runnable now beside it.
load() { echo "$(cut -d' ' -f1-3 /proc/loadavg), $(awk '/procs_running/ {print $2 - 1}' /proc/stat) others runnable now"; }

# Ends what is left of one run: every process whose command line names that run's folder was started by it.
end_leftovers() {
  local pid
  for pid in $(pgrep -f -- "--out $1( |$)"); do kill -9 "$pid" 2>/dev/null || true; done
}

# run DIR RANKS COMMAND...: one launch under the limits, its status in DIR/status as "rc wall_s why".
run() {
  local dir=$1 p=$2 launch rc end why="" imported
  shift 2
  mkdir -p "$dir"
  echo "# load before: $(load)" >"$dir/log"
  launch=$(date +%s%N)
  (
    [[ -z "$ulimit_n" ]] || ulimit -n "$ulimit_n" || exit 125
    exec env CANOPY_PROBE_LAUNCH_NS="$launch" timeout -k 10 "$timeout_s" "$@"
  ) >>"$dir/log" 2>&1
  rc=$?
  end=$(date +%s%N)
  end_leftovers "$dir"
  if ((rc == 124 || rc == 137)); then
    why="did not finish within ${timeout_s} s"
    imported=$(find "$dir" -name 'imported-*' | wc -l)
    [[ "$*" != *gloo* ]] || why+=" ($imported of $p ranks had imported torch)"
  elif ((rc != 0)); then
    why="failed"
  fi
  printf '%s %.1f %s\n' "$rc" "$(((end - launch) / 1000000))e-3" "$why" >"$dir/status"
  if ((rc != 0)); then
    echo "# $(basename "$dir"): exit status $rc${why:+, $why}; the log ends:" >&2
    grep -v '^# load' "$dir/log" | tail -n 6 | cut -c1-300 | sed 's/^/#   /' >&2
  fi
  return 0
}

# Why gloo cannot run P ranks here, or nothing: torch's import costs memory and CPU in every process.
gloo_unfit() {
  local p=$1 avail_mib
  avail_mib=$(awk '/MemAvailable/ {print int($2 / 1024)}' /proc/meminfo)
  if ((p * 115 > avail_mib / 2)); then
    echo "$p torch processes need about $((p * 115 / 1024)) GiB of private memory, half of MemAvailable is $((avail_mib / 2048)) GiB"
  elif ((p * 17 / 10 / $(nproc) > timeout_s)); then
    echo "$p imports of torch need about $((p * 17 / 10 / $(nproc))) s of this machine's CPUs, more than --timeout $timeout_s"
  fi
}

canopy_probe=("$bin/canopy-startup-probe" --ring "${sweep[@]}")

if [[ -n "$hosts" ]]; then
  source "$here/startup-hosts.sh"
  run_hosts "${hosts%x*}" "${hosts#*x}"
  exit 0
fi

# One etcd member on loopback, for the `etcd` peer; it ends with the script.
source "$here/../etcd-on-loopback.sh"
if [[ ",$peers," == *,etcd,* ]]; then
  start_loopback_etcd "$out" || exit 1
  trap 'stop_loopback_etcd; rm -rf "$out/etcd-data"' EXIT
fi

for p in $ranks; do
  echo
  echo "## $p ranks (load $(load))"
  dirs=()
  for peer in ${peers//,/ }; do
    dir="$out/$p-$peer"
    rm -rf "$dir"
    case "$peer" in
      canopy)
        run "$dir" "$p" env CANOPY_TRANSPORT="$transport" "$bin/canopy-run" --nproc "$p" \
          "${canopy_probe[@]}" --out "$dir" ;;
      etcd)
        run "$dir" "$p" env CANOPY_TRANSPORT="$transport" CANOPY_JOB_TOKEN=startup "$bin/canopy-run" --nproc "$p" \
          --nnodes 1:1 --rdzv-backend etcd --rdzv-endpoint "$etcd_endpoint" --rdzv-id "startup-$p-$$" \
          "${canopy_probe[@]}" --out "$dir" ;;
      bench)
        run "$dir" "$p" env CANOPY_TRANSPORT="$transport" "$bin/canopy-run" --nproc "$p" \
          "$bin/canopy-bench" allreduce -b 4 -e 4 -n 1 -w 0 --json "$dir/rows.json" ;;
      mpi)
        if [[ ! -x "$bin/canopy-mpi-startup-probe" ]] || ! command -v mpirun >/dev/null; then
          echo "# mpi: skipped, no mpirun or canopy-mpi-startup-probe (apt-get install openmpi-bin libopenmpi-dev, reconfigure)" >&2
          continue
        fi
        run "$dir" "$p" mpirun --oversubscribe --allow-run-as-root -np "$p" --mca pml ob1 --mca btl tcp,self \
          --mca btl_tcp_if_include lo -x CANOPY_PROBE_LAUNCH_NS \
          "$bin/canopy-mpi-startup-probe" "${sweep[@]}" --out "$dir" ;;
      gloo)
        unfit=$(gloo_unfit "$p")
        if [[ -n "$unfit" ]]; then
          echo "# gloo: skipped at $p ranks: $unfit" >&2
          continue
        fi
        run "$dir" "$p" env GLOO_SOCKET_IFNAME=lo "$bin/canopy-run" --nproc "$p" /usr/bin/python3 \
          "$here/gloo_startup_probe.py" --timeout "$timeout_s" "${sweep[@]}" --out "$dir" ;;
      *) echo "startup.sh: unknown peer '$peer' (canopy, etcd, bench, mpi, gloo)" >&2; exit 2 ;;
    esac
    dirs+=("$dir")
  done
  ((${#dirs[@]} == 0)) || python3 "$here/startup-table.py" "$p" "${dirs[@]}"
done
