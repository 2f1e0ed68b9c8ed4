/* tensor/reorder_blocked.c — the f32 reorder kernels between a plain layout
 * (any strides) and a C-blocked one (nChw16c / nChw8c), both directions,
 * on raw pointers (Note [Reorder index mapping] in reorder_internal.h).
 *
 * Three paths, chosen from the plain side's strides:
 *   - channels packed (pc == 1, NHWC-like): per pixel, per channel block,
 *     one vector load and one vector store; the tail block's plain side is
 *     touched through a lane mask (the masked load zero-fills the pad lanes;
 *     the reverse direction stores with the mask);
 *   - pixels packed (ps == 1, NCHW-like): 16x16 (B = 16) or 8x8 (B = 8)
 *     in-register transposes of (channels x pixels) tiles; missing channels
 *     of the tail block are zero rows, a spatial tail is loaded / stored
 *     through a lane mask;
 *   - anything else, any B, and every shape when the compiler does not
 *     target AVX-512F: a scalar loop over (n, channel block).
 * Work is split over (n, pixel chunk), (n, channel block, pixel chunk) or
 * (n, channel block) with mft__parallel_for, serial below RB_GRAIN elements. Every element is
 * copied by exactly one thread, so the result does not depend on the thread
 * count. */
#include <stdbool.h>
#include "internal.h"
#include "reorder_internal.h"
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

/* Tuning, measured on an AVX-512 Xeon (2 vCPUs, 2 MB L2 per core) with
 * bench/bench_reorder.c:
 * RB_GRAIN   elements below which a reorder runs on one thread (and the
 *            least one thread is given): 128 KB of f32 read, as much
 *            written. At 1 << 16, 1x64x28x28 stayed serial and reached
 *            0.65-0.75 of a 2-thread copy; at 1 << 15 it splits, ~0.95.
 * RB_ITEM    elements per work item of the vector paths (the pixel chunk).
 * RB_STAGE   pixels per pass of the staged from_blocked path (Note [Reorder
 *            transposes]): 16 rows of it are 8 KB of stack, in L1.
 * RB_GATHER_MAX   a to_blocked pixel tail of at most this many pixels is
 *            gathered (16 channels per pixel, one vgatherdps) instead of
 *            transposed as a whole tile (S = 49, 196, 200: +5-15%).
 * RB_SCATTER_MAX  the same for the staged from_blocked tail (into the
 *            stage, so in L1): S = 49 and 17 gained 5-15%. */
#define RB_GRAIN       ((int64_t)1 << 15)
#define RB_ITEM        ((int64_t)1 << 13)
#define RB_STAGE       128
#define RB_GATHER_MAX  8
#define RB_SCATTER_MAX 2

typedef struct rb_job {
    const float *src;
    float *dst;
    int64_t pn, pc, ps; /* plain strides (n, c, s) */
    int64_t bn, bc1;    /* blocked outer strides (n, c / B) */
    int B;
    int64_t C, S, CB; /* CB = ceil(C / B) */
    int64_t sc, ns;   /* pixels per work item, pixel chunks per (n) or (n, cb) */
} rb_job;

static int64_t rb_min(int64_t a, int64_t b) { return a < b ? a : b; }

/* Runs fn over nitems items of `per_item` elements each. */
static void rb_run(int64_t nitems, int64_t per_item, mft__range_fn fn, rb_job *j) {
    int64_t grain = RB_GRAIN / (per_item > 0 ? per_item : 1);
    mft__parallel_for(0, nitems, grain > 1 ? grain : 1, fn, j);
}

/* ------------------------------------------------------------------ scalar
 * Items are (n, cb). Also the reference the vector paths are tested
 * against (tests/tensor/test_reorder_blocked.c checks both against a naive
 * loop of its own). */
static void rb_scalar_to(void *ctx, int64_t b, int64_t e) {
    const rb_job *j = ctx;
    const int64_t B = j->B;
    for (int64_t it = b; it < e; it++) {
        const int64_t n = it / j->CB, cb = it % j->CB, c0 = cb * B;
        const int64_t nc = rb_min(B, j->C - c0);
        const float *sp = j->src + n * j->pn + c0 * j->pc;
        float *dp = j->dst + n * j->bn + cb * j->bc1;
        for (int64_t s = 0; s < j->S; s++, dp += B) {
            const float *p = sp + s * j->ps;
            int64_t l = 0;
            for (; l < nc; l++) dp[l] = p[l * j->pc];
            for (; l < B; l++) dp[l] = 0.0f;
        }
    }
}

static void rb_scalar_from(void *ctx, int64_t b, int64_t e) {
    const rb_job *j = ctx;
    const int64_t B = j->B;
    for (int64_t it = b; it < e; it++) {
        const int64_t n = it / j->CB, cb = it % j->CB, c0 = cb * B;
        const int64_t nc = rb_min(B, j->C - c0);
        const float *sp = j->src + n * j->bn + cb * j->bc1;
        float *dp = j->dst + n * j->pn + c0 * j->pc;
        for (int64_t s = 0; s < j->S; s++, sp += B) {
            float *p = dp + s * j->ps;
            for (int64_t l = 0; l < nc; l++) p[l * j->pc] = sp[l];
        }
    }
}

#if defined(__AVX512F__)
/* ------------------------------------------------------------------ channels packed
 * Items are (n, pixel chunk of j->sc pixels). */
static void rb_nhwc_to16(void *ctx, int64_t b, int64_t e) {
    const rb_job *j = ctx;
    const int64_t full = j->C / 16, bc1 = j->bc1, ps = j->ps;
    const __mmask16 tail = (__mmask16)((1u << (j->C % 16)) - 1u);
    for (int64_t it = b; it < e; it++) {
        const int64_t n = it / j->ns, s0 = (it % j->ns) * j->sc, s1 = rb_min(j->S, s0 + j->sc);
        const float *sn = j->src + n * j->pn;
        float *dn = j->dst + n * j->bn;
        for (int64_t s = s0; s < s1; s++) {
            const float *p = sn + s * ps;
            float *q = dn + s * 16;
            int64_t cb = 0;
            for (; cb < full; cb++) _mm512_storeu_ps(q + cb * bc1, _mm512_loadu_ps(p + cb * 16));
            if (tail) _mm512_storeu_ps(q + cb * bc1, _mm512_maskz_loadu_ps(tail, p + cb * 16));
        }
    }
}

static void rb_nhwc_from16(void *ctx, int64_t b, int64_t e) {
    const rb_job *j = ctx;
    const int64_t full = j->C / 16, bc1 = j->bc1, ps = j->ps;
    const __mmask16 tail = (__mmask16)((1u << (j->C % 16)) - 1u);
    for (int64_t it = b; it < e; it++) {
        const int64_t n = it / j->ns, s0 = (it % j->ns) * j->sc, s1 = rb_min(j->S, s0 + j->sc);
        const float *sn = j->src + n * j->bn;
        float *dn = j->dst + n * j->pn;
        for (int64_t s = s0; s < s1; s++) {
            const float *q = sn + s * 16;
            float *p = dn + s * ps;
            int64_t cb = 0;
            for (; cb < full; cb++) _mm512_storeu_ps(p + cb * 16, _mm512_loadu_ps(q + cb * bc1));
            if (tail) _mm512_mask_storeu_ps(p + cb * 16, tail, _mm512_loadu_ps(q + cb * bc1));
        }
    }
}

static void rb_nhwc_to8(void *ctx, int64_t b, int64_t e) {
    const rb_job *j = ctx;
    const int64_t full = j->C / 8, bc1 = j->bc1, ps = j->ps;
    const __mmask16 tail = (__mmask16)((1u << (j->C % 8)) - 1u);
    for (int64_t it = b; it < e; it++) {
        const int64_t n = it / j->ns, s0 = (it % j->ns) * j->sc, s1 = rb_min(j->S, s0 + j->sc);
        const float *sn = j->src + n * j->pn;
        float *dn = j->dst + n * j->bn;
        for (int64_t s = s0; s < s1; s++) {
            const float *p = sn + s * ps;
            float *q = dn + s * 8;
            int64_t cb = 0;
            for (; cb < full; cb++) _mm256_storeu_ps(q + cb * bc1, _mm256_loadu_ps(p + cb * 8));
            if (tail)
                _mm256_storeu_ps(q + cb * bc1,
                                 _mm512_castps512_ps256(_mm512_maskz_loadu_ps(tail, p + cb * 8)));
        }
    }
}

static void rb_nhwc_from8(void *ctx, int64_t b, int64_t e) {
    const rb_job *j = ctx;
    const int64_t full = j->C / 8, bc1 = j->bc1, ps = j->ps;
    const __mmask16 tail = (__mmask16)((1u << (j->C % 8)) - 1u);
    for (int64_t it = b; it < e; it++) {
        const int64_t n = it / j->ns, s0 = (it % j->ns) * j->sc, s1 = rb_min(j->S, s0 + j->sc);
        const float *sn = j->src + n * j->bn;
        float *dn = j->dst + n * j->pn;
        for (int64_t s = s0; s < s1; s++) {
            const float *q = sn + s * 8;
            float *p = dn + s * ps;
            int64_t cb = 0;
            for (; cb < full; cb++) _mm256_storeu_ps(p + cb * 8, _mm256_loadu_ps(q + cb * bc1));
            if (tail)
                _mm512_mask_storeu_ps(p + cb * 8, tail, _mm512_maskz_loadu_ps(tail, q + cb * bc1));
        }
    }
}

/* ------------------------------------------------------------------ pixels packed
 * Note [Reorder transposes]
 * A tile is B channels x B pixels. to_blocked loads B channel rows (B pixels
 * each), transposes, and stores B pixel vectors (B channels each) back to
 * back: one contiguous B*B-float run of the block. Channel rows past C load
 * as zero (a zero mask, the row pointer clamped to a real row), so the pad
 * lanes come out zero; pixels past the chunk's end are masked off on the
 * plain side and not stored on the blocked side. A short pixel tail (at
 * most RB_GATHER_MAX) is gathered pixel by pixel instead.
 *
 * from_blocked is the mirror, with one more step: its stores go to B plain
 * rows. When the rows do not start on a 64-byte boundary (pc or the base
 * not a multiple of 16 floats: S = 49 or 196 in packed NCHW), most vector
 * stores of a tile would straddle two cache lines, so such items are staged:
 * RB_STAGE pixels are transposed into an aligned buffer on the stack (in
 * L1), then each row is copied out with stores aligned on the destination,
 * masked at both ends. On such rows this took blk->NCHW of 8x256x14x14
 * from 16 to 25 GB/s on one thread (a copy: 26-28); on aligned rows it costs
 * a little, so they store directly.
 *
 * Items are (n, cb, pixel chunk of j->sc pixels), j->sc a multiple of 16, so
 * a chunk's tiles start where its rows' alignment is the rows' own. */
#define RB_REP8(X)  X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
#define RB_REP16(X) RB_REP8(X) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)

/* r[i] (16 lanes) -> r[i] holding lane i of every input, in order. */
static inline void rb_tr16(__m512 *r) {
    __m512 t[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    /* per 128-bit lane L: r[4i + k] = rows 4i..4i+3 at column 4L + k */
    for (int i = 0; i < 4; i++) {
        r[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
        r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    /* t[k] = rows 0-3 col k, rows 0-3 col 8+k, rows 4-7 col k, rows 4-7 col 8+k
     * (t[4+k]: cols 4+k, 12+k; t[8+k], t[12+k]: the same for rows 8-15) */
    for (int k = 0; k < 4; k++) {
        t[k] = _mm512_shuffle_f32x4(r[k], r[4 + k], 0x88);
        t[4 + k] = _mm512_shuffle_f32x4(r[k], r[4 + k], 0xDD);
        t[8 + k] = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0x88);
        t[12 + k] = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0xDD);
    }
    for (int k = 0; k < 4; k++) {
        r[k] = _mm512_shuffle_f32x4(t[k], t[8 + k], 0x88);
        r[8 + k] = _mm512_shuffle_f32x4(t[k], t[8 + k], 0xDD);
        r[4 + k] = _mm512_shuffle_f32x4(t[4 + k], t[12 + k], 0x88);
        r[12 + k] = _mm512_shuffle_f32x4(t[4 + k], t[12 + k], 0xDD);
    }
}

/* r[i] (8 lanes) -> r[i] holding lane i of every input. */
static inline void rb_tr8(__m256 *r) {
    __m256 t[8], u[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 2; i++) {
        u[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
        u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    for (int k = 0; k < 4; k++) {
        r[k] = _mm256_permute2f128_ps(u[k], u[4 + k], 0x20);
        r[4 + k] = _mm256_permute2f128_ps(u[k], u[4 + k], 0x31);
    }
}

/* Lanes [0, w) of 16, w in [0, 16]. */
static inline __mmask16 rb_mask(int64_t w) { return (__mmask16)((1u << w) - 1u); }

/* Decodes item it of a pixels-packed job. */
static inline void rb_item(const rb_job *j, int64_t it, int64_t *n, int64_t *cb, int64_t *s0,
                           int64_t *s1) {
    const int64_t per_n = j->CB * j->ns;
    *n = it / per_n;
    const int64_t r = it % per_n;
    *cb = r / j->ns;
    *s0 = (r % j->ns) * j->sc;
    *s1 = rb_min(j->S, *s0 + j->sc);
}

static void rb_nchw_to16(void *ctx, int64_t b, int64_t e) {
    const rb_job *j = ctx;
    const int64_t pc = j->pc;
    for (int64_t it = b; it < e; it++) {
        int64_t n, cb, s0, s1;
        rb_item(j, it, &n, &cb, &s0, &s1);
        const int64_t nc = rb_min(16, j->C - cb * 16);
        const float *p = j->src + n * j->pn + cb * 16 * pc;
        float *q = j->dst + n * j->bn + cb * j->bc1;
        /* row i reads channel min(i, nc - 1) through mask rm[i] */
        const float *row[16];
        __mmask16 rm[16];
        for (int i = 0; i < 16; i++) {
            row[i] = p + rb_min(i, nc - 1) * pc;
            rm[i] = i < nc ? (__mmask16)0xFFFF : (__mmask16)0;
        }
        __m512 r[16];
        int64_t s = s0;
        if (nc == 16) {
            for (; s + 16 <= s1; s += 16) {
#define RB_LD(i) r[i] = _mm512_loadu_ps(row[i] + s);
                RB_REP16(RB_LD)
#undef RB_LD
                rb_tr16(r);
#define RB_ST(i) _mm512_storeu_ps(q + (s + i) * 16, r[i]);
                RB_REP16(RB_ST)
#undef RB_ST
            }
        }
        if (s1 - s <= RB_GATHER_MAX && pc <= INT32_MAX / 16 && pc >= -(INT32_MAX / 16)) {
            const __m512i idx = _mm512_mullo_epi32(
                _mm512_set1_epi32((int32_t)pc),
                _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
            const __mmask16 cm = rb_mask(nc);
            for (; s < s1; s++)
                _mm512_storeu_ps(q + s * 16,
                                 _mm512_mask_i32gather_ps(_mm512_setzero_ps(), cm, idx, p + s, 4));
        }
        for (; s < s1; s += 16) {
            const int64_t w = rb_min(16, s1 - s);
            const __mmask16 m = rb_mask(w);
#define RB_LD(i) r[i] = _mm512_maskz_loadu_ps((__mmask16)(rm[i] & m), row[i] + s);
            RB_REP16(RB_LD)
#undef RB_LD
            rb_tr16(r);
#define RB_ST(i)                                                                                   \
    if (i < w) _mm512_storeu_ps(q + (s + i) * 16, r[i]);
            RB_REP16(RB_ST)
#undef RB_ST
        }
    }
}

/* d[0..w) = t[0..w), the stores aligned to 64 bytes on d (d float-aligned). */
static inline void rb_row_out(float *d, const float *t, int64_t w) {
    int64_t k = (int64_t)((16 - (((uintptr_t)d >> 2) & 15)) & 15);
    if (k > w) k = w;
    if (k) _mm512_mask_storeu_ps(d, rb_mask(k), _mm512_maskz_loadu_ps(rb_mask(k), t));
    for (; k + 16 <= w; k += 16) _mm512_store_ps(d + k, _mm512_loadu_ps(t + k));
    if (k < w) {
        const __mmask16 m = rb_mask(w - k);
        _mm512_mask_storeu_ps(d + k, m, _mm512_maskz_loadu_ps(m, t + k));
    }
}

/* True when every row p + i*pc (and so every tile, s0 being a multiple of
 * 16) starts on a 64-byte boundary. */
static inline bool rb_rows_aligned(const float *p, int64_t pc) {
    return ((uintptr_t)p & 63) == 0 && (pc & 15) == 0;
}

static void rb_nchw_from16(void *ctx, int64_t b, int64_t e) {
    const rb_job *j = ctx;
    const int64_t pc = j->pc;
    _Alignas(64) float tmp[16 * RB_STAGE];
    for (int64_t it = b; it < e; it++) {
        int64_t n, cb, s0, s1;
        rb_item(j, it, &n, &cb, &s0, &s1);
        const int64_t nc = rb_min(16, j->C - cb * 16);
        const float *q = j->src + n * j->bn + cb * j->bc1;
        float *p = j->dst + n * j->pn + cb * 16 * pc;
        __m512 r[16];
        if (rb_rows_aligned(p, pc)) {
            int64_t s = s0;
            if (nc == 16) {
                for (; s + 16 <= s1; s += 16) {
#define RB_LD(i) r[i] = _mm512_loadu_ps(q + (s + i) * 16);
                    RB_REP16(RB_LD)
#undef RB_LD
                    rb_tr16(r);
#define RB_ST(i) _mm512_storeu_ps(p + i * pc + s, r[i]);
                    RB_REP16(RB_ST)
#undef RB_ST
                }
            }
            for (; s < s1; s += 16) {
                const int64_t w = rb_min(16, s1 - s);
                const __mmask16 m = rb_mask(w);
                /* pixels past w load as zero and are never stored */
#define RB_LD(i) r[i] = i < w ? _mm512_loadu_ps(q + (s + i) * 16) : _mm512_setzero_ps();
                RB_REP16(RB_LD)
#undef RB_LD
                rb_tr16(r);
#define RB_ST(i)                                                                                   \
    if (i < nc) _mm512_mask_storeu_ps(p + i * pc + s, m, r[i]);
                RB_REP16(RB_ST)
#undef RB_ST
            }
            continue;
        }
        for (int64_t sub = s0; sub < s1; sub += RB_STAGE) {
            const int64_t wall = rb_min(RB_STAGE, s1 - sub);
            const float *qs = q + sub * 16;
            for (int64_t t = 0; t < wall; t += 16) {
                const int64_t w = rb_min(16, wall - t);
                if (w <= RB_SCATTER_MAX) { /* the last tile: a few pixels */
                    const __m512i idx = _mm512_setr_epi32(
                        0 * RB_STAGE, 1 * RB_STAGE, 2 * RB_STAGE, 3 * RB_STAGE, 4 * RB_STAGE,
                        5 * RB_STAGE, 6 * RB_STAGE, 7 * RB_STAGE, 8 * RB_STAGE, 9 * RB_STAGE,
                        10 * RB_STAGE, 11 * RB_STAGE, 12 * RB_STAGE, 13 * RB_STAGE, 14 * RB_STAGE,
                        15 * RB_STAGE);
                    for (int64_t k = 0; k < w; k++)
                        _mm512_i32scatter_ps(tmp + t + k, idx, _mm512_loadu_ps(qs + (t + k) * 16),
                                             4);
                    break;
                }
                if (w == 16) {
#define RB_LD(i) r[i] = _mm512_loadu_ps(qs + (t + i) * 16);
                    RB_REP16(RB_LD)
#undef RB_LD
                } else {
#define RB_LD(i) r[i] = i < w ? _mm512_loadu_ps(qs + (t + i) * 16) : _mm512_setzero_ps();
                    RB_REP16(RB_LD)
#undef RB_LD
                }
                rb_tr16(r);
#define RB_ST(i) _mm512_store_ps(tmp + i * RB_STAGE + t, r[i]);
                RB_REP16(RB_ST)
#undef RB_ST
            }
            for (int64_t i = 0; i < nc; i++) rb_row_out(p + i * pc + sub, tmp + i * RB_STAGE, wall);
        }
    }
}

static void rb_nchw_to8(void *ctx, int64_t b, int64_t e) {
    const rb_job *j = ctx;
    const int64_t pc = j->pc;
    for (int64_t it = b; it < e; it++) {
        int64_t n, cb, s0, s1;
        rb_item(j, it, &n, &cb, &s0, &s1);
        const int64_t nc = rb_min(8, j->C - cb * 8);
        const float *p = j->src + n * j->pn + cb * 8 * pc;
        float *q = j->dst + n * j->bn + cb * j->bc1;
        const float *row[8];
        __mmask16 rm[8];
        for (int i = 0; i < 8; i++) {
            row[i] = p + rb_min(i, nc - 1) * pc;
            rm[i] = i < nc ? (__mmask16)0xFF : (__mmask16)0;
        }
        __m256 r[8];
        int64_t s = s0;
        if (nc == 8) {
            for (; s + 8 <= s1; s += 8) {
#define RB_LD(i) r[i] = _mm256_loadu_ps(row[i] + s);
                RB_REP8(RB_LD)
#undef RB_LD
                rb_tr8(r);
#define RB_ST(i) _mm256_storeu_ps(q + (s + i) * 8, r[i]);
                RB_REP8(RB_ST)
#undef RB_ST
            }
        }
        for (; s < s1; s += 8) {
            const int64_t w = rb_min(8, s1 - s);
            const __mmask16 m = rb_mask(w);
#define RB_LD(i)                                                                                   \
    r[i] = _mm512_castps512_ps256(_mm512_maskz_loadu_ps((__mmask16)(rm[i] & m), row[i] + s));
            RB_REP8(RB_LD)
#undef RB_LD
            rb_tr8(r);
#define RB_ST(i)                                                                                   \
    if (i < w) _mm256_storeu_ps(q + (s + i) * 8, r[i]);
            RB_REP8(RB_ST)
#undef RB_ST
        }
    }
}

static void rb_nchw_from8(void *ctx, int64_t b, int64_t e) {
    const rb_job *j = ctx;
    const int64_t pc = j->pc;
    _Alignas(64) float tmp[8 * RB_STAGE];
    for (int64_t it = b; it < e; it++) {
        int64_t n, cb, s0, s1;
        rb_item(j, it, &n, &cb, &s0, &s1);
        const int64_t nc = rb_min(8, j->C - cb * 8);
        const float *q = j->src + n * j->bn + cb * j->bc1;
        float *p = j->dst + n * j->pn + cb * 8 * pc;
        __m256 r[8];
        if (rb_rows_aligned(p, pc)) {
            int64_t s = s0;
            if (nc == 8) {
                for (; s + 8 <= s1; s += 8) {
#define RB_LD(i) r[i] = _mm256_loadu_ps(q + (s + i) * 8);
                    RB_REP8(RB_LD)
#undef RB_LD
                    rb_tr8(r);
#define RB_ST(i) _mm256_storeu_ps(p + i * pc + s, r[i]);
                    RB_REP8(RB_ST)
#undef RB_ST
                }
            }
            for (; s < s1; s += 8) {
                const int64_t w = rb_min(8, s1 - s);
                const __mmask16 m = rb_mask(w);
#define RB_LD(i) r[i] = i < w ? _mm256_loadu_ps(q + (s + i) * 8) : _mm256_setzero_ps();
                RB_REP8(RB_LD)
#undef RB_LD
                rb_tr8(r);
#define RB_ST(i)                                                                                   \
    if (i < nc) _mm512_mask_storeu_ps(p + i * pc + s, m, _mm512_castps256_ps512(r[i]));
                RB_REP8(RB_ST)
#undef RB_ST
            }
            continue;
        }
        for (int64_t sub = s0; sub < s1; sub += RB_STAGE) {
            const int64_t wall = rb_min(RB_STAGE, s1 - sub);
            const float *qs = q + sub * 8;
            for (int64_t t = 0; t < wall; t += 8) {
                const int64_t w = rb_min(8, wall - t);
                if (w == 8) {
#define RB_LD(i) r[i] = _mm256_loadu_ps(qs + (t + i) * 8);
                    RB_REP8(RB_LD)
#undef RB_LD
                } else {
#define RB_LD(i) r[i] = i < w ? _mm256_loadu_ps(qs + (t + i) * 8) : _mm256_setzero_ps();
                    RB_REP8(RB_LD)
#undef RB_LD
                }
                rb_tr8(r);
#define RB_ST(i) _mm256_store_ps(tmp + i * RB_STAGE + t, r[i]);
                RB_REP8(RB_ST)
#undef RB_ST
            }
            for (int64_t i = 0; i < nc; i++) rb_row_out(p + i * pc + sub, tmp + i * RB_STAGE, wall);
        }
    }
}
#endif /* __AVX512F__ */

/* ------------------------------------------------------------------ entry points */
typedef enum { RB_SCALAR, RB_CHANNELS_PACKED, RB_PIXELS_PACKED } rb_path;

/* Picks the path for the plain strides; normalises a stride that no index
 * multiplies (pc when C == 1, ps when S == 1) to 1. */
static rb_path rb_choose(rb_job *j) {
#if defined(__AVX512F__)
    if (j->B != 8 && j->B != 16) return RB_SCALAR;
    bool cl = j->pc == 1 || j->C == 1, cf = j->ps == 1 || j->S == 1;
    if (cl && cf) { /* both fit (C == 1, S == 1, or an overlapping source) */
        if (j->C >= j->S)
            cf = false;
        else
            cl = false;
    }
    if (cl) {
        j->pc = 1;
        return RB_CHANNELS_PACKED;
    }
    if (cf) {
        j->ps = 1;
        return RB_PIXELS_PACKED;
    }
#else
    (void)j;
#endif
    return RB_SCALAR;
}

static void rb_dispatch(rb_job *j, int64_t N, bool to_blocked) {
    if (N <= 0 || j->C <= 0 || j->S <= 0) return;
    j->CB = (j->C + j->B - 1) / j->B;
    const rb_path path = rb_choose(j);
#if defined(__AVX512F__)
    const int64_t cbb = j->CB * j->B; /* channels with the pad lanes */
    if (path == RB_CHANNELS_PACKED) {
        j->sc = RB_ITEM / cbb > 1 ? RB_ITEM / cbb : 1;
        j->ns = (j->S + j->sc - 1) / j->sc;
        mft__range_fn fn = j->B == 16 ? (to_blocked ? rb_nhwc_to16 : rb_nhwc_from16)
                                      : (to_blocked ? rb_nhwc_to8 : rb_nhwc_from8);
        rb_run(N * j->ns, j->sc * cbb, fn, j);
        return;
    }
    if (path == RB_PIXELS_PACKED) {
        const int64_t want = (RB_ITEM / j->B + 15) / 16 * 16;
        j->sc = rb_min(want, (j->S + 15) / 16 * 16);
        j->ns = (j->S + j->sc - 1) / j->sc;
        mft__range_fn fn = j->B == 16 ? (to_blocked ? rb_nchw_to16 : rb_nchw_from16)
                                      : (to_blocked ? rb_nchw_to8 : rb_nchw_from8);
        rb_run(N * j->CB * j->ns, j->sc * j->B, fn, j);
        return;
    }
#else
    (void)path;
#endif
    rb_run(N * j->CB, j->S * j->B, to_blocked ? rb_scalar_to : rb_scalar_from, j);
}

void mft__reorder_to_blocked_f32(const float *src, int64_t pn, int64_t pc, int64_t ps, float *dst,
                                 int64_t bn, int64_t bc1, int B, int64_t N, int64_t C, int64_t S) {
    if (B < 1) return;
    rb_job j = {src, dst, pn, pc, ps, bn, bc1, B, C, S, 0, 0, 0};
    rb_dispatch(&j, N, true);
}

void mft__reorder_from_blocked_f32(const float *src, int64_t bn, int64_t bc1, int B, float *dst,
                                   int64_t pn, int64_t pc, int64_t ps, int64_t N, int64_t C,
                                   int64_t S) {
    if (B < 1) return;
    rb_job j = {src, dst, pn, pc, ps, bn, bc1, B, C, S, 0, 0, 0};
    rb_dispatch(&j, N, false);
}
