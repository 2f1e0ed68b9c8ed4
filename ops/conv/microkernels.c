/* ops/conv/microkernels.h — the inner kernels of ops/conv_fast.c (included
 * by it once, after its tile constants and mode switch): the 6x16
 * indirect-convolution and backward_weight micro-kernels (AVX-512, AVX2/FMA
 * and portable C of the same tiling) and their AVX-512 6x32 variants over two
 * column blocks, AVX-512 8-row backward_weight tiles (8x16, 8x32) for input
 * channels in multiples of 8, the depthwise per-pixel kernel, and the
 * blocked 8x8 transpose used by the NCHW kernels. Not a public or shared
 * header. */
#ifndef MFT_CONV_FAST_KERNELS_H
#define MFT_CONV_FAST_KERNELS_H

/* ---------------------------------------------------------------- micro-kernels
 * orow[i][j] = b16[j] + sum over (u < nu, k < K) a_u,i[k] * w_u[k][j] for a
 * 6x16 tile; a_u,i = ptrs[6u + i], w_u = wg + taps[u]*K*16. Each row is
 * stored at its own pointer, so a tile's dst pixels need not be evenly
 * spaced (class-ordered tiles: no copy through a buffer). */
typedef void (*ind_micro_fn)(int64_t nu, const int32_t *taps, int64_t K, const float *const *ptrs,
                             const float *wg, const float *b16, float *const *orow);

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

/* acc (6x16, ld 16) += sum over runs q < nq, r < n of
 *   x_i[xo[q] + r*xs] * g[go[q] + r*gs + j],  x_i = xr[i], g = gp.
 * Several runs (rows of an image) per call keep the accumulators in
 * registers longer; xo/go NULL means one run at offset 0. */
typedef void (*bw_micro_fn)(int64_t nq, const int64_t *xo, const int64_t *go, int64_t n,
                            const float *const *xr, int64_t xs, const float *gp, int64_t gs,
                            float *acc);

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

/* The 6x32 kernels, or NULL where the 6x16 ones run alone. */
typedef void (*ind_micro2_fn)(int64_t nu, const int32_t *taps, int64_t K,
                              const float *const *ptrs, const float *wg, int64_t ws,
                              const float *b32, float *const *orow);
typedef void (*bw_micro2_fn)(int64_t nq, const int64_t *xo, const int64_t *go, int64_t n,
                             const float *const *xr, int64_t xs, const float *gp0, int64_t gs,
                             float *acc0, float *acc1);
static ind_micro2_fn pick_ind_micro2(void) {
#if CF_AVX512
    if (cf_mode == 0) return ind_micro2_avx512;
#endif
    return NULL;
}
static bw_micro2_fn pick_bw_micro2(void) {
#if CF_AVX512
    if (cf_mode == 0) return bw_micro2_avx512;
#endif
    return NULL;
}
/* The 8-row backward_weight tiles (8x16 into *m, 8x32 into *m2); false
 * (nothing written) where they do not exist: 6 rows then. */
static bool pick_bw_micro8(bw_micro_fn *m, bw_micro2_fn *m2) {
#if CF_AVX512
    if (cf_mode == 0) {
        *m = bw_micro8_avx512;
        *m2 = bw_micro2_8_avx512;
        return true;
    }
#endif
    (void)m;
    (void)m2;
    return false;
}

static ind_micro_fn pick_ind_micro(void) {
#if CF_AVX512
    if (cf_mode != 1) return ind_micro_avx512;
#elif CF_AVX2
    if (cf_mode != 1) return ind_micro_avx;
#endif
    return ind_micro_c;
}
static bw_micro_fn pick_bw_micro(void) {
#if CF_AVX512
    if (cf_mode != 1) return bw_micro_avx512;
#elif CF_AVX2
    if (cf_mode != 1) return bw_micro_avx;
#endif
    return bw_micro_c;
}

/* ---------------------------------------------------------------- depthwise pixel */
#define DW_CHUNK 32
#if CF_AVX512
/* Plain depthwise (one input channel per output channel): 64 channels of
 * one dst pixel (dw512_one) or of two (dw512_two, sharing the weight loads)
 * in 16-lane registers; even and odd taps in separate accumulators in
 * dw512_one (8 chains). Streaming stores only where a line is 64-byte
 * aligned. Return the channels done (a multiple of 64). */
static inline void dw512_st(float *p, __m512 v, bool nt) {
    if (nt && ((uintptr_t)p & 63) == 0)
        _mm512_stream_ps(p, v);
    else
        _mm512_storeu_ps(p, v);
}
static int64_t dw512_one(float *o, const float *b, const float *const *a, int64_t sh,
                         const float *const *w, int64_t nu, int64_t dC, bool nt) {
    int64_t c = 0;
    for (; c + 64 <= dC; c += 64) {
        __m512 s0 = _mm512_loadu_ps(b + c), s1 = _mm512_loadu_ps(b + c + 16),
               s2 = _mm512_loadu_ps(b + c + 32), s3 = _mm512_loadu_ps(b + c + 48);
        __m512 t0 = _mm512_setzero_ps(), t1 = t0, t2 = t0, t3 = t0;
        int64_t u = 0;
        for (; u + 2 <= nu; u += 2) {
            const float *p = a[u] + sh + c, *q = a[u + 1] + sh + c, *wp = w[u] + c,
                        *wq = w[u + 1] + c;
            s0 = _mm512_fmadd_ps(_mm512_loadu_ps(p), _mm512_loadu_ps(wp), s0);
            s1 = _mm512_fmadd_ps(_mm512_loadu_ps(p + 16), _mm512_loadu_ps(wp + 16), s1);
            s2 = _mm512_fmadd_ps(_mm512_loadu_ps(p + 32), _mm512_loadu_ps(wp + 32), s2);
            s3 = _mm512_fmadd_ps(_mm512_loadu_ps(p + 48), _mm512_loadu_ps(wp + 48), s3);
            t0 = _mm512_fmadd_ps(_mm512_loadu_ps(q), _mm512_loadu_ps(wq), t0);
            t1 = _mm512_fmadd_ps(_mm512_loadu_ps(q + 16), _mm512_loadu_ps(wq + 16), t1);
            t2 = _mm512_fmadd_ps(_mm512_loadu_ps(q + 32), _mm512_loadu_ps(wq + 32), t2);
            t3 = _mm512_fmadd_ps(_mm512_loadu_ps(q + 48), _mm512_loadu_ps(wq + 48), t3);
        }
        if (u < nu) {
            const float *p = a[u] + sh + c, *wp = w[u] + c;
            s0 = _mm512_fmadd_ps(_mm512_loadu_ps(p), _mm512_loadu_ps(wp), s0);
            s1 = _mm512_fmadd_ps(_mm512_loadu_ps(p + 16), _mm512_loadu_ps(wp + 16), s1);
            s2 = _mm512_fmadd_ps(_mm512_loadu_ps(p + 32), _mm512_loadu_ps(wp + 32), s2);
            s3 = _mm512_fmadd_ps(_mm512_loadu_ps(p + 48), _mm512_loadu_ps(wp + 48), s3);
        }
        dw512_st(o + c, _mm512_add_ps(s0, t0), nt);
        dw512_st(o + c + 16, _mm512_add_ps(s1, t1), nt);
        dw512_st(o + c + 32, _mm512_add_ps(s2, t2), nt);
        dw512_st(o + c + 48, _mm512_add_ps(s3, t3), nt);
    }
    return c;
}
/* Plain depthwise forward with 3 taps along W at unit stride and
 * dilation, over n consecutive dst pixels of one row whose taps all lie in
 * the source (the interior): the nr source rows start at rp[k] (the first
 * pixel's first tap column), tap (k, kw) has packed weights wv[3*k + kw].
 * Per 16-channel slice the 3*nr weights stay in registers, and the source
 * columns slide through registers: each pixel loads one new column per row
 * (nr loads for 3*nr FMAs, against 3*nr + weights in dw512_two). Taps in
 * order (k, kw), even ones onto the bias, odd ones onto 0, summed at the
 * end. 8x64x56x56 3x3, 1 thread: one image (in cache) 0.060 -> 0.046 ms,
 * all 8 0.52 -> 0.37-0.39 ms. dC % 16 == 0. */
static inline __attribute__((always_inline)) void
dw512_slide_nr(float *o, const float *b, const float *const *rp, const float *const *wv,
               int64_t n, int64_t sC, int64_t dC, bool nt, const int nr) {
    for (int64_t c = 0; c + 16 <= dC; c += 16) {
        __m512 w[3][3], pa[3], pb[3];
        for (int k = 0; k < nr; k++) {
            for (int kw = 0; kw < 3; kw++) w[k][kw] = _mm512_loadu_ps(wv[3 * k + kw] + c);
            pa[k] = _mm512_loadu_ps(rp[k] + c);
            pb[k] = _mm512_loadu_ps(rp[k] + sC + c);
        }
        const __m512 bias = _mm512_loadu_ps(b + c);
        for (int64_t i = 0; i < n; i++) {
            __m512 pc[3], acc[2] = {bias, _mm512_setzero_ps()};
            for (int k = 0; k < nr; k++) pc[k] = _mm512_loadu_ps(rp[k] + (i + 2) * sC + c);
            for (int k = 0; k < nr; k++) {
                acc[(3 * k) & 1] = _mm512_fmadd_ps(pa[k], w[k][0], acc[(3 * k) & 1]);
                acc[(3 * k + 1) & 1] = _mm512_fmadd_ps(pb[k], w[k][1], acc[(3 * k + 1) & 1]);
                acc[(3 * k + 2) & 1] = _mm512_fmadd_ps(pc[k], w[k][2], acc[(3 * k + 2) & 1]);
                pa[k] = pb[k];
                pb[k] = pc[k];
            }
            dw512_st(o + i * dC + c, _mm512_add_ps(acc[0], acc[1]), nt);
        }
    }
}
static void dw512_slide(float *o, const float *b, const float *const *rp,
                        const float *const *wv, int nr, int64_t n, int64_t sC, int64_t dC,
                        bool nt) {
    switch (nr) {
    case 1: dw512_slide_nr(o, b, rp, wv, n, sC, dC, nt, 1); break;
    case 2: dw512_slide_nr(o, b, rp, wv, n, sC, dC, nt, 2); break;
    default: dw512_slide_nr(o, b, rp, wv, n, sC, dC, nt, 3); break;
    }
}
/* Plain depthwise backward_weight over the interior n output columns of one
 * row (every kw tap inside), 3 taps along W at unit stride and dilation: tap
 * (k, kw) of the nr source rows xr[k] (at the first column's kw = 0 source)
 * gets sum over the columns of grad_y * x, per 16-channel slice in 3*nr
 * registers, the source columns sliding through registers (nr + 1 loads per
 * 3*nr FMAs); then added to part[tix[3*k + kw] * C]. C % 16 == 0. */
static inline __attribute__((always_inline)) void
dw512_bw_slide_nr(float *part, const float *const *xr, const float *gy, int64_t n, int64_t C,
                  const int64_t *tix, const int nr) {
    for (int64_t c = 0; c + 16 <= C; c += 16) {
        __m512 acc[3][3], v0[3], v1[3];
        for (int k = 0; k < nr; k++) {
            for (int kw = 0; kw < 3; kw++) acc[k][kw] = _mm512_setzero_ps();
            v0[k] = _mm512_loadu_ps(xr[k] + c);
            v1[k] = _mm512_loadu_ps(xr[k] + C + c);
        }
        for (int64_t i = 0; i < n; i++) {
            const __m512 gv = _mm512_loadu_ps(gy + i * C + c);
            for (int k = 0; k < nr; k++) {
                const __m512 v2 = _mm512_loadu_ps(xr[k] + (i + 2) * C + c);
                acc[k][0] = _mm512_fmadd_ps(gv, v0[k], acc[k][0]);
                acc[k][1] = _mm512_fmadd_ps(gv, v1[k], acc[k][1]);
                acc[k][2] = _mm512_fmadd_ps(gv, v2, acc[k][2]);
                v0[k] = v1[k];
                v1[k] = v2;
            }
        }
        for (int k = 0; k < nr; k++)
            for (int kw = 0; kw < 3; kw++) {
                float *pt = part + tix[3 * k + kw] * C + c;
                _mm512_storeu_ps(pt, _mm512_add_ps(_mm512_loadu_ps(pt), acc[k][kw]));
            }
    }
}
static void dw512_bw_slide(float *part, const float *const *xr, const float *gy, int64_t n,
                           int64_t C, const int64_t *tix, int nr) {
    switch (nr) {
    case 1: dw512_bw_slide_nr(part, xr, gy, n, C, tix, 1); break;
    case 2: dw512_bw_slide_nr(part, xr, gy, n, C, tix, 2); break;
    default: dw512_bw_slide_nr(part, xr, gy, n, C, tix, 3); break;
    }
}
static int64_t dw512_two(float *o0, float *o1, const float *b, const float *const *a,
                         int64_t sh0, int64_t sh1, const float *const *w, int64_t nu, int64_t dC,
                         bool nt) {
    int64_t c = 0;
    for (; c + 64 <= dC; c += 64) {
        __m512 s0 = _mm512_loadu_ps(b + c), s1 = _mm512_loadu_ps(b + c + 16),
               s2 = _mm512_loadu_ps(b + c + 32), s3 = _mm512_loadu_ps(b + c + 48);
        __m512 t0 = s0, t1 = s1, t2 = s2, t3 = s3;
        for (int64_t u = 0; u < nu; u++) {
            const float *p = a[u] + sh0 + c, *q = a[u] + sh1 + c, *wu = w[u] + c;
            const __m512 w0 = _mm512_loadu_ps(wu), w1 = _mm512_loadu_ps(wu + 16),
                         w2 = _mm512_loadu_ps(wu + 32), w3 = _mm512_loadu_ps(wu + 48);
            s0 = _mm512_fmadd_ps(_mm512_loadu_ps(p), w0, s0);
            s1 = _mm512_fmadd_ps(_mm512_loadu_ps(p + 16), w1, s1);
            s2 = _mm512_fmadd_ps(_mm512_loadu_ps(p + 32), w2, s2);
            s3 = _mm512_fmadd_ps(_mm512_loadu_ps(p + 48), w3, s3);
            t0 = _mm512_fmadd_ps(_mm512_loadu_ps(q), w0, t0);
            t1 = _mm512_fmadd_ps(_mm512_loadu_ps(q + 16), w1, t1);
            t2 = _mm512_fmadd_ps(_mm512_loadu_ps(q + 32), w2, t2);
            t3 = _mm512_fmadd_ps(_mm512_loadu_ps(q + 48), w3, t3);
        }
        dw512_st(o0 + c, s0, nt);
        dw512_st(o0 + c + 16, s1, nt);
        dw512_st(o0 + c + 32, s2, nt);
        dw512_st(o0 + c + 48, s3, nt);
        dw512_st(o1 + c, t0, nt);
        dw512_st(o1 + c + 16, t1, nt);
        dw512_st(o1 + c + 32, t2, nt);
        dw512_st(o1 + c + 48, t3, nt);
    }
    return c;
}
#endif
/* One dst pixel (dC channels) of a depthwise conv over nu taps (source
 * pixel a[u], packed weights w[u] of Cout): forward o[c] = b[c] + sum_u
 * a_u[c / mult] * w_u[c]; backward_input o[c] = b[c] + sum_u sum_m
 * a_u[c*mult + m] * w_u[c*mult + m]. b may be o itself (accumulate). */
static void dw_pixel(float *o, const float *b, const float *const *a, int64_t sh,
                     const float *const *w, int64_t nu, int64_t dC, int64_t mult, bool bwd,
                     bool nt) {
    int64_t c = 0;
#if CF_AVX2
/* nt: o is 32-byte aligned and is not read again soon: streaming stores */
#define DW_ST(p, v) (nt ? _mm256_stream_ps((p), (v)) : _mm256_storeu_ps((p), (v)))
    if (cf_mode != 1 && (mult == 1 || (!bwd && mult % 8 == 0))) {
        const bool bc = mult != 1;
#if CF_AVX512
        if (!bc) c = dw512_one(o, b, a, sh, w, nu, dC, nt); /* then the AVX2 tail */
#endif
        /* bc: the input channel of the 8-block at c is ci = c / mult
         * (mult % 8 == 0), tracked without divisions */
        int64_t ci = 0, rem = 0;
#define DW_NEXT8()                                                                                 \
    do {                                                                                           \
        rem += 8;                                                                                  \
        if (rem >= mult) {                                                                         \
            rem = 0;                                                                               \
            ci++;                                                                                  \
        }                                                                                          \
    } while (0)
        for (; c + 32 <= dC; c += 32) {
            __m256 s0 = _mm256_loadu_ps(b + c), s1 = _mm256_loadu_ps(b + c + 8),
                   s2 = _mm256_loadu_ps(b + c + 16), s3 = _mm256_loadu_ps(b + c + 24);
            const int64_t i0 = ci;
            DW_NEXT8();
            const int64_t i1 = ci;
            DW_NEXT8();
            const int64_t i2 = ci;
            DW_NEXT8();
            const int64_t i3 = ci;
            DW_NEXT8();
            /* even taps into s, odd taps into t (two FMA chains) */
            __m256 t0 = _mm256_setzero_ps(), t1 = t0, t2 = t0, t3 = t0;
#define DW_TAP(u, A0, A1, A2, A3)                                                                  \
    do {                                                                                           \
        const float *au = a[u] + sh, *wu = w[u] + c;                                               \
        __m256 x0, x1, x2, x3;                                                                     \
        if (bc) {                                                                                  \
            x0 = _mm256_broadcast_ss(au + i0);                                                     \
            x1 = _mm256_broadcast_ss(au + i1);                                                     \
            x2 = _mm256_broadcast_ss(au + i2);                                                     \
            x3 = _mm256_broadcast_ss(au + i3);                                                     \
        } else {                                                                                   \
            x0 = _mm256_loadu_ps(au + c);                                                          \
            x1 = _mm256_loadu_ps(au + c + 8);                                                      \
            x2 = _mm256_loadu_ps(au + c + 16);                                                     \
            x3 = _mm256_loadu_ps(au + c + 24);                                                     \
        }                                                                                          \
        A0 = _mm256_fmadd_ps(x0, _mm256_loadu_ps(wu), A0);                                         \
        A1 = _mm256_fmadd_ps(x1, _mm256_loadu_ps(wu + 8), A1);                                     \
        A2 = _mm256_fmadd_ps(x2, _mm256_loadu_ps(wu + 16), A2);                                    \
        A3 = _mm256_fmadd_ps(x3, _mm256_loadu_ps(wu + 24), A3);                                    \
    } while (0)
            int64_t u = 0;
            for (; u + 2 <= nu; u += 2) {
                DW_TAP(u, s0, s1, s2, s3);
                DW_TAP(u + 1, t0, t1, t2, t3);
            }
            if (u < nu) DW_TAP(u, s0, s1, s2, s3);
#undef DW_TAP
            DW_ST(o + c, _mm256_add_ps(s0, t0));
            DW_ST(o + c + 8, _mm256_add_ps(s1, t1));
            DW_ST(o + c + 16, _mm256_add_ps(s2, t2));
            DW_ST(o + c + 24, _mm256_add_ps(s3, t3));
        }
        for (; c + 8 <= dC; c += 8) {
            __m256 s0 = _mm256_loadu_ps(b + c), t0 = _mm256_setzero_ps();
            const int64_t i0 = ci;
            DW_NEXT8();
            for (int64_t u = 0; u < nu; u++) {
                const float *au = a[u] + sh;
                const __m256 x0 = bc ? _mm256_broadcast_ss(au + i0) : _mm256_loadu_ps(au + c);
                if (u & 1)
                    t0 = _mm256_fmadd_ps(x0, _mm256_loadu_ps(w[u] + c), t0);
                else
                    s0 = _mm256_fmadd_ps(x0, _mm256_loadu_ps(w[u] + c), s0);
            }
            DW_ST(o + c, _mm256_add_ps(s0, t0));
        }
#undef DW_NEXT8
    } else if (cf_mode != 1 && bwd && mult % 8 == 0) {
        for (; c < dC; c++) {
            __m256 v0 = _mm256_setzero_ps(), v1 = v0, v2 = v0, v3 = v0;
            for (int64_t u = 0; u < nu; u++) {
                const float *au = a[u] + sh + c * mult, *wu = w[u] + c * mult;
                int64_t m = 0;
                for (; m + 32 <= mult; m += 32) {
                    v0 = _mm256_fmadd_ps(_mm256_loadu_ps(au + m), _mm256_loadu_ps(wu + m), v0);
                    v1 = _mm256_fmadd_ps(_mm256_loadu_ps(au + m + 8), _mm256_loadu_ps(wu + m + 8),
                                         v1);
                    v2 = _mm256_fmadd_ps(_mm256_loadu_ps(au + m + 16), _mm256_loadu_ps(wu + m + 16),
                                         v2);
                    v3 = _mm256_fmadd_ps(_mm256_loadu_ps(au + m + 24), _mm256_loadu_ps(wu + m + 24),
                                         v3);
                }
                for (; m < mult; m += 8)
                    v0 = _mm256_fmadd_ps(_mm256_loadu_ps(au + m), _mm256_loadu_ps(wu + m), v0);
            }
            const __m256 v = _mm256_add_ps(_mm256_add_ps(v0, v1), _mm256_add_ps(v2, v3));
            __m128 q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
            q = _mm_add_ps(q, _mm_movehl_ps(q, q));
            q = _mm_add_ss(q, _mm_movehdup_ps(q));
            o[c] = b[c] + _mm_cvtss_f32(q);
        }
    }
#undef DW_ST
#else
    (void)nt;
#endif
    for (; c < dC; c++) {
        float s = b[c];
        for (int64_t u = 0; u < nu; u++) {
            const float *au = a[u] + sh;
            if (!bwd) {
                s += au[c / mult] * w[u][c];
            } else {
                for (int64_t m = 0; m < mult; m++) s += au[c * mult + m] * w[u][c * mult + m];
            }
        }
        o[c] = s;
    }
}

/* Two dst pixels at once (o0, o1; sources a[u] + sh0 and a[u] + sh1),
 * sharing the weight loads: forward or backward_input with mult == 1, or
 * forward with mult % 8 == 0. Returns false (nothing done) otherwise. */
static bool dw_pixel2(float *o0, float *o1, const float *b, const float *const *a, int64_t sh0,
                      int64_t sh1, const float *const *w, int64_t nu, int64_t dC, int64_t mult,
                      bool bwd, bool nt) {
#if CF_AVX2
    if (cf_mode == 1 || !(mult == 1 || (!bwd && mult % 8 == 0))) return false;
    const bool bc = mult != 1;
    int64_t c = 0, ci = 0, rem = 0;
#if CF_AVX512
    if (!bc) c = dw512_two(o0, o1, b, a, sh0, sh1, w, nu, dC, nt); /* then the AVX2 tail */
#endif
#define DW2_ST(p, v)      (nt ? _mm256_stream_ps((p), (v)) : _mm256_storeu_ps((p), (v)))
#define DW2_X(au, cc, ii) (bc ? _mm256_broadcast_ss((au) + (ii)) : _mm256_loadu_ps((au) + (cc)))
    for (; c + 32 <= dC; c += 32) {
        int64_t ix[4];
        for (int q = 0; q < 4; q++) {
            ix[q] = ci;
            rem += 8;
            if (rem >= mult) {
                rem = 0;
                ci++;
            }
        }
        __m256 s0 = _mm256_loadu_ps(b + c), s1 = _mm256_loadu_ps(b + c + 8),
               s2 = _mm256_loadu_ps(b + c + 16), s3 = _mm256_loadu_ps(b + c + 24);
        __m256 t0 = s0, t1 = s1, t2 = s2, t3 = s3;
        if (bc && ix[0] == ix[3]) { /* one input channel for all 32: one broadcast */
            for (int64_t u = 0; u < nu; u++) {
                const float *wu = w[u] + c;
                const __m256 x0 = _mm256_broadcast_ss(a[u] + sh0 + ix[0]),
                             x1 = _mm256_broadcast_ss(a[u] + sh1 + ix[0]);
                const __m256 w0 = _mm256_loadu_ps(wu), w1 = _mm256_loadu_ps(wu + 8),
                             w2 = _mm256_loadu_ps(wu + 16), w3 = _mm256_loadu_ps(wu + 24);
                s0 = _mm256_fmadd_ps(x0, w0, s0);
                s1 = _mm256_fmadd_ps(x0, w1, s1);
                s2 = _mm256_fmadd_ps(x0, w2, s2);
                s3 = _mm256_fmadd_ps(x0, w3, s3);
                t0 = _mm256_fmadd_ps(x1, w0, t0);
                t1 = _mm256_fmadd_ps(x1, w1, t1);
                t2 = _mm256_fmadd_ps(x1, w2, t2);
                t3 = _mm256_fmadd_ps(x1, w3, t3);
            }
        } else {
            for (int64_t u = 0; u < nu; u++) {
                const float *wu = w[u] + c, *p0 = a[u] + sh0, *p1 = a[u] + sh1;
                const __m256 w0 = _mm256_loadu_ps(wu), w1 = _mm256_loadu_ps(wu + 8),
                             w2 = _mm256_loadu_ps(wu + 16), w3 = _mm256_loadu_ps(wu + 24);
                s0 = _mm256_fmadd_ps(DW2_X(p0, c, ix[0]), w0, s0);
                s1 = _mm256_fmadd_ps(DW2_X(p0, c + 8, ix[1]), w1, s1);
                s2 = _mm256_fmadd_ps(DW2_X(p0, c + 16, ix[2]), w2, s2);
                s3 = _mm256_fmadd_ps(DW2_X(p0, c + 24, ix[3]), w3, s3);
                t0 = _mm256_fmadd_ps(DW2_X(p1, c, ix[0]), w0, t0);
                t1 = _mm256_fmadd_ps(DW2_X(p1, c + 8, ix[1]), w1, t1);
                t2 = _mm256_fmadd_ps(DW2_X(p1, c + 16, ix[2]), w2, t2);
                t3 = _mm256_fmadd_ps(DW2_X(p1, c + 24, ix[3]), w3, t3);
            }
        }
        DW2_ST(o0 + c, s0);
        DW2_ST(o0 + c + 8, s1);
        DW2_ST(o0 + c + 16, s2);
        DW2_ST(o0 + c + 24, s3);
        DW2_ST(o1 + c, t0);
        DW2_ST(o1 + c + 8, t1);
        DW2_ST(o1 + c + 16, t2);
        DW2_ST(o1 + c + 24, t3);
    }
    for (; c + 8 <= dC; c += 8) {
        const int64_t i0 = ci;
        rem += 8;
        if (rem >= mult) {
            rem = 0;
            ci++;
        }
        __m256 s0 = _mm256_loadu_ps(b + c), t0 = s0;
        for (int64_t u = 0; u < nu; u++) {
            const __m256 w0 = _mm256_loadu_ps(w[u] + c);
            s0 = _mm256_fmadd_ps(DW2_X(a[u] + sh0, c, i0), w0, s0);
            t0 = _mm256_fmadd_ps(DW2_X(a[u] + sh1, c, i0), w0, t0);
        }
        DW2_ST(o0 + c, s0);
        DW2_ST(o1 + c, t0);
    }
#undef DW2_X
#undef DW2_ST
    for (; c < dC; c++) {
        float s = b[c], t = b[c];
        for (int64_t u = 0; u < nu; u++) {
            s += a[u][sh0 + c / mult] * w[u][c];
            t += a[u][sh1 + c / mult] * w[u][c];
        }
        o0[c] = s;
        o1[c] = t;
    }
    return true;
#else
    (void)o0, (void)o1, (void)b, (void)a, (void)sh0, (void)sh1, (void)w, (void)nu, (void)dC;
    (void)mult, (void)bwd, (void)nt;
    return false;
#endif
}

/* Depthwise backward_weight over a run of n output columns of one tap:
 * pt[co] += sum_r x_r[co / mult] * gy_r[co], x_r = x + r*xs, gy_r = gy + r*C;
 * 32 channels at a time in registers (even and odd r in two chains). False
 * (nothing done) unless AVX2 and mult == 1 or mult % 8 == 0. */
static bool dw_bw_run(float *pt, const float *x, int64_t xs, const float *gy, int64_t C, int64_t n,
                      int64_t mult) {
#if CF_AVX2
    if (cf_mode == 1 || !(mult == 1 || mult % 8 == 0)) return false;
    const bool bc = mult != 1;
    int64_t c = 0, ci = 0, rem = 0;
#define DWB_X(p, cc, ii) (bc ? _mm256_broadcast_ss((p) + (ii)) : _mm256_loadu_ps((p) + (cc)))
    for (; c + 32 <= C; c += 32) {
        int64_t ix[4];
        for (int q = 0; q < 4; q++) {
            ix[q] = ci;
            rem += 8;
            if (rem >= mult) {
                rem = 0;
                ci++;
            }
        }
        __m256 s0 = _mm256_loadu_ps(pt + c), s1 = _mm256_loadu_ps(pt + c + 8),
               s2 = _mm256_loadu_ps(pt + c + 16), s3 = _mm256_loadu_ps(pt + c + 24);
        __m256 t0 = _mm256_setzero_ps(), t1 = t0, t2 = t0, t3 = t0;
        /* the same loop with broadcast x (bc) or loaded x: unswitched */
#define DWB_LOOP(BC)                                                                               \
    do {                                                                                           \
        int64_t r = 0;                                                                             \
        for (; r + 2 <= n; r += 2) {                                                               \
            const float *xa = x + r * xs, *xb = xa + xs, *ga = gy + r * C + c, *gb = ga + C;       \
            s0 = _mm256_fmadd_ps(DWB_XX(BC, xa, c, ix[0]), _mm256_loadu_ps(ga), s0);               \
            s1 = _mm256_fmadd_ps(DWB_XX(BC, xa, c + 8, ix[1]), _mm256_loadu_ps(ga + 8), s1);       \
            s2 = _mm256_fmadd_ps(DWB_XX(BC, xa, c + 16, ix[2]), _mm256_loadu_ps(ga + 16), s2);     \
            s3 = _mm256_fmadd_ps(DWB_XX(BC, xa, c + 24, ix[3]), _mm256_loadu_ps(ga + 24), s3);     \
            t0 = _mm256_fmadd_ps(DWB_XX(BC, xb, c, ix[0]), _mm256_loadu_ps(gb), t0);               \
            t1 = _mm256_fmadd_ps(DWB_XX(BC, xb, c + 8, ix[1]), _mm256_loadu_ps(gb + 8), t1);       \
            t2 = _mm256_fmadd_ps(DWB_XX(BC, xb, c + 16, ix[2]), _mm256_loadu_ps(gb + 16), t2);     \
            t3 = _mm256_fmadd_ps(DWB_XX(BC, xb, c + 24, ix[3]), _mm256_loadu_ps(gb + 24), t3);     \
        }                                                                                          \
        if (r < n) {                                                                               \
            const float *xa = x + r * xs, *ga = gy + r * C + c;                                    \
            s0 = _mm256_fmadd_ps(DWB_XX(BC, xa, c, ix[0]), _mm256_loadu_ps(ga), s0);               \
            s1 = _mm256_fmadd_ps(DWB_XX(BC, xa, c + 8, ix[1]), _mm256_loadu_ps(ga + 8), s1);       \
            s2 = _mm256_fmadd_ps(DWB_XX(BC, xa, c + 16, ix[2]), _mm256_loadu_ps(ga + 16), s2);     \
            s3 = _mm256_fmadd_ps(DWB_XX(BC, xa, c + 24, ix[3]), _mm256_loadu_ps(ga + 24), s3);     \
        }                                                                                          \
    } while (0)
#define DWB_XX(BC, p, cc, ii) ((BC) ? _mm256_broadcast_ss((p) + (ii)) : _mm256_loadu_ps((p) + (cc)))
        if (bc)
            DWB_LOOP(1);
        else
            DWB_LOOP(0);
#undef DWB_XX
#undef DWB_LOOP
        _mm256_storeu_ps(pt + c, _mm256_add_ps(s0, t0));
        _mm256_storeu_ps(pt + c + 8, _mm256_add_ps(s1, t1));
        _mm256_storeu_ps(pt + c + 16, _mm256_add_ps(s2, t2));
        _mm256_storeu_ps(pt + c + 24, _mm256_add_ps(s3, t3));
    }
    for (; c + 8 <= C; c += 8) {
        const int64_t i0 = ci;
        rem += 8;
        if (rem >= mult) {
            rem = 0;
            ci++;
        }
        __m256 s0 = _mm256_loadu_ps(pt + c);
        for (int64_t r = 0; r < n; r++)
            s0 = _mm256_fmadd_ps(DWB_X(x + r * xs, c, i0), _mm256_loadu_ps(gy + r * C + c), s0);
        _mm256_storeu_ps(pt + c, s0);
    }
#undef DWB_X
    for (; c < C; c++) {
        float s = pt[c];
        for (int64_t r = 0; r < n; r++) s += x[r * xs + c / mult] * gy[r * C + c];
        pt[c] = s;
    }
    return true;
#else
    (void)pt, (void)x, (void)xs, (void)gy, (void)C, (void)n, (void)mult;
    return false;
#endif
}

/* ---------------------------------------------------------------- transpose */
/* dst (cols x rows, ld dl) = src (rows x cols, ld sl)^T for one block. */
static void tr_block(const float *src, int64_t sl, float *dst, int64_t dl, int64_t rows,
                     int64_t cols) {
    int64_t r0 = 0;
#if CF_AVX2
    for (; r0 + 8 <= rows; r0 += 8) {
        int64_t c0 = 0;
        for (; c0 + 8 <= cols; c0 += 8) {
            const float *s = src + r0 * sl + c0;
            __m256 a0 = _mm256_loadu_ps(s), a1 = _mm256_loadu_ps(s + sl),
                   a2 = _mm256_loadu_ps(s + 2 * sl), a3 = _mm256_loadu_ps(s + 3 * sl),
                   a4 = _mm256_loadu_ps(s + 4 * sl), a5 = _mm256_loadu_ps(s + 5 * sl),
                   a6 = _mm256_loadu_ps(s + 6 * sl), a7 = _mm256_loadu_ps(s + 7 * sl);
            __m256 t0 = _mm256_unpacklo_ps(a0, a1), t1 = _mm256_unpackhi_ps(a0, a1),
                   t2 = _mm256_unpacklo_ps(a2, a3), t3 = _mm256_unpackhi_ps(a2, a3),
                   t4 = _mm256_unpacklo_ps(a4, a5), t5 = _mm256_unpackhi_ps(a4, a5),
                   t6 = _mm256_unpacklo_ps(a6, a7), t7 = _mm256_unpackhi_ps(a6, a7);
            __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE),
                   u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE),
                   u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE),
                   u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
            float *d = dst + c0 * dl + r0;
            _mm256_storeu_ps(d, _mm256_permute2f128_ps(u0, u4, 0x20));
            _mm256_storeu_ps(d + dl, _mm256_permute2f128_ps(u1, u5, 0x20));
            _mm256_storeu_ps(d + 2 * dl, _mm256_permute2f128_ps(u2, u6, 0x20));
            _mm256_storeu_ps(d + 3 * dl, _mm256_permute2f128_ps(u3, u7, 0x20));
            _mm256_storeu_ps(d + 4 * dl, _mm256_permute2f128_ps(u0, u4, 0x31));
            _mm256_storeu_ps(d + 5 * dl, _mm256_permute2f128_ps(u1, u5, 0x31));
            _mm256_storeu_ps(d + 6 * dl, _mm256_permute2f128_ps(u2, u6, 0x31));
            _mm256_storeu_ps(d + 7 * dl, _mm256_permute2f128_ps(u3, u7, 0x31));
        }
        for (int64_t r = r0; r < r0 + 8; r++)
            for (int64_t c = c0; c < cols; c++) dst[c * dl + r] = src[r * sl + c];
    }
#endif
    for (int64_t r = r0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) dst[c * dl + r] = src[r * sl + c];
}

#endif
