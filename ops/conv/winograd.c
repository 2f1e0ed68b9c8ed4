/* ops/conv/winograd.c — Winograd F(4x4, 3x3) convolution on F32 NHWC buffers:
 * the algorithm the fast conv2d kernels (ops/conv/chains.c) choose for 3x3,
 * stride 1, dilation 1, groups 1 forward and backward_input (Note
 * [Winograd F(4x4, 3x3)]), its weight transform, tile transforms, the
 * batched 6x32 GEMM micro-kernel, its two schedules (tile blocks, few
 * tiles), the choice of when it pays and which schedule runs, and the
 * switch (mft_conv_set_winograd, MFT_CONV_WINOGRAD=0) that turns it off.
 *
 * Note [Winograd F(4x4, 3x3)]
 * (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks",
 * 2016.) A 4x4 block of outputs of a 3x3 correlation is
 *     Y = A^T [ sum over c of (G g_kc G^T) (.) (B^T d_c B) ] A
 * where d_c is the 6x6 input patch of channel c, g_kc the 3x3 filter of
 * output channel k and input channel c, and (.) the elementwise product.
 * Written per element xi of the 6x6 transformed domain, the sum over c is a
 * matrix product: M[xi] (tiles x K) = V[xi] (tiles x C) @ U[xi] (C x K).
 * That is 36 GEMMs of depth C for 16 outputs per tile, against 9 * 16 for
 * the direct convolution: 4x fewer multiplications, paid for by the
 * transforms (adds and a few scalings per element, memory-bound).
 * - U = G g G^T for every (k, c), once per call, packed [xi][k block of 32]
 *   [c][32] (zeros past K) so the micro-kernel loads two 16-wide vectors.
 *   That is the tile-block schedule; shapes with few tiles and a big
 *   weight take the few-tile one instead (Note [Winograd on few tiles]).
 * - Output tiles (n, ty, tx) are numbered in order and cut into fixed
 *   blocks of T tiles (T from C and K: a block's V and M stay in the L2
 *   cache; wg_block_tiles). A block is a work item: the input transform
 *   writes V [36][T][C]; then per 32 output channels the 36 GEMMs write
 *   M [36][T][32] and the output transform adds the bias and stores the
 *   in-image part of every tile. Blocks are independent and each output
 *   element's arithmetic does not depend on the block it is in, so results
 *   are the same at any thread count and schedule.
 * - Input pixels outside the image (padding) are zeros of the patch.
 * - nChw16c buffers (mft__wino_geom.blocked, for ops/conv/blocked16.c):
 *   the tile transforms read and write 16-channel vectors one channel
 *   block plane apart instead of one pixel apart; the output's pad lanes
 *   are stored as zeros (its storage is not zeroed first).
 * - backward_input of a 3x3 stride-1 convolution with padding p is the
 *   forward convolution of grad_y with padding 2 - p and the weights
 *   flipped in both spatial dims with input and output channels swapped;
 *   the caller expresses that as a weight view (negative strides), so one
 *   code path serves both.
 * - Accuracy: F(4x4, 3x3) rounds more than the direct sum (the transforms
 *   multiply by up to 8 and sum 6 terms twice); on random data the error is
 *   about 1e-6 of the output's scale, within the tolerance the tests apply
 *   to every fast kernel (relative to sum |x * w|). Users who need the
 *   direct sum's rounding turn the algorithm off.
 * The transforms and micro-kernel use 16-lane AVX-512 vectors, or a
 * portable 16-float struct of the same operations elsewhere (slow, for
 * testing; wg_pays then says no outside the forced test mode). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "mft/conv.h"
#include "conv_internal.h"
#if defined(__AVX512F__)
#include <immintrin.h>
#define WG_AVX512 1
#else
#define WG_AVX512 0
#endif

#define WG_X  36 /* transformed elements per tile (6 x 6) */
#define WG_NB 32 /* output channels per packed weight block */
#define WG_L  16 /* channels per vector */
#define WG_MR 6  /* tiles per micro-kernel call */
#define WG_MIN_TILES_BLOCKED 12 /* Note [Winograd on few tiles] */

/* ---------------------------------------------------------------- switch */
static int wg_mode = 0;      /* tests: 0 heuristic, 1 wherever legal, 2 never */
/* -1: read MFT_CONV_WINOGRAD on first use. Atomic: the first convolutions
 * of two threads may both read the environment (and store the same value). */
static atomic_int wg_enabled = -1;

void mft__conv_wino_set_mode(int mode) { wg_mode = mode; }

void mft_conv_set_winograd(bool enabled) { atomic_store(&wg_enabled, enabled ? 1 : 0); }

bool mft_conv_winograd(void) {
    int v = atomic_load(&wg_enabled);
    if (v < 0) {
        const char *e = getenv("MFT_CONV_WINOGRAD");
        atomic_compare_exchange_strong(&wg_enabled, &v, e && e[0] == '0' && e[1] == '\0' ? 0 : 1);
        v = atomic_load(&wg_enabled);
    }
    return v == 1;
}

/* ---------------------------------------------------------------- vectors */
#if WG_AVX512
typedef __m512 wv;
static inline __mmask16 wv_mask(int n) { return (__mmask16)((1u << n) - 1u); }
static inline wv wv_zero(void) { return _mm512_setzero_ps(); }
static inline wv wv_load(const float *p, int n) {
    return n >= WG_L ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(wv_mask(n), p);
}
static inline void wv_store(float *p, wv v, int n) {
    if (n >= WG_L)
        _mm512_storeu_ps(p, v);
    else
        _mm512_mask_storeu_ps(p, wv_mask(n), v);
}
/* all 16 lanes: lanes n .. 15 as zeros (the pad lanes of an nChw16c output) */
static inline void wv_store_z(float *p, wv v, int n) {
    _mm512_storeu_ps(p, n >= WG_L ? v : _mm512_maskz_mov_ps(wv_mask(n), v));
}
static inline wv wv_add(wv a, wv b) { return _mm512_add_ps(a, b); }
static inline wv wv_sub(wv a, wv b) { return _mm512_sub_ps(a, b); }
static inline wv wv_mul(float s, wv a) { return _mm512_mul_ps(_mm512_set1_ps(s), a); }
static inline wv wv_fma(float s, wv a, wv b) { return _mm512_fmadd_ps(_mm512_set1_ps(s), a, b); }
#else
typedef struct wv {
    float v[WG_L];
} wv;
static inline wv wv_zero(void) {
    wv r;
    memset(&r, 0, sizeof r);
    return r;
}
static inline wv wv_load(const float *p, int n) {
    wv r = wv_zero();
    for (int l = 0; l < n && l < WG_L; l++) r.v[l] = p[l];
    return r;
}
static inline void wv_store(float *p, wv v, int n) {
    for (int l = 0; l < n && l < WG_L; l++) p[l] = v.v[l];
}
static inline void wv_store_z(float *p, wv v, int n) {
    for (int l = 0; l < WG_L; l++) p[l] = l < n ? v.v[l] : 0.0f;
}
static inline wv wv_add(wv a, wv b) {
    for (int l = 0; l < WG_L; l++) a.v[l] += b.v[l];
    return a;
}
static inline wv wv_sub(wv a, wv b) {
    for (int l = 0; l < WG_L; l++) a.v[l] -= b.v[l];
    return a;
}
static inline wv wv_mul(float s, wv a) {
    for (int l = 0; l < WG_L; l++) a.v[l] *= s;
    return a;
}
static inline wv wv_fma(float s, wv a, wv b) {
    for (int l = 0; l < WG_L; l++) b.v[l] += s * a.v[l];
    return b;
}
#endif

/* ---------------------------------------------------------------- transforms
 * One dimension of each; the 2-D transforms apply them along columns, then
 * rows. Input, r = B^T d:
 *   r0 = 4 d0 - 5 d2 + d4          r3 = -2 d1 - d2 + 2 d3 + d4
 *   r1 = -4 d1 - 4 d2 + d3 + d4    r4 = 2 d1 - d2 - 2 d3 + d4
 *   r2 = 4 d1 - 4 d2 - d3 + d4     r5 = 4 d1 - 5 d3 + d5              */
static inline void wg_bt(const wv *d, wv *r) {
    const wv t1 = wv_fma(-4.0f, d[2], d[4]), t2 = wv_fma(-4.0f, d[1], d[3]);
    const wv t3 = wv_sub(d[4], d[2]), t4 = wv_mul(2.0f, wv_sub(d[3], d[1]));
    r[0] = wv_fma(4.0f, d[0], wv_fma(-5.0f, d[2], d[4]));
    r[1] = wv_add(t1, t2);
    r[2] = wv_sub(t1, t2);
    r[3] = wv_add(t3, t4);
    r[4] = wv_sub(t3, t4);
    r[5] = wv_fma(4.0f, d[1], wv_fma(-5.0f, d[3], d[5]));
}

/* Output, o = A^T m:
 *   o0 = m0 + m1 + m2 + m3 + m4    o2 = m1 + m2 + 4 m3 + 4 m4
 *   o1 = m1 - m2 + 2 m3 - 2 m4     o3 = m1 - m2 + 8 m3 - 8 m4 + m5     */
static inline void wg_at(const wv *m, wv *o) {
    const wv a = wv_add(m[1], m[2]), b = wv_sub(m[1], m[2]);
    const wv c = wv_add(m[3], m[4]), d = wv_sub(m[3], m[4]);
    o[0] = wv_add(wv_add(m[0], a), c);
    o[1] = wv_fma(2.0f, d, b);
    o[2] = wv_fma(4.0f, c, a);
    o[3] = wv_fma(8.0f, d, wv_add(b, m[5]));
}

/* Grad transform along one dim, w = A e (A = (A^T)^T, 6 x 4):
 *   w0 = e0   w1 = e0 + e1 + e2 + e3     w3 = e0 + 2 e1 + 4 e2 + 8 e3
 *   w5 = e3   w2 = e0 - e1 + e2 - e3     w4 = e0 - 2 e1 + 4 e2 - 8 e3   */
static inline void wg_a(const wv *e, wv *w) {
    const wv ev = wv_add(e[0], e[2]), od = wv_add(e[1], e[3]);
    const wv e4 = wv_fma(4.0f, e[2], e[0]), o8 = wv_fma(8.0f, e[3], wv_mul(2.0f, e[1]));
    w[0] = e[0];
    w[1] = wv_add(ev, od);
    w[2] = wv_sub(ev, od);
    w[3] = wv_add(e4, o8);
    w[4] = wv_sub(e4, o8);
    w[5] = e[3];
}

/* Filter, u = G g (on 16 lanes, into u[0 .. 5]):
 *   u0 = g0 / 4                    u3 = g0 / 24 + g1 / 12 + g2 / 6
 *   u1 = -(g0 + g1 + g2) / 6       u4 = g0 / 24 - g1 / 12 + g2 / 6
 *   u2 = -(g0 - g1 + g2) / 6       u5 = g2                             */
static inline void wg_g(wv g0, wv g1, wv g2, wv *u) {
    const wv e = wv_add(g0, g2), q = wv_fma(1.0f / 24.0f, g0, wv_mul(1.0f / 6.0f, g2));
    u[0] = wv_mul(0.25f, g0);
    u[1] = wv_mul(-1.0f / 6.0f, wv_add(e, g1));
    u[2] = wv_mul(-1.0f / 6.0f, wv_sub(e, g1));
    u[3] = wv_fma(1.0f / 12.0f, g1, q);
    u[4] = wv_fma(-1.0f / 12.0f, g1, q);
    u[5] = g2;
}

/* ---------------------------------------------------------------- job */
typedef struct wg_job {
    const mft__wino_geom *g;
    const float *x;
    float *y;
    float *u;       /* forward: the packed transformed weight [36][nkb][C][32]
                       (tile blocks), or the transformed input V [36][T][C]
                       (few tiles) */
    float *bpad;    /* the bias, zero past K: nkb * 32 */
    int64_t nkb;    /* output channel blocks of 32 */
    int64_t TH, TW; /* tiles per image along H and W */
    int64_t ntiles, T, nblocks;
    /* backward_weight (Note [Winograd backward_weight]) */
    const float *gy;  /* grad_y (N, OH, OW, K) */
    float *part;      /* per chunk: [36][Kw][Cp] */
    int64_t Kw, Cp;   /* K rounded up to 6, C rounded up to 32 */
    int64_t nch;      /* fixed tile chunks */
    float *gw;
    const int64_t *gws; /* grad_w strides (k, c, -, kh, kw) */
    _Atomic long long *nomem; /* Note [Kernel scratch]: a worker's failed allocation */
} wg_job;

/* The fields every job has: the geometry and the tile grid. */
static void wg_job_init(wg_job *j, const mft__wino_geom *g) {
    memset(j, 0, sizeof *j);
    j->g = g;
    j->TH = (g->OH + 3) / 4;
    j->TW = (g->OW + 3) / 4;
    j->ntiles = g->N * j->TH * j->TW;
}

/* 16 lanes l < nk (zeros past) of the weight at w + l * s. */
static __attribute__((noinline)) wv wg_wload_slow(const float *w, int64_t s, int nk) {
    float t[WG_L] = {0};
    for (int l = 0; l < nk; l++) t[l] = w[l * s];
    return wv_load(t, WG_L);
}
static inline wv wg_wload(const float *w, int64_t s, int nk) {
    if (s == 1) return wv_load(w, nk);
#if WG_AVX512
    if (s > -(1 << 26) && s < (1 << 26)) {
        const __m512i idx = _mm512_mullo_epi32(
            _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
            _mm512_set1_epi32((int)s));
        return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), wv_mask(nk), idx, w, 4);
    }
#endif
    return wg_wload_slow(w, s, nk);
}

/* Offset of weight element (k, c, a, b): off + a * st[0] + b * st[1], lane
 * k + l (k a multiple of 16, l < 16) l * st[2] further. */
static inline int64_t wg_woff(const mft__wino_geom *g, int64_t k, int64_t c, int64_t st[3]) {
    const mft__conv_wmap *m = g->wmap;
    st[0] = m ? m->kh : g->ws[2];
    st[1] = m ? m->kw : g->ws[3];
    st[2] = m ? m->o0 : g->ws[0];
    return m ? mft__wmap_at(m, k, c, 0, 0) : k * g->ws[0] + c * g->ws[1];
}

/* Weight transform of (k block kb, input channel c): u[xi] (32 output
 * channels, zeros past K) at dst + xi * xs. */
static void wg_pack_one(const mft__wino_geom *g, int64_t kb, int64_t c, float *dst, int64_t xs) {
    for (int h = 0; h < WG_NB / WG_L; h++) {
        const int64_t k0 = kb * WG_NB + h * WG_L;
        if (k0 >= g->K) { /* a block past K: zeros */
            for (int xi = 0; xi < WG_X; xi++) wv_store(dst + xi * xs + h * WG_L, wv_zero(), WG_L);
            continue;
        }
        const int nk = g->K - k0 < WG_L ? (int)(g->K - k0) : WG_L;
        int64_t st[3];
        const float *w = g->w + wg_woff(g, k0, c, st);
        wv t[6][3], u[6];
        for (int b = 0; b < 3; b++) { /* t[.][b] = G g[.][b] (columns) */
            wg_g(wg_wload(w + b * st[1], st[2], nk), wg_wload(w + st[0] + b * st[1], st[2], nk),
                 wg_wload(w + 2 * st[0] + b * st[1], st[2], nk), u);
            for (int i = 0; i < 6; i++) t[i][b] = u[i];
        }
        for (int i = 0; i < 6; i++) { /* u[i][.] = G t[i][.]^T (rows) */
            wg_g(t[i][0], t[i][1], t[i][2], u);
            for (int q = 0; q < 6; q++) wv_store(dst + (6 * i + q) * xs + h * WG_L, u[q], WG_L);
        }
    }
}

/* The whole weight, items (k block kb, input channel c), into j->u. */
static void wg_pack_range(void *ctx, int64_t begin, int64_t end) {
    const wg_job *j = ctx;
    const int64_t C = j->g->C;
    for (int64_t it = begin; it < end; it++)
        wg_pack_one(j->g, it / C, it % C, j->u + it * WG_NB, j->nkb * C * WG_NB);
}

/* Into row r of D [36][T][ld] (columns width .. ld - 1 zeroed): the 6 x 6
 * transform of tile tl's n x n patch of src, an (N, Hs, Ws, width) NHWC
 * tensor read as zeros outside its images, whose corner is (4 ty - oh,
 * 4 tx - ow). n = 6: the input transform B^T d B of x (oh, ow: the
 * padding); n = 4: the grad transform A e A^T of a grad_y block (oh = ow =
 * 0; Note [Winograd backward_weight]). Along columns, then rows. */
static inline __attribute__((always_inline)) void
wg_tile_in(const wg_job *j, int64_t tl, const float *src, int64_t Hs, int64_t Ws, int64_t width,
           int64_t oh, int64_t ow, int n, float *D, int64_t T, int64_t r, int64_t ld) {
    const int64_t img = tl / (j->TH * j->TW), ty = tl / j->TW % j->TH, tx = tl % j->TW;
    const int64_t h0 = 4 * ty - oh, w0 = 4 * tx - ow;
    /* NHWC: pixel step width, channel blocks 16 apart; nChw16c: pixel step
     * 16, channel blocks one plane apart, images padded to 16 channels */
    const bool blk = j->g->blocked;
    const int64_t ps = blk ? WG_L : width, cbs = blk ? Hs * Ws * WG_L : WG_L;
    const float *base = src + img * Hs * Ws * (blk ? (width + WG_L - 1) / WG_L * WG_L : width);
    const float *rows[6];
    bool colok[6];
    for (int i = 0; i < n; i++) {
        rows[i] = h0 + i >= 0 && h0 + i < Hs ? base + (h0 + i) * Ws * ps : NULL;
        colok[i] = w0 + i >= 0 && w0 + i < Ws;
    }
    for (int64_t c0 = 0; c0 < width; c0 += WG_L) {
        const int nc = width - c0 < WG_L ? (int)(width - c0) : WG_L;
        const int64_t co = c0 / WG_L * cbs;
        wv t[6][6];
        for (int b = 0; b < n; b++) { /* column b of the patch */
            wv d[6], r6[6];
            for (int i = 0; i < n; i++)
                d[i] = rows[i] && colok[b] ? wv_load(rows[i] + (w0 + b) * ps + co, nc)
                                           : wv_zero();
            if (n == 6)
                wg_bt(d, r6);
            else
                wg_a(d, r6);
            for (int i = 0; i < 6; i++) t[i][b] = r6[i];
        }
        for (int i = 0; i < 6; i++) { /* row i of the half-transformed patch */
            wv r6[6];
            if (n == 6)
                wg_bt(t[i], r6);
            else
                wg_a(t[i], r6);
            for (int b = 0; b < 6; b++) wv_store(D + ((6 * i + b) * T + r) * ld + c0, r6[b], nc);
        }
    }
    if (ld > width)
        for (int e = 0; e < WG_X; e++)
            memset(D + (e * T + r) * ld + width, 0, (size_t)(ld - width) * sizeof(float));
}

/* Output transform of row r of M [36][T][32] (channels k0 .. k0 + 31 of
 * tile tl), plus the bias, into the tile's in-image pixels of y. */
static void wg_output_tile(const wg_job *j, int64_t tl, const float *M, int64_t T, int64_t r,
                           int64_t k0) {
    const mft__wino_geom *g = j->g;
    const int64_t K = g->K, n = tl / (j->TH * j->TW), ty = tl / j->TW % j->TH, tx = tl % j->TW;
    const int64_t oh0 = 4 * ty, ow0 = 4 * tx;
    const int nh = g->OH - oh0 < 4 ? (int)(g->OH - oh0) : 4;
    const int nw = g->OW - ow0 < 4 ? (int)(g->OW - ow0) : 4;
    /* NHWC, or nChw16c (pixel step 16, channel blocks one plane apart) */
    const int64_t K16 = (K + WG_L - 1) / WG_L * WG_L;
    const int64_t ps = g->blocked ? WG_L : K, cbs = g->blocked ? g->OH * g->OW * WG_L : WG_L;
    float *yt = j->y + n * g->OH * g->OW * (g->blocked ? K16 : K) + (oh0 * g->OW + ow0) * ps;
    for (int h = 0; h < WG_NB / WG_L; h++) {
        const int64_t kk = k0 + h * WG_L;
        if (kk >= K) break;
        const int nk = K - kk < WG_L ? (int)(K - kk) : WG_L;
        float *yk = yt + kk / WG_L * cbs;
        const wv bias = wv_load(j->bpad + kk, WG_L);
        wv t[6][4];
        for (int i = 0; i < 6; i++) { /* rows: t[i][.] = A^T m[i][.] */
            wv m[6];
            for (int b = 0; b < 6; b++) m[b] = wv_load(M + ((6 * i + b) * T + r) * WG_NB + h * WG_L,
                                                       WG_L);
            wg_at(m, t[i]);
        }
        for (int q = 0; q < nw; q++) { /* columns: y[.][q] = A^T t[.][q] */
            wv m[6], o[4];
            for (int i = 0; i < 6; i++) m[i] = t[i][q];
            wg_at(m, o);
            for (int p = 0; p < nh; p++)
                if (g->blocked) /* the output is not zeroed: its pad lanes written */
                    wv_store_z(yk + (p * g->OW + q) * ps, wv_add(o[p], bias), nk);
                else
                    wv_store(yk + (p * g->OW + q) * ps, wv_add(o[p], bias), nk);
        }
    }
}

/* The one micro-kernel of both directions: for rows i < 6,
 *   m[i*ldm + 0..31] (= or +=, accumulate) sum over s < n of
 *       a[i*ars + s*ass] * b[s*bs + 0..31].
 * Forward: a = V rows (ars = C, ass = 1), b = packed weights (bs = 32),
 * m = M. backward_weight: a = E (ars = 1, ass = its row stride), b = V,
 * m = the partial sums, accumulated. */
static void wg_gemm6x32(int64_t n, const float *a, int64_t ars, int64_t ass, const float *b,
                        int64_t bs, float *m, int64_t ldm, bool accumulate) {
#if WG_AVX512
    const __m512 z = _mm512_setzero_ps();
#define WG_INIT(i)                                                                                 \
    __m512 c##i = accumulate ? _mm512_loadu_ps(m + i * ldm) : z;                                   \
    __m512 d##i = accumulate ? _mm512_loadu_ps(m + i * ldm + WG_L) : z;                            \
    const float *a##i = a + i * ars;
    WG_INIT(0) WG_INIT(1) WG_INIT(2) WG_INIT(3) WG_INIT(4) WG_INIT(5)
#undef WG_INIT
    for (int64_t s = 0, o = 0; s < n; s++, o += ass, b += bs) {
        const __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + WG_L);
        __m512 av;
#define WG_STEP(i)                                                                                 \
    av = _mm512_set1_ps(a##i[o]);                                                                  \
    c##i = _mm512_fmadd_ps(av, b0, c##i);                                                          \
    d##i = _mm512_fmadd_ps(av, b1, d##i);
        WG_STEP(0) WG_STEP(1) WG_STEP(2) WG_STEP(3) WG_STEP(4) WG_STEP(5)
#undef WG_STEP
    }
#define WG_STORE(i)                                                                                \
    _mm512_storeu_ps(m + i * ldm, c##i);                                                           \
    _mm512_storeu_ps(m + i * ldm + WG_L, d##i);
    WG_STORE(0) WG_STORE(1) WG_STORE(2) WG_STORE(3) WG_STORE(4) WG_STORE(5)
#undef WG_STORE
#else
    for (int i = 0; i < WG_MR; i++) {
        float acc[WG_NB];
        for (int l = 0; l < WG_NB; l++) acc[l] = accumulate ? m[i * ldm + l] : 0.0f;
        for (int64_t s = 0; s < n; s++)
            for (int l = 0; l < WG_NB; l++) acc[l] += a[i * ars + s * ass] * b[s * bs + l];
        memcpy(m + i * ldm, acc, sizeof acc);
    }
#endif
}

/* A work item's scratch of n floats, or NULL having recorded the failure
 * for the caller (Note [Kernel scratch]). */
static float *wg_scratch(const wg_job *j, size_t n) {
    float *p = mft__alloc(n * sizeof(float), 64);
    if (!p) mft__scratch_fail(j->nomem, n * sizeof(float));
    return p;
}

static void wg_range(void *ctx, int64_t begin, int64_t end) {
    const wg_job *j = ctx;
    const mft__wino_geom *g = j->g;
    const int64_t C = g->C, T = j->T;
    const size_t vn = (size_t)(WG_X * T * C), mn = (size_t)(WG_X * T * WG_NB);
    float *V = wg_scratch(j, vn + mn);
    if (!V) return;
    float *M = V + vn;
    for (int64_t b = begin; b < end; b++) {
        const int64_t t0 = b * T, nt = j->ntiles - t0 < T ? j->ntiles - t0 : T;
        for (int64_t r = 0; r < nt; r++)
            wg_tile_in(j, t0 + r, j->x, g->H, g->W, C, g->ph, g->pw, 6, V, T, r, C);
        if (nt < T) /* rows past the last tile: zeros, never stored */
            for (int xi = 0; xi < WG_X; xi++)
                memset(V + (xi * T + nt) * C, 0, (size_t)((T - nt) * C) * sizeof(float));
        const int64_t nr = (nt + WG_MR - 1) / WG_MR * WG_MR;
        for (int64_t kb = 0; kb < j->nkb; kb++) {
            for (int xi = 0; xi < WG_X; xi++) {
                const float *up = j->u + (xi * j->nkb + kb) * C * WG_NB;
                for (int64_t r = 0; r < nr; r += WG_MR)
                    wg_gemm6x32(C, V + (xi * T + r) * C, C, 1, up, WG_NB,
                                M + (xi * T + r) * WG_NB, WG_NB, false);
            }
            for (int64_t r = 0; r < nt; r++) wg_output_tile(j, t0 + r, M, T, r, kb * WG_NB);
        }
    }
    mft__free(V);
}

/* Tiles per block: a multiple of 6 whose V [36][T][C] and M [36][T][32]
 * take about 384 KB (inside a 1 MB L2 beside the weight panel in use), at
 * least 12 so a transformed weight panel serves two micro-kernel rows. */
static int64_t wg_block_tiles(const mft__wino_geom *g) {
    const int64_t per = (int64_t)WG_X * (g->C + WG_NB) * (int64_t)sizeof(float);
    int64_t T = (384 * 1024 / per) / WG_MR * WG_MR;
    if (T < 2 * WG_MR) T = 2 * WG_MR;
    if (T > 60) T = 60;
    return T;
}

/* ---------------------------------------------------------------- few tiles
 * Note [Winograd on few tiles]
 * The tile-block schedule above transforms the whole weight into U (36 C K
 * floats, 4x the weight) and every block of tiles reads all of it: with
 * few tiles that traffic is most of the work, and few blocks leave threads
 * idle (8x512x7x7: 32 tiles, 3 blocks). The few-tile schedule turns the
 * loops around:
 * - every tile's input transform once, in parallel over tiles, into V
 *   [36][T][C] (T: the tiles rounded up to 6, the extra rows zeros);
 * - a work item is a block of 32 output channels: per chunk of WG_FEW_CC
 *   input channels it transforms its own weight slice into a per-thread
 *   U [cc][36][32] (288 KB, in L2; (c, xi) rows, so the transform's stores
 *   are contiguous) and runs the 36 GEMMs of the chunk over all tiles,
 *   accumulating M [36][T][32]; then the output transform of its channels
 *   for every tile.
 * Each weight element is read once per call and U is never whole. The
 * micro-kernel carries a row's sum across chunks (it loads M and goes on
 * adding), so an output element's arithmetic is the same sequence of
 * operations as in the tile-block schedule: both schedules give the same
 * bits, at any thread count (the tests check it).
 * Choice, measured on nChw16c forward with an OIhw16i16o weight, 1 thread,
 * ms, the best of 3 x 7 runs alternating, 2-vCPU AVX-512 KVM Xeon shared
 * with other builds (load 4-5), 2026-11-28 (tile blocks / few tiles /
 * direct):
 *     8x512x7x7    k512   12.0 /  7.9 / 11.4    U 37.7 MB,  32 tiles
 *     8x256x14x14  k256    7.9 /  6.6 / 11.1    U  9.4 MB, 128 tiles
 *     2x512x28x28  k512   30.8 / 23.6 / 47.2    U 37.7 MB,  98 tiles
 *     8x128x28x28  k128    5.2 /  5.8 / 11.9    U  2.4 MB, 392 tiles
 *     8x64x28x28   k256    5.1 /  5.2 / 11.8    U  2.4 MB, 392 tiles
 *     8x96x28x28   k96     2.5 /  3.4 /  6.5    U  1.3 MB, 392 tiles
 *     8x64x56x56   k64     4.4 /  5.5 / 14.1    U  0.6 MB, 1568 tiles
 *     4x256x56x56  k256   66.5 / 68.2 / 128     U  9.4 MB, 784 tiles
 *     8x128x56x56  k128   24.3 / 37.5 / 55.4    U  2.4 MB, 1568 tiles
 * Where U stays in the caches the tile blocks win; with many tiles M (per
 * item, [36][T][32]) leaves L2 and is reread per chunk. So wg_few_tiles
 * takes the few-tile schedule when U would pass 8 MB and M fits in 2 MB
 * (up to 455 tiles); earlier runs of the same build put 8x256x28x28 k256
 * (392 tiles) at 27.4 / 24.4 and 8x512x28x28 k512 at 189 / 154.
 * Against the direct kernels the transforms are a cost per call that few
 * tiles do not repay (same conditions, few tiles / direct, nChw16c):
 * 1x512x7x7 (4 tiles) 2.03 / 1.40, 2x512x7x7 (8) 3.01 / 2.76, 2x256x7x7
 * (8) 0.70 / 0.70, 4x512x7x7 (16) 4.13 / 5.79, 1x256x14x14 (16) 0.89 /
 * 1.37: nChw16c takes Winograd from 12 tiles (WG_MIN_TILES_BLOCKED). The
 * NHWC direct kernel is slower (1x512x7x7 3.18, 2x512x7x7 4.51, NHWC few
 * tiles 2.16 / 3.08): NHWC keeps the size test alone. */
#define WG_FEW_CC 64 /* input channels per weight slice chunk: U 288 KB */

/* Tile items: the input transform into V. */
static void wg_few_in(void *ctx, int64_t begin, int64_t end) {
    const wg_job *j = ctx;
    const mft__wino_geom *g = j->g;
    for (int64_t t = begin; t < end; t++)
        wg_tile_in(j, t, j->x, g->H, g->W, g->C, g->ph, g->pw, 6, j->u, j->T, t, g->C);
}

/* Output channel block items (j->u is V [36][T][C]). */
static void wg_few_range(void *ctx, int64_t begin, int64_t end) {
    const wg_job *j = ctx;
    const mft__wino_geom *g = j->g;
    const int64_t C = g->C, T = j->T, cc0 = C < WG_FEW_CC ? C : WG_FEW_CC;
    const size_t un = (size_t)(WG_X * cc0 * WG_NB), mn = (size_t)(WG_X * T * WG_NB);
    float *U = wg_scratch(j, un + mn);
    if (!U) return;
    float *M = U + un;
    const float *V = j->u;
    for (int64_t kb = begin; kb < end; kb++) {
        for (int64_t c0 = 0; c0 < C; c0 += WG_FEW_CC) {
            const int64_t cc = C - c0 < WG_FEW_CC ? C - c0 : WG_FEW_CC;
            for (int64_t c = 0; c < cc; c++)
                wg_pack_one(g, kb, c0 + c, U + c * WG_X * WG_NB, WG_NB);
            for (int xi = 0; xi < WG_X; xi++)
                for (int64_t r = 0; r < T; r += WG_MR)
                    wg_gemm6x32(cc, V + (xi * T + r) * C + c0, C, 1, U + xi * WG_NB, WG_X * WG_NB,
                                M + (xi * T + r) * WG_NB, WG_NB, c0 > 0);
        }
        for (int64_t r = 0; r < j->ntiles; r++) wg_output_tile(j, r, M, T, r, kb * WG_NB);
    }
    mft__free(U);
}

static int wg_sched = 0; /* tests: 0 the choice, 1 tile blocks, 2 few tiles */

void mft__conv_wino_set_schedule(int schedule) { wg_sched = schedule; }

/* The few-tile schedule pays for g (Note [Winograd on few tiles]): the
 * whole transformed weight past 8 MB and M [36][T][32] within 2 MB. */
static bool wg_few_tiles(const mft__wino_geom *g, int64_t ntiles) {
    if (wg_sched) return wg_sched == 2;
    const int64_t nkb = (g->K + WG_NB - 1) / WG_NB, T = (ntiles + WG_MR - 1) / WG_MR * WG_MR;
    const int64_t ubytes = (int64_t)WG_X * g->C * nkb * WG_NB * (int64_t)sizeof(float);
    const int64_t mbytes = (int64_t)WG_X * T * WG_NB * (int64_t)sizeof(float);
    return ubytes >= ((int64_t)8 << 20) && mbytes <= ((int64_t)2 << 20);
}

bool mft__conv_wino_applies(const mft__wino_geom *g) {
    if (wg_mode == 2 || !mft_conv_winograd()) return false;
    if (g->N < 1 || g->C < 1 || g->K < 1 || g->OH < 1 || g->OW < 1) return false;
    if (wg_mode == 1) return true;
    if (!WG_AVX512 || g->C < 16 || g->K < 16) return false;
    /* 4x fewer multiplications, less the outputs computed past the edges */
    const int64_t th = (g->OH + 3) / 4, tw = (g->OW + 3) / 4;
    /* Note [Winograd on few tiles]: the weight transform is a cost per call */
    if (g->blocked && g->N * th * tw < WG_MIN_TILES_BLOCKED) return false;
    return 2 * g->OH * g->OW >= th * tw * 16;
}

bool mft__conv_wino_forward(const mft__wino_geom *g, const float *x, float *y) {
    wg_job j;
    wg_job_init(&j, g);
    j.x = x;
    j.y = y;
    j.nkb = (g->K + WG_NB - 1) / WG_NB;
    const bool few = wg_few_tiles(g, j.ntiles);
    /* j.u: the transformed weight U [36][nkb][C][32] (tile blocks), or the
     * transformed input V [36][T][C] (few tiles); then the padded bias */
    j.T = few ? (j.ntiles + WG_MR - 1) / WG_MR * WG_MR : wg_block_tiles(g);
    j.nblocks = (j.ntiles + j.T - 1) / j.T;
    const size_t un = (size_t)(few ? WG_X * j.T * g->C : WG_X * j.nkb * g->C * WG_NB);
    j.u = mft__alloc((un + (size_t)(j.nkb * WG_NB)) * sizeof(float), 64);
    if (!j.u) { /* Note [Kernel scratch] */
        mft__kernel_nomem((un + (size_t)(j.nkb * WG_NB)) * sizeof(float));
        return false;
    }
    _Atomic long long nomem = 0;
    j.nomem = &nomem;
    j.bpad = j.u + un;
    for (int64_t k = 0; k < j.nkb * WG_NB; k++)
        j.bpad[k] = g->bias && k < g->K ? g->bias[k * g->bstride] : 0.0f;
    if (few) {
        /* rows past the last tile: zeros, never stored */
        for (int xi = 0; xi < WG_X; xi++)
            memset(j.u + (xi * j.T + j.ntiles) * g->C, 0,
                   (size_t)((j.T - j.ntiles) * g->C) * sizeof(float));
        mft__parallel_for(0, j.ntiles, 1, wg_few_in, &j);
        mft__parallel_for_dynamic(0, j.nkb, 1, wg_few_range, &j);
    } else {
        mft__parallel_for(0, j.nkb * g->C, 16, wg_pack_range, &j);
        mft__parallel_for_dynamic(0, j.nblocks, 1, wg_range, &j);
    }
    mft__free(j.u);
    if (atomic_load(&nomem)) {
        mft__kernel_nomem((size_t)atomic_load(&nomem));
        return false;
    }
    return true;
}

/* ---------------------------------------------------------------- backward_weight
 * Note [Winograd backward_weight]
 * The forward identity y = A^T [(G g G^T) (.) (B^T d B)] A, transposed:
 * for a tile with grad_y block e (4x4, zero past the output's edge) and
 * input patch d, the tile's contribution to grad_w (sum over its 16 outputs
 * of e * the 3x3 window of d) is G^T [ (A e A^T) (.) (B^T d B) ] G. With
 * E[xi] (tiles x K) = A e A^T and V[xi] (tiles x C) = B^T d B,
 *     grad_w = G^T [ sum over tiles of E[xi]^T V[xi] ] G,
 * one GEMM over the tiles per xi. The tiles are cut into nch fixed chunks
 * (at most 8; fewer when their partial sums [36][K][C] would pass 12 MB, or
 * there are fewer tiles); a chunk is a work item that walks its tiles in
 * blocks of T (both transforms into L2-sized buffers, then 6 x 32 tiles of
 * its partial sums accumulated over the block). The partials are added in
 * chunk order, in double, and transformed back, per output channel: the
 * same bits at any thread count. Partial sums over 4 MB per chunk (C * K
 * past about 28000) cost more than the direct kernel: it declines them
 * (WG_BW_MAX_PART). */

/* Chunk items: the partial sums of their tiles. */
static void wg_bw_range(void *ctx, int64_t begin, int64_t end) {
    const wg_job *j = ctx;
    const mft__wino_geom *g = j->g;
    const int64_t T = j->T, Kw = j->Kw, Cp = j->Cp, psz = WG_X * Kw * Cp;
    for (int64_t ch = begin; ch < end; ch++) {
        float *U = j->part + ch * psz;
        float *V = j->part + j->nch * psz + ch * WG_X * T * (Cp + Kw), *E = V + WG_X * T * Cp;
        memset(U, 0, (size_t)psz * sizeof(float));
        const int64_t t1 = (ch + 1) * j->ntiles / j->nch;
        for (int64_t tb = ch * j->ntiles / j->nch; tb < t1; tb += T) {
            const int64_t nt = t1 - tb < T ? t1 - tb : T;
            for (int64_t r = 0; r < nt; r++) {
                wg_tile_in(j, tb + r, j->x, g->H, g->W, g->C, g->ph, g->pw, 6, V, T, r, Cp);
                wg_tile_in(j, tb + r, j->gy, g->OH, g->OW, g->K, 0, 0, 4, E, T, r, Kw);
            }
            for (int xi = 0; xi < WG_X; xi++)
                for (int64_t kr = 0; kr < Kw; kr += WG_MR)
                    for (int64_t cb = 0; cb < Cp; cb += WG_NB)
                        wg_gemm6x32(nt, E + xi * T * Kw + kr, 1, Kw, V + xi * T * Cp + cb,
                                    Cp, U + (xi * Kw + kr) * Cp + cb, Cp, true);
        }
    }
}

/* Back from the transformed domain along one dim, r = G^T u, on 32 lanes:
 * element i of u at u + i*us, element a of r at r + a*rs (lane-contiguous). */
static void wg_gt(const double *restrict u, int us, double *restrict r, int rs) {
    for (int l = 0; l < WG_NB; l++) {
        const double s12 = u[us + l] + u[2 * us + l], d12 = u[2 * us + l] - u[us + l];
        const double s34 = u[3 * us + l] + u[4 * us + l], d34 = u[3 * us + l] - u[4 * us + l];
        r[l] = u[l] * 0.25 - s12 / 6.0 + s34 / 24.0;
        r[rs + l] = d12 / 6.0 + d34 / 12.0;
        r[2 * rs + l] = (s34 - s12) / 6.0 + u[5 * us + l];
    }
}

/* Output channel items: partials summed in chunk order (in double), then
 * G^T . G, 32 input channels at a time. */
static void wg_bw_reduce(void *ctx, int64_t begin, int64_t end) {
    const wg_job *j = ctx;
    const mft__wino_geom *g = j->g;
    const int64_t Kw = j->Kw, Cp = j->Cp, psz = WG_X * Kw * Cp;
    double u[WG_X][WG_NB], sr[6][3][WG_NB], r[3][3][WG_NB];
    for (int64_t k = begin; k < end; k++)
        for (int64_t c0 = 0; c0 < g->C; c0 += WG_NB) {
            for (int xi = 0; xi < WG_X; xi++) {
                for (int l = 0; l < WG_NB; l++) u[xi][l] = 0.0;
                for (int64_t ch = 0; ch < j->nch; ch++) {
                    const float *p = j->part + ch * psz + (xi * Kw + k) * Cp + c0;
                    for (int l = 0; l < WG_NB; l++) u[xi][l] += p[l];
                }
            }
            for (int i = 0; i < 6; i++) wg_gt(u[6 * i], WG_NB, sr[i][0], WG_NB);
            for (int b = 0; b < 3; b++) wg_gt(sr[0][b], 3 * WG_NB, r[0][b], 3 * WG_NB);
            const int64_t nc = g->C - c0 < WG_NB ? g->C - c0 : WG_NB;
            for (int64_t l = 0; l < nc; l++)
                for (int a = 0; a < 3; a++)
                    for (int b = 0; b < 3; b++)
                        j->gw[g->wmap ? mft__wmap_at(g->wmap, k, c0 + l, a, b)
                                      : k * j->gws[0] + (c0 + l) * j->gws[1] + a * j->gws[3] +
                                            b * j->gws[4]] = (float)r[a][b][l];
        }
}

/* Largest partial sums [36][K][C] (bytes) backward_weight takes on, outside
 * the test mode: past it (8x256x14x14 k256: 9.5 MB per chunk) zeroing and
 * adding the partials cost more than Winograd saves; measured 1 thread
 * 12.9 ms against 10.5 for the direct kernel. */
#define WG_BW_MAX_PART ((int64_t)4 << 20)

bool mft__conv_wino_backward_weight(const mft__wino_geom *g, const float *gy, const float *x,
                                    float *gw, const int64_t *gws) {
    wg_job j;
    wg_job_init(&j, g);
    j.x = x;
    j.gy = gy;
    j.gw = gw;
    j.gws = gws;
    j.Kw = (g->K + WG_MR - 1) / WG_MR * WG_MR;
    j.Cp = (g->C + WG_NB - 1) / WG_NB * WG_NB;
    const int64_t psz = WG_X * j.Kw * j.Cp;
    if (psz * (int64_t)sizeof(float) > WG_BW_MAX_PART && wg_mode != 1) return false;
    /* Tiles per block: both transforms in about 384 KB, or, when the
     * partial sums are bigger than 768 KB (they then live in L3: touched
     * once per block), in up to half their size, 6 at least. */
    const int64_t per = WG_X * (j.Cp + j.Kw) * (int64_t)sizeof(float);
    const int64_t budget = psz * (int64_t)sizeof(float) / 2 > 384 * 1024
                               ? psz * (int64_t)sizeof(float) / 2
                               : 384 * 1024;
    j.T = budget / per < WG_MR ? WG_MR : budget / per;
    j.nch = (12 << 20) / (psz * (int64_t)sizeof(float));
    if (j.nch > 8) j.nch = 8;
    if (j.nch > j.ntiles) j.nch = j.ntiles;
    if (j.nch < 1) j.nch = 1;
    const size_t pbytes = (size_t)(j.nch * (psz + WG_X * j.T * (j.Cp + j.Kw))) * sizeof(float);
    j.part = mft__alloc(pbytes, 64);
    if (!j.part) { /* Note [Kernel scratch] */
        mft__kernel_nomem(pbytes);
        return false;
    }
    mft__parallel_for_dynamic(0, j.nch, 1, wg_bw_range, &j);
    mft__parallel_for(0, g->K, 1, wg_bw_reduce, &j);
    mft__free(j.part);
    return true;
}
