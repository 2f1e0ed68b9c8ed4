/* ops/dispatch/interface.c — what a kernel of each dispatched op receives
 * (its inputs, outputs, which inputs the dispatcher packs, its parameter
 * struct), one row per DISPATCHED row of the registry; the checks that make
 * a direct call of a built-in kernel safe (mft_dispatch_call_builtin: the
 * sizes the op would have validated, checked against each other and the
 * params, so a wrong argument is an error, never a wild write); and the
 * Markdown table of docs/dispatch.md built from these rows, the registry
 * and the built-in tables (tests/ops/test_dispatch_doc.c keeps the document
 * equal to it). The limits mirror the ops' own checks (the pool, conv,
 * resize and pad entry points). */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "dispatch_internal.h"
#include "mft/conv.h"
#include "mft/linalg.h"
#include "mft/pool.h"
#include "mft/resize.h"
#include "mft/shape.h"
#include "mft/softmax.h"

#define IF_MAX_PARAM ((int64_t)1 << 30)  /* stride, padding, dilation, kernel, groups */
#define IF_MAX_INTERP ((int64_t)1 << 31) /* interpolate's spatial sizes */
#define IF_MAX_PAD ((int64_t)1 << 40)    /* pad amounts */

/* ---------------------------------------------------------------- helpers */
static const char *iface_in_name(const mft__kernel_iface *f, int i, char *buf, size_t len) {
    /* the i-th comma-separated name of f->inputs */
    const char *p = f->inputs;
    for (int k = 0; k < i && p; k++) {
        p = strchr(p, ',');
        if (p) p += 2;
    }
    if (!p) return "?";
    size_t n = strcspn(p, ",");
    snprintf(buf, len, "%.*s", (int)n, p);
    return buf;
}

static bool iface_rank(const char *fn, const char *what, const mft_tensor *t, int r) {
    char b[MFT__DIMS_BUF];
    if (t->ndim == r) return true;
    mft__set_error(MFT_ERR_RANK, "%s: %s has rank %d (sizes %s), the kernel needs rank %d", fn,
                   what, t->ndim, mft__fmt_dims(b, sizeof b, t->ndim, t->sizes), r);
    return false;
}

static bool iface_same(const char *fn, const char *wa, const mft_tensor *a, const char *wb,
                       const mft_tensor *b) {
    char b1[MFT__DIMS_BUF], b2[MFT__DIMS_BUF];
    bool same = a->ndim == b->ndim;
    for (int d = 0; same && d < a->ndim; d++) same = a->sizes[d] == b->sizes[d];
    if (same) return true;
    mft__set_error(MFT_ERR_SHAPE, "%s: %s sizes %s differ from %s sizes %s", fn, wa,
                   mft__fmt_dims(b1, sizeof b1, a->ndim, a->sizes), wb,
                   mft__fmt_dims(b2, sizeof b2, b->ndim, b->sizes));
    return false;
}

/* dims [d0, d1) of a and b equal (batch and channels of activations) */
static bool iface_same_dims(const char *fn, const char *wa, const mft_tensor *a, const char *wb,
                            const mft_tensor *b, int d0, int d1) {
    char b1[MFT__DIMS_BUF], b2[MFT__DIMS_BUF];
    for (int d = d0; d < d1; d++)
        if (a->sizes[d] != b->sizes[d]) {
            mft__set_error(MFT_ERR_SHAPE, "%s: %s sizes %s and %s sizes %s differ at dim %d", fn,
                           wa, mft__fmt_dims(b1, sizeof b1, a->ndim, a->sizes), wb,
                           mft__fmt_dims(b2, sizeof b2, b->ndim, b->sizes), d);
            return false;
        }
    return true;
}

static bool iface_dtype(const char *fn, const char *what, const mft_tensor *t, mft_dtype dt) {
    if (t->dtype == dt) return true;
    mft__set_error(MFT_ERR_DTYPE, "%s: %s has dtype %s, the kernel needs %s", fn, what,
                   mft_dtype_name(t->dtype), mft_dtype_name(dt));
    return false;
}

/* v[0..n) within [lo, hi] */
static bool iface_range(const char *fn, const char *what, int n, const int64_t *v, int64_t lo,
                        int64_t hi) {
    char b[MFT__DIMS_BUF];
    for (int i = 0; i < n; i++)
        if (v[i] < lo || v[i] > hi) {
            mft__set_error(MFT_ERR_INVALID, "%s: params %s %s out of range [%lld, %lld]", fn, what,
                           mft__fmt_dims(b, sizeof b, n, v), (long long)lo, (long long)hi);
            return false;
        }
    return true;
}

static int64_t iface_div_floor(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* ---------------------------------------------------------------- conv
 * The large activation ("x") and the small one ("y") of a convolution with
 * kernel size k: y = floor((x + 2p - d(k-1) - 1) / s) + 1. A transposed
 * convolution runs the backward ops with x = (y-1)s - 2p + d(k-1) + 1 + op,
 * 0 <= op < max(s, d) (its output_padding), so the backward ops accept
 * that; the forward takes exactly the plain convolution's y (op < s). */
static bool conv_fits(int64_t x, int64_t y, int64_t k, int64_t s, int64_t p, int64_t d,
                      bool transposed_ok) {
    if (k < 1 || y < 1 || x < 0) return false;
    if (y - 1 > (((int64_t)1 << 61) / s) || k - 1 > (((int64_t)1 << 61) / d)) return false;
    const int64_t op = x - ((y - 1) * s - 2 * p + d * (k - 1) + 1);
    return op >= 0 && op < (transposed_ok && d > s ? d : s);
}

/* roles: big, small activations, the weight-shaped tensor; which of them
 * carries C_in (the big one) and C_out (the small one). */
static bool conv_check_common(const char *fn, const mft__kernel_iface *f,
                              const mft_kernel_args *a, const mft_tensor *big, const char *wbig,
                              const mft_tensor *small, const char *wsmall, const mft_tensor *w,
                              const char *ww) {
    const mft_conv_params *p = a->params;
    const int nsp = f->nsp, r = nsp + 2;
    char b1[MFT__DIMS_BUF], b2[MFT__DIMS_BUF], b3[MFT__DIMS_BUF];
    if (!iface_rank(fn, wbig, big, r) || !iface_rank(fn, wsmall, small, r) ||
        !iface_rank(fn, ww, w, r))
        return false;
    if (p->nspatial != nsp) {
        mft__set_error(MFT_ERR_INVALID, "%s: params nspatial is %d, op %s needs %d", fn,
                       p->nspatial, mft__op_name(f->op), nsp);
        return false;
    }
    if (!iface_range(fn, "stride", nsp, p->stride, 1, IF_MAX_PARAM) ||
        !iface_range(fn, "padding", nsp, p->padding, 0, IF_MAX_PARAM) ||
        !iface_range(fn, "dilation", nsp, p->dilation, 1, IF_MAX_PARAM) ||
        !iface_range(fn, "groups", 1, &p->groups, 1, IF_MAX_PARAM))
        return false;
    for (int d = 0; d < r; d++)
        if (w->sizes[d] < 1) {
            mft__set_error(MFT_ERR_SHAPE, "%s: %s sizes %s have a zero dim", fn, ww,
                           mft__fmt_dims(b1, sizeof b1, r, w->sizes));
            return false;
        }
    const int64_t g = p->groups, c_in = big->sizes[1], c_out = small->sizes[1];
    if (c_in % g != 0 || w->sizes[1] != c_in / g || c_out != w->sizes[0] || c_out % g != 0) {
        mft__set_error(MFT_ERR_SHAPE, "%s: %s sizes %s with groups %lld do not fit %s sizes %s "
                       "(C_in) and %s sizes %s (C_out)", fn, ww,
                       mft__fmt_dims(b1, sizeof b1, r, w->sizes), (long long)g, wbig,
                       mft__fmt_dims(b2, sizeof b2, r, big->sizes), wsmall,
                       mft__fmt_dims(b3, sizeof b3, r, small->sizes));
        return false;
    }
    if (!iface_same_dims(fn, wbig, big, wsmall, small, 0, 1)) return false;
    for (int i = 0; i < nsp; i++)
        if (!conv_fits(big->sizes[2 + i], small->sizes[2 + i], w->sizes[2 + i], p->stride[i],
                       p->padding[i], p->dilation[i], f->op != MFT__OP_CONV2D &&
                                                          f->op != MFT__OP_CONV3D)) {
            mft__set_error(MFT_ERR_SHAPE, "%s: %s sizes %s and %s sizes %s do not fit kernel "
                           "sizes %s with the params' stride, padding and dilation (spatial dim "
                           "%d)", fn, wbig, mft__fmt_dims(b1, sizeof b1, r, big->sizes), wsmall,
                           mft__fmt_dims(b2, sizeof b2, r, small->sizes),
                           mft__fmt_dims(b3, sizeof b3, r, w->sizes), i);
            return false;
        }
    return true;
}

static bool conv_check_bias(const char *fn, const mft_conv_params *p, int64_t c, mft_dtype dt) {
    char b[MFT__DIMS_BUF];
    if (!p->bias) return true;
    if (!iface_dtype(fn, "params bias", p->bias, dt)) return false;
    if (p->bias->ndim != 1 || p->bias->sizes[0] != c) {
        mft__set_error(MFT_ERR_SHAPE, "%s: params bias sizes %s should be [%lld]", fn,
                       mft__fmt_dims(b, sizeof b, p->bias->ndim, p->bias->sizes), (long long)c);
        return false;
    }
    return true;
}

/* convNd: inputs {x, w}, outputs {y} */
static bool check_conv(const char *fn, const mft__kernel_iface *f, const mft_kernel_args *a) {
    const mft_tensor *x = a->inputs[0], *w = a->inputs[1], *y = a->outputs[0];
    return iface_dtype(fn, "inputs[1] (w)", w, x->dtype) &&
           conv_check_common(fn, f, a, x, "inputs[0] (x)", y, "outputs[0] (y)", w,
                             "inputs[1] (w)") &&
           conv_check_bias(fn, a->params, y->sizes[1], x->dtype);
}

/* convNd_backward_input: inputs {grad_y, w}, outputs {grad_x} */
static bool check_conv_bwd_in(const char *fn, const mft__kernel_iface *f,
                              const mft_kernel_args *a) {
    const mft_tensor *gy = a->inputs[0], *w = a->inputs[1], *gx = a->outputs[0];
    return iface_dtype(fn, "inputs[1] (w)", w, gy->dtype) &&
           conv_check_common(fn, f, a, gx, "outputs[0] (grad_x)", gy, "inputs[0] (grad_y)", w,
                             "inputs[1] (w)") &&
           conv_check_bias(fn, a->params, gx->sizes[1], gy->dtype);
}

/* convNd_backward_weight: inputs {grad_y, x}, outputs {grad_w} */
static bool check_conv_bwd_w(const char *fn, const mft__kernel_iface *f,
                             const mft_kernel_args *a) {
    const mft_tensor *gy = a->inputs[0], *x = a->inputs[1], *gw = a->outputs[0];
    return iface_dtype(fn, "inputs[1] (x)", x, gy->dtype) &&
           conv_check_common(fn, f, a, x, "inputs[1] (x)", gy, "inputs[0] (grad_y)", gw,
                             "outputs[0] (grad_w)");
}

/* ---------------------------------------------------------------- pools */
typedef struct pool_win {
    int64_t k[3], s[3], p[3], d[3];
    bool ceil_mode;
} pool_win;

static pool_win pool_win_of(int nsp, const void *params) {
    pool_win w;
    memset(&w, 0, sizeof w);
    if (nsp == 2) {
        const mft_pool2d_params *p = params;
        for (int i = 0; i < 2; i++) {
            w.k[i] = p->kernel[i];
            w.s[i] = p->stride[i];
            w.p[i] = p->padding[i];
            w.d[i] = p->dilation[i];
        }
        w.ceil_mode = p->ceil_mode;
    } else {
        const mft_pool3d_params *p = params;
        for (int i = 0; i < 3; i++) {
            w.k[i] = p->kernel[i];
            w.s[i] = p->stride[i];
            w.p[i] = p->padding[i];
            w.d[i] = p->dilation[i];
        }
        w.ceil_mode = p->ceil_mode;
    }
    return w;
}

/* PyTorch's output size of a pooling window (ceil_mode: the last window
 * must start inside the input or its left padding). */
static int64_t pool_out(int64_t in, int64_t k, int64_t pad, int64_t s, int64_t d, bool ceil_mode) {
    int64_t out = iface_div_floor(in + 2 * pad - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0), s) + 1;
    if (ceil_mode && (out - 1) * s >= in + pad) out--;
    return out;
}

static bool pool_is_avg(mft__op_id op) {
    return op == MFT__OP_AVG_POOL2D || op == MFT__OP_AVG_POOL3D ||
           op == MFT__OP_AVG_POOL2D_BACKWARD || op == MFT__OP_AVG_POOL3D_BACKWARD;
}

/* The input-sized activation big (x or grad_x) and the output-sized small
 * one (y or grad_y) of a windowed pool: ranks, batch and channels, sizes
 * the windows give. */
static bool pool_check_windows(const char *fn, const mft__kernel_iface *f, const void *params,
                               const mft_tensor *big, const char *wbig, const mft_tensor *small,
                               const char *wsmall) {
    const int nsp = f->nsp;
    const pool_win w = pool_win_of(nsp, params);
    char b1[MFT__DIMS_BUF], b2[MFT__DIMS_BUF];
    if (!iface_range(fn, "kernel", nsp, w.k, 1, IF_MAX_PARAM) ||
        !iface_range(fn, "stride", nsp, w.s, 1, IF_MAX_PARAM) ||
        !iface_range(fn, "padding", nsp, w.p, 0, IF_MAX_PARAM) ||
        !iface_range(fn, "dilation", nsp, w.d, 1, pool_is_avg(f->op) ? 1 : IF_MAX_PARAM))
        return false;
    for (int i = 0; i < nsp; i++)
        if (w.p[i] > w.k[i] / 2) {
            mft__set_error(MFT_ERR_INVALID, "%s: params padding %lld is more than half of kernel "
                           "%lld", fn, (long long)w.p[i], (long long)w.k[i]);
            return false;
        }
    for (int i = 0; i < nsp; i++) {
        const int64_t o = pool_out(big->sizes[2 + i], w.k[i], w.p[i], w.s[i], w.d[i], w.ceil_mode);
        if (o < 1 || small->sizes[2 + i] != o) {
            mft__set_error(MFT_ERR_SHAPE, "%s: %s sizes %s give %lld windows along spatial dim "
                           "%d, %s sizes %s have %lld", fn, wbig,
                           mft__fmt_dims(b1, sizeof b1, big->ndim, big->sizes), (long long)o, i,
                           wsmall, mft__fmt_dims(b2, sizeof b2, small->ndim, small->sizes),
                           (long long)small->sizes[2 + i]);
            return false;
        }
    }
    return true;
}

/* ranks, equal batch and channels, non-empty channels and spatial dims of big */
static bool pool_check_pair(const char *fn, const mft__kernel_iface *f, const mft_tensor *big,
                            const char *wbig, const mft_tensor *small, const char *wsmall) {
    char b[MFT__DIMS_BUF];
    const int r = f->nsp + 2;
    if (!iface_rank(fn, wbig, big, r) || !iface_rank(fn, wsmall, small, r) ||
        !iface_same_dims(fn, wbig, big, wsmall, small, 0, 2))
        return false;
    for (int d = 1; d < r; d++)
        if (big->sizes[d] < 1) {
            mft__set_error(MFT_ERR_SHAPE, "%s: %s sizes %s have a zero channel or spatial dim", fn,
                           wbig, mft__fmt_dims(b, sizeof b, r, big->sizes));
            return false;
        }
    return true;
}

/* the I64 indices beside values t */
static bool pool_check_indices(const char *fn, const mft_tensor *ind, const char *wind,
                               const mft_tensor *t, const char *wt) {
    return iface_dtype(fn, wind, ind, MFT_I64) && iface_same(fn, wind, ind, wt, t);
}

/* max / avg pools: inputs {x}, outputs {y} or {y, indices} */
static bool check_pool(const char *fn, const mft__kernel_iface *f, const mft_kernel_args *a) {
    const mft_tensor *x = a->inputs[0], *y = a->outputs[0];
    return pool_check_pair(fn, f, x, "inputs[0] (x)", y, "outputs[0] (y)") &&
           pool_check_windows(fn, f, a->params, x, "inputs[0] (x)", y, "outputs[0] (y)") &&
           (f->nout < 2 ||
            pool_check_indices(fn, a->outputs[1], "outputs[1] (indices)", y, "outputs[0] (y)"));
}

/* avg_poolNd_backward: inputs {grad_out}, outputs {grad_x} */
static bool check_pool_bwd(const char *fn, const mft__kernel_iface *f, const mft_kernel_args *a) {
    const mft_tensor *gy = a->inputs[0], *gx = a->outputs[0];
    return pool_check_pair(fn, f, gx, "outputs[0] (grad_x)", gy, "inputs[0] (grad_out)") &&
           pool_check_windows(fn, f, a->params, gx, "outputs[0] (grad_x)", gy,
                              "inputs[0] (grad_out)");
}

/* max_poolNd_backward: inputs {grad_out, indices}, outputs {grad_x}, params
 * the windows or NULL (indices outside grad_x's plane are skipped) */
static bool check_max_pool_bwd(const char *fn, const mft__kernel_iface *f,
                               const mft_kernel_args *a) {
    const mft_tensor *gy = a->inputs[0], *ind = a->inputs[1], *gx = a->outputs[0];
    return pool_check_pair(fn, f, gx, "outputs[0] (grad_x)", gy, "inputs[0] (grad_out)") &&
           pool_check_indices(fn, ind, "inputs[1] (indices)", gy, "inputs[0] (grad_out)") &&
           (!a->params || pool_check_windows(fn, f, a->params, gx, "outputs[0] (grad_x)", gy,
                                             "inputs[0] (grad_out)"));
}

/* the adaptive pools' output size against small's spatial sizes */
static bool adaptive_check_out(const char *fn, const mft__kernel_iface *f, const void *params,
                               const mft_tensor *small, const char *wsmall) {
    const mft_adaptive_pool_params *p = params;
    char b1[MFT__DIMS_BUF], b2[MFT__DIMS_BUF];
    if (!iface_range(fn, "out", f->nsp, p->out, 1, IF_MAX_PARAM)) return false;
    for (int i = 0; i < f->nsp; i++)
        if (small->sizes[2 + i] != p->out[i]) {
            mft__set_error(MFT_ERR_SHAPE, "%s: %s sizes %s do not end in params out %s", fn, wsmall,
                           mft__fmt_dims(b1, sizeof b1, small->ndim, small->sizes),
                           mft__fmt_dims(b2, sizeof b2, f->nsp, p->out));
            return false;
        }
    return true;
}

/* adaptive pools: inputs {x}, outputs {y} or {y, indices} */
static bool check_adaptive(const char *fn, const mft__kernel_iface *f, const mft_kernel_args *a) {
    const mft_tensor *x = a->inputs[0], *y = a->outputs[0];
    return pool_check_pair(fn, f, x, "inputs[0] (x)", y, "outputs[0] (y)") &&
           adaptive_check_out(fn, f, a->params, y, "outputs[0] (y)") &&
           (f->nout < 2 ||
            pool_check_indices(fn, a->outputs[1], "outputs[1] (indices)", y, "outputs[0] (y)"));
}

/* adaptive_avg_poolNd_backward: inputs {grad_out}, outputs {grad_x} */
static bool check_adaptive_bwd(const char *fn, const mft__kernel_iface *f,
                               const mft_kernel_args *a) {
    const mft_tensor *gy = a->inputs[0], *gx = a->outputs[0];
    return pool_check_pair(fn, f, gx, "outputs[0] (grad_x)", gy, "inputs[0] (grad_out)") &&
           adaptive_check_out(fn, f, a->params, gy, "inputs[0] (grad_out)");
}

/* ---------------------------------------------------------------- interpolate */
static bool interp_check_pair(const char *fn, const mft_kernel_args *a, const mft_tensor *in,
                              const char *win, const mft_tensor *out, const char *wout) {
    const mft_interp_params *p = a->params;
    char b1[MFT__DIMS_BUF], b2[MFT__DIMS_BUF];
    if ((unsigned)p->mode >= MFT_INTERP_MODE_COUNT) {
        mft__set_error(MFT_ERR_INVALID, "%s: params mode %d is not an mft_interp_mode", fn,
                       (int)p->mode);
        return false;
    }
    const int m = (int)p->mode;
    const int need = m == MFT_INTERP_LINEAR                                  ? 3
                     : m == MFT_INTERP_BILINEAR || m == MFT_INTERP_BICUBIC ? 4
                     : m == MFT_INTERP_TRILINEAR                             ? 5
                                                                             : in->ndim;
    if (in->ndim < 3 || in->ndim > 5 || in->ndim != need || !iface_rank(fn, wout, out, in->ndim)) {
        if (mft_last_error() != MFT_ERR_RANK)
            mft__set_error(MFT_ERR_RANK, "%s: %s has rank %d (sizes %s); params mode %d needs "
                           "rank %s", fn, win, in->ndim,
                           mft__fmt_dims(b1, sizeof b1, in->ndim, in->sizes), m,
                           need == 3 ? "3" : need == 4 ? "4" : need == 5 ? "5" : "3 to 5");
        return false;
    }
    if (p->align_corners && (m == MFT_INTERP_NEAREST || m == MFT_INTERP_NEAREST_EXACT)) {
        mft__set_error(MFT_ERR_INVALID, "%s: params align_corners is set with a nearest mode", fn);
        return false;
    }
    if (!iface_same_dims(fn, win, in, wout, out, 0, 2)) return false;
    for (int d = 2; d < in->ndim; d++)
        if (in->sizes[d] < 1 || out->sizes[d] < 1 || in->sizes[d] > IF_MAX_INTERP ||
            out->sizes[d] > IF_MAX_INTERP) {
            mft__set_error(MFT_ERR_SHAPE, "%s: spatial sizes of %s %s and %s %s should be in [1, "
                           "%lld]", fn, win, mft__fmt_dims(b1, sizeof b1, in->ndim, in->sizes),
                           wout, mft__fmt_dims(b2, sizeof b2, out->ndim, out->sizes),
                           (long long)IF_MAX_INTERP);
            return false;
        }
    return true;
}

/* interpolate: inputs {x}, outputs {y} */
static bool check_interp(const char *fn, const mft__kernel_iface *f, const mft_kernel_args *a) {
    (void)f;
    return interp_check_pair(fn, a, a->inputs[0], "inputs[0] (x)", a->outputs[0],
                             "outputs[0] (y)");
}

/* interpolate_backward: inputs {grad_out}, outputs {grad_x} */
static bool check_interp_bwd(const char *fn, const mft__kernel_iface *f,
                             const mft_kernel_args *a) {
    (void)f;
    return interp_check_pair(fn, a, a->outputs[0], "outputs[0] (grad_x)", a->inputs[0],
                             "inputs[0] (grad_out)");
}

/* ---------------------------------------------------------------- pad */
/* small: the unpadded tensor (x, grad_x); big: the padded one (y, grad_out) */
static bool pad_check_pair(const char *fn, const mft_kernel_args *a, const mft_tensor *small,
                           const char *wsmall, const mft_tensor *big, const char *wbig) {
    const mft_pad_params *p = a->params;
    char b1[MFT__DIMS_BUF], b2[MFT__DIMS_BUF];
    if ((int)p->mode < 0 || p->mode >= MFT_PAD_MODE_COUNT) {
        mft__set_error(MFT_ERR_INVALID, "%s: params mode %d is not an mft_pad_mode", fn,
                       (int)p->mode);
        return false;
    }
    if (!iface_rank(fn, wbig, big, small->ndim)) return false;
    if (p->mode == MFT_PAD_CONSTANT &&
        mft__check_int_value(fn, "params value", small->dtype, p->value) != MFT_OK)
        return false;
    for (int d = 0; d < small->ndim; d++) {
        const int64_t lo = p->before[d], hi = p->after[d], in = small->sizes[d];
        if (lo < -IF_MAX_PAD || lo > IF_MAX_PAD || hi < -IF_MAX_PAD || hi > IF_MAX_PAD) {
            mft__set_error(MFT_ERR_INVALID, "%s: params pads (%lld, %lld) of dim %d exceed %lld in "
                           "magnitude", fn, (long long)lo, (long long)hi, d, (long long)IF_MAX_PAD);
            return false;
        }
        if (big->sizes[d] != in + lo + hi) {
            mft__set_error(MFT_ERR_SHAPE, "%s: %s sizes %s padded by (%lld, %lld) at dim %d give "
                           "%lld, %s sizes %s have %lld", fn, wsmall,
                           mft__fmt_dims(b1, sizeof b1, small->ndim, small->sizes), (long long)lo,
                           (long long)hi, d, (long long)(in + lo + hi), wbig,
                           mft__fmt_dims(b2, sizeof b2, big->ndim, big->sizes),
                           (long long)big->sizes[d]);
            return false;
        }
        /* reflect and replicate read the input to fill the border */
        if (p->mode != MFT_PAD_CONSTANT && (lo || hi) &&
            (in < 1 || (p->mode == MFT_PAD_REFLECT && (lo >= in || hi >= in)))) {
            mft__set_error(MFT_ERR_INVALID, "%s: params pads (%lld, %lld) at dim %d do not fit %s "
                           "size %lld in mode %d", fn, (long long)lo, (long long)hi, d, wsmall,
                           (long long)in, (int)p->mode);
            return false;
        }
    }
    return true;
}

/* pad: inputs {x}, outputs {y} */
static bool check_pad(const char *fn, const mft__kernel_iface *f, const mft_kernel_args *a) {
    (void)f;
    return pad_check_pair(fn, a, a->inputs[0], "inputs[0] (x)", a->outputs[0], "outputs[0] (y)");
}

/* pad_backward: inputs {grad_out}, outputs {grad_x} */
static bool check_pad_bwd(const char *fn, const mft__kernel_iface *f, const mft_kernel_args *a) {
    (void)f;
    return pad_check_pair(fn, a, a->outputs[0], "outputs[0] (grad_x)", a->inputs[0],
                          "inputs[0] (grad_out)");
}

/* ---------------------------------------------------------------- softmax */
static bool check_softmax(const char *fn, const mft__kernel_iface *f, const mft_kernel_args *a) {
    const mft_softmax_params *p = a->params;
    const mft_tensor *x = a->inputs[0];
    if (p->dim < 0 || p->dim >= x->ndim) {
        mft__set_error(MFT_ERR_DIM, "%s: params dim %d is not in [0, %d) (already wrapped)", fn,
                       p->dim, x->ndim);
        return false;
    }
    if (!iface_same(fn, "outputs[0]", a->outputs[0], "inputs[0]", x)) return false;
    return f->nin < 2 || (iface_dtype(fn, "inputs[1] (out)", a->inputs[1], x->dtype) &&
                          iface_same(fn, "inputs[1] (out)", a->inputs[1], "inputs[0]", x));
}

/* ---------------------------------------------------------------- matmul */
static bool check_matmul(const char *fn, const mft__kernel_iface *f, const mft_kernel_args *a) {
    (void)f;
    const mft_matmul_params *p = a->params;
    const mft_tensor *A = a->inputs[0], *B = a->inputs[1], *C = a->outputs[0];
    char b1[MFT__DIMS_BUF], b2[MFT__DIMS_BUF], b3[MFT__DIMS_BUF];
    const int r = C->ndim;
    if (!iface_dtype(fn, "inputs[1] (b)", B, A->dtype)) return false;
    if (r < 2) {
        mft__set_error(MFT_ERR_RANK, "%s: outputs[0] (c) has rank %d, the kernel needs 2 or more",
                       fn, r);
        return false;
    }
    if (!iface_rank(fn, "inputs[0] (a)", A, r) || !iface_rank(fn, "inputs[1] (b)", B, r))
        return false;
    const int64_t M = A->sizes[r - (p->transpose_a ? 1 : 2)];
    const int64_t K = A->sizes[r - (p->transpose_a ? 2 : 1)];
    const int64_t KB = B->sizes[r - (p->transpose_b ? 1 : 2)];
    const int64_t N = B->sizes[r - (p->transpose_b ? 2 : 1)];
    bool ok = M == C->sizes[r - 2] && N == C->sizes[r - 1] && K == KB;
    for (int d = 0; ok && d < r - 2; d++) ok = A->sizes[d] == C->sizes[d] && B->sizes[d] == C->sizes[d];
    if (!ok) {
        mft__set_error(MFT_ERR_SHAPE, "%s: a sizes %s and b sizes %s (transpose_a %d, "
                       "transpose_b %d) do not multiply into c sizes %s", fn,
                       mft__fmt_dims(b1, sizeof b1, r, A->sizes),
                       mft__fmt_dims(b2, sizeof b2, r, B->sizes), (int)p->transpose_a,
                       (int)p->transpose_b, mft__fmt_dims(b3, sizeof b3, r, C->sizes));
        return false;
    }
    return true;
}

/* ---------------------------------------------------------------- norms
 * Their params carry work space the op sizes, so their built-ins run only
 * with the params of a running dispatch of the same op (checked before);
 * the tensors must still fit each other. */
static bool check_norm(const char *fn, const mft__kernel_iface *f, const mft_kernel_args *a) {
    const mft_tensor *x = a->inputs[f->nin - 1];
    if (!iface_same(fn, "outputs[0]", a->outputs[0], "inputs[0]", a->inputs[0])) return false;
    return f->nin < 2 || (iface_dtype(fn, "inputs[1] (x)", x, a->inputs[0]->dtype) &&
                          iface_same(fn, "inputs[1] (x)", x, "inputs[0]", a->inputs[0]));
}

/* ---------------------------------------------------------------- the table */
#define P2 "mft_pool2d_params", "mft/pool.h"
#define P3 "mft_pool3d_params", "mft/pool.h"
#define PA "mft_adaptive_pool_params", "mft/pool.h"
#define PC "mft_conv_params", "mft/conv.h"
#define PN "mft__norm_kparams", NULL
#define PNB "mft__normb_kparams", NULL
#define PS "mft_softmax_params", "mft/softmax.h"
/* op, nin, nout, inputs, outputs, packed, params type, header, params optional, nsp, check */
static const mft__kernel_iface g_ifaces[] = {
    {MFT__OP_CONV2D, 2, 1, "x, w", "y", 0x1, PC, false, 2, check_conv},
    {MFT__OP_CONV3D, 2, 1, "x, w", "y", 0x1, PC, false, 3, check_conv},
    {MFT__OP_CONV2D_BACKWARD_INPUT, 2, 1, "grad_y, w", "grad_x", 0x1, PC, false, 2,
     check_conv_bwd_in},
    {MFT__OP_CONV2D_BACKWARD_WEIGHT, 2, 1, "grad_y, x", "grad_w", 0x3, PC, false, 2,
     check_conv_bwd_w},
    {MFT__OP_CONV3D_BACKWARD_INPUT, 2, 1, "grad_y, w", "grad_x", 0x1, PC, false, 3,
     check_conv_bwd_in},
    {MFT__OP_CONV3D_BACKWARD_WEIGHT, 2, 1, "grad_y, x", "grad_w", 0x3, PC, false, 3,
     check_conv_bwd_w},
    {MFT__OP_MAX_POOL2D, 1, 2, "x", "y, indices", 0x1, P2, false, 2, check_pool},
    {MFT__OP_RELU_MAX_POOL2D, 1, 2, "x", "y, indices", 0x1, P2, false, 2, check_pool},
    {MFT__OP_AVG_POOL2D, 1, 1, "x", "y", 0x1, P2, false, 2, check_pool},
    {MFT__OP_MAX_POOL3D, 1, 2, "x", "y, indices", 0x1, P3, false, 3, check_pool},
    {MFT__OP_AVG_POOL3D, 1, 1, "x", "y", 0x1, P3, false, 3, check_pool},
    {MFT__OP_MAX_POOL2D_BACKWARD, 2, 1, "grad_out, indices", "grad_x", 0x3, P2, true, 2,
     check_max_pool_bwd},
    {MFT__OP_AVG_POOL2D_BACKWARD, 1, 1, "grad_out", "grad_x", 0x1, P2, false, 2, check_pool_bwd},
    {MFT__OP_MAX_POOL3D_BACKWARD, 2, 1, "grad_out, indices", "grad_x", 0x3, P3, true, 3,
     check_max_pool_bwd},
    {MFT__OP_AVG_POOL3D_BACKWARD, 1, 1, "grad_out", "grad_x", 0x1, P3, false, 3, check_pool_bwd},
    {MFT__OP_ADAPTIVE_AVG_POOL2D, 1, 1, "x", "y", 0x1, PA, false, 2, check_adaptive},
    {MFT__OP_ADAPTIVE_MAX_POOL2D, 1, 2, "x", "y, indices", 0x1, PA, false, 2, check_adaptive},
    {MFT__OP_ADAPTIVE_AVG_POOL3D, 1, 1, "x", "y", 0x1, PA, false, 3, check_adaptive},
    {MFT__OP_ADAPTIVE_MAX_POOL3D, 1, 2, "x", "y, indices", 0x1, PA, false, 3, check_adaptive},
    {MFT__OP_ADAPTIVE_AVG_POOL2D_BACKWARD, 1, 1, "grad_out", "grad_x", 0x1, PA, false, 2,
     check_adaptive_bwd},
    {MFT__OP_ADAPTIVE_AVG_POOL3D_BACKWARD, 1, 1, "grad_out", "grad_x", 0x1, PA, false, 3,
     check_adaptive_bwd},
    {MFT__OP_INTERPOLATE, 1, 1, "x", "y", 0x1, "mft_interp_params", "mft/resize.h", false, 0,
     check_interp},
    {MFT__OP_INTERPOLATE_BACKWARD, 1, 1, "grad_out", "grad_x", 0x1, "mft_interp_params",
     "mft/resize.h", false, 0, check_interp_bwd},
    {MFT__OP_PAD, 1, 1, "x", "y", 0x1, "mft_pad_params", "mft/shape.h", false, 0, check_pad},
    {MFT__OP_PAD_BACKWARD, 1, 1, "grad_out", "grad_x", 0x1, "mft_pad_params", "mft/shape.h", false,
     0, check_pad_bwd},
    {MFT__OP_BATCH_NORM, 1, 1, "x", "y", 0x1, PN, false, 0, check_norm},
    {MFT__OP_GROUP_NORM, 1, 1, "x", "y", 0x1, PN, false, 0, check_norm},
    {MFT__OP_LAYER_NORM, 1, 1, "x", "y", 0x1, PN, false, 0, check_norm},
    {MFT__OP_BATCH_NORM_BACKWARD, 2, 1, "grad_out, x", "grad_x", 0x3, PNB, false, 0, check_norm},
    {MFT__OP_LAYER_NORM_BACKWARD, 2, 1, "grad_out, x", "grad_x", 0x3, PNB, false, 0, check_norm},
    {MFT__OP_GROUP_NORM_BACKWARD, 2, 1, "grad_out, x", "grad_x", 0x3, PNB, false, 0, check_norm},
    {MFT__OP_SOFTMAX, 1, 1, "x", "y", 0x1, PS, false, 0, check_softmax},
    {MFT__OP_LOG_SOFTMAX, 1, 1, "x", "y", 0x1, PS, false, 0, check_softmax},
    {MFT__OP_SOFTMAX_BACKWARD, 2, 1, "grad_out, out", "grad_x", 0x3, PS, false, 0, check_softmax},
    {MFT__OP_LOG_SOFTMAX_BACKWARD, 2, 1, "grad_out, out", "grad_x", 0x3, PS, false, 0,
     check_softmax},
    {MFT__OP_MATMUL, 2, 1, "a, b", "c", 0x3, "mft_matmul_params", "mft/linalg.h", false, 0,
     check_matmul},
};
#undef P2
#undef P3
#undef PA
#undef PC
#undef PN
#undef PNB
#undef PS

const mft__kernel_iface *mft__kernel_iface_of(mft__op_id op) {
    const mft_op_info *info = mft_op_at((int)op);
    if (!info || !info->dispatched) return NULL;
    for (size_t i = 0; i < sizeof g_ifaces / sizeof g_ifaces[0]; i++)
        if (g_ifaces[i].op == op) return &g_ifaces[i];
    return NULL;
}

/* ---------------------------------------------------------------- calling a built-in */
/* [lo, hi) bytes t addresses; empty for an empty tensor */
static void iface_bytes(const mft_tensor *t, uintptr_t *lo, uintptr_t *hi) {
    *lo = *hi = (uintptr_t)mft__tensor_ptr(t);
    if (t->numel == 0) return;
    int64_t span = 1;
    for (int d = 0; d < t->ndim; d++) span += (t->sizes[d] - 1) * t->strides[d];
    *hi = *lo + (uintptr_t)span * mft_dtype_size(t->dtype);
}

static bool iface_disjoint(const mft_tensor *a, const mft_tensor *b) {
    uintptr_t alo, ahi, blo, bhi;
    iface_bytes(a, &alo, &ahi);
    iface_bytes(b, &blo, &bhi);
    return alo == ahi || blo == bhi || ahi <= blo || bhi <= alo;
}

/* Counts, NULLs, dtypes of the first operands, packing, overlap. */
static bool iface_check_args(const char *fn, const mft__kernel_iface *f,
                             const mft__kernel_def *k, mft_dtype dtype,
                             const mft_kernel_args *a) {
    const char *op = mft__op_name(f->op);
    char nb[32], b1[MFT__DIMS_BUF];
    if (!a) {
        mft__set_error(MFT_ERR_NULL, "%s: args is NULL (op %s)", fn, op);
        return false;
    }
    if (a->ninputs != f->nin || a->noutputs != f->nout) {
        mft__set_error(MFT_ERR_INVALID, "%s: kernels of %s take %d inputs (%s) and %d outputs "
                       "(%s), args has %d and %d", fn, op, f->nin, f->inputs, f->nout, f->outputs,
                       a->ninputs, a->noutputs);
        return false;
    }
    if (!a->inputs || !a->outputs) {
        mft__set_error(MFT_ERR_NULL, "%s: args %s is NULL (op %s)", fn,
                       !a->inputs ? "inputs" : "outputs", op);
        return false;
    }
    for (int i = 0; i < f->nin + f->nout; i++) {
        const bool is_in = i < f->nin;
        const int j = is_in ? i : i - f->nin;
        if (is_in ? a->inputs[j] != NULL : a->outputs[j] != NULL) continue;
        mft__set_error(MFT_ERR_NULL, "%s: args %s[%d] (%s) is NULL (op %s)", fn,
                       is_in ? "inputs" : "outputs", j,
                       is_in ? iface_in_name(f, j, nb, sizeof nb) : f->outputs, op);
        return false;
    }
    /* kernels index their operands with plain strides: a blocked tensor
     * (outer strides, docs/spec.md §7.6) is refused, never misread */
    for (int i = 0; i < f->nin + f->nout; i++) {
        const bool is_in = i < f->nin;
        const int j = is_in ? i : i - f->nin;
        const mft_tensor *t = is_in ? a->inputs[j] : a->outputs[j];
        if (!mft__is_blocked(t)) continue;
        char what[192];
        snprintf(what, sizeof what, "the kernel operand %s[%d] (%s of op %s)",
                 is_in ? "inputs" : "outputs", j,
                 is_in ? iface_in_name(f, j, nb, sizeof nb) : f->outputs, op);
        mft__blk_refuse(fn, t, what);
        return false;
    }
    if (!a->params && !f->params_optional) {
        mft__set_error(MFT_ERR_NULL, "%s: args params is NULL; kernels of %s take a %s", fn, op,
                       f->params);
        return false;
    }
    if (!iface_dtype(fn, "inputs[0]", a->inputs[0], dtype) ||
        !iface_dtype(fn, "outputs[0]", a->outputs[0], dtype))
        return false;
    for (int i = 0; i < f->nin + f->nout; i++) {
        const bool is_in = i < f->nin;
        const int j = is_in ? i : i - f->nin;
        const mft_tensor *t = is_in ? a->inputs[j] : a->outputs[j];
        if (is_in && !(f->packed & (1u << j))) continue;
        const bool ok = k->fmt == MFT_FORMAT_ANY ? (is_in || t->numel == 0 || mft_tensor_is_dense(t))
                                                 : mft_tensor_is_contiguous(t, k->fmt);
        if (ok) continue;
        if (k->fmt == MFT_FORMAT_ANY)
            mft__set_error(MFT_ERR_OVERLAP, "%s: outputs[%d] (sizes %s) may overlap itself", fn, j,
                           mft__fmt_dims(b1, sizeof b1, t->ndim, t->sizes));
        else
            mft__set_error(MFT_ERR_FORMAT, "%s: %s[%d] (sizes %s, %s) is not packed %s, which "
                           "kernel %s needs", fn, is_in ? "inputs" : "outputs", j,
                           mft__fmt_dims(b1, sizeof b1, t->ndim, t->sizes), mft__layout_label(t),
                           mft_format_name(k->fmt), k->name);
        return false;
    }
    for (int j = 0; j < f->nout; j++) {
        for (int i = 0; i < f->nin; i++)
            if (!iface_disjoint(a->outputs[j], a->inputs[i])) {
                mft__set_error(MFT_ERR_OVERLAP, "%s: outputs[%d] shares memory with inputs[%d]",
                               fn, j, i);
                return false;
            }
        for (int i = 0; i < j; i++)
            if (!iface_disjoint(a->outputs[j], a->outputs[i])) {
                mft__set_error(MFT_ERR_OVERLAP, "%s: outputs[%d] shares memory with outputs[%d]",
                               fn, j, i);
                return false;
            }
    }
    return true;
}

mft_status mft_dispatch_call_builtin(const char *op, mft_format fmt, mft_dtype dtype,
                                     const char *name, const mft_kernel_args *args) {
    static const char fn[] = "mft_dispatch_call_builtin";
    if (!op) {
        mft__set_error(MFT_ERR_NULL, "%s: op name is NULL", fn);
        return MFT_ERR_NULL;
    }
    const mft_op_info *info = mft_op_find(op);
    if (!info || !info->dispatched) {
        mft__set_error(MFT_ERR_INVALID, "%s: no dispatched op named \"%s\"", fn, op);
        return MFT_ERR_INVALID;
    }
    const mft__op_id id = (mft__op_id)(info - mft_op_at(0));
    if (fmt != MFT_CONTIGUOUS && fmt != MFT_CHANNELS_LAST && fmt != MFT_FORMAT_ANY) {
        mft__set_error(MFT_ERR_FORMAT, "%s: format %d is not CONTIGUOUS, CHANNELS_LAST or ANY", fn,
                       (int)fmt);
        return MFT_ERR_FORMAT;
    }
    if (mft__check_dtype(fn, dtype) != MFT_OK) return mft_last_error();
    const mft__kernel_def *k = mft__builtin_find(id, fmt, dtype, name);
    if (!k) {
        char have[48];
        unsigned fm = mft__builtin_formats(id, dtype);
        snprintf(have, sizeof have, "%s%s%s", fm & (1u << MFT_CONTIGUOUS) ? " CONTIGUOUS" : "",
                 fm & (1u << MFT_CHANNELS_LAST) ? " CHANNELS_LAST" : "",
                 fm & (1u << MFT_FORMAT_ANY) ? " ANY" : "");
        mft__set_error(MFT_ERR_INVALID, "%s: no built-in kernel %s%s%sfor (%s, %s, %s); %s has %s "
                       "built-ins in:%s (mft_dispatch_list names them)", fn, name ? "named \"" : "",
                       name ? name : "", name ? "\" " : "", op,
                       fmt == MFT_FORMAT_ANY ? "ANY" : mft_format_name(fmt),
                       mft_dtype_name(dtype), op, mft_dtype_name(dtype), fm ? have : " none");
        return MFT_ERR_INVALID;
    }
    const mft__kernel_iface *f = mft__kernel_iface_of(id);
    if (!f) {
        mft__set_error(MFT_ERR_INTERNAL, "%s: op %s has no kernel interface", fn, op);
        return MFT_ERR_INTERNAL;
    }
    if (!iface_check_args(fn, f, k, dtype, args)) return mft_last_error();
    if (!f->header && !mft__dispatch_running(id, args->params)) {
        mft__set_error(MFT_ERR_UNSUPPORTED, "%s: the built-in kernels of %s take internal "
                       "parameters (%s, with work space the op sizes): call them from inside a "
                       "kernel dispatched for %s, with the params it received", fn, op, f->params,
                       op);
        return MFT_ERR_UNSUPPORTED;
    }
    if (f->check && !f->check(fn, f, args)) return mft_last_error();
    return mft__dispatch_run_builtin(fn, k, args);
}

/* ---------------------------------------------------------------- docs/dispatch.md */
size_t mft__dispatch_markdown(char *buf, size_t len) {
    mft__text b = {buf, len, 0};
    if (buf && len) buf[0] = '\0';
    mft__text_printf(&b, "| op | kernel inputs | kernel outputs | params | built-in kernels |\n");
    mft__text_printf(&b, "|---|---|---|---|---|\n");
    for (int i = 0; i < mft_op_count(); i++) {
        const mft_op_info *info = mft_op_at(i);
        if (!info->dispatched) continue;
        const mft__kernel_iface *f = mft__kernel_iface_of((mft__op_id)i);
        mft__text_printf(&b, "| `%s` | ", info->name);
        if (!f) {
            mft__text_printf(&b, "? | ? | ? | ? |\n");
            continue;
        }
        char nb[32];
        for (int k = 0; k < f->nin; k++)
            mft__text_printf(&b, "%s%s%s", k ? ", " : "", iface_in_name(f, k, nb, sizeof nb),
                             f->packed & (1u << k) ? "" : " (as given)");
        mft__text_printf(&b, " | %s | `%s`%s%s%s%s | ", f->outputs, f->params,
                         f->params_optional ? " or NULL" : "", f->header ? " (" : " (internal)",
                         f->header ? f->header : "", f->header ? ")" : "");
        static const mft_format fmts[3] = {MFT_CONTIGUOUS, MFT_CHANNELS_LAST, MFT_FORMAT_ANY};
        bool first = true;
        for (int fi = 0; fi < 3; fi++) {
            unsigned dts = 0;
            for (int dt = 0; dt < MFT_DTYPE_COUNT; dt++)
                if (mft__builtin_formats((mft__op_id)i, (mft_dtype)dt) & (1u << fmts[fi]))
                    dts |= 1u << dt;
            if (!dts) continue;
            char list[64];
            mft__dtype_mask_text(list, sizeof list, dts);
            mft__text_printf(&b, "%s%s: %s", first ? "" : "; ",
                             fmts[fi] == MFT_FORMAT_ANY ? "ANY" : mft_format_name(fmts[fi]), list);
            first = false;
        }
        mft__text_printf(&b, " |\n");
    }
    return b.pos;
}
