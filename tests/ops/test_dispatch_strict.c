/* tests/ops/test_dispatch_strict.c — the strict levels of the dispatcher
 * (mft_dispatch_set_strict_level, mft/dispatch.h): OFF runs fallbacks and
 * operand conversions; FALLBACK refuses the fallback (F64 channels-last
 * pooling has no NHWC kernel) but converts a strided operand; ALL refuses
 * both, naming the operand, its layout and the kernel, and lets calls that
 * need no conversion through with the same values; a refused call changes
 * nothing (no result, counters and the last dispatch as before); the
 * boolean setter maps to FALLBACK; FALLBACK paired with a reorder budget of
 * 0 (mft/profile.h) catches the operand conversion it lets through. */
#include "test_util.h"

static mft_tensor *pool(const mft_tensor *x) {
    const int64_t k[2] = {2, 2};
    return mft_avg_pool2d(x, k, NULL, NULL, false, true, 0);
}

/* avg 2x2 / stride 2 of x at output index o, in double */
static double naive_pool_at(const mft_tensor *x, const int64_t *o) {
    double s = 0.0;
    for (int64_t kh = 0; kh < 2; kh++)
        for (int64_t kw = 0; kw < 2; kw++) {
            const int64_t i[4] = {o[0], o[1], 2 * o[2] + kh, 2 * o[3] + kw};
            s += mft_tensor_get(x, i);
        }
    return s / 4.0;
}

static bool pool_ok(const mft_tensor *y, const mft_tensor *x) {
    if (!y) return false;
    const int64_t *xs = mft_tensor_sizes(x);
    const int64_t want[4] = {xs[0], xs[1], xs[2] / 2, xs[3] / 2};
    if (!tu_has_sizes(y, 4, want)) return false;
    int64_t o[4] = {0, 0, 0, 0};
    do {
        if (fabs(mft_tensor_get(y, o) - naive_pool_at(x, o)) > 1e-6) return false;
    } while (tu_next_index(4, want, o));
    return true;
}

static void test_levels_setting(void) {
    CHECK(mft_dispatch_strict_level() == MFT_STRICT_OFF && !mft_dispatch_strict());
    TU_OK_S(mft_dispatch_set_strict_level(MFT_STRICT_ALL));
    CHECK(mft_dispatch_strict_level() == MFT_STRICT_ALL && mft_dispatch_strict());
    CHECK(mft_dispatch_set_strict_level((mft_strict_level)3) == MFT_ERR_INVALID);
    CHECK(mft_dispatch_strict_level() == MFT_STRICT_ALL); /* unchanged */
    CHECK_ERR(MFT_ERR_INVALID, "mft_dispatch_set_strict_level: level 3");
    CHECK(mft_dispatch_set_strict_level((mft_strict_level)-1) == MFT_ERR_INVALID);
    CHECK_ERR(MFT_ERR_INVALID, "level -1");
    mft_dispatch_set_strict(false);
    CHECK(mft_dispatch_strict_level() == MFT_STRICT_OFF && !mft_dispatch_strict());
    mft_dispatch_set_strict(true);
    CHECK(mft_dispatch_strict_level() == MFT_STRICT_FALLBACK && mft_dispatch_strict());
    TU_OK_S(mft_dispatch_set_strict_level(MFT_STRICT_OFF));
}

/* Three calls under each level: a packed F32 NHWC input (its kernel, no
 * conversion), a strided F32 input (a CONTIGUOUS kernel after one operand
 * conversion), a packed F64 NHWC input (no F64 NHWC kernel: a fallback with
 * two conversions). */
static void test_what_each_level_refuses(void) {
    const int64_t sz[4] = {2, 3, 8, 8}, big[4] = {2, 3, 8, 16};
    mft_tensor *nhwc = mft_rand(4, sz, MFT_F32, MFT_CHANNELS_LAST, 1);
    mft_tensor *base = mft_rand(4, big, MFT_F32, MFT_CONTIGUOUS, 2);
    mft_tensor *strided = mft_slice(base, 3, 0, 16, 2); /* W step 2: neither format */
    mft_tensor *f64 = mft_rand(4, sz, MFT_F64, MFT_CHANNELS_LAST, 3);
    CHECK(strided && !mft_tensor_is_contiguous(strided, MFT_CONTIGUOUS) &&
          !mft_tensor_is_contiguous(strided, MFT_CHANNELS_LAST));
    for (int level = MFT_STRICT_OFF; level <= MFT_STRICT_ALL; level++) {
        TU_OK_S(mft_dispatch_set_strict_level((mft_strict_level)level));
        mft_dispatch_conversions_reset();
        mft_tensor *a = pool(nhwc);
        CHECK(pool_ok(a, nhwc) && mft_dispatch_last()->conversions == 0);
        CHECK(mft_dispatch_last()->kernel_format == MFT_CHANNELS_LAST);

        const mft_dispatch_info before = *mft_dispatch_last();
        mft_tensor *b = pool(strided);
        if (level == MFT_STRICT_ALL) {
            CHECK(b == NULL);
            CHECK(mft_dispatch_last()->seq == before.seq && mft_dispatch_conversions() == 0);
            CHECK(strstr(mft_last_error_message(), "mft_avg_pool2d: strict level ALL forbids "
                                                   "converting input 0 (sizes [2,3,8,8], strided) "
                                                   "to CONTIGUOUS for kernel avg_pool2d.nchw.f32") !=
                  NULL);
            CHECK_ERR(MFT_ERR_UNSUPPORTED, "(avg_pool2d, CONTIGUOUS, f32)");
        } else {
            CHECK(pool_ok(b, strided) && mft_dispatch_last()->conversions == 1);
            CHECK(mft_dispatch_conversions() == 1);
        }

        const mft_dispatch_info before2 = *mft_dispatch_last();
        const int64_t conv_before = mft_dispatch_conversions();
        mft_tensor *c = pool(f64);
        if (level == MFT_STRICT_OFF) {
            CHECK(pool_ok(c, f64) && mft_dispatch_last()->conversions == 2);
            CHECK(mft_dispatch_last()->kernel_format == MFT_CONTIGUOUS);
            CHECK(mft_tensor_is_contiguous(c, MFT_CHANNELS_LAST));
        } else {
            CHECK(c == NULL);
            CHECK(mft_dispatch_last()->seq == before2.seq &&
                  mft_dispatch_conversions() == conv_before);
            CHECK_ERR(MFT_ERR_UNSUPPORTED, "mft_avg_pool2d: no kernel for (avg_pool2d, "
                                           "CHANNELS_LAST, f64); strict mode forbids the "
                                           "fallback through CONTIGUOUS");
        }
        mft_tensor_release(a);
        mft_tensor_release(b);
        mft_tensor_release(c);
    }
    TU_OK_S(mft_dispatch_set_strict_level(MFT_STRICT_OFF));
    mft_tensor *all[] = {nhwc, base, strided, f64};
    for (int i = 0; i < 4; i++) mft_tensor_release(all[i]);
}

/* A convolution whose format comes from the weight (docs/spec.md §4): a
 * CONTIGUOUS x with a CHANNELS_LAST weight runs the NHWC kernel, which
 * needs x converted: refused under ALL only. */
static void test_conv_operand_under_all(void) {
    const int64_t xs[4] = {1, 4, 6, 6}, ws[4] = {2, 4, 3, 3};
    mft_tensor *x = mft_randn(4, xs, MFT_F32, MFT_CONTIGUOUS, 7);
    mft_tensor *w = mft_randn(4, ws, MFT_F32, MFT_CHANNELS_LAST, 8);
    mft_dispatch_set_strict(true);
    mft_tensor *y = mft_conv2d(x, w, NULL, NULL, NULL, NULL, 1);
    CHECK(y != NULL && mft_dispatch_last()->conversions == 1);
    TU_OK_S(mft_dispatch_set_strict_level(MFT_STRICT_ALL));
    mft_tensor *z = mft_conv2d(x, w, NULL, NULL, NULL, NULL, 1);
    CHECK(z == NULL);
    CHECK_ERR(MFT_ERR_UNSUPPORTED, "mft_conv2d: strict level ALL forbids converting input 0 "
                                   "(sizes [1,4,6,6], NCHW) to CHANNELS_LAST");
    /* the same x packed NHWC: nothing to convert (the weight goes as given) */
    mft_tensor *xc = mft_contiguous(x, MFT_CHANNELS_LAST);
    mft_tensor *zc = mft_conv2d(xc, w, NULL, NULL, NULL, NULL, 1);
    CHECK(zc != NULL && mft_dispatch_last()->conversions == 0);
    TU_OK_S(mft_dispatch_set_strict_level(MFT_STRICT_OFF));
    mft_tensor *d = zc && y ? mft_sub(zc, y) : NULL, *ad = mft_abs(d);
    mft_tensor *mx = mft_amax(ad, 0, NULL, false);
    CHECK(mx && mft_tensor_get(mx, NULL) < 1e-5);
    mft_tensor *all[] = {x, w, y, xc, zc, d, ad, mx};
    for (int i = 0; i < 8; i++) mft_tensor_release(all[i]);
}

/* FALLBACK lets an operand conversion through; a reorder budget of 0
 * reports it (the pairing mft/dispatch.h describes). */
static void test_fallback_level_with_budget(void) {
    const int64_t big[4] = {1, 2, 4, 8};
    mft_tensor *base = mft_rand(4, big, MFT_F32, MFT_CONTIGUOUS, 9);
    mft_tensor *strided = mft_slice(base, 3, 0, 8, 2);
    mft_dispatch_set_strict(true);
    TU_OK_S(mft_reorder_budget_begin(0));
    mft_tensor *y = pool(strided);
    CHECK(pool_ok(y, strided));
    CHECK(mft_reorder_budget_end() == MFT_ERR_BUDGET);
    CHECK_ERR(MFT_ERR_BUDGET, "avg_pool2d");
    mft_dispatch_set_strict(false);
    mft_tensor_release(base);
    mft_tensor_release(strided);
    mft_tensor_release(y);
}

int main(void) {
    RUN(test_levels_setting);
    RUN(test_what_each_level_refuses);
    RUN(test_conv_operand_under_all);
    RUN(test_fallback_level_with_budget);
    TEST_MAIN_END();
}
