/* tests/profile/test_modules.c — the module path (Note [Module path] in
 * tensor/naming.c) in what mft reports. The paths are pushed here by hand
 * (mft_module_path_push / pop), as a module's forward does:
 *   - a conversion records the path and kind current when it happened
 *     (mft_conversion_last, the MFT_VERBOSE line), as copies that outlive a
 *     pop; outside modules it records "";
 *   - profile rows: kernel rows and conversion rows of the table name the
 *     module, the Chrome trace has module and module_kind in each event's
 *     args (null outside modules), the same op in two modules is two rows;
 *   - tape nodes keep their forward's path: backward kernels and the gradient
 *     conversion of a node carry it (backward called outside any module),
 *     under the caller's path when backward is called inside one, and the
 *     path after mft_backward is the one before it;
 *   - the reorder budget's message names the module of the first offending
 *     conversion.
 * Expected modules and counts follow from which op ran inside which push. */
#include "harness.h"
#include "profile_util.h"

/* ------------------------------------------------------------------ helpers */
/* Captured lines starting with prefix; *with: those whose module= field is
 * exactly module ("" = no module field). */
static int v_count(const char *prefix, const char *module, int *with) {
    int n = 0, w = 0;
    for (int i = 0; i < g_nlines; i++) {
        if (strncmp(g_lines[i], prefix, strlen(prefix)) != 0) continue;
        n++;
        const char *m = strstr(g_lines[i], ",module=");
        char got[256] = "";
        if (m) {
            m += 8;
            size_t k = strcspn(m, ",");
            snprintf(got, sizeof got, "%.*s", (int)k, m);
        }
        if (strcmp(got, module) == 0) w++;
    }
    *with = w;
    return n;
}



static int count_str(const char *text, const char *needle) {
    int n = 0;
    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

/* Lines of text that start with prefix and end with suffix. */
static int count_rows(const char *text, const char *prefix, const char *suffix) {
    int n = 0;
    for (const char *l = text; l && *l;) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l), pl = strlen(prefix), sl = strlen(suffix);
        if (len >= pl + sl && strncmp(l, prefix, pl) == 0 && strncmp(l + len - sl, suffix, sl) == 0)
            n++;
        l = e ? e + 1 : NULL;
    }
    return n;
}

/* ------------------------------------------------------------------ tests */
/* conv2d of an NCHW input with a channels-last weight packs the input
 * (an OPERAND conversion, Note [Conversions and their causes]). */
static void test_conversion_records_path(void) {
    const int64_t xs[4] = {2, 3, 6, 6}, ws[4] = {4, 3, 3, 3}, one[2] = {1, 1};
    mft_scope_begin();
    mft_tensor *x = mft_rand(4, xs, MFT_F32, MFT_CONTIGUOUS, 1);
    mft_tensor *w = mft_rand(4, ws, MFT_F32, MFT_CHANNELS_LAST, 2);
    const int64_t seq0 = mft_conversion_last()->seq;
    v_start();
    CHECK(mft_module_path_push("body", "Sequential") == MFT_OK);
    CHECK(mft_module_path_push("1", "Conv2d(3, 4)") == MFT_OK);
    mft_tensor *y = mft_conv2d(x, w, NULL, one, one, one, 1);
    mft_module_path_pop();
    mft_module_path_pop();
    v_stop();
    CHECK(y != NULL);
    const mft_conversion_info *ci = mft_conversion_last();
    CHECK_EQ_I(ci->seq, seq0 + 1);
    CHECK(ci->cause == MFT_CAUSE_OPERAND && !strcmp(ci->op, "conv2d"));
    /* copies: the path has been popped since */
    CHECK_MSG(!strcmp(ci->module, "body.1") && !strcmp(ci->module_kind, "Conv2d(3, 4)"),
              "module '%s' kind '%s'", ci->module, ci->module_kind);
    CHECK(!strcmp(mft_module_path(), ""));
    int with;
    CHECK_EQ_I(v_count("mft_verbose,conversion,operand,conv2d,", "body.1", &with), 1);
    CHECK_EQ_I(with, 1);
    CHECK_EQ_I(v_count("mft_verbose,dispatch,conv2d,", "body.1", &with), 1);
    CHECK_EQ_I(with, 1);
    /* outside modules: "" and no module field */
    v_start();
    mft_tensor *c = mft_to_format(x, MFT_CHANNELS_LAST);
    v_stop();
    CHECK(c && !strcmp(mft_conversion_last()->module, "") &&
          !strcmp(mft_conversion_last()->module_kind, ""));
    CHECK_EQ_I(v_count("mft_verbose,conversion,explicit,", "", &with), 1);
    CHECK_EQ_I(with, 1);
    mft_scope_end();
}

/* The same conversion-making conv in module body.1, relu in body.2 and in
 * body.3 (two rows), add outside: the table's kernel rows, its conversion
 * row and the trace's events say which module each ran in. */
static void test_profile_rows(void) {
    const int64_t xs[4] = {2, 3, 6, 6}, ws[4] = {4, 3, 3, 3}, one[2] = {1, 1};
    mft_scope_begin();
    mft_tensor *x = mft_rand(4, xs, MFT_F32, MFT_CONTIGUOUS, 1);
    mft_tensor *w = mft_rand(4, ws, MFT_F32, MFT_CHANNELS_LAST, 2);
    CHECK_EQ_I(mft_profile_begin(), MFT_OK);
    mft_module_path_push("body", "Sequential");
    mft_module_path_push("1", "Conv2d(3, 4)");
    mft_tensor *y = mft_conv2d(x, w, NULL, one, one, one, 1);
    mft_module_path_pop();
    mft_module_path_push("2", "ReLU");
    mft_tensor *r = mft_relu(y);
    mft_module_path_pop();
    mft_module_path_push("3", NULL); /* no kind */
    mft_tensor *r2 = mft_relu(r);
    mft_module_path_pop();
    mft_module_path_pop();
    mft_tensor *s = mft_add(r2, y);
    CHECK_EQ_I(mft_profile_end(), MFT_OK);
    CHECK(s != NULL);
    char *t = table_text();
    if (t) {
        CHECK_MSG(count_rows(t, "conv2d ", "  body.1 (Conv2d(3, 4))") == 1, "%s", t);
        CHECK_MSG(count_rows(t, "copy (operand) ", "  body.1 (Conv2d(3, 4))") == 1, "%s", t);
        CHECK_MSG(count_rows(t, "relu ", "  body.2 (ReLU)") == 1, "%s", t);
        CHECK_MSG(count_rows(t, "relu ", "  body.3") == 1, "%s", t);
        CHECK_MSG(count_rows(t, "add ", "  -") == 1, "%s", t);
        CHECK_MSG(count_rows(t, "operand   yes    conv2d ", " body.1 (Conv2d(3, 4))") == 1, "%s",
                  t);
    }
    free(t);
    char *j = trace_text();
    if (j) {
        /* copy + conversion + conv2d in body.1, relu in body.2 and body.3, add: null */
        CHECK_EQ_I(count_str(j, "\"module\":\"body.1\",\"module_kind\":\"Conv2d(3, 4)\"}"), 3);
        CHECK_EQ_I(count_str(j, "\"module\":\"body.2\",\"module_kind\":\"ReLU\"}"), 1);
        CHECK_EQ_I(count_str(j, "\"module\":\"body.3\",\"module_kind\":\"\"}"), 1);
        CHECK_EQ_I(count_str(j, "\"module\":null}"), 1);
        CHECK_EQ_I(mft_profile_event_count(), 6);
    }
    free(j);
    mft_profile_clear();
    mft_scope_end();
}

/* Many distinct paths: each event keeps its own (the profiler's path table
 * grows past its first sizes). */
static void test_many_paths(void) {
    const int64_t s[1] = {8};
    mft_tensor *x = mft_rand(1, s, MFT_F32, MFT_CONTIGUOUS, 3);
    CHECK_EQ_I(mft_profile_begin(), MFT_OK);
    for (int i = 0; i < 300; i++) {
        char name[16];
        snprintf(name, sizeof name, "%d", i);
        mft_module_path_push("layers", "ModuleList");
        mft_module_path_push(name, i % 2 ? "ReLU" : NULL);
        mft_tensor_release(mft_relu(x));
        mft_module_path_pop();
        mft_module_path_pop();
    }
    CHECK_EQ_I(mft_profile_end(), MFT_OK);
    char *j = trace_text();
    if (j) {
        int ok = 0;
        for (int i = 0; i < 300; i++) {
            char want[96];
            snprintf(want, sizeof want, "\"module\":\"layers.%d\",\"module_kind\":\"%s\"}", i,
                     i % 2 ? "ReLU" : "");
            ok += count_str(j, want) == 1;
        }
        CHECK_EQ_I(ok, 300);
    }
    free(j);
    mft_profile_clear();
    mft_tensor_release(x);
}

/* z = x + y recorded inside net.0 (Linear), the loss outside; x NHWC, y
 * NCHW, so y's gradient is converted in add's backward. */
static void test_backward_carries_forward_path(void) {
    const int64_t sz[4] = {2, 3, 4, 4};
    mft_scope_begin();
    mft_tensor *x = mft_rand(4, sz, MFT_F32, MFT_CHANNELS_LAST, 1);
    mft_tensor *y = mft_rand(4, sz, MFT_F32, MFT_CONTIGUOUS, 2);
    mft_tensor_set_requires_grad(x, true);
    mft_tensor_set_requires_grad(y, true);
    for (int inside = 0; inside < 2; inside++) {
        mft_tensor_zero_grad(x);
        mft_tensor_zero_grad(y);
        CHECK_EQ_I(mft_tape_begin(), MFT_OK);
        mft_module_path_push("net", "Net");
        mft_module_path_push("0", "Linear");
        mft_tensor *z = mft_add(x, y);
        mft_module_path_pop();
        mft_module_path_pop();
        mft_tensor *loss = mft_sum(z, 0, NULL, false);
        if (inside) mft_module_path_push("outer", "Trainer");
        CHECK_EQ_I(mft_profile_begin(), MFT_OK);
        v_start();
        CHECK_EQ_I(mft_backward(loss, NULL), MFT_OK);
        v_stop();
        CHECK_EQ_I(mft_profile_end(), MFT_OK);
        CHECK_EQ_I(mft_module_depth(), inside ? 1 : 0);
        CHECK(!strcmp(mft_module_path(), inside ? "outer" : ""));
        if (inside) mft_module_path_pop();
        CHECK(mft_tape_end() == MFT_OK);
        const char *node_path = inside ? "outer.net.0" : "net.0";
        const char *loss_path = inside ? "outer" : "";
        const mft_conversion_info *ci = mft_conversion_last();
        CHECK(ci->cause == MFT_CAUSE_GRADIENT && !strcmp(ci->op, "add"));
        CHECK_MSG(!strcmp(ci->module, node_path) && !strcmp(ci->module_kind, "Linear"),
                  "module '%s' kind '%s'", ci->module, ci->module_kind);
        int with;
        CHECK_EQ_I(v_count("mft_verbose,conversion,gradient,add,", node_path, &with), 1);
        CHECK_EQ_I(with, 1);
        /* add hands the gradient to both inputs: its copies run in net.0;
         * sum's backward in the loss's place */
        int n_node, n_loss;
        const int copies = v_count("mft_verbose,exec,copy,", node_path, &n_node);
        v_count("mft_verbose,exec,copy,", loss_path, &n_loss);
        CHECK(n_node >= 1 && n_loss >= 1 && n_node + n_loss == copies);
        char *t = table_text();
        if (t) {
            char suffix[64];
            snprintf(suffix, sizeof suffix, " %s (Linear)", node_path);
            CHECK_MSG(count_rows(t, "gradient  yes    add ", suffix) == 1, "%s", t);
        }
        free(t);
        mft_profile_clear();
    }
    mft_scope_end();
}

/* The budget names the module of the first conversion over the limit. */
static void test_budget_names_module(void) {
    const int64_t xs[4] = {1, 3, 5, 5}, ws[4] = {2, 3, 3, 3}, one[2] = {1, 1};
    mft_scope_begin();
    mft_tensor *x = mft_rand(4, xs, MFT_F32, MFT_CONTIGUOUS, 1);
    mft_tensor *w = mft_rand(4, ws, MFT_F32, MFT_CHANNELS_LAST, 2);
    CHECK_EQ_I(mft_reorder_budget_begin(0), MFT_OK);
    mft_module_path_push("stem", "Conv2d(3, 2)");
    mft_tensor *y = mft_conv2d(x, w, NULL, one, one, one, 1);
    mft_module_path_pop();
    CHECK(y != NULL);
    CHECK_EQ_I(mft_reorder_budget_end(), MFT_ERR_BUDGET);
    CHECK_ERR(MFT_ERR_BUDGET, "operand conversion by conv2d (NCHW -> NHWC, 300 bytes) no call "
                              "site (wrap the call in MFT_AT) in module stem (Conv2d(3, 2))");
    /* outside modules: no module words */
    CHECK_EQ_I(mft_reorder_budget_begin(0), MFT_OK);
    mft_tensor *y2 = mft_conv2d(x, w, NULL, one, one, one, 1);
    CHECK(y2 != NULL);
    CHECK_EQ_I(mft_reorder_budget_end(), MFT_ERR_BUDGET);
    CHECK(!strstr(mft_last_error_message(), "module"));
    mft_clear_error();
    mft_scope_end();
}

int main(void) {
    RUN(test_conversion_records_path);
    RUN(test_profile_rows);
    RUN(test_many_paths);
    RUN(test_backward_carries_forward_path);
    RUN(test_budget_names_module);
    TEST_MAIN_END();
}
