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
 * Work splits over rows (forward: (plane, oh); avg backward: (plane, ih)) or
 * planes (max backward scatters within its plane), so the results never
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
typedef struct bi {
    __m512i lo, hi;
} bi;
static inline bi bi_set1(int64_t v) { return (bi){_mm512_set1_epi64(v), _mm512_set1_epi64(v)}; }
static inline bi bi_blend(bm k, bi a, int64_t v) {
    const __m512i s = _mm512_set1_epi64(v);
    return (bi){_mm512_mask_blend_epi64((__mmask8)k, a.lo, s),
                _mm512_mask_blend_epi64((__mmask8)(k >> 8), a.hi, s)};
}
/* lanes of k set to v */
static inline bi bi_setm(bm k, bi a, int64_t v) { return bi_blend(k, a, v); }
static inline void bi_st(int64_t *p, bm keep, bi a) {
    _mm512_storeu_si512((void *)p, _mm512_maskz_mov_epi64((__mmask8)keep, a.lo));
    _mm512_storeu_si512((void *)(p + 8), _mm512_maskz_mov_epi64((__mmask8)(keep >> 8), a.hi));
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
static inline bi bi_setm(bm k, bi a, int64_t v) { return bi_blend(k, a, v); }
static inline void bi_st(int64_t *p, bm keep, bi a) {
    for (int l = 0; l < 16; l++) p[l] = keep >> l & 1u ? a.i[l] : 0;
}
#endif

/* The lanes of channel block cb holding channels (< C). */
static inline bm blk_keep(int64_t C, int64_t cb) {
    const int64_t n = C - cb * 16;
    return n >= 16 ? (bm)0xFFFF : (bm)((1u << n) - 1u);
}

/* ---------------------------------------------------------------- the work */
typedef struct b16_job {
    const mft_pool2d_params *p;
    const float *x; /* forward input, or grad_out */
    float *y;       /* forward output, or grad_x */
    int64_t *yi;    /* max forward indices */
    const int64_t *ind; /* max backward indices */
    int64_t C, C1, H, W, OH, OW; /* H, W: the input's (grad_x's) */
    bool relu;
} b16_job;

/* x: the input-sized tensor (forward input, grad_x), y: the output-sized one */
static b16_job b16_job_of(const mft_tensor *x, const mft_tensor *y, const void *params) {
    b16_job j;
    memset(&j, 0, sizeof j);
    j.p = params;
    j.C = x->sizes[1];
    j.C1 = (j.C + 15) / 16;
    j.H = x->sizes[2];
    j.W = x->sizes[3];
    j.OH = y->sizes[2];
    j.OW = y->sizes[3];
    return j;
}

/* ---------------------------------------------------------------- max forward */
static void b16_max_rows(void *ctx, int64_t begin, int64_t end) {
    const b16_job *j = ctx;
    const mft_pool2d_params *p = j->p;
    const int64_t H = j->H, W = j->W, OH = j->OH, OW = j->OW;
    const int64_t sw = p->stride[1], dh = p->dilation[0], dw = p->dilation[1];
    for (int64_t r = begin; r < end; r++) {
        const int64_t q = r / OH, oh = r % OH;
        const bm keep = blk_keep(j->C, q % j->C1);
        const float *xb = j->x + q * H * W * 16;
        float *yb = j->y + r * OW * 16;
        int64_t *ib = j->yi + r * OW * 16;
        int64_t h0, h1;
        max_window(oh, H, p->kernel[0], p->stride[0], p->padding[0], dh, &h0, &h1);
        for (int64_t ow = 0; ow < OW; ow++) {
            int64_t w0, w1;
            max_window(ow, W, p->kernel[1], sw, p->padding[1], dw, &w0, &w1);
            bv m = bv_set1(-INFINITY);
            bi idx = bi_set1(h0 * W + w0);
            for (int64_t ih = h0; ih < h1; ih += dh)
                for (int64_t iw = w0; iw < w1; iw += dw) {
                    const bv v = bv_ld(xb + (ih * W + iw) * 16);
                    const bm k = bv_newmax(v, m);
                    m = bv_blend(k, m, v);
                    idx = bi_blend(k, idx, ih * W + iw);
                }
            if (j->relu) { /* RELU_CLAMP per lane */
                idx = bi_setm(bv_le0(m), idx, -1);
                m = bv_keep((bm)~bv_lt0(m), m);
            }
            bv_st(yb + ow * 16, bv_keep(keep, m));
            bi_st(ib + ow * 16, keep, idx);
        }
    }
}

static void b16_max_forward(const mft_kernel_args *a, bool relu) {
    b16_job j = b16_job_of(a->inputs[0], a->outputs[0], a->params);
    j.x = (const float *)(const void *)mft__tensor_ptr(a->inputs[0]);
    j.y = (float *)(void *)mft__tensor_ptr(a->outputs[0]);
    j.yi = (int64_t *)(void *)mft__tensor_ptr(a->outputs[1]);
    j.relu = relu;
    const int64_t rows = a->inputs[0]->sizes[0] * j.C1 * j.OH;
    mft__parallel_for(0, rows, pool_grain(j.OW * j.p->kernel[0] * j.p->kernel[1] * 16),
                      b16_max_rows, &j);
}

void mft__pool_max_pool2d_nchw16c(const mft_kernel_args *a) { b16_max_forward(a, false); }
void mft__pool_relu_max_pool2d_nchw16c(const mft_kernel_args *a) { b16_max_forward(a, true); }

/* ---------------------------------------------------------------- max backward
 * Each plane scatters grad_out into its zeroed grad_x plane, outputs in
 * ascending order (as the plain kernels); indices outside [0, H*W) (relu's
 * -1) are skipped. */
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

void mft__pool_max_backward_nchw16c(const mft_kernel_args *a) {
    b16_job j = b16_job_of(a->outputs[0], a->inputs[0], a->params);
    j.x = (const float *)(const void *)mft__tensor_ptr(a->inputs[0]);
    j.ind = (const int64_t *)(const void *)mft__tensor_ptr(a->inputs[1]);
    j.y = (float *)(void *)mft__tensor_ptr(a->outputs[0]);
    const int64_t planes = a->outputs[0]->sizes[0] * j.C1;
    mft__parallel_for(0, planes, pool_grain((j.H * j.W + j.OH * j.OW) * 16), b16_max_bwd_planes,
                      &j);
}

/* ---------------------------------------------------------------- avg forward */
static void b16_avg_rows(void *ctx, int64_t begin, int64_t end) {
    const b16_job *j = ctx;
    const mft_pool2d_params *p = j->p;
    const int64_t H = j->H, W = j->W, OH = j->OH, OW = j->OW;
    for (int64_t r = begin; r < end; r++) {
        const int64_t q = r / OH, oh = r % OH;
        const bm keep = blk_keep(j->C, q % j->C1);
        const float *xb = j->x + q * H * W * 16;
        float *yb = j->y + r * OW * 16;
        int64_t h0, h1, ph;
        avg_window(oh, H, p->kernel[0], p->stride[0], p->padding[0], &h0, &h1, &ph);
        for (int64_t ow = 0; ow < OW; ow++) {
            int64_t w0, w1, pw;
            avg_window(ow, W, p->kernel[1], p->stride[1], p->padding[1], &w0, &w1, &pw);
            const int64_t div = avg_divisor(p, h0, h1, ph, w0, w1, pw);
            bv s = bv_set1(0.0f);
            for (int64_t ih = h0; ih < h1; ih++)
                for (int64_t iw = w0; iw < w1; iw++) s = bv_add(s, bv_ld(xb + (ih * W + iw) * 16));
            bv_st(yb + ow * 16, div ? bv_keep(keep, bv_div(s, bv_set1((float)div))) : bv_set1(0.0f));
        }
    }
}

void mft__pool_avg_pool2d_nchw16c(const mft_kernel_args *a) {
    b16_job j = b16_job_of(a->inputs[0], a->outputs[0], a->params);
    j.x = (const float *)(const void *)mft__tensor_ptr(a->inputs[0]);
    j.y = (float *)(void *)mft__tensor_ptr(a->outputs[0]);
    const int64_t rows = a->inputs[0]->sizes[0] * j.C1 * j.OH;
    mft__parallel_for(0, rows, pool_grain(j.OW * j.p->kernel[0] * j.p->kernel[1] * 16),
                      b16_avg_rows, &j);
}

/* ---------------------------------------------------------------- avg backward
 * Gathered per grad_x row: grad_x[ih, iw] = sum over the outputs (oh, ow)
 * whose windows hold (ih, iw), ascending, of grad_out * (1/divisor). */
static void b16_avg_bwd_rows(void *ctx, int64_t begin, int64_t end) {
    const b16_job *j = ctx;
    const mft_pool2d_params *p = j->p;
    const int64_t H = j->H, W = j->W, OH = j->OH, OW = j->OW;
    const int64_t kh = p->kernel[0], kw = p->kernel[1], sh = p->stride[0], sw = p->stride[1];
    const int64_t ph_ = p->padding[0], pw_ = p->padding[1];
    for (int64_t r = begin; r < end; r++) {
        const int64_t q = r / H, ih = r % H;
        const bm keep = blk_keep(j->C, q % j->C1);
        const float *gob = j->x + q * OH * OW * 16;
        float *gx = j->y + r * W * 16;
        int64_t oh0 = pool_div_floor(ih + ph_ - kh, sh) + 1, oh1 = pool_div_floor(ih + ph_, sh) + 1;
        if (oh0 < 0) oh0 = 0;
        if (oh1 > OH) oh1 = OH;
        for (int64_t iw = 0; iw < W; iw++) {
            int64_t ow0 = pool_div_floor(iw + pw_ - kw, sw) + 1,
                    ow1 = pool_div_floor(iw + pw_, sw) + 1;
            if (ow0 < 0) ow0 = 0;
            if (ow1 > OW) ow1 = OW;
            bv s = bv_set1(0.0f);
            for (int64_t oh = oh0; oh < oh1; oh++) {
                int64_t h0, h1, ph;
                avg_window(oh, H, kh, sh, ph_, &h0, &h1, &ph);
                for (int64_t ow = ow0; ow < ow1; ow++) {
                    int64_t w0, w1, pw;
                    avg_window(ow, W, kw, sw, pw_, &w0, &w1, &pw);
                    const int64_t div = avg_divisor(p, h0, h1, ph, w0, w1, pw);
                    if (!div) continue;
                    s = bv_add(s, bv_mul(bv_ld(gob + (oh * OW + ow) * 16),
                                         bv_set1(1.0f / (float)div)));
                }
            }
            bv_st(gx + iw * 16, bv_keep(keep, s));
        }
    }
}

void mft__pool_avg_pool2d_backward_nchw16c(const mft_kernel_args *a) {
    b16_job j = b16_job_of(a->outputs[0], a->inputs[0], a->params);
    j.x = (const float *)(const void *)mft__tensor_ptr(a->inputs[0]);
    j.y = (float *)(void *)mft__tensor_ptr(a->outputs[0]);
    const int64_t terms = (j.p->kernel[0] / j.p->stride[0] + 1) * (j.p->kernel[1] / j.p->stride[1] + 1);
    const int64_t rows = a->outputs[0]->sizes[0] * j.C1 * j.H;
    mft__parallel_for(0, rows, pool_grain(j.W * terms * 16), b16_avg_bwd_rows, &j);
}

/* ---------------------------------------------------------------- adaptive avg
 * Window o of a dim: [floor(o*in/out), ceil((o+1)*in/out)). The forward sums
 * a window's rows in four partial sums (columns iw mod 4) and divides by the
 * window's size; a 1x1 output is global average pooling. */
static inline void ada_win(int64_t o, int64_t in, int64_t out, int64_t *i0, int64_t *i1) {
    *i0 = (o * in) / out;
    *i1 = ((o + 1) * in + out - 1) / out;
}

static void b16_ada_rows(void *ctx, int64_t begin, int64_t end) {
    const b16_job *j = ctx;
    const int64_t H = j->H, W = j->W, OH = j->OH, OW = j->OW;
    for (int64_t r = begin; r < end; r++) {
        const int64_t q = r / OH, oh = r % OH;
        const bm keep = blk_keep(j->C, q % j->C1);
        const float *xb = j->x + q * H * W * 16;
        float *yb = j->y + r * OW * 16;
        int64_t h0, h1;
        ada_win(oh, H, OH, &h0, &h1);
        for (int64_t ow = 0; ow < OW; ow++) {
            int64_t w0, w1;
            ada_win(ow, W, OW, &w0, &w1);
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
            bv_st(yb + ow * 16, bv_keep(keep, bv_div(s, bv_set1(size))));
        }
    }
}

void mft__pool_adaptive_avg_nchw16c(const mft_kernel_args *a) {
    b16_job j = b16_job_of(a->inputs[0], a->outputs[0], a->params);
    j.x = (const float *)(const void *)mft__tensor_ptr(a->inputs[0]);
    j.y = (float *)(void *)mft__tensor_ptr(a->outputs[0]);
    const int64_t rows = a->inputs[0]->sizes[0] * j.C1 * j.OH;
    const int64_t win = (j.H / j.OH + 1) * (j.W / j.OW + 1);
    mft__parallel_for(0, rows, pool_grain(j.OW * win * 16), b16_ada_rows, &j);
}

/* Backward, gathered per grad_x row: the outputs whose windows hold (ih, iw)
 * are [floor(i*out/in), ceil((i+1)*out/in)) per dim. */
static void b16_ada_bwd_rows(void *ctx, int64_t begin, int64_t end) {
    const b16_job *j = ctx;
    const int64_t H = j->H, W = j->W, OH = j->OH, OW = j->OW;
    for (int64_t r = begin; r < end; r++) {
        const int64_t q = r / H, ih = r % H;
        const bm keep = blk_keep(j->C, q % j->C1);
        const float *gob = j->x + q * OH * OW * 16;
        float *gx = j->y + r * W * 16;
        int64_t oh0, oh1;
        ada_win(ih, OH, H, &oh0, &oh1);
        for (int64_t iw = 0; iw < W; iw++) {
            int64_t ow0, ow1;
            ada_win(iw, OW, W, &ow0, &ow1);
            bv s = bv_set1(0.0f);
            for (int64_t oh = oh0; oh < oh1; oh++) {
                int64_t h0, h1;
                ada_win(oh, H, OH, &h0, &h1);
                for (int64_t ow = ow0; ow < ow1; ow++) {
                    int64_t w0, w1;
                    ada_win(ow, W, OW, &w0, &w1);
                    const float inv = 1.0f / (float)((h1 - h0) * (w1 - w0));
                    s = bv_add(s, bv_mul(bv_ld(gob + (oh * OW + ow) * 16), bv_set1(inv)));
                }
            }
            bv_st(gx + iw * 16, bv_keep(keep, s));
        }
    }
}

void mft__pool_adaptive_avg_backward_nchw16c(const mft_kernel_args *a) {
    b16_job j = b16_job_of(a->outputs[0], a->inputs[0], a->params);
    j.x = (const float *)(const void *)mft__tensor_ptr(a->inputs[0]);
    j.y = (float *)(void *)mft__tensor_ptr(a->outputs[0]);
    const int64_t rows = a->outputs[0]->sizes[0] * j.C1 * j.H;
    const int64_t terms = (j.OH / j.H + 2) * (j.OW / j.W + 2);
    mft__parallel_for(0, rows, pool_grain(j.W * terms * 16), b16_ada_bwd_rows, &j);
}
