/* tests/ops/test_dispatch_decline.c — user kernels that handle only some calls
 * of their key (Note [Declining kernels] in mft/dispatch.h): a 1x1-conv
 * kernel registered with an applicability test runs for 1x1 / stride 1
 * convolutions and leaves every other convolution to the built-in (under
 * both strict levels), each result equal to a naive convolution computed
 * here; the test sees the operands before any conversion; a kernel that
 * always declines leaves results, kernel names and conversion counts as if
 * it were not registered (a fallback too); exact and ANY user kernels
 * decline in order; declines are reported by mft_dispatch_last(), the usage
 * counts, the verbose log and the listing. */
#include "test_util.h"

/* ---------------------------------------------------------------- reference */
/* y[n,co,oh,ow] = b[co] + sum x[n,ci,oh*s-p+kh, ow*s-p+kw] * w[co,ci,kh,kw]
 * (groups 1, dilation 1), in double through mft_tensor_get: independent of
 * every kernel. */
static double naive_conv_at(const mft_tensor *x, const mft_tensor *w, const mft_tensor *b,
                            const int64_t *o, int64_t s, int64_t p) {
    const int64_t *xs = mft_tensor_sizes(x), *ws = mft_tensor_sizes(w);
    double acc = b ? mft_tensor_get(b, &o[1]) : 0.0;
    for (int64_t ci = 0; ci < xs[1]; ci++)
        for (int64_t kh = 0; kh < ws[2]; kh++)
            for (int64_t kw = 0; kw < ws[3]; kw++) {
                const int64_t ih = o[2] * s - p + kh, iw = o[3] * s - p + kw;
                if (ih < 0 || ih >= xs[2] || iw < 0 || iw >= xs[3]) continue;
                const int64_t xi[4] = {o[0], ci, ih, iw}, wi[4] = {o[1], ci, kh, kw};
                acc += mft_tensor_get(x, xi) * mft_tensor_get(w, wi);
            }
    return acc;
}

/* max |y - naive conv| over every element of y (y's sizes checked) */
static double conv_err(const mft_tensor *y, const mft_tensor *x, const mft_tensor *w,
                       const mft_tensor *b, int64_t s, int64_t p) {
    if (!y) return INFINITY;
    const int64_t *xs = mft_tensor_sizes(x), *ws = mft_tensor_sizes(w), *ys = mft_tensor_sizes(y);
    const int64_t want[4] = {xs[0], ws[0], (xs[2] + 2 * p - ws[2]) / s + 1,
                             (xs[3] + 2 * p - ws[3]) / s + 1};
    if (!tu_has_sizes(y, 4, want)) return INFINITY;
    double err = 0.0;
    int64_t o[4] = {0, 0, 0, 0};
    do {
        double e = fabs(mft_tensor_get(y, o) - naive_conv_at(x, w, b, o, s, p));
        if (e > err) err = e;
    } while (tu_next_index(4, ys, o));
    return err;
}

/* Every element of a and b equal (same sizes): bitwise for finite values. */
static bool same_values(const mft_tensor *a, const mft_tensor *b) {
    if (!a || !b || mft_tensor_ndim(a) != mft_tensor_ndim(b)) return false;
    const int nd = mft_tensor_ndim(a);
    if (!tu_has_sizes(b, nd, mft_tensor_sizes(a))) return false;
    if (mft_tensor_numel(a) == 0) return true;
    int64_t i[MFT_MAX_DIMS] = {0};
    do {
        if (mft_tensor_get(a, i) != mft_tensor_get(b, i)) return false;
    } while (tu_next_index(nd, mft_tensor_sizes(a), i));
    return true;
}

/* ---------------------------------------------------------------- the 1x1 kernel */
/* What the applicability test saw, for the checks. */
typedef struct probe {
    int asked, taken;
    bool x_packed_nhwc; /* inputs[0] as the test saw it */
    int64_t w_sizes[4];
} probe;
static int g_conv1x1_runs = 0;

static bool conv1x1_applies(const mft_kernel_args *a, void *ctx) {
    probe *pr = ctx;
    const mft_conv_params *p = a->params;
    const int64_t *ws = mft_tensor_sizes(a->inputs[1]);
    pr->asked++;
    pr->x_packed_nhwc = mft_tensor_is_contiguous(a->inputs[0], MFT_CHANNELS_LAST);
    memcpy(pr->w_sizes, ws, sizeof pr->w_sizes);
    const bool yes = p->nspatial == 2 && ws[2] == 1 && ws[3] == 1 && p->groups == 1 &&
                     p->stride[0] == 1 && p->stride[1] == 1 && p->padding[0] == 0 &&
                     p->padding[1] == 0 && p->dilation[0] == 1 && p->dilation[1] == 1;
    pr->taken += yes;
    return yes;
}

/* 1x1 convolution, stride 1, NHWC: every pixel's C_out outputs are a
 * (C_out x C_in) matrix times its C_in inputs. x and y packed NHWC (the
 * dispatcher guarantees it), w any strides (mft_conv_params). */
static void conv1x1_nhwc(const mft_kernel_args *a) {
    const mft_conv_params *p = a->params;
    const mft_tensor *x = a->inputs[0], *w = a->inputs[1];
    const int64_t *xs = mft_tensor_sizes(x), *wst = mft_tensor_strides(w);
    const int64_t ci_n = xs[1], co_n = mft_tensor_sizes(w)[0], pix = xs[0] * xs[2] * xs[3];
    const float *in = mft_tensor_data(x), *wd = mft_tensor_data(w);
    const float *bd = p->bias ? mft_tensor_data(p->bias) : NULL;
    const int64_t bst = p->bias ? mft_tensor_strides(p->bias)[0] : 0;
    float *out = mft_tensor_data(a->outputs[0]);
    g_conv1x1_runs++;
    for (int64_t q = 0; q < pix; q++)
        for (int64_t co = 0; co < co_n; co++) {
            float acc = bd ? bd[co * bst] : 0.0f;
            for (int64_t ci = 0; ci < ci_n; ci++) acc += in[q * ci_n + ci] * wd[co * wst[0] + ci * wst[1]];
            out[q * co_n + co] = acc;
        }
}

static const char *const K1x1 = "test.conv1x1.nhwc";

static void test_1x1_runs_others_declined(void) {
    probe pr = {0};
    const mft_kernel_reg reg = {"conv2d", MFT_CHANNELS_LAST, MFT_F32, K1x1, conv1x1_nhwc,
                                conv1x1_applies, &pr};
    TU_OK_S(mft_dispatch_register_ex(&reg));
    const int64_t xs[4] = {2, 5, 6, 7}, w1[4] = {4, 5, 1, 1}, w3[4] = {4, 5, 3, 3}, bs[1] = {4};
    mft_tensor *x = mft_randn(4, xs, MFT_F32, MFT_CHANNELS_LAST, 11);
    mft_tensor *wa = mft_randn(4, w1, MFT_F32, MFT_CONTIGUOUS, 12);
    mft_tensor *wb = mft_randn(4, w3, MFT_F32, MFT_CONTIGUOUS, 13);
    mft_tensor *b = mft_randn(1, bs, MFT_F32, MFT_CONTIGUOUS, 14);
    const int64_t one[2] = {1, 1}, zero[2] = {0, 0}, two[2] = {2, 2};
    for (int level = MFT_STRICT_FALLBACK; level <= MFT_STRICT_ALL; level++) {
        TU_OK_S(mft_dispatch_set_strict_level((mft_strict_level)level));
        g_conv1x1_runs = 0;
        pr = (probe){0};
        /* 1x1, stride 1: the user kernel */
        mft_tensor *y1 = mft_conv2d(x, wa, b, one, zero, one, 1);
        const mft_dispatch_info d1 = *mft_dispatch_last();
        CHECK(y1 != NULL && g_conv1x1_runs == 1 && pr.asked == 1 && pr.taken == 1);
        CHECK(d1.user && !strcmp(d1.kernel, K1x1) && d1.declines == 0 && !strcmp(d1.declined, ""));
        CHECK(d1.kernel_format == MFT_CHANNELS_LAST && d1.conversions == 0);
        CHECK(pr.x_packed_nhwc && pr.w_sizes[0] == 4 && pr.w_sizes[2] == 1);
        CHECK_MSG(conv_err(y1, x, wa, b, 1, 0) < 1e-4, "1x1 error %g", conv_err(y1, x, wa, b, 1, 0));
        /* 3x3 and 1x1 stride 2: declined, the built-in NHWC kernel runs */
        mft_tensor *y3 = mft_conv2d(x, wb, b, one, one, one, 1);
        const mft_dispatch_info d3 = *mft_dispatch_last();
        mft_tensor *y2 = mft_conv2d(x, wa, NULL, two, zero, one, 1);
        const mft_dispatch_info d2 = *mft_dispatch_last();
        CHECK(y3 && y2 && g_conv1x1_runs == 1 && pr.asked == 3 && pr.taken == 1);
        CHECK(!d3.user && d3.kernel_format == MFT_CHANNELS_LAST && d3.conversions == 0);
        CHECK(d3.declines == 1 && !strcmp(d3.declined, K1x1) && strstr(d3.kernel, "conv2d.nhwc"));
        CHECK(!d2.user && d2.declines == 1 && !strcmp(d2.declined, K1x1));
        CHECK_MSG(conv_err(y3, x, wb, b, 1, 1) < 1e-4, "3x3 error %g", conv_err(y3, x, wb, b, 1, 1));
        CHECK_MSG(conv_err(y2, x, wa, NULL, 2, 0) < 1e-4, "stride-2 error %g",
                  conv_err(y2, x, wa, NULL, 2, 0));
        CHECK(mft_tensor_is_contiguous(y1, MFT_CHANNELS_LAST) &&
              mft_tensor_is_contiguous(y3, MFT_CHANNELS_LAST));
        mft_tensor_release(y1);
        mft_tensor_release(y2);
        mft_tensor_release(y3);
    }
    TU_OK_S(mft_dispatch_set_strict_level(MFT_STRICT_OFF));
    /* the declined 3x3 gives the built-in's bits: the same call unregistered */
    mft_tensor *y3 = mft_conv2d(x, wb, b, one, one, one, 1);
    TU_OK_S(mft_dispatch_unregister("conv2d", MFT_CHANNELS_LAST, MFT_F32));
    mft_tensor *r3 = mft_conv2d(x, wb, b, one, one, one, 1);
    CHECK(same_values(y3, r3) && mft_dispatch_last()->declines == 0);
    mft_tensor *all[] = {x, wa, wb, b, y3, r3};
    for (int i = 0; i < 6; i++) mft_tensor_release(all[i]);
}

/* The test sees the caller's operands, the kernel the converted ones: a
 * CONTIGUOUS x with a CHANNELS_LAST weight gives a CHANNELS_LAST conv
 * (docs/spec.md §4), x is converted for the kernel only after the test took
 * the call. */
static bool g_kernel_saw_packed = false;
static void conv1x1_checking(const mft_kernel_args *a) {
    g_kernel_saw_packed = mft_tensor_is_contiguous(a->inputs[0], MFT_CHANNELS_LAST);
    conv1x1_nhwc(a);
}

static void test_applies_sees_unconverted_operands(void) {
    probe pr = {0};
    const mft_kernel_reg reg = {"conv2d", MFT_CHANNELS_LAST, MFT_F32, K1x1, conv1x1_checking,
                                conv1x1_applies, &pr};
    TU_OK_S(mft_dispatch_register_ex(&reg));
    const int64_t xs[4] = {1, 3, 4, 5}, ws[4] = {2, 3, 1, 1};
    mft_tensor *x = mft_randn(4, xs, MFT_F32, MFT_CONTIGUOUS, 21);
    mft_tensor *w = mft_randn(4, ws, MFT_F32, MFT_CHANNELS_LAST, 22);
    g_conv1x1_runs = 0;
    mft_tensor *y = mft_conv2d(x, w, NULL, NULL, NULL, NULL, 1);
    CHECK(y && g_conv1x1_runs == 1 && pr.taken == 1);
    CHECK(!pr.x_packed_nhwc && g_kernel_saw_packed);
    CHECK(mft_dispatch_last()->user && mft_dispatch_last()->conversions == 1);
    CHECK(conv_err(y, x, w, NULL, 1, 0) < 1e-4);
    TU_OK_S(mft_dispatch_unregister("conv2d", MFT_CHANNELS_LAST, MFT_F32));
    mft_tensor_release(x);
    mft_tensor_release(w);
    mft_tensor_release(y);
}

/* ---------------------------------------------------------------- always declining */
static int g_never_runs = 0, g_never_asked = 0;
static void never_kernel(const mft_kernel_args *a) {
    g_never_runs++;
    mft_fill_(a->outputs[0], 42.0);
}
static bool never_applies(const mft_kernel_args *a, void *ctx) {
    (void)a;
    (void)ctx;
    g_never_asked++;
    return false;
}

typedef struct run_record {
    mft_tensor *y;
    char kernel[96];
    mft_format kernel_format;
    int conversions;
    bool user;
} run_record;

static run_record pool_run(const mft_tensor *x) {
    const int64_t k[2] = {2, 2};
    run_record r;
    memset(&r, 0, sizeof r);
    r.y = mft_avg_pool2d(x, k, NULL, NULL, false, true, 0);
    const mft_dispatch_info *d = mft_dispatch_last();
    snprintf(r.kernel, sizeof r.kernel, "%s", d->kernel);
    r.kernel_format = d->kernel_format;
    r.conversions = d->conversions;
    r.user = d->user;
    return r;
}

static void test_always_declining_is_unregistered(void) {
    const int64_t sz[4] = {2, 3, 6, 6};
    for (int dt = MFT_F32; dt <= MFT_F64; dt++) {
        /* f32: the built-in NHWC kernel; f64: no NHWC kernel, a fallback */
        mft_tensor *x = mft_rand(4, sz, (mft_dtype)dt, MFT_CHANNELS_LAST, 31 + (uint64_t)dt);
        run_record before = pool_run(x);
        const mft_kernel_reg reg = {"avg_pool2d", MFT_CHANNELS_LAST, (mft_dtype)dt, "test.never",
                                    never_kernel, never_applies, NULL};
        TU_OK_S(mft_dispatch_register_ex(&reg));
        g_never_runs = g_never_asked = 0;
        mft_dispatch_conversions_reset();
        run_record with = pool_run(x);
        CHECK(g_never_runs == 0 && g_never_asked == 1);
        CHECK(same_values(before.y, with.y));
        CHECK(!strcmp(before.kernel, with.kernel) && !with.user);
        CHECK(before.kernel_format == with.kernel_format);
        CHECK(before.conversions == with.conversions &&
              mft_dispatch_conversions() == with.conversions);
        CHECK(dt == MFT_F32 ? with.conversions == 0 : with.conversions == 2);
        CHECK(mft_dispatch_last()->declines == 1 && !strcmp(mft_dispatch_last()->declined, "test.never"));
        if (dt == MFT_F64) { /* strict: the fallback is refused, the decline named */
            mft_dispatch_set_strict(true);
            mft_tensor *z = pool_run(x).y;
            mft_dispatch_set_strict(false);
            CHECK(z == NULL);
            CHECK(strstr(mft_last_error_message(), "test.never declined") != NULL);
            CHECK_ERR(MFT_ERR_UNSUPPORTED, "strict mode forbids the fallback");
        }
        TU_OK_S(mft_dispatch_unregister("avg_pool2d", MFT_CHANNELS_LAST, (mft_dtype)dt));
        mft_tensor_release(x);
        mft_tensor_release(before.y);
        mft_tensor_release(with.y);
    }
}

/* ---------------------------------------------------------------- exact, then ANY */
static int g_any_runs = 0;
static void any_kernel(const mft_kernel_args *a) {
    g_any_runs++;
    mft_fill_(a->outputs[0], 7.0);
}
static bool any_applies(const mft_kernel_args *a, void *ctx) {
    (void)a;
    return *(const bool *)ctx;
}

static void test_exact_then_any_decline_in_order(void) {
    const int64_t sz[4] = {1, 2, 4, 4}, idx[4] = {0, 1, 1, 1};
    mft_tensor *x = mft_rand(4, sz, MFT_F32, MFT_CHANNELS_LAST, 41);
    bool any_takes = true;
    const mft_kernel_reg exact = {"avg_pool2d", MFT_CHANNELS_LAST, MFT_F32, "test.exact.never",
                                  never_kernel, never_applies, NULL};
    const mft_kernel_reg any = {"avg_pool2d", MFT_FORMAT_ANY, MFT_F32, "test.any", any_kernel,
                                any_applies, &any_takes};
    TU_OK_S(mft_dispatch_register_ex(&exact));
    TU_OK_S(mft_dispatch_register_ex(&any));
    g_never_runs = g_any_runs = 0;
    run_record r1 = pool_run(x);
    CHECK(r1.y && g_any_runs == 1 && g_never_runs == 0 && r1.user && !strcmp(r1.kernel, "test.any"));
    CHECK(r1.y && mft_tensor_get(r1.y, idx) == 7.0 && r1.kernel_format == MFT_FORMAT_ANY);
    CHECK(mft_dispatch_last()->declines == 1 &&
          !strcmp(mft_dispatch_last()->declined, "test.exact.never"));
    any_takes = false; /* both decline: the built-in NHWC kernel */
    run_record r2 = pool_run(x);
    CHECK(r2.y && g_any_runs == 1 && !r2.user && strstr(r2.kernel, "avg_pool2d.nhwc"));
    CHECK(mft_dispatch_last()->declines == 2 &&
          !strcmp(mft_dispatch_last()->declined, "test.exact.never"));
    char list[8192];
    mft_dispatch_list(list, sizeof list);
    CHECK(strstr(list, "test.exact.never [user, conditional]") != NULL);
    CHECK(strstr(list, "test.any [user, conditional]") != NULL);
    TU_OK_S(mft_dispatch_unregister("avg_pool2d", MFT_CHANNELS_LAST, MFT_F32));
    TU_OK_S(mft_dispatch_unregister("avg_pool2d", MFT_FORMAT_ANY, MFT_F32));
    mft_tensor_release(x);
    mft_tensor_release(r1.y);
    mft_tensor_release(r2.y);
}

/* ---------------------------------------------------------------- reporting */
#define LOG_LINES 8
static int g_nlines = 0;
static char g_lines[LOG_LINES][256];
static void capture(const char *line, void *ctx) {
    (void)ctx;
    if (g_nlines < LOG_LINES) snprintf(g_lines[g_nlines], sizeof g_lines[0], "%s", line);
    g_nlines++;
}

static void test_declines_are_reported(void) {
    probe pr = {0};
    const mft_kernel_reg reg = {"conv2d", MFT_CHANNELS_LAST, MFT_F32, K1x1, conv1x1_nhwc,
                                conv1x1_applies, &pr};
    TU_OK_S(mft_dispatch_register_ex(&reg));
    const int64_t xs[4] = {1, 4, 5, 5}, w1[4] = {3, 4, 1, 1}, w3[4] = {3, 4, 3, 3};
    mft_tensor *x = mft_randn(4, xs, MFT_F32, MFT_CHANNELS_LAST, 51);
    mft_tensor *wa = mft_randn(4, w1, MFT_F32, MFT_CONTIGUOUS, 52);
    mft_tensor *wb = mft_randn(4, w3, MFT_F32, MFT_CONTIGUOUS, 53);
    mft_dispatch_stats_reset();
    g_nlines = 0;
    mft_set_log_callback(capture, NULL);
    mft_set_verbose(1);
    mft_tensor *y3 = mft_conv2d(x, wb, NULL, NULL, NULL, NULL, 1);
    const int lines_3x3 = g_nlines;
    mft_tensor *y1 = mft_conv2d(x, wa, NULL, NULL, NULL, NULL, 1);
    mft_tensor *y3b = mft_conv2d(x, wb, NULL, NULL, NULL, NULL, 1);
    mft_set_verbose(0);
    mft_set_log_callback(NULL, NULL);
    CHECK(y3 && y1 && y3b);
    /* 3x3: a decline line, then the dispatch line of the built-in */
    CHECK_EQ_I(lines_3x3, 2);
    CHECK_MSG(strstr(g_lines[0], "mft_verbose,decline,conv2d,test.conv1x1.nhwc,CHANNELS_LAST,f32"),
              "line '%s'", g_lines[0]);
    CHECK_MSG(strstr(g_lines[1], "mft_verbose,dispatch,conv2d,conv2d.nhwc"), "line '%s'", g_lines[1]);
    /* 1x1: one dispatch line naming the user kernel */
    CHECK_EQ_I(g_nlines, 5);
    CHECK_MSG(strstr(g_lines[2], "dispatch,conv2d,test.conv1x1.nhwc") && strstr(g_lines[2], ",user"),
              "line '%s'", g_lines[2]);
    char stats[2048];
    mft_dispatch_stats(stats, sizeof stats);
    const char *u = strstr(stats, K1x1), *bi = strstr(stats, "conv2d.nhwc");
    CHECK_MSG(u && strstr(u, "1 calls") && strstr(u, "2 declined"), "stats:\n%s", stats);
    CHECK_MSG(bi && strstr(bi, "2 calls") && strstr(bi, "0 declined"), "stats:\n%s", stats);
    CHECK(bi && u && bi < u); /* most-called first */
    /* names stay valid once the kernel is gone (interned) */
    TU_OK_S(mft_dispatch_unregister("conv2d", MFT_CHANNELS_LAST, MFT_F32));
    mft_dispatch_stats(stats, sizeof stats);
    CHECK(strstr(stats, K1x1) != NULL);
    mft_dispatch_stats_reset();
    mft_tensor *all[] = {x, wa, wb, y3, y1, y3b};
    for (int i = 0; i < 6; i++) mft_tensor_release(all[i]);
}

int main(void) {
    RUN(test_1x1_runs_others_declined);
    RUN(test_applies_sees_unconverted_operands);
    RUN(test_always_declining_is_unregistered);
    RUN(test_exact_then_any_decline_in_order);
    RUN(test_declines_are_reported);
    TEST_MAIN_END();
}
