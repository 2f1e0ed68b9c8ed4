#!/usr/bin/python3
"""Generate tests/golden/elementwise_cases.txt: PyTorch-derived golden data for
the OUTPUT LAYOUT (sizes, strides), dtype and values of mft's elementwise ops
and reductions (docs/spec.md §4, include/mft/ops.h).

Run with Debian's interpreter, which has PyTorch 1.13:

    /usr/bin/python3 tests/golden/gen_elementwise.py [output-path]

(default output: elementwise_cases.txt next to this script). The output is
deterministic (no randomness): re-running it must give a byte-identical file.

File format (plain text, one record per line, tokens separated by single
spaces; lines starting with '#' and blank lines are comments). An integer
list is written as its length followed by the values, e.g. "4 2 3 4 5".
Dtypes are f32 f64 i32 i64 u8 (PyTorch's bool results are written as u8,
mft's comparison dtype; the values are then 0/1).

    case NAME                  start of a case; NAME has no spaces
    input DTYPE SIZES STRIDES OFFSET STORAGE_NUMEL FILL SEED TAG
                               1 to 3 lines, the tensor operands in argument
                               order. A flat storage of STORAGE_NUMEL elements
                               of DTYPE, element k set to fill(FILL, SEED, k)
                               (below), viewed with as_strided(SIZES, STRIDES,
                               OFFSET); SIZES "0" (no entries) is a 0-dim
                               tensor. TAG is auto | contiguous | channels_last:
                               auto keeps the tag mft gives the view; the
                               others re-tag it with mft_to_format (only used
                               where that is a no-copy re-tag: dense strides
                               whose order fits the format). PyTorch has no tag.
    op NAME [ARGS]             the operation (PyTorch call in brackets):
                                 relu exp neg abs sqrt            [torch.NAME(x)]
                                 add_scalar S  sub_scalar S  mul_scalar S
                                 div_scalar S  pow_scalar S       [x + s, x - s, x * s,
                                                                   x / s, x ** s]
                                 eq_scalar S  lt_scalar S         [x == s, x < s]
                                 leaky_relu S                     [F.leaky_relu(x, s)]
                                 clamp LO HI                      [torch.clamp(x, lo, hi)]
                                 add sub mul div maximum pow eq lt [torch.NAME(a, b)]
                                 add_alpha ALPHA                  [torch.add(a, b, alpha=)]
                                 where                            [torch.where(c != 0, a, b)]
                                 addcmul VALUE                    [torch.addcmul(x, a, b, value=)]
                                 lerp                             [torch.lerp(s, e, w)]
                                 lerp_scalar W                    [torch.lerp(s, e, w)]
                                 sum|mean|amax DIMS KEEPDIM       [torch.NAME(x, dims, keepdim)];
                                                                  DIMS is an integer list,
                                                                  empty = every dim; KEEPDIM 0|1
                               A scalar S is written as an integer when it is
                               integral: PyTorch gets a Python int then (x + 2),
                               else a Python float (x + 2.5) -- mft's rule for
                               double scalars (ops.h).
    result error               PyTorch rejects the call; then "end"
  or
    result DTYPE NDIM          followed by these lines, in this order:
    sizes LIST
    strides LIST               PyTorch's result strides. For KEEPDIM 1
                               reductions mft deviates on purpose (docs/spec.md §4:
                               packed in the input's tag); the strides are
                               PyTorch's (contiguous) for information only.
    values N V1 .. VN          the whole result in logical (row-major) order
                               when N = numel <= 64 (nan / inf / -inf allowed)
  or
    checksum N SUM             N = numel > 64: SUM = sum over the logical
                               index i of value[i] * (i % 13 + 1), in float64
    end

Fill rule (identical in the C test): r = (7 * k + 3 * SEED) % 11, then
    s (signed):   integers r - 5 (u8: r);       floats (r - 5) / 2
    p (positive): integers r + 1;               floats (r + 1) / 2
    e (exponent): integers r % 4;               floats (r % 4) / 2
    b (boolean):  r % 2 for every dtype
"""

import itertools
import math
import os
import sys

import torch
import torch.nn.functional as F

assert torch.__version__.startswith("1.13"), torch.__version__

DT = {"f32": torch.float32, "f64": torch.float64, "i32": torch.int32, "i64": torch.int64,
      "u8": torch.uint8}
DT_NAME = {v: k for k, v in DT.items()}
DT_NAME[torch.bool] = "u8"
DTYPES = ("f32", "f64", "i32", "i64", "u8")
FLOATS = ("f32", "f64")
CL_ORDER = {3: (0, 2, 1), 4: (0, 2, 3, 1), 5: (0, 2, 3, 4, 1)}
MAX_VALUES = 64

UNARY = ("relu", "exp", "neg", "abs", "sqrt")
SCALAR1 = ("add_scalar", "sub_scalar", "mul_scalar", "div_scalar", "pow_scalar", "eq_scalar",
           "lt_scalar", "leaky_relu")
BINARY = ("add", "sub", "mul", "div", "maximum", "pow", "eq", "lt")
REDUCE = ("sum", "mean", "amax")

cases = []
names = set()


# ----------------------------------------------------------------- inputs

class Inp:
    def __init__(self, dt, sizes, strides, offset, numel, fill, seed, tag):
        assert dt in DT and fill in "speb" and tag in ("auto", "contiguous", "channels_last")
        assert len(sizes) == len(strides)
        need = min_numel(sizes, strides)
        assert numel >= offset + need or need == 0, (sizes, strides, offset, numel)
        self.dt, self.sizes, self.strides = dt, tuple(sizes), tuple(strides)
        self.offset, self.numel, self.fill, self.seed, self.tag = offset, numel, fill, seed, tag

    def with_(self, **kw):
        d = dict(dt=self.dt, sizes=self.sizes, strides=self.strides, offset=self.offset,
                 numel=self.numel, fill=self.fill, seed=self.seed, tag=self.tag)
        d.update(kw)
        return Inp(**d)


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


def T(sizes, fmt="c", dt="f32", fill="s", seed=None, tag="auto"):
    """A packed tensor: fmt c (contiguous) or cl (channels last)."""
    order = CL_ORDER[len(sizes)] if fmt == "cl" else None
    st = packed(sizes, order)
    return Inp(dt, sizes, st, 0, min_numel(sizes, st), fill, seed, tag)


def S(sizes, strides, offset=0, numel=None, dt="f32", fill="s", seed=None, tag="auto"):
    if numel is None:
        numel = offset + min_numel(sizes, strides)
    return Inp(dt, sizes, strides, offset, numel, fill, seed, tag)


def Z(dt="f32", fill="s", seed=None):
    """A 0-dim tensor."""
    return Inp(dt, (), (), 0, 1, fill, seed, "auto")


def P(sizes, perm, dt="f32", fill="s", seed=None):
    """torch.empty(sizes).permute(perm): a packed tensor viewed in another dim order."""
    st = packed(sizes)
    return S(tuple(sizes[p] for p in perm), tuple(st[p] for p in perm), dt=dt, fill=fill,
             seed=seed)


def fill_value(fill, seed, k, dt):
    r = (7 * k + 3 * seed) % 11
    isf = dt in FLOATS
    if fill == "s":
        return (r - 5) / 2 if isf else (r if dt == "u8" else r - 5)
    if fill == "p":
        return (r + 1) / 2 if isf else r + 1
    if fill == "e":
        return (r % 4) / 2 if isf else r % 4
    if fill == "b":
        return r % 2
    raise ValueError(fill)


def make_torch(inp, as_bool=False):
    vals = [fill_value(inp.fill, inp.seed, k, inp.dt) for k in range(inp.numel)]
    flat = torch.tensor(vals, dtype=DT[inp.dt])
    t = flat.as_strided(inp.sizes, inp.strides, inp.offset)
    if as_bool:
        t = flat.bool().as_strided(inp.sizes, inp.strides, inp.offset)
    return t


# ----------------------------------------------------------------- ops

def pyscalar(s):
    return int(s) if float(s).is_integer() else float(s)


def fmt_scalar(s):
    return str(int(s)) if float(s).is_integer() else repr(float(s))


def run_op(op, args, ts):
    if op in UNARY:
        return getattr(torch, op)(ts[0])
    if op in SCALAR1:
        x, s = ts[0], pyscalar(args[0])
        return {"add_scalar": lambda: x + s, "sub_scalar": lambda: x - s,
                "mul_scalar": lambda: x * s, "div_scalar": lambda: x / s,
                "pow_scalar": lambda: torch.pow(x, s), "eq_scalar": lambda: torch.eq(x, s),
                "lt_scalar": lambda: torch.lt(x, s),
                "leaky_relu": lambda: F.leaky_relu(x, s)}[op]()
    if op == "clamp":
        return torch.clamp(ts[0], pyscalar(args[0]), pyscalar(args[1]))
    if op in BINARY:
        return getattr(torch, op)(ts[0], ts[1])
    if op == "add_alpha":
        return torch.add(ts[0], ts[1], alpha=pyscalar(args[0]))
    if op == "where":
        return torch.where(ts[0], ts[1], ts[2])
    if op == "addcmul":
        return torch.addcmul(ts[0], ts[1], ts[2], value=pyscalar(args[0]))
    if op == "lerp":
        return torch.lerp(ts[0], ts[1], ts[2])
    if op == "lerp_scalar":
        return torch.lerp(ts[0], ts[1], pyscalar(args[0]))
    if op in REDUCE:
        dims, keep = args
        x = ts[0]
        if len(dims) == 0:
            dims = list(range(x.dim()))
        return getattr(torch, op)(x, dim=tuple(dims), keepdim=bool(keep))
    raise ValueError(op)


N_INPUTS = dict([(o, 1) for o in UNARY + SCALAR1 + ("clamp",) + REDUCE] +
                [(o, 2) for o in BINARY + ("add_alpha", "lerp_scalar")] +
                [(o, 3) for o in ("where", "addcmul", "lerp")])


def add(name, op, inputs, args=()):
    assert name not in names, name
    assert " " not in name
    assert N_INPUTS[op] == len(inputs), (name, op)
    names.add(name)
    inputs = [i if i.seed is not None else i.with_(seed=2 * n + 1) for n, i in enumerate(inputs)]
    cases.append((name, op, list(args), inputs))


# ----------------------------------------------------------------- rendering

def ilist(xs):
    return " ".join([str(len(xs))] + [str(int(x)) for x in xs])


def fval(v):
    if isinstance(v, bool):
        return str(int(v))
    if isinstance(v, int):
        return str(v)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    return repr(v)


def render(name, op, args, inputs):
    lines = ["case " + name]
    for i in inputs:
        lines.append("input %s %s %s %d %d %s %d %s" % (i.dt, ilist(i.sizes), ilist(i.strides),
                                                      i.offset, i.numel, i.fill, i.seed, i.tag))
    if op in REDUCE:
        lines.append("op %s %s %d" % (op, ilist(args[0]), args[1]))
    else:
        lines.append(" ".join(["op", op] + [fmt_scalar(a) for a in args]))
    ts = [make_torch(i, as_bool=(op == "where" and n == 0)) for n, i in enumerate(inputs)]
    try:
        r = run_op(op, args, ts)
    except (RuntimeError, IndexError, ValueError) as e:
        msg = str(e).splitlines()[0][:100]
        lines.append("# torch: %s: %s" % (type(e).__name__, msg))
        lines += ["result error", "end"]
        return lines, True
    # Values never depend on the layout: the same op on packed contiguous
    # copies must give the same values (sanity check of this generator).
    ref = run_op(op, args, [t.contiguous() for t in ts])
    assert ref.dtype == r.dtype and ref.shape == r.shape, name
    assert torch.equal(ref.double().nan_to_num(7.25), r.double().nan_to_num(7.25)) or \
        torch.allclose(ref.double(), r.double(), rtol=1e-6, atol=1e-6, equal_nan=True), name
    if r.dtype == torch.bool:
        lines.append("# torch: dtype bool (mft: u8)")
    lines.append("result %s %d" % (DT_NAME[r.dtype], r.dim()))
    lines.append("sizes " + ilist(r.shape))
    lines.append("strides " + ilist(r.stride()))
    flat = r.contiguous().reshape(-1)
    vals = flat.tolist()
    if r.dtype in (torch.float32, torch.float64):
        vals = [float(v) for v in vals]
    else:
        vals = [int(v) for v in vals]
    if len(vals) <= MAX_VALUES:
        lines.append(" ".join(["values", str(len(vals))] + [fval(v) for v in vals]))
    else:
        assert all(math.isfinite(v) for v in vals), "%s: non-finite values in a checksum" % name
        s = math.fsum(float(v) * (i % 13 + 1) for i, v in enumerate(vals))
        lines.append("checksum %d %s" % (len(vals), fval(s)))
    lines.append("end")
    return lines, False


# ----------------------------------------------------------------- the cases

S4 = (2, 3, 4, 5)
S5 = (2, 3, 4, 5, 6)
NHWC = T(S4, "cl")
NCHW = T(S4)
VEC_C = T((1, 3, 1, 1))           # per-channel vector
HW = T((4, 5))
NHWC_STEP2 = S((2, 3, 4, 5), (240, 1, 30, 3))        # NHWC (2,3,8,10)[:, :, ::2, ::2]
NCHW_STEP2 = S((2, 3, 4, 5), (120, 40, 10, 1))       # NCHW (2,3,8,5)[:, :, ::2]
NCHW_PITCH = S((2, 3, 4, 5), (96, 32, 8, 1))         # row pitch 8 for 5 valid
NHWC_ROOM4 = S((2, 3, 4, 5), (80, 1, 20, 4))         # NHWC with room for 4 channels, 3 used
NHWC_C1_FROM_SELECT = S((1, 3, 4, 5), (3, 1, 15, 3))  # NHWC[0].unsqueeze(0) (odd N stride)
NCHW_C1_FROM_SELECT = S((1, 3, 4, 5), (20, 20, 5, 1))  # NCHW[0].unsqueeze(0)

# Named layouts of a (2,3,4,5) f32 operand for the operand-pair matrix.
LAYOUTS = [
    ("nchw", NCHW),
    ("nhwc", NHWC),
    ("nchwstep2", NCHW_STEP2),
    ("nhwcstep2", NHWC_STEP2),
    ("pitch", NCHW_PITCH),
    ("room4", NHWC_ROOM4),
    ("wh", S(S4, (60, 20, 1, 4))),                    # H/W transposed (fits neither)
    ("cexp", S(S4, (60, 0, 15, 3), numel=120)),       # C broadcast in an NHWC buffer
]


def gen():
    # --- A. the docs/spec.md §4 row-1 cases, each for every binary op
    spec = [
        ("nhwc_vecc", NHWC, VEC_C),
        ("nhwc_c11", NHWC, T((3, 1, 1))),
        ("nhwc_hw", NHWC, HW),
        ("nhwc_w", NHWC, T((5,))),
        ("nhwc_nchw", NHWC, NCHW),
        ("nchw_nhwc", NCHW, NHWC),
        ("vecc_nhwc", VEC_C, NHWC),
        ("hw_nhwc", HW, NHWC),
        ("nhwc_nhwc", NHWC, NHWC),
        ("nc1w_11h1", T((2, 3, 1, 5)), T((1, 1, 4, 1))),
        ("11h1_nc1w", T((1, 1, 4, 1)), T((2, 3, 1, 5))),
        ("nc1wcl_11h1", T((2, 3, 1, 5), "cl"), T((1, 1, 4, 1))),
        ("nc11_11hw", T((2, 3, 1, 1)), T((1, 1, 4, 5))),
        ("11hw_nc11", T((1, 1, 4, 5)), T((2, 3, 1, 1))),
        ("n1hw_1c11", T((2, 1, 4, 5)), VEC_C),
        ("1c11_n1hw", VEC_C, T((2, 1, 4, 5))),
        ("nhwc_scalar0d", NHWC, Z()),
        ("scalar0d_nhwc", Z(), NHWC),
    ]
    for sn, a, b in spec:
        for op in BINARY:
            fa, fb = ("p", "s") if op == "pow" else ("s", "p") if op == "div" else ("s", "s")
            add("spec_%s_%s" % (sn, op), op, [a.with_(fill=fa), b.with_(fill=fb)])
    # the scalar forms on NHWC / NCHW
    for ln, x in [("nhwc", NHWC), ("nchw", NCHW), ("room4", NHWC_ROOM4)]:
        for op, s in [("add_scalar", 2), ("add_scalar", 2.5), ("sub_scalar", 1), ("mul_scalar", 3),
                      ("mul_scalar", -0.5), ("div_scalar", 4), ("pow_scalar", 2),
                      ("eq_scalar", 1), ("lt_scalar", 0.5), ("leaky_relu", 0.1)]:
            add("scalar_%s_%s_%s" % (ln, op, fmt_scalar(s).replace(".", "p").replace("-", "m")),
                op, [x.with_(fill="p" if op == "pow_scalar" else "s")], [s])
        add("scalar_%s_clamp" % ln, "clamp", [x], [-1, 1.5])
        add("scalar_%s_pow_half" % ln, "pow_scalar", [x.with_(fill="p")], [0.5])

    # --- B. operand-layout matrix: every pair of named (2,3,4,5) layouts under add
    for (na, a), (nb, b) in itertools.product(LAYOUTS, LAYOUTS):
        add("pair_%s_%s" % (na, nb), "add", [a, b])
    for na, a in LAYOUTS:
        add("pair_%s_vecc" % na, "mul", [a, VEC_C])
        add("pair_vecc_%s" % na, "mul", [VEC_C, a])
        add("unary_relu_%s" % na, "relu", [a])

    # --- C. permutations: all 24 orders of (2,3,4,5) as first and as second operand
    for p in itertools.permutations(range(4)):
        pn = "".join(map(str, p))
        x = P(S4, p)
        c = T(x.sizes)
        add("perm_%s_first" % pn, "add", [x, c])
        add("perm_%s_second" % pn, "add", [c, x])
    # permuted vs channels-last, and permuted unary
    for pn, p in [("0231", (0, 2, 3, 1)), ("0312", (0, 3, 1, 2)), ("3210", (3, 2, 1, 0)),
                  ("1023", (1, 0, 2, 3))]:
        x = P(S4, p)
        add("perm_%s_exp" % pn, "exp", [x])
    add("perm_nhwc_from_physical_vs_nchw", "sub", [P((2, 4, 5, 3), (0, 3, 1, 2)), NCHW])
    add("perm_nchw_vs_nhwc_from_physical", "sub", [NCHW, P((2, 4, 5, 3), (0, 3, 1, 2))])

    # --- D. ambiguous shapes: C == 1, H == W == 1, N == 1, all-ones, with declared tags
    amb = [
        ("c1", (2, 1, 4, 5)),
        ("hw1", (2, 3, 1, 1)),
        ("n1", (1, 3, 4, 5)),
        ("ones", (1, 1, 1, 1)),
        ("n1c1", (1, 1, 4, 5)),
        ("c1w1", (2, 1, 4, 1)),
    ]
    for an, sz in amb:
        cl = T(sz, "cl")
        c = T(sz)
        cl_tag = cl.with_(tag="channels_last")
        c_tag = c.with_(tag="contiguous")
        add("amb_%s_clstr_clstr" % an, "add", [cl, cl])
        add("amb_%s_cltag_scalar" % an, "add_scalar", [cl_tag], [1])
        add("amb_%s_ctag_scalar" % an, "mul_scalar", [c_tag], [2])
        # PyTorch wraps the scalar of add/sub/mul/div/comparisons into a 0-dim
        # operand (no same-shape fast setup); pow/leaky_relu/clamp are unary
        for op, sv in [("sub_scalar", 1), ("mul_scalar", 2.5), ("div_scalar", 2),
                       ("eq_scalar", 1), ("lt_scalar", 0.5), ("pow_scalar", 2),
                       ("leaky_relu", 0.1)]:
            add("amb_%s_cltag_%s" % (an, op), op, [cl_tag], [sv])
        add("amb_%s_cltag_clamp" % an, "clamp", [cl_tag], [-1, 1])
        add("amb_%s_cltag_relu" % an, "relu", [cl_tag])
        add("amb_%s_cltag_c" % an, "add", [cl_tag, c])
        add("amb_%s_c_cltag" % an, "add", [c, cl_tag])
        add("amb_%s_cltag_vecc" % an, "mul", [cl_tag, T((1, sz[1], 1, 1))])
        add("amb_%s_vecc_cltag" % an, "mul", [T((1, sz[1], 1, 1)), cl_tag])
        add("amb_%s_cltag_nhwcfull" % an, "add", [cl_tag, NHWC])
        add("amb_%s_nhwcfull_cltag" % an, "add", [NHWC, cl_tag])
    # C == 1 with odd strides (not packed in either format)
    add("amb_c1_oddstride_nhwc", "add",
        [S((2, 1, 4, 5), (20, 999, 5, 1), numel=40), T((2, 1, 4, 5), "cl")])
    add("amb_c1_cstride0", "add", [S((2, 1, 4, 5), (20, 0, 5, 1)), T((2, 1, 4, 5))])
    add("amb_c1_expand_vs_nhwc", "add", [S((2, 3, 4, 5), (20, 0, 5, 1), numel=40), NHWC])
    # N == 1 made by select + unsqueeze
    add("n1sel_nhwc_vs_nchw", "add", [NHWC_C1_FROM_SELECT, T((1, 3, 4, 5))])
    add("n1sel_nchw_vs_nhwcsel", "add", [T((1, 3, 4, 5)), NHWC_C1_FROM_SELECT])
    add("n1sel_nhwc_scalar", "add_scalar", [NHWC_C1_FROM_SELECT], [2.5])
    add("n1sel_nhwc_relu", "relu", [NHWC_C1_FROM_SELECT])
    add("n1sel_nhwc_lt_scalar", "lt_scalar", [NHWC_C1_FROM_SELECT], [0.5])
    add("n1sel_nhwc_clamp", "clamp", [NHWC_C1_FROM_SELECT], [-1, 1])
    add("n1sel_nhwc_vs_nchwsel", "mul", [NHWC_C1_FROM_SELECT, NCHW_C1_FROM_SELECT])
    add("n1sel_nhwc_bcast_n", "add", [NHWC_C1_FROM_SELECT, NCHW])
    add("n1sel_nchw_bcast_n_nhwc", "add", [NCHW_C1_FROM_SELECT, NHWC])
    add("n1sel_nhwc_bcast_n_nhwc", "add", [NHWC_C1_FROM_SELECT, NHWC])
    # C == 1 / H == W == 1 operands broadcast against a full NHWC tensor
    add("bc_c1nhwc_vs_nhwc", "add", [T((2, 1, 4, 5), "cl"), NHWC])
    add("bc_nhwc_vs_c1nhwc", "add", [NHWC, T((2, 1, 4, 5), "cl")])
    add("bc_hw1_vs_nhwc", "add", [T((2, 3, 1, 1)), NHWC])
    add("bc_nhwc_vs_hw1", "add", [NHWC, T((2, 3, 1, 1))])
    add("bc_ones_vs_nhwc", "add", [T((1, 1, 1, 1)), NHWC])
    add("bc_nhwc_vs_ones", "add", [NHWC, T((1, 1, 1, 1))])
    add("bc_ones_vs_ones", "add", [T((1, 1, 1, 1), tag="channels_last"), T((1, 1, 1, 1))])
    add("bc_ones_r5", "mul", [T((1, 1, 1, 1, 1)), T((1, 1, 1, 1, 1))])
    add("bc_nc11_vs_11hw_cl", "add", [T((2, 3, 1, 1), "cl"), T((1, 1, 4, 5), "cl")])
    add("bc_n1hw_cl_vs_1c11", "add", [T((2, 1, 4, 5), "cl", tag="channels_last"), VEC_C])
    add("bc_nchw_1c1w_h1", "add", [T((2, 3, 1, 5), "cl"), T((1, 1, 4, 1))])
    add("bc_rank_grow", "add", [T((3, 4, 5)), T((2, 1, 1, 1, 1))])
    add("bc_rank1_vs_nhwc", "add", [T((1,)), NHWC])

    # --- E. zero-size dims
    for zn, sz in [("n0", (0, 3, 4, 5)), ("c0", (2, 0, 4, 5)), ("h0", (2, 3, 0, 5)),
                   ("w0", (2, 3, 4, 0))]:
        add("zero_%s_nchw_nchw" % zn, "add", [T(sz), T(sz)])
        add("zero_%s_nhwc_nhwc" % zn, "add", [T(sz, "cl"), T(sz, "cl")])
        add("zero_%s_nhwc_nchw" % zn, "add", [T(sz, "cl"), T(sz)])
        add("zero_%s_nchw_nhwc" % zn, "add", [T(sz), T(sz, "cl")])
        add("zero_%s_nhwc_relu" % zn, "relu", [T(sz, "cl")])
        add("zero_%s_nhwc_scalar" % zn, "add_scalar", [T(sz, "cl")], [2.5])
        add("zero_%s_nhwc_pow_scalar" % zn, "pow_scalar", [T(sz, "cl")], [2])
    add("zero_bcast_vec", "add", [T((2, 0, 4, 5), "cl"), T((1, 0, 1, 1))])
    add("zero_vs_bcast_1", "add", [T((2, 3, 0, 5), "cl"), VEC_C])
    add("zero_r1", "mul", [T((0,)), T((1,))])
    add("err_zero_vs_3", "add", [T((0,)), T((3,))])

    # --- F. rank 3 (NLC is an mft extension), rank 5 (channels_last_3d), other ranks
    nlc = T((2, 3, 4), "cl")
    ncl = T((2, 3, 4))
    add("r3_nlc_nlc", "add", [nlc, nlc])
    add("r3_nlc_ncl", "add", [nlc, ncl])
    add("r3_ncl_nlc", "add", [ncl, nlc])
    add("r3_nlc_vec", "mul", [nlc, T((1, 3, 1))])
    add("r3_vec_nlc", "mul", [T((1, 3, 1)), nlc])
    add("r3_nlc_l", "mul", [nlc, T((4,))])
    add("r3_nlc_scalar", "add_scalar", [nlc], [2.5])
    add("r3_nlc_exp", "exp", [nlc])
    add("r3_nlc_c1", "add", [T((2, 1, 4), "cl", tag="channels_last"), T((2, 1, 4))])
    add("r3_nlc_step2", "add", [S((2, 3, 4), (24, 1, 6)), ncl])
    n5cl = T(S5, "cl")
    n5 = T(S5)
    add("r5_cl_cl", "add", [n5cl, n5cl])
    add("r5_cl_c", "add", [n5cl, n5])
    add("r5_c_cl", "add", [n5, n5cl])
    add("r5_cl_vecc", "mul", [n5cl, T((1, 3, 1, 1, 1))])
    add("r5_vecc_cl", "mul", [T((1, 3, 1, 1, 1)), n5cl])
    add("r5_cl_dhw", "add", [n5cl, T((4, 5, 6))])
    add("r5_cl_scalar", "mul_scalar", [n5cl], [2.5])
    add("r5_cl_0d", "add", [n5cl, Z()])
    add("r5_cl_relu", "relu", [n5cl])
    add("r5_cl_room4", "add", [S(S5, (480, 1, 120, 24, 4)), n5])
    add("r5_cl_c1", "add", [T((2, 1, 4, 5, 6), "cl", tag="channels_last"), T((2, 1, 4, 5, 6))])
    add("r5_cl_dhw1", "add", [T((2, 3, 1, 1, 1), "cl", tag="channels_last"), T((2, 3, 1, 1, 1))])
    add("r5_cl_d1", "add", [T((2, 3, 1, 5, 6), "cl"), T((2, 3, 1, 5, 6))])
    add("r5_perm_43210", "add", [P(S5, (4, 3, 2, 1, 0)), T((6, 5, 4, 3, 2))])
    add("r2_transposed", "add", [P((3, 4), (1, 0)), T((4, 3))])
    add("r2_vs_r1", "add", [T((3, 4)), T((4,))])
    add("r1_step2", "add", [S((5,), (2,)), T((5,))])
    add("r6_perm", "add", [P((2, 3, 4, 5, 1, 2), (0, 2, 3, 4, 5, 1)), T((2, 4, 5, 1, 2, 3))])
    add("r0_r0", "add", [Z(), Z()])
    add("r0_relu", "relu", [Z()])
    add("r0_offset", "mul", [S((), (), offset=3, numel=5), Z()])

    # --- G. 0-dim operands
    add("zd_nchw", "add", [Z(), NCHW])
    add("zd_nhwc_room4", "add", [Z(), NHWC_ROOM4])
    add("nhwc_room4_zd", "add", [NHWC_ROOM4, Z()])
    add("zd_c1_cltag", "add", [Z(), T((2, 1, 4, 5), "cl", tag="channels_last")])
    add("c1_cltag_zd", "add", [T((2, 1, 4, 5), "cl", tag="channels_last"), Z()])

    # --- H. non-dense operands (all-operand-same-layout fast paths do not apply)
    add("nd_overlap_vs_nchw", "add", [S(S4, (1, 1, 1, 1)), NCHW])
    add("nd_nhwc_vs_overlap", "add", [NHWC, S(S4, (1, 1, 1, 1))])
    add("nd_offset_nhwc_crop", "add", [S((2, 3, 4, 4), (192, 1, 24, 3), offset=27, numel=384),
                                       T((2, 3, 4, 4))])
    add("nd_offset_nchw_crop", "add", [S((2, 3, 4, 4), (192, 64, 8, 1), offset=18, numel=384),
                                       T((2, 3, 4, 4), "cl")])
    add("nd_room4_room4", "add", [NHWC_ROOM4, NHWC_ROOM4])
    add("nd_pitch_pitch", "add", [NCHW_PITCH, NCHW_PITCH])
    add("nd_nbatch_slice_nhwc", "add", [S(S4, (120, 1, 15, 3), numel=180), NHWC])
    add("nd_exp_room4", "exp", [NHWC_ROOM4])
    add("nd_sqrt_pitch", "sqrt", [NCHW_PITCH.with_(fill="p")])

    # --- I. unary ops over layouts and dtypes
    for op in UNARY:
        for ln, x in [("nchw", NCHW), ("nhwc", NHWC), ("step2", NHWC_STEP2), ("zd", Z()),
                      ("r5cl", n5cl)]:
            add("un_%s_%s" % (op, ln), op, [x.with_(fill="p" if op == "sqrt" else "s")])
        for dt in DTYPES:
            add("un_%s_%s" % (op, dt), op, [T((2, 3, 2, 2), "cl", dt=dt,
                                              fill="p" if op == "sqrt" else "s")])

    # --- J. dtype promotion matrix (docs/spec.md: as PyTorch), NHWC tensors
    x4 = T((2, 3, 2, 2), "cl")
    for da, db in itertools.product(DTYPES, DTYPES):
        add("dt_tt_%s_%s" % (da, db), "add", [x4.with_(dt=da), T((2, 3, 2, 2), dt=db)])
        add("dt_t0_%s_%s" % (da, db), "add", [x4.with_(dt=da), Z(dt=db)])
    for da, db in [("i32", "f64"), ("u8", "i64"), ("f32", "f64"), ("u8", "f32"), ("i64", "u8")]:
        add("dt_0t_%s_%s" % (da, db), "add", [Z(dt=da), x4.with_(dt=db)])
        add("dt_00_%s_%s" % (da, db), "mul", [Z(dt=da), Z(dt=db)])
    for dt in DTYPES:
        add("dt_ts_%s_int" % dt, "add_scalar", [x4.with_(dt=dt)], [2])
        add("dt_ts_%s_float" % dt, "add_scalar", [x4.with_(dt=dt)], [2.5])
        add("dt_ts_%s_mul_int" % dt, "mul_scalar", [x4.with_(dt=dt)], [3])
        add("dt_ts_%s_mul_float" % dt, "mul_scalar", [x4.with_(dt=dt)], [0.5])
        add("dt_ts_%s_div_int" % dt, "div_scalar", [x4.with_(dt=dt)], [2])
        add("dt_ts_%s_pow_int" % dt, "pow_scalar", [x4.with_(dt=dt, fill="p")], [2])
        add("dt_ts_%s_pow_float" % dt, "pow_scalar", [x4.with_(dt=dt, fill="p")], [0.5])
        add("dt_ts_%s_lt_float" % dt, "lt_scalar", [x4.with_(dt=dt)], [2.5])
        add("dt_ts_%s_eq_int" % dt, "eq_scalar", [x4.with_(dt=dt)], [3])
        add("dt_ts_%s_clamp_int" % dt, "clamp", [x4.with_(dt=dt)], [1, 4])
        add("dt_ts_%s_clamp_float" % dt, "clamp", [x4.with_(dt=dt)], [0.5, 3.5])
        add("dt_ts_%s_leaky_relu" % dt, "leaky_relu", [x4.with_(dt=dt)], [0.25])
        add("dt_tt_%s_div" % dt, "div", [x4.with_(dt=dt), T((2, 3, 2, 2), dt=dt, fill="p")])
        add("dt_tt_%s_pow" % dt, "pow",
            [x4.with_(dt=dt, fill="p"), T((2, 3, 2, 2), dt=dt, fill="e")])
        add("dt_tt_%s_maximum" % dt, "maximum", [x4.with_(dt=dt), T((2, 3, 2, 2), dt=dt)])
        add("dt_tt_%s_sub" % dt, "sub", [x4.with_(dt=dt), T((2, 3, 2, 2), dt=dt)])
        add("dt_tt_%s_eq_f32" % dt, "eq", [x4.with_(dt=dt), T((2, 3, 2, 2), dt="f32")])
        add("dt_tt_%s_lt_i64" % dt, "lt", [x4.with_(dt=dt), T((2, 3, 2, 2), dt="i64")])
    add("dt_ts_u8_add_neg_int", "add_scalar", [x4.with_(dt="u8")], [-3])
    add("dt_ts_u8_add_300", "add_scalar", [x4.with_(dt="u8")], [300])
    add("dt_ts_i32_pow_neg", "pow_scalar", [x4.with_(dt="i32", fill="p")], [-1])
    add("dt_ts_f32_pow_neg", "pow_scalar", [x4.with_(fill="p")], [-1])
    add("dt_ts_i32_pow_negfrac", "pow_scalar", [x4.with_(dt="i32", fill="p")], [-0.5])
    add("dt_ts_i32_clamp_inverted", "clamp", [x4.with_(dt="i32")], [3, 1])
    add("dt_ts_f32_clamp_inverted", "clamp", [x4], [3, 1])
    add("dt_tt_i32_pow_negexp", "pow", [x4.with_(dt="i32"), T((2, 3, 2, 2), dt="i32")])
    add("dt_tt_i64_0d_f32_pow", "pow", [x4.with_(dt="i64", fill="p"), Z(dt="f32", fill="e")])

    # --- K. add with alpha
    for dt, alpha in [("f32", 2), ("f32", -0.5), ("i32", 3), ("i64", -2), ("u8", 2), ("f64", 0.25)]:
        add("alpha_%s_%s" % (dt, fmt_scalar(alpha).replace(".", "p").replace("-", "m")),
            "add_alpha", [x4.with_(dt=dt), T((2, 3, 2, 2), dt=dt)], [alpha])
    add("alpha_nchw_nhwc", "add_alpha", [NCHW, NHWC], [2])
    add("alpha_nhwc_vecc", "add_alpha", [NHWC, VEC_C], [0.5])
    add("alpha_i32_f32", "add_alpha", [x4.with_(dt="i32"), T((2, 3, 2, 2))], [1.5])
    add("err_alpha_i32_frac", "add_alpha", [x4.with_(dt="i32"), T((2, 3, 2, 2), dt="i32")], [1.5])
    add("err_alpha_bcast", "add_alpha", [NHWC, T((4, 4))], [2])

    # --- L. ternary: where, addcmul, lerp
    cond_vec = T((1, 3, 1, 1), dt="u8", fill="b")
    tern = [
        ("nhwc_nhwc_nhwc", T(S4, "cl", dt="u8", fill="b"), NHWC, NHWC),
        ("nchw_nhwc_nhwc", T(S4, dt="u8", fill="b"), NHWC, NHWC),
        ("nhwc_nchw_0d", T(S4, "cl", dt="u8", fill="b"), NCHW, Z()),
        ("vec_nhwc_nchw", cond_vec, NHWC, NCHW),
        ("vec_0d_nhwc", cond_vec, Z(), NHWC),
        ("hw_vecc_nhwc", T((4, 5), dt="u8", fill="b"), VEC_C, NHWC),
        ("nhwc_room4_pitch", S(S4, (80, 1, 20, 4), dt="u8", fill="b"), NHWC_ROOM4, NCHW_PITCH),
        ("c1_cltag", T((2, 1, 4, 5), "cl", dt="u8", fill="b", tag="channels_last"),
         T((2, 1, 4, 5)), T((2, 1, 4, 5), "cl")),
        ("bcast3", T((2, 1, 1, 5), dt="u8", fill="b"), T((1, 3, 1, 1)), T((1, 1, 4, 1))),
        ("r5", T(S5, "cl", dt="u8", fill="b"), T(S5, "cl"), T((1, 3, 1, 1, 1))),
    ]
    for tn, c, a, b in tern:
        add("where_%s" % tn, "where", [c, a, b])
        if tn != "c1_cltag":
            add("addcmul_%s" % tn, "addcmul", [c.with_(dt="f32", fill="s"), a, b], [0.5])
            add("lerp_%s" % tn, "lerp", [a, b, c.with_(dt="f32", fill="p")])
    add("where_dtypes_i32_f64", "where", [T(S4, "cl", dt="u8", fill="b"), T(S4, "cl", dt="i32"),
                                          T(S4, "cl", dt="f64")])
    add("where_dtypes_u8_i64", "where", [T(S4, dt="u8", fill="b"), T(S4, dt="u8"),
                                         T(S4, dt="i64")])
    add("where_dtypes_f32_0d_f64", "where", [T(S4, "cl", dt="u8", fill="b"), NHWC, Z(dt="f64")])
    add("where_cond_f32", "where", [T(S4, "cl", fill="b"), NHWC, NCHW])
    add("where_cond_i32", "where", [T(S4, "cl", dt="i32", fill="b"), NHWC, NCHW])
    add("err_where_bcast", "where", [T((2, 3, 4, 5), dt="u8", fill="b"), NHWC, T((3, 4))])
    add("addcmul_i32", "addcmul", [x4.with_(dt="i32"), T((2, 3, 2, 2), dt="i32"),
                                   T((2, 3, 2, 2), dt="i32")], [2])
    add("addcmul_mixed", "addcmul", [x4.with_(dt="i32"), T((2, 3, 2, 2), dt="f32"),
                                     T((2, 3, 2, 2), dt="f64")], [0.5])
    add("addcmul_nchw_nhwc_vec", "addcmul", [NCHW, NHWC, VEC_C], [-2])
    add("addcmul_vecx_nhwc_nchw", "addcmul", [VEC_C, NHWC, NCHW], [1])
    add("err_addcmul_bcast", "addcmul", [NCHW, T((2, 3, 4, 4)), VEC_C], [1])
    add("lerp_f64_nhwc", "lerp", [x4.with_(dt="f64"), T((2, 3, 2, 2), dt="f64"),
                                  T((2, 3, 2, 2), dt="f64", fill="p")])
    add("lerp_0d_weight", "lerp", [NHWC, NCHW, Z(fill="p")])
    add("err_lerp_mixed", "lerp", [x4, T((2, 3, 2, 2), dt="f64"), T((2, 3, 2, 2))])
    add("err_lerp_i32", "lerp", [x4.with_(dt="i32"), T((2, 3, 2, 2), dt="i32"),
                                 T((2, 3, 2, 2), dt="i32")])
    for ln, a, b in [("nhwc_nchw", NHWC, NCHW), ("nchw_nhwc", NCHW, NHWC),
                     ("vecc_nhwc", VEC_C, NHWC), ("room4_step2", NHWC_ROOM4, NCHW_STEP2)]:
        add("lerps_%s" % ln, "lerp_scalar", [a, b], [0.25])
    add("lerps_f64", "lerp_scalar", [x4.with_(dt="f64"), T((2, 3, 2, 2), dt="f64")], [0.75])
    add("err_lerps_i32", "lerp_scalar", [x4.with_(dt="i32"), T((2, 3, 2, 2), dt="i32")], [0.5])
    add("err_lerps_mixed", "lerp_scalar", [x4, T((2, 3, 2, 2), dt="f64")], [0.5])

    # --- M. shapes that do not broadcast
    add("err_bcast_c", "add", [NHWC, T((1, 4, 1, 1))])
    add("err_bcast_hw", "mul", [NHWC, T((5, 4))])
    add("err_bcast_rank", "add", [T((3,)), T((2, 4))])
    add("err_bcast_zd_ok_but_bad", "sub", [T((2, 3)), T((3, 2))])
    add("err_bcast_eq", "eq", [NCHW, T((2, 3, 4, 6))])
    add("err_bcast_lt", "lt", [T((0,)), T((2,))])
    add("err_bcast_div", "div", [NHWC, T((2, 2, 1, 1))])

    # --- N. reductions (keepdim=False: contiguous as PyTorch; keepdim=True: mft
    #        packs in the input's tag, checked by the C side)
    red_inputs = [
        ("nchw", NCHW), ("nhwc", NHWC), ("room4", NHWC_ROOM4), ("step2", NCHW_STEP2),
        ("perm", P(S4, (0, 3, 1, 2))),
    ]
    for ln, x in red_inputs:
        for dn, dims in [("c", [1]), ("hw", [2, 3]), ("all", []), ("n", [0]), ("wneg", [-1])]:
            for keep in (0, 1):
                for op in REDUCE:
                    if op != "sum" and ln not in ("nchw", "nhwc"):
                        continue
                    if op == "amax" and dn in ("n", "wneg"):
                        continue
                    add("red_%s_%s_%s_k%d" % (op, ln, dn, keep), op, [x], [dims, keep])
    for keep in (0, 1):
        k = "k%d" % keep
        add("red_sum_r5cl_c_" + k, "sum", [n5cl], [[1], keep])
        add("red_mean_r5cl_dhw_" + k, "mean", [n5cl], [[2, 3, 4], keep])
        add("red_amax_r5cl_d_" + k, "amax", [n5cl], [[2], keep])
        add("red_sum_r3nlc_l_" + k, "sum", [nlc], [[2], keep])
        add("red_sum_r3nlc_c_" + k, "sum", [nlc], [[1], keep])
        add("red_sum_c1cltag_hw_" + k, "sum", [T((2, 1, 4, 5), "cl", tag="channels_last")],
            [[2, 3], keep])
        add("red_mean_hw1cltag_n_" + k, "mean", [T((2, 3, 1, 1), "cl", tag="channels_last")],
            [[0], keep])
        add("red_sum_i32_nhwc_c_" + k, "sum", [NHWC.with_(dt="i32")], [[1], keep])
        add("red_sum_u8_nhwc_hw_" + k, "sum", [NHWC.with_(dt="u8")], [[2, 3], keep])
        add("red_amax_u8_nhwc_c_" + k, "amax", [NHWC.with_(dt="u8")], [[1], keep])
        add("red_amax_i64_nchw_hw_" + k, "amax", [NCHW.with_(dt="i64")], [[2, 3], keep])
        add("red_mean_f64_nhwc_c_" + k, "mean", [NHWC.with_(dt="f64")], [[1], keep])
        add("err_red_mean_i32_" + k, "mean", [NHWC.with_(dt="i32")], [[1], keep])
        add("red_sum_empty_c0_" + k, "sum", [T((2, 0, 4, 5), "cl")], [[1], keep])
        add("red_mean_empty_c0_" + k, "mean", [T((2, 0, 4, 5), "cl")], [[1], keep])
        add("err_red_amax_empty_c0_" + k, "amax", [T((2, 0, 4, 5), "cl")], [[1], keep])
        add("red_amax_empty_other_" + k, "amax", [T((2, 0, 4, 5), "cl")], [[2], keep])
        add("red_sum_0d_" + k, "sum", [Z()], [[], keep])
        add("err_red_sum_dup_" + k, "sum", [NHWC], [[1, 1], keep])
        add("err_red_sum_range_" + k, "sum", [NHWC], [[4], keep])
        add("red_sum_r2_" + k, "sum", [P((3, 4), (1, 0))], [[0], keep])


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "elementwise_cases.txt")
    gen()
    body = []
    n_err = 0
    for name, op, args, inputs in cases:
        lines, err = render(name, op, args, inputs)
        n_err += err
        body.extend(lines)
    doc = __doc__
    fmt_part = doc[doc.index("File format"):]
    header = ["# mft elementwise/reduction golden data, generated by",
              "# tests/golden/gen_elementwise.py from PyTorch %s." % torch.__version__.split("a")[0],
              "# Do not edit: re-run `/usr/bin/python3 tests/golden/gen_elementwise.py`.",
              "# %d cases (%d expect an error)." % (len(cases), n_err), "#"]
    header += [("# " + l).rstrip() for l in fmt_part.rstrip().splitlines()]
    header += [""]
    with open(path, "w") as fh:
        fh.write("\n".join(header + body) + "\n")
    print("%d cases (%d errors) -> %s (%d bytes)"
          % (len(cases), n_err, path, os.path.getsize(path)))


if __name__ == "__main__":
    main()
