/* ops/norm/channel_backward.c — the fast F32 backward of batch_norm and
 * group_norm (instance_norm included), whose affine parameters are per
 * channel: one algorithm for both (bn selects batch_norm), CONTIGUOUS ([N,
 * C, S]: per (n, c) plane sums, one work item per plane) and
 * CHANNELS_LAST ([rows, C]: per-channel partial sums over blocks of
 * NORM_ROWS rows, vectorisable over C; blocks never cross a sample for
 * group_norm). The partial sums (dy and dy * (x - mean), in double) are
 * combined in a fixed order, then grad_x = A dy + B (x - mean) + D with
 * per-(sample, channel) float coefficients, one pass writing each element
 * once. Results do not depend on the thread count. The kernels that call
 * it are in ops/norm/batch_norm.c and ops/norm/group_norm.c; the formulas
 * and the kernel interface in ops/norm/norm_internal.h. */
#include <string.h>
#include "norm_internal.h"

#if defined(__AVX512F__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define NB_HAVE_Z16 1
#else
#define NB_HAVE_Z16 0
#endif

/* ---------------------------------------------------------------- fast batch/group norm F32 */
typedef struct nb_job {
    const float *dy, *x;
    float *dx;
    int64_t N, C, S, G, cg;
    bool bn;
    /* NHWC: nseg segments (batch_norm: 1 of N*S rows; group_norm: N of S
     * rows), nblk blocks of NORM_ROWS rows each */
    int64_t nseg, segrows, nblk;
    const double *mexp; /* [nseg * C] (NHWC) mean per (segment, channel) */
    const double *mean; /* [nstat] */
    double *pdb, *pds;  /* partial sums */
    const float *A, *B, *D, *M; /* [ncoef * C] coefficients (BN: ncoef 1) */
} nb_job;

/* nb_sums_w without weight */
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

/* NHWC: item = (segment, block of NORM_ROWS rows); part[item * C + c]. Per
 * chunk of NORM_CCH channels, sub-blocks of NORM_SUB rows are summed in
 * float (vectorised over channels), then added to the double partials. */
static void nb_nhwc_sums(void *v, int64_t b, int64_t e) {
    nb_job *j = v;
    const int64_t C = j->C;
    for (int64_t it = b; it < e; it++) {
        const int64_t sg = it / j->nblk, blk = it % j->nblk;
        double *restrict db = j->pdb + it * C, *restrict ds = j->pds + it * C;
        const double *restrict m = j->mexp + sg * C;
        const int64_t r0 = sg * j->segrows + blk * NORM_ROWS;
        const int64_t r1 = (blk + 1) * NORM_ROWS < j->segrows ? r0 + NORM_ROWS : (sg + 1) * j->segrows;
        for (int64_t c0 = 0; c0 < C; c0 += NORM_CCH) {
            const int64_t w = C - c0 < NORM_CCH ? C - c0 : NORM_CCH;
            float mf[NORM_CCH], fa[NORM_CCH], fb[NORM_CCH];
            double dmv[NORM_CCH];
            for (int64_t c = 0; c < w; c++) {
                mf[c] = (float)m[c0 + c];
                dmv[c] = (double)mf[c] - m[c0 + c];
                db[c0 + c] = ds[c0 + c] = 0.0;
            }
            for (int64_t s0 = r0; s0 < r1; s0 += NORM_SUB) {
                const int64_t s1 = s0 + NORM_SUB < r1 ? s0 + NORM_SUB : r1;
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

int64_t mft__nb_scratch(int64_t N, int64_t C, int64_t S) {
    const int64_t P = (N + (N * S + NORM_ROWS - 1) / NORM_ROWS + 1) * C;
    return 2 * P + 5 * N * C + 8;
}

void mft__nb_fast_run(const mft_kernel_args *a, bool bn, bool cl) {
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
    j.nblk = (j.segrows + NORM_ROWS - 1) / NORM_ROWS;
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
        mft__parallel_for(0, nitems, norm_grain(NORM_ROWS * C), nb_nhwc_sums, &j);
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
        mft__parallel_for(0, N * C, norm_grain(S), nb_nchw_sums, &j);
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
            const double rs = kp->rstd[c], w = norm_ld_F32(kp->weight, c, 1.0);
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
                    const double w = norm_ld_F32(kp->weight, c, 1.0);
                    s1 += w * db[n * C + c];
                    s2 += w * ds[n * C + c];
                }
                s2 *= rs;
                const float Bk = (float)(-rs * rs * s2 / Mn), Dk = (float)(-rs * s1 / Mn);
                for (int64_t c = g * cg; c < (g + 1) * cg; c++) {
                    A[n * C + c] = (float)(rs * norm_ld_F32(kp->weight, c, 1.0));
                    B[n * C + c] = Bk;
                    Dd[n * C + c] = Dk;
                    M[n * C + c] = (float)kp->mean[k];
                }
            }
    }
    /* 3. grad_x */
    if (cl)
        mft__parallel_for(0, N * S, norm_grain(C), nb_nhwc_dx, &j);
    else
        mft__parallel_for(0, N * C, norm_grain(S), nb_nchw_dx, &j);
}
