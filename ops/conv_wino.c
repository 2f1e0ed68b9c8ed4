/* ops/conv_wino.c — Winograd F(4x4, 3x3) convolution on F32 NHWC buffers:
 * the algorithm the fast conv2d kernels (ops/conv_fast.c) choose for 3x3,
 * stride 1, dilation 1, groups 1 forward and backward_input (Note
 * [Winograd F(4x4, 3x3)]), its weight transform, tile transforms, the
 * batched 6x32 GEMM micro-kernel, the choice of when it pays, and the
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
 * - Output tiles (n, ty, tx) are numbered in order and cut into fixed
 *   blocks of T tiles (T from C and K: a block's V and M stay in the L2
 *   cache; wg_block_tiles). A block is a work item: the input transform
 *   writes V [36][T][C]; then per 32 output channels the 36 GEMMs write
 *   M [36][T][32] and the output transform adds the bias and stores the
 *   in-image part of every tile. Blocks are independent and each output
 *   element's arithmetic does not depend on the block it is in, so results
 *   are the same at any thread count and schedule.
 * - Input pixels outside the image (padding) are zeros of the patch.
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
#include <stdlib.h>
#include <string.h>
#include "mft/conv.h"
#include "ops_internal.h"
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

/* ---------------------------------------------------------------- switch */
static int wg_mode = 0;      /* tests: 0 heuristic, 1 wherever legal, 2 never */
static int wg_enabled = -1;  /* -1: read MFT_CONV_WINOGRAD on first use */

void mft__conv_wino_set_mode(int mode) { wg_mode = mode; }

void mft_conv_set_winograd(bool enabled) { wg_enabled = enabled ? 1 : 0; }

bool mft_conv_winograd_enabled(void) {
    if (wg_enabled < 0) {
        const char *e = getenv("MFT_CONV_WINOGRAD");
        wg_enabled = e && e[0] == '0' && e[1] == '\0' ? 0 : 1;
    }
    return wg_enabled == 1;
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

/* Filter, u = G g (on nl lanes, stride ls between the six results):
 *   u0 = g0 / 4                    u3 = g0 / 24 + g1 / 12 + g2 / 6
 *   u1 = -(g0 + g1 + g2) / 6       u4 = g0 / 24 - g1 / 12 + g2 / 6
 *   u2 = -(g0 - g1 + g2) / 6       u5 = g2                             */
static void wg_g(const float *g0, const float *g1, const float *g2, float *u, int ls) {
    for (int l = 0; l < WG_NB; l++) {
        const float a = g0[l], b = g1[l], c = g2[l];
        const float e = a + c, q = a * (1.0f / 24.0f) + c * (1.0f / 6.0f);
        u[l] = a * 0.25f;
        u[ls + l] = -(e + b) * (1.0f / 6.0f);
        u[2 * ls + l] = -(e - b) * (1.0f / 6.0f);
        u[3 * ls + l] = q + b * (1.0f / 12.0f);
        u[4 * ls + l] = q - b * (1.0f / 12.0f);
        u[5 * ls + l] = c;
    }
}

/* ---------------------------------------------------------------- job */
typedef struct wg_job {
    const mft__wino_geom *g;
    const float *x;
    float *y;
    float *u;       /* packed transformed weights [36][nkb][C][32] */
    int64_t nkb;    /* output channel blocks of 32 */
    int64_t TH, TW; /* tiles per image along H and W */
    int64_t ntiles, T, nblocks;
} wg_job;

static inline float wg_w(const mft__wino_geom *g, int64_t k, int64_t c, int a, int b) {
    return g->w[k * g->ws[0] + c * g->ws[1] + a * g->ws[2] + b * g->ws[3]];
}

/* Weight transform of (k block kb, input channel c) for each item. */
static void wg_pack_range(void *ctx, int64_t begin, int64_t end) {
    const wg_job *j = ctx;
    const mft__wino_geom *g = j->g;
    const int64_t C = g->C;
    for (int64_t it = begin; it < end; it++) {
        const int64_t kb = it / C, c = it % C;
        float w9[9][WG_NB], t[6][3][WG_NB], u[WG_X][WG_NB];
        for (int l = 0; l < WG_NB; l++) {
            const int64_t k = kb * WG_NB + l;
            for (int ab = 0; ab < 9; ab++) w9[ab][l] = k < g->K ? wg_w(g, k, c, ab / 3, ab % 3) : 0;
        }
        for (int b = 0; b < 3; b++) /* t[.][b] = G g[.][b] (columns) */
            wg_g(w9[b], w9[3 + b], w9[6 + b], &t[0][b][0], 3 * WG_NB);
        for (int i = 0; i < 6; i++) /* u[i][.] = G t[i][.]^T (rows) */
            wg_g(t[i][0], t[i][1], t[i][2], u[6 * i], WG_NB);
        for (int xi = 0; xi < WG_X; xi++)
            memcpy(j->u + ((xi * j->nkb + kb) * C + c) * WG_NB, u[xi], sizeof u[xi]);
    }
}

/* Input transform of tile tl into row r of V [36][T][C]. */
static void wg_input_tile(const wg_job *j, int64_t tl, float *V, int64_t T, int64_t r) {
    const mft__wino_geom *g = j->g;
    const int64_t C = g->C, n = tl / (j->TH * j->TW), ty = tl / j->TW % j->TH, tx = tl % j->TW;
    const int64_t ih0 = 4 * ty - g->ph, iw0 = 4 * tx - g->pw;
    const float *xi = j->x + n * g->H * g->W * C;
    const float *rows[6];
    bool colok[6];
    for (int i = 0; i < 6; i++) {
        const int64_t ih = ih0 + i, iw = iw0 + i;
        rows[i] = ih >= 0 && ih < g->H ? xi + ih * g->W * C : NULL;
        colok[i] = iw >= 0 && iw < g->W;
    }
    for (int64_t c0 = 0; c0 < C; c0 += WG_L) {
        const int nc = C - c0 < WG_L ? (int)(C - c0) : WG_L;
        wv t[6][6];
        for (int b = 0; b < 6; b++) { /* columns: t[.][b] = B^T d[.][b] */
            wv d[6];
            for (int i = 0; i < 6; i++)
                d[i] = rows[i] && colok[b] ? wv_load(rows[i] + (iw0 + b) * C + c0, nc) : wv_zero();
            wv r6[6];
            wg_bt(d, r6);
            for (int i = 0; i < 6; i++) t[i][b] = r6[i];
        }
        for (int i = 0; i < 6; i++) { /* rows: V[i][.] = B^T t[i][.]^T */
            wv r6[6];
            wg_bt(t[i], r6);
            for (int b = 0; b < 6; b++) wv_store(V + ((6 * i + b) * T + r) * C + c0, r6[b], nc);
        }
    }
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
    float *yt = j->y + ((n * g->OH + oh0) * g->OW + ow0) * K;
    for (int h = 0; h < WG_NB / WG_L; h++) {
        const int64_t kk = k0 + h * WG_L;
        if (kk >= K) break;
        const int nk = K - kk < WG_L ? (int)(K - kk) : WG_L;
        float bb[WG_L];
        for (int l = 0; l < WG_L; l++)
            bb[l] = g->bias && l < nk ? g->bias[(kk + l) * g->bstride] : 0.0f;
        const wv bias = wv_load(bb, WG_L);
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
                wv_store(yt + (p * g->OW + q) * K + kk, wv_add(o[p], bias), nk);
        }
    }
}

/* m[i][0..31] = sum over c < C of v[i*C + c] * u[c][0..31], i < 6 rows. */
static void wg_micro(int64_t C, const float *v, const float *u, float *m) {
#if WG_AVX512
    __m512 c0 = _mm512_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0;
    __m512 d0 = c0, d1 = c0, d2 = c0, d3 = c0, d4 = c0, d5 = c0;
    const float *v0 = v, *v1 = v + C, *v2 = v + 2 * C, *v3 = v + 3 * C, *v4 = v + 4 * C,
                *v5 = v + 5 * C;
    for (int64_t c = 0; c < C; c++, u += WG_NB) {
        const __m512 b0 = _mm512_loadu_ps(u), b1 = _mm512_loadu_ps(u + WG_L);
        __m512 a;
#define WG_STEP(i)                                                                                 \
    a = _mm512_set1_ps(v##i[c]);                                                                   \
    c##i = _mm512_fmadd_ps(a, b0, c##i);                                                           \
    d##i = _mm512_fmadd_ps(a, b1, d##i);
        WG_STEP(0) WG_STEP(1) WG_STEP(2) WG_STEP(3) WG_STEP(4) WG_STEP(5)
#undef WG_STEP
    }
#define WG_STORE(i)                                                                                \
    _mm512_storeu_ps(m + i * WG_NB, c##i);                                                         \
    _mm512_storeu_ps(m + i * WG_NB + WG_L, d##i);
    WG_STORE(0) WG_STORE(1) WG_STORE(2) WG_STORE(3) WG_STORE(4) WG_STORE(5)
#undef WG_STORE
#else
    for (int i = 0; i < WG_MR; i++) {
        float acc[WG_NB] = {0};
        for (int64_t c = 0; c < C; c++)
            for (int l = 0; l < WG_NB; l++) acc[l] += v[i * C + c] * u[c * WG_NB + l];
        memcpy(m + i * WG_NB, acc, sizeof acc);
    }
#endif
}

/* The tiles of block b by plain loops (no scratch memory). */
static void wg_block_direct(const wg_job *j, int64_t b) {
    const mft__wino_geom *g = j->g;
    const int64_t t1 = (b + 1) * j->T < j->ntiles ? (b + 1) * j->T : j->ntiles;
    for (int64_t tl = b * j->T; tl < t1; tl++) {
        const int64_t n = tl / (j->TH * j->TW), ty = tl / j->TW % j->TH, tx = tl % j->TW;
        for (int64_t oh = 4 * ty; oh < 4 * ty + 4 && oh < g->OH; oh++)
            for (int64_t ow = 4 * tx; ow < 4 * tx + 4 && ow < g->OW; ow++)
                for (int64_t k = 0; k < g->K; k++) {
                    float s = g->bias ? g->bias[k * g->bstride] : 0.0f;
                    for (int a = 0; a < 3; a++) {
                        const int64_t ih = oh - g->ph + a;
                        if (ih < 0 || ih >= g->H) continue;
                        for (int bb = 0; bb < 3; bb++) {
                            const int64_t iw = ow - g->pw + bb;
                            if (iw < 0 || iw >= g->W) continue;
                            const float *xp = j->x + ((n * g->H + ih) * g->W + iw) * g->C;
                            for (int64_t c = 0; c < g->C; c++) s += xp[c] * wg_w(g, k, c, a, bb);
                        }
                    }
                    j->y[((n * g->OH + oh) * g->OW + ow) * g->K + k] = s;
                }
    }
}

static void wg_range(void *ctx, int64_t begin, int64_t end) {
    const wg_job *j = ctx;
    const int64_t C = j->g->C, T = j->T;
    const size_t vn = (size_t)(WG_X * T * C), mn = (size_t)(WG_X * T * WG_NB);
    float *V = mft__alloc((vn + mn) * sizeof(float), 64);
    if (!V) {
        for (int64_t b = begin; b < end; b++) wg_block_direct(j, b);
        return;
    }
    float *M = V + vn;
    for (int64_t b = begin; b < end; b++) {
        const int64_t t0 = b * T, nt = j->ntiles - t0 < T ? j->ntiles - t0 : T;
        for (int64_t r = 0; r < nt; r++) wg_input_tile(j, t0 + r, V, T, r);
        if (nt < T) /* rows past the last tile: zeros, never stored */
            for (int xi = 0; xi < WG_X; xi++)
                memset(V + (xi * T + nt) * C, 0, (size_t)((T - nt) * C) * sizeof(float));
        const int64_t nr = (nt + WG_MR - 1) / WG_MR * WG_MR;
        for (int64_t kb = 0; kb < j->nkb; kb++) {
            for (int xi = 0; xi < WG_X; xi++) {
                const float *up = j->u + (xi * j->nkb + kb) * C * WG_NB;
                for (int64_t r = 0; r < nr; r += WG_MR)
                    wg_micro(C, V + (xi * T + r) * C, up, M + (xi * T + r) * WG_NB);
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

bool mft__conv_wino_applies(const mft__wino_geom *g) {
    if (wg_mode == 2 || !mft_conv_winograd_enabled()) return false;
    if (g->N < 1 || g->C < 1 || g->K < 1 || g->OH < 1 || g->OW < 1) return false;
    if (wg_mode == 1) return true;
    if (!WG_AVX512 || g->C < 16 || g->K < 16) return false;
    /* 4x fewer multiplications, less the outputs computed past the edges */
    const int64_t th = (g->OH + 3) / 4, tw = (g->OW + 3) / 4;
    return 2 * g->OH * g->OW >= th * tw * 16;
}

bool mft__conv_wino_forward(const mft__wino_geom *g, const float *x, float *y) {
    wg_job j;
    memset(&j, 0, sizeof j);
    j.g = g;
    j.x = x;
    j.y = y;
    j.nkb = (g->K + WG_NB - 1) / WG_NB;
    j.TH = (g->OH + 3) / 4;
    j.TW = (g->OW + 3) / 4;
    j.ntiles = g->N * j.TH * j.TW;
    j.T = wg_block_tiles(g);
    j.nblocks = (j.ntiles + j.T - 1) / j.T;
    j.u = mft__alloc((size_t)(WG_X * j.nkb * g->C * WG_NB) * sizeof(float), 64);
    if (!j.u) return false;
    mft__parallel_for(0, j.nkb * g->C, 16, wg_pack_range, &j);
    mft__parallel_for_dynamic(0, j.nblocks, 1, wg_range, &j);
    mft__free(j.u);
    return true;
}
