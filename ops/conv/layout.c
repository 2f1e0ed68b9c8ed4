/* ops/conv/layout.c — the layout copies the fast F32 convolution kernels
 * share: the blocked 8x8 transpose of one block (mft__conv_tr_block), the
 * parallel NCHW <-> NHWC transpose of whole tensors (mft__conv_transpose),
 * and the zero-bordered copy of one plane (mft__conv_pad_plane). Called
 * per block, row or plane, not per element: not inlined (nor were they when
 * they were static beside their callers, except into one weight packing
 * loop). */
#include "conv_internal.h"

/* ---------------------------------------------------------------- transpose */
/* dst (cols x rows, ld dl) = src (rows x cols, ld sl)^T for one block. */
void mft__conv_tr_block(const float *src, int64_t sl, float *dst, int64_t dl, int64_t rows,
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

/* ---------------------------------------------------------------- NCHW <-> NHWC */
typedef struct tr_job {
    const float *src;
    float *dst;
    int64_t C, S; /* per image: src (C, S) -> dst (S, C) when to_nhwc, else back */
    bool to_nhwc;
} tr_job;

static void tr_range(void *ctx, int64_t begin, int64_t end) {
    const tr_job *j = ctx;
    const int64_t C = j->C, S = j->S, nsb = cdiv(S, 64);
    for (int64_t it = begin; it < end; it++) {
        const int64_t n = it / nsb, s0 = (it % nsb) * 64;
        const int64_t s1 = s0 + 64 < S ? s0 + 64 : S;
        const float *src = j->src + n * C * S;
        float *dst = j->dst + n * C * S;
        for (int64_t c0 = 0; c0 < C; c0 += 64) {
            const int64_t c1 = c0 + 64 < C ? c0 + 64 : C;
            if (j->to_nhwc) /* src (C, S) rows c, cols s */
                mft__conv_tr_block(src + c0 * S + s0, S, dst + s0 * C + c0, C, c1 - c0, s1 - s0);
            else /* src (S, C) rows s, cols c */
                mft__conv_tr_block(src + s0 * C + c0, C, dst + c0 * S + s0, S, s1 - s0, c1 - c0);
        }
    }
}

void mft__conv_transpose(const float *src, float *dst, int64_t N, int64_t C, int64_t S,
                         bool to_nhwc) {
    if (C == 1 || S == 1) {
        memcpy(dst, src, (size_t)(N * C * S) * sizeof(float));
        return;
    }
    tr_job j = {src, dst, C, S, to_nhwc};
    mft__parallel_for(0, N * cdiv(S, 64), 4, tr_range, &j);
}

/* ---------------------------------------------------------------- zero-bordered planes */
/* pb (PH x PW) = src plane (SH x SW) shifted by (offh, offw), zero outside. */
void mft__conv_pad_plane(float *pb, int64_t PH, int64_t PW, const float *src, int64_t SH,
                         int64_t SW, int64_t offh, int64_t offw) {
    int64_t c0 = -offw < 0 ? 0 : -offw, c1 = SW - offw < PW ? SW - offw : PW;
    if (c1 < c0) c1 = c0;
    for (int64_t r = 0; r < PH; r++) {
        float *d = pb + r * PW;
        const int64_t sr = r + offh;
        if (sr < 0 || sr >= SH) {
            memset(d, 0, (size_t)PW * sizeof(float));
            continue;
        }
        if (c0 > 0) memset(d, 0, (size_t)c0 * sizeof(float));
        if (c1 > c0) memcpy(d + c0, src + sr * SW + c0 + offw, (size_t)(c1 - c0) * sizeof(float));
        if (c1 < PW) memset(d + c1, 0, (size_t)(PW - c1) * sizeof(float));
    }
}
