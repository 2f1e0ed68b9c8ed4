/* ops/norm/batch_norm.c — batch_norm (mft/cnn.h): its fast F32 kernels
 * forward, the running-statistics update, the entry points and autograd
 * node, and the backward's entry point and kernels (the fast backward
 * itself is shared with group_norm: ops/norm/channel_backward.c; the
 * reference kernels, F64 included, are in ops/norm/reference.c; the kernel
 * interface in ops/norm/norm_internal.h).
 *
 * Fast kernels, forward, F32: CONTIGUOUS ([N, C, S]: each (n, c) plane is
 * one contiguous run) and CHANNELS_LAST ([N*S rows, C]: per-channel sums
 * over blocks of NORM_ROWS rows with vectorisable loops over C, float over
 * sub-blocks of NORM_SUB rows then double: nhwc_colsum). Partial sums go
 * to fixed work items ((n, c) planes, or row blocks) and are combined in
 * order, so the result does not depend on the thread count; the
 * normalisation writes each element from one thread with one formula.
 * NCHW16C (packed nChw16c, forward and backward) lives in
 * ops/norm/batch_norm_blocked.c; the entry points below send a packed
 * nChw16c F32 x there (bn_native16) and every other blocked x through the
 * counted fallback.
 *
 * Validation beyond mft/cnn.h (and ops/norm/common.c): weight / bias /
 * running stats must have x's dtype; eps >= 0; training needs more than one
 * value per channel (N * spatial > 1) (PyTorch 1.13's check). An empty
 * input gives an empty result and leaves the running stats alone. Running
 * stats are written in place only on success (version bumped), once the
 * result is registered and the tape node recorded (bn_pending). The _ex
 * variant also returns the statistics (x's dtype): mean and 1 / sqrt(var +
 * eps) (eval: the running ones).
 *
 * Autograd (the node of ops/norm/common.c): the running statistics are
 * never inputs: they get no gradient, backward never touches them, and a
 * running statistic that requires grad is refused in training while the
 * tape records (it is written in place). The node saves the batch
 * statistics in training, copies of the running ones in eval, so later
 * running-stat updates cannot make the node stale. */
#include <string.h>
#include "autograd_internal.h"
#include "norm_internal.h"
#include "blocked_outputs.h"

/* ---------------------------------------------------------------- fast batch_norm F32 */
typedef struct bn_job {
    const float *x;
    float *y;
    int64_t N, C, S, rows, nblk;
    double *part;           /* partial sums */
    const double *mean;     /* pass 2 */
    const float *sc, *sh, *mf; /* normalisation: y = (x - mf) * sc + sh */
} bn_job;

/* NCHW: work item = (n, c) plane; part[n*C + c]. */
static void bn_nchw_sum0(void *v, int64_t b, int64_t e) {
    bn_job *j = v;
    for (int64_t it = b; it < e; it++) j->part[it] = norm_sum(j->x + it * j->S, j->S, 0.0, 0);
}
static void bn_nchw_sum1(void *v, int64_t b, int64_t e) {
    bn_job *j = v;
    for (int64_t it = b; it < e; it++)
        j->part[it] = norm_sum(j->x + it * j->S, j->S, j->mean[it % j->C], 1);
}
static void bn_nchw_norm(void *v, int64_t b, int64_t e) {
    bn_job *j = v;
    for (int64_t it = b; it < e; it++) {
        const float sc = j->sc[it % j->C], sh = j->sh[it % j->C], m = j->mf[it % j->C];
        const float *restrict x = j->x + it * j->S;
        float *restrict y = j->y + it * j->S;
        for (int64_t i = 0; i < j->S; i++) y[i] = (x[i] - m) * sc + sh;
    }
}

/* Per-channel sums over `rows` rows of C floats (row stride C) into acc[C]:
 * m NULL: sum of x; else sum of (x - m[c])^2. Chunks of NORM_CCH channels;
 * sub-blocks of NORM_SUB rows summed in float (vectorised over channels),
 * then added to the double acc, in row order. */
static void nhwc_colsum(const float *x, int64_t rows, int64_t C, const double *m, double *acc) {
    for (int64_t c0 = 0; c0 < C; c0 += NORM_CCH) {
        const int64_t w = C - c0 < NORM_CCH ? C - c0 : NORM_CCH;
        float mf[NORM_CCH], fa[NORM_CCH];
        for (int64_t c = 0; c < w; c++) {
            mf[c] = m ? (float)m[c0 + c] : 0.0f;
            acc[c0 + c] = 0.0;
        }
        for (int64_t s0 = 0; s0 < rows; s0 += NORM_SUB) {
            const int64_t s1 = s0 + NORM_SUB < rows ? s0 + NORM_SUB : rows;
            for (int64_t c = 0; c < w; c++) fa[c] = 0.0f;
            for (int64_t r = s0; r < s1; r++) {
                const float *restrict xr = x + r * C + c0;
                if (m)
                    for (int64_t c = 0; c < w; c++) {
                        const float d = xr[c] - mf[c];
                        fa[c] += d * d;
                    }
                else
                    for (int64_t c = 0; c < w; c++) fa[c] += xr[c];
            }
            for (int64_t c = 0; c < w; c++) acc[c0 + c] += (double)fa[c];
        }
    }
}

/* NHWC: work item = block of NORM_ROWS rows; part[blk*C + c]. */
static void bn_nhwc_sum(bn_job *j, int64_t b, int64_t e, int pass) {
    const int64_t C = j->C;
    for (int64_t blk = b; blk < e; blk++) {
        const int64_t r0 = blk * NORM_ROWS, r1 = r0 + NORM_ROWS < j->rows ? r0 + NORM_ROWS : j->rows;
        nhwc_colsum(j->x + r0 * C, r1 - r0, C, pass ? j->mean : NULL, j->part + blk * C);
    }
}
static void bn_nhwc_sum0(void *v, int64_t b, int64_t e) { bn_nhwc_sum(v, b, e, 0); }
static void bn_nhwc_sum1(void *v, int64_t b, int64_t e) { bn_nhwc_sum(v, b, e, 1); }
static void bn_nhwc_norm(void *v, int64_t b, int64_t e) {
    bn_job *j = v;
    const int64_t C = j->C;
    for (int64_t r = b; r < e; r++) {
        const float *restrict x = j->x + r * C;
        float *restrict y = j->y + r * C;
        const float *restrict sc = j->sc, *restrict sh = j->sh, *restrict m = j->mf;
        for (int64_t c = 0; c < C; c++) y[c] = (x[c] - m[c]) * sc[c] + sh[c];
    }
}

/* cl: x and y are packed CHANNELS_LAST (rank 3-5), else CONTIGUOUS. */
static void batch_norm_fast_run(const mft_kernel_args *a, bool cl) {
    const mft__norm_kparams *kp = a->params;
    const mft_tensor *x = a->inputs[0];
    mft_tensor *y = a->outputs[0];
    if (x->numel == 0) return;
    bn_job j;
    j.x = (const float *)(const void *)mft__tensor_ptr(x);
    j.y = (float *)(void *)mft__tensor_ptr(y);
    j.N = x->sizes[0];
    j.C = x->sizes[1];
    j.S = mft__dims_prod(x, 2, x->ndim);
    j.rows = j.N * j.S;
    j.nblk = (j.rows + NORM_ROWS - 1) / NORM_ROWS;
    const int64_t C = j.C;
    float *scf = (float *)(void *)kp->scratch; /* 3*C floats fit in 2*C doubles */
    float *shf = scf + C, *mf = scf + 2 * C;
    j.part = kp->scratch + 2 * C;
    j.sc = scf;
    j.sh = shf;
    j.mf = mf;
    j.mean = kp->mean;
    if (kp->p.training) {
        for (int pass = 0; pass < 2; pass++) {
            double *out = pass == 0 ? kp->mean : kp->var;
            if (cl) {
                mft__parallel_for(0, j.nblk, norm_grain(NORM_ROWS * C), pass ? bn_nhwc_sum1 : bn_nhwc_sum0,
                                  &j);
                for (int64_t c = 0; c < C; c++) out[c] = 0.0;
                for (int64_t b = 0; b < j.nblk; b++)
                    for (int64_t c = 0; c < C; c++) out[c] += j.part[b * C + c];
            } else {
                mft__parallel_for(0, j.N * C, norm_grain(j.S), pass ? bn_nchw_sum1 : bn_nchw_sum0,
                                  &j);
                for (int64_t c = 0; c < C; c++) {
                    double s = 0.0;
                    for (int64_t n = 0; n < j.N; n++) s += j.part[n * C + c];
                    out[c] = s;
                }
            }
            for (int64_t c = 0; c < C; c++) out[c] /= (double)j.rows;
        }
    }
    /* y = (x - mean) * (w * invstd) + b in float: subtracting the mean
     * first keeps degenerate (zero-variance) channels exact, where the
     * folded x * scale + shift form loses ~|mean| * invstd * 2^-24 */
    for (int64_t c = 0; c < C; c++) {
        const double w = norm_ld_F32(kp->weight, c, 1.0);
        scf[c] = (float)(w / sqrt(kp->var[c] + kp->p.eps));
        shf[c] = (float)norm_ld_F32(kp->bias, c, 0.0);
        mf[c] = (float)kp->mean[c];
    }
    if (cl)
        mft__parallel_for(0, j.rows, norm_grain(C), bn_nhwc_norm, &j);
    else
        mft__parallel_for(0, j.N * C, norm_grain(j.S), bn_nchw_norm, &j);
}
void mft__batch_norm_nchw_f32(const mft_kernel_args *a) { batch_norm_fast_run(a, false); }
void mft__batch_norm_nhwc_f32(const mft_kernel_args *a) {
    batch_norm_fast_run(a, a->inputs[0]->ndim >= 3);
}

/* ---------------------------------------------------------------- fast backward F32 */
void mft__batch_norm_bwd_nchw_f32(const mft_kernel_args *a) { mft__nb_fast_run(a, true, false); }
void mft__batch_norm_bwd_nhwc_f32(const mft_kernel_args *a) {
    mft__nb_fast_run(a, true, a->inputs[1]->ndim >= 3);
}

/* ---------------------------------------------------------------- forward entry points */
/* running = (1 - momentum) * running + momentum * stat (unbiased var). */
static void bn_commit(bn_pending *pd) {
    for (int pass = 0; pass < 2 && pd->vals && pd->count > 0; pass++) {
        mft_tensor *t = pass == 0 ? pd->rmean : pd->rvar;
        if (!t) continue;
        const size_t es = mft__elem_size(t->dtype);
        for (int64_t c = 0; c < pd->C; c++) {
            char *p = mft__tensor_ptr(t) + (size_t)(c * t->strides[0]) * es;
            double stat = pass == 0 ? pd->vals[c]
                                    : pd->vals[pd->C + c] * (double)pd->count /
                                          (double)(pd->count - 1);
            mft__store(t->dtype, p, (1.0 - pd->momentum) * mft__load(t->dtype, p) +
                                        pd->momentum * stat);
        }
        atomic_fetch_add(&t->storage->version, 1);
    }
    mft__free(pd->vals);
    pd->vals = NULL;
}

/* The op without its tape node; a training call leaves its running-stat
 * update in *pd for bn_commit (pd->vals NULL: nothing to write). */
static mft_tensor *batch_norm_impl(const char *fn, const mft_tensor *x, mft_tensor *running_mean,
                                   mft_tensor *running_var, const mft_tensor *weight,
                                   const mft_tensor *bias, bool training, double momentum,
                                   double eps, mft_tensor **smean, mft_tensor **srstd,
                                   bn_pending *pd) {
    memset(pd, 0, sizeof *pd);
    if (smean) *smean = NULL;
    if (srstd) *srstd = NULL;
    if (!mft__norm_check_x(fn, x, 2, "a tensor")) return NULL;
    const int64_t C = x->sizes[1];
    if (!mft__norm_check_param(fn, "weight", weight, x, 1, &C, false) ||
        !mft__norm_check_param(fn, "bias", bias, x, 1, &C, false) ||
        !mft__norm_check_param(fn, "running_mean", running_mean, x, 1, &C, false) ||
        !mft__norm_check_param(fn, "running_var", running_var, x, 1, &C, false))
        return NULL;
    if (!training && (!running_mean || !running_var)) {
        mft__set_error(MFT_ERR_NULL, "%s: eval mode (training = false) needs running_mean and "
                       "running_var, got %s NULL", fn,
                       !running_mean && !running_var ? "both" : !running_mean ? "running_mean"
                                                                               : "running_var");
        return NULL;
    }
    const int64_t count = x->numel / (C ? C : 1);
    if (training && x->numel > 0 && count == 1) {
        char b[MFT__DIMS_BUF];
        mft__set_error(MFT_ERR_SHAPE,
                       "%s: expected more than 1 value per channel when training, got input of "
                       "shape %s", fn, mft__fmt_dims(b, sizeof b, x->ndim, x->sizes));
        return NULL;
    }
    if (!mft__norm_check_eps(fn, eps)) return NULL;
    if (training) {
        for (int k = 0; k < 2; k++) {
            mft_tensor *t = k ? running_var : running_mean;
            if (t && mft__check_writable(fn, t) != MFT_OK) return NULL;
        }
    }
    const int64_t S = x->numel && C ? x->numel / (x->sizes[0] * C) : 0;
    const int64_t rows = x->sizes[0] * S;
    const int64_t nblk = (rows + NORM_ROWS - 1) / NORM_ROWS;
    int64_t nscratch = 2 * C + (nblk * C > x->sizes[0] * C ? nblk * C : x->sizes[0] * C);
    if (mft__is_blocked(x)) { /* the nChw16c kernel's partial sums */
        const int64_t b16 = mft__bn16_scratch(x->sizes[0], C, S);
        if (b16 > nscratch) nscratch = b16;
    }
    mft__norm_kparams kp = {{eps, momentum, training, 0, 0}, weight, bias, NULL, NULL, NULL, 0};
    *pd = (bn_pending){NULL, C, x->numel ? count : 0, momentum,
                       training ? running_mean : NULL, training ? running_var : NULL};
    return mft__norm_run(fn, MFT__OP_BATCH_NORM, x, &kp, C, nscratch,
                         training ? NULL : running_mean, training ? NULL : running_var, pd,
                         smean, srstd);
}

/* batch_norm_impl's arguments, for mft__norm_entry. */
typedef struct bn_args {
    const char *fn;
    const mft_tensor *x, *weight, *bias;
    mft_tensor *running_mean, *running_var;
    bool training;
    double momentum, eps;
    bn_pending *pd;
} bn_args;

static mft_tensor *bn_impl(const void *ctx, norm_ag_params *p, mft_tensor **smean,
                           mft_tensor **srstd) {
    const bn_args *c = ctx;
    (void)p;
    return batch_norm_impl(c->fn, c->x, c->running_mean, c->running_var, c->weight, c->bias,
                           c->training, c->momentum, c->eps, smean, srstd, c->pd);
}

static mft_tensor *batch_norm_entry(const char *fn, const mft_tensor *x, mft_tensor *running_mean,
                                    mft_tensor *running_var, const mft_tensor *weight,
                                    const mft_tensor *bias, bool training, double momentum,
                                    double eps, mft_tensor **um, mft_tensor **ur) {
    const mft_tensor *ins[3] = {x, weight, bias};
    if (training && (mft__ag_check_inplace(fn, running_mean) != MFT_OK ||
                     mft__ag_check_inplace(fn, running_var) != MFT_OK)) {
        if (um) *um = NULL;
        if (ur) *ur = NULL;
        return NULL;
    }
    bn_pending pd;
    const bn_args c = {fn, x, weight, bias, running_mean, running_var, training, momentum, eps,
                       &pd};
    norm_ag_params p = {.kind = NORM_AG_BATCH, .eps = eps, .training = training};
    mft_tensor *res = mft__norm_entry(fn, "batch_norm", ins, bn_impl, &c, &p, um, ur);
    /* the running statistics only for a result handed over (pd.vals is
     * NULL after a failed forward) */
    if (res) {
        bn_commit(&pd);
    } else {
        mft__free(pd.vals);
    }
    return res;
}

/* The running statistics are updated in place: a blocked one (a 1-D
 * descriptor with a block) cannot go through the fallback's plain copies,
 * which would take the update. Refused; the tensors are never blocked in
 * practice (1-D, C elements). */
static bool bn_running_plain(const char *fn, const mft_tensor *rm, const mft_tensor *rv) {
    if (mft__is_blocked(rm)) {
        mft__blk_refuse(fn, rm, "running_mean (updated in place)");
        return false;
    }
    if (mft__is_blocked(rv)) {
        mft__blk_refuse(fn, rv, "running_var (updated in place)");
        return false;
    }
    return true;
}

/* Note [Batch norm in nChw16c] (ops/norm/batch_norm_blocked.c): a packed
 * nChw16c F32 x runs through the native kernels with plain (or no) weight
 * and bias; every other blocked case (nChw8c, F64, a view that is not
 * packed, a blocked weight or bias) goes through the counted fallback. The
 * entry path reads only the sizes of a blocked x. */
static bool bn_native16(const mft_tensor *x, const mft_tensor *weight, const mft_tensor *bias) {
    return x && mft__is_blocked(x) && x->dtype == MFT_F32 && x->tag == MFT_NCHW16C &&
           mft_tensor_is_contiguous(x, MFT_NCHW16C) && !mft__is_blocked(weight) &&
           !mft__is_blocked(bias);
}

mft_tensor *mft_batch_norm(const mft_tensor *x, mft_tensor *running_mean, mft_tensor *running_var,
                           const mft_tensor *weight, const mft_tensor *bias, bool training,
                           double momentum, double eps) {
    if (!bn_running_plain("mft_batch_norm", running_mean, running_var)) return NULL;
    if (!bn_native16(x, weight, bias))
        MFT__BLOCKED_FALLBACK(
            "batch_norm",
            mft_batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps), 3,
            &x, &weight, &bias);
    return batch_norm_entry("mft_batch_norm", x, running_mean, running_var, weight, bias,
                            training, momentum, eps, NULL, NULL);
}

mft_tensor *mft_batch_norm_ex(const mft_tensor *x, mft_tensor *running_mean,
                              mft_tensor *running_var, const mft_tensor *weight,
                              const mft_tensor *bias, bool training, double momentum, double eps,
                              mft_tensor **save_mean, mft_tensor **save_invstd) {
    if (!bn_running_plain("mft_batch_norm_ex", running_mean, running_var)) {
        mft__unblock_clear_outs(2, ((mft_tensor **[]){save_mean, save_invstd}));
        return NULL;
    }
    if (!bn_native16(x, weight, bias))
        MFT__BLOCKED_FALLBACK_OUTS(
            "batch_norm_ex",
            mft_batch_norm_ex(x, running_mean, running_var, weight, bias, training, momentum, eps,
                              save_mean, save_invstd),
            2, ((mft_tensor **[]){save_mean, save_invstd}), ((const mft_tensor *[]){NULL, NULL}),
            3, &x, &weight, &bias);
    return batch_norm_entry("mft_batch_norm_ex", x, running_mean, running_var, weight, bias,
                            training, momentum, eps, save_mean, save_invstd);
}

/* ---------------------------------------------------------------- backward entry point */
mft_status mft_batch_norm_backward(const mft_tensor *grad_out, const mft_tensor *x,
                                   const mft_tensor *weight, const mft_tensor *save_mean,
                                   const mft_tensor *save_invstd, bool training,
                                   mft_tensor **grad_x, mft_tensor **grad_weight,
                                   mft_tensor **grad_bias) {
    /* native: x packed nChw16c F32, weight and the statistics plain;
     * grad_out in any layout (the dispatcher packs it in nChw16c when it
     * is not: an operand conversion) */
    if (!bn_native16(x, weight, save_mean) || mft__is_blocked(save_invstd) ||
        (grad_out && grad_out->dtype != MFT_F32))
        MFT__BLOCKED_FALLBACK_OUTS_STATUS(
            "batch_norm_backward",
            mft_batch_norm_backward(grad_out, x, weight, save_mean, save_invstd, training, grad_x,
                                    grad_weight, grad_bias),
            3, ((mft_tensor **[]){grad_x, grad_weight, grad_bias}),
            ((const mft_tensor *[]){x, weight, NULL}), 5, &grad_out, &x, &weight, &save_mean,
            &save_invstd);
    const char *fn = "mft_batch_norm_backward";
    mft__normb_clear(grad_x, grad_weight, grad_bias);
    if (!mft__norm_check_grad_x(fn, grad_out, x, 2)) return mft_last_error();
    const int64_t C = x->sizes[1];
    if (!mft__norm_check_param(fn, "weight", weight, x, 1, &C, false) ||
        !mft__norm_check_param(fn, "save_mean", save_mean, x, 1, &C, true) ||
        !mft__norm_check_param(fn, "save_invstd", save_invstd, x, 1, &C, true))
        return mft_last_error();
    const int64_t N = x->sizes[0], S = x->numel && C ? x->numel / (N * C) : 0;
    mft__normb_kparams kp = {.p = {.training = training}, .weight = weight};
    int64_t nscratch = mft__nb_scratch(N, C, S);
    if (mft__is_blocked(x)) {
        const int64_t b16 = mft__bn16_bwd_scratch(N, C, S);
        if (b16 > nscratch) nscratch = b16;
    }
    return mft__normb_run(fn, MFT__OP_BATCH_NORM_BACKWARD, grad_out, x, &kp, C, save_mean,
                          save_invstd, 1, &C, nscratch, grad_x, grad_weight, grad_bias);
}
