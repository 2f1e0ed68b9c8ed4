#!/usr/bin/python3
"""tests/golden/gen_safetensors.py - writes tests/golden/safetensors/: valid
safetensors files (logical and physical mft modes, made byte by byte here
with struct + json, not by mft) and one file per malformed case mft's reader
must refuse, with expected.txt listing for each file the status mft must
return and a word its message must contain ("OK" files must load).

Run: /usr/bin/python3 tests/golden/gen_safetensors.py   (writes in place)
"""
import json
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "safetensors")


def raw_file(header_text, buf, n=None):
    h = header_text.encode() if isinstance(header_text, str) else header_text
    return struct.pack("<Q", len(h) if n is None else n) + h + buf


def padded(header):
    h = json.dumps(header, separators=(",", ":")).encode()
    return h + b" " * (-len(h) % 8)


def f32(vals):
    return struct.pack("<%df" % len(vals), *vals)


A = f32([1, 2])                 # "a": F32 [2], 8 bytes
B = f32([3, 4, 5, 6])           # "b": F32 [4], 16 bytes
GOOD = {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
        "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}}


def good(**change):
    h = json.loads(json.dumps(GOOD))
    h.update(change)
    return h


CASES = []  # (file, bytes, status, needle)


def case(name, data, status, needle):
    CASES.append((name, data, status, needle))


# ---- valid files
case("valid_plain", raw_file(padded(good()), A + B), "OK", "-")
# logical mode: a channels_last (1,2,2,3) tensor in NCHW C order + mft.format
nchw = f32([float(i) for i in range(12)])
case("valid_logical_cl", raw_file(padded({
    "__metadata__": {"mft.format.x": "CHANNELS_LAST", "mft.version": "1"},
    "x": {"dtype": "F32", "shape": [1, 3, 2, 2], "data_offsets": [0, 48]}}), nchw), "OK", "-")
# physical mode: the same logical values as NHWC bytes, shape (1,2,2,3)
nhwc = f32([float(c * 4 + h * 2 + w) for h in range(2) for w in range(2) for c in range(3)])
case("valid_physical_cl", raw_file(padded({
    "__metadata__": {"mft.format.x": "CHANNELS_LAST",
                     "mft.layout.x": json.dumps({"logical": [1, 3, 2, 2], "perm": [0, 2, 3, 1]}),
                     "mft.version": "1"},
    "x": {"dtype": "F32", "shape": [1, 2, 2, 3], "data_offsets": [0, 48]}}), nhwc), "OK", "-")
# physical blocked: logical (1,3,1,2) nChw16c = (1,1,1,2,16), pad lanes zero
blk = [0.0] * 32
for c in range(3):
    for w in range(2):
        blk[w * 16 + c] = float(c * 2 + w)
case("valid_physical_16c", raw_file(padded({
    "__metadata__": {"mft.format.x": "NCHW16C",
                     "mft.layout.x": json.dumps({"logical": [1, 3, 1, 2], "onednn": "aBcd16b"})},
    "x": {"dtype": "F32", "shape": [1, 1, 1, 2, 16], "data_offsets": [0, 128]}}), f32(blk)),
    "OK", "-")
case("valid_empty_scalar", raw_file(padded({
    "e": {"dtype": "F64", "shape": [0, 3], "data_offsets": [0, 0]},
    "s": {"dtype": "I64", "shape": [], "data_offsets": [0, 8]}}), struct.pack("<q", -7)), "OK", "-")
case("valid_metadata_only", raw_file(padded({"__metadata__": {"k": "v"}}), b""), "OK", "-")
case("valid_unpadded", raw_file(json.dumps(good(), separators=(",", ":")), A + B), "OK", "-")

# ---- malformed: the reference reader's cases (interop.md 4.2) and stricter ones
case("bad_header_too_large", struct.pack("<Q", 100_000_001) + b"{}", "CORRUPT", "limit")
case("bad_short_file", b"\x10\x00\x00", "CORRUPT", "shorter")
case("bad_truncated_header", raw_file(padded(good()), b"", n=4096), "CORRUPT", "past the end")
case("bad_truncated_data", raw_file(padded(good()), A + B[:10]), "CORRUPT", "beyond")
case("bad_not_utf8", raw_file(b'{"a\xff":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}}', b""),
     "CORRUPT", "UTF-8")
case("bad_not_json", raw_file(b'{"a":{"dtype":"F32",}}   ', b""), "CORRUPT", "JSON")
case("bad_leading_space", raw_file(b" " + padded(good())[:-1], A + B), "CORRUPT", "not '{'")
case("bad_trailing_garbage", raw_file(padded(good()) + b"x       ", A + B), "CORRUPT", "padding")
case("bad_unknown_dtype", raw_file(padded(good(a={"dtype": "F31", "shape": [2], "data_offsets": [0, 8]})), A + B),
     "CORRUPT", "F31")
case("bad_unsupported_dtype", raw_file(padded(good(a={"dtype": "BF16", "shape": [4], "data_offsets": [0, 8]})), A + B),
     "DTYPE", "BF16")
case("bad_metadata_not_string", raw_file(padded(good(__metadata__={"k": 1})), A + B), "CORRUPT", "not a string")
case("bad_metadata_not_object", raw_file(padded(good(__metadata__=["k"])), A + B), "CORRUPT", "__metadata__")
dup = padded(good())[:-1].rstrip(b" ")[:-1] + b',"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'
case("bad_duplicate_tensor", raw_file(dup + b" " * (-len(dup) % 8), A + B), "CORRUPT", "duplicate key")
dupm = b'{"__metadata__":{"k":"1","k":"1"},' + padded(good())[1:]
case("bad_duplicate_metadata", raw_file(dupm, A + B), "CORRUPT", "duplicate key")
dupf = b'{"a":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}}'
case("bad_duplicate_field", raw_file(dupf, A + B), "CORRUPT", "duplicate key")
case("bad_unknown_field", raw_file(padded(good(a={"dtype": "F32", "shape": [2], "data_offsets": [0, 8], "strides": [1]})), A + B),
     "CORRUPT", "strides")
case("bad_missing_field", raw_file(padded(good(a={"dtype": "F32", "shape": [2]})), A + B), "CORRUPT", "missing")
case("bad_negative_shape", raw_file(padded(good(a={"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]})), A + B),
     "CORRUPT", "negative")
case("bad_fraction_shape", raw_file(padded(good(a={"dtype": "F32", "shape": [2.0], "data_offsets": [0, 8]})), A + B),
     "CORRUPT", "not an integer")
case("bad_overflow_shape", raw_file(padded(good(a={"dtype": "F32", "shape": [2**63], "data_offsets": [0, 8]})), A + B),
     "CORRUPT", "int64")
case("bad_overflow_numel", raw_file(padded(good(a={"dtype": "F32", "shape": [2**32, 2**32], "data_offsets": [0, 8]})), A + B),
     "CORRUPT", "int64")
case("bad_negative_offset", raw_file(padded(good(a={"dtype": "F32", "shape": [2], "data_offsets": [-8, 0]})), A + B),
     "CORRUPT", "negative")
case("bad_offsets_reversed", raw_file(padded(good(a={"dtype": "F32", "shape": [0], "data_offsets": [8, 0]})), A + B),
     "CORRUPT", "end before")
case("bad_size_mismatch", raw_file(padded(good(a={"dtype": "F32", "shape": [3], "data_offsets": [0, 8]})), A + B),
     "CORRUPT", "needs 12")
case("bad_hole", raw_file(padded(good(b={"dtype": "F32", "shape": [4], "data_offsets": [12, 28]})), A + f32([0]) + B),
     "CORRUPT", "hole")
case("bad_overlap", raw_file(padded(good(b={"dtype": "F32", "shape": [4], "data_offsets": [4, 20]})), A + B),
     "CORRUPT", "overlap")
case("bad_not_from_zero", raw_file(padded({"b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}}), A + B),
     "CORRUPT", "hole")
case("bad_trailing_bytes", raw_file(padded(good()), A + B + b"\0" * 8), "CORRUPT", "trailing")
case("bad_rank9", raw_file(padded({"a": {"dtype": "U8", "shape": [1] * 9, "data_offsets": [0, 1]}}), b"\1"),
     "RANK", "dims")
case("bad_nul_name", raw_file(padded({"a\u0000b": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}), b"\1"),
     "CORRUPT", "NUL")
case("bad_empty_name", raw_file(padded({"": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}), b"\1"),
     "CORRUPT", "empty")
case("bad_not_object_root", raw_file(b'["a"]   ', b""), "CORRUPT", "not '{'")
case("bad_empty_header", raw_file(b"", b""), "CORRUPT", "empty")
# malformed mft metadata
def meta_case(name, meta, needle, shape=(1, 2, 2, 3), status="CORRUPT"):
    case(name, raw_file(padded({"__metadata__": meta,
                                "x": {"dtype": "F32", "shape": list(shape), "data_offsets": [0, 48]}}), nhwc),
         status, needle)
meta_case("bad_layout_not_fitting", {"mft.layout.x": json.dumps({"logical": [1, 3, 2, 2], "perm": [0, 1, 2, 3]})}, "do not fit")
meta_case("bad_layout_not_perm", {"mft.layout.x": json.dumps({"logical": [1, 3, 2, 2], "perm": [0, 2, 2, 1]})}, "do not fit")
meta_case("bad_layout_not_json", {"mft.layout.x": "{logical"}, "not JSON")
meta_case("bad_layout_extra_key", {"mft.layout.x": json.dumps({"logical": [1, 3, 2, 2], "perm": [0, 2, 3, 1], "x": 1})}, "exactly one")
meta_case("bad_layout_onednn_shape", {"mft.layout.x": json.dumps({"logical": [1, 3, 2, 2], "onednn": "aBcd16b"})}, "onednn", )
meta_case("bad_layout_no_tensor", {"mft.layout.y": json.dumps({"logical": [1, 3, 2, 2], "perm": [0, 2, 3, 1]})}, "names no tensor")
meta_case("bad_format_unknown", {"mft.format.x": "NHWC"}, "not CONTIGUOUS")
meta_case("bad_format_rank", {"mft.format.x": "CHANNELS_LAST"}, "rank 3-5", shape=(12,))
meta_case("bad_format_contradicts_layout", {"mft.format.x": "CONTIGUOUS",
          "mft.layout.x": json.dumps({"logical": [1, 3, 2, 2], "perm": [0, 2, 3, 1]})}, "otherwise")
meta_case("bad_version", {"mft.version": "2"}, "version", status="UNSUPPORTED")
# a physical blocked file whose pad lane is not zero
blk_bad = list(blk)
blk_bad[5] = 1.0
case("bad_pad_lane", raw_file(padded({
    "__metadata__": {"mft.layout.x": json.dumps({"logical": [1, 3, 1, 2], "onednn": "aBcd16b"})},
    "x": {"dtype": "F32", "shape": [1, 1, 1, 2, 16], "data_offsets": [0, 128]}}), f32(blk_bad)),
    "CORRUPT", "pad")

os.makedirs(OUT, exist_ok=True)
for old in os.listdir(OUT):
    if old.endswith(".safetensors"):
        os.remove(os.path.join(OUT, old))
with open(os.path.join(OUT, "expected.txt"), "w") as f:
    f.write("# file status needle (written by tests/golden/gen_safetensors.py)\n")
    for name, data, status, needle in CASES:
        with open(os.path.join(OUT, name + ".safetensors"), "wb") as g:
            g.write(data)
        f.write(f"{name}.safetensors {status} {needle}\n")
print(f"{len(CASES)} files in {OUT}")
