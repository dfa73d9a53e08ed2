#!/usr/bin/env python3
# Runs torch's backend conformance suite (test_distributed_spawn.py) under gloo and under canopy at each
# world size, prints the counts side by side with the time each run took, and fails when a test that gloo
# passes does not pass on canopy: the lists are compared, not only the counts. Every run is bounded.
#
#   run_suite.py --world-sizes 2 3                     # the whole suite (CI's stage)
#   run_suite.py --world-sizes 2 -k test_all_gather    # a subset (unittest's -k patterns)
import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DRIVER = Path(__file__).resolve().with_name("test_distributed_spawn.py")

# Tests gloo passes that canopy cannot run, each with its reason; a comparison leaves them out (canopy must
# skip them, not fail them). torch 1.13's dist.monitored_barrier() raises for every backend but gloo before
# it reaches one (canopy serves the process group's own monitored_barrier: tests/python/check_failures.py).
LEFT_OUT = {name: "dist.monitored_barrier() is gloo's alone in torch 1.13" for name in (
    "test_monitored_barrier_gloo", "test_monitored_barrier_gloo_subgroup", "test_monitored_barrier_gloo_rank_0_timeout",
    "test_monitored_barrier_failure_order", "test_monitored_barrier_wait_all_ranks")}


def run_backend(args, backend, world_size, scratch):
    """Runs the driver once; returns ({test: outcome}, {test: detail}, seconds, note)."""
    temp_dir = Path(tempfile.mkdtemp(prefix=f"{backend}-{world_size}-", dir=scratch))
    (temp_dir / "barrier").mkdir()
    (temp_dir / "test_dir").mkdir()
    results = temp_dir / "results.jsonl"
    env = dict(os.environ, BACKEND=backend, WORLD_SIZE=str(world_size), TEMP_DIR=str(temp_dir),
               INIT_METHOD=f"file://{temp_dir}/init_method", CANOPY_SUITE_RESULTS=str(results),
               DISTRIBUTED_TESTS_DEFAULT_TIMEOUT=str(args.test_timeout), CANOPY_SOCKET_IFNAME="lo",
               CANOPY_SUITE_START=args.start,
               **({"CANOPY_CALIBRATE": "0"} if args.no_probe else {}),
               PYTHONPATH=os.pathsep.join(filter(None, [args.pythonpath, os.environ.get("PYTHONPATH")])))
    command = [args.python, str(DRIVER)] + [arg for pattern in args.k for arg in ("-k", pattern)]
    log_path = temp_dir / "log.txt"
    started = time.monotonic()
    note = ""
    with open(log_path, "w") as log:
        try:
            # A session of its own, so that a run cut off takes its rank processes with it.
            process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                       start_new_session=True)
            code = process.wait(timeout=args.run_timeout)
            if code not in (0, 1):
                note = f"the driver exited with {code} (log: {log_path})"
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.wait()
            note = f"cut off after {args.run_timeout} s (log: {log_path})"
    seconds = time.monotonic() - started
    outcomes, details = {}, {}
    if results.exists():
        for line in results.read_text().splitlines():
            entry = json.loads(line)
            outcomes[entry["test"]] = entry["outcome"]
            details[entry["test"]] = entry["detail"]
    if not outcomes and not note:
        note = f"no test ran (log: {log_path})"
    return outcomes, details, seconds, note


def count(outcomes, outcome):
    return sum(1 for value in outcomes.values() if value == outcome)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--pythonpath", default="", help="where canopy_torch is (build/python)")
    parser.add_argument("--world-sizes", type=int, nargs="+", default=[2, 3])
    parser.add_argument("-k", action="append", default=[], help="only tests matching (unittest -k)")
    parser.add_argument("--start", choices=("spawn", "fork"), default="spawn",
                        help="how each test starts its ranks (test_distributed_spawn.py, START_METHOD)")
    parser.add_argument("--backends", nargs="+", default=["gloo", "canopy"], choices=("gloo", "canopy"))
    parser.add_argument("--parallel", action="store_true",
                        help="run every backend and world size at once (most of a test's time is waiting)")
    parser.add_argument("--test-timeout", type=int, default=120, help="seconds, per test")
    parser.add_argument("--run-timeout", type=int, default=1800, help="seconds, per backend and size")
    parser.add_argument("--min-passed", type=int, default=0,
                        help="a problem when fewer tests pass on canopy at a world size (a subset that ran)")
    parser.add_argument("--no-probe", action="store_true",
                        help="canopy groups form without the cost model's start-up probe (CANOPY_CALIBRATE=0): "
                             "about 0.5 s less per group; the algorithms are then chosen on the model's defaults")
    parser.add_argument("--scratch", default=None, help="where the runs' folders and logs go")
    parser.add_argument("--list", default=None, help="write every test's outcomes here as JSON")
    args = parser.parse_args()

    scratch = args.scratch or tempfile.mkdtemp(prefix="torch-suite-")
    Path(scratch).mkdir(parents=True, exist_ok=True)
    problems, table, listing = [], [], {}
    total_started = time.monotonic()
    pairs = [(world_size, backend) for world_size in args.world_sizes for backend in args.backends]
    with concurrent.futures.ThreadPoolExecutor(len(pairs) if args.parallel else 1) as pool:
        started = {pair: pool.submit(run_backend, args, pair[1], pair[0], scratch) for pair in pairs}
        all_runs = {pair: future.result() for pair, future in started.items()}
    for world_size in args.world_sizes:
        runs = {backend: all_runs[(world_size, backend)] for backend in args.backends}
        for backend in args.backends:
            outcomes, _, seconds, note = runs[backend]
            table.append(f"| {world_size} | {backend} | {len(outcomes)} | {count(outcomes, 'pass')} | "
                         f"{count(outcomes, 'fail')} | {count(outcomes, 'skip')} | {seconds:.0f} s |")
            print(f"world size {world_size}, {backend}: {count(outcomes, 'pass')} passed, "
                  f"{count(outcomes, 'fail')} failed, {count(outcomes, 'skip')} skipped of "
                  f"{len(outcomes)} in {seconds:.0f} s {note}", flush=True)
            if note:
                problems.append(f"world size {world_size}, {backend}: {note}")
        passed = sum(1 for outcome in runs.get("canopy", ({},))[0].values() if outcome == "pass")
        if "canopy" in runs and passed < args.min_passed:
            problems.append(f"world size {world_size}: {passed} tests passed on canopy, {args.min_passed} expected")
        if len(runs) < 2:  # one backend alone: each of its failures is a problem
            for backend, (outcomes, details, _, _) in runs.items():
                problems += [f"world size {world_size}, {backend}: {test} failed\n{details[test]}"
                             for test, outcome in sorted(outcomes.items()) if outcome == "fail"]
            continue
        gloo, canopy = runs["gloo"][0], runs["canopy"][0]
        listing[world_size] = {test: {"gloo": gloo.get(test), "canopy": canopy.get(test)}
                               for test in sorted(set(gloo) | set(canopy))}
        for test in sorted(test for test, outcome in gloo.items() if outcome == "pass"):
            if test in LEFT_OUT and canopy.get(test) == "skip":
                print(f"world size {world_size}: {test} left out: {LEFT_OUT[test]}")
            elif canopy.get(test) != "pass":
                detail = runs["canopy"][1].get(test, "")
                problems.append(f"world size {world_size}: {test} passes on gloo, "
                                f"{canopy.get(test) or 'did not run'} on canopy\n{detail}")
        extra = sorted(test for test, outcome in canopy.items() if outcome == "pass" and gloo.get(test) != "pass")
        if extra:
            print(f"world size {world_size}: canopy passes where gloo does not: {', '.join(extra)}")

    print("\n| world size | backend | tests | passed | failed | skipped | time |\n|---|---|---:|---:|---:|---:|---:|")
    print("\n".join(table))
    print(f"\ntorch suite: {time.monotonic() - total_started:.0f} s in all; runs' logs under {scratch}")
    if args.list:
        Path(args.list).write_text(json.dumps(listing, indent=1))
    for problem in problems:
        print(f"PROBLEM: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
