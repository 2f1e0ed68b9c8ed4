/* tensor/view.c — views in the core: new headers on the same storage (never
 * a copy, except reshape/flatten when no view exists). Every view gets its
 * flags refreshed and its tag re-derived with the source's tag as the
 * tie-breaker (Note [Soft memory-format tag]). Dims may be negative, as in
 * PyTorch. These are the views without autograd: each mft__view_X(fn, ...)
 * makes the view and says in *note what it did (normalised dims and
 * bounds), from which the public mft_X of ops/shape/views.c records its
 * tape node. */
#include <string.h>
#include "internal.h"

int mft__wrap_dim(const char *fn, int dim, int ndim_for_range) {
    int n = ndim_for_range > 0 ? ndim_for_range : 1; /* rank 0 accepts dims -1 and 0 */
    int d = dim < 0 ? dim + n : dim;
    if (d < 0 || d >= n) {
        mft__set_error(MFT_ERR_DIM, "%s: dim %d is out of range (expected %d..%d)", fn, dim, -n,
                       n - 1);
        return -1;
    }
    return d;
}

/* New header over src's storage with the given geometry (assumed valid and
 * inside the storage); tag derived with src's tag as tie-breaker. */
static mft_tensor *view_make(const char *fn, const mft_tensor *src, int ndim,
                             const int64_t *sizes, const int64_t *strides, int64_t offset) {
    mft_tensor *t = mft__tensor_new(fn, src->storage, offset, ndim, sizes, strides, src->dtype);
    if (t) mft__rule_apply1(t, MFT__RULE_VIEW, fn + 4, src); /* fn: "mft_permute", ... */
    return t;
}

/* Note [Geometry bound]: the stride PyTorch derives for a size-0 or size-1
 * dim d (unsqueeze's and expand's new dims, a slice's result) addresses
 * nothing; when it would break the bound, the first of the alternatives
 * that obeys it is used instead (alt, then 0). Only strides near 2^62 get
 * here. The caller checks the geometry again when making the view. */
static void view_fit_derived(int ndim, const int64_t *sizes, int64_t *strides, int64_t offset,
                             mft_dtype dt, int d, int64_t alt) {
    if (sizes[d] > 1 || mft__geometry_fits(ndim, sizes, strides, offset, dt)) return;
    strides[d] = alt;
    if (!mft__geometry_fits(ndim, sizes, strides, offset, dt)) strides[d] = 0;
}

/* The dim argument of a view that needs rank >= 1 ("narrow", "select", ...):
 * wrapped, or -1 with the error set. */
static int view_dim(const char *fn, const mft_tensor *t, int dim, const char *verb) {
    if (t->ndim == 0) {
        mft__set_error(MFT_ERR_RANK, "%s: cannot %s a rank-0 tensor", fn, verb);
        return -1;
    }
    return mft__wrap_dim(fn, dim, t->ndim);
}

/* A view of t without dim d (select, squeeze). */
static mft_tensor *view_drop_dim(const char *fn, const mft_tensor *t, int d, int64_t offset) {
    int64_t sizes[MFT_MAX_DIMS], strides[MFT_MAX_DIMS];
    int n = 0;
    for (int k = 0; k < t->ndim; k++) {
        if (k == d) continue;
        sizes[n] = t->sizes[k];
        strides[n++] = t->strides[k];
    }
    return view_make(fn, t, n, sizes, strides, offset);
}


/* Fills *note (when not NULL) for the recording layer. */
static void view_note(mft__view_note *note, mft__view_kind kind, int dim, int d1, const int *dims,
                      int ndim, int64_t a, int64_t b, int64_t c) {
    if (!note) return;
    memset(note, 0, sizeof *note);
    note->kind = kind;
    note->dim = dim;
    note->d1 = d1;
    if (dims)
        for (int i = 0; i < ndim; i++) note->dims[i] = dims[i] < 0 ? dims[i] + ndim : dims[i];
    note->a = a;
    note->b = b;
    note->c = c;
}

#define VIEW_CHECK_NULL(fn, t)        \
    do {                              \
        if (!(t)) {                   \
            mft__null_arg((fn), "t"); \
            return NULL;              \
        }                             \
    } while (0)

/* ---------------------------------------------------------------- blocked views
 * docs/spec.md §7 (views): narrow / slice / select on a dim without a
 * block move the offset and scale the outer stride; on a blocked dim only
 * narrow and step-1 slices that start at a block boundary and end at one
 * (or at the end of the dim, so the view's pad lanes are the tensor's) are
 * views. Everything else is MFT_ERR_NOT_VIEWABLE naming the view and the
 * block; the view ops that reorder or merge dims refuse blocked tensors
 * (MFT_ERR_FORMAT), and reshape / flatten copy them to plain. */
static int64_t view_block_on(const mft_tensor *t, int d, int *nblocks_on) {
    int64_t b = 1;
    *nblocks_on = 0;
    for (int k = 0; k < t->nblocks; k++)
        if (t->block_dim[k] == d) {
            b *= t->block_size[k];
            (*nblocks_on)++;
        }
    return b;
}

/* A view of blocked t: dim d becomes [s, s + len) with outer step `step`
 * (drop: removed, s the index), or a refusal. */
static mft_tensor *view_blocked_range(const char *fn, const char *what, const mft_tensor *t,
                                      int d, int64_t s, int64_t len, int64_t step, bool drop) {
    int nb;
    const int64_t b = view_block_on(t, d, &nb);
    mft_layout l;
    mft__layout_of(t, &l);
    int64_t off = t->offset;
    if (nb > 0 && (drop || step != 1 || nb > 1 || s % b != 0 ||
                   (len % b != 0 && s + len != t->sizes[d]))) {
        mft__set_error(MFT_ERR_NOT_VIEWABLE,
                       "%s: %s dim %d at [%lld, %lld) step %lld of a blocked tensor: dim %d is "
                       "stored in blocks of %lld, and only ranges that start at a block boundary "
                       "and end at one (or at the dim's end) are views (copy it with "
                       "mft_contiguous first)",
                       fn, what, d, (long long)s, (long long)(s + len), (long long)step, d,
                       (long long)b);
        return NULL;
    }
    off += s / b * t->strides[d];
    if (drop) {
        for (int k = d; k + 1 < l.ndim; k++) {
            l.sizes[k] = l.sizes[k + 1];
            l.padded[k] = l.padded[k + 1];
            l.strides[k] = l.strides[k + 1];
        }
        l.ndim--;
        for (int k = 0; k < l.nblocks; k++)
            if (l.block_dim[k] > d) l.block_dim[k]--;
    } else {
        l.sizes[d] = len;
        l.padded[d] = (len + b - 1) / b * b;
        int64_t st;
        if (__builtin_mul_overflow(t->strides[d], step, &st)) st = t->strides[d];
        l.strides[d] = len > 1 ? st : t->strides[d];
    }
    mft_tensor *v = mft__tensor_new_layout(fn, t->storage, off, &l, t->dtype);
    if (v) mft__rule_apply1(v, MFT__RULE_VIEW, fn + 4, t);
    return v;
}

mft_tensor *mft__view_permute(const char *fn, const mft_tensor *t, const int *dims,
                               mft__view_note *note) {
    VIEW_CHECK_NULL(fn, t);
    if (t->nblocks) {
        mft__blk_refuse(fn, t, "a permutation");
        return NULL;
    }
    if (t->ndim > 0 && !dims) {
        mft__set_error(MFT_ERR_NULL, "%s: dims is NULL for a rank-%d tensor", fn, t->ndim);
        return NULL;
    }
    int64_t sizes[MFT_MAX_DIMS], strides[MFT_MAX_DIMS];
    bool seen[MFT_MAX_DIMS] = {false};
    for (int i = 0; i < t->ndim; i++) {
        int d = dims[i] < 0 ? dims[i] + t->ndim : dims[i];
        if (d < 0 || d >= t->ndim || seen[d]) {
            char a[MFT__DIMS_BUF];
            mft__set_error(MFT_ERR_DIM, "%s: dims %s is not a permutation of 0..%d", fn,
                           mft__fmt_ints(a, sizeof a, t->ndim, dims), t->ndim - 1);
            return NULL;
        }
        seen[d] = true;
        sizes[i] = t->sizes[d];
        strides[i] = t->strides[d];
    }
    view_note(note, MFT__VIEW_PERMUTE, 0, 0, dims, t->ndim, 0, 0, 0);
    return view_make(fn, t, t->ndim, sizes, strides, t->offset);
}

mft_tensor *mft__view_transpose(const char *fn, const mft_tensor *t, int d0, int d1,
                                 mft__view_note *note) {
    VIEW_CHECK_NULL(fn, t);
    if (t->nblocks) {
        mft__blk_refuse(fn, t, "a transpose");
        return NULL;
    }
    int a = mft__wrap_dim(fn, d0, t->ndim), b = a < 0 ? -1 : mft__wrap_dim(fn, d1, t->ndim);
    if (a < 0 || b < 0) return NULL;
    int64_t sizes[MFT_MAX_DIMS], strides[MFT_MAX_DIMS];
    memcpy(sizes, t->sizes, sizeof sizes);
    memcpy(strides, t->strides, sizeof strides);
    if (t->ndim > 0) {
        sizes[a] = t->sizes[b], sizes[b] = t->sizes[a];
        strides[a] = t->strides[b], strides[b] = t->strides[a];
    }
    view_note(note, MFT__VIEW_TRANSPOSE, a, b, NULL, t->ndim, 0, 0, 0);
    return view_make(fn, t, t->ndim, sizes, strides, t->offset);
}

mft_tensor *mft__view_narrow(const char *fn, const mft_tensor *t, int dim, int64_t start,
                              int64_t length, mft__view_note *note) {
    VIEW_CHECK_NULL(fn, t);
    int d = view_dim(fn, t, dim, "narrow");
    if (d < 0) return NULL;
    int64_t size = t->sizes[d];
    int64_t s = start < 0 ? start + size : start;
    if (s < 0 || s > size || length < 0 || length > size - s) {
        mft__set_error(MFT_ERR_DIM, "%s: start %lld length %lld is out of range for dim %d of size %lld",
                       fn, (long long)start, (long long)length, d, (long long)size);
        return NULL;
    }
    int64_t sizes[MFT_MAX_DIMS];
    memcpy(sizes, t->sizes, sizeof sizes);
    sizes[d] = length;
    view_note(note, MFT__VIEW_NARROW, d, 0, NULL, t->ndim, s, length, 0);
    if (t->nblocks) return view_blocked_range(fn, "narrow", t, d, s, length, 1, false);
    return view_make(fn, t, t->ndim, sizes, t->strides, t->offset + s * t->strides[d]);
}

mft_tensor *mft__view_select(const char *fn, const mft_tensor *t, int dim, int64_t i,
                              mft__view_note *note) {
    VIEW_CHECK_NULL(fn, t);
    int d = view_dim(fn, t, dim, "select from");
    if (d < 0) return NULL;
    int64_t idx = i < 0 ? i + t->sizes[d] : i;
    if (idx < 0 || idx >= t->sizes[d]) {
        mft__set_error(MFT_ERR_DIM, "%s: index %lld is out of range for dim %d of size %lld", fn,
                       (long long)i, d, (long long)t->sizes[d]);
        return NULL;
    }
    view_note(note, MFT__VIEW_SELECT, d, 0, NULL, t->ndim, idx, 0, 0);
    if (t->nblocks) return view_blocked_range(fn, "select", t, d, idx, 1, 1, true);
    return view_drop_dim(fn, t, d, t->offset + idx * t->strides[d]);
}

mft_tensor *mft__view_slice(const char *fn, const mft_tensor *t, int dim, int64_t start,
                             int64_t end, int64_t step, mft__view_note *note) {
    VIEW_CHECK_NULL(fn, t);
    int d = view_dim(fn, t, dim, "slice");
    if (d < 0) return NULL;
    if (step <= 0) {
        mft__set_error(MFT_ERR_INVALID, "%s: step %lld must be positive", fn, (long long)step);
        return NULL;
    }
    int64_t size = t->sizes[d];
    int64_t s = start < 0 ? (start < -size ? 0 : start + size) : (start > size ? size : start);
    int64_t e = end < 0 ? (end < -size ? 0 : end + size) : (end > size ? size : end);
    if (e < s) e = s;
    int64_t sizes[MFT_MAX_DIMS], strides[MFT_MAX_DIMS];
    memcpy(sizes, t->sizes, sizeof sizes);
    memcpy(strides, t->strides, sizeof strides);
    sizes[d] = e > s ? (e - s - 1) / step + 1 : 0;
    if (t->nblocks) {
        view_note(note, MFT__VIEW_SLICE, d, 0, NULL, t->ndim, s, e, step);
        return view_blocked_range(fn, "slice", t, d, s, sizes[d], sizes[d] > 1 ? step : 1, false);
    }
    int64_t st;
    if (__builtin_mul_overflow(t->strides[d], step, &st)) {
        if (sizes[d] > 1) {
            mft__set_error(MFT_ERR_OVERFLOW, "%s: stride %lld times step %lld overflows", fn,
                           (long long)t->strides[d], (long long)step);
            return NULL;
        }
        st = t->strides[d]; /* a size-0 or size-1 result: any stride will do */
    }
    strides[d] = st;
    const int64_t off = t->offset + s * t->strides[d];
    view_fit_derived(t->ndim, sizes, strides, off, t->dtype, d, t->strides[d]);
    view_note(note, MFT__VIEW_SLICE, d, 0, NULL, t->ndim, s, e, step);
    return view_make(fn, t, t->ndim, sizes, strides, off);
}

mft_tensor *mft__view_unsqueeze(const char *fn, const mft_tensor *t, int dim,
                                 mft__view_note *note) {
    VIEW_CHECK_NULL(fn, t);
    if (t->nblocks) {
        mft__blk_refuse(fn, t, "an unsqueeze");
        return NULL;
    }
    if (t->ndim >= MFT_MAX_DIMS) {
        mft__set_error(MFT_ERR_RANK, "%s: rank %d would exceed MFT_MAX_DIMS %d", fn, t->ndim + 1,
                       MFT_MAX_DIMS);
        return NULL;
    }
    int d = mft__wrap_dim(fn, dim, t->ndim + 1);
    if (d < 0) return NULL;
    int64_t sizes[MFT_MAX_DIMS], strides[MFT_MAX_DIMS];
    int n = 0;
    for (int k = 0; k <= t->ndim; k++) {
        if (k == d) {
            sizes[n] = 1;
            int64_t st = 1; /* PyTorch: size*stride of the dim it precedes, 1 at the end */
            if (d < t->ndim && __builtin_mul_overflow(t->sizes[d], t->strides[d], &st))
                st = 0; /* a size-1 dim's stride is never used to address memory */
            strides[n++] = st;
        }
        if (k < t->ndim) {
            sizes[n] = t->sizes[k];
            strides[n++] = t->strides[k];
        }
    }
    view_fit_derived(t->ndim + 1, sizes, strides, t->offset, t->dtype, d, 1);
    view_note(note, MFT__VIEW_RESHAPE, 0, 0, NULL, t->ndim, 0, 0, 0);
    return view_make(fn, t, t->ndim + 1, sizes, strides, t->offset);
}

mft_tensor *mft__view_squeeze(const char *fn, const mft_tensor *t, int dim,
                               mft__view_note *note) {
    VIEW_CHECK_NULL(fn, t);
    if (t->nblocks) {
        mft__blk_refuse(fn, t, "a squeeze");
        return NULL;
    }
    int d = mft__wrap_dim(fn, dim, t->ndim);
    if (d < 0) return NULL;
    mft_tensor *v = (t->ndim == 0 || t->sizes[d] != 1)
                        ? view_make(fn, t, t->ndim, t->sizes, t->strides, t->offset)
                        : view_drop_dim(fn, t, d, t->offset);
    view_note(note, MFT__VIEW_RESHAPE, 0, 0, NULL, t->ndim, 0, 0, 0);
    return v;
}

mft_tensor *mft__view_expand(const char *fn, const mft_tensor *t, int ndim, const int64_t *sizes,
                              mft__view_note *note) {
    VIEW_CHECK_NULL(fn, t);
    if (t->nblocks) {
        mft__blk_refuse(fn, t, "an expand");
        return NULL;
    }
    char a[MFT__DIMS_BUF], b[MFT__DIMS_BUF];
    if (ndim < t->ndim || ndim > MFT_MAX_DIMS) {
        mft__set_error(MFT_ERR_RANK, "%s: cannot expand rank %d to rank %d (max %d)", fn, t->ndim,
                       ndim, MFT_MAX_DIMS);
        return NULL;
    }
    if (ndim > 0 && !sizes) {
        mft__set_error(MFT_ERR_NULL, "%s: sizes is NULL", fn);
        return NULL;
    }
    int64_t out[MFT_MAX_DIMS] = {0}, strides[MFT_MAX_DIMS] = {0};
    int off = ndim - t->ndim;
    for (int i = 0; i < ndim; i++) {
        int td = i - off;
        int64_t want = sizes[i];
        if (td < 0) { /* new leading dim; strides are filled right to left below */
            if (want < 0) {
                mft__set_error(MFT_ERR_SHAPE, "%s: size %lld for new leading dim %d of %s is invalid",
                               fn, (long long)want, i, mft__fmt_dims(a, sizeof a, ndim, sizes));
                return NULL;
            }
            out[i] = want;
            strides[i] = -1;
            continue;
        }
        int64_t have = t->sizes[td];
        if (want == -1) want = have;
        if (want == have) {
            out[i] = have;
            strides[i] = t->strides[td];
        } else if (have == 1 && want >= 0) {
            out[i] = want;
            strides[i] = 0;
        } else {
            mft__set_error(MFT_ERR_SHAPE, "%s: sizes %s cannot expand to %s (dim %d: %lld vs %lld)",
                           fn, mft__fmt_dims(a, sizeof a, t->ndim, t->sizes),
                           mft__fmt_dims(b, sizeof b, ndim, sizes), i, (long long)have,
                           (long long)sizes[i]);
            return NULL;
        }
    }
    /* new leading dims of size 1 get size*stride of the dim after them (as
     * PyTorch's inferExpandGeometry); larger ones are broadcast (stride 0) */
    for (int i = off - 1; i >= 0; i--) {
        int64_t st = 0; /* a scalar's expansion: all strides 0, as PyTorch */
        if (out[i] != 1 || (i + 1 < ndim && __builtin_mul_overflow(out[i + 1], strides[i + 1], &st)))
            st = 0; /* broadcast, or a size-1 dim whose stride is irrelevant */
        strides[i] = st;
    }
    if (mft__check_geometry_at(fn, ndim, out, NULL, t->offset, t->dtype) != MFT_OK) return NULL;
    for (int i = off - 1; i >= 0; i--)
        view_fit_derived(ndim, out, strides, t->offset, t->dtype, i, 0);
    view_note(note, MFT__VIEW_EXPAND, 0, 0, NULL, t->ndim, 0, 0, 0);
    return view_make(fn, t, ndim, out, strides, t->offset);
}

mft_tensor *mft_as_strided(const mft_tensor *t, int ndim, const int64_t *sizes,
                           const int64_t *strides, int64_t offset) {
    const char *fn = "mft_as_strided"; /* not differentiable: no node, so public here */
    VIEW_CHECK_NULL(fn, t);
    if (ndim > 0 && !strides) {
        mft__set_error(MFT_ERR_NULL, "%s: strides is NULL for ndim %d", fn, ndim);
        return NULL;
    }
    if (mft__check_geometry(fn, ndim, sizes, strides, t->dtype) != MFT_OK) return NULL;
    if (offset < 0) {
        mft__set_error(MFT_ERR_INVALID, "%s: negative storage offset %lld", fn, (long long)offset);
        return NULL;
    }
    int64_t need = 0, end = 0;
    mft_min_storage_numel(ndim, sizes, strides, &need);
    int64_t have = mft_tensor_storage_numel(t);
    if (need > 0 && (__builtin_add_overflow(need, offset, &end) || end > have)) {
        char a[MFT__DIMS_BUF], b[MFT__DIMS_BUF];
        mft__set_error(MFT_ERR_BOUNDS,
                       "%s: sizes %s strides %s need %lld elements after offset %lld but the "
                       "storage holds %lld elements",
                       fn, mft__fmt_dims(a, sizeof a, ndim, sizes),
                       mft__fmt_dims(b, sizeof b, ndim, strides), (long long)need,
                       (long long)offset, (long long)have);
        return NULL;
    }
    /* an empty view addresses nothing; its offset only has to obey the span */
    if (mft__check_geometry_at(fn, ndim, sizes, strides, offset, t->dtype) != MFT_OK)
        return NULL;
    return view_make(fn, t, ndim, sizes, strides, offset);
}

/* Resolves one -1 in sizes against numel; checks the count matches. */
static bool view_infer_sizes(const char *fn, const mft_tensor *t, int ndim, const int64_t *sizes,
                             int64_t *out) {
    char a[MFT__DIMS_BUF], b[MFT__DIMS_BUF];
    int infer = -1;
    int64_t prod = 1;
    for (int i = 0; i < ndim; i++) {
        if (sizes[i] == -1 && infer < 0) {
            infer = i;
            continue;
        }
        if (sizes[i] < 0 || __builtin_mul_overflow(prod, sizes[i], &prod)) {
            mft__set_error(MFT_ERR_SHAPE, "%s: invalid sizes %s", fn,
                           mft__fmt_dims(a, sizeof a, ndim, sizes));
            return false;
        }
        out[i] = sizes[i];
    }
    if (infer >= 0) {
        if (prod == 0 || t->numel % prod != 0) {
            mft__set_error(MFT_ERR_SHAPE, "%s: sizes %s cannot hold %lld elements of %s", fn,
                           mft__fmt_dims(a, sizeof a, ndim, sizes), (long long)t->numel,
                           mft__fmt_dims(b, sizeof b, t->ndim, t->sizes));
            return false;
        }
        out[infer] = t->numel / prod;
        prod *= out[infer];
    }
    if (prod != t->numel) {
        mft__set_error(MFT_ERR_SHAPE, "%s: sizes %s hold %lld elements but %s has %lld", fn,
                       mft__fmt_dims(a, sizeof a, ndim, sizes), (long long)prod,
                       mft__fmt_dims(b, sizeof b, t->ndim, t->sizes), (long long)t->numel);
        return false;
    }
    return true;
}

/* PyTorch's view rule: split the old dims into chunks that are contiguous
 * among themselves (stride[d-1] == size[d] * stride[d], size-1 dims ignored);
 * each chunk must be covered exactly by a run of new dims, which then get
 * packed strides within the chunk. False if some new dim straddles chunks. */
static bool view_strides(int on, const int64_t *osz, const int64_t *ost, int64_t numel, int nn,
                         const int64_t *nsz, int64_t *nst) {
    if (on == 0) {
        for (int i = 0; i < nn; i++) nst[i] = 1;
        return true;
    }
    if (numel == 0) {
        bool same = on == nn;
        for (int i = 0; same && i < nn; i++) same = osz[i] == nsz[i];
        if (same) {
            memcpy(nst, ost, sizeof(int64_t) * (size_t)nn);
            return true;
        }
        int64_t acc = 1;
        for (int i = nn - 1; i >= 0; i--) {
            nst[i] = acc;
            acc *= nsz[i] > 1 ? nsz[i] : 1;
        }
        return true;
    }
    int vd = nn - 1;
    int64_t base = ost[on - 1], tnum = 1, vnum = 1;
    for (int td = on - 1; td >= 0; td--) {
        tnum *= osz[td];
        bool chunk_ends = td == 0 || (osz[td - 1] != 1 && ost[td - 1] != tnum * base);
        if (!chunk_ends) continue;
        while (vd >= 0 && (vnum < tnum || nsz[vd] == 1)) {
            nst[vd] = vnum * base;
            vnum *= nsz[vd];
            vd--;
        }
        if (vnum != tnum) return false;
        if (td > 0) {
            base = ost[td - 1];
            tnum = 1;
            vnum = 1;
        }
    }
    return vd == -1;
}

mft_tensor *mft__view_reshape(const char *fn, const mft_tensor *t, int ndim, const int64_t *sizes,
                               bool allow_copy, mft__view_note *note) {
    VIEW_CHECK_NULL(fn, t);
    if (ndim < 0 || ndim > MFT_MAX_DIMS) {
        mft__set_error(MFT_ERR_RANK, "%s: ndim %d is outside 0..%d", fn, ndim, MFT_MAX_DIMS);
        return NULL;
    }
    if (ndim > 0 && !sizes) {
        mft__set_error(MFT_ERR_NULL, "%s: sizes is NULL", fn);
        return NULL;
    }
    int64_t nsz[MFT_MAX_DIMS], nst[MFT_MAX_DIMS];
    if (!view_infer_sizes(fn, t, ndim, sizes, nsz) ||
        mft__check_geometry(fn, ndim, nsz, NULL, t->dtype) != MFT_OK)
        return NULL;
    if (!t->nblocks && view_strides(t->ndim, t->sizes, t->strides, t->numel, ndim, nsz, nst)) {
        /* the strides derived for size-0/1 dims obey the bound (Note [Geometry bound]) */
        for (int d = 0; d < ndim; d++)
            view_fit_derived(ndim, nsz, nst, t->offset, t->dtype, d, 1);
        view_note(note, MFT__VIEW_RESHAPE, 0, 0, NULL, t->ndim, 0, 0, 0);
        return view_make(fn, t, ndim, nsz, nst, t->offset);
    }
    if (!allow_copy && t->nblocks) {
        char a[MFT__DIMS_BUF], c[MFT__DIMS_BUF];
        mft__set_error(MFT_ERR_NOT_VIEWABLE,
                       "%s: a blocked tensor (sizes %s, format %s) cannot be viewed as %s: its "
                       "blocks have no plain strides (use mft_reshape, which copies)",
                       fn, mft__fmt_dims(a, sizeof a, t->ndim, t->sizes), mft_format_name(t->tag),
                       mft__fmt_dims(c, sizeof c, ndim, nsz));
        return NULL;
    }
    if (!allow_copy) {
        char a[MFT__DIMS_BUF], b[MFT__DIMS_BUF], c[MFT__DIMS_BUF];
        mft__set_error(MFT_ERR_NOT_VIEWABLE,
                       "%s: sizes %s with strides %s cannot be viewed as %s (use mft_reshape)", fn,
                       mft__fmt_dims(a, sizeof a, t->ndim, t->sizes),
                       mft__fmt_dims(b, sizeof b, t->ndim, t->strides),
                       mft__fmt_dims(c, sizeof c, ndim, nsz));
        return NULL;
    }
    /* no view exists: a packed copy (a temporary, not a scope result; the
     * reshape's copy, Note [Conversions and their causes]) viewed */
    mft__scope_suspend();
    mft__cause_push(MFT_CAUSE_RESHAPE, fn + 4); /* "reshape", "flatten" */
    mft_tensor *packed = mft__clone(fn, t, MFT_CONTIGUOUS);
    mft__cause_pop();
    mft__scope_resume();
    if (!packed) return NULL;
    view_strides(packed->ndim, packed->sizes, packed->strides, packed->numel, ndim, nsz, nst);
    mft_tensor *out = view_make(fn, packed, ndim, nsz, nst, packed->offset);
    mft_tensor_release(packed);
    view_note(note, MFT__VIEW_RESHAPE, 0, 0, NULL, t->ndim, 0, 0, 1); /* c = 1: copied */
    return out;
}

/* flatten's sizes: dims start..end merged (rank 0 gives (1)); false with the
 * error set for bad dims. */
bool mft__view_flatten_sizes(const char *fn, const mft_tensor *t, int start, int end, int *ndim,
                             int64_t *sizes) {
    if (!t) {
        mft__null_arg(fn, "t");
        return false;
    }
    int s = mft__wrap_dim(fn, start, t->ndim);
    int e = s < 0 ? -1 : mft__wrap_dim(fn, end, t->ndim);
    if (s < 0 || e < 0) return false;
    if (s > e) {
        mft__set_error(MFT_ERR_DIM, "%s: start dim %d comes after end dim %d", fn, start, end);
        return false;
    }
    int n = 0;
    if (t->ndim == 0) {
        sizes[n++] = 1;
    } else {
        for (int k = 0; k < s; k++) sizes[n++] = t->sizes[k];
        int64_t m = 1; /* <= numel: no overflow */
        for (int k = s; k <= e; k++) m *= t->sizes[k];
        sizes[n++] = m;
        for (int k = e + 1; k < t->ndim; k++) sizes[n++] = t->sizes[k];
    }
    *ndim = n;
    return true;
}
