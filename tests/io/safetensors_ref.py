#!/usr/bin/python3
"""tests/io/safetensors_ref.py - an independent safetensors reader and writer
(Python standard library only: struct + json), the second implementation the
mft tests compare against, and the checks of tests/io/test_interop_safetensors.c.

Reader: the format's rules (8-byte little-endian header size <= 100,000,000,
a JSON object, string-only __metadata__, entries with dtype / shape /
data_offsets, offsets covering the buffer exactly). Writer: the reference
writer's order (larger dtypes first, then by name), header padded with
spaces to a multiple of 8.

Commands (exit 0 on success, 1 with a message on a mismatch):
  check FILE MODE       read FILE with this reader and with torch; every tensor
                        must equal the reference values built here (value()
                        below, the formula the C test fills with); MODE
                        'physical' also checks the mft.layout perm gives a
                        torch channels_last tensor after permute(0,3,1,2)
  write FILE            write the tensors of REFERENCE with this writer
  write-plain FILE      write the untagged tensors of REFERENCE with the metadata
                        mft writes ({"mft.version": "1"}): mft's writer must
                        produce the same bytes
  write-torch FILE      write torch tensors (one channels_last, made contiguous
                        first as safetensors.torch.save_file requires) with this
                        writer
"""
import json
import struct
import sys

DTYPE_SIZE = {"F32": 4, "F64": 8, "I32": 4, "I64": 8, "U8": 1}
STRUCT_CODE = {"F32": "f", "F64": "d", "I32": "i", "I64": "q", "U8": "B"}
MAX_HEADER = 100_000_000


def read(path):
    """(metadata, {name: (dtype, shape, bytes)}, header order)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError("shorter than 8 bytes")
    (n,) = struct.unpack("<Q", data[:8])
    if n > MAX_HEADER:
        raise ValueError("header too large")
    if 8 + n > len(data):
        raise ValueError("header runs past the end")
    text = data[8:8 + n].decode("utf-8")
    if not text.startswith("{"):
        raise ValueError("header does not start with '{'")

    def no_dups(pairs):
        keys = [k for k, _ in pairs]
        if len(keys) != len(set(keys)):
            raise ValueError("duplicate key")
        return dict(pairs)

    header = json.loads(text.rstrip(" "), object_pairs_hook=no_dups)
    meta = header.pop("__metadata__", {})
    if not all(isinstance(v, str) for v in meta.values()):
        raise ValueError("non-string metadata")
    buf = data[8 + n:]
    out, spans = {}, []
    for name, e in header.items():
        if set(e) != {"dtype", "shape", "data_offsets"}:
            raise ValueError(f"{name}: fields {sorted(e)}")
        dt, shape, (b, end) = e["dtype"], e["shape"], e["data_offsets"]
        numel = 1
        for s in shape:
            if not isinstance(s, int) or s < 0:
                raise ValueError(f"{name}: bad shape")
            numel *= s
        if end - b != numel * DTYPE_SIZE[dt]:
            raise ValueError(f"{name}: size mismatch")
        spans.append((b, end, name))
        out[name] = (dt, list(shape), buf[b:end])
    at = 0
    for b, end, name in sorted(spans):
        if b != at:
            raise ValueError(f"{name}: hole or overlap")
        at = end
    if at != len(buf):
        raise ValueError("buffer not covered exactly")
    return meta, out, list(header)


def write(path, tensors, metadata=None):
    """tensors: {name: (dtype, shape, little-endian bytes)}."""
    order = sorted(tensors, key=lambda k: (-DTYPE_SIZE[tensors[k][0]], k))
    header, at = {}, 0
    if metadata:
        header["__metadata__"] = metadata
    for k in order:
        dt, shape, raw = tensors[k]
        header[k] = {"dtype": dt, "shape": shape, "data_offsets": [at, at + len(raw)]}
        at += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for k in order:
            f.write(tensors[k][2])


def value(i, dt, salt):
    """The logical value of linear index i (the C tests' formula)."""
    v = (i * 13 + salt * 7) % 101
    return v / 4 - 12 if dt in ("F32", "F64") else v


# name: (dtype, logical shape, salt, mft tag in the file)
REFERENCE = {
    "conv.weight": ("F32", [4, 3, 2, 2], 1, "CHANNELS_LAST"),
    "act": ("F64", [2, 3, 4, 5], 2, "CHANNELS_LAST"),
    "bias": ("F32", [4], 3, None),
    "ids": ("I64", [2, 3], 4, None),
    "mask": ("U8", [5], 5, None),
    "count": ("I32", [], 6, None),
}


def ref_bytes(dt, shape, salt):
    numel = 1
    for s in shape:
        numel *= s
    return struct.pack("<" + STRUCT_CODE[dt] * numel, *[value(i, dt, salt) for i in range(numel)])


def torch_dtype(torch, dt):
    return {"F32": torch.float32, "F64": torch.float64, "I32": torch.int32,
            "I64": torch.int64, "U8": torch.uint8}[dt]


def torch_ref(torch, dt, shape, salt):
    numel = 1
    for s in shape:
        numel *= s
    i = torch.arange(numel, dtype=torch.int64)
    v = (i * 13 + salt * 7) % 101
    v = v.to(torch.float64) / 4 - 12 if dt in ("F32", "F64") else v
    return v.to(torch_dtype(torch, dt)).reshape(shape)


def check(path, mode):
    import torch
    meta, ts, _ = read(path)
    if set(ts) != set(REFERENCE):
        raise SystemExit(f"names {sorted(ts)} != {sorted(REFERENCE)}")
    for name, (dt, shape, salt, tag) in REFERENCE.items():
        fdt, fshape, raw = ts[name]
        ref = torch_ref(torch, dt, shape, salt)
        t = torch.frombuffer(bytearray(raw), dtype=torch_dtype(torch, dt)) if raw else \
            torch.empty(0, dtype=torch_dtype(torch, dt))
        t = t.reshape(fshape)
        layout = meta.get("mft.layout." + name)
        if mode == "physical" and tag == "CHANNELS_LAST":
            lay = json.loads(layout)
            if lay != {"logical": shape, "perm": [0, 2, 3, 1]}:
                raise SystemExit(f"{name}: layout {layout}")
            t = t.permute(0, 3, 1, 2)
            if not t.is_contiguous(memory_format=torch.channels_last):
                raise SystemExit(f"{name}: not channels_last after permute, strides {t.stride()}")
        elif layout is not None or fshape != shape:
            raise SystemExit(f"{name}: logical mode with shape {fshape}, layout {layout}")
        if tag and meta.get("mft.format." + name) != tag:
            raise SystemExit(f"{name}: mft.format {meta.get('mft.format.' + name)}")
        if fdt != dt or list(t.shape) != shape or not torch.equal(t, ref):
            raise SystemExit(f"{name}: values differ from the reference")
        want = ref.permute(0, 2, 3, 1).contiguous() if mode == "physical" and tag else ref
        if raw != want.numpy().tobytes():
            raise SystemExit(f"{name}: bytes differ from the reference's packing")
    print(f"{path}: {len(ts)} tensors equal the reference ({mode})")


def main(argv):
    cmd, path = argv[1], argv[2]
    if cmd == "check":
        check(path, argv[3])
    elif cmd == "write":
        write(path, {k: (dt, s, ref_bytes(dt, s, salt)) for k, (dt, s, salt, _) in REFERENCE.items()})
    elif cmd == "write-plain":
        write(path, {k: (dt, s, ref_bytes(dt, s, salt)) for k, (dt, s, salt, tag) in REFERENCE.items()
                     if tag is None}, {"mft.version": "1"})
    elif cmd == "write-torch":
        import torch
        out = {}
        for k, (dt, s, salt, tag) in REFERENCE.items():
            t = torch_ref(torch, dt, s, salt)
            if tag == "CHANNELS_LAST":
                t = t.to(memory_format=torch.channels_last).contiguous()  # as save_file needs
            out[k] = (dt, list(t.shape), t.numpy().tobytes() if t.numel() else b"")
        write(path, out, {"format": "pt"})
    else:
        raise SystemExit(f"unknown command {cmd}")


if __name__ == "__main__":
    main(sys.argv)
