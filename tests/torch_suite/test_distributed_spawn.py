# PyTorch 1.13's backend conformance tests (torch/testing/_internal/distributed/distributed_test.py,
# DistributedTest._DistTestBase), driven as upstream's test/distributed/test_distributed_spawn.py drives
# them, which Debian does not ship: BACKEND, WORLD_SIZE, TEMP_DIR (with barrier/ and test_dir/ in it) and
# INIT_METHOD set by the caller (run_suite.py sets them all), one process per rank per test (spawned, or
# forked: START_METHOD).
#
# Besides upstream's driver, this one
# - imports canopy_torch when BACKEND is canopy, which registers the backend;
# - says which of the suite's backend_feature sets canopy claims (CANOPY_CLAIMS);
# - opens gates written on the literal name "gloo" where they guard a CPU feature canopy has (GLOO_GATES);
# - runs DDP in its plain mode (below);
# - with CANOPY_SUITE_RESULTS=<file>, writes each test's outcome there as JSON lines (run_suite.py compares
#   the backends' lists).
import json
import os
import sys
import time
import unittest

BACKEND = os.environ["BACKEND"]
if BACKEND == "canopy":
    import canopy_torch  # noqa: F401  (registers the backend "canopy" with torch.distributed)

import torch
import torch.distributed as dist
from torch.testing._internal.common_distributed import DistTestCases

# The feature sets canopy claims, each because canopy_torch has what the tests behind it use.
CANOPY_CLAIMS = {
    # DistributedDataParallel on CPU tensors: DDP's reducer over canopy's allreduce and Futures.
    "ddp": "DDP on CPU modules (tests/python/ddp_compare.py compares it with gloo's, replica by replica)",
    # new_group over any subset: each is a communicator of its own (Communicator::create_group).
    "subgroup": "new_group over any ranks",
    # A backend registered through dist.Backend.register_backend, as torch calls third-party ones.
    "plugin": "registered with dist.Backend.register_backend, so Backend('canopy') is available",
}
# Not claimed: "gpu" and "cuda" (canopy_torch takes CPU tensors only; Debian's torch has no CUDA).
if BACKEND == "canopy":
    for feature in CANOPY_CLAIMS:
        DistTestCases.backend_feature[feature].add("canopy")

from torch.testing._internal.common_utils import TEST_WITH_DEV_DBG_ASAN, NO_MULTIPROCESSING_SPAWN  # noqa: E402
from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest,
    TestDistBackend,
)
import torch.nn.parallel._replicated_tensor_ddp_utils as replicated_tensor_ddp  # noqa: E402
import torch.testing._internal.distributed.distributed_test as distributed_test  # noqa: E402

# DDP's plain mode. TestDistBackend._run turns on DDP's ReplicatedTensor mode in every rank, and DDP then
# imports torch.distributed._shard.replicated_tensor, which torch 1.13 cannot import under Python 3.11
# (its sharded_tensor metadata dataclass has a mutable default, which 3.11 refuses): every DDP test would
# fail at construction under any backend. Keeping the switch off runs DDP as trainers run it by default.
replicated_tensor_ddp._set_ddp_with_replicated_tensor = lambda enabled: None

# Gates on the literal name "gloo" that guard a CPU feature canopy serves: test -> (the gate's reason, as
# the suite words it; why canopy may run it). A gate whose reason no longer reads as listed stops the
# driver, so that no other gate is opened with it.
REQUIRES = "Test requires backend to be one of %s"  # require_backend's reason, formatted from its set
TIMEOUTS = "Only gloo backend supports timeouts"
SPARSE = "Only Gloo backend support sparse all reduce"
GLOO_ONLY = REQUIRES % {"gloo"}
# The object collectives are gated on the "gpu" set ({"nccl", "gloo"}: the backends with sequence numbers);
# their bodies run on CPU tensors for every backend but nccl.
GPU_SET = REQUIRES % DistTestCases.backend_feature["gpu"]
GLOO_GATES = {
    # A barrier past the group's timeout raises RuntimeError matching "Timed out"; canopy's timeout reads so.
    "test_barrier_timeout_global": (TIMEOUTS, "group timeouts; this run's INIT_METHOD is file:// (checked)"),
    "test_barrier_timeout_group": (TIMEOUTS, "group timeouts"),
    "test_barrier_timeout_full_group": (TIMEOUTS, "group timeouts"),
    # Sparse all-reduce, as gloo does it: indices and values all-gathered, then coalesced.
    "test_sparse_all_reduce_sum": (SPARSE, "sparse all-reduce on CPU"),
    # all_reduce_coalesced of CPU tensors of one dtype.
    **{f"test_all_reduce_coalesced_{group}{op}": (GLOO_ONLY, "all_reduce_coalesced on CPU")
       for group in ("", "group_", "full_group_") for op in ("sum", "product", "min", "max")},
    "test_batch_isend_irecv_gloo": ("GLOO Batch Send Recv CPU", "batch_isend_irecv of CPU tensors"),
    "test_batch_isend_irecv_gloo_tags": ("GLOO Batch Send Recv CPU", "batch_isend_irecv with tags"),
    "test_scatter_object_list": (GLOO_ONLY, "scatter_object_list of CPU objects"),
    "test_get_future": ("get_future is only supported on mpi, nccl and gloo", "Work.get_future"),
    **{name: (GPU_SET, "object collectives of CPU tensors") for name in (
        "test_all_gather_object_default_pg", "test_all_gather_object_subgroup", "test_gather_object",
        "test_gather_object_subgroup", "test_broadcast_object_list")},
    **{f"test_accumulate_gradients_no_sync{variant}": (
        "get_future is only supported on mpi, nccl and gloo", "DDP's no_sync on CPU (see CPU_BRANCH_BY_NAME)")
       for variant in ("", "_grad_is_view", "_allreduce_hook", "_allreduce_with_then_hook")},
}
# Tests whose body builds its CPU model only `if BACKEND == "mpi" or BACKEND == "gloo"` (and otherwise reads
# a model it never made): their body runs reading the name "gloo", which picks that CPU branch and nothing
# else; every call still goes to the default group, canopy's, which run_test checks before the body runs.
CPU_BRANCH_BY_NAME = {f"test_accumulate_gradients_no_sync{variant}"
                      for variant in ("", "_grad_is_view", "_allreduce_hook", "_allreduce_with_then_hook")}
# Left shut: test_monitored_barrier_* (run_suite.py's LEFT_OUT says why).


def open_gloo_gates(test_class):
    if BACKEND != "canopy":
        return
    if not os.environ["INIT_METHOD"].startswith("file://"):
        # test_barrier_timeout_global's other gate (file:// only) hides under the gloo gate's reason.
        raise SystemExit("run the canopy suite with a file:// INIT_METHOD (run_suite.py does)")
    for name, (reason, _why) in GLOO_GATES.items():
        test = getattr(test_class, name)
        found = getattr(test, "__unittest_skip_why__", None)
        if found != reason:
            raise SystemExit(f"{name}: expected the gate {reason!r}, found {found!r}; review GLOO_GATES")
        del test.__unittest_skip__, test.__unittest_skip_why__


class RecordingResult(unittest.TextTestResult):
    """Appends {"test", "outcome", "seconds", "detail"} per test to CANOPY_SUITE_RESULTS."""

    def startTest(self, test):
        self._started = time.monotonic()
        super().startTest(test)

    def _record(self, test, outcome, detail=""):
        entry = {"test": test.id().split(".")[-1], "outcome": outcome,
                 "seconds": round(time.monotonic() - getattr(self, "_started", time.monotonic()), 2),
                 "detail": detail[-2000:]}
        with open(os.environ["CANOPY_SUITE_RESULTS"], "a") as out:
            out.write(json.dumps(entry) + "\n")

    def addSuccess(self, test):
        super().addSuccess(test)
        self._record(test, "pass")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._record(test, "fail", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        self._record(test, "fail", self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._record(test, "skip", reason)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._record(test, "pass")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._record(test, "fail", "unexpected success")


torch.backends.cuda.matmul.allow_tf32 = False

if not dist.is_available():
    raise SystemExit("torch.distributed is not available")
if TEST_WITH_DEV_DBG_ASAN or NO_MULTIPROCESSING_SPAWN:
    raise SystemExit("this driver spawns its ranks: it needs multiprocessing's spawn and no dev-asan build")

# How each test starts its ranks: "spawn" as upstream's driver (each rank a fresh interpreter that imports
# torch and this file again: about 3 s of CPU a rank, per test), or "fork" as upstream's former
# test_distributed_fork.py (ranks forked from this process, which holds no thread then: a fraction of a
# second); CANOPY_SUITE_START chooses, spawn by default.
START_METHOD = os.environ.get("CANOPY_SUITE_START", "spawn")
if START_METHOD not in ("spawn", "fork"):
    raise SystemExit(f"CANOPY_SUITE_START={START_METHOD}: use spawn or fork")

if BACKEND in ("gloo", "canopy"):

    class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
        def run_test(self, test_name, parent_pipe):
            if BACKEND != "canopy" or test_name not in CPU_BRANCH_BY_NAME:
                return super().run_test(test_name, parent_pipe)
            assert dist.get_backend() == "canopy", dist.get_backend()
            distributed_test.BACKEND = "gloo"
            try:
                return super().run_test(test_name, parent_pipe)
            finally:
                distributed_test.BACKEND = BACKEND

        def setUp(self):
            super().setUp()
            if START_METHOD == "fork":
                self._start_processes(torch.multiprocessing.get_context("fork").Process)
            else:
                self._spawn_processes()

    open_gloo_gates(TestDistBackendWithSpawn)


if __name__ == "__main__":
    runner = unittest.TextTestRunner(verbosity=2, resultclass=RecordingResult) \
        if os.environ.get("CANOPY_SUITE_RESULTS") else None
    unittest.main(testRunner=runner)
