#!/usr/bin/env bash
# .ci/explain_demo.sh — the layout explainer demo: installs the
# dependencies, builds build/ (Release) and runs build/tools/mft-explain on a
# few tensors that show what memory formats are about.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source .ci/lib.sh

BUILD_DIR=${MFT_BUILD_DIR:-build}

mft_install_deps

section "configure + build mft-explain ($BUILD_DIR, Release)"
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DMFT_BUILD_TOOLS=ON >/dev/null
cmake --build "$BUILD_DIR" -j "$MFT_JOBS" --target mft-explain

explain() {
    local what=$1
    shift
    printf '\n---- %s\n$ mft-explain %s\n' "$what" "$*"
    "$BUILD_DIR/tools/mft-explain" "$@"
}

section "the layout explainer"
explain "1. NCHW: the default (contiguous) layout of a 2x3x4x4 tensor" \
    2,3,4,4
explain "2. the same logical tensor in channels_last (NHWC): sizes unchanged, strides say C is fastest" \
    2,3,4,4 --format nhwc
explain "3. C == 1 in NHWC: the strides fit both formats; the declared tag records the intent" \
    2,1,4,4 --format nhwc
explain "4. the same C == 1 strides wrapped from a raw buffer: nothing declared, so the tag is read from the strides (origin: inferred)" \
    2,1,4,4 --layout NHWC
explain "5. a padded row pitch: 3 valid floats per row of 5 (not contiguous, not dense, still a view)" \
    1,3,4,3 --strides 60,20,5,1
explain "6. a broadcast view: a per-channel vector expanded to 2x3x4x4 (stride 0 = repeated)" \
    2,3,4,4 --strides 0,1,0,0
explain "7. H and W transposed: the order fits neither format, the tag falls back to CONTIGUOUS" \
    2,3,4,4 --strides 48,16,1,4

section "demo done: try build/tools/mft-explain --help"
