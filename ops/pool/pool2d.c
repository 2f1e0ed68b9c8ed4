/* ops/pool/pool2d.c — the entry points of 2-D max and average pooling and
 * the fused relu -> max pooling (mft/pool.h), forward and backward, each
 * dispatched by (op, format, dtype) (docs/architecture.md §7): the forward's parameter
 * checks, the rule for relu_max_pool2d's windows, its dispatched run and tape
 * node; the backward entry points run the machinery of common.c. The kernels:
 * max_nchw.c, max_nhwc.c, avg_nchw.c, avg_nhwc.c and reference.c (which
 * defines the semantics below).
 *
 * Semantics are PyTorch 1.13's (aten/src/ATen/native/Pool.h, MaxPoolKernel.cpp,
 * AvgPoolKernel.cpp):
 *   - out = floor_or_ceil((in + 2*pad - dilation*(kernel-1) - 1) / stride) + 1;
 *     with ceil_mode the last window must start inside the input or its left
 *     padding, else out is decremented. pad <= kernel/2, out >= 1.
 *   - max: window rows ih = oh*stride - pad + kh*dilation inside [0, H) (and
 *     the same for w), visited row by row; a value replaces the running max
 *     when it is greater or NaN (so the LAST NaN of a window wins, and the
 *     FIRST of equal maxima). The running max starts at -inf with index
 *     h0*W + w0, the first valid position; an index is h*W + w in the plane.
 *   - avg: the window [h0, h0+kernel) is clipped to [-pad, H+pad) to count
 *     pool_size, then to [0, H) for the sum; an empty clipped window gives 0.
 *     divisor = divisor_override if non-zero, else pool_size when
 *     count_include_pad, else the clipped window's size.
 * Rank 3 (C,H,W) runs as N = 1 through an internal view. The result is
 * packed in x's tag (docs/spec.md §4); rank 3 results are CONTIGUOUS like PyTorch's
 * (mft's rank-3 CHANNELS_LAST means N,L,C, which is no pooling layout).
 * Under a recording tape the entry points also record a node whose backward
 * runs mft_max_pool2d_backward_windows / mft_avg_pool2d_backward (below).
 *
 * Blocked operands: rank-4 F32 inputs packed in NCHW16C run the native
 * kernels of blocked16_*.c (results, indices and gradients packed NCHW16C, no
 * conversion; the backward needs grad_out, x and the indices packed so);
 * every other blocked case takes the counted fallback (Note [Blocked
 * fallback]). */
#include "pool_internal.h"
#include "blocked_outputs.h"

/* ---------------------------------------------------------------- entry points */
typedef struct pool_args {
    const int64_t *kernel, *stride, *padding, *dilation;
    bool ceil_mode, count_include_pad;
    int64_t divisor_override;
} pool_args;

/* Checks x and the arguments, fills the kernel parameters and the 4-D output
 * sizes. Messages name fn and the values. */
static bool pool_check(const char *fn, bool is_max, const mft_tensor *x, const pool_args *a,
                       mft_pool2d_params *p, int64_t out4[4]) {
    char b1[MFT__DIMS_BUF], b2[MFT__DIMS_BUF];
    if (!x) {
        mft__null_arg(fn, "x");
        return false;
    }
    if (!a->kernel) {
        mft__set_error(MFT_ERR_NULL, "%s: argument 'kernel' is NULL", fn);
        return false;
    }
    if (x->ndim != 3 && x->ndim != 4) {
        mft__set_error(MFT_ERR_RANK, "%s: expected a 3-D (C,H,W) or 4-D (N,C,H,W) input, got rank %d "
                       "with sizes %s", fn, x->ndim, mft__fmt_dims(b1, sizeof b1, x->ndim, x->sizes));
        return false;
    }
    if (x->dtype != MFT_F32 && x->dtype != MFT_F64) {
        mft__set_error(MFT_ERR_DTYPE, "%s: dtype %s is not supported (f32 and f64 only)", fn,
                       mft_dtype_name(x->dtype));
        return false;
    }
    memset(p, 0, sizeof *p);
    bool stride_default = !a->stride || (a->stride[0] == 0 && a->stride[1] == 0);
    for (int d = 0; d < 2; d++) {
        p->kernel[d] = a->kernel[d];
        p->stride[d] = stride_default ? a->kernel[d] : a->stride[d];
        p->padding[d] = a->padding ? a->padding[d] : 0;
        p->dilation[d] = a->dilation ? a->dilation[d] : 1;
    }
    p->ceil_mode = a->ceil_mode;
    p->count_include_pad = a->count_include_pad;
    p->divisor_override = a->divisor_override;
    if (p->kernel[0] <= 0 || p->kernel[1] <= 0) {
        mft__set_error(MFT_ERR_INVALID, "%s: kernel %s should be greater than zero", fn,
                       mft__fmt_dims(b1, sizeof b1, 2, p->kernel));
        return false;
    }
    if (p->stride[0] <= 0 || p->stride[1] <= 0) {
        mft__set_error(MFT_ERR_INVALID, "%s: stride %s should be greater than zero", fn,
                       mft__fmt_dims(b1, sizeof b1, 2, p->stride));
        return false;
    }
    if (p->dilation[0] < 1 || p->dilation[1] < 1) {
        mft__set_error(MFT_ERR_INVALID, "%s: dilation %s should be at least 1", fn,
                       mft__fmt_dims(b1, sizeof b1, 2, p->dilation));
        return false;
    }
    if (p->padding[0] < 0 || p->padding[1] < 0) {
        mft__set_error(MFT_ERR_INVALID, "%s: padding %s should be non-negative", fn,
                       mft__fmt_dims(b1, sizeof b1, 2, p->padding));
        return false;
    }
    for (int d = 0; d < 2; d++) {
        const int64_t *v[4] = {p->kernel, p->stride, p->padding, p->dilation};
        static const char *const names[4] = {"kernel", "stride", "padding", "dilation"};
        for (int k = 0; k < 4; k++)
            if (v[k][d] > POOL_MAX_PARAM) {
                mft__set_error(MFT_ERR_OVERFLOW, "%s: %s %s is too large (at most %lld)", fn,
                               names[k], mft__fmt_dims(b1, sizeof b1, 2, v[k]),
                               (long long)POOL_MAX_PARAM);
                return false;
            }
    }
    for (int d = 0; d < 2; d++)
        if (p->padding[d] > p->kernel[d] / 2) {
            mft__set_error(MFT_ERR_INVALID, "%s: pad %lld should be at most half of kernel %lld",
                           fn, (long long)p->padding[d], (long long)p->kernel[d]);
            return false;
        }
    const int off = x->ndim - 3; /* sizes[off] = C */
    if (x->sizes[off] == 0 || x->sizes[off + 1] == 0 || x->sizes[off + 2] == 0) {
        mft__set_error(MFT_ERR_SHAPE, "%s: input sizes %s have a zero channel or spatial dim "
                       "(only the batch may be empty)", fn,
                       mft__fmt_dims(b1, sizeof b1, x->ndim, x->sizes));
        return false;
    }
    out4[0] = x->ndim == 4 ? x->sizes[0] : 1;
    out4[1] = x->sizes[off];
    for (int d = 0; d < 2; d++)
        out4[2 + d] = pool_out_size(x->sizes[off + 1 + d], p->kernel[d], p->padding[d],
                                    p->stride[d], is_max ? p->dilation[d] : 1, p->ceil_mode);
    if (out4[2] < 1 || out4[3] < 1) {
        mft__set_error(MFT_ERR_SHAPE, "%s: input sizes %s give output size %s, which is too small "
                       "(kernel [%lld,%lld], stride [%lld,%lld], padding [%lld,%lld], dilation "
                       "[%lld,%lld])", fn, mft__fmt_dims(b1, sizeof b1, x->ndim, x->sizes),
                       mft__fmt_dims(b2, sizeof b2, 2, out4 + 2), (long long)p->kernel[0],
                       (long long)p->kernel[1], (long long)p->stride[0], (long long)p->stride[1],
                       (long long)p->padding[0], (long long)p->padding[1],
                       (long long)(is_max ? p->dilation[0] : 1),
                       (long long)(is_max ? p->dilation[1] : 1));
        return false;
    }
    if (!is_max) p->dilation[0] = p->dilation[1] = 1;
    return true;
}

/* ---------------------------------------------------------------- autograd
 * Node "max_pool2d" / "avg_pool2d" (Note [Tape] in mft/autograd.h): input
 * {x}, saved {x} (its sizes, dtype and format) and, for max, the indices the
 * forward computes anyway; params: the resolved mft_pool2d_params. The
 * backward functions (below) write grad_x packed in x's tag (docs/spec.md
 * §5), so the engine converts nothing. */
typedef struct pool_ag_params {
    bool is_max;
    mft_pool2d_params p;
} pool_ag_params;

static mft_status pool_node_backward(const mft__ag_node *n, mft_tensor *const *gout,
                                     mft_tensor **gin) {
    const pool_ag_params *q = n->params;
    const mft_pool2d_params *p = &q->p;
    gin[0] = q->is_max ? mft_max_pool2d_backward_windows(gout[0], n->saved[0], n->saved[1],
                                                         p->kernel, p->stride, p->padding,
                                                         p->dilation, p->ceil_mode)
                       : mft_avg_pool2d_backward(gout[0], n->saved[0], p->kernel, p->stride,
                                                 p->padding, p->ceil_mode, p->count_include_pad,
                                                 p->divisor_override);
    return gin[0] ? MFT_OK : mft_last_error();
}

/* relu_max_pool2d needs every window to hold an input element: an empty
 * window (dilation stepping over a short input next to padding) is -inf in
 * max_pool2d(relu(x)) with an index outside the window, which relu of the
 * maximum cannot reproduce. Such parameters are refused, naming the window. */
static bool relu_windows_ok(const char *fn, const mft_tensor *x, const mft_pool2d_params *p,
                            const int64_t out4[4]) {
    for (int d = 0; d < 2; d++) {
        const int64_t in = x->sizes[x->ndim - 2 + d];
        for (int64_t o = 0; o < out4[2 + d]; o++) {
            bool any = false;
            for (int64_t k = 0; k < p->kernel[d] && !any; k++) {
                const int64_t i = o * p->stride[d] - p->padding[d] + k * p->dilation[d];
                any = i >= 0 && i < in;
            }
            if (!any) {
                mft__set_error(MFT_ERR_INVALID, "%s: window %lld of dim %s covers no input element "
                               "(size %lld, kernel %lld, stride %lld, padding %lld, dilation %lld); "
                               "max_pool2d gives -inf there, which relu of the maximum cannot: "
                               "use mft_relu then mft_max_pool2d", fn, (long long)o,
                               d ? "W" : "H", (long long)in, (long long)p->kernel[d],
                               (long long)p->stride[d], (long long)p->padding[d],
                               (long long)p->dilation[d]);
                return false;
            }
        }
    }
    return true;
}

/* Validates, allocates the outputs packed in the result format, dispatches.
 * Returns the value result (user-owned) and, when indices_out is set, the
 * indices (user-owned); for max pooling the indices are always computed.
 * Records the node when the thread records and x requires grad (internal
 * calls run with grad mode off). */
static mft_tensor *pool_run(const char *fn, mft__op_id op, const mft_tensor *x, const pool_args *a,
                            mft_tensor **indices_out) {
    const bool is_max = op != MFT__OP_AVG_POOL2D; /* max_pool2d or relu_max_pool2d */
    mft_pool2d_params p;
    int64_t out4[4];
    if (!pool_check(fn, is_max, x, a, &p, out4)) return NULL;
    if (op == MFT__OP_RELU_MAX_POOL2D && !relu_windows_ok(fn, x, &p, out4)) return NULL;
    const bool rank3 = x->ndim == 3;
    const mft__decision dec = mft__rule_decide(MFT__RULE_POOL, mft__op_name(op), 1, &x,
                                               MFT_CONTIGUOUS, rank3 ? MFT__DECIDE_UNBATCHED : 0);
    const mft_format fmt = dec.tag;
    const bool rec = mft__ag_wants(1, &x);
    const bool grad_was = rec ? mft_set_grad_enabled(false) : true;

    /* internal tensors are not the user's scope results */
    mft__scope_suspend();
    mft_tensor *x4 = rank3 ? mft_unsqueeze(x, 0) : mft_tensor_retain((mft_tensor *)x);
    mft_tensor *outs[2] = {NULL, NULL};
    bool ok = x4 != NULL;
    if (ok) {
        outs[0] = mft__pool_alloc_out(fn, 4, out4, x->dtype, fmt);
        ok = outs[0] != NULL;
    }
    if (ok && is_max) {
        outs[1] = mft__pool_alloc_out(fn, 4, out4, MFT_I64, fmt);
        ok = outs[1] != NULL;
    }
    if (ok) {
        const mft_tensor *ins[1] = {x4};
        const bool convert[1] = {true};
        ok = mft__dispatch(fn, mft__pool_tables, op, fmt, x->dtype, 1, ins, convert, is_max ? 2 : 1,
                           outs, &p) == MFT_OK;
    }
    /* user-visible results: rank 3 views drop the N = 1 dim */
    mft_tensor *res[2] = {NULL, NULL};
    for (int k = 0; ok && k < (is_max ? 2 : 1); k++) {
        mft__rule_apply(outs[k], &dec);
        res[k] = rank3 ? mft_squeeze(outs[k], 0) : mft_tensor_retain(outs[k]);
        ok = res[k] != NULL;
    }
    mft__scope_resume();
    if (rec) mft_set_grad_enabled(grad_was);
    mft_tensor_release(x4);
    mft_tensor_release(outs[0]);
    mft_tensor_release(outs[1]);
    const pool_ag_params q = {is_max, p};
    const pool_node node = {rec ? mft__op_name(op) : NULL, pool_node_backward, x, is_max ? 2 : 1,
                            &q, sizeof q};
    return mft__pool_hand_over(fn, ok, res, indices_out, rec ? &node : NULL);
}

/* The max entry points: indices NULL for the value-only forms; the
 * *_with_indices forms require it. */
static mft_tensor *max_entry(const char *fn, mft__op_id op, const mft_tensor *x,
                             const int64_t kernel[2], const int64_t stride[2],
                             const int64_t padding[2], const int64_t dilation[2], bool ceil_mode,
                             bool want_indices, mft_tensor **indices) {
    if (want_indices && !mft__pool_indices_arg(fn, x, indices)) return NULL;
    const pool_args a = {kernel, stride, padding, dilation, ceil_mode, false, 0};
    return pool_run(fn, op, x, &a, want_indices ? indices : NULL);
}

mft_tensor *mft_max_pool2d_with_indices(const mft_tensor *x, const int64_t kernel[2],
                                        const int64_t stride[2], const int64_t padding[2],
                                        const int64_t dilation[2], bool ceil_mode,
                                        mft_tensor **indices) {
    if (!mft__pool_native16(x, NULL))
        MFT__BLOCKED_FALLBACK_OUTS(
        "max_pool2d_with_indices",
        mft_max_pool2d_with_indices(x, kernel, stride, padding, dilation, ceil_mode, indices), 1,
        ((mft_tensor **[]){indices}), ((const mft_tensor *[]){NULL}), 1, &x);
    return max_entry("mft_max_pool2d_with_indices", MFT__OP_MAX_POOL2D, x, kernel, stride,
                     padding, dilation, ceil_mode, true, indices);
}

mft_tensor *mft_max_pool2d(const mft_tensor *x, const int64_t kernel[2], const int64_t stride[2],
                           const int64_t padding[2], const int64_t dilation[2], bool ceil_mode) {
    if (!mft__pool_native16(x, NULL))
        MFT__BLOCKED_FALLBACK("max_pool2d", mft_max_pool2d(x, kernel, stride, padding, dilation, ceil_mode),
                          1, &x);
    return max_entry("mft_max_pool2d", MFT__OP_MAX_POOL2D, x, kernel, stride, padding, dilation,
                     ceil_mode, false, NULL);
}

mft_tensor *mft_relu_max_pool2d_with_indices(const mft_tensor *x, const int64_t kernel[2],
                                             const int64_t stride[2], const int64_t padding[2],
                                             const int64_t dilation[2], bool ceil_mode,
                                             mft_tensor **indices) {
    if (!mft__pool_native16(x, NULL))
        MFT__BLOCKED_FALLBACK_OUTS(
        "relu_max_pool2d_with_indices",
        mft_relu_max_pool2d_with_indices(x, kernel, stride, padding, dilation, ceil_mode, indices),
        1, ((mft_tensor **[]){indices}), ((const mft_tensor *[]){NULL}), 1, &x);
    return max_entry("mft_relu_max_pool2d_with_indices", MFT__OP_RELU_MAX_POOL2D, x, kernel,
                     stride, padding, dilation, ceil_mode, true, indices);
}

mft_tensor *mft_relu_max_pool2d(const mft_tensor *x, const int64_t kernel[2],
                                const int64_t stride[2], const int64_t padding[2],
                                const int64_t dilation[2], bool ceil_mode) {
    if (!mft__pool_native16(x, NULL))
        MFT__BLOCKED_FALLBACK("relu_max_pool2d",
                          mft_relu_max_pool2d(x, kernel, stride, padding, dilation, ceil_mode), 1,
                          &x);
    return max_entry("mft_relu_max_pool2d", MFT__OP_RELU_MAX_POOL2D, x, kernel, stride, padding,
                     dilation, ceil_mode, false, NULL);
}

mft_tensor *mft_avg_pool2d(const mft_tensor *x, const int64_t kernel[2], const int64_t stride[2],
                           const int64_t padding[2], bool ceil_mode, bool count_include_pad,
                           int64_t divisor_override) {
    if (!mft__pool_native16(x, NULL))
        MFT__BLOCKED_FALLBACK(
        "avg_pool2d",
        mft_avg_pool2d(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override),
        1, &x);
    pool_args a = {kernel, stride, padding, NULL, ceil_mode, count_include_pad, divisor_override};
    return pool_run("mft_avg_pool2d", MFT__OP_AVG_POOL2D, x, &a, NULL);
}

/* ---------------------------------------------------------------- backward */
mft_tensor *mft_max_pool2d_backward(const mft_tensor *grad_out, const mft_tensor *x,
                                    const mft_tensor *indices) {
    if (!mft__pool_native16(grad_out, NULL) || !mft__pool_native16(x, indices))
        MFT__BLOCKED_FALLBACK_LIKE("max_pool2d_backward", x,
                               mft_max_pool2d_backward(grad_out, x, indices), 3, &grad_out, &x,
                               &indices);
    return mft__pool_max_backward("mft_max_pool2d_backward", 2, grad_out, x, indices, NULL);
}

mft_tensor *mft_max_pool2d_backward_windows(const mft_tensor *grad_out, const mft_tensor *x,
                                            const mft_tensor *indices, const int64_t kernel[2],
                                            const int64_t stride[2], const int64_t padding[2],
                                            const int64_t dilation[2], bool ceil_mode) {
    if (!mft__pool_native16(grad_out, NULL) || !mft__pool_native16(x, indices))
        MFT__BLOCKED_FALLBACK_LIKE("max_pool2d_backward_windows", x,
                               mft_max_pool2d_backward_windows(grad_out, x, indices, kernel, stride,
                                                               padding, dilation, ceil_mode),
                               3, &grad_out, &x, &indices);
    static const char fn[] = "mft_max_pool2d_backward_windows";
    const pm_req q = {kernel, stride, padding, dilation, ceil_mode, false, 0};
    pm_geom g;
    if (!grad_out) {
        mft__null_arg(fn, "grad_out");
        return NULL;
    }
    if (!mft__pool_check_x(fn, x, 2, "x") || !mft__pool_check_params(fn, 2, true, x, &q, &g))
        return NULL;
    pm_exec e;
    memset(&e, 0, sizeof e);
    mft__pool_sizes(&e, x, 2, &g, false);
    if (!mft__pool_check_like(fn, "grad_out", grad_out, x, x->dtype, e.psz)) return NULL;
    mft_pool2d_params p2;
    mft__pool_params2(&g, &p2);
    return mft__pool_max_backward(fn, 2, grad_out, x, indices, &p2);
}

mft_tensor *mft_avg_pool2d_backward(const mft_tensor *grad_out, const mft_tensor *x,
                                    const int64_t kernel[2], const int64_t stride[2],
                                    const int64_t padding[2], bool ceil_mode,
                                    bool count_include_pad, int64_t divisor_override) {
    if (!mft__pool_native16(grad_out, NULL) || !mft__pool_native16(x, NULL))
        MFT__BLOCKED_FALLBACK_LIKE("avg_pool2d_backward", x,
                               mft_avg_pool2d_backward(grad_out, x, kernel, stride, padding,
                                                       ceil_mode, count_include_pad,
                                                       divisor_override),
                               2, &grad_out, &x);
    pm_req q = {kernel, stride, padding, NULL, ceil_mode, count_include_pad, divisor_override};
    return mft__pool_avg_backward("mft_avg_pool2d_backward", 2, grad_out, x, &q);
}
