"""DistributedDataParallel step time under gloo and canopy, in the same processes (CPU).

    canopy-run --nproc 4 /usr/bin/python3 bench/torch/ddp_step.py --layers 6 --width 1536

The model is `--layers` Linear(width, width) layers with ReLU between them (float32 gradients: layers x
(width^2 + width) x 4 bytes; 57 MB for the defaults). Two DDP replicas of it train side by side, one on
the default (canopy) group, one on a gloo group over the same ranks; rounds of `--steps` steps alternate
between them. A third timing runs the same steps under no_sync() (DDP without communication): the
compute alone. Rank 0 prints the median step time of each and what bounds the step.
"""
import argparse
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import canopy_torch  # noqa: F401


def model(layers, width):
    torch.manual_seed(0)
    parts = []
    for _ in range(layers):
        parts += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*parts)


def timed_steps(ddp, opt, x, steps, timing_group, sync=True):
    dist.barrier(group=timing_group)
    start = time.perf_counter()
    for _ in range(steps):
        opt.zero_grad()
        if sync:
            ddp(x).square().mean().backward()
        else:
            with ddp.no_sync():
                ddp(x).square().mean().backward()
        opt.step()
    elapsed = torch.tensor([(time.perf_counter() - start) / steps], dtype=torch.float64)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX, group=timing_group)
    return elapsed.item()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--width", type=int, default=1536)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=3, help="steps per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    dist.init_process_group("canopy")
    gloo = dist.new_group(backend="gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    replicas = {"canopy": DDP(model(args.layers, args.width)),
                "gloo": DDP(model(args.layers, args.width), process_group=gloo)}
    optimizers = {name: torch.optim.SGD(m.parameters(), lr=1e-4) for name, m in replicas.items()}
    grad_bytes = sum(p.numel() * 4 for p in replicas["canopy"].parameters())
    x = torch.randn(args.batch, args.width, generator=torch.Generator().manual_seed(rank))
    for name in replicas:  # warm-up: DDP's first steps rebuild buckets
        timed_steps(replicas[name], optimizers[name], x, 2, gloo)
    times = {"canopy": [], "gloo": [], "compute": []}
    for r in range(args.rounds):
        order = ["canopy", "gloo"] if r % 2 == 0 else ["gloo", "canopy"]
        for name in order:
            times[name].append(timed_steps(replicas[name], optimizers[name], x, args.steps, gloo))
        times["compute"].append(timed_steps(replicas["canopy"], optimizers["canopy"], x, args.steps, gloo,
                                            sync=False))
    if rank == 0:
        med = {name: statistics.median(t) * 1e3 for name, t in times.items()}
        bound = "communication" if med["canopy"] > 1.5 * med["compute"] else "compute"
        print(f"DDP step, {size} ranks, {grad_bytes / 1e6:.1f} MB of float32 gradients, batch {args.batch}, "
              f"{args.threads} thread(s) per rank: gloo {med['gloo']:.1f} ms, canopy {med['canopy']:.1f} ms, "
              f"canopy/gloo {med['canopy'] / med['gloo']:.2f}; compute alone (no_sync) {med['compute']:.1f} ms: "
              f"canopy's step is bound by {bound}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
