#!/usr/bin/env python3
"""Issue 20's ratios from two-level-story.sh's rounds: per round and their median.

  all-reduce: auto's busbw / the flat ring's (targets: >= 1.5 on 2x4, >= 1.1 on 4x2);
  broadcast:  auto's busbw / the best flat algorithm's (target: >= 1, within the noise).

canopy-bench's busbw comes from the mean of the ranks' times. A broadcast's ranks finish far apart
(a chain's first ranks long before its last), so each ratio is also given by the last rank's time
(max_time_us): the time until every rank holds the data.

Usage: two-level-summary.py DIR   (DIR/round-K/{allreduce,broadcast}-LAYOUT.json)
"""
import glob
import json
import os
import statistics
import sys


def rows(path):
    with open(path) as f:
        data = json.load(f)
    return data if isinstance(data, list) else data.get("rows", [])


def row_of(table, requested):
    return next((row for row in table if row["requested_algo"] == requested), None)


def baseline(case, table, key, better):
    """The ring for an all-reduce; for a broadcast, the best algorithm but two-level and auto."""
    if case.startswith("allreduce"):
        return row_of(table, "ring")
    flat = [r for r in table if r["requested_algo"] not in ("auto", "two-level")]
    return better(flat, key=lambda r: r[key]) if flat else None


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    top = sys.argv[1]
    ratios = {}
    for round_dir in sorted(glob.glob(os.path.join(top, "round-*"))):
        round_name = os.path.basename(round_dir)
        for path in sorted(glob.glob(os.path.join(round_dir, "*.json"))):
            case = os.path.basename(path)[: -len(".json")]
            table = rows(path)
            auto = row_of(table, "auto")
            by_mean = baseline(case, table, "busbw_gbps", max)
            by_last = baseline(case, table, "max_time_us", min)
            if not auto or not by_mean or not by_last:
                continue
            mean_ratio = auto["busbw_gbps"] / by_mean["busbw_gbps"]
            last_ratio = by_last["max_time_us"] / auto["max_time_us"]
            ratios.setdefault(case, []).append((mean_ratio, last_ratio))
            print(f"{round_name} {case}: auto ({auto['algo']}) {auto['busbw_gbps']:.4f} GB/s busbw, "
                  f"{by_mean['algo']} {by_mean['busbw_gbps']:.4f}: {mean_ratio:.2f}x; by the last rank "
                  f"{auto['max_time_us'] / 1e3:.0f} ms against {by_last['algo']} "
                  f"{by_last['max_time_us'] / 1e3:.0f} ms: {last_ratio:.2f}x")
    print()
    for case, values in sorted(ratios.items()):
        base = "the ring" if case.startswith("allreduce") else "the best flat algorithm"
        means = [m for m, _ in values]
        lasts = [last for _, last in values]
        print(f"median {case}: {statistics.median(means):.2f}x of {base}'s busbw "
              f"({', '.join(f'{v:.2f}' for v in means)}); by the last rank "
              f"{statistics.median(lasts):.2f}x ({', '.join(f'{v:.2f}' for v in lasts)})")


if __name__ == "__main__":
    main()
