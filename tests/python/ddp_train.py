"""A data-parallel training script as users write it: DistributedDataParallel, unmodified, on a backend
chosen on the command line. Launch it with canopy-run (or any launcher that sets torchrun's variables):

    canopy-run --nproc 4 /usr/bin/python3 ddp_train.py --backend canopy --out losses.json

It trains one model per DDP mode (defaults, find_unused_parameters, no_sync accumulation, the allreduce and
fp16 comm hooks, join with uneven inputs) and, after every step, checks through a separate gloo group that
every replica holds bit-identical parameters. Rank 0 writes each mode's loss per step (the mean over ranks).
"""
import argparse
import hashlib
import json
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

import canopy_torch  # noqa: F401  (the line a script adds for backend "canopy")

MODES = ["default", "find_unused", "no_sync", "allreduce_hook", "fp16_hook", "join"]


class Net(nn.Module):
    def __init__(self, with_spare):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(16, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
        self.head = nn.Linear(64, 4)
        # used on even steps only: DDP must be told (find_unused_parameters)
        self.spare = nn.Linear(64, 4) if with_spare else None

    def forward(self, x, use_spare=False):
        h = self.body(x)
        return self.head(h) + (self.spare(h) if use_spare else 0)


def batch(rank, step, micro=0):
    g = torch.Generator().manual_seed(1000 * step + 10 * rank + micro)
    x = torch.randn(32, 16, generator=g)
    return x, torch.sin(x[:, :4] * 2) + x[:, 4:8] * 0.5


def replica_digest(model):
    # Parameters only: BatchNorm's running statistics are each rank's own until DDP's next forward
    # broadcasts rank 0's.
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    return hashlib.sha256(flat.numpy().tobytes()).hexdigest()


def check_replicas(model, check_group, mode, step):
    digests = [None] * dist.get_world_size()
    dist.all_gather_object(digests, replica_digest(model), group=check_group)
    if len(set(digests)) != 1:
        sys.exit(f"{mode} step {step}: replicas differ: {digests}")


def mean_loss(loss, check_group):
    t = torch.tensor([loss], dtype=torch.float64)
    dist.all_reduce(t, group=check_group)
    return t.item() / dist.get_world_size()


def train(mode, steps, check_group):
    rank = dist.get_rank()
    torch.manual_seed(0)  # the same initial model everywhere (DDP also broadcasts rank 0's)
    model = Net(with_spare=(mode == "find_unused"))
    ddp = DDP(model, find_unused_parameters=(mode == "find_unused"))
    if mode == "allreduce_hook":
        ddp.register_comm_hook(None, default_hooks.allreduce_hook)
    elif mode == "fp16_hook":
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    losses = []

    def step_once(step):
        opt.zero_grad()
        if mode == "no_sync":  # gradient accumulation: the first micro-step communicates nothing
            with ddp.no_sync():
                x, y = batch(rank, step, micro=1)
                nn.functional.mse_loss(ddp(x), y).backward()
        x, y = batch(rank, step)
        loss = nn.functional.mse_loss(ddp(x, use_spare=(mode == "find_unused" and step % 2 == 0)), y)
        loss.backward()
        opt.step()
        return loss.item()

    if mode == "join":  # uneven inputs: rank r has r more batches; join() shadows the others' all-reduces
        with ddp.join():
            for step in range(steps + rank):
                losses.append(step_once(step))
        check_replicas(model, check_group, mode, steps)
        return losses
    for step in range(steps):
        losses.append(mean_loss(step_once(step), check_group))
        check_replicas(model, check_group, mode, step)
    return losses


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", default="canopy")
    parser.add_argument("--steps", type=int, default=25)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--out", help="rank 0 writes {mode: [loss per step]} here")
    args = parser.parse_args()
    dist.init_process_group(args.backend)
    check_group = dist.new_group(backend="gloo")
    results = {mode: train(mode, args.steps, check_group) for mode in args.modes.split(",")}
    if dist.get_rank() == 0:
        for mode, losses in results.items():
            print(f"{args.backend} {mode}: loss {losses[0]:.5f} -> {losses[-1]:.5f}", flush=True)
        if args.out:
            with open(args.out, "w") as f:
                json.dump(results, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
