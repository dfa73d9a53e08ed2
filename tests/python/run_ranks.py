"""Starts N ranks of a Python program with torchrun's variables, as a launcher does, and waits for them.

    run_ranks.py --nproc 4 [--timeout 120] [--killed 2] [--expect TEXT] -- script.py args...

Each rank gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR=127.0.0.1 and a free
MASTER_PORT (rank 0 hosts torch's store there), plus RUN_RANKS_SPARE_PORT (another free port, for tcp://), and
runs under this same interpreter. Output is prefixed with
"[rank]" once all have ended. The exit status is 0 when every rank exited 0, except ranks named by --killed,
which must have died of SIGKILL (a test that kills a rank on purpose), and every rank's output must hold
each --expect text (what a rank prints after its script returned, such as a callback's line). Ranks still running at --timeout are
killed and reported: a hang is a failure, never a wait.
"""
import argparse
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time


def ephemeral_ports():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(word) for word in f.read().split())
            return low, high
    except (OSError, ValueError):
        return 32768, 60999


def free_port(taken=()):
    """A port free now, below the kernel's ephemeral range: a port from there (what binding port 0 gives)
    may be taken by any process's outgoing connection before the rank binds it."""
    low, _ = ephemeral_ports()
    for _ in range(200):
        port = random.randint(10000, max(10001, low - 1))
        if port in taken:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nproc", type=int, required=True)
    parser.add_argument("--timeout", type=float, default=120)
    parser.add_argument("--killed", type=int, action="append", default=[], help="a rank that must die of SIGKILL")
    parser.add_argument("--expect", action="append", default=[], help="a text every rank must print")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no program given")

    port = free_port()
    spare = free_port(taken=(port,))
    ranks = []
    start = time.monotonic()
    for rank in range(args.nproc):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(args.nproc), LOCAL_RANK=str(rank),
                   LOCAL_WORLD_SIZE=str(args.nproc), GROUP_RANK="0", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), RUN_RANKS_SPARE_PORT=str(spare))
        env.setdefault("CANOPY_SOCKET_IFNAME", "lo")
        output = tempfile.TemporaryFile()
        process = subprocess.Popen([sys.executable] + command, env=env, stdin=subprocess.DEVNULL,
                                   stdout=output, stderr=subprocess.STDOUT)
        ranks.append((process, output))

    deadline = start + args.timeout
    hung = []
    for rank, (process, _) in enumerate(ranks):
        try:
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            hung.append(rank)
    for rank in hung:
        ranks[rank][0].kill()
        ranks[rank][0].wait()

    failed = []
    for rank, (process, output) in enumerate(ranks):
        output.seek(0)
        text = output.read().decode(errors="replace")
        for line in text.splitlines():
            print(f"[{rank}] {line}")
        failed += [f"rank {rank} did not print {expected!r}" for expected in args.expect if expected not in text]
        expected = -signal.SIGKILL if rank in args.killed else 0
        if rank in hung:
            failed.append(f"rank {rank} was still running after {args.timeout:.0f} s")
        elif process.returncode != expected:
            failed.append(f"rank {rank} exited with {process.returncode}, expected {expected}")
    print(f"run_ranks: {args.nproc} ranks of {' '.join(command)} took {time.monotonic() - start:.1f} s")
    for line in failed:
        print(f"run_ranks: {line}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
