#!/bin/sh
# cmake/check_tutorial.sh TOUR_EXE TUTORIAL_MD — fails when a line of
# format_tour output quoted in docs/tutorial.md (the per-layer tables, the
# provenance chains, the backward / budget lines) is not what the program
# prints today. Lines outside code blocks, and the profiler's timings, are
# not checked.
set -eu
exe=$1
doc=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$exe" >"$out"
stale=$(awk '/^```/ { inblock = !inblock; next } inblock' "$doc" |
    grep -E '^(layer |input |conv2d |relu |max_pool2d |flatten |linear |<- |CHANNELS_LAST \(|CONTIGUOUS \(|backward: |every |reorder |== )' |
    grep -Fvx -f "$out" || true)
if [ -n "$stale" ]; then
    echo "docs/tutorial.md quotes lines format_tour no longer prints:"
    echo "$stale"
    exit 1
fi
echo "every quoted format_tour line matches"
