/* tests/ops/test_ew_errors.c — every error ops.h and docs/spec.md §6 promise for the
 * elementwise engine and the reductions: NULL inputs (and NULL propagation
 * keeping the first error), shapes that do not broadcast (the message names
 * both size lists), in-place destinations that would have to grow, _out
 * destinations of the wrong sizes (never resized), destinations with a
 * stride-0 dim of size > 1 or internal overlap, destinations partially
 * overlapping an input, result dtypes the destination cannot hold, dtypes an
 * op does not support, invalid reduction dims, reductions over size-0 dims.
 * Every failing call that has a destination leaves its values (hash) and its
 * version counter untouched. Each check clears the error first, so the status
 * and message seen belong to the call under test; the needle is the name of
 * the function called, followed by ':' as in every mft message. */
#include <stdbool.h>
#include "test_util.h"

/* ------------------------------------------------------------------ helpers */

/* A tensor-returning call that must fail with status st naming fn. */
#define FAIL_T(expr, st, fn)                                                                            \
    do {                                                                                                \
        TU_EXPECT_NULL_(expr, #expr);                                                                   \
        CHECK_ERR(st, fn ":");                                                                          \
    } while (0)

/* A status-returning call that must return st (and set it) naming fn. */
#define FAIL_S(expr, st, fn)                                                                            \
    do {                                                                                                \
        TU_EXPECT_STATUS_(expr, #expr, st);                                                             \
        CHECK_ERR(st, fn ":");                                                                          \
    } while (0)

/* As FAIL_T / FAIL_S, but also checks that the message contains vals. */
#define FAIL_TV(expr, st, fn, vals)                                                                     \
    do {                                                                                                \
        TU_EXPECT_NULL_(expr, #expr);                                                                   \
        TU_HAS(vals);                                                                                   \
        CHECK_ERR(st, fn ":");                                                                          \
    } while (0)
#define FAIL_SV(expr, st, fn, vals)                                                                     \
    do {                                                                                                \
        TU_EXPECT_STATUS_(expr, #expr, st);                                                             \
        TU_HAS(vals);                                                                                   \
        CHECK_ERR(st, fn ":");                                                                          \
    } while (0)

/* A call that must fail with one of two statuses (where ops.h leaves the
 * exact code open). */
#define FAIL_T2(expr, st1, st2, fn)                                                                     \
    do {                                                                                                \
        TU_EXPECT_NULL_(expr, #expr);                                                                   \
        mft_status ls_ = mft_last_error();                                                              \
        CHECK_MSG(ls_ == (st1) || ls_ == (st2), "%s: status %s, message '%s'", #expr, mft_status_str(ls_), \
                  mft_last_error_message());                                                            \
        TU_HAS(fn ":");                                                                                 \
        mft_clear_error();                                                                              \
    } while (0)
#define FAIL_S2(expr, st1, st2, fn)                                                                     \
    do {                                                                                                \
        mft_clear_error();                                                                              \
        mft_status fs_ = (expr);                                                                        \
        CHECK_MSG((fs_ == (st1) || fs_ == (st2)) && mft_last_error() == fs_, "%s returned %s, last %s", #expr, \
                  mft_status_str(fs_), mft_status_str(mft_last_error()));                               \
        TU_HAS(fn ":");                                                                                 \
        mft_clear_error();                                                                              \
    } while (0)

/* Packed tensor of sizes holding 1, 2, 3, ... (in logical order). */
static mft_tensor *iota(int nd, const int64_t *sz, mft_dtype dt) {
    return tu_iota(nd, sz, dt, 1);
}

static const int64_t S23[2] = {2, 3}, S4[1] = {4}, S31[2] = {3, 1}, S34[2] = {3, 4}, S2345[4] = {2, 3, 4, 5};

/* ------------------------------------------------------------------ NULL */

static void test_null_args(void) {
    mft_tensor *x = iota(2, S23, MFT_F32), *y = iota(2, S23, MFT_F32), *c = iota(2, S23, MFT_U8);
    mft_tensor *out = iota(2, S23, MFT_F32);
    tu_dst_state sx = tu_snap(x), so = tu_snap(out);
#define EE_NULL_U_(name)                                                                                \
    FAIL_T(mft_##name(NULL), MFT_ERR_NULL, "mft_" #name);                                               \
    FAIL_S(mft_##name##_(NULL), MFT_ERR_NULL, "mft_" #name "_");                                        \
    FAIL_S(mft_##name##_out(NULL, x), MFT_ERR_NULL, "mft_" #name "_out");                               \
    FAIL_S(mft_##name##_out(out, NULL), MFT_ERR_NULL, "mft_" #name "_out");
    MFT_UNARY_OPS(EE_NULL_U_)
#undef EE_NULL_U_
#define EE_NULL_S_(name)                                                                                \
    FAIL_T(mft_##name(NULL, 2), MFT_ERR_NULL, "mft_" #name);                                            \
    FAIL_S(mft_##name##_(NULL, 2), MFT_ERR_NULL, "mft_" #name "_");                                     \
    FAIL_S(mft_##name##_out(NULL, x, 2), MFT_ERR_NULL, "mft_" #name "_out");                            \
    FAIL_S(mft_##name##_out(out, NULL, 2), MFT_ERR_NULL, "mft_" #name "_out");
    MFT_SCALAR_OPS(EE_NULL_S_)
#undef EE_NULL_S_
#define EE_NULL_B_(name)                                                                                \
    FAIL_T(mft_##name(NULL, y), MFT_ERR_NULL, "mft_" #name);                                            \
    FAIL_T(mft_##name(x, NULL), MFT_ERR_NULL, "mft_" #name);                                            \
    FAIL_S(mft_##name##_(NULL, y), MFT_ERR_NULL, "mft_" #name "_");                                     \
    FAIL_S(mft_##name##_(x, NULL), MFT_ERR_NULL, "mft_" #name "_");                                     \
    FAIL_S(mft_##name##_out(NULL, x, y), MFT_ERR_NULL, "mft_" #name "_out");                            \
    FAIL_S(mft_##name##_out(out, NULL, y), MFT_ERR_NULL, "mft_" #name "_out");                          \
    FAIL_S(mft_##name##_out(out, x, NULL), MFT_ERR_NULL, "mft_" #name "_out");
    MFT_BINARY_OPS(EE_NULL_B_)
#undef EE_NULL_B_
    FAIL_T(mft_clamp(NULL, 0, 1), MFT_ERR_NULL, "mft_clamp");
    FAIL_S(mft_clamp_(NULL, 0, 1), MFT_ERR_NULL, "mft_clamp_");
    FAIL_S(mft_clamp_out(out, NULL, 0, 1), MFT_ERR_NULL, "mft_clamp_out");
    FAIL_S(mft_clamp_out(NULL, x, 0, 1), MFT_ERR_NULL, "mft_clamp_out");
    FAIL_T(mft_hardtanh(NULL, 0, 1), MFT_ERR_NULL, "mft_hardtanh");
    FAIL_S(mft_hardtanh_(NULL, 0, 1), MFT_ERR_NULL, "mft_hardtanh_");
    FAIL_S(mft_hardtanh_out(out, NULL, 0, 1), MFT_ERR_NULL, "mft_hardtanh_out");
    FAIL_S(mft_hardtanh_out(NULL, x, 0, 1), MFT_ERR_NULL, "mft_hardtanh_out");
    FAIL_T(mft_add_alpha(NULL, y, 2), MFT_ERR_NULL, "mft_add_alpha");
    FAIL_T(mft_add_alpha(x, NULL, 2), MFT_ERR_NULL, "mft_add_alpha");
    FAIL_S(mft_add_alpha_(NULL, y, 2), MFT_ERR_NULL, "mft_add_alpha_");
    FAIL_S(mft_add_alpha_(x, NULL, 2), MFT_ERR_NULL, "mft_add_alpha_");
    FAIL_S(mft_add_alpha_out(NULL, x, y, 2), MFT_ERR_NULL, "mft_add_alpha_out");
    FAIL_S(mft_add_alpha_out(out, NULL, y, 2), MFT_ERR_NULL, "mft_add_alpha_out");
    FAIL_S(mft_add_alpha_out(out, x, NULL, 2), MFT_ERR_NULL, "mft_add_alpha_out");
    FAIL_T(mft_where(NULL, x, y), MFT_ERR_NULL, "mft_where");
    FAIL_T(mft_where(c, NULL, y), MFT_ERR_NULL, "mft_where");
    FAIL_T(mft_where(c, x, NULL), MFT_ERR_NULL, "mft_where");
    FAIL_S(mft_where_out(NULL, c, x, y), MFT_ERR_NULL, "mft_where_out");
    FAIL_S(mft_where_out(out, NULL, x, y), MFT_ERR_NULL, "mft_where_out");
    FAIL_S(mft_where_out(out, c, NULL, y), MFT_ERR_NULL, "mft_where_out");
    FAIL_S(mft_where_out(out, c, x, NULL), MFT_ERR_NULL, "mft_where_out");
    FAIL_T(mft_addcmul(NULL, x, y, 1), MFT_ERR_NULL, "mft_addcmul");
    FAIL_T(mft_addcmul(x, NULL, y, 1), MFT_ERR_NULL, "mft_addcmul");
    FAIL_T(mft_addcmul(x, y, NULL, 1), MFT_ERR_NULL, "mft_addcmul");
    FAIL_S(mft_addcmul_(NULL, x, y, 1), MFT_ERR_NULL, "mft_addcmul_");
    FAIL_S(mft_addcmul_(x, NULL, y, 1), MFT_ERR_NULL, "mft_addcmul_");
    FAIL_S(mft_addcmul_(x, y, NULL, 1), MFT_ERR_NULL, "mft_addcmul_");
    FAIL_S(mft_addcmul_out(NULL, x, y, y, 1), MFT_ERR_NULL, "mft_addcmul_out");
    FAIL_S(mft_addcmul_out(out, NULL, y, y, 1), MFT_ERR_NULL, "mft_addcmul_out");
    FAIL_S(mft_addcmul_out(out, x, NULL, y, 1), MFT_ERR_NULL, "mft_addcmul_out");
    FAIL_S(mft_addcmul_out(out, x, y, NULL, 1), MFT_ERR_NULL, "mft_addcmul_out");
    FAIL_T(mft_lerp(NULL, x, y), MFT_ERR_NULL, "mft_lerp");
    FAIL_T(mft_lerp(x, NULL, y), MFT_ERR_NULL, "mft_lerp");
    FAIL_T(mft_lerp(x, y, NULL), MFT_ERR_NULL, "mft_lerp");
    FAIL_S(mft_lerp_(NULL, x, y), MFT_ERR_NULL, "mft_lerp_");
    FAIL_S(mft_lerp_(x, NULL, y), MFT_ERR_NULL, "mft_lerp_");
    FAIL_S(mft_lerp_(x, y, NULL), MFT_ERR_NULL, "mft_lerp_");
    FAIL_T(mft_lerp_scalar(NULL, y, 0.5), MFT_ERR_NULL, "mft_lerp_scalar");
    FAIL_T(mft_lerp_scalar(x, NULL, 0.5), MFT_ERR_NULL, "mft_lerp_scalar");
    FAIL_S(mft_lerp_scalar_(NULL, y, 0.5), MFT_ERR_NULL, "mft_lerp_scalar_");
    FAIL_S(mft_lerp_scalar_(x, NULL, 0.5), MFT_ERR_NULL, "mft_lerp_scalar_");
    FAIL_S(mft_fill_(NULL, 1), MFT_ERR_NULL, "mft_fill_");
    FAIL_S(mft_zero_(NULL), MFT_ERR_NULL, "mft_zero_");
    const int d0[1] = {0};
    FAIL_T(mft_sum(NULL, 1, d0, false), MFT_ERR_NULL, "mft_sum");
    FAIL_T(mft_mean(NULL, 0, NULL, true), MFT_ERR_NULL, "mft_mean");
    FAIL_T(mft_amax(NULL, 1, d0, false), MFT_ERR_NULL, "mft_amax");
    FAIL_T(mft_amin(NULL, 1, d0, false), MFT_ERR_NULL, "mft_amin");
    FAIL_T(mft_var(NULL, 1, d0, 1, false), MFT_ERR_NULL, "mft_var");
    FAIL_T(mft_std(NULL, 1, d0, 1, false), MFT_ERR_NULL, "mft_std");
    FAIL_T(mft_argmax(NULL, 0, false), MFT_ERR_NULL, "mft_argmax");
    FAIL_T(mft_sum_to_size(NULL, 2, S23), MFT_ERR_NULL, "mft_sum_to_size");
    /* NULL pointer arguments that are not tensors */
    FAIL_T(mft_sum(x, 1, NULL, false), MFT_ERR_NULL, "mft_sum");
    FAIL_T(mft_var(x, 2, NULL, 1, true), MFT_ERR_NULL, "mft_var");
    FAIL_T(mft_sum_to_size(x, 2, NULL), MFT_ERR_NULL, "mft_sum_to_size");
    const mft_tensor *ts[2] = {x, NULL};
    mft_clear_error();
    CHECK(mft_result_type(2, ts, false, 0) == MFT_DTYPE_COUNT);
    CHECK_ERR(MFT_ERR_NULL, "mft_result_type:");
    TU_CHECK_UNCHANGED(x, sx);
    TU_CHECK_UNCHANGED(out, so);
    mft_tensor_release(x);
    mft_tensor_release(y);
    mft_tensor_release(c);
    mft_tensor_release(out);
}

/* A NULL input (the result of an earlier failing call) keeps the FIRST error:
 * a chain of calls can be checked once at the end. */
static void test_null_propagation(void) {
    mft_tensor *x = iota(4, S2345, MFT_F32);
    tu_dst_state sx = tu_snap(x);
    const int bad[4] = {0, 1, 1, 2}, d[2] = {0, 2};
    mft_clear_error();
    mft_tensor *a = mft_permute(x, bad);
    CHECK(a == NULL && mft_last_error() == MFT_ERR_DIM);
    char first[512];
    snprintf(first, sizeof first, "%s", mft_last_error_message());
    mft_tensor *b = mft_relu(a);
    mft_tensor *c = mft_add(x, b);
    mft_tensor *e = mft_mul_scalar(c, 2);
    mft_tensor *f = mft_where(e, x, x);
    mft_tensor *g = mft_addcmul(x, f, x, 1);
    mft_tensor *h = mft_lerp(g, x, x);
    mft_tensor *i = mft_sum(h, 2, d, true);
    mft_tensor *j = mft_argmax(i, 1, false);
    mft_tensor *k = mft_clamp(j, 0, 1);
    mft_tensor *l = mft_sum_to_size(k, 2, S23);
    CHECK(!b && !c && !e && !f && !g && !h && !i && !j && !k && !l);
    CHECK_MSG(mft_add_(x, l) == MFT_ERR_NULL, "add_(x, NULL) must return MFT_ERR_NULL");
    CHECK_MSG(mft_neg_out(x, l) == MFT_ERR_NULL, "neg_out(x, NULL)");
    CHECK_MSG(mft_fill_(l, 1) == MFT_ERR_NULL, "fill_(NULL)");
    CHECK_MSG(mft_where_out(x, l, x, x) == MFT_ERR_NULL, "where_out(x, NULL, ...)");
    TU_CHECK_UNCHANGED(x, sx);
    CHECK_EQ_I(mft_last_error(), MFT_ERR_DIM);
    CHECK_MSG(strcmp(mft_last_error_message(), first) == 0, "first message '%s' replaced by '%s'", first,
              mft_last_error_message());
    /* a successful call does not clear the error either */
    mft_tensor *ok = mft_add(x, x);
    CHECK(ok != NULL);
    TU_OK_S(mft_add_(ok, x));
    mft_tensor *okr = mft_sum(ok, 0, NULL, false);
    CHECK(okr != NULL);
    CHECK_EQ_I(mft_last_error(), MFT_ERR_DIM);
    CHECK(strcmp(mft_last_error_message(), first) == 0);
    mft_clear_error();
    mft_tensor_release(ok);
    mft_tensor_release(okr);
    mft_tensor_release(x);
}

/* ------------------------------------------------------------------ shapes */

static void test_not_broadcastable(void) {
    mft_tensor *a = iota(2, S23, MFT_F32), *b = iota(1, S4, MFT_F32), *out = iota(2, S23, MFT_F32);
    tu_dst_state sa = tu_snap(a), so = tu_snap(out);
    /* the message names both size lists (checked on two runs of the call) */
#define EE_BC_(name)                                                                                    \
    FAIL_TV(mft_##name(a, b), MFT_ERR_SHAPE, "mft_" #name, "[2,3]");                                   \
    FAIL_TV(mft_##name(a, b), MFT_ERR_SHAPE, "mft_" #name, "[4]");                                     \
    FAIL_SV(mft_##name##_(a, b), MFT_ERR_SHAPE, "mft_" #name "_", "[4]");                              \
    FAIL_SV(mft_##name##_out(out, a, b), MFT_ERR_SHAPE, "mft_" #name "_out", "[4]");                   \
    FAIL_SV(mft_##name##_out(out, b, a), MFT_ERR_SHAPE, "mft_" #name "_out", "[2,3]");
    MFT_BINARY_OPS(EE_BC_)
#undef EE_BC_
    TU_CHECK_UNCHANGED(a, sa);
    TU_CHECK_UNCHANGED(out, so);
    mft_tensor *c = iota(2, S23, MFT_U8);
    FAIL_TV(mft_add_alpha(a, b, 2), MFT_ERR_SHAPE, "mft_add_alpha", "[4]");
    FAIL_SV(mft_add_alpha_out(out, a, b, 2), MFT_ERR_SHAPE, "mft_add_alpha_out", "[2,3]");
    FAIL_TV(mft_where(c, a, b), MFT_ERR_SHAPE, "mft_where", "[4]");
    FAIL_TV(mft_where(b, a, a), MFT_ERR_SHAPE, "mft_where", "[2,3]");
    FAIL_SV(mft_where_out(out, c, b, a), MFT_ERR_SHAPE, "mft_where_out", "[4]");
    FAIL_TV(mft_addcmul(a, a, b, 1), MFT_ERR_SHAPE, "mft_addcmul", "[4]");
    FAIL_SV(mft_addcmul_(a, b, a, 1), MFT_ERR_SHAPE, "mft_addcmul_", "[4]");
    FAIL_SV(mft_addcmul_out(out, a, a, b, 1), MFT_ERR_SHAPE, "mft_addcmul_out", "[4]");
    FAIL_TV(mft_lerp(a, b, a), MFT_ERR_SHAPE, "mft_lerp", "[4]");
    FAIL_TV(mft_lerp(a, a, b), MFT_ERR_SHAPE, "mft_lerp", "[4]");
    FAIL_SV(mft_lerp_(a, a, b), MFT_ERR_SHAPE, "mft_lerp_", "[4]");
    FAIL_TV(mft_lerp_scalar(a, b, 0.5), MFT_ERR_SHAPE, "mft_lerp_scalar", "[4]");
    FAIL_SV(mft_lerp_scalar_(a, b, 0.5), MFT_ERR_SHAPE, "mft_lerp_scalar_", "[2,3]");
    TU_CHECK_UNCHANGED(a, sa);
    TU_CHECK_UNCHANGED(out, so);
    /* docs/architecture.md §4's example; size 0 broadcasts with 1, not with 2 */
    const int64_t s4[4] = {2, 3, 4, 4}, s3[3] = {3, 1, 5}, z[1] = {0}, two[1] = {2}, one[1] = {1};
    mft_tensor *p = mft_zeros(4, s4, MFT_F32, MFT_CHANNELS_LAST), *q = mft_zeros(3, s3, MFT_F64, MFT_CONTIGUOUS);
    FAIL_TV(mft_sub(p, q), MFT_ERR_SHAPE, "mft_sub", "[2,3,4,4]");
    FAIL_TV(mft_sub(p, q), MFT_ERR_SHAPE, "mft_sub", "[3,1,5]");
    mft_tensor *tz = mft_zeros(1, z, MFT_F32, MFT_CONTIGUOUS), *t2 = mft_zeros(1, two, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *t1 = mft_zeros(1, one, MFT_F32, MFT_CONTIGUOUS);
    FAIL_TV(mft_mul(tz, t2), MFT_ERR_SHAPE, "mft_mul", "[0]");
    mft_tensor *okz = mft_mul(tz, t1);
    CHECK(okz && mft_tensor_numel(okz) == 0 && mft_tensor_ndim(okz) == 1);
    mft_tensor *all[] = {a, b, out, c, p, q, tz, t2, t1, okz};
    for (size_t k = 0; k < sizeof all / sizeof *all; k++) mft_tensor_release(all[k]);
}

/* In place: the destination never grows, in size or in rank. */
static void test_inplace_would_grow(void) {
    mft_tensor *a = iota(2, S31, MFT_F32), *b = iota(2, S34, MFT_F32), *v4 = iota(1, S4, MFT_F32);
    mft_tensor *z = mft_full(0, NULL, MFT_F32, MFT_CONTIGUOUS, 3);
    tu_dst_state sa = tu_snap(a), sv = tu_snap(v4), sz = tu_snap(z);
#define EE_GROW_(name)                                                                                  \
    FAIL_SV(mft_##name##_(a, b), MFT_ERR_SHAPE, "mft_" #name "_", "[3,1]");                            \
    FAIL_S(mft_##name##_(v4, b), MFT_ERR_SHAPE, "mft_" #name "_");                                     \
    FAIL_S(mft_##name##_(z, v4), MFT_ERR_SHAPE, "mft_" #name "_");
    MFT_BINARY_OPS(EE_GROW_)
#undef EE_GROW_
    /* rank growth only: (3,4) op= (1,3,4) would give (1,3,4) */
    const int64_t s134[3] = {1, 3, 4};
    mft_tensor *b3 = iota(3, s134, MFT_F32);
    tu_dst_state sb = tu_snap(b);
    FAIL_SV(mft_add_(b, b3), MFT_ERR_SHAPE, "mft_add_", "[1,3,4]");
    FAIL_S(mft_mul_(b, b3), MFT_ERR_SHAPE, "mft_mul_");
    FAIL_S(mft_addcmul_(b, b, b3, 1), MFT_ERR_SHAPE, "mft_addcmul_");
    FAIL_S(mft_lerp_scalar_(b, b3, 0.5), MFT_ERR_SHAPE, "mft_lerp_scalar_");
    FAIL_S(mft_add_out(b, b, b3), MFT_ERR_SHAPE, "mft_add_out");
    TU_CHECK_UNCHANGED(b, sb);
    mft_tensor_release(b3);
    FAIL_S(mft_add_alpha_(a, b, 2), MFT_ERR_SHAPE, "mft_add_alpha_");
    FAIL_S(mft_addcmul_(a, b, a, 2), MFT_ERR_SHAPE, "mft_addcmul_");
    FAIL_S(mft_addcmul_(a, a, b, 2), MFT_ERR_SHAPE, "mft_addcmul_");
    FAIL_S(mft_lerp_(a, b, a), MFT_ERR_SHAPE, "mft_lerp_");
    FAIL_S(mft_lerp_(a, a, b), MFT_ERR_SHAPE, "mft_lerp_");
    FAIL_S(mft_lerp_scalar_(a, b, 0.5), MFT_ERR_SHAPE, "mft_lerp_scalar_");
    FAIL_S(mft_lerp_scalar_(z, v4, 0.5), MFT_ERR_SHAPE, "mft_lerp_scalar_");
    TU_CHECK_UNCHANGED(a, sa);
    TU_CHECK_UNCHANGED(v4, sv);
    TU_CHECK_UNCHANGED(z, sz);
    /* the other direction is fine: b (3,4) += a (3,1) */
    TU_OK_S(mft_add_(b, a));
    int64_t i[2] = {2, 3};
    CHECK(mft_tensor_get(b, i) == 12.0 + 3.0);
    mft_tensor_release(a);
    mft_tensor_release(b);
    mft_tensor_release(v4);
    mft_tensor_release(z);
}

/* _out: out must already have the broadcast sizes; it is never resized. */
static void test_out_wrong_sizes(void) {
    const int64_t s24[2] = {2, 4}, s21[2] = {2, 1}, s32[2] = {3, 2}, s123[3] = {1, 2, 3}, s6[1] = {6};
    mft_tensor *a = iota(2, S23, MFT_F32), *b = iota(2, S23, MFT_F32), *c = iota(2, S23, MFT_U8);
    mft_tensor *outs[6] = {iota(2, s24, MFT_F32), iota(2, s21, MFT_F32), iota(2, s32, MFT_F32),
                           iota(3, s123, MFT_F32), iota(1, s6, MFT_F32), mft_full(0, NULL, MFT_F32, MFT_CONTIGUOUS, 1)};
    for (int k = 0; k < 6; k++) {
        mft_tensor *o = outs[k];
        tu_dst_state so = tu_snap(o);
        int nd = mft_tensor_ndim(o);
        const int64_t *osz = mft_tensor_sizes(o);
#define EE_OUTU_(name) FAIL_S(mft_##name##_out(o, a), MFT_ERR_SHAPE, "mft_" #name "_out");
        MFT_UNARY_OPS(EE_OUTU_)
#undef EE_OUTU_
#define EE_OUTS_(name) FAIL_S(mft_##name##_out(o, a, 2), MFT_ERR_SHAPE, "mft_" #name "_out");
        MFT_SCALAR_OPS(EE_OUTS_)
#undef EE_OUTS_
#define EE_OUTB_(name) FAIL_S(mft_##name##_out(o, a, b), MFT_ERR_SHAPE, "mft_" #name "_out");
        MFT_BINARY_OPS(EE_OUTB_)
#undef EE_OUTB_
        FAIL_S(mft_clamp_out(o, a, 0, 1), MFT_ERR_SHAPE, "mft_clamp_out");
        FAIL_S(mft_hardtanh_out(o, a, 0, 1), MFT_ERR_SHAPE, "mft_hardtanh_out");
        FAIL_S(mft_add_alpha_out(o, a, b, 2), MFT_ERR_SHAPE, "mft_add_alpha_out");
        FAIL_S(mft_where_out(o, c, a, b), MFT_ERR_SHAPE, "mft_where_out");
        FAIL_S(mft_addcmul_out(o, a, a, b, 2), MFT_ERR_SHAPE, "mft_addcmul_out");
        TU_CHECK_UNCHANGED(o, so);
        CHECK_MSG(mft_tensor_ndim(o) == nd && mft_tensor_sizes(o) == osz, "out %d was resized", k);
    }
    for (int k = 0; k < 6; k++) mft_tensor_release(outs[k]);
    mft_tensor_release(a);
    mft_tensor_release(b);
    mft_tensor_release(c);
}

/* ------------------------------------------------------------------ destinations that cannot be written */

static void test_broadcast_destination(void) {
    mft_tensor *base = iota(2, S31, MFT_F32);
    mft_tensor *e = mft_expand(base, 2, S34); /* stride 0 on dim 1, size 4 */
    mft_tensor *x = iota(2, S34, MFT_F32), *c = iota(2, S34, MFT_U8);
    tu_dst_state sb = tu_snap(base);
#define EE_BD_U_(name)                                                                                  \
    FAIL_SV(mft_##name##_(e), MFT_ERR_OVERLAP, "mft_" #name "_", "stride 0");                           \
    FAIL_SV(mft_##name##_out(e, x), MFT_ERR_OVERLAP, "mft_" #name "_out", "stride 0");
    MFT_UNARY_OPS(EE_BD_U_)
#undef EE_BD_U_
#define EE_BD_S_(name)                                                                                  \
    FAIL_S(mft_##name##_(e, 2), MFT_ERR_OVERLAP, "mft_" #name "_");                                     \
    FAIL_S(mft_##name##_out(e, x, 2), MFT_ERR_OVERLAP, "mft_" #name "_out");
    MFT_SCALAR_OPS(EE_BD_S_)
#undef EE_BD_S_
#define EE_BD_B_(name)                                                                                  \
    FAIL_S(mft_##name##_(e, x), MFT_ERR_OVERLAP, "mft_" #name "_");                                     \
    FAIL_S(mft_##name##_(e, base), MFT_ERR_OVERLAP, "mft_" #name "_");                                  \
    FAIL_S(mft_##name##_out(e, x, x), MFT_ERR_OVERLAP, "mft_" #name "_out");
    MFT_BINARY_OPS(EE_BD_B_)
#undef EE_BD_B_
    FAIL_S(mft_clamp_(e, 0, 1), MFT_ERR_OVERLAP, "mft_clamp_");
    FAIL_S(mft_clamp_out(e, x, 0, 1), MFT_ERR_OVERLAP, "mft_clamp_out");
    FAIL_S(mft_hardtanh_(e, 0, 1), MFT_ERR_OVERLAP, "mft_hardtanh_");
    FAIL_S(mft_hardtanh_out(e, x, 0, 1), MFT_ERR_OVERLAP, "mft_hardtanh_out");
    FAIL_S(mft_add_alpha_(e, x, 2), MFT_ERR_OVERLAP, "mft_add_alpha_");
    FAIL_S(mft_add_alpha_out(e, x, x, 2), MFT_ERR_OVERLAP, "mft_add_alpha_out");
    FAIL_S(mft_where_out(e, c, x, x), MFT_ERR_OVERLAP, "mft_where_out");
    FAIL_S(mft_addcmul_(e, x, x, 1), MFT_ERR_OVERLAP, "mft_addcmul_");
    FAIL_S(mft_addcmul_out(e, x, x, x, 1), MFT_ERR_OVERLAP, "mft_addcmul_out");
    FAIL_S(mft_lerp_(e, x, x), MFT_ERR_OVERLAP, "mft_lerp_");
    FAIL_S(mft_lerp_scalar_(e, x, 0.5), MFT_ERR_OVERLAP, "mft_lerp_scalar_");
    FAIL_SV(mft_fill_(e, 1), MFT_ERR_OVERLAP, "mft_fill_", "size 4");
    FAIL_S(mft_zero_(e), MFT_ERR_OVERLAP, "mft_zero_");
    TU_CHECK_UNCHANGED(base, sb);
    /* internal overlap without stride 0: sizes (3,3), strides (1,1) */
    const int64_t ov_sz[2] = {3, 3}, ov_st[2] = {1, 1};
    mft_tensor *buf = mft_arange(0, 5, 1, MFT_F64), *ov = mft_as_strided(buf, 2, ov_sz, ov_st, 0);
    mft_tensor *y = iota(2, ov_sz, MFT_F64);
    tu_dst_state sbuf = tu_snap(buf);
    FAIL_S(mft_neg_(ov), MFT_ERR_OVERLAP, "mft_neg_");
    FAIL_S(mft_exp_out(ov, y), MFT_ERR_OVERLAP, "mft_exp_out");
    FAIL_S(mft_add_(ov, y), MFT_ERR_OVERLAP, "mft_add_");
    FAIL_S(mft_fill_(ov, 2), MFT_ERR_OVERLAP, "mft_fill_");
    FAIL_S(mft_zero_(ov), MFT_ERR_OVERLAP, "mft_zero_");
    TU_CHECK_UNCHANGED(buf, sbuf);
    mft_tensor *all[] = {base, e, x, c, buf, ov, y};
    for (size_t k = 0; k < sizeof all / sizeof *all; k++) mft_tensor_release(all[k]);
}

static void test_partial_overlap(void) {
    mft_tensor *buf = mft_arange(0, 10, 1, MFT_F32);
    mft_tensor *lo = mft_narrow(buf, 0, 0, 6), *hi = mft_narrow(buf, 0, 2, 6);
    const int64_t n6 = 6;
    mft_tensor *x = mft_ones(1, &n6, MFT_F32, MFT_CONTIGUOUS), *c = mft_ones(1, &n6, MFT_U8, MFT_CONTIGUOUS);
    tu_dst_state sb = tu_snap(buf);
#define EE_PO_U_(name) FAIL_S(mft_##name##_out(lo, hi), MFT_ERR_OVERLAP, "mft_" #name "_out");
    MFT_UNARY_OPS(EE_PO_U_)
#undef EE_PO_U_
#define EE_PO_S_(name) FAIL_S(mft_##name##_out(hi, lo, 2), MFT_ERR_OVERLAP, "mft_" #name "_out");
    MFT_SCALAR_OPS(EE_PO_S_)
#undef EE_PO_S_
#define EE_PO_B_(name)                                                                                  \
    FAIL_S(mft_##name##_(lo, hi), MFT_ERR_OVERLAP, "mft_" #name "_");                                   \
    FAIL_S(mft_##name##_out(lo, hi, x), MFT_ERR_OVERLAP, "mft_" #name "_out");                          \
    FAIL_S(mft_##name##_out(hi, x, lo), MFT_ERR_OVERLAP, "mft_" #name "_out");
    MFT_BINARY_OPS(EE_PO_B_)
#undef EE_PO_B_
    FAIL_S(mft_clamp_out(lo, hi, 0, 1), MFT_ERR_OVERLAP, "mft_clamp_out");
    FAIL_S(mft_hardtanh_out(lo, hi, 0, 1), MFT_ERR_OVERLAP, "mft_hardtanh_out");
    FAIL_S(mft_add_alpha_(lo, hi, 2), MFT_ERR_OVERLAP, "mft_add_alpha_");
    FAIL_S(mft_add_alpha_out(hi, x, lo, 2), MFT_ERR_OVERLAP, "mft_add_alpha_out");
    FAIL_S(mft_where_out(lo, c, hi, x), MFT_ERR_OVERLAP, "mft_where_out");
    FAIL_S(mft_where_out(lo, c, x, hi), MFT_ERR_OVERLAP, "mft_where_out");
    FAIL_S(mft_addcmul_(lo, x, hi, 1), MFT_ERR_OVERLAP, "mft_addcmul_");
    FAIL_S(mft_addcmul_out(lo, x, x, hi, 1), MFT_ERR_OVERLAP, "mft_addcmul_out");
    FAIL_S(mft_lerp_(lo, hi, x), MFT_ERR_OVERLAP, "mft_lerp_");
    FAIL_S(mft_lerp_(lo, x, hi), MFT_ERR_OVERLAP, "mft_lerp_");
    FAIL_S(mft_lerp_scalar_(hi, lo, 0.5), MFT_ERR_OVERLAP, "mft_lerp_scalar_");
    TU_CHECK_UNCHANGED(buf, sb);
    /* a broadcast row of the destination itself overlaps it partially */
    mft_tensor *m = iota(2, S34, MFT_F64), *row = mft_narrow(m, 0, 1, 1);
    tu_dst_state sm = tu_snap(m);
    FAIL_S(mft_add_(m, row), MFT_ERR_OVERLAP, "mft_add_");
    FAIL_S(mft_mul_out(m, row, m), MFT_ERR_OVERLAP, "mft_mul_out");
    TU_CHECK_UNCHANGED(m, sm);
    /* the same memory seen through a transpose is not an identical view */
    const int64_t s33[2] = {3, 3};
    mft_tensor *sq = iota(2, s33, MFT_F32), *sqt = mft_transpose(sq, 0, 1);
    tu_dst_state ssq = tu_snap(sq);
    FAIL_S(mft_add_(sq, sqt), MFT_ERR_OVERLAP, "mft_add_");
    FAIL_S(mft_neg_out(sqt, sq), MFT_ERR_OVERLAP, "mft_neg_out");
    TU_CHECK_UNCHANGED(sq, ssq);
    mft_tensor *all[] = {buf, lo, hi, x, c, m, row, sq, sqt};
    for (size_t k = 0; k < sizeof all / sizeof *all; k++) mft_tensor_release(all[k]);
}

/* Overlap is decided on memory, not on storage objects: two mft_from_blob
 * wraps of one buffer are two storages over the same bytes. */
static void test_overlap_separate_wraps(void) {
    float mem[16];
    for (int i = 0; i < 16; i++) mem[i] = (float)(i + 1);
    const int64_t n8 = 8;
    /* o = mem[2..10), a = mem[0..8): partial overlap through two wraps */
    mft_tensor *o = mft_from_blob(mem + 2, 8 * sizeof(float), 1, &n8, NULL, 0, MFT_F32, NULL, NULL);
    mft_tensor *a = mft_from_blob(mem, 8 * sizeof(float), 1, &n8, NULL, 0, MFT_F32, NULL, NULL);
    CHECK(o && a && !mft_tensor_shares_storage(o, a));
    float before[16];
    memcpy(before, mem, sizeof mem);
    FAIL_S(mft_mul_out(o, a, a), MFT_ERR_OVERLAP, "mft_mul_out");
    FAIL_S(mft_add_(o, a), MFT_ERR_OVERLAP, "mft_add_");
    FAIL_S(mft_neg_out(o, a), MFT_ERR_OVERLAP, "mft_neg_out");
    FAIL_S(mft_copy_(o, a), MFT_ERR_OVERLAP, "mft_copy_");
    CHECK(memcmp(before, mem, sizeof mem) == 0); /* refused calls wrote nothing */
    /* the same range through two wraps is a full overlap: allowed, and right */
    mft_tensor *a2 = mft_from_blob(mem, 8 * sizeof(float), 1, &n8, NULL, 0, MFT_F32, NULL, NULL);
    CHECK(mft_mul_out(a2, a, a) == MFT_OK);
    for (int i = 0; i < 8; i++) CHECK(mem[i] == before[i] * before[i]);
    for (int i = 8; i < 16; i++) CHECK(mem[i] == before[i]);
    /* disjoint wraps of one buffer are fine */
    mft_tensor *b = mft_from_blob(mem + 8, 8 * sizeof(float), 1, &n8, NULL, 0, MFT_F32, NULL, NULL);
    memcpy(mem, before, sizeof mem);
    CHECK(mft_add_out(b, a, a) == MFT_OK);
    for (int i = 0; i < 8; i++) CHECK(mem[8 + i] == 2 * before[i]);
    mft_tensor_release(o);
    mft_tensor_release(a);
    mft_tensor_release(a2);
    mft_tensor_release(b);
}

/* Note [Integer scalars]: a scalar that does not fit the integer dtype an op
 * computes in is refused (PyTorch's "value cannot be converted to type int
 * without overflow"), except for the wrapping add/sub/rsub/mul, whose
 * results are exact modulo 2^bits for any scalar within int64. */
static void test_integer_scalars(void) {
    const int64_t one = 1;
    mft_tensor *i32 = mft_full(1, &one, MFT_I32, MFT_CONTIGUOUS, 5);
    mft_tensor *u8 = mft_full(1, &one, MFT_U8, MFT_CONTIGUOUS, 5);
    mft_tensor *i64 = mft_full(1, &one, MFT_I64, MFT_CONTIGUOUS, 5);
    FAIL_TV(mft_clamp(i32, -1e20, 1e20), MFT_ERR_OVERFLOW, "mft_clamp", "1e+20");
    FAIL_TV(mft_add_scalar(i32, 1e30), MFT_ERR_OVERFLOW, "mft_add_scalar", "1e+30");
    FAIL_TV(mft_maximum_scalar(u8, 1e10), MFT_ERR_OVERFLOW, "mft_maximum_scalar", "10000000000");
    FAIL_TV(mft_hardtanh(i32, -3e9, 3e9), MFT_ERR_OVERFLOW, "mft_hardtanh", "");
    FAIL_TV(mft_pow_scalar(i32, 3e9), MFT_ERR_OVERFLOW, "mft_pow_scalar", "");
    FAIL_TV(mft_lt_scalar(u8, 300), MFT_ERR_OVERFLOW, "mft_lt_scalar", "300");
    FAIL_TV(mft_add_alpha(i32, i32, 1e10), MFT_ERR_OVERFLOW, "mft_add_alpha", "alpha");
    FAIL_TV(mft_addcmul(i32, i32, i32, 1e10), MFT_ERR_OVERFLOW, "mft_addcmul", "value");
    FAIL_TV(mft_full(1, &one, MFT_U8, MFT_CONTIGUOUS, 300), MFT_ERR_OVERFLOW, "mft_full", "300");
    FAIL_TV(mft_full(1, &one, MFT_I64, MFT_CONTIGUOUS, NAN), MFT_ERR_OVERFLOW, "mft_full", "nan");
    FAIL_TV(mft_pad(u8, 2, (const int64_t[]){1, 1}, MFT_PAD_CONSTANT, 300), MFT_ERR_OVERFLOW,
            "mft_pad", "300");
    tu_dst_state s32 = tu_snap(i32);
    FAIL_SV(mft_fill_(i32, 1e10), MFT_ERR_OVERFLOW, "mft_fill_", "");
    FAIL_SV(mft_clamp_(i32, -1e20, 0), MFT_ERR_OVERFLOW, "mft_clamp_", "");
    FAIL_SV(mft_tensor_set(i32, &(int64_t){0}, 1e12), MFT_ERR_OVERFLOW, "mft_tensor_set", "");
    TU_CHECK_UNCHANGED(i32, s32);
    /* floating bounds promote (no overflow possible), as before */
    mft_tensor *f = mft_clamp(i32, -0.5, 1e20);
    CHECK(f && mft_tensor_dtype(f) == MFT_F32);
    /* the wrapping arithmetic ops take any int64 scalar: u8 + 300 = u8 + 44
     * (PyTorch's tensor([5], uint8) + 300 is 49), i32 + 2^40 = i32 + 0 */
    mft_tensor *w1 = mft_add_scalar(u8, 300), *w2 = mft_add_scalar(i32, 1099511627776.0);
    mft_tensor *w3 = mft_add_scalar(u8, -3), *w4 = mft_mul_scalar(i32, 1099511627776.0);
    CHECK(w1 && mft_tensor_get(w1, &(int64_t){0}) == 49);
    CHECK(w2 && mft_tensor_get(w2, &(int64_t){0}) == 5);
    CHECK(w3 && mft_tensor_get(w3, &(int64_t){0}) == 2);
    CHECK(w4 && mft_tensor_get(w4, &(int64_t){0}) == 0);
    FAIL_TV(mft_mul_scalar(i64, 1e19), MFT_ERR_OVERFLOW, "mft_mul_scalar", ""); /* > INT64_MAX */
    /* u8 takes -255..255 as PyTorch's checked conversion: -99 wraps to 157 */
    mft_tensor *u = mft_full(1, &one, MFT_U8, MFT_CONTIGUOUS, -99);
    CHECK(u && mft_tensor_get(u, &(int64_t){0}) == 157);
    mft_tensor *all[] = {i32, u8, i64, f, w1, w2, w3, w4, u};
    for (size_t k = 0; k < sizeof all / sizeof *all; k++) mft_tensor_release(all[k]);
}

/* Integer sums wrap modulo 2^64 like the elementwise integer ops (and as
 * PyTorch: tensor([2**62, 2**62]).sum() is -2**63), on every loop path. */
static void test_integer_sum_wraps(void) {
    const int64_t n = 40, s2[2] = {4, 10};
    mft_tensor *x = mft_full(1, &n, MFT_I64, MFT_CONTIGUOUS, 4611686018427387904.0); /* 2^62 */
    mft_tensor *s = mft_sum(x, 0, NULL, false); /* 40 * 2^62 = 10 * 2^64: 0 */
    CHECK(s && mft_tensor_get(s, NULL) == 0.0);
    mft_tensor *two = mft_narrow(x, 0, 0, 2), *s_two = mft_sum(two, 0, NULL, false);
    CHECK(s_two && mft_tensor_get(s_two, NULL) == -9223372036854775808.0);
    mft_tensor *m = mft_full(2, s2, MFT_I64, MFT_CONTIGUOUS, 4611686018427387904.0);
    mft_tensor *mt = mft_transpose(m, 0, 1); /* strided inner reduction */
    mft_tensor *r0 = mft_sum(m, 1, (int[]){0}, false), *r1 = mft_sum(mt, 1, (int[]){1}, false);
    CHECK(r0 && mft_tensor_get(r0, (int64_t[]){3}) == 0.0); /* 4 * 2^62 */
    CHECK(r1 && mft_tensor_get(r1, (int64_t[]){3}) == 0.0);
    mft_tensor *all[] = {x, s, two, s_two, m, mt, r0, r1};
    for (size_t k = 0; k < sizeof all / sizeof *all; k++) mft_tensor_release(all[k]);
}

/* ------------------------------------------------------------------ dtypes */

static bool floating_unary(const char *name) {
    static const char *const f[] = {"sqrt", "rsqrt", "exp", "log", "sin", "cos", "tanh",
                                    "sigmoid", "gelu", "silu", "reciprocal"};
    for (size_t i = 0; i < sizeof f / sizeof *f; i++)
        if (strcmp(name, f[i]) == 0) return true;
    return false;
}

static void test_dtype_errors(void) {
    mft_tensor *i32 = iota(2, S23, MFT_I32), *i64 = iota(2, S23, MFT_I64), *u8 = iota(2, S23, MFT_U8);
    mft_tensor *f32 = iota(2, S23, MFT_F32), *f64 = iota(2, S23, MFT_F64);
    mft_tensor *f64_0d = mft_full(0, NULL, MFT_F64, MFT_CONTIGUOUS, 2), *f32_0d = mft_full(0, NULL, MFT_F32, MFT_CONTIGUOUS, 2);
    mft_tensor *ints[3] = {i32, i64, u8};
    tu_dst_state s32 = tu_snap(i32), s64 = tu_snap(i64), su8 = tu_snap(u8);
    /* floating unary ops into integer destinations */
    for (int k = 0; k < 3; k++) {
        mft_tensor *t = ints[k];
#define EE_DT_U_(name)                                                                                  \
    if (floating_unary(#name)) {                                                                        \
        FAIL_S(mft_##name##_(t), MFT_ERR_DTYPE, "mft_" #name "_");                                      \
        FAIL_S(mft_##name##_out(t, t), MFT_ERR_DTYPE, "mft_" #name "_out");                             \
        FAIL_S(mft_##name##_out(t, f32), MFT_ERR_DTYPE, "mft_" #name "_out");                           \
    } else {                                                                                            \
        FAIL_S(mft_##name##_out(t, f32), MFT_ERR_DTYPE, "mft_" #name "_out");                           \
    }
        MFT_UNARY_OPS(EE_DT_U_)
#undef EE_DT_U_
        /* binary: a float result into an integer tensor */
#define EE_DT_B_(name)                                                                                  \
    if (strcmp(#name, "eq") && strcmp(#name, "ne") && strcmp(#name, "lt") && strcmp(#name, "le") &&     \
        strcmp(#name, "gt") && strcmp(#name, "ge")) {                                                   \
        FAIL_S(mft_##name##_(t, f32), MFT_ERR_DTYPE, "mft_" #name "_");                                 \
        FAIL_S(mft_##name##_(t, f64_0d), MFT_ERR_DTYPE, "mft_" #name "_");                              \
        FAIL_S(mft_##name##_out(t, f32, f32), MFT_ERR_DTYPE, "mft_" #name "_out");                      \
        FAIL_S(mft_##name##_out(t, t, f32_0d), MFT_ERR_DTYPE, "mft_" #name "_out");                     \
    }
        MFT_BINARY_OPS(EE_DT_B_)
#undef EE_DT_B_
        /* true division of integers is F32 */
        FAIL_SV(mft_div_(t, t), MFT_ERR_DTYPE, "mft_div_", mft_dtype_name(mft_tensor_dtype(t)));
        FAIL_S(mft_div_out(t, i32, i64), MFT_ERR_DTYPE, "mft_div_out");
        FAIL_S(mft_div_scalar_(t, 2), MFT_ERR_DTYPE, "mft_div_scalar_");
        FAIL_S(mft_div_scalar_out(t, t, 1), MFT_ERR_DTYPE, "mft_div_scalar_out");
        /* float scalars promote integers to F32 */
        FAIL_S(mft_add_scalar_(t, 0.5), MFT_ERR_DTYPE, "mft_add_scalar_");
        FAIL_S(mft_mul_scalar_out(t, t, 1.5), MFT_ERR_DTYPE, "mft_mul_scalar_out");
        FAIL_S(mft_rsub_scalar_(t, NAN), MFT_ERR_DTYPE, "mft_rsub_scalar_");
        FAIL_S(mft_maximum_scalar_(t, 0.25), MFT_ERR_DTYPE, "mft_maximum_scalar_");
        FAIL_S(mft_pow_scalar_(t, 0.5), MFT_ERR_DTYPE, "mft_pow_scalar_");
        FAIL_S(mft_clamp_(t, 0.5, 3), MFT_ERR_DTYPE, "mft_clamp_");
        FAIL_S(mft_add_alpha_(t, f32, 1), MFT_ERR_DTYPE, "mft_add_alpha_");
        FAIL_S(mft_add_alpha_out(t, t, f64, 1), MFT_ERR_DTYPE, "mft_add_alpha_out");
        FAIL_S(mft_addcmul_(t, f32, t, 1), MFT_ERR_DTYPE, "mft_addcmul_");
        FAIL_S(mft_addcmul_out(t, t, t, f32_0d, 1), MFT_ERR_DTYPE, "mft_addcmul_out");
        FAIL_S(mft_where_out(t, u8, f32, t), MFT_ERR_DTYPE, "mft_where_out");
        /* floating-only ops */
        FAIL_T(mft_mean(t, 0, NULL, false), MFT_ERR_DTYPE, "mft_mean");
        FAIL_T(mft_var(t, 0, NULL, 1, false), MFT_ERR_DTYPE, "mft_var");
        FAIL_T(mft_std(t, 0, NULL, 0, true), MFT_ERR_DTYPE, "mft_std");
        FAIL_T(mft_lerp(t, t, t), MFT_ERR_DTYPE, "mft_lerp");
        FAIL_S(mft_lerp_(t, t, t), MFT_ERR_DTYPE, "mft_lerp_");
        FAIL_T(mft_lerp_scalar(t, t, 0.5), MFT_ERR_DTYPE, "mft_lerp_scalar");
        FAIL_S(mft_lerp_scalar_(t, t, 0.5), MFT_ERR_DTYPE, "mft_lerp_scalar_");
        /* an integer result needs an integral alpha */
        FAIL_T2(mft_add_alpha(t, t, 0.5), MFT_ERR_DTYPE, MFT_ERR_INVALID, "mft_add_alpha");
        FAIL_S2(mft_add_alpha_(t, t, 1.5), MFT_ERR_DTYPE, MFT_ERR_INVALID, "mft_add_alpha_");
        FAIL_S2(mft_add_alpha_out(t, t, u8, -0.25), MFT_ERR_DTYPE, MFT_ERR_INVALID, "mft_add_alpha_out");
    }
    TU_CHECK_UNCHANGED(i32, s32);
    TU_CHECK_UNCHANGED(i64, s64);
    TU_CHECK_UNCHANGED(u8, su8);
    /* an I32 dims tensor with an F64 0-dim tensor is F64 (ops.h): not into I32 */
    FAIL_S(mft_add_(i32, f64_0d), MFT_ERR_DTYPE, "mft_add_");
    FAIL_S(mft_add_(u8, f32_0d), MFT_ERR_DTYPE, "mft_add_");
    TU_CHECK_UNCHANGED(i32, s32);
    /* lerp is "floating dtypes only": an integer operand in any position is rejected */
    FAIL_T(mft_lerp(f32, f32, i32), MFT_ERR_DTYPE, "mft_lerp");
    FAIL_T(mft_lerp(f32, i32, f32), MFT_ERR_DTYPE, "mft_lerp");
    FAIL_T(mft_lerp_scalar(f32, u8, 0.5), MFT_ERR_DTYPE, "mft_lerp_scalar");
    /* hardtanh needs lo <= hi (clamp does not) */
    tu_dst_state sf = tu_snap(f32);
    FAIL_T(mft_hardtanh(f32, 2, 1), MFT_ERR_INVALID, "mft_hardtanh");
    FAIL_S(mft_hardtanh_(f32, 1, -1), MFT_ERR_INVALID, "mft_hardtanh_");
    mft_tensor *o = iota(2, S23, MFT_F32);
    tu_dst_state so = tu_snap(o);
    FAIL_S(mft_hardtanh_out(o, f32, 3, 0), MFT_ERR_INVALID, "mft_hardtanh_out");
    TU_CHECK_UNCHANGED(o, so);
    TU_CHECK_UNCHANGED(f32, sf);
    mft_tensor *cl = mft_clamp(f32, 2, 1);
    CHECK(cl != NULL);
    mft_tensor_release(cl);
    /* positive controls: casts a destination can hold */
    mft_tensor *f = iota(2, S23, MFT_F32), *u = iota(2, S23, MFT_U8), *i = iota(2, S23, MFT_I32);
    mft_tensor *i64_0d = mft_full(0, NULL, MFT_I64, MFT_CONTIGUOUS, 300);
    TU_OK_S(mft_add_(f, i32));      /* F32 += I32 */
    TU_OK_S(mft_add_(f, f64));      /* F64 result cast to F32 */
    TU_OK_S(mft_add_(u, i64_0d));   /* U8 tensor + I64 0-dim: U8 */
    TU_OK_S(mft_add_(u, i32));      /* I32 result into U8: integral to integral is allowed */
    TU_OK_S(mft_eq_(i, f32));       /* comparisons give U8 0/1 */
    TU_OK_S(mft_lt_out(f, f64, i)); /* U8 result into F32 */
    TU_OK_S(mft_div_out(f, i, i));  /* F32 result into F32 */
    TU_OK_S(mft_sqrt_out(f, u));
    int64_t idx[2] = {1, 2};
    CHECK(mft_tensor_get(i, idx) == 1.0); /* 6 == 6.0 */
    mft_tensor *all[] = {i32, i64, u8, f32, f64, f64_0d, f32_0d, o, f, u, i, i64_0d};
    for (size_t k = 0; k < sizeof all / sizeof *all; k++) mft_tensor_release(all[k]);
}

/* ops.h leaves these open; whatever mft does must be coherent: either a
 * dtype error or a result that follows the scalar promotion rules. Printed
 * for the report. */
static void test_unspecified_integer_cases(void) {
    mft_tensor *x = iota(2, S23, MFT_I32);
    mft_clear_error();
    mft_tensor *l = mft_leaky_relu(x, 0.01);
    if (l) {
        printf("note: leaky_relu(i32, 0.01) -> %s\n", mft_dtype_name(mft_tensor_dtype(l)));
        CHECK(mft_tensor_dtype(l) == MFT_F32);
    } else {
        printf("note: leaky_relu(i32, 0.01) -> error %s: %s\n", mft_status_str(mft_last_error()), mft_last_error_message());
        CHECK_ERR(MFT_ERR_DTYPE, "mft_leaky_relu:");
    }
    mft_tensor_release(l);
    mft_clear_error();
    mft_tensor *p = mft_pow_scalar(x, -1);
    if (p) {
        int64_t i0[2] = {0, 0}, i1[2] = {0, 1};
        printf("note: pow_scalar(i32, -1) -> %s [%g %g ...]\n", mft_dtype_name(mft_tensor_dtype(p)),
               mft_tensor_get(p, i0), mft_tensor_get(p, i1));
        CHECK(mft_tensor_dtype(p) == MFT_I32 && mft_tensor_get(p, i0) == 1.0 && mft_tensor_get(p, i1) == 0.0);
    } else {
        printf("note: pow_scalar(i32, -1) -> error %s: %s\n", mft_status_str(mft_last_error()), mft_last_error_message());
        CHECK(strstr(mft_last_error_message(), "mft_pow_scalar:") != NULL);
        mft_clear_error();
    }
    mft_tensor_release(p);
    mft_tensor *s = mft_sum_to_size(x, 1, S23 + 1);
    CHECK(s != NULL);
    if (s) printf("note: sum_to_size(i32 [2,3] -> [3]) -> %s\n", mft_dtype_name(mft_tensor_dtype(s)));
    mft_tensor_release(s);
    mft_tensor_release(x);
}

/* ------------------------------------------------------------------ reduction dims */

static void test_reduction_dim_errors(void) {
    mft_tensor *x = iota(4, S2345, MFT_F32);
    const int out_hi[1] = {4}, out_lo[1] = {-5}, rep[2] = {1, 1}, rep_neg[2] = {1, -3}, many[5] = {0, 1, 2, 3, 0};
    const int ok2[2] = {-1, 0};
    typedef mft_tensor *(*red_fn)(const mft_tensor *, int, const int *, bool);
    const red_fn fns[4] = {mft_sum, mft_mean, mft_amax, mft_amin};
    const char *const names[4] = {"mft_sum", "mft_mean", "mft_amax", "mft_amin"};
    for (int k = 0; k < 4; k++) {
        mft_clear_error();
        mft_tensor *r;
        r = fns[k](x, 1, out_hi, false);
        CHECK_MSG(r == NULL, "%s dim 4 of rank 4", names[k]);
        TU_HAS("4");
        CHECK_ERR(MFT_ERR_DIM, names[k]);
        r = fns[k](x, 1, out_lo, true);
        CHECK_MSG(r == NULL, "%s dim -5 of rank 4", names[k]);
        TU_HAS("-5");
        CHECK_ERR(MFT_ERR_DIM, names[k]);
        r = fns[k](x, 2, rep, false);
        CHECK_MSG(r == NULL, "%s dims {1,1}", names[k]);
        CHECK_ERR(MFT_ERR_DIM, names[k]);
        r = fns[k](x, 2, rep_neg, false);
        CHECK_MSG(r == NULL, "%s dims {1,-3} (the same dim)", names[k]);
        CHECK_ERR(MFT_ERR_DIM, names[k]);
        r = fns[k](x, 5, many, false);
        CHECK_MSG(r == NULL, "%s five dims of rank 4", names[k]);
        CHECK_MSG(mft_last_error() == MFT_ERR_DIM || mft_last_error() == MFT_ERR_INVALID, "%s: %s", names[k],
                  mft_last_error_message());
        mft_clear_error();
        r = fns[k](x, -1, ok2, false);
        CHECK_MSG(r == NULL, "%s ndims -1", names[k]);
        CHECK_MSG(mft_last_error() == MFT_ERR_DIM || mft_last_error() == MFT_ERR_INVALID, "%s: %s", names[k],
                  mft_last_error_message());
        TU_HAS(names[k]);
        mft_clear_error();
        r = fns[k](x, 2, ok2, true); /* control */
        CHECK(r != NULL);
        mft_tensor_release(r);
    }
    FAIL_T(mft_var(x, 1, out_hi, 1, false), MFT_ERR_DIM, "mft_var");
    FAIL_T(mft_std(x, 2, rep_neg, 0, true), MFT_ERR_DIM, "mft_std");
    FAIL_TV(mft_argmax(x, 4, false), MFT_ERR_DIM, "mft_argmax", "4");
    FAIL_TV(mft_argmax(x, -5, true), MFT_ERR_DIM, "mft_argmax", "-5");
    /* rank 0: no dim to name */
    mft_tensor *z = mft_full(0, NULL, MFT_F32, MFT_CONTIGUOUS, 1);
    FAIL_T(mft_sum(z, 1, out_hi, false), MFT_ERR_DIM, "mft_sum");
    /* size-0 dims: sum/mean fine, amax/amin/argmax fail */
    const int64_t s0[3] = {2, 0, 3};
    const int d1[1] = {1}, d2[1] = {-1};
    mft_tensor *e = mft_zeros(3, s0, MFT_F32, MFT_CONTIGUOUS);
    FAIL_T2(mft_amax(e, 1, d1, false), MFT_ERR_SHAPE, MFT_ERR_INVALID, "mft_amax");
    FAIL_T2(mft_amin(e, 0, NULL, true), MFT_ERR_SHAPE, MFT_ERR_INVALID, "mft_amin");
    FAIL_T2(mft_argmax(e, 1, false), MFT_ERR_SHAPE, MFT_ERR_INVALID, "mft_argmax");
    mft_tensor *ok = mft_amax(e, 1, d2, false), *oks = mft_sum(e, 1, d1, false);
    CHECK(ok && mft_tensor_numel(ok) == 0);
    CHECK(oks && mft_tensor_numel(oks) == 6);
    /* sum_to_size: x must broadcast from sizes */
    const int64_t bad1[1] = {4}, bad2[3] = {2, 3, 1}, bad3[2] = {2, 2}, neg[2] = {-1, 5};
    mft_tensor *y = iota(2, S23, MFT_F32);
    FAIL_T(mft_sum_to_size(y, 1, bad1), MFT_ERR_SHAPE, "mft_sum_to_size");
    FAIL_T(mft_sum_to_size(y, 3, bad2), MFT_ERR_SHAPE, "mft_sum_to_size");
    FAIL_T(mft_sum_to_size(y, 2, bad3), MFT_ERR_SHAPE, "mft_sum_to_size");
    FAIL_T2(mft_sum_to_size(x, 2, neg), MFT_ERR_SHAPE, MFT_ERR_INVALID, "mft_sum_to_size");
    mft_tensor *all[] = {x, z, e, ok, oks, y};
    for (size_t k = 0; k < sizeof all / sizeof *all; k++) mft_tensor_release(all[k]);
}

int main(void) {
    RUN(test_null_args);
    RUN(test_null_propagation);
    RUN(test_not_broadcastable);
    RUN(test_inplace_would_grow);
    RUN(test_out_wrong_sizes);
    RUN(test_broadcast_destination);
    RUN(test_partial_overlap);
    RUN(test_dtype_errors);
    RUN(test_unspecified_integer_cases);
    RUN(test_reduction_dim_errors);
    RUN(test_overlap_separate_wraps);
    RUN(test_integer_scalars);
    RUN(test_integer_sum_wraps);
    TEST_MAIN_END();
}
