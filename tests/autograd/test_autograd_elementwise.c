/* tests/autograd/test_autograd_elementwise.c — autograd of the elementwise family,
 * reductions, views and copies: mft_gradcheck (F64) of every differentiable
 * op in NCHW and NHWC, with broadcasting and mixed formats; leaf-grad layout
 * and gradient formats (no engine conversion in an all-NHWC chain); PyTorch's
 * conventions at ties and kinks (tests/golden/autograd_ew_cases.txt from
 * tests/golden/gen_autograd_ew.py, PyTorch 1.13); in-place / out=
 * refusal while recording; a view of a leaf in a chain; F32 gradients;
 * leaks. */
#include "autograd_internal.h"
#include "fail_alloc.h"
#include "harness.h"
#include "test_util.h"

/* ---------------------------------------------------------------- helpers */
static const int64_t SZ[4] = {2, 3, 2, 3};

/* Uniform values in [lo, hi) of sizes sz, laid out per fmt, requiring grad. */
static mft_tensor *rnd(int nd, const int64_t *sz, mft_format fmt, uint64_t seed, double lo,
                       double hi, bool req) {
    mft_tensor *t = mft_rand(nd, sz, MFT_F64, fmt, seed);
    if (!t) return NULL;
    mft_mul_scalar_(t, hi - lo);
    mft_add_scalar_(t, lo);
    if (req) mft_tensor_set_requires_grad(t, true);
    return t;
}

static mft_tensor *vec(int n, const double *v, mft_dtype dt) {
    int64_t s = n;
    mft_tensor *t = mft_empty(1, &s, dt, MFT_CONTIGUOUS);
    for (int64_t i = 0; i < n; i++) mft_tensor_set(t, &i, v[i]);
    return t;
}

typedef mft_tensor *(*un_fn)(const mft_tensor *);
typedef mft_tensor *(*sc_fn)(const mft_tensor *, double);
typedef mft_tensor *(*rg_fn)(const mft_tensor *, double, double);
typedef mft_tensor *(*bi_fn)(const mft_tensor *, const mft_tensor *);

typedef struct opctx {
    un_fn u;
    sc_fn s;
    rg_fn r;
    bi_fn b;
    int special; /* 0: by pointer; others below */
    double p0, p1;
    int ndims;
    int dims[4];
    bool keepdim;
} opctx;

enum { SP_NONE, SP_ADD_ALPHA, SP_WHERE, SP_ADDCMUL, SP_LERP, SP_LERP_S, SP_SUM, SP_MEAN, SP_AMAX,
       SP_AMIN, SP_VAR, SP_STD, SP_SUM_TO, SP_PERMUTE, SP_TRANSPOSE, SP_NARROW, SP_SELECT,
       SP_SLICE, SP_UNSQUEEZE, SP_SQUEEZE, SP_EXPAND, SP_VIEW, SP_RESHAPE, SP_FLATTEN,
       SP_CONTIG, SP_TO_FORMAT, SP_CLONE, SP_NARROW_MUL };

static mft_tensor *run_op(void *vctx, mft_tensor *const *in) {
    const opctx *c = vctx;
    if (c->u) return c->u(in[0]);
    if (c->s) return c->s(in[0], c->p0);
    if (c->r) return c->r(in[0], c->p0, c->p1);
    if (c->b) return c->b(in[0], in[1]);
    switch (c->special) {
    case SP_ADD_ALPHA: return mft_add_alpha(in[0], in[1], c->p0);
    case SP_WHERE: return mft_where(in[0], in[1], in[2]);
    case SP_ADDCMUL: return mft_addcmul(in[0], in[1], in[2], c->p0);
    case SP_LERP: return mft_lerp(in[0], in[1], in[2]);
    case SP_LERP_S: return mft_lerp_scalar(in[0], in[1], c->p0);
    case SP_SUM: return mft_sum(in[0], c->ndims, c->dims, c->keepdim);
    case SP_MEAN: return mft_mean(in[0], c->ndims, c->dims, c->keepdim);
    case SP_AMAX: return mft_amax(in[0], c->ndims, c->dims, c->keepdim);
    case SP_AMIN: return mft_amin(in[0], c->ndims, c->dims, c->keepdim);
    case SP_VAR: return mft_var(in[0], c->ndims, c->dims, c->p0, c->keepdim);
    case SP_STD: return mft_std(in[0], c->ndims, c->dims, c->p0, c->keepdim);
    case SP_SUM_TO: return mft_sum_to_size(in[0], 4, (const int64_t[]){1, 3, 1, 3});
    case SP_PERMUTE: return mft_permute(in[0], (const int[]){0, 2, 3, 1});
    case SP_TRANSPOSE: return mft_transpose(in[0], 1, 3);
    case SP_NARROW: return mft_narrow(in[0], 1, 1, 2);
    case SP_SELECT: return mft_select(in[0], 3, -1);
    case SP_SLICE: return mft_slice(in[0], 1, 0, 3, 2);
    case SP_UNSQUEEZE: return mft_unsqueeze(in[0], 2);
    case SP_SQUEEZE: return mft_squeeze(in[0], 0);
    case SP_EXPAND: return mft_expand(in[0], 5, (const int64_t[]){2, -1, 3, -1, -1});
    case SP_VIEW: return mft_view(in[0], 2, (const int64_t[]){2, -1});
    case SP_RESHAPE: return mft_reshape(in[0], 3, (const int64_t[]){3, 2, -1});
    case SP_FLATTEN: return mft_flatten(in[0], 1, 3);
    case SP_CONTIG: return mft_contiguous(in[0], MFT_CONTIGUOUS);
    case SP_TO_FORMAT: return mft_to_format(in[0], MFT_CHANNELS_LAST);
    case SP_CLONE: return mft_clone(in[0], MFT_PRESERVE);
    case SP_NARROW_MUL: {
        mft_tensor *v = mft_narrow(in[0], 1, 1, 2);
        mft_tensor *y = mft_mul(v, in[1]);
        mft_tensor_release(v);
        return y;
    }
    default: return NULL;
    }
}

/* gradcheck plus one backward with grad_output = 1 laid out like the output:
 * every leaf grad has its leaf's strides (dense leaves); when conv0, the
 * engine converted no gradient. */
static void check_op(const char *name, opctx *c, int n, mft_tensor *const *in, bool conv0) {
    mft_status st = mft_gradcheck(run_op, c, n, in, NULL);
    CHECK_MSG(st == MFT_OK, "%s: gradcheck: %s", name, mft_last_error_message());
    mft_clear_error();
    mft_autograd_conversions_reset();
    CHECK(mft_tape_begin() == MFT_OK);
    mft_tensor *y = run_op(c, in);
    CHECK_MSG(y && mft_tensor_requires_grad(y), "%s: output does not require grad", name);
    if (y) {
        mft_tensor *go = mft_empty_like(y, MFT_PRESERVE);
        mft_fill_(go, 1.0);
        CHECK_MSG(mft_backward(y, go) == MFT_OK, "%s: backward: %s", name,
                  mft_last_error_message());
        mft_tensor_release(go);
        mft_tensor_release(y);
    }
    for (int k = 0; k < n; k++) {
        if (!mft_tensor_requires_grad(in[k])) continue;
        mft_tensor *g = mft_tensor_grad(in[k]);
        CHECK_MSG(g != NULL, "%s: input %d has no grad", name, k);
        if (!g) continue;
        CHECK_MSG(g->dtype == in[k]->dtype, "%s: input %d grad dtype", name, k);
        if (mft_tensor_is_dense(in[k]))
            for (int d = 0; d < in[k]->ndim; d++)
                CHECK_MSG(in[k]->sizes[d] < 2 || g->strides[d] == in[k]->strides[d],
                          "%s: input %d grad stride %d is %lld, leaf %lld", name, k, d,
                          (long long)g->strides[d], (long long)in[k]->strides[d]);
        mft_tensor_zero_grad(in[k]);
    }
    if (conv0)
        CHECK_MSG(mft_autograd_conversions() == 0, "%s: %lld engine conversions", name,
                  (long long)mft_autograd_conversions());
    CHECK(mft_tape_end() == MFT_OK);
}

static const mft_format FMTS[2] = {MFT_CONTIGUOUS, MFT_CHANNELS_LAST};

/* ---------------------------------------------------------------- unary */
typedef struct un_case {
    const char *name;
    un_fn f;
    double lo, hi;
} un_case;

static void test_unary_gradcheck(void) {
    const un_case cases[] = {
        {"neg", mft_neg, -1.5, 1.5},         {"abs", mft_abs, -1.5, 1.5},
        {"sqrt", mft_sqrt, 0.5, 2},          {"rsqrt", mft_rsqrt, 0.5, 2},
        {"exp", mft_exp, -1.5, 1.5},         {"log", mft_log, 0.5, 2},
        {"sin", mft_sin, -1.5, 1.5},         {"cos", mft_cos, -1.5, 1.5},
        {"tanh", mft_tanh, -1.5, 1.5},       {"sigmoid", mft_sigmoid, -2, 2},
        {"relu", mft_relu, -1.5, 1.5},       {"gelu", mft_gelu, -2, 2},
        {"silu", mft_silu, -2, 2},           {"square", mft_square, -1.5, 1.5},
        {"reciprocal", mft_reciprocal, 0.5, 2}, {"sign", mft_sign, -1.5, 1.5},
        {"floor", mft_floor, -1.3, 1.3},     {"ceil", mft_ceil, -1.3, 1.3},
        {"round", mft_round, -1.3, 1.3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int f = 0; f < 2; f++) {
            mft_tensor *x = rnd(4, SZ, FMTS[f], 11 + i, cases[i].lo, cases[i].hi, true);
            opctx c = {.u = cases[i].f};
            char name[64];
            snprintf(name, sizeof name, "%s/%s", cases[i].name, f ? "NHWC" : "NCHW");
            check_op(name, &c, 1, &x, true);
            mft_tensor_release(x);
        }
}

static void test_scalar_gradcheck(void) {
    struct {
        const char *name;
        sc_fn f;
        double p, lo, hi;
    } cs[] = {
        {"add_scalar", mft_add_scalar, 0.7, -1, 1},   {"sub_scalar", mft_sub_scalar, 0.7, -1, 1},
        {"rsub_scalar", mft_rsub_scalar, 0.7, -1, 1}, {"mul_scalar", mft_mul_scalar, -1.7, -1, 1},
        {"div_scalar", mft_div_scalar, 1.3, -1, 1},   {"maximum_scalar", mft_maximum_scalar, 0.1, -1, 1},
        {"minimum_scalar", mft_minimum_scalar, 0.1, -1, 1}, {"pow_scalar", mft_pow_scalar, 2.5, 0.5, 2},
        {"pow_scalar_int", mft_pow_scalar, 3, -1, 1},  {"leaky_relu", mft_leaky_relu, 0.1, -1, 1},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        for (int f = 0; f < 2; f++) {
            mft_tensor *x = rnd(4, SZ, FMTS[f], 31 + i, cs[i].lo, cs[i].hi, true);
            opctx c = {.s = cs[i].f, .p0 = cs[i].p};
            char name[64];
            snprintf(name, sizeof name, "%s/%s", cs[i].name, f ? "NHWC" : "NCHW");
            check_op(name, &c, 1, &x, true);
            mft_tensor_release(x);
        }
    for (int f = 0; f < 2; f++) {
        mft_tensor *x = rnd(4, SZ, FMTS[f], 51, -1, 1, true);
        opctx c1 = {.r = mft_clamp, .p0 = -0.4, .p1 = 0.45};
        check_op("clamp", &c1, 1, &x, true);
        opctx c2 = {.r = mft_hardtanh, .p0 = -0.4, .p1 = 0.45};
        check_op("hardtanh", &c2, 1, &x, true);
        mft_tensor_release(x);
    }
}

/* ---------------------------------------------------------------- binary */
static void test_binary_gradcheck(void) {
    struct {
        const char *name;
        bi_fn f;
        double alo, ahi, blo, bhi;
    } cs[] = {
        {"add", mft_add, -1, 1, -1, 1},         {"sub", mft_sub, -1, 1, -1, 1},
        {"mul", mft_mul, -1, 1, -1, 1},         {"div", mft_div, -1, 1, 0.5, 2},
        {"maximum", mft_maximum, -1, 1, -1, 1}, {"minimum", mft_minimum, -1, 1, -1, 1},
        {"pow", mft_pow, 0.5, 2, -1.5, 1.5},
    };
    /* b's sizes: same, NHWC x + (1,C,1,1) bias, (C,1,1), (W), (N,1,H,W) */
    const int64_t bsz[5][4] = {{2, 3, 2, 3}, {1, 3, 1, 1}, {3, 1, 1, 0}, {3, 0, 0, 0}, {2, 1, 2, 3}};
    const int bnd[5] = {4, 4, 3, 1, 4};
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        for (int fa = 0; fa < 2; fa++)
            for (int fb = 0; fb < 2; fb++)
                for (int s = 0; s < 5; s++) {
                    if (bnd[s] < 3 && fb == 1) continue;
                    mft_tensor *in[2] = {rnd(4, SZ, FMTS[fa], 61 + i, cs[i].alo, cs[i].ahi, true),
                                         rnd(bnd[s], bsz[s], bnd[s] >= 3 ? FMTS[fb] : MFT_CONTIGUOUS,
                                             71 + i, cs[i].blo, cs[i].bhi, true)};
                    opctx c = {.b = cs[i].f};
                    char name[80];
                    snprintf(name, sizeof name, "%s/a%s/b%s/case%d", cs[i].name,
                             fa ? "NHWC" : "NCHW", fb ? "NHWC" : "NCHW", s);
                    check_op(name, &c, 2, in, true); /* each grad in its input's format */
                    /* reversed operand order (broadcast input first) */
                    mft_tensor *rv[2] = {in[1], in[0]};
                    if (cs[i].f != mft_pow && cs[i].f != mft_div) check_op(name, &c, 2, rv, false);
                    mft_tensor_release(in[0]);
                    mft_tensor_release(in[1]);
                }
    /* add_alpha, and type promotion: an F32 leaf with an F64 leaf */
    mft_tensor *a = rnd(4, SZ, MFT_CHANNELS_LAST, 81, -1, 1, true);
    mft_tensor *b = rnd(4, (const int64_t[]){1, 3, 1, 1}, MFT_CONTIGUOUS, 82, -1, 1, true);
    mft_tensor *ab[2] = {a, b};
    opctx c = {.special = SP_ADD_ALPHA, .p0 = -2.5};
    check_op("add_alpha", &c, 2, ab, false);
    mft_tensor_release(a);
    mft_tensor_release(b);

    mft_tensor *x32 = mft_full(4, SZ, MFT_F32, MFT_CHANNELS_LAST, 2.0);
    mft_tensor *y64 = mft_full(1, (const int64_t[]){3}, MFT_F64, MFT_CONTIGUOUS, 3.0);
    mft_tensor_set_requires_grad(x32, true);
    mft_tensor_set_requires_grad(y64, true);
    mft_tape_begin();
    mft_tensor *z = mft_mul(x32, y64);
    CHECK(z && z->dtype == MFT_F64);
    mft_tensor *s = mft_sum(z, 0, NULL, false);
    CHECK(mft_backward(s, NULL) == MFT_OK);
    mft_tensor *gx = mft_tensor_grad(x32), *gy = mft_tensor_grad(y64);
    CHECK(gx && gx->dtype == MFT_F32 && mft_tensor_is_contiguous(gx, MFT_CHANNELS_LAST));
    CHECK(gy && gy->dtype == MFT_F64);
    if (gx) CHECK_NEAR(mft_tensor_get(gx, (const int64_t[]){1, 2, 1, 2}), 3.0, 0);
    if (gy) CHECK_NEAR(mft_tensor_get(gy, (const int64_t[]){1}), 2.0 * 2 * 2 * 3, 0);
    mft_tensor_release(z);
    mft_tensor_release(s);
    mft_tape_end();
    mft_tensor_release(x32);
    mft_tensor_release(y64);
}

/* ---------------------------------------------------------------- ternary */
static void test_ternary_gradcheck(void) {
    for (int f = 0; f < 2; f++) {
        mft_tensor *cond = mft_rand(4, SZ, MFT_F64, FMTS[f], 91);
        mft_tensor *c8 = mft_gt_scalar(cond, 0.5);
        mft_tensor *a = rnd(4, SZ, FMTS[f], 92, -1, 1, true);
        mft_tensor *b = rnd(4, (const int64_t[]){1, 3, 1, 1}, MFT_CONTIGUOUS, 93, -1, 1, true);
        mft_tensor *w = rnd(4, SZ, FMTS[1 - f], 94, 0, 1, true);
        mft_tensor *in1[3] = {c8, a, b};
        opctx cw = {.special = SP_WHERE};
        check_op("where", &cw, 3, in1, false);
        mft_tensor *in2[3] = {a, b, w};
        opctx ca = {.special = SP_ADDCMUL, .p0 = 0.75};
        check_op("addcmul", &ca, 3, in2, false);
        mft_tensor *in3[3] = {a, w, a};
        opctx cl = {.special = SP_LERP};
        mft_tensor *e = rnd(4, SZ, FMTS[f], 95, -1, 1, true);
        mft_tensor *in4[3] = {a, e, w};
        check_op("lerp", &cl, 3, in4, false);
        (void)in3;
        opctx cs = {.special = SP_LERP_S, .p0 = 0.3};
        mft_tensor *in5[2] = {a, e};
        check_op("lerp_scalar", &cs, 2, in5, true);
        mft_tensor_release(cond);
        mft_tensor_release(c8);
        mft_tensor_release(a);
        mft_tensor_release(b);
        mft_tensor_release(w);
        mft_tensor_release(e);
    }
}

/* ---------------------------------------------------------------- reductions */
static void test_reduce_gradcheck(void) {
    const int kinds[6] = {SP_SUM, SP_MEAN, SP_AMAX, SP_AMIN, SP_VAR, SP_STD};
    const char *names[6] = {"sum", "mean", "amax", "amin", "var", "std"};
    struct {
        int n;
        int d[2];
    } dsets[4] = {{1, {1, 0}}, {2, {2, 3}}, {0, {0, 0}}, {2, {0, -1}}};
    for (int k = 0; k < 6; k++)
        for (int f = 0; f < 2; f++)
            for (int ds = 0; ds < 4; ds++)
                for (int kd = 0; kd < 2; kd++) {
                    mft_tensor *x = rnd(4, SZ, FMTS[f], 101 + (uint64_t)k, -1, 1, true);
                    opctx c = {.special = kinds[k], .ndims = dsets[ds].n, .keepdim = kd,
                               .p0 = ds == 1 ? 0 : 1};
                    c.dims[0] = dsets[ds].d[0];
                    c.dims[1] = dsets[ds].d[1];
                    char name[64];
                    snprintf(name, sizeof name, "%s/%s/dims%d/keep%d", names[k],
                             f ? "NHWC" : "NCHW", ds, kd);
                    check_op(name, &c, 1, &x, true);
                    mft_tensor_release(x);
                }
    for (int f = 0; f < 2; f++) {
        mft_tensor *x = rnd(4, SZ, FMTS[f], 111, -1, 1, true);
        opctx c = {.special = SP_SUM_TO};
        check_op("sum_to_size", &c, 1, &x, true);
        mft_tensor_release(x);
    }
}

/* ---------------------------------------------------------------- views */
static void test_view_gradcheck(void) {
    const int kinds[] = {SP_PERMUTE, SP_TRANSPOSE, SP_NARROW, SP_SELECT, SP_SLICE, SP_UNSQUEEZE,
                         SP_SQUEEZE, SP_EXPAND, SP_VIEW, SP_RESHAPE, SP_FLATTEN, SP_CONTIG,
                         SP_TO_FORMAT, SP_CLONE};
    const char *names[] = {"permute", "transpose", "narrow", "select", "slice", "unsqueeze",
                           "squeeze", "expand", "view", "reshape", "flatten", "contiguous",
                           "to_format", "clone"};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (int f = 0; f < 2; f++) {
            if (kinds[k] == SP_VIEW && f == 1) continue; /* not viewable */
            /* no-op conversions return the input itself (no node): tested elsewhere */
            if ((kinds[k] == SP_CONTIG && f == 0) || (kinds[k] == SP_TO_FORMAT && f == 1)) continue;
            const int64_t sq[4] = {1, 3, 2, 3};
            mft_tensor *x = rnd(4, kinds[k] == SP_SQUEEZE ? sq : SZ, FMTS[f], 121 + k, -1, 1, true);
            opctx c = {.special = kinds[k]};
            char name[64];
            snprintf(name, sizeof name, "%s/%s", names[k], f ? "NHWC" : "NCHW");
            check_op(name, &c, 1, &x, false);
            mft_tensor_release(x);
        }
}

/* A view of a leaf in a chain: zeros outside the view, b's values inside. */
static void test_view_of_leaf_chain(void) {
    mft_tensor *x = rnd(4, SZ, MFT_CHANNELS_LAST, 131, -1, 1, true);
    mft_tensor *b = rnd(4, (const int64_t[]){2, 2, 2, 3}, MFT_CONTIGUOUS, 132, -1, 1, true);
    mft_tensor *in[2] = {x, b};
    opctx c = {.special = SP_NARROW_MUL};
    check_op("narrow+mul", &c, 2, in, false);
    mft_tape_begin();
    mft_tensor *y = run_op(&c, in);
    mft_tensor *s = mft_sum(y, 0, NULL, false);
    CHECK(mft_backward(s, NULL) == MFT_OK);
    mft_tensor *g = mft_tensor_grad(x);
    CHECK(g && mft_tensor_is_contiguous(g, MFT_CHANNELS_LAST));
    int64_t idx[4] = {0};
    bool ok = g != NULL;
    while (g) {
        double want = idx[1] == 0 ? 0.0 : mft_tensor_get(b, (const int64_t[]){idx[0], idx[1] - 1, idx[2], idx[3]});
        ok = ok && mft_tensor_get(g, idx) == want;
        if (!tu_next_index(4, SZ, idx)) break;
    }
    CHECK(ok);
    mft_tensor_release(y);
    mft_tensor_release(s);
    mft_tape_end();
    mft_tensor_release(x);
    mft_tensor_release(b);
}

/* ---------------------------------------------------------------- formats */
/* An all-NHWC chain of unary/binary ops: no gradient needs converting. */
static void test_nhwc_chain_no_conversion(void) {
    mft_tensor *x = rnd(4, SZ, MFT_CHANNELS_LAST, 141, -1, 1, true);
    mft_tensor *w = rnd(4, SZ, MFT_CHANNELS_LAST, 142, -1, 1, true);
    mft_tensor *bias = rnd(4, (const int64_t[]){1, 3, 1, 1}, MFT_CONTIGUOUS, 143, -1, 1, true);
    mft_autograd_conversions_reset();
    mft_tape_begin();
    mft_tensor *t1 = mft_mul(x, w), *t2 = mft_add(t1, bias), *t3 = mft_relu(t2);
    mft_tensor *t4 = mft_sigmoid(t3), *t5 = mft_tanh(t4), *t6 = mft_sub(t5, x);
    mft_tensor *t7 = mft_mul_scalar(t6, 3.0), *t8 = mft_square(t7);
    mft_tensor *l = mft_mean(t8, 0, NULL, false);
    CHECK(t8 && mft_tensor_is_contiguous(t8, MFT_CHANNELS_LAST));
    CHECK(mft_tape_size() == 9);
    CHECK(mft_backward(l, NULL) == MFT_OK);
    CHECK_EQ_I(mft_autograd_conversions(), 0);
    CHECK(mft_tensor_grad(x) && mft_tensor_is_contiguous(mft_tensor_grad(x), MFT_CHANNELS_LAST));
    CHECK(mft_tensor_grad(bias) && mft_tensor_grad(bias)->ndim == 4);
    mft_tensor *ts[] = {t1, t2, t3, t4, t5, t6, t7, t8, l};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) mft_tensor_release(ts[i]);
    mft_tape_end();
    mft_tensor_release(x);
    mft_tensor_release(w);
    mft_tensor_release(bias);
}

/* ---------------------------------------------------------------- ties and kinks
 * Expected values: tests/golden/autograd_ew_cases.txt, written by
 * tests/golden/gen_autograd_ew.py with PyTorch 1.13 (lines "grad NAME INPUT N
 * v..."): the gradient of sum(f(inputs)) for each input. */
static int golden_grad(const char *name, int input, double *v, int cap) {
    FILE *fp = fopen(MFT_TEST_DATA_DIR "/autograd_ew_cases.txt", "r");
    CHECK_MSG(fp != NULL, "cannot open autograd_ew_cases.txt");
    if (!fp) return -1;
    char line[1024], key[32], nm[64];
    int found = -1;
    while (found < 0 && fgets(line, sizeof line, fp)) {
        int k, n, off = 0;
        if (sscanf(line, "%31s %63s %d %d%n", key, nm, &k, &n, &off) != 4 || strcmp(key, "grad") ||
            strcmp(nm, name) || k != input)
            continue;
        const char *p = line + off;
        for (int i = 0; i < n && i < cap; i++) {
            char *e;
            v[i] = strtod(p, &e);
            p = e;
        }
        found = n;
    }
    fclose(fp);
    CHECK_MSG(found >= 0, "no golden gradient %s/%d", name, input);
    return found;
}

static void grad_of(const char *golden, const opctx *c, int n, mft_tensor *const *in) {
    mft_tape_begin();
    mft_tensor *y = run_op((void *)c, in);
    mft_tensor *go = y ? mft_full(y->ndim, y->sizes, MFT_F64, MFT_CONTIGUOUS, 1.0) : NULL;
    CHECK_MSG(y && mft_backward(y, go) == MFT_OK, "%s: %s", golden, mft_last_error_message());
    for (int k = 0; k < n; k++) {
        double want[16];
        int nw = golden_grad(golden, k, want, 16);
        mft_tensor *g = mft_tensor_grad(in[k]);
        CHECK_MSG(g != NULL && g->numel == nw, "%s: input %d grad missing or of the wrong size",
                  golden, k);
        int64_t idx[MFT_MAX_DIMS] = {0};
        for (int64_t e = 0; g && g->numel == nw; e++) {
            double v = mft_tensor_get(g, idx);
            CHECK_MSG(fabs(v - want[e]) < 1e-12, "%s: input %d element %lld: %g, want %g", golden,
                      k, (long long)e, v, want[e]);
            if (!tu_next_index(g->ndim, g->sizes, idx)) break;
        }
        mft_tensor_zero_grad(in[k]);
    }
    mft_tensor_release(go);
    mft_tensor_release(y);
    mft_tape_end();
}

static mft_tensor *leaf_vec(int n, const double *v, int nd, const int64_t *sz) {
    mft_tensor *t = vec(n, v, MFT_F64), *r = mft_reshape(t, nd, sz);
    mft_tensor_release(t);
    mft_tensor_set_requires_grad(r, true);
    return r;
}

static void test_ties_and_kinks(void) {
    const double xv[5] = {-1.0, 0.0, 0.5, 1.0, 2.0};
    mft_tensor *x = leaf_vec(5, xv, 1, (const int64_t[]){5});
    struct {
        const char *golden;
        opctx c;
    } cs[] = {
        {"relu", {.u = mft_relu}},
        {"abs", {.u = mft_abs}},
        {"leaky_relu_0.1", {.s = mft_leaky_relu, .p0 = 0.1}},
        {"clamp_0_1", {.r = mft_clamp, .p0 = 0, .p1 = 1}},
        {"hardtanh_0_1", {.r = mft_hardtanh, .p0 = 0, .p1 = 1}},
        {"maximum_scalar_0.5", {.s = mft_maximum_scalar, .p0 = 0.5}},
        {"minimum_scalar_0.5", {.s = mft_minimum_scalar, .p0 = 0.5}},
        {"sign", {.u = mft_sign}},
        {"round", {.u = mft_round}},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) grad_of(cs[i].golden, &cs[i].c, 1, &x);
    mft_tensor_release(x);

    const double av[3] = {1, 2, 3}, bv[3] = {1, 3, 2}, pa[3] = {0, 0, 2}, pb[3] = {0, 2, 0};
    const int64_t s3[1] = {3};
    mft_tensor *ab[2] = {leaf_vec(3, av, 1, s3), leaf_vec(3, bv, 1, s3)};
    opctx cmax = {.b = mft_maximum}, cmin = {.b = mft_minimum}, cpow = {.b = mft_pow};
    grad_of("maximum", &cmax, 2, ab);
    grad_of("minimum", &cmin, 2, ab);
    mft_tensor *pp[2] = {leaf_vec(3, pa, 1, s3), leaf_vec(3, pb, 1, s3)};
    grad_of("pow", &cpow, 2, pp);
    for (int k = 0; k < 2; k++) {
        mft_tensor_release(ab[k]);
        mft_tensor_release(pp[k]);
    }

    const double mx[8] = {1, 3, 3, 2, 5, 5, 5, 0}, mn[8] = {1, 3, 1, 2, 5, 5, 5, 0};
    const double sd[6] = {1, 1, 1, 1, 2, 3};
    mft_tensor *m1 = leaf_vec(8, mx, 2, (const int64_t[]){2, 4});
    mft_tensor *m2 = leaf_vec(8, mn, 2, (const int64_t[]){2, 4});
    mft_tensor *m3 = leaf_vec(6, sd, 2, (const int64_t[]){2, 3});
    opctx camax = {.special = SP_AMAX, .ndims = 1, .dims = {1}};
    opctx camin = {.special = SP_AMIN, .ndims = 1, .dims = {1}};
    opctx cstd = {.special = SP_STD, .ndims = 1, .dims = {1}, .p0 = 1};
    grad_of("amax_dim1", &camax, 1, &m1);
    grad_of("amin_dim1", &camin, 1, &m2);
    grad_of("std_dim1", &cstd, 1, &m3); /* a row with std 0 gets 0 */
    mft_tensor_release(m1);
    mft_tensor_release(m2);
    mft_tensor_release(m3);
}

/* ---------------------------------------------------------------- F32, to_dtype */
static void test_f32_and_to_dtype(void) {
    mft_tensor *x = mft_full(4, SZ, MFT_F32, MFT_CHANNELS_LAST, -0.5);
    mft_tensor_set(x, (const int64_t[]){1, 2, 1, 1}, 2.0f);
    mft_tensor_set_requires_grad(x, true);
    mft_tape_begin();
    mft_tensor *y = mft_relu(x), *z = mft_to_dtype(y, MFT_F64), *s = mft_sum(z, 0, NULL, false);
    CHECK(z && z->dtype == MFT_F64 && mft_tensor_requires_grad(z));
    CHECK(mft_backward(s, NULL) == MFT_OK);
    mft_tensor *g = mft_tensor_grad(x);
    CHECK(g && g->dtype == MFT_F32 && mft_tensor_is_contiguous(g, MFT_CHANNELS_LAST));
    if (g) {
        CHECK_NEAR(mft_tensor_get(g, (const int64_t[]){1, 2, 1, 1}), 1.0, 0);
        CHECK_NEAR(mft_tensor_get(g, (const int64_t[]){0, 0, 0, 0}), 0.0, 0);
    }
    mft_tensor_release(y);
    mft_tensor_release(z);
    mft_tensor_release(s);
    mft_tape_end();
    /* comparisons and argmax record nothing */
    mft_tape_begin();
    mft_tensor *c = mft_gt_scalar(x, 0.0), *am = mft_argmax(x, 1, false);
    CHECK(c && !mft_tensor_requires_grad(c) && am && !mft_tensor_requires_grad(am));
    CHECK(mft_tape_size() == 0);
    /* a no-op contiguous returns its input: no node */
    mft_tensor *same = mft_contiguous(x, MFT_CHANNELS_LAST);
    CHECK(same == x && mft_tape_size() == 0);
    mft_tensor_release(same);
    mft_tensor_release(c);
    mft_tensor_release(am);
    mft_tape_end();
    mft_tensor_release(x);
}

/* ---------------------------------------------------------------- in place / out= */
static void test_inplace_refusal(void) {
    mft_tensor *x = rnd(4, SZ, MFT_CHANNELS_LAST, 151, -1, 1, true);
    mft_tensor *p = rnd(4, SZ, MFT_CHANNELS_LAST, 152, -1, 1, false);
    mft_tensor *out = mft_empty_like(x, MFT_PRESERVE);
    mft_tensor *before = mft_clone(x, MFT_PRESERVE);
    mft_tape_begin();
    CHECK(mft_relu_(x) == MFT_ERR_UNSUPPORTED);
    CHECK_ERR(MFT_ERR_UNSUPPORTED, "mft_relu_");
    CHECK(mft_add_(x, p) == MFT_ERR_UNSUPPORTED);
    CHECK_ERR(MFT_ERR_UNSUPPORTED, "mft_add_");
    CHECK(mft_mul_scalar_(x, 2.0) == MFT_ERR_UNSUPPORTED);
    mft_clear_error();
    CHECK(mft_clamp_(x, 0, 1) == MFT_ERR_UNSUPPORTED);
    mft_clear_error();
    CHECK(mft_fill_(x, 1.0) == MFT_ERR_UNSUPPORTED);
    CHECK_ERR(MFT_ERR_UNSUPPORTED, "mft_fill_");
    CHECK(mft_zero_(x) == MFT_ERR_UNSUPPORTED);
    CHECK_ERR(MFT_ERR_UNSUPPORTED, "mft_zero_");
    CHECK(mft_copy_(x, p) == MFT_ERR_UNSUPPORTED);
    CHECK_ERR(MFT_ERR_UNSUPPORTED, "mft_copy_");
    /* out= from an input that requires grad */
    CHECK(mft_add_out(out, x, p) == MFT_ERR_UNSUPPORTED);
    CHECK_ERR(MFT_ERR_UNSUPPORTED, "mft_add_out");
    CHECK(mft_exp_out(out, x) == MFT_ERR_UNSUPPORTED);
    CHECK_ERR(MFT_ERR_UNSUPPORTED, "mft_exp_out");
    CHECK(mft_where_out(out, p, x, p) == MFT_ERR_UNSUPPORTED);
    CHECK_ERR(MFT_ERR_UNSUPPORTED, "mft_where_out");
    /* a recorded output is refused too */
    mft_tensor *y = mft_exp(x);
    CHECK(mft_sub_scalar_(y, 1.0) == MFT_ERR_UNSUPPORTED);
    mft_clear_error();
    /* nothing the user owns changed */
    mft_tensor *d = mft_sub(x, before);
    mft_tensor *mx = d ? mft_amax(d, 0, NULL, false) : NULL, *mn = d ? mft_amin(d, 0, NULL, false) : NULL;
    CHECK(mx && mn && mft_tensor_get(mx, NULL) == 0 && mft_tensor_get(mn, NULL) == 0);
    mft_tensor_release(d);
    mft_tensor_release(mx);
    mft_tensor_release(mn);
    /* fine: in-place on a tensor without grad, out= from plain inputs */
    CHECK(mft_add_(p, p) == MFT_OK);
    CHECK(mft_add_out(out, p, p) == MFT_OK);
    /* fine with grad disabled */
    bool prev = mft_set_grad_enabled(false);
    CHECK(mft_add_out(out, x, p) == MFT_OK);
    CHECK(mft_mul_scalar_(x, 1.0) == MFT_OK);
    mft_set_grad_enabled(prev);
    mft_tensor_release(y);
    mft_tape_end();
    /* fine without a tape */
    CHECK(mft_relu_(x) == MFT_OK);
    CHECK(mft_copy_(x, p) == MFT_OK);
    CHECK(mft_exp_out(out, x) == MFT_OK);
    mft_tensor_release(x);
    mft_tensor_release(p);
    mft_tensor_release(out);
    mft_tensor_release(before);
}

/* as_strided is not differentiable: its output does not require grad. */
static void test_as_strided_not_recorded(void) {
    mft_tensor *x = rnd(1, (const int64_t[]){6}, MFT_CONTIGUOUS, 161, -1, 1, true);
    mft_tape_begin();
    mft_tensor *v = mft_as_strided(x, 1, (const int64_t[]){3}, (const int64_t[]){2}, 0);
    CHECK(v && !mft_tensor_requires_grad(v) && mft_tape_size() == 0);
    mft_tensor_release(v);
    mft_tape_end();
    mft_tensor_release(x);
}


/* ---------------------------------------------------------------- allocation failures
 * A recorded forward (inside a user scope, so failed records must take their
 * result back from it) and backward, with allocation k failing for every k:
 * each run ends OK or NOMEM, and nothing leaks. */

static mft_status fail_workload(mft_tensor *x, mft_tensor *b) {
    if (mft_scope_begin() != MFT_OK) return mft_last_error();
    mft_status st = mft_tape_begin();
    if (st == MFT_OK) {
        mft_tensor *y = mft_relu(x), *z = mft_mul(y, b), *v = mft_narrow(z, 2, 0, 1);
        mft_tensor *w = mft_amax(v, 1, (const int[]){3}, true), *u = mft_add(w, b);
        mft_tensor *p = mft_permute(u, (const int[]){0, 2, 3, 1}), *q = mft_reshape(p, 1, (const int64_t[]){-1});
        mft_tensor *l = mft_mean(q, 0, NULL, false);
        st = l ? mft_backward(l, NULL) : mft_last_error();
        mft_tape_end();
    }
    mft_scope_end();
    return st;
}

static void test_alloc_failures(void) {
    mft_tensor *x = rnd(4, SZ, MFT_CHANNELS_LAST, 171, -1, 1, true);
    mft_tensor *b = rnd(4, (const int64_t[]){1, 3, 1, 1}, MFT_CONTIGUOUS, 172, -1, 1, true);
    int64_t live0 = mft_live_tensors();
    fa_install();
    CHECK(fail_workload(x, b) == MFT_OK);
    long long n = g_fa.calls;
    CHECK(n > 10);
    mft_tensor_zero_grad(x);
    mft_tensor_zero_grad(b);
    CHECK(g_fa.live == 0);
    for (long long k = 1; k <= n; k++) {
        g_fa.live = 0;
        fa_arm(k);
        mft_status st = fail_workload(x, b);
        CHECK_MSG(st == MFT_OK || st == MFT_ERR_NOMEM, "fail at %lld: %s", k,
                  mft_last_error_message());
        mft_tensor_zero_grad(x);
        mft_tensor_zero_grad(b);
        CHECK_MSG(g_fa.live == 0 && mft_live_tensors() == live0, "fail at %lld: %lld blocks, %lld tensors live", k,
                  g_fa.live, (long long)mft_live_tensors());
        mft_clear_error();
    }
    mft_set_allocator(NULL);
    mft_tensor_release(x);
    mft_tensor_release(b);
}

/* Tensors above the parallel grain: relu's and mul's fused backward passes
 * split across threads (the t2 run), checked element by element. */
static void test_large_parallel(void) {
    const int64_t sz[4] = {4, 16, 32, 40}; /* 81920 elements */
    mft_tensor *x = mft_randn(4, sz, MFT_F32, MFT_CHANNELS_LAST, 181);
    mft_tensor *w = mft_randn(4, sz, MFT_F32, MFT_CONTIGUOUS, 182);
    mft_tensor *go = mft_randn(4, sz, MFT_F32, MFT_CHANNELS_LAST, 183);
    mft_tensor_set_requires_grad(x, true);
    mft_tensor_set_requires_grad(w, true);
    mft_tape_begin();
    mft_tensor *y = mft_relu(x), *z = mft_mul(y, w);
    CHECK(mft_backward(z, go) == MFT_OK);
    mft_tensor *gx = mft_tensor_grad(x), *gw = mft_tensor_grad(w);
    CHECK(gx && mft_tensor_is_contiguous(gx, MFT_CHANNELS_LAST));
    CHECK(gw && mft_tensor_is_contiguous(gw, MFT_CONTIGUOUS));
    int64_t idx[4] = {0}, bad = 0;
    while (gx && gw) {
        double xv = mft_tensor_get(x, idx), wv = mft_tensor_get(w, idx), g = mft_tensor_get(go, idx);
        double ex = xv > 0 ? (double)((float)g * (float)wv) : 0.0;
        double ew = (double)((float)g * (float)(xv > 0 ? xv : 0.0));
        if (mft_tensor_get(gx, idx) != ex || mft_tensor_get(gw, idx) != ew) bad++;
        if (!tu_next_index(4, sz, idx)) break;
    }
    CHECK_EQ_I(bad, 0);
    mft_tensor_release(y);
    mft_tensor_release(z);
    mft_tape_end();
    mft_tensor_release(x);
    mft_tensor_release(w);
    mft_tensor_release(go);
}

int main(void) {
    RUN(test_unary_gradcheck);
    RUN(test_scalar_gradcheck);
    RUN(test_binary_gradcheck);
    RUN(test_ternary_gradcheck);
    RUN(test_reduce_gradcheck);
    RUN(test_view_gradcheck);
    RUN(test_view_of_leaf_chain);
    RUN(test_nhwc_chain_no_conversion);
    RUN(test_ties_and_kinks);
    RUN(test_f32_and_to_dtype);
    RUN(test_inplace_refusal);
    RUN(test_as_strided_not_recorded);
    RUN(test_alloc_failures);
    RUN(test_large_parallel);
    TEST_MAIN_END();
}
