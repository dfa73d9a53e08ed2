"""How fast a DDP job on canopy_torch.elastic goes on after a rank is SIGKILLed, and how fast a replacement
is back in (docs/RELIABILITY.md, *PyTorch: canopy_torch.elastic*). A measurement, not a test.

    PYTHONPATH=build/python /usr/bin/python3 bench/elastic/ddp_recovery.py --canopy-run build/bin/canopy-run \
        --ranks 8 --trials 5 --seed 1

Each trial runs `canopy-run --nproc R --elastic R-1:R --max-restarts 1` over this script as a worker: DDP over
an MLP (32 -> 256 -> 256 -> 1, SGD with momentum, 16 samples a rank a step, lr scaled with the world size),
canopy_torch.elastic.run around the loop. A random rank SIGKILLs itself at a random step in 10-29 (fewer for
short runs), between its forward and backward (the others are in backward's all-reduce); canopy-run starts a
replacement, which joins at a commit. One more run without a kill is the reference. Every worker writes a line
per step (time, loss, group size, generation) to a file of its own; the driver reports, per trial:

  recovery     the kill to the end of the slowest survivor's first step in the shrunk group (and to the
               moment the slowest survivor's failed step raised: the rest is shrink, restore, DDP, a step)
  replacement  the kill to the end of the replacement's first step in the grown group ("+x s" after the
               recovery), and when its process started (its first line, before torch is imported)
  identical    whether every rank's final parameters and momentum are bit-identical
  loss         the mean loss over ranks at each step, against the reference run's: z = the difference over
               the standard error that sampling alone gives (the per-rank losses' spread / sqrt(ranks),
               of both runs); with 7 ranks for some steps and a step or two done again, the curves differ
               by sampling, so |z| < 3 at nearly every step is a match
"""
import time

STARTED = time.time()  # the process's first moment, before torch's import (a replacement's start-up)

import argparse  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import signal  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402

PER_RANK_BATCH = 16
BASE_LR = 0.02


# ---------------------------------------------------------------------------------------------- worker

def worker(args):
    import torch
    import torch.distributed as dist
    import torch.nn as nn

    import canopy_torch.elastic as elastic

    launched = int(os.environ["RANK"])
    replacement = os.environ.get("CANOPY_ELASTIC_JOIN") == "1"
    victim = launched == args.victim and not replacement
    # the launched rank too: ranks on hosts with pid namespaces of their own may share a pid
    log = open(os.path.join(args.events, f"events-{launched}-{os.getpid()}.jsonl"), "w", buffering=1)

    def event(**fields):
        log.write(json.dumps(dict(fields, pid=os.getpid(), launched=launched, replacement=replacement)) + "\n")

    event(kind="start", t=STARTED)
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(32, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=BASE_LR, momentum=0.9)
    state = elastic.TorchState(model, optimizer, step=0, last_step=args.steps)
    teacher = torch.Generator().manual_seed(12345)
    w_true = torch.randn(32, 1, generator=teacher)

    def batch(step, rank):
        g = torch.Generator().manual_seed(args.seed * 1_000_003 + step * 1009 + rank)
        x = torch.randn(PER_RANK_BATCH, 32, generator=g)
        return x, torch.tanh(x @ w_true) + 0.1 * torch.randn(PER_RANK_BATCH, 1, generator=g)

    def linear_lr_rule(state, old, new):
        for group in state.optimizer.param_groups:
            group["lr"] = BASE_LR * new / args.ranks  # the global batch is new * PER_RANK_BATCH
        if old is not None and new > old:
            state.last_step = max(state.last_step, state.step + 5)  # a few steps with the replacement in

    def train(state):
        # Until the replacement has trained a few steps (every rank decides alike, from the same state).
        while state.step < state.last_step or (dist.get_world_size() < args.ranks and args.victim >= 0
                                               and state.step < 20 * args.steps):
            x, y = batch(state.step, dist.get_rank())
            loss = (state.model(x) - y).square().mean()
            if victim and state.step == args.kill_step:
                event(kind="kill", t=time.time(), step=state.step)
                os.kill(os.getpid(), signal.SIGKILL)
            loss.backward()
            state.optimizer.step()
            state.optimizer.zero_grad()
            time.sleep(args.compute_ms / 1000)  # the rest of a real step's compute
            event(kind="step", t=time.time(), step=state.step, loss=loss.item(), size=dist.get_world_size(),
                  rank=dist.get_rank(), generation=canopy_generation())
            state.step += 1
            state.commit()  # last: where replacements wait, it raises out of train() to grow

    def canopy_generation():
        import canopy_torch
        return canopy_torch.generation(dist.distributed_c10d._get_default_group())

    def on_failure(state, error):
        event(kind="failure", t=time.time(), code=error.code)

    min_ranks = args.min_ranks if args.min_ranks > 0 else max(1, args.ranks - 1)
    elastic.run(train, state, min_ranks=min_ranks, timeout=60, on_world_size_change=linear_lr_rule,
                on_failure=on_failure)
    h = hashlib.sha256()
    for p in state.module.parameters():
        h.update(p.detach().numpy().tobytes())
        h.update(state.optimizer.state[p]["momentum_buffer"].numpy().tobytes())
    event(kind="final", t=time.time(), digest=h.hexdigest(), step=state.step, size=dist.get_world_size())
    dist.barrier()
    dist.destroy_process_group()


# ---------------------------------------------------------------------------------------------- driver

def launch(args, victim, kill_step, events):
    command = [args.canopy_run, "--nproc", str(args.ranks), "--elastic", f"{args.ranks - 1}:{args.ranks}",
               "--max-restarts", "1", sys.executable, os.path.abspath(__file__), "--worker",
               "--events", events, "--ranks", str(args.ranks), "--steps", str(args.steps),
               "--seed", str(args.seed), "--victim", str(victim), "--kill-step", str(kill_step),
               "--compute-ms", str(args.compute_ms)]
    started = time.time()
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300, text=True)
    if done.returncode != 0:
        sys.exit(f"canopy-run exited {done.returncode}:\n{done.stdout[-4000:]}")
    records = []
    for name in os.listdir(events):
        with open(os.path.join(events, name)) as f:
            records += [json.loads(line) for line in f if line.strip()]
    return records, time.time() - started


def loss_curve(records, steps):
    """Per step: the mean of the ranks' losses and its standard error, from each process's last record of
    the step (a step done again after a restore replaces the first try)."""
    last = {}
    for r in records:
        if r["kind"] == "step" and r["step"] < steps:
            last[(r["pid"], r["step"])] = r["loss"]
    curve = []
    for step in range(steps):
        losses = [loss for (pid, s), loss in last.items() if s == step]
        mean = statistics.fmean(losses)
        se = statistics.stdev(losses) / math.sqrt(len(losses)) if len(losses) > 1 else 0.0
        curve.append((mean, se, len(losses)))
    return curve


def analyse(records, reference_curve, steps):
    kill = next(r for r in records if r["kind"] == "kill")
    victim_pid = kill["pid"]
    survivors = {r["pid"] for r in records if r["kind"] == "start" and not r["replacement"]} - {victim_pid}
    first_after = {}
    for r in sorted((r for r in records if r["kind"] == "step" and r["generation"] >= 1), key=lambda r: r["t"]):
        first_after.setdefault(r["pid"], r["t"])
    recovery = max(first_after[pid] for pid in survivors) - kill["t"]
    # When the slowest survivor's step raised: the rest of the recovery is the shrink, the restore, DDP's
    # rebuild and one step.
    detected = max(r["t"] for r in records if r["kind"] == "failure" and r["pid"] in survivors) - kill["t"]
    newcomer = [r for r in records if r["kind"] == "start" and r["replacement"]]
    replacement = None
    if newcomer:
        pid = newcomer[0]["pid"]
        replacement = {"started": newcomer[0]["t"] - kill["t"], "training": first_after[pid] - kill["t"]}
    finals = [r for r in records if r["kind"] == "final"]
    curve = loss_curve(records, steps)
    z = [(m - rm) / math.sqrt(se ** 2 + rse ** 2) if se + rse > 0 else 0.0
         for (m, se, _), (rm, rse, _) in zip(curve, reference_curve)]
    return {"victim": kill["launched"], "kill_step": kill["step"], "recovery_s": recovery, "detected_s": detected,
            "replacement": replacement, "ranks_at_end": len(finals),
            "identical": len({r["digest"] for r in finals}) == 1,
            "steps_within_3_se": sum(abs(v) < 3 for v in z), "max_abs_z": max(abs(v) for v in z),
            "final_loss": curve[-1][0], "reference_final_loss": reference_curve[-1][0],
            "steps_with_fewer_ranks": sum(n < len(finals) for (_, _, n) in curve)}


def driver(args):
    rng = random.Random(args.seed)
    print(f"# {args.ranks} ranks, canopy-run --elastic {args.ranks - 1}:{args.ranks} --max-restarts 1, "
          f"{args.steps} steps (more until the replacement is in), {args.compute_ms} ms of pretend compute a "
          f"step, seed {args.seed}; load average {os.getloadavg()[0]:.1f}", flush=True)
    with tempfile.TemporaryDirectory() as events:
        reference, took = launch(args, -1, -1, events)
    reference_curve = loss_curve(reference, args.steps)
    ref_digests = {r["digest"] for r in reference if r["kind"] == "final"}
    print(f"reference (no kill): {took:.1f} s, final mean loss {reference_curve[-1][0]:.5f}, ranks identical: "
          f"{len(ref_digests) == 1}", flush=True)
    results = []
    for trial in range(args.trials):
        victim, kill_step = rng.randrange(args.ranks), rng.randrange(10, max(11, min(30, args.steps - 5)))
        with tempfile.TemporaryDirectory() as events:
            records, took = launch(args, victim, kill_step, events)
        result = analyse(records, reference_curve, args.steps)
        results.append(result)
        rep = result["replacement"]
        print(f"trial {trial + 1}: rank {victim} killed at step {kill_step}; recovery {result['recovery_s']:.3f} s "
              f"(error seen +{result['detected_s']:.3f} s); "
              f"replacement started +{rep['started']:.2f} s, training +{rep['training']:.2f} s "
              f"(+{rep['training'] - result['recovery_s']:.2f} s after the recovery); {result['ranks_at_end']} ranks "
              f"at the end, identical: {result['identical']}; loss within 3 SE of the reference at "
              f"{result['steps_within_3_se']}/{args.steps} steps (max |z| {result['max_abs_z']:.2f}; "
              f"{result['steps_with_fewer_ranks']} steps on {args.ranks - 1} ranks), final "
              f"{result['final_loss']:.5f} vs {result['reference_final_loss']:.5f}; run {took:.1f} s", flush=True)
    recoveries = [r["recovery_s"] for r in results]
    more = [r["replacement"]["training"] - r["recovery_s"] for r in results]
    print(f"median recovery {statistics.median(recoveries):.3f} s (target < 2 s); median replacement training "
          f"{statistics.median(more):.2f} s after the recovery (target < 5 s); identical in "
          f"{sum(r['identical'] for r in results)}/{len(results)} trials; load average {os.getloadavg()[0]:.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"reference_final_loss": reference_curve[-1][0], "trials": results}, f, indent=1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--canopy-run", default="build/bin/canopy-run")
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--compute-ms", type=float, default=20)
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--events", help=argparse.SUPPRESS)
    parser.add_argument("--victim", type=int, default=-1, help=argparse.SUPPRESS)
    # a worker under another driver (bench/cluster/node-loss.sh --trainer ddp loses a whole host's ranks)
    parser.add_argument("--min-ranks", type=int, default=-1, help=argparse.SUPPRESS)
    parser.add_argument("--kill-step", type=int, default=-1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    (worker if args.worker else driver)(args)


if __name__ == "__main__":
    main()
