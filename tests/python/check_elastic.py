"""canopy_torch.elastic with real processes and real DDP: a rank dies, the others go on; a replacement
joins. One scenario per run (tests/python/CMakeLists.txt runs each):

    run_ranks.py --nproc 3 -- check_elastic.py api
    run_ranks.py --nproc 4 --killed 2 -- check_elastic.py killed --victim 2
    run_ranks.py --nproc 4 --killed 1 -- check_elastic.py idle --victim 1
    run_ranks.py --nproc 4 --killed 2 --killed 1 -- check_elastic.py twice --victim 2 --second-victim 1
    run_ranks.py --nproc 4 -- check_elastic.py stopped --victim 3   (heartbeat 0.1 s, silent after 1 s)
    run_ranks.py --nproc 4 --killed 2 -- check_elastic.py too_few --victim 2 --min-ranks 4
    run_ranks.py --nproc 4 --killed 0 -- check_elastic.py store_lost --victim 0
    canopy-run --nproc 4 --elastic 3:4 --max-restarts 0 python3 check_elastic.py killed --victim 0
    canopy-run --nproc 4 --elastic 3:4 --max-restarts 1 python3 check_elastic.py replaced --victim 2

Every rank trains a small MLP with SGD and momentum (optimizer state that must be restored too) on
batches drawn from (step, rank). At the end the survivors compare a digest of their parameters and
optimizer state: bit-identical on every rank, or the run fails.
"""
import argparse
import datetime
import hashlib
import os
import signal
import subprocess
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

import canopy_torch
import canopy_torch.elastic as elastic

TIMEOUT = 20  # every call's deadline: a hang fails the scenario well inside run_ranks' 120 s


def batch(step, rank):
    generator = torch.Generator().manual_seed(step * 1009 + rank)
    x = torch.randn(8, 16, generator=generator)
    return x, x[:, :4].sum(dim=1, keepdim=True)


def held_out_loss(module):
    """The loss on one fixed batch no rank trains on: the same on every rank whose model is the same."""
    with torch.no_grad():
        x, y = batch(10**6, 0)
        return (module(x) - y).square().mean().item()


def digest(state):
    """A hash of the parameters and the optimizer's momentum, as int64 pieces for an all_gather."""
    h = hashlib.sha256()
    for p in state.module.parameters():
        h.update(p.detach().numpy().tobytes())
        momentum = state.optimizer.state.get(p, {}).get("momentum_buffer")
        if momentum is not None:
            h.update(momentum.numpy().tobytes())
    return torch.tensor([int.from_bytes(h.digest()[i:i + 7], "little") for i in range(0, 28, 7)],
                        dtype=torch.int64)


def all_equal_digests(state):
    mine = digest(state)
    every = [torch.zeros_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(every, mine)
    return all(torch.equal(d, every[0]) for d in every)


def check(condition, what):
    if not condition:
        sys.exit(f"api: {what}")


def api():
    """The functions under run(), on a group of 3: agree, revoke (failure() then says Revoked on every
    rank), shrink, grow with nobody waiting, and CanopyError's code."""
    rank = int(os.environ["RANK"])
    try:
        canopy_torch.join_group(datetime.timedelta(seconds=1))
        sys.exit("api: join_group without CANOPY_ELASTIC_JOIN=1 did not raise")
    except canopy_torch.CanopyError as e:
        check(e.code == "Config" and isinstance(e, RuntimeError), f"join_group raised {e.code}: {e}")
    group = canopy_torch.group_from_environment(datetime.timedelta(seconds=TIMEOUT))
    check(group.size() == 3 and canopy_torch.generation(group) == 0, "the group is not 3 ranks, generation 0")
    check(canopy_torch.agree(group, 0xF & ~(1 << rank)) == 0x8, "agree did not AND the flags")
    failure = canopy_torch.failure(group)
    check(failure is None, f"a healthy group reports a failure: {failure!r}")
    # Rank 0 revokes only once every rank has looked: its agree may return before the others' does.
    group.barrier().wait()
    if rank == 0:
        canopy_torch.revoke(group, "the api check revokes")
    try:
        group.allreduce([torch.ones(4)]).wait()
        sys.exit("api: an all-reduce on a revoked group succeeded")
    except RuntimeError:
        pass
    failure = canopy_torch.failure(group)
    check(isinstance(failure, canopy_torch.Revoked) and failure.code == "Revoked", f"failure() is {failure!r}")
    shrunk = canopy_torch.shrink(group)
    check(shrunk.size() == 3 and canopy_torch.generation(shrunk) == 1, "the shrunk group is not 3, generation 1")
    check(canopy_torch.joiners_waiting(shrunk) == 0, "someone waits to join")
    grown = canopy_torch.grow(shrunk)
    check(grown.size() == 3 and canopy_torch.generation(grown) == 2, "the grown group is not 3, generation 2")
    data = torch.full((1000,), float(rank + 1))
    grown.allreduce([data]).wait()
    check(torch.equal(data, torch.full((1000,), 6.0)), "the grown group's all-reduce is wrong")
    grown.barrier().wait()
    print(f"rank {rank}: api checked", flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario", choices=["api", "killed", "idle", "twice", "stopped", "too_few", "store_lost", "replaced"])
    parser.add_argument("--victim", type=int, default=2)
    parser.add_argument("--at-step", type=int, default=4)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--min-ranks", type=int, default=2)
    parser.add_argument("--second-victim", type=int, default=-1, help="twice: dies in the first recovery")
    args = parser.parse_args()
    if args.scenario == "api":
        return api()
    launched_rank = int(os.environ["RANK"])
    replacement = os.environ.get("CANOPY_ELASTIC_JOIN") == "1"
    first_size = int(os.environ["WORLD_SIZE"])
    is_victim = launched_rank == args.victim and not replacement

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    state = elastic.TorchState(model, optimizer, step=0, losses=[])
    initial_loss = held_out_loss(model)
    seen = {"failures": [], "sizes": []}

    def on_world_size_change(state, old, new):
        if launched_rank == args.second_victim and old is not None:
            # Restored, DDP not yet rebuilt: the others' DDP set-up fails, and they shrink once more.
            os.kill(os.getpid(), signal.SIGKILL)
        seen["sizes"].append(new)
        for group in state.optimizer.param_groups:
            group["lr"] = 0.05 * new / first_size  # the linear rule: lr follows the global batch

    def on_failure(state, error):
        seen["failures"].append(error.code)
        seen.setdefault("messages", []).append(str(error))

    def counted_allreduce_hook(process_group, bucket):
        seen["hooked"] = seen.get("hooked", 0) + 1
        return default_hooks.allreduce_hook(process_group, bucket)

    def on_ddp_built(state):
        # "killed" runs DDP with a comm hook, registered on every rebuilt DDP (one that fails the
        # scenario unless it ran after the shrink too).
        if args.scenario == "killed":
            seen["hooked"] = 0
            state.model.register_comm_hook(None, counted_allreduce_hook)

    def train(state):
        # In "replaced", go on until the replacement is in (every rank sees the same size and step, so
        # every rank decides alike), up to a bound that fails the scenario rather than hang.
        while state.step < args.steps or (args.scenario == "replaced" and dist.get_world_size() < first_size
                                          and state.step < 2000):
            x, y = batch(state.step, dist.get_rank())
            loss = (state.model(x) - y).square().mean()
            if is_victim and state.step == args.at_step and args.scenario == "stopped":
                # Alive but silent: a helper continues this process after the others have left it out.
                subprocess.Popen(["sh", "-c", f"sleep 4; kill -CONT {os.getpid()}"])
                os.kill(os.getpid(), signal.SIGSTOP)
            elif is_victim and state.step == args.at_step and args.scenario != "idle":
                os.kill(os.getpid(), signal.SIGKILL)  # the others are in backward's all-reduce by now
            loss.backward()
            state.optimizer.step()
            state.optimizer.zero_grad()
            state.losses.append(loss.item())
            state.step += 1
            state.commit()
            if args.scenario == "idle" and state.step == args.at_step:
                # Everyone between steps: the victim dies while no call is in flight; the others' next call
                # finds the group failed (their liveness monitors learned it meanwhile).
                if is_victim:
                    os.kill(os.getpid(), signal.SIGKILL)
                time.sleep(1.0)
            if args.scenario == "replaced":
                time.sleep(0.02)  # leaves the replacement's start-up (~2 s) a few dozen steps to land in

    # Rank 0 hosts the store: in "stopped" it stays until the continued rank has had its answer.
    port = os.environ.get("MASTER_PORT", "none")  # none under canopy-run --rdzv-backend etcd
    stopped_flag = os.path.join(tempfile.gettempdir(), f"check-elastic-stopped-{port}")
    started = time.monotonic()
    try:
        elastic.run(train, state, min_ranks=args.min_ranks, timeout=TIMEOUT,
                    on_world_size_change=on_world_size_change, on_failure=on_failure, on_ddp_built=on_ddp_built, verbose=True)
    except canopy_torch.TooFewRanks as e:
        elapsed = time.monotonic() - started
        if args.scenario != "too_few":
            sys.exit(f"unexpected TooFewRanks: {e}")
        if elapsed > TIMEOUT:
            sys.exit(f"TooFewRanks came after {elapsed:.1f} s")
        print(f"rank {launched_rank}: TooFewRanks as expected: {e}", flush=True)
        os._exit(0)
    except canopy_torch.CanopyError as e:
        elapsed = time.monotonic() - started
        if args.scenario == "stopped" and is_victim:
            # Continued after the others shrank without it: it learns it is no longer a member, and never
            # touches their group.
            if e.code != "Revoked" or "left out" not in str(e):
                sys.exit(f"stopped: the continued rank got {e.code}: {e}")
            print(f"rank {launched_rank}: continued, and told it was left out ({e.code}): {e}", flush=True)
            open(stopped_flag, "w").close()
            os._exit(0)
        if args.scenario != "store_lost":
            raise
        # Rank 0 hosted Canopy's store (torchrun's variables, no canopy-run): the agreement has no store
        # to decide through, so the survivors cannot shrink; they say so, within the deadline.
        if "store" not in str(e) or elapsed > 2 * TIMEOUT:
            sys.exit(f"store_lost: unexpected error after {elapsed:.1f} s: {e}")
        print(f"rank {launched_rank}: the store died with rank 0, as expected ({e.code}) after "
              f"{elapsed:.1f} s: {e}", flush=True)
        os._exit(0)
    if args.scenario in ("too_few", "store_lost"):
        sys.exit(f"{args.scenario}: training went on")

    size, rank = dist.get_world_size(), dist.get_rank()
    expected = {"killed": first_size - 1, "idle": first_size - 1, "stopped": first_size - 1, "twice": first_size - 2,
                "replaced": first_size}[args.scenario]
    problems = []
    if size != expected:
        problems.append(f"the group has {size} ranks, expected {expected}")
    if state.step < args.steps:
        problems.append(f"stopped at step {state.step}")
    if not replacement and not seen["failures"]:
        problems.append("no failure was seen")
    if args.scenario == "killed" and not seen.get("hooked"):
        problems.append("the comm hook did not run on the rebuilt DDP")
    if args.scenario == "idle":
        # The monitors (a heartbeat every 0.1 s here) fail the group during the pause: the next call is
        # refused at its start, and says what the first failure was, with its code (PeerFailed).
        if seen["failures"] != ["PeerFailed"] or "unusable after an earlier failure" not in seen["messages"][0]:
            problems.append(f"the idle group's failure: {seen['failures']} {seen.get('messages')}, expected "
                            "PeerFailed on a call refused at its start")
    if not all_equal_digests(state):
        problems.append("the ranks' models differ")
    final_loss = held_out_loss(state.module)
    if not final_loss < initial_loss:
        problems.append(f"the held-out loss did not fall: {initial_loss:.4f} -> {final_loss:.4f}")
    print(f"rank {rank} of {size} (launched as {launched_rank}{', a replacement' if replacement else ''}): "
          f"{state.step} steps, sizes {seen['sizes']}, failures {seen['failures']}, held-out loss "
          f"{initial_loss:.4f} -> {final_loss:.4f}, lr {state.optimizer.param_groups[0]['lr']:.4f}, models identical: "
          f"{not problems or 'the ranks' not in ' '.join(problems)}", flush=True)
    dist.barrier()  # nobody leaves (closing its links) while another still checks
    if args.scenario == "stopped" and launched_rank == 0:
        deadline = time.monotonic() + 30
        while not os.path.exists(stopped_flag) and time.monotonic() < deadline:
            time.sleep(0.05)
        if not os.path.exists(stopped_flag):
            problems.append("the stopped rank never reported")
        else:
            os.unlink(stopped_flag)
    if problems:
        sys.exit("; ".join(problems))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
