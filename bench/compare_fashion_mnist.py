#!/usr/bin/python3
"""bench/compare_fashion_mnist.py — the main job against its PyTorch anchor,
side by side in one run: build/examples/fashion_mnist and
examples/fashion_mnist_torch.py train the same CNN on the same data with the same
batch size, thread count and memory format; both print ms_per_step.

Quick step-time comparison (default; each configuration alternates between
the two programs for --rounds rounds of --steps steps, medians reported):

  /usr/bin/python3 bench/compare_fashion_mnist.py --steps 200 --rounds 3

Full epochs with test accuracy (slow: PyTorch needs ~80 s per epoch here):

  /usr/bin/python3 bench/compare_fashion_mnist.py --epochs 2 --rounds 1 --threads 1,2 --formats nhwc
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINE = re.compile(r"^epoch (\d+) loss ([0-9.naninf]+) test_acc ([0-9.]+) time ([0-9.]+) "
                  r"steps (\d+) ms_per_step ([0-9.]+)")


def run(cmd):
    # the environment is left as it is: both programs use libgomp's default
    # (active) wait policy unless the caller sets OMP_WAIT_POLICY
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    epochs = [LINE.match(l) for l in out.splitlines()]
    epochs = [m for m in epochs if m]
    if not epochs:
        raise SystemExit(f"no epoch line from {' '.join(cmd)}:\n{out}")
    return [{"epoch": int(m[1]), "loss": float(m[2]), "acc": float(m[3]),
             "time": float(m[4]), "ms_per_step": float(m[6])} for m in epochs]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exe", default=os.path.join(ROOT, "build/examples/fashion_mnist"))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--formats", default="nhwc,nchw")
    ap.add_argument("--steps", type=int, default=200, help="steps per epoch (0 = full epoch)")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batchnorm", action="store_true")
    ap.add_argument("--json-out")
    a = ap.parse_args()
    rows = []
    for fmt in a.formats.split(","):
        for t in [int(x) for x in a.threads.split(",")]:
            common = ["--format", fmt, "--threads", str(t), "--epochs", str(a.epochs)]
            if a.steps:
                common += ["--steps", str(a.steps)]
            if a.batchnorm:
                common += ["--batchnorm"]
            ours, theirs = [], []
            for _ in range(a.rounds):
                ours.append(run([a.exe, "--quiet", "--metrics", os.devnull] + common))
                theirs.append(run(["/usr/bin/python3", os.path.join(ROOT, "examples/fashion_mnist_torch.py")]
                                  + common))
            m_ours = statistics.median(e["ms_per_step"] for r in ours for e in r)
            m_theirs = statistics.median(e["ms_per_step"] for r in theirs for e in r)
            row = {"format": fmt, "threads": t, "mft_ms_per_step": m_ours,
                   "torch_ms_per_step": m_theirs, "ratio": m_ours / m_theirs,
                   "mft_last_epoch": ours[-1][-1], "torch_last_epoch": theirs[-1][-1]}
            rows.append(row)
            print(f"{fmt} T{t}: mft {m_ours:8.2f} ms/step  torch {m_theirs:8.2f} ms/step  "
                  f"ratio {m_ours / m_theirs:5.3f}  | last epoch acc mft {ours[-1][-1]['acc']:.2f} "
                  f"torch {theirs[-1][-1]['acc']:.2f}  loss mft {ours[-1][-1]['loss']:.4f} "
                  f"torch {theirs[-1][-1]['loss']:.4f}", flush=True)
    print("\n| format | threads | mft ms/step | PyTorch ms/step | mft / PyTorch |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['format']} | {r['threads']} | {r['mft_ms_per_step']:.2f} | "
              f"{r['torch_ms_per_step']:.2f} | {r['ratio']:.3f} |")
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
