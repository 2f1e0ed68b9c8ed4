"""bench/peer_pool.py -- the PyTorch 1.13 side of bench/bench_pool.c.

CASES = {key: setup}; setup() builds the inputs (x 8x64x56x56 F32,
channels_last for "nhwc", contiguous for "nchw"; grad_out of the forward
result's sizes in the same format; the max indices from the forward) and
returns a zero-argument callable doing exactly the C case's work:
  max_pool2d_*_fwd            F.max_pool2d(..., return_indices=True), no grad
  max_pool2d_*_bwd            torch.ops.aten.max_pool2d_with_indices_backward only
  avg_pool2d_k3s1p1_fwd/bwd   F.avg_pool2d / torch.ops.aten.avg_pool2d_backward
  adaptive_avg_pool2d_o*_fwd  F.adaptive_avg_pool2d
  adaptive_avg_pool2d_o*_bwd  torch.ops.aten._adaptive_avg_pool2d_backward
Run by bench/compare_cnn.py (the lead's driver) with /usr/bin/python3.
"""
import torch
import torch.nn.functional as F

N, C, H, W = 8, 64, 56, 56
KINDS = {
    "max_pool2d_k3s2p1": ("max", 3, 2, 1),
    "max_pool2d_k2s2": ("max", 2, 2, 0),
    "avg_pool2d_k3s1p1": ("avg", 3, 1, 1),
    "adaptive_avg_pool2d_o1": ("aavg", 1, None, None),
    "adaptive_avg_pool2d_o7": ("aavg", 7, None, None),
}


def _make(name, bwd, fmt):
    kind, k, s, p = KINDS[name]

    def setup():
        mf = torch.channels_last if fmt == "nhwc" else torch.contiguous_format
        g = torch.Generator().manual_seed(0)
        x = torch.rand(N, C, H, W, generator=g).contiguous(memory_format=mf)
        with torch.no_grad():
            if kind == "max":
                y, ind = F.max_pool2d(x, k, s, p, return_indices=True)
            elif kind == "avg":
                y, ind = F.avg_pool2d(x, k, s, p), None
            else:
                y, ind = F.adaptive_avg_pool2d(x, k), None
        gy = torch.rand(y.shape, generator=g).contiguous(memory_format=mf)
        if not bwd:
            def run_f():
                with torch.no_grad():
                    if kind == "max":
                        return F.max_pool2d(x, k, s, p, return_indices=True)
                    if kind == "avg":
                        return F.avg_pool2d(x, k, s, p)
                    return F.adaptive_avg_pool2d(x, k)
            return run_f
        if kind == "max":
            def run_m():
                return torch.ops.aten.max_pool2d_with_indices_backward(
                    gy, x, [k, k], [s, s], [p, p], [1, 1], False, ind)
            return run_m
        if kind == "avg":
            def run_a():
                return torch.ops.aten.avg_pool2d_backward(
                    gy, x, [k, k], [s, s], [p, p], False, True, None)
            return run_a

        def run_aa():
            return torch.ops.aten._adaptive_avg_pool2d_backward(gy, x)
        return run_aa
    return setup


CASES = {}
for _fmt in ("nhwc", "nchw"):
    for _name in KINDS:
        for _bwd in (False, True):
            CASES["%s_%s_%s_8x64x56x56" % (_name, "bwd" if _bwd else "fwd", _fmt)] = \
                _make(_name, _bwd, _fmt)
