#!/usr/bin/python3
"""Generate tests/golden/pool_cases.txt: PyTorch-derived golden data for mft's
2-D max and average pooling (mft/cnn.h, docs/spec.md §4).

Run with Debian's interpreter, which has PyTorch 1.13:

    /usr/bin/python3 tests/golden/gen_pool.py [output-path]

(default output: pool_cases.txt next to this script). The output is
deterministic (no randomness): re-running it must give a byte-identical file.

File format (plain text, one record per line, tokens separated by single
spaces; lines starting with '#' and blank lines are comments). An integer
list is written as its length followed by the values, e.g. "4 2 3 4 5".

    case NAME                          start of a case; NAME has no spaces
    op max|avg                         max = max_pool2d(return_indices=True),
                                       avg = avg_pool2d
    input SIZES FMT DTYPE GEN          a packed tensor of SIZES in FMT
                                       (contiguous | channels_last; rank 4 only
                                       for channels_last: torch.empty(SIZES,
                                       memory_format=channels_last), so C == 1
                                       inputs have channels_last strides too),
                                       DTYPE f32 | f64,
                                       values from GEN at logical (row-major)
                                       linear index i:
                                         ties:   ((i*37) % 23 - 11) / 4
                                         nan:    ties, but NaN where i % 7 == 3
                                         neginf: ties where i % 3 == 0, else -inf
    params KH KW SH SW PH PW DH DW CEIL CIP DIV
                                       kernel, stride (0 0 = default: the
                                       kernel), padding, dilation (max only;
                                       1 1 for avg), ceil_mode, count_include_pad
                                       (avg), divisor_override (avg; 0 = none)
    result error                       PyTorch rejects the call; then "end"
  or
    result ok                          followed by these lines, in this order:
    sizes LIST                         output sizes
    strides LIST|-                     output strides (PyTorch's); '-' for an empty
                                       channels_last result (PyTorch 1.13 returns
                                       it contiguous, docs/spec.md §4 keeps the tag)
    tag contiguous|channels_last       the format the output is packed in
                                       (rank 3: contiguous)
    values N v0 ... v(N-1)             all output values in logical order
                                       (%.9g; nan, inf, -inf spelled so)
    indices N i0 ... i(N-1)            max only: the return_indices values
    end
"""

import os
import sys

import torch
import torch.nn.functional as F

CL = torch.channels_last


def gen_values(n, gen):
    out = []
    for i in range(n):
        v = ((i * 37) % 23 - 11) / 4.0
        if gen == "nan" and i % 7 == 3:
            v = float("nan")
        elif gen == "neginf" and i % 3 != 0:
            v = float("-inf")
        out.append(v)
    return out


def make_input(sizes, fmt, dtype, gen):
    n = 1
    for s in sizes:
        n *= s
    t = torch.tensor(gen_values(n, gen), dtype=dtype).reshape(sizes)
    if fmt == "channels_last":
        # a fresh channels_last tensor: its strides are channels_last even
        # when they are ambiguous (C == 1 or H == W == 1), where
        # t.contiguous(memory_format=channels_last) would return t itself
        t = torch.empty(sizes, dtype=dtype, memory_format=CL).copy_(t)
    return t


def fmt_list(v):
    return " ".join(str(x) for x in [len(v)] + list(v))


def fmt_float(v):
    if v != v:
        return "nan"
    if v == float("inf"):
        return "inf"
    if v == float("-inf"):
        return "-inf"
    return "%.9g" % v


class Writer:
    def __init__(self):
        self.lines = []
        self.names = set()
        self.cases = 0
        self.errors = 0

    def case(self, name, op, sizes, fmt, dtype, gen, k, s, p, d, ceil, cip, div):
        assert name not in self.names, name
        self.names.add(name)
        tdt = torch.float32 if dtype == "f32" else torch.float64
        x = make_input(sizes, fmt, tdt, gen)
        stride = None if s == (0, 0) else list(s)
        try:
            if op == "max":
                y, idx = F.max_pool2d(x, list(k), stride, list(p), list(d), ceil_mode=ceil,
                                      return_indices=True)
            else:
                assert d == (1, 1)
                y = F.avg_pool2d(x, list(k), stride, list(p), ceil_mode=ceil,
                                 count_include_pad=cip,
                                 divisor_override=(div if div != 0 else None))
                idx = None
        except RuntimeError:
            y = None
        L = self.lines
        L.append("case %s" % name)
        L.append("op %s" % op)
        L.append("input %s %s %s %s" % (fmt_list(sizes), fmt, dtype, gen))
        L.append("params %d %d %d %d %d %d %d %d %d %d %d" % (k + s + p + d + (int(ceil), int(cip), div)))
        self.cases += 1
        if y is None:
            L.append("result error")
            self.errors += 1
        else:
            L.append("result ok")
            L.append("sizes %s" % fmt_list(y.shape))
            if y.numel() == 0 and fmt == "channels_last":
                # PyTorch 1.13 returns an empty channels_last input's result
                # contiguous; docs/spec.md §4 keeps the tag: strides not compared
                L.append("strides -")
            else:
                L.append("strides %s" % fmt_list(y.stride()))
            if y.numel() == 0:
                tag = fmt
            elif y.dim() == 4 and fmt == "channels_last":
                assert y.is_contiguous(memory_format=CL), name
                if idx is not None:
                    assert idx.stride() == y.stride(), name
                tag = "channels_last"
            else:
                assert y.is_contiguous(), name
                tag = "contiguous"
            L.append("tag %s" % tag)
            vals = y.contiguous().flatten().tolist()
            L.append("values %d %s" % (len(vals), " ".join(fmt_float(v) for v in vals)))
            if idx is not None:
                iv = idx.contiguous().flatten().tolist()
                L.append("indices %s" % fmt_list(iv))
        L.append("end")


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "pool_cases.txt")
    w = Writer()
    shapes = [(1, 3, 5, 6), (2, 2, 7, 5), (1, 1, 4, 4), (2, 4, 6, 7), (3, 1, 5, 5)]
    fmts = ["contiguous", "channels_last"]
    kernels = [(1, 1), (2, 2), (3, 3), (2, 3), (3, 2), (4, 1)]
    strides = [(0, 0), (1, 1), (2, 1), (2, 3)]
    pads = [(0, 0), (1, 1), (1, 0)]
    i = 0
    # max sweep: kernel x stride x padding x dilation x ceil_mode
    for k in kernels:
        for s in strides:
            for p in pads:
                if p[0] > k[0] // 2 or p[1] > k[1] // 2:
                    continue
                for d in [(1, 1), (2, 1)]:
                    for ceil in (False, True):
                        sh = shapes[i % len(shapes)]
                        fm = fmts[(i // len(shapes)) % 2]
                        w.case("max_k%d%d_s%d%d_p%d%d_d%d%d_c%d_%s" % (k + s + p + d + (int(ceil), fm[:2])),
                               "max", sh, fm, "f32", "ties", k, s, p, d, ceil, False, 0)
                        i += 1
    # avg sweep: kernel x stride x padding x ceil_mode x count_include_pad x divisor
    for k in kernels:
        for s in strides:
            for p in pads:
                if p[0] > k[0] // 2 or p[1] > k[1] // 2:
                    continue
                for ceil in (False, True):
                    for cip in (False, True):
                        if p == (0, 0) and cip:
                            continue
                        for div in (0, 3):
                            sh = shapes[i % len(shapes)]
                            fm = fmts[(i // len(shapes)) % 2]
                            w.case("avg_k%d%d_s%d%d_p%d%d_c%d_i%d_v%d_%s" % (k + s + p + (int(ceil), int(cip), div, fm[:2])),
                                   "avg", sh, fm, "f32", "ties", k, s, p, (1, 1), ceil, cip, div)
                            i += 1
    # special shapes, values, dtypes, ranks
    for fm in fmts:
        f = fm[:2]
        w.case("max_c16_" + f, "max", (2, 16, 9, 9), fm, "f32", "ties", (3, 3), (2, 2), (1, 1), (1, 1), False, False, 0)
        w.case("avg_c16_" + f, "avg", (2, 16, 9, 9), fm, "f32", "ties", (3, 3), (2, 2), (1, 1), (1, 1), True, True, 0)
        w.case("max_dil3_" + f, "max", (1, 5, 11, 10), fm, "f32", "ties", (3, 3), (1, 2), (1, 1), (3, 2), True, False, 0)
        w.case("max_out1x1_" + f, "max", (2, 3, 4, 5), fm, "f32", "ties", (4, 5), (0, 0), (0, 0), (1, 1), False, False, 0)
        w.case("avg_out1x1_" + f, "avg", (2, 3, 4, 5), fm, "f32", "ties", (4, 5), (0, 0), (0, 0), (1, 1), False, False, 0)
        w.case("max_hw1_" + f, "max", (2, 3, 1, 1), fm, "f32", "ties", (1, 1), (1, 1), (0, 0), (1, 1), False, False, 0)
        w.case("max_n1c1_" + f, "max", (1, 1, 6, 6), fm, "f32", "ties", (2, 2), (2, 2), (1, 1), (1, 1), True, False, 0)
        w.case("max_nan_" + f, "max", (2, 3, 6, 6), fm, "f32", "nan", (3, 3), (1, 1), (1, 1), (1, 1), False, False, 0)
        w.case("avg_nan_" + f, "avg", (2, 3, 6, 6), fm, "f32", "nan", (2, 2), (2, 2), (0, 0), (1, 1), False, False, 0)
        w.case("max_neginf_" + f, "max", (2, 3, 6, 6), fm, "f32", "neginf", (2, 2), (1, 1), (1, 1), (1, 1), False, False, 0)
        w.case("max_f64_" + f, "max", (2, 3, 7, 6), fm, "f64", "ties", (3, 2), (2, 1), (1, 1), (1, 2), True, False, 0)
        w.case("avg_f64_" + f, "avg", (2, 3, 7, 6), fm, "f64", "ties", (3, 2), (2, 1), (1, 1), (1, 1), True, False, 0)
        w.case("avg_divneg_" + f, "avg", (1, 2, 5, 5), fm, "f32", "ties", (2, 2), (2, 2), (1, 1), (1, 1), True, True, -2)
        w.case("avg_ceil_pad_" + f, "avg", (1, 2, 6, 6), fm, "f32", "ties", (3, 3), (2, 2), (1, 1), (1, 1), True, False, 0)
        w.case("max_batch0_" + f, "max", (0, 3, 6, 6), fm, "f32", "ties", (2, 2), (0, 0), (0, 0), (1, 1), False, False, 0)
        w.case("avg_batch0_" + f, "avg", (0, 3, 6, 6), fm, "f32", "ties", (2, 2), (0, 0), (0, 0), (1, 1), False, False, 0)
    w.case("max_rank3", "max", (3, 7, 6), "contiguous", "f32", "ties", (3, 2), (2, 2), (1, 1), (1, 1), True, False, 0)
    w.case("avg_rank3", "avg", (3, 7, 6), "contiguous", "f32", "ties", (3, 2), (2, 2), (1, 1), (1, 1), True, True, 0)
    w.case("max_rank3_c1", "max", (1, 5, 5), "contiguous", "f64", "nan", (2, 2), (1, 1), (0, 0), (2, 2), False, False, 0)
    # errors
    w.case("err_pad_max", "max", (1, 2, 5, 5), "contiguous", "f32", "ties", (3, 3), (1, 1), (2, 2), (1, 1), False, False, 0)
    w.case("err_pad_avg", "avg", (1, 2, 5, 5), "channels_last", "f32", "ties", (3, 3), (1, 1), (1, 2), (1, 1), False, False, 0)
    w.case("err_small_max", "max", (1, 2, 5, 5), "contiguous", "f32", "ties", (7, 7), (0, 0), (0, 0), (1, 1), False, False, 0)
    w.case("err_small_dil", "max", (1, 2, 5, 5), "contiguous", "f32", "ties", (3, 3), (1, 1), (0, 0), (3, 3), False, False, 0)
    w.case("err_small_avg", "avg", (1, 2, 3, 8), "channels_last", "f32", "ties", (4, 2), (0, 0), (0, 0), (1, 1), True, False, 0)
    w.case("err_dil0", "max", (1, 2, 5, 5), "contiguous", "f32", "ties", (2, 2), (1, 1), (0, 0), (0, 1), False, False, 0)
    w.case("err_stride_neg", "max", (1, 2, 5, 5), "contiguous", "f32", "ties", (2, 2), (-1, 1), (0, 0), (1, 1), False, False, 0)
    w.case("err_pad_neg", "avg", (1, 2, 5, 5), "contiguous", "f32", "ties", (2, 2), (1, 1), (0, -1), (1, 1), False, False, 0)
    w.case("err_kernel0", "avg", (1, 2, 5, 5), "contiguous", "f32", "ties", (0, 2), (1, 1), (0, 0), (1, 1), False, False, 0)
    w.case("err_c0", "max", (1, 0, 5, 5), "contiguous", "f32", "ties", (2, 2), (0, 0), (0, 0), (1, 1), False, False, 0)
    w.case("err_h0", "avg", (2, 3, 0, 5), "contiguous", "f32", "ties", (1, 1), (0, 0), (0, 0), (1, 1), False, False, 0)
    w.case("err_rank2", "max", (5, 5), "contiguous", "f32", "ties", (2, 2), (0, 0), (0, 0), (1, 1), False, False, 0)
    w.case("err_rank5", "avg", (1, 1, 2, 5, 5), "contiguous", "f32", "ties", (2, 2), (0, 0), (0, 0), (1, 1), False, False, 0)

    head = [
        "# mft pooling golden data, generated by tests/golden/gen_pool.py from PyTorch %s."
        % torch.__version__.split("a")[0].split("+")[0],
        "# Do not edit: re-run `/usr/bin/python3 tests/golden/gen_pool.py`.",
        "# %d cases (%d expect an error)." % (w.cases, w.errors),
        "#",
    ]
    doc = __doc__.split("File format", 1)[1]
    head += ["# File format" + doc.splitlines()[0]] + [("# " + l).rstrip() for l in doc.splitlines()[1:]]
    with open(out_path, "w") as f:
        f.write("\n".join(head + [""] + w.lines) + "\n")
    print("wrote %s: %d cases (%d errors)" % (out_path, w.cases, w.errors))


if __name__ == "__main__":
    main()
