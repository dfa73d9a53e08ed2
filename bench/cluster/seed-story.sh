#!/usr/bin/env bash
# seed-story.sh: the measurements behind docs/SEED.md, on the emulated cluster (root needed).
#
#   sudo bench/cluster/seed-story.sh [--bench-dir DIR] [--out DIR] [--quick]
#
# 1. The seed's own numbers: 8 nodes, a 5 MB broadcast at 1 MB/s (8 Mbit/s): flat vs binomial tree vs
#    pipelined chain and binary tree (seed: 35 s : 15 s; pipelining should approach 5 s). One run each.
# 2. The same at 100 Mbit/s, every broadcast algorithm, 3 timed runs each.
# 3. All-reduce of 5 MB on 8 nodes at 100 Mbit/s: reduce + broadcast (the seed's two steps) vs the fused
#    pipelined tree vs ring (and the others).
# 4. Time against the node count (2, 4, 8) for broadcast and all-reduce, 5 MB at 100 Mbit/s.
# 5. 64 MiB on 8 nodes at 400 Mbit/s: all-reduce busbw and pipelined broadcast against the link goodput.
# Every run prints the achieved link rate beside the configured one. Rows go to DIR/*.json, tables to
# DIR/*.txt, plots to DIR/*.svg. --quick skips part 1 (about 80 s) and part 5.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bench_dir="$here/../../build/bin"
out=""
quick=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bench-dir) bench_dir="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --quick) quick=1; shift ;;
    *) echo "seed-story.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
out="${out:-$(mktemp -d /tmp/canopy-seed-XXXXXX)}"
mkdir -p "$out"
cluster() { "$here/emulated-cluster.sh" --bench-dir "$bench_dir" "$@"; }
five_mb=(-b 5000000 -e 5000000)
echo "# results in $out; load $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"

if ((!quick)); then
  echo "## 1. 8 nodes, 5 MB broadcast at 8 Mbit/s (1 MB/s)"
  cluster --nodes 8 --rate 8mbit -- broadcast --algo flat,binomial,chain,binary-tree "${five_mb[@]}" -n 1 -w 0 --chunk-bytes 64K \
    -c 0 --json "$out/seed-8mbit.json" | tee "$out/seed-8mbit.txt"
fi

echo "## 2. 8 nodes, 5 MB broadcast at 100 Mbit/s"
cluster --nodes 8 --rate 100mbit -- broadcast --algo all "${five_mb[@]}" -n 3 -w 1 \
  --json "$out/broadcast-8.json" | tee "$out/broadcast-8.txt"

echo "## 3. 8 nodes, 5 MB all-reduce at 100 Mbit/s"
cluster --nodes 8 --rate 100mbit -- allreduce --algo reduce-broadcast,tree,double-tree,rabenseifner,ring,recursive-doubling "${five_mb[@]}" -n 3 -w 1 \
  --json "$out/allreduce-8.json" | tee "$out/allreduce-8.txt"

echo "## 4. 2 and 4 nodes"
for n in 2 4; do
  cluster --nodes "$n" --rate 100mbit -- broadcast --algo flat,binomial,chain,binary-tree "${five_mb[@]}" -n 3 -w 1 \
    --json "$out/broadcast-$n.json" | tee "$out/broadcast-$n.txt"
  cluster --nodes "$n" --rate 100mbit --no-link-test -- allreduce --algo reduce-broadcast,tree,ring "${five_mb[@]}" \
    -n 3 -w 1 --json "$out/allreduce-$n.json" | tee "$out/allreduce-$n.txt"
done
"$bench_dir/canopy-bench" plot "$out/broadcast-nodes.svg" "$out"/broadcast-{2,4,8}.json
"$bench_dir/canopy-bench" plot "$out/allreduce-nodes.svg" "$out"/allreduce-{2,4,8}.json

if ((!quick)); then
  echo "## 5. 8 nodes, 64 MiB at 400 Mbit/s"
  cluster --nodes 8 --rate 400mbit -- allreduce --algo ring,tree -b 64M -e 64M -n 2 -w 1 -c 0 \
    --json "$out/allreduce-64m.json" | tee "$out/allreduce-64m.txt"
  cluster --nodes 8 --rate 400mbit -- broadcast --algo chain,binary-tree,binomial -b 64M -e 64M -n 2 -w 1 -c 0 \
    --json "$out/broadcast-64m.json" | tee "$out/broadcast-64m.txt"
fi
echo "# done: $out"
