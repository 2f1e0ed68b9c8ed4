/* tests/ops/test_linear_flat.c — mft_flatten_linear (ops/linalg/flatten_linear.c,
 * Note [Linear over the physical order]) against its definition,
 * mft_linear(mft_flatten(x, 1, -1), w, b) run on the plain NCHW copy of x:
 *   - x in NCHW, NHWC, nChw16c and nChw8c with C in {1, 3, 15, 16, 17, 33},
 *     odd H / W, N 1..5, with and without bias, F32 (and F64 for a few):
 *     the forward and all three gradients of mft_flatten_linear_backward
 *     agree within float rounding (bit for bit for NCHW, whose map is the
 *     identity); grad_x has x's format, blocked pad lanes exactly 0
 *     (mft_tensor_check_padding); no conversion is counted;
 *   - a weight that is not packed (a transposed view) gives the same;
 *   - 1 and 2 threads give bit-identical results;
 *   - autograd: one "flatten_linear" node, gradients as above, none
 *     converted;
 *   - an inf in grad_out leaves grad_x's pad lanes zero;
 *   - layouts whose images are not dense (a step-2 slice, a batch that is
 *     not outermost) take the composition: same values, the flatten copy
 *     counted as a reshape conversion;
 *   - bad input (w's K, rank-1 x, a 2-D w, the bias size, I32 / mixed
 *     F32-F64 operands, NULL) fails with a message naming the function and
 *     leaks nothing. */
#include <math.h>
#include <stdlib.h>
#include "harness.h"
#include "test_util.h"

#define CT  MFT_CONTIGUOUS
#define CL  MFT_CHANNELS_LAST
#define B16 MFT_NCHW16C
#define B8  MFT_NCHW8C

static int64_t conversions(void) { return mft_conversion_counts_get().total; }

/* t is in fmt and, when blocked, its pad lanes are zero */
static bool in_format(const mft_tensor *t, mft_format fmt) {
    return t && mft_tensor_format(t) == fmt &&
           (!mft_tensor_is_blocked(t) || mft_tensor_check_padding(t) == MFT_OK);
}

/* a (any format) and ref hold the same values within rtol of ref's scale */
static bool close_to(const mft_tensor *a, const mft_tensor *ref, double rtol) {
    if (!a || !ref || !tu_has_sizes(a, mft_tensor_ndim(ref), mft_tensor_sizes(ref))) return false;
    mft_tensor *pa = mft_to_dtype(a, MFT_F64), *pr = mft_to_dtype(ref, MFT_F64);
    mft_tensor *ca = pa ? mft_contiguous(pa, CT) : NULL, *cr = pr ? mft_contiguous(pr, CT) : NULL;
    bool ok = ca && cr;
    if (ok) {
        const double *x = mft_tensor_data(ca), *y = mft_tensor_data(cr);
        const int64_t n = mft_tensor_numel(cr);
        double scale = 1.0, err = 0.0;
        for (int64_t i = 0; i < n; i++) {
            if (fabs(y[i]) > scale) scale = fabs(y[i]);
            if (fabs(x[i] - y[i]) > err) err = fabs(x[i] - y[i]);
        }
        ok = err <= rtol * scale;
        if (!ok) fprintf(stderr, "  max error %g (scale %g)\n", err, scale);
    }
    mft_tensor *ts[4] = {pa, pr, ca, cr};
    for (int i = 0; i < 4; i++) mft_tensor_release(ts[i]);
    return ok;
}

static bool same(const mft_tensor *a, const mft_tensor *b) {
    return a && b && mft_tensor_hash(a) == mft_tensor_hash(b);
}

typedef struct fcase {
    int64_t N, C, H, W, O;
    bool bias;
} fcase;

static const fcase g_cases[] = {
    {1, 1, 3, 5, 4, true},   {2, 3, 7, 7, 10, true},  {3, 15, 5, 3, 7, false},
    {4, 16, 3, 3, 16, true}, {5, 17, 1, 7, 5, true},  {2, 33, 5, 5, 9, false},
    {5, 3, 9, 1, 1, true},   {1, 17, 7, 5, 33, false}, {3, 32, 7, 7, 12, true},
};
#define NCASES ((int)(sizeof g_cases / sizeof g_cases[0]))
static const mft_format g_fmts[4] = {CT, CL, B16, B8};

/* Reference: linear of the flattened plain NCHW copy; its backward. */
static void reference(const mft_tensor *x, const mft_tensor *w, const mft_tensor *b,
                      const mft_tensor *go, mft_tensor **y, mft_tensor **gx, mft_tensor **gw,
                      mft_tensor **gb) {
    mft_tensor *xc = mft_contiguous(x, CT);
    mft_tensor *f = mft_flatten(xc, 1, -1);
    *y = mft_linear(f, w, b);
    mft_tensor *gxf = NULL;
    TU_OK_S(mft_linear_backward(go, f, w, &gxf, gw, b ? gb : NULL));
    *gx = gxf ? mft_reshape(gxf, mft_tensor_ndim(x), mft_tensor_sizes(x)) : NULL;
    mft_tensor_release(gxf);
    mft_tensor_release(f);
    mft_tensor_release(xc);
}

static void run_case(const fcase *c, mft_format fmt, mft_dtype dt, int i) {
    const int64_t xs[4] = {c->N, c->C, c->H, c->W}, K = c->C * c->H * c->W;
    const int64_t ws[2] = {c->O, K}, gs[2] = {c->N, c->O};
    mft_tensor *x0 = mft_randn(4, xs, dt, CT, 100 + (uint64_t)i);
    mft_tensor *x = mft_to_format(x0, fmt);
    mft_tensor *w = mft_randn(2, ws, dt, CT, 200 + (uint64_t)i);
    mft_tensor *b = c->bias ? mft_randn(1, &c->O, dt, CT, 300 + (uint64_t)i) : NULL;
    mft_tensor *go = mft_randn(2, gs, dt, CT, 400 + (uint64_t)i);
    mft_tensor *ry = NULL, *rgx = NULL, *rgw = NULL, *rgb = NULL;
    reference(x0, w, b, go, &ry, &rgx, &rgw, &rgb);
    const double tol = dt == MFT_F32 ? 1e-5 : 1e-12;
    const char *fn = mft_format_name(fmt);

    mft_conversion_counts_reset();
    mft_tensor *y = mft_flatten_linear(x, w, b);
    mft_tensor *gx = NULL, *gw = NULL, *gb = NULL;
    TU_OK_S(mft_flatten_linear_backward(go, x, w, &gx, &gw, b ? &gb : NULL));
    CHECK_MSG(conversions() == 0, "case %d %s: %lld conversions", i, fn,
              (long long)conversions());
    CHECK_MSG(y && mft_tensor_format(y) == CT && close_to(y, ry, tol), "case %d %s: forward", i,
              fn);
    CHECK_MSG(in_format(gx, mft_tensor_format(x)) && close_to(gx, rgx, tol),
              "case %d %s: grad_x", i, fn);
    CHECK_MSG(in_format(gw, CT) && close_to(gw, rgw, tol), "case %d %s: grad_w", i, fn);
    if (b)
        CHECK_MSG(same(gb, rgb), "case %d %s: grad_b not the composition's bits", i, fn);
    if (fmt == CT) /* the identity map: the composition's own GEMMs */
        CHECK_MSG(same(y, ry) && same(gw, rgw) && same(gx, rgx), "case %d: NCHW not bitwise", i);

    /* thread-count independent */
    mft_tensor *yt[2] = {NULL, NULL}, *gxt[2] = {NULL, NULL}, *gwt[2] = {NULL, NULL};
    for (int t = 0; t < 2; t++) {
        mft_set_num_threads(t + 1);
        yt[t] = mft_flatten_linear(x, w, b);
        TU_OK_S(mft_flatten_linear_backward(go, x, w, &gxt[t], &gwt[t], NULL));
    }
    mft_set_num_threads(0);
    CHECK_MSG(same(yt[0], yt[1]) && same(gxt[0], gxt[1]) && same(gwt[0], gwt[1]),
              "case %d %s: 1 and 2 threads differ", i, fn);

    mft_tensor *ts[] = {x0, x, w, b, go, ry, rgx, rgw, rgb, y, gx, gw, gb,
                        yt[0], yt[1], gxt[0], gxt[1], gwt[0], gwt[1]};
    for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) mft_tensor_release(ts[k]);
}

static void test_formats(void) {
    for (int i = 0; i < NCASES; i++)
        for (int f = 0; f < 4; f++) run_case(&g_cases[i], g_fmts[f], MFT_F32, i);
}

static void test_f64(void) {
    for (int f = 0; f < 4; f++) {
        run_case(&g_cases[1], g_fmts[f], MFT_F64, 1);
        run_case(&g_cases[4], g_fmts[f], MFT_F64, 4);
    }
}

/* Ranks other than 4: (N, C, L) and (N, C, D, H, W) blocked, and rank 2. */
static void test_ranks(void) {
    const int64_t s3[3] = {3, 17, 5}, s5[5] = {2, 9, 3, 2, 3}, s2[2] = {4, 6};
    const int nd[3] = {3, 5, 2};
    const int64_t *szs[3] = {s3, s5, s2};
    for (int r = 0; r < 3; r++) {
        int64_t K = 1;
        for (int d = 1; d < nd[r]; d++) K *= szs[r][d];
        const int64_t ws[2] = {7, K}, O = 7;
        mft_tensor *x0 = mft_randn(nd[r], szs[r], MFT_F32, CT, 11);
        mft_tensor *x = nd[r] == 2 ? mft_tensor_retain(x0) : mft_to_format(x0, B16);
        mft_tensor *w = mft_randn(2, ws, MFT_F32, CT, 12);
        mft_tensor *b = mft_randn(1, &O, MFT_F32, CT, 13);
        mft_tensor *f = mft_flatten(x0, 1, -1);
        mft_tensor *ref = mft_linear(f, w, b);
        mft_conversion_counts_reset();
        mft_tensor *y = mft_flatten_linear(x, w, b);
        CHECK_MSG(conversions() == 0 && close_to(y, ref, 1e-5), "rank %d", nd[r]);
        mft_tensor *ts[] = {x0, x, w, b, f, ref, y};
        for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) mft_tensor_release(ts[k]);
    }
}

/* A batch narrowed out of a bigger blocked tensor stays native. */
static void test_narrowed_batch(void) {
    const int64_t xs[4] = {5, 17, 3, 5}, ws[2] = {6, 17 * 15};
    mft_tensor *big = mft_randn(4, xs, MFT_F32, B16, 21);
    mft_tensor *x = mft_narrow(big, 0, 1, 3);
    mft_tensor *w = mft_randn(2, ws, MFT_F32, CT, 22);
    mft_tensor *xc = mft_contiguous(x, CT);
    mft_tensor *f = mft_flatten(xc, 1, -1);
    mft_tensor *ref = mft_linear(f, w, NULL);
    mft_conversion_counts_reset();
    mft_tensor *y = mft_flatten_linear(x, w, NULL);
    CHECK(conversions() == 0 && close_to(y, ref, 1e-5));
    mft_tensor *ts[] = {big, x, w, xc, f, ref, y};
    for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) mft_tensor_release(ts[k]);
}

/* A weight that is a transposed view (not packed): the gather walks the map
 * instead of the copy kernels; same values, nothing converted. */
static void test_strided_weight(void) {
    const int64_t xs[4] = {3, 17, 3, 5}, wts[2] = {17 * 15, 6}, gs[2] = {3, 6};
    for (int f = 0; f < 4; f++)
        for (int d = 0; d < 2; d++) {
            const mft_dtype dt = d ? MFT_F64 : MFT_F32;
            mft_tensor *x0 = mft_randn(4, xs, dt, CT, 81);
            mft_tensor *x = mft_to_format(x0, g_fmts[f]);
            mft_tensor *wt = mft_randn(2, wts, dt, CT, 82);
            mft_tensor *w = mft_transpose(wt, 0, 1);
            mft_tensor *go = mft_randn(2, gs, dt, CT, 83);
            mft_tensor *ry = NULL, *rgx = NULL, *rgw = NULL, *rgb = NULL;
            reference(x0, w, NULL, go, &ry, &rgx, &rgw, &rgb);
            mft_conversion_counts_reset();
            mft_tensor *y = mft_flatten_linear(x, w, NULL), *gx = NULL, *gw = NULL;
            TU_OK_S(mft_flatten_linear_backward(go, x, w, &gx, &gw, NULL));
            const double tol = d ? 1e-12 : 1e-5;
            CHECK_MSG(conversions() == 0 && close_to(y, ry, tol) && close_to(gx, rgx, tol) &&
                          close_to(gw, rgw, tol) && in_format(gx, g_fmts[f]),
                      "%s %s: transposed weight", mft_format_name(g_fmts[f]), mft_dtype_name(dt));
            mft_tensor *ts[] = {x0, x, wt, w, go, ry, rgx, rgw, y, gx, gw};
            for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) mft_tensor_release(ts[k]);
        }
}

/* Autograd: one node named flatten_linear, gradients as the composition's,
 * nothing converted. */
static void test_autograd(void) {
    for (int f = 0; f < 4; f++) {
        const fcase *c = &g_cases[2 + f];
        const int64_t xs[4] = {c->N, c->C, c->H, c->W}, ws[2] = {c->O, c->C * c->H * c->W};
        const int64_t O = c->O;
        mft_tensor *x0 = mft_randn(4, xs, MFT_F32, CT, 31);
        mft_tensor *w = mft_randn(2, ws, MFT_F32, CT, 32);
        mft_tensor *b = mft_randn(1, &O, MFT_F32, CT, 33);
        mft_tensor *x = mft_to_format(x0, g_fmts[f]);
        mft_tensor *ts[3] = {x0, w, b};
        for (int k = 0; k < 3; k++) mft_tensor_set_requires_grad(ts[k], true);
        mft_tensor_set_requires_grad(x, true);
        /* reference through the composition on x0 */
        TU_OK_S(mft_tape_begin());
        mft_tensor *fl = mft_flatten(x0, 1, -1), *r = mft_linear(fl, w, b);
        mft_tensor *rs = mft_sum(r, 0, NULL, false);
        TU_OK_S(mft_backward(rs, NULL));
        TU_OK_S(mft_tape_end());
        mft_tensor *rgw = mft_tensor_retain(mft_tensor_grad(w));
        mft_tensor *rgb = mft_tensor_retain(mft_tensor_grad(b));
        TU_OK_S(mft_tensor_set_grad(w, NULL));
        TU_OK_S(mft_tensor_set_grad(b, NULL));
        TU_OK_S(mft_tape_begin());
        mft_conversion_counts_reset();
        mft_tensor *y = mft_flatten_linear(x, w, b);
        CHECK(mft_tape_size() == 1);
        mft_tensor *s = mft_sum(y, 0, NULL, false);
        TU_OK_S(mft_backward(s, NULL));
        CHECK_MSG(conversions() == 0, "%s: %lld conversions", mft_format_name(g_fmts[f]),
                  (long long)conversions());
        TU_OK_S(mft_tape_end());
        CHECK(in_format(mft_tensor_grad(x), g_fmts[f]));
        CHECK(close_to(mft_tensor_grad(x), mft_tensor_grad(x0), 1e-5));
        CHECK(close_to(mft_tensor_grad(w), rgw, 1e-5));
        CHECK(close_to(mft_tensor_grad(b), rgb, 1e-5));
        mft_tensor *rel[] = {x0, w, b, x, fl, r, rs, rgw, rgb, y, s};
        for (size_t k = 0; k < sizeof rel / sizeof rel[0]; k++) mft_tensor_release(rel[k]);
    }
}

/* An inf in grad_out: grad_x's pad lanes stay exactly zero. */
static void test_inf_pads(void) {
    const int64_t xs[4] = {2, 3, 3, 3}, ws[2] = {4, 27}, gs[2] = {2, 4};
    mft_tensor *x = mft_randn(4, xs, MFT_F32, B16, 41);
    mft_tensor *w = mft_randn(2, ws, MFT_F32, CT, 42);
    mft_tensor *go = mft_randn(2, gs, MFT_F32, CT, 43);
    TU_OK_S(mft_tensor_set(go, (const int64_t[]){1, 2}, INFINITY));
    mft_tensor *gx = NULL;
    TU_OK_S(mft_flatten_linear_backward(go, x, w, &gx, NULL, NULL));
    CHECK(in_format(gx, B16));
    mft_tensor *ts[] = {x, w, go, gx};
    for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) mft_tensor_release(ts[k]);
}

/* Images that are not dense chunks: the composition, its copy counted. */
static void test_not_dense(void) {
    const int64_t xs[4] = {3, 4, 5, 8}, ws[2] = {5, 4 * 5 * 4}, O = 5;
    mft_tensor *big = mft_randn(4, xs, MFT_F32, CL, 51);
    mft_tensor *x = mft_slice(big, 3, 0, 8, 2); /* a step-2 slice of W: gaps */
    mft_tensor *xt = mft_randn(4, (const int64_t[]){4, 3, 5, 4}, MFT_F32, CT, 52);
    mft_tensor *x2 = mft_transpose(xt, 0, 1); /* the batch is not outermost */
    mft_tensor *w = mft_randn(2, ws, MFT_F32, CT, 53);
    mft_tensor *b = mft_randn(1, &O, MFT_F32, CT, 54);
    const int64_t gs[2] = {3, 5};
    mft_tensor *go = mft_randn(2, gs, MFT_F32, CT, 55);
    mft_tensor *xs2[2] = {x, x2};
    for (int k = 0; k < 2; k++) {
        mft_tensor *ry = NULL, *rgx = NULL, *rgw = NULL, *rgb = NULL;
        reference(xs2[k], w, b, go, &ry, &rgx, &rgw, &rgb);
        mft_conversion_counts_reset();
        mft_tensor *y = mft_flatten_linear(xs2[k], w, b);
        CHECK_MSG(mft_conversion_counts_get().count[MFT_CAUSE_RESHAPE] == 1,
                  "input %d: %lld reshape conversions", k,
                  (long long)mft_conversion_counts_get().count[MFT_CAUSE_RESHAPE]);
        mft_tensor *gx = NULL, *gw = NULL, *gb = NULL;
        TU_OK_S(mft_flatten_linear_backward(go, xs2[k], w, &gx, &gw, &gb));
        CHECK(close_to(y, ry, 1e-5) && close_to(gx, rgx, 1e-5) && close_to(gw, rgw, 1e-5) &&
              close_to(gb, rgb, 1e-5));
        CHECK(gx && mft_tensor_format(gx) == mft_tensor_format(xs2[k]));
        mft_tensor *ts[] = {ry, rgx, rgw, rgb, y, gx, gw, gb};
        for (size_t j = 0; j < sizeof ts / sizeof ts[0]; j++) mft_tensor_release(ts[j]);
    }
    mft_tensor *ts[] = {big, x, xt, x2, w, b, go};
    for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) mft_tensor_release(ts[k]);
}

static void expect_error(mft_tensor *y, mft_status st, const char *fn) {
    CHECK(y == NULL);
    CHECK_MSG(mft_last_error() == st, "got %s, expected %s: %s", mft_status_str(mft_last_error()),
              mft_status_str(st), mft_last_error_message());
    CHECK_MSG(strstr(mft_last_error_message(), fn) != NULL, "message '%s'",
              mft_last_error_message());
    mft_tensor_release(y);
    mft_clear_error();
}

static void test_errors(void) {
    const int64_t xs[4] = {2, 3, 4, 5}, ws[2] = {6, 60}, bad_w[2] = {6, 59}, O = 6, w3[3] = {6, 60, 1};
    const int64_t n = 60;
    mft_tensor *x = mft_randn(4, xs, MFT_F32, B16, 61);
    mft_tensor *w = mft_randn(2, ws, MFT_F32, CT, 62);
    mft_tensor *wk = mft_randn(2, bad_w, MFT_F32, CT, 63);
    mft_tensor *wr = mft_randn(3, w3, MFT_F32, CT, 64);
    mft_tensor *w64 = mft_randn(2, ws, MFT_F64, CT, 65);
    mft_tensor *b7 = mft_randn(1, (const int64_t[]){7}, MFT_F32, CT, 66);
    mft_tensor *b64 = mft_randn(1, &O, MFT_F64, CT, 67);
    mft_tensor *x1 = mft_randn(1, &n, MFT_F32, CT, 68);
    mft_tensor *xi = mft_zeros(4, xs, MFT_I32, CT);
    const char *fn = "mft_flatten_linear";
    expect_error(mft_flatten_linear(x, wk, NULL), MFT_ERR_SHAPE, fn);
    expect_error(mft_flatten_linear(x1, w, NULL), MFT_ERR_RANK, fn);
    expect_error(mft_flatten_linear(x, wr, NULL), MFT_ERR_RANK, fn);
    expect_error(mft_flatten_linear(x, w, b7), MFT_ERR_SHAPE, fn);
    expect_error(mft_flatten_linear(x, w64, NULL), MFT_ERR_DTYPE, fn);
    expect_error(mft_flatten_linear(x, w, b64), MFT_ERR_DTYPE, fn);
    expect_error(mft_flatten_linear(xi, w, NULL), MFT_ERR_DTYPE, fn);
    expect_error(mft_flatten_linear(NULL, w, NULL), MFT_ERR_NULL, fn);
    /* the backward */
    const int64_t gs[2] = {2, 6}, gbad[2] = {3, 6};
    mft_tensor *go = mft_randn(2, gs, MFT_F32, CT, 69), *gob = mft_randn(2, gbad, MFT_F32, CT, 70);
    mft_tensor *go64 = mft_randn(2, gs, MFT_F64, CT, 71);
    mft_tensor *gx = (mft_tensor *)1, *gw = (mft_tensor *)1;
    const char *bfn = "mft_flatten_linear_backward";
    CHECK(mft_flatten_linear_backward(gob, x, w, &gx, &gw, NULL) == MFT_ERR_SHAPE && !gx && !gw);
    CHECK(strstr(mft_last_error_message(), bfn) != NULL);
    CHECK(mft_flatten_linear_backward(go64, x, w, &gx, NULL, NULL) == MFT_ERR_DTYPE && !gx);
    CHECK(mft_flatten_linear_backward(go, x, wk, &gx, NULL, NULL) == MFT_ERR_SHAPE && !gx);
    CHECK(mft_flatten_linear_backward(go, x1, w, &gx, NULL, NULL) == MFT_ERR_RANK && !gx);
    CHECK(mft_flatten_linear_backward(NULL, x, w, &gx, NULL, NULL) == MFT_ERR_NULL && !gx);
    mft_clear_error();
    mft_tensor *ts[] = {x, w, wk, wr, w64, b7, b64, x1, xi, go, gob, go64};
    for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) mft_tensor_release(ts[k]);
}

int main(void) {
    RUN(test_formats);
    RUN(test_f64);
    RUN(test_ranks);
    RUN(test_narrowed_batch);
    RUN(test_strided_weight);
    RUN(test_autograd);
    RUN(test_inf_pads);
    RUN(test_not_dense);
    RUN(test_errors);
    TEST_MAIN_END();
}
