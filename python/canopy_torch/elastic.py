"""Training that goes on when a rank dies, and takes a replacement back: Horovod elastic's run() for an
otherwise unmodified DDP loop on torch 1.13 (docs/TORCH.md, *Elastic training*).

    import canopy_torch.elastic as elastic

    def train(state):                       # called again after every change of the group
        while state.step < steps:
            loss = loss_fn(state.model(batch(state.step)))   # state.model: DDP over the current group
            loss.backward(); state.optimizer.step(); state.optimizer.zero_grad()
            state.step += 1
            state.commit()                  # in memory; between steps, also where newcomers are let in

    state = elastic.TorchState(model, optimizer, step=0)
    elastic.run(train, state, min_ranks=2, on_world_size_change=lambda state, old, new: ...)

run() forms the default group from the launcher's environment on Canopy's own store (under canopy-run
the store canopy-run hosts, which outlives every rank; a process canopy-run --elastic started as a
replacement joins instead), installs it as torch.distributed's default group and wraps state.module in DDP.
When a step fails because the group did (a rank died, the group was revoked, a rank stopped answering),
every survivor shrinks the group, installs the shrunk one, restores the last commit every survivor holds
(from the lowest rank holding it, byte for byte), rebuilds DDP and calls train(state) again. After each
commit the members all-reduce how many replacements wait (Max) and, if any, grow: the replacement restores
the state from them and everyone goes on in the grown group.
"""
import datetime
import gc
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from . import _C
from .errors import CanopyError, TooFewRanks, from_code
from .training_state import TorchState
from .world import install_default_group

__all__ = ["run", "TorchState", "TooFewRanks", "RECOVERABLE"]

# What a failed group may have died of, for the survivors to shrink it and go on. Any other error (a
# mismatch, a bad argument) is the program's: shrinking would meet it again, so it is raised.
RECOVERABLE = ("PeerFailed", "Revoked", "Timeout", "Aborted")


class _NewcomersWaiting(BaseException):
    """Raised out of train() by commit() on every member at once: someone waits to join. A BaseException,
    so that a program's own `except Exception` does not swallow it."""


def _seconds(timeout):
    if timeout is None:
        return datetime.timedelta(0)  # CANOPY_TIMEOUT, else Canopy's default
    return timeout if isinstance(timeout, datetime.timedelta) else datetime.timedelta(seconds=timeout)


def _group_failure(group):
    """The exception that ended `group`, or None while it is healthy."""
    failure = _C.failure(group)
    return None if failure is None else from_code(*failure)


class _Loop:
    """One process's part of run(): its current group and what it does on each change."""

    def __init__(self, state, min_ranks, on_world_size_change, on_failure, on_ddp_built, verbose):
        self.state = state
        self.on_ddp_built = on_ddp_built
        self.on_failure = on_failure
        self.min_ranks = min_ranks
        self.on_world_size_change = on_world_size_change
        self.verbose = verbose
        self.group = None
        self.state._after_commit = self._check_newcomers

    def say(self, text):
        if self.verbose:
            print(f"canopy_torch.elastic: {text}", flush=True)

    def adopt(self, group, why):
        """Installs `group` as the default group, restores the state on every member, rebuilds DDP."""
        self.state.model = None  # the old DDP (and through it the old group) goes before the new one forms
        self.group = group
        install_default_group(group)
        gc.collect()
        size = group.size()
        if size < self.min_ranks:
            raise TooFewRanks(f"{size} rank(s) left after {why}, fewer than min_ranks={self.min_ranks}",
                              "TooFewRanks")
        started = time.monotonic()
        restored = self.state.restore()
        old = self.state.world_size
        if old != size and self.on_world_size_change is not None:
            self.on_world_size_change(self.state, old, size)
        self.state.world_size = size
        rebuilt = time.monotonic()
        self.state.model = DDP(self.state.module, **self.state.ddp_options)
        if self.on_ddp_built is not None:
            self.on_ddp_built(self.state)
        self.say(f"rank {group.rank()} of {size} (generation {_C.generation(group)}) after {why}; "
                 f"restored commit {restored} in {1000 * (rebuilt - started):.0f} ms, DDP rebuilt in "
                 f"{1000 * (time.monotonic() - rebuilt):.0f} ms")

    def _check_newcomers(self):
        waiting = torch.tensor([_C.joiners_waiting(self.group)], dtype=torch.int64)
        dist.all_reduce(waiting, op=dist.ReduceOp.MAX)
        if waiting.item() > 0:
            raise _NewcomersWaiting()

    def attempt(self, train_fn):
        """Runs train_fn(state) once: ("done", its result), ("grow", None) or ("failed", the group's error).
        Only what the caller needs leaves: the traceback (and the frames holding the old DDP) stays here."""
        try:
            return "done", train_fn(self.state)
        except _NewcomersWaiting:
            return "grow", None
        except Exception as error:
            failure = _group_failure(self.group)
            if failure is None:
                raise  # the program's own error; the group is healthy
            if failure.code not in RECOVERABLE:
                raise failure from error
            return "failed", failure

    def settle(self, group, why):
        """adopt(group), and where a rank dies meanwhile (in the restore, in DDP's set-up), shrink."""
        try:
            self.adopt(group, why)
        except TooFewRanks:
            raise
        except Exception:
            failure = _group_failure(group)
            if failure is None or failure.code not in RECOVERABLE:
                raise
            self.shrink(failure)

    def shrink(self, failure):
        """Shrinks until the survivors hold a healthy group, restored (a death during the recovery shrinks
        again)."""
        while True:
            self.say(f"rank {self.group.rank()}: the group failed ({failure.code}): {failure}")
            if self.on_failure is not None:
                self.on_failure(self.state, failure)
            old = self.group
            self.state.model = None
            started = time.monotonic()
            try:
                shrunk = _C.shrink(old)
            except CanopyError as error:
                # Revoked: the others counted this rank as failed (it was stopped or slow) and went on
                # without it; anything else: the shrink itself failed (the store died).
                what = ("this rank was left out of the survivors' group" if error.code == "Revoked"
                        else "the survivors could not shrink the group")
                raise from_code(error.code, f"canopy_torch.elastic: {what}: {error}") from error
            del old
            self.say(f"rank {shrunk.rank()}: shrunk to {shrunk.size()} ranks in "
                     f"{1000 * (time.monotonic() - started):.0f} ms")
            try:
                self.adopt(shrunk, "a shrink")
                return
            except TooFewRanks:
                raise
            except Exception:
                failure = _group_failure(shrunk)
                if failure is None or failure.code not in RECOVERABLE:
                    raise

    def grow(self):
        try:
            grown = _C.grow(self.group)
        except CanopyError as error:
            # The newcomer died, or a member did: the old group is as it was (a dead member fails its next
            # step, which shrinks it).
            self.say(f"rank {self.group.rank()}: grow failed, going on as before: {error}")
            return
        self.settle(grown, "a grow")


def run(train_fn, state, min_ranks=1, timeout=None, on_world_size_change=None, on_failure=None,
        on_ddp_built=None, verbose=None):
    """Calls train_fn(state) until it returns, through failures and newcomers; returns what it returned.

    state: a TorchState. min_ranks: fewer ranks left raises TooFewRanks on every survivor. timeout: every
    call's deadline (seconds or timedelta; None: CANOPY_TIMEOUT). on_world_size_change(state, old, new):
    called on every member after each restore that changed the world size (once at the start, with old
    None), after the state is restored and before DDP is rebuilt: the place for a learning-rate rule.
    on_failure(state, error): called on every survivor with the group's error (a CanopyError) before it
    shrinks. on_ddp_built(state): after every (re)build of state.model, the place to register a comm hook.
    verbose (default: CANOPY_ELASTIC_VERBOSE=1): one line per change of group."""
    if verbose is None:
        verbose = os.environ.get("CANOPY_ELASTIC_VERBOSE") == "1"
    loop = _Loop(state, min_ranks, on_world_size_change, on_failure, on_ddp_built, verbose)
    joining = os.environ.get("CANOPY_ELASTIC_JOIN") == "1"
    if dist.is_initialized():
        raise RuntimeError("canopy_torch.elastic.run forms the default group itself: do not call "
                           "init_process_group before it")
    start = _C.join_group if joining else _C.group_from_environment
    loop.settle(start(_seconds(timeout)), "joining" if joining else "the start")
    while True:
        outcome, value = loop.attempt(train_fn)
        if outcome == "done":
            return value
        if outcome == "grow":
            loop.grow()
        else:
            loop.shrink(value)
