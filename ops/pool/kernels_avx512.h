/* ops/pool/kernels_avx512.h — the AVX-512 pieces of the pool kernels
 * (included by pool_internal.h when the build has AVX-512F): 16-lane masks,
 * the int64 indices loaded as saturated int32 lanes (the max backward
 * kernels of max_nchw.c and max_nhwc.c), and the per-pixel kernels of the
 * NHWC F32 pooling forward (max_nhwc.c, avg_nhwc.c): the max (with int32
 * positions) and the sum of one window over up to 64 channels held in four
 * 16-lane registers, the last register masked; and the two passes of the
 * separable average (column sums over the window rows, then sums of those
 * over the window columns). The per-window kernels visit, compare and add in
 * the scalar kernels' order (bit-identical results); the separable passes
 * group the sums by column. Not a public or shared header. */
#ifndef MFT_POOL_KERNELS_AVX512_H
#define MFT_POOL_KERNELS_AVX512_H
#include <immintrin.h>

#define PZ_ALWAYS_INLINE inline __attribute__((always_inline))

/* Lanes [0, min(r, 16)) of a 16-lane mask. */
static inline __mmask16 pm_mask16(int64_t r) {
    return r >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << r) - 1u);
}

/* The lane mask of the last of nv registers covering nc channels. */
static inline __mmask16 pz_tail_mask(int64_t nc, int nv) {
    return pm_mask16(nc - 16 * (int64_t)(nv - 1));
}

/* The 16 int64 indices at ii in the lanes of km, saturated to int32 (an
 * index past INT32_MAX stays past every position). Plain loads where km is
 * whole: masked loads that miss the cache measured 2x slower here. */
static inline __m512i pm_idx16(const int64_t *ii, __mmask16 km) {
    const bool whole = km == 0xFFFF;
    const __m256i lo = _mm512_cvtsepi64_epi32(
        whole ? _mm512_loadu_si512(ii) : _mm512_maskz_loadu_epi64((__mmask8)(km & 0xFF), ii));
    const __m256i hi = _mm512_cvtsepi64_epi32(
        whole ? _mm512_loadu_si512(ii + 8) : _mm512_maskz_loadu_epi64((__mmask8)(km >> 8), ii + 8));
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

static PZ_ALWAYS_INLINE __m512 pz_load(const float *p, int k, int nv, __mmask16 km) {
    return k == nv - 1 ? _mm512_maskz_loadu_ps(km, p + 16 * k) : _mm512_loadu_ps(p + 16 * k);
}

/* Window geometry of one output pixel: rows [h0, h1) step dh, columns
 * [w0, w1) step dw, over an image of width W with C channels per pixel. */
typedef struct pz_win {
    int64_t h0, h1, dh, w0, w1, dw, W, C;
} pz_win;

/* Max over the window of channels [0, 16*nv) of in (last register masked
 * by km): a value replaces the running max when it is greater or NaN, and
 * the position h*W + w (int32, the caller checked the plane fits) goes with
 * it. out gets the maxima, idx the positions widened to int64. */
static PZ_ALWAYS_INLINE void pz_max_px(const float *in, const pz_win *g, int32_t first,
                                       float *out, int64_t *idx, int nv, __mmask16 km) {
    __m512 m[4];
    __m512i ix[4];
    for (int k = 0; k < nv; k++) {
        m[k] = _mm512_set1_ps(-INFINITY);
        ix[k] = _mm512_set1_epi32(first);
    }
    /* the geometry in locals: the masked stores may alias *g */
    const int64_t h0 = g->h0, h1 = g->h1, dh = g->dh, w0 = g->w0, w1 = g->w1, dw = g->dw;
    const int64_t W = g->W, C = g->C;
    for (int64_t ih = h0; ih < h1; ih += dh)
        for (int64_t iw = w0; iw < w1; iw += dw) {
            const int64_t pos = ih * W + iw;
            const float *row = in + pos * C;
            const __m512i pv = _mm512_set1_epi32((int32_t)pos);
            for (int k = 0; k < nv; k++) {
                const __m512 v = pz_load(row, k, nv, km);
                const __mmask16 t = (__mmask16)(_mm512_cmp_ps_mask(v, m[k], _CMP_GT_OQ) |
                                                _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q));
                m[k] = _mm512_mask_mov_ps(m[k], t, v);
                ix[k] = _mm512_mask_mov_epi32(ix[k], t, pv);
            }
        }
    for (int k = 0; k < nv; k++) {
        const __mmask16 sk = k == nv - 1 ? km : (__mmask16)0xFFFF;
        _mm512_mask_storeu_ps(out + 16 * k, sk, m[k]);
        const __m512i lo = _mm512_cvtepi32_epi64(_mm512_castsi512_si256(ix[k]));
        const __m512i hi = _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(ix[k], 1));
        _mm512_mask_storeu_epi64(idx + 16 * k, (__mmask8)(sk & 0xFF), lo);
        _mm512_mask_storeu_epi64(idx + 16 * k + 8, (__mmask8)(sk >> 8), hi);
    }
}

/* Sum over the window (unit steps) of channels [0, 16*nv), divided by div
 * (0: an empty window, the output is 0). */
static PZ_ALWAYS_INLINE void pz_avg_px(const float *in, const pz_win *g, int64_t div, float *out,
                                       int nv, __mmask16 km) {
    __m512 s[4];
    for (int k = 0; k < nv; k++) s[k] = _mm512_setzero_ps();
    const int64_t h0 = g->h0, h1 = g->h1, w0 = g->w0, w1 = g->w1, C = g->C, rs = g->W * C;
    const float *r0 = in + (h0 * g->W + w0) * C;
    for (int64_t ih = h0; ih < h1; ih++, r0 += rs) {
        const float *row = r0;
        for (int64_t iw = w0; iw < w1; iw++, row += C)
            for (int k = 0; k < nv; k++) s[k] = _mm512_add_ps(s[k], pz_load(row, k, nv, km));
    }
    const __m512 fd = _mm512_set1_ps(div ? (float)div : 1.0f);
    for (int k = 0; k < nv; k++) {
        const __m512 r = div ? _mm512_div_ps(s[k], fd) : _mm512_setzero_ps();
        _mm512_mask_storeu_ps(out + 16 * k, k == nv - 1 ? km : (__mmask16)0xFFFF, r);
    }
}

/* Column sums for the separable avg path: cs[(iw - wa) * 64 + ch] = the sum
 * over rows [h0, h1) of in[ih][iw][ch] (from 0, in row order) for columns
 * [wa, wb) and channels [0, 16*nv). */
static PZ_ALWAYS_INLINE void pz_colsums(const float *in, int64_t W, int64_t C, int64_t h0,
                                        int64_t h1, int64_t wa, int64_t wb, float *cs, int nv,
                                        __mmask16 km) {
    for (int64_t iw = wa; iw < wb; iw++, cs += 64) {
        __m512 s[4];
        for (int k = 0; k < nv; k++) s[k] = _mm512_setzero_ps();
        const float *p = in + (h0 * W + iw) * C;
        for (int64_t ih = h0; ih < h1; ih++, p += W * C)
            for (int k = 0; k < nv; k++) s[k] = _mm512_add_ps(s[k], pz_load(p, k, nv, km));
        for (int k = 0; k < nv; k++) _mm512_storeu_ps(cs + 16 * k, s[k]);
    }
}

/* One output from column sums: (0 + cs[w0] + ... + cs[w1-1]) / div (0: the
 * output is 0), channels [0, 16*nv) of out. */
static PZ_ALWAYS_INLINE void pz_avg_cols(const float *cs, int64_t nw, int64_t div, float *out,
                                         int nv, __mmask16 km) {
    __m512 s[4];
    for (int k = 0; k < nv; k++) s[k] = _mm512_setzero_ps();
    for (int64_t t = 0; t < nw; t++, cs += 64)
        for (int k = 0; k < nv; k++) s[k] = _mm512_add_ps(s[k], _mm512_loadu_ps(cs + 16 * k));
    const __m512 fd = _mm512_set1_ps(div ? (float)div : 1.0f);
    for (int k = 0; k < nv; k++) {
        const __m512 r = div ? _mm512_div_ps(s[k], fd) : _mm512_setzero_ps();
        _mm512_mask_storeu_ps(out + 16 * k, k == nv - 1 ? km : (__mmask16)0xFFFF, r);
    }
}

/* One output pixel over all C channels: blocks of 64, then the rest in
 * 1-4 registers (constant register counts, so each call unrolls). */
static inline void pz_max_pixel(const float *in, const pz_win *g, int32_t first, float *out,
                                int64_t *idx) {
    int64_t c = 0;
    for (; c + 64 <= g->C; c += 64) pz_max_px(in + c, g, first, out + c, idx + c, 4, 0xFFFF);
    const int64_t r = g->C - c;
    if (r <= 0) return;
    const int nv = (int)((r + 15) / 16);
    const __mmask16 km = pz_tail_mask(r, nv);
    switch (nv) {
    case 1: pz_max_px(in + c, g, first, out + c, idx + c, 1, km); break;
    case 2: pz_max_px(in + c, g, first, out + c, idx + c, 2, km); break;
    case 3: pz_max_px(in + c, g, first, out + c, idx + c, 3, km); break;
    default: pz_max_px(in + c, g, first, out + c, idx + c, 4, km); break;
    }
}

static inline void pz_avg_pixel(const float *in, const pz_win *g, int64_t div, float *out) {
    int64_t c = 0;
    for (; c + 64 <= g->C; c += 64) pz_avg_px(in + c, g, div, out + c, 4, 0xFFFF);
    const int64_t r = g->C - c;
    if (r <= 0) return;
    const int nv = (int)((r + 15) / 16);
    const __mmask16 km = pz_tail_mask(r, nv);
    switch (nv) {
    case 1: pz_avg_px(in + c, g, div, out + c, 1, km); break;
    case 2: pz_avg_px(in + c, g, div, out + c, 2, km); break;
    case 3: pz_avg_px(in + c, g, div, out + c, 3, km); break;
    default: pz_avg_px(in + c, g, div, out + c, 4, km); break;
    }
}

#endif
