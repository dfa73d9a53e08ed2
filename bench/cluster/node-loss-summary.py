#!/usr/bin/env python3
"""node-loss-summary.py: one row of bench/cluster/node-loss.sh per trial, from the survivors' logs.

  node-loss-summary.py host KILL SIZE TRIAL LEADER LATER_START LOG...
      a host lost whole: kill -> the survivors' first step at SIZE and their "shrunk" line, weights exact, and
      (LATER_START a CLOCK_MONOTONIC time, else "none") the later host's start -> its ranks' "joined" lines.
  node-loss-summary.py etcd KILL KILL_WALL TRIAL VICTIMS STORE LOG...
      etcd members killed (the hosts left alone, unless one was killed too): the largest step-to-step gap
      before the kill (the steady state: median and largest) and from it on (the pause), weights exact, when the last canopy-run
      ended (wall clock: the script stamps each one's exit), and how many of the ranks that failed name the
      store (its address STORE) in their error.
  node-loss-summary.py ddp KILL_WALL SIZE TRIAL LEADER EVENTS_DIR
      the same for bench/elastic/ddp_recovery.py's workers, from their event files (wall-clock times): the kill
      to the survivors' first step at SIZE and to their failed step's report, and whether the survivors' final
      parameters and momentum are bit-identical.
  node-loss-summary.py restart LOG...
      the job started again: the checkpoint step its ranks resumed from, weights exact, canopy-run's exit codes.

Every time is CLOCK_MONOTONIC seconds as elastic_trainer prints them (one clock for every namespace), except
the canopy-run exits, which are stamped with the wall clock beside KILL_WALL.
"""
import glob
import json
import os
import re
import statistics
import sys


def steps_of(text, size=r"\d+"):
    return [float(t) for t in re.findall(r"\] step \d+ rank \d+ size " + size + r" at ([0-9.]+)", text)]


def exact(texts):
    finals = [re.findall(r"final step \d+ digest (\w+) expected (\w+)", text) for text in texts]
    return all(f and all(d == e for d, e in f) for f in finals)


def host_row(kill, size, trial, leader, later, files):
    texts = [open(name).read() for name in files]
    first_step, shrunk, joined = [], [], []
    for text in texts:
        after = [s for s in steps_of(text, size) if s > kill]
        if steps_of(text, size):
            first_step.append(min(after) if after else float("nan"))
        shr = [float(t) for t in re.findall(r"\] shrunk to size \d+, restored step \d+ at ([0-9.]+)", text)]
        if shr:
            shrunk.append(min(shr))
        joined += [float(t) for t in re.findall(r"\] joined as rank \d+ of \d+, restored step \d+ at ([0-9.]+)", text)]
    since = lambda xs: f"{max(xs) - kill:.3f}" if xs else "none"
    late = f"{max(joined) - float(later):.3f}" if later != "none" and joined else ("none" if later == "none" else "never")
    yes = "yes" if exact(texts) else "NO"
    print(f"{trial:>7}  {since(first_step):>16}  {since(shrunk):>14}  {yes:>15}  {leader:>17}  {late:>20}")


def rank_logs(text):
    """A host's log, split by rank: canopy-run prefixes each line of rank R with [R]."""
    ranks = {}
    for line in text.splitlines():
        m = re.match(r"\[(\d+)\] (.*)", line)
        if m:
            ranks.setdefault(m.group(1), []).append(m.group(2))
    return ranks


def etcd_row(kill, kill_wall, trial, victims, store, files):
    texts = [open(name).read() for name in files]
    before, after, ended, failed, naming = [], [], [], 0, 0
    for text in texts:
        for lines in rank_logs(text).values():
            times = [float(t) for line in lines for t in re.findall(r"^step \d+ rank \d+ size \d+ at ([0-9.]+)", line)]
            gaps = list(zip(times, times[1:]))
            before += [b - a for a, b in gaps[5:] if b < kill]  # the first steps include the start
            after += [b - max(a, kill) for a, b in gaps if b > kill]
            errors = [line for line in lines if line.startswith("elastic_trainer: ")]
            failed += bool(errors)
            naming += any(store in line for line in errors)
        ended += [float(t) for t in re.findall(r"canopy-run exit \d+ at ([0-9.]+)", text)]
    codes = ",".join(c for text in texts for c in re.findall(r"canopy-run exit (\d+)", text))
    gap = lambda xs: f"{max(xs):.3f}" if xs else "none"
    steady = f"{statistics.median(before):.3f}/{max(before):.3f}" if before else "none"
    last_end = f"{max(ended) - kill_wall:.2f}" if len(ended) == len(texts) else "NOT ALL"
    yes = "yes" if exact(texts) else "no"
    print(f"{trial:>7}  {victims:>9}  {steady:>16}  {gap(after):>15}  {yes:>13}  {last_end:>15}"
          f"  {codes:>11}  {f'{naming}/{failed}':>16}")


def ddp_row(kill, size, trial, leader, events):
    first_step, failed, finals = [], [], []
    for name in glob.glob(os.path.join(events, "events-*.jsonl")):
        records = []
        for line in open(name):
            try:
                records.append(json.loads(line))
            except ValueError:
                pass  # the line a killed rank was writing
        final = [r for r in records if r["kind"] == "final"]
        if not final:
            continue  # a rank of the killed host
        finals.append(final[0])
        after = [r["t"] for r in records if r["kind"] == "step" and r["size"] == size and r["t"] > kill]
        first_step.append(min(after) if after else float("nan"))
        failed += [min(r["t"] for r in records if r["kind"] == "failure")] if any(
            r["kind"] == "failure" for r in records) else []
    since = lambda xs: f"{max(xs) - kill:.3f}" if xs else "none"
    identical = "yes" if finals and len({f["digest"] for f in finals}) == 1 else "NO"
    steps = ",".join(sorted({str(f["step"]) for f in finals})) or "none"
    print(f"{trial:>7}  {since(first_step):>16}  {since(failed):>15}  {identical:>19}  {leader:>17}  {steps:>11}")


def restart_row(files):
    texts = [open(name).read() for name in files]
    resumed = sorted({int(s) for text in texts for s in re.findall(r"resumed from checkpoint step (\d+)", text)})
    codes = ",".join(c for text in texts for c in re.findall(r"canopy-run exit (\d+)", text))
    print(f"#   restarted with the members back: resumed from checkpoint step {resumed or 'none'},"
          f" weights exact: {'yes' if exact(texts) else 'no'}, canopy-run exit codes {codes}")


if __name__ == "__main__":
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "restart":
        restart_row(args)
    elif mode == "ddp":
        ddp_row(float(args[0]), int(args[1]), args[2], args[3], args[4])
    elif mode == "host":
        host_row(float(args[0]), args[1], args[2], args[3], args[4], args[5:])
    else:
        etcd_row(float(args[0]), float(args[1]), args[2], args[3], args[4], args[5:])
