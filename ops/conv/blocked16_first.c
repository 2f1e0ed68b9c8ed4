/* ops/conv/blocked16_first.c — the nChw16c forward convolution of a
 * network's first layer (blocked16.c hands it over): an F32 x with few
 * (tap, channel) pairs (C = 1, 3x3: 9), plain at its strides or nChw16c of
 * one channel block (its channel stride 1), every tap of every output pixel
 * inside x (the zero-bordered copy of Note [nChw16c padded input], or an
 * unpadded x), y packed nChw16c, the weight read through the forward
 * kernel's map (OIhw16i16o / Ohwi16o in place, else its reordered scratch).
 *
 * Note [nChw16c first-layer forward]
 * The general tile (blocked16.c) reloads the weight vectors of every tap
 * for each 14-pixel tile and keeps 28 accumulators; with one input channel
 * a tap is a single FMA per pixel and block, so the tile spent its time
 * entering and leaving its loop nest (accumulators spilled around the tap
 * loops, 20 GFLOP/s on 64x1x28x28 -> 32, 3x3). Here a work item is one
 * output row of one block pair: the na <= 9 weight vectors of each block
 * are loaded once into registers (18 zmm for two blocks), then the row runs
 * in groups of NB pixels (6 for two blocks, 12 for one), each group na
 * broadcasts of x per pixel and na FMAs per pixel and block, stored once.
 * A row whose width is not a multiple of NB ends with the group of its last
 * NB pixels (overlapping the previous group: the same values written again
 * by the same thread), rows narrower than NB run pixel by pixel. Every
 * element starts at its bias and adds x * w over the pairs (kh, kw, channel)
 * in that order: the general tile's order, so the results are bit-identical
 * to it at any tiling and thread count. Pad lanes are stored as zeros (a
 * masked move). AVX-512 builds only; elsewhere blocked16.c keeps its tile. */
#include "conv_internal.h"

#if CF_AVX512
static inline __attribute__((always_inline)) void first_group(const int NA, const int OCB,
                                                              const int NB,
                                                              const mft__b16_first *f,
                                                              const __m512 *w0, const __m512 *w1,
                                                              const float *x, float *y,
                                                              int64_t ysO1) {
    __m512 acc0[12], acc1[12];
    const __m512 bz0 = _mm512_loadu_ps(f->b16), bz1 = OCB == 2 ? _mm512_loadu_ps(f->b16 + 16) : bz0;
    for (int j = 0; j < NB; j++) {
        acc0[j] = bz0;
        acc1[j] = bz1;
    }
    for (int t = 0; t < NA; t++) {
        const float *xt = x + f->off[t];
        for (int j = 0; j < NB; j++) {
            const __m512 bx = _mm512_set1_ps(xt[j * f->ps]);
            acc0[j] = _mm512_fmadd_ps(bx, w0[t], acc0[j]);
            if (OCB == 2) acc1[j] = _mm512_fmadd_ps(bx, w1[t], acc1[j]);
        }
    }
    const __mmask16 k0 = (__mmask16)f->m0, k1 = (__mmask16)f->m1;
    for (int j = 0; j < NB; j++) {
        _mm512_storeu_ps(y + j * 16, _mm512_maskz_mov_ps(k0, acc0[j]));
        if (OCB == 2) _mm512_storeu_ps(y + ysO1 + j * 16, _mm512_maskz_mov_ps(k1, acc1[j]));
    }
}

/* output row oh of image n, blocks (ob, ob + OCB - 1); f->b16, f->m0 / m1
 * already those of ob */
static inline __attribute__((always_inline)) void first_row(const int NA, const int OCB,
                                                            const mft__b16_first *f, int64_t n,
                                                            int64_t ob, int64_t oh) {
    const int NB = OCB == 2 ? 6 : 12;
    __m512 w0[MFT__B16_FIRST_MAX], w1[MFT__B16_FIRST_MAX];
    const float *wb = f->w + ob * f->wsO1;
    for (int t = 0; t < NA; t++) {
        w0[t] = _mm512_loadu_ps(wb + f->woff[t]);
        w1[t] = OCB == 2 ? _mm512_loadu_ps(wb + f->wsO1 + f->woff[t]) : w0[t];
    }
    const int64_t ysO1 = f->OH * f->OW * 16;
    const float *x = f->x + n * f->xN + oh * f->rs;
    float *y = f->y + (n * f->O1 + ob) * ysO1 + oh * f->OW * 16;
    const int64_t OW = f->OW;
    if (OW < NB) {
        for (int64_t ow = 0; ow < OW; ow++)
            first_group(NA, OCB, 1, f, w0, w1, x + ow * f->ps, y + ow * 16, ysO1);
        return;
    }
    for (int64_t ow = 0;; ow += NB) {
        if (ow > OW - NB) ow = OW - NB; /* the last NB pixels */
        first_group(NA, OCB, NB, f, w0, w1, x + ow * f->ps, y + ow * 16, ysO1);
        if (ow + NB >= OW) break;
    }
}

typedef void (*first_fn)(const mft__b16_first *f, int64_t n, int64_t ob, int64_t oh);
#define FIRST_FN(na)                                                                               \
    static void first_##na##_1(const mft__b16_first *f, int64_t n, int64_t ob, int64_t oh) {       \
        first_row(na, 1, f, n, ob, oh);                                                            \
    }                                                                                              \
    static void first_##na##_2(const mft__b16_first *f, int64_t n, int64_t ob, int64_t oh) {       \
        first_row(na, 2, f, n, ob, oh);                                                            \
    }
FIRST_FN(1) FIRST_FN(2) FIRST_FN(3) FIRST_FN(4) FIRST_FN(5) FIRST_FN(6) FIRST_FN(7) FIRST_FN(8)
FIRST_FN(9)
/* [na][ocb - 1] */
static const first_fn g_first[MFT__B16_FIRST_MAX + 1][2] = {
    {NULL, NULL},           {first_1_1, first_1_2}, {first_2_1, first_2_2},
    {first_3_1, first_3_2}, {first_4_1, first_4_2}, {first_5_1, first_5_2},
    {first_6_1, first_6_2}, {first_7_1, first_7_2}, {first_8_1, first_8_2},
    {first_9_1, first_9_2}};

/* items (n, block pair, oh), n slowest */
static void first_range(void *vctx, int64_t lo, int64_t hi) {
    const mft__b16_first *f0 = vctx;
    const int64_t OG = (f0->O1 + 1) / 2;
    mft__b16_first f = *f0;
    for (int64_t it = lo; it < hi; it++) {
        const int64_t oh = it % f.OH, og = it / f.OH % OG, n = it / f.OH / OG;
        const int64_t ob = og * 2;
        const int ocb = ob + 1 < f.O1 ? 2 : 1;
        const int64_t n0 = f.O - ob * 16, n1 = n0 - 16;
        f.b16 = f0->b16 + ob * 16;
        f.m0 = n0 >= 16 ? 0xffffu : (1u << n0) - 1u;
        f.m1 = n1 >= 16 ? 0xffffu : n1 > 0 ? (1u << n1) - 1u : 0u;
        g_first[f.na][ocb - 1](&f, n, ob, oh);
    }
}
#endif

bool mft__conv_b16_first_applies(int64_t pairs) {
#if CF_AVX512
    return pairs >= 1 && pairs <= MFT__B16_FIRST_MAX;
#else
    (void)pairs;
    return false;
#endif
}

void mft__conv_b16_first_run(const mft__b16_first *f) {
#if CF_AVX512
    const int64_t items = f->N * ((f->O1 + 1) / 2) * f->OH;
    mft__parallel_for_dynamic(0, items, cf_chunk(items), first_range, (void *)f);
#else
    (void)f;
#endif
}
