#!/usr/bin/python3
"""bench/compare_pytorch.py -- mft against PyTorch, side by side in one run.

Run it with Debian's Python, which has PyTorch 1.13 (python3-torch):

    /usr/bin/python3 bench/compare_pytorch.py
        [--bench build/bench/bench_copy] [--bench build/bench/bench_elementwise]
        [--benches copy,elementwise] [--threads 1,2] [--rounds 5] [--reps 15]
        [--calls 10000] [--size 32x64x112x112] [--json-out FILE]

Two C benchmarks are known (C_BENCHES): bench_copy (copy and NCHW<->NHWC
conversion) and bench_elementwise (relu, x*2.5, x+y, x+bias, in-place/_out
variants, non-dense operands, sums, and the per-call time on a 1x4x4x4
tensor). --bench may be given once per binary (its file name says which
bench it is); without --bench/--benches every known bench found under
build*/bench/ is run.

One run = several rounds. In each round, for every tensor size and thread
count (torch.set_num_threads), every PyTorch entry is timed (round-robin inside
each repetition, one untimed call right before each sample, median of --reps),
and each C benchmark is run once as a subprocess with --json (same reps, sizes
and thread counts). Rounds alternate which side goes first. The tables show,
per entry, the median over rounds of: our time, PyTorch's time, and the ratios
measured within one round -- ours/ref and torch/ref (bandwidth relative to the
entry's STREAM reference loop at that thread count, from the C run of the same
round: STREAM copy for copy-like work, STREAM add for x+y, STREAM read for
sums; 1.00 = as fast as the plain loop moving the same bytes), ours/memcpy
(copy bench), and torch_time/our_time (> 1: mft is faster). Per-call entries
(1x4x4x4) time --calls calls per sample on both sides (PyTorch from a Python
loop) and report the median time per call.

The CNN operator benches (bench_conv, bench_pool, bench_norm, bench_resize,
bench_gemm: GFLOP/s against the FMA peak, GB/s against STREAM) run through
bench/compare_cnn.py with the same --threads/--rounds/--reps: name them with
--bench PATH or --benches conv,pool,...; without --bench/--benches every
built bench of both kinds runs.

Extending it: a later benchmark adds a CBench (its binary and reference keys)
to C_BENCHES and Entry objects to ENTRIES; each Entry names the C bench and
the key of its matching case in that bench's JSON, plus a setup function that
builds the PyTorch inputs once and returns the callable to time (optional
fields: the reference case and bytes moved, a related case to divide by, a
fixed size and per-call timing).

Exit status: 0 ok, 1 a C benchmark failed (or verified a wrong result),
2 usage / PyTorch missing / C benchmark not found.
"""

import argparse
import glob
import json
import math
import os
import platform
import random
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
# bench_elementwise targets (as in bench_elementwise.c)
EW_TARGET_RATIO = 0.90  # relu / x*2.5 / x+y / x+bias >= 90% of STREAM copy|add
EW_TORCH_NOISE = 0.03   # ... and no slower than PyTorch beyond this noise
EW_NONDENSE_MAX = 2.0   # a non-dense operand costs <= 2 x the dense time
EW_CALL_MAX_S = 0.5e-6  # per call on the tiny tensor
TINY_SIZE = (1, 4, 4, 4)
DEFAULT_CALLS = 10000


# --------------------------------------------------------------------------- C benchmarks
@dataclass
class CBench:
    binary: str          # executable name under <build>/bench/
    stream_key: str      # case key of the STREAM (copy) reference loop in its JSON
    memcpy_key: str      # case key of the memcpy reference in its JSON
    # bytes each reference case moves per call, in tensor sizes (copy: read + write)
    ref_traffic: Optional[Dict[str, float]] = None
    per_call: bool = False   # takes --calls/--tiny and has a per-call block
    shuffle: bool = False    # its driver shuffles the case order every repetition
                             # (bench_util.h bench_opts.shuffle); the PyTorch side
                             # then does the same, else it rotates


C_BENCHES: Dict[str, CBench] = {
    "copy": CBench("bench_copy", "stream_copy", "memcpy"),
    "elementwise": CBench("bench_elementwise", "stream_copy", "memcpy",
                          {"memcpy": 2.0, "stream_copy": 2.0, "stream_add": 3.0,
                           "stream_sum": 1.0}, per_call=True, shuffle=True),
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
    setup: Callable[..., Callable[[], object]]
    bench: str = "copy"                        # which C bench (C_BENCHES)
    target: bool = False                       # copy: >= 70% of STREAM; elementwise: >= 90%
                                               # of its reference and not slower than torch
    needs_channels_last: bool = True           # skip for ranks torch has no format for
    ref: Optional[str] = None                  # reference case key (None: the bench's
                                               # stream_key)
    traffic: float = 2.0                       # bytes per call, in tensor sizes
    rel: Optional[str] = None                  # key of the entry this one is divided by
    rel_max: Optional[float] = None            # target: time / rel's time <= rel_max
    sizes: Optional[Tuple[int, ...]] = None    # fixed size (default: every --size)
    per_call: bool = False                     # setup(sizes, calls); the callable makes
                                               # `calls` calls, times are per call


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


# --------------------------------------------------------------------------- elementwise
# PyTorch counterparts of bench_elementwise.c's cases. Inputs are normal random
# numbers (half negative, as in the C bench); "nhwc" tensors are made with
# .contiguous(memory_format=torch.channels_last); non-dense inputs are built as
# in the C bench: wstep2 = base[..., ::2] of a base twice as wide, padded =
# base[..., :W] of a base whose last dim is round_up(W + 1, 16), the base in
# the entry's format. Every setup checks that PyTorch's result has the layout
# the C bench requires of mft's (packed in x's format).

def memory_format(fmt: str, ndim: int):
    return torch.contiguous_format if fmt == "nchw" else channels_last_format(ndim)


def ew_input(src: str, fmt: str, sizes: Sequence[int]) -> torch.Tensor:
    sizes = tuple(sizes)
    mf = memory_format(fmt, len(sizes))
    w = sizes[-1]
    if src == "dense":
        t = torch.randn(sizes).contiguous(memory_format=mf)
        assert t.is_contiguous(memory_format=mf)
    elif src == "wstep2":
        t = torch.randn(sizes[:-1] + (2 * w,)).contiguous(memory_format=mf)[..., ::2]
    elif src == "padded":
        pitch = (w + 16) // 16 * 16
        t = torch.randn(sizes[:-1] + (pitch,)).contiguous(memory_format=mf)[..., :w]
    else:
        raise ValueError(src)
    assert tuple(t.shape) == sizes
    assert (src == "dense") == t.is_contiguous(memory_format=mf)
    return t


def _check_layout(y: torch.Tensor, fmt: str, what: str):
    mf = memory_format(fmt, y.dim())
    if not y.is_contiguous(memory_format=mf):
        sys.stderr.write("compare_pytorch.py: note: PyTorch's %s is not packed %s (strides %s)\n"
                         % (what, fmt, tuple(y.stride())))


def _mul_scalar(x):
    return x * 2.5


def setup_ew_unary(op: str, fmt: str, src: str = "dense"):
    """torch.relu(x) / x * 2.5: allocates the result, dropped right away."""
    fn = {"relu": torch.relu, "mul_scalar": _mul_scalar}[op]

    def setup(sizes):
        x = ew_input(src, fmt, sizes)
        y = fn(x)
        ref = x.clamp(min=0) if op == "relu" else x.double().mul(2.5).float()
        assert torch.equal(y, ref)
        _check_layout(y, fmt, "%s(%s %s)" % (op, src, fmt))
        return lambda: fn(x)
    return setup


def setup_ew_add(fmt: str, src: str = "dense"):
    """x + y, y dense in x's format."""
    def setup(sizes):
        x, y = ew_input(src, fmt, sizes), ew_input("dense", fmt, sizes)
        _check_layout(x + y, fmt, "add(%s %s, dense)" % (src, fmt))
        return lambda: x + y
    return setup


def setup_ew_bias(fmt: str):
    """x + bias, bias of sizes (1,C,1,1) made in x's memory format."""
    def setup(sizes):
        x = ew_input("dense", fmt, sizes)
        bsz = tuple(s if i == 1 else 1 for i, s in enumerate(sizes))
        b = torch.randn(bsz).contiguous(memory_format=memory_format(fmt, len(sizes)))
        _check_layout(x + b, fmt, "x + bias (%s)" % fmt)
        return lambda: x + b
    return setup


def setup_ew_inplace(op: str, fmt: str):
    """torch.relu_(x) / x.add_(y) on a private copy of x (no allocation)."""
    def setup(sizes):
        x, y = ew_input("dense", fmt, sizes), ew_input("dense", fmt, sizes)
        if op == "relu":
            return lambda: torch.relu_(x)
        return lambda: x.add_(y)
    return setup


def setup_ew_out(op: str, fmt: str):
    """Into a preallocated tensor of x's format: torch.add(x, y, out=o); for relu
    (which has no out= in PyTorch 1.13) torch.clamp_min(x, 0.0, out=o)."""
    def setup(sizes):
        x, y = ew_input("dense", fmt, sizes), ew_input("dense", fmt, sizes)
        o = torch.empty_like(x)
        if op == "relu":
            torch.clamp_min(x, 0.0, out=o)
            assert torch.equal(o, torch.relu(x))
            return lambda: torch.clamp_min(x, 0.0, out=o)
        return lambda: torch.add(x, y, out=o)
    return setup


def setup_ew_sum(fmt: str, per_channel: bool):
    """torch.sum(x) / x.sum(dim=(all but C), keepdim=True)."""
    def setup(sizes):
        x = ew_input("dense", fmt, sizes)
        if not per_channel:
            return lambda: torch.sum(x)
        dims = tuple(d for d in range(len(sizes)) if d != 1)
        return lambda: x.sum(dim=dims, keepdim=True)
    return setup


def setup_call(op: str, fmt: str):
    """`calls` calls from a Python loop, as a user's code makes them."""
    def setup(sizes, calls):
        x, y = ew_input("dense", fmt, sizes), ew_input("dense", fmt, sizes)
        o = torch.empty_like(x)
        rng = range(calls)
        relu, relu_, add = torch.relu, torch.relu_, torch.add

        def run_relu():
            for _ in rng:
                relu(x)

        def run_add():
            for _ in rng:
                x + y

        def run_mul_scalar():
            for _ in rng:
                x * 2.5

        def run_relu_inplace():
            for _ in rng:
                relu_(x)

        def run_add_out():
            for _ in rng:
                add(x, y, out=o)
        return {"relu": run_relu, "add": run_add, "mul_scalar": run_mul_scalar,
                "relu_inplace": run_relu_inplace, "add_out": run_add_out}[op]
    return setup


def _ew_entries() -> List[Entry]:
    E = []

    def add(*a, **k):
        E.append(Entry(*a, bench="elementwise", **k))
    for fmt in ("nchw", "nhwc"):
        F = fmt.upper()
        cl = fmt == "nhwc"
        add("relu_%s" % fmt, "relu %s" % F, setup_ew_unary("relu", fmt), target=True,
            needs_channels_last=cl)
        add("mul_scalar_%s" % fmt, "x * 2.5 %s" % F, setup_ew_unary("mul_scalar", fmt),
            target=True, needs_channels_last=cl)
        add("add_%s" % fmt, "x + y %s" % F, setup_ew_add(fmt), target=True,
            needs_channels_last=cl, ref="stream_add", traffic=3.0)
        add("bias_%s" % fmt, "x + bias(1,C,1,1) %s" % F, setup_ew_bias(fmt), target=True,
            needs_channels_last=cl)
    for fmt in ("nchw", "nhwc"):
        F = fmt.upper()
        cl = fmt == "nhwc"
        add("relu_inplace_%s" % fmt, "relu_ (in place) %s" % F, setup_ew_inplace("relu", fmt),
            needs_channels_last=cl, rel="relu_%s" % fmt)
        add("relu_out_%s" % fmt, "relu out= %s [clamp_min]" % F, setup_ew_out("relu", fmt),
            needs_channels_last=cl, rel="relu_%s" % fmt)
        add("add_inplace_%s" % fmt, "x.add_(y) %s" % F, setup_ew_inplace("add", fmt),
            needs_channels_last=cl, ref="stream_add", traffic=3.0, rel="add_%s" % fmt)
        add("add_out_%s" % fmt, "add out= %s" % F, setup_ew_out("add", fmt),
            needs_channels_last=cl, ref="stream_add", traffic=3.0, rel="add_%s" % fmt)
    for fmt in ("nchw", "nhwc"):
        F = fmt.upper()
        cl = fmt == "nhwc"
        for src, what in (("wstep2", "x[...,::2]"), ("padded", "padded x")):
            add("relu_%s_%s" % (src, fmt), "relu %s %s" % (what, F),
                setup_ew_unary("relu", fmt, src), needs_channels_last=cl,
                rel="relu_%s" % fmt, rel_max=EW_NONDENSE_MAX)
            add("add_%s_%s" % (src, fmt), "%s + y %s" % (what, F), setup_ew_add(fmt, src),
                needs_channels_last=cl, ref="stream_add", traffic=3.0,
                rel="add_%s" % fmt, rel_max=EW_NONDENSE_MAX)
    for fmt in ("nchw", "nhwc"):
        F = fmt.upper()
        cl = fmt == "nhwc"
        add("sum_all_%s" % fmt, "sum() %s" % F, setup_ew_sum(fmt, False),
            needs_channels_last=cl, ref="stream_sum", traffic=1.0)
        add("sum_nhw_%s" % fmt, "sum(N,H,W keepdim) %s" % F, setup_ew_sum(fmt, True),
            needs_channels_last=cl, ref="stream_sum", traffic=1.0)
    for key, op, fmt, tgt, rel in (
            ("call_relu_nchw", "relu", "nchw", True, None),
            ("call_relu_nhwc", "relu", "nhwc", True, None),
            ("call_add_nchw", "add", "nchw", True, None),
            ("call_add_nhwc", "add", "nhwc", True, None),
            ("call_mul_scalar_nchw", "mul_scalar", "nchw", False, None),
            ("call_relu_inplace_nchw", "relu_inplace", "nchw", False, "call_relu_nchw"),
            ("call_add_out_nchw", "add_out", "nchw", False, "call_add_nchw")):
        label = {"relu": "relu", "add": "x + y", "mul_scalar": "x * 2.5",
                 "relu_inplace": "relu_", "add_out": "add out="}[op] + " " + fmt.upper()
        add(key, label, setup_call(op, fmt), target=tgt, needs_channels_last=fmt == "nhwc",
            rel=rel, sizes=TINY_SIZE, per_call=True)
    return E


ENTRIES += _ew_entries()


# --------------------------------------------------------------------------- timing
def time_round_robin(fns: List[Callable[[], object]], reps: int, warmup: int,
                     pre: int, div: Optional[List[int]] = None,
                     shuffle: bool = False) -> List[float]:
    """Median seconds of each fn: warmup calls each, then reps repetitions in
    which every fn is timed once (start rotating, or in a fresh seeded random
    order if shuffle), after `pre` untimed calls. div[i]: fn i makes that many
    calls of the operation; its samples are divided by it (per-call time)."""
    n = len(fns)
    div = div or [1] * n
    rng = random.Random(20240611)
    samples: List[List[float]] = [[] for _ in fns]
    for fn in fns:
        for _ in range(warmup):
            fn()
    clock = time.perf_counter_ns
    for r in range(reps):
        order = [(r + k) % n for k in range(n)]
        if shuffle:
            rng.shuffle(order)
        for i in order:
            fn = fns[i]
            for _ in range(pre):
                fn()
            t0 = clock()
            fn()
            t1 = clock()
            samples[i].append((t1 - t0) * 1e-9 / div[i])
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


def run_c_bench(path: str, cb: CBench, args, extra_sizes) -> dict:
    cmd = [path, "--json", "--reps", str(args.reps), "--warmup", str(args.warmup),
           "--pre", str(args.pre), "--retries", str(args.retries),
           "--threads", ",".join(str(t) for t in args.threads)]
    for s in extra_sizes:
        cmd += ["--size", dims_str(s)]
    if cb.per_call:
        cmd += ["--calls", str(args.calls), "--tiny", dims_str(args.tiny)]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        sys.stderr.write("compare_pytorch.py: %s exited %d:\n%s" %
                         (" ".join(cmd), proc.returncode, proc.stderr))
        sys.exit(1)
    if proc.stderr.strip():
        sys.stderr.write(proc.stderr)
    return json.loads(proc.stdout)


def c_medians(doc: dict):
    """({(block, sizes, threads): {case key: median seconds}},
    {(block, sizes, threads): disturbed}) from a C bench's JSON (block
    "bandwidth", or "call" for per-call results)."""
    meds, dist = {}, {}
    for r in doc["results"]:
        k = (r.get("block", "bandwidth"), tuple(r["sizes"]), r["threads"])
        meds[k] = {name: v["median_s"] for name, v in r["variants"].items()}
        dist[k] = bool(r.get("disturbed", False))
    return meds, dist


def med(xs: List[float]) -> float:
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else float("nan")


def block_of(e: Entry) -> str:
    return "call" if e.per_call else "bandwidth"


def clean_rounds(rounds, bench: str, k):
    """(rounds in which neither PyTorch nor this C bench was disturbed at block
    key k, or every round when none was clean; the clean count)."""
    clean = [r for r in rounds if not r["torch_disturbed"][bench][k]
             and not r["c_disturbed"][bench].get(k)]
    return clean or rounds, len(clean)


# --------------------------------------------------------------------------- reports
def report_copy(rounds, blocks, args, summary):
    """bench_copy's table (unchanged since the copy bench came first)."""
    print()
    print("GB/s count 2 x tensor bytes per call. Ratios are computed within each round, then "
          "the median over rounds is shown.")
    print("x/STREAM = STREAM-copy time / x time (1.00 = copy speed); "
          "torch_t/ours_t > 1: mft faster.")
    cb = C_BENCHES["copy"]
    for bench, blk, s, ents in blocks:
        if bench != "copy":
            continue
        nbytes = 2.0 * 4 * float(math.prod(s))
        for t in args.threads:
            key_st = (blk, s, t)
            used, nclean = clean_rounds(rounds, "copy", key_st)
            ref = [r["c"]["copy"][key_st] for r in used]
            stream_t = med([x[cb.stream_key] for x in ref])
            memcpy_t = med([x[cb.memcpy_key] for x in ref])
            print()
            print("== %s f32 (%.2f MB per tensor), %d thread%s, %d of %d rounds undisturbed%s ==" %
                  (dims_str(s), nbytes / 2e6, t, "" if t == 1 else "s", nclean, len(rounds),
                   "" if nclean else " -- ALL DISTURBED, numbers unreliable"))
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
            for e, _ in ents:
                ours = [r["c"][e.bench][key_st].get(e.key) for r in used]
                if any(o is None for o in ours):
                    print("%-28s (no C case %r)" % (e.label, e.key))
                    continue
                tor = [r["torch"]["copy"][key_st][e.key] for r in used]
                refs = [r["c"][e.bench][key_st] for r in used]
                o_stream = [x[cb.stream_key] / o for x, o in zip(refs, ours)]
                t_stream = [x[cb.stream_key] / tt for x, tt in zip(refs, tor)]
                o_memcpy = [x[cb.memcpy_key] / o for x, o in zip(refs, ours)]
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
                    "bench": "copy", "block": blk,
                    "sizes": list(s), "threads": t, "key": e.key, "label": e.label,
                    "rounds_used": len(used), "rounds_undisturbed": nclean,
                    "target": e.target, "ours_s": ot, "torch_s": tt,
                    "stream_s": stream_t, "memcpy_s": memcpy_t,
                    "ours_over_stream": ros,
                    "ours_over_stream_range": [min(o_stream), max(o_stream)],
                    "torch_over_stream": rts, "ours_over_memcpy": med(o_memcpy),
                    "torch_time_over_ours": med(speedup)})

    targets = [x for x in summary if x["target"] and x["bench"] == "copy"]
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


def _ratio_str(x: float, fmt: str = "%.2f") -> str:
    return "" if x is None or math.isnan(x) else fmt % x


def report_elementwise(rounds, blocks, args, summary):
    """bench_elementwise's tables: bandwidth blocks, then per-call blocks."""
    b = "elementwise"
    cb = C_BENCHES[b]
    print()
    print("elementwise: GB/s count the bytes an optimal kernel moves (T column, in tensor "
          "sizes: copy-like 2, x+y 3, sums 1; non-dense as their dense twin).")
    print("ours/ref, torch/ref = case GB/s / its STREAM reference's GB/s (ref column) in the "
          "same round; torch_t/ours_t > 1: mft faster;")
    print("xrel = time / time of the related case (non-dense: its dense twin, target <= %.1f; "
          "in-place/out=: the allocating op)." % EW_NONDENSE_MAX)
    mine = []
    for bench, blk, s, ents in blocks:
        if bench != b:
            continue
        tbytes = 4.0 * float(math.prod(s))
        for t in args.threads:
            key_st = (blk, s, t)
            used, nclean = clean_rounds(rounds, b, key_st)
            cres = [r["c"][b][key_st] for r in used]
            tres = [r["torch"][b][key_st] for r in used]
            print()
            if blk == "call":
                print("== elementwise per call: %s f32, %d thread%s, %d calls per sample (PyTorch "
                      "from a Python loop), %d of %d rounds undisturbed%s ==" %
                      (dims_str(s), t, "" if t == 1 else "s", args.calls, nclean, len(rounds),
                       "" if nclean else " -- ALL DISTURBED, numbers unreliable"))
                if all("noop" in x for x in cres):
                    print("   the C driver's own cost per call (noop): %.1f ns" %
                          (med([x["noop"] for x in cres]) * 1e9))
                print("%-24s %9s %9s %9s %7s %7s  %s" % ("case", "ours ns", "torch ns",
                                                        "torch_t/", "ours", "torch", "target"))
                print("%-24s %9s %9s %9s %7s %7s" % ("", "per call", "per call", "ours_t",
                                                    "xrel", "xrel"))
            else:
                refs_line = []
                for rk in ("stream_copy", "stream_add", "stream_sum", "memcpy"):
                    rt = med([x.get(rk) for x in cres])
                    refs_line.append("%s %.4f ms (%.1f GB/s)" %
                                     (rk.replace("_", " ").replace("stream", "STREAM"), rt * 1e3,
                                      cb.ref_traffic[rk] * tbytes / rt * 1e-9))
                print("== elementwise: %s f32 (%.2f MB per tensor), %d thread%s, %d of %d rounds "
                      "undisturbed%s ==" %
                      (dims_str(s), tbytes * 1e-6, t, "" if t == 1 else "s", nclean, len(rounds),
                       "" if nclean else " -- ALL DISTURBED, numbers unreliable"))
                print("   " + "   ".join(refs_line))
                print("%-28s %8s %6s %8s %6s %3s %-11s %8s %9s %9s %8s %6s %6s  %s" %
                      ("case", "ours ms", "GB/s", "torch ms", "GB/s", "T", "ref", "ours/ref",
                       "(range)", "torch/ref", "torch_t/", "ours", "torch", "target"))
                print("%-28s %8s %6s %8s %6s %3s %-11s %8s %9s %9s %8s %6s %6s" %
                      ("", "", "", "", "", "", "", "", "", "", "ours_t", "xrel", "xrel"))
            for e, _ in ents:
                ours = [x.get(e.key) for x in cres]
                if any(o is None for o in ours):
                    print("%-28s (no C case %r)" % (e.label, e.key))
                    continue
                tor = [x[e.key] for x in tres]
                ot, tt = med(ours), med(tor)
                speedup = med([a / o for a, o in zip(tor, ours)])
                o_rel = t_rel = float("nan")
                if e.rel:
                    o_rel = med([x[e.key] / x[e.rel] for x in cres if e.rel in x])
                    t_rel = med([x[e.key] / x[e.rel] for x in tres if e.rel in x])
                row = {"bench": b, "block": blk, "sizes": list(s), "threads": t, "key": e.key,
                       "label": e.label, "rounds_used": len(used), "rounds_undisturbed": nclean,
                       "target": e.target, "ours_s": ot, "torch_s": tt,
                       "torch_time_over_ours": speedup, "rel": e.rel,
                       "ours_over_rel": o_rel, "torch_over_rel": t_rel}
                marks = []
                if blk == "call":
                    if e.target:
                        row["target_call_s"] = EW_CALL_MAX_S
                        row["met_call"] = ot <= EW_CALL_MAX_S
                        marks.append("ok (<=%.0f ns)" % (EW_CALL_MAX_S * 1e9) if row["met_call"]
                                     else "ABOVE %.0f ns" % (EW_CALL_MAX_S * 1e9))
                    print("%-24s %9.1f %9.1f %9.2f %7s %7s  %s" %
                          (e.label, ot * 1e9, tt * 1e9, speedup, _ratio_str(o_rel),
                           _ratio_str(t_rel), "; ".join(marks)))
                else:
                    rk = e.ref or cb.stream_key
                    scale = e.traffic / cb.ref_traffic[rk]
                    o_ref = [scale * x[rk] / o for x, o in zip(cres, ours)]
                    t_ref = [scale * x[rk] / a for x, a in zip(cres, tor)]
                    ror, rtr = med(o_ref), med(t_ref)
                    row.update({"ref": rk, "ours_over_ref": ror,
                                "ours_over_ref_range": [min(o_ref), max(o_ref)],
                                "torch_over_ref": rtr})
                    if e.target:
                        row["met_ref"] = ror >= EW_TARGET_RATIO
                        row["met_torch"] = speedup >= 1.0 - EW_TORCH_NOISE
                        marks.append("ok" if row["met_ref"] else "BELOW %.2f" % EW_TARGET_RATIO)
                        marks.append("~torch" if row["met_torch"] else "SLOWER than torch")
                    if e.rel_max is not None:
                        row["met_rel"] = o_rel <= e.rel_max
                        marks.append("ok (<=%.1fx)" % e.rel_max if row["met_rel"]
                                     else "ABOVE %.1fx" % e.rel_max)
                    print("%-28s %8.4f %6.1f %8.4f %6.1f %3.0f %-11s %8.3f %9s %9.3f %8.2f %6s "
                          "%6s  %s" %
                          (e.label, ot * 1e3, e.traffic * tbytes / ot * 1e-9, tt * 1e3,
                           e.traffic * tbytes / tt * 1e-9, e.traffic, rk, ror,
                           "%.2f-%.2f" % (min(o_ref), max(o_ref)), rtr, speedup,
                           _ratio_str(o_rel), _ratio_str(t_rel), "; ".join(marks)))
                summary.append(row)
                mine.append((e, row))

    def verdict(rows, met, value, worst_is_min, target, label, unit="", fmt="%.3f"):
        if not rows:
            return
        w = (min if worst_is_min else max)(rows, key=value)
        ok = all(r[met] for r in rows)
        print("%s: %s %s%s (%s, %d thread%s); target %s: %s" %
              (label, "lowest" if worst_is_min else "highest", fmt % value(w), unit, w["key"],
               w["threads"], "" if w["threads"] == 1 else "s", target,
               "MET" if ok else "NOT MET"))
    tgt = [r for e, r in mine if e.target and r["block"] == "bandwidth"]
    print()
    verdict(tgt, "met_ref", lambda r: r["ours_over_ref"], True, ">= %.2f" % EW_TARGET_RATIO,
            "elementwise relu / x*2.5 / x+y / x+bias, ours vs STREAM copy|add")
    verdict(tgt, "met_torch", lambda r: r["torch_time_over_ours"], True,
            ">= %.2f (no slower than PyTorch within %.0f%%)" %
            (1.0 - EW_TORCH_NOISE, EW_TORCH_NOISE * 100),
            "elementwise relu / x*2.5 / x+y / x+bias, torch_t/ours_t")
    verdict([r for e, r in mine if e.rel_max is not None], "met_rel",
            lambda r: r["ours_over_rel"], False, "<= %.1f" % EW_NONDENSE_MAX,
            "elementwise non-dense operand, time / dense time", unit="x", fmt="%.2f")
    verdict([r for e, r in mine if e.target and r["block"] == "call"], "met_call",
            lambda r: r["ours_s"] * 1e9, False, "<= %.0f ns" % (EW_CALL_MAX_S * 1e9),
            "elementwise per call on %s (relu, x+y)" % dims_str(args.tiny), unit=" ns",
            fmt="%.1f")
    calls = [r for e, r in mine if r["block"] == "call" and e.target]
    if calls:
        print("   PyTorch from Python on the same calls: %.0f-%.0f ns per call" %
              (min(r["torch_s"] for r in calls) * 1e9, max(r["torch_s"] for r in calls) * 1e9))


REPORTS = {"copy": report_copy, "elementwise": report_elementwise}


def parse_benches(s: str) -> List[str]:
    names = [p for p in s.split(",") if p]
    bad = [n for n in names if n not in C_BENCHES]
    if bad or not names:
        raise argparse.ArgumentTypeError("unknown bench %r (known: %s)" %
                                         (",".join(bad) or s, ",".join(C_BENCHES)))
    return names


def bench_of_path(path: str) -> Optional[str]:
    base = os.path.basename(path)
    for name, cb in C_BENCHES.items():
        if base == cb.binary or base.startswith(cb.binary + "."):
            return name
    return None


# --------------------------------------------------------------------------- main
def main_copy_elementwise(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(
        description="mft vs PyTorch side by side: copy / NCHW<->NHWC conversion "
                    "(bench_copy) and elementwise ops (bench_elementwise)",
        epilog="Ratios are medians over rounds of ratios measured within one round.")
    ap.add_argument("--bench", action="append", default=[], metavar="PATH",
                    help="a C bench binary; repeat for several. Its file name (bench_copy, "
                    "bench_elementwise) says which bench it is. Default for each bench: "
                    "build/bench/NAME, else the newest build*/bench/NAME")
    ap.add_argument("--benches", type=parse_benches,
                    help="benches to run, e.g. copy,elementwise (default: those given with "
                    "--bench, else every known bench that is built)")
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
    ap.add_argument("--calls", type=int, default=DEFAULT_CALLS,
                    help="calls per sample of the per-call entries, default %d" % DEFAULT_CALLS)
    ap.add_argument("--tiny", type=parse_dims, default=TINY_SIZE,
                    help="tensor size of the per-call entries, default %s" % dims_str(TINY_SIZE))
    ap.add_argument("--json-out", help="write every per-round median and the summary here")
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.reps < 1 or args.calls < 1 or \
            min(args.warmup, args.pre, args.retries) < 0:
        ap.error("--rounds/--reps/--calls must be >= 1, --warmup/--pre/--retries >= 0")

    explicit: Dict[str, str] = {}
    for p in args.bench:
        b = bench_of_path(p)
        if b is None and len(args.bench) == 1 and not args.benches:
            b = "copy"      # one --bench of any name: the copy bench, as before
        if b is None:
            ap.error("--bench %s: file name is none of %s" %
                     (p, ", ".join(cb.binary for cb in C_BENCHES.values())))
        explicit[b] = p
    wanted = args.benches or sorted(explicit, key=list(C_BENCHES).index) or list(C_BENCHES)
    must = bool(args.benches or explicit)
    binaries: Dict[str, str] = {}
    for b in wanted:
        name = C_BENCHES[b].binary
        path = find_binary(name, explicit.get(b))
        if not path:
            msg = ("C benchmark %s not found (build it: cmake -S . -B build && cmake --build "
                   "build -j2, or pass --bench PATH)" % name)
            if must:
                sys.stderr.write("compare_pytorch.py: %s\n" % msg)
                return 2
            sys.stderr.write("compare_pytorch.py: note: %s; skipping it\n" % msg)
            continue
        binaries[b] = path
    if not binaries:
        sys.stderr.write("compare_pytorch.py: no C benchmark found (build one: cmake -S . -B "
                         "build && cmake --build build -j2, or pass --bench PATH)\n")
        return 2
    benches_needed = [b for b in C_BENCHES if b in binaries]
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
    entries = [e for e in ENTRIES if e.bench in binaries]

    # inputs are built once; only the timed calls run inside the rounds.
    # blocks: (bench, block, size, [(entry, callable)]) -- one torch round-robin
    # each, in the case order its C bench uses (rotated or shuffled)
    blocks: List[Tuple[str, str, Tuple[int, ...], List[Tuple[Entry, Callable]]]] = []
    for b in benches_needed:
        for s in sizes:
            lst = []
            for e in entries:
                if e.bench != b or e.per_call or e.sizes is not None:
                    continue
                if e.needs_channels_last and channels_last_format(len(s)) is None:
                    continue
                lst.append((e, e.setup(s)))
            if lst:
                blocks.append((b, "bandwidth", s, lst))
        call_ents = [e for e in entries if e.bench == b and e.per_call]
        if call_ents:
            s = tuple(args.tiny)
            lst = [(e, e.setup(s, args.calls)) for e in call_ents
                   if not (e.needs_channels_last and channels_last_format(len(s)) is None)]
            if lst:
                blocks.append((b, "call", s, lst))

    # per round: torch[(block, size, threads)][key] and c[bench][(block, size, threads)][key]
    rounds = []
    for rnd in range(args.rounds):
        torch_first = rnd % 2 == 0
        rec = {"torch": {b: {} for b in benches_needed},
               "torch_disturbed": {b: {} for b in benches_needed}, "c": {}, "c_disturbed": {}}

        def torch_block():
            for b, blk, s, ents in blocks:
                div = [args.calls if e.per_call else 1 for e, _ in ents]
                for t in args.threads:
                    torch.set_num_threads(t)
                    best = None
                    for attempt in range(args.retries + 1):
                        with LoadMeter() as load:
                            meds = time_round_robin([fn for _, fn in ents], args.reps,
                                                    args.warmup, args.pre, div,
                                                    C_BENCHES[b].shuffle)
                        if best is None or load.other_cores < best[1].other_cores:
                            best = (meds, load)
                        if not load.disturbed:
                            break
                        sys.stderr.write("torch %s %s%s, %d threads: other processes used "
                                         "%.2f cores; %s\n" %
                                         (b, "per-call " if blk == "call" else "", dims_str(s), t,
                                          load.other_cores,
                                          "measuring again in 1 s"
                                          if attempt < args.retries else "giving up"))
                        if attempt < args.retries:
                            time.sleep(1.0)
                    meds, load = best
                    rec["torch"][b][(blk, s, t)] = {e.key: m for (e, _), m in zip(ents, meds)}
                    rec["torch_disturbed"][b][(blk, s, t)] = load.disturbed

        def c_block():
            for b in benches_needed:
                rec["c"][b], rec["c_disturbed"][b] = c_medians(
                    run_c_bench(binaries[b], C_BENCHES[b], args, extra_sizes))

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
    summary: List[dict] = []
    for b in benches_needed:
        REPORTS[b](rounds, blocks, args, summary)

    if args.json_out:
        def keystr(k):
            blk, s, t = k
            return "%s%s/t%d" % ("" if blk == "bandwidth" else blk + "/", dims_str(s), t)
        doc = {
            "torch_version": torch.__version__, "rounds": args.rounds, "reps": args.reps,
            "threads": args.threads, "sizes": [list(s) for s in sizes],
            "calls": args.calls, "tiny": list(args.tiny),
            "binaries": binaries, "summary": summary,
            "per_round": [{"torch": {b: {keystr(k): v for k, v in d.items()}
                                     for b, d in r["torch"].items()},
                           "torch_disturbed": {b: {keystr(k): v for k, v in d.items()}
                                               for b, d in r["torch_disturbed"].items()},
                           "c": {b: {keystr(k): v for k, v in d.items()}
                                 for b, d in r["c"].items()},
                           "c_disturbed": {b: {keystr(k): v for k, v in d.items()}
                                           for b, d in r["c_disturbed"].items()}}
                          for r in rounds],
        }
        with open(args.json_out, "w") as f:
            json.dump(doc, f, indent=1)
    return 0


# --------------------------------------------------------------------------- CNN operators
CNN_FAMILIES = ("conv", "pool", "norm", "resize", "gemm")


def split_argv(argv: List[str]):
    """Separates the CNN benches (bench/compare_cnn.py: conv, pool, norm,
    resize, gemm) from copy/elementwise ones. Returns (argv for this script,
    argv for compare_cnn.py or None, whether copy/elementwise should run)."""
    mine, cnn, shared = [], [], []
    explicit_cnn = explicit_mine = False
    i = 0
    while i < len(argv):
        a = argv[i]
        key, val = (a.split("=", 1) + [None])[:2] if a.startswith("--") else (a, None)
        takes = key in ("--bench", "--benches", "--threads", "--rounds", "--reps", "--json-out",
                        "--warmup", "--pre", "--retries", "--size", "--calls", "--tiny")
        if takes and val is None:
            i += 1
            val = argv[i] if i < len(argv) else ""
        if key == "--bench":
            fam = os.path.basename(val)[len("bench_"):] if \
                os.path.basename(val).startswith("bench_") else ""
            if fam in CNN_FAMILIES:
                cnn += ["--bench", val]
                explicit_cnn = True
            else:
                mine += ["--bench", val]
                explicit_mine = True
        elif key == "--benches":
            names = [n for n in val.split(",") if n]
            c = [n for n in names if n in CNN_FAMILIES]
            m = [n for n in names if n not in CNN_FAMILIES]
            if c:
                cnn += ["--benches", ",".join(c)]
                explicit_cnn = True
            if m:
                mine += ["--benches", ",".join(m)]
                explicit_mine = True
        elif key in ("--threads", "--rounds", "--reps"):
            shared += [key, val]
        elif takes:
            mine += [key, val]
        else:
            mine.append(a)
        i += 1
    explicit = explicit_cnn or explicit_mine
    run_mine = explicit_mine or not explicit
    run_cnn = explicit_cnn or not explicit
    return mine + shared, (cnn + shared if run_cnn else None), run_mine


def main() -> int:
    """copy / elementwise here; conv, pool, norm, resize and gemm through
    bench/compare_cnn.py (same --threads/--rounds/--reps). Without --bench or
    --benches every built bench of both kinds runs."""
    mine, cnn, run_mine = split_argv(sys.argv[1:])
    rc = main_copy_elementwise(mine) if run_mine else 0
    if cnn is not None:
        import importlib.util
        spec = importlib.util.spec_from_file_location(
            "compare_cnn", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                        "compare_cnn.py"))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        saved = sys.argv
        sys.argv = [saved[0]] + cnn
        try:
            rc2 = mod.main()
        finally:
            sys.argv = saved
        if rc2 == 2 and "--bench" not in cnn and "--benches" not in cnn:
            rc2 = 0     # none built: only the copy/elementwise benches exist in this build
        rc = rc or rc2
    return rc


if __name__ == "__main__":
    sys.exit(main())
