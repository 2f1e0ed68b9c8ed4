/* ops/norm/norm_backward.c — backward of batch_norm, layer_norm, group_norm and
 * instance_norm (mft/norm.h), through the kernel dispatcher (DESIGN §7).
 * grad_x is packed in x's tag for rank 3-5, else contiguous (SPEC §5);
 * grad_weight / grad_bias are packed 1-D (C) or of normalized_shape.
 *
 * Formulas (xhat = (x - mean) * rstd, one statistics set of M elements,
 * w the affine weight of each element, 1 when absent):
 *   grad_bias[a]   = sum of dy over the elements with affine index a
 *   grad_weight[a] = sum of dy * xhat over the same elements
 *   grad_x = rstd * (w dy - s1 / M - xhat * s2 / M),
 *            s1 = sum_set w dy, s2 = sum_set w dy xhat
 *   batch_norm eval: grad_x = dy * w * rstd (running statistics).
 *
 * Kernel interface (BATCH_NORM_BACKWARD, LAYER_NORM_BACKWARD,
 * GROUP_NORM_BACKWARD; instance_norm is group_norm with groups = C)
 *   inputs  = {grad_out, x}  (both converted to the kernel's packed format)
 *   outputs = {grad_x}       (packed in the kernel's format)
 *   params  = const mft__normb_kparams * (below; starts with mft_norm_params:
 *             eps, training (batch_norm), groups, nnorm). The statistics
 *             travel as double arrays mean[nstat], rstd[nstat] (nstat as in
 *             ops/norm.c: C, N*groups, numel / prod(normalized_shape)),
 *             weight as a tensor of any strides (NULL = 1). The kernel
 *             writes gw[naff] = sum dy*xhat and gb[naff] = sum dy (naff = C,
 *             or prod(normalized_shape)) unless need_wb is false (then it
 *             may leave them alone). scratch[nscratch] doubles of work
 *             space (the entry point sizes it for the built-in kernels:
 *             nb_scratch below).
 *
 * Kernels
 *   reference (F32, F64): one loop nest for the three ops over logical
 *   indices through the real strides, sums in double, sets in order
 *   (serial). Registered as the F64 kernels (CONTIGUOUS and, since it
 *   reads any strides, CHANNELS_LAST); exported to tests through
 *   mft__norm_backward_reference.
 *   fast batch_norm / group_norm F32, CONTIGUOUS ([N, C, S]: per (n, c)
 *   plane sums, one work item per plane) and CHANNELS_LAST ([rows, C]:
 *   per-channel partial sums over blocks of NB_ROWS rows, vectorisable
 *   over C; blocks never cross a sample for group_norm). The partial sums
 *   (dy and dy * (x - mean), in double) are combined in a fixed order, then
 *   grad_x = A dy + B (x - mean) + D with per-(sample, channel) float
 *   coefficients, one pass writing each element once. Results do not
 *   depend on the thread count.
 *   fast layer_norm F32, CONTIGUOUS: one work item per normalised row
 *   (contiguous run); then, if needed, grad_weight / grad_bias over column
 *   blocks (each column summed over the rows in order).
 *   layer_norm CHANNELS_LAST F32: normalising all dims but N (or all) an
 *   NHWC sample is still one contiguous run, only permuted: the same row
 *   kernel with the weight gathered in physical order and the column sums
 *   scattered back; for smaller nnorm each set is a column of a [P, C]
 *   block (lnbc_cols / lnbc_rows, vectorised over channels).
 */
#include <stdlib.h>
#include <string.h>
#include "mft/cnn.h"
#include "norm_internal.h"

/* Note [Kernel tables]: the built-in kernels this family dispatches to. */
static const mft__kernel_def *const g_tables[] = {mft__kernels_norm_backward, NULL};
#if defined(__AVX512F__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define NB_HAVE_Z16 1
#else
#define NB_HAVE_Z16 0
#endif

typedef struct mft__normb_kparams {
    mft_norm_params p;
    const mft_tensor *weight; /* NULL: 1 */
    const double *mean, *rstd; /* [nstat] */
    double *gw, *gb;           /* [naff] */
    bool need_wb;
    double *scratch; /* [nscratch] */
    int64_t nscratch;
} mft__normb_kparams;

#define NB_ROWS 256
#define NB_GRAIN 32768
#define NB_COLS 256

static int64_t nb_grain(int64_t per_item) {
    int64_t g = NB_GRAIN / (per_item > 0 ? per_item : 1);
    return g < 1 ? 1 : g;
}

static double nb_ld(const mft_tensor *t, int64_t i) {
    if (!t) return 1.0;
    return mft__load(t->dtype, mft__tensor_ptr(t) +
                                   (size_t)mft__dims_off(t, 0, t->ndim, i) * mft__elem_size(t->dtype));
}

/* ---------------------------------------------------------------- reference */
/* op: 0 batch, 1 group, 2 layer. Set k has len elements; element j: offsets
 * in grad_out, x, grad_x and affine index a. */
#define NORMB_REF(D)                                                                          \
    static void normb_ref_run_##D(const mft_kernel_args *a, int op) {                         \
        typedef MFT__T_##D T;                                                                 \
        const mft__normb_kparams *kp = a->params;                                             \
        const mft_tensor *g = a->inputs[0], *x = a->inputs[1];                                \
        mft_tensor *y = a->outputs[0];                                                        \
        const int nd = x->ndim;                                                               \
        const int64_t N = x->sizes[0];                                                        \
        const int64_t C = op == 2 ? 1 : x->sizes[1];                                          \
        const int64_t S = op == 2 ? 1 : mft__dims_prod(x, 2, nd);                                    \
        const int64_t G = op == 1 ? kp->p.groups : 1;                                         \
        const int lead = op == 2 ? nd - kp->p.nnorm : 0;                                      \
        const int64_t L = op == 2 ? mft__dims_prod(x, lead, nd) : 0;                                 \
        const int64_t naff = op == 2 ? L : C;                                                 \
        for (int64_t i = 0; i < naff; i++) kp->gw[i] = kp->gb[i] = 0.0;                       \
        if (x->numel == 0) return;                                                            \
        const T *gp = (const T *)(const void *)mft__tensor_ptr(g);                           \
        const T *xp = (const T *)(const void *)mft__tensor_ptr(x);                           \
        T *yp = (T *)(void *)mft__tensor_ptr(y);                                              \
        const int64_t nstat = op == 0 ? C : op == 1 ? N * G : x->numel / L;                   \
        const int64_t len = op == 0 ? N * S : op == 1 ? (C / G) * S : L;                      \
        const bool train = op != 0 || kp->p.training;                                         \
        for (int64_t k = 0; k < nstat; k++) {                                                 \
            const double m = kp->mean[k], rs = kp->rstd[k];                                   \
            double s1 = 0.0, s2 = 0.0;                                                        \
            for (int pass = 0; pass < 2; pass++) {                                            \
                for (int64_t j = 0; j < len; j++) {                                           \
                    int64_t go, xo, yo, ai;                                                   \
                    if (op == 0) {                                                            \
                        const int64_t n = j / S, s = j % S;                                   \
                        go = n * g->strides[0] + k * g->strides[1] + mft__dims_off(g, 2, nd, s);     \
                        xo = n * x->strides[0] + k * x->strides[1] + mft__dims_off(x, 2, nd, s);     \
                        yo = n * y->strides[0] + k * y->strides[1] + mft__dims_off(y, 2, nd, s);     \
                        ai = k;                                                               \
                    } else if (op == 1) {                                                     \
                        const int64_t n = k / G, c = (k % G) * (C / G) + j / S, s = j % S;    \
                        go = n * g->strides[0] + c * g->strides[1] + mft__dims_off(g, 2, nd, s);     \
                        xo = n * x->strides[0] + c * x->strides[1] + mft__dims_off(x, 2, nd, s);     \
                        yo = n * y->strides[0] + c * y->strides[1] + mft__dims_off(y, 2, nd, s);     \
                        ai = c;                                                               \
                    } else {                                                                  \
                        go = mft__dims_off(g, 0, lead, k) + mft__dims_off(g, lead, nd, j);                  \
                        xo = mft__dims_off(x, 0, lead, k) + mft__dims_off(x, lead, nd, j);                  \
                        yo = mft__dims_off(y, 0, lead, k) + mft__dims_off(y, lead, nd, j);                  \
                        ai = j;                                                               \
                    }                                                                         \
                    const double dy = (double)gp[go], xh = ((double)xp[xo] - m) * rs;         \
                    const double w = nb_ld(kp->weight, ai);                                   \
                    if (pass == 0) {                                                          \
                        s1 += w * dy;                                                         \
                        s2 += w * dy * xh;                                                    \
                        kp->gw[ai] += dy * xh;                                                \
                        kp->gb[ai] += dy;                                                     \
                    } else if (train) {                                                       \
                        yp[yo] = (T)(rs * (w * dy - s1 / (double)len -                        \
                                           xh * s2 / (double)len));                           \
                    } else {                                                                  \
                        yp[yo] = (T)(dy * w * rs);                                            \
                    }                                                                         \
                }                                                                             \
            }                                                                                 \
        }                                                                                     \
    }                                                                                         \
    static void batch_norm_bwd_ref_##D(const mft_kernel_args *a) { normb_ref_run_##D(a, 0); } \
    static void group_norm_bwd_ref_##D(const mft_kernel_args *a) { normb_ref_run_##D(a, 1); } \
    static void layer_norm_bwd_ref_##D(const mft_kernel_args *a) { normb_ref_run_##D(a, 2); }
NORMB_REF(F32)
NORMB_REF(F64)

/* ---------------------------------------------------------------- fast batch/group norm F32 */
typedef struct nb_job {
    const float *dy, *x;
    float *dx;
    int64_t N, C, S, G, cg;
    bool bn;
    /* NHWC: nseg segments (batch_norm: 1 of N*S rows; group_norm: N of S
     * rows), nblk blocks of NB_ROWS rows each */
    int64_t nseg, segrows, nblk;
    const double *mexp; /* [nseg * C] (NHWC) mean per (segment, channel) */
    const double *mean; /* [nstat] */
    double *pdb, *pds;  /* partial sums */
    const float *A, *B, *D, *M; /* [ncoef * C] coefficients (BN: ncoef 1) */
} nb_job;

/* sum of w dy and of w dy (x - m) over n floats (w NULL: 1): blocks of
 * NB_FBLK elements summed in float (an `omp simd` reduction: vectorised,
 * in an order fixed at compile time, so the same for every thread count),
 * each block's sum added to double totals. */
#define NB_FBLK 512
static void nb_sums_w(const float *restrict dy, const float *restrict x,
                      const float *restrict w, int64_t n, double m, double *sdb,
                      double *sds) {
    const float mf = (float)m;
    const double dm = (double)mf - m; /* x - m = (x - mf) + dm */
    double A = 0.0, B = 0.0;
    for (int64_t i0 = 0; i0 < n; i0 += NB_FBLK) {
        const int64_t i1 = i0 + NB_FBLK < n ? i0 + NB_FBLK : n;
        float a = 0.0f, b = 0.0f;
        if (w) {
#ifdef MFT_HAVE_OPENMP
#pragma omp simd reduction(+ : a, b)
#endif
            for (int64_t i = i0; i < i1; i++) {
                const float d = dy[i] * w[i];
                a += d;
                b += d * (x[i] - mf);
            }
        } else {
#ifdef MFT_HAVE_OPENMP
#pragma omp simd reduction(+ : a, b)
#endif
            for (int64_t i = i0; i < i1; i++) {
                a += dy[i];
                b += dy[i] * (x[i] - mf);
            }
        }
        A += (double)a;
        B += (double)b;
    }
    *sdb = A;
    *sds = B + A * dm;
}
static void nb_sums(const float *restrict dy, const float *restrict x, int64_t n, double m,
                    double *sdb, double *sds) {
    nb_sums_w(dy, x, NULL, n, m, sdb, sds);
}

static int64_t nb_stat(const nb_job *j, int64_t n, int64_t c) {
    return j->bn ? c : n * j->G + c / j->cg;
}
static int64_t nb_coef(const nb_job *j, int64_t n, int64_t c) {
    return j->bn ? c : n * j->C + c;
}

/* NCHW: item = (n, c) plane */
static void nb_nchw_sums(void *v, int64_t b, int64_t e) {
    nb_job *j = v;
    for (int64_t it = b; it < e; it++) {
        const int64_t n = it / j->C, c = it % j->C;
        nb_sums(j->dy + it * j->S, j->x + it * j->S, j->S, j->mean[nb_stat(j, n, c)], &j->pdb[it],
                &j->pds[it]);
    }
}
static void nb_nchw_dx(void *v, int64_t b, int64_t e) {
    nb_job *j = v;
    for (int64_t it = b; it < e; it++) {
        const int64_t q = nb_coef(j, it / j->C, it % j->C);
        const float A = j->A[q], B = j->B[q], D = j->D[q], M = j->M[q];
        const float *restrict dy = j->dy + it * j->S, *restrict x = j->x + it * j->S;
        float *restrict dx = j->dx + it * j->S;
        for (int64_t i = 0; i < j->S; i++) dx[i] = A * dy[i] + B * (x[i] - M) + D;
    }
}

/* NHWC: item = (segment, block of NB_ROWS rows); part[item * C + c]. Per
 * chunk of NB_CCH channels, sub-blocks of NB_SUB rows are summed in float
 * (vectorised over channels), then added to the double partials. */
#define NB_CCH 256
#define NB_SUB 32
static void nb_nhwc_sums(void *v, int64_t b, int64_t e) {
    nb_job *j = v;
    const int64_t C = j->C;
    for (int64_t it = b; it < e; it++) {
        const int64_t sg = it / j->nblk, blk = it % j->nblk;
        double *restrict db = j->pdb + it * C, *restrict ds = j->pds + it * C;
        const double *restrict m = j->mexp + sg * C;
        const int64_t r0 = sg * j->segrows + blk * NB_ROWS;
        const int64_t r1 = (blk + 1) * NB_ROWS < j->segrows ? r0 + NB_ROWS : (sg + 1) * j->segrows;
        for (int64_t c0 = 0; c0 < C; c0 += NB_CCH) {
            const int64_t w = C - c0 < NB_CCH ? C - c0 : NB_CCH;
            float mf[NB_CCH], fa[NB_CCH], fb[NB_CCH];
            double dmv[NB_CCH];
            for (int64_t c = 0; c < w; c++) {
                mf[c] = (float)m[c0 + c];
                dmv[c] = (double)mf[c] - m[c0 + c];
                db[c0 + c] = ds[c0 + c] = 0.0;
            }
            for (int64_t s0 = r0; s0 < r1; s0 += NB_SUB) {
                const int64_t s1 = s0 + NB_SUB < r1 ? s0 + NB_SUB : r1;
                int64_t cz = 0;
#if NB_HAVE_Z16
                /* 64 channels at a time in registers over the sub-block's
                 * rows (the arrays below go through memory every row): the
                 * same products and sums per channel, in the same order */
                for (; cz + 64 <= w; cz += 64) {
                    __m512 za[4], zb[4], zm[4];
                    for (int k = 0; k < 4; k++) {
                        za[k] = zb[k] = _mm512_setzero_ps();
                        zm[k] = _mm512_loadu_ps(mf + cz + 16 * k);
                    }
                    for (int64_t r = s0; r < s1; r++) {
                        const float *dyr = j->dy + r * C + c0 + cz, *xr = j->x + r * C + c0 + cz;
                        for (int k = 0; k < 4; k++) {
                            const __m512 d = _mm512_loadu_ps(dyr + 16 * k);
                            za[k] = _mm512_add_ps(za[k], d);
                            zb[k] = _mm512_add_ps(
                                zb[k],
                                _mm512_mul_ps(d, _mm512_sub_ps(_mm512_loadu_ps(xr + 16 * k), zm[k])));
                        }
                    }
                    for (int k = 0; k < 4; k++) {
                        _mm512_storeu_ps(fa + cz + 16 * k, za[k]);
                        _mm512_storeu_ps(fb + cz + 16 * k, zb[k]);
                    }
                }
#endif
                for (int64_t c = cz; c < w; c++) fa[c] = fb[c] = 0.0f;
                for (int64_t r = s0; r < s1 && cz < w; r++) {
                    const float *restrict dyr = j->dy + r * C + c0, *restrict xr = j->x + r * C + c0;
                    for (int64_t c = cz; c < w; c++) {
                        fa[c] += dyr[c];
                        fb[c] += dyr[c] * (xr[c] - mf[c]);
                    }
                }
                for (int64_t c = 0; c < w; c++) {
                    db[c0 + c] += (double)fa[c];
                    ds[c0 + c] += (double)fb[c];
                }
            }
            for (int64_t c = 0; c < w; c++) ds[c0 + c] += db[c0 + c] * dmv[c];
        }
    }
}
static void nb_nhwc_dx(void *v, int64_t b, int64_t e) {
    nb_job *j = v;
    const int64_t C = j->C;
    for (int64_t r = b; r < e; r++) {
        const int64_t q = j->bn ? 0 : (r / j->S) * C;
        const float *restrict A = j->A + q, *restrict B = j->B + q, *restrict D = j->D + q,
                              *restrict M = j->M + q;
        const float *restrict dy = j->dy + r * C, *restrict x = j->x + r * C;
        float *restrict dx = j->dx + r * C;
        for (int64_t c = 0; c < C; c++) dx[c] = A[c] * dy[c] + B[c] * (x[c] - M[c]) + D[c];
    }
}

/* Scratch (doubles) the fast batch/group norm kernels need. */
static int64_t nb_scratch(int64_t N, int64_t C, int64_t S) {
    const int64_t P = (N + (N * S + NB_ROWS - 1) / NB_ROWS + 1) * C;
    return 2 * P + 5 * N * C + 8;
}

static void nb_fast_run(const mft_kernel_args *a, bool bn, bool cl) {
    const mft__normb_kparams *kp = a->params;
    const mft_tensor *x = a->inputs[1];
    nb_job j;
    j.N = x->sizes[0];
    j.C = x->sizes[1];
    j.S = mft__dims_prod(x, 2, x->ndim);
    j.G = bn ? 1 : kp->p.groups;
    j.cg = bn ? j.C : j.C / j.G;
    j.bn = bn;
    const int64_t N = j.N, C = j.C, S = j.S;
    for (int64_t c = 0; c < C; c++) kp->gw[c] = kp->gb[c] = 0.0;
    if (x->numel == 0) return;
    j.dy = (const float *)(const void *)mft__tensor_ptr(a->inputs[0]);
    j.x = (const float *)(const void *)mft__tensor_ptr(x);
    j.dx = (float *)(void *)mft__tensor_ptr(a->outputs[0]);
    j.mean = kp->mean;
    j.nseg = bn ? 1 : N;
    j.segrows = bn ? N * S : S;
    j.nblk = (j.segrows + NB_ROWS - 1) / NB_ROWS;
    const int64_t nitems = cl ? j.nseg * j.nblk : N * C;
    double *sc = kp->scratch;
    const int64_t psize = cl ? nitems * C : N * C; /* partial sums of each kind */
    j.pdb = sc;
    j.pds = sc + psize;
    double *mexp = sc + 2 * psize;                      /* nseg * C */
    double *db = mexp + N * C, *ds = db + N * C;        /* per (n, c) totals */
    float *cf = (float *)(void *)(ds + N * C);          /* 4 * ncoef * C floats */
    const int64_t ncoef = bn ? 1 : N;
    float *A = cf, *B = A + ncoef * C, *Dd = B + ncoef * C, *M = Dd + ncoef * C;
    j.A = A;
    j.B = B;
    j.D = Dd;
    j.M = M;
    j.mexp = mexp;
    /* 1. partial sums, combined per (n, c) (batch_norm: per c, in db[c]) */
    if (cl) {
        for (int64_t s = 0; s < j.nseg; s++)
            for (int64_t c = 0; c < C; c++) mexp[s * C + c] = kp->mean[nb_stat(&j, s, c)];
        mft__parallel_for(0, nitems, nb_grain(NB_ROWS * C), nb_nhwc_sums, &j);
        for (int64_t s = 0; s < j.nseg; s++)
            for (int64_t c = 0; c < C; c++) {
                double x0 = 0.0, x1 = 0.0;
                for (int64_t b = 0; b < j.nblk; b++) {
                    x0 += j.pdb[(s * j.nblk + b) * C + c];
                    x1 += j.pds[(s * j.nblk + b) * C + c];
                }
                db[s * C + c] = x0;
                ds[s * C + c] = x1;
            }
    } else {
        mft__parallel_for(0, N * C, nb_grain(S), nb_nchw_sums, &j);
        if (bn) {
            for (int64_t c = 0; c < C; c++) {
                double x0 = 0.0, x1 = 0.0;
                for (int64_t n = 0; n < N; n++) {
                    x0 += j.pdb[n * C + c];
                    x1 += j.pds[n * C + c];
                }
                db[c] = x0;
                ds[c] = x1;
            }
        } else {
            memcpy(db, j.pdb, sizeof(double) * (size_t)(N * C));
            memcpy(ds, j.pds, sizeof(double) * (size_t)(N * C));
        }
    }
    /* 2. grad_weight / grad_bias and the grad_x coefficients */
    if (bn) {
        const double Mn = (double)(N * S);
        for (int64_t c = 0; c < C; c++) {
            const double rs = kp->rstd[c], w = nb_ld(kp->weight, c);
            kp->gb[c] = db[c];
            kp->gw[c] = ds[c] * rs;
            A[c] = (float)(rs * w);
            M[c] = (float)kp->mean[c];
            if (kp->p.training) {
                B[c] = (float)(-rs * rs * (w * ds[c] * rs) / Mn);
                Dd[c] = (float)(-rs * (w * db[c]) / Mn);
            } else {
                B[c] = Dd[c] = 0.0f;
            }
        }
    } else {
        const int64_t G = j.G, cg = j.cg;
        const double Mn = (double)(cg * S);
        for (int64_t c = 0; c < C; c++) {
            double x0 = 0.0, x1 = 0.0;
            for (int64_t n = 0; n < N; n++) {
                x0 += db[n * C + c];
                x1 += ds[n * C + c] * kp->rstd[n * G + c / cg];
            }
            kp->gb[c] = x0;
            kp->gw[c] = x1;
        }
        for (int64_t n = 0; n < N; n++)
            for (int64_t g = 0; g < G; g++) {
                const int64_t k = n * G + g;
                const double rs = kp->rstd[k];
                double s1 = 0.0, s2 = 0.0;
                for (int64_t c = g * cg; c < (g + 1) * cg; c++) {
                    const double w = nb_ld(kp->weight, c);
                    s1 += w * db[n * C + c];
                    s2 += w * ds[n * C + c];
                }
                s2 *= rs;
                const float Bk = (float)(-rs * rs * s2 / Mn), Dk = (float)(-rs * s1 / Mn);
                for (int64_t c = g * cg; c < (g + 1) * cg; c++) {
                    A[n * C + c] = (float)(rs * nb_ld(kp->weight, c));
                    B[n * C + c] = Bk;
                    Dd[n * C + c] = Dk;
                    M[n * C + c] = (float)kp->mean[k];
                }
            }
    }
    /* 3. grad_x */
    if (cl)
        mft__parallel_for(0, N * S, nb_grain(C), nb_nhwc_dx, &j);
    else
        mft__parallel_for(0, N * C, nb_grain(S), nb_nchw_dx, &j);
}

static void batch_norm_bwd_nchw_f32(const mft_kernel_args *a) { nb_fast_run(a, true, false); }
static void batch_norm_bwd_nhwc_f32(const mft_kernel_args *a) {
    nb_fast_run(a, true, a->inputs[1]->ndim >= 3);
}
static void group_norm_bwd_nchw_f32(const mft_kernel_args *a) { nb_fast_run(a, false, false); }
static void group_norm_bwd_nhwc_f32(const mft_kernel_args *a) {
    nb_fast_run(a, false, a->inputs[1]->ndim >= 3);
}

/* ---------------------------------------------------------------- fast layer_norm F32
 * Rows of len contiguous elements, weight wf[len] in the rows' physical
 * order (NULL: 1). Item = one row; then column blocks for gw / gb (in the
 * physical order, gwp / gbp). */
typedef struct lnb_job {
    const float *dy, *x, *wf;
    float *dx;
    int64_t rows, len;
    const double *mean, *rstd;
    double *gwp, *gbp;
} lnb_job;

static void lnb_rows(void *v, int64_t b, int64_t e) {
    const lnb_job *j = v;
    const int64_t L = j->len;
    for (int64_t k = b; k < e; k++) {
        const float *restrict dy = j->dy + k * L, *restrict x = j->x + k * L;
        float *restrict dx = j->dx + k * L;
        const double m = j->mean[k], rs = j->rstd[k];
        const float *restrict w = j->wf;
        double s1, s2;
        nb_sums_w(dy, x, w, L, m, &s1, &s2);
        s2 *= rs;
        const float A = (float)rs, Bk = (float)(-rs * rs * s2 / (double)L),
                    Dk = (float)(-rs * s1 / (double)L), M = (float)m;
        if (w)
            for (int64_t i = 0; i < L; i++) dx[i] = A * w[i] * dy[i] + Bk * (x[i] - M) + Dk;
        else
            for (int64_t i = 0; i < L; i++) dx[i] = A * dy[i] + Bk * (x[i] - M) + Dk;
    }
}

static void lnb_cols(void *v, int64_t b, int64_t e) {
    const lnb_job *j = v;
    const int64_t L = j->len;
    for (int64_t it = b; it < e; it++) {
        const int64_t c0 = it * NB_COLS, w = L - c0 < NB_COLS ? L - c0 : NB_COLS;
        double *restrict gw = j->gwp + c0, *restrict gb = j->gbp + c0;
        for (int64_t i = 0; i < w; i++) gw[i] = gb[i] = 0.0;
        for (int64_t k = 0; k < j->rows; k++) {
            const float *restrict dy = j->dy + k * L + c0, *restrict x = j->x + k * L + c0;
            const float m = (float)j->mean[k], rs = (float)j->rstd[k];
            for (int64_t i = 0; i < w; i++) {
                gb[i] += (double)dy[i];
                gw[i] += (double)(dy[i] * ((x[i] - m) * rs));
            }
        }
    }
}

/* The normalised block in physical order holds, at position P, logical
 * element Q of MFT__LN_PERM_FOR(Nb, C, Sp) (Nb = C = 1, Sp = len: the
 * identity, grad_w / grad_b summed in place). Scratch: len floats (weight)
 * + 2 * len doubles. */
static void lnb_run(const mft_kernel_args *a, int64_t Nb, int64_t C, int64_t Sp) {
    const mft__normb_kparams *kp = a->params;
    const mft_tensor *x = a->inputs[1];
    const int64_t L = mft__dims_prod(x, x->ndim - kp->p.nnorm, x->ndim);
    if (x->numel == 0) {
        for (int64_t i = 0; i < L; i++) kp->gw[i] = kp->gb[i] = 0.0;
        return;
    }
    const bool perm = C > 1;
    lnb_job j;
    j.dy = (const float *)(const void *)mft__tensor_ptr(a->inputs[0]);
    j.x = (const float *)(const void *)mft__tensor_ptr(x);
    j.dx = (float *)(void *)mft__tensor_ptr(a->outputs[0]);
    j.len = L;
    j.rows = x->numel / L;
    j.mean = kp->mean;
    j.rstd = kp->rstd;
    j.gwp = perm ? kp->scratch : kp->gw;
    j.gbp = perm ? kp->scratch + L : kp->gb;
    float *wf = (float *)(void *)(kp->scratch + 2 * L);
    j.wf = NULL;
    if (kp->weight) {
        const mft_tensor *w = kp->weight;
        if (mft_tensor_is_contiguous(w, MFT_CONTIGUOUS)) {
            const float *wp = (const float *)(const void *)mft__tensor_ptr(w);
            MFT__LN_PERM_FOR(Nb, C, Sp, P, Q, wf[P] = wp[Q];)
        } else {
            MFT__LN_PERM_FOR(Nb, C, Sp, P, Q, wf[P] = (float)nb_ld(w, Q);)
        }
        j.wf = wf;
    }
    mft__parallel_for(0, j.rows, nb_grain(L), lnb_rows, &j);
    if (kp->need_wb) {
        const int64_t nb = (L + NB_COLS - 1) / NB_COLS;
        mft__parallel_for(0, nb, nb_grain(j.rows * NB_COLS), lnb_cols, &j);
        if (perm)
            MFT__LN_PERM_TILED(Nb, C, Sp, P, Q, {
                kp->gw[Q] = j.gwp[P];
                kp->gb[Q] = j.gbp[P];
            })
    }
}

static void layer_norm_bwd_nchw_f32(const mft_kernel_args *a) {
    const mft_tensor *x = a->inputs[1];
    lnb_run(a, 1, 1,
            mft__dims_prod(x, x->ndim - ((const mft__normb_kparams *)a->params)->p.nnorm, x->ndim));
}

/* NHWC layer_norm with nnorm <= nd - 2: x [N, Lsp, P, C] physically, each
 * set (n, c, lead) a column of a [P, C] block, affine index p. Columns:
 * item = (block, chunk of NB_LCOL channels), sums in double over the P rows,
 * then grad_x. grad_weight / grad_bias: item = row p, summed over the blocks
 * and channels in order. */
#define NB_LCOL 64
typedef struct lnbc_job {
    const float *dy, *x, *wf; /* wf: packed weight [P] or NULL */
    float *dx;
    int64_t C, P, Lsp, nblk;
    const double *mean, *rstd;
    double *gw, *gb;
} lnbc_job;

static void lnbc_cols(void *v, int64_t b, int64_t e) {
    const lnbc_job *j = v;
    const int64_t C = j->C, P = j->P, nch = (C + NB_LCOL - 1) / NB_LCOL;
    for (int64_t it = b; it < e; it++) {
        const int64_t blk = it / nch, c0 = (it % nch) * NB_LCOL;
        const int64_t w = C - c0 < NB_LCOL ? C - c0 : NB_LCOL;
        const int64_t n = blk / j->Lsp, ls = blk % j->Lsp;
        const float *dy = j->dy + blk * P * C + c0, *x = j->x + blk * P * C + c0;
        float *dx = j->dx + blk * P * C + c0;
        double m[NB_LCOL], s1[NB_LCOL], s2[NB_LCOL];
        float A[NB_LCOL], B[NB_LCOL], D[NB_LCOL], M[NB_LCOL];
        for (int64_t i = 0; i < w; i++) {
            m[i] = j->mean[(n * C + c0 + i) * j->Lsp + ls];
            s1[i] = s2[i] = 0.0;
        }
        for (int64_t p = 0; p < P; p++) {
            const double wv = j->wf ? (double)j->wf[p] : 1.0;
            for (int64_t i = 0; i < w; i++) {
                const double d = (double)dy[p * C + i] * wv;
                s1[i] += d;
                s2[i] += d * ((double)x[p * C + i] - m[i]);
            }
        }
        for (int64_t i = 0; i < w; i++) {
            const double rs = j->rstd[(n * C + c0 + i) * j->Lsp + ls];
            A[i] = (float)rs;
            B[i] = (float)(-rs * rs * rs * s2[i] / (double)P);
            D[i] = (float)(-rs * s1[i] / (double)P);
            M[i] = (float)m[i];
        }
        for (int64_t p = 0; p < P; p++) {
            const float wv = j->wf ? j->wf[p] : 1.0f;
            const float *restrict dyr = dy + p * C, *restrict xr = x + p * C;
            float *restrict dxr = dx + p * C;
            for (int64_t i = 0; i < w; i++)
                dxr[i] = A[i] * wv * dyr[i] + B[i] * (xr[i] - M[i]) + D[i];
        }
    }
}

static void lnbc_rows(void *v, int64_t b, int64_t e) {
    const lnbc_job *j = v;
    const int64_t C = j->C, P = j->P;
    for (int64_t p = b; p < e; p++) {
        double gw = 0.0, gb = 0.0;
        for (int64_t blk = 0; blk < j->nblk; blk++) {
            const int64_t n = blk / j->Lsp, ls = blk % j->Lsp;
            const float *dy = j->dy + (blk * P + p) * C, *x = j->x + (blk * P + p) * C;
            for (int64_t c = 0; c < C; c++) {
                const int64_t k = (n * C + c) * j->Lsp + ls;
                gb += (double)dy[c];
                gw += (double)dy[c] * (((double)x[c] - j->mean[k]) * j->rstd[k]);
            }
        }
        j->gw[p] = gw;
        j->gb[p] = gb;
    }
}

static void lnb_nhwc_cols_run(const mft_kernel_args *a) {
    const mft__normb_kparams *kp = a->params;
    const mft_tensor *x = a->inputs[1];
    const int nd = x->ndim;
    lnbc_job j;
    j.C = x->sizes[1];
    j.P = mft__dims_prod(x, nd - kp->p.nnorm, nd);
    j.Lsp = mft__dims_prod(x, 2, nd - kp->p.nnorm);
    j.nblk = x->sizes[0] * j.Lsp;
    j.dy = (const float *)(const void *)mft__tensor_ptr(a->inputs[0]);
    j.x = (const float *)(const void *)mft__tensor_ptr(x);
    j.dx = (float *)(void *)mft__tensor_ptr(a->outputs[0]);
    j.mean = kp->mean;
    j.rstd = kp->rstd;
    j.gw = kp->gw;
    j.gb = kp->gb;
    float *wf = (float *)(void *)kp->scratch;
    j.wf = NULL;
    if (kp->weight) {
        for (int64_t p = 0; p < j.P; p++) wf[p] = (float)nb_ld(kp->weight, p);
        j.wf = wf;
    }
    const int64_t nch = (j.C + NB_LCOL - 1) / NB_LCOL;
    mft__parallel_for(0, j.nblk * nch, nb_grain(j.P * (j.C < NB_LCOL ? j.C : NB_LCOL)), lnbc_cols,
                      &j);
    if (kp->need_wb) mft__parallel_for(0, j.P, nb_grain(j.nblk * j.C), lnbc_rows, &j);
}

/* NHWC: the normalised block (dims lead..nd-1) is contiguous iff it holds C
 * (nnorm >= nd - 1); physical order of the block: (spatial..., C), walked
 * by MFT__LN_PERM_FOR. */
static void layer_norm_bwd_nhwc_f32(const mft_kernel_args *a) {
    const mft__normb_kparams *kp = a->params;
    const mft_tensor *x = a->inputs[1];
    const int nd = x->ndim;
    if (nd < 3 || nd > 5) {
        layer_norm_bwd_nchw_f32(a);
        return;
    }
    if (kp->p.nnorm < nd - 1) {
        const int64_t L = mft__dims_prod(x, nd - kp->p.nnorm, nd);
        if (x->numel == 0) {
            for (int64_t i = 0; i < L; i++) kp->gw[i] = kp->gb[i] = 0.0;
            return;
        }
        lnb_nhwc_cols_run(a);
        return;
    }
    /* block dims (logical): [C, spatial...] when nnorm == nd - 1, else
     * [N, C, spatial...]; physical: [N?, spatial..., C] */
    lnb_run(a, kp->p.nnorm == nd ? x->sizes[0] : 1, x->sizes[1], mft__dims_prod(x, 2, nd));
}

/* ---------------------------------------------------------------- table */
const mft__kernel_def mft__kernels_norm_backward[] = {
    {MFT__OP_BATCH_NORM_BACKWARD, MFT_CONTIGUOUS, MFT_F32, "batch_norm_backward.nchw.f32",
     batch_norm_bwd_nchw_f32},
    {MFT__OP_BATCH_NORM_BACKWARD, MFT_CHANNELS_LAST, MFT_F32, "batch_norm_backward.nhwc.f32",
     batch_norm_bwd_nhwc_f32},
    {MFT__OP_BATCH_NORM_BACKWARD, MFT_CONTIGUOUS, MFT_F64, "batch_norm_backward.nchw.f64.ref",
     batch_norm_bwd_ref_F64},
    {MFT__OP_BATCH_NORM_BACKWARD, MFT_CHANNELS_LAST, MFT_F64, "batch_norm_backward.nhwc.f64.ref",
     batch_norm_bwd_ref_F64},
    {MFT__OP_GROUP_NORM_BACKWARD, MFT_CONTIGUOUS, MFT_F32, "group_norm_backward.nchw.f32",
     group_norm_bwd_nchw_f32},
    {MFT__OP_GROUP_NORM_BACKWARD, MFT_CHANNELS_LAST, MFT_F32, "group_norm_backward.nhwc.f32",
     group_norm_bwd_nhwc_f32},
    {MFT__OP_GROUP_NORM_BACKWARD, MFT_CONTIGUOUS, MFT_F64, "group_norm_backward.nchw.f64.ref",
     group_norm_bwd_ref_F64},
    {MFT__OP_GROUP_NORM_BACKWARD, MFT_CHANNELS_LAST, MFT_F64, "group_norm_backward.nhwc.f64.ref",
     group_norm_bwd_ref_F64},
    {MFT__OP_LAYER_NORM_BACKWARD, MFT_CONTIGUOUS, MFT_F32, "layer_norm_backward.nchw.f32",
     layer_norm_bwd_nchw_f32},
    {MFT__OP_LAYER_NORM_BACKWARD, MFT_CHANNELS_LAST, MFT_F32, "layer_norm_backward.nhwc.f32",
     layer_norm_bwd_nhwc_f32},
    {MFT__OP_LAYER_NORM_BACKWARD, MFT_CONTIGUOUS, MFT_F64, "layer_norm_backward.nchw.f64.ref",
     layer_norm_bwd_ref_F64},
    {MFT__OP_LAYER_NORM_BACKWARD, MFT_CHANNELS_LAST, MFT_F64, "layer_norm_backward.nhwc.f64.ref",
     layer_norm_bwd_ref_F64},
    {0, 0, 0, NULL, NULL},
};

/* The reference kernels for tests (op: 0 batch_norm, 1 group_norm, 2
 * layer_norm); NULL for other dtypes. (Declared here: ops_internal.h is not
 * this file's to change.) */
mft_kernel_fn mft__norm_backward_reference(int op, mft_dtype dt);
mft_kernel_fn mft__norm_backward_reference(int op, mft_dtype dt) {
    static const mft_kernel_fn f32[3] = {batch_norm_bwd_ref_F32, group_norm_bwd_ref_F32,
                                         layer_norm_bwd_ref_F32};
    static const mft_kernel_fn f64[3] = {batch_norm_bwd_ref_F64, group_norm_bwd_ref_F64,
                                         layer_norm_bwd_ref_F64};
    if (op < 0 || op > 2) return NULL;
    return dt == MFT_F32 ? f32[op] : dt == MFT_F64 ? f64[op] : NULL;
}

/* ---------------------------------------------------------------- entry points */
static void nb_clear(mft_tensor **gx, mft_tensor **gw, mft_tensor **gb) {
    if (gx) *gx = NULL;
    if (gw) *gw = NULL;
    if (gb) *gb = NULL;
}

static bool nb_check_x(const char *fn, const mft_tensor *go, const mft_tensor *x, int min_rank) {
    if (!go) {
        mft__null_arg(fn, "grad_out");
        return false;
    }
    if (!x) {
        mft__null_arg(fn, "x");
        return false;
    }
    if (x->ndim < min_rank) {
        mft__set_error(MFT_ERR_RANK, "%s: needs x of rank >= %d, got rank %d", fn, min_rank,
                       x->ndim);
        return false;
    }
    if (x->dtype != MFT_F32 && x->dtype != MFT_F64) {
        mft__set_error(MFT_ERR_DTYPE, "%s: dtype %s is not supported (f32 or f64 only)", fn,
                       mft_dtype_name(x->dtype));
        return false;
    }
    bool same = go->ndim == x->ndim;
    for (int d = 0; same && d < x->ndim; d++) same = go->sizes[d] == x->sizes[d];
    if (!same) {
        char b1[MFT__DIMS_BUF], b2[MFT__DIMS_BUF];
        mft__set_error(MFT_ERR_SHAPE, "%s: grad_out has shape %s, x has %s", fn,
                       mft__fmt_dims(b1, sizeof b1, go->ndim, go->sizes),
                       mft__fmt_dims(b2, sizeof b2, x->ndim, x->sizes));
        return false;
    }
    if (go->dtype != x->dtype) {
        mft__set_error(MFT_ERR_DTYPE, "%s: grad_out has dtype %s, x has %s", fn,
                       mft_dtype_name(go->dtype), mft_dtype_name(x->dtype));
        return false;
    }
    return true;
}

/* t NULL (allowed unless required), or of shape want[0..n) and x's dtype. */
static bool nb_check_param(const char *fn, const char *what, const mft_tensor *t,
                           const mft_tensor *x, int n, const int64_t *want, bool required) {
    if (!t) {
        if (required) mft__null_arg(fn, what);
        return !required;
    }
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

static mft_tensor *nb_vec(const char *fn, const double *v, int nd, const int64_t *sizes,
                          mft_dtype dt) {
    mft_tensor *t = mft__tensor_alloc(fn, nd, sizes, dt, MFT_CONTIGUOUS);
    if (!t) return NULL;
    if (dt == MFT_F32) {
        float *p = (float *)(void *)mft__tensor_ptr(t);
        for (int64_t i = 0; i < t->numel; i++) p[i] = (float)v[i];
    } else {
        double *p = (double *)(void *)mft__tensor_ptr(t);
        for (int64_t i = 0; i < t->numel; i++) p[i] = v[i];
    }
    return t;
}

/* Shared tail: loads the statistics (stat tensors: 1-D of nstat), allocates,
 * dispatches, builds the results. aff_nd / aff_sizes: grad_weight shape. */
static mft_status nb_run(const char *fn, mft__op_id op, const mft_tensor *go, const mft_tensor *x,
                         mft__normb_kparams *kp, int64_t nstat, const mft_tensor *smean,
                         const mft_tensor *srstd, int aff_nd, const int64_t *aff_sizes,
                         int64_t nscratch, mft_tensor **gx, mft_tensor **gw, mft_tensor **gb) {
    int64_t naff = 1;
    for (int d = 0; d < aff_nd; d++) naff *= aff_sizes[d];
    const size_t nd = (size_t)(2 * nstat + 2 * naff + nscratch + 1);
    double *buf = mft__alloc_or_err(fn, nd * sizeof(double), 64);
    if (!buf) return mft_last_error();
    double *mean = buf, *rstd = buf + nstat;
    kp->gw = buf + 2 * nstat;
    kp->gb = kp->gw + naff;
    kp->scratch = kp->gb + naff;
    kp->nscratch = nscratch;
    kp->need_wb = gw || gb;
    for (int64_t k = 0; k < nstat; k++) {
        mean[k] = mft__load(smean->dtype, mft__tensor_ptr(smean) +
                                              (size_t)(k * smean->strides[0]) *
                                                  mft__elem_size(smean->dtype));
        rstd[k] = mft__load(srstd->dtype, mft__tensor_ptr(srstd) +
                                              (size_t)(k * srstd->strides[0]) *
                                                  mft__elem_size(srstd->dtype));
    }
    kp->mean = mean;
    kp->rstd = rstd;
    const mft__decision dec = mft__rule_decide(MFT__RULE_BACKWARD, fn + 4, 1, &x, MFT_CONTIGUOUS, 0);
    const mft_format fmt = dec.tag;
    mft__scope_suspend();
    mft_tensor *r[3] = {NULL, NULL, NULL};
    r[0] = mft__tensor_alloc(fn, x->ndim, x->sizes, x->dtype, fmt);
    bool ok = r[0] != NULL;
    if (ok) {
        const mft_tensor *ins[2] = {go, x};
        const bool convert[2] = {true, true};
        mft_tensor *outs[1] = {r[0]};
        ok = mft__dispatch(fn, g_tables, op, fmt, x->dtype, 2, ins, convert, 1, outs, kp) == MFT_OK;
    }
    if (ok) mft__rule_apply(r[0], &dec);
    if (ok && gw) ok = (r[1] = nb_vec(fn, kp->gw, aff_nd, aff_sizes, x->dtype)) != NULL;
    if (ok && gb) ok = (r[2] = nb_vec(fn, kp->gb, aff_nd, aff_sizes, x->dtype)) != NULL;
    mft__scope_resume();
    mft__free(buf);
    mft_tensor **dst[3] = {gx, gw, gb};
    for (int k = 0; k < 3 && ok; k++) {
        if (!dst[k]) continue;
        *dst[k] = mft__retain_result(fn, r[k]);
        ok = *dst[k] != NULL;
    }
    for (int k = 0; k < 3; k++) mft_tensor_release(r[k]);
    if (!ok) {
        /* a failed registration happens only in an open scope, which owns
         * (and releases) the results registered before it */
        mft_status st = mft__relabel_error(fn);
        for (int k = 0; k < 3; k++)
            if (dst[k]) *dst[k] = NULL;
        return st;
    }
    return MFT_OK;
}

static bool nb_check_eps(const char *fn, double eps) {
    if (!(eps >= 0.0)) {
        mft__set_error(MFT_ERR_INVALID, "%s: eps must be >= 0, got %g", fn, eps);
        return false;
    }
    return true;
}

mft_status mft_batch_norm_backward(const mft_tensor *grad_out, const mft_tensor *x,
                                   const mft_tensor *weight, const mft_tensor *save_mean,
                                   const mft_tensor *save_invstd, bool training,
                                   mft_tensor **grad_x, mft_tensor **grad_weight,
                                   mft_tensor **grad_bias) {
    const char *fn = "mft_batch_norm_backward";
    nb_clear(grad_x, grad_weight, grad_bias);
    if (!nb_check_x(fn, grad_out, x, 2)) return mft_last_error();
    const int64_t C = x->sizes[1];
    if (!nb_check_param(fn, "weight", weight, x, 1, &C, false) ||
        !nb_check_param(fn, "save_mean", save_mean, x, 1, &C, true) ||
        !nb_check_param(fn, "save_invstd", save_invstd, x, 1, &C, true))
        return mft_last_error();
    const int64_t N = x->sizes[0], S = x->numel && C ? x->numel / (N * C) : 0;
    mft__normb_kparams kp;
    memset(&kp, 0, sizeof kp);
    kp.p.training = training;
    kp.weight = weight;
    return nb_run(fn, MFT__OP_BATCH_NORM_BACKWARD, grad_out, x, &kp, C, save_mean, save_invstd, 1,
                  &C, nb_scratch(N, C, S), grad_x, grad_weight, grad_bias);
}

static mft_status group_norm_bwd_impl(const char *fn, const mft_tensor *go, const mft_tensor *x,
                                      int64_t groups, const mft_tensor *mean,
                                      const mft_tensor *rstd, const mft_tensor *weight,
                                      double eps, bool instance, mft_tensor **gx,
                                      mft_tensor **gw, mft_tensor **gb) {
    nb_clear(gx, gw, gb);
    if (!nb_check_x(fn, go, x, 2)) return mft_last_error();
    const int64_t N = x->sizes[0], C = x->sizes[1];
    const int64_t S = mft__dims_prod(x, 2, x->ndim);
    if (instance) groups = C;
    if (!instance && (groups < 1 || C % groups != 0)) {
        mft__set_error(MFT_ERR_SHAPE, "%s: groups = %lld must be >= 1 and divide C = %lld", fn,
                       (long long)groups, (long long)C);
        return mft_last_error();
    }
    if (groups < 1) groups = 1; /* instance norm, C == 0 */
    const int64_t nstat = N * groups;
    if (!nb_check_param(fn, "weight", weight, x, 1, &C, false) ||
        !nb_check_param(fn, "mean", mean, x, 1, &nstat, false) ||
        !nb_check_param(fn, "rstd", rstd, x, 1, &nstat, false) || !nb_check_eps(fn, eps))
        return mft_last_error();
    if ((mean == NULL) != (rstd == NULL)) {
        mft__set_error(MFT_ERR_NULL, "%s: mean and rstd must be both given or both NULL (got %s "
                       "NULL)", fn, mean ? "rstd" : "mean");
        return mft_last_error();
    }
    mft_tensor *m2 = NULL, *r2 = NULL;
    if (!mean) { /* recompute the statistics */
        mft__scope_suspend();
        mft_tensor *y = mft_group_norm_ex(x, groups, NULL, NULL, eps, &m2, &r2);
        mft__scope_resume();
        if (!y) {
            mft__relabel_error(fn);
            return mft_last_error();
        }
        mft_tensor_release(y);
        mean = m2;
        rstd = r2;
    }
    mft__normb_kparams kp;
    memset(&kp, 0, sizeof kp);
    kp.p.training = true;
    kp.p.eps = eps;
    kp.p.groups = groups;
    kp.weight = weight;
    mft_status st = nb_run(fn, MFT__OP_GROUP_NORM_BACKWARD, go, x, &kp, nstat, mean, rstd, 1, &C,
                           nb_scratch(N, C, S), gx, gw, gb);
    mft_tensor_release(m2);
    mft_tensor_release(r2);
    return st;
}

mft_status mft_group_norm_backward(const mft_tensor *grad_out, const mft_tensor *x,
                                   int64_t groups, const mft_tensor *mean, const mft_tensor *rstd,
                                   const mft_tensor *weight, double eps, mft_tensor **grad_x,
                                   mft_tensor **grad_weight, mft_tensor **grad_bias) {
    return group_norm_bwd_impl("mft_group_norm_backward", grad_out, x, groups, mean, rstd, weight,
                               eps, false, grad_x, grad_weight, grad_bias);
}

mft_status mft_instance_norm_backward(const mft_tensor *grad_out, const mft_tensor *x,
                                      const mft_tensor *mean, const mft_tensor *rstd,
                                      const mft_tensor *weight, double eps, mft_tensor **grad_x,
                                      mft_tensor **grad_weight, mft_tensor **grad_bias) {
    return group_norm_bwd_impl("mft_instance_norm_backward", grad_out, x, 0, mean, rstd, weight,
                               eps, true, grad_x, grad_weight, grad_bias);
}

mft_status mft_layer_norm_backward(const mft_tensor *grad_out, const mft_tensor *x, int nnorm,
                                   const int64_t *normalized_shape, const mft_tensor *mean,
                                   const mft_tensor *rstd, const mft_tensor *weight, double eps,
                                   mft_tensor **grad_x, mft_tensor **grad_weight,
                                   mft_tensor **grad_bias) {
    const char *fn = "mft_layer_norm_backward";
    nb_clear(grad_x, grad_weight, grad_bias);
    if (!nb_check_x(fn, grad_out, x, 1)) return mft_last_error();
    if (nnorm < 1 || nnorm > x->ndim) {
        mft__set_error(MFT_ERR_INVALID, "%s: nnorm = %d must be in 1..%d (rank of x)", fn, nnorm,
                       x->ndim);
        return mft_last_error();
    }
    if (!normalized_shape) {
        mft__null_arg(fn, "normalized_shape");
        return MFT_ERR_NULL; /* the call's own status; the message keeps an earlier error */
    }
    const int lead = x->ndim - nnorm;
    for (int d = 0; d < nnorm; d++)
        if (x->sizes[lead + d] != normalized_shape[d]) {
            char b1[MFT__DIMS_BUF], b2[MFT__DIMS_BUF];
            mft__set_error(MFT_ERR_SHAPE,
                           "%s: normalized_shape %s does not match the last %d dims of x %s", fn,
                           mft__fmt_dims(b1, sizeof b1, nnorm, normalized_shape), nnorm,
                           mft__fmt_dims(b2, sizeof b2, x->ndim, x->sizes));
            return mft_last_error();
        }
    const int64_t L = mft__dims_prod(x, lead, x->ndim);
    const int64_t nstat = L ? x->numel / L : mft__dims_prod(x, 0, lead);
    if (!nb_check_param(fn, "weight", weight, x, nnorm, normalized_shape, false) ||
        !nb_check_param(fn, "mean", mean, x, 1, &nstat, false) ||
        !nb_check_param(fn, "rstd", rstd, x, 1, &nstat, false) || !nb_check_eps(fn, eps))
        return mft_last_error();
    if ((mean == NULL) != (rstd == NULL)) {
        mft__set_error(MFT_ERR_NULL, "%s: mean and rstd must be both given or both NULL (got %s "
                       "NULL)", fn, mean ? "rstd" : "mean");
        return mft_last_error();
    }
    mft_tensor *m2 = NULL, *r2 = NULL;
    if (!mean) {
        mft__scope_suspend();
        mft_tensor *y = mft_layer_norm_ex(x, nnorm, normalized_shape, NULL, NULL, eps, &m2, &r2);
        mft__scope_resume();
        if (!y) {
            mft__relabel_error(fn);
            return mft_last_error();
        }
        mft_tensor_release(y);
        mean = m2;
        rstd = r2;
    }
    mft__normb_kparams kp;
    memset(&kp, 0, sizeof kp);
    kp.p.training = true;
    kp.p.eps = eps;
    kp.p.nnorm = nnorm;
    kp.weight = weight;
    /* layer_norm kernels: 2 L doubles + L floats */
    mft_status st = nb_run(fn, MFT__OP_LAYER_NORM_BACKWARD, grad_out, x, &kp, nstat, mean, rstd,
                           nnorm, normalized_shape, 2 * L + L / 2 + 1, grad_x, grad_weight,
                           grad_bias);
    mft_tensor_release(m2);
    mft_tensor_release(r2);
    return st;
}
