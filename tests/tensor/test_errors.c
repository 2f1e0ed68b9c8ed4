/* tests/tensor/test_errors.c — robustness of every public entry point of tensor.h
 * (docs/spec.md §6, docs/architecture.md §3-4): bad input returns NULL or a non-zero status, the
 * thread-local last error holds the right status and a message naming the
 * function and the offending values, a NULL tensor argument keeps the FIRST
 * error (NULL propagation), successful calls never clear the error, and a
 * failing call that takes a destination (copy_, set) leaves its values
 * untouched (checked with mft_tensor_hash and the version counter).
 *
 * Each check clears the error first (FAIL_T / FAIL_S), so the status and the
 * message seen belong to the call under test. */
#define _POSIX_C_SOURCE 200809L /* fork, waitpid */
#include <limits.h>
#include <stdbool.h>
#include <threads.h>
#if defined(__unix__)
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#endif
#include "test_util.h"

/* ------------------------------------------------------------------ helpers */

/* A tensor-returning call that must fail with status st; the message must name
 * fn and contain vals ("" when there is no value to look for). */
#define FAIL_T(expr, st, fn, vals)                                                                 \
    do {                                                                                           \
        TU_EXPECT_NULL_(expr, #expr);                                                              \
        TU_HAS(vals);                                                                              \
        CHECK_ERR(st, fn);                                                                         \
    } while (0)

/* A status-returning call that must return st and set it as the last error. */
#define FAIL_S(expr, st, fn, vals)                                                                 \
    do {                                                                                           \
        TU_EXPECT_STATUS_(expr, #expr, st);                                                        \
        TU_HAS(vals);                                                                              \
        CHECK_ERR(st, fn);                                                                         \
    } while (0)

/* A call that must succeed (and, per docs/architecture.md §4, leave the error state alone). */
#define OK_T(var, expr)                                                                            \
    do {                                                                                           \
        (var) = (expr);                                                                            \
        CHECK_MSG((var) != NULL, "%s failed: %s", #expr, mft_last_error_message());                \
    } while (0)

/* Packed contiguous tensor holding 0, 1, 2, ... in logical order. */
static mft_tensor *iota(int nd, const int64_t *sz, mft_dtype dt) {
    return tu_iota(nd, sz, dt, 0);
}

static int g_deleter_calls = 0;
static void count_deleter(void *data, void *ctx) {
    (void)data;
    (void)ctx;
    g_deleter_calls++;
}

static const int64_t S4[4] = {2, 3, 4, 5};
static const int64_t S9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
static const int64_t BIG2[2] = {INT64_C(1) << 40, INT64_C(1) << 40};

/* ------------------------------------------------------------------ NULL arguments */

static void test_null_tensor_args(void) {
    const int perm[4] = {0, 1, 2, 3};
    const int64_t s2[2] = {2, 3}, st2[2] = {3, 1}, idx[2] = {0, 0};
    mft_tensor *ok = iota(2, s2, MFT_F32);
    char buf[64];

    FAIL_T(mft_permute(NULL, perm), MFT_ERR_NULL, "mft_permute", "'t'");
    FAIL_T(mft_transpose(NULL, 0, 1), MFT_ERR_NULL, "mft_transpose", "NULL");
    FAIL_T(mft_narrow(NULL, 0, 0, 1), MFT_ERR_NULL, "mft_narrow", "NULL");
    FAIL_T(mft_select(NULL, 0, 0), MFT_ERR_NULL, "mft_select", "NULL");
    FAIL_T(mft_slice(NULL, 0, 0, 1, 1), MFT_ERR_NULL, "mft_slice", "NULL");
    FAIL_T(mft_unsqueeze(NULL, 0), MFT_ERR_NULL, "mft_unsqueeze", "NULL");
    FAIL_T(mft_squeeze(NULL, 0), MFT_ERR_NULL, "mft_squeeze", "NULL");
    FAIL_T(mft_expand(NULL, 2, s2), MFT_ERR_NULL, "mft_expand", "NULL");
    FAIL_T(mft_as_strided(NULL, 2, s2, st2, 0), MFT_ERR_NULL, "mft_as_strided", "NULL");
    FAIL_T(mft_view(NULL, 2, s2), MFT_ERR_NULL, "mft_view", "NULL");
    FAIL_T(mft_reshape(NULL, 2, s2), MFT_ERR_NULL, "mft_reshape", "NULL");
    FAIL_T(mft_flatten(NULL, 0, 1), MFT_ERR_NULL, "mft_flatten", "NULL");
    FAIL_T(mft_contiguous(NULL, MFT_CONTIGUOUS), MFT_ERR_NULL, "mft_contiguous", "NULL");
    FAIL_T(mft_to_format(NULL, MFT_CONTIGUOUS), MFT_ERR_NULL, "mft_to_format", "NULL");
    FAIL_T(mft_clone(NULL, MFT_PRESERVE), MFT_ERR_NULL, "mft_clone", "NULL");
    FAIL_T(mft_empty_like(NULL, MFT_PRESERVE), MFT_ERR_NULL, "mft_empty_like", "NULL");
    FAIL_T(mft_zeros_like(NULL, MFT_PRESERVE), MFT_ERR_NULL, "mft_zeros_like", "NULL");
    FAIL_T(mft_to_dtype(NULL, MFT_F64), MFT_ERR_NULL, "mft_to_dtype", "NULL");
    FAIL_T(mft_scope_keep(NULL), MFT_ERR_NULL, "mft_scope_keep", "NULL");

    tu_dst_state before = tu_snap(ok);
    FAIL_S(mft_copy_(NULL, ok), MFT_ERR_NULL, "mft_copy_", "dst");
    FAIL_S(mft_copy_(ok, NULL), MFT_ERR_NULL, "mft_copy_", "src");
    TU_CHECK_UNCHANGED(ok, before);
    FAIL_S(mft_tensor_set(NULL, idx, 1.0), MFT_ERR_NULL, "mft_tensor_set", "NULL");

    mft_clear_error();
    CHECK(isnan(mft_tensor_get(NULL, idx)));
    CHECK_ERR(MFT_ERR_NULL, "mft_tensor_get");
    CHECK(mft_tensor_hash(NULL) == 0);
    CHECK_ERR(MFT_ERR_NULL, "mft_tensor_hash");
    size_t need = mft_tensor_describe(NULL, buf, sizeof buf);
    CHECK(need > 0 && strlen(buf) < sizeof buf);
    CHECK_ERR(MFT_ERR_NULL, "mft_tensor_describe");

    /* accessors and lifetime accept NULL silently */
    mft_clear_error();
    CHECK(mft_tensor_retain(NULL) == NULL);
    mft_tensor_release(NULL);
    CHECK(mft_tensor_ndim(NULL) == 0);
    CHECK(mft_tensor_sizes(NULL) == NULL);
    CHECK(mft_tensor_strides(NULL) == NULL);
    CHECK(mft_tensor_offset(NULL) == 0);
    CHECK(mft_tensor_numel(NULL) == 0);
    CHECK(mft_tensor_data(NULL) == NULL);
    CHECK(mft_tensor_storage_numel(NULL) == 0);
    CHECK(!mft_tensor_shares_storage(NULL, ok));
    CHECK(!mft_tensor_shares_storage(ok, NULL));
    CHECK(mft_tensor_version(NULL) == 0);
    CHECK(!mft_tensor_is_contiguous(NULL, MFT_CONTIGUOUS));
    CHECK(!mft_tensor_is_dense(NULL));
    CHECK(!mft_tensor_strides_like_channels_last(NULL));
    CHECK(!mft_tensor_order_fits(NULL, MFT_CHANNELS_LAST));
    CHECK(mft_tensor_suggest_format(NULL) == MFT_CONTIGUOUS);
    (void)mft_tensor_format(NULL);
    (void)mft_tensor_format_origin(NULL);
    mft_tensor_release(ok);
}

static void test_null_pointer_args(void) {
    const int64_t s2[2] = {2, 3}, st2[2] = {3, 1};
    int64_t out[4] = {0};
    int m2m[4] = {0};
    char letters[8];
    float blob[8];
    mft_tensor *t = iota(2, s2, MFT_F32);

    FAIL_T(mft_empty(2, NULL, MFT_F32, MFT_CONTIGUOUS), MFT_ERR_NULL, "mft_empty", "sizes");
    FAIL_T(mft_zeros(2, NULL, MFT_F32, MFT_CONTIGUOUS), MFT_ERR_NULL, "mft_zeros", "sizes");
    FAIL_T(mft_ones(2, NULL, MFT_F32, MFT_CONTIGUOUS), MFT_ERR_NULL, "mft_ones", "sizes");
    FAIL_T(mft_full(2, NULL, MFT_F32, MFT_CONTIGUOUS, 1), MFT_ERR_NULL, "mft_full", "sizes");
    FAIL_T(mft_rand(2, NULL, MFT_F32, MFT_CONTIGUOUS, 1), MFT_ERR_NULL, "mft_rand", "sizes");
    FAIL_T(mft_randn(2, NULL, MFT_F32, MFT_CONTIGUOUS, 1), MFT_ERR_NULL, "mft_randn", "sizes");
    FAIL_T(mft_empty_strided(2, s2, NULL, MFT_F32), MFT_ERR_NULL, "mft_empty_strided", "strides");
    FAIL_T(mft_empty_strided(2, NULL, st2, MFT_F32), MFT_ERR_NULL, "mft_empty_strided", "sizes");
    FAIL_T(mft_from_blob(NULL, 64, 2, s2, NULL, 0, MFT_F32, count_deleter, NULL), MFT_ERR_NULL,
           "mft_from_blob", "data");
    FAIL_T(mft_from_blob(blob, sizeof blob, 2, NULL, NULL, 0, MFT_F32, count_deleter, NULL),
           MFT_ERR_NULL, "mft_from_blob", "sizes");
    CHECK_EQ_I(g_deleter_calls, 0);

    FAIL_T(mft_permute(t, NULL), MFT_ERR_NULL, "mft_permute", "dims");
    FAIL_T(mft_expand(t, 2, NULL), MFT_ERR_NULL, "mft_expand", "sizes");
    FAIL_T(mft_as_strided(t, 2, s2, NULL, 0), MFT_ERR_NULL, "mft_as_strided", "strides");
    FAIL_T(mft_as_strided(t, 2, NULL, st2, 0), MFT_ERR_NULL, "mft_as_strided", "sizes");
    FAIL_T(mft_view(t, 2, NULL), MFT_ERR_NULL, "mft_view", "sizes");
    FAIL_T(mft_reshape(t, 2, NULL), MFT_ERR_NULL, "mft_reshape", "sizes");

    tu_dst_state before = tu_snap(t);
    mft_clear_error();
    CHECK(isnan(mft_tensor_get(t, NULL)));
    CHECK_ERR(MFT_ERR_NULL, "mft_tensor_get");
    FAIL_S(mft_tensor_set(t, NULL, 5.0), MFT_ERR_NULL, "mft_tensor_set", "index");
    TU_CHECK_UNCHANGED(t, before);

    FAIL_S(mft_strides_from_minor_to_major(4, S4, NULL, out), MFT_ERR_NULL,
           "mft_strides_from_minor_to_major", "minor_to_major");
    FAIL_S(mft_strides_from_minor_to_major(4, NULL, m2m, out), MFT_ERR_NULL,
           "mft_strides_from_minor_to_major", "sizes");
    FAIL_S(mft_minor_to_major_from_strides(4, S4, NULL, m2m), MFT_ERR_NULL,
           "mft_minor_to_major_from_strides", "strides");
    FAIL_S(mft_strides_from_letters(4, S4, NULL, out), MFT_ERR_NULL, "mft_strides_from_letters",
           "letters");
    FAIL_S(mft_letters_from_strides(4, S4, NULL, letters, sizeof letters), MFT_ERR_NULL,
           "mft_letters_from_strides", "strides");
    FAIL_S(mft_strides_for_format(4, S4, MFT_CONTIGUOUS, NULL), MFT_ERR_NULL,
           "mft_strides_for_format", "strides_out");
    FAIL_S(mft_min_storage_numel(2, s2, st2, NULL), MFT_ERR_NULL, "mft_min_storage_numel",
           "numel_out");
    FAIL_S(mft_min_storage_numel(2, s2, NULL, out), MFT_ERR_NULL, "mft_min_storage_numel",
           "strides");
    /* Output pointers of the interop functions (the message must name the
     * function that was called, not a helper it delegates to). */
    FAIL_S(mft_minor_to_major_from_strides(2, s2, st2, NULL), MFT_ERR_NULL,
           "mft_minor_to_major_from_strides", "minor_to_major_out");
    FAIL_S(mft_strides_from_letters(4, S4, "NHWC", NULL), MFT_ERR_NULL, "mft_strides_from_letters",
           "strides_out");
    mft_tensor_release(t);
}

/* NULL propagation (docs/architecture.md §3): a chain of calls fed the NULL result of a
 * failing call keeps the first status and message. */
static void test_null_propagation(void) {
    const int bad[4] = {0, 1, 1, 2};
    const int64_t idx[2] = {0, 0}, s1[1] = {-1};
    char first[512], buf[64];
    mft_tensor *t = mft_zeros(4, S4, MFT_F32, MFT_CHANNELS_LAST);
    tu_dst_state before = tu_snap(t);

    mft_clear_error();
    mft_tensor *a = mft_permute(t, bad);
    CHECK(a == NULL);
    CHECK_EQ_I(mft_last_error(), MFT_ERR_DIM);
    snprintf(first, sizeof first, "%s", mft_last_error_message());
    CHECK(strstr(first, "mft_permute") != NULL);

    mft_tensor *b = mft_transpose(a, 0, 1);
    mft_tensor *c = mft_contiguous(b, MFT_CHANNELS_LAST);
    mft_tensor *d = mft_clone(c, MFT_PRESERVE);
    mft_tensor *e = mft_view(d, 1, s1);
    mft_tensor *f = mft_reshape(e, 1, s1);
    mft_tensor *g = mft_narrow(f, 0, 0, 1);
    mft_tensor *h = mft_to_dtype(g, MFT_F64);
    mft_tensor *i = mft_to_format(h, MFT_CONTIGUOUS);
    mft_tensor *j = mft_empty_like(i, MFT_PRESERVE);
    mft_tensor *k = mft_zeros_like(j, MFT_PRESERVE);
    mft_tensor *l = mft_expand(k, 1, s1);
    mft_tensor *m = mft_flatten(l, 0, -1);
    mft_tensor *n = mft_select(m, 0, 0);
    mft_tensor *o = mft_slice(n, 0, 0, 1, 1);
    mft_tensor *p = mft_unsqueeze(o, 0);
    mft_tensor *q = mft_squeeze(p, 0);
    mft_tensor *r = mft_scope_keep(q);
    CHECK(!b && !c && !d && !e && !f && !g && !h && !i && !j && !k && !l && !m && !n && !o && !p &&
          !q && !r);
    /* "A NULL tensor argument makes the call fail with MFT_ERR_NULL but keeps
     * an earlier error message" (tensor.h) */
    mft_status st = mft_copy_(t, r);
    CHECK_MSG(st == MFT_ERR_NULL, "copy_(t, NULL) returned %s", mft_status_str(st));
    st = mft_copy_(r, t);
    CHECK_MSG(st == MFT_ERR_NULL, "copy_(NULL, t) returned %s", mft_status_str(st));
    st = mft_tensor_set(r, idx, 1.0);
    CHECK_MSG(st == MFT_ERR_NULL, "set(NULL) returned %s", mft_status_str(st));
    CHECK(isnan(mft_tensor_get(r, idx)));
    CHECK(mft_tensor_hash(r) == 0);
    mft_tensor_describe(r, buf, sizeof buf);
    TU_CHECK_UNCHANGED(t, before);
    CHECK_EQ_I(mft_last_error(), MFT_ERR_DIM);
    CHECK_MSG(strcmp(mft_last_error_message(), first) == 0, "first message '%s' replaced by '%s'",
              first, mft_last_error_message());

    /* a new failure with real (non-NULL) arguments does replace it */
    FAIL_T(mft_narrow(t, 1, 2, 5), MFT_ERR_DIM, "mft_narrow", "length 5");
    mft_tensor_release(t);
}

/* ------------------------------------------------------------------ rank */

static void test_rank(void) {
    const int64_t s2[2] = {2, 3};
    const int64_t st9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    int64_t out[9];
    int m2m[9];
    float blob[4];
    mft_tensor *t = iota(2, s2, MFT_F32);

    for (int pass = 0; pass < 2; pass++) {
        int nd = pass ? -1 : MFT_MAX_DIMS + 1;
        const char *v = pass ? "ndim -1" : "ndim 9";
        FAIL_T(mft_empty(nd, S9, MFT_F32, MFT_CONTIGUOUS), MFT_ERR_RANK, "mft_empty", v);
        FAIL_T(mft_zeros(nd, S9, MFT_F32, MFT_CONTIGUOUS), MFT_ERR_RANK, "mft_zeros", v);
        FAIL_T(mft_ones(nd, S9, MFT_F32, MFT_CONTIGUOUS), MFT_ERR_RANK, "mft_ones", v);
        FAIL_T(mft_full(nd, S9, MFT_F32, MFT_CONTIGUOUS, 2), MFT_ERR_RANK, "mft_full", v);
        FAIL_T(mft_rand(nd, S9, MFT_F32, MFT_CONTIGUOUS, 1), MFT_ERR_RANK, "mft_rand", v);
        FAIL_T(mft_randn(nd, S9, MFT_F64, MFT_CONTIGUOUS, 1), MFT_ERR_RANK, "mft_randn", v);
        FAIL_T(mft_empty_strided(nd, S9, st9, MFT_F32), MFT_ERR_RANK, "mft_empty_strided", v);
        FAIL_T(mft_from_blob(blob, sizeof blob, nd, S9, st9, 0, MFT_F32, count_deleter, NULL),
               MFT_ERR_RANK, "mft_from_blob", v);
        FAIL_T(mft_as_strided(t, nd, S9, st9, 0), MFT_ERR_RANK, "mft_as_strided", v);
        FAIL_T(mft_view(t, nd, S9), MFT_ERR_RANK, "mft_view", v);
        FAIL_T(mft_reshape(t, nd, S9), MFT_ERR_RANK, "mft_reshape", v);
        FAIL_T(mft_expand(t, nd, S9), MFT_ERR_RANK, "mft_expand", pass ? "-1" : "9");
        FAIL_S(mft_strides_from_minor_to_major(nd, S9, m2m, out), MFT_ERR_RANK,
               "mft_strides_from_minor_to_major", v);
        FAIL_S(mft_minor_to_major_from_strides(nd, S9, st9, m2m), MFT_ERR_RANK,
               "mft_minor_to_major_from_strides", v);
        FAIL_S(mft_strides_for_format(nd, S9, MFT_CONTIGUOUS, out), MFT_ERR_RANK,
               "mft_strides_for_format", v);
        FAIL_S(mft_min_storage_numel(nd, S9, st9, out), MFT_ERR_RANK, "mft_min_storage_numel", v);
        FAIL_S(mft_strides_from_letters(nd, S9, "NCHW", out), MFT_ERR_RANK,
               "mft_strides_from_letters", pass ? "-1" : "9");
    }
    CHECK_EQ_I(g_deleter_calls, 0);

    /* expand to a lower rank */
    FAIL_T(mft_expand(t, 1, s2), MFT_ERR_RANK, "mft_expand", "rank 2 to rank 1");
    /* unsqueeze beyond MFT_MAX_DIMS */
    mft_tensor *t8 = mft_zeros(8, S9, MFT_F32, MFT_CONTIGUOUS);
    CHECK(t8 != NULL);
    FAIL_T(mft_unsqueeze(t8, 0), MFT_ERR_RANK, "mft_unsqueeze", "9");
    mft_tensor_release(t8);
    /* rank-0 tensors have nothing to narrow, select or slice */
    mft_tensor *s0 = mft_full(0, NULL, MFT_F32, MFT_CONTIGUOUS, 3);
    CHECK(s0 != NULL);
    FAIL_T(mft_narrow(s0, 0, 0, 1), MFT_ERR_RANK, "mft_narrow", "rank-0");
    FAIL_T(mft_select(s0, 0, 0), MFT_ERR_RANK, "mft_select", "rank-0");
    FAIL_T(mft_slice(s0, 0, 0, 1, 1), MFT_ERR_RANK, "mft_slice", "rank-0");
    mft_tensor_release(s0);
    mft_tensor_release(t);
}

/* ------------------------------------------------------------------ sizes and strides */

static void test_negative_sizes(void) {
    const int64_t neg[2] = {2, -3}, st[2] = {3, 1}, s2[2] = {2, 3};
    int64_t out[2] = {0};
    int m2m[2] = {0, 1};
    float blob[16];
    mft_tensor *t = iota(2, s2, MFT_F32);

    FAIL_T(mft_empty(2, neg, MFT_F32, MFT_CONTIGUOUS), MFT_ERR_INVALID, "mft_empty", "-3");
    FAIL_T(mft_zeros(2, neg, MFT_F32, MFT_CONTIGUOUS), MFT_ERR_INVALID, "mft_zeros", "-3");
    FAIL_T(mft_ones(2, neg, MFT_F32, MFT_CONTIGUOUS), MFT_ERR_INVALID, "mft_ones", "-3");
    FAIL_T(mft_full(2, neg, MFT_F32, MFT_CONTIGUOUS, 1), MFT_ERR_INVALID, "mft_full", "-3");
    FAIL_T(mft_rand(2, neg, MFT_F32, MFT_CONTIGUOUS, 1), MFT_ERR_INVALID, "mft_rand", "-3");
    FAIL_T(mft_randn(2, neg, MFT_F32, MFT_CONTIGUOUS, 1), MFT_ERR_INVALID, "mft_randn", "-3");
    FAIL_T(mft_empty_strided(2, neg, st, MFT_F32), MFT_ERR_INVALID, "mft_empty_strided", "-3");
    FAIL_T(mft_from_blob(blob, sizeof blob, 2, neg, st, 0, MFT_F32, count_deleter, NULL),
           MFT_ERR_INVALID, "mft_from_blob", "-3");
    FAIL_T(mft_from_blob(blob, sizeof blob, 2, neg, NULL, 0, MFT_F32, count_deleter, NULL),
           MFT_ERR_INVALID, "mft_from_blob", "-3");
    FAIL_T(mft_as_strided(t, 2, neg, st, 0), MFT_ERR_INVALID, "mft_as_strided", "-3");
    CHECK_EQ_I(g_deleter_calls, 0);
    /* view/reshape: -1 is "infer", other negative sizes are bad shapes */
    const int64_t vneg[2] = {-2, -3}, two_infer[2] = {-1, -1};
    FAIL_T(mft_view(t, 2, vneg), MFT_ERR_SHAPE, "mft_view", "[-2,-3]");
    FAIL_T(mft_reshape(t, 2, vneg), MFT_ERR_SHAPE, "mft_reshape", "[-2,-3]");
    FAIL_T(mft_view(t, 2, two_infer), MFT_ERR_SHAPE, "mft_view", "[-1,-1]");
    /* expand: -1 only keeps an existing size */
    const int64_t e1[3] = {-1, 2, 3}, e2[2] = {2, -2};
    FAIL_T(mft_expand(t, 3, e1), MFT_ERR_SHAPE, "mft_expand", "-1");
    FAIL_T(mft_expand(t, 2, e2), MFT_ERR_SHAPE, "mft_expand", "-2");
    /* interop */
    FAIL_S(mft_min_storage_numel(2, neg, st, out), MFT_ERR_INVALID, "mft_min_storage_numel", "-3");
    FAIL_S(mft_strides_for_format(2, neg, MFT_CONTIGUOUS, out), MFT_ERR_INVALID,
           "mft_strides_for_format", "-3");
    FAIL_S(mft_strides_from_minor_to_major(2, neg, m2m, out), MFT_ERR_INVALID,
           "mft_strides_from_minor_to_major", "-3");
    FAIL_S(mft_minor_to_major_from_strides(2, neg, st, m2m), MFT_ERR_INVALID,
           "mft_minor_to_major_from_strides", "-3");
    const int64_t neg4[4] = {2, -3, 4, 5};
    int64_t out4[4];
    FAIL_S(mft_strides_from_letters(4, neg4, "NHWC", out4), MFT_ERR_INVALID,
           "mft_strides_from_letters", "-3");
    mft_tensor_release(t);
}

static void test_overflow(void) {
    const int64_t one[2] = {1, 1};
    const int64_t big31[2] = {INT64_C(1) << 31, INT64_C(1) << 31};
    const int64_t s2[2] = {2, 2}, st_huge[2] = {INT64_C(1) << 62, INT64_C(1) << 62};
    const int64_t s_reach[2] = {INT64_C(1) << 40, 2}, st_reach[2] = {INT64_C(1) << 40, 1};
    const int64_t s1[1] = {2}, st_bytes[1] = {INT64_C(1) << 62};
    int64_t out[2];
    int m2m[2] = {1, 0};
    float blob[16];

    /* element count */
    FAIL_T(mft_empty(2, BIG2, MFT_F32, MFT_CONTIGUOUS), MFT_ERR_OVERFLOW, "mft_empty",
           "1099511627776");
    FAIL_T(mft_zeros(2, BIG2, MFT_U8, MFT_CONTIGUOUS), MFT_ERR_OVERFLOW, "mft_zeros",
           "1099511627776");
    FAIL_T(mft_ones(2, BIG2, MFT_F32, MFT_CONTIGUOUS), MFT_ERR_OVERFLOW, "mft_ones",
           "1099511627776");
    FAIL_T(mft_full(2, BIG2, MFT_F32, MFT_CONTIGUOUS, 1), MFT_ERR_OVERFLOW, "mft_full",
           "1099511627776");
    FAIL_T(mft_rand(2, BIG2, MFT_F32, MFT_CONTIGUOUS, 1), MFT_ERR_OVERFLOW, "mft_rand",
           "1099511627776");
    FAIL_T(mft_randn(2, BIG2, MFT_F32, MFT_CONTIGUOUS, 1), MFT_ERR_OVERFLOW, "mft_randn",
           "1099511627776");
    FAIL_T(mft_from_blob(blob, sizeof blob, 2, BIG2, NULL, 0, MFT_F32, count_deleter, NULL),
           MFT_ERR_OVERFLOW, "mft_from_blob", "1099511627776");
    FAIL_S(mft_strides_for_format(2, BIG2, MFT_CONTIGUOUS, out), MFT_ERR_OVERFLOW,
           "mft_strides_for_format", "1099511627776");
    FAIL_S(mft_strides_from_minor_to_major(2, BIG2, m2m, out), MFT_ERR_OVERFLOW,
           "mft_strides_from_minor_to_major", "1099511627776");
    /* byte size: 2^62 elements fit, 2^62 * 8 bytes do not */
    FAIL_T(mft_empty(2, big31, MFT_F64, MFT_CONTIGUOUS), MFT_ERR_OVERFLOW, "mft_empty",
           "2147483648");
    /* reach of the strides */
    FAIL_T(mft_empty_strided(2, s2, st_huge, MFT_F32), MFT_ERR_OVERFLOW, "mft_empty_strided",
           "4611686018427387904");
    FAIL_T(mft_empty_strided(2, s_reach, st_reach, MFT_U8), MFT_ERR_OVERFLOW, "mft_empty_strided",
           "1099511627776");
    FAIL_T(mft_empty_strided(1, s1, st_bytes, MFT_F32), MFT_ERR_OVERFLOW, "mft_empty_strided",
           "4611686018427387904");
    FAIL_T(mft_from_blob(blob, sizeof blob, 2, s2, st_huge, 0, MFT_F32, count_deleter, NULL),
           MFT_ERR_OVERFLOW, "mft_from_blob", "4611686018427387904");
    FAIL_S(mft_min_storage_numel(2, s2, st_huge, out), MFT_ERR_OVERFLOW, "mft_min_storage_numel",
           "4611686018427387904");
    FAIL_S(mft_minor_to_major_from_strides(2, s2, st_huge, m2m), MFT_ERR_OVERFLOW,
           "mft_minor_to_major_from_strides", "4611686018427387904");
    CHECK_EQ_I(g_deleter_calls, 0);

    mft_tensor *t = mft_zeros(2, one, MFT_F32, MFT_CONTIGUOUS);
    FAIL_T(mft_as_strided(t, 2, s2, st_huge, 0), MFT_ERR_OVERFLOW, "mft_as_strided",
           "4611686018427387904");
    FAIL_T(mft_expand(t, 2, BIG2), MFT_ERR_OVERFLOW, "mft_expand", "1099511627776");
    /* Note [Geometry bound]: no tensor, not even a broadcast view, counts more
     * than 2^59 bytes of elements (so every copy of it is addressable); a
     * broadcast view of 2^58 bytes is fine, its f64 copy (2^61) is not */
    const int64_t huge1[1] = {INT64_C(1) << 61}, big1[1] = {INT64_C(1) << 58}, one1[1] = {1};
    mft_tensor *u = mft_zeros(1, one1, MFT_U8, MFT_CONTIGUOUS), *x = NULL;
    FAIL_T(mft_expand(u, 1, huge1), MFT_ERR_OVERFLOW, "mft_expand", "2305843009213693952");
    OK_T(x, mft_expand(u, 1, big1));
    FAIL_T(mft_to_dtype(x, MFT_F64), MFT_ERR_OVERFLOW, "mft_to_dtype", "288230376151711744");
    mft_tensor_release(x);
    mft_tensor_release(u);
    /* arange with more elements than can be counted */
    FAIL_T(mft_arange(0, 1e300, 1, MFT_F32), MFT_ERR_OVERFLOW, "mft_arange", "1e+300");
    mft_tensor_release(t);
}

static void test_negative_strides(void) {
    const int64_t s2[2] = {2, 3}, st[2] = {-3, 1};
    int64_t out[2];
    int m2m[2];
    float blob[16];
    char letters[8];
    const int64_t neg4[4] = {60, -1, 15, 3};
    mft_tensor *t = iota(2, s2, MFT_F32);
    FAIL_T(mft_empty_strided(2, s2, st, MFT_F32), MFT_ERR_INVALID, "mft_empty_strided", "-3");
    FAIL_T(mft_from_blob(blob + 8, 8 * sizeof(float), 2, s2, st, 3, MFT_F32, count_deleter, NULL),
           MFT_ERR_INVALID, "mft_from_blob", "-3");
    FAIL_T(mft_as_strided(t, 2, s2, st, 3), MFT_ERR_INVALID, "mft_as_strided", "-3");
    FAIL_S(mft_min_storage_numel(2, s2, st, out), MFT_ERR_INVALID, "mft_min_storage_numel", "-3");
    FAIL_S(mft_minor_to_major_from_strides(2, s2, st, m2m), MFT_ERR_INVALID,
           "mft_minor_to_major_from_strides", "-3");
    FAIL_S(mft_letters_from_strides(4, S4, neg4, letters, sizeof letters), MFT_ERR_INVALID,
           "mft_letters_from_strides", "-1");
    CHECK_EQ_I(g_deleter_calls, 0);
    mft_tensor_release(t);
}

/* ------------------------------------------------------------------ views */

static void test_dims_out_of_range(void) {
    mft_tensor *t = mft_zeros(4, S4, MFT_F32, MFT_CONTIGUOUS), *v = NULL;
    const int bad_dims[4] = {4, -5, 100, INT_MIN};
    const char *bad_txt[4] = {"dim 4", "dim -5", "dim 100", "dim -2147483648"};
    for (int k = 0; k < 4; k++) {
        int d = bad_dims[k];
        const char *txt = bad_txt[k];
        FAIL_T(mft_transpose(t, d, 0), MFT_ERR_DIM, "mft_transpose", txt);
        FAIL_T(mft_transpose(t, 0, d), MFT_ERR_DIM, "mft_transpose", txt);
        FAIL_T(mft_narrow(t, d, 0, 1), MFT_ERR_DIM, "mft_narrow", txt);
        FAIL_T(mft_select(t, d, 0), MFT_ERR_DIM, "mft_select", txt);
        FAIL_T(mft_slice(t, d, 0, 1, 1), MFT_ERR_DIM, "mft_slice", txt);
        FAIL_T(mft_squeeze(t, d), MFT_ERR_DIM, "mft_squeeze", txt);
        FAIL_T(mft_flatten(t, d, 3), MFT_ERR_DIM, "mft_flatten", txt);
        FAIL_T(mft_flatten(t, 0, d), MFT_ERR_DIM, "mft_flatten", txt);
    }
    /* unsqueeze accepts -5..4 on rank 4 */
    FAIL_T(mft_unsqueeze(t, 5), MFT_ERR_DIM, "mft_unsqueeze", "dim 5");
    FAIL_T(mft_unsqueeze(t, -6), MFT_ERR_DIM, "mft_unsqueeze", "dim -6");
    OK_T(v, mft_unsqueeze(t, 4));
    mft_tensor_release(v);
    OK_T(v, mft_unsqueeze(t, -5));
    mft_tensor_release(v);
    /* negative dims in range work */
    OK_T(v, mft_transpose(t, -1, -4));
    CHECK(v && mft_tensor_sizes(v)[0] == 5 && mft_tensor_sizes(v)[3] == 2);
    mft_tensor_release(v);
    /* flatten: start after end */
    FAIL_T(mft_flatten(t, 2, 1), MFT_ERR_DIM, "mft_flatten", "start dim 2");
    FAIL_T(mft_flatten(t, -1, 0), MFT_ERR_DIM, "mft_flatten", "");
    /* rank 0: only dims -1 and 0 exist */
    mft_tensor *s = mft_zeros(0, NULL, MFT_F32, MFT_CONTIGUOUS);
    FAIL_T(mft_transpose(s, 1, 0), MFT_ERR_DIM, "mft_transpose", "dim 1");
    FAIL_T(mft_squeeze(s, -2), MFT_ERR_DIM, "mft_squeeze", "dim -2");
    FAIL_T(mft_unsqueeze(s, 2), MFT_ERR_DIM, "mft_unsqueeze", "dim 2");
    FAIL_T(mft_flatten(s, 0, 1), MFT_ERR_DIM, "mft_flatten", "dim 1");
    mft_tensor_release(s);
    mft_tensor_release(t);
}

static void test_bad_permutation(void) {
    mft_tensor *t = mft_zeros(4, S4, MFT_F32, MFT_CHANNELS_LAST), *v = NULL;
    const int rep[4] = {0, 1, 1, 2}, oor[4] = {0, 1, 2, 4}, noor[4] = {0, 1, 2, -5},
              negrep[4] = {0, 1, 3, -1}, ok[4] = {0, -2, -1, 1};
    FAIL_T(mft_permute(t, rep), MFT_ERR_DIM, "mft_permute", "[0,1,1,2]");
    FAIL_T(mft_permute(t, oor), MFT_ERR_DIM, "mft_permute", "[0,1,2,4]");
    FAIL_T(mft_permute(t, noor), MFT_ERR_DIM, "mft_permute", "[0,1,2,-5]");
    FAIL_T(mft_permute(t, negrep), MFT_ERR_DIM, "mft_permute", "[0,1,3,-1]");
    OK_T(v, mft_permute(t, ok));
    const int64_t want[4] = {2, 4, 5, 3};
    CHECK(tu_has_sizes(v, 4, want));
    CHECK(v && mft_tensor_is_contiguous(v, MFT_CONTIGUOUS)); /* NHWC permuted to N,H,W,C */
    mft_tensor_release(v);
    mft_tensor_release(t);
}

static void test_narrow_select_slice(void) {
    const int64_t s2[2] = {4, 3};
    mft_tensor *t = iota(2, s2, MFT_F32), *v = NULL;
    /* narrow */
    FAIL_T(mft_narrow(t, 1, 2, 2), MFT_ERR_DIM, "mft_narrow", "start 2 length 2");
    FAIL_T(mft_narrow(t, 1, 4, 0), MFT_ERR_DIM, "mft_narrow", "start 4");
    FAIL_T(mft_narrow(t, 1, -4, 1), MFT_ERR_DIM, "mft_narrow", "start -4");
    FAIL_T(mft_narrow(t, 1, 0, -1), MFT_ERR_DIM, "mft_narrow", "length -1");
    FAIL_T(mft_narrow(t, 1, 1, INT64_MAX), MFT_ERR_DIM, "mft_narrow", "9223372036854775807");
    FAIL_T(mft_narrow(t, 1, INT64_MIN, 1), MFT_ERR_DIM, "mft_narrow", "-9223372036854775808");
    OK_T(v, mft_narrow(t, 1, 3, 0)); /* empty at the end is fine */
    CHECK(v && mft_tensor_numel(v) == 0);
    mft_tensor_release(v);
    OK_T(v, mft_narrow(t, 1, -1, 1));
    CHECK(v && mft_tensor_offset(v) == 2);
    mft_tensor_release(v);
    /* select */
    FAIL_T(mft_select(t, 1, 3), MFT_ERR_DIM, "mft_select", "index 3");
    FAIL_T(mft_select(t, 0, -5), MFT_ERR_DIM, "mft_select", "index -5");
    FAIL_T(mft_select(t, 0, INT64_MIN), MFT_ERR_DIM, "mft_select", "-9223372036854775808");
    FAIL_T(mft_select(t, 0, INT64_MAX), MFT_ERR_DIM, "mft_select", "9223372036854775807");
    OK_T(v, mft_select(t, 0, -4));
    CHECK(v && mft_tensor_ndim(v) == 1 && mft_tensor_offset(v) == 0);
    mft_tensor_release(v);
    /* slice: step must be positive; start/end clamp as in Python */
    FAIL_T(mft_slice(t, 0, 0, 4, 0), MFT_ERR_INVALID, "mft_slice", "step 0");
    FAIL_T(mft_slice(t, 0, 0, 4, -1), MFT_ERR_INVALID, "mft_slice", "step -1");
    FAIL_T(mft_slice(t, 0, 0, 4, INT64_MIN), MFT_ERR_INVALID, "mft_slice", "-9223372036854775808");
    OK_T(v, mft_slice(t, 0, -100, 100, 1));
    CHECK(v && mft_tensor_sizes(v)[0] == 4);
    mft_tensor_release(v);
    OK_T(v, mft_slice(t, 0, 5, 10, 1));
    CHECK(v && mft_tensor_sizes(v)[0] == 0);
    mft_tensor_release(v);
    OK_T(v, mft_slice(t, 0, 3, 1, 1));
    CHECK(v && mft_tensor_sizes(v)[0] == 0);
    mft_tensor_release(v);
    OK_T(v, mft_slice(t, 0, INT64_MIN, INT64_MAX, 3));
    CHECK(v && mft_tensor_sizes(v)[0] == 2 && mft_tensor_strides(v)[0] == 9);
    mft_tensor_release(v);
    mft_tensor_release(t);
}

static void test_expand_bad(void) {
    const int64_t s2[2] = {2, 3}, bad1[2] = {2, 4}, bad2[2] = {3, 3}, bad3[3] = {4, 3, 3},
                  bad4[3] = {4, 2, 4};
    const int64_t s13[2] = {1, 3}, okx[3] = {4, 2, 3}, okx2[3] = {5, -1, -1};
    mft_tensor *t = iota(2, s2, MFT_F32), *row = iota(2, s13, MFT_F32), *v = NULL;
    FAIL_T(mft_expand(t, 2, bad1), MFT_ERR_SHAPE, "mft_expand", "[2,4]");
    FAIL_T(mft_expand(t, 2, bad2), MFT_ERR_SHAPE, "mft_expand", "[3,3]");
    FAIL_T(mft_expand(t, 3, bad3), MFT_ERR_SHAPE, "mft_expand", "[2,3]");
    FAIL_T(mft_expand(row, 3, bad4), MFT_ERR_SHAPE, "mft_expand", "[4,2,4]");
    OK_T(v, mft_expand(row, 3, okx));
    CHECK(tu_has_sizes(v, 3, okx) && mft_tensor_strides(v)[0] == 0 &&
          mft_tensor_strides(v)[1] == 0);
    mft_tensor_release(v);
    OK_T(v, mft_expand(t, 3, okx2));
    const int64_t want[3] = {5, 2, 3};
    CHECK(tu_has_sizes(v, 3, want));
    mft_tensor_release(v);
    mft_tensor_release(row);
    mft_tensor_release(t);
}

static void test_view_not_viewable(void) {
    const int64_t s2[2] = {3, 4}, flat[1] = {12}, infer[1] = {-1}, wrong[1] = {13},
                  wrong2[2] = {5, -1}, s0[2] = {0, 4}, bad0[2] = {0, -1};
    mft_tensor *t = iota(2, s2, MFT_F32), *tr = mft_transpose(t, 0, 1), *v = NULL;
    FAIL_T(mft_view(tr, 1, flat), MFT_ERR_NOT_VIEWABLE, "mft_view", "[1,4]");
    FAIL_T(mft_view(tr, 1, infer), MFT_ERR_NOT_VIEWABLE, "mft_view", "[4,3]");
    /* reshape copies instead, without touching the error state */
    mft_clear_error();
    OK_T(v, mft_reshape(tr, 1, flat));
    CHECK_EQ_I(mft_last_error(), MFT_OK);
    CHECK(v && !mft_tensor_shares_storage(v, t));
    if (v) {
        /* logical order of the transpose: 0,4,8,1,5,9,... */
        const int64_t i1[1] = {1}, i3[1] = {3}, i11[1] = {11};
        CHECK_NEAR(mft_tensor_get(v, i1), 4, 0);
        CHECK_NEAR(mft_tensor_get(v, i3), 1, 0);
        CHECK_NEAR(mft_tensor_get(v, i11), 11, 0);
    }
    mft_tensor_release(v);
    OK_T(v, mft_flatten(tr, 0, 1)); /* flatten copies too */
    CHECK(v && !mft_tensor_shares_storage(v, t) && mft_tensor_numel(v) == 12);
    mft_tensor_release(v);
    OK_T(v, mft_view(t, 1, infer)); /* the untransposed tensor views fine */
    CHECK(v && mft_tensor_shares_storage(v, t));
    mft_tensor_release(v);
    /* element counts that do not match */
    FAIL_T(mft_view(t, 1, wrong), MFT_ERR_SHAPE, "mft_view", "[13]");
    FAIL_T(mft_reshape(tr, 1, wrong), MFT_ERR_SHAPE, "mft_reshape", "[13]");
    FAIL_T(mft_view(t, 2, wrong2), MFT_ERR_SHAPE, "mft_view", "[5,-1]");
    mft_tensor *e = mft_zeros(2, s0, MFT_F32, MFT_CONTIGUOUS);
    FAIL_T(mft_view(e, 2, bad0), MFT_ERR_SHAPE, "mft_view", "[0,-1]");
    mft_tensor_release(e);
    mft_tensor_release(tr);
    mft_tensor_release(t);
}

static void test_as_strided_bad(void) {
    const int64_t s12[1] = {12}, s44[2] = {4, 4}, st44[2] = {4, 1}, s34[2] = {3, 4}, st1[1] = {1},
                  s2[1] = {2}, s22[2] = {2, 2}, st11[2] = {1, 1};
    mft_tensor *t = iota(1, s12, MFT_F32), *v = NULL;
    FAIL_T(mft_as_strided(t, 2, s44, st44, 0), MFT_ERR_BOUNDS, "mft_as_strided", "12 elements");
    FAIL_T(mft_as_strided(t, 1, s12, st1, 1), MFT_ERR_BOUNDS, "mft_as_strided", "offset 1");
    FAIL_T(mft_as_strided(t, 1, s2, st1, 11), MFT_ERR_BOUNDS, "mft_as_strided", "offset 11");
    FAIL_T(mft_as_strided(t, 1, s2, st1, -1), MFT_ERR_INVALID, "mft_as_strided", "-1");
    FAIL_T(mft_as_strided(t, 1, s2, st1, INT64_MIN), MFT_ERR_INVALID, "mft_as_strided",
           "-9223372036854775808");
    /* a view of a narrow still sees the whole storage, but no more */
    mft_tensor *n = mft_narrow(t, 0, 4, 4);
    OK_T(v, mft_as_strided(n, 1, s12, st1, 0));
    mft_tensor_release(v);
    FAIL_T(mft_as_strided(n, 1, s12, st1, 1), MFT_ERR_BOUNDS, "mft_as_strided", "12");
    mft_tensor_release(n);
    /* just inside */
    OK_T(v, mft_as_strided(t, 2, s34, st44, 0));
    mft_tensor_release(v);
    OK_T(v, mft_as_strided(t, 1, s2, st1, 10));
    mft_tensor_release(v);
    /* overlapping views are allowed, and never dense */
    OK_T(v, mft_as_strided(t, 2, s22, st11, 0));
    CHECK(v && !mft_tensor_is_dense(v));
    mft_tensor_release(v);
    mft_tensor_release(t);
}

/* ------------------------------------------------------------------ from_blob */

static void test_from_blob(void) {
    _Alignas(64) float buf[64];
    for (int i = 0; i < 64; i++) buf[i] = (float)i;
    const int64_t s48[2] = {4, 8}, s35[2] = {3, 5}, pitch[2] = {8, 1};
    const int64_t nhwc[4] = {1, 3, 2, 2}, nhwc_pad[4] = {16, 1, 8, 4};
    mft_tensor *t = NULL;
    g_deleter_calls = 0;

    /* packed: exactly 128 bytes needed */
    FAIL_T(mft_from_blob(buf, 31 * sizeof(float), 2, s48, NULL, 0, MFT_F32, count_deleter, NULL),
           MFT_ERR_BOUNDS, "mft_from_blob", "124 bytes");
    FAIL_T(mft_from_blob(buf, 32 * sizeof(float), 2, s48, NULL, 1, MFT_F32, count_deleter, NULL),
           MFT_ERR_BOUNDS, "mft_from_blob", "offset 1");
    FAIL_T(
        mft_from_blob(buf, 32 * sizeof(float) - 1, 2, s48, NULL, 0, MFT_F32, count_deleter, NULL),
        MFT_ERR_BOUNDS, "mft_from_blob", "127 bytes");
    CHECK_EQ_I(g_deleter_calls, 0);
    OK_T(t, mft_from_blob(buf, 32 * sizeof(float), 2, s48, NULL, 0, MFT_F32, count_deleter, NULL));
    mft_tensor_release(t);
    CHECK_EQ_I(g_deleter_calls, 1);

    /* a row pitch of 8 for 5 valid floats: 2*8 + 4 + 1 = 21 elements needed */
    FAIL_T(
        mft_from_blob(buf, 21 * sizeof(float) - 1, 2, s35, pitch, 0, MFT_F32, count_deleter, NULL),
        MFT_ERR_BOUNDS, "mft_from_blob", "[8,1]");
    FAIL_T(mft_from_blob(buf, 21 * sizeof(float), 2, s35, pitch, 1, MFT_F32, count_deleter, NULL),
           MFT_ERR_BOUNDS, "mft_from_blob", "22");
    OK_T(t, mft_from_blob(buf, 21 * sizeof(float), 2, s35, pitch, 0, MFT_F32, count_deleter, NULL));
    if (t) {
        const int64_t last[2] = {2, 4};
        CHECK_NEAR(mft_tensor_get(t, last), 20, 0);
        CHECK(!mft_tensor_is_dense(t));
    }
    mft_tensor_release(t);
    OK_T(t, mft_from_blob(buf, 22 * sizeof(float), 2, s35, pitch, 1, MFT_F32, NULL, NULL));
    mft_tensor_release(t);
    CHECK_EQ_I(g_deleter_calls, 2);

    /* NHWC with room for 4 channels of which 3 are used: 1 + 2 + 8 + 4 = 15 */
    FAIL_T(
        mft_from_blob(buf, 14 * sizeof(float), 4, nhwc, nhwc_pad, 0, MFT_F32, count_deleter, NULL),
        MFT_ERR_BOUNDS, "mft_from_blob", "56 bytes");
    OK_T(t, mft_from_blob(buf, 15 * sizeof(float), 4, nhwc, nhwc_pad, 0, MFT_F32, count_deleter,
                          NULL));
    CHECK(t && mft_tensor_format(t) == MFT_CHANNELS_LAST);
    mft_tensor_release(t);
    CHECK_EQ_I(g_deleter_calls, 3);

    /* negative offset, offset overflow, misaligned data */
    FAIL_T(mft_from_blob(buf, sizeof buf, 2, s48, NULL, -1, MFT_F32, count_deleter, NULL),
           MFT_ERR_INVALID, "mft_from_blob", "-1");
    FAIL_T(mft_from_blob(buf, sizeof buf, 2, s48, NULL, INT64_MAX, MFT_F32, count_deleter, NULL),
           MFT_ERR_OVERFLOW, "mft_from_blob", "9223372036854775807");
    FAIL_T(mft_from_blob((char *)buf + 1, 32, 1, s48 + 1, NULL, 0, MFT_F32, count_deleter, NULL),
           MFT_ERR_INVALID, "mft_from_blob", "aligned");
    FAIL_T(mft_from_blob((char *)buf + 4, 64, 1, s48 + 1, NULL, 0, MFT_F64, count_deleter, NULL),
           MFT_ERR_INVALID, "mft_from_blob", "f64");
    FAIL_T(mft_from_blob(buf, sizeof buf, 2, s48, NULL, 0, (mft_dtype)99, count_deleter, NULL),
           MFT_ERR_DTYPE, "mft_from_blob", "99");
    CHECK_EQ_I(g_deleter_calls, 3);
    /* u8 has no alignment requirement */
    OK_T(t, mft_from_blob((char *)buf + 1, 8, 1, s48 + 1, NULL, 0, MFT_U8, count_deleter, NULL));
    mft_tensor_release(t);
    CHECK_EQ_I(g_deleter_calls, 4);
    /* a view of the wrapped tensor outlives the first header; the deleter
     * runs once, when the last user goes */
    mft_tensor *v = NULL;
    OK_T(t, mft_from_blob(buf, sizeof buf, 2, s48, NULL, 0, MFT_F32, count_deleter, NULL));
    OK_T(v, mft_transpose(t, 0, 1));
    mft_tensor_release(t);
    CHECK_EQ_I(g_deleter_calls, 4);
    FAIL_T(mft_as_strided(v, 1, s48, pitch, 64), MFT_ERR_BOUNDS, "mft_as_strided", "64");
    mft_tensor_release(v);
    CHECK_EQ_I(g_deleter_calls, 5);
    g_deleter_calls = 0;
}

/* ------------------------------------------------------------------ formats and dtypes */

static void test_channels_last_rank(void) {
    const int64_t s2[2] = {2, 3}, s6[6] = {1, 2, 1, 2, 1, 2};
    const int64_t *shapes[2] = {s2, s6};
    const int ranks[2] = {2, 6};
    const char *txt[2] = {"rank 2", "rank 6"};
    int64_t out[6];
    for (int k = 0; k < 2; k++) {
        int nd = ranks[k];
        const int64_t *s = shapes[k];
        FAIL_T(mft_empty(nd, s, MFT_F32, MFT_CHANNELS_LAST), MFT_ERR_FORMAT, "mft_empty", txt[k]);
        FAIL_T(mft_zeros(nd, s, MFT_F32, MFT_CHANNELS_LAST), MFT_ERR_FORMAT, "mft_zeros", txt[k]);
        FAIL_T(mft_ones(nd, s, MFT_F32, MFT_CHANNELS_LAST), MFT_ERR_FORMAT, "mft_ones", txt[k]);
        FAIL_T(mft_full(nd, s, MFT_F32, MFT_CHANNELS_LAST, 1), MFT_ERR_FORMAT, "mft_full", txt[k]);
        FAIL_T(mft_rand(nd, s, MFT_F32, MFT_CHANNELS_LAST, 1), MFT_ERR_FORMAT, "mft_rand", txt[k]);
        FAIL_T(mft_randn(nd, s, MFT_F32, MFT_CHANNELS_LAST, 1), MFT_ERR_FORMAT, "mft_randn",
               txt[k]);
        mft_tensor *t = mft_zeros(nd, s, MFT_F32, MFT_CONTIGUOUS);
        CHECK(t != NULL);
        FAIL_T(mft_contiguous(t, MFT_CHANNELS_LAST), MFT_ERR_FORMAT, "mft_contiguous", txt[k]);
        FAIL_T(mft_to_format(t, MFT_CHANNELS_LAST), MFT_ERR_FORMAT, "mft_to_format", txt[k]);
        FAIL_T(mft_clone(t, MFT_CHANNELS_LAST), MFT_ERR_FORMAT, "mft_clone", txt[k]);
        FAIL_T(mft_empty_like(t, MFT_CHANNELS_LAST), MFT_ERR_FORMAT, "mft_empty_like", txt[k]);
        FAIL_T(mft_zeros_like(t, MFT_CHANNELS_LAST), MFT_ERR_FORMAT, "mft_zeros_like", txt[k]);
        FAIL_S(mft_strides_for_format(nd, s, MFT_CHANNELS_LAST, out), MFT_ERR_FORMAT,
               "mft_strides_for_format", txt[k]);
        mft_tensor_release(t);
    }
    /* ranks 3, 4 and 5 are fine */
    for (int nd = 3; nd <= 5; nd++) {
        mft_tensor *t = NULL;
        OK_T(t, mft_zeros(nd, s6, MFT_F32, MFT_CHANNELS_LAST));
        mft_tensor_release(t);
    }
}

static void test_bad_format_values(void) {
    const int64_t s4[4] = {1, 2, 3, 4};
    const mft_format bad = (mft_format)9;
    int64_t out[4];
    FAIL_T(mft_empty(4, s4, MFT_F32, MFT_PRESERVE), MFT_ERR_FORMAT, "mft_empty", "PRESERVE");
    FAIL_T(mft_zeros(4, s4, MFT_F32, MFT_PRESERVE), MFT_ERR_FORMAT, "mft_zeros", "PRESERVE");
    FAIL_T(mft_ones(4, s4, MFT_F32, MFT_PRESERVE), MFT_ERR_FORMAT, "mft_ones", "PRESERVE");
    FAIL_T(mft_full(4, s4, MFT_F32, MFT_PRESERVE, 1), MFT_ERR_FORMAT, "mft_full", "PRESERVE");
    FAIL_T(mft_rand(4, s4, MFT_F32, MFT_PRESERVE, 1), MFT_ERR_FORMAT, "mft_rand", "PRESERVE");
    FAIL_T(mft_randn(4, s4, MFT_F32, MFT_PRESERVE, 1), MFT_ERR_FORMAT, "mft_randn", "PRESERVE");
    FAIL_T(mft_empty(4, s4, MFT_F32, bad), MFT_ERR_FORMAT, "mft_empty", "invalid");
    FAIL_S(mft_strides_for_format(4, s4, MFT_PRESERVE, out), MFT_ERR_FORMAT,
           "mft_strides_for_format", "PRESERVE");
    FAIL_S(mft_strides_for_format(4, s4, bad, out), MFT_ERR_FORMAT, "mft_strides_for_format",
           "invalid");
    mft_tensor *t = mft_zeros(4, s4, MFT_F32, MFT_CHANNELS_LAST), *v = NULL;
    FAIL_T(mft_contiguous(t, MFT_PRESERVE), MFT_ERR_FORMAT, "mft_contiguous", "PRESERVE");
    FAIL_T(mft_contiguous(t, bad), MFT_ERR_FORMAT, "mft_contiguous", "9");
    FAIL_T(mft_to_format(t, bad), MFT_ERR_FORMAT, "mft_to_format", "9");
    FAIL_T(mft_clone(t, bad), MFT_ERR_FORMAT, "mft_clone", "9");
    FAIL_T(mft_empty_like(t, bad), MFT_ERR_FORMAT, "mft_empty_like", "9");
    FAIL_T(mft_zeros_like(t, bad), MFT_ERR_FORMAT, "mft_zeros_like", "9");
    FAIL_T(mft_contiguous(t, (mft_format)-1), MFT_ERR_FORMAT, "mft_contiguous", "-1");
    /* PRESERVE is fine where documented */
    OK_T(v, mft_to_format(t, MFT_PRESERVE));
    CHECK(v == t);
    mft_tensor_release(v);
    OK_T(v, mft_clone(t, MFT_PRESERVE));
    CHECK(v && mft_tensor_format(v) == MFT_CHANNELS_LAST);
    mft_tensor_release(v);
    /* invalid enum values have names, not crashes */
    CHECK(strcmp(mft_format_name(bad), "invalid") == 0);
    CHECK(strcmp(mft_dtype_name((mft_dtype)99), "invalid") == 0);
    CHECK(strcmp(mft_origin_name((mft_origin)99), "invalid") == 0);
    CHECK(mft_dtype_size((mft_dtype)99) == 0);
    CHECK(strcmp(mft_status_str((mft_status)999), "unknown status") == 0);
    CHECK(strcmp(mft_status_str((mft_status)-1), "unknown status") == 0);
    mft_tensor_release(t);
}

static void test_bad_dtype(void) {
    const int64_t s2[2] = {2, 3}, st[2] = {3, 1};
    const mft_dtype bads[2] = {(mft_dtype)99, (mft_dtype)-1};
    const char *txt[2] = {"99", "-1"};
    float blob[8];
    mft_tensor *t = iota(2, s2, MFT_F32);
    for (int k = 0; k < 2; k++) {
        mft_dtype bad = bads[k];
        FAIL_T(mft_empty(2, s2, bad, MFT_CONTIGUOUS), MFT_ERR_DTYPE, "mft_empty", txt[k]);
        FAIL_T(mft_zeros(2, s2, bad, MFT_CONTIGUOUS), MFT_ERR_DTYPE, "mft_zeros", txt[k]);
        FAIL_T(mft_ones(2, s2, bad, MFT_CONTIGUOUS), MFT_ERR_DTYPE, "mft_ones", txt[k]);
        FAIL_T(mft_full(2, s2, bad, MFT_CONTIGUOUS, 1), MFT_ERR_DTYPE, "mft_full", txt[k]);
        FAIL_T(mft_rand(2, s2, bad, MFT_CONTIGUOUS, 1), MFT_ERR_DTYPE, "mft_rand", txt[k]);
        FAIL_T(mft_randn(2, s2, bad, MFT_CONTIGUOUS, 1), MFT_ERR_DTYPE, "mft_randn", txt[k]);
        FAIL_T(mft_empty_strided(2, s2, st, bad), MFT_ERR_DTYPE, "mft_empty_strided", txt[k]);
        FAIL_T(mft_from_blob(blob, sizeof blob, 2, s2, st, 0, bad, count_deleter, NULL),
               MFT_ERR_DTYPE, "mft_from_blob", txt[k]);
        FAIL_T(mft_arange(0, 4, 1, bad), MFT_ERR_DTYPE, "mft_arange", txt[k]);
        FAIL_T(mft_to_dtype(t, bad), MFT_ERR_DTYPE, "mft_to_dtype", txt[k]);
        FAIL_T(mft_full(0, NULL, bad, MFT_CONTIGUOUS, 1), MFT_ERR_DTYPE, "mft_full", txt[k]);
    }
    CHECK_EQ_I(g_deleter_calls, 0);
    /* random tensors are floating point only */
    const mft_dtype ints[3] = {MFT_I32, MFT_I64, MFT_U8};
    const char *names[3] = {"i32", "i64", "u8"};
    for (int k = 0; k < 3; k++) {
        FAIL_T(mft_rand(2, s2, ints[k], MFT_CONTIGUOUS, 7), MFT_ERR_DTYPE, "mft_rand", names[k]);
        FAIL_T(mft_randn(2, s2, ints[k], MFT_CONTIGUOUS, 7), MFT_ERR_DTYPE, "mft_randn", names[k]);
    }
    mft_tensor_release(t);
}

static void test_arange_bad(void) {
    mft_tensor *t = NULL;
    FAIL_T(mft_arange(0, 10, 0, MFT_F32), MFT_ERR_INVALID, "mft_arange", "step 0");
    FAIL_T(mft_arange(0, 10, -0.0, MFT_F32), MFT_ERR_INVALID, "mft_arange", "step -0");
    FAIL_T(mft_arange(0, 10, NAN, MFT_F32), MFT_ERR_INVALID, "mft_arange", "nan");
    FAIL_T(mft_arange(NAN, 10, 1, MFT_F32), MFT_ERR_INVALID, "mft_arange", "nan");
    FAIL_T(mft_arange(0, INFINITY, 1, MFT_F64), MFT_ERR_INVALID, "mft_arange", "inf");
    FAIL_T(mft_arange(-INFINITY, 0, 1, MFT_F64), MFT_ERR_INVALID, "mft_arange", "inf");
    FAIL_T(mft_arange(0, 1, INFINITY, MFT_F64), MFT_ERR_INVALID, "mft_arange", "inf");
    FAIL_T(mft_arange(0, 1, 1e-300, MFT_F64), MFT_ERR_OVERFLOW, "mft_arange", "1e-300");
    /* a step pointing away from end is an error, as PyTorch's "upper bound and
     * larger bound inconsistent with step sign"; start == end is empty */
    FAIL_T(mft_arange(5, 0, 1, MFT_I32), MFT_ERR_INVALID, "mft_arange", "sign");
    FAIL_T(mft_arange(0, 10, -1, MFT_F32), MFT_ERR_INVALID, "mft_arange", "sign");
    OK_T(t, mft_arange(5, 5, -1, MFT_I32));
    CHECK(t && mft_tensor_numel(t) == 0);
    mft_tensor_release(t);
    /* Note [Integer scalars]: integer values must fit the dtype */
    FAIL_T(mft_arange(0, 5e9, 2e9, MFT_I32), MFT_ERR_OVERFLOW, "mft_arange", "last value");
    FAIL_T(mft_arange(-300, 0, 100, MFT_U8), MFT_ERR_OVERFLOW, "mft_arange", "start");
}

/* ------------------------------------------------------------------ get / set */

static void test_get_set_bad(void) {
    const int64_t s2[2] = {2, 3}, s13[2] = {1, 3}, s43[2] = {4, 3};
    mft_tensor *t = iota(2, s2, MFT_F32);
    tu_dst_state before = tu_snap(t);
    const int64_t bad[4][2] = {{2, 0}, {0, 3}, {-1, 0}, {0, INT64_MIN}};
    const char *txt[4] = {"[2,0]", "[0,3]", "[-1,0]", "[0,-9223372036854775808]"};
    for (int k = 0; k < 4; k++) {
        mft_clear_error();
        CHECK(isnan(mft_tensor_get(t, bad[k])));
        TU_HAS(txt[k]);
        TU_HAS("[2,3]");
        CHECK_ERR(MFT_ERR_DIM, "mft_tensor_get");
        FAIL_S(mft_tensor_set(t, bad[k], 42), MFT_ERR_DIM, "mft_tensor_set", txt[k]);
        TU_CHECK_UNCHANGED(t, before);
    }
    /* writing through a broadcast view */
    mft_tensor *row = iota(2, s13, MFT_F32);
    mft_tensor *e = mft_expand(row, 2, s43);
    CHECK(e != NULL);
    tu_dst_state rb = tu_snap(row), eb = tu_snap(e);
    const int64_t i11[2] = {1, 1}, i01[2] = {0, 1};
    FAIL_S(mft_tensor_set(e, i11, 42), MFT_ERR_OVERLAP, "mft_tensor_set", "stride 0");
    FAIL_S(mft_tensor_set(e, i01, 42), MFT_ERR_OVERLAP, "mft_tensor_set", "size 4");
    TU_CHECK_UNCHANGED(row, rb);
    TU_CHECK_UNCHANGED(e, eb);
    mft_clear_error();
    CHECK_NEAR(mft_tensor_get(e, i11), 1, 0); /* reading through it is fine */
    CHECK_EQ_I(mft_last_error(), MFT_OK);
    const int64_t s3[1] = {3}, z0[1] = {0}, i0[1] = {0};
    mft_tensor *b3 = mft_as_strided(row, 1, s3, z0, 0);
    CHECK(b3 != NULL);
    FAIL_S(mft_tensor_set(b3, i0, 1), MFT_ERR_OVERLAP, "mft_tensor_set", "size 3");
    TU_CHECK_UNCHANGED(row, rb);
    mft_tensor_release(b3);
    /* a size-1 dim with stride 0 is not a broadcast: writing is fine */
    const int64_t st01[2] = {0, 1}, i02[2] = {0, 2};
    mft_tensor *one = mft_as_strided(row, 2, s13, st01, 0);
    CHECK(one != NULL);
    TU_OK_S(mft_tensor_set(one, i02, 9));
    CHECK_NEAR(mft_tensor_get(row, i02), 9, 0);
    mft_tensor_release(one);
    mft_tensor_release(e);
    mft_tensor_release(row);
    mft_tensor_release(t);
}

/* ------------------------------------------------------------------ copy_ */

static void test_copy_bad(void) {
    const int64_t s23[2] = {2, 3}, s24[2] = {2, 4}, s33[2] = {3, 3}, s3[1] = {3}, s13[2] = {1, 3},
                  s43[2] = {4, 3}, s8[1] = {8}, s22[2] = {2, 2}, st11[2] = {1, 1},
                  s223[3] = {2, 2, 3};
    mft_tensor *dst = mft_zeros(2, s23, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *a24 = iota(2, s24, MFT_F32), *a33 = iota(2, s33, MFT_F32),
               *a223 = iota(3, s223, MFT_F32);
    mft_tensor *d3 = mft_zeros(1, s3, MFT_F32, MFT_CONTIGUOUS);
    tu_dst_state b = tu_snap(dst), b3 = tu_snap(d3);

    /* sizes that do not broadcast */
    FAIL_S(mft_copy_(dst, a24), MFT_ERR_SHAPE, "mft_copy_", "[2,4]");
    FAIL_S(mft_copy_(dst, a33), MFT_ERR_SHAPE, "mft_copy_", "[3,3]");
    FAIL_S(mft_copy_(dst, a223), MFT_ERR_SHAPE, "mft_copy_", "[2,2,3]");
    FAIL_S(mft_copy_(d3, dst), MFT_ERR_SHAPE, "mft_copy_", "[3]");
    TU_CHECK_UNCHANGED(dst, b);
    TU_CHECK_UNCHANGED(d3, b3);

    /* into an expanded (broadcast) destination */
    mft_tensor *row = mft_zeros(2, s13, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *ex = mft_expand(row, 2, s43), *src43 = iota(2, s43, MFT_F32);
    tu_dst_state br = tu_snap(row);
    FAIL_S(mft_copy_(ex, src43), MFT_ERR_OVERLAP, "mft_copy_", "stride 0");
    FAIL_S(mft_copy_(ex, row), MFT_ERR_OVERLAP, "mft_copy_", "[4,3]");
    TU_CHECK_UNCHANGED(row, br);

    /* dst partially overlapping src in one storage */
    mft_tensor *buf = iota(1, s8, MFT_F32);
    mft_tensor *lo = mft_narrow(buf, 0, 0, 6), *hi = mft_narrow(buf, 0, 2, 6);
    tu_dst_state bb = tu_snap(buf);
    FAIL_S(mft_copy_(lo, hi), MFT_ERR_OVERLAP, "mft_copy_", "partially overlaps");
    FAIL_S(mft_copy_(hi, lo), MFT_ERR_OVERLAP, "mft_copy_", "offset 2");
    /* a source broadcast from inside the destination overlaps it too */
    mft_tensor *first = mft_narrow(buf, 0, 0, 1);
    FAIL_S(mft_copy_(buf, first), MFT_ERR_OVERLAP, "mft_copy_", "overlaps");
    TU_CHECK_UNCHANGED(buf, bb);

    /* a destination that refers to one element twice */
    mft_tensor *ov = mft_as_strided(buf, 2, s22, st11, 0);
    mft_tensor *z22 = mft_zeros(2, s22, MFT_F32, MFT_CONTIGUOUS);
    CHECK(ov != NULL);
    FAIL_S(mft_copy_(ov, z22), MFT_ERR_OVERLAP, "mft_copy_", "[1,1]");
    TU_CHECK_UNCHANGED(buf, bb);

    /* legal same-storage copies */
    mft_tensor *l4 = mft_narrow(buf, 0, 0, 4), *h4 = mft_narrow(buf, 0, 4, 4);
    TU_OK_S(mft_copy_(l4, h4)); /* disjoint halves */
    if (l4) {
        const int64_t i0[1] = {0};
        CHECK_NEAR(mft_tensor_get(l4, i0), 4, 0);
    }
    TU_OK_S(mft_copy_(buf, buf)); /* identical layouts: a full overlap */
    TU_OK_S(mft_copy_(lo, lo));
    /* Interleaved views share no element (even <- odd): PyTorch allows
     * x[0::2].copy_(x[1::2]) and the header only forbids a real partial
     * overlap. */
    mft_tensor *even = mft_slice(buf, 0, 0, 8, 2), *odd = mft_slice(buf, 0, 1, 8, 2);
    mft_clear_error();
    mft_status st = mft_copy_(even, odd);
    CHECK_MSG(st == MFT_OK, "copy_(x[0::2], x[1::2]) failed: %s", mft_last_error_message());
    mft_clear_error();

    mft_tensor_release(even);
    mft_tensor_release(odd);
    mft_tensor_release(l4);
    mft_tensor_release(h4);
    mft_tensor_release(z22);
    mft_tensor_release(ov);
    mft_tensor_release(first);
    mft_tensor_release(lo);
    mft_tensor_release(hi);
    mft_tensor_release(buf);
    mft_tensor_release(src43);
    mft_tensor_release(ex);
    mft_tensor_release(row);
    mft_tensor_release(d3);
    mft_tensor_release(a223);
    mft_tensor_release(a33);
    mft_tensor_release(a24);
    mft_tensor_release(dst);
}

/* ------------------------------------------------------------------ interop */

static void test_interop_bad(void) {
    const int64_t s3[3] = {2, 3, 4};
    int64_t out[5] = {7, 7, 7, 7, 7};
    const int64_t sentinel[5] = {7, 7, 7, 7, 7};
    char letters[8];

    /* letters */
    FAIL_S(mft_strides_from_letters(4, S4, "NCHX", out), MFT_ERR_INVALID,
           "mft_strides_from_letters", "'X'");
    FAIL_S(mft_strides_from_letters(4, S4, "NCDW", out), MFT_ERR_INVALID,
           "mft_strides_from_letters", "'D'");
    FAIL_S(mft_strides_from_letters(4, S4, "NCHH", out), MFT_ERR_INVALID,
           "mft_strides_from_letters", "NCHH");
    FAIL_S(mft_strides_from_letters(4, S4, "NNHW", out), MFT_ERR_INVALID,
           "mft_strides_from_letters", "NNHW");
    FAIL_S(mft_strides_from_letters(4, S4, "NCH", out), MFT_ERR_INVALID, "mft_strides_from_letters",
           "NCH");
    FAIL_S(mft_strides_from_letters(4, S4, "NCHWC", out), MFT_ERR_INVALID,
           "mft_strides_from_letters", "NCHWC");
    FAIL_S(mft_strides_from_letters(4, S4, "", out), MFT_ERR_INVALID, "mft_strides_from_letters",
           "0 letters");
    FAIL_S(mft_strides_from_letters(3, s3, "NHWC", out), MFT_ERR_INVALID,
           "mft_strides_from_letters", "NHWC");
    FAIL_S(mft_strides_from_letters(3, s3, "NLW", out), MFT_ERR_INVALID, "mft_strides_from_letters",
           "NLW"); /* W is L at rank 3 */
    FAIL_S(mft_strides_from_letters(3, s3, "NHC", out), MFT_ERR_INVALID, "mft_strides_from_letters",
           "'H'");
    FAIL_S(mft_strides_from_letters(2, S4, "NC", out), MFT_ERR_RANK, "mft_strides_from_letters",
           "2");
    FAIL_S(mft_strides_from_letters(6, S9, "NCDHWX", out), MFT_ERR_RANK, "mft_strides_from_letters",
           "6");
    CHECK(memcmp(out, sentinel, sizeof out) == 0); /* nothing half-written */
    TU_OK_S(mft_strides_from_letters(3, s3, "NWC", out));
    CHECK(out[0] == 12 && out[1] == 1 && out[2] == 3);

    /* minor_to_major */
    memcpy(out, sentinel, sizeof out);
    const int rep[4] = {1, 3, 3, 0}, oor[4] = {1, 3, 2, 4}, neg[4] = {1, 3, 2, -1};
    FAIL_S(mft_strides_from_minor_to_major(4, S4, rep, out), MFT_ERR_DIM,
           "mft_strides_from_minor_to_major", "[1,3,3,0]");
    FAIL_S(mft_strides_from_minor_to_major(4, S4, oor, out), MFT_ERR_DIM,
           "mft_strides_from_minor_to_major", "[1,3,2,4]");
    FAIL_S(mft_strides_from_minor_to_major(4, S4, neg, out), MFT_ERR_DIM,
           "mft_strides_from_minor_to_major", "[1,3,2,-1]");
    CHECK(memcmp(out, sentinel, sizeof out) == 0);

    /* letters_from_strides */
    const int64_t st4[4] = {60, 20, 5, 1};
    FAIL_S(mft_letters_from_strides(4, S4, st4, letters, 4), MFT_ERR_INVALID,
           "mft_letters_from_strides", "4 bytes");
    FAIL_S(mft_letters_from_strides(4, S4, st4, NULL, 8), MFT_ERR_INVALID,
           "mft_letters_from_strides", "");
    FAIL_S(mft_letters_from_strides(2, S4, st4, letters, sizeof letters), MFT_ERR_RANK,
           "mft_letters_from_strides", "2");
    TU_OK_S(mft_letters_from_strides(4, S4, st4, letters, 5));
    CHECK(strcmp(letters, "NCHW") == 0);

    /* min_storage_numel of an empty tensor is 0 whatever its strides, as long
     * as they obey Note [Geometry bound]: 2 * 2^62 spans beyond int64 */
    const int64_t se[2] = {2, 0}, ste[2] = {INT64_C(1) << 61, 1}, big[2] = {INT64_C(1) << 62, 1};
    int64_t need = -1;
    TU_OK_S(mft_min_storage_numel(2, se, ste, &need));
    CHECK_EQ_I(need, 0);
    FAIL_S(mft_min_storage_numel(2, se, big, &need), MFT_ERR_OVERFLOW, "mft_min_storage_numel",
           "4611686018427387904");
}

/* ------------------------------------------------------------------ scopes */

static void test_scope_misuse(void) {
    const int64_t s2[2] = {2, 3};
    FAIL_S(mft_scope_end(), MFT_ERR_SCOPE, "mft_scope_end", "no scope");

    /* keep with no scope open */
    mft_tensor *t = mft_zeros(2, s2, MFT_F32, MFT_CONTIGUOUS);
    FAIL_T(mft_scope_keep(t), MFT_ERR_SCOPE, "mft_scope_keep", "innermost scope");
    CHECK_EQ_I(mft_live_tensors(), 1);

    /* keep of a tensor created before the scope */
    TU_OK_S(mft_scope_begin());
    FAIL_T(mft_scope_keep(t), MFT_ERR_SCOPE, "mft_scope_keep", "");
    TU_OK_S(mft_scope_end());
    CHECK_EQ_I(mft_live_tensors(), 1); /* the scope did not take it */
    CHECK(mft_tensor_numel(t) == 6);
    mft_tensor_release(t);

    /* keep of a tensor owned by an outer scope, and keeping twice */
    TU_OK_S(mft_scope_begin());
    mft_tensor *a = mft_zeros(2, s2, MFT_F32, MFT_CONTIGUOUS);
    TU_OK_S(mft_scope_begin());
    mft_tensor *b = mft_ones(2, s2, MFT_F32, MFT_CONTIGUOUS);
    FAIL_T(mft_scope_keep(a), MFT_ERR_SCOPE, "mft_scope_keep", "");
    CHECK(mft_scope_keep(b) == b);
    FAIL_T(mft_scope_keep(b), MFT_ERR_SCOPE, "mft_scope_keep", "");
    TU_OK_S(mft_scope_end());
    CHECK(mft_scope_keep(a) == a);
    TU_OK_S(mft_scope_end());
    CHECK_EQ_I(mft_live_tensors(), 2);
    mft_tensor_release(a);
    mft_tensor_release(b);

    /* a failing call inside a scope leaves nothing behind */
    TU_OK_S(mft_scope_begin());
    mft_tensor *c = mft_zeros(2, s2, MFT_F32, MFT_CONTIGUOUS);
    FAIL_T(mft_narrow(c, 0, 1, 5), MFT_ERR_DIM, "mft_narrow", "");
    TU_OK_S(mft_scope_end());
    CHECK_EQ_I(mft_live_tensors(), 0);

    /* nesting is bounded or not, but never breaks the pairing */
    int depth = 0;
    mft_clear_error();
    while (depth < 100000 && mft_scope_begin() == MFT_OK) depth++;
    if (depth < 100000) CHECK_ERR(MFT_ERR_SCOPE, "mft_scope_begin");
    CHECK(depth >= 16);
    int ended = 0;
    while (ended < depth && mft_scope_end() == MFT_OK) ended++;
    CHECK_EQ_I(ended, depth);
    FAIL_S(mft_scope_end(), MFT_ERR_SCOPE, "mft_scope_end", "");
}

/* ------------------------------------------------------------------ error state */

static void test_error_state(void) {
    const int64_t s2[2] = {2, 3}, i0[2] = {0, 0};
    mft_clear_error();
    CHECK_EQ_I(mft_last_error(), MFT_OK);
    CHECK(strcmp(mft_last_error_message(), "") == 0);

    mft_tensor *t = mft_zeros(2, s2, MFT_F32, MFT_CONTIGUOUS);
    CHECK(mft_transpose(t, 0, 7) == NULL);
    char first[512];
    snprintf(first, sizeof first, "%s", mft_last_error_message());
    CHECK_EQ_I(mft_last_error(), MFT_ERR_DIM);

    /* successful calls of every kind leave it in place */
    mft_tensor *a = mft_ones(2, s2, MFT_F64, MFT_CONTIGUOUS);
    mft_tensor *b = mft_transpose(a, 0, 1);
    mft_tensor *c = mft_contiguous(b, MFT_CONTIGUOUS);
    mft_tensor *d = mft_reshape(b, 1, (const int64_t[]){-1});
    CHECK(a && b && c && d);
    CHECK(mft_copy_(t, a) == MFT_OK);
    CHECK(mft_tensor_set(t, i0, 3) == MFT_OK);
    CHECK_NEAR(mft_tensor_get(t, i0), 3, 0);
    CHECK(mft_tensor_hash(t) != 0);
    char buf[32];
    size_t full = mft_tensor_describe(t, NULL, 0); /* length only */
    CHECK(full > sizeof buf && mft_tensor_describe(t, buf, sizeof buf) == full);
    CHECK(strlen(buf) == sizeof buf - 1);
    int64_t out[2];
    CHECK(mft_strides_for_format(2, s2, MFT_CONTIGUOUS, out) == MFT_OK);
    CHECK(mft_scope_begin() == MFT_OK);
    CHECK(mft_scope_end() == MFT_OK);
    CHECK_EQ_I(mft_last_error(), MFT_ERR_DIM);
    CHECK_MSG(strcmp(mft_last_error_message(), first) == 0, "message became '%s'",
              mft_last_error_message());

    mft_clear_error();
    CHECK_EQ_I(mft_last_error(), MFT_OK);
    CHECK(strcmp(mft_last_error_message(), "") == 0);

    /* every status has a distinct description */
    for (int s = 0; s < MFT_STATUS_COUNT; s++) {
        const char *str = mft_status_str((mft_status)s);
        CHECK(str != NULL && str[0] != '\0' && strcmp(str, "unknown status") != 0);
        for (int r = 0; r < s; r++) CHECK(strcmp(str, mft_status_str((mft_status)r)) != 0);
    }
    mft_tensor_release(d);
    mft_tensor_release(c);
    mft_tensor_release(b);
    mft_tensor_release(a);
    mft_tensor_release(t);
}

/* The last error is per thread. */
static int error_thread(void *arg) {
    int *ok = arg;
    *ok = mft_last_error() == MFT_OK && strcmp(mft_last_error_message(), "") == 0;
    mft_tensor *t = mft_empty(-3, NULL, MFT_F32, MFT_CONTIGUOUS);
    *ok = *ok && t == NULL && mft_last_error() == MFT_ERR_RANK;
    return 0;
}

static void test_error_thread_local(void) {
    mft_clear_error();
    CHECK(mft_select(NULL, 0, 0) == NULL);
    CHECK_EQ_I(mft_last_error(), MFT_ERR_NULL);
    int ok = 0;
    thrd_t th;
    if (thrd_create(&th, error_thread, &ok) == thrd_success) {
        thrd_join(th, NULL);
        CHECK(ok);
    }
    CHECK_ERR(MFT_ERR_NULL, "mft_select");
}

/* ------------------------------------------------------------------ out of memory */

static void *cap_alloc(size_t size, size_t align, void *ctx) {
    (void)ctx;
    if (size > ((size_t)1 << 30)) return NULL; /* refuse anything above 1 GiB */
    size_t rounded = (size + align - 1) / align * align;
    return aligned_alloc(align, rounded ? rounded : align);
}
static void cap_free(void *p, void *ctx) {
    (void)ctx;
    free(p);
}
static void *fail_alloc(size_t size, size_t align, void *ctx) {
    (void)size;
    (void)align;
    (void)ctx;
    return NULL;
}

static void test_out_of_memory(void) {
    const mft_allocator cap = {cap_alloc, cap_free, NULL};
    const mft_allocator none = {fail_alloc, cap_free, NULL};
    const int64_t s2[2] = {INT64_C(1) << 20, INT64_C(1) << 12}, one[1] = {1},
                  huge[1] = {INT64_C(1) << 40};
    float blob[4] = {0};
    mft_set_allocator(&cap);
    FAIL_T(mft_empty(2, s2, MFT_F64, MFT_CONTIGUOUS), MFT_ERR_NOMEM, "mft_empty", "out of memory");
    FAIL_T(mft_zeros(2, s2, MFT_F64, MFT_CONTIGUOUS), MFT_ERR_NOMEM, "mft_zeros", "34359738368");
    FAIL_T(mft_arange(0, 1e12, 1, MFT_F64), MFT_ERR_NOMEM, "mft_arange", "out of memory");
    mft_tensor *u = mft_zeros(1, one, MFT_U8, MFT_CONTIGUOUS);
    mft_tensor *x = mft_expand(u, 1, huge); /* a 1 TiB broadcast view costs nothing */
    CHECK(x != NULL);
    FAIL_T(mft_contiguous(x, MFT_CONTIGUOUS), MFT_ERR_NOMEM, "mft_contiguous", "out of memory");
    FAIL_T(mft_clone(x, MFT_PRESERVE), MFT_ERR_NOMEM, "mft_clone", "out of memory");
    FAIL_T(mft_empty_like(x, MFT_PRESERVE), MFT_ERR_NOMEM, "mft_empty_like", "out of memory");
    FAIL_T(mft_zeros_like(x, MFT_CONTIGUOUS), MFT_ERR_NOMEM, "mft_zeros_like", "out of memory");
    FAIL_T(mft_to_dtype(x, MFT_F32), MFT_ERR_NOMEM, "mft_to_dtype", "out of memory");
    /* a 2^40-element view of a 2 MiB storage that is not viewable as flat:
     * reshape and flatten must copy, and cannot */
    const int64_t s21[1] = {INT64_C(1) << 21}, sq[2] = {INT64_C(1) << 20, INT64_C(1) << 20},
                  st11[2] = {1, 1}, flat[1] = {-1};
    mft_tensor *big = mft_zeros(1, s21, MFT_U8, MFT_CONTIGUOUS);
    mft_tensor *ov = mft_as_strided(big, 2, sq, st11, 0);
    CHECK(ov != NULL);
    FAIL_T(mft_reshape(ov, 1, flat), MFT_ERR_NOMEM, "mft_reshape", "out of memory");
    FAIL_T(mft_flatten(ov, 0, 1), MFT_ERR_NOMEM, "mft_flatten", "out of memory");
    mft_tensor_release(ov);
    mft_tensor_release(big);
    mft_set_allocator(&none);
    g_deleter_calls = 0;
    FAIL_T(mft_transpose(x, 0, 0), MFT_ERR_NOMEM, "mft_transpose", "out of memory");
    FAIL_T(mft_from_blob(blob, sizeof blob, 1, one, NULL, 0, MFT_F32, count_deleter, NULL),
           MFT_ERR_NOMEM, "mft_from_blob", "out of memory");
    CHECK_EQ_I(g_deleter_calls, 0);
    mft_set_allocator(NULL);
    mft_tensor_release(x);
    mft_tensor_release(u);
}

/* ------------------------------------------------------------------ arithmetic edges
 * Extreme but valid int64 arguments must give a result or a clean error, never
 * signed overflow. The sanitizer build aborts on signed overflow, so each case
 * runs in a child process (where fork exists) and a crash is one failed check
 * instead of the end of the run. A case returns the number of failed checks. */

static int edge_fail(const char *what) {
    fprintf(stderr, "edge case: %s (status %s, message '%s')\n", what,
            mft_status_str(mft_last_error()), mft_last_error_message());
    return 1;
}

/* slice with a step larger than the dim: one element, as Python's t[0:12:huge] */
static int edge_slice_huge_step(void) {
    const int64_t s12[1] = {12};
    mft_tensor *t = iota(1, s12, MFT_F32);
    mft_clear_error();
    mft_tensor *v = mft_slice(t, 0, 0, 12, INT64_MAX);
    int bad = 0;
    if (v ? mft_tensor_sizes(v)[0] != 1 : mft_last_error() != MFT_ERR_OVERFLOW) {
        if (v) fprintf(stderr, "edge case: got size %lld\n", (long long)mft_tensor_sizes(v)[0]);
        bad += edge_fail("mft_slice(t[12], 0, 0, 12, INT64_MAX) should give size 1");
    }
    mft_tensor_release(v);
    mft_tensor_release(t);
    return bad;
}

/* as_strided whose offset + extent overflows: BOUNDS, with a sane message */
static int edge_as_strided_offset(void) {
    const int64_t s12[1] = {12}, s2[1] = {2}, st1[1] = {1};
    mft_tensor *t = iota(1, s12, MFT_F32);
    mft_clear_error();
    mft_tensor *v = mft_as_strided(t, 1, s2, st1, INT64_MAX);
    int bad = 0;
    if (v || mft_last_error() != MFT_ERR_BOUNDS ||
        !strstr(mft_last_error_message(), "mft_as_strided"))
        bad += edge_fail("mft_as_strided(t[12], [2], [1], offset INT64_MAX) should be BOUNDS");
    mft_tensor_release(v);
    mft_tensor_release(t);
    return bad;
}

/* from_blob whose offset lies far outside the buffer: BOUNDS */
static int edge_from_blob_offset(void) {
    const int64_t one[1] = {1};
    float blob[4] = {0};
    mft_clear_error();
    g_deleter_calls = 0;
    mft_tensor *v =
        mft_from_blob(blob, sizeof blob, 1, one, NULL, INT64_MAX - 1, MFT_F32, count_deleter, NULL);
    int bad = 0;
    if (v || mft_last_error() != MFT_ERR_BOUNDS ||
        !strstr(mft_last_error_message(), "mft_from_blob"))
        bad += edge_fail("mft_from_blob(16 bytes, [1], offset INT64_MAX-1) should be BOUNDS");
    mft_tensor_release(v);
    if (g_deleter_calls != 0) bad += edge_fail("deleter called on failure");
    return bad;
}

/* Note [Geometry bound] holds for empty tensors too: [2,0] with a stride of
 * INT64_MAX spans beyond int64 and is refused, not measured as 0 */
static int edge_min_storage_empty(void) {
    const int64_t se[2] = {2, 0}, ste[2] = {INT64_MAX, 1};
    int64_t need = -1;
    mft_clear_error();
    mft_status st = mft_min_storage_numel(2, se, ste, &need);
    if (st != MFT_ERR_OVERFLOW || !strstr(mft_last_error_message(), "mft_min_storage_numel"))
        return edge_fail("mft_min_storage_numel([2,0], [INT64_MAX,1]) should be OVERFLOW");
    return 0;
}

typedef int (*edge_fn)(void);

static void run_edge(const char *name, edge_fn fn) {
#if defined(__unix__)
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int bad = fn();
        fflush(NULL);
        _exit(bad ? 1 : 0);
    }
    if (pid > 0) {
        int status = 0;
        CHECK(waitpid(pid, &status, 0) == pid);
        CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "edge case %s failed or aborted (exit %d, signal %d)", name,
                  WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                  WIFSIGNALED(status) ? WTERMSIG(status) : 0);
        return;
    }
#endif
    CHECK_MSG(fn() == 0, "edge case %s failed", name);
}

/* reshape / flatten that must copy, inside a scope: the result is the only
 * new scope-owned tensor; scope_end releases everything exactly once */
static int edge_scope_copying_reshape(void) {
    const int64_t s2[2] = {3, 4}, flat[1] = {-1};
    int bad = 0;
    if (mft_scope_begin() != MFT_OK) return edge_fail("scope_begin");
    mft_tensor *t = mft_zeros(2, s2, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *tr = mft_transpose(t, 0, 1);
    mft_tensor *r = mft_reshape(tr, 1, flat);
    mft_tensor *f = mft_flatten(tr, 0, 1);
    if (!r || !f) bad += edge_fail("reshape/flatten with a copy failed");
    if (mft_scope_end() != MFT_OK) bad += edge_fail("scope_end");
    if (mft_live_tensors() != 0 || mft_live_storages() != 0) {
        fprintf(stderr, "edge case: %lld tensors, %lld storages live after scope_end\n",
                (long long)mft_live_tensors(), (long long)mft_live_storages());
        bad++;
    }
    return bad;
}

static void test_scope_copying_reshape(void) {
    run_edge("scope_copying_reshape", edge_scope_copying_reshape);
}

static void test_int64_edges(void) {
    run_edge("slice_huge_step", edge_slice_huge_step);
    run_edge("as_strided_offset", edge_as_strided_offset);
    run_edge("from_blob_offset", edge_from_blob_offset);
    run_edge("min_storage_empty", edge_min_storage_empty);
}

/* ------------------------------------------------------------------ geometry bound
 * Note [Geometry bound] (docs/spec.md): every header, empty or not, keeps
 * (offset + sum max(size,1) * stride) * itemsize and the element count within
 * int64; geometry that breaks it is refused where it enters, naming the
 * entry point, so no later arithmetic (iterator byte strides, packed strides,
 * one-past-the-end pointers) can overflow. */
static void test_geometry_bound(void) {
    const int64_t s24[2] = {2, 4};
    mft_tensor *t = iota(2, s24, MFT_F32);
    /* a slice whose step leaves one element: PyTorch's stride (stride * step,
     * here INT64_MAX or an overflow) would break the bound; the size-1 dim
     * gets a stride that obeys it (it addresses nothing), and the view works */
    mft_tensor *s1 = NULL, *s0 = NULL;
    OK_T(s1, mft_slice(t, 1, 0, 4, INT64_MAX));
    OK_T(s0, mft_slice(t, 0, 0, 2, INT64_MAX));
    CHECK(s1 && mft_tensor_sizes(s1)[1] == 1 && mft_tensor_strides(s1)[1] < 4);
    CHECK(s0 && mft_tensor_sizes(s0)[0] == 1 && mft_tensor_strides(s0)[0] < 8);
    mft_tensor *n1 = mft_narrow(t, 1, 0, 1), *c1 = mft_contiguous(s1, MFT_CONTIGUOUS);
    CHECK(c1 && n1 && mft_tensor_hash(c1) == mft_tensor_hash(n1)); /* t[:, 0:1] */
    mft_tensor_release(c1);
    mft_tensor_release(n1);
    mft_tensor_release(s1);
    mft_tensor_release(s0);
    /* a size-1 dim with a huge stride from as_strided is refused */
    const int64_t one2[2] = {2, 1}, st_big[2] = {4, INT64_MAX};
    FAIL_T(mft_as_strided(t, 2, one2, st_big, 0), MFT_ERR_OVERFLOW, "mft_as_strided", "");
    /* empty tensors carry no unbounded strides either */
    float buf[16] = {0};
    const int64_t e2[2] = {0, 4}, big_st[2] = {INT64_MAX, 1}, ok_st[2] = {4, 1};
    FAIL_T(mft_from_blob(buf, sizeof buf, 2, e2, big_st, 0, MFT_F32, NULL, NULL),
           MFT_ERR_OVERFLOW, "mft_from_blob", "9223372036854775807");
    FAIL_T(mft_from_blob(buf, sizeof buf, 2, e2, ok_st, INT64_MAX / 2, MFT_F32, NULL, NULL),
           MFT_ERR_OVERFLOW, "mft_from_blob", "offset");
    FAIL_T(mft_as_strided(t, 2, e2, big_st, 0), MFT_ERR_OVERFLOW, "mft_as_strided", "");
    /* one rule everywhere: u8 {INT64_MAX, 0, 0} is refused by from_blob and
     * empty alike (its packed strides (1, 1, 1) span past int64), as is
     * {0, 2^62, 2^62} whose element count overflows */
    const int64_t huge0[3] = {INT64_MAX, 0, 0}, e62[3] = {0, INT64_C(1) << 62, INT64_C(1) << 62};
    uint8_t bytes[8] = {0};
    FAIL_T(mft_from_blob(bytes, sizeof bytes, 3, huge0, NULL, 0, MFT_U8, NULL, NULL),
           MFT_ERR_OVERFLOW, "mft_from_blob", "");
    FAIL_T(mft_empty(3, huge0, MFT_U8, MFT_CONTIGUOUS), MFT_ERR_OVERFLOW, "mft_empty", "");
    FAIL_T(mft_empty(3, e62, MFT_F32, MFT_CONTIGUOUS), MFT_ERR_OVERFLOW, "mft_empty", "");
    FAIL_T(mft_from_blob(bytes, sizeof bytes, 3, e62, NULL, 0, MFT_U8, NULL, NULL),
           MFT_ERR_OVERFLOW, "mft_from_blob", "");
    /* views of an empty tensor: new sizes obey the same count rule */
    mft_tensor *e = NULL;
    OK_T(e, mft_from_blob(buf, sizeof buf, 2, e2, ok_st, 0, MFT_F32, NULL, NULL));
    FAIL_T(mft_view(e, 3, e62), MFT_ERR_OVERFLOW, "mft_view", "");
    FAIL_T(mft_reshape(e, 3, e62), MFT_ERR_OVERFLOW, "mft_reshape", "");
    /* derived headers of valid tensors stay valid: unsqueeze next to a size-1
     * dim of stride 2^62, to_dtype to a wider type, packed copies of empty
     * tensors with huge sizes (fuzz_geometry findings) */
    uint8_t u8buf[64] = {0};
    const int64_t sz39[2] = {39, 1}, st62[2] = {0, INT64_C(1) << 62};
    mft_tensor *w = NULL;
    OK_T(w, mft_from_blob(u8buf, sizeof u8buf, 2, sz39, st62, 0, MFT_U8, NULL, NULL));
    mft_tensor *wu = NULL, *wf = NULL;
    OK_T(wu, mft_unsqueeze(w, -2));
    OK_T(wf, mft_to_dtype(w, MFT_F32));
    CHECK(wf && mft_tensor_numel(wf) == 39);
    const int64_t ebig[3] = {INT64_C(394064967394918400), 1, 0}, eone[3] = {1, 1, 1};
    mft_tensor *e3 = NULL, *ep = NULL, *ec = NULL;
    OK_T(e3, mft_from_blob(buf, sizeof buf, 3, ebig, eone, 0, MFT_U8, NULL, NULL));
    OK_T(ep, mft_permute(e3, (const int[]){2, 0, 1}));
    OK_T(ec, mft_contiguous(ep, MFT_CHANNELS_LAST));
    const int64_t e2z[2] = {0, 0}, z2[2] = {0, 0};
    mft_tensor *far = NULL; /* an empty view may sit at the largest offset */
    OK_T(far, mft_from_blob(u8buf, 0 + 1, 2, e2z, z2, INT64_MAX, MFT_U8, NULL, NULL));
    mft_tensor *rel[] = {w, wu, wf, e3, ep, ec, far};
    for (size_t k = 0; k < sizeof rel / sizeof *rel; k++) mft_tensor_release(rel[k]);
    /* describe with a NULL buffer only measures, whatever len says */
    size_t need = mft_tensor_describe(t, NULL, 100);
    char small[8];
    CHECK(need > 0 && mft_tensor_describe(t, small, sizeof small) == need);
    /* an empty view may still sit past the end of its storage, as PyTorch */
    mft_tensor *n = NULL;
    OK_T(n, mft_narrow(t, 0, 2, 0));
    CHECK(n && mft_tensor_numel(n) == 0 && mft_tensor_offset(n) == 8);
    mft_tensor *past = NULL;
    OK_T(past, mft_as_strided(t, 2, e2, ok_st, 500));
    mft_tensor_release(past);
    mft_tensor_release(n);
    mft_tensor_release(e);
    mft_tensor_release(t);
}

int main(void) {
    RUN(test_null_tensor_args);
    RUN(test_null_pointer_args);
    RUN(test_null_propagation);
    RUN(test_rank);
    RUN(test_negative_sizes);
    RUN(test_overflow);
    RUN(test_negative_strides);
    RUN(test_dims_out_of_range);
    RUN(test_bad_permutation);
    RUN(test_narrow_select_slice);
    RUN(test_expand_bad);
    RUN(test_view_not_viewable);
    RUN(test_as_strided_bad);
    RUN(test_from_blob);
    RUN(test_channels_last_rank);
    RUN(test_bad_format_values);
    RUN(test_bad_dtype);
    RUN(test_arange_bad);
    RUN(test_get_set_bad);
    RUN(test_copy_bad);
    RUN(test_interop_bad);
    RUN(test_scope_misuse);
    RUN(test_scope_copying_reshape);
    RUN(test_error_state);
    RUN(test_error_thread_local);
    RUN(test_out_of_memory);
    RUN(test_int64_edges);
    RUN(test_geometry_bound);
    TEST_MAIN_END();
}
