/* ops/pool/avg_nhwc.c — average pooling on NHWC / NDHWC (CHANNELS_LAST) F32
 * buffers, forward and backward, vectorised over the channels of a pixel:
 * the 2-D forward (on AVX-512 builds separable: column sums of the window
 * rows, then sums of those; else per output pixel with the AVX-512 kernels
 * of kernels_avx512.h or register blocks of POOL_VB channels, the next rows
 * prefetched), the rank-generic forward (3-D, adaptive avg; the same pixel
 * loop), and the backward gathered per grad_x row: per pixel the outputs
 * whose windows hold it, times their 1/divisor (tabled per row; separable on
 * AVX-512 builds). */
#include "pool_internal.h"

/* Outputs listed at a time per pixel by the NHWC avg backward. */
#define PM_TERMS 32
/* Largest (od, oh) pairs x OW of a row whose 1/divisor table the NHWC avg
 * backward's fast path keeps on the stack. */
#define PM_PINV 4096

/* ---------------------------------------------------------------- forward */
/* The average of one output pixel over its window (depths [d0, d1), rows
 * [h0, h1), columns [w0, w1), unit steps) of an image of C channels per
 * pixel, H rows and W columns: the sum in window order divided by div (0: an
 * empty window, the output is 0), blocks of POOL_VB channels summed in
 * registers (v8: vector registers for whole blocks). */
static inline void avg_px(const float *in, int64_t H, int64_t W, int64_t C, int64_t d0,
                          int64_t d1, int64_t h0, int64_t h1, int64_t w0, int64_t w1, int64_t div,
                          float *out, bool v8) {
    const float fd = div ? (float)div : 1.0f;
    for (int64_t c0 = 0; c0 < C; c0 += POOL_VB) {
        const int64_t nc = C - c0 < POOL_VB ? C - c0 : POOL_VB;
        float acc[POOL_VB];
#if POOL_HAVE_V8
        if (v8 && nc == POOL_VB) {
            pool_v8 va[POOL_VB / 8];
            for (int k = 0; k < POOL_VB / 8; k++) va[k] = (pool_v8){0, 0, 0, 0, 0, 0, 0, 0};
            for (int64_t id = d0; id < d1; id++)
                for (int64_t ih = h0; ih < h1; ih++)
                    for (int64_t iw = w0; iw < w1; iw++) {
                        const float *row = in + ((id * H + ih) * W + iw) * C + c0;
                        for (int k = 0; k < POOL_VB / 8; k++) {
                            pool_v8 v;
                            memcpy(&v, row + 8 * k, sizeof v);
                            va[k] += v;
                        }
                    }
            memcpy(acc, va, sizeof va);
        } else
#else
        (void)v8;
#endif
        {
            for (int c = 0; c < POOL_VB; c++) acc[c] = 0.0f;
            for (int64_t id = d0; id < d1; id++)
                for (int64_t ih = h0; ih < h1; ih++)
                    for (int64_t iw = w0; iw < w1; iw++) {
                        const float *row = in + ((id * H + ih) * W + iw) * C + c0;
                        for (int64_t c = 0; c < nc; c++) acc[c] += row[c];
                    }
        }
        for (int64_t c = 0; c < nc; c++) out[c0 + c] = div ? acc[c] / fd : 0.0f;
    }
}

/* 2-D */
#if POOL_HAVE_Z16
/* Widest input row the separable NHWC average handles (its column sums of
 * one 64-channel block, on the stack). */
#define POOL_CS_W 256

/* The separable NHWC average of output row (n, oh) (rows [h0, h1), padded
 * extent ph): per block of 64 channels, the column sums over the window rows
 * once per input column, then each output sums its columns' sums: 3 + 3
 * loads per output vector for a 3x3 / stride 1 window instead of 9. The
 * sums are grouped by columns, not in the reference's row order, so the
 * results may differ from it in the last bit (exact where the sums are). */
static void avg_nhwc_row_separable(const pool_job *j, int64_t r, const float *in, int64_t h0,
                                   int64_t h1, int64_t ph, int64_t ra, int64_t rb) {
    const mft_pool2d_params *p = j->p;
    const int64_t C = j->C, W = j->W;
    float cs[POOL_CS_W * 64];
    /* the row's columns: [wa, wb) */
    int64_t wa, wb, pw, t0, t1;
    avg_window(0, W, p->kernel[1], p->stride[1], p->padding[1], &wa, &t1, &pw);
    avg_window(j->OW - 1, W, p->kernel[1], p->stride[1], p->padding[1], &t0, &wb, &pw);
    if (wb < wa) wb = wa;
    pool_prefetch(in, W, C, ra, rb, 1, wa, wb);
    for (int64_t c = 0; c < C; c += 64) {
        const int64_t rem = C - c;
        const int nv = rem >= 64 ? 4 : (int)((rem + 15) / 16);
        const __mmask16 km = pz_tail_mask(rem >= 64 ? 64 : rem, nv);
        switch (nv) {
        case 1: pz_colsums(in + c, W, C, h0, h1, wa, wb, cs, 1, km); break;
        case 2: pz_colsums(in + c, W, C, h0, h1, wa, wb, cs, 2, km); break;
        case 3: pz_colsums(in + c, W, C, h0, h1, wa, wb, cs, 3, km); break;
        default: pz_colsums(in + c, W, C, h0, h1, wa, wb, cs, 4, km); break;
        }
        for (int64_t ow = 0; ow < j->OW; ow++) {
            int64_t w0, w1;
            avg_window(ow, W, p->kernel[1], p->stride[1], p->padding[1], &w0, &w1, &pw);
            const int64_t div = avg_divisor(p, h0, h1, ph, w0, w1, pw);
            const int64_t nw = w1 > w0 ? w1 - w0 : 0;
            const float *cw = cs + (w0 - wa) * 64;
            float *out = j->y + (r * j->OW + ow) * C + c;
            switch (nv) {
            case 1: pz_avg_cols(cw, nw, div, out, 1, km); break;
            case 2: pz_avg_cols(cw, nw, div, out, 2, km); break;
            case 3: pz_avg_cols(cw, nw, div, out, 3, km); break;
            default: pz_avg_cols(cw, nw, div, out, 4, km); break;
            }
        }
    }
}
#endif

/* One output row (n, oh) per work item. */
static void avg_nhwc_range(void *ctx, int64_t begin, int64_t end) {
    const pool_job *j = ctx;
    const mft_pool2d_params *p = j->p;
    const int64_t C = j->C;
    for (int64_t r = begin; r < end; r++) {
        const int64_t n = r / j->OH, oh = r % j->OH;
        const float *in = j->x + n * j->H * j->W * C;
        int64_t h0, h1, ph, nh0, nh1, ra, rb;
        avg_window(oh, j->H, p->kernel[0], p->stride[0], p->padding[0], &h0, &h1, &ph);
        avg_window(oh + 1, j->H, p->kernel[0], p->stride[0], p->padding[0], &nh0, &nh1, &ra);
        pool_next_rows(oh, j->OH, h1, nh0, nh1, 1, &ra, &rb);
#if POOL_HAVE_Z16
        /* windows that overlap along W with more than one row: separable */
        if (j->W <= POOL_CS_W && p->kernel[0] > 1 && p->stride[1] < p->kernel[1]) {
            avg_nhwc_row_separable(j, r, in, h0, h1, ph, ra, rb);
            continue;
        }
#endif
        int64_t pw1 = 0; /* the previous window's column end */
        for (int64_t ow = 0; ow < j->OW; ow++) {
            float *out = j->y + (r * j->OW + ow) * C;
            int64_t w0, w1, pw;
            avg_window(ow, j->W, p->kernel[1], p->stride[1], p->padding[1], &w0, &w1, &pw);
            pool_prefetch(in, j->W, C, ra, rb, 1, w0 > pw1 ? w0 : pw1, w1);
            pw1 = w1;
            const int64_t div = avg_divisor(p, h0, h1, ph, w0, w1, pw);
#if POOL_HAVE_Z16
            {
                const pz_win g = {h0, h1, 1, w0, w1, 1, j->W, C};
                pz_avg_pixel(in, &g, div, out);
                continue;
            }
#endif
            avg_px(in, j->H, j->W, C, 0, 1, h0, h1, w0, w1, div, out, true);
        }
    }
}

void mft__pool_avg_pool2d_nhwc(const mft_kernel_args *a) {
    pool_job j = pool_job_of(a, false);
    const int64_t work = j.OW * j.C * j.p->kernel[0] * j.p->kernel[1];
    mft__parallel_for(0, j.N * j.OH, pool_grain(work), avg_nhwc_range, &j);
}

/* Rank-generic: x (N,D,H,W,C) packed -> y (N,OD,OH,OW,C) packed; one output
 * row (n, od, oh) per work item. */
static void pm_avg_nhwc_range(void *ctx, int64_t begin, int64_t end) {
    const pm_job *j = ctx;
    const pm_geom *g = &j->g;
    const int64_t C = g->C, D = g->in[0], H = g->in[1], W = g->in[2];
    const int64_t OD = g->out[0], OH = g->out[1], OW = g->out[2];
    /* row r = ((n * OD) + od) * OH + oh */
    PM_FOR_ROWS(r, begin, end, n, od, OD, oh, OH) {
        const float *in = j->x + n * D * H * W * C;
        int64_t d0, d1, ed, h0, h1, eh;
        pm_win(g, 0, od, &d0, &d1, &ed);
        pm_win(g, 1, oh, &h0, &h1, &eh);
        for (int64_t ow = 0; ow < OW; ow++) {
            float *out = j->y + (r * OW + ow) * C;
            int64_t w0, w1, ew;
            pm_win(g, 2, ow, &w0, &w1, &ew);
            const int64_t cnt[3] = {d1 - d0, h1 - h0, w1 - w0}, ext[3] = {ed, eh, ew};
            const int64_t div = pm_divisor(g, cnt, ext);
            avg_px(in, H, W, C, d0, d1, h0, h1, w0, w1, div, out, PM_HAVE_V8);
        }
    }
}

static void pm_avg_nhwc(const pm_geom *g, const mft_kernel_args *a) {
    pm_job j = pm_job_of(g, a);
    pm_fwd_rows(g, &j, true, pm_avg_nhwc_range);
}

PM_FWD_ENTRY(mft__pool_avg_pool3d_nhwc, PM_AVG, pm_geom_p3(&g, a->params), pm_avg_nhwc)
PM_FWD_ENTRY(mft__pool_adaptive_avg_nhwc, PM_ADAPT, (void)0, pm_avg_nhwc)

/* ---------------------------------------------------------------- backward
 * (avg_pool2d_backward, avg_pool3d_backward, adaptive_avg_pool2d/3d_backward:
 * grad_out; params: the forward's, or the adaptive output size) */
/* NHWC avg / adaptive avg backward by gathering: grad_out (N,OD,OH,OW,C)
 * packed -> grad_x (N,D,H,W,C) packed; one grad_x row (n, d, h) per work
 * item. Per pixel, the outputs whose windows hold it are listed (offset of
 * their C-row, 1/divisor; PM_TERMS at a time), then summed per block of
 * POOL_VB channels held in registers. The W-dim window counts of the outputs
 * are tabled per row when OW <= PM_TAB. */
static inline void pm_avgbwd_terms(const pm_geom *g, const float *go, float *out, int ntm,
                                   const int64_t *toff, const float *tinv, bool first) {
    const int64_t C = g->C;
    for (int64_t c0 = 0; c0 < C; c0 += POOL_VB) {
        const int64_t nc = C - c0 < POOL_VB ? C - c0 : POOL_VB;
        float acc[POOL_VB];
        if (nc == POOL_VB) {
#if PM_HAVE_V8
            pool_v8 va[POOL_VB / 8];
            for (int k = 0; k < POOL_VB / 8; k++)
                va[k] = first ? (pool_v8){0, 0, 0, 0, 0, 0, 0, 0} : pm_ld8(out + c0 + 8 * k);
            for (int t = 0; t < ntm; t++) {
                const float *gp = go + toff[t] + c0;
                const pool_v8 w = (pool_v8){0, 0, 0, 0, 0, 0, 0, 0} + tinv[t];
                for (int k = 0; k < POOL_VB / 8; k++) va[k] += pm_ld8(gp + 8 * k) * w;
            }
            for (int k = 0; k < POOL_VB / 8; k++) pm_st8(out + c0 + 8 * k, va[k]);
#else
            for (int c = 0; c < POOL_VB; c++) acc[c] = first ? 0.0f : out[c0 + c];
            for (int t = 0; t < ntm; t++) {
                const float *gp = go + toff[t] + c0;
                const float inv = tinv[t];
                for (int c = 0; c < POOL_VB; c++) acc[c] += gp[c] * inv;
            }
            for (int c = 0; c < POOL_VB; c++) out[c0 + c] = acc[c];
#endif
        } else {
            for (int64_t c = 0; c < nc; c++) acc[c] = first ? 0.0f : out[c0 + c];
            for (int t = 0; t < ntm; t++) {
                const float *gp = go + toff[t] + c0;
                const float inv = tinv[t];
                for (int64_t c = 0; c < nc; c++) acc[c] += gp[c] * inv;
            }
            for (int64_t c = 0; c < nc; c++) out[c0 + c] = acc[c];
        }
    }
}

/* The fast path's sum for one pixel: the outputs of the listed (od, oh)
 * pairs (C-row offsets pbase[k] + ow, ow in [ow0, ow1)) times their
 * 1/divisor pinv[k * OW + ow], in the order of pm_avgbwd_terms' lists
 * (pair, then ow), accumulated per block of POOL_VB channels in registers. */
#if POOL_HAVE_Z16
/* pm_avgbwd_pairs for channels [0, 16*nv) in 16-lane registers (the last
 * masked by km): the same products and sums in the same order. */
static inline __attribute__((always_inline)) void
pm_avgbwd_pairs_z(const float *go, float *out, int64_t C, int64_t OW, int npair,
                  const int64_t *pbase, const float *pinv, const int64_t *wcnt, int64_t ow0,
                  int64_t ow1, int nv, __mmask16 km) {
    __m512 va[4];
    for (int k = 0; k < nv; k++) va[k] = _mm512_setzero_ps();
    for (int q = 0; q < npair; q++)
        for (int64_t ow = ow0; ow < ow1; ow++) {
            if (wcnt[ow] <= 0) continue;
            const float *gp = go + (pbase[q] + ow) * C;
            const __m512 w = _mm512_set1_ps(pinv[q * OW + ow]);
            for (int k = 0; k < nv; k++) {
                const __m512 v = k == nv - 1 ? _mm512_maskz_loadu_ps(km, gp + 16 * k)
                                             : _mm512_loadu_ps(gp + 16 * k);
                va[k] = _mm512_add_ps(va[k], _mm512_mul_ps(v, w));
            }
        }
    for (int k = 0; k < nv; k++)
        _mm512_mask_storeu_ps(out + 16 * k, k == nv - 1 ? km : (__mmask16)0xFFFF, va[k]);
}
#endif

static inline void pm_avgbwd_pairs(const pm_geom *g, const float *go, float *out, int npair,
                                   const int64_t *pbase, const float *pinv,
                                   const int64_t *wcnt, int64_t ow0, int64_t ow1) {
    const int64_t C = g->C, OW = g->out[2];
#if POOL_HAVE_Z16
    int64_t cz = 0;
    for (; cz + 64 <= C; cz += 64)
        pm_avgbwd_pairs_z(go + cz, out + cz, C, OW, npair, pbase, pinv, wcnt, ow0, ow1, 4,
                          0xFFFF);
    const int64_t r = C - cz;
    if (r > 0) {
        const int nv = (int)((r + 15) / 16);
        const int64_t last = r - 16 * (nv - 1);
        const __mmask16 km = pm_mask16(last);
        go += cz;
        out += cz;
        switch (nv) {
        case 1: pm_avgbwd_pairs_z(go, out, C, OW, npair, pbase, pinv, wcnt, ow0, ow1, 1, km); break;
        case 2: pm_avgbwd_pairs_z(go, out, C, OW, npair, pbase, pinv, wcnt, ow0, ow1, 2, km); break;
        case 3: pm_avgbwd_pairs_z(go, out, C, OW, npair, pbase, pinv, wcnt, ow0, ow1, 3, km); break;
        default: pm_avgbwd_pairs_z(go, out, C, OW, npair, pbase, pinv, wcnt, ow0, ow1, 4, km); break;
        }
    }
#else
    for (int64_t c0 = 0; c0 < C; c0 += POOL_VB) {
        const int64_t nc = C - c0 < POOL_VB ? C - c0 : POOL_VB;
#if PM_HAVE_V8
        if (nc == POOL_VB) {
            pool_v8 va[POOL_VB / 8];
            for (int k = 0; k < POOL_VB / 8; k++) va[k] = (pool_v8){0, 0, 0, 0, 0, 0, 0, 0};
            for (int q = 0; q < npair; q++)
                for (int64_t ow = ow0; ow < ow1; ow++) {
                    if (wcnt[ow] <= 0) continue;
                    const float *gp = go + (pbase[q] + ow) * C + c0;
                    const pool_v8 w = (pool_v8){0, 0, 0, 0, 0, 0, 0, 0} + pinv[q * OW + ow];
                    for (int k = 0; k < POOL_VB / 8; k++) va[k] += pm_ld8(gp + 8 * k) * w;
                }
            for (int k = 0; k < POOL_VB / 8; k++) pm_st8(out + c0 + 8 * k, va[k]);
            continue;
        }
#endif
        float acc[POOL_VB];
        for (int64_t c = 0; c < nc; c++) acc[c] = 0.0f;
        for (int q = 0; q < npair; q++)
            for (int64_t ow = ow0; ow < ow1; ow++) {
                if (wcnt[ow] <= 0) continue;
                const float *gp = go + (pbase[q] + ow) * C + c0;
                const float inv = pinv[q * OW + ow];
                for (int64_t c = 0; c < nc; c++) acc[c] += gp[c] * inv;
            }
        for (int64_t c = 0; c < nc; c++) out[c0 + c] = acc[c];
    }
#endif
}

#if POOL_HAVE_Z16
/* Widest grad_out row the separable NHWC avg backward keeps (its scaled
 * column sums of one 64-channel block, on the stack). */
#define PM_SEP_OW 256

/* The separable form of pm_avgbwd_pairs over a whole grad_x row, channels
 * [0, 16*nv) (last register masked by km): first, per output column ow,
 * S[ow] = 0 + the sum over the listed (od, oh) pairs of grad_out * 1/divisor
 * (pairs in order; +0 for an empty window, whose grad_out is not read);
 * then each grad_x pixel iw sums 0 + S over its columns [iw0, iw1) in order
 * (a sum that starts at +0 never becomes -0, so adding an empty window's +0
 * changes nothing: the same result as skipping it). The products are those
 * of pm_avgbwd_pairs, the sums regrouped by column (equal up to rounding):
 * 3 + 3 loads per pixel vector for 3x3 / stride 1 windows instead of 9. */
static inline __attribute__((always_inline)) void
pm_avgbwd_sep_z(const float *go, float *gx, float *S, int64_t C, int64_t OW, int64_t W,
                int npair, const int64_t *pbase, const float *pinv, const int64_t *wcnt,
                const int64_t *iw0, const int64_t *iw1, int nv, __mmask16 km) {
    for (int64_t ow = 0; ow < OW; ow++) {
        __m512 v[4];
        for (int k = 0; k < nv; k++) v[k] = _mm512_setzero_ps();
        for (int q = 0; q < npair && wcnt[ow] > 0; q++) {
            const float *gp = go + (pbase[q] + ow) * C;
            const __m512 w = _mm512_set1_ps(pinv[q * OW + ow]);
            for (int k = 0; k < nv; k++) {
                const __m512 x = k == nv - 1 ? _mm512_maskz_loadu_ps(km, gp + 16 * k)
                                             : _mm512_loadu_ps(gp + 16 * k);
                v[k] = _mm512_add_ps(v[k], _mm512_mul_ps(x, w));
            }
        }
        for (int k = 0; k < nv; k++) _mm512_storeu_ps(S + ow * 64 + 16 * k, v[k]);
    }
    for (int64_t iw = 0; iw < W; iw++) {
        __m512 v[4];
        for (int k = 0; k < nv; k++) v[k] = _mm512_setzero_ps();
        for (int64_t ow = iw0[iw]; ow < iw1[iw]; ow++) /* (S = +0 where empty: v + 0 = v) */
            for (int k = 0; k < nv; k++)
                v[k] = _mm512_add_ps(v[k], _mm512_loadu_ps(S + ow * 64 + 16 * k));
        for (int k = 0; k < nv; k++)
            _mm512_mask_storeu_ps(gx + iw * C + 16 * k, k == nv - 1 ? km : (__mmask16)0xFFFF, v[k]);
    }
}

static void pm_avgbwd_sep(const float *go, float *gx, int64_t C, int64_t OW, int64_t W,
                          int npair, const int64_t *pbase, const float *pinv, const int64_t *wcnt,
                          const int64_t *iw0, const int64_t *iw1) {
    float S[PM_SEP_OW * 64];
    for (int64_t c = 0; c < C; c += 64) {
        const int64_t rem = C - c;
        const int nv = rem >= 64 ? 4 : (int)((rem + 15) / 16);
        const int64_t last = (rem >= 64 ? 64 : rem) - 16 * (nv - 1);
        const __mmask16 km = pm_mask16(last);
        switch (nv) {
        case 1: pm_avgbwd_sep_z(go + c, gx + c, S, C, OW, W, npair, pbase, pinv, wcnt, iw0, iw1, 1, km); break;
        case 2: pm_avgbwd_sep_z(go + c, gx + c, S, C, OW, W, npair, pbase, pinv, wcnt, iw0, iw1, 2, km); break;
        case 3: pm_avgbwd_sep_z(go + c, gx + c, S, C, OW, W, npair, pbase, pinv, wcnt, iw0, iw1, 3, km); break;
        default: pm_avgbwd_sep_z(go + c, gx + c, S, C, OW, W, npair, pbase, pinv, wcnt, iw0, iw1, 4, km); break;
        }
    }
}
#endif

static void pm_avgbwd_nhwc_range(void *ctx, int64_t begin, int64_t end) {
    const pm_job *j = ctx;
    const pm_geom *g = &j->g;
    const int64_t C = g->C, D = g->in[0], H = g->in[1], W = g->in[2];
    const int64_t OD = g->out[0], OH = g->out[1], OW = g->out[2];
    int64_t wcnt[PM_TAB], wext[PM_TAB];
    const bool tab = OW <= PM_TAB;
    for (int64_t ow = 0; tab && ow < OW; ow++) {
        int64_t a0, a1;
        pm_win(g, 2, ow, &a0, &a1, &wext[ow]);
        wcnt[ow] = a1 - a0;
    }
    int64_t iw0[PM_TAB], iw1[PM_TAB];
    const bool itab = W <= PM_TAB;
    for (int64_t iw = 0; itab && iw < W; iw++) pm_inv(g, 2, iw, &iw0[iw], &iw1[iw]);
    int64_t toff[PM_TERMS], pbase[PM_TERMS], pcnt[PM_TERMS], pext[PM_TERMS];
    float tinv[PM_TERMS], pinv[PM_PINV];
    int64_t inv_cnt[PM_TERMS], inv_ext[PM_TERMS]; /* the pairs pinv was made for */
    int inv_npair = -1;
    const bool ovr = g->kind != PM_ADAPT && g->divisor_override != 0;
    const bool use_ext = g->kind == PM_AVG && g->count_include_pad && !ovr;
    /* row r = ((n * D) + id) * H + ih */
    PM_FOR_ROWS(r, begin, end, n, id, D, ih, H) {
        const float *go = j->x + n * OD * OH * OW * C;
        int64_t od0, od1, oh0, oh1;
        pm_inv(g, 0, id, &od0, &od1);
        pm_inv(g, 1, ih, &oh0, &oh1);
        /* fast path: the (od, oh) windows of the row listed once, W-dim
         * factors tabled */
        int npair = 0;
        if (tab && itab && (od1 - od0) * (oh1 - oh0) <= PM_TERMS &&
            (od1 - od0) * (oh1 - oh0) * OW <= PM_PINV) {
            for (int64_t od = od0; od < od1; od++) {
                int64_t a0, a1, ed;
                pm_win(g, 0, od, &a0, &a1, &ed);
                for (int64_t oh = oh0; oh < oh1; oh++) {
                    int64_t b0, b1, eh;
                    pm_win(g, 1, oh, &b0, &b1, &eh);
                    if (a1 <= a0 || b1 <= b0) continue;
                    pbase[npair] = (od * OH + oh) * OW;
                    pcnt[npair] = (a1 - a0) * (b1 - b0);
                    pext[npair++] = ed * eh;
                }
            }
            /* 1/divisor per (pair, ow): recomputed only when the pairs'
             * window sizes differ from the previous row's (interior rows
             * share them; the scalar divisions cost ~15% of the 3x3 / s1
             * backward in cache) */
            bool same = npair == inv_npair;
            for (int k = 0; same && k < npair; k++)
                same = pcnt[k] == inv_cnt[k] && pext[k] == inv_ext[k];
            if (!same) {
                for (int k = 0; k < npair; k++)
                    for (int64_t ow = 0; ow < OW; ow++) {
                        const int64_t div = ovr ? g->divisor_override
                                          : use_ext ? pext[k] * wext[ow] : pcnt[k] * wcnt[ow];
                        pinv[k * OW + ow] = wcnt[ow] > 0 ? 1.0f / (float)div : 0.0f;
                    }
                inv_npair = npair;
                for (int k = 0; k < npair; k++) {
                    inv_cnt[k] = pcnt[k];
                    inv_ext[k] = pext[k];
                }
            }
            /* grad_out rows the next input row adds (oh >= oh1), prefetched
             * column by column while this row is summed (from DRAM the
             * hardware prefetcher alone left it latency-bound) */
            int64_t na = 0, nb = 0;
            if (ih + 1 < H) {
                pm_inv(g, 1, ih + 1, &na, &nb);
                if (na < oh1) na = oh1;
                if (nb < na) nb = na;
            }
            const float *gn = go + (od0 < od1 ? od0 : 0) * OH * OW * C;
#if POOL_HAVE_Z16
            if (OW <= PM_SEP_OW) { /* separable, the next rows prefetched first */
                for (int64_t oh = na; oh < nb; oh++)
                    for (int64_t b = 0; b < OW * C * (int64_t)sizeof(float); b += 64)
                        __builtin_prefetch((const char *)(gn + oh * OW * C) + b);
                pm_avgbwd_sep(go, j->y + r * W * C, C, OW, W, npair, pbase, pinv, wcnt, iw0, iw1);
                continue;
            }
#endif
            int64_t pcol = 0; /* the previous pixel's column end */
            for (int64_t iw = 0; iw < W; iw++) {
                for (int64_t oh = na; oh < nb; oh++)
                    for (int64_t ow = iw0[iw] > pcol ? iw0[iw] : pcol; ow < iw1[iw]; ow++) {
                        const char *q = (const char *)(gn + (oh * OW + ow) * C);
                        for (int64_t b = 0; b < C * (int64_t)sizeof(float); b += 64)
                            __builtin_prefetch(q + b);
                    }
                if (iw1[iw] > pcol) pcol = iw1[iw];
                pm_avgbwd_pairs(g, go, j->y + (r * W + iw) * C, npair, pbase, pinv, wcnt,
                                iw0[iw], iw1[iw]);
            }
            continue;
        }
        for (int64_t iw = 0; iw < W; iw++) {
            float *out = j->y + (r * W + iw) * C;
            int64_t ow0, ow1;
            if (itab) {
                ow0 = iw0[iw];
                ow1 = iw1[iw];
            } else {
                pm_inv(g, 2, iw, &ow0, &ow1);
            }
            int ntm = 0;
            bool first = true;
            for (int64_t od = od0; od < od1; od++) {
                int64_t a0, a1, cnt[3], ext[3];
                pm_win(g, 0, od, &a0, &a1, &ext[0]);
                cnt[0] = a1 - a0;
                for (int64_t oh = oh0; oh < oh1; oh++) {
                    pm_win(g, 1, oh, &a0, &a1, &ext[1]);
                    cnt[1] = a1 - a0;
                    for (int64_t ow = ow0; ow < ow1; ow++) {
                        if (tab) {
                            cnt[2] = wcnt[ow];
                            ext[2] = wext[ow];
                        } else {
                            pm_win(g, 2, ow, &a0, &a1, &ext[2]);
                            cnt[2] = a1 - a0;
                        }
                        const int64_t div = pm_divisor(g, cnt, ext);
                        if (!div) continue;
                        toff[ntm] = ((od * OH + oh) * OW + ow) * C;
                        tinv[ntm++] = 1.0f / (float)div;
                        if (ntm == PM_TERMS) {
                            pm_avgbwd_terms(g, go, out, ntm, toff, tinv, first);
                            first = false;
                            ntm = 0;
                        }
                    }
                }
            }
            if (ntm || first) pm_avgbwd_terms(g, go, out, ntm, toff, tinv, first);
        }
    }
}

static void pm_avgbwd_nhwc(const pm_geom *g, const mft_kernel_args *a) {
    pm_job j = pm_job_of(g, a);
    mft__parallel_for(0, g->N * g->in[0] * g->in[1],
                      pool_grain(g->C * g->in[2] * pm_bwd_terms(g)), pm_avgbwd_nhwc_range, &j);
}

PM_BWD_ENTRY(mft__pool_avg_pool2d_backward_nhwc, PM_AVG, pm_geom_p2(&g, a->params), pm_avgbwd_nhwc)
PM_BWD_ENTRY(mft__pool_avg_pool3d_backward_nhwc, PM_AVG, pm_geom_p3(&g, a->params), pm_avgbwd_nhwc)
PM_BWD_ENTRY(mft__pool_adaptive_avg_backward_nhwc, PM_ADAPT, (void)0, pm_avgbwd_nhwc)
