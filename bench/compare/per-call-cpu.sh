#!/usr/bin/env bash
# per-call-cpu.sh: where one call's CPU goes, on each rank of a 2-rank stream, for Canopy and Open MPI:
# microseconds per call in user space (the library) and in the kernel (the TCP path). On loopback a stream
# of small broadcasts runs at its root's pace, and the root spends most of each call in the kernel; this
# says how much of the rest is the library's own.
#
#   bench/compare/per-call-cpu.sh [--bin DIR] [--collective broadcast] [--bytes 64] [--calls 200000]
#
# Each rank runs under `perf record` (apt-get install linux-perf; root, or kernel.perf_event_paranoid <= 1)
# twice, with --calls/4 and --calls calls: the difference of the two runs' samples is what the extra calls
# cost, without start-up (connections, the cost model's probes). Sampling at 5 kHz, a figure moves by about
# 0.1 us between runs; compare figures from runs minutes apart with care (docs/PERFORMANCE.md: the machine
# changes speed).
set -euo pipefail

bin="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/build/bin"
collective=broadcast bytes=64 calls=200000
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bin) bin="$2"; shift 2 ;;
    --collective) collective="$2"; shift 2 ;;
    --bytes) bytes="$2"; shift 2 ;;
    --calls) calls="$2"; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "per-call-cpu.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
command -v perf >/dev/null || { echo "per-call-cpu.sh: perf not found (apt-get install linux-perf)" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "per-call-cpu.sh: mpirun not found (apt-get install openmpi-bin)" >&2; exit 1; }

work=$(mktemp -d /tmp/canopy-per-call-XXXXXX)
trap 'rm -rf "$work"' EXIT
readonly rate=5000
# Each rank records itself; the launchers name the rank in RANK (canopy-run) or OMPI_COMM_WORLD_RANK.
cat >"$work/record.sh" <<EOF
#!/usr/bin/env bash
exec perf record -F $rate -o "$work/\$1.\${RANK:-\$OMPI_COMM_WORLD_RANK}.data" "\${@:2}" 2>/dev/null
EOF
chmod +x "$work/record.sh"

run() {  # library, calls
  local common=(-b "$bytes" -e "$bytes" -n "$2" -w 20)
  if [[ "$1" == canopy ]]; then
    local in_place=()
    [[ "$collective" == broadcast ]] && in_place=(--inplace)  # as MPI_Bcast: one buffer
    "$bin/canopy-run" --nproc 2 --master-port 0 "$work/record.sh" "canopy-$2" \
      "$bin/canopy-bench" "$collective" "${in_place[@]}" "${common[@]}" >/dev/null 2>&1
  else
    mpirun --allow-run-as-root --oversubscribe --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo \
      -np 2 "$work/record.sh" "mpi-$2" "$bin/canopy-mpi-bench" "$collective" "${common[@]}" >/dev/null 2>&1
  fi
}

samples() {  # perf data file -> "user kernel" sample counts
  perf report -i "$1" --stdio -n --no-children --sort dso 2>/dev/null |
    awk '!/^#/ && /%/ { if ($3 ~ /kernel/) k += $2; else u += $2 } END { print u + 0, k + 0 }'
}

few=$((calls / 4))
echo "# $collective of $bytes bytes, 2 ranks, a stream; CPU per call from the difference of $few and $calls calls"
for library in canopy mpi; do
  run "$library" "$few"
  run "$library" "$calls"
  for rank in 0 1; do
    read -r user_few kernel_few < <(samples "$work/$library-$few.$rank.data")
    read -r user_all kernel_all < <(samples "$work/$library-$calls.$rank.data")
    awk -v lib="$library" -v r="$rank" -v u=$((user_all - user_few)) -v k=$((kernel_all - kernel_few)) \
      -v n=$((calls - few)) -v f=$rate 'BEGIN {
        printf "%-7s rank %d: user %.2f us, kernel %.2f us per call (user %.0f%%)\n",
               lib, r, u / f / n * 1e6, k / f / n * 1e6, (u + k > 0 ? 100 * u / (u + k) : 0) }'
  done
done
