/* tests/nn/test_loss.c — the losses of mft/loss.h: PyTorch golden values and
 * gradients (tests/golden/loss_cases.txt from gen_loss.py) through both the
 * public _backward functions and the tape; a naive double-precision
 * cross-entropy reference on larger random inputs (several reduction
 * blocks, parallel split, every layout); mft_gradcheck in F64 for every
 * loss; gradient formats (NHWC logits -> NHWC grad, no conversions); error
 * cases; scopes and leaks. */
#include "mft/loss.h"
#include "test_util.h"

/* ------------------------------------------------------------------ golden file */
#define LT_MAXV 128

typedef struct lt_tensor {
    bool present;
    mft_dtype dt;
    mft_format fmt;
    int nd;
    int64_t sizes[MFT_MAX_DIMS];
    int64_t n;
    double v[LT_MAXV];
} lt_tensor;

typedef struct lt_case {
    int line;
    char name[128];
    char op[8];
    lt_tensor x, target, weight, posw, gout, out;
    char red[8];
    int64_t ignore;
    double eps;
    bool has_params;
    int64_t ngx, ngt;
    bool has_gx, has_gt;
    double gx[LT_MAXV], gt[LT_MAXV];
} lt_case;

static lt_case g_case;
static int g_cases_run = 0;

static bool lt_parse_values(const char **p, int64_t *n, double *v) {
    if (!tu_next_int(p, n) || *n < 0 || *n > LT_MAXV) return false;
    for (int64_t i = 0; i < *n; i++)
        if (!tu_next_double(p, &v[i])) return false;
    return true;
}

/* "DTYPE FORMAT SIZES VALUES" or "none". */
static bool lt_parse_tensor(const char **p, lt_tensor *t) {
    char tok[32];
    const char *q = *p;
    if (!tu_next_tok(&q, tok, sizeof tok)) return false;
    if (strcmp(tok, "none") == 0) {
        t->present = false;
        *p = q;
        return true;
    }
    if (!tu_next_dtype(p, &t->dt) || !tu_next_tok(p, tok, sizeof tok)) return false;
    if (strcmp(tok, "contiguous") == 0) t->fmt = MFT_CONTIGUOUS;
    else if (strcmp(tok, "channels_last") == 0) t->fmt = MFT_CHANNELS_LAST;
    else return false;
    tu_list l;
    if (!tu_next_list(p, &l) || l.n > MFT_MAX_DIMS) return false;
    t->nd = l.n;
    for (int d = 0; d < l.n; d++) t->sizes[d] = l.v[d];
    if (!lt_parse_values(p, &t->n, t->v)) return false;
    t->present = true;
    return t->n == tu_shape_numel(t->nd, t->sizes);
}

static bool lt_field(const char *line) {
    const char *p = line;
    char key[32];
    lt_case *c = &g_case;
    if (!tu_next_tok(&p, key, sizeof key)) return false;
    bool ok;
    if (strcmp(key, "op") == 0) ok = tu_next_tok(&p, c->op, sizeof c->op);
    else if (strcmp(key, "x") == 0) ok = lt_parse_tensor(&p, &c->x);
    else if (strcmp(key, "target") == 0) ok = lt_parse_tensor(&p, &c->target);
    else if (strcmp(key, "weight") == 0) ok = lt_parse_tensor(&p, &c->weight);
    else if (strcmp(key, "posw") == 0) ok = lt_parse_tensor(&p, &c->posw);
    else if (strcmp(key, "gout") == 0) ok = lt_parse_tensor(&p, &c->gout);
    else if (strcmp(key, "out") == 0) ok = lt_parse_tensor(&p, &c->out);
    else if (strcmp(key, "params") == 0) {
        ok = tu_next_tok(&p, c->red, sizeof c->red) && tu_next_int(&p, &c->ignore) &&
             tu_next_double(&p, &c->eps);
        c->has_params = ok;
    } else if (strcmp(key, "gx") == 0) {
        ok = lt_parse_values(&p, &c->ngx, c->gx);
        c->has_gx = ok;
    } else if (strcmp(key, "gt") == 0) {
        const char *q = p;
        char tok[16];
        if (tu_next_tok(&q, tok, sizeof tok) && strcmp(tok, "none") == 0) {
            p = q;
            ok = true;
        } else {
            ok = lt_parse_values(&p, &c->ngt, c->gt);
            c->has_gt = ok;
        }
    } else {
        return false;
    }
    return ok && tu_at_eol(p);
}

/* A tensor laid out in t->fmt holding t's values in logical order. */
static mft_tensor *lt_build(const lt_tensor *t) {
    if (!t->present) return NULL;
    mft_tensor *x = mft_empty(t->nd, t->sizes, t->dt, t->fmt);
    if (!x) return NULL;
    int64_t idx[MFT_MAX_DIMS] = {0};
    for (int64_t i = 0; i < t->n; i++) {
        mft_tensor_set(x, idx, t->v[i]);
        tu_next_index(t->nd, t->sizes, idx);
    }
    return x;
}

static bool lt_close(double got, double want, mft_dtype dt) {
    if (want != want) return got != got;
    if (isinf(want)) return got == want;
    const double tol = dt == MFT_F32 ? 3e-5 : 1e-9;
    return fabs(got - want) <= tol + tol * fabs(want);
}

/* Compares t's values (logical order) with want[0..n). */
static void lt_check_values(const char *what, const mft_tensor *t, int64_t n, const double *want,
                            mft_dtype dt) {
    CHECK_MSG(t != NULL, "case %s (line %d): %s is NULL: %s", g_case.name, g_case.line, what,
              mft_last_error_message());
    if (!t) return;
    CHECK_MSG(mft_tensor_numel(t) == n, "case %s: %s has %lld elements, want %lld", g_case.name,
              what, (long long)mft_tensor_numel(t), (long long)n);
    if (mft_tensor_numel(t) != n) return;
    int64_t idx[MFT_MAX_DIMS] = {0};
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double got = mft_tensor_get(t, idx);
        if (!lt_close(got, want[i], dt) && bad++ < 3)
            CHECK_MSG(false, "case %s (line %d): %s[%lld] = %.9g, PyTorch %.9g", g_case.name,
                      g_case.line, what, (long long)i, got, want[i]);
        tu_next_index(mft_tensor_ndim(t), mft_tensor_sizes(t), idx);
    }
    if (bad == 0) CHECK(true);
}

/* g is laid out exactly like x (x is packed here): same strides, same tag. */
static void lt_check_layout(const char *what, const mft_tensor *g, const mft_tensor *x) {
    if (!g || !x) return;
    bool same = mft_tensor_ndim(g) == mft_tensor_ndim(x);
    for (int d = 0; same && d < mft_tensor_ndim(x); d++)
        if (mft_tensor_sizes(x)[d] > 1 && mft_tensor_strides(g)[d] != mft_tensor_strides(x)[d])
            same = false;
    char a[128], b[128];
    tu_describe(g, a, sizeof a, true);
    tu_describe(x, b, sizeof b, true);
    CHECK_MSG(same, "case %s: %s layout %s, input %s", g_case.name, what, a, b);
    if (mft_tensor_ndim(x) >= 3 && mft_tensor_ndim(x) <= 5)
        CHECK_MSG(mft_tensor_format(g) == mft_tensor_format(x), "case %s: %s tag %s, input %s",
                  g_case.name, what, a, b);
}

static mft_reduction lt_red(const char *s) {
    return strcmp(s, "none") == 0 ? MFT_REDUCTION_NONE
           : strcmp(s, "mean") == 0 ? MFT_REDUCTION_MEAN
                                    : MFT_REDUCTION_SUM;
}

typedef struct lt_inputs {
    mft_tensor *x, *t, *w, *pw;
    const lt_case *c;
} lt_inputs;

static mft_tensor *lt_forward(const lt_inputs *in) {
    const lt_case *c = in->c;
    mft_reduction r = lt_red(c->red);
    if (strcmp(c->op, "ce") == 0) return mft_cross_entropy(in->x, in->t, in->w, c->ignore, c->eps, r);
    if (strcmp(c->op, "nll") == 0) return mft_nll_loss(in->x, in->t, in->w, c->ignore, r);
    if (strcmp(c->op, "mse") == 0) return mft_mse_loss(in->x, in->t, r);
    if (strcmp(c->op, "bce") == 0)
        return mft_binary_cross_entropy_with_logits(in->x, in->t, in->w, in->pw, r);
    return mft_accuracy_count(in->x, in->t);
}

static mft_tensor *lt_backward(const lt_inputs *in, const mft_tensor *gout) {
    const lt_case *c = in->c;
    mft_reduction r = lt_red(c->red);
    if (strcmp(c->op, "ce") == 0)
        return mft_cross_entropy_backward(gout, in->x, in->t, in->w, c->ignore, c->eps, r);
    if (strcmp(c->op, "nll") == 0)
        return mft_nll_loss_backward(gout, in->x, in->t, in->w, c->ignore, r);
    if (strcmp(c->op, "mse") == 0) return mft_mse_loss_backward(gout, in->x, in->t, r);
    return mft_binary_cross_entropy_with_logits_backward(gout, in->x, in->t, in->w, in->pw, r);
}

static void lt_end(int lineno, bool in_case) {
    lt_case *c = &g_case;
    CHECK_MSG(in_case, "line %d: 'end' outside a case", lineno);
    CHECK_MSG(c->x.present && c->target.present && c->out.present && c->gout.present &&
                  c->has_params && c->op[0],
              "case %s (line %d) incomplete", c->name, c->line);
    if (!in_case || !c->x.present || !c->target.present || !c->out.present) return;
    g_cases_run++;
    mft_dtype dt = c->x.dt;
    lt_inputs in = {lt_build(&c->x), lt_build(&c->target), lt_build(&c->weight),
                    lt_build(&c->posw), c};
    mft_tensor *gout = lt_build(&c->gout);
    /* forward */
    mft_tensor *out = lt_forward(&in);
    CHECK_MSG(out != NULL, "case %s: forward failed: %s", c->name, mft_last_error_message());
    if (out) {
        CHECK_MSG(tu_has_sizes(out, c->out.nd, c->out.sizes), "case %s: result sizes", c->name);
        CHECK_EQ_I(mft_tensor_dtype(out), c->out.dt);
        lt_check_values("out", out, c->out.n, c->out.v, dt);
    }
    mft_tensor_release(out);
    if (strcmp(c->op, "acc") == 0) goto done;
    /* public backward */
    mft_tensor *gx = lt_backward(&in, gout);
    lt_check_values("grad x (backward fn)", gx, c->ngx, c->gx, dt);
    lt_check_layout("grad x (backward fn)", gx, in.x);
    mft_tensor_release(gx);
    /* through the tape: x and a floating target require grad */
    bool tgrad = c->has_gt && c->target.dt != MFT_I64;
    TU_OK_S(mft_tensor_set_requires_grad(in.x, true));
    if (tgrad) TU_OK_S(mft_tensor_set_requires_grad(in.t, true));
    TU_OK_S(mft_tape_begin());
    mft_autograd_conversions_reset();
    out = lt_forward(&in);
    CHECK(out && mft_tensor_requires_grad(out));
    if (out) TU_OK_S(mft_backward(out, gout));
    CHECK_EQ_I(mft_autograd_conversions(), 0);
    mft_tensor_release(out);
    TU_OK_S(mft_tape_end());
    lt_check_values("grad x (tape)", mft_tensor_grad(in.x), c->ngx, c->gx, dt);
    lt_check_layout("grad x (tape)", mft_tensor_grad(in.x), in.x);
    if (tgrad) {
        lt_check_values("grad target (tape)", mft_tensor_grad(in.t), c->ngt, c->gt, dt);
        lt_check_layout("grad target (tape)", mft_tensor_grad(in.t), in.t);
    }
done:
    mft_tensor_release(in.x);
    mft_tensor_release(in.t);
    mft_tensor_release(in.w);
    mft_tensor_release(in.pw);
    mft_tensor_release(gout);
}

static void test_golden(void) {
    static char buf[1 << 16];
    tu_golden_file g = {MFT_TEST_DATA_DIR "/loss_cases.txt", buf, (int)sizeof buf, true,
                        &g_case, sizeof g_case, &g_case.line, g_case.name, sizeof g_case.name,
                        lt_field, lt_end};
    tu_read_golden(&g);
    CHECK_MSG(g_cases_run >= 250, "only %d golden cases ran", g_cases_run);
}

/* ------------------------------------------------------------------ naive reference */
/* Cross entropy with class indices, straight from the definition, in double:
 * positions walked by logical index, logits read with mft_tensor_get. */
static double naive_ce(const mft_tensor *x, const mft_tensor *t, const mft_tensor *w,
                       int64_t ignore, double eps, mft_reduction red, double *per_pos) {
    const int nd = mft_tensor_ndim(x);
    const int64_t *sz = mft_tensor_sizes(x);
    const int64_t C = sz[1];
    int64_t psz[MFT_MAX_DIMS], pidx[MFT_MAX_DIMS] = {0}, xi[MFT_MAX_DIMS];
    int pnd = 0;
    for (int d = 0; d < nd; d++)
        if (d != 1) psz[pnd++] = sz[d];
    const int64_t P = tu_shape_numel(pnd, psz);
    double nll_sum = 0, wsum = 0, sm_sum = 0;
    for (int64_t p = 0; p < P; p++) {
        xi[0] = pidx[0];
        for (int d = 2; d < nd; d++) xi[d] = pidx[d - 1];
        const int64_t tgt = (int64_t)mft_tensor_get(t, pidx);
        double m = -INFINITY, s = 0;
        for (int64_t k = 0; k < C; k++) {
            xi[1] = k;
            m = fmax(m, mft_tensor_get(x, xi));
        }
        for (int64_t k = 0; k < C; k++) {
            xi[1] = k;
            s += exp(mft_tensor_get(x, xi) - m);
        }
        double nll = 0, sm = 0, wt = 0;
        if (tgt != ignore) {
            xi[1] = tgt;
            wt = w ? mft_tensor_get(w, &tgt) : 1.0;
            nll = -wt * (mft_tensor_get(x, xi) - m - log(s));
            for (int64_t k = 0; k < C; k++) {
                xi[1] = k;
                sm += -(w ? mft_tensor_get(w, &k) : 1.0) * (mft_tensor_get(x, xi) - m - log(s));
            }
        }
        if (per_pos) per_pos[p] = (1 - eps) * nll + eps / (double)C * sm;
        nll_sum += nll;
        wsum += wt;
        sm_sum += sm;
        tu_next_index(pnd, psz, pidx);
    }
    if (red == MFT_REDUCTION_SUM) return (1 - eps) * nll_sum + eps / (double)C * sm_sum;
    return (1 - eps) * nll_sum / wsum + eps / (double)C * sm_sum / wsum;
}

/* d loss / d x by central differences of the naive reference (MEAN). */
static void test_naive_reference(void) {
    struct {
        int nd;
        int64_t sizes[4];
        mft_format fmt;
        mft_dtype dt;
        bool weight;
        double eps;
    } cases[] = {
        {2, {64, 10}, MFT_CONTIGUOUS, MFT_F32, false, 0.0},   /* the training step */
        {2, {64, 10}, MFT_CONTIGUOUS, MFT_F32, true, 0.1},
        {2, {4000, 10}, MFT_CONTIGUOUS, MFT_F32, false, 0.0}, /* parallel blocks */
        {2, {700, 7}, MFT_CONTIGUOUS, MFT_F64, true, 0.2},
        {4, {3, 5, 17, 13}, MFT_CONTIGUOUS, MFT_F32, true, 0.0},
        {4, {3, 5, 17, 13}, MFT_CHANNELS_LAST, MFT_F32, false, 0.3},
        {4, {2, 6, 9, 31}, MFT_CHANNELS_LAST, MFT_F64, true, 0.05},
        {3, {5, 4, 70}, MFT_CHANNELS_LAST, MFT_F64, false, 0.0},
    };
    uint64_t rng = 77;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const int nd = cases[ci].nd;
        const int64_t *sz = cases[ci].sizes, C = sz[1];
        mft_tensor *x = mft_empty(nd, sz, cases[ci].dt, cases[ci].fmt);
        tu_fill_grid(x, &rng);
        int64_t psz[MFT_MAX_DIMS];
        int pnd = 0;
        for (int d = 0; d < nd; d++)
            if (d != 1) psz[pnd++] = sz[d];
        mft_tensor *t = mft_empty(pnd, psz, MFT_I64, MFT_CONTIGUOUS);
        int64_t idx[MFT_MAX_DIMS] = {0};
        int64_t P = tu_shape_numel(pnd, psz);
        for (int64_t p = 0; p < P; p++) {
            int64_t v = tu_rng_int(&rng, 0, C - 1);
            if (p % 11 == 3) v = -100;
            mft_tensor_set(t, idx, (double)v);
            tu_next_index(pnd, psz, idx);
        }
        mft_tensor *w = NULL;
        if (cases[ci].weight) {
            w = mft_empty(1, &C, cases[ci].dt, MFT_CONTIGUOUS);
            for (int64_t k = 0; k < C; k++) mft_tensor_set(w, &k, 0.25 + 0.125 * (double)(k % 7));
        }
        const double eps = cases[ci].eps;
        const double tol = cases[ci].dt == MFT_F32 ? 2e-5 : 1e-11;
        for (int r = 0; r < 3; r++) {
            mft_reduction red = (mft_reduction)r;
            double *pp = malloc((size_t)P * sizeof *pp);
            double want = naive_ce(x, t, w, -100, eps, red, pp);
            mft_tensor *out = mft_cross_entropy(x, t, w, -100, eps, red);
            CHECK_MSG(out != NULL, "case %zu: %s", ci, mft_last_error_message());
            if (out && red != MFT_REDUCTION_NONE) {
                CHECK_EQ_I(mft_tensor_ndim(out), 0);
                double got = mft_tensor_get(out, NULL);
                CHECK_MSG(fabs(got - want) <= tol * (1 + fabs(want)),
                          "case %zu red %d: %.12g vs naive %.12g", ci, r, got, want);
            } else if (out) {
                CHECK(tu_has_sizes(out, pnd, psz));
                CHECK(mft_tensor_is_contiguous(out, MFT_CONTIGUOUS));
                int64_t j[MFT_MAX_DIMS] = {0};
                int bad = 0;
                for (int64_t p = 0; p < P; p++) {
                    double got = mft_tensor_get(out, j);
                    if (!(fabs(got - pp[p]) <= tol * (1 + fabs(pp[p]))) && bad++ < 3)
                        CHECK_MSG(false, "case %zu pos %lld: %.9g vs naive %.9g", ci, (long long)p,
                                  got, pp[p]);
                    tu_next_index(pnd, psz, j);
                }
                CHECK(bad == 0);
            }
            mft_tensor_release(out);
            free(pp);
        }
        /* gradient (MEAN) at a few elements: central differences of the naive loss */
        mft_tensor *g1 = mft_full(0, NULL, cases[ci].dt, MFT_CONTIGUOUS, 1.0);
        mft_tensor *gx = mft_cross_entropy_backward(g1, x, t, w, -100, eps, MFT_REDUCTION_MEAN);
        CHECK(gx != NULL);
        lt_check_layout("naive grad", gx, x);
        mft_tensor *xd = mft_to_dtype(x, MFT_F64); /* perturbed in double */
        for (int k = 0; k < 6 && gx; k++) {
            int64_t e[MFT_MAX_DIMS];
            for (int d = 0; d < nd; d++) e[d] = tu_rng_int(&rng, 0, sz[d] - 1);
            double v0 = mft_tensor_get(xd, e), h = 1e-4;
            mft_tensor_set(xd, e, v0 + h);
            double fp = naive_ce(xd, t, w, -100, eps, MFT_REDUCTION_MEAN, NULL);
            mft_tensor_set(xd, e, v0 - h);
            double fm = naive_ce(xd, t, w, -100, eps, MFT_REDUCTION_MEAN, NULL);
            mft_tensor_set(xd, e, v0);
            double num = (fp - fm) / (2 * h), got = mft_tensor_get(gx, e);
            CHECK_MSG(fabs(got - num) <= 1e-6 + 1e-4 * fabs(num),
                      "case %zu: grad %.10g vs numeric %.10g", ci, got, num);
        }
        mft_tensor_release(xd);
        mft_tensor_release(gx);
        mft_tensor_release(g1);
        mft_tensor_release(w);
        mft_tensor_release(t);
        mft_tensor_release(x);
    }
}

/* Reductions do not depend on the thread count (fixed blocks). */
static void test_thread_invariance(void) {
    int64_t sz[2] = {5000, 10};
    uint64_t rng = 5;
    mft_tensor *x = mft_empty(2, sz, MFT_F32, MFT_CONTIGUOUS);
    tu_fill_grid(x, &rng);
    mft_tensor *t = mft_empty(1, sz, MFT_I64, MFT_CONTIGUOUS);
    for (int64_t i = 0; i < sz[0]; i++) mft_tensor_set(t, &i, (double)tu_rng_int(&rng, 0, 9));
    int prev = mft_num_threads();
    mft_set_num_threads(1);
    mft_tensor *a = mft_cross_entropy(x, t, NULL, -100, 0.1, MFT_REDUCTION_MEAN);
    mft_set_num_threads(2);
    mft_tensor *b = mft_cross_entropy(x, t, NULL, -100, 0.1, MFT_REDUCTION_MEAN);
    mft_set_num_threads(prev);
    CHECK(a && b && mft_tensor_get(a, NULL) == mft_tensor_get(b, NULL));
    mft_tensor_release(a);
    mft_tensor_release(b);
    mft_tensor_release(t);
    mft_tensor_release(x);
}

/* ------------------------------------------------------------------ gradcheck */
typedef struct gc_ctx {
    int op; /* 0 ce index, 1 ce prob, 2 nll, 3 mse, 4 bce */
    mft_tensor *t, *w, *pw;
    mft_reduction red;
    double eps;
    int64_t ignore;
} gc_ctx;

static mft_tensor *gc_fn(void *vctx, mft_tensor *const *in) {
    const gc_ctx *c = vctx;
    switch (c->op) {
    case 0: return mft_cross_entropy(in[0], c->t, c->w, c->ignore, c->eps, c->red);
    case 1: return mft_cross_entropy(in[0], in[1], c->w, -100, c->eps, c->red);
    case 2: return mft_nll_loss(in[0], c->t, c->w, c->ignore, c->red);
    case 3: return mft_mse_loss(in[0], in[1], c->red);
    default: return mft_binary_cross_entropy_with_logits(in[0], in[1], c->w, c->pw, c->red);
    }
}

static void test_gradcheck(void) {
    uint64_t rng = 99;
    int64_t sz[4] = {2, 3, 2, 3}, psz[3] = {2, 2, 3}, C = 3;
    for (int op = 0; op < 5; op++) {
        for (int fi = 0; fi < 2; fi++) {
            for (int r = 0; r < 3; r++) {
                mft_format fmt = fi ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
                mft_tensor *x = mft_empty(4, sz, MFT_F64, fmt);
                tu_fill_grid(x, &rng);
                gc_ctx c = {op, NULL, NULL, NULL, (mft_reduction)r, op <= 1 ? 0.2 : 0.0, 1};
                mft_tensor *inputs[2] = {x, NULL};
                int n = 1;
                if (op == 0 || op == 2) {
                    c.t = mft_empty(3, psz, MFT_I64, MFT_CONTIGUOUS);
                    int64_t j[3] = {0};
                    for (int p = 0; p < 12; p++) {
                        mft_tensor_set(c.t, j, (double)(p * 7 % 3));
                        tu_next_index(3, psz, j);
                    }
                } else {
                    inputs[1] = mft_empty(4, sz, MFT_F64, fmt);
                    tu_fill_grid(inputs[1], &rng);
                    if (op != 3) { /* probabilities / labels in [0, 1] */
                        mft_tensor *a = mft_mul_scalar(inputs[1], 0.5);
                        mft_tensor *b = mft_add_scalar(a, 0.5);
                        mft_copy_(inputs[1], b);
                        mft_tensor_release(a);
                        mft_tensor_release(b);
                    }
                    TU_OK_S(mft_tensor_set_requires_grad(inputs[1], true));
                    n = 2;
                }
                if (op != 3) {
                    int64_t wl = op == 4 ? 3 : C; /* bce: weight over the last dim (W = 3) */
                    c.w = mft_empty(1, &wl, MFT_F64, MFT_CONTIGUOUS);
                    for (int64_t k = 0; k < wl; k++) mft_tensor_set(c.w, &k, 0.5 + 0.5 * (double)k);
                }
                if (op == 4) {
                    int64_t l = 3;
                    c.pw = mft_full(1, &l, MFT_F64, MFT_CONTIGUOUS, 2.5);
                }
                TU_OK_S(mft_tensor_set_requires_grad(x, true));
                mft_gradcheck_opts o = {1e-6, 1e-7, 1e-5, 3};
                mft_status st = mft_gradcheck(gc_fn, &c, n, inputs, &o);
                CHECK_MSG(st == MFT_OK, "gradcheck op %d fmt %d red %d: %s", op, fi, r,
                          mft_last_error_message());
                mft_tensor_release(x);
                mft_tensor_release(inputs[1]);
                mft_tensor_release(c.t);
                mft_tensor_release(c.w);
                mft_tensor_release(c.pw);
            }
        }
    }
}

/* NHWC logits through the tape: the leaf grad is NHWC, no conversion, and
 * a non-dense (sliced) input gets a dense gradient in its dim order. */
static void test_grad_format(void) {
    int64_t sz[4] = {2, 4, 3, 5}, psz[3] = {2, 3, 5};
    uint64_t rng = 3;
    mft_tensor *x = mft_empty(4, sz, MFT_F32, MFT_CHANNELS_LAST);
    tu_fill_grid(x, &rng);
    mft_tensor *t = mft_zeros(3, psz, MFT_I64, MFT_CONTIGUOUS);
    int64_t j[3] = {1, 2, 4};
    mft_tensor_set(t, j, 3);
    TU_OK_S(mft_tensor_set_requires_grad(x, true));
    TU_OK_S(mft_tape_begin());
    mft_autograd_conversions_reset();
    mft_tensor *loss = mft_cross_entropy(x, t, NULL, -100, 0.0, MFT_REDUCTION_MEAN);
    CHECK(loss && mft_tensor_ndim(loss) == 0);
    CHECK(mft_tape_size() == 1);
    TU_OK_S(mft_backward(loss, NULL));
    CHECK_EQ_I(mft_autograd_conversions(), 0);
    mft_tensor *g = mft_tensor_grad(x);
    CHECK(g && mft_tensor_is_contiguous(g, MFT_CHANNELS_LAST) &&
          mft_tensor_format(g) == MFT_CHANNELS_LAST);
    /* each row of softmax - onehot sums to 0 over classes */
    int64_t e[4] = {1, 0, 2, 4};
    double rs = 0;
    for (e[1] = 0; e[1] < 4 && g; e[1]++) rs += mft_tensor_get(g, e);
    CHECK_NEAR(rs, 0.0, 1e-6);
    mft_tensor_release(loss);
    TU_OK_S(mft_tape_end());
    /* sliced NHWC view (every other channel): gradient dense in NHWC order */
    mft_tensor *v = mft_slice(x, 1, 0, 4, 2);
    mft_tensor *g1 = mft_ones(0, NULL, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *t2 = mft_zeros(3, psz, MFT_I64, MFT_CONTIGUOUS);
    mft_tensor *gv = mft_cross_entropy_backward(g1, v, t2, NULL, -100, 0.0, MFT_REDUCTION_SUM);
    CHECK(gv && mft_tensor_is_contiguous(gv, MFT_CHANNELS_LAST));
    mft_tensor_release(gv);
    mft_tensor_release(g1);
    mft_tensor_release(t2);
    mft_tensor_release(v);
    mft_tensor_release(t);
    mft_tensor_release(x);
}

/* ------------------------------------------------------------------ errors */
#define FAIL_NULL(expr, st, needle)              \
    do {                                         \
        TU_EXPECT_NULL_(expr, #expr);            \
        CHECK_ERR(st, needle);                   \
    } while (0)

static void test_errors(void) {
    int64_t sz[2] = {4, 3}, n4 = 4, n3 = 3, n2 = 2, sz2[2] = {4, 2};
    mft_tensor *x = mft_zeros(2, sz, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *xd = mft_zeros(2, sz, MFT_F64, MFT_CONTIGUOUS);
    mft_tensor *t = mft_zeros(1, &n4, MFT_I64, MFT_CONTIGUOUS);
    mft_tensor *t3 = mft_zeros(1, &n3, MFT_I64, MFT_CONTIGUOUS);
    mft_tensor *ti = mft_zeros(1, &n4, MFT_I32, MFT_CONTIGUOUS);
    mft_tensor *w2 = mft_ones(1, &n2, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *w3d = mft_ones(1, &n3, MFT_F64, MFT_CONTIGUOUS);
    mft_tensor *xi = mft_zeros(2, sz, MFT_I32, MFT_CONTIGUOUS);
    mft_tensor *y2 = mft_zeros(2, sz2, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *g2 = mft_zeros(1, &n2, MFT_F32, MFT_CONTIGUOUS);
    int64_t live = mft_live_tensors();

    FAIL_NULL(mft_cross_entropy(x, t3, NULL, -100, 0, MFT_REDUCTION_MEAN), MFT_ERR_SHAPE, "[3]");
    FAIL_NULL(mft_cross_entropy(x, ti, NULL, -100, 0, MFT_REDUCTION_MEAN), MFT_ERR_DTYPE, "i32");
    FAIL_NULL(mft_cross_entropy(xi, t, NULL, -100, 0, MFT_REDUCTION_MEAN), MFT_ERR_DTYPE, "logits");
    FAIL_NULL(mft_cross_entropy(x, xd, NULL, -100, 0, MFT_REDUCTION_MEAN), MFT_ERR_DTYPE, "f64");
    FAIL_NULL(mft_cross_entropy(x, t, NULL, -100, -0.1, MFT_REDUCTION_MEAN), MFT_ERR_INVALID,
              "label_smoothing");
    FAIL_NULL(mft_cross_entropy(x, t, NULL, -100, 1.5, MFT_REDUCTION_MEAN), MFT_ERR_INVALID, "1.5");
    FAIL_NULL(mft_cross_entropy(x, t, NULL, -100, NAN, MFT_REDUCTION_MEAN), MFT_ERR_INVALID,
              "label_smoothing");
    FAIL_NULL(mft_cross_entropy(x, t, w2, -100, 0, MFT_REDUCTION_MEAN), MFT_ERR_SHAPE, "weight");
    FAIL_NULL(mft_cross_entropy(x, t, w3d, -100, 0, MFT_REDUCTION_MEAN), MFT_ERR_DTYPE, "weight");
    FAIL_NULL(mft_cross_entropy(x, t, NULL, -100, 0, (mft_reduction)7), MFT_ERR_INVALID, "reduction 7");
    FAIL_NULL(mft_nll_loss(x, t, NULL, -100, MFT_REDUCTION_COUNT), MFT_ERR_INVALID, "reduction");
    /* class index out of range, and negative, named with C */
    int64_t i2 = 2;
    mft_tensor_set(t, &i2, 3);
    FAIL_NULL(mft_cross_entropy(x, t, NULL, -100, 0, MFT_REDUCTION_MEAN), MFT_ERR_INVALID,
              "target 3 at position [2] is out of bounds for 3 classes");
    FAIL_NULL(mft_nll_loss(x, t, NULL, -100, MFT_REDUCTION_SUM), MFT_ERR_INVALID, "target 3");
    FAIL_NULL(mft_accuracy_count(x, ti), MFT_ERR_DTYPE, "i64");
    mft_tensor_set(t, &i2, -1);
    FAIL_NULL(mft_cross_entropy(x, t, NULL, -100, 0, MFT_REDUCTION_NONE), MFT_ERR_INVALID,
              "target -1");
    /* ... but equal to ignore_index it is fine */
    mft_tensor *ok = mft_cross_entropy(x, t, NULL, -1, 0, MFT_REDUCTION_MEAN);
    CHECK(ok != NULL);
    mft_tensor_release(ok);
    mft_tensor_set(t, &i2, 0);
    /* nll: probabilities are not accepted */
    FAIL_NULL(mft_nll_loss(x, x, NULL, -100, MFT_REDUCTION_MEAN), MFT_ERR_DTYPE, "i64");
    /* prob target with the wrong sizes */
    FAIL_NULL(mft_cross_entropy(x, y2, NULL, -100, 0, MFT_REDUCTION_MEAN), MFT_ERR_SHAPE, "[4,2]");
    /* backward: grad_out sizes */
    FAIL_NULL(mft_cross_entropy_backward(g2, x, t, NULL, -100, 0, MFT_REDUCTION_NONE), MFT_ERR_SHAPE,
              "grad_out");
    FAIL_NULL(mft_cross_entropy_backward(t, x, t, NULL, -100, 0, MFT_REDUCTION_MEAN), MFT_ERR_DTYPE,
              "grad_out");
    FAIL_NULL(mft_nll_loss_backward(g2, x, t, NULL, -100, MFT_REDUCTION_MEAN), MFT_ERR_SHAPE,
              "one element");
    /* mse / bce */
    FAIL_NULL(mft_mse_loss(x, y2, MFT_REDUCTION_MEAN), MFT_ERR_SHAPE, "target");
    FAIL_NULL(mft_mse_loss(x, xd, MFT_REDUCTION_MEAN), MFT_ERR_DTYPE, "target");
    FAIL_NULL(mft_binary_cross_entropy_with_logits(x, x, w2, NULL, MFT_REDUCTION_MEAN),
              MFT_ERR_SHAPE, "does not broadcast");
    FAIL_NULL(mft_binary_cross_entropy_with_logits(x, x, NULL, w2, MFT_REDUCTION_MEAN),
              MFT_ERR_SHAPE, "pos_weight");
    FAIL_NULL(mft_mse_loss_backward(g2, x, x, MFT_REDUCTION_NONE), MFT_ERR_SHAPE, "grad_out");
    /* NULL propagates, keeping the first message */
    FAIL_NULL(mft_cross_entropy(NULL, t, NULL, -100, 0, MFT_REDUCTION_MEAN), MFT_ERR_NULL, "logits");
    mft_clear_error();
    mft_tensor *bad = mft_permute(x, (const int[]){0, 0});
    CHECK(bad == NULL);
    mft_status first = mft_last_error();
    mft_tensor *r = mft_mse_loss(bad, x, MFT_REDUCTION_MEAN);
    CHECK(r == NULL && mft_last_error() == first && strstr(mft_last_error_message(), "mft_permute"));
    mft_clear_error();
    CHECK_EQ_I(mft_live_tensors(), live); /* no failing call left anything behind */
    mft_tensor *ts[] = {x, xd, t, t3, ti, w2, w3d, xi, y2, g2};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) mft_tensor_release(ts[i]);
}

/* A training-like step under a scope: everything goes back. */
static void test_scope(void) {
    int64_t sz[2] = {64, 10}, n = 64;
    uint64_t rng = 11;
    mft_tensor *x = mft_empty(2, sz, MFT_F32, MFT_CONTIGUOUS);
    tu_fill_grid(x, &rng);
    mft_tensor *t = mft_zeros(1, &n, MFT_I64, MFT_CONTIGUOUS);
    TU_OK_S(mft_tensor_set_requires_grad(x, true));
    int64_t live = mft_live_tensors();
    for (int it = 0; it < 3; it++) {
        TU_OK_S(mft_scope_begin());
        TU_OK_S(mft_tape_begin());
        mft_tensor *loss = mft_cross_entropy(x, t, NULL, -100, 0.1, MFT_REDUCTION_MEAN);
        mft_tensor *acc = mft_accuracy_count(x, t);
        CHECK(loss && acc && mft_tensor_dtype(acc) == MFT_I64);
        TU_OK_S(mft_backward(loss, NULL));
        TU_OK_S(mft_tape_end());
        TU_OK_S(mft_scope_end());
        mft_tensor_zero_grad(x);
    }
    CHECK_EQ_I(mft_live_tensors(), live);
    /* nothing recorded with grad mode off */
    TU_OK_S(mft_tape_begin());
    bool was = mft_set_grad_enabled(false);
    mft_tensor *loss = mft_cross_entropy(x, t, NULL, -100, 0, MFT_REDUCTION_SUM);
    CHECK(loss && mft_tape_size() == 0 && !mft_tensor_requires_grad(loss));
    mft_set_grad_enabled(was);
    mft_tensor_release(loss);
    TU_OK_S(mft_tape_end());
    mft_tensor_release(t);
    mft_tensor_release(x);
}

int main(void) {
    RUN(test_golden);
    RUN(test_naive_reference);
    RUN(test_thread_invariance);
    RUN(test_gradcheck);
    RUN(test_grad_format);
    RUN(test_errors);
    RUN(test_scope);
    TEST_MAIN_END();
}
