/* ops/linalg/gemm.c — the packed fast kernels of op "matmul" (F32 and F64,
 * registered under CONTIGUOUS; they read A and B through any strides, see
 * matmul.c) and the kernel table mft__kernels_gemm: the micro-kernels, the
 * packing helpers and the blocked driver.
 *
 * Fast kernels (GotoBLAS/BLIS structure): one matrix is split into one
 * region per thread, column ranges of whole NR strips (or row ranges of MR
 * strips when N is narrow next to M), so B is packed once over all threads;
 * each thread loops over its region: NC-wide panel -> KC-deep block (pack the
 * B panel into NR-wide strips in a per-thread buffer that stays in L2) -> MC
 * rows (pack A into MR-row strips) -> NR strip -> MR strip -> micro-kernel,
 * storing the first KC block and adding the later ones; F32 packs a
 * transposed B (the weight of linear) and row-major A strips with 8x8 AVX
 * transposes. Edge tiles run the same micro-kernel into a scratch tile. K is
 * never split across threads, K blocks always start at multiples of KC, and
 * every element is computed by the same instruction sequence whatever the
 * partition, so results are bit-identical for any thread count.
 * Micro-kernels: F32 6x16 and F64 6x8 AVX2/FMA ones when compiled with
 * AVX2+FMA, else (and through mft__gemm_set_portable, for
 * tests) portable C ones of the same tile sizes. Batched inputs run one
 * matrix per thread chunk (parallel over the batch) when there is more than
 * one matrix. If the packing buffers cannot be allocated (kernels cannot
 * fail) the kernel falls back to a plain loop. */
#include <stdlib.h>
#include <string.h>
#include "linalg_internal.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#define GEMM_AVX2 1
#if defined(__AVX512F__)
#define GEMM_AVX512 1
#else
#define GEMM_AVX512 0
#endif
#else
#define GEMM_AVX2 0
#define GEMM_AVX512 0
#endif

static bool gemm_portable = false;
void mft__gemm_set_portable(bool on) { gemm_portable = on; }

/* ---------------------------------------------------------------- micro-kernels
 * c[MR x NR] (row stride ldc) = (acc ? c : 0) + sum_p ap[p*MR + i] * bp[p*NR + j]. */
/* One row at a time, so a row of accumulators stays in vector registers
 * (the compiler vectorizes the j loop); the B panel is re-read from L1. */
#define GEMM_MICRO_C(T, S, MR, NR)                                                            \
    static void micro_##S(int64_t kc, const T *restrict ap, const T *restrict bp,            \
                          T *restrict c, int64_t ldc, bool acc) {                             \
        for (int i = 0; i < MR; i++) {                                                        \
            T t[NR];                                                                          \
            for (int j = 0; j < NR; j++) t[j] = 0;                                            \
            for (int64_t p = 0; p < kc; p++) {                                                \
                const T av = ap[p * MR + i];                                                  \
                const T *b = bp + p * NR;                                                     \
                for (int j = 0; j < NR; j++) t[j] += av * b[j];                               \
            }                                                                                 \
            T *cr = c + i * ldc;                                                              \
            for (int j = 0; j < NR; j++) cr[j] = acc ? cr[j] + t[j] : t[j];                   \
        }                                                                                     \
    }
GEMM_MICRO_C(float, f32c, 6, 16)
GEMM_MICRO_C(double, f64c, 6, 8)

#if GEMM_AVX2
/* The F32 and F64 micro-kernels are written out twice on purpose: one macro
 * body with an accumulator array (r[6][2]) ran at ~27 GFLOP/s instead of ~38
 * on 512^3 (GCC 12 -O3 did not keep the array in registers). */
static void micro_f32avx(int64_t kc, const float *restrict ap, const float *restrict bp,
                         float *restrict c, int64_t ldc, bool acc) {
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
           c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    /* one k step o: two B vectors, six A broadcasts, twelve FMAs */
#define GEMM_STEP(o)                                                                          \
    do {                                                                                      \
        const __m256 b0 = _mm256_loadu_ps(bp + 16 * (o));                                     \
        const __m256 b1 = _mm256_loadu_ps(bp + 16 * (o) + 8);                                 \
        __m256 av = _mm256_broadcast_ss(ap + 6 * (o) + 0);                                    \
        c00 = _mm256_fmadd_ps(av, b0, c00);                                                   \
        c01 = _mm256_fmadd_ps(av, b1, c01);                                                   \
        av = _mm256_broadcast_ss(ap + 6 * (o) + 1);                                           \
        c10 = _mm256_fmadd_ps(av, b0, c10);                                                   \
        c11 = _mm256_fmadd_ps(av, b1, c11);                                                   \
        av = _mm256_broadcast_ss(ap + 6 * (o) + 2);                                           \
        c20 = _mm256_fmadd_ps(av, b0, c20);                                                   \
        c21 = _mm256_fmadd_ps(av, b1, c21);                                                   \
        av = _mm256_broadcast_ss(ap + 6 * (o) + 3);                                           \
        c30 = _mm256_fmadd_ps(av, b0, c30);                                                   \
        c31 = _mm256_fmadd_ps(av, b1, c31);                                                   \
        av = _mm256_broadcast_ss(ap + 6 * (o) + 4);                                           \
        c40 = _mm256_fmadd_ps(av, b0, c40);                                                   \
        c41 = _mm256_fmadd_ps(av, b1, c41);                                                   \
        av = _mm256_broadcast_ss(ap + 6 * (o) + 5);                                           \
        c50 = _mm256_fmadd_ps(av, b0, c50);                                                   \
        c51 = _mm256_fmadd_ps(av, b1, c51);                                                   \
    } while (0)
    /* Unrolled by 4 with the A panel prefetched 4 steps ahead: the loop
     * overhead cost ~10% on Zen 3 (80 -> ~90 GFLOP/s on L1-resident panels).
     * Each accumulator still sees its FMAs in ascending p. */
    int64_t p = 0;
    for (; p + 4 <= kc; p += 4, ap += 24, bp += 64) {
        _mm_prefetch((const char *)(ap + 96), _MM_HINT_T0);
        GEMM_STEP(0);
        GEMM_STEP(1);
        GEMM_STEP(2);
        GEMM_STEP(3);
    }
    for (; p < kc; p++, ap += 6, bp += 16) GEMM_STEP(0);
#undef GEMM_STEP
#define GEMM_STORE_ROW(i, lo, hi)                                                             \
    do {                                                                                      \
        float *cr = c + (i) * ldc;                                                            \
        if (acc) {                                                                            \
            lo = _mm256_add_ps(_mm256_loadu_ps(cr), lo);                                      \
            hi = _mm256_add_ps(_mm256_loadu_ps(cr + 8), hi);                                  \
        }                                                                                     \
        _mm256_storeu_ps(cr, lo);                                                             \
        _mm256_storeu_ps(cr + 8, hi);                                                         \
    } while (0)
    GEMM_STORE_ROW(0, c00, c01);
    GEMM_STORE_ROW(1, c10, c11);
    GEMM_STORE_ROW(2, c20, c21);
    GEMM_STORE_ROW(3, c30, c31);
    GEMM_STORE_ROW(4, c40, c41);
    GEMM_STORE_ROW(5, c50, c51);
#undef GEMM_STORE_ROW
}

#if GEMM_AVX512
/* F32 6 x 32 over two packed 16-wide B strips, one 16-lane register per
 * row and strip: 8 loads per 12 FMAs (the 6x16 AVX2 kernel: 8 per 12 at
 * half the width). Each accumulator sees its FMAs in ascending p from zero,
 * as in micro_f32avx, so both give bit-identical C elements. */
static void micro2_f32avx512(int64_t kc, const float *restrict ap, const float *restrict bp0,
                             const float *restrict bp1, float *restrict c, int64_t ldc,
                             bool acc) {
#define G512_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)
#define DECL(i) __m512 c##i = _mm512_setzero_ps(), d##i = c##i;
    G512_ROWS(DECL)
#undef DECL
    for (int64_t p = 0; p < kc; p++, ap += 6, bp0 += 16, bp1 += 16) {
        const __m512 b0 = _mm512_loadu_ps(bp0), b1 = _mm512_loadu_ps(bp1);
        __m512 av;
#define STEP(i)                                                                               \
    av = _mm512_set1_ps(ap[i]);                                                               \
    c##i = _mm512_fmadd_ps(av, b0, c##i);                                                     \
    d##i = _mm512_fmadd_ps(av, b1, d##i);
        G512_ROWS(STEP)
#undef STEP
    }
#define STORE(i)                                                                              \
    if (acc) {                                                                                \
        c##i = _mm512_add_ps(_mm512_loadu_ps(c + i * ldc), c##i);                             \
        d##i = _mm512_add_ps(_mm512_loadu_ps(c + i * ldc + 16), d##i);                        \
    }                                                                                         \
    _mm512_storeu_ps(c + i * ldc, c##i);                                                      \
    _mm512_storeu_ps(c + i * ldc + 16, d##i);
    G512_ROWS(STORE)
#undef STORE
#undef G512_ROWS
}
#endif

/* F64: 6 rows x 8 columns = 12 accumulators of 4 doubles. */
static void micro_f64avx(int64_t kc, const double *restrict ap, const double *restrict bp,
                         double *restrict c, int64_t ldc, bool acc) {
    __m256d c00 = _mm256_setzero_pd(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
            c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    for (int64_t p = 0; p < kc; p++, ap += 6, bp += 8) {
        const __m256d b0 = _mm256_loadu_pd(bp), b1 = _mm256_loadu_pd(bp + 4);
        __m256d av = _mm256_broadcast_sd(ap + 0);
        c00 = _mm256_fmadd_pd(av, b0, c00);
        c01 = _mm256_fmadd_pd(av, b1, c01);
        av = _mm256_broadcast_sd(ap + 1);
        c10 = _mm256_fmadd_pd(av, b0, c10);
        c11 = _mm256_fmadd_pd(av, b1, c11);
        av = _mm256_broadcast_sd(ap + 2);
        c20 = _mm256_fmadd_pd(av, b0, c20);
        c21 = _mm256_fmadd_pd(av, b1, c21);
        av = _mm256_broadcast_sd(ap + 3);
        c30 = _mm256_fmadd_pd(av, b0, c30);
        c31 = _mm256_fmadd_pd(av, b1, c31);
        av = _mm256_broadcast_sd(ap + 4);
        c40 = _mm256_fmadd_pd(av, b0, c40);
        c41 = _mm256_fmadd_pd(av, b1, c41);
        av = _mm256_broadcast_sd(ap + 5);
        c50 = _mm256_fmadd_pd(av, b0, c50);
        c51 = _mm256_fmadd_pd(av, b1, c51);
    }
#define GEMM_STORE_ROW(i, lo, hi)                                                             \
    do {                                                                                      \
        double *cr = c + (i) * ldc;                                                           \
        if (acc) {                                                                            \
            lo = _mm256_add_pd(_mm256_loadu_pd(cr), lo);                                      \
            hi = _mm256_add_pd(_mm256_loadu_pd(cr + 4), hi);                                  \
        }                                                                                     \
        _mm256_storeu_pd(cr, lo);                                                             \
        _mm256_storeu_pd(cr + 4, hi);                                                         \
    } while (0)
    GEMM_STORE_ROW(0, c00, c01);
    GEMM_STORE_ROW(1, c10, c11);
    GEMM_STORE_ROW(2, c20, c21);
    GEMM_STORE_ROW(3, c30, c31);
    GEMM_STORE_ROW(4, c40, c41);
    GEMM_STORE_ROW(5, c50, c51);
#undef GEMM_STORE_ROW
}
#endif

/* ---------------------------------------------------------------- packing helpers
 * F32 fast paths of the packing step (AVX 8x8 transposes where the source
 * runs along the wrong dimension); each has a scalar twin used without AVX2
 * and under mft__gemm_set_portable. They only move data, so they cannot
 * change results. */
#if GEMM_AVX2
/* Transposes the 8x8 block r[0..7] (row i = r[i]) in place. */
static inline void gemm_tr8x8(__m256 r[8]) {
    const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
    r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
    r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
    r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
    r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
    r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
    r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
    r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}
#endif

/* ns full 16-wide strips s of kc rows: dst[s*16*kc + kk*16 + jj] =
 * src[kk*lds + s*16 + jj] (B rows contiguous: read row by row, so every row
 * is one sequential stream). */
static void gemm_pack_b16_rows_f32(const float *src, int64_t lds, int64_t kc, int64_t ns,
                                   float *dst) {
    for (int64_t kk = 0; kk < kc; kk++, src += lds) {
        float *d = dst + kk * 16;
#if GEMM_AVX2
        if (!gemm_portable) {
            for (int64_t s = 0; s < ns; s++, d += 16 * kc) {
                _mm256_storeu_ps(d, _mm256_loadu_ps(src + s * 16));
                _mm256_storeu_ps(d + 8, _mm256_loadu_ps(src + s * 16 + 8));
            }
            continue;
        }
#endif
        for (int64_t s = 0; s < ns; s++, d += 16 * kc)
            for (int jj = 0; jj < 16; jj++) d[jj] = src[s * 16 + jj];
    }
}

/* dst[kk*16 + jj] = src[jj*lds + kk] (a B strip read from the packed B^T). */
static void gemm_pack_b16_trans_f32(const float *src, int64_t lds, int64_t kc, float *dst) {
    int64_t kk = 0;
#if GEMM_AVX2
    if (!gemm_portable)
        for (; kk + 8 <= kc; kk += 8)
            for (int h = 0; h < 2; h++) {
                __m256 r[8];
                for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(src + (h * 8 + i) * lds + kk);
                gemm_tr8x8(r);
                for (int i = 0; i < 8; i++) _mm256_storeu_ps(dst + (kk + i) * 16 + h * 8, r[i]);
            }
#endif
    for (; kk < kc; kk++)
        for (int jj = 0; jj < 16; jj++) dst[kk * 16 + jj] = src[jj * lds + kk];
}

/* dst[kk*6 + ii] = src[ii*lds + kk] (an A strip of 6 contiguous rows). The
 * AVX path stores 8 lanes per kk: the two extra lanes land on the next kk's
 * slots (rewritten next) or on the 2 floats after the strip, which the
 * caller provides (the next strip, packed later, or padding). */
static void gemm_pack_a6_rows_f32(const float *src, int64_t lds, int64_t kc, float *dst) {
    int64_t kk = 0;
#if GEMM_AVX2
    if (!gemm_portable)
        for (; kk + 8 <= kc; kk += 8) {
            __m256 r[8];
            for (int i = 0; i < 6; i++) r[i] = _mm256_loadu_ps(src + i * lds + kk);
            r[6] = r[7] = _mm256_setzero_ps();
            gemm_tr8x8(r);
            for (int i = 0; i < 8; i++) _mm256_storeu_ps(dst + (kk + i) * 6, r[i]);
        }
#endif
    for (; kk < kc; kk++)
        for (int ii = 0; ii < 6; ii++) dst[kk * 6 + ii] = src[ii * lds + kk];
}

/* ---------------------------------------------------------------- packed driver
 * One template per dtype: S suffix, MR x NR micro-tile, KC depth, MC rows
 * (multiple of MR) per packed A block and NC columns (multiple of NR) per
 * packed B panel; F32 selects the F32 packing helpers above.
 * One matrix is split into at most one region per thread: column ranges of
 * whole NR strips (the usual case: B is then packed once over all threads
 * and A once per thread), or row ranges of whole MR strips when N is
 * narrower than M. A region loops: NC panel -> KC block (pack the B panel,
 * KC x NC, into the thread's buffer: L2-resident) -> MC block (pack A, MC x
 * KC) -> NR strip (in L1) -> MR strip -> micro-kernel. K blocks start at
 * multiples of KC whatever the region, and the micro-kernel computes each
 * C element from zero per K block and adds it to C, so results do not
 * depend on the partition or the thread count. */
#define GEMM_SERIAL_FLOPS ((int64_t)1 << 17) /* below M*N*K: one thread per matrix */

#define GEMM_DRIVER(T, S, MR, NR, KC, MC, NC, F32)                                            \
    typedef void (*micro_fn_##S)(int64_t, const T *, const T *, T *, int64_t, bool);          \
    /* MR x 2NR over two packed B strips (NULL: none) */                                      \
    typedef void (*micro2_fn_##S)(int64_t, const T *, const T *, const T *, T *, int64_t,     \
                                  bool);                                                      \
    typedef struct gemm_job_##S {                                                             \
        const T *A, *B;                                                                       \
        T *C;                                                                                 \
        int64_t M, N, K, ars, acs, bks, bns;                                                  \
        int64_t nitems;                                                                       \
        bool split_n;                                                                         \
        micro_fn_##S micro;                                                                   \
        micro2_fn_##S micro2;                                                                 \
    } gemm_job_##S;                                                                           \
    /* plain loop for rows [i0, i1) x cols [n0, n1) (allocation failures only) */            \
    static void gemm_plain_##S(const gemm_job_##S *j, int64_t i0, int64_t i1, int64_t n0,     \
                               int64_t n1) {                                                  \
        for (int64_t i = i0; i < i1; i++)                                                     \
            for (int64_t c = n0; c < n1; c++) {                                               \
                T s = 0;                                                                      \
                for (int64_t k = 0; k < j->K; k++)                                            \
                    s += j->A[i * j->ars + k * j->acs] * j->B[k * j->bks + c * j->bns];       \
                j->C[i * j->N + c] = s;                                                       \
            }                                                                                 \
    }                                                                                         \
    /* B rows [k0, k0+kc) x cols [n0, n0+nw) into NR-wide strips (zero padded) */            \
    static void gemm_pack_b_##S(const gemm_job_##S *j, int64_t k0, int64_t kc, int64_t n0,    \
                                int64_t nw, T *Bp) {                                          \
        int64_t s = 0;                                                                        \
        if (F32 && j->bns == 1) { /* the full strips row by row */                            \
            s = nw / NR;                                                                      \
            gemm_pack_b16_rows_f32((const float *)(const void *)(j->B + k0 * j->bks + n0),    \
                                   j->bks, kc, s, (float *)(void *)Bp);                       \
        }                                                                                     \
        for (; s * NR < nw; s++) {                                                            \
            T *dst = Bp + s * NR * kc;                                                        \
            const int64_t nv = nw - s * NR < NR ? nw - s * NR : NR;                           \
            const T *src = j->B + k0 * j->bks + (n0 + s * NR) * j->bns;                       \
            if (F32 && nv == NR && j->bks == 1) {                                             \
                gemm_pack_b16_trans_f32((const float *)(const void *)src, j->bns, kc,         \
                                        (float *)(void *)dst);                                \
                continue;                                                                     \
            }                                                                                 \
            for (int64_t kk = 0; kk < kc; kk++) /* (one loop: no memset per kk) */           \
                for (int64_t jj = 0; jj < NR; jj++)                                           \
                    dst[kk * NR + jj] = jj < nv ? src[kk * j->bks + jj * j->bns] : (T)0;      \
        }                                                                                     \
    }                                                                                         \
    /* A rows [i0, i0+m) x cols [k0, k0+kc) into MR-row strips (zero padded), in order */    \
    static void gemm_pack_a_##S(const gemm_job_##S *j, int64_t i0, int64_t m, int64_t k0,     \
                                int64_t kc, T *Ap) {                                          \
        for (int64_t r = 0; r * MR < m; r++) {                                                \
            T *dst = Ap + r * MR * kc;                                                        \
            const int64_t mv = m - r * MR < MR ? m - r * MR : MR;                             \
            const T *src = j->A + (i0 + r * MR) * j->ars + k0 * j->acs;                       \
            if (F32 && mv == MR && j->acs == 1) {                                             \
                gemm_pack_a6_rows_f32((const float *)(const void *)src, j->ars, kc,           \
                                      (float *)(void *)dst);                                  \
                continue;                                                                     \
            }                                                                                 \
            for (int64_t kk = 0; kk < kc; kk++)                                               \
                for (int64_t ii = 0; ii < MR; ii++)                                           \
                    dst[kk * MR + ii] = ii < mv ? src[ii * j->ars + kk * j->acs] : (T)0;      \
        }                                                                                     \
    }                                                                                         \
    /* C rows [i0, i1) x cols [n0, n1) (i0, n0 on strip boundaries); Bp: a KC x NC panel,   \
     * Ap: an MC x KC block + 16 (both capped by the matrix sizes) */                         \
    static void gemm_region_##S(const gemm_job_##S *j, int64_t i0, int64_t i1, int64_t n0,    \
                                int64_t n1, T *Bp, T *Ap) {                                   \
        for (int64_t nc0 = n0; nc0 < n1; nc0 += NC) {                                         \
            const int64_t nw = n1 - nc0 < NC ? n1 - nc0 : NC;                                 \
            for (int64_t k0 = 0; k0 < j->K; k0 += KC) {                                       \
                const int64_t kc = j->K - k0 < KC ? j->K - k0 : KC;                           \
                const bool acc = k0 > 0;                                                      \
                gemm_pack_b_##S(j, k0, kc, nc0, nw, Bp);                                      \
                for (int64_t ic = i0; ic < i1; ic += MC) {                                    \
                    const int64_t m = i1 - ic < MC ? i1 - ic : MC;                            \
                    gemm_pack_a_##S(j, ic, m, k0, kc, Ap);                                    \
                    for (int64_t jr = 0; jr < nw;) {                                          \
                        /* two full strips side by side: the MR x 2NR kernel if any */        \
                        const bool two = j->micro2 && nw - jr >= 2 * NR;                      \
                        for (int64_t ir = 0; ir < m; ir += MR) {                              \
                            const int64_t mr = m - ir < MR ? m - ir : MR;                     \
                            const T *as = Ap + ir * kc;                                       \
                            T *cp = j->C + (ic + ir) * j->N + nc0 + jr;                       \
                            if (two && mr == MR) {                                            \
                                j->micro2(kc, as, Bp + jr * kc, Bp + (jr + NR) * kc, cp,      \
                                          j->N, acc);                                         \
                                continue;                                                     \
                            }                                                                 \
                            for (int64_t h = 0; h < (two ? 2 : 1); h++) {                     \
                                const int64_t js = jr + h * NR;                               \
                                const int64_t nr = nw - js < NR ? nw - js : NR;               \
                                const T *bs = Bp + js * kc;                                   \
                                if (mr == MR && nr == NR) {                                   \
                                    j->micro(kc, as, bs, cp + h * NR, j->N, acc);             \
                                    continue;                                                 \
                                }                                                             \
                                T tile[MR * NR];                                              \
                                j->micro(kc, as, bs, tile, NR, false);                        \
                                for (int64_t i = 0; i < mr; i++)                              \
                                    for (int64_t c = 0; c < nr; c++) {                        \
                                        T *d = cp + h * NR + i * j->N + c;                    \
                                        *d = acc ? *d + tile[i * NR + c] : tile[i * NR + c];  \
                                    }                                                         \
                            }                                                                 \
                        }                                                                     \
                        jr += two ? 2 * NR : NR;                                              \
                    }                                                                         \
                }                                                                             \
            }                                                                                 \
        }                                                                                     \
    }                                                                                         \
    /* regions [begin, end) of j's partition */                                               \
    static void gemm_items_##S(void *ctx, int64_t begin, int64_t end) {                       \
        const gemm_job_##S *j = ctx;                                                          \
        const int64_t ms = (j->M + MR - 1) / MR, ns = (j->N + NR - 1) / NR;                   \
        const int64_t kcm = j->K < KC ? j->K : KC, ncm = ns * NR < NC ? ns * NR : NC;         \
        const int64_t mcm = ms * MR < MC ? ms * MR : MC;                                      \
        T *buf = malloc(sizeof(T) * (size_t)(kcm * ncm + mcm * kcm + 16));                    \
        for (int64_t t = begin; t < end; t++) {                                               \
            int64_t i0 = 0, i1 = j->M, n0 = 0, n1 = j->N;                                     \
            if (j->split_n) {                                                                 \
                n0 = t * ns / j->nitems * NR;                                                 \
                n1 = (t + 1) * ns / j->nitems * NR;                                           \
                if (n1 > j->N) n1 = j->N;                                                     \
            } else {                                                                          \
                i0 = t * ms / j->nitems * MR;                                                 \
                i1 = (t + 1) * ms / j->nitems * MR;                                           \
                if (i1 > j->M) i1 = j->M;                                                     \
            }                                                                                 \
            if (i0 >= i1 || n0 >= n1) continue;                                               \
            if (buf) gemm_region_##S(j, i0, i1, n0, n1, buf, buf + kcm * ncm);                \
            else gemm_plain_##S(j, i0, i1, n0, n1);                                           \
        }                                                                                     \
        free(buf);                                                                            \
    }                                                                                         \
    /* one matrix: C[M,N] (row stride N) = A @ B */                                           \
    static void gemm_matrix_##S(gemm_job_##S *j, bool parallel) {                             \
        if (j->M == 0 || j->N == 0) return;                                                   \
        if (j->K == 0) {                                                                      \
            memset(j->C, 0, sizeof(T) * (size_t)(j->M * j->N));                               \
            return;                                                                           \
        }                                                                                     \
        const int nt = mft_num_threads();                                                 \
        parallel = parallel && j->M * j->N * j->K >= GEMM_SERIAL_FLOPS && nt > 1;             \
        j->nitems = parallel ? nt : 1;                                                        \
        const int64_t ms = (j->M + MR - 1) / MR, ns = (j->N + NR - 1) / NR;                   \
        /* split N (B packed once in all) unless N is narrow next to M */                     \
        j->split_n = ns >= j->nitems && (j->N >= j->M || ms < j->nitems);                     \
        if (parallel) mft__parallel_for(0, j->nitems, 1, gemm_items_##S, j);                  \
        else gemm_items_##S(j, 0, 1);                                                         \
    }                                                                                         \
    typedef struct gemm_batch_##S {                                                           \
        gemm_shape g;                                                                         \
        micro_fn_##S micro;                                                                   \
        micro2_fn_##S micro2;                                                                 \
    } gemm_batch_##S;                                                                         \
    static void gemm_job_init_##S(const gemm_batch_##S *b, int64_t bi, gemm_job_##S *j) {     \
        int64_t ao, bo;                                                                       \
        mft__gemm_batch_offsets(&b->g, bi, &ao, &bo);                                         \
        memset(j, 0, sizeof *j);                                                              \
        j->A = (const T *)(const void *)mft__tensor_ptr(b->g.A) + ao;                         \
        j->B = (const T *)(const void *)mft__tensor_ptr(b->g.B) + bo;                         \
        j->C = (T *)(void *)mft__tensor_ptr(b->g.C) + bi * b->g.M * b->g.N;                   \
        j->M = b->g.M, j->N = b->g.N, j->K = b->g.K;                                          \
        j->ars = b->g.ars, j->acs = b->g.acs, j->bks = b->g.bks, j->bns = b->g.bns;           \
        j->micro = b->micro;                                                                  \
        j->micro2 = b->micro2;                                                                \
    }                                                                                         \
    static void gemm_batch_range_##S(void *ctx, int64_t begin, int64_t end) {                 \
        const gemm_batch_##S *b = ctx;                                                        \
        for (int64_t bi = begin; bi < end; bi++) {                                            \
            gemm_job_##S j;                                                                   \
            gemm_job_init_##S(b, bi, &j);                                                     \
            gemm_matrix_##S(&j, false);                                                       \
        }                                                                                     \
    }                                                                                         \
    static void gemm_run_##S(const mft_kernel_args *a, micro_fn_##S micro,                    \
                             micro2_fn_##S micro2) {                                          \
        gemm_batch_##S b;                                                                     \
        mft__gemm_shape_init(a, &b.g);                                                        \
        b.micro = micro;                                                                      \
        b.micro2 = micro2;                                                                    \
        if (b.g.batch == 1) {                                                                 \
            gemm_job_##S j;                                                                   \
            gemm_job_init_##S(&b, 0, &j);                                                     \
            gemm_matrix_##S(&j, true);                                                        \
        } else if (b.g.batch > 1) {                                                           \
            const int64_t work = b.g.M * b.g.N * (b.g.K ? b.g.K : 1);                         \
            const int64_t grain = work >= GEMM_SERIAL_FLOPS ? 1 : GEMM_SERIAL_FLOPS / (work ? work : 1); \
            mft__parallel_for(0, b.g.batch, grain, gemm_batch_range_##S, &b);                 \
        }                                                                                     \
    }
GEMM_DRIVER(float, f32, 6, 16, 256, 72, 256, 1)
GEMM_DRIVER(double, f64, 6, 8, 256, 72, 128, 0)

static void matmul_f32(const mft_kernel_args *a) {
#if GEMM_AVX512
    if (!gemm_portable) {
        gemm_run_f32(a, micro_f32avx, micro2_f32avx512);
        return;
    }
#elif GEMM_AVX2
    if (!gemm_portable) {
        gemm_run_f32(a, micro_f32avx, NULL);
        return;
    }
#endif
    gemm_run_f32(a, micro_f32c, NULL);
}

static void matmul_f64(const mft_kernel_args *a) {
#if GEMM_AVX2
    if (!gemm_portable) {
        gemm_run_f64(a, micro_f64avx, NULL);
        return;
    }
#endif
    gemm_run_f64(a, micro_f64c, NULL);
}

/* ---------------------------------------------------------------- kernel table
 * Both kernels read any strides (see the head of matmul.c) and write a
 * packed CONTIGUOUS result; the reference kernels (reference.c) are reached
 * through mft__gemm_reference. */
const mft__kernel_def mft__kernels_gemm[] = {
#if GEMM_AVX512
    {MFT__OP_MATMUL, MFT_CONTIGUOUS, MFT_F32, "matmul.f32.packed.avx512", matmul_f32},
    {MFT__OP_MATMUL, MFT_CONTIGUOUS, MFT_F64, "matmul.f64.packed.avx2", matmul_f64},
#elif GEMM_AVX2
    {MFT__OP_MATMUL, MFT_CONTIGUOUS, MFT_F32, "matmul.f32.packed.avx2", matmul_f32},
    {MFT__OP_MATMUL, MFT_CONTIGUOUS, MFT_F64, "matmul.f64.packed.avx2", matmul_f64},
#else
    {MFT__OP_MATMUL, MFT_CONTIGUOUS, MFT_F32, "matmul.f32.packed", matmul_f32},
    {MFT__OP_MATMUL, MFT_CONTIGUOUS, MFT_F64, "matmul.f64.packed", matmul_f64},
#endif
    {0},
};
