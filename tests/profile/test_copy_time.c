/* tests/profile/test_copy_time.c — time in the profiler's conversion table
 * (Note [Conversion copy time] in tensor/events.c) and the marks on kernels:
 *   - a conversion's time is its copy's: more than 0 and at most the wall
 *     time of the whole call measured here around it; 0 when nothing timed
 *     the copy (profiler and verbose log off); the table's conversion row
 *     and per-cause summary show it, the trace's conversion has copy_us and
 *     the copy event names the conversion it made;
 *   - copies that are no conversion (mean's F64 accumulator cast into its
 *     result, a user's mft_copy_) are listed as internal copies with their
 *     call site and module, and the copies that made conversions (reshape's)
 *     are not;
 *   - the kernel table marks a user-registered kernel "[user]" and explains
 *     the mark; built-in kernels carry none.
 * Counts follow from the ops run (which copy, which conversion); times are
 * bounded by this file's own clock. */
#define _POSIX_C_SOURCE 200809L
#include <time.h>
#include "harness.h"
#include "profile_util.h"

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}



/* The first line of text starting with prefix, copied into buf ("" none). */
static const char *find_row(const char *text, const char *prefix, char *buf, size_t len) {
    buf[0] = 0;
    for (const char *l = text; l && *l;) {
        const char *e = strchr(l, '\n');
        size_t n = e ? (size_t)(e - l) : strlen(l);
        if (strncmp(l, prefix, strlen(prefix)) == 0) {
            snprintf(buf, len, "%.*s", (int)n, l);
            return buf;
        }
        l = e ? e + 1 : NULL;
    }
    return buf;
}

/* Lines of text starting with prefix that contain needle. */
static int count_rows_with(const char *text, const char *prefix, const char *needle) {
    int n = 0;
    char line[512];
    for (const char *l = text; l && *l;) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        snprintf(line, sizeof line, "%.*s", (int)len, l);
        if (strncmp(line, prefix, strlen(prefix)) == 0 && strstr(line, needle)) n++;
        l = e ? e + 1 : NULL;
    }
    return n;
}

static void drop_line(const char *line, void *ctx) {
    (void)line;
    (void)ctx;
}

/* The section of text that starts at head (NULL when absent). */
static const char *section(const char *text, const char *head) { return strstr(text, head); }

/* An explicit conversion of a 4x16x32x32 NCHW tensor to channels_last. */
static void test_conversion_time(void) {
    const int64_t sz[4] = {4, 16, 32, 32};
    mft_tensor *x = mft_rand(4, sz, MFT_F32, MFT_CONTIGUOUS, 1);
    /* not timed: nothing reads the clock */
    mft_tensor *c0 = mft_to_format(x, MFT_CHANNELS_LAST);
    CHECK(c0 && mft_conversion_last()->ns == 0);
    CHECK_EQ_I(mft_profile_begin(), MFT_OK);
    const int64_t t0 = now_ns();
    mft_tensor *c = mft_to_format(x, MFT_CHANNELS_LAST);
    const int64_t t1 = now_ns();
    CHECK_EQ_I(mft_profile_end(), MFT_OK);
    const mft_conversion_info ci = *mft_conversion_last();
    CHECK(c && ci.cause == MFT_CAUSE_EXPLICIT && !strcmp(ci.op, "to_format"));
    CHECK_EQ_I(ci.bytes, 4 * 16 * 32 * 32 * 4);
    CHECK_MSG(ci.ns > 0 && ci.ns <= t1 - t0, "copy %lld ns, call %lld ns", (long long)ci.ns,
              (long long)(t1 - t0));
    char *t = table_text(), row[512];
    if (t) {
        /* "explicit  no     to_format  NCHW -> NHWC  1  0.262  <ms>  -  -" */
        find_row(t, "explicit  no     to_format ", row, sizeof row);
        char cause[16], hidden[8], op[32], from[16], arrow[4], to[16];
        long long count = 0;
        double mb = 0, ms = -1;
        CHECK_MSG(sscanf(row, "%15s %7s %31s %15s %3s %15s %lld %lf %lf", cause, hidden, op, from,
                         arrow, to, &count, &mb, &ms) == 9,
                  "row '%s' in\n%s", row, t);
        CHECK(count == 1 && !strcmp(from, "NCHW") && !strcmp(to, "NHWC"));
        CHECK_NEAR(ms, (double)ci.ns * 1e-6, 0.0005 + 1e-9);
        char summary[96];
        snprintf(summary, sizeof summary, "explicit 1 (0.26 MB, %.3f ms)", (double)ci.ns * 1e-6);
        CHECK_MSG(strstr(t, summary) != NULL, "'%s' not in\n%s", summary, t);
        CHECK_MSG(count_rows_with(t, "copy (explicit) ", "NCHW -> NHWC") == 1, "%s", t);
        CHECK_MSG(!section(t, "\ninternal copies:"), "%s", t);
    }
    free(t);
    char *j = trace_text();
    if (j) {
        char want[64];
        snprintf(want, sizeof want, "\"copy_us\":%.3f", (double)ci.ns * 1e-3);
        CHECK_MSG(strstr(j, want) != NULL, "%s not in\n%s", want, j);
        CHECK(strstr(j, "\"user\":false,\"conversion\":\"explicit\"") != NULL);
    }
    free(j);
    /* timed by the verbose log alone: the same pairing */
    mft_set_log_callback(drop_line, NULL);
    mft_set_verbose(1);
    mft_tensor *c2 = mft_to_format(x, MFT_CHANNELS_LAST);
    mft_set_verbose(0);
    mft_set_log_callback(NULL, NULL);
    CHECK(c2 && mft_conversion_last()->ns > 0);
    mft_profile_clear();
    mft_tensor_release(c2);
    mft_tensor_release(c);
    mft_tensor_release(c0);
    mft_tensor_release(x);
}

/* mean of an NHWC tensor without keepdim accumulates in F64 and copies the
 * result into its F32 output: one copy, no conversion. A reshape of an NHWC
 * tensor to rank 2 copies as a RESHAPE conversion. A user's mft_copy_ is a
 * copy, no conversion. */
static void test_internal_copies(void) {
    const int64_t sz[4] = {8, 32, 4, 4}, r2[2] = {8, 512};
    const int dims[2] = {2, 3};
    mft_scope_begin();
    mft_tensor *x = mft_rand(4, sz, MFT_F32, MFT_CHANNELS_LAST, 2);
    mft_tensor *d = mft_empty(4, sz, MFT_F32, MFT_CHANNELS_LAST);
    mft_conversion_counts_reset();
    CHECK_EQ_I(mft_profile_begin(), MFT_OK);
    mft_module_path_push("head", "Pool");
    mft_tensor *m = MFT_AT(mft_mean(x, 2, dims, false));
    const int mean_line = __LINE__ - 1;
    mft_module_path_pop();
    mft_tensor *r = mft_reshape(x, 2, r2);
    mft_status st = MFT_AT(mft_copy_(d, x));
    const int copy_line = __LINE__ - 1;
    CHECK_EQ_I(mft_profile_end(), MFT_OK);
    CHECK(m && r && st == MFT_OK);
    mft_conversion_counts cc = mft_conversion_counts_get();
    CHECK_EQ_I(cc.total, 1);
    CHECK_EQ_I(cc.count[MFT_CAUSE_RESHAPE], 1);
    char *t = table_text(), row[512];
    if (t) {
        const char *in = section(t, "\ninternal copies: 2 (");
        CHECK_MSG(in != NULL, "%s", t);
        if (in) {
            char site[160], prefix[32];
            snprintf(site, sizeof site, "%s:%d", __FILE__, mean_line);
            snprintf(prefix, sizeof prefix, "NHWC -> NCHW ");
            find_row(in + 1, prefix, row, sizeof row);
            CHECK_MSG(strstr(row, site) && strstr(row, " head (Pool)"), "row '%s' in\n%s", row,
                      t);
            CHECK_MSG(strstr(row, "                  1 "), "row '%s'", row);
            snprintf(site, sizeof site, "%s:%d", __FILE__, copy_line);
            find_row(in + 1, "NHWC -> NHWC ", row, sizeof row);
            const size_t rl = strlen(row);
            CHECK_MSG(strstr(row, site) && rl > 2 && !strcmp(row + rl - 2, " -"),
                      "row '%s' in\n%s", row, t);
            CHECK_MSG(!strstr(in, "reshape"), "%s", t);
        }
        /* reshape's copy made its conversion: timed there, named in the kernel table */
        find_row(t, "reshape   no     reshape ", row, sizeof row);
        CHECK_MSG(row[0], "%s", t);
        find_row(t, "copy (reshape) ", row, sizeof row);
        CHECK_MSG(row[0], "%s", t);
        /* three copy kernel runs in all: two plain, one for the conversion */
        CHECK_MSG(count_rows_with(t, "copy  ", "copy.iter") == 2, "%s", t);
    }
    free(t);
    mft_profile_clear();
    mft_scope_end();
}

static void user_avg(const mft_kernel_args *a) { mft_fill_(a->outputs[0], 1.0); }

static void test_user_kernel_marked(void) {
    const int64_t sz[4] = {1, 8, 4, 4}, k[2] = {2, 2}, pad[2] = {0, 0};
    mft_tensor *x = mft_rand(4, sz, MFT_F32, MFT_CHANNELS_LAST, 3);
    CHECK(mft_dispatch_register("avg_pool2d", MFT_CHANNELS_LAST, MFT_F32, "test.avg.nhwc",
                                user_avg) == MFT_OK);
    CHECK_EQ_I(mft_profile_begin(), MFT_OK);
    mft_tensor *y = mft_avg_pool2d(x, k, NULL, pad, false, true, 0);
    CHECK(mft_dispatch_unregister("avg_pool2d", MFT_CHANNELS_LAST, MFT_F32) == MFT_OK);
    mft_tensor *z = mft_avg_pool2d(x, k, NULL, pad, false, true, 0);
    CHECK_EQ_I(mft_profile_end(), MFT_OK);
    CHECK(y && z);
    char *t = table_text(), row[512];
    if (t) {
        find_row(t, "avg_pool2d             test.avg.nhwc [user] ", row, sizeof row);
        CHECK_MSG(row[0], "%s", t);
        CHECK_EQ_I(count_rows_with(t, "avg_pool2d ", "[user]"), 1);
        CHECK_EQ_I(count_rows_with(t, "avg_pool2d ", "avg_pool2d.nhwc"), 1); /* built-in */
        CHECK(strstr(t, "; [user]: a kernel registered with mft_dispatch_register\n") != NULL);
    }
    free(t);
    mft_profile_clear();
    /* without user kernels no footnote */
    CHECK_EQ_I(mft_profile_begin(), MFT_OK);
    mft_tensor *w = mft_avg_pool2d(x, k, NULL, pad, false, true, 0);
    CHECK_EQ_I(mft_profile_end(), MFT_OK);
    t = table_text();
    CHECK(t && !strstr(t, "[user]"));
    free(t);
    mft_profile_clear();
    mft_tensor_release(w);
    mft_tensor_release(z);
    mft_tensor_release(y);
    mft_tensor_release(x);
}

int main(void) {
    RUN(test_conversion_time);
    RUN(test_internal_copies);
    RUN(test_user_kernel_marked);
    TEST_MAIN_END();
}
