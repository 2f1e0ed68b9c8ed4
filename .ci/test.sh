#!/usr/bin/env bash
# .ci/test.sh — set up and run all tests (the README's test command):
#   1. install the build dependencies (Debian bookworm, as root; skipped when
#      present or when not root),
#   2. configure build/ with -DMFT_WERROR=ON and build with 2 jobs,
#   3. run the whole CTest suite,
#   4. install into a temporary prefix and build + run tests/consumer both
#      with find_package(mft) and with pkg-config.
# Environment: MFT_BUILD_DIR (default build), MFT_JOBS (default 2).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source .ci/lib.sh

BUILD_DIR=${MFT_BUILD_DIR:-build}

mft_install_deps

section "configure ($BUILD_DIR, Release, -Werror)"
cmake -S . -B "$BUILD_DIR" \
    -DCMAKE_BUILD_TYPE=Release \
    -DMFT_WERROR=ON \
    -DMFT_SANITIZE=OFF \
    -DMFT_BUILD_TESTS=ON \
    -DMFT_BUILD_TOOLS=ON

section "build ($MFT_JOBS jobs)"
cmake --build "$BUILD_DIR" -j "$MFT_JOBS"

section "ctest"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$MFT_JOBS" </dev/null

section "install into a temporary prefix"
work=$(mktemp -d "${TMPDIR:-/tmp}/mft-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"
cmake --install "$BUILD_DIR" --prefix "$prefix"
pcfile=$(find "$prefix" -name mft.pc -print -quit)
[[ -n $pcfile ]] || { echo "mft.pc was not installed" >&2; exit 1; }
echo "installed: $(cd "$prefix" && find . -type f -o -type l | sort | tr '\n' ' ')"

section "consumer: find_package(mft)"
cmake -S tests/consumer -B "$work/consumer-build" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_BUILD_TYPE=Release
cmake --build "$work/consumer-build" -j "$MFT_JOBS"
"$work/consumer-build/consumer"
"$work/consumer-build/consumer_static"
# mft::mft must really be the shared library, mft::mft_static the archive
needs_libmft() { [[ $(LC_ALL=C readelf -d "$1") == *"Shared library: [libmft.so.0]"* ]]; }
needs_libmft "$work/consumer-build/consumer" ||
    { echo "consumer does not link libmft.so.0" >&2; exit 1; }
! needs_libmft "$work/consumer-build/consumer_static" ||
    { echo "consumer_static links libmft.so.0" >&2; exit 1; }
echo "consumer -> libmft.so.0, consumer_static -> libmft.a: ok"

section "consumer: pkg-config"
PKG_CONFIG_PATH=$(dirname "$pcfile")
export PKG_CONFIG_PATH
echo "pkg-config --modversion mft: $(pkg-config --modversion mft)"
echo "pkg-config --cflags --libs mft: $(pkg-config --cflags --libs mft)"
libdir=$(pkg-config --variable=libdir mft)
# shared: exactly the documented command line (+ an rpath to the temp prefix)
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror tests/consumer/main.c -o "$work/consumer_pc" \
    $(pkg-config --cflags --libs mft) -Wl,-rpath,"$libdir"
"$work/consumer_pc"
# static: libmft.a plus Libs.private (OpenMP, libm) must be enough to link
static_libs=$(pkg-config --static --libs mft)
static_libs=${static_libs//-lmft/-l:libmft.a}
# shellcheck disable=SC2046,SC2086
cc -std=c11 -Wall -Wextra -Werror tests/consumer/main.c -o "$work/consumer_pc_static" \
    $(pkg-config --static --cflags mft) $static_libs
"$work/consumer_pc_static"

section "test.sh: all passed"
