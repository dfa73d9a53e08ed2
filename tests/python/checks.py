"""What the check_*.py scripts share: checks that note a failure and go on (so that one run reports all of
them), and the main() that forms the group and runs the sections asked for with --only on every rank."""
import argparse
import sys

import torch
import torch.distributed as dist

import canopy_torch  # noqa: F401

failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print(f"FAILED: {what}", flush=True)


def use_group(how, backend="canopy", count=33):
    """The default group just formed is `backend`'s and its all_reduce and a new_group's are exact; then
    it is destroyed."""
    rank, size = dist.get_rank(), dist.get_world_size()
    check(dist.get_backend() == backend, f"{how}: get_backend() is {backend}")
    t = torch.full((count,), float(rank + 1))
    dist.all_reduce(t)
    check(torch.equal(t, torch.full_like(t, size * (size + 1) / 2)), f"{how}: all_reduce")
    sub = dist.new_group(list(range(size)))
    dist.all_reduce(t, group=sub)
    check(torch.equal(t, torch.full_like(t, size * size * (size + 1) / 2)), f"{how}: new_group")
    dist.destroy_process_group()


def raises(what, expected_text, call):
    """`call` must raise a RuntimeError whose message holds `expected_text`."""
    try:
        call()
    except RuntimeError as e:
        check(expected_text in str(e), f"{what}: message {str(e)!r} lacks {expected_text!r}")
        return
    check(False, f"{what}: no error")


def main(sections, arguments=lambda: ()):
    """Runs each section as section(*arguments(), rank, size) in a canopy default group."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default=",".join(sections))
    only = parser.parse_args().only.split(",")
    dist.init_process_group("canopy")
    extra = arguments()
    rank, size = dist.get_rank(), dist.get_world_size()
    for name in only:
        sections[name](*extra, rank, size)
        print(f"rank {rank}: {name} checked", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    if failures:
        sys.exit(f"rank {rank}: {len(failures)} checks failed")
