/* tests/profile/test_scenarios.c — scripted training steps with exact conversion
 * counts per cause (Note [Conversions and their causes], mft/profile.h):
 *   - the Fashion-MNIST CNN all in channels_last: nothing is copied (the
 *     sequential runs flatten -> linear as one flatten_linear, Note
 *     [Sequential peepholes] in nn/compose.c); with fusion off the only
 *     copies are flatten's (one forward, one in backward), both RESHAPE;
 *     nothing hidden either way, and a zero reorder budget holds;
 *   - a mixed model (channels-last weights, an NCHW input): each hidden copy
 *     counted and attributed to the op that made it;
 *   - both models with batch_norm;
 *   - reorder budgets: a zero budget holds around the NHWC step and fails
 *     with MFT_ERR_BUDGET (naming the op) around the mixed one;
 *   - the profiler attributes each mixed-model copy to the op that made it
 *     and to the user's call site (MFT_AT);
 *   - the two hidden causes the models do not produce: a dispatch fallback
 *     (F64 NHWC pooling) and a gradient conversion (x + y in mixed formats).
 * CTest runs this file at 1 and 2 threads: the counts must not depend on it.
 * The expected counts are derived in the comments from docs/spec.md §4-§5 and the
 * dispatch rules, not read off a run. */
#include "harness.h"
#include "test_util.h"

enum { NB = 4 };

/* The Fashion-MNIST CNN of mft_nn_fashion_cnn at width 8 (seeds 11..14) on
 * c_in x hw x hw inputs, its weights in fmt: conv(c_in->8) [bn] relu pool
 * conv(8->16) [bn] relu pool flatten linear(16*(hw/4)^2->32) relu
 * linear(32->10). */
static mft_module *scn_model(int64_t c_in, int64_t hw, bool bn, mft_format fmt) {
    const mft_fashion_cnn_config cfg = {.in_channels = c_in,
                                        .image_size = hw,
                                        .width = 8,
                                        .batch_norm = bn,
                                        .format = fmt,
                                        .seed = 10};
    mft_module *m = mft_nn_fashion_cnn(&cfg);
    if (!m) fprintf(stderr, "scn_model: %s\n", mft_last_error_message());
    return m;
}

typedef struct scn_counts {
    int64_t count[MFT_CAUSE_COUNT];
} scn_counts;

/* One SGD step on random data; the conversion counts of the step (input
 * creation excluded) go to *fwd (forward) and *bwd (backward + update). */
static bool scn_step(mft_module *m, mft_optimizer *opt, int64_t c_in, int64_t hw, mft_format xf,
                     uint64_t seed, scn_counts *fwd, scn_counts *bwd) {
    mft_scope_begin();
    const int64_t xs[4] = {NB, c_in, hw, hw}, ys[1] = {NB};
    mft_tensor *x = mft_rand(4, xs, MFT_F32, xf, seed);
    mft_tensor *y = mft_zeros(1, ys, MFT_I64, MFT_CONTIGUOUS);
    for (int i = 0; i < NB; i++) mft_tensor_set(y, (int64_t[]){i}, (double)(i % 10));
    mft_conversion_counts_reset();
    mft_tape_begin();
    mft_tensor *logits = mft_module_forward(m, x);
    mft_tensor *loss = mft_cross_entropy(logits, y, NULL, -100, 0.0, MFT_REDUCTION_MEAN);
    mft_conversion_counts c = mft_conversion_counts_get();
    for (int k = 0; k < MFT_CAUSE_COUNT; k++) fwd->count[k] = c.count[k];
    mft_conversion_counts_reset();
    mft_status st = loss ? mft_backward(loss, NULL) : mft_last_error();
    mft_tape_end();
    if (st == MFT_OK) st = mft_optimizer_step(opt);
    mft_optimizer_zero_grad(opt);
    c = mft_conversion_counts_get();
    for (int k = 0; k < MFT_CAUSE_COUNT; k++) bwd->count[k] = c.count[k];
    mft_scope_end();
    if (st != MFT_OK) fprintf(stderr, "step failed: %s\n", mft_last_error_message());
    return st == MFT_OK;
}

static void check_counts(const scn_counts *got, const int64_t *want, const char *what) {
    for (int k = 0; k < MFT_CAUSE_COUNT; k++)
        CHECK_MSG(got->count[k] == want[k], "%s: %s conversions %lld, expected %lld\n", what,
                  mft_conversion_cause_name((mft_conversion_cause)k), (long long)got->count[k],
                  (long long)want[k]);
}

static mft_optimizer *scn_sgd(mft_module *m) {
    mft_tensor *ps[32];
    int np = mft_module_parameters(m, ps, NULL, 32);
    mft_sgd_opts o = {0};
    o.lr = 0.01;
    o.momentum = 0.9;
    return mft_sgd_new(np, ps, &o);
}

/* All NHWC. Forward: conv/relu/pool/bn keep CL with CL kernels (no copy);
 * flatten -> linear runs as flatten_linear, which reads the CL (N,16,h,w)
 * images in their memory order with w's columns gathered into it: nothing.
 * Backward: flatten_linear writes grad_x straight into a CL tensor, grad_w
 * = g^T @ x reads g^T as transpose_a: nothing; pools, relus, bn and convs
 * run CL kernels on CL tensors and return CL grads: nothing; SGD updates in
 * place: nothing. With fusion off, flatten of the CL activation cannot be a
 * view of the (N, C*h*w) order: 1 RESHAPE, and its copy back into CL in
 * backward: 1 RESHAPE; linear reads x packed and w^T as transpose_b, and in
 * backward g^T as transpose_a: nothing. */
static void run_all_nhwc(bool bn, bool fuse) {
    const int64_t c_in = 1, hw = 12;
    mft_module *m = scn_model(c_in, hw, bn, MFT_CHANNELS_LAST);
    CHECK(m != NULL);
    if (m) mft_module_set_fusion(m, fuse);
    mft_optimizer *opt = m ? scn_sgd(m) : NULL;
    CHECK(opt != NULL);
    const int64_t want_f[MFT_CAUSE_COUNT] = {[MFT_CAUSE_RESHAPE] = fuse ? 0 : 1};
    const int64_t want_b[MFT_CAUSE_COUNT] = {[MFT_CAUSE_RESHAPE] = fuse ? 0 : 1};
    char what[64];
    for (int step = 0; opt && step < 2; step++) {
        scn_counts f, b;
        CHECK(scn_step(m, opt, c_in, hw, MFT_CHANNELS_LAST, 100 + (uint64_t)step, &f, &b));
        snprintf(what, sizeof what, "nhwc%s%s forward", bn ? "+bn" : "", fuse ? "" : " unfused");
        check_counts(&f, want_f, what);
        snprintf(what, sizeof what, "nhwc%s%s backward", bn ? "+bn" : "", fuse ? "" : " unfused");
        check_counts(&b, want_b, what);
    }
    mft_optimizer_free(opt);
    mft_module_free(m);
}

static void test_all_nhwc(void) {
    run_all_nhwc(false, true);
    run_all_nhwc(false, false);
}
static void test_all_nhwc_batchnorm(void) {
    run_all_nhwc(true, true);
    run_all_nhwc(true, false);
}

/* Channels-last weights, an NCHW input with C_in = 3 (C_in = 1 would be
 * contiguous in both formats). Forward: conv1's rule (ANY_CL) gives CL
 * because of the weight; the CL kernel needs x packed CL: 1 OPERAND (x);
 * the rest is as all-NHWC: nothing. Backward: x needs no grad, so conv1
 * computes only grad_w (and grad_b): backward_weight runs in the conv's
 * format (CL), so x is packed CL again: 1 OPERAND; the rest as all-NHWC:
 * nothing. */
static void run_mixed(bool bn) {
    const int64_t c_in = 3, hw = 8;
    mft_module *m = scn_model(c_in, hw, bn, MFT_CHANNELS_LAST);
    CHECK(m != NULL);
    mft_optimizer *opt = m ? scn_sgd(m) : NULL;
    CHECK(opt != NULL);
    const int64_t want_f[MFT_CAUSE_COUNT] = {[MFT_CAUSE_OPERAND] = 1};
    const int64_t want_b[MFT_CAUSE_COUNT] = {[MFT_CAUSE_OPERAND] = 1};
    for (int step = 0; opt && step < 2; step++) {
        scn_counts f, b;
        CHECK(scn_step(m, opt, c_in, hw, MFT_CONTIGUOUS, 200 + (uint64_t)step, &f, &b));
        check_counts(&f, want_f, bn ? "mixed+bn forward" : "mixed forward");
        check_counts(&b, want_b, bn ? "mixed+bn backward" : "mixed backward");
    }
    mft_optimizer_free(opt);
    mft_module_free(m);
}

static void test_mixed(void) { run_mixed(false); }
static void test_mixed_batchnorm(void) { run_mixed(true); }

/* All NCHW: the same as all-NHWC except that flatten of a contiguous
 * (N,16,h,w) is a view, so nothing at all is copied. */
static void test_all_nchw(void) {
    const int64_t c_in = 1, hw = 12;
    mft_module *m = scn_model(c_in, hw, false, MFT_CONTIGUOUS);
    mft_optimizer *opt = m ? scn_sgd(m) : NULL;
    CHECK(opt != NULL);
    const int64_t want[MFT_CAUSE_COUNT] = {0};
    scn_counts f, b;
    CHECK(opt && scn_step(m, opt, c_in, hw, MFT_CONTIGUOUS, 300, &f, &b));
    check_counts(&f, want, "nchw forward");
    check_counts(&b, want, "nchw backward");
    mft_optimizer_free(opt);
    mft_module_free(m);
}

/* A whole step (forward, backward, update) inside a reorder budget of max
 * hidden conversions; returns what mft_reorder_budget_end said. */
static mft_status scn_budget_step(mft_module *m, mft_optimizer *opt, int64_t c_in, int64_t hw,
                                  mft_format xf, int64_t max) {
    scn_counts f, b;
    CHECK(mft_reorder_budget_begin(max) == MFT_OK);
    CHECK(scn_step(m, opt, c_in, hw, xf, 400, &f, &b));
    return mft_reorder_budget_end();
}

/* "This model trains with zero hidden copies in NHWC" as a test: the NHWC
 * step copies nothing, so a budget of 0 holds. */
static void test_budget_nhwc_zero(void) {
    mft_module *m = scn_model(1, 12, true, MFT_CHANNELS_LAST);
    CHECK(m != NULL);
    mft_optimizer *opt = m ? scn_sgd(m) : NULL;
    if (opt) CHECK_EQ_I(scn_budget_step(m, opt, 1, 12, MFT_CHANNELS_LAST, 0), MFT_OK);
    mft_optimizer_free(opt);
    mft_module_free(m);
}

/* The mixed step does 2 hidden (OPERAND) conversions: a budget of 1 fails
 * and its message names the count, the limit and the second conversion
 * (conv2d_backward_weight's operand copy of x); a budget of 2 holds. */
static void test_budget_mixed(void) {
    mft_module *m = scn_model(3, 8, false, MFT_CHANNELS_LAST);
    CHECK(m != NULL);
    mft_optimizer *opt = m ? scn_sgd(m) : NULL;
    if (opt) {
        CHECK_EQ_I(scn_budget_step(m, opt, 3, 8, MFT_CONTIGUOUS, 1), MFT_ERR_BUDGET);
        const char *msg = mft_last_error_message();
        CHECK_MSG(strstr(msg, "2 hidden conversions") && strstr(msg, "allows 1") &&
                      strstr(msg, "operand conversion by conv2d_backward_weight") &&
                      strstr(msg, "NCHW -> NHWC"),
                  "budget message: %s\n", msg);
        CHECK_EQ_I(scn_budget_step(m, opt, 3, 8, MFT_CONTIGUOUS, 2), MFT_OK);
        CHECK_EQ_I(scn_budget_step(m, opt, 3, 8, MFT_CONTIGUOUS, 0), MFT_ERR_BUDGET);
        CHECK(strstr(mft_last_error_message(), "operand conversion by conv2d (NCHW -> NHWC"));
    }
    mft_optimizer_free(opt);
    mft_module_free(m);
}

static void test_budget_misuse(void) {
    CHECK_EQ_I(mft_reorder_budget_begin(-1), MFT_ERR_INVALID);
    CHECK_ERR(MFT_ERR_INVALID, "max must be >= 0, got -1");
    CHECK_EQ_I(mft_reorder_budget_end(), MFT_ERR_SCOPE);
    CHECK_ERR(MFT_ERR_SCOPE, "no budget region is open");
    CHECK_EQ_I(mft_reorder_budget_begin(3), MFT_OK);
    CHECK_EQ_I(mft_reorder_budget_begin(0), MFT_ERR_SCOPE);
    CHECK_ERR(MFT_ERR_SCOPE, "(max 3) is already open");
    CHECK_EQ_I(mft_reorder_budget_end(), MFT_OK); /* the first region is still intact */
    CHECK_EQ_I(mft_reorder_budget_end(), MFT_ERR_SCOPE);
}

/* Counts the lines of the profiler table's conversion section that start
 * with cause and name op in the op column. */
static int scn_table_rows(const char *table, const char *cause, const char *op, const char *site) {
    int n = 0;
    const char *sec = strstr(table, "\nconversions:");
    for (const char *l = sec; l && *l; l = strchr(l + 1, '\n')) {
        const char *line = l + 1;
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[512];
        if (len >= sizeof buf) continue;
        memcpy(buf, line, len);
        buf[len] = 0;
        char c[32], o[64];
        if (sscanf(buf, "%31s %*s %63s", c, o) != 2) continue;
        if (strcmp(c, cause) == 0 && strcmp(o, op) == 0 && (!site || strstr(buf, site))) n++;
    }
    return n;
}

/* The profiler puts each hidden copy of the mixed step on the op that made
 * it: the forward OPERAND copy on conv2d, the backward one on
 * conv2d_backward_weight, both at the forward call's site; the RESHAPE
 * copies (fusion off, so flatten runs alone) on flatten. */
static void test_profile_attribution(void) {
    mft_module *m = scn_model(3, 8, false, MFT_CHANNELS_LAST);
    CHECK(m != NULL);
    if (m) mft_module_set_fusion(m, false);
    mft_optimizer *opt = m ? scn_sgd(m) : NULL;
    if (!opt) goto out;
    scn_counts f, b;
    CHECK_EQ_I(mft_profile_begin(), MFT_OK);
    mft_profile_site("scenario.c", 7);
    CHECK(scn_step(m, opt, 3, 8, MFT_CONTIGUOUS, 500, &f, &b));
    mft_profile_site(NULL, 0);
    CHECK_EQ_I(mft_profile_end(), MFT_OK);
    size_t need = mft_profile_table(NULL, 0);
    char *t = malloc(need + 1);
    CHECK(t && mft_profile_table(t, need + 1) == need);
    if (t) {
        CHECK_MSG(scn_table_rows(t, "operand", "conv2d", "scenario.c:7") == 1, "%s", t);
        CHECK_MSG(scn_table_rows(t, "operand", "conv2d_backward_weight", "scenario.c:7") == 1, "%s",
                  t);
        CHECK_MSG(scn_table_rows(t, "reshape", "flatten", NULL) >= 1, "%s", t);
        CHECK(strstr(t, "conversions: 4  reshape 2") && strstr(t, "operand 2"));
        CHECK(strstr(t, "| hidden 2\n"));
    }
    free(t);
    mft_profile_clear();
out:
    mft_optimizer_free(opt);
    mft_module_free(m);
}

/* FALLBACK: F64 pooling has only CONTIGUOUS kernels built in, so an NHWC F64
 * avg_pool2d converts its input to NCHW and its result back to NHWC (docs/spec.md
 * §4: pool output follows the input): 2 fallback conversions, both hidden,
 * both on avg_pool2d; a budget of 1 catches them. */
static void test_fallback_counted(void) {
    const int64_t sz[4] = {2, 3, 6, 6}, k[2] = {2, 2}, pad[2] = {0, 0};
    mft_tensor *x = mft_rand(4, sz, MFT_F64, MFT_CHANNELS_LAST, 5);
    mft_conversion_counts_reset();
    CHECK_EQ_I(mft_reorder_budget_begin(1), MFT_OK);
    CHECK_EQ_I(mft_profile_begin(), MFT_OK);
    mft_tensor *y = MFT_AT(mft_avg_pool2d(x, k, NULL, pad, false, true, 0));
    mft_profile_site(NULL, 0);
    CHECK_EQ_I(mft_profile_end(), MFT_OK);
    CHECK(y && mft_tensor_is_contiguous(y, MFT_CHANNELS_LAST));
    mft_conversion_counts c = mft_conversion_counts_get();
    const int64_t want[MFT_CAUSE_COUNT] = {[MFT_CAUSE_FALLBACK] = 2};
    scn_counts got;
    for (int i = 0; i < MFT_CAUSE_COUNT; i++) got.count[i] = c.count[i];
    check_counts(&got, want, "f64 nhwc avg_pool2d");
    CHECK_EQ_I(c.hidden, 2);
    CHECK_EQ_I(mft_reorder_budget_end(), MFT_ERR_BUDGET);
    CHECK(strstr(mft_last_error_message(), "fallback conversion by avg_pool2d (NCHW -> NHWC"));
    mft_clear_error();
    size_t need = mft_profile_table(NULL, 0);
    char *t = malloc(need + 1);
    if (t) {
        mft_profile_table(t, need + 1);
        CHECK_MSG(scn_table_rows(t, "fallback", "avg_pool2d", "test_scenarios.c:") == 2, "%s", t);
    }
    free(t);
    mft_profile_clear();
    mft_tensor_release(y);
    mft_tensor_release(x);
}

/* GRADIENT: z = x + y with x NHWC and y NCHW (C = 3, so the layouts
 * differ): the result follows x (NHWC, docs/spec.md §4 binary rule), nothing is
 * copied forward. Backward with an NHWC grad_output: add passes it through
 * to both inputs; x's gradient already has x's format, y's is converted to
 * NCHW (docs/spec.md §5): exactly 1 gradient conversion, attributed to add. */
static void test_gradient_counted(void) {
    const int64_t sz[4] = {2, 3, 4, 4};
    mft_scope_begin();
    mft_tensor *x = mft_rand(4, sz, MFT_F32, MFT_CHANNELS_LAST, 1);
    mft_tensor *y = mft_rand(4, sz, MFT_F32, MFT_CONTIGUOUS, 2);
    mft_tensor *go = mft_ones(4, sz, MFT_F32, MFT_CHANNELS_LAST);
    mft_tensor_set_requires_grad(x, true);
    mft_tensor_set_requires_grad(y, true);
    mft_conversion_counts_reset();
    mft_tape_begin();
    mft_tensor *z = mft_add(x, y);
    CHECK(z && mft_tensor_format(z) == MFT_CHANNELS_LAST);
    CHECK_EQ_I(mft_conversion_counts_get().total, 0);
    CHECK_EQ_I(mft_profile_begin(), MFT_OK);
    CHECK_EQ_I(mft_backward(z, go), MFT_OK);
    CHECK_EQ_I(mft_profile_end(), MFT_OK);
    mft_tape_end();
    mft_conversion_counts c = mft_conversion_counts_get();
    const int64_t want[MFT_CAUSE_COUNT] = {[MFT_CAUSE_GRADIENT] = 1};
    scn_counts got;
    for (int i = 0; i < MFT_CAUSE_COUNT; i++) got.count[i] = c.count[i];
    check_counts(&got, want, "add backward, mixed formats");
    const mft_tensor *gx = mft_tensor_grad(x), *gy = mft_tensor_grad(y);
    CHECK(gx && mft_tensor_is_contiguous(gx, MFT_CHANNELS_LAST));
    CHECK(gy && mft_tensor_is_contiguous(gy, MFT_CONTIGUOUS));
    size_t need = mft_profile_table(NULL, 0);
    char *t = malloc(need + 1);
    if (t) {
        mft_profile_table(t, need + 1);
        CHECK_MSG(scn_table_rows(t, "gradient", "add", NULL) == 1, "%s", t);
    }
    free(t);
    mft_profile_clear();
    mft_scope_end();
}

int main(void) {
    RUN(test_all_nhwc);
    RUN(test_all_nhwc_batchnorm);
    RUN(test_mixed);
    RUN(test_mixed_batchnorm);
    RUN(test_all_nchw);
    RUN(test_budget_nhwc_zero);
    RUN(test_budget_mixed);
    RUN(test_budget_misuse);
    RUN(test_profile_attribution);
    RUN(test_fallback_counted);
    RUN(test_gradient_counted);
    TEST_MAIN_END();
}
