/* ops/shape/pad.c — padding (dispatched op "pad", mft/cnn.h): the argument
 * checks and the entry points mft_pad and mft_pad_backward (dispatched op
 * "pad_backward"), then the autograd node of mft_pad. The kernels live in
 * pad_reference.c (the reference kernels, which define the semantics) and
 * pad_packed.c (the fast packed kernels and the kernel table).
 *
 * pad follows PyTorch 1.13's F.pad (aten/src/ATen/native/PadNd.cpp,
 * ConstantPadNd, ReflectionPad.cpp, ReplicationPadding.cpp):
 *   - pads = {last_before, last_after, prev_before, ...}, npad even and
 *     <= 2*ndim. Output size of a dim = size + before + after.
 *   - constant: any rank, any dtype; negative pads crop; an output size < 0
 *     is an error (0 is allowed).
 *   - reflect / replicate: F32/F64 only (PyTorch: "not implemented for
 *     'Int'"), value must be 0, and only npad 2 on 2-D/3-D, npad 4 on 3-D/4-D,
 *     npad 6 on 4-D/5-D inputs; the non-batch dims must be non-zero (a
 *     (dims+2)-D input may have an empty batch); reflect needs each pad < the
 *     dim's size; output sizes >= 1.
 *   - for output index o of a dim, p = o - before is the input position;
 *     constant: p outside [0, size) -> value; reflect: p < 0 -> -p, p >= size
 *     -> 2*(size-1) - p; replicate: clamp to [0, size-1]. (This equals
 *     PyTorch's index arithmetic, negative pads included; pad_src in
 *     shape_internal.h.)
 * The result is packed in x's tag for rank 3-5, else CONTIGUOUS (docs/spec.md §4).
 *
 * Autograd (docs/architecture.md §8): mft_pad records one node (the "autograd" section at
 * the end). pad saves x (sizes, dtype, tag) and calls mft_pad_backward, whose
 * gradient is made in x's format: the engine converts nothing. */
#include <string.h>
#include "shape_internal.h"
#include "blocked_outputs.h"

/* Note [Kernel tables]: the built-in kernels this family dispatches to. */
static const mft__kernel_def *const g_tables[] = {mft__kernels_pad, NULL};

/* Largest |pad| accepted: keeps size + before + after far from overflow. */
#define PAD_MAX ((int64_t)1 << 40)

static const char *pad_mode_name(mft_pad_mode m) {
    return m == MFT_PAD_CONSTANT ? "constant" : m == MFT_PAD_REFLECT ? "reflect" : "replicate";
}

/* ---------------------------------------------------------------- checks, entry */
static bool pad_check(const char *fn, const mft_tensor *x, int npad, const int64_t *pads,
                      mft_pad_mode mode, double value, mft_pad_params *p, int64_t *out) {
    char b1[MFT__DIMS_BUF];
    if (!x) {
        mft__null_arg(fn, "x");
        return false;
    }
    if (npad > 0 && !pads) {
        mft__set_error(MFT_ERR_NULL, "%s: argument 'pads' is NULL", fn);
        return false;
    }
    if ((int)mode < 0 || mode >= MFT_PAD_MODE_COUNT) {
        mft__set_error(MFT_ERR_INVALID, "%s: invalid padding mode %d", fn, (int)mode);
        return false;
    }
    if (npad < 0 || npad % 2 != 0) {
        mft__set_error(MFT_ERR_INVALID, "%s: padding length must be divisible by 2, got %d", fn,
                       npad);
        return false;
    }
    if (npad > 2 * x->ndim) {
        mft__set_error(MFT_ERR_INVALID,
                       "%s: padding length should be less than or equal to two times the input "
                       "dimension but got padding length %d and input of dimension %d",
                       fn, npad, x->ndim);
        return false;
    }
    for (int i = 0; i < npad; i++)
        if (pads[i] > PAD_MAX || pads[i] < -PAD_MAX) {
            mft__set_error(MFT_ERR_OVERFLOW, "%s: pad %lld is too large (at most %lld in magnitude)",
                           fn, (long long)pads[i], (long long)PAD_MAX);
            return false;
        }
    memset(p, 0, sizeof *p);
    p->mode = mode;
    p->value = mode == MFT_PAD_CONSTANT ? value : 0.0;
    /* Note [Integer scalars]: the fill value must fit an integer x (as PyTorch) */
    if (mode == MFT_PAD_CONSTANT && mft__check_int_value(fn, "value", x->dtype, value) != MFT_OK)
        return false;
    for (int i = 0; i < npad / 2; i++) {
        int d = x->ndim - 1 - i;
        p->before[d] = pads[2 * i];
        p->after[d] = pads[2 * i + 1];
    }
    if (mode != MFT_PAD_CONSTANT) {
        const char *mn = pad_mode_name(mode);
        if (value != 0.0) {
            mft__set_error(MFT_ERR_INVALID, "%s: padding mode \"%s\" doesn't take in value argument "
                           "(got %g)", fn, mn, value);
            return false;
        }
        const int k = npad / 2, nd = x->ndim;
        if (!(k >= 1 && k <= 3 && (nd == k + 1 || nd == k + 2))) {
            mft__set_error(MFT_ERR_UNSUPPORTED,
                           "%s: only 2D, 3D, 4D, 5D padding with non-constant padding are supported "
                           "(mode \"%s\", padding length %d, input of dimension %d)",
                           fn, mn, npad, nd);
            return false;
        }
        if (x->dtype != MFT_F32 && x->dtype != MFT_F64) {
            mft__set_error(MFT_ERR_DTYPE, "%s: padding mode \"%s\" is not implemented for dtype %s "
                           "(f32 and f64 only)", fn, mn, mft_dtype_name(x->dtype));
            return false;
        }
        bool valid = true;
        for (int d = nd == k + 2 ? 1 : 0; d < nd; d++) valid = valid && x->sizes[d] != 0;
        if (!valid) {
            mft__set_error(MFT_ERR_SHAPE,
                           "%s: expected %dD or %dD (batch mode) tensor with possibly 0 batch size "
                           "and other non-zero dimensions for input, but got: %s",
                           fn, k + 1, k + 2, mft__fmt_dims(b1, sizeof b1, nd, x->sizes));
            return false;
        }
        for (int d = nd - k; d < nd && mode == MFT_PAD_REFLECT; d++)
            if (p->before[d] >= x->sizes[d] || p->after[d] >= x->sizes[d]) {
                mft__set_error(MFT_ERR_INVALID,
                               "%s: padding size should be less than the corresponding input "
                               "dimension, but got: padding (%lld, %lld) at dimension %d of input %s",
                               fn, (long long)p->before[d], (long long)p->after[d], d,
                               mft__fmt_dims(b1, sizeof b1, nd, x->sizes));
                return false;
            }
    }
    for (int d = 0; d < x->ndim; d++) {
        out[d] = x->sizes[d] + p->before[d] + p->after[d];
        if (mode == MFT_PAD_CONSTANT && out[d] < 0) {
            mft__set_error(MFT_ERR_SHAPE,
                           "%s: the input size %lld, plus negative padding %lld and %lld resulted "
                           "in a negative output size, which is invalid (dimension %d)",
                           fn, (long long)x->sizes[d], (long long)p->before[d],
                           (long long)p->after[d], d);
            return false;
        }
        if (mode != MFT_PAD_CONSTANT && d >= x->ndim - npad / 2 && out[d] < 1) {
            mft__set_error(MFT_ERR_SHAPE,
                           "%s: input size %lld is too small; calculated output size %lld at "
                           "dimension %d (padding %lld, %lld)",
                           fn, (long long)x->sizes[d], (long long)out[d], d,
                           (long long)p->before[d], (long long)p->after[d]);
            return false;
        }
    }
    return true;
}

static mft_tensor *pad_forward(const char *fn, const mft_tensor *x, int npad,
                               const int64_t *pads, mft_pad_mode mode, double value) {
    mft_pad_params p;
    int64_t out[MFT_MAX_DIMS];
    if (!pad_check(fn, x, npad, pads, mode, value, &p, out)) return NULL;
    const mft__decision dec = mft__rule_decide(MFT__RULE_PAD, "pad", 1, &x, MFT_CONTIGUOUS, 0);
    const mft_format fmt = dec.tag;

    mft__scope_suspend(); /* internal tensors are not the user's scope results */
    mft_tensor *y = mft__tensor_alloc(fn, x->ndim, out, x->dtype, fmt);
    bool ok = y != NULL;
    if (ok) {
        const mft_tensor *ins[1] = {x};
        const bool convert[1] = {true};
        mft_tensor *outs[1] = {y};
        ok = mft__dispatch(fn, g_tables, MFT__OP_PAD, fmt, x->dtype, 1, ins, convert, 1, outs, &p) ==
             MFT_OK;
    }
    if (ok) mft__rule_apply(y, &dec);
    mft__scope_resume();
    if (!ok) {
        mft__relabel_error(fn);
        mft_tensor_release(y);
        return NULL;
    }
    mft_tensor *r = mft__retain_result(fn, y); /* registered in the innermost scope */
    mft_tensor_release(y);
    return r;
}

/* ---------------------------------------------------------------- backward
 * grad_x[i] = sum of grad_out[o] over every output index o that read input
 * index i (the kernels: pad_reference.c, pad_packed.c). */
static bool pad_bw_check(const char *fn, const mft_tensor *grad_out, const mft_tensor *x,
                         int npad, const int64_t *pads, mft_pad_mode mode, mft_pad_params *p) {
    char b1[MFT__DIMS_BUF], b2[MFT__DIMS_BUF];
    int64_t out[MFT_MAX_DIMS];
    if (!grad_out) {
        mft__null_arg(fn, "grad_out");
        return false;
    }
    if (!pad_check(fn, x, npad, pads, mode, 0.0, p, out)) return false;
    if (x->dtype != MFT_F32 && x->dtype != MFT_F64) {
        mft__set_error(MFT_ERR_DTYPE, "%s: dtype %s of 'x' is not supported (f32 and f64 only)", fn,
                       mft_dtype_name(x->dtype));
        return false;
    }
    if (grad_out->dtype != x->dtype) {
        mft__set_error(MFT_ERR_DTYPE, "%s: expected grad_out of dtype %s (x's), got %s", fn,
                       mft_dtype_name(x->dtype), mft_dtype_name(grad_out->dtype));
        return false;
    }
    bool same = grad_out->ndim == x->ndim;
    for (int d = 0; same && d < x->ndim; d++) same = grad_out->sizes[d] == out[d];
    if (!same) {
        mft__set_error(MFT_ERR_SHAPE, "%s: grad_out of sizes %s does not match the padded sizes %s",
                       fn, mft__fmt_dims(b1, sizeof b1, grad_out->ndim, grad_out->sizes),
                       mft__fmt_dims(b2, sizeof b2, x->ndim, out));
        return false;
    }
    return true;
}

mft_tensor *mft_pad_backward(const mft_tensor *grad_out, const mft_tensor *x, int npad,
                             const int64_t *pads, mft_pad_mode mode) {
    static const char fn[] = "mft_pad_backward";
    MFT__BLOCKED_FALLBACK_LIKE("pad_backward", x, mft_pad_backward(grad_out, x, npad, pads, mode),
                               2, &grad_out, &x);
    mft_pad_params p;
    if (!pad_bw_check(fn, grad_out, x, npad, pads, mode, &p)) return NULL;
    const mft__decision dec = mft__rule_decide(MFT__RULE_BACKWARD, "pad_backward", 1, &x, MFT_CONTIGUOUS, 0);
    const mft_format fmt = dec.tag;

    mft__scope_suspend();
    mft_tensor *gx = mft__tensor_alloc(fn, x->ndim, x->sizes, x->dtype, fmt);
    bool ok = gx != NULL;
    if (ok) {
        const mft_tensor *ins[1] = {grad_out};
        const bool convert[1] = {true};
        mft_tensor *outs[1] = {gx};
        ok = mft__dispatch(fn, g_tables, MFT__OP_PAD_BACKWARD, fmt, x->dtype, 1, ins, convert, 1, outs,
                           &p) == MFT_OK;
    }
    if (ok) mft__rule_apply(gx, &dec);
    mft__scope_resume();
    if (!ok) {
        mft__relabel_error(fn);
        mft_tensor_release(gx);
        return NULL;
    }
    mft_tensor *r = mft__retain_result(fn, gx);
    mft_tensor_release(gx);
    return r;
}

/* ---------------------------------------------------------------- autograd */
typedef struct pad_ag_params {
    int64_t pads[2 * MFT_MAX_DIMS];
    int npad;
    mft_pad_mode mode;
} pad_ag_params;

static mft_status pad_node_backward(const mft__ag_node *n, mft_tensor *const *gout,
                                    mft_tensor **gin) {
    const pad_ag_params *p = n->params;
    gin[0] = mft_pad_backward(gout[0], n->saved[0], p->npad, p->pads, p->mode);
    return gin[0] ? MFT_OK : mft_last_error();
}

mft_tensor *mft_pad(const mft_tensor *x, int npad, const int64_t *pads, mft_pad_mode mode,
                    double value) {
    static const char fn[] = "mft_pad";
    MFT__BLOCKED_FALLBACK("pad", mft_pad(x, npad, pads, mode, value), 1, &x);
    if (!mft__ag_wants(1, &x)) return pad_forward(fn, x, npad, pads, mode, value);
    const bool prev = mft__shape_ag_begin();
    mft_tensor *y = pad_forward(fn, x, npad, pads, mode, value);
    mft__shape_ag_end(prev);
    if (!y) return NULL;
    pad_ag_params p;
    memset(&p, 0, sizeof p);
    if (npad > 0) memcpy(p.pads, pads, (size_t)npad * sizeof *pads); /* npad checked */
    p.npad = npad;
    p.mode = mode;
    if (mft__ag_record1(fn, "pad", pad_node_backward, x, y, true, false, &p, sizeof p) !=
        MFT_OK) {
        mft_tensor_release(y);
        return NULL;
    }
    return mft__shape_ag_hand_over(fn, y);
}
