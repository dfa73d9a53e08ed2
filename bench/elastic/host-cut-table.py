#!/usr/bin/env python3
"""host-cut.sh's verdicts: one line for a trial (--line DIR), or the table of every trial given.

Reads a trial's directory: `facts` (the plan, the instants of the cut and of the reconnection, each
rank's exit status) and rank-<r>.log (canopy-host-cut-rank's lines). A trial passes when the survivors
went on within the heartbeat timeout + 2 s of the cut, all restored the last step every one of them had
committed, ended in one group of exactly themselves with every weight exact, and the cut ranks ended by
themselves with Revoked, PeerFailed or Timeout. A trial of `host-cut.sh --end` passes when every process
exited within the call timeout + 2 s of the cut, each having said why: Revoked, PeerFailed or Timeout and a
message naming another rank. The exit status is 1 when a trial given failed.
"""
import os
import re
import sys

RANKS_PER_HOST = 2
CLEAR = {"revoked", "peer_failed", "timeout"}


def read_trial(directory):
    facts = {"exits": {}}
    for line in open(os.path.join(directory, "facts")):
        words = line.split()
        if words[0] == "plan":
            facts["host"], facts["step"], facts["timeout"] = int(words[1]), int(words[2]), float(words[3])
            facts["mode"] = words[4] if len(words) > 4 else "shrink"
        elif words[0] in ("cut", "healed"):
            facts[words[0]] = float(words[1])
        elif words[0] == "exit":
            facts["exits"][int(words[1])] = int(words[2])
            if len(words) > 3:
                facts.setdefault("exited", {})[int(words[1])] = float(words[3])
        elif words[0] == "load":
            facts["load"] = " ".join(words[1:])
    ranks = {}
    for rank in facts["exits"]:
        seen = {"steps": [], "end": None, "done": None}
        path = os.path.join(directory, f"rank-{rank}.log")
        for line in open(path) if os.path.exists(path) else []:
            words = line.split()
            if len(words) < 3:
                continue
            kind = words[0]
            at = float(words[3] if kind == "step" else words[2])  # "step <rank> <step> <t>", else "<kind> <rank> <t>"
            if kind == "step":
                seen["steps"].append(int(words[2]))
            elif kind == "failed":
                seen["failed"] = (at, words[3])
            elif kind == "restored":
                seen["restored"] = int(words[3])
            elif kind == "recovered":
                seen["recovered"] = at
            elif kind == "done":
                seen["done"] = (at, words[3], words[4] if len(words) > 4 else "")
            elif kind == "end":
                seen["end"] = (at, words[4], " ".join(words[5:]))
        ranks[rank] = seen
    return facts, ranks


def verdict(directory):
    facts, ranks = read_trial(directory)
    cut_ranks = [r for r in ranks if r // RANKS_PER_HOST == facts["host"]]
    survivors = [r for r in ranks if r not in cut_ranks]
    row = {"trial": os.path.basename(directory), "host": facts["host"], "cut_ranks": cut_ranks,
           "step": facts["step"], "timeout": facts["timeout"], "load": facts.get("load", "?"), "problems": []}
    problems = row["problems"]
    hung = [r for r, status in facts["exits"].items() if status in (124, 137)]
    row["hangs"] = len(hung)
    if hung:
        problems.append(f"ranks {hung} hung")
    if "cut" not in facts:
        problems.append("the cut never happened (rank 0 did not reach its step)")
        return row
    cut = facts["cut"]
    if facts["mode"] == "end":
        return end_verdict(facts, ranks, row)
    failed = [ranks[r]["failed"][0] - cut for r in survivors if "failed" in ranks[r]]
    went_on = [ranks[r]["recovered"] - cut for r in survivors if "recovered" in ranks[r]]
    row["failed"] = max(failed) if failed else None
    row["went_on"] = max(went_on) if went_on else None
    if len(went_on) != len(survivors):
        problems.append(f"{len(went_on)} of {len(survivors)} survivors went on")
    elif row["went_on"] > facts["timeout"] + 2:
        problems.append(f"the survivors went on {row['went_on']:.2f} s after the cut, over {facts['timeout']} + 2 s")
    committed = [max(ranks[r]["steps"], default=0) for r in survivors]
    row["committed_by_all"], row["latest"] = min(committed), max(committed)
    restored = sorted({str(ranks[r].get("restored")) for r in survivors})
    row["restored"] = int(restored[0]) if len(restored) == 1 and restored[0] != "None" else None
    if row["restored"] != row["committed_by_all"]:
        problems.append(f"restored {', '.join(restored)}, not the step every survivor committed "
                        f"({row['committed_by_all']})")
    expected_members = ",".join(map(str, sorted(survivors)))
    done = [ranks[r]["done"] for r in survivors]
    row["exact"] = all(d is not None and d[1] == "ok" and d[2] == expected_members for d in done)
    if not row["exact"]:
        problems.append(f"survivors ended {[d[1:] if d else None for d in done]}, expected ok in [{expected_members}]")
    ends = []
    for r in cut_ranks:
        end = ranks[r]["end"]
        if end is None or end[1] not in CLEAR:
            problems.append(f"cut rank {r} ended {end[1:] if end else 'without a word'}")
        else:
            ends.append((end[1], end[0] - cut, end[2]))
    row["cut_ends"] = ends
    row["healed"] = facts.get("healed", cut) - cut if "healed" in facts else None
    return row


def end_verdict(facts, ranks, row):
    """--end: every rank reports its failed call and its process exits within the call timeout + 2 s."""
    cut, bound = facts["cut"], facts["timeout"] + 2
    row["ends"] = {}
    for r in sorted(ranks):
        end, exited = ranks[r]["end"], facts.get("exited", {}).get(r)
        named = {int(n) for n in re.findall(r"rank(?:\(s\))? (\d+)", end[2])} - {r} if end else set()
        if end is None or end[1] not in CLEAR or not named:  # a clear error names another rank
            row["problems"].append(f"rank {r} ended {end[1:] if end else 'without a word'}")
        if exited is None or exited - cut > bound:
            row["problems"].append(f"rank {r} exited {'never' if exited is None else f'{exited - cut:.2f} s'} "
                                   f"after the cut, over {facts['timeout']:g} + 2 s")
        row["ends"][r] = (end[1] if end else "-", (end[0] - cut) if end else None,
                          (exited - cut) if exited is not None else None, end[2] if end else "")
    return row


def end_line_of(row):
    verdict_word = "passed" if not row["problems"] else "FAILED: " + "; ".join(row["problems"])
    exits = [e[2] for e in row["ends"].values() if e[2] is not None]
    cut = [f"{e[0]} {e[1]:.2f}/{e[2]:.2f} s" for r, e in row["ends"].items()
           if r in row["cut_ranks"] and e[1] is not None and e[2] is not None]
    first = {r: e[3][:300] for r, e in row["ends"].items() if r in row["cut_ranks"][:1] or r == 0}
    return (f"{row['trial']}: host {row['host']} (ranks {row['cut_ranks']}) cut after step {row['step']} "
            f"(load {row['load']}); every process exited by {max(exits, default=0):.2f} s after the cut "
            f"(bound {row['timeout'] + 2:g}); cut ranks reported/exited: {', '.join(cut)}; {verdict_word}"
            + "".join(f"\n  rank {r}: {m}" for r, m in first.items()))


def line_of(row):
    if "ends" in row:
        return end_line_of(row)
    if "failed" not in row:
        return f"{row['trial']}: FAILED: {'; '.join(row['problems'])}"
    ends = ", ".join(f"{code} at {at:.2f} s" for code, at, _ in row["cut_ends"])
    verdict_word = "passed" if not row["problems"] else "FAILED: " + "; ".join(row["problems"])
    return (f"{row['trial']}: host {row['host']} (ranks {row['cut_ranks']}) cut after step {row['step']} "
            f"(load {row['load']}); survivors failed {row['failed']:.2f} s after the cut, went on at "
            f"{row['went_on'] or 0:.2f} s (bound {row['timeout'] + 2:.1f}); restored step {row['restored']} "
            f"(committed by all: {row['committed_by_all']}, latest: {row['latest']}); "
            f"{'exact' if row['exact'] else 'NOT EXACT'}; cut ranks: {ends}; {verdict_word}")


def main(argv):
    if argv[:1] == ["--line"]:
        print(line_of(verdict(argv[1])))
        return 0
    rows = [verdict(d) for d in argv]
    failed = [row["trial"] for row in rows if row["problems"]]
    if any("ends" in row for row in rows):  # --end: the line of each trial (--line) is the whole story
        print("# every trial passed" if not failed else f"# FAILED: {', '.join(failed)}")
        return 1 if failed else 0
    print()
    print("| trial | cut host (ranks) | cut after step | survivors failed (s after the cut) | survivors' next "
          "step (s after the cut; bound: timeout + 2 s) | restored step / committed by all / latest | weights "
          "exact | cut ranks ended (s after the cut) | hangs |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        if "failed" not in row:
            print(f"| {row['trial']} | {row['host']} | {row['step']} | - | - | - | - | - | {row['hangs']} |")
            continue
        ends = ", ".join(f"{code} {at:.2f}" for code, at, _ in row["cut_ends"]) or "-"
        print(f"| {row['trial'].replace('trial-', '')} | {row['host']} ({', '.join(map(str, row['cut_ranks']))}) "
              f"| {row['step']} | {row['failed']:.2f} | {row['went_on'] or 0:.2f} ({row['timeout'] + 2:.1f}) | "
              f"{row['restored']} / {row['committed_by_all']} / {row['latest']} | {'yes' if row['exact'] else 'NO'} "
              f"| {ends} | {row['hangs']} |")
    print("# every trial passed" if not failed else f"# FAILED: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
