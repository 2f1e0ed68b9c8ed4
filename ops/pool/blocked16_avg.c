/* ops/pool/blocked16_avg.c — the nChw16c F32 avg_pool2d forward (per output
 * row the run of whole windows unrolled, Note [nChw16c interior runs] in
 * blocked16_internal.h, the rest by the general loop) and the
 * adaptive_avg_pool2d forward (global average pooling included). */
#include "blocked16_internal.h"

/* n avg outputs of one row whose windows are whole (kh x kw taps, window t
 * at x + t*sw*16): the sum from 0 in window order, divided by div, or
 * multiplied by inv when div is a power of two (inv = 1/div exactly). */
static inline __attribute__((always_inline)) void b16_avg_run(const float *x, int64_t W, int64_t n,
                                                              float *y, bm keep, float div,
                                                              float inv, int64_t kh, int64_t kw,
                                                              int64_t sw, int64_t nr) {
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
    /* clang-format off */
    if (kh == 2 && kw == 2 && sw == 2) { b16_avg_run(x, W, n, y, keep, fd, inv, 2, 2, 2, nr); return; }
    if (kh == 3 && kw == 3 && sw == 1) { b16_avg_run(x, W, n, y, keep, fd, inv, 3, 3, 1, nr); return; }
    if (kh == 3 && kw == 3 && sw == 2) { b16_avg_run(x, W, n, y, keep, fd, inv, 3, 3, 2, nr); return; }
    /* clang-format on */
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
    b16_job j = mft__pool_b16_job_of(a, true);
    const int64_t work = j.OW * j.p->kernel[0] * j.p->kernel[1] * 16;
    mft__parallel_for(0, j.N * j.C1 * j.OH, pool_grain(work), b16_avg_rows, &j);
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

/* Global average (a 1x1 output): item q is one plane, its H*W pixels one
 * contiguous run summed with eight accumulators. The general rows above
 * recompute their window per plane and sum with four; on 32x512x7x7 at 2
 * threads (3.2 MB, in the two cores' L2) they moved 118 GB/s against the
 * NHWC kernel's 152 (bench_pool, 2026-11-28). */
static void b16_global_rows(void *ctx, int64_t begin, int64_t end) {
    const b16_job *j = ctx;
    const int64_t S = j->H * j->W;
    const bv div = bv_set1((float)S);
    for (int64_t q = begin; q < end; q++) {
        const float *xb = j->x + q * S * 16;
        bv s[8];
        for (int k = 0; k < 8; k++) s[k] = bv_set1(0.0f);
        int64_t i = 0;
        for (; i + 8 <= S; i += 8)
            for (int k = 0; k < 8; k++) s[k] = bv_add(s[k], bv_ld(xb + (i + k) * 16));
        for (; i < S; i++) s[0] = bv_add(s[0], bv_ld(xb + i * 16));
        const bv t = bv_add(bv_add(bv_add(s[0], s[1]), bv_add(s[2], s[3])),
                            bv_add(bv_add(s[4], s[5]), bv_add(s[6], s[7])));
        bv_st(j->y + q * 16, bv_keep(blk_keep(j->C, q % j->C1), bv_div(t, div)));
    }
}

void mft__pool_adaptive_avg_nchw16c(const mft_kernel_args *a) {
    b16_job j = mft__pool_b16_job_of(a, true);
    if (j.OH == 1 && j.OW == 1 && j.H * j.W > 0) {
        mft__parallel_for(0, j.N * j.C1, pool_grain(j.H * j.W * 16), b16_global_rows, &j);
        return;
    }
    const int64_t win = (j.H / j.OH + 1) * (j.W / j.OW + 1);
    mft__parallel_for(0, j.N * j.C1 * j.OH, pool_grain(j.OW * win * 16), b16_ada_rows, &j);
}
