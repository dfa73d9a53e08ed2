#!/usr/bin/env python3
"""figure-tables.py: the Markdown tables docs/PERFORMANCE.md links (tables.md), from the rows record-figures.sh wrote.

    bench/collectives/figure-tables.py [DATA_DIR]      # default: docs/figures/data

Prints two sections: all-reduce on 4 ranks, every algorithm (time and model up to 16 KiB, busbw, model busbw
and % of the ceiling from 64 KiB), and time against P for 8 bytes (all-reduce and broadcast).
"""
import json
import pathlib
import sys

data = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "docs/figures/data")


def rows(*names):
    out = []
    for name in names:
        path = data / name
        if path.exists():
            out += json.loads(path.read_text())
    return out


def size_label(n):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def cell(row):
    if row["bytes"] <= 16 << 10:
        return f"{row['time_us']:.0f} ({row['predicted_time_us']:.0f})"
    model_busbw = row["busbw_gbps"] * row["time_us"] / row["predicted_time_us"]
    ceiling = f" {100 * row['busbw_of_ceiling']:.0f}%" if "busbw_of_ceiling" in row else ""
    return f"{row['busbw_gbps']:.2f} ({model_busbw:.2f}){ceiling}"


def faster(a, b):
    return a["time_us"] < b["time_us"]


def allreduce_table():
    table = rows("allreduce-4-small.json", "allreduce-4-large.json")
    algos = [a for a in dict.fromkeys(r["requested_algo"] for r in table) if a != "auto"]
    print("| size | " + " | ".join(algos) + " | auto chose |")
    print("|---:|" + "---:|" * len(algos) + "---|")
    for size in sorted({r["bytes"] for r in table}):
        at = {r["requested_algo"]: r for r in table if r["bytes"] == size}
        best = min((at[a] for a in algos if a in at), key=lambda r: r["time_us"])
        cells = []
        for a in algos:
            text = cell(at[a]) if a in at else ""
            cells.append(f"**{text}**" if a in at and at[a] is best else text)
        auto = at.get("auto")
        cells.append(f"{auto['algo']}: {cell(auto)}" if auto else "")
        print(f"| {size_label(size)} | " + " | ".join(cells) + " |")


def latency_table(collective):
    by_p = {}
    for path in sorted(data.glob(f"{collective}-8B-*.json")):
        for r in json.loads(path.read_text()):
            by_p.setdefault(r["ranks"], {})[r["requested_algo"]] = r
    ps = sorted(by_p)
    algos = [a for a in dict.fromkeys(a for p in ps for a in by_p[p]) if a != "auto"] + ["auto"]
    print(f"| {collective} | " + " | ".join(f"P={p}" for p in ps) + " |")
    print("|---|" + "---:|" * len(ps))
    for a in algos:
        cells = []
        for p in ps:
            r = by_p[p].get(a)
            if r is None:
                cells.append("")
                continue
            text = f"{r['time_us']:.1f} ({r['predicted_time_us']:.0f})"
            cells.append(f"{r['algo']} {text}" if a == "auto" else text)
        print(f"| {a} | " + " | ".join(cells) + " |")


print("### All-reduce, 4 ranks\n")
allreduce_table()
for collective in ("allreduce", "broadcast"):
    print(f"\n### {collective}, 8 bytes, time against P\n")
    latency_table(collective)
