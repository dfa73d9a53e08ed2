"""Replacing torch.distributed's default group by another canopy group (one formed from the launcher's
environment, shrunk or grown), as init_process_group would have left it.

torch 1.13 has no public call for this, so these are the private pieces of
torch/distributed/distributed_c10d.py that init_process_group and destroy_process_group write:
  GroupMember.WORLD / group.WORLD  the default group (_update_default_pg sets both), what every call with
                                   group=None, get_rank(), get_world_size() and DDP's default use;
  _pg_map[pg] = (backend, store)   get_backend() reads the backend; new_group reads the store;
  _pg_names[pg]                    group names, which new_group keeps unique;
  _pg_group_ranks[pg]              global rank -> group rank, identity for the default group;
  _backend, _default_pg_init_method  module-wide leftovers of init_process_group.
The groups made from an earlier default group are forgotten with it, as destroy_process_group() forgets
them: their communicators failed with it. The store slot holds None: an elastic group meets through
Canopy's own store, which torch cannot use, so new_group (which needs torch's store) is not available.
"""
import torch.distributed as dist
from torch.distributed import distributed_c10d as _c10d

BACKEND = "canopy"


def install_default_group(group):
    """Makes `group` torch.distributed's default group, forgetting the previous one and its subgroups."""
    backend = dist.Backend(BACKEND)
    _c10d._pg_map.clear()
    _c10d._pg_names.clear()
    _c10d._pg_group_ranks.clear()
    _c10d._update_default_pg(group)
    _c10d._pg_map[group] = (backend, None)
    _c10d._pg_names[group] = ""
    _c10d._pg_group_ranks[group] = {i: i for i in range(group.size())}
    _c10d._backend = backend
    _c10d._default_pg_init_method = "canopy-elastic://"

