"""How a script meets the backend: the import, every init_method torch offers (env://, tcp://, file://, a
given store=), one-rank groups, and the CANOPY_* settings (CANOPY_DEBUG=INFO's choices, CANOPY_ALGO, a bad
value refused).

    run_ranks.py --nproc 2 -- check_init.py
    CANOPY_DEBUG=INFO CANOPY_ALGO=allreduce=ring run_ranks.py --nproc 2 -- check_init.py --settings
    run_ranks.py --nproc 2 --expect "callback ended" -- check_init.py --exit-in-callback
    run_ranks.py --nproc 2 -- check_init.py --fork
"""
import importlib
import os
import sys
import tempfile
import threading
import time

import torch
import torch.distributed as dist

import canopy_torch
from checks import check, failures, use_group


def captured_stderr(action):
    """Canopy logs on the process's stderr (fd 2): read what `action` writes there."""
    with tempfile.TemporaryFile() as capture:
        saved = os.dup(2)
        os.dup2(capture.fileno(), 2)
        try:
            action()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        capture.seek(0)
        return capture.read().decode(errors="replace")


def check_methods(rank, size):
    # A second import, or a reload, must not register twice (torch asserts on that).
    import canopy_torch as again  # noqa: F401
    importlib.reload(canopy_torch)
    check("CANOPY" in dist.Backend._plugins and dist.Backend.CANOPY == "CANOPY", "registered once")

    dist.init_process_group("canopy")  # env://
    use_group("env://")
    dist.init_process_group("canopy", init_method=f"tcp://127.0.0.1:{os.environ['RUN_RANKS_SPARE_PORT']}",
                            rank=rank, world_size=size)
    use_group("tcp://")
    shared = os.path.join(tempfile.gettempdir(), f"canopy_torch_init_{os.environ['MASTER_PORT']}")
    dist.init_process_group("canopy", init_method=f"file://{shared}.a", rank=rank, world_size=size)
    use_group("file://")
    dist.init_process_group("canopy", store=dist.FileStore(f"{shared}.b", size), rank=rank, world_size=size)
    use_group("store=FileStore")
    # Every rank alone in a one-rank group of its own.
    dist.init_process_group("canopy", store=dist.HashStore(), rank=0, world_size=1)
    use_group("a one-rank group")

    # destroy_process_group holds the GIL while a call is still in flight whose Future has a Python
    # callback: the group must let the callback run (it needs the GIL) before it goes.
    dist.init_process_group("canopy")
    seen = []
    if rank == size - 1:
        time.sleep(0.5)
    dist.all_reduce(torch.ones(100), async_op=True).get_future().then(lambda f: seen.append(f.value()[0][0].item()))
    dist.destroy_process_group()
    check(seen == [float(size)], f"the pending call's Python callback ran before the group went: {seen}")


def check_settings(rank, size):
    """Run with CANOPY_DEBUG=INFO and CANOPY_ALGO=allreduce=ring (read once, when the process starts)."""
    def calls():
        dist.init_process_group("canopy")
        dist.all_reduce(torch.ones(1000))
        dist.broadcast(torch.ones(1000), src=0)
        dist.destroy_process_group()
    log = captured_stderr(calls)
    check("all_reduce: ring (asked for)" in log, f"CANOPY_ALGO=allreduce=ring is obeyed; the log said:\n{log}")
    check("broadcast of 1000 x 4 B on" in log and "chose" in log, "CANOPY_DEBUG=INFO logs the broadcast's choice")
    check(f"communicator 1 ready: rank {rank} of {size}" in log, "CANOPY_DEBUG=INFO logs the group")
    # A bad value is refused when a group is formed, naming the variable (a one-rank group: nobody waits).
    os.environ["CANOPY_CHUNK_BYTES"] = "1X"
    try:
        dist.init_process_group("canopy", store=dist.HashStore(), rank=0, world_size=1)
        check(False, "CANOPY_CHUNK_BYTES=1X was accepted")
    except RuntimeError as e:
        check("CANOPY_CHUNK_BYTES='1X' is not a size" in str(e), f"a bad setting's error names it: {e}")
    finally:
        del os.environ["CANOPY_CHUNK_BYTES"]


def exit_in_callback(rank):
    """The script returns while a Future callback of its last call still runs on Canopy's completion thread:
    the interpreter's exit lets the callback end first (a thread that takes the GIL once the interpreter
    finalizes is ended by pthread_exit, which aborted the process from inside C++)."""
    dist.init_process_group("canopy")
    started = threading.Event()

    def slow_callback(future):
        started.set()
        time.sleep(0.3)
        print(f"rank {rank}: callback ended", flush=True)
        return future.value()

    dist.all_reduce(torch.ones(1000), async_op=True).get_future().then(slow_callback)
    if not started.wait(timeout=30):
        sys.exit(f"rank {rank}: the all-reduce's callback did not start")
    print(f"rank {rank}: leaving while the callback runs", flush=True)


def fork_child(rank):
    """A child forked after init_process_group (a data loader's worker, a subprocess helper) inherits a copy of
    the group without its threads: a call there is a clear error, its normal exit ends at once (it does not
    wait for threads that are not there, nor close the parent's links), and the parent goes on."""
    dist.init_process_group("canopy")
    dist.all_reduce(torch.ones(4))
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            dist.all_reduce(torch.ones(4))
            print(f"rank {rank}'s child: a call on the inherited group ran", flush=True)
            code = 3
        except canopy_torch.CanopyError as e:
            if "forked" not in str(e):
                print(f"rank {rank}'s child: unclear error: {e}", flush=True)
                code = 4
        sys.exit(code)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ended, status = os.waitpid(pid, os.WNOHANG)
        if ended:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, 9)
        sys.exit(f"rank {rank}: the forked child had not exited after 60 s")
    check(os.waitstatus_to_exitcode(status) == 0, f"the forked child exited with status {status}")
    t = torch.full((4,), float(rank + 1))
    dist.all_reduce(t)
    check(t.tolist() == [3.0] * 4, f"the parent's all-reduce after the fork gave {t.tolist()}")
    if failures:
        sys.exit(f"rank {rank}: {len(failures)} checks failed")
    print(f"rank {rank}: forked child checked", flush=True)


def main():
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if "--exit-in-callback" in sys.argv:
        return exit_in_callback(rank)
    if "--fork" in sys.argv:
        return fork_child(rank)
    settings = "--settings" in sys.argv
    (check_settings if settings else check_methods)(rank, size)
    if failures:
        sys.exit(f"rank {rank}: {len(failures)} checks failed")
    print(f"rank {rank}: {'settings' if settings else 'init methods'} checked", flush=True)


if __name__ == "__main__":
    main()
