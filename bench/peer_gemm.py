"""bench/peer_gemm.py -- the PyTorch 1.13 side of bench_gemm.c (same keys,
shapes, F32, contiguous). Each setup() returns a zero-argument callable doing
exactly the C case's work; the lead's driver times both sides."""
import torch
import torch.nn.functional as F

LB, LO, LI = 64, 128, 3136


def _mm(n):
    def setup():
        a = torch.randn(n, n)
        b = torch.randn(n, n)
        return lambda: torch.matmul(a, b)
    return setup


def _linear_fwd():
    x, w, b = torch.randn(LB, LI), torch.randn(LO, LI), torch.randn(LO)
    return lambda: F.linear(x, w, b)


def _bwd_input():
    g, w = torch.randn(LB, LO), torch.randn(LO, LI)
    return lambda: torch.matmul(g, w)


def _bwd_weight():
    g, x = torch.randn(LB, LO), torch.randn(LB, LI)
    return lambda: torch.matmul(g.t(), x)


def _linear_bwd():
    x = torch.randn(LB, LI, requires_grad=True)
    w = torch.randn(LO, LI, requires_grad=True)
    b = torch.randn(LO, requires_grad=True)
    y = F.linear(x, w, b)
    g = torch.randn(LB, LO)
    return lambda: torch.autograd.grad(y, (x, w, b), g, retain_graph=True)


CASES = {
    "mm_512": _mm(512),
    "mm_1024": _mm(1024),
    "linear_fwd": _linear_fwd,
    "linear_bwd_input": _bwd_input,
    "linear_bwd_weight": _bwd_weight,
    "linear_bwd": _linear_bwd,
}
