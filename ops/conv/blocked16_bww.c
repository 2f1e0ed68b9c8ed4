/* ops/conv/blocked16_bww.c — backward_weight of the nChw16c F32
 * convolution (blocked16.c hands it over) where neither Winograd, the 1x1
 * kernel (blocked16_1x1.c) nor the 3-wide kernel (blocked16_bww3.c)
 * applies: the first layer of a network (a plain x with few channels,
 * accumulators in registers), and 16x16 tiles of (output block, input
 * block, tap) for any kernel size, stride and dilation, on a packed
 * nChw16c or plain x; grad_w written through its weight map (plain
 * strides, or OIhw16i16o / Ohwi16o blocks whose pad lanes, zeroed at
 * allocation, are never written). */
#include "blocked16_internal.h"

typedef struct bww_ctx {
    const b16g *g;
    const float *gy, *x;
    float *gw;
    mft__conv_wmap gm; /* grad_w's map (Note [Conv weight maps]) */
    bool pairs; /* an item is a block pair, all its taps (Note [nChw16c weight-gradient items]) */
} bww_ctx;

#define BWW_PAIR_TAPS MFT_B16_TILES_MAX /* taps of a pair item, at most (3x3) */

/* Block pair (ob, ib) with nic < 16 real input channels (C = 1 or 3 in a
 * first layer) and at most BWW_SMALL (tap, channel) accumulators: every tap
 * in one walk over grad_y and x, the channels that are pad lanes skipped.
 * Each element sums over (n, oh, ow) in order, as bww_range does. */
#define BWW_SMALL 64
static void bww_small(const bww_ctx *c, int64_t ob, int64_t ib, int64_t nic) {
    const b16g *g = c->g;
    const int64_t sH = g->xH, sC1 = g->xC1, sN = g->xN, xc = g->xc, xW = g->xW;
    const int64_t ysH = g->OW * 16, ysO1 = g->OH * ysH, ysN = g->O1 * ysO1;
    const int64_t noc = g->O - ob * 16 < 16 ? g->O - ob * 16 : 16;
    float acc[BWW_SMALL][16];
    memset(acc, 0, sizeof acc);
    for (int64_t n = 0; n < g->N; n++)
        for (int64_t oh = 0; oh < g->OH; oh++) {
            const int64_t ih0 = oh * g->sh - g->ph;
            int64_t khlo, khhi;
            tap_range(ih0, g->dh, g->KH, g->H, &khlo, &khhi);
            const float *gp = c->gy + n * ysN + ob * ysO1 + oh * ysH;
            const float *xn = c->x + n * sN + ib * sC1;
            for (int64_t ow = 0; ow < g->OW; ow++, gp += 16) {
                const int64_t iw0 = ow * g->sw - g->pw;
                int64_t kwlo, kwhi;
                tap_range(iw0, g->dw, g->KW, g->W, &kwlo, &kwhi);
#if CF_AVX512
                const __m512 v = _mm512_loadu_ps(gp);
#endif
                for (int64_t kh = khlo; kh < khhi; kh++)
                    for (int64_t kw = kwlo; kw < kwhi; kw++) {
                        const float *xp = xn + (ih0 + kh * g->dh) * sH + (iw0 + kw * g->dw) * xW;
                        float(*a)[16] = acc + (kh * g->KW + kw) * nic;
                        for (int64_t i = 0; i < nic; i++) {
#if CF_AVX512
                            _mm512_storeu_ps(a[i], _mm512_fmadd_ps(_mm512_set1_ps(xp[i * xc]), v,
                                                                   _mm512_loadu_ps(a[i])));
#else
                            for (int l = 0; l < 16; l++) a[i][l] += xp[i * xc] * gp[l];
#endif
                        }
                    }
            }
        }
    for (int64_t t = 0; t < g->KH * g->KW; t++)
        for (int64_t oc = 0; oc < noc; oc++)
            for (int64_t ic = 0; ic < nic; ic++)
                c->gw[mft__wmap_at(&c->gm, ob * 16 + oc, ib * 16 + ic, t / g->KW, t % g->KW)] =
                    acc[t * nic + ic][oc];
}

/* Note [First-layer weight gradient]: a plain x with few channels (C = 1
 * or 3, 3x3: T*C = 9 or 27 (tap, channel) pairs) had every pair's
 * accumulator in memory (bww_small: a load, an FMA and a store per pair
 * and pixel; 11% of a Fashion-MNIST nChw16c step for conv1, twice its
 * forward). Over the zero-bordered copy of x (Note [nChw16c padded
 * input]) every pair is valid at every pixel, so the pairs are a fixed
 * list of offsets and their accumulators stay in registers (at most
 * BWR_MAX); the taps over the border add 0 * grad_y. An nChw16c x of one
 * block (C = 1 kept in nChw16c) runs it too when its pairs are few
 * (BWR_BLOCKED): its offsets are x's strides either way. Work items: the
 * output blocks; each element sums over (n, oh, ow) in order, as
 * bww_small. */
#define BWR_MAX 28
typedef struct bwr_ctx {
    const b16g *g; /* of the padded x */
    const float *gy, *x;
    float *gw;
    mft__conv_wmap gm;
    int na; /* KH*KW*I pairs */
    int64_t off[BWR_MAX]; /* x offset of pair (kh*KW + kw)*I + i */
} bwr_ctx;

static inline __attribute__((always_inline)) void bwr_body(const int NA, const bwr_ctx *c,
                                                           int64_t ob) {
    const b16g *g = c->g;
    const int64_t ysH = g->OW * 16, ysO1 = g->OH * ysH, ysN = g->O1 * ysO1;
    const int64_t xs = g->sw * g->xW;
    const int na = c->na;
    float tile[BWR_MAX][16];
#if CF_AVX512
    __m512 acc[NA];
    for (int t = 0; t < NA; t++) acc[t] = _mm512_setzero_ps();
#else
    (void)NA;
    memset(tile, 0, sizeof tile);
#endif
    for (int64_t n = 0; n < g->N; n++)
        for (int64_t oh = 0; oh < g->OH; oh++) {
            const float *gp = c->gy + n * ysN + ob * ysO1 + oh * ysH;
            const float *xp = c->x + n * g->xN + oh * g->sh * g->xH;
            for (int64_t ow = 0; ow < g->OW; ow++, gp += 16, xp += xs) {
#if CF_AVX512
                const __m512 v = _mm512_loadu_ps(gp);
                for (int t = 0; t < NA; t++)
                    if (t < na) acc[t] = _mm512_fmadd_ps(_mm512_set1_ps(xp[c->off[t]]), v, acc[t]);
#else
                for (int t = 0; t < na; t++)
                    for (int l = 0; l < 16; l++) tile[t][l] += xp[c->off[t]] * gp[l];
#endif
            }
        }
#if CF_AVX512
    for (int t = 0; t < NA; t++) _mm512_storeu_ps(tile[t], acc[t]);
#endif
    const int64_t noc = g->O - ob * 16 < 16 ? g->O - ob * 16 : 16;
    for (int t = 0; t < na; t++) {
        const int64_t tap = t / g->I, i = t % g->I;
        for (int64_t oc = 0; oc < noc; oc++)
            c->gw[mft__wmap_at(&c->gm, ob * 16 + oc, i, tap / g->KW, tap % g->KW)] = tile[t][oc];
    }
}

static void bwr_range(void *vctx, int64_t lo, int64_t hi) {
    const bwr_ctx *c = vctx;
    for (int64_t ob = lo; ob < hi; ob++) {
        if (c->na <= 12)
            bwr_body(12, c, ob);
        else
            bwr_body(BWR_MAX, c, ob);
    }
}

/* Pairs at most for an nChw16c x of one block (C = 1 kept in nChw16c):
 * 64,1,28,28->32 3x3 at 1 thread took 1.46-1.52 ms here against 1.75 in
 * the 3-wide kernel (blocked16_bww3.c: 8 channels a walk, 7 of them pad
 * lanes, x and grad_y read once per kernel row); with C = 3 (27 pairs) the
 * 3-wide kernel was faster, 2.07 against 2.51 ms (bench_conv --split,
 * 2026-11-28). */
#define BWR_BLOCKED 12

/* backward_weight of a first-layer x (Note [First-layer weight
 * gradient]): plain, or nChw16c of one block with at most BWR_BLOCKED
 * pairs. True when it applied (ran, or failed for scratch:
 * mft__kernel_failed); false, nothing written, otherwise. */
bool mft__conv_b16_bww_first_layer(const b16g *g0, const float *gy, const float *x, float *gw,
                                   const mft__conv_wmap *gm) {
    const int64_t na = g0->I * g0->KH * g0->KW;
    if (na > (g0->xblk ? (g0->I1 == 1 ? BWR_BLOCKED : 0) : BWR_MAX)) return false;
    b16g gp = *g0;
    float *xpad = NULL;
    if ((g0->ph || g0->pw) && !mft__conv_b16_pad_copy(g0, x, true, &gp, &xpad)) return true;
    bwr_ctx c;
    c.g = &gp;
    c.gy = gy;
    c.x = xpad ? xpad : x;
    c.gw = gw;
    c.gm = *gm;
    c.na = (int)(g0->I * g0->KH * g0->KW);
    for (int t = 0; t < c.na; t++) {
        const int64_t tap = t / g0->I, i = t % g0->I;
        c.off[t] = tap / g0->KW * g0->dh * gp.xH + tap % g0->KW * g0->dw * gp.xW + i * gp.xc;
    }
    mft__parallel_for_dynamic(0, g0->O1, 1, bwr_range, &c);
    mft__free(xpad);
    return true;
}

/* The 16x16 tile [ic][oc] of block pair (ob, ib) at tap (kh, kw): the sum
 * over (n, oh, ow) in order of x * grad_y. */
static void bww_tile(const bww_ctx *c, int64_t ob, int64_t ib, int64_t kh, int64_t kw, int64_t nic,
                     float tile[16][16]) {
    const b16g *g = c->g;
    const int64_t sH = g->xH, sC1 = g->xC1, sN = g->xN, xc = g->xc;
    const int64_t xs = g->sw * g->xW;
    const int64_t ysH = g->OW * 16, ysO1 = g->OH * ysH, ysN = g->O1 * ysO1;
    /* output pixels whose tap (kh, kw) is inside x */
    int64_t ohlo, ohhi, owlo, owhi;
    valid_range(g->OH, g->H, g->sh, kh * g->dh - g->ph, &ohlo, &ohhi);
    valid_range(g->OW, g->W, g->sw, kw * g->dw - g->pw, &owlo, &owhi);
#if CF_AVX512
    __m512 acc[16];
    for (int i = 0; i < 16; i++) acc[i] = _mm512_setzero_ps();
#else
    memset(tile, 0, 16 * 16 * sizeof(float));
#endif
    for (int64_t n = 0; n < g->N; n++)
        for (int64_t oh = ohlo; oh < ohhi; oh++) {
            const float *gp = c->gy + n * ysN + ob * ysO1 + oh * ysH + owlo * 16;
            const float *xp = c->x + n * sN + ib * sC1 + (oh * g->sh - g->ph + kh * g->dh) * sH +
                              (owlo * g->sw - g->pw + kw * g->dw) * g->xW;
#if CF_AVX512
            if (g->xblk) /* 16 lanes, the pad lanes zeros */
                for (int64_t ow = owlo; ow < owhi; ow++, gp += 16, xp += xs) {
                    const __m512 v = _mm512_loadu_ps(gp);
                    for (int i = 0; i < 16; i++)
                        acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(xp[i]), v, acc[i]);
                }
            else /* plain x: its real channels only, at their stride */
                for (int64_t ow = owlo; ow < owhi; ow++, gp += 16, xp += xs) {
                    const __m512 v = _mm512_loadu_ps(gp);
                    for (int i = 0; i < nic; i++)
                        acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(xp[i * xc]), v, acc[i]);
                }
#else
            const int64_t ni = g->xblk ? 16 : nic;
            for (int64_t ow = owlo; ow < owhi; ow++, gp += 16, xp += xs)
                for (int64_t i = 0; i < ni; i++)
                    for (int l = 0; l < 16; l++) tile[i][l] += xp[i * xc] * gp[l];
#endif
        }
#if CF_AVX512
    for (int i = 0; i < 16; i++) _mm512_storeu_ps(tile[i], acc[i]);
#endif
}

/* declared in blocked16_internal.h */
void mft__conv_b16_tiles_out(float *gw, const mft__conv_wmap *gm, int64_t KW, int64_t ob,
                             int64_t ib, int64_t noc, int64_t nic, int64_t t0, int64_t nt,
                             float tiles[][16][16]) {
    int64_t toff[MFT_B16_TILES_MAX]; /* grad_w offset of each tap */
    for (int64_t k = 0; k < nt; k++) toff[k] = (t0 + k) / KW * gm->kh + (t0 + k) % KW * gm->kw;
#if CF_AVX512
    if (gm->o0 == 1) { /* output lanes contiguous: a tile row is a vector */
        const __mmask16 m = (__mmask16)((1u << noc) - 1);
        for (int64_t ic = 0; ic < nic; ic++) {
            float *dst = gw + mft__wmap_at(gm, ob * 16, ib * 16 + ic, 0, 0);
            for (int64_t k = 0; k < nt; k++)
                _mm512_mask_storeu_ps(dst + toff[k], m, _mm512_loadu_ps(tiles[k][ic]));
        }
        return;
    }
#endif
    for (int64_t oc = 0; oc < noc; oc++)
        for (int64_t ic = 0; ic < nic; ic++) {
            float *dst = gw + mft__wmap_at(gm, ob * 16 + oc, ib * 16 + ic, 0, 0);
            for (int64_t k = 0; k < nt; k++) dst[toff[k]] = tiles[k][ic][oc];
        }
}

/* Note [nChw16c weight-gradient items]: a work item is one (ob, ib, tap)
 * tile, the tap fastest, so consecutive items reuse their x and grad_y
 * blocks; its 256 results land in grad_w through the map. Into a blocked
 * grad_w (OIhw16i16o, Ohwi16o) a tile is one contiguous run; into a plain
 * OIHW one its 256 elements are KH*KW floats apart, a cache line each, and
 * the next tap's item writes the neighbours in the same lines, on the other
 * thread as often as not. On 8,512,7,7->512 (9.4 MB of grad_w) that made
 * the kernel memory-bound at 2 threads: 14.5-14.8 ms against 16.7 at 1
 * (bench_conv --split, 2026-11-28). So with at most BWW_PAIR_TAPS taps
 * and at least 16 pairs (enough for both threads) an item is a block pair
 * with all its taps (c->pairs): the tiles are kept and written (o, i, tap)
 * in order, whole lines, or, into a blocked grad_w, as vectors of output
 * lanes. Pair items on a blocked grad_w too were 6% faster at 1 thread in
 * three of four alternating runs of 8,512,7,7->512 and equal at 2. The sums
 * are the same either way. Kernels 3 wide with stride 1 along W on a
 * packed nChw16c x take blocked16_bww3.c instead (Note [nChw16c 3-wide
 * weight gradient]), with the same items and sums. */
static void bww_range(void *vctx, int64_t lo, int64_t hi) {
    const bww_ctx *c = vctx;
    const b16g *g = c->g;
    const int64_t T = g->KH * g->KW, P = c->pairs ? 1 : T;
    for (int64_t it = lo; it < hi; it++) {
        const int64_t t0 = c->pairs ? 0 : it % P, r = it / P, ib = r % g->I1, ob = r / g->I1;
        const int64_t nic = g->I - ib * 16 < 16 ? g->I - ib * 16 : 16;
        const int64_t noc = g->O - ob * 16 < 16 ? g->O - ob * 16 : 16;
        if (nic < 16 && T * nic <= BWW_SMALL) { /* the whole pair in its tap-0 item */
            if (t0 == 0) bww_small(c, ob, ib, nic);
            continue;
        }
        float tiles[BWW_PAIR_TAPS][16][16]; /* [tap][ic][oc] */
        const int64_t nt = c->pairs ? T : 1;
        for (int64_t k = 0; k < nt; k++)
            bww_tile(c, ob, ib, (t0 + k) / g->KW, (t0 + k) % g->KW, nic, tiles[k]);
        mft__conv_b16_tiles_out(c->gw, &c->gm, g->KW, ob, ib, noc, nic, t0, nt, tiles);
    }
}

void mft__conv_b16_bww_tiles(const b16g *g, const float *gy, const float *x, float *gw,
                             const mft__conv_wmap *gm) {
    bww_ctx c;
    c.g = g;
    c.gy = gy;
    c.x = x;
    c.gw = gw;
    c.gm = *gm;
    /* few taps, pairs enough for both threads: Note [nChw16c weight-gradient items] */
    c.pairs = g->KH * g->KW <= BWW_PAIR_TAPS && g->O1 * g->I1 >= 16;
    const int64_t items = g->O1 * g->I1 * (c.pairs ? 1 : g->KH * g->KW);
    mft__parallel_for_dynamic(0, items, 1, bww_range, &c);
}
