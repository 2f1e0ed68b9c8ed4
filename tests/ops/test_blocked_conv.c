/* tests/ops/test_blocked_conv.c — native nChw16c F32 conv2d (ops/conv/blocked16.c,
 * Note [nChw16c direct convolution]):
 *   - forward on packed nChw16c x with a plain weight and bias equals the
 *     plain call (within 1e-5 relative) for C in {1, 3, 15, 16, 17, 33, 64},
 *     with the padded copy of x and without (wide rows),
 *     output channels around the block size, strides, paddings, dilations,
 *     kernel sizes, N in {1, 3}; the result is nChw16c with zero pad lanes
 *     and no conversion is counted;
 *   - backward (grad_x for stride 1, grad_w, grad_b) on nChw16c grad_out
 *     and x: the same, grad_x nChw16c, grad_w plain in w's format; stride 2
 *     keeps the counted fallback for grad_x and still agrees;
 *   - 1 and 2 threads give bit-identical results; an inf in x leaves the
 *     pad lanes zero;
 *   - all of it with Winograd on (where it pays) and off;
 *   - the unsupported cases (F64, nChw8c, groups > 1, a weight blocked
 *     other than by 16) still go through the counted fallback;
 *   - autograd through a native conv2d: the gradients match the plain run
 *     and no conversion is counted;
 *   - blocked weights (OIhw16i16o, Ohwi16o; Note [Conv weight maps]): with
 *     nChw16c x and with plain NCHW / NHWC x (the first layer) the result is
 *     nChw16c, bit-identical to the plain-weight nChw16c call, no
 *     conversion; grad_w comes back in the weight's layout with zero pad
 *     lanes, bit-identical to the plain-weight grad_w; grad_x of a plain x
 *     takes the counted fallback and agrees; 1 and 2 threads agree bit for
 *     bit; SGD and Adam steps on a blocked weight equal the plain steps and
 *     keep its pads zero; mismatched sizes and dtypes are clear errors;
 *   - row tiles (Note [nChw16c row tiles]: 3x3 stride 1, OW in {2, 3, 4,
 *     5, 7} against 9, 11, 13, 15; padding 1 and 0, dilation 1 and 2;
 *     C, O in {1, 3, 15, 16, 17, 33, 64}; N 1 and 3): forward and grad_x
 *     bit-identical to a naive loop summing in the kernel's order with
 *     its multiply-add (grad_x of C <= 8: the lanes kernel's order, Note
 *     [nChw16c backward_input by lanes], and its kernel name), plain and
 *     OIhw16i16o weights, zero pad lanes, no conversion, 1 and 2 threads
 *     bit-identical;
 *   - the first layer (Note [nChw16c first-layer forward]: plain NCHW and
 *     NHWC x, C in {1, 2, 3} with at most 9 (tap, channel) pairs, O in
 *     {1, 5, 15, 16, 17, 31, 32, 33, 40, 48, 64}, output rows of 4 to 70
 *     pixels, strides 1 and 2, paddings 0..2, dilation 2): with OIhw16i16o
 *     and Ohwi16o weights, with and without bias, 1 and 2 threads, the
 *     result bit-identical to the naive loop above (stride s), nChw16c
 *     with zero pad lanes, no conversion;
 *   - 1x1 convolutions (Note [nChw16c 1x1 convolution]: every (C, O) of
 *     {1, 3, 15, 16, 17, 33, 64}, planes of 3 to 196 pixels, N 1..3, stride
 *     1 and 2, plain / OIhw16i16o / Ohwi16o weights, bias or not): forward,
 *     grad_x (stride 1), grad_w (also of a plain x) and grad_b bit-identical
 *     to naive loops in the kernels' order, layouts with zero pads, no
 *     conversion, 1 and 2 threads bit-identical;
 *   - Winograd's two forward schedules (Note [Winograd on few tiles]),
 *     forced on few-tile shapes: forward and grad_x with an OIhw16i16o
 *     weight close to the naive loop, 1 and 2 threads and the two
 *     schedules bit-identical; the nChw16c gate at 8 and 12 tiles. */
#include <math.h>
#include <stdlib.h>
#include "harness.h"
#include "test_util.h"

#define CT  MFT_CONTIGUOUS
#define B16 MFT_NCHW16C
#define B8  MFT_NCHW8C

static int64_t conversions(void) { return mft_conversion_counts_get().total; }
static int64_t fallbacks(void) { return mft_conversion_counts_get().count[MFT_CAUSE_FALLBACK]; }

/* t is in fmt and, when blocked, its pad lanes are zero */
static bool in_format(const mft_tensor *t, mft_format fmt) {
    return t && mft_tensor_format(t) == fmt &&
           (!mft_tensor_is_blocked(t) || mft_tensor_check_padding(t) == MFT_OK);
}

/* a (any format) and ref hold the same values within rtol of ref's scale */
static bool close_to(const mft_tensor *a, const mft_tensor *ref, double rtol) {
    if (!a || !ref || !tu_has_sizes(a, mft_tensor_ndim(ref), mft_tensor_sizes(ref))) return false;
    mft_tensor *pa = mft_contiguous(a, CT), *pr = mft_contiguous(ref, CT);
    bool ok = pa && pr;
    if (ok) {
        const float *x = mft_tensor_data(pa), *y = mft_tensor_data(pr);
        const int64_t n = mft_tensor_numel(pr);
        double scale = 1.0, err = 0.0;
        for (int64_t i = 0; i < n; i++) {
            if (fabs(y[i]) > scale) scale = fabs(y[i]);
            if (fabs((double)x[i] - y[i]) > err) err = fabs((double)x[i] - y[i]);
        }
        ok = err <= rtol * scale;
        if (!ok) fprintf(stderr, "  max error %g (scale %g)\n", err, scale);
    }
    mft_tensor_release(pa);
    mft_tensor_release(pr);
    return ok;
}

static bool same(const mft_tensor *a, const mft_tensor *b) {
    return a && b && mft_tensor_hash(a) == mft_tensor_hash(b);
}

typedef struct ccase {
    int64_t N, C, O, H, W, KH, KW, s, p, d;
    bool bias;
} ccase;

static const ccase g_cases[] = {
    {1, 1, 16, 9, 11, 3, 3, 1, 1, 1, true},    {3, 3, 5, 7, 6, 3, 3, 1, 1, 1, true},
    {1, 15, 17, 8, 8, 3, 3, 1, 0, 1, false},   {3, 16, 16, 6, 20, 3, 3, 1, 1, 1, true},
    {1, 17, 33, 5, 17, 3, 3, 2, 1, 1, true},   {3, 33, 40, 9, 9, 1, 1, 1, 0, 1, true},
    {1, 64, 64, 7, 7, 3, 3, 1, 1, 1, true},    {3, 64, 32, 8, 8, 1, 1, 2, 0, 1, false},
    {1, 16, 48, 12, 31, 5, 5, 1, 2, 1, true},  {1, 17, 16, 9, 9, 3, 3, 1, 2, 2, true},
    {3, 3, 16, 10, 10, 7, 7, 2, 3, 1, true},   {1, 33, 1, 6, 5, 2, 3, 1, 0, 1, true},
    {1, 1, 32, 28, 28, 3, 3, 1, 1, 1, true},   {1, 16, 16, 3, 3, 3, 3, 1, 4, 1, true},
    {1, 15, 17, 5, 29, 1, 3, 3, 2, 1, false},  {4, 17, 33, 16, 15, 3, 3, 1, 1, 1, true},
    {1, 33, 3, 6, 7, 3, 3, 1, 1, 1, false},    {1, 3, 15, 10, 10, 7, 7, 2, 3, 1, true},
    {3, 33, 1, 9, 9, 1, 1, 1, 0, 1, true},     {2, 32, 40, 8, 8, 3, 3, 1, 1, 1, true},
    /* wide rows: border pixels at most 1/16 of a row run as one-pixel tiles
     * without the padded copy (Note [nChw16c padded input]) */
    {1, 17, 20, 4, 40, 3, 3, 1, 1, 1, true},   {1, 3, 16, 5, 70, 5, 5, 1, 2, 1, false},
    /* at least 16 block pairs with a plain grad_w: backward_weight items are
     * pairs with all their taps (Note [nChw16c weight-gradient items]),
     * partial blocks on both sides, stride 1 and 2 */
    {2, 65, 50, 6, 7, 3, 3, 1, 1, 1, true},    {1, 48, 90, 9, 9, 3, 3, 2, 1, 1, false},
};
#define NCASES ((int)(sizeof g_cases / sizeof g_cases[0]))

static void test_forward(void) {
    for (int i = 0; i < NCASES; i++) {
        const ccase *c = &g_cases[i];
        const int64_t xs[4] = {c->N, c->C, c->H, c->W}, ws[4] = {c->O, c->C, c->KH, c->KW};
        const int64_t st[2] = {c->s, c->s}, pd[2] = {c->p, c->p}, dl[2] = {c->d, c->d};
        mft_tensor *x = mft_randn(4, xs, MFT_F32, CT, 100 + i);
        mft_tensor *w = mft_randn(4, ws, MFT_F32, CT, 200 + i);
        mft_tensor *b = c->bias ? mft_randn(1, &c->O, MFT_F32, CT, 300 + i) : NULL;
        mft_tensor *xb = mft_to_format(x, B16);
        mft_tensor *ref = mft_conv2d(x, w, b, st, pd, dl, 1);
        mft_conversion_counts_reset();
        mft_tensor *y = mft_conv2d(xb, w, b, st, pd, dl, 1);
        CHECK_MSG(conversions() == 0, "case %d: %lld conversions", i, (long long)conversions());
        CHECK_MSG(in_format(y, B16), "case %d: not nChw16c with zero pads", i);
        CHECK_MSG(close_to(y, ref, 1e-5), "case %d: forward differs", i);
        const mft_dispatch_info *di = mft_dispatch_last();
        CHECK_MSG(di && strstr(di->kernel, "nchw16c"), "case %d: kernel %s", i,
                  di ? di->kernel : "?");
        /* thread-count independent */
        mft_set_num_threads(1);
        mft_tensor *y1 = mft_conv2d(xb, w, b, st, pd, dl, 1);
        mft_set_num_threads(2);
        mft_tensor *y2 = mft_conv2d(xb, w, b, st, pd, dl, 1);
        CHECK_MSG(same(y1, y2) && same(y1, y), "case %d: thread counts differ", i);
        mft_tensor *ts[8] = {x, w, b, xb, ref, y, y1, y2};
        for (int k = 0; k < 8; k++) mft_tensor_release(ts[k]);
    }
    mft_set_num_threads(0);
}

static void test_backward(void) {
    for (int i = 0; i < NCASES; i++) {
        const ccase *c = &g_cases[i];
        const int64_t xs[4] = {c->N, c->C, c->H, c->W}, ws[4] = {c->O, c->C, c->KH, c->KW};
        const int64_t st[2] = {c->s, c->s}, pd[2] = {c->p, c->p}, dl[2] = {c->d, c->d};
        mft_tensor *x = mft_randn(4, xs, MFT_F32, CT, 400 + i);
        mft_tensor *w = mft_randn(4, ws, MFT_F32, CT, 500 + i);
        mft_tensor *y = mft_conv2d(x, w, NULL, st, pd, dl, 1);
        mft_tensor *go = y ? mft_randn(4, mft_tensor_sizes(y), MFT_F32, CT, 600 + i) : NULL;
        mft_tensor *xb = mft_to_format(x, B16), *gob = go ? mft_to_format(go, B16) : NULL;
        mft_tensor *gx = NULL, *gw = NULL, *gb = NULL, *bx = NULL, *bw = NULL, *bb = NULL;
        TU_OK_S(mft_conv2d_backward(go, x, w, st, pd, dl, 1, &gx, &gw, &gb));
        const bool native_gx = c->s == 1 && c->p <= c->d * (c->KH - 1) &&
                               c->p <= c->d * (c->KW - 1);
        mft_conversion_counts_reset();
        TU_OK_S(mft_conv2d_backward(gob, xb, w, st, pd, dl, 1, &bx, &bw, &bb));
        if (native_gx)
            CHECK_MSG(conversions() == 0, "case %d: %lld conversions", i,
                      (long long)conversions());
        else
            CHECK_MSG(fallbacks() > 0, "case %d: no fallback counted", i);
        CHECK_MSG(in_format(bx, B16), "case %d: grad_x not nChw16c with zero pads", i);
        CHECK_MSG(in_format(bw, CT) && in_format(bb, CT), "case %d: grad_w/b format", i);
        CHECK_MSG(close_to(bx, gx, 1e-5), "case %d: grad_x differs", i);
        CHECK_MSG(close_to(bw, gw, 1e-5), "case %d: grad_w differs", i);
        CHECK_MSG(close_to(bb, gb, 1e-5), "case %d: grad_b differs", i);
        /* grad_w and grad_b alone: native whatever the stride */
        mft_tensor *cw = NULL, *cb = NULL;
        mft_conversion_counts_reset();
        TU_OK_S(mft_conv2d_backward(gob, xb, w, st, pd, dl, 1, NULL, &cw, &cb));
        CHECK_MSG(conversions() == 0, "case %d: grad_w alone converts", i);
        CHECK_MSG(native_gx ? same(cw, bw) && same(cb, bb)
                            : close_to(cw, gw, 1e-5) && close_to(cb, gb, 1e-5),
                  "case %d: grad_w alone differs", i);
        /* thread-count independent */
        mft_tensor *t1[3] = {NULL, NULL, NULL}, *t2[3] = {NULL, NULL, NULL};
        mft_set_num_threads(1);
        TU_OK_S(mft_conv2d_backward(gob, xb, w, st, pd, dl, 1, &t1[0], &t1[1], &t1[2]));
        mft_set_num_threads(2);
        TU_OK_S(mft_conv2d_backward(gob, xb, w, st, pd, dl, 1, &t2[0], &t2[1], &t2[2]));
        for (int k = 0; k < 3; k++) CHECK_MSG(same(t1[k], t2[k]), "case %d: threads, grad %d", i, k);
        mft_tensor *ts[] = {x, w, y, go, xb, gob, gx, gw, gb, bx, bw, bb, cw, cb,
                            t1[0], t1[1], t1[2], t2[0], t2[1], t2[2]};
        for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) mft_tensor_release(ts[k]);
    }
    mft_set_num_threads(0);
}

/* an inf in x: the pad lanes of y stay exact zeros (the direct kernel and
 * Winograd store them as zeros, not as 0 * inf) */
static void test_inf_pads(void) {
    const int64_t xs[4] = {1, 16, 8, 8}, ws[4] = {20, 16, 3, 3}, one[2] = {1, 1};
    mft_tensor *x = mft_randn(4, xs, MFT_F32, CT, 11), *w = mft_randn(4, ws, MFT_F32, CT, 12);
    ((float *)mft_tensor_data(x))[3 * 64 + 9] = INFINITY;
    mft_tensor *xb = mft_to_format(x, B16);
    for (int wino = 0; wino < 2; wino++) {
        mft_conv_set_winograd(wino == 1);
        mft_tensor *y = mft_conv2d(xb, w, NULL, one, one, one, 1);
        CHECK_MSG(in_format(y, B16), "winograd %d: pad lanes not zero", wino);
        mft_tensor_release(y);
    }
    mft_conv_set_winograd(true);
    mft_tensor_release(x);
    mft_tensor_release(w);
    mft_tensor_release(xb);
}

/* what keeps the counted fallback (and a weight in nChw16c, which does not) */
static void test_fallback_cases(void) {
    const int64_t xs[4] = {2, 16, 5, 5}, ws[4] = {8, 16, 3, 3}, wg[4] = {8, 8, 3, 3};
    const int64_t one[2] = {1, 1};
    mft_tensor *x = mft_randn(4, xs, MFT_F32, CT, 1), *w = mft_randn(4, ws, MFT_F32, CT, 2);
    mft_tensor *wgr = mft_randn(4, wg, MFT_F32, CT, 3);
    mft_tensor *x64 = mft_randn(4, xs, MFT_F64, B16, 4), *w64 = mft_randn(4, ws, MFT_F64, CT, 5);
    mft_tensor *x8 = mft_to_format(x, B8), *x16 = mft_to_format(x, B16);
    mft_tensor *wb = mft_to_format(w, B16);
    mft_tensor *ref = mft_conv2d(x, w, NULL, one, one, one, 1);
    mft_tensor *refg = mft_conv2d(x, wgr, NULL, one, one, one, 2);
    struct {
        const char *what;
        mft_tensor *y, *ref;
    } r[4];
    mft_conversion_counts_reset();
    r[0].y = mft_conv2d(x64, w64, NULL, one, one, one, 1), r[0].ref = NULL, r[0].what = "F64";
    CHECK(fallbacks() > 0);
    mft_conversion_counts_reset();
    r[1].y = mft_conv2d(x8, w, NULL, one, one, one, 1), r[1].ref = ref, r[1].what = "nChw8c";
    CHECK(fallbacks() > 0 && in_format(r[1].y, B8));
    mft_conversion_counts_reset();
    r[2].y = mft_conv2d(x16, wgr, NULL, one, one, one, 2), r[2].ref = refg, r[2].what = "groups";
    CHECK(fallbacks() > 0 && in_format(r[2].y, B16));
    mft_conversion_counts_reset();
    r[3].y = mft_conv2d(x16, wb, NULL, one, one, one, 1), r[3].ref = ref, r[3].what = "blocked w";
    /* a weight blocked by 16 on I (dim 1): native too, reordered per call */
    CHECK(conversions() == 0 && in_format(r[3].y, B16));
    for (int k = 0; k < 4; k++) {
        CHECK_MSG(r[k].y != NULL, "%s: failed", r[k].what);
        if (r[k].ref) CHECK_MSG(close_to(r[k].y, r[k].ref, 1e-5), "%s: differs", r[k].what);
        mft_tensor_release(r[k].y);
    }
    mft_tensor *ts[] = {x, w, wgr, x64, w64, x8, x16, wb, ref, refg};
    for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) mft_tensor_release(ts[k]);
}

/* autograd: a native conv2d on the tape, its backward native too */
static void test_autograd(void) {
    const int64_t xs[4] = {2, 17, 6, 6}, ws[4] = {20, 17, 3, 3}, one[2] = {1, 1};
    const int64_t os = 20;
    mft_tensor *x = mft_randn(4, xs, MFT_F32, CT, 7), *w = mft_randn(4, ws, MFT_F32, CT, 8);
    mft_tensor *b = mft_randn(1, &os, MFT_F32, CT, 9);
    mft_tensor *xb = mft_to_format(x, B16);
    TU_OK_S(mft_tensor_set_requires_grad(x, true));
    TU_OK_S(mft_tensor_set_requires_grad(xb, true));
    TU_OK_S(mft_tensor_set_requires_grad(w, true));
    TU_OK_S(mft_tensor_set_requires_grad(b, true));
    TU_OK_S(mft_tape_begin());
    mft_tensor *y = mft_conv2d(x, w, b, one, one, one, 1);
    mft_tensor *go = y ? mft_randn(4, mft_tensor_sizes(y), MFT_F32, CT, 10) : NULL;
    mft_tensor *gob = go ? mft_to_format(go, B16) : NULL;
    TU_OK_S(mft_backward(y, go));
    TU_OK_S(mft_tape_end());
    mft_tensor *gx = mft_tensor_retain(mft_tensor_grad(x));
    mft_tensor *gw = mft_tensor_retain(mft_tensor_grad(w));
    mft_tensor *gb = mft_tensor_retain(mft_tensor_grad(b));
    TU_OK_S(mft_tensor_set_grad(w, NULL));
    TU_OK_S(mft_tensor_set_grad(b, NULL));
    mft_conversion_counts_reset();
    TU_OK_S(mft_tape_begin());
    mft_tensor *yb = mft_conv2d(xb, w, b, one, one, one, 1);
    TU_OK_S(mft_backward(yb, gob));
    TU_OK_S(mft_tape_end());
    CHECK_MSG(conversions() == 0, "%lld conversions", (long long)conversions());
    CHECK(in_format(yb, B16) && in_format(mft_tensor_grad(xb), B16));
    CHECK(close_to(mft_tensor_grad(xb), gx, 1e-5));
    CHECK(close_to(mft_tensor_grad(w), gw, 1e-5));
    CHECK(close_to(mft_tensor_grad(b), gb, 1e-5));
    mft_tensor *ts[] = {x, w, b, xb, y, go, gob, gx, gw, gb, yb};
    for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) mft_tensor_release(ts[k]);
}

/* ---------------------------------------------------------------- blocked weights */
static const char *const g_wtags[2] = {"OIhw16i16o", "Ohwi16o"};

/* w in the oneDNN weight layout tag (a new tensor) */
static mft_tensor *to_wtag(const mft_tensor *w, const char *tag) {
    mft_layout l;
    if (mft_layout_from_onednn(4, mft_tensor_sizes(w), tag, &l) != MFT_OK) return NULL;
    return mft_to_layout(w, &l);
}

/* t is laid out packed by the oneDNN tag and its pad lanes are zero */
static bool in_wtag(const mft_tensor *t, const char *tag) {
    mft_layout want, have;
    return t && mft_layout_from_onednn(4, mft_tensor_sizes(t), tag, &want) == MFT_OK &&
           mft_tensor_layout(t, &have) == MFT_OK && mft_layout_equal(&want, &have) &&
           mft_tensor_check_padding(t) == MFT_OK;
}


/* the tensors of weight case i with the weight in layout g_wtags[t]: x and
 * w plain (seeds from seed), x in nChw16c, w blocked; the arrays of c */
typedef struct wcase {
    const ccase *c;
    int64_t st[2], pd[2], dl[2];
    mft_tensor *x, *w, *xb, *wb;
} wcase;

static wcase wcase_make(int i, int t, uint64_t seed) {
    const ccase *c = &g_cases[i];
    const int64_t xs[4] = {c->N, c->C, c->H, c->W}, ws[4] = {c->O, c->C, c->KH, c->KW};
    wcase r = {c, {c->s, c->s}, {c->p, c->p}, {c->d, c->d}, NULL, NULL, NULL, NULL};
    r.x = mft_randn(4, xs, MFT_F32, CT, seed + (uint64_t)i);
    r.w = mft_randn(4, ws, MFT_F32, CT, seed + 100 + (uint64_t)i);
    r.xb = mft_to_format(r.x, B16);
    r.wb = to_wtag(r.w, g_wtags[t]);
    return r;
}

static void wcase_free(wcase *r) {
    mft_tensor *ts[4] = {r->x, r->w, r->xb, r->wb};
    for (int k = 0; k < 4; k++) mft_tensor_release(ts[k]);
}

/* ---------------------------------------------------------------- row tiles */
/* the direct kernel's multiply-add: fused where the target has FMA (as
 * its AVX-512 and portable tiles are), else rounded twice */
#ifdef FP_FAST_FMAF
#define EXACT_MADD(a, b, c) fmaf(a, b, c)
#else
#define EXACT_MADD(a, b, c) ((a) * (b) + (c))
#endif

/* y (N, O, OH, OW) = conv(x, w) + b, stride s, in the direct kernel's
 * order (Note [nChw16c direct convolution]): each element starts at its
 * bias and adds x * w (EXACT_MADD) over (input block of 16, kh, kw, channel),
 * taps outside x skipped. x (N, C, H, W) and w (O, C, KH, KW) contiguous;
 * y a new contiguous tensor. */
static mft_tensor *exact_conv(const mft_tensor *xt, const mft_tensor *wt, const mft_tensor *bt,
                              int64_t s, int64_t p, int64_t d) {
    const int64_t *xs = mft_tensor_sizes(xt), *ws = mft_tensor_sizes(wt);
    const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], O = ws[0], KH = ws[2], KW = ws[3];
    const int64_t ys[4] = {N, O, (H + 2 * p - d * (KH - 1) - 1) / s + 1,
                           (W + 2 * p - d * (KW - 1) - 1) / s + 1};
    mft_tensor *yt = mft_empty(4, ys, MFT_F32, CT);
    if (!yt) return NULL;
    const float *x = mft_tensor_data(xt), *w = mft_tensor_data(wt);
    const float *b = bt ? mft_tensor_data(bt) : NULL;
    float *y = mft_tensor_data(yt);
    for (int64_t n = 0; n < N; n++)
        for (int64_t o = 0; o < O; o++)
            for (int64_t oh = 0; oh < ys[2]; oh++)
                for (int64_t ow = 0; ow < ys[3]; ow++) {
                    float acc = b ? b[o] : 0.0f;
                    for (int64_t cb = 0; cb < C; cb += 16)
                        for (int64_t kh = 0; kh < KH; kh++)
                            for (int64_t kw = 0; kw < KW; kw++) {
                                const int64_t ih = oh * s - p + kh * d, iw = ow * s - p + kw * d;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                for (int64_t c = cb; c < C && c < cb + 16; c++)
                                    acc = EXACT_MADD(x[((n * C + c) * H + ih) * W + iw],
                                                     w[((o * C + c) * KH + kh) * KW + kw], acc);
                            }
                    y[((n * O + o) * ys[2] + oh) * ys[3] + ow] = acc;
                }
    return yt;
}

/* w (O, C, KH, KW) -> w' (C, O, KH, KW), w'(c, o, kh, kw) = w(o, c, KH-1-kh,
 * KW-1-kw): grad_x of a stride-1 conv is the conv of grad_y with w' */
static mft_tensor *flip_transpose(const mft_tensor *wt) {
    const int64_t *s = mft_tensor_sizes(wt);
    const int64_t O = s[0], C = s[1], KH = s[2], KW = s[3], ts[4] = {C, O, KH, KW};
    mft_tensor *r = mft_empty(4, ts, MFT_F32, CT);
    if (!r) return NULL;
    const float *w = mft_tensor_data(wt);
    float *v = mft_tensor_data(r);
    for (int64_t o = 0; o < O; o++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t kh = 0; kh < KH; kh++)
                for (int64_t kw = 0; kw < KW; kw++)
                    v[((c * O + o) * KH + kh) * KW + kw] =
                        w[((o * C + c) * KH + (KH - 1 - kh)) * KW + (KW - 1 - kw)];
    return r;
}

/* grad_x (N, C, H, W) of a stride-1 convolution with padding p and
 * dilation d from go (N, O, OH, OW) and w (O, C, KH, KW), both contiguous,
 * in the order of Note [nChw16c backward_input by lanes]: per lane l of 16,
 * s[l] adds go * w (EXACT_MADD) over (output block, kh, kw) in order, the
 * taps outside go skipped, lanes past O adding 0 * 0; then the lanes are
 * added (l, l + 8), (l, l + 4), (l, l + 2), (l, l + 1). */
static mft_tensor *exact_gx_lanes(const mft_tensor *got, const mft_tensor *wt, int64_t H,
                                  int64_t W, int64_t p, int64_t d) {
    const int64_t *gs = mft_tensor_sizes(got), *ws = mft_tensor_sizes(wt);
    const int64_t N = gs[0], O = gs[1], OH = gs[2], OW = gs[3], C = ws[1], KH = ws[2], KW = ws[3];
    const int64_t xs[4] = {N, C, H, W};
    mft_tensor *r = mft_empty(4, xs, MFT_F32, CT);
    if (!r) return NULL;
    const float *g = mft_tensor_data(got), *w = mft_tensor_data(wt);
    float *x = mft_tensor_data(r);
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t ih = 0; ih < H; ih++)
                for (int64_t iw = 0; iw < W; iw++) {
                    float s[16] = {0};
                    for (int64_t ob = 0; ob < (O + 15) / 16; ob++)
                        for (int64_t kh = 0; kh < KH; kh++) {
                            const int64_t oh = ih + p - kh * d;
                            if (oh < 0 || oh >= OH) continue;
                            for (int64_t kw = 0; kw < KW; kw++) {
                                const int64_t ow = iw + p - kw * d;
                                if (ow < 0 || ow >= OW) continue;
                                for (int l = 0; l < 16; l++) {
                                    const int64_t o = ob * 16 + l;
                                    const float gv = o < O ? g[((n * O + o) * OH + oh) * OW + ow]
                                                           : 0.0f;
                                    const float wv =
                                        o < O ? w[((o * C + c) * KH + kh) * KW + kw] : 0.0f;
                                    s[l] = EXACT_MADD(gv, wv, s[l]);
                                }
                            }
                        }
                    for (int step = 8; step >= 1; step /= 2)
                        for (int l = 0; l < step; l++) s[l] = s[l] + s[l + step];
                    x[((n * C + c) * H + ih) * W + iw] = s[0];
                }
    return r;
}

/* whether backward_input takes the lanes kernel (AVX-512 builds, x of at
 * most 8 channels) */
static bool lanes_bwd_in(int64_t C) {
#if defined(__AVX512F__)
    return C <= 8;
#else
    (void)C;
    return false;
#endif
}

/* t (nChw16c) holds exactly ref's values */
static bool same_as(const mft_tensor *t, const mft_tensor *ref) {
    mft_tensor *rb = ref ? mft_to_format(ref, B16) : NULL;
    const bool ok = same(t, rb);
    mft_tensor_release(rb);
    return ok;
}

/* 3x3 stride 1: rows of OW <= 7 pixels run several to a tile (Note [nChw16c
 * row tiles]), 9 and 13 one to a tile; padding 1 (the padded copy) and 0 */
typedef struct rcase {
    int64_t N, C, O, H, W, p, d;
} rcase;
static const rcase g_rcases[] = {
    {1, 16, 16, 7, 7, 1, 1},  {3, 17, 33, 6, 5, 1, 1},  {1, 33, 17, 9, 3, 1, 1},
    {3, 64, 64, 7, 9, 1, 1},  {1, 16, 17, 5, 13, 1, 1}, {1, 17, 16, 9, 9, 1, 2},
    {3, 33, 64, 8, 7, 1, 2},  {1, 64, 33, 6, 4, 1, 2},  {1, 16, 16, 9, 9, 0, 1},
    {1, 1, 17, 6, 6, 1, 1},   {3, 3, 16, 7, 4, 1, 1},   {1, 15, 16, 5, 2, 1, 1},
    {3, 17, 33, 11, 15, 1, 2}, {1, 33, 16, 4, 11, 1, 2}, {3, 16, 64, 3, 7, 0, 1},
};

static void test_row_tiles(void) {
    mft_conv_set_winograd(false); /* the direct kernel on every case */
    for (int i = 0; i < (int)(sizeof g_rcases / sizeof g_rcases[0]); i++) {
        const rcase *c = &g_rcases[i];
        const int64_t xs[4] = {c->N, c->C, c->H, c->W}, ws[4] = {c->O, c->C, 3, 3};
        const int64_t st[2] = {1, 1}, pd[2] = {c->p, c->p}, dl[2] = {c->d, c->d};
        mft_tensor *x = mft_randn(4, xs, MFT_F32, CT, 1000 + i);
        mft_tensor *w = mft_randn(4, ws, MFT_F32, CT, 1100 + i);
        mft_tensor *b = mft_randn(1, &c->O, MFT_F32, CT, 1200 + i);
        mft_tensor *xb = mft_to_format(x, B16), *wb = to_wtag(w, "OIhw16i16o");
        mft_tensor *ref = exact_conv(x, w, b, 1, c->p, c->d);
        mft_tensor *go = ref ? mft_randn(4, mft_tensor_sizes(ref), MFT_F32, CT, 1300 + i) : NULL;
        mft_tensor *gob = go ? mft_to_format(go, B16) : NULL, *wf = flip_transpose(w);
        mft_tensor *gref = NULL;
        if (go)
            gref = lanes_bwd_in(c->C) ? exact_gx_lanes(go, w, c->H, c->W, c->p, c->d)
                                      : exact_conv(go, wf, NULL, 1, 2 * c->d - c->p, c->d);
        mft_conversion_counts_reset();
        mft_tensor *y = mft_conv2d(xb, w, b, st, pd, dl, 1);
        mft_tensor *yw = mft_conv2d(xb, wb, b, st, pd, dl, 1);
        mft_tensor *gx = NULL, *gxw = NULL;
        TU_OK_S(mft_conv2d_backward(gob, xb, w, st, pd, dl, 1, &gx, NULL, NULL));
        const mft_dispatch_info *di = mft_dispatch_last();
        CHECK_MSG(di && (strstr(di->kernel, "backward_input.nchw16c.f32.lanes") != NULL) ==
                            lanes_bwd_in(c->C),
                  "row case %d: grad_x ran %s", i, di ? di->kernel : "?");
        TU_OK_S(mft_conv2d_backward(gob, xb, wb, st, pd, dl, 1, &gxw, NULL, NULL));
        CHECK_MSG(conversions() == 0, "row case %d: %lld conversions", i,
                  (long long)conversions());
        CHECK_MSG(in_format(y, B16) && in_format(yw, B16) && in_format(gx, B16) &&
                      in_format(gxw, B16),
                  "row case %d: not nChw16c with zero pads", i);
        CHECK_MSG(same_as(y, ref) && same(yw, y), "row case %d: forward not exact", i);
        CHECK_MSG(same_as(gx, gref) && same(gxw, gx), "row case %d: grad_x not exact", i);
        mft_tensor *t[2][2] = {{NULL, NULL}, {NULL, NULL}};
        for (int k = 0; k < 2; k++) {
            mft_set_num_threads(k + 1);
            t[k][0] = mft_conv2d(xb, wb, b, st, pd, dl, 1);
            TU_OK_S(mft_conv2d_backward(gob, xb, w, st, pd, dl, 1, &t[k][1], NULL, NULL));
        }
        mft_set_num_threads(0);
        CHECK_MSG(same(t[0][0], y) && same(t[1][0], y) && same(t[0][1], gx) && same(t[1][1], gx),
                  "row case %d: thread counts differ", i);
        mft_tensor *ts[] = {x,  w,   b, xb, wb,      ref,     go,      gob,     wf,
                            gref, y, yw, gx, gxw, t[0][0], t[0][1], t[1][0], t[1][1]};
        for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) mft_tensor_release(ts[k]);
    }
    mft_conv_set_winograd(true);
}

/* the first layer (Note [nChw16c first-layer forward]): a plain x with at
 * most 9 (tap, channel) pairs; rows narrower than, equal to and wider than
 * the 6- and 12-pixel groups, widths that are no multiple of them (the
 * overlapping last group), one and two output blocks, odd counts */
typedef struct fcase {
    int64_t N, C, O, H, W, KH, KW, s, p, d;
} fcase;
static const fcase g_fcases[] = {
    {2, 1, 32, 28, 28, 3, 3, 1, 1, 1}, {1, 1, 17, 9, 11, 3, 3, 1, 1, 1},
    {3, 1, 16, 5, 5, 3, 3, 1, 1, 1},   {1, 1, 33, 8, 6, 3, 3, 1, 0, 1},
    {1, 1, 5, 7, 13, 3, 3, 1, 1, 1},   {2, 1, 48, 12, 19, 3, 3, 2, 1, 1},
    {1, 1, 31, 10, 14, 3, 3, 1, 2, 2}, {1, 3, 40, 6, 9, 1, 1, 1, 0, 1},
    {1, 2, 17, 7, 16, 2, 2, 1, 1, 1},  {3, 1, 1, 6, 30, 1, 1, 1, 0, 1},
    {1, 1, 64, 4, 70, 3, 3, 1, 1, 1},  {1, 3, 15, 9, 8, 1, 3, 2, 1, 1},
};

static void test_first_layer(void) {
    for (int i = 0; i < (int)(sizeof g_fcases / sizeof g_fcases[0]); i++) {
        const fcase *c = &g_fcases[i];
        const int64_t xs[4] = {c->N, c->C, c->H, c->W}, ws[4] = {c->O, c->C, c->KH, c->KW};
        const int64_t st[2] = {c->s, c->s}, pd[2] = {c->p, c->p}, dl[2] = {c->d, c->d};
        mft_tensor *x = mft_randn(4, xs, MFT_F32, CT, 2000 + i);
        mft_tensor *w = mft_randn(4, ws, MFT_F32, CT, 2100 + i);
        mft_tensor *b = mft_randn(1, &c->O, MFT_F32, CT, 2200 + i);
        mft_tensor *xl = mft_to_format(x, MFT_CHANNELS_LAST);
        mft_tensor *ref = exact_conv(x, w, b, c->s, c->p, c->d);
        mft_tensor *ref0 = exact_conv(x, w, NULL, c->s, c->p, c->d);
        for (int t = 0; t < 3; t++) { /* OIhw16i16o, Ohwi16o, the plain weight */
            mft_tensor *wt = t < 2 ? to_wtag(w, g_wtags[t]) : mft_tensor_retain(w);
            mft_conversion_counts_reset();
            mft_tensor *y[2][2], *yb = NULL;
            for (int k = 0; k < 2; k++) {
                mft_set_num_threads(k + 1);
                y[k][0] = mft_conv2d(x, wt, b, st, pd, dl, 1);
                y[k][1] = mft_conv2d(xl, wt, b, st, pd, dl, 1);
            }
            mft_set_num_threads(0);
            if (t < 2) yb = mft_conv2d(x, wt, NULL, st, pd, dl, 1);
            CHECK_MSG(t == 2 || conversions() == 0, "first case %d w%d: %lld conversions", i, t,
                      (long long)conversions());
            for (int k = 0; k < 2; k++)
                for (int f = 0; f < 2; f++) {
                    CHECK_MSG(t == 2 || in_format(y[k][f], B16),
                              "first case %d w%d: not nChw16c with zero pads", i, t);
                    if (t < 2)
                        CHECK_MSG(same_as(y[k][f], ref),
                                  "first case %d w%d, %d threads, x %s: not exact", i, t, k + 1,
                                  f ? "NHWC" : "NCHW");
                    else
                        CHECK_MSG(close_to(y[k][f], ref, 1e-5), "first case %d: plain weight", i);
                }
            CHECK_MSG(t == 2 || same_as(yb, ref0), "first case %d w%d: no bias, not exact", i, t);
            mft_tensor *ts[] = {wt, y[0][0], y[0][1], y[1][0], y[1][1], yb};
            for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) mft_tensor_release(ts[k]);
        }
        mft_tensor *ts[] = {x, w, b, xl, ref, ref0};
        for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) mft_tensor_release(ts[k]);
    }
}

static void test_blocked_weight_forward(void) {
    for (int i = 0; i < NCASES; i++)
        for (int t = 0; t < 2; t++) {
            wcase k = wcase_make(i, t, 700);
            const ccase *c = k.c;
            const int64_t *st = k.st, *pd = k.pd, *dl = k.dl;
            mft_tensor *x = k.x, *w = k.w, *xb = k.xb, *wb = k.wb;
            mft_tensor *b = c->bias ? mft_randn(1, &c->O, MFT_F32, CT, 900 + i) : NULL;
            mft_tensor *xl = mft_to_format(x, MFT_CHANNELS_LAST);
            CHECK_MSG(in_wtag(wb, g_wtags[t]), "case %d %s: weight layout", i, g_wtags[t]);
            mft_tensor *ref = mft_conv2d(x, w, b, st, pd, dl, 1);
            mft_tensor *yp = mft_conv2d(xb, w, b, st, pd, dl, 1); /* plain-weight nChw16c */
            mft_conversion_counts_reset();
            mft_tensor *y = mft_conv2d(xb, wb, b, st, pd, dl, 1);
            mft_tensor *y0 = mft_conv2d(x, wb, b, st, pd, dl, 1);
            mft_tensor *yl = mft_conv2d(xl, wb, b, st, pd, dl, 1);
            CHECK_MSG(conversions() == 0, "case %d %s: %lld conversions", i, g_wtags[t],
                      (long long)conversions());
            CHECK_MSG(in_format(y, B16) && in_format(y0, B16) && in_format(yl, B16),
                      "case %d %s: not nChw16c with zero pads", i, g_wtags[t]);
            CHECK_MSG(same(y, yp), "case %d %s: differs from the plain weight", i, g_wtags[t]);
            CHECK_MSG(close_to(y, ref, 1e-5) && close_to(y0, ref, 1e-5) && close_to(yl, ref, 1e-5),
                      "case %d %s: forward differs", i, g_wtags[t]);
            mft_set_num_threads(1);
            mft_tensor *y1 = mft_conv2d(xb, wb, b, st, pd, dl, 1);
            mft_tensor *z1 = mft_conv2d(x, wb, b, st, pd, dl, 1);
            mft_set_num_threads(2);
            mft_tensor *y2 = mft_conv2d(xb, wb, b, st, pd, dl, 1);
            mft_tensor *z2 = mft_conv2d(x, wb, b, st, pd, dl, 1);
            CHECK_MSG(same(y1, y2) && same(y1, y) && same(z1, z2) && same(z1, y0),
                      "case %d %s: thread counts differ", i, g_wtags[t]);
            mft_tensor *ts[] = {b, xl, ref, yp, y, y0, yl, y1, z1, y2, z2};
            for (size_t j = 0; j < sizeof ts / sizeof ts[0]; j++) mft_tensor_release(ts[j]);
            wcase_free(&k);
        }
    mft_set_num_threads(0);
}

static void test_blocked_weight_backward(void) {
    for (int i = 0; i < NCASES; i++)
        for (int t = 0; t < 2; t++) {
            wcase k = wcase_make(i, t, 1000);
            const ccase *c = k.c;
            const int64_t *st = k.st, *pd = k.pd, *dl = k.dl;
            mft_tensor *x = k.x, *w = k.w, *xb = k.xb, *wb = k.wb;
            mft_tensor *y = mft_conv2d(x, w, NULL, st, pd, dl, 1);
            mft_tensor *go = y ? mft_randn(4, mft_tensor_sizes(y), MFT_F32, CT, 1200 + i) : NULL;
            mft_tensor *gob = go ? mft_to_format(go, B16) : NULL;
            mft_tensor *gx = NULL, *gw = NULL, *gb = NULL, *px = NULL, *pw = NULL, *pb = NULL;
            mft_tensor *bx = NULL, *bw = NULL, *bb = NULL, *qw = NULL, *qb = NULL;
            TU_OK_S(mft_conv2d_backward(go, x, w, st, pd, dl, 1, &gx, &gw, &gb));
            TU_OK_S(mft_conv2d_backward(gob, xb, w, st, pd, dl, 1, &px, &pw, &pb));
            const bool native_gx = c->s == 1 && c->p <= c->d * (c->KH - 1) &&
                                   c->p <= c->d * (c->KW - 1);
            mft_conversion_counts_reset();
            TU_OK_S(mft_conv2d_backward(gob, xb, wb, st, pd, dl, 1, &bx, &bw, &bb));
            if (native_gx)
                CHECK_MSG(conversions() == 0, "case %d %s: %lld conversions", i, g_wtags[t],
                          (long long)conversions());
            CHECK_MSG(in_format(bx, B16) && in_wtag(bw, g_wtags[t]),
                      "case %d %s: gradient layouts", i, g_wtags[t]);
            CHECK_MSG(close_to(bx, gx, 1e-5) && close_to(bw, gw, 1e-5) && close_to(bb, gb, 1e-5),
                      "case %d %s: gradients differ", i, g_wtags[t]);
            if (native_gx)
                CHECK_MSG(same(bx, px) && same(bw, pw) && same(bb, pb),
                          "case %d %s: differs from the plain weight", i, g_wtags[t]);
            /* the first layer: plain x, grad_w and grad_b only, native */
            mft_conversion_counts_reset();
            TU_OK_S(mft_conv2d_backward(gob, x, wb, st, pd, dl, 1, NULL, &qw, &qb));
            CHECK_MSG(conversions() == 0, "case %d %s: plain x, %lld conversions", i,
                      g_wtags[t], (long long)conversions());
            CHECK_MSG(in_wtag(qw, g_wtags[t]) && close_to(qw, gw, 1e-5) && close_to(qb, gb, 1e-5),
                      "case %d %s: plain x grad_w differs", i, g_wtags[t]);
            /* plain x with grad_x: the counted fallback, grad_x plain */
            mft_tensor *rx = NULL, *rw = NULL;
            mft_conversion_counts_reset();
            TU_OK_S(mft_conv2d_backward(gob, x, wb, st, pd, dl, 1, &rx, &rw, NULL));
            CHECK_MSG(fallbacks() > 0 && in_format(rx, CT) && close_to(rx, gx, 1e-5) &&
                          in_wtag(rw, g_wtags[t]) && close_to(rw, gw, 1e-5),
                      "case %d %s: plain x grad_x", i, g_wtags[t]);
            /* thread-count independent */
            mft_tensor *t1[3] = {NULL, NULL, NULL}, *t2[3] = {NULL, NULL, NULL};
            mft_set_num_threads(1);
            TU_OK_S(mft_conv2d_backward(gob, xb, wb, st, pd, dl, 1, &t1[0], &t1[1], &t1[2]));
            mft_set_num_threads(2);
            TU_OK_S(mft_conv2d_backward(gob, xb, wb, st, pd, dl, 1, &t2[0], &t2[1], &t2[2]));
            for (int j = 0; j < 3; j++)
                CHECK_MSG(same(t1[j], t2[j]), "case %d %s: threads, grad %d", i, g_wtags[t], j);
            mft_tensor *ts[] = {y,  go, gob, gx, gw, gb, px,    pw,    pb,    bx,    bw,   bb,
                                qw, qb, rx,  rw, t1[0], t1[1], t1[2], t2[0], t2[1], t2[2]};
            for (size_t j = 0; j < sizeof ts / sizeof ts[0]; j++) mft_tensor_release(ts[j]);
            wcase_free(&k);
        }
    mft_set_num_threads(0);
}

/* A training step on a blocked weight (autograd, then SGD with momentum or
 * Adam) equals the step on the plain weight, keeps the pad lanes zero and
 * converts nothing. */
static void test_blocked_weight_step(void) {
    const int64_t xs[4] = {2, 3, 8, 8}, ws[4] = {17, 3, 3, 3}, xs2[4] = {2, 17, 8, 8};
    const int64_t ws2[4] = {20, 17, 3, 3}, one[2] = {1, 1};
    for (int opt = 0; opt < 2; opt++)
        for (int layer = 0; layer < 2; layer++) {
            const char *tag = layer == 0 ? "Ohwi16o" : "OIhw16i16o";
            mft_tensor *x = mft_randn(4, layer ? xs2 : xs, MFT_F32, CT, 31 + layer);
            mft_tensor *xin = layer ? mft_to_format(x, B16) : mft_tensor_retain(x);
            mft_tensor *w = mft_randn(4, layer ? ws2 : ws, MFT_F32, CT, 41 + layer);
            mft_tensor *wb = to_wtag(w, tag);
            TU_OK_S(mft_tensor_set_requires_grad(w, true));
            TU_OK_S(mft_tensor_set_requires_grad(wb, true));
            mft_tensor *res[2] = {NULL, NULL};
            for (int k = 0; k < 2; k++) {
                mft_tensor *p = k ? wb : w;
                mft_optimizer *o = NULL;
                if (opt == 0) {
                    const mft_sgd_opts so = {0.1, 0.9, 0.0, 0.01, false};
                    o = mft_sgd_new(1, &p, &so);
                } else {
                    const mft_adam_opts ao = {0.01, 0.9, 0.999, 0.0, 0.0};
                    o = mft_adam_new(1, &p, &ao);
                }
                mft_conversion_counts_reset();
                for (int step = 0; step < 2; step++) {
                    TU_OK_S(mft_tape_begin());
                    mft_tensor *y = mft_conv2d(xin, p, NULL, one, one, one, 1);
                    mft_tensor *go = y ? mft_randn(4, mft_tensor_sizes(y), MFT_F32, B16, 51 + step) : NULL;
                    TU_OK_S(mft_backward(y, go));
                    TU_OK_S(mft_tape_end());
                    if (k) CHECK_MSG(in_wtag(mft_tensor_grad(p), tag), "%s: grad layout", tag);
                    TU_OK_S(mft_optimizer_step(o));
                    mft_optimizer_zero_grad(o);
                    mft_tensor_release(y);
                    mft_tensor_release(go);
                }
                if (k)
                    CHECK_MSG(conversions() == 0, "%s opt %d: %lld conversions", tag, opt,
                              (long long)conversions());
                res[k] = mft_contiguous(p, CT);
                mft_optimizer_free(o);
            }
            CHECK_MSG(in_wtag(wb, tag), "%s opt %d: pads not zero after the steps", tag, opt);
            /* nChw16c x: the same kernels, bit for bit; a plain x runs the
             * plain-weight conv on the NCHW kernels: rounding apart */
            CHECK_MSG(layer ? same(res[0], res[1]) : close_to(res[0], res[1], 1e-5),
                      "%s opt %d: blocked step differs", tag, opt);
            mft_tensor *ts[] = {x, xin, w, wb, res[0], res[1]};
            for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) mft_tensor_release(ts[k]);
        }
}

/* errors and what stays on the fallback */
static void test_blocked_weight_errors(void) {
    const int64_t xs[4] = {2, 16, 5, 5}, ws[4] = {8, 17, 3, 3}, ws2[4] = {8, 16, 3, 3};
    const int64_t one[2] = {1, 1};
    mft_tensor *x = mft_randn(4, xs, MFT_F32, CT, 1), *xb = mft_to_format(x, B16);
    mft_tensor *w17 = mft_randn(4, ws, MFT_F32, CT, 2), *w = mft_randn(4, ws2, MFT_F32, CT, 3);
    mft_tensor *wb17 = to_wtag(w17, "OIhw16i16o"), *wb = to_wtag(w, "OIhw16i16o");
    mft_tensor *w64 = mft_to_dtype(w, MFT_F64);
    mft_tensor *wb64 = w64 ? to_wtag(w64, "OIhw16i16o") : NULL;
    /* mismatched input channels: a clear error naming the sizes */
    mft_tensor *y = mft_conv2d(xb, wb17, NULL, one, one, one, 1);
    CHECK(y == NULL && mft_last_error() == MFT_ERR_SHAPE &&
          strstr(mft_last_error_message(), "mft_conv2d") &&
          strstr(mft_last_error_message(), "17"));
    y = mft_conv2d(x, wb17, NULL, one, one, one, 1);
    CHECK(y == NULL && mft_last_error() == MFT_ERR_SHAPE);
    /* F64 weight with an F32 input */
    y = mft_conv2d(xb, wb64, NULL, one, one, one, 1);
    CHECK(y == NULL && mft_last_error() == MFT_ERR_DTYPE);
    /* grad_out of the wrong sizes */
    mft_tensor *gx = NULL, *gw = NULL;
    CHECK(mft_conv2d_backward(xb, xb, wb, one, one, one, 1, &gx, &gw, NULL) == MFT_ERR_SHAPE);
    CHECK(gx == NULL && gw == NULL);
    /* a weight blocked other than by 16 (OIhw8i8o), or with nChw8c x: the
     * counted fallback, correct values */
    mft_tensor *ref = mft_conv2d(x, w, NULL, one, one, one, 1);
    mft_tensor *w8 = to_wtag(w, "OIhw8i8o"), *x8 = mft_to_format(x, B8);
    mft_conversion_counts_reset();
    mft_tensor *y8 = mft_conv2d(xb, w8, NULL, one, one, one, 1);
    CHECK(fallbacks() > 0 && in_format(y8, B16) && close_to(y8, ref, 1e-5));
    mft_conversion_counts_reset();
    mft_tensor *y88 = mft_conv2d(x8, wb, NULL, one, one, one, 1);
    CHECK(fallbacks() > 0 && in_format(y88, B8) && close_to(y88, ref, 1e-5));
    mft_tensor *ts[] = {x, xb, w17, w, wb17, wb, w64, wb64, ref, w8, x8, y8, y88};
    for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) mft_tensor_release(ts[k]);
}

/* ---------------------------------------------------------------- 1x1 */
/* grad_w (O, C, 1, 1) of a 1x1 convolution with stride s, no padding, in
 * the 1x1 kernel's order (Note [nChw16c 1x1 convolution]): each element
 * starts at 0 and adds x * grad_y (EXACT_MADD) over (n, oh, ow). */
static mft_tensor *exact_gw_1x1(const mft_tensor *xt, const mft_tensor *gt, int64_t s) {
    const int64_t *xs = mft_tensor_sizes(xt), *gs = mft_tensor_sizes(gt);
    const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], O = gs[1], OH = gs[2], OW = gs[3];
    const int64_t ws[4] = {O, C, 1, 1};
    mft_tensor *r = mft_empty(4, ws, MFT_F32, CT);
    if (!r) return NULL;
    const float *x = mft_tensor_data(xt), *g = mft_tensor_data(gt);
    float *w = mft_tensor_data(r);
    for (int64_t o = 0; o < O; o++)
        for (int64_t c = 0; c < C; c++) {
            float acc = 0.0f;
            for (int64_t n = 0; n < N; n++)
                for (int64_t oh = 0; oh < OH; oh++)
                    for (int64_t ow = 0; ow < OW; ow++)
                        acc = EXACT_MADD(x[((n * C + c) * H + oh * s) * W + ow * s],
                                         g[((n * O + o) * OH + oh) * OW + ow], acc);
            w[o * C + c] = acc;
        }
    return r;
}

/* grad_b (O) summed per channel over (n, pixel) in order, from 0 */
static mft_tensor *exact_gb(const mft_tensor *gt) {
    const int64_t *gs = mft_tensor_sizes(gt);
    const int64_t N = gs[0], O = gs[1], S = gs[2] * gs[3];
    mft_tensor *r = mft_empty(1, &O, MFT_F32, CT);
    if (!r) return NULL;
    const float *g = mft_tensor_data(gt);
    float *b = mft_tensor_data(r);
    for (int64_t o = 0; o < O; o++) {
        float acc = 0.0f;
        for (int64_t n = 0; n < N; n++)
            for (int64_t q = 0; q < S; q++) acc += g[(n * O + o) * S + q];
        b[o] = acc;
    }
    return r;
}

/* t (any layout) holds exactly ref's values (ref contiguous) */
static bool same_values(const mft_tensor *t, const mft_tensor *ref) {
    mft_tensor *p = t ? mft_contiguous(t, CT) : NULL;
    const bool ok = p && ref && same(p, ref);
    mft_tensor_release(p);
    return ok;
}

/* 1x1 convolutions (Note [nChw16c 1x1 convolution]): every (C, O) pair of
 * {1, 3, 15, 16, 17, 33, 64}, with plane sizes that are no multiple of the
 * pixel tiles (6, 9, 14, 24) nor of the 48-pixel items, N 1..3, stride 1
 * and 2, plain / OIhw16i16o / Ohwi16o weights, with and without bias:
 * forward, grad_x (stride 1), grad_w and grad_b bit-identical to naive
 * loops in the kernels' order, nChw16c / the weight's layout with zero
 * pads, no conversion, 1 and 2 threads bit-identical. */
/* one 1x1 case (test_1x1): weight wt 0 plain, 1 OIhw16i16o, 2 Ohwi16o */
static void check_1x1(int i, int64_t C, int64_t O, int64_t N, int64_t H, int64_t W, int64_t s,
                      int wt) {
    const int64_t xs[4] = {N, C, H, W}, ws[4] = {O, C, 1, 1};
    const int64_t st[2] = {s, s}, pd[2] = {0, 0}, dl[2] = {1, 1};
    mft_tensor *x = mft_randn(4, xs, MFT_F32, CT, 3000 + i);
    mft_tensor *w = mft_randn(4, ws, MFT_F32, CT, 3100 + i);
    mft_tensor *b = i % 4 ? mft_randn(1, &O, MFT_F32, CT, 3200 + i) : NULL;
    mft_tensor *xb = mft_to_format(x, B16);
    mft_tensor *wb = wt ? to_wtag(w, g_wtags[wt - 1]) : mft_clone(w, CT);
    mft_tensor *ref = exact_conv(x, w, b, s, 0, 1);
    mft_tensor *go = ref ? mft_randn(4, mft_tensor_sizes(ref), MFT_F32, CT, 3300 + i)
                         : NULL;
    mft_tensor *gob = go ? mft_to_format(go, B16) : NULL, *wf = flip_transpose(w);
    mft_tensor *gxref = !go || s != 1  ? NULL
                        : lanes_bwd_in(C) ? exact_gx_lanes(go, w, H, W, 0, 1)
                                          : exact_conv(go, wf, NULL, 1, 0, 1);
    mft_tensor *gwref = go ? exact_gw_1x1(x, go, s) : NULL;
    mft_tensor *gbref = go ? exact_gb(go) : NULL;
    mft_tensor *r[2][4] = {{NULL, NULL, NULL, NULL}, {NULL, NULL, NULL, NULL}};
    for (int k = 0; k < 2; k++) {
        mft_set_num_threads(k + 1);
        mft_conversion_counts_reset();
        r[k][0] = mft_conv2d(xb, wb, b, st, pd, dl, 1);
        TU_OK_S(mft_conv2d_backward(gob, xb, wb, st, pd, dl, 1, s == 1 ? &r[k][1] : NULL,
                                    &r[k][2], &r[k][3]));
        CHECK_MSG(conversions() == 0, "1x1 case %d: %lld conversions", i,
                  (long long)conversions());
    }
    mft_set_num_threads(0);
    CHECK_MSG(in_format(r[0][0], B16) && (s != 1 || in_format(r[0][1], B16)),
              "1x1 case %d: not nChw16c with zero pads", i);
    CHECK_MSG(wt ? in_wtag(r[0][2], g_wtags[wt - 1]) : in_format(r[0][2], CT),
              "1x1 case %d: grad_w layout", i);
    CHECK_MSG(same_as(r[0][0], ref), "1x1 case %d (C %lld O %lld s %lld): forward differs",
              i, (long long)C, (long long)O, (long long)s);
    if (s == 1) CHECK_MSG(same_as(r[0][1], gxref), "1x1 case %d: grad_x not exact", i);
    CHECK_MSG(same_values(r[0][2], gwref), "1x1 case %d: grad_w not exact", i);
    CHECK_MSG(same(r[0][3], gbref), "1x1 case %d: grad_b not exact", i);
    for (int j = 0; j < 4; j++)
        CHECK_MSG((!r[0][j] && !r[1][j]) || same(r[0][j], r[1][j]),
                  "1x1 case %d: threads, result %d", i, j);
    /* grad_w of a plain NCHW x with a blocked weight (native), where the
     * first-layer kernel does not take it (C <= 28: Note [First-layer
     * weight gradient]) */
    if (wt && C > 28) {
        mft_tensor *qw = NULL;
        mft_conversion_counts_reset();
        TU_OK_S(mft_conv2d_backward(gob, x, wb, st, pd, dl, 1, NULL, &qw, NULL));
        CHECK_MSG(conversions() == 0 && same_values(qw, gwref),
                  "1x1 case %d: plain x grad_w not exact", i);
        mft_tensor_release(qw);
    }
    mft_tensor *ts[] = {x,     w,     b,     xb,    wb,      ref,     go,      gob,
                        wf,    gxref, gwref, gbref, r[0][0], r[0][1], r[0][2], r[0][3],
                        r[1][0], r[1][1], r[1][2], r[1][3]};
    for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) mft_tensor_release(ts[k]);
}

static void test_1x1(void) {
    static const int64_t chans[7] = {1, 3, 15, 16, 17, 33, 64};
    static const int64_t planes[5][2] = {{7, 7}, {5, 11}, {14, 14}, {1, 3}, {9, 13}};
    int i = 0;
    for (int ci = 0; ci < 7; ci++)
        for (int oi = 0; oi < 7; oi++, i++)
            check_1x1(i, chans[ci], chans[oi], 1 + i / 6 % 3, planes[i % 5][0], planes[i % 5][1],
                      1 + i % 2, i / 2 % 3);
    /* grad_w with several pixel chunks (23x23, N = 2: 46 rows of 23 pixels,
     * 22 a chunk) and sets of more than 16 items (420 channels: 70 items) */
    check_1x1(i, 420, 64, 2, 23, 23, 1, 1);
}

/* ---------------------------------------------------------------- Winograd schedules
 * Both forward schedules of Winograd F(4x4, 3x3) (Note [Winograd on few
 * tiles]), forced (mft__conv_wino_set_mode(1), then tile blocks and few
 * tiles), on few-tile shapes with an OIhw16i16o weight: C and O odd (17,
 * 33), past one 64-channel weight chunk (80, 130), padding 0 and 1. The
 * forward and grad_x are Winograd's (the kernel name), nChw16c with zero
 * pad lanes, within 1e-5 of the scale of the naive loop (exact_conv; grad_x
 * as the conv of grad_y with the flipped, transposed weight and padding
 * 2 - p), 1 and 2 threads bit-identical, and the two schedules
 * bit-identical to each other. Then the size test's gate on nChw16c: 12
 * output tiles take Winograd, 8 do not. */
void mft__conv_wino_set_mode(int mode);
void mft__conv_wino_set_schedule(int schedule);

static const rcase g_wcases[] = {
    {2, 17, 33, 7, 7, 0, 1}, {2, 17, 33, 7, 7, 1, 1},  {1, 33, 17, 14, 14, 1, 1},
    {3, 80, 40, 7, 5, 1, 1}, {1, 130, 33, 6, 9, 0, 1}, {1, 33, 130, 5, 5, 1, 1},
};

static void test_wino_schedules(void) {
    mft__conv_wino_set_mode(1);
    for (int i = 0; i < (int)(sizeof g_wcases / sizeof g_wcases[0]); i++) {
        const rcase *c = &g_wcases[i];
        const int64_t xs[4] = {c->N, c->C, c->H, c->W}, ws[4] = {c->O, c->C, 3, 3};
        const int64_t st[2] = {1, 1}, pd[2] = {c->p, c->p}, dl[2] = {1, 1};
        mft_tensor *x = mft_randn(4, xs, MFT_F32, CT, 1300 + (uint64_t)i);
        mft_tensor *w = mft_randn(4, ws, MFT_F32, CT, 1400 + (uint64_t)i);
        mft_tensor *b = mft_randn(1, &c->O, MFT_F32, CT, 1500 + (uint64_t)i);
        mft_tensor *ref = x && w && b ? exact_conv(x, w, b, 1, c->p, 1) : NULL;
        mft_tensor *go = ref ? mft_randn(4, mft_tensor_sizes(ref), MFT_F32, CT, 1600 + (uint64_t)i)
                             : NULL;
        mft_tensor *wft = w ? flip_transpose(w) : NULL;
        mft_tensor *gref = go && wft ? exact_conv(go, wft, NULL, 1, 2 - c->p, 1) : NULL;
        mft_tensor *xb = x ? mft_to_format(x, B16) : NULL, *gob = go ? mft_to_format(go, B16) : NULL;
        mft_tensor *wb = w ? to_wtag(w, "OIhw16i16o") : NULL;
        mft_tensor *ys[2][2] = {{NULL, NULL}, {NULL, NULL}}, *gs[2][2] = {{NULL, NULL}, {NULL, NULL}};
        CHECK(gref && xb && gob && wb);
        for (int sc = 0; sc < 2 && gref && xb && gob && wb; sc++) {
            mft__conv_wino_set_schedule(sc + 1);
            for (int t = 0; t < 2; t++) {
                mft_set_num_threads(t + 1);
                ys[sc][t] = mft_conv2d(xb, wb, b, st, pd, dl, 1);
                const mft_dispatch_info *di = mft_dispatch_last();
                CHECK_MSG(di && strstr(di->kernel, "conv2d.nchw16c.f32.winograd_f4x3"),
                          "case %d schedule %d: forward ran %s", i, sc + 1, di ? di->kernel : "?");
                TU_OK_S(mft_conv2d_backward(gob, xb, wb, st, pd, dl, 1, &gs[sc][t], NULL, NULL));
                di = mft_dispatch_last();
                CHECK_MSG(di && strstr(di->kernel, "backward_input.nchw16c.f32.winograd_f4x3"),
                          "case %d schedule %d: grad_x ran %s", i, sc + 1, di ? di->kernel : "?");
            }
            CHECK_MSG(in_format(ys[sc][0], B16) && close_to(ys[sc][0], ref, 1e-5),
                      "case %d schedule %d: forward differs", i, sc + 1);
            CHECK_MSG(in_format(gs[sc][0], B16) && close_to(gs[sc][0], gref, 1e-5),
                      "case %d schedule %d: grad_x differs", i, sc + 1);
            CHECK_MSG(same(ys[sc][0], ys[sc][1]) && same(gs[sc][0], gs[sc][1]),
                      "case %d schedule %d: thread counts differ", i, sc + 1);
        }
        CHECK_MSG(same(ys[0][0], ys[1][0]) && same(gs[0][0], gs[1][0]),
                  "case %d: schedules differ", i);
        mft_tensor *ts[] = {x,  w,   b,  ref, go, wft, gref, xb, gob, wb, ys[0][0], ys[0][1],
                            ys[1][0], ys[1][1], gs[0][0], gs[0][1], gs[1][0], gs[1][1]};
        for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) mft_tensor_release(ts[k]);
    }
    mft__conv_wino_set_schedule(0);
    mft__conv_wino_set_mode(0);
    mft_set_num_threads(0);
    /* the gate (AVX-512 builds; elsewhere Winograd never pays) */
    for (int64_t n = 2; n <= 3; n++) {
        const int64_t xs[4] = {n, 32, 7, 7}, ws[4] = {32, 32, 3, 3}, one[2] = {1, 1};
        mft_tensor *x = mft_randn(4, xs, MFT_F32, B16, 1700), *w = mft_randn(4, ws, MFT_F32, CT, 1701);
        mft_tensor *y = mft_conv2d(x, w, NULL, one, one, one, 1);
        const mft_dispatch_info *di = mft_dispatch_last();
        const bool wino = y && di && strstr(di->kernel, "winograd") != NULL;
#if defined(__AVX512F__)
        CHECK_MSG(wino == (n == 3), "N = %d (%d tiles): winograd %d", (int)n, (int)(4 * n), wino);
#else
        CHECK(!wino);
#endif
        mft_tensor_release(x);
        mft_tensor_release(w);
        mft_tensor_release(y);
    }
}

/* ---------------------------------------------------------------- 3-wide grad_w */
/* grad_w (O, C, KH, KW) of a convolution with strides (sh, sw), paddings
 * (ph, pw), dilations (dh, dw), in the kernels' order (Note [nChw16c
 * 3-wide weight gradient], Note [nChw16c weight-gradient items]): each
 * element starts at 0 and adds x * grad_y (EXACT_MADD) over (n, oh, ow),
 * taps outside x skipped. */
static mft_tensor *exact_gw(const mft_tensor *xt, const mft_tensor *gt, int64_t KH, int64_t KW,
                            const int64_t st[2], const int64_t pd[2], const int64_t dl[2]) {
    const int64_t *xs = mft_tensor_sizes(xt), *gs = mft_tensor_sizes(gt);
    const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], O = gs[1], OH = gs[2], OW = gs[3];
    const int64_t ws[4] = {O, C, KH, KW};
    mft_tensor *r = mft_empty(4, ws, MFT_F32, CT);
    if (!r) return NULL;
    const float *x = mft_tensor_data(xt), *g = mft_tensor_data(gt);
    float *w = mft_tensor_data(r);
    for (int64_t o = 0; o < O; o++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t kh = 0; kh < KH; kh++)
                for (int64_t kw = 0; kw < KW; kw++) {
                    float acc = 0.0f;
                    for (int64_t n = 0; n < N; n++)
                        for (int64_t oh = 0; oh < OH; oh++)
                            for (int64_t ow = 0; ow < OW; ow++) {
                                const int64_t ih = oh * st[0] - pd[0] + kh * dl[0];
                                const int64_t iw = ow * st[1] - pd[1] + kw * dl[1];
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                acc = EXACT_MADD(x[((n * C + c) * H + ih) * W + iw],
                                                 g[((n * O + o) * OH + oh) * OW + ow], acc);
                            }
                    w[((o * C + c) * KH + kh) * KW + kw] = acc;
                }
    return r;
}

/* kernels 3 wide with stride and dilation 1 along W (Note [nChw16c 3-wide
 * weight gradient]): rows of 1 to 13 output pixels, paddings 0..2 on either
 * axis, KH 1..3, stride and dilation 1 and 2 along H, C and O around the
 * 8-channel walks and the 16-lane blocks, fewer and more than 16 block
 * pairs (items of one kernel row or of a whole pair). */
typedef struct w3case {
    int64_t N, C, O, H, W, KH, sh, ph, pw, dh;
} w3case;
static const w3case g_w3cases[] = {
    {1, 16, 16, 7, 7, 3, 1, 1, 1, 1},  {2, 17, 33, 6, 5, 3, 1, 1, 1, 1},
    {1, 3, 16, 5, 3, 3, 1, 1, 1, 1},   {3, 9, 17, 4, 1, 3, 1, 1, 1, 1},
    {1, 33, 15, 8, 2, 2, 2, 0, 2, 1},  {2, 15, 8, 9, 13, 1, 1, 0, 0, 1},
    {1, 8, 40, 7, 4, 3, 2, 2, 0, 2},   {1, 64, 64, 7, 7, 3, 1, 1, 1, 1},
    {2, 65, 50, 5, 6, 3, 1, 1, 2, 1},  {1, 1, 1, 3, 3, 3, 1, 1, 1, 1},
    {3, 24, 31, 6, 9, 3, 2, 1, 1, 2},  {1, 17, 17, 3, 2, 3, 1, 2, 2, 1},
};

static void test_bww3(void) {
    mft_conv_set_winograd(false);
    for (int i = 0; i < (int)(sizeof g_w3cases / sizeof g_w3cases[0]); i++) {
        const w3case *c = &g_w3cases[i];
        const int64_t xs[4] = {c->N, c->C, c->H, c->W}, ws[4] = {c->O, c->C, c->KH, 3};
        const int64_t st[2] = {c->sh, 1}, pd[2] = {c->ph, c->pw}, dl[2] = {c->dh, 1};
        mft_tensor *x = mft_randn(4, xs, MFT_F32, CT, 4000 + (uint64_t)i);
        mft_tensor *w = mft_randn(4, ws, MFT_F32, CT, 4100 + (uint64_t)i);
        /* one x element +inf on the left border: a tap that multiplied it
         * by a grad_y outside the row would make NaN; grad_y positive, so
         * the valid products are +inf, never inf - inf */
        if (x && i % 2 == 0) ((float *)mft_tensor_data(x))[c->W * (c->H / 2)] = INFINITY;
        mft_tensor *y = mft_conv2d(x, w, NULL, st, pd, dl, 1);
        mft_tensor *go = y ? mft_rand(4, mft_tensor_sizes(y), MFT_F32, CT, 4200 + (uint64_t)i)
                           : NULL;
        mft_tensor *xb = x ? mft_to_format(x, B16) : NULL;
        mft_tensor *gob = go ? mft_to_format(go, B16) : NULL;
        mft_tensor *ref = go ? exact_gw(x, go, c->KH, 3, st, pd, dl) : NULL;
        CHECK_MSG(ref && xb && gob, "bww3 case %d: set-up", i);
        for (int wt = 0; wt < 3 && ref && xb && gob; wt++) {
            mft_tensor *wl = wt ? to_wtag(w, g_wtags[wt - 1]) : mft_clone(w, CT);
            mft_tensor *r[2] = {NULL, NULL};
            for (int t = 0; t < 2 && wl; t++) {
                mft_set_num_threads(t + 1);
                mft_conversion_counts_reset();
                TU_OK_S(mft_conv2d_backward(gob, xb, wl, st, pd, dl, 1, NULL, &r[t], NULL));
                CHECK_MSG(conversions() == 0, "bww3 case %d weight %d: %lld conversions", i, wt,
                          (long long)conversions());
                /* the first-layer kernel takes C * KH * 3 <= 12 (one block) */
                const mft_dispatch_info *di = mft_dispatch_last();
                const bool kw3 = di && strstr(di->kernel, "nchw16c.f32.direct_kw3");
#if defined(__AVX512F__)
                CHECK_MSG(kw3 == (c->C * c->KH * 3 > 12), "bww3 case %d: kernel %s", i,
                          di ? di->kernel : "?");
#else
                CHECK(!kw3);
#endif
            }
            CHECK_MSG(wt ? in_wtag(r[0], g_wtags[wt - 1]) : in_format(r[0], CT),
                      "bww3 case %d weight %d: grad_w layout", i, wt);
            CHECK_MSG(same_values(r[0], ref), "bww3 case %d weight %d: grad_w not exact", i, wt);
            CHECK_MSG(same(r[0], r[1]), "bww3 case %d weight %d: thread counts differ", i, wt);
            mft_tensor *ts[3] = {wl, r[0], r[1]};
            for (int k = 0; k < 3; k++) mft_tensor_release(ts[k]);
        }
        mft_tensor *ts[] = {x, w, y, go, xb, gob, ref};
        for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) mft_tensor_release(ts[k]);
    }
    mft_set_num_threads(0);
    mft_conv_set_winograd(true);
}

int main(void) {
    /* Winograd F(4x4, 3x3) where it pays (3x3, stride 1, C and O >= 16),
     * then the direct kernel everywhere */
    RUN(test_forward);
    RUN(test_backward);
    mft_conv_set_winograd(false);
    RUN(test_forward);
    RUN(test_backward);
    mft_conv_set_winograd(true);
    RUN(test_inf_pads);
    RUN(test_fallback_cases);
    RUN(test_autograd);
    RUN(test_blocked_weight_forward);
    RUN(test_blocked_weight_backward);
    mft_conv_set_winograd(false);
    RUN(test_blocked_weight_forward);
    RUN(test_blocked_weight_backward);
    mft_conv_set_winograd(true);
    RUN(test_row_tiles);
    RUN(test_wino_schedules);
    RUN(test_first_layer);
    RUN(test_1x1);
    RUN(test_bww3);
    RUN(test_blocked_weight_step);
    RUN(test_blocked_weight_errors);
    TEST_MAIN_END();
}
