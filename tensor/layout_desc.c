/* tensor/layout_desc.c — the layout descriptor of mft/layout.h (docs/spec.md
 * §7): validation, the packed descriptor of a dim order plus inner blocks, the
 * element offset, the storage size, the slot decomposition (element / pad /
 * gap), and the three vocabularies that name descriptors: oneDNN letter tags,
 * Ascend format names and XLA layout strings.
 *
 * Invariant: every descriptor a function here writes passes desc_check (so its
 * storage size, and every offset inside it, fits int64); a failing call
 * leaves *out untouched. Tensors do not carry descriptors yet. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include "internal.h"

/* ------------------------------------------------------------------ arithmetic */
static bool desc_mul(int64_t a, int64_t b, int64_t *r) {
    if (a < 0 || b < 0 || (a != 0 && b > INT64_MAX / a)) return false;
    *r = a * b;
    return true;
}

static bool desc_add(int64_t a, int64_t b, int64_t *r) {
    if (a < 0 || b < 0 || a > INT64_MAX - b) return false;
    *r = a + b;
    return true;
}

/* Product of the block sizes on dim d (valid blocks assumed). */
static int64_t desc_dim_block(const mft_layout *l, int d) {
    int64_t b = 1;
    for (int k = 0; k < l->nblocks; k++)
        if (l->block_dim[k] == d) b *= l->block_size[k];
    return b;
}

static bool desc_has_block(const mft_layout *l, int d) {
    for (int k = 0; k < l->nblocks; k++)
        if (l->block_dim[k] == d) return true;
    return false;
}

/* Outer extent padded[d] / B_d. */
static int64_t desc_outer_extent(const mft_layout *l, int d) {
    return l->padded[d] / desc_dim_block(l, d);
}

/* Product of all block sizes (the inner tile). */
static int64_t desc_inner(const mft_layout *l) {
    int64_t p = 1;
    for (int k = 0; k < l->nblocks; k++) p *= l->block_size[k];
    return p;
}

static bool desc_any_empty(const mft_layout *l) {
    for (int d = 0; d < l->ndim; d++)
        if (l->sizes[d] == 0) return true;
    return false;
}

/* Storage size without validation of sizes (blocks and strides valid);
 * false on overflow. */
static bool desc_numel(const mft_layout *l, int64_t *n) {
    if (desc_any_empty(l)) {
        *n = 0;
        return true;
    }
    int64_t acc = desc_inner(l);
    for (int d = 0; d < l->ndim; d++) {
        int64_t t;
        if (!desc_mul(desc_outer_extent(l, d) - 1, l->strides[d], &t) || !desc_add(acc, t, &acc))
            return false;
    }
    *n = acc;
    return true;
}

/* ------------------------------------------------------------------ validation */
static mft_status desc_check(const char *fn, const mft_layout *l) {
    char b1[MFT__DIMS_BUF], b2[MFT__DIMS_BUF];
    if (!l) {
        mft__set_error(MFT_ERR_NULL, "%s: argument 'layout' is NULL", fn);
        return MFT_ERR_NULL;
    }
    if (l->ndim < 0 || l->ndim > MFT_MAX_DIMS) {
        mft__set_error(MFT_ERR_RANK, "%s: rank %d outside 0..%d", fn, l->ndim, MFT_MAX_DIMS);
        return MFT_ERR_RANK;
    }
    if (l->nblocks < 0 || l->nblocks > MFT_MAX_BLOCKS) {
        mft__set_error(MFT_ERR_INVALID, "%s: %d inner blocks, at most %d", fn, l->nblocks,
                       MFT_MAX_BLOCKS);
        return MFT_ERR_INVALID;
    }
    int64_t inner = 1;
    for (int k = 0; k < l->nblocks; k++) {
        if (l->block_dim[k] < 0 || l->block_dim[k] >= l->ndim) {
            mft__set_error(MFT_ERR_DIM, "%s: block %d is on dim %d of a rank-%d layout", fn, k,
                           l->block_dim[k], l->ndim);
            return MFT_ERR_DIM;
        }
        if (l->block_size[k] < 1) {
            mft__set_error(MFT_ERR_INVALID, "%s: block %d has size %lld (must be >= 1)", fn, k,
                           (long long)l->block_size[k]);
            return MFT_ERR_INVALID;
        }
        if (!desc_mul(inner, l->block_size[k], &inner)) {
            mft__set_error(MFT_ERR_OVERFLOW, "%s: the product of the block sizes overflows int64",
                           fn);
            return MFT_ERR_OVERFLOW;
        }
    }
    for (int d = 0; d < l->ndim; d++) {
        if (l->sizes[d] < 0 || l->strides[d] < 0) {
            mft__set_error(MFT_ERR_SHAPE, "%s: sizes %s strides %s: negative entry at dim %d", fn,
                           mft__fmt_dims(b1, sizeof b1, l->ndim, l->sizes),
                           mft__fmt_dims(b2, sizeof b2, l->ndim, l->strides), d);
            return MFT_ERR_SHAPE;
        }
        int64_t bd = desc_dim_block(l, d);
        if (l->padded[d] < l->sizes[d] || l->padded[d] % bd != 0) {
            mft__set_error(MFT_ERR_SHAPE,
                           "%s: padded size %lld of dim %d is not a multiple of its blocks "
                           "(%lld) at least the size %lld",
                           fn, (long long)l->padded[d], d, (long long)bd, (long long)l->sizes[d]);
            return MFT_ERR_SHAPE;
        }
    }
    int64_t n;
    if (!desc_numel(l, &n)) {
        mft__set_error(MFT_ERR_OVERFLOW, "%s: storage size of sizes %s padded %s strides %s "
                       "overflows int64", fn, mft__fmt_dims(b1, sizeof b1, l->ndim, l->sizes),
                       mft__fmt_dims(b2, sizeof b2, l->ndim, l->padded),
                       mft__fmt_dims((char[MFT__DIMS_BUF]){0}, MFT__DIMS_BUF, l->ndim, l->strides));
        return MFT_ERR_OVERFLOW;
    }
    return MFT_OK;
}

mft_status mft_layout_check(const mft_layout *l) { return desc_check("mft_layout_check", l); }

/* The packed descriptor of `order` (outer dims, slowest first) and the inner
 * blocks: padded = sizes rounded up to B_d; outer strides packed from the
 * inner tile outwards (a size-0 dim counts as 1, as packed plain strides). */
static mft_status desc_packed(const char *fn, int ndim, const int64_t *sizes, const int *order,
                              int nblocks, const int *bdim, const int64_t *bsize,
                              mft_layout *out) {
    mft_layout l;
    memset(&l, 0, sizeof l);
    l.ndim = ndim;
    l.nblocks = nblocks;
    for (int k = 0; k < nblocks && k < MFT_MAX_BLOCKS; k++) {
        l.block_dim[k] = bdim[k];
        l.block_size[k] = bsize[k];
    }
    for (int d = 0; d < ndim && d < MFT_MAX_DIMS; d++) l.sizes[d] = l.padded[d] = sizes[d];
    /* rank, block dims and sizes first, with padded = sizes for now */
    mft_status st = MFT_OK;
    if (ndim < 0 || ndim > MFT_MAX_DIMS || nblocks < 0 || nblocks > MFT_MAX_BLOCKS) {
        st = desc_check(fn, &l);
        return st;
    }
    for (int k = 0; k < nblocks; k++)
        if (bdim[k] < 0 || bdim[k] >= ndim || bsize[k] < 1) return desc_check(fn, &l);
    int64_t inner = 1;
    for (int k = 0; k < nblocks; k++)
        if (!desc_mul(inner, bsize[k], &inner)) return desc_check(fn, &l);
    for (int d = 0; d < ndim; d++) {
        if (sizes[d] < 0) {
            char b1[MFT__DIMS_BUF];
            mft__set_error(MFT_ERR_SHAPE, "%s: sizes %s: negative size at dim %d", fn,
                           mft__fmt_dims(b1, sizeof b1, ndim, sizes), d);
            return MFT_ERR_SHAPE;
        }
        int64_t bd = desc_dim_block(&l, d), up;
        if (!desc_add(sizes[d], bd - 1, &up)) {
            mft__set_error(MFT_ERR_OVERFLOW, "%s: size %lld of dim %d padded to blocks of %lld "
                           "overflows int64", fn, (long long)sizes[d], d, (long long)bd);
            return MFT_ERR_OVERFLOW;
        }
        l.padded[d] = up / bd * bd;
    }
    int64_t run = inner;
    bool over = false;
    for (int j = ndim - 1; j >= 0; j--) {
        int d = order[j];
        l.strides[d] = over ? 0 : run;
        int64_t ext = desc_outer_extent(&l, d);
        if (!desc_mul(run, ext > 0 ? ext : 1, &run)) over = true;
    }
    if (over) {
        char b1[MFT__DIMS_BUF];
        mft__set_error(MFT_ERR_OVERFLOW, "%s: packed storage of sizes %s overflows int64", fn,
                       mft__fmt_dims(b1, sizeof b1, ndim, sizes));
        return MFT_ERR_OVERFLOW;
    }
    st = desc_check(fn, &l);
    if (st == MFT_OK) *out = l;
    return st;
}

/* ------------------------------------------------------------------ constructors */
mft_status mft_layout_plain(int ndim, const int64_t *sizes, const int64_t *strides,
                            mft_layout *out) {
    const char *fn = "mft_layout_plain";
    if (!out || (ndim > 0 && (!sizes || !strides))) {
        mft__set_error(MFT_ERR_NULL, "%s: argument '%s' is NULL", fn,
                       !out ? "out" : !sizes ? "sizes" : "strides");
        return MFT_ERR_NULL;
    }
    if (ndim < 0 || ndim > MFT_MAX_DIMS) {
        mft__set_error(MFT_ERR_RANK, "%s: rank %d outside 0..%d", fn, ndim, MFT_MAX_DIMS);
        return MFT_ERR_RANK;
    }
    mft_layout l;
    memset(&l, 0, sizeof l);
    l.ndim = ndim;
    for (int d = 0; d < ndim; d++) {
        l.sizes[d] = l.padded[d] = sizes[d];
        l.strides[d] = strides[d];
    }
    mft_status st = desc_check(fn, &l);
    if (st == MFT_OK) *out = l;
    return st;
}

static const char *desc_tag_name(mft_layout_tag tag) {
    switch (tag) {
    case MFT_LAYOUT_NCHW: return "NCHW";
    case MFT_LAYOUT_NHWC: return "NHWC";
    case MFT_LAYOUT_NCHW8C: return "NCHW8C";
    case MFT_LAYOUT_NCHW16C: return "NCHW16C";
    default: return "invalid";
    }
}

mft_status mft_layout_for_tag(int ndim, const int64_t *sizes, mft_layout_tag tag,
                              mft_layout *out) {
    const char *fn = "mft_layout_for_tag";
    if (!out || (ndim > 0 && !sizes)) {
        mft__set_error(MFT_ERR_NULL, "%s: argument '%s' is NULL", fn, !out ? "out" : "sizes");
        return MFT_ERR_NULL;
    }
    if ((int)tag < 0 || tag >= MFT_LAYOUT_TAG_COUNT) {
        mft__set_error(MFT_ERR_INVALID, "%s: unknown layout tag %d", fn, (int)tag);
        return MFT_ERR_INVALID;
    }
    bool any_rank = tag == MFT_LAYOUT_NCHW;
    if (any_rank ? (ndim < 0 || ndim > MFT_MAX_DIMS) : (ndim < 3 || ndim > 5)) {
        mft__set_error(MFT_ERR_RANK, "%s: tag %s needs rank %s, got %d", fn, desc_tag_name(tag),
                       any_rank ? "0-8" : "3-5", ndim);
        return MFT_ERR_RANK;
    }
    int order[MFT_MAX_DIMS];
    for (int d = 0; d < ndim; d++) order[d] = d;
    if (tag == MFT_LAYOUT_NHWC) {
        for (int d = 1; d < ndim - 1; d++) order[d] = d + 1;
        order[ndim - 1] = 1;
    }
    int bdim[1] = {1};
    int64_t bsize[1] = {tag == MFT_LAYOUT_NCHW8C ? 8 : 16};
    int nb = (tag == MFT_LAYOUT_NCHW8C || tag == MFT_LAYOUT_NCHW16C) ? 1 : 0;
    return desc_packed(fn, ndim, sizes, order, nb, bdim, bsize, out);
}

bool mft_layout_equal(const mft_layout *a, const mft_layout *b) {
    if (!a || !b || a->ndim != b->ndim || a->nblocks != b->nblocks) return false;
    if (a->ndim < 0 || a->ndim > MFT_MAX_DIMS || a->nblocks < 0 || a->nblocks > MFT_MAX_BLOCKS)
        return false;
    for (int k = 0; k < a->nblocks; k++)
        if (a->block_dim[k] != b->block_dim[k] || a->block_size[k] != b->block_size[k])
            return false;
    for (int d = 0; d < a->ndim; d++) {
        if (a->sizes[d] != b->sizes[d] || a->padded[d] != b->padded[d]) return false;
        int64_t bd = 1;
        for (int k = 0; k < a->nblocks; k++)
            if (a->block_dim[k] == d && a->block_size[k] > 0) bd *= a->block_size[k];
        if (a->padded[d] / bd > 1 && a->strides[d] != b->strides[d]) return false;
    }
    return true;
}

/* ------------------------------------------------------------------ offsets */
/* Pitch P_k and same-dim divisor R_k of every block. */
static void desc_pitches(const mft_layout *l, int64_t *pitch, int64_t *rdiv) {
    int64_t p = 1;
    for (int k = l->nblocks - 1; k >= 0; k--) {
        pitch[k] = p;
        p *= l->block_size[k];
        int64_t r = 1;
        for (int j = k + 1; j < l->nblocks; j++)
            if (l->block_dim[j] == l->block_dim[k]) r *= l->block_size[j];
        rdiv[k] = r;
    }
}

mft_status mft_layout_offset(const mft_layout *l, const int64_t *index, int64_t *off) {
    const char *fn = "mft_layout_offset";
    mft_status st = desc_check(fn, l);
    if (st != MFT_OK) return st;
    if (!off || (l->ndim > 0 && !index)) {
        mft__set_error(MFT_ERR_NULL, "%s: argument '%s' is NULL", fn, !off ? "off" : "index");
        return MFT_ERR_NULL;
    }
    for (int d = 0; d < l->ndim; d++) {
        if (index[d] < 0 || index[d] >= l->sizes[d]) {
            char b1[MFT__DIMS_BUF], b2[MFT__DIMS_BUF];
            mft__set_error(MFT_ERR_DIM, "%s: index %s outside sizes %s at dim %d", fn,
                           mft__fmt_dims(b1, sizeof b1, l->ndim, index),
                           mft__fmt_dims(b2, sizeof b2, l->ndim, l->sizes), d);
            return MFT_ERR_DIM;
        }
    }
    int64_t pitch[MFT_MAX_BLOCKS], rdiv[MFT_MAX_BLOCKS];
    desc_pitches(l, pitch, rdiv);
    /* bounded by the storage size, which desc_check proved fits int64 */
    int64_t o = 0;
    for (int d = 0; d < l->ndim; d++) o += index[d] / desc_dim_block(l, d) * l->strides[d];
    for (int k = 0; k < l->nblocks; k++)
        o += index[l->block_dim[k]] / rdiv[k] % l->block_size[k] * pitch[k];
    *off = o;
    return MFT_OK;
}

mft_status mft_layout_storage_numel(const mft_layout *l, int64_t *numel) {
    const char *fn = "mft_layout_storage_numel";
    mft_status st = desc_check(fn, l);
    if (st != MFT_OK) return st;
    if (!numel) {
        mft__set_error(MFT_ERR_NULL, "%s: argument 'numel' is NULL", fn);
        return MFT_ERR_NULL;
    }
    desc_numel(l, numel);
    return MFT_OK;
}

mft_status mft_layout_slot(const mft_layout *l, int64_t slot, int64_t *index_out,
                           mft_layout_slot_kind *kind) {
    const char *fn = "mft_layout_slot";
    mft_status st = desc_check(fn, l);
    if (st != MFT_OK) return st;
    if (!kind) {
        mft__set_error(MFT_ERR_NULL, "%s: argument 'kind' is NULL", fn);
        return MFT_ERR_NULL;
    }
    int64_t n;
    desc_numel(l, &n);
    if (slot < 0 || slot >= n) {
        mft__set_error(MFT_ERR_DIM, "%s: slot %lld outside the storage of %lld elements", fn,
                       (long long)slot, (long long)n);
        return MFT_ERR_DIM;
    }
    /* dims with outer extent > 1, by stride descending; each stride must
     * exceed the span of all smaller ones (then the decomposition is unique) */
    int dims[MFT_MAX_DIMS], nd = 0;
    for (int d = 0; d < l->ndim; d++)
        if (desc_outer_extent(l, d) > 1) dims[nd++] = d;
    for (int i = 1; i < nd; i++)
        for (int j = i; j > 0 && l->strides[dims[j]] > l->strides[dims[j - 1]]; j--) {
            int t = dims[j];
            dims[j] = dims[j - 1];
            dims[j - 1] = t;
        }
    int64_t span = desc_inner(l);
    for (int i = nd - 1; i >= 0; i--) {
        int d = dims[i];
        if (l->strides[d] < span) {
            char b1[MFT__DIMS_BUF];
            mft__set_error(MFT_ERR_UNSUPPORTED, "%s: strides %s overlap at dim %d (stride %lld "
                           "below the span %lld of the faster dims): a slot has no single "
                           "element", fn, mft__fmt_dims(b1, sizeof b1, l->ndim, l->strides), d,
                           (long long)l->strides[d], (long long)span);
            return MFT_ERR_UNSUPPORTED;
        }
        span += (desc_outer_extent(l, d) - 1) * l->strides[d];
    }
    int64_t idx[MFT_MAX_DIMS] = {0}, rem = slot;
    *kind = MFT_SLOT_ELEMENT;
    for (int i = 0; i < nd; i++) {
        int d = dims[i];
        int64_t q = rem / l->strides[d];
        if (q >= desc_outer_extent(l, d)) {
            *kind = MFT_SLOT_GAP;
            return MFT_OK;
        }
        idx[d] = q * desc_dim_block(l, d);
        rem -= q * l->strides[d];
    }
    if (rem >= desc_inner(l)) {
        *kind = MFT_SLOT_GAP;
        return MFT_OK;
    }
    int64_t pitch[MFT_MAX_BLOCKS], rdiv[MFT_MAX_BLOCKS];
    desc_pitches(l, pitch, rdiv);
    for (int k = 0; k < l->nblocks; k++)
        idx[l->block_dim[k]] += rem / pitch[k] % l->block_size[k] * rdiv[k];
    for (int d = 0; d < l->ndim; d++)
        if (idx[d] >= l->sizes[d]) *kind = MFT_SLOT_PAD;
    if (*kind == MFT_SLOT_ELEMENT && index_out)
        for (int d = 0; d < l->ndim; d++) index_out[d] = idx[d];
    return MFT_OK;
}

mft_status mft_layout_is_pad(const mft_layout *l, int64_t slot, bool *is_pad) {
    if (!is_pad) {
        mft__set_error(MFT_ERR_NULL, "mft_layout_is_pad: argument 'is_pad' is NULL");
        return MFT_ERR_NULL;
    }
    mft_layout_slot_kind k;
    mft_status st = mft_layout_slot(l, slot, NULL, &k);
    if (st != MFT_OK) return mft__relabel_error("mft_layout_is_pad");
    *is_pad = k == MFT_SLOT_PAD;
    return MFT_OK;
}

/* ------------------------------------------------------------------ printing */
/* The outer order of a descriptor, slowest first: strides descending, ties
 * to the dim with outer extent above 1, then to the lower dim. Returns true
 * when the descriptor equals the packed one of that order (no gaps). */
static bool desc_outer_order(const mft_layout *l, int *order) {
    for (int d = 0; d < l->ndim; d++) order[d] = d;
    for (int i = 1; i < l->ndim; i++)
        for (int j = i; j > 0; j--) {
            int a = order[j - 1], b = order[j];
            bool ea = desc_outer_extent(l, a) > 1, eb = desc_outer_extent(l, b) > 1;
            bool swap = l->strides[b] > l->strides[a] ||
                        (l->strides[b] == l->strides[a] && eb && !ea);
            if (!swap) break;
            order[j - 1] = b;
            order[j] = a;
        }
    mft_layout p;
    mft_status saved = mft_last_error();
    char msg[512];
    snprintf(msg, sizeof msg, "%s", mft_last_error_message());
    bool ok = desc_packed("", l->ndim, l->sizes, order, l->nblocks, l->block_dim, l->block_size,
                          &p) == MFT_OK && mft_layout_equal(&p, l);
    if (!ok) { /* restore the caller's error state: this was a probe */
        if (saved == MFT_OK) mft_clear_error();
        else mft__set_error(saved, "%s", msg);
    }
    return ok;
}

/* snprintf-style output of a finished string. */
static int desc_emit(const char *s, char *buf, size_t len) {
    size_t n = strlen(s);
    if (buf && len > 0) {
        size_t c = n < len - 1 ? n : len - 1;
        memcpy(buf, s, c);
        buf[c] = '\0';
    }
    return (int)n;
}

static bool desc_buf_ok(const char *fn, const char *buf, size_t len) {
    if (!buf && len > 0) {
        mft__set_error(MFT_ERR_NULL, "%s: argument 'buf' is NULL with len %zu", fn, len);
        return false;
    }
    return true;
}

/* ------------------------------------------------------------------ oneDNN */
/* Parses the letter grammar (s: letters a.. for dims; orig: the user's text
 * for messages, same positions). */
static mft_status desc_parse_letters(const char *fn, const char *orig, const char *s, int ndim,
                                     const int64_t *sizes, mft_layout *out) {
    int order[MFT_MAX_DIMS], nouter = 0, bdim[MFT_MAX_BLOCKS], nb = 0;
    int64_t bsize[MFT_MAX_BLOCKS];
    bool seen[26] = {false}, upper[26] = {false}, blocked[26] = {false};
    size_t i = 0;
#define DESC_FAIL(pos, ...)                                                                  \
    do {                                                                                     \
        char why_[200];                                                                      \
        snprintf(why_, sizeof why_, __VA_ARGS__);                                            \
        mft__set_error(MFT_ERR_INVALID, "%s: tag '%s' position %zu: %s", fn, orig,           \
                       (size_t)(pos), why_);                                                 \
        return MFT_ERR_INVALID;                                                              \
    } while (0)
    for (; isalpha((unsigned char)s[i]); i++) {
        int d = tolower((unsigned char)s[i]) - 'a';
        if (d >= ndim) DESC_FAIL(i, "letter '%c' names dim %d of a rank-%d layout", orig[i], d, ndim);
        if (seen[d]) DESC_FAIL(i, "dim %d ('%c') appears twice in the outer part", d, orig[i]);
        seen[d] = true;
        upper[d] = isupper((unsigned char)s[i]) != 0;
        order[nouter++] = d;
    }
    if (nouter != ndim)
        DESC_FAIL(i, "the outer part names %d dims, the layout has rank %d", nouter, ndim);
    while (s[i]) {
        size_t start = i;
        if (!isdigit((unsigned char)s[i]))
            DESC_FAIL(i, "expected a block size (digits) or the end, found '%c'", orig[i]);
        int64_t v = 0;
        for (; isdigit((unsigned char)s[i]); i++) {
            if (v > (INT64_MAX - 9) / 10) DESC_FAIL(start, "block size overflows int64");
            v = v * 10 + (s[i] - '0');
        }
        if (v < 1) DESC_FAIL(start, "block size %lld (must be >= 1)", (long long)v);
        if (!isalpha((unsigned char)s[i]))
            DESC_FAIL(i, "expected the lowercase letter of the blocked dim after %lld",
                      (long long)v);
        if (isupper((unsigned char)s[i]))
            DESC_FAIL(i, "inner block letter '%c' must be lowercase", orig[i]);
        int d = s[i] - 'a';
        if (d >= ndim)
            DESC_FAIL(i, "block on dim %d ('%c'), missing from a rank-%d layout", d, orig[i], ndim);
        if (nb == MFT_MAX_BLOCKS) DESC_FAIL(start, "more than %d inner blocks", MFT_MAX_BLOCKS);
        if (!upper[d])
            DESC_FAIL(i, "block on dim %d ('%c') written lowercase in the outer part", d, orig[i]);
        blocked[d] = true;
        bdim[nb] = d;
        bsize[nb++] = v;
        i++;
    }
    for (int d = 0; d < ndim; d++)
        if (upper[d] && !blocked[d]) {
            size_t pos = 0;
            while (tolower((unsigned char)s[pos]) - 'a' != d) pos++;
            DESC_FAIL(pos, "dim %d ('%c') is uppercase but has no inner block", d, orig[pos]);
        }
#undef DESC_FAIL
    return desc_packed(fn, ndim, sizes, order, nb, bdim, bsize, out);
}

/* Role letters of oneDNN's named tags, in logical dim order. */
static const char DESC_DATA_ROLES[] = "ncdhw";
static const char DESC_WEIGHT_ROLES[] = "goidhw";

mft_status mft_layout_from_onednn(int ndim, const int64_t *sizes, const char *tag,
                                  mft_layout *out) {
    const char *fn = "mft_layout_from_onednn";
    if (!tag || !out || (ndim > 0 && !sizes)) {
        mft__set_error(MFT_ERR_NULL, "%s: argument '%s' is NULL", fn,
                       !tag ? "tag" : !out ? "out" : "sizes");
        return MFT_ERR_NULL;
    }
    if (ndim < 0 || ndim > MFT_MAX_DIMS) {
        mft__set_error(MFT_ERR_RANK, "%s: rank %d outside 0..%d", fn, ndim, MFT_MAX_DIMS);
        return MFT_ERR_RANK;
    }
    size_t n = strlen(tag);
    if (n > 64) {
        mft__set_error(MFT_ERR_INVALID, "%s: tag '%.64s...' longer than 64 characters", fn, tag);
        return MFT_ERR_INVALID;
    }
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)tag[i])) {
            mft__set_error(MFT_ERR_INVALID, "%s: tag '%s' position %zu: unexpected character "
                           "'%c'", fn, tag, i, tag[i]);
            return MFT_ERR_INVALID;
        }
    char s[65];
    memcpy(s, tag, n + 1);
    if (strpbrk(tag, "nNoOgGiIwWxX")) {
        /* a named alias: map role letters to a, b, ... in logical order */
        if (!strcmp(tag, "x")) {
            s[0] = 'a';
        } else {
            const char *roles = strpbrk(tag, "oOgGiI") ? DESC_WEIGHT_ROLES : DESC_DATA_ROLES;
            bool present[8] = {false};
            for (size_t i = 0; i < n && !isdigit((unsigned char)tag[i]); i++) {
                const char *r = strchr(roles, tolower((unsigned char)tag[i]));
                if (!r) {
                    mft__set_error(MFT_ERR_INVALID, "%s: tag '%s' position %zu: '%c' is not a "
                                   "%s letter (%s)", fn, tag, i, tag[i],
                                   roles == DESC_DATA_ROLES ? "data" : "weights", roles);
                    return MFT_ERR_INVALID;
                }
                present[r - roles] = true;
            }
            for (size_t i = 0; i < n; i++) {
                if (!isalpha((unsigned char)tag[i])) continue;
                const char *r = strchr(roles, tolower((unsigned char)tag[i]));
                int idx = 0;
                if (r && present[r - roles]) {
                    for (const char *q = roles; q < r; q++) idx += present[q - roles];
                } else {
                    idx = 25; /* a block on a role the outer part lacks: refused below */
                }
                s[i] = (char)(isupper((unsigned char)tag[i]) ? 'A' + idx : 'a' + idx);
            }
        }
    }
    return desc_parse_letters(fn, tag, s, ndim, sizes, out);
}

int mft_layout_to_onednn(const mft_layout *l, char *buf, size_t len) {
    const char *fn = "mft_layout_to_onednn";
    if (desc_check(fn, l) != MFT_OK || !desc_buf_ok(fn, buf, len)) return -1;
    int order[MFT_MAX_DIMS];
    if (!desc_outer_order(l, order)) {
        char b1[MFT__DIMS_BUF];
        mft__set_error(MFT_ERR_UNSUPPORTED, "%s: strides %s are not packed in any dim order: no "
                       "oneDNN tag describes them", fn,
                       mft__fmt_dims(b1, sizeof b1, l->ndim, l->strides));
        return -1;
    }
    char s[160];
    size_t p = 0;
    for (int j = 0; j < l->ndim; j++) {
        int d = order[j];
        s[p++] = (char)(desc_has_block(l, d) ? 'A' + d : 'a' + d);
    }
    for (int k = 0; k < l->nblocks; k++)
        p += (size_t)snprintf(s + p, sizeof s - p, "%lld%c", (long long)l->block_size[k],
                              'a' + l->block_dim[k]);
    s[p] = '\0';
    return desc_emit(s, buf, len);
}

/* ------------------------------------------------------------------ Ascend */
static const char *const DESC_ASCEND[] = {"NC1HWC0", "NDC1HWC0", "FRACTAL_Z", "FRACTAL_NZ"};
#define DESC_NASCEND 4

/* Builds Ascend format f (index into DESC_ASCEND) without argument checks
 * beyond rank; fn names the caller. */
static mft_status desc_ascend(const char *fn, int f, int ndim, const int64_t *sizes,
                              size_t elem_bytes, mft_layout *out) {
    static const int need[DESC_NASCEND] = {4, 5, 4, 2};
    int64_t c0 = elem_bytes == 1 ? 32 : 16, n0 = 16;
    int order[MFT_MAX_DIMS], bdim[2];
    int64_t bsize[2];
    if (f == 3 ? (ndim < 2 || ndim > MFT_MAX_DIMS) : ndim != need[f]) {
        mft__set_error(MFT_ERR_RANK, "%s: %s needs rank %s%d, got %d", fn, DESC_ASCEND[f],
                       f == 3 ? ">= " : "", need[f], ndim);
        return MFT_ERR_RANK;
    }
    switch (f) {
    case 0: /* (N,C,H,W): N, C1, H, W, C0 */
        for (int d = 0; d < 4; d++) order[d] = d;
        bdim[0] = 1;
        bsize[0] = c0;
        return desc_packed(fn, ndim, sizes, order, 1, bdim, bsize, out);
    case 1: /* (N,C,D,H,W): N, D, C1, H, W, C0 */
        order[0] = 0, order[1] = 2, order[2] = 1, order[3] = 3, order[4] = 4;
        bdim[0] = 1;
        bsize[0] = c0;
        return desc_packed(fn, ndim, sizes, order, 1, bdim, bsize, out);
    case 2: /* (K,C,R,S): C1, R, S, K1, N0 (on K), C0 (on C) */
        order[0] = 1, order[1] = 2, order[2] = 3, order[3] = 0;
        bdim[0] = 0, bsize[0] = n0;
        bdim[1] = 1, bsize[1] = c0;
        return desc_packed(fn, ndim, sizes, order, 2, bdim, bsize, out);
    default: /* (..., M, N): ..., N1, M1, M0 = 16 (on M), N0 = 32 B / elem (on N) */
        for (int d = 0; d < ndim - 2; d++) order[d] = d;
        order[ndim - 2] = ndim - 1;
        order[ndim - 1] = ndim - 2;
        bdim[0] = ndim - 2, bsize[0] = 16;
        bdim[1] = ndim - 1, bsize[1] = 32 / (int64_t)elem_bytes;
        return desc_packed(fn, ndim, sizes, order, 2, bdim, bsize, out);
    }
}

static bool desc_elem_ok(const char *fn, size_t elem_bytes) {
    if (elem_bytes == 1 || elem_bytes == 2 || elem_bytes == 4 || elem_bytes == 8) return true;
    mft__set_error(MFT_ERR_INVALID, "%s: element size %zu bytes (must be 1, 2, 4 or 8)", fn,
                   elem_bytes);
    return false;
}

mft_status mft_layout_from_ascend(int ndim, const int64_t *sizes, const char *format,
                                  size_t elem_bytes, mft_layout *out) {
    const char *fn = "mft_layout_from_ascend";
    if (!format || !out || (ndim > 0 && !sizes)) {
        mft__set_error(MFT_ERR_NULL, "%s: argument '%s' is NULL", fn,
                       !format ? "format" : !out ? "out" : "sizes");
        return MFT_ERR_NULL;
    }
    if (!desc_elem_ok(fn, elem_bytes)) return MFT_ERR_INVALID;
    for (int f = 0; f < DESC_NASCEND; f++)
        if (!strcmp(format, DESC_ASCEND[f])) return desc_ascend(fn, f, ndim, sizes, elem_bytes, out);
    mft__set_error(MFT_ERR_INVALID, "%s: format '%s' position 0: not one of NC1HWC0, NDC1HWC0, "
                   "FRACTAL_Z, FRACTAL_NZ", fn, format);
    return MFT_ERR_INVALID;
}

int mft_layout_to_ascend(const mft_layout *l, size_t elem_bytes, char *buf, size_t len) {
    const char *fn = "mft_layout_to_ascend";
    if (desc_check(fn, l) != MFT_OK || !desc_buf_ok(fn, buf, len) || !desc_elem_ok(fn, elem_bytes))
        return -1;
    for (int f = 0; f < DESC_NASCEND; f++) {
        static const int need[DESC_NASCEND] = {4, 5, 4, 2};
        if (f == 3 ? l->ndim < 2 : l->ndim != need[f]) continue;
        mft_layout a;
        if (desc_ascend(fn, f, l->ndim, l->sizes, elem_bytes, &a) == MFT_OK &&
            mft_layout_equal(&a, l))
            return desc_emit(DESC_ASCEND[f], buf, len);
    }
    char b1[MFT__DIMS_BUF];
    mft__set_error(MFT_ERR_UNSUPPORTED, "%s: the rank-%d descriptor with %d blocks (strides %s) "
                   "is none of NC1HWC0, NDC1HWC0, FRACTAL_Z, FRACTAL_NZ for %zu-byte elements",
                   fn, l->ndim, l->nblocks, mft__fmt_dims(b1, sizeof b1, l->ndim, l->strides),
                   elem_bytes);
    return -1;
}

/* ------------------------------------------------------------------ XLA */
/* Reads a non-negative integer at s[*i]; false if none or too large. */
static bool desc_read_int(const char *s, size_t *i, int64_t *v) {
    if (!isdigit((unsigned char)s[*i])) return false;
    int64_t x = 0;
    for (; isdigit((unsigned char)s[*i]); (*i)++) {
        if (x > (INT64_MAX - 9) / 10) return false;
        x = x * 10 + (s[*i] - '0');
    }
    *v = x;
    return true;
}

mft_status mft_layout_from_xla(int ndim, const int64_t *sizes, const char *layout,
                               mft_layout *out) {
    const char *fn = "mft_layout_from_xla";
    if (!layout || !out || (ndim > 0 && !sizes)) {
        mft__set_error(MFT_ERR_NULL, "%s: argument '%s' is NULL", fn,
                       !layout ? "layout" : !out ? "out" : "sizes");
        return MFT_ERR_NULL;
    }
    if (ndim < 0 || ndim > MFT_MAX_DIMS) {
        mft__set_error(MFT_ERR_RANK, "%s: rank %d outside 0..%d", fn, ndim, MFT_MAX_DIMS);
        return MFT_ERR_RANK;
    }
#define DESC_XFAIL(code, pos, ...)                                                           \
    do {                                                                                     \
        char why_[200];                                                                      \
        snprintf(why_, sizeof why_, __VA_ARGS__);                                            \
        mft__set_error(code, "%s: layout '%s' position %zu: %s", fn, layout, (size_t)(pos),  \
                       why_);                                                                \
        return code;                                                                         \
    } while (0)
    const char *s = layout;
    size_t i = 0;
    if (s[i] != '{') DESC_XFAIL(MFT_ERR_INVALID, i, "expected '{'");
    i++;
    int m2m[MFT_MAX_DIMS], nm = 0;
    bool seen[MFT_MAX_DIMS] = {false};
    while (s[i] != '}' && s[i] != ':') {
        if (nm > 0) {
            if (s[i] != ',') DESC_XFAIL(MFT_ERR_INVALID, i, "expected ',', ':' or '}'");
            i++;
        }
        size_t at = i;
        int64_t v;
        if (!desc_read_int(s, &i, &v)) DESC_XFAIL(MFT_ERR_INVALID, at, "expected a dim number");
        if (v >= ndim) DESC_XFAIL(MFT_ERR_INVALID, at, "dim %lld of a rank-%d layout", (long long)v, ndim);
        if (seen[v]) DESC_XFAIL(MFT_ERR_INVALID, at, "dim %lld appears twice", (long long)v);
        seen[v] = true;
        m2m[nm++] = (int)v;
    }
    if (nm != ndim)
        DESC_XFAIL(MFT_ERR_INVALID, i, "minor_to_major names %d dims, the layout has rank %d", nm,
                   ndim);
    int phys[MFT_MAX_DIMS]; /* major to minor */
    for (int j = 0; j < ndim; j++) phys[j] = m2m[ndim - 1 - j];
    int64_t tiles[2][MFT_MAX_DIMS];
    int tk[2] = {0, 0}, nlev = 0;
    if (s[i] == ':') {
        i++;
        /* XLA writes the levels as T(a,b)(c,d) */
        while (nlev == 0 ? s[i] == 'T' : s[i] == '(') {
            if (nlev == 2)
                DESC_XFAIL(MFT_ERR_UNSUPPORTED, i, "more than two tile levels");
            if (nlev == 0) {
                if (s[i + 1] != '(') DESC_XFAIL(MFT_ERR_INVALID, i + 1, "expected '(' after 'T'");
                i++;
            }
            i++;
            for (;;) {
                size_t at = i;
                int64_t v;
                if (s[i] == '*')
                    DESC_XFAIL(MFT_ERR_UNSUPPORTED, at, "combined ('*') tile dims");
                if (!desc_read_int(s, &i, &v)) DESC_XFAIL(MFT_ERR_INVALID, at, "expected a tile size");
                if (v < 1) DESC_XFAIL(MFT_ERR_INVALID, at, "tile size %lld (must be >= 1)", (long long)v);
                if (tk[nlev] == ndim)
                    DESC_XFAIL(MFT_ERR_INVALID, at, "tile has more dims than the rank %d", ndim);
                tiles[nlev][tk[nlev]++] = v;
                if (s[i] == ')') break;
                if (s[i] != ',') DESC_XFAIL(MFT_ERR_INVALID, i, "expected ',' or ')'");
                i++;
            }
            i++;
            nlev++;
        }
        if (nlev > 0 && s[i] == '\0') DESC_XFAIL(MFT_ERR_INVALID, i, "expected '}'");
        if (nlev == 0 || s[i] != '}')
            DESC_XFAIL(MFT_ERR_UNSUPPORTED, i, "only tiles T(...) are supported after ':' "
                       "(no memory space, element size or other attributes)");
    }
    if (s[i] != '}') DESC_XFAIL(MFT_ERR_INVALID, i, "expected '}'");
    if (s[i + 1] != '\0') DESC_XFAIL(MFT_ERR_INVALID, i + 1, "text after '}'");
    int bdim[2 * MFT_MAX_DIMS], nb = 0;
    int64_t bsize[2 * MFT_MAX_DIMS];
    if (nlev == 2 && tk[1] > tk[0])
        DESC_XFAIL(MFT_ERR_UNSUPPORTED, i, "the second tile has more dims (%d) than the first (%d)",
                   tk[1], tk[0]);
    for (int lev = 0; lev < nlev; lev++)
        for (int j = 0; j < tk[lev]; j++) {
            int d = phys[ndim - tk[lev] + j];
            int64_t t = tiles[lev][j];
            if (lev == 0 && nlev == 2 && j >= tk[0] - tk[1]) {
                int64_t u = tiles[1][j - (tk[0] - tk[1])];
                if (t % u != 0)
                    DESC_XFAIL(MFT_ERR_UNSUPPORTED, i, "second-level tile size %lld does not "
                               "divide the first-level %lld", (long long)u, (long long)t);
                t /= u;
            }
            if (nb == MFT_MAX_BLOCKS)
                DESC_XFAIL(MFT_ERR_UNSUPPORTED, i, "the tiles need more than %d inner blocks",
                           MFT_MAX_BLOCKS);
            bdim[nb] = d;
            bsize[nb++] = t;
        }
#undef DESC_XFAIL
    return desc_packed(fn, ndim, sizes, phys, nb, bdim, bsize, out);
}

int mft_layout_to_xla(const mft_layout *l, char *buf, size_t len) {
    const char *fn = "mft_layout_to_xla";
    if (desc_check(fn, l) != MFT_OK || !desc_buf_ok(fn, buf, len)) return -1;
    int order[MFT_MAX_DIMS];
    bool ok = desc_outer_order(l, order);
    /* level 1: the longest prefix of blocks on distinct dims, which must be
     * the most minor physical dims in order; level 2: the rest, on distinct
     * dims equal to the last ones of level 1 */
    int k1 = 0, nd = l->ndim;
    for (; ok && k1 < l->nblocks; k1++) {
        bool dup = false;
        for (int j = 0; j < k1; j++) dup = dup || l->block_dim[j] == l->block_dim[k1];
        if (dup) break;
    }
    int k2 = l->nblocks - k1;
    if (ok && (k1 > nd || k2 > k1)) ok = false;
    for (int j = 0; ok && j < k1; j++) ok = l->block_dim[j] == order[nd - k1 + j];
    for (int j = 0; ok && j < k2; j++) ok = l->block_dim[k1 + j] == l->block_dim[k1 - k2 + j];
    for (int j = k1 + 1; ok && j < l->nblocks; j++)
        for (int q = k1; q < j; q++) ok = ok && l->block_dim[q] != l->block_dim[j];
    if (!ok) {
        mft__set_error(MFT_ERR_UNSUPPORTED, "%s: the rank-%d descriptor with %d blocks is not a "
                       "packed XLA layout with at most two tile levels", fn, l->ndim, l->nblocks);
        return -1;
    }
    char s[256];
    size_t p = 0;
    p += (size_t)snprintf(s + p, sizeof s - p, "{");
    for (int j = 0; j < nd; j++)
        p += (size_t)snprintf(s + p, sizeof s - p, "%s%d", j ? "," : "", order[nd - 1 - j]);
    for (int lev = 0; lev < (k2 ? 2 : k1 ? 1 : 0); lev++) {
        p += (size_t)snprintf(s + p, sizeof s - p, "%s", lev ? "(" : ":T(");
        int from = lev ? k1 : 0, cnt = lev ? k2 : k1;
        for (int j = 0; j < cnt; j++) {
            int64_t t = l->block_size[from + j];
            if (!lev && j >= k1 - k2) t *= l->block_size[k1 + j - (k1 - k2)];
            p += (size_t)snprintf(s + p, sizeof s - p, "%s%lld", j ? "," : "", (long long)t);
        }
        p += (size_t)snprintf(s + p, sizeof s - p, ")");
    }
    snprintf(s + p, sizeof s - p, "}");
    return desc_emit(s, buf, len);
}
