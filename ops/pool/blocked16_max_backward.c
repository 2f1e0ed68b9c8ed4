/* ops/pool/blocked16_max_backward.c — the nChw16c F32 max_pool2d backward
 * (grad_out and I64 nChw16c indices to grad_x): windows that tile the input
 * take the tiled backward (blocked16_tiled.c); other nonempty windows gather
 * per grad_x row, through the row rings of Note [nChw16c row rings]
 * (blocked16_internal.h) where they fit, else by the general loop; without
 * the windows each plane scatters. */
#include "blocked16_internal.h"

/* ---------------------------------------------------------------- max backward
 * With the forward's windows (mft_max_pool2d_backward_windows, the tape) and
 * none of them empty: gathered per grad_x row, each element the sum, over
 * the outputs whose window span holds it (ascending), of grad_out where the
 * index names it. Else each plane scatters grad_out into its zeroed grad_x
 * plane, outputs ascending; indices outside [0, H*W) (relu's -1) are
 * skipped. The same sums in the same order either way. */
static void b16_max_bwd_planes(void *ctx, int64_t begin, int64_t end) {
    const b16_job *j = ctx;
    const int64_t HW = j->H * j->W, OHW = j->OH * j->OW;
    for (int64_t q = begin; q < end; q++) {
        const int64_t nl = j->C - (q % j->C1) * 16 < 16 ? j->C - (q % j->C1) * 16 : 16;
        float *gx = j->y + q * HW * 16;
        const float *go = j->x + q * OHW * 16;
        const int64_t *ind = j->ind + q * OHW * 16;
        memset(gx, 0, (size_t)(HW * 16) * sizeof(float));
        for (int64_t o = 0; o < OHW; o++)
            for (int64_t l = 0; l < nl; l++) {
                const int64_t i = ind[o * 16 + l];
                if (i >= 0 && i < HW) gx[i * 16 + l] += go[o * 16 + l];
            }
    }
}

/* Outputs [*o0, *o1) along a dim whose max window span [o*s - p, o*s - p +
 * (k-1)*d] holds input i. */
static inline void max_span_inv(int64_t i, int64_t out, int64_t k, int64_t s, int64_t pad,
                                int64_t d, int64_t *o0, int64_t *o1) {
    int64_t a = pool_div_floor(i + pad - (k - 1) * d + s - 1, s);
    int64_t b = pool_div_floor(i + pad, s) + 1;
    *o0 = a < 0 ? 0 : a;
    *o1 = b > out ? out : b;
    if (*o1 < *o0) *o1 = *o0;
}

static void b16_max_bwd_rows(void *ctx, int64_t begin, int64_t end) {
    const b16_job *j = ctx;
    const mft_pool2d_params *p = j->p;
    const int64_t H = j->H, W = j->W, OH = j->OH, OW = j->OW;
    int64_t tw0[PM_TAB], tw1[PM_TAB];
    for (int64_t r = begin; r < end; r++) {
        const int64_t n = r / H / j->C1, cb = r / H % j->C1, ih = r % H;
        int64_t oh0, oh1;
        max_span_inv(ih, OH, p->kernel[0], p->stride[0], p->padding[0], p->dilation[0], &oh0, &oh1);
        for (int64_t c0 = 0; c0 < W; c0 += PM_TAB) {
            const int64_t nw = W - c0 < PM_TAB ? W - c0 : PM_TAB;
            if (r == begin || W > PM_TAB)
                for (int64_t t = 0; t < nw; t++)
                    max_span_inv(c0 + t, OW, p->kernel[1], p->stride[1], p->padding[1],
                                 p->dilation[1], &tw0[t], &tw1[t]);
            {
                const int64_t q = n * j->C1 + cb;
                const bm keep = blk_keep(j->C, cb);
                const float *go = j->x + q * OH * OW * 16;
                const int64_t *ind = j->ind + q * OH * OW * 16;
                float *gx = j->y + ((q * H + ih) * W + c0) * 16;
                for (int64_t t = 0; t < nw; t++) {
                    const int64_t i = ih * W + c0 + t;
                    bv s = bv_set1(0.0f);
                    for (int64_t oh = oh0; oh < oh1; oh++)
                        for (int64_t ow = tw0[t]; ow < tw1[t]; ow++)
                            s = bv_add_eq(s, go + (oh * OW + ow) * 16, ind + (oh * OW + ow) * 16,
                                          i);
                    bv_st(gx + t * 16, bv_keep(keep, s));
                }
            }
        }
    }
}

#if POOL_HAVE_Z16
/* One max grad_x row: element iw sums grad_out (rows gr, columns
 * colg[iw*nw + b]) in the lanes whose index (rows ix, columns
 * coli[iw*nw + b]) is its position, rows a < nh. */
static inline __attribute__((always_inline)) void
max_ring_row(float *gx, int64_t W, int64_t pos0, const int32_t *const *ix, const float *const *gr,
             const int32_t *coli, const int32_t *colg, int64_t nh, int64_t nw, bm keep) {
    for (int64_t iw = 0; iw < W; iw++) {
        const __m512i pos = _mm512_set1_epi32((int32_t)(pos0 + iw));
        __m512 s = _mm512_setzero_ps();
        for (int64_t a = 0; a < nh; a++)
            for (int64_t b = 0; b < nw; b++) {
                const __mmask16 m = _mm512_cmpeq_epi32_mask(
                    _mm512_load_si512((const void *)(ix[a] + (int64_t)coli[iw * nw + b] * 16)),
                    pos);
                s = _mm512_mask_add_ps(s, m, s,
                                       _mm512_loadu_ps(gr[a] + (int64_t)colg[iw * nw + b] * 16));
            }
        bv_st(gx + iw * 16, bv_keep(keep, s));
    }
}

/* The max backward of Note [nChw16c row rings] (rows as b16_max_bwd_rows';
 * W <= PM_TAB). A ring row: OW + 1 vectors of int32 indices (the last: the
 * dummy column, -1); grad_out is read in place, at the element's first
 * column (or the row's last, for an element past every window) for a dummy
 * term, whose mask is empty. Each row runs its own
 * number of output rows (no dummy rows). */
static void b16_max_bwd_ring(void *ctx, int64_t begin, int64_t end) {
    const b16_rjob *rj = ctx;
    const b16_job *j = rj->j;
    const mft_pool2d_params *p = j->p;
    const int64_t H = j->H, W = j->W, OH = j->OH, OW = j->OW, nw = rj->nw;
    b16_ring g = {NULL, 0, 0, {0}};
    int32_t *coli = mft__alloc((size_t)(2 * W * nw) * sizeof(int32_t), 64);
    if (!coli || !mft__pool_b16_ring_init(&g, rj->nh, (size_t)((OW + 1) * 16) * sizeof(int32_t))) {
        mft__free(coli);
        b16_max_bwd_rows((void *)j, begin, end); /* out of memory: the same sums */
        return;
    }
    int32_t *colg = coli + W * nw;
    {
        int64_t tw0[PM_TAB], tw1[PM_TAB];
        for (int64_t iw = 0; iw < W; iw++)
            max_span_inv(iw, OW, p->kernel[1], p->stride[1], p->padding[1], p->dilation[1],
                         &tw0[iw], &tw1[iw]);
        mft__pool_b16_ring_cols(tw0, tw1, W, OW, nw, coli);
        for (int64_t iw = 0; iw < W; iw++)
            for (int64_t b = 0; b < nw; b++)
                colg[iw * nw + b] = coli[iw * nw + b] < OW
                                        ? coli[iw * nw + b]
                                        : (int32_t)(tw0[iw] < OW ? tw0[iw] : OW - 1);
    }
    for (int64_t r = begin; r < end; r++) {
        const int64_t q = r / H, ih = r % H;
        const bm keep = blk_keep(j->C, q % j->C1);
        int64_t oh0, oh1;
        max_span_inv(ih, OH, p->kernel[0], p->stride[0], p->padding[0], p->dilation[0], &oh0, &oh1);
        const int32_t *ix[B16_RING];
        const float *gr[B16_RING];
        const int64_t rows = oh1 - oh0;
        for (int64_t a = 0; a < rows; a++) {
            const int64_t orow = q * OH + oh0 + a;
            bool fill;
            int32_t *d = ring_row(&g, orow, &fill);
            if (fill) {
                for (int64_t ow = 0; ow < OW; ow++)
                    _mm512_store_si512((void *)(d + ow * 16),
                                       pm_idx16(j->ind + (orow * OW + ow) * 16, 0xFFFF));
                _mm512_store_si512((void *)(d + OW * 16), _mm512_set1_epi32(-1));
            }
            ix[a] = d;
            gr[a] = j->x + orow * OW * 16;
        }
        float *gx = j->y + r * W * 16;
        if (nw == 2 && rows == 1)
            max_ring_row(gx, W, ih * W, ix, gr, coli, colg, 1, 2, keep);
        else if (nw == 2 && rows == 2)
            max_ring_row(gx, W, ih * W, ix, gr, coli, colg, 2, 2, keep);
        else if (nw == 3 && rows == 3)
            max_ring_row(gx, W, ih * W, ix, gr, coli, colg, 3, 3, keep);
        else
            max_ring_row(gx, W, ih * W, ix, gr, coli, colg, rows, nw, keep);
    }
    mft__free(g.buf);
    mft__free(coli);
}
#endif

/* every max window along both dims holds an input position */
static bool max_windows_nonempty(const b16_job *j) {
    const mft_pool2d_params *p = j->p;
    for (int d = 0; d < 2; d++) {
        const int64_t out = d ? j->OW : j->OH, in = d ? j->W : j->H;
        for (int64_t o = 0; o < out; o++) {
            int64_t i0, i1;
            max_window(o, in, p->kernel[d], p->stride[d], p->padding[d], p->dilation[d], &i0, &i1);
            if (i0 >= i1) return false;
        }
    }
    return true;
}

void mft__pool_max_backward_nchw16c(const mft_kernel_args *a) {
    b16_job j = mft__pool_b16_job_of(a, false);
    j.ind = (const int64_t *)(const void *)mft__tensor_ptr(a->inputs[1]);
    int64_t kh, kw;
    if (j.p && max_windows_nonempty(&j) && mft__pool_b16_tiles(&j, false, &kh, &kw)) {
        mft__pool_b16_tiled(&j, NULL, kh, kw);
        return;
    }
    if (j.p && max_windows_nonempty(&j)) {
        const int64_t terms = (j.p->kernel[0] * j.p->dilation[0] / j.p->stride[0] + 1) *
                              (j.p->kernel[1] * j.p->dilation[1] / j.p->stride[1] + 1);
#if POOL_HAVE_Z16
        /* Note [nChw16c row rings]: the most output rows / columns one input
         * row / column reads */
        b16_rjob rj = {&j, false, NULL, 0, 0};
        for (int d = 0; d < 2; d++)
            for (int64_t i = 0; i < (d ? j.W : j.H); i++) {
                int64_t o0, o1;
                max_span_inv(i, d ? j.OW : j.OH, j.p->kernel[d], j.p->stride[d], j.p->padding[d],
                             j.p->dilation[d], &o0, &o1);
                int64_t *most = d ? &rj.nw : &rj.nh;
                if (o1 - o0 > *most) *most = o1 - o0;
            }
        if (rj.nh >= 1 && rj.nh <= B16_RING && rj.nw >= 1 && rj.nw <= B16_COLS && j.W <= PM_TAB &&
            j.H * j.W < INT32_MAX) {
            mft__parallel_for(0, j.N * j.C1 * j.H, pool_grain(j.W * terms * 16), b16_max_bwd_ring,
                              &rj);
            return;
        }
#endif
        mft__parallel_for(0, j.N * j.C1 * j.H, pool_grain(j.W * terms * 16), b16_max_bwd_rows, &j);
        return;
    }
    mft__parallel_for(0, j.N * j.C1, pool_grain((j.H * j.W + j.OH * j.OW) * 16), b16_max_bwd_planes,
                      &j);
}
