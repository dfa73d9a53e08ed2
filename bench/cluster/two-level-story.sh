#!/usr/bin/env bash
# two-level-story.sh: issue 20's targets across hosts, on the emulated cluster (root needed).
#
#   sudo bench/cluster/two-level-story.sh [--bench-dir DIR] [--out DIR] [--rounds K] [--rate RATE]
#
# Each round runs, on 2 nodes x 4 ranks and on 4 nodes x 2 (ranks in blocks), links at --rate (200mbit):
#   - a 16 MiB all-reduce: the flat ring, the two-level all-reduce and auto, side by side;
#   - a 16 MiB broadcast: every algorithm and auto;
# and one all-reduce on 2 x 4 with the ranks dealt round-robin. The rounds interleave, so every ratio
# compares figures of one round, and every other round runs the algorithms in the reverse order (auto
# first), since the one that runs first in a benchmark's run tends to come out a few percent slower;
# two-level-summary.py prints each round's ratios (auto's all-reduce busbw over the ring's; auto's
# broadcast over the best of the flat algorithms) and their medians.
# Rows go to DIR/round-K/*.json, tables to DIR/round-K/*.txt.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bench_dir="$here/../../build/bin"
out=""
rounds=3
rate=200mbit
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bench-dir) bench_dir="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --rate) rate="$2"; shift 2 ;;
    *) echo "two-level-story.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
out="${out:-$(mktemp -d /tmp/canopy-two-level-XXXXXX)}"
mkdir -p "$out"
cluster() { "$here/emulated-cluster.sh" --bench-dir "$bench_dir" --rate "$rate" "$@"; }
size=(-b 16M -e 16M -n 3 -w 1)
echo "# results in $out; load $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"

for ((k = 1; k <= rounds; k++)); do
  dir="$out/round-$k"
  mkdir -p "$dir"
  echo "## round $k (load $(cut -d' ' -f1-3 /proc/loadavg))"
  all_reduces=ring,two-level,auto broadcasts=all,auto
  ((k % 2 == 1)) || { all_reduces=auto,two-level,ring; broadcasts=auto,all; }
  for layout in "2 4" "4 2"; do
    read -r nodes per <<<"$layout"
    name="${nodes}x${per}"
    cluster --nodes "$nodes" --ranks-per-node "$per" --no-link-test -- allreduce --algo "$all_reduces" \
      "${size[@]}" --json "$dir/allreduce-$name.json" | tee "$dir/allreduce-$name.txt"
    cluster --nodes "$nodes" --ranks-per-node "$per" --no-link-test -- broadcast --algo "$broadcasts" \
      "${size[@]}" --json "$dir/broadcast-$name.json" | tee "$dir/broadcast-$name.txt"
  done
  cluster --nodes 2 --ranks-per-node 4 --placement round-robin --no-link-test -- allreduce \
    --algo "$all_reduces" "${size[@]}" --json "$dir/allreduce-2x4-round-robin.json" |
    tee "$dir/allreduce-2x4-round-robin.txt"
done
echo "## link rate"
cluster --nodes 2 -- broadcast --algo flat -b 1K -e 1K -n 1 -w 0 | grep "link rate"
python3 "$here/two-level-summary.py" "$out"
