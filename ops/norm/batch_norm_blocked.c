/* ops/norm/batch_norm_blocked.c — the native nChw16c F32 kernels of
 * batch_norm: forward (training: batch statistics; eval: running ones) and
 * backward (grad_x, and the per-channel sums behind grad_weight /
 * grad_bias). Registered under (BATCH_NORM[_BACKWARD], NCHW16C, F32) in the
 * tables of ops/norm/common.c; the entry points in ops/norm/batch_norm.c
 * send a packed nChw16c F32 x here instead of through the counted
 * fallback. The kernel interface is that of ops/norm/norm_internal.h.
 *
 * Note [Batch norm in nChw16c]
 * A packed nChw16c tensor of logical [N, C, spatial...] is, in memory, N *
 * C1 planes (C1 = ceil(C / 16)) of S pixels (S = the spatial numel) of 16
 * floats, one per channel of the block: a plane is one contiguous run of
 * S * 16 floats whose 16 lanes are 16 channels, so every per-channel
 * operation is one 16-lane vector operation (one zmm). Work items are
 * chunks of BN16_RUN pixels of one plane; each writes its 16 partial sums
 * (double) to its own slot, and the slots are combined per channel block
 * in a fixed order (sample, then chunk), so results do not depend on the
 * thread count. The training forward reads x from memory once for its
 * statistics: each item sums its pixels, then sums the squared deviations
 * from its own mean while the item is still in L1, and the items' (sum,
 * M2) are combined by Chan's formula (M2 = sum of M2_i + n_i (m_i -
 * mean)^2), where the plain kernels read x twice (mean, then deviations
 * from it). Inside an item, sub-blocks of NORM_SUB pixels are summed
 * in float (four independent accumulators), each sub-block's sum added to
 * two double vectors (the NHWC kernel's float-then-double scheme), so the
 * statistics agree with the plain kernels to float rounding, not bit for
 * bit. The per-channel coefficients (scale, shift, mean; the backward's A,
 * B, D, M) are computed per channel exactly as the plain kernels do (same
 * formulas, same double arithmetic), and the elementwise passes use the
 * plain kernels' float operations in the same order (no fused
 * multiply-add), so eval forward and backward equal the plain results bit
 * for bit. Pad lanes: the coefficients are read per block with a masked
 * load (zero for c >= C), so a pad lane computes (0 - 0) * 0 + 0 = 0 (the
 * bias never leaks into a pad) and the statistics of a pad lane, summed
 * from zeros, are never read. */
#include <string.h>
#include "norm_internal.h"

#if defined(__AVX512F__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define BN16_Z 1
#else
#define BN16_Z 0
#endif

#define BN16_RUN 256 /* pixels per work item (a chunk of one plane) */

/* The geometry of a packed nChw16c tensor of logical sizes [N, C, ...]. */
typedef struct bn16_geom {
    int64_t N, C, C1, S, nch; /* nch: chunks of BN16_RUN pixels per plane */
} bn16_geom;

static bn16_geom bn16_geom_of(const mft_tensor *x) {
    bn16_geom g;
    g.N = x->sizes[0];
    g.C = x->sizes[1];
    g.C1 = (g.C + 15) / 16;
    g.S = mft__dims_prod(x, 2, x->ndim);
    g.nch = (g.S + BN16_RUN - 1) / BN16_RUN;
    return g;
}

static int64_t bn16_items(const bn16_geom *g) { return g->N * g->C1 * g->nch; }

/* Item it: its channel block, first pixel (offset in floats of the packed
 * tensor) and pixel count. */
static int64_t bn16_item(const bn16_geom *g, int64_t it, int64_t *cb, int64_t *npix) {
    const int64_t plane = it / g->nch, ch = it % g->nch;
    const int64_t s0 = ch * BN16_RUN;
    *cb = plane % g->C1;
    *npix = g->S - s0 < BN16_RUN ? g->S - s0 : BN16_RUN;
    return (plane * g->S + s0) * 16;
}

/* Lanes of channel block cb that are channels (the rest are pad lanes). */
static int bn16_lanes(const bn16_geom *g, int64_t cb) {
    const int64_t r = g->C - cb * 16;
    return r >= 16 ? 16 : (int)r;
}

/* ---------------------------------------------------------------- vector helpers */
#if BN16_Z
/* The 16 per-channel values v[cb*16 .. cb*16 + 16) of an array of C, 0 in
 * the pad lanes (masked: nothing past C is read). */
static inline __m512 bn16_ld(const float *v, int64_t cb, int lanes) {
    const __mmask16 k = (__mmask16)(lanes >= 16 ? 0xFFFFu : (1u << lanes) - 1u);
    return _mm512_maskz_loadu_ps(k, v + cb * 16);
}

/* lo += a[0..8), hi += a[8..16) in double. */
static inline void bn16_acc(__m512 a, __m512d *lo, __m512d *hi) {
    *lo = _mm512_add_pd(*lo, _mm512_cvtps_pd(_mm512_castps512_ps256(a)));
    *hi = _mm512_add_pd(
        *hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1))));
}
#endif

/* ---------------------------------------------------------------- per-item sums
 * Over npix pixels of 16 floats from x: out[16] = sum of x (m NULL), else
 * sum of (x - m)^2 (m: the block's 16 float means). */
static void bn16_sum_run(const float *restrict x, int64_t npix, const float *m, double *out) {
#if BN16_Z
    const __m512 mv = m ? _mm512_loadu_ps(m) : _mm512_setzero_ps();
    __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
    for (int64_t s0 = 0; s0 < npix; s0 += NORM_SUB) {
        const int64_t s1 = s0 + NORM_SUB < npix ? s0 + NORM_SUB : npix;
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        int64_t s = s0;
        if (m) {
            for (; s + 4 <= s1; s += 4) {
                const float *p = x + s * 16;
                const __m512 d0 = _mm512_sub_ps(_mm512_loadu_ps(p), mv);
                const __m512 d1 = _mm512_sub_ps(_mm512_loadu_ps(p + 16), mv);
                const __m512 d2 = _mm512_sub_ps(_mm512_loadu_ps(p + 32), mv);
                const __m512 d3 = _mm512_sub_ps(_mm512_loadu_ps(p + 48), mv);
                a0 = _mm512_fmadd_ps(d0, d0, a0);
                a1 = _mm512_fmadd_ps(d1, d1, a1);
                a2 = _mm512_fmadd_ps(d2, d2, a2);
                a3 = _mm512_fmadd_ps(d3, d3, a3);
            }
            for (; s < s1; s++) {
                const __m512 d = _mm512_sub_ps(_mm512_loadu_ps(x + s * 16), mv);
                a0 = _mm512_fmadd_ps(d, d, a0);
            }
        } else {
            for (; s + 4 <= s1; s += 4) {
                const float *p = x + s * 16;
                a0 = _mm512_add_ps(a0, _mm512_loadu_ps(p));
                a1 = _mm512_add_ps(a1, _mm512_loadu_ps(p + 16));
                a2 = _mm512_add_ps(a2, _mm512_loadu_ps(p + 32));
                a3 = _mm512_add_ps(a3, _mm512_loadu_ps(p + 48));
            }
            for (; s < s1; s++) a0 = _mm512_add_ps(a0, _mm512_loadu_ps(x + s * 16));
        }
        bn16_acc(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)), &lo, &hi);
    }
    _mm512_storeu_pd(out, lo);
    _mm512_storeu_pd(out + 8, hi);
#else
    float mv[16];
    for (int l = 0; l < 16; l++) {
        mv[l] = m ? m[l] : 0.0f;
        out[l] = 0.0;
    }
    for (int64_t s0 = 0; s0 < npix; s0 += NORM_SUB) {
        const int64_t s1 = s0 + NORM_SUB < npix ? s0 + NORM_SUB : npix;
        float fa[16] = {0};
        for (int64_t s = s0; s < s1; s++) {
            const float *restrict p = x + s * 16;
            if (m)
                for (int l = 0; l < 16; l++) {
                    const float d = p[l] - mv[l];
                    fa[l] += d * d;
                }
            else
                for (int l = 0; l < 16; l++) fa[l] += p[l];
        }
        for (int l = 0; l < 16; l++) out[l] += (double)fa[l];
    }
#endif
}

/* Over npix pixels of dy and x: db[16] = sum of dy, ds[16] = sum of dy *
 * (x - m) (m: the block's 16 float means). */
static void bn16_bwd_run(const float *restrict dy, const float *restrict x, int64_t npix,
                         const float *m, double *db, double *ds) {
#if BN16_Z
    const __m512 mv = _mm512_loadu_ps(m);
    __m512d blo = _mm512_setzero_pd(), bhi = blo, slo = blo, shi = blo;
    for (int64_t s0 = 0; s0 < npix; s0 += NORM_SUB) {
        const int64_t s1 = s0 + NORM_SUB < npix ? s0 + NORM_SUB : npix;
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, b0 = a0, b1 = a0;
        int64_t s = s0;
        for (; s + 2 <= s1; s += 2) {
            const __m512 g0 = _mm512_loadu_ps(dy + s * 16), g1 = _mm512_loadu_ps(dy + s * 16 + 16);
            const __m512 d0 = _mm512_sub_ps(_mm512_loadu_ps(x + s * 16), mv);
            const __m512 d1 = _mm512_sub_ps(_mm512_loadu_ps(x + s * 16 + 16), mv);
            a0 = _mm512_add_ps(a0, g0);
            a1 = _mm512_add_ps(a1, g1);
            b0 = _mm512_fmadd_ps(g0, d0, b0);
            b1 = _mm512_fmadd_ps(g1, d1, b1);
        }
        for (; s < s1; s++) {
            const __m512 g = _mm512_loadu_ps(dy + s * 16);
            a0 = _mm512_add_ps(a0, g);
            b0 = _mm512_fmadd_ps(g, _mm512_sub_ps(_mm512_loadu_ps(x + s * 16), mv), b0);
        }
        bn16_acc(_mm512_add_ps(a0, a1), &blo, &bhi);
        bn16_acc(_mm512_add_ps(b0, b1), &slo, &shi);
    }
    _mm512_storeu_pd(db, blo);
    _mm512_storeu_pd(db + 8, bhi);
    _mm512_storeu_pd(ds, slo);
    _mm512_storeu_pd(ds + 8, shi);
#else
    for (int l = 0; l < 16; l++) db[l] = ds[l] = 0.0;
    for (int64_t s0 = 0; s0 < npix; s0 += NORM_SUB) {
        const int64_t s1 = s0 + NORM_SUB < npix ? s0 + NORM_SUB : npix;
        float fa[16] = {0}, fb[16] = {0};
        for (int64_t s = s0; s < s1; s++) {
            const float *restrict g = dy + s * 16, *restrict p = x + s * 16;
            for (int l = 0; l < 16; l++) {
                fa[l] += g[l];
                fb[l] += g[l] * (p[l] - m[l]);
            }
        }
        for (int l = 0; l < 16; l++) {
            db[l] += (double)fa[l];
            ds[l] += (double)fb[l];
        }
    }
#endif
}

/* The partial sums part[items * 16] of the items of every channel block,
 * added in a fixed order (sample, then chunk) into out[C] (pad lanes
 * dropped). */
static void bn16_combine(const bn16_geom *g, const double *part, double *out) {
    for (int64_t cb = 0; cb < g->C1; cb++) {
        double acc[16] = {0};
        for (int64_t n = 0; n < g->N; n++)
            for (int64_t ch = 0; ch < g->nch; ch++) {
                const double *p = part + ((n * g->C1 + cb) * g->nch + ch) * 16;
                for (int l = 0; l < 16; l++) acc[l] += p[l];
            }
        const int lanes = bn16_lanes(g, cb);
        for (int l = 0; l < lanes; l++) out[cb * 16 + l] = acc[l];
    }
}

/* ---------------------------------------------------------------- jobs */
typedef struct bn16_job {
    bn16_geom g;
    const float *x, *dy;
    float *y;               /* y (forward) or grad_x */
    double *p0, *p1;        /* partial sums [items * 16] */
    const float *m;         /* [C] float means */
    const float *a, *b, *d; /* [C] forward: scale, shift; backward: A, B, D */
} bn16_job;

/* The block's 16 float means, pad lanes 0. */
static void bn16_means(const bn16_job *j, int64_t cb, float *m16) {
    const int lanes = bn16_lanes(&j->g, cb);
    for (int l = 0; l < 16; l++) m16[l] = l < lanes ? j->m[cb * 16 + l] : 0.0f;
}

/* Per item (at most BN16_RUN pixels: 16 KB, in L1 after the first read):
 * p0 = its sum, p1 = its sum of squared deviations from its own mean
 * (second sweep over the item, from L1; the float mean's rounding taken out:
 * sum (x - mf)^2 = M2 + n (m - mf)^2). */
static void bn16_fwd_stats(void *v, int64_t b, int64_t e) {
    bn16_job *j = v;
    for (int64_t it = b; it < e; it++) {
        int64_t cb, npix;
        const int64_t off = bn16_item(&j->g, it, &cb, &npix);
        double *sum = j->p0 + it * 16, *m2 = j->p1 + it * 16, m[16];
        float mf[16];
        bn16_sum_run(j->x + off, npix, NULL, sum);
        for (int l = 0; l < 16; l++) {
            m[l] = sum[l] / (double)npix;
            mf[l] = (float)m[l];
        }
        bn16_sum_run(j->x + off, npix, mf, m2);
        for (int l = 0; l < 16; l++) {
            const double dm = m[l] - (double)mf[l];
            m2[l] -= (double)npix * dm * dm;
        }
    }
}

/* y = (x - m) * scale + shift: the plain kernels' float operations. */
static void bn16_fwd_norm(void *v, int64_t b, int64_t e) {
    bn16_job *j = v;
    for (int64_t it = b; it < e; it++) {
        int64_t cb, npix;
        const int64_t off = bn16_item(&j->g, it, &cb, &npix);
        const float *restrict x = j->x + off;
        float *restrict y = j->y + off;
        const int lanes = bn16_lanes(&j->g, cb);
#if BN16_Z
        const __m512 m = bn16_ld(j->m, cb, lanes), sc = bn16_ld(j->a, cb, lanes),
                     sh = bn16_ld(j->b, cb, lanes);
        int64_t s = 0;
        for (; s + 2 <= npix; s += 2) {
            const __m512 x0 = _mm512_loadu_ps(x + s * 16), x1 = _mm512_loadu_ps(x + s * 16 + 16);
            _mm512_storeu_ps(y + s * 16,
                             _mm512_add_ps(_mm512_mul_ps(_mm512_sub_ps(x0, m), sc), sh));
            _mm512_storeu_ps(y + s * 16 + 16,
                             _mm512_add_ps(_mm512_mul_ps(_mm512_sub_ps(x1, m), sc), sh));
        }
        for (; s < npix; s++)
            _mm512_storeu_ps(
                y + s * 16,
                _mm512_add_ps(_mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(x + s * 16), m), sc),
                              sh));
#else
        float m[16], sc[16], sh[16];
        for (int l = 0; l < 16; l++) {
            const bool in = l < lanes;
            m[l] = in ? j->m[cb * 16 + l] : 0.0f;
            sc[l] = in ? j->a[cb * 16 + l] : 0.0f;
            sh[l] = in ? j->b[cb * 16 + l] : 0.0f;
        }
        for (int64_t s = 0; s < npix; s++)
            for (int l = 0; l < 16; l++) y[s * 16 + l] = (x[s * 16 + l] - m[l]) * sc[l] + sh[l];
#endif
    }
}

static void bn16_bwd_sums(void *v, int64_t b, int64_t e) {
    bn16_job *j = v;
    for (int64_t it = b; it < e; it++) {
        int64_t cb, npix;
        const int64_t off = bn16_item(&j->g, it, &cb, &npix);
        float m16[16];
        bn16_means(j, cb, m16);
        bn16_bwd_run(j->dy + off, j->x + off, npix, m16, j->p0 + it * 16, j->p1 + it * 16);
    }
}

/* grad_x = A dy + B (x - M) + D: the plain kernels' float operations. */
static void bn16_bwd_dx(void *v, int64_t b, int64_t e) {
    bn16_job *j = v;
    for (int64_t it = b; it < e; it++) {
        int64_t cb, npix;
        const int64_t off = bn16_item(&j->g, it, &cb, &npix);
        const float *restrict dy = j->dy + off, *restrict x = j->x + off;
        float *restrict dx = j->y + off;
        const int lanes = bn16_lanes(&j->g, cb);
#if BN16_Z
        const __m512 A = bn16_ld(j->a, cb, lanes), B = bn16_ld(j->b, cb, lanes),
                     D = bn16_ld(j->d, cb, lanes), M = bn16_ld(j->m, cb, lanes);
        for (int64_t s = 0; s < npix; s++) {
            const __m512 t =
                _mm512_add_ps(_mm512_mul_ps(A, _mm512_loadu_ps(dy + s * 16)),
                              _mm512_mul_ps(B, _mm512_sub_ps(_mm512_loadu_ps(x + s * 16), M)));
            _mm512_storeu_ps(dx + s * 16, _mm512_add_ps(t, D));
        }
#else
        float A[16], B[16], D[16], M[16];
        for (int l = 0; l < 16; l++) {
            const bool in = l < lanes;
            A[l] = in ? j->a[cb * 16 + l] : 0.0f;
            B[l] = in ? j->b[cb * 16 + l] : 0.0f;
            D[l] = in ? j->d[cb * 16 + l] : 0.0f;
            M[l] = in ? j->m[cb * 16 + l] : 0.0f;
        }
        for (int64_t s = 0; s < npix; s++)
            for (int l = 0; l < 16; l++)
                dx[s * 16 + l] = A[l] * dy[s * 16 + l] + B[l] * (x[s * 16 + l] - M[l]) + D[l];
#endif
    }
}

/* ---------------------------------------------------------------- scratch */
int64_t mft__bn16_scratch(int64_t N, int64_t C, int64_t S) {
    const int64_t items = N * ((C + 15) / 16) * ((S + BN16_RUN - 1) / BN16_RUN);
    return 2 * C + 32 * items;
}

int64_t mft__bn16_bwd_scratch(int64_t N, int64_t C, int64_t S) {
    const int64_t items = N * ((C + 15) / 16) * ((S + BN16_RUN - 1) / BN16_RUN);
    return 32 * items + 4 * C + 8;
}

/* ---------------------------------------------------------------- forward */
void mft__batch_norm_nchw16c_f32(const mft_kernel_args *a) {
    const mft__norm_kparams *kp = a->params;
    const mft_tensor *x = a->inputs[0];
    if (x->numel == 0) return;
    bn16_job j;
    memset(&j, 0, sizeof j);
    j.g = bn16_geom_of(x);
    j.x = (const float *)(const void *)mft__tensor_ptr(x);
    j.y = (float *)(void *)mft__tensor_ptr(a->outputs[0]);
    const int64_t C = j.g.C, items = bn16_items(&j.g);
    float *scf = (float *)(void *)kp->scratch; /* 3*C floats fit in 2*C doubles */
    float *shf = scf + C, *mf = shf + C;
    j.p0 = kp->scratch + 2 * C;
    j.p1 = j.p0 + 16 * items;
    j.m = mf;
    j.a = scf;
    j.b = shf;
    const int64_t grain = norm_grain(BN16_RUN * 16);
    if (kp->p.training) {
        /* one read of x from memory: per-item sums and deviations
         * (bn16_fwd_stats), combined in a fixed order (Chan et al.: M2 =
         * sum of the items' M2 + n_i (m_i - mean)^2) */
        const double rows = (double)(j.g.N * j.g.S);
        mft__parallel_for(0, items, grain, bn16_fwd_stats, &j);
        bn16_combine(&j.g, j.p0, kp->mean);
        for (int64_t c = 0; c < C; c++) kp->mean[c] /= rows;
        for (int64_t cb = 0; cb < j.g.C1; cb++) {
            double acc[16] = {0};
            const int lanes = bn16_lanes(&j.g, cb);
            for (int64_t n = 0; n < j.g.N; n++)
                for (int64_t ch = 0; ch < j.g.nch; ch++) {
                    const int64_t it = (n * j.g.C1 + cb) * j.g.nch + ch;
                    const double np =
                        (double)(j.g.S - ch * BN16_RUN < BN16_RUN ? j.g.S - ch * BN16_RUN
                                                                  : BN16_RUN);
                    for (int l = 0; l < lanes; l++) {
                        const double d = j.p0[it * 16 + l] / np - kp->mean[cb * 16 + l];
                        acc[l] += j.p1[it * 16 + l] + np * d * d;
                    }
                }
            for (int l = 0; l < lanes; l++) kp->var[cb * 16 + l] = acc[l] / rows;
        }
    }
    /* the coefficients as batch_norm_fast_run (ops/norm/batch_norm.c) */
    for (int64_t c = 0; c < C; c++) {
        const double w = norm_ld_F32(kp->weight, c, 1.0);
        scf[c] = (float)(w / sqrt(kp->var[c] + kp->p.eps));
        shf[c] = (float)norm_ld_F32(kp->bias, c, 0.0);
        mf[c] = (float)kp->mean[c];
    }
    mft__parallel_for(0, items, grain, bn16_fwd_norm, &j);
}

/* ---------------------------------------------------------------- backward */
void mft__batch_norm_bwd_nchw16c_f32(const mft_kernel_args *a) {
    const mft__normb_kparams *kp = a->params;
    const mft_tensor *x = a->inputs[1];
    bn16_job j;
    memset(&j, 0, sizeof j);
    j.g = bn16_geom_of(x);
    const int64_t C = j.g.C, items = bn16_items(&j.g);
    for (int64_t c = 0; c < C; c++) kp->gw[c] = kp->gb[c] = 0.0;
    if (x->numel == 0) return;
    j.dy = (const float *)(const void *)mft__tensor_ptr(a->inputs[0]);
    j.x = (const float *)(const void *)mft__tensor_ptr(x);
    j.y = (float *)(void *)mft__tensor_ptr(a->outputs[0]);
    double *sc = kp->scratch;
    j.p0 = sc;
    j.p1 = sc + 16 * items;
    double *db = j.p1 + 16 * items, *ds = db + C;
    float *A = (float *)(void *)(ds + C), *B = A + C, *D = B + C, *M = D + C;
    j.a = A;
    j.b = B;
    j.d = D;
    j.m = M;
    const int64_t grain = norm_grain(BN16_RUN * 16);
    for (int64_t c = 0; c < C; c++) M[c] = (float)kp->mean[c];
    if (kp->p.training || kp->need_wb) {
        mft__parallel_for(0, items, grain, bn16_bwd_sums, &j);
        bn16_combine(&j.g, j.p0, db);
        bn16_combine(&j.g, j.p1, ds);
        /* sums of dy (x - mf); x - mean = (x - mf) + (mf - mean) */
        for (int64_t c = 0; c < C; c++) ds[c] += db[c] * ((double)M[c] - kp->mean[c]);
    } else {
        for (int64_t c = 0; c < C; c++) db[c] = ds[c] = 0.0;
    }
    /* grad_weight / grad_bias and the coefficients as mft__nb_fast_run
     * (ops/norm/channel_backward.c) */
    const double Mn = (double)(j.g.N * j.g.S);
    for (int64_t c = 0; c < C; c++) {
        const double rs = kp->rstd[c], w = norm_ld_F32(kp->weight, c, 1.0);
        kp->gb[c] = db[c];
        kp->gw[c] = ds[c] * rs;
        A[c] = (float)(rs * w);
        if (kp->p.training) {
            B[c] = (float)(-rs * rs * (w * ds[c] * rs) / Mn);
            D[c] = (float)(-rs * (w * db[c]) / Mn);
        } else {
            B[c] = D[c] = 0.0f;
        }
    }
    mft__parallel_for(0, items, grain, bn16_bwd_dx, &j);
}
