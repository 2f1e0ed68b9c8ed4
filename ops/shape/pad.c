/* ops/shape/pad.c — padding (dispatched op "pad") and the layout ops cat, stack and
 * split (not dispatched: built on copies and views) (mft/cnn.h).
 *
 * The file reads top to bottom: pad's checks and entry point, the reference
 * kernels (which define the semantics), the fast packed kernel, the kernel
 * table, pad's backward, then cat / stack, their backward, and split.
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
 *     PyTorch's index arithmetic, negative pads included.)
 * The result is packed in x's tag for rank 3-5, else CONTIGUOUS (SPEC §4).
 *
 * Autograd (DESIGN §8): mft_pad, mft_cat, mft_stack and mft_split record one
 * node each (the "autograd" section at the end). pad saves x (sizes, dtype,
 * tag) and calls mft_pad_backward. cat / stack save nothing, so a constant
 * input may still be changed in place before backward: each input's
 * gradient is the narrow (cat) / select (stack) of grad_out copied into a
 * tensor of that input's sizes and dtype packed in its format (what
 * mft_cat_backward computes, from the node's input records). split is one
 * node with one output per chunk; x's gradient is the chunks' gradients
 * (zeros for chunks nobody used, from the engine) copied into one tensor in
 * x's format. Every gradient is made in its input's format: the engine
 * converts nothing. */
#include <stdio.h>
#include <string.h>
#include "autograd_internal.h"
#include "ops_internal.h"

/* Note [Kernel tables]: the built-in kernels this family dispatches to. */
static const mft__kernel_def *const g_tables[] = {mft__kernels_pad, NULL};

/* The reference kernels, for tests (declared here, ops_internal.h is shared). */
mft_kernel_fn mft__pad_reference(mft_dtype dt);

/* Largest |pad| accepted: keeps size + before + after far from overflow. */
#define PAD_MAX ((int64_t)1 << 40)

static const char *pad_mode_name(mft_pad_mode m) {
    return m == MFT_PAD_CONSTANT ? "constant" : m == MFT_PAD_REFLECT ? "reflect" : "replicate";
}

/* Source position of output index o along a dim (see the header); -1 for
 * constant padding. */
static inline int64_t pad_src(int64_t o, int64_t before, int64_t size, mft_pad_mode mode) {
    int64_t p = o - before;
    if (p >= 0 && p < size) return p;
    if (mode == MFT_PAD_CONSTANT) return -1;
    if (mode == MFT_PAD_REPLICATE) return p < 0 ? 0 : size - 1;
    return p < 0 ? -p : 2 * (size - 1) - p; /* reflect: |pad| < size keeps this in range */
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

/* ---------------------------------------------------------------- reference kernels
 * Element by element with the real strides of both tensors (any layout). */
#define REF_KERNEL(D)                                                                        \
    static void pad_ref_##D(const mft_kernel_args *a) {                                      \
        typedef MFT__T_##D T;                                                                \
        const mft_pad_params *p = a->params;                                                 \
        const mft_tensor *x = a->inputs[0], *y = a->outputs[0];                              \
        const T *xd = (const T *)(const void *)mft__tensor_ptr(x);                           \
        T *yd = (T *)(void *)mft__tensor_ptr(y);                                             \
        const int nd = y->ndim;                                                              \
        const T fill = MFT__PARAM_##D(p->value);                                             \
        if (y->numel == 0) return;                                                           \
        int64_t idx[MFT_MAX_DIMS] = {0};                                                     \
        for (;;) {                                                                           \
            int64_t xo = 0, yo = 0;                                                          \
            bool inside = true;                                                              \
            for (int d = 0; d < nd; d++) {                                                   \
                int64_t s = pad_src(idx[d], p->before[d], x->sizes[d], p->mode);             \
                if (s < 0) inside = false;                                                   \
                else xo += s * x->strides[d];                                                \
                yo += idx[d] * y->strides[d];                                                \
            }                                                                                \
            yd[yo] = inside ? xd[xo] : fill;                                                 \
            int d = nd - 1;                                                                  \
            for (; d >= 0; d--) {                                                            \
                if (++idx[d] < y->sizes[d]) break;                                           \
                idx[d] = 0;                                                                  \
            }                                                                                \
            if (d < 0) break;                                                                \
        }                                                                                    \
    }
REF_KERNEL(F32)
REF_KERNEL(F64)
#undef REF_KERNEL

mft_kernel_fn mft__pad_reference(mft_dtype dt) {
    return dt == MFT_F32 ? pad_ref_F32 : dt == MFT_F64 ? pad_ref_F64 : NULL;
}

/* ---------------------------------------------------------------- packed kernel
 * Input and output are packed in the kernel's format (the dispatcher converts
 * the input). Dims are walked in physical order (slowest first); the last
 * physical dim is unit-stride in both, so each output row is: a source row
 * found by mapping the outer indices (or a row of `value` when an outer index
 * falls into constant padding), whose interior is one memcpy and whose border
 * elements are the fill value or single copies. In NHWC the innermost dim is
 * C (rarely padded), so a whole C-row of a pixel copies in one memcpy.
 * Outer strides are the tensors' own (size-1 dims may carry any stride);
 * byte-generic, so one function serves every dtype. */
typedef struct pad_job {
    const mft_pad_params *p;
    const char *x;
    char *y;
    size_t es;
    int nouter;                   /* physical dims before the innermost */
    int64_t osz[MFT_MAX_DIMS];    /* output sizes, physical order */
    int64_t isz[MFT_MAX_DIMS];    /* input sizes, physical order */
    int64_t bef[MFT_MAX_DIMS];    /* before pads, physical order */
    int64_t xs[MFT_MAX_DIMS];     /* input strides (elements), physical order */
    int64_t ys[MFT_MAX_DIMS];     /* output strides (elements), physical order */
    unsigned char fill[8];        /* the fill value in the dtype */
} pad_job;

static inline void fill_elems(char *dst, const unsigned char *fill, size_t es, int64_t n) {
    if (n <= 0) return;
    memcpy(dst, fill, es);
    int64_t done = 1;
    while (done < n) { /* doubling copies */
        int64_t c = done < n - done ? done : n - done;
        memcpy(dst + (size_t)done * es, dst, (size_t)c * es);
        done += c;
    }
}

static void pad_rows(void *ctx, int64_t begin, int64_t end) {
    const pad_job *j = ctx;
    const int L = j->nouter;
    const size_t es = j->es;
    const int64_t ow = j->osz[L], iw = j->isz[L], bw = j->bef[L];
    const mft_pad_mode mode = j->p->mode;
    /* interior: output columns [lo, hi) map to input columns [lo-bw, hi-bw) */
    int64_t lo = bw > 0 ? bw : 0, hi = bw + iw < ow ? bw + iw : ow;
    if (lo > ow) lo = ow;
    if (hi < lo) hi = lo;
    for (int64_t r = begin; r < end; r++) {
        int64_t rem = r, xo = 0, yo = 0;
        bool inside = true;
        for (int d = L - 1; d >= 0; d--) {
            int64_t o = rem % j->osz[d];
            rem /= j->osz[d];
            yo += o * j->ys[d];
            int64_t s = pad_src(o, j->bef[d], j->isz[d], mode);
            if (s < 0) inside = false;
            else xo += s * j->xs[d];
        }
        char *yrow = j->y + (size_t)yo * es;
        if (!inside) {
            fill_elems(yrow, j->fill, es, ow);
            continue;
        }
        const char *xrow = j->x + (size_t)xo * es;
        if (hi > lo) memcpy(yrow + (size_t)lo * es, xrow + (size_t)(lo - bw) * es, (size_t)(hi - lo) * es);
        if (mode == MFT_PAD_CONSTANT) {
            fill_elems(yrow, j->fill, es, lo);
            fill_elems(yrow + (size_t)hi * es, j->fill, es, ow - hi);
        } else {
            for (int64_t o = 0; o < lo; o++)
                memcpy(yrow + (size_t)o * es, xrow + (size_t)pad_src(o, bw, iw, mode) * es, es);
            for (int64_t o = hi; o < ow; o++)
                memcpy(yrow + (size_t)o * es, xrow + (size_t)pad_src(o, bw, iw, mode) * es, es);
        }
    }
}

static void pad_packed(const mft_kernel_args *a, mft_format fmt) {
    const mft_tensor *x = a->inputs[0], *y = a->outputs[0];
    if (y->numel == 0) return;
    pad_job j;
    memset(&j, 0, sizeof j);
    j.p = a->params;
    j.x = mft__tensor_ptr(x);
    j.y = mft__tensor_ptr(y);
    j.es = mft__elem_size(y->dtype);
    mft__store(y->dtype, j.fill, j.p->value);
    const int nd = y->ndim;
    if (nd == 0) {
        memcpy(j.y, j.x, j.es);
        return;
    }
    int order[MFT_MAX_DIMS];
    mft__format_order(nd, fmt, order);
    for (int i = 0; i < nd; i++) {
        int d = order[i];
        j.osz[i] = y->sizes[d];
        j.isz[i] = x->sizes[d];
        j.bef[i] = j.p->before[d];
        j.xs[i] = x->strides[d];
        j.ys[i] = y->strides[d];
    }
    j.nouter = nd - 1;
    const int64_t rows = y->numel / j.osz[nd - 1];
    int64_t grain = 32768 / (j.osz[nd - 1] > 0 ? j.osz[nd - 1] : 1);
    mft__parallel_for(0, rows, grain > 0 ? grain : 1, pad_rows, &j);
}

static void pad_nchw(const mft_kernel_args *a) { pad_packed(a, MFT_CONTIGUOUS); }
static void pad_nhwc(const mft_kernel_args *a) { pad_packed(a, MFT_CHANNELS_LAST); }

/* ---------------------------------------------------------------- backward
 * grad_x[i] = sum of grad_out[o] over every output index o that read input
 * index i (per dim: the interior o = i + before, plus for reflect the two
 * mirrors, for replicate every clamped o at the two edges). The reference
 * scatters grad_out in row-major order into a zeroed grad_x; the packed
 * kernels gather instead (one output row of grad_x per work item, so any
 * thread partition gives the same sums) and add each element's
 * contributions in the same lexicographic order of o, so for NCHW (and NHWC
 * when C is not padded) they match the reference bit for bit. */
mft_kernel_fn mft__pad_backward_reference(mft_dtype dt);

/* The output indices along one dim that read input index i, as up to three
 * ascending disjoint ranges [lo[k], hi[k]); returns their count. */
static int pad_bw_ranges(int64_t i, int64_t before, int64_t size, int64_t osz, mft_pad_mode mode,
                         int64_t *lo, int64_t *hi) {
    int n = 0;
    int64_t l[3], h[3], c = 0;
    if (mode == MFT_PAD_REPLICATE) {
        l[c] = i == 0 ? 0 : i + before;
        h[c++] = i == size - 1 ? osz : i + before + 1;
    } else {
        if (mode == MFT_PAD_REFLECT && i >= 1) l[c] = before - i, h[c] = l[c] + 1, c++;
        l[c] = i + before, h[c] = l[c] + 1, c++;
        if (mode == MFT_PAD_REFLECT && i <= size - 2)
            l[c] = before + 2 * (size - 1) - i, h[c] = l[c] + 1, c++;
    }
    for (int64_t k = 0; k < c; k++) {
        int64_t a = l[k] < 0 ? 0 : l[k], b = h[k] > osz ? osz : h[k];
        if (a < b) lo[n] = a, hi[n] = b, n++;
    }
    return n;
}

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

/* Reference: inputs[0] grad_out (padded sizes), outputs[0] grad_x (x's
 * sizes), any strides; zero grad_x, then scatter-add every grad_out element
 * in row-major order. */
#define REF_BW_KERNEL(D)                                                                     \
    static void pad_bw_ref_##D(const mft_kernel_args *a) {                                   \
        typedef MFT__T_##D T;                                                                \
        const mft_pad_params *p = a->params;                                                 \
        const mft_tensor *g = a->inputs[0], *x = a->outputs[0];                              \
        const T *gd = (const T *)(const void *)mft__tensor_ptr(g);                           \
        T *xd = (T *)(void *)mft__tensor_ptr(x);                                             \
        const int nd = x->ndim;                                                              \
        mft__fill(a->outputs[0], 0.0);                                                       \
        if (g->numel == 0) return;                                                           \
        int64_t idx[MFT_MAX_DIMS] = {0};                                                     \
        for (;;) {                                                                           \
            int64_t xo = 0, go = 0;                                                          \
            bool inside = true;                                                              \
            for (int d = 0; d < nd; d++) {                                                   \
                int64_t s = pad_src(idx[d], p->before[d], x->sizes[d], p->mode);             \
                if (s < 0) inside = false;                                                   \
                else xo += s * x->strides[d];                                                \
                go += idx[d] * g->strides[d];                                                \
            }                                                                                \
            if (inside) xd[xo] += gd[go];                                                    \
            int d = nd - 1;                                                                  \
            for (; d >= 0; d--) {                                                            \
                if (++idx[d] < g->sizes[d]) break;                                           \
                idx[d] = 0;                                                                  \
            }                                                                                \
            if (d < 0) break;                                                                \
        }                                                                                    \
    }
REF_BW_KERNEL(F32)
REF_BW_KERNEL(F64)
#undef REF_BW_KERNEL

mft_kernel_fn mft__pad_backward_reference(mft_dtype dt) {
    return dt == MFT_F32 ? pad_bw_ref_F32 : dt == MFT_F64 ? pad_bw_ref_F64 : NULL;
}

/* Packed kernels: grad_out (padded sizes) and grad_x (x's sizes) packed in
 * the kernel's format, dims walked in physical order. One work item = one
 * grad_x row along the innermost physical dim (W in NCHW, C in NHWC): it is
 * zeroed, then for each contributing grad_out row (the product of the outer
 * dims' ranges, ascending) the row's contributions are added: the span
 * [ilo, ihi) whose only source is o = i + before as one vector loop, the
 * other elements through pad_bw_ranges. */
typedef struct pad_bw_job {
    const mft_pad_params *p;
    const char *g;
    char *x;
    int nouter;
    int64_t osz[MFT_MAX_DIMS], isz[MFT_MAX_DIMS], bef[MFT_MAX_DIMS];
    int64_t gs[MFT_MAX_DIMS], xs[MFT_MAX_DIMS]; /* strides, physical order */
    int64_t ilo, ihi;                           /* single-source span of the inner dim */
} pad_bw_job;

#define PAD_BW_ROWS(D)                                                                       \
    static void pad_bw_rows_##D(void *ctx, int64_t begin, int64_t end) {                     \
        typedef MFT__T_##D T;                                                                \
        const pad_bw_job *j = ctx;                                                           \
        const int L = j->nouter;                                                             \
        const mft_pad_mode mode = j->p->mode;                                                \
        const int64_t iw = j->isz[L], ow = j->osz[L], bw = j->bef[L];                        \
        const int64_t ilo = j->ilo, ihi = j->ihi;                                            \
        for (int64_t r = begin; r < end; r++) {                                              \
            int64_t rem = r, xo = 0;                                                         \
            int64_t lo[MFT_MAX_DIMS][3], hi[MFT_MAX_DIMS][3];                                \
            int nr[MFT_MAX_DIMS], ri[MFT_MAX_DIMS];                                          \
            int64_t o[MFT_MAX_DIMS];                                                         \
            bool empty = false;                                                              \
            for (int d = L - 1; d >= 0; d--) {                                               \
                const int64_t i = rem % j->isz[d];                                           \
                rem /= j->isz[d];                                                            \
                xo += i * j->xs[d];                                                          \
                nr[d] = pad_bw_ranges(i, j->bef[d], j->isz[d], j->osz[d], mode, lo[d], hi[d]); \
                if (nr[d] == 0) empty = true;                                                \
                ri[d] = 0;                                                                   \
                o[d] = nr[d] ? lo[d][0] : 0;                                                 \
            }                                                                                \
            T *xr = (T *)(void *)j->x + xo;                                                  \
            for (int64_t i = 0; i < iw; i++) xr[i] = 0;                                      \
            if (empty) continue;                                                             \
            for (;;) {                                                                       \
                int64_t go = 0;                                                              \
                for (int d = 0; d < L; d++) go += o[d] * j->gs[d];                           \
                const T *gr = (const T *)(const void *)j->g + go;                            \
                for (int64_t i = 0; i < ilo; i++) {                                          \
                    int64_t l3[3], h3[3];                                                    \
                    const int n3 = pad_bw_ranges(i, bw, iw, ow, mode, l3, h3);               \
                    for (int k = 0; k < n3; k++)                                             \
                        for (int64_t q = l3[k]; q < h3[k]; q++) xr[i] += gr[q];              \
                }                                                                            \
                for (int64_t i = ilo; i < ihi; i++) xr[i] += gr[i + bw];                     \
                for (int64_t i = ihi; i < iw; i++) {                                         \
                    int64_t l3[3], h3[3];                                                    \
                    const int n3 = pad_bw_ranges(i, bw, iw, ow, mode, l3, h3);               \
                    for (int k = 0; k < n3; k++)                                             \
                        for (int64_t q = l3[k]; q < h3[k]; q++) xr[i] += gr[q];              \
                }                                                                            \
                /* next output row: odometer over the ranges of the outer dims */           \
                int d = L - 1;                                                               \
                for (; d >= 0; d--) {                                                        \
                    if (++o[d] < hi[d][ri[d]]) break;                                        \
                    if (++ri[d] < nr[d]) {                                                   \
                        o[d] = lo[d][ri[d]];                                                 \
                        break;                                                               \
                    }                                                                        \
                    ri[d] = 0;                                                               \
                    o[d] = lo[d][0];                                                         \
                }                                                                            \
                if (d < 0) break;                                                            \
            }                                                                                \
        }                                                                                    \
    }
PAD_BW_ROWS(F32)
PAD_BW_ROWS(F64)
#undef PAD_BW_ROWS

static bool pad_bw_single(int64_t i, int64_t bw, int64_t iw, int64_t ow, mft_pad_mode mode) {
    int64_t l[3], h[3];
    return pad_bw_ranges(i, bw, iw, ow, mode, l, h) == 1 && h[0] - l[0] == 1 && l[0] == i + bw;
}

static void pad_bw_packed(const mft_kernel_args *a, mft_format fmt) {
    const mft_tensor *g = a->inputs[0], *x = a->outputs[0];
    if (x->numel == 0) return;
    pad_bw_job j;
    memset(&j, 0, sizeof j);
    j.p = a->params;
    j.g = mft__tensor_ptr(g);
    j.x = mft__tensor_ptr(x);
    const int nd = x->ndim;
    if (nd == 0) {
        mft__copy_kernel(a->outputs[0], g);
        return;
    }
    int order[MFT_MAX_DIMS];
    mft__format_order(nd, fmt, order);
    for (int i = 0; i < nd; i++) {
        const int d = order[i];
        j.osz[i] = g->sizes[d];
        j.isz[i] = x->sizes[d];
        j.bef[i] = j.p->before[d];
        j.gs[i] = g->strides[d];
        j.xs[i] = x->strides[d];
    }
    j.nouter = nd - 1;
    const int64_t iw = j.isz[nd - 1], ow = j.osz[nd - 1], bw = j.bef[nd - 1];
    /* the longest run of single-source indices (reflect's i = 0 is single but
     * i = 1 is not: the run is not simply "all but the edges") */
    j.ilo = j.ihi = 0;
    for (int64_t i = 0, start = 0; i <= iw; i++) {
        if (i < iw && pad_bw_single(i, bw, iw, ow, j.p->mode)) continue;
        if (i - start > j.ihi - j.ilo) j.ilo = start, j.ihi = i;
        start = i + 1;
    }
    const int64_t rows = x->numel / iw;
    int64_t per = g->numel / (rows > 0 ? rows : 1);
    int64_t grain = 32768 / (per > 0 ? per : 1);
    if (x->dtype == MFT_F32) mft__parallel_for(0, rows, grain > 0 ? grain : 1, pad_bw_rows_F32, &j);
    else mft__parallel_for(0, rows, grain > 0 ? grain : 1, pad_bw_rows_F64, &j);
}

static void pad_bw_nchw(const mft_kernel_args *a) { pad_bw_packed(a, MFT_CONTIGUOUS); }
static void pad_bw_nhwc(const mft_kernel_args *a) { pad_bw_packed(a, MFT_CHANNELS_LAST); }

/* ---------------------------------------------------------------- table */
const mft__kernel_def mft__kernels_pad[] = {
    {MFT__OP_PAD, MFT_CONTIGUOUS, MFT_F32, "pad.nchw.f32", pad_nchw},
    {MFT__OP_PAD, MFT_CHANNELS_LAST, MFT_F32, "pad.nhwc.f32", pad_nhwc},
    {MFT__OP_PAD, MFT_CONTIGUOUS, MFT_F64, "pad.nchw.f64.ref", pad_ref_F64},
    {MFT__OP_PAD, MFT_CONTIGUOUS, MFT_I32, "pad.nchw.i32", pad_nchw},
    {MFT__OP_PAD, MFT_CONTIGUOUS, MFT_I64, "pad.nchw.i64", pad_nchw},
    {MFT__OP_PAD, MFT_CONTIGUOUS, MFT_U8, "pad.nchw.u8", pad_nchw},
    {MFT__OP_PAD, MFT_CHANNELS_LAST, MFT_I32, "pad.nhwc.i32", pad_nhwc},
    {MFT__OP_PAD, MFT_CHANNELS_LAST, MFT_I64, "pad.nhwc.i64", pad_nhwc},
    {MFT__OP_PAD, MFT_CHANNELS_LAST, MFT_U8, "pad.nhwc.u8", pad_nhwc},
    {MFT__OP_PAD_BACKWARD, MFT_CONTIGUOUS, MFT_F32, "pad_backward.nchw.f32", pad_bw_nchw},
    {MFT__OP_PAD_BACKWARD, MFT_CHANNELS_LAST, MFT_F32, "pad_backward.nhwc.f32", pad_bw_nhwc},
    {MFT__OP_PAD_BACKWARD, MFT_CONTIGUOUS, MFT_F64, "pad_backward.nchw.f64", pad_bw_nchw},
    {MFT__OP_PAD_BACKWARD, MFT_CHANNELS_LAST, MFT_F64, "pad_backward.nhwc.f64", pad_bw_nhwc},
    {0},
};

/* ---------------------------------------------------------------- cat, stack */
/* PyTorch's legacy rule: 1-D tensors of size 0 take no part in cat. */
static bool cat_skipped(const mft_tensor *t) { return t->ndim == 1 && t->sizes[0] == 0; }

/* Concatenates ts (already validated non-NULL) along dim; skip enables the
 * legacy empty rule (cat), off for stack. Messages name fn. */
/* Validates a cat of ts along dim and computes the result's sizes, wrapped
 * dim, dtype and format; false with the error set (naming fn). */
typedef struct cat_plan {
    int d, nd;
    bool all_skipped;
    int64_t sizes[MFT_MAX_DIMS];
    mft_dtype dt;
    mft_format fmt;
    mft__decision dec; /* the CAT row's decision (tensor/rules.def) */
} cat_plan;

static bool cat_check(const char *fn, int n, const mft_tensor *const *ts, int dim, bool skip,
                      cat_plan *cp) {
    char b1[MFT__DIMS_BUF], b2[MFT__DIMS_BUF];
    int ref = -1;
    for (int i = 0; i < n; i++) {
        if (ts[i]->ndim == 0) {
            mft__set_error(MFT_ERR_RANK, "%s: zero-dimensional tensor (at position %d) cannot be "
                           "concatenated", fn, i);
            return false;
        }
        if (ref < 0 && !(skip && cat_skipped(ts[i]))) ref = i;
    }
    const bool all_skipped = ref < 0;
    if (all_skipped) ref = 0;
    const mft_tensor *r = ts[ref];
    const int nd = r->ndim;
    int d = mft__wrap_dim(fn, dim, nd);
    if (d < 0) return false;
    int64_t sizes[MFT_MAX_DIMS];
    memcpy(sizes, r->sizes, sizeof sizes);
    sizes[d] = 0;
    for (int i = 0; i < n; i++) {
        const mft_tensor *t = ts[i];
        if (skip && cat_skipped(t) && !all_skipped) continue;
        if (t->ndim != nd) {
            mft__set_error(MFT_ERR_RANK, "%s: tensors must have same number of dimensions: got %d "
                           "and %d (tensor number %d in the list)", fn, nd, t->ndim, i);
            return false;
        }
        for (int k = 0; k < nd; k++)
            if (k != d && t->sizes[k] != r->sizes[k]) {
                mft__set_error(MFT_ERR_SHAPE,
                               "%s: sizes of tensors must match except in dimension %d. Expected "
                               "size %lld but got size %lld for tensor number %d in the list "
                               "(sizes %s and %s)",
                               fn, d, (long long)r->sizes[k], (long long)t->sizes[k], i,
                               mft__fmt_dims(b1, sizeof b1, nd, r->sizes),
                               mft__fmt_dims(b2, sizeof b2, nd, t->sizes));
                return false;
            }
        if (sizes[d] > INT64_MAX - t->sizes[d]) {
            mft__set_error(MFT_ERR_OVERFLOW, "%s: concatenated size overflows", fn);
            return false;
        }
        sizes[d] += t->sizes[d];
    }
    mft_dtype dt = mft_result_type(n, ts, false, 0.0);
    if (dt == MFT_DTYPE_COUNT) {
        mft__relabel_error(fn);
        return false;
    }
    cp->d = d;
    cp->nd = nd;
    cp->all_skipped = all_skipped;
    memcpy(cp->sizes, sizes, sizeof sizes);
    cp->dt = dt;
    /* the COMMON row over the tensors that take part (skipped ones as NULL) */
    const mft_tensor *small[16];
    const mft_tensor **part = n <= 16 ? small : mft__alloc_or_err(fn, (size_t)n * sizeof *part, 8);
    if (!part) return false;
    for (int i = 0; i < n; i++) part[i] = skip && cat_skipped(ts[i]) && !all_skipped ? NULL : ts[i];
    cp->dec = mft__rule_decide(MFT__RULE_CAT, fn + 4, n, part, MFT_CONTIGUOUS, 0);
    if (part != small) mft__free((void *)part);
    cp->fmt = cp->dec.tag;
    return true;
}

static mft_tensor *cat_impl(const char *fn, int n, const mft_tensor *const *ts, int dim, bool skip) {
    cat_plan cp;
    if (!cat_check(fn, n, ts, dim, skip, &cp)) return NULL;
    const int nd = cp.nd, d = cp.d;
    const bool all_skipped = cp.all_skipped;
    const int64_t *sizes = cp.sizes;
    const mft_dtype dt = cp.dt;
    const mft_format fmt = cp.fmt;

    mft__scope_suspend();
    mft_tensor *y = mft__tensor_alloc(fn, nd, sizes, dt, fmt);
    bool ok = y != NULL;
    int64_t off = 0;
    for (int i = 0; ok && i < n && !all_skipped; i++) {
        const mft_tensor *t = ts[i];
        if ((skip && cat_skipped(t)) || t->sizes[d] == 0) continue;
        mft_tensor *v = mft_narrow(y, d, off, t->sizes[d]);
        ok = v != NULL;
        if (ok && v->numel) mft__copy_kernel(v, t);
        mft_tensor_release(v);
        off += t->sizes[d];
    }
    mft__scope_resume();
    if (!ok) {
        mft__relabel_error(fn);
        mft_tensor_release(y);
        return NULL;
    }
    mft__rule_apply(y, &cp.dec);
    mft_tensor *res = mft__retain_result(fn, y);
    mft_tensor_release(y);
    return res;
}

static bool list_check(const char *fn, int n, const mft_tensor *const *ts) {
    if (!ts) {
        mft__set_error(MFT_ERR_NULL, "%s: argument 'ts' is NULL", fn);
        return false;
    }
    if (n < 1) {
        mft__set_error(MFT_ERR_INVALID, "%s: expected a non-empty list of tensors, got n = %d", fn,
                       n);
        return false;
    }
    for (int i = 0; i < n; i++)
        if (!ts[i]) {
            char what[32];
            snprintf(what, sizeof what, "ts[%d]", i);
            mft__null_arg(fn, what);
            return false;
        }
    return true;
}

static mft_tensor *cat_forward(const char *fn, int n, const mft_tensor *const *ts, int dim) {
    if (!list_check(fn, n, ts)) return NULL;
    return cat_impl(fn, n, ts, dim, true);
}

static mft_tensor *stack_forward(const char *fn, int n, const mft_tensor *const *ts, int dim) {
    char b1[MFT__DIMS_BUF], b2[MFT__DIMS_BUF];
    if (!list_check(fn, n, ts)) return NULL;
    for (int i = 1; i < n; i++) {
        bool eq = ts[i]->ndim == ts[0]->ndim;
        for (int k = 0; eq && k < ts[0]->ndim; k++) eq = ts[i]->sizes[k] == ts[0]->sizes[k];
        if (!eq) {
            mft__set_error(MFT_ERR_SHAPE, "%s: expects each tensor to be equal size, but got %s at "
                           "entry 0 and %s at entry %d", fn,
                           mft__fmt_dims(b1, sizeof b1, ts[0]->ndim, ts[0]->sizes),
                           mft__fmt_dims(b2, sizeof b2, ts[i]->ndim, ts[i]->sizes), i);
            return NULL;
        }
    }
    if (ts[0]->ndim + 1 > MFT_MAX_DIMS) {
        mft__set_error(MFT_ERR_RANK, "%s: stacking rank-%d tensors exceeds %d dims", fn,
                       ts[0]->ndim, MFT_MAX_DIMS);
        return NULL;
    }
    int d = mft__wrap_dim(fn, dim, ts[0]->ndim + 1);
    if (d < 0) return NULL;
    mft_tensor **us = mft__alloc_or_err(fn, (size_t)n * sizeof *us, sizeof(void *));
    if (!us) return NULL;
    bool ok = true;
    int made = 0;
    mft__scope_suspend();
    for (; made < n && ok; made++) {
        us[made] = mft_unsqueeze(ts[made], d);
        ok = us[made] != NULL;
    }
    mft__scope_resume();
    mft_tensor *r = NULL;
    if (ok) r = cat_impl(fn, n, (const mft_tensor *const *)us, d, false);
    else mft__relabel_error(fn);
    for (int i = 0; i < made; i++) mft_tensor_release(us[i]);
    mft__free(us);
    return r;
}

/* ---------------------------------------------------------------- cat / stack backward
 * grads[i] = the part of grad_out that came from ts[i] (a narrow for cat, a
 * select for stack), copied into a new tensor of ts[i]'s sizes and dtype,
 * packed in ts[i]'s tag for ranks 3-5, else CONTIGUOUS (SPEC §5). Inputs
 * the cat skipped (legacy 1-D empty) get an empty gradient. */
static mft_status grads_finish(const char *fn, bool ok, int n, mft_tensor **tmp,
                               mft_tensor **grads) {
    for (int i = 0; i < n && ok; i++) {
        mft_tensor *r = mft__retain_result(fn, tmp[i]);
        mft_tensor_release(tmp[i]);
        tmp[i] = r;
        if (!r) {
            for (int k = 0; k < i; k++) mft_tensor_release(tmp[k]);
            for (int k = i + 1; k < n; k++) mft_tensor_release(tmp[k]);
            ok = false;
            n = 0;
        }
    }
    if (!ok) {
        for (int i = 0; i < n; i++) mft_tensor_release(tmp[i]);
        mft__free(tmp);
        return mft__relabel_error(fn);
    }
    for (int i = 0; i < n; i++) grads[i] = tmp[i];
    mft__free(tmp);
    return MFT_OK;
}

/* A packed copy of part (any strides) with t's sizes and dtype in t's tag. */
static mft_tensor *grad_piece(const char *fn, const mft_tensor *part, const mft_tensor *t) {
    const mft__decision dec = mft__rule_decide(MFT__RULE_BACKWARD, fn + 4, 1, &t, MFT_CONTIGUOUS, 0);
    const mft_format fmt = dec.tag;
    mft_tensor *g = mft__tensor_alloc(fn, t->ndim, t->sizes, t->dtype, fmt);
    if (!g) return NULL;
    if (g->numel) {
        if (part) {
            mft__copy_kernel(g, part);
        } else {
            mft__fill(g, 0.0);
        }
    }
    mft__rule_apply(g, &dec);
    return g;
}

static bool grad_out_check(const char *fn, const mft_tensor *grad_out, int nd,
                           const int64_t *sizes) {
    char b1[MFT__DIMS_BUF], b2[MFT__DIMS_BUF];
    if (!grad_out) {
        mft__null_arg(fn, "grad_out");
        return false;
    }
    bool same = grad_out->ndim == nd;
    for (int d = 0; same && d < nd; d++) same = grad_out->sizes[d] == sizes[d];
    if (!same) {
        mft__set_error(MFT_ERR_SHAPE, "%s: grad_out of sizes %s does not match the result's sizes %s",
                       fn, mft__fmt_dims(b1, sizeof b1, grad_out->ndim, grad_out->sizes),
                       mft__fmt_dims(b2, sizeof b2, nd, sizes));
        return false;
    }
    return true;
}

mft_status mft_cat_backward(const mft_tensor *grad_out, int n, const mft_tensor *const *ts,
                            int dim, mft_tensor **grads) {
    static const char fn[] = "mft_cat_backward";
    if (!list_check(fn, n, ts)) return mft_last_error();
    if (!grads) {
        mft__set_error(MFT_ERR_NULL, "%s: argument 'grads' is NULL", fn);
        return MFT_ERR_NULL;
    }
    cat_plan cp;
    if (!cat_check(fn, n, ts, dim, true, &cp)) return mft_last_error();
    if (!grad_out_check(fn, grad_out, cp.nd, cp.sizes)) return mft_last_error();
    mft_tensor **tmp = mft__alloc_or_err(fn, (size_t)n * sizeof *tmp, sizeof(void *));
    if (!tmp) return mft_last_error();
    bool ok = true;
    int made = 0;
    int64_t off = 0;
    mft__scope_suspend();
    for (; ok && made < n; made++) {
        const mft_tensor *t = ts[made];
        mft_tensor *part = NULL;
        if (!(cat_skipped(t) && !cp.all_skipped) && !cp.all_skipped) {
            part = mft_narrow(grad_out, cp.d, off, t->sizes[cp.d]);
            ok = part != NULL;
            off += t->sizes[cp.d];
        }
        tmp[made] = ok ? grad_piece(fn, part, t) : NULL;
        ok = ok && tmp[made] != NULL;
        mft_tensor_release(part);
    }
    mft__scope_resume();
    if (!ok) {
        for (int i = 0; i < made; i++) mft_tensor_release(tmp[i]);
        mft__free(tmp);
        return mft__relabel_error(fn);
    }
    return grads_finish(fn, true, n, tmp, grads);
}

mft_status mft_stack_backward(const mft_tensor *grad_out, int n, const mft_tensor *const *ts,
                              int dim, mft_tensor **grads) {
    static const char fn[] = "mft_stack_backward";
    char b1[MFT__DIMS_BUF], b2[MFT__DIMS_BUF];
    if (!list_check(fn, n, ts)) return mft_last_error();
    if (!grads) {
        mft__set_error(MFT_ERR_NULL, "%s: argument 'grads' is NULL", fn);
        return MFT_ERR_NULL;
    }
    for (int i = 1; i < n; i++) {
        bool eq = ts[i]->ndim == ts[0]->ndim;
        for (int k = 0; eq && k < ts[0]->ndim; k++) eq = ts[i]->sizes[k] == ts[0]->sizes[k];
        if (!eq) {
            mft__set_error(MFT_ERR_SHAPE, "%s: expects each tensor to be equal size, but got %s at "
                           "entry 0 and %s at entry %d", fn,
                           mft__fmt_dims(b1, sizeof b1, ts[0]->ndim, ts[0]->sizes),
                           mft__fmt_dims(b2, sizeof b2, ts[i]->ndim, ts[i]->sizes), i);
            return MFT_ERR_SHAPE;
        }
    }
    const int nd = ts[0]->ndim + 1;
    if (nd > MFT_MAX_DIMS) {
        mft__set_error(MFT_ERR_RANK, "%s: stacking rank-%d tensors exceeds %d dims", fn,
                       ts[0]->ndim, MFT_MAX_DIMS);
        return MFT_ERR_RANK;
    }
    const int d = mft__wrap_dim(fn, dim, nd);
    if (d < 0) return mft_last_error();
    int64_t sizes[MFT_MAX_DIMS];
    for (int k = 0, s = 0; k < nd; k++) sizes[k] = k == d ? n : ts[0]->sizes[s++];
    if (!grad_out_check(fn, grad_out, nd, sizes)) return mft_last_error();
    mft_tensor **tmp = mft__alloc_or_err(fn, (size_t)n * sizeof *tmp, sizeof(void *));
    if (!tmp) return mft_last_error();
    bool ok = true;
    int made = 0;
    mft__scope_suspend();
    for (; ok && made < n; made++) {
        mft_tensor *part = mft_select(grad_out, d, made);
        tmp[made] = part ? grad_piece(fn, part, ts[made]) : NULL;
        ok = tmp[made] != NULL;
        mft_tensor_release(part);
    }
    mft__scope_resume();
    if (!ok) {
        for (int i = 0; i < made; i++) mft_tensor_release(tmp[i]);
        mft__free(tmp);
        return mft__relabel_error(fn);
    }
    return grads_finish(fn, true, n, tmp, grads);
}

/* ---------------------------------------------------------------- split */
/* The views, not yet registered in any scope (the caller hands them over). */
static mft_status split_forward(const char *fn, const mft_tensor *x, int64_t split_size, int dim,
                                int max_out, mft_tensor **outs, int *nout) {
    if (nout) *nout = 0;
    if (!x) {
        mft__null_arg(fn, "x");
        return MFT_ERR_NULL; /* the call's own status; the message keeps an earlier error */
    }
    if (!outs || !nout) {
        mft__set_error(MFT_ERR_NULL, "%s: argument '%s' is NULL", fn, !outs ? "outs" : "nout");
        return MFT_ERR_NULL;
    }
    if (x->ndim == 0) {
        mft__set_error(MFT_ERR_RANK, "%s: cannot split a zero-dimensional tensor", fn);
        return MFT_ERR_RANK;
    }
    int d = mft__wrap_dim(fn, dim, x->ndim);
    if (d < 0) return mft_last_error();
    const int64_t size = x->sizes[d];
    if (split_size < 0) {
        mft__set_error(MFT_ERR_INVALID, "%s: split expects split_size be non-negative, but got "
                       "split_size=%lld", fn, (long long)split_size);
        return MFT_ERR_INVALID;
    }
    if (split_size == 0 && size != 0) {
        mft__set_error(MFT_ERR_INVALID, "%s: split_size can only be 0 if dimension size is 0, but "
                       "got dimension size of %lld", fn, (long long)size);
        return MFT_ERR_INVALID;
    }
    int64_t chunks = split_size == 0 ? 1 : size / split_size + (size % split_size != 0);
    if (chunks < 1) chunks = 1;
    if (chunks > max_out) {
        mft__set_error(MFT_ERR_INVALID, "%s: %lld chunks (size %lld, split_size %lld) exceed "
                       "max_out %d", fn, (long long)chunks, (long long)size,
                       (long long)split_size, max_out);
        return MFT_ERR_INVALID;
    }
    for (int64_t c = 0; c < chunks; c++) {
        int64_t start = c * split_size;
        int64_t len = size - start < split_size ? size - start : split_size;
        if (split_size == 0) start = len = 0;
        outs[c] = mft_narrow(x, d, start, len);
        if (!outs[c]) {
            mft_status st = mft__relabel_error(fn);
            for (int64_t k = 0; k < c; k++) {
                mft_tensor_release(outs[k]);
                outs[k] = NULL;
            }
            return st;
        }
    }
    *nout = (int)chunks;
    return MFT_OK;
}

/* ---------------------------------------------------------------- autograd and entry points
 * Each public entry point runs its forward directly when nothing records;
 * under a recording tape the forward runs with grad mode off and the user's
 * scope suspended (ag_begin / ag_end: the helpers it calls neither record
 * nor register), the node is recorded, then the results are handed over
 * like any op result (registered in the innermost scope). */
static bool ag_begin(void) {
    mft__scope_suspend();
    return mft_set_grad_enabled(false);
}

static void ag_end(bool prev) {
    mft_set_grad_enabled(prev);
    mft__scope_resume();
}

/* Hands y (ours) over as the op's result. */
static mft_tensor *ag_hand_over(const char *fn, mft_tensor *y) {
    mft_tensor *r = mft__retain_result(fn, y);
    mft_tensor_release(y);
    return r;
}

/* A tensor of input in's sizes and dtype, packed in its format (SPEC §5),
 * holding part (a view of a gradient with in's sizes), or NULL. */
static mft_tensor *ag_grad_like_input(const mft__ag_input *in, const mft_tensor *part) {
    const mft_format fmt = mft__rule_grad_format(in->tag, in->ndim);
    mft_tensor *g = mft_empty(in->ndim, in->sizes, in->dtype, fmt);
    if (g && g->numel && mft_copy_(g, part) != MFT_OK) {
        mft_tensor_release(g);
        return NULL;
    }
    return g;
}

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
    if (!mft__ag_wants(1, &x)) return pad_forward(fn, x, npad, pads, mode, value);
    const bool prev = ag_begin();
    mft_tensor *y = pad_forward(fn, x, npad, pads, mode, value);
    ag_end(prev);
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
    return ag_hand_over(fn, y);
}

/* cat / stack: dim wrapped against the result's rank. */
typedef struct cat_ag_params {
    int dim;
    bool stack;
} cat_ag_params;

static mft_status cat_node_backward(const mft__ag_node *n, mft_tensor *const *gout,
                                    mft_tensor **gin) {
    const cat_ag_params *p = n->params;
    int64_t off = 0;
    for (int k = 0; k < n->nin; k++) {
        const mft__ag_input *in = &n->in[k];
        const bool skipped = !p->stack && in->ndim == 1 && in->sizes[0] == 0; /* legacy empty */
        mft_tensor *part = NULL;
        if (p->stack) {
            if (!in->needs_grad) continue;
            part = mft_select(gout[0], p->dim, k);
        } else if (!skipped) {
            const int64_t len = in->sizes[p->dim];
            off += len;
            if (!in->needs_grad) continue;
            part = mft_narrow(gout[0], p->dim, off - len, len);
        } else if (!in->needs_grad) {
            continue;
        }
        if (!skipped && !part) return mft_last_error();
        gin[k] = ag_grad_like_input(in, part); /* skipped: an empty [0] tensor */
        mft_tensor_release(part);
        if (!gin[k]) return mft_last_error(); /* the engine releases gin[0..k) */
    }
    return MFT_OK;
}

/* Forward plus recording of cat (stack = false) or stack. */
static mft_tensor *cat_entry(const char *fn, int n, const mft_tensor *const *ts, int dim,
                             bool stack) {
    if (!ts || n < 1 || !mft__ag_wants(n, ts))
        return stack ? stack_forward(fn, n, ts, dim) : cat_forward(fn, n, ts, dim);
    const bool prev = ag_begin();
    mft_tensor *y = stack ? stack_forward(fn, n, ts, dim) : cat_forward(fn, n, ts, dim);
    ag_end(prev);
    if (!y) return NULL;
    cat_ag_params p;
    memset(&p, 0, sizeof p);
    p.dim = mft__wrap_dim(fn, dim, y->ndim); /* valid: the forward accepted it */
    p.stack = stack;
    if (mft__ag_record(fn, stack ? "stack" : "cat", cat_node_backward, n, ts, 1, &y, 0, NULL, &p,
                       sizeof p) != MFT_OK) {
        mft_tensor_release(y);
        return NULL;
    }
    return ag_hand_over(fn, y);
}

mft_tensor *mft_cat(int n, const mft_tensor *const *ts, int dim) {
    return cat_entry("mft_cat", n, ts, dim, false);
}

mft_tensor *mft_stack(int n, const mft_tensor *const *ts, int dim) {
    return cat_entry("mft_stack", n, ts, dim, true);
}

/* split: x's gradient is the chunks' gradients copied side by side into a
 * tensor packed in x's format. */
typedef struct split_ag_params {
    int dim;
} split_ag_params;

static mft_status split_node_backward(const mft__ag_node *n, mft_tensor *const *gout,
                                      mft_tensor **gin) {
    const split_ag_params *p = n->params;
    const mft__ag_input *in = &n->in[0];
    if (!in->needs_grad) return MFT_OK;
    const mft_format fmt = mft__rule_grad_format(in->tag, in->ndim);
    mft_tensor *g = mft_empty(in->ndim, in->sizes, in->dtype, fmt);
    if (!g) return mft_last_error();
    int64_t off = 0;
    for (int j = 0; j < n->nout; j++) {
        const int64_t len = gout[j]->sizes[p->dim];
        mft_tensor *v = len ? mft_narrow(g, p->dim, off, len) : NULL;
        if (len && (!v || mft_copy_(v, gout[j]) != MFT_OK)) {
            mft_tensor_release(v);
            mft_tensor_release(g);
            return mft_last_error();
        }
        mft_tensor_release(v);
        off += len;
    }
    gin[0] = g;
    return MFT_OK;
}

mft_status mft_split(const mft_tensor *x, int64_t split_size, int dim, int max_out,
                     mft_tensor **outs, int *nout) {
    static const char fn[] = "mft_split";
    const bool rec = mft__ag_wants(1, &x);
    const bool prev = ag_begin(); /* the views are registered below, once all exist */
    mft_status st = split_forward(fn, x, split_size, dim, max_out, outs, nout);
    ag_end(prev);
    if (st != MFT_OK) return st;
    const int k = *nout;
    if (rec) {
        split_ag_params p = {mft__wrap_dim(fn, dim, x->ndim)};
        st = mft__ag_record(fn, "split", split_node_backward, 1, &x, k, outs, 0, NULL, &p,
                            sizeof p);
        if (st != MFT_OK) {
            for (int j = 0; j < k; j++) {
                mft_tensor_release(outs[j]);
                outs[j] = NULL;
            }
            *nout = 0;
            return st;
        }
    }
    for (int j = 0; j < k; j++) {
        mft_tensor *v = outs[j];
        outs[j] = mft__retain_result(fn, v);
        mft_tensor_release(v);
        if (!outs[j]) {
            /* out of memory registering in the open scope, which owns (and
             * releases) the views registered before; ours go now */
            for (int i = j + 1; i < k; i++) mft_tensor_release(outs[i]);
            for (int i = 0; i < k; i++) outs[i] = NULL;
            *nout = 0;
            return MFT_ERR_NOMEM;
        }
    }
    return MFT_OK;
}
