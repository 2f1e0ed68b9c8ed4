#!/usr/bin/python3
"""Generate tests/golden/norm_backward_cases.txt: PyTorch-derived golden
gradients (autograd) of batch_norm / group_norm / instance_norm / layer_norm
for mft_*_norm_backward (include/mft/norm.h).

Run with Debian's interpreter, which has PyTorch 1.13:

    /usr/bin/python3 tests/golden/gen_norm_backward.py [output-path]

(default output: norm_backward_cases.txt next to this script). Deterministic.

File format (one record per line, tokens separated by single spaces; '#'
lines and blank lines are comments). A list is its length then the values.

    case NAME
    op batch_norm|group_norm|instance_norm|layer_norm
    input DTYPE SIZES FORMAT SEED   x and grad_out filled in logical order,
                                    then converted to FORMAT
    params TRAINING EPS GROUPS NNORM HAS_W
    grad_x N V1 .. VN               logical order
    grad_weight N ...               (0 values when HAS_W is 0)
    grad_bias N ...                 (bias always present)
    end

Fill rules (identical in tests/autograd/test_norm_backward.c), i = logical index:
    x:        ((37 * i + 11 * SEED) % 23 - 11) / 4
    grad_out: ((13 * i + 7 * SEED) % 17 - 8) / 8
    weight:   0.5 + ((5 * i + 1) % 7) / 4
    bias:     ((3 * i + 2) % 5 - 2) / 4
    rmean:    ((3 * i) % 5 - 2) / 8         (batch_norm eval)
    rvar:     0.5 + (i % 4) / 4
"""

import os
import sys

import torch
import torch.nn.functional as F

assert torch.__version__.startswith("1.13"), torch.__version__

DT = {"f32": torch.float32, "f64": torch.float64}


def fill(n, f, dt):
    return torch.tensor([f(i) for i in range(n)], dtype=DT[dt])


def numel(s):
    n = 1
    for v in s:
        n *= v
    return n


def fmt_list(v):
    return " ".join([str(len(v))] + [str(int(x)) for x in v])


def fmt_vals(t):
    vals = [] if t is None else t.reshape(-1).tolist()
    return " ".join([str(len(vals))] + [repr(float(v)) for v in vals])


def to_fmt(t, fmt):
    if fmt == "channels_last" and t.dim() in (4, 5):
        return t.contiguous(memory_format=torch.channels_last if t.dim() == 4 else
                            torch.channels_last_3d)
    return t


lines = []
names = set()


def case(name, op, dt, sizes, fmt, seed, training=True, eps=1e-5, groups=1, nnorm=1, has_w=True):
    assert name not in names
    names.add(name)
    n = numel(sizes)
    x = to_fmt(fill(n, lambda i: ((37 * i + 11 * seed) % 23 - 11) / 4.0, dt).reshape(sizes), fmt)
    g = to_fmt(fill(n, lambda i: ((13 * i + 7 * seed) % 17 - 8) / 8.0, dt).reshape(sizes), fmt)
    x.requires_grad_(True)
    wshape = list(sizes[len(sizes) - nnorm:]) if op == "layer_norm" else [sizes[1]]
    w = fill(numel(wshape), lambda i: 0.5 + ((5 * i + 1) % 7) / 4.0, dt).reshape(wshape) \
        if has_w else None
    b = fill(numel(wshape), lambda i: ((3 * i + 2) % 5 - 2) / 4.0, dt).reshape(wshape)
    if w is not None:
        w.requires_grad_(True)
    b.requires_grad_(True)
    ins = [x] + ([w] if w is not None else []) + [b]
    if op == "batch_norm":
        rm = rv = None
        if not training:
            rm = fill(sizes[1], lambda i: ((3 * i) % 5 - 2) / 8.0, dt)
            rv = fill(sizes[1], lambda i: 0.5 + (i % 4) / 4.0, dt)
        y = F.batch_norm(x, rm, rv, w, b, training, 0.1, eps)
    elif op == "group_norm":
        y = F.group_norm(x, groups, w, b, eps)
    elif op == "instance_norm":
        if fmt == "channels_last" and sizes[0] == 1:
            # PyTorch 1.13 bug: instance_norm's backward with a channels_last
            # grad_out and N == 1 gives wrong gradients (even grad_bias is
            # not the sum of grad_out); the values are those of contiguous
            # x and grad_out.
            x = x.detach().contiguous().requires_grad_(True)
            ins[0] = x
            g = g.contiguous()
        y = F.instance_norm(x, None, None, w, b, True, 0.1, eps)
    else:
        y = F.layer_norm(x, wshape, w, b, eps)
    grads = torch.autograd.grad(y, ins, g)
    gx = grads[0]
    gw = grads[1] if w is not None else None
    gb = grads[-1]
    lines.extend(["case " + name, "op " + op,
                  "input %s %s %s %d" % (dt, fmt_list(sizes), fmt, seed),
                  "params %d %r %d %d %d" % (training, eps, groups, nnorm, has_w),
                  "grad_x " + fmt_vals(gx.detach()),
                  "grad_weight " + fmt_vals(None if gw is None else gw.detach()),
                  "grad_bias " + fmt_vals(gb.detach()), "end", ""])


seed = 0
for dt in ("f32", "f64"):
    for fmt in ("contiguous", "channels_last"):
        f = "cl" if fmt == "channels_last" else "co"
        for sizes in ([2, 3, 4, 5], [1, 4, 3, 3], [3, 2, 2, 3, 2], [4, 5, 1, 1]):
            sn = "x".join(map(str, sizes))
            for tr in (True, False):
                for hw in (True, False):
                    if not tr and not hw:
                        continue
                    seed += 1
                    case("bn_%s_%s_%s_t%d_w%d" % (dt, f, sn, tr, hw), "batch_norm", dt, sizes,
                         fmt, seed, training=tr, has_w=hw)
            C = sizes[1]
            for gr in sorted(set([1, 2 if C % 2 == 0 else 1, C])):
                if sizes[0] * (C // gr) * numel(sizes[2:]) <= 1:
                    continue
                seed += 1
                case("gn_%s_%s_%s_g%d" % (dt, f, sn, gr), "group_norm", dt, sizes, fmt, seed,
                     groups=gr, eps=1e-3)
            if numel(sizes[2:]) > 1:
                seed += 1
                case("in_%s_%s_%s" % (dt, f, sn), "instance_norm", dt, sizes, fmt, seed)
            for nn in (1, 2, 3):
                seed += 1
                case("ln_%s_%s_%s_n%d" % (dt, f, sn, nn), "layer_norm", dt, sizes, fmt, seed,
                     nnorm=nn, has_w=nn != 2)
        seed += 1
        case("bn_%s_%s_3d" % (dt, f), "batch_norm", dt, [3, 4, 5], fmt, seed)
        seed += 1
        case("ln_%s_%s_2d" % (dt, f), "layer_norm", dt, [3, 7], fmt, seed, nnorm=1)

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                          "norm_backward_cases.txt")
with open(out, "w") as fp:
    fp.write("# Generated by tests/golden/gen_norm_backward.py with PyTorch %s; do not edit.\n\n"
             % torch.__version__)
    fp.write("\n".join(lines))
print("%d cases -> %s" % (len(names), out))
