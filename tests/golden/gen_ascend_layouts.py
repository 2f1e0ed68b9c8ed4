#!/usr/bin/python3
"""tests/golden/gen_ascend_layouts.py -- writes tests/golden/ascend_layouts.txt,
the Ascend golden data for tests/tensor/test_layout_desc.c.

Run by hand: /usr/bin/python3 tests/golden/gen_ascend_layouts.py > tests/golden/ascend_layouts.txt

Each format is built the way the Ascend documentation defines it, as NumPy
pad -> reshape -> transpose of the plain tensor (zero pads), from a logical
tensor holding (linear index + 1); the physical slot of element i is where
i + 1 lands in the flattened result (0 marks a pad lane). Where the
documentation gives two routes (NCHW and NHWC for NC1HWC0, NCHW and HWCN for
FRACTAL_Z) both are computed and must agree. C0 = 32 for 1-byte elements and
16 otherwise, N0 = 16 (Graph Engine GetCubeSizeByDataType); the FRACTAL_NZ
fractal is 16 x (32 bytes / element size).

Output, one case per line: <format> <elem_bytes> <ndim> <sizes..> <nslots>
<slot of element 0> <slot of element 1> ...  ('#' lines are comments)."""
import numpy as np


def ceil(a, b):
    return (a + b - 1) // b


def c0_of(eb):
    return 32 if eb == 1 else 16


def logical(sizes):
    return (np.arange(int(np.prod(sizes)), dtype=np.int64) + 1).reshape(sizes)


def nc1hwc0(x, eb):
    n, c, h, w = x.shape
    c0 = c0_of(eb)
    c1 = ceil(c, c0)
    p = np.pad(x, [(0, 0), (0, c1 * c0 - c), (0, 0), (0, 0)])
    a = p.reshape([n, c1, c0, h, w]).transpose([0, 1, 3, 4, 2])
    nhwc = np.pad(x.transpose([0, 2, 3, 1]), [(0, 0), (0, 0), (0, 0), (0, c1 * c0 - c)])
    b = nhwc.reshape([n, h, w, c1, c0]).transpose([0, 3, 1, 2, 4])
    assert (a == b).all()
    return a


def ndc1hwc0(x, eb):
    n, c, d, h, w = x.shape
    c0 = c0_of(eb)
    c1 = ceil(c, c0)
    ndhwc = np.pad(x.transpose([0, 2, 3, 4, 1]), [(0, 0)] * 4 + [(0, c1 * c0 - c)])
    return ndhwc.reshape([n, d, h, w, c1, c0]).transpose([0, 1, 4, 2, 3, 5])


def fractal_z(x, eb):
    k, c, r, s = x.shape
    c0, n0 = c0_of(eb), 16
    c1, k1 = ceil(c, c0), ceil(k, n0)
    p = np.pad(x, [(0, k1 * n0 - k), (0, c1 * c0 - c), (0, 0), (0, 0)])
    a = p.reshape([k1, n0, c1, c0, r, s]).transpose([2, 4, 5, 0, 1, 3]).reshape(
        [c1 * r * s, k1, n0, c0])
    hwcn = np.pad(x.transpose([2, 3, 1, 0]), [(0, 0), (0, 0), (0, c1 * c0 - c), (0, k1 * n0 - k)])
    b = hwcn.reshape([r, s, c1, c0, k1, n0]).transpose([2, 0, 1, 4, 5, 3]).reshape(
        [c1 * r * s, k1, n0, c0])
    assert (a == b).all()
    return a


def fractal_nz(x, eb):
    batch = x.shape[:-2]
    m, n = x.shape[-2:]
    m0, n0 = 16, 32 // eb
    m1, n1 = ceil(m, m0), ceil(n, n0)
    b = int(np.prod(batch)) if batch else 1
    p = np.pad(x.reshape([b, m, n]), [(0, 0), (0, m1 * m0 - m), (0, n1 * n0 - n)])
    return p.reshape([b, m1, m0, n1, n0]).transpose([0, 3, 1, 2, 4])


CASES = [
    ("NC1HWC0", nc1hwc0, 2, (2, 17, 2, 3)),
    ("NC1HWC0", nc1hwc0, 1, (2, 3, 2, 2)),
    ("NC1HWC0", nc1hwc0, 4, (1, 40, 1, 2)),
    ("NC1HWC0", nc1hwc0, 2, (1, 16, 2, 1)),
    ("NDC1HWC0", ndc1hwc0, 2, (2, 20, 3, 2, 3)),
    ("NDC1HWC0", ndc1hwc0, 1, (1, 33, 2, 1, 2)),
    ("FRACTAL_Z", fractal_z, 2, (20, 17, 3, 2)),
    ("FRACTAL_Z", fractal_z, 1, (17, 40, 1, 2)),
    ("FRACTAL_Z", fractal_z, 4, (5, 3, 2, 2)),
    ("FRACTAL_NZ", fractal_nz, 2, (2, 20, 28)),
    ("FRACTAL_NZ", fractal_nz, 4, (20, 28)),
    ("FRACTAL_NZ", fractal_nz, 1, (3, 17, 40)),
    ("FRACTAL_NZ", fractal_nz, 8, (1, 2, 5, 9)),
]

print("# Ascend layouts from NumPy %s pad/reshape/transpose "
      "(tests/golden/gen_ascend_layouts.py; format described there)" % np.__version__)
for name, fn, eb, sizes in CASES:
    x = logical(sizes)
    flat = fn(x, eb).reshape(-1)
    pos = np.empty(x.size, dtype=np.int64)
    nz = np.nonzero(flat)[0]
    assert len(nz) == x.size
    pos[flat[nz] - 1] = nz
    print(" ".join([name, str(eb), str(len(sizes))] + [str(s) for s in sizes] + [str(flat.size)]
                   + [str(p) for p in pos]))
