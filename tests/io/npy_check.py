#!/usr/bin/python3
"""tests/io/npy_check.py — NumPy's side of tests/io/test_interop_npy.c.

    npy_check.py DIR
reads DIR/manifest.txt, written by the C test next to the .npy files mft saved:
    NAME KIND DESCR VERSION SHAPE
and for each file checks with NumPy alone that np.load gives the array NumPy
computes for it from tests/golden/gen_npy.py's formula (value()):
    c    value(SHAPE)                                  (a logical save)
    T    value(SHAPE).T                                (the logical save of a transpose)
    F    value(SHAPE).T, column-major: NumPy's own file of it has fortran_order True
         (the physical save of a transpose)
    cl   value(SHAPE) with C moved last: (N,H,W,C) is np.ascontiguousarray(
         x.transpose(0, 2, 3, 1)), (N,L,C) and (N,D,H,W,C) likewise
    b8 / b16  value(SHAPE), C zero-padded to a multiple of 8 / 16 and cut into
         (N, C1, [D,] H, W, C0)
and that the file is byte-identical to what NumPy writes for that array
(np.lib.format.write_array, version VERSION; C order, F order for kind F):
header, padding to 64, data.
Then it writes DIR/extra_key.npy, a file whose header has one more key, and
reports how np.load answers it. Prints "OK NAME" / "FAIL NAME: why" per file and
"EXTRA_KEY: <np.load's error>"; exits 1 when a file failed.
"""
import io
import os
import sys

import numpy as np
from numpy.lib import format as npf

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden"))
from gen_npy import value  # noqa: E402


def expected(kind, dtype, shape):
    x = value(shape, dtype)
    if kind == "c":
        return x
    if kind in ("T", "F"):
        return x.T
    if kind == "cl":
        if x.ndim == 4:
            return np.ascontiguousarray(x.transpose(0, 2, 3, 1))
        return np.ascontiguousarray(np.moveaxis(x, 1, -1))
    if kind in ("b8", "b16"):
        c0 = 8 if kind == "b8" else 16
        c = x.shape[1]
        c1 = (c + c0 - 1) // c0
        pad = [(0, 0)] * x.ndim
        pad[1] = (0, c1 * c0 - c)
        xp = np.pad(x, pad)
        cut = xp.reshape((x.shape[0], c1, c0) + x.shape[2:])
        return np.ascontiguousarray(np.moveaxis(cut, 2, -1))
    raise ValueError("unknown kind " + kind)


def check(path, kind, descr, version, shape):
    want = expected(kind, descr, shape)
    a = np.load(path)
    if a.dtype != np.dtype(descr) or a.shape != want.shape or not np.array_equal(a, want):
        return "np.load gives %s %s, expected %s %s" % (a.dtype.str, a.shape, want.dtype.str, want.shape)
    with open(path, "rb") as f:
        ver = npf.read_magic(f)
        npf._read_array_header(f, ver)
        if f.tell() % 64:
            return "data at byte %d, not a multiple of 64" % f.tell()
    if ver != (version, 0):
        return "format version %s, expected %d.0" % (ver, version)
    buf = io.BytesIO()
    npf.write_array(buf, want.copy(order="F" if kind == "F" else "C"), version=(version, 0))
    with open(path, "rb") as f:
        if f.read() != buf.getvalue():
            return "bytes differ from NumPy's file of the same array"
    return None


def main():
    d = sys.argv[1]
    failed = 0
    with open(os.path.join(d, "manifest.txt")) as m:
        for line in m:
            name, kind, descr, version, shape = line.split()
            shape = tuple(int(s) for s in shape.split(",")) if shape != "-" else ()
            try:
                why = check(os.path.join(d, name), kind, descr, int(version), shape)
            except Exception as e:  # a file NumPy cannot read is a failure too
                why = "%s: %s" % (type(e).__name__, e)
            print("FAIL %s: %s" % (name, why) if why else "OK %s" % name)
            failed += why is not None
    extra = os.path.join(d, "extra_key.npy")
    with open(extra, "wb") as f:
        npf.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": (2, 3),
                                       "mft_layout": "nhwc"})
        f.write(np.zeros(6, "<f4").tobytes())
    try:
        np.load(extra)
        print("EXTRA_KEY: loaded")
    except ValueError as e:
        print("EXTRA_KEY: %s" % str(e).splitlines()[0])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
