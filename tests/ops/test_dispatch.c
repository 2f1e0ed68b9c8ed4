/* tests/ops/test_dispatch.c — the kernel registry and dispatcher: every row of
 * registry (mft/registry.h) marked DISPATCHED has a reference kernel (CONTIGUOUS, F32) in the listed table;
 * registering, overriding and unregistering user kernels (and their
 * errors); the verbose log line through a replaced callback; strict mode;
 * the conversion counter. Op-specific dispatch checks live with each op's
 * tests (test_pool.c). */
#include "harness.h"
#include "ops_internal.h"

/* The whole listing, malloc'ed (NULL on failure). */
static char *list_all(void) {
    size_t need = mft_dispatch_list(NULL, 0);
    char *buf = malloc(need + 1);
    if (buf) mft_dispatch_list(buf, need + 1);
    return buf;
}

/* Whether a line of the listing has exactly this op, format and dtype. */
static bool listed(const char *list, const char *op, const char *fmt, const char *dt) {
    for (const char *p = list; p && *p;) {
        char o[64], f[32], d[16];
        if (sscanf(p, "%63s %31s %15s", o, f, d) == 3 && !strcmp(o, op) && !strcmp(f, fmt) &&
            !strcmp(d, dt))
            return true;
        p = strchr(p, '\n');
        if (p) p++;
    }
    return false;
}

static void test_every_op_has_a_reference(void) {
    char *buf = list_all();
    CHECK(buf != NULL);
    int ndispatched = 0;
    for (int i = 0; i < mft_op_count() && buf; i++) {
        const mft_op_info *op = mft_op_at(i);
        if (!op->dispatched) continue;
        ndispatched++;
        CHECK_MSG(listed(buf, op->name, "CONTIGUOUS", "f32"),
                  "op %s has no CONTIGUOUS f32 kernel in:\n%s", op->name, buf);
    }
    CHECK(ndispatched >= 36); /* the registry marks the kernel-table ops */
    /* truncation follows snprintf */
    char small[8];
    size_t need = mft_dispatch_list(NULL, 0);
    CHECK(need > 0 && buf && strlen(buf) == need);
    CHECK(mft_dispatch_list(small, sizeof small) == need && strlen(small) == sizeof small - 1);
    free(buf);
}

static int g_user_calls = 0;
static void user_avg(const mft_kernel_args *a) {
    g_user_calls++;
    mft_fill_(a->outputs[0], 42.0);
}

static int g_log_lines = 0;
static char g_last_line[256];
static void capture_log(const char *line, void *ctx) {
    (void)ctx;
    g_log_lines++;
    snprintf(g_last_line, sizeof g_last_line, "%s", line);
}

static void test_user_kernel_and_log(void) {
    int64_t sz[4] = {1, 8, 4, 4};
    int64_t k[2] = {2, 2};
    mft_tensor *x = mft_rand(4, sz, MFT_F32, MFT_CHANNELS_LAST, 3);
    CHECK(mft_dispatch_register("avg_pool2d", MFT_CHANNELS_LAST, MFT_F32, "user.avg.nhwc", user_avg) == MFT_OK);
    char *buf = list_all();
    CHECK(buf && strstr(buf, "user.avg.nhwc [user]") != NULL);
    free(buf);
    mft_set_log_callback(capture_log, NULL);
    mft_set_verbose(1);
    mft_tensor *y = mft_avg_pool2d(x, k, NULL, (int64_t[2]){0, 0}, false, true, 0);
    mft_set_verbose(0);
    mft_set_log_callback(NULL, NULL);
    CHECK(y != NULL && g_user_calls == 1);
    const mft_dispatch_info *d = mft_dispatch_last();
    CHECK(strcmp(d->op, "avg_pool2d") == 0 && strcmp(d->kernel, "user.avg.nhwc") == 0 && d->user);
    CHECK(d->kernel_format == MFT_CHANNELS_LAST && d->conversions == 0);
    int64_t idx[4] = {0, 3, 1, 1};
    CHECK(mft_tensor_get(y, idx) == 42.0);
    CHECK(g_log_lines == 1 && strstr(g_last_line, "avg_pool2d,user.avg.nhwc") != NULL);
    CHECK(mft_dispatch_unregister("avg_pool2d", MFT_CHANNELS_LAST, MFT_F32) == MFT_OK);
    mft_tensor *z = mft_avg_pool2d(x, k, NULL, (int64_t[2]){0, 0}, false, true, 0);
    CHECK(z != NULL && g_user_calls == 1 && !mft_dispatch_last()->user);
    CHECK(mft_tensor_get(z, idx) != 42.0);
    mft_tensor_release(x);
    mft_tensor_release(y);
    mft_tensor_release(z);
}

static void test_registry_errors(void) {
    CHECK(mft_dispatch_register("no_such_op", MFT_CONTIGUOUS, MFT_F32, "x", user_avg) == MFT_ERR_INVALID);
    CHECK_ERR(MFT_ERR_INVALID, "no_such_op");
    CHECK(mft_dispatch_register(NULL, MFT_CONTIGUOUS, MFT_F32, "x", user_avg) == MFT_ERR_NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_dispatch_register");
    CHECK(mft_dispatch_register("avg_pool2d", MFT_CONTIGUOUS, MFT_F32, "x", NULL) == MFT_ERR_NULL);
    CHECK_ERR(MFT_ERR_NULL, "fn is NULL");
    CHECK(mft_dispatch_register("avg_pool2d", (mft_format)7, MFT_F32, "x", user_avg) == MFT_ERR_FORMAT);
    CHECK_ERR(MFT_ERR_FORMAT, "format 7");
    CHECK(mft_dispatch_register("avg_pool2d", MFT_CONTIGUOUS, (mft_dtype)9, "x", user_avg) == MFT_ERR_DTYPE);
    CHECK_ERR(MFT_ERR_DTYPE, "dtype 9");
    CHECK(mft_dispatch_unregister("avg_pool2d", MFT_CONTIGUOUS, MFT_F64) == MFT_ERR_INVALID);
    CHECK_ERR(MFT_ERR_INVALID, "no user kernel");
}

static void test_conversion_counter_and_strict(void) {
    /* F64 channels_last pooling: only CONTIGUOUS F64 kernels are built in */
    int64_t sz[4] = {2, 3, 6, 6}, k[2] = {2, 2};
    mft_tensor *x = mft_rand(4, sz, MFT_F64, MFT_CHANNELS_LAST, 5);
    mft_dispatch_conversions_reset();
    mft_tensor *y = mft_avg_pool2d(x, k, NULL, (int64_t[2]){0, 0}, false, true, 0);
    CHECK(y != NULL);
    const mft_dispatch_info *d = mft_dispatch_last();
    CHECK(d->format == MFT_CHANNELS_LAST && d->kernel_format == MFT_CONTIGUOUS && d->conversions == 2);
    CHECK(mft_dispatch_conversions() == 2);
    CHECK(mft_tensor_is_contiguous(y, MFT_CHANNELS_LAST)); /* converted back to the format docs/spec.md §4 gives */
    mft_dispatch_set_strict(true);
    mft_tensor *z = mft_avg_pool2d(x, k, NULL, (int64_t[2]){0, 0}, false, true, 0);
    mft_dispatch_set_strict(false);
    CHECK(z == NULL);
    CHECK_ERR(MFT_ERR_UNSUPPORTED, "strict mode");
    CHECK(mft_dispatch_conversions() == 2);
    mft_tensor_release(x);
    mft_tensor_release(y);
}

/* Usage counts: two F64 NHWC pools (fallback, 2 conversions each) and one
 * F32 NCHW pool; the listing puts the most-called kernel first. */
static void test_usage_stats(void) {
    int64_t sz[4] = {2, 3, 6, 6}, k[2] = {2, 2};
    mft_tensor *x = mft_rand(4, sz, MFT_F64, MFT_CHANNELS_LAST, 5);
    mft_tensor *f = mft_rand(4, sz, MFT_F32, MFT_CONTIGUOUS, 6);
    mft_dispatch_stats_reset();
    CHECK(mft_dispatch_stats(NULL, 0) == 0);
    mft_tensor *y1 = mft_avg_pool2d(f, k, NULL, NULL, false, true, 0);
    const char *k_f32 = mft_dispatch_last()->kernel;
    mft_tensor *y2 = mft_avg_pool2d(x, k, NULL, NULL, false, true, 0);
    const char *k_f64 = mft_dispatch_last()->kernel;
    mft_tensor *y3 = mft_avg_pool2d(x, k, NULL, NULL, false, true, 0);
    CHECK(y1 && y2 && y3);
    char buf[1024];
    size_t need = mft_dispatch_stats(buf, sizeof buf);
    CHECK(need > 0 && need < sizeof buf);
    char *l1 = strstr(buf, k_f64), *l2 = strstr(buf, k_f32);
    CHECK(l1 && l2 && l1 < l2); /* 2 calls before 1 call */
    CHECK(l1 && strstr(l1, "2 calls") && strstr(l1, "4 conversions"));
    CHECK(l2 && strstr(l2, "1 calls") && strstr(l2, "0 conversions"));
    char small[8];
    CHECK(mft_dispatch_stats(small, sizeof small) == need); /* truncated, length reported */
    CHECK(strlen(small) == sizeof small - 1);
    mft_dispatch_stats_reset();
    CHECK(mft_dispatch_stats(buf, sizeof buf) == 0 && buf[0] == 0);
    mft_tensor *all[] = {x, f, y1, y2, y3};
    for (int i = 0; i < 5; i++) mft_tensor_release(all[i]);
}

int main(void) {
    RUN(test_every_op_has_a_reference);
    RUN(test_user_kernel_and_log);
    RUN(test_registry_errors);
    RUN(test_conversion_counter_and_strict);
    RUN(test_usage_stats);
    TEST_MAIN_END();
}
