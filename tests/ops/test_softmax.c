/* tests/ops/test_softmax.c — mft_softmax / mft_log_softmax (mft/cnn.h, docs/spec.md §4,
 * ops/softmax/softmax.c):
 *   - golden values against PyTorch 1.13 (MFT_TEST_DATA_DIR
 *     "/softmax_cases.txt", made by tests/golden/gen_softmax.py; the format
 *     is documented at the top of both): ranks 1-5, every dim (negative too),
 *     NCHW / channels_last / non-dense / ambiguous-tag inputs, size-1 and
 *     size-0 dims, -inf / +inf / NaN rows, F32 and F64; values within 1e-5
 *     (F32) / 1e-12 (F64) relative; cases PyTorch rejects must fail;
 *   - the layout rule: the result is packed in the input's tag for rank 3-5
 *     (an NHWC input gives a channels-last result), contiguous otherwise,
 *     and carries the input's tag;
 *   - the fast F32 kernels against the reference kernels
 *     (mft__softmax_reference) over random shapes, dims and layouts
 *     (including non-dense views); F64 exactly equal to the reference;
 *   - dispatch: kernel names and conversion counts (0 for an NHWC F32 input
 *     over dim 1), the F64 fallback for NHWC, strict mode, a user kernel;
 *   - rows sum to 1; log_softmax == log(softmax); bit-identical results with
 *     1 and 2 threads; scopes; errors (CHECK_ERR).
 *   - backward (mft_softmax_backward / mft_log_softmax_backward): every
 *     kernel (fast F32 NCHW / NHWC, the F32 reference registered as a user
 *     kernel, F64 reference) against a naive double loop over random shapes,
 *     dims and layouts of out and grad_out (non-dense too); grad_x packed in
 *     out's tag; finite differences in F64; 1 vs 2 threads; errors. */
#include <errno.h>
#include <stdbool.h>
#include "mft/cnn.h"
#include "test_util.h"

/* defined in ops/softmax/softmax.c (not in a header) */
mft_kernel_fn mft__softmax_reference(int log, mft_dtype dt);
mft_kernel_fn mft__softmax_backward_reference(int log, mft_dtype dt);

#define SG_MIN_CASES 1000 /* the file holds ~1100; fewer means it is broken */
#define SG_MIN_ERROR_CASES 8
#define SG_MAX_SPECIAL 16
#define SG_LINE 4096

static double rtol_of(mft_dtype dt) { return dt == MFT_F64 ? 1e-12 : 1e-5; }
static double atol_of(mft_dtype dt) { return dt == MFT_F64 ? 1e-13 : 1e-6; }

static bool close_to(mft_dtype dt, double want, double got) {
    if (isnan(want) || isnan(got)) return isnan(want) && isnan(got);
    if (isinf(want) || isinf(got)) return want == got;
    return fabs(got - want) <= rtol_of(dt) * fabs(want) + atol_of(dt);
}

/* ------------------------------------------------------------------ golden cases */

enum { F_OP = 1 << 0, F_INPUT = 1 << 4 };

typedef struct {
    char name[160];
    int line;
    unsigned seen;
    /* input */
    mft_dtype dtype;
    tu_list sizes, strides;
    int64_t offset, storage_numel;
    int seed;
    int tag; /* -1: auto */
    int nspecial;
    int64_t special_k[SG_MAX_SPECIAL];
    double special_v[SG_MAX_SPECIAL];
    /* op */
    bool log;
    int dim;
    /* result */
    tu_result r;
} sg_case;

static sg_case g_case;
static char g_line[SG_LINE];
static struct {
    int cases, error_cases, value_lists, checksums, cl_results, failed;
} g_stats;
static int g_case_failed;

#define CASE_CHECK(c, cond, fmt, ...)                                                   \
    do {                                                                                \
        bool ok_ = (cond);                                                              \
        if (!ok_) g_case_failed++;                                                      \
        CHECK_MSG(ok_, "case %s (line %d): " fmt, (c)->name, (c)->line, __VA_ARGS__);   \
    } while (0)

static bool sg_field(const char *line) {
    sg_case *c = &g_case;
    const char *p = line;
    char key[32], tok[64];
    if (!tu_next_tok(&p, key, sizeof key)) return true;
    if (strcmp(key, "input") == 0) {
        int64_t seed;
        if (c->seen & F_INPUT) return false;
        c->seen |= F_INPUT;
        if (!tu_next_dtype(&p, &c->dtype) || !tu_next_list(&p, &c->sizes) ||
            !tu_next_list(&p, &c->strides) || c->sizes.n != c->strides.n ||
            !tu_next_int(&p, &c->offset) || !tu_next_int(&p, &c->storage_numel) ||
            c->offset < 0 || c->storage_numel < 0 || !tu_next_int(&p, &seed) || seed < 0 ||
            seed > 1000 || !tu_next_tok(&p, tok, sizeof tok))
            return false;
        c->seed = (int)seed;
        if (strcmp(tok, "auto") == 0) c->tag = -1;
        else if (strcmp(tok, "contiguous") == 0) c->tag = MFT_CONTIGUOUS;
        else if (strcmp(tok, "channels_last") == 0) c->tag = MFT_CHANNELS_LAST;
        else return false;
    } else if (strcmp(key, "special") == 0) {
        if (!(c->seen & F_INPUT) || c->nspecial >= SG_MAX_SPECIAL) return false;
        if (!tu_next_int(&p, &c->special_k[c->nspecial]) ||
            !tu_next_double(&p, &c->special_v[c->nspecial]) || c->special_k[c->nspecial] < 0 ||
            c->special_k[c->nspecial] >= c->storage_numel)
            return false;
        c->nspecial++;
    } else if (strcmp(key, "op") == 0) {
        int64_t d;
        if ((c->seen & F_OP) || !tu_next_tok(&p, tok, sizeof tok)) return false;
        if (strcmp(tok, "softmax") == 0) c->log = false;
        else if (strcmp(tok, "log_softmax") == 0) c->log = true;
        else return false;
        if (!tu_next_int(&p, &d) || d < -100 || d > 100) return false;
        c->dim = (int)d;
        c->seen |= F_OP;
    } else {
        int got = tu_parse_result_line(key, p, &c->r);
        if (got < 0) return false;
        return got == 1;
    }
    return tu_at_eol(p);
}

/* The generator's fill rule (gen_softmax.py: fill_value). */
static double fill_value(int seed, int64_t k, mft_dtype dt) {
    int64_t r = (7 * k + 3 * (int64_t)seed) % 11;
    return tu_is_float(dt) ? (double)(r - 5) / 2.0 : (double)(r - 5);
}

static mft_tensor *build_input(const sg_case *c) {
    int64_t n = c->storage_numel;
    mft_tensor *flat = mft_empty(1, &n, c->dtype, MFT_CONTIGUOUS);
    if (!flat) {
        CASE_CHECK(c, false, "mft_empty(%lld): %s", (long long)n, mft_last_error_message());
        return NULL;
    }
    for (int64_t k = 0; k < n; k++) mft_tensor_set(flat, &k, fill_value(c->seed, k, c->dtype));
    for (int i = 0; i < c->nspecial; i++) mft_tensor_set(flat, &c->special_k[i], c->special_v[i]);
    mft_tensor *t = mft_as_strided(flat, c->sizes.n, c->sizes.v, c->strides.v, c->offset);
    mft_tensor_release(flat);
    if (t && c->tag >= 0) {
        mft_tensor *u = mft_to_format(t, (mft_format)c->tag);
        /* (an empty tensor gets the format's packed strides instead: nothing
         * to copy, and its values do not exist) */
        bool same = u && (mft_tensor_numel(t) == 0 ||
                          (mft_tensor_shares_storage(u, t) &&
                           tu_list_eq(&c->strides, mft_tensor_ndim(u), mft_tensor_strides(u))));
        CASE_CHECK(c, same, "mft_to_format(%s) is not a no-copy re-tag",
                   mft_format_name((mft_format)c->tag));
        mft_tensor_release(t);
        t = u;
        if (!same) {
            mft_tensor_release(t);
            return NULL;
        }
    }
    CASE_CHECK(c, t != NULL, "input not built: %s", mft_last_error_message());
    return t;
}

static void check_values(const sg_case *c, const mft_tensor *r) {
    int nd = mft_tensor_ndim(r);
    const int64_t *sz = mft_tensor_sizes(r);
    int64_t numel = mft_tensor_numel(r), idx[TU_MAX_LIST] = {0};
    mft_dtype dt = mft_tensor_dtype(r);
    double sum = 0.0, abs_sum = 0.0;
    int bad = 0;
    CASE_CHECK(c, numel == c->r.nvalues, "numel %lld, golden %lld", (long long)numel,
               (long long)c->r.nvalues);
    if (numel != c->r.nvalues) return;
    for (int64_t i = 0; i < numel; i++) {
        double v = mft_tensor_get(r, idx);
        if (c->r.full_values) {
            if (!close_to(dt, c->r.values[i], v) && bad++ < 3) {
                char ib[128];
                tu_fmt_list(ib, sizeof ib, nd, idx);
                CASE_CHECK(c, false, "value at %s expected %.17g, got %.17g", ib, c->r.values[i], v);
            }
        } else {
            double w = (double)(i % 13 + 1);
            sum += v * w;
            abs_sum += fabs(v) * w;
        }
        tu_next_index(nd, sz, idx);
    }
    if (c->r.full_values) {
        CASE_CHECK(c, bad == 0, "%d of %lld values differ", bad, (long long)numel);
        g_stats.value_lists++;
    } else {
        bool ok = fabs(sum - c->r.checksum) <= rtol_of(dt) * abs_sum + atol_of(dt);
        CASE_CHECK(c, ok, "checksum expected %.17g, got %.17g", c->r.checksum, sum);
        g_stats.checksums++;
    }
}

static void sg_end(int lineno, bool in_case) {
    sg_case *c = &g_case;
    CHECK_MSG(in_case, "line %d: 'end' outside a case", lineno);
    if (!in_case) return;
    g_case_failed = 0;
    g_stats.cases++;
    CASE_CHECK(c, (c->seen & (F_INPUT | F_OP)) == (F_INPUT | F_OP) && c->r.has_result, "%s",
               "incomplete case");
    if ((c->seen & (F_INPUT | F_OP)) != (F_INPUT | F_OP) || !c->r.has_result) return;
    if (!c->r.expect_error)
        CASE_CHECK(c, (c->r.seen & (TU_R_SIZES | TU_R_STRIDES | TU_R_VALUES)) ==
                          (TU_R_SIZES | TU_R_STRIDES | TU_R_VALUES),
                   "%s", "result lines missing");
    mft_tensor *x = build_input(c);
    if (!x) return;
    uint64_t h = mft_tensor_hash(x);
    mft_clear_error();
    mft_tensor *r = c->log ? mft_log_softmax(x, c->dim) : mft_softmax(x, c->dim);
    if (c->r.expect_error) {
        g_stats.error_cases++;
        CASE_CHECK(c, r == NULL && mft_last_error() != MFT_OK, "%s", "PyTorch rejects, mft did not");
        mft_clear_error();
    } else if (!r) {
        CASE_CHECK(c, false, "failed: %s", mft_last_error_message());
    } else {
        int nd = mft_tensor_ndim(r);
        CASE_CHECK(c, tu_list_eq(&c->r.sizes, nd, mft_tensor_sizes(r)) && nd == c->r.ndim, "%s",
                   "sizes differ");
        CASE_CHECK(c, mft_tensor_dtype(r) == c->r.dtype, "dtype %s",
                   mft_dtype_name(mft_tensor_dtype(r)));
        /* docs/spec.md §4: packed in the input's tag (rank 3-5), else contiguous */
        mft_format want = nd >= 3 && nd <= 5 ? mft_tensor_format(x) : MFT_CONTIGUOUS;
        int64_t st[TU_MAX_LIST];
        mft_strides_for_format(nd, mft_tensor_sizes(r), want, st);
        bool same_st = nd == 0 || memcmp(st, mft_tensor_strides(r), (size_t)nd * sizeof *st) == 0;
        char sb[128], wb[128];
        tu_fmt_list(sb, sizeof sb, nd, mft_tensor_strides(r));
        tu_fmt_list(wb, sizeof wb, nd, st);
        CASE_CHECK(c, same_st, "strides %s, expected %s (packed %s)", sb, wb, mft_format_name(want));
        CASE_CHECK(c, mft_tensor_format(r) == want, "tag %s, expected %s",
                   mft_format_name(mft_tensor_format(r)), mft_format_name(want));
        CASE_CHECK(c, mft_tensor_offset(r) == 0 && !mft_tensor_shares_storage(r, x), "%s",
                   "not a fresh tensor");
        if (want == MFT_CHANNELS_LAST) g_stats.cl_results++;
        check_values(c, r);
    }
    CASE_CHECK(c, mft_tensor_hash(x) == h, "%s", "input changed");
    mft_tensor_release(r);
    mft_tensor_release(x);
    if (g_case_failed) g_stats.failed++;
}

static void test_golden(void) {
    memset(&g_stats, 0, sizeof g_stats);
    tu_golden_file g = {MFT_TEST_DATA_DIR "/softmax_cases.txt", g_line, (int)sizeof g_line, true,
                        &g_case, sizeof g_case, &g_case.line, g_case.name, sizeof g_case.name,
                        sg_field, sg_end};
    if (!tu_read_golden(&g)) return;
    printf("golden: %d cases (%d errors, %d value lists, %d checksums, %d channels-last results), "
           "%d failed\n",
           g_stats.cases, g_stats.error_cases, g_stats.value_lists, g_stats.checksums,
           g_stats.cl_results, g_stats.failed);
    CHECK(g_stats.cases >= SG_MIN_CASES);
    CHECK(g_stats.error_cases >= SG_MIN_ERROR_CASES);
    CHECK(g_stats.cl_results > 100);
    CHECK_EQ_I(g_stats.failed, 0);
}

/* ------------------------------------------------------------------ helpers */

/* Runs the reference kernel on x (any layout) into a fresh contiguous tensor. */
static mft_tensor *run_reference(const mft_tensor *x, int dim, bool lg) {
    int nd = mft_tensor_ndim(x);
    mft_tensor *y = mft_empty(nd, mft_tensor_sizes(x), mft_tensor_dtype(x), MFT_CONTIGUOUS);
    if (!y) return NULL;
    mft_softmax_params p = {dim < 0 ? dim + nd : dim};
    const mft_tensor *ins[1] = {x};
    mft_tensor *outs[1] = {y};
    mft_kernel_args a = {1, 1, ins, outs, &p};
    mft__softmax_reference(lg, mft_tensor_dtype(x))(&a);
    return y;
}

/* Largest violation of |a - b| <= rtol |b| + atol over all logical elements
 * (NaN must match NaN, infinities exactly); 0 when all pass, < 0 on a shape
 * mismatch. exact: bitwise equal values required. */
static double compare(const mft_tensor *a, const mft_tensor *b, double rtol, double atol,
                      bool exact) {
    int nd = mft_tensor_ndim(a);
    if (!a || !b || !tu_has_sizes(b, nd, mft_tensor_sizes(a))) return -1;
    int64_t idx[MFT_MAX_DIMS] = {0};
    double worst = 0;
    for (int64_t i = 0; i < mft_tensor_numel(a); i++) {
        double u = mft_tensor_get(a, idx), v = mft_tensor_get(b, idx);
        double bad = 0;
        if (isnan(u) || isnan(v)) bad = isnan(u) && isnan(v) ? 0 : 1e300;
        else if (exact) bad = u == v ? 0 : 1e300;
        else if (isinf(u) || isinf(v)) bad = u == v ? 0 : 1e300;
        else bad = fabs(u - v) - (rtol * fabs(v) + atol);
        if (bad > worst) worst = bad;
        tu_next_index(nd, mft_tensor_sizes(a), idx);
    }
    return worst;
}

/* Random values (normal * scale) copied into t (any layout). */
static void fill_random(mft_tensor *t, uint64_t seed, double scale) {
    int nd = mft_tensor_ndim(t);
    mft_tensor *r = mft_randn(nd, mft_tensor_sizes(t), mft_tensor_dtype(t), MFT_CONTIGUOUS, seed);
    mft_tensor *s = mft_mul_scalar(r, scale);
    TU_OK_S(mft_copy_(t, s));
    mft_tensor_release(s);
    mft_tensor_release(r);
}

/* ------------------------------------------------------------------ layout rule */

static void test_layout_rule(void) {
    int64_t sz4[4] = {2, 3, 4, 5}, sz2[2] = {3, 4}, sz5[5] = {2, 3, 2, 2, 2};
    struct {
        int nd;
        int64_t *sz;
        mft_format in_fmt, want;
    } cases[] = {
        {4, sz4, MFT_CHANNELS_LAST, MFT_CHANNELS_LAST}, {4, sz4, MFT_CONTIGUOUS, MFT_CONTIGUOUS},
        {5, sz5, MFT_CHANNELS_LAST, MFT_CHANNELS_LAST}, {2, sz2, MFT_CONTIGUOUS, MFT_CONTIGUOUS},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int lg = 0; lg < 2; lg++)
            for (int dt = 0; dt < 2; dt++) {
                mft_dtype d = dt ? MFT_F64 : MFT_F32;
                mft_tensor *x = mft_randn(cases[i].nd, cases[i].sz, d, cases[i].in_fmt, 7);
                for (int dim = -cases[i].nd; dim < cases[i].nd; dim++) {
                    mft_tensor *r = lg ? mft_log_softmax(x, dim) : mft_softmax(x, dim);
                    CHECK(r != NULL);
                    if (!r) continue;
                    CHECK(mft_tensor_is_contiguous(r, cases[i].want));
                    CHECK(mft_tensor_format(r) == cases[i].want);
                    CHECK(mft_tensor_dtype(r) == d);
                    mft_tensor *ref = run_reference(x, dim, lg != 0);
                    CHECK(compare(r, ref, rtol_of(d), atol_of(d), false) == 0);
                    mft_tensor_release(ref);
                    mft_tensor_release(r);
                }
                mft_tensor_release(x);
            }
    }
    /* a non-dense NHWC-ordered view: tag CHANNELS_LAST, result packed NHWC */
    int64_t big[4] = {2, 4, 6, 8};
    mft_tensor *b = mft_randn(4, big, MFT_F32, MFT_CHANNELS_LAST, 3);
    mft_tensor *v = mft_slice(b, 3, 0, 8, 2);
    CHECK(v && mft_tensor_format(v) == MFT_CHANNELS_LAST && !mft_tensor_is_dense(v));
    mft_tensor *r = mft_softmax(v, 1);
    CHECK(r && mft_tensor_is_contiguous(r, MFT_CHANNELS_LAST));
    mft_tensor *ref = run_reference(v, 1, false);
    CHECK(compare(r, ref, 1e-5, 1e-6, false) == 0);
    mft_tensor_release(ref);
    mft_tensor_release(r);
    mft_tensor_release(v);
    mft_tensor_release(b);
}

/* ------------------------------------------------------------------ fast vs reference */

static void test_fast_vs_reference(void) {
    uint64_t rng = 0x5eed5eedULL;
    tu_layout_opts lo = {3, 2, false};
    int nfail = 0, ncases = 0;
    for (int iter = 0; iter < 400; iter++) {
        int nd = (int)tu_rng_int(&rng, 1, 5);
        int64_t sz[MFT_MAX_DIMS];
        for (int d = 0; d < nd; d++) sz[d] = tu_rng_int(&rng, 1, 6);
        /* sometimes a long dim: > 16 lanes in a row, > 256 columns in a block */
        if (tu_rng_int(&rng, 0, 2) == 0) sz[tu_rng_int(&rng, 0, nd - 1)] = tu_rng_int(&rng, 17, 300);
        int dim = (int)tu_rng_int(&rng, -nd, nd - 1);
        int layout = (int)tu_rng_int(&rng, 0, 2); /* 0 NCHW, 1 NHWC, 2 strided view */
        if (layout == 1 && (nd < 3 || nd > 5)) layout = 0;
        mft_dtype dt = tu_rng_int(&rng, 0, 3) == 0 ? MFT_F64 : MFT_F32;
        mft_tensor *x;
        if (layout == 2) x = tu_strided_view(nd, sz, dt, 0.0, &lo, &rng, NULL);
        else x = mft_empty(nd, sz, dt, layout ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS);
        CHECK(x != NULL);
        if (!x) continue;
        fill_random(x, (uint64_t)iter + 1, 4.0);
        if (tu_rng_int(&rng, 0, 9) == 0) { /* a -inf somewhere */
            int64_t idx[MFT_MAX_DIMS];
            for (int d = 0; d < nd; d++) idx[d] = tu_rng_int(&rng, 0, sz[d] - 1);
            mft_tensor_set(x, idx, -INFINITY);
        }
        for (int lg = 0; lg < 2; lg++) {
            mft_tensor *r = lg ? mft_log_softmax(x, dim) : mft_softmax(x, dim);
            mft_tensor *ref = run_reference(x, dim, lg != 0);
            /* F64 runs the reference kernel itself: bit-identical */
            double w = compare(r, ref, dt == MFT_F32 ? 1e-5 : 0, dt == MFT_F32 ? 2e-6 : 0,
                               dt == MFT_F64);
            ncases++;
            if (w != 0) {
                char buf[160];
                tu_describe(x, buf, sizeof buf, true);
                if (nfail++ < 5)
                    CHECK_MSG(false, "iter %d %s dim %d %s: worst excess %g", iter,
                              lg ? "log_softmax" : "softmax", dim, buf, w);
            }
            mft_tensor_release(r);
            mft_tensor_release(ref);
        }
        mft_tensor_release(x);
    }
    CHECK_EQ_I(nfail, 0);
    CHECK_EQ_I(ncases, 800);
}

/* ------------------------------------------------------------------ dispatch */

static int g_user_calls;
static void user_kernel(const mft_kernel_args *a) {
    g_user_calls++;
    mft_fill_(a->outputs[0], 7.0);
}

static void check_last(const char *op, const char *kernel, mft_format fmt, mft_format kfmt,
                       int conversions) {
    const mft_dispatch_info *d = mft_dispatch_last();
    CHECK_MSG(strcmp(d->op, op) == 0, "op %s, expected %s", d->op, op);
    CHECK_MSG(strcmp(d->kernel, kernel) == 0, "kernel %s, expected %s", d->kernel, kernel);
    CHECK_MSG(d->format == fmt && d->kernel_format == kfmt, "formats %s/%s",
              mft_format_name(d->format), mft_format_name(d->kernel_format));
    CHECK_MSG(d->conversions == conversions, "%s: %d conversions, expected %d", kernel,
              d->conversions, conversions);
    CHECK(!d->user);
}

static void test_dispatch(void) {
    int64_t sz[4] = {2, 8, 5, 5};
    mft_tensor *nhwc = mft_randn(4, sz, MFT_F32, MFT_CHANNELS_LAST, 11);
    mft_tensor *nchw = mft_randn(4, sz, MFT_F32, MFT_CONTIGUOUS, 11);
    mft_tensor *r;

    mft_dispatch_conversions_reset();
    r = mft_softmax(nhwc, 1);
    check_last("softmax", "softmax.nhwc.f32", MFT_CHANNELS_LAST, MFT_CHANNELS_LAST, 0);
    mft_tensor_release(r);
    r = mft_log_softmax(nhwc, -3);
    check_last("log_softmax", "log_softmax.nhwc.f32", MFT_CHANNELS_LAST, MFT_CHANNELS_LAST, 0);
    mft_tensor_release(r);
    r = mft_softmax(nchw, 1);
    check_last("softmax", "softmax.nchw.f32", MFT_CONTIGUOUS, MFT_CONTIGUOUS, 0);
    mft_tensor_release(r);
    r = mft_log_softmax(nchw, 3);
    check_last("log_softmax", "log_softmax.nchw.f32", MFT_CONTIGUOUS, MFT_CONTIGUOUS, 0);
    mft_tensor_release(r);
    CHECK_EQ_I(mft_dispatch_conversions(), 0);

    /* a non-dense input is packed first (one counted conversion) */
    mft_tensor *v = mft_slice(nchw, 3, 0, 5, 2);
    r = mft_softmax(v, 1);
    check_last("softmax", "softmax.nchw.f32", MFT_CONTIGUOUS, MFT_CONTIGUOUS, 1);
    mft_tensor_release(r);
    mft_tensor_release(v);

    /* F64: the reference kernel (CONTIGUOUS); NHWC falls back through NCHW */
    mft_tensor *d64 = mft_to_dtype(nchw, MFT_F64);
    mft_tensor *d64cl = mft_contiguous(d64, MFT_CHANNELS_LAST);
    r = mft_softmax(d64, 1);
    check_last("softmax", "softmax.nchw.f64.ref", MFT_CONTIGUOUS, MFT_CONTIGUOUS, 0);
    mft_tensor *r2 = mft_softmax(d64cl, 1);
    check_last("softmax", "softmax.nchw.f64.ref", MFT_CHANNELS_LAST, MFT_CONTIGUOUS, 2);
    CHECK(r2 && mft_tensor_is_contiguous(r2, MFT_CHANNELS_LAST));
    CHECK(compare(r2, r, 0, 0, true) == 0);
    mft_tensor_release(r2);
    mft_tensor_release(r);
    r = mft_log_softmax(d64cl, 2);
    check_last("log_softmax", "log_softmax.nchw.f64.ref", MFT_CHANNELS_LAST, MFT_CONTIGUOUS, 2);
    mft_tensor_release(r);

    /* strict mode: the F64 NHWC fallback is refused; F32 NHWC still runs */
    mft_dispatch_set_strict(true);
    int64_t live = mft_live_tensors();
    CHECK(mft_softmax(d64cl, 1) == NULL);
    CHECK_ERR(MFT_ERR_UNSUPPORTED, "mft_softmax");
    CHECK(mft_log_softmax(d64cl, 1) == NULL);
    CHECK_ERR(MFT_ERR_UNSUPPORTED, "strict");
    CHECK_EQ_I(mft_live_tensors(), live);
    r = mft_softmax(nhwc, 1);
    CHECK(r != NULL);
    mft_tensor_release(r);
    mft_dispatch_set_strict(false);

    /* a user kernel replaces the built-in one for its key only */
    TU_OK_S(mft_dispatch_register("softmax", MFT_CHANNELS_LAST, MFT_F32, "user.softmax", user_kernel));
    g_user_calls = 0;
    r = mft_softmax(nhwc, 1);
    CHECK_EQ_I(g_user_calls, 1);
    CHECK(mft_dispatch_last()->user && strcmp(mft_dispatch_last()->kernel, "user.softmax") == 0);
    int64_t i0[4] = {1, 2, 3, 4};
    CHECK(r && mft_tensor_get(r, i0) == 7.0);
    mft_tensor_release(r);
    r = mft_log_softmax(nhwc, 1);
    CHECK_EQ_I(g_user_calls, 1);
    mft_tensor_release(r);
    TU_OK_S(mft_dispatch_unregister("softmax", MFT_CHANNELS_LAST, MFT_F32));
    r = mft_softmax(nhwc, 1);
    check_last("softmax", "softmax.nhwc.f32", MFT_CHANNELS_LAST, MFT_CHANNELS_LAST, 0);
    mft_tensor_release(r);

    /* the table lists every softmax kernel */
    char buf[8192];
    mft_dispatch_list(buf, sizeof buf);
    const char *names[] = {"softmax.nchw.f32", "softmax.nhwc.f32", "softmax.nchw.f64.ref",
                           "log_softmax.nchw.f32", "log_softmax.nhwc.f32",
                           "log_softmax.nchw.f64.ref"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        CHECK_MSG(strstr(buf, names[i]) != NULL, "%s not listed", names[i]);

    mft_tensor_release(d64cl);
    mft_tensor_release(d64);
    mft_tensor_release(nchw);
    mft_tensor_release(nhwc);
}

/* ------------------------------------------------------------------ properties */

static void test_rows_sum_to_one_and_log(void) {
    int64_t sz[4] = {3, 5, 4, 7};
    for (int f = 0; f < 2; f++)
        for (int dt = 0; dt < 2; dt++) {
            mft_dtype d = dt ? MFT_F64 : MFT_F32;
            mft_tensor *x = mft_randn(4, sz, d, f ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS, 21);
            mft_tensor *x3 = mft_mul_scalar(x, 5.0);
            for (int dim = 0; dim < 4; dim++) {
                mft_tensor *s = mft_softmax(x3, dim);
                mft_tensor *ls = mft_log_softmax(x3, dim);
                mft_tensor *sum = mft_sum(s, 1, &dim, false);
                CHECK(s && ls && sum);
                if (!s || !ls || !sum) {
                    mft_tensor_release(s);
                    mft_tensor_release(ls);
                    mft_tensor_release(sum);
                    continue;
                }
                int64_t idx[4] = {0};
                double worst = 0;
                for (int64_t i = 0; i < mft_tensor_numel(sum); i++) {
                    worst = fmax(worst, fabs(mft_tensor_get(sum, idx) - 1.0));
                    tu_next_index(3, mft_tensor_sizes(sum), idx);
                }
                CHECK_MSG(worst <= (d == MFT_F32 ? 2e-6 : 1e-14), "rows sum to 1 +- %g", worst);
                /* log_softmax == log(softmax); exp(log_softmax) == softmax */
                memset(idx, 0, sizeof idx);
                double wl = 0;
                for (int64_t i = 0; i < mft_tensor_numel(s); i++) {
                    double sv = mft_tensor_get(s, idx), lv = mft_tensor_get(ls, idx);
                    double tol = d == MFT_F32 ? 1e-5 * fabs(lv) + 2e-6 : 1e-12 * fabs(lv) + 1e-13;
                    if (sv > 1e-30) wl = fmax(wl, fabs(log(sv) - lv) - tol);
                    wl = fmax(wl, fabs(exp(lv) - sv) - (d == MFT_F32 ? 1e-5 * sv + 1e-7 : 1e-12 * sv));
                    tu_next_index(4, sz, idx);
                }
                CHECK_MSG(wl <= 0, "log_softmax vs log(softmax): excess %g", wl);
                mft_tensor_release(sum);
                mft_tensor_release(ls);
                mft_tensor_release(s);
            }
            mft_tensor_release(x3);
            mft_tensor_release(x);
        }
    /* hand-checked values: [1, 2, 3] -> e^k / (e + e^2 + e^3) */
    mft_tensor *t = mft_arange(1, 4, 1, MFT_F64);
    mft_tensor *s = mft_softmax(t, 0), *ls = mft_log_softmax(t, -1);
    double den = exp(1) + exp(2) + exp(3);
    for (int64_t k = 0; k < 3; k++) {
        CHECK_NEAR(mft_tensor_get(s, &k), exp((double)k + 1) / den, 1e-15);
        CHECK_NEAR(mft_tensor_get(ls, &k), (double)k + 1 - log(den), 1e-14);
    }
    mft_tensor_release(ls);
    mft_tensor_release(s);
    mft_tensor_release(t);
}

static void test_special_values(void) {
    /* -inf rows -> NaN; +inf anywhere in a row -> NaN row; -inf elements -> 0 / -inf */
    int64_t sz[2] = {4, 20};
    for (int dt = 0; dt < 2; dt++) {
        mft_tensor *x = mft_zeros(2, sz, dt ? MFT_F64 : MFT_F32, MFT_CONTIGUOUS);
        for (int64_t j = 0; j < 20; j++) {
            int64_t a[2] = {0, j}, b[2] = {2, j};
            mft_tensor_set(x, a, -INFINITY);
            mft_tensor_set(x, b, (double)j);
        }
        int64_t p[2] = {1, 5}, q[2] = {2, 3}, n[2] = {3, 7};
        mft_tensor_set(x, p, INFINITY);
        mft_tensor_set(x, q, -INFINITY);
        mft_tensor_set(x, n, NAN);
        for (int lg = 0; lg < 2; lg++) {
            mft_tensor *r = lg ? mft_log_softmax(x, 1) : mft_softmax(x, 1);
            for (int64_t j = 0; j < 20; j++) {
                int64_t a[2] = {0, j}, b[2] = {1, j}, c[2] = {2, j}, d[2] = {3, j};
                CHECK(isnan(mft_tensor_get(r, a)));
                CHECK(isnan(mft_tensor_get(r, b)));
                CHECK(isnan(mft_tensor_get(r, d)));
                double v = mft_tensor_get(r, c);
                if (j == 3) CHECK(lg ? v == -INFINITY : v == 0.0);
                else CHECK(isfinite(v));
            }
            mft_tensor *ref = run_reference(x, 1, lg != 0);
            CHECK(compare(r, ref, 1e-5, 1e-6, false) == 0);
            mft_tensor_release(ref);
            /* the column kernel (dim 0 of the transpose, packed) agrees */
            mft_tensor *xt = mft_transpose(x, 0, 1);
            mft_tensor *xc = mft_contiguous(xt, MFT_CONTIGUOUS);
            mft_tensor *rt = lg ? mft_log_softmax(xc, 0) : mft_softmax(xc, 0);
            mft_tensor *rtt = mft_transpose(rt, 0, 1);
            CHECK(compare(rtt, r, 1e-5, 1e-6, false) == 0);
            mft_tensor_release(rtt);
            mft_tensor_release(rt);
            mft_tensor_release(xc);
            mft_tensor_release(xt);
            mft_tensor_release(r);
        }
        mft_tensor_release(x);
    }
}

static void test_threads_bit_identical(void) {
    struct {
        int nd;
        int64_t sz[4];
        mft_format fmt;
        int dim;
    } cases[] = {
        {4, {8, 64, 24, 24}, MFT_CONTIGUOUS, 1},    /* columns, inner 576 */
        {4, {8, 64, 24, 24}, MFT_CONTIGUOUS, 3},    /* rows of 24 */
        {4, {8, 64, 24, 24}, MFT_CHANNELS_LAST, 1}, /* rows of 64 (C of NHWC) */
        {4, {8, 64, 24, 24}, MFT_CHANNELS_LAST, 2}, /* columns, inner W*C */
        {2, {3, 100000}, MFT_CONTIGUOUS, 1},        /* few long rows */
        {3, {2, 3, 70000}, MFT_CONTIGUOUS, 1},      /* small outer: column blocks */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mft_tensor *x = mft_randn(cases[i].nd, cases[i].sz, MFT_F32, cases[i].fmt, 100 + i);
        mft_tensor *x4 = mft_mul_scalar(x, 4.0);
        for (int lg = 0; lg < 2; lg++) {
            mft_set_num_threads(1);
            mft_tensor *a = lg ? mft_log_softmax(x4, cases[i].dim) : mft_softmax(x4, cases[i].dim);
            mft_set_num_threads(2);
            mft_tensor *b = lg ? mft_log_softmax(x4, cases[i].dim) : mft_softmax(x4, cases[i].dim);
            mft_set_num_threads(0);
            CHECK(a && b);
            if (a && b) {
                CHECK(mft_tensor_is_contiguous(a, cases[i].fmt) &&
                      mft_tensor_is_contiguous(b, cases[i].fmt));
                CHECK_MSG(memcmp(mft_tensor_data(a), mft_tensor_data(b),
                                 (size_t)mft_tensor_numel(a) * sizeof(float)) == 0,
                          "case %zu %s: 1 and 2 threads differ", i, lg ? "log_softmax" : "softmax");
                if (i >= 4) { /* the big ones against the reference too */
                    mft_tensor *ref = run_reference(x4, cases[i].dim, lg != 0);
                    CHECK(compare(a, ref, 1e-5, 2e-6, false) == 0);
                    mft_tensor_release(ref);
                }
            }
            mft_tensor_release(a);
            mft_tensor_release(b);
        }
        mft_tensor_release(x4);
        mft_tensor_release(x);
    }
}

static void test_scopes(void) {
    int64_t sz[4] = {1, 3, 2, 2};
    mft_tensor *x = mft_randn(4, sz, MFT_F32, MFT_CHANNELS_LAST, 5);
    mft_tensor *x64 = mft_randn(4, sz, MFT_F64, MFT_CHANNELS_LAST, 5);
    int64_t live = mft_live_tensors();
    TU_OK_S(mft_scope_begin());
    mft_tensor *r = mft_softmax(x, 1);
    mft_tensor *l = mft_log_softmax(x, 2);
    CHECK(r && l);
    CHECK_EQ_I(mft_live_tensors(), live + 2);
    /* a failing dispatch inside a scope leaves nothing behind */
    mft_dispatch_set_strict(true);
    CHECK(mft_softmax(x64, 1) == NULL);
    CHECK_ERR(MFT_ERR_UNSUPPORTED, "mft_softmax");
    mft_dispatch_set_strict(false);
    CHECK_EQ_I(mft_live_tensors(), live + 2);
    mft_tensor *kept = mft_scope_keep(r);
    CHECK(kept == r);
    TU_OK_S(mft_scope_end());
    CHECK_EQ_I(mft_live_tensors(), live + 1);
    mft_tensor_release(kept);
    mft_tensor_release(x64);
    mft_tensor_release(x);
}

/* ------------------------------------------------------------------ errors */

static void test_errors(void) {
    int64_t sz[2] = {2, 3};
    mft_tensor *x = mft_ones(2, sz, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *xi = mft_ones(2, sz, MFT_I32, MFT_CONTIGUOUS);
    mft_tensor *s0 = mft_full(0, NULL, MFT_F32, MFT_CONTIGUOUS, 1.0);

    TU_EXPECT_NULL_(mft_softmax(NULL, 0), "mft_softmax(NULL, 0)");
    CHECK_ERR(MFT_ERR_NULL, "mft_softmax: argument 'x' is NULL");
    TU_EXPECT_NULL_(mft_log_softmax(NULL, 0), "mft_log_softmax(NULL, 0)");
    CHECK_ERR(MFT_ERR_NULL, "mft_log_softmax");

    TU_EXPECT_NULL_(mft_softmax(x, 2), "mft_softmax(x, 2)");
    CHECK_ERR(MFT_ERR_DIM, "mft_softmax: dim 2 is out of range (expected -2..1)");
    TU_EXPECT_NULL_(mft_log_softmax(x, -3), "mft_log_softmax(x, -3)");
    CHECK_ERR(MFT_ERR_DIM, "mft_log_softmax: dim -3");

    TU_EXPECT_NULL_(mft_softmax(xi, 1), "mft_softmax(xi, 1)");
    CHECK_ERR(MFT_ERR_DTYPE, "mft_softmax: dtype i32");
    TU_EXPECT_NULL_(mft_log_softmax(xi, 0), "mft_log_softmax(xi, 0)");
    CHECK_ERR(MFT_ERR_DTYPE, "i32");

    TU_EXPECT_NULL_(mft_softmax(s0, 0), "mft_softmax(s0, 0)");
    CHECK_ERR(MFT_ERR_RANK, "mft_softmax: needs a tensor of rank >= 1");
    TU_EXPECT_NULL_(mft_log_softmax(s0, -1), "mft_log_softmax(s0, -1)");
    CHECK_ERR(MFT_ERR_RANK, "rank 0");

    /* NULL propagation: a chain keeps the first error */
    mft_clear_error();
    mft_tensor *a = mft_softmax(x, 7);
    mft_tensor *b = mft_log_softmax(a, 0);
    CHECK(a == NULL && b == NULL);
    CHECK_ERR(MFT_ERR_DIM, "mft_softmax: dim 7");

    /* the input is untouched by failures */
    CHECK_NEAR(mft_tensor_get(x, (int64_t[]){1, 2}), 1.0, 0);
    mft_tensor_release(s0);
    mft_tensor_release(xi);
    mft_tensor_release(x);
}

/* ------------------------------------------------------------------ backward */

static double *sb_array(const mft_tensor *t) {
    int nd = mft_tensor_ndim(t);
    int64_t idx[MFT_MAX_DIMS] = {0}, n = mft_tensor_numel(t);
    double *a = malloc(sizeof(double) * (size_t)(n + 1));
    for (int64_t i = 0; i < n; i++) {
        a[i] = mft_tensor_get(t, idx);
        tu_next_index(nd, mft_tensor_sizes(t), idx);
    }
    return a;
}

/* naive grad_x (logical order) from grad_out g and out o */
static double *sb_naive(const mft_tensor *g, const mft_tensor *o, int dim, bool lg) {
    int nd = mft_tensor_ndim(o);
    const int64_t *sz = mft_tensor_sizes(o);
    if (dim < 0) dim += nd;
    int64_t len = sz[dim], inner = tu_shape_numel(nd - dim - 1, sz + dim + 1);
    int64_t n = mft_tensor_numel(o), outer = len && inner ? n / (len * inner) : 0;
    double *ga = sb_array(g), *oa = sb_array(o);
    double *r = malloc(sizeof(double) * (size_t)(n + 1));
    for (int64_t a = 0; a < outer; a++)
        for (int64_t in = 0; in < inner; in++) {
            double s = 0;
            for (int64_t k = 0; k < len; k++) {
                int64_t i = (a * len + k) * inner + in;
                s += lg ? ga[i] : ga[i] * oa[i];
            }
            for (int64_t k = 0; k < len; k++) {
                int64_t i = (a * len + k) * inner + in;
                r[i] = lg ? ga[i] - exp(oa[i]) * s : oa[i] * (ga[i] - s);
            }
        }
    free(ga);
    free(oa);
    return r;
}

static double sb_err(const mft_tensor *t, const double *want) {
    int nd = mft_tensor_ndim(t);
    int64_t idx[MFT_MAX_DIMS] = {0};
    double worst = 0;
    for (int64_t i = 0; i < mft_tensor_numel(t); i++) {
        double e = fabs(mft_tensor_get(t, idx) - want[i]) / (1 + fabs(want[i]));
        if (!(e <= worst)) worst = e;
        tu_next_index(nd, mft_tensor_sizes(t), idx);
    }
    return worst;
}

/* t of sizes in layout 0 NCHW, 1 NHWC, 2 strided view, holding src's values */
static mft_tensor *sb_in_layout(const mft_tensor *src, int layout, uint64_t *rng) {
    tu_layout_opts lo = {3, 2, false};
    int nd = mft_tensor_ndim(src);
    const int64_t *sz = mft_tensor_sizes(src);
    mft_tensor *t = layout == 2 ? tu_strided_view(nd, sz, mft_tensor_dtype(src), 0.0, &lo, rng, NULL)
                                : mft_empty(nd, sz, mft_tensor_dtype(src),
                                            layout == 1 ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS);
    if (t) TU_OK_S(mft_copy_(t, src));
    return t;
}

static void test_backward_vs_naive(void) {
    uint64_t rng = 0xbac4bac4ULL;
    int nfail = 0, ncases = 0;
    for (int iter = 0; iter < 300; iter++) {
        int nd = (int)tu_rng_int(&rng, 1, 5);
        int64_t sz[MFT_MAX_DIMS];
        for (int d = 0; d < nd; d++) sz[d] = tu_rng_int(&rng, 1, 6);
        if (tu_rng_int(&rng, 0, 2) == 0) sz[tu_rng_int(&rng, 0, nd - 1)] = tu_rng_int(&rng, 17, 300);
        int dim = (int)tu_rng_int(&rng, -nd, nd - 1);
        int ol = (int)tu_rng_int(&rng, 0, 2), gl = (int)tu_rng_int(&rng, 0, 2);
        if (nd < 3 || nd > 5) {
            if (ol == 1) ol = 0;
            if (gl == 1) gl = 0;
        }
        mft_dtype dt = tu_rng_int(&rng, 0, 2) == 0 ? MFT_F64 : MFT_F32;
        bool use_ref = tu_rng_int(&rng, 0, 3) == 0;
        mft_tensor *x = mft_randn(nd, sz, dt, MFT_CONTIGUOUS, (uint64_t)iter + 5);
        mft_tensor *g0 = mft_randn(nd, sz, dt, MFT_CONTIGUOUS, (uint64_t)iter + 900);
        mft_tensor *g = sb_in_layout(g0, gl, &rng);
        for (int lg = 0; lg < 2; lg++) {
            mft_tensor *y0 = lg ? mft_log_softmax(x, dim) : mft_softmax(x, dim);
            mft_tensor *o = sb_in_layout(y0, ol, &rng);
            const char *op = lg ? "log_softmax_backward" : "softmax_backward";
            if (use_ref) {
                mft_kernel_fn f = mft__softmax_backward_reference(lg, dt);
                mft_dispatch_register(op, MFT_CONTIGUOUS, dt, "test.ref", f);
                mft_dispatch_register(op, MFT_CHANNELS_LAST, dt, "test.ref", f);
            }
            mft_tensor *r = lg ? mft_log_softmax_backward(g, o, dim) : mft_softmax_backward(g, o, dim);
            const char *k = mft_dispatch_last()->kernel;
            char kname[96];
            snprintf(kname, sizeof kname, "%s", k ? k : "");
            if (use_ref) {
                mft_dispatch_unregister(op, MFT_CONTIGUOUS, dt);
                mft_dispatch_unregister(op, MFT_CHANNELS_LAST, dt);
            }
            ncases++;
            mft_format want = nd >= 3 && nd <= 5 ? mft_tensor_format(o) : MFT_CONTIGUOUS;
            bool ok = r != NULL;
            double e = 0;
            if (ok) {
                double *nv = sb_naive(g, o, dim, lg != 0);
                e = sb_err(r, nv);
                free(nv);
                ok = e <= (dt == MFT_F32 ? 1e-5 : 1e-13) && mft_tensor_is_contiguous(r, want) &&
                     mft_tensor_dtype(r) == dt && tu_has_sizes(r, nd, sz);
                char wk[96];
                if (use_ref) snprintf(wk, sizeof wk, "test.ref");
                else
                    snprintf(wk, sizeof wk, "%s.%s.%s", op,
                             want == MFT_CHANNELS_LAST ? "nhwc" : "nchw",
                             dt == MFT_F32 ? "f32" : "f64.ref");
                ok = ok && strcmp(kname, wk) == 0;
            }
            if (!ok && nfail++ < 5) {
                char buf[160];
                tu_describe(o, buf, sizeof buf, true);
                CHECK_MSG(false, "iter %d %s dim %d out %s (grad layout %d, kernel %s): err %g %s",
                          iter, op, dim, buf, gl, kname, e, r ? "" : mft_last_error_message());
            }
            mft_tensor_release(r);
            mft_tensor_release(o);
            mft_tensor_release(y0);
        }
        mft_tensor_release(x);
        mft_tensor_release(g0);
        mft_tensor_release(g);
    }
    CHECK_EQ_I(nfail, 0);
    CHECK_EQ_I(ncases, 600);
}

/* sum(softmax(x) * R) differentiated numerically (F64) */
static void test_backward_finite_differences(void) {
    int64_t sz[4] = {2, 3, 2, 4};
    for (int lg = 0; lg < 2; lg++)
        for (int dim = 0; dim < 4; dim++) {
            mft_tensor *x = mft_randn(4, sz, MFT_F64, MFT_CHANNELS_LAST, 11);
            mft_tensor *R = mft_randn(4, sz, MFT_F64, MFT_CONTIGUOUS, 12);
            mft_tensor *y = lg ? mft_log_softmax(x, dim) : mft_softmax(x, dim);
            mft_tensor *gx = lg ? mft_log_softmax_backward(R, y, dim) : mft_softmax_backward(R, y, dim);
            double worst = 0;
            int64_t idx[4] = {0};
            for (int64_t i = 0; gx && i < 48; i++) {
                const double h = 1e-6, v = mft_tensor_get(x, idx);
                double l[2];
                for (int s = 0; s < 2; s++) {
                    mft_tensor_set(x, idx, v + (s ? -h : h));
                    mft_tensor *yy = lg ? mft_log_softmax(x, dim) : mft_softmax(x, dim);
                    double *ya = sb_array(yy), *ra = sb_array(R);
                    l[s] = 0;
                    for (int64_t q = 0; q < 48; q++) l[s] += ya[q] * ra[q];
                    free(ya);
                    free(ra);
                    mft_tensor_release(yy);
                }
                mft_tensor_set(x, idx, v);
                double fd = (l[0] - l[1]) / (2 * h);
                worst = fmax(worst, fabs(fd - mft_tensor_get(gx, idx)) / (1 + fabs(fd)));
                tu_next_index(4, sz, idx);
            }
            CHECK_MSG(gx && worst < 1e-7, "%s dim %d: finite differences off by %g",
                      lg ? "log_softmax" : "softmax", dim, worst);
            mft_tensor_release(gx);
            mft_tensor_release(y);
            mft_tensor_release(R);
            mft_tensor_release(x);
        }
}

static void test_backward_threads_and_errors(void) {
    int64_t sz[4] = {4, 40, 30, 30};
    const int old = mft_num_threads();
    for (int cl = 0; cl < 2; cl++)
        for (int dim = 0; dim < 4; dim++) {
            mft_format f = cl ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
            mft_tensor *y = mft_rand(4, sz, MFT_F32, f, 1), *g = mft_randn(4, sz, MFT_F32, f, 2);
            mft_tensor *r[2][2];
            for (int t = 0; t < 2; t++) {
                mft_set_num_threads(t + 1);
                r[t][0] = mft_softmax_backward(g, y, dim);
                r[t][1] = mft_log_softmax_backward(g, y, dim);
            }
            for (int k = 0; k < 2; k++) {
                CHECK(r[0][k] && r[1][k] &&
                      memcmp(mft_tensor_data(r[0][k]), mft_tensor_data(r[1][k]),
                             (size_t)mft_tensor_numel(y) * 4) == 0);
                mft_tensor_release(r[0][k]);
                mft_tensor_release(r[1][k]);
            }
            mft_tensor_release(y);
            mft_tensor_release(g);
        }
    mft_set_num_threads(old);

    int64_t s2[2] = {2, 3}, s3[2] = {3, 2};
    mft_tensor *o = mft_ones(2, s2, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *o64 = mft_ones(2, s2, MFT_F64, MFT_CONTIGUOUS);
    mft_tensor *oi = mft_ones(2, s2, MFT_I32, MFT_CONTIGUOUS);
    mft_tensor *ob = mft_ones(2, s3, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *s0 = mft_full(0, NULL, MFT_F32, MFT_CONTIGUOUS, 1.0);
    TU_EXPECT_NULL_(mft_softmax_backward(NULL, o, 0), "NULL grad_out");
    CHECK_ERR(MFT_ERR_NULL, "mft_softmax_backward: argument 'grad_out'");
    TU_EXPECT_NULL_(mft_log_softmax_backward(o, NULL, 0), "NULL out");
    CHECK_ERR(MFT_ERR_NULL, "mft_log_softmax_backward: argument 'out'");
    TU_EXPECT_NULL_(mft_softmax_backward(ob, o, 0), "shape");
    CHECK_ERR(MFT_ERR_SHAPE, "mft_softmax_backward: grad_out has shape [3,2]");
    TU_EXPECT_NULL_(mft_softmax_backward(o, o, 2), "dim");
    CHECK_ERR(MFT_ERR_DIM, "mft_softmax_backward: dim 2");
    TU_EXPECT_NULL_(mft_log_softmax_backward(o, o, -3), "dim");
    CHECK_ERR(MFT_ERR_DIM, "mft_log_softmax_backward");
    TU_EXPECT_NULL_(mft_softmax_backward(oi, oi, 0), "dtype");
    CHECK_ERR(MFT_ERR_DTYPE, "mft_softmax_backward: dtype i32");
    TU_EXPECT_NULL_(mft_softmax_backward(o, o64, 0), "mixed dtype");
    CHECK_ERR(MFT_ERR_DTYPE, "mft_softmax_backward: grad_out has dtype f32");
    TU_EXPECT_NULL_(mft_log_softmax_backward(s0, s0, 0), "rank 0");
    CHECK_ERR(MFT_ERR_RANK, "mft_log_softmax_backward: needs a tensor of rank >= 1");
    mft_tensor_release(o);
    mft_tensor_release(o64);
    mft_tensor_release(oi);
    mft_tensor_release(ob);
    mft_tensor_release(s0);
}

int main(void) {
    RUN(test_backward_vs_naive);
    RUN(test_backward_finite_differences);
    RUN(test_backward_threads_and_errors);
    RUN(test_golden);
    RUN(test_layout_rule);
    RUN(test_fast_vs_reference);
    RUN(test_dispatch);
    RUN(test_rows_sum_to_one_and_log);
    RUN(test_special_values);
    RUN(test_threads_bit_identical);
    RUN(test_scopes);
    RUN(test_errors);
    TEST_MAIN_END();
}
