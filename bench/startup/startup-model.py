#!/usr/bin/env python3
"""A model of a Canopy group's start-up, from launch to the end of its first 4-byte all-reduce: checked
against this machine's measurements at 64-512 ranks (one host, 2 cores) and extrapolated to clusters of
8-rank hosts up to 100,000 ranks. Prints both tables and draws docs/figures/startup-model.svg (gnuplot).

    bench/startup/startup-model.py --runs DIR [--choice FILE] [--svg FILE]

--runs   a bench/startup/startup.sh output folder: DIR/<P>-canopy/rank-*.json for each P measured.
--choice canopy-micro-bench --benchmark_filter='^choice' --benchmark_format=json output: the cost
         model's choice at a first call, on one host of 2 cores and on 8-rank hosts (choice_cluster/).

The parts, each from its own measurement (docs/PERFORMANCE.md, "Start-up and scale"):
  store    one server thread serves every rank in turn: accepting its connection (54 us), its start-up
           requests (16 us each, `store req` of the runs) and the layout agreement's answer, 6 B a rank,
           which every rank reads: P^2 * 6 B at 2.5 GB/s (all from canopy-store-load at 16,384 clients,
           whose 2.96 s this reproduces as 2.84);
  choice   the first call's choice of algorithm (simulating every candidate for P ranks): once per host,
           the host's other ranks read it (ChoiceMemo);
  connect  the first all-reduce dials its peers on first use: on a cluster lg P rounds, each a connect and
           an address read (3 round trips) and the message (1), at an assumed 50 us round trip;
  rank     what each rank spends of its own: starting the process, forming the communicator, the probe:
           t0 (the launcher, and one rank's path through it all) + c of CPU a rank. On one host the ranks
           share 2 cores, so it adds up to t0 + P * c / 2; t0 and c, the only fitted numbers, are fitted to
           the measurements by least squares. On a cluster every rank has a core: t0 + c.
"""
import argparse
import glob
import json
import math
import os
import subprocess

CORES = 2                      # this machine
RANKS_PER_HOST = 8             # the cluster extrapolated to
STORE_ACCEPT_S = 0.89 / 16384  # connect + hello per client, canopy-store-load at 16,384
STORE_REQUEST_S = 16e-6        # server CPU per request, same run, without the answer's bytes
ANSWER_BYTES_PER_RANK = 6      # the host layout answer every rank reads
FAN_OUT_BYTES_PER_S = 2.5e9    # server CPU for the answer's bytes: (24 - 16 us) x 81,921 requests / 1.6 GB
ROUND_TRIP_S = 50e-6           # assumed: a datacentre network
HEARTBEAT_REQUESTS = 4         # per rank and interval (1 s): a beat, the failure record, a check, a GET_MANY


def measured(runs):
    """P -> (slowest rank's launch-to-first-all-reduce seconds, median store requests)."""
    points = {}
    for folder in glob.glob(os.path.join(runs, "*-canopy")):
        p = int(os.path.basename(folder).split("-")[0])
        rows = [json.loads(line) for path in glob.glob(os.path.join(folder, "rank-*.json"))
                for line in open(path) if line.strip()]
        if len(rows) == p:
            requests = sorted(r["store_requests"] for r in rows)
            points[p] = (max(r["to_first_allreduce_s"] for r in rows), requests[len(requests) // 2])
    return dict(sorted(points.items()))


def choice_seconds(path):
    """(one host of 2 cores: P -> s, 8-rank hosts: P -> s) for a first 4-byte all-reduce."""
    one_host, cluster = {}, {}
    if path:
        for b in json.load(open(path))["benchmarks"]:
            name = b["name"]
            if "/count:1/" not in name or "one_call" not in name or "allreduce" not in name:
                continue
            p = int(name.split("/P:")[1].split("/")[0])
            seconds = b["real_time"] / 1e3  # milliseconds
            (cluster if name.startswith("choice_cluster/") else one_host)[p] = seconds
    return one_host, cluster


def log_log(points, p):
    """points interpolated (and extrapolated along the last two) on log-log axes."""
    xs = sorted(points)
    if not xs:
        return 0.0
    if p in points or len(xs) == 1:
        return points.get(p, points[xs[0]] * p / xs[0])
    lo, hi = (xs[-2], xs[-1]) if p > xs[-1] else (xs[0], xs[1]) if p < xs[0] else \
        next((a, b) for a, b in zip(xs, xs[1:]) if a <= p <= b)
    slope = math.log(points[hi] / points[lo]) / math.log(hi / lo)
    return points[lo] * (p / lo) ** slope


def store_seconds(p, requests):
    return p * STORE_ACCEPT_S + p * requests * STORE_REQUEST_S + p * p * ANSWER_BYTES_PER_RANK / FAN_OUT_BYTES_PER_S


def one_host_parts(p, requests, t0, c, choice):
    return {"store": store_seconds(p, requests), "choice": log_log(choice, p), "rank": t0 + p * c / CORES}


def cluster_parts(p, requests, t0, c, choice):
    rounds = math.ceil(math.log2(p))
    return {"store": store_seconds(p, requests), "choice": log_log(choice, p),
            "connect": rounds * 4 * ROUND_TRIP_S, "rank": t0 + c}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", required=True)
    parser.add_argument("--choice")
    parser.add_argument("--svg")
    args = parser.parse_args()
    points = measured(args.runs)
    one_host_choice, cluster_choice = choice_seconds(args.choice)
    if not points:
        raise SystemExit(f"startup-model.py: no complete Canopy run under {args.runs}")
    requests = max(r for _, r in points.values())

    # t0 and c by least squares: measured - (store + choice) = t0 + P c / CORES.
    rest = {p: t - sum(one_host_parts(p, requests, 0, 0, one_host_choice).values()) for p, (t, _) in points.items()}
    n, sx, sy = len(rest), sum(rest), sum(rest.values())
    sxx, sxy = sum(p * p for p in rest), sum(p * y for p, y in rest.items())
    slope = (n * sxy - sx * sy) / (n * sxx - sx * sx) if n > 1 else sy / sx
    t0 = (sy - slope * sx) / n if n > 1 else 0.0
    c = slope * CORES
    print(f"# fitted: t0 = {t0:.3f} s, c = {c * 1e3:.2f} ms of CPU a rank; store requests per rank: {requests}")
    print("\n| P (one host, 2 cores) | measured (s) | model (s) | store | choice | ranks' own CPU |")
    print("|---|---|---|---|---|---|")
    for p, (t, _) in points.items():
        parts = one_host_parts(p, requests, t0, c, one_host_choice)
        print(f"| {p} | {t:.2f} | {sum(parts.values()):.2f} | {parts['store']:.3f} | {parts['choice']:.3f} "
              f"| {parts['rank']:.2f} |")

    sizes = [512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 100000]
    print(f"\n| P ({RANKS_PER_HOST}-rank hosts) | model (s) | store | choice | connect | rank | "
          f"heartbeat load (share of the store's thread) |")
    print("|---|---|---|---|---|---|---|")
    rows = []
    for p in sizes:
        parts = cluster_parts(p, requests, t0, c, cluster_choice)
        load = p * HEARTBEAT_REQUESTS * STORE_REQUEST_S
        rows.append((p, parts))
        extrapolated = "" if p in cluster_choice else " (extrapolated)"
        print(f"| {p} | {sum(parts.values()):.2f} | {parts['store']:.2f} | {parts['choice']:.2f}{extrapolated} "
              f"| {parts['connect']:.4f} | {parts['rank']:.2f} | {load:.0%} |")

    if args.svg:
        draw(args.svg, points, requests, t0, c, one_host_choice, rows)


def draw(svg, points, requests, t0, c, one_host_choice, rows):
    folder = os.path.dirname(os.path.abspath(svg))
    data = os.path.join(folder, "data", "startup-model")
    os.makedirs(os.path.dirname(data), exist_ok=True)
    with open(data + "-measured.dat", "w") as f:
        f.write("# P  measured_s  model_s (one host, 2 cores)\n")
        for p, (t, _) in points.items():
            f.write(f"{p} {t} {sum(one_host_parts(p, requests, t0, c, one_host_choice).values())}\n")
    with open(data + "-cluster.dat", "w") as f:
        f.write("# P  total_s  store_s  choice_s  connect_s  rank_s (hosts of 8 ranks)\n")
        for p, parts in rows:
            f.write(f"{p} {sum(parts.values())} {parts['store']} {parts['choice']} {parts['connect']} "
                    f"{parts['rank']}\n")
    script = f"""
set terminal svg size 760,460 font "sans,12"
set output "{svg}"
set logscale xy
set xlabel "ranks"
set ylabel "seconds from launch to the end of the first all-reduce"
set key top left
set grid
set xrange [48:130000]
set yrange [0.0005:200]
plot "{data}-measured.dat" using 1:2 with points pt 7 ps 1.2 title "measured, one host of 2 cores", \\
     "{data}-measured.dat" using 1:3 with lines lw 2 title "model, one host of 2 cores", \\
     "{data}-cluster.dat" using 1:2 with lines lw 3 title "model, hosts of 8 ranks", \\
     "{data}-cluster.dat" using 1:3 with lines dt 2 title "  its store (one server thread)", \\
     "{data}-cluster.dat" using 1:4 with lines dt 3 title "  its choice of algorithm", \\
     "{data}-cluster.dat" using 1:5 with lines dt 4 title "  its connects on first use"
"""
    subprocess.run(["gnuplot"], input=script, text=True, check=True)
    print(f"\n# drawn: {svg}")


if __name__ == "__main__":
    main()
