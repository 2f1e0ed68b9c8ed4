/* tests/ops/test_gemm.c — mft_matmul and mft_linear (ops/linalg/):
 *   (a) small hand-checked cases (2-D, dot, 1-D promotion, batched shapes);
 *   (b) the fast kernels (AVX2 and portable, F32 and F64) against the reference
 *       kernel (registered as a user kernel, so both run through the same
 *       op plumbing) over random sizes and random strided/transposed/offset
 *       inputs, batched broadcasting and 1-D cases;
 *   (c) linear on rank 1, 2 and 4 x with and without bias;
 *   (d) dispatch reporting, bit-identical results for 1 and 2 threads,
 *       empty sizes, errors; zero live tensors at the end (harness);
 *   (e) golden values from PyTorch 1.13 (tests/golden/gemm_cases.txt, written
 *       by tests/golden/gen_gemm.py). */
#include <math.h>
#include <string.h>
#include "ops_internal.h"
#include "test_util.h"

/* ops/linalg/: test hooks. */
mft_kernel_fn mft__gemm_reference(mft_dtype dt);
void mft__gemm_set_portable(bool on);

/* ------------------------------------------------------------------ helpers */
static double elem_at(const mft_tensor *t, const int64_t *idx) {
    int64_t off = 0;
    for (int d = 0; d < t->ndim; d++) off += idx[d] * t->strides[d];
    return mft__load(t->dtype, mft__tensor_ptr(t) + (size_t)off * mft__elem_size(t->dtype));
}

/* Fills every element of a (possibly strided) tensor with uniform [-1, 1). */
/* A random tensor of sizes: packed, or (layout 1) a random strided view
 * (random dim order = transposes, steps, offsets). */
static mft_tensor *rand_tensor(int nd, const int64_t *sizes, mft_dtype dt, int layout,
                               uint64_t *rng) {
    static const tu_layout_opts lo = {2, 2, false};
    mft_tensor *t = layout ? tu_strided_view(nd, sizes, dt, 0.0, &lo, rng, NULL)
                           : mft_empty(nd, sizes, dt, MFT_CONTIGUOUS);
    if (t) tu_fill_grid(t, rng);
    return t;
}

static int g_user_ref = 0;

/* mft_matmul through the reference kernel (registered as a user kernel). */
static mft_tensor *matmul_ref(const mft_tensor *a, const mft_tensor *b) {
    mft_dtype dt = a->dtype;
    if (mft_dispatch_register("matmul", MFT_CONTIGUOUS, dt, "matmul.ref", mft__gemm_reference(dt)) !=
        MFT_OK)
        return NULL;
    mft_tensor *r = mft_matmul(a, b);
    const mft_dispatch_info *d = mft_dispatch_last();
    if (d->user && strcmp(d->kernel, "matmul.ref") == 0) g_user_ref++;
    mft_dispatch_unregister("matmul", MFT_CONTIGUOUS, dt);
    return r;
}

/* Compares got with want elementwise; tol scaled by K. Returns mismatches. */
static int compare(const mft_tensor *got, const mft_tensor *want, int64_t K, const char *what) {
    if (!got || !want) {
        CHECK_MSG(false, "%s: NULL result (%s)", what, mft_last_error_message());
        return 1;
    }
    CHECK_MSG(got->ndim == want->ndim && tu_has_sizes(got, want->ndim, want->sizes),
              "%s: sizes differ", what);
    if (got->ndim != want->ndim) return 1;
    const double eps = got->dtype == MFT_F32 ? 2e-6 : 1e-14;
    int64_t idx[MFT_MAX_DIMS] = {0};
    int bad = 0;
    if (got->numel == 0) return 0;
    do {
        double g = elem_at(got, idx), w = elem_at(want, idx);
        if (!(fabs(g - w) <= eps * (double)(K + 4) * (1.0 + fabs(w)))) {
            if (bad < 3)
                fprintf(stderr, "%s: element %lld: got %.9g want %.9g\n", what,
                        (long long)(idx[0]), g, w);
            bad++;
        }
    } while (tu_next_index(got->ndim, got->sizes, idx));
    CHECK_MSG(bad == 0, "%s: %d mismatching elements", what, bad);
    return bad;
}

/* matmul(a, b) fast vs reference. */
static void check_case(const mft_tensor *a, const mft_tensor *b, const char *what) {
    mft_tensor *f = mft_matmul(a, b);
    CHECK_MSG(f != NULL, "%s: %s", what, mft_last_error_message());
    if (f) {
        const mft_dispatch_info *d = mft_dispatch_last();
        CHECK(strcmp(d->op, "matmul") == 0 && !d->user);
        /* packed operands (B possibly a transposed packed matrix) are never copied */
        mft_tensor *bt = b->ndim == 2 ? mft_transpose(b, 0, 1) : NULL;
        bool packed = a->ndim <= 2 && b->ndim <= 2 && mft_tensor_is_contiguous(a, MFT_CONTIGUOUS) &&
                      (mft_tensor_is_contiguous(b, MFT_CONTIGUOUS) ||
                       mft_tensor_is_contiguous(bt, MFT_CONTIGUOUS));
        if (packed) CHECK_MSG(d->conversions == 0, "%s: %d conversions", what, d->conversions);
        mft_tensor_release(bt);
        CHECK(mft_tensor_is_contiguous(f, MFT_CONTIGUOUS));
    }
    mft_tensor *r = matmul_ref(a, b);
    compare(f, r, a->sizes[a->ndim - 1], what);
    mft_tensor_release(f);
    mft_tensor_release(r);
}

/* ------------------------------------------------------------------ (a) small cases */
static void test_small_known(void) {
    const int64_t as[2] = {2, 3}, bs[2] = {3, 2};
    mft_tensor *a = tu_iota(2, as, MFT_F32, 1); /* [[1,2,3],[4,5,6]] */
    mft_tensor *b = tu_iota(2, bs, MFT_F32, 1); /* [[1,2],[3,4],[5,6]] */
    mft_tensor *c = mft_matmul(a, b);
    const int64_t cs[2] = {2, 2};
    CHECK(tu_has_sizes(c, 2, cs));
    if (c) {
        const float *p = mft_tensor_data(c);
        CHECK(p[0] == 22 && p[1] == 28 && p[2] == 49 && p[3] == 64);
        CHECK(mft_tensor_is_contiguous(c, MFT_CONTIGUOUS));
    }
    /* dot: 0-dim */
    const int64_t v3[1] = {3};
    mft_tensor *v = tu_iota(1, v3, MFT_F32, 1);
    mft_tensor *dot = mft_matmul(v, v);
    CHECK(dot && dot->ndim == 0 && dot->numel == 1);
    if (dot) CHECK(((const float *)mft_tensor_data(dot))[0] == 14);
    /* 1-D @ 2-D: (3) @ (3,2) -> (2) = [22, 28] */
    mft_tensor *vb = mft_matmul(v, b);
    const int64_t s2[1] = {2};
    CHECK(tu_has_sizes(vb, 1, s2));
    if (vb) CHECK(((const float *)mft_tensor_data(vb))[0] == 22 && ((const float *)mft_tensor_data(vb))[1] == 28);
    /* 2-D @ 1-D: (2,3) @ (3) -> (2) = [14, 32] */
    mft_tensor *av = mft_matmul(a, v);
    CHECK(tu_has_sizes(av, 1, s2));
    if (av) CHECK(((const float *)mft_tensor_data(av))[0] == 14 && ((const float *)mft_tensor_data(av))[1] == 32);
    /* w^T as a view: b^T (2,3) @ a^T (3,2) = (a b)^T */
    mft_tensor *at = mft_transpose(a, 0, 1), *bt = mft_transpose(b, 0, 1);
    mft_tensor *ct = mft_matmul(bt, at);
    CHECK(tu_has_sizes(ct, 2, cs));
    if (ct) {
        const float *p = mft_tensor_data(ct);
        CHECK(p[0] == 22 && p[1] == 49 && p[2] == 28 && p[3] == 64);
        CHECK(mft_dispatch_last()->conversions == 0); /* bt as A and at as B: read transposed */
    }
    mft_tensor *ts[] = {a, b, c, v, dot, vb, av, at, bt, ct};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) mft_tensor_release(ts[i]);
}

static void test_batched_shapes(void) {
    struct {
        int na, nb;
        int64_t a[4], b[4];
        int nc;
        int64_t c[4];
    } cs[] = {
        {4, 3, {2, 1, 5, 7}, {3, 7, 4}, 4, {2, 3, 5, 4}},
        {2, 3, {5, 7}, {4, 7, 3}, 3, {4, 5, 3}},
        {1, 3, {7}, {4, 7, 3}, 2, {4, 3}},
        {3, 1, {4, 5, 7}, {7}, 2, {4, 5}},
        {3, 2, {1, 5, 7}, {7, 2}, 3, {1, 5, 2}},
        {4, 4, {2, 3, 1, 7}, {1, 3, 7, 1}, 4, {2, 3, 1, 1}},
        {3, 3, {0, 2, 3}, {1, 3, 4}, 3, {0, 2, 4}},
    };
    uint64_t rng = 11;
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        for (int dti = 0; dti < 2; dti++) {
            mft_dtype dt = dti ? MFT_F64 : MFT_F32;
            mft_tensor *a = rand_tensor(cs[i].na, cs[i].a, dt, (int)(i % 2), &rng);
            mft_tensor *b = rand_tensor(cs[i].nb, cs[i].b, dt, (int)((i / 2) % 2), &rng);
            mft_tensor *c = mft_matmul(a, b);
            CHECK_MSG(tu_has_sizes(c, cs[i].nc, cs[i].c), "batched case %zu: %s", i,
                      mft_last_error_message());
            char what[64];
            snprintf(what, sizeof what, "batched case %zu %s", i, mft_dtype_name(dt));
            check_case(a, b, what);
            /* batch element 0 equals the 2-D product of the slices */
            mft_tensor_release(a);
            mft_tensor_release(b);
            mft_tensor_release(c);
        }
    /* a batched result equals per-matrix 2-D products (expanded a) */
    const int64_t as[3] = {3, 5, 7}, bs[2] = {7, 4};
    mft_tensor *a = rand_tensor(3, as, MFT_F32, 1, &rng), *b = rand_tensor(2, bs, MFT_F32, 0, &rng);
    mft_tensor *c = mft_matmul(a, b);
    for (int64_t k = 0; k < 3 && c; k++) {
        mft_tensor *ak = mft_select(a, 0, k), *ck = mft_select(c, 0, k);
        mft_tensor *pk = mft_matmul(ak, b);
        compare(ck, pk, 7, "batched slice");
        mft_tensor_release(ak);
        mft_tensor_release(ck);
        mft_tensor_release(pk);
    }
    mft_tensor_release(a);
    mft_tensor_release(b);
    mft_tensor_release(c);
}

/* ------------------------------------------------------------------ (b) random */
static void run_random(mft_dtype dt, bool portable, int ncases, uint64_t seed) {
    uint64_t rng = seed;
    static const int64_t edge[] = {1, 2, 5, 6, 7, 8, 15, 16, 17, 23, 24, 31, 32, 33, 47, 48, 49, 64, 65};
    mft__gemm_set_portable(portable);
    for (int c = 0; c < ncases; c++) {
        int64_t M, N, K;
        if (c % 3 == 0) {
            const int ne = (int)(sizeof edge / sizeof edge[0]);
            M = edge[tu_rng_int(&rng, 0, ne - 1)];
            N = edge[tu_rng_int(&rng, 0, ne - 1)];
            K = edge[tu_rng_int(&rng, 0, ne - 1)];
        } else {
            M = tu_rng_int(&rng, 1, 70);
            N = tu_rng_int(&rng, 1, 70);
            K = tu_rng_int(&rng, 1, 70);
        }
        const int la = (int)tu_rng_int(&rng, 0, 1), lb = (int)tu_rng_int(&rng, 0, 1);
        const int64_t as[2] = {M, K}, bs[2] = {K, N};
        mft_tensor *a = rand_tensor(2, as, dt, la, &rng), *b = rand_tensor(2, bs, dt, lb, &rng);
        char what[96];
        snprintf(what, sizeof what, "%s%s M=%lld N=%lld K=%lld layouts %d%d", mft_dtype_name(dt),
                 portable ? " portable" : "", (long long)M, (long long)N, (long long)K, la, lb);
        check_case(a, b, what);
        mft_tensor_release(a);
        mft_tensor_release(b);
    }
    /* a few larger ones: multiple K blocks, N blocks and parallel blocks */
    static const int64_t big[][3] = {{300, 290, 310}, {129, 300, 513}, {7, 333, 600}, {301, 5, 260}};
    for (size_t c = 0; c < sizeof big / sizeof big[0]; c++) {
        const int64_t as[2] = {big[c][0], big[c][2]}, bs[2] = {big[c][2], big[c][1]};
        mft_tensor *a = rand_tensor(2, as, dt, (int)(c % 2), &rng);
        mft_tensor *b = rand_tensor(2, bs, dt, (int)((c + 1) % 2), &rng);
        char what[96];
        snprintf(what, sizeof what, "%s%s big %lldx%lldx%lld", mft_dtype_name(dt),
                 portable ? " portable" : "", (long long)big[c][0], (long long)big[c][1],
                 (long long)big[c][2]);
        check_case(a, b, what);
        mft_tensor_release(a);
        mft_tensor_release(b);
    }
    mft__gemm_set_portable(false);
}

/* The training shapes of linear (forward with the transposed packed weight,
 * both backward products) at reduced depth: several KC blocks with a depth
 * tail that is not a multiple of 8 (the transposing packers), a partial NR
 * strip, a 4-row MR edge, many NC panels; and a narrow N that makes the
 * 2-thread partition split rows. Fast vs reference, AVX2 and portable. */
static void run_training_shapes(mft_dtype dt, bool portable) {
    uint64_t rng = 77;
    static const int64_t sh[][3] = {/* M, N, K */ {64, 120, 1037}, {64, 1100, 128},
                                    {128, 520, 64}, {300, 10, 70}, {61, 33, 517}};
    mft__gemm_set_portable(portable);
    for (size_t c = 0; c < sizeof sh / sizeof sh[0]; c++) {
        const int64_t M = sh[c][0], N = sh[c][1], K = sh[c][2];
        for (int form = 0; form < 3; form++) {
            /* 0: A @ B packed; 1: A @ W^T (W packed (N, K)); 2: (A^T packed (K, M))^T @ B */
            const int64_t as[2] = {M, K}, ats[2] = {K, M}, bs[2] = {K, N}, ws[2] = {N, K};
            mft_tensor *a0 = rand_tensor(2, form == 2 ? ats : as, dt, 0, &rng);
            mft_tensor *b0 = rand_tensor(2, form == 1 ? ws : bs, dt, 0, &rng);
            mft_tensor *a = form == 2 ? mft_transpose(a0, 0, 1) : mft_tensor_retain(a0);
            mft_tensor *b = form == 1 ? mft_transpose(b0, 0, 1) : mft_tensor_retain(b0);
            char what[96];
            snprintf(what, sizeof what, "%s%s training M=%lld N=%lld K=%lld form %d",
                     mft_dtype_name(dt), portable ? " portable" : "", (long long)M, (long long)N,
                     (long long)K, form);
            CHECK_MSG(a && b, "%s: setup failed", what);
            if (a && b) check_case(a, b, what);
            mft_tensor *ts[] = {a0, b0, a, b};
            for (int i = 0; i < 4; i++) mft_tensor_release(ts[i]);
        }
    }
    mft__gemm_set_portable(false);
}
static void test_training_shapes(void) {
    run_training_shapes(MFT_F32, false);
    run_training_shapes(MFT_F32, true);
    run_training_shapes(MFT_F64, false);
}

static void test_random_f32(void) { run_random(MFT_F32, false, 120, 1); }
static void test_random_f32_portable(void) { run_random(MFT_F32, true, 60, 2); }
static void test_random_f64(void) { run_random(MFT_F64, false, 80, 3); }
static void test_random_f64_portable(void) { run_random(MFT_F64, true, 40, 4); }

static void test_one_dim_random(void) {
    uint64_t rng = 5;
    for (int c = 0; c < 20; c++) {
        const int64_t K = tu_rng_int(&rng, 1, 300), N = tu_rng_int(&rng, 1, 40);
        const int64_t vs[1] = {K}, ms[2] = {K, N}, mt[2] = {N, K};
        mft_dtype dt = c % 2 ? MFT_F64 : MFT_F32;
        mft_tensor *v = rand_tensor(1, vs, dt, c % 3 == 0, &rng), *w = rand_tensor(1, vs, dt, 1, &rng);
        mft_tensor *m = rand_tensor(2, ms, dt, c % 2, &rng), *n = rand_tensor(2, mt, dt, 1, &rng);
        check_case(v, w, "dot");
        check_case(v, m, "vec @ mat");
        check_case(n, v, "mat @ vec");
        mft_tensor *ts[] = {v, w, m, n};
        for (int i = 0; i < 4; i++) mft_tensor_release(ts[i]);
    }
    CHECK(g_user_ref > 0);
}

/* ------------------------------------------------------------------ (c) linear */
static void check_linear(const mft_tensor *x, const mft_tensor *w, const mft_tensor *b,
                         const char *what) {
    mft_tensor *y = mft_linear(x, w, b);
    CHECK_MSG(y != NULL, "%s: %s", what, mft_last_error_message());
    if (y) CHECK(strcmp(mft_dispatch_last()->op, "matmul") == 0);
    mft_tensor *wt = mft_transpose(w, 0, 1);
    mft_tensor *r0 = matmul_ref(x, wt);
    mft_tensor *r = b ? mft_add(r0, b) : mft_tensor_retain(r0);
    compare(y, r, x->sizes[x->ndim - 1], what);
    if (y) {
        CHECK(y->ndim == x->ndim && y->sizes[y->ndim - 1] == w->sizes[0]);
        CHECK(mft_tensor_is_contiguous(y, MFT_CONTIGUOUS));
    }
    mft_tensor *ts[] = {y, wt, r0, r};
    for (int i = 0; i < 4; i++) mft_tensor_release(ts[i]);
}

static void test_linear(void) {
    uint64_t rng = 7;
    for (int dti = 0; dti < 2; dti++) {
        mft_dtype dt = dti ? MFT_F64 : MFT_F32;
        const int64_t xs2[2] = {13, 37}, ws[2] = {21, 37}, bs[1] = {21};
        const int64_t xs4[4] = {2, 3, 4, 37}, xs1[1] = {37};
        mft_tensor *w = rand_tensor(2, ws, dt, 0, &rng), *ws_ = rand_tensor(2, ws, dt, 1, &rng);
        mft_tensor *b = rand_tensor(1, bs, dt, 1, &rng);
        mft_tensor *x2 = rand_tensor(2, xs2, dt, 0, &rng), *x2s = rand_tensor(2, xs2, dt, 1, &rng);
        mft_tensor *x4 = rand_tensor(4, xs4, dt, 1, &rng), *x1 = rand_tensor(1, xs1, dt, 0, &rng);
        mft_tensor *x4c = mft_contiguous(x4, MFT_CHANNELS_LAST);
        check_linear(x2, w, b, "linear rank 2 bias");
        check_linear(x2, w, NULL, "linear rank 2 no bias");
        check_linear(x2s, ws_, b, "linear rank 2 strided");
        check_linear(x4, w, b, "linear rank 4 strided bias");
        check_linear(x4c, ws_, NULL, "linear rank 4 channels_last no bias");
        check_linear(x4c, w, b, "linear rank 4 channels_last bias");
        check_linear(x1, w, b, "linear rank 1");
        mft_tensor *ts[] = {w, ws_, b, x2, x2s, x4, x1, x4c};
        for (int i = 0; i < 8; i++) mft_tensor_release(ts[i]);
    }
    /* exact small case: x [[1,2]], w [[1,0],[0,1],[1,1]], b [10,20,30] -> [11,22,33] */
    const int64_t xs[2] = {1, 2}, wsz[2] = {3, 2}, bsz[1] = {3};
    mft_tensor *x = tu_iota(2, xs, MFT_F32, 1), *w = mft_zeros(2, wsz, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *b = mft_full(1, bsz, MFT_F32, MFT_CONTIGUOUS, 10);
    float *wp = mft_tensor_data(w), *bp = mft_tensor_data(b);
    wp[0] = 1, wp[3] = 1, wp[4] = 1, wp[5] = 1;
    bp[1] = 20, bp[2] = 30;
    mft_tensor *y = mft_linear(x, w, b);
    if (y) {
        const float *p = mft_tensor_data(y);
        CHECK(p[0] == 11 && p[1] == 22 && p[2] == 33);
    } else CHECK(false);
    mft_tensor_release(x);
    mft_tensor_release(w);
    mft_tensor_release(b);
    mft_tensor_release(y);
}

/* ------------------------------------------------------------------ (d) dispatch, threads */
static void test_dispatch_report(void) {
    const int64_t as[2] = {8, 9}, bs[2] = {9, 10};
    uint64_t rng = 9;
    for (int dti = 0; dti < 2; dti++) {
        mft_dtype dt = dti ? MFT_F64 : MFT_F32;
        mft_tensor *a = rand_tensor(2, as, dt, 1, &rng), *b = rand_tensor(2, bs, dt, 1, &rng);
        mft_dispatch_set_strict(true);
        mft_tensor *c = mft_matmul(a, b);
        mft_dispatch_set_strict(false);
        CHECK(c != NULL);
        const mft_dispatch_info *d = mft_dispatch_last();
        CHECK(strcmp(d->op, "matmul") == 0);
        CHECK(strstr(d->kernel, dt == MFT_F32 ? "matmul.f32" : "matmul.f64") != NULL);
        CHECK(d->format == MFT_CONTIGUOUS && d->kernel_format == MFT_CONTIGUOUS);
        CHECK(d->conversions == 2 && !d->user && d->dtype == dt); /* strided views: copied */
        mft_tensor_release(a);
        mft_tensor_release(b);
        mft_tensor_release(c);
    }
    static char buf[1 << 16]; /* the whole table (every family's kernels) */
    mft_dispatch_list(buf, sizeof buf);
    CHECK(strstr(buf, "matmul") != NULL);
}

/* Which operands are copied: none for packed A and packed or transposed-packed
 * B, a folded batched A, linear's weight; one for a transposed A or a slice. */
static void test_conversions(void) {
    uint64_t rng = 21;
    const int64_t x3[3] = {4, 5, 6}, x4[4] = {2, 3, 4, 6}, w2[2] = {7, 6}, k2[2] = {6, 7};
    mft_tensor *x = rand_tensor(3, x3, MFT_F32, 0, &rng), *xx = rand_tensor(4, x4, MFT_F32, 0, &rng);
    mft_tensor *w = rand_tensor(2, w2, MFT_F32, 0, &rng), *k = rand_tensor(2, k2, MFT_F32, 0, &rng);
    mft_tensor *wt = mft_transpose(w, 0, 1), *kt = mft_transpose(k, 0, 1);
    mft_tensor *xcl = mft_contiguous(xx, MFT_CHANNELS_LAST);
    mft_tensor *r;
    r = mft_matmul(x, wt); /* fold + transposed B */
    CHECK(r && mft_dispatch_last()->conversions == 0);
    mft_tensor_release(r);
    r = mft_matmul(x, k);
    CHECK(r && mft_dispatch_last()->conversions == 0);
    mft_tensor_release(r);
    r = mft_linear(xx, w, NULL);
    CHECK(r && mft_dispatch_last()->conversions == 0);
    mft_tensor_release(r);
    r = mft_linear(xx, kt, NULL); /* weight given as a transposed view: passed packed */
    CHECK(r && mft_dispatch_last()->conversions == 0);
    mft_tensor *r2 = matmul_ref(xx, k);
    compare(r, r2, 6, "linear with a transposed weight view");
    mft_tensor_release(r2);
    mft_tensor_release(r);
    r = mft_matmul(kt, k); /* transposed A: passed packed with transpose_a, no copy */
    CHECK(r && mft_dispatch_last()->conversions == 0);
    if (r) {
        mft_tensor *r3 = matmul_ref(kt, k);
        compare(r, r3, 6, "matmul with a transposed A view");
        mft_tensor_release(r3);
    }
    mft_tensor_release(r);
    r = mft_linear(xcl, w, NULL); /* channels_last x: flattened by reshape (a copy), then packed */
    CHECK(r && mft_dispatch_last()->conversions == 0);
    mft_tensor_release(r);
    mft_tensor *ts[] = {x, xx, w, k, wt, kt, xcl};
    for (int i = 0; i < 7; i++) mft_tensor_release(ts[i]);
}

static bool same_bits(const mft_tensor *x, const mft_tensor *y) {
    return x && y && x->numel == y->numel &&
           memcmp(mft_tensor_data(x), mft_tensor_data(y), (size_t)x->numel * mft__elem_size(x->dtype)) == 0;
}

static void test_threads_bit_identical(void) {
    static const int64_t cases[][4] = {/* batch, M, N, K */
                                       {1, 300, 200, 333}, {1, 64, 128, 700}, {1, 13, 300, 90},
                                       {3, 40, 50, 60}, {1, 7, 17, 1000},
                                       /* linear training shapes (smaller K), a row split */
                                       {1, 64, 120, 1037}, {1, 64, 1100, 128}, {1, 300, 10, 70}};
    uint64_t rng = 13;
    for (int port = 0; port < 2; port++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
            for (int dti = 0; dti < 2; dti++) {
                mft_dtype dt = dti ? MFT_F64 : MFT_F32;
                const int64_t as[3] = {cases[c][0], cases[c][1], cases[c][3]};
                const int64_t ws[2] = {cases[c][2], cases[c][3]};
                mft_tensor *a = rand_tensor(3, as, dt, (int)(c % 2), &rng);
                mft_tensor *w = rand_tensor(2, ws, dt, 0, &rng);
                mft_tensor *wt = mft_transpose(w, 0, 1);
                mft__gemm_set_portable(port != 0);
                mft_set_num_threads(1);
                mft_tensor *c1 = mft_matmul(a, wt), *l1 = mft_linear(a, w, NULL);
                mft_set_num_threads(2);
                mft_tensor *c2 = mft_matmul(a, wt), *l2 = mft_linear(a, w, NULL);
                mft_set_num_threads(0);
                mft__gemm_set_portable(false);
                CHECK_MSG(same_bits(c1, c2), "matmul case %zu %s port %d differs between 1 and 2 "
                          "threads", c, mft_dtype_name(dt), port);
                CHECK_MSG(same_bits(l1, l2), "linear case %zu %s differs between 1 and 2 threads",
                          c, mft_dtype_name(dt));
                CHECK_MSG(same_bits(c1, l1), "linear case %zu %s differs from matmul with w^T", c,
                          mft_dtype_name(dt));
                mft_tensor *ts[] = {a, w, wt, c1, c2, l1, l2};
                for (int i = 0; i < 7; i++) mft_tensor_release(ts[i]);
            }
}

static void test_empty(void) {
    const int64_t as[2] = {3, 0}, bs[2] = {0, 4}, a0[2] = {0, 5}, b0[2] = {5, 4};
    mft_tensor *a = mft_empty(2, as, MFT_F32, MFT_CONTIGUOUS), *b = mft_empty(2, bs, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *c = mft_matmul(a, b);
    const int64_t cs[2] = {3, 4};
    CHECK(tu_has_sizes(c, 2, cs));
    if (c)
        for (int i = 0; i < 12; i++) CHECK(((const float *)mft_tensor_data(c))[i] == 0);
    mft_tensor *e = mft_empty(2, a0, MFT_F64, MFT_CONTIGUOUS), *f = mft_ones(2, b0, MFT_F64, MFT_CONTIGUOUS);
    mft_tensor *g = mft_matmul(e, f);
    const int64_t gs[2] = {0, 4};
    CHECK(tu_has_sizes(g, 2, gs));
    mft_tensor *ts[] = {a, b, c, e, f, g};
    for (int i = 0; i < 6; i++) mft_tensor_release(ts[i]);
}

static void test_errors(void) {
    const int64_t s23[2] = {2, 3}, s43[2] = {4, 3}, s3[1] = {3}, s4[1] = {4};
    const int64_t b1[3] = {2, 3, 3}, b2[3] = {3, 3, 3};
    mft_tensor *a = mft_ones(2, s23, MFT_F32, MFT_CONTIGUOUS), *b = mft_ones(2, s43, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *a64 = mft_ones(2, s23, MFT_F64, MFT_CONTIGUOUS), *ai = mft_ones(2, s23, MFT_I32, MFT_CONTIGUOUS);
    mft_tensor *v3 = mft_ones(1, s3, MFT_F32, MFT_CONTIGUOUS), *v4 = mft_ones(1, s4, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *s = mft_ones(0, NULL, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *x1 = mft_ones(3, b1, MFT_F32, MFT_CONTIGUOUS), *x2 = mft_ones(3, b2, MFT_F32, MFT_CONTIGUOUS);
    int64_t live = mft_live_tensors();
    CHECK(mft_matmul(NULL, b) == NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_matmul");
    CHECK(mft_matmul(a, NULL) == NULL);
    CHECK_ERR(MFT_ERR_NULL, "'b'");
    CHECK(mft_matmul(s, a) == NULL);
    CHECK_ERR(MFT_ERR_RANK, "0-D and 2-D");
    CHECK(mft_matmul(a, b) == NULL);
    CHECK_ERR(MFT_ERR_SHAPE, "[2,3]");
    CHECK(mft_matmul(a, b) == NULL);
    CHECK_ERR(MFT_ERR_SHAPE, "[4,3]");
    CHECK(mft_matmul(v3, v4) == NULL);
    CHECK_ERR(MFT_ERR_SHAPE, "3 columns, b has 4 rows");
    CHECK(mft_matmul(a, a64) == NULL);
    CHECK_ERR(MFT_ERR_DTYPE, "f32 and f64");
    CHECK(mft_matmul(ai, ai) == NULL);
    CHECK_ERR(MFT_ERR_DTYPE, "i32");
    CHECK(mft_matmul(x1, x2) == NULL);
    CHECK_ERR(MFT_ERR_SHAPE, "mft_matmul");
    CHECK(mft_linear(NULL, b, NULL) == NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_linear");
    CHECK(mft_linear(a, v3, NULL) == NULL);
    CHECK_ERR(MFT_ERR_RANK, "ranks 2 and 1");
    CHECK(mft_linear(a, a64, NULL) == NULL);
    CHECK_ERR(MFT_ERR_DTYPE, "mft_linear");
    CHECK(mft_linear(v4, a, NULL) == NULL);
    CHECK_ERR(MFT_ERR_SHAPE, "4 features");
    CHECK(mft_linear(v3, a, v3) == NULL);
    CHECK_ERR(MFT_ERR_SHAPE, "bias of sizes [3]");
    CHECK(mft_linear(v3, a, a64) == NULL);
    CHECK_ERR(MFT_ERR_DTYPE, "'b'");
    CHECK_EQ_I(mft_live_tensors(), live);
    mft_tensor *ts[] = {a, b, a64, ai, v3, v4, s, x1, x2};
    for (int i = 0; i < 9; i++) mft_tensor_release(ts[i]);
}

/* ------------------------------------------------------------------ (e) golden (PyTorch 1.13) */
#define GG_LINE 4096
#define GG_MAX_VALUES 64
typedef struct {
    int line;
    char name[64];
    int ninputs;
    struct {
        mft_dtype dt;
        tu_list sizes, strides;
        int64_t offset, numel, seed;
    } in[3];
    char op[32];
    bool has_result, error, has_values, has_checksum;
    int64_t ndim;
    tu_list sizes;
    int64_t nvalues;
    double values[GG_MAX_VALUES], checksum;
} gg_case;

static gg_case g_gcase;
static char g_gline[GG_LINE];
static int g_gcases, g_gerrors;

static bool gg_dtype(const char *tok, mft_dtype *dt) {
    if (strcmp(tok, "f32") == 0) *dt = MFT_F32;
    else if (strcmp(tok, "f64") == 0) *dt = MFT_F64;
    else return false;
    return true;
}

static bool gg_field(const char *line) {
    const char *p = line;
    char key[32], tok[64];
    gg_case *c = &g_gcase;
    if (!tu_next_tok(&p, key, sizeof key)) return false;
    if (strcmp(key, "input") == 0) {
        if (c->ninputs >= 3) return false;
        int k = c->ninputs++;
        return tu_next_tok(&p, tok, sizeof tok) && gg_dtype(tok, &c->in[k].dt) &&
               tu_next_list(&p, &c->in[k].sizes) && tu_next_list(&p, &c->in[k].strides) &&
               tu_next_int(&p, &c->in[k].offset) && tu_next_int(&p, &c->in[k].numel) &&
               tu_next_int(&p, &c->in[k].seed) && tu_at_eol(p);
    }
    if (strcmp(key, "op") == 0) return tu_next_tok(&p, c->op, sizeof c->op) && tu_at_eol(p);
    if (strcmp(key, "result") == 0) {
        if (!tu_next_tok(&p, tok, sizeof tok)) return false;
        c->has_result = true;
        if (strcmp(tok, "error") == 0) {
            c->error = true;
            return tu_at_eol(p);
        }
        const char *q = tok;
        return tu_next_int(&q, &c->ndim) && tu_at_eol(p);
    }
    if (strcmp(key, "sizes") == 0) return tu_next_list(&p, &c->sizes) && tu_at_eol(p);
    if (strcmp(key, "values") == 0 || strcmp(key, "checksum") == 0) {
        bool vals = key[0] == 'v';
        if (!tu_next_int(&p, &c->nvalues) || c->nvalues < 0) return false;
        if (vals && c->nvalues > GG_MAX_VALUES) return false;
        int64_t n = vals ? c->nvalues : 1;
        for (int64_t i = 0; i < n; i++) {
            char *end;
            if (!tu_next_tok(&p, tok, sizeof tok)) return false;
            double v = strtod(tok, &end);
            if (*end != '\0') return false;
            if (vals) c->values[i] = v;
            else c->checksum = v;
        }
        if (vals) c->has_values = true;
        else c->has_checksum = true;
        return tu_at_eol(p);
    }
    return false;
}

static mft_tensor *gg_input(const gg_case *c, int k) {
    const int64_t n1[1] = {c->in[k].numel};
    mft_tensor *s = mft_empty(1, n1, c->in[k].dt, MFT_CONTIGUOUS);
    if (!s) return NULL;
    for (int64_t i = 0; i < c->in[k].numel; i++)
        mft__store(s->dtype, mft__tensor_ptr(s) + (size_t)i * mft__elem_size(s->dtype),
                   (double)((7 * i + 3 * c->in[k].seed) % 11 - 5) / 2.0);
    mft_tensor *v = mft_as_strided(s, c->in[k].sizes.n, c->in[k].sizes.v, c->in[k].strides.v,
                                   c->in[k].offset);
    mft_tensor_release(s);
    return v;
}

static void gg_run(const gg_case *c) {
    mft_tensor *in[3] = {NULL, NULL, NULL};
    for (int k = 0; k < c->ninputs; k++) {
        in[k] = gg_input(c, k);
        CHECK_MSG(in[k] != NULL, "golden %s: input %d: %s", c->name, k, mft_last_error_message());
    }
    mft_tensor *r = NULL;
    if (strcmp(c->op, "matmul") == 0) r = mft_matmul(in[0], in[1]);
    else if (strcmp(c->op, "linear") == 0) r = mft_linear(in[0], in[1], in[2]);
    else if (strcmp(c->op, "linear_nobias") == 0) r = mft_linear(in[0], in[1], NULL);
    else CHECK_MSG(false, "golden %s: unknown op %s", c->name, c->op);
    g_gcases++;
    if (c->error) {
        g_gerrors++;
        CHECK_MSG(r == NULL && mft_last_error() == MFT_ERR_SHAPE, "golden %s: expected a shape "
                  "error, got %s", c->name, mft_status_str(mft_last_error()));
        mft_clear_error();
    } else if (!r) {
        CHECK_MSG(false, "golden %s: %s", c->name, mft_last_error_message());
    } else {
        CHECK_MSG(r->ndim == c->ndim && tu_list_eq(&c->sizes, r->ndim, r->sizes),
                  "golden %s: wrong sizes", c->name);
        CHECK(r->numel == c->nvalues);
        const double tol = r->dtype == MFT_F32 ? 1e-5 : 1e-12;
        int64_t idx[MFT_MAX_DIMS] = {0}, i = 0;
        double sum = 0, mag = 0;
        int bad = 0;
        if (r->numel > 0 && r->numel == c->nvalues) do {
                double v = elem_at(r, idx);
                if (c->has_values && !(fabs(v - c->values[i]) <= tol * (1 + fabs(c->values[i]))))
                    bad++;
                sum += v * (double)(i % 13 + 1);
                mag += fabs(v) * (double)(i % 13 + 1);
                i++;
            } while (tu_next_index(r->ndim, r->sizes, idx));
        CHECK_MSG(bad == 0, "golden %s: %d values differ", c->name, bad);
        if (c->has_checksum)
            CHECK_MSG(fabs(sum - c->checksum) <= tol * (1 + mag), "golden %s: checksum %.17g, "
                      "want %.17g", c->name, sum, c->checksum);
    }
    mft_tensor_release(r);
    for (int k = 0; k < 3; k++) mft_tensor_release(in[k]);
}

static void gg_end(int lineno, bool in_case) {
    const gg_case *c = &g_gcase;
    CHECK_MSG(in_case, "line %d: 'end' outside a case", lineno);
    if (!in_case) return;
    bool complete = c->ninputs >= 2 && c->op[0] && c->has_result &&
                    (c->error || c->has_values || c->has_checksum);
    CHECK_MSG(complete, "golden case %s (line %d) is incomplete", c->name, c->line);
    if (complete) gg_run(c);
}

static void test_golden_gemm(void) {
    const tu_golden_file file = {MFT_TEST_DATA_DIR "/gemm_cases.txt", g_gline, GG_LINE, true,
                                 &g_gcase, sizeof g_gcase, &g_gcase.line, g_gcase.name,
                                 sizeof g_gcase.name, gg_field, gg_end};
    if (!tu_read_golden(&file)) return;
    printf("golden gemm: %d cases (%d error cases)\n", g_gcases, g_gerrors);
    CHECK(g_gcases >= 20 && g_gerrors >= 3);
}

int main(void) {
    RUN(test_golden_gemm);
    RUN(test_small_known);
    RUN(test_batched_shapes);
    RUN(test_random_f32);
    RUN(test_random_f32_portable);
    RUN(test_random_f64);
    RUN(test_random_f64_portable);
    RUN(test_one_dim_random);
    RUN(test_linear);
    RUN(test_dispatch_report);
    RUN(test_conversions);
    RUN(test_training_shapes);
    RUN(test_threads_bit_identical);
    RUN(test_empty);
    RUN(test_errors);
    TEST_MAIN_END();
}
