"""canopy_torch over Canopy's etcd store: init_method="etcd://..." for canopy and for gloo, rank and world
size from the environment or from the URL, an etcd that does not answer, another job's token.

    with_etcd.py -- run_ranks.py --nproc 3 -- check_etcd.py
"""
import os
import sys
import time
from datetime import timedelta

import torch.distributed as dist

import canopy_torch
from checks import check, failures, use_group


def main():
    endpoint = os.environ["ETCD_ENDPOINT"]
    job = f"canopy-torch-{os.environ['MASTER_PORT']}"  # one prefix per run: a rerun never meets stale keys
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])

    dist.init_process_group("canopy", init_method=f"etcd://{endpoint}/{job}/canopy")
    use_group("canopy through etcd://", "canopy", 1001)
    dist.init_process_group("gloo", init_method=f"etcd://{endpoint}/{job}/gloo")
    use_group("gloo through etcd://", "gloo", 1001)
    saved = {name: os.environ.pop(name) for name in ("RANK", "WORLD_SIZE")}
    dist.init_process_group("canopy", init_method=f"etcd://{endpoint}/{job}/query", rank=rank, world_size=size)
    use_group("canopy through etcd:// with rank and world_size given", "canopy", 1001)
    os.environ.update(saved)

    # No member answers: an error naming the store, within the group's timeout (not torch's 30 minutes).
    started = time.monotonic()
    try:
        dist.init_process_group("canopy", init_method="etcd://127.0.0.1:9/nobody", timeout=timedelta(seconds=2))
        check(False, "an etcd that does not answer: no error")
    except RuntimeError as e:
        check("etcd" in str(e) and "127.0.0.1:9" in str(e), f"an etcd that does not answer: {e}")
    check(time.monotonic() - started < 15, f"the unanswered etcd took {time.monotonic() - started:.1f} s")

    # Another job's token on a prefix in use is refused.
    if rank == 0:
        prefix = f"etcd://{endpoint}/{job}/tokens"
        canopy_torch._C.etcd_store(prefix, "job-a", timedelta(seconds=10))
        try:
            canopy_torch._C.etcd_store(prefix, "job-b", timedelta(seconds=10))
            check(False, "another job's token: no error")
        except RuntimeError as e:
            check("token" in str(e), f"another job's token: {e}")
    if failures:
        sys.exit(f"rank {rank}: {len(failures)} checks failed")
    print(f"rank {rank}: etcd:// checked", flush=True)


if __name__ == "__main__":
    main()
