/* ops/conv/entry.c — convolutions (mft/conv.h): the entry points mft_conv1d/2d/3d,
 * mft_conv_transpose2d and their backward functions (validate -> decide the
 * format (docs/spec.md §4) -> allocate -> mft__dispatch), and the autograd node.
 * The kernels they dispatch to: the fast F32 kernels' table in chains.c
 * (searched first), the naive reference kernels of the six dispatched ops
 * (conv2d, conv3d and their _backward_input / _backward_weight ops), which
 * define the semantics (PyTorch's), in reference.c.
 *
 * Shapes seen by the kernels (mft_conv_params in mft/conv.h): rank 4
 * (N,C,H,W) or 5 (N,C,D,H,W); 2-D runs as 3-D with D = 1 inside the
 * reference kernels. Entry points add the batch dim for unbatched inputs and
 * turn 1-D into 2-D with H = 1 (x unsqueezed at dim 2, w too).
 *
 * Formats: forward and transposed results are CHANNELS_LAST if x's or w's
 * tag is channels-last, else CONTIGUOUS; 1-D results keep x's tag (its
 * rank-3 CHANNELS_LAST is N,L,C). Backward: grad_x in x's tag (dispatched in
 * it), grad_w computed in the conv format then packed in w's tag, grad_b
 * (C_out) contiguous. conv2d (F32) on packed nChw16c activations with a
 * plain or 16-blocked weight and groups 1, or on a plain 4-D input with a
 * 16-blocked weight (OIhw16i16o, Ohwi16o: Note [Conv weight maps]), runs
 * blocked16.c, and depthwise with multiplier 1 and a plain weight on nChw16c
 * activations depthwise_blocked16.c, dispatched in MFT_NCHW16C: the result
 * and grad_x nChw16c, grad_w in w's layout, no conversion; other blocked
 * operands take the
 * counted fallback (Note [Blocked fallback]).
 *
 * Autograd: the forward entry points record one tape node (conv_record)
 * whose backward calls the public backward functions, asking only for the
 * gradients that are needed. */
#include <stdio.h>
#include <string.h>
#include "autograd_internal.h"
#include "mft/conv.h"
#include "conv_internal.h"
#include "blocked_outputs.h"

/* Note [Kernel tables]: the built-in kernels this family dispatches to. */
static const mft__kernel_def *const g_tables[] = {mft__kernels_conv_fast, mft__kernels_conv, NULL};

/* Largest stride/padding/dilation/output_padding accepted: keeps the size
 * arithmetic far from int64 overflow. */
#define CONV_MAX_PARAM ((int64_t)1 << 30)

/* ---------------------------------------------------------------- argument checks */
typedef struct conv_req {
    const char *fn;
    int nsp;          /* 1, 2 or 3: spatial dims of the user's tensors */
    bool transposed;  /* conv_transpose2d */
    const mft_tensor *x, *w, *b;
    const int64_t *stride, *padding, *dilation, *output_padding;
    int64_t groups;
    bool b16;         /* native nChw16c (conv_b16_native) */
} conv_req;

/* What conv_check derives. */
typedef struct conv_geom {
    bool batched;
    int krank;               /* 4 or 5: rank of the kernel's tensors */
    mft_conv_params p;       /* kernel parameters (1-D: H-dim entries 1/0/1) */
    int64_t out[5];          /* kernel-rank output sizes (N, C_out, sp...) */
    int64_t user_out[5];     /* user-rank output sizes */
    int user_out_rank;
    int64_t c_out;
} conv_geom;

static bool conv_dtype_ok(mft_dtype dt) { return dt == MFT_F32 || dt == MFT_F64; }

static bool conv_check(const conv_req *r, conv_geom *g) {
    const char *fn = r->fn;
    const mft_tensor *x = r->x, *w = r->w, *b = r->b;
    const int nsp = r->nsp;
    char b1[MFT__DIMS_BUF], b2[MFT__DIMS_BUF], b3[MFT__DIMS_BUF];
    if (!x) {
        mft__null_arg(fn, "x");
        return false;
    }
    if (!w) {
        mft__null_arg(fn, "w");
        return false;
    }
    memset(g, 0, sizeof *g);
    if (x->ndim != nsp + 2 && x->ndim != nsp + 1) {
        mft__set_error(MFT_ERR_RANK,
                       "%s: expected a %d-D (batched) or %d-D (unbatched) input x, got rank %d "
                       "with sizes %s",
                       fn, nsp + 2, nsp + 1, x->ndim, mft__fmt_dims(b1, sizeof b1, x->ndim, x->sizes));
        return false;
    }
    if (!conv_dtype_ok(x->dtype)) {
        mft__set_error(MFT_ERR_DTYPE, "%s: dtype %s of x is not supported (f32 and f64 only)", fn,
                       mft_dtype_name(x->dtype));
        return false;
    }
    if (w->dtype != x->dtype) {
        mft__set_error(MFT_ERR_DTYPE, "%s: weight dtype %s differs from input dtype %s", fn,
                       mft_dtype_name(w->dtype), mft_dtype_name(x->dtype));
        return false;
    }
    if (w->ndim != nsp + 2) {
        mft__set_error(MFT_ERR_RANK, "%s: expected a %d-D weight w, got rank %d with sizes %s", fn,
                       nsp + 2, w->ndim, mft__fmt_dims(b1, sizeof b1, w->ndim, w->sizes));
        return false;
    }
    g->batched = x->ndim == nsp + 2;
    const int off = g->batched ? 1 : 0;
    for (int d = off; d < x->ndim; d++)
        if (x->sizes[d] == 0) {
            mft__set_error(MFT_ERR_SHAPE, "%s: input sizes %s have a zero non-batch dim", fn,
                           mft__fmt_dims(b1, sizeof b1, x->ndim, x->sizes));
            return false;
        }
    for (int d = 0; d < w->ndim; d++)
        if (w->sizes[d] == 0) {
            mft__set_error(MFT_ERR_SHAPE, "%s: weight sizes %s have a zero dim", fn,
                           mft__fmt_dims(b1, sizeof b1, w->ndim, w->sizes));
            return false;
        }
    const int64_t c_in = x->sizes[off];
    if (r->groups <= 0) {
        mft__set_error(MFT_ERR_INVALID, "%s: groups %lld should be positive", fn,
                       (long long)r->groups);
        return false;
    }
    if (c_in % r->groups != 0) {
        mft__set_error(MFT_ERR_SHAPE, "%s: input channels %lld are not divisible by groups %lld",
                       fn, (long long)c_in, (long long)r->groups);
        return false;
    }
    int64_t c_out;
    if (!r->transposed) {
        if (w->sizes[0] % r->groups != 0) {
            mft__set_error(MFT_ERR_SHAPE,
                           "%s: output channels %lld (weight sizes %s) are not divisible by groups "
                           "%lld",
                           fn, (long long)w->sizes[0], mft__fmt_dims(b1, sizeof b1, w->ndim, w->sizes),
                           (long long)r->groups);
            return false;
        }
        if (w->sizes[1] * r->groups != c_in) {
            mft__set_error(MFT_ERR_SHAPE,
                           "%s: weight sizes %s with groups %lld expect %lld input channels, input "
                           "sizes %s have %lld",
                           fn, mft__fmt_dims(b1, sizeof b1, w->ndim, w->sizes), (long long)r->groups,
                           (long long)(w->sizes[1] * r->groups),
                           mft__fmt_dims(b2, sizeof b2, x->ndim, x->sizes), (long long)c_in);
            return false;
        }
        c_out = w->sizes[0];
    } else {
        if (w->sizes[0] != c_in) {
            mft__set_error(MFT_ERR_SHAPE,
                           "%s: weight sizes %s expect %lld input channels (dim 0), input sizes %s "
                           "have %lld",
                           fn, mft__fmt_dims(b1, sizeof b1, w->ndim, w->sizes), (long long)w->sizes[0],
                           mft__fmt_dims(b2, sizeof b2, x->ndim, x->sizes), (long long)c_in);
            return false;
        }
        c_out = w->sizes[1] * r->groups;
    }
    g->c_out = c_out;
    if (b) {
        if (b->dtype != x->dtype) {
            mft__set_error(MFT_ERR_DTYPE, "%s: bias dtype %s differs from input dtype %s", fn,
                           mft_dtype_name(b->dtype), mft_dtype_name(x->dtype));
            return false;
        }
        if (b->ndim != 1 || b->sizes[0] != c_out) {
            mft__set_error(MFT_ERR_SHAPE, "%s: bias sizes %s should be [%lld] (output channels)", fn,
                           mft__fmt_dims(b1, sizeof b1, b->ndim, b->sizes), (long long)c_out);
            return false;
        }
    }
    /* parameters, user order */
    int64_t st[3], pd[3], dl[3], op[3];
    for (int d = 0; d < nsp; d++) {
        st[d] = r->stride ? r->stride[d] : 1;
        pd[d] = r->padding ? r->padding[d] : 0;
        dl[d] = r->dilation ? r->dilation[d] : 1;
        op[d] = r->output_padding ? r->output_padding[d] : 0;
    }
    for (int d = 0; d < nsp; d++) {
        if (st[d] <= 0) {
            mft__set_error(MFT_ERR_INVALID, "%s: stride %s should be positive", fn,
                           mft__fmt_dims(b1, sizeof b1, nsp, st));
            return false;
        }
        if (dl[d] <= 0) {
            mft__set_error(MFT_ERR_INVALID, "%s: dilation %s should be positive", fn,
                           mft__fmt_dims(b1, sizeof b1, nsp, dl));
            return false;
        }
        if (pd[d] < 0) {
            mft__set_error(MFT_ERR_INVALID, "%s: padding %s should be non-negative", fn,
                           mft__fmt_dims(b1, sizeof b1, nsp, pd));
            return false;
        }
        if (op[d] < 0) {
            mft__set_error(MFT_ERR_INVALID, "%s: output_padding %s should be non-negative", fn,
                           mft__fmt_dims(b1, sizeof b1, nsp, op));
            return false;
        }
    }
    for (int d = 0; d < nsp; d++) {
        const int64_t *v[4] = {st, pd, dl, op};
        static const char *const names[4] = {"stride", "padding", "dilation", "output_padding"};
        for (int k = 0; k < 4; k++)
            if (v[k][d] > CONV_MAX_PARAM) {
                mft__set_error(MFT_ERR_OVERFLOW, "%s: %s %s is too large (at most %lld)", fn,
                               names[k], mft__fmt_dims(b1, sizeof b1, nsp, v[k]),
                               (long long)CONV_MAX_PARAM);
                return false;
            }
        if (op[d] >= st[d] && op[d] >= dl[d]) {
            mft__set_error(MFT_ERR_INVALID,
                           "%s: output_padding %s should be smaller than stride %s or dilation %s",
                           fn, mft__fmt_dims(b1, sizeof b1, nsp, op),
                           mft__fmt_dims(b2, sizeof b2, nsp, st),
                           mft__fmt_dims(b3, sizeof b3, nsp, dl));
            return false;
        }
    }
    /* output sizes */
    int64_t osp[3];
    for (int d = 0; d < nsp; d++) {
        const int64_t in = x->sizes[off + 1 + d], k = w->sizes[2 + d];
        if (k - 1 > INT64_MAX / 4 / dl[d]) {
            mft__set_error(MFT_ERR_OVERFLOW, "%s: kernel size %lld with dilation %lld overflows", fn,
                           (long long)k, (long long)dl[d]);
            return false;
        }
        const int64_t ext = dl[d] * (k - 1) + 1; /* dilated kernel extent */
        if (!r->transposed) {
            const int64_t padded = in + 2 * pd[d];
            if (padded < ext) {
                mft__set_error(MFT_ERR_SHAPE,
                               "%s: kernel larger than padded input: padded input size %lld "
                               "(input %lld + 2*padding %lld) < dilated kernel size %lld (kernel "
                               "%lld, dilation %lld) in spatial dim %d",
                               fn, (long long)padded, (long long)in, (long long)pd[d],
                               (long long)ext, (long long)k, (long long)dl[d], d);
                return false;
            }
            osp[d] = (padded - ext) / st[d] + 1;
        } else {
            if (in - 1 > INT64_MAX / 4 / st[d]) {
                mft__set_error(MFT_ERR_OVERFLOW, "%s: input size %lld with stride %lld overflows",
                               fn, (long long)in, (long long)st[d]);
                return false;
            }
            osp[d] = (in - 1) * st[d] - 2 * pd[d] + ext + op[d];
            if (osp[d] <= 0) {
                mft__set_error(MFT_ERR_SHAPE,
                               "%s: output size %lld is not positive in spatial dim %d (input %lld, "
                               "stride %lld, padding %lld, kernel %lld, dilation %lld, "
                               "output_padding %lld)",
                               fn, (long long)osp[d], d, (long long)in, (long long)st[d],
                               (long long)pd[d], (long long)k, (long long)dl[d], (long long)op[d]);
                return false;
            }
        }
    }
    /* kernel params and sizes */
    const int ksp = nsp == 3 ? 3 : 2;
    g->krank = ksp + 2;
    g->p.nspatial = ksp;
    g->p.groups = r->groups;
    g->p.bias = b;
    const int first = ksp - nsp; /* 1 for 1-D: H entry is the dummy */
    for (int d = 0; d < ksp; d++) {
        g->p.stride[d] = d < first ? 1 : st[d - first];
        g->p.padding[d] = d < first ? 0 : pd[d - first];
        g->p.dilation[d] = d < first ? 1 : dl[d - first];
        g->out[2 + d] = d < first ? 1 : osp[d - first];
    }
    g->out[0] = g->batched ? x->sizes[0] : 1;
    g->out[1] = c_out;
    int64_t numel = 1;
    for (int d = 0; d < g->krank; d++) {
        if (g->out[d] != 0 && numel > INT64_MAX / g->out[d]) {
            mft__set_error(MFT_ERR_OVERFLOW, "%s: output sizes %s overflow int64", fn,
                           mft__fmt_dims(b1, sizeof b1, g->krank, g->out));
            return false;
        }
        numel *= g->out[d];
    }
    g->user_out_rank = x->ndim;
    int k = 0;
    if (g->batched) g->user_out[k++] = g->out[0];
    g->user_out[k++] = c_out;
    for (int d = 0; d < nsp; d++) g->user_out[k++] = osp[d];
    return true;
}

/* ---------------------------------------------------------------- views */
/* Kernel-rank view of a user activation (x, y, grad): adds N, and H for 1-D.
 * New reference (outside any scope: callers suspend it). */
static mft_tensor *conv_to_kernel(const mft_tensor *t, int nsp, bool batched) {
    mft_tensor *a = batched ? mft_tensor_retain((mft_tensor *)t) : mft_unsqueeze(t, 0);
    if (!a || nsp != 1) return a;
    mft_tensor *c = mft_unsqueeze(a, 2);
    mft_tensor_release(a);
    return c;
}

/* Batched (N-dim) view of a user activation. */
static mft_tensor *conv_batched(const mft_tensor *t, bool batched) {
    return batched ? mft_tensor_retain((mft_tensor *)t) : mft_unsqueeze(t, 0);
}

static mft_tensor *conv_weight_to_kernel(const mft_tensor *w, int nsp) {
    return nsp == 1 ? mft_unsqueeze(w, 2) : mft_tensor_retain((mft_tensor *)w);
}

/* The user-rank view of a kernel-rank activation: drops H for 1-D (the tag
 * then set from `tag`), and N when unbatched. */
static mft_tensor *conv_from_kernel(mft_tensor *t, int nsp, bool batched, mft_format tag) {
    mft_tensor *a = nsp == 1 ? mft_squeeze(t, 2) : mft_tensor_retain(t);
    if (!a) return NULL;
    if (nsp == 1) mft__tensor_set_tag_from(a, tag);
    if (batched) return a;
    mft_tensor *c = mft_squeeze(a, 0);
    mft_tensor_release(a);
    return c;
}

/* The conv format (docs/spec.md §4): the row of tensor/rules.def for this conv,
 * applied to the batched x view and w. */
static mft__decision conv_decide(const conv_req *r, const mft_tensor *xb) {
    static const mft__rule_id rows[4] = {MFT__RULE_CONV2D, MFT__RULE_CONV1D, MFT__RULE_CONV2D,
                                         MFT__RULE_CONV3D};
    static const char *const names[4] = {"conv2d", "conv1d", "conv2d", "conv3d"};
    const mft_tensor *ops[2] = {xb, r->w};
    if (r->transposed)
        return mft__rule_decide(MFT__RULE_CONV_TRANSPOSE2D, "conv_transpose2d", 2, ops,
                                MFT_CONTIGUOUS, 0);
    return mft__rule_decide(rows[r->nsp], names[r->nsp], 2, ops, MFT_CONTIGUOUS, 0);
}

static mft__op_id conv_op(int nsp, int kind) { /* kind 0 fwd, 1 bwd input, 2 bwd weight */
    static const mft__op_id ops2[3] = {MFT__OP_CONV2D, MFT__OP_CONV2D_BACKWARD_INPUT,
                                       MFT__OP_CONV2D_BACKWARD_WEIGHT};
    static const mft__op_id ops3[3] = {MFT__OP_CONV3D, MFT__OP_CONV3D_BACKWARD_INPUT,
                                       MFT__OP_CONV3D_BACKWARD_WEIGHT};
    return nsp == 3 ? ops3[kind] : ops2[kind];
}

/* Allocates out (kernel-rank sizes in fmt) and dispatches op on {a, b}.
 * Returns the output (new reference) or NULL. Scope must be suspended. */
static mft_tensor *conv_run(const char *fn, mft__op_id op, mft_format fmt, int krank,
                            const int64_t *sizes, const mft_tensor *a, const mft_tensor *b,
                            bool convert_b, const mft_conv_params *p) {
    /* the nChw16c kernels write every lane (blocked16.c): no zeroing */
    mft_tensor *out = fmt == MFT_NCHW16C
                          ? mft__tensor_alloc_unzeroed(fn, krank, sizes, a->dtype, fmt)
                          : mft__tensor_alloc(fn, krank, sizes, a->dtype, fmt);
    if (!out) return NULL;
    const mft_tensor *ins[2] = {a, b};
    /* the nChw16c kernels read a plain input (first layer) in place */
    const bool convert[2] = {fmt != MFT_NCHW16C || a->nblocks, convert_b};
    mft_tensor *outs[1] = {out};
    if (mft__dispatch(fn, g_tables, op, fmt, a->dtype, 2, ins, convert, 1, outs, p) != MFT_OK) {
        mft_tensor_release(out);
        return NULL;
    }
    mft__tensor_set_tag_from(out, fmt);
    return out;
}

/* ---------------------------------------------------------------- autograd
 * One node per recorded conv (Note [Tape] in mft/autograd.h): inputs {x, w,
 * b} (b may be NULL), saved {x, w}, params conv_ag_params (the user's
 * arguments with the defaults filled in). The node backward calls the public
 * backward function asking only for the gradients whose inputs need grad, so
 * the first layer of a network (x a constant image batch) never dispatches a
 * convNd_backward_input op. Those functions already produce grad_x in x's
 * format, grad_w in w's and grad_b packed (docs/spec.md §5): the engine converts
 * nothing. */
typedef struct conv_ag_params {
    int nsp;          /* 1, 2 or 3 */
    bool transposed;  /* conv_transpose2d */
    bool has_bias;
    int64_t stride[3], padding[3], dilation[3], output_padding[3];
    int64_t groups;
} conv_ag_params;

static mft_status conv_node_backward(const mft__ag_node *n, mft_tensor *const *gout,
                                     mft_tensor **gin) {
    const conv_ag_params *p = n->params;
    const mft_tensor *x = n->saved[0], *w = n->saved[1];
    mft_tensor **gx = n->in[0].needs_grad ? &gin[0] : NULL;
    mft_tensor **gw = n->in[1].needs_grad ? &gin[1] : NULL;
    mft_tensor **gb = p->has_bias && n->in[2].needs_grad ? &gin[2] : NULL;
    if (!gx && !gw && !gb) return MFT_OK;
    if (p->transposed)
        return mft_conv_transpose2d_backward(gout[0], x, w, p->stride, p->padding,
                                             p->output_padding, p->dilation, p->groups, gx, gw,
                                             gb);
    switch (p->nsp) {
    case 1:
        return mft_conv1d_backward(gout[0], x, w, p->stride, p->padding, p->dilation, p->groups,
                                   gx, gw, gb);
    case 2:
        return mft_conv2d_backward(gout[0], x, w, p->stride, p->padding, p->dilation, p->groups,
                                   gx, gw, gb);
    default:
        return mft_conv3d_backward(gout[0], x, w, p->stride, p->padding, p->dilation, p->groups,
                                   gx, gw, gb);
    }
}

/* Records the node for r's result y. On failure the error names r->fn. */
static mft_status conv_record(const conv_req *r, mft_tensor *y) {
    conv_ag_params p;
    memset(&p, 0, sizeof p);
    p.nsp = r->nsp;
    p.transposed = r->transposed;
    p.has_bias = r->b != NULL;
    p.groups = r->groups;
    for (int d = 0; d < r->nsp; d++) {
        p.stride[d] = r->stride ? r->stride[d] : 1;
        p.padding[d] = r->padding ? r->padding[d] : 0;
        p.dilation[d] = r->dilation ? r->dilation[d] : 1;
        p.output_padding[d] = r->output_padding ? r->output_padding[d] : 0;
    }
    static const char *const names[4] = {"", "conv1d", "conv2d", "conv3d"};
    const mft_tensor *ins[3] = {r->x, r->w, r->b};
    return mft__ag_record(r->fn, r->transposed ? "conv_transpose2d" : names[r->nsp],
                          conv_node_backward, 3, ins, 1, &y, 2, ins, &p, sizeof p);
}

/* ---------------------------------------------------------------- native nChw16c
 * conv2d, F32, runs natively with no conversion:
 *  - groups 1, the kernels of ops/conv/blocked16.c (Note [nChw16c direct
 *    convolution]), when x is packed MFT_NCHW16C and w plain or blocked by
 *    16 on O / I (OIhw16i16o, Ohwi16o: Note [Conv weight maps]), or when x
 *    is plain (rank 4) and w blocked so: the blocked weight asks for an
 *    nChw16c result as a channels-last weight asks for a channels-last one
 *    (docs/spec.md §7.10);
 *  - depthwise with multiplier 1 (groups == C_in == C_out, a plain weight
 *    (C, 1, kh, kw)) on packed nChw16c x, the kernels of
 *    ops/conv/depthwise_blocked16.c (Note [nChw16c depthwise convolution]).
 * The bias is plain. Every other blocked case (other grouped convolutions,
 * depthwise multipliers > 1 included) keeps the counted fallback. */
static bool conv_b16_act(const mft_tensor *t) {
    return t && t->nblocks && t->dtype == MFT_F32 && t->ndim == 4 &&
           mft_tensor_is_contiguous(t, MFT_NCHW16C);
}
/* x (N, C, H, W) and w (C, 1, kh, kw) with groups C > 1 */
static bool conv_b16_depthwise(const mft_tensor *x, const mft_tensor *w, int64_t groups) {
    return groups > 1 && x->sizes[1] == groups && w->sizes[0] == groups && w->sizes[1] == 1;
}
static bool conv_b16_weight(const mft_tensor *w) {
    mft__conv_wmap m;
    return w && w->dtype == MFT_F32 && mft__conv_wmap_of(w, &m);
}
static bool conv_b16_native(const mft_tensor *x, const mft_tensor *w, const mft_tensor *b,
                            int64_t groups) {
    if (!w || (b && (b->nblocks || b->dtype != MFT_F32))) return false;
    if (groups != 1)
        return conv_b16_act(x) && !w->nblocks && w->dtype == MFT_F32 && w->ndim == 4 &&
               conv_b16_depthwise(x, w, groups);
    if (!conv_b16_weight(w)) return false;
    return conv_b16_act(x) ||
           (w->nblocks && x && !x->nblocks && x->dtype == MFT_F32 && x->ndim == 4);
}

/* ---------------------------------------------------------------- forward entry points */
/* Validates, runs the forward kernel and, when the thread records and an
 * input requires grad, records the node (its internal calls run with grad
 * mode off, so they record nothing of their own). */
static mft_tensor *conv_forward(const conv_req *r) {
    conv_geom g;
    if (!conv_check(r, &g)) return NULL;
    const char *fn = r->fn;
    const mft_tensor *ag_ins[3] = {r->x, r->w, r->b};
    const bool rec = mft__ag_wants(3, ag_ins);
    const bool grad_was = rec ? mft_set_grad_enabled(false) : true;
    mft__scope_suspend();
    mft_tensor *xb = conv_batched(r->x, g.batched);
    mft_tensor *xk = xb ? conv_to_kernel(r->x, r->nsp, g.batched) : NULL;
    mft_tensor *wk = xk ? conv_weight_to_kernel(r->w, r->nsp) : NULL;
    mft_tensor *yk = NULL, *res = NULL;
    if (wk) {
        /* the row decides the plain formats; a blocked result records the
         * row too, its tag coming from its descriptor (docs/spec.md §7.6) */
        const mft__decision d = conv_decide(r, xb);
        const mft_format fmt = r->b16 ? MFT_NCHW16C : d.tag;
        const int kind = r->transposed ? 1 : 0;
        yk = conv_run(fn, conv_op(r->nsp, kind), fmt, g.krank, g.out, xk, wk, false, &g.p);
        if (yk) res = conv_from_kernel(yk, r->nsp, g.batched, fmt);
        if (res && g.batched) mft__rule_apply(res, &d);
    }
    mft__scope_resume();
    if (rec) mft_set_grad_enabled(grad_was);
    mft_tensor_release(xb);
    mft_tensor_release(xk);
    mft_tensor_release(wk);
    mft_tensor_release(yk);
    if (!res) {
        mft__relabel_error(fn);
        return NULL;
    }
    mft_tensor *out = mft__retain_result(fn, res);
    mft_tensor_release(res);
    if (out && rec && conv_record(r, out) != MFT_OK) {
        mft__ag_drop_result(out);
        return NULL;
    }
    return out;
}

mft_tensor *mft_conv1d(const mft_tensor *x, const mft_tensor *w, const mft_tensor *b,
                       const int64_t stride[1], const int64_t padding[1],
                       const int64_t dilation[1], int64_t groups) {
    MFT__BLOCKED_FALLBACK("conv1d", mft_conv1d(x, w, b, stride, padding, dilation, groups), 3, &x,
                          &w, &b);
    conv_req r = {"mft_conv1d", 1, false, x, w, b, stride, padding, dilation, NULL, groups, false};
    return conv_forward(&r);
}

mft_tensor *mft_conv2d(const mft_tensor *x, const mft_tensor *w, const mft_tensor *b,
                       const int64_t stride[2], const int64_t padding[2],
                       const int64_t dilation[2], int64_t groups) {
    const bool b16 = conv_b16_native(x, w, b, groups);
    if (!b16)
        MFT__BLOCKED_FALLBACK("conv2d", mft_conv2d(x, w, b, stride, padding, dilation, groups), 3,
                              &x, &w, &b);
    conv_req r = {"mft_conv2d", 2, false, x, w, b, stride, padding, dilation, NULL, groups, b16};
    return conv_forward(&r);
}

mft_tensor *mft_conv3d(const mft_tensor *x, const mft_tensor *w, const mft_tensor *b,
                       const int64_t stride[3], const int64_t padding[3],
                       const int64_t dilation[3], int64_t groups) {
    MFT__BLOCKED_FALLBACK("conv3d", mft_conv3d(x, w, b, stride, padding, dilation, groups), 3, &x,
                          &w, &b);
    conv_req r = {"mft_conv3d", 3, false, x, w, b, stride, padding, dilation, NULL, groups, false};
    return conv_forward(&r);
}

mft_tensor *mft_conv_transpose2d(const mft_tensor *x, const mft_tensor *w, const mft_tensor *b,
                                 const int64_t stride[2], const int64_t padding[2],
                                 const int64_t output_padding[2], const int64_t dilation[2],
                                 int64_t groups) {
    MFT__BLOCKED_FALLBACK(
        "conv_transpose2d",
        mft_conv_transpose2d(x, w, b, stride, padding, output_padding, dilation, groups), 3, &x, &w,
        &b);
    conv_req r = {"mft_conv_transpose2d", 2, true, x, w, b, stride, padding, dilation,
                  output_padding, groups, false};
    return conv_forward(&r);
}

/* ---------------------------------------------------------------- backward entry points */
static mft_status conv_backward(const conv_req *r, const mft_tensor *grad_out, mft_tensor **gx_out,
                                mft_tensor **gw_out, mft_tensor **gb_out) {
    const char *fn = r->fn;
    char b1[MFT__DIMS_BUF], b2[MFT__DIMS_BUF];
    if (gx_out) *gx_out = NULL;
    if (gw_out) *gw_out = NULL;
    if (gb_out) *gb_out = NULL;
    if (!grad_out) {
        mft__null_arg(fn, "grad_out");
        return MFT_ERR_NULL; /* the call's own status; the message keeps an earlier error */
    }
    conv_geom g;
    if (!conv_check(r, &g)) return mft_last_error();
    if (grad_out->dtype != r->x->dtype) {
        mft__set_error(MFT_ERR_DTYPE, "%s: grad_out dtype %s differs from input dtype %s", fn,
                       mft_dtype_name(grad_out->dtype), mft_dtype_name(r->x->dtype));
        return MFT_ERR_DTYPE;
    }
    bool same = grad_out->ndim == g.user_out_rank;
    for (int d = 0; same && d < g.user_out_rank; d++) same = grad_out->sizes[d] == g.user_out[d];
    if (!same) {
        mft__set_error(MFT_ERR_SHAPE, "%s: grad_out sizes %s differ from the output sizes %s", fn,
                       mft__fmt_dims(b1, sizeof b1, grad_out->ndim, grad_out->sizes),
                       mft__fmt_dims(b2, sizeof b2, g.user_out_rank, g.user_out));
        return MFT_ERR_SHAPE;
    }
    const int nsp = r->nsp;
    mft_tensor *gx = NULL, *gw = NULL, *gb = NULL;
    mft__scope_suspend();
    mft_tensor *xb = conv_batched(r->x, g.batched);
    mft_tensor *xk = xb ? conv_to_kernel(r->x, nsp, g.batched) : NULL;
    mft_tensor *gk = xk ? conv_to_kernel(grad_out, nsp, g.batched) : NULL;
    mft_tensor *wk = gk ? conv_weight_to_kernel(r->w, nsp) : NULL;
    bool ok = wk != NULL;
    const mft_conv_params pnb = {g.p.nspatial,
                                 {g.p.stride[0], g.p.stride[1], g.p.stride[2]},
                                 {g.p.padding[0], g.p.padding[1], g.p.padding[2]},
                                 {g.p.dilation[0], g.p.dilation[1], g.p.dilation[2]},
                                 g.p.groups,
                                 NULL};
    if (ok && gx_out) {
        const mft_format fx = r->b16 ? MFT_NCHW16C : xb->tag;
        mft__op_id op = r->transposed ? conv_op(nsp, 0) : conv_op(nsp, 1);
        mft_tensor *t = conv_run(fn, op, fx, g.krank, xk->sizes, gk, wk, false, &pnb);
        if (t) gx = conv_from_kernel(t, nsp, g.batched, fx);
        mft_tensor_release(t);
        ok = gx != NULL;
    }
    if (ok && gw_out && r->b16) {
        /* grad_w written through its weight map by the nChw16c kernel:
         * plain, or packed in w's blocks (zeroed: pad lanes stay 0) */
        if (r->w->nblocks) {
            mft_layout lw, lp;
            mft__layout_of(r->w, &lw);
            mft__layout_packed_like(&lw, &lp);
            gw = mft__tensor_alloc_layout(fn, &lp, MFT_F32);
        } else {
            gw = mft__tensor_alloc(fn, 4, wk->sizes, MFT_F32, MFT_CONTIGUOUS);
        }
        const mft_tensor *ins[2] = {gk, xk};
        const bool convert[2] = {true, xk->nblocks > 0};
        if (gw && mft__dispatch(fn, g_tables, conv_op(nsp, 2), MFT_NCHW16C, MFT_F32, 2, ins,
                                convert, 1, &gw, &pnb) != MFT_OK) {
            mft_tensor_release(gw);
            gw = NULL;
        }
        if (gw && !r->w->nblocks && r->w->tag != MFT_CONTIGUOUS) {
            mft__cause_push(MFT_CAUSE_GRADIENT, "conv");
            mft_tensor *u = mft_contiguous(gw, r->w->tag);
            mft__cause_pop();
            mft_tensor_release(gw);
            gw = u;
        }
        ok = gw != NULL;
    } else if (ok && gw_out) {
        const mft_format fmt = conv_decide(r, xb).tag;
        mft__op_id op = conv_op(nsp, 2);
        mft_tensor *t = r->transposed
                            ? conv_run(fn, op, fmt, g.krank, wk->sizes, xk, gk, true, &pnb)
                            : conv_run(fn, op, fmt, g.krank, wk->sizes, gk, xk, true, &pnb);
        mft_tensor *u = NULL;
        if (t) u = nsp == 1 ? mft_squeeze(t, 2) : mft_tensor_retain(t);
        mft__cause_push(MFT_CAUSE_GRADIENT, "conv");
        if (u) gw = mft_contiguous(u, r->w->tag);
        mft__cause_pop();
        mft_tensor_release(t);
        mft_tensor_release(u);
        ok = gw != NULL;
    }
    if (ok && gb_out && r->b16) {
        gb = mft__conv_b16_grad_bias(fn, grad_out);
        ok = gb != NULL;
    } else if (ok && gb_out) {
        int dims[5], n = 0;
        for (int d = 0; d < grad_out->ndim; d++)
            if (d != (g.batched ? 1 : 0)) dims[n++] = d;
        gb = mft_sum(grad_out, n, dims, false);
        ok = gb != NULL;
    }
    mft__scope_resume();
    mft_tensor_release(xb);
    mft_tensor_release(xk);
    mft_tensor_release(gk);
    mft_tensor_release(wk);
    mft_tensor *outs[3] = {gx, gw, gb};
    mft_tensor **dst[3] = {gx_out, gw_out, gb_out};
    mft_tensor *fin[3] = {NULL, NULL, NULL};
    for (int i = 0; ok && i < 3; i++) {
        if (!dst[i]) continue;
        fin[i] = mft__retain_result(fn, outs[i]);
        ok = fin[i] != NULL;
    }
    for (int i = 0; i < 3; i++) mft_tensor_release(outs[i]);
    if (!ok) {
        /* retaining a result fails only inside a scope, which then owns the
         * ones already handed over: they are not released here */
        mft_status st = mft__relabel_error(fn);
        return st == MFT_OK ? MFT_ERR_INTERNAL : st;
    }
    for (int i = 0; i < 3; i++)
        if (dst[i]) *dst[i] = fin[i];
    return MFT_OK;
}

mft_status mft_conv1d_backward(const mft_tensor *grad_out, const mft_tensor *x, const mft_tensor *w,
                               const int64_t stride[1], const int64_t padding[1],
                               const int64_t dilation[1], int64_t groups, mft_tensor **grad_x,
                               mft_tensor **grad_w, mft_tensor **grad_b) {
    MFT__BLOCKED_FALLBACK_OUTS_STATUS("conv1d_backward",
                                      mft_conv1d_backward(grad_out, x, w, stride, padding, dilation,
                                                          groups, grad_x, grad_w, grad_b),
                                      3, ((mft_tensor **[]){grad_x, grad_w, grad_b}),
                                      ((const mft_tensor *[]){x, w, NULL}), 3, &grad_out, &x, &w);
    conv_req r = {"mft_conv1d_backward", 1, false, x, w, NULL, stride, padding, dilation, NULL,
                  groups, false};
    return conv_backward(&r, grad_out, grad_x, grad_w, grad_b);
}

/* A blocked weight whose grad_w is native but whose grad_x is not (a plain
 * x, or stride > 1): grad_w and grad_b natively in w's layout, grad_x by
 * the call with w's plain copy (counted, cause fallback), which converts
 * what it needs itself. Results handed over only when both succeeded. */
static mft_status conv2d_backward_split(const mft_tensor *grad_out, const mft_tensor *x,
                                        const mft_tensor *w, const int64_t stride[2],
                                        const int64_t padding[2], const int64_t dilation[2],
                                        mft_tensor **grad_x, mft_tensor **grad_w,
                                        mft_tensor **grad_b) {
    static const char fn[] = "mft_conv2d_backward";
    mft_tensor *gx = NULL, *gw = NULL, *gb = NULL;
    *grad_x = NULL;
    if (grad_w) *grad_w = NULL;
    if (grad_b) *grad_b = NULL;
    mft__scope_suspend();
    mft__cause_push(MFT_CAUSE_FALLBACK, "conv2d_backward");
    mft_tensor *wp = mft_contiguous(w, MFT_CONTIGUOUS);
    mft__cause_pop();
    mft_status st = wp ? mft_conv2d_backward(grad_out, x, wp, stride, padding, dilation, 1, &gx,
                                             NULL, NULL)
                       : mft_last_error();
    if (st == MFT_OK && (grad_w || grad_b))
        st = mft_conv2d_backward(grad_out, x, w, stride, padding, dilation, 1, NULL,
                                 grad_w ? &gw : NULL, grad_b ? &gb : NULL);
    mft__scope_resume();
    mft_tensor_release(wp);
    mft_tensor *outs[3] = {gx, gw, gb}, **dst[3] = {grad_x, grad_w, grad_b};
    mft_tensor *fin[3] = {NULL, NULL, NULL};
    for (int i = 0; st == MFT_OK && i < 3; i++)
        if (dst[i] && !(fin[i] = mft__retain_result(fn, outs[i]))) st = mft_last_error();
    for (int i = 0; i < 3; i++) mft_tensor_release(outs[i]);
    if (st != MFT_OK) return st == MFT_OK ? MFT_ERR_INTERNAL : st;
    for (int i = 0; i < 3; i++)
        if (dst[i]) *dst[i] = fin[i];
    return MFT_OK;
}

mft_status mft_conv2d_backward(const mft_tensor *grad_out, const mft_tensor *x, const mft_tensor *w,
                               const int64_t stride[2], const int64_t padding[2],
                               const int64_t dilation[2], int64_t groups, mft_tensor **grad_x,
                               mft_tensor **grad_w, mft_tensor **grad_b) {
    bool b16 = conv_b16_act(grad_out) && conv_b16_native(x, w, NULL, groups);
    /* backward_input gives nChw16c: a plain x's gradient is not native;
     * groups 1 at stride 1 only (depthwise: any stride) */
    bool gx_native = !grad_x || (x && x->nblocks);
    for (int d = 0; b16 && grad_x && groups == 1 && d < 2; d++) {
        const int64_t s = stride ? stride[d] : 1, p = padding ? padding[d] : 0;
        const int64_t dl = dilation ? dilation[d] : 1;
        gx_native = gx_native && s == 1 && p >= 0 && p <= CONV_MAX_PARAM && dl > 0 &&
                    (p + dl - 1) / dl <= w->sizes[2 + d] - 1; /* p <= dl * (k - 1) */
    }
    if (b16 && !gx_native && w->nblocks)
        return conv2d_backward_split(grad_out, x, w, stride, padding, dilation, grad_x, grad_w,
                                     grad_b);
    b16 = b16 && gx_native;
    if (!b16)
        MFT__BLOCKED_FALLBACK_OUTS_STATUS(
            "conv2d_backward",
            mft_conv2d_backward(grad_out, x, w, stride, padding, dilation, groups, grad_x, grad_w,
                                grad_b),
            3, ((mft_tensor **[]){grad_x, grad_w, grad_b}), ((const mft_tensor *[]){x, w, NULL}), 3,
            &grad_out, &x, &w);
    conv_req r = {"mft_conv2d_backward", 2, false, x, w, NULL, stride, padding, dilation, NULL,
                  groups, b16};
    return conv_backward(&r, grad_out, grad_x, grad_w, grad_b);
}

mft_status mft_conv3d_backward(const mft_tensor *grad_out, const mft_tensor *x, const mft_tensor *w,
                               const int64_t stride[3], const int64_t padding[3],
                               const int64_t dilation[3], int64_t groups, mft_tensor **grad_x,
                               mft_tensor **grad_w, mft_tensor **grad_b) {
    MFT__BLOCKED_FALLBACK_OUTS_STATUS("conv3d_backward",
                                      mft_conv3d_backward(grad_out, x, w, stride, padding, dilation,
                                                          groups, grad_x, grad_w, grad_b),
                                      3, ((mft_tensor **[]){grad_x, grad_w, grad_b}),
                                      ((const mft_tensor *[]){x, w, NULL}), 3, &grad_out, &x, &w);
    conv_req r = {"mft_conv3d_backward", 3, false, x, w, NULL, stride, padding, dilation, NULL,
                  groups, false};
    return conv_backward(&r, grad_out, grad_x, grad_w, grad_b);
}

mft_status mft_conv_transpose2d_backward(const mft_tensor *grad_out, const mft_tensor *x,
                                         const mft_tensor *w, const int64_t stride[2],
                                         const int64_t padding[2], const int64_t output_padding[2],
                                         const int64_t dilation[2], int64_t groups,
                                         mft_tensor **grad_x, mft_tensor **grad_w,
                                         mft_tensor **grad_b) {
    MFT__BLOCKED_FALLBACK_OUTS_STATUS("conv_transpose2d_backward",
                                      mft_conv_transpose2d_backward(grad_out, x, w, stride, padding,
                                                                    output_padding, dilation,
                                                                    groups, grad_x, grad_w, grad_b),
                                      3, ((mft_tensor **[]){grad_x, grad_w, grad_b}),
                                      ((const mft_tensor *[]){x, w, NULL}), 3, &grad_out, &x, &w);
    conv_req r = {"mft_conv_transpose2d_backward", 2, true, x, w, NULL, stride, padding, dilation,
                  output_padding, groups, false};
    return conv_backward(&r, grad_out, grad_x, grad_w, grad_b);
}
