#!/usr/bin/env bash
# .ci/tsan.sh — the ThreadSanitizer run:
#   1. install the base dependencies plus clang-14, LLVM's OpenMP runtime
#      (libomp, which ships the Archer OMPT tool) and clang's sanitizer
#      runtimes (Debian bookworm, as root; skipped when present),
#   2. configure build-tsan/ with clang-14, -fsanitize=thread, RelWithDebInfo,
#      -Werror, OpenMP from libomp (-fopenmp=libomp: only libomp + Archer
#      tell TSan about OpenMP barriers and tasks; gcc's libgomp would drown
#      the run in false reports) and build it,
#   3. run the unit tests (1 and 2 OpenMP threads) and two short two-thread
#      trainings of examples/fashion_mnist under TSan with Archer loaded;
#      the first report stops the program (halt_on_error=1).
# MFT_SANITIZE (ASan + UBSan) cannot be combined with TSan, so the TSan flags
# go in through CMAKE_C_FLAGS and the linker flags instead.
# Which unit tests: the test_* executables (-R '^test_'); the tools'
# command-line tests and the fuzz corpus replays, also labelled unit, run
# one thread and are not built here. Left out of those:
#   test_errors_t1/_t2: it starts a thread with C11 thrd_create, which TSan
#     does not intercept (the new thread has no TSan state and crashes in
#     __tsan_func_entry); test_threads checks per-thread errors with pthreads;
#   test_resize_t1, test_conv_fast_t1: the one-thread variants of the two
#     slowest tests (about 100 s each under TSan; one thread, nothing for
#     TSan to see). Their _t2 variants run.
# Environment: MFT_TSAN_BUILD_DIR (default build-tsan), MFT_JOBS (default 2).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source .ci/lib.sh

TSAN_DIR=${MFT_TSAN_BUILD_DIR:-build-tsan}
LLVM_V=14

mft_install_deps "clang-$LLVM_V" "libomp-$LLVM_V-dev" "libclang-rt-$LLVM_V-dev"

# A file of an installed package (dpkg's list), else the usual LLVM path.
llvm_file() {
    local name=$1 f
    f=$(dpkg -L "libomp-$LLVM_V-dev" 2>/dev/null | grep "/$name\$" | head -n 1 || true)
    [[ -n $f ]] || f=/usr/lib/llvm-$LLVM_V/lib/$name
    [[ -f $f ]] || { echo "tsan.sh: $f not found (libomp-$LLVM_V-dev)" >&2; exit 1; }
    printf '%s\n' "$f"
}
CC_TSAN=$(command -v "clang-$LLVM_V") || { echo "tsan.sh: clang-$LLVM_V not found" >&2; exit 1; }
LIBOMP=$(llvm_file libomp.so)
ARCHER=$(llvm_file libarcher.so)

section "configure ($TSAN_DIR, clang-$LLVM_V, TSan, OpenMP from $LIBOMP)"
cmake -S . -B "$TSAN_DIR" \
    -DCMAKE_C_COMPILER="$CC_TSAN" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_FLAGS="-fsanitize=thread -fno-omit-frame-pointer" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" \
    -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=thread" \
    -DOpenMP_C_FLAGS="-fopenmp=libomp" \
    -DOpenMP_C_LIB_NAMES=omp \
    -DOpenMP_omp_LIBRARY="$LIBOMP" \
    -DMFT_OPENMP=ON \
    -DMFT_SANITIZE=OFF \
    -DMFT_WERROR=ON \
    -DMFT_BUILD_TESTS=ON \
    -DMFT_BUILD_TOOLS=ON \
    -DMFT_BUILD_BENCH=OFF

# Only what runs below: every tests/<layer>/test_*.c and the example (not the shared
# library, the tools, the other examples or the fuzz replays).
targets=(fashion_mnist)
for src in tests/*/test_*.c; do
    name=${src##*/}
    targets+=("${name%.c}")
done
section "build ($TSAN_DIR, $MFT_JOBS jobs, ${#targets[@]} targets)"
cmake --build "$TSAN_DIR" -j "$MFT_JOBS" --target "${targets[@]}"

# The programs must carry TSan and run on libomp, never libgomp.
for exe in "$TSAN_DIR/tests/test_threads" "$TSAN_DIR/examples/fashion_mnist"; do
    deps=$(LC_ALL=C ldd "$exe")
    if [[ $deps != *libomp.so* || $deps == *libgomp* ]]; then
        echo "tsan.sh: $exe is not linked against libomp only:" >&2
        echo "$deps" >&2
        exit 1
    fi
    syms=$(nm "$exe")
    [[ $syms == *" T __tsan_init"* ]] || { echo "tsan.sh: $exe lacks TSan" >&2; exit 1; }
    echo "$exe: TSan, libomp (no libgomp)"
done

# ignore_noninstrumented_modules: libomp itself is not instrumented; Archer
# supplies its synchronisation (and asks for this option).
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 history_size=4 ignore_noninstrumented_modules=1"
if [[ -f tests/tsan.supp ]]; then
    TSAN_OPTIONS+=" suppressions=$PWD/tests/tsan.supp"
fi
export OMP_TOOL_LIBRARIES=$ARCHER
export OMP_WAIT_POLICY=passive
# clang-14's TSan needs the address space layout it knows; kernels with more
# mmap randomisation (vm.mmap_rnd_bits 32) make it fail at start. Without
# ASLR it always fits; where personality() is refused, run as is.
RUN=()
if setarch "$(uname -m)" -R true 2>/dev/null; then
    RUN=(setarch "$(uname -m)" -R)
fi

failed=0
work=$(mktemp -d "${TMPDIR:-/tmp}/mft-tsan.XXXXXX")
trap 'rm -rf "$work"' EXIT

section "fashion_mnist under TSan: 2 threads, 20 steps, NHWC, batch norm, SGD"
# ARCHER_OPTIONS=verbose=1 once: Archer says it is there
if ARCHER_OPTIONS=verbose=1 "${RUN[@]}" "$TSAN_DIR/examples/fashion_mnist" --threads 2 \
    --steps 20 --limit 1280 --test-limit 256 --epochs 1 --batchnorm --quiet \
    --metrics "$work/m1.tsv" 2>&1 | tee "$work/fm1.log"; then :; else failed=1; fi
if ! grep -q 'Archer detected OpenMP application with TSan' "$work/fm1.log"; then
    echo "tsan.sh: Archer ($ARCHER) did not load" >&2
    exit 1
fi

section "fashion_mnist under TSan: 2 threads, 10 steps, NCHW, Adam"
if "${RUN[@]}" "$TSAN_DIR/examples/fashion_mnist" --threads 2 --format nchw --optimizer adam \
    --steps 10 --limit 640 --test-limit 256 --epochs 1 --quiet \
    --metrics "$work/m2.tsv"; then :; else failed=1; fi

section "ctest -L unit under TSan (1 and 2 threads)"
if "${RUN[@]}" ctest --test-dir "$TSAN_DIR" -L unit -R '^test_' \
    -E '^(test_errors_t[12]|test_resize_t1|test_conv_fast_t1)$' \
    --output-on-failure -j "$MFT_JOBS" </dev/null; then :; else failed=1; fi

if [[ $failed -ne 0 ]]; then
    section "tsan.sh: FAILED"
    exit 1
fi
section "tsan.sh: all passed"
