#!/usr/bin/python3
"""Generate tools/golden/explain_cases.txt: what PyTorch 1.13 returns for the
inputs of a set of mft-explain command lines, so that the tool's claims
"PyTorch 1.13: same" / "PyTorch 1.13: gives <FORMAT> here, because ..." are
checked against torch itself (tools/golden/check_explain.cmake, CTest
tool_explain_golden).

Run with Debian's interpreter, which has PyTorch 1.13:

    /usr/bin/python3 tools/golden/gen_explain.py [output-path]

(default output: explain_cases.txt next to this script). The output is
deterministic: re-running it must give a byte-identical file.

Each case is an mft-explain command line. This script builds the same input
tensors with torch (same sizes, strides and offsets; an input SPEC is
[FMT:]SIZES[@STRIDES][/STEP...] as mft-explain reads it), runs the torch
counterpart of the explained call(s), and records what torch returned.

File format (one record per line, tokens separated by single spaces; lines
starting with '#' and blank lines are comments):

    case NAME                 start of a case; NAME has no spaces
    args ARG...               the mft-explain arguments (no quoting needed)
    input K STRIDES           strides of the K-th input as torch built it
                              (comma-separated); the tool must show the same
    torch STRIDES READ COPY   one line per explained result, in the order the
                              tool prints them: the strides of torch's result,
                              the format suggest_memory_format reads from them
                              (NCHW / NHWC / NCDHW / NDHWC; NCL for rank 3,
                              where PyTorch has no channels-last format), and
                              for conversions whether torch copied (yes / no;
                              '-' for ops)
    end

READ is measured, not computed: suggest_memory_format is not exposed in
Python, so for rank 4 and 5 it is read from the output of
F.interpolate(t, size=t.shape[2:], mode='nearest'), which 1.13 allocates with
t.suggest_memory_format() (cross-checked with avg_pool2d(t, 1) at rank 4; as
tests/golden/gen_layout.py does). A case whose result has identical packed
contiguous and channels-last strides would not be decidable this way and is
refused by the generator.

Conversions: `SIZES [--from FMT | --strides S] --to FMT` explains
mft_to_format (torch: x.to(memory_format=F)) and mft_contiguous (torch:
x.contiguous(memory_format=F)), in that order; `--op to_format | contiguous |
clone --in SPEC --to FMT` one of them (clone: x.clone(memory_format=F)).
COPY is "yes" when torch's result does not share x's memory.
"""

import os
import sys

import torch
import torch.nn.functional as F

assert torch.__version__.startswith("1.13"), torch.__version__

FIRST = {"contiguous", "channels_first", "nchw", "ncl", "ncw", "ncdhw", "cf"}
LAST = {"channels_last", "cl", "nhwc", "nlc", "nwc", "ndhwc"}

cases = []


def add(name, args):
    assert all(name != c[0] for c in cases), name
    cases.append((name, args.split()))


def is_cl(fmt):
    f = fmt.lower()
    assert f in FIRST or f in LAST, fmt
    return f in LAST


def ints(s):
    return [int(v) for v in s.split(",")] if s else []


def min_numel(sizes, strides):
    if any(s == 0 for s in sizes):
        return 0
    return 1 + sum((s - 1) * st for s, st in zip(sizes, strides))


def torch_cl(rank):
    return {4: torch.channels_last, 5: torch.channels_last_3d}[rank]


def packed(sizes, cl):
    """A zero tensor packed channels-first or channels-last (rank 3: N,L,C)."""
    if not cl:
        return torch.zeros(sizes)
    if len(sizes) == 3:
        n, c, l = sizes
        return torch.zeros(n, l, c).permute(0, 2, 1)
    return torch.empty(sizes, memory_format=torch_cl(len(sizes))).zero_()


def build(spec):
    """The torch tensor of an mft-explain input SPEC."""
    parts = spec.split("/")
    body, steps = parts[0], parts[1:]
    cl = False
    if ":" in body:
        fmt, body = body.split(":", 1)
        cl = is_cl(fmt)
    if "@" in body:
        sz, st = body.split("@")
        sizes, strides = ints(sz), ints(st)
        t = torch.zeros(min_numel(sizes, strides)).as_strided(sizes, strides)
    else:
        t = packed(ints(body), cl)
    for step in steps:
        name, arg = step.split(":", 1)
        if name == "contiguous":
            fmt = torch_cl(t.dim()) if is_cl(arg) else torch.contiguous_format
            t = t.contiguous(memory_format=fmt)
            continue
        v = ints(arg)
        if name == "select":
            t = t.select(v[0], v[1])
        elif name == "unsqueeze":
            t = t.unsqueeze(v[0])
        elif name == "squeeze":
            t = t.squeeze(v[0])
        elif name == "transpose":
            t = t.transpose(v[0], v[1])
        elif name == "permute":
            t = t.permute(*v)
        elif name == "narrow":
            t = t.narrow(v[0], v[1], v[2])
        else:
            raise ValueError("step %s has no torch counterpart here" % name)
    return t


def layout_name(rank, cl):
    names = {3: ("NCL", "NLC"), 4: ("NCHW", "NHWC"), 5: ("NCDHW", "NDHWC")}
    return names[rank][1 if cl else 0]


def reads(name, t):
    """suggest_memory_format of t, measured through ops that follow it."""
    r = t.dim()
    if r == 3:
        return "NCL"  # PyTorch has channels-last formats for rank 4 and 5 only
    assert r in (4, 5), (name, r)

    def classify(out):
        cs = torch.empty(out.shape).stride()
        ls = torch.empty(out.shape, memory_format=torch_cl(r)).stride()
        assert cs != ls, "%s: result strides cannot tell the formats apart" % name
        if out.stride() == cs:
            return layout_name(r, False)
        assert out.stride() == ls, (name, out.stride(), cs, ls)
        return layout_name(r, True)

    up = classify(F.interpolate(t, size=tuple(t.shape[2:]), mode="nearest"))
    if r == 4:
        pool = classify(F.avg_pool2d(t, 1))
        assert up == pool, (name, up, pool)
    return up


def run_op(op, ins):
    x = ins[0]
    if op == "relu":
        return torch.relu(x)
    if op == "add":
        return torch.add(ins[0], ins[1])
    if op in ("conv1d", "conv2d", "conv3d", "conv_transpose2d"):
        return getattr(torch, op)(ins[0], ins[1])
    if op == "max_pool2d":
        kernel = tuple(2 if s >= 2 else 1 for s in x.shape[-2:])
        return F.max_pool2d(x, kernel)
    if op == "softmax":
        return torch.softmax(x, 1)
    if op == "interpolate":
        return F.interpolate(x, size=tuple(2 * s for s in x.shape[2:]), mode="nearest")
    if op == "batch_norm":
        return F.batch_norm(x, None, None, training=True)
    if op == "cat":
        return torch.cat(ins, 0)
    if op == "log_softmax":
        return torch.log_softmax(x, 1)
    if op == "avg_pool2d":
        kernel = tuple(2 if s >= 2 else 1 for s in x.shape[-2:])
        return F.avg_pool2d(x, kernel)
    if op == "avg_pool3d":
        kernel = tuple(2 if s >= 2 else 1 for s in x.shape[-3:])
        return F.avg_pool3d(x, kernel)
    if op == "pad":
        return F.pad(x, (1,) * (2 * (x.dim() - 2)))
    if op == "group_norm":
        return F.group_norm(x, 1)
    if op == "instance_norm":
        return F.instance_norm(x)
    if op == "layer_norm":
        return F.layer_norm(x, tuple(x.shape[1:]))
    if op == "to_dtype":
        return x.to(torch.float64)
    raise ValueError("no torch counterpart for --op %s here" % op)


CONVERSIONS = {"to_format": "to", "contiguous": "contiguous", "clone": "clone"}


def torch_format(t, name):
    return torch_cl(t.dim()) if is_cl(name) else torch.contiguous_format


def copy_of(x, y):
    return "no" if y.data_ptr() == x.data_ptr() else "yes"


def ilist(xs):
    return ",".join(str(int(v)) for v in xs)


def render(name, args):
    out = ["case " + name, "args " + " ".join(args)]
    if "--op" in args:
        op = args[args.index("--op") + 1]
        specs = [args[i + 1] for i, a in enumerate(args) if a == "--in"]
        ins = [build(s) for s in specs]
        for k, t in enumerate(ins):
            out.append("input %d %s" % (k, ilist(t.stride())))
        if op in CONVERSIONS:
            x = ins[0]
            fmt = torch_format(x, args[args.index("--to") + 1])
            y = getattr(x, CONVERSIONS[op])(memory_format=fmt)
            out.append("torch %s %s %s" % (ilist(y.stride()), reads(name, y), copy_of(x, y)))
        else:
            y = run_op(op, ins)
            out.append("torch %s %s -" % (ilist(y.stride()), reads(name, y)))
    else:
        sizes = ints(args[0])
        to = args[args.index("--to") + 1]
        if "--strides" in args:
            strides = ints(args[args.index("--strides") + 1])
            x = torch.zeros(min_numel(sizes, strides)).as_strided(sizes, strides)
        else:
            x = packed(sizes, is_cl(args[args.index("--from") + 1]))
        out.append("input 0 %s" % ilist(x.stride()))
        fmt = torch_format(x, to)
        for y in (x.to(memory_format=fmt), x.contiguous(memory_format=fmt)):
            out.append("torch %s %s %s" % (ilist(y.stride()), reads(name, y), copy_of(x, y)))
    out.append("end")
    return out


def gen():
    # conversions (mft_to_format / mft_contiguous vs to() / contiguous())
    add("convert_c1_nchw_to_nhwc", "8,1,28,28 --from nchw --to nhwc")
    add("convert_hw1_nchw_to_nhwc", "8,3,1,1 --from nchw --to nhwc")
    add("convert_c1_nhwc_to_nchw", "8,1,28,28 --from nhwc --to nchw")
    add("convert_plain_nchw_to_nhwc", "2,3,4,4 --from nchw --to nhwc")
    add("convert_padded_nhwc", "2,3,4,4 --strides 64,1,16,3 --to nhwc")
    add("convert_c1_ndhwc", "2,1,3,4,4 --from ncdhw --to ndhwc")
    # ops on tensors PyTorch reads as mft does, and on ones it reads otherwise
    add("conv2d_weight_nhwc", "--op conv2d --in nchw:8,16,14,14 --in nhwc:32,16,3,3")
    add("conv2d_c1_tagged", "--op conv2d --in nchw:8,1,28,28/contiguous:nhwc --in nchw:16,1,3,3")
    add("conv2d_select_unsqueeze",
        "--op conv2d --in nhwc:2,3,4,4/select:0,0/unsqueeze:0 --in 5,3,1,1")
    add("conv_transpose2d_nhwc", "--op conv_transpose2d --in nhwc:2,4,5,5 --in 4,3,3,3")
    add("conv1d_nlc", "--op conv1d --in nlc:2,3,8 --in 4,3,1")
    add("relu_c1_tagged", "--op relu --in nchw:8,1,28,28/contiguous:nhwc")
    add("add_nhwc_nchw", "--op add --in nhwc:2,3,4,4 --in nchw:2,3,4,4")
    add("max_pool2d_c1_tagged", "--op max_pool2d --in nchw:8,1,28,28/contiguous:nhwc")
    add("softmax_nhwc", "--op softmax --in nhwc:2,3,4,4")
    add("interpolate_nhwc", "--op interpolate --in nhwc:1,3,4,4")
    add("batch_norm_ndhwc", "--op batch_norm --in ndhwc:2,3,4,4,4")
    add("cat_tagged_and_nhwc", "--op cat --in nchw:2,1,4,4/contiguous:nhwc --in nhwc:2,1,4,4")
    add("cat_nhwc_nhwc", "--op cat --in nhwc:2,3,4,4 --in nhwc:1,3,4,4")
    add("log_softmax_nhwc", "--op log_softmax --in nhwc:2,3,4,4")
    add("avg_pool2d_nhwc", "--op avg_pool2d --in nhwc:2,3,4,4")
    add("avg_pool3d_ndhwc", "--op avg_pool3d --in ndhwc:1,2,4,4,4")
    add("conv3d_ndhwc", "--op conv3d --in ndhwc:1,2,3,3,3 --in 4,2,1,1,1")
    add("pad_nhwc", "--op pad --in nhwc:2,3,4,4")
    add("group_norm_c1_tagged", "--op group_norm --in nchw:2,1,4,4/contiguous:nhwc")
    add("instance_norm_nhwc", "--op instance_norm --in nhwc:2,3,4,4")
    add("layer_norm_nhwc", "--op layer_norm --in nhwc:2,3,4,4")
    add("interpolate_nlc", "--op interpolate --in nlc:2,3,4")
    add("to_dtype_padded", "--op to_dtype --in 2,3,4,4@64,1,16,3")
    add("relu_nlc", "--op relu --in nlc:2,3,8")
    add("op_to_format_hw1", "--op to_format --in nchw:8,3,1,1 --to nhwc")
    add("op_clone_c1", "--op clone --in nchw:8,1,28,28 --to nhwc")
    add("op_contiguous_transposed", "--op contiguous --in nchw:2,3,4,5/transpose:2,3 --to nchw")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "explain_cases.txt")
    gen()
    body = []
    for name, args in cases:
        body.extend(render(name, args))
    doc = __doc__
    fmt_part = doc[doc.index("File format"):doc.index("READ is measured")]
    header = ["# mft-explain golden data, generated by tools/golden/gen_explain.py from PyTorch %s."
              % torch.__version__.split("a")[0],
              "# Do not edit: re-run `/usr/bin/python3 tools/golden/gen_explain.py`.",
              "# %d cases." % len(cases), "#"]
    header += [("# " + l).rstrip() for l in fmt_part.rstrip().splitlines()]
    header += [""]
    with open(path, "w") as fh:
        fh.write("\n".join(header + body) + "\n")
    print("%d cases -> %s (%d bytes)" % (len(cases), path, os.path.getsize(path)))


if __name__ == "__main__":
    main()
