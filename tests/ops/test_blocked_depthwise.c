/* tests/ops/test_blocked_depthwise.c — native nChw16c F32 depthwise conv2d
 * (ops/conv/depthwise_blocked16.c, Note [nChw16c depthwise convolution]):
 *   - forward on packed nChw16c x (groups == C, weight (C, 1, kh, kw),
 *     with and without bias) equals the plain NCHW call and the NHWC call
 *     within 1e-5 relative, for C in {1, 3, 15, 16, 17, 33, 48}, kernels
 *     3x3, 5x5, 1x7 and 11x11 (more taps than one tile call holds), strides
 *     1 to 4 (unequal in H and W too; stride 1 rows wide enough for the
 *     sliding 3-tap tiles), paddings 0 to 5 (output pixels with no tap at
 *     all), dilations 1 and 2, N 1 and 2, odd H and W; the
 *     result is nChw16c with zero pad lanes, no conversion is counted and
 *     the depthwise kernel ran;
 *   - backward (grad_x, grad_w, grad_b; each alone too) on nChw16c
 *     grad_out and x, any stride: the same against the plain call, grad_x
 *     nChw16c with zero pads, grad_w and grad_b plain, no conversion;
 *   - the NHWC reference runs on rows with no tap at all too (padding 4
 *     on a 3x3 input), where depthwise.c's sliding forward used to read
 *     unset tap pointers;
 *   - 1 and 2 threads give bit-identical results, forward and backward;
 *   - an inf in x (forward) and in grad_out (backward_input) leaves the
 *     pad lanes 0;
 *   - a weight of other strides (channels-last) runs natively too;
 *   - what stays in the counted fallback: multiplier 2, groups that are
 *     not depthwise;
 *   - autograd through a native depthwise conv2d: the gradients equal the
 *     plain run's and no conversion is counted. */
#include <math.h>
#include <stdlib.h>
#include "harness.h"
#include "test_util.h"

#define CT  MFT_CONTIGUOUS
#define CL  MFT_CHANNELS_LAST
#define B16 MFT_NCHW16C

static int64_t conversions(void) { return mft_conversion_counts_get().total; }
static int64_t fallbacks(void) { return mft_conversion_counts_get().count[MFT_CAUSE_FALLBACK]; }

static bool bits_equal(const mft_tensor *a, const mft_tensor *b) {
    return a && b && mft_tensor_hash(a) == mft_tensor_hash(b);
}

static bool kernel_is(const char *part) {
    const mft_dispatch_info *di = mft_dispatch_last();
    return di && strstr(di->kernel, part) != NULL;
}

static void release_all(mft_tensor **ts, size_t n) {
    for (size_t k = 0; k < n; k++) mft_tensor_release(ts[k]);
}

typedef struct dcase {
    int64_t N, C, H, W, KH, KW, sh, sw, ph, pw, dh, dw;
    bool bias;
} dcase;

static const dcase g_cases[] = {
    {1, 1, 9, 11, 3, 3, 1, 1, 1, 1, 1, 1, true},    {2, 3, 7, 9, 3, 3, 2, 2, 1, 1, 1, 1, true},
    {1, 15, 11, 13, 5, 5, 1, 1, 2, 2, 1, 1, false}, {2, 16, 9, 9, 3, 3, 1, 1, 0, 0, 1, 1, true},
    {1, 17, 13, 7, 3, 3, 2, 2, 2, 2, 2, 2, true},   {2, 33, 10, 11, 5, 5, 2, 2, 0, 0, 1, 1, true},
    {1, 33, 15, 15, 3, 3, 1, 1, 1, 1, 2, 2, false}, {1, 16, 17, 19, 5, 5, 1, 1, 2, 2, 2, 2, true},
    {2, 17, 6, 5, 3, 3, 1, 1, 2, 2, 1, 1, true},    {1, 32, 23, 29, 3, 3, 2, 2, 1, 1, 1, 1, true},
    {1, 48, 3, 3, 3, 3, 1, 1, 4, 4, 1, 1, true},    {1, 17, 11, 13, 3, 3, 4, 4, 1, 1, 1, 1, true},
    {1, 16, 14, 15, 11, 11, 1, 1, 5, 5, 1, 1, true}, {2, 15, 9, 21, 1, 7, 1, 2, 0, 3, 1, 1, true},
    {1, 33, 12, 17, 3, 5, 2, 1, 1, 2, 1, 2, true},  {2, 3, 31, 33, 3, 3, 3, 2, 1, 0, 1, 1, false},
    {2, 17, 12, 21, 3, 3, 1, 1, 1, 1, 1, 1, true},  {1, 40, 9, 30, 3, 3, 1, 1, 0, 2, 1, 1, false},
};
#define NCASES ((int)(sizeof g_cases / sizeof g_cases[0]))

/* the case's tensors and parameters */
typedef struct dsetup {
    int64_t st[2], pd[2], dl[2];
    mft_tensor *x, *w, *b, *xb;
} dsetup;

static void setup(const dcase *c, uint32_t seed, dsetup *s) {
    const int64_t xs[4] = {c->N, c->C, c->H, c->W}, ws[4] = {c->C, 1, c->KH, c->KW};
    s->st[0] = c->sh, s->st[1] = c->sw;
    s->pd[0] = c->ph, s->pd[1] = c->pw;
    s->dl[0] = c->dh, s->dl[1] = c->dw;
    s->x = mft_randn(4, xs, MFT_F32, CT, seed);
    s->w = mft_randn(4, ws, MFT_F32, CT, seed + 1);
    s->b = c->bias ? mft_randn(1, &c->C, MFT_F32, CT, seed + 2) : NULL;
    s->xb = mft_to_format(s->x, B16);
}

static mft_tensor *dw_fwd(const dsetup *s, const mft_tensor *x, const mft_tensor *w, int64_t C) {
    return mft_conv2d(x, w, s->b, s->st, s->pd, s->dl, C);
}

static void test_forward(void) {
    for (int i = 0; i < NCASES; i++) {
        const dcase *c = &g_cases[i];
        dsetup s;
        setup(c, 100 + 10 * (uint32_t)i, &s);
        mft_tensor *ref = dw_fwd(&s, s.x, s.w, c->C);
        mft_tensor *xcl = mft_to_format(s.x, CL);
        mft_tensor *rcl = dw_fwd(&s, xcl, s.w, c->C);
        mft_conversion_counts_reset();
        mft_tensor *y = dw_fwd(&s, s.xb, s.w, c->C);
        CHECK_MSG(conversions() == 0, "case %d: %lld conversions", i, (long long)conversions());
        CHECK_MSG(c->C == 1 || kernel_is("nchw16c.f32.depthwise"), "case %d: kernel %s", i,
                  mft_dispatch_last() ? mft_dispatch_last()->kernel : "?");
        CHECK_MSG(tu_in_format(y, B16), "case %d: not nChw16c with zero pads", i);
        CHECK_MSG(tu_close_rel(y, ref, 1e-5), "case %d: differs from NCHW", i);
        CHECK_MSG(tu_close_rel(y, rcl, 1e-5), "case %d: differs from NHWC", i);
        mft_set_num_threads(1);
        mft_tensor *y1 = dw_fwd(&s, s.xb, s.w, c->C);
        mft_set_num_threads(2);
        mft_tensor *y2 = dw_fwd(&s, s.xb, s.w, c->C);
        CHECK_MSG(bits_equal(y1, y2) && bits_equal(y1, y), "case %d: thread counts differ", i);
        mft_tensor *ts[] = {s.x, s.w, s.b, s.xb, ref, xcl, rcl, y, y1, y2};
        release_all(ts, sizeof ts / sizeof ts[0]);
    }
    mft_set_num_threads(0);
}

static mft_status dw_bwd(const dsetup *s, const mft_tensor *go, const mft_tensor *x, int64_t C,
                         mft_tensor **gx, mft_tensor **gw, mft_tensor **gb) {
    return mft_conv2d_backward(go, x, s->w, s->st, s->pd, s->dl, C, gx, gw, gb);
}

static void test_backward(void) {
    for (int i = 0; i < NCASES; i++) {
        const dcase *c = &g_cases[i];
        dsetup s;
        setup(c, 400 + 10 * (uint32_t)i, &s);
        mft_tensor *y = dw_fwd(&s, s.x, s.w, c->C);
        mft_tensor *go = y ? mft_randn(4, mft_tensor_sizes(y), MFT_F32, CT, 7 + (uint32_t)i) : NULL;
        mft_tensor *gob = go ? mft_to_format(go, B16) : NULL;
        mft_tensor *r[3] = {NULL, NULL, NULL}, *b[3] = {NULL, NULL, NULL};
        TU_OK_S(dw_bwd(&s, go, s.x, c->C, &r[0], &r[1], &r[2]));
        mft_conversion_counts_reset();
        TU_OK_S(dw_bwd(&s, gob, s.xb, c->C, &b[0], &b[1], &b[2]));
        CHECK_MSG(conversions() == 0, "case %d: %lld conversions", i, (long long)conversions());
        CHECK_MSG(tu_in_format(b[0], B16), "case %d: grad_x not nChw16c with zero pads", i);
        CHECK_MSG(tu_in_format(b[1], CT) && tu_in_format(b[2], CT), "case %d: grad_w/b format", i);
        static const char *const what[3] = {"grad_x", "grad_w", "grad_b"};
        for (int k = 0; k < 3; k++)
            CHECK_MSG(tu_close_rel(b[k], r[k], 1e-5), "case %d: %s differs", i, what[k]);
        /* each gradient alone: native, the same bits */
        for (int k = 0; k < 3; k++) {
            mft_tensor *o[3] = {NULL, NULL, NULL};
            mft_conversion_counts_reset();
            TU_OK_S(dw_bwd(&s, gob, s.xb, c->C, k == 0 ? &o[0] : NULL, k == 1 ? &o[1] : NULL,
                           k == 2 ? &o[2] : NULL));
            CHECK_MSG(conversions() == 0 && bits_equal(o[k], b[k]), "case %d: %s alone", i,
                      what[k]);
            mft_tensor_release(o[k]);
        }
        mft_tensor *t1[3] = {NULL, NULL, NULL}, *t2[3] = {NULL, NULL, NULL};
        mft_set_num_threads(1);
        TU_OK_S(dw_bwd(&s, gob, s.xb, c->C, &t1[0], &t1[1], &t1[2]));
        mft_set_num_threads(2);
        TU_OK_S(dw_bwd(&s, gob, s.xb, c->C, &t2[0], &t2[1], &t2[2]));
        for (int k = 0; k < 3; k++)
            CHECK_MSG(bits_equal(t1[k], t2[k]) && bits_equal(t1[k], b[k]),
                      "case %d: thread counts differ in %s", i, what[k]);
        mft_tensor *ts[] = {s.x, s.w, s.b, s.xb, y, go, gob, r[0], r[1], r[2], b[0], b[1], b[2],
                            t1[0], t1[1], t1[2], t2[0], t2[1], t2[2]};
        release_all(ts, sizeof ts / sizeof ts[0]);
    }
    mft_set_num_threads(0);
}

/* inf in x and in grad_out: pad lanes of y and grad_x stay exact zeros */
static void test_inf_pads(void) {
    const dcase c = {1, 17, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, true};
    dsetup s;
    setup(&c, 11, &s);
    mft_tensor *xi = mft_contiguous(s.x, CT);
    ((float *)mft_tensor_data(xi))[16 * 64 + 9] = INFINITY; /* channel 16: the last block */
    mft_tensor *xib = mft_to_format(xi, B16);
    mft_tensor *y = dw_fwd(&s, xib, s.w, c.C);
    CHECK_MSG(tu_in_format(y, B16), "forward: pad lanes not zero");
    mft_tensor *gx = NULL;
    TU_OK_S(dw_bwd(&s, xib, s.xb, c.C, &gx, NULL, NULL)); /* grad_out = x with an inf */
    CHECK_MSG(tu_in_format(gx, B16), "backward_input: pad lanes not zero");
    mft_tensor *ts[] = {s.x, s.w, s.b, s.xb, xi, xib, y, gx};
    release_all(ts, sizeof ts / sizeof ts[0]);
}

/* a channels-last weight (other strides) is read in place */
static void test_weight_strides(void) {
    const dcase c = {2, 33, 9, 10, 3, 5, 1, 1, 1, 2, 1, 1, true};
    dsetup s;
    setup(&c, 21, &s);
    mft_tensor *wcl = mft_to_format(s.w, CL);
    mft_tensor *ref = dw_fwd(&s, s.x, s.w, c.C);
    mft_conversion_counts_reset();
    mft_tensor *y = dw_fwd(&s, s.xb, wcl, c.C);
    CHECK_MSG(conversions() == 0 && kernel_is("depthwise"), "channels-last weight not native");
    CHECK(tu_in_format(y, B16) && tu_close_rel(y, ref, 1e-5));
    mft_tensor *ts[] = {s.x, s.w, s.b, s.xb, wcl, ref, y};
    release_all(ts, sizeof ts / sizeof ts[0]);
}

/* multiplier 2 and non-depthwise groups keep the counted fallback */
static void test_fallback_cases(void) {
    const int64_t xs[4] = {2, 16, 7, 7}, one[2] = {1, 1};
    const int64_t wm[4] = {32, 1, 3, 3}, wg[4] = {16, 4, 3, 3};
    mft_tensor *x = mft_randn(4, xs, MFT_F32, CT, 1), *xb = mft_to_format(x, B16);
    mft_tensor *w2 = mft_randn(4, wm, MFT_F32, CT, 2), *w4 = mft_randn(4, wg, MFT_F32, CT, 3);
    mft_tensor *r2 = mft_conv2d(x, w2, NULL, one, one, one, 16);
    mft_tensor *r4 = mft_conv2d(x, w4, NULL, one, one, one, 4);
    mft_conversion_counts_reset();
    mft_tensor *y2 = mft_conv2d(xb, w2, NULL, one, one, one, 16);
    CHECK(fallbacks() > 0 && tu_in_format(y2, B16) && tu_close_rel(y2, r2, 1e-5));
    mft_conversion_counts_reset();
    mft_tensor *y4 = mft_conv2d(xb, w4, NULL, one, one, one, 4);
    CHECK(fallbacks() > 0 && tu_in_format(y4, B16) && tu_close_rel(y4, r4, 1e-5));
    mft_tensor *ts[] = {x, xb, w2, w4, r2, r4, y2, y4};
    release_all(ts, sizeof ts / sizeof ts[0]);
}

/* autograd: the native forward on the tape, its backward native too */
static void test_autograd(void) {
    const dcase c = {2, 17, 9, 8, 3, 3, 2, 2, 1, 1, 1, 1, true};
    dsetup s;
    setup(&c, 31, &s);
    TU_OK_S(mft_tensor_set_requires_grad(s.x, true));
    TU_OK_S(mft_tensor_set_requires_grad(s.xb, true));
    TU_OK_S(mft_tensor_set_requires_grad(s.w, true));
    TU_OK_S(mft_tensor_set_requires_grad(s.b, true));
    TU_OK_S(mft_tape_begin());
    mft_tensor *y = dw_fwd(&s, s.x, s.w, c.C);
    mft_tensor *go = y ? mft_randn(4, mft_tensor_sizes(y), MFT_F32, CT, 32) : NULL;
    mft_tensor *gob = go ? mft_to_format(go, B16) : NULL;
    TU_OK_S(mft_backward(y, go));
    TU_OK_S(mft_tape_end());
    mft_tensor *gx = mft_tensor_retain(mft_tensor_grad(s.x));
    mft_tensor *gw = mft_tensor_retain(mft_tensor_grad(s.w));
    mft_tensor *gb = mft_tensor_retain(mft_tensor_grad(s.b));
    TU_OK_S(mft_tensor_set_grad(s.w, NULL));
    TU_OK_S(mft_tensor_set_grad(s.b, NULL));
    mft_conversion_counts_reset();
    TU_OK_S(mft_tape_begin());
    mft_tensor *yb = dw_fwd(&s, s.xb, s.w, c.C);
    TU_OK_S(mft_backward(yb, gob));
    TU_OK_S(mft_tape_end());
    CHECK_MSG(conversions() == 0, "%lld conversions", (long long)conversions());
    CHECK(tu_in_format(yb, B16) && tu_in_format(mft_tensor_grad(s.xb), B16));
    CHECK(tu_close_rel(mft_tensor_grad(s.xb), gx, 1e-5));
    CHECK(tu_close_rel(mft_tensor_grad(s.w), gw, 1e-5));
    CHECK(tu_close_rel(mft_tensor_grad(s.b), gb, 1e-5));
    mft_tensor *ts[] = {s.x, s.w, s.b, s.xb, y, go, gob, gx, gw, gb, yb};
    release_all(ts, sizeof ts / sizeof ts[0]);
}

int main(void) {
    RUN(test_forward);
    RUN(test_backward);
    RUN(test_inf_pads);
    RUN(test_weight_strides);
    RUN(test_fallback_cases);
    RUN(test_autograd);
    TEST_MAIN_END();
}
