/* tensor/dlpack.c — DLPack export and import (mft/dlpack.h, docs/spec.md
 * §8.1): private mirrors of the DLPack 0.6 and 1.x structs, the export block
 * that holds one storage reference, and the import that wraps a producer's
 * memory in a storage whose deleter calls the producer's.
 *
 * Note [DLPack mirror structs]
 * The public header only forward-declares struct DLManagedTensor and struct
 * DLManagedTensorVersioned; this file defines both from the field lists of
 * tensor/dlpack_abi.h, which follow the upstream header's types and order
 * (DLPack 0.6 as Debian ships it, and the 1.x versioned layout with its
 * DLTensor at the end). So the library builds
 * without dlpack.h, both versions always work whichever dlpack.h a user
 * includes, and a user's pointer to the real struct is a pointer to the
 * same tagged struct type. tests/tensor/test_dlpack.c lays the same field
 * lists out and checks every offset and size against the real 0.6 header
 * and a 1.x layout written from the specification (tests/tensor/dlpack_v1.h). */
#include <string.h>
#include "dlpack_abi.h"
#include "internal.h"
#include "mft/dlpack.h"

/* ---------------------------------------------------------------- mirrors */
struct DLManagedTensor {
    MFT__DLP_MANAGED_FIELDS(DLManagedTensor)
};
struct DLManagedTensorVersioned {
    MFT__DLP_MANAGED_V_FIELDS(DLManagedTensorVersioned)
};
typedef mft__dlp_tensor dlp_tensor;
typedef mft__dlp_dtype dlp_dtype;

static const dlp_dtype dlp_of_dtype[MFT_DTYPE_COUNT] = {
    [MFT_F32] = {MFT__DLP_FLOAT, 32, 1}, [MFT_F64] = {MFT__DLP_FLOAT, 64, 1},
    [MFT_I32] = {MFT__DLP_INT, 32, 1},   [MFT_I64] = {MFT__DLP_INT, 64, 1},
    [MFT_U8] = {MFT__DLP_UINT, 8, 1},
};

/* ---------------------------------------------------------------- export
 * One allocation per export: the managed struct first (its address is what
 * the consumer hands back to the deleter), then the shape and strides arrays.
 * manager_ctx is the storage, holding the one reference the export owns. */
typedef struct dlp_export {
    struct DLManagedTensor m;
    int64_t dims[2 * MFT_MAX_DIMS];
} dlp_export;

typedef struct dlp_export_v {
    struct DLManagedTensorVersioned m;
    int64_t dims[2 * MFT_MAX_DIMS];
} dlp_export_v;

static void dlp_delete(struct DLManagedTensor *self) {
    if (!self) return;
    mft__storage_release(self->manager_ctx);
    mft__free(self);
}

static void dlp_delete_v(struct DLManagedTensorVersioned *self) {
    if (!self) return;
    mft__storage_release(self->manager_ctx);
    mft__free(self);
}

/* The tensor to export: t itself (a new reference), or for a blocked t with
 * MFT_DLPACK_COPY its packed NCHW copy; NULL with the error set. */
static mft_tensor *dlp_export_source(const char *fn, const mft_tensor *t, unsigned flags,
                                     bool *copied) {
    *copied = false;
    if (!t) {
        mft__null_arg(fn, "t");
        return NULL;
    }
    if (flags & ~MFT_DLPACK_COPY) {
        mft__set_error(MFT_ERR_INVALID, "%s: flags 0x%x has bits other than MFT_DLPACK_COPY (0x%x)",
                       fn, flags, MFT_DLPACK_COPY);
        return NULL;
    }
    if (!mft__is_blocked(t)) return mft_tensor_retain((mft_tensor *)t);
    if (!(flags & MFT_DLPACK_COPY)) {
        mft__set_error(MFT_ERR_FORMAT,
                       "%s: a %s tensor has no DLPack strides (its channels are stored in blocks); "
                       "convert it with mft_to_format or pass MFT_DLPACK_COPY for an NCHW copy",
                       fn, mft_format_name(t->tag));
        return NULL;
    }
    mft__scope_suspend();
    mft_tensor *c = mft__contiguous(fn, t, MFT_CONTIGUOUS);
    mft__scope_resume();
    *copied = c != NULL;
    return c;
}

/* Fills the DLTensor part of an export from src (plain). */
static void dlp_fill(dlp_tensor *dl, int64_t *dims, const mft_tensor *src) {
    int n = src->ndim;
    memcpy(dims, src->sizes, (size_t)n * sizeof *dims);
    memcpy(dims + MFT_MAX_DIMS, src->strides, (size_t)n * sizeof *dims);
    dl->data = mft__tensor_ptr(src);
    dl->device = (mft__dlp_device){MFT__DLP_CPU, 0};
    dl->ndim = n;
    dl->dtype = dlp_of_dtype[src->dtype];
    dl->shape = dims;
    dl->strides = dims + MFT_MAX_DIMS;
    dl->byte_offset = 0;
}

/* The export of t in a new block (legacy or versioned), holding one storage
 * reference; *block written on success only. */
static mft_status dlp_export_new(const char *fn, const mft_tensor *t, unsigned flags,
                                 bool has_out, bool versioned, void **block) {
    if (t && !has_out) {
        mft__set_error(MFT_ERR_NULL, "%s: out is NULL", fn);
        return MFT_ERR_NULL;
    }
    bool copied;
    mft_tensor *src = dlp_export_source(fn, t, flags, &copied);
    if (!src) return mft_last_error();
    void *e = mft__alloc_or_err(fn, versioned ? sizeof(dlp_export_v) : sizeof(dlp_export), 64);
    if (!e) {
        mft_tensor_release(src);
        return MFT_ERR_NOMEM;
    }
    if (versioned) {
        dlp_export_v *v = e;
        v->m.version = (mft__dlp_version){MFT_DLPACK_MAJOR, MFT_DLPACK_MINOR};
        v->m.flags = copied ? MFT__DLP_FLAG_IS_COPIED : 0;
        dlp_fill(&v->m.dl_tensor, v->dims, src);
        v->m.manager_ctx = src->storage;
        v->m.deleter = dlp_delete_v;
    } else {
        dlp_export *l = e;
        dlp_fill(&l->m.dl_tensor, l->dims, src);
        l->m.manager_ctx = src->storage;
        l->m.deleter = dlp_delete;
    }
    mft__storage_retain(src->storage);
    mft_tensor_release(src);
    *block = e;
    return MFT_OK;
}

mft_status mft_to_dlpack(const mft_tensor *t, unsigned flags, struct DLManagedTensor **out) {
    void *e = NULL;
    mft_status st = dlp_export_new("mft_to_dlpack", t, flags, out != NULL, false, &e);
    if (st == MFT_OK) *out = &((dlp_export *)e)->m;
    return st;
}

mft_status mft_to_dlpack_versioned(const mft_tensor *t, unsigned flags,
                                   struct DLManagedTensorVersioned **out) {
    void *e = NULL;
    mft_status st =
        dlp_export_new("mft_to_dlpack_versioned", t, flags, out != NULL, true, &e);
    if (st == MFT_OK) *out = &((dlp_export_v *)e)->m;
    return st;
}

/* ---------------------------------------------------------------- import */
static mft_status dlp_dtype_of(const char *fn, dlp_dtype d, mft_dtype *out) {
    if (d.lanes != 1) {
        mft__set_error(MFT_ERR_DTYPE, "%s: dtype lanes %u: only scalar elements (lanes 1) are "
                       "supported", fn, (unsigned)d.lanes);
        return MFT_ERR_DTYPE;
    }
    for (int i = 0; i < MFT_DTYPE_COUNT; i++) {
        if (dlp_of_dtype[i].code == d.code && dlp_of_dtype[i].bits == d.bits) {
            *out = (mft_dtype)i;
            return MFT_OK;
        }
    }
    mft__set_error(MFT_ERR_DTYPE,
                   "%s: dtype code %u bits %u is not one of float 32 / 64, int 32 / 64, uint 8 "
                   "(codes 2, 0, 1)", fn, (unsigned)d.code, (unsigned)d.bits);
    return MFT_ERR_DTYPE;
}

/* Everything about the DLTensor that can be refused without touching memory;
 * packed strides written into strides_buf when dl->strides is NULL. */
static mft_status dlp_check(const char *fn, const dlp_tensor *dl, mft_format hint,
                            mft_dtype *dtype, const int64_t **strides, int64_t *strides_buf) {
    if (hint != MFT_PRESERVE && hint != MFT_CONTIGUOUS && hint != MFT_CHANNELS_LAST) {
        mft__set_error(MFT_ERR_FORMAT, "%s: hint %s (%d) is not PRESERVE, CONTIGUOUS or "
                       "CHANNELS_LAST", fn, mft_format_name(hint), (int)hint);
        return MFT_ERR_FORMAT;
    }
    if (dl->ndim < 0 || dl->ndim > MFT_MAX_DIMS) {
        mft__set_error(MFT_ERR_RANK, "%s: ndim %d is outside 0..%d", fn, dl->ndim, MFT_MAX_DIMS);
        return MFT_ERR_RANK;
    }
    int dev = dl->device.device_type;
    if (dev != MFT__DLP_CPU && dev != MFT__DLP_CUDA_HOST && dev != MFT__DLP_CUDA_MANAGED) {
        mft__set_error(MFT_ERR_UNSUPPORTED,
                       "%s: device type %d (id %d) is not readable by the CPU: only kDLCPU (1), "
                       "kDLCUDAHost (3) and kDLCUDAManaged (13) are accepted",
                       fn, dev, dl->device.device_id);
        return MFT_ERR_UNSUPPORTED;
    }
    if (dlp_dtype_of(fn, dl->dtype, dtype) != MFT_OK) return MFT_ERR_DTYPE;
    int n = dl->ndim;
    if (n > 0 && !dl->shape) {
        mft__set_error(MFT_ERR_NULL, "%s: shape is NULL with ndim %d", fn, n);
        return MFT_ERR_NULL;
    }
    if (mft__check_geometry(fn, n, dl->shape, NULL, *dtype) != MFT_OK) return mft_last_error();
    if (dl->strides) {
        for (int d = 0; d < n; d++) {
            if (dl->strides[d] < 0) {
                char a[MFT__DIMS_BUF];
                mft__set_error(MFT_ERR_UNSUPPORTED,
                               "%s: strides %s: negative stride %lld at dim %d (mft strides are "
                               ">= 0)", fn, mft__fmt_dims(a, sizeof a, n, dl->strides),
                               (long long)dl->strides[d], d);
                return MFT_ERR_UNSUPPORTED;
            }
        }
        *strides = dl->strides;
    } else {
        mft__format_strides(n, dl->shape, MFT_CONTIGUOUS, strides_buf);
        *strides = strides_buf;
    }
    if (mft__check_geometry(fn, n, dl->shape, *strides, *dtype) != MFT_OK) return mft_last_error();
    if (dl->byte_offset > (uint64_t)MFT__MAX_BYTES) {
        mft__set_error(MFT_ERR_OVERFLOW, "%s: byte_offset %llu is past the %lld-byte bound", fn,
                       (unsigned long long)dl->byte_offset, (long long)MFT__MAX_BYTES);
        return MFT_ERR_OVERFLOW;
    }
    return MFT_OK;
}

/* An address for the storage of an empty tensor whose producer gave data
 * NULL (DLPack asks for NULL there): never read or written. */
static _Alignas(64) char dlp_empty[64];

/* Wraps dl (checked) in a storage whose deleter is release(data, ctx); the
 * tag from the strides of dims of size > 1, ambiguous ones from hint. On
 * failure the storage's deleter is disarmed: the caller keeps the memory. */
static mft_tensor *dlp_import(const char *fn, const dlp_tensor *dl, mft_format hint,
                              void (*release)(void *, void *), void *ctx) {
    mft_dtype dtype = MFT_F32;
    const int64_t *strides = NULL;
    int64_t packed[MFT_MAX_DIMS];
    if (dlp_check(fn, dl, hint, &dtype, &strides, packed) != MFT_OK) return NULL;
    int64_t need = 0;
    if (mft_min_storage_numel(dl->ndim, dl->shape, strides, &need) != MFT_OK) {
        mft__relabel_error(fn);
        return NULL;
    }
    size_t es = mft__elem_size(dtype);
    char *data = dl->data;
    if (need > 0 && !data) {
        mft__set_error(MFT_ERR_NULL, "%s: data is NULL for a tensor of %lld elements", fn,
                       (long long)need);
        return NULL;
    }
    data = data ? data + dl->byte_offset : dlp_empty;
    if ((uintptr_t)data % es != 0) {
        mft__set_error(MFT_ERR_INVALID,
                       "%s: data %p + byte_offset %llu is not aligned to %zu bytes for %s", fn,
                       dl->data, (unsigned long long)dl->byte_offset, es, mft_dtype_name(dtype));
        return NULL;
    }
    mft_storage *s = mft__storage_wrap(fn, data, (size_t)need * es, release, ctx);
    if (!s) return NULL;
    mft_tensor *t = mft__tensor_new(fn, s, 0, dl->ndim, dl->shape, strides, dtype);
    if (!t) s->deleter = NULL; /* the caller keeps m */
    mft__storage_release(s);
    if (!t) return NULL;
    /* Note [Soft memory-format tag]: the fit flags ignore size-1 and stride-0
     * dims, so a producer's normalised size-1 strides do not move the tag. */
    mft__tensor_set_tag_from(t, hint == MFT_CHANNELS_LAST ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS);
    if (hint == MFT_PRESERVE && t->origin == MFT_INHERITED) t->origin = MFT_INFERRED;
    mft__decision d = mft__rule_decide(MFT__RULE_STRIDED, fn + 4, 0, NULL, t->tag, 0);
    mft__rule_record(t, &d);
    return t;
}

static void dlp_release(void *data, void *ctx) {
    (void)data;
    struct DLManagedTensor *m = ctx;
    m->deleter(m);
}

static void dlp_release_v(void *data, void *ctx) {
    (void)data;
    struct DLManagedTensorVersioned *m = ctx;
    m->deleter(m);
}

mft_tensor *mft_from_dlpack(struct DLManagedTensor *m, mft_format hint) {
    const char *fn = "mft_from_dlpack";
    if (!m) {
        mft__set_error(MFT_ERR_NULL, "%s: m is NULL", fn);
        return NULL;
    }
    return dlp_import(fn, &m->dl_tensor, hint, m->deleter ? dlp_release : NULL, m);
}

mft_tensor *mft_from_dlpack_versioned(struct DLManagedTensorVersioned *m, mft_format hint) {
    const char *fn = "mft_from_dlpack_versioned";
    if (!m) {
        mft__set_error(MFT_ERR_NULL, "%s: m is NULL", fn);
        return NULL;
    }
    if (m->version.major != MFT_DLPACK_MAJOR) {
        mft__set_error(MFT_ERR_UNSUPPORTED,
                       "%s: DLPack major version %u is not %d (mft reads DLPack %d.%d); the "
                       "caller keeps m and must call its deleter", fn, (unsigned)m->version.major,
                       MFT_DLPACK_MAJOR, MFT_DLPACK_MAJOR, MFT_DLPACK_MINOR);
        return NULL;
    }
    if (m->flags & MFT__DLP_FLAG_READ_ONLY) {
        mft__set_error(MFT_ERR_UNSUPPORTED,
                       "%s: flags 0x%llx mark the tensor READ_ONLY; mft tensors are writable and "
                       "mft copies only on request: copy it before the import", fn,
                       (unsigned long long)m->flags);
        return NULL;
    }
    return dlp_import(fn, &m->dl_tensor, hint, m->deleter ? dlp_release_v : NULL, m);
}
