#!/usr/bin/env bash
# compare.sh: Canopy and Open MPI on the same collectives, sizes and rank counts, on this machine, in the
# same run, both over TCP (the default) or both over shared memory (--shm); prints Canopy/MPI ratios of
# time and busbw, and over TCP both busbw as a percentage of the loopback ceiling canopy-bench measures in
# the same run.
#
#   bench/compare/compare.sh [--bin DIR] [--ranks "2 4"] [--collectives "allreduce broadcast"]
#                            [-b 4] [-e 64M] [-f 16] [-n 20] [-w 5] [--min-time MS] [--latency] [--out DIR]
#                            [--algo auto] [--repeat N] [--bind core|none] [--shm]
#
# --min-time MS times every size for about MS milliseconds on both sides (-n the least; see canopy-bench
# --help): 200 iterations of a small collective last about a millisecond, which measures how the ranks
# line up after the barrier more than the stream.
#
# --latency times one call at a time on both sides, each after a barrier (OSU's method), instead of a
# stream of back-to-back calls (nccl-tests' method): each call's own latency, averaged over ranks.
#
# --repeat N runs everything N times, Canopy and Open MPI taking turns, into DIR/round-K/, and ends with
# the median of the N time ratios per row (bench/compare/median-ratios.py): with 4-8 ranks on 2 cores one
# run's ratio moves by up to 2x, the median of 5 much less.
#
# Open MPI runs with --mca pml ob1 --mca btl tcp,self (TCP even between local ranks: the same transport
# as Canopy, CANOPY_TRANSPORT=tcp), --oversubscribe (ranks may outnumber cores) and --allow-run-as-root.
# --shm: Open MPI with --mca btl self,vader (its shared-memory transport), Canopy with
# CANOPY_TRANSPORT=shm+tcp, and canopy-bench's --ceiling measures the memory's copy and reduce rates instead.
#
# By default each runs as its users run it: canopy-run leaves ranks unbound, mpirun binds them (to a core
# each up to 2 ranks). --bind core binds both (canopy-run --bind-to core, mpirun --bind-to core), --bind
# none neither: on 2 cores where the scheduler puts 2 ranks moves a small broadcast by up to 6x.
#
# Around every run a fixed piece of CPU work is timed (canopy-bench cpu): on shared virtual machines the
# CPU's speed moves by 2-3x within seconds, and a ratio between runs that met different speeds says more
# about the machine than about the libraries. Such pairs are flagged here and in the medians.
set -euo pipefail

bin="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/build/bin"
ranks="2 4"
collectives="allreduce broadcast"
min=4 max=64M factor=16 iters=20 warmup=5 min_time=0 algo=auto repeat=1 shm=0
timing=()
canopy_bind=() mpi_bind=()
out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bin) bin="$2"; shift 2 ;;
    --ranks) ranks="$2"; shift 2 ;;
    --collectives) collectives="$2"; shift 2 ;;
    --algo) algo="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --repeat) repeat="$2"; shift 2 ;;
    -b) min="$2"; shift 2 ;;
    -e) max="$2"; shift 2 ;;
    -f) factor="$2"; shift 2 ;;
    -n) iters="$2"; shift 2 ;;
    -w) warmup="$2"; shift 2 ;;
    --min-time) min_time="$2"; shift 2 ;;
    --latency) timing=(--latency); shift ;;
    --bind)
      case "$2" in
        core) canopy_bind=(--bind-to core); mpi_bind=(--bind-to core:overload-allowed) ;;
        none) canopy_bind=(); mpi_bind=(--bind-to none) ;;
        *) echo "compare.sh: --bind takes core or none, not '$2'" >&2; exit 2 ;;
      esac
      shift 2 ;;
    --shm) shm=1; shift ;;
    -h|--help) sed -n '2,34p' "$0"; exit 0 ;;
    *) echo "compare.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done

for tool in canopy-bench canopy-run canopy-mpi-bench; do
  if [[ ! -x "$bin/$tool" ]]; then
    echo "compare.sh: no $tool in $bin (canopy-mpi-bench is built only when CMake finds MPI:" \
         "apt-get install openmpi-bin libopenmpi-dev, then reconfigure)" >&2
    exit 1
  fi
done
command -v mpirun >/dev/null || { echo "compare.sh: mpirun not found (apt-get install openmpi-bin)" >&2; exit 1; }
if [[ -z "$out" ]]; then
  out=$(mktemp -d /tmp/canopy-compare-XXXXXX)
fi
mkdir -p "$out"
echo "# rows in $out; load now: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores (others' work makes numbers noisy)"

if ((shm)); then
  mpi=(mpirun --allow-run-as-root --oversubscribe --mca pml ob1 --mca btl self,vader)
  canopy_env=(env CANOPY_TRANSPORT=shm+tcp)
else
  mpi=(mpirun --allow-run-as-root --oversubscribe --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo)
  canopy_env=(env CANOPY_TRANSPORT=tcp)
fi
# Milliseconds of canopy-bench's fixed CPU work, now.
cpu_ms() { "$bin/canopy-bench" cpu | awk '{print $4}'; }
# One line on the CPU's speed around the two runs, and a warning when it moved by more than 20%.
report_cpu() {
  read -r cb ca <"$1"
  read -r mb ma <"$2"
  echo "# cpu fixed work (ms) before/after: canopy $cb/$ca, mpi $mb/$ma"
  printf '%s\n' "$cb" "$ca" "$mb" "$ma" | sort -g | sed -n '1p;$p' | paste -sd' ' | awk '$2 > 1.2 * $1 {
    printf "# the CPU speed moved by %.0f%% around these runs: their ratio says as much about the machine\n", 100 * ($2 / $1 - 1) }'
}
[[ "$repeat" =~ ^[1-9][0-9]*$ ]] || { echo "compare.sh: --repeat must be a positive count, not '$repeat'" >&2; exit 2; }
status=0
top="$out"
for ((round = 1; round <= repeat; round++)); do
  if ((repeat > 1)); then out="$top/round-$round"; mkdir -p "$out"; echo; echo "# round $round of $repeat"; fi
for p in $ranks; do
  for c in $collectives; do
    echo
    echo "## $c, $p ranks"
    # MPI_Bcast has one buffer: Canopy's broadcast runs in place too, so that neither side copies the root's
    # input into a separate output (the other collectives are out of place on both sides).
    same_buffers=()
    [[ "$c" == broadcast ]] && same_buffers=(--inplace)
    cpu_before=$(cpu_ms)
    "${canopy_env[@]}" "$bin/canopy-run" --nproc "$p" --master-port 0 "${canopy_bind[@]}" "$bin/canopy-bench" "$c" --algo "$algo" -b "$min" -e "$max" \
      -f "$factor" -n "$iters" -w "$warmup" --min-time "$min_time" "${timing[@]}" "${same_buffers[@]}" --ceiling --json "$out/canopy-$c-$p.json" >"$out/canopy-$c-$p.txt" 2>&1 \
      || { echo "canopy-bench failed, see $out/canopy-$c-$p.txt" >&2; status=1; continue; }
    echo "$cpu_before $(cpu_ms)" >"$out/cpu-canopy-$c-$p.txt"
    cpu_before=$(cpu_ms)
    "${mpi[@]}" "${mpi_bind[@]}" -np "$p" "$bin/canopy-mpi-bench" "$c" -b "$min" -e "$max" -f "$factor" -n "$iters" -w "$warmup" --min-time "$min_time" "${timing[@]}" \
      --json "$out/mpi-$c-$p.json" >"$out/mpi-$c-$p.txt" 2>&1 \
      || { echo "canopy-mpi-bench failed, see $out/mpi-$c-$p.txt" >&2; status=1; continue; }
    echo "$cpu_before $(cpu_ms)" >"$out/cpu-mpi-$c-$p.txt"
    grep -m1 -E "ceiling, measured now|memory, measured now" "$out/canopy-$c-$p.txt" | sed 's/^\[0\] //' || true
    report_cpu "$out/cpu-canopy-$c-$p.txt" "$out/cpu-mpi-$c-$p.txt"
    "$bin/canopy-bench" compare "$out/canopy-$c-$p.json" "$out/mpi-$c-$p.json" --peer-name mpi || status=1
  done
done
done
if ((repeat > 1)); then
  echo
  # This run's rounds only: an --out folder used before may hold more.
  rounds=()
  for ((round = 1; round <= repeat; round++)); do rounds+=("$top/round-$round"); done
  python3 "$(dirname "${BASH_SOURCE[0]}")/median-ratios.py" "${rounds[@]}" || status=1
fi
exit "$status"
