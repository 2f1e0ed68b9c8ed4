#!/usr/bin/python3
"""Generate tests/golden/softmax_cases.txt: PyTorch-derived golden data for
mft_softmax / mft_log_softmax (include/mft/cnn.h, docs/spec.md §4).

Run with Debian's interpreter, which has PyTorch 1.13:

    /usr/bin/python3 tests/golden/gen_softmax.py [output-path]

(default output: softmax_cases.txt next to this script). The output is
deterministic (no randomness): re-running it must give a byte-identical file.

File format (plain text, one record per line, tokens separated by single
spaces; lines starting with '#' and blank lines are comments). An integer
list is written as its length followed by the values, e.g. "4 2 3 4 5".

    case NAME                  start of a case; NAME has no spaces
    input DTYPE SIZES STRIDES OFFSET STORAGE_NUMEL SEED TAG
                               a flat storage of STORAGE_NUMEL elements of
                               DTYPE (f32 f64 i32), element k set to
                               fill(SEED, k) (below), viewed with
                               as_strided(SIZES, STRIDES, OFFSET). TAG is
                               auto | contiguous | channels_last: auto keeps
                               the tag mft gives the view; the others re-tag
                               it with mft_to_format (only where that is a
                               no-copy re-tag: dense strides whose order fits
                               the format). PyTorch has no tag.
    special K V                0 or more lines after input: storage element K
                               is then overwritten with V (inf, -inf or nan)
    op softmax|log_softmax DIM [torch.softmax(x, DIM) / torch.log_softmax(x, DIM)];
                               DIM may be negative
    result error               PyTorch rejects the call; then "end"
  or
    result DTYPE NDIM          followed by these lines, in this order:
    sizes LIST
    strides LIST               PyTorch's result strides (contiguous). mft
                               deviates on purpose (docs/spec.md §4): the result is
                               packed in the input's tag for rank 3-5; the
                               strides are for information only.
    values N V1 .. VN          the whole result in logical (row-major) order
                               when N = numel <= 64 (nan / inf / -inf allowed)
  or
    checksum N SUM             N = numel > 64: SUM = sum over the logical
                               index i of value[i] * (i % 13 + 1), in float64
    end

Fill rule (identical in the C test): r = (7 * k + 3 * SEED) % 11, value
(r - 5) / 2 for floats, r - 5 for integers.
"""

import os
import sys

import torch

assert torch.__version__.startswith("1.13"), torch.__version__

DT = {"f32": torch.float32, "f64": torch.float64, "i32": torch.int32}
CL_ORDER = {3: (0, 2, 1), 4: (0, 2, 3, 1), 5: (0, 2, 3, 4, 1)}
MAX_VALUES = 64

cases = []
names = set()


def min_numel(sizes, strides):
    if any(s == 0 for s in sizes):
        return 0
    return 1 + sum((s - 1) * st for s, st in zip(sizes, strides))


def packed(sizes, order=None):
    """Packed strides (PyTorch's: size-0 dims count as 1) for a slow-to-fast order."""
    n = len(sizes)
    order = tuple(range(n)) if order is None else order
    st = [0] * n
    acc = 1
    for d in reversed(order):
        st[d] = acc
        acc *= max(sizes[d], 1)
    return tuple(st)


class Inp:
    def __init__(self, dt, sizes, strides, offset=0, numel=None, seed=0, tag="auto",
                 specials=()):
        if numel is None:
            numel = offset + min_numel(sizes, strides)
        self.dt, self.sizes, self.strides = dt, tuple(sizes), tuple(strides)
        self.offset, self.numel, self.seed, self.tag = offset, numel, seed, tag
        self.specials = tuple(specials)


def T(sizes, fmt="c", dt="f32", seed=0, tag="auto", specials=()):
    order = CL_ORDER[len(sizes)] if fmt == "cl" else None
    return Inp(dt, sizes, packed(sizes, order), seed=seed, tag=tag, specials=specials)


def fill_value(dt, seed, k):
    r = (7 * k + 3 * seed) % 11
    return float(r - 5) if dt == "i32" else (r - 5) / 2


def build(inp):
    flat = [fill_value(inp.dt, inp.seed, k) for k in range(inp.numel)]
    for k, v in inp.specials:
        flat[k] = float(v)
    base = torch.tensor(flat, dtype=DT[inp.dt])
    return torch.as_strided(base, inp.sizes, inp.strides, inp.offset)


def fmt_list(v):
    return " ".join(str(x) for x in [len(v)] + list(v))


def fmt_val(x):
    if x != x:
        return "nan"
    if x == float("inf"):
        return "inf"
    if x == float("-inf"):
        return "-inf"
    return repr(float(x))


def add(name, inp, op, dim):
    assert name not in names, name
    names.add(name)
    lines = ["case " + name,
             "input %s %s %s %d %d %d %s" % (inp.dt, fmt_list(inp.sizes), fmt_list(inp.strides),
                                             inp.offset, inp.numel, inp.seed, inp.tag)]
    for k, v in inp.specials:
        lines.append("special %d %s" % (k, fmt_val(v)))
    lines.append("op %s %d" % (op, dim))
    x = build(inp)
    f = torch.softmax if op == "softmax" else torch.log_softmax
    try:
        y = f(x, dim)
    except (RuntimeError, IndexError):
        lines += ["result error", "end"]
        cases.append("\n".join(lines))
        return
    dtn = {v: k for k, v in DT.items()}[y.dtype]
    lines.append("result %s %d" % (dtn, y.dim()))
    lines.append("sizes " + fmt_list(y.shape))
    lines.append("strides " + fmt_list(y.stride()))
    vals = y.contiguous().reshape(-1).double().tolist()
    if len(vals) <= MAX_VALUES:
        lines.append(("values %d %s" % (len(vals), " ".join(fmt_val(v) for v in vals))).rstrip())
    else:
        s = sum(v * (i % 13 + 1) for i, v in enumerate(vals))
        lines.append("checksum %d %s" % (len(vals), fmt_val(s)))
    lines.append("end")
    cases.append("\n".join(lines))


def tag_of(fmt):
    return "channels_last" if fmt == "cl" else "auto"


def sweep(label, inp_fn, ndim, ops=("softmax", "log_softmax")):
    """Every dim, non-negative and negative."""
    for dim in list(range(ndim)) + list(range(-ndim, 0)):
        for op in ops:
            add("%s_%s_d%d" % (label, op, dim), inp_fn(), op, dim)


def shp(sizes):
    return "x".join(str(s) for s in sizes)


# ----------------------------------------------------------------- cases

SHAPES = {
    1: [(5,), (1,), (37,)],
    2: [(3, 4), (1, 5), (4, 1), (2, 33)],
    3: [(2, 3, 4), (2, 1, 3), (3, 5, 1)],
    4: [(2, 3, 4, 5), (1, 3, 1, 1), (2, 1, 3, 3), (2, 4, 1, 3), (1, 5, 2, 2)],
    5: [(2, 3, 2, 2, 3), (1, 2, 1, 2, 2), (1, 4, 2, 1, 2)],
}

seed = 0
for nd, shapes in SHAPES.items():
    for sizes in shapes:
        fmts = ("c", "cl") if nd >= 3 else ("c",)
        for fmt in fmts:
            for dt in ("f32", "f64"):
                seed = (seed + 1) % 11
                s = seed
                sweep("r%d_%s_%s_%s" % (nd, shp(sizes), fmt, dt),
                      lambda sizes=sizes, fmt=fmt, dt=dt, s=s: T(sizes, fmt, dt, seed=s,
                                                                  tag=tag_of(fmt)),
                      nd)

# empty tensors (size-0 dims)
for sizes, fmt in (((0,), "c"), ((2, 0, 3), "c"), ((2, 3, 0, 2), "cl"), ((0, 3, 2, 2), "cl")):
    for dim in range(len(sizes)):
        for op in ("softmax", "log_softmax"):
            add("empty_%s_%s_%s_d%d" % (shp(sizes), fmt, op, dim),
                T(sizes, fmt, "f32", tag=tag_of(fmt)), op, dim)

# non-dense / permuted / offset views
VIEWS = [
    # (label, sizes, strides, offset)
    ("sliced2d", (3, 4), (10, 2), 1),
    ("transposed2d", (4, 3), (1, 4), 0),
    ("padded_nchw", (2, 3, 2, 2), (20, 5, 2, 1), 2),
    ("padded_nhwc", (2, 3, 2, 2), (16, 1, 6, 3), 1),
    ("permuted_nwc", (2, 4, 3), (12, 1, 4), 0),
    ("broadcast_c", (2, 3, 2, 2), (4, 0, 2, 1), 0),
    ("step5d", (1, 2, 2, 2, 3), (60, 1, 24, 8, 2), 0),
]
for label, sizes, strides, off in VIEWS:
    for dt in ("f32", "f64"):
        seed = (seed + 1) % 11
        s = seed
        sweep("view_%s_%s" % (label, dt),
              lambda sizes=sizes, strides=strides, off=off, dt=dt, s=s:
              Inp(dt, sizes, strides, off, seed=s), len(sizes))

# ambiguous tags: C == 1 / H == W == 1, re-tagged channels_last
for sizes in ((2, 1, 3, 3), (2, 5, 1, 1)):
    for dt in ("f32", "f64"):
        sweep("tag_%s_cl_%s" % (shp(sizes), dt),
              lambda sizes=sizes, dt=dt: T(sizes, "c", dt, seed=3, tag="channels_last"), 4)

# infinities and NaN: rows of a (4, 4) tensor
INF, NINF, NAN = float("inf"), float("-inf"), float("nan")
SPECIAL_2D = ((0, NINF), (1, NINF), (2, NINF), (3, NINF),   # row 0: all -inf
              (5, INF),                                     # row 1: one +inf
              (10, NAN),                                    # row 2: a NaN
              (12, NINF), (15, NINF))                       # row 3: some -inf
for dt in ("f32", "f64"):
    for dim in (0, 1, -1):
        for op in ("softmax", "log_softmax"):
            add("special2d_%s_%s_d%d" % (dt, op, dim), T((4, 4), "c", dt, seed=5,
                                                         specials=SPECIAL_2D), op, dim)
    # a long row (> 16 lanes) with -inf elements and a +inf row
    for op in ("softmax", "log_softmax"):
        add("special_long_%s_%s" % (dt, op),
            T((2, 20), "c", dt, seed=1, specials=((3, NINF), (17, NINF), (30, INF))), op, 1)
    # over C of NHWC and of NCHW, with an all -inf column and a +inf column
    for fmt in ("c", "cl"):
        sizes = (1, 4, 2, 2)
        t = T(sizes, fmt, dt, seed=2, tag=tag_of(fmt))
        # logical (0, c, 0, 0) all -inf; (0, 1, 1, 1) = +inf; (0, 2, 0, 1) = -inf
        sp = [(sum(i * st for i, st in zip((0, c, 0, 0), t.strides)), NINF) for c in range(4)]
        sp.append((sum(i * st for i, st in zip((0, 1, 1, 1), t.strides)), INF))
        sp.append((sum(i * st for i, st in zip((0, 2, 0, 1), t.strides)), NINF))
        for op in ("softmax", "log_softmax"):
            for dim in (1, -1):
                add("special4d_%s_%s_%s_d%d" % (fmt, dt, op, dim),
                    T(sizes, fmt, dt, seed=2, tag=tag_of(fmt), specials=sp), op, dim)

# errors PyTorch rejects
for op in ("softmax", "log_softmax"):
    add("err_dim_hi_%s" % op, T((2, 3)), op, 2)
    add("err_dim_lo_%s" % op, T((2, 3)), op, -3)
    add("err_dim_4d_%s" % op, T((1, 2, 2, 2), "cl", tag="channels_last"), op, 4)
    add("err_i32_%s" % op, T((2, 3), "c", "i32"), op, 1)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(
        os.path.abspath(__file__)), "softmax_cases.txt")
    nerr = sum(1 for c in cases if "result error" in c)
    doc = __doc__.split("File format", 1)[1].split('"""')[0].rstrip()
    head = ["# mft softmax/log_softmax golden data, generated by",
            "# tests/golden/gen_softmax.py from PyTorch %s." % torch.__version__,
            "# Do not edit: re-run `/usr/bin/python3 tests/golden/gen_softmax.py`.",
            "# %d cases (%d expect an error)." % (len(cases), nerr),
            "#"]
    head += ["# File format" + doc.split("\n")[0]]
    head += [("# " + l).rstrip() for l in doc.split("\n")[1:]]
    with open(out, "w") as f:
        f.write("\n".join(head) + "\n\n")
        f.write("\n\n".join(cases) + "\n")


main()
