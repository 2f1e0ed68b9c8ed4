#!/usr/bin/python3
"""Generate tests/golden/norm_cases.txt: PyTorch-derived golden data for
mft_batch_norm / mft_group_norm / mft_instance_norm / mft_layer_norm
(include/mft/cnn.h, docs/spec.md §4).

Run with Debian's interpreter, which has PyTorch 1.13:

    /usr/bin/python3 tests/golden/gen_norm.py [output-path]

(default output: norm_cases.txt next to this script). Deterministic: no
randomness; re-running gives a byte-identical file.

File format (one record per line, tokens separated by single spaces; '#'
lines and blank lines are comments). A list is its length then the values.

    case NAME
    op batch_norm|group_norm|instance_norm|layer_norm
    input DTYPE SIZES FORMAT SEED   FORMAT contiguous|channels_last: the
                                    tensor is filled in logical order with
                                    fill(SEED, i), then converted to FORMAT
    params TRAINING MOMENTUM EPS GROUPS NNORM HAS_W HAS_B HAS_RS
                                    GROUPS: group_norm only; NNORM:
                                    layer_norm (normalized_shape = the last
                                    NNORM sizes, or WRONG sizes: see below)
    wshape LIST                     shape of weight/bias (and running stats
                                    for batch_norm: their length is LIST[0])
    nshape LIST                     layer_norm normalized_shape
    result error                    PyTorch rejects the call
  or
    values N V1 .. VN               y in logical order
    rmean N ..., rvar N ...         batch_norm with HAS_RS: running stats after
    end

Fill rules (identical in tests/ops/test_norm.c), i = logical index:
    x:      ((37 * i + 11 * SEED) % 23 - 11) / 4
    weight: 0.5 + ((5 * i + 1) % 7) / 4
    bias:   ((3 * i + 2) % 5 - 2) / 4
    rmean:  ((3 * i) % 5 - 2) / 8
    rvar:   0.5 + (i % 4) / 4
"""

import os
import sys

import torch
import torch.nn.functional as F

assert torch.__version__.startswith("1.13"), torch.__version__

DT = {"f32": torch.float32, "f64": torch.float64}


def fill(n, f, dt):
    return torch.tensor([f(i) for i in range(n)], dtype=DT[dt])


def fx(seed):
    return lambda i: ((37 * i + 11 * seed) % 23 - 11) / 4.0


def fw(i):
    return 0.5 + ((5 * i + 1) % 7) / 4.0


def fb(i):
    return ((3 * i + 2) % 5 - 2) / 4.0


def frm(i):
    return ((3 * i) % 5 - 2) / 8.0


def frv(i):
    return 0.5 + (i % 4) / 4.0


def numel(s):
    n = 1
    for v in s:
        n *= v
    return n


def fmt_list(v):
    return " ".join([str(len(v))] + [str(int(x)) for x in v])


def fmt_vals(t):
    vals = t.reshape(-1).tolist()
    return " ".join([str(len(vals))] + [repr(float(v)) for v in vals])


lines = []
names = set()


def case(name, op, dt, sizes, fmt, seed, training=True, momentum=0.1, eps=1e-5, groups=1,
         nnorm=1, has_w=True, has_b=True, has_rs=False, wshape=None, nshape=None):
    assert name not in names
    names.add(name)
    sizes = list(sizes)
    x = fill(numel(sizes), fx(seed), dt).reshape(sizes)
    if fmt == "channels_last":
        x = x.contiguous(memory_format=torch.channels_last if len(sizes) == 4 else
                         torch.channels_last_3d) if len(sizes) in (4, 5) else x
    if nshape is None:
        nshape = sizes[len(sizes) - nnorm:] if op == "layer_norm" else []
    if wshape is None:
        wshape = list(nshape) if op == "layer_norm" else [sizes[1] if len(sizes) > 1 else 1]
    w = fill(numel(wshape), fw, dt).reshape(wshape) if has_w else None
    b = fill(numel(wshape), fb, dt).reshape(wshape) if has_b else None
    rm = fill(wshape[0], frm, dt) if has_rs else None
    rv = fill(wshape[0], frv, dt) if has_rs else None
    out = ["case " + name, "op " + op, "input %s %s %s %d" % (dt, fmt_list(sizes), fmt, seed),
           "params %d %r %r %d %d %d %d %d" % (training, momentum, eps, groups, nnorm, has_w,
                                               has_b, has_rs),
           "wshape " + fmt_list(wshape), "nshape " + fmt_list(nshape)]
    try:
        if op == "batch_norm":
            y = F.batch_norm(x, rm, rv, w, b, training, momentum, eps)
        elif op == "group_norm":
            y = F.group_norm(x, groups, w, b, eps)
        elif op == "instance_norm":
            y = F.instance_norm(x, None, None, w, b, True, 0.1, eps)
        else:
            y = F.layer_norm(x, nshape, w, b, eps)
    except (RuntimeError, ValueError):
        out.append("result error")
    else:
        out.append("values " + fmt_vals(y))
        if has_rs:
            out.append("rmean " + fmt_vals(rm))
            out.append("rvar " + fmt_vals(rv))
    out.append("end")
    lines.extend(out)
    lines.append("")


for dt in ("f32", "f64"):
    for fmt in ("contiguous", "channels_last"):
        for sz in ([2, 3, 4, 5], [1, 4, 3, 2], [3, 1, 2, 2], [2, 5, 1, 1], [2, 2, 2, 3, 2]):
            tag = "%s_%s_%s" % (dt, fmt[:2], "x".join(map(str, sz)))
            for tr in (True, False):
                for hw in (True, False):
                    if sz == [1, 4, 3, 2] or sz[0] * numel(sz[2:]) > 1 or not tr:
                        case("bn_%s_t%d_w%d" % (tag, tr, hw), "batch_norm", dt, sz, fmt, 1,
                             training=tr, momentum=0.3, has_w=hw, has_b=hw, has_rs=True)
            case("bn_%s_nors" % tag, "batch_norm", dt, sz, fmt, 2, has_rs=False, has_b=False)
            for g in sorted({1, sz[1]}):
                # a group of one element has variance 0, and PyTorch's f32 kernel
                # (E[x^2] - mean^2 in float) leaves a rounding residue that
                # 1/sqrt(eps) amplifies to ~3e-5: not a golden value
                if dt == "f32" and sz[1] // g * numel(sz[2:]) == 1:
                    continue
                case("gn_%s_g%d" % (tag, g), "group_norm", dt, sz, fmt, 3, groups=g)
            case("in_%s" % tag, "instance_norm", dt, sz, fmt, 4, has_w=False, has_b=False)
            case("in_%s_w" % tag, "instance_norm", dt, sz, fmt, 5, has_w=True, has_b=True)
            for nn in (1, 2, len(sz)):
                case("ln_%s_n%d" % (tag, nn), "layer_norm", dt, sz, fmt, 6, nnorm=nn,
                     has_w=nn != 2, has_b=nn != 2)
    case("gn_%s_6ch_g3" % dt, "group_norm", dt, [2, 6, 3, 2], "contiguous", 7, groups=3)
    case("gn_%s_6ch_g2_cl" % dt, "group_norm", dt, [2, 6, 3, 2], "channels_last", 7, groups=2)
    case("bn_%s_rank2" % dt, "batch_norm", dt, [5, 3], "contiguous", 8, has_rs=True)
    case("bn_%s_rank3" % dt, "batch_norm", dt, [2, 3, 4], "contiguous", 8, has_rs=True)
    case("ln_%s_rank1" % dt, "layer_norm", dt, [7], "contiguous", 9, nnorm=1)
    case("ln_%s_rank3" % dt, "layer_norm", dt, [2, 3, 4], "contiguous", 9, nnorm=2)
    case("gn_%s_rank2" % dt, "group_norm", dt, [4, 6], "contiguous", 9, groups=3)
# errors
case("err_bn_wshape", "batch_norm", "f32", [2, 3, 2, 2], "contiguous", 1, wshape=[4])
case("err_bn_one_value", "batch_norm", "f32", [1, 3, 1, 1], "contiguous", 1)
case("err_gn_groups", "group_norm", "f32", [2, 4, 2, 2], "contiguous", 1, groups=3)
case("err_gn_wshape", "group_norm", "f32", [2, 4, 2, 2], "contiguous", 1, groups=2, wshape=[2])
case("err_gn_one_value", "group_norm", "f32", [1, 2, 1, 1], "contiguous", 1, groups=2)
case("err_in_spatial1", "instance_norm", "f32", [2, 4, 1, 1], "contiguous", 1)
case("err_ln_nshape", "layer_norm", "f32", [2, 3, 4], "contiguous", 1, nnorm=2, nshape=[3, 5])
case("err_ln_wshape", "layer_norm", "f32", [2, 3, 4], "contiguous", 1, nnorm=1, wshape=[3])

path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                          "norm_cases.txt")
with open(path, "w") as f:
    f.write("# Generated by tests/golden/gen_norm.py with PyTorch %s; do not edit.\n\n"
            % torch.__version__)
    f.write("\n".join(lines))
