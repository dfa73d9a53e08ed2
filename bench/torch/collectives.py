"""torch.distributed all_reduce / broadcast / all_gather under gloo and canopy, in the same processes.

Run under a launcher that sets torchrun's variables (docs/TORCH.md), for example:

    canopy-run --nproc 4 /usr/bin/python3 bench/torch/collectives.py --min 4 --max 64M

The default process group is canopy's; a gloo group over the same ranks runs beside it. For each size the
backends alternate round by round, so that both see the same machine; a round times `--iters` calls after a
barrier, and its time is the slowest rank's. The table gives each backend's median round (per call) and
canopy / gloo: below 1 is canopy faster. Rank 0 prints it; --json also writes the numbers to a file.
"""
import argparse
import json
import statistics
import time

import torch
import torch.distributed as dist

import canopy_torch  # noqa: F401  (registers the backend)


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1].upper()] if text[-1].upper() in units else int(text)


def show_size(n):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n // scale} {unit}"
    return f"{n} B"


def call(op, group, tensor, gathered):
    if op == "all_reduce":
        dist.all_reduce(tensor, group=group)
    elif op == "broadcast":
        dist.broadcast(tensor, src=0, group=group)
    else:
        dist.all_gather(gathered, tensor, group=group)


def round_seconds(op, group, tensor, gathered, iters, timing_group):
    dist.barrier(group=group)
    start = time.perf_counter()
    for _ in range(iters):
        call(op, group, tensor, gathered)
    elapsed = torch.tensor([(time.perf_counter() - start) / iters], dtype=torch.float64)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX, group=timing_group)  # the slowest rank's
    return elapsed.item()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ops", default="all_reduce,broadcast,all_gather")
    parser.add_argument("--min", default="4", help="smallest message in bytes (K/M suffixes)")
    parser.add_argument("--max", default="64M")
    parser.add_argument("--factor", type=int, default=4, help="size step")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--budget", type=float, default=0.05, help="seconds per round, to pick --iters")
    parser.add_argument("--json", help="write the results here (rank 0)")
    args = parser.parse_args()

    dist.init_process_group("canopy")
    groups = {"canopy": dist.group.WORLD, "gloo": dist.new_group(backend="gloo")}
    timing_group = groups["gloo"]
    rank, size = dist.get_rank(), dist.get_world_size()
    results = []
    nbytes = parse_size(args.min)
    while nbytes <= parse_size(args.max):
        for op in args.ops.split(","):
            count = max(1, nbytes // 4)
            tensor = torch.ones(count, dtype=torch.float32)
            gathered = [torch.empty_like(tensor) for _ in range(size)] if op == "all_gather" else None
            # iterations per round from one warm-up call on each backend (the same count on every rank)
            probe = max(round_seconds(op, g, tensor, gathered, 1, timing_group) for g in groups.values())
            iters = int(min(1000, max(1, args.budget / max(probe, 1e-7))))
            times = {name: [] for name in groups}
            for r in range(args.rounds):
                order = list(groups) if r % 2 == 0 else list(reversed(groups))
                for name in order:
                    times[name].append(round_seconds(op, groups[name], tensor, gathered, iters, timing_group))
            medians = {name: statistics.median(t) for name, t in times.items()}
            results.append({"op": op, "bytes": count * 4, "ranks": size, "iters": iters,
                            "gloo_us": medians["gloo"] * 1e6, "canopy_us": medians["canopy"] * 1e6,
                            "ratio": medians["canopy"] / medians["gloo"]})
            if rank == 0:
                row = results[-1]
                print(f"{op:>10} {show_size(row['bytes']):>8}  gloo {row['gloo_us']:10.1f} us  "
                      f"canopy {row['canopy_us']:10.1f} us  canopy/gloo {row['ratio']:5.2f}  ({iters} calls x "
                      f"{args.rounds} rounds)", flush=True)
        nbytes *= args.factor
    if rank == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
