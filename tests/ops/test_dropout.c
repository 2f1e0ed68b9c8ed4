/* tests/ops/test_dropout.c — dropout and dropout2d, forward and backward
 * (ops/dropout/dropout.c):
 *   - the mask is the documented pure function of (seed, logical index)
 *     (mft__dropout_draw), so it is identical for NCHW, NHWC and strided
 *     inputs and for every thread count; dropout2d zeroes whole (n, c)
 *     channels, drawn by channel index;
 *   - kept values are x / (1 - p), dropped ones 0; the kept fraction is within
 *     5 standard deviations of 1 - p for p = 0.1, 0.5, 0.9 on 1e5 elements,
 *     and neighbours are independent;
 *   - p = 0 and training = false return x itself; p = 1 gives zeros; the
 *     backward applies the same mask to grad_out;
 *   - results are packed in x's tag; F32 and F64; argument errors.
 * PyTorch's masks come from its RNG and cannot be matched (documented
 * deviation), so there is no golden file. */
#include <math.h>
#include <string.h>
#include "ops_internal.h"
#include "mft/resize.h"
#include "test_util.h"

uint32_t mft__dropout_draw(uint64_t seed, uint64_t key);

static bool keeps(uint64_t seed, uint64_t key, double p) {
    return (double)mft__dropout_draw(seed, key) / 4294967296.0 >= p;
}

static void fill_random(mft_tensor *t, uint64_t *rng) {
    int nd = mft_tensor_ndim(t);
    int64_t idx[MFT_MAX_DIMS] = {0};
    if (!mft_tensor_numel(t)) return;
    do {
        double v = (double)(tu_rng_next(rng) >> 11) / 9007199254740992.0 * 4 - 2;
        if (v == 0) v = 1; /* a kept 0 would look dropped */
        mft_tensor_set(t, idx, v);
    } while (tu_next_index(nd, mft_tensor_sizes(t), idx));
}

static void check_packed(const mft_tensor *y, mft_format fmt, const char *what) {
    int64_t st[MFT_MAX_DIMS];
    int nd = mft_tensor_ndim(y);
    CHECK(mft_strides_for_format(nd, mft_tensor_sizes(y), fmt, st) == MFT_OK);
    CHECK_MSG(memcmp(st, mft_tensor_strides(y), sizeof(int64_t) * (size_t)nd) == 0,
              "%s: strides not packed in %s", what, mft_format_name(fmt));
    CHECK_MSG(mft_tensor_format(y) == fmt, "%s: tag %s, want %s", what,
              mft_format_name(mft_tensor_format(y)), mft_format_name(fmt));
}

/* y against the definition: element i (logical) kept iff draw(seed, key) >= p,
 * key = i (dropout) or n*C + c (dropout2d); kept = x * (1/(1-p)) in dtype.
 * Returns the number kept. */
static int64_t check_against_definition(const mft_tensor *x, const mft_tensor *y, double p,
                                        uint64_t seed, bool channels, const char *what) {
    const int nd = mft_tensor_ndim(x);
    const int64_t *sz = mft_tensor_sizes(x);
    int64_t idx[MFT_MAX_DIMS] = {0}, lin = 0, kept = 0, bad = 0;
    const bool f32 = mft_tensor_dtype(x) == MFT_F32;
    if (!y) {
        CHECK_MSG(false, "%s: no result (%s)", what, mft_last_error_message());
        return 0;
    }
    if (!mft_tensor_numel(x)) return 0;
    do {
        const uint64_t key = channels ? (uint64_t)(idx[0] * sz[1] + idx[1]) : (uint64_t)lin;
        const bool k = keeps(seed, key, p);
        const double xv = mft_tensor_get(x, idx), yv = mft_tensor_get(y, idx);
        double want = 0;
        if (k) want = f32 ? (double)((float)xv * (float)(1.0 / (1.0 - p))) : xv * (1.0 / (1.0 - p));
        if (yv != want && bad++ == 0)
            CHECK_MSG(false, "%s: element %lld got %.9g, want %.9g (kept %d)", what,
                      (long long)lin, yv, want, k);
        kept += k;
        lin++;
    } while (tu_next_index(nd, sz, idx));
    CHECK_MSG(bad == 0, "%s: %lld elements differ", what, (long long)bad);
    return kept;
}

/* Every layout and dtype: the values follow the definition (so the masks
 * agree across layouts); the result is packed in x's tag. */
static void test_layouts(void) {
    uint64_t rng = 11;
    const int64_t s4[4] = {2, 5, 7, 3}, s5[5] = {2, 3, 2, 3, 4}, s3[3] = {3, 4, 5};
    const int64_t s1[1] = {37}, s2[2] = {6, 9};
    const struct {
        int nd;
        const int64_t *s;
    } shapes[] = {{4, s4}, {5, s5}, {3, s3}, {1, s1}, {2, s2}};
    for (int dti = 0; dti < 2; dti++)
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
            for (int lay = 0; lay < 4; lay++)
                for (int ch = 0; ch < 2; ch++) {
                    const int nd = shapes[si].nd;
                    const mft_dtype dt = dti ? MFT_F64 : MFT_F32;
                    if (ch && nd < 2) continue;
                    if (lay == 1 && (nd < 3 || nd > 5)) continue;
                    mft_tensor *x;
                    if (lay == 0 || lay == 1) {
                        x = mft_empty(nd, shapes[si].s, dt,
                                      lay ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS);
                    } else if (lay == 2) {
                        const tu_layout_opts o = {2, 2, false};
                        x = tu_strided_view(nd, shapes[si].s, dt, NAN, &o, &rng, NULL);
                    } else { /* transposed last two dims */
                        mft_tensor *b = mft_empty(nd, shapes[si].s, dt, MFT_CONTIGUOUS);
                        mft_tensor *t = nd >= 2 ? mft_transpose(b, nd - 1, nd - 2)
                                                : mft_tensor_retain(b);
                        mft_tensor *c = mft_contiguous(t, MFT_CONTIGUOUS);
                        x = nd >= 2 ? mft_transpose(c, nd - 1, nd - 2) : mft_tensor_retain(c);
                        mft_tensor_release(b);
                        mft_tensor_release(t);
                        mft_tensor_release(c);
                    }
                    fill_random(x, &rng);
                    const double p = 0.3 + 0.1 * (double)lay;
                    const uint64_t seed = 1234 + si;
                    char what[128];
                    snprintf(what, sizeof what, "%s nd=%d lay=%d ch=%d", mft_dtype_name(dt), nd,
                             lay, ch);
                    mft_tensor *y = ch ? mft_dropout2d(x, p, true, seed)
                                       : mft_dropout(x, p, true, seed);
                    check_against_definition(x, y, p, seed, ch, what);
                    const mft_format tag = mft_tensor_format(x);
                    if (y) check_packed(y, nd >= 3 && nd <= 5 ? tag : MFT_CONTIGUOUS, what);
                    /* backward = the same mask on grad_out */
                    mft_tensor *gy = ch ? mft_dropout2d_backward(x, p, true, seed)
                                        : mft_dropout_backward(x, p, true, seed);
                    CHECK(gy && y && mft_tensor_hash(gy) == mft_tensor_hash(y));
                    mft_tensor_release(gy);
                    mft_tensor_release(y);
                    mft_tensor_release(x);
                }
}

/* Same logical values in NCHW and NHWC give the same result values, at 1
 * and 2 (and 3) threads, also on a tensor big enough for the parallel split. */
static void test_layout_and_thread_invariance(void) {
    const int64_t s[4] = {4, 32, 29, 31};
    for (int ch = 0; ch < 2; ch++) {
        mft_tensor *a = mft_randn(4, s, MFT_F32, MFT_CONTIGUOUS, 5);
        mft_tensor *b = mft_contiguous(a, MFT_CHANNELS_LAST);
        uint64_t h[6];
        for (int t = 1; t <= 3; t++) {
            mft_set_num_threads(t);
            mft_tensor *ya = ch ? mft_dropout2d(a, 0.5, true, 77) : mft_dropout(a, 0.5, true, 77);
            mft_tensor *yb = ch ? mft_dropout2d(b, 0.5, true, 77) : mft_dropout(b, 0.5, true, 77);
            CHECK(ya && yb && mft_tensor_is_contiguous(yb, MFT_CHANNELS_LAST));
            h[2 * (t - 1)] = mft_tensor_hash(ya);
            h[2 * (t - 1) + 1] = mft_tensor_hash(yb);
            if (t == 2) {
                check_against_definition(b, yb, 0.5, 77, ch, "nhwc parallel");
                /* dense NCHW is one long row, split into pieces over the threads */
                check_against_definition(a, ya, 0.5, 77, ch, "nchw parallel pieces");
            }
            mft_tensor_release(ya);
            mft_tensor_release(yb);
        }
        mft_set_num_threads(0);
        for (int i = 1; i < 6; i++) CHECK_MSG(h[i] == h[0], "hash %d differs (ch=%d)", i, ch);
        /* another seed gives another mask */
        mft_tensor *y1 = mft_dropout(a, 0.5, true, 77), *y2 = mft_dropout(a, 0.5, true, 78);
        CHECK(y1 && y2 && mft_tensor_hash(y1) != mft_tensor_hash(y2));
        mft_tensor_release(y1);
        mft_tensor_release(y2);
        mft_tensor_release(a);
        mft_tensor_release(b);
    }
}

/* Kept fraction within 5 sigma of 1 - p; pairs of neighbours (logical i and
 * i+1, and i and i+C*H*W... here i+1000) kept together with probability
 * (1-p)^2; dropout2d: channel fraction. */
static void test_statistics(void) {
    const int64_t n = 100000;
    mft_tensor *x = mft_ones(1, &n, MFT_F64, MFT_CONTIGUOUS);
    const double ps[3] = {0.1, 0.5, 0.9};
    for (int k = 0; k < 3; k++) {
        const double p = ps[k];
        mft_tensor *y = mft_dropout(x, p, true, 2024 + (uint64_t)k);
        CHECK(y != NULL);
        if (!y) continue;
        const double *yd = mft_tensor_data(y);
        int64_t kept = 0, pairs = 0, far = 0;
        for (int64_t i = 0; i < n; i++) {
            const bool a = yd[i] != 0;
            kept += a;
            if (i + 1 < n) pairs += a && yd[i + 1] != 0;
            if (i + 1000 < n) far += a && yd[i + 1000] != 0;
            if (a) CHECK_MSG(yd[i] == 1.0 / (1.0 - p), "scale %.17g", yd[i]);
        }
        const double q = 1 - p, sd = sqrt((double)n * p * q);
        CHECK_MSG(fabs((double)kept - (double)n * q) <= 5 * sd, "p=%g kept %lld of %lld", p,
                  (long long)kept, (long long)n);
        const double q2 = q * q, sd2 = sqrt((double)n * q2 * (1 - q2));
        CHECK_MSG(fabs((double)pairs - (double)(n - 1) * q2) <= 6 * sd2, "p=%g pairs %lld", p,
                  (long long)pairs);
        CHECK_MSG(fabs((double)far - (double)(n - 1000) * q2) <= 6 * sd2, "p=%g far %lld", p,
                  (long long)far);
        mft_tensor_release(y);
    }
    /* dropout2d: 100 x 200 channels of 3 elements */
    const int64_t s3[3] = {100, 200, 3};
    mft_tensor *x3 = mft_ones(3, s3, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *y3 = mft_dropout2d(x3, 0.5, true, 9);
    CHECK(y3 != NULL);
    if (y3) {
        const float *d = mft_tensor_data(y3);
        int64_t kept = 0, mixed = 0;
        for (int64_t c = 0; c < 20000; c++) {
            kept += d[3 * c] != 0;
            mixed += (d[3 * c] != 0) != (d[3 * c + 1] != 0) || (d[3 * c] != d[3 * c + 2]);
        }
        CHECK_EQ_I(mixed, 0);
        CHECK_MSG(fabs((double)kept - 10000) <= 5 * sqrt(5000.0), "dropout2d kept %lld",
                  (long long)kept);
    }
    mft_tensor_release(y3);
    mft_tensor_release(x3);
    mft_tensor_release(x);
}

/* p = 0 and eval return x itself; p = 1 gives zeros packed in x's tag
 * (a NaN input too); p just below 1 keeps almost nothing; empty tensors. */
static void test_edges(void) {
    const int64_t s[4] = {2, 3, 4, 5};
    mft_tensor *x = mft_randn(4, s, MFT_F32, MFT_CHANNELS_LAST, 3);
    mft_tensor *y = mft_dropout(x, 0.0, true, 1);
    CHECK(y == x);
    mft_tensor_release(y);
    y = mft_dropout(x, 0.7, false, 1);
    CHECK(y == x);
    mft_tensor_release(y);
    y = mft_dropout2d_backward(x, 0.7, false, 1);
    CHECK(y == x);
    mft_tensor_release(y);
    mft_fill_(x, NAN);
    /* a dropped NaN is 0 (documented deviation), a kept one stays NaN */
    y = mft_dropout(x, 0.5, true, 8);
    CHECK(y != NULL);
    if (y) {
        const float *d = mft_tensor_data(y);
        int64_t zeros = 0, nans = 0;
        for (int64_t i = 0; i < mft_tensor_numel(y); i++) {
            zeros += d[i] == 0;
            nans += d[i] != d[i];
        }
        CHECK(zeros > 0 && nans > 0 && zeros + nans == mft_tensor_numel(y));
    }
    mft_tensor_release(y);
    for (int ch = 0; ch < 2; ch++) {
        y = ch ? mft_dropout2d(x, 1.0, true, 1) : mft_dropout(x, 1.0, true, 1);
        CHECK(y != NULL);
        if (y) {
            check_packed(y, MFT_CHANNELS_LAST, "p=1");
            const float *d = mft_tensor_data(y);
            int64_t nz = 0;
            for (int64_t i = 0; i < mft_tensor_numel(y); i++) nz += d[i] != 0 || d[i] != d[i];
            CHECK_EQ_I(nz, 0);
        }
        mft_tensor_release(y);
    }
    mft_tensor_release(x);
    const int64_t e[4] = {0, 3, 4, 5};
    mft_tensor *xe = mft_empty(4, e, MFT_F64, MFT_CHANNELS_LAST);
    y = mft_dropout2d(xe, 0.5, true, 1);
    CHECK(y && mft_tensor_numel(y) == 0 && mft_tensor_format(y) == MFT_CHANNELS_LAST);
    mft_tensor_release(y);
    mft_tensor_release(xe);
    /* rank 0 */
    mft_tensor *x0 = mft_full(0, NULL, MFT_F64, MFT_CONTIGUOUS, 2.0);
    int kept = 0;
    for (uint64_t seed = 0; seed < 200; seed++) {
        y = mft_dropout(x0, 0.5, true, seed);
        CHECK(y && mft_tensor_ndim(y) == 0);
        if (y) {
            double v = mft_tensor_get(y, NULL);
            CHECK(v == 0 || v == 4.0);
            CHECK((v == 4.0) == keeps(seed, 0, 0.5));
            kept += v == 4.0;
        }
        mft_tensor_release(y);
    }
    CHECK(kept > 60 && kept < 140);
    mft_tensor_release(x0);
}

#define FAIL_NULL(expr) TU_EXPECT_NULL_(expr, #expr)

static void test_errors(void) {
    const int64_t s[4] = {2, 3, 4, 5};
    mft_tensor *x = mft_zeros(4, s, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *xi = mft_zeros(4, s, MFT_I64, MFT_CONTIGUOUS);
    mft_tensor *x1 = mft_zeros(1, s, MFT_F32, MFT_CONTIGUOUS);
    tu_dst_state before = tu_snap(x);
    FAIL_NULL(mft_dropout(NULL, 0.5, true, 1));
    CHECK_ERR(MFT_ERR_NULL, "mft_dropout");
    FAIL_NULL(mft_dropout2d_backward(NULL, 0.5, true, 1));
    CHECK_ERR(MFT_ERR_NULL, "grad_out");
    FAIL_NULL(mft_dropout(x, -0.1, true, 1));
    CHECK_ERR(MFT_ERR_INVALID, "p = -0.1");
    FAIL_NULL(mft_dropout(x, 1.5, false, 1));
    CHECK_ERR(MFT_ERR_INVALID, "p = 1.5");
    FAIL_NULL(mft_dropout2d(x, NAN, true, 1));
    CHECK_ERR(MFT_ERR_INVALID, "mft_dropout2d: dropout probability p = nan");
    FAIL_NULL(mft_dropout_backward(x, INFINITY, true, 1));
    CHECK_ERR(MFT_ERR_INVALID, "mft_dropout_backward");
    FAIL_NULL(mft_dropout(xi, 0.5, true, 1));
    CHECK_ERR(MFT_ERR_DTYPE, "i64");
    FAIL_NULL(mft_dropout2d(xi, 0.5, true, 1));
    CHECK_ERR(MFT_ERR_DTYPE, "mft_dropout2d");
    FAIL_NULL(mft_dropout2d(x1, 0.5, true, 1));
    CHECK_ERR(MFT_ERR_RANK, "rank 1");
    TU_CHECK_UNCHANGED(x, before);
    mft_tensor_release(x);
    mft_tensor_release(xi);
    mft_tensor_release(x1);
}

int main(void) {
    RUN(test_layouts);
    RUN(test_layout_and_thread_invariance);
    RUN(test_statistics);
    RUN(test_edges);
    RUN(test_errors);
    TEST_MAIN_END();
}
