#!/usr/bin/env bash
# record-figures.sh: the loopback figures that docs/PERFORMANCE.md records for the collectives, in one run.
#
#   bench/collectives/record-figures.sh [--bin DIR] [--out DIR] [--quick]
#
#  1. 4 ranks: busbw of every all-reduce algorithm (and auto) from 4 B to 256 MiB, each row beside the cost
#     model's prediction, as a percentage of the loopback ceiling measured in the same run
#     (allreduce-4.svg; data/allreduce-4.txt and its rows);
#  2. time against P = 2, 3, 4, 8 for an 8-byte all-reduce and broadcast, every algorithm
#     (latency-vs-ranks-*.svg; data/latency-vs-ranks.txt): the log2 growth of trees against the linear growth
#     of flat and ring;
#  3. how good auto's choice is: per size, auto's measured time against the fastest algorithm's
#     (data/auto-choice.txt, from the rows of 1).
# Pictures go to OUT (docs/figures), raw output to OUT/data; the Markdown tables docs/PERFORMANCE.md links
# go to OUT/tables.md (bench/collectives/figure-tables.py).
# Run it on a quiet machine: every figure is a timing. It prints the load average before and after.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bin="$root/build/bin"
out="$root/docs/figures"
quick=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bin) bin="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --quick) quick=1; shift ;;  # a smoke run: few sizes, few iterations
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "record-figures.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
for tool in canopy-run canopy-bench; do
  [[ -x "$bin/$tool" ]] || { echo "record-figures.sh: no $tool in $bin (build first)" >&2; exit 1; }
done
mkdir -p "$out/data"
run() { "$bin/canopy-run" --nproc "$1" "$bin/canopy-bench" "${@:2}" --no-progress; }
plot() { if command -v gnuplot >/dev/null; then "$bin/canopy-bench" plot "$@"; else echo "(no gnuplot: $1 not drawn)"; fi; }

echo "# $(date -u '+%F %T UTC'), $(nproc) cores, load average: $(cut -d' ' -f1-3 /proc/loadavg)"

# 1. Small sizes need many iterations to rise above the noise; large ones few, or 256 MiB takes minutes.
if ((quick)); then small=(-b 4 -e 4K -f 32 -n 20 -w 5); large=(-b 256K -e 4M -f 16 -n 2 -w 1)
else small=(-b 4 -e 64K -f 4 -n 200 -w 20); large=(-b 256K -e 256M -f 4 -n 5 -w 2); fi
run 4 allreduce --algo all,auto "${small[@]}" --ceiling --json "$out/data/allreduce-4-small.json" | tee "$out/data/allreduce-4.txt"
run 4 allreduce --algo all,auto "${large[@]}" --ceiling --json "$out/data/allreduce-4-large.json" | tee -a "$out/data/allreduce-4.txt"
plot "$out/allreduce-4.svg" "$out/data/allreduce-4-small.json" "$out/data/allreduce-4-large.json"

# 2. The rank sweep: one 8-byte size, many iterations.
iters=$((quick ? 50 : 500))
: >"$out/data/latency-vs-ranks.txt"
for ranks in 2 3 4 8; do
  for collective in allreduce broadcast; do
    run "$ranks" "$collective" --algo all,auto -b 8 -e 8 -n "$iters" -w 50 \
      --json "$out/data/$collective-8B-$ranks.json" | tee -a "$out/data/latency-vs-ranks.txt"
  done
done
plot "$out/latency-vs-ranks-allreduce.svg" "$out"/data/allreduce-8B-*.json
plot "$out/latency-vs-ranks-broadcast.svg" "$out"/data/broadcast-8B-*.json

# 3. auto against the fastest, from the rows of 1 and 2.
"$bin/canopy-bench" choice "$out/data/allreduce-4-small.json" "$out/data/allreduce-4-large.json" \
  "$out"/data/*-8B-*.json | tee "$out/data/auto-choice.txt"

python3 "$root/bench/collectives/figure-tables.py" "$out/data" >"$out/tables.md"
echo "# done $(date -u '+%F %T UTC'), load average: $(cut -d' ' -f1-3 /proc/loadavg)"
