#!/usr/bin/python3
"""bench/compare_pytorch.py -- mft against PyTorch, side by side in one run.

Run it with Debian's Python, which has PyTorch 1.13 (python3-torch):

    /usr/bin/python3 bench/compare_pytorch.py [--bench build/bench/bench_copy]
        [--threads 1,2] [--rounds 5] [--reps 15] [--size 32x64x112x112] [--json-out FILE]

One run = several rounds. In each round, for every tensor size and thread
count (torch.set_num_threads), every PyTorch entry is timed (round-robin inside
each repetition, one untimed call right before each sample, median of --reps),
and the C benchmark is run once as a subprocess with --json (same reps, sizes
and thread counts). Rounds alternate which side goes first. The table shows,
per entry, the median over rounds of: our time, PyTorch's time, and the ratios
measured within one round -- ours/STREAM and torch/STREAM (STREAM copy
bandwidth of that thread count, from the C run of the same round; 1.00 = as
fast as a plain copy of the same bytes), ours/memcpy, and torch_time/our_time
(> 1: mft is faster).

Extending it: a later benchmark adds a CBench (its binary and reference keys)
to C_BENCHES and Entry objects to ENTRIES; each Entry names the C bench and
the key of its matching case in that bench's JSON, plus a setup function that
builds the PyTorch inputs once and returns the callable to time.

Exit status: 0 ok, 1 the C benchmark failed (or verified a wrong result),
2 usage / PyTorch missing / C benchmark not found.
"""

import argparse
import glob
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

try:
    import torch
except ImportError:
    sys.stderr.write(
        "compare_pytorch.py: PyTorch (torch) is not importable by %s.\n"
        "  Install Debian's PyTorch:  apt-get install -y python3-torch\n"
        "  and run this script with /usr/bin/python3 (the python3 first on PATH may lack it).\n"
        % sys.executable)
    sys.exit(2)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_SIZE = (8, 64, 56, 56)
TARGET_RATIO = 0.70
BUSY_THRESHOLD = 0.25   # as BENCH_BUSY_THRESHOLD in bench_util.h


# --------------------------------------------------------------------------- C benchmarks
@dataclass
class CBench:
    binary: str          # executable name under <build>/bench/
    stream_key: str      # case key of the STREAM reference loop in its JSON
    memcpy_key: str      # case key of the memcpy reference in its JSON


C_BENCHES: Dict[str, CBench] = {
    "copy": CBench("bench_copy", "stream_copy", "memcpy"),
}


# --------------------------------------------------------------------------- PyTorch inputs
def channels_last_format(ndim: int):
    if ndim == 4:
        return torch.channels_last
    if ndim == 5:
        return torch.channels_last_3d
    return None


def make_tensor(kind: str, sizes: Sequence[int]) -> torch.Tensor:
    """Source tensors laid out as in bench_copy.c: nchw, nhwc, padded (last dim
    stored with a larger row pitch), wstep2 (t[..., ::2] of a twice-wider tensor)."""
    sizes = tuple(sizes)
    w = sizes[-1]
    if kind == "nchw":
        t = torch.rand(sizes)
        assert t.is_contiguous()
    elif kind == "nhwc":
        t = torch.rand(sizes).contiguous(memory_format=channels_last_format(len(sizes)))
        assert t.is_contiguous(memory_format=channels_last_format(len(sizes)))
    elif kind == "padded":
        pitch = (w + 16) // 16 * 16
        t = torch.rand(sizes[:-1] + (pitch,))[..., :w]
        assert not t.is_contiguous()
    elif kind == "wstep2":
        t = torch.rand(sizes[:-1] + (2 * w,))[..., ::2]
        assert not t.is_contiguous()
    else:
        raise ValueError(kind)
    assert tuple(t.shape) == sizes
    return t


def make_zeros(fmt: str, sizes: Sequence[int]) -> torch.Tensor:
    mf = torch.contiguous_format if fmt == "nchw" else channels_last_format(len(sizes))
    return torch.empty(tuple(sizes), memory_format=mf).zero_()


def setup_contiguous(src: str, dst: str):
    """x.contiguous(memory_format=...): allocates, converts; the result is dropped
    right away (inside the timing), as mft_contiguous + release in the C bench."""
    def setup(sizes):
        x = make_tensor(src, sizes)
        mf = torch.contiguous_format if dst == "nchw" else channels_last_format(len(sizes))
        y = x.contiguous(memory_format=mf)
        assert torch.equal(x, y) and y.is_contiguous(memory_format=mf)
        return lambda: x.contiguous(memory_format=mf)
    return setup


def setup_copy(src: str, dst: str):
    """torch.empty_like-style preallocated destination, then dst.copy_(src)."""
    def setup(sizes):
        x = make_tensor(src, sizes)
        y = make_zeros(dst, sizes)
        y.copy_(x)
        assert torch.equal(x, y)
        return lambda: y.copy_(x)
    return setup


@dataclass
class Entry:
    key: str                                   # matching case key in the C bench's JSON
    label: str                                 # human label
    setup: Callable[[Sequence[int]], Callable[[], object]]
    bench: str = "copy"                        # which C bench (C_BENCHES)
    target: bool = False                       # under the >= 70%-of-copy requirement
    needs_channels_last: bool = True           # skip for ranks torch has no format for


ENTRIES: List[Entry] = [
    Entry("contig_nchw_to_nhwc", "contiguous NCHW->NHWC", setup_contiguous("nchw", "nhwc"),
          target=True),
    Entry("contig_nhwc_to_nchw", "contiguous NHWC->NCHW", setup_contiguous("nhwc", "nchw"),
          target=True),
    Entry("copy_nchw_to_nhwc", "copy_ NCHW->NHWC (prealloc)", setup_copy("nchw", "nhwc"),
          target=True),
    Entry("copy_nhwc_to_nchw", "copy_ NHWC->NCHW (prealloc)", setup_copy("nhwc", "nchw"),
          target=True),
    Entry("copy_nchw_to_nchw", "copy_ NCHW->NCHW", setup_copy("nchw", "nchw"),
          needs_channels_last=False),
    Entry("copy_nhwc_to_nhwc", "copy_ NHWC->NHWC", setup_copy("nhwc", "nhwc")),
    Entry("copy_padded_to_nchw", "copy_ padded-pitch->NCHW", setup_copy("padded", "nchw"),
          needs_channels_last=False),
    Entry("copy_wstep2_to_nchw", "copy_ [...,::2]->NCHW", setup_copy("wstep2", "nchw"),
          needs_channels_last=False),
]


# --------------------------------------------------------------------------- timing
def time_round_robin(fns: List[Callable[[], object]], reps: int, warmup: int,
                     pre: int) -> List[float]:
    """Median seconds of each fn: warmup calls each, then reps repetitions in
    which every fn is timed once (start rotating), after `pre` untimed calls."""
    n = len(fns)
    samples: List[List[float]] = [[] for _ in fns]
    for fn in fns:
        for _ in range(warmup):
            fn()
    clock = time.perf_counter_ns
    for r in range(reps):
        for k in range(n):
            i = (r + k) % n
            fn = fns[i]
            for _ in range(pre):
                fn()
            t0 = clock()
            fn()
            t1 = clock()
            samples[i].append((t1 - t0) * 1e-9)
    return [statistics.median(s) for s in samples]


def _proc_stat() -> Optional[Tuple[float, float]]:
    """(busy, steal) CPU seconds of the whole machine, from /proc/stat."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    tck = os.sysconf("SC_CLK_TCK") or 100
    return (v[0] + v[1] + v[2] + v[5] + v[6]) / tck, (v[7] if len(v) > 7 else 0) / tck


class LoadMeter:
    """How many cores OTHER processes used while the block ran (as bench_load_*
    in bench_util.h): a 2-thread timing on a 2-core machine is worthless once
    something else runs."""

    def __enter__(self):
        self.wall0, self.cpu0, self.stat0 = time.monotonic(), time.process_time(), _proc_stat()
        return self

    def __exit__(self, *exc):
        wall, cpu, stat = time.monotonic(), time.process_time(), _proc_stat()
        self.other_cores = self.steal_cores = float("nan")
        self.disturbed = False
        if self.stat0 and stat and wall > self.wall0:
            dt = wall - self.wall0
            self.other_cores = max(0.0, (stat[0] - self.stat0[0]) - (cpu - self.cpu0)) / dt
            self.steal_cores = (stat[1] - self.stat0[1]) / dt
            self.disturbed = self.other_cores > BUSY_THRESHOLD or self.steal_cores > BUSY_THRESHOLD
        return False


def dims_str(sizes: Sequence[int]) -> str:
    return "x".join(str(s) for s in sizes)


def parse_dims(s: str) -> Tuple[int, ...]:
    try:
        dims = tuple(int(p) for p in s.replace(",", "x").split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError("bad size %r (want e.g. 32x64x112x112)" % s)
    if not 3 <= len(dims) <= 5 or min(dims) <= 0:
        raise argparse.ArgumentTypeError("size %r: want rank 3-5, positive dims" % s)
    return dims


def parse_threads(s: str) -> List[int]:
    try:
        ts = [int(p) for p in s.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError("bad thread list %r" % s)
    if not ts or min(ts) <= 0:
        raise argparse.ArgumentTypeError("bad thread list %r" % s)
    return ts


def build_config(binary: str) -> Dict[str, str]:
    """CMAKE_BUILD_TYPE / MFT_SANITIZE / MFT_NATIVE of the build tree holding
    <tree>/bench/<binary> ({} when there is no CMakeCache.txt)."""
    cache = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(binary))),
                         "CMakeCache.txt")
    out = {}
    try:
        with open(cache) as f:
            for line in f:
                for var in ("CMAKE_BUILD_TYPE", "MFT_SANITIZE", "MFT_NATIVE"):
                    if line.startswith(var + ":"):
                        out[var] = line.split("=", 1)[1].strip()
    except OSError:
        pass
    return out


def fit_for_timing(binary: str) -> bool:
    """An optimised build without sanitizers (unknown configurations pass)."""
    cfg = build_config(binary)
    if cfg.get("MFT_SANITIZE", "OFF").upper() in ("ON", "1", "TRUE", "YES"):
        return False
    return cfg.get("CMAKE_BUILD_TYPE", "Release") in ("Release", "RelWithDebInfo", "")


def find_binary(name: str, explicit: Optional[str]) -> Optional[str]:
    """--bench PATH; else build/bench/NAME; else the newest build*/bench/NAME
    from an optimised build tree without sanitizers."""
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    first = os.path.join(REPO, "build", "bench", name)
    others = [p for p in glob.glob(os.path.join(REPO, "build*", "bench", name)) if p != first]
    others.sort(key=lambda p: os.path.getmtime(p), reverse=True)
    for p in [first] + others:
        if os.path.isfile(p) and os.access(p, os.X_OK) and fit_for_timing(p):
            return p
    return None


def run_c_bench(path: str, args, extra_sizes) -> dict:
    cmd = [path, "--json", "--reps", str(args.reps), "--warmup", str(args.warmup),
           "--pre", str(args.pre), "--retries", str(args.retries),
           "--threads", ",".join(str(t) for t in args.threads)]
    for s in extra_sizes:
        cmd += ["--size", dims_str(s)]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        sys.stderr.write("compare_pytorch.py: %s exited %d:\n%s" %
                         (" ".join(cmd), proc.returncode, proc.stderr))
        sys.exit(1)
    if proc.stderr.strip():
        sys.stderr.write(proc.stderr)
    return json.loads(proc.stdout)


def c_medians(doc: dict):
    """({(sizes, threads): {case key: median seconds}}, {(sizes, threads): disturbed})
    from a C bench's JSON."""
    meds, dist = {}, {}
    for r in doc["results"]:
        k = (tuple(r["sizes"]), r["threads"])
        meds[k] = {name: v["median_s"] for name, v in r["variants"].items()}
        dist[k] = bool(r.get("disturbed", False))
    return meds, dist


def med(xs: List[float]) -> float:
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else float("nan")


# --------------------------------------------------------------------------- main
def main() -> int:
    ap = argparse.ArgumentParser(
        description="mft vs PyTorch copy / NCHW<->NHWC conversion, side by side",
        epilog="Ratios are medians over rounds of ratios measured within one round.")
    ap.add_argument("--bench", help="path of the bench_copy binary "
                    "(default: build/bench/bench_copy, else the newest build*/bench/bench_copy)")
    ap.add_argument("--threads", type=parse_threads, default=[1, 2],
                    help="thread counts, default 1,2")
    ap.add_argument("--rounds", type=int, default=5, help="rounds (torch block + C run), default 5")
    ap.add_argument("--reps", type=int, default=15, help="timed samples per case, default 15")
    ap.add_argument("--warmup", type=int, default=2, help="untimed calls per case first, default 2")
    ap.add_argument("--pre", type=int, default=1,
                    help="untimed calls before each sample, default 1")
    ap.add_argument("--retries", type=int, default=3,
                    help="re-measure a block up to N times while other processes use > %.2f "
                    "cores (default 3)" % BUSY_THRESHOLD)
    ap.add_argument("--size", type=parse_dims, action="append", default=[],
                    help="extra tensor size (e.g. 32x64x112x112); 8x64x56x56 is always measured")
    ap.add_argument("--json-out", help="write every per-round median and the summary here")
    args = ap.parse_args()
    if args.rounds < 1 or args.reps < 1 or min(args.warmup, args.pre, args.retries) < 0:
        ap.error("--rounds/--reps must be >= 1, --warmup/--pre/--retries >= 0")

    benches_needed = sorted({e.bench for e in ENTRIES})
    binaries = {}
    for b in benches_needed:
        name = C_BENCHES[b].binary
        path = find_binary(name, args.bench if b == "copy" else None)
        if not path:
            sys.stderr.write("compare_pytorch.py: C benchmark %s not found (build it: "
                             "cmake -S . -B build && cmake --build build -j2, "
                             "or pass --bench PATH)\n" % name)
            return 2
        binaries[b] = path
    for path in binaries.values():
        if not fit_for_timing(path):
            sys.stderr.write("compare_pytorch.py: warning: %s is not an optimised build without "
                             "sanitizers (%s); its times mean little\n"
                             % (path, build_config(path)))
    if os.environ.get("OMP_NUM_THREADS"):
        sys.stderr.write("compare_pytorch.py: note: OMP_NUM_THREADS=%s is set; thread counts come "
                         "from --threads\n" % os.environ["OMP_NUM_THREADS"])

    sizes = [DEFAULT_SIZE] + [s for s in args.size]
    extra_sizes = args.size

    # inputs are built once; only the timed calls run inside the rounds
    setups: Dict[Tuple[int, ...], List[Tuple[Entry, Callable]]] = {}
    for s in sizes:
        lst = []
        for e in ENTRIES:
            if e.needs_channels_last and channels_last_format(len(s)) is None:
                continue
            lst.append((e, e.setup(s)))
        setups[s] = lst

    # per round: torch[(size, threads)][key] and ours[bench][(size, threads)][key]
    rounds = []
    for rnd in range(args.rounds):
        torch_first = rnd % 2 == 0
        rec = {"torch": {}, "torch_disturbed": {}, "c": {}, "c_disturbed": {}}

        def torch_block():
            for s in sizes:
                for t in args.threads:
                    torch.set_num_threads(t)
                    ents = setups[s]
                    best = None
                    for attempt in range(args.retries + 1):
                        with LoadMeter() as load:
                            meds = time_round_robin([fn for _, fn in ents], args.reps,
                                                    args.warmup, args.pre)
                        if best is None or load.other_cores < best[1].other_cores:
                            best = (meds, load)
                        if not load.disturbed:
                            break
                        sys.stderr.write("torch %s, %d threads: other processes used %.2f cores; "
                                         "%s\n" % (dims_str(s), t, load.other_cores,
                                                   "measuring again in 1 s"
                                                   if attempt < args.retries else "giving up"))
                        if attempt < args.retries:
                            time.sleep(1.0)
                    meds, load = best
                    rec["torch"][(s, t)] = {e.key: m for (e, _), m in zip(ents, meds)}
                    rec["torch_disturbed"][(s, t)] = load.disturbed

        def c_block():
            for b in benches_needed:
                rec["c"][b], rec["c_disturbed"][b] = c_medians(
                    run_c_bench(binaries[b], args, extra_sizes))

        if torch_first:
            torch_block()
            c_block()
        else:
            c_block()
            torch_block()
        rounds.append(rec)
        sys.stderr.write("round %d/%d done\n" % (rnd + 1, args.rounds))

    # ------------------------------------------------------------------ report
    print("mft vs PyTorch %s -- %s, %d processors, median of %d rounds x %d reps" %
          (torch.__version__, platform.machine(), os.cpu_count() or 0, args.rounds, args.reps))
    print("C bench: %s" % ", ".join(binaries.values()))
    print("GB/s count 2 x tensor bytes per call. Ratios are computed within each round, then "
          "the median over rounds is shown.")
    print("x/STREAM = STREAM-copy time / x time (1.00 = copy speed); "
          "torch_t/ours_t > 1: mft faster.")
    summary = []
    for s in sizes:
        nbytes = 2.0 * 4 * float(math.prod(s))
        for t in args.threads:
            key_st = (s, t)
            cb = C_BENCHES["copy"]
            # rounds in which neither side was disturbed by other processes
            clean = [r for r in rounds if not r["torch_disturbed"][key_st]
                     and not any(d.get(key_st) for d in r["c_disturbed"].values())]
            used = clean or rounds
            ref = [r["c"]["copy"][key_st] for r in used]
            stream_t = med([x[cb.stream_key] for x in ref])
            memcpy_t = med([x[cb.memcpy_key] for x in ref])
            print()
            print("== %s f32 (%.2f MB per tensor), %d thread%s, %d of %d rounds undisturbed%s ==" %
                  (dims_str(s), nbytes / 2e6, t, "" if t == 1 else "s", len(clean), len(rounds),
                   "" if clean else " -- ALL DISTURBED, numbers unreliable"))
            print("   memcpy %.4f ms (%.1f GB/s)   STREAM copy %.4f ms (%.1f GB/s)   "
                  "memcpy/STREAM %.2f" %
                  (memcpy_t * 1e3, nbytes / memcpy_t * 1e-9, stream_t * 1e3,
                   nbytes / stream_t * 1e-9,
                   med([x[cb.stream_key] / x[cb.memcpy_key] for x in ref])))
            hdr = ("%-28s %9s %7s %9s %7s %9s %11s %9s %9s %9s  %s" %
                   ("case", "ours ms", "GB/s", "torch ms", "GB/s", "ours/STRM", "(range)",
                    "torch/STR", "ours/mcpy", "torch_t/", "target"))
            print(hdr)
            print("%-28s %9s %7s %9s %7s %9s %11s %9s %9s %9s" %
                  ("", "", "", "", "", "", "", "", "", "ours_t"))
            for e, _ in setups[s]:
                cbe = C_BENCHES[e.bench]
                ours = [r["c"][e.bench][key_st].get(e.key) for r in used]
                if any(o is None for o in ours):
                    print("%-28s (no C case %r)" % (e.label, e.key))
                    continue
                tor = [r["torch"][key_st][e.key] for r in used]
                refs = [r["c"][e.bench][key_st] for r in used]
                o_stream = [x[cbe.stream_key] / o for x, o in zip(refs, ours)]
                t_stream = [x[cbe.stream_key] / tt for x, tt in zip(refs, tor)]
                o_memcpy = [x[cbe.memcpy_key] / o for x, o in zip(refs, ours)]
                speedup = [tt / o for tt, o in zip(tor, ours)]
                ot, tt = med(ours), med(tor)
                ros, rts = med(o_stream), med(t_stream)
                mark = ""
                if e.target:
                    mark = "ok" if ros >= TARGET_RATIO else "BELOW %.2f" % TARGET_RATIO
                print("%-28s %9.4f %7.1f %9.4f %7.1f %9.3f %11s %9.3f %9.3f %9.2f  %s" %
                      (e.label, ot * 1e3, nbytes / ot * 1e-9, tt * 1e3, nbytes / tt * 1e-9,
                       ros, "%.2f-%.2f" % (min(o_stream), max(o_stream)), rts, med(o_memcpy),
                       med(speedup), mark))
                summary.append({
                    "sizes": list(s), "threads": t, "key": e.key, "label": e.label,
                    "rounds_used": len(used), "rounds_undisturbed": len(clean),
                    "target": e.target, "ours_s": ot, "torch_s": tt,
                    "stream_s": stream_t, "memcpy_s": memcpy_t,
                    "ours_over_stream": ros,
                    "ours_over_stream_range": [min(o_stream), max(o_stream)],
                    "torch_over_stream": rts, "ours_over_memcpy": med(o_memcpy),
                    "torch_time_over_ours": med(speedup)})

    targets = [x for x in summary if x["target"]]
    if targets:
        worst = min(targets, key=lambda x: x["ours_over_stream"])
        print()
        print("NCHW<->NHWC conversions, ours/STREAM: lowest %.3f (%s, %d thread%s); torch/STREAM "
              "%.3f-%.3f; target >= %.2f: %s" %
              (worst["ours_over_stream"], worst["key"], worst["threads"],
               "" if worst["threads"] == 1 else "s",
               min(x["torch_over_stream"] for x in targets),
               max(x["torch_over_stream"] for x in targets), TARGET_RATIO,
               "MET" if worst["ours_over_stream"] >= TARGET_RATIO else "NOT MET"))

    if args.json_out:
        def keystr(k):
            return "%s/t%d" % (dims_str(k[0]), k[1])
        doc = {
            "torch_version": torch.__version__, "rounds": args.rounds, "reps": args.reps,
            "threads": args.threads, "sizes": [list(s) for s in sizes],
            "binaries": binaries, "summary": summary,
            "per_round": [{"torch": {keystr(k): v for k, v in r["torch"].items()},
                           "torch_disturbed": {keystr(k): v
                                               for k, v in r["torch_disturbed"].items()},
                           "c": {b: {keystr(k): v for k, v in d.items()}
                                 for b, d in r["c"].items()},
                           "c_disturbed": {b: {keystr(k): v for k, v in d.items()}
                                           for b, d in r["c_disturbed"].items()}}
                          for r in rounds],
        }
        with open(args.json_out, "w") as f:
            json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
