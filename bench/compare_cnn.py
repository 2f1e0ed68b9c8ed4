#!/usr/bin/python3
"""bench/compare_cnn.py -- the CNN operator benchmarks against PyTorch 1.13,
side by side in one run.

    /usr/bin/python3 bench/compare_cnn.py [--bench build/bench/bench_conv ...]
        [--benches conv,pool,norm,resize,gemm] [--threads 1,2] [--rounds 3]
        [--reps 7] [--only SUB1,SUB2] [--json-out FILE] [--no-pin]

Each C benchmark bench/bench_<fam>.c, run as `bench_<fam> --json --threads T
--reps R --blocked`, prints one JSON object:
  {"bench": "<fam>", "results": [{"threads": T,
     "refs": {"fma_peak_gflops": G, "stream_copy_gbs": B},
     "cases": [{"key": K, "seconds": median, "flops": F, "bytes": Y}, ...]}]}
where flops are the useful FLOPs of one call (0 for memory-bound work) and
bytes the traffic an optimal kernel must move; the two references are
measured by the same process at the same thread count (an FMA loop, a STREAM
copy). Its PyTorch peer bench/peer_<fam>.py defines CASES = {key: setup};
setup() builds the inputs once and returns the callable to time.

One run = several rounds; in each round, for every thread count, the C
benchmark runs once (all its cases) and every PyTorch case with the same key
is timed (torch.set_num_threads(T); one untimed call before each sample;
median of --reps samples); rounds alternate which side goes first. Both
sides take a case's samples back to back (--blocked makes the C benchmark do
so; by default it interleaves its cases, which leaves a case's data less
warm than PyTorch's, and which this script did before 2026-11-26). In
1-thread rounds both sides are pinned to the same core (os.sched_setaffinity;
the C benchmark inherits it), round r on core r mod ncores: the two cores of
the development VM differ by up to 13% in FMA throughput, and unpinned the
two processes could each land on a different one (--no-pin: the old way).
Per case
the table shows medians over rounds of: our time, PyTorch's time, the
speed-up torch_time / our_time computed within each round (> 1: mft is
faster), and for both sides the fraction of the round's reference reached:
GFLOP/s over the FMA peak when the case counts FLOPs, else GB/s over STREAM
copy. Medians of ratios measured side by side are what to quote: absolute
times on this shared machine drift between runs.

Exit status: 0 ok, 1 a C benchmark failed, 2 usage / PyTorch missing.
"""

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Dict, List, Optional

try:
    import torch
except ImportError:
    sys.stderr.write("compare_cnn.py: PyTorch is not importable by %s; install python3-torch "
                     "and run with /usr/bin/python3\n" % sys.executable)
    sys.exit(2)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH_DIR = os.path.join(REPO, "bench")
FAMILIES = ["conv", "pool", "norm", "resize", "gemm"]


def load_peer(fam: str):
    path = os.path.join(BENCH_DIR, "peer_%s.py" % fam)
    if not os.path.exists(path):
        return {}
    spec = importlib.util.spec_from_file_location("peer_%s" % fam, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, "CASES", {})


def find_binary(fam: str) -> Optional[str]:
    """build/bench/bench_<fam>, else the newest optimised build without
    sanitizers (compare_pytorch.find_binary: a plain sorted glob picked
    build-asan/ first, and timed AddressSanitizer code)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import compare_pytorch  # noqa: E402 (the shared chooser, imported on use)
    return compare_pytorch.find_binary("bench_%s" % fam, None)


def run_c(binary: str, threads: int, reps: int) -> Dict[str, dict]:
    cmd = [binary, "--json", "--threads", str(threads), "--reps", str(reps), "--blocked"]
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if out.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd), out.returncode,
                                                    out.stderr.strip()[-2000:]))
    doc = json.loads(out.stdout)
    for res in doc["results"]:
        if int(res["threads"]) == threads:
            refs = res["refs"]
            return {c["key"]: dict(c, refs=refs) for c in res["cases"]}
    raise RuntimeError("%s: no result for %d threads" % (binary, threads))


def time_torch(fn, reps: int) -> float:
    samples = []
    for _ in range(reps):
        fn()
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def frac(case: dict, seconds: float) -> Optional[float]:
    refs = case["refs"]
    if case.get("flops"):
        return case["flops"] / seconds / 1e9 / refs["fma_peak_gflops"]
    if case.get("bytes"):
        return case["bytes"] / seconds / 1e9 / refs["stream_copy_gbs"]
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench", action="append", default=[],
                    help="path of a bench_<fam> binary (repeatable)")
    ap.add_argument("--benches", default="", help="comma list of families (%s)" %
                    ",".join(FAMILIES))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--only", default="", help="run only case keys containing one of these "
                    "comma-separated substrings")
    ap.add_argument("--json-out", default="")
    ap.add_argument("--no-pin", action="store_true",
                    help="leave 1-thread rounds unpinned (before 2026-11-26)")
    args = ap.parse_args()

    binaries: Dict[str, str] = {}
    for p in args.bench:
        fam = os.path.basename(p)[len("bench_"):]
        if not os.access(p, os.X_OK):
            sys.stderr.write("compare_cnn.py: %s is not an executable\n" % p)
            return 2
        binaries[fam] = p
    wanted = [f for f in args.benches.split(",") if f] or \
        ([] if binaries else FAMILIES)
    for fam in wanted:
        if fam not in binaries:
            b = find_binary(fam)
            if b:
                binaries[fam] = b
            elif args.benches:
                sys.stderr.write("compare_cnn.py: bench_%s not built\n" % fam)
                return 2
    if not binaries:
        sys.stderr.write("compare_cnn.py: no bench_<fam> binary found; build with "
                         "-DMFT_BUILD_BENCH=ON\n")
        return 2
    threads = [int(t) for t in args.threads.split(",") if t]
    only = [o for o in args.only.split(",") if o]

    def wanted_key(k: str) -> bool:
        return not only or any(o in k for o in only)
    peers = {fam: load_peer(fam) for fam in binaries}

    print("# mft CNN operators vs PyTorch %s (%s), %d rounds x %d reps" %
          (torch.__version__, ", ".join(sorted(binaries)), args.rounds, args.reps))
    # rows[(fam, key, T)] = list of per-round dicts
    rows: Dict[tuple, List[dict]] = {}
    setups: Dict[tuple, object] = {}
    all_cpus = sorted(os.sched_getaffinity(0))
    for r in range(args.rounds):
        for t in threads:
            torch.set_num_threads(t)
            # 1 thread: both sides on the same core (the C benchmark inherits
            # this process's affinity), another core each round
            pin = [all_cpus[r % len(all_cpus)]] if t == 1 and not args.no_pin else all_cpus
            os.sched_setaffinity(0, pin)
            for fam, binary in binaries.items():
                def c_side():
                    return run_c(binary, t, args.reps)

                def t_side(keys):
                    res = {}
                    for k in keys:
                        if k not in peers[fam] or not wanted_key(k):
                            continue
                        sk = (fam, k)
                        if sk not in setups:
                            setups[sk] = peers[fam][k]()
                        res[k] = time_torch(setups[sk], args.reps)
                    return res
                try:
                    if r % 2 == 0:
                        cres = c_side()
                        tres = t_side(list(cres))
                    else:
                        keys = [k for k in peers[fam]]
                        tres = t_side(keys)
                        cres = c_side()
                except RuntimeError as e:
                    sys.stderr.write("compare_cnn.py: %s\n" % e)
                    return 1
                for k, c in cres.items():
                    if not wanted_key(k):
                        continue
                    d = {"ours": c["seconds"], "ours_frac": frac(c, c["seconds"]),
                         "peak": c["refs"].get("fma_peak_gflops"),
                         "stream": c["refs"].get("stream_copy_gbs"),
                         "kind": "flops" if c.get("flops") else "bytes"}
                    if k in tres:
                        d["torch"] = tres[k]
                        d["torch_frac"] = frac(c, tres[k])
                        d["speedup"] = tres[k] / c["seconds"]
                    rows.setdefault((fam, k, t), []).append(d)

    def med(lst, field):
        v = [d[field] for d in lst if d.get(field) is not None]
        return statistics.median(v) if v else None

    def f(v, fmt):
        return "-" if v is None else fmt % v

    summary = []
    for fam in binaries:
        keys = [k for k in rows if k[0] == fam]
        if not keys:
            continue
        print("\n## %s\n" % fam)
        print("| case | thr | mft ms | torch ms | torch/mft | mft of ref | torch of ref | ref |")
        print("|---|---|---|---|---|---|---|---|")
        for key in keys:
            lst = rows[key]
            kind = lst[0]["kind"]
            ref = ("peak %.0f GFLOP/s" % med(lst, "peak")) if kind == "flops" else \
                ("STREAM %.1f GB/s" % med(lst, "stream"))
            m = {fld: med(lst, fld) for fld in
                 ("ours", "torch", "speedup", "ours_frac", "torch_frac")}
            print("| %s | %d | %s | %s | %s | %s | %s | %s |" % (
                key[1], key[2], f(m["ours"] and m["ours"] * 1e3, "%.3f"),
                f(m["torch"] and m["torch"] * 1e3, "%.3f"), f(m["speedup"], "%.2fx"),
                f(m["ours_frac"], "%.2f"), f(m["torch_frac"], "%.2f"), ref))
            summary.append(dict(bench=fam, key=key[1], threads=key[2], kind=kind, **m))
    if args.json_out:
        with open(args.json_out, "w") as fh:
            json.dump(summary, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
