/* tests/ops/test_blocked_norm.c — batch_norm's native nChw16c F32 kernels
 * (Note [Batch norm in nChw16c], ops/norm/batch_norm_blocked.c) against
 * the plain kernels on the same values:
 *   - training forward (mft_batch_norm / _ex): y, the saved statistics and
 *     the updated running statistics within 1e-5 of the plain call's, for
 *     C in {1, 3, 15, 16, 17, 33, 64}, N in {1, 3}, ranks 3-5, spatial
 *     sizes below and above one work item, with and without weight / bias,
 *     a strided weight; y nChw16c with zero pad lanes (a non-zero bias
 *     must not leak into them), no conversion at all, the nChw16c kernel
 *     ran;
 *   - eval forward: bit for bit the plain kernel's y (same coefficients,
 *     same float operations), running statistics untouched;
 *   - backward (training and eval, with and without grad_weight /
 *     grad_bias): grad_x nChw16c with zero pads, grad_weight / grad_bias
 *     plain 1-D, within 1e-5 (eval grad_x bit for bit); grad_out plain
 *     costs one operand conversion and no fallback;
 *   - autograd through the native forward and backward: leaf gradients in
 *     the leaves' layouts, equal to the plain run's, no fallback;
 *   - results do not depend on the thread count (1 and 2 threads bit for
 *     bit);
 *   - what stays on the counted fallback: nChw8c, F64, a view that is not
 *     packed; an empty input. */
#include <math.h>
#include <string.h>
#include "harness.h"
#include "test_util.h"

#define CT  MFT_CONTIGUOUS
#define B16 MFT_NCHW16C
#define B8  MFT_NCHW8C

static const int64_t CS[] = {1, 3, 15, 16, 17, 33, 64};
#define NCS ((int)(sizeof CS / sizeof CS[0]))

static int64_t conversions(void) { return mft_conversion_counts_get().total; }
static int64_t fallbacks(void) { return mft_conversion_counts_get().count[MFT_CAUSE_FALLBACK]; }

/* a and b hold the same values bit for bit (dtype, sizes, logical order) */
static bool same(const mft_tensor *a, const mft_tensor *b) {
    return a && b && mft_tensor_dtype(a) == mft_tensor_dtype(b) &&
           tu_has_sizes(a, mft_tensor_ndim(b), mft_tensor_sizes(b)) &&
           mft_tensor_hash(a) == mft_tensor_hash(b);
}

/* Largest |a - b| / (|b| + max(max |b|, lo)) over the elements (F32, any
 * layouts): relative to the element, with the tensor's scale (at least lo)
 * added, so values near zero after a cancellation are not held to a
 * relative bound. Inf on a shape mismatch. */
static double rel_err_floor(const mft_tensor *a, const mft_tensor *b, double lo) {
    if (!a || !b || !tu_has_sizes(a, mft_tensor_ndim(b), mft_tensor_sizes(b))) return INFINITY;
    mft_tensor *pa = mft_to_format(a, CT), *pb = mft_to_format(b, CT);
    double err = INFINITY;
    if (pa && pb) {
        const float *x = mft_tensor_data(pa), *y = mft_tensor_data(pb);
        const int64_t n = mft_tensor_numel(pa);
        double scale = lo;
        for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs((double)y[i]));
        err = 0.0;
        for (int64_t i = 0; i < n; i++) {
            const double d = fabs((double)x[i] - (double)y[i]);
            const double den = fabs((double)y[i]) + scale;
            err = fmax(err, den > 0 ? d / den : d);
        }
    }
    mft_tensor_release(pa);
    mft_tensor_release(pb);
    return err;
}
static double rel_err(const mft_tensor *a, const mft_tensor *b) { return rel_err_floor(a, b, 0.0); }

/* t is nChw16c, packed, pad lanes zero */
static bool native_out(const mft_tensor *t) {
    return t && mft_tensor_format(t) == B16 && mft_tensor_is_contiguous(t, B16) &&
           mft_tensor_check_padding(t) == MFT_OK;
}

static bool plain_vec(const mft_tensor *t, int64_t C) {
    return t && !mft_tensor_is_blocked(t) && mft_tensor_ndim(t) == 1 &&
           mft_tensor_sizes(t)[0] == C;
}

static void release_all(int n, mft_tensor **ts) {
    for (int i = 0; i < n; i++) mft_tensor_release(ts[i]);
}

/* x of [N, C, spatial...]: randn * 2 + 3 (a mean away from 0). */
static mft_tensor *make_x(int nd, const int64_t *sz, uint64_t seed) {
    mft_tensor *r = mft_randn(nd, sz, MFT_F32, CT, seed);
    mft_tensor *s = mft_mul_scalar(r, 2.0);
    mft_tensor *x = mft_add_scalar(s, 3.0);
    mft_tensor_release(r);
    mft_tensor_release(s);
    return x;
}

static mft_tensor *vec(int64_t C, uint64_t seed, double lo) {
    mft_tensor *r = mft_rand(1, &C, MFT_F32, CT, seed);
    mft_tensor *v = mft_add_scalar(r, lo);
    mft_tensor_release(r);
    return v;
}

typedef struct shape {
    int nd;
    int64_t sp[3];
} shape;
/* spatial parts: below one work item (256 pixels), above it, ranks 3-5 */
static const shape SHAPES[] = {{4, {5, 7, 0}}, {4, {17, 19, 0}}, {3, {9, 0, 0}}, {5, {2, 3, 4}},
                               {4, {1, 2, 0}}};
#define NSHAPES ((int)(sizeof SHAPES / sizeof SHAPES[0]))

static void fill_sizes(int64_t *sz, int64_t N, int64_t C, const shape *s) {
    sz[0] = N;
    sz[1] = C;
    for (int d = 2; d < s->nd; d++) sz[d] = s->sp[d - 2];
}

/* ---------------------------------------------------------------- forward */
static void check_train(int nd, const int64_t *sz, int wmode, uint64_t seed) {
    const int64_t C = sz[1];
    mft_tensor *x = make_x(nd, sz, seed), *xb = mft_to_format(x, B16);
    mft_tensor *wfull = vec(2 * C, seed + 1, 0.5), *w = NULL, *b = NULL;
    if (wmode == 1) { /* a strided weight: every other element */
        w = mft_slice(wfull, 0, 0, 2 * C, 2);
        b = vec(C, seed + 2, -0.5);
    } else if (wmode == 2) {
        w = mft_narrow(wfull, 0, 0, C);
        b = vec(C, seed + 2, 4.0); /* a large bias: must not reach the pads */
    }
    mft_tensor *rm = vec(C, seed + 3, 0.0), *rv = vec(C, seed + 4, 1.0);
    mft_tensor *brm = mft_clone(rm, CT), *brv = mft_clone(rv, CT);
    mft_tensor *sm = NULL, *sv = NULL, *bsm = NULL, *bsv = NULL;
    mft_tensor *y = mft_batch_norm_ex(x, rm, rv, w, b, true, 0.1, 1e-5, &sm, &sv);
    mft_conversion_counts_reset();
    mft_tensor *by = mft_batch_norm_ex(xb, brm, brv, w, b, true, 0.1, 1e-5, &bsm, &bsv);
    const int64_t conv = conversions();
    const char *k = mft_dispatch_last()->kernel;
    char d[64];
    tu_fmt_list(d, sizeof d, nd, sz);
    CHECK_MSG(by != NULL, "%s: %s", d, mft_last_error_message());
    CHECK_MSG(native_out(by) && conv == 0 && !strcmp(k, "batch_norm.nchw16c.f32"),
              "%s w%d: format %s, %lld conversions, kernel %s", d, wmode,
              by ? mft_format_name(mft_tensor_format(by)) : "-", (long long)conv, k);
    const double e[5] = {rel_err(by, y), rel_err(bsm, sm), rel_err(bsv, sv), rel_err(brm, rm),
                         rel_err(brv, rv)};
    for (int i = 0; i < 5; i++)
        CHECK_MSG(e[i] <= 1e-5, "%s w%d: output %d differs by %g", d, wmode, i, e[i]);
    CHECK(plain_vec(bsm, C) && plain_vec(bsv, C));
    /* mft_batch_norm (no statistics out) gives the same y */
    mft_tensor *brm2 = mft_clone(rm, CT), *brv2 = mft_clone(rv, CT);
    mft_tensor *by2 = mft_batch_norm(xb, brm2, brv2, w, b, true, 0.1, 1e-5);
    CHECK(native_out(by2) && rel_err(by2, y) <= 1e-5);
    mft_tensor *all[] = {x, xb, wfull, w, b, rm, rv, brm, brv, sm, sv, bsm, bsv, y, by, brm2, brv2,
                         by2};
    release_all((int)(sizeof all / sizeof *all), all);
}

static void test_forward_train(void) {
    for (int ci = 0; ci < NCS; ci++)
        for (int si = 0; si < NSHAPES; si++)
            for (int64_t N = 1; N <= 3; N += 2) {
                int64_t sz[5];
                fill_sizes(sz, N, CS[ci], &SHAPES[si]);
                check_train(SHAPES[si].nd, sz, (ci + si) % 3, (uint64_t)(100 + 7 * ci + si));
            }
}

static void test_forward_eval(void) {
    for (int ci = 0; ci < NCS; ci++)
        for (int si = 0; si < NSHAPES; si++) {
            int64_t sz[5];
            const int64_t C = CS[ci];
            fill_sizes(sz, 1 + 2 * (si % 2), C, &SHAPES[si]);
            const int nd = SHAPES[si].nd;
            mft_tensor *x = make_x(nd, sz, 300 + (uint64_t)ci), *xb = mft_to_format(x, B16);
            mft_tensor *w = vec(C, 1, 0.5), *b = vec(C, 2, 1.0);
            mft_tensor *rm = vec(C, 3, 2.5), *rv = vec(C, 4, 0.5);
            const uint64_t hm = mft_tensor_hash(rm), hv = mft_tensor_hash(rv);
            mft_tensor *y = mft_batch_norm(x, rm, rv, w, b, false, 0.1, 1e-5);
            mft_conversion_counts_reset();
            mft_tensor *by = mft_batch_norm(xb, rm, rv, ci % 2 ? w : NULL, ci % 2 ? b : NULL,
                                            false, 0.1, 1e-5);
            CHECK(native_out(by) && conversions() == 0);
            mft_tensor *y2 = ci % 2 ? mft_tensor_retain(y)
                                    : mft_batch_norm(x, rm, rv, NULL, NULL, false, 0.1, 1e-5);
            /* the plain kernel's coefficients and float operations: bit for
             * bit (both built by GCC without contraction; clang may fuse the
             * plain kernel's multiply-add) */
#if defined(__GNUC__) && !defined(__clang__)
            CHECK_MSG(same(by, y2), "eval C=%lld shape %d: not bit for bit (rel %g)", (long long)C,
                      si, rel_err(by, y2));
#else
            CHECK(rel_err(by, y2) <= 1e-6);
#endif
            CHECK(mft_tensor_hash(rm) == hm && mft_tensor_hash(rv) == hv);
            mft_tensor *all[] = {x, xb, w, b, rm, rv, y, by, y2};
            release_all((int)(sizeof all / sizeof *all), all);
        }
}

/* ---------------------------------------------------------------- backward */
static void check_backward(int nd, const int64_t *sz, bool training, bool wb, uint64_t seed) {
    const int64_t C = sz[1];
    mft_tensor *x = make_x(nd, sz, seed), *xb = mft_to_format(x, B16);
    mft_tensor *go = mft_randn(nd, sz, MFT_F32, CT, seed + 1), *gob = mft_to_format(go, B16);
    mft_tensor *w = seed % 2 ? vec(C, seed + 2, 0.5) : NULL;
    mft_tensor *m = vec(C, seed + 3, 2.5), *r = vec(C, seed + 4, 0.5);
    mft_tensor *gx = NULL, *gw = NULL, *gb = NULL, *bx = NULL, *bw = NULL, *bb = NULL;
    TU_OK_S(mft_batch_norm_backward(go, x, w, m, r, training, &gx, wb ? &gw : NULL,
                                    wb ? &gb : NULL));
    mft_conversion_counts_reset();
    TU_OK_S(mft_batch_norm_backward(gob, xb, w, m, r, training, &bx, wb ? &bw : NULL,
                                    wb ? &bb : NULL));
    const int64_t conv = conversions();
    const char *k = mft_dispatch_last()->kernel;
    char d[64];
    tu_fmt_list(d, sizeof d, nd, sz);
    CHECK_MSG(native_out(bx) && conv == 0 && !strcmp(k, "batch_norm_backward.nchw16c.f32"),
              "%s: %lld conversions, kernel %s", d, (long long)conv, k);
    if (training) {
        const double e = rel_err(bx, gx);
        CHECK_MSG(e <= 1e-5, "%s training grad_x differs by %g", d, e);
    } else {
#if defined(__GNUC__) && !defined(__clang__)
        CHECK_MSG(same(bx, gx), "%s eval grad_x not bit for bit (rel %g)", d, rel_err(bx, gx));
#else
        CHECK(rel_err(bx, gx) <= 1e-6);
#endif
    }
    if (wb) {
        CHECK(plain_vec(bw, C) && plain_vec(bb, C));
        /* sums over N * S values of unit size: their scale is sqrt(N * S)
         * even when they cancel to near 0 */
        const double fl = sqrt((double)(mft_tensor_numel(x) / C));
        const double ew = rel_err_floor(bw, gw, fl), eb = rel_err_floor(bb, gb, fl);
        CHECK_MSG(ew <= 1e-5 && eb <= 1e-5, "%s grad_weight %g grad_bias %g", d, ew, eb);
    } else {
        CHECK(bw == NULL && bb == NULL);
    }
    /* grad_out plain: packed into nChw16c by the dispatcher (one operand
     * conversion), no fallback */
    mft_tensor *cx = NULL;
    mft_conversion_counts_reset();
    TU_OK_S(mft_batch_norm_backward(go, xb, w, m, r, training, &cx, NULL, NULL));
    CHECK(native_out(cx) && same(cx, bx) && fallbacks() == 0 &&
          mft_conversion_counts_get().count[MFT_CAUSE_OPERAND] == 1);
    mft_tensor *all[] = {x, xb, go, gob, w, m, r, gx, gw, gb, bx, bw, bb, cx};
    release_all((int)(sizeof all / sizeof *all), all);
}

static void test_backward(void) {
    uint64_t seed = 500;
    for (int ci = 0; ci < NCS; ci++)
        for (int si = 0; si < NSHAPES; si++)
            for (int64_t N = 1; N <= 3; N += 2) {
                int64_t sz[5];
                fill_sizes(sz, N, CS[ci], &SHAPES[si]);
                check_backward(SHAPES[si].nd, sz, true, true, seed++);
                if ((ci + si) % 2 == 0) {
                    check_backward(SHAPES[si].nd, sz, false, true, seed++);
                    check_backward(SHAPES[si].nd, sz, false, false, seed++);
                    check_backward(SHAPES[si].nd, sz, true, false, seed++);
                }
            }
}

/* ---------------------------------------------------------------- autograd */
static void test_autograd(void) {
    const int64_t sz[4] = {3, 17, 5, 6}, C = 17;
    mft_tensor *x = make_x(4, sz, 900), *xb = mft_to_format(x, B16);
    mft_tensor *w = vec(C, 901, 0.5), *b = vec(C, 902, 1.0), *w2 = mft_clone(w, CT),
               *b2 = mft_clone(b, CT);
    mft_tensor *rm = mft_zeros(1, &C, MFT_F32, CT), *rv = mft_ones(1, &C, MFT_F32, CT);
    mft_tensor *rm2 = mft_clone(rm, CT), *rv2 = mft_clone(rv, CT);
    mft_tensor *go = mft_randn(4, sz, MFT_F32, CT, 903), *gob = mft_to_format(go, B16);
    mft_tensor *leaves[] = {x, xb, w, b, w2, b2};
    for (int i = 0; i < 6; i++) TU_OK_S(mft_tensor_set_requires_grad(leaves[i], true));
    TU_OK_S(mft_tape_begin());
    mft_tensor *y = mft_batch_norm(x, rm, rv, w, b, true, 0.1, 1e-5);
    TU_OK_S(mft_backward(y, go));
    mft_conversion_counts_reset();
    mft_tensor *by = mft_batch_norm(xb, rm2, rv2, w2, b2, true, 0.1, 1e-5);
    CHECK(native_out(by) && mft_tensor_requires_grad(by));
    TU_OK_S(mft_backward(by, gob));
    CHECK_EQ_I(conversions(), 0);
    mft_tape_end();
    const mft_tensor *gx = mft_tensor_grad(x), *gbx = mft_tensor_grad(xb);
    CHECK(native_out(gbx) && rel_err(gbx, gx) <= 1e-5);
    CHECK(rel_err(mft_tensor_grad(w2), mft_tensor_grad(w)) <= 1e-5);
    CHECK(rel_err(mft_tensor_grad(b2), mft_tensor_grad(b)) <= 1e-5);
    CHECK(rel_err(rm2, rm) <= 1e-5 && rel_err(rv2, rv) <= 1e-5);
    mft_tensor *all[] = {x, xb, w, b, w2, b2, rm, rv, rm2, rv2, go, gob, y, by};
    release_all((int)(sizeof all / sizeof *all), all);
}

/* ---------------------------------------------------------------- threads */
static void test_threads(void) {
    const int64_t sz[4] = {3, 33, 23, 29}, C = 33;
    mft_tensor *xb = NULL, *gob = NULL;
    {
        mft_tensor *x = make_x(4, sz, 1000), *go = mft_randn(4, sz, MFT_F32, CT, 1001);
        xb = mft_to_format(x, B16);
        gob = mft_to_format(go, B16);
        mft_tensor_release(x);
        mft_tensor_release(go);
    }
    mft_tensor *w = vec(C, 1002, 0.5), *b = vec(C, 1003, 1.0);
    mft_tensor *res[2][6] = {{NULL}};
    for (int t = 0; t < 2; t++) {
        mft_set_num_threads(t + 1);
        mft_tensor *rm = mft_zeros(1, &C, MFT_F32, CT), *rv = mft_ones(1, &C, MFT_F32, CT);
        res[t][0] = mft_batch_norm_ex(xb, rm, rv, w, b, true, 0.1, 1e-5, &res[t][1], &res[t][2]);
        TU_OK_S(mft_batch_norm_backward(gob, xb, w, res[t][1], res[t][2], true, &res[t][3],
                                        &res[t][4], &res[t][5]));
        mft_tensor_release(rm);
        mft_tensor_release(rv);
    }
    mft_set_num_threads(0);
    for (int k = 0; k < 6; k++) CHECK_MSG(same(res[0][k], res[1][k]), "result %d", k);
    release_all(6, res[0]);
    release_all(6, res[1]);
    mft_tensor *all[] = {xb, gob, w, b};
    release_all(4, all);
}

/* ---------------------------------------------------------------- fallback */
static void test_fallback_cases(void) {
    const int64_t sz[4] = {2, 20, 4, 5}, C = 20;
    mft_tensor *x = make_x(4, sz, 1100);
    mft_tensor *w = vec(C, 1101, 0.5), *b = vec(C, 1102, 1.0);
    mft_tensor *rm = mft_zeros(1, &C, MFT_F32, CT), *rv = mft_ones(1, &C, MFT_F32, CT);
    mft_tensor *y = mft_batch_norm(x, rm, rv, w, b, false, 0.1, 1e-5);
    /* nChw8c: the fallback (x in, y back) */
    mft_tensor *x8 = mft_to_format(x, B8);
    mft_conversion_counts_reset();
    mft_tensor *y8 = mft_batch_norm(x8, rm, rv, w, b, false, 0.1, 1e-5);
    CHECK(y8 && mft_tensor_format(y8) == B8 && fallbacks() == 2 && same(y8, y));
    /* a view of a nChw16c tensor that is not packed (narrow on H) */
    mft_tensor *xb = mft_to_format(x, B16), *v = mft_narrow(xb, 2, 1, 2);
    CHECK(v && !mft_tensor_is_contiguous(v, B16));
    mft_tensor *xn = mft_narrow(x, 2, 1, 2), *yn = mft_batch_norm(xn, rm, rv, w, b, false, 0.1, 1e-5);
    mft_conversion_counts_reset();
    mft_tensor *yv = mft_batch_norm(v, rm, rv, w, b, false, 0.1, 1e-5);
    CHECK(yv && mft_tensor_format(yv) == B16 && fallbacks() == 2 && same(yv, yn));
    /* F64 */
    mft_tensor *xd = mft_to_dtype(x, MFT_F64), *xdb = mft_to_format(xd, B16);
    mft_tensor *wd = mft_to_dtype(w, MFT_F64), *bd = mft_to_dtype(b, MFT_F64);
    mft_tensor *rmd = mft_to_dtype(rm, MFT_F64), *rvd = mft_to_dtype(rv, MFT_F64);
    mft_tensor *yd = mft_batch_norm(xd, rmd, rvd, wd, bd, false, 0.1, 1e-5);
    mft_conversion_counts_reset();
    mft_tensor *ydb = mft_batch_norm(xdb, rmd, rvd, wd, bd, false, 0.1, 1e-5);
    CHECK(ydb && mft_tensor_format(ydb) == B16 && fallbacks() == 2 && same(ydb, yd));
    /* an empty batch: an empty nChw16c result, running statistics untouched */
    const int64_t ez[4] = {0, 20, 4, 5};
    mft_tensor *e = mft_zeros(4, ez, MFT_F32, B16);
    const uint64_t hm = mft_tensor_hash(rm);
    mft_tensor *ye = mft_batch_norm(e, rm, rv, w, b, true, 0.1, 1e-5);
    CHECK(ye && mft_tensor_numel(ye) == 0 && mft_tensor_format(ye) == B16 &&
          mft_tensor_hash(rm) == hm);
    mft_tensor *ge = NULL, *gwe = NULL, *gbe = NULL;
    TU_OK_S(mft_batch_norm_backward(e, e, w, rm, rv, true, &ge, &gwe, &gbe));
    CHECK(ge && mft_tensor_numel(ge) == 0 && plain_vec(gwe, C) && plain_vec(gbe, C));
    /* training on one value per channel is refused as on plain input */
    const int64_t oz[4] = {1, 20, 1, 1};
    mft_tensor *o = mft_zeros(4, oz, MFT_F32, B16);
    CHECK(mft_batch_norm(o, rm, rv, w, b, true, 0.1, 1e-5) == NULL &&
          mft_last_error() == MFT_ERR_SHAPE);
    mft_clear_error();
    mft_tensor *all[] = {x,  w,  b,   rm,  rv, y,  x8,  y8,  xb, v,  xn, yn, yv, xd,  xdb,
                         wd, bd, rmd, rvd, yd, ydb, e,  ye, ge, gwe, gbe, o};
    release_all((int)(sizeof all / sizeof *all), all);
}

int main(void) {
    RUN(test_forward_train);
    RUN(test_forward_eval);
    RUN(test_backward);
    RUN(test_autograd);
    RUN(test_threads);
    RUN(test_fallback_cases);
    TEST_MAIN_END();
}
