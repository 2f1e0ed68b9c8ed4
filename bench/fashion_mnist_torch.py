#!/usr/bin/python3
"""bench/fashion_mnist_torch.py — the PyTorch 1.13 anchor for the main job
(examples/fashion_mnist): the same CNN, data, optimiser and batch size,
trained in NCHW or channels_last, printing per-epoch lines in the same format
as the C example so bench/compare_fashion_mnist.py can put them side by side.

  /usr/bin/python3 bench/fashion_mnist_torch.py --format nhwc --epochs 1 --threads 1
  (--steps N stops each epoch after N steps: a quick step-time measurement)

Model: conv 1->32 3x3 p1, relu, maxpool 2, conv 32->64 3x3 p1, relu, maxpool 2,
flatten, linear 3136->128, relu, linear 128->10; SGD momentum 0.9, lr 0.01,
batch 64; inputs scaled to [0,1] then normalised with mean 0.2860, std 0.3530.
"""
import argparse
import gzip
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

DATA = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530


def read_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    magic = struct.unpack(">I", raw[:4])[0]
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


class Net(nn.Module):
    def __init__(self, batchnorm):
        super().__init__()
        self.c1 = nn.Conv2d(1, 32, 3, padding=1)
        self.c2 = nn.Conv2d(32, 64, 3, padding=1)
        self.b1 = nn.BatchNorm2d(32) if batchnorm else nn.Identity()
        self.b2 = nn.BatchNorm2d(64) if batchnorm else nn.Identity()
        self.f1 = nn.Linear(3136, 128)
        self.f2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.b1(self.c1(x))), 2)
        x = F.max_pool2d(F.relu(self.b2(self.c2(x))), 2)
        x = torch.flatten(x, 1)
        return self.f2(F.relu(self.f1(x)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--format", choices=["nhwc", "nchw"], default="nhwc")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--batchnorm", action="store_true")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    fmt = torch.channels_last if args.format == "nhwc" else torch.contiguous_format

    def load(prefix):
        x = read_idx(f"{DATA}/{prefix}-images-idx3-ubyte.gz").astype(np.float32) / 255.0
        y = read_idx(f"{DATA}/{prefix}-labels-idx1-ubyte.gz").astype(np.int64)
        x = (torch.from_numpy(x).unsqueeze(1) - MEAN) / STD
        return x.contiguous(memory_format=fmt), torch.from_numpy(y)

    xtr, ytr = load("train")
    xte, yte = load("t10k")
    model = Net(args.batchnorm).to(memory_format=fmt)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(args.seed)
    bs = 64
    for epoch in range(1, args.epochs + 1):
        model.train()
        perm = torch.randperm(xtr.shape[0], generator=g)
        t0 = time.perf_counter()
        total, nb = 0.0, 0
        nsteps = (xtr.shape[0] + bs - 1) // bs
        if args.steps:
            nsteps = min(nsteps, args.steps)
        for s in range(nsteps):
            idx = perm[s * bs:(s + 1) * bs]
            xb = xtr[idx].contiguous(memory_format=fmt)
            yb = ytr[idx]
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
            total += loss.item()
            nb += 1
        dt = time.perf_counter() - t0
        model.eval()
        correct = 0
        with torch.no_grad():
            for s in range(0, xte.shape[0], 1000):
                pred = model(xte[s:s + 1000]).argmax(1)
                correct += int((pred == yte[s:s + 1000]).sum())
        print(f"epoch {epoch} loss {total / nb:.4f} test_acc {100.0 * correct / xte.shape[0]:.2f} "
              f"time {dt:.3f} steps {nb} ms_per_step {1000.0 * dt / nb:.3f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
