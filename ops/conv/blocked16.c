/* ops/conv/blocked16.c — native nChw16c F32 conv2d (groups 1): forward,
 * backward_input (stride 1) and backward_weight giving or taking nChw16c
 * activations: y / grad_y packed MFT_NCHW16C, x packed nChw16c or (the
 * first layer of a network: forward and backward_weight) plain F32 at any
 * strides; the weight plain (O, I, kh, kw) at any strides or blocked by 16
 * (OIhw16i16o, Ohwi16o: Note [Conv weight maps], blocked16_weights.c),
 * grad_w in the weight's own layout; the bias plain 1-D. Registered in
 * mft__kernels_conv_fast (chains.c) under (op, MFT_NCHW16C, MFT_F32); the
 * entry points (entry.c) route such operands here instead of the counted
 * blocked fallback.
 *
 * Note [nChw16c direct convolution]
 * The forward is oneDNN's AVX-512 direct convolution: a tile is one output
 * row segment of up to 14 pixels (or, on rows of at most 7 pixels, whole
 * rows: Note [nChw16c row tiles]) times one or two blocks of 16 output
 * channels, one zmm accumulator per (pixel, block). For each input channel
 * block, each valid tap (kh, kw) and each of its 16 input channels the
 * tile loads the 16-output-channel weight vector(s) and FMAs them with the
 * broadcast input scalar of every pixel. The kernel reads the weight as
 * 16-float vectors of output channels, one per input channel, input
 * channels 16 floats apart: exactly oneDNN's OIhw16i16o, and Ohwi16o too
 * (its input channels are 16 floats apart, with no pad lanes of I). A
 * weight in either layout is read in place; any other (a plain OIHW
 * weight) is reordered per call into a zero-padded OIhw16i16o scratch:
 * O1*I1*KH*KW*256 floats (9.4 MB for 512x512x3x3, 147 KB for 64x64x3x3),
 * one read of the weight and one write of the scratch, in parallel. *Why
 * 16i16o and not 16o16i:* the forward broadcasts an input scalar against a
 * vector of output channels, so the output lanes must be innermost; the
 * transposed, flipped weight of backward_input is 16o16i in those terms and
 * is reordered per call (oneDNN keeps a separate weight for it too). A
 * plain x (the first layer: C = 1 or 3, NCHW or NHWC) is read at its
 * strides, its channel stride in place of nChw16c's 1. Padding costs no copy:
 * the rows of a tile run over the valid kh only, and the pixels whose
 * window crosses the left or right border run as one-pixel tiles over their
 * valid kw only; the interior pixels (every tap valid) run as 14-pixel
 * tiles. The last input block loops over its real channels only (C = 1:
 * one channel, not 16), so the first layer of a network needs no special
 * path. Every output element sums (input block, kh, kw, channel) in that
 * order whatever the tiling and thread count: the results do not depend on
 * the schedule. Pad lanes: the outputs are allocated without zeroing
 * (mft__tensor_alloc_unzeroed: one pass over memory less) and every tile
 * stores its pad lanes as exact zeros (a masked move, not the sums: 0 * inf
 * would be NaN).
 *
 * 3x3 convolutions with stride and dilation 1 run Winograd F(4x4, 3x3)
 * (winograd.c, Note [Winograd F(4x4, 3x3)]) where its size test says it
 * pays, forward, backward_input and backward_weight alike: its tile
 * transforms read and write nChw16c directly (mft__wino_geom.blocked), so
 * the blocked path keeps the NHWC path's algorithm without a conversion.
 *
 * 1x1 convolutions without padding run the 1x1 kernels of blocked16_1x1.c
 * (Note [nChw16c 1x1 convolution]) on AVX-512 builds: the forward on a
 * packed nChw16c x at any stride (a stride above 1 copies the sampled
 * pixels compact first), backward_input (stride 1) on grad_y,
 * backward_weight on any x; the forward sums in this kernel's order,
 * backward_weight in the order below, so the results are the same bits
 * either way.
 *
 * backward_input with stride 1 is the same kernel on grad_y with the
 * weight transposed (I <-> O) and flipped, padding d*(K-1) - p (callers
 * route stride > 1, or a padding above d*(K-1), through the fallback).
 *
 * backward_weight: kernels 3 wide with stride and dilation 1 along W on a
 * packed nChw16c x run blocked16_bww3.c (Note [nChw16c 3-wide weight
 * gradient]: three taps of a kernel row per walk, the same sums). Otherwise
 * work items are (output block, input block) with all its taps, or (output
 * block, input block, kh, kw) when there are few pairs or many taps (Note
 * [nChw16c weight-gradient items], blocked16_bww.c, with the first-layer
 * kernel of a plain x); each accumulates its 16x16 tiles (16
 * zmm, one per input channel, lanes the output channels) over every image
 * and output pixel in a fixed order (deterministic, thread-count
 * independent), broadcasting the input scalar and loading the grad_y
 * vector; a tile is written to grad_w through its weight map (plain
 * strides, or OIhw16i16o / Ohwi16o blocks whose pad lanes, zeroed at
 * allocation, are never written). */
#include <math.h>
#include "blocked16_1x1.h"
#include "blocked16_bww3.h"
#include "blocked16_internal.h"

/* ------------------------------------------------- weights (b16g: blocked16_internal.h) */
/* w(o, i, kh, kw) = w0[mft__wmap_at(&m, o, i, kh, kw)] (Note [Conv weight
 * maps]); kh / kw strides may be negative (backward_input's flip). */
typedef struct b16w {
    const float *w0;
    mft__conv_wmap m;
    bool tiles; /* blocked by 16 on O and I: whole 16x16 tiles, pads zero */
} b16w;

#define B16_NB 14    /* pixels per tile */
#define B16_PF 256   /* weight prefetch distance, floats (Note [nChw16c weight prefetch]) */
#define B16_RW_MAX 7 /* widest row of a row tile (two rows fill a tile) */

/* ---------------------------------------------------------------- tiles */
typedef struct tile_args {
    const float *x;    /* x at (n, ib 0, ih of khlo, iw of pixel 0 at kwlo) */
    int64_t ps;        /* pixel step in x (floats): sw*16 */
    int64_t sC1, sH;   /* x block and row strides */
    int64_t cs, px;    /* x channel and column strides (nChw16c: 1, 16) */
    int64_t nI1, lastic; /* input blocks; real channels of the last one */
    int64_t nkh, nkw;  /* valid taps: kh in [khlo, khlo+nkh), kw likewise */
    int64_t khlo, kwlo, dh, dw;
    const float *wt;   /* weight at (ob, ib 0, tap 0): 16 o lanes, i 16 apart */
    int64_t wsI1;      /* weight stride of one input block */
    int64_t wsO1;      /* weight stride of one output block */
    int64_t wskh, wskw; /* weight tap strides */
    const float *b16;  /* padded bias at ob */
    float *y;          /* y at (n, ob, oh, pixel 0) */
    int64_t ysO1;      /* y block stride */
    uint32_t m0, m1;   /* real output lanes of the two blocks (pad lanes stored as 0) */
} tile_args;

#if CF_AVX512
/* Note [nChw16c weight prefetch]: a tile streams its block pair's weights
 * (I1*KH*KW 16x16 tiles per block, 295 KB each for 512 input channels, 3x3)
 * from L2 once, two 64-byte lines per 16..28 FMAs, every line new: with
 * one 7-pixel row a tile (7x7) the forward ran well below oneDNN's at the
 * same FMA count. Each channel step prefetches the lines B16_PF floats
 * (one 16x16 tap, 16 steps) ahead into L1. Measured on 8,512,7,7->512
 * (bench_conv_onednn, 2026-11-28): 256 floats ran 1T ~7% faster than
 * without, 128 and 1024 no better or worse; 512 as good as 256 in one run
 * of two. Prefetch does not fault past the weight's end. */

/* NB pixels times OCB blocks; S1: x packed nChw16c at stride 1; RW > 0: the
 * pixels are NB / RW output rows of RW pixels (Note [nChw16c row tiles]),
 * row r at x + r*sH and y + r*RW*16 */
static inline __attribute__((always_inline)) void b16_tile(const int NB, const int OCB,
                                                           const int S1, const int RW,
                                                           const tile_args *a) {
    __m512 acc0[B16_NB], acc1[B16_NB];
    const __m512 bz0 = _mm512_loadu_ps(a->b16);
    const __m512 bz1 = OCB == 2 ? _mm512_loadu_ps(a->b16 + 16) : bz0;
    for (int j = 0; j < NB; j++) {
        acc0[j] = bz0;
        acc1[j] = bz1;
    }
    /* S1: x packed nChw16c at stride 1 (the common case, constant steps) */
    const int64_t ps = S1 ? 16 : a->ps, cs = S1 ? 1 : a->cs, px = S1 ? 16 : a->px;
    for (int64_t ib = 0; ib < a->nI1; ib++) {
        const int64_t nic = ib == a->nI1 - 1 ? a->lastic : 16;
        const float *xb = a->x + ib * a->sC1;
        const float *wb = a->wt + ib * a->wsI1;
        for (int64_t kh = 0; kh < a->nkh; kh++)
            for (int64_t kw = 0; kw < a->nkw; kw++) {
                const float *xp = xb + kh * a->dh * a->sH + kw * a->dw * px;
                const float *w0 = wb + (a->khlo + kh) * a->wskh + (a->kwlo + kw) * a->wskw;
                const float *w1 = w0 + a->wsO1;
                for (int64_t ic = 0; ic < nic; ic++, xp += cs) {
                    _mm_prefetch((const char *)(w0 + ic * 16 + B16_PF), _MM_HINT_T0);
                    if (OCB == 2) _mm_prefetch((const char *)(w1 + ic * 16 + B16_PF), _MM_HINT_T0);
                    const __m512 v0 = _mm512_loadu_ps(w0 + ic * 16);
                    const __m512 v1 = OCB == 2 ? _mm512_loadu_ps(w1 + ic * 16) : v0;
                    for (int j = 0; j < NB; j++) {
                        const int64_t xo = RW ? j / RW * a->sH + j % RW * ps : j * ps;
                        const __m512 bx = _mm512_set1_ps(xp[xo]);
                        acc0[j] = _mm512_fmadd_ps(bx, v0, acc0[j]);
                        if (OCB == 2) acc1[j] = _mm512_fmadd_ps(bx, v1, acc1[j]);
                    }
                }
            }
    }
    /* pad lanes as exact zeros (0 * inf would not be) */
    const __mmask16 k0 = (__mmask16)a->m0, k1 = (__mmask16)a->m1;
    for (int j = 0; j < NB; j++) {
        _mm512_storeu_ps(a->y + j * 16, _mm512_maskz_mov_ps(k0, acc0[j]));
        if (OCB == 2) _mm512_storeu_ps(a->y + a->ysO1 + j * 16, _mm512_maskz_mov_ps(k1, acc1[j]));
    }
}

typedef void (*tile_fn)(const tile_args *a);
#define B16_T(nb, ocb, s1)                                                                         \
    static void tile_##nb##_##ocb##_##s1(const tile_args *a) { b16_tile(nb, ocb, s1, 0, a); }
#define B16_TS(ocb, s1)                                                                            \
    B16_T(1, ocb, s1)                                                                              \
    B16_T(2, ocb, s1)                                                                              \
    B16_T(3, ocb, s1)                                                                              \
    B16_T(4, ocb, s1)                                                                              \
    B16_T(5, ocb, s1)                                                                              \
    B16_T(6, ocb, s1)                                                                              \
    B16_T(7, ocb, s1)                                                                              \
    B16_T(8, ocb, s1)                                                                              \
    B16_T(9, ocb, s1)                                                                              \
    B16_T(10, ocb, s1)                                                                             \
    B16_T(11, ocb, s1)                                                                             \
    B16_T(12, ocb, s1)                                                                             \
    B16_T(13, ocb, s1)                                                                             \
    B16_T(14, ocb, s1)
B16_TS(1, 0)
B16_TS(2, 0)
B16_TS(1, 1)
B16_TS(2, 1)
#define B16_ROW(ocb, s1)                                                                           \
    {NULL,                tile_1_##ocb##_##s1,  tile_2_##ocb##_##s1,  tile_3_##ocb##_##s1,         \
     tile_4_##ocb##_##s1, tile_5_##ocb##_##s1,  tile_6_##ocb##_##s1,  tile_7_##ocb##_##s1,         \
     tile_8_##ocb##_##s1, tile_9_##ocb##_##s1,  tile_10_##ocb##_##s1, tile_11_##ocb##_##s1,        \
     tile_12_##ocb##_##s1, tile_13_##ocb##_##s1, tile_14_##ocb##_##s1}
/* [ocb - 1][stride 1][nb] */
static const tile_fn g_tiles[2][2][B16_NB + 1] = {{B16_ROW(1, 0), B16_ROW(1, 1)},
                                                  {B16_ROW(2, 0), B16_ROW(2, 1)}};

static void run_tile(int nb, int ocb, bool s1, const tile_args *a) {
    g_tiles[ocb - 1][s1 ? 1 : 0][nb](a);
}

/* row tiles (stride 1, nChw16c x): m rows of rw pixels, m*rw <= 14, m >= 2 */
#define B16_R(rw, m, ocb)                                                                          \
    static void rtile_##rw##_##m##_##ocb(const tile_args *a) { b16_tile(rw * m, ocb, 1, rw, a); }
#define B16_RS(ocb)                                                                                \
    B16_R(2, 2, ocb) B16_R(2, 3, ocb) B16_R(2, 4, ocb) B16_R(2, 5, ocb) B16_R(2, 6, ocb)          \
    B16_R(2, 7, ocb) B16_R(3, 2, ocb) B16_R(3, 3, ocb) B16_R(3, 4, ocb) B16_R(4, 2, ocb)          \
    B16_R(4, 3, ocb) B16_R(5, 2, ocb) B16_R(6, 2, ocb) B16_R(7, 2, ocb)
B16_RS(1)
B16_RS(2)
#define B16_RROW(ocb)                                                                              \
    {{NULL},                                                                                       \
     {NULL},                                                                                       \
     {NULL, NULL, rtile_2_2_##ocb, rtile_2_3_##ocb, rtile_2_4_##ocb, rtile_2_5_##ocb,             \
      rtile_2_6_##ocb, rtile_2_7_##ocb},                                                           \
     {NULL, NULL, rtile_3_2_##ocb, rtile_3_3_##ocb, rtile_3_4_##ocb},                             \
     {NULL, NULL, rtile_4_2_##ocb, rtile_4_3_##ocb},                                              \
     {NULL, NULL, rtile_5_2_##ocb},                                                               \
     {NULL, NULL, rtile_6_2_##ocb},                                                               \
     {NULL, NULL, rtile_7_2_##ocb}}
/* [ocb - 1][rw][m] */
static const tile_fn g_rtiles[2][B16_RW_MAX + 1][B16_NB / 2 + 1] = {B16_RROW(1), B16_RROW(2)};

static void run_rows(int rw, int m, int ocb, const tile_args *a) { g_rtiles[ocb - 1][rw][m](a); }
#else
/* Portable: the same tile and summation order, one output block at a time;
 * rw > 0: nb / rw rows of rw pixels (Note [nChw16c row tiles]). Fused
 * multiply-adds where the target has them (the AVX-512 tile's bits), a
 * product and a sum (C11: not contracted) where fmaf would be a libm call. */
#ifdef FP_FAST_FMAF
#define B16_MADD(a, b, c) fmaf(a, b, c)
#else
#define B16_MADD(a, b, c) ((a) * (b) + (c))
#endif
static void run_tile_rows(int nb, int ocb, int rw, const tile_args *a) {
    for (int o = 0; o < ocb; o++)
        for (int j = 0; j < nb; j++) {
            float acc[16];
            for (int l = 0; l < 16; l++) acc[l] = a->b16[o * 16 + l];
            for (int64_t ib = 0; ib < a->nI1; ib++) {
                const int64_t nic = ib == a->nI1 - 1 ? a->lastic : 16;
                const int64_t xo = rw ? j / rw * a->sH + j % rw * a->ps : j * a->ps;
                const float *xb = a->x + ib * a->sC1 + xo;
                const float *wb = a->wt + o * a->wsO1 + ib * a->wsI1;
                for (int64_t kh = 0; kh < a->nkh; kh++)
                    for (int64_t kw = 0; kw < a->nkw; kw++) {
                        const float *xp = xb + kh * a->dh * a->sH + kw * a->dw * a->px;
                        const float *w0 = wb + (a->khlo + kh) * a->wskh + (a->kwlo + kw) * a->wskw;
                        for (int64_t ic = 0; ic < nic; ic++)
                            for (int l = 0; l < 16; l++)
                                acc[l] = B16_MADD(xp[ic * a->cs], w0[ic * 16 + l], acc[l]);
                    }
            }
            float *yp = a->y + o * a->ysO1 + j * 16;
            const uint32_t m = o ? a->m1 : a->m0;
            for (int l = 0; l < 16; l++) yp[l] = m >> l & 1u ? acc[l] : 0.0f;
        }
}

static void run_tile(int nb, int ocb, bool s1, const tile_args *a) {
    (void)s1;
    run_tile_rows(nb, ocb, 0, a);
}

static void run_rows(int rw, int m, int ocb, const tile_args *a) {
    run_tile_rows(rw * m, ocb, rw, a);
}
#endif

/* ---------------------------------------------------------------- forward driver */
typedef struct fwd_ctx {
    const b16g *g;
    const float *x, *wt, *b16;
    int64_t wsO1, wsI1, wskh, wskw; /* strides of wt (b16w's map, o0 1, i0 16) */
    float *y;
    int64_t OG; /* output block groups (of 2 blocks) */
    bool og_major;
    int64_t rows; /* output rows per tile (Note [nChw16c row tiles]) */
} fwd_ctx;

/* the fields of a tile of output blocks (ob, ob + 1) that do not depend on
 * its pixels; returns the number of blocks (1 or 2) */
static int tile_setup(const fwd_ctx *c, int64_t ob, tile_args *a) {
    const b16g *g = c->g;
    a->ps = g->sw * g->xW;
    a->sC1 = g->xC1;
    a->sH = g->xH;
    a->cs = g->xc;
    a->px = g->xW;
    a->nI1 = g->I1;
    a->lastic = g->I - (g->I1 - 1) * 16;
    a->dh = g->dh;
    a->dw = g->dw;
    a->wsI1 = c->wsI1;
    a->wsO1 = c->wsO1;
    a->wskh = c->wskh;
    a->wskw = c->wskw;
    a->wt = c->wt + ob * a->wsO1;
    a->b16 = c->b16 + ob * 16;
    a->ysO1 = g->OH * g->OW * 16;
    const int64_t n0 = g->O - ob * 16, n1 = g->O - (ob + 1) * 16;
    a->m0 = n0 >= 16 ? 0xffffu : (1u << n0) - 1u;
    a->m1 = n1 >= 16 ? 0xffffu : n1 > 0 ? (1u << n1) - 1u : 0u;
    return ob + 1 < g->O1 ? 2 : 1;
}

static void fwd_row(const fwd_ctx *c, int64_t n, int64_t og, int64_t oh) {
    const b16g *g = c->g;
    const int64_t ob = og * 2;
    tile_args a;
    const int ocb = tile_setup(c, ob, &a);
    const int64_t sH = g->xH, sN = g->xN;
    const int64_t ysH = g->OW * 16;
    const int64_t ih0 = oh * g->sh - g->ph;
    int64_t khlo, khhi;
    tap_range(ih0, g->dh, g->KH, g->H, &khlo, &khhi);
    a.nkh = khhi - khlo;
    a.khlo = khlo;
    float *yrow = c->y + (n * g->O1 + ob) * a.ysO1 + oh * ysH;
    const float *xn = c->x + n * sN + (a.nkh > 0 ? (ih0 + khlo * g->dh) * sH : 0);
    const bool s1 = g->sw == 1 && g->xblk;
    /* interior pixels: every kw valid */
    int64_t ilo = (g->pw + g->sw - 1) / g->sw;
    const int64_t last = g->W - 1 + g->pw - (g->KW - 1) * g->dw;
    int64_t ihi = last < 0 ? 0 : last / g->sw + 1;
    if (ihi > g->OW) ihi = g->OW;
    if (ilo > ihi) ilo = ihi;
    for (int64_t ow = 0; ow < g->OW;) {
        int nb;
        if (ow >= ilo && ow < ihi) {
            nb = ihi - ow < B16_NB ? (int)(ihi - ow) : B16_NB;
            a.kwlo = 0;
            a.nkw = g->KW;
        } else {
            nb = 1;
            int64_t kwlo, kwhi;
            tap_range(ow * g->sw - g->pw, g->dw, g->KW, g->W, &kwlo, &kwhi);
            a.kwlo = kwlo;
            a.nkw = kwhi - kwlo;
        }
        a.y = yrow + ow * 16;
        const int64_t iw = ow * g->sw - g->pw + a.kwlo * g->dw;
        a.x = a.nkw > 0 && a.nkh > 0 ? xn + iw * g->xW : xn;
        if (a.nkw == 0) a.nkh = 0, a.nkw = 0;
        run_tile(nb, ocb, s1, &a);
        a.nkh = khhi - khlo;
        ow += nb;
    }
}

/* Note [nChw16c row tiles]: a row of OW < 14 pixels fills only OW of a
 * tile's 14 pixel slots (7x7: 7 of 14, and 7 tiles per plane). Where every
 * tap of every pixel lies inside x (no padding left: the zero-bordered copy
 * of Note [nChw16c padded input], or an unpadded x) and the stride is 1, a
 * tile instead covers m = 14 / OW whole output rows (m >= 2: OW <= 7): its
 * pixel (r, c) reads x at row r, column c of the tile's first row (rows sH
 * apart) and writes y at r*OW + c, contiguous since y's rows are. 7x7:
 * tiles of 2, 2, 2 and 1 rows, 14 slots filled in three of them. Each
 * element sums (input block, kh, kw, channel) as the row tiles do: the
 * results are bit-identical to them and to any tiling or thread count.
 * Rejected: tiles of 14 consecutive flat pixels q = oh*W + ow of the
 * padded x, running across row ends (the W - OW pixels past each row end
 * computed and not stored): on 7x7 with padding 1 they compute 61 slots
 * for 49 pixels and the forward ran 15% slower than with one 7-pixel tile
 * a row (bench_conv_onednn --shape 8,512,7,7,512,3,1, 2026-11-28). Rows of
 * 8..13 pixels keep one tile a row (two rows would not fit 14 slots);
 * 14x14 fills its tiles already. Work items are (image, block pair, row
 * tile). docs/spec.md §7.10. */
static int64_t b16_rows_per_tile(const b16g *g) {
    if (!g->xblk || g->sh != 1 || g->sw != 1 || g->ph || g->pw || g->OW < 2 ||
        g->OW > B16_RW_MAX || g->OH < 2)
        return 1;
    return B16_NB / g->OW;
}

/* row tile t (rows t*m .. of the plane (n, og)) */
static void fwd_rows(const fwd_ctx *c, int64_t n, int64_t og, int64_t t) {
    const b16g *g = c->g;
    const int64_t ob = og * 2;
    tile_args a;
    const int ocb = tile_setup(c, ob, &a);
    const int64_t oh0 = t * c->rows;
    const int m = g->OH - oh0 < c->rows ? (int)(g->OH - oh0) : (int)c->rows;
    a.nkh = g->KH;
    a.khlo = 0;
    a.nkw = g->KW;
    a.kwlo = 0;
    a.x = c->x + n * g->xN + oh0 * g->xH;
    a.y = c->y + (n * g->O1 + ob) * a.ysO1 + oh0 * g->OW * 16;
    if (m == 1)
        run_tile((int)g->OW, ocb, true, &a);
    else
        run_rows((int)g->OW, m, ocb, &a);
}

static void fwd_range(void *vctx, int64_t lo, int64_t hi) {
    const fwd_ctx *c = vctx;
    const b16g *g = c->g;
    const int64_t per = cdiv(g->OH, c->rows);
    for (int64_t it = lo; it < hi; it++) {
        const int64_t t = it % per, r = it / per;
        int64_t n, og;
        if (c->og_major) {
            n = r % g->N;
            og = r / g->N;
        } else {
            og = r % c->OG;
            n = r / c->OG;
        }
        if (c->rows > 1)
            fwd_rows(c, n, og, t);
        else
            fwd_row(c, n, og, t);
    }
}

/* ---------------------------------------------------------------- padded input
 * Note [nChw16c padded input]: the pixels whose window crosses the left or
 * right border run as one-pixel tiles, which load two weight vectors per
 * two FMAs: on a 7x7 image (padding 1) those 2 pixels of 7 took as long as
 * the other 5 (perf: tile_1_2_1 30%, tile_5_2_1 28% of 8x512x7x7, 3x3).
 * Where such pixels are more than 1/16 of a row, x is copied once into a
 * zero-bordered scratch, nChw16c (N, I1, H + 2ph, W + 2pw, 16) or, for a
 * plain x (a first layer), NCHW (N, I, H + 2ph, W + 2pw), and every pixel
 * runs in full-width tiles: the taps over the border then add 0 * w, which
 * leaves each sum's value as it was (only the sign of a zero sum may
 * differ). The copy reads x once and writes it once with its border. */
static bool b16_pad_pays(const b16g *g) {
    if (g->ph == 0 && g->pw == 0) return false;
    int64_t ilo = (g->pw + g->sw - 1) / g->sw;
    const int64_t last = g->W - 1 + g->pw - (g->KW - 1) * g->dw;
    int64_t ihi = last < 0 ? 0 : last / g->sw + 1;
    if (ihi > g->OW) ihi = g->OW;
    if (ilo > ihi) ilo = ihi;
    return (g->OW - (ihi - ilo)) * 16 > g->OW;
}

typedef struct pad_ctx {
    const b16g *g, *p; /* the geometry of x and of the padded copy */
    const float *x;
    float *xp;
} pad_ctx;

/* items n*I + c: one padded plane of a plain x, at x's strides */
static void pad_plain_range(void *vctx, int64_t lo, int64_t hi) {
    const pad_ctx *c = vctx;
    const b16g *g = c->g, *p = c->p;
    for (int64_t it = lo; it < hi; it++) {
        const float *src = c->x + (it / g->I) * g->xN + (it % g->I) * g->xc;
        float *dst = c->xp + it * p->xc;
        memset(dst, 0, (size_t)p->xc * sizeof(float));
        for (int64_t h = 0; h < g->H; h++)
            for (int64_t w = 0; w < g->W; w++)
                dst[(h + g->ph) * p->xH + w + g->pw] = src[h * g->xH + w * g->xW];
    }
}

/* items n*I1 + ib: one padded channel-block plane */
static void pad_range(void *vctx, int64_t lo, int64_t hi) {
    const pad_ctx *c = vctx;
    const b16g *g = c->g, *p = c->p;
    for (int64_t it = lo; it < hi; it++) {
        const float *src = c->x + (it / g->I1) * g->xN + (it % g->I1) * g->xC1;
        float *dst = c->xp + it * p->xC1;
        const size_t row = (size_t)(g->W * 16) * sizeof(float);
        memset(dst, 0, (size_t)(g->ph * p->xH + g->pw * 16) * sizeof(float));
        for (int64_t h = 0; h < g->H; h++) {
            float *d = dst + (h + g->ph) * p->xH + g->pw * 16;
            memcpy(d, src + h * g->xH, row);
            /* the right border of this row and the left one of the next */
            const int64_t gap = h + 1 < g->H ? 2 * g->pw : g->pw + g->ph * p->W;
            memset(d + g->W * 16, 0, (size_t)(gap * 16) * sizeof(float));
        }
    }
}

/* declared in blocked16_internal.h */
bool mft__conv_b16_pad_copy(const b16g *g0, const float *x, bool plain, b16g *gpo,
                            float **xpad) {
    b16g gp = *g0;
    gp.H = g0->H + 2 * g0->ph;
    gp.W = g0->W + 2 * g0->pw;
    gp.ph = gp.pw = 0;
    const bool blk = g0->xblk && !plain;
    gp.xblk = blk;
    if (blk) {
        gp.xW = 16;
        gp.xH = gp.W * 16;
        gp.xC1 = gp.H * gp.xH;
        gp.xN = g0->I1 * gp.xC1;
    } else {
        gp.xW = 1;
        gp.xH = gp.W;
        gp.xc = gp.H * gp.W;
        gp.xC1 = 16 * gp.xc;
        gp.xN = g0->I * gp.xc;
    }
    const size_t pbytes = (size_t)(g0->N * gp.xN) * sizeof(float);
    *xpad = mft__alloc(pbytes, 64);
    if (!*xpad) {
        mft__kernel_nomem(pbytes);
        return false;
    }
    pad_ctx pc = {g0, &gp, x, *xpad};
    if (blk)
        mft__parallel_for(0, g0->N * g0->I1, 1, pad_range, &pc);
    else
        mft__parallel_for(0, g0->N * g0->I, 1, pad_plain_range, &pc);
    *gpo = gp;
    return true;
}

/* the forward of a plain x whose every tap lies inside it (Note [nChw16c
 * first-layer forward], blocked16_first.c); c holds the weight's strides */
static void b16_first_forward(const b16g *g, const fwd_ctx *c, const float *x, const float *b16,
                              float *y) {
    mft__b16_first f;
    memset(&f, 0, sizeof f);
    f.N = g->N;
    f.O = g->O;
    f.O1 = g->O1;
    f.OH = g->OH;
    f.OW = g->OW;
    f.x = x;
    f.xN = g->xN;
    f.rs = g->sh * g->xH;
    f.ps = g->sw * g->xW;
    f.na = (int)(g->I * g->KH * g->KW);
    for (int t = 0; t < f.na; t++) {
        const int64_t tap = t / g->I, i = t % g->I, kh = tap / g->KW, kw = tap % g->KW;
        f.off[t] = kh * g->dh * g->xH + kw * g->dw * g->xW + i * g->xc;
        f.woff[t] = kh * c->wskh + kw * c->wskw + i * 16;
    }
    f.w = c->wt;
    f.wsO1 = c->wsO1;
    f.b16 = b16;
    f.y = y;
    mft__conv_b16_first_run(&f);
}

/* ---------------------------------------------------------------- 1x1
 * Note [nChw16c 1x1 convolution] (blocked16_1x1.c): a 1x1 kernel without
 * padding on a packed nChw16c x (grad_y), forward and backward_input; its
 * backward_weight on any x. */
static bool b16_1x1_applies(const b16g *g) {
    return mft__conv_b16_1x1_available() && g->xblk && g->KH == 1 && g->KW == 1 && g->ph == 0 &&
           g->pw == 0;
}

/* the forward of b16_1x1_applies(g) at stride 1 (mft__conv_b16_fwd hands
 * a larger stride over as the stride-1 convolution of the sampled pixels);
 * c holds the weight's OIhw16i16o strides. The pixels of a packed nChw16c
 * plane are contiguous across rows: read in place. */
static void b16_1x1_forward(const b16g *g, const fwd_ctx *c, const float *x, const float *b16,
                            float *y) {
    const mft__b16_1x1 f = {.N = g->N, .S = g->OH * g->OW, .I = g->I, .O = g->O, .I1 = g->I1,
                            .O1 = g->O1, .x = x, .xN = g->xN, .xC1 = g->xC1, .w = c->wt,
                            .wsO1 = c->wsO1, .wsI1 = c->wsI1, .b16 = b16, .y = y};
    mft__conv_b16_1x1_forward(&f);
}

/* Floats of scratch b16_weight_tiles needs for w: none when w is read in
 * place. */
static size_t b16_weight_scratch(const b16w *w, int64_t O, int64_t I, int64_t KH, int64_t KW) {
    return mft__wmap_direct(&w->m) ? 0 : (size_t)(cdiv(O, 16) * cdiv(I, 16) * KH * KW * 256);
}

/* The weight as 16x16 tiles [16i][16o] for the kernels, into *wt and its
 * strides (block of O, block of I, kh, kw; input channel 16, output lane
 * 1): an OIhw16i16o / Ohwi16o w in place, any other reordered into
 * scratch (b16_weight_scratch floats). */
static void b16_weight_tiles(const b16w *w, int64_t O, int64_t I, int64_t KH, int64_t KW,
                             float *scratch, const float **wt, int64_t st[4]) {
    if (mft__wmap_direct(&w->m)) {
        *wt = w->w0;
        st[0] = w->m.o1, st[1] = w->m.i1, st[2] = w->m.kh, st[3] = w->m.kw;
        return;
    }
    mft__conv_b16_reorder(w->w0, &w->m, w->tiles, O, I, KH, KW, scratch);
    *wt = scratch;
    st[3] = 256, st[2] = KW * 256, st[1] = KH * KW * 256, st[0] = cdiv(I, 16) * st[1];
}

/* y = conv(x, w) + bias on nChw16c y (x packed nChw16c or plain); false
 * when a scratch allocation failed (mft__kernel_nomem called). */
static bool b16_forward(const b16g *g0, const b16w *w, const float *bias, int64_t bstride,
                        const float *x, float *y) {
    b16g gp;
    const b16g *g = g0;
    float *xpad = NULL;
    /* a plain x with few (tap, channel) pairs: Note [nChw16c first-layer
     * forward], over the zero-bordered copy whenever x is padded. An
     * nChw16c x with one block and as few pairs (C = 1 kept in nChw16c)
     * runs it too: its offsets are x's strides either way, its order the
     * direct kernel's for one block. Its zero-bordered copy is plain NCHW,
     * the real channels only (a 16-lane copy of a 1-channel x was a third
     * of the forward's time on 64,1,28,28->32 3x3). */
    const bool first = (!g0->xblk || g0->I1 == 1) &&
                       mft__conv_b16_first_applies(g0->I * g0->KH * g0->KW);
    if (first ? g0->ph || g0->pw : b16_pad_pays(g0)) { /* Note [nChw16c padded input] */
        if (!mft__conv_b16_pad_copy(g0, x, first, &gp, &xpad)) return false;
        x = xpad;
        g = &gp;
    }
    const size_t nwt = b16_weight_scratch(w, g->O, g->I, g->KH, g->KW);
    const size_t nb = (size_t)(g->O1 * 16);
    const size_t bytes = (nwt + nb) * sizeof(float);
    float *wt = mft__alloc(bytes, 64);
    if (!wt) {
        mft__free(xpad);
        mft__kernel_nomem(bytes);
        return false;
    }
    float *b16 = wt + nwt;
    for (int64_t o = 0; o < g->O1 * 16; o++)
        b16[o] = bias && o < g->O ? bias[o * bstride] : 0.0f;
    fwd_ctx c;
    int64_t st[4];
    b16_weight_tiles(w, g->O, g->I, g->KH, g->KW, wt, &c.wt, st);
    c.wsO1 = st[0], c.wsI1 = st[1], c.wskh = st[2], c.wskw = st[3];
    if (b16_1x1_applies(g) && g->sh == 1 && g->sw == 1) {
        b16_1x1_forward(g, &c, x, b16, y);
        mft__free(wt);
        mft__free(xpad);
        return true;
    }
    if (first) {
        b16_first_forward(g, &c, x, b16, y);
        mft__free(wt);
        mft__free(xpad);
        return true;
    }
    c.g = g;
    c.x = x;
    c.b16 = b16;
    c.y = y;
    c.OG = (g->O1 + 1) / 2;
    /* weights of one block pair above one image's input: keep a weight
     * group hot across images */
    c.og_major = (int64_t)(32 * g->I1 * 16 * g->KH * g->KW) > g->I1 * g->H * g->W * 16;
    c.rows = b16_rows_per_tile(g); /* Note [nChw16c row tiles] */
    const int64_t items = g->N * c.OG * cdiv(g->OH, c.rows);
    mft__parallel_for_dynamic(0, items, cf_chunk(items), fwd_range, &c);
    mft__free(wt);
    mft__free(xpad);
    return true;
}

/* ---------------------------------------------------------------- kernel entries */
#define B16PTR(t) ((float *)(void *)mft__tensor_ptr(t))

/* geometry of the forward convolution x (N, I, H, W) -> y (N, O, OH, OW) */
static b16g geom_b16(const mft_kernel_args *a, const mft_tensor *x, const mft_tensor *y,
                     const mft_tensor *w) {
    const mft_conv_params *p = a->params;
    b16g g;
    g.N = x->sizes[0];
    g.I = x->sizes[1];
    g.H = x->sizes[2];
    g.W = x->sizes[3];
    g.O = y->sizes[1];
    g.OH = y->sizes[2];
    g.OW = y->sizes[3];
    g.KH = w->sizes[2];
    g.KW = w->sizes[3];
    g.sh = p->stride[0];
    g.sw = p->stride[1];
    g.ph = p->padding[0];
    g.pw = p->padding[1];
    g.dh = p->dilation[0];
    g.dw = p->dilation[1];
    g.I1 = cdiv(g.I, 16);
    g.O1 = cdiv(g.O, 16);
    g.xblk = x->nblocks > 0; /* packed nChw16c (the entry checks) */
    g.xN = x->strides[0];
    g.xc = g.xblk ? 1 : x->strides[1];
    g.xC1 = g.xblk ? x->strides[1] : 16 * x->strides[1];
    g.xH = x->strides[2];
    g.xW = x->strides[3];
    return g;
}

/* the weight map of w (the entry admits only weights that have one) */
static b16w weight_b16(const mft_tensor *w) {
    b16w r;
    r.w0 = (const float *)(const void *)mft__tensor_ptr(w);
    if (!mft__conv_wmap_of(w, &r.m)) memset(&r.m, 0, sizeof r.m);
    r.tiles = w->nblocks == 2;
    return r;
}

/* Winograd F(4x4, 3x3) is legal for g: 3x3, stride and dilation 1, nChw16c
 * x; its size test (winograd.c: for nChw16c, Note [Winograd on few tiles])
 * decides whether it pays. */
static bool b16_wino_geom_ok(const b16g *g) {
    return cf_mode() == 0 && g->xblk && g->KH == 3 && g->KW == 3 && g->sh == 1 && g->sw == 1 &&
           g->dh == 1 && g->dw == 1;
}

/* Winograd F(4x4, 3x3) (winograd.c) on the nChw16c buffers of the forward
 * convolution g with weight w: true when it applied (and ran, or failed for
 * scratch: mft__kernel_failed); false, nothing written, otherwise. */
static bool b16_wino(const b16g *g, const b16w *w, const float *bias, int64_t bstride,
                     const float *x, float *y, const char *name) {
    if (!b16_wino_geom_ok(g)) return false;
    const mft__wino_geom wg = {g->N,  g->H,  g->W,  g->I,      g->O, g->OH, g->OW, g->ph,
                               g->pw, w->w0, {0},   bias,      bstride, true,  &w->m};
    if (!mft__conv_wino_applies(&wg)) return false;
    if (mft__conv_wino_forward(&wg, x, y)) mft__dispatch_report_as(name);
    return true;
}

/* The pixels (oh*sh, ow*sw) of x, a packed nChw16c copy (pad lanes zero)
 * made by the tensor layer's copy between layouts (not counted: a
 * kernel's scratch); NULL when an allocation failed (mft__kernel_nomem
 * called). */
static mft_tensor *b16_sampled(const mft_tensor *x, const b16g *g) {
    const char *fn = "conv2d";
    mft__view_note note;
    mft_tensor *vh = mft__view_slice(fn, x, 2, 0, (g->OH - 1) * g->sh + 1, g->sh, &note);
    mft_tensor *v = vh ? mft__view_slice(fn, vh, 3, 0, (g->OW - 1) * g->sw + 1, g->sw, &note)
                       : NULL;
    mft_tensor_release(vh);
    /* zeroed only where there are pad lanes (the copy writes every element) */
    mft_tensor *xs = NULL;
    if (v)
        xs = g->I % 16 ? mft__tensor_alloc(fn, 4, v->sizes, MFT_F32, MFT_NCHW16C)
                       : mft__tensor_alloc_unzeroed(fn, 4, v->sizes, MFT_F32, MFT_NCHW16C);
    if (xs) mft__copy_kernel(xs, v);
    mft_tensor_release(v);
    if (!xs) mft__kernel_nomem((size_t)(g->N * g->I1 * g->OH * g->OW * 16) * sizeof(float));
    return xs;
}

void mft__conv_b16_fwd(const mft_kernel_args *a) {
    const mft_tensor *x = a->inputs[0], *w = a->inputs[1], *y = a->outputs[0];
    const mft_conv_params *p = a->params;
    b16g g = geom_b16(a, x, y, w);
    const b16w ww = weight_b16(w);
    const float *bias = p->bias ? (const float *)(const void *)mft__tensor_ptr(p->bias) : NULL;
    const int64_t bs = p->bias ? p->bias->strides[0] : 0;
    if (b16_wino(&g, &ww, bias, bs, B16PTR(x), B16PTR(y), "conv2d.nchw16c.f32.winograd_f4x3"))
        return;
    mft_tensor *xs = NULL;
    if (b16_1x1_applies(&g) && (g.sh > 1 || g.sw > 1)) {
        /* a strided 1x1 conv is the stride-1 conv of the sampled pixels
         * (Note [nChw16c 1x1 convolution]) */
        if (!(xs = b16_sampled(x, &g))) return;
        g = geom_b16(a, xs, y, w);
        g.sh = g.sw = 1;
        x = xs;
    }
    b16_forward(&g, &ww, bias, bs, B16PTR(x), B16PTR(y));
    mft_tensor_release(xs);
}

/* grad_x = the stride-1 forward convolution of grad_y with the transposed,
 * flipped weight and padding d*(K-1) - p (the entry routes only such
 * calls here). */
void mft__conv_b16_bwd_in(const mft_kernel_args *a) {
    const mft_tensor *gy = a->inputs[0], *w = a->inputs[1], *gx = a->outputs[0];
    const b16g f = geom_b16(a, gx, gy, w);
    const b16w f0 = weight_b16(w);
    if (f.I1 == 1 && cf_mode() == 0 && mft__conv_b16_lanes_applies(f.I, f.KH, f.KW)) {
        /* few channels of x: Note [nChw16c backward_input by lanes] */
        const size_t bytes = b16_weight_scratch(&f0, f.O, f.I, f.KH, f.KW) * sizeof(float);
        float *scratch = bytes ? mft__alloc(bytes, 64) : NULL;
        if (bytes && !scratch) {
            mft__kernel_nomem(bytes);
            return;
        }
        mft__b16_lanes b = {f.N,  f.I,  f.O,  f.O1, f.H,        f.W,            f.OH,
                            f.OW, f.KH, f.KW, f.ph, f.pw,       f.dh,           f.dw,
                            B16PTR(gy), gy->strides[0], B16PTR(gx), gx->strides[0], gx->strides[2],
                            NULL, {0}};
        b16_weight_tiles(&f0, f.O, f.I, f.KH, f.KW, scratch, &b.w, b.ws);
        mft__conv_b16_lanes_bwd_in(&b);
        mft__dispatch_report_as("conv2d_backward_input.nchw16c.f32.lanes");
        mft__free(scratch);
        return;
    }
    b16g g = f;
    g.I = f.O;
    g.O = f.I;
    g.I1 = f.O1;
    g.O1 = f.I1;
    g.H = f.OH;
    g.W = f.OW;
    g.OH = f.H;
    g.OW = f.W;
    g.sh = g.sw = 1;
    g.ph = f.dh * (f.KH - 1) - f.ph;
    g.pw = f.dw * (f.KW - 1) - f.pw;
    g.xblk = true; /* grad_y packed nChw16c */
    g.xN = gy->strides[0];
    g.xC1 = gy->strides[1];
    g.xc = 1;
    g.xH = gy->strides[2];
    g.xW = gy->strides[3];
    /* the weight transposed (I <-> O) and flipped: w'(o, i, kh, kw) =
     * w(i, o, KH-1-kh, KW-1-kw) */
    b16w ww;
    ww.w0 = f0.w0 + (f.KH - 1) * f0.m.kh + (f.KW - 1) * f0.m.kw;
    ww.m = (mft__conv_wmap){f0.m.i1, f0.m.i0, f0.m.o1, f0.m.o0, -f0.m.kh, -f0.m.kw};
    ww.tiles = f0.tiles;
    if (b16_wino(&g, &ww, NULL, 0, B16PTR(gy), B16PTR(gx),
                 "conv2d_backward_input.nchw16c.f32.winograd_f4x3"))
        return;
    b16_forward(&g, &ww, NULL, 0, B16PTR(gy), B16PTR(gx));
}

void mft__conv_b16_bwd_w(const mft_kernel_args *a) {
    const mft_tensor *gy = a->inputs[0], *x = a->inputs[1], *gwt = a->outputs[0];
    const b16g g = geom_b16(a, x, gy, gwt);
    const float *gyp = B16PTR(gy), *xp = B16PTR(x);
    float *gw = B16PTR(gwt);
    mft__conv_wmap gm;
    if (!mft__conv_wmap_of(gwt, &gm)) memset(&gm, 0, sizeof gm);
    if (b16_wino_geom_ok(&g)) {
        const mft__wino_geom wg = {g.N,  g.H, g.W,  g.I, g.O,  g.OH,  g.OW, g.ph,
                                   g.pw, NULL, {0}, NULL, 0,  true, &gm};
        const int64_t gws[5] = {0, 0, 0, 0, 0}; /* unused: wg.wmap addresses grad_w */
        if (mft__conv_wino_applies(&wg) && mft__conv_wino_backward_weight(&wg, gyp, xp, gw, gws)) {
            mft__dispatch_report_as("conv2d_backward_weight.nchw16c.f32.winograd_f4x3");
            return;
        }
        if (mft__kernel_failed()) return;
    }
    if (mft__conv_b16_bww_first_layer(&g, gyp, xp, gw, &gm)) return;
    if (mft__conv_b16_1x1_available() && g.KH == 1 && g.KW == 1 && g.ph == 0 && g.pw == 0) {
        /* Note [nChw16c 1x1 convolution] */
        const mft__b16_1x1_bww b = {g.N, g.OH, g.OW, g.I,  g.O,  g.I1,        g.O1,        gyp,
                                    xp,  g.xN, g.xC1, g.xc, g.sh * g.xH, g.sw * g.xW, gw, &gm};
        mft__conv_b16_1x1_backward_weight(&b);
        return;
    }
    if (mft__conv_b16_bww3_available() && cf_mode() == 0 && g.xblk && g.KW == 3 && g.sw == 1 &&
        g.dw == 1 && g.KH <= MFT_B16_BWW3_MAX_KH) { /* Note [nChw16c 3-wide weight gradient] */
        const mft__b16_bww3 b = {g.N,  g.H,  g.W,  g.OH, g.OW, g.KH, g.I,  g.O,   g.I1, g.O1,
                                 g.sh, g.ph, g.dh, g.pw, gyp,  xp,   g.xN, g.xC1, g.xH, gw, &gm};
        mft__conv_b16_bww3(&b);
        mft__dispatch_report_as("conv2d_backward_weight.nchw16c.f32.direct_kw3");
        return;
    }
    mft__conv_b16_bww_tiles(&g, gyp, xp, gw, &gm); /* Note [nChw16c weight-gradient items] */
}

/* grad_b (O) = the sum of grad_y over images and pixels, per block in the
 * order (n, pixel); deterministic. */
typedef struct gb_ctx {
    const float *gy;
    float *gb;
    int64_t N, O, O1, S;
} gb_ctx;

static void gb_range(void *vctx, int64_t lo, int64_t hi) {
    const gb_ctx *c = vctx;
    for (int64_t ob = lo; ob < hi; ob++) {
        float acc[16] = {0};
        for (int64_t n = 0; n < c->N; n++) {
            const float *p = c->gy + (n * c->O1 + ob) * c->S * 16;
#if CF_AVX512
            __m512 v = _mm512_loadu_ps(acc);
            for (int64_t q = 0; q < c->S; q++) v = _mm512_add_ps(v, _mm512_loadu_ps(p + q * 16));
            _mm512_storeu_ps(acc, v);
#else
            for (int64_t q = 0; q < c->S; q++)
                for (int l = 0; l < 16; l++) acc[l] += p[q * 16 + l];
#endif
        }
        for (int64_t l = 0; l < 16 && ob * 16 + l < c->O; l++) c->gb[ob * 16 + l] = acc[l];
    }
}

mft_tensor *mft__conv_b16_grad_bias(const char *fn, const mft_tensor *gy) {
    const int64_t O = gy->sizes[1];
    mft_tensor *gb = mft__tensor_alloc(fn, 1, &O, MFT_F32, MFT_CONTIGUOUS);
    if (!gb) return NULL;
    gb_ctx c = {B16PTR(gy), B16PTR(gb), gy->sizes[0], O, cdiv(O, 16),
                gy->sizes[2] * gy->sizes[3]};
    mft__parallel_for(0, c.O1, 1, gb_range, &c);
    return gb;
}
