#!/usr/bin/python3
"""Generate tests/golden/gemm_cases.txt: PyTorch-derived golden data for
mft_matmul / mft_linear (include/mft/cnn.h, "linear algebra").

Run with Debian's interpreter, which has PyTorch 1.13:

    /usr/bin/python3 tests/golden/gen_gemm.py [output-path]

(default output: gemm_cases.txt next to this script). Deterministic: re-running
it gives a byte-identical file.

File format (one record per line, tokens separated by single spaces; lines
starting with '#' are comments). An integer list is its length followed by the
values, e.g. "2 3 4".

    case NAME
    input DTYPE SIZES STRIDES OFFSET STORAGE_NUMEL SEED
                    one line per operand, in order (a, b) for matmul and
                    (x, w[, bias]) for linear: a flat storage of STORAGE_NUMEL
                    elements of DTYPE (f32 f64), element k = fill(SEED, k),
                    viewed with as_strided(SIZES, STRIDES, OFFSET)
    op matmul | linear | linear_nobias
    result error    PyTorch rejects the call; then "end"
  or
    result NDIM
    sizes LIST
    values N V1 .. VN      the result in row-major order when N <= 64
  or
    checksum N SUM         N > 64: SUM = sum_i value[i] * (i % 13 + 1) (float64)
    end

Fill rule (identical in the C test): r = (7 * k + 3 * SEED) % 11, value (r - 5) / 2.
"""

import os
import sys

import torch

DT = {"f32": torch.float32, "f64": torch.float64}


def fill(seed, n, dt):
    return torch.tensor([((7 * k + 3 * seed) % 11 - 5) / 2 for k in range(n)], dtype=DT[dt])


def contig_strides(sizes):
    st, acc = [], 1
    for s in reversed(sizes):
        st.append(acc)
        acc *= max(s, 1)
    return list(reversed(st))


def operand(dt, sizes, seed, perm=None, step=1, offset=0):
    """sizes with storage in dim order perm (slowest first), dims stepped."""
    nd = len(sizes)
    perm = list(range(nd)) if perm is None else perm
    phys = [sizes[p] * step for p in perm]
    pst = contig_strides(phys)
    strides = [0] * nd
    for i, p in enumerate(perm):
        strides[p] = pst[i] * step
    numel = offset + 1
    for s, t in zip(sizes, strides):
        numel += (s - 1) * t if s > 0 else 0
    return (dt, list(sizes), strides, offset, numel, seed)


def make(op):
    dt, sizes, strides, offset, numel, seed = op
    return torch.as_strided(fill(seed, numel, dt), sizes, strides, offset)


def lst(v):
    return " ".join(str(x) for x in [len(v)] + list(v))


def fmt(v):
    return repr(float(v))


CASES = [
    ("mm_2x3_3x4", "matmul", [operand("f32", [2, 3], 1), operand("f32", [3, 4], 2)]),
    ("mm_f64_5x7_7x9", "matmul", [operand("f64", [5, 7], 3), operand("f64", [7, 9], 4)]),
    ("mm_transposed_b", "matmul", [operand("f32", [6, 17], 5), operand("f32", [17, 20], 6, perm=[1, 0])]),
    ("mm_transposed_a_stepped", "matmul", [operand("f32", [13, 11], 7, perm=[1, 0], step=2, offset=3),
                                          operand("f32", [11, 19], 8, step=2, offset=1)]),
    ("mm_big_f32", "matmul", [operand("f32", [40, 300], 9), operand("f32", [300, 37], 10, perm=[1, 0])]),
    ("mm_big_f64", "matmul", [operand("f64", [33, 70], 11, perm=[1, 0]), operand("f64", [70, 29], 12)]),
    ("dot", "matmul", [operand("f32", [7], 13), operand("f32", [7], 14, step=3, offset=2)]),
    ("vec_mat", "matmul", [operand("f32", [5], 15), operand("f32", [5, 3], 16)]),
    ("mat_vec", "matmul", [operand("f64", [4, 5], 17), operand("f64", [5], 18)]),
    ("vec_batched", "matmul", [operand("f32", [5], 19), operand("f32", [2, 5, 3], 20)]),
    ("batched_vec", "matmul", [operand("f32", [2, 3, 5], 21, perm=[2, 0, 1]), operand("f32", [5], 22)]),
    ("batched_broadcast", "matmul", [operand("f32", [2, 1, 4, 6], 23), operand("f32", [3, 6, 5], 24, perm=[0, 2, 1])]),
    ("batched_2d_b", "matmul", [operand("f64", [3, 4, 6], 25, perm=[1, 0, 2]), operand("f64", [6, 5], 26)]),
    ("batched_big", "matmul", [operand("f32", [3, 20, 30], 27), operand("f32", [1, 30, 25], 28)]),
    ("err_inner", "matmul", [operand("f32", [2, 3], 29), operand("f32", [4, 5], 30)]),
    ("err_batch", "matmul", [operand("f32", [2, 3, 4], 31), operand("f32", [3, 4, 5], 32)]),
    ("err_dot", "matmul", [operand("f32", [3], 33), operand("f32", [4], 34)]),
    ("linear_2d", "linear", [operand("f32", [5, 8], 35), operand("f32", [6, 8], 36), operand("f32", [6], 37)]),
    ("linear_2d_nobias", "linear_nobias", [operand("f64", [5, 8], 38), operand("f64", [6, 8], 39)]),
    ("linear_1d", "linear", [operand("f32", [8], 40), operand("f32", [3, 8], 41), operand("f32", [3], 42)]),
    ("linear_4d_cl", "linear", [operand("f32", [2, 3, 4, 5], 43, perm=[0, 2, 3, 1]),
                                operand("f32", [7, 5], 44), operand("f32", [7], 45, step=2)]),
    ("linear_fmnist_like", "linear", [operand("f32", [8, 196], 46), operand("f32", [16, 196], 47),
                                      operand("f32", [16], 48)]),
    ("err_linear", "linear_nobias", [operand("f32", [5, 8], 49), operand("f32", [6, 7], 50)]),
]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "gemm_cases.txt")
    lines = ["# mft matmul/linear golden data, generated by tests/golden/gen_gemm.py from PyTorch %s."
             % torch.__version__,
             "# Do not edit: re-run `/usr/bin/python3 tests/golden/gen_gemm.py`.",
             "# %d cases." % len(CASES)]
    for name, op, ops in CASES:
        lines.append("case " + name)
        for o in ops:
            lines.append("input %s %s %s %d %d %d" % (o[0], lst(o[1]), lst(o[2]), o[3], o[4], o[5]))
        lines.append("op " + op)
        ts = [make(o) for o in ops]
        try:
            if op == "matmul":
                r = torch.matmul(ts[0], ts[1])
            elif op == "linear":
                r = torch.nn.functional.linear(ts[0], ts[1], ts[2])
            else:
                r = torch.nn.functional.linear(ts[0], ts[1])
        except RuntimeError:
            lines.append("result error")
            lines.append("end")
            continue
        lines.append("result %d" % r.dim())
        lines.append("sizes " + lst(r.shape))
        flat = r.reshape(-1).double()
        if flat.numel() <= 64:
            lines.append("values %d %s" % (flat.numel(), " ".join(fmt(v) for v in flat.tolist())))
        else:
            s = sum(v * (i % 13 + 1) for i, v in enumerate(flat.tolist()))
            lines.append("checksum %d %s" % (flat.numel(), fmt(s)))
        lines.append("end")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
