/* ops/linalg/flatten_linear.c — mft_flatten_linear(x, w, b), equal to
 * mft_linear(mft_flatten(x, 1, -1), w, b), and its backward, without the
 * flatten's copy for any layout whose images are dense chunks of memory
 * (docs/spec.md §4.2): NCHW, NHWC, nChw16c, nChw8c, packed. Note [Linear over
 * the physical order] says how; the GEMMs are the dispatched matmul
 * (gemm.c), the autograd node "flatten_linear" is at the end of the file. */
#include <string.h>
#include "autograd_internal.h"
#include "linalg_internal.h"

/* Note [Linear over the physical order]
 * flatten(x, 1, -1) orders an image's elements logically (c, h, w
 * row-major), so for an NHWC or blocked x it is a copy. But a product
 * y[n, o] = Σ_k x[n, k] w[o, k] does not care in which order k runs: when
 * each image of x is one dense chunk of S slots (batch outermost, images S
 * apart), y = X_phys W_phys^T, where
 *   X_phys (N, S) is x's own memory read as a plain packed matrix (no copy),
 *   W_phys (O, S) holds in column p the column of w whose logical element
 *     sits in slot p of an image, and zeros where slot p is a pad lane:
 *     w's rows read as O images of x's sizes and laid out like x's images
 *     (x's descriptor with O images), so a packed w becomes W_phys by one
 *     copy through the library's copy kernels (the iterator's transposing
 *     copy, the nChw16c / nChw8c reorders), an internal copy the profiler
 *     shows as such; a w that is not packed is gathered through the map.
 * The map slot -> logical column comes from one general rule: walk the
 * padded grid of one image (every index below padded[1:]), take each
 * slot's offset from the tensor's descriptor (mft__blk_offset: strides for a
 * plain tensor, outer strides and blocks for a blocked one), and require the
 * offsets to be exactly 0 .. S-1 once each, with S = Π padded[1:], and the
 * batch stride to be S (or N = 1). Indices past the logical sizes are pad
 * lanes, which hold zero (docs/spec.md §7.2), so they add nothing. Anything
 * else — gaps (a slice, padded strides), overlap (broadcast), batch not
 * outermost, an empty x, a blocked w or b — runs the composition
 * flatten + linear, whose flatten copy is counted (cause reshape) as before.
 * Backward, with G = grad_y (N, O):
 *   grad_x = G @ W_g, written as the memory of a tensor laid out in x's
 *     gradient format (docs/spec.md §5), with W_g gathered by that layout's
 *     own map (the same W_phys when the layouts match, as they do for every
 *     packed x); its pad lanes are set to exactly 0 afterwards (G @ 0 is 0
 *     unless G holds inf or NaN);
 *   grad_w = G^T @ X_phys, read back from the rows layout into logical
 *     columns by the same copy kernels (pad columns dropped);
 *   grad_b = the column sums of G, in double, rows in order.
 * The map costs one pass over an image's slots; the gather and the scatter
 * each pass once over W (O·S) where the composition copied the activation
 * (N·K) twice, so the fused op moves fewer bytes when N > O and more when
 * O > N (bench/README.md); reading W through the map inside the GEMM's
 * packing would remove those passes. A map that is the identity (packed
 * NCHW) skips the gather and the scatter, so NCHW runs exactly the GEMM of
 * mft_linear on the flattened view. */

typedef struct fl_map {
    int64_t S;   /* slots per image */
    int64_t K;   /* logical elements per image */
    int64_t *col; /* slot -> logical column, -1 for a pad lane */
    int32_t *pos; /* logical column -> slot (K entries), then the S - K pad slots */
    bool identity;
    mft_layout img; /* the descriptor the map was read from (its images are dense) */
} fl_map;

static void fl_map_free(fl_map *m) {
    mft__free(m->col);
    mft__free(m->pos);
    m->col = NULL;
    m->pos = NULL;
}

/* Builds the map of t (rank >= 2, non-empty, F32/F64 checked by the caller).
 * Returns MFT_OK with *dense telling whether each image is one dense chunk
 * (when false, m holds nothing); MFT_ERR_NOMEM naming fn. */
static mft_status fl_map_build(const char *fn, const mft_tensor *t, fl_map *m, bool *dense) {
    memset(m, 0, sizeof *m);
    *dense = false;
    const int r = t->ndim;
    for (int k = 0; k < t->nblocks; k++)
        if (t->block_dim[k] == 0) return MFT_OK; /* a blocked batch dim */
    int64_t S = 1, K = 1;
    for (int d = 1; d < r; d++) {
        const int64_t pd = mft__is_blocked(t) ? t->padded[d] : t->sizes[d];
        S *= pd;
        K *= t->sizes[d];
    }
    if (t->sizes[0] > 1 && t->strides[0] != S) return MFT_OK;
    if (S > INT32_MAX) return MFT_OK; /* slots kept as int32 (the composition runs) */
    int64_t *col = mft__alloc_or_err(fn, (size_t)S * sizeof *col, 64);
    if (!col) return MFT_ERR_NOMEM;
    for (int64_t p = 0; p < S; p++) col[p] = -2; /* not yet seen */
    int64_t idx[MFT_MAX_DIMS] = {0};
    bool ok = true;
    for (int64_t s = 0; s < S && ok; s++) {
        const int64_t off = mft__blk_offset(t, idx);
        int64_t c = 0;
        for (int d = 1; d < r && c >= 0; d++)
            c = idx[d] < t->sizes[d] ? c * t->sizes[d] + idx[d] : -1;
        ok = off >= 0 && off < S && col[off] == -2;
        if (ok) col[off] = c;
        for (int d = r - 1; d >= 1; d--) { /* next index of the padded grid */
            const int64_t pd = mft__is_blocked(t) ? t->padded[d] : t->sizes[d];
            if (++idx[d] < pd) break;
            idx[d] = 0;
        }
    }
    if (!ok) {
        mft__free(col);
        return MFT_OK;
    }
    int32_t *pos = mft__alloc_or_err(fn, (size_t)S * sizeof *pos, 64);
    if (!pos) {
        mft__free(col);
        return MFT_ERR_NOMEM;
    }
    for (int64_t p = 0, npad = 0; p < S; p++) {
        if (col[p] >= 0) pos[col[p]] = (int32_t)p;
        else pos[K + npad++] = (int32_t)p;
    }
    m->S = S;
    m->K = K;
    m->col = col;
    m->pos = pos;
    mft__layout_of(t, &m->img);
    m->identity = S == K;
    for (int64_t p = 0; p < S && m->identity; p++) m->identity = col[p] == p;
    *dense = true;
    return MFT_OK;
}

static bool fl_map_equal(const fl_map *a, const fl_map *b) {
    return a->S == b->S && !memcmp(a->col, b->col, (size_t)a->S * sizeof *a->col);
}

/* ---------------------------------------------------------------- gather / scatter */
typedef struct fl_job {
    const fl_map *m;
    const char *src;
    char *dst;
    int64_t s0, s1; /* source strides (row, column) in elements */
    mft_dtype dt;
} fl_job;

/* Rows [begin, end) of W_phys (O, S) packed gathered from a w that is not
 * packed (a transposed or sliced view), walking the logical columns k in
 * order: dst[o, pos[k]] = src[o, k], pad slots 0. */
#define FL_GATHER(T, name)                                                                       \
    static void name(const fl_job *j, int64_t begin, int64_t end) {                             \
        const int32_t *restrict pos = j->m->pos;                                                 \
        const int64_t S = j->m->S, K = j->m->K;                                                  \
        for (int64_t o = begin; o < end; o++) {                                                  \
            const T *restrict s = (const T *)(const void *)j->src + o * j->s0;                   \
            T *restrict d = (T *)(void *)j->dst + o * S;                                         \
            for (int64_t k = 0; k < K; k++) d[pos[k]] = s[k * j->s1];                            \
            for (int64_t q = K; q < S; q++) d[pos[q]] = (T)0;                                    \
        }                                                                                        \
    }
FL_GATHER(float, fl_gather_f32)
FL_GATHER(double, fl_gather_f64)

static void fl_gather_range(void *ctx, int64_t begin, int64_t end) {
    const fl_job *j = ctx;
    (j->dt == MFT_F32 ? fl_gather_f32 : fl_gather_f64)(j, begin, end);
}

/* The map's layout with O images instead of N: the layout of W_phys, whose
 * row o is w's row o read as one image (sizes[1:]) laid out like x's. */
static void fl_rows_layout(const fl_map *m, int64_t O, mft_layout *lo) {
    *lo = m->img;
    lo->sizes[0] = lo->padded[0] = O;
    lo->strides[0] = m->S;
}

/* One copy between a packed (O, K) matrix and the same values in the rows
 * layout of m, through the library's copy kernels (the plain iterator, the
 * blocked reorders of tensor/reorder_blocked.c): a copy inside the op, shown
 * by the profiler as an internal copy, not a conversion. to_rows: the
 * matrix mat is read into rows (whose pad lanes, zeroed beforehand, are not
 * written); else rows are read into mat. */
static bool fl_copy_rows(mft_tensor *rows, mft_tensor *mat, bool to_rows) {
    mft_tensor *v = mft_view(mat, rows->ndim, rows->sizes);
    if (!v) return false;
    if (to_rows) mft__copy_kernel(rows, v);
    else mft__copy_kernel(v, rows);
    mft_tensor_release(v);
    return true;
}

/* W_phys (O, S): w's columns in the slot order of m (internal reference). A
 * map that is the identity gives w itself; a packed w is copied into the
 * rows layout, another one gathered through the map. */
static mft_tensor *fl_gather_w(const char *fn, const mft_tensor *w, const fl_map *m) {
    if (m->identity) return mft_tensor_retain((mft_tensor *)w);
    const int64_t O = w->sizes[0], sz[2] = {O, m->S}, st[2] = {m->S, 1};
    const uint64_t t0 = mft__kernel_begin();
    mft_tensor *wp = NULL;
    if (mft_tensor_is_contiguous(w, MFT_CONTIGUOUS)) {
        mft_layout lo;
        fl_rows_layout(m, O, &lo);
        mft_tensor *rows = mft__tensor_alloc_layout_ex(fn, &lo, w->dtype, m->K < m->S);
        if (rows && fl_copy_rows(rows, (mft_tensor *)w, true))
            wp = mft__tensor_new(fn, rows->storage, rows->offset, 2, sz, st, w->dtype);
        mft_tensor_release(rows);
    } else {
        wp = mft__tensor_alloc(fn, 2, sz, w->dtype, MFT_CONTIGUOUS);
        if (wp) {
            const fl_job j = {m, mft__tensor_ptr(w), mft__tensor_ptr(wp), w->strides[0],
                              w->strides[1], w->dtype};
            const int64_t grain = 16384 / (m->S > 0 ? m->S : 1);
            mft__parallel_for(0, O, grain > 0 ? grain : 1, fl_gather_range, (void *)&j);
        }
    }
    const mft_tensor *ins[1] = {w}, *outs[1] = {wp};
    if (wp)
        mft__kernel_end(t0, &(mft__kernel_info){"flatten_linear", "flatten_linear.gather_weight",
                                                MFT_FORMAT_COUNT, MFT_FORMAT_COUNT, w->dtype, 1,
                                                1, ins, outs, 0, false});
    return wp;
}

/* gw (O, K) CONTIGUOUS from the packed (O, S) product p (consumed, as
 * mft_matmul returns it): the rows layout read back into logical columns,
 * pad lanes dropped. */
static mft_tensor *fl_scatter_w(const char *fn, mft_tensor *p, const fl_map *m) {
    if (!p || m->identity) return p;
    const int64_t O = p->sizes[0], sz[2] = {O, m->K};
    const uint64_t t0 = mft__kernel_begin();
    mft_tensor *gw = mft__tensor_alloc(fn, 2, sz, p->dtype, MFT_CONTIGUOUS);
    bool ok = gw != NULL;
    if (ok) {
        mft_layout lo;
        fl_rows_layout(m, O, &lo);
        mft_tensor *rows = mft__tensor_new_layout(fn, p->storage, p->offset, &lo, p->dtype);
        ok = rows && fl_copy_rows(rows, gw, false);
        mft_tensor_release(rows);
    }
    if (ok) {
        const mft_tensor *ins[1] = {p}, *outs[1] = {gw};
        mft__kernel_end(t0, &(mft__kernel_info){"flatten_linear_backward",
                                                "flatten_linear.scatter_weight_grad",
                                                MFT_FORMAT_COUNT, MFT_FORMAT_COUNT, p->dtype, 1, 1,
                                                ins, outs, 0, false});
    } else {
        mft_tensor_release(gw);
        gw = NULL;
    }
    mft_tensor_release(p);
    return gw;
}

/* X_phys (N, S): x's images as rows of a plain packed matrix over x's own
 * storage (internal reference). */
static mft_tensor *fl_x_phys(const char *fn, const mft_tensor *x, const fl_map *m) {
    const int64_t sz[2] = {x->sizes[0], m->S}, st[2] = {m->S, 1};
    return mft__tensor_new(fn, x->storage, x->offset, 2, sz, st, x->dtype);
}

/* ---------------------------------------------------------------- checks */
static bool fl_check(const char *fn, const mft_tensor *x, const mft_tensor *w,
                     const mft_tensor *b) {
    char d1[MFT__DIMS_BUF], d2[MFT__DIMS_BUF];
    if (x->ndim < 2 || w->ndim != 2) {
        mft__set_error(MFT_ERR_RANK, "%s: expected x of rank >= 2 (N, ...) and a 2-D weight "
                       "(out, in), got ranks %d and %d", fn, x->ndim, w->ndim);
        return false;
    }
    const mft_tensor *ts[3] = {x, w, b};
    const char *names[3] = {"x", "w", "b"};
    for (int i = 0; i < 3; i++) {
        if (!ts[i]) continue;
        if (ts[i]->dtype != MFT_F32 && ts[i]->dtype != MFT_F64) {
            mft__set_error(MFT_ERR_DTYPE, "%s: dtype %s of '%s' is not supported (f32 and f64 "
                           "only)", fn, mft_dtype_name(ts[i]->dtype), names[i]);
            return false;
        }
        if (ts[i]->dtype != x->dtype) {
            mft__set_error(MFT_ERR_DTYPE, "%s: expected 'x' and '%s' to have the same dtype, got "
                           "%s and %s", fn, names[i], mft_dtype_name(x->dtype),
                           mft_dtype_name(ts[i]->dtype));
            return false;
        }
    }
    int64_t K = 1;
    for (int d = 1; d < x->ndim; d++) K *= x->sizes[d];
    if (w->sizes[1] != K) {
        mft__set_error(MFT_ERR_SHAPE, "%s: x of sizes %s flattens to %lld features per image, "
                       "but the weight of sizes %s expects %lld", fn,
                       mft__fmt_dims(d1, sizeof d1, x->ndim, x->sizes), (long long)K,
                       mft__fmt_dims(d2, sizeof d2, 2, w->sizes), (long long)w->sizes[1]);
        return false;
    }
    if (b && (b->ndim != 1 || b->sizes[0] != w->sizes[0])) {
        mft__set_error(MFT_ERR_SHAPE, "%s: bias of sizes %s should be 1-D of size %lld (the "
                       "weight's out features)", fn,
                       mft__fmt_dims(d1, sizeof d1, b->ndim, b->sizes), (long long)w->sizes[0]);
        return false;
    }
    return true;
}

/* Whether the fused path may run: a non-empty x, plain w and b, and x's
 * images dense (m built, to be freed by the caller). */
static mft_status fl_native(const char *fn, const mft_tensor *x, const mft_tensor *w,
                            const mft_tensor *b, fl_map *m, bool *native) {
    *native = false;
    memset(m, 0, sizeof *m);
    if (x->numel == 0 || mft__is_blocked(w) || mft__is_blocked(b)) return MFT_OK;
    return fl_map_build(fn, x, m, native);
}

/* ---------------------------------------------------------------- forward */
/* The forward; *wp_out (when not NULL) receives W_phys of the fused path
 * (an internal reference; NULL on the composition) for the tape node. */
static mft_tensor *fl_impl(const mft_tensor *x, const mft_tensor *w, const mft_tensor *b,
                           mft_tensor **wp_out) {
    static const char fn[] = "mft_flatten_linear";
    fl_map m;
    bool native = false;
    if (fl_native(fn, x, w, b, &m, &native) != MFT_OK) return NULL;
    mft__scope_suspend();
    mft_tensor *y = NULL;
    if (native) {
        mft_tensor *xp = fl_x_phys(fn, x, &m);
        mft_tensor *wp = xp ? fl_gather_w(fn, w, &m) : NULL;
        y = wp ? mft_linear(xp, wp, b) : NULL;
        if (y) mft__rule_apply1(y, MFT__RULE_FLATTEN_LINEAR, "flatten_linear", x);
        mft_tensor_release(xp);
        if (y && wp_out) *wp_out = mft_tensor_retain(wp);
        mft_tensor_release(wp);
    } else { /* the composition: flatten copies (counted, cause reshape) */
        mft_tensor *f = mft_flatten(x, 1, -1);
        y = f ? mft_linear(f, w, b) : NULL;
        mft_tensor_release(f);
    }
    mft__scope_resume();
    fl_map_free(&m);
    return mft__linalg_hand_over(fn, y);
}

/* ---------------------------------------------------------------- backward */
/* Column sums of g (N, O), any strides, in double with rows in order (the
 * order mft_linear_backward's bias gradient sums in): (O) CONTIGUOUS. */
typedef struct fl_colsum_job {
    const char *g;
    char *y;
    int64_t n, gs0, gs1;
    mft_dtype dt;
} fl_colsum_job;

static void fl_colsum_range(void *ctx, int64_t begin, int64_t end) {
    const fl_colsum_job *j = ctx;
    const size_t es = mft__elem_size(j->dt);
    for (int64_t o = begin; o < end; o++) {
        double acc = 0;
        for (int64_t i = 0; i < j->n; i++) {
            const char *p = j->g + (size_t)(i * j->gs0 + o * j->gs1) * es;
            acc += j->dt == MFT_F32 ? (double)*(const float *)(const void *)p
                                    : *(const double *)(const void *)p;
        }
        mft__store(j->dt, j->y + (size_t)o * es, acc);
    }
}

static mft_tensor *fl_colsum(const char *fn, const mft_tensor *g) {
    const int64_t O = g->sizes[1];
    mft_tensor *y = mft__tensor_alloc(fn, 1, &O, g->dtype, MFT_CONTIGUOUS);
    if (!y) return NULL;
    const fl_colsum_job j = {mft__tensor_ptr(g), mft__tensor_ptr(y), g->sizes[0], g->strides[0],
                             g->strides[1], g->dtype};
    const int64_t grain = 65536 / (g->sizes[0] > 0 ? g->sizes[0] : 1);
    mft__parallel_for(0, O, grain > 0 ? grain : 1, fl_colsum_range, (void *)&j);
    return y;
}

/* grad_x of the fused path: G @ W_g as the memory of a tensor in x's
 * gradient format (internal reference), pad lanes exactly 0. */
static mft_tensor *fl_grad_x(const char *fn, const mft_tensor *g, const mft_tensor *x,
                             const mft_tensor *w, const fl_map *xm, const mft_tensor *wx) {
    const mft_format gf = mft__rule_grad_format(x->tag, x->ndim);
    mft_layout gl, g1;
    int64_t one[MFT_MAX_DIMS];
    memcpy(one, x->sizes, sizeof(int64_t) * (size_t)x->ndim);
    one[0] = 1;
    if (mft__layout_for_format(fn, x->ndim, x->sizes, gf, &gl) != MFT_OK ||
        mft__layout_for_format(fn, x->ndim, one, gf, &g1) != MFT_OK)
        return NULL;
    /* the map of gl's images, read off a one-image tensor of that layout */
    mft_tensor *probe = mft__tensor_alloc_layout_ex(fn, &g1, x->dtype, false);
    if (!probe) return NULL;
    fl_map gm;
    bool dense = false;
    mft_tensor *res = NULL;
    if (fl_map_build(fn, probe, &gm, &dense) != MFT_OK) goto out;
    if (!dense) { /* a packed layout always has dense images */
        mft__set_error(MFT_ERR_INTERNAL, "%s: the %s gradient layout has no dense images", fn,
                       mft_format_name(gf));
        goto out;
    }
    mft_tensor *wg = fl_map_equal(&gm, xm) ? mft_tensor_retain((mft_tensor *)wx)
                                           : fl_gather_w(fn, w, &gm);
    mft_tensor *p = wg ? mft_matmul(g, wg) : NULL; /* (N, S) packed */
    mft_tensor_release(wg);
    if (p) {
        res = mft__tensor_new_layout(fn, p->storage, p->offset, &gl, x->dtype);
        if (res && gm.K < gm.S) { /* pad lanes: exactly 0 */
            const size_t es = mft__elem_size(x->dtype);
            char *base = mft__tensor_ptr(res);
            for (int64_t n = 0; n < x->sizes[0]; n++)
                for (int64_t s = 0; s < gm.S; s++)
                    if (gm.col[s] < 0) mft__store(x->dtype, base + (size_t)(n * gm.S + s) * es, 0.0);
        }
        mft_tensor_release(p);
    }
    fl_map_free(&gm);
    if (res) { /* the tag of the format asked for (no copy: res is packed in it) */
        mft__cause_push(MFT_CAUSE_GRADIENT, "flatten_linear");
        mft_tensor *t = mft_contiguous(res, gf);
        mft__cause_pop();
        mft_tensor_release(res);
        res = t;
    }
out:
    mft_tensor_release(probe);
    return res;
}

/* The composition's backward (x not native): linear_backward on the
 * flattened x, grad_x reshaped back and converted to x's gradient format
 * (the flatten's copy in reverse, cause reshape). res[i] is filled where
 * want[i]. */
static bool fl_backward_composed(const mft_tensor *g, const mft_tensor *x, const mft_tensor *w,
                                 const bool *want, mft_tensor **res) {
    mft_tensor *f = mft_flatten(x, 1, -1);
    if (!f) return false;
    mft_tensor *gxf = NULL;
    bool ok = mft_linear_backward(g, f, w, want[0] ? &gxf : NULL, want[1] ? &res[1] : NULL,
                                  want[2] ? &res[2] : NULL) == MFT_OK;
    mft_tensor_release(f);
    if (ok && want[0]) {
        mft_tensor *v = mft_reshape(gxf, x->ndim, x->sizes);
        mft__cause_push(MFT_CAUSE_RESHAPE, "flatten_linear");
        res[0] = v ? mft_contiguous(v, mft__rule_grad_format(x->tag, x->ndim)) : NULL;
        mft__cause_pop();
        mft_tensor_release(v);
        ok = res[0] != NULL;
    }
    mft_tensor_release(gxf);
    return ok;
}

/* The fused backward (Note [Linear over the physical order]); wp is the
 * forward's W_phys, or NULL to gather it again. */
static bool fl_backward_fused(const char *fn, const mft_tensor *g, const mft_tensor *x,
                              const mft_tensor *w, const mft_tensor *wp_saved, const fl_map *m,
                              const bool *want, mft_tensor **res) {
    bool ok = true;
    if (want[0]) {
        mft_tensor *wp = wp_saved ? mft_tensor_retain((mft_tensor *)wp_saved) : fl_gather_w(fn, w, m);
        res[0] = wp ? fl_grad_x(fn, g, x, w, m, wp) : NULL;
        mft_tensor_release(wp);
        ok = res[0] != NULL;
    }
    if (ok && want[1]) {
        mft_tensor *xp = fl_x_phys(fn, x, m);
        mft_tensor *gt = mft_transpose(g, 0, 1);
        res[1] = fl_scatter_w(fn, xp && gt ? mft_matmul(gt, xp) : NULL, m);
        mft_tensor_release(xp);
        mft_tensor_release(gt);
        ok = res[1] != NULL;
    }
    if (ok && want[2]) {
        res[2] = fl_colsum(fn, g);
        ok = res[2] != NULL;
    }
    return ok;
}

/* mft_flatten_linear_backward, with the forward's W_phys when the tape
 * node kept it (wp, may be NULL). */
static mft_status fl_backward(const mft_tensor *grad_out, const mft_tensor *x,
                              const mft_tensor *w, const mft_tensor *wp, mft_tensor **grad_x,
                              mft_tensor **grad_w, mft_tensor **grad_b) {
    static const char fn[] = "mft_flatten_linear_backward";
    char d1[MFT__DIMS_BUF], d2[MFT__DIMS_BUF];
    mft_tensor **outs[3] = {grad_x, grad_w, grad_b};
    for (int i = 0; i < 3; i++)
        if (outs[i]) *outs[i] = NULL;
    if (!grad_out || !x || !w) {
        mft__null_arg(fn, !grad_out ? "grad_out" : !x ? "x" : "w");
        return MFT_ERR_NULL;
    }
    if (!fl_check(fn, x, w, NULL)) return mft_last_error();
    if (grad_out->dtype != x->dtype) {
        mft__set_error(MFT_ERR_DTYPE, "%s: expected 'x' and 'grad_out' to have the same dtype, "
                       "got %s and %s", fn, mft_dtype_name(x->dtype),
                       mft_dtype_name(grad_out->dtype));
        return MFT_ERR_DTYPE;
    }
    const int64_t N = x->sizes[0], O = w->sizes[0], ysz[2] = {N, O};
    if (grad_out->ndim != 2 || grad_out->sizes[0] != N || grad_out->sizes[1] != O) {
        mft__set_error(MFT_ERR_SHAPE, "%s: grad_out of sizes %s does not match the output sizes "
                       "%s", fn, mft__fmt_dims(d1, sizeof d1, grad_out->ndim, grad_out->sizes),
                       mft__fmt_dims(d2, sizeof d2, 2, ysz));
        return MFT_ERR_SHAPE;
    }
    const bool want[3] = {grad_x != NULL, grad_w != NULL, grad_b != NULL};
    if (!want[0] && !want[1] && !want[2]) return MFT_OK;
    fl_map m;
    bool native = false;
    if (fl_native(fn, x, w, NULL, &m, &native) != MFT_OK) return mft_last_error();
    mft_tensor *res[3] = {NULL, NULL, NULL};
    mft__scope_suspend();
    mft_tensor *g = (mft_tensor *)grad_out, *gplain = NULL;
    if (mft__is_blocked(grad_out)) { /* a blocked (N, O) gradient: read through a plain copy */
        mft__cause_push(MFT_CAUSE_FALLBACK, "flatten_linear_backward");
        g = gplain = mft_contiguous(grad_out, MFT_CONTIGUOUS);
        mft__cause_pop();
    }
    if (native && wp && (wp->ndim != 2 || wp->sizes[1] != m.S)) wp = NULL; /* not this map's */
    bool ok = g && (native ? fl_backward_fused(fn, g, x, w, wp, &m, want, res)
                           : fl_backward_composed(g, x, w, want, res));
    mft_tensor_release(gplain);
    mft__scope_resume();
    fl_map_free(&m);
    for (int i = 0; i < 3 && ok; i++)
        if (want[i]) {
            *outs[i] = mft__retain_result(fn, res[i]);
            ok = *outs[i] != NULL;
        }
    for (int i = 0; i < 3; i++) {
        mft_tensor_release(res[i]);
        if (!ok && outs[i]) {
            mft_tensor_release(*outs[i]);
            *outs[i] = NULL;
        }
    }
    return ok ? MFT_OK : mft__relabel_error(fn);
}

mft_status mft_flatten_linear_backward(const mft_tensor *grad_out, const mft_tensor *x,
                                       const mft_tensor *w, mft_tensor **grad_x,
                                       mft_tensor **grad_w, mft_tensor **grad_b) {
    return fl_backward(grad_out, x, w, NULL, grad_x, grad_w, grad_b);
}

/* ---------------------------------------------------------------- autograd
 * Node "flatten_linear": inputs {x, w, b} (b may be NULL), saved {x, w,
 * W_phys} (W_phys NULL on the composition; Note [Tape] in mft/autograd.h).
 * Its backward computes only the gradients whose inputs need grad, reusing
 * the forward's W_phys for grad_x (no second gather); grad_x comes in x's
 * format (docs/spec.md §5), so the engine converts nothing. The forward
 * runs with grad mode off, so the inner linear records nothing. */
typedef struct fl_ag_params {
    bool has_bias;
} fl_ag_params;

static mft_status fl_node_backward(const mft__ag_node *n, mft_tensor *const *gout,
                                   mft_tensor **gin) {
    const fl_ag_params *p = n->params;
    mft_tensor **gx = n->in[0].needs_grad ? &gin[0] : NULL;
    mft_tensor **gw = n->in[1].needs_grad ? &gin[1] : NULL;
    mft_tensor **gb = p->has_bias && n->in[2].needs_grad ? &gin[2] : NULL;
    if (!gx && !gw && !gb) return MFT_OK;
    return fl_backward(gout[0], n->saved[0], n->saved[1], n->saved[2], gx, gw, gb);
}

mft_tensor *mft_flatten_linear(const mft_tensor *x, const mft_tensor *w, const mft_tensor *b) {
    static const char fn[] = "mft_flatten_linear";
    if (!x || !w) {
        mft__null_arg(fn, !x ? "x" : "w");
        return NULL;
    }
    if (!fl_check(fn, x, w, b)) return NULL;
    const mft_tensor *ins[3] = {x, w, b};
    if (!mft__ag_wants(3, ins)) return fl_impl(x, w, b, NULL);
    const bool grad_was = mft_set_grad_enabled(false);
    mft_tensor *wp = NULL;
    mft_tensor *y = fl_impl(x, w, b, &wp);
    mft_set_grad_enabled(grad_was);
    const fl_ag_params p = {b != NULL};
    const mft_tensor *saved[3] = {x, w, wp};
    if (y && mft__ag_record(fn, "flatten_linear", fl_node_backward, 3, ins, 1, &y, 3, saved, &p,
                            sizeof p) != MFT_OK) {
        mft__ag_drop_result(y);
        y = NULL;
    }
    mft_tensor_release(wp);
    return y;
}
