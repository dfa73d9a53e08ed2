#!/usr/bin/python3
"""The start-up probe through torch.distributed's gloo backend, for bench/startup/startup.sh.

    CANOPY_PROBE_LAUNCH_NS=$(date +%s%N) canopy-run --nproc 16 /usr/bin/python3 gloo_startup_probe.py \
        --out DIR

init_process_group("gloo", init_method="env://") stands for the communicator's construction (MASTER_ADDR,
MASTER_PORT, RANK and WORLD_SIZE come from canopy-run or torchrun); then one 4-byte float all-reduce,
checked, and the same JSON line per rank as canopy-startup-probe writes. Importing torch takes 1-2 CPU
seconds a process, reported apart (import_s) since it is not gloo's; DIR/imported-<r> marks each rank that
got past it, so that a run stopped by its time limit says how far it came.
"""
import argparse
import json
import os
import socket
import time

entered_ns = time.time_ns()


def since_launch(now_ns):
    launch = os.environ.get("CANOPY_PROBE_LAUNCH_NS", "")
    return (now_ns - int(launch)) * 1e-9 if launch.isdigit() else None


def descriptors():
    total = sockets = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:  # the descriptor listdir itself used, closed by now
            continue
        total += 1
        sockets += target.startswith("socket:")
    return total, sockets


def record_process(row, suffix):
    total, sockets = descriptors()
    row["sockets" + suffix] = sockets
    row["fds" + suffix] = total
    with open("/proc/self/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                row[("rss_kib" if key == "VmRSS" else "hwm_kib") + suffix] = int(value.split()[0])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="directory for rank-<r>.json")
    parser.add_argument("--timeout", type=float, default=600, help="seconds init_process_group may take")
    parser.add_argument("--sweep", action="store_true",
                        help="record the sockets again after larger all-reduces")
    parser.add_argument("--sweep-bytes", default="4,65536", help="sizes of the sweep, in bytes")
    args = parser.parse_args()
    launcher_rank = int(os.environ.get("RANK", "0"))
    row = {"peer": "gloo", "host": socket.gethostname(), "started_s": since_launch(entered_ns)}
    import datetime

    import torch
    import torch.distributed as dist

    imported_ns = time.time_ns()
    row["import_s"] = (imported_ns - entered_ns) * 1e-9
    open(os.path.join(args.out, f"imported-{launcher_rank}"), "w").close()
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=args.timeout))
    formed_ns = time.time_ns()
    one = torch.ones(1, dtype=torch.float32)
    dist.all_reduce(one)
    reduced_ns = time.time_ns()
    size = dist.get_world_size()
    row.update(rank=dist.get_rank(), size=size, transport="gloo",
               construct_s=(formed_ns - imported_ns) * 1e-9,
               first_allreduce_s=(reduced_ns - formed_ns) * 1e-9,
               to_first_allreduce_s=since_launch(reduced_ns),
               result_ok=one.item() == float(size))
    record_process(row, "")
    row["store_requests"] = None  # torch's TCPStore does not report them either
    if args.sweep:
        start = time.time_ns()
        sizes = [int(b) for b in args.sweep_bytes.split(",")]
        wrong = 0
        for nbytes in sizes:
            data = torch.ones(max(1, nbytes // 4), dtype=torch.float32)
            dist.all_reduce(data)
            wrong += int((data != float(size)).sum())
        row.update(sweep_algorithms=["gloo"], sweep_bytes=sizes, sweep_s=(time.time_ns() - start) * 1e-9,
                   sweep_wrong=wrong)
        record_process(row, "_after_sweep")
    with open(os.path.join(args.out, f"rank-{row['rank']}.json"), "a") as out:
        out.write(json.dumps(row) + "\n")
    dist.destroy_process_group()
    return 0 if row["result_ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
