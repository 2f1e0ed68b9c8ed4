/* ops/pool/pool_more.c — the pooling ops beyond 2-D forward (mft/pool.h): max /
 * avg pool backward (2-D, 3-D), 1-D pools (run as 2-D with H = 1), 3-D pools,
 * adaptive avg / max 2-D and 3-D pools and their backward; all dispatched by
 * (op, format, dtype) (DESIGN §7).
 *
 * The file reads top to bottom: the shared window geometry, parameter
 * checks and the entry points, the reference kernels (which define the
 * semantics; they read any strides, F32 and F64, computing in double), the
 * fast F32 kernels (NCHW = CONTIGUOUS, NHWC = CHANNELS_LAST; each handles 2-D
 * and 3-D: a 4-D tensor is a 5-D one with D = 1), and the kernel table.
 *
 * Semantics are PyTorch 1.13's:
 *   - windows per spatial dim: max: [o*s - p, o*s - p + (k-1)*dil + 1)
 *     clipped to [0, in) by whole dilation steps at the start; avg:
 *     [o*s - p, min(o*s - p + k, in + p)) gives pool_size, clipped to [0, in)
 *     for the sum; adaptive: [floor(o*in/out), ceil((o+1)*in/out)).
 *   - max: a value replaces the running max (initially -inf at the window's
 *     first position) when greater or NaN; indices are flat d*H*W + h*W + w
 *     (h*W + w for 2-D, l for 1-D) within the (n, c) plane.
 *   - avg divisor: divisor_override if non-zero, else pool_size when
 *     count_include_pad, else the clipped window's size; an empty window
 *     gives 0. Adaptive avg divides by the window's size.
 *   - max backward: grad_x[n, c, i] = sum of grad_out over the outputs whose
 *     index is i (out-of-range indices are ignored); avg backward:
 *     grad_x[i] = sum over the windows holding i of grad_out / divisor.
 * Results and gradients are packed in the input's tag (SPEC §4, §5): a
 * batched input (N,C,...) gives its tag (rank-3 CHANNELS_LAST = N,L,C for
 * 1-D pools); an unbatched one (C,...) gives CONTIGUOUS.
 *
 * Kernels that scatter (max backward, the reference backward, the NCHW avg
 * backward's fallback for rows wider than PM_TAB) give each thread whole
 * (n, c) planes (NCHW) or whole (n, channel block) images (NHWC); the avg
 * backward fast kernels gather (each grad_x element is written once). So
 * results never depend on the thread count. F32 fast kernels may round
 * differently from the reference (sums in another order, 1/divisor
 * factors), within a few ulps.
 *
 * Autograd: the forward entry points of this file (1-D, 3-D, adaptive)
 * record one tape node under a recording tape (pm_ag_params, pm_node_backward)
 * whose backward runs the matching public backward function; max pools save
 * the indices their kernels compute anyway, so recording costs no extra work. */
#include <stdio.h>
#include <string.h>
#include "autograd_internal.h"
#include "ops_internal.h"

/* Note [Kernel tables]: the built-in kernels this family dispatches to. */
static const mft__kernel_def *const g_tables[] = {mft__kernels_pool, mft__kernels_pool_more, NULL};

/* The reference kernels, for tests (F32 ones are not in the table). */
mft_kernel_fn mft__pool_more_reference(mft__op_id op, mft_dtype dt);

/* Largest kernel/stride/padding/dilation/adaptive output size accepted. */
#define PM_MAX_PARAM ((int64_t)1 << 30)
/* Channels per work item of the NHWC max backward. */
#define PM_CBLOCK 64
/* Outputs listed at a time per pixel by the NHWC avg backward; largest OW
 * and W whose per-row tables live on the stack (else a slower path). */
#define PM_TERMS 32
#define PM_TAB 512
/* Largest (od, oh) pairs x OW of a row whose 1/divisor table the NHWC avg
 * backward's fast path keeps on the stack. */
#define PM_PINV 4096
/* Channels accumulated in registers by the NHWC avg kernels. */
#define PM_VB 64
/* 8-lane float / int32 vectors (GCC/Clang vector extension) for the NHWC
 * kernels' register accumulators, on AVX builds (without AVX, passing a
 * 32-byte vector changes the ABI); plain loops elsewhere. */
#if (defined(__GNUC__) || defined(__clang__)) && defined(__AVX__)
#define PM_HAVE_V8 1
typedef float pm_v8 __attribute__((vector_size(32)));
typedef int32_t pm_i8 __attribute__((vector_size(32)));
static inline pm_v8 pm_ld8(const float *p) {
    pm_v8 v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline void pm_st8(float *p, pm_v8 v) { memcpy(p, &v, sizeof v); }
#else
#define PM_HAVE_V8 0
#endif
/* AVX-512: the NHWC max backward over known windows (pm_maxbwd_win_range). */
#if defined(__AVX512F__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define PM_HAVE_Z16 1
#else
#define PM_HAVE_Z16 0
#endif
/* Widest row whose column sums the NCHW average forward keeps on the stack. */
#define PM_CS_W 2048
#if PM_HAVE_Z16
/* Lanes [0, min(r, 16)) of a 16-lane mask. */
static inline __mmask16 pm_mask16(int64_t r) {
    return r >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << r) - 1u);
}

/* The 16 int64 indices at ii in the lanes of km, saturated to int32 (an
 * index past INT32_MAX stays past every position). Plain loads where km is
 * whole: masked loads that miss the cache measured 2x slower here. */
static inline __m512i pm_idx16(const int64_t *ii, __mmask16 km) {
    const bool whole = km == 0xFFFF;
    const __m256i lo = _mm512_cvtsepi64_epi32(
        whole ? _mm512_loadu_si512(ii) : _mm512_maskz_loadu_epi64((__mmask8)(km & 0xFF), ii));
    const __m256i hi = _mm512_cvtsepi64_epi32(
        whole ? _mm512_loadu_si512(ii + 8) : _mm512_maskz_loadu_epi64((__mmask8)(km >> 8), ii + 8));
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}
#endif
/* Most window positions the AVX-512 windowed max backward lists per output. */
#define PM_WIN_MAX 64
/* How many outputs ahead it prefetches grad_out and the indices. */
#define PM_WIN_AHEAD 8

/* ---------------------------------------------------------------- geometry */
typedef enum pm_kind { PM_MAX, PM_AVG, PM_ADAPT } pm_kind;

/* The window geometry of one op, always over 3 spatial dims (D, H, W); a
 * 2-D (or 1-D) op has the leading dims of size 1 with kernel 1. */
typedef struct pm_geom {
    pm_kind kind;
    int64_t N, C, in[3], out[3], k[3], s[3], p[3], d[3];
    bool ceil_mode, count_include_pad;
    int64_t divisor_override;
} pm_geom;

static int64_t pm_div_floor(int64_t a, int64_t b) {
    int64_t q = a / b, r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? q - 1 : q;
}

/* PyTorch's pooling_output_shape. */
static int64_t pm_out_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dil,
                           bool ceil_mode) {
    int64_t out = pm_div_floor(in + 2 * pad - dil * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0),
                               stride) + 1;
    if (ceil_mode && (out - 1) * stride >= in + pad) out--;
    return out;
}

/* Window of output o along spatial dim e: [*i0, *i1) with step d[e] (max)
 * or 1; *ext = the padded extent (avg), the size (adaptive). */
static inline void pm_win(const pm_geom *g, int e, int64_t o, int64_t *i0, int64_t *i1,
                          int64_t *ext) {
    const int64_t in = g->in[e];
    if (g->kind == PM_ADAPT) {
        const int64_t out = g->out[e];
        *i0 = (o * in) / out;
        *i1 = ((o + 1) * in + out - 1) / out;
        *ext = *i1 - *i0;
        return;
    }
    int64_t start = o * g->s[e] - g->p[e];
    if (g->kind == PM_MAX) {
        int64_t end = start + (g->k[e] - 1) * g->d[e] + 1;
        *i1 = end < in ? end : in;
        if (start < 0) start += ((-start + g->d[e] - 1) / g->d[e]) * g->d[e];
        *i0 = start;
        *ext = 0;
        return;
    }
    int64_t end = start + g->k[e];
    if (end > in + g->p[e]) end = in + g->p[e];
    *ext = end - start;
    *i0 = start < 0 ? 0 : start;
    *i1 = end < in ? end : in;
}

/* Outputs [*o0, *o1) along dim e whose (avg or adaptive) window holds input i. */
static inline void pm_inv(const pm_geom *g, int e, int64_t i, int64_t *o0, int64_t *o1) {
    const int64_t in = g->in[e], out = g->out[e];
    int64_t a, b;
    if (g->kind == PM_ADAPT) {
        a = (i * out) / in;
        b = ((i + 1) * out + in - 1) / in;
    } else { /* o*s - p <= i < o*s - p + k */
        a = pm_div_floor(i + g->p[e] - g->k[e], g->s[e]) + 1;
        b = pm_div_floor(i + g->p[e], g->s[e]) + 1;
    }
    *o0 = a < 0 ? 0 : a;
    *o1 = b > out ? out : b;
    if (*o1 < *o0) *o1 = *o0;
}

/* Divisor of an avg / adaptive output from the clipped counts and extents
 * of its window (0: empty window, the output is 0). */
static inline int64_t pm_divisor(const pm_geom *g, const int64_t cnt[3], const int64_t ext[3]) {
    if (cnt[0] <= 0 || cnt[1] <= 0 || cnt[2] <= 0) return 0;
    if (g->kind == PM_ADAPT) return cnt[0] * cnt[1] * cnt[2];
    if (g->divisor_override) return g->divisor_override;
    return g->count_include_pad ? ext[0] * ext[1] * ext[2] : cnt[0] * cnt[1] * cnt[2];
}

/* Sizes of the geometry from the input-sized tensor (x or grad_x) and the
 * output-sized one (y or grad_out), both rank 4 or 5. */
static void pm_geom_init(pm_geom *g, pm_kind kind, const mft_tensor *big, const mft_tensor *small) {
    memset(g, 0, sizeof *g);
    g->kind = kind;
    g->N = big->sizes[0];
    g->C = big->sizes[1];
    for (int e = 0; e < 3; e++) {
        g->in[e] = g->out[e] = g->k[e] = g->s[e] = g->d[e] = 1;
        g->p[e] = 0;
    }
    const int ns = big->ndim - 2;
    for (int i = 0; i < ns; i++) {
        g->in[3 - ns + i] = big->sizes[2 + i];
        g->out[3 - ns + i] = small->sizes[2 + i];
    }
}

static void pm_geom_p2(pm_geom *g, const mft_pool2d_params *p) {
    for (int i = 0; i < 2; i++) {
        g->k[1 + i] = p->kernel[i];
        g->s[1 + i] = p->stride[i];
        g->p[1 + i] = p->padding[i];
        g->d[1 + i] = g->kind == PM_MAX ? p->dilation[i] : 1;
    }
    g->ceil_mode = p->ceil_mode;
    g->count_include_pad = p->count_include_pad;
    g->divisor_override = p->divisor_override;
}

static void pm_geom_p3(pm_geom *g, const mft_pool3d_params *p) {
    for (int i = 0; i < 3; i++) {
        g->k[i] = p->kernel[i];
        g->s[i] = p->stride[i];
        g->p[i] = p->padding[i];
        g->d[i] = g->kind == PM_MAX ? p->dilation[i] : 1;
    }
    g->ceil_mode = p->ceil_mode;
    g->count_include_pad = p->count_include_pad;
    g->divisor_override = p->divisor_override;
}

/* ---------------------------------------------------------------- checks */
/* x: non-NULL, rank nsp+1 (unbatched) or nsp+2, F32/F64, C and spatial > 0. */
static bool pm_check_x(const char *fn, const mft_tensor *x, int nsp, const char *what) {
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

typedef struct pm_req {
    const int64_t *kernel, *stride, *padding, *dilation;
    bool ceil_mode, count_include_pad;
    int64_t divisor_override;
} pm_req;

/* Checks the pooling arguments of an nsp-D pool of x (already checked) and
 * fills g (kind, parameters, sizes) with the output sizes. */
static bool pm_check_params(const char *fn, int nsp, bool is_max, const mft_tensor *x,
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
            if (v[a][i] > PM_MAX_PARAM) {
                mft__set_error(MFT_ERR_OVERFLOW, "%s: %s %s is too large (at most %lld)", fn,
                               names[a], mft__fmt_dims(b1, sizeof b1, nsp, v[a]),
                               (long long)PM_MAX_PARAM);
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
        g->out[e] = outs[i] = pm_out_size(g->in[e], k[i], p[i], s[i], g->d[e], q->ceil_mode);
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
static bool pm_check_like(const char *fn, const char *what, const mft_tensor *t,
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

/* One dispatched run: public inputs (viewed internally), outputs of the
 * internal sizes osz (rank 4/5) of dtypes odt, packed in fmt; the results
 * are returned with the public sizes psz (rank prank), tagged fmt. */
typedef struct pm_exec {
    const char *fn;
    mft__op_id op;
    int nsp;
    int nin;
    const mft_tensor *in[2];
    int nout;
    mft_dtype odt[2];
    int64_t osz[5];
    int prank;
    int64_t psz[5];
    mft_format fmt;
    mft__decision dec; /* the rule's decision for the results (tensor/rules.def) */
    const void *params;
    /* autograd: record a node for the first result (forward entry points) */
    bool rec;
    const char *ag_name;
    const void *ag_params; /* a pm_ag_params */
} pm_exec;

/* ---------------------------------------------------------------- autograd
 * Node of a forward pool of this file: input {x}, saved {x} (sizes, dtype,
 * format) plus the indices for max pools; the backward functions write
 * grad_x packed in x's tag (SPEC §5), so the engine converts nothing. */
typedef enum pm_ag_kind { PM_AG_MAX, PM_AG_AVG, PM_AG_ADAPT_MAX, PM_AG_ADAPT_AVG } pm_ag_kind;
typedef struct pm_ag_params {
    pm_ag_kind kind;
    int nsp;
    int64_t kernel[3], stride[3], padding[3], dilation[3];
    bool ceil_mode, count_include_pad;
    int64_t divisor_override;
} pm_ag_params;

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

static mft_tensor *pm_execute(const pm_exec *e, mft_tensor **second) {
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
        outs[i] = mft__tensor_alloc(fn, R, e->osz, e->odt[i], e->fmt);
        ok = outs[i] != NULL;
    }
    if (ok) {
        const mft_tensor *cin[2] = {ins[0], ins[1]};
        const bool convert[2] = {true, true};
        ok = mft__dispatch(fn, g_tables, e->op, e->fmt, e->odt[0], e->nin, cin, convert, e->nout, outs,
                           e->params) == MFT_OK;
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
    if (!ok) {
        mft__relabel_error(fn);
        mft_tensor_release(res[0]);
        mft_tensor_release(res[1]);
        return NULL;
    }
    mft_tensor *r = mft__retain_result(fn, res[0]);
    mft_tensor *r2 = NULL;
    if (r && second) {
        r2 = mft__retain_result(fn, res[1]);
        if (!r2) r = NULL; /* only fails inside a scope, which then owns r */
    }
    if (r && e->rec) {
        const mft_tensor *saved[2] = {e->in[0], res[1]};
        if (mft__ag_record(fn, e->ag_name, pm_node_backward, 1, e->in, 1, &r, e->nout, saved,
                           e->ag_params, sizeof(pm_ag_params)) != MFT_OK) {
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

/* Output (internal and public) sizes of x's pool with geometry g. */
static void pm_sizes(pm_exec *e, const mft_tensor *x, int nsp, const pm_geom *g, bool from_in) {
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
    /* from_in: a backward, whose result is x's gradient (op named in pm_run) */
    e->dec = mft__rule_decide(from_in ? MFT__RULE_BACKWARD : MFT__RULE_POOL, NULL, 1, &x,
                              MFT_CONTIGUOUS, batched ? 0 : MFT__DECIDE_UNBATCHED);
    e->fmt = e->dec.tag;
}

static void pm_params2(const pm_geom *g, mft_pool2d_params *p) {
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

/* Forward pool of nsp dims (1-D runs the 2-D ops). */
static mft_tensor *pm_pool(const char *fn, int nsp, bool is_max, const mft_tensor *x,
                           const pm_req *q, mft_tensor **indices) {
    pm_geom g;
    if (!pm_check_x(fn, x, nsp, "x") || !pm_check_params(fn, nsp, is_max, x, q, &g)) return NULL;
    pm_exec e;
    memset(&e, 0, sizeof e);
    e.fn = fn;
    e.nin = 1;
    e.in[0] = x;
    e.nout = is_max ? 2 : 1;
    e.odt[0] = x->dtype;
    e.odt[1] = MFT_I64;
    pm_sizes(&e, x, nsp, &g, false);
    mft_pool2d_params p2;
    mft_pool3d_params p3;
    if (nsp == 3) {
        pm_params3(&g, &p3);
        e.params = &p3;
        e.op = is_max ? MFT__OP_MAX_POOL3D : MFT__OP_AVG_POOL3D;
    } else {
        pm_params2(&g, &p2);
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
    return pm_execute(&e, indices);
}

static mft_tensor *pm_pool_with_indices(const char *fn, int nsp, const mft_tensor *x,
                                        const pm_req *q, mft_tensor **indices) {
    if (indices) *indices = NULL;
    if (!indices) {
        if (!x) mft__null_arg(fn, "x");
        else mft__set_error(MFT_ERR_NULL, "%s: argument 'indices' is NULL", fn);
        return NULL;
    }
    return pm_pool(fn, nsp, true, x, q, indices);
}

/* Backward of avg pooling of nsp dims. */
static mft_tensor *pm_avg_backward(const char *fn, int nsp, const mft_tensor *grad_out,
                                   const mft_tensor *x, const pm_req *q) {
    pm_geom g;
    if (!grad_out) {
        mft__null_arg(fn, "grad_out");
        return NULL;
    }
    if (!pm_check_x(fn, x, nsp, "x") || !pm_check_params(fn, nsp, false, x, q, &g)) return NULL;
    pm_exec e;
    memset(&e, 0, sizeof e);
    pm_sizes(&e, x, nsp, &g, false);
    if (!pm_check_like(fn, "grad_out", grad_out, x, x->dtype, e.psz)) return NULL;
    pm_sizes(&e, x, nsp, &g, true);
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
        pm_params2(&g, &p2);
        e.params = &p2;
        e.op = MFT__OP_AVG_POOL2D_BACKWARD;
    }
    return pm_execute(&e, NULL);
}

/* grad_out's N and C match x's, and its spatial sizes are in [1, MAX]. */
static bool pm_check_grad_sizes(const char *fn, int nsp, const mft_tensor *grad_out,
                                const mft_tensor *x, pm_geom *g) {
    char b1[MFT__DIMS_BUF], b2[MFT__DIMS_BUF];
    if (!pm_check_like(fn, "grad_out", grad_out, x, x->dtype, NULL)) return false;
    const int batched = x->ndim == nsp + 2;
    bool ok = true;
    for (int d = 0; d <= batched; d++) ok = ok && grad_out->sizes[d] == x->sizes[d];
    for (int d = batched + 1; d < x->ndim; d++)
        ok = ok && grad_out->sizes[d] >= 1 && grad_out->sizes[d] <= PM_MAX_PARAM;
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

/* Backward of any max pool (indices from the forward). */
static mft_tensor *pm_max_backward(const char *fn, int nsp, const mft_tensor *grad_out,
                                   const mft_tensor *x, const mft_tensor *indices,
                                   const mft_pool2d_params *windows) {
    pm_geom g;
    if (!grad_out) {
        mft__null_arg(fn, "grad_out");
        return NULL;
    }
    if (!pm_check_x(fn, x, nsp, "x") || !pm_check_grad_sizes(fn, nsp, grad_out, x, &g) ||
        !pm_check_like(fn, "indices", indices, x, MFT_I64, grad_out->sizes))
        return NULL;
    pm_exec e;
    memset(&e, 0, sizeof e);
    pm_sizes(&e, x, nsp, &g, true);
    e.fn = fn;
    e.op = nsp == 3 ? MFT__OP_MAX_POOL3D_BACKWARD : MFT__OP_MAX_POOL2D_BACKWARD;
    e.nin = 2;
    e.in[0] = grad_out;
    e.in[1] = indices;
    e.nout = 1;
    e.odt[0] = x->dtype;
    e.params = windows;
    return pm_execute(&e, NULL);
}

/* The window arithmetic of an adaptive pool (o * in, (o + 1) * in, and
 * i * out in pm_win / pm_inv) must not overflow: in * (out + 1) stays below
 * INT64_MAX / 4 per dim. */
static bool pm_adaptive_fits(const char *fn, int nsp, const mft_tensor *x, const int64_t *in,
                             const int64_t *out) {
    for (int i = 0; i < nsp; i++)
        if (in[i] > INT64_MAX / 4 / (out[i] + 1)) {
            char b1[MFT__DIMS_BUF], b2[MFT__DIMS_BUF];
            mft__set_error(MFT_ERR_OVERFLOW, "%s: input sizes %s with output size %s overflow the "
                           "window arithmetic", fn, mft__fmt_dims(b1, sizeof b1, x->ndim, x->sizes),
                           mft__fmt_dims(b2, sizeof b2, nsp, out));
            return false;
        }
    return true;
}

/* Adaptive forward of nsp (2 or 3) spatial dims to out[0..nsp). */
static mft_tensor *pm_adaptive(const char *fn, int nsp, bool is_max, const mft_tensor *x,
                               const int64_t *out, mft_tensor **indices) {
    char b1[MFT__DIMS_BUF];
    if (!pm_check_x(fn, x, nsp, "x")) return NULL;
    if (!out) {
        mft__set_error(MFT_ERR_NULL, "%s: argument 'out' is NULL", fn);
        return NULL;
    }
    for (int i = 0; i < nsp; i++)
        if (out[i] < 1 || out[i] > PM_MAX_PARAM) {
            mft__set_error(MFT_ERR_INVALID, "%s: output size %s should be in [1, %lld]", fn,
                           mft__fmt_dims(b1, sizeof b1, nsp, out), (long long)PM_MAX_PARAM);
            return NULL;
        }
    const int batched = x->ndim == nsp + 2;
    if (!pm_adaptive_fits(fn, nsp, x, x->sizes + batched + 1, out)) return NULL;
    pm_geom g;
    memset(&g, 0, sizeof g);
    g.kind = PM_ADAPT;
    g.N = batched ? x->sizes[0] : 1;
    g.C = x->sizes[batched];
    for (int e = 0; e < 3; e++) g.in[e] = g.out[e] = 1;
    mft_adaptive_pool_params p;
    memset(&p, 0, sizeof p);
    for (int i = 0; i < nsp; i++) {
        g.in[3 - nsp + i] = x->sizes[batched + 1 + i];
        g.out[3 - nsp + i] = p.out[i] = out[i];
    }
    pm_exec e;
    memset(&e, 0, sizeof e);
    pm_sizes(&e, x, nsp, &g, false);
    e.fn = fn;
    if (nsp == 3) e.op = is_max ? MFT__OP_ADAPTIVE_MAX_POOL3D : MFT__OP_ADAPTIVE_AVG_POOL3D;
    else e.op = is_max ? MFT__OP_ADAPTIVE_MAX_POOL2D : MFT__OP_ADAPTIVE_AVG_POOL2D;
    e.nin = 1;
    e.in[0] = x;
    e.nout = is_max ? 2 : 1;
    e.odt[0] = x->dtype;
    e.odt[1] = MFT_I64;
    e.params = &p;
    pm_ag_params ap;
    if (mft__ag_wants(1, &x)) {
        static const char *const names[2][2] = {{"adaptive_avg_pool2d", "adaptive_avg_pool3d"},
                                                {"adaptive_max_pool2d", "adaptive_max_pool3d"}};
        memset(&ap, 0, sizeof ap);
        ap.kind = is_max ? PM_AG_ADAPT_MAX : PM_AG_ADAPT_AVG;
        ap.nsp = nsp;
        e.rec = true;
        e.ag_name = names[is_max][nsp == 3];
        e.ag_params = &ap;
    }
    return pm_execute(&e, indices);
}

static mft_tensor *pm_adaptive_with_indices(const char *fn, int nsp, const mft_tensor *x,
                                            const int64_t *out, mft_tensor **indices) {
    if (indices) *indices = NULL;
    if (!indices) {
        if (!x) mft__null_arg(fn, "x");
        else mft__set_error(MFT_ERR_NULL, "%s: argument 'indices' is NULL", fn);
        return NULL;
    }
    return pm_adaptive(fn, nsp, true, x, out, indices);
}

/* Backward of adaptive avg pooling of nsp (2 or 3) dims; the output size is
 * grad_out's. */
static mft_tensor *pm_adaptive_avg_backward(const char *fn, int nsp, const mft_tensor *grad_out,
                                            const mft_tensor *x) {
    pm_geom g;
    if (!grad_out) {
        mft__null_arg(fn, "grad_out");
        return NULL;
    }
    if (!pm_check_x(fn, x, nsp, "x") || !pm_check_grad_sizes(fn, nsp, grad_out, x, &g) ||
        !pm_adaptive_fits(fn, nsp, x, g.in + 3 - nsp, g.out + 3 - nsp))
        return NULL;
    g.kind = PM_ADAPT;
    mft_adaptive_pool_params p;
    memset(&p, 0, sizeof p);
    for (int i = 0; i < nsp; i++) p.out[i] = g.out[3 - nsp + i];
    pm_exec e;
    memset(&e, 0, sizeof e);
    pm_sizes(&e, x, nsp, &g, true);
    e.fn = fn;
    e.op = nsp == 3 ? MFT__OP_ADAPTIVE_AVG_POOL3D_BACKWARD : MFT__OP_ADAPTIVE_AVG_POOL2D_BACKWARD;
    e.nin = 1;
    e.in[0] = grad_out;
    e.nout = 1;
    e.odt[0] = x->dtype;
    e.params = &p;
    return pm_execute(&e, NULL);
}

/* ---------------------------------------------------------------- entry points */
mft_tensor *mft_max_pool2d_backward(const mft_tensor *grad_out, const mft_tensor *x,
                                    const mft_tensor *indices) {
    return pm_max_backward("mft_max_pool2d_backward", 2, grad_out, x, indices, NULL);
}

mft_tensor *mft_max_pool2d_backward_windows(const mft_tensor *grad_out, const mft_tensor *x,
                                            const mft_tensor *indices, const int64_t kernel[2],
                                            const int64_t stride[2], const int64_t padding[2],
                                            const int64_t dilation[2], bool ceil_mode) {
    static const char fn[] = "mft_max_pool2d_backward_windows";
    const pm_req q = {kernel, stride, padding, dilation, ceil_mode, false, 0};
    pm_geom g;
    if (!grad_out) {
        mft__null_arg(fn, "grad_out");
        return NULL;
    }
    if (!pm_check_x(fn, x, 2, "x") || !pm_check_params(fn, 2, true, x, &q, &g)) return NULL;
    pm_exec e;
    memset(&e, 0, sizeof e);
    pm_sizes(&e, x, 2, &g, false);
    if (!pm_check_like(fn, "grad_out", grad_out, x, x->dtype, e.psz)) return NULL;
    mft_pool2d_params p2;
    pm_params2(&g, &p2);
    return pm_max_backward(fn, 2, grad_out, x, indices, &p2);
}

mft_tensor *mft_avg_pool2d_backward(const mft_tensor *grad_out, const mft_tensor *x,
                                    const int64_t kernel[2], const int64_t stride[2],
                                    const int64_t padding[2], bool ceil_mode,
                                    bool count_include_pad, int64_t divisor_override) {
    pm_req q = {kernel, stride, padding, NULL, ceil_mode, count_include_pad, divisor_override};
    return pm_avg_backward("mft_avg_pool2d_backward", 2, grad_out, x, &q);
}

mft_tensor *mft_max_pool1d(const mft_tensor *x, const int64_t kernel[1], const int64_t stride[1],
                           const int64_t padding[1], const int64_t dilation[1], bool ceil_mode) {
    pm_req q = {kernel, stride, padding, dilation, ceil_mode, false, 0};
    return pm_pool("mft_max_pool1d", 1, true, x, &q, NULL);
}

mft_tensor *mft_max_pool1d_with_indices(const mft_tensor *x, const int64_t kernel[1],
                                        const int64_t stride[1], const int64_t padding[1],
                                        const int64_t dilation[1], bool ceil_mode,
                                        mft_tensor **indices) {
    pm_req q = {kernel, stride, padding, dilation, ceil_mode, false, 0};
    return pm_pool_with_indices("mft_max_pool1d_with_indices", 1, x, &q, indices);
}

mft_tensor *mft_max_pool1d_backward(const mft_tensor *grad_out, const mft_tensor *x,
                                    const mft_tensor *indices) {
    return pm_max_backward("mft_max_pool1d_backward", 1, grad_out, x, indices, NULL);
}

mft_tensor *mft_avg_pool1d(const mft_tensor *x, const int64_t kernel[1], const int64_t stride[1],
                           const int64_t padding[1], bool ceil_mode, bool count_include_pad) {
    pm_req q = {kernel, stride, padding, NULL, ceil_mode, count_include_pad, 0};
    return pm_pool("mft_avg_pool1d", 1, false, x, &q, NULL);
}

mft_tensor *mft_avg_pool1d_backward(const mft_tensor *grad_out, const mft_tensor *x,
                                    const int64_t kernel[1], const int64_t stride[1],
                                    const int64_t padding[1], bool ceil_mode,
                                    bool count_include_pad) {
    pm_req q = {kernel, stride, padding, NULL, ceil_mode, count_include_pad, 0};
    return pm_avg_backward("mft_avg_pool1d_backward", 1, grad_out, x, &q);
}

mft_tensor *mft_max_pool3d(const mft_tensor *x, const int64_t kernel[3], const int64_t stride[3],
                           const int64_t padding[3], const int64_t dilation[3], bool ceil_mode) {
    pm_req q = {kernel, stride, padding, dilation, ceil_mode, false, 0};
    return pm_pool("mft_max_pool3d", 3, true, x, &q, NULL);
}

mft_tensor *mft_max_pool3d_with_indices(const mft_tensor *x, const int64_t kernel[3],
                                        const int64_t stride[3], const int64_t padding[3],
                                        const int64_t dilation[3], bool ceil_mode,
                                        mft_tensor **indices) {
    pm_req q = {kernel, stride, padding, dilation, ceil_mode, false, 0};
    return pm_pool_with_indices("mft_max_pool3d_with_indices", 3, x, &q, indices);
}

mft_tensor *mft_max_pool3d_backward(const mft_tensor *grad_out, const mft_tensor *x,
                                    const mft_tensor *indices) {
    return pm_max_backward("mft_max_pool3d_backward", 3, grad_out, x, indices, NULL);
}

mft_tensor *mft_avg_pool3d(const mft_tensor *x, const int64_t kernel[3], const int64_t stride[3],
                           const int64_t padding[3], bool ceil_mode, bool count_include_pad,
                           int64_t divisor_override) {
    pm_req q = {kernel, stride, padding, NULL, ceil_mode, count_include_pad, divisor_override};
    return pm_pool("mft_avg_pool3d", 3, false, x, &q, NULL);
}

mft_tensor *mft_avg_pool3d_backward(const mft_tensor *grad_out, const mft_tensor *x,
                                    const int64_t kernel[3], const int64_t stride[3],
                                    const int64_t padding[3], bool ceil_mode,
                                    bool count_include_pad, int64_t divisor_override) {
    pm_req q = {kernel, stride, padding, NULL, ceil_mode, count_include_pad, divisor_override};
    return pm_avg_backward("mft_avg_pool3d_backward", 3, grad_out, x, &q);
}

mft_tensor *mft_adaptive_avg_pool2d(const mft_tensor *x, const int64_t out[2]) {
    return pm_adaptive("mft_adaptive_avg_pool2d", 2, false, x, out, NULL);
}

mft_tensor *mft_adaptive_max_pool2d(const mft_tensor *x, const int64_t out[2]) {
    return pm_adaptive("mft_adaptive_max_pool2d", 2, true, x, out, NULL);
}

mft_tensor *mft_adaptive_max_pool2d_with_indices(const mft_tensor *x, const int64_t out[2],
                                                 mft_tensor **indices) {
    return pm_adaptive_with_indices("mft_adaptive_max_pool2d_with_indices", 2, x, out, indices);
}

mft_tensor *mft_adaptive_max_pool2d_backward(const mft_tensor *grad_out, const mft_tensor *x,
                                             const mft_tensor *indices) {
    return pm_max_backward("mft_adaptive_max_pool2d_backward", 2, grad_out, x, indices, NULL);
}

mft_tensor *mft_adaptive_avg_pool2d_backward(const mft_tensor *grad_out, const mft_tensor *x) {
    return pm_adaptive_avg_backward("mft_adaptive_avg_pool2d_backward", 2, grad_out, x);
}

mft_tensor *mft_adaptive_avg_pool3d(const mft_tensor *x, const int64_t out[3]) {
    return pm_adaptive("mft_adaptive_avg_pool3d", 3, false, x, out, NULL);
}

mft_tensor *mft_adaptive_max_pool3d(const mft_tensor *x, const int64_t out[3]) {
    return pm_adaptive("mft_adaptive_max_pool3d", 3, true, x, out, NULL);
}

mft_tensor *mft_adaptive_max_pool3d_with_indices(const mft_tensor *x, const int64_t out[3],
                                                 mft_tensor **indices) {
    return pm_adaptive_with_indices("mft_adaptive_max_pool3d_with_indices", 3, x, out, indices);
}

mft_tensor *mft_adaptive_max_pool3d_backward(const mft_tensor *grad_out, const mft_tensor *x,
                                             const mft_tensor *indices) {
    return pm_max_backward("mft_adaptive_max_pool3d_backward", 3, grad_out, x, indices, NULL);
}

mft_tensor *mft_adaptive_avg_pool3d_backward(const mft_tensor *grad_out, const mft_tensor *x) {
    return pm_adaptive_avg_backward("mft_adaptive_avg_pool3d_backward", 3, grad_out, x);
}

/* ---------------------------------------------------------------- reference kernels
 * Inputs and outputs of rank 4 (N,C,H,W) or 5 (N,C,D,H,W), any strides,
 * F32 or F64 (values computed in double). */
static inline double pm_ld(const mft_tensor *t, int64_t off) {
    const char *b = mft__tensor_ptr(t);
    return t->dtype == MFT_F32 ? (double)((const float *)(const void *)b)[off]
                               : ((const double *)(const void *)b)[off];
}
static inline void pm_st(const mft_tensor *t, int64_t off, double v) {
    char *b = mft__tensor_ptr(t);
    if (t->dtype == MFT_F32) ((float *)(void *)b)[off] = (float)v;
    else ((double *)(void *)b)[off] = v;
}
/* Element strides (N, C, D, H, W); D's is 0 for rank 4. */
static void pm_strides5(const mft_tensor *t, int64_t st[5]) {
    if (t->ndim == 5) {
        memcpy(st, t->strides, 5 * sizeof *st);
    } else {
        st[0] = t->strides[0];
        st[1] = t->strides[1];
        st[2] = 0;
        st[3] = t->strides[2];
        st[4] = t->strides[3];
    }
}
static inline int64_t pm_off(const int64_t st[5], int64_t n, int64_t c, int64_t d, int64_t h,
                             int64_t w) {
    return n * st[0] + c * st[1] + d * st[2] + h * st[3] + w * st[4];
}

/* Forward: x (N,C,[D,]H,W) -> y (N,C,[OD,]OH,OW) (+ I64 indices for max). */
static void pm_fwd_ref(const pm_geom *g, const mft_kernel_args *a) {
    const mft_tensor *x = a->inputs[0], *y = a->outputs[0];
    const mft_tensor *yi = a->noutputs > 1 ? a->outputs[1] : NULL;
    const bool is_max = yi != NULL;
    int64_t xs[5], ys[5], is[5] = {0};
    pm_strides5(x, xs);
    pm_strides5(y, ys);
    if (yi) pm_strides5(yi, is);
    int64_t *id = yi ? (int64_t *)(void *)mft__tensor_ptr(yi) : NULL;
    const int64_t H = g->in[1], W = g->in[2];
    for (int64_t n = 0; n < g->N; n++)
        for (int64_t c = 0; c < g->C; c++)
            for (int64_t od = 0; od < g->out[0]; od++)
                for (int64_t oh = 0; oh < g->out[1]; oh++)
                    for (int64_t ow = 0; ow < g->out[2]; ow++) {
                        int64_t i0[3], i1[3], ext[3], o[3] = {od, oh, ow};
                        for (int e = 0; e < 3; e++) pm_win(g, e, o[e], &i0[e], &i1[e], &ext[e]);
                        if (is_max) {
                            double m = -INFINITY;
                            int64_t mi = (i0[0] * H + i0[1]) * W + i0[2];
                            for (int64_t d = i0[0]; d < i1[0]; d += g->d[0])
                                for (int64_t h = i0[1]; h < i1[1]; h += g->d[1])
                                    for (int64_t w = i0[2]; w < i1[2]; w += g->d[2]) {
                                        double v = pm_ld(x, pm_off(xs, n, c, d, h, w));
                                        if (v > m || v != v) {
                                            m = v;
                                            mi = (d * H + h) * W + w;
                                        }
                                    }
                            pm_st(y, pm_off(ys, n, c, od, oh, ow), m);
                            id[pm_off(is, n, c, od, oh, ow)] = mi;
                        } else {
                            double s = 0;
                            int64_t cnt[3];
                            for (int e = 0; e < 3; e++) cnt[e] = i1[e] - i0[e];
                            for (int64_t d = i0[0]; d < i1[0]; d++)
                                for (int64_t h = i0[1]; h < i1[1]; h++)
                                    for (int64_t w = i0[2]; w < i1[2]; w++)
                                        s += pm_ld(x, pm_off(xs, n, c, d, h, w));
                            int64_t div = pm_divisor(g, cnt, ext);
                            pm_st(y, pm_off(ys, n, c, od, oh, ow), div ? s / (double)div : 0.0);
                        }
                    }
}

/* Zeroes a rank 4/5 tensor through its strides. */
static void pm_zero_ref(const mft_tensor *t, const int64_t st[5], const pm_geom *g) {
    for (int64_t n = 0; n < g->N; n++)
        for (int64_t c = 0; c < g->C; c++)
            for (int64_t d = 0; d < g->in[0]; d++)
                for (int64_t h = 0; h < g->in[1]; h++)
                    for (int64_t w = 0; w < g->in[2]; w++) pm_st(t, pm_off(st, n, c, d, h, w), 0);
}

/* Max backward: grad_out, indices (N,C,[OD,]OH,OW) -> grad_x (N,C,[D,]H,W). */
static void pm_maxbwd_ref(const mft_kernel_args *a) {
    const mft_tensor *go = a->inputs[0], *ind = a->inputs[1], *gx = a->outputs[0];
    pm_geom g;
    pm_geom_init(&g, PM_MAX, gx, go);
    int64_t gs[5], is[5], xs[5];
    pm_strides5(go, gs);
    pm_strides5(ind, is);
    pm_strides5(gx, xs);
    pm_zero_ref(gx, xs, &g);
    const int64_t *id = (const int64_t *)(const void *)mft__tensor_ptr(ind);
    const int64_t D = g.in[0], H = g.in[1], W = g.in[2];
    for (int64_t n = 0; n < g.N; n++)
        for (int64_t c = 0; c < g.C; c++)
            for (int64_t od = 0; od < g.out[0]; od++)
                for (int64_t oh = 0; oh < g.out[1]; oh++)
                    for (int64_t ow = 0; ow < g.out[2]; ow++) {
                        int64_t i = id[pm_off(is, n, c, od, oh, ow)];
                        if (i < 0 || i >= D * H * W) continue;
                        int64_t off = pm_off(xs, n, c, i / (H * W), (i / W) % H, i % W);
                        pm_st(gx, off, pm_ld(gx, off) + pm_ld(go, pm_off(gs, n, c, od, oh, ow)));
                    }
}

/* Avg / adaptive avg backward: grad_out (N,C,[OD,]OH,OW) -> grad_x
 * (N,C,[D,]H,W), scattering grad_out / divisor over each window. */
static void pm_avgbwd_ref(const pm_geom *g, const mft_kernel_args *a) {
    const mft_tensor *go = a->inputs[0], *gx = a->outputs[0];
    int64_t gs[5], xs[5];
    pm_strides5(go, gs);
    pm_strides5(gx, xs);
    pm_zero_ref(gx, xs, g);
    for (int64_t n = 0; n < g->N; n++)
        for (int64_t c = 0; c < g->C; c++)
            for (int64_t od = 0; od < g->out[0]; od++)
                for (int64_t oh = 0; oh < g->out[1]; oh++)
                    for (int64_t ow = 0; ow < g->out[2]; ow++) {
                        int64_t i0[3], i1[3], ext[3], cnt[3], o[3] = {od, oh, ow};
                        for (int e = 0; e < 3; e++) {
                            pm_win(g, e, o[e], &i0[e], &i1[e], &ext[e]);
                            cnt[e] = i1[e] - i0[e];
                        }
                        int64_t div = pm_divisor(g, cnt, ext);
                        if (!div) continue;
                        double v = pm_ld(go, pm_off(gs, n, c, od, oh, ow)) / (double)div;
                        for (int64_t d = i0[0]; d < i1[0]; d++)
                            for (int64_t h = i0[1]; h < i1[1]; h++)
                                for (int64_t w = i0[2]; w < i1[2]; w++) {
                                    int64_t off = pm_off(xs, n, c, d, h, w);
                                    pm_st(gx, off, pm_ld(gx, off) + v);
                                }
                    }
}

/* Per-op reference entries (geometry from the params and the tensors). */
static void max_pool3d_ref(const mft_kernel_args *a) {
    pm_geom g;
    pm_geom_init(&g, PM_MAX, a->inputs[0], a->outputs[0]);
    pm_geom_p3(&g, a->params);
    pm_fwd_ref(&g, a);
}
static void avg_pool3d_ref(const mft_kernel_args *a) {
    pm_geom g;
    pm_geom_init(&g, PM_AVG, a->inputs[0], a->outputs[0]);
    pm_geom_p3(&g, a->params);
    pm_fwd_ref(&g, a);
}
/* Adaptive 2-D and 3-D (the output size is the output tensor's). */
static void adaptive_pool_ref(const mft_kernel_args *a) {
    pm_geom g;
    pm_geom_init(&g, PM_ADAPT, a->inputs[0], a->outputs[0]);
    pm_fwd_ref(&g, a);
}
static void avg_pool2d_backward_ref(const mft_kernel_args *a) {
    pm_geom g;
    pm_geom_init(&g, PM_AVG, a->outputs[0], a->inputs[0]);
    pm_geom_p2(&g, a->params);
    pm_avgbwd_ref(&g, a);
}
static void avg_pool3d_backward_ref(const mft_kernel_args *a) {
    pm_geom g;
    pm_geom_init(&g, PM_AVG, a->outputs[0], a->inputs[0]);
    pm_geom_p3(&g, a->params);
    pm_avgbwd_ref(&g, a);
}
static void adaptive_avg_pool_backward_ref(const mft_kernel_args *a) {
    pm_geom g;
    pm_geom_init(&g, PM_ADAPT, a->outputs[0], a->inputs[0]);
    pm_avgbwd_ref(&g, a);
}

mft_kernel_fn mft__pool_more_reference(mft__op_id op, mft_dtype dt) {
    if (dt != MFT_F32 && dt != MFT_F64) return NULL;
    switch (op) {
    case MFT__OP_MAX_POOL3D: return max_pool3d_ref;
    case MFT__OP_AVG_POOL3D: return avg_pool3d_ref;
    case MFT__OP_ADAPTIVE_AVG_POOL2D:
    case MFT__OP_ADAPTIVE_MAX_POOL2D:
    case MFT__OP_ADAPTIVE_AVG_POOL3D:
    case MFT__OP_ADAPTIVE_MAX_POOL3D: return adaptive_pool_ref;
    case MFT__OP_MAX_POOL2D_BACKWARD:
    case MFT__OP_MAX_POOL3D_BACKWARD: return pm_maxbwd_ref;
    case MFT__OP_AVG_POOL2D_BACKWARD: return avg_pool2d_backward_ref;
    case MFT__OP_AVG_POOL3D_BACKWARD: return avg_pool3d_backward_ref;
    case MFT__OP_ADAPTIVE_AVG_POOL2D_BACKWARD:
    case MFT__OP_ADAPTIVE_AVG_POOL3D_BACKWARD: return adaptive_avg_pool_backward_ref;
    default: return NULL;
    }
}

/* ---------------------------------------------------------------- fast F32 kernels */
typedef struct pm_job {
    pm_geom g;
    const float *x;  /* forward input, or grad_out */
    float *y;        /* forward output, or grad_x */
    int64_t *yi;     /* forward indices (max) */
    const int64_t *ind; /* backward indices (max) */
    int64_t cb;      /* channel blocks (NHWC max backward) */
} pm_job;

static pm_job pm_job_of(const pm_geom *g, const mft_kernel_args *a) {
    pm_job j;
    memset(&j, 0, sizeof j);
    j.g = *g;
    j.x = (const float *)(const void *)mft__tensor_ptr(a->inputs[0]);
    j.y = (float *)(void *)mft__tensor_ptr(a->outputs[0]);
    if (a->noutputs > 1) j.yi = (int64_t *)(void *)mft__tensor_ptr(a->outputs[1]);
    if (a->ninputs > 1) j.ind = (const int64_t *)(const void *)mft__tensor_ptr(a->inputs[1]);
    return j;
}

/* Work items per parallel chunk for about 32k elements of work each. */
static int64_t pm_grain(int64_t work_per_item) {
    int64_t g = 32768 / (work_per_item > 0 ? work_per_item : 1);
    return g > 0 ? g : 1;
}

/* Sum of n consecutive floats: runs of 64 or more with 32 partial sums
 * (independent vector accumulators), shorter ones in order. */
static inline float pm_sum_f32(const float *p, int64_t n) {
    if (n < 64) { /* short runs (window rows) */
        float t = 0;
        for (int64_t i = 0; i < n; i++) t += p[i];
        return t;
    }
    float acc[32];
    for (int k = 0; k < 32; k++) acc[k] = 0.0f;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 32; k++) acc[k] += p[i + k];
    float t = 0;
    for (; i < n; i++) t += p[i];
    for (int w = 16; w >= 1; w /= 2)
        for (int k = 0; k < w; k++) acc[k] += acc[k + w];
    return acc[0] + t;
}

/* NCHW forward: x (N,C,D,H,W) packed -> y (N,C,OD,OH,OW) packed; one output
 * row (n, c, od, oh) per work item. */
static void pm_fwd_nchw_range(void *ctx, int64_t begin, int64_t end) {
    const pm_job *j = ctx;
    const pm_geom *g = &j->g;
    const int64_t D = g->in[0], H = g->in[1], W = g->in[2];
    const int64_t OD = g->out[0], OH = g->out[1], OW = g->out[2];
    /* row r = ((plane * OD) + od) * OH + oh, advanced without divisions */
    int64_t oh = begin % OH, od = (begin / OH) % OD, plane = begin / OH / OD;
    for (int64_t r = begin; r < end; r++, oh = oh + 1 < OH ? oh + 1 : 0,
                 od = oh ? od : (od + 1 < OD ? od + 1 : 0), plane = (oh || od) ? plane : plane + 1) {
        const float *in = j->x + plane * D * H * W;
        float *out = j->y + r * OW;
        int64_t d0, d1, ed, h0, h1, eh;
        pm_win(g, 0, od, &d0, &d1, &ed);
        pm_win(g, 1, oh, &h0, &h1, &eh);
        /* average of windows narrower than the rows: the row's column sums
         * over its (d, h) window rows once (vectorised over W, rows in
         * order), then each output sums its columns (the sums grouped by
         * column, not in row order: equal up to rounding) */
        if (!j->yi && OW > 1 && W <= PM_CS_W) {
            float cs[PM_CS_W];
            for (int64_t iw = 0; iw < W; iw++) cs[iw] = 0.0f;
            for (int64_t id = d0; id < d1; id++)
                for (int64_t ih = h0; ih < h1; ih++) {
                    const float *restrict row = in + (id * H + ih) * W;
                    for (int64_t iw = 0; iw < W; iw++) cs[iw] += row[iw];
                }
            for (int64_t ow = 0; ow < OW; ow++) {
                int64_t w0, w1, ew;
                pm_win(g, 2, ow, &w0, &w1, &ew);
                float sum = 0.0f;
                for (int64_t iw = w0; iw < w1; iw++) sum += cs[iw];
                const int64_t cnt[3] = {d1 - d0, h1 - h0, w1 - w0}, ext[3] = {ed, eh, ew};
                const int64_t div = pm_divisor(g, cnt, ext);
                out[ow] = div && w1 > w0 ? sum / (float)div : 0.0f;
            }
            continue;
        }
        for (int64_t ow = 0; ow < OW; ow++) {
            int64_t w0, w1, ew;
            pm_win(g, 2, ow, &w0, &w1, &ew);
            if (j->yi) {
                float m = -INFINITY;
                int64_t mi = (d0 * H + h0) * W + w0;
                for (int64_t id = d0; id < d1; id += g->d[0])
                    for (int64_t ih = h0; ih < h1; ih += g->d[1]) {
                        const int64_t base = (id * H + ih) * W;
                        for (int64_t iw = w0; iw < w1; iw += g->d[2]) {
                            float v = in[base + iw];
                            if (v > m || v != v) {
                                m = v;
                                mi = base + iw;
                            }
                        }
                    }
                out[ow] = m;
                j->yi[r * OW + ow] = mi;
            } else {
                float s = 0;
                if (w1 > w0 && w0 == 0 && w1 == W) /* whole rows: one run per d */
                    for (int64_t id = d0; id < d1; id++)
                        s += h1 > h0 ? pm_sum_f32(in + (id * H + h0) * W, (h1 - h0) * W) : 0.0f;
                else if (w1 > w0)
                    for (int64_t id = d0; id < d1; id++)
                        for (int64_t ih = h0; ih < h1; ih++)
                            s += pm_sum_f32(in + (id * H + ih) * W + w0, w1 - w0);
                const int64_t cnt[3] = {d1 - d0, h1 - h0, w1 - w0}, ext[3] = {ed, eh, ew};
                int64_t div = pm_divisor(g, cnt, ext);
                out[ow] = div ? s / (float)div : 0.0f;
            }
        }
    }
}

/* NHWC forward: x (N,D,H,W,C) packed -> y (N,OD,OH,OW,C) packed; one output
 * row (n, od, oh) per work item, C-rows updated with unit-stride loops. */
static void pm_fwd_nhwc_range(void *ctx, int64_t begin, int64_t end) {
    const pm_job *j = ctx;
    const pm_geom *g = &j->g;
    const int64_t C = g->C, D = g->in[0], H = g->in[1], W = g->in[2];
    const int64_t OD = g->out[0], OH = g->out[1], OW = g->out[2];
    /* row r = ((n * OD) + od) * OH + oh, advanced without divisions */
    int64_t oh = begin % OH, od = (begin / OH) % OD, n = begin / OH / OD;
    for (int64_t r = begin; r < end; r++, oh = oh + 1 < OH ? oh + 1 : 0,
                 od = oh ? od : (od + 1 < OD ? od + 1 : 0), n = (oh || od) ? n : n + 1) {
        const float *in = j->x + n * D * H * W * C;
        int64_t d0, d1, ed, h0, h1, eh;
        pm_win(g, 0, od, &d0, &d1, &ed);
        pm_win(g, 1, oh, &h0, &h1, &eh);
        for (int64_t ow = 0; ow < OW; ow++) {
            float *out = j->y + (r * OW + ow) * C;
            int64_t w0, w1, ew;
            pm_win(g, 2, ow, &w0, &w1, &ew);
            if (j->yi) {
                int64_t *idx = j->yi + (r * OW + ow) * C;
                const int64_t first = (d0 * H + h0) * W + w0;
                int64_t cd = 0;
#if PM_HAVE_V8
                /* blocks of 32 channels in registers; positions as int32
                 * lanes blended with the float compare masks (plane < 2^31) */
                if ((double)(D + g->d[0] + 1) * (double)(H + g->d[1] + 1) *
                        (double)(W + g->d[2] + 1) <= (double)INT32_MAX)
                    for (; cd + 32 <= C; cd += 32) {
                        pm_v8 m[4];
                        pm_i8 ix[4];
                        for (int k = 0; k < 4; k++) {
                            m[k] = (pm_v8){0, 0, 0, 0, 0, 0, 0, 0} - INFINITY;
                            ix[k] = (pm_i8){0, 0, 0, 0, 0, 0, 0, 0} + (int32_t)first;
                        }
                        for (int64_t id = d0; id < d1; id += g->d[0])
                            for (int64_t ih = h0; ih < h1; ih += g->d[1])
                                for (int64_t iw = w0; iw < w1; iw += g->d[2]) {
                                    const int64_t pos = (id * H + ih) * W + iw;
                                    const float *row = in + pos * C + cd;
                                    const pm_i8 pv = (pm_i8){0, 0, 0, 0, 0, 0, 0, 0} + (int32_t)pos;
                                    for (int k = 0; k < 4; k++) {
                                        const pm_v8 v = pm_ld8(row + 8 * k);
                                        const pm_i8 tk = (v > m[k]) | (v != v);
                                        m[k] = (pm_v8)(((pm_i8)v & tk) | ((pm_i8)m[k] & ~tk));
                                        ix[k] = (pv & tk) | (ix[k] & ~tk);
                                    }
                                }
                        for (int k = 0; k < 4; k++) {
                            pm_st8(out + cd + 8 * k, m[k]);
                            for (int l = 0; l < 8; l++) idx[cd + 8 * k + l] = ix[k][l];
                        }
                    }
#endif
                for (int64_t c = cd; c < C; c++) {
                    out[c] = -INFINITY;
                    idx[c] = first;
                }
                for (int64_t id = d0; id < d1 && cd < C; id += g->d[0])
                    for (int64_t ih = h0; ih < h1; ih += g->d[1])
                        for (int64_t iw = w0; iw < w1; iw += g->d[2]) {
                            const int64_t pos = (id * H + ih) * W + iw;
                            const float *row = in + pos * C;
                            for (int64_t c = cd; c < C; c++) {
                                float v = row[c];
                                bool tk = v > out[c] || v != v;
                                out[c] = tk ? v : out[c];
                                idx[c] = tk ? pos : idx[c];
                            }
                        }
            } else {
                const int64_t cnt[3] = {d1 - d0, h1 - h0, w1 - w0}, ext[3] = {ed, eh, ew};
                const int64_t div = pm_divisor(g, cnt, ext);
                const float fd = div ? (float)div : 1.0f;
                for (int64_t c0 = 0; c0 < C; c0 += PM_VB) {
                    const int64_t nc = C - c0 < PM_VB ? C - c0 : PM_VB;
                    float acc[PM_VB];
#if PM_HAVE_V8
                    if (nc == PM_VB) {
                        pm_v8 va[PM_VB / 8];
                        for (int k = 0; k < PM_VB / 8; k++) va[k] = (pm_v8){0, 0, 0, 0, 0, 0, 0, 0};
                        for (int64_t id = d0; id < d1; id++)
                            for (int64_t ih = h0; ih < h1; ih++)
                                for (int64_t iw = w0; iw < w1; iw++) {
                                    const float *row = in + ((id * H + ih) * W + iw) * C + c0;
                                    for (int k = 0; k < PM_VB / 8; k++) va[k] += pm_ld8(row + 8 * k);
                                }
                        for (int k = 0; k < PM_VB / 8; k++) pm_st8(acc + 8 * k, va[k]);
                    } else
#endif
                    {
                        for (int c = 0; c < PM_VB; c++) acc[c] = 0.0f;
                        for (int64_t id = d0; id < d1; id++)
                            for (int64_t ih = h0; ih < h1; ih++)
                                for (int64_t iw = w0; iw < w1; iw++) {
                                    const float *row = in + ((id * H + ih) * W + iw) * C + c0;
                                    for (int64_t c = 0; c < nc; c++) acc[c] += row[c];
                                }
                    }
                    for (int64_t c = 0; c < nc; c++) out[c0 + c] = div ? acc[c] / fd : 0.0f;
                }
            }
        }
    }
}

/* NCHW adaptive avg forward to one output per plane (global pooling):
 * x (N,C,D,H,W) packed -> y (N,C,1,1,1); work item q = planes [4q, 4q+4),
 * summed side by side (4 read streams) with two 8-lane accumulators each;
 * a plane's sum does not depend on the grouping. */
static void pm_fwd_nchw_global(void *ctx, int64_t begin, int64_t end) {
    const pm_job *j = ctx;
    const pm_geom *g = &j->g;
    const int64_t P = g->in[0] * g->in[1] * g->in[2], NP = g->N * g->C;
    const int64_t cnt[3] = {g->in[0], g->in[1], g->in[2]};
    const int64_t div = pm_divisor(g, cnt, cnt);
    for (int64_t q = begin; q < end; q++) {
        const int64_t p0 = 4 * q, np = NP - p0 < 4 ? NP - p0 : 4;
        float sum[4];
        int64_t i = 0;
#if PM_HAVE_V8
        if (np == 4) {
            const float *x0 = j->x + p0 * P, *x1 = x0 + P, *x2 = x1 + P, *x3 = x2 + P;
            pm_v8 a0 = {0, 0, 0, 0, 0, 0, 0, 0}, b0 = a0, a1 = a0, b1 = a0, a2 = a0, b2 = a0,
                  a3 = a0, b3 = a0;
            for (; i + 16 <= P; i += 16) {
                a0 += pm_ld8(x0 + i);
                b0 += pm_ld8(x0 + i + 8);
                a1 += pm_ld8(x1 + i);
                b1 += pm_ld8(x1 + i + 8);
                a2 += pm_ld8(x2 + i);
                b2 += pm_ld8(x2 + i + 8);
                a3 += pm_ld8(x3 + i);
                b3 += pm_ld8(x3 + i + 8);
            }
            const pm_v8 v[4] = {a0 + b0, a1 + b1, a2 + b2, a3 + b3};
            for (int k = 0; k < 4; k++)
                sum[k] = ((v[k][0] + v[k][4]) + (v[k][1] + v[k][5])) +
                         ((v[k][2] + v[k][6]) + (v[k][3] + v[k][7]));
        } else
#endif
        {
            for (int64_t k = 0; k < np; k++) sum[k] = 0.0f;
        }
        for (int64_t k = 0; k < np; k++) {
            const float *x = j->x + (p0 + k) * P;
            float t = 0.0f;
            for (int64_t e = i; e < P; e++) t += x[e];
            const float s = sum[k] + t;
            j->y[p0 + k] = div ? s / (float)div : 0.0f;
        }
    }
}

static void pm_fwd_nchw(const pm_geom *g, const mft_kernel_args *a) {
    pm_job j = pm_job_of(g, a);
    if (g->kind != PM_MAX && a->noutputs < 2) j.yi = NULL;
    if (!j.yi && g->kind == PM_ADAPT && g->out[0] == 1 && g->out[1] == 1 && g->out[2] == 1) {
        const int64_t P = g->in[0] * g->in[1] * g->in[2];
        mft__parallel_for(0, (g->N * g->C + 3) / 4, pm_grain(4 * P), pm_fwd_nchw_global, &j);
        return;
    }
    const int64_t work = g->out[2] * (g->kind == PM_ADAPT ? (g->in[0] / g->out[0] + 1) *
                                                                (g->in[1] / g->out[1] + 1) *
                                                                (g->in[2] / g->out[2] + 1)
                                                          : g->k[0] * g->k[1] * g->k[2]);
    mft__parallel_for(0, g->N * g->C * g->out[0] * g->out[1], pm_grain(work), pm_fwd_nchw_range, &j);
}

static void pm_fwd_nhwc(const pm_geom *g, const mft_kernel_args *a) {
    pm_job j = pm_job_of(g, a);
    if (g->kind != PM_MAX && a->noutputs < 2) j.yi = NULL;
    const int64_t work = g->C * g->out[2] * (g->kind == PM_ADAPT ? (g->in[0] / g->out[0] + 1) *
                                                                       (g->in[1] / g->out[1] + 1) *
                                                                       (g->in[2] / g->out[2] + 1)
                                                                 : g->k[0] * g->k[1] * g->k[2]);
    mft__parallel_for(0, g->N * g->out[0] * g->out[1], pm_grain(work), pm_fwd_nhwc_range, &j);
}

/* NCHW max backward: grad_out, indices (N,C,OD,OH,OW) packed -> grad_x
 * (N,C,D,H,W) packed; one (n, c) plane per work item (zero, then scatter). */
static void pm_maxbwd_nchw_range(void *ctx, int64_t begin, int64_t end) {
    const pm_job *j = ctx;
    const int64_t P = j->g.in[0] * j->g.in[1] * j->g.in[2];
    const int64_t OP = j->g.out[0] * j->g.out[1] * j->g.out[2];
    for (int64_t pl = begin; pl < end; pl++) {
        float *gx = j->y + pl * P;
        const float *go = j->x + pl * OP;
        const int64_t *ind = j->ind + pl * OP;
        memset(gx, 0, (size_t)P * sizeof *gx);
        for (int64_t o = 0; o < OP; o++) {
            const int64_t i = ind[o];
            if ((uint64_t)i < (uint64_t)P) gx[i] += go[o];
        }
    }
}

/* NHWC max backward: grad_out, indices (N,OD,OH,OW,C) packed -> grad_x
 * (N,D,H,W,C) packed; one (n, block of PM_CBLOCK channels) per work item:
 * zero the block of the image, then walk the output pixels. */
static void pm_maxbwd_nhwc_range(void *ctx, int64_t begin, int64_t end) {
    const pm_job *j = ctx;
    const int64_t C = j->g.C;
    const int64_t P = j->g.in[0] * j->g.in[1] * j->g.in[2];
    const int64_t OP = j->g.out[0] * j->g.out[1] * j->g.out[2];
    for (int64_t it = begin; it < end; it++) {
        const int64_t n = it / j->cb, c0 = (it % j->cb) * PM_CBLOCK;
        const int64_t c1 = c0 + PM_CBLOCK < C ? c0 + PM_CBLOCK : C;
        float *gx = j->y + n * P * C;
        const float *go = j->x + n * OP * C;
        const int64_t *ind = j->ind + n * OP * C;
        if (c0 == 0 && c1 == C) {
            memset(gx, 0, (size_t)(P * C) * sizeof *gx);
        } else {
            for (int64_t p = 0; p < P; p++)
                for (int64_t c = c0; c < c1; c++) gx[p * C + c] = 0.0f;
        }
        for (int64_t o = 0; o < OP; o++) {
            const float *g = go + o * C;
            const int64_t *ii = ind + o * C;
            for (int64_t c = c0; c < c1; c++) {
                const int64_t i = ii[c];
                if ((uint64_t)i < (uint64_t)P) gx[i * C + c] += g[c];
            }
        }
    }
}

/* NHWC max backward when the forward's windows are known
 * (mft_max_pool2d_backward_windows; the tape passes them) and do not
 * overlap (stride >= dilation * (kernel - 1) + 1, the common 2x2 / stride
 * 2): each grad_x pixel p lies in at most one window o, so grad_x is written
 * once, (indices[o][c] == p) ? grad_out[o][c] : 0 for every channel c at
 * once, with no zeroing pass, no read-modify-write and no branch on the
 * indices (relu_max_pool2d's -1 come at random). 0.0f + the term gives the
 * scatter's sum bit for bit (0 + -0 is +0). An index outside its own window
 * matches nothing (the scatter would still add it). One work item: an
 * input row (n, ih). Vectors run over the channels, so it needs some
 * (C >= 16). Overlapping windows gather in pm_maxbwd_gather_range (an
 * element-wise loop like this one over up to four windows per pixel lost to
 * the scatter there: 0.61-0.70 ms against 0.43-0.49, 8x64x56x56, 1 thread).
 * Measured and kept out: NCHW planes, where an element-wise loop lost to the
 * scatter. */
typedef struct pm_dense_job {
    const pm_job *j;
    const mft_pool2d_params *p;
} pm_dense_job;

/* The window along one dim holding input position i (windows do not
 * overlap: only o = (i + pad) / s can), or -1. */
static inline int64_t pm_dense_owner(int64_t i, int64_t k, int64_t s, int64_t pad, int64_t d,
                                     int64_t out) {
    const int64_t t = i + pad; /* >= 0 */
    const int64_t o = t / s, r = t - o * s;
    return o < out && r % d == 0 && r / d < k ? o : -1;
}

static void pm_maxbwd_dense_range(void *ctx, int64_t begin, int64_t end) {
    const pm_dense_job *dj = ctx;
    const pm_job *j = dj->j;
    const mft_pool2d_params *p = dj->p;
    const int64_t C = j->g.C, H = j->g.in[1], W = j->g.in[2], OH = j->g.out[1],
                  OW = j->g.out[2];
    for (int64_t r = begin; r < end; r++) {
        const int64_t n = r / H, ih = r % H;
        float *gx = j->y + r * W * C;
        const int64_t oh = pm_dense_owner(ih, p->kernel[0], p->stride[0], p->padding[0],
                                          p->dilation[0], OH);
        for (int64_t iw = 0; iw < W; iw++, gx += C) {
            const int64_t ow = oh < 0 ? -1
                                      : pm_dense_owner(iw, p->kernel[1], p->stride[1],
                                                       p->padding[1], p->dilation[1], OW);
            if (ow < 0) {
                memset(gx, 0, (size_t)C * sizeof *gx);
                continue;
            }
            const int64_t o = (n * OH + oh) * OW + ow, pos = ih * W + iw;
            const float *g = j->x + o * C;
            const int64_t *ii = j->ind + o * C;
            for (int64_t c = 0; c < C; c++) gx[c] = 0.0f + (ii[c] == pos ? g[c] : 0.0f);
        }
    }
}

#if PM_HAVE_Z16
/* NHWC max backward over known, overlapping 2-D windows where the gather
 * (below) does not apply (an empty window, rows wider than PM_GW_W, more
 * than PM_GW windows per position along a dim): the scatter's work item
 * (n, block of PM_CBLOCK channels) and order (the output pixels in order,
 * onto zeros; for whole pixels each grad_x row is zeroed just before the
 * first window reaching it), 16 channels at once:
 * the indices, saturated to int32, are compared with each position of the
 * output's window, and grad_out is added to that grad_x pixel in the lanes
 * that matched (+0 in the other lanes of whole vectors: grad_x is never -0;
 * a masked load, add and store for a tail). Each grad_x element gets the
 * same terms in the same order as in the scatter, so the sums are equal bit
 * for bit. An empty window's candidate is the forward's index for it (its
 * start); any other index outside its own window matches nothing
 * (documented for mft_max_pool2d_backward_windows). Streams are prefetched
 * PM_WIN_AHEAD outputs ahead. */
static void pm_maxbwd_win_range(void *ctx, int64_t begin, int64_t end) {
    const pm_dense_job *dj = ctx;
    const pm_job *j = dj->j;
    const mft_pool2d_params *p = dj->p;
    const int64_t C = j->g.C, H = j->g.in[1], W = j->g.in[2], OH = j->g.out[1],
                  OW = j->g.out[2];
    for (int64_t it = begin; it < end; it++) {
        const int64_t n = it / j->cb, c0 = (it % j->cb) * PM_CBLOCK;
        const int64_t c1 = c0 + PM_CBLOCK < C ? c0 + PM_CBLOCK : C;
        float *gx = j->y + n * H * W * C;
        /* whole pixels: rows are zeroed just before the first window that
         * reaches them (then still in cache for the sums); else up front */
        const bool lazy = c0 == 0 && c1 == C;
        int64_t zeroed = 0; /* rows [0, zeroed) are zero (lazy) */
        if (!lazy)
            for (int64_t q = 0; q < H * W; q++)
                memset(gx + q * C + c0, 0, (size_t)(c1 - c0) * sizeof *gx);
        for (int64_t oh = 0; oh < OH; oh++) {
            int64_t h0 = oh * p->stride[0] - p->padding[0];
            const int64_t h1 = h0 + (p->kernel[0] - 1) * p->dilation[0] + 1;
            while (h0 < 0) h0 += p->dilation[0];
            if (lazy) {
                const int64_t upto = h1 < H ? h1 : H;
                if (upto > zeroed) {
                    memset(gx + zeroed * W * C, 0, (size_t)((upto - zeroed) * W * C) * sizeof *gx);
                    zeroed = upto;
                }
            }
            for (int64_t ow = 0; ow < OW; ow++) {
                int64_t w0 = ow * p->stride[1] - p->padding[1];
                const int64_t w1 = w0 + (p->kernel[1] - 1) * p->dilation[1] + 1;
                while (w0 < 0) w0 += p->dilation[1];
                int32_t pos[PM_WIN_MAX];
                int np = 0;
                for (int64_t ih = h0; ih < h1 && ih < H; ih += p->dilation[0])
                    for (int64_t iw = w0; iw < w1 && iw < W; iw += p->dilation[1])
                        pos[np++] = (int32_t)(ih * W + iw);
                /* an empty window: the forward's index is its start h0*W + w0
                 * (-inf there), which the scatter adds to when in the plane */
                if (np == 0 && h0 * W + w0 < H * W) {
                    pos[np++] = (int32_t)(h0 * W + w0);
                    const int64_t row = (h0 * W + w0) / W; /* (w0 may pass W) */
                    if (lazy && row >= zeroed) {
                        memset(gx + zeroed * W * C, 0,
                               (size_t)((row + 1 - zeroed) * W * C) * sizeof *gx);
                        zeroed = row + 1;
                    }
                }
                const int64_t o = (n * OH + oh) * OW + ow;
                /* the streams of a later output (the prefetcher lags here) */
                const int64_t of = (o + PM_WIN_AHEAD) * C;
                for (int64_t c = c0; c < c1; c += 16) {
                    __builtin_prefetch(j->ind + of + c);
                    __builtin_prefetch(j->ind + of + c + 8);
                    __builtin_prefetch(j->x + of + c);
                    const __mmask16 km = pm_mask16(c1 - c);
                    const bool whole = km == 0xFFFF;
                    const __m512i ix = pm_idx16(j->ind + o * C + c, km);
                    const __m512 g = whole ? _mm512_loadu_ps(j->x + o * C + c)
                                           : _mm512_maskz_loadu_ps(km, j->x + o * C + c);
                    if (whole) /* + 0 where not matched: grad_x is never -0 */
                        for (int k = 0; k < np; k++) {
                            const __mmask16 m =
                                _mm512_cmpeq_epi32_mask(ix, _mm512_set1_epi32(pos[k]));
                            float *d = gx + (int64_t)pos[k] * C + c;
                            _mm512_storeu_ps(d, _mm512_add_ps(_mm512_loadu_ps(d),
                                                              _mm512_maskz_mov_ps(m, g)));
                        }
                    else
                        for (int k = 0; k < np; k++) {
                            const __mmask16 m =
                                _mm512_mask_cmpeq_epi32_mask(km, ix, _mm512_set1_epi32(pos[k]));
                            float *d = gx + (int64_t)pos[k] * C + c;
                            _mm512_mask_storeu_ps(d, m,
                                                  _mm512_add_ps(_mm512_maskz_loadu_ps(m, d), g));
                        }
                }
            }
        }
        if (lazy && zeroed < H)
            memset(gx + zeroed * W * C, 0, (size_t)((H - zeroed) * W * C) * sizeof *gx);
    }
}
#endif

#if PM_HAVE_Z16
/* Most windows along one dim that hold one input position (and most output
 * rows one input row reads) in the gathered max backward, and its widest
 * input row (its per-column window lists are on the stack). */
#define PM_GW 8
#define PM_GW_W 512

/* The outputs o along one dim whose window (start o*s - pad, k taps
 * dilation d apart) holds input position i, ascending: written to l (at
 * most PM_GW; the caller checked (k-1)*d / s + 1 <= PM_GW); returns how
 * many. */
static int pm_gather_list(int64_t i, int64_t k, int64_t s, int64_t pad, int64_t d, int64_t out,
                          int32_t *l) {
    const int64_t t = i + pad; /* = o*s + tap*d for a window o holding i */
    int64_t lo = t - (k - 1) * d;
    lo = lo <= 0 ? 0 : (lo + s - 1) / s;
    int64_t hi = t / s;
    if (hi >= out) hi = out - 1;
    int nl = 0;
    for (int64_t o = lo; o <= hi; o++)
        if ((t - o * s) % d == 0) l[nl++] = (int32_t)o;
    return nl;
}

/* NHWC max backward over known, overlapping, non-empty 2-D windows,
 * gathered: each grad_x vector (16 channels of pixel (ih, iw)) starts at
 * +0 and adds, in output order (oh, then ow), grad_out of each window
 * holding the pixel in the lanes whose index equals the pixel's position,
 * then is stored once: no zeroing pass and no read-modify-write of grad_x.
 * These are the scatter's terms in the scatter's order on the same +0
 * start, so the sums are equal bit for bit. An index outside its own window
 * matches nothing (documented for mft_max_pool2d_backward_windows). The
 * indices of the output rows in use are kept converted to int32 (saturated)
 * in a ring of as many rows as one input row reads. One work item: an
 * input row (n, ih). */
static void pm_maxbwd_gather_range(void *ctx, int64_t begin, int64_t end) {
    const pm_dense_job *dj = ctx;
    const pm_job *j = dj->j;
    const mft_pool2d_params *p = dj->p;
    const int64_t C = j->g.C, H = j->g.in[1], W = j->g.in[2], OH = j->g.out[1],
                  OW = j->g.out[2];
    const int64_t rowlen = OW * C;
    /* output rows one input row reads: consecutive, at most nring of them */
    const int nring = (int)((p->kernel[0] - 1) * p->dilation[0] / p->stride[0] + 1);
    int32_t *ring = mft__alloc((size_t)(nring * rowlen) * sizeof(int32_t), 64);
    int64_t ring_row[PM_GW]; /* the output row (n * OH + oh) each slot holds */
    int32_t wl[PM_GW_W][PM_GW];
    int nwl[PM_GW_W];
    if (!ring) { /* out of memory: the same sums element by element */
        for (int64_t r = begin; r < end; r++) {
            const int64_t n = r / H, ih = r % H;
            int32_t hl[PM_GW], wl1[PM_GW];
            const int nh = pm_gather_list(ih, p->kernel[0], p->stride[0], p->padding[0],
                                          p->dilation[0], OH, hl);
            for (int64_t iw = 0; iw < W; iw++) {
                const int nw = pm_gather_list(iw, p->kernel[1], p->stride[1], p->padding[1],
                                              p->dilation[1], OW, wl1);
                float *gx = j->y + (r * W + iw) * C;
                for (int64_t c = 0; c < C; c++) gx[c] = 0.0f;
                for (int a = 0; a < nh; a++)
                    for (int b = 0; b < nw; b++) {
                        const int64_t o = (n * OH + hl[a]) * OW + wl1[b];
                        for (int64_t c = 0; c < C; c++)
                            if (j->ind[o * C + c] == ih * W + iw) gx[c] += j->x[o * C + c];
                    }
            }
        }
        return;
    }
    for (int k = 0; k < nring; k++) ring_row[k] = -1;
    for (int64_t iw = 0; iw < W; iw++)
        nwl[iw] = pm_gather_list(iw, p->kernel[1], p->stride[1], p->padding[1], p->dilation[1],
                                 OW, wl[iw]);
    const __mmask16 kt = pm_mask16(C % 16 ? C % 16 : 16); /* the last vector's lanes */
    for (int64_t r = begin; r < end; r++) {
        const int64_t n = r / H, ih = r % H;
        int32_t hl[PM_GW];
        const int nh = pm_gather_list(ih, p->kernel[0], p->stride[0], p->padding[0],
                                      p->dilation[0], OH, hl);
        const int32_t *ixr[PM_GW]; /* the int32 indices of each listed output row */
        const float *gor[PM_GW];   /* its grad_out */
        for (int a = 0; a < nh; a++) {
            const int64_t orow = n * OH + hl[a];
            const int slot = (int)(orow % nring);
            int32_t *dst = ring + slot * rowlen;
            if (ring_row[slot] != orow) {
                const int64_t *src = j->ind + orow * rowlen;
                for (int64_t e = 0; e < rowlen; e += 16) {
                    const __mmask16 km = pm_mask16(rowlen - e);
                    _mm512_mask_storeu_epi32(dst + e, km, pm_idx16(src + e, km));
                }
                ring_row[slot] = orow;
            }
            ixr[a] = dst;
            gor[a] = j->x + orow * rowlen;
        }
        float *gx = j->y + r * W * C;
        for (int64_t iw = 0; iw < W; iw++, gx += C) {
            const __m512i pos = _mm512_set1_epi32((int32_t)(ih * W + iw));
            const int nw = nwl[iw];
            const int32_t *wv = wl[iw];
            int64_t c = 0;
            for (; c + 64 <= C; c += 64) { /* 4 vectors, one pass over the windows */
                __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
                for (int a = 0; a < nh; a++)
                    for (int b = 0; b < nw; b++) {
                        const int64_t off = (int64_t)wv[b] * C + c;
                        const int32_t *ip = ixr[a] + off;
                        const float *gp = gor[a] + off;
#define PM_GACC(A, k)                                                                              \
    A = _mm512_mask_add_ps(                                                                        \
        A, _mm512_cmpeq_epi32_mask(_mm512_loadu_si512(ip + 16 * (k)), pos), A,                     \
        _mm512_loadu_ps(gp + 16 * (k)))
                        PM_GACC(a0, 0);
                        PM_GACC(a1, 1);
                        PM_GACC(a2, 2);
                        PM_GACC(a3, 3);
#undef PM_GACC
                    }
                _mm512_storeu_ps(gx + c, a0);
                _mm512_storeu_ps(gx + c + 16, a1);
                _mm512_storeu_ps(gx + c + 32, a2);
                _mm512_storeu_ps(gx + c + 48, a3);
            }
            for (; c < C; c += 16) {
                const bool whole = c + 16 <= C;
                const __mmask16 km = whole ? (__mmask16)0xFFFF : kt;
                __m512 acc = _mm512_setzero_ps();
                for (int a = 0; a < nh; a++)
                    for (int b = 0; b < nw; b++) {
                        const int64_t off = (int64_t)wv[b] * C + c;
                        const __m512i ix = _mm512_maskz_loadu_epi32(km, ixr[a] + off);
                        const __mmask16 m = _mm512_mask_cmpeq_epi32_mask(km, ix, pos);
                        acc = _mm512_mask_add_ps(acc, m, acc,
                                                 _mm512_maskz_loadu_ps(km, gor[a] + off));
                    }
                _mm512_mask_storeu_ps(gx + c, km, acc);
            }
        }
    }
    mft__free(ring);
}
#endif

/* True when no 2-D window of the max backward's params (a->params) is
 * empty. An empty window's index (its start) may lie in another window,
 * where the owner and gather rules would not add it: the scatter runs then. */
static bool pm_windows_nonempty(const mft_kernel_args *a) {
    const mft_pool2d_params *p = a->params;
    for (int d = 0; d < 2; d++) {
        const int64_t in = a->outputs[0]->sizes[2 + d], out = a->inputs[0]->sizes[2 + d];
        for (int64_t o = 0; o < out; o++) {
            int64_t i0 = o * p->stride[d] - p->padding[d];
            const int64_t i1 = i0 + (p->kernel[d] - 1) * p->dilation[d] + 1;
            while (i0 < 0) i0 += p->dilation[d];
            if (i0 >= i1 || i0 >= in) return false;
        }
    }
    return true;
}

/* True when pm_maxbwd_dense_range applies: 2-D windows known that do not
 * overlap, none empty, 16 channels or more. */
static bool pm_dense_applies(const mft_kernel_args *a) {
    const mft_pool2d_params *p = a->params;
    if (!p || a->inputs[0]->ndim != 4 || a->inputs[0]->sizes[1] < 16) return false;
    for (int d = 0; d < 2; d++)
        if (p->stride[d] < p->dilation[d] * (p->kernel[d] - 1) + 1) return false;
    return pm_windows_nonempty(a);
}

#if PM_HAVE_Z16
/* True when pm_maxbwd_gather_range applies: 2-D windows known, none empty,
 * at most PM_GW holding any position along each dim, input rows at most
 * PM_GW_W wide, positions in int32. */
static bool pm_gather_applies(const mft_kernel_args *a) {
    const mft_pool2d_params *p = a->params;
    const mft_tensor *gx = a->outputs[0];
    if (!p || gx->ndim != 4 || gx->sizes[3] > PM_GW_W || gx->sizes[2] * gx->sizes[3] >= INT32_MAX)
        return false;
    for (int d = 0; d < 2; d++)
        if ((p->kernel[d] - 1) * p->dilation[d] / p->stride[d] + 1 > PM_GW) return false;
    return pm_windows_nonempty(a);
}
#endif

#if PM_HAVE_Z16
/* NCHW max backward over known 2x2 / stride 2 windows (no padding or
 * dilation): each grad_x pixel lies in at most one window, so grad_x is
 * written once, two rows per output row: for 16 outputs of a row, the
 * indices (saturated to int32) are compared with the four positions of each
 * window, and the matched gradients (0.0f + g, else 0, as the scatter sums
 * from zero) are interleaved into the two rows' 32 pixels. Columns and rows
 * past the last window are zero. An index outside its window matches
 * nothing (documented for mft_max_pool2d_backward_windows). One work item:
 * a plane. */
static void pm_maxbwd_nchw2x2_range(void *ctx, int64_t begin, int64_t end) {
    const pm_job *j = ctx;
    const int64_t H = j->g.in[1], W = j->g.in[2], OH = j->g.out[1], OW = j->g.out[2];
    const __m512i lane2 = _mm512_slli_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 1);
    const __m512i ilo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i ihi =
        _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    const __m512 zero = _mm512_setzero_ps();
    for (int64_t pl = begin; pl < end; pl++) {
        float *gx = j->y + pl * H * W;
        const float *go = j->x + pl * OH * OW;
        const int64_t *ind = j->ind + pl * OH * OW;
        for (int64_t oh = 0; oh < OH; oh++) {
            for (int dy = 0; dy < 2; dy++) {
                float *row = gx + (2 * oh + dy) * W;
                for (int64_t ow = 0; ow < OW; ow += 16) {
                    const int64_t nv = OW - ow < 16 ? OW - ow : 16;
                    const __mmask16 km = pm_mask16(nv);
                    const __m512i ix = pm_idx16(ind + oh * OW + ow, km);
                    const __m512 g = _mm512_maskz_loadu_ps(km, go + oh * OW + ow);
                    const __m512i c0 =
                        _mm512_add_epi32(_mm512_set1_epi32((int32_t)((2 * oh + dy) * W + 2 * ow)),
                                         lane2);
                    const __m512i c1 = _mm512_add_epi32(c0, _mm512_set1_epi32(1));
                    const __m512 v0 =
                        _mm512_add_ps(zero, _mm512_maskz_mov_ps(
                                                _mm512_mask_cmpeq_epi32_mask(km, ix, c0), g));
                    const __m512 v1 =
                        _mm512_add_ps(zero, _mm512_maskz_mov_ps(
                                                _mm512_mask_cmpeq_epi32_mask(km, ix, c1), g));
                    const __m512 a = _mm512_permutex2var_ps(v0, ilo, v1);
                    const __m512 b = _mm512_permutex2var_ps(v0, ihi, v1);
                    const int64_t n2 = 2 * nv; /* pixels written: 2 per output */
                    _mm512_mask_storeu_ps(row + 2 * ow, pm_mask16(n2), a);
                    if (n2 > 16) _mm512_mask_storeu_ps(row + 2 * ow + 16, pm_mask16(n2 - 16), b);
                }
                for (int64_t iw = 2 * OW; iw < W; iw++) row[iw] = 0.0f;
            }
        }
        if (2 * OH < H) memset(gx + 2 * OH * W, 0, (size_t)((H - 2 * OH) * W) * sizeof *gx);
    }
}
#endif

static void pm_maxbwd_nchw(const mft_kernel_args *a) {
    pm_geom g;
    pm_geom_init(&g, PM_MAX, a->outputs[0], a->inputs[0]);
    pm_job j = pm_job_of(&g, a);
    const int64_t work = g.in[0] * g.in[1] * g.in[2] + g.out[0] * g.out[1] * g.out[2];
#if PM_HAVE_Z16
    const mft_pool2d_params *p = a->params;
    if (p && a->inputs[0]->ndim == 4 && p->kernel[0] == 2 && p->kernel[1] == 2 &&
        p->stride[0] == 2 && p->stride[1] == 2 && p->padding[0] == 0 && p->padding[1] == 0 &&
        p->dilation[0] == 1 && p->dilation[1] == 1 && 2 * g.out[1] <= g.in[1] &&
        2 * g.out[2] <= g.in[2] && g.in[1] * g.in[2] < INT32_MAX) {
        mft__parallel_for(0, g.N * g.C, pm_grain(work), pm_maxbwd_nchw2x2_range, &j);
        return;
    }
#endif
    mft__parallel_for(0, g.N * g.C, pm_grain(work), pm_maxbwd_nchw_range, &j);
}

static void pm_maxbwd_nhwc(const mft_kernel_args *a) {
    pm_geom g;
    pm_geom_init(&g, PM_MAX, a->outputs[0], a->inputs[0]);
    pm_job j = pm_job_of(&g, a);
    if (pm_dense_applies(a)) {
        pm_dense_job dj = {&j, a->params};
        mft__parallel_for(0, g.N * g.in[1], pm_grain(g.in[2] * g.C), pm_maxbwd_dense_range, &dj);
        return;
    }
    j.cb = (g.C + PM_CBLOCK - 1) / PM_CBLOCK;
    const int64_t cw = g.C < PM_CBLOCK ? g.C : PM_CBLOCK;
    const int64_t work = cw * (g.in[0] * g.in[1] * g.in[2] + g.out[0] * g.out[1] * g.out[2]);
#if PM_HAVE_Z16
    const mft_pool2d_params *p = a->params;
    if (pm_gather_applies(a)) {
        pm_dense_job dj = {&j, p};
        mft__parallel_for(0, g.N * g.in[1], pm_grain(g.in[2] * g.C * 4), pm_maxbwd_gather_range,
                          &dj);
        return;
    }
    if (p && a->inputs[0]->ndim == 4 && p->kernel[0] * p->kernel[1] <= PM_WIN_MAX &&
        g.in[1] * g.in[2] < INT32_MAX) {
        pm_dense_job dj = {&j, p};
        mft__parallel_for(0, g.N * j.cb, pm_grain(work), pm_maxbwd_win_range, &dj);
        return;
    }
#endif
    mft__parallel_for(0, g.N * j.cb, pm_grain(work), pm_maxbwd_nhwc_range, &j);
}

/* NCHW avg / adaptive avg backward: grad_out (N,C,OD,OH,OW) packed ->
 * grad_x (N,C,D,H,W) packed; one (n, c) plane per work item: zero it, then
 * add grad_out / divisor over each output's window (unit-stride rows). */
static void pm_avgbwd_nchw_range(void *ctx, int64_t begin, int64_t end) {
    const pm_job *j = ctx;
    const pm_geom *g = &j->g;
    const int64_t H = g->in[1], W = g->in[2];
    const int64_t OD = g->out[0], OH = g->out[1], OW = g->out[2];
    const int64_t P = g->in[0] * H * W, OP = OD * OH * OW;
    for (int64_t pl = begin; pl < end; pl++) {
        float *gx = j->y + pl * P;
        const float *go = j->x + pl * OP;
        memset(gx, 0, (size_t)P * sizeof *gx);
        for (int64_t od = 0; od < OD; od++) {
            int64_t d0, d1, cnt[3], ext[3];
            pm_win(g, 0, od, &d0, &d1, &ext[0]);
            cnt[0] = d1 - d0;
            for (int64_t oh = 0; oh < OH; oh++) {
                int64_t h0, h1;
                pm_win(g, 1, oh, &h0, &h1, &ext[1]);
                cnt[1] = h1 - h0;
                const float *grow = go + (od * OH + oh) * OW;
                for (int64_t ow = 0; ow < OW; ow++) {
                    int64_t w0, w1;
                    pm_win(g, 2, ow, &w0, &w1, &ext[2]);
                    cnt[2] = w1 - w0;
                    const int64_t div = pm_divisor(g, cnt, ext);
                    if (!div) continue;
                    const float v = grow[ow] / (float)div;
                    for (int64_t id = d0; id < d1; id++)
                        for (int64_t ih = h0; ih < h1; ih++) {
                            float *row = gx + (id * H + ih) * W;
                            for (int64_t iw = w0; iw < w1; iw++) row[iw] += v;
                        }
                }
            }
        }
    }
}

/* Outputs [lo, hi) of a row whose input column o*s + off lies in [0, W). */
static inline void pm_col_range(int64_t OW, int64_t W, int64_t s, int64_t off, int64_t *lo,
                                int64_t *hi) {
    int64_t l = off >= 0 ? 0 : (-off + s - 1) / s;
    int64_t h = W - 1 - off < 0 ? 0 : (W - 1 - off) / s + 1;
    *lo = l;
    *hi = h < OW ? h : OW;
    if (*hi < *lo) *hi = *lo;
}

/* NCHW avg / adaptive avg backward by gathering, when OW and W are at most
 * PM_TAB: grad_out (N,C,OD,OH,OW) packed -> grad_x (N,C,D,H,W) packed; one
 * grad_x row (n, c, d, h) per work item, written once. The divisor is a
 * product of per-dim factors (or the override), so per row
 * t[ow] = sum over the (od, oh) windows holding (d, h) of
 * grad_out[od, oh, ow] / (f_d f_h f_w[ow]) (a unit-stride loop), then t is
 * spread over the row's columns (unit-stride adds). */
static void pm_avgbwd_nchw_rows(void *ctx, int64_t begin, int64_t end) {
    const pm_job *j = ctx;
    const pm_geom *g = &j->g;
    const int64_t D = g->in[0], H = g->in[1], W = g->in[2];
    const int64_t OD = g->out[0], OH = g->out[1], OW = g->out[2];
    const bool ovr = g->kind != PM_ADAPT && g->divisor_override != 0;
    const bool use_ext = g->kind == PM_AVG && g->count_include_pad && !ovr;
    float rw[PM_TAB], tmp[PM_TAB];
    int64_t ww0[PM_TAB], ww1[PM_TAB];
    for (int64_t ow = 0; ow < OW; ow++) {
        int64_t ext;
        pm_win(g, 2, ow, &ww0[ow], &ww1[ow], &ext);
        const int64_t cw = ww1[ow] - ww0[ow];
        rw[ow] = cw <= 0 ? 0.0f : ovr ? 1.0f : 1.0f / (float)(use_ext ? ext : cw);
    }
    const int64_t sW = g->s[2], kW = g->k[2], pW = g->p[2];
    const float scale = ovr ? 1.0f / (float)g->divisor_override : 1.0f;
    /* H-dim tables (oh range of each ih; count and extent of each oh) */
    int64_t hr0[PM_TAB], hr1[PM_TAB], hc[PM_TAB], he[PM_TAB];
    const bool htab = H <= PM_TAB && OH <= PM_TAB;
    for (int64_t ih = 0; htab && ih < H; ih++) pm_inv(g, 1, ih, &hr0[ih], &hr1[ih]);
    for (int64_t oh = 0; htab && oh < OH; oh++) {
        int64_t b0, b1;
        pm_win(g, 1, oh, &b0, &b1, &he[oh]);
        hc[oh] = b1 - b0;
    }
    int64_t dc[PM_TAB], de[PM_TAB];
    const bool dtab = OD <= PM_TAB;
    for (int64_t od = 0; dtab && od < OD; od++) {
        int64_t a0, a1;
        pm_win(g, 0, od, &a0, &a1, &de[od]);
        dc[od] = a1 - a0;
    }
    int64_t last_id = -1, od0 = 0, od1 = 0;
    int64_t last_plane = -1, last_tid = -1, last_oh0 = -1, last_oh1 = -1;
    /* row r = ((plane * D) + id) * H + ih, advanced without divisions */
    int64_t ih = begin % H, id = (begin / H) % D, plane = begin / H / D;
    for (int64_t r = begin; r < end; r++, ih = ih + 1 < H ? ih + 1 : 0,
                 id = ih ? id : (id + 1 < D ? id + 1 : 0), plane = (ih || id) ? plane : plane + 1) {
        const float *go = j->x + plane * OD * OH * OW;
        int64_t oh0, oh1;
        if (id != last_id) {
            pm_inv(g, 0, id, &od0, &od1);
            last_id = id;
        }
        if (htab) {
            oh0 = hr0[ih];
            oh1 = hr1[ih];
        } else {
            pm_inv(g, 1, ih, &oh0, &oh1);
        }
        /* consecutive rows of one plane with the same windows share t */
        const bool same = plane == last_plane && id == last_tid && oh0 == last_oh0 &&
                          oh1 == last_oh1;
        last_plane = plane;
        last_tid = id;
        last_oh0 = oh0;
        last_oh1 = oh1;
        if (!same) for (int64_t ow = 0; ow < OW; ow++) tmp[ow] = 0.0f;
        for (int64_t od = same ? od1 : od0; od < od1; od++) {
            int64_t cd, ed;
            if (dtab) {
                cd = dc[od];
                ed = de[od];
            } else {
                int64_t a0, a1;
                pm_win(g, 0, od, &a0, &a1, &ed);
                cd = a1 - a0;
            }
            for (int64_t oh = oh0; oh < oh1; oh++) {
                int64_t ch, eh;
                if (htab) {
                    ch = hc[oh];
                    eh = he[oh];
                } else {
                    int64_t b0, b1;
                    pm_win(g, 1, oh, &b0, &b1, &eh);
                    ch = b1 - b0;
                }
                if (cd <= 0 || ch <= 0) continue;
                const float rdh = ovr ? scale : 1.0f / (float)(use_ext ? ed * eh : cd * ch);
                const float *grow = go + (od * OH + oh) * OW;
                for (int64_t ow = 0; ow < OW; ow++) tmp[ow] += grow[ow] * (rdh * rw[ow]);
            }
        }
        /* spread t over the row: unit-stride adds per kernel column (avg)
         * or per output window (adaptive) */
        float *out = j->y + r * W;
        if (same) { /* same windows: the previous row's values */
            memcpy(out, out - W, (size_t)W * sizeof *out);
            continue;
        }
        if (g->kind == PM_ADAPT) {
            /* adaptive windows cover [0, W) in order, overlapping only the
             * previous one: add over the overlap, store past it */
            int64_t done = 0;
            for (int64_t ow = 0; ow < OW; ow++) {
                const float v = tmp[ow];
                const int64_t mid = ww1[ow] < done ? ww1[ow] : done;
                for (int64_t iw = ww0[ow]; iw < mid; iw++) out[iw] += v;
                for (int64_t iw = mid > ww0[ow] ? mid : ww0[ow]; iw < ww1[ow]; iw++) out[iw] = v;
                if (ww1[ow] > done) done = ww1[ow];
            }
        } else {
            for (int64_t iw = 0; iw < W; iw++) out[iw] = 0.0f;
            for (int64_t kw = 0; kw < kW; kw++) {
                int64_t lo, hi;
                pm_col_range(OW, W, sW, kw - pW, &lo, &hi);
                float *o = out + (kw - pW);
                if (sW == 1)
                    for (int64_t ow = lo; ow < hi; ow++) o[ow] += tmp[ow];
                else
                    for (int64_t ow = lo; ow < hi; ow++) o[ow * sW] += tmp[ow];
            }
        }
    }
}

/* NHWC avg / adaptive avg backward by gathering: grad_out (N,OD,OH,OW,C)
 * packed -> grad_x (N,D,H,W,C) packed; one grad_x row (n, d, h) per work
 * item. Per pixel, the outputs whose windows hold it are listed (offset of
 * their C-row, 1/divisor; PM_TERMS at a time), then summed per block of
 * PM_VB channels held in registers. The W-dim window counts of the outputs
 * are tabled per row when OW <= PM_TAB. */
static inline void pm_avgbwd_terms(const pm_geom *g, const float *go, float *out, int ntm,
                                   const int64_t *toff, const float *tinv, bool first) {
    const int64_t C = g->C;
    for (int64_t c0 = 0; c0 < C; c0 += PM_VB) {
        const int64_t nc = C - c0 < PM_VB ? C - c0 : PM_VB;
        float acc[PM_VB];
        if (nc == PM_VB) {
#if PM_HAVE_V8
            pm_v8 va[PM_VB / 8];
            for (int k = 0; k < PM_VB / 8; k++)
                va[k] = first ? (pm_v8){0, 0, 0, 0, 0, 0, 0, 0} : pm_ld8(out + c0 + 8 * k);
            for (int t = 0; t < ntm; t++) {
                const float *gp = go + toff[t] + c0;
                const pm_v8 w = (pm_v8){0, 0, 0, 0, 0, 0, 0, 0} + tinv[t];
                for (int k = 0; k < PM_VB / 8; k++) va[k] += pm_ld8(gp + 8 * k) * w;
            }
            for (int k = 0; k < PM_VB / 8; k++) pm_st8(out + c0 + 8 * k, va[k]);
#else
            for (int c = 0; c < PM_VB; c++) acc[c] = first ? 0.0f : out[c0 + c];
            for (int t = 0; t < ntm; t++) {
                const float *gp = go + toff[t] + c0;
                const float inv = tinv[t];
                for (int c = 0; c < PM_VB; c++) acc[c] += gp[c] * inv;
            }
            for (int c = 0; c < PM_VB; c++) out[c0 + c] = acc[c];
#endif
        } else {
            for (int64_t c = 0; c < nc; c++) acc[c] = first ? 0.0f : out[c0 + c];
            for (int t = 0; t < ntm; t++) {
                const float *gp = go + toff[t] + c0;
                const float inv = tinv[t];
                for (int64_t c = 0; c < nc; c++) acc[c] += gp[c] * inv;
            }
            for (int64_t c = 0; c < nc; c++) out[c0 + c] = acc[c];
        }
    }
}

/* The fast path's sum for one pixel: the outputs of the listed (od, oh)
 * pairs (C-row offsets pbase[k] + ow, ow in [ow0, ow1)) times their
 * 1/divisor pinv[k * OW + ow], in the order of pm_avgbwd_terms' lists
 * (pair, then ow), accumulated per block of PM_VB channels in registers. */
#if PM_HAVE_Z16
/* pm_avgbwd_pairs for channels [0, 16*nv) in 16-lane registers (the last
 * masked by km): the same products and sums in the same order. */
static inline __attribute__((always_inline)) void
pm_avgbwd_pairs_z(const float *go, float *out, int64_t C, int64_t OW, int npair,
                  const int64_t *pbase, const float *pinv, const int64_t *wcnt, int64_t ow0,
                  int64_t ow1, int nv, __mmask16 km) {
    __m512 va[4];
    for (int k = 0; k < nv; k++) va[k] = _mm512_setzero_ps();
    for (int q = 0; q < npair; q++)
        for (int64_t ow = ow0; ow < ow1; ow++) {
            if (wcnt[ow] <= 0) continue;
            const float *gp = go + (pbase[q] + ow) * C;
            const __m512 w = _mm512_set1_ps(pinv[q * OW + ow]);
            for (int k = 0; k < nv; k++) {
                const __m512 v = k == nv - 1 ? _mm512_maskz_loadu_ps(km, gp + 16 * k)
                                             : _mm512_loadu_ps(gp + 16 * k);
                va[k] = _mm512_add_ps(va[k], _mm512_mul_ps(v, w));
            }
        }
    for (int k = 0; k < nv; k++)
        _mm512_mask_storeu_ps(out + 16 * k, k == nv - 1 ? km : (__mmask16)0xFFFF, va[k]);
}
#endif

static inline void pm_avgbwd_pairs(const pm_geom *g, const float *go, float *out, int npair,
                                   const int64_t *pbase, const float *pinv,
                                   const int64_t *wcnt, int64_t ow0, int64_t ow1) {
    const int64_t C = g->C, OW = g->out[2];
#if PM_HAVE_Z16
    int64_t cz = 0;
    for (; cz + 64 <= C; cz += 64)
        pm_avgbwd_pairs_z(go + cz, out + cz, C, OW, npair, pbase, pinv, wcnt, ow0, ow1, 4,
                          0xFFFF);
    const int64_t r = C - cz;
    if (r > 0) {
        const int nv = (int)((r + 15) / 16);
        const int64_t last = r - 16 * (nv - 1);
        const __mmask16 km = pm_mask16(last);
        go += cz;
        out += cz;
        switch (nv) {
        case 1: pm_avgbwd_pairs_z(go, out, C, OW, npair, pbase, pinv, wcnt, ow0, ow1, 1, km); break;
        case 2: pm_avgbwd_pairs_z(go, out, C, OW, npair, pbase, pinv, wcnt, ow0, ow1, 2, km); break;
        case 3: pm_avgbwd_pairs_z(go, out, C, OW, npair, pbase, pinv, wcnt, ow0, ow1, 3, km); break;
        default: pm_avgbwd_pairs_z(go, out, C, OW, npair, pbase, pinv, wcnt, ow0, ow1, 4, km); break;
        }
    }
#else
    for (int64_t c0 = 0; c0 < C; c0 += PM_VB) {
        const int64_t nc = C - c0 < PM_VB ? C - c0 : PM_VB;
#if PM_HAVE_V8
        if (nc == PM_VB) {
            pm_v8 va[PM_VB / 8];
            for (int k = 0; k < PM_VB / 8; k++) va[k] = (pm_v8){0, 0, 0, 0, 0, 0, 0, 0};
            for (int q = 0; q < npair; q++)
                for (int64_t ow = ow0; ow < ow1; ow++) {
                    if (wcnt[ow] <= 0) continue;
                    const float *gp = go + (pbase[q] + ow) * C + c0;
                    const pm_v8 w = (pm_v8){0, 0, 0, 0, 0, 0, 0, 0} + pinv[q * OW + ow];
                    for (int k = 0; k < PM_VB / 8; k++) va[k] += pm_ld8(gp + 8 * k) * w;
                }
            for (int k = 0; k < PM_VB / 8; k++) pm_st8(out + c0 + 8 * k, va[k]);
            continue;
        }
#endif
        float acc[PM_VB];
        for (int64_t c = 0; c < nc; c++) acc[c] = 0.0f;
        for (int q = 0; q < npair; q++)
            for (int64_t ow = ow0; ow < ow1; ow++) {
                if (wcnt[ow] <= 0) continue;
                const float *gp = go + (pbase[q] + ow) * C + c0;
                const float inv = pinv[q * OW + ow];
                for (int64_t c = 0; c < nc; c++) acc[c] += gp[c] * inv;
            }
        for (int64_t c = 0; c < nc; c++) out[c0 + c] = acc[c];
    }
#endif
}

#if PM_HAVE_Z16
/* Widest grad_out row the separable NHWC avg backward keeps (its scaled
 * column sums of one 64-channel block, on the stack). */
#define PM_SEP_OW 256

/* The separable form of pm_avgbwd_pairs over a whole grad_x row, channels
 * [0, 16*nv) (last register masked by km): first, per output column ow,
 * S[ow] = 0 + the sum over the listed (od, oh) pairs of grad_out * 1/divisor
 * (pairs in order; +0 for an empty window, whose grad_out is not read);
 * then each grad_x pixel iw sums 0 + S over its columns [iw0, iw1) in order
 * (a sum that starts at +0 never becomes -0, so adding an empty window's +0
 * changes nothing: the same result as skipping it). The products are those
 * of pm_avgbwd_pairs, the sums regrouped by column (equal up to rounding):
 * 3 + 3 loads per pixel vector for 3x3 / stride 1 windows instead of 9. */
static inline __attribute__((always_inline)) void
pm_avgbwd_sep_z(const float *go, float *gx, float *S, int64_t C, int64_t OW, int64_t W,
                int npair, const int64_t *pbase, const float *pinv, const int64_t *wcnt,
                const int64_t *iw0, const int64_t *iw1, int nv, __mmask16 km) {
    for (int64_t ow = 0; ow < OW; ow++) {
        __m512 v[4];
        for (int k = 0; k < nv; k++) v[k] = _mm512_setzero_ps();
        for (int q = 0; q < npair && wcnt[ow] > 0; q++) {
            const float *gp = go + (pbase[q] + ow) * C;
            const __m512 w = _mm512_set1_ps(pinv[q * OW + ow]);
            for (int k = 0; k < nv; k++) {
                const __m512 x = k == nv - 1 ? _mm512_maskz_loadu_ps(km, gp + 16 * k)
                                             : _mm512_loadu_ps(gp + 16 * k);
                v[k] = _mm512_add_ps(v[k], _mm512_mul_ps(x, w));
            }
        }
        for (int k = 0; k < nv; k++) _mm512_storeu_ps(S + ow * 64 + 16 * k, v[k]);
    }
    for (int64_t iw = 0; iw < W; iw++) {
        __m512 v[4];
        for (int k = 0; k < nv; k++) v[k] = _mm512_setzero_ps();
        for (int64_t ow = iw0[iw]; ow < iw1[iw]; ow++) /* (S = +0 where empty: v + 0 = v) */
            for (int k = 0; k < nv; k++)
                v[k] = _mm512_add_ps(v[k], _mm512_loadu_ps(S + ow * 64 + 16 * k));
        for (int k = 0; k < nv; k++)
            _mm512_mask_storeu_ps(gx + iw * C + 16 * k, k == nv - 1 ? km : (__mmask16)0xFFFF, v[k]);
    }
}

static void pm_avgbwd_sep(const float *go, float *gx, int64_t C, int64_t OW, int64_t W,
                          int npair, const int64_t *pbase, const float *pinv, const int64_t *wcnt,
                          const int64_t *iw0, const int64_t *iw1) {
    float S[PM_SEP_OW * 64];
    for (int64_t c = 0; c < C; c += 64) {
        const int64_t rem = C - c;
        const int nv = rem >= 64 ? 4 : (int)((rem + 15) / 16);
        const int64_t last = (rem >= 64 ? 64 : rem) - 16 * (nv - 1);
        const __mmask16 km = pm_mask16(last);
        switch (nv) {
        case 1: pm_avgbwd_sep_z(go + c, gx + c, S, C, OW, W, npair, pbase, pinv, wcnt, iw0, iw1, 1, km); break;
        case 2: pm_avgbwd_sep_z(go + c, gx + c, S, C, OW, W, npair, pbase, pinv, wcnt, iw0, iw1, 2, km); break;
        case 3: pm_avgbwd_sep_z(go + c, gx + c, S, C, OW, W, npair, pbase, pinv, wcnt, iw0, iw1, 3, km); break;
        default: pm_avgbwd_sep_z(go + c, gx + c, S, C, OW, W, npair, pbase, pinv, wcnt, iw0, iw1, 4, km); break;
        }
    }
}
#endif

static void pm_avgbwd_nhwc_range(void *ctx, int64_t begin, int64_t end) {
    const pm_job *j = ctx;
    const pm_geom *g = &j->g;
    const int64_t C = g->C, D = g->in[0], H = g->in[1], W = g->in[2];
    const int64_t OD = g->out[0], OH = g->out[1], OW = g->out[2];
    int64_t wcnt[PM_TAB], wext[PM_TAB];
    const bool tab = OW <= PM_TAB;
    for (int64_t ow = 0; tab && ow < OW; ow++) {
        int64_t a0, a1;
        pm_win(g, 2, ow, &a0, &a1, &wext[ow]);
        wcnt[ow] = a1 - a0;
    }
    int64_t iw0[PM_TAB], iw1[PM_TAB];
    const bool itab = W <= PM_TAB;
    for (int64_t iw = 0; itab && iw < W; iw++) pm_inv(g, 2, iw, &iw0[iw], &iw1[iw]);
    int64_t toff[PM_TERMS], pbase[PM_TERMS], pcnt[PM_TERMS], pext[PM_TERMS];
    float tinv[PM_TERMS], pinv[PM_PINV];
    int64_t inv_cnt[PM_TERMS], inv_ext[PM_TERMS]; /* the pairs pinv was made for */
    int inv_npair = -1;
    const bool ovr = g->kind != PM_ADAPT && g->divisor_override != 0;
    const bool use_ext = g->kind == PM_AVG && g->count_include_pad && !ovr;
    /* row r = ((n * D) + id) * H + ih, advanced without divisions */
    int64_t ih = begin % H, id = (begin / H) % D, n = begin / H / D;
    for (int64_t r = begin; r < end; r++, ih = ih + 1 < H ? ih + 1 : 0,
                 id = ih ? id : (id + 1 < D ? id + 1 : 0), n = (ih || id) ? n : n + 1) {
        const float *go = j->x + n * OD * OH * OW * C;
        int64_t od0, od1, oh0, oh1;
        pm_inv(g, 0, id, &od0, &od1);
        pm_inv(g, 1, ih, &oh0, &oh1);
        /* fast path: the (od, oh) windows of the row listed once, W-dim
         * factors tabled */
        int npair = 0;
        if (tab && itab && (od1 - od0) * (oh1 - oh0) <= PM_TERMS &&
            (od1 - od0) * (oh1 - oh0) * OW <= PM_PINV) {
            for (int64_t od = od0; od < od1; od++) {
                int64_t a0, a1, ed;
                pm_win(g, 0, od, &a0, &a1, &ed);
                for (int64_t oh = oh0; oh < oh1; oh++) {
                    int64_t b0, b1, eh;
                    pm_win(g, 1, oh, &b0, &b1, &eh);
                    if (a1 <= a0 || b1 <= b0) continue;
                    pbase[npair] = (od * OH + oh) * OW;
                    pcnt[npair] = (a1 - a0) * (b1 - b0);
                    pext[npair++] = ed * eh;
                }
            }
            /* 1/divisor per (pair, ow): recomputed only when the pairs'
             * window sizes differ from the previous row's (interior rows
             * share them; the scalar divisions cost ~15% of the 3x3 / s1
             * backward in cache) */
            bool same = npair == inv_npair;
            for (int k = 0; same && k < npair; k++)
                same = pcnt[k] == inv_cnt[k] && pext[k] == inv_ext[k];
            if (!same) {
                for (int k = 0; k < npair; k++)
                    for (int64_t ow = 0; ow < OW; ow++) {
                        const int64_t div = ovr ? g->divisor_override
                                          : use_ext ? pext[k] * wext[ow] : pcnt[k] * wcnt[ow];
                        pinv[k * OW + ow] = wcnt[ow] > 0 ? 1.0f / (float)div : 0.0f;
                    }
                inv_npair = npair;
                for (int k = 0; k < npair; k++) {
                    inv_cnt[k] = pcnt[k];
                    inv_ext[k] = pext[k];
                }
            }
            /* grad_out rows the next input row adds (oh >= oh1), prefetched
             * column by column while this row is summed (from DRAM the
             * hardware prefetcher alone left it latency-bound) */
            int64_t na = 0, nb = 0;
            if (ih + 1 < H) {
                pm_inv(g, 1, ih + 1, &na, &nb);
                if (na < oh1) na = oh1;
                if (nb < na) nb = na;
            }
            const float *gn = go + (od0 < od1 ? od0 : 0) * OH * OW * C;
#if PM_HAVE_Z16
            if (OW <= PM_SEP_OW) { /* separable, the next rows prefetched first */
                for (int64_t oh = na; oh < nb; oh++)
                    for (int64_t b = 0; b < OW * C * (int64_t)sizeof(float); b += 64)
                        __builtin_prefetch((const char *)(gn + oh * OW * C) + b);
                pm_avgbwd_sep(go, j->y + r * W * C, C, OW, W, npair, pbase, pinv, wcnt, iw0, iw1);
                continue;
            }
#endif
            int64_t pcol = 0; /* the previous pixel's column end */
            for (int64_t iw = 0; iw < W; iw++) {
                for (int64_t oh = na; oh < nb; oh++)
                    for (int64_t ow = iw0[iw] > pcol ? iw0[iw] : pcol; ow < iw1[iw]; ow++) {
                        const char *q = (const char *)(gn + (oh * OW + ow) * C);
                        for (int64_t b = 0; b < C * (int64_t)sizeof(float); b += 64)
                            __builtin_prefetch(q + b);
                    }
                if (iw1[iw] > pcol) pcol = iw1[iw];
                pm_avgbwd_pairs(g, go, j->y + (r * W + iw) * C, npair, pbase, pinv, wcnt,
                                iw0[iw], iw1[iw]);
            }
            continue;
        }
        for (int64_t iw = 0; iw < W; iw++) {
            float *out = j->y + (r * W + iw) * C;
            int64_t ow0, ow1;
            if (itab) {
                ow0 = iw0[iw];
                ow1 = iw1[iw];
            } else {
                pm_inv(g, 2, iw, &ow0, &ow1);
            }
            int ntm = 0;
            bool first = true;
            for (int64_t od = od0; od < od1; od++) {
                int64_t a0, a1, cnt[3], ext[3];
                pm_win(g, 0, od, &a0, &a1, &ext[0]);
                cnt[0] = a1 - a0;
                for (int64_t oh = oh0; oh < oh1; oh++) {
                    pm_win(g, 1, oh, &a0, &a1, &ext[1]);
                    cnt[1] = a1 - a0;
                    for (int64_t ow = ow0; ow < ow1; ow++) {
                        if (tab) {
                            cnt[2] = wcnt[ow];
                            ext[2] = wext[ow];
                        } else {
                            pm_win(g, 2, ow, &a0, &a1, &ext[2]);
                            cnt[2] = a1 - a0;
                        }
                        const int64_t div = pm_divisor(g, cnt, ext);
                        if (!div) continue;
                        toff[ntm] = ((od * OH + oh) * OW + ow) * C;
                        tinv[ntm++] = 1.0f / (float)div;
                        if (ntm == PM_TERMS) {
                            pm_avgbwd_terms(g, go, out, ntm, toff, tinv, first);
                            first = false;
                            ntm = 0;
                        }
                    }
                }
            }
            if (ntm || first) pm_avgbwd_terms(g, go, out, ntm, toff, tinv, first);
        }
    }
}

static int64_t pm_bwd_terms(const pm_geom *g) {
    int64_t t = 1;
    for (int e = 0; e < 3; e++)
        t *= g->kind == PM_ADAPT ? g->out[e] / g->in[e] + 2 : g->k[e] / g->s[e] + 1;
    return t;
}

/* NCHW adaptive backward to one output per plane (global pooling):
 * grad_out (N,C,1,1,1) -> grad_x (N,C,D,H,W) packed, one plane per work
 * item filled with the value pm_avgbwd_nchw_rows computes for it
 * (0 + g * (1/(D*H) * 1/W)). */
static void pm_avgbwd_nchw_global(void *ctx, int64_t begin, int64_t end) {
    const pm_job *j = ctx;
    const pm_geom *g = &j->g;
    const int64_t P = g->in[0] * g->in[1] * g->in[2];
    const float rdh = 1.0f / (float)(g->in[0] * g->in[1]), rw = 1.0f / (float)g->in[2];
    for (int64_t pl = begin; pl < end; pl++) {
        const float v = 0.0f + j->x[pl] * (rdh * rw);
        float *restrict gx = j->y + pl * P;
        int64_t i = 0;
#if PM_HAVE_V8
        const pm_v8 vv = (pm_v8){0, 0, 0, 0, 0, 0, 0, 0} + v;
        for (; i + 32 <= P; i += 32)
            for (int k = 0; k < 4; k++) pm_st8(gx + i + 8 * k, vv);
#endif
        for (; i < P; i++) gx[i] = v;
    }
}

static void pm_avgbwd_nchw(const pm_geom *g, const mft_kernel_args *a) {
    pm_job j = pm_job_of(g, a);
    if (g->kind == PM_ADAPT && g->out[0] == 1 && g->out[1] == 1 && g->out[2] == 1) {
        const int64_t P = g->in[0] * g->in[1] * g->in[2];
        mft__parallel_for(0, g->N * g->C, pm_grain(P), pm_avgbwd_nchw_global, &j);
        return;
    }
    if (g->out[2] <= PM_TAB && g->in[2] <= PM_TAB) {
        const int64_t rows = g->N * g->C * g->in[0] * g->in[1];
        mft__parallel_for(0, rows, pm_grain(g->in[2] * pm_bwd_terms(g)), pm_avgbwd_nchw_rows, &j);
        return;
    }
    const int64_t P = g->in[0] * g->in[1] * g->in[2];
    mft__parallel_for(0, g->N * g->C, pm_grain(P * pm_bwd_terms(g)), pm_avgbwd_nchw_range, &j);
}

static void pm_avgbwd_nhwc(const pm_geom *g, const mft_kernel_args *a) {
    pm_job j = pm_job_of(g, a);
    mft__parallel_for(0, g->N * g->in[0] * g->in[1],
                      pm_grain(g->C * g->in[2] * pm_bwd_terms(g)), pm_avgbwd_nhwc_range, &j);
}

/* Per-op fast entries. */
#define PM_FWD_ENTRY(name, kind, setp, body)                                                  \
    static void name(const mft_kernel_args *a) {                                               \
        pm_geom g;                                                                             \
        pm_geom_init(&g, kind, a->inputs[0], a->outputs[0]);                                   \
        setp;                                                                                  \
        body(&g, a);                                                                           \
    }
#define PM_BWD_ENTRY(name, kind, setp, body)                                                  \
    static void name(const mft_kernel_args *a) {                                               \
        pm_geom g;                                                                             \
        pm_geom_init(&g, kind, a->outputs[0], a->inputs[0]);                                   \
        setp;                                                                                  \
        body(&g, a);                                                                           \
    }
PM_FWD_ENTRY(max_pool3d_nchw, PM_MAX, pm_geom_p3(&g, a->params), pm_fwd_nchw)
PM_FWD_ENTRY(max_pool3d_nhwc, PM_MAX, pm_geom_p3(&g, a->params), pm_fwd_nhwc)
PM_FWD_ENTRY(avg_pool3d_nchw, PM_AVG, pm_geom_p3(&g, a->params), pm_fwd_nchw)
PM_FWD_ENTRY(avg_pool3d_nhwc, PM_AVG, pm_geom_p3(&g, a->params), pm_fwd_nhwc)
/* adaptive: 2-D and 3-D (a 4-D tensor is a 5-D one with D = 1) */
PM_FWD_ENTRY(adaptive_pool_nchw, PM_ADAPT, (void)0, pm_fwd_nchw)
PM_FWD_ENTRY(adaptive_pool_nhwc, PM_ADAPT, (void)0, pm_fwd_nhwc)
PM_BWD_ENTRY(avg_pool2d_backward_nchw, PM_AVG, pm_geom_p2(&g, a->params), pm_avgbwd_nchw)
PM_BWD_ENTRY(avg_pool2d_backward_nhwc, PM_AVG, pm_geom_p2(&g, a->params), pm_avgbwd_nhwc)
PM_BWD_ENTRY(avg_pool3d_backward_nchw, PM_AVG, pm_geom_p3(&g, a->params), pm_avgbwd_nchw)
PM_BWD_ENTRY(avg_pool3d_backward_nhwc, PM_AVG, pm_geom_p3(&g, a->params), pm_avgbwd_nhwc)
PM_BWD_ENTRY(adaptive_avg_pool_backward_nchw, PM_ADAPT, (void)0, pm_avgbwd_nchw)
PM_BWD_ENTRY(adaptive_avg_pool_backward_nhwc, PM_ADAPT, (void)0, pm_avgbwd_nhwc)

/* ---------------------------------------------------------------- kernel table
 * CONTIGUOUS F32 = fast NCHW, CHANNELS_LAST F32 = fast NHWC (NDHWC at rank
 * 5), CONTIGUOUS F64 = the reference. The F32 reference kernels are reached
 * through mft__pool_more_reference (tests). */
#define PM_ROWS(OP, nm, nchw, nhwc, ref)                                                      \
    {MFT__OP_##OP, MFT_CONTIGUOUS, MFT_F32, nm ".nchw.f32", nchw},                             \
    {MFT__OP_##OP, MFT_CHANNELS_LAST, MFT_F32, nm ".nhwc.f32", nhwc},                          \
    {MFT__OP_##OP, MFT_CONTIGUOUS, MFT_F64, nm ".nchw.f64.ref", ref},
const mft__kernel_def mft__kernels_pool_more[] = {
    PM_ROWS(MAX_POOL2D_BACKWARD, "max_pool2d_backward", pm_maxbwd_nchw, pm_maxbwd_nhwc,
            pm_maxbwd_ref)
    PM_ROWS(AVG_POOL2D_BACKWARD, "avg_pool2d_backward", avg_pool2d_backward_nchw,
            avg_pool2d_backward_nhwc, avg_pool2d_backward_ref)
    PM_ROWS(MAX_POOL3D, "max_pool3d", max_pool3d_nchw, max_pool3d_nhwc, max_pool3d_ref)
    PM_ROWS(AVG_POOL3D, "avg_pool3d", avg_pool3d_nchw, avg_pool3d_nhwc, avg_pool3d_ref)
    PM_ROWS(MAX_POOL3D_BACKWARD, "max_pool3d_backward", pm_maxbwd_nchw, pm_maxbwd_nhwc,
            pm_maxbwd_ref)
    PM_ROWS(AVG_POOL3D_BACKWARD, "avg_pool3d_backward", avg_pool3d_backward_nchw,
            avg_pool3d_backward_nhwc, avg_pool3d_backward_ref)
    PM_ROWS(ADAPTIVE_AVG_POOL2D, "adaptive_avg_pool2d", adaptive_pool_nchw, adaptive_pool_nhwc,
            adaptive_pool_ref)
    PM_ROWS(ADAPTIVE_AVG_POOL2D_BACKWARD, "adaptive_avg_pool2d_backward",
            adaptive_avg_pool_backward_nchw, adaptive_avg_pool_backward_nhwc,
            adaptive_avg_pool_backward_ref)
    PM_ROWS(ADAPTIVE_MAX_POOL2D, "adaptive_max_pool2d", adaptive_pool_nchw, adaptive_pool_nhwc,
            adaptive_pool_ref)
    PM_ROWS(ADAPTIVE_AVG_POOL3D, "adaptive_avg_pool3d", adaptive_pool_nchw, adaptive_pool_nhwc,
            adaptive_pool_ref)
    PM_ROWS(ADAPTIVE_AVG_POOL3D_BACKWARD, "adaptive_avg_pool3d_backward",
            adaptive_avg_pool_backward_nchw, adaptive_avg_pool_backward_nhwc,
            adaptive_avg_pool_backward_ref)
    PM_ROWS(ADAPTIVE_MAX_POOL3D, "adaptive_max_pool3d", adaptive_pool_nchw, adaptive_pool_nhwc,
            adaptive_pool_ref)
    {0, 0, 0, NULL, NULL},
};
