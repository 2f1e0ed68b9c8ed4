#!/usr/bin/python3
"""bench/compare_builds.py -- the CNN operator benchmarks of two builds of mft
side by side in one run: did a change make anything slower?

    python3 bench/compare_builds.py OLD_BUILD NEW_BUILD [--benches conv,pool,norm,gemm,resize]
        [--rounds 3] [--threads 1,2] [--reps 5]

OLD_BUILD and NEW_BUILD are build directories configured with
-DMFT_BUILD_BENCH=ON (for the old one, a `git worktree add /tmp/old REV` built
in its own directory). In each round every bench_<fam> of both builds runs
once (`--json --blocked`; the order alternates between rounds, so drift on a
shared machine falls on both sides); per case the table shows the medians
over rounds of both times and old / new (> 1: the new build is faster), then
the geometric mean and the extremes over all cases.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys


def run(exe, threads, reps):
    out = subprocess.run([exe, "--json", "--threads", threads, "--reps", str(reps), "--blocked"],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out[out.index("{"):])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--benches", default="conv,pool,norm,gemm,resize")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    times = {}
    for r in range(a.rounds):
        for b in a.benches.split(","):
            sides = [("old", a.old), ("new", a.new)]
            if r % 2:
                sides.reverse()
            for tag, d in sides:
                exe = os.path.join(d, "bench", "bench_" + b)
                if not os.access(exe, os.X_OK):
                    sys.exit("compare_builds.py: %s is missing (configure with -DMFT_BUILD_BENCH=ON)" % exe)
                for res in run(exe, a.threads, a.reps)["results"]:
                    for c in res["cases"]:
                        key = (b, res["threads"], c["key"])
                        times.setdefault(key, {}).setdefault(tag, []).append(c["seconds"])
    ratios = []
    print("%-7s %-3s %-50s %12s %12s %8s" % ("bench", "thr", "case", "old ms", "new ms", "old/new"))
    for key in sorted(times):
        v = times[key]
        if "old" not in v or "new" not in v:
            continue
        o, n = statistics.median(v["old"]), statistics.median(v["new"])
        ratios.append(o / n)
        print("%-7s %-3d %-50s %12.3f %12.3f %8.3f" % (key[0], key[1], key[2][:50], o * 1e3, n * 1e3, o / n))
    if ratios:
        g = math.exp(sum(map(math.log, ratios)) / len(ratios))
        print("%d cases: geometric mean old/new %.3f, min %.3f, max %.3f" % (len(ratios), g, min(ratios), max(ratios)))


if __name__ == "__main__":
    main()
