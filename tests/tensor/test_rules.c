/* tests/tensor/test_rules.c — the format rules as data (mft/rules.h): the table is
 * complete (every public op of the headers is a registry row and its rule
 * deviations point at real rows of docs/deviations.md, the op registry and
 * the public headers name the same ops, mft_explain_format
 * names the rule and the operand that decide (expectations derived by hand
 * from docs/spec.md §3-§4), and every tensor's provenance chain tells which op, rule,
 * operand and call site gave it its tag. */
#include <ctype.h>
#include "harness.h"
#include "test_util.h"

#define SRC_ROOT MFT_TEST_DATA_DIR "/../.."

static const int64_t S4[4] = {2, 3, 5, 5};

static bool has(const char *hay, const char *needle) { return hay && strstr(hay, needle) != NULL; }

/* ----------------------------------------------------------- table checks */
static void test_rows_well_formed(void) {
    CHECK(mft_rule_count() > 20);
    CHECK(mft_rule_at(-1) == NULL && mft_rule_at(mft_rule_count()) == NULL);
    size_t n = 0;
    unsigned char *dev = tu_read_file(SRC_ROOT "/docs/deviations.md", &n);
    CHECK(dev != NULL);
    for (int i = 0; i < mft_rule_count(); i++) {
        const mft_format_rule *r = mft_rule_at(i);
        CHECK(r && r->name[0] && r->op_class[0]);
        CHECK_MSG((r->deviation != 0) == (r->pytorch[0] != '\0'), "row %s\n", r->name);
        CHECK(strcmp(mft_rule_output_name(r->output), "?") != 0);
        CHECK(strcmp(mft_rule_ambiguity_name(r->ambiguity), "?") != 0);
        CHECK(strcmp(mft_rule_backward_name(r->backward), "?") != 0);
        if (r->deviation && dev) {
            char key[16];
            snprintf(key, sizeof key, "\n| %d |", r->deviation);
            CHECK_MSG(has((const char *)dev, key), "row %s cites deviation %d, absent\n", r->name,
                      r->deviation);
        }
    }
    free(dev);
}

/* Collects the names NAME of `MFT_API mft_tensor *mft_NAME(` (functions
 * that return a new tensor) and of `MFT_API <type> mft_NAME_backward(`. */
static int scan_header_ops(const char *text, char names[][48], int max) {
    int n = 0;
    for (const char *p = text; (p = strstr(p, "MFT_API ")) && n < max;) {
        p += strlen("MFT_API ");
        const char *eol = strchr(p, '\n'), *paren = strchr(p, '(');
        if (!paren || (eol && eol < paren)) continue;
        const char *q = paren;
        while (q > p && (isalnum((unsigned char)q[-1]) || q[-1] == '_')) q--;
        size_t k = (size_t)(paren - q);
        bool tensor = !strncmp(p, "mft_tensor *", 12) && q == p + 12;
        bool backward = k > 9 && !strncmp(paren - 9, "_backward", 9);
        if (k < 5 || k > 47 + 4 || strncmp(q, "mft_", 4) || (!tensor && !backward)) continue;
        memcpy(names[n], q + 4, k - 4);
        names[n++][k - 4] = '\0';
    }
    return n;
}

static const char *const HEADERS[] = {"ops", "conv", "pool", "norm", "resize", "softmax", "shape",
                                      "linalg", "loss", "tensor", "data", "nn", "layout"};
#define NHEADERS (sizeof HEADERS / sizeof *HEADERS)

static char *read_header(size_t h) {
    char path[256];
    snprintf(path, sizeof path, SRC_ROOT "/include/mft/%s.h", HEADERS[h]);
    size_t n = 0;
    unsigned char *text = tu_read_file(path, &n);
    CHECK_MSG(text != NULL, "%s\n", path);
    if (text) text[n] = '\0';
    return (char *)text;
}

/* Every public op of the headers is a registry row (its in-place and out
 * forms resolve to the in-place rule), and every row is a public op. */
static void test_every_public_op_is_a_registry_row(void) {
    /* results that are not an op's output: references, grads, a model's
     * forward (made of rows of its own) */
    static const char *const not_ops[] = {"tensor_retain", "tensor_grad", "scope_keep",
                                          "module_forward"};
    static char names[512][48];
    char *text[NHEADERS];
    int total = 0;
    for (size_t h = 0; h < NHEADERS; h++) {
        text[h] = read_header(h);
        if (!text[h]) continue;
        int k = scan_header_ops(text[h], names, 512);
        for (int i = 0; i < k; i++) {
            bool skip = false;
            for (size_t j = 0; j < sizeof not_ops / sizeof *not_ops; j++)
                skip = skip || !strcmp(names[i], not_ops[j]);
            if (skip) continue;
            total++;
            CHECK_MSG(mft_op_find(names[i]) != NULL, "public op mft_%s (include/mft/%s.h) has no "
                      "row in the registry (include/mft/registry.h)\n", names[i], HEADERS[h]);
            CHECK_MSG(mft_rule_for_op(names[i]) != NULL, "public op %s has no rule row\n", names[i]);
        }
    }
    CHECK(total > 100); /* the scan found the headers' ops */
    /* every row: a unique name, a rule, and (but backward kernels' keys) a
     * public function of that name */
    for (int i = 0; i < mft_op_count(); i++) {
        const mft_op_info *op = mft_op_at(i);
        CHECK(op && op->name[0] && op->family[0] && op->rule);
        CHECK_MSG(mft_op_find(op->name) == op, "registry row %s appears twice\n", op->name);
        CHECK(mft_rule_for_op(op->name) == op->rule);
        CHECK_MSG((op->kind == MFT_OP_KIND_BACKWARD || op->kind == MFT_OP_KIND_KERNEL) ==
                      (strstr(op->name, "_backward") != NULL),
                  "row %s: kind BACKWARD or KERNEL iff a backward function\n", op->name);
        if (op->kind == MFT_OP_KIND_KERNEL) {
            CHECK_MSG(op->dispatched, "row %s: a kernel key that is not dispatched\n", op->name);
            continue;
        }
        char decl[80];
        snprintf(decl, sizeof decl, "mft_%s(", op->name);
        bool found = false;
        for (size_t h = 0; h < NHEADERS; h++) {
            if (!text[h]) continue;
            for (const char *p = text[h]; !found && (p = strstr(p + 1, decl));)
                found = p[-1] == '*' || p[-1] == ' ';
            /* the uniform elementwise ops are declared from the registry by
             * macro (mft/ops.h) */
            found = found || (op->sig == MFT_OP_SIG_UNARY || op->sig == MFT_OP_SIG_SCALAR ||
                              op->sig == MFT_OP_SIG_BINARY);
        }
        CHECK_MSG(found, "registry row %s: no public function mft_%s in include/mft/\n", op->name,
                  op->name);
    }
    for (size_t h = 0; h < NHEADERS; h++) free(text[h]);
    CHECK(mft_op_find("mft_conv2d") == mft_op_find("conv2d") && mft_op_find("conv2d"));
    CHECK(mft_op_find("relu_") == NULL && mft_op_find(NULL) == NULL);
    CHECK(mft_op_at(-1) == NULL && mft_op_at(mft_op_count()) == NULL);
    /* in-place and _out forms resolve to the in-place row */
    const mft_format_rule *ip = mft_rule_for_op("mft_relu_");
    CHECK(ip && ip->output == MFT_RULE_DESTINATION);
    CHECK(mft_rule_for_op("add_out") == ip && mft_rule_for_op("clamp_") == ip);
    CHECK(mft_rule_for_op("mft_conv2d") == mft_rule_for_op("conv2d"));
    CHECK(mft_rule_for_op("no_such_op") == NULL && mft_rule_for_op("_") == NULL);
    CHECK(mft_rule_for_op("no_such_op_out") == NULL);
    CHECK(mft_rule_for_op(NULL) == NULL);
}

static void test_markdown(void) {
    size_t need = mft_rules_markdown(NULL, 0);
    char *md = malloc(need + 1);
    CHECK(md && mft_rules_markdown(md, need + 1) == need && strlen(md) == need);
    int rows = 0;
    for (const char *p = md; p && (p = strstr(p, "\n| ")); p++) rows++;
    /* the rules, the blocked clauses of the rules, the registry (+ the header lines) */
    CHECK_EQ_I(rows, mft_rule_count() + 1 + mft_rule_count() + 1 + mft_op_count() + 1);
    CHECK(has(md, "| conv2d | NATIVE | ") && has(md, "| pad | FALLBACK | "));
    CHECK(has(md, "| unary | NATIVE | "));
    CHECK(has(md, "- **VIEW**: views at block boundaries only"));
    for (int i = 0; i < mft_rule_count(); i++) {
        const mft_format_rule *r = mft_rule_at(i);
        CHECK_MSG(r->blocked < MFT_RULE_BLK_COUNT && r->blocked_note && r->blocked_note[0],
                  "row %s: no blocked clause", r->name);
    }
    CHECK(!strcmp(mft_rule_blocked_name(MFT_RULE_BLK_FALLBACK), "FALLBACK") &&
          !strcmp(mft_rule_blocked_name(MFT_RULE_BLK_COUNT), "?"));
    CHECK(has(md, "| conv2d | conv | NONE | 2 | 1 | DIFF | yes | conv2d |"));
    CHECK(has(md, "| conv2d | conv | ANY_CL | RULE | INPUT_FORMAT | x, weight |"));
    CHECK(has(md, "#9: contiguous whatever the input's layout"));
    /* truncated output keeps the full length and terminates */
    char small[32];
    CHECK(mft_rules_markdown(small, sizeof small) == need && strlen(small) == sizeof small - 1);
    free(md);
}

/* ----------------------------------------------------------- explain */
static void test_explain_conv(void) {
    mft_scope_begin();
    mft_tensor *x = mft_zeros(4, S4, MFT_F32, MFT_CONTIGUOUS);
    const int64_t ws[4] = {4, 3, 3, 3};
    mft_tensor *w = mft_zeros(4, ws, MFT_F32, MFT_CHANNELS_LAST);
    mft_tensor *wn = mft_zeros(4, ws, MFT_F32, MFT_CONTIGUOUS);
    const mft_tensor *in[2] = {x, w};
    mft_format_explanation ex;
    CHECK(mft_explain_format("conv2d", 2, in, MFT_CONTIGUOUS, &ex) == MFT_OK);
    CHECK(ex.format == MFT_CHANNELS_LAST && ex.operand == 1);
    CHECK(ex.rule == mft_rule_for_op("conv2d"));
    CHECK_MSG(has(ex.text, "CHANNELS_LAST: rule ANY_CL (conv2d): operand 1 (weight) is CHANNELS_LAST"),
              "%s\n", ex.text);
    const mft_tensor *in2[2] = {x, wn};
    CHECK(mft_explain_format("mft_conv2d", 2, in2, MFT_CONTIGUOUS, &ex) == MFT_OK);
    CHECK(ex.format == MFT_CONTIGUOUS && ex.operand == -1);
    CHECK_MSG(has(ex.text, "neither x, weight is CHANNELS_LAST"), "%s\n", ex.text);
    /* a declared format that is not one is refused, even where ignored */
    CHECK(mft_explain_format("conv2d", 2, in2, (mft_format)7, &ex) == MFT_ERR_FORMAT);
    CHECK(has(mft_last_error_message(), "mft_explain_format: declared format 7"));
    CHECK(mft_explain_format("empty", 0, NULL, (mft_format)-1, &ex) == MFT_ERR_FORMAT);
    mft_clear_error();
    /* the real op agrees with the explanation */
    const int64_t st[2] = {1, 1}, pd[2] = {1, 1}, dl[2] = {1, 1};
    mft_tensor *y = mft_conv2d(x, w, NULL, st, pd, dl, 1);
    CHECK(y && mft_tensor_format(y) == MFT_CHANNELS_LAST);
    mft_scope_end();
}

static void test_explain_elementwise_cat_pool(void) {
    mft_scope_begin();
    mft_tensor *a = mft_zeros(4, S4, MFT_F32, MFT_CHANNELS_LAST);
    mft_tensor *b = mft_zeros(4, S4, MFT_F32, MFT_CONTIGUOUS);
    mft_format_explanation ex;
    const mft_tensor *ab[2] = {a, b}, *ba[2] = {b, a};
    CHECK(mft_explain_format("add", 2, ab, MFT_CONTIGUOUS, &ex) == MFT_OK);
    CHECK(ex.format == MFT_CHANNELS_LAST && ex.operand == 0);
    CHECK_MSG(has(ex.text, "operand 0 (a) first"),
              "%s\n", ex.text);
    CHECK(mft_explain_format("add", 2, ba, MFT_CONTIGUOUS, &ex) == MFT_OK);
    CHECK(ex.format == MFT_CONTIGUOUS);
    /* cat: CL then NCHW -> CONTIGUOUS, operand 1 disagrees */
    CHECK(mft_explain_format("cat", 2, ab, MFT_CONTIGUOUS, &ex) == MFT_OK);
    CHECK(ex.format == MFT_CONTIGUOUS && ex.operand == 1);
    CHECK_MSG(has(ex.text, "operand 1 is CONTIGUOUS, unlike the inputs before it"), "%s\n", ex.text);
    mft_tensor *c = mft_cat(2, ab, 1);
    CHECK(c && mft_tensor_format(c) == MFT_CONTIGUOUS);
    const mft_tensor *aa[2] = {a, a};
    CHECK(mft_explain_format("stack", 2, aa, MFT_CONTIGUOUS, &ex) == MFT_OK);
    CHECK(ex.format == MFT_CHANNELS_LAST);
    /* matmul: always contiguous */
    CHECK(mft_explain_format("matmul", 2, ab, MFT_CONTIGUOUS, &ex) == MFT_OK);
    CHECK(ex.format == MFT_CONTIGUOUS && has(ex.text, "always gives CONTIGUOUS"));
    /* factories: the declared format */
    CHECK(mft_explain_format("zeros", 0, NULL, MFT_CHANNELS_LAST, &ex) == MFT_OK);
    CHECK(ex.format == MFT_CHANNELS_LAST && has(ex.text, "CHANNELS_LAST was requested"));
    /* errors */
    CHECK(mft_explain_format("frobnicate", 1, ab, MFT_CONTIGUOUS, &ex) == MFT_ERR_INVALID);
    CHECK(has(mft_last_error_message(), "mft_explain_format") &&
          has(mft_last_error_message(), "frobnicate"));
    CHECK(mft_explain_format("conv2d", 1, ab, MFT_CONTIGUOUS, &ex) == MFT_ERR_INVALID);
    CHECK(has(mft_last_error_message(), "2 input(s) needed, got 1"));
    CHECK(mft_explain_format(NULL, 1, ab, MFT_CONTIGUOUS, &ex) == MFT_ERR_NULL);
    CHECK(mft_explain_format("relu", 1, ab, MFT_CONTIGUOUS, NULL) == MFT_ERR_NULL);
    const mft_tensor *nul[1] = {NULL};
    CHECK(mft_explain_format("relu", 1, nul, MFT_CONTIGUOUS, &ex) == MFT_ERR_NULL);
    mft_scope_end();
}

/* ----------------------------------------------------------- provenance */
static void test_provenance_chain(void) {
    mft_scope_begin();
    mft_tensor *x = mft_rand(4, S4, MFT_F32, MFT_CONTIGUOUS, 1);
    mft_tensor *xc = MFT_AT(mft_to_format(x, MFT_CHANNELS_LAST));
    const int at_line = __LINE__ - 1;
    mft_tensor *r = mft_relu(xc);
    const int64_t k[2] = {2, 2}, s[2] = {2, 2}, p0[2] = {0, 0}, d1[2] = {1, 1};
    mft_tensor *y = mft_max_pool2d(r, k, s, p0, d1, false);
    CHECK(y && mft_tensor_format(y) == MFT_CHANNELS_LAST);
    mft_provenance pv;
    CHECK(mft_tensor_provenance_at(y, 0, &pv));
    CHECK(!strcmp(pv.op, "max_pool2d") && pv.rule == mft_rule_for_op("max_pool2d"));
    CHECK(pv.tag == MFT_CHANNELS_LAST && pv.origin == MFT_INFERRED && pv.operand == 0);
    CHECK(pv.fits_channels_last && !pv.fits_contiguous);
    CHECK(mft_tensor_provenance_at(y, 1, &pv) && !strcmp(pv.op, "relu"));
    CHECK(mft_tensor_provenance_at(y, 2, &pv) && !strcmp(pv.op, "to_format"));
    CHECK(pv.origin == MFT_DECLARED && pv.file && has(pv.file, "test_rules.c") &&
          pv.line == at_line);
    CHECK(mft_tensor_provenance_at(y, 3, &pv) && !strcmp(pv.op, "rand") &&
          pv.tag == MFT_CONTIGUOUS);
    CHECK(!mft_tensor_provenance_at(y, 4, &pv));
    char buf[2048];
    size_t n = mft_tensor_provenance(y, buf, sizeof buf);
    CHECK(n > 0 && n < sizeof buf);
    CHECK_MSG(has(buf, "CHANNELS_LAST (inferred) by max_pool2d [rule pool: INPUT]: operand 0 (x) is "
                       "CHANNELS_LAST; the result's strides fit only CHANNELS_LAST"),
              "%s", buf);
    CHECK_MSG(has(buf, "\n<- CHANNELS_LAST (inferred) by relu [rule unary: ITERATOR]"), "%s", buf);
    CHECK_MSG(has(buf, "\n<- CHANNELS_LAST (declared) by to_format [rule convert: DECLARED]: "
                       "CHANNELS_LAST was requested"),
              "%s", buf);
    char site[64];
    snprintf(site, sizeof site, "test_rules.c:%d", at_line);
    CHECK(has(buf, site));
    CHECK(mft_tensor_provenance(NULL, buf, sizeof buf) == 0);
    mft_profile_site(NULL, 0);
    mft_scope_end();
}

static void test_provenance_ambiguous_and_neither(void) {
    mft_scope_begin();
    const int64_t c1[4] = {2, 1, 4, 4};
    mft_tensor *a = mft_zeros(4, c1, MFT_F32, MFT_CHANNELS_LAST);
    mft_tensor *r = mft_relu(a); /* C == 1: strides fit both, the tag is inherited */
    mft_provenance pv;
    CHECK(mft_tensor_provenance_at(r, 0, &pv));
    CHECK(pv.origin == MFT_INHERITED && pv.tag == MFT_CHANNELS_LAST && pv.fits_contiguous &&
          pv.fits_channels_last);
    char buf[1024];
    mft_tensor_provenance(r, buf, sizeof buf);
    CHECK_MSG(has(buf, "the result's strides fit both formats, so the rule's tag CHANNELS_LAST is kept"),
              "%s", buf);
    /* a W/H transpose fits neither order */
    mft_tensor *b = mft_zeros(4, S4, MFT_F32, MFT_CONTIGUOUS);
    const int64_t hw[4] = {2, 3, 4, 6};
    mft_tensor *b2 = mft_zeros(4, hw, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *t = mft_transpose(b2, 2, 3);
    CHECK(mft_tensor_provenance_at(t, 0, &pv) && !strcmp(pv.op, "transpose") &&
          !pv.fits_contiguous && !pv.fits_channels_last && pv.tag == MFT_CONTIGUOUS);
    mft_tensor_provenance(t, buf, sizeof buf);
    CHECK_MSG(has(buf, "by transpose [rule view: VIEW]: a view of operand 0 (x), which is "
                       "CONTIGUOUS; the result's strides fit neither format, so CONTIGUOUS"),
              "%s", buf);
    /* unbatched pooling: CONTIGUOUS by the row's note */
    const int64_t u3[3] = {3, 4, 4};
    mft_tensor *u = mft_zeros(3, u3, MFT_F32, MFT_CONTIGUOUS);
    const int64_t k[2] = {2, 2}, s[2] = {2, 2}, p0[2] = {0, 0};
    mft_tensor *up = mft_avg_pool2d(u, k, s, p0, false, true, 0);
    CHECK(up && mft_tensor_ndim(up) == 3);
    (void)b;
    mft_scope_end();
}

static void test_provenance_chain_is_bounded(void) {
    mft_scope_begin();
    mft_tensor *x = mft_zeros(4, S4, MFT_F32, MFT_CHANNELS_LAST);
    for (int i = 0; i < 40; i++) x = mft_relu(x);
    mft_provenance pv;
    int depth = 0;
    while (mft_tensor_provenance_at(x, depth, &pv)) depth++;
    /* zeros + relus 1..31 fill 32 links; relu 32 keeps the newest 16 (relus
     * 31..16) and adds itself: 17 links; relus 33..40 add 8 more */
    CHECK_EQ_I(depth, 25);
    CHECK(mft_tensor_provenance_at(x, 24, &pv) && !strcmp(pv.op, "relu"));
    char buf[8192];
    mft_tensor_provenance(x, buf, sizeof buf);
    CHECK(has(buf, "older links dropped after 32"));
    for (int i = 0; i < 100; i++) x = mft_relu(x);
    depth = 0;
    while (mft_tensor_provenance_at(x, depth, &pv)) depth++;
    CHECK(depth >= 16 && depth <= 32);
    mft_scope_end();
}

/* A record outlives its tensor while a descendant needs it. */
static void test_provenance_outlives_parent(void) {
    mft_tensor *x = mft_zeros(4, S4, MFT_F32, MFT_CHANNELS_LAST);
    mft_tensor *y = mft_relu(x);
    mft_tensor_release(x);
    mft_provenance pv;
    CHECK(mft_tensor_provenance_at(y, 1, &pv) && !strcmp(pv.op, "zeros") &&
          pv.origin == MFT_DECLARED);
    mft_tensor_release(y);
}

int main(void) {
    RUN(test_rows_well_formed);
    RUN(test_every_public_op_is_a_registry_row);
    RUN(test_markdown);
    RUN(test_explain_conv);
    RUN(test_explain_elementwise_cat_pool);
    RUN(test_provenance_chain);
    RUN(test_provenance_ambiguous_and_neither);
    RUN(test_provenance_chain_is_bounded);
    RUN(test_provenance_outlives_parent);
    TEST_MAIN_END();
}
