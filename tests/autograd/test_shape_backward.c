/* tests/autograd/test_shape_backward.c — mft_pad_backward, mft_cat_backward and
 * mft_stack_backward (ops/shape/):
 *   (a) pad backward, every registered kernel (the NCHW / NHWC packed ones
 *       through the op, the reference registered as a user kernel) against a
 *       naive scatter written here, over modes x pads (incl. negative
 *       constant pads) x shapes (N=1, C=1, H=W=1, odd) x input layouts (NCHW,
 *       NHWC, a non-dense grad_out) x F32/F64; result sizes, strides, tag;
 *   (b) finite differences in F64 through mft_pad (pad is linear: the
 *       directional derivative of sum(pad(x) * g) equals <grad_x, v>);
 *   (c) cat / stack backward: values = the slices of grad_out, formats;
 *   (d) results bit-identical at 1 and 2 threads; errors;
 *   (e) golden values from PyTorch 1.13 autograd (backward_misc_cases.txt,
 *       tests/golden/gen_backward_misc.py; the pad / cat / stack cases). */
#include <math.h>
#include <string.h>
#include "mft/cnn.h"
#include "ops_internal.h"
#include "test_util.h"

mft_kernel_fn mft__pad_backward_reference(mft_dtype dt);

/* Input index read by output index o along a dim (the test's own mapping,
 * PyTorch's): -1 when the output is constant fill. */
static int64_t naive_src(int64_t o, int64_t before, int64_t size, mft_pad_mode m) {
    int64_t p = o - before;
    if (m == MFT_PAD_CONSTANT) return p >= 0 && p < size ? p : -1;
    if (m == MFT_PAD_REPLICATE) return p < 0 ? 0 : p >= size ? size - 1 : p;
    if (p < 0) p = -p;
    if (p >= size) p = 2 * (size - 1) - p;
    return p;
}

/* Naive scatter into a packed (row-major) double array of x's numel. */
static double *naive_pad_bw(const mft_tensor *g, const mft_tensor *x, int npad,
                            const int64_t *pads, mft_pad_mode m) {
    const int nd = x->ndim;
    int64_t bef[MFT_MAX_DIMS] = {0};
    for (int i = 0; i < npad / 2; i++) bef[nd - 1 - i] = pads[2 * i];
    double *acc = calloc((size_t)(x->numel ? x->numel : 1), sizeof(double));
    int64_t idx[MFT_MAX_DIMS] = {0};
    if (g->numel == 0) return acc;
    do {
        int64_t lin = 0;
        bool in = true;
        for (int d = 0; d < nd; d++) {
            int64_t s = naive_src(idx[d], bef[d], x->sizes[d], m);
            if (s < 0) in = false;
            lin = lin * x->sizes[d] + (s < 0 ? 0 : s);
        }
        if (in) acc[lin] += mft_tensor_get(g, idx);
    } while (tu_next_index(nd, g->sizes, idx));
    return acc;
}

static int compare_packed(const mft_tensor *got, const double *want, double tol, const char *what) {
    int64_t idx[MFT_MAX_DIMS] = {0}, lin = 0;
    int bad = 0;
    if (got->numel == 0) return 0;
    do {
        double g = mft_tensor_get(got, idx), w = want[lin++];
        if (!(fabs(g - w) <= tol * (1.0 + fabs(w)))) {
            if (bad < 3) CHECK_MSG(false, "%s: element %lld got %.9g want %.9g", what,
                                   (long long)(lin - 1), g, w);
            bad++;
        }
    } while (tu_next_index(got->ndim, got->sizes, idx));
    CHECK_MSG(bad == 0, "%s: %d mismatches", what, bad);
    return bad;
}

/* The result is packed in fmt (x's tag for ranks 3-5, else CONTIGUOUS). */
static void check_format(const mft_tensor *r, const mft_tensor *x, const char *what) {
    const mft_format fmt = x->ndim >= 3 && x->ndim <= 5 ? x->tag : MFT_CONTIGUOUS;
    CHECK_MSG(tu_has_sizes(r, x->ndim, x->sizes), "%s: sizes", what);
    CHECK_MSG(mft_tensor_is_contiguous(r, fmt), "%s: not packed in format %d", what, (int)fmt);
    if (x->ndim >= 3 && x->ndim <= 5) CHECK_MSG(r->tag == fmt, "%s: tag %d", what, (int)r->tag);
}

/* ------------------------------------------------------------------ pad backward sweep */
typedef struct pad_case {
    int nd;
    int64_t sizes[5];
    mft_pad_mode mode;
    int npad;
    int64_t pads[6];
} pad_case;

static const pad_case PAD_CASES[] = {
    {4, {2, 3, 5, 4}, MFT_PAD_CONSTANT, 4, {1, 2, 0, 3}},
    {4, {2, 3, 5, 4}, MFT_PAD_CONSTANT, 4, {-1, 2, 1, -2}},
    {4, {1, 1, 1, 1}, MFT_PAD_CONSTANT, 4, {2, 1, 1, 2}},
    {4, {2, 3, 5, 4}, MFT_PAD_CONSTANT, 6, {1, 0, 0, 1, 1, -1}},
    {4, {2, 3, 5, 4}, MFT_PAD_REFLECT, 4, {3, 2, 1, 4}},
    {4, {1, 1, 3, 7}, MFT_PAD_REFLECT, 4, {6, 5, 2, 2}},
    {3, {3, 5, 4}, MFT_PAD_REFLECT, 2, {2, 3}},
    {4, {2, 3, 5, 4}, MFT_PAD_REPLICATE, 4, {3, 0, 2, 5}},
    {4, {1, 2, 1, 1}, MFT_PAD_REPLICATE, 4, {2, 3, 1, 2}},
    {4, {3, 1, 4, 3}, MFT_PAD_REPLICATE, 6, {1, 2, 0, 1, 2, 1}},
    {3, {2, 3, 6}, MFT_PAD_REFLECT, 2, {5, 4}},
    {3, {2, 3, 6}, MFT_PAD_REPLICATE, 4, {2, 1, 1, 1}},
    {5, {1, 2, 3, 3, 4}, MFT_PAD_REPLICATE, 6, {1, 1, 2, 0, 1, 2}},
    {5, {1, 2, 3, 3, 4}, MFT_PAD_REFLECT, 6, {2, 1, 1, 2, 1, 1}},
    {5, {2, 2, 3, 3, 4}, MFT_PAD_CONSTANT, 6, {-1, 1, 2, -1, 0, 1}},
    {2, {3, 5}, MFT_PAD_CONSTANT, 2, {-2, 3}},
    {2, {3, 5}, MFT_PAD_REFLECT, 2, {4, 1}},
    {1, {6}, MFT_PAD_CONSTANT, 2, {2, -3}},
};

/* grad_out for x padded: packed, or (nondense) a slice of a wider tensor. */
static mft_tensor *make_grad(const mft_tensor *x, int npad, const int64_t *pads, bool nondense,
                             uint64_t *rng) {
    int64_t osz[MFT_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) osz[d] = x->sizes[d];
    for (int i = 0; i < npad / 2; i++) osz[x->ndim - 1 - i] += pads[2 * i] + pads[2 * i + 1];
    if (!nondense) {
        mft_tensor *g = mft_empty(x->ndim, osz, x->dtype, MFT_CONTIGUOUS);
        if (g) tu_fill_grid(g, rng);
        return g;
    }
    int64_t wide[MFT_MAX_DIMS];
    memcpy(wide, osz, sizeof wide);
    wide[x->ndim - 1] = 2 * osz[x->ndim - 1] + 1;
    mft_tensor *base = mft_empty(x->ndim, wide, x->dtype, MFT_CONTIGUOUS);
    mft_tensor *g = base ? mft_slice(base, x->ndim - 1, 1, 1 + 2 * osz[x->ndim - 1], 2) : NULL;
    mft_tensor_release(base);
    if (g) tu_fill_grid(g, rng);
    return g;
}

static int g_ref_runs = 0, g_fast_nchw = 0, g_fast_nhwc = 0;

static void run_pad_case(const pad_case *c, mft_dtype dt, int layout, bool nondense, bool ref,
                         uint64_t *rng) {
    char what[160];
    snprintf(what, sizeof what, "pad_bw nd=%d mode=%d npad=%d %s layout=%d nondense=%d ref=%d",
             c->nd, (int)c->mode, c->npad, mft_dtype_name(dt), layout, nondense, ref);
    mft_tensor *x0 = mft_empty(c->nd, c->sizes, dt, MFT_CONTIGUOUS);
    tu_fill_grid(x0, rng);
    mft_tensor *x = layout == 1 && c->nd == 4 ? mft_contiguous(x0, MFT_CHANNELS_LAST)
                                              : mft_tensor_retain(x0);
    mft_tensor *g = make_grad(x, c->npad, c->pads, nondense, rng);
    if (ref && mft_dispatch_register("pad_backward", x->ndim >= 3 && x->ndim <= 5 ? x->tag
                                                                                  : MFT_CONTIGUOUS,
                                     dt, "pad_backward.ref", mft__pad_backward_reference(dt)) !=
                   MFT_OK)
        CHECK_MSG(false, "register: %s", mft_last_error_message());
    mft_tensor *r = mft_pad_backward(g, x, c->npad, c->pads, c->mode);
    const mft_dispatch_info *di = mft_dispatch_last();
    if (ref) {
        if (r && di->user) g_ref_runs++;
        mft_dispatch_unregister("pad_backward", x->ndim >= 3 && x->ndim <= 5 ? x->tag
                                                                               : MFT_CONTIGUOUS, dt);
    } else if (r) {
        if (strstr(di->kernel, "nchw")) g_fast_nchw++;
        if (strstr(di->kernel, "nhwc")) g_fast_nhwc++;
    }
    CHECK_MSG(r != NULL, "%s: %s", what, mft_last_error_message());
    if (r) {
        double *want = naive_pad_bw(g, x, c->npad, c->pads, c->mode);
        compare_packed(r, want, dt == MFT_F32 ? 1e-5 : 1e-12, what);
        free(want);
        check_format(r, x, what);
    }
    mft_tensor_release(r);
    mft_tensor_release(g);
    mft_tensor_release(x);
    mft_tensor_release(x0);
}

static void test_pad_backward_sweep(void) {
    uint64_t rng = 11;
    const int n = (int)(sizeof PAD_CASES / sizeof PAD_CASES[0]);
    for (int i = 0; i < n; i++)
        for (int dti = 0; dti < 2; dti++)
            for (int layout = 0; layout < 2; layout++)
                for (int nondense = 0; nondense < 2; nondense++)
                    for (int ref = 0; ref < 2; ref++)
                        run_pad_case(&PAD_CASES[i], dti ? MFT_F64 : MFT_F32, layout, nondense, ref,
                                     &rng);
    CHECK(g_ref_runs > 0);
    CHECK(g_fast_nchw > 0);
    CHECK(g_fast_nhwc > 0);
}

/* N=1 made by select + unsqueeze (an NHWC view with odd strides). */
static void test_pad_backward_select(void) {
    uint64_t rng = 5;
    const int64_t sz[4] = {3, 4, 5, 6};
    mft_tensor *x0 = mft_empty(4, sz, MFT_F32, MFT_CHANNELS_LAST);
    tu_fill_grid(x0, &rng);
    mft_tensor *s = mft_select(x0, 0, 1), *x = s ? mft_unsqueeze(s, 0) : NULL;
    const int64_t pads[4] = {2, 1, 3, 0};
    for (int m = 0; m < 3 && x; m++) {
        mft_tensor *g = make_grad(x, 4, pads, false, &rng);
        mft_tensor *r = mft_pad_backward(g, x, 4, pads, (mft_pad_mode)m);
        CHECK_MSG(r != NULL, "%s", mft_last_error_message());
        if (r) {
            double *want = naive_pad_bw(g, x, 4, pads, (mft_pad_mode)m);
            compare_packed(r, want, 1e-5, "select+unsqueeze");
            free(want);
            check_format(r, x, "select+unsqueeze");
        }
        mft_tensor_release(r);
        mft_tensor_release(g);
    }
    mft_tensor_release(x);
    mft_tensor_release(s);
    mft_tensor_release(x0);
}

/* F64 finite differences of L(x) = sum(pad(x) * g) along a random v. */
static double dot_all(const mft_tensor *a, const mft_tensor *b) {
    int64_t idx[MFT_MAX_DIMS] = {0};
    double s = 0;
    if (a->numel == 0) return 0;
    do s += mft_tensor_get(a, idx) * mft_tensor_get(b, idx);
    while (tu_next_index(a->ndim, a->sizes, idx));
    return s;
}

static void test_pad_backward_fd(void) {
    uint64_t rng = 99;
    const int64_t sz[4] = {1, 2, 4, 5};
    const int64_t pads[4] = {2, 3, 3, 1};
    for (int m = 0; m < 3; m++) {
        mft_tensor *x = mft_empty(4, sz, MFT_F64, MFT_CONTIGUOUS);
        mft_tensor *v = mft_empty(4, sz, MFT_F64, MFT_CONTIGUOUS);
        tu_fill_grid(x, &rng);
        tu_fill_grid(v, &rng);
        mft_tensor *g = make_grad(x, 4, pads, false, &rng);
        const double h = 1e-3;
        mft_tensor *hv = mft_mul_scalar(v, h);
        mft_tensor *xp = mft_add(x, hv), *xm = mft_sub(x, hv);
        mft_tensor *yp = mft_pad(xp, 4, pads, (mft_pad_mode)m, 0.0);
        mft_tensor *ym = mft_pad(xm, 4, pads, (mft_pad_mode)m, 0.0);
        mft_tensor *gx = mft_pad_backward(g, x, 4, pads, (mft_pad_mode)m);
        CHECK(yp && ym && gx);
        if (yp && ym && gx) {
            const double fd = (dot_all(yp, g) - dot_all(ym, g)) / (2 * h);
            CHECK_NEAR(fd, dot_all(gx, v), 1e-8);
        }
        mft_tensor *all[] = {x, v, g, hv, xp, xm, yp, ym, gx};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) mft_tensor_release(all[i]);
    }
}

/* Bit-identical at 1 and 2 threads (large enough to run in parallel). */
static void test_pad_backward_threads(void) {
    uint64_t rng = 3;
    const int64_t sz[4] = {4, 16, 33, 31};
    const int64_t pads[4] = {3, 2, 4, 1};
    for (int layout = 0; layout < 2; layout++)
        for (int m = 0; m < 3; m++) {
            mft_tensor *x = mft_empty(4, sz, MFT_F32, layout ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS);
            tu_fill_grid(x, &rng);
            mft_tensor *g = make_grad(x, 4, pads, false, &rng);
            const int nt = mft_num_threads();
            mft_set_num_threads(1);
            mft_tensor *r1 = mft_pad_backward(g, x, 4, pads, (mft_pad_mode)m);
            mft_set_num_threads(2);
            mft_tensor *r2 = mft_pad_backward(g, x, 4, pads, (mft_pad_mode)m);
            mft_set_num_threads(nt);
            CHECK(r1 && r2 && mft_tensor_hash(r1) == mft_tensor_hash(r2) &&
                  memcmp(mft__tensor_ptr(r1), mft__tensor_ptr(r2), (size_t)r1->numel * 4) == 0);
            mft_tensor_release(r1);
            mft_tensor_release(r2);
            mft_tensor_release(g);
            mft_tensor_release(x);
        }
}

static void test_pad_backward_errors(void) {
    const int64_t sz[4] = {1, 2, 4, 5}, pads[4] = {1, 1, 1, 1}, bad[4] = {1, 1, 1, 2};
    mft_tensor *x = mft_zeros(4, sz, MFT_F32, MFT_CONTIGUOUS);
    uint64_t rng = 1;
    mft_tensor *g = make_grad(x, 4, pads, false, &rng);
    mft_tensor *g64 = mft_to_dtype(g, MFT_F64);
    TU_EXPECT_NULL_(mft_pad_backward(NULL, x, 4, pads, MFT_PAD_CONSTANT), "null grad");
    CHECK_ERR(MFT_ERR_NULL, "mft_pad_backward");
    TU_EXPECT_NULL_(mft_pad_backward(g, NULL, 4, pads, MFT_PAD_CONSTANT), "null x");
    CHECK_ERR(MFT_ERR_NULL, "mft_pad_backward");
    TU_EXPECT_NULL_(mft_pad_backward(g, x, 4, bad, MFT_PAD_CONSTANT), "wrong grad sizes");
    CHECK_ERR(MFT_ERR_SHAPE, "mft_pad_backward");
    TU_EXPECT_NULL_(mft_pad_backward(g64, x, 4, pads, MFT_PAD_CONSTANT), "dtype");
    CHECK_ERR(MFT_ERR_DTYPE, "mft_pad_backward");
    TU_EXPECT_NULL_(mft_pad_backward(g, x, 3, pads, MFT_PAD_CONSTANT), "odd npad");
    CHECK_ERR(MFT_ERR_INVALID, "mft_pad_backward");
    const int64_t big[4] = {5, 1, 1, 1};
    TU_EXPECT_NULL_(mft_pad_backward(g, x, 4, big, MFT_PAD_REFLECT), "reflect too large");
    CHECK_ERR(MFT_ERR_INVALID, "mft_pad_backward");
    TU_EXPECT_NULL_(mft_pad_backward(g, x, 4, pads, (mft_pad_mode)7), "mode");
    CHECK_ERR(MFT_ERR_INVALID, "mft_pad_backward");
    mft_tensor_release(g64);
    mft_tensor_release(g);
    mft_tensor_release(x);
}

/* ------------------------------------------------------------------ cat / stack backward */
static void check_slice(const mft_tensor *grad, const mft_tensor *part, const mft_tensor *t,
                        const char *what) {
    CHECK_MSG(grad != NULL, "%s: NULL", what);
    if (!grad) return;
    check_format(grad, t, what);
    CHECK(grad->dtype == t->dtype);
    int64_t idx[MFT_MAX_DIMS] = {0};
    int bad = 0;
    if (grad->numel)
        do bad += mft_tensor_get(grad, idx) != mft_tensor_get(part, idx);
        while (tu_next_index(grad->ndim, grad->sizes, idx));
    CHECK_MSG(bad == 0, "%s: %d values differ", what, bad);
}

static void test_cat_backward(void) {
    uint64_t rng = 21;
    for (int dti = 0; dti < 2; dti++)
        for (int fmt = 0; fmt < 3; fmt++) /* all NCHW, all NHWC, mixed */
            for (int dim = 0; dim < 4; dim++) {
                const mft_dtype dt = dti ? MFT_F64 : MFT_F32;
                int64_t s0[4] = {2, 3, 4, 5}, s1[4] = {2, 3, 4, 5}, s2[4] = {2, 3, 4, 5};
                s0[dim] = 1, s1[dim] = 3, s2[dim] = 2;
                mft_tensor *t[3];
                const int64_t *ss[3] = {s0, s1, s2};
                for (int i = 0; i < 3; i++) {
                    const bool cl = fmt == 1 || (fmt == 2 && i == 1);
                    t[i] = mft_empty(4, ss[i], dt, cl ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS);
                }
                mft_tensor *y = mft_cat(3, (const mft_tensor *const *)t, dim);
                mft_tensor *g = y ? mft_empty_like(y, MFT_PRESERVE) : NULL;
                if (g) tu_fill_grid(g, &rng);
                mft_tensor *grads[3] = {NULL, NULL, NULL};
                TU_OK_S(mft_cat_backward(g, 3, (const mft_tensor *const *)t, dim, grads));
                int64_t off = 0;
                for (int i = 0; i < 3 && g; i++) {
                    mft_tensor *part = mft_narrow(g, dim, off, ss[i][dim]);
                    off += ss[i][dim];
                    check_slice(grads[i], part, t[i], "cat_backward");
                    mft_tensor_release(part);
                    mft_tensor_release(grads[i]);
                }
                /* a non-dense grad_out (every other W column of a wider tensor) */
                if (g && dim != 3) {
                    int64_t wide[4];
                    memcpy(wide, g->sizes, sizeof wide);
                    wide[3] *= 2;
                    mft_tensor *base = mft_empty(4, wide, dt, MFT_CONTIGUOUS);
                    mft_tensor *gs = mft_slice(base, 3, 0, wide[3], 2);
                    tu_fill_grid(gs, &rng);
                    TU_OK_S(mft_cat_backward(gs, 3, (const mft_tensor *const *)t, dim, grads));
                    off = 0;
                    for (int i = 0; i < 3; i++) {
                        mft_tensor *part = mft_narrow(gs, dim, off, ss[i][dim]);
                        off += ss[i][dim];
                        check_slice(grads[i], part, t[i], "cat_backward nondense");
                        mft_tensor_release(part);
                        mft_tensor_release(grads[i]);
                    }
                    mft_tensor_release(gs);
                    mft_tensor_release(base);
                }
                mft_tensor_release(g);
                mft_tensor_release(y);
                for (int i = 0; i < 3; i++) mft_tensor_release(t[i]);
            }
    /* the legacy empty 1-D input gets an empty gradient */
    const int64_t a[2] = {2, 3}, e[1] = {0};
    mft_tensor *t[3] = {mft_zeros(2, a, MFT_F32, MFT_CONTIGUOUS),
                        mft_zeros(1, e, MFT_F32, MFT_CONTIGUOUS),
                        mft_ones(2, a, MFT_F32, MFT_CONTIGUOUS)};
    const int64_t gs[2] = {4, 3};
    mft_tensor *g = mft_arange(0, 12, 1, MFT_F32), *g2 = g ? mft_view(g, 2, gs) : NULL;
    mft_tensor *grads[3] = {NULL, NULL, NULL};
    TU_OK_S(mft_cat_backward(g2, 3, (const mft_tensor *const *)t, 0, grads));
    CHECK(grads[1] && grads[1]->ndim == 1 && grads[1]->sizes[0] == 0);
    const int64_t i20[2] = {0, 2}, i00[2] = {0, 0};
    CHECK(grads[2] && mft_tensor_get(grads[2], i00) == 6.0 && mft_tensor_get(grads[0], i20) == 2.0);
    for (int i = 0; i < 3; i++) {
        mft_tensor_release(grads[i]);
        mft_tensor_release(t[i]);
    }
    mft_tensor_release(g2);
    mft_tensor_release(g);
}

static void test_stack_backward(void) {
    uint64_t rng = 23;
    for (int dti = 0; dti < 2; dti++)
        for (int cl = 0; cl < 2; cl++)
            for (int dim = -4; dim < 4; dim++) {
                const mft_dtype dt = dti ? MFT_F64 : MFT_F32;
                const int64_t s3[3] = {3, 4, 5}, s4[4] = {1, 3, 4, 5};
                mft_tensor *t[2];
                for (int i = 0; i < 2; i++)
                    t[i] = cl ? mft_empty(4, s4, dt, MFT_CHANNELS_LAST)
                              : mft_empty(3, s3, dt, MFT_CONTIGUOUS);
                const int nd = t[0]->ndim;
                if (dim < -(nd + 1) || dim > nd) {
                    mft_tensor_release(t[0]);
                    mft_tensor_release(t[1]);
                    continue;
                }
                mft_tensor *y = mft_stack(2, (const mft_tensor *const *)t, dim);
                mft_tensor *g = y ? mft_empty_like(y, MFT_PRESERVE) : NULL;
                if (g) tu_fill_grid(g, &rng);
                mft_tensor *grads[2] = {NULL, NULL};
                TU_OK_S(mft_stack_backward(g, 2, (const mft_tensor *const *)t, dim, grads));
                const int d = dim < 0 ? dim + nd + 1 : dim;
                for (int i = 0; i < 2 && g; i++) {
                    mft_tensor *part = mft_select(g, d, i);
                    check_slice(grads[i], part, t[i], "stack_backward");
                    mft_tensor_release(part);
                    mft_tensor_release(grads[i]);
                }
                mft_tensor_release(g);
                mft_tensor_release(y);
                for (int i = 0; i < 2; i++) mft_tensor_release(t[i]);
            }
}

static void test_cat_stack_errors(void) {
    const int64_t s[2] = {2, 3}, gs[2] = {4, 3}, wrong[2] = {5, 3};
    mft_tensor *t[2] = {mft_zeros(2, s, MFT_F32, MFT_CONTIGUOUS),
                        mft_zeros(2, s, MFT_F32, MFT_CONTIGUOUS)};
    mft_tensor *g = mft_zeros(2, gs, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *gw = mft_zeros(2, wrong, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *grads[2] = {NULL, NULL};
    TU_EXPECT_STATUS_(mft_cat_backward(NULL, 2, (const mft_tensor *const *)t, 0, grads), "null", MFT_ERR_NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_cat_backward");
    TU_EXPECT_STATUS_(mft_cat_backward(gw, 2, (const mft_tensor *const *)t, 0, grads), "sizes", MFT_ERR_SHAPE);
    CHECK_ERR(MFT_ERR_SHAPE, "mft_cat_backward");
    CHECK(grads[0] == NULL && grads[1] == NULL);
    TU_EXPECT_STATUS_(mft_cat_backward(g, 2, (const mft_tensor *const *)t, 5, grads), "dim", MFT_ERR_DIM);
    CHECK(strstr(mft_last_error_message(), "mft_cat_backward") != NULL);
    mft_clear_error();
    TU_EXPECT_STATUS_(mft_cat_backward(g, 0, (const mft_tensor *const *)t, 0, grads), "n", MFT_ERR_INVALID);
    CHECK_ERR(MFT_ERR_INVALID, "mft_cat_backward");
    TU_EXPECT_STATUS_(mft_stack_backward(g, 2, (const mft_tensor *const *)t, 0, grads), "stack sizes", MFT_ERR_SHAPE);
    CHECK_ERR(MFT_ERR_SHAPE, "mft_stack_backward");
    TU_EXPECT_STATUS_(mft_stack_backward(g, 2, (const mft_tensor *const *)t, 0, NULL), "grads", MFT_ERR_NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_stack_backward");
    CHECK(grads[0] == NULL && grads[1] == NULL);
    mft_tensor_release(gw);
    mft_tensor_release(g);
    mft_tensor_release(t[0]);
    mft_tensor_release(t[1]);
}

/* ------------------------------------------------------------------ golden (PyTorch 1.13)
 * Format of backward_misc_cases.txt (gen_backward_misc.py), per case:
 *   case NAME / op pad|cat|stack|matmul|linear / dtype f32|f64 / arg ...
 * This file runs the pad / cat / stack cases; see gen_backward_misc.py. */
#define GL 65536
static char g_line[GL];

static mft_tensor *parse_tensor(const char **pp, mft_dtype dt) {
    int64_t nd, sz[MFT_MAX_DIMS];
    if (!tu_next_int(pp, &nd) || nd < 0 || nd > MFT_MAX_DIMS) return NULL;
    for (int d = 0; d < nd; d++)
        if (!tu_next_int(pp, &sz[d])) return NULL;
    mft_tensor *t = mft_empty((int)nd, sz, dt, MFT_CONTIGUOUS);
    if (!t) return NULL;
    double *tmp = malloc(sizeof(double) * (size_t)(t->numel ? t->numel : 1));
    for (int64_t i = 0; i < t->numel; i++)
        if (!tu_next_double(pp, &tmp[i])) {
            free(tmp);
            mft_tensor_release(t);
            return NULL;
        }
    for (int64_t i = 0; i < t->numel; i++)
        mft__store(dt, mft__tensor_ptr(t) + (size_t)i * mft__elem_size(dt), tmp[i]);
    free(tmp);
    return t;
}

static void check_golden_tensor(const mft_tensor *got, const mft_tensor *want, const char *name) {
    CHECK_MSG(got && want && got->ndim == want->ndim && tu_has_sizes(got, want->ndim, want->sizes),
              "golden %s: sizes", name);
    if (!got || !want || got->ndim != want->ndim) return;
    int64_t idx[MFT_MAX_DIMS] = {0};
    int bad = 0;
    const double tol = got->dtype == MFT_F32 ? 1e-5 : 1e-12;
    if (got->numel)
        do bad += !(fabs(mft_tensor_get(got, idx) - mft_tensor_get(want, idx)) <= tol * (1 + fabs(mft_tensor_get(want, idx))));
        while (tu_next_index(got->ndim, got->sizes, idx));
    CHECK_MSG(bad == 0, "golden %s: %d values differ", name, bad);
}

static void test_golden(void) {
    FILE *fp = fopen(MFT_TEST_DATA_DIR "/backward_misc_cases.txt", "r");
    CHECK_MSG(fp != NULL, "cannot open backward_misc_cases.txt");
    if (!fp) return;
    int ncases = 0;
    while (fgets(g_line, GL, fp)) {
        const char *p = g_line;
        char op[32], name[64], fmt[16];
        int64_t dim, npad, mode;
        mft_dtype dt;
        if (g_line[0] == '#' || !tu_next_tok(&p, op, sizeof op)) continue;
        if (!tu_next_tok(&p, name, sizeof name) || !tu_next_dtype(&p, &dt) ||
            !tu_next_tok(&p, fmt, sizeof fmt)) {
            CHECK_MSG(false, "bad line %.60s", g_line);
            continue;
        }
        const mft_format f = strcmp(fmt, "nhwc") == 0 ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
        if (strcmp(op, "pad") == 0) {
            int64_t pads[6];
            bool ok = tu_next_int(&p, &mode) && tu_next_int(&p, &npad) && npad <= 6;
            for (int i = 0; ok && i < npad; i++) ok = tu_next_int(&p, &pads[i]);
            mft_tensor *x0 = ok ? parse_tensor(&p, dt) : NULL, *g = x0 ? parse_tensor(&p, dt) : NULL;
            mft_tensor *want = g ? parse_tensor(&p, dt) : NULL;
            CHECK_MSG(want != NULL, "golden %s: parse", name);
            mft_tensor *x = x0 ? mft_contiguous(x0, f) : NULL;
            mft_tensor *r = want ? mft_pad_backward(g, x, (int)npad, pads, (mft_pad_mode)mode) : NULL;
            if (want) {
                check_golden_tensor(r, want, name);
                if (r) check_format(r, x, name);
            }
            ncases++;
            mft_tensor *all[] = {x0, x, g, want, r};
            for (size_t i = 0; i < 5; i++) mft_tensor_release(all[i]);
        } else if (strcmp(op, "cat") == 0 || strcmp(op, "stack") == 0) {
            int64_t n;
            bool ok = tu_next_int(&p, &dim) && tu_next_int(&p, &n) && n >= 1 && n <= 4;
            mft_tensor *ts[4] = {0}, *tf[4] = {0}, *want[4] = {0}, *grads[4] = {0}, *g = NULL;
            for (int i = 0; ok && i < n; i++) {
                ts[i] = parse_tensor(&p, dt);
                tf[i] = ts[i] ? mft_contiguous(ts[i], ts[i]->ndim == 4 ? f : MFT_CONTIGUOUS) : NULL;
                ok = tf[i] != NULL;
            }
            if (ok) g = parse_tensor(&p, dt);
            for (int i = 0; ok && g && i < n; i++) ok = (want[i] = parse_tensor(&p, dt)) != NULL;
            CHECK_MSG(ok && g, "golden %s: parse", name);
            if (ok && g) {
                mft_status st = op[0] == 'c'
                                    ? mft_cat_backward(g, (int)n, (const mft_tensor *const *)tf, (int)dim, grads)
                                    : mft_stack_backward(g, (int)n, (const mft_tensor *const *)tf, (int)dim, grads);
                CHECK_MSG(st == MFT_OK, "golden %s: %s", name, mft_last_error_message());
                for (int i = 0; st == MFT_OK && i < n; i++) {
                    check_golden_tensor(grads[i], want[i], name);
                    check_format(grads[i], tf[i], name);
                }
            }
            ncases++;
            for (int i = 0; i < 4; i++) {
                mft_tensor_release(ts[i]);
                mft_tensor_release(tf[i]);
                mft_tensor_release(want[i]);
                mft_tensor_release(grads[i]);
            }
            mft_tensor_release(g);
        }
    }
    fclose(fp);
    CHECK_MSG(ncases >= 6, "only %d pad/cat/stack golden cases", ncases);
}

int main(void) {
    RUN(test_pad_backward_sweep);
    RUN(test_pad_backward_select);
    RUN(test_pad_backward_fd);
    RUN(test_pad_backward_threads);
    RUN(test_pad_backward_errors);
    RUN(test_cat_backward);
    RUN(test_stack_backward);
    RUN(test_cat_stack_errors);
    RUN(test_golden);
    TEST_MAIN_END();
}
