#!/bin/sh
# cmake/check_tutorial.sh TOUR_EXE TUTORIAL_MD — fails when a line of
# format_tour output quoted in docs/tutorial.md (the per-layer tables, the
# provenance chains, the backward / budget lines) is not what the program
# prints today. Lines outside code blocks, and the profiler's timings, are
# not checked. The kernel-name suffixes that depend on the building
# machine's ISA (conv: avx512_6x32, avx2_6x16, c6x16, and winograd_f4x3,
# which only AVX-512 builds choose; matmul: packed.avx512,
# packed.avx2, packed) are compared as one token each (runs of spaces, which
# follow from their length, as one space).
set -eu
exe=$1
doc=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
micro='s/(avx512_6x32|avx2_6x16|c6x16|winograd_f4x3)/<micro>/g; s/packed(\.avx512|\.avx2)?/<packed>/g; s/ +/ /g'
"$exe" | sed -E "$micro" >"$out"
stale=$(awk '/^```/ { inblock = !inblock; next } inblock' "$doc" |
    grep -E '^(layer |input |conv2d |relu |max_pool2d |flatten |linear |<- |CHANNELS_LAST \(|CONTIGUOUS \(|backward: |every |reorder |== )' |
    sed -E "$micro" | grep -Fvx -f "$out" || true)
if [ -n "$stale" ]; then
    echo "docs/tutorial.md quotes lines format_tour no longer prints:"
    echo "$stale"
    exit 1
fi
echo "every quoted format_tour line matches"
