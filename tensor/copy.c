/* tensor/copy.c — copies and format conversions in the core (docs/spec.md
 * §3), without autograd: the overlap and broadcast-destination checks, the
 * checked copy, contiguous / to_format (no copy when the layout already fits,
 * re-tagging through a new header, never the caller's), clone / empty_like /
 * zeros_like with PRESERVE, and to_dtype. The work is done by
 * mft__copy_kernel (copy_kernel.c). The public mft_copy_, mft_contiguous,
 * mft_to_format, mft_clone and mft_to_dtype (which record tape nodes) are
 * in ops/shape/copy.c; empty_like and zeros_like record nothing and are
 * public here. */
#include <string.h>
#include "internal.h"

/* Byte range [lo, hi) touched by a non-empty view. */
static void copy_byte_range(const mft_tensor *t, uintptr_t *lo, uintptr_t *hi) {
    int64_t reach = 0;
    if (t->nblocks) { /* the layout's storage span, pads included */
        mft_layout l;
        mft__layout_of(t, &l);
        mft_layout_storage_numel(&l, &reach);
        reach -= 1;
    } else {
        for (int d = 0; d < t->ndim; d++) reach += (t->sizes[d] - 1) * t->strides[d];
    }
    size_t es = mft__elem_size(t->dtype);
    *lo = (uintptr_t)mft__tensor_ptr(t);
    *hi = *lo + (uintptr_t)(reach + 1) * es;
}

bool mft__tensor_overlaps(const mft_tensor *a, const mft_tensor *b) {
    if (a->numel == 0 || b->numel == 0) return false;
    uintptr_t al, ah, bl, bh;
    copy_byte_range(a, &al, &ah);
    copy_byte_range(b, &bl, &bh);
    return al < bh && bl < ah;
}

/* A destination must not write one memory location twice: no stride-0 dim of
 * size > 1, and (sufficient test) each stride, in increasing order, must
 * exceed the reach of all smaller ones. */
/* A blocked destination: its outer dims (extent padded / B) and the inner
 * tile (stride 1) must not overlap, by the same test as plain strides. */
static mft_status copy_check_writable_blocked(const char *fn, const mft_tensor *dst) {
    int64_t ext[MFT_MAX_DIMS + 1], st[MFT_MAX_DIMS + 1], tile = 1;
    int n = 0;
    for (int k = 0; k < dst->nblocks; k++) tile *= dst->block_size[k];
    for (int d = 0; d < dst->ndim; d++) {
        int64_t b = 1;
        for (int k = 0; k < dst->nblocks; k++)
            if (dst->block_dim[k] == d) b *= dst->block_size[k];
        if (dst->padded[d] / b < 2) continue;
        ext[n] = dst->padded[d] / b;
        st[n++] = dst->strides[d];
    }
    int64_t reach = tile - 1;
    for (int i = 0; i < n; i++) { /* selection by increasing stride */
        int m = i;
        for (int j = i + 1; j < n; j++)
            if (st[j] < st[m]) m = j;
        int64_t e = ext[m], s = st[m];
        ext[m] = ext[i], st[m] = st[i], ext[i] = e, st[i] = s;
        if (s <= reach) {
            mft__set_error(MFT_ERR_OVERLAP,
                           "%s: the blocked destination's outer stride %lld reaches into the "
                           "%lld elements below it (internal overlap)",
                           fn, (long long)s, (long long)reach + 1);
            return MFT_ERR_OVERLAP;
        }
        reach += (e - 1) * s;
    }
    return MFT_OK;
}

mft_status mft__check_writable(const char *fn, const mft_tensor *dst) {
    char a[MFT__DIMS_BUF], b[MFT__DIMS_BUF];
    if (dst->numel == 0 || (dst->flags & MFT__F_DENSE)) return MFT_OK;
    if (dst->nblocks) return copy_check_writable_blocked(fn, dst);
    int perm[MFT_MAX_DIMS], n = 0;
    for (int d = 0; d < dst->ndim; d++) {
        if (dst->sizes[d] < 2) continue;
        if (dst->strides[d] == 0) {
            mft__set_error(MFT_ERR_OVERLAP,
                           "%s: destination dim %d has stride 0 and size %lld (sizes %s, strides %s): "
                           "writing through a broadcast",
                           fn, d, (long long)dst->sizes[d], mft__fmt_dims(a, sizeof a, dst->ndim, dst->sizes),
                           mft__fmt_dims(b, sizeof b, dst->ndim, dst->strides));
            return MFT_ERR_OVERLAP;
        }
        int j = n++;
        while (j > 0 && dst->strides[perm[j - 1]] > dst->strides[d]) {
            perm[j] = perm[j - 1];
            j--;
        }
        perm[j] = d;
    }
    int64_t reach = 0;
    for (int i = 0; i < n; i++) {
        int d = perm[i];
        if (dst->strides[d] <= reach) {
            mft__set_error(MFT_ERR_OVERLAP,
                           "%s: destination sizes %s strides %s may refer to one element twice "
                           "(internal overlap)",
                           fn, mft__fmt_dims(a, sizeof a, dst->ndim, dst->sizes),
                           mft__fmt_dims(b, sizeof b, dst->ndim, dst->strides));
            return MFT_ERR_OVERLAP;
        }
        reach += (dst->sizes[d] - 1) * dst->strides[d];
    }
    return MFT_OK;
}

static int64_t copy_gcd(int64_t a, int64_t b) {
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Interleaved views (x[0::2] vs x[1::2], even vs odd channels) are disjoint
 * although their byte ranges intersect: every element address of both is
 * congruent to its base modulo g = gcd of all byte strides, so if the two
 * bases differ by r (mod g) with es <= r <= g - es, no two elements meet. */
static bool copy_interleaved_disjoint(const mft_tensor *a, const mft_tensor *b) {
    if (a->dtype != b->dtype) return false;
    int64_t es = (int64_t)mft__elem_size(a->dtype), g = 0;
    const mft_tensor *ts[2] = {a, b};
    for (int k = 0; k < 2; k++)
        for (int d = 0; d < ts[k]->ndim; d++)
            if (ts[k]->sizes[d] > 1) g = copy_gcd(g, ts[k]->strides[d] * es);
    if (g < 2 * es) return false;
    int64_t diff = (int64_t)((uintptr_t)mft__tensor_ptr(a) - (uintptr_t)mft__tensor_ptr(b));
    int64_t r = ((diff % g) + g) % g;
    return r >= es && r <= g - es;
}

/* Overlap is decided on memory, not on storage objects: two mft_from_blob
 * wraps of one buffer are two storages over the same bytes (PyTorch compares
 * data pointers too). Identical element layouts at the same address are a
 * full overlap (allowed); otherwise intersecting byte ranges are a partial
 * overlap unless the views interleave without sharing an element. */
mft_status mft__check_overlap(const char *fn, const mft_tensor *dst, const mft_tensor *src) {
    if (dst->numel == 0 || src->numel == 0) return MFT_OK;
    uintptr_t dl, dh, sl, sh;
    copy_byte_range(dst, &dl, &dh);
    copy_byte_range(src, &sl, &sh);
    if (dh <= sl || sh <= dl) return MFT_OK;
    bool same = dst->dtype == src->dtype && dl == sl && dst->ndim == src->ndim;
    if (dst->nblocks || src->nblocks) { /* one descriptor, or a partial overlap */
        mft_layout a, b;
        mft__layout_of(dst, &a);
        mft__layout_of(src, &b);
        same = same && mft_layout_equal(&a, &b);
    } else {
        for (int d = 0; same && d < dst->ndim; d++)
            same = dst->sizes[d] == src->sizes[d] && dst->strides[d] == src->strides[d];
    }
    if (same || (!dst->nblocks && !src->nblocks && copy_interleaved_disjoint(dst, src)))
        return MFT_OK;
    char a[MFT__DIMS_BUF], b[MFT__DIMS_BUF];
    mft__set_error(MFT_ERR_OVERLAP,
                   "%s: destination (strides %s, offset %lld) partially overlaps the source "
                   "(strides %s, offset %lld) in memory",
                   fn, mft__fmt_dims(a, sizeof a, dst->ndim, dst->strides), (long long)dst->offset,
                   mft__fmt_dims(b, sizeof b, src->ndim, src->strides), (long long)src->offset);
    return MFT_ERR_OVERLAP;
}

mft_status mft__copy_check_sizes(const char *fn, const mft_tensor *dst, const mft_tensor *src) {
    int nd[2] = {dst->ndim, src->ndim};
    const int64_t *sz[2] = {dst->sizes, src->sizes};
    int bnd;
    int64_t shape[MFT_MAX_DIMS];
    mft_status st = mft__broadcast_shape(fn, 2, nd, sz, &bnd, shape);
    if (st != MFT_OK) return st;
    bool same = bnd == dst->ndim;
    for (int d = 0; same && d < bnd; d++) same = shape[d] == dst->sizes[d];
    if (!same) {
        char a[MFT__DIMS_BUF], b[MFT__DIMS_BUF];
        mft__set_error(MFT_ERR_SHAPE, "%s: source sizes %s do not broadcast to destination sizes %s",
                       fn, mft__fmt_dims(a, sizeof a, src->ndim, src->sizes),
                       mft__fmt_dims(b, sizeof b, dst->ndim, dst->sizes));
        return MFT_ERR_SHAPE;
    }
    return MFT_OK;
}

mft_status mft__copy_into(const char *fn, mft_tensor *dst, const mft_tensor *src) {
    mft_status st;
    if ((st = mft__check_writable(fn, dst)) != MFT_OK) return st;
    if ((st = mft__check_overlap(fn, dst, src)) != MFT_OK) return st;
    if (dst == src || dst->numel == 0) return MFT_OK;
    mft__copy_kernel(dst, src);
    return MFT_OK;
}

/* A packed copy of t in fmt (tag DECLARED). */
static mft_tensor *copy_packed(const char *fn, const mft_tensor *t, mft_format fmt, mft_dtype dt) {
    mft_tensor *out = mft__tensor_alloc(fn, t->ndim, t->sizes, dt, fmt);
    if (out && out->numel) mft__copy_kernel(out, t);
    mft__decision d = mft__rule_decide(MFT__RULE_CONVERT, fn + 4, 1, &t, fmt, 0);
    mft__rule_apply(out, &d);
    return out;
}

/* copy_packed for a layout change: the copy is a conversion (Note
 * [Conversions and their causes]), attributed to the caller's cause. */
static mft_tensor *copy_convert(const char *fn, const char *op, const mft_tensor *t,
                                mft_format fmt) {
    mft_tensor *out = copy_packed(fn, t, fmt, t->dtype);
    if (out) mft__note_conversion(op, t, out);
    return out;
}

static bool copy_check_format(const char *fn, const mft_tensor *t, mft_format fmt, bool preserve_ok) {
    if (fmt == MFT_CONTIGUOUS || (preserve_ok && fmt == MFT_PRESERVE)) return true;
    if (fmt == MFT_CHANNELS_LAST || fmt == MFT_NCHW8C || fmt == MFT_NCHW16C) {
        if (t->ndim >= 3 && t->ndim <= 5) return true;
        mft__set_error(MFT_ERR_FORMAT, "%s: %s needs rank 3, 4 or 5, got rank %d", fn,
                       mft_format_name(fmt), t->ndim);
        return false;
    }
    if (fmt == MFT_BLOCKED) {
        mft__set_error(MFT_ERR_FORMAT,
                       "%s: BLOCKED names no layout by itself; use mft_to_layout with a "
                       "descriptor",
                       fn);
        return false;
    }
    mft__set_error(MFT_ERR_FORMAT, "%s: format %s (%d) is not allowed here", fn,
                   mft_format_name(fmt), (int)fmt);
    return false;
}

/* No-copy result: t itself when its tag already is fmt, else a new header on
 * the same storage tagged fmt (DECLARED). */
static mft_tensor *copy_retag(const char *fn, const mft_tensor *t, mft_format fmt) {
    if (t->tag == fmt || t->nblocks) return mft__retain_result(fn, (mft_tensor *)t);
    mft_tensor *out = mft__tensor_new(fn, t->storage, t->offset, t->ndim, t->sizes, t->strides,
                                      t->dtype);
    mft__decision d = mft__rule_decide(MFT__RULE_CONVERT, fn + 4, 1, &t, fmt, 0);
    mft__rule_apply(out, &d);
    return out;
}

mft_tensor *mft__contiguous(const char *fn, const mft_tensor *t, mft_format fmt) {
    if (!t) {
        mft__null_arg(fn, "t");
        return NULL;
    }
    if (!copy_check_format(fn, t, fmt, false)) return NULL;
    if (mft_tensor_is_contiguous(t, fmt)) return copy_retag(fn, t, fmt);
    return copy_convert(fn, "contiguous", t, fmt);
}

mft_tensor *mft__to_format(const char *fn, const mft_tensor *t, mft_format fmt) {
    if (!t) {
        mft__null_arg(fn, "t");
        return NULL;
    }
    if (!copy_check_format(fn, t, fmt, true)) return NULL;
    if (fmt == MFT_PRESERVE) return mft__retain_result(fn, (mft_tensor *)t);
    /* an empty tensor "fits" every order, but gets the format's packed
     * strides (nothing to copy), as PyTorch: (0,3,5,4) to channels_last has
     * strides (60,1,12,3) and is channels_last-contiguous */
    if (mft_tensor_is_contiguous(t, fmt) ||
        (t->numel > 0 && (t->flags & MFT__F_DENSE) && mft_tensor_order_fits(t, fmt)))
        return copy_retag(fn, t, fmt);
    return copy_convert(fn, "to_format", t, fmt);
}

/* Uninitialised tensor shaped like t, laid out per fmt (PRESERVE: t's strides
 * if dense, else dense strides in t's dim order; tag from t). */
static mft_tensor *copy_alloc_like(const char *fn, const mft_tensor *t, mft_format fmt,
                                   mft_dtype dt, mft__rule_id declared_row, mft__rule_id like_row) {
    if (!copy_check_format(fn, t, fmt, true)) return NULL;
    if (fmt != MFT_PRESERVE) {
        mft_tensor *out = mft__tensor_alloc(fn, t->ndim, t->sizes, dt, fmt);
        mft__decision d = mft__rule_decide(declared_row, fn + 4, 1, &t, fmt, 0);
        mft__rule_apply(out, &d);
        return out;
    }
    if (t->nblocks) { /* the same blocks, packed */
        mft_layout l;
        mft__layout_of(t, &l);
        mft__layout_packed_like(&l, &l);
        mft_tensor *out = mft__tensor_alloc_layout(fn, &l, dt);
        mft__rule_apply1(out, like_row, fn + 4, t);
        return out;
    }
    int64_t strides[MFT_MAX_DIMS];
    /* t's own strides when dense, unless a size-1 dim's stride would break
     * Note [Geometry bound] in dtype dt; else dense strides in t's order
     * (packed: always within the bound) */
    if ((t->flags & MFT__F_DENSE) && mft__geometry_fits(t->ndim, t->sizes, t->strides, 0, dt))
        memcpy(strides, t->strides, sizeof strides);
    else
        mft__infer_dense_strides(t->ndim, t->sizes, t->strides, strides);
    if (mft__check_geometry(fn, t->ndim, t->sizes, strides, dt) != MFT_OK) return NULL;
    mft_tensor *out = mft__tensor_alloc_strided(fn, t->ndim, t->sizes, strides, dt);
    mft__rule_apply1(out, like_row, fn + 4, t);
    return out;
}

mft_tensor *mft_empty_like(const mft_tensor *t, mft_format fmt) {
    if (!t) {
        mft__null_arg("mft_empty_like", "t");
        return NULL;
    }
    return copy_alloc_like("mft_empty_like", t, fmt, t->dtype, MFT__RULE_FACTORY, MFT__RULE_LIKE);
}

mft_tensor *mft_zeros_like(const mft_tensor *t, mft_format fmt) {
    if (!t) {
        mft__null_arg("mft_zeros_like", "t");
        return NULL;
    }
    mft_tensor *out =
        copy_alloc_like("mft_zeros_like", t, fmt, t->dtype, MFT__RULE_FACTORY, MFT__RULE_LIKE);
    if (out) memset(out->storage->data, 0, out->storage->nbytes);
    return out;
}

/* Same placement of every element (strides, or descriptors). */
static bool copy_same_layout(const mft_tensor *a, const mft_tensor *b) {
    if (!a->nblocks && !b->nblocks)
        return !memcmp(a->strides, b->strides, (size_t)a->ndim * sizeof(int64_t));
    mft_layout la, lb;
    mft__layout_of(a, &la);
    mft__layout_of(b, &lb);
    return mft_layout_equal(&la, &lb);
}

mft_tensor *mft__to_layout(const char *fn, const mft_tensor *t, const mft_layout *l) {
    if (!t || !l) {
        mft__null_arg(fn, !t ? "t" : "layout");
        return NULL;
    }
    if (mft_layout_check(l) != MFT_OK) {
        mft__relabel_error(fn);
        return NULL;
    }
    if (l->ndim != t->ndim ||
        memcmp(l->sizes, t->sizes, sizeof(int64_t) * (size_t)t->ndim)) {
        char a[MFT__DIMS_BUF], b[MFT__DIMS_BUF];
        mft__set_error(MFT_ERR_SHAPE, "%s: the layout's sizes %s differ from the tensor's %s", fn,
                       mft__fmt_dims(a, sizeof a, l->ndim, l->sizes),
                       mft__fmt_dims(b, sizeof b, t->ndim, t->sizes));
        return NULL;
    }
    mft_layout have;
    mft__layout_of(t, &have);
    if (mft_layout_equal(&have, l)) return mft__retain_result(fn, (mft_tensor *)t);
    mft_tensor *out = mft__tensor_alloc_layout(fn, l, t->dtype);
    if (!out) return NULL;
    if (!out->nblocks) memset(out->storage->data, 0, out->storage->nbytes);
    if (out->numel) mft__copy_kernel(out, t);
    mft__decision d = mft__rule_decide(MFT__RULE_CONVERT, fn + 4, 1, &t, out->tag, 0);
    mft__rule_apply(out, &d);
    mft__note_conversion("to_layout", t, out);
    return out;
}

mft_tensor *mft__clone(const char *fn, const mft_tensor *t, mft_format fmt) {
    if (!t) {
        mft__null_arg(fn, "t");
        return NULL;
    }
    mft_tensor *out = copy_alloc_like(fn, t, fmt, t->dtype, MFT__RULE_CONVERT, MFT__RULE_LIKE);
    if (out && out->numel) mft__copy_kernel(out, t);
    if (out && !copy_same_layout(out, t)) mft__note_conversion("clone", t, out);
    return out;
}

mft_tensor *mft__to_dtype(const char *fn, const mft_tensor *t, mft_dtype dtype) {
    if (!t) {
        mft__null_arg(fn, "t");
        return NULL;
    }
    if (mft__check_dtype(fn, dtype) != MFT_OK) return NULL;
    if (dtype == t->dtype) return mft__retain_result(fn, (mft_tensor *)t);
    mft_tensor *out = copy_alloc_like(fn, t, MFT_PRESERVE, dtype, MFT__RULE_CAST, MFT__RULE_CAST);
    if (out && out->numel) mft__copy_kernel(out, t);
    return out;
}
