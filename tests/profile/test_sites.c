/* tests/profile/test_sites.c — call sites (mft/profile.h): MFT_AT covers exactly
 * the expression it marks.
 *   - after `y = MFT_AT(op(x))` an unmarked op's kernel and conversion events
 *     carry no site, or the one mft_profile_site set before;
 *   - nested MFT_AT: the inner expression's events carry the inner line, the
 *     rest of the outer expression the outer line, nothing after it;
 *   - MFT_AT_BEGIN / MFT_AT_END mark a block and void calls; an unmatched
 *     END does nothing; deeper nesting than the saved levels still unwinds;
 *   - the value of every supported type passes through unchanged, NULL and
 *     failing calls included;
 *   - tape nodes remember their forward's site: backward kernels and the
 *     gradient conversion point at the forward line, not at the backward
 *     call, and the site after mft_backward is the one before it.
 * Sites are read from the MFT_VERBOSE lines (through the log callback), from
 * mft_conversion_last() and from the thread's site (mft__site_get); the
 * expected lines are this file's own __LINE__s. */
#include "harness.h"
#include "profile_util.h"
#include "internal.h"

/* ------------------------------------------------------------------ log capture */

/* The site= field of captured line i into buf ("" when the line has none). */
static const char *v_site_of(int i, char *buf, size_t len) {
    const char *s = strstr(g_lines[i], ",site=");
    buf[0] = 0;
    if (!s) return buf;
    s += 6;
    size_t n = strcspn(s, ",");
    if (n >= len) n = len - 1;
    memcpy(buf, s, n);
    buf[n] = 0;
    return buf;
}

/* Lines starting with prefix, and of those how many carry exactly site
 * (site "" = no site field). */
static int v_count(const char *prefix, const char *site, int *with_site) {
    int n = 0, w = 0;
    char buf[256];
    for (int i = 0; i < g_nlines; i++) {
        if (strncmp(g_lines[i], prefix, strlen(prefix)) != 0) continue;
        n++;
        if (strcmp(v_site_of(i, buf, sizeof buf), site) == 0) w++;
    }
    *with_site = w;
    return n;
}

static void here(char *buf, size_t len, int line) { snprintf(buf, len, "%s:%d", __FILE__, line); }

static void check_no_site(void) {
    const char *f;
    int l;
    mft__site_get(&f, &l);
    CHECK_MSG(f == NULL && l == 0, "site left set: %s:%d", f ? f : "(null)", l);
}

/* ------------------------------------------------------------------ tests */
/* The case MFT_AT used to get wrong: its site stayed set, so the next
 * unmarked op was attributed to the marked line. */
static void test_unmarked_after_marked(void) {
    const int64_t s4[4] = {2, 3, 4, 4};
    mft_tensor *x = mft_rand(4, s4, MFT_F32, MFT_CONTIGUOUS, 1);
    v_start();
    mft_tensor *y = MFT_AT(mft_relu(x));
    const int at = __LINE__ - 1;
    mft_tensor *z = mft_neg(y);
    mft_tensor *c = mft_to_format(z, MFT_CHANNELS_LAST); /* a conversion, unmarked */
    v_stop();
    char want[256];
    here(want, sizeof want, at);
    int w;
    CHECK_EQ_I(v_count("mft_verbose,exec,relu,", want, &w), 1);
    CHECK_EQ_I(w, 1);
    CHECK_EQ_I(v_count("mft_verbose,exec,neg,", "", &w), 1);
    CHECK_EQ_I(w, 1); /* no site field at all */
    CHECK_EQ_I(v_count("mft_verbose,conversion,explicit,to_format,", "", &w), 1);
    CHECK_EQ_I(w, 1);
    CHECK(mft_conversion_last()->site_file == NULL && mft_conversion_last()->site_line == 0);
    check_no_site();
    mft_tensor_release(c);
    mft_tensor_release(z);
    mft_tensor_release(y);
    mft_tensor_release(x);
}

/* A site set with mft_profile_site is put back after MFT_AT. */
static void test_restores_explicit_site(void) {
    const int64_t s2[2] = {3, 5};
    mft_tensor *x = mft_rand(2, s2, MFT_F32, MFT_CONTIGUOUS, 2);
    mft_profile_site("base.c", 5);
    v_start();
    mft_tensor *y = MFT_AT(mft_relu(x));
    const int at = __LINE__ - 1;
    mft_tensor *z = mft_neg(y);
    v_stop();
    char want[256];
    here(want, sizeof want, at);
    int w;
    CHECK(v_count("mft_verbose,exec,relu,", want, &w) == 1 && w == 1);
    CHECK(v_count("mft_verbose,exec,neg,", "base.c:5", &w) == 1 && w == 1);
    const char *f;
    int l;
    mft__site_get(&f, &l);
    CHECK(f && !strcmp(f, "base.c") && l == 5);
    mft_profile_site(NULL, 0);
    check_no_site();
    mft_tensor_release(z);
    mft_tensor_release(y);
    mft_tensor_release(x);
}

/* Nested: the inner MFT_AT (in a helper) marks the conversion, the outer
 * one the add around it; nothing after. */
static int g_inner_line;
static mft_tensor *to_cl_marked(const mft_tensor *x) {
    g_inner_line = __LINE__ + 1;
    return MFT_AT(mft_to_format(x, MFT_CHANNELS_LAST));
}

static void test_nested(void) {
    const int64_t s4[4] = {2, 3, 4, 4};
    mft_scope_begin();
    mft_tensor *x = mft_rand(4, s4, MFT_F32, MFT_CONTIGUOUS, 3);
    mft_tensor *y = mft_rand(4, s4, MFT_F32, MFT_CHANNELS_LAST, 4);
    v_start();
    mft_tensor *s = MFT_AT(mft_add(to_cl_marked(x), y));
    const int outer = __LINE__ - 1;
    const mft_conversion_info ci = *mft_conversion_last();
    mft_tensor *r = mft_relu(s);
    v_stop();
    CHECK(s && r);
    char inner_site[256], outer_site[256];
    here(inner_site, sizeof inner_site, g_inner_line);
    here(outer_site, sizeof outer_site, outer);
    int w;
    CHECK_EQ_I(v_count("mft_verbose,exec,copy,", inner_site, &w), 1);
    CHECK_EQ_I(w, 1);
    CHECK_EQ_I(v_count("mft_verbose,conversion,explicit,to_format,", inner_site, &w), 1);
    CHECK_EQ_I(w, 1);
    CHECK(ci.site_file && !strcmp(ci.site_file, __FILE__) && ci.site_line == g_inner_line);
    CHECK_EQ_I(v_count("mft_verbose,exec,add,", outer_site, &w), 1);
    CHECK_EQ_I(w, 1);
    CHECK_EQ_I(v_count("mft_verbose,exec,relu,", "", &w), 1);
    CHECK_EQ_I(w, 1);
    check_no_site();
    mft_scope_end();
}

/* Blocks and void calls; an END without a BEGIN; nesting deeper than the
 * saved levels unwinds to no site. */
static void test_begin_end(void) {
    const int64_t s2[2] = {4, 4};
    mft_tensor *x = mft_rand(2, s2, MFT_F32, MFT_CONTIGUOUS, 5);
    v_start();
    MFT_AT_BEGIN();
    const int at = __LINE__ - 1;
    mft_tensor_release(mft_relu(x)); /* void */
    mft_tensor *n = mft_neg(x);
    MFT_AT_END();
    mft_tensor *a = mft_abs(x);
    MFT_AT_END(); /* unmatched: nothing to restore */
    v_stop();
    char want[256];
    here(want, sizeof want, at);
    int w;
    CHECK(v_count("mft_verbose,exec,relu,", want, &w) == 1 && w == 1);
    CHECK(v_count("mft_verbose,exec,neg,", want, &w) == 1 && w == 1);
    CHECK(v_count("mft_verbose,exec,abs,", "", &w) == 1 && w == 1);
    check_no_site();
    /* 40 levels (the stack saves 32): the innermost site while inside, none
     * after all the ends */
    for (int i = 0; i < 40; i++) mft__at_push("deep.c", 100 + i);
    const char *f;
    int l;
    mft__site_get(&f, &l);
    CHECK(f && !strcmp(f, "deep.c") && l == 139);
    for (int i = 0; i < 40; i++) mft__at_pop();
    check_no_site();
    for (int i = 0; i < 3; i++) mft__at_push("deep.c", 200 + i);
    mft__at_pop();
    mft__site_get(&f, &l);
    CHECK(f && l == 201); /* one level up */
    mft__at_pop();
    mft__at_pop();
    check_no_site();
    mft_tensor_release(a);
    mft_tensor_release(n);
    mft_tensor_release(x);
}

/* Values of every supported type come back unchanged; failing calls too. */
static void test_types_pass_through(void) {
    const int64_t s2[2] = {2, 3};
    mft_tensor *x = mft_arange(0, 6, 1, MFT_F32);
    mft_tensor *v = mft_view(x, 2, s2);
    mft_tensor *d = mft_zeros(2, s2, MFT_F32, MFT_CONTIGUOUS);
    const int64_t idx[2] = {1, 2};
    mft_status st = MFT_AT(mft_copy_(d, v));
    CHECK_EQ_I(st, MFT_OK);
    double val = MFT_AT(mft_tensor_get(d, idx));
    CHECK_NEAR(val, 5.0, 0);
    bool contig = MFT_AT(mft_tensor_is_contiguous(d, MFT_CONTIGUOUS));
    CHECK(contig);
    int64_t numel = MFT_AT(mft_tensor_numel(d));
    CHECK_EQ_I(numel, 6);
    int ndim = MFT_AT(mft_tensor_ndim(d));
    CHECK_EQ_I(ndim, 2);
    size_t need = MFT_AT(mft_tensor_describe(d, NULL, 0));
    CHECK(need == mft_tensor_describe(d, NULL, 0) && need > 0);
    float f = MFT_AT((float)mft_tensor_get(d, idx));
    CHECK(f == 5.0f);
    long long ll = MFT_AT((long long)7);
    CHECK(ll == 7);
    unsigned long long ull = MFT_AT((unsigned long long)8);
    CHECK(ull == 8);
    CHECK(mft_tensor_set_name(d, "d.weight") == MFT_OK);
    const char *name = MFT_AT(mft_tensor_name(d)); /* a pointer: through void * */
    CHECK(name && !strcmp(name, "d.weight"));
    const int64_t *sizes = MFT_AT(mft_tensor_sizes(d));
    CHECK(sizes && sizes[0] == 2 && sizes[1] == 3);
    mft_tensor *same = MFT_AT(mft_tensor_retain(d));
    CHECK(same == d);
    mft_tensor_release(same);
    check_no_site();
    /* a failing call: NULL out, the error in place, the site restored */
    mft_tensor *bad = MFT_AT(mft_relu(NULL));
    CHECK(bad == NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_relu");
    mft_status bst = MFT_AT(mft_copy_(d, NULL));
    CHECK_EQ_I(bst, MFT_ERR_NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_copy_");
    check_no_site();
    mft_tensor_release(d);
    mft_tensor_release(v);
    mft_tensor_release(x);
}

/* z = x + y, x NHWC and y NCHW (C = 3): y's gradient is converted to NCHW
 * in backward (docs/spec.md §5). The add is marked, the loss is not, the
 * backward call has its own MFT_AT: add's backward copy and the gradient
 * conversion point at add's line; sum's backward at the backward line. */
static void test_backward_points_at_forward(void) {
    const int64_t sz[4] = {2, 3, 4, 4};
    mft_scope_begin();
    mft_tensor *x = mft_rand(4, sz, MFT_F32, MFT_CHANNELS_LAST, 1);
    mft_tensor *y = mft_rand(4, sz, MFT_F32, MFT_CONTIGUOUS, 2);
    mft_tensor_set_requires_grad(x, true);
    mft_tensor_set_requires_grad(y, true);
    CHECK_EQ_I(mft_tape_begin(), MFT_OK);
    mft_tensor *z = MFT_AT(mft_add(x, y));
    const int fwd = __LINE__ - 1;
    mft_tensor *loss = mft_sum(z, 0, NULL, false);
    check_no_site();
    const int64_t seq0 = mft_conversion_last()->seq;
    v_start();
    mft_status st = MFT_AT(mft_backward(loss, NULL));
    const int bwd = __LINE__ - 1;
    v_stop();
    CHECK_EQ_I(st, MFT_OK);
    CHECK(mft_tape_end() == MFT_OK);
    char fwd_site[256], bwd_site[256];
    here(fwd_site, sizeof fwd_site, fwd);
    here(bwd_site, sizeof bwd_site, bwd);
    const mft_conversion_info *ci = mft_conversion_last();
    CHECK_EQ_I(ci->seq, seq0 + 1);
    CHECK(ci->cause == MFT_CAUSE_GRADIENT && !strcmp(ci->op, "add"));
    CHECK(ci->site_file && !strcmp(ci->site_file, __FILE__) && ci->site_line == fwd);
    int w;
    CHECK_EQ_I(v_count("mft_verbose,conversion,gradient,add,", fwd_site, &w), 1);
    CHECK_EQ_I(w, 1);
    /* every copy of the walk ran for add (its gradient hand-over) or for
     * sum's backward; none is unattributed */
    int copies = v_count("mft_verbose,exec,copy,", fwd_site, &w), wb;
    v_count("mft_verbose,exec,copy,", bwd_site, &wb);
    CHECK(copies >= 1 && w >= 1 && w + wb == copies);
    int none;
    v_count("mft_verbose,exec,", "", &none);
    CHECK_EQ_I(none, 0);
    check_no_site();
    mft_scope_end();
}

int main(void) {
    RUN(test_unmarked_after_marked);
    RUN(test_restores_explicit_site);
    RUN(test_nested);
    RUN(test_begin_end);
    RUN(test_types_pass_through);
    RUN(test_backward_points_at_forward);
    TEST_MAIN_END();
}
