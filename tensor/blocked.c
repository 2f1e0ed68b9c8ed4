/* tensor/blocked.c — tensors in a blocked layout (docs/spec.md §7): headers
 * that carry a layout descriptor, their tag, element offsets, the plain
 * pieces a blocked tensor is made of (Note [Plain pieces]), copy and fill
 * through them, and the public functions of mft/layout.h that create,
 * query and check blocked tensors.
 *
 * Note [Blocked tensors]
 * A blocked header keeps logical sizes (C stays 17 in nChw16c) and stores
 * the descriptor's outer strides in strides[], its padded sizes in padded[]
 * and its inner blocks in block_dim[] / block_size[]. All plain-layout flags
 * are clear (MFT__F_BLOCKED alone), so is_contiguous / is_dense answer false
 * and no plain fast path matches; code that reads strides[] as element
 * strides must never see one. Three mechanisms keep that true:
 *   - the generic functions of the tensor layer (get / set, copy, fill,
 *     hash, conversions, views, describe) test mft__is_blocked and go
 *     through the descriptor;
 *   - ops convert blocked operands at their entry (ops/blocked_fallback.c)
 *     unless they run natively on plain pieces (elementwise);
 *   - mft_tensor_strides returns NULL for a blocked tensor, with an error.
 * Pad lanes hold zero in every buffer mft allocates (storage is zeroed)
 * and nothing mft runs writes a pad lane, so the invariant holds by
 * construction; mft_tensor_check_padding verifies it for wrapped memory. */
#include <string.h>
#include "internal.h"
#include "reorder_internal.h"

/* ---------------------------------------------------------------- descriptor */
void mft__layout_of(const mft_tensor *t, mft_layout *l) {
    memset(l, 0, sizeof *l);
    l->ndim = t->ndim;
    for (int d = 0; d < t->ndim; d++) {
        l->sizes[d] = t->sizes[d];
        l->strides[d] = t->strides[d];
        l->padded[d] = t->nblocks ? t->padded[d] : t->sizes[d];
    }
    l->nblocks = t->nblocks;
    for (int k = 0; k < t->nblocks; k++) {
        l->block_dim[k] = t->block_dim[k];
        l->block_size[k] = t->block_size[k];
    }
}

/* Product of the block sizes on dim d of l. */
static int64_t blk_dim_block(const mft_layout *l, int d) {
    int64_t b = 1;
    for (int k = 0; k < l->nblocks; k++)
        if (l->block_dim[k] == d) b *= l->block_size[k];
    return b;
}

mft_format mft__layout_format(const mft_layout *l) {
    if (l->nblocks == 0) {
        bool cl = l->ndim >= 3 && l->ndim <= 5 &&
                  mft__layout_order_fits(l->ndim, l->sizes, l->strides, MFT_CHANNELS_LAST) &&
                  !mft__layout_order_fits(l->ndim, l->sizes, l->strides, MFT_CONTIGUOUS);
        return cl ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
    }
    if (l->ndim < 3 || l->ndim > 5 || l->nblocks != 1 || l->block_dim[0] != 1 ||
        (l->block_size[0] != 8 && l->block_size[0] != 16))
        return MFT_BLOCKED;
    /* outer order N, C1, [D,] H, W: outer strides non-increasing over the
     * dims whose outer extent is above 1, and the innermost one at least
     * the block (whole blocks between neighbouring pixels) */
    int64_t prev = INT64_MAX, last = -1;
    for (int d = 0; d < l->ndim; d++) {
        if (l->padded[d] / blk_dim_block(l, d) <= 1) continue;
        if (l->strides[d] > prev) return MFT_BLOCKED;
        prev = last = l->strides[d];
    }
    if (last >= 0 && last < l->block_size[0]) return MFT_BLOCKED;
    return l->block_size[0] == 8 ? MFT_NCHW8C : MFT_NCHW16C;
}

mft_status mft__layout_for_format(const char *fn, int ndim, const int64_t *sizes, mft_format fmt,
                                  mft_layout *out) {
    mft_layout_tag tag;
    switch (fmt) {
    case MFT_CONTIGUOUS: tag = MFT_LAYOUT_NCHW; break;
    case MFT_CHANNELS_LAST: tag = MFT_LAYOUT_NHWC; break;
    case MFT_NCHW8C: tag = MFT_LAYOUT_NCHW8C; break;
    case MFT_NCHW16C: tag = MFT_LAYOUT_NCHW16C; break;
    default:
        mft__set_error(MFT_ERR_FORMAT,
                       "%s: format %s names no packed layout (BLOCKED needs a descriptor: "
                       "mft_to_layout)",
                       fn, mft_format_name(fmt));
        return MFT_ERR_FORMAT;
    }
    if (fmt != MFT_CONTIGUOUS && (ndim < 3 || ndim > 5)) {
        mft__set_error(MFT_ERR_FORMAT, "%s: %s needs rank 3, 4 or 5, got rank %d", fn,
                       mft_format_name(fmt), ndim);
        return MFT_ERR_FORMAT;
    }
    mft_status st = mft_layout_for_tag(ndim, sizes, tag, out);
    if (st != MFT_OK) mft__relabel_error(fn);
    return st;
}

/* ---------------------------------------------------------------- headers */
mft_tensor *mft__tensor_new_layout(const char *fn, mft_storage *s, int64_t offset,
                                   const mft_layout *l, mft_dtype dtype) {
    if (mft_layout_check(l) != MFT_OK) {
        mft__relabel_error(fn);
        return NULL;
    }
    if (l->nblocks == 0)
        return mft__tensor_new(fn, s, offset, l->ndim, l->sizes, l->strides, dtype);
    if (mft__check_geometry_at(fn, l->ndim, l->sizes, NULL, offset, dtype) != MFT_OK)
        return NULL;
    int64_t need, end, bytes;
    if (mft_layout_storage_numel(l, &need) != MFT_OK) {
        mft__relabel_error(fn);
        return NULL;
    }
    const int64_t have = (int64_t)(s->nbytes / mft__elem_size(dtype));
    if (offset < 0 || __builtin_add_overflow(offset, need, &end) ||
        __builtin_mul_overflow(end, (int64_t)mft__elem_size(dtype), &bytes) ||
        (need > 0 && end > have)) {
        mft__set_error(MFT_ERR_BOUNDS,
                       "%s: a blocked layout of %lld storage elements at offset %lld does not fit "
                       "a storage of %lld elements of %s",
                       fn, (long long)need, (long long)offset, (long long)have,
                       mft_dtype_name(dtype));
        return NULL;
    }
    mft_tensor *t = mft__tensor_header(fn, s, offset, l->ndim, l->sizes, l->strides, dtype);
    if (!t) return NULL;
    for (int d = 0; d < l->ndim; d++) t->padded[d] = l->padded[d];
    t->nblocks = l->nblocks;
    for (int k = 0; k < l->nblocks; k++) {
        t->block_dim[k] = l->block_dim[k];
        t->block_size[k] = l->block_size[k];
    }
    mft__tensor_refresh(t); /* MFT__F_BLOCKED and the packed flag */
    t->tag = mft__layout_format(l);
    t->origin = MFT_INFERRED;
    return mft__tensor_publish(fn, t);
}

mft_tensor *mft__tensor_alloc_layout(const char *fn, const mft_layout *l, mft_dtype dtype) {
    return mft__tensor_alloc_layout_ex(fn, l, dtype, true);
}

mft_tensor *mft__tensor_alloc_layout_ex(const char *fn, const mft_layout *l, mft_dtype dtype,
                                        bool zero) {
    if (mft__check_dtype(fn, dtype) != MFT_OK) return NULL;
    if (mft_layout_check(l) != MFT_OK) {
        mft__relabel_error(fn);
        return NULL;
    }
    int64_t need;
    if (mft_layout_storage_numel(l, &need) != MFT_OK) {
        mft__relabel_error(fn);
        return NULL;
    }
    const size_t es = mft__elem_size(dtype);
    if ((uint64_t)need > (uint64_t)MFT__MAX_BYTES / es) {
        mft__set_error(MFT_ERR_OVERFLOW,
                       "%s: a layout of %lld storage elements holds more than 2^59 bytes of %s "
                       "(Note [Geometry bound])",
                       fn, (long long)need, mft_dtype_name(dtype));
        return NULL;
    }
    mft_storage *s = mft__storage_new(fn, (size_t)need * es);
    if (!s) return NULL;
    if (zero && s->nbytes) memset(s->data, 0, s->nbytes); /* pad lanes start at zero */
    mft_tensor *t = mft__tensor_new_layout(fn, s, 0, l, dtype);
    mft__storage_release(s);
    return t;
}

/* Pitch of block k: the product of the sizes of the blocks after it. */
static int64_t blk_pitch(const mft_tensor *t, int k) {
    int64_t p = 1;
    for (int j = k + 1; j < t->nblocks; j++) p *= t->block_size[j];
    return p;
}

int64_t mft__blk_offset(const mft_tensor *t, const int64_t *index) {
    int64_t off = 0;
    for (int d = 0; d < t->ndim; d++) {
        int64_t bd = 1;
        for (int k = 0; k < t->nblocks; k++)
            if (t->block_dim[k] == d) bd *= t->block_size[k];
        off += index[d] / bd * t->strides[d];
    }
    for (int k = 0; k < t->nblocks; k++) {
        int64_t r = 1; /* sizes of the blocks after k on the same dim */
        for (int j = k + 1; j < t->nblocks; j++)
            if (t->block_dim[j] == t->block_dim[k]) r *= t->block_size[j];
        off += index[t->block_dim[k]] / r % t->block_size[k] * blk_pitch(t, k);
    }
    return off;
}

mft_status mft__blk_refuse(const char *fn, const mft_tensor *t, const char *what) {
    char a[MFT__DIMS_BUF];
    mft__set_error(MFT_ERR_FORMAT,
                   "%s: %s of a blocked tensor (sizes %s, format %s): its memory has no plain "
                   "strides; convert it first (mft_to_format / mft_contiguous)",
                   fn, what, mft__fmt_dims(a, sizeof a, t->ndim, t->sizes),
                   mft_format_name(t->tag));
    return MFT_ERR_FORMAT;
}

/* ---------------------------------------------------------------- plain pieces
 * Note [Plain pieces] (tensor/internal.h). */
typedef struct blk_cut {
    int n;                        /* operands */
    int ndim;                     /* logical rank */
    int64_t bsize[MFT_MAX_DIMS];  /* block on each dim (0: none) */
} blk_cut;

/* The common blocking of the operands; false when they disagree or a dim
 * has two blocks. */
static bool blk_cut_plan(int n, const mft_tensor *const *ops, blk_cut *c) {
    memset(c, 0, sizeof *c);
    c->n = n;
    c->ndim = ops[0]->ndim;
    bool first = true;
    for (int i = 0; i < n; i++) {
        const mft_tensor *t = ops[i];
        if (t->ndim != c->ndim) return false;
        if (!t->nblocks) continue;
        int64_t b[MFT_MAX_DIMS] = {0};
        for (int k = 0; k < t->nblocks; k++) {
            if (b[t->block_dim[k]]) return false; /* two blocks on one dim */
            b[t->block_dim[k]] = t->block_size[k];
        }
        if (first) {
            memcpy(c->bsize, b, sizeof b);
            first = false;
        } else if (memcmp(c->bsize, b, sizeof b)) {
            return false;
        }
    }
    return true;
}

bool mft__blk_can_cut(int n, const mft_tensor *const *ops) {
    blk_cut c;
    if (n < 1 || n > MFT__ITER_MAX_OPERANDS || !blk_cut_plan(n, ops, &c)) return false;
    int k = 0;
    for (int d = 0; d < c.ndim; d++) k += c.bsize[d] != 0;
    return c.ndim + k <= MFT_MAX_DIMS;
}

mft_status mft__blk_foreach(const char *fn, int n, const mft_tensor *const *ops,
                            mft__blk_piece_fn cb, void *ctx) {
    if (n < 1 || n > MFT__ITER_MAX_OPERANDS) return MFT_ERR_UNSUPPORTED;
    blk_cut c;
    if (!blk_cut_plan(n, ops, &c)) return MFT_ERR_UNSUPPORTED;
    int bd[MFT_MAX_DIMS], k = 0;
    for (int d = 0; d < c.ndim; d++)
        if (c.bsize[d]) bd[k++] = d;
    if (c.ndim + k > MFT_MAX_DIMS) return MFT_ERR_UNSUPPORTED;
    for (int d = 0; d < c.ndim; d++)
        if (ops[0]->sizes[d] == 0) return MFT_OK; /* nothing to visit */
    mft_status st = MFT_OK;
    mft__scope_suspend();
    for (unsigned mask = 0; mask < (1u << k) && st == MFT_OK; mask++) {
        /* bit j of mask: blocked dim bd[j] takes its full blocks (else its tail) */
        bool empty = false;
        for (int j = 0; j < k; j++) {
            const int64_t size = ops[0]->sizes[bd[j]], b = c.bsize[bd[j]];
            if ((mask >> j) & 1 ? size / b == 0 : size % b == 0) empty = true;
        }
        if (empty) continue;
        mft_tensor *pieces[MFT__ITER_MAX_OPERANDS] = {0};
        for (int i = 0; i < n && st == MFT_OK; i++) {
            const mft_tensor *t = ops[i];
            int64_t sizes[MFT_MAX_DIMS], strides[MFT_MAX_DIMS], off = t->offset;
            int r = 0;
            for (int d = 0; d < c.ndim; d++) {
                const int64_t b = c.bsize[d];
                int j = 0;
                while (j < k && bd[j] != d) j++;
                if (!b) {
                    sizes[r] = t->sizes[d];
                    strides[r++] = t->strides[d];
                    continue;
                }
                int64_t outer, inner; /* stride per block and per lane */
                if (t->nblocks) {
                    int kk = 0;
                    while (t->block_dim[kk] != d) kk++;
                    outer = t->strides[d];
                    inner = blk_pitch(t, kk);
                } else {
                    outer = b * t->strides[d];
                    inner = t->strides[d];
                }
                const int64_t full = t->sizes[d] / b;
                if ((mask >> j) & 1) {
                    sizes[r] = full;
                    strides[r++] = outer;
                    sizes[r] = b;
                    strides[r++] = inner;
                } else {
                    off += full * outer;
                    sizes[r] = t->sizes[d] % b;
                    strides[r++] = inner;
                }
            }
            pieces[i] = mft__tensor_new(fn, t->storage, off, r, sizes, strides, t->dtype);
            if (!pieces[i]) st = mft_last_error();
        }
        if (st == MFT_OK) cb(ctx, pieces);
        for (int i = 0; i < n; i++) mft_tensor_release(pieces[i]);
    }
    mft__scope_resume();
    return st;
}

/* ---------------------------------------------------------------- copy, fill */
static void blk_copy_piece(void *ctx, mft_tensor *const *p) {
    (void)ctx;
    mft__copy_kernel(p[0], p[1]);
}

/* Element offset of a logical index in any header. */
static int64_t blk_any_offset(const mft_tensor *t, const int64_t *idx) {
    if (t->nblocks) return mft__blk_offset(t, idx);
    int64_t off = 0;
    for (int d = 0; d < t->ndim; d++) off += idx[d] * t->strides[d];
    return off;
}

/* The element loop: any two layouts of equal sizes, through the offsets
 * (layouts no pieces describe: two blocks on one dim). */
static void blk_copy_elements(mft_tensor *dst, const mft_tensor *src) {
    int64_t idx[MFT_MAX_DIMS] = {0};
    const int64_t des = (int64_t)mft__elem_size(dst->dtype);
    const int64_t ses = (int64_t)mft__elem_size(src->dtype);
    char *dp = mft__tensor_ptr(dst);
    const char *sp = mft__tensor_ptr(src);
    for (int64_t e = 0; e < dst->numel; e++) {
        double v = mft__load(src->dtype, sp + blk_any_offset(src, idx) * ses);
        mft__store(dst->dtype, dp + blk_any_offset(dst, idx) * des, v);
        for (int d = dst->ndim - 1; d >= 0; d--) {
            if (++idx[d] < dst->sizes[d]) break;
            idx[d] = 0;
        }
    }
}

/* The spatial dims (2 .. ndim-1) of t as one flat index: true when each
 * dim's stride is unit times the sizes after it (size-1 dims ignored);
 * *s gets their element count. */
static bool blk_spatial_flat(const mft_tensor *t, int64_t unit, int64_t *s) {
    int64_t expect = unit;
    *s = 1;
    for (int d = t->ndim - 1; d >= 2; d--) {
        if (t->sizes[d] != 1 && t->strides[d] != expect) return false;
        expect *= t->sizes[d];
        *s *= t->sizes[d];
    }
    return true;
}

/* The reorder kernels (tensor/reorder_blocked.c) for an F32 copy between a
 * C-blocked tensor (one block of 8 or 16 on dim 1, rank 3-5, spatial outer
 * strides packed) and a plain one whose spatial dims flatten; false when
 * the pair is not of that kind. */
static bool blk_copy_reorder(mft_tensor *dst, const mft_tensor *src) {
    const mft_tensor *b = dst->nblocks ? dst : src, *p = dst->nblocks ? src : dst;
    if (dst->dtype != MFT_F32 || src->dtype != MFT_F32 || p->nblocks || b->nblocks != 1 ||
        b->block_dim[0] != 1 || (b->block_size[0] != 8 && b->block_size[0] != 16) ||
        b->ndim < 3 || b->ndim > 5)
        return false;
    const int B = (int)b->block_size[0];
    int64_t S, Sp, ps = 1;
    for (int d = p->ndim - 1; d >= 2; d--)
        if (p->sizes[d] != 1) {
            ps = p->strides[d];
            break;
        }
    if (!blk_spatial_flat(b, B, &S) || !blk_spatial_flat(p, ps, &Sp)) return false;
    const int64_t N = b->sizes[0], C = b->sizes[1];
    const int64_t bn = N > 1 ? b->strides[0] : 0, bc1 = b->strides[1];
    if (b->padded[1] / B > 1 && bc1 < S * B) return false;
    float *bp = (float *)(void *)mft__tensor_ptr(b), *pp = (float *)(void *)mft__tensor_ptr(p);
    if (dst == b)
        mft__reorder_to_blocked_f32(pp, p->strides[0], p->strides[1], ps, bp, bn, bc1, B, N, C, S);
    else
        mft__reorder_from_blocked_f32(bp, bn, bc1, B, pp, p->strides[0], p->strides[1], ps, N, C,
                                      S);
    return true;
}

/* dst <- src, equal sizes, at least one blocked. */
static void blk_copy_same(mft_tensor *dst, const mft_tensor *src) {
    if (blk_copy_reorder(dst, src)) return;
    const mft_tensor *ops[2] = {dst, src};
    mft_status st = mft__blk_foreach("mft_copy_", 2, ops, blk_copy_piece, NULL);
    if (st == MFT_OK) return;
    if (st == MFT_ERR_UNSUPPORTED && dst->nblocks && src->nblocks) {
        /* two blockings: through a plain packed temporary */
        mft_tensor *tmp =
            mft__tensor_alloc("mft_copy_", src->ndim, src->sizes, src->dtype, MFT_CONTIGUOUS);
        if (tmp) {
            blk_copy_same(tmp, src);
            blk_copy_same(dst, tmp);
            mft_tensor_release(tmp);
            return;
        }
    }
    blk_copy_elements(dst, src); /* no pieces (or no memory for their headers) */
}

void mft__blk_copy(mft_tensor *dst, const mft_tensor *src) {
    if (dst->numel == 0) return;
    mft__scope_suspend();
    const bool same = src->ndim == dst->ndim &&
                      !memcmp(src->sizes, dst->sizes, sizeof(int64_t) * (size_t)dst->ndim);
    if (same) {
        blk_copy_same(dst, src);
    } else {
        /* a broadcast source: a blocked one becomes plain first, then it
         * is expanded to dst's sizes (a view) */
        mft_tensor *tmp = NULL, *ex = NULL;
        if (src->nblocks) {
            tmp = mft__tensor_alloc("mft_copy_", src->ndim, src->sizes, src->dtype,
                                    MFT_CONTIGUOUS);
            if (tmp) blk_copy_same(tmp, src);
        }
        const mft_tensor *s = src->nblocks ? tmp : src;
        if (s) ex = mft__view_expand("mft_copy_", s, dst->ndim, dst->sizes, NULL);
        if (ex) {
            if (dst->nblocks) blk_copy_same(dst, ex);
            else mft__copy_kernel(dst, ex);
        }
        mft_tensor_release(ex);
        mft_tensor_release(tmp);
    }
    mft__scope_resume();
}

typedef struct blk_fill_ctx {
    double value;
} blk_fill_ctx;

static void blk_fill_piece(void *ctx, mft_tensor *const *p) {
    mft__fill(p[0], ((const blk_fill_ctx *)ctx)->value);
}

void mft__blk_fill(mft_tensor *t, double value) {
    blk_fill_ctx c = {value};
    const mft_tensor *ops[1] = {t};
    if (mft__blk_foreach("mft_fill_", 1, ops, blk_fill_piece, &c) == MFT_OK) return;
    int64_t idx[MFT_MAX_DIMS] = {0};
    const int64_t es = (int64_t)mft__elem_size(t->dtype);
    for (int64_t e = 0; e < t->numel; e++) {
        mft__store(t->dtype, mft__tensor_ptr(t) + mft__blk_offset(t, idx) * es, value);
        for (int d = t->ndim - 1; d >= 0; d--) {
            if (++idx[d] < t->sizes[d]) break;
            idx[d] = 0;
        }
    }
}

/* ---------------------------------------------------------------- public */
/* A factory result laid out by l: the FACTORY row with l's format declared. */
static void blk_declare(mft_tensor *t, const char *op, const mft_layout *l) {
    if (!t) return;
    mft__decision d = mft__rule_decide(MFT__RULE_FACTORY, op, 0, NULL, mft__layout_format(l), 0);
    mft__rule_apply(t, &d);
}

bool mft_tensor_is_blocked(const mft_tensor *t) { return mft__is_blocked(t); }

mft_status mft_tensor_layout(const mft_tensor *t, mft_layout *out) {
    if (!t || !out) {
        mft__null_arg("mft_tensor_layout", !t ? "t" : "out");
        return MFT_ERR_NULL;
    }
    mft__layout_of(t, out);
    return MFT_OK;
}

mft_tensor *mft_empty_layout(const mft_layout *l, mft_dtype dtype) {
    const char *fn = "mft_empty_layout";
    if (!l) {
        mft__null_arg(fn, "layout");
        return NULL;
    }
    mft_tensor *t = mft__tensor_alloc_layout(fn, l, dtype);
    blk_declare(t, "empty_layout", l);
    return t;
}

mft_tensor *mft_from_blob_layout(void *data, size_t nbytes, const mft_layout *l,
                                 int64_t storage_offset, mft_dtype dtype,
                                 void (*deleter)(void *data, void *ctx), void *ctx) {
    const char *fn = "mft_from_blob_layout";
    if (!data || !l) {
        mft__set_error(MFT_ERR_NULL, "%s: argument '%s' is NULL", fn, !data ? "data" : "layout");
        return NULL;
    }
    if (mft__check_dtype(fn, dtype) != MFT_OK) return NULL;
    if (((uintptr_t)data) % mft__elem_size(dtype)) {
        mft__set_error(MFT_ERR_INVALID, "%s: data %p is not aligned to %zu bytes for %s", fn,
                       data, mft__elem_size(dtype), mft_dtype_name(dtype));
        return NULL;
    }
    mft_storage *s = mft__storage_wrap(fn, data, nbytes, NULL, NULL);
    if (!s) return NULL;
    mft_tensor *t = mft__tensor_new_layout(fn, s, storage_offset, l, dtype);
    if (t && t->nblocks) {
        mft_status st = mft_tensor_check_padding(t);
        if (st != MFT_OK) {
            mft__relabel_error(fn);
            mft_tensor_release(t);
            t = NULL;
        }
    }
    if (t) { /* the deleter is the caller's only after success */
        s->deleter = deleter;
        s->deleter_ctx = ctx;
        blk_declare(t, "from_blob_layout", l);
    }
    mft__storage_release(s);
    return t;
}

mft_status mft_tensor_check_padding(const mft_tensor *t) {
    const char *fn = "mft_tensor_check_padding";
    if (!t) {
        mft__null_arg(fn, "t");
        return MFT_ERR_NULL;
    }
    if (!t->nblocks || t->numel == 0) return MFT_OK;
    /* every lane of the padded grid outside the logical sizes */
    int64_t idx[MFT_MAX_DIMS] = {0}, pcount = 1;
    for (int d = 0; d < t->ndim; d++) pcount *= t->padded[d];
    const int64_t es = (int64_t)mft__elem_size(t->dtype);
    const unsigned char *base = (const unsigned char *)mft__tensor_ptr(t);
    for (int64_t e = 0; e < pcount; e++) {
        bool pad = false;
        for (int d = 0; d < t->ndim; d++) pad |= idx[d] >= t->sizes[d];
        if (pad) {
            const unsigned char *p = base + mft__blk_offset(t, idx) * es;
            for (int64_t b = 0; b < es; b++)
                if (p[b]) {
                    char a[MFT__DIMS_BUF], z[MFT__DIMS_BUF];
                    mft__set_error(MFT_ERR_INVALID,
                                   "%s: pad lane %s (padded sizes %s, logical sizes %s) holds %g, "
                                   "not zero",
                                   fn, mft__fmt_dims(a, sizeof a, t->ndim, idx),
                                   mft__fmt_dims(z, sizeof z, t->ndim, t->padded),
                                   mft__fmt_dims(z, sizeof z, t->ndim, t->sizes),
                                   mft__load(t->dtype, p));
                    return MFT_ERR_INVALID;
                }
        }
        for (int d = t->ndim - 1; d >= 0; d--) {
            if (++idx[d] < t->padded[d]) break;
            idx[d] = 0;
        }
    }
    return MFT_OK;
}

void mft__layout_packed_like(const mft_layout *l, mft_layout *out) {
    mft_layout r = *l;
    int order[MFT_MAX_DIMS]; /* slowest first */
    for (int d = 0; d < l->ndim; d++) order[d] = d;
    for (int i = 1; i < l->ndim; i++)
        for (int j = i; j > 0 && l->strides[order[j]] > l->strides[order[j - 1]]; j--) {
            int x = order[j];
            order[j] = order[j - 1];
            order[j - 1] = x;
        }
    int64_t acc = 1;
    for (int k = 0; k < l->nblocks; k++) acc *= l->block_size[k];
    for (int i = l->ndim - 1; i >= 0; i--) {
        const int d = order[i];
        r.strides[d] = acc;
        const int64_t outer = l->padded[d] / blk_dim_block(l, d);
        acc *= outer > 1 ? outer : 1;
    }
    *out = r;
}
