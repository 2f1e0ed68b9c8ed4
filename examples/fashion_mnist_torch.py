#!/usr/bin/python3
"""examples/fashion_mnist_torch.py — the PyTorch 1.13 twin of
examples/fashion_mnist.c: the same CNN under the same state_dict names, the
same data and preprocessing, optimiser and batch size, trained in NCHW or
channels_last, printing per-epoch lines in the same format as the C example
(bench/compare_fashion_mnist.py puts them side by side). It also moves the
model to and from mft as a safetensors state_dict (docs/interop.md):

  /usr/bin/python3 examples/fashion_mnist_torch.py --format nhwc --epochs 1 --threads 1
  (--steps N stops each epoch after N steps: a quick step-time measurement)
  /usr/bin/python3 examples/fashion_mnist_torch.py --load model.safetensors
      evaluate weights exported by `fashion_mnist --export model.safetensors`
  /usr/bin/python3 examples/fashion_mnist_torch.py --train --save torch.safetensors
      train here, write weights for `fashion_mnist --import torch.safetensors`

Model (nn.Sequential of named layers, as mft_nn_fashion_cnn): conv1 1->32 3x3
p1, [bn1,] relu, maxpool 2, conv2 32->64 3x3 p1, [bn2,] relu, maxpool 2,
flatten, fc1 3136->128, relu, fc2 128->10; SGD momentum 0.9, lr 0.01, batch
64; each pixel v becomes float32((v * (1/255) - 0.2860) / 0.3530) computed in
float64, exactly as mft_images_to_batch's table. safetensors is read and
written with the standard library (struct + json) and torch.frombuffer: no
safetensors package is needed. examples/resnet_torch.py uses its data
loading and training loop.
"""
import argparse
import collections
import gzip
import json
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

DATA = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530
# safetensors dtype names of the dtypes a state_dict of this model holds
ST_DTYPES = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64, "I32": torch.int32,
             "U8": torch.uint8}


def read_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    magic = struct.unpack(">I", raw[:4])[0]
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def normalise(images):
    """uint8 (N, 28, 28) -> float32 (N, 1, 28, 28), bit for bit as mft_images_to_batch."""
    table = ((np.arange(256, dtype=np.float64) * (1.0 / 255.0) - MEAN) / STD).astype(np.float32)
    return torch.from_numpy(table[images]).unsqueeze(1)


def load_split(data, prefix, limit, fmt):
    """The first limit (0: all) images of a split, normalised, in memory
    format fmt, and their int64 labels."""
    x = read_idx(f"{data}/{prefix}-images-idx3-ubyte.gz")
    y = read_idx(f"{data}/{prefix}-labels-idx1-ubyte.gz").astype(np.int64)
    if limit > 0:
        x, y = x[:limit], y[:limit]
    return normalise(x).contiguous(memory_format=fmt), torch.from_numpy(y)


def net(batchnorm):
    """The model of mft_nn_fashion_cnn, its layers named as mft names them."""
    layers = [("conv1", nn.Conv2d(1, 32, 3, padding=1))]
    if batchnorm:
        layers.append(("bn1", nn.BatchNorm2d(32)))
    layers += [("relu1", nn.ReLU()), ("pool1", nn.MaxPool2d(2)),
               ("conv2", nn.Conv2d(32, 64, 3, padding=1))]
    if batchnorm:
        layers.append(("bn2", nn.BatchNorm2d(64)))
    layers += [("relu2", nn.ReLU()), ("pool2", nn.MaxPool2d(2)), ("flatten", nn.Flatten()),
               ("fc1", nn.Linear(3136, 128)), ("relu3", nn.ReLU()), ("fc2", nn.Linear(128, 10))]
    return nn.Sequential(collections.OrderedDict(layers))


def read_safetensors(path):
    """{name: tensor} of a safetensors file (C-order, little-endian)."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    data = bytearray(raw[8 + n:])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        begin, end = e["data_offsets"]
        dtype = ST_DTYPES[e["dtype"]]
        if end > begin:
            size = torch.empty(0, dtype=dtype).element_size()
            t = torch.frombuffer(data, dtype=dtype, count=(end - begin) // size, offset=begin)
        else:
            t = torch.empty(0, dtype=dtype)
        out[name] = t.reshape(e["shape"]).clone()
    return out


def write_safetensors(path, tensors):
    """Writes {name: tensor} in C order (NCHW for a channels_last weight)."""
    names = {v: k for k, v in ST_DTYPES.items()}
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        a = t.detach().contiguous().numpy()
        b = a.astype(a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": names[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def evaluate(model, xte, yte):
    model.eval()
    correct = 0
    with torch.no_grad():
        for s in range(0, xte.shape[0], 1000):
            pred = model(xte[s:s + 1000]).argmax(1)
            correct += int((pred == yte[s:s + 1000]).sum())
    return 100.0 * correct / xte.shape[0]


def train(model, opt, train_set, test_set, fmt, epochs, bs, seed, steps=0):
    """Epochs of shuffled batches (torch.randperm from seed), each followed
    by a test evaluation and one line in the C examples' format. steps > 0
    stops each epoch after that many steps."""
    (xtr, ytr), (xte, yte) = train_set, test_set
    g = torch.Generator().manual_seed(seed)
    for epoch in range(1, epochs + 1):
        model.train()
        perm = torch.randperm(xtr.shape[0], generator=g)
        t0 = time.perf_counter()
        total, nb = 0.0, 0
        nsteps = (xtr.shape[0] + bs - 1) // bs
        if steps:
            nsteps = min(nsteps, steps)
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
        acc = evaluate(model, xte, yte)
        print(f"epoch {epoch} loss {total / nb:.4f} test_acc {acc:.2f} "
              f"time {dt:.3f} steps {nb} ms_per_step {1000.0 * dt / nb:.3f}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--format", choices=["nhwc", "nchw"], default="nhwc")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--limit", type=int, default=0, help="use the first N training images")
    ap.add_argument("--test-limit", type=int, default=0, help="use the first N test images")
    ap.add_argument("--batchnorm", action="store_true")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--load", metavar="FILE", help="start from a safetensors state_dict")
    ap.add_argument("--train", action="store_true",
                    help="train (the default without --load; with --load, train from it)")
    ap.add_argument("--save", metavar="FILE", help="after training, write the state_dict")
    args = ap.parse_args()
    do_train = args.train or not args.load
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    fmt = torch.channels_last if args.format == "nhwc" else torch.contiguous_format

    xte, yte = load_split(DATA, "t10k", args.test_limit, fmt)
    model = net(args.batchnorm)
    if args.load:
        state = read_safetensors(args.load)
        model.load_state_dict(state, strict=True)
        print(f"loaded {len(state)} tensors from {args.load}: "
              + " ".join(f"{k}[{'x'.join(map(str, v.shape))}]" for k, v in state.items()))
    model = model.to(memory_format=fmt)
    if not do_train:
        print(f"test_acc {evaluate(model, xte, yte):.2f}", flush=True)
        return 0
    xtr, ytr = load_split(DATA, "train", args.limit, fmt)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    train(model, opt, (xtr, ytr), (xte, yte), fmt, args.epochs, 64, args.seed, args.steps)
    if args.save:
        write_safetensors(args.save, model.state_dict())
        print(f"saved {len(model.state_dict())} tensors to {args.save}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
