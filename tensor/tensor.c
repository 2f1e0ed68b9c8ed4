/* tensor/tensor.c — the tensor header: geometry validation, creation on a
 * storage, retain/release, accessors, element get/set, and the per-thread
 * scopes (autorelease pools) that own tensors created while they are open. */
#include <math.h>
#include <string.h>
#include "internal.h"

/* Note [Geometry bound]
 * Every tensor header, empty or not, satisfies (docs/spec.md §1.1):
 *   sizes >= 0, strides >= 0, offset >= 0,
 *   count = prod_d max(size_d, 1), count * itemsize <= 2^59 (MFT__MAX_BYTES),
 *   span  = offset + sum_d max(size_d, 1) * stride_d, span * itemsize <= INT64_MAX,
 *   and a non-empty header's elements lie in its storage.
 * The span bounds every index * stride, every byte stride, every
 * one-past-the-end pointer and every packed-stride product that code derives
 * from the header, so none of that arithmetic can overflow, also on size-1
 * dims and empty tensors, whose strides never address memory. The count
 * bound makes every packed layout of the same sizes obey the span bound too
 * (packed, each max(size, 1) * stride is at most count, and there are at
 * most MFT_MAX_DIMS = 8 dims: 8 * 2^59 < 2^63), so a copy, a conversion or
 * a fresh result of a valid tensor is always a valid tensor. Geometry that
 * breaks the bound is refused where it enters (factories, from_blob,
 * as_strided, views, checkpoint and IDX headers) with the entry point's
 * name, and mft__tensor_new checks it again for every header it makes. Ops
 * that derive the stride of a size-0 or size-1 dim (unsqueeze, expand,
 * slice, empty_like) keep PyTorch's choice when it obeys the bound, and
 * otherwise one that does (such a stride addresses nothing). */
/* The span of Note [Geometry bound] in bytes, or -1 past INT64_MAX (strides
 * >= 0 assumed). */
static int64_t geometry_span_bytes(int ndim, const int64_t *sizes, const int64_t *strides,
                                   int64_t offset, mft_dtype dtype) {
    int64_t span = offset, term, bytes;
    for (int i = 0; i < ndim; i++)
        if (__builtin_mul_overflow(sizes[i] > 1 ? sizes[i] : 1, strides[i], &term) ||
            __builtin_add_overflow(span, term, &span))
            return -1;
    if (__builtin_mul_overflow(span, (int64_t)mft__elem_size(dtype), &bytes)) return -1;
    return bytes;
}

bool mft__geometry_fits(int ndim, const int64_t *sizes, const int64_t *strides, int64_t offset,
                        mft_dtype dtype) {
    if (offset < 0) return false;
    for (int i = 0; i < ndim; i++)
        if (sizes[i] < 0 || strides[i] < 0) return false;
    return geometry_span_bytes(ndim, sizes, strides, offset, dtype) >= 0;
}

static mft_status geometry_span(const char *fn, int ndim, const int64_t *sizes,
                                const int64_t *strides, int64_t offset, mft_dtype dtype) {
    char a[MFT__DIMS_BUF], b[MFT__DIMS_BUF];
    if (offset < 0) {
        mft__set_error(MFT_ERR_INVALID, "%s: negative storage offset %lld", fn, (long long)offset);
        return MFT_ERR_INVALID;
    }
    for (int i = 0; i < ndim; i++)
        if (strides[i] < 0) {
            mft__set_error(MFT_ERR_INVALID, "%s: negative stride %lld at dim %d in strides %s",
                           fn, (long long)strides[i], i, mft__fmt_dims(a, sizeof a, ndim, strides));
            return MFT_ERR_INVALID;
        }
    if (geometry_span_bytes(ndim, sizes, strides, offset, dtype) < 0) {
        mft__set_error(MFT_ERR_OVERFLOW,
                       "%s: sizes %s with strides %s and offset %lld span more than int64 bytes "
                       "of %s (Note [Geometry bound])",
                       fn, mft__fmt_dims(a, sizeof a, ndim, sizes),
                       mft__fmt_dims(b, sizeof b, ndim, strides), (long long)offset,
                       mft_dtype_name(dtype));
        return MFT_ERR_OVERFLOW;
    }
    return MFT_OK;
}

mft_status mft__check_geometry_at(const char *fn, int ndim, const int64_t *sizes,
                                  const int64_t *strides, int64_t offset, mft_dtype dtype) {
    char a[MFT__DIMS_BUF];
    if (mft__check_dtype(fn, dtype) != MFT_OK) return MFT_ERR_DTYPE;
    if (ndim < 0 || ndim > MFT_MAX_DIMS) {
        mft__set_error(MFT_ERR_RANK, "%s: ndim %d is outside 0..%d", fn, ndim, MFT_MAX_DIMS);
        return MFT_ERR_RANK;
    }
    if (ndim > 0 && !sizes) {
        mft__set_error(MFT_ERR_NULL, "%s: sizes is NULL for ndim %d", fn, ndim);
        return MFT_ERR_NULL;
    }
    int64_t count = 1, bytes;
    for (int i = 0; i < ndim; i++) {
        if (sizes[i] < 0) {
            mft__set_error(MFT_ERR_INVALID, "%s: negative size %lld at dim %d in sizes %s", fn,
                           (long long)sizes[i], i, mft__fmt_dims(a, sizeof a, ndim, sizes));
            return MFT_ERR_INVALID;
        }
        if (__builtin_mul_overflow(count, sizes[i] ? sizes[i] : 1, &count)) {
            mft__set_error(MFT_ERR_OVERFLOW, "%s: element count of sizes %s overflows int64", fn,
                           mft__fmt_dims(a, sizeof a, ndim, sizes));
            return MFT_ERR_OVERFLOW;
        }
    }
    if (__builtin_mul_overflow(count, (int64_t)mft__elem_size(dtype), &bytes) ||
        bytes > MFT__MAX_BYTES) {
        mft__set_error(MFT_ERR_OVERFLOW,
                       "%s: sizes %s hold more than 2^59 bytes of %s (Note [Geometry bound])", fn,
                       mft__fmt_dims(a, sizeof a, ndim, sizes), mft_dtype_name(dtype));
        return MFT_ERR_OVERFLOW;
    }
    if (!strides) return MFT_OK;
    return geometry_span(fn, ndim, sizes, strides, offset, dtype);
}

mft_status mft__check_geometry(const char *fn, int ndim, const int64_t *sizes,
                               const int64_t *strides, mft_dtype dtype) {
    return mft__check_geometry_at(fn, ndim, sizes, strides, 0, dtype);
}

/* The last line of Note [Geometry bound]: a non-empty header's elements lie
 * in s. An empty one addresses nothing, and its offset may lie past the end:
 * a view of an empty tensor keeps start * stride offsets, as in PyTorch. */
static mft_status geometry_in_storage(const char *fn, const mft_storage *s, int64_t offset,
                                      int ndim, const int64_t *sizes, const int64_t *strides,
                                      mft_dtype dtype) {
    const int64_t have = (int64_t)(s->nbytes / mft__elem_size(dtype));
    for (int d = 0; d < ndim; d++)
        if (sizes[d] == 0) return MFT_OK;
    /* non-empty: span >= offset + 1 + reach, so end cannot overflow */
    int64_t end = offset + 1; /* one past the last element */
    for (int d = 0; d < ndim; d++) end += (sizes[d] - 1) * strides[d];
    if (end <= have) return MFT_OK;
    char a[MFT__DIMS_BUF], b[MFT__DIMS_BUF];
    mft__set_error(MFT_ERR_BOUNDS,
                   "%s: sizes %s strides %s offset %lld reach element %lld of a storage of %lld "
                   "elements of %s",
                   fn, mft__fmt_dims(a, sizeof a, ndim, sizes),
                   mft__fmt_dims(b, sizeof b, ndim, strides), (long long)offset, (long long)end - 1,
                   (long long)have, mft_dtype_name(dtype));
    return MFT_ERR_BOUNDS;
}

mft_tensor *mft__tensor_new(const char *fn, mft_storage *s, int64_t offset, int ndim,
                            const int64_t *sizes, const int64_t *strides, mft_dtype dtype) {
    if (mft__check_geometry_at(fn, ndim, sizes, strides, offset, dtype) != MFT_OK ||
        geometry_in_storage(fn, s, offset, ndim, sizes, strides, dtype) != MFT_OK)
        return NULL;
    mft_tensor *t = mft__tensor_header(fn, s, offset, ndim, sizes, strides, dtype);
    if (!t) return NULL;
    mft__tensor_refresh(t);
    /* no producer: ambiguous strides fall back to the suggested format */
    mft__tensor_set_tag_from(t, (t->flags & MFT__F_CL_STRIDES) ? MFT_CHANNELS_LAST
                                                               : MFT_CONTIGUOUS);
    if (t->origin == MFT_INHERITED) t->origin = MFT_INFERRED;
    return mft__tensor_publish(fn, t);
}

mft_tensor *mft__tensor_header(const char *fn, mft_storage *s, int64_t offset, int ndim,
                               const int64_t *sizes, const int64_t *strides, mft_dtype dtype) {
    mft_tensor *t = mft__alloc_or_err(fn, sizeof *t, _Alignof(mft_tensor));
    if (!t) return NULL;
    memset(t, 0, sizeof *t);
    atomic_init(&t->refcount, 1);
    t->storage = s;
    mft__storage_retain(s);
    t->offset = offset;
    t->ndim = ndim;
    t->dtype = dtype;
    t->numel = 1;
    for (int i = 0; i < ndim; i++) {
        t->sizes[i] = sizes[i];
        t->strides[i] = strides[i];
        t->numel *= sizes[i];
    }
    atomic_fetch_add(&mft__live_tensor_count, 1);
    return t;
}

mft_tensor *mft__tensor_publish(const char *fn, mft_tensor *t) {
    if (mft__scope_register(t) != MFT_OK) {
        mft_tensor_release(t);
        mft__set_error(MFT_ERR_NOMEM, "%s: out of memory registering the result in a scope", fn);
        return NULL;
    }
    return t;
}

mft_tensor *mft__tensor_alloc_strided(const char *fn, int ndim, const int64_t *sizes,
                                      const int64_t *strides, mft_dtype dtype) {
    /* geometry was validated by the caller: the reach cannot overflow */
    int64_t need = 1;
    for (int d = 0; d < ndim; d++) {
        if (sizes[d] == 0) {
            need = 0;
            break;
        }
        need += (sizes[d] - 1) * strides[d];
    }
    size_t es = mft__elem_size(dtype);
    if ((uint64_t)need > SIZE_MAX / es) {
        mft__set_error(MFT_ERR_OVERFLOW, "%s: %lld elements overflow size_t", fn, (long long)need);
        return NULL;
    }
    mft_storage *s = mft__storage_new(fn, (size_t)need * es);
    if (!s) return NULL;
    mft_tensor *t = mft__tensor_new(fn, s, 0, ndim, sizes, strides, dtype);
    mft__storage_release(s);
    return t;
}

static mft_tensor *tensor_alloc(const char *fn, int ndim, const int64_t *sizes, mft_dtype dtype,
                                mft_format fmt, bool zero);

mft_tensor *mft__tensor_alloc(const char *fn, int ndim, const int64_t *sizes, mft_dtype dtype,
                              mft_format fmt) {
    return tensor_alloc(fn, ndim, sizes, dtype, fmt, true);
}

mft_tensor *mft__tensor_alloc_unzeroed(const char *fn, int ndim, const int64_t *sizes,
                                       mft_dtype dtype, mft_format fmt) {
    return tensor_alloc(fn, ndim, sizes, dtype, fmt, false);
}

static mft_tensor *tensor_alloc(const char *fn, int ndim, const int64_t *sizes, mft_dtype dtype,
                                mft_format fmt, bool zero) {
    if (mft__check_geometry(fn, ndim, sizes, NULL, dtype) != MFT_OK) return NULL;
    if (fmt == MFT_NCHW8C || fmt == MFT_NCHW16C) { /* docs/spec.md §7 */
        mft_layout l;
        if (mft__layout_for_format(fn, ndim, sizes, fmt, &l) != MFT_OK) return NULL;
        mft_tensor *t = mft__tensor_alloc_layout_ex(fn, &l, dtype, zero);
        if (t) mft__tensor_declare(t, fmt);
        return t;
    }
    if (fmt != MFT_CONTIGUOUS && fmt != MFT_CHANNELS_LAST) {
        mft__set_error(MFT_ERR_FORMAT,
                       "%s: format %s is not allowed here (use CONTIGUOUS, CHANNELS_LAST, NCHW8C "
                       "or NCHW16C)",
                       fn, mft_format_name(fmt));
        return NULL;
    }
    if (fmt == MFT_CHANNELS_LAST && (ndim < 3 || ndim > 5)) {
        mft__set_error(MFT_ERR_FORMAT, "%s: CHANNELS_LAST needs rank 3, 4 or 5, got rank %d", fn,
                       ndim);
        return NULL;
    }
    int64_t strides[MFT_MAX_DIMS];
    mft__format_strides(ndim, sizes, fmt, strides); /* cannot overflow: numel checked */
    mft_tensor *t = mft__tensor_alloc_strided(fn, ndim, sizes, strides, dtype);
    if (t) mft__tensor_declare(t, fmt);
    return t;
}

/* ---------------------------------------------------------------- lifetime */
mft_tensor *mft_tensor_retain(mft_tensor *t) {
    if (t) atomic_fetch_add(&t->refcount, 1);
    return t;
}

void mft_tensor_release(mft_tensor *t) {
    if (!t) return;
    if (atomic_fetch_sub(&t->refcount, 1) != 1) return;
    if (t->autograd) {
        mft_tensor_release(t->autograd->grad);
        mft__free(t->autograd);
    }
    mft__prov_release(t->prov);
    mft__free(t->name);
    mft__storage_release(t->storage);
    mft__free(t);
    atomic_fetch_sub(&mft__live_tensor_count, 1);
}

/* ---------------------------------------------------------------- accessors */
int mft_tensor_ndim(const mft_tensor *t) { return t ? t->ndim : 0; }
const int64_t *mft_tensor_sizes(const mft_tensor *t) { return t ? t->sizes : NULL; }
const int64_t *mft_tensor_strides(const mft_tensor *t) {
    if (t && t->nblocks) { /* outer strides would be misread: Note [Blocked tensors] */
        mft__blk_refuse("mft_tensor_strides", t, "the strides (use mft_tensor_layout)");
        return NULL;
    }
    return t ? t->strides : NULL;
}
int64_t mft_tensor_offset(const mft_tensor *t) { return t ? t->offset : 0; }
int64_t mft_tensor_numel(const mft_tensor *t) { return t ? t->numel : 0; }
mft_dtype mft_tensor_dtype(const mft_tensor *t) { return t ? t->dtype : MFT_F32; }
void *mft_tensor_data(const mft_tensor *t) { return t ? mft__tensor_ptr(t) : NULL; }
int64_t mft_tensor_storage_numel(const mft_tensor *t) {
    return t ? (int64_t)(t->storage->nbytes / mft__elem_size(t->dtype)) : 0;
}
bool mft_tensor_shares_storage(const mft_tensor *a, const mft_tensor *b) {
    return a && b && a->storage == b->storage;
}
int64_t mft_tensor_version(const mft_tensor *t) {
    return t ? (int64_t)atomic_load(&t->storage->version) : 0;
}

/* Byte offset of a logical index from the view's element 0, or -1 with
 * MFT_ERR_DIM set. */
static int64_t tensor_index_offset(const char *fn, const mft_tensor *t, const int64_t *index) {
    int64_t off = 0;
    if (t->ndim > 0 && !index) {
        mft__set_error(MFT_ERR_NULL, "%s: index is NULL for a rank-%d tensor", fn, t->ndim);
        return -1;
    }
    for (int i = 0; i < t->ndim; i++) {
        if (index[i] < 0 || index[i] >= t->sizes[i]) {
            char a[MFT__DIMS_BUF], b[MFT__DIMS_BUF];
            mft__set_error(MFT_ERR_DIM, "%s: index %s is out of range for sizes %s (dim %d)", fn,
                           mft__fmt_dims(a, sizeof a, t->ndim, index),
                           mft__fmt_dims(b, sizeof b, t->ndim, t->sizes), i);
            return -1;
        }
        if (!t->nblocks) off += index[i] * t->strides[i];
    }
    if (t->nblocks) off = mft__blk_offset(t, index);
    return off * (int64_t)mft__elem_size(t->dtype);
}

double mft_tensor_get(const mft_tensor *t, const int64_t *index) {
    if (!t) {
        mft__null_arg("mft_tensor_get", "t");
        return NAN;
    }
    int64_t off = tensor_index_offset("mft_tensor_get", t, index);
    if (off < 0) return NAN;
    return mft__load(t->dtype, mft__tensor_ptr(t) + off);
}

mft_status mft_tensor_set(mft_tensor *t, const int64_t *index, double value) {
    if (!t) {
        mft__null_arg("mft_tensor_set", "t");
        return MFT_ERR_NULL;
    }
    for (int i = 0; i < t->ndim && !t->nblocks; i++) {
        if (t->strides[i] == 0 && t->sizes[i] > 1) {
            mft__set_error(MFT_ERR_OVERLAP,
                           "mft_tensor_set: dim %d has stride 0 and size %lld (a broadcast view); "
                           "writing would change %lld elements",
                           i, (long long)t->sizes[i], (long long)t->sizes[i]);
            return MFT_ERR_OVERLAP;
        }
    }
    int64_t off = tensor_index_offset("mft_tensor_set", t, index);
    if (off < 0) return mft_last_error();
    if (mft__check_int_value("mft_tensor_set", "value", t->dtype, value) != MFT_OK)
        return MFT_ERR_OVERFLOW;
    mft__store(t->dtype, mft__tensor_ptr(t) + off, value);
    atomic_fetch_add(&t->storage->version, 1);
    return MFT_OK;
}

/* ---------------------------------------------------------------- scopes
 * One growable array of owned tensors per thread and a stack of marks (the
 * array length when each open scope began). */
#define MFT__SCOPE_MAX_DEPTH 64
static _Thread_local mft_tensor **tl_scope_items = NULL;
static _Thread_local int64_t tl_scope_len = 0, tl_scope_cap = 0;
static _Thread_local int64_t tl_scope_marks[MFT__SCOPE_MAX_DEPTH];
static _Thread_local int tl_scope_depth = 0;
static _Thread_local int tl_scope_suspended = 0;

void mft__scope_suspend(void) { tl_scope_suspended++; }
void mft__scope_resume(void) { tl_scope_suspended--; }

mft_status mft__scope_register(mft_tensor *t) {
    if (tl_scope_depth == 0 || tl_scope_suspended > 0) return MFT_OK;
    if (tl_scope_len == tl_scope_cap) {
        int64_t cap = tl_scope_cap ? tl_scope_cap * 2 : 64;
        mft_tensor **n = mft__alloc((size_t)cap * sizeof *n, _Alignof(mft_tensor *));
        if (!n) return MFT_ERR_NOMEM;
        if (tl_scope_len) memcpy(n, tl_scope_items, (size_t)tl_scope_len * sizeof *n);
        mft__free(tl_scope_items);
        tl_scope_items = n;
        tl_scope_cap = cap;
    }
    tl_scope_items[tl_scope_len++] = t;
    return MFT_OK;
}

/* Thread exit with scopes still open: end them all (tensor/thread_exit.c). */
static void scope_end_all(void) {
    while (tl_scope_depth > 0) mft_scope_end();
}

mft_status mft_scope_begin(void) {
    if (tl_scope_depth == MFT__SCOPE_MAX_DEPTH) {
        mft__set_error(MFT_ERR_SCOPE, "mft_scope_begin: more than %d nested scopes",
                       MFT__SCOPE_MAX_DEPTH);
        return MFT_ERR_SCOPE;
    }
    if (tl_scope_depth == 0) mft__thread_exit_arm(MFT__TEXIT_SCOPES, scope_end_all);
    tl_scope_marks[tl_scope_depth++] = tl_scope_len;
    return MFT_OK;
}

mft_tensor *mft_scope_keep(mft_tensor *t) {
    if (!t) {
        mft__null_arg("mft_scope_keep", "t");
        return NULL;
    }
    if (tl_scope_depth > 0) {
        int64_t lo = tl_scope_marks[tl_scope_depth - 1];
        for (int64_t i = tl_scope_len - 1; i >= lo; i--) {
            if (tl_scope_items[i] == t) {
                memmove(&tl_scope_items[i], &tl_scope_items[i + 1],
                        (size_t)(tl_scope_len - i - 1) * sizeof *tl_scope_items);
                tl_scope_len--;
                return t;
            }
        }
    }
    mft__set_error(MFT_ERR_SCOPE, "mft_scope_keep: tensor %p is not owned by the innermost scope",
                   (void *)t);
    return NULL;
}

mft_status mft_scope_end(void) {
    if (tl_scope_depth == 0) {
        mft__set_error(MFT_ERR_SCOPE, "mft_scope_end: no scope is open");
        return MFT_ERR_SCOPE;
    }
    int64_t lo = tl_scope_marks[--tl_scope_depth];
    for (int64_t i = tl_scope_len - 1; i >= lo; i--) mft_tensor_release(tl_scope_items[i]);
    tl_scope_len = lo;
    if (tl_scope_depth == 0) {
        mft__free(tl_scope_items);
        tl_scope_items = NULL;
        tl_scope_cap = 0;
        mft__thread_exit_disarm(MFT__TEXIT_SCOPES);
    }
    return MFT_OK;
}

mft_tensor *mft__retain_result(const char *fn, mft_tensor *t) {
    mft_tensor_retain(t);
    if (mft__scope_register(t) != MFT_OK) {
        mft_tensor_release(t);
        mft__set_error(MFT_ERR_NOMEM, "%s: out of memory registering the result in a scope", fn);
        return NULL;
    }
    return t;
}
