/* ops/conv/blocked16_1x1.c — the 1x1 nChw16c F32 convolution (blocked16.c
 * hands it over): the forward on flat pixel runs, which backward_input
 * reuses with the transposed weight, and backward_weight as a register-
 * tiled product over pixels. AVX-512 builds only; elsewhere blocked16.c
 * keeps its general kernels.
 *
 * Note [nChw16c 1x1 convolution]
 * Forward. With a 1x1 kernel, stride 1 and no padding, output pixel q of
 * an image reads only input pixel q, and the pixels of an nChw16c plane are
 * contiguous across rows, so a tile is NB consecutive flat pixels (rows do
 * not cut it) times OCB blocks of 16 output channels: 6 x 4 (all 64 output
 * channels of the 8,256,14,14->64 shape in one tile: one broadcast of x
 * feeds four FMAs), 9 x 3, 14 x 2, 24 x 1, one zmm accumulator per (pixel,
 * block). A stride-2 x is first copied to its subsampled compact pixels
 * (blocked16.c). Work items are (image, chunk of about 48 pixels), so N = 8
 * images of 196 pixels give 40 items and two threads equal shares; each
 * item runs every output block group over its pixels. The reduction runs
 * over input blocks in chunks of F1_RB = 16 (256 channels: the tile's x is
 * 6 KB, its weights 64 KB in L2); a longer one stores a tile's partial sums
 * in y after each chunk and reloads them. Chunks of 4 blocks (x and weights
 * of a chunk in L1) ran 8% slower on 8,256,14,14->64 (0.333 against 0.307
 * ms, 1 thread, minimum of 300 calls, 2026-11-28): each tile then ran 64
 * channel steps between its accumulator set-up and stores instead of 256.
 * Each output element still starts at its bias and adds x * w over (input
 * block, channel) in order, the last block over its real channels only:
 * the direct kernel's order (Note [nChw16c direct convolution]) whatever
 * the tile, chunk and thread count, so the results are bit-identical to
 * it. The final chunk stores pad lanes as exact zeros. backward_input of a
 * 1x1 stride-1 convolution is this forward on grad_y with the transposed
 * weight, reordered per call into OIhw16i16o scratch (O*I floats: 64 KB for
 * 256x64, 16x16 tile transposes; about 1% of its time).
 *
 * backward_weight is the product grad_w (O, I) = sum over images and
 * output pixels of grad_y (O lanes) times x (broadcast). The general
 * kernel's item is one 16x16 tile: per pixel one grad_y vector and 16
 * broadcasts for 16 FMAs. Here an item is OBB <= 4 output blocks times ICB
 * consecutive input channels (4 x 6, 3 x 8, 2 x 12, 1 x 16; a group may
 * straddle two input blocks): per pixel OBB grad_y vectors and ICB
 * broadcasts for OBB*ICB FMAs (10 loads for 24 FMAs at 4 x 6). A thread
 * takes up to BW1_SUB (16) items at a time and runs each chunk of about
 * 512 output pixels (whole rows) through all of them, their sums kept in a
 * small buffer between chunks, so the chunk's grad_y and x are read from
 * cache by every item: with each item walking all pixels alone, every item
 * streamed all of grad_y from memory on large planes (8,64,56,56->256 ran
 * at about half the general kernel's speed). Each element sums over (n,
 * oh, ow) in order from zero, as the general kernel does: bit-identical to
 * it at any chunking and thread count. */
#include "blocked16_1x1.h"

#if CF_AVX512
#define F1_RB    16 /* input blocks per reduction chunk */
#define F1_P     48 /* pixels per work item, about */
#define F1_NBMAX 24

/* pixels per tile for ocb output blocks (accumulators + ocb weights + 1) */
static int f1_nb(int ocb) {
    static const int nb[5] = {0, 24, 14, 9, 6};
    return nb[ocb];
}

typedef struct f1_args {
    const float *x; /* pixel q0 of input block ib0 */
    int64_t xC1;
    const float *w; /* tile (ob, ib0) */
    int64_t wsO1, wsI1;
    int64_t nib, lastic; /* input blocks of the chunk; real channels of its last */
    const float *b16;    /* bias at ob; NULL: continue the partial sums in y */
    float *y;            /* pixel q0 of output block ob */
    int64_t ysO1;
    bool last; /* the final chunk: pad lanes stored as zeros */
    uint32_t m[4];
} f1_args;

/* the accumulators of output block o (a constant after unrolling): four
 * arrays, not one [4][F1_NBMAX], which the compiler kept on the stack */
#define F1_ACC(o) ((o) == 0 ? acc0 : (o) == 1 ? acc1 : (o) == 2 ? acc2 : acc3)

/* one input channel: the OCB weight vectors at wp times x at xp of NB pixels */
#define F1_STEP(xp, wp)                                                                            \
    do {                                                                                           \
        const float *xs_ = (xp), *ws_ = (wp);                                                      \
        __m512 v[4];                                                                               \
        for (int o = 0; o < OCB; o++) v[o] = _mm512_loadu_ps(ws_ + o * a->wsO1);                   \
        for (int j = 0; j < NB; j++) {                                                             \
            const __m512 bx = _mm512_set1_ps(xs_[j * 16]);                                         \
            for (int o = 0; o < OCB; o++) F1_ACC(o)[j] = _mm512_fmadd_ps(bx, v[o], F1_ACC(o)[j]);  \
        }                                                                                          \
    } while (0)

static inline __attribute__((always_inline)) void f1_tile(const int NB, const int OCB,
                                                          const f1_args *a) {
    __m512 acc0[F1_NBMAX], acc1[F1_NBMAX], acc2[F1_NBMAX], acc3[F1_NBMAX];
    if (a->b16)
        for (int o = 0; o < OCB; o++) {
            const __m512 bz = _mm512_loadu_ps(a->b16 + o * 16);
            for (int j = 0; j < NB; j++) F1_ACC(o)[j] = bz;
        }
    else
        for (int o = 0; o < OCB; o++)
            for (int j = 0; j < NB; j++)
                F1_ACC(o)[j] = _mm512_loadu_ps(a->y + o * a->ysO1 + j * 16);
    for (int64_t ib = 0; ib < a->nib; ib++) {
        const int64_t nic = ib == a->nib - 1 ? a->lastic : 16;
        const float *xp = a->x + ib * a->xC1;
        const float *wp = a->w + ib * a->wsI1;
        for (int64_t ic = 0; ic < nic; ic++) F1_STEP(xp + ic, wp + ic * 16);
    }
    /* one masked move per vector, all lanes kept before the final chunk: a
     * branch per store made the compiler copy the accumulators to the stack */
    for (int o = 0; o < OCB; o++) {
        float *yo = a->y + o * a->ysO1;
        const __mmask16 k = (__mmask16)(a->last ? a->m[o] : 0xffffu);
        for (int j = 0; j < NB; j++)
            _mm512_storeu_ps(yo + j * 16, _mm512_maskz_mov_ps(k, F1_ACC(o)[j]));
    }
}

typedef void (*f1_fn)(const f1_args *a);
#define F1_FN(nb, ocb)                                                                             \
    static void f1_##nb##_##ocb(const f1_args *a) { f1_tile(nb, ocb, a); }
#define F1_FN6(ocb)                                                                                \
    F1_FN(1, ocb) F1_FN(2, ocb) F1_FN(3, ocb) F1_FN(4, ocb) F1_FN(5, ocb) F1_FN(6, ocb)
#define F1_FN9(ocb) F1_FN6(ocb) F1_FN(7, ocb) F1_FN(8, ocb) F1_FN(9, ocb)
#define F1_FN14(ocb)                                                                               \
    F1_FN9(ocb) F1_FN(10, ocb) F1_FN(11, ocb) F1_FN(12, ocb) F1_FN(13, ocb) F1_FN(14, ocb)
#define F1_FN24(ocb)                                                                               \
    F1_FN14(ocb)                                                                                   \
    F1_FN(15, ocb)                                                                                 \
    F1_FN(16, ocb) F1_FN(17, ocb) F1_FN(18, ocb) F1_FN(19, ocb) F1_FN(20, ocb) F1_FN(21, ocb)      \
        F1_FN(22, ocb) F1_FN(23, ocb) F1_FN(24, ocb)
F1_FN24(1)
F1_FN14(2)
F1_FN9(3)
F1_FN6(4)
#define F1_T6(ocb)  f1_1_##ocb, f1_2_##ocb, f1_3_##ocb, f1_4_##ocb, f1_5_##ocb, f1_6_##ocb
#define F1_T9(ocb)  F1_T6(ocb), f1_7_##ocb, f1_8_##ocb, f1_9_##ocb
#define F1_T14(ocb) F1_T9(ocb), f1_10_##ocb, f1_11_##ocb, f1_12_##ocb, f1_13_##ocb, f1_14_##ocb
#define F1_T24(ocb)                                                                                \
    F1_T14(ocb), f1_15_##ocb, f1_16_##ocb, f1_17_##ocb, f1_18_##ocb, f1_19_##ocb, f1_20_##ocb,     \
        f1_21_##ocb, f1_22_##ocb, f1_23_##ocb, f1_24_##ocb
/* [ocb - 1][nb] */
static const f1_fn g_f1[4][F1_NBMAX + 1] = {
    {NULL, F1_T24(1)}, {NULL, F1_T14(2)}, {NULL, F1_T9(3)}, {NULL, F1_T6(4)}};

typedef struct f1_ctx {
    const mft__b16_1x1 *f;
    int64_t P, nch; /* pixels per item, items per image */
} f1_ctx;

static void f1_range(void *vctx, int64_t lo, int64_t hi) {
    const f1_ctx *c = vctx;
    const mft__b16_1x1 *f = c->f;
    const int64_t ysO1 = f->S * 16;
    for (int64_t it = lo; it < hi; it++) {
        const int64_t n = it / c->nch, q0 = it % c->nch * c->P;
        const int64_t q1 = q0 + c->P < f->S ? q0 + c->P : f->S;
        for (int64_t ib0 = 0; ib0 < f->I1; ib0 += F1_RB) {
            f1_args a;
            a.nib = f->I1 - ib0 < F1_RB ? f->I1 - ib0 : F1_RB;
            a.last = ib0 + a.nib == f->I1;
            a.lastic = a.last ? f->I - (f->I1 - 1) * 16 : 16;
            a.xC1 = f->xC1;
            a.wsO1 = f->wsO1;
            a.wsI1 = f->wsI1;
            a.ysO1 = ysO1;
            for (int64_t ob = 0; ob < f->O1;) {
                const int ocb = f->O1 - ob < 4 ? (int)(f->O1 - ob) : 4, nbm = f1_nb(ocb);
                for (int o = 0; o < ocb; o++) {
                    const int64_t r = f->O - (ob + o) * 16;
                    a.m[o] = r >= 16 ? 0xffffu : (1u << r) - 1u;
                }
                a.w = f->w + ob * f->wsO1 + ib0 * f->wsI1;
                a.b16 = ib0 == 0 ? f->b16 + ob * 16 : NULL;
                for (int64_t q = q0; q < q1;) {
                    const int nb = q1 - q < nbm ? (int)(q1 - q) : nbm;
                    a.x = f->x + n * f->xN + ib0 * f->xC1 + q * 16;
                    a.y = f->y + (n * f->O1 + ob) * ysO1 + q * 16;
                    g_f1[ocb - 1][nb](&a);
                    q += nb;
                }
                ob += ocb;
            }
        }
    }
}

bool mft__conv_b16_1x1_available(void) { return true; }

void mft__conv_b16_1x1_forward(const mft__b16_1x1 *f) {
    const int64_t nbm = f1_nb(f->O1 < 4 ? (int)f->O1 : 4);
    const int64_t pmax = nbm * (F1_P / nbm > 0 ? F1_P / nbm : 1);
    const int64_t nch = (f->S + pmax - 1) / pmax;
    const int64_t per = (f->S + nch - 1) / nch; /* pixels per item, rounded up to tiles */
    f1_ctx c = {f, (per + nbm - 1) / nbm * nbm, 0};
    c.nch = (f->S + c.P - 1) / c.P;
    const int64_t items = f->N * c.nch;
    mft__parallel_for_dynamic(0, items, cf_chunk(items), f1_range, &c);
}

/* ---------------------------------------------------------------- backward_weight */
#define BW1_ICMAX 16

static int bw1_icb(int obb) {
    static const int icb[5] = {0, 16, 12, 8, 6};
    return icb[obb];
}

#define BW1_SUB  16  /* items sharing one pass over a pixel chunk */
#define BW1_PIX  512 /* pixels per chunk, about */
#define BW1_SAVE (4 * 6 * 16)

/* output blocks ob0 .. ob0 + OBB - 1 times input channels i0 .. i0 + ni - 1
 * over the output rows [r0, r1) of (n, oh); the sums so far in save (none
 * when first), left there unless last (then written to grad_w) */
static inline __attribute__((always_inline)) void
bw1_body(const int OBB, const int ICB, const mft__b16_1x1_bww *b, int64_t ob0, int64_t i0, int ni,
         int64_t r0, int64_t r1, float *save, bool first, bool last) {
    int64_t off[BW1_ICMAX];
    for (int j = 0; j < ICB; j++) {
        const int64_t i = i0 + (j < ni ? j : ni - 1); /* past ni: computed, not stored */
        off[j] = (i >> 4) * b->xC1 + (i & 15) * b->xc;
    }
    const int64_t S = b->OH * b->OW, ysO1 = S * 16;
    __m512 acc[4][BW1_ICMAX];
    for (int o = 0; o < OBB; o++)
        for (int j = 0; j < ICB; j++)
            acc[o][j] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(save + (o * ICB + j) * 16);
    for (int64_t r = r0, n = r0 / b->OH, oh = r0 % b->OH; r < r1; r++, oh++) {
        if (oh == b->OH) oh = 0, n++;
        const float *gp = b->gy + (n * b->O1 + ob0) * ysO1 + oh * b->OW * 16;
        const float *xp = b->x + n * b->xN + oh * b->xR;
        for (int64_t ow = 0; ow < b->OW; ow++, gp += 16, xp += b->xP) {
            __m512 v[4];
            for (int o = 0; o < OBB; o++) v[o] = _mm512_loadu_ps(gp + o * ysO1);
            for (int j = 0; j < ICB; j++) {
                const __m512 bx = _mm512_set1_ps(xp[off[j]]);
                for (int o = 0; o < OBB; o++) acc[o][j] = _mm512_fmadd_ps(bx, v[o], acc[o][j]);
            }
        }
    }
    if (!last) {
        for (int o = 0; o < OBB; o++)
            for (int j = 0; j < ICB; j++) _mm512_storeu_ps(save + (o * ICB + j) * 16, acc[o][j]);
        return;
    }
    float tile[16];
    for (int o = 0; o < OBB; o++) {
        const int64_t ob = ob0 + o, noc = b->O - ob * 16 < 16 ? b->O - ob * 16 : 16;
        for (int j = 0; j < ni; j++) {
            _mm512_storeu_ps(tile, acc[o][j]);
            for (int64_t oc = 0; oc < noc; oc++)
                b->gw[mft__wmap_at(b->gm, ob * 16 + oc, i0 + j, 0, 0)] = tile[oc];
        }
    }
}

typedef struct bw1_ctx {
    const mft__b16_1x1_bww *b;
    int64_t full, nig4, nigr; /* groups of 4 blocks, their items; items of the rest */
    int64_t rows;             /* output rows per pixel chunk */
} bw1_ctx;

static void bw1_item(const bw1_ctx *c, int64_t it, int64_t r0, int64_t r1, float *save) {
    const mft__b16_1x1_bww *b = c->b;
    int64_t ob0, ig;
    int obb;
    if (it < c->full * c->nig4) {
        ob0 = it / c->nig4 * 4;
        ig = it % c->nig4;
        obb = 4;
    } else {
        ob0 = c->full * 4;
        ig = it - c->full * c->nig4;
        obb = (int)(b->O1 - ob0);
    }
    const int icb = bw1_icb(obb);
    const int64_t i0 = ig * icb;
    const int ni = b->I - i0 < icb ? (int)(b->I - i0) : icb;
    const bool first = r0 == 0, last = r1 == b->N * b->OH;
    switch (obb) {
    case 4: bw1_body(4, 6, b, ob0, i0, ni, r0, r1, save, first, last); break;
    case 3: bw1_body(3, 8, b, ob0, i0, ni, r0, r1, save, first, last); break;
    case 2: bw1_body(2, 12, b, ob0, i0, ni, r0, r1, save, first, last); break;
    default: bw1_body(1, 16, b, ob0, i0, ni, r0, r1, save, first, last); break;
    }
}

/* up to BW1_SUB items at a time, each chunk of rows through all of them
 * (the chunk's grad_y and x stay in cache across the items) */
static void bw1_range(void *vctx, int64_t lo, int64_t hi) {
    const bw1_ctx *c = vctx;
    const int64_t NR = c->b->N * c->b->OH;
    float save[BW1_SUB][BW1_SAVE];
    for (int64_t s0 = lo; s0 < hi; s0 += BW1_SUB) {
        const int64_t s1 = s0 + BW1_SUB < hi ? s0 + BW1_SUB : hi;
        for (int64_t r0 = 0; r0 < NR; r0 += c->rows) {
            const int64_t r1 = r0 + c->rows < NR ? r0 + c->rows : NR;
            for (int64_t it = s0; it < s1; it++) bw1_item(c, it, r0, r1, save[it - s0]);
        }
    }
}

void mft__conv_b16_1x1_backward_weight(const mft__b16_1x1_bww *b) {
    bw1_ctx c;
    c.b = b;
    c.full = b->O1 / 4;
    c.nig4 = (b->I + bw1_icb(4) - 1) / bw1_icb(4);
    const int r = (int)(b->O1 % 4);
    c.nigr = r ? (b->I + bw1_icb(r) - 1) / bw1_icb(r) : 0;
    c.rows = BW1_PIX / b->OW > 0 ? BW1_PIX / b->OW : 1;
    const int64_t items = c.full * c.nig4 + c.nigr;
    /* about 4 grabs per thread: the sets share pixel chunks, the grabs even
     * out the threads (43 items at 256 -> 64: 5 per grab at 2 threads) */
    const int64_t per = items / (4 * (int64_t)mft_num_threads());
    mft__parallel_for_dynamic(0, items, per > 0 ? per : 1, bw1_range, &c);
}
#else
bool mft__conv_b16_1x1_available(void) { return false; }
void mft__conv_b16_1x1_forward(const mft__b16_1x1 *f) { (void)f; }
void mft__conv_b16_1x1_backward_weight(const mft__b16_1x1_bww *b) { (void)b; }
#endif
