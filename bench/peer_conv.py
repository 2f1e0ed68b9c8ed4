"""bench/peer_conv.py -- the PyTorch 1.13 side of bench/bench_conv.c.

CASES = {key: setup}; setup() builds the inputs (same shapes, F32, same memory
format as the C case: channels_last for "nhwc", contiguous for "nchw"; the
weight contiguous, as in the C case) and returns a zero-argument callable
doing exactly the C case's work:
  fwd_*     F.conv2d(x, w, None, stride 1, padding k//2, groups)
  fwdbwd_*  the forward, then torch.ops.aten.convolution_backward for
            grad_input and grad_weight (no grad_bias) from a prepared grad_y.
Run by bench/compare_cnn.py (the lead's driver) with /usr/bin/python3.
"""
import torch
import torch.nn.functional as F

SHAPES = [
    (8, 64, 56, 56, 64, 3, 1),
    (8, 128, 28, 28, 128, 3, 1),
    (8, 256, 14, 14, 256, 3, 1),
    (32, 32, 28, 28, 64, 3, 1),
    (8, 64, 56, 56, 64, 1, 1),
    (64, 1, 28, 28, 32, 3, 1),
    (8, 64, 56, 56, 64, 3, 64),
]


def _key(bwd, fmt, N, C, H, W, K, k, groups):
    kpart = "dw" if groups > 1 else "k%d" % K
    return "%s_%s_%dx%dx%dx%d_%s_%dx%d" % ("fwdbwd" if bwd else "fwd", fmt, N, C, H, W, kpart,
                                           k, k)


def _make(bwd, fmt, N, C, H, W, K, k, groups):
    def setup():
        mf = torch.channels_last if fmt == "nhwc" else torch.contiguous_format
        g = torch.Generator().manual_seed(0)
        x = torch.rand(N, C, H, W, generator=g).contiguous(memory_format=mf)
        w = torch.rand(K, C // groups, k, k, generator=g)
        gy = torch.rand(N, K, H, W, generator=g).contiguous(memory_format=mf)
        pad = k // 2

        if not bwd:
            def run():
                with torch.no_grad():
                    return F.conv2d(x, w, None, 1, pad, 1, groups)
            return run

        def run_fb():
            with torch.no_grad():
                y = F.conv2d(x, w, None, 1, pad, 1, groups)
                gx, gw, _ = torch.ops.aten.convolution_backward(
                    gy, x, w, None, [1, 1], [pad, pad], [1, 1], False, [0, 0], groups,
                    [True, True, False])
                return y, gx, gw
        return run_fb
    return setup


CASES = {}
for _s in SHAPES:
    for _bwd in (False, True):
        for _fmt in ("nhwc", "nchw"):
            CASES[_key(_bwd, _fmt, *_s)] = _make(_bwd, _fmt, *_s)
