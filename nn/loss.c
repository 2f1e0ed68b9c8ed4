/* nn/loss.c — the losses of mft/loss.h: cross_entropy and nll_loss (one
 * fused "class loss" kernel), mse_loss and binary_cross_entropy_with_logits
 * (one elementwise-loss kernel), their backward functions and tape nodes,
 * and the argmax accuracy count.
 *
 * Note [Loss positions]
 * A class loss reads its input as rows of C values (the class dim, with its
 * own stride) at P positions: the other dims, walked in logical row-major
 * order by lw_walk, which keeps one element offset per tensor (logits,
 * target, output or grad_out, gradients). So every layout — NCHW, NHWC,
 * padded, sliced — is read in place with no conversion. Cross entropy is
 * one pass per row: max, then sum exp(x - max) (and the weighted sum of x
 * for label smoothing) in double, then the loss from lse = max + log(sum);
 * the backward recomputes lse and writes each gradient element once. No
 * temporary tensors: the (64, 10) F32 training loss costs two small loops.
 *
 * Reductions are deterministic for every thread count: positions are cut
 * into fixed blocks of LOSS_BLOCK, each block's partial sums (double) are
 * stored, and the partials are added in block order. Class indices are
 * validated (and the MEAN denominator summed) in one serial pass before
 * anything is computed or allocated. */
#include <math.h>
#include <string.h>
#include "autograd_internal.h"
#include "mft/loss.h"
#include "ops_internal.h"
#include "blocked_outputs.h"

#define LOSS_BLOCK 256        /* positions / elements per reduction block */
#define LOSS_GRAIN_ELEMS 32768 /* at least this many elements per parallel chunk */
#define LOSS_STACK_BLOCKS 64  /* partials kept on the stack up to this many blocks */

/* ---------------------------------------------------------------- walker */
#define LW_MAXT 6

typedef struct lw_walk {
    int nd;                          /* rank of the walked shape */
    int64_t sizes[MFT_MAX_DIMS];
    int64_t st[LW_MAXT][MFT_MAX_DIMS]; /* element strides per tensor slot (0: unused) */
    int64_t idx[MFT_MAX_DIMS];
    int64_t off[LW_MAXT];
} lw_walk;

/* Positions the walk on linear (row-major) index p. */
static void lw_seek(lw_walk *w, int64_t p) {
    for (int k = 0; k < LW_MAXT; k++) w->off[k] = 0;
    for (int d = w->nd - 1; d >= 0; d--) {
        const int64_t s = w->sizes[d];
        w->idx[d] = s ? p % s : 0;
        p = s ? p / s : 0;
        for (int k = 0; k < LW_MAXT; k++) w->off[k] += w->idx[d] * w->st[k][d];
    }
}

static inline void lw_next(lw_walk *w) {
    for (int d = w->nd - 1; d >= 0; d--) {
        for (int k = 0; k < LW_MAXT; k++) w->off[k] += w->st[k][d];
        if (++w->idx[d] < w->sizes[d]) return;
        for (int k = 0; k < LW_MAXT; k++) w->off[k] -= w->st[k][d] * w->sizes[d];
        w->idx[d] = 0;
    }
}

/* Slot k gets t's strides with dim `skip` removed (skip < 0: all dims). */
static void lw_set(lw_walk *w, int k, const mft_tensor *t, int skip) {
    int j = 0;
    for (int d = 0; d < t->ndim; d++)
        if (d != skip) w->st[k][j++] = t->strides[d];
}

/* Strides of w broadcast to (nd, sizes) (0 on broadcast dims); false if w
 * does not broadcast to exactly these sizes. */
static bool lw_bcast(const mft_tensor *w, int nd, const int64_t *sizes, int64_t *st) {
    if (w->ndim > nd) return false;
    const int lead = nd - w->ndim;
    for (int d = 0; d < lead; d++) st[d] = 0;
    for (int j = 0; j < w->ndim; j++) {
        const int d = lead + j;
        if (w->sizes[j] == sizes[d]) st[d] = sizes[d] == 1 ? 0 : w->strides[j];
        else if (w->sizes[j] == 1) st[d] = 0;
        else return false;
    }
    return true;
}

/* ---------------------------------------------------------------- shared helpers */
static const char *loss_red_name(mft_reduction r) {
    return r == MFT_REDUCTION_NONE ? "none" : r == MFT_REDUCTION_MEAN ? "mean" : "sum";
}

static mft_status loss_check_red(const char *fn, mft_reduction r) {
    if ((unsigned)r < MFT_REDUCTION_COUNT) return MFT_OK;
    mft__set_error(MFT_ERR_INVALID, "%s: reduction %d is not NONE, MEAN or SUM", fn, (int)r);
    return MFT_ERR_INVALID;
}

static mft_status loss_check_float(const char *fn, const char *what, const mft_tensor *t) {
    if (t->dtype == MFT_F32 || t->dtype == MFT_F64) return MFT_OK;
    mft__set_error(MFT_ERR_DTYPE, "%s: %s must be f32 or f64, got %s", fn, what,
                   mft_dtype_name(t->dtype));
    return MFT_ERR_DTYPE;
}

static mft_status loss_check_same_dtype(const char *fn, const char *what, const mft_tensor *t,
                                        const mft_tensor *ref, const char *refname) {
    if (t->dtype == ref->dtype) return MFT_OK;
    mft__set_error(MFT_ERR_DTYPE, "%s: %s is %s but %s is %s", fn, what, mft_dtype_name(t->dtype),
                   refname, mft_dtype_name(ref->dtype));
    return MFT_ERR_DTYPE;
}

static mft_status loss_check_sizes(const char *fn, const char *what, const mft_tensor *t,
                                   int nd, const int64_t *sizes, const char *refname) {
    if (t->ndim == nd && !memcmp(t->sizes, sizes, (size_t)nd * sizeof(int64_t))) return MFT_OK;
    char a[MFT__DIMS_BUF], b[MFT__DIMS_BUF];
    mft__set_error(MFT_ERR_SHAPE, "%s: %s has sizes %s, expected %s (%s)", fn, what,
                   mft__fmt_dims(a, sizeof a, t->ndim, t->sizes), mft__fmt_dims(b, sizeof b, nd, sizes),
                   refname);
    return MFT_ERR_SHAPE;
}

/* grad_out of a backward: floating; the forward result's sizes for NONE,
 * one element otherwise. */
static mft_status loss_check_gout(const char *fn, const mft_tensor *g, mft_reduction r, int nd,
                                  const int64_t *sizes) {
    mft_status st = loss_check_float(fn, "grad_out", g);
    if (st != MFT_OK) return st;
    if (r == MFT_REDUCTION_NONE) return loss_check_sizes(fn, "grad_out", g, nd, sizes, "the loss");
    if (g->numel == 1) return MFT_OK;
    char a[MFT__DIMS_BUF];
    mft__set_error(MFT_ERR_SHAPE, "%s: grad_out of sizes %s must have one element for reduction %s",
                   fn, mft__fmt_dims(a, sizeof a, g->ndim, g->sizes), loss_red_name(r));
    return MFT_ERR_SHAPE;
}

/* A fresh tensor laid out like x (empty_like PRESERVE): x's strides when x
 * is dense, else dense in x's dim order; x's tag. Not in any scope. */
static mft_tensor *loss_alloc_like(const char *fn, const mft_tensor *x) {
    int64_t st[MFT_MAX_DIMS];
    mft__infer_dense_strides(x->ndim, x->sizes, x->strides, st);
    mft_tensor *t = mft__tensor_alloc_strided(fn, x->ndim, x->sizes, st, x->dtype);
    if (t && x->ndim >= 3 && x->ndim <= 5) mft__rule_apply1(t, MFT__RULE_LOSS, fn + 4, x);
    return t;
}

/* Block partials: on the stack when few, else allocated. */
typedef struct loss_parts {
    double stack[LOSS_STACK_BLOCKS * 3];
    double *p;
} loss_parts;

static mft_status loss_parts_init(const char *fn, loss_parts *lp, int64_t nblocks) {
    lp->p = lp->stack;
    if (nblocks <= LOSS_STACK_BLOCKS) return MFT_OK;
    lp->p = mft__alloc_or_err(fn, (size_t)nblocks * 3 * sizeof(double), _Alignof(double));
    return lp->p ? MFT_OK : MFT_ERR_NOMEM;
}
static void loss_parts_free(loss_parts *lp) {
    if (lp->p != lp->stack) mft__free(lp->p);
}

/* Runs fn over blocks [0, nblocks), in parallel when there is enough work. */
static void loss_for_blocks(int64_t nblocks, int64_t elems_per_block, mft__range_fn fn,
                            void *ctx) {
    int64_t grain = elems_per_block > 0 ? LOSS_GRAIN_ELEMS / elems_per_block : nblocks;
    if (grain < 1) grain = 1;
    mft__parallel_for(0, nblocks, grain, fn, ctx);
}

/* The result of a forward/backward made with the scope suspended, handed
 * to the caller's scope (one reference). */
static mft_tensor *loss_finish(const char *fn, mft_tensor *t) {
    mft__scope_resume();
    if (!t) return NULL;
    mft_tensor *r = mft__retain_result(fn, t);
    mft_tensor_release(t);
    return r;
}

/* ================================================================ class losses */
typedef enum cls_mode { CLS_CE, CLS_CE_PROB, CLS_NLL } cls_mode;

/* Validated geometry and constants of one class-loss call. */
typedef struct cls_geom {
    cls_mode mode;
    int cdim;                     /* class dim of the input */
    int64_t C, P;                 /* classes, positions */
    int pnd;                      /* rank of the positions */
    int64_t psizes[MFT_MAX_DIMS];
    double sw;                    /* sum of weight[t] over non-ignored targets */
    double wsum;                  /* sum of all class weights (C without weight) */
} cls_geom;

/* Validates a class-loss call and fills g (sw and wsum included). */
static mft_status cls_setup(const char *fn, bool ce, const mft_tensor *x, const mft_tensor *target,
                            const mft_tensor *weight, int64_t ignore_index, double eps,
                            mft_reduction red, cls_geom *g) {
    const char *xname = ce ? "logits" : "logp";
    mft_status st;
    if ((st = loss_check_red(fn, red)) != MFT_OK) return st;
    if ((st = loss_check_float(fn, xname, x)) != MFT_OK) return st;
    if (x->ndim < 1) {
        mft__set_error(MFT_ERR_RANK, "%s: %s must have rank >= 1 ((C), (N, C) or (N, C, d...)), got rank 0",
                       fn, xname);
        return MFT_ERR_RANK;
    }
    if (ce && !(eps >= 0.0 && eps <= 1.0)) {
        mft__set_error(MFT_ERR_INVALID, "%s: label_smoothing must be in [0, 1], got %g", fn, eps);
        return MFT_ERR_INVALID;
    }
    memset(g, 0, sizeof *g);
    g->cdim = x->ndim == 1 ? 0 : 1;
    g->C = x->sizes[g->cdim];
    g->P = 1;
    for (int d = 0; d < x->ndim; d++) {
        if (d == g->cdim) continue;
        g->psizes[g->pnd++] = x->sizes[d];
        g->P *= x->sizes[d];
    }
    if (weight) {
        char a[MFT__DIMS_BUF];
        if (weight->ndim != 1 || weight->sizes[0] != g->C) {
            mft__set_error(MFT_ERR_SHAPE, "%s: weight of sizes %s must have sizes [%lld] (one per class)",
                           fn, mft__fmt_dims(a, sizeof a, weight->ndim, weight->sizes), (long long)g->C);
            return MFT_ERR_SHAPE;
        }
        if ((st = loss_check_same_dtype(fn, "weight", weight, x, xname)) != MFT_OK) return st;
    }
    if (target->dtype == MFT_I64) {
        g->mode = ce ? CLS_CE : CLS_NLL;
        if ((st = loss_check_sizes(fn, "target (class indices)", target, g->pnd, g->psizes,
                                   "the input's sizes without the class dim")) != MFT_OK)
            return st;
    } else if (ce && (target->dtype == MFT_F32 || target->dtype == MFT_F64)) {
        g->mode = CLS_CE_PROB;
        if ((st = loss_check_same_dtype(fn, "target (probabilities)", target, x, xname)) != MFT_OK)
            return st;
        if ((st = loss_check_sizes(fn, "target (probabilities)", target, x->ndim, x->sizes,
                                   "the logits' sizes")) != MFT_OK)
            return st;
    } else {
        mft__set_error(MFT_ERR_DTYPE, "%s: target must be i64 class indices%s, got %s", fn,
                       ce ? " or f32/f64 class probabilities" : "", mft_dtype_name(target->dtype));
        return MFT_ERR_DTYPE;
    }
    const char *wp = weight ? mft__tensor_ptr(weight) : NULL;
    const size_t wes = weight ? mft__elem_size(weight->dtype) : 0;
    g->wsum = weight ? 0.0 : (double)g->C;
    for (int64_t c = 0; weight && c < g->C; c++)
        g->wsum += mft__load(weight->dtype, wp + (size_t)(c * weight->strides[0]) * wes);
    if (g->mode == CLS_CE_PROB) return MFT_OK;
    /* class indices: all in range (or ignored) before anything runs */
    lw_walk w;
    memset(&w, 0, sizeof w);
    w.nd = g->pnd;
    memcpy(w.sizes, g->psizes, sizeof w.sizes);
    lw_set(&w, 1, target, -1);
    lw_seek(&w, 0);
    const int64_t *tp = (const int64_t *)(const void *)mft__tensor_ptr(target);
    double sw = 0.0;
    for (int64_t p = 0; p < g->P; p++, lw_next(&w)) {
        const int64_t t = tp[w.off[1]];
        if (t == ignore_index) continue;
        if (t < 0 || t >= g->C) {
            char a[MFT__DIMS_BUF];
            mft__set_error(MFT_ERR_INVALID,
                           "%s: target %lld at position %s is out of bounds for %lld classes "
                           "(ignore_index %lld)",
                           fn, (long long)t, mft__fmt_dims(a, sizeof a, g->pnd, w.idx),
                           (long long)g->C, (long long)ignore_index);
            return MFT_ERR_INVALID;
        }
        sw += weight ? mft__load(weight->dtype, wp + (size_t)(t * weight->strides[0]) * wes) : 1.0;
    }
    g->sw = sw;
    return MFT_OK;
}

/* One call's kernel context. Walker slots: 0 input, 1 target, 2 output
 * (forward NONE) or grad_out (backward NONE), 3 grad input, 4 grad target. */
typedef struct cls_ctx {
    const cls_geom *g;
    lw_walk w0;
    const char *x, *t, *wt;   /* data pointers (wt: weight or NULL) */
    char *out, *gx, *gt;
    const char *gout;
    mft_dtype gout_dt;
    int64_t xcs, tcs, wcs, gcs, gtcs; /* class-dim strides */
    int64_t ignore;
    double eps;
    double scale;               /* backward: grad_out multiplier (MEAN / SUM folded in) */
    bool per_pos;               /* NONE: output / grad_out per position */
    double *part;               /* forward: 3 partial sums per block */
} cls_ctx;

/* log(sum_k exp(x[k * xcs])) over a row of C classes, shifted by the
 * maximum (NaN propagates), in double: the forward and the backward share it. */
#define CLS_LSE(D)                                                                              \
    static inline double cls_lse_##D(const MFT__T_##D *xr, int64_t xcs, int64_t C) {            \
        double m = -INFINITY;                                                                   \
        for (int64_t k = 0; k < C; k++) {                                                       \
            const double v = (double)xr[k * xcs];                                               \
            if (v > m || v != v) m = v;                                                         \
        }                                                                                       \
        double s = 0.0;                                                                         \
        for (int64_t k = 0; k < C; k++) s += exp((double)xr[k * xcs] - m);                      \
        return m + log(s);                                                                      \
    }
CLS_LSE(F32)
CLS_LSE(F64)

#define CLS_KERNELS(D)                                                                          \
    static void cls_fwd_##D(void *vc, int64_t b0, int64_t b1) {                                 \
        typedef MFT__T_##D T;                                                                   \
        const cls_ctx *c = vc;                                                                  \
        const cls_geom *g = c->g;                                                               \
        const T *xb = (const T *)(const void *)c->x, *wb = (const T *)(const void *)c->wt;      \
        const int64_t C = g->C, xcs = c->xcs, wcs = c->wcs;                                     \
        const double eps = c->eps, epsc = C > 0 ? eps / (double)C : 0.0;                        \
        for (int64_t b = b0; b < b1; b++) {                                                     \
            const int64_t p0 = b * LOSS_BLOCK;                                                  \
            const int64_t p1 = p0 + LOSS_BLOCK < g->P ? p0 + LOSS_BLOCK : g->P;                 \
            lw_walk w = c->w0;                                                                  \
            lw_seek(&w, p0);                                                                    \
            double s_main = 0.0, s_w = 0.0, s_sm = 0.0;                                         \
            for (int64_t p = p0; p < p1; p++, lw_next(&w)) {                                    \
                const T *xr = xb + w.off[0];                                                    \
                double val;                                                                     \
                if (g->mode == CLS_NLL) {                                                       \
                    const int64_t t = ((const int64_t *)(const void *)c->t)[w.off[1]];          \
                    if (t == c->ignore) {                                                       \
                        val = 0.0;                                                              \
                    } else {                                                                    \
                        const double wt = wb ? (double)wb[t * wcs] : 1.0;                       \
                        val = -wt * (double)xr[t * xcs];                                        \
                        s_main += val;                                                          \
                        s_w += wt;                                                              \
                    }                                                                           \
                } else {                                                                        \
                    const double lse = cls_lse_##D(xr, xcs, C);                                 \
                    if (g->mode == CLS_CE_PROB) {                                               \
                        const T *tr = (const T *)(const void *)c->t + w.off[1];                 \
                        double l = 0.0;                                                         \
                        for (int64_t k = 0; k < C; k++) {                                       \
                            const double q = (double)tr[k * c->tcs] * (1.0 - eps) + epsc;       \
                            const double wk = wb ? (double)wb[k * wcs] : 1.0;                   \
                            l += wk * q * (lse - (double)xr[k * xcs]);                          \
                        }                                                                       \
                        val = l;                                                                \
                        s_main += l;                                                            \
                    } else {                                                                    \
                        const int64_t t = ((const int64_t *)(const void *)c->t)[w.off[1]];      \
                        if (t == c->ignore) {                                                   \
                            val = 0.0;                                                          \
                        } else {                                                                \
                            const double wt = wb ? (double)wb[t * wcs] : 1.0;                   \
                            const double nll = wt * (lse - (double)xr[t * xcs]);                \
                            double sm = 0.0;                                                    \
                            if (eps > 0.0) {                                                    \
                                for (int64_t k = 0; k < C; k++)                                 \
                                    sm += (wb ? (double)wb[k * wcs] : 1.0) *                    \
                                          (lse - (double)xr[k * xcs]);                          \
                            }                                                                   \
                            val = eps > 0.0 ? (1.0 - eps) * nll + epsc * sm : nll;              \
                            s_main += nll;                                                      \
                            s_w += wt;                                                          \
                            s_sm += sm;                                                         \
                        }                                                                       \
                    }                                                                           \
                }                                                                               \
                if (c->per_pos) ((T *)(void *)c->out)[w.off[2]] = (T)val;                       \
            }                                                                                   \
            if (c->part) {                                                                      \
                c->part[3 * b] = s_main;                                                        \
                c->part[3 * b + 1] = s_w;                                                       \
                c->part[3 * b + 2] = s_sm;                                                      \
            }                                                                                   \
        }                                                                                       \
    }                                                                                           \
    static void cls_bwd_##D(void *vc, int64_t b0, int64_t b1) {                                 \
        typedef MFT__T_##D T;                                                                   \
        const cls_ctx *c = vc;                                                                  \
        const cls_geom *g = c->g;                                                               \
        const T *xb = (const T *)(const void *)c->x, *wb = (const T *)(const void *)c->wt;      \
        T *gb = (T *)(void *)c->gx, *gtb = (T *)(void *)c->gt;                                  \
        const int64_t C = g->C, xcs = c->xcs, wcs = c->wcs, gcs = c->gcs;                       \
        const double eps = c->eps, epsc = C > 0 ? eps / (double)C : 0.0;                        \
        const size_t ges = mft__elem_size(c->gout_dt);                                          \
        for (int64_t b = b0; b < b1; b++) {                                                     \
            const int64_t p0 = b * LOSS_BLOCK;                                                  \
            const int64_t p1 = p0 + LOSS_BLOCK < g->P ? p0 + LOSS_BLOCK : g->P;                 \
            lw_walk w = c->w0;                                                                  \
            lw_seek(&w, p0);                                                                    \
            for (int64_t p = p0; p < p1; p++, lw_next(&w)) {                                    \
                const T *xr = xb + w.off[0];                                                    \
                T *gr = gb ? gb + w.off[3] : NULL;                                              \
                const double go =                                                               \
                    c->per_pos ? mft__load(c->gout_dt, c->gout + (size_t)w.off[2] * ges) : 1.0; \
                if (g->mode == CLS_NLL) {                                                       \
                    const int64_t t = ((const int64_t *)(const void *)c->t)[w.off[1]];          \
                    for (int64_t k = 0; k < C; k++) gr[k * gcs] = (T)0;                         \
                    if (t != c->ignore)                                                         \
                        gr[t * gcs] = (T)(-go * c->scale * (wb ? (double)wb[t * wcs] : 1.0)); \
                    continue;                                                                   \
                }                                                                               \
                const double lse = cls_lse_##D(xr, xcs, C);                                     \
                if (g->mode == CLS_CE_PROB) {                                                   \
                    const T *tr = (const T *)(const void *)c->t + w.off[1];                     \
                    const double a = go * c->scale;                                         \
                    double Q = 0.0;                                                             \
                    for (int64_t k = 0; k < C; k++)                                             \
                        Q += (wb ? (double)wb[k * wcs] : 1.0) *                                 \
                             ((double)tr[k * c->tcs] * (1.0 - eps) + epsc);                     \
                    for (int64_t k = 0; k < C; k++) {                                           \
                        const double wk = wb ? (double)wb[k * wcs] : 1.0;                       \
                        const double v = (double)xr[k * xcs];                                   \
                        const double q = (double)tr[k * c->tcs] * (1.0 - eps) + epsc;           \
                        if (gr) gr[k * gcs] = (T)(a * (exp(v - lse) * Q - wk * q));             \
                        if (gtb)                                                                \
                            gtb[w.off[4] + k * c->gtcs] = (T)(-a * (1.0 - eps) * wk * (v - lse)); \
                    }                                                                           \
                    continue;                                                                   \
                }                                                                               \
                const int64_t t = ((const int64_t *)(const void *)c->t)[w.off[1]];              \
                if (t == c->ignore) {                                                           \
                    for (int64_t k = 0; k < C; k++) gr[k * gcs] = (T)0;                         \
                    continue;                                                                   \
                }                                                                               \
                const double wt = wb ? (double)wb[t * wcs] : 1.0;                               \
                const double a = go * c->scale * (1.0 - eps) * wt;                          \
                const double bs = go * c->scale * epsc;                                      \
                for (int64_t k = 0; k < C; k++) {                                               \
                    const double pk = exp((double)xr[k * xcs] - lse);                           \
                    double v = a * (k == t ? pk - 1.0 : pk);                                    \
                    if (eps > 0.0) v += bs * (pk * g->wsum - (wb ? (double)wb[k * wcs] : 1.0)); \
                    gr[k * gcs] = (T)v;                                                         \
                }                                                                               \
            }                                                                                   \
        }                                                                                       \
    }
CLS_KERNELS(F32)
CLS_KERNELS(F64)

/* Common context fields from the validated call. */
static void cls_ctx_init(cls_ctx *c, const cls_geom *g, const mft_tensor *x,
                         const mft_tensor *target, const mft_tensor *weight, int64_t ignore,
                         double eps) {
    memset(c, 0, sizeof *c);
    c->g = g;
    c->w0.nd = g->pnd;
    memcpy(c->w0.sizes, g->psizes, sizeof c->w0.sizes);
    lw_set(&c->w0, 0, x, g->cdim);
    c->x = mft__tensor_ptr(x);
    c->xcs = x->strides[g->cdim];
    c->t = mft__tensor_ptr(target);
    if (g->mode == CLS_CE_PROB) {
        lw_set(&c->w0, 1, target, g->cdim);
        c->tcs = target->strides[g->cdim];
    } else {
        lw_set(&c->w0, 1, target, -1);
    }
    if (weight) {
        c->wt = mft__tensor_ptr(weight);
        c->wcs = weight->strides[0];
    }
    c->ignore = ignore;
    c->eps = g->mode == CLS_NLL ? 0.0 : eps;
}

/* Forward of a validated call: a new tensor (not in any scope) or NULL. */
/* The kernel event of a class-loss pass (profiler, verbose log, tape
 * picture): op = fn without "mft_", operand x, result y (may be NULL). */
static void cls_report(uint64_t t0, const char *fn, const mft_tensor *x, const mft_tensor *y) {
    const mft_tensor *in[1] = {x}, *out[1] = {y};
    mft__kernel_end(t0, &(mft__kernel_info){fn + 4, "loss.rows", MFT_FORMAT_COUNT,
                                            MFT_FORMAT_COUNT, x->dtype, 1, y ? 1 : 0, in, out,
                                            0, false});
}

static mft_tensor *cls_forward(const char *fn, const cls_geom *g, const mft_tensor *x,
                               const mft_tensor *target, const mft_tensor *weight,
                               int64_t ignore, double eps, mft_reduction red) {
    const uint64_t t0 = mft__kernel_begin();
    cls_ctx c;
    cls_ctx_init(&c, g, x, target, weight, ignore, eps);
    mft_tensor *out = red == MFT_REDUCTION_NONE
                          ? mft__tensor_alloc(fn, g->pnd, g->psizes, x->dtype, MFT_CONTIGUOUS)
                          : mft__tensor_alloc(fn, 0, NULL, x->dtype, MFT_CONTIGUOUS);
    if (!out) return NULL;
    const int64_t nblocks = (g->P + LOSS_BLOCK - 1) / LOSS_BLOCK;
    loss_parts lp;
    if (red != MFT_REDUCTION_NONE) {
        if (loss_parts_init(fn, &lp, nblocks) != MFT_OK) {
            mft_tensor_release(out);
            return NULL;
        }
        c.part = lp.p;
    } else {
        c.per_pos = true;
        lw_set(&c.w0, 2, out, -1);
    }
    c.out = mft__tensor_ptr(out);
    loss_for_blocks(nblocks, LOSS_BLOCK * (g->C > 0 ? g->C : 1),
                    x->dtype == MFT_F32 ? cls_fwd_F32 : cls_fwd_F64, &c);
    if (red != MFT_REDUCTION_NONE) {
        double s_main = 0.0, s_w = 0.0, s_sm = 0.0;
        for (int64_t b = 0; b < nblocks; b++) {
            s_main += c.part[3 * b];
            s_w += c.part[3 * b + 1];
            s_sm += c.part[3 * b + 2];
        }
        loss_parts_free(&lp);
        double v;
        const double epsc = g->C > 0 ? eps / (double)g->C : 0.0;
        if (g->mode == CLS_CE_PROB) {
            v = red == MFT_REDUCTION_MEAN ? s_main / (double)g->P : s_main;
        } else if (red == MFT_REDUCTION_SUM) {
            v = c.eps > 0.0 ? (1.0 - eps) * s_main + epsc * s_sm : s_main;
        } else {
            v = s_main / s_w;
            if (c.eps > 0.0) v = (1.0 - eps) * v + epsc * s_sm / s_w;
        }
        mft__store(x->dtype, c.out, v);
    }
    cls_report(t0, fn, x, out);
    return out;
}

/* Backward of a validated call; gx_out / gt_out (either may be NULL) get
 * new tensors (not in any scope). */
static mft_status cls_backward(const char *fn, const cls_geom *g, const mft_tensor *gout,
                               const mft_tensor *x, const mft_tensor *target,
                               const mft_tensor *weight, int64_t ignore, double eps,
                               mft_reduction red, mft_tensor **gx_out, mft_tensor **gt_out) {
    const uint64_t t0 = mft__kernel_begin();
    cls_ctx c;
    cls_ctx_init(&c, g, x, target, weight, ignore, eps);
    mft_tensor *gx = gx_out ? loss_alloc_like(fn, x) : NULL;
    mft_tensor *gt = gt_out && g->mode == CLS_CE_PROB ? loss_alloc_like(fn, target) : NULL;
    if ((gx_out && !gx) || (gt_out && g->mode == CLS_CE_PROB && !gt)) {
        mft_tensor_release(gx);
        mft_tensor_release(gt);
        return mft_last_error();
    }
    c.gout = mft__tensor_ptr(gout);
    c.gout_dt = gout->dtype;
    double gs = 1.0;
    if (red == MFT_REDUCTION_NONE) {
        c.per_pos = true;
        lw_set(&c.w0, 2, gout, -1);
    } else {
        gs = mft__load(gout->dtype, c.gout);
    }
    /* MEAN: positions for probability targets, else the weight of the
     * non-ignored targets (both terms of label smoothing, as PyTorch) */
    c.scale = gs;
    if (red == MFT_REDUCTION_MEAN) c.scale = g->mode == CLS_CE_PROB ? gs / (double)g->P : gs / g->sw;
    if (gx) {
        lw_set(&c.w0, 3, gx, g->cdim);
        c.gx = mft__tensor_ptr(gx);
        c.gcs = gx->strides[g->cdim];
    }
    if (gt) {
        lw_set(&c.w0, 4, gt, g->cdim);
        c.gt = mft__tensor_ptr(gt);
        c.gtcs = gt->strides[g->cdim];
    }
    const int64_t nblocks = (g->P + LOSS_BLOCK - 1) / LOSS_BLOCK;
    if (gx || gt)
        loss_for_blocks(nblocks, LOSS_BLOCK * (g->C > 0 ? g->C : 1),
                        x->dtype == MFT_F32 ? cls_bwd_F32 : cls_bwd_F64, &c);
    if (gx_out) *gx_out = gx;
    if (gt_out) *gt_out = gt;
    cls_report(t0, fn, x, gx);
    return MFT_OK;
}

typedef struct cls_params {
    int64_t ignore;
    double eps;
    mft_reduction red;
    bool ce;
} cls_params;

static mft_status cls_node_backward(const mft__ag_node *n, mft_tensor *const *gout,
                                    mft_tensor **gin) {
    const cls_params *pp = n->params;
    const char *fn = pp->ce ? "mft_cross_entropy_backward" : "mft_nll_loss_backward";
    cls_geom g;
    mft_status st = cls_setup(fn, pp->ce, n->saved[0], n->saved[1], n->saved[2], pp->ignore,
                              pp->eps, pp->red, &g);
    if (st != MFT_OK) return st;
    return cls_backward(fn, &g, gout[0], n->saved[0], n->saved[1], n->saved[2], pp->ignore,
                        pp->eps, pp->red, n->in[0].needs_grad ? &gin[0] : NULL,
                        n->in[1].needs_grad ? &gin[1] : NULL);
}

static mft_tensor *cls_entry(const char *fn, bool ce, const mft_tensor *x,
                             const mft_tensor *target, const mft_tensor *weight,
                             int64_t ignore, double eps, mft_reduction red) {
    if (!x || !target) {
        mft__null_arg(fn, !x ? (ce ? "logits" : "logp") : "target");
        return NULL;
    }
    cls_geom g;
    if (cls_setup(fn, ce, x, target, weight, ignore, eps, red, &g) != MFT_OK) return NULL;
    mft__scope_suspend();
    mft_tensor *out = cls_forward(fn, &g, x, target, weight, ignore, eps, red);
    const mft_tensor *ins[3] = {x, target, weight};
    if (out && mft__ag_wants(3, ins)) {
        cls_params pp = {ignore, eps, red, ce};
        mft_tensor *outs[1] = {out};
        if (mft__ag_record(fn, ce ? "cross_entropy" : "nll_loss", cls_node_backward, 3, ins, 1,
                           outs, 3, ins, &pp, sizeof pp) != MFT_OK) {
            mft_tensor_release(out);
            out = NULL;
        }
    }
    return loss_finish(fn, out);
}

static mft_tensor *cls_backward_entry(const char *fn, bool ce, const mft_tensor *gout,
                                      const mft_tensor *x, const mft_tensor *target,
                                      const mft_tensor *weight, int64_t ignore, double eps,
                                      mft_reduction red) {
    if (!gout || !x || !target) {
        mft__null_arg(fn, !gout ? "grad_out" : !x ? (ce ? "logits" : "logp") : "target");
        return NULL;
    }
    cls_geom g;
    if (cls_setup(fn, ce, x, target, weight, ignore, eps, red, &g) != MFT_OK) return NULL;
    if (loss_check_gout(fn, gout, red, g.pnd, g.psizes) != MFT_OK) return NULL;
    mft__scope_suspend();
    mft_tensor *gx = NULL;
    if (cls_backward(fn, &g, gout, x, target, weight, ignore, eps, red, &gx, NULL) != MFT_OK)
        gx = NULL;
    return loss_finish(fn, gx);
}

mft_tensor *mft_cross_entropy(const mft_tensor *logits, const mft_tensor *target,
                              const mft_tensor *weight, int64_t ignore_index,
                              double label_smoothing, mft_reduction reduction) {
    MFT__BLOCKED_FALLBACK_PLAIN(
        "cross_entropy",
        mft_cross_entropy(logits, target, weight, ignore_index, label_smoothing, reduction), 3,
        &logits, &target, &weight);
    return cls_entry("mft_cross_entropy", true, logits, target, weight, ignore_index,
                     label_smoothing, reduction);
}

mft_tensor *mft_cross_entropy_backward(const mft_tensor *grad_out, const mft_tensor *logits,
                                       const mft_tensor *target, const mft_tensor *weight,
                                       int64_t ignore_index, double label_smoothing,
                                       mft_reduction reduction) {
    MFT__BLOCKED_FALLBACK_LIKE("cross_entropy_backward", logits,
                               mft_cross_entropy_backward(grad_out, logits, target, weight,
                                                          ignore_index, label_smoothing, reduction),
                               4, &grad_out, &logits, &target, &weight);
    return cls_backward_entry("mft_cross_entropy_backward", true, grad_out, logits, target,
                              weight, ignore_index, label_smoothing, reduction);
}

mft_tensor *mft_nll_loss(const mft_tensor *logp, const mft_tensor *target,
                         const mft_tensor *weight, int64_t ignore_index,
                         mft_reduction reduction) {
    MFT__BLOCKED_FALLBACK_PLAIN("nll_loss",
                                mft_nll_loss(logp, target, weight, ignore_index, reduction), 3,
                                &logp, &target, &weight);
    return cls_entry("mft_nll_loss", false, logp, target, weight, ignore_index, 0.0, reduction);
}

mft_tensor *mft_nll_loss_backward(const mft_tensor *grad_out, const mft_tensor *logp,
                                  const mft_tensor *target, const mft_tensor *weight,
                                  int64_t ignore_index, mft_reduction reduction) {
    MFT__BLOCKED_FALLBACK_LIKE(
        "nll_loss_backward", logp,
        mft_nll_loss_backward(grad_out, logp, target, weight, ignore_index, reduction), 4,
        &grad_out, &logp, &target, &weight);
    return cls_backward_entry("mft_nll_loss_backward", false, grad_out, logp, target, weight,
                              ignore_index, 0.0, reduction);
}

/* ================================================================ elementwise losses */
typedef enum ew_kind { EW_MSE, EW_BCE } ew_kind;

/* Walker slots: 0 x, 1 target, 2 weight, 3 pos_weight, 4 output or
 * grad_out (NONE), 5 gradient. */
typedef struct ew_ctx {
    ew_kind kind;
    lw_walk w0;
    int64_t n;
    const char *x, *t, *wt, *pw, *gout;
    mft_dtype gout_dt;
    char *out, *grad;
    bool per_pos;
    bool wrt_target; /* backward: gradient w.r.t. target instead of x */
    double scale;    /* backward multiplier (MEAN folded in) */
    double *part;
} ew_ctx;

/* softplus(-x) = log(1 + exp(-x)), stable. */
static inline double ew_softplus_neg(double x) {
    return log1p(exp(-fabs(x))) + (x < 0 ? -x : 0.0);
}
static inline double ew_sigmoid(double x) {
    if (x >= 0) return 1.0 / (1.0 + exp(-x));
    const double e = exp(x);
    return e / (1.0 + e);
}

#define EW_KERNELS(D)                                                                           \
    static void ew_fwd_##D(void *vc, int64_t b0, int64_t b1) {                                  \
        typedef MFT__T_##D T;                                                                   \
        const ew_ctx *c = vc;                                                                   \
        const T *xb = (const T *)(const void *)c->x, *tb = (const T *)(const void *)c->t;       \
        const T *wb = (const T *)(const void *)c->wt, *pb = (const T *)(const void *)c->pw;     \
        for (int64_t b = b0; b < b1; b++) {                                                     \
            const int64_t e0 = b * LOSS_BLOCK;                                                  \
            const int64_t e1 = e0 + LOSS_BLOCK < c->n ? e0 + LOSS_BLOCK : c->n;                 \
            lw_walk w = c->w0;                                                                  \
            lw_seek(&w, e0);                                                                    \
            double s = 0.0;                                                                     \
            for (int64_t e = e0; e < e1; e++, lw_next(&w)) {                                    \
                const double x = (double)xb[w.off[0]], t = (double)tb[w.off[1]];                \
                double v;                                                                       \
                if (c->kind == EW_MSE) {                                                        \
                    v = (x - t) * (x - t);                                                      \
                } else {                                                                        \
                    const double lw = pb ? ((double)pb[w.off[3]] - 1.0) * t + 1.0 : 1.0;        \
                    v = (1.0 - t) * x + lw * ew_softplus_neg(x);                                \
                    if (wb) v *= (double)wb[w.off[2]];                                          \
                }                                                                               \
                if (c->per_pos) ((T *)(void *)c->out)[w.off[4]] = (T)v;                         \
                s += v;                                                                         \
            }                                                                                   \
            if (c->part) c->part[b] = s;                                                        \
        }                                                                                       \
    }                                                                                           \
    static void ew_bwd_##D(void *vc, int64_t b0, int64_t b1) {                                  \
        typedef MFT__T_##D T;                                                                   \
        const ew_ctx *c = vc;                                                                   \
        const T *xb = (const T *)(const void *)c->x, *tb = (const T *)(const void *)c->t;       \
        const T *wb = (const T *)(const void *)c->wt, *pb = (const T *)(const void *)c->pw;     \
        T *gb = (T *)(void *)c->grad;                                                           \
        const size_t ges = mft__elem_size(c->gout_dt);                                          \
        for (int64_t b = b0; b < b1; b++) {                                                     \
            const int64_t e0 = b * LOSS_BLOCK;                                                  \
            const int64_t e1 = e0 + LOSS_BLOCK < c->n ? e0 + LOSS_BLOCK : c->n;                 \
            lw_walk w = c->w0;                                                                  \
            lw_seek(&w, e0);                                                                    \
            for (int64_t e = e0; e < e1; e++, lw_next(&w)) {                                    \
                const double x = (double)xb[w.off[0]], t = (double)tb[w.off[1]];                \
                const double go =                                                               \
                    (c->per_pos ? mft__load(c->gout_dt, c->gout + (size_t)w.off[4] * ges)       \
                                : 1.0) * c->scale;                                              \
                double v;                                                                       \
                if (c->kind == EW_MSE) {                                                        \
                    v = 2.0 * (x - t) * go;                                                     \
                    if (c->wrt_target) v = -v;                                                  \
                } else {                                                                        \
                    const double pw = pb ? (double)pb[w.off[3]] : 1.0;                          \
                    const double lw = (pw - 1.0) * t + 1.0;                                     \
                    v = c->wrt_target ? -x + (pw - 1.0) * ew_softplus_neg(x)                    \
                                      : lw * ew_sigmoid(x) - pw * t;                            \
                    v *= go * (wb ? (double)wb[w.off[2]] : 1.0);                                \
                }                                                                               \
                gb[w.off[5]] = (T)v;                                                            \
            }                                                                                   \
        }                                                                                       \
    }
EW_KERNELS(F32)
EW_KERNELS(F64)

/* Validates an elementwise-loss call and fills the walker strides of x,
 * target, weight and pos_weight. */
static mft_status ew_setup(const char *fn, ew_kind kind, const mft_tensor *x,
                           const mft_tensor *target, const mft_tensor *weight,
                           const mft_tensor *pos_weight, mft_reduction red, ew_ctx *c) {
    const char *xname = kind == EW_MSE ? "input" : "x";
    mft_status st;
    if ((st = loss_check_red(fn, red)) != MFT_OK) return st;
    if ((st = loss_check_float(fn, xname, x)) != MFT_OK) return st;
    if ((st = loss_check_same_dtype(fn, "target", target, x, xname)) != MFT_OK) return st;
    if ((st = loss_check_sizes(fn, "target", target, x->ndim, x->sizes, xname)) != MFT_OK)
        return st;
    memset(c, 0, sizeof *c);
    c->kind = kind;
    c->n = x->numel;
    c->w0.nd = x->ndim;
    memcpy(c->w0.sizes, x->sizes, sizeof c->w0.sizes);
    lw_set(&c->w0, 0, x, -1);
    lw_set(&c->w0, 1, target, -1);
    c->x = mft__tensor_ptr(x);
    c->t = mft__tensor_ptr(target);
    const mft_tensor *extra[2] = {weight, pos_weight};
    const char *names[2] = {"weight", "pos_weight"};
    for (int k = 0; k < 2; k++) {
        const mft_tensor *w = extra[k];
        if (!w) continue;
        if ((st = loss_check_same_dtype(fn, names[k], w, x, xname)) != MFT_OK) return st;
        if (!lw_bcast(w, x->ndim, x->sizes, c->w0.st[2 + k])) {
            char a[MFT__DIMS_BUF], b[MFT__DIMS_BUF];
            mft__set_error(MFT_ERR_SHAPE, "%s: %s of sizes %s does not broadcast to %s's sizes %s",
                           fn, names[k], mft__fmt_dims(a, sizeof a, w->ndim, w->sizes), xname,
                           mft__fmt_dims(b, sizeof b, x->ndim, x->sizes));
            return MFT_ERR_SHAPE;
        }
        if (k == 0) c->wt = mft__tensor_ptr(w);
        else c->pw = mft__tensor_ptr(w);
    }
    return MFT_OK;
}

static mft_tensor *ew_forward(const char *fn, ew_ctx *c, const mft_tensor *x, mft_reduction red) {
    mft_tensor *out = red == MFT_REDUCTION_NONE
                          ? loss_alloc_like(fn, x)
                          : mft__tensor_alloc(fn, 0, NULL, x->dtype, MFT_CONTIGUOUS);
    if (!out) return NULL;
    const int64_t nblocks = (c->n + LOSS_BLOCK - 1) / LOSS_BLOCK;
    loss_parts lp;
    if (red == MFT_REDUCTION_NONE) {
        c->per_pos = true;
        lw_set(&c->w0, 4, out, -1);
    } else {
        if (loss_parts_init(fn, &lp, (nblocks + 2) / 3) != MFT_OK) {
            mft_tensor_release(out);
            return NULL;
        }
        c->part = lp.p;
    }
    c->out = mft__tensor_ptr(out);
    loss_for_blocks(nblocks, LOSS_BLOCK, x->dtype == MFT_F32 ? ew_fwd_F32 : ew_fwd_F64, c);
    if (red != MFT_REDUCTION_NONE) {
        double s = 0.0;
        for (int64_t b = 0; b < nblocks; b++) s += c->part[b];
        loss_parts_free(&lp);
        mft__store(x->dtype, c->out, red == MFT_REDUCTION_MEAN ? s / (double)c->n : s);
    }
    return out;
}

/* Gradient w.r.t. x (or target), laid out like that tensor; not in a scope. */
static mft_tensor *ew_backward(const char *fn, ew_ctx *c, const mft_tensor *gout,
                               const mft_tensor *like, mft_reduction red, bool wrt_target) {
    mft_tensor *g = loss_alloc_like(fn, like);
    if (!g) return NULL;
    ew_ctx k = *c;
    k.wrt_target = wrt_target;
    k.gout = mft__tensor_ptr(gout);
    k.gout_dt = gout->dtype;
    k.scale = 1.0;
    if (red == MFT_REDUCTION_NONE) {
        k.per_pos = true;
        lw_set(&k.w0, 4, gout, -1);
    } else {
        k.scale = mft__load(gout->dtype, k.gout);
        if (red == MFT_REDUCTION_MEAN) k.scale /= (double)k.n;
    }
    lw_set(&k.w0, 5, g, -1);
    k.grad = mft__tensor_ptr(g);
    loss_for_blocks((k.n + LOSS_BLOCK - 1) / LOSS_BLOCK, LOSS_BLOCK,
                    like->dtype == MFT_F32 ? ew_bwd_F32 : ew_bwd_F64, &k);
    return g;
}

typedef struct ew_params {
    ew_kind kind;
    mft_reduction red;
} ew_params;

static mft_status ew_node_backward(const mft__ag_node *n, mft_tensor *const *gout,
                                   mft_tensor **gin) {
    const ew_params *pp = n->params;
    const char *fn = pp->kind == EW_MSE ? "mft_mse_loss_backward"
                                        : "mft_binary_cross_entropy_with_logits_backward";
    ew_ctx c;
    mft_status st = ew_setup(fn, pp->kind, n->saved[0], n->saved[1], n->saved[2], n->saved[3],
                             pp->red, &c);
    if (st != MFT_OK) return st;
    for (int k = 0; k < 2; k++) {
        if (!n->in[k].needs_grad) continue;
        gin[k] = ew_backward(fn, &c, gout[0], n->saved[k], pp->red, k == 1);
        if (!gin[k]) return mft_last_error();
    }
    return MFT_OK;
}

static mft_tensor *ew_entry(const char *fn, ew_kind kind, const mft_tensor *x,
                            const mft_tensor *target, const mft_tensor *weight,
                            const mft_tensor *pos_weight, mft_reduction red) {
    if (!x || !target) {
        mft__null_arg(fn, !x ? (kind == EW_MSE ? "input" : "x") : "target");
        return NULL;
    }
    ew_ctx c;
    if (ew_setup(fn, kind, x, target, weight, pos_weight, red, &c) != MFT_OK) return NULL;
    mft__scope_suspend();
    mft_tensor *out = ew_forward(fn, &c, x, red);
    const mft_tensor *ins[4] = {x, target, weight, pos_weight};
    if (out && mft__ag_wants(2, ins)) {
        ew_params pp = {kind, red};
        mft_tensor *outs[1] = {out};
        if (mft__ag_record(fn, kind == EW_MSE ? "mse_loss" : "binary_cross_entropy_with_logits",
                           ew_node_backward, 4, ins, 1, outs, 4, ins, &pp, sizeof pp) != MFT_OK) {
            mft_tensor_release(out);
            out = NULL;
        }
    }
    return loss_finish(fn, out);
}

static mft_tensor *ew_backward_entry(const char *fn, ew_kind kind, const mft_tensor *gout,
                                     const mft_tensor *x, const mft_tensor *target,
                                     const mft_tensor *weight, const mft_tensor *pos_weight,
                                     mft_reduction red) {
    if (!gout || !x || !target) {
        mft__null_arg(fn, !gout ? "grad_out" : !x ? (kind == EW_MSE ? "input" : "x") : "target");
        return NULL;
    }
    ew_ctx c;
    if (ew_setup(fn, kind, x, target, weight, pos_weight, red, &c) != MFT_OK) return NULL;
    if (loss_check_gout(fn, gout, red, x->ndim, x->sizes) != MFT_OK) return NULL;
    mft__scope_suspend();
    return loss_finish(fn, ew_backward(fn, &c, gout, x, red, false));
}

mft_tensor *mft_mse_loss(const mft_tensor *input, const mft_tensor *target,
                         mft_reduction reduction) {
    MFT__BLOCKED_FALLBACK_PLAIN("mse_loss", mft_mse_loss(input, target, reduction), 2, &input,
                                &target);
    return ew_entry("mft_mse_loss", EW_MSE, input, target, NULL, NULL, reduction);
}

mft_tensor *mft_mse_loss_backward(const mft_tensor *grad_out, const mft_tensor *input,
                                  const mft_tensor *target, mft_reduction reduction) {
    MFT__BLOCKED_FALLBACK_LIKE("mse_loss_backward", input,
                               mft_mse_loss_backward(grad_out, input, target, reduction), 3,
                               &grad_out, &input, &target);
    return ew_backward_entry("mft_mse_loss_backward", EW_MSE, grad_out, input, target, NULL, NULL,
                             reduction);
}

mft_tensor *mft_binary_cross_entropy_with_logits(const mft_tensor *x, const mft_tensor *target,
                                                 const mft_tensor *weight,
                                                 const mft_tensor *pos_weight,
                                                 mft_reduction reduction) {
    MFT__BLOCKED_FALLBACK_PLAIN(
        "binary_cross_entropy_with_logits",
        mft_binary_cross_entropy_with_logits(x, target, weight, pos_weight, reduction), 4, &x,
        &target, &weight, &pos_weight);
    return ew_entry("mft_binary_cross_entropy_with_logits", EW_BCE, x, target, weight,
                    pos_weight, reduction);
}

mft_tensor *mft_binary_cross_entropy_with_logits_backward(
    const mft_tensor *grad_out, const mft_tensor *x, const mft_tensor *target,
    const mft_tensor *weight, const mft_tensor *pos_weight, mft_reduction reduction) {
    MFT__BLOCKED_FALLBACK_LIKE("binary_cross_entropy_with_logits_backward", x,
                               mft_binary_cross_entropy_with_logits_backward(
                                   grad_out, x, target, weight, pos_weight, reduction),
                               5, &grad_out, &x, &target, &weight, &pos_weight);
    return ew_backward_entry("mft_binary_cross_entropy_with_logits_backward", EW_BCE, grad_out, x,
                             target, weight, pos_weight, reduction);
}

/* ================================================================ accuracy */
mft_tensor *mft_accuracy_count(const mft_tensor *logits, const mft_tensor *target) {
    static const char fn[] = "mft_accuracy_count";
    MFT__BLOCKED_FALLBACK("accuracy_count", mft_accuracy_count(logits, target), 2, &logits,
                          &target);
    if (!logits || !target) {
        mft__null_arg(fn, !logits ? "logits" : "target");
        return NULL;
    }
    if (loss_check_float(fn, "logits", logits) != MFT_OK) return NULL;
    if (logits->ndim < 1) {
        mft__set_error(MFT_ERR_RANK, "%s: logits must have rank >= 1, got rank 0", fn);
        return NULL;
    }
    if (target->dtype != MFT_I64) {
        mft__set_error(MFT_ERR_DTYPE, "%s: target must be i64 class indices, got %s", fn,
                       mft_dtype_name(target->dtype));
        return NULL;
    }
    const int cdim = logits->ndim == 1 ? 0 : 1;
    int pnd = 0;
    int64_t psizes[MFT_MAX_DIMS];
    for (int d = 0; d < logits->ndim; d++)
        if (d != cdim) psizes[pnd++] = logits->sizes[d];
    if (loss_check_sizes(fn, "target", target, pnd, psizes,
                         "the logits' sizes without the class dim") != MFT_OK)
        return NULL;
    lw_walk w;
    memset(&w, 0, sizeof w);
    w.nd = pnd;
    memcpy(w.sizes, psizes, sizeof w.sizes);
    lw_set(&w, 0, logits, cdim);
    lw_set(&w, 1, target, -1);
    lw_seek(&w, 0);
    const int64_t C = logits->sizes[cdim], cs = logits->strides[cdim];
    const size_t es = mft__elem_size(logits->dtype);
    const char *xp = mft__tensor_ptr(logits);
    const int64_t *tp = (const int64_t *)(const void *)mft__tensor_ptr(target);
    int64_t P = 1, hits = 0;
    for (int d = 0; d < pnd; d++) P *= psizes[d];
    for (int64_t p = 0; p < P && C > 0; p++, lw_next(&w)) {
        int64_t best = 0;
        double m = mft__load(logits->dtype, xp + (size_t)w.off[0] * es);
        for (int64_t k = 1; k < C && m == m; k++) {
            const double v = mft__load(logits->dtype, xp + (size_t)(w.off[0] + k * cs) * es);
            if (v > m || v != v) {
                m = v;
                best = k;
            }
        }
        hits += tp[w.off[1]] == best;
    }
    mft_tensor *out = mft__tensor_alloc(fn, 0, NULL, MFT_I64, MFT_CONTIGUOUS);
    if (out) *(int64_t *)(void *)mft__tensor_ptr(out) = hits;
    return out;
}
