/* ops/pool/blocked16_avg_backward.c — the nChw16c F32 avg_pool2d and
 * adaptive_avg_pool2d backward: windows that tile the input take the tiled
 * backward (blocked16_tiled.c); other windows gather per grad_x row, through
 * the row rings of Note [nChw16c row rings] (blocked16_internal.h) where they
 * fit, else by the general loop (and global pooling by its one value per
 * plane). */
#include "blocked16_internal.h"

/* ---------------------------------------------------------------- gathered backward
 * avg and adaptive avg: grad_x[ih, iw] = sum over the outputs (oh, ow)
 * whose windows hold (ih, iw), ascending, of grad_out * (1/divisor). The
 * 1/divisor of every output is tabled once per call (inv; NULL when out of
 * memory: computed per term). */

typedef struct b16_gjob {
    b16_job j;
    bool adaptive;
    float *inv; /* OH*OW factors, or NULL */
} b16_gjob;

/* outputs [*o0, *o1) along a dim whose window holds input i */
static inline void win_inv(const b16_job *j, bool adaptive, int d, int64_t i, int64_t *o0,
                           int64_t *o1) {
    const int64_t in = d ? j->W : j->H, out = d ? j->OW : j->OH;
    int64_t a, b;
    if (adaptive) {
        a = (i * out) / in;
        b = ((i + 1) * out + in - 1) / in;
    } else {
        const mft_pool2d_params *p = j->p;
        a = pool_div_floor(i + p->padding[d] - p->kernel[d], p->stride[d]) + 1;
        b = pool_div_floor(i + p->padding[d], p->stride[d]) + 1;
    }
    *o0 = a < 0 ? 0 : a;
    *o1 = b > out ? out : b;
    if (*o1 < *o0) *o1 = *o0;
}

/* 1/divisor of output (oh, ow) (0: an empty window) */
static inline float win_inv_div(const b16_job *j, bool adaptive, int64_t oh, int64_t ow) {
    if (adaptive) {
        const int64_t h0 = (oh * j->H) / j->OH, h1 = ((oh + 1) * j->H + j->OH - 1) / j->OH;
        const int64_t w0 = (ow * j->W) / j->OW, w1 = ((ow + 1) * j->W + j->OW - 1) / j->OW;
        return 1.0f / (float)((h1 - h0) * (w1 - w0));
    }
    const mft_pool2d_params *p = j->p;
    int64_t h0, h1, ph, w0, w1, pw;
    avg_window(oh, j->H, p->kernel[0], p->stride[0], p->padding[0], &h0, &h1, &ph);
    avg_window(ow, j->W, p->kernel[1], p->stride[1], p->padding[1], &w0, &w1, &pw);
    const int64_t div = avg_divisor(p, h0, h1, ph, w0, w1, pw);
    return div ? 1.0f / (float)div : 0.0f;
}

static void b16_inv_rows(void *ctx, int64_t begin, int64_t end) {
    b16_gjob *g = ctx;
    float *inv = g->inv;
    for (int64_t oh = begin; oh < end; oh++)
        for (int64_t ow = 0; ow < g->j.OW; ow++)
            inv[oh * g->j.OW + ow] = win_inv_div(&g->j, g->adaptive, oh, ow);
}

static void b16_gather_rows(void *ctx, int64_t begin, int64_t end) {
    const b16_gjob *g = ctx;
    const b16_job *j = &g->j;
    const bool adaptive = g->adaptive;
    const float *inv = g->inv;
    const int64_t H = j->H, W = j->W, OH = j->OH, OW = j->OW;
    int64_t tw0[PM_TAB], tw1[PM_TAB];
    for (int64_t r = begin; r < end; r++) {
        const int64_t n = r / H / j->C1, cb = r / H % j->C1, ih = r % H;
        if (adaptive && OH == 1 && OW == 1) { /* global pooling: one value per plane */
            const float f = inv ? inv[0] : win_inv_div(j, adaptive, 0, 0);
            const bv v = bv_keep(blk_keep(j->C, cb),
                                 bv_mul(bv_ld(j->x + (n * j->C1 + cb) * 16), bv_set1(f)));
            float *gx = j->y + ((n * j->C1 + cb) * H + ih) * W * 16;
            for (int64_t iw = 0; iw < W; iw++) bv_st(gx + iw * 16, v);
            continue;
        }
        int64_t oh0, oh1;
        win_inv(j, adaptive, 0, ih, &oh0, &oh1);
        for (int64_t c0 = 0; c0 < W; c0 += PM_TAB) {
            const int64_t nw = W - c0 < PM_TAB ? W - c0 : PM_TAB;
            if (r == begin || W > PM_TAB)
                for (int64_t t = 0; t < nw; t++) win_inv(j, adaptive, 1, c0 + t, &tw0[t], &tw1[t]);
            {
                const int64_t q = n * j->C1 + cb;
                const bm keep = blk_keep(j->C, cb);
                const float *go = j->x + q * OH * OW * 16;
                float *gx = j->y + ((q * H + ih) * W + c0) * 16;
                for (int64_t t = 0; t < nw; t++) {
                    bv s = bv_set1(0.0f);
                    for (int64_t oh = oh0; oh < oh1; oh++)
                        for (int64_t ow = tw0[t]; ow < tw1[t]; ow++) {
                            const float f =
                                inv ? inv[oh * OW + ow] : win_inv_div(j, adaptive, oh, ow);
                            s = bv_add(s, bv_mul(bv_ld(go + (oh * OW + ow) * 16), bv_set1(f)));
                        }
                    bv_st(gx + t * 16, bv_keep(keep, s));
                }
            }
        }
    }
}

/* One avg grad_x row of Note [nChw16c row rings]: element iw sums the
 * products of rows pr, terms a < nh, columns cols[iw*nw + b], from +0. */
static inline __attribute__((always_inline)) void avg_ring_row(float *gx, int64_t W,
                                                               const float *const *pr,
                                                               const int32_t *cols, int64_t nh,
                                                               int64_t nw, bm keep) {
    for (int64_t iw = 0; iw < W; iw++) {
        bv s = bv_set1(0.0f);
        for (int64_t a = 0; a < nh; a++)
            for (int64_t b = 0; b < nw; b++)
                s = bv_add(s, bv_ld(pr[a] + (int64_t)cols[iw * nw + b] * 16));
        bv_st(gx + iw * 16, bv_keep(keep, s));
    }
}

/* The avg / adaptive avg backward of Note [nChw16c row rings] (rows as
 * b16_gather_rows'; W <= PM_TAB). A ring row: OW + 1 vectors of products,
 * the last (the dummy column) +0; rows past an element's last output row
 * are the dummy row (+0), so every row runs nh x nw terms. */
static void b16_gather_ring(void *ctx, int64_t begin, int64_t end) {
    const b16_rjob *rj = ctx;
    const b16_job *j = rj->j;
    const int64_t H = j->H, W = j->W, OH = j->OH, OW = j->OW, nh = rj->nh, nw = rj->nw;
    b16_ring g = {NULL, 0, 0, {0}};
    int32_t *cols = mft__alloc((size_t)(W * nw) * sizeof(int32_t), 64);
    if (!cols || !mft__pool_b16_ring_init(&g, nh, (size_t)((OW + 1) * 16) * sizeof(float))) {
        mft__free(cols);
        b16_gjob gj = {*j, rj->adaptive, (float *)rj->inv}; /* out of memory: the same sums */
        b16_gather_rows(&gj, begin, end);
        return;
    }
    {
        int64_t tw0[PM_TAB], tw1[PM_TAB];
        for (int64_t iw = 0; iw < W; iw++) win_inv(j, rj->adaptive, 1, iw, &tw0[iw], &tw1[iw]);
        mft__pool_b16_ring_cols(tw0, tw1, W, OW, nw, cols);
    }
    float *dpr = ring_dummy(&g);
    for (int64_t e = 0; e < (OW + 1) * 16; e++) dpr[e] = 0.0f;
    for (int64_t r = begin; r < end; r++) {
        const int64_t q = r / H, ih = r % H;
        const bm keep = blk_keep(j->C, q % j->C1);
        int64_t oh0, oh1;
        win_inv(j, rj->adaptive, 0, ih, &oh0, &oh1);
        const float *pr[B16_RING];
        for (int64_t a = 0; a < nh; a++) {
            const int64_t oh = oh0 + a, orow = q * OH + oh;
            if (oh >= oh1) {
                pr[a] = dpr;
                continue;
            }
            bool fill;
            float *d = ring_row(&g, orow, &fill);
            if (fill) {
                for (int64_t ow = 0; ow < OW; ow++)
                    bv_st(d + ow * 16, bv_mul(bv_ld(j->x + (orow * OW + ow) * 16),
                                              bv_set1(rj->inv[oh * OW + ow])));
                bv_st(d + OW * 16, bv_set1(0.0f));
            }
            pr[a] = d;
        }
        float *gx = j->y + r * W * 16;
        if (nh == 3 && nw == 3)
            avg_ring_row(gx, W, pr, cols, 3, 3, keep);
        else if (nh == 2 && nw == 2)
            avg_ring_row(gx, W, pr, cols, 2, 2, keep);
        else
            avg_ring_row(gx, W, pr, cols, nh, nw, keep);
    }
    mft__free(g.buf);
    mft__free(cols);
}

static void b16_gather(const mft_kernel_args *a, bool adaptive, int64_t terms) {
    b16_gjob g;
    g.j = mft__pool_b16_job_of(a, false);
    g.adaptive = adaptive;
    float *inv = mft__alloc((size_t)(g.j.OH * g.j.OW) * sizeof(float), 64);
    g.inv = NULL;
    if (inv) {
        g.inv = inv;
        mft__parallel_for(0, g.j.OH, pool_grain(g.j.OW * 8), b16_inv_rows, &g);
    }
    int64_t kh, kw;
    /* Note [nChw16c row rings]: the most output rows / columns one input
     * row / column reads */
    b16_rjob rj = {&g.j, adaptive, inv, 0, 0};
    for (int d = 0; inv && d < 2; d++)
        for (int64_t i = 0; i < (d ? g.j.W : g.j.H); i++) {
            int64_t o0, o1;
            win_inv(&g.j, adaptive, d, i, &o0, &o1);
            int64_t *most = d ? &rj.nw : &rj.nh;
            if (o1 - o0 > *most) *most = o1 - o0;
        }
    const bool global = adaptive && g.j.OH == 1 && g.j.OW == 1;
    if (inv && mft__pool_b16_tiles(&g.j, adaptive, &kh, &kw))
        mft__pool_b16_tiled(&g.j, inv, kh, kw);
    else if (inv && !global && rj.nh >= 1 && rj.nh <= B16_RING && rj.nw >= 1 && rj.nw <= B16_COLS &&
             g.j.W <= PM_TAB)
        mft__parallel_for(0, g.j.N * g.j.C1 * g.j.H, pool_grain(g.j.W * terms * 16),
                          b16_gather_ring, &rj);
    else
        mft__parallel_for(0, g.j.N * g.j.C1 * g.j.H, pool_grain(g.j.W * terms * 16),
                          b16_gather_rows, &g);
    mft__free(inv);
}

void mft__pool_avg_pool2d_backward_nchw16c(const mft_kernel_args *a) {
    const mft_pool2d_params *p = a->params;
    b16_gather(a, false, (p->kernel[0] / p->stride[0] + 1) * (p->kernel[1] / p->stride[1] + 1));
}

void mft__pool_adaptive_avg_backward_nchw16c(const mft_kernel_args *a) {
    const mft_tensor *go = a->inputs[0], *gx = a->outputs[0];
    b16_gather(a, true, (go->sizes[2] / gx->sizes[2] + 2) * (go->sizes[3] / gx->sizes[3] + 2));
}
