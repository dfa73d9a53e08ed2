"""What a torch program sees when a peer dies, when ranks disagree and when a call outlasts its deadline:
a RuntimeError carrying Canopy's message, on every rank, never a hang. One scenario per run:

    run_ranks.py --nproc 4 --killed 2 -- check_failures.py killed --victim 2
    run_ranks.py --nproc 2 -- check_failures.py mismatch
    run_ranks.py --nproc 2 -- check_failures.py timeout
    CANOPY_TIMEOUT=2 run_ranks.py --nproc 2 -- check_failures.py canopy_timeout
"""
import argparse
import datetime
import os
import signal
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import canopy_torch  # noqa: F401


def expect_error(what, call, *texts, within=None):
    start = time.monotonic()
    try:
        call()
    except RuntimeError as e:
        elapsed = time.monotonic() - start
        message = str(e)
        print(f"{what}: RuntimeError after {elapsed:.2f} s: {message}", flush=True)
        missing = [t for t in texts if t not in message]
        if missing:
            sys.exit(f"{what}: the message lacks {missing}")
        if within is not None and elapsed > within:
            sys.exit(f"{what}: the error took {elapsed:.2f} s, more than {within} s")
        return elapsed
    sys.exit(f"{what}: no error")


def killed(args, rank):
    """DDP training; the victim SIGKILLs itself in the middle of step 3's backward pass. Every other rank's
    error names it, except where the victim hosted torch's store (rank 0 under env://): then the store dies
    with it, no rank can publish who failed first, and a rank that was waiting on another survivor names
    that one (docs/TORCH.md); it still raises within the timeout."""
    timeout = 20
    dist.init_process_group("canopy", timeout=datetime.timedelta(seconds=timeout))
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(32, 256), nn.ReLU(), nn.Linear(256, 8)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def train(steps):
        for step in range(steps):
            x = torch.randn(16, 32)
            loss = model(x).square().mean()
            if rank == args.victim and step == 3:
                os.kill(os.getpid(), signal.SIGKILL)
            loss.backward()
            opt.step()
            opt.zero_grad()

    named = [f"rank {args.victim}"] if args.victim != 0 else ["did rank"]
    expect_error("training with a killed rank", lambda: train(100), *named, within=timeout)
    # Every later call refuses at once, naming the first failure.
    expect_error("a call after the failure", lambda: dist.all_reduce(torch.ones(1)), *named, within=2)
    if args.victim != 0:  # rank 0 hosts torch's store: it stays until every survivor has read the report
        store = dist.distributed_c10d._get_default_store()
        store.add("survivors_done", 1)
        deadline = time.monotonic() + timeout
        while rank == 0 and store.add("survivors_done", 0) < dist.get_world_size() - 1:
            if time.monotonic() > deadline:
                sys.exit("the other survivors did not finish")
            time.sleep(0.05)


def mismatch(args, rank):
    dist.init_process_group("canopy", timeout=datetime.timedelta(seconds=30))
    count = 10 if rank == 0 else 20
    expect_error("all_reduce of different sizes", lambda: dist.all_reduce(torch.ones(count)), "mismatch",
                 "10", "20", "rank 0", "rank 1", within=10)


def timeout(args, rank):
    """Rank 1 is alive (its heartbeat goes on) but late: rank 0's calls end at the timeouts torch was given
    (new_group's, then init_process_group's), not later."""
    # The store waits for both ranks before the group forms: a slow start must not eat the 3 s deadline.
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), 2, rank == 0,
                          datetime.timedelta(seconds=60), wait_for_workers=True)
    dist.init_process_group("canopy", store=store, rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=3))
    short = dist.new_group(timeout=datetime.timedelta(seconds=1.5))
    done = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=60))
    # The process group's own monitored_barrier: returns once all arrive; else raises in torch's words.
    watched = dist.new_group(timeout=datetime.timedelta(seconds=60))
    watched.monitored_barrier(datetime.timedelta(seconds=30))
    dist.barrier(group=done)
    if rank == 0:
        elapsed = expect_error("a monitored_barrier rank 1 skips",
                               lambda: watched.monitored_barrier(datetime.timedelta(seconds=1)),
                               " Timed out ", "timed out waiting for rank(s) 1", within=5)
        if elapsed < 0.9:
            sys.exit(f"monitored_barrier gave up after {elapsed:.2f} s, before its 1 s timeout")
    dist.barrier(group=done)
    if rank == 0:
        elapsed = expect_error("a new_group call nobody joins", lambda: dist.all_reduce(torch.ones(4), group=short),
                               "timed out waiting for rank(s) 1", within=6)
        if elapsed < 1.2:
            sys.exit(f"the call gave up after {elapsed:.2f} s, before new_group's 1.5 s timeout")
    dist.barrier(group=done)
    if rank == 0:
        elapsed = expect_error("a call nobody joins", lambda: dist.all_reduce(torch.ones(4)),
                               "timed out waiting for rank(s) 1", within=8)
        if elapsed < 2.5:
            sys.exit(f"the call gave up after {elapsed:.2f} s, before the 3 s timeout")
    else:
        time.sleep(6)  # meanwhile this rank's liveness monitor reads rank 0's report and fails the group
        expect_error("joining after the peer gave up", lambda: dist.all_reduce(torch.ones(4)),
                     "timed out waiting for rank(s) 1", within=1)
    dist.barrier(group=done)  # rank 0 (torch's store) stays until rank 1 has seen it


def canopy_timeout(args, rank):
    """With torch's default timeout (none given), CANOPY_TIMEOUT is the deadline, as in C++ programs. The
    default group is gloo's here: its init waits for every rank, so the canopy group formed next does not
    spend its 2 s deadline waiting for a slow starter."""
    if os.environ.get("CANOPY_TIMEOUT") != "2":
        sys.exit("run this scenario with CANOPY_TIMEOUT=2")
    dist.init_process_group("gloo")
    group = dist.new_group(backend="canopy")
    if rank == 0:
        elapsed = expect_error("a call nobody joins", lambda: dist.all_reduce(torch.ones(4), group=group),
                               "timed out waiting for rank(s) 1", within=6)
        if elapsed < 1.5:
            sys.exit(f"the call gave up after {elapsed:.2f} s, before CANOPY_TIMEOUT's 2 s")
    dist.barrier()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario", choices=["killed", "mismatch", "timeout", "canopy_timeout"])
    parser.add_argument("--victim", type=int, default=2)
    args = parser.parse_args()
    rank = int(os.environ["RANK"])
    globals()[args.scenario](args, rank)
    print(f"rank {rank}: {args.scenario} checked", flush=True)
    os._exit(0)  # the group is broken on purpose: leave without tearing it down


if __name__ == "__main__":
    main()
