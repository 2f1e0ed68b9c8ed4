/* ops/pool/blocked16.c — the native nChw16c (MFT_NCHW16C) F32 pooling
 * kernels, forward and backward: max_pool2d and relu_max_pool2d (values and
 * indices), their backward (max_pool2d_backward, which adaptive max pooling
 * does not reach: its entry keeps the fallback), avg_pool2d and its backward,
 * adaptive_avg_pool2d (global average pooling included) and its backward.
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
 * below: one term per element, the gather's bits). The forward runs the
 * whole windows of a row unrolled (Note [nChw16c interior runs]); the
 * gathered backward keeps the output rows it reads prepared in a ring
 * (Note [nChw16c row rings]); edges and the cases those do not cover keep
 * the general loops, with the same results.
 *
 * Work splits over rows (forward: (plane, oh); gathered backward: (plane,
 * ih)) or planes (max backward's scatter stays within its plane), so the results never
 * depend on the thread count. AVX-512 builds use __m512 / __mmask16; other
 * builds run the same code on 16-float structs (bv_* below). */
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
static inline bi bi_add1(bi a, int64_t v) { return _mm512_add_epi32(a, _mm512_set1_epi32((int32_t)v)); }
static inline void bi_st(int64_t *p, bm keep, bi a) {
    const __m512i lo = _mm512_cvtepi32_epi64(_mm512_castsi512_si256(a));
    const __m512i hi = _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(a, 1));
    _mm512_storeu_si512((void *)p, _mm512_maskz_mov_epi64((__mmask8)keep, lo));
    _mm512_storeu_si512((void *)(p + 8), _mm512_maskz_mov_epi64((__mmask8)(keep >> 8), hi));
}
/* s + g in the lanes whose index ind equals i */
static inline bv bv_add_eq(bv s, const float *g, const int64_t *ind, int64_t i) {
    const __m512i t = _mm512_set1_epi64(i);
    const bm k = (bm)(_mm512_cmpeq_epi64_mask(_mm512_loadu_si512((const void *)ind), t) |
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
#define BV_BINOP(name, op)                                                                    \
    static inline bv name(bv a, bv b) {                                                        \
        for (int l = 0; l < 16; l++) a.f[l] = a.f[l] op b.f[l];                                \
        return a;                                                                              \
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
    const float *x; /* forward input, or grad_out */
    float *y;       /* forward output, or grad_x */
    int64_t *yi;    /* max forward indices */
    const int64_t *ind; /* max backward indices */
    int64_t N, C, C1, H, W, OH, OW; /* H, W: the input's (grad_x's) */
    bool relu;
} b16_job;

/* x: the input-sized tensor (forward input, grad_x), y: the output-sized one */
static b16_job b16_job_of(const mft_kernel_args *a, bool fwd) {
    const mft_tensor *x = fwd ? a->inputs[0] : a->outputs[0];
    const mft_tensor *y = fwd ? a->outputs[0] : a->inputs[0];
    b16_job j;
    memset(&j, 0, sizeof j);
    j.p = a->params;
    j.x = (const float *)(const void *)mft__tensor_ptr(a->inputs[0]);
    j.y = (float *)(void *)mft__tensor_ptr(a->outputs[0]);
    j.N = x->sizes[0];
    j.C = x->sizes[1];
    j.C1 = (j.C + 15) / 16;
    j.H = x->sizes[2];
    j.W = x->sizes[3];
    j.OH = y->sizes[2];
    j.OW = y->sizes[3];
    return j;
}

/* ---------------------------------------------------------------- interior runs
 * Note [nChw16c interior runs]: per output the general loops below work out
 * the window (bounds, clipping, divisor) for one 16-channel vector, where
 * the NHWC kernels do it once for all C (4 vectors at C = 64); on
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
    const int64_t lo = (pad + s - 1) / s; /* o*s >= pad */
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

/* n max outputs of one row whose windows are whole: window t's first tap at
 * x + t*sw*16, position pos + t*sw; taps kh x kw, dilation dh, dw; the nr
 * rows below the windows (kh*dh rows down) prefetched. */
static inline __attribute__((always_inline)) void
b16_max_run(const float *x, int64_t W, int64_t pos, int64_t n, float *y, int64_t *yi, bm keep,
            bool relu, int64_t kh, int64_t kw, int64_t sw, int64_t dh, int64_t dw, int64_t nr) {
    for (int64_t t = 0; t < n; t++) {
        const float *px = x + t * sw * 16;
        run_prefetch(px + kh * dh * W * 16, W, nr, sw);
        bv m = bv_ld(px);
        bi off = bi_set1(0);
        for (int64_t a = 0; a < kh; a++)
            for (int64_t b = 0; b < kw; b++) {
                if (a == 0 && b == 0) continue;
                const int64_t o = a * dh * W + b * dw;
                const bv v = bv_ld(px + o * 16);
                const bm k = bv_newmax(v, m);
                m = bv_blend(k, m, v);
                off = bi_blend(k, off, o);
            }
        bi idx = bi_add1(off, pos + t * sw);
        if (relu) { /* RELU_CLAMP per lane */
            idx = bi_blend(bv_le0(m), idx, -1);
            m = bv_keep((bm)~bv_lt0(m), m);
        }
        bv_st(y + t * 16, bv_keep(keep, m));
        bi_st(yi + t * 16, keep, idx);
    }
}

/* n avg outputs of one row whose windows are whole (kh x kw taps, window t
 * at x + t*sw*16): the sum from 0 in window order, divided by div, or
 * multiplied by inv when div is a power of two (inv = 1/div exactly). */
static inline __attribute__((always_inline)) void
b16_avg_run(const float *x, int64_t W, int64_t n, float *y, bm keep, float div, float inv,
            int64_t kh, int64_t kw, int64_t sw, int64_t nr) {
    const bv vd = bv_set1(div), vi = bv_set1(inv);
    for (int64_t t = 0; t < n; t++) {
        const float *px = x + t * sw * 16;
        run_prefetch(px + kh * W * 16, W, nr, sw);
        bv s = bv_set1(0.0f);
        for (int64_t a = 0; a < kh; a++)
            for (int64_t b = 0; b < kw; b++) s = bv_add(s, bv_ld(px + (a * W + b) * 16));
        bv_st(y + t * 16, bv_keep(keep, inv != 0.0f ? bv_mul(s, vi) : bv_div(s, vd)));
    }
}

/* ---------------------------------------------------------------- max forward */
/* One max output by the general loop: rows [h0, h1) step dh, columns
 * [w0, w1) step dw of plane xb. */
static inline void b16_max_px(const float *xb, int64_t W, int64_t h0, int64_t h1, int64_t dh,
                              int64_t w0, int64_t w1, int64_t dw, bool relu, bm keep, float *y,
                              int64_t *yi) {
    bv m = bv_set1(-INFINITY);
    bi idx = bi_set1(h0 * W + w0);
    for (int64_t ih = h0; ih < h1; ih += dh)
        for (int64_t iw = w0; iw < w1; iw += dw) {
            const bv v = bv_ld(xb + (ih * W + iw) * 16);
            const bm k = bv_newmax(v, m);
            m = bv_blend(k, m, v);
            idx = bi_blend(k, idx, ih * W + iw);
        }
    if (relu) { /* RELU_CLAMP per lane */
        idx = bi_blend(bv_le0(m), idx, -1);
        m = bv_keep((bm)~bv_lt0(m), m);
    }
    bv_st(y, bv_keep(keep, m));
    bi_st(yi, keep, idx);
}

/* The run of whole windows [wa, wb) of output row oh (window rows from h0). */
static void b16_max_whole(const b16_job *j, const float *xb, int64_t h0, int64_t wa, int64_t wb,
                          float *yb, int64_t *ib, bm keep) {
    const mft_pool2d_params *p = j->p;
    const int64_t W = j->W, kh = p->kernel[0], kw = p->kernel[1], sw = p->stride[1];
    const int64_t dh = p->dilation[0], dw = p->dilation[1];
    const int64_t w0 = wa * sw - p->padding[1], n = wb - wa;
    /* the next output row's new rows (at most its stride, within its window) */
    const int64_t nr = p->stride[0] < kh * dh ? p->stride[0] : kh * dh;
    const float *x = xb + (h0 * W + w0) * 16;
    const int64_t pos = h0 * W + w0;
    float *y = yb + wa * 16;
    int64_t *yi = ib + wa * 16;
    if (dh == 1 && dw == 1) {
        if (kh == 3 && kw == 3 && sw == 2)
            { b16_max_run(x, W, pos, n, y, yi, keep, j->relu, 3, 3, 2, 1, 1, nr); return; }
        if (kh == 3 && kw == 3 && sw == 1)
            { b16_max_run(x, W, pos, n, y, yi, keep, j->relu, 3, 3, 1, 1, 1, nr); return; }
        if (kh == 2 && kw == 2 && sw == 2)
            { b16_max_run(x, W, pos, n, y, yi, keep, j->relu, 2, 2, 2, 1, 1, nr); return; }
    }
    b16_max_run(x, W, pos, n, y, yi, keep, j->relu, kh, kw, sw, dh, dw, nr);
}

static void b16_max_rows(void *ctx, int64_t begin, int64_t end) {
    const b16_job *j = ctx;
    const mft_pool2d_params *p = j->p;
    const int64_t H = j->H, W = j->W, OH = j->OH, OW = j->OW;
    const int64_t dh = p->dilation[0], dw = p->dilation[1];
    int64_t ha, hb, wa, wb;
    whole_range(OH, H, (p->kernel[0] - 1) * dh + 1, p->stride[0], p->padding[0], &ha, &hb);
    whole_range(OW, W, (p->kernel[1] - 1) * dw + 1, p->stride[1], p->padding[1], &wa, &wb);
    for (int64_t r = begin; r < end; r++) {
        const int64_t q = r / OH, oh = r % OH;
        const bm keep = blk_keep(j->C, q % j->C1);
        const float *xb = j->x + q * H * W * 16;
        float *yb = j->y + r * OW * 16;
        int64_t *ib = j->yi + r * OW * 16;
        int64_t h0, h1;
        max_window(oh, H, p->kernel[0], p->stride[0], p->padding[0], dh, &h0, &h1);
        const int64_t ra = oh >= ha && oh < hb ? wa : 0, rb = oh >= ha && oh < hb ? wb : 0;
        if (ra < rb) b16_max_whole(j, xb, h0, ra, rb, yb, ib, keep);
        for (int64_t ow = edge_first(ra, rb); ow < OW; ow = edge_next(ow, ra, rb)) {
            int64_t w0, w1;
            max_window(ow, W, p->kernel[1], p->stride[1], p->padding[1], dw, &w0, &w1);
            b16_max_px(xb, W, h0, h1, dh, w0, w1, dw, j->relu, keep, yb + ow * 16, ib + ow * 16);
        }
    }
}

#if POOL_HAVE_Z16
/* Note [nChw16c 2x2 max forward]: 2x2 windows, stride 2, no padding or
 * dilation, every window whole (a CNN's downsampling pool). Each output
 * row reads its two input rows; per output pixel the four taps are four
 * vector loads visited in the general loop's order (row by row), the first
 * taken as the running max (the general loop's first step gives the same
 * value and index: -inf is replaced by anything but -inf, whose index is
 * the same first position), the other three compared and blended, their
 * int32 positions kept as four vectors stepped by 2 along the row. The
 * general loop (b16_max_rows) spent its time on its window bounds and
 * position broadcasts (1.47 ms against NHWC's 1.16 ms on 64x32x28x28 in a
 * Fashion-MNIST step). Same values and indices bit for bit. */
static void b16_max22_rows(void *ctx, int64_t begin, int64_t end) {
    const b16_job *j = ctx;
    const int64_t H = j->H, W = j->W, OH = j->OH, OW = j->OW;
    const __m512i two = _mm512_set1_epi32(2), neg1 = _mm512_set1_epi32(-1);
    for (int64_t r = begin; r < end; r++) {
        const int64_t q = r / OH, oh = r % OH;
        const bm keep = blk_keep(j->C, q % j->C1);
        const float *x0 = j->x + (q * H + 2 * oh) * W * 16, *x1 = x0 + W * 16;
        float *yb = j->y + r * OW * 16;
        int64_t *ib = j->yi + r * OW * 16;
        const int32_t p0 = (int32_t)(2 * oh * W);
        __m512i p00 = _mm512_set1_epi32(p0), p01 = _mm512_set1_epi32(p0 + 1);
        __m512i p10 = _mm512_set1_epi32(p0 + (int32_t)W), p11 = _mm512_set1_epi32(p0 + (int32_t)W + 1);
        for (int64_t ow = 0; ow < OW; ow++) {
            /* the next output row's pixels (the hardware prefetcher lags
             * on rows read from L3, as max_nhwc.c found); past the end of
             * x a prefetch does not fault */
            __builtin_prefetch(x0 + 2 * W * 16 + ow * 32);
            __builtin_prefetch(x0 + 2 * W * 16 + ow * 32 + 16);
            __builtin_prefetch(x1 + 2 * W * 16 + ow * 32);
            __builtin_prefetch(x1 + 2 * W * 16 + ow * 32 + 16);
            const bv v00 = bv_ld(x0 + ow * 32), v01 = bv_ld(x0 + ow * 32 + 16);
            const bv v10 = bv_ld(x1 + ow * 32), v11 = bv_ld(x1 + ow * 32 + 16);
            bv m = v00;
            __m512i idx = p00;
            bm k = bv_newmax(v01, m);
            m = bv_blend(k, m, v01);
            idx = _mm512_mask_blend_epi32(k, idx, p01);
            k = bv_newmax(v10, m);
            m = bv_blend(k, m, v10);
            idx = _mm512_mask_blend_epi32(k, idx, p10);
            k = bv_newmax(v11, m);
            m = bv_blend(k, m, v11);
            idx = _mm512_mask_blend_epi32(k, idx, p11);
            if (j->relu) { /* RELU_CLAMP per lane */
                idx = _mm512_mask_blend_epi32(bv_le0(m), idx, neg1);
                m = bv_keep((bm)~bv_lt0(m), m);
            }
            bv_st(yb + ow * 16, bv_keep(keep, m));
            bi_st(ib + ow * 16, keep, idx);
            p00 = _mm512_add_epi32(p00, two);
            p01 = _mm512_add_epi32(p01, two);
            p10 = _mm512_add_epi32(p10, two);
            p11 = _mm512_add_epi32(p11, two);
        }
    }
}

/* the windows are those of Note [nChw16c 2x2 max forward] */
static bool b16_max22(const b16_job *j) {
    const mft_pool2d_params *p = j->p;
    for (int d = 0; d < 2; d++)
        if (p->kernel[d] != 2 || p->stride[d] != 2 || p->padding[d] != 0 || p->dilation[d] != 1)
            return false;
    return 2 * j->OH <= j->H && 2 * j->OW <= j->W;
}
#endif

static void b16_max_forward(const mft_kernel_args *a, bool relu) {
    b16_job j = b16_job_of(a, true);
    j.yi = (int64_t *)(void *)mft__tensor_ptr(a->outputs[1]);
    j.relu = relu;
#if POOL_HAVE_Z16
    if (b16_max22(&j)) {
        mft__parallel_for(0, j.N * j.C1 * j.OH, pool_grain(j.OW * 4 * 16), b16_max22_rows, &j);
        return;
    }
#endif
    const int64_t work = j.OW * j.p->kernel[0] * j.p->kernel[1] * 16;
    mft__parallel_for(0, j.N * j.C1 * j.OH, pool_grain(work), b16_max_rows, &j);
}

void mft__pool_max_pool2d_nchw16c(const mft_kernel_args *a) { b16_max_forward(a, false); }
void mft__pool_relu_max_pool2d_nchw16c(const mft_kernel_args *a) { b16_max_forward(a, true); }

/* ---------------------------------------------------------------- max backward
 * With the forward's windows (mft_max_pool2d_backward_windows, the tape) and
 * none of them empty: gathered per grad_x row, each element the sum, over
 * the outputs whose window span holds it (ascending), of grad_out where the
 * index names it. Else each plane scatters grad_out into its zeroed grad_x
 * plane, outputs ascending; indices outside [0, H*W) (relu's -1) are
 * skipped. The same sums in the same order either way. */
static void b16_max_bwd_planes(void *ctx, int64_t begin, int64_t end) {
    const b16_job *j = ctx;
    const int64_t HW = j->H * j->W, OHW = j->OH * j->OW;
    for (int64_t q = begin; q < end; q++) {
        const int64_t nl = j->C - (q % j->C1) * 16 < 16 ? j->C - (q % j->C1) * 16 : 16;
        float *gx = j->y + q * HW * 16;
        const float *go = j->x + q * OHW * 16;
        const int64_t *ind = j->ind + q * OHW * 16;
        memset(gx, 0, (size_t)(HW * 16) * sizeof(float));
        for (int64_t o = 0; o < OHW; o++)
            for (int64_t l = 0; l < nl; l++) {
                const int64_t i = ind[o * 16 + l];
                if (i >= 0 && i < HW) gx[i * 16 + l] += go[o * 16 + l];
            }
    }
}

/* Outputs [*o0, *o1) along a dim whose max window span [o*s - p, o*s - p +
 * (k-1)*d] holds input i. */
static inline void max_span_inv(int64_t i, int64_t out, int64_t k, int64_t s, int64_t pad,
                                int64_t d, int64_t *o0, int64_t *o1) {
    int64_t a = pool_div_floor(i + pad - (k - 1) * d + s - 1, s);
    int64_t b = pool_div_floor(i + pad, s) + 1;
    *o0 = a < 0 ? 0 : a;
    *o1 = b > out ? out : b;
    if (*o1 < *o0) *o1 = *o0;
}

static void b16_max_bwd_rows(void *ctx, int64_t begin, int64_t end) {
    const b16_job *j = ctx;
    const mft_pool2d_params *p = j->p;
    const int64_t H = j->H, W = j->W, OH = j->OH, OW = j->OW;
    int64_t tw0[PM_TAB], tw1[PM_TAB];
    for (int64_t r = begin; r < end; r++) {
        const int64_t n = r / H / j->C1, cb = r / H % j->C1, ih = r % H;
        int64_t oh0, oh1;
        max_span_inv(ih, OH, p->kernel[0], p->stride[0], p->padding[0], p->dilation[0], &oh0,
                     &oh1);
        for (int64_t c0 = 0; c0 < W; c0 += PM_TAB) {
            const int64_t nw = W - c0 < PM_TAB ? W - c0 : PM_TAB;
            if (r == begin || W > PM_TAB)
                for (int64_t t = 0; t < nw; t++)
                    max_span_inv(c0 + t, OW, p->kernel[1], p->stride[1], p->padding[1],
                                 p->dilation[1], &tw0[t], &tw1[t]);
            {
                const int64_t q = n * j->C1 + cb;
                const bm keep = blk_keep(j->C, cb);
                const float *go = j->x + q * OH * OW * 16;
                const int64_t *ind = j->ind + q * OH * OW * 16;
                float *gx = j->y + ((q * H + ih) * W + c0) * 16;
                for (int64_t t = 0; t < nw; t++) {
                    const int64_t i = ih * W + c0 + t;
                    bv s = bv_set1(0.0f);
                    for (int64_t oh = oh0; oh < oh1; oh++)
                        for (int64_t ow = tw0[t]; ow < tw1[t]; ow++)
                            s = bv_add_eq(s, go + (oh * OW + ow) * 16, ind + (oh * OW + ow) * 16, i);
                    bv_st(gx + t * 16, bv_keep(keep, s));
                }
            }
        }
    }
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
    char *buf;          /* n rows, then a dummy row */
    size_t row_bytes;
    int n;
    int64_t tag[B16_RING]; /* the plane-wide output row (q*OH + oh) each slot holds */
} b16_ring;

static bool ring_init(b16_ring *g, int64_t n, size_t row_bytes) {
    g->n = (int)n;
    g->row_bytes = row_bytes;
    for (int k = 0; k < B16_RING; k++) g->tag[k] = -1;
    g->buf = n >= 1 && n <= B16_RING ? mft__alloc((size_t)(n + 1) * row_bytes, 64) : NULL;
    return g->buf != NULL;
}

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
 * tw1[iw], else the dummy column OW. */
static void ring_cols(const int64_t *tw0, const int64_t *tw1, int64_t W, int64_t OW, int64_t nw,
                      int32_t *cols) {
    for (int64_t iw = 0; iw < W; iw++)
        for (int64_t b = 0; b < nw; b++)
            cols[iw * nw + b] = (int32_t)(tw0[iw] + b < tw1[iw] ? tw0[iw] + b : OW);
}

typedef struct b16_rjob {
    const b16_job *j;
    bool adaptive;      /* avg: adaptive windows */
    const float *inv;   /* avg: OH*OW factors */
    int64_t nh, nw;     /* the terms per element: most rows, columns */
} b16_rjob;

#if POOL_HAVE_Z16
/* One max grad_x row: element iw sums grad_out (rows gr, columns
 * colg[iw*nw + b]) in the lanes whose index (rows ix, columns
 * coli[iw*nw + b]) is its position, rows a < nh. */
static inline __attribute__((always_inline)) void
max_ring_row(float *gx, int64_t W, int64_t pos0, const int32_t *const *ix,
             const float *const *gr, const int32_t *coli, const int32_t *colg, int64_t nh,
             int64_t nw, bm keep) {
    for (int64_t iw = 0; iw < W; iw++) {
        const __m512i pos = _mm512_set1_epi32((int32_t)(pos0 + iw));
        __m512 s = _mm512_setzero_ps();
        for (int64_t a = 0; a < nh; a++)
            for (int64_t b = 0; b < nw; b++) {
                const __mmask16 m = _mm512_cmpeq_epi32_mask(
                    _mm512_load_si512((const void *)(ix[a] + (int64_t)coli[iw * nw + b] * 16)),
                    pos);
                s = _mm512_mask_add_ps(s, m, s,
                                       _mm512_loadu_ps(gr[a] + (int64_t)colg[iw * nw + b] * 16));
            }
        bv_st(gx + iw * 16, bv_keep(keep, s));
    }
}

/* The max backward of Note [nChw16c row rings] (rows as b16_max_bwd_rows';
 * W <= PM_TAB). A ring row: OW + 1 vectors of int32 indices (the last: the
 * dummy column, -1); grad_out is read in place, at the element's first
 * column (or the row's last, for an element past every window) for a dummy
 * term, whose mask is empty. Each row runs its own
 * number of output rows (no dummy rows). */
static void b16_max_bwd_ring(void *ctx, int64_t begin, int64_t end) {
    const b16_rjob *rj = ctx;
    const b16_job *j = rj->j;
    const mft_pool2d_params *p = j->p;
    const int64_t H = j->H, W = j->W, OH = j->OH, OW = j->OW, nw = rj->nw;
    b16_ring g = {NULL, 0, 0, {0}};
    int32_t *coli = mft__alloc((size_t)(2 * W * nw) * sizeof(int32_t), 64);
    if (!coli || !ring_init(&g, rj->nh, (size_t)((OW + 1) * 16) * sizeof(int32_t))) {
        mft__free(coli);
        b16_max_bwd_rows((void *)j, begin, end); /* out of memory: the same sums */
        return;
    }
    int32_t *colg = coli + W * nw;
    {
        int64_t tw0[PM_TAB], tw1[PM_TAB];
        for (int64_t iw = 0; iw < W; iw++)
            max_span_inv(iw, OW, p->kernel[1], p->stride[1], p->padding[1], p->dilation[1],
                         &tw0[iw], &tw1[iw]);
        ring_cols(tw0, tw1, W, OW, nw, coli);
        for (int64_t iw = 0; iw < W; iw++)
            for (int64_t b = 0; b < nw; b++)
                colg[iw * nw + b] = coli[iw * nw + b] < OW ? coli[iw * nw + b]
                                                          : (int32_t)(tw0[iw] < OW ? tw0[iw] : OW - 1);
    }
    for (int64_t r = begin; r < end; r++) {
        const int64_t q = r / H, ih = r % H;
        const bm keep = blk_keep(j->C, q % j->C1);
        int64_t oh0, oh1;
        max_span_inv(ih, OH, p->kernel[0], p->stride[0], p->padding[0], p->dilation[0], &oh0,
                     &oh1);
        const int32_t *ix[B16_RING];
        const float *gr[B16_RING];
        const int64_t rows = oh1 - oh0;
        for (int64_t a = 0; a < rows; a++) {
            const int64_t orow = q * OH + oh0 + a;
            bool fill;
            int32_t *d = ring_row(&g, orow, &fill);
            if (fill) {
                for (int64_t ow = 0; ow < OW; ow++)
                    _mm512_store_si512((void *)(d + ow * 16),
                                       pm_idx16(j->ind + (orow * OW + ow) * 16, 0xFFFF));
                _mm512_store_si512((void *)(d + OW * 16), _mm512_set1_epi32(-1));
            }
            ix[a] = d;
            gr[a] = j->x + orow * OW * 16;
        }
        float *gx = j->y + r * W * 16;
        if (nw == 2 && rows == 1)
            max_ring_row(gx, W, ih * W, ix, gr, coli, colg, 1, 2, keep);
        else if (nw == 2 && rows == 2)
            max_ring_row(gx, W, ih * W, ix, gr, coli, colg, 2, 2, keep);
        else if (nw == 3 && rows == 3)
            max_ring_row(gx, W, ih * W, ix, gr, coli, colg, 3, 3, keep);
        else
            max_ring_row(gx, W, ih * W, ix, gr, coli, colg, rows, nw, keep);
    }
    mft__free(g.buf);
    mft__free(coli);
}
#endif

/* every max window along both dims holds an input position */
static bool max_windows_nonempty(const b16_job *j) {
    const mft_pool2d_params *p = j->p;
    for (int d = 0; d < 2; d++) {
        const int64_t out = d ? j->OW : j->OH, in = d ? j->W : j->H;
        for (int64_t o = 0; o < out; o++) {
            int64_t i0, i1;
            max_window(o, in, p->kernel[d], p->stride[d], p->padding[d], p->dilation[d], &i0, &i1);
            if (i0 >= i1) return false;
        }
    }
    return true;
}

/* ---------------------------------------------------------------- tiled backward
 * Windows that tile the input (stride == kernel, no padding, no dilation;
 * adaptive pooling whose sizes divide): input (ih, iw) lies in one window
 * only, output (ih / kh, iw / kw), or in none past the last whole or
 * clipped window. Each grad_x element is then the one term the gathered
 * backward would sum, computed the same way (0 + term, so the results are
 * bitwise those of the gather), with the output's grad_out, index and
 * 1/divisor read once per window row instead of once per element. */
typedef struct b16_tjob {
    const b16_job *j;
    const float *inv; /* avg: OH*OW factors; NULL: max */
    int64_t kh, kw;
} b16_tjob;

static void b16_tiled_rows(void *ctx, int64_t begin, int64_t end) {
    const b16_tjob *t = ctx;
    const b16_job *j = t->j;
    const int64_t H = j->H, W = j->W, OH = j->OH, OW = j->OW, kw = t->kw;
    const bv zero = bv_set1(0.0f);
    for (int64_t r = begin; r < end; r++) {
        const int64_t q = r / H, ih = r % H, oh = ih / t->kh;
        const bm keep = blk_keep(j->C, q % j->C1);
        float *gx = j->y + (q * H + ih) * W * 16;
        int64_t iw = 0;
        if (oh < OH) {
            const float *go = j->x + (q * OH + oh) * OW * 16;
            const int64_t *ind = j->ind ? j->ind + (q * OH + oh) * OW * 16 : NULL;
            for (int64_t ow = 0; ow < OW && iw < W; ow++) {
                const int64_t iw1 = iw + kw < W ? iw + kw : W;
                if (ind) {
                    for (; iw < iw1; iw++)
                        bv_st(gx + iw * 16, bv_keep(keep, bv_add_eq(zero, go + ow * 16,
                                                                    ind + ow * 16, ih * W + iw)));
                } else {
                    const bv v = bv_keep(keep, bv_add(zero, bv_mul(bv_ld(go + ow * 16),
                                                                   bv_set1(t->inv[oh * OW + ow]))));
                    for (; iw < iw1; iw++) bv_st(gx + iw * 16, v);
                }
            }
        }
        for (; iw < W; iw++) bv_st(gx + iw * 16, zero);
    }
}

/* Whether the windows tile the input; *kh, *kw their size. */
static bool b16_tiles(const b16_job *j, bool adaptive, int64_t *kh, int64_t *kw) {
    if (adaptive) {
        if (j->OH < 1 || j->OW < 1 || j->H % j->OH || j->W % j->OW) return false;
        *kh = j->H / j->OH;
        *kw = j->W / j->OW;
        return *kh >= 1 && *kw >= 1;
    }
    const mft_pool2d_params *p = j->p;
    for (int d = 0; d < 2; d++)
        if (p->stride[d] != p->kernel[d] || p->padding[d] != 0 || p->dilation[d] > 1) return false;
    *kh = p->kernel[0];
    *kw = p->kernel[1];
    return true;
}

static void b16_tiled(const b16_job *j, const float *inv, int64_t kh, int64_t kw) {
    b16_tjob t = {j, inv, kh, kw};
    mft__parallel_for(0, j->N * j->C1 * j->H, pool_grain(j->W * 16), b16_tiled_rows, &t);
}

void mft__pool_max_backward_nchw16c(const mft_kernel_args *a) {
    b16_job j = b16_job_of(a, false);
    j.ind = (const int64_t *)(const void *)mft__tensor_ptr(a->inputs[1]);
    int64_t kh, kw;
    if (j.p && max_windows_nonempty(&j) && b16_tiles(&j, false, &kh, &kw)) {
        b16_tiled(&j, NULL, kh, kw);
        return;
    }
    if (j.p && max_windows_nonempty(&j)) {
        const int64_t terms = (j.p->kernel[0] * j.p->dilation[0] / j.p->stride[0] + 1) *
                              (j.p->kernel[1] * j.p->dilation[1] / j.p->stride[1] + 1);
#if POOL_HAVE_Z16
        /* Note [nChw16c row rings]: the most output rows / columns one input
         * row / column reads */
        b16_rjob rj = {&j, false, NULL, 0, 0};
        for (int d = 0; d < 2; d++)
            for (int64_t i = 0; i < (d ? j.W : j.H); i++) {
                int64_t o0, o1;
                max_span_inv(i, d ? j.OW : j.OH, j.p->kernel[d], j.p->stride[d], j.p->padding[d],
                             j.p->dilation[d], &o0, &o1);
                int64_t *most = d ? &rj.nw : &rj.nh;
                if (o1 - o0 > *most) *most = o1 - o0;
            }
        if (rj.nh >= 1 && rj.nh <= B16_RING && rj.nw >= 1 && rj.nw <= B16_COLS &&
            j.W <= PM_TAB && j.H * j.W < INT32_MAX) {
            mft__parallel_for(0, j.N * j.C1 * j.H, pool_grain(j.W * terms * 16), b16_max_bwd_ring,
                              &rj);
            return;
        }
#endif
        mft__parallel_for(0, j.N * j.C1 * j.H, pool_grain(j.W * terms * 16), b16_max_bwd_rows,
                          &j);
        return;
    }
    mft__parallel_for(0, j.N * j.C1, pool_grain((j.H * j.W + j.OH * j.OW) * 16),
                      b16_max_bwd_planes, &j);
}

/* ---------------------------------------------------------------- avg forward */
/* The exact reciprocal of a divisor that is a power of two (its magnitude),
 * else 0. */
static inline float exact_inv(int64_t div) {
    const int64_t m = div < 0 ? -div : div;
    return m > 0 && (m & (m - 1)) == 0 && m <= ((int64_t)1 << 62) ? 1.0f / (float)div : 0.0f;
}

/* The run of whole windows [wa, wb) of output row oh (window rows from h0;
 * divisor div). */
static void b16_avg_whole(const b16_job *j, const float *xb, int64_t h0, int64_t wa, int64_t wb,
                          int64_t div, float *yb, bm keep) {
    const mft_pool2d_params *p = j->p;
    const int64_t W = j->W, kh = p->kernel[0], kw = p->kernel[1], sw = p->stride[1];
    const int64_t nr = p->stride[0] < kh ? p->stride[0] : kh, n = wb - wa;
    const float *x = xb + (h0 * W + wa * sw - p->padding[1]) * 16;
    float *y = yb + wa * 16;
    const float fd = (float)div, inv = exact_inv(div);
    if (kh == 2 && kw == 2 && sw == 2) { b16_avg_run(x, W, n, y, keep, fd, inv, 2, 2, 2, nr); return; }
    if (kh == 3 && kw == 3 && sw == 1) { b16_avg_run(x, W, n, y, keep, fd, inv, 3, 3, 1, nr); return; }
    if (kh == 3 && kw == 3 && sw == 2) { b16_avg_run(x, W, n, y, keep, fd, inv, 3, 3, 2, nr); return; }
    b16_avg_run(x, W, n, y, keep, fd, inv, kh, kw, sw, nr);
}

static void b16_avg_rows(void *ctx, int64_t begin, int64_t end) {
    const b16_job *j = ctx;
    const mft_pool2d_params *p = j->p;
    const int64_t H = j->H, W = j->W, OH = j->OH, OW = j->OW;
    int64_t ha, hb, wa, wb;
    whole_range(OH, H, p->kernel[0], p->stride[0], p->padding[0], &ha, &hb);
    whole_range(OW, W, p->kernel[1], p->stride[1], p->padding[1], &wa, &wb);
    /* a whole window's divisor: its padded extent is the kernel */
    const int64_t wdiv = p->divisor_override ? p->divisor_override : p->kernel[0] * p->kernel[1];
    for (int64_t r = begin; r < end; r++) {
        const int64_t q = r / OH, oh = r % OH;
        const bm keep = blk_keep(j->C, q % j->C1);
        const float *xb = j->x + q * H * W * 16;
        float *yb = j->y + r * OW * 16;
        int64_t h0, h1, ph;
        avg_window(oh, H, p->kernel[0], p->stride[0], p->padding[0], &h0, &h1, &ph);
        const int64_t ra = oh >= ha && oh < hb ? wa : 0, rb = oh >= ha && oh < hb ? wb : 0;
        if (ra < rb) b16_avg_whole(j, xb, h0, ra, rb, wdiv, yb, keep);
        for (int64_t ow = edge_first(ra, rb); ow < OW; ow = edge_next(ow, ra, rb)) {
            int64_t w0, w1, pw;
            avg_window(ow, W, p->kernel[1], p->stride[1], p->padding[1], &w0, &w1, &pw);
            const float div = (float)avg_divisor(p, h0, h1, ph, w0, w1, pw);
            bv s = bv_set1(0.0f);
            for (int64_t ih = h0; ih < h1; ih++)
                for (int64_t iw = w0; iw < w1; iw++) s = bv_add(s, bv_ld(xb + (ih * W + iw) * 16));
            bv_st(yb + ow * 16,
                  div != 0.0f ? bv_keep(keep, bv_div(s, bv_set1(div))) : bv_set1(0.0f));
        }
    }
}

void mft__pool_avg_pool2d_nchw16c(const mft_kernel_args *a) {
    b16_job j = b16_job_of(a, true);
    const int64_t work = j.OW * j.p->kernel[0] * j.p->kernel[1] * 16;
    mft__parallel_for(0, j.N * j.C1 * j.OH, pool_grain(work), b16_avg_rows, &j);
}

/* ---------------------------------------------------------------- gathered backward
 * avg and adaptive avg: grad_x[ih, iw] = sum over the outputs (oh, ow)
 * whose windows hold (ih, iw), ascending, of grad_out * (1/divisor). The
 * 1/divisor of every output is tabled once per call (inv; NULL when out of
 * memory: computed per term). */

typedef struct b16_gjob {
    b16_job j;
    bool adaptive;
    float *inv; /* OH*OW factors, or NULL */
} b16_gjob;

/* outputs [*o0, *o1) along a dim whose window holds input i */
static inline void win_inv(const b16_job *j, bool adaptive, int d, int64_t i, int64_t *o0,
                           int64_t *o1) {
    const int64_t in = d ? j->W : j->H, out = d ? j->OW : j->OH;
    int64_t a, b;
    if (adaptive) {
        a = (i * out) / in;
        b = ((i + 1) * out + in - 1) / in;
    } else {
        const mft_pool2d_params *p = j->p;
        a = pool_div_floor(i + p->padding[d] - p->kernel[d], p->stride[d]) + 1;
        b = pool_div_floor(i + p->padding[d], p->stride[d]) + 1;
    }
    *o0 = a < 0 ? 0 : a;
    *o1 = b > out ? out : b;
    if (*o1 < *o0) *o1 = *o0;
}

/* 1/divisor of output (oh, ow) (0: an empty window) */
static inline float win_inv_div(const b16_job *j, bool adaptive, int64_t oh, int64_t ow) {
    if (adaptive) {
        const int64_t h0 = (oh * j->H) / j->OH, h1 = ((oh + 1) * j->H + j->OH - 1) / j->OH;
        const int64_t w0 = (ow * j->W) / j->OW, w1 = ((ow + 1) * j->W + j->OW - 1) / j->OW;
        return 1.0f / (float)((h1 - h0) * (w1 - w0));
    }
    const mft_pool2d_params *p = j->p;
    int64_t h0, h1, ph, w0, w1, pw;
    avg_window(oh, j->H, p->kernel[0], p->stride[0], p->padding[0], &h0, &h1, &ph);
    avg_window(ow, j->W, p->kernel[1], p->stride[1], p->padding[1], &w0, &w1, &pw);
    const int64_t div = avg_divisor(p, h0, h1, ph, w0, w1, pw);
    return div ? 1.0f / (float)div : 0.0f;
}

static void b16_inv_rows(void *ctx, int64_t begin, int64_t end) {
    b16_gjob *g = ctx;
    float *inv = g->inv;
    for (int64_t oh = begin; oh < end; oh++)
        for (int64_t ow = 0; ow < g->j.OW; ow++)
            inv[oh * g->j.OW + ow] = win_inv_div(&g->j, g->adaptive, oh, ow);
}

static void b16_gather_rows(void *ctx, int64_t begin, int64_t end) {
    const b16_gjob *g = ctx;
    const b16_job *j = &g->j;
    const bool adaptive = g->adaptive;
    const float *inv = g->inv;
    const int64_t H = j->H, W = j->W, OH = j->OH, OW = j->OW;
    int64_t tw0[PM_TAB], tw1[PM_TAB];
    for (int64_t r = begin; r < end; r++) {
        const int64_t n = r / H / j->C1, cb = r / H % j->C1, ih = r % H;
        if (adaptive && OH == 1 && OW == 1) { /* global pooling: one value per plane */
            const float f = inv ? inv[0] : win_inv_div(j, adaptive, 0, 0);
            const bv v = bv_keep(blk_keep(j->C, cb),
                                 bv_mul(bv_ld(j->x + (n * j->C1 + cb) * 16), bv_set1(f)));
            float *gx = j->y + ((n * j->C1 + cb) * H + ih) * W * 16;
            for (int64_t iw = 0; iw < W; iw++) bv_st(gx + iw * 16, v);
            continue;
        }
        int64_t oh0, oh1;
        win_inv(j, adaptive, 0, ih, &oh0, &oh1);
        for (int64_t c0 = 0; c0 < W; c0 += PM_TAB) {
            const int64_t nw = W - c0 < PM_TAB ? W - c0 : PM_TAB;
            if (r == begin || W > PM_TAB)
                for (int64_t t = 0; t < nw; t++) win_inv(j, adaptive, 1, c0 + t, &tw0[t], &tw1[t]);
            {
                const int64_t q = n * j->C1 + cb;
                const bm keep = blk_keep(j->C, cb);
                const float *go = j->x + q * OH * OW * 16;
                float *gx = j->y + ((q * H + ih) * W + c0) * 16;
                for (int64_t t = 0; t < nw; t++) {
                    bv s = bv_set1(0.0f);
                    for (int64_t oh = oh0; oh < oh1; oh++)
                        for (int64_t ow = tw0[t]; ow < tw1[t]; ow++) {
                            const float f = inv ? inv[oh * OW + ow]
                                                : win_inv_div(j, adaptive, oh, ow);
                            s = bv_add(s, bv_mul(bv_ld(go + (oh * OW + ow) * 16), bv_set1(f)));
                        }
                    bv_st(gx + t * 16, bv_keep(keep, s));
                }
            }
        }
    }
}

/* One avg grad_x row of Note [nChw16c row rings]: element iw sums the
 * products of rows pr, terms a < nh, columns cols[iw*nw + b], from +0. */
static inline __attribute__((always_inline)) void
avg_ring_row(float *gx, int64_t W, const float *const *pr, const int32_t *cols, int64_t nh,
             int64_t nw, bm keep) {
    for (int64_t iw = 0; iw < W; iw++) {
        bv s = bv_set1(0.0f);
        for (int64_t a = 0; a < nh; a++)
            for (int64_t b = 0; b < nw; b++)
                s = bv_add(s, bv_ld(pr[a] + (int64_t)cols[iw * nw + b] * 16));
        bv_st(gx + iw * 16, bv_keep(keep, s));
    }
}

/* The avg / adaptive avg backward of Note [nChw16c row rings] (rows as
 * b16_gather_rows'; W <= PM_TAB). A ring row: OW + 1 vectors of products,
 * the last (the dummy column) +0; rows past an element's last output row
 * are the dummy row (+0), so every row runs nh x nw terms. */
static void b16_gather_ring(void *ctx, int64_t begin, int64_t end) {
    const b16_rjob *rj = ctx;
    const b16_job *j = rj->j;
    const int64_t H = j->H, W = j->W, OH = j->OH, OW = j->OW, nh = rj->nh, nw = rj->nw;
    b16_ring g = {NULL, 0, 0, {0}};
    int32_t *cols = mft__alloc((size_t)(W * nw) * sizeof(int32_t), 64);
    if (!cols || !ring_init(&g, nh, (size_t)((OW + 1) * 16) * sizeof(float))) {
        mft__free(cols);
        b16_gjob gj = {*j, rj->adaptive, (float *)rj->inv}; /* out of memory: the same sums */
        b16_gather_rows(&gj, begin, end);
        return;
    }
    {
        int64_t tw0[PM_TAB], tw1[PM_TAB];
        for (int64_t iw = 0; iw < W; iw++) win_inv(j, rj->adaptive, 1, iw, &tw0[iw], &tw1[iw]);
        ring_cols(tw0, tw1, W, OW, nw, cols);
    }
    float *dpr = ring_dummy(&g);
    for (int64_t e = 0; e < (OW + 1) * 16; e++) dpr[e] = 0.0f;
    for (int64_t r = begin; r < end; r++) {
        const int64_t q = r / H, ih = r % H;
        const bm keep = blk_keep(j->C, q % j->C1);
        int64_t oh0, oh1;
        win_inv(j, rj->adaptive, 0, ih, &oh0, &oh1);
        const float *pr[B16_RING];
        for (int64_t a = 0; a < nh; a++) {
            const int64_t oh = oh0 + a, orow = q * OH + oh;
            if (oh >= oh1) {
                pr[a] = dpr;
                continue;
            }
            bool fill;
            float *d = ring_row(&g, orow, &fill);
            if (fill) {
                for (int64_t ow = 0; ow < OW; ow++)
                    bv_st(d + ow * 16, bv_mul(bv_ld(j->x + (orow * OW + ow) * 16),
                                              bv_set1(rj->inv[oh * OW + ow])));
                bv_st(d + OW * 16, bv_set1(0.0f));
            }
            pr[a] = d;
        }
        float *gx = j->y + r * W * 16;
        if (nh == 3 && nw == 3)
            avg_ring_row(gx, W, pr, cols, 3, 3, keep);
        else if (nh == 2 && nw == 2)
            avg_ring_row(gx, W, pr, cols, 2, 2, keep);
        else
            avg_ring_row(gx, W, pr, cols, nh, nw, keep);
    }
    mft__free(g.buf);
    mft__free(cols);
}

static void b16_gather(const mft_kernel_args *a, bool adaptive, int64_t terms) {
    b16_gjob g;
    g.j = b16_job_of(a, false);
    g.adaptive = adaptive;
    float *inv = mft__alloc((size_t)(g.j.OH * g.j.OW) * sizeof(float), 64);
    g.inv = NULL;
    if (inv) {
        g.inv = inv;
        mft__parallel_for(0, g.j.OH, pool_grain(g.j.OW * 8), b16_inv_rows, &g);
    }
    int64_t kh, kw;
    /* Note [nChw16c row rings]: the most output rows / columns one input
     * row / column reads */
    b16_rjob rj = {&g.j, adaptive, inv, 0, 0};
    for (int d = 0; inv && d < 2; d++)
        for (int64_t i = 0; i < (d ? g.j.W : g.j.H); i++) {
            int64_t o0, o1;
            win_inv(&g.j, adaptive, d, i, &o0, &o1);
            int64_t *most = d ? &rj.nw : &rj.nh;
            if (o1 - o0 > *most) *most = o1 - o0;
        }
    const bool global = adaptive && g.j.OH == 1 && g.j.OW == 1;
    if (inv && b16_tiles(&g.j, adaptive, &kh, &kw))
        b16_tiled(&g.j, inv, kh, kw);
    else if (inv && !global && rj.nh >= 1 && rj.nh <= B16_RING && rj.nw >= 1 &&
             rj.nw <= B16_COLS && g.j.W <= PM_TAB)
        mft__parallel_for(0, g.j.N * g.j.C1 * g.j.H, pool_grain(g.j.W * terms * 16),
                          b16_gather_ring, &rj);
    else
        mft__parallel_for(0, g.j.N * g.j.C1 * g.j.H, pool_grain(g.j.W * terms * 16),
                          b16_gather_rows, &g);
    mft__free(inv);
}

void mft__pool_avg_pool2d_backward_nchw16c(const mft_kernel_args *a) {
    const mft_pool2d_params *p = a->params;
    b16_gather(a, false, (p->kernel[0] / p->stride[0] + 1) * (p->kernel[1] / p->stride[1] + 1));
}

/* ---------------------------------------------------------------- adaptive avg
 * Window o of a dim: [floor(o*in/out), ceil((o+1)*in/out)). The forward sums
 * a window's rows in four partial sums (columns iw mod 4) and divides by the
 * window's size; a 1x1 output is global average pooling. */
static void b16_ada_rows(void *ctx, int64_t begin, int64_t end) {
    const b16_job *j = ctx;
    const int64_t H = j->H, W = j->W, OH = j->OH, OW = j->OW;
    int64_t tw0[PM_TAB], tw1[PM_TAB];
    for (int64_t r = begin; r < end; r++) {
        const int64_t n = r / OH / j->C1, cb = r / OH % j->C1, oh = r % OH;
        const int64_t h0 = (oh * H) / OH, h1 = ((oh + 1) * H + OH - 1) / OH;
        for (int64_t c0 = 0; c0 < OW; c0 += PM_TAB) {
            const int64_t nw = OW - c0 < PM_TAB ? OW - c0 : PM_TAB;
            if (r == begin || OW > PM_TAB)
                for (int64_t t = 0; t < nw; t++) {
                    tw0[t] = ((c0 + t) * W) / OW;
                    tw1[t] = ((c0 + t + 1) * W + OW - 1) / OW;
                }
            {
                const int64_t q = n * j->C1 + cb;
                const bm keep = blk_keep(j->C, cb);
                const float *xb = j->x + q * H * W * 16;
                float *yb = j->y + ((q * OH + oh) * OW + c0) * 16;
                for (int64_t t = 0; t < nw; t++) {
                    const int64_t w0 = tw0[t], w1 = tw1[t];
                    bv s0 = bv_set1(0.0f), s1 = s0, s2 = s0, s3 = s0;
                    for (int64_t ih = h0; ih < h1; ih++) {
                        const float *row = xb + ih * W * 16;
                        int64_t iw = w0;
                        for (; iw + 4 <= w1; iw += 4) {
                            s0 = bv_add(s0, bv_ld(row + iw * 16));
                            s1 = bv_add(s1, bv_ld(row + (iw + 1) * 16));
                            s2 = bv_add(s2, bv_ld(row + (iw + 2) * 16));
                            s3 = bv_add(s3, bv_ld(row + (iw + 3) * 16));
                        }
                        for (; iw < w1; iw++) s0 = bv_add(s0, bv_ld(row + iw * 16));
                    }
                    const bv s = bv_add(bv_add(s0, s1), bv_add(s2, s3));
                    const float size = (float)((h1 - h0) * (w1 - w0));
                    bv_st(yb + t * 16, bv_keep(keep, bv_div(s, bv_set1(size))));
                }
            }
        }
    }
}

void mft__pool_adaptive_avg_nchw16c(const mft_kernel_args *a) {
    b16_job j = b16_job_of(a, true);
    const int64_t win = (j.H / j.OH + 1) * (j.W / j.OW + 1);
    mft__parallel_for(0, j.N * j.C1 * j.OH, pool_grain(j.OW * win * 16), b16_ada_rows, &j);
}

void mft__pool_adaptive_avg_backward_nchw16c(const mft_kernel_args *a) {
    const mft_tensor *go = a->inputs[0], *gx = a->outputs[0];
    b16_gather(a, true, (go->sizes[2] / gx->sizes[2] + 2) * (go->sizes[3] / gx->sizes[3] + 2));
}
