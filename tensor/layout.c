/* tensor/layout.c — the layout model of docs/spec.md §2-3 on raw (sizes, strides)
 * arrays: contiguity in both formats, density, PyTorch's channels-last stride
 * test, dim-order fitting, format orders, packed and inferred-dense strides,
 * and the cached-flag refresh + tag inference of a tensor header.
 * See Note [Soft memory-format tag] in internal.h. */
#include <string.h>
#include "internal.h"

/* Physical order, slowest first. CONTIGUOUS: 0,1,2,...; CHANNELS_LAST:
 * N, spatial dims..., C (rank 3: N,L,C; rank 4: N,H,W,C; rank 5: N,D,H,W,C). */
void mft__format_order(int ndim, mft_format fmt, int *order) {
    if (fmt == MFT_CHANNELS_LAST && ndim >= 3 && ndim <= 5) {
        order[0] = 0;
        for (int i = 2; i < ndim; i++) order[i - 1] = i;
        order[ndim - 1] = 1;
    } else {
        for (int i = 0; i < ndim; i++) order[i] = i;
    }
}

bool mft__packed_strides(int ndim, const int64_t *sizes, const int *order, int64_t *strides,
                         bool zero_sizes_count) {
    int64_t acc = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        int d = order[i];
        strides[d] = acc;
        int64_t s = sizes[d] > 1 || zero_sizes_count ? sizes[d] : 1;
        if (__builtin_mul_overflow(acc, s, &acc)) return false;
    }
    return true;
}

/* Packed strides of a named format, as PyTorch computes them: contiguous
 * strides treat a size-0 dim as 1, channels-last strides multiply the plain
 * sizes (so an empty channels-last tensor is channels-last contiguous). */
void mft__format_strides(int ndim, const int64_t *sizes, mft_format fmt, int64_t *strides) {
    int order[MFT_MAX_DIMS];
    mft__format_order(ndim, fmt, order);
    mft__packed_strides(ndim, sizes, order, strides, fmt == MFT_CHANNELS_LAST);
}

/* Walk dims fastest to slowest in `order` (given slowest first), skipping
 * size-1 dims: each stride must equal the product of the sizes walked. */
static bool packed_in_order(int ndim, const int64_t *sizes, const int64_t *strides,
                            const int *order) {
    int64_t expected = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        int d = order[i];
        if (sizes[d] == 1) continue;
        if (strides[d] != expected) return false;
        expected *= sizes[d];
    }
    return true;
}

bool mft__layout_is_contiguous(int ndim, const int64_t *sizes, const int64_t *strides,
                               int64_t numel) {
    if (numel == 0) return true;
    int order[MFT_MAX_DIMS];
    mft__format_order(ndim, MFT_CONTIGUOUS, order);
    return packed_in_order(ndim, sizes, strides, order);
}

bool mft__layout_is_cl_contiguous(int ndim, const int64_t *sizes, const int64_t *strides) {
    if (ndim < 3 || ndim > 5) return false;
    int order[MFT_MAX_DIMS];
    mft__format_order(ndim, MFT_CHANNELS_LAST, order);
    return packed_in_order(ndim, sizes, strides, order);
}

bool mft__layout_is_dense(int ndim, const int64_t *sizes, const int64_t *strides) {
    /* Dims of size >= 2 sorted by stride must be packed. Size-0 tensors were
     * handled by the caller through is_contiguous. */
    int perm[MFT_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < ndim; d++)
        if (sizes[d] >= 2) perm[n++] = d;
    for (int i = 1; i < n; i++) { /* insertion sort by stride, stable */
        int x = perm[i], j = i - 1;
        while (j >= 0 && strides[perm[j]] > strides[x]) {
            perm[j + 1] = perm[j];
            j--;
        }
        perm[j + 1] = x;
    }
    int64_t expected = 1;
    for (int i = 0; i < n; i++) {
        if (strides[perm[i]] != expected) return false;
        expected *= sizes[perm[i]];
    }
    return true;
}

/* PyTorch's channels-last stride order test (is_channels_last_strides_2d/3d),
 * extended to rank 3: walk C, then spatial dims fastest to slowest, then N. */
bool mft__layout_strides_like_cl(int ndim, const int64_t *sizes, const int64_t *strides) {
    if (ndim < 3 || ndim > 5) return false;
    if (strides[1] == 0) return false;
    int walk[MFT_MAX_DIMS], n = 0;
    walk[n++] = 1;
    for (int d = ndim - 1; d >= 2; d--) walk[n++] = d;
    walk[n++] = 0;
    int64_t min = 0;
    for (int i = 0; i < n; i++) {
        int d = walk[i];
        if (sizes[d] == 0) return false;
        if (strides[d] < min) return false;
        if (d == 0 && min == strides[1]) return false;
        min = strides[d];
        if (sizes[d] > 1) min *= sizes[d];
    }
    return true;
}

/* docs/spec.md §3: the strides' dim order fits a format when, ignoring size-1 and
 * stride-0 dims, strides never decrease walking the format fastest to
 * slowest. An empty tensor has no order and fits both. */
bool mft__layout_order_fits(int ndim, const int64_t *sizes, const int64_t *strides,
                            mft_format fmt) {
    if (fmt == MFT_CHANNELS_LAST && (ndim < 3 || ndim > 5)) return false;
    for (int d = 0; d < ndim; d++)
        if (sizes[d] == 0) return true;
    int order[MFT_MAX_DIMS];
    mft__format_order(ndim, fmt, order);
    int64_t prev = 0;
    for (int i = ndim - 1; i >= 0; i--) {
        int d = order[i];
        if (sizes[d] == 1 || strides[d] == 0) continue;
        if (strides[d] < prev) return false;
        prev = strides[d];
    }
    return true;
}

/* PyTorch's infer_dense_strides: the dim order the elementwise iterator
 * would choose for this one operand (mft__iter_reorder), packed. */
void mft__infer_dense_strides(int ndim, const int64_t *sizes, const int64_t *strides,
                              int64_t *out) {
    int perm[MFT_MAX_DIMS]; /* fastest first */
    mft__iter_reorder(1, ndim, sizes, strides, perm);
    int64_t acc = 1;
    for (int i = 0; i < ndim; i++) {
        out[perm[i]] = acc;
        acc *= sizes[perm[i]] > 1 ? sizes[perm[i]] : 1;
    }
}

/* Whether a blocked header's outer strides are the packed ones of its
 * one-block-on-C layout (nChw8c / nChw16c family) on every dim whose outer
 * extent is above 1: the cached answer of is_contiguous(NCHW8C / NCHW16C). */
static bool layout_blk_packed(const mft_tensor *t) {
    if (t->ndim < 3 || t->ndim > 5 || t->nblocks != 1 || t->block_dim[0] != 1 ||
        (t->block_size[0] != 8 && t->block_size[0] != 16))
        return false;
    mft_layout l;
    if (mft_layout_for_tag(t->ndim, t->sizes,
                           t->block_size[0] == 8 ? MFT_LAYOUT_NCHW8C : MFT_LAYOUT_NCHW16C,
                           &l) != MFT_OK)
        return false;
    for (int d = 0; d < t->ndim; d++) {
        const int64_t outer = d == 1 ? l.padded[1] / l.block_size[0] : l.padded[d];
        if (outer > 1 && t->strides[d] != l.strides[d]) return false;
    }
    return true;
}

void mft__tensor_refresh(mft_tensor *t) {
    if (t->nblocks) { /* Note [Blocked tensors]: no plain-layout flag */
        t->flags = MFT__F_BLOCKED | (layout_blk_packed(t) ? MFT__F_BLK_PACKED : 0u);
        return;
    }
    unsigned f = 0;
    const int n = t->ndim;
    if (mft__layout_is_contiguous(n, t->sizes, t->strides, t->numel)) f |= MFT__F_CONTIG;
    if (mft__layout_is_cl_contiguous(n, t->sizes, t->strides)) f |= MFT__F_CL_CONTIG;
    if ((f & (MFT__F_CONTIG | MFT__F_CL_CONTIG)) ||
        mft__layout_is_dense(n, t->sizes, t->strides))
        f |= MFT__F_DENSE;
    if (mft__layout_strides_like_cl(n, t->sizes, t->strides)) f |= MFT__F_CL_STRIDES;
    if (mft__layout_order_fits(n, t->sizes, t->strides, MFT_CONTIGUOUS)) f |= MFT__F_FITS_CONTIG;
    if (mft__layout_order_fits(n, t->sizes, t->strides, MFT_CHANNELS_LAST)) f |= MFT__F_FITS_CL;
    t->flags = f;
}

void mft__tensor_set_tag_from(mft_tensor *t, mft_format source_tag) {
    if (t->nblocks) { /* the descriptor decides (Note [Blocked tensors]) */
        mft_layout l;
        mft__layout_of(t, &l);
        t->tag = mft__layout_format(&l);
        t->origin = MFT_INFERRED;
        return;
    }
    bool c = t->flags & MFT__F_FITS_CONTIG, cl = t->flags & MFT__F_FITS_CL;
    if (c && cl) {
        t->tag = source_tag == MFT_CHANNELS_LAST ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
        t->origin = MFT_INHERITED;
    } else {
        t->tag = cl ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
        t->origin = MFT_INFERRED;
    }
    if (t->ndim < 3 || t->ndim > 5) t->tag = MFT_CONTIGUOUS;
}

void mft__tensor_declare(mft_tensor *t, mft_format fmt) {
    if (t->nblocks) { /* a blocked header is what its descriptor is */
        mft_layout l;
        mft__layout_of(t, &l);
        fmt = mft__layout_format(&l);
    }
    t->tag = fmt;
    t->origin = MFT_DECLARED;
}

/* ---------------------------------------------------------------- public */
bool mft_tensor_is_contiguous(const mft_tensor *t, mft_format fmt) {
    if (!t) return false;
    if (fmt == MFT_CONTIGUOUS) return t->flags & MFT__F_CONTIG;
    if (fmt == MFT_CHANNELS_LAST) return t->flags & MFT__F_CL_CONTIG;
    /* packed nChw8c / nChw16c: the flag mft__tensor_refresh cached */
    if (fmt == MFT_NCHW8C || fmt == MFT_NCHW16C)
        return t->nblocks && t->tag == fmt && (t->flags & MFT__F_BLK_PACKED);
    return false;
}
bool mft_tensor_is_dense(const mft_tensor *t) { return t && (t->flags & MFT__F_DENSE); }
bool mft_tensor_strides_like_channels_last(const mft_tensor *t) {
    return t && (t->flags & MFT__F_CL_STRIDES);
}
mft_format mft_tensor_suggest_format(const mft_tensor *t) {
    return mft_tensor_strides_like_channels_last(t) ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
}
mft_format mft_tensor_format(const mft_tensor *t) { return t ? t->tag : MFT_CONTIGUOUS; }
mft_origin mft_tensor_format_origin(const mft_tensor *t) { return t ? t->origin : MFT_INFERRED; }
bool mft_tensor_order_fits(const mft_tensor *t, mft_format fmt) {
    if (!t) return false;
    if (fmt == MFT_CONTIGUOUS) return t->flags & MFT__F_FITS_CONTIG;
    if (fmt == MFT_CHANNELS_LAST) return t->flags & MFT__F_FITS_CL;
    return false;
}
