#!/usr/bin/env python3
"""Issue 20's ratios from two-level-story.sh's rounds: per round and their median.

  all-reduce: auto's busbw / the flat ring's (targets: >= 1.5 on 2x4, >= 1.1 on 4x2);
  broadcast:  auto's busbw / the best flat algorithm's (target: >= 1, within the noise).

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


def busbw(table, requested=None, chosen=None):
    for row in table:
        if requested is not None and row["requested_algo"] != requested:
            continue
        if chosen is not None and row["algo"] != chosen:
            continue
        return row["busbw_gbps"], row["algo"]
    return None, None


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
            auto, chosen = busbw(table, requested="auto")
            if case.startswith("allreduce"):
                base, base_name = busbw(table, requested="ring")
            else:
                flat = [(r["busbw_gbps"], r["algo"]) for r in table
                        if r["requested_algo"] not in ("auto", "two-level")]
                base, base_name = max(flat) if flat else (None, None)
            if not auto or not base:
                continue
            ratio = auto / base
            ratios.setdefault(case, []).append(ratio)
            print(f"{round_name} {case}: auto ({chosen}) {auto:.4f} GB/s busbw, "
                  f"{base_name} {base:.4f}: {ratio:.2f}x")
    print()
    for case, values in sorted(ratios.items()):
        print(f"median {case}: {statistics.median(values):.2f}x of "
              f"{'the ring' if case.startswith('allreduce') else 'the best flat algorithm'} "
              f"({', '.join(f'{v:.2f}' for v in values)})")


if __name__ == "__main__":
    main()
