/* ops/conv/depthwise.c — depthwise convolution (groups == C_in, any
 * multiplier) of the fast F32 kernels on NHWC buffers (forward and
 * backward_input may write NCHW): the per-pixel channel-vectorised kernels
 * (AVX-512, AVX2 and portable C), the row driver with its tap tables, and
 * backward_weight by fixed chunks of output rows. Entry:
 * mft__conv_depthwise, called from the algorithm chains of chains.c.
 *
 * Note [Depthwise kernels]
 * groups == C_in (one input channel per group, any multiplier; this also
 * covers C_in = 1, groups = 1, the first layer of a CNN) runs separate
 * channel-vectorised kernels: forward / backward_input per dst pixel, over
 * its in-image taps (a per-row tap table; interior pixels reuse the row's
 * list shifted; pairs of interior pixels share the weight loads), 32
 * channels per register block, streaming stores for NHWC outputs too big
 * for a last-level cache (>= 16 MB); 2-D CONTIGUOUS depthwise with unit W
 * stride (backward_input: unit strides) runs native NCHW kernels instead
 * (Note [Depthwise NCHW]);
 * backward_weight sums over 16 fixed chunks of output rows into per-chunk
 * partials (each tap's run of columns accumulated in registers) that are
 * added in chunk order. F64 has no fast kernels (the reference runs).
 * If a scratch allocation fails, the kernel reports it (mft__kernel_nomem)
 * and the op fails with MFT_ERR_NOMEM; it never computes the result another
 * way that rounds differently (Note [Kernel scratch] in ops/ops_internal.h). */
#include "conv_internal.h"

/* ---------------------------------------------------------------- depthwise pixel */
#define DW_CHUNK 32
#if CF_AVX512
/* Plain depthwise (one input channel per output channel): 64 channels of
 * one dst pixel (dw512_one) or of two (dw512_two, sharing the weight loads)
 * in 16-lane registers; even and odd taps in separate accumulators in
 * dw512_one (8 chains). Streaming stores only where a line is 64-byte
 * aligned. Return the channels done (a multiple of 64). */
static inline void dw512_st(float *p, __m512 v, bool nt) {
    if (nt && ((uintptr_t)p & 63) == 0)
        _mm512_stream_ps(p, v);
    else
        _mm512_storeu_ps(p, v);
}
static int64_t dw512_one(float *o, const float *b, const float *const *a, int64_t sh,
                         const float *const *w, int64_t nu, int64_t dC, bool nt) {
    int64_t c = 0;
    for (; c + 64 <= dC; c += 64) {
        __m512 s0 = _mm512_loadu_ps(b + c), s1 = _mm512_loadu_ps(b + c + 16),
               s2 = _mm512_loadu_ps(b + c + 32), s3 = _mm512_loadu_ps(b + c + 48);
        __m512 t0 = _mm512_setzero_ps(), t1 = t0, t2 = t0, t3 = t0;
        int64_t u = 0;
        for (; u + 2 <= nu; u += 2) {
            const float *p = a[u] + sh + c, *q = a[u + 1] + sh + c, *wp = w[u] + c,
                        *wq = w[u + 1] + c;
            s0 = _mm512_fmadd_ps(_mm512_loadu_ps(p), _mm512_loadu_ps(wp), s0);
            s1 = _mm512_fmadd_ps(_mm512_loadu_ps(p + 16), _mm512_loadu_ps(wp + 16), s1);
            s2 = _mm512_fmadd_ps(_mm512_loadu_ps(p + 32), _mm512_loadu_ps(wp + 32), s2);
            s3 = _mm512_fmadd_ps(_mm512_loadu_ps(p + 48), _mm512_loadu_ps(wp + 48), s3);
            t0 = _mm512_fmadd_ps(_mm512_loadu_ps(q), _mm512_loadu_ps(wq), t0);
            t1 = _mm512_fmadd_ps(_mm512_loadu_ps(q + 16), _mm512_loadu_ps(wq + 16), t1);
            t2 = _mm512_fmadd_ps(_mm512_loadu_ps(q + 32), _mm512_loadu_ps(wq + 32), t2);
            t3 = _mm512_fmadd_ps(_mm512_loadu_ps(q + 48), _mm512_loadu_ps(wq + 48), t3);
        }
        if (u < nu) {
            const float *p = a[u] + sh + c, *wp = w[u] + c;
            s0 = _mm512_fmadd_ps(_mm512_loadu_ps(p), _mm512_loadu_ps(wp), s0);
            s1 = _mm512_fmadd_ps(_mm512_loadu_ps(p + 16), _mm512_loadu_ps(wp + 16), s1);
            s2 = _mm512_fmadd_ps(_mm512_loadu_ps(p + 32), _mm512_loadu_ps(wp + 32), s2);
            s3 = _mm512_fmadd_ps(_mm512_loadu_ps(p + 48), _mm512_loadu_ps(wp + 48), s3);
        }
        dw512_st(o + c, _mm512_add_ps(s0, t0), nt);
        dw512_st(o + c + 16, _mm512_add_ps(s1, t1), nt);
        dw512_st(o + c + 32, _mm512_add_ps(s2, t2), nt);
        dw512_st(o + c + 48, _mm512_add_ps(s3, t3), nt);
    }
    return c;
}
/* Plain depthwise forward with 3 taps along W at unit stride and
 * dilation, over n consecutive dst pixels of one row whose taps all lie in
 * the source (the interior): the nr source rows start at rp[k] (the first
 * pixel's first tap column), tap (k, kw) has packed weights wv[3*k + kw].
 * Per 16-channel slice the 3*nr weights stay in registers, and the source
 * columns slide through registers: each pixel loads one new column per row
 * (nr loads for 3*nr FMAs, against 3*nr + weights in dw512_two). Taps in
 * order (k, kw), even ones onto the bias, odd ones onto 0, summed at the
 * end. 8x64x56x56 3x3, 1 thread: one image (in cache) 0.060 -> 0.046 ms,
 * all 8 0.52 -> 0.37-0.39 ms. dC % 16 == 0. */
static inline __attribute__((always_inline)) void
dw512_slide_nr(float *o, const float *b, const float *const *rp, const float *const *wv,
               int64_t n, int64_t sC, int64_t dC, bool nt, const int nr) {
    for (int64_t c = 0; c + 16 <= dC; c += 16) {
        __m512 w[3][3], pa[3], pb[3];
        for (int k = 0; k < nr; k++) {
            for (int kw = 0; kw < 3; kw++) w[k][kw] = _mm512_loadu_ps(wv[3 * k + kw] + c);
            pa[k] = _mm512_loadu_ps(rp[k] + c);
            pb[k] = _mm512_loadu_ps(rp[k] + sC + c);
        }
        const __m512 bias = _mm512_loadu_ps(b + c);
        for (int64_t i = 0; i < n; i++) {
            __m512 pc[3], acc[2] = {bias, _mm512_setzero_ps()};
            for (int k = 0; k < nr; k++) pc[k] = _mm512_loadu_ps(rp[k] + (i + 2) * sC + c);
            for (int k = 0; k < nr; k++) {
                acc[(3 * k) & 1] = _mm512_fmadd_ps(pa[k], w[k][0], acc[(3 * k) & 1]);
                acc[(3 * k + 1) & 1] = _mm512_fmadd_ps(pb[k], w[k][1], acc[(3 * k + 1) & 1]);
                acc[(3 * k + 2) & 1] = _mm512_fmadd_ps(pc[k], w[k][2], acc[(3 * k + 2) & 1]);
                pa[k] = pb[k];
                pb[k] = pc[k];
            }
            dw512_st(o + i * dC + c, _mm512_add_ps(acc[0], acc[1]), nt);
        }
    }
}
static void dw512_slide(float *o, const float *b, const float *const *rp,
                        const float *const *wv, int nr, int64_t n, int64_t sC, int64_t dC,
                        bool nt) {
    switch (nr) {
    case 1: dw512_slide_nr(o, b, rp, wv, n, sC, dC, nt, 1); break;
    case 2: dw512_slide_nr(o, b, rp, wv, n, sC, dC, nt, 2); break;
    default: dw512_slide_nr(o, b, rp, wv, n, sC, dC, nt, 3); break;
    }
}
/* Plain depthwise backward_weight over the interior n output columns of one
 * row (every kw tap inside), 3 taps along W at unit stride and dilation: tap
 * (k, kw) of the nr source rows xr[k] (at the first column's kw = 0 source)
 * gets sum over the columns of grad_y * x, per 16-channel slice in 3*nr
 * registers, the source columns sliding through registers (nr + 1 loads per
 * 3*nr FMAs); then added to part[tix[3*k + kw] * C]. C % 16 == 0. */
static inline __attribute__((always_inline)) void
dw512_bw_slide_nr(float *part, const float *const *xr, const float *gy, int64_t n, int64_t C,
                  const int64_t *tix, const int nr) {
    for (int64_t c = 0; c + 16 <= C; c += 16) {
        __m512 acc[3][3], v0[3], v1[3];
        for (int k = 0; k < nr; k++) {
            for (int kw = 0; kw < 3; kw++) acc[k][kw] = _mm512_setzero_ps();
            v0[k] = _mm512_loadu_ps(xr[k] + c);
            v1[k] = _mm512_loadu_ps(xr[k] + C + c);
        }
        for (int64_t i = 0; i < n; i++) {
            const __m512 gv = _mm512_loadu_ps(gy + i * C + c);
            for (int k = 0; k < nr; k++) {
                const __m512 v2 = _mm512_loadu_ps(xr[k] + (i + 2) * C + c);
                acc[k][0] = _mm512_fmadd_ps(gv, v0[k], acc[k][0]);
                acc[k][1] = _mm512_fmadd_ps(gv, v1[k], acc[k][1]);
                acc[k][2] = _mm512_fmadd_ps(gv, v2, acc[k][2]);
                v0[k] = v1[k];
                v1[k] = v2;
            }
        }
        for (int k = 0; k < nr; k++)
            for (int kw = 0; kw < 3; kw++) {
                float *pt = part + tix[3 * k + kw] * C + c;
                _mm512_storeu_ps(pt, _mm512_add_ps(_mm512_loadu_ps(pt), acc[k][kw]));
            }
    }
}
static void dw512_bw_slide(float *part, const float *const *xr, const float *gy, int64_t n,
                           int64_t C, const int64_t *tix, int nr) {
    switch (nr) {
    case 1: dw512_bw_slide_nr(part, xr, gy, n, C, tix, 1); break;
    case 2: dw512_bw_slide_nr(part, xr, gy, n, C, tix, 2); break;
    default: dw512_bw_slide_nr(part, xr, gy, n, C, tix, 3); break;
    }
}
static int64_t dw512_two(float *o0, float *o1, const float *b, const float *const *a,
                         int64_t sh0, int64_t sh1, const float *const *w, int64_t nu, int64_t dC,
                         bool nt) {
    int64_t c = 0;
    for (; c + 64 <= dC; c += 64) {
        __m512 s0 = _mm512_loadu_ps(b + c), s1 = _mm512_loadu_ps(b + c + 16),
               s2 = _mm512_loadu_ps(b + c + 32), s3 = _mm512_loadu_ps(b + c + 48);
        __m512 t0 = s0, t1 = s1, t2 = s2, t3 = s3;
        for (int64_t u = 0; u < nu; u++) {
            const float *p = a[u] + sh0 + c, *q = a[u] + sh1 + c, *wu = w[u] + c;
            const __m512 w0 = _mm512_loadu_ps(wu), w1 = _mm512_loadu_ps(wu + 16),
                         w2 = _mm512_loadu_ps(wu + 32), w3 = _mm512_loadu_ps(wu + 48);
            s0 = _mm512_fmadd_ps(_mm512_loadu_ps(p), w0, s0);
            s1 = _mm512_fmadd_ps(_mm512_loadu_ps(p + 16), w1, s1);
            s2 = _mm512_fmadd_ps(_mm512_loadu_ps(p + 32), w2, s2);
            s3 = _mm512_fmadd_ps(_mm512_loadu_ps(p + 48), w3, s3);
            t0 = _mm512_fmadd_ps(_mm512_loadu_ps(q), w0, t0);
            t1 = _mm512_fmadd_ps(_mm512_loadu_ps(q + 16), w1, t1);
            t2 = _mm512_fmadd_ps(_mm512_loadu_ps(q + 32), w2, t2);
            t3 = _mm512_fmadd_ps(_mm512_loadu_ps(q + 48), w3, t3);
        }
        dw512_st(o0 + c, s0, nt);
        dw512_st(o0 + c + 16, s1, nt);
        dw512_st(o0 + c + 32, s2, nt);
        dw512_st(o0 + c + 48, s3, nt);
        dw512_st(o1 + c, t0, nt);
        dw512_st(o1 + c + 16, t1, nt);
        dw512_st(o1 + c + 32, t2, nt);
        dw512_st(o1 + c + 48, t3, nt);
    }
    return c;
}
#endif
/* One dst pixel (dC channels) of a depthwise conv over nu taps (source
 * pixel a[u], packed weights w[u] of Cout): forward o[c] = b[c] + sum_u
 * a_u[c / mult] * w_u[c]; backward_input o[c] = b[c] + sum_u sum_m
 * a_u[c*mult + m] * w_u[c*mult + m]. b may be o itself (accumulate). */
static void dw_pixel(float *o, const float *b, const float *const *a, int64_t sh,
                     const float *const *w, int64_t nu, int64_t dC, int64_t mult, bool bwd,
                     bool nt) {
    int64_t c = 0;
#if CF_AVX2
/* nt: o is 32-byte aligned and is not read again soon: streaming stores */
#define DW_ST(p, v) (nt ? _mm256_stream_ps((p), (v)) : _mm256_storeu_ps((p), (v)))
    if (cf_mode() != 1 && (mult == 1 || (!bwd && mult % 8 == 0))) {
        const bool bc = mult != 1;
#if CF_AVX512
        if (!bc) c = dw512_one(o, b, a, sh, w, nu, dC, nt); /* then the AVX2 tail */
#endif
        /* bc: the input channel of the 8-block at c is ci = c / mult
         * (mult % 8 == 0), tracked without divisions */
        int64_t ci = 0, rem = 0;
#define DW_NEXT8()                                                                                 \
    do {                                                                                           \
        rem += 8;                                                                                  \
        if (rem >= mult) {                                                                         \
            rem = 0;                                                                               \
            ci++;                                                                                  \
        }                                                                                          \
    } while (0)
        for (; c + 32 <= dC; c += 32) {
            __m256 s0 = _mm256_loadu_ps(b + c), s1 = _mm256_loadu_ps(b + c + 8),
                   s2 = _mm256_loadu_ps(b + c + 16), s3 = _mm256_loadu_ps(b + c + 24);
            const int64_t i0 = ci;
            DW_NEXT8();
            const int64_t i1 = ci;
            DW_NEXT8();
            const int64_t i2 = ci;
            DW_NEXT8();
            const int64_t i3 = ci;
            DW_NEXT8();
            /* even taps into s, odd taps into t (two FMA chains) */
            __m256 t0 = _mm256_setzero_ps(), t1 = t0, t2 = t0, t3 = t0;
#define DW_TAP(u, A0, A1, A2, A3)                                                                  \
    do {                                                                                           \
        const float *au = a[u] + sh, *wu = w[u] + c;                                               \
        __m256 x0, x1, x2, x3;                                                                     \
        if (bc) {                                                                                  \
            x0 = _mm256_broadcast_ss(au + i0);                                                     \
            x1 = _mm256_broadcast_ss(au + i1);                                                     \
            x2 = _mm256_broadcast_ss(au + i2);                                                     \
            x3 = _mm256_broadcast_ss(au + i3);                                                     \
        } else {                                                                                   \
            x0 = _mm256_loadu_ps(au + c);                                                          \
            x1 = _mm256_loadu_ps(au + c + 8);                                                      \
            x2 = _mm256_loadu_ps(au + c + 16);                                                     \
            x3 = _mm256_loadu_ps(au + c + 24);                                                     \
        }                                                                                          \
        A0 = _mm256_fmadd_ps(x0, _mm256_loadu_ps(wu), A0);                                         \
        A1 = _mm256_fmadd_ps(x1, _mm256_loadu_ps(wu + 8), A1);                                     \
        A2 = _mm256_fmadd_ps(x2, _mm256_loadu_ps(wu + 16), A2);                                    \
        A3 = _mm256_fmadd_ps(x3, _mm256_loadu_ps(wu + 24), A3);                                    \
    } while (0)
            int64_t u = 0;
            for (; u + 2 <= nu; u += 2) {
                DW_TAP(u, s0, s1, s2, s3);
                DW_TAP(u + 1, t0, t1, t2, t3);
            }
            if (u < nu) DW_TAP(u, s0, s1, s2, s3);
#undef DW_TAP
            DW_ST(o + c, _mm256_add_ps(s0, t0));
            DW_ST(o + c + 8, _mm256_add_ps(s1, t1));
            DW_ST(o + c + 16, _mm256_add_ps(s2, t2));
            DW_ST(o + c + 24, _mm256_add_ps(s3, t3));
        }
        for (; c + 8 <= dC; c += 8) {
            __m256 s0 = _mm256_loadu_ps(b + c), t0 = _mm256_setzero_ps();
            const int64_t i0 = ci;
            DW_NEXT8();
            for (int64_t u = 0; u < nu; u++) {
                const float *au = a[u] + sh;
                const __m256 x0 = bc ? _mm256_broadcast_ss(au + i0) : _mm256_loadu_ps(au + c);
                if (u & 1)
                    t0 = _mm256_fmadd_ps(x0, _mm256_loadu_ps(w[u] + c), t0);
                else
                    s0 = _mm256_fmadd_ps(x0, _mm256_loadu_ps(w[u] + c), s0);
            }
            DW_ST(o + c, _mm256_add_ps(s0, t0));
        }
#undef DW_NEXT8
    } else if (cf_mode() != 1 && bwd && mult % 8 == 0) {
        for (; c < dC; c++) {
            __m256 v0 = _mm256_setzero_ps(), v1 = v0, v2 = v0, v3 = v0;
            for (int64_t u = 0; u < nu; u++) {
                const float *au = a[u] + sh + c * mult, *wu = w[u] + c * mult;
                int64_t m = 0;
                for (; m + 32 <= mult; m += 32) {
                    v0 = _mm256_fmadd_ps(_mm256_loadu_ps(au + m), _mm256_loadu_ps(wu + m), v0);
                    v1 = _mm256_fmadd_ps(_mm256_loadu_ps(au + m + 8), _mm256_loadu_ps(wu + m + 8),
                                         v1);
                    v2 = _mm256_fmadd_ps(_mm256_loadu_ps(au + m + 16), _mm256_loadu_ps(wu + m + 16),
                                         v2);
                    v3 = _mm256_fmadd_ps(_mm256_loadu_ps(au + m + 24), _mm256_loadu_ps(wu + m + 24),
                                         v3);
                }
                for (; m < mult; m += 8)
                    v0 = _mm256_fmadd_ps(_mm256_loadu_ps(au + m), _mm256_loadu_ps(wu + m), v0);
            }
            const __m256 v = _mm256_add_ps(_mm256_add_ps(v0, v1), _mm256_add_ps(v2, v3));
            __m128 q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
            q = _mm_add_ps(q, _mm_movehl_ps(q, q));
            q = _mm_add_ss(q, _mm_movehdup_ps(q));
            o[c] = b[c] + _mm_cvtss_f32(q);
        }
    }
#undef DW_ST
#else
    (void)nt;
#endif
    for (; c < dC; c++) {
        float s = b[c];
        for (int64_t u = 0; u < nu; u++) {
            const float *au = a[u] + sh;
            if (!bwd) {
                s += au[c / mult] * w[u][c];
            } else {
                for (int64_t m = 0; m < mult; m++) s += au[c * mult + m] * w[u][c * mult + m];
            }
        }
        o[c] = s;
    }
}

/* Two dst pixels at once (o0, o1; sources a[u] + sh0 and a[u] + sh1),
 * sharing the weight loads: forward or backward_input with mult == 1, or
 * forward with mult % 8 == 0. Returns false (nothing done) otherwise. */
static bool dw_pixel2(float *o0, float *o1, const float *b, const float *const *a, int64_t sh0,
                      int64_t sh1, const float *const *w, int64_t nu, int64_t dC, int64_t mult,
                      bool bwd, bool nt) {
#if CF_AVX2
    if (cf_mode() == 1 || !(mult == 1 || (!bwd && mult % 8 == 0))) return false;
    const bool bc = mult != 1;
    int64_t c = 0, ci = 0, rem = 0;
#if CF_AVX512
    if (!bc) c = dw512_two(o0, o1, b, a, sh0, sh1, w, nu, dC, nt); /* then the AVX2 tail */
#endif
#define DW2_ST(p, v)      (nt ? _mm256_stream_ps((p), (v)) : _mm256_storeu_ps((p), (v)))
#define DW2_X(au, cc, ii) (bc ? _mm256_broadcast_ss((au) + (ii)) : _mm256_loadu_ps((au) + (cc)))
    for (; c + 32 <= dC; c += 32) {
        int64_t ix[4];
        for (int q = 0; q < 4; q++) {
            ix[q] = ci;
            rem += 8;
            if (rem >= mult) {
                rem = 0;
                ci++;
            }
        }
        __m256 s0 = _mm256_loadu_ps(b + c), s1 = _mm256_loadu_ps(b + c + 8),
               s2 = _mm256_loadu_ps(b + c + 16), s3 = _mm256_loadu_ps(b + c + 24);
        __m256 t0 = s0, t1 = s1, t2 = s2, t3 = s3;
        if (bc && ix[0] == ix[3]) { /* one input channel for all 32: one broadcast */
            for (int64_t u = 0; u < nu; u++) {
                const float *wu = w[u] + c;
                const __m256 x0 = _mm256_broadcast_ss(a[u] + sh0 + ix[0]),
                             x1 = _mm256_broadcast_ss(a[u] + sh1 + ix[0]);
                const __m256 w0 = _mm256_loadu_ps(wu), w1 = _mm256_loadu_ps(wu + 8),
                             w2 = _mm256_loadu_ps(wu + 16), w3 = _mm256_loadu_ps(wu + 24);
                s0 = _mm256_fmadd_ps(x0, w0, s0);
                s1 = _mm256_fmadd_ps(x0, w1, s1);
                s2 = _mm256_fmadd_ps(x0, w2, s2);
                s3 = _mm256_fmadd_ps(x0, w3, s3);
                t0 = _mm256_fmadd_ps(x1, w0, t0);
                t1 = _mm256_fmadd_ps(x1, w1, t1);
                t2 = _mm256_fmadd_ps(x1, w2, t2);
                t3 = _mm256_fmadd_ps(x1, w3, t3);
            }
        } else {
            for (int64_t u = 0; u < nu; u++) {
                const float *wu = w[u] + c, *p0 = a[u] + sh0, *p1 = a[u] + sh1;
                const __m256 w0 = _mm256_loadu_ps(wu), w1 = _mm256_loadu_ps(wu + 8),
                             w2 = _mm256_loadu_ps(wu + 16), w3 = _mm256_loadu_ps(wu + 24);
                s0 = _mm256_fmadd_ps(DW2_X(p0, c, ix[0]), w0, s0);
                s1 = _mm256_fmadd_ps(DW2_X(p0, c + 8, ix[1]), w1, s1);
                s2 = _mm256_fmadd_ps(DW2_X(p0, c + 16, ix[2]), w2, s2);
                s3 = _mm256_fmadd_ps(DW2_X(p0, c + 24, ix[3]), w3, s3);
                t0 = _mm256_fmadd_ps(DW2_X(p1, c, ix[0]), w0, t0);
                t1 = _mm256_fmadd_ps(DW2_X(p1, c + 8, ix[1]), w1, t1);
                t2 = _mm256_fmadd_ps(DW2_X(p1, c + 16, ix[2]), w2, t2);
                t3 = _mm256_fmadd_ps(DW2_X(p1, c + 24, ix[3]), w3, t3);
            }
        }
        DW2_ST(o0 + c, s0);
        DW2_ST(o0 + c + 8, s1);
        DW2_ST(o0 + c + 16, s2);
        DW2_ST(o0 + c + 24, s3);
        DW2_ST(o1 + c, t0);
        DW2_ST(o1 + c + 8, t1);
        DW2_ST(o1 + c + 16, t2);
        DW2_ST(o1 + c + 24, t3);
    }
    for (; c + 8 <= dC; c += 8) {
        const int64_t i0 = ci;
        rem += 8;
        if (rem >= mult) {
            rem = 0;
            ci++;
        }
        __m256 s0 = _mm256_loadu_ps(b + c), t0 = s0;
        for (int64_t u = 0; u < nu; u++) {
            const __m256 w0 = _mm256_loadu_ps(w[u] + c);
            s0 = _mm256_fmadd_ps(DW2_X(a[u] + sh0, c, i0), w0, s0);
            t0 = _mm256_fmadd_ps(DW2_X(a[u] + sh1, c, i0), w0, t0);
        }
        DW2_ST(o0 + c, s0);
        DW2_ST(o1 + c, t0);
    }
#undef DW2_X
#undef DW2_ST
    for (; c < dC; c++) {
        float s = b[c], t = b[c];
        for (int64_t u = 0; u < nu; u++) {
            s += a[u][sh0 + c / mult] * w[u][c];
            t += a[u][sh1 + c / mult] * w[u][c];
        }
        o0[c] = s;
        o1[c] = t;
    }
    return true;
#else
    (void)o0, (void)o1, (void)b, (void)a, (void)sh0, (void)sh1, (void)w, (void)nu, (void)dC;
    (void)mult, (void)bwd, (void)nt;
    return false;
#endif
}

/* Depthwise backward_weight over a run of n output columns of one tap:
 * pt[co] += sum_r x_r[co / mult] * gy_r[co], x_r = x + r*xs, gy_r = gy + r*C;
 * 32 channels at a time in registers (even and odd r in two chains). False
 * (nothing done) unless AVX2 and mult == 1 or mult % 8 == 0. */
static bool dw_bw_run(float *pt, const float *x, int64_t xs, const float *gy, int64_t C, int64_t n,
                      int64_t mult) {
#if CF_AVX2
    if (cf_mode() == 1 || !(mult == 1 || mult % 8 == 0)) return false;
    const bool bc = mult != 1;
    int64_t c = 0, ci = 0, rem = 0;
#define DWB_X(p, cc, ii) (bc ? _mm256_broadcast_ss((p) + (ii)) : _mm256_loadu_ps((p) + (cc)))
    for (; c + 32 <= C; c += 32) {
        int64_t ix[4];
        for (int q = 0; q < 4; q++) {
            ix[q] = ci;
            rem += 8;
            if (rem >= mult) {
                rem = 0;
                ci++;
            }
        }
        __m256 s0 = _mm256_loadu_ps(pt + c), s1 = _mm256_loadu_ps(pt + c + 8),
               s2 = _mm256_loadu_ps(pt + c + 16), s3 = _mm256_loadu_ps(pt + c + 24);
        __m256 t0 = _mm256_setzero_ps(), t1 = t0, t2 = t0, t3 = t0;
        /* the same loop with broadcast x (bc) or loaded x: unswitched */
#define DWB_LOOP(BC)                                                                               \
    do {                                                                                           \
        int64_t r = 0;                                                                             \
        for (; r + 2 <= n; r += 2) {                                                               \
            const float *xa = x + r * xs, *xb = xa + xs, *ga = gy + r * C + c, *gb = ga + C;       \
            s0 = _mm256_fmadd_ps(DWB_XX(BC, xa, c, ix[0]), _mm256_loadu_ps(ga), s0);               \
            s1 = _mm256_fmadd_ps(DWB_XX(BC, xa, c + 8, ix[1]), _mm256_loadu_ps(ga + 8), s1);       \
            s2 = _mm256_fmadd_ps(DWB_XX(BC, xa, c + 16, ix[2]), _mm256_loadu_ps(ga + 16), s2);     \
            s3 = _mm256_fmadd_ps(DWB_XX(BC, xa, c + 24, ix[3]), _mm256_loadu_ps(ga + 24), s3);     \
            t0 = _mm256_fmadd_ps(DWB_XX(BC, xb, c, ix[0]), _mm256_loadu_ps(gb), t0);               \
            t1 = _mm256_fmadd_ps(DWB_XX(BC, xb, c + 8, ix[1]), _mm256_loadu_ps(gb + 8), t1);       \
            t2 = _mm256_fmadd_ps(DWB_XX(BC, xb, c + 16, ix[2]), _mm256_loadu_ps(gb + 16), t2);     \
            t3 = _mm256_fmadd_ps(DWB_XX(BC, xb, c + 24, ix[3]), _mm256_loadu_ps(gb + 24), t3);     \
        }                                                                                          \
        if (r < n) {                                                                               \
            const float *xa = x + r * xs, *ga = gy + r * C + c;                                    \
            s0 = _mm256_fmadd_ps(DWB_XX(BC, xa, c, ix[0]), _mm256_loadu_ps(ga), s0);               \
            s1 = _mm256_fmadd_ps(DWB_XX(BC, xa, c + 8, ix[1]), _mm256_loadu_ps(ga + 8), s1);       \
            s2 = _mm256_fmadd_ps(DWB_XX(BC, xa, c + 16, ix[2]), _mm256_loadu_ps(ga + 16), s2);     \
            s3 = _mm256_fmadd_ps(DWB_XX(BC, xa, c + 24, ix[3]), _mm256_loadu_ps(ga + 24), s3);     \
        }                                                                                          \
    } while (0)
#define DWB_XX(BC, p, cc, ii) ((BC) ? _mm256_broadcast_ss((p) + (ii)) : _mm256_loadu_ps((p) + (cc)))
        if (bc)
            DWB_LOOP(1);
        else
            DWB_LOOP(0);
#undef DWB_XX
#undef DWB_LOOP
        _mm256_storeu_ps(pt + c, _mm256_add_ps(s0, t0));
        _mm256_storeu_ps(pt + c + 8, _mm256_add_ps(s1, t1));
        _mm256_storeu_ps(pt + c + 16, _mm256_add_ps(s2, t2));
        _mm256_storeu_ps(pt + c + 24, _mm256_add_ps(s3, t3));
    }
    for (; c + 8 <= C; c += 8) {
        const int64_t i0 = ci;
        rem += 8;
        if (rem >= mult) {
            rem = 0;
            ci++;
        }
        __m256 s0 = _mm256_loadu_ps(pt + c);
        for (int64_t r = 0; r < n; r++)
            s0 = _mm256_fmadd_ps(DWB_X(x + r * xs, c, i0), _mm256_loadu_ps(gy + r * C + c), s0);
        _mm256_storeu_ps(pt + c, s0);
    }
#undef DWB_X
    for (; c < C; c++) {
        float s = pt[c];
        for (int64_t r = 0; r < n; r++) s += x[r * xs + c / mult] * gy[r * C + c];
        pt[c] = s;
    }
    return true;
#else
    (void)pt, (void)x, (void)xs, (void)gy, (void)C, (void)n, (void)mult;
    return false;
#endif
}

/* ---------------------------------------------------------------- depthwise
 * groups == C_in (one input channel per group), multiplier mult = Cgo:
 * output channel co reads input channel co / mult. NHWC buffers; weights
 * packed [tap][Cout]. */
typedef struct dw_job {
    const cgeom *g;
    int kind; /* 0 forward, 1 backward_input, 2 backward_weight */
    const float *a, *b;
    float *o;
    const float *wp;
    const float *bpad; /* bias of the dst channels, packed */
    float *part;       /* backward_weight: [chunks][T][Cout] */
    int64_t nchunks, rows;
    bool onchw; /* forward / backward_input: o is NCHW */
    _Atomic long long *nomem; /* Note [Kernel scratch]: a worker's failed allocation */
} dw_job;

/* acc[co] += a[co / mult] * w[co] */
static inline void dw_fma(float *restrict acc, const float *restrict a, const float *restrict w,
                          int64_t C, int64_t mult) {
    if (mult == 1) {
        for (int64_t c = 0; c < C; c++) acc[c] += a[c] * w[c];
    } else {
        for (int64_t c = 0; c < C / mult; c++) {
            const float av = a[c];
            float *restrict ac = acc + c * mult;
            const float *restrict wc = w + c * mult;
            for (int64_t m = 0; m < mult; m++) ac[m] += av * wc[m];
        }
    }
}

static void dw_range(void *ctx, int64_t begin, int64_t end) {
    const dw_job *j = ctx;
    const cgeom *g = j->g;
    const int64_t mult = g->Cgo, Cin = g->Cin, Cout = g->Cout, T = g->T;
    /* per-row tap tables (forward / backward_input) */
    const float **rtab_a = NULL, **rtab_w = NULL;
    int64_t *rtab_k = NULL;
    float *rowbuf = NULL;
    if (j->kind != 2) {
        const int64_t rowlen = j->kind == 1 ? g->W * Cin : g->OW * Cout;
        const size_t bytes = (size_t)T * (2 * sizeof(float *) + sizeof(int64_t)) +
                             (j->onchw ? (size_t)rowlen * sizeof(float) : 0);
        rtab_a = mft__alloc(bytes, 64);
        if (!rtab_a) { /* Note [Kernel scratch] */
            mft__scratch_fail(j->nomem, bytes);
            return;
        }
        rtab_w = rtab_a + T;
        rtab_k = (int64_t *)(void *)(rtab_w + T);
        if (j->onchw) rowbuf = (float *)(void *)(rtab_k + T);
    }
    for (int64_t r = begin; r < end; r++) {
        if (j->kind == 2) {
            /* chunk r of the (n, od, oh) rows: partial sums [T][Cout] */
            float *part = j->part + r * T * Cout;
            memset(part, 0, (size_t)(T * Cout) * sizeof(float));
            const int64_t r0 = r * j->rows / j->nchunks, r1 = (r + 1) * j->rows / j->nchunks;
#if CF_AVX512
            /* plain, one depth tap, <= 3 tap rows of 3 taps at unit W stride
             * and dilation: each row's interior columns slide through
             * registers (dw512_bw_slide), the per-tap loop takes the edges */
            const bool bw_slide = cf_mode() != 1 && mult == 1 && Cout % 16 == 0 &&
                                  g->K[0] == 1 && g->K[1] <= 3 && g->K[2] == 3 &&
                                  g->s[2] == 1 && g->d[2] == 1;
#endif
            for (int64_t row = r0; row < r1; row++) {
                const int64_t oh = row % g->OH, od = (row / g->OH) % g->OD,
                              n = row / (g->OH * g->OD);
                int64_t L = 0, R = 0; /* the interior [L, R), done by the slide */
#if CF_AVX512
                if (bw_slide) {
                    R = g->OW;
                    for (int64_t kw = 0; kw < 3; kw++) {
                        int64_t lo, hi;
                        valid_range(g->OW, g->W, 1, kw - g->p[2], &lo, &hi);
                        L = lo > L ? lo : L;
                        R = hi < R ? hi : R;
                    }
                    const int64_t id = od * g->s[0] - g->p[0];
                    const float *xr[3];
                    int64_t tix[9];
                    int nr = 0;
                    for (int64_t kh = 0; L < R && id >= 0 && id < g->D && kh < g->K[1]; kh++) {
                        const int64_t ih = oh * g->s[1] - g->p[1] + kh * g->d[1];
                        if (ih < 0 || ih >= g->H) continue;
                        xr[nr] = j->b + (((n * g->D + id) * g->H + ih) * g->W + L - g->p[2]) * Cin;
                        for (int kw = 0; kw < 3; kw++) tix[3 * nr + kw] = kh * 3 + kw;
                        nr++;
                    }
                    if (nr > 0)
                        dw512_bw_slide(part, xr, j->a + (row * g->OW + L) * Cout, R - L, Cout, tix,
                                       nr);
                    else
                        L = R = 0;
                }
#endif
                for (int64_t t = 0; t < T; t++) {
                    const int64_t kw = t % g->K[2], kh = (t / g->K[2]) % g->K[1],
                                  kd = t / (g->K[2] * g->K[1]);
                    const int64_t id = od * g->s[0] - g->p[0] + kd * g->d[0];
                    const int64_t ih = oh * g->s[1] - g->p[1] + kh * g->d[1];
                    if (id < 0 || id >= g->D || ih < 0 || ih >= g->H) continue;
                    int64_t vlo, vhi;
                    const int64_t off = kw * g->d[2] - g->p[2];
                    valid_range(g->OW, g->W, g->s[2], off, &vlo, &vhi);
                    /* the valid columns outside the slid interior: up to two runs */
                    for (int seg = 0; seg < 2; seg++) {
                        const int64_t lo = L < R ? (seg ? (R > vlo ? R : vlo) : vlo)
                                                 : (seg ? vhi : vlo);
                        const int64_t hi = L < R ? (seg ? vhi : (L < vhi ? L : vhi)) : vhi;
                        if (hi <= lo) continue;
                        const float *gy0 = j->a + (row * g->OW + lo) * Cout;
                        const float *x0 = j->b + (((n * g->D + id) * g->H + ih) * g->W +
                                                  lo * g->s[2] + off) *
                                                     Cin;
                        float *pt = part + t * Cout;
                        if (dw_bw_run(pt, x0, g->s[2] * Cin, gy0, Cout, hi - lo, mult)) continue;
                        for (int64_t ow = lo; ow < hi; ow++) {
                            /* pt[co] += x[co / mult] * gy[co] */
                            dw_fma(pt, x0 + (ow - lo) * g->s[2] * Cin, gy0 + (ow - lo) * Cout,
                                   Cout, mult);
                        }
                    }
                }
            }
            continue;
        }
        /* forward / backward_input: one dst row (n, d, h). The row's taps
         * whose (kd, kh) lands inside the source are listed once (source row
         * pointer, kw, packed weights); each pixel keeps those whose column
         * is inside, in tap order, in chunks of DW_CHUNK (later chunks
         * accumulate onto the stored result). */
        const bool bwd = j->kind == 1;
        const int64_t dH = bwd ? g->H : g->OH, dD = bwd ? g->D : g->OD, dW = bwd ? g->W : g->OW;
        const int64_t dC = bwd ? Cin : Cout, sC = bwd ? Cout : Cin;
        const int64_t h = r % dH, dd = (r / dH) % dD, n = r / (dH * dD);
        const int64_t ssz[3] = {bwd ? g->OD : g->D, bwd ? g->OH : g->H, bwd ? g->OW : g->W};
        const int64_t sW = g->s[2], pW = g->p[2], dlW = g->d[2];
        if (!bwd && r + 1 < end) {
            /* the source row only the next dst row reads (its last tap row):
             * fetch it while this row computes (8x64x56x56 3x3 NHWC, 1 thread:
             * 0.73-0.75 -> 0.60-0.64 ms; 2 threads 0.32-0.37 -> 0.27-0.31) */
            const int64_t h1 = (r + 1) % dH, d1 = ((r + 1) / dH) % dD, n1 = (r + 1) / (dH * dD);
            const int64_t ih = h1 * g->s[1] - g->p[1] + (g->K[1] - 1) * g->d[1];
            const int64_t id = d1 * g->s[0] - g->p[0] + (g->K[0] - 1) * g->d[0];
            if (ih >= 0 && ih < g->H && id >= 0 && id < g->D) {
                const char *a = (const char *)(j->a + ((n1 * g->D + id) * g->H + ih) * g->W * Cin);
                const char *b = a + g->W * Cin * (int64_t)sizeof(float);
                for (; a < b; a += 64) __builtin_prefetch(a, 0, 3);
            }
        }
        const float *aps[DW_CHUNK], *wps[DW_CHUNK];
        /* streaming stores only for packed NHWC outputs too big to stay in a
         * last-level cache (>= 16 MB; below that, normal stores leave y in
         * cache for its consumer and measured faster) */
        const bool nt = !rowbuf && dC % 8 == 0 && ((uintptr_t)j->o % 32) == 0 &&
                        (dW * dH * dD * g->N * dC) >= ((int64_t)1 << 22);
        int64_t nr = 0, kw = -1, kh = 0, kd = 0;
        for (int64_t t = 0; t < T; t++) {
            if (++kw == g->K[2]) {
                kw = 0;
                if (++kh == g->K[1]) {
                    kh = 0;
                    kd++;
                }
            }
            const int64_t pos[2] = {dd, h}, kk[2] = {kd, kh};
            int64_t sp[2];
            bool ok = true;
            for (int i = 0; i < 2; i++) {
                if (!bwd) {
                    sp[i] = pos[i] * g->s[i] - g->p[i] + kk[i] * g->d[i];
                } else {
                    int64_t v = pos[i] + g->p[i] - kk[i] * g->d[i];
                    if (g->s[i] != 1 && (v < 0 || v % g->s[i])) ok = false;
                    sp[i] = g->s[i] != 1 ? v / g->s[i] : v;
                }
                ok &= sp[i] >= 0 && sp[i] < ssz[i];
            }
            if (!ok) continue;
            rtab_a[nr] = j->a + ((n * ssz[0] + sp[0]) * ssz[1] + sp[1]) * ssz[2] * sC;
            rtab_w[nr] = j->wp + t * Cout;
            rtab_k[nr++] = kw;
        }
        if (nr <= DW_CHUNK && (!bwd || sW == 1)) {
            /* one chunk, unit source step per kw: branch-free tap selection */
            const int64_t SW = ssz[2];
            int64_t kmin = 0, kmax = 0;
            for (int64_t e = 0; e < nr; e++) {
                rtab_k[e] *= bwd ? -dlW : dlW;
                if (e == 0 || rtab_k[e] < kmin) kmin = rtab_k[e];
                if (e == 0 || rtab_k[e] > kmax) kmax = rtab_k[e];
            }
            /* interior pixels: every listed tap inside; the tap list of the
             * first interior pixel shifted by (wcol - lo) * step */
            const int64_t step = (bwd ? 1 : sW) * sC;
            int64_t lo = dW, hi = dW;
            for (int64_t wcol = 0; wcol < dW; wcol++) {
                const int64_t b0 = bwd ? wcol + pW : wcol * sW - pW;
                const bool all = b0 + kmin >= 0 && b0 + kmax < SW;
                if (all && lo == dW) lo = wcol;
                if (!all && lo != dW) {
                    hi = wcol;
                    break;
                }
            }
            const float *api[DW_CHUNK];
            if (lo < hi) {
                const int64_t b0 = bwd ? lo + pW : lo * sW - pW;
                for (int64_t e = 0; e < nr; e++) api[e] = rtab_a[e] + (b0 + rtab_k[e]) * sC;
            }
#if CF_AVX512
            /* plain forward or backward_input, taps (row, kw 0..2) at unit
             * W stride and dilation: the interior slides through registers */
            bool slide = cf_mode() != 1 && mult == 1 && dC % 16 == 0 && g->K[2] == 3 && sW == 1 &&
                         dlW == 1 && nr > 0 && nr % 3 == 0 && nr <= 9 && lo < hi;
            for (int64_t e = 0; slide && e < nr; e++)
                slide = rtab_k[e] == (bwd ? -(e % 3) : e % 3) && rtab_a[e] == rtab_a[e - e % 3];
#endif
            for (int64_t wcol = 0; wcol < dW; wcol++) {
                float *o = rowbuf ? rowbuf + wcol * dC : j->o + (r * dW + wcol) * dC;
#if CF_AVX512
                if (slide && wcol == lo) {
                    /* taps by source column ascending: the backward's
                     * kw = 2, 1, 0 (its source column falls as kw rises) */
                    const float *rp[3], *wv[9];
                    for (int64_t e = 0; e < nr; e++) wv[e] = rtab_w[bwd ? e + 2 - 2 * (e % 3) : e];
                    for (int64_t k = 0; k < nr / 3; k++) rp[k] = api[bwd ? 3 * k + 2 : 3 * k];
                    dw512_slide(o, j->bpad, rp, wv, (int)(nr / 3), hi - lo, sC, dC, nt);
                    wcol = hi - 1;
                    continue;
                }
#endif
                if (wcol >= lo && wcol < hi) {
                    /* pairs (lo, lo+1), (lo+2, lo+3), ... share weight loads */
                    if (wcol + 1 < hi &&
                        dw_pixel2(o, o + dC, j->bpad, api, (wcol - lo) * step,
                                  (wcol + 1 - lo) * step, rtab_w, nr, dC, mult, bwd, nt)) {
                        wcol++;
                        continue;
                    }
                    dw_pixel(o, j->bpad, api, (wcol - lo) * step, rtab_w, nr, dC, mult, bwd, nt);
                    continue;
                }
                const int64_t b0 = bwd ? wcol + pW : wcol * sW - pW;
                int64_t nu = 0;
                for (int64_t e = 0; e < nr; e++) {
                    const int64_t iw = b0 + rtab_k[e];
                    const bool in = (uint64_t)iw < (uint64_t)SW;
                    aps[nu] = rtab_a[e] + (in ? iw : 0) * sC;
                    wps[nu] = rtab_w[e];
                    nu += in;
                }
                dw_pixel(o, j->bpad, aps, 0, wps, nu, dC, mult, bwd, nt);
            }
        } else {
            for (int64_t wcol = 0; wcol < dW; wcol++) {
                float *o = rowbuf ? rowbuf + wcol * dC : j->o + (r * dW + wcol) * dC;
                int64_t nu = 0;
                bool first = true;
                for (int64_t e = 0; e < nr; e++) {
                    int64_t iw;
                    if (!bwd) {
                        iw = wcol * sW - pW + rtab_k[e] * dlW;
                    } else {
                        iw = wcol + pW - rtab_k[e] * dlW;
                        if (sW != 1) iw = (iw < 0 || iw % sW) ? -1 : iw / sW;
                    }
                    if (iw >= 0 && iw < ssz[2]) {
                        aps[nu] = rtab_a[e] + iw * sC;
                        wps[nu++] = rtab_w[e];
                    }
                    if (nu == DW_CHUNK) {
                        dw_pixel(o, first ? j->bpad : o, aps, 0, wps, nu, dC, mult, bwd, false);
                        first = false;
                        nu = 0;
                    }
                }
                if (nu > 0 || first)
                    dw_pixel(o, first ? j->bpad : o, aps, 0, wps, nu, dC, mult, bwd, nt && first);
            }
        }
        if (rowbuf) { /* (dW, dC) row -> NCHW */
            const int64_t S = dD * dH * dW;
            mft__conv_tr_block(rowbuf, dC, j->o + n * dC * S + (dd * dH + h) * dW, S, dW, dC);
        }
    }
#if CF_AVX2
    _mm_sfence();
#endif
    mft__free(rtab_a);
}

/* Always true (a failed scratch allocation is reported through
 * mft__kernel_nomem, Note [Kernel scratch]). */
bool mft__conv_depthwise(const cgeom *g, int kind, const float *a, const float *b, float *o,
                         const int64_t *gws, bool onchw) {
    dw_job j;
    memset(&j, 0, sizeof j);
    _Atomic long long nomem = 0;
    j.nomem = &nomem;
    j.g = g;
    j.kind = kind;
    j.a = a;
    j.b = b;
    j.o = o;
    j.onchw = onchw;
    const int64_t T = g->T, Cout = g->Cout;
    if (kind == 2) {
        j.rows = g->N * g->OD * g->OH;
        j.nchunks = j.rows < 16 ? j.rows : 16;
        j.part = mft__alloc((size_t)(j.nchunks * T * Cout) * sizeof(float) + 64, 64);
        if (!j.part) { /* Note [Kernel scratch] */
            mft__kernel_nomem((size_t)(j.nchunks * T * Cout) * sizeof(float) + 64);
            return true;
        }
        mft__parallel_for(0, j.nchunks, 1, dw_range, &j);
        for (int64_t co = 0; co < Cout; co++)
            for (int64_t t = 0; t < T; t++) {
                const int64_t kw = t % g->K[2], kh = (t / g->K[2]) % g->K[1],
                              kd = t / (g->K[2] * g->K[1]);
                float s = 0.0f;
                for (int64_t c = 0; c < j.nchunks; c++) s += j.part[(c * T + t) * Cout + co];
                o[co * gws[0] + kd * gws[2] + kh * gws[3] + kw * gws[4]] = s;
            }
        mft__free(j.part);
        return true;
    }
    const int64_t dC = kind == 1 ? g->Cin : Cout;
    float *wp = mft__alloc((size_t)(T * Cout) * sizeof(float) + 64, 64);
    float *bpad = mft__alloc((size_t)dC * sizeof(float) + 64, 64);
    if (!wp || !bpad) { /* Note [Kernel scratch] */
        mft__free(wp);
        mft__free(bpad);
        mft__kernel_nomem((size_t)(T * Cout + dC) * sizeof(float) + 128);
        return true;
    }
    for (int64_t c = 0; c < dC; c++) bpad[c] = bval(g, c);
    j.bpad = bpad;
    for (int64_t t = 0; t < T; t++)
        for (int64_t co = 0; co < Cout; co++) wp[t * Cout + co] = wval(g, co, 0, t);
    j.wp = wp;
    const int64_t rows = kind == 1 ? g->N * g->D * g->H : g->N * g->OD * g->OH;
    mft__parallel_for(0, rows, 1, dw_range, &j);
    if (atomic_load(&nomem)) mft__kernel_nomem((size_t)atomic_load(&nomem));
    mft__free(wp);
    mft__free(bpad);
    return true;
}
