#!/usr/bin/env bash
# .ci/bench.sh — set up and run the benchmarks side by side with PyTorch 1.13:
# installs the build dependencies plus python3-torch (Debian's PyTorch, the
# speed peer; never a runtime dependency of the library), builds build/
# (Release, -march=native) and runs bench/compare_pytorch.py, which interleaves
# PyTorch timings with runs of the C benchmarks and prints medians and ratios.
# Extra arguments go to compare_pytorch.py (e.g. --rounds 9).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source .ci/lib.sh

BUILD_DIR=${MFT_BUILD_DIR:-build}

mft_install_deps python3-torch

section "configure + build benchmarks ($BUILD_DIR, Release)"
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DMFT_BUILD_BENCH=ON >/dev/null
cmake --build "$BUILD_DIR" -j "$MFT_JOBS"

section "mft vs PyTorch 1.13"
/usr/bin/python3 bench/compare_pytorch.py --bench "$BUILD_DIR/bench/bench_copy" "$@"
