/* tests/ops/test_norm.c — batch_norm, group_norm, instance_norm, layer_norm
 * (ops/norm/):
 *   (a) values against a naive double reference written here, over random
 *       shapes (N = 1, C = 1, spatial = 1 included), NCHW / NHWC / non-dense
 *       inputs, F32 / F64, weight and bias NULL or given, batch_norm in
 *       training (running stats updated in place by the formula) and eval;
 *   (b) result layout: packed in the input's tag;
 *   (c) dispatch: kernel names, conversions, strict mode;
 *   (d) bit-identical results with 1 and 2 threads;
 *   (e) argument errors (nothing written on failure);
 *   (f) golden cases from PyTorch 1.13 (tests/golden/norm_cases.txt, written
 *       by gen_norm.py): values, running stats, result layout, errors. */
#include <math.h>
#include <string.h>
#include "ops_internal.h"
#include "test_util.h"

enum { K_BATCH, K_GROUP, K_INSTANCE, K_LAYER };
static const char *const kind_name[] = {"batch_norm", "group_norm", "instance_norm", "layer_norm"};

/* ------------------------------------------------------------------ helpers */

static void fill_random(mft_tensor *t, uint64_t seed, double lo, double hi) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ULL + 1;
    int nd = mft_tensor_ndim(t);
    int64_t idx[MFT_MAX_DIMS] = {0};
    if (mft_tensor_numel(t) == 0) return;
    do {
        double u = (double)(tu_rng_next(&s) >> 11) / 9007199254740992.0;
        mft_tensor_set(t, idx, lo + (hi - lo) * u);
    } while (tu_next_index(nd, mft_tensor_sizes(t), idx));
}

/* Logical row-major values of t into a (numel doubles). */
static void to_array(const mft_tensor *t, double *a) {
    int nd = mft_tensor_ndim(t);
    int64_t idx[MFT_MAX_DIMS] = {0}, i = 0;
    if (mft_tensor_numel(t) == 0) return;
    do a[i++] = mft_tensor_get(t, idx);
    while (tu_next_index(nd, mft_tensor_sizes(t), idx));
}

/* Naive reference: y (logical order) of kind over x, with statistics over
 * `nstat` sets; for batch_norm training also the batch mean and unbiased
 * variance per channel in bmean / bvar. */
static double *naive_norm(int kind, const mft_tensor *x, const mft_tensor *w, const mft_tensor *b,
                          const mft_tensor *rm, const mft_tensor *rv, bool training, double eps,
                          int64_t groups, int nnorm, double *bmean, double *bvar) {
    int nd = mft_tensor_ndim(x);
    const int64_t *sz = mft_tensor_sizes(x);
    int64_t numel = mft_tensor_numel(x);
    double *xd = malloc(sizeof(double) * (size_t)(numel + 1));
    double *y = malloc(sizeof(double) * (size_t)(numel + 1));
    to_array(x, xd);
    int64_t nw = w ? mft_tensor_numel(w) : 0, nb = b ? mft_tensor_numel(b) : 0;
    double *wd = malloc(sizeof(double) * (size_t)(nw + 1)), *bd = malloc(sizeof(double) * (size_t)(nb + 1));
    if (w) to_array(w, wd);
    if (b) to_array(b, bd);
    int64_t N = sz[0], C = kind == K_LAYER ? 1 : sz[1];
    int64_t S = kind == K_LAYER ? 1 : tu_shape_numel(nd - 2, sz + 2);
    int64_t L = kind == K_LAYER ? tu_shape_numel(nnorm, sz + nd - nnorm) : 0;
    int64_t G = kind == K_GROUP ? groups : kind == K_INSTANCE ? C : 1;
    if (kind == K_BATCH) {
        for (int64_t c = 0; c < C; c++) {
            double m, v;
            if (training) {
                double s = 0, q = 0;
                for (int64_t n = 0; n < N; n++)
                    for (int64_t k = 0; k < S; k++) s += xd[(n * C + c) * S + k];
                m = s / (double)(N * S);
                for (int64_t n = 0; n < N; n++)
                    for (int64_t k = 0; k < S; k++) {
                        double d = xd[(n * C + c) * S + k] - m;
                        q += d * d;
                    }
                v = q / (double)(N * S);
                if (bmean) bmean[c] = m;
                if (bvar) bvar[c] = N * S > 1 ? q / (double)(N * S - 1) : NAN;
            } else {
                int64_t i1[1] = {c};
                m = mft_tensor_get(rm, i1);
                v = mft_tensor_get(rv, i1);
            }
            double rs = 1.0 / sqrt(v + eps);
            for (int64_t n = 0; n < N; n++)
                for (int64_t k = 0; k < S; k++) {
                    int64_t i = (n * C + c) * S + k;
                    y[i] = (xd[i] - m) * rs * (w ? wd[c] : 1.0) + (b ? bd[c] : 0.0);
                }
        }
    } else {
        /* sets of `len` consecutive logical elements */
        int64_t len = kind == K_LAYER ? L : (C / G) * S;
        int64_t nsets = len ? numel / len : 0;
        for (int64_t k = 0; k < nsets; k++) {
            double s = 0, q = 0;
            for (int64_t j = 0; j < len; j++) s += xd[k * len + j];
            double m = s / (double)len;
            for (int64_t j = 0; j < len; j++) q += (xd[k * len + j] - m) * (xd[k * len + j] - m);
            double rs = 1.0 / sqrt(q / (double)len + eps);
            for (int64_t j = 0; j < len; j++) {
                int64_t i = k * len + j;
                int64_t a = kind == K_LAYER ? j : (i / S) % C;
                y[i] = (xd[i] - m) * rs * (w ? wd[a] : 1.0) + (b ? bd[a] : 0.0);
            }
        }
    }
    (void)N;
    free(xd);
    free(wd);
    free(bd);
    return y;
}

/* Largest |got - want| / (1 + |want|) over the logical elements. */
static double max_err(const mft_tensor *got, const double *want) {
    int nd = mft_tensor_ndim(got);
    int64_t idx[MFT_MAX_DIMS] = {0}, i = 0;
    double worst = 0;
    if (mft_tensor_numel(got) == 0) return 0;
    do {
        double g = mft_tensor_get(got, idx), w = want[i++];
        double e = fabs(g - w) / (1.0 + fabs(w));
        if (!(e <= worst)) worst = e; /* NaN wins */
    } while (tu_next_index(nd, mft_tensor_sizes(got), idx));
    return worst;
}

/* x of sizes in layout 0 NCHW, 1 NHWC, 2 a random non-dense view */
static mft_tensor *make_x(int nd, const int64_t *sz, mft_dtype dt, int layout, uint64_t *rng,
                          uint64_t seed) {
    tu_layout_opts lo = {3, 2, false};
    mft_tensor *x;
    if (layout == 2) x = tu_strided_view(nd, sz, dt, 0.0, &lo, rng, NULL);
    else x = mft_empty(nd, sz, dt, layout ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS);
    if (x) fill_random(x, seed, -3.0, 5.0);
    return x;
}

static mft_tensor *make_vec(int n, const int64_t *sz, mft_dtype dt, uint64_t seed, double lo,
                            double hi, bool strided) {
    if (strided && n == 1) { /* every other element of a bigger vector */
        int64_t big = 2 * sz[0] + 1;
        mft_tensor *base = mft_empty(1, &big, dt, MFT_CONTIGUOUS);
        mft_tensor *v = mft_slice(base, 0, 1, big, 2);
        mft_tensor_release(base);
        if (v) fill_random(v, seed, lo, hi);
        return v;
    }
    mft_tensor *t = mft_empty(n, sz, dt, MFT_CONTIGUOUS);
    if (t) fill_random(t, seed, lo, hi);
    return t;
}

/* ------------------------------------------------------------------ (a) values */

static void test_random_values(void) {
    uint64_t rng = 0x0A0B0C0DULL;
    int nfail = 0, ncases = 0;
    for (int iter = 0; iter < 600; iter++) {
        int kind = (int)(iter % 4);
        int nd = (int)tu_rng_int(&rng, kind == K_LAYER ? 1 : kind == K_INSTANCE ? 3 : 2, 5);
        int64_t sz[MFT_MAX_DIMS];
        for (int d = 0; d < nd; d++) sz[d] = tu_rng_int(&rng, 1, 5);
        if (tu_rng_int(&rng, 0, 3) == 0) sz[tu_rng_int(&rng, 0, nd - 1)] = tu_rng_int(&rng, 9, 70);
        if (tu_rng_int(&rng, 0, 5) == 0) sz[0] = 1;
        if (nd >= 2 && tu_rng_int(&rng, 0, 5) == 0) sz[1] = 1;
        if (nd >= 3 && tu_rng_int(&rng, 0, 5) == 0)
            for (int d = 2; d < nd; d++) sz[d] = 1;
        int64_t groups = 1;
        if (kind == K_GROUP) {
            int64_t C = sz[1], divs[16];
            int nds = 0;
            for (int64_t g = 1; g <= C && nds < 16; g++)
                if (C % g == 0) divs[nds++] = g;
            groups = divs[tu_rng_int(&rng, 0, nds - 1)];
            /* PyTorch rejects N * C / groups * spatial == 1 (tested in test_errors) */
            if (sz[0] * (C / groups) * tu_shape_numel(nd - 2, sz + 2) == 1) sz[0] = 2;
        }
        int64_t S = nd >= 2 ? tu_shape_numel(nd - 2, sz + 2) : 1;
        if (kind == K_INSTANCE && S == 1) sz[nd - 1] = 2, S = tu_shape_numel(nd - 2, sz + 2);
        int nnorm = kind == K_LAYER ? (int)tu_rng_int(&rng, 1, nd) : 0;
        bool training = kind != K_BATCH || tu_rng_int(&rng, 0, 2) != 0;
        if (kind == K_BATCH && training && sz[0] * S == 1) training = false;
        int layout = (int)tu_rng_int(&rng, 0, 2);
        if (layout == 1 && (nd < 3 || nd > 5)) layout = 0;
        mft_dtype dt = tu_rng_int(&rng, 0, 3) == 0 ? MFT_F64 : MFT_F32;
        bool has_w = tu_rng_int(&rng, 0, 2) != 0, has_b = tu_rng_int(&rng, 0, 2) != 0;
        bool strided_p = tu_rng_int(&rng, 0, 2) == 0;
        double eps = tu_rng_int(&rng, 0, 1) ? 1e-5 : 0.1, mom = 0.1 + 0.2 * (double)(iter % 3);

        mft_tensor *x = make_x(nd, sz, dt, layout, &rng, (uint64_t)iter + 7);
        CHECK(x != NULL);
        if (!x) continue;
        int pn = kind == K_LAYER ? nnorm : 1;
        const int64_t *psz = kind == K_LAYER ? sz + nd - nnorm : sz + 1;
        mft_tensor *w = has_w ? make_vec(pn, psz, dt, (uint64_t)iter * 3 + 1, 0.5, 2.0, strided_p) : NULL;
        mft_tensor *b = has_b ? make_vec(pn, psz, dt, (uint64_t)iter * 3 + 2, -1.0, 1.0, strided_p) : NULL;
        mft_tensor *rm = NULL, *rv = NULL;
        bool has_rs = kind == K_BATCH && (!training || tu_rng_int(&rng, 0, 1));
        if (has_rs) {
            rm = make_vec(1, sz + 1, dt, (uint64_t)iter * 5 + 3, -1.0, 1.0, strided_p);
            rv = make_vec(1, sz + 1, dt, (uint64_t)iter * 5 + 4, 0.5, 2.0, strided_p);
        }
        int64_t C = nd >= 2 ? sz[1] : 1;
        double *bm = calloc((size_t)C + 1, sizeof(double)), *bv = calloc((size_t)C + 1, sizeof(double));
        double *rm0 = calloc((size_t)C + 1, sizeof(double)), *rv0 = calloc((size_t)C + 1, sizeof(double));
        if (rm) to_array(rm, rm0), to_array(rv, rv0);
        double *want = naive_norm(kind, x, w, b, rm, rv, training, eps, groups, nnorm, bm, bv);
        mft_tensor *y = NULL;
        switch (kind) {
        case K_BATCH: y = mft_batch_norm(x, rm, rv, w, b, training, mom, eps); break;
        case K_GROUP: y = mft_group_norm(x, groups, w, b, eps); break;
        case K_INSTANCE: y = mft_instance_norm(x, w, b, eps); break;
        default: y = mft_layer_norm(x, nnorm, sz + nd - nnorm, w, b, eps); break;
        }
        char desc[200];
        tu_describe(x, desc, sizeof desc, true);
        ncases++;
        bool ok = y != NULL;
        double tol = dt == MFT_F32 ? 2e-5 : 1e-12;
        double e = ok ? max_err(y, want) : INFINITY;
        ok = ok && e <= tol;
        /* layout: packed in x's tag (rank 3-5), else contiguous */
        mft_format want_fmt = nd >= 3 && nd <= 5 ? mft_tensor_format(x) : MFT_CONTIGUOUS;
        ok = ok && mft_tensor_is_contiguous(y, want_fmt) && mft_tensor_dtype(y) == dt;
        if (ok && want_fmt == MFT_CHANNELS_LAST) ok = mft_tensor_format(y) == MFT_CHANNELS_LAST;
        /* running stats: (1 - m) * r + m * stat (unbiased var) */
        if (ok && has_rs) {
            double *rm1 = calloc((size_t)C + 1, sizeof(double)), *rv1 = calloc((size_t)C + 1, sizeof(double));
            to_array(rm, rm1);
            to_array(rv, rv1);
            for (int64_t c = 0; c < C; c++) {
                double em = training ? (1 - mom) * rm0[c] + mom * bm[c] : rm0[c];
                double ev = training ? (1 - mom) * rv0[c] + mom * bv[c] : rv0[c];
                if (fabs(rm1[c] - em) > tol * (1 + fabs(em)) || fabs(rv1[c] - ev) > tol * (1 + fabs(ev))) {
                    ok = false;
                    if (nfail < 5)
                        fprintf(stderr, "running stats c=%lld: mean %.9g want %.9g, var %.9g want %.9g\n",
                                (long long)c, rm1[c], em, rv1[c], ev);
                }
            }
            free(rm1);
            free(rv1);
        }
        if (!ok && nfail++ < 5)
            CHECK_MSG(false, "iter %d %s %s %s train %d w %d b %d rs %d groups %lld nnorm %d: err %g (%s)",
                      iter, kind_name[kind], desc, mft_dtype_name(dt), training, has_w, has_b,
                      has_rs, (long long)groups, nnorm, e, y ? "" : mft_last_error_message());
        free(want);
        free(bm);
        free(bv);
        free(rm0);
        free(rv0);
        mft_tensor_release(y);
        mft_tensor_release(x);
        mft_tensor_release(w);
        mft_tensor_release(b);
        mft_tensor_release(rm);
        mft_tensor_release(rv);
    }
    CHECK_EQ_I(nfail, 0);
    CHECK_EQ_I(ncases, 600);
}

/* A fixed small case checked by hand: x = [[1, 3], [5, 7]] as (N=2, C=2),
 * batch stats c0 {1, 5}: mean 3, var 4; c1 {3, 7}: mean 5, var 4. */
static void test_batch_norm_by_hand(void) {
    int64_t sz[2] = {2, 2}, c = 2;
    mft_tensor *x = mft_empty(2, sz, MFT_F64, MFT_CONTIGUOUS);
    double *xp = mft_tensor_data(x);
    xp[0] = 1, xp[1] = 3, xp[2] = 5, xp[3] = 7;
    mft_tensor *rm = mft_zeros(1, &c, MFT_F64, MFT_CONTIGUOUS);
    mft_tensor *rv = mft_ones(1, &c, MFT_F64, MFT_CONTIGUOUS);
    int64_t v0 = mft_tensor_version(rm);
    mft_tensor *y = mft_batch_norm(x, rm, rv, NULL, NULL, true, 0.5, 0.0);
    CHECK(y != NULL);
    if (y) {
        const double *yp = mft_tensor_data(y);
        CHECK_NEAR(yp[0], -1.0, 1e-12);
        CHECK_NEAR(yp[1], -1.0, 1e-12);
        CHECK_NEAR(yp[2], 1.0, 1e-12);
        CHECK_NEAR(yp[3], 1.0, 1e-12);
    }
    const double *m = mft_tensor_data(rm), *v = mft_tensor_data(rv);
    CHECK_NEAR(m[0], 1.5, 1e-12); /* 0.5 * 0 + 0.5 * 3 */
    CHECK_NEAR(m[1], 2.5, 1e-12);
    CHECK_NEAR(v[0], 4.5, 1e-12); /* 0.5 * 1 + 0.5 * 8 (unbiased) */
    CHECK_NEAR(v[1], 4.5, 1e-12);
    CHECK(mft_tensor_version(rm) > v0);
    /* eval with those running stats */
    mft_tensor *y2 = mft_batch_norm(x, rm, rv, NULL, NULL, false, 0.5, 0.0);
    CHECK(y2 && fabs(((double *)mft_tensor_data(y2))[0] - (1 - 1.5) / sqrt(4.5)) < 1e-12);
    CHECK_NEAR(m[0], 1.5, 1e-12); /* eval leaves them alone */
    mft_tensor_release(y2);
    mft_tensor_release(y);
    mft_tensor_release(rm);
    mft_tensor_release(rv);
    mft_tensor_release(x);
}

/* ------------------------------------------------------------------ (b)(c) layout, dispatch */

static void check_last(const char *op, const char *kernel, int conversions) {
    const mft_dispatch_info *d = mft_dispatch_last();
    CHECK_MSG(strcmp(d->op, op) == 0, "op %s, want %s", d->op, op);
    CHECK_MSG(strcmp(d->kernel, kernel) == 0, "kernel %s, want %s", d->kernel, kernel);
    CHECK_MSG(d->conversions == conversions, "%s: %d conversions, want %d", kernel,
              d->conversions, conversions);
}

static void test_dispatch_and_layout(void) {
    int64_t sz[4] = {2, 6, 5, 7};
    for (int f = 0; f < 2; f++) {
        mft_format fmt = f ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
        const char *tag = f ? "nhwc" : "nchw";
        char name[64];
        mft_tensor *x = mft_randn(4, sz, MFT_F32, fmt, 11);
        mft_tensor *y = mft_batch_norm(x, NULL, NULL, NULL, NULL, true, 0.1, 1e-5);
        snprintf(name, sizeof name, "batch_norm.%s.f32", tag);
        check_last("batch_norm", name, 0);
        CHECK(y && mft_tensor_is_contiguous(y, fmt) && mft_tensor_format(y) == fmt);
        mft_tensor_release(y);
        y = mft_group_norm(x, 3, NULL, NULL, 1e-5);
        snprintf(name, sizeof name, "group_norm.%s.f32", tag);
        check_last("group_norm", name, 0);
        CHECK(y && mft_tensor_is_contiguous(y, fmt) && mft_tensor_format(y) == fmt);
        mft_tensor_release(y);
        y = mft_instance_norm(x, NULL, NULL, 1e-5);
        check_last("group_norm", name, 0);
        CHECK(y && mft_tensor_is_contiguous(y, fmt) && mft_tensor_format(y) == fmt);
        mft_tensor_release(y);
        /* layer_norm F32 has an NHWC kernel for every nnorm (runs and
         * columns); no conversion */
        for (int nn = 1; nn <= 4; nn++) {
            y = mft_layer_norm(x, nn, sz + 4 - nn, NULL, NULL, 1e-5);
            snprintf(name, sizeof name, "layer_norm.%s.f32", tag);
            check_last("layer_norm", name, 0);
            CHECK(y && mft_tensor_is_contiguous(y, fmt) && mft_tensor_format(y) == fmt);
            mft_tensor_release(y);
        }
        mft_tensor_release(x);
        /* F64 batch_norm: only the CONTIGUOUS reference; NHWC converts in and out */
        x = mft_randn(4, sz, MFT_F64, fmt, 12);
        y = mft_batch_norm(x, NULL, NULL, NULL, NULL, true, 0.1, 1e-5);
        check_last("batch_norm", "batch_norm.nchw.f64.ref", f ? 2 : 0);
        CHECK(y && mft_tensor_is_contiguous(y, fmt) && mft_tensor_format(y) == fmt);
        mft_tensor_release(y);
        if (f) {
            mft_dispatch_set_strict(true);
            int64_t lsz[2] = {sz[2], sz[3]};
            y = mft_layer_norm(x, 2, lsz, NULL, NULL, 1e-5);
            CHECK(y == NULL);
            CHECK_ERR(MFT_ERR_UNSUPPORTED, "mft_layer_norm");
            y = mft_batch_norm(x, NULL, NULL, NULL, NULL, true, 0.1, 1e-5);
            CHECK(y == NULL);
            CHECK_ERR(MFT_ERR_UNSUPPORTED, "mft_batch_norm");
            mft_dispatch_set_strict(false);
        }
        mft_tensor_release(x);
    }
    /* a non-dense NHWC-ordered view: result packed NHWC, one conversion in */
    int64_t big[4] = {2, 4, 6, 8};
    mft_tensor *b = mft_randn(4, big, MFT_F32, MFT_CHANNELS_LAST, 3);
    mft_tensor *v = mft_slice(b, 3, 0, 8, 2);
    CHECK(v && mft_tensor_format(v) == MFT_CHANNELS_LAST && !mft_tensor_is_dense(v));
    mft_tensor *r = mft_batch_norm(v, NULL, NULL, NULL, NULL, true, 0.1, 1e-5);
    check_last("batch_norm", "batch_norm.nhwc.f32", 1);
    CHECK(r && mft_tensor_is_contiguous(r, MFT_CHANNELS_LAST));
    mft_tensor_release(r);
    mft_tensor_release(v);
    mft_tensor_release(b);
    /* rank 2 and rank 1: contiguous */
    int64_t s2[2] = {5, 3};
    mft_tensor *x2 = mft_randn(2, s2, MFT_F32, MFT_CONTIGUOUS, 4);
    r = mft_batch_norm(x2, NULL, NULL, NULL, NULL, true, 0.1, 1e-5);
    check_last("batch_norm", "batch_norm.nchw.f32", 0);
    CHECK(r && mft_tensor_is_contiguous(r, MFT_CONTIGUOUS));
    mft_tensor_release(r);
    mft_tensor_release(x2);
    /* empty batch: empty result, running stats untouched */
    int64_t s0[4] = {0, 3, 2, 2}, c3 = 3;
    mft_tensor *x0 = mft_empty(4, s0, MFT_F32, MFT_CHANNELS_LAST);
    mft_tensor *rm = mft_zeros(1, &c3, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *rv = mft_ones(1, &c3, MFT_F32, MFT_CONTIGUOUS);
    r = mft_batch_norm(x0, rm, rv, NULL, NULL, true, 0.1, 1e-5);
    CHECK(r && mft_tensor_numel(r) == 0);
    CHECK(((float *)mft_tensor_data(rv))[0] == 1.0f && ((float *)mft_tensor_data(rm))[0] == 0.0f);
    mft_tensor_release(r);
    r = mft_group_norm(x0, 3, NULL, NULL, 1e-5);
    CHECK(r && mft_tensor_numel(r) == 0);
    mft_tensor_release(r);
    mft_tensor_release(x0);
    mft_tensor_release(rm);
    mft_tensor_release(rv);
}

/* ------------------------------------------------------------------ (d) threads */

static void test_threads_bit_identical(void) {
    int64_t shapes[3][4] = {{4, 8, 40, 40}, {2, 16, 64, 64}, {3, 5, 33, 17}};
    for (int s = 0; s < 3; s++)
        for (int f = 0; f < 2; f++) {
            mft_format fmt = f ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
            mft_tensor *x = mft_randn(4, shapes[s], MFT_F32, fmt, (uint64_t)(20 + s));
            mft_tensor *y[2] = {NULL, NULL}, *rm[2], *rv[2];
            int64_t C = shapes[s][1];
            for (int t = 0; t < 2; t++) {
                mft_set_num_threads(t + 1);
                rm[t] = mft_zeros(1, &C, MFT_F32, MFT_CONTIGUOUS);
                rv[t] = mft_ones(1, &C, MFT_F32, MFT_CONTIGUOUS);
                y[t] = mft_batch_norm(x, rm[t], rv[t], NULL, NULL, true, 0.1, 1e-5);
            }
            mft_set_num_threads(0);
            CHECK(y[0] && y[1]);
            if (y[0] && y[1]) {
                size_t n = (size_t)mft_tensor_numel(x) * sizeof(float);
                CHECK_MSG(memcmp(mft_tensor_data(y[0]), mft_tensor_data(y[1]), n) == 0,
                          "shape %d format %d: y differs between 1 and 2 threads", s, f);
                CHECK(memcmp(mft_tensor_data(rm[0]), mft_tensor_data(rm[1]), (size_t)C * 4) == 0);
                CHECK(memcmp(mft_tensor_data(rv[0]), mft_tensor_data(rv[1]), (size_t)C * 4) == 0);
            }
            for (int t = 0; t < 2; t++) {
                mft_tensor_release(y[t]);
                mft_tensor_release(rm[t]);
                mft_tensor_release(rv[t]);
            }
            /* group_norm (groups 1 and C) and layer_norm: one set per work item */
            for (int op = 0; op < 3; op++) {
                for (int t = 0; t < 2; t++) {
                    mft_set_num_threads(t + 1);
                    y[t] = op == 2   ? mft_layer_norm(x, 2, shapes[s] + 2, NULL, NULL, 1e-5)
                           : op == 1 ? mft_group_norm(x, C, NULL, NULL, 1e-5)
                                     : mft_group_norm(x, 1, NULL, NULL, 1e-5);
                }
                mft_set_num_threads(0);
                CHECK(y[0] && y[1]);
                if (y[0] && y[1])
                    CHECK_MSG(memcmp(mft_tensor_data(y[0]), mft_tensor_data(y[1]),
                                     (size_t)mft_tensor_numel(x) * sizeof(float)) == 0,
                              "shape %d format %d op %d: differs between 1 and 2 threads", s, f, op);
                mft_tensor_release(y[0]);
                mft_tensor_release(y[1]);
            }
            mft_tensor_release(x);
        }
}

/* ------------------------------------------------------------------ (e) errors */

static void test_errors(void) {
    int64_t sz[4] = {2, 4, 3, 3}, c4 = 4, c3 = 3, s1[1] = {7};
    mft_tensor *x = mft_randn(4, sz, MFT_F32, MFT_CONTIGUOUS, 1);
    mft_tensor *w3 = mft_ones(1, &c3, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *w4d = mft_ones(1, &c4, MFT_F64, MFT_CONTIGUOUS);
    mft_tensor *rm = mft_zeros(1, &c4, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *rv = mft_ones(1, &c4, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *x1 = mft_randn(1, s1, MFT_F32, MFT_CONTIGUOUS, 2);
    mft_tensor *xi = mft_zeros(4, sz, MFT_I32, MFT_CONTIGUOUS);
    int64_t v0 = mft_tensor_version(rm);

    CHECK(mft_batch_norm(NULL, rm, rv, NULL, NULL, true, 0.1, 1e-5) == NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_batch_norm");
    CHECK(mft_batch_norm(x1, NULL, NULL, NULL, NULL, true, 0.1, 1e-5) == NULL);
    CHECK_ERR(MFT_ERR_RANK, "rank >= 2, got rank 1");
    CHECK(mft_batch_norm(xi, NULL, NULL, NULL, NULL, true, 0.1, 1e-5) == NULL);
    CHECK_ERR(MFT_ERR_DTYPE, "i32");
    CHECK(mft_batch_norm(x, rm, rv, w3, NULL, true, 0.1, 1e-5) == NULL);
    CHECK_ERR(MFT_ERR_SHAPE, "mft_batch_norm: weight has shape [3], expected [4]");
    CHECK(mft_batch_norm(x, rm, rv, NULL, w3, true, 0.1, 1e-5) == NULL);
    CHECK_ERR(MFT_ERR_SHAPE, "bias has shape [3]");
    CHECK(mft_batch_norm(x, w3, rv, NULL, NULL, true, 0.1, 1e-5) == NULL);
    CHECK_ERR(MFT_ERR_SHAPE, "running_mean has shape [3], expected [4]");
    CHECK(mft_batch_norm(x, rm, w3, NULL, NULL, false, 0.1, 1e-5) == NULL);
    CHECK_ERR(MFT_ERR_SHAPE, "running_var has shape [3]");
    CHECK(mft_batch_norm(x, rm, rv, w4d, NULL, true, 0.1, 1e-5) == NULL);
    CHECK_ERR(MFT_ERR_DTYPE, "weight has dtype f64");
    CHECK(mft_batch_norm(x, NULL, rv, NULL, NULL, false, 0.1, 1e-5) == NULL);
    CHECK_ERR(MFT_ERR_NULL, "running_mean NULL");
    CHECK(mft_batch_norm(x, NULL, NULL, NULL, NULL, false, 0.1, 1e-5) == NULL);
    CHECK_ERR(MFT_ERR_NULL, "both NULL");
    CHECK(mft_batch_norm(x, rm, rv, NULL, NULL, true, 0.1, -1.0) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "eps");
    int64_t s11[4] = {1, 4, 1, 1};
    mft_tensor *x11 = mft_randn(4, s11, MFT_F32, MFT_CONTIGUOUS, 3);
    CHECK(mft_batch_norm(x11, rm, rv, NULL, NULL, true, 0.1, 1e-5) == NULL);
    CHECK_ERR(MFT_ERR_SHAPE, "more than 1 value per channel");
    mft_tensor *ok = mft_batch_norm(x11, rm, rv, NULL, NULL, false, 0.1, 1e-5); /* eval is fine */
    CHECK(ok != NULL);
    mft_tensor_release(ok);
    CHECK(mft_tensor_version(rm) == v0 && ((float *)mft_tensor_data(rm))[0] == 0.0f);
    /* an overlapping (stride-0) running stat cannot be updated */
    mft_tensor *one = mft_zeros(1, &c4, MFT_F32, MFT_CONTIGUOUS);
    int64_t st0 = 0;
    mft_tensor *bc = mft_as_strided(one, 1, &c4, &st0, 0);
    if (bc) {
        CHECK(mft_batch_norm(x, bc, rv, NULL, NULL, true, 0.1, 1e-5) == NULL);
        CHECK_ERR(MFT_ERR_OVERLAP, "mft_batch_norm");
    }
    mft_tensor_release(bc);
    mft_tensor_release(one);

    CHECK(mft_group_norm(x, 3, NULL, NULL, 1e-5) == NULL);
    CHECK_ERR(MFT_ERR_SHAPE, "mft_group_norm: groups = 3 must be >= 1 and divide C = 4");
    CHECK(mft_group_norm(x, 0, NULL, NULL, 1e-5) == NULL);
    CHECK_ERR(MFT_ERR_SHAPE, "groups = 0");
    CHECK(mft_group_norm(x, 2, w3, NULL, 1e-5) == NULL);
    CHECK_ERR(MFT_ERR_SHAPE, "mft_group_norm: weight has shape [3], expected [4]");
    int64_t s12[4] = {1, 2, 1, 1};
    mft_tensor *x12 = mft_randn(4, s12, MFT_F32, MFT_CONTIGUOUS, 5);
    CHECK(mft_group_norm(x12, 2, NULL, NULL, 1e-5) == NULL);
    CHECK_ERR(MFT_ERR_SHAPE, "mft_group_norm: expected more than 1 value per group");
    mft_tensor *g1 = mft_group_norm(x12, 1, NULL, NULL, 1e-5); /* 2 values: fine */
    CHECK(g1 != NULL);
    mft_tensor_release(g1);
    mft_tensor_release(x12);
    CHECK(mft_group_norm(x1, 1, NULL, NULL, 1e-5) == NULL);
    CHECK_ERR(MFT_ERR_RANK, "mft_group_norm");
    CHECK(mft_instance_norm(x11, NULL, NULL, 1e-5) == NULL);
    CHECK_ERR(MFT_ERR_SHAPE, "mft_instance_norm: expected more than 1 spatial element");
    CHECK(mft_instance_norm(x, NULL, w3, 1e-5) == NULL);
    CHECK_ERR(MFT_ERR_SHAPE, "mft_instance_norm: bias has shape [3]");

    int64_t ns[2] = {3, 4}, ns_ok[2] = {3, 3};
    CHECK(mft_layer_norm(x, 2, ns, NULL, NULL, 1e-5) == NULL);
    CHECK_ERR(MFT_ERR_SHAPE, "mft_layer_norm: normalized_shape [3,4] does not match the last 2 dims of x [2,4,3,3]");
    CHECK(mft_layer_norm(x, 0, ns, NULL, NULL, 1e-5) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "nnorm = 0");
    CHECK(mft_layer_norm(x, 5, ns, NULL, NULL, 1e-5) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "nnorm = 5");
    CHECK(mft_layer_norm(x, 2, NULL, NULL, NULL, 1e-5) == NULL);
    CHECK_ERR(MFT_ERR_NULL, "normalized_shape");
    CHECK(mft_layer_norm(x, 2, ns_ok, w3, NULL, 1e-5) == NULL);
    CHECK_ERR(MFT_ERR_SHAPE, "mft_layer_norm: weight has shape [3], expected [3,3]");
    CHECK(mft_layer_norm(NULL, 2, ns_ok, NULL, NULL, 1e-5) == NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_layer_norm");

    mft_tensor_release(x11);
    mft_tensor_release(x);
    mft_tensor_release(w3);
    mft_tensor_release(w4d);
    mft_tensor_release(rm);
    mft_tensor_release(rv);
    mft_tensor_release(x1);
    mft_tensor_release(xi);
}

/* ------------------------------------------------------------------ (f) golden */
/* tests/golden/norm_cases.txt (gen_norm.py, PyTorch 1.13); format there. */
#define GN_LINE (1 << 16)
#define GN_MAX 512

typedef struct {
    int line;
    char name[96];
    char op[32];
    mft_dtype dt;
    tu_list sizes, wshape, nshape;
    bool cl, training, has_w, has_b, has_rs, error, have_input, have_params;
    int64_t seed, groups, nnorm;
    double momentum, eps;
    int nval, nrm, nrv;
    double val[GN_MAX], rm[GN_MAX], rv[GN_MAX];
} gn_case;

static gn_case g_case;
static char g_line[GN_LINE];
static int g_cases_run, g_errors_run;

static bool gn_values(const char *p, int *n, double *out) {
    int64_t k;
    char tok[64];
    if (!tu_next_int(&p, &k) || k < 0 || k > GN_MAX) return false;
    for (int64_t i = 0; i < k; i++) {
        if (!tu_next_tok(&p, tok, sizeof tok)) return false;
        out[i] = strtod(tok, NULL);
    }
    *n = (int)k;
    return tu_at_eol(p);
}

static bool gn_field(const char *line) {
    const char *p = line;
    char key[32], tok[64];
    gn_case *c = &g_case;
    if (!tu_next_tok(&p, key, sizeof key)) return false;
    if (strcmp(key, "op") == 0) return tu_next_tok(&p, c->op, sizeof c->op);
    if (strcmp(key, "input") == 0) {
        if (!tu_next_tok(&p, tok, sizeof tok)) return false;
        c->dt = strcmp(tok, "f64") == 0 ? MFT_F64 : MFT_F32;
        if (!tu_next_list(&p, &c->sizes) || !tu_next_tok(&p, tok, sizeof tok)) return false;
        c->cl = strcmp(tok, "channels_last") == 0;
        c->have_input = tu_next_int(&p, &c->seed);
        return c->have_input;
    }
    if (strcmp(key, "params") == 0) {
        int64_t v[8];
        for (int i = 0; i < 8; i++) {
            if (i == 1 || i == 2) {
                if (!tu_next_tok(&p, tok, sizeof tok)) return false;
                (i == 1 ? &c->momentum : &c->eps)[0] = strtod(tok, NULL);
            } else if (!tu_next_int(&p, &v[i])) {
                return false;
            }
        }
        c->training = v[0] != 0;
        c->groups = v[3];
        c->nnorm = v[4];
        c->has_w = v[5] != 0;
        c->has_b = v[6] != 0;
        c->has_rs = v[7] != 0;
        c->have_params = true;
        return true;
    }
    if (strcmp(key, "wshape") == 0) return tu_next_list(&p, &c->wshape);
    if (strcmp(key, "nshape") == 0) return tu_next_list(&p, &c->nshape);
    if (strcmp(key, "result") == 0) {
        c->error = tu_next_tok(&p, tok, sizeof tok) && strcmp(tok, "error") == 0;
        return c->error;
    }
    if (strcmp(key, "values") == 0) return gn_values(p, &c->nval, c->val);
    if (strcmp(key, "rmean") == 0) return gn_values(p, &c->nrm, c->rm);
    if (strcmp(key, "rvar") == 0) return gn_values(p, &c->nrv, c->rv);
    return false;
}

typedef double (*gn_fill_fn)(int64_t i, int64_t seed);
static double gn_fx(int64_t i, int64_t seed) { return (double)((37 * i + 11 * seed) % 23 - 11) / 4.0; }
static double gn_fw(int64_t i, int64_t seed) { (void)seed; return 0.5 + (double)((5 * i + 1) % 7) / 4.0; }
static double gn_fb(int64_t i, int64_t seed) { (void)seed; return (double)((3 * i + 2) % 5 - 2) / 4.0; }
static double gn_frm(int64_t i, int64_t seed) { (void)seed; return (double)((3 * i) % 5 - 2) / 8.0; }
static double gn_frv(int64_t i, int64_t seed) { (void)seed; return 0.5 + (double)(i % 4) / 4.0; }

static mft_tensor *gn_make(int nd, const int64_t *sz, mft_dtype dt, gn_fill_fn f, int64_t seed) {
    mft_tensor *t = mft_empty(nd, sz, dt, MFT_CONTIGUOUS);
    if (!t) return NULL;
    int64_t n = mft_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        if (dt == MFT_F32) ((float *)mft_tensor_data(t))[i] = (float)f(i, seed);
        else ((double *)mft_tensor_data(t))[i] = f(i, seed);
    }
    return t;
}

static bool gn_match(const mft_tensor *t, int n, const double *want, double tol) {
    if (!t || mft_tensor_numel(t) != n) return false;
    double *got = malloc(sizeof(double) * (size_t)(n + 1));
    to_array(t, got);
    bool ok = true;
    for (int i = 0; i < n && ok; i++) ok = fabs(got[i] - want[i]) <= tol * (1 + fabs(want[i]));
    free(got);
    return ok;
}

static void gn_end(int lineno, bool in_case) {
    gn_case *c = &g_case;
    CHECK_MSG(in_case && c->have_input && c->have_params && c->op[0] && (c->error || c->nval > 0),
              "line %d: incomplete case %s", lineno, c->name);
    if (!in_case || !c->have_input || !c->have_params) return;
    int nd = c->sizes.n;
    mft_tensor *x0 = gn_make(nd, c->sizes.v, c->dt, gn_fx, c->seed);
    mft_tensor *x = c->cl && (nd == 4 || nd == 5) ? mft_contiguous(x0, MFT_CHANNELS_LAST) : x0;
    if (x != x0) mft_tensor_release(x0);
    mft_tensor *w = c->has_w ? gn_make(c->wshape.n, c->wshape.v, c->dt, gn_fw, 0) : NULL;
    mft_tensor *b = c->has_b ? gn_make(c->wshape.n, c->wshape.v, c->dt, gn_fb, 0) : NULL;
    mft_tensor *rm = c->has_rs ? gn_make(1, c->wshape.v, c->dt, gn_frm, 0) : NULL;
    mft_tensor *rv = c->has_rs ? gn_make(1, c->wshape.v, c->dt, gn_frv, 0) : NULL;
    mft_tensor *y;
    if (strcmp(c->op, "batch_norm") == 0)
        y = mft_batch_norm(x, rm, rv, w, b, c->training, c->momentum, c->eps);
    else if (strcmp(c->op, "group_norm") == 0)
        y = mft_group_norm(x, c->groups, w, b, c->eps);
    else if (strcmp(c->op, "instance_norm") == 0)
        y = mft_instance_norm(x, w, b, c->eps);
    else
        y = mft_layer_norm(x, (int)c->nnorm, c->nshape.v, w, b, c->eps);
    const double tol = c->dt == MFT_F32 ? 1e-5 : 1e-12;
    g_cases_run++;
    if (c->error) {
        g_errors_run++;
        CHECK_MSG(y == NULL, "case %s (line %d): PyTorch rejects it, mft returned a result",
                  c->name, c->line);
        CHECK_MSG(strncmp(mft_last_error_message(), "mft_", 4) == 0, "case %s: message '%s'",
                  c->name, mft_last_error_message());
        mft_clear_error();
    } else {
        CHECK_MSG(y != NULL, "case %s (line %d): %s", c->name, c->line, mft_last_error_message());
        CHECK_MSG(gn_match(y, c->nval, c->val, tol), "case %s (line %d): values differ", c->name,
                  c->line);
        mft_format want = nd >= 3 && nd <= 5 ? mft_tensor_format(x) : MFT_CONTIGUOUS;
        CHECK_MSG(y && mft_tensor_is_contiguous(y, want), "case %s: not packed in %s", c->name,
                  mft_format_name(want));
        if (c->has_rs) {
            CHECK_MSG(gn_match(rm, c->nrm, c->rm, tol), "case %s: running_mean differs", c->name);
            CHECK_MSG(gn_match(rv, c->nrv, c->rv, tol), "case %s: running_var differs", c->name);
        }
    }
    mft_tensor_release(y);
    mft_tensor_release(x);
    mft_tensor_release(w);
    mft_tensor_release(b);
    mft_tensor_release(rm);
    mft_tensor_release(rv);
}

static void test_golden(void) {
    tu_golden_file g = {MFT_TEST_DATA_DIR "/norm_cases.txt", g_line, GN_LINE, true, &g_case,
                        sizeof g_case, &g_case.line, g_case.name, sizeof g_case.name, gn_field,
                        gn_end};
    if (!tu_read_golden(&g)) return;
    CHECK_EQ_I(g_cases_run, 256);
    CHECK_EQ_I(g_errors_run, 16);
}

/* The reference kernels are exported for tests; sanity: all six exist. */
mft_kernel_fn mft__norm_reference(int op, mft_dtype dt);
static void test_reference_exported(void) {
    for (int op = 0; op < 3; op++) {
        CHECK(mft__norm_reference(op, MFT_F32) != NULL);
        CHECK(mft__norm_reference(op, MFT_F64) != NULL);
        CHECK(mft__norm_reference(op, MFT_I32) == NULL);
    }
}

int main(void) {
    RUN(test_batch_norm_by_hand);
    RUN(test_random_values);
    RUN(test_dispatch_and_layout);
    RUN(test_threads_bit_identical);
    RUN(test_errors);
    RUN(test_reference_exported);
    RUN(test_golden);
    TEST_MAIN_END();
}
