#!/usr/bin/env python3
"""The table startup.sh prints for one rank count: one row per peer from its run's per-rank JSON lines.

    startup-table.py RANKS RUN_DIR...    # each RUN_DIR holds rank-*.json, and status (rc wall_s why)

Times are seconds, from the launch to the end of the first 4-byte all-reduce ("first AR": the slowest rank
is when the job has started) and of construction alone; sockets and descriptors are per rank, memory is
VmRSS / VmHWM in MiB; "wall s" is from the launch to the launcher's exit. The `bench` peer (canopy-bench's
one 4-byte all-reduce) has rows.json instead of rank lines: its row is its result and wall time. A run whose
ranks did not all report says how many did and why.
"""
import glob
import json
import os
import statistics
import sys


def rows_of(run_dir):
    bench_rows = os.path.join(run_dir, "rows.json")
    if os.path.exists(bench_rows):  # canopy-bench: one row for the whole group, its wrong count summed
        with open(bench_rows) as f:
            row = json.load(f)[0]
        return [{"result_ok": row["wrong"] == 0} for _ in range(row["ranks"])]
    rows = []
    for path in glob.glob(os.path.join(run_dir, "rank-*.json")):
        with open(path) as f:
            rows += [json.loads(line) for line in f if line.strip()]
    return rows


def spread(rows, key, scale=1.0, fmt="{:.2f}"):
    values = [r[key] * scale for r in rows if r.get(key) is not None]
    if not values:
        return "-"
    return (fmt + "/" + fmt).format(max(values), statistics.median(values))


def median(rows, key, scale=1.0, fmt="{:.0f}"):
    values = [r[key] * scale for r in rows if r.get(key) is not None]
    return fmt.format(statistics.median(values)) if values else "-"


def sockets(rows, key):
    values = [r[key] for r in rows if r.get(key) is not None]
    return f"{statistics.median(values):.0f}/{max(values)}" if values else "-"


def main():
    ranks = int(sys.argv[1])
    header = ("peer", "ok/P", "first AR max/med", "construct max/med", "sockets med/max", "fds med",
              "RSS MiB", "HWM MiB", "sockets ring", "sockets sweep", "store req med/max", "wall s")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    slowest = {}
    for run_dir in sys.argv[2:]:
        peer = os.path.basename(run_dir.rstrip("/")).split("-", 1)[1]
        rows = rows_of(run_dir)
        good = [r for r in rows if r.get("result_ok")]
        status = open(os.path.join(run_dir, "status")).read().split(maxsplit=2) if os.path.exists(
            os.path.join(run_dir, "status")) else ["?", "?", ""]
        times = [r["to_first_allreduce_s"] for r in good if r.get("to_first_allreduce_s") is not None]
        if len(good) == ranks and times:
            slowest[peer] = max(times)
        print("| " + " | ".join([
            peer, f"{len(good)}/{ranks}", spread(good, "to_first_allreduce_s"), spread(good, "construct_s"),
            sockets(good, "sockets"), median(good, "fds"), median(good, "rss_kib", 1 / 1024, "{:.1f}"),
            median(good, "hwm_kib", 1 / 1024, "{:.1f}"), sockets(good, "sockets_after_ring"),
            sockets(good, "sockets_after_sweep"), sockets(good, "store_requests"), status[1]]) + " |")
    for run_dir in sys.argv[2:]:
        peer = os.path.basename(run_dir.rstrip("/")).split("-", 1)[1]
        rows = rows_of(run_dir)
        errors = sorted({r["error"] for r in rows if r.get("error")})
        status = open(os.path.join(run_dir, "status")).read().split(maxsplit=2) if os.path.exists(
            os.path.join(run_dir, "status")) else ["?", "?", ""]
        if status[0] != "0" or errors:
            why = status[2].strip() if len(status) > 2 else ""
            print(f"{peer}: exit status {status[0]}{': ' + why if why else ''}")
            for e in errors[:3]:
                print(f"  a rank's error: {e}")
    if "canopy" in slowest and "mpi" in slowest:
        print(f"Canopy/MPI time to the first all-reduce (slowest rank): "
              f"{slowest['canopy'] / slowest['mpi']:.2f}")


if __name__ == "__main__":
    main()
