#!/usr/bin/env bash
# The measurements of docs/TORCH.md: gloo against canopy in the same processes, on 2 and 4 ranks under
# canopy-run: the collectives from 4 B to 64 MiB, then the DDP step (57 MB of float32 gradients) with a
# batch of 32 (compute-heavy) and of 2 (communication-heavy). Writes the tables to stdout, and each run's
# numbers as JSON into $OUT (default /tmp/canopy-torch-bench).
#
#   bench/torch/run.sh [build-dir]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-build}" && pwd)
python=$(sed -n 's/^CANOPY_PYTHON_EXECUTABLE:INTERNAL=//p' "$build/CMakeCache.txt")
out=${OUT:-/tmp/canopy-torch-bench}
mkdir -p "$out"
export PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}"

echo "# $(date -u +%FT%TZ), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for ranks in 2 4; do
  echo "## collectives, $ranks ranks"
  "$build/bin/canopy-run" --nproc "$ranks" --no-prefix "$python" "$here/collectives.py" \
    --json "$out/collectives-$ranks.json"
done
for ranks in 2 4; do
  for batch in 32 2; do
    echo "## DDP step, $ranks ranks, batch $batch"
    "$build/bin/canopy-run" --nproc "$ranks" --no-prefix "$python" "$here/ddp_step.py" --batch "$batch"
  done
done
echo "# done, load average $(cut -d' ' -f1-3 /proc/loadavg)"
