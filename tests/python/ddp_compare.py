"""Runs ddp_train.py under canopy-run twice, with backend "gloo" and with backend "canopy", and compares:
in every DDP mode the loss falls, and canopy's final loss is within 1e-4 (relative) of gloo's. (ddp_train.py
itself fails when replicas differ after any step.)

    ddp_compare.py --canopy-run build/bin/canopy-run --nproc 4
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def run(canopy_run, nproc, backend, out, timeout):
    command = [canopy_run, "--nproc", str(nproc), sys.executable, os.path.join(HERE, "ddp_train.py"),
               "--backend", backend, "--out", out]
    start = time.monotonic()
    result = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            timeout=timeout, text=True)
    print(result.stdout, end="")
    print(f"ddp_compare: {backend} on {nproc} ranks took {time.monotonic() - start:.1f} s", flush=True)
    if result.returncode != 0:
        sys.exit(f"ddp_compare: {' '.join(command)} exited with {result.returncode}")
    with open(out) as f:
        return json.load(f)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--canopy-run", required=True)
    parser.add_argument("--nproc", type=int, required=True)
    parser.add_argument("--timeout", type=float, default=150, help="seconds for each run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        losses = {backend: run(args.canopy_run, args.nproc, backend, os.path.join(work, backend + ".json"),
                               args.timeout)
                  for backend in ("gloo", "canopy")}
    failed = []
    for mode, canopy in losses["canopy"].items():
        gloo = losses["gloo"][mode]
        relative = abs(canopy[-1] - gloo[-1]) / abs(gloo[-1])
        print(f"{mode:>15}: canopy {canopy[0]:.6f} -> {canopy[-1]:.6f}, gloo -> {gloo[-1]:.6f}, "
              f"relative difference {relative:.2e}")
        if not canopy[-1] < 0.9 * canopy[0]:
            failed.append(f"{mode}: the loss did not fall ({canopy[0]} -> {canopy[-1]})")
        if relative > 1e-4:
            failed.append(f"{mode}: final loss {canopy[-1]} is not within 1e-4 of gloo's {gloo[-1]}")
    for line in failed:
        print(f"ddp_compare: FAILED: {line}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
