"""tests/tensor/dlpack_roundtrip.py — DLPack round trips between mft and
PyTorch 1.13 / NumPy 1.24, run by tests/tensor/test_interop_dlpack.c.

Usage: dlpack_roundtrip.py LIBMFT.so NAME=VALUE...   (the enum values of
mft's dtypes and formats, passed by the C test from mft/types.h)

mft is driven through ctypes on the shared library; DLManagedTensor pointers
travel in PyCapsules named "dltensor" (the consumer renames them
"used_dltensor"). Every value is compared with an independent computation:
mft tensors are filled element by element with value(logical index) from
this script, and what each side reads (torch / NumPy indexing, mft's
mft_tensor_get) is compared with that formula or with the other side.

Prints one line per check, "ok NAME" or "FAIL NAME: detail", then
"checks N". Exits 77 (skipped) when torch or numpy cannot be imported."""
import ctypes
import gc
import itertools
import sys

try:
    import numpy as np
    import torch
    import torch.utils.dlpack as tdl
except Exception as e:  # noqa: BLE001 - any import failure means "cannot run here"
    print(f"SKIP: cannot import torch / numpy: {e}")
    sys.exit(77)

LIB = ctypes.CDLL(sys.argv[1])
E = dict(a.split("=") for a in sys.argv[2:])
E = {k: int(v) for k, v in E.items()}
P = ctypes.c_void_p
I64 = ctypes.c_int64
I64P = ctypes.POINTER(I64)


def _sig(name, res, *args):
    f = getattr(LIB, name)
    f.restype = res
    f.argtypes = list(args)


_sig("mft_empty", P, ctypes.c_int, I64P, ctypes.c_int, ctypes.c_int)
_sig("mft_tensor_set", ctypes.c_int, P, I64P, ctypes.c_double)
_sig("mft_tensor_get", ctypes.c_double, P, I64P)
_sig("mft_tensor_release", None, P)
_sig("mft_tensor_data", P, P)
_sig("mft_tensor_ndim", ctypes.c_int, P)
_sig("mft_tensor_sizes", I64P, P)
_sig("mft_tensor_strides", I64P, P)
_sig("mft_tensor_format", ctypes.c_int, P)
_sig("mft_tensor_format_origin", ctypes.c_int, P)
_sig("mft_format_name", ctypes.c_char_p, ctypes.c_int)
_sig("mft_origin_name", ctypes.c_char_p, ctypes.c_int)
_sig("mft_to_dlpack", ctypes.c_int, P, ctypes.c_uint, ctypes.POINTER(P))
_sig("mft_from_dlpack", P, P, ctypes.c_int)
_sig("mft_last_error", ctypes.c_int)
_sig("mft_last_error_message", ctypes.c_char_p)
_sig("mft_status_str", ctypes.c_char_p, ctypes.c_int)
_sig("mft_clear_error", None)
_sig("mft_live_storages", I64)
_sig("mft_live_tensors", I64)
_sig("mft_narrow", P, P, ctypes.c_int, I64, I64)
_sig("mft_slice", P, P, ctypes.c_int, I64, I64, I64)
_sig("mft_expand", P, P, ctypes.c_int, I64P)
_sig("mft_to_format", P, P, ctypes.c_int)

API = ctypes.pythonapi
API.PyCapsule_New.restype = ctypes.py_object
API.PyCapsule_New.argtypes = [P, ctypes.c_char_p, P]
API.PyCapsule_GetPointer.restype = P
API.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
API.PyCapsule_SetName.restype = ctypes.c_int
API.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
API.PyCapsule_GetName.restype = ctypes.c_char_p
API.PyCapsule_GetName.argtypes = [ctypes.py_object]
# PyCapsule keeps the name pointer, not a copy: these objects live as long
# as the module.
DLTENSOR = ctypes.c_char_p(b"dltensor")
USED = ctypes.c_char_p(b"used_dltensor")


# The DLPack 0.6 structs, declared here from the specification.
class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", P), ("device", DLDevice), ("ndim", ctypes.c_int),
                ("dtype", DLDataType), ("shape", I64P), ("strides", I64P),
                ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", P), ("deleter", DELETER)]

CHECKS = [0]
FAILED = [0]


def check(name, cond, detail=""):
    CHECKS[0] += 1
    if cond:
        print(f"ok {name}")
    else:
        FAILED[0] += 1
        print(f"FAIL {name}: {detail}")
    sys.stdout.flush()


def value(i):
    """The value stored at logical linear index i (exact in every dtype)."""
    return (i * 37 + 11) % 200


DTYPES = [("f32", torch.float32), ("f64", torch.float64), ("i32", torch.int32),
          ("i64", torch.int64), ("u8", torch.uint8)]
SHAPES = {0: (), 1: (7,), 2: (3, 5), 3: (2, 3, 5), 4: (2, 3, 4, 5), 5: (2, 3, 2, 4, 5)}


def idx_array(idx):
    return (I64 * max(1, len(idx)))(*idx)


def reference(shape, tdtype):
    n = 1
    for s in shape:
        n *= s
    return torch.tensor([value(i) for i in range(n)], dtype=torch.float64).reshape(shape).to(tdtype)


def mft_filled(shape, dtype, fmt):
    """An mft tensor packed in fmt, element (logical linear i) = value(i)."""
    t = LIB.mft_empty(len(shape), idx_array(shape), E[dtype], E[fmt])
    for k, idx in enumerate(itertools.product(*[range(s) for s in shape])):
        LIB.mft_tensor_set(t, idx_array(idx), float(value(k)))
    return t


def mft_strides(t):
    n = LIB.mft_tensor_ndim(t)
    s = LIB.mft_tensor_strides(t)
    return tuple(s[d] for d in range(n))


def mft_tag(t):
    return (LIB.mft_format_name(LIB.mft_tensor_format(t)).decode(),
            LIB.mft_origin_name(LIB.mft_tensor_format_origin(t)).decode())


def mft_values_equal(t, x):
    """mft_tensor_get at every index of t equals x's element (torch / numpy)."""
    xs = x.tolist() if hasattr(x, "tolist") else x
    for idx in itertools.product(*[range(s) for s in x.shape]):
        want = xs
        for i in idx:
            want = want[i]
        if LIB.mft_tensor_get(t, idx_array(idx)) != float(want):
            return False
    return True


def mft_to_capsule(t, flags=0):
    m = P()
    st = LIB.mft_to_dlpack(t, flags, ctypes.byref(m))
    if st != 0:
        return None, st
    return API.PyCapsule_New(m, DLTENSOR, None), st


def mft_to_torch(t, flags=0):
    cap, st = mft_to_capsule(t, flags)
    return (tdl.from_dlpack(cap) if cap is not None else None), st


KEEP = []  # the counting deleters (ctypes callbacks must outlive their calls)


class Counted:
    """Takes the DLManagedTensor out of a producer's capsule and replaces its
    deleter by one that counts its calls and then calls the producer's."""

    def __init__(self, cap):
        self.cap = cap
        self.ptr = API.PyCapsule_GetPointer(cap, DLTENSOR)
        self.m = ctypes.cast(self.ptr, ctypes.POINTER(DLManagedTensor)).contents
        self.calls = 0
        # the producer's function pointer, copied out (a field read is a view
        # of the struct, which the assignment below overwrites)
        orig = DELETER(P.from_address(self.ptr + DLManagedTensor.deleter.offset).value)

        def counting(p):
            self.calls += 1
            orig(p)

        self.cb = DELETER(counting)
        KEEP.append(self.cb)
        self.m.deleter = self.cb

    def import_(self, hint):
        """mft_from_dlpack; on success the capsule is renamed (consumed)."""
        t = LIB.mft_from_dlpack(self.ptr, E[hint])
        if t:
            API.PyCapsule_SetName(self.cap, USED)
        return t


def torch_to_mft(x, hint="preserve"):
    c = Counted(tdl.to_dlpack(x))
    return c.import_(hint), c


def live():
    return LIB.mft_live_storages()


def err():
    s = LIB.mft_last_error()
    msg = LIB.mft_last_error_message().decode()
    LIB.mft_clear_error()
    return LIB.mft_status_str(s).decode(), msg


# ---------------------------------------------------------------- mft -> torch
def torch_fmt(rank, fmt):
    if fmt == "contiguous":
        return torch.contiguous_format
    return torch.channels_last if rank == 4 else torch.channels_last_3d


def format_cases():
    """(dtype name, torch dtype, rank, format, shape) for every dtype, ranks
    0-5, CONTIGUOUS and (ranks 3-5) CHANNELS_LAST."""
    for (dname, tdt), rank in itertools.product(DTYPES, range(6)):
        for fmt in ("contiguous", "channels_last"):
            if fmt == "contiguous" or rank >= 3:
                yield dname, tdt, rank, fmt, SHAPES[rank]


def mft_to_torch_formats():
    for dname, tdt, rank, fmt, shape in format_cases():
        name = f"mft->torch {dname} rank {rank} {fmt}"
        before = live()
        t = mft_filled(shape, dname, fmt)
        x, st = mft_to_torch(t)
        if x is None:
            check(name, False, f"mft_to_dlpack: {err()}")
            LIB.mft_tensor_release(t)
            continue
        check(name + " zero copy", x.data_ptr() == LIB.mft_tensor_data(t),
              f"{x.data_ptr():#x} vs {LIB.mft_tensor_data(t):#x}")
        check(name + " strides", x.stride() == mft_strides(t), f"{x.stride()} vs {mft_strides(t)}")
        check(name + " dtype and shape", x.dtype == tdt and tuple(x.shape) == shape,
              f"{x.dtype} {tuple(x.shape)}")
        if rank in (4, 5):
            check(name + " torch memory format",
                  x.is_contiguous(memory_format=torch_fmt(rank, fmt)), f"strides {x.stride()}")
        elif rank == 3 and fmt == "channels_last":
            check(name + " NLC strides", x.stride() == (15, 1, 3), f"{x.stride()}")
        LIB.mft_tensor_release(t)  # torch's view keeps the memory
        check(name + " values", torch.equal(x, reference(shape, tdt)), f"{x}")
        check(name + " storage alive", live() == before + 1, f"{live()} vs {before + 1}")
        del x
        gc.collect()
        check(name + " deleter ran", live() == before, f"{live()} vs {before}")


def mft_to_torch_views():
    shape = (2, 6, 4, 5)
    base = mft_filled(shape, "f32", "channels_last")
    ref = reference(shape, torch.float32)
    views = {
        "narrow C (offset)": (LIB.mft_narrow(base, 1, 1, 4), ref[:, 1:5]),
        "narrow N (offset)": (LIB.mft_narrow(base, 0, 1, 1), ref[1:2]),
        "stepped W (gaps)": (LIB.mft_slice(base, 3, 1, 5, 2), ref[:, :, :, 1:5:2]),
        "stepped C (gaps)": (LIB.mft_slice(base, 1, 0, 6, 3), ref[:, 0:6:3]),
    }
    bias_shape = (1, 6, 1, 1)
    bias = mft_filled(bias_shape, "f32", "contiguous")
    views["expand (stride 0)"] = (LIB.mft_expand(bias, 4, idx_array(shape)),
                                  reference(bias_shape, torch.float32).expand(*shape))
    for name, (v, want) in views.items():
        x, st = mft_to_torch(v)
        name = "mft->torch view " + name
        if x is None:
            check(name, False, f"{err()}")
            continue
        check(name + " zero copy", x.data_ptr() == LIB.mft_tensor_data(v), "")
        check(name + " strides", x.stride() == mft_strides(v), f"{x.stride()} vs {mft_strides(v)}")
        check(name + " values", torch.equal(x, want), f"{x}")
        LIB.mft_tensor_release(v)
        del x
    LIB.mft_tensor_release(base)
    LIB.mft_tensor_release(bias)
    gc.collect()


def mft_to_torch_ambiguous():
    # mft's packed channels_last strides for ambiguous shapes reach torch as given
    for shape in [(1, 3, 4, 5), (2, 1, 4, 5), (2, 3, 1, 1), (1, 1, 1, 1), (0, 3, 4, 5)]:
        t = mft_filled(shape, "f32", "channels_last")
        x, st = mft_to_torch(t)
        name = f"mft->torch channels_last {shape}"
        if x is None:
            check(name, False, f"{err()}")
            LIB.mft_tensor_release(t)
            continue
        # torch's own packed channels_last strides for the shape
        want = torch.empty(shape, memory_format=torch.channels_last).stride()
        check(name + " strides", x.stride() == want == mft_strides(t),
              f"{x.stride()} torch {want} mft {mft_strides(t)}")
        check(name + " torch channels_last", x.is_contiguous(memory_format=torch.channels_last), "")
        check(name + " values", torch.equal(x, reference(shape, torch.float32)), "")
        LIB.mft_tensor_release(t)
        del x


def mft_to_torch_lifetimes():
    shape = (2, 3, 4, 5)
    before = live()
    t = mft_filled(shape, "i64", "channels_last")
    x, _ = mft_to_torch(t)
    y, _ = mft_to_torch(t)  # two exports of one tensor
    del x
    gc.collect()
    check("lifetime: torch view freed first, mft intact", live() == before + 1 and
          LIB.mft_tensor_get(t, idx_array((1, 2, 3, 4))) == value(119), "")
    y[1, 2, 3, 4] = -3  # writes are shared
    check("lifetime: torch write seen by mft", LIB.mft_tensor_get(t, idx_array((1, 2, 3, 4))) == -3, "")
    LIB.mft_tensor_release(t)
    check("lifetime: mft freed first, torch intact", live() == before + 1 and int(y[1, 2, 3, 3]) == value(118), "")
    del y
    gc.collect()
    check("lifetime: last torch view frees the storage", live() == before, f"{live()} vs {before}")


def mft_to_torch_blocked():
    shape = (2, 17, 3, 3)
    t = mft_filled(shape, "f32", "contiguous")
    b = LIB.mft_to_format(t, E["nchw16c"])
    m = P()
    st = LIB.mft_to_dlpack(b, 0, ctypes.byref(m))
    s, msg = err()
    check("blocked export refused", st != 0 and s == "unsupported memory format for this rank"
          and "mft_to_dlpack" in msg and "NCHW16C" in msg, f"{s}: {msg}")
    x, st = mft_to_torch(b, E["copy"])
    check("blocked export with MFT_DLPACK_COPY: NCHW copy", x is not None and x.is_contiguous()
          and torch.equal(x, reference(shape, torch.float32))
          and x.data_ptr() != LIB.mft_tensor_data(b), f"{err()}")
    LIB.mft_tensor_release(b)
    LIB.mft_tensor_release(t)
    del x


# ---------------------------------------------------------------- torch -> mft
def expect_tag(x, hint, rank):
    """The tag mft must give x: from torch's own contiguity predicates, the
    hint only when both hold."""
    if rank not in (4, 5):
        return ("CONTIGUOUS", "inferred") if rank != 3 else None
    fmt = torch.channels_last if rank == 4 else torch.channels_last_3d
    c, cl = x.is_contiguous(), x.is_contiguous(memory_format=fmt)
    if c and cl:
        return (("CONTIGUOUS", "inferred") if hint == "preserve"
                else (hint.upper(), "inherited"))
    if cl:
        return ("CHANNELS_LAST", "inferred")
    if c:
        return ("CONTIGUOUS", "inferred")
    return None


def check_import(name, x, hint="preserve", want_tag=None, keep_x=False):
    """Imports x, compares everything, releases, checks the deleter count."""
    t, c = torch_to_mft(x, hint)
    if not t:
        check(name, False, f"mft_from_dlpack: {err()}")
        return
    rank = x.dim()
    if x.numel() > 0:  # an empty torch tensor exports data NULL: nothing to share
        check(name + " zero copy", LIB.mft_tensor_data(t) == x.data_ptr(),
              f"{LIB.mft_tensor_data(t):#x} vs {x.data_ptr():#x}")
    check(name + " capsule consumed", API.PyCapsule_GetName(c.cap) == b"used_dltensor", "")
    dl_strides = tuple(c.m.dl_tensor.strides[d] for d in range(rank))
    check(name + " strides as exported", mft_strides(t) == dl_strides,
          f"mft {mft_strides(t)} dlpack {dl_strides}")
    tag = want_tag or expect_tag(x, hint, rank)
    if tag:
        check(name + f" tag {tag}", mft_tag(t) == tag, f"got {mft_tag(t)}")
    want = x.clone()
    if not keep_x:
        del x  # mft keeps torch's memory alive
        gc.collect()
    check(name + " values", mft_values_equal(t, want), "")
    check(name + " deleter not yet", c.calls == 0, f"{c.calls}")
    LIB.mft_tensor_release(t)
    check(name + " deleter once", c.calls == 1, f"{c.calls}")


def torch_to_mft_formats():
    for (dname, tdt), rank in itertools.product(DTYPES, range(6)):
        shape = SHAPES[rank]
        x = reference(shape, tdt)
        check_import(f"torch->mft {dname} rank {rank} contiguous", x)
        if rank in (4, 5):
            check_import(f"torch->mft {dname} rank {rank} channels_last",
                         x.contiguous(memory_format=torch_fmt(rank, "cl")))
        if rank == 3:  # NLC: mft's rank-3 channels_last
            check_import(f"torch->mft {dname} rank 3 NLC",
                         x.permute(0, 2, 1).contiguous().permute(0, 2, 1),
                         want_tag=("CHANNELS_LAST", "inferred"))


def torch_to_mft_ambiguous():
    for shape in [(1, 3, 4, 5), (2, 1, 4, 5), (2, 3, 1, 1), (1, 1, 1, 1), (0, 3, 4, 5)]:
        for hint in ("preserve", "channels_last", "contiguous"):
            x = reference(shape, torch.float32).contiguous(memory_format=torch.channels_last)
            check_import(f"torch->mft channels_last {shape} hint {hint}", x, hint)
    # N = 1: torch 1.13 exports the N stride normalised to 1; the tag stays
    x = reference((1, 3, 4, 5), torch.float32).contiguous(memory_format=torch.channels_last)
    cap = tdl.to_dlpack(x)
    m = ctypes.cast(API.PyCapsule_GetPointer(cap, DLTENSOR), ctypes.POINTER(DLManagedTensor)).contents
    check("torch 1.13 normalises the N = 1 stride", m.dl_tensor.strides[0] == 1,
          f"{m.dl_tensor.strides[0]}")
    del cap


def torch_to_mft_views():
    x = reference((2, 6, 4, 5), torch.float64).contiguous(memory_format=torch.channels_last)
    check_import("torch->mft view narrow C (offset)", x[:, 1:5], keep_x=True)
    check_import("torch->mft view narrow N (offset)", x[1:], keep_x=True)
    check_import("torch->mft view stepped W (gaps)", x[:, :, :, 1::2], keep_x=True,
                 want_tag=("CHANNELS_LAST", "inferred"))
    check_import("torch->mft view stepped H of NCHW (gaps)",
                 reference((2, 6, 4, 5), torch.float64)[:, :, ::2], keep_x=True,
                 want_tag=("CONTIGUOUS", "inferred"))
    check_import("torch->mft view expand (stride 0)",
                 reference((1, 6, 1, 1), torch.float64).expand(2, 6, 4, 5), keep_x=True)
    check_import("torch->mft view transposed 2-D", reference((4, 5), torch.int32).t(), keep_x=True)


def torch_to_mft_lifetimes():
    x = reference((2, 3, 4, 5), torch.float32).contiguous(memory_format=torch.channels_last)
    t, c = torch_to_mft(x)
    v = LIB.mft_narrow(t, 1, 1, 2)  # an mft view of the import
    LIB.mft_tensor_release(t)
    del x
    gc.collect()
    check("lifetime: view outlives import and torch tensor", c.calls == 0 and
          LIB.mft_tensor_get(v, idx_array((1, 0, 3, 4))) == value(1 * 60 + 1 * 20 + 3 * 5 + 4), "")
    LIB.mft_tensor_release(v)
    check("lifetime: last mft view runs torch's deleter once", c.calls == 1, f"{c.calls}")
    # mft writes are seen by torch
    x = torch.zeros(2, 3, 4, 5).contiguous(memory_format=torch.channels_last)
    t, c = torch_to_mft(x)
    LIB.mft_tensor_set(t, idx_array((1, 2, 3, 4)), 7.5)
    check("mft write seen by torch", float(x[1, 2, 3, 4]) == 7.5, "")
    LIB.mft_tensor_release(t)
    check("deleter once after release", c.calls == 1, "")


def refused(name, cap_maker, status, needle, producer_destructor=True):
    """The import fails naming the function and the value, mft does not call
    the deleter, the capsule stays unconsumed; then the producer's capsule
    destructor (torch, numpy) or this script (hand-made structs) calls it."""
    cap = cap_maker()
    c = Counted(cap)
    before = live()
    t = c.import_("preserve")
    s, msg = err()
    check(name + " refused", not t and s == status and "mft_from_dlpack" in msg and needle in msg,
          f"{s}: {msg}")
    check(name + " deleter not called by mft", c.calls == 0 and live() == before, f"{c.calls}")
    check(name + " capsule not consumed", API.PyCapsule_GetName(cap) == b"dltensor", "")
    if producer_destructor:
        del cap, c.cap
        gc.collect()
    else:
        c.m.deleter(ctypes.cast(c.ptr, ctypes.POINTER(DLManagedTensor)))
    check(name + " deleter called once, by the caller's side", c.calls == 1, f"{c.calls}")


HANDMADE = []


def handmade(shape, data, code=2, bits=32, lanes=1, device=1, strides=None, byte_offset=0):
    """A DLManagedTensor built here over data (kept alive), in a capsule
    without destructor: its deleter only counts."""
    sh = (I64 * len(shape))(*shape)
    st = (I64 * len(shape))(*strides) if strides else None
    m = DLManagedTensor()
    m.dl_tensor = DLTensor(data, DLDevice(device, 0), len(shape), DLDataType(code, bits, lanes),
                           sh, st, byte_offset)
    m.deleter = DELETER(lambda p: None)
    HANDMADE.append((sh, st, m))
    return API.PyCapsule_New(ctypes.addressof(m), DLTENSOR, None)


def negative_cases():
    refused("torch bfloat16", lambda: tdl.to_dlpack(torch.zeros(2, 3, dtype=torch.bfloat16)),
            "unsupported or mismatched dtype", "code 4 bits 16")
    refused("torch float16", lambda: tdl.to_dlpack(torch.zeros(2, 3, dtype=torch.float16)),
            "unsupported or mismatched dtype", "code 2 bits 16")
    refused("torch int8", lambda: tdl.to_dlpack(torch.zeros(2, 3, dtype=torch.int8)),
            "unsupported or mismatched dtype", "code 0 bits 8")
    refused("torch complex64", lambda: tdl.to_dlpack(torch.zeros(2, 3, dtype=torch.complex64)),
            "unsupported or mismatched dtype", "code 5 bits 64")
    a = np.arange(12, dtype=np.float32)
    refused("numpy negative stride", lambda: a[::-1].__dlpack__(), "operation not supported",
            "negative stride -1 at dim 0")
    buf = (ctypes.c_float * 64)()
    refused("lanes 4", lambda: handmade((2, 2), ctypes.addressof(buf), lanes=4),
            "unsupported or mismatched dtype", "lanes 4", False)
    refused("device kDLCUDA", lambda: handmade((2, 2), ctypes.addressof(buf), device=2),
            "operation not supported", "device type 2", False)
    refused("rank 9", lambda: handmade((1,) * 9, ctypes.addressof(buf)),
            "unsupported or mismatched rank", "ndim 9", False)
    refused("overflow", lambda: handmade((1 << 40, 1 << 40), ctypes.addressof(buf)),
            "size or stride arithmetic overflows int64", "", False)


# ---------------------------------------------------------------- numpy
class Exporter:
    """A consumer-facing wrapper: np.from_dlpack calls these two methods."""

    def __init__(self, t):
        self.t = t

    def __dlpack__(self, stream=None):
        cap, st = mft_to_capsule(self.t)
        return cap

    def __dlpack_device__(self):
        return (1, 0)


def numpy_cases():
    ndt = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64, "u8": np.uint8}
    for dname, tdt, rank, fmt, shape in format_cases():
        name = f"mft->numpy {dname} rank {rank} {fmt}"
        before = live()
        t = mft_filled(shape, dname, fmt)
        a = np.from_dlpack(Exporter(t))
        isz = np.dtype(ndt[dname]).itemsize
        check(name + " zero copy", a.__array_interface__["data"][0] == LIB.mft_tensor_data(t), "")
        check(name + " byte strides", a.strides == tuple(s * isz for s in mft_strides(t)),
              f"{a.strides} vs {mft_strides(t)}")
        want = reference(shape, tdt).numpy()
        LIB.mft_tensor_release(t)
        check(name + " values", a.dtype == ndt[dname] and np.array_equal(a, want), f"{a}")
        del a
        gc.collect()
        check(name + " deleter ran", live() == before, f"{live()} vs {before}")
    # numpy -> mft: an NHWC array seen as logical NCHW
    nhwc = np.array([value(i) for i in range(120)], dtype=np.float32).reshape(2, 4, 5, 3)
    a = nhwc.transpose(0, 3, 1, 2)
    c = Counted(a.__dlpack__())
    t = c.import_("preserve")
    check("numpy->mft NHWC transpose: channels_last", t and mft_tag(t) == ("CHANNELS_LAST", "inferred")
          and mft_strides(t) == (60, 1, 15, 3), f"{t and mft_tag(t)}")
    check("numpy->mft zero copy", t and LIB.mft_tensor_data(t) == a.__array_interface__["data"][0], "")
    check("numpy->mft values", t and mft_values_equal(t, a), "")
    LIB.mft_tensor_release(t)
    check("numpy->mft deleter once", c.calls == 1, f"{c.calls}")
    # byte_offset: the same hand-made struct read by numpy and by mft
    base = np.array([value(i) for i in range(40)], dtype=np.float64)
    ptr = base.__array_interface__["data"][0]
    ref = np.from_dlpack(type("W", (), {
        "__dlpack__": lambda self, stream=None: handmade((3, 4), ptr, code=2, bits=64,
                                                         strides=(8, 2), byte_offset=24),
        "__dlpack_device__": lambda self: (1, 0)})())
    c = Counted(handmade((3, 4), ptr, code=2, bits=64, strides=(8, 2), byte_offset=24))
    t = c.import_("preserve")
    check("byte_offset 24 honoured as numpy does", t and ref.shape == (3, 4)
          and ref[0, 0] == value(3) and mft_values_equal(t, ref), f"numpy {ref}")
    check("byte_offset: data + byte_offset", t and LIB.mft_tensor_data(t) == ptr + 24, "")
    LIB.mft_tensor_release(t)
    check("byte_offset: deleter once", c.calls == 1, "")
    # NULL strides = row-major, as numpy reads them
    ref = np.from_dlpack(type("W", (), {
        "__dlpack__": lambda self, stream=None: handmade((5, 8), ptr, code=2, bits=64),
        "__dlpack_device__": lambda self: (1, 0)})())
    c = Counted(handmade((5, 8), ptr, code=2, bits=64))
    t = c.import_("preserve")
    check("NULL strides: row-major as numpy", t and mft_strides(t) == (8, 1)
          and ref.strides == (64, 8) and mft_values_equal(t, ref), "")
    LIB.mft_tensor_release(t)


def main():
    live0, tensors0 = LIB.mft_live_storages(), LIB.mft_live_tensors()
    mft_to_torch_formats()
    mft_to_torch_views()
    mft_to_torch_ambiguous()
    mft_to_torch_lifetimes()
    mft_to_torch_blocked()
    torch_to_mft_formats()
    torch_to_mft_ambiguous()
    torch_to_mft_views()
    torch_to_mft_lifetimes()
    negative_cases()
    numpy_cases()
    gc.collect()
    check("no mft object left", LIB.mft_live_storages() == live0 and
          LIB.mft_live_tensors() == tensors0,
          f"storages {LIB.mft_live_storages()} tensors {LIB.mft_live_tensors()}")
    print(f"checks {CHECKS[0]}")
    return 1 if FAILED[0] else 0


if __name__ == "__main__":
    sys.exit(main())
