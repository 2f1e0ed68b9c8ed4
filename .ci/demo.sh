#!/usr/bin/env bash
# .ci/demo.sh — set up and run the main job (the README's first command):
# install the dependencies (compiler, CMake, xxHash, zlib and Debian's
# Fashion-MNIST dataset), build build/ (Release), and train the example CNN
# (examples/fashion_mnist.c) for one epoch in channels_last, with a progress
# bar when the terminal shows one. Extra arguments go to the example, e.g.
#   bash .ci/demo.sh --epochs 2 --threads 2 --format nchw
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source .ci/lib.sh

BUILD_DIR=${MFT_BUILD_DIR:-build}

mft_install_deps

section "configure + build the Fashion-MNIST example ($BUILD_DIR, Release)"
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DMFT_BUILD_TOOLS=ON >/dev/null
cmake --build "$BUILD_DIR" -j "$MFT_JOBS" --target fashion_mnist

section "train: build/examples/fashion_mnist --format nhwc --epochs 1 $*"
"$BUILD_DIR/examples/fashion_mnist" --format nhwc --epochs 1 "$@"
