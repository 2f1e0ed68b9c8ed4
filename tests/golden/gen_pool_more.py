#!/usr/bin/python3
"""Generate tests/golden/pool_more_cases.txt: PyTorch 1.13 golden data for
mft's 1-D / 3-D / adaptive pools and the pooling backward functions
(mft/pool.h, ops/pool/).

    /usr/bin/python3 tests/golden/gen_pool_more.py [output-path]

Deterministic output (no randomness). Format: one record per line, tokens
separated by single spaces; an integer list is its length then the values.

    case NAME
    op OP                 max1d avg1d max2d avg2d max3d avg3d amax2d aavg2d
                          amax3d aavg3d
    input SIZES FMT DTYPE GEN
                          packed tensor (contiguous | channels_last: rank 4/5
                          torch channels_last(_3d), rank 3 = (N,L,C) physical
                          order), DTYPE f32|f64, values at logical linear
                          index i from GEN:
                            ties: ((i*37) % 23 - 11) / 4
                            nan:  ties, but NaN where i % 7 == 3
                            ninf: ties, but -inf where i % 8 != 0
                                  and NaN where i % 29 == 5
    params K0 K1 K2 S0 S1 S2 P0 P1 P2 D0 D1 D2 CEIL CIP DIV
                          per spatial dim, right-aligned (a 2-D op uses the
                          last two of each triple, 1-D the last one; unused
                          entries are 0); stride 0 = default (the kernel);
                          adaptive ops: K1 K2 (2-D), K0 K1 K2 (3-D)
                          = the output size
    result error          PyTorch rejects the forward call; then "end"
  or
    result ok
    sizes LIST            forward result sizes
    tag FMT               the format the result is packed in
    strides LIST          (3-D adaptive cases) the strides of the result:
                          those of a packed tensor of its sizes in the tag's
                          memory format (torch.contiguous(memory_format=...));
                          a "# torch strides" comment gives PyTorch 1.13's
                          own (contiguous for every 3-D pool: mft keeps the
                          input's format, as its other pools)
    values N ...          forward values (logical order; nan/inf spelled so)
    indices N ...         max ops: the indices
    gsizes LIST           grad_x sizes (= input sizes)
    gstrides LIST         (3-D adaptive cases) grad_x's strides: packed in
                          the input's format (docs/spec.md §5)
    gvalues N ...         grad_x of the backward with grad_out packed in the
                          result's format, valued g(i) = ((i*13) % 17 - 8) / 8
                          at logical index i
    end
"""

import math
import os
import sys

import torch
import torch.nn.functional as F


def gen_values(n, gen):
    out = []
    for i in range(n):
        v = ((i * 37) % 23 - 11) / 4.0
        if gen == "nan" and i % 7 == 3:
            v = float("nan")
        if gen == "ninf":
            if i % 8 != 0:
                v = float("-inf")
            if i % 29 == 5:
                v = float("nan")
        out.append(v)
    return out


def fmt_num(v):
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return "%.9g" % v


def lst(v):
    return " ".join([str(len(v))] + [str(int(x)) for x in v])


def make(sizes, fmt, dtype, gen):
    n = 1
    for s in sizes:
        n *= s
    dt = torch.float32 if dtype == "f32" else torch.float64
    t = torch.tensor(gen_values(n, gen), dtype=dt).reshape(sizes)
    if fmt == "channels_last":
        if len(sizes) == 4:
            t = t.contiguous(memory_format=torch.channels_last)
        elif len(sizes) == 5:
            t = t.contiguous(memory_format=torch.channels_last_3d)
        else:  # rank 3 (N,L,C) physical order
            t = t.transpose(1, 2).contiguous().transpose(1, 2)
    return t


NSP = {"max1d": 1, "avg1d": 1, "max2d": 2, "avg2d": 2, "max3d": 3, "avg3d": 3,
       "amax2d": 2, "aavg2d": 2, "amax3d": 3, "aavg3d": 3}
ADAPTIVE = ("amax2d", "aavg2d", "amax3d", "aavg3d")


def run_forward(op, x, k, s, p, d, ceil, cip, div):
    if op == "max1d":
        return F.max_pool1d(x, k, s or None, p, d, ceil, return_indices=True)
    if op == "max2d":
        return F.max_pool2d(x, k, s or None, p, d, ceil, return_indices=True)
    if op == "max3d":
        return F.max_pool3d(x, k, s or None, p, d, ceil, return_indices=True)
    if op == "avg1d":
        return F.avg_pool1d(x, k, s or None, p, ceil, cip), None
    if op == "avg2d":
        return F.avg_pool2d(x, k, s or None, p, ceil, cip, div or None), None
    if op == "avg3d":
        return F.avg_pool3d(x, k, s or None, p, ceil, cip, div or None), None
    if op == "amax2d":
        return F.adaptive_max_pool2d(x, k, return_indices=True)
    if op == "aavg2d":
        return F.adaptive_avg_pool2d(x, k), None
    if op == "amax3d":
        return F.adaptive_max_pool3d(x, k, return_indices=True)
    if op == "aavg3d":
        return F.adaptive_avg_pool3d(x, k), None
    raise ValueError(op)


def out_tag(x, fmt):
    nd = x.dim()
    if fmt == "channels_last" and ((NSP_CUR[0] == 1 and nd == 3) or (NSP_CUR[0] >= 2 and nd == NSP_CUR[0] + 2)):
        return "channels_last"
    return "contiguous"


NSP_CUR = [2]


def packed_strides(shape, tag):
    """Strides of a packed tensor of shape in tag (what mft's result has):
    torch.empty's for that memory format (unlike .contiguous(memory_format),
    which keeps the strides of a tensor that already fits both formats)."""
    shape = tuple(shape)
    if tag == "channels_last" and len(shape) in (4, 5):
        mf = torch.channels_last if len(shape) == 4 else torch.channels_last_3d
        return list(torch.empty(shape, memory_format=mf).stride())
    if tag == "channels_last":  # rank 3 (N,L,C)
        return list(torch.empty(shape[0], shape[2], shape[1]).transpose(1, 2).stride())
    return list(torch.empty(shape).stride())


def case(lines, name, op, sizes, fmt, dtype, gen, k, s=None, p=None, d=None, ceil=False,
         cip=True, div=0):
    nsp = NSP[op]
    NSP_CUR[0] = nsp
    adaptive = op in ADAPTIVE
    with_strides = op in ("amax3d", "aavg3d")
    s = s if s is not None else [0] * nsp
    p = p if p is not None else [0] * nsp
    d = d if d is not None else [1] * nsp
    pad3 = lambda v: [0] * (3 - len(v)) + list(v)
    prm = pad3(k) + pad3(s) + pad3(p) + pad3(d if op.startswith("max") else [0] * nsp) + \
        [int(ceil), int(cip), div]
    lines.append("case %s" % name)
    lines.append("op %s" % op)
    lines.append("input %s %s %s %s" % (lst(sizes), fmt, dtype, gen))
    lines.append("params " + " ".join(str(int(v)) for v in prm))
    x = make(sizes, fmt, dtype, gen).requires_grad_(True)
    try:
        if adaptive:
            y, ind = run_forward(op, x, tuple(k), None, None, None, None, None, None)
        else:
            y, ind = run_forward(op, x, tuple(k), tuple(s) if any(s) else None, tuple(p),
                                 tuple(d), ceil, cip, div)
    except (RuntimeError, ValueError) as e:
        lines.append("result error")
        lines.append("# %s" % str(e).splitlines()[0][:150])
        lines.append("end")
        return
    tag = out_tag(x, fmt)
    lines.append("result ok")
    lines.append("sizes %s" % lst(y.shape))
    lines.append("tag %s" % tag)
    if with_strides:
        lines.append("strides %s" % lst(packed_strides(y.shape, tag)))
        lines.append("# torch strides %s" % lst(y.stride()))
    yv = y.detach().contiguous().reshape(-1).tolist()
    lines.append("values %d %s" % (len(yv), " ".join(fmt_num(v) for v in yv)))
    if ind is not None:
        iv = ind.contiguous().reshape(-1).tolist()
        lines.append("indices %d %s" % (len(iv), " ".join(str(v) for v in iv)))
    n = y.numel()
    g = torch.tensor([((i * 13) % 17 - 8) / 8.0 for i in range(n)], dtype=y.dtype).reshape(y.shape)
    if tag == "channels_last":
        if y.dim() == 4:
            g = g.contiguous(memory_format=torch.channels_last)
        elif y.dim() == 5:
            g = g.contiguous(memory_format=torch.channels_last_3d)
        else:
            g = g.transpose(1, 2).contiguous().transpose(1, 2)
    (gx,) = torch.autograd.grad(y, x, g)
    lines.append("gsizes %s" % lst(gx.shape))
    if with_strides:
        lines.append("gstrides %s" % lst(packed_strides(gx.shape, fmt if x.dim() == nsp + 2 else "contiguous")))
    gv = gx.contiguous().reshape(-1).tolist()
    lines.append("gvalues %d %s" % (len(gv), " ".join(fmt_num(v) for v in gv)))
    lines.append("end")


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "pool_more_cases.txt")
    L = ["# generated by gen_pool_more.py with torch %s; do not edit" % torch.__version__]
    i = 0
    # 1-D
    for fmt in ("contiguous", "channels_last"):
        for (k, s, p, d, ceil) in [(2, 0, 0, 1, False), (3, 2, 1, 1, False), (3, 2, 1, 2, True),
                                   (2, 3, 1, 1, True), (1, 1, 0, 1, False), (3, 1, 1, 1, False)]:
            for gen in ("ties", "nan"):
                i += 1
                case(L, "max1d_%d" % i, "max1d", [2, 3, 9], fmt, "f32", gen, [k], [s], [p], [d], ceil)
            for cip in (True, False):
                i += 1
                case(L, "avg1d_%d" % i, "avg1d", [2, 3, 9], fmt, "f64", "ties", [k], [s], [p],
                     None, ceil, cip)
    case(L, "max1d_unbatched", "max1d", [3, 7], "contiguous", "f32", "ties", [3], [2], [1])
    case(L, "avg1d_unbatched", "avg1d", [3, 7], "contiguous", "f64", "ties", [2], [1], [1])
    # 2-D backward
    for fmt in ("contiguous", "channels_last"):
        for (k, s, p, d, ceil) in [((3, 3), (2, 2), (1, 1), (1, 1), False),
                                   ((2, 2), (0, 0), (0, 0), (1, 1), False),
                                   ((3, 2), (1, 2), (1, 0), (2, 1), True),
                                   ((2, 3), (3, 1), (1, 1), (1, 2), True),
                                   ((3, 3), (1, 1), (1, 1), (1, 1), False)]:
            for gen in ("ties", "nan"):
                i += 1
                case(L, "max2d_%d" % i, "max2d", [1, 3, 7, 6], fmt, "f32", gen, k, s, p, d, ceil)
            for (cip, div) in [(True, 0), (False, 0), (True, 3)]:
                i += 1
                case(L, "avg2d_%d" % i, "avg2d", [1, 3, 7, 6], fmt,
                     "f32" if cip else "f64", "ties", k, s, p, None, ceil, cip, div)
    # 3-D
    for fmt in ("contiguous", "channels_last"):
        for (k, s, p, d, ceil) in [((2, 2, 2), (0, 0, 0), (0, 0, 0), (1, 1, 1), False),
                                   ((3, 3, 3), (2, 2, 2), (1, 1, 1), (1, 1, 1), False),
                                   ((3, 2, 2), (2, 1, 2), (1, 1, 0), (1, 2, 1), True),
                                   ((1, 3, 2), (1, 2, 2), (0, 1, 1), (1, 1, 1), True)]:
            for gen in ("ties", "nan"):
                i += 1
                case(L, "max3d_%d" % i, "max3d", [1, 2, 5, 4, 5], fmt, "f32", gen, k, s, p, d, ceil)
            for (cip, div) in [(True, 0), (False, 0), (False, 5)]:
                i += 1
                case(L, "avg3d_%d" % i, "avg3d", [1, 2, 5, 4, 5], fmt,
                     "f64" if div else "f32", "ties", k, s, p, None, ceil, cip, div)
    case(L, "max3d_unbatched", "max3d", [2, 4, 3, 5], "contiguous", "f64", "ties", (2, 2, 3),
         (1, 1, 2), (1, 0, 1))
    # adaptive
    for fmt in ("contiguous", "channels_last"):
        for out in [(1, 1), (2, 3), (3, 2), (5, 4), (7, 9), (4, 4)]:
            for gen in ("ties", "nan"):
                i += 1
                case(L, "amax2d_%d" % i, "amax2d", [1, 3, 5, 7], fmt, "f32", gen, out)
            i += 1
            case(L, "aavg2d_%d" % i, "aavg2d", [1, 3, 5, 7], fmt, "f64", "ties", out)
    case(L, "aavg2d_unbatched", "aavg2d", [3, 6, 5], "contiguous", "f32", "ties", (4, 2))
    case(L, "amax2d_unbatched", "amax2d", [3, 6, 5], "contiguous", "f32", "ties", (4, 2))
    # adaptive 3-D: global (1,1,1), in % out != 0, out > in, out == in, mixed;
    # NCDHW and NDHWC inputs, F32 and F64, NaN and -inf for max
    for fmt in ("contiguous", "channels_last"):
        for out in [(1, 1, 1), (2, 3, 4), (3, 2, 5), (5, 7, 6), (7, 9, 8), (4, 1, 3), (1, 5, 2)]:
            for gen in ("ties", "nan", "ninf"):
                i += 1
                case(L, "amax3d_%d" % i, "amax3d", [2, 3, 5, 7, 6], fmt,
                     "f64" if gen == "ninf" else "f32", gen, out)
            for dtype in ("f32", "f64"):
                i += 1
                case(L, "aavg3d_%d" % i, "aavg3d", [2, 3, 5, 7, 6], fmt, dtype, "ties", out)
    # (C, D, H, W) unbatched, in a contiguous and a rank-4 channels_last layout
    for fmt in ("contiguous", "channels_last"):
        case(L, "aavg3d_unbatched_%s" % fmt, "aavg3d", [3, 4, 6, 5], fmt, "f64", "ties", (3, 4, 2))
        case(L, "amax3d_unbatched_%s" % fmt, "amax3d", [3, 4, 6, 5], fmt, "f32", "nan", (3, 4, 2))
    # one channel, one plane; output larger than the input in every dim
    case(L, "aavg3d_c1", "aavg3d", [1, 1, 2, 3, 1], "channels_last", "f32", "ties", (3, 4, 2))
    case(L, "amax3d_c1", "amax3d", [1, 1, 2, 3, 1], "channels_last", "f32", "ninf", (3, 4, 2))
    # errors
    case(L, "err_max1d_pad", "max1d", [2, 3, 9], "contiguous", "f32", "ties", [2], [1], [2])
    case(L, "err_max1d_small", "max1d", [2, 3, 2], "contiguous", "f32", "ties", [3], [1], [0])
    case(L, "err_max1d_k0", "max1d", [2, 3, 9], "contiguous", "f32", "ties", [0])
    case(L, "err_avg1d_s0", "avg1d", [2, 3, 9], "contiguous", "f32", "ties", [2], [-1])
    case(L, "err_max3d_pad", "max3d", [1, 2, 4, 4, 4], "contiguous", "f32", "ties", (2, 2, 2),
         (1, 1, 1), (0, 2, 0))
    case(L, "err_max3d_dil0", "max3d", [1, 2, 4, 4, 4], "contiguous", "f32", "ties", (2, 2, 2),
         (1, 1, 1), (0, 0, 0), (1, 0, 1))
    case(L, "err_avg3d_small", "avg3d", [1, 2, 2, 4, 4], "contiguous", "f32", "ties", (3, 2, 2))
    case(L, "err_avg3d_rank", "avg3d", [2, 4, 4], "contiguous", "f32", "ties", (2, 2, 2))
    case(L, "err_aavg2d_rank", "aavg2d", [2, 4], "contiguous", "f32", "ties", (2, 2))
    case(L, "err_amax2d_zero", "amax2d", [2, 3, 0, 4], "contiguous", "f32", "ties", (2, 2))
    case(L, "err_aavg3d_rank", "aavg3d", [2, 4, 4], "contiguous", "f32", "ties", (2, 2, 2))
    case(L, "err_amax3d_rank", "amax3d", [3, 4], "contiguous", "f32", "ties", (2, 2, 2))
    case(L, "err_aavg3d_zero", "aavg3d", [1, 2, 0, 3, 3], "contiguous", "f32", "ties", (2, 2, 2))
    case(L, "err_amax3d_zero", "amax3d", [2, 0, 3, 3], "channels_last", "f32", "ties", (2, 2, 2))
    case(L, "err_aavg3d_neg", "aavg3d", [1, 2, 3, 4, 5], "contiguous", "f64", "ties", (-1, 2, 2))
    with open(path, "w") as f:
        f.write("\n".join(L) + "\n")
    print("wrote %s (%d cases)" % (path, i))


if __name__ == "__main__":
    main()
