/* tests/autograd/test_norm_backward.c — backward of batch_norm, group_norm,
 * instance_norm and layer_norm, and the statistics-returning forwards
 * (ops/norm/channel_backward.c, ops/norm/):
 *   (a) grad_x / grad_weight / grad_bias of every kernel (the fast F32
 *       NCHW / NHWC ones, the F32 reference registered as a user kernel, the
 *       F64 reference) against a naive double loop written here, over shape
 *       sweeps (N = 1, C = 1, spatial 1, odd sizes, rows beyond one block),
 *       groups 1 / 2 / C, nnorm 1-3, with and without weight, training and
 *       eval, NCHW / NHWC / non-dense x and grad_out, 2-D to 5-D;
 *       result formats (grad_x packed in x's tag, grads packed 1-D);
 *   (b) the _ex statistics against the naive ones;
 *   (c) finite differences in F64;
 *   (d) bit-identical results with 1 and 2 threads;
 *   (e) argument errors (status, message naming the function, outputs NULL);
 *   (f) golden cases from PyTorch 1.13 (tests/golden/norm_backward_cases.txt,
 *       written by gen_norm_backward.py). */
#include <math.h>
#include <string.h>
#include "ops_internal.h"
#include "test_util.h"

mft_kernel_fn mft__norm_backward_reference(int op, mft_dtype dt);

enum { K_BATCH, K_GROUP, K_INSTANCE, K_LAYER };
static const char *const kind_name[] = {"batch_norm", "group_norm", "instance_norm", "layer_norm"};
static const char *const op_name[] = {"batch_norm_backward", "group_norm_backward",
                                      "group_norm_backward", "layer_norm_backward"};

/* ------------------------------------------------------------------ helpers */
static void fill_random(mft_tensor *t, uint64_t seed, double lo, double hi) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ULL + 1;
    int nd = mft_tensor_ndim(t);
    int64_t idx[MFT_MAX_DIMS] = {0};
    if (mft_tensor_numel(t) == 0) return;
    do {
        double u = (double)(tu_rng_next(&s) >> 11) / 9007199254740992.0;
        mft_tensor_set(t, idx, lo + (hi - lo) * u);
    } while (tu_next_index(nd, mft_tensor_sizes(t), idx));
}

static void to_array(const mft_tensor *t, double *a) {
    int nd = mft_tensor_ndim(t);
    int64_t idx[MFT_MAX_DIMS] = {0}, i = 0;
    if (mft_tensor_numel(t) == 0) return;
    do a[i++] = mft_tensor_get(t, idx);
    while (tu_next_index(nd, mft_tensor_sizes(t), idx));
}

static double *arr_of(const mft_tensor *t) {
    if (!t) return NULL;
    double *a = malloc(sizeof(double) * (size_t)(mft_tensor_numel(t) + 1));
    to_array(t, a);
    return a;
}

static double max_err(const mft_tensor *got, const double *want) {
    int nd = mft_tensor_ndim(got);
    int64_t idx[MFT_MAX_DIMS] = {0}, i = 0;
    double worst = 0;
    if (mft_tensor_numel(got) == 0) return 0;
    do {
        double g = mft_tensor_get(got, idx), w = want[i++];
        double e = fabs(g - w) / (1.0 + fabs(w));
        if (!(e <= worst)) worst = e;
    } while (tu_next_index(nd, mft_tensor_sizes(got), idx));
    return worst;
}

/* The naive model: element i (logical) belongs to statistics set set_of(i)
 * and uses affine index aff_of(i). */
typedef struct {
    int kind;
    int64_t N, C, S, G, L, numel, nset, naff;
} geo;

static geo geo_of(int kind, const mft_tensor *x, int64_t groups, int nnorm) {
    geo g;
    int nd = mft_tensor_ndim(x);
    const int64_t *sz = mft_tensor_sizes(x);
    g.kind = kind;
    g.numel = mft_tensor_numel(x);
    g.N = sz[0];
    g.C = kind == K_LAYER ? 1 : sz[1];
    g.S = kind == K_LAYER ? 1 : tu_shape_numel(nd - 2, sz + 2);
    g.G = kind == K_GROUP ? groups : kind == K_INSTANCE ? g.C : 1;
    g.L = kind == K_LAYER ? tu_shape_numel(nnorm, sz + nd - nnorm) : 0;
    g.nset = kind == K_BATCH ? g.C : kind == K_LAYER ? (g.L ? g.numel / g.L : 0) : g.N * g.G;
    g.naff = kind == K_LAYER ? g.L : g.C;
    return g;
}
static int64_t set_of(const geo *g, int64_t i) {
    if (g->kind == K_BATCH) return (i / g->S) % g->C;
    if (g->kind == K_LAYER) return i / g->L;
    return i / ((g->C / g->G) * g->S);
}
static int64_t aff_of(const geo *g, int64_t i) {
    return g->kind == K_LAYER ? i % g->L : (i / g->S) % g->C;
}

/* Naive backward in double. mean / rstd: computed from x when rm == NULL
 * (training), else from the running stats (batch_norm eval). Writes gx
 * [numel], gw, gb [naff], and the statistics [nset]. */
static void naive_backward(const geo *g, const double *x, const double *dy, const double *w,
                           const double *rm, const double *rv, double eps, double *gx,
                           double *gw, double *gb, double *mean, double *rstd) {
    int64_t *cnt = calloc((size_t)g->nset + 1, sizeof(int64_t));
    double *s1 = calloc((size_t)g->nset + 1, sizeof(double));
    double *s2 = calloc((size_t)g->nset + 1, sizeof(double));
    for (int64_t k = 0; k < g->nset; k++) mean[k] = rstd[k] = 0;
    for (int64_t i = 0; i < g->numel; i++) {
        mean[set_of(g, i)] += x[i];
        cnt[set_of(g, i)]++;
    }
    for (int64_t k = 0; k < g->nset; k++) mean[k] /= (double)cnt[k];
    for (int64_t i = 0; i < g->numel; i++) {
        double d = x[i] - mean[set_of(g, i)];
        rstd[set_of(g, i)] += d * d;
    }
    for (int64_t k = 0; k < g->nset; k++) {
        if (rm) {
            mean[k] = rm[k];
            rstd[k] = 1.0 / sqrt(rv[k] + eps);
        } else {
            rstd[k] = 1.0 / sqrt(rstd[k] / (double)cnt[k] + eps);
        }
    }
    for (int64_t a = 0; a < g->naff; a++) gw[a] = gb[a] = 0;
    for (int64_t i = 0; i < g->numel; i++) {
        int64_t k = set_of(g, i), a = aff_of(g, i);
        double xh = (x[i] - mean[k]) * rstd[k], wv = w ? w[a] : 1.0;
        gw[a] += dy[i] * xh;
        gb[a] += dy[i];
        s1[k] += wv * dy[i];
        s2[k] += wv * dy[i] * xh;
    }
    for (int64_t i = 0; i < g->numel; i++) {
        int64_t k = set_of(g, i), a = aff_of(g, i);
        double xh = (x[i] - mean[k]) * rstd[k], wv = w ? w[a] : 1.0;
        if (rm)
            gx[i] = dy[i] * wv * rstd[k];
        else
            gx[i] = rstd[k] * (wv * dy[i] - s1[k] / (double)cnt[k] - xh * s2[k] / (double)cnt[k]);
    }
    free(cnt);
    free(s1);
    free(s2);
}

/* layout 0 NCHW, 1 NHWC (rank 3-5; else NCHW), 2 non-dense view */
static mft_tensor *make_t(int nd, const int64_t *sz, mft_dtype dt, int layout, uint64_t *rng,
                          uint64_t seed, double lo, double hi) {
    tu_layout_opts lo_ = {3, 2, false};
    mft_tensor *x;
    if (layout == 2) x = tu_strided_view(nd, sz, dt, 0.0, &lo_, rng, NULL);
    else
        x = mft_empty(nd, sz, dt, layout == 1 && nd >= 3 && nd <= 5 ? MFT_CHANNELS_LAST
                                                                     : MFT_CONTIGUOUS);
    if (x) fill_random(x, seed, lo, hi);
    return x;
}

/* Runs the forward _ex (for the statistics) and the backward of kind. */
static mft_status run_backward(int kind, const mft_tensor *dy, const mft_tensor *x,
                               const mft_tensor *w, mft_tensor *rm, mft_tensor *rv, bool training,
                               int64_t groups, int nnorm, double eps, bool pass_stats,
                               mft_tensor **gx, mft_tensor **gw, mft_tensor **gb,
                               mft_tensor **smean, mft_tensor **srstd) {
    mft_tensor *m = NULL, *r = NULL, *y = NULL;
    const int64_t *sz = mft_tensor_sizes(x);
    int nd = mft_tensor_ndim(x);
    mft_status st;
    if (kind == K_BATCH) {
        y = mft_batch_norm_ex(x, rm, rv, w, NULL, training, 0.1, eps, &m, &r);
        st = y ? mft_batch_norm_backward(dy, x, w, m, r, training, gx, gw, gb) : mft_last_error();
    } else if (kind == K_LAYER) {
        y = mft_layer_norm_ex(x, nnorm, sz + nd - nnorm, w, NULL, eps, &m, &r);
        st = y ? mft_layer_norm_backward(dy, x, nnorm, sz + nd - nnorm, pass_stats ? m : NULL,
                                         pass_stats ? r : NULL, w, eps, gx, gw, gb)
               : mft_last_error();
    } else if (kind == K_GROUP) {
        y = mft_group_norm_ex(x, groups, w, NULL, eps, &m, &r);
        st = y ? mft_group_norm_backward(dy, x, groups, pass_stats ? m : NULL,
                                         pass_stats ? r : NULL, w, eps, gx, gw, gb)
               : mft_last_error();
    } else {
        y = mft_group_norm_ex(x, mft_tensor_sizes(x)[1], w, NULL, eps, &m, &r);
        st = y ? mft_instance_norm_backward(dy, x, pass_stats ? m : NULL, pass_stats ? r : NULL,
                                            w, eps, gx, gw, gb)
               : mft_last_error();
    }
    mft_tensor_release(y);
    if (smean) *smean = m;
    else mft_tensor_release(m);
    if (srstd) *srstd = r;
    else mft_tensor_release(r);
    return st;
}

static bool packed_vec(const mft_tensor *t, int n, const int64_t *sz) {
    return t && tu_has_sizes(t, n, sz) && mft_tensor_is_contiguous(t, MFT_CONTIGUOUS);
}

/* ------------------------------------------------------------------ (a)(b) sweeps */
typedef struct {
    int nd;
    int64_t sz[5];
} shape_t;
static const shape_t g_shapes[] = {
    {4, {2, 3, 4, 5}},  {4, {1, 3, 5, 7}},  {4, {3, 1, 3, 3}},   {4, {5, 4, 1, 1}},
    {3, {2, 5, 3}},     {5, {2, 3, 2, 3, 4}}, {2, {4, 6}},       {4, {2, 17, 5, 3}},
    {4, {2, 4, 17, 16}}, {4, {1, 2, 1, 1}}, {5, {1, 4, 1, 2, 1}}, {4, {3, 6, 9, 31}},
    /* channels in 64-wide register blocks (NHWC sums), with and without a tail */
    {4, {2, 64, 5, 3}}, {4, {2, 70, 4, 3}},
};

static int g_fail_print;

static void one_case(int kind, const shape_t *sh, mft_dtype dt, int xlayout, int glayout,
                     bool with_w, bool training, int64_t groups, int nnorm, bool pass_stats,
                     bool use_ref, uint64_t *rng, uint64_t seed) {
    const int nd = sh->nd;
    const int64_t *sz = sh->sz;
    mft_tensor *x = make_t(nd, sz, dt, xlayout, rng, seed, -3.0, 5.0);
    mft_tensor *dy = make_t(nd, sz, dt, glayout, rng, seed + 1, -1.0, 1.0);
    geo g = geo_of(kind, x, groups, nnorm);
    int64_t wsz[3];
    int wn = kind == K_LAYER ? nnorm : 1;
    if (kind == K_LAYER) memcpy(wsz, sz + nd - nnorm, sizeof(int64_t) * (size_t)nnorm);
    else wsz[0] = sz[1];
    mft_tensor *w = with_w ? make_t(wn, wsz, dt, 0, rng, seed + 2, 0.5, 1.5) : NULL;
    mft_tensor *rm = NULL, *rv = NULL;
    if (kind == K_BATCH && !training) {
        rm = make_t(1, wsz, dt, 0, rng, seed + 3, -0.5, 0.5);
        rv = make_t(1, wsz, dt, 0, rng, seed + 4, 0.5, 1.5);
    }
    const double eps = 1e-5;
    const int opk = kind == K_INSTANCE ? 1 : kind == K_LAYER ? 2 : kind == K_BATCH ? 0 : 1;
    if (use_ref) {
        mft_kernel_fn f = mft__norm_backward_reference(opk, dt);
        mft_dispatch_register(op_name[kind], MFT_CONTIGUOUS, dt, "test.ref", f);
        mft_dispatch_register(op_name[kind], MFT_CHANNELS_LAST, dt, "test.ref", f);
    }
    mft_tensor *gx = NULL, *gw = NULL, *gb = NULL, *sm = NULL, *sr = NULL;
    mft_status st = run_backward(kind, dy, x, w, rm, rv, training, groups, nnorm, eps, pass_stats,
                                 &gx, &gw, &gb, &sm, &sr);
    const mft_dispatch_info *di = mft_dispatch_last();
    char kname[96];
    snprintf(kname, sizeof kname, "%s", di->kernel ? di->kernel : "");
    if (use_ref) {
        mft_dispatch_unregister(op_name[kind], MFT_CONTIGUOUS, dt);
        mft_dispatch_unregister(op_name[kind], MFT_CHANNELS_LAST, dt);
    }
    char what[256];
    snprintf(what, sizeof what,
             "%s %dD [%lld,%lld,...] %s xl%d gl%d w%d tr%d G%lld nn%d stats%d ref%d",
             kind_name[kind], nd, (long long)sz[0], (long long)sz[1], mft_dtype_name(dt), xlayout,
             glayout, with_w, training, (long long)groups, nnorm, pass_stats, use_ref);
    CHECK_MSG(st == MFT_OK && gx && gw && gb, "%s: %s", what, mft_last_error_message());
    if (st == MFT_OK && gx && gw && gb) {
        double *xa = arr_of(x), *da = arr_of(dy), *wa = arr_of(w), *rma = arr_of(rm),
               *rva = arr_of(rv);
        double *egx = malloc(sizeof(double) * (size_t)(g.numel + 1));
        double *egw = malloc(sizeof(double) * (size_t)(g.naff + 1));
        double *egb = malloc(sizeof(double) * (size_t)(g.naff + 1));
        double *em = malloc(sizeof(double) * (size_t)(g.nset + 1));
        double *er = malloc(sizeof(double) * (size_t)(g.nset + 1));
        naive_backward(&g, xa, da, wa, rma, rva, eps, egx, egw, egb, em, er);
        const double tol = dt == MFT_F32 ? 2e-4 : 1e-10;
        double e1 = max_err(gx, egx), e2 = max_err(gw, egw), e3 = max_err(gb, egb);
        double e4 = max_err(sm, em), e5 = max_err(sr, er);
        bool ok = e1 <= tol && e2 <= tol && e3 <= tol && e4 <= tol && e5 <= tol;
        CHECK_MSG(ok, "%s (kernel %s): errors gx %g gw %g gb %g mean %g rstd %g", what, kname,
                  e1, e2, e3, e4, e5);
        /* formats */
        mft_format want = nd >= 3 && nd <= 5 ? mft_tensor_format(x) : MFT_CONTIGUOUS;
        CHECK_MSG(tu_has_sizes(gx, nd, sz) && mft_tensor_is_contiguous(gx, want) &&
                      mft_tensor_dtype(gx) == dt && (nd < 3 || mft_tensor_format(gx) == want),
                  "%s: grad_x not packed in %s", what, mft_format_name(want));
        CHECK_MSG(packed_vec(gw, wn, wsz) && packed_vec(gb, wn, wsz) && mft_tensor_dtype(gw) == dt,
                  "%s: grad_weight / grad_bias shape", what);
        int64_t ns = g.nset;
        CHECK_MSG(packed_vec(sm, 1, &ns) && packed_vec(sr, 1, &ns), "%s: stats shape", what);
        /* which kernel ran */
        if (use_ref)
            CHECK_MSG(strcmp(kname, "test.ref") == 0, "%s: kernel %s", what, kname);
        else if (dt == MFT_F32 && (nd < 3 || nd > 5 || xlayout != 2)) {
            const bool cl = nd >= 3 && nd <= 5 && want == MFT_CHANNELS_LAST;
            char wantk[96];
            snprintf(wantk, sizeof wantk, "%s.%s.f32", op_name[kind], cl ? "nhwc" : "nchw");
            CHECK_MSG(strcmp(kname, wantk) == 0, "%s: kernel %s, expected %s", what, kname, wantk);
        }
        if (!ok && g_fail_print++ < 3) fprintf(stderr, "  first failing: %s\n", what);
        free(xa);
        free(da);
        free(wa);
        free(rma);
        free(rva);
        free(egx);
        free(egw);
        free(egb);
        free(em);
        free(er);
    }
    mft_tensor_release(gx);
    mft_tensor_release(gw);
    mft_tensor_release(gb);
    mft_tensor_release(sm);
    mft_tensor_release(sr);
    mft_tensor_release(x);
    mft_tensor_release(dy);
    mft_tensor_release(w);
    mft_tensor_release(rm);
    mft_tensor_release(rv);
}

static void test_sweep(void) {
    uint64_t rng = 0x5EEDULL;
    uint64_t seed = 1;
    int ncases = 0;
    for (size_t s = 0; s < sizeof g_shapes / sizeof g_shapes[0]; s++) {
        const shape_t *sh = &g_shapes[s];
        const int64_t C = sh->sz[1];
        const int64_t per_c = tu_shape_numel(sh->nd, sh->sz) / C;
        for (int dti = 0; dti < 2; dti++) {
            mft_dtype dt = dti ? MFT_F64 : MFT_F32;
            for (int xl = 0; xl < 3; xl++)
                for (int variant = 0; variant < 4; variant++) {
                    const bool with_w = variant != 1, use_ref = variant == 3;
                    const int gl = variant == 2 ? (xl + 1) % 3 : xl; /* mixed grad layouts */
                    /* batch_norm: training (needs > 1 value per channel) and eval */
                    for (int tr = 0; tr < 2; tr++) {
                        if (tr && per_c <= 1) continue;
                        one_case(K_BATCH, sh, dt, xl, gl, with_w, tr, 0, 0, true, use_ref, &rng,
                                 seed++);
                        ncases++;
                    }
                    /* group_norm: groups 1, 2, C */
                    const int64_t gs[3] = {1, 2, C};
                    for (int gi = 0; gi < 3; gi++) {
                        if (C % gs[gi] || (gi == 2 && C <= 2) || (gi == 1 && C == 2 && 0)) continue;
                        if (sh->sz[0] * (C / gs[gi]) * (per_c / sh->sz[0]) <= 1) continue;
                        one_case(K_GROUP, sh, dt, xl, gl, with_w, true, gs[gi], 0, variant != 2,
                                 use_ref, &rng, seed++);
                        ncases++;
                    }
                    if (per_c / sh->sz[0] > 1) {
                        one_case(K_INSTANCE, sh, dt, xl, gl, with_w, true, 0, 0, variant == 0,
                                 use_ref, &rng, seed++);
                        ncases++;
                    }
                    for (int nn = 1; nn <= 3 && nn <= sh->nd; nn++) {
                        one_case(K_LAYER, sh, dt, xl, gl, with_w, true, 0, nn, variant != 1,
                                 use_ref, &rng, seed++);
                        ncases++;
                    }
                }
        }
    }
    CHECK(ncases > 500);
}

/* N = 1 made by select + unsqueeze (a size-1 dim with an odd stride) */
static void test_select_unsqueeze(void) {
    int64_t sz[4] = {3, 6, 5, 4};
    for (int cl = 0; cl < 2; cl++) {
        mft_tensor *b = mft_rand(4, sz, MFT_F32, cl ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS, 7);
        mft_tensor *s = mft_select(b, 0, 1);
        mft_tensor *x = mft_unsqueeze(s, 0);
        mft_tensor *dy = mft_rand(4, (int64_t[4]){1, 6, 5, 4}, MFT_F32, MFT_CONTIGUOUS, 8);
        mft_tensor *xc = mft_contiguous(x, MFT_CONTIGUOUS);
        mft_tensor *gx = NULL, *gw = NULL, *gb = NULL, *gx2 = NULL, *gw2 = NULL, *gb2 = NULL;
        CHECK(run_backward(K_GROUP, dy, x, NULL, NULL, NULL, true, 3, 0, 1e-5, true, &gx, &gw, &gb,
                           NULL, NULL) == MFT_OK);
        CHECK(run_backward(K_GROUP, dy, xc, NULL, NULL, NULL, true, 3, 0, 1e-5, true, &gx2, &gw2,
                           &gb2, NULL, NULL) == MFT_OK);
        double *a = arr_of(gx2), *bw = arr_of(gw2);
        CHECK(gx && max_err(gx, a) < 1e-5);
        CHECK(gw && max_err(gw, bw) < 1e-5);
        CHECK(gx && mft_tensor_format(gx) == mft_tensor_format(x));
        free(a);
        free(bw);
        mft_tensor *ts[] = {b, s, x, dy, xc, gx, gw, gb, gx2, gw2, gb2};
        for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) mft_tensor_release(ts[i]);
    }
}

/* Optional outputs: any subset may be NULL; the computed ones agree. */
static void test_optional_outputs(void) {
    int64_t sz[4] = {2, 4, 3, 3};
    mft_tensor *x = mft_rand(4, sz, MFT_F64, MFT_CHANNELS_LAST, 1);
    mft_tensor *dy = mft_rand(4, sz, MFT_F64, MFT_CHANNELS_LAST, 2);
    mft_tensor *gx = NULL, *gw = NULL, *gb = NULL, *gx1 = NULL, *gb1 = NULL;
    CHECK(run_backward(K_BATCH, dy, x, NULL, NULL, NULL, true, 0, 0, 1e-5, true, &gx, &gw, &gb,
                       NULL, NULL) == MFT_OK);
    CHECK(run_backward(K_BATCH, dy, x, NULL, NULL, NULL, true, 0, 0, 1e-5, true, &gx1, NULL, NULL,
                       NULL, NULL) == MFT_OK);
    CHECK(run_backward(K_BATCH, dy, x, NULL, NULL, NULL, true, 0, 0, 1e-5, true, NULL, NULL, &gb1,
                       NULL, NULL) == MFT_OK);
    double *a = arr_of(gx), *b = arr_of(gb);
    CHECK(gx1 && max_err(gx1, a) == 0.0);
    CHECK(gb1 && max_err(gb1, b) == 0.0);
    free(a);
    free(b);
    CHECK(run_backward(K_LAYER, dy, x, NULL, NULL, NULL, true, 0, 2, 1e-5, true, NULL, NULL, NULL,
                       NULL, NULL) == MFT_OK);
    mft_tensor *ts[] = {x, dy, gx, gw, gb, gx1, gb1};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) mft_tensor_release(ts[i]);
}

/* Empty input: empty grad_x, zero grad_weight / grad_bias. */
static void test_empty(void) {
    int64_t sz[4] = {0, 3, 2, 2};
    mft_tensor *x = mft_zeros(4, sz, MFT_F32, MFT_CHANNELS_LAST);
    mft_tensor *dy = mft_zeros(4, sz, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *m = mft_zeros(1, (int64_t[1]){3}, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *gx = NULL, *gw = NULL, *gb = NULL;
    CHECK(mft_batch_norm_backward(dy, x, NULL, m, m, true, &gx, &gw, &gb) == MFT_OK);
    CHECK(gx && mft_tensor_numel(gx) == 0 && mft_tensor_format(gx) == MFT_CHANNELS_LAST);
    double z[3] = {0, 0, 0};
    CHECK(gw && max_err(gw, z) == 0.0 && gb && max_err(gb, z) == 0.0);
    mft_tensor *ts[] = {x, dy, m, gx, gw, gb};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) mft_tensor_release(ts[i]);
}

/* ------------------------------------------------------------------ (c) finite differences */
static double loss_of(int kind, const mft_tensor *x, const mft_tensor *w, const mft_tensor *b,
                      const mft_tensor *R, int64_t groups, int nnorm, mft_tensor *rm,
                      mft_tensor *rv, bool training) {
    const int64_t *sz = mft_tensor_sizes(x);
    int nd = mft_tensor_ndim(x);
    mft_tensor *y = kind == K_BATCH ? mft_batch_norm(x, rm, rv, w, b, training, 0.0, 1e-5)
                    : kind == K_LAYER ? mft_layer_norm(x, nnorm, sz + nd - nnorm, w, b, 1e-5)
                    : kind == K_GROUP ? mft_group_norm(x, groups, w, b, 1e-5)
                                      : mft_instance_norm(x, w, b, 1e-5);
    double *ya = arr_of(y), *ra = arr_of(R), s = 0;
    for (int64_t i = 0; y && i < mft_tensor_numel(y); i++) s += ya[i] * ra[i];
    free(ya);
    free(ra);
    mft_tensor_release(y);
    return s;
}

static double fd_at(int kind, mft_tensor *t, int64_t flat, const mft_tensor *x,
                    const mft_tensor *w, const mft_tensor *b, const mft_tensor *R, int64_t groups,
                    int nnorm, mft_tensor *rm, mft_tensor *rv, bool training) {
    int64_t idx[MFT_MAX_DIMS];
    int nd = mft_tensor_ndim(t);
    int64_t rem = flat;
    for (int d = nd - 1; d >= 0; d--) {
        idx[d] = rem % mft_tensor_sizes(t)[d];
        rem /= mft_tensor_sizes(t)[d];
    }
    const double h = 1e-5, v = mft_tensor_get(t, idx);
    mft_tensor_set(t, idx, v + h);
    double lp = loss_of(kind, x, w, b, R, groups, nnorm, rm, rv, training);
    mft_tensor_set(t, idx, v - h);
    double lm = loss_of(kind, x, w, b, R, groups, nnorm, rm, rv, training);
    mft_tensor_set(t, idx, v);
    return (lp - lm) / (2 * h);
}

static void test_finite_differences(void) {
    const struct {
        int kind;
        int nd;
        int64_t sz[5];
        int64_t groups;
        int nnorm;
        bool cl, training;
    } cs[] = {
        {K_BATCH, 4, {2, 3, 3, 2}, 0, 0, true, true},  {K_BATCH, 4, {2, 3, 3, 2}, 0, 0, false, false},
        {K_BATCH, 5, {2, 2, 2, 1, 3}, 0, 0, true, true}, {K_GROUP, 4, {2, 4, 3, 2}, 2, 0, true, true},
        {K_INSTANCE, 3, {2, 3, 4}, 0, 0, false, true}, {K_LAYER, 4, {2, 3, 2, 2}, 0, 3, true, true},
        {K_LAYER, 3, {2, 3, 4}, 0, 1, false, true},
    };
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        const int nd = cs[c].nd;
        const int64_t *sz = cs[c].sz;
        const int kind = cs[c].kind;
        mft_format f = cs[c].cl ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
        mft_tensor *x = mft_rand(nd, sz, MFT_F64, f, 10 + c);
        mft_tensor *R = mft_rand(nd, sz, MFT_F64, MFT_CONTIGUOUS, 20 + c);
        int wn = kind == K_LAYER ? cs[c].nnorm : 1;
        const int64_t *wsz = kind == K_LAYER ? sz + nd - wn : sz + 1;
        mft_tensor *w = mft_rand(wn, wsz, MFT_F64, MFT_CONTIGUOUS, 30 + c);
        mft_tensor *b = mft_rand(wn, wsz, MFT_F64, MFT_CONTIGUOUS, 40 + c);
        mft_tensor *rm = NULL, *rv = NULL;
        if (!cs[c].training) {
            rm = mft_rand(1, sz + 1, MFT_F64, MFT_CONTIGUOUS, 50);
            rv = mft_full(1, sz + 1, MFT_F64, MFT_CONTIGUOUS, 0.7);
        }
        mft_tensor *gx = NULL, *gw = NULL, *gb = NULL;
        CHECK(run_backward(kind, R, x, w, rm, rv, cs[c].training, cs[c].groups, cs[c].nnorm, 1e-5,
                           true, &gx, &gw, &gb, NULL, NULL) == MFT_OK);
        double *gxa = arr_of(gx), *gwa = arr_of(gw), *gba = arr_of(gb);
        double worst = 0;
        const int64_t n = mft_tensor_numel(x), nw = mft_tensor_numel(w);
        for (int64_t i = 0; gxa && i < n; i += 3) {
            double fd = fd_at(kind, x, i, x, w, b, R, cs[c].groups, cs[c].nnorm, rm, rv,
                              cs[c].training);
            worst = fmax(worst, fabs(fd - gxa[i]) / (1 + fabs(fd)));
        }
        for (int64_t i = 0; gwa && i < nw; i++) {
            double fw = fd_at(kind, w, i, x, w, b, R, cs[c].groups, cs[c].nnorm, rm, rv,
                              cs[c].training);
            double fb = fd_at(kind, b, i, x, w, b, R, cs[c].groups, cs[c].nnorm, rm, rv,
                              cs[c].training);
            worst = fmax(worst, fabs(fw - gwa[i]) / (1 + fabs(fw)));
            worst = fmax(worst, fabs(fb - gba[i]) / (1 + fabs(fb)));
        }
        CHECK_MSG(gxa && worst < 1e-6, "case %zu (%s): finite-difference error %g", c,
                  kind_name[kind], worst);
        free(gxa);
        free(gwa);
        free(gba);
        mft_tensor *ts[] = {x, R, w, b, rm, rv, gx, gw, gb};
        for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) mft_tensor_release(ts[i]);
    }
}

/* ------------------------------------------------------------------ (d) threads */
static bool same_bits(const mft_tensor *a, const mft_tensor *b) {
    return a && b && mft_tensor_numel(a) == mft_tensor_numel(b) &&
           memcmp(mft_tensor_data(a), mft_tensor_data(b),
                  (size_t)mft_tensor_numel(a) * (mft_tensor_dtype(a) == MFT_F32 ? 4 : 8)) == 0;
}

static void test_threads_bit_identical(void) {
    const int old = mft_num_threads();
    int64_t sz[4] = {4, 32, 24, 24};
    for (int kv = 0; kv < 5; kv++) /* 4: layer_norm with nnorm 1 (NHWC: columns) */
        for (int cl = 0; cl < 2; cl++) {
            const int kind = kv == 4 ? K_LAYER : kv, nn = kv == 4 ? 1 : 3;
            mft_format f = cl ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
            mft_tensor *x = mft_rand(4, sz, MFT_F32, f, 3);
            mft_tensor *dy = mft_rand(4, sz, MFT_F32, f, 4);
            mft_tensor *w = kind == K_LAYER ? NULL : mft_rand(1, sz + 1, MFT_F32, MFT_CONTIGUOUS, 5);
            mft_tensor *r[2][3] = {{NULL}};
            for (int t = 0; t < 2; t++) {
                mft_set_num_threads(t + 1);
                CHECK(run_backward(kind, dy, x, w, NULL, NULL, true, 8, nn, 1e-5, true, &r[t][0],
                                   &r[t][1], &r[t][2], NULL, NULL) == MFT_OK);
            }
            for (int k = 0; k < 3; k++)
                CHECK_MSG(same_bits(r[0][k], r[1][k]), "%s nnorm %d cl %d output %d differs",
                          kind_name[kind], nn, cl, k);
            for (int t = 0; t < 2; t++)
                for (int k = 0; k < 3; k++) mft_tensor_release(r[t][k]);
            mft_tensor_release(x);
            mft_tensor_release(dy);
            mft_tensor_release(w);
        }
    /* the NHWC layer_norm forward (runs for nnorm >= 3, columns below) */
    int64_t s2[4] = {4, 70, 20, 24};
    mft_tensor *x = mft_rand(4, s2, MFT_F32, MFT_CHANNELS_LAST, 6);
    for (int nn = 1; nn <= 4; nn++) {
        mft_tensor *y[2];
        for (int t = 0; t < 2; t++) {
            mft_set_num_threads(t + 1);
            y[t] = mft_layer_norm(x, nn, s2 + 4 - nn, NULL, NULL, 1e-5);
        }
        CHECK_MSG(same_bits(y[0], y[1]), "layer_norm nhwc nnorm %d differs", nn);
        mft_tensor_release(y[0]);
        mft_tensor_release(y[1]);
    }
    mft_tensor_release(x);
    mft_set_num_threads(old);
}

/* ------------------------------------------------------------------ (e) errors */
#define SENTINEL ((mft_tensor *)(uintptr_t)0x1)
#define EXPECT_FAIL(call, st, fname)                                                          \
    do {                                                                                      \
        gx = gw = gb = SENTINEL;                                                              \
        mft_status s_ = (call);                                                               \
        CHECK_MSG(s_ == (st), "%s: status %s", #call, mft_status_str(s_));                    \
        CHECK_MSG(gx == NULL && gw == NULL && gb == NULL, "%s: outputs not cleared", #call);   \
        CHECK_ERR(st, fname);                                                                 \
    } while (0)

static void test_errors(void) {
    int64_t sz[4] = {2, 4, 3, 3}, c4[1] = {4}, c3[1] = {3}, c8[1] = {8};
    mft_tensor *x = mft_rand(4, sz, MFT_F32, MFT_CONTIGUOUS, 1);
    mft_tensor *x64 = mft_rand(4, sz, MFT_F64, MFT_CONTIGUOUS, 1);
    mft_tensor *xi = mft_zeros(4, sz, MFT_I32, MFT_CONTIGUOUS);
    mft_tensor *dy = mft_rand(4, sz, MFT_F32, MFT_CONTIGUOUS, 2);
    mft_tensor *dybad = mft_rand(4, (int64_t[4]){2, 4, 3, 2}, MFT_F32, MFT_CONTIGUOUS, 2);
    mft_tensor *v4 = mft_ones(1, c4, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *v3 = mft_ones(1, c3, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *v8 = mft_ones(1, c8, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *v4d = mft_ones(1, c4, MFT_F64, MFT_CONTIGUOUS);
    mft_tensor *x1 = mft_rand(1, c4, MFT_F32, MFT_CONTIGUOUS, 3);
    mft_tensor *gx, *gw, *gb;
    const char *bn = "mft_batch_norm_backward", *gn = "mft_group_norm_backward",
               *in = "mft_instance_norm_backward", *ln = "mft_layer_norm_backward";
    EXPECT_FAIL(mft_batch_norm_backward(NULL, x, NULL, v4, v4, true, &gx, &gw, &gb), MFT_ERR_NULL, bn);
    EXPECT_FAIL(mft_batch_norm_backward(dy, NULL, NULL, v4, v4, true, &gx, &gw, &gb), MFT_ERR_NULL, bn);
    EXPECT_FAIL(mft_batch_norm_backward(dybad, x, NULL, v4, v4, true, &gx, &gw, &gb), MFT_ERR_SHAPE, bn);
    EXPECT_FAIL(mft_batch_norm_backward(dy, x64, NULL, v4d, v4d, true, &gx, &gw, &gb), MFT_ERR_DTYPE, bn);
    EXPECT_FAIL(mft_batch_norm_backward(xi, xi, NULL, v4, v4, true, &gx, &gw, &gb), MFT_ERR_DTYPE, bn);
    EXPECT_FAIL(mft_batch_norm_backward(x1, x1, NULL, v4, v4, true, &gx, &gw, &gb), MFT_ERR_RANK, bn);
    EXPECT_FAIL(mft_batch_norm_backward(dy, x, v3, v4, v4, true, &gx, &gw, &gb), MFT_ERR_SHAPE, bn);
    EXPECT_FAIL(mft_batch_norm_backward(dy, x, NULL, NULL, v4, true, &gx, &gw, &gb), MFT_ERR_NULL, bn);
    EXPECT_FAIL(mft_batch_norm_backward(dy, x, NULL, v4, NULL, false, &gx, &gw, &gb), MFT_ERR_NULL, bn);
    EXPECT_FAIL(mft_batch_norm_backward(dy, x, NULL, v4, v4d, true, &gx, &gw, &gb), MFT_ERR_DTYPE, bn);
    EXPECT_FAIL(mft_group_norm_backward(dy, x, 3, NULL, NULL, NULL, 1e-5, &gx, &gw, &gb), MFT_ERR_SHAPE, gn);
    EXPECT_FAIL(mft_group_norm_backward(dy, x, 0, NULL, NULL, NULL, 1e-5, &gx, &gw, &gb), MFT_ERR_SHAPE, gn);
    EXPECT_FAIL(mft_group_norm_backward(dy, x, 2, v4, NULL, NULL, 1e-5, &gx, &gw, &gb), MFT_ERR_NULL, gn);
    EXPECT_FAIL(mft_group_norm_backward(dy, x, 2, v8, v8, NULL, 1e-5, &gx, &gw, &gb), MFT_ERR_SHAPE, gn);
    EXPECT_FAIL(mft_group_norm_backward(dy, x, 2, NULL, NULL, NULL, -1.0, &gx, &gw, &gb), MFT_ERR_INVALID, gn);
    EXPECT_FAIL(mft_instance_norm_backward(dy, x, v4, v4, v3, 1e-5, &gx, &gw, &gb), MFT_ERR_SHAPE, in);
    EXPECT_FAIL(mft_instance_norm_backward(dybad, x, NULL, NULL, NULL, 1e-5, &gx, &gw, &gb), MFT_ERR_SHAPE, in);
    EXPECT_FAIL(mft_layer_norm_backward(dy, x, 0, sz, NULL, NULL, NULL, 1e-5, &gx, &gw, &gb), MFT_ERR_INVALID, ln);
    EXPECT_FAIL(mft_layer_norm_backward(dy, x, 5, sz, NULL, NULL, NULL, 1e-5, &gx, &gw, &gb), MFT_ERR_INVALID, ln);
    EXPECT_FAIL(mft_layer_norm_backward(dy, x, 2, NULL, NULL, NULL, NULL, 1e-5, &gx, &gw, &gb), MFT_ERR_NULL, ln);
    EXPECT_FAIL(mft_layer_norm_backward(dy, x, 2, sz, NULL, NULL, NULL, 1e-5, &gx, &gw, &gb), MFT_ERR_SHAPE, ln);
    EXPECT_FAIL(mft_layer_norm_backward(dy, x, 1, sz + 3, NULL, NULL, v4, 1e-5, &gx, &gw, &gb), MFT_ERR_SHAPE, ln);
    EXPECT_FAIL(mft_layer_norm_backward(dy, x, 1, sz + 3, v4, v4, NULL, 1e-5, &gx, &gw, &gb), MFT_ERR_SHAPE, ln);
    EXPECT_FAIL(mft_layer_norm_backward(dy, x, 1, sz + 3, NULL, NULL, NULL, NAN, &gx, &gw, &gb), MFT_ERR_INVALID, ln);
    /* _ex: the out pointers are cleared on error */
    mft_tensor *m = SENTINEL, *r = SENTINEL;
    CHECK(mft_group_norm_ex(x, 3, NULL, NULL, 1e-5, &m, &r) == NULL && m == NULL && r == NULL);
    CHECK_ERR(MFT_ERR_SHAPE, "mft_group_norm_ex");
    m = r = SENTINEL;
    CHECK(mft_layer_norm_ex(x, 1, sz, NULL, NULL, 1e-5, &m, &r) == NULL && m == NULL && r == NULL);
    CHECK_ERR(MFT_ERR_SHAPE, "mft_layer_norm_ex");
    m = r = SENTINEL;
    CHECK(mft_batch_norm_ex(x, NULL, NULL, NULL, NULL, false, 0.1, 1e-5, &m, &r) == NULL &&
          m == NULL && r == NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_batch_norm_ex");
    mft_tensor *ts[] = {x, x64, xi, dy, dybad, v4, v3, v8, v4d, x1};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) mft_tensor_release(ts[i]);
}

/* The _ex forwards return the same y as the plain ones, and the
 * statistics of batch_norm eval are the running ones. */
static void test_ex_forward(void) {
    int64_t sz[4] = {2, 3, 4, 5};
    mft_tensor *x = mft_rand(4, sz, MFT_F64, MFT_CHANNELS_LAST, 9);
    mft_tensor *rm = mft_rand(1, sz + 1, MFT_F64, MFT_CONTIGUOUS, 1);
    mft_tensor *rv = mft_full(1, sz + 1, MFT_F64, MFT_CONTIGUOUS, 2.0);
    mft_tensor *m = NULL, *r = NULL;
    mft_tensor *y1 = mft_batch_norm_ex(x, rm, rv, NULL, NULL, false, 0.1, 0.25, &m, &r);
    mft_tensor *y2 = mft_batch_norm(x, rm, rv, NULL, NULL, false, 0.1, 0.25);
    double *a = arr_of(y2), *rma = arr_of(rm);
    CHECK(y1 && max_err(y1, a) == 0.0);
    CHECK(m && max_err(m, rma) == 0.0);
    double want[3] = {1 / 1.5, 1 / 1.5, 1 / 1.5};
    CHECK(r && max_err(r, want) < 1e-15);
    free(a);
    free(rma);
    mft_tensor *y3 = mft_layer_norm_ex(x, 2, sz + 2, NULL, NULL, 1e-5, NULL, NULL);
    mft_tensor *y4 = mft_layer_norm(x, 2, sz + 2, NULL, NULL, 1e-5);
    a = arr_of(y4);
    CHECK(y3 && max_err(y3, a) == 0.0);
    free(a);
    mft_tensor *ts[] = {x, rm, rv, m, r, y1, y2, y3, y4};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) mft_tensor_release(ts[i]);
}

/* ------------------------------------------------------------------ (f) golden */
/* tests/golden/norm_backward_cases.txt (gen_norm_backward.py); format there. */
#define GB_LINE (1 << 16)
#define GB_MAX 1024

typedef struct {
    int line;
    char name[96];
    char op[32];
    mft_dtype dt;
    tu_list sizes;
    bool cl, training, has_w, have_input, have_params;
    int64_t seed, groups, nnorm;
    double eps;
    int ngx, ngw, ngb;
    double gx[GB_MAX], gw[GB_MAX], gb[GB_MAX];
} gb_case;

static gb_case g_case;
static char g_line[GB_LINE];
static int g_cases_run;

static bool gb_values(const char *p, int *n, double *out) {
    int64_t k;
    char tok[64];
    if (!tu_next_int(&p, &k) || k < 0 || k > GB_MAX) return false;
    for (int64_t i = 0; i < k; i++) {
        if (!tu_next_tok(&p, tok, sizeof tok)) return false;
        out[i] = strtod(tok, NULL);
    }
    *n = (int)k;
    return tu_at_eol(p);
}

static bool gb_field(const char *line) {
    const char *p = line;
    char key[32], tok[64];
    gb_case *c = &g_case;
    if (!tu_next_tok(&p, key, sizeof key)) return false;
    if (strcmp(key, "op") == 0) return tu_next_tok(&p, c->op, sizeof c->op);
    if (strcmp(key, "input") == 0) {
        if (!tu_next_tok(&p, tok, sizeof tok)) return false;
        c->dt = strcmp(tok, "f64") == 0 ? MFT_F64 : MFT_F32;
        if (!tu_next_list(&p, &c->sizes) || !tu_next_tok(&p, tok, sizeof tok)) return false;
        c->cl = strcmp(tok, "channels_last") == 0;
        c->have_input = tu_next_int(&p, &c->seed);
        return c->have_input;
    }
    if (strcmp(key, "params") == 0) {
        int64_t tr, hw;
        if (!tu_next_int(&p, &tr) || !tu_next_tok(&p, tok, sizeof tok) ||
            !tu_next_int(&p, &c->groups) || !tu_next_int(&p, &c->nnorm) || !tu_next_int(&p, &hw))
            return false;
        c->eps = strtod(tok, NULL);
        c->training = tr != 0;
        c->has_w = hw != 0;
        c->have_params = true;
        return tu_at_eol(p);
    }
    if (strcmp(key, "grad_x") == 0) return gb_values(p, &c->ngx, c->gx);
    if (strcmp(key, "grad_weight") == 0) return gb_values(p, &c->ngw, c->gw);
    if (strcmp(key, "grad_bias") == 0) return gb_values(p, &c->ngb, c->gb);
    return false;
}

typedef double (*gb_fill_fn)(int64_t i, int64_t seed);
static double gb_fx(int64_t i, int64_t seed) { return (double)((37 * i + 11 * seed) % 23 - 11) / 4.0; }
static double gb_fg(int64_t i, int64_t seed) { return (double)((13 * i + 7 * seed) % 17 - 8) / 8.0; }
static double gb_fw(int64_t i, int64_t seed) { (void)seed; return 0.5 + (double)((5 * i + 1) % 7) / 4.0; }
static double gb_frm(int64_t i, int64_t seed) { (void)seed; return (double)((3 * i) % 5 - 2) / 8.0; }
static double gb_frv(int64_t i, int64_t seed) { (void)seed; return 0.5 + (double)(i % 4) / 4.0; }

static mft_tensor *gb_make(int nd, const int64_t *sz, mft_dtype dt, gb_fill_fn f, int64_t seed) {
    mft_tensor *t = mft_empty(nd, sz, dt, MFT_CONTIGUOUS);
    if (!t) return NULL;
    int64_t n = mft_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        if (dt == MFT_F32) ((float *)mft_tensor_data(t))[i] = (float)f(i, seed);
        else ((double *)mft_tensor_data(t))[i] = f(i, seed);
    }
    return t;
}

static bool gb_match(const mft_tensor *t, int n, const double *want, double tol) {
    if (!t || mft_tensor_numel(t) != n) return false;
    double *got = arr_of(t);
    bool ok = true;
    for (int i = 0; i < n && ok; i++) ok = fabs(got[i] - want[i]) <= tol * (1 + fabs(want[i]));
    free(got);
    return ok;
}

static mft_tensor *gb_fmt(mft_tensor *t, bool cl) {
    int nd = mft_tensor_ndim(t);
    if (!cl || nd < 3 || nd > 5) return t;
    mft_tensor *r = mft_contiguous(t, MFT_CHANNELS_LAST);
    mft_tensor_release(t);
    return r;
}

static void gb_end(int lineno, bool in_case) {
    gb_case *c = &g_case;
    CHECK_MSG(in_case && c->have_input && c->have_params && c->op[0] && c->ngx > 0,
              "line %d: incomplete case %s", lineno, c->name);
    if (!in_case || !c->have_input || !c->have_params) return;
    const int nd = c->sizes.n;
    const int64_t *sz = c->sizes.v;
    mft_tensor *x = gb_fmt(gb_make(nd, sz, c->dt, gb_fx, c->seed), c->cl);
    mft_tensor *dy = gb_fmt(gb_make(nd, sz, c->dt, gb_fg, c->seed), c->cl);
    int kind = strcmp(c->op, "batch_norm") == 0      ? K_BATCH
               : strcmp(c->op, "group_norm") == 0    ? K_GROUP
               : strcmp(c->op, "instance_norm") == 0 ? K_INSTANCE
                                                     : K_LAYER;
    int wn = kind == K_LAYER ? (int)c->nnorm : 1;
    const int64_t *wsz = kind == K_LAYER ? sz + nd - wn : sz + 1;
    mft_tensor *w = c->has_w ? gb_make(wn, wsz, c->dt, gb_fw, 0) : NULL;
    mft_tensor *rm = NULL, *rv = NULL;
    if (kind == K_BATCH && !c->training) {
        rm = gb_make(1, sz + 1, c->dt, gb_frm, 0);
        rv = gb_make(1, sz + 1, c->dt, gb_frv, 0);
    }
    mft_tensor *gx = NULL, *gw = NULL, *gb = NULL;
    /* eps enters only through the forward's statistics */
    mft_status st = MFT_OK;
    {
        mft_tensor *m = NULL, *r = NULL, *y = NULL;
        if (kind == K_BATCH) {
            y = mft_batch_norm_ex(x, rm, rv, w, NULL, c->training, 0.1, c->eps, &m, &r);
            st = mft_batch_norm_backward(dy, x, w, m, r, c->training, &gx, &gw, &gb);
        } else if (kind == K_LAYER) {
            st = mft_layer_norm_backward(dy, x, wn, wsz, NULL, NULL, w, c->eps, &gx, &gw, &gb);
        } else if (kind == K_GROUP) {
            y = mft_group_norm_ex(x, c->groups, w, NULL, c->eps, &m, &r);
            st = mft_group_norm_backward(dy, x, c->groups, m, r, w, c->eps, &gx, &gw, &gb);
        } else {
            st = mft_instance_norm_backward(dy, x, NULL, NULL, w, c->eps, &gx, &gw, &gb);
        }
        mft_tensor_release(y);
        mft_tensor_release(m);
        mft_tensor_release(r);
    }
    const double tol = c->dt == MFT_F32 ? 2e-5 : 1e-11;
    g_cases_run++;
    CHECK_MSG(st == MFT_OK, "case %s (line %d): %s", c->name, c->line, mft_last_error_message());
    CHECK_MSG(gb_match(gx, c->ngx, c->gx, tol), "case %s (line %d): grad_x differs", c->name,
              c->line);
    if (c->ngw) CHECK_MSG(gb_match(gw, c->ngw, c->gw, tol), "case %s: grad_weight differs", c->name);
    CHECK_MSG(gb_match(gb, c->ngb, c->gb, tol), "case %s: grad_bias differs", c->name);
    mft_format want = nd >= 3 && nd <= 5 ? mft_tensor_format(x) : MFT_CONTIGUOUS;
    CHECK_MSG(gx && mft_tensor_is_contiguous(gx, want), "case %s: grad_x not packed in %s",
              c->name, mft_format_name(want));
    mft_tensor *ts[] = {x, dy, w, rm, rv, gx, gw, gb};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) mft_tensor_release(ts[i]);
}

static void test_golden(void) {
    tu_golden_file g = {MFT_TEST_DATA_DIR "/norm_backward_cases.txt", g_line, GB_LINE, true,
                        &g_case, sizeof g_case, &g_case.line, g_case.name, sizeof g_case.name,
                        gb_field, gb_end};
    if (!tu_read_golden(&g)) return;
    CHECK(g_cases_run >= 40);
}

/* ------------------------------------------------------------------ allocation failures */
static long long g_calls, g_fail_at, g_live;
static void *fa_alloc(size_t size, size_t align, void *ctx) {
    (void)ctx;
    if (++g_calls == g_fail_at) return NULL;
    size_t r = (size + align - 1) / align * align;
    void *p = aligned_alloc(align, r ? r : align);
    if (p) g_live++;
    return p;
}
static void fa_free(void *p, void *ctx) {
    (void)ctx;
    if (p) g_live--;
    free(p);
}

/* Fails allocation k = 1..N of each backward (statistics recomputed, so
 * the internal forward's allocations too): an error with every output NULL
 * or success, and no tensor, storage or allocation left behind. */
static void test_alloc_failures(void) {
    int64_t sz[4] = {2, 4, 3, 3};
    mft_tensor *x = mft_rand(4, sz, MFT_F32, MFT_CHANNELS_LAST, 1);
    mft_tensor *dy = mft_rand(4, sz, MFT_F32, MFT_CONTIGUOUS, 2);
    mft_tensor *w = mft_rand(1, sz + 1, MFT_F32, MFT_CONTIGUOUS, 3);
    const int64_t t0 = mft_live_tensors(), s0 = mft_live_storages();
    mft_allocator al = {fa_alloc, fa_free, NULL};
    for (int op = 0; op < 4; op++) {
        int fails = 0, oks = 0;
        for (long long k = 1; k < 60; k++) {
            g_calls = 0;
            g_fail_at = k;
            g_live = 0;
            mft_set_allocator(&al);
            mft_tensor *gx = SENTINEL, *gw = SENTINEL, *gb = SENTINEL, *m = SENTINEL, *r = SENTINEL;
            mft_tensor *y = NULL, *sx = NULL;
            mft_status st;
            if (op == 0) st = mft_group_norm_backward(dy, x, 2, NULL, NULL, w, 1e-5, &gx, &gw, &gb);
            else if (op == 1)
                st = mft_layer_norm_backward(dy, x, 2, sz + 2, NULL, NULL, NULL, 1e-5, &gx, &gw, &gb);
            else if (op == 2) {
                y = mft_batch_norm_ex(x, NULL, NULL, w, NULL, true, 0.1, 1e-5, &m, &r);
                st = y ? MFT_OK : mft_last_error();
                CHECK(y ? (m && r) : (m == NULL && r == NULL));
                gx = gw = gb = NULL;
            } else {
                sx = mft_softmax_backward(dy, x, 1);
                st = sx ? MFT_OK : mft_last_error();
                gx = gw = gb = NULL;
            }
            if (st == MFT_OK) {
                oks++;
            } else {
                fails++;
                CHECK_MSG(st == MFT_ERR_NOMEM, "op %d k %lld: %s", op, k, mft_last_error_message());
                CHECK_MSG(gx == NULL && gw == NULL && gb == NULL, "op %d k %lld: outputs", op, k);
                mft_clear_error();
            }
            mft_tensor *ts[] = {gx, gw, gb, y, sx, op == 2 ? m : NULL, op == 2 ? r : NULL};
            for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) mft_tensor_release(ts[i]);
            mft_set_allocator(NULL);
            CHECK_MSG(g_live == 0 && mft_live_tensors() == t0 && mft_live_storages() == s0,
                      "op %d k %lld: leak (%lld allocations)", op, k, g_live);
            if (g_calls < k) break; /* nothing failed: done */
        }
        CHECK(fails >= 2 && oks >= 1);
    }
    mft_tensor_release(x);
    mft_tensor_release(dy);
    mft_tensor_release(w);
}

/* Inside a scope the results belong to it. */
static void test_scope(void) {
    int64_t sz[4] = {2, 4, 3, 3};
    mft_tensor *x = mft_rand(4, sz, MFT_F32, MFT_CHANNELS_LAST, 1);
    const int64_t t0 = mft_live_tensors();
    CHECK(mft_scope_begin() == MFT_OK);
    mft_tensor *gx, *gw, *gb, *m, *r;
    mft_tensor *y = mft_group_norm_ex(x, 2, NULL, NULL, 1e-5, &m, &r);
    CHECK(y && m && r);
    CHECK(mft_group_norm_backward(x, x, 2, NULL, NULL, NULL, 1e-5, &gx, &gw, &gb) == MFT_OK);
    CHECK(mft_layer_norm_backward(x, x, 1, sz + 3, NULL, NULL, NULL, 1e-5, &gx, &gw, &gb) == MFT_OK);
    CHECK(mft_live_tensors() > t0);
    CHECK(mft_scope_end() == MFT_OK);
    CHECK_EQ_I(mft_live_tensors(), t0);
    mft_tensor_release(x);
}

int main(void) {
    RUN(test_scope);
    RUN(test_alloc_failures);
    RUN(test_sweep);
    RUN(test_select_unsqueeze);
    RUN(test_optional_outputs);
    RUN(test_empty);
    RUN(test_ex_forward);
    RUN(test_finite_differences);
    RUN(test_threads_bit_identical);
    RUN(test_errors);
    RUN(test_golden);
    TEST_MAIN_END();
}
