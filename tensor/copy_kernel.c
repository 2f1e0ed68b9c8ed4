/* tensor/copy_kernel.c — the copy kernel behind mft_copy_ and every format
 * conversion. It runs through the elementwise iterator (dst is operand 0, so
 * the iteration follows dst's physical order) and receives 2-D blocks:
 *   dst(i, j) = dst0 + i*ds0 + j*ds1,  src(i, j) = src0 + i*ss0 + j*ss1.
 * Same-dtype blocks take one of three paths:
 *   - both rows packed        -> memcpy per row;
 *   - dst packed along i and src packed along j (or the mirror case): a
 *     transpose in 8-wide blocks swept along the long side (Note [Transpose
 *     tiling]), as 8x8 micro-tiles (AVX shuffles for 4-byte elements when
 *     compiled with AVX, portable loops otherwise).
 *     NCHW <-> NHWC is exactly this case after coalescing: a C x HW matrix
 *     per image;
 *   - anything else           -> a strided element loop.
 * Dtype-converting copies use one typed loop per (src, dst) pair. */
#include <string.h>
#include "internal.h"
#if defined(__AVX__)
#include <immintrin.h>
#endif


/* ---------------------------------------------------------------- transpose
 * Element (i, j): dst at d + i*es + j*dj (dst packed along i), src at
 * s + i*si + j*es (src packed along j). */
static void copy_transpose_scalar(char *d, int64_t dj, const char *s, int64_t si, int64_t ni,
                                  int64_t nj, size_t es) {
    for (int64_t j = 0; j < nj; j++)
        for (int64_t i = 0; i < ni; i++)
            memcpy(d + (size_t)i * es + j * dj, s + i * si + (size_t)j * es, es);
}

#define COPY_TRANSPOSE_TYPED(name, T)                                                       \
    static void name(char *d, int64_t dj, const char *s, int64_t si, int64_t ni,           \
                     int64_t nj) {                                                          \
        for (int64_t j = 0; j < nj; j++) {                                                  \
            T *dr = (T *)(void *)(d + j * dj);                                              \
            for (int64_t i = 0; i < ni; i++) dr[i] = *(const T *)(const void *)(s + i * si + j * (int64_t)sizeof(T)); \
        }                                                                                   \
    }
COPY_TRANSPOSE_TYPED(copy_transpose_u32, uint32_t)
COPY_TRANSPOSE_TYPED(copy_transpose_u64, uint64_t)

#if defined(__AVX__)
/* 8x8 block of floats: rows r of src (8 contiguous j each) become rows j of dst. */
static inline void copy_transpose8x8_f32(char *d, int64_t dj, const char *s, int64_t si) {
    __m256 r0 = _mm256_loadu_ps((const float *)(const void *)(s + 0 * si));
    __m256 r1 = _mm256_loadu_ps((const float *)(const void *)(s + 1 * si));
    __m256 r2 = _mm256_loadu_ps((const float *)(const void *)(s + 2 * si));
    __m256 r3 = _mm256_loadu_ps((const float *)(const void *)(s + 3 * si));
    __m256 r4 = _mm256_loadu_ps((const float *)(const void *)(s + 4 * si));
    __m256 r5 = _mm256_loadu_ps((const float *)(const void *)(s + 5 * si));
    __m256 r6 = _mm256_loadu_ps((const float *)(const void *)(s + 6 * si));
    __m256 r7 = _mm256_loadu_ps((const float *)(const void *)(s + 7 * si));
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
    __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
    __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
    __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    _mm256_storeu_ps((float *)(void *)(d + 0 * dj), _mm256_permute2f128_ps(u0, u4, 0x20));
    _mm256_storeu_ps((float *)(void *)(d + 1 * dj), _mm256_permute2f128_ps(u1, u5, 0x20));
    _mm256_storeu_ps((float *)(void *)(d + 2 * dj), _mm256_permute2f128_ps(u2, u6, 0x20));
    _mm256_storeu_ps((float *)(void *)(d + 3 * dj), _mm256_permute2f128_ps(u3, u7, 0x20));
    _mm256_storeu_ps((float *)(void *)(d + 4 * dj), _mm256_permute2f128_ps(u0, u4, 0x31));
    _mm256_storeu_ps((float *)(void *)(d + 5 * dj), _mm256_permute2f128_ps(u1, u5, 0x31));
    _mm256_storeu_ps((float *)(void *)(d + 6 * dj), _mm256_permute2f128_ps(u2, u6, 0x31));
    _mm256_storeu_ps((float *)(void *)(d + 7 * dj), _mm256_permute2f128_ps(u3, u7, 0x31));
}
#endif

/* One tile of the transpose (8x8 micro-tiles, remainders element-wise). */
static void copy_transpose_tile(char *d, int64_t dj, const char *s, int64_t si, int64_t ni,
                                int64_t nj, size_t es) {
#if defined(__AVX__)
    if (es == 4) {
        int64_t ni8 = ni & ~(int64_t)7, nj8 = nj & ~(int64_t)7;
        for (int64_t j = 0; j < nj8; j += 8)
            for (int64_t i = 0; i < ni8; i += 8)
                copy_transpose8x8_f32(d + i * 4 + j * dj, dj, s + i * si + j * 4, si);
        if (ni8 < ni) copy_transpose_u32(d + ni8 * 4, dj, s + ni8 * si, si, ni - ni8, nj8);
        if (nj8 < nj) copy_transpose_u32(d + nj8 * dj, dj, s + nj8 * 4, si, ni, nj - nj8);
        return;
    }
#endif
    if (es == 4)
        copy_transpose_u32(d, dj, s, si, ni, nj);
    else if (es == 8)
        copy_transpose_u64(d, dj, s, si, ni, nj);
    else
        copy_transpose_scalar(d, dj, s, si, ni, nj, es);
}

/* Note [Transpose tiling]
 * Measured on the 8x64x56x56 NCHW <-> NHWC case (bench/bench_copy): the fast
 * order keeps 8 rows of the LONG side streaming sequentially (8 prefetch
 * streams) while the short side (usually C) is covered in blocks of 8; square
 * 64x64 tiles reached only ~0.45-0.55 of STREAM copy because every tile step
 * jumps between 64 strided rows; 16-wide blocks (16 streams) ~0.5; 8-wide
 * blocks with sweeps of 128..1024 ~0.5-0.7, >= 4096 ~0.75-0.95. The sweep is
 * capped (8192 elements: 512 KiB of partly written 64-byte lines) so the
 * short side's lines stay in L2 until the next block of 8 completes them. */
#define COPY_BLOCK 8
#define COPY_SWEEP 8192

static void copy_transpose(char *d, int64_t dj, const char *s, int64_t si, int64_t ni,
                           int64_t nj, size_t es) {
    const int64_t e = (int64_t)es;
    if (ni <= nj) { /* i short: blocks of 8 along i, sweep j */
        for (int64_t j0 = 0; j0 < nj; j0 += COPY_SWEEP) {
            int64_t tj = nj - j0 < COPY_SWEEP ? nj - j0 : COPY_SWEEP;
            for (int64_t i0 = 0; i0 < ni; i0 += COPY_BLOCK) {
                int64_t ti = ni - i0 < COPY_BLOCK ? ni - i0 : COPY_BLOCK;
                copy_transpose_tile(d + i0 * e + j0 * dj, dj, s + i0 * si + j0 * e, si, ti, tj, es);
            }
        }
    } else { /* j short: blocks of 8 along j, sweep i */
        for (int64_t i0 = 0; i0 < ni; i0 += COPY_SWEEP) {
            int64_t ti = ni - i0 < COPY_SWEEP ? ni - i0 : COPY_SWEEP;
            for (int64_t j0 = 0; j0 < nj; j0 += COPY_BLOCK) {
                int64_t tj = nj - j0 < COPY_BLOCK ? nj - j0 : COPY_BLOCK;
                copy_transpose_tile(d + i0 * e + j0 * dj, dj, s + i0 * si + j0 * e, si, ti, tj, es);
            }
        }
    }
}

/* ---------------------------------------------------------------- same dtype */
/* Strided element copy; a packed destination reading every second element
 * (x[..., ::2]) gets a constant-stride loop the compiler vectorises. */
#define COPY_STRIDED_TYPED(name, T)                                                           \
    static void name(char *d, int64_t d0, const char *s, int64_t s0, int64_t n) {             \
        if (d0 == (int64_t)sizeof(T) && s0 == 2 * (int64_t)sizeof(T)) {                       \
            T *dd = (T *)(void *)d;                                                           \
            const T *ss = (const T *)(const void *)s;                                         \
            for (int64_t i = 0; i < n; i++) dd[i] = ss[2 * i];                                \
            return;                                                                           \
        }                                                                                     \
        for (int64_t i = 0; i < n; i++)                                                       \
            *(T *)(void *)(d + i * d0) = *(const T *)(const void *)(s + i * s0);              \
    }
COPY_STRIDED_TYPED(copy_strided_u8, uint8_t)
COPY_STRIDED_TYPED(copy_strided_u32, uint32_t)
COPY_STRIDED_TYPED(copy_strided_u64, uint64_t)

static void copy_same_loop(void *ctx, char **data, const int64_t *st, int64_t n0, int64_t n1) {
    const size_t es = *(const size_t *)ctx;
    const int64_t e = (int64_t)es;
    const int64_t d0 = st[0], s0 = st[1], d1 = st[2], s1 = st[3];
    if (d0 == e && s0 == e) {
        for (int64_t j = 0; j < n1; j++) memcpy(data[0] + j * d1, data[1] + j * s1, (size_t)(n0 * e));
        return;
    }
    if (n0 >= 8 && n1 >= 8) {
        if (d0 == e && s1 == e) { /* dst packed along i, src along j */
            copy_transpose(data[0], d1, data[1], s0, n0, n1, es);
            return;
        }
        if (s0 == e && d1 == e) { /* mirror: swap the roles of i and j */
            copy_transpose(data[0], d0, data[1], s1, n1, n0, es);
            return;
        }
    }
    for (int64_t j = 0; j < n1; j++) {
        char *d = data[0] + j * d1;
        const char *s = data[1] + j * s1;
        switch (es) {
        case 1: copy_strided_u8(d, d0, s, s0, n0); break;
        case 4: copy_strided_u32(d, d0, s, s0, n0); break;
        case 8: copy_strided_u64(d, d0, s, s0, n0); break;
        default:
            for (int64_t i = 0; i < n0; i++) memcpy(d + i * d0, s + i * s0, es);
        }
    }
}

/* ---------------------------------------------------------------- converting
 * Float -> integer conversions saturate (and map NaN to 0) to stay defined. */
static inline int64_t copy_sat(double v, double lo, double hi) {
    if (v != v) return 0;
    if (v <= lo) return (int64_t)lo;
    if (v >= hi) return (int64_t)hi;
    return (int64_t)v;
}
#define CVT_TO_F32(x) ((float)(x))
#define CVT_TO_F64(x) ((double)(x))
#define CVT_TO_I32(x) ((int32_t)copy_sat((double)(x), -2147483648.0, 2147483647.0))
#define CVT_TO_I64(x) ((int64_t)copy_sat((double)(x), -9223372036854775808.0, 9223372036854774784.0))
#define CVT_TO_U8(x) ((uint8_t)copy_sat((double)(x), -9223372036854775808.0, 9223372036854774784.0))

#define CVT_LOOP(SN, ST, DN, DT)                                                                \
    static void cvt_##SN##_##DN(char *d, int64_t d0, const char *s, int64_t s0, int64_t n) {   \
        for (int64_t i = 0; i < n; i++) {                                                       \
            ST v;                                                                               \
            memcpy(&v, s + i * s0, sizeof v);                                                   \
            DT w = CVT_TO_##DN(v);                                                              \
            memcpy(d + i * d0, &w, sizeof w);                                                   \
        }                                                                                       \
    }
#define CVT_FROM(SN, ST)                 \
    CVT_LOOP(SN, ST, F32, float)         \
    CVT_LOOP(SN, ST, F64, double)        \
    CVT_LOOP(SN, ST, I32, int32_t)       \
    CVT_LOOP(SN, ST, I64, int64_t)       \
    CVT_LOOP(SN, ST, U8, uint8_t)
CVT_FROM(F32, float)
CVT_FROM(F64, double)
CVT_FROM(I32, int32_t)
CVT_FROM(I64, int64_t)
CVT_FROM(U8, uint8_t)

typedef void (*cvt_fn)(char *, int64_t, const char *, int64_t, int64_t);
#define CVT_ROW(SN) {cvt_##SN##_F32, cvt_##SN##_F64, cvt_##SN##_I32, cvt_##SN##_I64, cvt_##SN##_U8}
static const cvt_fn cvt_table[MFT_DTYPE_COUNT][MFT_DTYPE_COUNT] = {
    CVT_ROW(F32), CVT_ROW(F64), CVT_ROW(I32), CVT_ROW(I64), CVT_ROW(U8)};

static void copy_convert_loop(void *ctx, char **data, const int64_t *st, int64_t n0, int64_t n1) {
    cvt_fn f = *(const cvt_fn *)ctx;
    for (int64_t j = 0; j < n1; j++) f(data[0] + j * st[2], st[0], data[1] + j * st[3], st[1], n0);
}

void mft__copy_kernel(mft_tensor *dst, const mft_tensor *src) {
    if (dst->nblocks || src->nblocks) { /* Note [Blocked tensors] */
        mft__blk_copy(dst, src);
        return;
    }
    uint64_t t0 = mft__kernel_begin();
    mft__iter it;
    mft_tensor *ops[2] = {dst, (mft_tensor *)src};
    mft__iter_build("mft_copy_", &it, 2, ops, dst->ndim, dst->sizes);
    if (dst->dtype == src->dtype) {
        size_t es = mft__elem_size(dst->dtype);
        mft__iter_run(&it, copy_same_loop, &es, 1 << 15);
    } else {
        cvt_fn f = cvt_table[src->dtype][dst->dtype];
        mft__iter_run(&it, copy_convert_loop, &f, 1 << 15);
    }
    atomic_fetch_add(&dst->storage->version, 1);
    const mft_tensor *in[1] = {src}, *out[1] = {dst};
    mft__kernel_end(t0, &(mft__kernel_info){"copy", "copy.iter", MFT_FORMAT_COUNT, MFT_FORMAT_COUNT,
                                            dst->dtype, 1, 1, in, out, 0, false});
}
