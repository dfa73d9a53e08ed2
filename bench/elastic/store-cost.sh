#!/usr/bin/env bash
# store-cost.sh: what the job's store costs a failure-free DDP step under canopy_torch.elastic, the etcd store
# (canopy-run --nnodes 1:1 --rdzv-backend etcd, one member on loopback) against canopy-run's TcpStore.
#
#   bench/elastic/store-cost.sh [--ranks 4] [--steps 300] [--rounds 3] [--compute-ms 0]
#
# Each round runs the two, in turn (the order swapped every other round), over bench/elastic/ddp_recovery.py's
# worker with no victim; each prints the median and the 90th percentile of rank 0's step-to-step time (the
# first 10 steps left out) and the run's wall time. elastic.run's commit() asks for the join tickets after
# every step; the liveness monitor's thread reads them from the store, so a step itself sends the store
# nothing. The etcd member ends with the script.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build="$here/../../build"
ranks=4
steps=300
rounds=3
compute_ms=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --ranks) ranks="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --compute-ms) compute_ms="$2"; shift 2 ;;
    *) echo "usage: store-cost.sh [--ranks R] [--steps S] [--rounds N] [--compute-ms MS]" >&2; exit 2 ;;
  esac
done
source "$here/../etcd-on-loopback.sh"
work=$(mktemp -d /tmp/cnpy-store-cost-XXXXXX)
cleanup() {
  stop_loopback_etcd
  rm -rf "$work"
}
trap cleanup EXIT
start_loopback_etcd "$work"

run() {  # store round
  local events="$work/events-$1-$2" store_flags=()
  mkdir -p "$events"
  [[ $1 == etcd ]] && store_flags=(--nnodes 1:1 --rdzv-backend etcd --rdzv-endpoint "$etcd_endpoint"
                                   --rdzv-id "cost-$2")
  local start=$EPOCHREALTIME
  CANOPY_JOB_TOKEN=store-cost PYTHONPATH="$build/python" timeout 600 "$build/bin/canopy-run" --nproc "$ranks" \
    "${store_flags[@]}" /usr/bin/python3 "$here/ddp_recovery.py" --worker --events "$events" --ranks "$ranks" \
    --steps "$steps" --compute-ms "$compute_ms" --victim -1 >"$work/$1-$2.out" 2>&1
  python3 - "$1" "$2" "$start" "$EPOCHREALTIME" "$events" <<'EOF'
import glob, json, statistics, sys
store, round_, start, end, events = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
for name in glob.glob(events + "/events-*.jsonl"):
    records = [json.loads(line) for line in open(name)]
    if records[0]["launched"] != 0:
        continue
    times = [r["t"] for r in records if r["kind"] == "step"]
    gaps = sorted((b - a) * 1000 for a, b in zip(times[10:], times[11:]))
    p90 = gaps[int(0.9 * (len(gaps) - 1))]
    print(f"{round_:>5}  {store:>5}  {statistics.median(gaps):>13.2f}  {p90:>10.2f}  {end - start:>10.1f}")
EOF
}

echo "# $ranks ranks on one host, $steps steps of DDP under canopy_torch.elastic, --compute-ms $compute_ms; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# round  store  step_median_ms  step_p90_ms  run_wall_s"
for ((r = 1; r <= rounds; r++)); do
  if ((r % 2)); then run tcp "$r"; run etcd "$r"; else run etcd "$r"; run tcp "$r"; fi
done
echo "# load $(cut -d' ' -f1-3 /proc/loadavg) at the end"
