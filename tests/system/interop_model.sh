#!/bin/sh
# tests/system/interop_model.sh EXE TORCH_SCRIPT DIR — the Fashion-MNIST model
# moves between mft and PyTorch as a safetensors state_dict (docs/interop.md,
# docs/spec.md §8.4), and both libraries then measure the same test accuracy
# on the same 1000 test images:
#   1. mft trains briefly (with batch norm), --export; PyTorch --load
#      evaluates it (strict load_state_dict: every name and shape must be
#      PyTorch's);
#   2. an untrained mft model without batch norm, exported and evaluated the
#      same way (the names without bn1/bn2);
#   3. PyTorch trains briefly (batch norm), --save; mft --import evaluates it
#      in nhwc and nchw16c;
#   4. an import that cannot fit the model (a batch-norm file into a model
#      without) fails with a message and a non-zero exit.
# The oracle is PyTorch run live. Accuracies are compared as printed (two
# decimals of correct/1000: equal strings mean equal correct counts); the
# inputs are bit-identical (the script normalises through mft's float64
# table), so only a logit tie within float rounding could flip a prediction.
# Exit 77 (skipped) without /usr/bin/python3 + torch or the dataset.
set -eu
exe=$1
script=$2
dir=$3
py=/usr/bin/python3
data=/usr/share/datasets/fashion-mnist
if [ ! -x "$py" ] || ! "$py" -c 'import torch' 2>/dev/null; then
    echo "skipped: no /usr/bin/python3 with torch"
    exit 77
fi
if [ ! -f "$data/train-images-idx3-ubyte.gz" ]; then
    echo "skipped: no dataset in $data"
    exit 77
fi
mkdir -p "$dir"
common="--test-limit 1000"
fails=0

acc() { # the test accuracy a run printed: its last "test_acc X" field
    sed -n 's/.*test_acc \([0-9.]*\).*/\1/p' "$1" | tail -n 1
}
same() { # same WHAT A B
    if [ -n "$2" ] && [ "$2" = "$3" ]; then
        echo "ok: $1: test_acc $2 in both"
    else
        echo "FAIL: $1: mft test_acc '$2', PyTorch test_acc '$3'"
        fails=$((fails + 1))
    fi
}

# 1. mft -> PyTorch, batch norm, trained 4 steps
"$exe" --limit 256 $common --epochs 1 --batchnorm --quiet --metrics "$dir/m.tsv" \
    --export "$dir/mft_bn.safetensors" >"$dir/mft_bn.out"
"$py" "$script" --batchnorm --format nchw $common --load "$dir/mft_bn.safetensors" \
    >"$dir/torch_bn.out"
same "mft (batch norm) -> PyTorch" "$(acc "$dir/mft_bn.out")" "$(acc "$dir/torch_bn.out")"

# 2. mft -> PyTorch, no batch norm, as initialised
"$exe" $common --epochs 0 --seed 7 --export "$dir/mft_plain.safetensors" >"$dir/mft_plain.out"
"$py" "$script" --format nhwc $common --load "$dir/mft_plain.safetensors" >"$dir/torch_plain.out"
same "mft (initialised) -> PyTorch" "$(acc "$dir/mft_plain.out")" "$(acc "$dir/torch_plain.out")"

# 3. PyTorch -> mft, batch norm, trained 4 steps; imported in two formats
"$py" "$script" --train --batchnorm --limit 256 $common --threads 2 \
    --save "$dir/torch_bn.safetensors" >"$dir/torch_train.out"
want=$(acc "$dir/torch_train.out")
for fmt in nhwc nchw16c; do
    "$exe" --batchnorm --format "$fmt" $common --epochs 0 \
        --import "$dir/torch_bn.safetensors" >"$dir/import_$fmt.out"
    grep -q "^imported 18 tensors from" "$dir/import_$fmt.out" || {
        echo "FAIL: import into $fmt did not report 18 tensors"
        fails=$((fails + 1))
    }
    same "PyTorch -> mft ($fmt)" "$(acc "$dir/import_$fmt.out")" "$want"
done

# 4. a file that does not fit: refused, non-zero exit, a message
if "$exe" --format nhwc $common --epochs 0 --import "$dir/torch_bn.safetensors" \
    >"$dir/bad.out" 2>"$dir/bad.err"; then
    echo "FAIL: importing a batch-norm file into a model without batch norm succeeded"
    fails=$((fails + 1))
elif grep -q "importing .* failed, nothing was loaded: mft_module_load_safetensors: .*bn1" \
    "$dir/bad.err"; then
    echo "ok: a file that does not fit is refused: $(cat "$dir/bad.err")"
else
    echo "FAIL: unexpected message: $(cat "$dir/bad.err")"
    fails=$((fails + 1))
fi
[ "$fails" -eq 0 ]
