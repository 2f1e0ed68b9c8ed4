/* ops/pool/common.c — what every pool entry point shares (declared in
 * pool_internal.h): the argument checks, the dispatched run of the
 * rank-generic entry points (internal rank 4/5 views, outputs packed in the
 * decided format, mft__dispatch through the family's tables, the layout
 * rule), the hand-over of the results with their tape node (the 2-D
 * forward's pool_run of pool2d.c ends with it too), the tape node of the
 * rank-generic forward pools, and the forward and backward helpers of the
 * windowed pools that several ranks use.
 *
 * Results and gradients are packed in the input's tag (docs/spec.md §4, §5): a
 * batched input (N,C,...) gives its tag (rank-3 CHANNELS_LAST = N,L,C for
 * 1-D pools); an unbatched one (C,...) gives CONTIGUOUS.
 *
 * Autograd: the rank-generic forward entry points (1-D, 3-D, adaptive)
 * record one tape node under a recording tape (pm_ag_params, pm_node_backward)
 * whose backward runs the matching public backward function; max pools save
 * the indices their kernels compute anyway, so recording costs no extra work. */
#include "pool_internal.h"

/* Note [Kernel tables]: the built-in kernels this family dispatches to. */
const mft__kernel_def *const mft__pool_tables[] = {mft__kernels_pool, mft__kernels_pool_more, NULL};

/* ---------------------------------------------------------------- blocked operands */
static bool pool_packed16(const mft_tensor *t, mft_dtype dt) {
    /* in-plane positions (max indices) as int32 lanes: H*W fits */
    return t && t->ndim == 4 && t->dtype == dt && t->tag == MFT_NCHW16C &&
           mft_tensor_is_contiguous(t, MFT_NCHW16C) && t->sizes[2] <= INT32_MAX / t->sizes[3];
}

bool mft__pool_native16(const mft_tensor *x, const mft_tensor *indices) {
    return pool_packed16(x, MFT_F32) && (!indices || pool_packed16(indices, MFT_I64));
}

mft_tensor *mft__pool_alloc_out(const char *fn, int ndim, const int64_t *sizes, mft_dtype dtype,
                                mft_format fmt) {
    return fmt == MFT_NCHW16C && mft__dispatch_user_count() == 0
               ? mft__tensor_alloc_unzeroed(fn, ndim, sizes, dtype, fmt)
               : mft__tensor_alloc(fn, ndim, sizes, dtype, fmt);
}

/* ---------------------------------------------------------------- checks */
/* x: non-NULL, rank nsp+1 (unbatched) or nsp+2, F32/F64, C and spatial > 0. */
bool mft__pool_check_x(const char *fn, const mft_tensor *x, int nsp, const char *what) {
    char b1[MFT__DIMS_BUF];
    if (!x) {
        mft__null_arg(fn, what);
        return false;
    }
    if (x->ndim != nsp + 1 && x->ndim != nsp + 2) {
        static const char *const shapes[4] = {"", "(C,L) or 3-D (N,C,L)",
                                              "(C,H,W) or 4-D (N,C,H,W)",
                                              "(C,D,H,W) or 5-D (N,C,D,H,W)"};
        mft__set_error(MFT_ERR_RANK, "%s: expected '%s' to be a %d-D %s tensor, got rank %d with "
                       "sizes %s", fn, what, nsp + 1, shapes[nsp], x->ndim,
                       mft__fmt_dims(b1, sizeof b1, x->ndim, x->sizes));
        return false;
    }
    if (x->dtype != MFT_F32 && x->dtype != MFT_F64) {
        mft__set_error(MFT_ERR_DTYPE, "%s: '%s' has dtype %s, which is not supported (f32 and f64 "
                       "only)", fn, what, mft_dtype_name(x->dtype));
        return false;
    }
    for (int d = x->ndim - nsp - 1; d < x->ndim; d++)
        if (x->sizes[d] == 0) {
            mft__set_error(MFT_ERR_SHAPE, "%s: '%s' sizes %s have a zero channel or spatial dim "
                           "(only the batch may be empty)", fn, what,
                           mft__fmt_dims(b1, sizeof b1, x->ndim, x->sizes));
            return false;
        }
    return true;
}

/* Checks the pooling arguments of an nsp-D pool of x (already checked) and
 * fills g (kind, parameters, sizes) with the output sizes. */
bool mft__pool_check_params(const char *fn, int nsp, bool is_max, const mft_tensor *x,
                            const pm_req *q, pm_geom *g) {
    char b1[MFT__DIMS_BUF], b2[MFT__DIMS_BUF];
    if (!q->kernel) {
        mft__set_error(MFT_ERR_NULL, "%s: argument 'kernel' is NULL", fn);
        return false;
    }
    int64_t k[3], s[3], p[3], d[3];
    bool stride_default = !q->stride;
    if (q->stride) {
        stride_default = true;
        for (int i = 0; i < nsp; i++) stride_default = stride_default && q->stride[i] == 0;
    }
    for (int i = 0; i < nsp; i++) {
        k[i] = q->kernel[i];
        s[i] = stride_default ? q->kernel[i] : q->stride[i];
        p[i] = q->padding ? q->padding[i] : 0;
        d[i] = q->dilation ? q->dilation[i] : 1;
    }
    const int64_t *v[4] = {k, s, p, d};
    static const char *const names[4] = {"kernel", "stride", "padding", "dilation"};
    static const char *const rule[4] = {"should be greater than zero",
                                        "should be greater than zero", "should be non-negative",
                                        "should be at least 1"};
    for (int a = 0; a < 4; a++)
        for (int i = 0; i < nsp; i++) {
            bool bad = a == 2 ? v[a][i] < 0 : v[a][i] < 1;
            if (bad) {
                mft__set_error(MFT_ERR_INVALID, "%s: %s %s %s", fn, names[a],
                               mft__fmt_dims(b1, sizeof b1, nsp, v[a]), rule[a]);
                return false;
            }
        }
    for (int a = 0; a < 4; a++)
        for (int i = 0; i < nsp; i++)
            if (v[a][i] > POOL_MAX_PARAM) {
                mft__set_error(MFT_ERR_OVERFLOW, "%s: %s %s is too large (at most %lld)", fn,
                               names[a], mft__fmt_dims(b1, sizeof b1, nsp, v[a]),
                               (long long)POOL_MAX_PARAM);
                return false;
            }
    for (int i = 0; i < nsp; i++)
        if (p[i] > k[i] / 2) {
            mft__set_error(MFT_ERR_INVALID, "%s: pad %lld should be at most half of kernel %lld",
                           fn, (long long)p[i], (long long)k[i]);
            return false;
        }
    /* divisor_override: 0 = none, any other value divides, negative ones too,
     * as PyTorch's avg_pool2d and avg_pool3d (and mft_avg_pool2d) */
    memset(g, 0, sizeof *g);
    g->kind = is_max ? PM_MAX : PM_AVG;
    const bool batched = x->ndim == nsp + 2;
    g->N = batched ? x->sizes[0] : 1;
    g->C = x->sizes[batched];
    for (int e = 0; e < 3; e++) g->in[e] = g->out[e] = g->k[e] = g->s[e] = g->d[e] = 1;
    int64_t outs[3];
    for (int i = 0; i < nsp; i++) {
        int e = 3 - nsp + i;
        g->in[e] = x->sizes[batched + 1 + i];
        g->k[e] = k[i];
        g->s[e] = s[i];
        g->p[e] = p[i];
        g->d[e] = is_max ? d[i] : 1;
        g->out[e] = outs[i] = pool_out_size(g->in[e], k[i], p[i], s[i], g->d[e], q->ceil_mode);
    }
    g->ceil_mode = q->ceil_mode;
    g->count_include_pad = q->count_include_pad;
    g->divisor_override = q->divisor_override;
    for (int i = 0; i < nsp; i++)
        if (outs[i] < 1) {
            char bk[MFT__DIMS_BUF], bs[MFT__DIMS_BUF], bp[MFT__DIMS_BUF], bd[MFT__DIMS_BUF];
            int64_t dd[3];
            for (int a = 0; a < nsp; a++) dd[a] = is_max ? d[a] : 1;
            mft__set_error(MFT_ERR_SHAPE, "%s: input sizes %s give output size %s, which is too "
                           "small (kernel %s, stride %s, padding %s, dilation %s)", fn,
                           mft__fmt_dims(b1, sizeof b1, x->ndim, x->sizes),
                           mft__fmt_dims(b2, sizeof b2, nsp, outs),
                           mft__fmt_dims(bk, sizeof bk, nsp, k), mft__fmt_dims(bs, sizeof bs, nsp, s),
                           mft__fmt_dims(bp, sizeof bp, nsp, p), mft__fmt_dims(bd, sizeof bd, nsp, dd));
            return false;
        }
    return true;
}

/* grad_out (or indices) must match x's rank and dtype (indices: I64) and
 * have the expected sizes (want, rank x->ndim; want NULL: only N and C are
 * checked and the spatial sizes must be >= 1). */
bool mft__pool_check_like(const char *fn, const char *what, const mft_tensor *t,
                          const mft_tensor *x, mft_dtype dt, const int64_t *want) {
    char b1[MFT__DIMS_BUF], b2[MFT__DIMS_BUF];
    if (!t) {
        mft__null_arg(fn, what);
        return false;
    }
    if (t->dtype != dt) {
        mft__set_error(MFT_ERR_DTYPE, "%s: '%s' has dtype %s, expected %s", fn, what,
                       mft_dtype_name(t->dtype), mft_dtype_name(dt));
        return false;
    }
    bool ok = t->ndim == x->ndim;
    for (int d = 0; ok && want && d < x->ndim; d++) ok = t->sizes[d] == want[d];
    if (!ok) {
        if (want)
            mft__set_error(MFT_ERR_SHAPE, "%s: '%s' sizes %s do not match the forward result's "
                           "sizes %s", fn, what, mft__fmt_dims(b1, sizeof b1, t->ndim, t->sizes),
                           mft__fmt_dims(b2, sizeof b2, x->ndim, want));
        else
            mft__set_error(MFT_ERR_SHAPE, "%s: '%s' sizes %s do not have the rank of the input "
                           "sizes %s", fn, what, mft__fmt_dims(b1, sizeof b1, t->ndim, t->sizes),
                           mft__fmt_dims(b2, sizeof b2, x->ndim, x->sizes));
        return false;
    }
    return true;
}

bool mft__pool_check_backward(const char *fn, int nsp, const mft_tensor *grad_out,
                              const mft_tensor *x, pm_geom *g) {
    char b1[MFT__DIMS_BUF], b2[MFT__DIMS_BUF];
    if (!grad_out) {
        mft__null_arg(fn, "grad_out");
        return false;
    }
    if (!mft__pool_check_x(fn, x, nsp, "x") ||
        !mft__pool_check_like(fn, "grad_out", grad_out, x, x->dtype, NULL))
        return false;
    const int batched = x->ndim == nsp + 2;
    bool ok = true;
    for (int d = 0; d <= batched; d++) ok = ok && grad_out->sizes[d] == x->sizes[d];
    for (int d = batched + 1; d < x->ndim; d++)
        ok = ok && grad_out->sizes[d] >= 1 && grad_out->sizes[d] <= POOL_MAX_PARAM;
    if (!ok) {
        mft__set_error(MFT_ERR_SHAPE, "%s: 'grad_out' sizes %s do not fit the input sizes %s "
                       "(same batch and channels, spatial sizes >= 1)", fn,
                       mft__fmt_dims(b1, sizeof b1, grad_out->ndim, grad_out->sizes),
                       mft__fmt_dims(b2, sizeof b2, x->ndim, x->sizes));
        return false;
    }
    memset(g, 0, sizeof *g);
    g->N = batched ? x->sizes[0] : 1;
    g->C = x->sizes[batched];
    for (int e = 0; e < 3; e++) g->in[e] = g->out[e] = 1;
    for (int i = 0; i < nsp; i++) {
        g->in[3 - nsp + i] = x->sizes[batched + 1 + i];
        g->out[3 - nsp + i] = grad_out->sizes[batched + 1 + i];
    }
    return true;
}

bool mft__pool_indices_arg(const char *fn, const mft_tensor *x, mft_tensor **indices) {
    if (indices) *indices = NULL;
    if (!indices) {
        if (!x) mft__null_arg(fn, "x");
        else mft__set_error(MFT_ERR_NULL, "%s: argument 'indices' is NULL", fn);
        return false;
    }
    return true;
}

/* ---------------------------------------------------------------- running */
/* Internal (rank 4 for nsp 1-2, rank 5 for nsp 3) view of a public tensor. */
static mft_tensor *pm_view_in(const mft_tensor *t, int nsp) {
    const int R = nsp == 3 ? 5 : 4;
    const int batched = t->ndim == nsp + 2;
    if (batched && nsp != 1) return mft_tensor_retain((mft_tensor *)t);
    int64_t sz[5];
    int k = 0;
    sz[k++] = batched ? t->sizes[0] : 1;
    sz[k++] = t->sizes[batched];
    if (nsp == 1) sz[k++] = 1;
    for (int i = 0; i < nsp; i++) sz[k++] = t->sizes[batched + 1 + i];
    return mft_view(t, R, sz);
}

/* ---------------------------------------------------------------- autograd
 * The node of a rank-generic forward pool (pm_ag_params, pool_internal.h). */
static mft_status pm_node_backward(const mft__ag_node *n, mft_tensor *const *gout,
                                   mft_tensor **gin) {
    const pm_ag_params *p = n->params;
    const mft_tensor *x = n->saved[0], *idx = n->nsaved > 1 ? n->saved[1] : NULL;
    mft_tensor *g = NULL;
    switch (p->kind) {
    case PM_AG_MAX:
        g = p->nsp == 1 ? mft_max_pool1d_backward(gout[0], x, idx)
                        : mft_max_pool3d_backward(gout[0], x, idx);
        break;
    case PM_AG_AVG:
        g = p->nsp == 1 ? mft_avg_pool1d_backward(gout[0], x, p->kernel, p->stride, p->padding,
                                                  p->ceil_mode, p->count_include_pad)
                        : mft_avg_pool3d_backward(gout[0], x, p->kernel, p->stride, p->padding,
                                                  p->ceil_mode, p->count_include_pad,
                                                  p->divisor_override);
        break;
    case PM_AG_ADAPT_MAX:
        g = p->nsp == 3 ? mft_adaptive_max_pool3d_backward(gout[0], x, idx)
                        : mft_adaptive_max_pool2d_backward(gout[0], x, idx);
        break;
    case PM_AG_ADAPT_AVG:
        g = p->nsp == 3 ? mft_adaptive_avg_pool3d_backward(gout[0], x)
                        : mft_adaptive_avg_pool2d_backward(gout[0], x);
        break;
    }
    gin[0] = g;
    return g ? MFT_OK : mft_last_error();
}

mft_tensor *mft__pool_hand_over(const char *fn, bool ok, mft_tensor *const res[2],
                                mft_tensor **second, const pool_node *node) {
    if (!ok) {
        mft__relabel_error(fn);
        mft_tensor_release(res[0]);
        mft_tensor_release(res[1]);
        return NULL;
    }
    /* hand the results to the caller (registered in the innermost scope) */
    mft_tensor *r = mft__retain_result(fn, res[0]);
    mft_tensor *r2 = NULL;
    if (r && second) {
        r2 = mft__retain_result(fn, res[1]);
        if (!r2) r = NULL; /* only fails inside a scope, which then owns r */
    }
    if (r && node) {
        const mft_tensor *saved[2] = {node->x, res[1]};
        if (mft__ag_record(fn, node->name, node->backward, 1, &node->x, 1, &r, node->nsaved,
                           saved, node->params, node->params_size) != MFT_OK) {
            mft__ag_drop_result(r);
            if (r2) mft__ag_drop_result(r2);
            r = r2 = NULL;
        }
    }
    mft_tensor_release(res[0]);
    mft_tensor_release(res[1]);
    if (second) *second = r2;
    return r;
}

mft_tensor *mft__pool_execute(const pm_exec *e, mft_tensor **second) {
    const char *fn = e->fn;
    const int R = e->nsp == 3 ? 5 : 4;
    const bool grad_was = e->rec ? mft_set_grad_enabled(false) : true;
    mft__scope_suspend();
    mft_tensor *ins[2] = {NULL, NULL}, *outs[2] = {NULL, NULL}, *res[2] = {NULL, NULL};
    bool ok = true;
    for (int i = 0; ok && i < e->nin; i++) {
        ins[i] = pm_view_in(e->in[i], e->nsp);
        ok = ins[i] != NULL;
    }
    for (int i = 0; ok && i < e->nout; i++) {
        outs[i] = mft__pool_alloc_out(fn, R, e->osz, e->odt[i], e->fmt);
        ok = outs[i] != NULL;
    }
    if (ok) {
        const mft_tensor *cin[2] = {ins[0], ins[1]};
        const bool convert[2] = {true, true};
        ok = mft__dispatch(fn, mft__pool_tables, e->op, e->fmt, e->odt[0], e->nin, cin, convert,
                           e->nout, outs, e->params) == MFT_OK;
    }
    for (int i = 0; ok && i < e->nout; i++) {
        res[i] = e->prank == R ? mft_tensor_retain(outs[i]) : mft_view(outs[i], e->prank, e->psz);
        ok = res[i] != NULL;
        if (ok) {
            mft__decision d = e->dec;
            d.op = e->fn + 4; /* "mft_max_pool3d" -> "max_pool3d" */
            mft__rule_apply(res[i], &d);
        }
    }
    mft__scope_resume();
    if (e->rec) mft_set_grad_enabled(grad_was);
    for (int i = 0; i < 2; i++) {
        mft_tensor_release(ins[i]);
        mft_tensor_release(outs[i]);
    }
    const pool_node node = {e->ag_name, pm_node_backward, e->in[0], e->nout, e->ag_params,
                            sizeof(pm_ag_params)};
    return mft__pool_hand_over(fn, ok, res, second, e->rec ? &node : NULL);
}

void mft__pool_sizes(pm_exec *e, const mft_tensor *x, int nsp, const pm_geom *g, bool from_in) {
    const int R = nsp == 3 ? 5 : 4;
    const int batched = x->ndim == nsp + 2;
    e->nsp = nsp;
    e->osz[0] = g->N;
    e->osz[1] = g->C;
    for (int i = 0; i < R - 2; i++) e->osz[2 + i] = from_in ? g->in[5 - R + i] : g->out[5 - R + i];
    e->prank = x->ndim;
    int k = 0;
    if (batched) e->psz[k++] = g->N;
    e->psz[k++] = g->C;
    for (int i = 0; i < nsp; i++) e->psz[k++] = from_in ? g->in[3 - nsp + i] : g->out[3 - nsp + i];
    /* from_in: a backward, whose result is x's gradient (op named in mft__pool_execute) */
    e->dec = mft__rule_decide(from_in ? MFT__RULE_BACKWARD : MFT__RULE_POOL, NULL, 1, &x,
                              MFT_CONTIGUOUS, batched ? 0 : MFT__DECIDE_UNBATCHED);
    e->fmt = e->dec.tag;
}

void mft__pool_params2(const pm_geom *g, mft_pool2d_params *p) {
    memset(p, 0, sizeof *p);
    for (int i = 0; i < 2; i++) {
        p->kernel[i] = g->k[1 + i];
        p->stride[i] = g->s[1 + i];
        p->padding[i] = g->p[1 + i];
        p->dilation[i] = g->d[1 + i];
    }
    p->ceil_mode = g->ceil_mode;
    p->count_include_pad = g->count_include_pad;
    p->divisor_override = g->divisor_override;
}

static void pm_params3(const pm_geom *g, mft_pool3d_params *p) {
    memset(p, 0, sizeof *p);
    for (int i = 0; i < 3; i++) {
        p->kernel[i] = g->k[i];
        p->stride[i] = g->s[i];
        p->padding[i] = g->p[i];
        p->dilation[i] = g->d[i];
    }
    p->ceil_mode = g->ceil_mode;
    p->count_include_pad = g->count_include_pad;
    p->divisor_override = g->divisor_override;
}

mft_tensor *mft__pool_forward(const char *fn, int nsp, bool is_max, const mft_tensor *x,
                              const pm_req *q, mft_tensor **indices) {
    pm_geom g;
    if (!mft__pool_check_x(fn, x, nsp, "x") || !mft__pool_check_params(fn, nsp, is_max, x, q, &g))
        return NULL;
    pm_exec e;
    memset(&e, 0, sizeof e);
    e.fn = fn;
    e.nin = 1;
    e.in[0] = x;
    e.nout = is_max ? 2 : 1;
    e.odt[0] = x->dtype;
    e.odt[1] = MFT_I64;
    mft__pool_sizes(&e, x, nsp, &g, false);
    mft_pool2d_params p2;
    mft_pool3d_params p3;
    if (nsp == 3) {
        pm_params3(&g, &p3);
        e.params = &p3;
        e.op = is_max ? MFT__OP_MAX_POOL3D : MFT__OP_AVG_POOL3D;
    } else {
        mft__pool_params2(&g, &p2);
        e.params = &p2;
        e.op = is_max ? MFT__OP_MAX_POOL2D : MFT__OP_AVG_POOL2D;
    }
    pm_ag_params ap;
    if (mft__ag_wants(1, &x)) {
        static const char *const names[2][4] = {{"", "avg_pool1d", "", "avg_pool3d"},
                                                {"", "max_pool1d", "", "max_pool3d"}};
        memset(&ap, 0, sizeof ap);
        ap.kind = is_max ? PM_AG_MAX : PM_AG_AVG;
        ap.nsp = nsp;
        for (int i = 0; i < nsp; i++) {
            ap.kernel[i] = q->kernel[i];
            ap.stride[i] = q->stride ? q->stride[i] : 0; /* 0: the kernel size */
            ap.padding[i] = q->padding ? q->padding[i] : 0;
            ap.dilation[i] = q->dilation ? q->dilation[i] : 1;
        }
        ap.ceil_mode = q->ceil_mode;
        ap.count_include_pad = q->count_include_pad;
        ap.divisor_override = q->divisor_override;
        e.rec = true;
        e.ag_name = names[is_max][nsp];
        e.ag_params = &ap;
    }
    return mft__pool_execute(&e, indices);
}

mft_tensor *mft__pool_avg_backward(const char *fn, int nsp, const mft_tensor *grad_out,
                                   const mft_tensor *x, const pm_req *q) {
    pm_geom g;
    if (!grad_out) {
        mft__null_arg(fn, "grad_out");
        return NULL;
    }
    if (!mft__pool_check_x(fn, x, nsp, "x") || !mft__pool_check_params(fn, nsp, false, x, q, &g))
        return NULL;
    pm_exec e;
    memset(&e, 0, sizeof e);
    mft__pool_sizes(&e, x, nsp, &g, false);
    if (!mft__pool_check_like(fn, "grad_out", grad_out, x, x->dtype, e.psz)) return NULL;
    mft__pool_sizes(&e, x, nsp, &g, true);
    e.fn = fn;
    e.nin = 1;
    e.in[0] = grad_out;
    e.nout = 1;
    e.odt[0] = x->dtype;
    mft_pool2d_params p2;
    mft_pool3d_params p3;
    if (nsp == 3) {
        pm_params3(&g, &p3);
        e.params = &p3;
        e.op = MFT__OP_AVG_POOL3D_BACKWARD;
    } else {
        mft__pool_params2(&g, &p2);
        e.params = &p2;
        e.op = MFT__OP_AVG_POOL2D_BACKWARD;
    }
    return mft__pool_execute(&e, NULL);
}

mft_tensor *mft__pool_max_backward(const char *fn, int nsp, const mft_tensor *grad_out,
                                   const mft_tensor *x, const mft_tensor *indices,
                                   const mft_pool2d_params *windows) {
    pm_geom g;
    if (!mft__pool_check_backward(fn, nsp, grad_out, x, &g) ||
        !mft__pool_check_like(fn, "indices", indices, x, MFT_I64, grad_out->sizes))
        return NULL;
    pm_exec e;
    memset(&e, 0, sizeof e);
    mft__pool_sizes(&e, x, nsp, &g, true);
    e.fn = fn;
    e.op = nsp == 3 ? MFT__OP_MAX_POOL3D_BACKWARD : MFT__OP_MAX_POOL2D_BACKWARD;
    e.nin = 2;
    e.in[0] = grad_out;
    e.in[1] = indices;
    e.nout = 1;
    e.odt[0] = x->dtype;
    e.params = windows;
    return mft__pool_execute(&e, NULL);
}
