/* ops/pool/max_nhwc.c — max pooling on NHWC / NDHWC (CHANNELS_LAST) F32
 * buffers, forward and backward, vectorised over the channels of a pixel:
 * the 2-D forward and relu_max_pool2d (per output pixel: the AVX-512 kernels
 * of kernels_avx512.h, else 32-channel vector blocks, with the next rows
 * prefetched), the rank-generic forward (3-D, adaptive max; the same pixel
 * loop), and the backward: the indices scattered per (image, channel block),
 * and, when the 2-D forward's windows are known (the tape passes them),
 * grad_x written once where windows do not overlap, or on AVX-512 builds
 * gathered per pixel or matched window by window. */
#include "pool_internal.h"

/* Channels per work item of the NHWC max backward. */
#define PM_CBLOCK 64
/* Most window positions the AVX-512 windowed max backward lists per output. */
#define PM_WIN_MAX 64
/* How many outputs ahead it prefetches grad_out and the indices. */
#define PM_WIN_AHEAD 8

/* ---------------------------------------------------------------- forward
 * Per output pixel: the window's input pixels are contiguous C-rows;
 * max/add over a C-row is a unit-stride loop (vectorised). */

/* The max of one output pixel over its window (depths [d0, d1) step dd, rows
 * [h0, h1) step dh, columns [w0, w1) step dw) of an image of C channels per
 * pixel, H rows and W columns: out gets the maxima, idx the positions
 * (d*H + h)*W + w; a value replaces the running max (-inf at first) when it
 * is greater or NaN. v8: blocks of 32 channels in registers first, positions
 * as int32 lanes blended with the float compare masks (the caller checked
 * that they fit); the remaining channels one at a time. */
static inline void max_px(const float *in, int64_t H, int64_t W, int64_t C, int64_t d0,
                          int64_t d1, int64_t dd, int64_t h0, int64_t h1, int64_t dh, int64_t w0,
                          int64_t w1, int64_t dw, int64_t first, float *out, int64_t *idx,
                          bool v8) {
    int64_t cd = 0;
#if POOL_HAVE_V8
    if (v8)
        for (; cd + 32 <= C; cd += 32) {
            pool_v8 m[4];
            pool_i8 ix[4];
            for (int k = 0; k < 4; k++) {
                m[k] = (pool_v8){0, 0, 0, 0, 0, 0, 0, 0} - INFINITY;
                ix[k] = (pool_i8){0, 0, 0, 0, 0, 0, 0, 0} + (int32_t)first;
            }
            for (int64_t id = d0; id < d1; id += dd)
                for (int64_t ih = h0; ih < h1; ih += dh)
                    for (int64_t iw = w0; iw < w1; iw += dw) {
                        const int64_t pos = (id * H + ih) * W + iw;
                        const float *row = in + pos * C + cd;
                        const pool_i8 pv = (pool_i8){0, 0, 0, 0, 0, 0, 0, 0} + (int32_t)pos;
                        for (int k = 0; k < 4; k++) {
                            pool_v8 v;
                            memcpy(&v, row + 8 * k, sizeof v);
                            const pool_i8 t = (v > m[k]) | (v != v);
                            m[k] = (pool_v8)(((pool_i8)v & t) | ((pool_i8)m[k] & ~t));
                            ix[k] = (pv & t) | (ix[k] & ~t);
                        }
                    }
            for (int k = 0; k < 4; k++) {
                memcpy(out + cd + 8 * k, &m[k], sizeof m[k]);
                for (int l = 0; l < 8; l++) idx[cd + 8 * k + l] = ix[k][l];
            }
        }
#else
    (void)v8;
#endif
    if (cd == C) return;
    for (int64_t c = cd; c < C; c++) {
        out[c] = -INFINITY;
        idx[c] = first;
    }
    for (int64_t id = d0; id < d1; id += dd)
        for (int64_t ih = h0; ih < h1; ih += dh)
            for (int64_t iw = w0; iw < w1; iw += dw) {
                const int64_t pos = (id * H + ih) * W + iw;
                const float *row = in + pos * C;
                for (int64_t c = cd; c < C; c++) {
                    float v = row[c];
                    bool t = v > out[c] || v != v;
                    out[c] = t ? v : out[c];
                    idx[c] = t ? pos : idx[c];
                }
            }
}

/* 2-D: one output row (n, oh) per work item. */
static void max_nhwc_range(void *ctx, int64_t begin, int64_t end) {
    const pool_job *j = ctx;
    const mft_pool2d_params *p = j->p;
    const int64_t C = j->C;
    /* every position, and the start of an empty window, fits int32 */
    const bool pos32 =
        (double)(j->H + p->dilation[0] + 1) * (double)(j->W + p->dilation[1] + 1) <=
        (double)INT32_MAX;
    (void)pos32;
    for (int64_t r = begin; r < end; r++) {
        const int64_t n = r / j->OH, oh = r % j->OH;
        const float *in = j->x + n * j->H * j->W * C;
        int64_t h0, h1, nh0, nh1, ra, rb;
        max_window(oh, j->H, p->kernel[0], p->stride[0], p->padding[0], p->dilation[0], &h0, &h1);
        max_window(oh + 1, j->H, p->kernel[0], p->stride[0], p->padding[0], p->dilation[0], &nh0,
                   &nh1);
        pool_next_rows(oh, j->OH, h1, nh0, nh1, p->dilation[0], &ra, &rb);
        int64_t pw1 = 0; /* the previous window's column end */
        for (int64_t ow = 0; ow < j->OW; ow++) {
            float *out = j->y + (r * j->OW + ow) * C;
            int64_t *idx = j->yi + (r * j->OW + ow) * C;
            int64_t w0, w1;
            max_window(ow, j->W, p->kernel[1], p->stride[1], p->padding[1], p->dilation[1], &w0,
                       &w1);
            pool_prefetch(in, j->W, C, ra, rb, p->dilation[0], w0 > pw1 ? w0 : pw1, w1);
            pw1 = w1;
            const int64_t first = h0 * j->W + w0;
#if POOL_HAVE_Z16
            if (pos32) {
                const pz_win g = {h0, h1, p->dilation[0], w0, w1, p->dilation[1], j->W, C};
                pz_max_pixel(in, &g, (int32_t)first, out, idx);
                continue;
            }
#endif
            max_px(in, j->H, j->W, C, 0, 1, 1, h0, h1, p->dilation[0], w0, w1, p->dilation[1],
                   first, out, idx, pos32);
        }
        if (j->relu) relu_clamp_f32(j->y + r * j->OW * C, j->yi + r * j->OW * C, j->OW * C);
    }
}

static void max_nhwc_run(const mft_kernel_args *a, bool relu) {
    pool_job j = pool_job_of(a, true);
    j.relu = relu;
    const int64_t work = j.OW * j.C * j.p->kernel[0] * j.p->kernel[1];
    mft__parallel_for(0, j.N * j.OH, pool_grain(work), max_nhwc_range, &j);
}
void mft__pool_max_pool2d_nhwc(const mft_kernel_args *a) { max_nhwc_run(a, false); }
void mft__pool_relu_max_pool2d_nhwc(const mft_kernel_args *a) { max_nhwc_run(a, true); }

/* Rank-generic: x (N,D,H,W,C) packed -> y (N,OD,OH,OW,C) packed and the
 * indices; one output row (n, od, oh) per work item. */
static void pm_max_nhwc_range(void *ctx, int64_t begin, int64_t end) {
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
            int64_t *idx = j->yi + (r * OW + ow) * C;
            const int64_t first = (d0 * H + h0) * W + w0;
            /* vector blocks where every position fits int32 */
            const bool v8 = PM_HAVE_V8 && (double)(D + g->d[0] + 1) * (double)(H + g->d[1] + 1) *
                                                  (double)(W + g->d[2] + 1) <=
                                              (double)INT32_MAX;
            max_px(in, H, W, C, d0, d1, g->d[0], h0, h1, g->d[1], w0, w1, g->d[2], first, out,
                   idx, v8);
        }
    }
}

static void pm_max_nhwc(const pm_geom *g, const mft_kernel_args *a) {
    pm_job j = pm_job_of(g, a);
    pm_fwd_rows(g, &j, true, pm_max_nhwc_range);
}

PM_FWD_ENTRY(mft__pool_max_pool3d_nhwc, PM_MAX, pm_geom_p3(&g, a->params), pm_max_nhwc)
PM_FWD_ENTRY(mft__pool_adaptive_max_nhwc, PM_ADAPT, (void)0, pm_max_nhwc)

/* ---------------------------------------------------------------- backward
 * (max_pool2d_backward, max_pool3d_backward: grad_out and the forward's
 * indices; params: the 2-D forward's windows, or NULL) */
/* NHWC max backward: grad_out, indices (N,OD,OH,OW,C) packed -> grad_x
 * (N,D,H,W,C) packed; one (n, block of PM_CBLOCK channels) per work item:
 * zero the block of the image, then walk the output pixels. */
static void pm_maxbwd_nhwc_range(void *ctx, int64_t begin, int64_t end) {
    const pm_job *j = ctx;
    const int64_t C = j->g.C;
    const int64_t P = j->g.in[0] * j->g.in[1] * j->g.in[2];
    const int64_t OP = j->g.out[0] * j->g.out[1] * j->g.out[2];
    for (int64_t it = begin; it < end; it++) {
        const int64_t n = it / j->cb, c0 = (it % j->cb) * PM_CBLOCK;
        const int64_t c1 = c0 + PM_CBLOCK < C ? c0 + PM_CBLOCK : C;
        float *gx = j->y + n * P * C;
        const float *go = j->x + n * OP * C;
        const int64_t *ind = j->ind + n * OP * C;
        if (c0 == 0 && c1 == C) {
            memset(gx, 0, (size_t)(P * C) * sizeof *gx);
        } else {
            for (int64_t p = 0; p < P; p++)
                for (int64_t c = c0; c < c1; c++) gx[p * C + c] = 0.0f;
        }
        for (int64_t o = 0; o < OP; o++) {
            const float *g = go + o * C;
            const int64_t *ii = ind + o * C;
            for (int64_t c = c0; c < c1; c++) {
                const int64_t i = ii[c];
                if ((uint64_t)i < (uint64_t)P) gx[i * C + c] += g[c];
            }
        }
    }
}

/* NHWC max backward when the forward's windows are known
 * (mft_max_pool2d_backward_windows; the tape passes them) and do not
 * overlap (stride >= dilation * (kernel - 1) + 1, the common 2x2 / stride
 * 2): each grad_x pixel p lies in at most one window o, so grad_x is written
 * once, (indices[o][c] == p) ? grad_out[o][c] : 0 for every channel c at
 * once, with no zeroing pass, no read-modify-write and no branch on the
 * indices (relu_max_pool2d's -1 come at random). 0.0f + the term gives the
 * scatter's sum bit for bit (0 + -0 is +0). An index outside its own window
 * matches nothing (the scatter would still add it). One work item: an
 * input row (n, ih). Vectors run over the channels, so it needs some
 * (C >= 16). Overlapping windows gather in pm_maxbwd_gather_range (an
 * element-wise loop like this one over up to four windows per pixel lost to
 * the scatter there: 0.61-0.70 ms against 0.43-0.49, 8x64x56x56, 1 thread).
 * Measured and kept out: NCHW planes, where an element-wise loop lost to the
 * scatter. */
typedef struct pm_dense_job {
    const pm_job *j;
    const mft_pool2d_params *p;
} pm_dense_job;

/* The window along one dim holding input position i (windows do not
 * overlap: only o = (i + pad) / s can), or -1. */
static inline int64_t pm_dense_owner(int64_t i, int64_t k, int64_t s, int64_t pad, int64_t d,
                                     int64_t out) {
    const int64_t t = i + pad; /* >= 0 */
    const int64_t o = t / s, r = t - o * s;
    return o < out && r % d == 0 && r / d < k ? o : -1;
}

static void pm_maxbwd_dense_range(void *ctx, int64_t begin, int64_t end) {
    const pm_dense_job *dj = ctx;
    const pm_job *j = dj->j;
    const mft_pool2d_params *p = dj->p;
    const int64_t C = j->g.C, H = j->g.in[1], W = j->g.in[2], OH = j->g.out[1],
                  OW = j->g.out[2];
    for (int64_t r = begin; r < end; r++) {
        const int64_t n = r / H, ih = r % H;
        float *gx = j->y + r * W * C;
        const int64_t oh = pm_dense_owner(ih, p->kernel[0], p->stride[0], p->padding[0],
                                          p->dilation[0], OH);
        for (int64_t iw = 0; iw < W; iw++, gx += C) {
            const int64_t ow = oh < 0 ? -1
                                      : pm_dense_owner(iw, p->kernel[1], p->stride[1],
                                                       p->padding[1], p->dilation[1], OW);
            if (ow < 0) {
                memset(gx, 0, (size_t)C * sizeof *gx);
                continue;
            }
            const int64_t o = (n * OH + oh) * OW + ow, pos = ih * W + iw;
            const float *g = j->x + o * C;
            const int64_t *ii = j->ind + o * C;
            for (int64_t c = 0; c < C; c++) gx[c] = 0.0f + (ii[c] == pos ? g[c] : 0.0f);
        }
    }
}

#if POOL_HAVE_Z16
/* NHWC max backward over known, overlapping 2-D windows where the gather
 * (below) does not apply (an empty window, rows wider than PM_GW_W, more
 * than PM_GW windows per position along a dim): the scatter's work item
 * (n, block of PM_CBLOCK channels) and order (the output pixels in order,
 * onto zeros; for whole pixels each grad_x row is zeroed just before the
 * first window reaching it), 16 channels at once:
 * the indices, saturated to int32, are compared with each position of the
 * output's window, and grad_out is added to that grad_x pixel in the lanes
 * that matched (+0 in the other lanes of whole vectors: grad_x is never -0;
 * a masked load, add and store for a tail). Each grad_x element gets the
 * same terms in the same order as in the scatter, so the sums are equal bit
 * for bit. An empty window's candidate is the forward's index for it (its
 * start); any other index outside its own window matches nothing
 * (documented for mft_max_pool2d_backward_windows). Streams are prefetched
 * PM_WIN_AHEAD outputs ahead. */
static void pm_maxbwd_win_range(void *ctx, int64_t begin, int64_t end) {
    const pm_dense_job *dj = ctx;
    const pm_job *j = dj->j;
    const mft_pool2d_params *p = dj->p;
    const int64_t C = j->g.C, H = j->g.in[1], W = j->g.in[2], OH = j->g.out[1],
                  OW = j->g.out[2];
    for (int64_t it = begin; it < end; it++) {
        const int64_t n = it / j->cb, c0 = (it % j->cb) * PM_CBLOCK;
        const int64_t c1 = c0 + PM_CBLOCK < C ? c0 + PM_CBLOCK : C;
        float *gx = j->y + n * H * W * C;
        /* whole pixels: rows are zeroed just before the first window that
         * reaches them (then still in cache for the sums); else up front */
        const bool lazy = c0 == 0 && c1 == C;
        int64_t zeroed = 0; /* rows [0, zeroed) are zero (lazy) */
        if (!lazy)
            for (int64_t q = 0; q < H * W; q++)
                memset(gx + q * C + c0, 0, (size_t)(c1 - c0) * sizeof *gx);
        for (int64_t oh = 0; oh < OH; oh++) {
            int64_t h0 = oh * p->stride[0] - p->padding[0];
            const int64_t h1 = h0 + (p->kernel[0] - 1) * p->dilation[0] + 1;
            while (h0 < 0) h0 += p->dilation[0];
            if (lazy) {
                const int64_t upto = h1 < H ? h1 : H;
                if (upto > zeroed) {
                    memset(gx + zeroed * W * C, 0, (size_t)((upto - zeroed) * W * C) * sizeof *gx);
                    zeroed = upto;
                }
            }
            for (int64_t ow = 0; ow < OW; ow++) {
                int64_t w0 = ow * p->stride[1] - p->padding[1];
                const int64_t w1 = w0 + (p->kernel[1] - 1) * p->dilation[1] + 1;
                while (w0 < 0) w0 += p->dilation[1];
                int32_t pos[PM_WIN_MAX];
                int np = 0;
                for (int64_t ih = h0; ih < h1 && ih < H; ih += p->dilation[0])
                    for (int64_t iw = w0; iw < w1 && iw < W; iw += p->dilation[1])
                        pos[np++] = (int32_t)(ih * W + iw);
                /* an empty window: the forward's index is its start h0*W + w0
                 * (-inf there), which the scatter adds to when in the plane */
                if (np == 0 && h0 * W + w0 < H * W) {
                    pos[np++] = (int32_t)(h0 * W + w0);
                    const int64_t row = (h0 * W + w0) / W; /* (w0 may pass W) */
                    if (lazy && row >= zeroed) {
                        memset(gx + zeroed * W * C, 0,
                               (size_t)((row + 1 - zeroed) * W * C) * sizeof *gx);
                        zeroed = row + 1;
                    }
                }
                const int64_t o = (n * OH + oh) * OW + ow;
                /* the streams of a later output (the prefetcher lags here) */
                const int64_t of = (o + PM_WIN_AHEAD) * C;
                for (int64_t c = c0; c < c1; c += 16) {
                    __builtin_prefetch(j->ind + of + c);
                    __builtin_prefetch(j->ind + of + c + 8);
                    __builtin_prefetch(j->x + of + c);
                    const __mmask16 km = pm_mask16(c1 - c);
                    const bool whole = km == 0xFFFF;
                    const __m512i ix = pm_idx16(j->ind + o * C + c, km);
                    const __m512 g = whole ? _mm512_loadu_ps(j->x + o * C + c)
                                           : _mm512_maskz_loadu_ps(km, j->x + o * C + c);
                    if (whole) /* + 0 where not matched: grad_x is never -0 */
                        for (int k = 0; k < np; k++) {
                            const __mmask16 m =
                                _mm512_cmpeq_epi32_mask(ix, _mm512_set1_epi32(pos[k]));
                            float *d = gx + (int64_t)pos[k] * C + c;
                            _mm512_storeu_ps(d, _mm512_add_ps(_mm512_loadu_ps(d),
                                                              _mm512_maskz_mov_ps(m, g)));
                        }
                    else
                        for (int k = 0; k < np; k++) {
                            const __mmask16 m =
                                _mm512_mask_cmpeq_epi32_mask(km, ix, _mm512_set1_epi32(pos[k]));
                            float *d = gx + (int64_t)pos[k] * C + c;
                            _mm512_mask_storeu_ps(d, m,
                                                  _mm512_add_ps(_mm512_maskz_loadu_ps(m, d), g));
                        }
                }
            }
        }
        if (lazy && zeroed < H)
            memset(gx + zeroed * W * C, 0, (size_t)((H - zeroed) * W * C) * sizeof *gx);
    }
}
#endif

#if POOL_HAVE_Z16
/* Most windows along one dim that hold one input position (and most output
 * rows one input row reads) in the gathered max backward, and its widest
 * input row (its per-column window lists are on the stack). */
#define PM_GW 8
#define PM_GW_W 512

/* The outputs o along one dim whose window (start o*s - pad, k taps
 * dilation d apart) holds input position i, ascending: written to l (at
 * most PM_GW; the caller checked (k-1)*d / s + 1 <= PM_GW); returns how
 * many. */
static int pm_gather_list(int64_t i, int64_t k, int64_t s, int64_t pad, int64_t d, int64_t out,
                          int32_t *l) {
    const int64_t t = i + pad; /* = o*s + tap*d for a window o holding i */
    int64_t lo = t - (k - 1) * d;
    lo = lo <= 0 ? 0 : (lo + s - 1) / s;
    int64_t hi = t / s;
    if (hi >= out) hi = out - 1;
    int nl = 0;
    for (int64_t o = lo; o <= hi; o++)
        if ((t - o * s) % d == 0) l[nl++] = (int32_t)o;
    return nl;
}

/* NHWC max backward over known, overlapping, non-empty 2-D windows,
 * gathered: each grad_x vector (16 channels of pixel (ih, iw)) starts at
 * +0 and adds, in output order (oh, then ow), grad_out of each window
 * holding the pixel in the lanes whose index equals the pixel's position,
 * then is stored once: no zeroing pass and no read-modify-write of grad_x.
 * These are the scatter's terms in the scatter's order on the same +0
 * start, so the sums are equal bit for bit. An index outside its own window
 * matches nothing (documented for mft_max_pool2d_backward_windows). The
 * indices of the output rows in use are kept converted to int32 (saturated)
 * in a ring of as many rows as one input row reads. One work item: an
 * input row (n, ih). */
static void pm_maxbwd_gather_range(void *ctx, int64_t begin, int64_t end) {
    const pm_dense_job *dj = ctx;
    const pm_job *j = dj->j;
    const mft_pool2d_params *p = dj->p;
    const int64_t C = j->g.C, H = j->g.in[1], W = j->g.in[2], OH = j->g.out[1],
                  OW = j->g.out[2];
    const int64_t rowlen = OW * C;
    /* output rows one input row reads: consecutive, at most nring of them */
    const int nring = (int)((p->kernel[0] - 1) * p->dilation[0] / p->stride[0] + 1);
    int32_t *ring = mft__alloc((size_t)(nring * rowlen) * sizeof(int32_t), 64);
    int64_t ring_row[PM_GW]; /* the output row (n * OH + oh) each slot holds */
    int32_t wl[PM_GW_W][PM_GW];
    int nwl[PM_GW_W];
    if (!ring) { /* out of memory: the same sums element by element */
        for (int64_t r = begin; r < end; r++) {
            const int64_t n = r / H, ih = r % H;
            int32_t hl[PM_GW], wl1[PM_GW];
            const int nh = pm_gather_list(ih, p->kernel[0], p->stride[0], p->padding[0],
                                          p->dilation[0], OH, hl);
            for (int64_t iw = 0; iw < W; iw++) {
                const int nw = pm_gather_list(iw, p->kernel[1], p->stride[1], p->padding[1],
                                              p->dilation[1], OW, wl1);
                float *gx = j->y + (r * W + iw) * C;
                for (int64_t c = 0; c < C; c++) gx[c] = 0.0f;
                for (int a = 0; a < nh; a++)
                    for (int b = 0; b < nw; b++) {
                        const int64_t o = (n * OH + hl[a]) * OW + wl1[b];
                        for (int64_t c = 0; c < C; c++)
                            if (j->ind[o * C + c] == ih * W + iw) gx[c] += j->x[o * C + c];
                    }
            }
        }
        return;
    }
    for (int k = 0; k < nring; k++) ring_row[k] = -1;
    for (int64_t iw = 0; iw < W; iw++)
        nwl[iw] = pm_gather_list(iw, p->kernel[1], p->stride[1], p->padding[1], p->dilation[1],
                                 OW, wl[iw]);
    const __mmask16 kt = pm_mask16(C % 16 ? C % 16 : 16); /* the last vector's lanes */
    for (int64_t r = begin; r < end; r++) {
        const int64_t n = r / H, ih = r % H;
        int32_t hl[PM_GW];
        const int nh = pm_gather_list(ih, p->kernel[0], p->stride[0], p->padding[0],
                                      p->dilation[0], OH, hl);
        const int32_t *ixr[PM_GW]; /* the int32 indices of each listed output row */
        const float *gor[PM_GW];   /* its grad_out */
        for (int a = 0; a < nh; a++) {
            const int64_t orow = n * OH + hl[a];
            const int slot = (int)(orow % nring);
            int32_t *dst = ring + slot * rowlen;
            if (ring_row[slot] != orow) {
                const int64_t *src = j->ind + orow * rowlen;
                for (int64_t e = 0; e < rowlen; e += 16) {
                    const __mmask16 km = pm_mask16(rowlen - e);
                    _mm512_mask_storeu_epi32(dst + e, km, pm_idx16(src + e, km));
                }
                ring_row[slot] = orow;
            }
            ixr[a] = dst;
            gor[a] = j->x + orow * rowlen;
        }
        float *gx = j->y + r * W * C;
        for (int64_t iw = 0; iw < W; iw++, gx += C) {
            const __m512i pos = _mm512_set1_epi32((int32_t)(ih * W + iw));
            const int nw = nwl[iw];
            const int32_t *wv = wl[iw];
            int64_t c = 0;
            for (; c + 64 <= C; c += 64) { /* 4 vectors, one pass over the windows */
                __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
                for (int a = 0; a < nh; a++)
                    for (int b = 0; b < nw; b++) {
                        const int64_t off = (int64_t)wv[b] * C + c;
                        const int32_t *ip = ixr[a] + off;
                        const float *gp = gor[a] + off;
#define PM_GACC(A, k)                                                                              \
    A = _mm512_mask_add_ps(                                                                        \
        A, _mm512_cmpeq_epi32_mask(_mm512_loadu_si512(ip + 16 * (k)), pos), A,                     \
        _mm512_loadu_ps(gp + 16 * (k)))
                        PM_GACC(a0, 0);
                        PM_GACC(a1, 1);
                        PM_GACC(a2, 2);
                        PM_GACC(a3, 3);
#undef PM_GACC
                    }
                _mm512_storeu_ps(gx + c, a0);
                _mm512_storeu_ps(gx + c + 16, a1);
                _mm512_storeu_ps(gx + c + 32, a2);
                _mm512_storeu_ps(gx + c + 48, a3);
            }
            for (; c < C; c += 16) {
                const bool whole = c + 16 <= C;
                const __mmask16 km = whole ? (__mmask16)0xFFFF : kt;
                __m512 acc = _mm512_setzero_ps();
                for (int a = 0; a < nh; a++)
                    for (int b = 0; b < nw; b++) {
                        const int64_t off = (int64_t)wv[b] * C + c;
                        const __m512i ix = _mm512_maskz_loadu_epi32(km, ixr[a] + off);
                        const __mmask16 m = _mm512_mask_cmpeq_epi32_mask(km, ix, pos);
                        acc = _mm512_mask_add_ps(acc, m, acc,
                                                 _mm512_maskz_loadu_ps(km, gor[a] + off));
                    }
                _mm512_mask_storeu_ps(gx + c, km, acc);
            }
        }
    }
    mft__free(ring);
}
#endif

/* True when no 2-D window of the max backward's params (a->params) is
 * empty. An empty window's index (its start) may lie in another window,
 * where the owner and gather rules would not add it: the scatter runs then. */
static bool pm_windows_nonempty(const mft_kernel_args *a) {
    const mft_pool2d_params *p = a->params;
    for (int d = 0; d < 2; d++) {
        const int64_t in = a->outputs[0]->sizes[2 + d], out = a->inputs[0]->sizes[2 + d];
        for (int64_t o = 0; o < out; o++) {
            int64_t i0 = o * p->stride[d] - p->padding[d];
            const int64_t i1 = i0 + (p->kernel[d] - 1) * p->dilation[d] + 1;
            while (i0 < 0) i0 += p->dilation[d];
            if (i0 >= i1 || i0 >= in) return false;
        }
    }
    return true;
}

/* True when pm_maxbwd_dense_range applies: 2-D windows known that do not
 * overlap, none empty, 16 channels or more. */
static bool pm_dense_applies(const mft_kernel_args *a) {
    const mft_pool2d_params *p = a->params;
    if (!p || a->inputs[0]->ndim != 4 || a->inputs[0]->sizes[1] < 16) return false;
    for (int d = 0; d < 2; d++)
        if (p->stride[d] < p->dilation[d] * (p->kernel[d] - 1) + 1) return false;
    return pm_windows_nonempty(a);
}

#if POOL_HAVE_Z16
/* True when pm_maxbwd_gather_range applies: 2-D windows known, none empty,
 * at most PM_GW holding any position along each dim, input rows at most
 * PM_GW_W wide, positions in int32. */
static bool pm_gather_applies(const mft_kernel_args *a) {
    const mft_pool2d_params *p = a->params;
    const mft_tensor *gx = a->outputs[0];
    if (!p || gx->ndim != 4 || gx->sizes[3] > PM_GW_W || gx->sizes[2] * gx->sizes[3] >= INT32_MAX)
        return false;
    for (int d = 0; d < 2; d++)
        if ((p->kernel[d] - 1) * p->dilation[d] / p->stride[d] + 1 > PM_GW) return false;
    return pm_windows_nonempty(a);
}
#endif

void mft__pool_max_backward_nhwc(const mft_kernel_args *a) {
    pm_geom g;
    pm_geom_init(&g, PM_MAX, a->outputs[0], a->inputs[0]);
    pm_job j = pm_job_of(&g, a);
    if (pm_dense_applies(a)) {
        pm_dense_job dj = {&j, a->params};
        mft__parallel_for(0, g.N * g.in[1], pool_grain(g.in[2] * g.C), pm_maxbwd_dense_range, &dj);
        return;
    }
    j.cb = (g.C + PM_CBLOCK - 1) / PM_CBLOCK;
    const int64_t cw = g.C < PM_CBLOCK ? g.C : PM_CBLOCK;
    const int64_t work = cw * (g.in[0] * g.in[1] * g.in[2] + g.out[0] * g.out[1] * g.out[2]);
#if POOL_HAVE_Z16
    const mft_pool2d_params *p = a->params;
    if (pm_gather_applies(a)) {
        pm_dense_job dj = {&j, p};
        mft__parallel_for(0, g.N * g.in[1], pool_grain(g.in[2] * g.C * 4), pm_maxbwd_gather_range,
                          &dj);
        return;
    }
    if (p && a->inputs[0]->ndim == 4 && p->kernel[0] * p->kernel[1] <= PM_WIN_MAX &&
        g.in[1] * g.in[2] < INT32_MAX) {
        pm_dense_job dj = {&j, p};
        mft__parallel_for(0, g.N * j.cb, pool_grain(work), pm_maxbwd_win_range, &dj);
        return;
    }
#endif
    mft__parallel_for(0, g.N * j.cb, pool_grain(work), pm_maxbwd_nhwc_range, &j);
}
