#!/usr/bin/python3
"""Generate tests/golden/conv_cases.txt: PyTorch-derived golden data for mft's
convolutions (mft/conv.h): F.conv1d / conv2d / conv3d / conv_transpose2d and
their gradients (autograd), output sizes and strides.

Run with Debian's interpreter, which has PyTorch 1.13:

    /usr/bin/python3 tests/golden/gen_conv.py [output-path]

(default output: conv_cases.txt next to this script). Deterministic: re-running
gives a byte-identical file.

File format (one record per line, tokens separated by single spaces; '#'
lines and blank lines are comments). An integer list is its length followed by
the values ("4 2 3 4 5").

    case NAME
    op conv1d|conv2d|conv3d|conv_transpose2d
    dtype f32|f64
    x SIZES LAYOUT                 LAYOUT: contiguous | channels_last (rank 3:
                                   N,L,C packed; rank 5: channels_last_3d) |
                                   selunsq (N = 1 made by select(0, 1) of a
                                   channels_last batch of 2, then unsqueeze(0)) |
                                   slice (every other element of the last dim
                                   of a contiguous tensor twice as long + 1,
                                   starting at 1)
    w SIZES LAYOUT                 (contiguous | channels_last)
    bias 0|1                       bias of C_out values or none
    params LIST LIST LIST LIST G   stride, padding, dilation, output_padding
                                   (conv_transpose2d; zeros otherwise), groups
    result error                   PyTorch rejects the call; then "end"
  or
    result ok
    sizes LIST                     output sizes
    strides LIST|-                 output strides when PyTorch's output layout
                                   is the one docs/spec.md §4 prescribes; '-'
                                   where mft deviates (1-D channels-last and
                                   3-D channels_last_3d results: PyTorch 1.13
                                   returns them contiguous), values only then
    y N v...                       output values, logical (row-major) order
    gx N v...                      gradients with grad_out = G (below), as
    gw N v...                      autograd computes them (values only: docs/spec.md
    gb N v...                      section 5 fixes their formats; gb only with
                                   bias)
    end

Values at logical linear index i (all exact in binary; sums of their
products are exact in f32 for these sizes):
    x: ((i*37) % 23 - 11) / 8     w: ((i*17) % 13 - 6) / 8
    b: ((i*7) % 5 - 2) / 4        G: ((i*29) % 19 - 9) / 8
"""

import os
import sys

import torch
import torch.nn.functional as F

CL = torch.channels_last


def gen(kind, n):
    if kind == "x":
        return [((i * 37) % 23 - 11) / 8.0 for i in range(n)]
    if kind == "w":
        return [((i * 17) % 13 - 6) / 8.0 for i in range(n)]
    if kind == "b":
        return [((i * 7) % 5 - 2) / 4.0 for i in range(n)]
    return [((i * 29) % 19 - 9) / 8.0 for i in range(n)]


def numel(sizes):
    n = 1
    for s in sizes:
        n *= s
    return n


def make(kind, sizes, layout, dtype):
    t = torch.tensor(gen(kind, numel(sizes)), dtype=dtype).reshape(sizes)
    nd = len(sizes)
    if layout == "contiguous":
        return t.clone()
    if layout == "channels_last":
        if nd == 4:
            return torch.empty(sizes, dtype=dtype, memory_format=CL).copy_(t)
        if nd == 5:
            return torch.empty(sizes, dtype=dtype,
                               memory_format=torch.channels_last_3d).copy_(t)
        assert nd == 3
        return t.transpose(1, 2).contiguous().transpose(1, 2)
    if layout == "selunsq":
        assert sizes[0] == 1 and nd == 4
        big = torch.empty((2,) + tuple(sizes[1:]), dtype=dtype, memory_format=CL).zero_()
        big[1].copy_(t[0])
        return big.select(0, 1).unsqueeze(0)
    if layout == "slice":
        bs = list(sizes)
        bs[-1] = 2 * sizes[-1] + 1
        big = torch.full(bs, 99.0, dtype=dtype)
        v = big[..., 1::2]
        v.copy_(t)
        return v
    raise ValueError(layout)


def fmt_list(v):
    return " ".join(str(x) for x in [len(v)] + list(v))


def fmt_vals(key, t):
    vals = t.detach().contiguous().flatten().tolist()
    return "%s %d %s" % (key, len(vals), " ".join("%.9g" % v for v in vals))


def spec_strides(sizes, cl):
    """Packed strides of docs/spec.md §4's format."""
    nd = len(sizes)
    if not cl:
        order = list(range(nd))
    else:
        order = [0] + list(range(2, nd)) + [1]
    st = [0] * nd
    acc = 1
    for d in reversed(order):
        st[d] = acc
        acc *= max(sizes[d], 1)
    return st


class Writer:
    def __init__(self):
        self.lines = []
        self.names = set()
        self.cases = 0
        self.errors = 0
        self.deviations = 0

    def case(self, name, op, dtype, xs, xl, ws, wl, bias, s, p, d, op_pad=None, g=1):
        assert name not in self.names, name
        self.names.add(name)
        tdt = torch.float32 if dtype == "f32" else torch.float64
        nsp = {"conv1d": 1, "conv2d": 2, "conv3d": 3, "conv_transpose2d": 2}[op]
        op_pad = op_pad or [0] * nsp
        x = make("x", xs, xl, tdt).detach().requires_grad_(True)
        w = make("w", ws, wl, tdt).detach().requires_grad_(True)
        cout = ws[1] * g if op == "conv_transpose2d" else ws[0]
        b = torch.tensor(gen("b", cout), dtype=tdt).requires_grad_(True) if bias else None
        try:
            if op == "conv1d":
                y = F.conv1d(x, w, b, s, p, d, g)
            elif op == "conv2d":
                y = F.conv2d(x, w, b, s, p, d, g)
            elif op == "conv3d":
                y = F.conv3d(x, w, b, s, p, d, g)
            else:
                y = F.conv_transpose2d(x, w, b, s, p, op_pad, g, d)
        except RuntimeError:
            y = None
        L = self.lines
        L.append("case %s" % name)
        L.append("op %s" % op)
        L.append("dtype %s" % dtype)
        L.append("x %s %s" % (fmt_list(xs), xl))
        L.append("w %s %s" % (fmt_list(ws), wl))
        L.append("bias %d" % int(bias))
        L.append("params %s %s %s %s %d" % (fmt_list(s), fmt_list(p), fmt_list(d),
                                             fmt_list(op_pad), g))
        self.cases += 1
        if y is None:
            L.append("result error")
            L.append("end")
            self.errors += 1
            return
        L.append("result ok")
        L.append("sizes %s" % fmt_list(y.shape))
        # docs/spec.md §4: channels-last if x's or w's layout is (1-D: x's)
        x_cl = xl in ("channels_last", "selunsq")
        w_cl = wl == "channels_last"
        cl = x_cl if nsp == 1 else (x_cl or w_cl)
        batched = len(xs) == nsp + 2
        want = spec_strides(list(y.shape), cl) if batched else None
        if batched and list(y.stride()) == want:
            L.append("strides %s" % fmt_list(y.stride()))
        elif not batched and y.is_contiguous() and not cl:
            L.append("strides %s" % fmt_list(y.stride()))
        else:
            L.append("strides -")
            L.append("# deviation: PyTorch strides %s, docs/spec.md §4 %s"
                     % (list(y.stride()), want))
            self.deviations += 1
        L.append(fmt_vals("y", y))
        G = torch.tensor(gen("g", y.numel()), dtype=tdt).reshape(y.shape)
        grads = torch.autograd.grad(y, [x, w] + ([b] if bias else []), G)
        L.append(fmt_vals("gx", grads[0]))
        L.append(fmt_vals("gw", grads[1]))
        if bias:
            L.append(fmt_vals("gb", grads[2]))
        L.append("end")


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "conv_cases.txt")
    W = Writer()
    C, Q = "contiguous", "channels_last"
    # conv2d: parameters sweep over the four x/w layout combinations
    combos = [(C, C), (Q, C), (C, Q), (Q, Q)]
    params2 = [
        ("basic", (2, 4, 6, 5), (3, 4, 3, 3), [1, 1], [0, 0], [1, 1], 1, True),
        ("stride2_pad1", (2, 4, 7, 6), (5, 4, 3, 3), [2, 2], [1, 1], [1, 1], 1, False),
        ("stride31_pad21", (1, 3, 9, 7), (2, 3, 3, 2), [3, 1], [2, 1], [1, 1], 1, True),
        ("dil2", (2, 2, 8, 7), (3, 2, 3, 3), [1, 2], [1, 2], [2, 2], 1, True),
        ("groups2", (2, 4, 5, 6), (6, 2, 3, 2), [1, 1], [1, 0], [1, 1], 2, True),
        ("depthwise_x2", (2, 3, 6, 6), (6, 1, 3, 3), [2, 1], [1, 1], [1, 2], 3, False),
        ("k1x1", (2, 5, 4, 3), (4, 5, 1, 1), [1, 1], [0, 0], [1, 1], 1, True),
        ("out1x1", (1, 2, 4, 5), (3, 2, 4, 5), [1, 1], [0, 0], [1, 1], 1, True),
    ]
    for i, (nm, xs, ws, s, p, d, g, bias) in enumerate(params2):
        for xl, wl in combos:
            dtype = "f64" if (i + len(xl) + len(wl)) % 5 == 0 else "f32"
            W.case("conv2d_%s_x%s_w%s" % (nm, xl[:2], wl[:2]), "conv2d", dtype, xs, xl, ws, wl,
                   bias, s, p, d, None, g)
    # conv2d pitfalls
    W.case("conv2d_cin1_xcontig_wcl", "conv2d", "f32", (2, 1, 5, 5), C, (3, 1, 2, 2), Q, True,
           [1, 1], [0, 0], [1, 1])
    W.case("conv2d_cin1_xcl_wcontig", "conv2d", "f32", (2, 1, 5, 5), Q, (3, 1, 2, 2), C, False,
           [1, 1], [1, 1], [1, 1])
    W.case("conv2d_cout1_xcl", "conv2d", "f32", (2, 3, 5, 4), Q, (1, 3, 2, 2), C, True,
           [1, 1], [0, 0], [1, 1])
    W.case("conv2d_selunsq", "conv2d", "f32", (1, 3, 5, 4), "selunsq", (2, 3, 3, 3), C, True,
           [1, 1], [1, 1], [1, 1])
    W.case("conv2d_selunsq_wcl", "conv2d", "f64", (1, 3, 5, 4), "selunsq", (2, 3, 3, 3), Q, False,
           [2, 1], [0, 1], [1, 1])
    W.case("conv2d_hw1_xcontig", "conv2d", "f32", (2, 3, 1, 1), C, (4, 3, 1, 1), C, True,
           [1, 1], [0, 0], [1, 1])
    W.case("conv2d_hw1_xcl", "conv2d", "f32", (2, 3, 1, 1), Q, (4, 3, 1, 1), C, True,
           [1, 1], [0, 0], [1, 1])
    W.case("conv2d_hw1_pad1", "conv2d", "f64", (1, 2, 1, 1), C, (2, 2, 3, 3), Q, False,
           [1, 1], [1, 1], [1, 1])
    W.case("conv2d_slice", "conv2d", "f32", (2, 2, 5, 4), "slice", (3, 2, 2, 2), C, True,
           [1, 1], [1, 0], [1, 1])
    W.case("conv2d_unbatched", "conv2d", "f32", (3, 6, 5), C, (2, 3, 3, 2), C, True,
           [2, 1], [1, 0], [1, 1])
    W.case("conv2d_batch0", "conv2d", "f32", (0, 2, 4, 4), C, (3, 2, 3, 3), C, True,
           [1, 1], [0, 0], [1, 1])
    # conv1d
    W.case("conv1d_basic", "conv1d", "f32", (2, 3, 9), C, (4, 3, 3), C, True, [1], [0], [1])
    W.case("conv1d_s2p1d2_g3", "conv1d", "f64", (2, 6, 10), C, (3, 2, 3), C, False, [2], [1], [2],
           None, 3)
    W.case("conv1d_nlc", "conv1d", "f32", (2, 4, 7), Q, (4, 4, 2), C, True, [1], [1], [1])
    W.case("conv1d_unbatched", "conv1d", "f32", (3, 8), C, (2, 3, 3), C, True, [3], [2], [1])
    # conv3d
    W.case("conv3d_basic", "conv3d", "f32", (2, 2, 4, 5, 4), C, (3, 2, 2, 3, 2), C, True,
           [1, 1, 1], [0, 1, 0], [1, 1, 1])
    W.case("conv3d_s2_g2", "conv3d", "f64", (1, 4, 5, 4, 5), C, (4, 2, 3, 2, 2), C, False,
           [2, 1, 2], [1, 0, 1], [1, 2, 1], None, 2)
    W.case("conv3d_xcl", "conv3d", "f32", (2, 3, 3, 4, 4), Q, (2, 3, 2, 2, 2), C, True,
           [1, 1, 1], [0, 0, 0], [1, 1, 1])
    W.case("conv3d_wcl", "conv3d", "f32", (1, 2, 3, 3, 4), C, (2, 2, 1, 2, 3), Q, False,
           [1, 2, 1], [1, 1, 1], [2, 1, 1])
    # conv_transpose2d
    W.case("convT_basic", "conv_transpose2d", "f32", (2, 3, 4, 3), C, (3, 2, 3, 3), C, True,
           [1, 1], [0, 0], [1, 1])
    W.case("convT_s2_op1", "conv_transpose2d", "f32", (2, 2, 3, 4), C, (2, 3, 3, 2), C, True,
           [2, 2], [1, 0], [1, 1], [1, 1])
    W.case("convT_s3_d2_op", "conv_transpose2d", "f64", (1, 2, 3, 3), C, (2, 2, 2, 3), C, False,
           [3, 1], [1, 1], [2, 2], [2, 1])
    W.case("convT_g2_xcl", "conv_transpose2d", "f32", (2, 4, 3, 3), Q, (4, 3, 2, 2), C, True,
           [2, 1], [0, 1], [1, 1], [1, 0], 2)
    W.case("convT_wcl", "conv_transpose2d", "f32", (1, 3, 3, 2), C, (3, 2, 3, 3), Q, True,
           [1, 2], [1, 1], [1, 1], [0, 1])
    W.case("convT_depthwise_cl", "conv_transpose2d", "f32", (2, 3, 3, 3), Q, (3, 2, 3, 3), Q,
           False, [2, 2], [1, 1], [1, 1], [0, 0], 3)
    W.case("convT_unbatched", "conv_transpose2d", "f32", (2, 3, 3), C, (2, 2, 2, 2), C, True,
           [2, 2], [0, 0], [1, 1])
    # errors
    W.case("err_channels", "conv2d", "f32", (1, 3, 5, 5), C, (2, 4, 3, 3), C, False,
           [1, 1], [0, 0], [1, 1])
    W.case("err_groups", "conv2d", "f32", (1, 4, 5, 5), C, (3, 2, 3, 3), C, False,
           [1, 1], [0, 0], [1, 1], None, 2)
    W.case("err_kernel_big", "conv2d", "f32", (1, 2, 3, 3), C, (2, 2, 4, 4), C, False,
           [1, 1], [0, 0], [1, 1])
    W.case("err_stride0", "conv2d", "f32", (1, 2, 5, 5), C, (2, 2, 3, 3), C, False,
           [0, 1], [0, 0], [1, 1])
    W.case("err_pad_neg", "conv2d", "f32", (1, 2, 5, 5), C, (2, 2, 3, 3), C, False,
           [1, 1], [-1, 0], [1, 1])
    W.case("err_dil0", "conv1d", "f32", (1, 2, 5), C, (2, 2, 3), C, False, [1], [0], [0])
    W.case("err_outpad", "conv_transpose2d", "f32", (1, 2, 3, 3), C, (2, 2, 3, 3), C, False,
           [2, 2], [0, 0], [1, 1], [2, 0])
    W.case("err_rank", "conv3d", "f32", (2, 3, 4), C, (2, 3, 2, 2, 2), C, False,
           [1, 1, 1], [0, 0, 0], [1, 1, 1])
    W.case("err_bias_dil_big", "conv3d", "f32", (1, 1, 3, 3, 3), C, (1, 1, 2, 2, 2), C, True,
           [1, 1, 1], [0, 0, 0], [3, 1, 1])

    head = [
        "# mft convolution golden data, generated by tests/golden/gen_conv.py from PyTorch %s."
        % torch.__version__.split("+")[0],
        "# Do not edit: re-run `/usr/bin/python3 tests/golden/gen_conv.py`.",
        "# %d cases (%d expect an error, %d with strides '-' where docs/spec.md deviates)."
        % (W.cases, W.errors, W.deviations),
        "# Format: see the generator's docstring.",
    ]
    with open(out_path, "w") as f:
        f.write("\n".join(head + [""] + W.lines) + "\n")
    print("wrote %s: %d cases (%d errors, %d deviations)" % (out_path, W.cases, W.errors,
                                                              W.deviations))


if __name__ == "__main__":
    main()
