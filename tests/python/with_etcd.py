"""Runs a command beside a real etcd member of its own, then stops the member.

    with_etcd.py [--timeout 120] -- command args...

The member (/usr/bin/etcd, or ETCD_BINARY) listens on loopback ports free now, keeps its data in a
temporary directory removed afterwards, and the command finds it in ETCD_ENDPOINT (127.0.0.1:PORT). Exits
with the command's status; 77 (ctest's skip) where etcd is not installed. Bounded: the command is killed
at --timeout.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

from run_ranks import free_port


def wait_healthy(endpoint, member, deadline):
    while time.monotonic() < deadline:
        if member.poll() is not None:
            sys.exit(f"with_etcd: etcd exited with {member.returncode} before it served")
        try:
            with urllib.request.urlopen(f"http://{endpoint}/health", timeout=1) as reply:
                if b'"true"' in reply.read():
                    return
        except OSError:
            pass
        time.sleep(0.1)
    sys.exit(f"with_etcd: etcd at {endpoint} not healthy within its start-up bound")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--timeout", type=float, default=120)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    binary = os.environ.get("ETCD_BINARY", "/usr/bin/etcd")
    if not os.access(binary, os.X_OK):
        print(f"SKIPPED: no etcd at {binary} (Debian's etcd-server)")
        return 77
    client, peer = free_port(), None
    peer = free_port(taken={client})
    endpoint = f"127.0.0.1:{client}"
    data = tempfile.mkdtemp(prefix="with-etcd-")
    member = subprocess.Popen(
        [binary, "--name=m0", f"--data-dir={data}/m0", f"--listen-client-urls=http://{endpoint}",
         f"--advertise-client-urls=http://{endpoint}", f"--listen-peer-urls=http://127.0.0.1:{peer}",
         f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}", f"--initial-cluster=m0=http://127.0.0.1:{peer}",
         f"--initial-cluster-token={data}", "--initial-cluster-state=new", "--log-level=error"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_healthy(endpoint, member, time.monotonic() + 30)
        return subprocess.run(command, env=dict(os.environ, ETCD_ENDPOINT=endpoint), timeout=args.timeout).returncode
    except subprocess.TimeoutExpired:
        print(f"with_etcd: {command} still running after {args.timeout} s: killed", flush=True)
        return 1
    finally:
        member.terminate()
        try:
            member.wait(timeout=10)
        except subprocess.TimeoutExpired:
            member.kill()
            member.wait()
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
