/* ops/resize/resize.c — interpolate (upsample / downsample to a given size) forward
 * and backward: argument checks, the entry points and the autograd node,
 * dispatched by (op, format, dtype) (docs/architecture.md §7, mft/resize.h).
 *
 * The family: the per-dimension taps (which define the semantics) in
 * resize_internal.h, the reference kernels in reference.c, the fast 2-D F32
 * kernels for NCHW and NHWC and the kernel table in gather.c.
 *
 * Semantics are PyTorch 1.13's F.interpolate(x, size=...) (facts from
 * aten/src/ATen/native/UpSample.h): every mode is separable, so each output
 * index o of a spatial dim reads a few "taps" (input index, weight) of that
 * dim, and an output element is the sum over all tap combinations of the
 * product of the weights times the input element.
 *   - nearest: scale = (float)in / (float)out, src = min(floor(o * scale),
 *     in - 1) in float arithmetic (out == in: src = o; out == 2*in: o >> 1).
 *   - nearest-exact: src = min(floor((o + 0.5) * scale), in - 1).
 *   - linear / bilinear / trilinear: scale = align_corners ? (out > 1 ?
 *     (in-1)/(out-1) : 0) : in/out, computed in the tensor's dtype;
 *     src = align_corners ? scale*o : max(scale*(o + 0.5) - 0.5, 0);
 *     i0 = (int)src, i1 = i0 + (i0 < in-1), l1 = src - i0, l0 = 1 - l1
 *     (out == in: taps (o, 1) and (o, 0)).
 *   - bicubic: src as above but never clamped, i = floor(src), t = src - i,
 *     weights the cubic convolution with A = -0.75 at distances t+1, t, 1-t,
 *     2-t, indices i-1 .. i+2 clamped to [0, in-1].
 * The backward gives each input element the sum of w * grad over the
 * outputs that read it (clamped duplicate taps add up).
 * Results (and grad_x) are packed in x's tag (docs/spec.md §4, §5).
 * Autograd: mft_interpolate records one node (x saved for its sizes, dtype
 * and tag; params mode, align_corners) whose backward is
 * mft_interpolate_backward. */
#include <string.h>
#include "autograd_internal.h"
#include "resize_internal.h"
#include "blocked_outputs.h"

/* Note [Kernel tables]: the built-in kernels this family dispatches to. */
static const mft__kernel_def *const g_tables[] = {mft__kernels_resize, NULL};

/* ---------------------------------------------------------------- checks */
static const char *const mode_names[MFT_INTERP_MODE_COUNT] = {
    "nearest", "nearest-exact", "linear", "bilinear", "bicubic", "trilinear"};

/* Checks x (sizes, dtype, mode, align_corners) and the output spatial sizes;
 * fills out_sizes (x's N and C, then out_sp). */
static bool interp_check(const char *fn, const mft_tensor *x, const char *xname,
                         const int64_t *out_sp, mft_interp_mode mode, bool ac,
                         int64_t *out_sizes) {
    char b1[MFT__DIMS_BUF], b2[MFT__DIMS_BUF];
    if ((unsigned)mode >= MFT_INTERP_MODE_COUNT) {
        mft__set_error(MFT_ERR_INVALID, "%s: mode %d is not an mft_interp_mode", fn, (int)mode);
        return false;
    }
    if (x->ndim < 3 || x->ndim > 5) {
        mft__set_error(MFT_ERR_RANK, "%s: expected a 3-D, 4-D or 5-D (N,C,spatial...) %s, got "
                       "rank %d with sizes %s", fn, xname, x->ndim,
                       mft__fmt_dims(b1, sizeof b1, x->ndim, x->sizes));
        return false;
    }
    if (x->dtype != MFT_F32 && x->dtype != MFT_F64) {
        mft__set_error(MFT_ERR_DTYPE, "%s: dtype %s is not supported (f32 and f64 only)", fn,
                       mft_dtype_name(x->dtype));
        return false;
    }
    const int sp = x->ndim - 2;
    const int need = mode == MFT_INTERP_LINEAR ? 1
                     : (mode == MFT_INTERP_BILINEAR || mode == MFT_INTERP_BICUBIC) ? 2
                     : mode == MFT_INTERP_TRILINEAR ? 3 : sp;
    if (need != sp) {
        mft__set_error(MFT_ERR_RANK, "%s: mode %s needs a %d-D input, got rank %d (sizes %s)", fn,
                       mode_names[mode], need + 2, x->ndim,
                       mft__fmt_dims(b1, sizeof b1, x->ndim, x->sizes));
        return false;
    }
    if (ac && (mode == MFT_INTERP_NEAREST || mode == MFT_INTERP_NEAREST_EXACT)) {
        mft__set_error(MFT_ERR_INVALID, "%s: align_corners can only be set with the interpolating "
                       "modes (linear, bilinear, bicubic, trilinear), not %s", fn,
                       mode_names[mode]);
        return false;
    }
    for (int d = 0; d < sp; d++) {
        if (x->sizes[2 + d] < 1 || out_sp[d] < 1) {
            mft__set_error(MFT_ERR_SHAPE, "%s: input spatial sizes %s and output sizes %s should "
                           "be greater than 0", fn,
                           mft__fmt_dims(b1, sizeof b1, sp, x->sizes + 2),
                           mft__fmt_dims(b2, sizeof b2, sp, out_sp));
            return false;
        }
        if (out_sp[d] > INTERP_MAX_SIZE || x->sizes[2 + d] > INTERP_MAX_SIZE) {
            mft__set_error(MFT_ERR_OVERFLOW, "%s: input spatial sizes %s or output sizes %s are "
                           "too large (at most %lld per dim)", fn,
                           mft__fmt_dims(b1, sizeof b1, sp, x->sizes + 2),
                           mft__fmt_dims(b2, sizeof b2, sp, out_sp), (long long)INTERP_MAX_SIZE);
            return false;
        }
    }
    out_sizes[0] = x->sizes[0];
    out_sizes[1] = x->sizes[1];
    for (int d = 0; d < sp; d++) out_sizes[2 + d] = out_sp[d];
    return true;
}

/* Allocates the result packed in x's tag, dispatches op on `in`, hands the
 * result to the caller. */
static mft_tensor *interp_run(const char *fn, mft__op_id op, const mft_tensor *in,
                              const mft_tensor *x, const int64_t *res_sizes,
                              const mft_interp_params *p) {
    const mft__decision dec = mft__rule_decide(MFT__RULE_RESIZE, "interpolate", 1, &x, MFT_CONTIGUOUS, 0);
    const mft_format fmt = dec.tag;
    mft__scope_suspend();
    mft_tensor *res = mft__tensor_alloc(fn, x->ndim, res_sizes, x->dtype, fmt);
    bool ok = res != NULL;
    if (ok) {
        const mft_tensor *ins[1] = {in};
        const bool convert[1] = {true};
        mft_tensor *outs[1] = {res};
        ok = mft__dispatch(fn, g_tables, op, fmt, x->dtype, 1, ins, convert, 1, outs, p) == MFT_OK;
    }
    if (ok) mft__rule_apply(res, &dec);
    mft__scope_resume();
    if (!ok) {
        mft__relabel_error(fn);
        mft_tensor_release(res);
        return NULL;
    }
    mft_tensor *r = mft__retain_result(fn, res);
    mft_tensor_release(res);
    return r;
}

/* Autograd node: grad_x from the saved x (only its sizes, dtype and tag
 * are read), packed in x's tag. */
static mft_status interp_node_backward(const mft__ag_node *n, mft_tensor *const *gout,
                                       mft_tensor **gin) {
    const mft_interp_params *p = n->params;
    gin[0] = mft_interpolate_backward(gout[0], n->saved[0], p->mode, p->align_corners);
    return gin[0] ? MFT_OK : mft_last_error();
}

mft_tensor *mft_interpolate(const mft_tensor *x, const int64_t *out_size, mft_interp_mode mode,
                            bool align_corners) {
    static const char fn[] = "mft_interpolate";
    MFT__BLOCKED_FALLBACK("interpolate", mft_interpolate(x, out_size, mode, align_corners), 1, &x);
    if (!x) {
        mft__null_arg(fn, "x");
        return NULL;
    }
    if (!out_size) {
        mft__set_error(MFT_ERR_NULL, "%s: argument 'out_size' is NULL", fn);
        return NULL;
    }
    int64_t ys[MFT_MAX_DIMS];
    if (!interp_check(fn, x, "input", out_size, mode, align_corners, ys)) return NULL;
    mft_interp_params p = {mode, align_corners};
    if (!mft__ag_wants(1, &x)) return interp_run(fn, MFT__OP_INTERPOLATE, x, x, ys, &p);
    /* under a recording tape (softmax_entry in ops/softmax/softmax.c explains it) */
    mft__scope_suspend();
    const bool prev = mft_set_grad_enabled(false);
    mft_tensor *y = interp_run(fn, MFT__OP_INTERPOLATE, x, x, ys, &p);
    mft_set_grad_enabled(prev);
    mft__scope_resume();
    if (!y) return NULL;
    if (mft__ag_record1(fn, "interpolate", interp_node_backward, x, y, true, false, &p,
                        sizeof p) != MFT_OK) {
        mft_tensor_release(y);
        return NULL;
    }
    mft_tensor *r = mft__retain_result(fn, y);
    mft_tensor_release(y);
    return r;
}

mft_tensor *mft_interpolate_backward(const mft_tensor *grad_out, const mft_tensor *x,
                                     mft_interp_mode mode, bool align_corners) {
    static const char fn[] = "mft_interpolate_backward";
    MFT__BLOCKED_FALLBACK_LIKE("interpolate_backward", x,
                               mft_interpolate_backward(grad_out, x, mode, align_corners), 2,
                               &grad_out, &x);
    char b1[MFT__DIMS_BUF], b2[MFT__DIMS_BUF];
    if (!grad_out || !x) {
        mft__null_arg(fn, !grad_out ? "grad_out" : "x");
        return NULL;
    }
    if (grad_out->ndim != x->ndim) {
        mft__set_error(MFT_ERR_SHAPE, "%s: grad_out sizes %s and input sizes %s differ in rank",
                       fn, mft__fmt_dims(b1, sizeof b1, grad_out->ndim, grad_out->sizes),
                       mft__fmt_dims(b2, sizeof b2, x->ndim, x->sizes));
        return NULL;
    }
    int64_t ys[MFT_MAX_DIMS];
    if (!interp_check(fn, x, "input", grad_out->sizes + 2, mode, align_corners, ys)) return NULL;
    if (grad_out->sizes[0] != x->sizes[0] || grad_out->sizes[1] != x->sizes[1]) {
        mft__set_error(MFT_ERR_SHAPE, "%s: grad_out sizes %s do not match input sizes %s in N "
                       "and C", fn, mft__fmt_dims(b1, sizeof b1, grad_out->ndim, grad_out->sizes),
                       mft__fmt_dims(b2, sizeof b2, x->ndim, x->sizes));
        return NULL;
    }
    if (grad_out->dtype != x->dtype) {
        mft__set_error(MFT_ERR_DTYPE, "%s: grad_out dtype %s differs from input dtype %s", fn,
                       mft_dtype_name(grad_out->dtype), mft_dtype_name(x->dtype));
        return NULL;
    }
    mft_interp_params p = {mode, align_corners};
    return interp_run(fn, MFT__OP_INTERPOLATE_BACKWARD, grad_out, x, x->sizes, &p);
}
