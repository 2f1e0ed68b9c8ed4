/* tests/nn/test_nn_optim.c — optimisers of mft/nn.h: golden trajectories from
 * PyTorch 1.13 (tests/golden/optim_cases.txt, gen_optim.py) for SGD (momentum,
 * dampening, nesterov, weight decay), Adam (L2) and AdamW, run with the
 * parameter and its grad in NCHW and channels_last (layout kept, fast path
 * and strided iterator path), skipped steps (no grad), state listing, the
 * StepLR schedule, a large parameter against a naive reference, errors as
 * PyTorch's, and no leaks. */
#include <errno.h>
#include "harness.h"
#include "mft/nn.h"

#define MAXV 64
#define NSTEPS 5

typedef struct {
    char name[64], opt[16], dtype[8];
    double lr, momentum, dampening, wd, beta1, beta2, eps;
    int nesterov;
    int ndim;
    int64_t sizes[8];
    int n;
    double param[MAXV];
    bool has_grad[NSTEPS];
    double grad[NSTEPS][MAXV];
    double after[NSTEPS][MAXV];
    int line;
} optim_case;

static bool parse_list(const char *p, int *n, double *v) {
    char *end;
    long cnt = strtol(p, &end, 10);
    if (end == p || cnt < 0 || cnt > MAXV) return false;
    p = end;
    for (long i = 0; i < cnt; i++) {
        v[i] = strtod(p, &end);
        if (end == p) return false;
        p = end;
    }
    *n = (int)cnt;
    return true;
}

/* Tensor of the case's sizes in fmt holding vals (logical order). */
static mft_tensor *make_tensor(const optim_case *c, const double *vals, mft_format fmt) {
    mft_dtype dt = strcmp(c->dtype, "f32") == 0 ? MFT_F32 : MFT_F64;
    mft_tensor *t = mft_empty(c->ndim, c->sizes, dt, fmt);
    int64_t idx[8] = {0};
    for (int i = 0; i < c->n && t; i++) {
        mft_tensor_set(t, idx, vals[i]);
        for (int d = c->ndim - 1; d >= 0; d--) {
            if (++idx[d] < c->sizes[d]) break;
            idx[d] = 0;
        }
    }
    return t;
}

static void run_case(const optim_case *c, mft_format pfmt, mft_format gfmt) {
    mft_tensor *p = make_tensor(c, c->param, pfmt);
    CHECK(p != NULL);
    if (!p) return;
    mft_tensor_set_requires_grad(p, true);
    int64_t strides0[8];
    memcpy(strides0, mft_tensor_strides(p), sizeof(int64_t) * (size_t)c->ndim);
    mft_optimizer *o = NULL;
    if (strcmp(c->opt, "sgd") == 0) {
        mft_sgd_opts so = {c->lr, c->momentum, c->dampening, c->wd, c->nesterov != 0};
        o = mft_sgd_new(1, &p, &so);
    } else {
        mft_adam_opts ao = {c->lr, c->beta1, c->beta2, c->eps, c->wd};
        o = strcmp(c->opt, "adam") == 0 ? mft_adam_new(1, &p, &ao) : mft_adamw_new(1, &p, &ao);
    }
    CHECK_MSG(o != NULL, "case %s: %s", c->name, mft_last_error_message());
    if (!o) {
        mft_tensor_release(p);
        return;
    }
    bool f32 = strcmp(c->dtype, "f32") == 0;
    double rtol = f32 ? 2e-6 : 1e-12, atol = f32 ? 1e-6 : 1e-13;
    int taken = 0;
    for (int k = 0; k < NSTEPS; k++) {
        if (c->has_grad[k]) {
            mft_tensor *g = make_tensor(c, c->grad[k], gfmt);
            CHECK(mft_tensor_set_grad(p, g) == MFT_OK);
            mft_tensor_release(g);
            taken++;
        } else {
            mft_optimizer_zero_grad(o);
            CHECK(mft_tensor_grad(p) == NULL);
        }
        int64_t v0 = mft_tensor_version(p);
        CHECK(mft_optimizer_step(o) == MFT_OK);
        if (c->has_grad[k]) CHECK(mft_tensor_version(p) > v0);
        else CHECK(mft_tensor_version(p) == v0);
        int64_t idx[8] = {0};
        int bad = 0;
        for (int i = 0; i < c->n; i++) {
            double got = mft_tensor_get(p, idx), want = c->after[k][i];
            if (!(fabs(got - want) <= atol + rtol * fabs(want))) {
                if (bad++ < 3)
                    CHECK_MSG(false, "case %s (line %d) fmt %s/%s step %d elem %d: got %.17g "
                              "want %.17g", c->name, c->line, mft_format_name(pfmt),
                              mft_format_name(gfmt), k, i, got, want);
            }
            for (int d = c->ndim - 1; d >= 0; d--) {
                if (++idx[d] < c->sizes[d]) break;
                idx[d] = 0;
            }
        }
        CHECK(bad == 0);
    }
    /* the parameter keeps its layout */
    CHECK(memcmp(strides0, mft_tensor_strides(p), sizeof(int64_t) * (size_t)c->ndim) == 0);
    CHECK(mft_tensor_format(p) == pfmt);
    /* step counters */
    mft_tensor *st[8];
    const char *nm[8];
    int ns = mft_optimizer_state(o, st, nm, 8);
    CHECK(ns >= 2 && strcmp(nm[0], "step") == 0 && strcmp(nm[1], "0.step") == 0);
    if (ns >= 2) {
        CHECK_NEAR(mft_tensor_get(st[0], (int64_t[]){0}), NSTEPS, 0);
        CHECK_NEAR(mft_tensor_get(st[1], (int64_t[]){0}), taken, 0);
    }
    /* state tensors are laid out like the parameter */
    for (int i = 2; i < ns && i < 8; i++)
        CHECK_MSG(memcmp(mft_tensor_strides(st[i]), strides0,
                         sizeof(int64_t) * (size_t)c->ndim) == 0,
                  "state %s not in the parameter's layout", nm[i]);
    mft_optimizer_free(o);
    mft_tensor_release(p);
}

static void test_golden(void) {
    const char *path = MFT_TEST_DATA_DIR "/optim_cases.txt";
    FILE *fp = fopen(path, "r");
    CHECK_MSG(fp != NULL, "cannot open %s", path);
    if (!fp) return;
    static optim_case c;
    static char line[8192];
    int lineno = 0, ncases = 0, syntax = 0;
    bool in_case = false;
    while (fgets(line, sizeof line, fp)) {
        lineno++;
        char key[16] = "";
        int off = 0;
        if (line[0] == '#' || sscanf(line, "%15s%n", key, &off) != 1) continue;
        const char *rest = line + off;
        if (strcmp(key, "case") == 0) {
            memset(&c, 0, sizeof c);
            c.line = lineno;
            in_case = sscanf(rest, "%63s", c.name) == 1;
            if (!in_case) syntax++;
        } else if (!in_case) {
            syntax++;
        } else if (strcmp(key, "opt") == 0) {
            if (sscanf(rest, "%15s", c.opt) != 1) syntax++;
        } else if (strcmp(key, "dtype") == 0) {
            if (sscanf(rest, "%7s", c.dtype) != 1) syntax++;
        } else if (strcmp(key, "hyper") == 0) {
            if (sscanf(rest, "%lf %lf %lf %lf %d %lf %lf %lf", &c.lr, &c.momentum, &c.dampening,
                       &c.wd, &c.nesterov, &c.beta1, &c.beta2, &c.eps) != 8)
                syntax++;
        } else if (strcmp(key, "sizes") == 0) {
            int n = 0;
            double v[MAXV];
            if (!parse_list(rest, &n, v) || n < 1 || n > 8) syntax++;
            c.ndim = n;
            for (int i = 0; i < n && i < 8; i++) c.sizes[i] = (int64_t)v[i];
        } else if (strcmp(key, "param") == 0) {
            if (!parse_list(rest, &c.n, c.param)) syntax++;
        } else if (strcmp(key, "grad") == 0 || strcmp(key, "after") == 0) {
            char *end;
            long k = strtol(rest, &end, 10);
            int n = -1;
            if (end == rest || k < 0 || k >= NSTEPS) {
                syntax++;
                continue;
            }
            if (key[0] == 'g') {
                char tok[8] = "";
                if (sscanf(end, "%7s", tok) == 1 && strcmp(tok, "none") == 0) {
                    c.has_grad[k] = false;
                    continue;
                }
                c.has_grad[k] = true;
                if (!parse_list(end, &n, c.grad[k]) || n != c.n) syntax++;
            } else if (!parse_list(end, &n, c.after[k]) || n != c.n) {
                syntax++;
            }
        } else if (strcmp(key, "end") == 0) {
            in_case = false;
            ncases++;
            run_case(&c, MFT_CONTIGUOUS, MFT_CONTIGUOUS);
            if (c.ndim == 4) {
                run_case(&c, MFT_CHANNELS_LAST, MFT_CHANNELS_LAST); /* flat fast path */
                run_case(&c, MFT_CHANNELS_LAST, MFT_CONTIGUOUS);    /* iterator path */
                run_case(&c, MFT_CONTIGUOUS, MFT_CHANNELS_LAST);
            }
        } else {
            syntax++;
        }
    }
    fclose(fp);
    CHECK_EQ_I(syntax, 0);
    CHECK_EQ_I(ncases, 22);
}

/* A parameter large enough for the parallel path, against a naive reference
 * of SGD with momentum and nesterov written here. */
static void test_large_parallel(void) {
    const int64_t n = 100003;
    mft_tensor *p = mft_empty(1, &n, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *g = mft_empty(1, &n, MFT_F32, MFT_CONTIGUOUS);
    float *pd = mft_tensor_data(p), *gd = mft_tensor_data(g);
    double *ref = malloc(sizeof(double) * (size_t)n), *buf = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        pd[i] = (float)((i % 97) - 48) / 64.0f;
        gd[i] = (float)((i * 7 % 31) - 15) / 32.0f;
        ref[i] = pd[i];
    }
    mft_tensor_set_requires_grad(p, true);
    mft_tensor_set_grad(p, g);
    mft_sgd_opts so = {0.125, 0.5, 0, 0.25, true};
    mft_optimizer *o = mft_sgd_new(1, &p, &so);
    CHECK(o != NULL);
    for (int step = 0; step < 3; step++) {
        CHECK(mft_optimizer_step(o) == MFT_OK);
        for (int64_t i = 0; i < n; i++) {
            double d = gd[i] + 0.25 * ref[i];
            buf[i] = step == 0 ? d : 0.5 * buf[i] + d;
            buf[i] = (float)buf[i];
            ref[i] = (float)(ref[i] - 0.125 * (d + 0.5 * buf[i]));
        }
    }
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++)
        if (fabs(pd[i] - ref[i]) > 1e-6 + 1e-6 * fabs(ref[i])) bad++;
    CHECK_EQ_I(bad, 0);
    free(ref);
    free(buf);
    mft_optimizer_free(o);
    mft_tensor_release(g);
    mft_tensor_release(p);
}

static void test_state_listing(void) {
    int64_t s4[4] = {2, 3, 2, 2}, s1 = 5;
    mft_tensor *a = mft_zeros(4, s4, MFT_F32, MFT_CHANNELS_LAST);
    mft_tensor *b = mft_zeros(1, &s1, MFT_F64, MFT_CONTIGUOUS);
    mft_tensor *ps[2] = {a, b};
    mft_sgd_opts plain = {0.1, 0, 0, 0, false}, mom = {0.1, 0.9, 0, 0, false};
    mft_adam_opts ad = {0.001, 0.9, 0.999, 1e-8, 0};
    mft_tensor *st[16];
    const char *nm[16];

    mft_optimizer *o = mft_sgd_new(2, ps, &plain);
    CHECK_EQ_I(mft_optimizer_state(o, NULL, NULL, 0), 3);
    CHECK_EQ_I(mft_optimizer_state(o, st, nm, 16), 3);
    CHECK(!strcmp(nm[0], "step") && !strcmp(nm[1], "0.step") && !strcmp(nm[2], "1.step"));
    CHECK_NEAR(mft_optimizer_lr(o), 0.1, 0);
    mft_optimizer_set_lr(o, 0.025);
    CHECK_NEAR(mft_optimizer_lr(o), 0.025, 0);
    mft_optimizer_free(o);

    o = mft_sgd_new(2, ps, &mom);
    CHECK_EQ_I(mft_optimizer_state(o, st, nm, 16), 5);
    CHECK(!strcmp(nm[2], "0.momentum_buffer") && !strcmp(nm[4], "1.momentum_buffer"));
    CHECK(mft_tensor_is_contiguous(st[2], MFT_CHANNELS_LAST));
    CHECK(mft_tensor_dtype(st[4]) == MFT_F64);
    /* the list is the same after a step; max truncates but counts all */
    mft_tensor *g = mft_ones(4, s4, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor_set_requires_grad(a, true);
    mft_tensor_set_grad(a, g);
    mft_tensor_release(g);
    mft_tensor *st2[16];
    const char *nm2[16];
    CHECK(mft_optimizer_step(o) == MFT_OK);
    CHECK_EQ_I(mft_optimizer_state(o, st2, nm2, 2), 5);
    CHECK(st2[0] == st[0] && st2[1] == st[1] && nm2[1] == nm[1]);
    /* momentum buffer = grad on the first step; b had no grad: untouched */
    CHECK_NEAR(mft_tensor_get(st[2], (int64_t[]){1, 2, 1, 0}), 1.0, 0);
    CHECK_NEAR(mft_tensor_get(st[4], (int64_t[]){3}), 0.0, 0);
    CHECK_NEAR(mft_tensor_get(st[3], (int64_t[]){0}), 0.0, 0); /* "1.step" */
    CHECK_NEAR(mft_tensor_get(a, (int64_t[]){1, 2, 1, 0}), -0.1, 1e-7);
    mft_optimizer_zero_grad(o);
    CHECK(mft_tensor_grad(a) == NULL);
    mft_optimizer_free(o);

    o = mft_adamw_new(2, ps, &ad);
    CHECK_EQ_I(mft_optimizer_state(o, st, nm, 16), 7);
    CHECK(!strcmp(nm[1], "0.step") && !strcmp(nm[2], "0.exp_avg") &&
          !strcmp(nm[3], "0.exp_avg_sq") && !strcmp(nm[6], "1.exp_avg_sq"));
    mft_optimizer_free(o);
    mft_tensor_release(a);
    mft_tensor_release(b);
}

static void test_step_lr(void) {
    /* StepLR(step_size=2, gamma=0.5) from 0.1 over epochs 0..5 */
    const double want[6] = {0.1, 0.1, 0.05, 0.05, 0.025, 0.025};
    for (int e = 0; e < 6; e++) CHECK_NEAR(mft_step_lr(0.1, 2, 0.5, e), want[e], 1e-15);
    CHECK_NEAR(mft_step_lr(0.01, 1, 0.1, 3), 1e-5, 1e-18);
    CHECK(isnan(mft_step_lr(0.1, 0, 0.5, 1)));
    CHECK_ERR(MFT_ERR_INVALID, "step_size");
}

static void test_errors(void) {
    int64_t s = 4;
    mft_tensor *p = mft_zeros(1, &s, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *ip = mft_zeros(1, &s, MFT_I32, MFT_CONTIGUOUS);
    mft_tensor *ps[2] = {p, p};
    mft_sgd_opts sgd = {0.1, 0.9, 0, 0, false};
    mft_adam_opts ad = {0.001, 0.9, 0.999, 1e-8, 0};

    CHECK(mft_sgd_new(1, NULL, &sgd) == NULL);
    CHECK_ERR(MFT_ERR_NULL, "params");
    CHECK(mft_sgd_new(1, ps, NULL) == NULL);
    CHECK_ERR(MFT_ERR_NULL, "opts");
    CHECK(mft_adam_new(0, ps, &ad) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "empty parameter list");
    CHECK(mft_sgd_new(2, ps, &sgd) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "same tensor");
    CHECK(mft_sgd_new(1, &ip, &sgd) == NULL);
    CHECK_ERR(MFT_ERR_DTYPE, "i32");
    mft_tensor *withnull[2] = {p, NULL};
    CHECK(mft_sgd_new(2, withnull, &sgd) == NULL);
    CHECK_ERR(MFT_ERR_NULL, "params[1]");

    mft_sgd_opts bad = sgd;
    bad.lr = -0.1;
    CHECK(mft_sgd_new(1, &p, &bad) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "learning rate -0.1");
    bad.lr = INFINITY;
    CHECK(mft_sgd_new(1, &p, &bad) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "learning rate inf");
    /* set_lr validates like the constructors and leaves the rate unchanged */
    mft_optimizer *okopt = mft_sgd_new(1, &p, &sgd);
    CHECK(mft_optimizer_set_lr(okopt, -1) == MFT_ERR_INVALID);
    CHECK_ERR(MFT_ERR_INVALID, "mft_optimizer_set_lr: invalid learning rate -1");
    CHECK(mft_optimizer_set_lr(okopt, NAN) == MFT_ERR_INVALID);
    CHECK_ERR(MFT_ERR_INVALID, "nan");
    CHECK(mft_optimizer_lr(okopt) == 0.1);
    CHECK(mft_optimizer_set_lr(okopt, 0.05) == MFT_OK && mft_optimizer_lr(okopt) == 0.05);
    CHECK(mft_optimizer_set_lr(NULL, 0.05) == MFT_ERR_NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_optimizer_set_lr");
    mft_optimizer_free(okopt);
    bad = sgd;
    bad.momentum = -0.5;
    CHECK(mft_sgd_new(1, &p, &bad) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "momentum value -0.5");
    bad = sgd;
    bad.weight_decay = -1;
    CHECK(mft_sgd_new(1, &p, &bad) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "weight_decay value -1");
    bad = sgd;
    bad.momentum = 0;
    bad.nesterov = true;
    CHECK(mft_sgd_new(1, &p, &bad) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "nesterov");
    bad = sgd;
    bad.dampening = 0.1;
    bad.nesterov = true;
    CHECK(mft_sgd_new(1, &p, &bad) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "zero dampening");

    mft_adam_opts ab = ad;
    ab.beta1 = 1.0;
    CHECK(mft_adam_new(1, &p, &ab) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "beta parameter at index 0: 1");
    ab = ad;
    ab.beta2 = -0.1;
    CHECK(mft_adamw_new(1, &p, &ab) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "beta parameter at index 1: -0.1");
    ab = ad;
    ab.eps = -1e-8;
    CHECK(mft_adam_new(1, &p, &ab) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "epsilon");
    ab = ad;
    ab.lr = -1;
    CHECK(mft_adamw_new(1, &p, &ab) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "learning rate -1");
    ab = ad;
    ab.weight_decay = -0.01;
    CHECK(mft_adam_new(1, &p, &ab) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "weight_decay");
    /* edge values PyTorch accepts */
    ab = ad;
    ab.beta1 = 0;
    ab.lr = 0;
    mft_optimizer *o = mft_adam_new(1, &p, &ab);
    CHECK(o != NULL);
    mft_optimizer_free(o);

    CHECK(mft_optimizer_step(NULL) == MFT_ERR_NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_optimizer_step");
    mft_optimizer_zero_grad(NULL);
    mft_optimizer_free(NULL);
    CHECK(isnan(mft_optimizer_lr(NULL)));
    CHECK_EQ_I(mft_optimizer_state(NULL, NULL, NULL, 0), 0);
    /* a step with no grads anywhere changes nothing */
    o = mft_sgd_new(1, &p, &sgd);
    int64_t v = mft_tensor_version(p);
    CHECK(mft_optimizer_step(o) == MFT_OK);
    CHECK_EQ_I(mft_tensor_version(p), v);
    mft_optimizer_free(o);
    mft_tensor_release(ip);
    mft_tensor_release(p);
}

/* Construction and steps under an open scope: the optimiser's state is not
 * owned by the scope. */
static void test_scope(void) {
    int64_t s = 3;
    mft_tensor *p = mft_ones(1, &s, MFT_F64, MFT_CONTIGUOUS);
    mft_adam_opts ad = {0.1, 0.9, 0.999, 1e-8, 0};
    mft_scope_begin();
    mft_optimizer *o = mft_adam_new(1, &p, &ad);
    mft_scope_end();
    mft_tensor *g = mft_full(1, &s, MFT_F64, MFT_CONTIGUOUS, 2.0);
    mft_tensor_set_requires_grad(p, true);
    mft_tensor_set_grad(p, g);
    mft_tensor_release(g);
    CHECK(mft_optimizer_step(o) == MFT_OK);
    /* first Adam step moves by lr * sign(g) (m/sqrt(v) = 1 after bias correction) */
    CHECK_NEAR(mft_tensor_get(p, (int64_t[]){2}), 0.9, 1e-9);
    mft_optimizer_free(o);
    mft_tensor_release(p);
}

int main(void) {
    RUN(test_golden);
    RUN(test_large_parallel);
    RUN(test_state_listing);
    RUN(test_step_lr);
    RUN(test_errors);
    RUN(test_scope);
    TEST_MAIN_END();
}
