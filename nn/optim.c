/* nn/optim.c — the optimisers of mft/nn.h (SGD with momentum, dampening,
 * nesterov and weight decay; Adam with L2 decay; AdamW with decoupled decay;
 * torch.optim 1.13 semantics), their checkpointable state, and the StepLR
 * schedule. Each parameter is updated by one fused pass over (param, grad,
 * state...): a flat mft__parallel_for over raw data when all operands are
 * dense with identical strides (the usual case), else the elementwise
 * iterator (mft__iter), so any layout mix works. State tensors follow their
 * parameter's layout: a parameter moved to another memory format after the
 * optimiser was built gets its state re-laid out in place (same objects) at
 * the next step (opt_relayout), so the fast path comes back. Arithmetic is in double; state and parameters are rounded to their
 * dtype on store. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "internal.h"
#include "mft/nn.h"

#define OPT_NAME_LEN 48
#define OPT_GRAIN 32768

typedef enum { OPT_SGD, OPT_ADAM, OPT_ADAMW } opt_kind;

struct mft_optimizer {
    opt_kind kind;
    double lr, momentum, dampening, weight_decay, beta1, beta2, eps;
    bool nesterov;
    int n;
    mft_tensor **params; /* retained */
    mft_tensor *step;    /* F64 [1] */
    mft_tensor **pstep;  /* n x F64 [1] */
    mft_tensor **s1;     /* momentum_buffer / exp_avg (n entries, NULL when unused) */
    mft_tensor **s2;     /* exp_avg_sq */
    int nstate;
    mft_tensor **state;  /* borrowed views of the above, in listing order */
    char (*names)[OPT_NAME_LEN];
};

/* ------------------------------------------------------------------ kernels */
typedef struct {
    int nops; /* operands: param, grad[, s1[, s2]] */
    bool first, nesterov, adamw;
    double lr, momentum, dampening, wd;
    double beta1, beta2, eps, step_size, bc2_sqrt, decay;
    mft__loop2d loop;
    char *base[4];
    size_t esize;
} opt_ctx;

/* The same SGD update over packed rows, branch-free inner loops the
 * compiler vectorises (the training step runs it on every parameter). */
#define OPT_SGD_PACKED(T, SUF)                                                                \
    static void sgd_packed_##SUF(const opt_ctx *c, T *restrict p, const T *restrict g,        \
                                 T *restrict b, int64_t n) {                                  \
        const double lr = c->lr, wd = c->wd, mom = c->momentum, damp = 1.0 - c->dampening;    \
        if (!b) {                                                                             \
            for (int64_t i = 0; i < n; i++) p[i] = (T)(p[i] - lr * (g[i] + wd * p[i]));       \
        } else if (c->first) {                                                                \
            for (int64_t i = 0; i < n; i++) {                                                 \
                const double d = g[i] + wd * p[i];                                            \
                const T bi = (T)d;                                                            \
                b[i] = bi;                                                                    \
                p[i] = (T)(p[i] - lr * (c->nesterov ? d + mom * (double)bi : (double)bi));    \
            }                                                                                 \
        } else if (c->nesterov) {                                                             \
            for (int64_t i = 0; i < n; i++) {                                                 \
                const double d = g[i] + wd * p[i];                                            \
                const T bi = (T)(mom * b[i] + damp * d);                                      \
                b[i] = bi;                                                                    \
                p[i] = (T)(p[i] - lr * (d + mom * (double)bi));                               \
            }                                                                                 \
        } else {                                                                              \
            for (int64_t i = 0; i < n; i++) {                                                 \
                const double d = g[i] + wd * p[i];                                            \
                const T bi = (T)(mom * b[i] + damp * d);                                      \
                b[i] = bi;                                                                    \
                p[i] = (T)(p[i] - lr * (double)bi);                                           \
            }                                                                                 \
        }                                                                                     \
    }
OPT_SGD_PACKED(float, f32)
OPT_SGD_PACKED(double, f64)

#define OPT_LOOPS(T, SUF)                                                                     \
    static void sgd_loop_##SUF(void *vc, char **data, const int64_t *st, int64_t n0,          \
                               int64_t n1) {                                                  \
        const opt_ctx *c = vc;                                                                \
        const int k = c->nops;                                                                \
        for (int64_t j = 0; j < n1; j++) {                                                    \
            char *pp = data[0] + j * st[k], *gp = data[1] + j * st[k + 1];                    \
            char *bp = k > 2 ? data[2] + j * st[k + 2] : NULL;                                \
            if (st[0] == (int64_t)sizeof(T) && st[1] == (int64_t)sizeof(T) &&                 \
                (!bp || st[2] == (int64_t)sizeof(T))) {                                       \
                sgd_packed_##SUF(c, (T *)(void *)pp, (const T *)(const void *)gp,             \
                                 (T *)(void *)bp, n0);                                        \
                continue;                                                                     \
            }                                                                                 \
            for (int64_t i = 0; i < n0; i++) {                                                \
                T *pv = (T *)(void *)(pp + i * st[0]);                                        \
                const double p = *pv;                                                         \
                double d = *(const T *)(const void *)(gp + i * st[1]) + c->wd * p;            \
                if (bp) {                                                                     \
                    T *bv = (T *)(void *)(bp + i * st[2]);                                    \
                    const T b = c->first ? (T)d                                               \
                                         : (T)(c->momentum * *bv + (1.0 - c->dampening) * d); \
                    *bv = b;                                                                  \
                    d = c->nesterov ? d + c->momentum * (double)b : (double)b;                \
                }                                                                             \
                *pv = (T)(p - c->lr * d);                                                     \
            }                                                                                 \
        }                                                                                     \
    }                                                                                         \
    static void adam_loop_##SUF(void *vc, char **data, const int64_t *st, int64_t n0,         \
                                int64_t n1) {                                                 \
        const opt_ctx *c = vc;                                                                \
        for (int64_t j = 0; j < n1; j++) {                                                    \
            char *pp = data[0] + j * st[4], *gp = data[1] + j * st[5];                        \
            char *mp = data[2] + j * st[6], *vp = data[3] + j * st[7];                        \
            for (int64_t i = 0; i < n0; i++) {                                                \
                T *pv = (T *)(void *)(pp + i * st[0]);                                        \
                T *mv = (T *)(void *)(mp + i * st[2]);                                        \
                T *vv = (T *)(void *)(vp + i * st[3]);                                        \
                double p = *pv, g = *(const T *)(const void *)(gp + i * st[1]);               \
                if (c->adamw) p = (double)(T)(p * c->decay);                                  \
                else g += c->wd * p;                                                          \
                const T m = (T)(c->beta1 * *mv + (1.0 - c->beta1) * g);                       \
                const T v = (T)(c->beta2 * *vv + (1.0 - c->beta2) * g * g);                   \
                *mv = m;                                                                      \
                *vv = v;                                                                      \
                const double denom = sqrt((double)v) / c->bc2_sqrt + c->eps;                  \
                *pv = (T)(p - c->step_size * (double)m / denom);                              \
            }                                                                                 \
        }                                                                                     \
    }
OPT_LOOPS(float, f32)
OPT_LOOPS(double, f64)

/* Flat range of dense operands with identical strides. */
static void opt_flat_range(void *vc, int64_t begin, int64_t end) {
    const opt_ctx *c = vc;
    char *data[4];
    int64_t st[8] = {0};
    for (int k = 0; k < c->nops; k++) {
        data[k] = c->base[k] + (size_t)begin * c->esize;
        st[k] = (int64_t)c->esize;
    }
    c->loop((void *)c, data, st, end - begin, 1);
}

static bool opt_same_dense(int nops, mft_tensor *const *ops) {
    for (int k = 0; k < nops; k++) {
        if (!(ops[k]->flags & MFT__F_DENSE)) return false;
        if (k > 0 && memcmp(ops[k]->strides, ops[0]->strides,
                            (size_t)ops[0]->ndim * sizeof(int64_t)))
            return false;
    }
    return true;
}

/* Runs c->loop over ops (all of ops[0]'s sizes). */
static mft_status opt_run(const char *fn, opt_ctx *c, mft_tensor *const *ops) {
    mft_tensor *p = ops[0];
    if (p->numel == 0) return MFT_OK;
    uint64_t t0 = mft__kernel_begin();
    const char *kernel = "optimizer.flat";
    if (opt_same_dense(c->nops, ops)) {
        c->esize = mft__elem_size(p->dtype);
        for (int k = 0; k < c->nops; k++) c->base[k] = mft__tensor_ptr(ops[k]);
        mft__parallel_for(0, p->numel, OPT_GRAIN, opt_flat_range, c);
    } else {
        mft__iter it;
        if (mft__iter_build(fn, &it, c->nops, ops, p->ndim, p->sizes) != MFT_OK)
            return mft_last_error();
        mft__iter_run(&it, c->loop, c, OPT_GRAIN);
        kernel = "optimizer.iter";
    }
    /* operands: the grad and the state tensors are read, the parameter
     * (and the state) written */
    const mft_tensor *in[3] = {ops[1], ops[2], ops[3]}, *out[1] = {p};
    mft__kernel_end(t0, &(mft__kernel_info){c->nops == 4 ? "adam_step" : "sgd_step", kernel,
                                            MFT_FORMAT_COUNT, MFT_FORMAT_COUNT, p->dtype,
                                            c->nops - 1, 1, in, out, 0, false});
    return MFT_OK;
}

/* A blocked parameter (docs/spec.md §7.6) is updated on its plain pieces
 * (Note [Plain pieces], tensor/internal.h): param, grad and state are cut
 * into the same plain boxes and each box runs the update above, so only
 * the elements are visited and the pad lanes stay zero whatever the update
 * makes of a zero (Adam with eps 0 would turn one into NaN). The state
 * shares the parameter's blocks (zeros_like PRESERVE); a grad in another
 * blocking is first copied into the parameter's. The pieces of every
 * blocked parameter are made before the first parameter is updated, so a
 * step that fails (out of memory) changes nothing. */
#define OPT_MAX_PIECES 16 /* 2^k boxes for k blocked dims, k <= MFT_MAX_BLOCKS */
typedef struct opt_blk {
    int nops, npieces;
    bool overflow;
    mft_tensor *piece[OPT_MAX_PIECES][4]; /* retained headers */
    mft_tensor *gcopy;                    /* the grad in the parameter's blocks, or NULL */
} opt_blk;

static void opt_collect(void *ctx, mft_tensor *const *p) {
    opt_blk *b = ctx;
    if (b->npieces == OPT_MAX_PIECES) {
        b->overflow = true;
        return;
    }
    for (int k = 0; k < b->nops; k++) b->piece[b->npieces][k] = mft_tensor_retain(p[k]);
    b->npieces++;
}

static void opt_blk_free(opt_blk *b) {
    for (int j = 0; j < b->npieces; j++)
        for (int k = 0; k < b->nops; k++) mft_tensor_release(b->piece[j][k]);
    mft_tensor_release(b->gcopy);
    memset(b, 0, sizeof *b);
}

/* Cuts the nops operands of ops (param, grad, state) into b. */
static mft_status opt_blk_prepare(const char *fn, int nops, mft_tensor *const *ops, opt_blk *b) {
    memset(b, 0, sizeof *b);
    b->nops = nops;
    mft_tensor *cut[4] = {ops[0], ops[1], ops[2], ops[3]};
    const mft_tensor *const *cops = (const mft_tensor *const *)cut;
    mft_status st = MFT_OK;
    if (!mft__blk_can_cut(nops, cops)) {
        mft__scope_suspend();
        b->gcopy = mft_empty_like(ops[0], MFT_PRESERVE);
        st = b->gcopy ? mft_copy_(b->gcopy, ops[1]) : mft_last_error();
        mft__scope_resume();
        cut[1] = b->gcopy;
        if (st == MFT_OK && !mft__blk_can_cut(nops, cops)) {
            char a[MFT__DIMS_BUF];
            mft__set_error(MFT_ERR_FORMAT,
                           "%s: the optimizer state of a blocked parameter (sizes %s, format %s) "
                           "is not in the parameter's blocks",
                           fn, mft__fmt_dims(a, sizeof a, ops[0]->ndim, ops[0]->sizes),
                           mft_format_name(ops[0]->tag));
            st = MFT_ERR_FORMAT;
        }
    }
    if (st == MFT_OK) st = mft__blk_foreach(fn, nops, cops, opt_collect, b);
    if (st == MFT_OK && b->overflow) {
        mft__set_error(MFT_ERR_INTERNAL, "%s: a blocked parameter cut into more than %d pieces",
                       fn, OPT_MAX_PIECES);
        st = MFT_ERR_INTERNAL;
    }
    if (st != MFT_OK) opt_blk_free(b);
    return st;
}

static mft_status opt_run_blocked(const char *fn, opt_ctx *c, const opt_blk *b) {
    mft_status st = MFT_OK;
    for (int j = 0; j < b->npieces && st == MFT_OK; j++) st = opt_run(fn, c, b->piece[j]);
    return st;
}

/* ------------------------------------------------------------------ construction */
void mft_optimizer_free(mft_optimizer *o) {
    if (!o) return;
    for (int i = 0; i < o->n; i++) {
        if (o->params) mft_tensor_release(o->params[i]);
        if (o->pstep) mft_tensor_release(o->pstep[i]);
        if (o->s1) mft_tensor_release(o->s1[i]);
        if (o->s2) mft_tensor_release(o->s2[i]);
    }
    mft_tensor_release(o->step);
    mft__free(o->params);
    mft__free(o->pstep);
    mft__free(o->s1);
    mft__free(o->s2);
    mft__free(o->state);
    mft__free(o->names);
    mft__free(o);
}

static void *opt_calloc(const char *fn, size_t count, size_t size, bool *ok) {
    void *p = mft__alloc_or_err(fn, count * size, 16);
    if (p) memset(p, 0, count * size);
    else *ok = false;
    return p;
}

static void opt_add_state(mft_optimizer *o, mft_tensor *t, const char *fmt, int i,
                          const char *what) {
    o->state[o->nstate] = t;
    if (i < 0) snprintf(o->names[o->nstate], OPT_NAME_LEN, "%s", what);
    else snprintf(o->names[o->nstate], OPT_NAME_LEN, fmt, i, what);
    o->nstate++;
}

/* The parameter list every optimiser checks before allocating anything:
 * non-empty, no NULL (NULL propagation keeps an earlier error), floating,
 * no tensor twice. */
static bool opt_check_params(const char *fn, int n, mft_tensor *const *params) {
    if (!params) {
        mft__set_error(MFT_ERR_NULL, "%s: argument 'params' is NULL", fn);
        return false;
    }
    if (n < 1) {
        mft__set_error(MFT_ERR_INVALID, "%s: optimizer got an empty parameter list (n = %d)", fn,
                       n);
        return false;
    }
    for (int i = 0; i < n; i++) {
        if (!params[i]) {
            if (mft_last_error() == MFT_OK)
                mft__set_error(MFT_ERR_NULL, "%s: params[%d] is NULL", fn, i);
            return false;
        }
        if (params[i]->dtype != MFT_F32 && params[i]->dtype != MFT_F64) {
            mft__set_error(MFT_ERR_DTYPE, "%s: params[%d] has dtype %s; only f32/f64 can be "
                           "optimised", fn, i, mft_dtype_name(params[i]->dtype));
            return false;
        }
        for (int j = 0; j < i; j++)
            if (params[j] == params[i]) {
                mft__set_error(MFT_ERR_INVALID, "%s: params[%d] and params[%d] are the same "
                               "tensor", fn, j, i);
                return false;
            }
    }
    return true;
}

/* Options already validated and in o, params checked by opt_check_params;
 * builds params and state (o is freed on failure). */
static mft_optimizer *opt_build(const char *fn, mft_optimizer *o, int n,
                                mft_tensor *const *params) {
    bool ok = true;
    bool has1 = o->kind != OPT_SGD || o->momentum != 0, has2 = o->kind != OPT_SGD;
    int per = 1 + (has1 ? 1 : 0) + (has2 ? 1 : 0);
    o->params = opt_calloc(fn, (size_t)n, sizeof *o->params, &ok);
    o->pstep = opt_calloc(fn, (size_t)n, sizeof *o->pstep, &ok);
    o->s1 = opt_calloc(fn, (size_t)n, sizeof *o->s1, &ok);
    o->s2 = opt_calloc(fn, (size_t)n, sizeof *o->s2, &ok);
    o->state = opt_calloc(fn, (size_t)(1 + per * n), sizeof *o->state, &ok);
    o->names = opt_calloc(fn, (size_t)(1 + per * n), sizeof *o->names, &ok);
    if (!ok) goto fail;
    o->n = n;
    int64_t one = 1;
    mft__scope_suspend();
    o->step = mft_zeros(1, &one, MFT_F64, MFT_CONTIGUOUS);
    ok = o->step != NULL;
    if (ok) opt_add_state(o, o->step, NULL, -1, "step");
    for (int i = 0; i < n && ok; i++) {
        o->params[i] = mft_tensor_retain(params[i]);
        o->pstep[i] = mft_zeros(1, &one, MFT_F64, MFT_CONTIGUOUS);
        if (has1) o->s1[i] = mft_zeros_like(params[i], MFT_PRESERVE);
        if (has2) o->s2[i] = mft_zeros_like(params[i], MFT_PRESERVE);
        ok = o->pstep[i] && (!has1 || o->s1[i]) && (!has2 || o->s2[i]);
        if (!ok) break;
        opt_add_state(o, o->pstep[i], "%d.%s", i, "step");
        if (o->kind == OPT_SGD && has1) opt_add_state(o, o->s1[i], "%d.%s", i, "momentum_buffer");
        if (has2) {
            opt_add_state(o, o->s1[i], "%d.%s", i, "exp_avg");
            opt_add_state(o, o->s2[i], "%d.%s", i, "exp_avg_sq");
        }
    }
    mft__scope_resume();
    if (!ok) {
        mft__relabel_error(fn);
        goto fail;
    }
    return o;
fail:
    mft_optimizer_free(o);
    return NULL;
}

/* A learning rate is finite and >= 0 (NaN and inf would poison every
 * parameter at the next step). */
static bool opt_lr_ok(const char *fn, double lr) {
    if (lr >= 0 && isfinite(lr)) return true;
    mft__set_error(MFT_ERR_INVALID, "%s: invalid learning rate %g (must be finite and >= 0)", fn,
                   lr);
    return false;
}

static mft_optimizer *opt_alloc(const char *fn, opt_kind kind) {
    mft_optimizer *o = mft__alloc_or_err(fn, sizeof *o, 16);
    if (o) {
        memset(o, 0, sizeof *o);
        o->kind = kind;
    }
    return o;
}

mft_optimizer *mft_sgd_new(int n, mft_tensor *const *params, const mft_sgd_opts *opts) {
    static const char fn[] = "mft_sgd_new";
    if (!opts) {
        mft__set_error(MFT_ERR_NULL, "%s: argument 'opts' is NULL", fn);
        return NULL;
    }
    if (!opt_lr_ok(fn, opts->lr)) {
        return NULL;
    }
    if (!(opts->momentum >= 0 && isfinite(opts->momentum))) {
        mft__set_error(MFT_ERR_INVALID, "%s: invalid momentum value %g (must be finite and >= 0)", fn,
                       opts->momentum);
        return NULL;
    }
    if (!(opts->weight_decay >= 0 && isfinite(opts->weight_decay))) {
        mft__set_error(MFT_ERR_INVALID, "%s: invalid weight_decay value %g (must be finite and >= 0)", fn,
                       opts->weight_decay);
        return NULL;
    }
    if (!isfinite(opts->dampening)) {
        mft__set_error(MFT_ERR_INVALID, "%s: invalid dampening value %g", fn, opts->dampening);
        return NULL;
    }
    if (opts->nesterov && (opts->momentum <= 0 || opts->dampening != 0)) {
        mft__set_error(MFT_ERR_INVALID,
                       "%s: nesterov momentum requires a momentum and zero dampening "
                       "(momentum %g, dampening %g)",
                       fn, opts->momentum, opts->dampening);
        return NULL;
    }
    if (!opt_check_params(fn, n, params)) return NULL;
    mft_optimizer *o = opt_alloc(fn, OPT_SGD);
    if (!o) return NULL;
    o->lr = opts->lr;
    o->momentum = opts->momentum;
    o->dampening = opts->dampening;
    o->weight_decay = opts->weight_decay;
    o->nesterov = opts->nesterov;
    return opt_build(fn, o, n, params);
}

static mft_optimizer *adam_new(const char *fn, opt_kind kind, int n, mft_tensor *const *params,
                               const mft_adam_opts *opts) {
    if (!opts) {
        mft__set_error(MFT_ERR_NULL, "%s: argument 'opts' is NULL", fn);
        return NULL;
    }
    if (!opt_lr_ok(fn, opts->lr)) {
        return NULL;
    }
    if (!(opts->eps >= 0 && isfinite(opts->eps))) {
        mft__set_error(MFT_ERR_INVALID, "%s: invalid epsilon value %g (must be finite and >= 0)", fn,
                       opts->eps);
        return NULL;
    }
    if (!(opts->beta1 >= 0 && opts->beta1 < 1)) {
        mft__set_error(MFT_ERR_INVALID, "%s: invalid beta parameter at index 0: %g (must be in "
                       "[0, 1))", fn, opts->beta1);
        return NULL;
    }
    if (!(opts->beta2 >= 0 && opts->beta2 < 1)) {
        mft__set_error(MFT_ERR_INVALID, "%s: invalid beta parameter at index 1: %g (must be in "
                       "[0, 1))", fn, opts->beta2);
        return NULL;
    }
    if (!(opts->weight_decay >= 0 && isfinite(opts->weight_decay))) {
        mft__set_error(MFT_ERR_INVALID, "%s: invalid weight_decay value %g (must be finite and >= 0)", fn,
                       opts->weight_decay);
        return NULL;
    }
    if (!opt_check_params(fn, n, params)) return NULL;
    mft_optimizer *o = opt_alloc(fn, kind);
    if (!o) return NULL;
    o->lr = opts->lr;
    o->beta1 = opts->beta1;
    o->beta2 = opts->beta2;
    o->eps = opts->eps;
    o->weight_decay = opts->weight_decay;
    return opt_build(fn, o, n, params);
}

mft_optimizer *mft_adam_new(int n, mft_tensor *const *params, const mft_adam_opts *o) {
    return adam_new("mft_adam_new", OPT_ADAM, n, params, o);
}

mft_optimizer *mft_adamw_new(int n, mft_tensor *const *params, const mft_adam_opts *o) {
    return adam_new("mft_adamw_new", OPT_ADAMW, n, params, o);
}

/* ------------------------------------------------------------------ step */
/* Re-lays state tensor s out in p's (dense) strides IN PLACE (the object
 * stays: checkpoint code holds the pointer), so a parameter moved to another
 * memory format after construction gets its flat fast path back. */
static mft_status opt_relayout(const char *fn, mft_tensor *s, const mft_tensor *p) {
    if (!s || !(p->flags & MFT__F_DENSE) ||
        !memcmp(s->strides, p->strides, (size_t)p->ndim * sizeof(int64_t)))
        return MFT_OK;
    mft__scope_suspend();
    mft_tensor *tmp = mft_empty_strided(p->ndim, p->sizes, p->strides, s->dtype);
    mft_status st = tmp ? mft_copy_(tmp, s) : mft_last_error();
    mft__scope_resume();
    if (st == MFT_OK) {
        mft__storage_retain(tmp->storage);
        mft__storage_release(s->storage);
        s->storage = tmp->storage;
        s->offset = tmp->offset;
        memcpy(s->strides, tmp->strides, sizeof s->strides);
        mft__tensor_refresh(s);
        mft__tensor_declare(s, p->tag);
    } else {
        mft__relabel_error(fn);
    }
    mft_tensor_release(tmp);
    return st;
}

static void opt_bump(mft_tensor *t) {
    if (t) atomic_fetch_add(&t->storage->version, 1);
}

mft_status mft_optimizer_step(mft_optimizer *o) {
    static const char fn[] = "mft_optimizer_step";
    if (!o) {
        mft__set_error(MFT_ERR_NULL, "%s: argument 'o' is NULL", fn);
        return MFT_ERR_NULL;
    }
    /* validate every grad first: on error nothing is updated */
    for (int i = 0; i < o->n; i++) {
        const mft_tensor *p = o->params[i], *g = mft_tensor_grad(p);
        if (!g) continue;
        if (g->dtype != p->dtype || g->ndim != p->ndim ||
            memcmp(g->sizes, p->sizes, (size_t)p->ndim * sizeof(int64_t))) {
            char a[MFT__DIMS_BUF], b[MFT__DIMS_BUF];
            mft__set_error(MFT_ERR_SHAPE, "%s: grad of parameter %d is %s%s, parameter is %s%s",
                           fn, i, mft_dtype_name(g->dtype),
                           mft__fmt_dims(a, sizeof a, g->ndim, g->sizes),
                           mft_dtype_name(p->dtype),
                           mft__fmt_dims(b, sizeof b, p->ndim, p->sizes));
            return MFT_ERR_SHAPE;
        }
    }
    for (int i = 0; i < o->n; i++) {
        if (!mft_tensor_grad(o->params[i])) continue;
        if (opt_relayout(fn, o->s1[i], o->params[i]) != MFT_OK ||
            opt_relayout(fn, o->s2[i], o->params[i]) != MFT_OK)
            return mft_last_error();
    }
    /* the pieces of the blocked parameters, all made before any update */
    opt_blk *blk = NULL;
    for (int i = 0; i < o->n; i++) {
        const mft_tensor *p = o->params[i], *g = mft_tensor_grad(p);
        if (!g || !(mft__is_blocked(p) || mft__is_blocked(g) || mft__is_blocked(o->s1[i]) ||
                    mft__is_blocked(o->s2[i])))
            continue;
        if (!blk) {
            blk = mft__alloc_or_err(fn, (size_t)o->n * sizeof *blk, _Alignof(opt_blk));
            if (!blk) return MFT_ERR_NOMEM;
            memset(blk, 0, (size_t)o->n * sizeof *blk);
        }
        mft_tensor *ops[4] = {o->params[i], (mft_tensor *)g, o->s1[i], o->s2[i]};
        const int nops = o->kind != OPT_SGD ? 4 : o->s1[i] ? 3 : 2;
        const mft_status bst = opt_blk_prepare(fn, nops, ops, &blk[i]);
        if (bst != MFT_OK) {
            for (int j = 0; j < i; j++) opt_blk_free(&blk[j]);
            mft__free(blk);
            return bst;
        }
    }
    bool prev = mft_set_grad_enabled(false);
    mft_status st = MFT_OK;
    for (int i = 0; i < o->n && st == MFT_OK; i++) {
        mft_tensor *p = o->params[i], *g = mft_tensor_grad(p);
        if (!g) continue;
        double *pstep = mft_tensor_data(o->pstep[i]);
        bool f32 = p->dtype == MFT_F32;
        opt_ctx c;
        memset(&c, 0, sizeof c);
        c.lr = o->lr;
        c.wd = o->weight_decay;
        c.first = *pstep == 0;
        mft_tensor *ops[4] = {p, g, o->s1[i], o->s2[i]};
        if (o->kind == OPT_SGD) {
            c.nops = o->s1[i] ? 3 : 2;
            c.momentum = o->momentum;
            c.dampening = o->dampening;
            c.nesterov = o->nesterov;
            c.loop = f32 ? sgd_loop_f32 : sgd_loop_f64;
        } else {
            double t = *pstep + 1;
            c.nops = 4;
            c.adamw = o->kind == OPT_ADAMW;
            c.beta1 = o->beta1;
            c.beta2 = o->beta2;
            c.eps = o->eps;
            c.decay = 1.0 - o->lr * o->weight_decay;
            c.step_size = o->lr / (1.0 - pow(o->beta1, t));
            c.bc2_sqrt = sqrt(1.0 - pow(o->beta2, t));
            c.loop = f32 ? adam_loop_f32 : adam_loop_f64;
        }
        st = blk && blk[i].npieces ? opt_run_blocked(fn, &c, &blk[i]) : opt_run(fn, &c, ops);
        if (st != MFT_OK) break;
        *pstep += 1;
        opt_bump(p);
        opt_bump(o->pstep[i]);
        opt_bump(o->s1[i]);
        opt_bump(o->s2[i]);
    }
    mft_set_grad_enabled(prev);
    if (blk) {
        for (int i = 0; i < o->n; i++) opt_blk_free(&blk[i]);
        mft__free(blk);
    }
    if (st == MFT_OK) {
        *(double *)mft_tensor_data(o->step) += 1;
        opt_bump(o->step);
    }
    return st;
}

void mft_optimizer_zero_grad(mft_optimizer *o) {
    if (!o) return;
    for (int i = 0; i < o->n; i++) mft_tensor_zero_grad(o->params[i]);
}

double mft_optimizer_lr(const mft_optimizer *o) { return o ? o->lr : NAN; }

mft_status mft_optimizer_set_lr(mft_optimizer *o, double lr) {
    static const char fn[] = "mft_optimizer_set_lr";
    if (!o) {
        mft__null_arg(fn, "o");
        return MFT_ERR_NULL;
    }
    if (!opt_lr_ok(fn, lr)) return MFT_ERR_INVALID;
    o->lr = lr;
    return MFT_OK;
}

int mft_optimizer_state(const mft_optimizer *o, mft_tensor **state, const char **names,
                        int max) {
    if (!o) return 0;
    for (int i = 0; i < o->nstate && i < max; i++) {
        if (state) state[i] = o->state[i];
        if (names) names[i] = o->names[i];
    }
    return o->nstate;
}

double mft_step_lr(double base_lr, int64_t step_size, double gamma, int64_t epoch) {
    if (step_size < 1 || epoch < 0) {
        mft__set_error(MFT_ERR_INVALID, "mft_step_lr: step_size = %lld must be >= 1 and epoch = "
                       "%lld >= 0", (long long)step_size, (long long)epoch);
        return NAN;
    }
    return base_lr * pow(gamma, (double)(epoch / step_size));
}
