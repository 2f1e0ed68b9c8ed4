/* ops/pool/pool2d.c — 2-D max and average pooling (forward) and the fused
 * relu -> max pooling, dispatched by (op, format, dtype) (DESIGN §7,
 * mft/cnn.h).
 *
 * The file reads top to bottom: parameter checks and the entry points, the
 * reference kernels (which define the semantics), the fast NCHW and NHWC F32
 * kernels, and the kernel table.
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
 * packed in x's tag (SPEC §4); rank 3 results are CONTIGUOUS like PyTorch's
 * (mft's rank-3 CHANNELS_LAST means N,L,C, which is no pooling layout).
 * Under a recording tape the entry points also record a node whose backward
 * runs mft_max_pool2d_backward / mft_avg_pool2d_backward (ops/pool_more.c). */
#include <stdio.h>
#include <string.h>
#include "autograd_internal.h"
#include "ops_internal.h"

/* Note [Kernel tables]: the built-in kernels this family dispatches to. */
static const mft__kernel_def *const g_tables[] = {mft__kernels_pool, mft__kernels_pool_more, NULL};
#if defined(__AVX2__)
#include <immintrin.h>
#define POOL_HAVE_AVX2 1
#else
#define POOL_HAVE_AVX2 0
#endif
#if defined(__AVX512F__) && (defined(__GNUC__) || defined(__clang__))
#define POOL_HAVE_Z16 1
#include "kernels_avx512.h"

#else
#define POOL_HAVE_Z16 0
#endif

/* The reference kernels, for tests (ops_internal.h is shared; declared here). */
mft_kernel_fn mft__pool_reference(mft__op_id op, mft_dtype dt);

/* Largest kernel/stride/padding/dilation accepted: keeps the output-size
 * arithmetic far from int64 overflow. */
#define POOL_MAX_PARAM ((int64_t)1 << 30)
/* Channels accumulated in registers by the NHWC avg kernel. */
#define POOL_VB 64
/* Largest OW whose per-column divisor tables the NCHW avg kernel keeps on
 * the stack (else per-output divisors). */
#define POOL_TAB 1024
/* 8-lane float / int32 vectors (GCC/Clang vector extension) for the NHWC
 * kernels' register accumulators. */
#if defined(__GNUC__) || defined(__clang__)
#define POOL_HAVE_V8 1
typedef float pool_v8 __attribute__((vector_size(32)));
typedef int32_t pool_i8 __attribute__((vector_size(32)));
#else
#define POOL_HAVE_V8 0
#endif

/* ---------------------------------------------------------------- output sizes */
static int64_t pool_div_floor(int64_t a, int64_t b) {
    int64_t q = a / b, r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? q - 1 : q;
}

/* PyTorch's pooling_output_shape. */
static int64_t pool_out_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dil,
                             bool ceil_mode) {
    int64_t out = pool_div_floor(in + 2 * pad - dil * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0),
                                 stride) + 1;
    if (ceil_mode && (out - 1) * stride >= in + pad) out--;
    return out;
}

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
 * backward functions (ops/pool_more.c) write grad_x packed in x's tag (SPEC
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
        outs[0] = mft__tensor_alloc(fn, 4, out4, x->dtype, fmt);
        ok = outs[0] != NULL;
    }
    if (ok && is_max) {
        outs[1] = mft__tensor_alloc(fn, 4, out4, MFT_I64, fmt);
        ok = outs[1] != NULL;
    }
    if (ok) {
        const mft_tensor *ins[1] = {x4};
        const bool convert[1] = {true};
        ok = mft__dispatch(fn, g_tables, op, fmt, x->dtype, 1, ins, convert, is_max ? 2 : 1, outs, &p) ==
             MFT_OK;
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
    if (!ok) {
        mft__relabel_error(fn);
        mft_tensor_release(res[0]);
        mft_tensor_release(res[1]);
        return NULL;
    }
    /* hand the results to the caller (registered in the innermost scope) */
    mft_tensor *r = mft__retain_result(fn, res[0]);
    mft_tensor *ri = NULL;
    if (r && indices_out) {
        ri = mft__retain_result(fn, res[1]);
        if (!ri) r = NULL; /* only fails inside a scope, which then owns r */
    }
    if (r && rec) {
        const pool_ag_params q = {is_max, p};
        const mft_tensor *saved[2] = {x, res[1]};
        if (mft__ag_record(fn, mft__op_name(op), pool_node_backward, 1, &x,
                           1, &r, is_max ? 2 : 1, saved, &q, sizeof q) != MFT_OK) {
            mft__ag_drop_result(r);
            if (ri) mft__ag_drop_result(ri);
            r = ri = NULL;
        }
    }
    mft_tensor_release(res[0]);
    mft_tensor_release(res[1]);
    if (indices_out) *indices_out = ri;
    return r;
}

/* The max entry points: indices NULL for the value-only forms; the
 * *_with_indices forms require it. */
static mft_tensor *max_entry(const char *fn, mft__op_id op, const mft_tensor *x,
                             const int64_t kernel[2], const int64_t stride[2],
                             const int64_t padding[2], const int64_t dilation[2], bool ceil_mode,
                             bool want_indices, mft_tensor **indices) {
    if (want_indices) {
        if (indices) *indices = NULL;
        if (!indices) {
            if (!x) mft__null_arg(fn, "x");
            else mft__set_error(MFT_ERR_NULL, "%s: argument 'indices' is NULL", fn);
            return NULL;
        }
    }
    const pool_args a = {kernel, stride, padding, dilation, ceil_mode, false, 0};
    return pool_run(fn, op, x, &a, want_indices ? indices : NULL);
}

mft_tensor *mft_max_pool2d_with_indices(const mft_tensor *x, const int64_t kernel[2],
                                        const int64_t stride[2], const int64_t padding[2],
                                        const int64_t dilation[2], bool ceil_mode,
                                        mft_tensor **indices) {
    return max_entry("mft_max_pool2d_with_indices", MFT__OP_MAX_POOL2D, x, kernel, stride,
                     padding, dilation, ceil_mode, true, indices);
}

mft_tensor *mft_max_pool2d(const mft_tensor *x, const int64_t kernel[2], const int64_t stride[2],
                           const int64_t padding[2], const int64_t dilation[2], bool ceil_mode) {
    return max_entry("mft_max_pool2d", MFT__OP_MAX_POOL2D, x, kernel, stride, padding, dilation,
                     ceil_mode, false, NULL);
}

mft_tensor *mft_relu_max_pool2d_with_indices(const mft_tensor *x, const int64_t kernel[2],
                                             const int64_t stride[2], const int64_t padding[2],
                                             const int64_t dilation[2], bool ceil_mode,
                                             mft_tensor **indices) {
    return max_entry("mft_relu_max_pool2d_with_indices", MFT__OP_RELU_MAX_POOL2D, x, kernel,
                     stride, padding, dilation, ceil_mode, true, indices);
}

mft_tensor *mft_relu_max_pool2d(const mft_tensor *x, const int64_t kernel[2],
                                const int64_t stride[2], const int64_t padding[2],
                                const int64_t dilation[2], bool ceil_mode) {
    return max_entry("mft_relu_max_pool2d", MFT__OP_RELU_MAX_POOL2D, x, kernel, stride, padding,
                     dilation, ceil_mode, false, NULL);
}

mft_tensor *mft_avg_pool2d(const mft_tensor *x, const int64_t kernel[2], const int64_t stride[2],
                           const int64_t padding[2], bool ceil_mode, bool count_include_pad,
                           int64_t divisor_override) {
    pool_args a = {kernel, stride, padding, NULL, ceil_mode, count_include_pad, divisor_override};
    return pool_run("mft_avg_pool2d", MFT__OP_AVG_POOL2D, x, &a, NULL);
}

/* ---------------------------------------------------------------- window helpers */
/* Max window along one dim for output o: first valid position (PyTorch's i0
 * after skipping the padding by dilation steps) and the end (exclusive). */
static inline void max_window(int64_t o, int64_t in, int64_t k, int64_t s, int64_t pad,
                              int64_t dil, int64_t *i0, int64_t *i1) {
    int64_t start = o * s - pad, end = start + (k - 1) * dil + 1;
    *i1 = end < in ? end : in;
    while (start < 0) start += dil;
    *i0 = start;
}

/* Avg window along one dim: clipped [i0, i1) and the padded extent. */
static inline void avg_window(int64_t o, int64_t in, int64_t k, int64_t s, int64_t pad,
                              int64_t *i0, int64_t *i1, int64_t *padded) {
    int64_t start = o * s - pad, end = start + k;
    if (end > in + pad) end = in + pad;
    *padded = end - start;
    *i0 = start < 0 ? 0 : start;
    *i1 = end < in ? end : in;
}

/* The divisor of one avg output (0: empty window, the output is 0). */
static inline int64_t avg_divisor(const mft_pool2d_params *p, int64_t h0, int64_t h1,
                                  int64_t ph, int64_t w0, int64_t w1, int64_t pw) {
    if (h0 >= h1 || w0 >= w1) return 0;
    if (p->divisor_override) return p->divisor_override;
    return p->count_include_pad ? ph * pw : (h1 - h0) * (w1 - w0);
}

/* ---------------------------------------------------------------- reference kernels
 * The semantics in the simplest loops. They index with the tensors' real
 * strides, so they accept any layout (the tests call them on any). */
#define REF_KERNELS(D)                                                                        \
    static void max_pool2d_ref_##D(const mft_kernel_args *a) {                                \
        typedef MFT__T_##D T;                                                                 \
        const mft_pool2d_params *p = a->params;                                               \
        const mft_tensor *x = a->inputs[0], *y = a->outputs[0], *yi = a->outputs[1];          \
        const T *xd = (const T *)(const void *)mft__tensor_ptr(x);                            \
        T *yd = (T *)(void *)mft__tensor_ptr(y);                                              \
        int64_t *id = (int64_t *)(void *)mft__tensor_ptr(yi);                                 \
        const int64_t H = x->sizes[2], W = x->sizes[3];                                       \
        for (int64_t n = 0; n < y->sizes[0]; n++)                                             \
            for (int64_t c = 0; c < y->sizes[1]; c++)                                         \
                for (int64_t oh = 0; oh < y->sizes[2]; oh++)                                  \
                    for (int64_t ow = 0; ow < y->sizes[3]; ow++) {                            \
                        int64_t h0, h1, w0, w1;                                               \
                        max_window(oh, H, p->kernel[0], p->stride[0], p->padding[0],          \
                                   p->dilation[0], &h0, &h1);                                 \
                        max_window(ow, W, p->kernel[1], p->stride[1], p->padding[1],          \
                                   p->dilation[1], &w0, &w1);                                 \
                        T m = -INFINITY;                                                      \
                        int64_t mi = h0 * W + w0;                                             \
                        for (int64_t h = h0; h < h1; h += p->dilation[0])                     \
                            for (int64_t w = w0; w < w1; w += p->dilation[1]) {               \
                                T v = xd[n * x->strides[0] + c * x->strides[1] +              \
                                         h * x->strides[2] + w * x->strides[3]];              \
                                if (v > m || v != v) {                                        \
                                    m = v;                                                    \
                                    mi = h * W + w;                                           \
                                }                                                             \
                            }                                                                 \
                        int64_t yo = n * y->strides[0] + c * y->strides[1] +                  \
                                     oh * y->strides[2] + ow * y->strides[3];                 \
                        int64_t io = n * yi->strides[0] + c * yi->strides[1] +                \
                                     oh * yi->strides[2] + ow * yi->strides[3];               \
                        yd[yo] = m;                                                           \
                        id[io] = mi;                                                          \
                    }                                                                         \
    }                                                                                         \
    static void avg_pool2d_ref_##D(const mft_kernel_args *a) {                                \
        typedef MFT__T_##D T;                                                                 \
        const mft_pool2d_params *p = a->params;                                               \
        const mft_tensor *x = a->inputs[0], *y = a->outputs[0];                               \
        const T *xd = (const T *)(const void *)mft__tensor_ptr(x);                            \
        T *yd = (T *)(void *)mft__tensor_ptr(y);                                              \
        const int64_t H = x->sizes[2], W = x->sizes[3];                                       \
        for (int64_t n = 0; n < y->sizes[0]; n++)                                             \
            for (int64_t c = 0; c < y->sizes[1]; c++)                                         \
                for (int64_t oh = 0; oh < y->sizes[2]; oh++)                                  \
                    for (int64_t ow = 0; ow < y->sizes[3]; ow++) {                            \
                        int64_t h0, h1, ph, w0, w1, pw;                                       \
                        avg_window(oh, H, p->kernel[0], p->stride[0], p->padding[0], &h0,     \
                                   &h1, &ph);                                                 \
                        avg_window(ow, W, p->kernel[1], p->stride[1], p->padding[1], &w0,     \
                                   &w1, &pw);                                                 \
                        int64_t div = avg_divisor(p, h0, h1, ph, w0, w1, pw);                 \
                        T s = 0;                                                              \
                        for (int64_t h = h0; h < h1; h++)                                     \
                            for (int64_t w = w0; w < w1; w++)                                 \
                                s += xd[n * x->strides[0] + c * x->strides[1] +               \
                                        h * x->strides[2] + w * x->strides[3]];               \
                        yd[n * y->strides[0] + c * y->strides[1] + oh * y->strides[2] +       \
                           ow * y->strides[3]] = div ? s / (T)div : (T)0;                     \
                    }                                                                         \
    }
REF_KERNELS(F32)
REF_KERNELS(F64)

/* relu_max_pool2d = max_pool2d of relu(x). relu is monotone, so the window
 * maximum of relu(x) is relu of the window maximum m: the value is
 * (m < 0 ? 0 : m), relu's own formula, and the index is kept where relu's
 * backward (grad where the result is > 0 or NaN) lets the gradient through,
 * else -1, which the max-pool backward skips. Where m > 0 the first maximum
 * of relu(x) and of x are the same position. One output element: */
#define RELU_CLAMP(T, y, i)                                                                   \
    do {                                                                                      \
        const T relu_v_ = (y);                                                                \
        (i) = relu_v_ <= 0 ? -1 : (i);                                                        \
        (y) = relu_v_ < 0 ? (T)0 : relu_v_;                                                   \
    } while (0)

/* Selects, not a branch (the signs come at random: a branch cost more than
 * the pooling itself), so the loop vectorises. */
static void relu_clamp_f32(float *restrict y, int64_t *restrict yi, int64_t n) {
    for (int64_t k = 0; k < n; k++) RELU_CLAMP(float, y[k], yi[k]);
}

#define RELU_REF(D)                                                                           \
    static void relu_max_pool2d_ref_##D(const mft_kernel_args *a) {                           \
        typedef MFT__T_##D T;                                                                 \
        max_pool2d_ref_##D(a);                                                                \
        const mft_tensor *y = a->outputs[0], *yi = a->outputs[1];                             \
        T *yd = (T *)(void *)mft__tensor_ptr(y);                                              \
        int64_t *id = (int64_t *)(void *)mft__tensor_ptr(yi);                                 \
        for (int64_t n = 0; n < y->sizes[0]; n++)                                             \
            for (int64_t c = 0; c < y->sizes[1]; c++)                                         \
                for (int64_t h = 0; h < y->sizes[2]; h++)                                     \
                    for (int64_t w = 0; w < y->sizes[3]; w++)                                 \
                        RELU_CLAMP(T,                                                         \
                                   yd[n * y->strides[0] + c * y->strides[1] +                 \
                                      h * y->strides[2] + w * y->strides[3]],                 \
                                   id[n * yi->strides[0] + c * yi->strides[1] +               \
                                      h * yi->strides[2] + w * yi->strides[3]]);              \
    }
RELU_REF(F32)
RELU_REF(F64)

mft_kernel_fn mft__pool_reference(mft__op_id op, mft_dtype dt) {
    if (op == MFT__OP_MAX_POOL2D)
        return dt == MFT_F32 ? max_pool2d_ref_F32 : dt == MFT_F64 ? max_pool2d_ref_F64 : NULL;
    if (op == MFT__OP_RELU_MAX_POOL2D)
        return dt == MFT_F32   ? relu_max_pool2d_ref_F32
               : dt == MFT_F64 ? relu_max_pool2d_ref_F64
                               : NULL;
    if (op == MFT__OP_AVG_POOL2D)
        return dt == MFT_F32 ? avg_pool2d_ref_F32 : dt == MFT_F64 ? avg_pool2d_ref_F64 : NULL;
    return NULL;
}

/* ---------------------------------------------------------------- shared by fast kernels */
typedef struct pool_job {
    const mft_pool2d_params *p;
    const float *x;
    float *y;
    int64_t *yi; /* max only */
    int64_t N, C, H, W, OH, OW;
    bool relu; /* relu_max_pool2d: each finished output row goes through RELU_CLAMP */
} pool_job;

static pool_job pool_job_of(const mft_kernel_args *a, bool is_max) {
    pool_job j;
    const mft_tensor *x = a->inputs[0], *y = a->outputs[0];
    j.p = a->params;
    j.x = (const float *)(const void *)mft__tensor_ptr(x);
    j.y = (float *)(void *)mft__tensor_ptr(y);
    j.yi = is_max ? (int64_t *)(void *)mft__tensor_ptr(a->outputs[1]) : NULL;
    j.N = x->sizes[0];
    j.C = x->sizes[1];
    j.H = x->sizes[2];
    j.W = x->sizes[3];
    j.OH = y->sizes[2];
    j.OW = y->sizes[3];
    j.relu = false;
    return j;
}

/* Rows per parallel chunk for about 32k window elements each. */
static int64_t pool_grain(int64_t work_per_row) {
    int64_t g = 32768 / (work_per_row > 0 ? work_per_row : 1);
    return g > 0 ? g : 1;
}

/* Outputs [lo, hi) of a row whose input column o*s + off lies in [0, W). */
static inline void col_range(int64_t OW, int64_t W, int64_t s, int64_t off, int64_t *lo,
                             int64_t *hi) {
    /* o*s + off >= 0  <=>  o >= ceil(-off / s);  o*s + off <= W-1 */
    int64_t l = off >= 0 ? 0 : (-off + s - 1) / s;
    int64_t h = W - 1 - off < 0 ? 0 : (W - 1 - off) / s + 1;
    *lo = l;
    *hi = h < OW ? h : OW;
    if (*hi < *lo) *hi = *lo;
}

/* ---------------------------------------------------------------- NCHW F32
 * One output row (plane, oh) at a time: for each window row and column the
 * valid outputs of the row form a range, and the update over it is a
 * unit-stride loop over W when the stride is 1 (the compiler vectorises it;
 * the stride is a compile-time 1 there through the inlined helper). */
static inline void nchw_max_row(const float *in, float *out, int64_t *idx, int64_t W, int64_t OW,
                                int64_t kw_n, int64_t s, int64_t pad, int64_t dil, int64_t ih) {
    for (int64_t kw = 0; kw < kw_n; kw++) {
        int64_t off = kw * dil - pad, lo, hi;
        col_range(OW, W, s, off, &lo, &hi);
        const int64_t base = ih * W + off;
        for (int64_t o = lo; o < hi; o++) {
            float v = in[o * s + off];
            bool t = v > out[o] || v != v;
            out[o] = t ? v : out[o];
            idx[o] = t ? base + o * s : idx[o];
        }
    }
}

static inline void nchw_sum_row(const float *in, float *out, int64_t W, int64_t OW, int64_t kw_n,
                                int64_t s, int64_t pad) {
    for (int64_t kw = 0; kw < kw_n; kw++) {
        int64_t off = kw - pad, lo, hi;
        col_range(OW, W, s, off, &lo, &hi);
        for (int64_t o = lo; o < hi; o++) out[o] += in[o * s + off];
    }
}

#if POOL_HAVE_AVX2
/* 8 floats p[0], p[s], ..., p[7s] for s = 1 or 2 (reads p[0 .. 8s)). */
static inline __m256 max_ld8(const float *p, int s) {
    if (s == 1) return _mm256_loadu_ps(p);
    const __m256 e = _mm256_shuffle_ps(_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8), 0x88);
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), 0xD8));
}

/* Outputs [o, o + 8 * nb) (nb = 1 or 2 blocks of 8) of an NCHW max row at
 * W-stride s (1 or 2), dilation 1, every tap inside the row: the
 * candidates in the order of nchw_max_row (ih, then kw) with the same test
 * (v > m or v is NaN), max and position (int32: plane < 2^31) held in
 * registers; two blocks interleave their dependency chains. */
static inline void max_nchw_block8(const float *in, float *out, int64_t *idx, int64_t W,
                                   int64_t kW, int s, int64_t pad, int64_t h0, int64_t h1,
                                   int64_t dH, int64_t o, int nb) {
    const __m256i lane = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                            _mm256_set1_epi32(s));
    const __m256i step = _mm256_set1_epi32(8 * s);
    const int64_t c0 = o * s - pad; /* first tap column of output o */
    __m256 m[2];
    __m256i ix[2];
    for (int b = 0; b < 2; b++) {
        m[b] = _mm256_set1_ps(-INFINITY);
        ix[b] = _mm256_add_epi32(_mm256_set1_epi32((int32_t)(h0 * W + c0 + 8 * s * b)), lane);
    }
    for (int64_t ih = h0; ih < h1; ih += dH)
        for (int64_t kw = 0; kw < kW; kw++) {
            __m256i pos = _mm256_add_epi32(_mm256_set1_epi32((int32_t)(ih * W + c0 + kw)), lane);
            for (int b = 0; b < nb; b++, pos = _mm256_add_epi32(pos, step)) {
                const __m256 v = max_ld8(in + ih * W + c0 + kw + 8 * s * b, s);
                const __m256 t = _mm256_or_ps(_mm256_cmp_ps(v, m[b], _CMP_GT_OQ),
                                              _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
                m[b] = _mm256_blendv_ps(m[b], v, t);
                ix[b] = _mm256_castps_si256(
                    _mm256_blendv_ps(_mm256_castsi256_ps(ix[b]), _mm256_castsi256_ps(pos), t));
            }
        }
    for (int b = 0; b < nb; b++) {
        _mm256_storeu_ps(out + o + 8 * b, m[b]);
        _mm256_storeu_si256((__m256i *)(void *)(idx + o + 8 * b),
                            _mm256_cvtepi32_epi64(_mm256_castsi256_si128(ix[b])));
        _mm256_storeu_si256((__m256i *)(void *)(idx + o + 8 * b + 4),
                            _mm256_cvtepi32_epi64(_mm256_extracti128_si256(ix[b], 1)));
    }
}

/* One output o of an NCHW max row at W-dilation 1, as nchw_max_row orders
 * its candidates (ih, then the valid columns). */
static inline void max_nchw_one(const float *in, float *out, int64_t *idx, int64_t W, int64_t kW,
                                int64_t s, int64_t pad, int64_t h0, int64_t h1, int64_t dH,
                                int64_t o) {
    int64_t w0, w1;
    max_window(o, W, kW, s, pad, 1, &w0, &w1);
    out[o] = -INFINITY;
    idx[o] = h0 * W + w0;
    for (int64_t ih = h0; ih < h1; ih += dH)
        for (int64_t c = w0; c < w1; c++) {
            const float v = in[ih * W + c];
            const bool t = v > out[o] || v != v;
            out[o] = t ? v : out[o];
            idx[o] = t ? ih * W + c : idx[o];
        }
}

/* One NCHW max output row by register blocks where they apply (W-stride 1
 * or 2, W-dilation 1, plane < 2^31): outputs [vlo, vhi) whose 8 * s reads
 * stay inside the row; false when the row is left to the general loops. */
static bool max_nchw_row_blocks(const pool_job *j, const float *in, float *out, int64_t *idx,
                                int64_t h0, int64_t h1) {
    const mft_pool2d_params *p = j->p;
    const int64_t s = p->stride[1], pad = p->padding[1], kW = p->kernel[1], W = j->W;
    if ((s != 1 && s != 2) || p->dilation[1] != 1 || j->H * W > INT32_MAX || h0 >= h1)
        return false;
    /* o*s - pad >= 0, and the last read (o+7)*s + kW - 1 - pad + (s - 1) <= W - 1 */
    const int64_t vlo = (pad + s - 1) / s;
    const int64_t lim = W - kW + pad - (s - 1) - 7 * s; /* o*s <= lim */
    if (lim < 0) return false;
    int64_t vhi = lim / s + 1; /* first o of the last block + 1 */
    if (vhi + 7 > j->OW) vhi = j->OW - 7;
    if (vhi <= vlo) return false;
    for (int64_t o = 0; o < vlo; o++)
        max_nchw_one(in, out, idx, W, kW, s, pad, h0, h1, p->dilation[0], o);
    int64_t o = vlo;
    const int64_t dH = p->dilation[0];
    for (; o + 16 <= vhi + 7; o += 16)
        max_nchw_block8(in, out, idx, W, kW, (int)s, pad, h0, h1, dH, o, 2);
    for (; o + 8 <= vhi + 7; o += 8)
        max_nchw_block8(in, out, idx, W, kW, (int)s, pad, h0, h1, dH, o, 1);
    if (o < vhi + 7) max_nchw_block8(in, out, idx, W, kW, (int)s, pad, h0, h1, dH, vhi - 1, 1);
    for (o = vhi + 7; o < j->OW; o++)
        max_nchw_one(in, out, idx, W, kW, s, pad, h0, h1, p->dilation[0], o);
    return true;
}
#endif

static void max_nchw_range(void *ctx, int64_t begin, int64_t end) {
    const pool_job *j = ctx;
    const mft_pool2d_params *p = j->p;
    const int64_t sW = p->stride[1], pW = p->padding[1], dW = p->dilation[1];
    for (int64_t r = begin; r < end; r++) {
        const int64_t plane = r / j->OH, oh = r % j->OH;
        const float *in = j->x + plane * j->H * j->W;
        float *out = j->y + r * j->OW;
        int64_t *idx = j->yi + r * j->OW;
        int64_t h0, h1;
        max_window(oh, j->H, p->kernel[0], p->stride[0], p->padding[0], p->dilation[0], &h0, &h1);
#if POOL_HAVE_AVX2
        if (max_nchw_row_blocks(j, in, out, idx, h0, h1)) {
            if (j->relu) relu_clamp_f32(out, idx, j->OW);
            continue;
        }
#endif
        for (int64_t ow = 0; ow < j->OW; ow++) {
            int64_t w0, w1;
            max_window(ow, j->W, p->kernel[1], sW, pW, dW, &w0, &w1);
            out[ow] = -INFINITY;
            idx[ow] = h0 * j->W + w0;
        }
        for (int64_t ih = h0; ih < h1; ih += p->dilation[0]) {
            if (sW == 1)
                nchw_max_row(in + ih * j->W, out, idx, j->W, j->OW, p->kernel[1], 1, pW, dW, ih);
            else
                nchw_max_row(in + ih * j->W, out, idx, j->W, j->OW, p->kernel[1], sW, pW, dW, ih);
        }
        if (j->relu) relu_clamp_f32(out, idx, j->OW);
    }
}

/* Window sums of one output row at stride 1: out[o] = sum over ih in [h0,
 * h1), then kw, of the valid in[ih][o - pad + kw], in that order (the order
 * of nchw_sum_row's passes). Outputs [ilo, ihi) have all their taps inside
 * the row: 8 (or 2 x 8) at a time with the sums in registers, the last
 * block overlapping the previous one (same values); the edges one by one. */
static inline float avg_nchw_sum1(const float *in, int64_t W, int64_t kW, int64_t pad,
                                  int64_t h0, int64_t h1, int64_t o) {
    float acc = 0.0f;
    for (int64_t ih = h0; ih < h1; ih++)
        for (int64_t kw = 0; kw < kW; kw++) {
            const int64_t c = o - pad + kw;
            if (c >= 0 && c < W) acc += in[ih * W + c];
        }
    return acc;
}

#if POOL_HAVE_V8
static inline void avg_nchw_block8(const float *in, float *out, int64_t W, int64_t kW,
                                   int64_t pad, int64_t h0, int64_t h1, int64_t o, int nb) {
    pool_v8 a0 = {0, 0, 0, 0, 0, 0, 0, 0}, a1 = a0;
    for (int64_t ih = h0; ih < h1; ih++) {
        const float *r = in + ih * W + o - pad;
        for (int64_t kw = 0; kw < kW; kw++) {
            pool_v8 v0, v1;
            memcpy(&v0, r + kw, sizeof v0);
            a0 += v0;
            if (nb == 2) {
                memcpy(&v1, r + kw + 8, sizeof v1);
                a1 += v1;
            }
        }
    }
    memcpy(out + o, &a0, sizeof a0);
    if (nb == 2) memcpy(out + o + 8, &a1, sizeof a1);
}
#endif

static inline void avg_nchw_sums_s1(const float *in, float *out, int64_t W, int64_t OW,
                                    int64_t kW, int64_t pad, int64_t h0, int64_t h1) {
    int64_t ilo = pad < OW ? pad : OW, ihi = W - kW + 1 + pad;
    if (ihi > OW) ihi = OW;
    if (ihi < ilo) ihi = ilo;
    int64_t o = 0;
#if POOL_HAVE_V8
    if (ihi - ilo >= 8) {
        for (; o < ilo; o++) out[o] = avg_nchw_sum1(in, W, kW, pad, h0, h1, o);
        for (; o + 16 <= ihi; o += 16) avg_nchw_block8(in, out, W, kW, pad, h0, h1, o, 2);
        for (; o + 8 <= ihi; o += 8) avg_nchw_block8(in, out, W, kW, pad, h0, h1, o, 1);
        if (o < ihi) avg_nchw_block8(in, out, W, kW, pad, h0, h1, ihi - 8, 1);
        o = ihi;
    }
#endif
    for (; o < OW; o++) out[o] = avg_nchw_sum1(in, W, kW, pad, h0, h1, o);
}

static void avg_nchw_range(void *ctx, int64_t begin, int64_t end) {
    const pool_job *j = ctx;
    const mft_pool2d_params *p = j->p;
    const int64_t sW = p->stride[1], pW = p->padding[1];
    /* W-dim windows tabled (count, padded extent) when OW <= POOL_TAB */
    int64_t wcnt[POOL_TAB], wpad[POOL_TAB], last_hc = -1, last_ph = -1;
    float fdiv[POOL_TAB];
    const bool tab = j->OW <= POOL_TAB;
    for (int64_t ow = 0; tab && ow < j->OW; ow++) {
        int64_t w0, w1;
        avg_window(ow, j->W, p->kernel[1], sW, pW, &w0, &w1, &wpad[ow]);
        wcnt[ow] = w1 - w0 > 0 ? w1 - w0 : 0;
    }
    for (int64_t r = begin; r < end; r++) {
        const int64_t plane = r / j->OH, oh = r % j->OH;
        const float *in = j->x + plane * j->H * j->W;
        float *out = j->y + r * j->OW;
        int64_t h0, h1, ph;
        avg_window(oh, j->H, p->kernel[0], p->stride[0], p->padding[0], &h0, &h1, &ph);
        if (sW == 1) {
            avg_nchw_sums_s1(in, out, j->W, j->OW, p->kernel[1], pW, h0, h1);
        } else {
            for (int64_t ow = 0; ow < j->OW; ow++) out[ow] = 0.0f;
            for (int64_t ih = h0; ih < h1; ih++)
                nchw_sum_row(in + ih * j->W, out, j->W, j->OW, p->kernel[1], sW, pW);
        }
        if (tab) {
            /* divisors of the row as floats, recomputed when the H-dim
             * window changes; an empty window's sum is 0 and gets 1 (0 / 1
             * = 0, as below): one vectorisable pass of divisions */
            if (h1 - h0 != last_hc || ph != last_ph) {
                last_hc = h1 - h0;
                last_ph = ph;
                for (int64_t ow = 0; ow < j->OW; ow++) {
                    const int64_t div = avg_divisor(p, h0, h1, ph, 0, wcnt[ow], wpad[ow]);
                    fdiv[ow] = div ? (float)div : 1.0f;
                }
            }
            for (int64_t ow = 0; ow < j->OW; ow++) out[ow] /= fdiv[ow];
            continue;
        }
        for (int64_t ow = 0; ow < j->OW; ow++) {
            int64_t w0, w1, pw;
            avg_window(ow, j->W, p->kernel[1], sW, pW, &w0, &w1, &pw);
            int64_t div = avg_divisor(p, h0, h1, ph, w0, w1, pw);
            out[ow] = div ? out[ow] / (float)div : 0.0f;
        }
    }
}

static void max_nchw_run(const mft_kernel_args *a, bool relu) {
    pool_job j = pool_job_of(a, true);
    j.relu = relu;
    const int64_t work = j.OW * j.p->kernel[0] * j.p->kernel[1];
    mft__parallel_for(0, j.N * j.C * j.OH, pool_grain(work), max_nchw_range, &j);
}
static void max_pool2d_nchw_f32(const mft_kernel_args *a) { max_nchw_run(a, false); }
static void relu_max_pool2d_nchw_f32(const mft_kernel_args *a) { max_nchw_run(a, true); }

static void avg_pool2d_nchw_f32(const mft_kernel_args *a) {
    pool_job j = pool_job_of(a, false);
    const int64_t work = j.OW * j.p->kernel[0] * j.p->kernel[1];
    mft__parallel_for(0, j.N * j.C * j.OH, pool_grain(work), avg_nchw_range, &j);
}

/* ---------------------------------------------------------------- NHWC F32
 * Per output pixel (n, oh, ow): the window's input pixels are contiguous
 * C-rows; max/add over a C-row is a unit-stride loop (vectorised). */

/* The input rows [*ra, *rb) (step dh) the next output row's window adds to
 * the current one's [h0, h1): read from DRAM while this row is pooled, they
 * are prefetched pixel by pixel (pool_prefetch). Empty after the last row
 * of an image. */
static inline void pool_next_rows(int64_t oh, int64_t OH, int64_t h1, int64_t nh0, int64_t nh1,
                                  int64_t dh, int64_t *ra, int64_t *rb) {
    *ra = *rb = 0;
    if (oh + 1 >= OH) return;
    int64_t a = nh0;
    while (a < h1) a += dh;
    *ra = a;
    *rb = nh1 > a ? nh1 : a;
}

/* Prefetch input pixels (rows [ra, rb) step dh, columns [c0, c1)), C floats
 * each. */
static inline void pool_prefetch(const float *in, int64_t W, int64_t C, int64_t ra, int64_t rb,
                                 int64_t dh, int64_t c0, int64_t c1) {
    for (int64_t ih = ra; ih < rb; ih += dh)
        for (int64_t iw = c0; iw < c1; iw++) {
            const char *q = (const char *)(in + (ih * W + iw) * C);
            for (int64_t b = 0; b < C * (int64_t)sizeof(float); b += 64) __builtin_prefetch(q + b);
        }
}

static void max_nhwc_range(void *ctx, int64_t begin, int64_t end) {
    const pool_job *j = ctx;
    const mft_pool2d_params *p = j->p;
    const int64_t C = j->C;
    /* every position, and the start of an empty window, fits int32 */
    const bool pos32 =
        (double)(j->H + p->dilation[0] + 1) * (double)(j->W + p->dilation[1] + 1) <=
        (double)INT32_MAX;
    (void)pos32;
    for (int64_t r = begin; r < end; r++) {
        const int64_t n = r / j->OH, oh = r % j->OH;
        const float *in = j->x + n * j->H * j->W * C;
        int64_t h0, h1, nh0, nh1, ra, rb;
        max_window(oh, j->H, p->kernel[0], p->stride[0], p->padding[0], p->dilation[0], &h0, &h1);
        max_window(oh + 1, j->H, p->kernel[0], p->stride[0], p->padding[0], p->dilation[0], &nh0,
                   &nh1);
        pool_next_rows(oh, j->OH, h1, nh0, nh1, p->dilation[0], &ra, &rb);
        int64_t pw1 = 0; /* the previous window's column end */
        for (int64_t ow = 0; ow < j->OW; ow++) {
            float *out = j->y + (r * j->OW + ow) * C;
            int64_t *idx = j->yi + (r * j->OW + ow) * C;
            int64_t w0, w1;
            max_window(ow, j->W, p->kernel[1], p->stride[1], p->padding[1], p->dilation[1], &w0,
                       &w1);
            pool_prefetch(in, j->W, C, ra, rb, p->dilation[0], w0 > pw1 ? w0 : pw1, w1);
            pw1 = w1;
            const int64_t first = h0 * j->W + w0;
#if POOL_HAVE_Z16
            if (pos32) {
                const pz_win g = {h0, h1, p->dilation[0], w0, w1, p->dilation[1], j->W, C};
                pz_max_pixel(in, &g, (int32_t)first, out, idx);
                continue;
            }
#endif
#if POOL_HAVE_V8
            /* blocks of 32 channels in registers; positions as int32 lanes
             * blended with the float compare masks (plane < 2^31) */
            int64_t cdone = 0;
            if (pos32) {
                for (; cdone + 32 <= C; cdone += 32) {
                    pool_v8 m[4];
                    pool_i8 ix[4];
                    for (int k = 0; k < 4; k++) {
                        m[k] = (pool_v8){0, 0, 0, 0, 0, 0, 0, 0} - INFINITY;
                        ix[k] = (pool_i8){0, 0, 0, 0, 0, 0, 0, 0} + (int32_t)first;
                    }
                    for (int64_t ih = h0; ih < h1; ih += p->dilation[0])
                        for (int64_t iw = w0; iw < w1; iw += p->dilation[1]) {
                            const float *row = in + (ih * j->W + iw) * C + cdone;
                            const pool_i8 pv = (pool_i8){0, 0, 0, 0, 0, 0, 0, 0} +
                                               (int32_t)(ih * j->W + iw);
                            for (int k = 0; k < 4; k++) {
                                pool_v8 v;
                                memcpy(&v, row + 8 * k, sizeof v);
                                const pool_i8 t = (v > m[k]) | (v != v);
                                m[k] = (pool_v8)(((pool_i8)v & t) | ((pool_i8)m[k] & ~t));
                                ix[k] = (pv & t) | (ix[k] & ~t);
                            }
                        }
                    for (int k = 0; k < 4; k++) {
                        memcpy(out + cdone + 8 * k, &m[k], sizeof m[k]);
                        for (int l = 0; l < 8; l++) idx[cdone + 8 * k + l] = ix[k][l];
                    }
                }
            }
            if (cdone == C) continue; /* (the row's relu clamp follows the ow loop) */
            out += cdone; /* the remaining channels, one at a time */
            idx += cdone;
            const int64_t Cr = C - cdone;
#else
            const int64_t Cr = C;
#endif
            for (int64_t c = 0; c < Cr; c++) {
                out[c] = -INFINITY;
                idx[c] = first;
            }
            for (int64_t ih = h0; ih < h1; ih += p->dilation[0])
                for (int64_t iw = w0; iw < w1; iw += p->dilation[1]) {
                    const float *row = in + (ih * j->W + iw) * C + (C - Cr);
                    const int64_t pos = ih * j->W + iw;
                    for (int64_t c = 0; c < Cr; c++) {
                        float v = row[c];
                        bool t = v > out[c] || v != v;
                        out[c] = t ? v : out[c];
                        idx[c] = t ? pos : idx[c];
                    }
                }
        }
        if (j->relu) relu_clamp_f32(j->y + r * j->OW * C, j->yi + r * j->OW * C, j->OW * C);
    }
}

#if POOL_HAVE_Z16
/* Widest input row the separable NHWC average handles (its column sums of
 * one 64-channel block, on the stack). */
#define POOL_CS_W 256

/* The separable NHWC average of output row (n, oh) (rows [h0, h1), padded
 * extent ph): per block of 64 channels, the column sums over the window rows
 * once per input column, then each output sums its columns' sums: 3 + 3
 * loads per output vector for a 3x3 / stride 1 window instead of 9. The
 * sums are grouped by columns, not in the reference's row order, so the
 * results may differ from it in the last bit (exact where the sums are). */
static void avg_nhwc_row_separable(const pool_job *j, int64_t r, const float *in, int64_t h0,
                                   int64_t h1, int64_t ph, int64_t ra, int64_t rb) {
    const mft_pool2d_params *p = j->p;
    const int64_t C = j->C, W = j->W;
    float cs[POOL_CS_W * 64];
    /* the row's columns: [wa, wb) */
    int64_t wa, wb, pw, t0, t1;
    avg_window(0, W, p->kernel[1], p->stride[1], p->padding[1], &wa, &t1, &pw);
    avg_window(j->OW - 1, W, p->kernel[1], p->stride[1], p->padding[1], &t0, &wb, &pw);
    if (wb < wa) wb = wa;
    pool_prefetch(in, W, C, ra, rb, 1, wa, wb);
    for (int64_t c = 0; c < C; c += 64) {
        const int64_t rem = C - c;
        const int nv = rem >= 64 ? 4 : (int)((rem + 15) / 16);
        const __mmask16 km = pz_tail_mask(rem >= 64 ? 64 : rem, nv);
        switch (nv) {
        case 1: pz_colsums(in + c, W, C, h0, h1, wa, wb, cs, 1, km); break;
        case 2: pz_colsums(in + c, W, C, h0, h1, wa, wb, cs, 2, km); break;
        case 3: pz_colsums(in + c, W, C, h0, h1, wa, wb, cs, 3, km); break;
        default: pz_colsums(in + c, W, C, h0, h1, wa, wb, cs, 4, km); break;
        }
        for (int64_t ow = 0; ow < j->OW; ow++) {
            int64_t w0, w1;
            avg_window(ow, W, p->kernel[1], p->stride[1], p->padding[1], &w0, &w1, &pw);
            const int64_t div = avg_divisor(p, h0, h1, ph, w0, w1, pw);
            const int64_t nw = w1 > w0 ? w1 - w0 : 0;
            const float *cw = cs + (w0 - wa) * 64;
            float *out = j->y + (r * j->OW + ow) * C + c;
            switch (nv) {
            case 1: pz_avg_cols(cw, nw, div, out, 1, km); break;
            case 2: pz_avg_cols(cw, nw, div, out, 2, km); break;
            case 3: pz_avg_cols(cw, nw, div, out, 3, km); break;
            default: pz_avg_cols(cw, nw, div, out, 4, km); break;
            }
        }
    }
}
#endif

static void avg_nhwc_range(void *ctx, int64_t begin, int64_t end) {
    const pool_job *j = ctx;
    const mft_pool2d_params *p = j->p;
    const int64_t C = j->C;
    for (int64_t r = begin; r < end; r++) {
        const int64_t n = r / j->OH, oh = r % j->OH;
        const float *in = j->x + n * j->H * j->W * C;
        int64_t h0, h1, ph, nh0, nh1, ra, rb;
        avg_window(oh, j->H, p->kernel[0], p->stride[0], p->padding[0], &h0, &h1, &ph);
        avg_window(oh + 1, j->H, p->kernel[0], p->stride[0], p->padding[0], &nh0, &nh1, &ra);
        pool_next_rows(oh, j->OH, h1, nh0, nh1, 1, &ra, &rb);
#if POOL_HAVE_Z16
        /* windows that overlap along W with more than one row: separable */
        if (j->W <= POOL_CS_W && p->kernel[0] > 1 && p->stride[1] < p->kernel[1]) {
            avg_nhwc_row_separable(j, r, in, h0, h1, ph, ra, rb);
            continue;
        }
#endif
        int64_t pw1 = 0; /* the previous window's column end */
        for (int64_t ow = 0; ow < j->OW; ow++) {
            float *out = j->y + (r * j->OW + ow) * C;
            int64_t w0, w1, pw;
            avg_window(ow, j->W, p->kernel[1], p->stride[1], p->padding[1], &w0, &w1, &pw);
            pool_prefetch(in, j->W, C, ra, rb, 1, w0 > pw1 ? w0 : pw1, w1);
            pw1 = w1;
            const int64_t div = avg_divisor(p, h0, h1, ph, w0, w1, pw);
#if POOL_HAVE_Z16
            {
                const pz_win g = {h0, h1, 1, w0, w1, 1, j->W, C};
                pz_avg_pixel(in, &g, div, out);
                continue;
            }
#endif
            const float fd = div ? (float)div : 1.0f;
            /* blocks of POOL_VB channels summed in registers */
            for (int64_t c0 = 0; c0 < C; c0 += POOL_VB) {
                const int64_t nc = C - c0 < POOL_VB ? C - c0 : POOL_VB;
                float acc[POOL_VB];
#if POOL_HAVE_V8
                if (nc == POOL_VB) {
                    pool_v8 va[POOL_VB / 8];
                    for (int k = 0; k < POOL_VB / 8; k++) va[k] = (pool_v8){0, 0, 0, 0, 0, 0, 0, 0};
                    for (int64_t ih = h0; ih < h1; ih++)
                        for (int64_t iw = w0; iw < w1; iw++) {
                            const float *row = in + (ih * j->W + iw) * C + c0;
                            for (int k = 0; k < POOL_VB / 8; k++) {
                                pool_v8 v;
                                memcpy(&v, row + 8 * k, sizeof v);
                                va[k] += v;
                            }
                        }
                    memcpy(acc, va, sizeof va);
                } else
#endif
                {
                    for (int c = 0; c < POOL_VB; c++) acc[c] = 0.0f;
                    for (int64_t ih = h0; ih < h1; ih++)
                        for (int64_t iw = w0; iw < w1; iw++) {
                            const float *row = in + (ih * j->W + iw) * C + c0;
                            for (int64_t c = 0; c < nc; c++) acc[c] += row[c];
                        }
                }
                for (int64_t c = 0; c < nc; c++) out[c0 + c] = div ? acc[c] / fd : 0.0f;
            }
        }
    }
}

static void max_nhwc_run(const mft_kernel_args *a, bool relu) {
    pool_job j = pool_job_of(a, true);
    j.relu = relu;
    const int64_t work = j.OW * j.C * j.p->kernel[0] * j.p->kernel[1];
    mft__parallel_for(0, j.N * j.OH, pool_grain(work), max_nhwc_range, &j);
}
static void max_pool2d_nhwc_f32(const mft_kernel_args *a) { max_nhwc_run(a, false); }
static void relu_max_pool2d_nhwc_f32(const mft_kernel_args *a) { max_nhwc_run(a, true); }

static void avg_pool2d_nhwc_f32(const mft_kernel_args *a) {
    pool_job j = pool_job_of(a, false);
    const int64_t work = j.OW * j.C * j.p->kernel[0] * j.p->kernel[1];
    mft__parallel_for(0, j.N * j.OH, pool_grain(work), avg_nhwc_range, &j);
}

/* ---------------------------------------------------------------- kernel table
 * One entry per (op, format, dtype). The F32 reference kernels are not in the
 * table (the fast NCHW kernel holds the CONTIGUOUS F32 key); the tests reach
 * them through mft__pool_reference. */
const mft__kernel_def mft__kernels_pool[] = {
    {MFT__OP_MAX_POOL2D, MFT_CONTIGUOUS, MFT_F32, "max_pool2d.nchw.f32", max_pool2d_nchw_f32},
    {MFT__OP_MAX_POOL2D, MFT_CHANNELS_LAST, MFT_F32, "max_pool2d.nhwc.f32", max_pool2d_nhwc_f32},
    {MFT__OP_MAX_POOL2D, MFT_CONTIGUOUS, MFT_F64, "max_pool2d.nchw.f64.ref", max_pool2d_ref_F64},
    {MFT__OP_RELU_MAX_POOL2D, MFT_CONTIGUOUS, MFT_F32, "relu_max_pool2d.nchw.f32",
     relu_max_pool2d_nchw_f32},
    {MFT__OP_RELU_MAX_POOL2D, MFT_CHANNELS_LAST, MFT_F32, "relu_max_pool2d.nhwc.f32",
     relu_max_pool2d_nhwc_f32},
    {MFT__OP_RELU_MAX_POOL2D, MFT_CONTIGUOUS, MFT_F64, "relu_max_pool2d.nchw.f64.ref",
     relu_max_pool2d_ref_F64},
    {MFT__OP_AVG_POOL2D, MFT_CONTIGUOUS, MFT_F32, "avg_pool2d.nchw.f32", avg_pool2d_nchw_f32},
    {MFT__OP_AVG_POOL2D, MFT_CHANNELS_LAST, MFT_F32, "avg_pool2d.nhwc.f32", avg_pool2d_nhwc_f32},
    {MFT__OP_AVG_POOL2D, MFT_CONTIGUOUS, MFT_F64, "avg_pool2d.nchw.f64.ref", avg_pool2d_ref_F64},
    {0, 0, 0, NULL, NULL},
};
