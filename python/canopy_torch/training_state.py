"""Training state committed in memory and restored from a survivor: canopy::TrainingState for torch
(include/canopy/training_state.hpp), in the shape of Horovod elastic's TorchState.

    state = TorchState(model, optimizer, step=0, epoch=0)   # any picklable values beside the two
    ...; state.step += 1; state.commit()                     # at the end of every step

commit() copies the module's state_dict, the optimizer's state_dict and the values into this process's
memory (no disk); the last two commits are kept, since a rank may die while some survivors have committed a
step and others not yet. restore() (canopy_torch.elastic calls it on every member of a new group) brings
every member to the latest commit that every member holding commits has, copied byte for byte from the
lowest rank holding it.
"""
import copy
import io

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

# DDP's constructor arguments that canopy_torch.elastic passes again when it rebuilds the wrapper, read
# from a DDP the program made (attribute name -> constructor argument).
_DDP_ATTRIBUTES = {"find_unused_parameters": "find_unused_parameters", "broadcast_buffers": "broadcast_buffers",
                   "gradient_as_bucket_view": "gradient_as_bucket_view"}


def _ddp_options_of(ddp):
    options = {argument: getattr(ddp, name) for name, argument in _DDP_ATTRIBUTES.items() if hasattr(ddp, name)}
    if hasattr(ddp, "bucket_bytes_cap"):
        options["bucket_cap_mb"] = ddp.bucket_bytes_cap / (1024 * 1024)
    return options


class TorchState:
    """The model (a module, or a DDP around one), its optimizer and named values (step, epoch, sampler
    position...), committed together. `state.model` is the DDP that canopy_torch.elastic builds over the
    current default group; `state.module` the module inside it. Values are attributes: state.step."""

    def __init__(self, model, optimizer=None, ddp_options=None, **values):
        is_ddp = isinstance(model, DDP)
        self._names = list(values)
        self.module = model.module if is_ddp else model
        self.model = model
        self.optimizer = optimizer
        self.ddp_options = dict(ddp_options) if ddp_options is not None else (_ddp_options_of(model) if is_ddp else {})
        self.world_size = None  # the group's size when last committed or restored
        self._commits = []      # at most two, the latest last
        self._count = 0         # commits made so far: the same on every member, a newcomer takes its source's
        self._after_commit = None  # set by canopy_torch.elastic: the check for newcomers
        for name, value in values.items():
            setattr(self, name, value)

    def values(self):
        return {name: getattr(self, name) for name in self._names}

    def commit(self):
        """The state after this step, into memory. Call it at the same point on every rank (end of a step)."""
        self._count += 1
        snapshot = {
            "count": self._count,
            "world_size": dist.get_world_size() if dist.is_initialized() else 1,
            "model": {k: v.detach().clone() for k, v in self.module.state_dict().items()},
            "optimizer": copy.deepcopy(self.optimizer.state_dict()) if self.optimizer is not None else None,
            "values": copy.deepcopy(self.values()),
        }
        self._commits = (self._commits + [snapshot])[-2:]
        if self._after_commit is not None:
            self._after_commit()

    def committed_count(self):
        return self._commits[-1]["count"] if self._commits else None

    def restore(self, group=None):
        """Collective on `group` (the default group): every member ends with the same commit, byte for byte.
        Returns the number of the commit restored, or None where no member had committed (then rank 0's
        state as it is goes to everyone)."""
        latest = torch.tensor([self._commits[-1]["count"] if self._commits else -1], dtype=torch.int64)
        counts = [torch.zeros(1, dtype=torch.int64) for _ in range(dist.get_world_size(group))]
        dist.all_gather(counts, latest, group=group)
        counts = [int(c.item()) for c in counts]
        holders = [rank for rank, count in enumerate(counts) if count >= 0]
        target = min(counts[rank] for rank in holders) if holders else None
        source = holders[0] if holders else 0
        payload = None
        if dist.get_rank(group) == source:
            chosen = self._commit(target) if target is not None else self._snapshot_now()
            buffer = io.BytesIO()
            torch.save(chosen, buffer)
            payload = torch.frombuffer(bytearray(buffer.getvalue()), dtype=torch.uint8)
        size = torch.tensor([payload.numel() if payload is not None else 0], dtype=torch.int64)
        dist.broadcast(size, src=source, group=group)
        if payload is None:
            payload = torch.empty(int(size.item()), dtype=torch.uint8)
        dist.broadcast(payload, src=source, group=group)
        snapshot = torch.load(io.BytesIO(payload.numpy().tobytes()))
        self._load(snapshot)
        self._commits = [snapshot]
        return target

    def _commit(self, count):
        for snapshot in self._commits:
            if snapshot["count"] == count:
                return snapshot
        raise RuntimeError(f"canopy_torch.TorchState: commit {count} is not held here (held: "
                           f"{[s['count'] for s in self._commits]}); ranks committed more than a step apart")

    def _snapshot_now(self):
        self._count = 0
        return {"count": 0, "world_size": self.world_size, "model": self.module.state_dict(),
                "optimizer": self.optimizer.state_dict() if self.optimizer is not None else None,
                "values": self.values()}

    def _load(self, snapshot):
        self._count = snapshot["count"]
        self.world_size = snapshot["world_size"]
        self.module.load_state_dict(snapshot["model"])  # copies into the parameters
        if self.optimizer is not None and snapshot["optimizer"] is not None:
            # A copy: load_state_dict keeps same-dtype tensors as given, and the optimizer updates its state
            # in place, which would change the commit kept here.
            self.optimizer.load_state_dict(copy.deepcopy(snapshot["optimizer"]))
        for parameter in self.module.parameters():
            parameter.grad = None  # a step that failed half-way leaves partial gradients
        for name, value in copy.deepcopy(snapshot["values"]).items():
            setattr(self, name, value)
