/* tests/ops/test_reduce.c — reductions (sum, mean, amax, amin, var, std with
 * correction 0 and 1, argmax, sum_to_size) against a naive double-precision
 * reference over random layouts (random physical order, step-2 slices,
 * offsets, padding, stride-0 broadcasts, NCHW / NHWC packed), random dim
 * subsets (ndims == 0 = all, negative dims, any order), keepdim true and
 * false, size-1 and size-0 dims, ranks 0-5. Checked: result sizes and dtype
 * (ops.h: integer sums give I64; mean/var/std keep the floating dtype;
 * argmax I64), values (exact where the arithmetic is exact, relative 1e-5
 * for F32 statistics), the keepdim layout rule (packed in the input's tag:
 * an NHWC input gives a channels-last result; without keepdim contiguous),
 * NaN propagation, F32 sums accumulated in F64, and reproducibility (the same
 * reduction twice is bit-identical at the thread count the environment sets;
 * CTest runs this file with 1 and 2 threads). */
#include <stdbool.h>
#include "test_util.h"

/* ------------------------------------------------------------------ random numbers, layouts */

static const mft_dtype RD_DTS[5] = {MFT_F32, MFT_F64, MFT_I32, MFT_I64, MFT_U8};

/* Random layouts (tu_strided_view): step 2 in one dim of 3, padding 0-1 drawn
 * after the steps, in storage order; base slots -77. */
static const tu_layout_opts RD_LAYOUT = {2, 1, true};

static double rd_value(uint64_t *rng, mft_dtype dt, int range) {
    if (tu_is_float(dt)) return (double)tu_rng_int(rng, -4 * range, 4 * range) / 4;
    if (dt == MFT_U8) return (double)tu_rng_int(rng, 0, 2 * range);
    return (double)tu_rng_int(rng, -range, range);
}

static void rd_fill(mft_tensor *t, uint64_t *rng, int range, int nan_rate) {
    int nd = mft_tensor_ndim(t);
    int64_t idx[MFT_MAX_DIMS] = {0};
    if (mft_tensor_numel(t) == 0) return;
    do {
        double v = rd_value(rng, mft_tensor_dtype(t), range);
        if (nan_rate && tu_rng_int(rng, 0, nan_rate - 1) == 0) v = NAN;
        mft_tensor_set(t, idx, v);
    } while (tu_next_index(nd, mft_tensor_sizes(t), idx));
}

/* A filled tensor of logical sizes in a random layout (packed NCHW / NHWC,
 * strided, or a stride-0 expand of a smaller filled tensor). */
static mft_tensor *rd_input(int nd, const int64_t *sz, mft_dtype dt, uint64_t *rng, int range, int nan_rate) {
    int kind = (int)tu_rng_int(rng, 0, nd > 0 ? 3 : 2);
    mft_tensor *t;
    if (kind == 3) {
        int64_t inner[MFT_MAX_DIMS];
        for (int d = 0; d < nd; d++) inner[d] = tu_rng_int(rng, 0, 2) == 0 ? 1 : sz[d];
        mft_tensor *small = tu_strided_view(nd, inner, dt, -77, &RD_LAYOUT, rng, NULL);
        rd_fill(small, rng, range, nan_rate);
        t = mft_expand(small, nd, sz);
        mft_tensor_release(small);
        return t;
    }
    if (kind == 2) {
        t = tu_strided_view(nd, sz, dt, -77, &RD_LAYOUT, rng, NULL);
    } else {
        mft_format f = (kind == 1 && nd >= 3 && nd <= 5) ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
        t = mft_empty(nd, sz, dt, f);
    }
    rd_fill(t, rng, range, nan_rate);
    return t;
}

/* ------------------------------------------------------------------ the reference */

enum { R_SUM, R_MEAN, R_AMAX, R_AMIN, R_VAR, R_STD, R_ARGMAX, R_COUNT };
static const char *const r_names[R_COUNT] = {"sum", "mean", "amax", "amin", "var", "std", "argmax"};

typedef struct {
    int nd;
    int64_t sz[MFT_MAX_DIMS];
    bool red[MFT_MAX_DIMS]; /* reduced dims */
    int64_t nkept, n_per;   /* output elements (over kept dims), elements per output */
    double *sum, *m2, *mx, *mn;
    int64_t *argi;
    bool *has_nan;
} rd_ref;

/* Row-major index over the kept dims. */
static int64_t kept_index(const rd_ref *r, const int64_t *idx) {
    int64_t lin = 0;
    for (int d = 0; d < r->nd; d++)
        if (!r->red[d]) lin = lin * r->sz[d] + idx[d];
    return lin;
}

static void ref_compute(rd_ref *r, const mft_tensor *x) {
    r->nd = mft_tensor_ndim(x);
    r->nkept = 1;
    r->n_per = 1;
    for (int d = 0; d < r->nd; d++) {
        r->sz[d] = mft_tensor_sizes(x)[d];
        if (r->red[d])
            r->n_per *= r->sz[d];
        else
            r->nkept *= r->sz[d];
    }
    size_t n = (size_t)(r->nkept > 0 ? r->nkept : 1);
    r->sum = calloc(n, sizeof(double));
    r->m2 = calloc(n, sizeof(double));
    r->mx = malloc(n * sizeof(double));
    r->mn = malloc(n * sizeof(double));
    r->argi = calloc(n, sizeof(int64_t));
    r->has_nan = calloc(n, sizeof(bool));
    for (size_t i = 0; i < n; i++) {
        r->mx[i] = -INFINITY;
        r->mn[i] = INFINITY;
    }
    if (mft_tensor_numel(x) == 0) return;
    /* the argmax dim (when exactly one dim is reduced) */
    int adim = -1;
    for (int d = 0; d < r->nd; d++)
        if (r->red[d]) adim = d;
    int64_t idx[MFT_MAX_DIMS] = {0};
    do {
        double v = mft_tensor_get(x, idx);
        int64_t k = kept_index(r, idx);
        r->sum[k] += v;
        if (isnan(v)) r->has_nan[k] = true;
        if (v > r->mx[k]) {
            r->mx[k] = v;
            if (adim >= 0) r->argi[k] = idx[adim];
        }
        if (v < r->mn[k]) r->mn[k] = v;
    } while (tu_next_index(r->nd, r->sz, idx));
    memset(idx, 0, sizeof idx);
    do {
        int64_t k = kept_index(r, idx);
        double dv = mft_tensor_get(x, idx) - r->sum[k] / (double)r->n_per;
        r->m2[k] += dv * dv;
    } while (tu_next_index(r->nd, r->sz, idx));
}

static void ref_free(rd_ref *r) {
    free(r->sum);
    free(r->m2);
    free(r->mx);
    free(r->mn);
    free(r->argi);
    free(r->has_nan);
}

static double ref_value(const rd_ref *r, int rop, int64_t k, double correction) {
    double n = (double)r->n_per;
    switch (rop) {
    case R_SUM: return r->sum[k];
    case R_MEAN: return r->sum[k] / n; /* 0/0 = NaN for an empty reduction */
    case R_AMAX: return r->has_nan[k] ? NAN : r->mx[k];
    case R_AMIN: return r->has_nan[k] ? NAN : r->mn[k];
    case R_ARGMAX: return (double)r->argi[k];
    default: {
        double div = n - correction > 0 ? n - correction : 0; /* PyTorch: max(0, N - correction) */
        double var = r->n_per == 0 ? NAN : r->m2[k] / div;
        return rop == R_VAR ? var : sqrt(var);
    }
    }
}

static mft_dtype want_dtype(int rop, mft_dtype in) {
    if (rop == R_ARGMAX) return MFT_I64;
    if (rop == R_SUM && !tu_is_float(in)) return MFT_I64;
    return in;
}

/* mean/var/std compare with a relative tolerance (1e-5 for F32); sum, amax,
 * amin and argmax exactly (the random inputs are small quarter-integers, so
 * every partial sum is exact in any order), except sums of arbitrary values
 * (approx), which depend on the summation order. */
static bool rd_match(double got, double want, int rop, mft_dtype dt, bool approx) {
    if (isnan(want)) return isnan(got);
    if (isinf(want)) return got == want;
    bool exact_op = rop == R_SUM || rop == R_AMAX || rop == R_AMIN || rop == R_ARGMAX;
    if (exact_op && rop != R_ARGMAX && dt == MFT_F32) want = (double)(float)want;
    if (exact_op && !(approx && rop == R_SUM)) return got == want;
    double rtol = dt == MFT_F32 ? 1e-5 : 1e-11;
    return fabs(got - want) <= rtol * fabs(want) + (dt == MFT_F32 ? 1e-6 : 1e-12);
}

static mft_tensor *rd_call(int rop, const mft_tensor *x, int ndims, const int *dims, double corr, bool keep) {
    switch (rop) {
    case R_SUM: return mft_sum(x, ndims, dims, keep);
    case R_MEAN: return mft_mean(x, ndims, dims, keep);
    case R_AMAX: return mft_amax(x, ndims, dims, keep);
    case R_AMIN: return mft_amin(x, ndims, dims, keep);
    case R_VAR: return mft_var(x, ndims, dims, corr, keep);
    case R_STD: return mft_std(x, ndims, dims, corr, keep);
    default: return mft_argmax(x, dims[0], keep);
    }
}

/* Result strides the keepdim rule asks for: packed in the input's tag. */
static bool keepdim_layout_ok(const mft_tensor *x, const mft_tensor *r) {
    int nd = mft_tensor_ndim(r);
    mft_format f = mft_tensor_format(x);
    if (nd < 3 || nd > 5) f = MFT_CONTIGUOUS;
    int64_t st[MFT_MAX_DIMS];
    if (mft_strides_for_format(nd, mft_tensor_sizes(r), f, st) != MFT_OK) return false;
    for (int d = 0; d < nd; d++)
        if (st[d] != mft_tensor_strides(r)[d]) return false;
    if (!mft_tensor_is_contiguous(r, f)) return false;
    return nd < 3 || nd > 5 || mft_tensor_format(r) == f;
}

/* One reduction of x over the dims marked in red (ndims/dims as passed),
 * checked against the reference. Returns false when something was wrong. */
static bool check_reduction(int rop, const mft_tensor *x, int ndims, const int *dims, const bool *red,
                            double corr, bool keep, const char *what, bool approx) {
    rd_ref ref;
    memset(&ref, 0, sizeof ref);
    for (int d = 0; d < mft_tensor_ndim(x); d++) ref.red[d] = red[d];
    ref_compute(&ref, x);
    bool empty_reduce = ref.n_per == 0;
    for (int d = 0; d < ref.nd; d++) empty_reduce |= red[d] && ref.sz[d] == 0;
    char xd[256], dl[64] = "";
    tu_describe(x, xd, sizeof xd, true);
    for (int i = 0, p = 0; i < ndims && p < 60; i++) p += snprintf(dl + p, sizeof dl - (size_t)p, "%d ", dims[i]);
    uint64_t hx = mft_tensor_hash(x);
    mft_clear_error();
    mft_tensor *r = rd_call(rop, x, ndims, dims, corr, keep);
    bool ok = true;
    if (empty_reduce && (rop == R_AMAX || rop == R_AMIN || rop == R_ARGMAX)) {
        CHECK_MSG(r == NULL && mft_last_error() != MFT_OK, "%s %s of %s over {%s}: reducing a size-0 dim must fail",
                  what, r_names[rop], xd, dl);
        ok = r == NULL;
        mft_tensor_release(r);
        mft_clear_error();
        ref_free(&ref);
        return ok;
    }
    CHECK_MSG(r != NULL, "%s %s of %s over {%s} keepdim %d (corr %g) failed: %s", what, r_names[rop], xd, dl, keep,
              corr, mft_last_error_message());
    if (!r) {
        ref_free(&ref);
        return false;
    }
    /* sizes */
    int rnd = 0;
    int64_t rsz[MFT_MAX_DIMS];
    for (int d = 0; d < ref.nd; d++) {
        if (!red[d])
            rsz[rnd++] = ref.sz[d];
        else if (keep)
            rsz[rnd++] = 1;
    }
    bool sizes_ok = mft_tensor_ndim(r) == rnd;
    for (int d = 0; sizes_ok && d < rnd; d++) sizes_ok = mft_tensor_sizes(r)[d] == rsz[d];
    CHECK_MSG(sizes_ok, "%s %s of %s over {%s} keepdim %d: wrong result sizes", what, r_names[rop], xd, dl, keep);
    mft_dtype wdt = want_dtype(rop, mft_tensor_dtype(x));
    CHECK_MSG(mft_tensor_dtype(r) == wdt, "%s %s of %s: dtype %s, want %s", what, r_names[rop], xd,
              mft_dtype_name(mft_tensor_dtype(r)), mft_dtype_name(wdt));
    ok = sizes_ok && mft_tensor_dtype(r) == wdt;
    /* layout */
    if (keep) {
        char rdsc[256];
        tu_describe(r, rdsc, sizeof rdsc, true);
        CHECK_MSG(keepdim_layout_ok(x, r), "%s %s keepdim of %s gave %s: not packed in the input's tag", what,
                  r_names[rop], xd, rdsc);
    } else {
        CHECK_MSG(mft_tensor_is_contiguous(r, MFT_CONTIGUOUS), "%s %s of %s: result not contiguous", what,
                  r_names[rop], xd);
    }
    /* values */
    if (sizes_ok && ref.nkept > 0) {
        int64_t idx[MFT_MAX_DIMS] = {0}, bad = 0;
        do {
            int64_t k = 0;
            for (int d = 0, j = 0; d < ref.nd; d++) {
                if (!red[d])
                    k = k * ref.sz[d] + idx[j++];
                else if (keep)
                    j++;
            }
            double got = mft_tensor_get(r, idx), want = ref_value(&ref, rop, k, corr);
            if (!rd_match(got, want, rop, mft_tensor_dtype(x), approx)) {
                if (!bad)
                    fprintf(stderr, "  %s %s of %s over {%s} keepdim %d corr %g: element %lld got %.17g want %.17g\n",
                            what, r_names[rop], xd, dl, keep, corr, (long long)k, got, want);
                bad++;
            }
        } while (tu_next_index(rnd, rsz, idx));
        CHECK_MSG(bad == 0, "%s %s: %lld wrong values", what, r_names[rop], (long long)bad);
        ok = ok && bad == 0;
    }
    CHECK_MSG(mft_tensor_hash(x) == hx, "%s %s modified its input", what, r_names[rop]);
    mft_tensor_release(r);
    ref_free(&ref);
    return ok;
}

/* ------------------------------------------------------------------ tests */

static void rand_shape(uint64_t *rng, int *nd, int64_t *sz) {
    *nd = (int)tu_rng_int(rng, 0, 5);
    for (int d = 0; d < *nd; d++) sz[d] = tu_rng_int(rng, 0, 12) == 0 ? 0 : tu_rng_int(rng, 1, 5);
    if (*nd >= 3 && tu_rng_int(rng, 0, 5) == 0) sz[1] = 1;
    if (*nd >= 4 && tu_rng_int(rng, 0, 5) == 0) sz[2] = sz[3] = 1;
}

/* A random subset of dims in random order, some written negative. ndims == 0
 * means all (red all true). */
static int rand_dims(uint64_t *rng, int nd, int *dims, bool *red) {
    for (int d = 0; d < MFT_MAX_DIMS; d++) red[d] = false;
    int n = nd == 0 ? 0 : (int)tu_rng_int(rng, 0, nd);
    if (n == 0) {
        for (int d = 0; d < nd; d++) red[d] = true;
        return 0;
    }
    int perm[MFT_MAX_DIMS];
    for (int d = 0; d < nd; d++) perm[d] = d;
    for (int d = nd - 1; d > 0; d--) {
        int j = (int)tu_rng_int(rng, 0, d), t = perm[d];
        perm[d] = perm[j];
        perm[j] = t;
    }
    for (int i = 0; i < n; i++) {
        red[perm[i]] = true;
        dims[i] = tu_rng_int(rng, 0, 2) == 0 ? perm[i] - nd : perm[i];
    }
    return n;
}

static void test_random_reductions(void) {
    uint64_t rng = 0x5EED5EEDull;
    int failures = 0;
    for (int it = 0; it < 700 && failures < 12; it++) {
        int nd;
        int64_t sz[MFT_MAX_DIMS] = {0};
        rand_shape(&rng, &nd, sz);
        int rop = (int)tu_rng_int(&rng, 0, R_COUNT - 1);
        mft_dtype dt = RD_DTS[tu_rng_int(&rng, 0, 4)];
        if (rop == R_MEAN || rop == R_VAR || rop == R_STD) dt = tu_rng_int(&rng, 0, 1) ? MFT_F32 : MFT_F64;
        int nan_rate = (tu_is_float(dt) && rop != R_ARGMAX && tu_rng_int(&rng, 0, 4) == 0) ? 20 : 0;
        int range = rop == R_ARGMAX && tu_rng_int(&rng, 0, 1) ? 1 : 8; /* ties for argmax */
        mft_tensor *x = rd_input(nd, sz, dt, &rng, range, nan_rate);
        int dims[MFT_MAX_DIMS];
        bool red[MFT_MAX_DIMS];
        int ndims;
        if (rop == R_ARGMAX) {
            if (nd == 0) {
                mft_tensor_release(x);
                continue;
            }
            int d = (int)tu_rng_int(&rng, 0, nd - 1);
            for (int k = 0; k < MFT_MAX_DIMS; k++) red[k] = k == d;
            dims[0] = tu_rng_int(&rng, 0, 1) ? d - nd : d;
            ndims = 1;
        } else {
            ndims = rand_dims(&rng, nd, dims, red);
        }
        bool keep = tu_rng_int(&rng, 0, 1);
        double corr = (double)tu_rng_int(&rng, 0, 1);
        char what[32];
        snprintf(what, sizeof what, "iter %d", it);
        if (!check_reduction(rop, x, ndims, dims, red, corr, keep, what, false)) failures++;
        mft_tensor_release(x);
    }
}

/* Every reduction over every single dim and every pair of an NCHW / NHWC /
 * NDHWC / NLC tensor, keepdim on and off: the keepdim layout rule on the
 * formats that matter, and the values. */
static void test_formats_and_dims(void) {
    uint64_t rng = 99;
    const int64_t s3[3] = {2, 3, 5}, s4[4] = {2, 3, 4, 5}, s5[5] = {2, 3, 2, 3, 4}, s4c1[4] = {3, 1, 2, 2};
    const int64_t *shapes[4] = {s3, s4, s5, s4c1};
    const int nds[4] = {3, 4, 5, 4};
    for (int s = 0; s < 4; s++) {
        int nd = nds[s];
        for (int f = 0; f < 2; f++) {
            mft_tensor *x = mft_empty(nd, shapes[s], MFT_F32, f ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS);
            rd_fill(x, &rng, 8, 0);
            for (int a = 0; a < nd; a++)
                for (int b = a; b < nd; b++) {
                    int dims[2] = {a, b - nd};
                    bool red[MFT_MAX_DIMS] = {false};
                    red[a] = red[b] = true;
                    int n = a == b ? 1 : 2;
                    for (int rop = 0; rop < R_COUNT; rop++) {
                        if (rop == R_ARGMAX && n != 1) continue;
                        for (int keep = 0; keep < 2; keep++)
                            check_reduction(rop, x, n, dims, red, (double)keep, keep, f ? "NHWC" : "NCHW", false);
                    }
                }
            /* all dims, twice: ndims == 0 and every dim listed */
            bool all[MFT_MAX_DIMS];
            int alld[MFT_MAX_DIMS];
            for (int d = 0; d < MFT_MAX_DIMS; d++) all[d] = d < nd;
            for (int d = 0; d < nd; d++) alld[d] = nd - 1 - d;
            for (int rop = 0; rop < R_ARGMAX; rop++)
                for (int keep = 0; keep < 2; keep++) {
                    check_reduction(rop, x, 0, NULL, all, 1, keep, "all dims", false);
                    check_reduction(rop, x, nd, alld, all, 0, keep, "every dim listed", false);
                }
            mft_tensor_release(x);
        }
    }
    /* the keepdim example of the spec: per-channel statistics of an NHWC
     * batch stay channels-last: (N,C,H,W) -> (1,C,1,1) */
    const int64_t sz[4] = {4, 6, 5, 7};
    mft_tensor *x = mft_randn(4, sz, MFT_F32, MFT_CHANNELS_LAST, 3);
    const int dims[3] = {0, 2, 3};
    mft_tensor *m = mft_mean(x, 3, dims, true), *v = mft_var(x, 3, dims, 1, true);
    const int64_t cl[4] = {6, 1, 6, 6};
    CHECK(m && mft_tensor_format(m) == MFT_CHANNELS_LAST && mft_tensor_is_contiguous(m, MFT_CHANNELS_LAST));
    CHECK(v && mft_tensor_format(v) == MFT_CHANNELS_LAST);
    for (int d = 0; m && d < 4; d++) CHECK_EQ_I(mft_tensor_strides(m)[d], cl[d]);
    mft_tensor *mc = mft_mean(x, 3, dims, false);
    CHECK(mc && mft_tensor_ndim(mc) == 1 && mft_tensor_sizes(mc)[0] == 6);
    mft_tensor_release(x);
    mft_tensor_release(m);
    mft_tensor_release(v);
    mft_tensor_release(mc);
}

/* Size-0 and size-1 dims per ops.h: sum 0, mean NaN, amax/amin/argmax fail;
 * a size-0 kept dim gives an empty result. */
static void test_empty_and_size1(void) {
    const int64_t sz[3] = {2, 0, 3};
    mft_tensor *x = mft_zeros(3, sz, MFT_F32, MFT_CONTIGUOUS);
    const int d1[1] = {1}, d2[1] = {2};
    mft_tensor *s = mft_sum(x, 1, d1, false), *m = mft_mean(x, 1, d1, true), *sa = mft_sum(x, 0, NULL, false);
    mft_tensor *ma = mft_mean(x, 0, NULL, false), *e = mft_amax(x, 1, d2, false), *ea = mft_argmax(x, 2, true);
    CHECK(s && mft_tensor_ndim(s) == 2 && mft_tensor_numel(s) == 6);
    int64_t i[3] = {1, 0, 2};
    CHECK(s && mft_tensor_get(s, i) == 0.0);
    CHECK(m && mft_tensor_ndim(m) == 3 && isnan(mft_tensor_get(m, i)));
    CHECK(sa && mft_tensor_ndim(sa) == 0 && mft_tensor_get(sa, NULL) == 0.0);
    CHECK(ma && isnan(mft_tensor_get(ma, NULL)));
    CHECK(e && mft_tensor_numel(e) == 0 && mft_tensor_ndim(e) == 2); /* kept size-0 dim: empty result, fine */
    CHECK(ea && mft_tensor_numel(ea) == 0 && mft_tensor_ndim(ea) == 3);
    for (int k = 0; k < 3; k++) {
        mft_clear_error();
        mft_tensor *bad = k == 0 ? mft_amax(x, 1, d1, false) : k == 1 ? mft_amin(x, 0, NULL, true) : mft_argmax(x, 1, false);
        CHECK_MSG(bad == NULL && mft_last_error() != MFT_OK, "reduction %d over a size-0 dim did not fail", k);
        mft_tensor_release(bad);
        mft_clear_error();
    }
    mft_tensor *iz = mft_zeros(3, sz, MFT_I32, MFT_CONTIGUOUS), *isum = mft_sum(iz, 0, NULL, true);
    CHECK(isum && mft_tensor_dtype(isum) == MFT_I64 && mft_tensor_ndim(isum) == 3 && mft_tensor_numel(isum) == 1);
    /* size-1 dims: reductions over them copy the values */
    const int64_t s1[3] = {2, 1, 3};
    mft_tensor *y = mft_arange(0, 6, 1, MFT_F64), *y3 = mft_view(y, 3, s1);
    mft_tensor *y1 = mft_sum(y3, 1, d1, false), *ym = mft_amax(y3, 1, d1, true), *yv = mft_var(y3, 1, d1, 0, false);
    mft_tensor *yv1 = mft_var(y3, 1, d1, 1, false), *yarg = mft_argmax(y3, 1, false);
    int64_t j[2] = {1, 2}, j3[3] = {1, 0, 2};
    CHECK(y1 && mft_tensor_get(y1, j) == 5.0);
    CHECK(ym && mft_tensor_get(ym, j3) == 5.0);
    CHECK(yv && mft_tensor_get(yv, j) == 0.0);
    CHECK(yv1 && isnan(mft_tensor_get(yv1, j))); /* N - correction = 0: 0/0 */
    /* a non-finite correction is refused (it would make every result NaN) */
    CHECK(mft_var(y3, 1, d1, NAN, false) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "mft_var: correction nan");
    CHECK(mft_std(y3, 1, d1, INFINITY, false) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "mft_std: correction inf");
    CHECK(yarg && mft_tensor_get(yarg, j) == 0.0);
    /* rank 0 */
    mft_tensor *z = mft_full(0, NULL, MFT_I32, MFT_CONTIGUOUS, 7), *zs = mft_sum(z, 0, NULL, false);
    mft_tensor *zm = mft_amax(z, 0, NULL, true);
    CHECK(zs && mft_tensor_ndim(zs) == 0 && mft_tensor_dtype(zs) == MFT_I64 && mft_tensor_get(zs, NULL) == 7.0);
    CHECK(zm && mft_tensor_ndim(zm) == 0 && mft_tensor_dtype(zm) == MFT_I32 && mft_tensor_get(zm, NULL) == 7.0);
    mft_tensor *all[] = {x, s, m, sa, ma, e, ea, iz, isum, y, y3, y1, ym, yv, yv1, yarg, z, zs, zm};
    for (size_t k = 0; k < sizeof all / sizeof *all; k++) mft_tensor_release(all[k]);
}

static void test_nan_and_argmax_ties(void) {
    for (int f = 0; f < 2; f++) {
        mft_dtype dt = f ? MFT_F64 : MFT_F32;
        const int64_t sz[2] = {3, 4};
        const double v[12] = {1, NAN, 3, 2, -1, -5, -5, -1, 7, 7, 2, 7};
        mft_tensor *x = mft_empty(2, sz, dt, MFT_CONTIGUOUS);
        for (int64_t k = 0; k < 12; k++) {
            int64_t idx[2] = {k / 4, k % 4};
            mft_tensor_set(x, idx, v[k]);
        }
        const int d1[1] = {1}, d0[1] = {0};
        mft_tensor *mx = mft_amax(x, 1, d1, false), *mn = mft_amin(x, 1, d1, false), *s = mft_sum(x, 1, d1, false);
        mft_tensor *mx0 = mft_amax(x, 1, d0, false), *mxa = mft_amax(x, 0, NULL, false);
        mft_tensor *am = mft_argmax(x, -1, false), *am0 = mft_argmax(x, 0, true);
        int64_t i0 = 0, i1 = 1, i2 = 2;
        CHECK(mx && isnan(mft_tensor_get(mx, &i0)) && mft_tensor_get(mx, &i1) == -1 && mft_tensor_get(mx, &i2) == 7);
        CHECK(mn && isnan(mft_tensor_get(mn, &i0)) && mft_tensor_get(mn, &i1) == -5 && mft_tensor_get(mn, &i2) == 2);
        CHECK(s && isnan(mft_tensor_get(s, &i0)) && mft_tensor_get(s, &i1) == -12);
        CHECK(mx0 && mft_tensor_get(mx0, &i0) == 7 && isnan(mft_tensor_get(mx0, &i1)));
        CHECK(mxa && isnan(mft_tensor_get(mxa, NULL)));
        /* first maximum: row 1 has -1 at 0 and 3; row 2 has 7 at 0, 1, 3 */
        CHECK(am && mft_tensor_dtype(am) == MFT_I64 && mft_tensor_get(am, &i1) == 0 && mft_tensor_get(am, &i2) == 0);
        int64_t c[2] = {0, 2}, c3[2] = {0, 3};
        CHECK(am0 && mft_tensor_ndim(am0) == 2 && mft_tensor_get(am0, c) == 0 && mft_tensor_get(am0, c3) == 2);
        mft_tensor *all[] = {x, mx, mn, s, mx0, mxa, am, am0};
        for (int k = 0; k < 8; k++) mft_tensor_release(all[k]);
    }
    /* integer amax keeps the dtype; U8 sums become I64 without wrapping */
    int64_t n = 300;
    mft_tensor *u = mft_full(1, &n, MFT_U8, MFT_CONTIGUOUS, 200), *us = mft_sum(u, 0, NULL, false);
    mft_tensor *um = mft_amax(u, 0, NULL, false), *ua = mft_argmax(u, 0, false);
    CHECK(us && mft_tensor_dtype(us) == MFT_I64 && mft_tensor_get(us, NULL) == 60000.0);
    CHECK(um && mft_tensor_dtype(um) == MFT_U8 && mft_tensor_get(um, NULL) == 200.0);
    CHECK(ua && mft_tensor_get(ua, NULL) == 0.0);
    mft_tensor *i32 = mft_full(1, &n, MFT_I32, MFT_CONTIGUOUS, 2147483647.0), *is = mft_sum(i32, 0, NULL, false);
    CHECK(is && mft_tensor_dtype(is) == MFT_I64 && mft_tensor_get(is, NULL) == 300.0 * 2147483647.0);
    mft_tensor *all[] = {u, us, um, ua, i32, is};
    for (int k = 0; k < 6; k++) mft_tensor_release(all[k]);
}

/* ops.h: F32 sums accumulate in F64. 1e8 + 1 + ... + 1 - 1e8 is exact in
 * F64 in any order, wrong in F32 accumulation; at two sizes (one above the
 * parallel grain). */
static void test_f32_accumulates_in_f64(void) {
    const int64_t counts[2] = {1000, 100000};
    for (int c = 0; c < 2; c++) {
        int64_t n = counts[c] + 2;
        mft_tensor *x = mft_full(1, &n, MFT_F32, MFT_CONTIGUOUS, 1.0);
        int64_t i0 = 0, il = n - 1;
        mft_tensor_set(x, &i0, 1e8);
        mft_tensor_set(x, &il, -1e8);
        mft_tensor *s = mft_sum(x, 0, NULL, false), *m = mft_mean(x, 0, NULL, false);
        CHECK_MSG(s && mft_tensor_get(s, NULL) == (double)counts[c], "F32 sum of 1e8, %lld ones, -1e8 = %.9g",
                  (long long)counts[c], s ? mft_tensor_get(s, NULL) : NAN);
        CHECK(m && fabs(mft_tensor_get(m, NULL) - (double)counts[c] / (double)n) <= 1e-6);
        /* the same along a dim of a 2-D view: per-row sums */
        int64_t sz2[2] = {1, n};
        mft_tensor *x2 = mft_view(x, 2, sz2);
        const int d1[1] = {-1};
        mft_tensor *s2 = mft_sum(x2, 1, d1, true);
        int64_t j[2] = {0, 0};
        CHECK(s2 && mft_tensor_get(s2, j) == (double)counts[c]);
        mft_tensor_release(x);
        mft_tensor_release(s);
        mft_tensor_release(m);
        mft_tensor_release(x2);
        mft_tensor_release(s2);
    }
    /* 1e6 values of 0.1f: F32 accumulation drifts by ~1% */
    int64_t n = 1000000;
    mft_tensor *x = mft_full(1, &n, MFT_F32, MFT_CONTIGUOUS, 0.1);
    mft_tensor *s = mft_sum(x, 0, NULL, false);
    double want = (double)n * (double)0.1f;
    CHECK_MSG(s && fabs(mft_tensor_get(s, NULL) - want) <= 1e-6 * want, "sum of 1e6 x 0.1f = %.9g, want %.9g",
              s ? mft_tensor_get(s, NULL) : NAN, want);
    mft_tensor_release(x);
    mft_tensor_release(s);
}

/* Big random tensors (above the parallel grain): the same reduction twice
 * is bit-identical, and values match the reference within 1e-5. */
static void test_big_reproducible(void) {
    const int64_t sz[4] = {4, 16, 40, 40}; /* 102400 elements */
    printf("threads: %d\n", mft_num_threads());
    for (int f = 0; f < 2; f++) {
        mft_tensor *x = mft_randn(4, sz, f ? MFT_F64 : MFT_F32, f ? MFT_CONTIGUOUS : MFT_CHANNELS_LAST, 11 + (uint64_t)f);
        CHECK(mft_add_scalar_(x, 0.5) == MFT_OK); /* a non-zero mean */
        const int dsets[4][3] = {{0, 2, 3}, {1, 0, 0}, {-1, -2, 0}, {0, 0, 0}};
        const int dn[4] = {3, 1, 2, 0};
        for (int ds = 0; ds < 4; ds++) {
            bool red[MFT_MAX_DIMS] = {false};
            for (int k = 0; k < dn[ds]; k++) red[(dsets[ds][k] + 4) % 4] = true;
            if (dn[ds] == 0)
                for (int d = 0; d < 4; d++) red[d] = true;
            for (int rop = 0; rop < R_ARGMAX; rop++) {
                for (int keep = 0; keep < 2; keep++) {
                    mft_tensor *a = rd_call(rop, x, dn[ds], dsets[ds], 1, keep);
                    mft_tensor *b = rd_call(rop, x, dn[ds], dsets[ds], 1, keep);
                    CHECK_MSG(a && b && mft_tensor_hash(a) == mft_tensor_hash(b),
                              "%s over set %d: two runs differ", r_names[rop], ds);
                    mft_tensor_release(a);
                    mft_tensor_release(b);
                }
                check_reduction(rop, x, dn[ds], dsets[ds], red, 1, ds & 1, "big", true);
            }
            if (dn[ds] == 1) {
                mft_tensor *a = mft_argmax(x, dsets[ds][0], false), *b = mft_argmax(x, dsets[ds][0], false);
                CHECK(a && b && mft_tensor_hash(a) == mft_tensor_hash(b));
                mft_tensor_release(a);
                mft_tensor_release(b);
                check_reduction(R_ARGMAX, x, 1, dsets[ds], red, 0, false, "big", true);
            }
        }
        mft_tensor_release(x);
    }
}

/* sum_to_size: x summed down to sizes it broadcasts from. */
static void test_sum_to_size(void) {
    uint64_t rng = 31337;
    for (int it = 0; it < 300; it++) {
        int nd;
        int64_t sz[MFT_MAX_DIMS] = {0};
        rand_shape(&rng, &nd, sz);
        mft_dtype dt = RD_DTS[tu_rng_int(&rng, 0, 4)];
        mft_tensor *x = rd_input(nd, sz, dt, &rng, 8, 0);
        int tnd = (int)tu_rng_int(&rng, 0, nd);
        int64_t tsz[MFT_MAX_DIMS];
        for (int d = 0; d < tnd; d++) tsz[d] = tu_rng_int(&rng, 0, 2) == 0 ? 1 : sz[nd - tnd + d];
        bool same = tnd == nd;
        for (int d = 0; same && d < nd; d++) same = tsz[d] == sz[d];
        char xd[256];
        tu_describe(x, xd, sizeof xd, true);
        mft_tensor *r = mft_sum_to_size(x, tnd, tsz);
        CHECK_MSG(r != NULL, "sum_to_size(%s) failed: %s", xd, mft_last_error_message());
        if (!r) {
            mft_tensor_release(x);
            continue;
        }
        if (same) CHECK_MSG(r == x, "sum_to_size(%s) to its own sizes is not x itself", xd);
        /* ops.h does not say the dtype of an integer sum_to_size: its own or
         * sum's I64 (what PyTorch's sum_to_size gives) */
        mft_dtype rdt = mft_tensor_dtype(r);
        CHECK_MSG(rdt == dt || (!tu_is_float(dt) && rdt == MFT_I64), "sum_to_size(%s): dtype %s", xd, mft_dtype_name(rdt));
        bool sizes_ok = mft_tensor_ndim(r) == tnd;
        for (int d = 0; sizes_ok && d < tnd; d++) sizes_ok = mft_tensor_sizes(r)[d] == tsz[d];
        CHECK_MSG(sizes_ok, "sum_to_size(%s): wrong sizes", xd);
        if (sizes_ok) {
            /* reference: accumulate every x element into its target slot */
            int64_t tn = 1;
            for (int d = 0; d < tnd; d++) tn *= tsz[d];
            double *acc = calloc((size_t)(tn > 0 ? tn : 1), sizeof(double));
            int64_t idx[MFT_MAX_DIMS] = {0}, bad = 0;
            if (mft_tensor_numel(x) > 0) {
                do {
                    int64_t k = 0;
                    for (int d = 0; d < tnd; d++) k = k * tsz[d] + (tsz[d] == 1 ? 0 : idx[nd - tnd + d]);
                    acc[k] += mft_tensor_get(x, idx);
                } while (tu_next_index(nd, sz, idx));
            }
            memset(idx, 0, sizeof idx);
            if (tn > 0) {
                int64_t k = 0;
                do {
                    double got = mft_tensor_get(r, idx), want = acc[k++];
                    if (rdt == MFT_U8) want = fmod(want, 256.0);
                    if (rdt == MFT_I32) want = (double)(int32_t)(uint32_t)(int64_t)want;
                    if (got != want) {
                        if (!bad) fprintf(stderr, "  sum_to_size(%s): element %lld got %g want %g\n", xd, (long long)(k - 1), got, want);
                        bad++;
                    }
                } while (tu_next_index(tnd, tsz, idx));
            }
            CHECK_MSG(bad == 0, "sum_to_size(%s): %lld wrong values", xd, (long long)bad);
            free(acc);
        }
        mft_tensor_release(r);
        mft_tensor_release(x);
    }
}

int main(void) {
    RUN(test_empty_and_size1);
    RUN(test_nan_and_argmax_ties);
    RUN(test_f32_accumulates_in_f64);
    RUN(test_formats_and_dims);
    RUN(test_random_reductions);
    RUN(test_sum_to_size);
    RUN(test_big_reproducible);
    TEST_MAIN_END();
}
