# shellcheck shell=bash
# .ci/lib.sh — helpers sourced by .ci/test.sh, .ci/demo.sh and .ci/run:
# section headers with timing, and installing the build dependencies on a
# Debian bookworm machine (skipped when everything is present, or when not
# running as root). Not meant to be run on its own.

# Debian packages the build, the tests and the install check need (zlib reads
# the gzipped IDX files; the Fashion-MNIST dataset feeds the main job and the
# training tests; graphviz's `dot` checks the tape pictures in
# tests/autograd/test_tape_dot.c and renders docs/img/fashion_mnist_tape.png;
# libdlpack-dev's dlpack.h checks the DLPack mirror structs in
# tests/tensor/test_dlpack.c, and python3-torch / python3-numpy run the DLPack
# round trips of tests/tensor/test_interop_dlpack.c; python3-torch is also the live
# oracle of tests/io/test_interop_safetensors.c, and NumPy of
# tests/io/test_interop_npy.c).
MFT_APT_PACKAGES=(gcc libc6-dev make cmake pkg-config libxxhash-dev zlib1g-dev
    dataset-fashion-mnist graphviz libdlpack-dev python3-torch python3-numpy)

MFT_T0=${MFT_T0:-$(date +%s)}
export MFT_T0

section() {
    local now
    now=$(date +%s)
    printf '\n==== %s  [+%ss]\n' "$*" "$((now - MFT_T0))"
}

# True when every package in MFT_APT_PACKAGES is installed (dpkg's view), or,
# on a machine without dpkg, when the commands and headers are there.
mft_deps_present() {
    if command -v dpkg-query >/dev/null 2>&1; then
        local pkg status
        for pkg in "${MFT_APT_PACKAGES[@]}"; do
            status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
            [[ $status == "install ok installed" ]] || return 1
        done
        return 0
    fi
    command -v cc >/dev/null && command -v cmake >/dev/null && command -v make >/dev/null &&
        command -v pkg-config >/dev/null && [[ -f /usr/include/xxhash.h ]] &&
        [[ -f /usr/include/zlib.h ]]
}

# mft_install_deps [EXTRA_PACKAGE...]: the build dependencies plus any extras
# (e.g. python3-torch for the PyTorch comparison in .ci/bench.sh).
mft_install_deps() {
    MFT_APT_PACKAGES+=("$@")
    section "dependencies"
    if mft_deps_present; then
        echo "all present: ${MFT_APT_PACKAGES[*]}"
        return 0
    fi
    if [[ $(id -u) -ne 0 ]]; then
        echo "not root: skipping apt-get; make sure these are installed: ${MFT_APT_PACKAGES[*]}"
        return 0
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "no apt-get on this machine; make sure these are installed: ${MFT_APT_PACKAGES[*]}"
        return 0
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${MFT_APT_PACKAGES[@]}" </dev/null
}

# Number of parallel build/test jobs (the CI machine has 2 cores).
MFT_JOBS=${MFT_JOBS:-2}
