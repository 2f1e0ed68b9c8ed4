/* ops/norm/norm.c — batch_norm, layer_norm, group_norm and instance_norm forward
 * (mft/cnn.h), through the kernel dispatcher (DESIGN §7). Results are packed
 * in the input's tag for rank 3-5, else contiguous (SPEC §4; instance_norm and
 * layer_norm deviate from PyTorch 1.13, which returns contiguous strides).
 *
 * Kernel interface (all three ops)
 *   inputs  = {x}            (converted to the kernel's packed format)
 *   outputs = {y}            (packed in the kernel's format, same dtype)
 *   params  = const mft__norm_kparams * (below; starts with mft_norm_params,
 *             so a user kernel may read it as mft_norm_params).
 * Optional tensors cannot pass through the dispatcher (it cannot convert a
 * NULL), so weight / bias travel in the params struct: 1-D (batch_norm,
 * group_norm: C elements) or of normalized_shape (layer_norm), any strides,
 * the dtype of x, NULL meaning 1 / 0. Statistics live in double arrays the
 * op allocates:
 *   mean[nstat], var[nstat]  nstat = C (batch_norm), N*groups (group_norm),
 *                            numel / prod(normalized_shape) (layer_norm).
 *   If p.training (always set for layer/group norm) the kernel writes the
 *   statistics (mean, BIASED variance) there; otherwise (batch_norm eval)
 *   they hold the running statistics and the kernel only normalises:
 *   y = (x - mean) / sqrt(var + eps) * w + b.
 *   scratch[nscratch]: work space for the built-in kernels: batch_norm
 *   2*C + max(N*C, ceil(N*S / BN_ROWS)*C) doubles (S = spatial numel),
 *   group_norm gn_nhwc_scratch, layer_norm L + 1 (2*L floats, L = prod(normalized_shape)).
 * The op itself reads the running stats before (eval) and updates them after
 * (training: running = (1-momentum)*running + momentum*stat, unbiased var)
 * the kernel, so kernels never touch them.
 *
 * Validation beyond mft/cnn.h: weight / bias / running stats must have x's
 * dtype; eps >= 0; batch_norm training needs more than one value per channel
 * (N * spatial > 1), group_norm more than one value in N * C/groups * spatial,
 * instance_norm more than one spatial element (PyTorch 1.13's checks). An
 * empty input gives an empty result and leaves the running stats alone.
 * Running stats are written in place only on success (version bumped).
 *
 * Kernels
 *   reference (F32, F64): naive loops over logical indices reading and
 *   writing through the real strides, statistics accumulated in double
 *   (two passes: mean, then sum of squared deviations). Registered as the
 *   CONTIGUOUS F64 kernels of all three ops and (since it reads any
 *   strides) as the CHANNELS_LAST F64 group_norm kernel
 *   ("group_norm.nhwc.f64.ref"). Exposed to tests through
 *   mft__norm_reference.
 *   fast batch_norm F32, CONTIGUOUS ([N, C, S]: each (n, c) plane is one
 *   contiguous run) and CHANNELS_LAST ([N*S rows, C]: per-channel sums over
 *   blocks of BN_ROWS rows with vectorisable loops over C, float over
 *   sub-blocks of NH_SUB rows then double: nhwc_colsum). Partial sums go
 *   to fixed work items ((n, c) planes, or row blocks) and are combined in
 *   order, so the result does not depend on the thread count; the
 *   normalisation writes each element from one thread with one formula.
 *   fast group_norm / layer_norm F32, CONTIGUOUS: every statistics set is
 *   one contiguous run (one work item each). fast group_norm F32
 *   CHANNELS_LAST: per-channel partial sums over blocks of pixel
 *   rows, combined per group in order (comment at gnh_job). fast layer_norm F32 CHANNELS_LAST
 *   (layer_norm_nhwc_f32): normalising C and all spatial dims (nnorm >=
 *   nd - 1) each set is still one contiguous run, only permuted, so the
 *   CONTIGUOUS row kernel runs with weight / bias gathered in physical
 *   order; for smaller nnorm each set is a column of a [P, C] block
 *   (ln_nhwc_cols, vectorised over channels). F64 layer_norm has no
 *   CHANNELS_LAST kernel: an NHWC input goes through the dispatcher's
 *   fallback (converted to NCHW and back, 2 conversions counted; refused in
 *   strict mode) — the strided reference was 30-60x slower than that. The
 *   CHANNELS_LAST F64 group_norm kernel is the strided reference.
 *
 * The _ex variants also return the statistics (x's dtype): mean and
 * 1 / sqrt(var + eps) per set (batch_norm eval: the running ones).
 *
 * Autograd (DESIGN §8; the "autograd" section before the entry points):
 * every entry point, _ex included, records one node when x, weight or bias
 * requires grad under a recording tape: inputs {x, weight, bias} (NULL
 * weight / bias take no part), saved {x, weight, mean, rstd} (the _ex
 * statistics: batch_norm training the batch ones, eval copies of the
 * running ones, so later running-stat updates cannot make the node stale),
 * and the backward calls the public *_backward of ops/norm_backward.c
 * (grad_x packed in x's tag, grad_weight / grad_bias packed: the engine
 * converts nothing). The running statistics are never inputs: they get no
 * gradient, backward never touches them, and a running statistic that
 * requires grad is refused in training while the tape records (it is
 * written in place).
 */
#include <stdlib.h>
#include <string.h>
#include "autograd_internal.h"
#include "mft/cnn.h"
#include "norm_internal.h"

/* Note [Kernel tables]: the built-in kernels this family dispatches to. */
static const mft__kernel_def *const g_tables[] = {mft__kernels_norm, NULL};

typedef struct mft__norm_kparams {
    mft_norm_params p;
    const mft_tensor *weight, *bias; /* NULL: 1 / 0 */
    double *mean, *var;              /* [nstat] */
    double *scratch;                 /* [nscratch] (batch_norm) */
    int64_t nscratch;
} mft__norm_kparams;

#define BN_ROWS 256   /* rows per partial-sum block of the NHWC kernel */
#define BN_GRAIN 32768 /* elements per parallel chunk, at least */
#define BN_LANES 8

/* ---------------------------------------------------------------- reference */
/* The three ops as one loop nest: nstat statistics sets; set k has `len`
 * elements whose offsets come from elem_off; the affine parameters are
 * indexed by affine_idx. */
#define NORM_REF(D)                                                                           \
    static double norm_ld_##D(const mft_tensor *t, int64_t i, double dflt) {                 \
        if (!t) return dflt;                                                                  \
        const MFT__T_##D *p = (const MFT__T_##D *)(const void *)mft__tensor_ptr(t);          \
        return (double)p[mft__dims_off(t, 0, t->ndim, i)];                                         \
    }                                                                                         \
    /* op: 0 batch, 1 group, 2 layer. */                                                      \
    static void norm_ref_run_##D(const mft_kernel_args *a, int op) {                          \
        typedef MFT__T_##D T;                                                                 \
        const mft__norm_kparams *kp = a->params;                                              \
        const mft_tensor *x = a->inputs[0];                                                   \
        mft_tensor *y = a->outputs[0];                                                        \
        if (x->numel == 0) return;                                                            \
        const T *xp = (const T *)(const void *)mft__tensor_ptr(x);                           \
        T *yp = (T *)(void *)mft__tensor_ptr(y);                                              \
        const int nd = x->ndim;                                                               \
        const int64_t N = x->sizes[0];                                                        \
        const int64_t C = op == 2 ? 1 : x->sizes[1];                                          \
        const int64_t S = op == 2 ? 1 : mft__dims_prod(x, 2, nd);                                  \
        const int64_t G = op == 1 ? kp->p.groups : 1;                                         \
        const int lead = op == 2 ? nd - kp->p.nnorm : 0;                                      \
        const int64_t L = op == 2 ? mft__dims_prod(x, lead, nd) : 0;                               \
        const int64_t nstat = op == 0 ? C : op == 1 ? N * G : x->numel / L;                   \
        const int64_t len = op == 0 ? N * S : op == 1 ? (C / G) * S : L;                      \
        for (int64_t k = 0; k < nstat; k++) {                                                 \
            /* element j of set k: x offset, y offset, affine index */                        \
            for (int pass = 0; pass < 3; pass++) {                                            \
                if (pass < 2 && !kp->p.training) continue;                                    \
                double acc = 0.0, mean = pass ? kp->mean[k] : 0.0, rstd = 0.0;                \
                if (pass == 2) rstd = 1.0 / sqrt(kp->var[k] + kp->p.eps);                     \
                for (int64_t j = 0; j < len; j++) {                                           \
                    int64_t xo, yo, ai;                                                       \
                    if (op == 0) {                                                            \
                        const int64_t n = j / S, s = j % S;                                   \
                        xo = n * x->strides[0] + k * x->strides[1] + mft__dims_off(x, 2, nd, s);   \
                        yo = n * y->strides[0] + k * y->strides[1] + mft__dims_off(y, 2, nd, s);   \
                        ai = k;                                                               \
                    } else if (op == 1) {                                                     \
                        const int64_t n = k / G, c = (k % G) * (C / G) + j / S, s = j % S;    \
                        xo = n * x->strides[0] + c * x->strides[1] + mft__dims_off(x, 2, nd, s);   \
                        yo = n * y->strides[0] + c * y->strides[1] + mft__dims_off(y, 2, nd, s);   \
                        ai = c;                                                               \
                    } else {                                                                  \
                        xo = mft__dims_off(x, 0, lead, k) + mft__dims_off(x, lead, nd, j);              \
                        yo = mft__dims_off(y, 0, lead, k) + mft__dims_off(y, lead, nd, j);              \
                        ai = j;                                                               \
                    }                                                                         \
                    const double v = (double)xp[xo];                                          \
                    if (pass == 0)                                                            \
                        acc += v;                                                             \
                    else if (pass == 1)                                                       \
                        acc += (v - mean) * (v - mean);                                       \
                    else                                                                      \
                        yp[yo] = (T)((v - mean) * rstd * norm_ld_##D(kp->weight, ai, 1.0) +   \
                                     norm_ld_##D(kp->bias, ai, 0.0));                         \
                }                                                                             \
                if (pass == 0) kp->mean[k] = acc / (double)len;                               \
                if (pass == 1) kp->var[k] = acc / (double)len;                                \
            }                                                                                 \
        }                                                                                     \
    }                                                                                         \
    static void batch_norm_ref_##D(const mft_kernel_args *a) { norm_ref_run_##D(a, 0); }      \
    static void group_norm_ref_##D(const mft_kernel_args *a) { norm_ref_run_##D(a, 1); }      \
    static void layer_norm_ref_##D(const mft_kernel_args *a) { norm_ref_run_##D(a, 2); }
NORM_REF(F32)
NORM_REF(F64)

/* ---------------------------------------------------------------- fast batch_norm F32 */
typedef struct bn_job {
    const float *x;
    float *y;
    int64_t N, C, S, rows, nblk;
    double *part;           /* partial sums */
    const double *mean;     /* pass 2 */
    const float *sc, *sh, *mf; /* normalisation: y = (x - mf) * sc + sh */
} bn_job;

/* Sum (pass 0) or sum of squared deviations from m (pass 1) of n floats. */
static double bn_sum(const float *restrict x, int64_t n, double m, int pass) {
    double s[BN_LANES] = {0};
    int64_t i = 0;
    if (pass == 0) {
        for (; i + BN_LANES <= n; i += BN_LANES)
            for (int k = 0; k < BN_LANES; k++) s[k] += (double)x[i + k];
        for (; i < n; i++) s[0] += (double)x[i];
    } else {
        for (; i + BN_LANES <= n; i += BN_LANES)
            for (int k = 0; k < BN_LANES; k++) {
                const double d = (double)x[i + k] - m;
                s[k] += d * d;
            }
        for (; i < n; i++) {
            const double d = (double)x[i] - m;
            s[0] += d * d;
        }
    }
    for (int k = BN_LANES / 2; k > 0; k /= 2)
        for (int q = 0; q < k; q++) s[q] += s[q + k];
    return s[0];
}

/* NCHW: work item = (n, c) plane; part[n*C + c]. */
static void bn_nchw_sum0(void *v, int64_t b, int64_t e) {
    bn_job *j = v;
    for (int64_t it = b; it < e; it++) j->part[it] = bn_sum(j->x + it * j->S, j->S, 0.0, 0);
}
static void bn_nchw_sum1(void *v, int64_t b, int64_t e) {
    bn_job *j = v;
    for (int64_t it = b; it < e; it++)
        j->part[it] = bn_sum(j->x + it * j->S, j->S, j->mean[it % j->C], 1);
}
static void bn_nchw_norm(void *v, int64_t b, int64_t e) {
    bn_job *j = v;
    for (int64_t it = b; it < e; it++) {
        const float sc = j->sc[it % j->C], sh = j->sh[it % j->C], m = j->mf[it % j->C];
        const float *restrict x = j->x + it * j->S;
        float *restrict y = j->y + it * j->S;
        for (int64_t i = 0; i < j->S; i++) y[i] = (x[i] - m) * sc + sh;
    }
}

/* Per-channel sums over `rows` rows of C floats (row stride C) into acc[C]:
 * m NULL: sum of x; else sum of (x - m[c])^2. Chunks of NH_CCH channels;
 * sub-blocks of NH_SUB rows summed in float (vectorised over channels),
 * then added to the double acc, in row order. */
#define NH_CCH 256
#define NH_SUB 32
static void nhwc_colsum(const float *x, int64_t rows, int64_t C, const double *m, double *acc) {
    for (int64_t c0 = 0; c0 < C; c0 += NH_CCH) {
        const int64_t w = C - c0 < NH_CCH ? C - c0 : NH_CCH;
        float mf[NH_CCH], fa[NH_CCH];
        for (int64_t c = 0; c < w; c++) {
            mf[c] = m ? (float)m[c0 + c] : 0.0f;
            acc[c0 + c] = 0.0;
        }
        for (int64_t s0 = 0; s0 < rows; s0 += NH_SUB) {
            const int64_t s1 = s0 + NH_SUB < rows ? s0 + NH_SUB : rows;
            for (int64_t c = 0; c < w; c++) fa[c] = 0.0f;
            for (int64_t r = s0; r < s1; r++) {
                const float *restrict xr = x + r * C + c0;
                if (m)
                    for (int64_t c = 0; c < w; c++) {
                        const float d = xr[c] - mf[c];
                        fa[c] += d * d;
                    }
                else
                    for (int64_t c = 0; c < w; c++) fa[c] += xr[c];
            }
            for (int64_t c = 0; c < w; c++) acc[c0 + c] += (double)fa[c];
        }
    }
}

/* NHWC: work item = block of BN_ROWS rows; part[blk*C + c]. */
static void bn_nhwc_sum(bn_job *j, int64_t b, int64_t e, int pass) {
    const int64_t C = j->C;
    for (int64_t blk = b; blk < e; blk++) {
        const int64_t r0 = blk * BN_ROWS, r1 = r0 + BN_ROWS < j->rows ? r0 + BN_ROWS : j->rows;
        nhwc_colsum(j->x + r0 * C, r1 - r0, C, pass ? j->mean : NULL, j->part + blk * C);
    }
}
static void bn_nhwc_sum0(void *v, int64_t b, int64_t e) { bn_nhwc_sum(v, b, e, 0); }
static void bn_nhwc_sum1(void *v, int64_t b, int64_t e) { bn_nhwc_sum(v, b, e, 1); }
static void bn_nhwc_norm(void *v, int64_t b, int64_t e) {
    bn_job *j = v;
    const int64_t C = j->C;
    for (int64_t r = b; r < e; r++) {
        const float *restrict x = j->x + r * C;
        float *restrict y = j->y + r * C;
        const float *restrict sc = j->sc, *restrict sh = j->sh, *restrict m = j->mf;
        for (int64_t c = 0; c < C; c++) y[c] = (x[c] - m[c]) * sc[c] + sh[c];
    }
}

static int64_t bn_grain(int64_t per_item) {
    int64_t g = BN_GRAIN / (per_item > 0 ? per_item : 1);
    return g < 1 ? 1 : g;
}

/* cl: x and y are packed CHANNELS_LAST (rank 3-5), else CONTIGUOUS. */
static void batch_norm_fast_run(const mft_kernel_args *a, bool cl) {
    const mft__norm_kparams *kp = a->params;
    const mft_tensor *x = a->inputs[0];
    mft_tensor *y = a->outputs[0];
    if (x->numel == 0) return;
    bn_job j;
    j.x = (const float *)(const void *)mft__tensor_ptr(x);
    j.y = (float *)(void *)mft__tensor_ptr(y);
    j.N = x->sizes[0];
    j.C = x->sizes[1];
    j.S = mft__dims_prod(x, 2, x->ndim);
    j.rows = j.N * j.S;
    j.nblk = (j.rows + BN_ROWS - 1) / BN_ROWS;
    const int64_t C = j.C;
    float *scf = (float *)(void *)kp->scratch; /* 3*C floats fit in 2*C doubles */
    float *shf = scf + C, *mf = scf + 2 * C;
    j.part = kp->scratch + 2 * C;
    j.sc = scf;
    j.sh = shf;
    j.mf = mf;
    j.mean = kp->mean;
    if (kp->p.training) {
        for (int pass = 0; pass < 2; pass++) {
            double *out = pass == 0 ? kp->mean : kp->var;
            if (cl) {
                mft__parallel_for(0, j.nblk, bn_grain(BN_ROWS * C), pass ? bn_nhwc_sum1 : bn_nhwc_sum0,
                                  &j);
                for (int64_t c = 0; c < C; c++) out[c] = 0.0;
                for (int64_t b = 0; b < j.nblk; b++)
                    for (int64_t c = 0; c < C; c++) out[c] += j.part[b * C + c];
            } else {
                mft__parallel_for(0, j.N * C, bn_grain(j.S), pass ? bn_nchw_sum1 : bn_nchw_sum0,
                                  &j);
                for (int64_t c = 0; c < C; c++) {
                    double s = 0.0;
                    for (int64_t n = 0; n < j.N; n++) s += j.part[n * C + c];
                    out[c] = s;
                }
            }
            for (int64_t c = 0; c < C; c++) out[c] /= (double)j.rows;
        }
    }
    /* y = (x - mean) * (w * invstd) + b in float: subtracting the mean
     * first keeps degenerate (zero-variance) channels exact, where the
     * folded x * scale + shift form loses ~|mean| * invstd * 2^-24 */
    for (int64_t c = 0; c < C; c++) {
        const double w = norm_ld_F32(kp->weight, c, 1.0);
        scf[c] = (float)(w / sqrt(kp->var[c] + kp->p.eps));
        shf[c] = (float)norm_ld_F32(kp->bias, c, 0.0);
        mf[c] = (float)kp->mean[c];
    }
    if (cl)
        mft__parallel_for(0, j.rows, bn_grain(C), bn_nhwc_norm, &j);
    else
        mft__parallel_for(0, j.N * C, bn_grain(j.S), bn_nchw_norm, &j);
}
static void batch_norm_nchw_f32(const mft_kernel_args *a) { batch_norm_fast_run(a, false); }
static void batch_norm_nhwc_f32(const mft_kernel_args *a) {
    batch_norm_fast_run(a, a->inputs[0]->ndim >= 3);
}

/* ---------------------------------------------------------------- fast group/layer norm F32
 * CONTIGUOUS only: then each statistics set (group (n, g): C/groups channel
 * planes; layer_norm row: the last nnorm dims) is one contiguous run of len
 * elements. Work item = one set, computed by one thread (two passes with
 * bn_sum, then the normalisation), so results do not depend on the thread
 * count. */
typedef struct gln_job {
    const float *x;
    float *y;
    int64_t len, S, C, G; /* group_norm: S spatial, C channels, G groups */
    const mft__norm_kparams *kp;
    const float *w, *b; /* layer_norm: packed weight / bias, or NULL (then read by strides) */
} gln_job;

static void gln_stats(const gln_job *j, int64_t k, const float *x) {
    const double m = bn_sum(x, j->len, 0.0, 0) / (double)j->len;
    j->kp->mean[k] = m;
    j->kp->var[k] = bn_sum(x, j->len, m, 1) / (double)j->len;
}

static void gn_sets(void *v, int64_t b0, int64_t e) {
    const gln_job *j = v;
    const mft__norm_kparams *kp = j->kp;
    const int64_t cg = j->C / j->G;
    for (int64_t k = b0; k < e; k++) {
        const float *x = j->x + k * j->len;
        float *y = j->y + k * j->len;
        gln_stats(j, k, x);
        const double m = kp->mean[k], rs = 1.0 / sqrt(kp->var[k] + kp->p.eps);
        for (int64_t q = 0; q < cg; q++) {
            const int64_t c = (k % j->G) * cg + q;
            const float scf = (float)(rs * norm_ld_F32(kp->weight, c, 1.0));
            const float bf = (float)norm_ld_F32(kp->bias, c, 0.0), mf = (float)m;
            const float *restrict xc = x + q * j->S;
            float *restrict yc = y + q * j->S;
            for (int64_t i = 0; i < j->S; i++) yc[i] = (xc[i] - mf) * scf + bf;
        }
    }
}

static void ln_sets(void *v, int64_t b0, int64_t e) {
    const gln_job *j = v;
    const mft__norm_kparams *kp = j->kp;
    for (int64_t k = b0; k < e; k++) {
        const float *restrict x = j->x + k * j->len;
        float *restrict y = j->y + k * j->len;
        gln_stats(j, k, x);
        const float m = (float)kp->mean[k], rs = (float)(1.0 / sqrt(kp->var[k] + kp->p.eps));
        if (j->w && j->b) {
            const float *restrict w = j->w, *restrict b = j->b;
            for (int64_t i = 0; i < j->len; i++) y[i] = (x[i] - m) * rs * w[i] + b[i];
        } else if (!kp->weight && !kp->bias) {
            for (int64_t i = 0; i < j->len; i++) y[i] = (x[i] - m) * rs;
        } else {
            for (int64_t i = 0; i < j->len; i++)
                y[i] = (x[i] - m) * rs * (j->w ? j->w[i] : (float)norm_ld_F32(kp->weight, i, 1.0)) +
                       (j->b ? j->b[i] : (float)norm_ld_F32(kp->bias, i, 0.0));
        }
    }
}

static const float *gln_packed(const mft_tensor *t) {
    return t && mft_tensor_is_contiguous(t, MFT_CONTIGUOUS)
               ? (const float *)(const void *)mft__tensor_ptr(t)
               : NULL;
}

static void gln_fast_run(const mft_kernel_args *a, bool layer) {
    const mft__norm_kparams *kp = a->params;
    const mft_tensor *x = a->inputs[0];
    if (x->numel == 0) return;
    gln_job j;
    j.x = (const float *)(const void *)mft__tensor_ptr(x);
    j.y = (float *)(void *)mft__tensor_ptr(a->outputs[0]);
    j.kp = kp;
    j.w = j.b = NULL;
    if (layer) {
        j.len = mft__dims_prod(x, x->ndim - kp->p.nnorm, x->ndim);
        j.S = j.C = j.G = 1;
        j.w = gln_packed(kp->weight);
        j.b = gln_packed(kp->bias);
    } else {
        j.C = x->sizes[1];
        j.G = kp->p.groups;
        j.S = mft__dims_prod(x, 2, x->ndim);
        j.len = (j.C / j.G) * j.S;
    }
    mft__parallel_for(0, x->numel / j.len, bn_grain(j.len), layer ? ln_sets : gn_sets, &j);
}
static void group_norm_nchw_f32(const mft_kernel_args *a) { gln_fast_run(a, false); }
static void layer_norm_nchw_f32(const mft_kernel_args *a) { gln_fast_run(a, true); }

/* NHWC layer_norm, x [N, lead spatial (Lsp), normalised spatial (P), C]
 * physically, nnorm <= nd - 2: each statistics set (n, c, lead) is one
 * column of a [P, C] block. Work item = (block, chunk of LN_COLS columns):
 * per-column sums in double over the P rows in order (two passes), then one
 * pass writing y. j->S holds Lsp, j->len P; j->w / j->b the packed weight /
 * bias of P elements (never NULL here). */
#define LN_COLS 64
static void ln_nhwc_cols(void *v, int64_t b0, int64_t e) {
    const gln_job *j = v;
    const mft__norm_kparams *kp = j->kp;
    const int64_t C = j->C, P = j->len, Lsp = j->S, nch = (C + LN_COLS - 1) / LN_COLS;
    for (int64_t it = b0; it < e; it++) {
        const int64_t blk = it / nch, c0 = (it % nch) * LN_COLS;
        const int64_t w = C - c0 < LN_COLS ? C - c0 : LN_COLS;
        const int64_t n = blk / Lsp, ls = blk % Lsp;
        const float *x = j->x + blk * P * C + c0;
        float *y = j->y + blk * P * C + c0;
        double m[LN_COLS], q[LN_COLS];
        float mf[LN_COLS], rs[LN_COLS];
        for (int64_t i = 0; i < w; i++) m[i] = q[i] = 0.0;
        for (int64_t p = 0; p < P; p++)
            for (int64_t i = 0; i < w; i++) m[i] += (double)x[p * C + i];
        for (int64_t i = 0; i < w; i++) m[i] /= (double)P;
        for (int64_t p = 0; p < P; p++)
            for (int64_t i = 0; i < w; i++) {
                const double d = (double)x[p * C + i] - m[i];
                q[i] += d * d;
            }
        for (int64_t i = 0; i < w; i++) {
            const int64_t k = (n * C + c0 + i) * Lsp + ls;
            kp->mean[k] = m[i];
            kp->var[k] = q[i] / (double)P;
            mf[i] = (float)m[i];
            rs[i] = (float)(1.0 / sqrt(kp->var[k] + kp->p.eps));
        }
        for (int64_t p = 0; p < P; p++) {
            const float wv = j->w[p], bv = j->b[p];
            const float *restrict xr = x + p * C;
            float *restrict yr = y + p * C;
            for (int64_t i = 0; i < w; i++) yr[i] = (xr[i] - mf[i]) * rs[i] * wv + bv;
        }
    }
}

/* weight / bias of the normalised block into wf / bf in physical order:
 * position P holds logical element Q of MFT__LN_PERM_FOR(Nb, C, Sp) (Nb = C
 * = 1, Sp = L: the identity); absent ones as 1 / 0. */
static void ln_gather(const mft__norm_kparams *kp, int64_t Nb, int64_t C, int64_t Sp, float *wf,
                      float *bf) {
    for (int k = 0; k < 2; k++) {
        const mft_tensor *t = k ? kp->bias : kp->weight;
        float *dst = k ? bf : wf;
        const float *tp = gln_packed(t);
        if (tp)
            MFT__LN_PERM_FOR(Nb, C, Sp, P, Q, dst[P] = tp[Q];)
        else
            MFT__LN_PERM_FOR(Nb, C, Sp, P, Q, dst[P] = (float)norm_ld_F32(t, Q, k ? 0.0 : 1.0);)
    }
}

/* NHWC layer_norm F32. nnorm >= nd - 1: the normalised block holds C, so
 * each set is one contiguous run in NHWC too (only permuted): ln_sets with
 * the weight / bias gathered in physical order. Otherwise ln_nhwc_cols.
 * Scratch: 2 * L floats. */
static void layer_norm_nhwc_f32(const mft_kernel_args *a) {
    const mft__norm_kparams *kp = a->params;
    const mft_tensor *x = a->inputs[0];
    const int nd = x->ndim;
    if (x->numel == 0) return;
    if (nd < 3 || nd > 5) {
        gln_fast_run(a, true);
        return;
    }
    const int64_t L = mft__dims_prod(x, nd - kp->p.nnorm, nd);
    float *wf = (float *)(void *)kp->scratch, *bf = wf + L;
    gln_job j;
    j.x = (const float *)(const void *)mft__tensor_ptr(x);
    j.y = (float *)(void *)mft__tensor_ptr(a->outputs[0]);
    j.kp = kp;
    j.w = wf;
    j.b = bf;
    j.C = x->sizes[1];
    j.G = 1;
    j.len = L;
    if (kp->p.nnorm >= nd - 1) {
        const int64_t C = x->sizes[1], Sp = mft__dims_prod(x, 2, nd);
        const int64_t Nb = kp->p.nnorm == nd ? x->sizes[0] : 1;
        ln_gather(kp, Nb, C, Sp, wf, bf);
        j.S = 1;
        mft__parallel_for(0, x->numel / L, bn_grain(L), ln_sets, &j);
    } else {
        ln_gather(kp, 1, 1, L, wf, bf);
        j.S = mft__dims_prod(x, 2, nd - kp->p.nnorm); /* Lsp */
        const int64_t nch = (j.C + LN_COLS - 1) / LN_COLS;
        const int64_t items = x->sizes[0] * j.S * nch;
        mft__parallel_for(0, items, bn_grain(L * (j.C < LN_COLS ? j.C : LN_COLS)), ln_nhwc_cols,
                          &j);
    }
}

/* NHWC group_norm: x is [N, S, C]. Work item = (sample n, block of BN_ROWS
 * rows): per-channel sums of d = x - p and d^2, p = the channel's pivot
 * (its value in the sample's first row, so d is small and the shifted
 * second moment does not cancel), in float over sub-blocks of NH_SUB rows
 * (vectorisable over C) then double, into part1 / part2[item * C + c]. One
 * pass over x for the statistics; they are combined per group in block
 * order (fixed, so independent of the thread count):
 *   mean = sum_c (S p_c + S1_c) / cnt,
 *   M2   = sum_c (S2_c + 2 (p_c - mean) S1_c + S (p_c - mean)^2).
 * Then per-(sample, channel) float scale / mean / bias and one pass over the
 * rows (parallel over rows). Scratch: gn_nhwc_scratch doubles. */
typedef struct gnh_job {
    const float *x;
    float *y;
    int64_t N, S, C, G, nblk;
    double *part1, *part2; /* [N * nblk * C] */
    const float *piv;      /* [N * C] */
    const float *sc, *mf, *bf; /* [N * C] */
} gnh_job;

static void gnh_sums(void *v, int64_t b0, int64_t e) {
    const gnh_job *j = v;
    const int64_t C = j->C;
    for (int64_t it = b0; it < e; it++) {
        const int64_t n = it / j->nblk, blk = it % j->nblk;
        const int64_t r0 = blk * BN_ROWS, r1 = r0 + BN_ROWS < j->S ? r0 + BN_ROWS : j->S;
        const float *x = j->x + (n * j->S + r0) * C;
        double *a1 = j->part1 + it * C, *a2 = j->part2 + it * C;
        const float *pv = j->piv + n * C;
        for (int64_t c0 = 0; c0 < C; c0 += NH_CCH) {
            const int64_t w = C - c0 < NH_CCH ? C - c0 : NH_CCH;
            float fa[NH_CCH], fb[NH_CCH];
            for (int64_t c = 0; c < w; c++) a1[c0 + c] = a2[c0 + c] = 0.0;
            for (int64_t s0 = 0; s0 < r1 - r0; s0 += NH_SUB) {
                const int64_t s1 = s0 + NH_SUB < r1 - r0 ? s0 + NH_SUB : r1 - r0;
                for (int64_t c = 0; c < w; c++) fa[c] = fb[c] = 0.0f;
                for (int64_t r = s0; r < s1; r++) {
                    const float *restrict xr = x + r * C + c0, *restrict pr = pv + c0;
                    for (int64_t c = 0; c < w; c++) {
                        const float d = xr[c] - pr[c];
                        fa[c] += d;
                        fb[c] += d * d;
                    }
                }
                for (int64_t c = 0; c < w; c++) {
                    a1[c0 + c] += (double)fa[c];
                    a2[c0 + c] += (double)fb[c];
                }
            }
        }
    }
}
static void gnh_norm(void *v, int64_t b, int64_t e) {
    const gnh_job *j = v;
    const int64_t C = j->C;
    for (int64_t r = b; r < e; r++) {
        const int64_t q = (r / j->S) * C;
        const float *restrict sc = j->sc + q, *restrict mf = j->mf + q, *restrict bf = j->bf + q;
        const float *restrict xr = j->x + r * C;
        float *restrict yr = j->y + r * C;
        for (int64_t c = 0; c < C; c++) yr[c] = (xr[c] - mf[c]) * sc[c] + bf[c];
    }
}

static int64_t gn_nhwc_scratch(int64_t N, int64_t C, int64_t S) {
    return 2 * N * ((S + BN_ROWS - 1) / BN_ROWS) * C + 2 * N * C + 8;
}

static void group_norm_nhwc_f32(const mft_kernel_args *a) {
    const mft_tensor *x = a->inputs[0];
    const mft__norm_kparams *kp = a->params;
    if (x->numel == 0) return;
    if (x->ndim < 3) { /* rank 2: CHANNELS_LAST is CONTIGUOUS */
        gln_fast_run(a, false);
        return;
    }
    gnh_job j;
    j.x = (const float *)(const void *)mft__tensor_ptr(x);
    j.y = (float *)(void *)mft__tensor_ptr(a->outputs[0]);
    j.N = x->sizes[0];
    j.C = x->sizes[1];
    j.G = kp->p.groups;
    j.S = mft__dims_prod(x, 2, x->ndim);
    j.nblk = (j.S + BN_ROWS - 1) / BN_ROWS;
    const int64_t N = j.N, C = j.C, G = j.G, cg = C / G, S = j.S, nit = N * j.nblk;
    j.part1 = kp->scratch;
    j.part2 = kp->scratch + nit * C;
    float *sc = (float *)(void *)(kp->scratch + 2 * nit * C), *mf = sc + N * C, *bf = mf + N * C;
    float *piv = bf + N * C; /* 4 * N * C floats in 2 * N * C doubles */
    for (int64_t n = 0; n < N; n++) memcpy(piv + n * C, j.x + n * S * C, sizeof(float) * (size_t)C);
    j.piv = piv;
    j.sc = sc;
    j.mf = mf;
    j.bf = bf;
    mft__parallel_for(0, nit, bn_grain(BN_ROWS * C), gnh_sums, &j);
    const double cnt = (double)(S * cg);
    for (int64_t n = 0; n < N; n++)
        for (int64_t g = 0; g < G; g++) {
            double sum = 0.0;
            for (int64_t c = g * cg; c < (g + 1) * cg; c++) {
                double s1 = 0.0;
                for (int64_t b = 0; b < j.nblk; b++) s1 += j.part1[(n * j.nblk + b) * C + c];
                sum += (double)S * (double)piv[n * C + c] + s1;
            }
            const double m = sum / cnt;
            double m2 = 0.0;
            for (int64_t c = g * cg; c < (g + 1) * cg; c++) {
                double s1 = 0.0, s2 = 0.0;
                for (int64_t b = 0; b < j.nblk; b++) {
                    s1 += j.part1[(n * j.nblk + b) * C + c];
                    s2 += j.part2[(n * j.nblk + b) * C + c];
                }
                const double dp = (double)piv[n * C + c] - m;
                m2 += s2 + 2.0 * dp * s1 + (double)S * dp * dp;
            }
            kp->mean[n * G + g] = m;
            kp->var[n * G + g] = m2 > 0.0 ? m2 / cnt : 0.0;
        }
    for (int64_t c = 0; c < C; c++) {
        const double w = norm_ld_F32(kp->weight, c, 1.0), bb = norm_ld_F32(kp->bias, c, 0.0);
        for (int64_t n = 0; n < N; n++) {
            const int64_t k = n * G + c / cg;
            sc[n * C + c] = (float)(w / sqrt(kp->var[k] + kp->p.eps));
            mf[n * C + c] = (float)kp->mean[k];
            bf[n * C + c] = (float)bb;
        }
    }
    mft__parallel_for(0, N * S, bn_grain(C), gnh_norm, &j);
}

/* ---------------------------------------------------------------- table */
const mft__kernel_def mft__kernels_norm[] = {
    {MFT__OP_BATCH_NORM, MFT_CONTIGUOUS, MFT_F32, "batch_norm.nchw.f32", batch_norm_nchw_f32},
    {MFT__OP_BATCH_NORM, MFT_CHANNELS_LAST, MFT_F32, "batch_norm.nhwc.f32", batch_norm_nhwc_f32},
    {MFT__OP_BATCH_NORM, MFT_CONTIGUOUS, MFT_F64, "batch_norm.nchw.f64.ref", batch_norm_ref_F64},
    {MFT__OP_GROUP_NORM, MFT_CONTIGUOUS, MFT_F32, "group_norm.nchw.f32", group_norm_nchw_f32},
    {MFT__OP_GROUP_NORM, MFT_CHANNELS_LAST, MFT_F32, "group_norm.nhwc.f32", group_norm_nhwc_f32},
    {MFT__OP_GROUP_NORM, MFT_CONTIGUOUS, MFT_F64, "group_norm.nchw.f64.ref", group_norm_ref_F64},
    {MFT__OP_GROUP_NORM, MFT_CHANNELS_LAST, MFT_F64, "group_norm.nhwc.f64.ref", group_norm_ref_F64},
    {MFT__OP_LAYER_NORM, MFT_CONTIGUOUS, MFT_F32, "layer_norm.nchw.f32", layer_norm_nchw_f32},
    {MFT__OP_LAYER_NORM, MFT_CHANNELS_LAST, MFT_F32, "layer_norm.nhwc.f32", layer_norm_nhwc_f32},
    {MFT__OP_LAYER_NORM, MFT_CONTIGUOUS, MFT_F64, "layer_norm.nchw.f64.ref", layer_norm_ref_F64},
    {0, 0, 0, NULL, NULL},
};

/* The reference kernels for tests (op: 0 batch_norm, 1 group_norm, 2
 * layer_norm); they read and write through the real strides. NULL for other
 * dtypes. (Declared here: ops_internal.h is not this file's to change.) */
mft_kernel_fn mft__norm_reference(int op, mft_dtype dt);
mft_kernel_fn mft__norm_reference(int op, mft_dtype dt) {
    static const mft_kernel_fn f32[3] = {batch_norm_ref_F32, group_norm_ref_F32, layer_norm_ref_F32};
    static const mft_kernel_fn f64[3] = {batch_norm_ref_F64, group_norm_ref_F64, layer_norm_ref_F64};
    if (op < 0 || op > 2) return NULL;
    return dt == MFT_F32 ? f32[op] : dt == MFT_F64 ? f64[op] : NULL;
}

/* ---------------------------------------------------------------- entry points */
static bool norm_check_x(const char *fn, const mft_tensor *x, int min_rank) {
    if (!x) {
        mft__null_arg(fn, "x");
        return false;
    }
    if (x->ndim < min_rank) {
        mft__set_error(MFT_ERR_RANK, "%s: needs a tensor of rank >= %d, got rank %d", fn, min_rank,
                       x->ndim);
        return false;
    }
    if (x->dtype != MFT_F32 && x->dtype != MFT_F64) {
        mft__set_error(MFT_ERR_DTYPE, "%s: dtype %s is not supported (f32 or f64 only)", fn,
                       mft_dtype_name(x->dtype));
        return false;
    }
    return true;
}

/* t NULL (allowed), or of shape want[0..n) and x's dtype. */
static bool norm_check_param(const char *fn, const char *what, const mft_tensor *t,
                             const mft_tensor *x, int n, const int64_t *want) {
    if (!t) return true;
    char b1[MFT__DIMS_BUF], b2[MFT__DIMS_BUF];
    bool same = t->ndim == n;
    for (int d = 0; same && d < n; d++) same = t->sizes[d] == want[d];
    if (!same) {
        mft__set_error(MFT_ERR_SHAPE, "%s: %s has shape %s, expected %s", fn, what,
                       mft__fmt_dims(b1, sizeof b1, t->ndim, t->sizes),
                       mft__fmt_dims(b2, sizeof b2, n, want));
        return false;
    }
    if (t->dtype != x->dtype) {
        mft__set_error(MFT_ERR_DTYPE, "%s: %s has dtype %s, x has %s", fn, what,
                       mft_dtype_name(t->dtype), mft_dtype_name(x->dtype));
        return false;
    }
    return true;
}

/* The running statistics of a training batch_norm, computed but not yet
 * written: the op writes them only once nothing can fail any more (the
 * result registered, the tape node recorded), so a failed call leaves them
 * untouched. vals: the batch's mean [C] then biased variance [C]. */
typedef struct bn_pending {
    double *vals;
    int64_t C, count;
    double momentum;
    mft_tensor *rmean, *rvar;
} bn_pending;

/* running = (1 - momentum) * running + momentum * stat (unbiased var). */
static void bn_commit(bn_pending *pd) {
    for (int pass = 0; pass < 2 && pd->vals && pd->count > 0; pass++) {
        mft_tensor *t = pass == 0 ? pd->rmean : pd->rvar;
        if (!t) continue;
        const size_t es = mft__elem_size(t->dtype);
        for (int64_t c = 0; c < pd->C; c++) {
            char *p = mft__tensor_ptr(t) + (size_t)(c * t->strides[0]) * es;
            double stat = pass == 0 ? pd->vals[c]
                                    : pd->vals[pd->C + c] * (double)pd->count /
                                          (double)(pd->count - 1);
            mft__store(t->dtype, p, (1.0 - pd->momentum) * mft__load(t->dtype, p) +
                                        pd->momentum * stat);
        }
        atomic_fetch_add(&t->storage->version, 1);
    }
    mft__free(pd->vals);
    pd->vals = NULL;
}

/* Allocates the result and stats, dispatches. Running stats: kp->mean/var
 * are filled from rmean / rvar before the kernel (eval); for training with
 * `pending` the batch statistics are handed to *pending for bn_commit
 * (pending->vals stays NULL when nothing is to be written). Returns the
 * result (owned like any op result) or NULL. */
static mft_tensor *norm_run(const char *fn, mft__op_id op, const mft_tensor *x,
                            mft__norm_kparams *kp, int64_t nstat, int64_t nscratch,
                            const mft_tensor *rmean, const mft_tensor *rvar, bn_pending *pending,
                            mft_tensor **smean, mft_tensor **srstd) {
    if (smean) *smean = NULL;
    if (srstd) *srstd = NULL;
    const mft__decision dec = mft__rule_decide(op == MFT__OP_LAYER_NORM ? MFT__RULE_NORM_DEV : MFT__RULE_NORM, mft__op_name(op), 1, &x, MFT_CONTIGUOUS, 0);
    const mft_format fmt = dec.tag;
    size_t nd = (size_t)(2 * nstat + nscratch);
    double *buf = mft__alloc_or_err(fn, (nd ? nd : 1) * sizeof(double), 64);
    if (!buf) return NULL;
    kp->mean = buf;
    kp->var = buf + nstat;
    kp->scratch = buf + 2 * nstat;
    kp->nscratch = nscratch;
    if (rmean) /* eval: running statistics */
        for (int64_t c = 0; c < nstat; c++) {
            kp->mean[c] = mft__load(rmean->dtype, mft__tensor_ptr(rmean) +
                                                      (size_t)(c * rmean->strides[0]) *
                                                          mft__elem_size(rmean->dtype));
            kp->var[c] = mft__load(rvar->dtype, mft__tensor_ptr(rvar) +
                                                    (size_t)(c * rvar->strides[0]) *
                                                        mft__elem_size(rvar->dtype));
        }
    mft__scope_suspend();
    mft_tensor *res = mft__tensor_alloc(fn, x->ndim, x->sizes, x->dtype, fmt);
    bool ok = res != NULL;
    if (ok) {
        const mft_tensor *ins[1] = {x};
        const bool convert[1] = {true};
        mft_tensor *outs[1] = {res};
        ok = mft__dispatch(fn, g_tables, op, fmt, x->dtype, 1, ins, convert, 1, outs, kp) == MFT_OK;
    }
    if (ok) mft__rule_apply(res, &dec);
    /* statistics for the backward (x's dtype): mean, 1 / sqrt(var + eps) */
    mft_tensor *st[2] = {NULL, NULL};
    for (int k = 0; k < 2 && ok; k++) {
        if (!(k ? srstd : smean)) continue;
        st[k] = mft__tensor_alloc(fn, 1, &nstat, x->dtype, MFT_CONTIGUOUS);
        ok = st[k] != NULL;
        for (int64_t c = 0; ok && c < nstat; c++)
            mft__store(x->dtype, mft__tensor_ptr(st[k]) + (size_t)c * mft__elem_size(x->dtype),
                       k ? 1.0 / sqrt(kp->var[c] + kp->p.eps) : kp->mean[c]);
    }
    mft__scope_resume();
    if (!ok) {
        mft__relabel_error(fn);
        mft_tensor_release(res);
        mft_tensor_release(st[0]);
        mft_tensor_release(st[1]);
        mft__free(buf);
        return NULL;
    }
    /* training: the batch statistics (buf starts with mean [nstat], var
     * [nstat]) go to the caller, which commits them last (bn_pending) */
    const bool hand = pending && pending->count > 0 && (pending->rmean || pending->rvar);
    if (hand) {
        pending->vals = buf;
        pending->C = nstat;
    } else {
        mft__free(buf);
    }
    mft_tensor *r = mft__retain_result(fn, res);
    mft_tensor_release(res);
    for (int k = 0; k < 2; k++) {
        if (!st[k]) continue;
        mft_tensor *o = r ? mft__retain_result(fn, st[k]) : NULL;
        mft_tensor_release(st[k]);
        if (r && !o) {
            /* out of memory registering in the open scope (the only way
             * this fails): the results registered so far belong to the
             * scope, which releases them; the caller gets nothing */
            if (k == 0) mft_tensor_release(st[1]);
            if (smean) *smean = NULL;
            r = NULL;
            break;
        }
        *(k ? srstd : smean) = o;
    }
    if (!r && hand) { /* nothing is committed for a failed call */
        mft__free(pending->vals);
        pending->vals = NULL;
    }
    return r;
}

/* The op without its tape node; a training call leaves its running-stat
 * update in *pd for bn_commit (pd->vals NULL: nothing to write). */
static mft_tensor *batch_norm_impl(const char *fn, const mft_tensor *x, mft_tensor *running_mean,
                                   mft_tensor *running_var, const mft_tensor *weight,
                                   const mft_tensor *bias, bool training, double momentum,
                                   double eps, mft_tensor **smean, mft_tensor **srstd,
                                   bn_pending *pd) {
    memset(pd, 0, sizeof *pd);
    if (smean) *smean = NULL;
    if (srstd) *srstd = NULL;
    if (!norm_check_x(fn, x, 2)) return NULL;
    const int64_t C = x->sizes[1];
    if (!norm_check_param(fn, "weight", weight, x, 1, &C) ||
        !norm_check_param(fn, "bias", bias, x, 1, &C) ||
        !norm_check_param(fn, "running_mean", running_mean, x, 1, &C) ||
        !norm_check_param(fn, "running_var", running_var, x, 1, &C))
        return NULL;
    if (!training && (!running_mean || !running_var)) {
        mft__set_error(MFT_ERR_NULL, "%s: eval mode (training = false) needs running_mean and "
                       "running_var, got %s NULL", fn,
                       !running_mean && !running_var ? "both" : !running_mean ? "running_mean"
                                                                               : "running_var");
        return NULL;
    }
    const int64_t count = x->numel / (C ? C : 1);
    if (training && x->numel > 0 && count == 1) {
        char b[MFT__DIMS_BUF];
        mft__set_error(MFT_ERR_SHAPE,
                       "%s: expected more than 1 value per channel when training, got input of "
                       "shape %s", fn, mft__fmt_dims(b, sizeof b, x->ndim, x->sizes));
        return NULL;
    }
    if (!(eps >= 0.0)) {
        mft__set_error(MFT_ERR_INVALID, "%s: eps must be >= 0, got %g", fn, eps);
        return NULL;
    }
    if (training) {
        for (int k = 0; k < 2; k++) {
            mft_tensor *t = k ? running_var : running_mean;
            if (t && mft__check_writable(fn, t) != MFT_OK) return NULL;
        }
    }
    const int64_t S = x->numel && C ? x->numel / (x->sizes[0] * C) : 0;
    const int64_t rows = x->sizes[0] * S;
    const int64_t nblk = (rows + BN_ROWS - 1) / BN_ROWS;
    const int64_t part = nblk * C > x->sizes[0] * C ? nblk * C : x->sizes[0] * C;
    mft__norm_kparams kp = {{eps, momentum, training, 0, 0}, weight, bias, NULL, NULL, NULL, 0};
    *pd = (bn_pending){NULL, C, x->numel ? count : 0, momentum,
                       training ? running_mean : NULL, training ? running_var : NULL};
    return norm_run(fn, MFT__OP_BATCH_NORM, x, &kp, C, 2 * C + part,
                    training ? NULL : running_mean, training ? NULL : running_var, pd, smean,
                    srstd);
}

static mft_tensor *group_norm_impl(const char *fn, const mft_tensor *x, int64_t groups,
                                   const mft_tensor *weight, const mft_tensor *bias, double eps,
                                   bool instance, mft_tensor **smean, mft_tensor **srstd) {
    if (smean) *smean = NULL;
    if (srstd) *srstd = NULL;
    if (!norm_check_x(fn, x, 2)) return NULL;
    const int64_t C = x->sizes[1];
    if (instance) {
        groups = C;
        if (x->numel > 0 && mft__dims_prod(x, 2, x->ndim) == 1) {
            char b[MFT__DIMS_BUF];
            mft__set_error(MFT_ERR_SHAPE,
                           "%s: expected more than 1 spatial element, got input of shape %s", fn,
                           mft__fmt_dims(b, sizeof b, x->ndim, x->sizes));
            return NULL;
        }
    } else if (groups < 1 || C % groups != 0) {
        mft__set_error(MFT_ERR_SHAPE, "%s: groups = %lld must be >= 1 and divide C = %lld", fn,
                       (long long)groups, (long long)C);
        return NULL;
    } else if (x->numel > 0 && x->sizes[0] * (C / groups) * mft__dims_prod(x, 2, x->ndim) == 1) {
        /* PyTorch 1.13's F.group_norm check (_verify_batch_size) */
        char b[MFT__DIMS_BUF];
        mft__set_error(MFT_ERR_SHAPE,
                       "%s: expected more than 1 value per group (N * C / groups * spatial), got "
                       "input of shape %s with groups = %lld", fn,
                       mft__fmt_dims(b, sizeof b, x->ndim, x->sizes), (long long)groups);
        return NULL;
    }
    if (!norm_check_param(fn, "weight", weight, x, 1, &C) ||
        !norm_check_param(fn, "bias", bias, x, 1, &C))
        return NULL;
    if (!(eps >= 0.0)) {
        mft__set_error(MFT_ERR_INVALID, "%s: eps must be >= 0, got %g", fn, eps);
        return NULL;
    }
    mft__norm_kparams kp = {{eps, 0.0, true, groups ? groups : 1, 0}, weight, bias, NULL, NULL,
                            NULL, 0};
    return norm_run(fn, MFT__OP_GROUP_NORM, x, &kp, x->sizes[0] * (groups ? groups : 1),
                    gn_nhwc_scratch(x->sizes[0], C, mft__dims_prod(x, 2, x->ndim)), NULL, NULL, NULL,
                    smean, srstd);
}

static mft_tensor *layer_norm_impl(const char *fn, const mft_tensor *x, int nnorm,
                                   const int64_t *normalized_shape, const mft_tensor *weight,
                                   const mft_tensor *bias, double eps, mft_tensor **smean,
                                   mft_tensor **srstd) {
    if (smean) *smean = NULL;
    if (srstd) *srstd = NULL;
    if (!norm_check_x(fn, x, 1)) return NULL;
    if (nnorm < 1 || nnorm > x->ndim) {
        mft__set_error(MFT_ERR_INVALID, "%s: nnorm = %d must be in 1..%d (rank of x)", fn, nnorm,
                       x->ndim);
        return NULL;
    }
    if (!normalized_shape) {
        mft__null_arg(fn, "normalized_shape");
        return NULL;
    }
    const int lead = x->ndim - nnorm;
    for (int d = 0; d < nnorm; d++)
        if (x->sizes[lead + d] != normalized_shape[d]) {
            char b1[MFT__DIMS_BUF], b2[MFT__DIMS_BUF];
            mft__set_error(MFT_ERR_SHAPE,
                           "%s: normalized_shape %s does not match the last %d dims of x %s", fn,
                           mft__fmt_dims(b1, sizeof b1, nnorm, normalized_shape), nnorm,
                           mft__fmt_dims(b2, sizeof b2, x->ndim, x->sizes));
            return NULL;
        }
    if (!norm_check_param(fn, "weight", weight, x, nnorm, normalized_shape) ||
        !norm_check_param(fn, "bias", bias, x, nnorm, normalized_shape))
        return NULL;
    if (!(eps >= 0.0)) {
        mft__set_error(MFT_ERR_INVALID, "%s: eps must be >= 0, got %g", fn, eps);
        return NULL;
    }
    const int64_t L = mft__dims_prod(x, lead, x->ndim);
    const int64_t nstat = L ? x->numel / L : 0;
    mft__norm_kparams kp = {{eps, 0.0, true, 0, nnorm}, weight, bias, NULL, NULL, NULL, 0};
    /* NHWC kernel: 2 L floats */
    return norm_run(fn, MFT__OP_LAYER_NORM, x, &kp, nstat, L + 1, NULL, NULL, NULL, smean,
                    srstd);
}

/* ---------------------------------------------------------------- autograd */
enum { NORM_AG_BATCH, NORM_AG_GROUP, NORM_AG_INSTANCE, NORM_AG_LAYER };

typedef struct norm_ag_params {
    int64_t shape[MFT_MAX_DIMS]; /* layer_norm: normalized_shape[0..nnorm) */
    int64_t groups;
    double eps;
    int kind, nnorm;
    bool training;
} norm_ag_params;

/* saved = {x, weight, mean, rstd}; gradients for the inputs that need one. */
static mft_status norm_node_backward(const mft__ag_node *n, mft_tensor *const *gout,
                                     mft_tensor **gin) {
    const norm_ag_params *p = n->params;
    const mft_tensor *x = n->saved[0], *w = n->saved[1], *m = n->saved[2], *r = n->saved[3];
    mft_tensor **gx = n->in[0].needs_grad ? &gin[0] : NULL;
    mft_tensor **gw = n->in[1].needs_grad ? &gin[1] : NULL;
    mft_tensor **gb = n->in[2].needs_grad ? &gin[2] : NULL;
    switch (p->kind) {
    case NORM_AG_BATCH:
        return mft_batch_norm_backward(gout[0], x, w, m, r, p->training, gx, gw, gb);
    case NORM_AG_GROUP:
        return mft_group_norm_backward(gout[0], x, p->groups, m, r, w, p->eps, gx, gw, gb);
    case NORM_AG_INSTANCE:
        return mft_instance_norm_backward(gout[0], x, m, r, w, p->eps, gx, gw, gb);
    default:
        return mft_layer_norm_backward(gout[0], x, p->nnorm, p->shape, m, r, w, p->eps, gx, gw,
                                       gb);
    }
}

/* Starts a forward that will record: grad mode off (the helpers record
 * nothing) and the user's scope suspended (the results are ours until
 * norm_finish hands them over). */
static bool norm_ag_begin(void) {
    mft__scope_suspend();
    return mft_set_grad_enabled(false);
}

static void norm_ag_end(bool prev) {
    mft_set_grad_enabled(prev);
    mft__scope_resume();
}

/* Records the node for y (ours, NULL after a failed forward) computed from
 * ins = {x, weight, bias} with statistics m, r (ours), then hands y over as
 * the result and the statistics to *um / *ur when asked (else drops ours).
 * On failure releases everything and returns NULL with *um, *ur NULL. */
static mft_tensor *norm_finish(const char *fn, const char *name, mft_tensor *y,
                               const mft_tensor *const *ins, mft_tensor *m, mft_tensor *r,
                               const norm_ag_params *p, mft_tensor **um, mft_tensor **ur) {
    if (um) *um = NULL;
    if (ur) *ur = NULL;
    if (!y) {
        mft_tensor_release(m);
        mft_tensor_release(r);
        return NULL;
    }
    const mft_tensor *saved[4] = {ins[0], ins[1], m, r};
    mft_tensor *outs[1] = {y};
    if (mft__ag_record(fn, name, norm_node_backward, 3, ins, 1, outs, 4, saved, p, sizeof *p) !=
        MFT_OK) {
        mft_tensor_release(y);
        mft_tensor_release(m);
        mft_tensor_release(r);
        return NULL;
    }
    mft_tensor *res = mft__retain_result(fn, y);
    mft_tensor_release(y);
    mft_tensor *stat[2] = {m, r};
    mft_tensor **dst[2] = {um, ur};
    for (int k = 0; k < 2; k++) {
        if (res && dst[k]) {
            *dst[k] = mft__retain_result(fn, stat[k]);
            if (!*dst[k]) {
                /* out of memory registering in the open scope (the only way
                 * this fails), which owns what was registered before: the
                 * caller gets nothing */
                res = NULL;
                if (um) *um = NULL;
            }
        }
        mft_tensor_release(stat[k]);
    }
    return res;
}

/* ---------------------------------------------------------------- entry points (recording) */
static mft_tensor *batch_norm_entry(const char *fn, const mft_tensor *x, mft_tensor *running_mean,
                                    mft_tensor *running_var, const mft_tensor *weight,
                                    const mft_tensor *bias, bool training, double momentum,
                                    double eps, mft_tensor **um, mft_tensor **ur) {
    const mft_tensor *ins[3] = {x, weight, bias};
    if (training && (mft__ag_check_inplace(fn, running_mean) != MFT_OK ||
                     mft__ag_check_inplace(fn, running_var) != MFT_OK)) {
        if (um) *um = NULL;
        if (ur) *ur = NULL;
        return NULL;
    }
    bn_pending pd;
    if (!mft__ag_wants(3, ins)) {
        mft_tensor *y = batch_norm_impl(fn, x, running_mean, running_var, weight, bias, training,
                                        momentum, eps, um, ur, &pd);
        bn_commit(&pd); /* (nothing when y is NULL) */
        return y;
    }
    mft_tensor *m = NULL, *r = NULL;
    const bool prev = norm_ag_begin();
    mft_tensor *y = batch_norm_impl(fn, x, running_mean, running_var, weight, bias, training,
                                    momentum, eps, &m, &r, &pd);
    norm_ag_end(prev);
    norm_ag_params p;
    memset(&p, 0, sizeof p);
    p.kind = NORM_AG_BATCH;
    p.eps = eps;
    p.training = training;
    mft_tensor *res = norm_finish(fn, "batch_norm", y, ins, m, r, &p, um, ur);
    if (res) {
        bn_commit(&pd);
    } else {
        mft__free(pd.vals);
    }
    return res;
}

mft_tensor *mft_batch_norm(const mft_tensor *x, mft_tensor *running_mean, mft_tensor *running_var,
                           const mft_tensor *weight, const mft_tensor *bias, bool training,
                           double momentum, double eps) {
    return batch_norm_entry("mft_batch_norm", x, running_mean, running_var, weight, bias,
                            training, momentum, eps, NULL, NULL);
}

mft_tensor *mft_batch_norm_ex(const mft_tensor *x, mft_tensor *running_mean,
                              mft_tensor *running_var, const mft_tensor *weight,
                              const mft_tensor *bias, bool training, double momentum, double eps,
                              mft_tensor **save_mean, mft_tensor **save_invstd) {
    return batch_norm_entry("mft_batch_norm_ex", x, running_mean, running_var, weight, bias,
                            training, momentum, eps, save_mean, save_invstd);
}

static mft_tensor *group_norm_entry(const char *fn, const mft_tensor *x, int64_t groups,
                                    const mft_tensor *weight, const mft_tensor *bias, double eps,
                                    bool instance, mft_tensor **um, mft_tensor **ur) {
    const mft_tensor *ins[3] = {x, weight, bias};
    if (!mft__ag_wants(3, ins))
        return group_norm_impl(fn, x, groups, weight, bias, eps, instance, um, ur);
    mft_tensor *m = NULL, *r = NULL;
    const bool prev = norm_ag_begin();
    mft_tensor *y = group_norm_impl(fn, x, groups, weight, bias, eps, instance, &m, &r);
    norm_ag_end(prev);
    norm_ag_params p;
    memset(&p, 0, sizeof p);
    p.kind = instance ? NORM_AG_INSTANCE : NORM_AG_GROUP;
    p.groups = groups;
    p.eps = eps;
    return norm_finish(fn, instance ? "instance_norm" : "group_norm", y, ins, m, r, &p, um, ur);
}

mft_tensor *mft_group_norm(const mft_tensor *x, int64_t groups, const mft_tensor *weight,
                           const mft_tensor *bias, double eps) {
    return group_norm_entry("mft_group_norm", x, groups, weight, bias, eps, false, NULL, NULL);
}

mft_tensor *mft_group_norm_ex(const mft_tensor *x, int64_t groups, const mft_tensor *weight,
                              const mft_tensor *bias, double eps, mft_tensor **mean,
                              mft_tensor **rstd) {
    return group_norm_entry("mft_group_norm_ex", x, groups, weight, bias, eps, false, mean, rstd);
}

mft_tensor *mft_instance_norm(const mft_tensor *x, const mft_tensor *weight,
                              const mft_tensor *bias, double eps) {
    return group_norm_entry("mft_instance_norm", x, 0, weight, bias, eps, true, NULL, NULL);
}

static mft_tensor *layer_norm_entry(const char *fn, const mft_tensor *x, int nnorm,
                                    const int64_t *normalized_shape, const mft_tensor *weight,
                                    const mft_tensor *bias, double eps, mft_tensor **um,
                                    mft_tensor **ur) {
    const mft_tensor *ins[3] = {x, weight, bias};
    if (!mft__ag_wants(3, ins))
        return layer_norm_impl(fn, x, nnorm, normalized_shape, weight, bias, eps, um, ur);
    mft_tensor *m = NULL, *r = NULL;
    const bool prev = norm_ag_begin();
    mft_tensor *y = layer_norm_impl(fn, x, nnorm, normalized_shape, weight, bias, eps, &m, &r);
    norm_ag_end(prev);
    norm_ag_params p;
    memset(&p, 0, sizeof p);
    p.kind = NORM_AG_LAYER;
    p.eps = eps;
    if (y) { /* nnorm and normalized_shape were validated */
        p.nnorm = nnorm;
        memcpy(p.shape, normalized_shape, (size_t)nnorm * sizeof *normalized_shape);
    }
    return norm_finish(fn, "layer_norm", y, ins, m, r, &p, um, ur);
}

mft_tensor *mft_layer_norm(const mft_tensor *x, int nnorm, const int64_t *normalized_shape,
                           const mft_tensor *weight, const mft_tensor *bias, double eps) {
    return layer_norm_entry("mft_layer_norm", x, nnorm, normalized_shape, weight, bias, eps, NULL,
                            NULL);
}

mft_tensor *mft_layer_norm_ex(const mft_tensor *x, int nnorm, const int64_t *normalized_shape,
                              const mft_tensor *weight, const mft_tensor *bias, double eps,
                              mft_tensor **mean, mft_tensor **rstd) {
    return layer_norm_entry("mft_layer_norm_ex", x, nnorm, normalized_shape, weight, bias, eps,
                            mean, rstd);
}
