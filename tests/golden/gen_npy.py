#!/usr/bin/python3
"""tests/golden/gen_npy.py — writes the .npy golden files of tests/io/test_npy.c
with NumPy (1.24 on Debian bookworm: /usr/bin/python3 tests/golden/gen_npy.py),
and tests/golden/npy/cases.txt, which says what each file holds as NumPy sees it.
With a directory argument it writes there instead: tests/io/test_interop_npy.c
runs it live into a scratch directory and checks those files the same way.

Every array's values are v(i) for its C-order logical index i (the same formula
as tests/io/test_npy.c uses; see value()), cast to the array's dtype by NumPy.
cases.txt, one line per file:
    load NAME DESCR VERSION FORTRAN SHAPE WSUM PLAIN
        NumPy's descr and format version of the file, fortran_order (0/1), the
        logical shape ('-' for rank 0), WSUM = sum over the C-order logical
        elements of float64(a[i]) * (i % 7 + 1), computed by NumPy, and PLAIN
        1 when the array is value(SHAPE) itself (0: a transposed copy of one);
    refuse NAME DESCR
        a file whose dtype mft has no counterpart for (DESCR as NumPy writes it).
"""
import os
import sys

import numpy as np
from numpy.lib import format as npf

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "npy")


def value(shape, dtype):
    """v(i) = (i * 7) % 23 - 5 (u8: no offset), i the C-order linear index;
    i64 scaled by 2**40 so all 8 bytes matter; f32/f64 divided by 4."""
    n = int(np.prod(shape)) if len(shape) else 1
    i = np.arange(n, dtype=np.int64)
    v = (i * 7) % 23
    dt = np.dtype(dtype)
    if dt.kind == "u":
        out = v
    elif dt.kind == "i":
        out = (v - 5) * (2**40 if dt.itemsize == 8 else 1)
    else:
        out = (v - 5) / 4.0
    return out.astype(dt).reshape(shape)


def wsum(a):
    flat = a.reshape(-1).astype(np.float64)
    w = np.arange(flat.size) % 7 + 1
    return float(np.sum(flat * w))


def save(name, a, version=None, fortran=False, plain=1):
    path = os.path.join(OUT, name + ".npy")
    arr = a.copy(order="F" if fortran else "C")
    with open(path, "wb") as f:
        npf.write_array(f, arr, version=version, allow_pickle=False)
    with open(path, "rb") as f:
        ver = npf.read_magic(f)
        shape, fo, dt = npf._read_array_header(f, ver)
    assert shape == a.shape and bool(fo) == (fortran and a.ndim > 1 and not arr.flags.c_contiguous)
    return "load %s %s %d %d %s %.17g %d" % (
        name, dt.str, ver[0], int(fo), ",".join(map(str, shape)) or "-", wsum(a), plain)


def main():
    os.makedirs(OUT, exist_ok=True)
    lines = []
    for dt, tag in (("<f4", "f4"), ("<f8", "f8"), ("<i4", "i4"), ("<i8", "i8"), ("|u1", "u1")):
        lines.append(save("c_%s_2x3x4x5" % tag, value((2, 3, 4, 5), dt)))
        lines.append(save("fortran_%s_3x4x5" % tag, value((3, 4, 5), dt), fortran=True))
    # '<u1': NumPy writes '|u1', so the header is written by hand with its writer
    path = os.path.join(OUT, "lt_u1_6.npy")
    a = value((6,), "u1")
    with open(path, "wb") as f:
        npf.write_array_header_1_0(f, {"descr": "<u1", "fortran_order": False, "shape": (6,)})
        f.write(a.tobytes())
    with open(path, "rb") as f:
        npf.read_magic(f)
        assert npf.read_array_header_1_0(f)[2] == np.dtype("u1")
    lines.append("load lt_u1_6 <u1 1 0 6 %.17g 1" % wsum(a))
    # versions 2.0 and 3.0
    lines.append(save("v2_f4_2x3", value((2, 3), "<f4"), version=(2, 0)))
    lines.append(save("v3_i4_2x3", value((2, 3), "<i4"), version=(3, 0)))
    lines.append(save("v2_fortran_f8_2x3x2", value((2, 3, 2), "<f8"), version=(2, 0), fortran=True))
    # ranks 0..5 and empty arrays
    for shape in ((), (7,), (3, 4), (2, 3, 4), (1, 2, 3, 4, 2)):
        lines.append(save("rank%d_f8" % len(shape), value(shape, "<f8")))
    for shape in ((0,), (0, 3), (2, 0, 4), (2, 3, 0, 1)):
        lines.append(save("empty_f4_%s" % "x".join(map(str, shape)), value(shape, "<f4")))
    lines.append(save("fortran_empty_i8_0x3", value((0, 3), "<i8"), fortran=True))
    # big-endian files: byte-swapped by mft on load
    for dt, tag in ((">f4", "f4"), (">f8", "f8"), (">i4", "i4"), (">i8", "i8")):
        lines.append(save("be_%s_2x3x2" % tag, value((2, 3, 2), dt)))
    lines.append(save("be_fortran_f8_3x2", value((3, 2), ">f8"), fortran=True))
    # a channels_last batch as NumPy holds it: (N,H,W,C), and rank 3 / 5
    x = value((2, 3, 4, 5), "<f4")
    lines.append(save("nhwc_f4_2x4x5x3", np.ascontiguousarray(x.transpose(0, 2, 3, 1)), plain=0))
    lines.append(save("nlc_i4_2x5x3", np.ascontiguousarray(value((2, 3, 5), "<i4").transpose(0, 2, 1)),
                      plain=0))
    lines.append(save("ndhwc_f8_1x2x2x3x3",
                      np.ascontiguousarray(value((1, 3, 2, 2, 3), "<f8").transpose(0, 2, 3, 4, 1)),
                      plain=0))
    # dtypes mft refuses
    refuse = [("f2", np.zeros((2, 2), "<f2")), ("bool", np.zeros((3,), "?")),
              ("i1", np.zeros((3,), "i1")), ("c8", np.zeros((2,), "<c8")),
              ("u4", np.zeros((2,), "<u4")), ("i2", np.zeros((2,), "<i2")),
              ("struct", np.zeros((2,), [("a", "<f4"), ("b", "<i4")])),
              ("datetime", np.zeros((2,), "<M8[s]")), ("str", np.array(["ab", "c"]))]
    for tag, a in refuse:
        path = os.path.join(OUT, "refuse_%s.npy" % tag)
        with open(path, "wb") as f:
            npf.write_array(f, a, allow_pickle=False)
        descr = npf.dtype_to_descr(a.dtype)
        lines.append("refuse refuse_%s %s" % (tag, descr if isinstance(descr, str) else "list"))
    # an object array needs pickling: refused for its descr '|O'
    path = os.path.join(OUT, "refuse_object.npy")
    with open(path, "wb") as f:
        npf.write_array(f, np.array([1, "a"], dtype=object), allow_pickle=True)
    lines.append("refuse refuse_object |O")
    with open(os.path.join(OUT, "cases.txt"), "w") as f:
        f.write("# written by tests/golden/gen_npy.py with NumPy %s\n" % np.__version__)
        f.write("\n".join(lines) + "\n")
    print("%d files under %s" % (len(lines), OUT))


if __name__ == "__main__":
    sys.exit(main())
