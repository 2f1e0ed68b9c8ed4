/* ops/conv/microkernels.c — the inner kernels of the fast F32 convolution
 * kernels (indirect.c, backward_weight.c, pointwise_nchw.c), reached through
 * the pickers at the end: the 6x16 indirect-convolution and backward_weight
 * micro-kernels (AVX-512, AVX2/FMA and portable C of the same tiling) and
 * their AVX-512 6x32 variants over two column blocks, and AVX-512 8-row
 * backward_weight tiles (8x16, 8x32) for input channels in multiples of 8.
 * Their types are in conv_internal.h. */
#include "conv_internal.h"

/* ---------------------------------------------------------------- micro-kernels */
static void ind_micro_c(int64_t nu, const int32_t *taps, int64_t K, const float *const *ptrs,
                        const float *wg, const float *b16, float *const *orow) {
    for (int i = 0; i < TILE_M; i++) {
        float t[TILE_N];
        for (int j = 0; j < TILE_N; j++) t[j] = b16[j];
        for (int64_t u = 0; u < nu; u++) {
            const float *a = ptrs[6 * u + i];
            const float *w = wg + (int64_t)taps[u] * K * TILE_N;
            for (int64_t k = 0; k < K; k++, w += TILE_N) {
                const float av = a[k];
                for (int j = 0; j < TILE_N; j++) t[j] += av * w[j];
            }
        }
        for (int j = 0; j < TILE_N; j++) orow[i][j] = t[j];
    }
}

static void bw_micro_c(int64_t nq, const int64_t *xo, const int64_t *go, int64_t n,
                       const float *const *xr, int64_t xs, const float *gp, int64_t gs,
                       float *acc) {
    for (int i = 0; i < TILE_M; i++) {
        float t[TILE_N];
        for (int j = 0; j < TILE_N; j++) t[j] = acc[i * TILE_N + j];
        for (int64_t q = 0; q < nq; q++) {
            const float *x = xr[i] + (xo ? xo[q] : 0);
            const float *g = gp + (go ? go[q] : 0);
            for (int64_t r = 0; r < n; r++) {
                const float xv = x[r * xs];
                const float *gr = g + r * gs;
                for (int j = 0; j < TILE_N; j++) t[j] += xv * gr[j];
            }
        }
        for (int j = 0; j < TILE_N; j++) acc[i * TILE_N + j] = t[j];
    }
}

#if CF_AVX2 && !CF_AVX512
static void ind_micro_avx(int64_t nu, const int32_t *taps, int64_t K, const float *const *ptrs,
                          const float *wg, const float *b16, float *const *orow) {
    __m256 c00 = _mm256_loadu_ps(b16), c01 = _mm256_loadu_ps(b16 + 8);
    __m256 c10 = c00, c11 = c01, c20 = c00, c21 = c01, c30 = c00, c31 = c01, c40 = c00, c41 = c01,
           c50 = c00, c51 = c01;
    for (int64_t u = 0; u < nu; u++) {
        const float *a0 = ptrs[6 * u], *a1 = ptrs[6 * u + 1], *a2 = ptrs[6 * u + 2],
                    *a3 = ptrs[6 * u + 3], *a4 = ptrs[6 * u + 4], *a5 = ptrs[6 * u + 5];
        const float *w = wg + (int64_t)taps[u] * K * TILE_N;
        for (int64_t k = 0; k < K; k++, w += TILE_N) {
            const __m256 b0 = _mm256_loadu_ps(w), b1 = _mm256_loadu_ps(w + 8);
            __m256 av = _mm256_broadcast_ss(a0 + k);
            c00 = _mm256_fmadd_ps(av, b0, c00);
            c01 = _mm256_fmadd_ps(av, b1, c01);
            av = _mm256_broadcast_ss(a1 + k);
            c10 = _mm256_fmadd_ps(av, b0, c10);
            c11 = _mm256_fmadd_ps(av, b1, c11);
            av = _mm256_broadcast_ss(a2 + k);
            c20 = _mm256_fmadd_ps(av, b0, c20);
            c21 = _mm256_fmadd_ps(av, b1, c21);
            av = _mm256_broadcast_ss(a3 + k);
            c30 = _mm256_fmadd_ps(av, b0, c30);
            c31 = _mm256_fmadd_ps(av, b1, c31);
            av = _mm256_broadcast_ss(a4 + k);
            c40 = _mm256_fmadd_ps(av, b0, c40);
            c41 = _mm256_fmadd_ps(av, b1, c41);
            av = _mm256_broadcast_ss(a5 + k);
            c50 = _mm256_fmadd_ps(av, b0, c50);
            c51 = _mm256_fmadd_ps(av, b1, c51);
        }
    }
    _mm256_storeu_ps(orow[0], c00);
    _mm256_storeu_ps(orow[0] + 8, c01);
    _mm256_storeu_ps(orow[1], c10);
    _mm256_storeu_ps(orow[1] + 8, c11);
    _mm256_storeu_ps(orow[2], c20);
    _mm256_storeu_ps(orow[2] + 8, c21);
    _mm256_storeu_ps(orow[3], c30);
    _mm256_storeu_ps(orow[3] + 8, c31);
    _mm256_storeu_ps(orow[4], c40);
    _mm256_storeu_ps(orow[4] + 8, c41);
    _mm256_storeu_ps(orow[5], c50);
    _mm256_storeu_ps(orow[5] + 8, c51);
}

static void bw_micro_avx(int64_t nq, const int64_t *xo, const int64_t *go, int64_t n,
                         const float *const *xr, int64_t xs, const float *gp0, int64_t gs,
                         float *acc) {
    __m256 c00 = _mm256_loadu_ps(acc), c01 = _mm256_loadu_ps(acc + 8);
    __m256 c10 = _mm256_loadu_ps(acc + 16), c11 = _mm256_loadu_ps(acc + 24);
    __m256 c20 = _mm256_loadu_ps(acc + 32), c21 = _mm256_loadu_ps(acc + 40);
    __m256 c30 = _mm256_loadu_ps(acc + 48), c31 = _mm256_loadu_ps(acc + 56);
    __m256 c40 = _mm256_loadu_ps(acc + 64), c41 = _mm256_loadu_ps(acc + 72);
    __m256 c50 = _mm256_loadu_ps(acc + 80), c51 = _mm256_loadu_ps(acc + 88);
    for (int64_t q = 0; q < nq; q++) {
        const int64_t x0 = xo ? xo[q] : 0;
        const float *a0 = xr[0] + x0, *a1 = xr[1] + x0, *a2 = xr[2] + x0, *a3 = xr[3] + x0,
                    *a4 = xr[4] + x0, *a5 = xr[5] + x0;
        const float *gp = gp0 + (go ? go[q] : 0);
        for (int64_t r = 0, o = 0; r < n; r++, o += xs, gp += gs) {
            const __m256 b0 = _mm256_loadu_ps(gp), b1 = _mm256_loadu_ps(gp + 8);
            __m256 av = _mm256_broadcast_ss(a0 + o);
            c00 = _mm256_fmadd_ps(av, b0, c00);
            c01 = _mm256_fmadd_ps(av, b1, c01);
            av = _mm256_broadcast_ss(a1 + o);
            c10 = _mm256_fmadd_ps(av, b0, c10);
            c11 = _mm256_fmadd_ps(av, b1, c11);
            av = _mm256_broadcast_ss(a2 + o);
            c20 = _mm256_fmadd_ps(av, b0, c20);
            c21 = _mm256_fmadd_ps(av, b1, c21);
            av = _mm256_broadcast_ss(a3 + o);
            c30 = _mm256_fmadd_ps(av, b0, c30);
            c31 = _mm256_fmadd_ps(av, b1, c31);
            av = _mm256_broadcast_ss(a4 + o);
            c40 = _mm256_fmadd_ps(av, b0, c40);
            c41 = _mm256_fmadd_ps(av, b1, c41);
            av = _mm256_broadcast_ss(a5 + o);
            c50 = _mm256_fmadd_ps(av, b0, c50);
            c51 = _mm256_fmadd_ps(av, b1, c51);
        }
    }
    _mm256_storeu_ps(acc, c00);
    _mm256_storeu_ps(acc + 8, c01);
    _mm256_storeu_ps(acc + 16, c10);
    _mm256_storeu_ps(acc + 24, c11);
    _mm256_storeu_ps(acc + 32, c20);
    _mm256_storeu_ps(acc + 40, c21);
    _mm256_storeu_ps(acc + 48, c30);
    _mm256_storeu_ps(acc + 56, c31);
    _mm256_storeu_ps(acc + 64, c40);
    _mm256_storeu_ps(acc + 72, c41);
    _mm256_storeu_ps(acc + 80, c50);
    _mm256_storeu_ps(acc + 88, c51);
}
#endif

#if CF_AVX512
/* The same 6x16 tiles with one 16-lane register per row. Six accumulators
 * would leave the two FMA pipes waiting on latency, so even and odd k (or
 * r) accumulate into separate registers (12 chains), summed at the end. */
#define CF512_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)
static void ind_micro_avx512(int64_t nu, const int32_t *taps, int64_t K,
                             const float *const *ptrs, const float *wg, const float *b16,
                             float *const *orow) {
    const __m512 zero = _mm512_setzero_ps(), bias = _mm512_loadu_ps(b16);
#define DECL(i) __m512 c##i = bias, d##i = zero;
    CF512_ROWS(DECL)
#undef DECL
    for (int64_t u = 0; u < nu; u++) {
        const float *a0 = ptrs[6 * u], *a1 = ptrs[6 * u + 1], *a2 = ptrs[6 * u + 2],
                    *a3 = ptrs[6 * u + 3], *a4 = ptrs[6 * u + 4], *a5 = ptrs[6 * u + 5];
        const float *w = wg + (int64_t)taps[u] * K * TILE_N;
        int64_t k = 0;
        for (; k + 2 <= K; k += 2, w += 2 * TILE_N) {
            const __m512 b0 = _mm512_loadu_ps(w), b1 = _mm512_loadu_ps(w + TILE_N);
#define STEP(i)                                                                                    \
    c##i = _mm512_fmadd_ps(_mm512_set1_ps(a##i[k]), b0, c##i);                                     \
    d##i = _mm512_fmadd_ps(_mm512_set1_ps(a##i[k + 1]), b1, d##i);
            CF512_ROWS(STEP)
#undef STEP
        }
        if (k < K) {
            const __m512 b0 = _mm512_loadu_ps(w);
#define STEP(i) c##i = _mm512_fmadd_ps(_mm512_set1_ps(a##i[k]), b0, c##i);
            CF512_ROWS(STEP)
#undef STEP
        }
    }
#define STORE(i) _mm512_storeu_ps(orow[i], _mm512_add_ps(c##i, d##i));
    CF512_ROWS(STORE)
#undef STORE
}

/* The backward_weight tiles, for ROWS rows (input channels): 6 (TILE_M) or
 * 8, which wastes no row on 32- or 64-channel inputs (AVX-512 has the
 * registers: 8x32 holds 16 accumulators). */
#define CF512_ROWS8(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
/* Item q's row pointers a0.. and grad_y pointer gp (both tile kinds). */
#define CF512_BW_ROWS_OF_Q(ROWS, ROWPTR)                                                           \
    const int64_t x0 = xo ? xo[q] : 0;                                                             \
    const float *ab = xr[0] + x0;                                                                  \
    (void)ab;                                                                                      \
    ROWS(ROWPTR)                                                                                   \
    const float *gp = gp0 + (go ? go[q] : 0);
#define CF512_BW_MICRO(NAME, ROWS, ROWPTR)                                                         \
    static void NAME(int64_t nq, const int64_t *xo, const int64_t *go, int64_t n,                  \
                     const float *const *xr, int64_t xs, const float *gp0, int64_t gs,             \
                     float *acc) {                                                                 \
        const __m512 zero = _mm512_setzero_ps();                                                   \
        ROWS(CF512_BW_DECL1)                                                                       \
        for (int64_t q = 0; q < nq; q++) {                                                         \
            CF512_BW_ROWS_OF_Q(ROWS, ROWPTR)                                                       \
            int64_t r = 0, o = 0;                                                                  \
            for (; r + 2 <= n; r += 2, o += 2 * xs, gp += 2 * gs) {                                \
                const __m512 b0 = _mm512_loadu_ps(gp), b1 = _mm512_loadu_ps(gp + gs);              \
                ROWS(CF512_BW_STEP2)                                                               \
            }                                                                                      \
            if (r < n) {                                                                           \
                const __m512 b0 = _mm512_loadu_ps(gp);                                             \
                ROWS(CF512_BW_STEP1)                                                               \
            }                                                                                      \
        }                                                                                          \
        ROWS(CF512_BW_STORE1)                                                                      \
    }
#define CF512_BW_DECL1(i) __m512 c##i = _mm512_loadu_ps(acc + i * TILE_N), d##i = zero;
#define CF512_BW_ROWPTR(i) const float *a##i = xr[i] + x0;
/* 8-row tiles need consecutive rows (xr[i] = xr[0] + i: C_in % 8 == 0):
 * one base register instead of eight, which would not fit with the rest */
#define CF512_BW_ROWPTR8(i) const float *a##i = ab + i;
#define CF512_BW_STEP2(i)                                                                          \
    c##i = _mm512_fmadd_ps(_mm512_set1_ps(a##i[o]), b0, c##i);                                     \
    d##i = _mm512_fmadd_ps(_mm512_set1_ps(a##i[o + xs]), b1, d##i);
#define CF512_BW_STEP1(i) c##i = _mm512_fmadd_ps(_mm512_set1_ps(a##i[o]), b0, c##i);
#define CF512_BW_STORE1(i) _mm512_storeu_ps(acc + i * TILE_N, _mm512_add_ps(c##i, d##i));
CF512_BW_MICRO(bw_micro_avx512, CF512_ROWS, CF512_BW_ROWPTR)
CF512_BW_MICRO(bw_micro8_avx512, CF512_ROWS8, CF512_BW_ROWPTR8)

/* 6x32 tiles over two adjacent 16-wide column blocks, for machines whose
 * load ports, not FMA pipes, limit the 6x16 tile (it needs 7 loads per 6
 * FMAs; this one 8 per 12). The blocks keep the 6x16 packing: block 1's
 * weights start ws floats after block 0's (ind2), block 1's grad_y columns
 * 16 floats after block 0's and its accumulators at acc1 (bw2). The sums
 * run in (u, k) / (q, r) order in one chain per register. */
static void ind_micro2_avx512(int64_t nu, const int32_t *taps, int64_t K,
                              const float *const *ptrs, const float *wg, int64_t ws,
                              const float *b32, float *const *orow) {
    const __m512 bias0 = _mm512_loadu_ps(b32), bias1 = _mm512_loadu_ps(b32 + TILE_N);
#define DECL(i) __m512 c##i = bias0, d##i = bias1;
    CF512_ROWS(DECL)
#undef DECL
    for (int64_t u = 0; u < nu; u++) {
        const float *a0 = ptrs[6 * u], *a1 = ptrs[6 * u + 1], *a2 = ptrs[6 * u + 2],
                    *a3 = ptrs[6 * u + 3], *a4 = ptrs[6 * u + 4], *a5 = ptrs[6 * u + 5];
        const float *w = wg + (int64_t)taps[u] * K * TILE_N;
        for (int64_t k = 0; k < K; k++, w += TILE_N) {
            const __m512 b0 = _mm512_loadu_ps(w), b1 = _mm512_loadu_ps(w + ws);
            __m512 av;
#define STEP(i)                                                                                    \
    av = _mm512_set1_ps(a##i[k]);                                                                  \
    c##i = _mm512_fmadd_ps(av, b0, c##i);                                                          \
    d##i = _mm512_fmadd_ps(av, b1, d##i);
            CF512_ROWS(STEP)
#undef STEP
        }
    }
#define STORE(i)                                                                                   \
    _mm512_storeu_ps(orow[i], c##i);                                                               \
    _mm512_storeu_ps(orow[i] + TILE_N, d##i);
    CF512_ROWS(STORE)
#undef STORE
}

#define CF512_BW_MICRO2(NAME, ROWS, ROWPTR)                                                        \
    static void NAME(int64_t nq, const int64_t *xo, const int64_t *go, int64_t n,                  \
                     const float *const *xr, int64_t xs, const float *gp0, int64_t gs,             \
                     float *acc0, float *acc1) {                                                   \
        ROWS(CF512_BW_DECL2)                                                                       \
        for (int64_t q = 0; q < nq; q++) {                                                         \
            CF512_BW_ROWS_OF_Q(ROWS, ROWPTR)                                                       \
            for (int64_t r = 0, o = 0; r < n; r++, o += xs, gp += gs) {                            \
                const __m512 b0 = _mm512_loadu_ps(gp), b1 = _mm512_loadu_ps(gp + TILE_N);          \
                __m512 av;                                                                         \
                ROWS(CF512_BW_STEP12)                                                              \
            }                                                                                      \
        }                                                                                          \
        ROWS(CF512_BW_STORE2)                                                                      \
    }
#define CF512_BW_DECL2(i)                                                                          \
    __m512 c##i = _mm512_loadu_ps(acc0 + i * TILE_N), d##i = _mm512_loadu_ps(acc1 + i * TILE_N);
#define CF512_BW_STEP12(i)                                                                         \
    av = _mm512_set1_ps(a##i[o]);                                                                  \
    c##i = _mm512_fmadd_ps(av, b0, c##i);                                                          \
    d##i = _mm512_fmadd_ps(av, b1, d##i);
#define CF512_BW_STORE2(i)                                                                         \
    _mm512_storeu_ps(acc0 + i * TILE_N, c##i);                                                     \
    _mm512_storeu_ps(acc1 + i * TILE_N, d##i);
CF512_BW_MICRO2(bw_micro2_avx512, CF512_ROWS, CF512_BW_ROWPTR)
CF512_BW_MICRO2(bw_micro2_8_avx512, CF512_ROWS8, CF512_BW_ROWPTR8)
#undef CF512_ROWS
#endif

/* ---------------------------------------------------------------- pickers
 * The kernels of this build and test mode (declared in conv_internal.h). */
ind_micro2_fn mft__conv_pick_ind_micro2(void) {
#if CF_AVX512
    if (cf_mode() == 0) return ind_micro2_avx512;
#endif
    return NULL;
}
bw_micro2_fn mft__conv_pick_bw_micro2(void) {
#if CF_AVX512
    if (cf_mode() == 0) return bw_micro2_avx512;
#endif
    return NULL;
}
bool mft__conv_pick_bw_micro8(bw_micro_fn *m, bw_micro2_fn *m2) {
#if CF_AVX512
    if (cf_mode() == 0) {
        *m = bw_micro8_avx512;
        *m2 = bw_micro2_8_avx512;
        return true;
    }
#endif
    (void)m;
    (void)m2;
    return false;
}

ind_micro_fn mft__conv_pick_ind_micro(void) {
#if CF_AVX512
    if (cf_mode() != 1) return ind_micro_avx512;
#elif CF_AVX2
    if (cf_mode() != 1) return ind_micro_avx;
#endif
    return ind_micro_c;
}
bw_micro_fn mft__conv_pick_bw_micro(void) {
#if CF_AVX512
    if (cf_mode() != 1) return bw_micro_avx512;
#elif CF_AVX2
    if (cf_mode() != 1) return bw_micro_avx;
#endif
    return bw_micro_c;
}
