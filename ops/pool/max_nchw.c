/* ops/pool/max_nchw.c — max pooling on NCHW (CONTIGUOUS) F32 buffers,
 * forward and backward, each (n, c) plane on its own: the 2-D forward and
 * relu_max_pool2d by output rows (the valid outputs of a window column form a
 * range: unit-stride updates; AVX2 register blocks of 8 outputs at W-stride 1
 * or 2), the rank-generic forward (3-D, adaptive max) per output, and the
 * backward: the indices scattered plane by plane, or, for known 2x2 / stride
 * 2 windows on AVX-512 builds, each grad_x pixel written once. */
#include "pool_internal.h"

/* ---------------------------------------------------------------- 2-D forward
 * One output row (plane, oh) at a time: for each window row and column the
 * valid outputs of the row form a range, and the update over it is a
 * unit-stride loop over W when the stride is 1 (the compiler vectorises it;
 * the stride is a compile-time 1 there through the inlined helper). */
static inline void nchw_max_row(const float *in, float *out, int64_t *idx, int64_t W, int64_t OW,
                                int64_t kw_n, int64_t s, int64_t pad, int64_t dil, int64_t ih) {
    for (int64_t kw = 0; kw < kw_n; kw++) {
        int64_t off = kw * dil - pad, lo, hi;
        col_range(OW, W, s, off, &lo, &hi);
        const int64_t base = ih * W + off;
        for (int64_t o = lo; o < hi; o++) {
            float v = in[o * s + off];
            bool t = v > out[o] || v != v;
            out[o] = t ? v : out[o];
            idx[o] = t ? base + o * s : idx[o];
        }
    }
}

#if POOL_HAVE_AVX2
/* 8 floats p[0], p[s], ..., p[7s] for s = 1 or 2 (reads p[0 .. 8s)). */
static inline __m256 max_ld8(const float *p, int s) {
    if (s == 1) return _mm256_loadu_ps(p);
    const __m256 e = _mm256_shuffle_ps(_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8), 0x88);
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), 0xD8));
}

/* Outputs [o, o + 8 * nb) (nb = 1 or 2 blocks of 8) of an NCHW max row at
 * W-stride s (1 or 2), dilation 1, every tap inside the row: the
 * candidates in the order of nchw_max_row (ih, then kw) with the same test
 * (v > m or v is NaN), max and position (int32: plane < 2^31) held in
 * registers; two blocks interleave their dependency chains. */
static inline void max_nchw_block8(const float *in, float *out, int64_t *idx, int64_t W,
                                   int64_t kW, int s, int64_t pad, int64_t h0, int64_t h1,
                                   int64_t dH, int64_t o, int nb) {
    const __m256i lane = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                            _mm256_set1_epi32(s));
    const __m256i step = _mm256_set1_epi32(8 * s);
    const int64_t c0 = o * s - pad; /* first tap column of output o */
    __m256 m[2];
    __m256i ix[2];
    for (int b = 0; b < 2; b++) {
        m[b] = _mm256_set1_ps(-INFINITY);
        ix[b] = _mm256_add_epi32(_mm256_set1_epi32((int32_t)(h0 * W + c0 + 8 * s * b)), lane);
    }
    for (int64_t ih = h0; ih < h1; ih += dH)
        for (int64_t kw = 0; kw < kW; kw++) {
            __m256i pos = _mm256_add_epi32(_mm256_set1_epi32((int32_t)(ih * W + c0 + kw)), lane);
            for (int b = 0; b < nb; b++, pos = _mm256_add_epi32(pos, step)) {
                const __m256 v = max_ld8(in + ih * W + c0 + kw + 8 * s * b, s);
                const __m256 t = _mm256_or_ps(_mm256_cmp_ps(v, m[b], _CMP_GT_OQ),
                                              _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
                m[b] = _mm256_blendv_ps(m[b], v, t);
                ix[b] = _mm256_castps_si256(
                    _mm256_blendv_ps(_mm256_castsi256_ps(ix[b]), _mm256_castsi256_ps(pos), t));
            }
        }
    for (int b = 0; b < nb; b++) {
        _mm256_storeu_ps(out + o + 8 * b, m[b]);
        _mm256_storeu_si256((__m256i *)(void *)(idx + o + 8 * b),
                            _mm256_cvtepi32_epi64(_mm256_castsi256_si128(ix[b])));
        _mm256_storeu_si256((__m256i *)(void *)(idx + o + 8 * b + 4),
                            _mm256_cvtepi32_epi64(_mm256_extracti128_si256(ix[b], 1)));
    }
}

/* One output o of an NCHW max row at W-dilation 1, as nchw_max_row orders
 * its candidates (ih, then the valid columns). */
static inline void max_nchw_one(const float *in, float *out, int64_t *idx, int64_t W, int64_t kW,
                                int64_t s, int64_t pad, int64_t h0, int64_t h1, int64_t dH,
                                int64_t o) {
    int64_t w0, w1;
    max_window(o, W, kW, s, pad, 1, &w0, &w1);
    out[o] = -INFINITY;
    idx[o] = h0 * W + w0;
    for (int64_t ih = h0; ih < h1; ih += dH)
        for (int64_t c = w0; c < w1; c++) {
            const float v = in[ih * W + c];
            const bool t = v > out[o] || v != v;
            out[o] = t ? v : out[o];
            idx[o] = t ? ih * W + c : idx[o];
        }
}

/* One NCHW max output row by register blocks where they apply (W-stride 1
 * or 2, W-dilation 1, plane < 2^31): outputs [vlo, vhi) whose 8 * s reads
 * stay inside the row; false when the row is left to the general loops. */
static bool max_nchw_row_blocks(const pool_job *j, const float *in, float *out, int64_t *idx,
                                int64_t h0, int64_t h1) {
    const mft_pool2d_params *p = j->p;
    const int64_t s = p->stride[1], pad = p->padding[1], kW = p->kernel[1], W = j->W;
    if ((s != 1 && s != 2) || p->dilation[1] != 1 || j->H * W > INT32_MAX || h0 >= h1)
        return false;
    /* o*s - pad >= 0, and the last read (o+7)*s + kW - 1 - pad + (s - 1) <= W - 1 */
    const int64_t vlo = (pad + s - 1) / s;
    const int64_t lim = W - kW + pad - (s - 1) - 7 * s; /* o*s <= lim */
    if (lim < 0) return false;
    int64_t vhi = lim / s + 1; /* first o of the last block + 1 */
    if (vhi + 7 > j->OW) vhi = j->OW - 7;
    if (vhi <= vlo) return false;
    for (int64_t o = 0; o < vlo; o++)
        max_nchw_one(in, out, idx, W, kW, s, pad, h0, h1, p->dilation[0], o);
    int64_t o = vlo;
    const int64_t dH = p->dilation[0];
    for (; o + 16 <= vhi + 7; o += 16)
        max_nchw_block8(in, out, idx, W, kW, (int)s, pad, h0, h1, dH, o, 2);
    for (; o + 8 <= vhi + 7; o += 8)
        max_nchw_block8(in, out, idx, W, kW, (int)s, pad, h0, h1, dH, o, 1);
    if (o < vhi + 7) max_nchw_block8(in, out, idx, W, kW, (int)s, pad, h0, h1, dH, vhi - 1, 1);
    for (o = vhi + 7; o < j->OW; o++)
        max_nchw_one(in, out, idx, W, kW, s, pad, h0, h1, p->dilation[0], o);
    return true;
}
#endif

static void max_nchw_range(void *ctx, int64_t begin, int64_t end) {
    const pool_job *j = ctx;
    const mft_pool2d_params *p = j->p;
    const int64_t sW = p->stride[1], pW = p->padding[1], dW = p->dilation[1];
    for (int64_t r = begin; r < end; r++) {
        const int64_t plane = r / j->OH, oh = r % j->OH;
        const float *in = j->x + plane * j->H * j->W;
        float *out = j->y + r * j->OW;
        int64_t *idx = j->yi + r * j->OW;
        int64_t h0, h1;
        max_window(oh, j->H, p->kernel[0], p->stride[0], p->padding[0], p->dilation[0], &h0, &h1);
#if POOL_HAVE_AVX2
        if (max_nchw_row_blocks(j, in, out, idx, h0, h1)) {
            if (j->relu) relu_clamp_f32(out, idx, j->OW);
            continue;
        }
#endif
        for (int64_t ow = 0; ow < j->OW; ow++) {
            int64_t w0, w1;
            max_window(ow, j->W, p->kernel[1], sW, pW, dW, &w0, &w1);
            out[ow] = -INFINITY;
            idx[ow] = h0 * j->W + w0;
        }
        for (int64_t ih = h0; ih < h1; ih += p->dilation[0]) {
            if (sW == 1)
                nchw_max_row(in + ih * j->W, out, idx, j->W, j->OW, p->kernel[1], 1, pW, dW, ih);
            else
                nchw_max_row(in + ih * j->W, out, idx, j->W, j->OW, p->kernel[1], sW, pW, dW, ih);
        }
        if (j->relu) relu_clamp_f32(out, idx, j->OW);
    }
}

static void max_nchw_run(const mft_kernel_args *a, bool relu) {
    pool_job j = pool_job_of(a, true);
    j.relu = relu;
    const int64_t work = j.OW * j.p->kernel[0] * j.p->kernel[1];
    mft__parallel_for(0, j.N * j.C * j.OH, pool_grain(work), max_nchw_range, &j);
}
void mft__pool_max_pool2d_nchw(const mft_kernel_args *a) { max_nchw_run(a, false); }
void mft__pool_relu_max_pool2d_nchw(const mft_kernel_args *a) { max_nchw_run(a, true); }

/* ---------------------------------------------------------------- rank-generic forward
 * x (N,C,D,H,W) packed -> y (N,C,OD,OH,OW) packed and the indices; one output
 * row (n, c, od, oh) per work item. */
static void pm_max_nchw_range(void *ctx, int64_t begin, int64_t end) {
    const pm_job *j = ctx;
    const pm_geom *g = &j->g;
    const int64_t D = g->in[0], H = g->in[1], W = g->in[2];
    const int64_t OD = g->out[0], OH = g->out[1], OW = g->out[2];
    /* row r = ((plane * OD) + od) * OH + oh */
    PM_FOR_ROWS(r, begin, end, plane, od, OD, oh, OH) {
        const float *in = j->x + plane * D * H * W;
        float *out = j->y + r * OW;
        int64_t d0, d1, ed, h0, h1, eh;
        pm_win(g, 0, od, &d0, &d1, &ed);
        pm_win(g, 1, oh, &h0, &h1, &eh);
        for (int64_t ow = 0; ow < OW; ow++) {
            int64_t w0, w1, ew;
            pm_win(g, 2, ow, &w0, &w1, &ew);
            float m = -INFINITY;
            int64_t mi = (d0 * H + h0) * W + w0;
            for (int64_t id = d0; id < d1; id += g->d[0])
                for (int64_t ih = h0; ih < h1; ih += g->d[1]) {
                    const int64_t base = (id * H + ih) * W;
                    for (int64_t iw = w0; iw < w1; iw += g->d[2]) {
                        float v = in[base + iw];
                        if (v > m || v != v) {
                            m = v;
                            mi = base + iw;
                        }
                    }
                }
            out[ow] = m;
            j->yi[r * OW + ow] = mi;
        }
    }
}

static void pm_max_nchw(const pm_geom *g, const mft_kernel_args *a) {
    pm_job j = pm_job_of(g, a);
    pm_fwd_rows(g, &j, false, pm_max_nchw_range);
}

PM_FWD_ENTRY(mft__pool_max_pool3d_nchw, PM_MAX, pm_geom_p3(&g, a->params), pm_max_nchw)
PM_FWD_ENTRY(mft__pool_adaptive_max_nchw, PM_ADAPT, (void)0, pm_max_nchw)

/* ---------------------------------------------------------------- backward
 * (max_pool2d_backward, max_pool3d_backward: grad_out and the forward's
 * indices; params: the 2-D forward's windows, or NULL) */
/* NCHW max backward: grad_out, indices (N,C,OD,OH,OW) packed -> grad_x
 * (N,C,D,H,W) packed; one (n, c) plane per work item (zero, then scatter). */
static void pm_maxbwd_nchw_range(void *ctx, int64_t begin, int64_t end) {
    const pm_job *j = ctx;
    const int64_t P = j->g.in[0] * j->g.in[1] * j->g.in[2];
    const int64_t OP = j->g.out[0] * j->g.out[1] * j->g.out[2];
    for (int64_t pl = begin; pl < end; pl++) {
        float *gx = j->y + pl * P;
        const float *go = j->x + pl * OP;
        const int64_t *ind = j->ind + pl * OP;
        memset(gx, 0, (size_t)P * sizeof *gx);
        for (int64_t o = 0; o < OP; o++) {
            const int64_t i = ind[o];
            if ((uint64_t)i < (uint64_t)P) gx[i] += go[o];
        }
    }
}

#if POOL_HAVE_Z16
/* NCHW max backward over known 2x2 / stride 2 windows (no padding or
 * dilation): each grad_x pixel lies in at most one window, so grad_x is
 * written once, two rows per output row: for 16 outputs of a row, the
 * indices (saturated to int32) are compared with the four positions of each
 * window, and the matched gradients (0.0f + g, else 0, as the scatter sums
 * from zero) are interleaved into the two rows' 32 pixels. Columns and rows
 * past the last window are zero. An index outside its window matches
 * nothing (documented for mft_max_pool2d_backward_windows). One work item:
 * a plane. */
static void pm_maxbwd_nchw2x2_range(void *ctx, int64_t begin, int64_t end) {
    const pm_job *j = ctx;
    const int64_t H = j->g.in[1], W = j->g.in[2], OH = j->g.out[1], OW = j->g.out[2];
    const __m512i lane2 = _mm512_slli_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 1);
    const __m512i ilo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i ihi =
        _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    const __m512 zero = _mm512_setzero_ps();
    for (int64_t pl = begin; pl < end; pl++) {
        float *gx = j->y + pl * H * W;
        const float *go = j->x + pl * OH * OW;
        const int64_t *ind = j->ind + pl * OH * OW;
        for (int64_t oh = 0; oh < OH; oh++) {
            for (int dy = 0; dy < 2; dy++) {
                float *row = gx + (2 * oh + dy) * W;
                for (int64_t ow = 0; ow < OW; ow += 16) {
                    const int64_t nv = OW - ow < 16 ? OW - ow : 16;
                    const __mmask16 km = pm_mask16(nv);
                    const __m512i ix = pm_idx16(ind + oh * OW + ow, km);
                    const __m512 g = _mm512_maskz_loadu_ps(km, go + oh * OW + ow);
                    const __m512i c0 =
                        _mm512_add_epi32(_mm512_set1_epi32((int32_t)((2 * oh + dy) * W + 2 * ow)),
                                         lane2);
                    const __m512i c1 = _mm512_add_epi32(c0, _mm512_set1_epi32(1));
                    const __m512 v0 =
                        _mm512_add_ps(zero, _mm512_maskz_mov_ps(
                                                _mm512_mask_cmpeq_epi32_mask(km, ix, c0), g));
                    const __m512 v1 =
                        _mm512_add_ps(zero, _mm512_maskz_mov_ps(
                                                _mm512_mask_cmpeq_epi32_mask(km, ix, c1), g));
                    const __m512 a = _mm512_permutex2var_ps(v0, ilo, v1);
                    const __m512 b = _mm512_permutex2var_ps(v0, ihi, v1);
                    const int64_t n2 = 2 * nv; /* pixels written: 2 per output */
                    _mm512_mask_storeu_ps(row + 2 * ow, pm_mask16(n2), a);
                    if (n2 > 16) _mm512_mask_storeu_ps(row + 2 * ow + 16, pm_mask16(n2 - 16), b);
                }
                for (int64_t iw = 2 * OW; iw < W; iw++) row[iw] = 0.0f;
            }
        }
        if (2 * OH < H) memset(gx + 2 * OH * W, 0, (size_t)((H - 2 * OH) * W) * sizeof *gx);
    }
}
#endif

void mft__pool_max_backward_nchw(const mft_kernel_args *a) {
    pm_geom g;
    pm_geom_init(&g, PM_MAX, a->outputs[0], a->inputs[0]);
    pm_job j = pm_job_of(&g, a);
    const int64_t work = g.in[0] * g.in[1] * g.in[2] + g.out[0] * g.out[1] * g.out[2];
#if POOL_HAVE_Z16
    const mft_pool2d_params *p = a->params;
    if (p && a->inputs[0]->ndim == 4 && p->kernel[0] == 2 && p->kernel[1] == 2 &&
        p->stride[0] == 2 && p->stride[1] == 2 && p->padding[0] == 0 && p->padding[1] == 0 &&
        p->dilation[0] == 1 && p->dilation[1] == 1 && 2 * g.out[1] <= g.in[1] &&
        2 * g.out[2] <= g.in[2] && g.in[1] * g.in[2] < INT32_MAX) {
        mft__parallel_for(0, g.N * g.C, pool_grain(work), pm_maxbwd_nchw2x2_range, &j);
        return;
    }
#endif
    mft__parallel_for(0, g.N * g.C, pool_grain(work), pm_maxbwd_nchw_range, &j);
}
