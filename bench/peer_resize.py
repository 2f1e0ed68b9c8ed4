"""bench/peer_resize.py -- the PyTorch 1.13 side of bench/bench_resize.c.

CASES = {key: setup}; setup() builds the inputs (8x64x56x56 F32, channels_last
for "nhwc", contiguous for "nchw"; grad_y of 8x64x112x112 in the same format)
and returns a zero-argument callable doing exactly the C case's work:
  <mode>_fwd_*   F.interpolate(x, size=(112, 112), mode, align_corners=False)
  <mode>_bwd_*   torch.ops.aten.upsample_<mode>2d_backward(grad_y, ...) only
  dropout_fwd_*  F.dropout(x, 0.5, training=True)
Run by bench/compare_cnn.py (the lead's driver) with /usr/bin/python3.
"""
import torch
import torch.nn.functional as F

N, C, H, W = 8, 64, 56, 56
OH, OW = 112, 112


def _make(kind, mode, fmt):
    def setup():
        mf = torch.channels_last if fmt == "nhwc" else torch.contiguous_format
        g = torch.Generator().manual_seed(0)
        x = torch.rand(N, C, H, W, generator=g).contiguous(memory_format=mf)
        gy = torch.rand(N, C, OH, OW, generator=g).contiguous(memory_format=mf)
        if kind == "fwd":
            ac = None if mode == "nearest" else False

            def run():
                with torch.no_grad():
                    return F.interpolate(x, size=(OH, OW), mode=mode, align_corners=ac)
            return run
        if kind == "bwd":
            if mode == "nearest":
                def run_b():
                    return torch.ops.aten.upsample_nearest2d_backward(
                        gy, [OH, OW], [N, C, H, W], None, None)
                return run_b

            def run_bl():
                return torch.ops.aten.upsample_bilinear2d_backward(
                    gy, [OH, OW], [N, C, H, W], False, None, None)
            return run_bl

        def run_d():
            with torch.no_grad():
                return F.dropout(x, 0.5, training=True)
        return run_d
    return setup


CASES = {}
for _fmt in ("nhwc", "nchw"):
    for _mode in ("nearest", "bilinear"):
        for _kind in ("fwd", "bwd"):
            CASES["%s_%s_%s_8x64x56x56_x2" % (_mode, _kind, _fmt)] = _make(_kind, _mode, _fmt)
    CASES["dropout_fwd_%s_8x64x56x56_p0.5" % _fmt] = _make("drop", None, _fmt)
