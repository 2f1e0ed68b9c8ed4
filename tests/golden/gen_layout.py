#!/usr/bin/python3
"""Generate tests/golden/layout_cases.txt: PyTorch-derived golden data for mft's
layout predicates and views (docs/spec.md §1-3).

Run with Debian's interpreter, which has PyTorch 1.13:

    /usr/bin/python3 tests/golden/gen_layout.py [output-path]

(default output: layout_cases.txt next to this script). The output is
deterministic (no randomness): re-running it must give a byte-identical file.

File format (plain text, one record per line, tokens separated by single
spaces; lines starting with '#' and blank lines are comments). An integer
list is written as its length followed by the values, e.g. "4 2 3 4 5".

    case NAME                          start of a case; NAME has no spaces
    start empty LIST FMT               mft_empty(sizes, FMT); FMT is
                                       contiguous | channels_last
                                       (channels_last = torch.channels_last for
                                       rank 4, torch.channels_last_3d for rank 5)
    start strided SIZES STRIDES OFFSET STORAGE_NUMEL
                                       a flat storage of STORAGE_NUMEL elements,
                                       viewed with as_strided(SIZES, STRIDES, OFFSET)
    op permute LIST                    zero or more view ops, applied in order
    op transpose D0 D1
    op narrow DIM START LENGTH
    op select DIM INDEX
    op slice DIM START END STEP        Python slicing t[START:END:STEP] on DIM
    op unsqueeze DIM
    op squeeze DIM
    op expand LIST                     (-1 keeps a size)
    op as_strided SIZES STRIDES OFFSET (OFFSET is the absolute storage offset)
    op view LIST                       (one entry may be -1)
    op flatten START END
    result error                       PyTorch rejects the LAST op (every
                                       earlier op succeeds); then "end"
  or
    result NDIM                        followed by these lines, in this order:
    sizes LIST
    strides LIST
    offset N                           storage offset (elements)
    contig 0|1                         t.is_contiguous()
    cl 0|1|-                           t.is_contiguous(memory_format=channels_last
                                       (rank 4) / channels_last_3d (rank 5));
                                       other ranks: PyTorch's answer (always 0),
                                       except rank 3: '-' (mft's rank-3 N,L,C
                                       channels_last has no PyTorch counterpart)
    dense 0|1                          is_non_overlapping_and_dense, derived as
                                       torch.empty_like(t).stride() == t.stride()
    suggest contiguous|channels_last|- suggest_memory_format (see below)
    contig_strides LIST                t.contiguous().stride()
    cl_strides LIST|-                  t.contiguous(memory_format=channels_last /
                                       channels_last_3d).stride(); '-' unless rank 4/5
    like_strides LIST                  torch.empty_like(t).stride() (preserve);
                                       t.clone() gives the same (asserted here)
    end

suggest_memory_format is not exposed in Python. For rank 4 and 5 it is read
from the output of torch.nn.functional.interpolate(t, size=t.shape[2:],
mode='nearest') (upsample_nearest2d / upsample_nearest3d), whose output is
allocated with input.suggest_memory_format() in 1.13. When the op rejects the
input (zero-size C or spatial dims) or the packed contiguous and channels-last
strides of the output shape are identical (e.g. all-ones), the field is '-'.
For rank 4 the answer is cross-checked against avg_pool2d(t, 1) (also follows
suggest_memory_format; a disagreement aborts the generator). Differences from
the Python re-implementation torch._prims_common.suggest_memory_format are
printed as notes only: in 1.13 that reference does not follow the C++ rule on
some ambiguous size-1 cases (e.g. N1H1, 1C1W permutations), the ops do.
Rank 3 is '-' (mft extension); other ranks are 'contiguous' by definition
(PyTorch only suggests channels_last for rank 4/5).
"""

import itertools
import os
import sys

import torch
import torch.nn.functional as F
import torch._prims_common as prims

assert torch.__version__.startswith("1.13"), torch.__version__

CL = {4: torch.channels_last, 5: torch.channels_last_3d}

cases = []
names = set()
warnings = []


def add(name, start, ops=()):
    assert name not in names, name
    assert " " not in name
    names.add(name)
    cases.append((name, start, list(ops)))


def E(sizes, fmt="contiguous"):
    return ("empty", tuple(sizes), fmt)


def min_numel(sizes, strides):
    if any(s == 0 for s in sizes):
        return 0
    return 1 + sum((s - 1) * st for s, st in zip(sizes, strides))


def ST(sizes, strides, offset=0, numel=None):
    if numel is None:
        numel = offset + min_numel(sizes, strides)
    return ("strided", tuple(sizes), tuple(strides), offset, numel)


def packed(sizes, order=None):
    """Packed strides (literal products) for a slow-to-fast dim order."""
    n = len(sizes)
    order = list(range(n)) if order is None else order
    st = [0] * n
    acc = 1
    for d in reversed(order):
        st[d] = acc
        acc *= sizes[d]
    return tuple(st)


# ----------------------------------------------------------------- torch side

def make_start(start):
    if start[0] == "empty":
        _, sizes, fmt = start
        if fmt == "contiguous":
            return torch.empty(sizes)
        return torch.empty(sizes, memory_format=CL[len(sizes)])
    _, sizes, strides, offset, numel = start
    return torch.empty(numel).as_strided(sizes, strides, offset)


def apply_op(t, op):
    k = op[0]
    if k == "permute":
        return t.permute(tuple(op[1]))
    if k == "transpose":
        return t.transpose(op[1], op[2])
    if k == "narrow":
        return t.narrow(op[1], op[2], op[3])
    if k == "select":
        return t.select(op[1], op[2])
    if k == "slice":
        return torch.ops.aten.slice.Tensor(t, op[1], op[2], op[3], op[4])
    if k == "unsqueeze":
        return t.unsqueeze(op[1])
    if k == "squeeze":
        return t.squeeze(op[1])
    if k == "expand":
        return t.expand(tuple(op[1]))
    if k == "as_strided":
        return t.as_strided(op[1], op[2], op[3])
    if k == "view":
        return t.view(tuple(op[1]))
    if k == "flatten":
        return torch.flatten(t, op[1], op[2])
    raise ValueError(k)


def suggest_from_ops(name, t):
    r = t.dim()
    if r == 3:
        return "-"
    if r not in (4, 5):
        return "contiguous"
    fmt = CL[r]

    def classify(out):
        cs = torch.empty(out.shape).stride()
        ls = torch.empty(out.shape, memory_format=fmt).stride()
        if cs == ls:
            return "-"
        if out.stride() == cs:
            return "contiguous"
        if out.stride() == ls:
            return "channels_last"
        raise AssertionError("%s: op output strides %s match neither %s nor %s"
                             % (name, out.stride(), cs, ls))

    try:
        up = classify(F.interpolate(t, size=tuple(t.shape[2:]), mode="nearest"))
    except RuntimeError:
        up = "-"
    if r == 4:
        try:
            pool = classify(F.avg_pool2d(t, 1))
        except RuntimeError:
            pool = "-"
        if up != "-" and pool != "-" and up != pool:
            raise AssertionError("%s: interpolate says %s, avg_pool2d says %s" % (name, up, pool))
        if up == "-" and pool != "-":
            warnings.append("%s: only avg_pool2d decides (%s)" % (name, pool))
            up = pool
    if up != "-":
        ref = prims.suggest_memory_format(t)
        ref = "channels_last" if ref in (torch.channels_last, torch.channels_last_3d) else "contiguous"
        if ref != up:
            warnings.append("%s: op says %s, _prims_common (Python ref) says %s" % (name, up, ref))
    return up


def fields(name, t):
    r = t.dim()
    out = []
    out.append("result %d" % r)
    out.append("sizes " + ilist(t.shape))
    out.append("strides " + ilist(t.stride()))
    out.append("offset %d" % t.storage_offset())
    out.append("contig %d" % int(t.is_contiguous()))
    if r == 3:
        cl = "-"
    elif r in CL:
        cl = str(int(t.is_contiguous(memory_format=CL[r])))
    else:
        cl = str(int(t.is_contiguous(memory_format=torch.channels_last)))
        assert cl == "0"
    out.append("cl " + cl)
    like = tuple(torch.empty_like(t).stride())
    clone = tuple(t.clone().stride())
    assert like == clone, (name, like, clone)
    dense = like == tuple(t.stride())
    if dense != prims.is_non_overlapping_and_dense(t):
        warnings.append("%s: empty_like says dense=%d, _prims_common says %d"
                        % (name, dense, prims.is_non_overlapping_and_dense(t)))
    out.append("dense %d" % int(dense))
    out.append("suggest " + suggest_from_ops(name, t))
    out.append("contig_strides " + ilist(t.contiguous().stride()))
    if r in CL:
        out.append("cl_strides " + ilist(t.contiguous(memory_format=CL[r]).stride()))
    else:
        out.append("cl_strides -")
    out.append("like_strides " + ilist(like))
    return out


def ilist(xs):
    return " ".join([str(len(xs))] + [str(int(x)) for x in xs])


def render(name, start, ops):
    lines = ["case " + name]
    if start[0] == "empty":
        lines.append("start empty %s %s" % (ilist(start[1]), start[2]))
    else:
        _, sizes, strides, offset, numel = start
        lines.append("start strided %s %s %d %d" % (ilist(sizes), ilist(strides), offset, numel))
    t = make_start(start)
    for i, op in enumerate(ops):
        k = op[0]
        if k in ("permute", "expand", "view"):
            args = ilist(op[1])
        elif k == "as_strided":
            args = "%s %s %d" % (ilist(op[1]), ilist(op[2]), op[3])
        else:
            args = " ".join(str(a) for a in op[1:])
        lines.append("op %s %s" % (k, args))
        try:
            t = apply_op(t, op)
        except (RuntimeError, IndexError, ValueError) as e:
            if i != len(ops) - 1:
                raise AssertionError("%s: op %d (%s) failed before the last op: %s"
                                     % (name, i, k, e))
            msg = str(e).splitlines()[0][:100]
            lines.append("# torch: %s: %s" % (type(e).__name__, msg))
            lines.append("result error")
            lines.append("end")
            return lines, True
    lines.extend(fields(name, t))
    lines.append("end")
    return lines, False


# ----------------------------------------------------------------- the cases

S4 = (2, 3, 4, 5)
S5 = (2, 3, 4, 5, 6)
FMTS = ("contiguous", "channels_last")
FT = {"contiguous": "nchw", "channels_last": "nhwc"}


def shape_tag(s):
    return "x".join(str(x) for x in s) if s else "scalar"


def gen():
    # --- A. factories, every rank, the ambiguous shapes (docs/spec.md §2)
    for s in [(), (5,), (0,), (1,), (3, 4), (1, 4), (3, 1), (0, 4),
              (2, 3, 4), (2, 1, 4), (1, 1, 1), (2, 0, 4),
              (2, 3, 4, 5, 1, 2), (1, 1, 1, 1, 1, 1), (2, 0, 1, 3, 1, 2)]:
        add("empty_" + shape_tag(s), E(s))
    for s in [S4, (2, 1, 4, 5), (2, 3, 1, 1), (1, 1, 1, 1), (1, 3, 4, 5), (1, 3, 1, 1),
              (2, 1, 1, 1), (1, 1, 4, 5), (0, 3, 4, 5), (2, 0, 4, 5), (2, 3, 0, 5),
              (2, 3, 4, 0), (1, 1, 1, 5), (2, 3, 1, 5), (2, 3, 4, 1), (0, 0, 0, 0),
              (0, 1, 1, 1), (1, 0, 1, 1)]:
        for f in FMTS:
            add("empty_%s_%s" % (shape_tag(s), FT[f]), E(s, f))
    for s in [S5, (2, 1, 3, 4, 5), (2, 3, 1, 1, 1), (1, 1, 1, 1, 1), (1, 3, 2, 2, 2),
              (0, 3, 2, 2, 2), (2, 0, 2, 2, 2), (2, 3, 0, 2, 2), (2, 3, 2, 1, 1),
              (2, 3, 1, 4, 5)]:
        for f in FMTS:
            add("empty_%s_%s" % (shape_tag(s), "ncdhw" if f == "contiguous" else "ndhwc"), E(s, f))

    # --- B. permutes: all 24 orders of (2,3,4,5) in both formats
    for f in FMTS:
        for p in itertools.permutations(range(4)):
            add("permute_%s_%s" % (FT[f], "".join(map(str, p))), E(S4, f), [("permute", p)])
    for p in itertools.permutations(range(3)):
        add("permute_r3_%s" % "".join(map(str, p)), E((2, 3, 4)), [("permute", p)])
    for f in FMTS:
        for p in [(0, 2, 3, 4, 1), (0, 4, 1, 2, 3), (0, 1, 2, 4, 3), (4, 3, 2, 1, 0),
                  (1, 0, 2, 3, 4)]:
            add("permute_r5_%s_%s" % (FT[f], "".join(map(str, p))), E(S5, f), [("permute", p)])
    # ambiguous shapes permuted
    for s in [(2, 1, 4, 5), (2, 3, 1, 1), (1, 3, 4, 5), (1, 1, 1, 1), (1, 3, 1, 4)]:
        for f in FMTS:
            for p in [(0, 2, 3, 1), (0, 3, 1, 2), (0, 1, 3, 2), (1, 0, 2, 3)]:
                add("permute_%s_%s_%s" % (shape_tag(s), FT[f], "".join(map(str, p))),
                    E(s, f), [("permute", p)])
    # NHWC laid out explicitly (contiguous N,H,W,C) then permuted to logical NCHW
    add("permute_nhwc_from_physical", E((2, 4, 5, 3)), [("permute", (0, 3, 1, 2))])
    add("permute_ndhwc_from_physical", E((2, 4, 5, 6, 3)), [("permute", (0, 4, 1, 2, 3))])
    add("permute_nlc_from_physical", E((2, 4, 3)), [("permute", (0, 2, 1))])
    add("permute_negative_dims", E(S4), [("permute", (0, -1, 1, -2))])
    add("permute_r6", E((2, 3, 4, 5, 1, 2)), [("permute", (5, 4, 3, 2, 1, 0))])
    add("permute_r2", E((3, 4)), [("permute", (1, 0))])
    add("permute_r1", E((5,)), [("permute", (0,))])
    add("permute_r0", E(()), [("permute", ())])
    add("err_permute_dup", E(S4), [("permute", (0, 1, 1, 2))])
    add("err_permute_short", E(S4), [("permute", (0, 1, 2))])
    add("err_permute_long", E(S4), [("permute", (0, 1, 2, 3, 4))])
    add("err_permute_range", E(S4), [("permute", (0, 1, 2, 4))])
    add("err_permute_neg_range", E(S4), [("permute", (0, 1, 2, -5))])
    add("err_permute_neg_dup", E(S4), [("permute", (0, 1, -1, 3))])

    # --- C. transposes
    for f in FMTS:
        for d in [(2, 3), (1, 3), (-1, -2), (0, 0), (1, 2), (0, 1), (0, 3)]:
            add("transpose_%s_%s" % (FT[f], "_".join(str(x).replace("-", "m") for x in d)),
                E(S4, f), [("transpose", d[0], d[1])])
        add("transpose_r5_%s_hw" % FT[f], E(S5, f), [("transpose", 3, 4)])
        add("transpose_r5_%s_dc" % FT[f], E(S5, f), [("transpose", 1, 2)])
        for s in [(2, 1, 4, 5), (2, 3, 1, 1), (1, 1, 4, 5), (2, 3, 4, 1)]:
            add("transpose_%s_%s_wh" % (shape_tag(s), FT[f]), E(s, f), [("transpose", 2, 3)])
            add("transpose_%s_%s_cw" % (shape_tag(s), FT[f]), E(s, f), [("transpose", 1, 3)])
    add("transpose_r3_lc", E((2, 3, 4)), [("transpose", 1, 2)])
    add("transpose_r2", E((3, 4)), [("transpose", 0, 1)])
    add("transpose_r1", E((5,)), [("transpose", 0, -1)])
    add("err_transpose_range", E(S4), [("transpose", 0, 4)])
    add("err_transpose_neg_range", E(S4), [("transpose", -5, 1)])

    # --- D. narrow
    for f in FMTS:
        p = FT[f]
        add("narrow_%s_c1" % p, E(S4, f), [("narrow", 1, 0, 1)])
        add("narrow_%s_c1_off" % p, E(S4, f), [("narrow", 1, 1, 1)])
        add("narrow_%s_c2" % p, E(S4, f), [("narrow", 1, 1, 2)])
        add("narrow_%s_hw1" % p, E(S4, f), [("narrow", 2, 1, 1), ("narrow", 3, 2, 1)])
        add("narrow_%s_n1" % p, E(S4, f), [("narrow", 0, 1, 1)])
        add("narrow_%s_h2" % p, E(S4, f), [("narrow", 2, 1, 2)])
        add("narrow_%s_w3" % p, E(S4, f), [("narrow", 3, 0, 3)])
        add("narrow_%s_w0" % p, E(S4, f), [("narrow", 3, 0, 0)])
        add("narrow_%s_n0" % p, E(S4, f), [("narrow", 0, 0, 0)])
        add("narrow_%s_c0" % p, E(S4, f), [("narrow", 1, 2, 0)])
        add("narrow_%s_h0" % p, E(S4, f), [("narrow", 2, 4, 0)])
        add("narrow_%s_negstart" % p, E(S4, f), [("narrow", 3, -2, 2)])
        add("narrow_%s_negdim" % p, E(S4, f), [("narrow", -3, 0, 2)])
        add("narrow_%s_full" % p, E(S4, f), [("narrow", 2, 0, 4)])
        add("narrow_%s_c1_hw1" % p, E(S4, f), [("narrow", 1, 2, 1), ("narrow", 2, 0, 1),
                                                ("narrow", 3, 0, 1)])
        add("narrow_r5_%s_d1" % p, E(S5, f), [("narrow", 2, 1, 1)])
        add("narrow_r5_%s_dhw1" % p, E(S5, f), [("narrow", 2, 1, 1), ("narrow", 3, 1, 1),
                                                 ("narrow", 4, 1, 1)])
        add("narrow_r5_%s_c1" % p, E(S5, f), [("narrow", 1, 1, 1)])
        add("err_narrow_%s_past_end" % p, E(S4, f), [("narrow", 1, 2, 2)])
    add("err_narrow_dim", E(S4), [("narrow", 4, 0, 1)])
    add("err_narrow_neg_length", E(S4), [("narrow", 1, 0, -1)])
    add("err_narrow_start", E(S4), [("narrow", 1, 4, 0)])
    add("narrow_r1", E((5,)), [("narrow", 0, 1, 3)])
    add("narrow_r3", E((2, 3, 4)), [("narrow", 2, 1, 2)])

    # --- E. select (+ unsqueeze: N == 1 with an odd N stride)
    for f in FMTS:
        p = FT[f]
        add("select_%s_n" % p, E(S4, f), [("select", 0, 1)])
        add("select_unsq_%s_n1" % p, E(S4, f), [("select", 0, 1), ("unsqueeze", 0)])
        add("select_unsq_%s_nlast" % p, E(S4, f), [("select", 0, -1), ("unsqueeze", 0)])
        add("select_unsq_%s_c1" % p, E(S4, f), [("select", 1, 2), ("unsqueeze", 1)])
        add("select_unsq_%s_h1" % p, E(S4, f), [("select", 2, 1), ("unsqueeze", 2)])
        add("select_unsq_%s_w1" % p, E(S4, f), [("select", 3, 4), ("unsqueeze", 3)])
        add("select_%s_w" % p, E(S4, f), [("select", 3, 2)])
        add("select_%s_c" % p, E(S4, f), [("select", -3, 0)])
        add("select_unsq_r5_%s_n1" % p, E(S5, f), [("select", 0, 1), ("unsqueeze", 0)])
        add("select_unsq_r5_%s_d1" % p, E(S5, f), [("select", 2, 3), ("unsqueeze", 2)])
        add("select_unsq_%s_n1_expand" % p, E(S4, f), [("select", 0, 1), ("unsqueeze", 0),
                                                        ("expand", (4, 3, 4, 5))])
        add("select_unsq_%s_n1_hw1" % p, E(S4, f), [("select", 0, 1), ("unsqueeze", 0),
                                                     ("narrow", 2, 1, 1), ("narrow", 3, 1, 1)])
        add("err_select_%s_index" % p, E(S4, f), [("select", 0, 2)])
    add("err_select_neg_index", E(S4), [("select", 1, -4)])
    add("err_select_dim", E(S4), [("select", 4, 0)])
    add("err_select_empty_dim", E((2, 0, 4, 5)), [("select", 1, 0)])
    add("err_select_scalar", E(()), [("select", 0, 0)])
    add("select_r1_to_scalar", E((5,)), [("select", 0, 3)])
    add("select_r2", E((3, 4)), [("select", 1, 1)])
    add("select_unsq_nlc", E((2, 4, 3)), [("permute", (0, 2, 1)), ("select", 0, 1),
                                            ("unsqueeze", 0)])

    # --- F. slice (with step)
    for f in FMTS:
        p = FT[f]
        for d, size in enumerate(S4):
            add("slice_%s_d%d_step2" % (p, d), E(S4, f), [("slice", d, 0, size, 2)])
        add("slice_%s_w_odd" % p, E(S4, f), [("slice", 3, 1, 5, 2)])
        add("slice_%s_hw_step2" % p, E(S4, f), [("slice", 2, 0, 4, 2), ("slice", 3, 0, 5, 2)])
        add("slice_%s_h_clamp" % p, E(S4, f), [("slice", 2, 1, 100, 2)])
        add("slice_%s_c_neg" % p, E(S4, f), [("slice", 1, -2, 3, 1)])
        add("slice_%s_c_negend" % p, E(S4, f), [("slice", 1, 0, -1, 1)])
        add("slice_%s_h_empty" % p, E(S4, f), [("slice", 2, 3, 1, 1)])
        add("slice_%s_c_step3" % p, E(S4, f), [("slice", 1, 0, 3, 3)])
        add("slice_%s_w_step5" % p, E(S4, f), [("slice", 3, 0, 5, 5)])
        add("slice_%s_all_step2" % p, E(S4, f), [("slice", 0, 0, 2, 2), ("slice", 1, 0, 3, 2),
                                                   ("slice", 2, 0, 4, 2), ("slice", 3, 0, 5, 2)])
        add("slice_%s_c_startbig" % p, E(S4, f), [("slice", 1, 7, 9, 1)])
        add("slice_%s_negbig" % p, E(S4, f), [("slice", 3, -100, 100, 3)])
        add("slice_r5_%s_d_step2" % p, E(S5, f), [("slice", 2, 0, 4, 2)])
        add("slice_r5_%s_c_step2" % p, E(S5, f), [("slice", 1, 0, 3, 2)])
        add("err_slice_%s_step0" % p, E(S4, f), [("slice", 1, 0, 3, 0)])
        add("err_slice_%s_stepneg" % p, E(S4, f), [("slice", 1, 0, 3, -1)])
    add("slice_r1_step2", E((7,)), [("slice", 0, 1, 7, 2)])
    add("slice_r3_step2", E((2, 3, 6)), [("slice", 2, 0, 6, 2)])
    add("slice_r6_step2", E((2, 3, 4, 5, 1, 2)), [("slice", 3, 1, 5, 2)])
    add("err_slice_dim", E(S4), [("slice", 4, 0, 1, 1)])

    # --- G. unsqueeze / squeeze
    for d in [0, 1, 2, 3, -1, -4]:
        add("unsqueeze_r3_%s" % str(d).replace("-", "m"), E((3, 4, 5)), [("unsqueeze", d)])
    add("unsqueeze_nlc_2", E((2, 4, 3)), [("permute", (0, 2, 1)), ("unsqueeze", 2)])
    add("unsqueeze_nlc_3", E((2, 4, 3)), [("permute", (0, 2, 1)), ("unsqueeze", 3)])
    for f in FMTS:
        p = FT[f]
        add("unsqueeze_%s_d" % p, E(S4, f), [("unsqueeze", 2)])
        add("unsqueeze_%s_end" % p, E(S4, f), [("unsqueeze", 4)])
        add("unsqueeze_%s_front" % p, E(S4, f), [("unsqueeze", 0)])
        add("squeeze_r5_%s_d1" % p, E((2, 3, 1, 4, 5), f), [("squeeze", 2)])
        add("squeeze_%s_n1" % p, E((1, 3, 4, 5), f), [("squeeze", 0)])
        add("squeeze_%s_c1" % p, E((2, 1, 4, 5), f), [("squeeze", 1)])
        add("squeeze_%s_noop" % p, E(S4, f), [("squeeze", 2)])
        add("squeeze_%s_w1" % p, E((2, 3, 4, 1), f), [("squeeze", -1)])
        add("squeeze_unsqueeze_%s_c1" % p, E((2, 1, 4, 5), f), [("squeeze", 1), ("unsqueeze", 1)])
        add("squeeze_unsqueeze_%s_w1" % p, E((2, 3, 4, 1), f), [("squeeze", 3), ("unsqueeze", 3)])
    add("unsqueeze_r5_to_r6", E(S5), [("unsqueeze", 5)])
    add("unsqueeze_scalar", E(()), [("unsqueeze", 0)])
    add("unsqueeze_r1", E((5,)), [("unsqueeze", 0)])
    add("squeeze_r1_to_scalar", E((1,)), [("squeeze", 0)])
    add("squeeze_r6", E((2, 3, 4, 5, 1, 2)), [("squeeze", 4)])
    add("squeeze_empty_dim_noop", E((2, 0, 4, 5)), [("squeeze", 1)])
    add("err_unsqueeze_dim", E(S4), [("unsqueeze", 5)])
    add("err_unsqueeze_neg_dim", E(S4), [("unsqueeze", -6)])
    add("err_squeeze_dim", E(S4), [("squeeze", 4)])

    # --- H. expand (stride 0)
    for f in FMTS:
        p = FT[f]
        add("expand_perchannel_%s" % p, E((1, 3, 1, 1), f), [("expand", S4)])
        add("expand_spatial_%s" % p, E((1, 1, 4, 5), f), [("expand", S4)])
        add("expand_batch_%s" % p, E((1, 3, 4, 5), f), [("expand", S4)])
        add("expand_channel_%s" % p, E((2, 1, 4, 5), f), [("expand", S4)])
        add("expand_hw_%s" % p, E((2, 3, 1, 1), f), [("expand", S4)])
        add("expand_w_%s" % p, E((2, 3, 4, 1), f), [("expand", S4)])
        add("expand_minus1_%s" % p, E((1, 3, 4, 5), f), [("expand", (2, -1, -1, -1))])
        add("expand_same_%s" % p, E(S4, f), [("expand", S4)])
        add("expand_to0_%s" % p, E((1, 3, 1, 1), f), [("expand", (0, 3, 4, 5))])
        add("expand_perchannel_r5_%s" % p, E((1, 3, 1, 1, 1), f), [("expand", S5)])
        add("expand_perchannel_%s_narrow" % p, E((1, 3, 1, 1), f),
            [("expand", S4), ("narrow", 1, 0, 1)])
        add("expand_perchannel_%s_permute" % p, E((1, 3, 1, 1), f),
            [("expand", S4), ("permute", (0, 2, 3, 1))])
        add("expand_perchannel_%s_transpose" % p, E((1, 3, 1, 1), f),
            [("expand", S4), ("transpose", 2, 3)])
        add("expand_spatial_%s_select" % p, E((1, 1, 4, 5), f),
            [("expand", S4), ("select", 1, 2), ("unsqueeze", 1)])
        add("err_expand_%s_non1" % p, E(S4, f), [("expand", (2, 6, 4, 5))])
    add("expand_perchannel_strided", ST((1, 3, 1, 1), (3, 1, 1, 1)), [("expand", S4)])
    add("expand_perchannel_strided_odd", ST((1, 3, 1, 1), (7, 2, 5, 9)), [("expand", S4)])
    add("expand_vector_to_r4", E((3,)), [("view", (1, 3, 1, 1)), ("expand", S4)])
    add("expand_row_to_r4", E((5,)), [("expand", S4)])
    add("expand_scalar_r4", E(()), [("expand", S4)])
    add("expand_scalar_r5", E(()), [("expand", S5)])
    add("expand_scalar_ones", E(()), [("expand", (1, 1, 1, 1))])
    add("expand_scalar_r1", E(()), [("expand", (5,))])
    add("expand_r3_to_r4", E((3, 4, 5)), [("expand", S4)])
    add("expand_r3_to_r4_lead1", E((3, 4, 5)), [("expand", (1, 3, 4, 5))])
    add("expand_r3_to_r5_lead", E((3, 4, 5)), [("expand", (2, 1, 3, 4, 5))])
    add("expand_r4_to_r5", E((1, 3, 1, 1), "channels_last"), [("expand", (4, 2, 3, 4, 5))])
    add("expand_r1_to_r2", E((4,)), [("expand", (3, 4))])
    add("expand_r2_col", E((3, 1)), [("expand", (3, 4))])
    add("expand_contiguous_after", E((1, 3, 1, 1)), [("expand", S4), ("select", 0, 0)])
    add("err_expand_fewer_dims", E(S4), [("expand", (3, 4, 5))])
    add("err_expand_minus1_new", E((3, 4, 5)), [("expand", (-1, 3, 4, 5))])
    add("err_expand_r1", E((3,)), [("expand", (2, 4))])

    # --- I. padding (gaps)
    pads = {
        "pitch8": ST(S4, (96, 32, 8, 1)),
        "pitch8_off": ST(S4, (96, 32, 8, 1), offset=3, numel=200),
        "wgap2": ST(S4, (120, 40, 10, 2)),
        "npad": ST(S4, (70, 20, 5, 1)),
        "nhwc_c4": ST(S4, (80, 1, 20, 4)),
        "nhwc_c4_w6": ST(S4, (96, 1, 24, 4)),
        "nhwc_c4_off": ST(S4, (80, 1, 20, 4), offset=1, numel=170),
        "nhwc_npad": ST(S4, (64, 1, 15, 3)),
    }
    for pn, st in pads.items():
        add("pad_%s" % pn, st)
        add("pad_%s_narrow_c1" % pn, st, [("narrow", 1, 0, 1)])
        add("pad_%s_narrow_w" % pn, st, [("narrow", 3, 1, 3)])
        add("pad_%s_hw1" % pn, st, [("narrow", 2, 0, 1), ("narrow", 3, 0, 1)])
        add("pad_%s_permute_nhwc" % pn, st, [("permute", (0, 2, 3, 1))])
        add("pad_%s_transpose_hw" % pn, st, [("transpose", 2, 3)])
        add("pad_%s_select_unsq" % pn, st, [("select", 0, 1), ("unsqueeze", 0)])
        add("pad_%s_view" % pn, st, [("view", (2, 3, 20))])
        add("pad_%s_flatten_hw" % pn, st, [("flatten", 2, 3)])
        add("pad_%s_slice_h2" % pn, st, [("slice", 2, 0, 4, 2)])
    add("pad_nchw_view_nc", pads["pitch8"], [("view", (6, 4, 5))])
    add("pad_ndhwc_c4", ST((2, 3, 2, 3, 4), (96, 1, 48, 16, 4)))
    add("pad_ndhwc_c4_narrow", ST((2, 3, 2, 3, 4), (96, 1, 48, 16, 4)), [("narrow", 1, 1, 1)])
    add("pad_ncdhw_pitch", ST((2, 3, 2, 3, 4), (180, 60, 30, 8, 1)))
    add("pad_nlc_c4", ST((2, 3, 5), (20, 1, 4)))
    add("pad_ncl_pitch", ST((2, 3, 5), (24, 8, 1)))
    add("pad_r2_pitch", ST((3, 4), (6, 1)))
    add("pad_r1_gap", ST((5,), (2,)))
    add("pad_r6_gap", ST((2, 3, 2, 2, 1, 2), (50, 16, 8, 4, 2, 1)))

    # --- J. overlapping and stride-0 starts
    ov = {
        "ones": ST(S4, (1, 1, 1, 1)),
        "rows": ST(S4, (60, 20, 4, 1)),
        "zeros": ST(S4, (0, 0, 0, 0), numel=1),
        "wc": ST(S4, (60, 1, 15, 1)),
        "nc": ST(S4, (20, 20, 5, 1)),
        "nw_cl": ST(S4, (3, 1, 15, 3)),
        "hw_same": ST(S4, (60, 20, 5, 5)),
        "c0": ST(S4, (20, 0, 5, 1)),
        "n0_cl": ST(S4, (0, 1, 15, 3)),
        "h0": ST(S4, (15, 5, 0, 1)),
    }
    for on, st in ov.items():
        add("overlap_%s" % on, st)
        add("overlap_%s_permute" % on, st, [("permute", (0, 2, 3, 1))])
        add("overlap_%s_narrow" % on, st, [("narrow", 1, 1, 2)])
    add("overlap_ones_view", ov["ones"], [("view", (2, 3, 20))])
    add("overlap_zeros_view", ov["zeros"], [("view", (6, 20))])
    add("overlap_r3_ones", ST((2, 3, 4), (1, 1, 1)))
    add("overlap_r2_ones", ST((4, 4), (1, 1)))
    add("overlap_r5_ones", ST((2, 2, 2, 2, 2), (1, 1, 1, 1, 1)))
    # the flawed / ambiguous stride patterns (size-1 dims, equal strides)
    amb = [
        ("n111_ones", (2, 1, 1, 1), (1, 1, 1, 1)),
        ("n111_w", (2, 1, 1, 1), (5, 5, 5, 5)),
        ("n1h1_cl", (2, 1, 4, 1), (4, 1, 1, 1)),
        ("n1h1_contig", (2, 1, 4, 1), (4, 4, 1, 1)),
        ("nc11_cstride1", (2, 3, 1, 1), (3, 1, 1, 1)),
        ("nc11_clstride", (2, 3, 1, 1), (3, 1, 3, 3)),
        ("nc11_bigs", (2, 3, 1, 1), (3, 1, 100, 100)),
        ("nc11_n_eq_c", (2, 3, 1, 1), (1, 1, 1, 1)),
        ("1c1w_t13", (1, 4, 1, 3), (12, 1, 4, 4)),
        ("1c1w", (1, 3, 1, 4), (12, 4, 4, 1)),
        ("n1hw_cl", (2, 1, 4, 5), (20, 1, 5, 1)),
        ("n1hw_contig", (2, 1, 4, 5), (20, 20, 5, 1)),
        ("n1hw_c0", (2, 1, 4, 5), (20, 0, 5, 1)),
        ("1chw_nodd", (1, 3, 4, 5), (3, 1, 15, 3)),
        ("1chw_nbig", (1, 3, 4, 5), (999, 1, 15, 3)),
        ("1chw_n0", (1, 3, 4, 5), (0, 1, 15, 3)),
        ("1111_zero", (1, 1, 1, 1), (0, 0, 0, 0)),
        ("1111_odd", (1, 1, 1, 1), (7, 3, 5, 2)),
        ("11hw_cl", (1, 1, 4, 5), (20, 1, 5, 1)),
        ("11hw_odd", (1, 1, 4, 5), (1, 20, 5, 1)),
        ("nchw_c_small_w_big", (2, 3, 4, 5), (60, 1, 3, 12)),
        ("nchw_hwc", (2, 3, 4, 5), (60, 20, 1, 4)),
        ("r5_n1111", (2, 1, 1, 1, 1), (1, 1, 1, 1, 1)),
        ("r5_nc111", (2, 3, 1, 1, 1), (3, 1, 3, 3, 3)),
        ("r5_1cdhw_nodd", (1, 3, 2, 2, 2), (3, 1, 12, 6, 3)),
        ("r5_d1_cl", (2, 3, 1, 4, 5), (60, 1, 60, 15, 3)),
        ("r5_d1_odd", (2, 3, 1, 4, 5), (60, 1, 7, 15, 3)),
    ]
    for an, sizes, strides in amb:
        add("amb_%s" % an, ST(sizes, strides))

    # --- K. view
    for f in FMTS:
        p = FT[f]
        for vs in [(2, 3, 20), (-1,), (6, 4, 5), (2, 3, 2, 2, 5), (1, 2, 3, 4, 5), (2, 60),
                   (2, 3, 4, 5), (2, 3, 4, 5, 1), (2, 1, 3, 4, 5), (2, 3, 4, 1, 5), (120,),
                   (2, 12, 5), (2, 3, 4, -1)]:
            add("view_%s_%s" % (p, shape_tag(vs).replace("-", "m")), E(S4, f), [("view", vs)])
        add("err_view_%s_numel" % p, E(S4, f), [("view", (2, 3, 21))])
        add("err_view_%s_two_minus1" % p, E(S4, f), [("view", (-1, -1, 20))])
    add("view_physical_nhwc", E(S4, "channels_last"), [("permute", (0, 2, 3, 1)), ("view", (2, 20, 3))])
    add("view_physical_nhwc_2", E(S4, "channels_last"), [("permute", (0, 2, 3, 1)), ("view", (8, 5, 3))])
    add("view_transposed_ok", E(S4), [("transpose", 2, 3), ("view", (6, 5, 4))])
    add("err_view_transposed", E(S4), [("transpose", 2, 3), ("view", (2, 3, 20))])
    add("view_expand_hw", E((1, 3, 1, 1)), [("expand", S4), ("view", (2, 3, 20))])
    add("err_view_expand_nc", E((1, 3, 1, 1)), [("expand", S4), ("view", (6, 20))])
    add("view_empty_n0", E((0, 3, 4, 5)), [("view", (0, 12, 5))])
    add("view_empty_c0", E((2, 0, 4, 5)), [("view", (2, 0, 20))])
    add("view_empty_c0_flat", E((2, 0, 4, 5)), [("view", (-1,))])
    add("view_empty_cl", E((2, 3, 0, 5), "channels_last"), [("view", (2, 3, 0))])
    add("view_empty_cl_same", E((2, 3, 0, 5), "channels_last"), [("view", (2, 3, 0, 5))])
    add("view_r5_cl_flat_spatial", E(S5, "channels_last"), [("view", (2, 3, 120))])
    add("view_r5_cl_same", E(S5, "channels_last"), [("view", S5)])
    add("view_r5_to_r4", E(S5), [("view", (2, 3, 20, 6))])
    add("view_r3_to_r4", E((2, 3, 20)), [("view", S4)])
    add("view_scalar_to_r4", E(()), [("view", (1, 1, 1, 1))])
    add("view_r4_to_scalar", E((1, 1, 1, 1)), [("view", ())])
    add("view_nhwc_c1", E(S4, "channels_last"), [("narrow", 1, 0, 1), ("view", (2, 1, 20))])
    add("view_sel_unsq", E(S4, "channels_last"), [("select", 0, 1), ("unsqueeze", 0), ("view", (1, 3, 4, 5))])
    add("err_view_r2_transposed", E((3, 4)), [("transpose", 0, 1), ("view", (12,))])

    # --- L. flatten (a view when possible, else a contiguous copy)
    for f in FMTS:
        p = FT[f]
        for (a, b) in [(0, 1), (1, 3), (2, 3), (0, 3), (1, 1), (-2, -1), (1, 2), (0, 2)]:
            add("flatten_%s_%s_%s" % (p, str(a).replace("-", "m"), str(b).replace("-", "m")),
                E(S4, f), [("flatten", a, b)])
        add("flatten_r5_%s_dhw" % p, E(S5, f), [("flatten", 2, 4)])
        add("flatten_r5_%s_hw" % p, E(S5, f), [("flatten", 3, 4)])
        add("flatten_r5_%s_cd" % p, E(S5, f), [("flatten", 1, 2)])
        add("err_flatten_%s_order" % p, E(S4, f), [("flatten", 2, 1)])
        add("err_flatten_%s_range" % p, E(S4, f), [("flatten", 0, 4)])
    add("flatten_expand", E((1, 3, 1, 1)), [("expand", S4), ("flatten", 2, 3)])
    add("flatten_expand_copy", E((1, 3, 1, 1)), [("expand", S4), ("flatten", 0, 1)])
    add("flatten_transposed_copy", E(S4), [("transpose", 2, 3), ("flatten", 1, 3)])
    add("flatten_empty", E((2, 0, 4, 5)), [("flatten", 1, 3)])
    add("flatten_empty_cl", E((2, 3, 0, 5), "channels_last"), [("flatten", 1, 2)])
    add("flatten_r3", E((2, 3, 4)), [("flatten", 1, 2)])
    add("flatten_r2", E((3, 4)), [("flatten", 0, 1)])
    add("flatten_r1", E((5,)), [("flatten", 0, 0)])
    add("flatten_r6", E((2, 3, 4, 5, 1, 2)), [("flatten", 3, 5)])
    add("flatten_then_unflatten_view", E(S4, "channels_last"), [("flatten", 2, 3), ("view", S4)])

    # --- M. as_strided as a view op
    add("as_strided_to_cl", E(S4), [("as_strided", S4, (60, 1, 15, 3), 0)])
    add("as_strided_offset", E(S4), [("as_strided", (2, 3, 2, 2), (60, 20, 5, 1), 1)])
    add("as_strided_rank5", E(S4), [("as_strided", (2, 3, 2, 2, 5), (60, 20, 10, 5, 1), 0)])
    add("as_strided_from_view", E(S4, "channels_last"),
        [("narrow", 1, 1, 1), ("as_strided", (2, 3, 4, 5), (60, 1, 15, 3), 0)])
    add("as_strided_overlap", E(S4), [("as_strided", S4, (1, 1, 1, 1), 5)])
    add("as_strided_zero", E(S4), [("as_strided", S4, (0, 0, 0, 0), 119)])
    add("as_strided_empty", E(S4), [("as_strided", (2, 0, 4, 5), (60, 20, 5, 1), 0)])
    add("as_strided_r3_nlc", E((2, 3, 4)), [("as_strided", (2, 3, 4), (12, 1, 3), 0)])
    add("as_strided_scalar", E(S4), [("as_strided", (), (), 7)])
    add("err_as_strided_bounds", E(S4), [("as_strided", S4, (60, 20, 5, 1), 1)])
    add("err_as_strided_bounds_stride", E(S4), [("as_strided", S4, (61, 20, 5, 1), 0)])
    add("err_as_strided_neg_stride", E(S4), [("as_strided", S4, (60, 20, 5, -1), 4)])

    # --- N. longer chains
    add("chain_nhwc_slice_narrow_transpose", E(S4, "channels_last"),
        [("slice", 2, 0, 4, 2), ("narrow", 1, 0, 1), ("transpose", 2, 3)])
    add("chain_nchw_to_physical_nhwc", E(S4),
        [("permute", (0, 2, 3, 1)), ("view", (2, 20, 3)), ("unsqueeze", 1)])
    add("chain_nhwc_sel_unsq_expand_narrow", E(S4, "channels_last"),
        [("select", 0, 0), ("unsqueeze", 0), ("expand", (3, 3, 4, 5)), ("narrow", 2, 1, 2)])
    add("chain_nhwc_crop", E((2, 3, 8, 8), "channels_last"),
        [("narrow", 2, 2, 4), ("narrow", 3, 2, 4)])
    add("chain_nchw_crop", E((2, 3, 8, 8)), [("narrow", 2, 2, 4), ("narrow", 3, 2, 4)])
    add("chain_nhwc_batch_slice", E((4, 3, 4, 5), "channels_last"), [("slice", 0, 1, 4, 2)])
    add("chain_r5_cl_to_r4", E((2, 3, 1, 4, 5), "channels_last"), [("squeeze", 2)])
    add("chain_r4_cl_to_r5", E(S4, "channels_last"), [("unsqueeze", 2)])
    add("chain_r4_cl_to_r5_after_slice", E(S4, "channels_last"),
        [("slice", 2, 0, 4, 2), ("unsqueeze", 2)])
    add("chain_transpose_back", E(S4, "channels_last"), [("transpose", 2, 3), ("transpose", 2, 3)])
    add("chain_permute_twice", E(S4), [("permute", (0, 2, 3, 1)), ("permute", (0, 3, 1, 2))])
    add("chain_flatten_copy_then_view", E(S4, "channels_last"),
        [("flatten", 1, 2), ("view", (2, 3, 4, 5))])
    add("chain_expand_scalar_narrow", E(()), [("expand", S4), ("narrow", 3, 1, 2)])
    add("chain_narrow_expand", E((2, 3, 4, 1), "channels_last"),
        [("narrow", 1, 1, 1), ("expand", (2, 5, 4, 1))])
    add("chain_r6_narrow_permute", E((2, 3, 4, 5, 1, 2)),
        [("narrow", 2, 1, 2), ("permute", (0, 2, 3, 4, 5, 1))])
    add("err_chain_after_views", E(S4, "channels_last"),
        [("transpose", 2, 3), ("narrow", 1, 0, 2), ("view", (2, 2, 20))])

    # --- O. infer-dense-strides tie breaking (empty_like / clone of non-dense)
    for dn, sizes, strides in [
            ("zero_n_h", S4, (0, 5, 0, 1)),
            ("zero_c_w", S4, (1, 0, 2, 0)),
            ("zero_c_w_b", S4, (2, 0, 1, 0)),
            ("equal_sizes_ones", (3, 3, 3, 3), (1, 1, 1, 1)),
            ("all_fives", S4, (5, 5, 5, 5)),
            ("size1_mix", (4, 1, 3, 1), (0, 7, 0, 2)),
            ("equal_pairs", (2, 2, 2, 2), (1, 2, 2, 1)),
            ("pad_and_zero", S4, (0, 1, 20, 4)),
            ("r3_ones", (4, 3, 2), (1, 1, 1)),
            ("r5_zeros_mix", (2, 3, 2, 2, 2), (0, 1, 0, 3, 0)),
            ("r6_mix", (2, 1, 3, 2, 2, 2), (0, 5, 1, 0, 3, 9))]:
        add("infer_%s" % dn, ST(sizes, strides))
    # --- P. more edge cases: scalars, kept size-1 dims, empty views and offsets
    add("expand_keep_n1", E((1, 3, 1, 1)), [("expand", (1, 3, 4, 5))])
    add("expand_keep_n1_odd", ST((1, 3, 1, 1), (7, 2, 5, 9)), [("expand", (1, 3, 4, 1))])
    add("expand_keep_w1_cl", E((2, 3, 4, 1), "channels_last"), [("expand", (2, 3, 4, 1))])
    add("expand_new_lead1_cl", E((3, 4, 5)), [("permute", (1, 2, 0)), ("expand", (1, 4, 5, 3))])
    add("unsqueeze_before_empty", E((2, 0, 4, 5)), [("unsqueeze", 1)])
    add("unsqueeze_before_empty_cl", E((2, 3, 0, 5), "channels_last"), [("unsqueeze", 2)])
    add("unsqueeze_before_expanded", E((1, 3, 1, 1)), [("expand", S4), ("unsqueeze", 2)])
    add("unsqueeze_before_expanded_c", E((1, 3, 1, 1)), [("expand", S4), ("unsqueeze", 1)])
    add("flatten_scalar", E(()), [("flatten", 0, 0)])
    add("flatten_scalar_neg", E(()), [("flatten", -1, -1)])
    add("squeeze_scalar", E(()), [("squeeze", 0)])
    add("unsqueeze_scalar_neg", E(()), [("unsqueeze", -1)])
    add("transpose_scalar", E(()), [("transpose", 0, -1)])
    add("err_narrow_scalar", E(()), [("narrow", 0, 0, 1)])
    add("err_transpose_scalar", E(()), [("transpose", 0, 1)])
    add("slice_empty_dim", E((2, 0, 4, 5)), [("slice", 1, 0, 5, 2)])
    add("slice_neg_empty", E(S4, "channels_last"), [("slice", 3, -1, -3, 1)])
    add("as_strided_empty_far_offset", E(S4), [("as_strided", (2, 0, 4, 5), (60, 20, 5, 1), 500)])
    add("start_strided_empty_far_offset", ST((2, 0, 4, 5), (60, 20, 5, 1), offset=9, numel=4))
    add("view_amb_n1hw", ST((2, 1, 4, 5), (20, 1, 5, 1)), [("view", (2, 20))])
    add("view_amb_n1hw_split", ST((2, 1, 4, 5), (20, 1, 5, 1)), [("view", (1, 2, 1, 20))])
    add("view_amb_1chw", ST((1, 3, 4, 5), (999, 1, 15, 3)), [("view", (3, 4, 5))])
    add("view_amb_1chw_cw", ST((1, 3, 4, 5), (999, 1, 15, 3)), [("view", (3, 20))])
    add("view_amb_1111", ST((1, 1, 1, 1), (7, 3, 5, 2)), [("view", (1, 1))])
    add("view_amb_1111_scalar", ST((1, 1, 1, 1), (7, 3, 5, 2)), [("view", ())])
    add("view_size1_odd_mid", ST((2, 1, 3), (3, 100, 1)), [("view", (2, 3, 1))])
    add("view_expand_size1", E((1, 3, 1, 1), "channels_last"), [("expand", (2, 3, 1, 1)),
                                                                  ("view", (2, 3))])


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "layout_cases.txt")
    gen()
    body = []
    n_err = 0
    for name, start, ops in cases:
        lines, err = render(name, start, ops)
        n_err += err
        body.extend(lines)
    doc = __doc__
    fmt_part = doc[doc.index("File format"):doc.index("suggest_memory_format is not")]
    header = ["# mft layout golden data, generated by tests/golden/gen_layout.py from PyTorch %s."
              % torch.__version__.split("a")[0],
              "# Do not edit: re-run `/usr/bin/python3 tests/golden/gen_layout.py`.",
              "# %d cases (%d expect an error)." % (len(cases), n_err), "#"]
    header += [("# " + l).rstrip() for l in fmt_part.rstrip().splitlines()]
    header += ["#", "# suggest: see gen_layout.py (read from upsample_nearest output strides).", ""]
    with open(path, "w") as fh:
        fh.write("\n".join(header + body) + "\n")
    for w in warnings:
        print("note:", w, file=sys.stderr)
    print("%d cases (%d errors) -> %s (%d bytes)"
          % (len(cases), n_err, path, os.path.getsize(path)))


if __name__ == "__main__":
    main()
