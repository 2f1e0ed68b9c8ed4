/* ops/conv/backward_weight.c — the backward_weight driver of the fast F32
 * kernels on NHWC grad_y and x (2-D and 3-D, any groups): work items per
 * (group, c_out block) or, where the accumulators fit, per (group, chunk of
 * output rows) with partials added in chunk order; both run the 6x16 /
 * 6x32 / 8-row backward micro-kernels of microkernels.c. Entry:
 * mft__conv_backward_weight, called from the algorithm chains of chains.c.
 *
 * Note [backward_weight]
 * Work items are (group, 16-wide block of c_out; with AVX-512 two blocks,
 * run by the 6x32 backward micro-kernel; with AVX-512 and C_in per group a
 * multiple of 8 the ci blocks hold 8 channels, not 6: 8x16 / 8x32 tiles,
 * bw_job.bm, which waste no row on 32 channels); an item owns its slice of
 * grad_w (accumulated in a scratch buffer [tap][ci block of 6][6][16]) and
 * sums over every (n, output row) in order: for each tap, the contiguous run
 * of output columns whose input column is inside the image is one call of a
 * 6x16 micro-kernel (broadcast 6 x channels, load 16 grad_y channels) with
 * the accumulators loaded from and stored to the scratch tile. c_in edges
 * repeat the last valid channel (results discarded); grad_y with c_out per
 * group not a multiple of 16 is copied to a zero-padded scratch first.
 * When a group's accumulators for all c_out blocks fit in 64 KB (1x1 and
 * other small kernels) and there are >= 8 output rows, items are instead (group, one of 8 fixed chunks of
 * output rows) with every c_out block run on a row while its x is in L1, and
 * the 8 partials are added in chunk order (bwc_range; the NCHW pwb_range has
 * the same variant, pwbc_range): x is read once instead of once per block.
 * */
#include "conv_internal.h"

#define BW_MAX_M       8 /* most rows of a backward_weight tile */

/* ---------------------------------------------------------------- backward_weight
 * Shapes (NHWC): grad_y (N, OD, OH, OW, Cout) (or the padded copy, channel
 * stride gs), x (N, D, H, W, Cin); grad_w any strides (gw). */
typedef struct bw_job {
    const cgeom *g;
    const float *gy;
    int64_t gs; /* grad_y pixel stride */
    int64_t nbo, nbi;
    const float *x;
    const float *gy_src; /* the unpadded grad_y (while padding) */
    float *gy_pad;
    float *gw;
    const int64_t *gws; /* grad_w strides (co, ci, kd, kh, kw) */
    bw_micro_fn micro;
    bw_micro2_fn micro2; /* NULL: bm x 16 tiles only */
    int64_t bm;          /* rows (input channels) per tile: TILE_M, or 8 (AVX-512) */
    _Atomic long long *nomem; /* Note [Kernel scratch]: a worker's failed allocation */
} bw_job;

#define BWC_ROWS 8 /* output rows per micro-kernel call */

/* Adds output rows [rb, re) (flat (n, od, oh), at most BWC_ROWS) of group gg
 * into the accumulators of c_out blocks [cb0, cb1): block cb's
 * [tap][ci block][bm][16] at acc + (cb - cb0) * T * nbi * bm * 16. One
 * micro-kernel call per (tap, c_in block, c_out block or pair) covers all
 * the rows whose input row exists for the tap, so the accumulators are
 * loaded and stored once per block of rows, not once per row. */
static void bw_rows(const bw_job *j, int64_t gg, int64_t rb, int64_t re, int64_t cb0,
                    int64_t cb1, float *acc) {
    const cgeom *g = j->g;
    const int64_t T = g->T, nbi = j->nbi, blk = T * nbi * j->bm * TILE_N;
    const int64_t goff = j->gs == g->Cout ? gg * g->Cgo : gg * j->nbo * TILE_N;
    const int64_t xs = g->s[2] * g->Cin;
    const float *xrows[BW_MAX_M];
    for (int64_t t = 0; t < T; t++) {
        const int64_t kw = t % g->K[2], kh = (t / g->K[2]) % g->K[1], kd = t / (g->K[2] * g->K[1]);
        int64_t lo, hi;
        const int64_t off = kw * g->d[2] - g->p[2];
        valid_range(g->OW, g->W, g->s[2], off, &lo, &hi);
        if (hi <= lo) continue;
        /* the rows of this block whose input row exists for tap t */
        int64_t xo[BWC_ROWS], go[BWC_ROWS], nq = 0;
        for (int64_t r = rb; r < re; r++) {
            const int64_t oh = r % g->OH, od = (r / g->OH) % g->OD, n = r / (g->OH * g->OD);
            const int64_t id = od * g->s[0] - g->p[0] + kd * g->d[0];
            const int64_t ih = oh * g->s[1] - g->p[1] + kh * g->d[1];
            if (id < 0 || id >= g->D || ih < 0 || ih >= g->H) continue;
            xo[nq] = ((n * g->D + id) * g->H + ih) * g->W * g->Cin + (lo * g->s[2] + off) * g->Cin;
            go[nq] = (r * g->OW + lo) * j->gs;
            nq++;
        }
        if (!nq) continue;
        for (int64_t ib = 0; ib < nbi; ib++) {
            for (int i = 0; i < j->bm; i++) {
                int64_t ci = ib * j->bm + i;
                if (ci >= g->Cgi) ci = g->Cgi - 1;
                xrows[i] = j->x + gg * g->Cgi + ci;
            }
            for (int64_t cb = cb0; cb < cb1;) {
                float *a0 = acc + (cb - cb0) * blk + (t * nbi + ib) * j->bm * TILE_N;
                const float *gp = j->gy + goff + cb * TILE_N;
                if (j->micro2 && cb + 1 < cb1) { /* two c_out blocks, 6x32 */
                    j->micro2(nq, xo, go, hi - lo, xrows, xs, gp, j->gs, a0, a0 + blk);
                    cb += 2;
                } else {
                    j->micro(nq, xo, go, hi - lo, xrows, xs, gp, j->gs, a0);
                    cb++;
                }
            }
        }
    }
}

static void bw_range(void *ctx, int64_t begin, int64_t end) {
    const bw_job *j = ctx;
    const cgeom *g = j->g;
    const int64_t T = g->T, nbi = j->nbi, bpi = j->micro2 ? 2 : 1; /* c_out blocks per item */
    const int64_t blk = T * nbi * j->bm * TILE_N; /* one block's accumulators */
    float *acc = mft__alloc((size_t)(bpi * blk) * sizeof(float), 64);
    if (!acc) { /* Note [Kernel scratch] */
        mft__scratch_fail(j->nomem, (size_t)(bpi * blk) * sizeof(float));
        return;
    }
    const int64_t nit = cdiv(j->nbo, bpi);
    for (int64_t it = begin; it < end; it++) {
        const int64_t gg = it / nit, cb0 = (it % nit) * bpi;
        const int64_t nblk = j->nbo - cb0 < bpi ? j->nbo - cb0 : bpi;
        const int64_t c1 = g->Cgo < (cb0 + nblk) * TILE_N ? g->Cgo : (cb0 + nblk) * TILE_N;
        memset(acc, 0, (size_t)(nblk * blk) * sizeof(float));
        const int64_t rows = g->N * g->OD * g->OH;
        for (int64_t rb = 0; rb < rows; rb += BWC_ROWS)
            bw_rows(j, gg, rb, rb + BWC_ROWS < rows ? rb + BWC_ROWS : rows, cb0, cb0 + nblk, acc);
        for (int64_t co = cb0 * TILE_N; co < c1; co++) {
            const float *ab = acc + (co / TILE_N - cb0) * blk;
            const int64_t jj = co % TILE_N;
            for (int64_t t = 0; t < T; t++) {
                const int64_t kw = t % g->K[2], kh = (t / g->K[2]) % g->K[1],
                              kd = t / (g->K[2] * g->K[1]);
                for (int64_t ci = 0; ci < g->Cgi; ci++)
                    j->gw[(gg * g->Cgo + co) * j->gws[0] + ci * j->gws[1] + kd * j->gws[2] +
                          kh * j->gws[3] + kw * j->gws[4]] =
                        ab[((t * nbi + ci / j->bm) * j->bm + ci % j->bm) * TILE_N + jj];
            }
        }
    }
    mft__free(acc);
}

static void bw_pad_range(void *ctx, int64_t begin, int64_t end) {
    const bw_job *j = ctx;
    const cgeom *g = j->g;
    float *dst = j->gy_pad;
    const float *src = j->gy_src;
    for (int64_t p = begin; p < end; p++)
        for (int64_t gg = 0; gg < g->G; gg++)
            for (int64_t c = 0; c < j->nbo * TILE_N; c++)
                dst[p * j->gs + gg * j->nbo * TILE_N + c] =
                    c < g->Cgo ? src[p * g->Cout + gg * g->Cgo + c] : 0.0f;
}

/* Row-chunked backward_weight (used when every (c_out block, tap, c_in block)
 * accumulator of a group fits in BWC_MAX_ACC bytes, e.g. 1x1 convolutions):
 * work items are (group, chunk of BWC_CHUNKS fixed output-row ranges); an item
 * sums its rows into its own partial [cb][tap][ci block][6][16], running every
 * c_out block on a block of BWC_ROWS rows while their x is in L1/L2, one
 * micro-kernel call per (tap, block of rows) (the per-(group, cb) items
 * of bw_range stream all of x once per c_out block). bwc_reduce adds the
 * partials in chunk order, so results do not depend on the thread count. */

typedef struct bwc_job {
    const bw_job *b;
    float *part; /* [G][nch][accn] */
    int64_t nch, rows, accn;
} bwc_job;

static void bwc_range(void *ctx, int64_t begin, int64_t end) {
    const bwc_job *c = ctx;
    const bw_job *j = c->b;
    for (int64_t it = begin; it < end; it++) {
        const int64_t gg = it / c->nch, ch = it % c->nch;
        const int64_t r0 = ch * c->rows / c->nch, r1 = (ch + 1) * c->rows / c->nch;
        float *acc = c->part + it * c->accn;
        memset(acc, 0, (size_t)c->accn * sizeof(float));
        for (int64_t rb = r0; rb < r1; rb += BWC_ROWS)
            bw_rows(j, gg, rb, rb + BWC_ROWS < r1 ? rb + BWC_ROWS : r1, 0, j->nbo, acc);
    }
}

/* items (group, c_out block): grad_w = sum over chunks, in chunk order */
static void bwc_reduce(void *ctx, int64_t begin, int64_t end) {
    const bwc_job *c = ctx;
    const bw_job *j = c->b;
    const cgeom *g = j->g;
    const int64_t T = g->T, nbi = j->nbi;
    for (int64_t it = begin; it < end; it++) {
        const int64_t gg = it / j->nbo, cb = it % j->nbo;
        const int64_t cols = g->Cgo - cb * TILE_N < TILE_N ? g->Cgo - cb * TILE_N : TILE_N;
        const float *p0 = c->part + gg * c->nch * c->accn + cb * T * nbi * j->bm * TILE_N;
        for (int64_t t = 0; t < T; t++) {
            const int64_t kw = t % g->K[2], kh = (t / g->K[2]) % g->K[1],
                          kd = t / (g->K[2] * g->K[1]);
            for (int64_t ci = 0; ci < g->Cgi; ci++)
                for (int64_t jj = 0; jj < cols; jj++) {
                    const int64_t e = ((t * nbi + ci / j->bm) * j->bm + ci % j->bm) * TILE_N + jj;
                    float s = p0[e];
                    for (int64_t ch = 1; ch < c->nch; ch++) s += p0[ch * c->accn + e];
                    j->gw[(gg * g->Cgo + cb * TILE_N + jj) * j->gws[0] + ci * j->gws[1] +
                          kd * j->gws[2] + kh * j->gws[3] + kw * j->gws[4]] = s;
                }
        }
    }
}

void mft__conv_backward_weight(const cgeom *g, const float *gy, const float *x, float *gw,
                               const int64_t *gws) {
    bw_job j;
    memset(&j, 0, sizeof j);
    j.g = g;
    j.nbo = cdiv(g->Cgo, TILE_N);
    /* rows (input channels) per tile: 8 on AVX-512 when they divide the
     * channels (32 channels: 6 blocks of 6 would waste 4 rows) */
    j.micro = mft__conv_pick_bw_micro();
    j.micro2 = mft__conv_pick_bw_micro2();
    j.bm = g->Cgi % 8 == 0 && mft__conv_pick_bw_micro8(&j.micro, &j.micro2) ? 8 : TILE_M;
    j.nbi = cdiv(g->Cgi, j.bm);
    j.gw = gw;
    j.gws = gws;
    if (cf_mode() == 2) {
        mft__conv_direct_nhwc(g, 2, gy, x, gw, gws);
        return;
    }
    float *pad = NULL;
    const int64_t P = g->N * g->OD * g->OH * g->OW;
    _Atomic long long nomem = 0;
    j.nomem = &nomem;
    if (g->Cgo % TILE_N) {
        j.gs = g->G * j.nbo * TILE_N;
        pad = mft__alloc((size_t)(P * j.gs) * sizeof(float) + 64, 64);
        if (!pad) { /* Note [Kernel scratch] */
            mft__kernel_nomem((size_t)(P * j.gs) * sizeof(float) + 64);
            return;
        }
        j.gy = pad;
        j.gy_pad = pad;
        j.gy_src = gy;
        mft__parallel_for(0, P, 1024, bw_pad_range, &j);
    } else {
        j.gs = g->Cout;
        j.gy = gy;
    }
    j.x = x;
    bwc_job c;
    c.b = &j;
    c.rows = g->N * g->OD * g->OH;
    c.nch = BWC_CHUNKS;
    c.accn = g->T * j.nbo * j.nbi * j.bm * TILE_N;
    c.part = NULL;
    if (c.rows >= BWC_CHUNKS && c.accn * (int64_t)sizeof(float) <= BWC_MAX_ACC) {
        const size_t bytes = (size_t)(g->G * c.nch * c.accn) * sizeof(float);
        c.part = mft__alloc(bytes, 64);
        if (!c.part) /* Note [Kernel scratch]: not bw_range, which sums in another order */
            mft__kernel_nomem(bytes);
        else {
            mft__parallel_for_dynamic(0, g->G * c.nch, cf_chunk(g->G * c.nch), bwc_range, &c);
            mft__parallel_for(0, g->G * j.nbo, 1, bwc_reduce, &c);
            mft__free(c.part);
        }
    } else {
        mft__parallel_for(0, g->G * cdiv(j.nbo, j.micro2 ? 2 : 1), 1, bw_range, &j);
        if (atomic_load(&nomem)) mft__kernel_nomem((size_t)atomic_load(&nomem));
    }
    mft__free(pad);
}
