/* ops/pool/blocked16_max.c — the nChw16c F32 max_pool2d and relu_max_pool2d
 * forward (values and I64 nChw16c indices): per output row the run of whole
 * windows unrolled (Note [nChw16c interior runs], blocked16_internal.h), the
 * edge columns and every other row by the general loop, and 2x2 / stride 2
 * windows on their own path (Note [nChw16c 2x2 max forward]). */
#include "blocked16_internal.h"

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
        /* clang-format off */
        if (kh == 3 && kw == 3 && sw == 2)
            { b16_max_run(x, W, pos, n, y, yi, keep, j->relu, 3, 3, 2, 1, 1, nr); return; }
        if (kh == 3 && kw == 3 && sw == 1)
            { b16_max_run(x, W, pos, n, y, yi, keep, j->relu, 3, 3, 1, 1, 1, nr); return; }
        if (kh == 2 && kw == 2 && sw == 2)
            { b16_max_run(x, W, pos, n, y, yi, keep, j->relu, 2, 2, 2, 1, 1, nr); return; }
        /* clang-format on */
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
        __m512i p10 = _mm512_set1_epi32(p0 + (int32_t)W),
                p11 = _mm512_set1_epi32(p0 + (int32_t)W + 1);
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
    b16_job j = mft__pool_b16_job_of(a, true);
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
