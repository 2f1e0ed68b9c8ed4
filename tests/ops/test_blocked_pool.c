/* tests/ops/test_blocked_pool.c — the native nChw16c F32 pooling kernels
 * (ops/pool/blocked16_*.c) against the same ops on the plain contiguous input:
 *   - max_pool2d / relu_max_pool2d (with indices), avg_pool2d
 *     (count_include_pad both ways, ceil_mode, divisor_override) and
 *     adaptive_avg_pool2d (global 1x1 included), forward and backward, for
 *     C in {1, 3, 15, 16, 17, 33, 64}, N in {1, 3} and several windows:
 *     max values and indices bit for bit, the rest within 1e-5 relative;
 *     results, indices and gradients nChw16c with zero pad lanes, and no
 *     conversion at all;
 *   - 2x2 / stride 2 max windows (the 2x2 forward) on values with ties,
 *     NaN, +-inf, +-0 and negative-only windows, relu or not, ceil_mode
 *     both ways: values and indices bit for bit the plain kernels', and
 *     1 and 2 threads alike;
 *   - the interior runs and row rings (overlapping windows, edges,
 *     ceil_mode, padding, dilation, C = 1, 3, 15, 17, 33) against the
 *     naive kernels of ops/pool/reference.c: forward and max backward bit
 *     for bit, avg backward within 1e-5; 1 and 2 threads alike;
 *   - autograd: the tape's backward of a blocked pool runs natively too;
 *   - 1 and 2 threads give the same bits;
 *   - nChw8c, F64 and plain indices still take the counted fallback;
 *   - user kernels register for NCHW16C / NCHW8C and run for their key. */
#include <math.h>
#include <stdbool.h>
#include <string.h>
#include "harness.h"
#include "ops_internal.h"
#include "test_util.h"

#define CT  MFT_CONTIGUOUS
#define B16 MFT_NCHW16C
#define B8  MFT_NCHW8C

static int64_t fallbacks(void) { return mft_conversion_counts_get().count[MFT_CAUSE_FALLBACK]; }
static int64_t conversions(void) { return mft_conversion_counts_get().total; }

/* t is nChw16c with zero pad lanes */
static bool is_b16(const mft_tensor *t) {
    return t && mft_tensor_format(t) == B16 && mft_tensor_check_padding(t) == MFT_OK;
}

/* blocked b holds plain p's values: exactly (tol < 0) or within tol relative */
static bool close_to(const mft_tensor *b, const mft_tensor *p, double tol) {
    if (!b || !p || mft_tensor_dtype(b) != mft_tensor_dtype(p) ||
        !tu_has_sizes(b, mft_tensor_ndim(p), mft_tensor_sizes(p)))
        return false;
    mft_tensor *bc = mft_to_format(b, CT), *pc = mft_to_format(p, CT);
    bool ok = bc && pc;
    const int64_t n = ok ? mft_tensor_numel(pc) : 0;
    if (ok && tol < 0) ok = mft_tensor_hash(bc) == mft_tensor_hash(pc);
    else if (ok) {
        const float *x = mft_tensor_data(bc), *y = mft_tensor_data(pc);
        for (int64_t i = 0; ok && i < n; i++)
            ok = fabs((double)x[i] - (double)y[i]) <= tol * (1.0 + fabs((double)y[i]));
    }
    mft_tensor_release(bc);
    mft_tensor_release(pc);
    return ok;
}

typedef struct win {
    int64_t H, W, k[2], s[2], p[2], d[2];
    bool ceil;
} win;

static const win g_wins[] = {
    {6, 6, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false},
    {7, 9, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false},
    {7, 8, {3, 2}, {2, 1}, {1, 0}, {1, 1}, true},
    {5, 5, {2, 2}, {2, 2}, {1, 1}, {1, 1}, true},
    {9, 7, {3, 3}, {1, 2}, {1, 1}, {2, 1}, false},
    {4, 5, {4, 5}, {1, 1}, {2, 2}, {1, 1}, false},
    /* windows that tile the input: a row and column past the last window,
     * and clipped last windows (ceil_mode) */
    {7, 9, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false},
    {7, 8, {3, 2}, {3, 2}, {0, 0}, {1, 1}, true},
};
static const int64_t g_cs[] = {1, 3, 15, 16, 17, 33, 64};

static void check_max(const mft_tensor *x, const mft_tensor *xb, const win *w, bool relu,
                      uint64_t seed) {
    mft_tensor *idx = NULL, *bidx = NULL;
    mft_tensor *y = relu ? mft_relu_max_pool2d_with_indices(x, w->k, w->s, w->p, w->d, w->ceil, &idx)
                         : mft_max_pool2d_with_indices(x, w->k, w->s, w->p, w->d, w->ceil, &idx);
    if (!y) { /* relu refuses windows without an input element: so must the native path */
        mft_clear_error();
        CHECK(!mft_relu_max_pool2d_with_indices(xb, w->k, w->s, w->p, w->d, w->ceil, &bidx));
        mft_clear_error();
        return;
    }
    mft_conversion_counts_reset();
    mft_tensor *by = relu ? mft_relu_max_pool2d_with_indices(xb, w->k, w->s, w->p, w->d, w->ceil, &bidx)
                          : mft_max_pool2d_with_indices(xb, w->k, w->s, w->p, w->d, w->ceil, &bidx);
    CHECK_EQ_I(conversions(), 0);
    CHECK(is_b16(by) && is_b16(bidx));
    CHECK(close_to(by, y, -1) && close_to(bidx, idx, -1));
    /* value-only form */
    mft_tensor *by2 = relu ? mft_relu_max_pool2d(xb, w->k, w->s, w->p, w->d, w->ceil)
                           : mft_max_pool2d(xb, w->k, w->s, w->p, w->d, w->ceil);
    CHECK(close_to(by2, y, -1) && is_b16(by2));
    /* backward, both forms */
    mft_tensor *go = mft_randn(4, mft_tensor_sizes(y), MFT_F32, CT, seed);
    mft_tensor *gob = mft_to_format(go, B16);
    mft_tensor *g = mft_max_pool2d_backward(go, x, idx);
    mft_conversion_counts_reset();
    mft_tensor *bg = mft_max_pool2d_backward(gob, xb, bidx);
    mft_tensor *bgw = mft_max_pool2d_backward_windows(gob, xb, bidx, w->k, w->s, w->p, w->d, w->ceil);
    CHECK_EQ_I(conversions(), 0);
    CHECK(is_b16(bg) && close_to(bg, g, 1e-5) && is_b16(bgw) && close_to(bgw, g, 1e-5));
    mft_tensor *all[] = {idx, bidx, y, by, by2, go, gob, g, bg, bgw};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) mft_tensor_release(all[i]);
}

static void check_avg(const mft_tensor *x, const mft_tensor *xb, const win *w, bool cip,
                      int64_t div, uint64_t seed) {
    mft_tensor *y = mft_avg_pool2d(x, w->k, w->s, w->p, w->ceil, cip, div);
    if (!y) {
        mft_clear_error();
        return;
    }
    mft_conversion_counts_reset();
    mft_tensor *by = mft_avg_pool2d(xb, w->k, w->s, w->p, w->ceil, cip, div);
    CHECK_EQ_I(conversions(), 0);
    CHECK(is_b16(by) && close_to(by, y, 1e-5));
    mft_tensor *go = mft_randn(4, mft_tensor_sizes(y), MFT_F32, CT, seed);
    mft_tensor *gob = mft_to_format(go, B16);
    mft_tensor *g = mft_avg_pool2d_backward(go, x, w->k, w->s, w->p, w->ceil, cip, div);
    mft_conversion_counts_reset();
    mft_tensor *bg = mft_avg_pool2d_backward(gob, xb, w->k, w->s, w->p, w->ceil, cip, div);
    CHECK_EQ_I(conversions(), 0);
    CHECK(is_b16(bg) && close_to(bg, g, 1e-5));
    mft_tensor *all[] = {y, by, go, gob, g, bg};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) mft_tensor_release(all[i]);
}

static void check_adaptive(const mft_tensor *x, const mft_tensor *xb, const int64_t out[2],
                           uint64_t seed) {
    mft_tensor *y = mft_adaptive_avg_pool2d(x, out);
    mft_conversion_counts_reset();
    mft_tensor *by = mft_adaptive_avg_pool2d(xb, out);
    CHECK_EQ_I(conversions(), 0);
    CHECK(is_b16(by) && close_to(by, y, 1e-5));
    mft_tensor *go = mft_randn(4, mft_tensor_sizes(y), MFT_F32, CT, seed);
    mft_tensor *gob = mft_to_format(go, B16);
    mft_tensor *g = mft_adaptive_avg_pool2d_backward(go, x);
    mft_conversion_counts_reset();
    mft_tensor *bg = mft_adaptive_avg_pool2d_backward(gob, xb);
    CHECK_EQ_I(conversions(), 0);
    CHECK(is_b16(bg) && close_to(bg, g, 1e-5));
    mft_tensor *all[] = {y, by, go, gob, g, bg};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) mft_tensor_release(all[i]);
}

static void test_against_plain(void) {
    uint64_t seed = 100;
    for (size_t ci = 0; ci < sizeof g_cs / sizeof *g_cs; ci++)
        for (int64_t n = 1; n <= 3; n += 2)
            for (size_t wi = 0; wi < sizeof g_wins / sizeof *g_wins; wi++) {
                const win *w = &g_wins[wi];
                const int64_t xs[4] = {n, g_cs[ci], w->H, w->W};
                mft_tensor *x = mft_randn(4, xs, MFT_F32, CT, seed++);
                mft_tensor *xb = mft_to_format(x, B16);
                check_max(x, xb, w, false, seed++);
                check_max(x, xb, w, true, seed++);
                win wa = *w;
                wa.d[0] = wa.d[1] = 1;
                check_avg(x, xb, &wa, true, 0, seed++);
                check_avg(x, xb, &wa, false, 0, seed++);
                if (wi == 1) check_avg(x, xb, &wa, false, -3, seed++);
                static const int64_t outs[4][2] = {{1, 1}, {3, 3}, {2, 5}, {4, 4}};
                for (int o = 0; o < 4; o++) check_adaptive(x, xb, outs[o], seed++);
                mft_tensor_release(x);
                mft_tensor_release(xb);
            }
}

/* 2x2 / stride 2 windows (Note [nChw16c 2x2 max forward]) on values with
 * ties, NaN, -inf, +0 and -0 and windows of negatives only, relu or not,
 * ceil_mode both ways (odd sizes: clipped last windows take the general
 * loop): values and indices bit for bit those of the plain kernels, and
 * the same bits at 1 and 2 threads */
static void test_max22_special(void) {
    static const int64_t shapes[][4] = {{2, 17, 8, 10}, {1, 33, 7, 9}, {3, 1, 28, 28},
                                        {1, 16, 5, 4},  {2, 3, 2, 2},  {1, 64, 6, 14}};
    static const float specials[] = {NAN, -INFINITY, INFINITY, 0.0f, -0.0f, 1.0f, -1.0f};
    const int64_t k[2] = {2, 2}, d[2] = {1, 1};
    uint64_t seed = 500;
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        mft_tensor *x = mft_randn(4, shapes[si], MFT_F32, CT, seed++);
        float *v = mft_tensor_data(x);
        const int64_t n = mft_tensor_numel(x);
        for (int64_t i = 0; i < n; i++) { /* a coarse grid: ties; some specials */
            v[i] = floorf(v[i] * 2.0f) / 2.0f;
            if (i % 7 == 3) v[i] = specials[(i / 7) % 7];
        }
        mft_tensor *xb = mft_to_format(x, B16);
        for (int ceil = 0; ceil < 2; ceil++) {
            const win w = {shapes[si][2], shapes[si][3], {2, 2}, {2, 2}, {0, 0}, {1, 1}, ceil != 0};
            check_max(x, xb, &w, false, seed++);
            check_max(x, xb, &w, true, seed++);
            uint64_t h[2][2];
            for (int t = 0; t < 2; t++) {
                mft_set_num_threads(t + 1);
                mft_tensor *idx = NULL;
                mft_tensor *y = mft_relu_max_pool2d_with_indices(xb, k, k, w.p, d, w.ceil, &idx);
                h[t][0] = y ? mft_tensor_hash(y) : 0;
                h[t][1] = idx ? mft_tensor_hash(idx) : 1;
                mft_tensor_release(y);
                mft_tensor_release(idx);
            }
            mft_set_num_threads(0);
            CHECK_MSG(h[0][0] == h[1][0] && h[0][1] == h[1][1], "shape %zu: threads differ", si);
        }
        mft_tensor_release(x);
        mft_tensor_release(xb);
    }
}

/* ---------------------------------------------------------------- against reference.c
 * The paths of Note [nChw16c interior runs] (whole windows of a row,
 * specialised 2x2 / 2, 3x3 / 1, 3x3 / 2 and the loop for other windows,
 * edges on the general path) and Note [nChw16c row rings] (max and avg
 * backward over overlapping windows, dummy terms at the edges) against the
 * naive kernels of ops/pool/reference.c: max and relu max forward values and
 * indices, avg forward (both count_include_pad, divisor_override 0, 4, -3)
 * bit for bit; max backward bit for bit (the reference adds grad_out in
 * output order, rounding each sum to F32, as the gather does); avg backward
 * within 1e-5 relative (the reference divides in double). Values on a
 * quarter grid (ties) with NaN, +-inf and +-0 for max. Heights and widths
 * whose interior runs have odd lengths, ceil_mode, padding, dilation,
 * windows without an interior, C = 1, 3, 15, 17, 33; and every result the
 * same bits at 1 and 2 threads. */
mft_kernel_fn mft__pool_reference(mft__op_id op, mft_dtype dt);
void mft__pool_max_backward_ref(const mft_kernel_args *a);
void mft__pool_avg_pool2d_backward_ref(const mft_kernel_args *a);

static const win r_wins[] = {
    {11, 13, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false}, /* the ResNet stem pool */
    {12, 17, {3, 3}, {2, 2}, {1, 1}, {1, 1}, true},
    {9, 10, {3, 3}, {1, 1}, {1, 1}, {1, 1}, false}, /* stride 1 */
    {8, 19, {3, 3}, {1, 1}, {0, 0}, {1, 1}, true},
    {10, 14, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false},
    {9, 11, {2, 2}, {2, 2}, {1, 1}, {1, 1}, true},
    {13, 16, {3, 2}, {2, 1}, {1, 1}, {1, 1}, false}, /* the general run */
    {12, 15, {5, 4}, {3, 2}, {2, 1}, {1, 1}, true},
    {14, 13, {3, 3}, {2, 1}, {1, 1}, {2, 2}, false}, /* dilation (max) */
    {6, 20, {1, 1}, {1, 1}, {0, 0}, {1, 1}, false},
    {3, 4, {3, 3}, {1, 1}, {1, 1}, {1, 1}, false}, /* no whole window */
    {5, 37, {3, 3}, {2, 2}, {1, 1}, {1, 1}, true},
    {9, 10, {3, 3}, {2, 2}, {0, 0}, {1, 1}, false}, /* a last row and column in no window */
};
static const int64_t r_cs[] = {1, 3, 15, 17, 33};

/* quarter steps in [-3, 3], signed zeros; NaN, +-inf when specials */
static void fill_grid(mft_tensor *t, uint64_t *rng, bool specials) {
    float *v = mft_tensor_data(t);
    for (int64_t i = 0; i < mft_tensor_numel(t); i++) {
        float f = (float)tu_rng_int(rng, -12, 12) / 4.0f;
        if (f == 0.0f && tu_rng_int(rng, 0, 1)) f = -0.0f;
        const int64_t r = specials ? tu_rng_int(rng, 0, 30) : 30;
        v[i] = r == 0 ? NAN : r == 1 ? -INFINITY : r == 2 ? INFINITY : f;
    }
}

/* reference forward on contiguous x: values (and indices unless NULL) */
static mft_tensor *ref_fwd(mft__op_id op, const mft_pool2d_params *p, const mft_tensor *x,
                           const int64_t *os, mft_tensor **ind) {
    mft_tensor *outs[2] = {mft_empty(4, os, MFT_F32, CT), NULL};
    const int nout = op == MFT__OP_AVG_POOL2D ? 1 : 2;
    if (nout == 2) outs[1] = mft_empty(4, os, MFT_I64, CT);
    const mft_tensor *ins[1] = {x};
    mft_kernel_args args = {1, nout, ins, outs, p};
    mft__pool_reference(op, MFT_F32)(&args);
    if (ind) *ind = outs[1];
    else mft_tensor_release(outs[1]);
    return outs[0];
}

/* reference backward: grad_out (and indices for max) -> grad_x of x's sizes */
static mft_tensor *ref_bwd(const mft_pool2d_params *p, const mft_tensor *go, const mft_tensor *ind,
                           const mft_tensor *x) {
    mft_tensor *outs[1] = {mft_empty(4, mft_tensor_sizes(x), MFT_F32, CT)};
    const mft_tensor *ins[2] = {go, ind};
    mft_kernel_args args = {ind ? 2 : 1, 1, ins, outs, p};
    if (ind) mft__pool_max_backward_ref(&args);
    else mft__pool_avg_pool2d_backward_ref(&args);
    return outs[0];
}

/* The blocked results of one window at the current thread count: max
 * values, indices, relu max values, indices, max backward, then per avg
 * variant forward and backward. */
enum { R_AVG = 4, R_NAVG = 4, R_N = 5 + 2 * R_NAVG };
static const struct {
    bool cip;
    int64_t div;
} r_avg[R_NAVG] = {{true, 0}, {false, 0}, {false, 4}, {true, -3}};

static void blocked_all(const mft_tensor *xb, const mft_tensor *xab, const mft_tensor *gob,
                        const win *w, mft_tensor **r) {
    r[0] = mft_max_pool2d_with_indices(xb, w->k, w->s, w->p, w->d, w->ceil, &r[1]);
    r[2] = mft_relu_max_pool2d_with_indices(xb, w->k, w->s, w->p, w->d, w->ceil, &r[3]);
    r[4] = mft_max_pool2d_backward_windows(gob, xb, r[1], w->k, w->s, w->p, w->d, w->ceil);
    const bool avg = w->d[0] == 1 && w->d[1] == 1;
    for (int v = 0; v < R_NAVG; v++) {
        r[5 + 2 * v] = avg ? mft_avg_pool2d(xab, w->k, w->s, w->p, w->ceil, r_avg[v].cip, r_avg[v].div)
                           : NULL;
        r[6 + 2 * v] = avg ? mft_avg_pool2d_backward(gob, xab, w->k, w->s, w->p, w->ceil,
                                                     r_avg[v].cip, r_avg[v].div)
                           : NULL;
    }
}

static void test_against_reference(void) {
    uint64_t rng = 0x5eed;
    const int before = mft_num_threads();
    for (size_t ci = 0; ci < sizeof r_cs / sizeof *r_cs; ci++)
        for (size_t wi = 0; wi < sizeof r_wins / sizeof *r_wins; wi++) {
            const win *w = &r_wins[wi];
            const int64_t xs[4] = {2, r_cs[ci], w->H, w->W};
            mft_tensor *x = mft_empty(4, xs, MFT_F32, CT), *xa = mft_empty(4, xs, MFT_F32, CT);
            fill_grid(x, &rng, true);
            fill_grid(xa, &rng, false);
            mft_tensor *xb = mft_to_format(x, B16), *xab = mft_to_format(xa, B16);
            mft_pool2d_params p = {{w->k[0], w->k[1]}, {w->s[0], w->s[1]}, {w->p[0], w->p[1]},
                                   {w->d[0], w->d[1]}, w->ceil, true, 0};
            mft_tensor *ind = NULL, *rind = NULL;
            /* the output sizes from the public call */
            mft_tensor *ys = mft_max_pool2d(x, w->k, w->s, w->p, w->d, w->ceil);
            CHECK(ys != NULL);
            if (!ys) continue;
            const int64_t *os = mft_tensor_sizes(ys);
            mft_tensor *go = mft_empty(4, os, MFT_F32, CT);
            fill_grid(go, &rng, false);
            mft_tensor *gob = mft_to_format(go, B16);
            mft_tensor *r[2][R_N];
            for (int t = 0; t < 2; t++) {
                mft_set_num_threads(t + 1);
                blocked_all(xb, xab, gob, w, r[t]);
            }
            mft_set_num_threads(before);
            for (int i = 0; i < R_N; i++)
                CHECK_MSG(!r[0][i] == !r[1][i] &&
                              (!r[0][i] || mft_tensor_hash(r[0][i]) == mft_tensor_hash(r[1][i])),
                          "C %lld window %zu result %d: 1 and 2 threads differ",
                          (long long)r_cs[ci], wi, i);
            /* max, relu max: values and indices; max backward */
            mft_tensor *my = ref_fwd(MFT__OP_MAX_POOL2D, &p, x, os, &ind);
            mft_tensor *ry = ref_fwd(MFT__OP_RELU_MAX_POOL2D, &p, x, os, &rind);
            mft_tensor *mg = ref_bwd(&p, go, ind, x);
            CHECK_MSG(is_b16(r[0][0]) && close_to(r[0][0], my, -1) && close_to(r[0][1], ind, -1),
                      "C %lld window %zu: max forward", (long long)r_cs[ci], wi);
            CHECK_MSG(is_b16(r[0][2]) && close_to(r[0][2], ry, -1) && close_to(r[0][3], rind, -1),
                      "C %lld window %zu: relu max forward", (long long)r_cs[ci], wi);
            CHECK_MSG(is_b16(r[0][4]) && close_to(r[0][4], mg, -1),
                      "C %lld window %zu: max backward", (long long)r_cs[ci], wi);
            mft_tensor *tmp[] = {my, ry, mg, ind, rind};
            for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++) mft_tensor_release(tmp[i]);
            for (int v = 0; v < R_NAVG && r[0][5]; v++) {
                mft_pool2d_params pa = p;
                pa.count_include_pad = r_avg[v].cip;
                pa.divisor_override = r_avg[v].div;
                mft_tensor *ay = ref_fwd(MFT__OP_AVG_POOL2D, &pa, xa, os, NULL);
                mft_tensor *ag = ref_bwd(&pa, go, NULL, xa);
                CHECK_MSG(is_b16(r[0][5 + 2 * v]) && close_to(r[0][5 + 2 * v], ay, -1),
                          "C %lld window %zu avg %d: forward", (long long)r_cs[ci], wi, v);
                CHECK_MSG(is_b16(r[0][6 + 2 * v]) && close_to(r[0][6 + 2 * v], ag, 1e-5),
                          "C %lld window %zu avg %d: backward", (long long)r_cs[ci], wi, v);
                mft_tensor_release(ay);
                mft_tensor_release(ag);
            }
            for (int t = 0; t < 2; t++)
                for (int i = 0; i < R_N; i++) mft_tensor_release(r[t][i]);
            mft_tensor *all[] = {x, xa, xb, xab, ys, go, gob};
            for (size_t i = 0; i < sizeof all / sizeof *all; i++) mft_tensor_release(all[i]);
        }
}

/* the tape's backward of blocked pools runs natively, gradient like x */
static void test_autograd(void) {
    const int64_t xs[4] = {2, 17, 8, 8}, k[2] = {3, 3}, s[2] = {2, 2}, p[2] = {1, 1};
    const int64_t o1[2] = {1, 1};
    for (int op = 0; op < 3; op++) {
        mft_tensor *x = mft_randn(4, xs, MFT_F32, CT, 7 + op);
        mft_tensor *xb = mft_to_format(x, B16);
        TU_OK_S(mft_tensor_set_requires_grad(x, true));
        TU_OK_S(mft_tensor_set_requires_grad(xb, true));
        TU_OK_S(mft_tape_begin());
        mft_tensor *ys[2];
        for (int b = 0; b < 2; b++) {
            mft_tensor *in = b ? xb : x;
            ys[b] = op == 0   ? mft_max_pool2d(in, k, s, p, NULL, false)
                    : op == 1 ? mft_avg_pool2d(in, k, s, p, true, false, 0)
                              : mft_adaptive_avg_pool2d(in, o1);
        }
        mft_tensor *go = mft_randn(4, mft_tensor_sizes(ys[0]), MFT_F32, CT, 40 + op);
        mft_tensor *gob = mft_to_format(go, B16);
        TU_OK_S(mft_backward(ys[0], go));
        mft_conversion_counts_reset();
        TU_OK_S(mft_backward(ys[1], gob));
        CHECK_MSG(conversions() == 0, "op %d: %lld conversions", op, (long long)conversions());
        TU_OK_S(mft_tape_end());
        mft_tensor *g = mft_tensor_grad(x), *gb = mft_tensor_grad(xb);
        CHECK(is_b16(gb) && close_to(gb, g, 1e-5));
        mft_tensor *all[] = {x, xb, ys[0], ys[1], go, gob};
        for (size_t i = 0; i < sizeof all / sizeof *all; i++) mft_tensor_release(all[i]);
    }
}

/* 1 and 2 threads: the same bits */
static void test_threads(void) {
    const int64_t xs[4] = {3, 40, 13, 11}, k[2] = {3, 3}, s[2] = {2, 2}, p[2] = {1, 1};
    const int64_t o1[2] = {1, 1};
    mft_tensor *x = mft_randn(4, xs, MFT_F32, B16, 11);
    const int before = mft_num_threads();
    uint64_t h[2][6];
    for (int t = 0; t < 2; t++) {
        mft_set_num_threads(t + 1);
        mft_tensor *idx = NULL;
        mft_tensor *r[6];
        r[0] = mft_max_pool2d_with_indices(x, k, s, p, NULL, true, &idx);
        r[1] = mft_avg_pool2d(x, k, s, p, false, false, 0);
        r[2] = mft_adaptive_avg_pool2d(x, o1);
        r[3] = mft_max_pool2d_backward(r[0], x, idx);
        r[4] = mft_avg_pool2d_backward(r[1], x, k, s, p, false, false, 0);
        r[5] = mft_adaptive_avg_pool2d_backward(r[2], x);
        for (int i = 0; i < 6; i++) {
            h[t][i] = r[i] ? mft_tensor_hash(r[i]) : 0;
            CHECK(is_b16(r[i]));
            mft_tensor_release(r[i]);
        }
        mft_tensor_release(idx);
    }
    mft_set_num_threads(before);
    for (int i = 0; i < 6; i++) CHECK_MSG(h[0][i] == h[1][i], "result %d differs", i);
    mft_tensor_release(x);
}

/* what stays on the fallback */
static void test_fallback_kept(void) {
    const int64_t xs[4] = {2, 19, 6, 6}, k[2] = {2, 2};
    mft_tensor *x8 = mft_randn(4, xs, MFT_F32, B8, 3), *x64 = mft_randn(4, xs, MFT_F64, B16, 4);
    mft_tensor *x = mft_randn(4, xs, MFT_F32, CT, 5), *xb = mft_to_format(x, B16);
    mft_conversion_counts_reset();
    mft_tensor *y8 = mft_max_pool2d(x8, k, NULL, NULL, NULL, false);
    CHECK(fallbacks() == 2 && y8 && mft_tensor_format(y8) == B8);
    mft_conversion_counts_reset();
    mft_tensor *y64 = mft_avg_pool2d(x64, k, NULL, NULL, false, true, 0);
    CHECK(fallbacks() == 2 && y64 && mft_tensor_format(y64) == B16);
    /* plain indices with blocked grad_out and x: the fallback, same values */
    mft_tensor *idx = NULL, *bidx = NULL;
    mft_tensor *y = mft_max_pool2d_with_indices(x, k, NULL, NULL, NULL, false, &idx);
    mft_tensor *by = mft_max_pool2d_with_indices(xb, k, NULL, NULL, NULL, false, &bidx);
    mft_tensor *g = mft_max_pool2d_backward(y, x, idx);
    mft_conversion_counts_reset();
    mft_tensor *bg = mft_max_pool2d_backward(by, xb, idx);
    CHECK(fallbacks() > 0 && is_b16(bg) && close_to(bg, g, 0));
    /* adaptive max stays on the fallback (plain indices) */
    const int64_t o[2] = {2, 2};
    mft_tensor *aidx = NULL;
    mft_conversion_counts_reset();
    mft_tensor *ay = mft_adaptive_max_pool2d_with_indices(xb, o, &aidx);
    CHECK(fallbacks() == 2 && is_b16(ay) && aidx && !mft_tensor_is_blocked(aidx));
    mft_tensor *all[] = {x8, x64, x, xb, y8, y64, idx, bidx, y, by, g, bg, ay, aidx};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) mft_tensor_release(all[i]);
}

/* ---------------------------------------------------------------- user kernels */
static int g_user_calls;
static void user_max(const mft_kernel_args *a) {
    g_user_calls++;
    /* the operands come packed in the key's format */
    CHECK(mft_tensor_format(a->inputs[0]) == B16 && mft_tensor_format(a->outputs[0]) == B16);
    CHECK(mft_tensor_is_contiguous(a->inputs[0], B16));
}

static void test_user_kernels(void) {
    const int64_t xs[4] = {1, 20, 4, 4}, k[2] = {2, 2};
    TU_OK_S(mft_dispatch_register("max_pool2d", B16, MFT_F32, "test.max.b16", user_max));
    TU_OK_S(mft_dispatch_register("avg_pool2d", B8, MFT_F32, "test.avg.b8", user_max));
    char list[1 << 16];
    mft_dispatch_list(list, sizeof list);
    CHECK(strstr(list, "test.max.b16") && strstr(list, "test.avg.b8"));
    mft_tensor *x = mft_randn(4, xs, MFT_F32, B16, 1);
    g_user_calls = 0;
    mft_tensor *y = mft_max_pool2d(x, k, NULL, NULL, NULL, false);
    CHECK(y && g_user_calls == 1);
    const mft_dispatch_info *last = mft_dispatch_last();
    CHECK(last && last->kernel && !strcmp(last->kernel, "test.max.b16"));
    mft_tensor_release(y);
    TU_OK_S(mft_dispatch_unregister("max_pool2d", B16, MFT_F32));
    TU_OK_S(mft_dispatch_unregister("avg_pool2d", B8, MFT_F32));
    g_user_calls = 0;
    y = mft_max_pool2d(x, k, NULL, NULL, NULL, false);
    CHECK(y && g_user_calls == 0 && is_b16(y));
    mft_tensor_release(y);
    mft_tensor_release(x);
    /* still refused: the tagless BLOCKED format, PRESERVE, a blocked key of
     * an op whose results are always plain */
    CHECK(mft_dispatch_register("max_pool2d", MFT_BLOCKED, MFT_F32, "k", user_max) == MFT_ERR_FORMAT);
    CHECK_ERR(MFT_ERR_FORMAT, "NCHW16C");
    CHECK(mft_dispatch_register("matmul", B16, MFT_F32, "k", user_max) == MFT_ERR_FORMAT);
    CHECK_ERR(MFT_ERR_FORMAT, "a NCHW16C kernel would never run");
    CHECK(mft_dispatch_unregister("max_pool2d", B16, MFT_F32) == MFT_ERR_INVALID);
    mft_clear_error();
}

int main(void) {
    RUN(test_against_plain);
    RUN(test_max22_special);
    RUN(test_against_reference);
    RUN(test_autograd);
    RUN(test_threads);
    RUN(test_fallback_kept);
    RUN(test_user_kernels);
    TEST_MAIN_END();
}
