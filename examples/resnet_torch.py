#!/usr/bin/python3
"""examples/resnet_torch.py — the PyTorch 1.13 twin of examples/resnet.c: the
same small ResNet, data subset, optimiser, learning rate and batch size,
trained in channels_last (or NCHW), printing the same per-epoch lines
(loss, test accuracy, ms per training step) so the two compare side by side.

  /usr/bin/python3 examples/resnet_torch.py --format nhwc --threads 2
  build/examples/resnet --format nhwc --threads 2          # the C run

Model: stem conv 1->16 3x3 p1 (no bias), BN, relu; BasicBlock 16->16;
BasicBlock 16->32 stride 2 and 32->64 stride 2 with 1x1 conv + BN projection
shortcuts; global average pool, flatten, linear 64->10. A BasicBlock is
relu(body(x) + shortcut(x)), body = conv 3x3 (stride), BN, relu, conv 3x3,
BN. The module tree and its state_dict names ("3.body.0.weight",
"4.shortcut.1.running_mean") are those mft_module_parameters /
mft_module_buffers give the C model. Initialisation is PyTorch's default
(the same distributions as mft's, not the same numbers). SGD momentum 0.9,
lr 0.05, batch 64, the first --train-limit training images, inputs
normalised as mft's (x / 255 - 0.2860) / 0.3530; data loading and the
training loop are examples/fashion_mnist_torch.py's.
"""
import argparse
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from fashion_mnist_torch import load_split, train


class Residual(nn.Module):
    """mft_nn_residual(body, shortcut, relu=True): relu(body(x) + shortcut(x))."""

    def __init__(self, body, shortcut=None):
        super().__init__()
        self.body = body
        self.shortcut = shortcut  # None: the identity (no submodule, as in mft)

    def forward(self, x):
        s = x if self.shortcut is None else self.shortcut(x)
        return F.relu(self.body(x) + s)


def basic_block(cin, cout, stride):
    body = nn.Sequential(
        nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False), nn.BatchNorm2d(cout),
        nn.ReLU(), nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout))
    shortcut = None
    if stride != 1 or cin != cout:
        shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False),
                                 nn.BatchNorm2d(cout))
    return Residual(body, shortcut)


def resnet():
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
        basic_block(16, 16, 1), basic_block(16, 32, 2), basic_block(32, 64, 2),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(1, 3), nn.Linear(64, 10))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--format", choices=["nhwc", "nchw"], default="nhwc")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--train-limit", type=int, default=30000)
    ap.add_argument("--test-limit", type=int, default=0)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    fmt = torch.channels_last if args.format == "nhwc" else torch.contiguous_format

    xtr, ytr = load_split(args.data, "train", args.train_limit, fmt)
    xte, yte = load_split(args.data, "t10k", args.test_limit, fmt)
    model = resnet().to(memory_format=fmt)
    nparams = sum(p.numel() for p in model.parameters())
    print(f"resnet_torch: {args.format}, {torch.get_num_threads()} thread(s), {xtr.shape[0]} train "
          f"/ {xte.shape[0]} test images, batch {args.batch}, sgd lr {args.lr:g} momentum 0.9, "
          f"{nparams} parameters in {len(list(model.parameters()))} tensors, torch "
          f"{torch.__version__}")
    if not args.quiet:
        print(model)
    sys.stdout.flush()
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    train(model, opt, (xtr, ytr), (xte, yte), fmt, args.epochs, args.batch, args.seed)
    return 0

if __name__ == "__main__":
    sys.exit(main())
