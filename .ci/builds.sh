#!/usr/bin/env bash
# .ci/builds.sh — the other build configurations CI compiles with -Werror and
# whose unit tests it runs (docs/reliability.md, "Builds"):
#   1. build-noomp/: gcc, MFT_OPENMP=OFF (the library without OpenMP: serial
#      kernels, the same results); unit tests with 1 thread (2 would be the
#      same run);
#   2. build-clang/: clang-14, MFT_NATIVE=OFF (no -march=native: the portable
#      kernels, SSE2 only), OpenMP from libomp; unit tests with 2 threads.
# The main gcc build (-march=native, OpenMP) is .ci/test.sh; clang with
# ThreadSanitizer is .ci/tsan.sh, clang with libFuzzer .ci/fuzz.sh.
# Only the library, the tests and the tools are built (no benchmarks).
# Environment: MFT_JOBS (default 2).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source .ci/lib.sh

mft_install_deps clang-14 libomp-14-dev

# build DIR NAME-REGEX CMAKE-ARGS...: configure, build, run the unit tests
# whose names match the regex.
build() {
    local dir=$1 regex=$2
    shift 2
    section "configure $dir: $*"
    cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DMFT_WERROR=ON -DMFT_BUILD_TESTS=ON \
        -DMFT_BUILD_TOOLS=ON -DMFT_BUILD_BENCH=OFF "$@" >/dev/null
    section "build $dir ($MFT_JOBS jobs)"
    cmake --build "$dir" -j "$MFT_JOBS" >/dev/null
    section "ctest $dir: -L unit -R '$regex'"
    ctest --test-dir "$dir" -L unit -R "$regex" --output-on-failure -j "$MFT_JOBS" </dev/null
}

build build-noomp '_t1$|^tool_|^fuzz_replay_' -DMFT_OPENMP=OFF
build build-clang '_t2$|^tool_|^fuzz_replay_' -DCMAKE_C_COMPILER=clang-14 -DMFT_NATIVE=OFF

section "builds.sh: all passed"
