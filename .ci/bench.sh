#!/usr/bin/env bash
# .ci/bench.sh — set up and run the benchmarks side by side with PyTorch 1.13:
# installs the build dependencies plus python3-torch (Debian's PyTorch, the
# speed peer; never a runtime dependency of the library), builds build/
# (Release, -march=native) and runs bench/compare_pytorch.py, which interleaves
# PyTorch timings with runs of the C benchmarks -- bench_copy (copy, NCHW<->NHWC
# conversion) and bench_elementwise (relu, x*2.5, x+y, x+bias, in-place/out,
# non-dense operands, sums, per-call time) -- and, through bench/compare_cnn.py,
# the CNN operator benches (conv, pool, norm, resize, gemm) -- and prints
# medians and ratios. Then bench_reorder (plain <-> nChw16c reorders against
# oneDNN 2.6's reorder primitive, from libdnnl-dev, and a STREAM copy).
# Extra arguments go to compare_pytorch.py (e.g. --rounds 9, --benches copy).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source .ci/lib.sh

BUILD_DIR=${MFT_BUILD_DIR:-build}

mft_install_deps python3-torch libdnnl-dev

section "configure + build benchmarks ($BUILD_DIR, Release)"
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DMFT_BUILD_BENCH=ON >/dev/null
cmake --build "$BUILD_DIR" -j "$MFT_JOBS"

section "mft vs PyTorch 1.13"
benches=()
for b in "$BUILD_DIR"/bench/bench_*; do
    # bench_profile, bench_reorder and bench_conv_onednn have no PyTorch peer
    case ${b##*/} in bench_profile | bench_reorder | bench_conv_onednn) continue ;; esac
    [[ -x $b && -f $b ]] && benches+=(--bench "$b")
done
/usr/bin/python3 bench/compare_pytorch.py "${benches[@]}" "$@"

section "reorders plain <-> nChw16c: mft vs oneDNN 2.6 and a STREAM copy"
"$BUILD_DIR"/bench/bench_reorder

section "conv2d on nChw16c: mft vs oneDNN 2.6's convolution"
"$BUILD_DIR"/bench/bench_conv_onednn
