#!/usr/bin/python3
"""Generate tests/golden/loss_cases.txt: PyTorch-derived golden values and
gradients for the losses of include/mft/loss.h (cross_entropy with class
indices and with probabilities, label smoothing, weight, ignore_index;
nll_loss; mse_loss; binary_cross_entropy_with_logits with weight and
pos_weight; the argmax accuracy count), in F32 and F64, for (C), (N, C),
(N, C, L) and (N, C, H, W) inputs.

Run with Debian's interpreter, which has PyTorch 1.13:

    /usr/bin/python3 tests/golden/gen_loss.py [output-path]

(default output: loss_cases.txt next to this script). Deterministic: a fixed
seed, so re-running gives a byte-identical file.

File format (tokens separated by single spaces; '#' lines are comments). A
LIST is its length followed by the values. A tensor is written as
    DTYPE FORMAT SIZES VALUES
with FORMAT contiguous | channels_last (the layout the C test builds the
tensor in; PyTorch's values do not depend on it) and VALUES the elements in
logical row-major order (exact decimal images of the stored values).

    case NAME
    op ce|nll|mse|bce|acc
    x TENSOR                  logits / logp / input / x
    target TENSOR             i64 class indices or floating probabilities
    weight none | weight TENSOR
    posw none | posw TENSOR   (bce only)
    params RED IGNORE EPS     RED none|mean|sum, ignore_index, label_smoothing
    gout TENSOR               gradient fed to backward (the output's sizes)
    out TENSOR                PyTorch's result (0-dim for mean / sum)
    gx LIST                   gradient w.r.t. x, logical order
    gt none | gt LIST         gradient w.r.t. a floating target
    end
"""

import os
import sys

import torch
import torch.nn.functional as F

assert torch.__version__.startswith("1.13"), torch.__version__

DT = {"f32": torch.float32, "f64": torch.float64, "i64": torch.int64}
gen = torch.Generator().manual_seed(20261122)
lines = []
names = set()


def rnd(sizes, dt, lo=-2.0, hi=2.0):
    t = torch.rand(sizes, generator=gen, dtype=torch.float64) * (hi - lo) + lo
    return grid(t).to(DT[dt])


def grid(t):
    """Values on a 2^-10 grid: exact in f32 and f64, short to write."""
    return torch.round(t.detach() * 1024) / 1024


def fmt_val(v, digits=17):
    if isinstance(v, int):
        return str(v)
    r = repr(float(v))
    if len(r) <= 8:
        return r
    return "%.*g" % (digits, v)


def digits_of(t):
    return 9 if t.dtype == torch.float32 else 12


def tensor_str(t, dt, fmt):
    vals = t.detach().reshape(-1).tolist()
    dg = digits_of(t)
    return "%s %s %d%s %d %s" % (dt, fmt, t.dim(), "".join(" %d" % s for s in t.shape),
                                 len(vals), " ".join(fmt_val(v, dg) for v in vals))


def list_str(t):
    vals = t.detach().reshape(-1).tolist()
    dg = digits_of(t)
    return "%d %s" % (len(vals), " ".join(fmt_val(v, dg) for v in vals))


def emit(name, op, dt, fmt, x, target, tdt, weight, posw, red, ignore, eps, out, gout, gx, gt):
    assert name not in names, name
    names.add(name)
    lines.append("case " + name)
    lines.append("op " + op)
    lines.append("x " + tensor_str(x, dt, fmt))
    tfmt = fmt if (tdt != "i64" and target.dim() == x.dim()) else "contiguous"
    lines.append("target " + tensor_str(target, tdt, tfmt))
    lines.append("weight " + ("none" if weight is None else tensor_str(weight, dt, "contiguous")))
    lines.append("posw " + ("none" if posw is None else tensor_str(posw, dt, "contiguous")))
    lines.append("params %s %d %s" % (red, ignore, repr(float(eps))))
    lines.append("gout " + tensor_str(gout, dt, "contiguous"))
    lines.append("out " + tensor_str(out, dt if op != "acc" else "i64", "contiguous"))
    lines.append("gx " + (list_str(gx) if gx is not None else "0"))
    lines.append("gt " + ("none" if gt is None else list_str(gt)))
    lines.append("end")


def make_gout(out, dt):
    if out.dim() == 0:
        return rnd((), dt, 0.25, 1.5)
    return rnd(tuple(out.shape), dt, -1.5, 1.5)


def targets(shape_pos, C, ignore_mode):
    t = torch.randint(0, C, shape_pos, generator=gen, dtype=torch.int64)
    flat = t.view(-1)
    ignore = -100
    if ignore_mode == "neg" and flat.numel() > 1:
        flat[1] = -100
        if flat.numel() > 4:
            flat[4] = -100
    elif ignore_mode == "cls":
        ignore = 1
        flat[0] = 1  # at least one ignored position
    return t, ignore


def run_cls(name, op, dt, fmt, shape, red, wmode, ignore_mode, eps, prob=False):
    C = shape[0] if len(shape) == 1 else shape[1]
    pos = () if len(shape) == 1 else tuple(s for i, s in enumerate(shape) if i != 1)
    x = rnd(shape, dt, -3, 3)
    if op == "nll":
        x = grid(torch.log_softmax(x, dim=0 if len(shape) == 1 else 1))
    x = x.clone().requires_grad_(True)
    weight = rnd((C,), dt, 0.2, 2.0) if wmode else None
    if prob:
        t = grid(torch.softmax(rnd(shape, dt, -2, 2), dim=0 if len(shape) == 1 else 1))
        t = t.clone().requires_grad_(True)
        ignore, tdt = -100, dt
    else:
        t, ignore = targets(pos, C, ignore_mode)
        tdt = "i64"
    if op == "ce":
        out = F.cross_entropy(x, t, weight=weight, ignore_index=ignore, reduction=red,
                              label_smoothing=eps)
    else:
        out = F.nll_loss(x, t, weight=weight, ignore_index=ignore, reduction=red)
    gout = make_gout(out, dt)
    out.backward(gout)
    emit(name, op, dt, fmt, x, t, tdt, weight, None, red, ignore, eps, out, gout, x.grad,
         t.grad if prob else None)


def run_ew(name, op, dt, fmt, shape, red, wshape=None, pw=False):
    x = rnd(shape, dt, -3, 3).requires_grad_(True)
    if op == "mse":
        t = rnd(shape, dt, -2, 2).requires_grad_(True)
        out = F.mse_loss(x, t, reduction=red)
        weight = posw = None
    else:
        t = rnd(shape, dt, 0, 1).requires_grad_(True)
        weight = rnd(wshape, dt, 0.2, 2.0) if wshape is not None else None
        posw = rnd((shape[-1],), dt, 0.3, 3.0) if pw else None
        out = F.binary_cross_entropy_with_logits(x, t, weight=weight, pos_weight=posw,
                                                 reduction=red)
    gout = make_gout(out, dt)
    out.backward(gout)
    emit(name, op, dt, fmt, x, t, dt, weight, posw, red, -100, 0.0, out, gout, x.grad, t.grad)


def run_acc(name, dt, shape, ties=False):
    C = shape[0] if len(shape) == 1 else shape[1]
    cdim = 0 if len(shape) == 1 else 1
    pos = () if len(shape) == 1 else tuple(s for i, s in enumerate(shape) if i != 1)
    x = rnd(shape, dt, -1, 1)
    if ties:
        x = torch.round(x * 2) / 2  # many equal maxima: the first one wins
    t = torch.randint(0, C, pos, generator=gen, dtype=torch.int64)
    am = x.argmax(dim=cdim)
    # make about half of them hits
    flat_t, flat_am = t.view(-1), am.reshape(-1)
    for i in range(0, flat_t.numel(), 2):
        flat_t[i] = flat_am[i]
    out = (x.argmax(dim=cdim) == t).sum()
    emit(name, "acc", dt, "contiguous", x, t, "i64", None, None, "sum", -100, 0.0, out,
         torch.zeros((), dtype=DT[dt]), None, None)


SHAPES = [
    ("nc4x3", (4, 3), "contiguous"),
    ("nc5x10", (5, 10), "contiguous"),
    ("c5", (5,), "contiguous"),
    ("ncl", (2, 4, 3), "contiguous"),
    ("nchw", (2, 3, 2, 3), "contiguous"),
    ("nhwc", (2, 3, 2, 3), "channels_last"),
]
REDS = ["none", "mean", "sum"]

for dt in ["f32", "f64"]:
    k = 0
    for sname, shape, fmt in SHAPES:
        for red in REDS:
            combos = [(w, e) for w in [False, True] for e in [0.0, 0.15]]
            if sname in ("nc5x10", "ncl", "c5"):  # one combination per reduction
                combos = [combos[(k + REDS.index(red)) % 4]]
            for wmode, eps in combos:
                if True:
                    ig = ["none", "neg", "cls"][k % 3] if len(shape) > 1 else "none"
                    k += 1
                    run_cls("ce_%s_%s_%s_w%d_e%g_%s" % (dt, sname, red, wmode, eps, ig), "ce", dt,
                            fmt, shape, red, wmode, ig, eps)
    # smoothing 1.0 and all-ignored mean (NaN)
    run_cls("ce_%s_eps1" % dt, "ce", dt, "contiguous", (4, 3), "mean", True, "neg", 1.0)
    for sname, shape, fmt in [SHAPES[0], SHAPES[2], SHAPES[5]]:
        for red in REDS:
            for wmode in [False, True]:
                eps = 0.2 if wmode else 0.0
                run_cls("ceprob_%s_%s_%s_w%d_e%g" % (dt, sname, red, wmode, eps), "ce", dt, fmt,
                        shape, red, wmode, "none", eps, prob=True)
    k = 0
    for sname, shape, fmt in [SHAPES[0], SHAPES[1], SHAPES[2], SHAPES[4], SHAPES[5]]:
        for red in REDS:
            for wmode in [False, True]:
                ig = ["none", "neg", "cls"][k % 3] if len(shape) > 1 else "none"
                k += 1
                run_cls("nll_%s_%s_%s_w%d_%s" % (dt, sname, red, wmode, ig), "nll", dt, fmt,
                        shape, red, wmode, ig, 0.0)
    for sname, shape, fmt in [("n3x4", (3, 4), "contiguous"), ("nchw", (2, 3, 2, 2), "contiguous"),
                              ("nhwc", (2, 3, 2, 2), "channels_last")]:
        for red in REDS:
            run_ew("mse_%s_%s_%s" % (dt, sname, red), "mse", dt, fmt, shape, red)
            variants = [(None, False), ((shape[-1],), True), ((shape[0],) + (1,) * (len(shape) - 1), False),
                        ((shape[0],) + (1,) * (len(shape) - 1), True)]
            for wi, (wshape, pw) in enumerate(variants):
                if len(shape) == 4 and wi % 2 == 0:
                    continue  # the plain and weight-only forms are covered by the 2-D cases
                run_ew("bce_%s_%s_%s_v%d" % (dt, sname, red, wi), "bce", dt, fmt, shape, red,
                       wshape, pw)
    run_acc("acc_%s_nc" % dt, dt, (9, 4))
    run_acc("acc_%s_ties" % dt, dt, (12, 5), ties=True)
    run_acc("acc_%s_nchw" % dt, dt, (2, 3, 2, 2))

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                         "loss_cases.txt")
with open(out, "w") as f:
    f.write("# mft loss golden data, generated by tests/golden/gen_loss.py from PyTorch %s.\n"
            % torch.__version__)
    f.write("# Do not edit: re-run `/usr/bin/python3 tests/golden/gen_loss.py`.\n")
    f.write("# %d cases. Format: see the generator's docstring.\n" % len(names))
    f.write("\n".join(lines) + "\n")
