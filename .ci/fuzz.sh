#!/usr/bin/env bash
# .ci/fuzz.sh — the fuzz job: builds the libFuzzer targets of tests/fuzz/ with
# clang (ASan + UBSan + coverage over the whole library) and runs each for a
# while on a fresh copy of its committed seed corpus (tests/fuzz/corpus/<target>,
# never modified). Exits non-zero on any finding (crash, invariant failure,
# sanitizer report, leak, timeout, out-of-memory) and prints where the
# reproducer was written. See tests/fuzz/README.md.
#
# Environment:
#   MFT_FUZZ_SECONDS    seconds per target (default 60)
#   MFT_FUZZ_TARGETS    targets to run (default "geometry checkpoint idx overlap layout npy")
#   MFT_FUZZ_PARALLEL   targets run at the same time (default MFT_JOBS = 2)
#   MFT_FUZZ_BUILD_DIR  build directory (default build-fuzz)
#   MFT_FUZZ_CC         C compiler (default clang-14)
# Outputs under the build directory: fuzz-run/<target>/{corpus,log} (the grown
# corpus copy and libFuzzer's log) and fuzz-artifacts/<target>/ (reproducers).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source .ci/lib.sh

FUZZ_DIR=${MFT_FUZZ_BUILD_DIR:-build-fuzz}
FUZZ_SECONDS=${MFT_FUZZ_SECONDS:-60}
FUZZ_CC=${MFT_FUZZ_CC:-clang-14}
PARALLEL=${MFT_FUZZ_PARALLEL:-$MFT_JOBS}
read -r -a TARGETS <<<"${MFT_FUZZ_TARGETS:-geometry checkpoint idx overlap layout safetensors npy}"

# -max_len per target: the decoders read small inputs; files need more room.
max_len_of() {
    case $1 in
    checkpoint | safetensors) echo 8192 ;;
    idx | npy) echo 4096 ;;
    *) echo 512 ;;
    esac
}

mft_install_deps clang-14 libclang-rt-14-dev

section "configure ($FUZZ_DIR, $FUZZ_CC, RelWithDebInfo, libFuzzer + ASan + UBSan, -Werror)"
# OpenMP off: the targets run one thread, and clang's libomp is not needed.
CC=$FUZZ_CC cmake -S . -B "$FUZZ_DIR" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DMFT_FUZZ=ON \
    -DMFT_WERROR=ON \
    -DMFT_OPENMP=OFF \
    -DMFT_BUILD_TESTS=ON \
    -DMFT_BUILD_BENCH=OFF

section "build the fuzz targets ($MFT_JOBS jobs)"
build_targets=()
for t in "${TARGETS[@]}"; do build_targets+=("fuzz_$t"); done
cmake --build "$FUZZ_DIR" -j "$MFT_JOBS" --target "${build_targets[@]}"

run_dir="$PWD/$FUZZ_DIR/fuzz-run"
art_dir="$PWD/$FUZZ_DIR/fuzz-artifacts"

# run_target T: fuzzes T on a fresh corpus copy; returns libFuzzer's status.
run_target() {
    local t=$1 dir="$run_dir/$1" rc=0
    rm -rf "${dir:?}" "${art_dir:?}/${t:?}"
    mkdir -p "$dir/corpus" "$dir/tmp" "$art_dir/$t"
    cp tests/fuzz/corpus/"$t"/* "$dir/corpus/"
    ASAN_OPTIONS=detect_leaks=1 \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    TMPDIR="$dir/tmp" \
        "$FUZZ_DIR/tests/fuzz/fuzz_$t" \
        -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 \
        -max_len="$(max_len_of "$t")" -print_final_stats=1 \
        -artifact_prefix="$art_dir/$t/" \
        "$dir/corpus" >"$dir/log" 2>&1 </dev/null || rc=$?
    return "$rc"
}

section "fuzz: ${TARGETS[*]} for ${FUZZ_SECONDS}s each, $PARALLEL at a time"
declare -A status
pending=("${TARGETS[@]}")
while ((${#pending[@]} > 0)); do
    batch=("${pending[@]:0:$PARALLEL}")
    pending=("${pending[@]:$PARALLEL}")
    declare -A pids=()
    for t in "${batch[@]}"; do
        run_target "$t" &
        pids[$t]=$!
    done
    for t in "${batch[@]}"; do
        if wait "${pids[$t]}"; then status[$t]=0; else status[$t]=$?; fi
    done
    unset pids
done

section "fuzz results"
failed=0
printf '%-12s %8s %10s %8s %7s  %s\n' target runs exec/s corpus status reproducers
for t in "${TARGETS[@]}"; do
    log="$run_dir/$t/log"
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    corpus=$(find "$run_dir/$t/corpus" -type f | wc -l)
    arts=$(find "$art_dir/$t" -type f | sort)
    verdict=ok
    if [[ ${status[$t]} -ne 0 || -n $arts ]]; then
        verdict="FAILED(${status[$t]})"
        failed=1
    fi
    printf '%-12s %8s %10s %8s %7s  %s\n' "$t" "${runs:-?}" "${eps:-?}" "$corpus" "$verdict" \
        "$(echo "$arts" | tr '\n' ' ')"
done
for t in "${TARGETS[@]}"; do
    log="$run_dir/$t/log"
    arts=$(find "$art_dir/$t" -type f | sort)
    if [[ ${status[$t]} -ne 0 || -n $arts ]]; then
        section "fuzz_$t: finding (log $log)"
        grep -nE 'fuzz invariant failed|runtime error|ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)' "$log" | head -5 || true
        echo "--- last lines of the log:"
        tail -n 40 "$log"
        for a in $arts; do
            echo "reproducer: $a"
            echo "  replay:  $FUZZ_DIR/tests/fuzz/fuzz_$t $a"
            echo "  trace:   MFT_FUZZ_TRACE=1 $FUZZ_DIR/tests/fuzz/fuzz_$t $a"
        done
    fi
done
if ((failed)); then
    section "fuzz: FINDINGS (see above; tests/fuzz/README.md says how to minimise and keep them)"
    exit 1
fi
section "fuzz: no findings"
