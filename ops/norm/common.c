/* ops/norm/common.c — what the normalisation ops (batch_norm, group_norm,
 * instance_norm, layer_norm; ops/norm/) share: argument validation, the
 * run / dispatch skeleton of the forward (mft__norm_run) and of the
 * backward (mft__normb_run), the autograd node and its recording skeleton
 * (mft__norm_entry), and the two kernel tables.
 *
 * Through the kernel dispatcher (docs/architecture.md §7): results are packed in the
 * input's tag for rank 3-5, else contiguous (docs/spec.md §4; instance_norm and
 * layer_norm deviate from PyTorch 1.13, which returns contiguous strides);
 * grad_x is packed in x's tag for rank 3-5, else contiguous (docs/spec.md §5),
 * grad_weight / grad_bias packed 1-D (C) or of normalized_shape. The kernel
 * interfaces are in ops/norm/norm_internal.h.
 *
 * Autograd (docs/architecture.md §8): every entry point, _ex included, records one node
 * when x, weight or bias requires grad under a recording tape: inputs {x,
 * weight, bias} (NULL weight / bias take no part), saved {x, weight, mean,
 * rstd} (the _ex statistics: batch_norm training the batch ones, eval
 * copies of the running ones), and the backward calls the public
 * *_backward of the op (grad_x packed in x's tag, grad_weight / grad_bias
 * packed: the engine converts nothing). */
#include <stdlib.h>
#include <string.h>
#include "autograd_internal.h"
#include "norm_internal.h"

/* Note [Kernel tables]: the built-in kernels this family dispatches to. */
static const mft__kernel_def *const g_tables_fwd[] = {mft__kernels_norm, NULL};
static const mft__kernel_def *const g_tables_bwd[] = {mft__kernels_norm_backward, NULL};

/* ---------------------------------------------------------------- validation */
bool mft__norm_check_x(const char *fn, const mft_tensor *x, int min_rank, const char *what) {
    if (!x) {
        mft__null_arg(fn, "x");
        return false;
    }
    if (x->ndim < min_rank) {
        mft__set_error(MFT_ERR_RANK, "%s: needs %s of rank >= %d, got rank %d", fn, what,
                       min_rank, x->ndim);
        return false;
    }
    if (x->dtype != MFT_F32 && x->dtype != MFT_F64) {
        mft__set_error(MFT_ERR_DTYPE, "%s: dtype %s is not supported (f32 or f64 only)", fn,
                       mft_dtype_name(x->dtype));
        return false;
    }
    return true;
}

bool mft__norm_check_grad_x(const char *fn, const mft_tensor *go, const mft_tensor *x,
                            int min_rank) {
    if (!go) {
        mft__null_arg(fn, "grad_out");
        return false;
    }
    if (!mft__norm_check_x(fn, x, min_rank, "x")) return false;
    bool same = go->ndim == x->ndim;
    for (int d = 0; same && d < x->ndim; d++) same = go->sizes[d] == x->sizes[d];
    if (!same) {
        char b1[MFT__DIMS_BUF], b2[MFT__DIMS_BUF];
        mft__set_error(MFT_ERR_SHAPE, "%s: grad_out has shape %s, x has %s", fn,
                       mft__fmt_dims(b1, sizeof b1, go->ndim, go->sizes),
                       mft__fmt_dims(b2, sizeof b2, x->ndim, x->sizes));
        return false;
    }
    if (go->dtype != x->dtype) {
        mft__set_error(MFT_ERR_DTYPE, "%s: grad_out has dtype %s, x has %s", fn,
                       mft_dtype_name(go->dtype), mft_dtype_name(x->dtype));
        return false;
    }
    return true;
}

bool mft__norm_check_param(const char *fn, const char *what, const mft_tensor *t,
                           const mft_tensor *x, int n, const int64_t *want, bool required) {
    if (!t) {
        if (required) mft__null_arg(fn, what);
        return !required;
    }
    char b1[MFT__DIMS_BUF], b2[MFT__DIMS_BUF];
    bool same = t->ndim == n;
    for (int d = 0; same && d < n; d++) same = t->sizes[d] == want[d];
    if (!same) {
        mft__set_error(MFT_ERR_SHAPE, "%s: %s has shape %s, expected %s", fn, what,
                       mft__fmt_dims(b1, sizeof b1, t->ndim, t->sizes),
                       mft__fmt_dims(b2, sizeof b2, n, want));
        return false;
    }
    if (t->dtype != x->dtype) {
        mft__set_error(MFT_ERR_DTYPE, "%s: %s has dtype %s, x has %s", fn, what,
                       mft_dtype_name(t->dtype), mft_dtype_name(x->dtype));
        return false;
    }
    return true;
}

bool mft__norm_check_eps(const char *fn, double eps) {
    if (!(eps >= 0.0)) {
        mft__set_error(MFT_ERR_INVALID, "%s: eps must be >= 0, got %g", fn, eps);
        return false;
    }
    return true;
}

bool mft__norm_check_groups(const char *fn, int64_t groups, int64_t C) {
    if (groups < 1 || C % groups != 0) {
        mft__set_error(MFT_ERR_SHAPE, "%s: groups = %lld must be >= 1 and divide C = %lld", fn,
                       (long long)groups, (long long)C);
        return false;
    }
    return true;
}

mft_status mft__norm_check_layer_shape(const char *fn, const mft_tensor *x, int nnorm,
                                       const int64_t *normalized_shape) {
    if (nnorm < 1 || nnorm > x->ndim) {
        mft__set_error(MFT_ERR_INVALID, "%s: nnorm = %d must be in 1..%d (rank of x)", fn, nnorm,
                       x->ndim);
        return mft_last_error();
    }
    if (!normalized_shape) {
        mft__null_arg(fn, "normalized_shape");
        return MFT_ERR_NULL; /* the call's own status; the message keeps an earlier error */
    }
    const int lead = x->ndim - nnorm;
    for (int d = 0; d < nnorm; d++)
        if (x->sizes[lead + d] != normalized_shape[d]) {
            char b1[MFT__DIMS_BUF], b2[MFT__DIMS_BUF];
            mft__set_error(MFT_ERR_SHAPE,
                           "%s: normalized_shape %s does not match the last %d dims of x %s", fn,
                           mft__fmt_dims(b1, sizeof b1, nnorm, normalized_shape), nnorm,
                           mft__fmt_dims(b2, sizeof b2, x->ndim, x->sizes));
            return mft_last_error();
        }
    return MFT_OK;
}

/* Element k of the 1-D statistics tensor t (any strides and dtype). */
static double norm_load1(const mft_tensor *t, int64_t k) {
    return mft__load(t->dtype, mft__tensor_ptr(t) +
                                   (size_t)(k * t->strides[0]) * mft__elem_size(t->dtype));
}

/* The result (y or grad_x) packed in fmt. A blocked one (batch_norm's
 * nChw16c kernels, which write every slot, pad lanes as zeros) is not
 * zeroed first, saving a pass over memory, unless a user kernel is
 * registered (it might run instead and leave the pad lanes alone). */
static mft_tensor *norm_alloc_out(const char *fn, const mft_tensor *x, mft_format fmt) {
    if (mft__is_blocked(x) && mft__dispatch_user_count() == 0)
        return mft__tensor_alloc_unzeroed(fn, x->ndim, x->sizes, x->dtype, fmt);
    return mft__tensor_alloc(fn, x->ndim, x->sizes, x->dtype, fmt);
}

/* ---------------------------------------------------------------- forward run */
mft_tensor *mft__norm_run(const char *fn, mft__op_id op, const mft_tensor *x,
                          mft__norm_kparams *kp, int64_t nstat, int64_t nscratch,
                          const mft_tensor *rmean, const mft_tensor *rvar, bn_pending *pending,
                          mft_tensor **smean, mft_tensor **srstd) {
    if (smean) *smean = NULL;
    if (srstd) *srstd = NULL;
    const mft__decision dec = mft__rule_decide(op == MFT__OP_LAYER_NORM ? MFT__RULE_NORM_DEV : MFT__RULE_NORM, mft__op_name(op), 1, &x, MFT_CONTIGUOUS, 0);
    const mft_format fmt = dec.tag;
    size_t nd = (size_t)(2 * nstat + nscratch);
    double *buf = mft__alloc_or_err(fn, (nd ? nd : 1) * sizeof(double), 64);
    if (!buf) return NULL;
    kp->mean = buf;
    kp->var = buf + nstat;
    kp->scratch = buf + 2 * nstat;
    kp->nscratch = nscratch;
    if (rmean) /* eval: running statistics */
        for (int64_t c = 0; c < nstat; c++) {
            kp->mean[c] = norm_load1(rmean, c);
            kp->var[c] = norm_load1(rvar, c);
        }
    mft__scope_suspend();
    mft_tensor *res = norm_alloc_out(fn, x, fmt);
    bool ok = res != NULL;
    if (ok) {
        const mft_tensor *ins[1] = {x};
        const bool convert[1] = {true};
        mft_tensor *outs[1] = {res};
        ok = mft__dispatch(fn, g_tables_fwd, op, fmt, x->dtype, 1, ins, convert, 1, outs, kp) == MFT_OK;
    }
    if (ok) mft__rule_apply(res, &dec);
    /* statistics for the backward (x's dtype): mean, 1 / sqrt(var + eps) */
    mft_tensor *st[2] = {NULL, NULL};
    for (int k = 0; k < 2 && ok; k++) {
        if (!(k ? srstd : smean)) continue;
        st[k] = mft__tensor_alloc(fn, 1, &nstat, x->dtype, MFT_CONTIGUOUS);
        ok = st[k] != NULL;
        for (int64_t c = 0; ok && c < nstat; c++)
            mft__store(x->dtype, mft__tensor_ptr(st[k]) + (size_t)c * mft__elem_size(x->dtype),
                       k ? 1.0 / sqrt(kp->var[c] + kp->p.eps) : kp->mean[c]);
    }
    mft__scope_resume();
    if (!ok) {
        mft__relabel_error(fn);
        mft_tensor_release(res);
        mft_tensor_release(st[0]);
        mft_tensor_release(st[1]);
        mft__free(buf);
        return NULL;
    }
    /* training: the batch statistics (buf starts with mean [nstat], var
     * [nstat]) go to the caller, which commits them last (bn_pending) */
    const bool hand = pending && pending->count > 0 && (pending->rmean || pending->rvar);
    if (hand) {
        pending->vals = buf;
        pending->C = nstat;
    } else {
        mft__free(buf);
    }
    mft_tensor *r = mft__retain_result(fn, res);
    mft_tensor_release(res);
    for (int k = 0; k < 2; k++) {
        if (!st[k]) continue;
        mft_tensor *o = r ? mft__retain_result(fn, st[k]) : NULL;
        mft_tensor_release(st[k]);
        if (r && !o) {
            /* out of memory registering in the open scope (the only way
             * this fails): the results registered so far belong to the
             * scope, which releases them; the caller gets nothing */
            if (k == 0) mft_tensor_release(st[1]);
            if (smean) *smean = NULL;
            r = NULL;
            break;
        }
        *(k ? srstd : smean) = o;
    }
    if (!r && hand) { /* nothing is committed for a failed call */
        mft__free(pending->vals);
        pending->vals = NULL;
    }
    return r;
}

/* ---------------------------------------------------------------- backward run */
void mft__normb_clear(mft_tensor **gx, mft_tensor **gw, mft_tensor **gb) {
    if (gx) *gx = NULL;
    if (gw) *gw = NULL;
    if (gb) *gb = NULL;
}

static mft_tensor *nb_vec(const char *fn, const double *v, int nd, const int64_t *sizes,
                          mft_dtype dt) {
    mft_tensor *t = mft__tensor_alloc(fn, nd, sizes, dt, MFT_CONTIGUOUS);
    if (!t) return NULL;
    if (dt == MFT_F32) {
        float *p = (float *)(void *)mft__tensor_ptr(t);
        for (int64_t i = 0; i < t->numel; i++) p[i] = (float)v[i];
    } else {
        double *p = (double *)(void *)mft__tensor_ptr(t);
        for (int64_t i = 0; i < t->numel; i++) p[i] = v[i];
    }
    return t;
}

mft_status mft__normb_run(const char *fn, mft__op_id op, const mft_tensor *go,
                          const mft_tensor *x, mft__normb_kparams *kp, int64_t nstat,
                          const mft_tensor *smean, const mft_tensor *srstd, int aff_nd,
                          const int64_t *aff_sizes, int64_t nscratch, mft_tensor **gx,
                          mft_tensor **gw, mft_tensor **gb) {
    int64_t naff = 1;
    for (int d = 0; d < aff_nd; d++) naff *= aff_sizes[d];
    const size_t nd = (size_t)(2 * nstat + 2 * naff + nscratch + 1);
    double *buf = mft__alloc_or_err(fn, nd * sizeof(double), 64);
    if (!buf) return mft_last_error();
    double *mean = buf, *rstd = buf + nstat;
    kp->gw = buf + 2 * nstat;
    kp->gb = kp->gw + naff;
    kp->scratch = kp->gb + naff;
    kp->nscratch = nscratch;
    kp->need_wb = gw || gb;
    for (int64_t k = 0; k < nstat; k++) {
        mean[k] = norm_load1(smean, k);
        rstd[k] = norm_load1(srstd, k);
    }
    kp->mean = mean;
    kp->rstd = rstd;
    const mft__decision dec = mft__rule_decide(MFT__RULE_BACKWARD, fn + 4, 1, &x, MFT_CONTIGUOUS, 0);
    const mft_format fmt = dec.tag;
    mft__scope_suspend();
    mft_tensor *r[3] = {NULL, NULL, NULL};
    r[0] = norm_alloc_out(fn, x, fmt);
    bool ok = r[0] != NULL;
    if (ok) {
        const mft_tensor *ins[2] = {go, x};
        const bool convert[2] = {true, true};
        mft_tensor *outs[1] = {r[0]};
        ok = mft__dispatch(fn, g_tables_bwd, op, fmt, x->dtype, 2, ins, convert, 1, outs, kp) == MFT_OK;
    }
    if (ok) mft__rule_apply(r[0], &dec);
    if (ok && gw) ok = (r[1] = nb_vec(fn, kp->gw, aff_nd, aff_sizes, x->dtype)) != NULL;
    if (ok && gb) ok = (r[2] = nb_vec(fn, kp->gb, aff_nd, aff_sizes, x->dtype)) != NULL;
    mft__scope_resume();
    mft__free(buf);
    mft_tensor **dst[3] = {gx, gw, gb};
    for (int k = 0; k < 3 && ok; k++) {
        if (!dst[k]) continue;
        *dst[k] = mft__retain_result(fn, r[k]);
        ok = *dst[k] != NULL;
    }
    for (int k = 0; k < 3; k++) mft_tensor_release(r[k]);
    if (!ok) {
        /* a failed registration happens only in an open scope, which owns
         * (and releases) the results registered before it */
        mft_status st = mft__relabel_error(fn);
        for (int k = 0; k < 3; k++)
            if (dst[k]) *dst[k] = NULL;
        return st;
    }
    return MFT_OK;
}

mft_status mft__normb_run_stats(const char *fn, mft__op_id op, const mft_tensor *go,
                                const mft_tensor *x, mft__normb_kparams *kp, int64_t nstat,
                                const mft_tensor *mean, const mft_tensor *rstd, int aff_nd,
                                const int64_t *aff_sizes, int64_t nscratch,
                                mft__normb_stats_fn stats, mft_tensor **gx, mft_tensor **gw,
                                mft_tensor **gb) {
    if (!mft__norm_check_param(fn, "weight", kp->weight, x, aff_nd, aff_sizes, false) ||
        !mft__norm_check_param(fn, "mean", mean, x, 1, &nstat, false) ||
        !mft__norm_check_param(fn, "rstd", rstd, x, 1, &nstat, false) ||
        !mft__norm_check_eps(fn, kp->p.eps))
        return mft_last_error();
    if ((mean == NULL) != (rstd == NULL)) {
        mft__set_error(MFT_ERR_NULL, "%s: mean and rstd must be both given or both NULL (got %s "
                       "NULL)", fn, mean ? "rstd" : "mean");
        return mft_last_error();
    }
    mft_tensor *m2 = NULL, *r2 = NULL;
    if (!mean) { /* recompute the statistics */
        mft__scope_suspend();
        mft_tensor *y = stats(x, kp, aff_sizes, &m2, &r2);
        mft__scope_resume();
        if (!y) {
            mft__relabel_error(fn);
            return mft_last_error();
        }
        mft_tensor_release(y);
        mean = m2;
        rstd = r2;
    }
    mft_status st = mft__normb_run(fn, op, go, x, kp, nstat, mean, rstd, aff_nd, aff_sizes,
                                   nscratch, gx, gw, gb);
    mft_tensor_release(m2);
    mft_tensor_release(r2);
    return st;
}

/* ---------------------------------------------------------------- autograd */
/* saved = {x, weight, mean, rstd}; gradients for the inputs that need one. */
static mft_status norm_node_backward(const mft__ag_node *n, mft_tensor *const *gout,
                                     mft_tensor **gin) {
    const norm_ag_params *p = n->params;
    const mft_tensor *x = n->saved[0], *w = n->saved[1], *m = n->saved[2], *r = n->saved[3];
    mft_tensor **gx = n->in[0].needs_grad ? &gin[0] : NULL;
    mft_tensor **gw = n->in[1].needs_grad ? &gin[1] : NULL;
    mft_tensor **gb = n->in[2].needs_grad ? &gin[2] : NULL;
    switch (p->kind) {
    case NORM_AG_BATCH:
        return mft_batch_norm_backward(gout[0], x, w, m, r, p->training, gx, gw, gb);
    case NORM_AG_GROUP:
        return mft_group_norm_backward(gout[0], x, p->groups, m, r, w, p->eps, gx, gw, gb);
    case NORM_AG_INSTANCE:
        return mft_instance_norm_backward(gout[0], x, m, r, w, p->eps, gx, gw, gb);
    default:
        return mft_layer_norm_backward(gout[0], x, p->nnorm, p->shape, m, r, w, p->eps, gx, gw,
                                       gb);
    }
}

/* Starts a forward that will record: grad mode off (the helpers record
 * nothing) and the user's scope suspended (the results are ours until
 * norm_finish hands them over). */
static bool norm_ag_begin(void) {
    mft__scope_suspend();
    return mft_set_grad_enabled(false);
}

static void norm_ag_end(bool prev) {
    mft_set_grad_enabled(prev);
    mft__scope_resume();
}

/* Records the node for y (ours, NULL after a failed forward) computed from
 * ins = {x, weight, bias} with statistics m, r (ours), then hands y over as
 * the result and the statistics to *um / *ur when asked (else drops ours).
 * On failure releases everything and returns NULL with *um, *ur NULL. */
static mft_tensor *norm_finish(const char *fn, const char *name, mft_tensor *y,
                               const mft_tensor *const *ins, mft_tensor *m, mft_tensor *r,
                               const norm_ag_params *p, mft_tensor **um, mft_tensor **ur) {
    if (um) *um = NULL;
    if (ur) *ur = NULL;
    if (!y) {
        mft_tensor_release(m);
        mft_tensor_release(r);
        return NULL;
    }
    const mft_tensor *saved[4] = {ins[0], ins[1], m, r};
    mft_tensor *outs[1] = {y};
    if (mft__ag_record(fn, name, norm_node_backward, 3, ins, 1, outs, 4, saved, p, sizeof *p) !=
        MFT_OK) {
        mft_tensor_release(y);
        mft_tensor_release(m);
        mft_tensor_release(r);
        return NULL;
    }
    mft_tensor *res = mft__retain_result(fn, y);
    mft_tensor_release(y);
    mft_tensor *stat[2] = {m, r};
    mft_tensor **dst[2] = {um, ur};
    for (int k = 0; k < 2; k++) {
        if (res && dst[k]) {
            *dst[k] = mft__retain_result(fn, stat[k]);
            if (!*dst[k]) {
                /* out of memory registering in the open scope (the only way
                 * this fails), which owns what was registered before: the
                 * caller gets nothing */
                res = NULL;
                if (um) *um = NULL;
            }
        }
        mft_tensor_release(stat[k]);
    }
    return res;
}

mft_tensor *mft__norm_entry(const char *fn, const char *name, const mft_tensor *const *ins,
                            mft__norm_impl_fn impl, const void *ctx, norm_ag_params *p,
                            mft_tensor **um, mft_tensor **ur) {
    if (!mft__ag_wants(3, ins)) return impl(ctx, p, um, ur);
    mft_tensor *m = NULL, *r = NULL;
    const bool prev = norm_ag_begin();
    mft_tensor *y = impl(ctx, p, &m, &r);
    norm_ag_end(prev);
    return norm_finish(fn, name, y, ins, m, r, p, um, ur);
}

/* ---------------------------------------------------------------- kernel tables
 * The forward's, then the backward's; F64 kernels are the strided
 * references (ops/norm/reference.c). */
const mft__kernel_def mft__kernels_norm[] = {
    {MFT__OP_BATCH_NORM, MFT_CONTIGUOUS, MFT_F32, "batch_norm.nchw.f32",
     mft__batch_norm_nchw_f32},
    {MFT__OP_BATCH_NORM, MFT_CHANNELS_LAST, MFT_F32, "batch_norm.nhwc.f32",
     mft__batch_norm_nhwc_f32},
    {MFT__OP_BATCH_NORM, MFT_NCHW16C, MFT_F32, "batch_norm.nchw16c.f32",
     mft__batch_norm_nchw16c_f32},
    {MFT__OP_BATCH_NORM, MFT_CONTIGUOUS, MFT_F64, "batch_norm.nchw.f64.ref",
     mft__batch_norm_ref_F64},
    {MFT__OP_GROUP_NORM, MFT_CONTIGUOUS, MFT_F32, "group_norm.nchw.f32",
     mft__group_norm_nchw_f32},
    {MFT__OP_GROUP_NORM, MFT_CHANNELS_LAST, MFT_F32, "group_norm.nhwc.f32",
     mft__group_norm_nhwc_f32},
    {MFT__OP_GROUP_NORM, MFT_CONTIGUOUS, MFT_F64, "group_norm.nchw.f64.ref",
     mft__group_norm_ref_F64},
    {MFT__OP_GROUP_NORM, MFT_CHANNELS_LAST, MFT_F64, "group_norm.nhwc.f64.ref",
     mft__group_norm_ref_F64},
    {MFT__OP_LAYER_NORM, MFT_CONTIGUOUS, MFT_F32, "layer_norm.nchw.f32",
     mft__layer_norm_nchw_f32},
    {MFT__OP_LAYER_NORM, MFT_CHANNELS_LAST, MFT_F32, "layer_norm.nhwc.f32",
     mft__layer_norm_nhwc_f32},
    {MFT__OP_LAYER_NORM, MFT_CONTIGUOUS, MFT_F64, "layer_norm.nchw.f64.ref",
     mft__layer_norm_ref_F64},
    {0, 0, 0, NULL, NULL},
};

const mft__kernel_def mft__kernels_norm_backward[] = {
    {MFT__OP_BATCH_NORM_BACKWARD, MFT_CONTIGUOUS, MFT_F32, "batch_norm_backward.nchw.f32",
     mft__batch_norm_bwd_nchw_f32},
    {MFT__OP_BATCH_NORM_BACKWARD, MFT_CHANNELS_LAST, MFT_F32, "batch_norm_backward.nhwc.f32",
     mft__batch_norm_bwd_nhwc_f32},
    {MFT__OP_BATCH_NORM_BACKWARD, MFT_NCHW16C, MFT_F32, "batch_norm_backward.nchw16c.f32",
     mft__batch_norm_bwd_nchw16c_f32},
    {MFT__OP_BATCH_NORM_BACKWARD, MFT_CONTIGUOUS, MFT_F64, "batch_norm_backward.nchw.f64.ref",
     mft__batch_norm_bwd_ref_F64},
    {MFT__OP_BATCH_NORM_BACKWARD, MFT_CHANNELS_LAST, MFT_F64, "batch_norm_backward.nhwc.f64.ref",
     mft__batch_norm_bwd_ref_F64},
    {MFT__OP_GROUP_NORM_BACKWARD, MFT_CONTIGUOUS, MFT_F32, "group_norm_backward.nchw.f32",
     mft__group_norm_bwd_nchw_f32},
    {MFT__OP_GROUP_NORM_BACKWARD, MFT_CHANNELS_LAST, MFT_F32, "group_norm_backward.nhwc.f32",
     mft__group_norm_bwd_nhwc_f32},
    {MFT__OP_GROUP_NORM_BACKWARD, MFT_CONTIGUOUS, MFT_F64, "group_norm_backward.nchw.f64.ref",
     mft__group_norm_bwd_ref_F64},
    {MFT__OP_GROUP_NORM_BACKWARD, MFT_CHANNELS_LAST, MFT_F64, "group_norm_backward.nhwc.f64.ref",
     mft__group_norm_bwd_ref_F64},
    {MFT__OP_LAYER_NORM_BACKWARD, MFT_CONTIGUOUS, MFT_F32, "layer_norm_backward.nchw.f32",
     mft__layer_norm_bwd_nchw_f32},
    {MFT__OP_LAYER_NORM_BACKWARD, MFT_CHANNELS_LAST, MFT_F32, "layer_norm_backward.nhwc.f32",
     mft__layer_norm_bwd_nhwc_f32},
    {MFT__OP_LAYER_NORM_BACKWARD, MFT_CONTIGUOUS, MFT_F64, "layer_norm_backward.nchw.f64.ref",
     mft__layer_norm_bwd_ref_F64},
    {MFT__OP_LAYER_NORM_BACKWARD, MFT_CHANNELS_LAST, MFT_F64, "layer_norm_backward.nhwc.f64.ref",
     mft__layer_norm_bwd_ref_F64},
    {0, 0, 0, NULL, NULL},
};
