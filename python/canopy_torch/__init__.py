"""Canopy as a torch.distributed backend.

    import canopy_torch                      # registers the backend "canopy"
    torch.distributed.init_process_group("canopy")

Every process group torch creates with it is one Canopy communicator: init_process_group's is formed
through the store torch hands it; each new_group's is created from the default group's by the new group's
members alone (torch calls the backend on those ranks only). See docs/TORCH.md.

Ranks may also meet through an etcd cluster, with any backend (gloo's too): init_method=
"etcd://host:2379[,host:2379...]/PREFIX" (rank and world size from the arguments, the URL's query or
RANK and WORLD_SIZE; CANOPY_JOB_TOKEN keeps other jobs on the same prefix out).

After a failure, a group goes on in place (docs/TORCH.md, *Elastic training*): canopy_torch.elastic.run
does it for a DDP loop, with the functions below on a canopy group: shrink(group) -> the survivors' group,
grow(group) -> the members and the replacements waiting, revoke(group, reason), agree(group, flags),
joiners_waiting(group), generation(group), failure(group) (the error that ended it, or None),
group_from_environment(timeout) (a group on Canopy's own store, from the launcher's variables) and
join_group(timeout) on a replacement. Their errors are CanopyError (with .code), PeerFailure and Revoked.
"""
import os
import urllib.parse

import torch  # loads libtorch before the extension, which links against it
import torch.distributed as dist

from . import _C
from ._C import agree, generation, group_from_environment, grow, join_group, joiners_waiting, revoke, shrink  # noqa: F401,E501
from .errors import CanopyError, PeerFailure, Revoked, TooFewRanks, from_code

__all__ = ["BACKEND", "CanopyError", "PeerFailure", "Revoked", "TooFewRanks", "agree", "failure", "generation",
           "group_from_environment", "grow", "join_group", "joiners_waiting", "revoke", "shrink"]

BACKEND = "canopy"


def _deadline(timeout):
    # torch always passes a timeout: its default (30 minutes) when the script gave none. Then CANOPY_TIMEOUT,
    # if set (an empty value is unset, as everywhere), is the deadline, as in C++ programs (0 tells Canopy
    # so); a timeout the script chose always wins.
    if timeout == dist.constants.default_pg_timeout and os.environ.get("CANOPY_TIMEOUT"):
        return timeout * 0
    return timeout


def _canopy_default_group():
    if not dist.is_initialized():  # this call creates the default group itself
        return None
    default = dist.distributed_c10d._get_default_group()
    return default if dist.get_backend(default) == BACKEND else None


def _create_process_group(options, pg_options):
    """torch's creator for backend "canopy" (extended form: it learns the group's global ranks)."""
    if pg_options is not None:
        raise ValueError(f"backend canopy takes no pg_options (got {pg_options!r}); set CANOPY_* variables")
    ranks = list(options.global_ranks_in_group)  # empty for the default group
    parent = _canopy_default_group()
    if ranks and parent is not None:
        return _C.create_subgroup(parent, ranks, options.group_id, _deadline(options.timeout))
    return _C.create_process_group(options.store, options.group_rank, options.group_size,
                                   _deadline(options.timeout))


def _etcd_rendezvous_handler(url, timeout=dist.constants.default_pg_timeout, **kwargs):
    """torch's rendezvous for init_method="etcd://...": Canopy's etcd store, rank and world size."""
    parsed = urllib.parse.urlparse(url)
    query = dict(urllib.parse.parse_qsl(parsed.query))

    def number(name, variable):
        value = query.get(name, os.environ.get(variable))
        if value is None:
            raise ValueError(f"etcd:// rendezvous: {name} is not given (init_process_group's argument, "
                             f"?{name}= in the URL, or {variable})")
        return int(value)

    rank, world_size = number("rank", "RANK"), number("world_size", "WORLD_SIZE")
    address = urllib.parse.urlunparse(("etcd", parsed.netloc, parsed.path, "", "", ""))
    yield _C.etcd_store(address, os.environ.get("CANOPY_JOB_TOKEN", ""), timeout), rank, world_size
    raise RuntimeError("etcd:// rendezvous cannot meet again: call init_process_group anew")


if BACKEND.upper() not in dist.Backend._plugins:  # a second import (or importlib.reload) is harmless
    dist.Backend.register_backend(BACKEND, _create_process_group, extended_api=True)
    dist.register_rendezvous_handler("etcd", _etcd_rendezvous_handler)


def failure(group):
    """The error (a CanopyError) that ended `group`'s communicator, as one of its calls met it; None while
    the group is healthy."""
    first = _C.failure(group)
    return None if first is None else from_code(*first)
