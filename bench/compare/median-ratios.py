#!/usr/bin/env python3
"""median-ratios.py: the median Canopy / Open MPI time ratio per row over several compare.sh rounds.

    bench/compare/median-ratios.py ROUND_DIR...      # each holding canopy-C-P.json and mpi-C-P.json

One line per (collective, ranks, size): the algorithm Canopy ran most often, the median Canopy and MPI
times, the median of the per-round ratios (each round's Canopy time over the same round's MPI time),
every round's ratio, so the spread stays in view, and a bootstrap 95% interval of the median ratio. A round whose fixed CPU work (cpu-*.txt, timed by
compare.sh before and after each run) moved by more than 20% around its two runs is marked '~': the
machine changed speed under it. "steady" is the median over the other rounds.
"""
import collections
import json
import pathlib
import random
import statistics
import sys

if len(sys.argv) < 2:
    sys.exit(__doc__)

STEADY = 1.2  # the most the CPU's speed may move around a round's two runs for it to count as steady
RESAMPLES = 2000  # for the bootstrap interval of the median


def median_interval(ratios):
    """A bootstrap 95% interval of the median of `ratios` (seeded: the same rounds print the same)."""
    draw = random.Random(0)
    medians = sorted(statistics.median(draw.choices(ratios, k=len(ratios))) for _ in range(RESAMPLES))
    return medians[int(0.025 * RESAMPLES)], medians[int(0.975 * RESAMPLES) - 1]


def cpu_steady(directory, stem):
    """Whether the fixed CPU work stayed within STEADY around both runs; True where it was not timed."""
    times = []
    for side in ("canopy", "mpi"):
        path = directory / f"cpu-{side}-{stem}.txt"
        if not path.exists():
            return True
        times += [float(x) for x in path.read_text().split()]
    return not times or max(times) <= STEADY * min(times)


rounds = collections.defaultdict(list)  # (collective, ranks, bytes) -> [(algo, canopy_us, mpi_us, steady)]
for directory in map(pathlib.Path, sys.argv[1:]):
    for canopy_path in sorted(directory.glob("canopy-*.json")):
        mpi_path = directory / canopy_path.name.replace("canopy-", "mpi-", 1)
        if not mpi_path.exists():
            continue
        steady = cpu_steady(directory, canopy_path.stem.removeprefix("canopy-"))
        mpi = {r["bytes"]: r for r in json.loads(mpi_path.read_text())}
        for row in json.loads(canopy_path.read_text()):
            peer = mpi.get(row["bytes"])
            if peer is not None and peer["time_us"] > 0:
                key = (row["collective"], row["ranks"], row["bytes"])
                rounds[key].append((row["algo"], row["time_us"], peer["time_us"], steady))

if not rounds:
    sys.exit("median-ratios.py: no canopy-*.json with a matching mpi-*.json in " + " ".join(sys.argv[1:]))
print(f"{'collective':>10} {'ranks':>5} {'size(B)':>10} {'canopy algo':>18} {'canopy us':>10} {'mpi us':>10}"
      f" {'median ratio':>12} {'steady':>7}  ratios per round ('~': the CPU's speed moved), 95% interval")
unsteady = 0
for (collective, ranks, size), runs in sorted(rounds.items()):
    algo = collections.Counter(r[0] for r in runs).most_common(1)[0][0]
    ratios = [c / m for _, c, m, _ in runs]
    steady = [c / m for _, c, m, s in runs if s]
    unsteady += len(runs) - len(steady)
    print(f"{collective:>10} {ranks:>5} {size:>10} {algo:>18} {statistics.median(r[1] for r in runs):>10.1f}"
          f" {statistics.median(r[2] for r in runs):>10.1f} {statistics.median(ratios):>12.2f}"
          f" {f'{statistics.median(steady):.2f}' if steady else '-':>7}  "
          + " ".join(f"{x:.2f}{'' if s else '~'}" for x, (*_, s) in zip(ratios, runs))
          + "  [{:.2f}, {:.2f}]".format(*median_interval(ratios)))
print(f"# {len(sys.argv) - 1} rounds; ratio = Canopy time / Open MPI time (below 1: Canopy faster);"
      f" {unsteady} row-rounds met a CPU whose speed moved by more than {100 * (STEADY - 1):.0f}%")
