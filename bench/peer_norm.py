"""bench/peer_norm.py -- the PyTorch 1.13 side of bench/bench_norm.c.

CASES = {key: setup}; setup() builds the inputs (x and grad_out 8x64x56x56
F32, channels_last for "nhwc", contiguous for "nchw"; weight / bias of C, or
of (C, H, W) for layer_norm; the statistics saved by one forward) and returns
a zero-argument callable doing exactly the C case's work:
  batch_norm_train_fwd  torch.ops.aten.native_batch_norm (training, running
                        stats updated, saves mean / invstd)
  batch_norm_train_bwd  torch.ops.aten.native_batch_norm_backward, grads of
                        x, weight, bias
  group_norm_g32_fwd    torch.ops.aten.native_group_norm (32 groups)
  group_norm_g32_bwd    torch.ops.aten.native_group_norm_backward
  layer_norm_chw_fwd    torch.ops.aten.native_layer_norm over (C, H, W)
  layer_norm_chw_bwd    torch.ops.aten.native_layer_norm_backward
Run by bench/compare_cnn.py (the lead's driver) with /usr/bin/python3.
"""
import torch

N, C, H, W = 8, 64, 56, 56
EPS = 1e-5
MASK = [True, True, True]


def _make(kind, bwd, fmt):
    def setup():
        mf = torch.channels_last if fmt == "nhwc" else torch.contiguous_format
        g = torch.Generator().manual_seed(0)
        x = torch.rand(N, C, H, W, generator=g).contiguous(memory_format=mf)
        gy = torch.rand(N, C, H, W, generator=g).contiguous(memory_format=mf)
        wshape = [C, H, W] if kind == "layer_norm_chw" else [C]
        w = torch.rand(wshape, generator=g)
        b = torch.rand(wshape, generator=g)
        rm, rv = torch.zeros(C), torch.ones(C)
        with torch.no_grad():
            if kind == "batch_norm_train":
                _, sm, si = torch.ops.aten.native_batch_norm(x, w, b, rm, rv, True, 0.1, EPS)
            elif kind == "group_norm_g32":
                _, sm, si = torch.ops.aten.native_group_norm(x, w, b, N, C, H * W, 32, EPS)
            else:
                _, sm, si = torch.ops.aten.native_layer_norm(x, wshape, w, b, EPS)
        if kind == "batch_norm_train":
            if bwd:
                return lambda: torch.ops.aten.native_batch_norm_backward(
                    gy, x, w, rm, rv, sm, si, True, EPS, MASK)
            return lambda: torch.ops.aten.native_batch_norm(x, w, b, rm, rv, True, 0.1, EPS)
        if kind == "group_norm_g32":
            if bwd:
                return lambda: torch.ops.aten.native_group_norm_backward(
                    gy, x, sm, si, w, N, C, H * W, 32, MASK)
            return lambda: torch.ops.aten.native_group_norm(x, w, b, N, C, H * W, 32, EPS)
        if bwd:
            return lambda: torch.ops.aten.native_layer_norm_backward(
                gy, x, wshape, sm, si, w, b, MASK)
        return lambda: torch.ops.aten.native_layer_norm(x, wshape, w, b, EPS)
    return setup


CASES = {}
for _kind in ("batch_norm_train", "group_norm_g32", "layer_norm_chw"):
    for _bwd in (False, True):
        for _fmt in ("nhwc", "nchw"):
            CASES["%s_%s_%s_8x64x56x56" % (_kind, "bwd" if _bwd else "fwd", _fmt)] = \
                _make(_kind, _bwd, _fmt)
