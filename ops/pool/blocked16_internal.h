/* ops/pool/blocked16_internal.h — what the files of the native nChw16c
 * (MFT_NCHW16C) F32 pooling kernels share: the 16-lane vectors (bv_*, bi_*,
 * blk_keep), the job of a call (b16_job), the whole-window helpers of the
 * forward (Note [nChw16c interior runs]), the row rings of the gathered
 * backward (Note [nChw16c row rings]) and the functions that cross files.
 * Included by the blocked16_*.c files only.
 *
 * The kernels, forward and backward: max_pool2d and relu_max_pool2d (values
 * and indices), their backward (max_pool2d_backward, which adaptive max
 * pooling does not reach: its entry keeps the fallback), avg_pool2d and its
 * backward, adaptive_avg_pool2d (global average pooling included) and its
 * backward. One file per algorithm:
 *   blocked16_max.c           max and relu max forward: the general loop,
 *                             the interior runs, the 2x2 path (Note
 *                             [nChw16c 2x2 max forward])
 *   blocked16_max_backward.c  max backward: plane scatter, gathered rows,
 *                             row rings
 *   blocked16_tiled.c         the tiled backward of max and avg (windows
 *                             that tile the input)
 *   blocked16_avg.c           avg forward (the general loop, the interior
 *                             runs) and adaptive avg forward
 *   blocked16_avg_backward.c  avg and adaptive avg backward: gathered rows,
 *                             row rings
 *   blocked16_common.c        the job of a call, the rings' allocation and
 *                             column tables
 *
 * Layout (docs/spec.md §7): logical N,C,H,W; memory N, C1 = ceil(C/16), H, W,
 * 16, packed. Element (n, c, h, w) sits at ((n*C1 + c/16)*H + h)*W + w)*16 +
 * c%16, so one window tap of 16 channels is one 64-byte vector and each
 * per-channel operation is one vector operation. A plane q = n*C1 + cb is
 * one (n, channel block) image of H*W vectors. The indices of max pooling
 * are I64 nChw16c too (h*W + w within the plane, as the plain kernels'),
 * computed natively; the backward reads them in that layout.
 *
 * Pad lanes (c in [C, C1*16)) are zero in every input and are written zero
 * in every output (values and indices): empty max windows (-inf), relu's -1
 * indices and negative divisor_override (-0.0) would otherwise leak there.
 *
 * Semantics are those of reference.c (pool2d.c states them): max replaces
 * on greater-or-NaN, windows visited row by row; avg sums the clipped
 * window in window order and divides by the divisor. Forward sums follow
 * the reference's order per channel, so avg and max forward equal the
 * reference bitwise; the backward sums go over the outputs in ascending
 * order times 1/divisor, within a few ulps of the plain kernels.
 *
 * Windows that tile the input take a shorter backward (the tiled backward
 * of blocked16_tiled.c: one term per element, the gather's bits). The
 * forward runs the whole windows of a row unrolled (Note [nChw16c interior runs]); the
 * gathered backward keeps the output rows it reads prepared in a ring
 * (Note [nChw16c row rings]); edges and the cases those do not cover keep
 * the general loops, with the same results.
 *
 * Work splits over rows (forward: (plane, oh); gathered backward: (plane,
 * ih)) or planes (max backward's scatter stays within its plane), so the results never
 * depend on the thread count. AVX-512 builds use __m512 / __mmask16; other
 * builds run the same code on 16-float structs (bv_* below). */
#ifndef MFT_OPS_POOL_BLOCKED16_INTERNAL_H
#define MFT_OPS_POOL_BLOCKED16_INTERNAL_H

#include "pool_internal.h"

/* ---------------------------------------------------------------- 16-lane vectors */
#if POOL_HAVE_Z16
typedef __m512 bv;
typedef __mmask16 bm;
static inline bv bv_ld(const float *p) { return _mm512_loadu_ps(p); }
static inline void bv_st(float *p, bv v) { _mm512_storeu_ps(p, v); }
static inline bv bv_set1(float f) { return _mm512_set1_ps(f); }
static inline bv bv_add(bv a, bv b) { return _mm512_add_ps(a, b); }
static inline bv bv_mul(bv a, bv b) { return _mm512_mul_ps(a, b); }
static inline bv bv_div(bv a, bv b) { return _mm512_div_ps(a, b); }
/* lanes where v replaces the running max m: v > m or v is NaN */
static inline bm bv_newmax(bv v, bv m) {
    return (bm)(_mm512_cmp_ps_mask(v, m, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q));
}
static inline bv bv_blend(bm k, bv a, bv b) { return _mm512_mask_blend_ps(k, a, b); }
static inline bv bv_keep(bm k, bv a) { return _mm512_maskz_mov_ps(k, a); }
static inline bm bv_le0(bv a) { return _mm512_cmp_ps_mask(a, _mm512_setzero_ps(), _CMP_LE_OQ); }
static inline bm bv_lt0(bv a) { return _mm512_cmp_ps_mask(a, _mm512_setzero_ps(), _CMP_LT_OQ); }
/* in-plane positions as int32 lanes (the entry checked H*W fits), widened
 * to I64 on store */
typedef __m512i bi;
static inline bi bi_set1(int64_t v) { return _mm512_set1_epi32((int32_t)v); }
static inline bi bi_blend(bm k, bi a, int64_t v) {
    return _mm512_mask_blend_epi32(k, a, _mm512_set1_epi32((int32_t)v));
}
static inline bi bi_add1(bi a, int64_t v) {
    return _mm512_add_epi32(a, _mm512_set1_epi32((int32_t)v));
}
static inline void bi_st(int64_t *p, bm keep, bi a) {
    const __m512i lo = _mm512_cvtepi32_epi64(_mm512_castsi512_si256(a));
    const __m512i hi = _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(a, 1));
    _mm512_storeu_si512((void *)p, _mm512_maskz_mov_epi64((__mmask8)keep, lo));
    _mm512_storeu_si512((void *)(p + 8), _mm512_maskz_mov_epi64((__mmask8)(keep >> 8), hi));
}
/* s + g in the lanes whose index ind equals i */
static inline bv bv_add_eq(bv s, const float *g, const int64_t *ind, int64_t i) {
    const __m512i t = _mm512_set1_epi64(i);
    const bm k =
        (bm)(_mm512_cmpeq_epi64_mask(_mm512_loadu_si512((const void *)ind), t) |
             ((unsigned)_mm512_cmpeq_epi64_mask(_mm512_loadu_si512((const void *)(ind + 8)), t)
              << 8));
    return _mm512_mask_add_ps(s, k, s, _mm512_loadu_ps(g));
}
#else
typedef struct bv {
    float f[16];
} bv;
typedef uint32_t bm;
static inline bv bv_ld(const float *p) {
    bv v;
    memcpy(v.f, p, sizeof v.f);
    return v;
}
static inline void bv_st(float *p, bv v) { memcpy(p, v.f, sizeof v.f); }
static inline bv bv_set1(float f) {
    bv v;
    for (int l = 0; l < 16; l++) v.f[l] = f;
    return v;
}
#define BV_BINOP(name, op)                                                                         \
    static inline bv name(bv a, bv b) {                                                            \
        for (int l = 0; l < 16; l++) a.f[l] = a.f[l] op b.f[l];                                    \
        return a;                                                                                  \
    }
BV_BINOP(bv_add, +)
BV_BINOP(bv_mul, *)
BV_BINOP(bv_div, /)
#undef BV_BINOP
static inline bm bv_newmax(bv v, bv m) {
    bm k = 0;
    for (int l = 0; l < 16; l++)
        if (v.f[l] > m.f[l] || v.f[l] != v.f[l]) k |= 1u << l;
    return k;
}
static inline bv bv_blend(bm k, bv a, bv b) {
    for (int l = 0; l < 16; l++)
        if (k >> l & 1u) a.f[l] = b.f[l];
    return a;
}
static inline bv bv_keep(bm k, bv a) {
    for (int l = 0; l < 16; l++)
        if (!(k >> l & 1u)) a.f[l] = 0.0f;
    return a;
}
static inline bm bv_le0(bv a) {
    bm k = 0;
    for (int l = 0; l < 16; l++)
        if (a.f[l] <= 0.0f) k |= 1u << l;
    return k;
}
static inline bm bv_lt0(bv a) {
    bm k = 0;
    for (int l = 0; l < 16; l++)
        if (a.f[l] < 0.0f) k |= 1u << l;
    return k;
}
typedef struct bi {
    int64_t i[16];
} bi;
static inline bi bi_set1(int64_t v) {
    bi a;
    for (int l = 0; l < 16; l++) a.i[l] = v;
    return a;
}
static inline bi bi_blend(bm k, bi a, int64_t v) {
    for (int l = 0; l < 16; l++)
        if (k >> l & 1u) a.i[l] = v;
    return a;
}
static inline bi bi_add1(bi a, int64_t v) {
    for (int l = 0; l < 16; l++) a.i[l] += v;
    return a;
}
static inline void bi_st(int64_t *p, bm keep, bi a) {
    for (int l = 0; l < 16; l++) p[l] = keep >> l & 1u ? a.i[l] : 0;
}
static inline bv bv_add_eq(bv s, const float *g, const int64_t *ind, int64_t i) {
    for (int l = 0; l < 16; l++)
        if (ind[l] == i) s.f[l] += g[l];
    return s;
}
#endif

/* The lanes of channel block cb holding channels (< C). */
static inline bm blk_keep(int64_t C, int64_t cb) {
    const int64_t n = C - cb * 16;
    return n >= 16 ? (bm)0xFFFF : (bm)((1u << n) - 1u);
}

/* ---------------------------------------------------------------- the work
 * Rows are (plane, output row) forward and (plane, grad_x row) backward,
 * planes in memory order; the columns' window geometry, the same for every
 * row, sits in tables of PM_TAB entries filled once per range when a row
 * fits (else per row and chunk of PM_TAB columns). */
typedef struct b16_job {
    const mft_pool2d_params *p;
    const float *x;                 /* forward input, or grad_out */
    float *y;                       /* forward output, or grad_x */
    int64_t *yi;                    /* max forward indices */
    const int64_t *ind;             /* max backward indices */
    int64_t N, C, C1, H, W, OH, OW; /* H, W: the input's (grad_x's) */
    bool relu;
} b16_job;

/* x: the input-sized tensor (forward input, grad_x), y: the output-sized one
 * (blocked16_common.c) */
b16_job mft__pool_b16_job_of(const mft_kernel_args *a, bool fwd);

/* ---------------------------------------------------------------- interior runs
 * Note [nChw16c interior runs]: per output the general loops (b16_max_rows
 * of blocked16_max.c, b16_avg_rows of blocked16_avg.c) work out the window
 * (bounds, clipping, divisor) for one 16-channel vector, where the NHWC
 * kernels do it once for all C (4 vectors at C = 64); on
 * overlapping windows that left the nChw16c forward at 0.6-0.9x NHWC
 * (8x64x56x56, 3x3 / stride 1 avg and 3x3 / stride 2 pad 1 max). An output
 * row whose windows are whole along H (no padding or clipping) splits into
 * its edge columns, which keep the general per-output path, and the run of
 * columns whose windows are whole (whole_range), where every window has all
 * kh x kw taps at fixed offsets: the taps are unrolled (2x2 / 2, 3x3 / 1 and
 * 3x3 / 2 specialised, other windows in a loop without bounds), the tap
 * offsets of max are constant vectors added to the run's position once per
 * output, and avg's divisor is one constant (a power of two: a multiply by
 * its exact reciprocal, the same bits as the division). The rows the next
 * output row adds are prefetched while the run goes (as in Note [nChw16c 2x2
 * max forward]). Values, indices and sums are those of the general loop:
 * the same taps in the same order, and max starts at its first tap (the
 * general loop's first step from -inf gives the same value and position).
 * Measured (8x64x56x56, 1 thread, a loaded machine; bench/README.md):
 * NHWC time / nChw16c time went from 0.61 to 1.69 for the avg 3x3 / 1
 * forward, 0.94 to 1.25 for the max 3x3 / 2 pad 1 forward, and 0.69 to
 * 1.12 for the avg 2x2 / 2 forward on 32x64x28x28. */

/* Outputs [*a, *b) along a dim whose window (start o*s - pad, span ext =
 * (k - 1) * dilation + 1) lies whole inside [0, in). */
static inline void whole_range(int64_t out, int64_t in, int64_t ext, int64_t s, int64_t pad,
                               int64_t *a, int64_t *b) {
    const int64_t lo = (pad + s - 1) / s;                           /* o*s >= pad */
    int64_t hi = in + pad - ext < 0 ? 0 : (in + pad - ext) / s + 1; /* o*s - pad + ext <= in */
    if (hi > out) hi = out;
    *a = lo < hi ? lo : hi;
    *b = hi;
}

/* The edge columns of an output row whose run of whole windows is
 * [ra, rb) (empty: every column): the first, and the one after ow. */
static inline int64_t edge_first(int64_t ra, int64_t rb) { return ra == 0 ? rb : 0; }
static inline int64_t edge_next(int64_t ow, int64_t ra, int64_t rb) {
    return ow + 1 == ra ? rb : ow + 1;
}

/* The rows [x + W*16*a, a < nr) of the next output row, at the columns of
 * one output's sw columns (a prefetch past the end of x does not fault). */
static inline __attribute__((always_inline)) void run_prefetch(const float *x, int64_t W,
                                                               int64_t nr, int64_t sw) {
    for (int64_t a = 0; a < nr; a++)
        for (int64_t c = 0; c < sw; c++) __builtin_prefetch(x + (a * W + c) * 16);
}

/* ---------------------------------------------------------------- row rings
 * Note [nChw16c row rings]: the gathered backward passes (max, avg and
 * adaptive avg over windows that overlap) give each grad_x element the
 * terms of the outputs whose windows hold it, in ascending (oh, ow) order.
 * Per term the general loops (b16_max_bwd_rows, b16_gather_rows) converted
 * the index to compare from I64 (two loads, two compares) or formed
 * grad_out * 1/divisor (a broadcast and a multiply) again for each element
 * reading that output, and ran term loops of 1-3 trips per element. Here a
 * ring of the output rows one input row reads (nring: their most over the
 * rows) holds each row prepared once per plane: max its indices as
 * saturated int32 (an index past INT32_MAX stays past every position; the
 * caller checked H*W fits) next to a copy of its grad_out, avg the products
 * grad_out * 1/divisor. Every element then runs the same nh x nw terms
 * (the most rows and columns any element has), the missing ones pointing at
 * a dummy column (past the row's end) or dummy row: max indices -1 there,
 * which match no position, so the masked add leaves the sum alone; avg
 * products +0, and a sum that starts at +0 is never -0, so adding +0 leaves
 * it alone too. 3x3 windows of stride 1 and 2 unroll their terms. The real
 * terms, their order and their rounding are the general loops' (a product
 * is the same whether formed once or per element), so the results are too.
 * Measured (8x64x56x56, 1 thread, a loaded machine; bench/README.md):
 * NHWC time / nChw16c time went from 0.64 to 1.04 for the max 3x3 / 2 pad 1
 * backward and from 0.46 to 1.38 for the avg 3x3 / 1 backward. Tried and
 * dropped: four planes per work item sharing the term loop (as NHWC shares
 * it over a pixel's channels; no gain, the avg slower), padding max's rows
 * with dummy rows too (3x3 / 2: 4 terms per element where 2.25 are real),
 * and prefetching the next output row's indices (no gain). */
#define B16_RING 16 /* most ring rows (nh) */
#define B16_COLS 8  /* most columns per element (nw) */

typedef struct b16_ring {
    char *buf; /* n rows, then a dummy row */
    size_t row_bytes;
    int n;
    int64_t tag[B16_RING]; /* the plane-wide output row (q*OH + oh) each slot holds */
} b16_ring;

/* A ring of n rows of row_bytes each and a dummy row, its tags cleared;
 * false (nothing allocated) when n is outside [1, B16_RING] or out of
 * memory (blocked16_common.c) */
bool mft__pool_b16_ring_init(b16_ring *g, int64_t n, size_t row_bytes);

/* The slot of output row tag; *fill: whether the caller must (re)fill it.
 * The rows one input row reads are consecutive and at most n, so they hold
 * distinct slots. */
static inline void *ring_row(b16_ring *g, int64_t tag, bool *fill) {
    const int s = (int)(tag % g->n);
    *fill = g->tag[s] != tag;
    g->tag[s] = tag;
    return g->buf + (size_t)s * g->row_bytes;
}

static inline void *ring_dummy(const b16_ring *g) { return g->buf + (size_t)g->n * g->row_bytes; }

/* The columns of each element: cols[iw * nw + b] = tw0[iw] + b while below
 * tw1[iw], else the dummy column OW (blocked16_common.c). */
void mft__pool_b16_ring_cols(const int64_t *tw0, const int64_t *tw1, int64_t W, int64_t OW,
                             int64_t nw, int32_t *cols);

typedef struct b16_rjob {
    const b16_job *j;
    bool adaptive;    /* avg: adaptive windows */
    const float *inv; /* avg: OH*OW factors */
    int64_t nh, nw;   /* the terms per element: most rows, columns */
} b16_rjob;

/* ---------------------------------------------------------------- blocked16_tiled.c
 * The tiled backward: whether the windows (adaptive or those of j->p) tile
 * the input, *kh, *kw their size; and the backward over such windows, avg
 * (inv: the OH*OW factors 1/divisor) or max (inv NULL: j->ind). */
bool mft__pool_b16_tiles(const b16_job *j, bool adaptive, int64_t *kh, int64_t *kw);
void mft__pool_b16_tiled(const b16_job *j, const float *inv, int64_t kh, int64_t kw);

#endif
