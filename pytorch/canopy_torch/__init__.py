"""Canopy as a torch.distributed backend.

    import canopy_torch                      # registers the backend "canopy"
    torch.distributed.init_process_group("canopy")

Every process group torch creates with it (init_process_group's, each new_group's) is one Canopy
communicator, formed through the store torch hands it. See docs/TORCH.md.
"""
import os

import torch  # loads libtorch before the extension, which links against it
import torch.distributed as dist

from . import _C

__all__ = ["BACKEND"]

BACKEND = "canopy"


def _create_process_group(store, rank, size, timeout):
    # torch always passes a timeout: its default (30 minutes) when the script gave none. Then CANOPY_TIMEOUT,
    # if set, is the deadline, as in C++ programs; a timeout the script chose always wins.
    if timeout == dist.constants.default_pg_timeout and "CANOPY_TIMEOUT" in os.environ:
        timeout = timeout * 0
    return _C.create_process_group(store, rank, size, timeout)


if BACKEND.upper() not in dist.Backend._plugins:  # a second import (or importlib.reload) is harmless
    dist.Backend.register_backend(BACKEND, _create_process_group)
