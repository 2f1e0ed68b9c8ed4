/* ops/pool/pool_internal.h — what the files of the pooling family share
 * beyond ops/ops_internal.h: the CPU-feature switches and vector types, the
 * window geometry of every pool (output sizes, the ceil_mode rule, windows,
 * the outputs holding an input, divisors), the small helpers and job
 * descriptions of the fast F32 kernels, and the declarations that cross
 * files: the entry machinery of common.c, the kernels the tables of
 * kernel_table.c list, and the reference kernels (reference.c).
 *
 * The files: pool2d.c, pool1d.c, pool3d.c and adaptive.c hold the entry
 * points (forward and backward side by side), common.c what they share
 * (checks, the dispatch / record helper); the fast F32 kernels are one file
 * per reduction and layout, forward and backward together: max_nchw.c,
 * max_nhwc.c, avg_nchw.c, avg_nhwc.c (kernels_avx512.h: their AVX-512
 * pieces); the native nChw16c kernels one file per algorithm,
 * blocked16_*.c (blocked16_internal.h: what they share); reference.c the
 * naive kernels; kernel_table.c the tables.
 *
 * Names: pool_ and POOL_ are the 2-D forward kernels' (mft_pool2d_params,
 * pool_job) and the family's; pm_ and PM_ the rank-generic machinery, which
 * sees every pool as 3-D (D, H, W; a 2-D or 1-D pool has the leading dims of
 * size 1 with kernel 1): pm_geom, pm_job. */
#ifndef MFT_OPS_POOL_INTERNAL_H
#define MFT_OPS_POOL_INTERNAL_H

#include <string.h>
#include "autograd_internal.h"
#include "ops_internal.h"

/* ---------------------------------------------------------------- CPU features */
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
/* 8-lane float / int32 vectors (GCC/Clang vector extension) for the
 * kernels' register accumulators. POOL_HAVE_V8: the types, as locals loaded
 * and stored with memcpy (the 2-D forward kernels use them on every GCC /
 * Clang build). PM_HAVE_V8: also passed and returned by value (pm_ld8,
 * pm_st8), on AVX builds (without AVX, passing a 32-byte vector changes the
 * ABI); the rank-generic kernels use vectors there only, plain loops
 * elsewhere. */
#if defined(__GNUC__) || defined(__clang__)
#define POOL_HAVE_V8 1
typedef float pool_v8 __attribute__((vector_size(32)));
typedef int32_t pool_i8 __attribute__((vector_size(32)));
#else
#define POOL_HAVE_V8 0
#endif
#if POOL_HAVE_V8 && defined(__AVX__)
#define PM_HAVE_V8 1
static inline pool_v8 pm_ld8(const float *p) {
    pool_v8 v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline void pm_st8(float *p, pool_v8 v) { memcpy(p, &v, sizeof v); }
#else
#define PM_HAVE_V8 0
#endif

/* Largest kernel/stride/padding/dilation/adaptive output size accepted:
 * keeps the output-size arithmetic far from int64 overflow. */
#define POOL_MAX_PARAM ((int64_t)1 << 30)
/* Channels accumulated in registers by the NHWC avg kernels. */
#define POOL_VB 64
/* Largest OW and W whose per-row tables the avg backward kernels keep on the
 * stack (else a slower path). */
#define PM_TAB 512

/* ---------------------------------------------------------------- output sizes */
static inline int64_t pool_div_floor(int64_t a, int64_t b) {
    int64_t q = a / b, r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? q - 1 : q;
}

/* PyTorch's pooling_output_shape. */
static inline int64_t pool_out_size(int64_t in, int64_t k, int64_t pad, int64_t stride,
                                    int64_t dil, bool ceil_mode) {
    int64_t out = pool_div_floor(in + 2 * pad - dil * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0),
                                 stride) + 1;
    if (ceil_mode && (out - 1) * stride >= in + pad) out--;
    return out;
}

/* ---------------------------------------------------------------- 2-D windows
 * (mft_pool2d_params: the 2-D forward kernels and their reference) */
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

/* ---------------------------------------------------------------- rank-generic geometry
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
 *     grad_x[i] = sum over the windows holding i of grad_out / divisor. */
typedef enum pm_kind { PM_MAX, PM_AVG, PM_ADAPT } pm_kind;

/* The window geometry of one op, always over 3 spatial dims (D, H, W); a
 * 2-D (or 1-D) op has the leading dims of size 1 with kernel 1. */
typedef struct pm_geom {
    pm_kind kind;
    int64_t N, C, in[3], out[3], k[3], s[3], p[3], d[3];
    bool ceil_mode, count_include_pad;
    int64_t divisor_override;
} pm_geom;

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
        a = pool_div_floor(i + g->p[e] - g->k[e], g->s[e]) + 1;
        b = pool_div_floor(i + g->p[e], g->s[e]) + 1;
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
static inline void pm_geom_init(pm_geom *g, pm_kind kind, const mft_tensor *big,
                                const mft_tensor *small) {
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

static inline void pm_geom_p2(pm_geom *g, const mft_pool2d_params *p) {
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

static inline void pm_geom_p3(pm_geom *g, const mft_pool3d_params *p) {
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

/* ---------------------------------------------------------------- common.c: the entry machinery
 * What every entry point shares: argument checks (messages name fn and the
 * values), the dispatched run (views, outputs, mft__dispatch, the layout
 * rule) and the hand-over of the results with their tape node. */

/* The built-in kernel tables this family dispatches to (Note [Kernel tables]). */
extern const mft__kernel_def *const mft__pool_tables[];

/* A pooling request as the user gave it (NULL: the default). */
typedef struct pm_req {
    const int64_t *kernel, *stride, *padding, *dilation;
    bool ceil_mode, count_include_pad;
    int64_t divisor_override;
} pm_req;

/* Tape node of a rank-generic forward pool (1-D, 3-D, adaptive): input {x},
 * saved {x} (sizes, dtype, format) plus the indices for max pools; the
 * backward functions write grad_x packed in x's tag (docs/spec.md §5), so the engine
 * converts nothing. */
typedef enum pm_ag_kind { PM_AG_MAX, PM_AG_AVG, PM_AG_ADAPT_MAX, PM_AG_ADAPT_AVG } pm_ag_kind;
typedef struct pm_ag_params {
    pm_ag_kind kind;
    int nsp;
    int64_t kernel[3], stride[3], padding[3], dilation[3];
    bool ceil_mode, count_include_pad;
    int64_t divisor_override;
} pm_ag_params;

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

/* The tape node an entry point records for its first result: input x
 * (saved first), the indices (the second result) saved too when nsaved is 2. */
typedef struct pool_node {
    const char *name;
    mft__ag_backward_fn backward;
    const mft_tensor *x;
    int nsaved;
    const void *params;
    size_t params_size;
} pool_node;

/* x: non-NULL, rank nsp+1 (unbatched) or nsp+2, F32/F64, C and spatial > 0. */
bool mft__pool_check_x(const char *fn, const mft_tensor *x, int nsp, const char *what);
/* Checks the pooling arguments of an nsp-D pool of x (already checked) and
 * fills g (kind, parameters, sizes) with the output sizes. */
bool mft__pool_check_params(const char *fn, int nsp, bool is_max, const mft_tensor *x,
                            const pm_req *q, pm_geom *g);
/* grad_out (or indices) must match x's rank and dtype (indices: I64) and
 * have the expected sizes (want, rank x->ndim; want NULL: only N and C are
 * checked and the spatial sizes must be >= 1). */
bool mft__pool_check_like(const char *fn, const char *what, const mft_tensor *t,
                          const mft_tensor *x, mft_dtype dt, const int64_t *want);
/* The arguments of a backward whose output sizes are grad_out's: grad_out
 * non-NULL, x as mft__pool_check_x, grad_out of x's rank and dtype, its N and
 * C x's, its spatial sizes in [1, MAX]; fills g's N, C, in and out. */
bool mft__pool_check_backward(const char *fn, int nsp, const mft_tensor *grad_out,
                              const mft_tensor *x, pm_geom *g);
/* The *_with_indices forms: false (message set) when indices is NULL, else
 * *indices = NULL until the call succeeds. */
bool mft__pool_indices_arg(const char *fn, const mft_tensor *x, mft_tensor **indices);
/* Output (internal and public) sizes of x's pool with geometry g, and the
 * results' format; from_in: a backward, whose result is x's gradient. */
void mft__pool_sizes(pm_exec *e, const mft_tensor *x, int nsp, const pm_geom *g, bool from_in);
/* The 2-D kernel parameters of geometry g. */
void mft__pool_params2(const pm_geom *g, mft_pool2d_params *p);
/* Runs e; returns the first result (user-owned) and, when second is set,
 * the second (user-owned); records e's node when e->rec. */
mft_tensor *mft__pool_execute(const pm_exec *e, mft_tensor **second);
/* The end of every entry point, after its dispatched run: on failure (!ok)
 * relabels the error as fn's and releases res; else hands res[0] (and res[1]
 * into *second when second is set) to the caller, registered in the innermost
 * scope, and records node (NULL: nothing to record). Releases the references
 * of res either way. */
mft_tensor *mft__pool_hand_over(const char *fn, bool ok, mft_tensor *const res[2],
                                mft_tensor **second, const pool_node *node);
/* Forward pool of nsp (1 or 3) dims (1-D runs the 2-D ops); indices set for
 * the *_with_indices forms of max. */
mft_tensor *mft__pool_forward(const char *fn, int nsp, bool is_max, const mft_tensor *x,
                              const pm_req *q, mft_tensor **indices);
/* Backward of avg pooling of nsp dims. */
mft_tensor *mft__pool_avg_backward(const char *fn, int nsp, const mft_tensor *grad_out,
                                   const mft_tensor *x, const pm_req *q);
/* Backward of any max pool (indices from the forward; windows: the 2-D
 * forward's, or NULL). */
mft_tensor *mft__pool_max_backward(const char *fn, int nsp, const mft_tensor *grad_out,
                                   const mft_tensor *x, const mft_tensor *indices,
                                   const mft_pool2d_params *windows);

/* ---------------------------------------------------------------- the fast F32 kernels
 * CONTIGUOUS F32 = NCHW (max_nchw.c, avg_nchw.c), CHANNELS_LAST F32 = NHWC
 * (NDHWC at rank 5; max_nhwc.c, avg_nhwc.c); the rank-generic ones handle
 * 2-D and 3-D (a 4-D tensor is a 5-D one with D = 1).
 *
 * Kernels that scatter (max backward, the reference backward, the NCHW avg
 * backward's fallback for rows wider than PM_TAB) give each thread whole
 * (n, c) planes (NCHW) or whole (n, channel block) images (NHWC); the avg
 * backward fast kernels gather (each grad_x element is written once). So
 * results never depend on the thread count. F32 fast kernels may round
 * differently from the reference (sums in another order, 1/divisor
 * factors), within a few ulps. */
/* Rows (work items) per parallel chunk for about 32k elements of work each. */
static inline int64_t pool_grain(int64_t work_per_row) {
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
static inline void relu_clamp_f32(float *restrict y, int64_t *restrict yi, int64_t n) {
    for (int64_t k = 0; k < n; k++) RELU_CLAMP(float, y[k], yi[k]);
}

/* The 2-D forward kernels' work: packed x (N,C,H,W) or (N,H,W,C) -> y (+ the
 * indices for max). */
typedef struct pool_job {
    const mft_pool2d_params *p;
    const float *x;
    float *y;
    int64_t *yi; /* max only */
    int64_t N, C, H, W, OH, OW;
    bool relu; /* relu_max_pool2d: each finished output row goes through RELU_CLAMP */
} pool_job;

static inline pool_job pool_job_of(const mft_kernel_args *a, bool is_max) {
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

/* The rank-generic kernels' work. */
typedef struct pm_job {
    pm_geom g;
    const float *x;  /* forward input, or grad_out */
    float *y;        /* forward output, or grad_x */
    int64_t *yi;     /* forward indices (max) */
    const int64_t *ind; /* backward indices (max) */
    int64_t cb;      /* channel blocks (NHWC max backward) */
} pm_job;

static inline pm_job pm_job_of(const pm_geom *g, const mft_kernel_args *a) {
    pm_job j;
    memset(&j, 0, sizeof j);
    j.g = *g;
    j.x = (const float *)(const void *)mft__tensor_ptr(a->inputs[0]);
    j.y = (float *)(void *)mft__tensor_ptr(a->outputs[0]);
    if (a->noutputs > 1) j.yi = (int64_t *)(void *)mft__tensor_ptr(a->outputs[1]);
    if (a->ninputs > 1) j.ind = (const int64_t *)(const void *)mft__tensor_ptr(a->inputs[1]);
    return j;
}

/* for (r = begin; r < end; r++) over the rows r = ((q * A) + a) * B + b of a
 * rank-generic kernel (q: the plane (n, c) of NCHW kernels, the image n of
 * NHWC ones; (a, b) = (od, oh) for forward output rows, (id, ih) for grad_x
 * rows), declaring q, a and b and advancing them without divisions. */
#define PM_FOR_ROWS(r, begin, end, q, a, A, b, B)                                             \
    for (int64_t b = (begin) % (B), a = ((begin) / (B)) % (A), q = (begin) / (B) / (A),        \
                 r = (begin);                                                                  \
         r < (end); r++, b = b + 1 < (B) ? b + 1 : 0, a = b ? a : (a + 1 < (A) ? a + 1 : 0),   \
                 q = (b || a) ? q : q + 1)

/* Window elements of one forward output, for the parallel grain (an
 * estimate for adaptive windows). */
static inline int64_t pm_window_work(const pm_geom *g) {
    return g->kind == PM_ADAPT ? (g->in[0] / g->out[0] + 1) * (g->in[1] / g->out[1] + 1) *
                                     (g->in[2] / g->out[2] + 1)
                               : g->k[0] * g->k[1] * g->k[2];
}

/* Runs range over the output rows of a rank-generic forward kernel, (n, c,
 * od, oh) of NCHW or (n, od, oh) of NHWC, with the grain of their window work. */
static inline void pm_fwd_rows(const pm_geom *g, pm_job *j, bool nhwc, mft__range_fn range) {
    if (nhwc) {
        const int64_t work = g->C * g->out[2] * pm_window_work(g);
        mft__parallel_for(0, g->N * g->out[0] * g->out[1], pool_grain(work), range, j);
    } else {
        const int64_t work = g->out[2] * pm_window_work(g);
        mft__parallel_for(0, g->N * g->C * g->out[0] * g->out[1], pool_grain(work), range, j);
    }
}

/* Outputs whose windows hold one input element, at most (avg backward's
 * grain). */
static inline int64_t pm_bwd_terms(const pm_geom *g) {
    int64_t t = 1;
    for (int e = 0; e < 3; e++)
        t *= g->kind == PM_ADAPT ? g->out[e] / g->in[e] + 2 : g->k[e] / g->s[e] + 1;
    return t;
}

/* Per-op fast entries: the geometry of kind from the tensors (setp: from the
 * params), then body. */
#define PM_FWD_ENTRY(name, kind, setp, body)                                                  \
    void name(const mft_kernel_args *a) {                                                      \
        pm_geom g;                                                                             \
        pm_geom_init(&g, kind, a->inputs[0], a->outputs[0]);                                   \
        setp;                                                                                  \
        body(&g, a);                                                                           \
    }
#define PM_BWD_ENTRY(name, kind, setp, body)                                                  \
    void name(const mft_kernel_args *a) {                                                      \
        pm_geom g;                                                                             \
        pm_geom_init(&g, kind, a->outputs[0], a->inputs[0]);                                   \
        setp;                                                                                  \
        body(&g, a);                                                                           \
    }

/* The kernels of the tables (kernel_table.c), by file. */
/* max_nchw.c */
void mft__pool_max_pool2d_nchw(const mft_kernel_args *a);
void mft__pool_relu_max_pool2d_nchw(const mft_kernel_args *a);
void mft__pool_max_pool3d_nchw(const mft_kernel_args *a);
void mft__pool_adaptive_max_nchw(const mft_kernel_args *a);
void mft__pool_max_backward_nchw(const mft_kernel_args *a);
/* max_nhwc.c */
void mft__pool_max_pool2d_nhwc(const mft_kernel_args *a);
void mft__pool_relu_max_pool2d_nhwc(const mft_kernel_args *a);
void mft__pool_max_pool3d_nhwc(const mft_kernel_args *a);
void mft__pool_adaptive_max_nhwc(const mft_kernel_args *a);
void mft__pool_max_backward_nhwc(const mft_kernel_args *a);
/* avg_nchw.c */
void mft__pool_avg_pool2d_nchw(const mft_kernel_args *a);
void mft__pool_avg_pool3d_nchw(const mft_kernel_args *a);
void mft__pool_adaptive_avg_nchw(const mft_kernel_args *a);
void mft__pool_avg_pool2d_backward_nchw(const mft_kernel_args *a);
void mft__pool_avg_pool3d_backward_nchw(const mft_kernel_args *a);
void mft__pool_adaptive_avg_backward_nchw(const mft_kernel_args *a);
/* avg_nhwc.c */
void mft__pool_avg_pool2d_nhwc(const mft_kernel_args *a);
void mft__pool_avg_pool3d_nhwc(const mft_kernel_args *a);
void mft__pool_adaptive_avg_nhwc(const mft_kernel_args *a);
void mft__pool_avg_pool2d_backward_nhwc(const mft_kernel_args *a);
void mft__pool_avg_pool3d_backward_nhwc(const mft_kernel_args *a);
void mft__pool_adaptive_avg_backward_nhwc(const mft_kernel_args *a);
/* blocked16_*.c: NCHW16C F32 (nChw16c; max indices I64 nChw16c too) */
/* blocked16_max.c */
void mft__pool_max_pool2d_nchw16c(const mft_kernel_args *a);
void mft__pool_relu_max_pool2d_nchw16c(const mft_kernel_args *a);
/* blocked16_max_backward.c */
void mft__pool_max_backward_nchw16c(const mft_kernel_args *a);
/* blocked16_avg.c */
void mft__pool_avg_pool2d_nchw16c(const mft_kernel_args *a);
void mft__pool_adaptive_avg_nchw16c(const mft_kernel_args *a);
/* blocked16_avg_backward.c */
void mft__pool_avg_pool2d_backward_nchw16c(const mft_kernel_args *a);
void mft__pool_adaptive_avg_backward_nchw16c(const mft_kernel_args *a);
/* True when x is a rank-4 F32 tensor packed in NCHW16C: the blocked operand
 * the kernels of blocked16_*.c take without conversion (others go through the
 * blocked fallback). indices (NULL: not checked) must be I64 packed NCHW16C. */
bool mft__pool_native16(const mft_tensor *x, const mft_tensor *indices);
/* Allocates an output packed in fmt: NCHW16C outputs are left unset when
 * only the built-in kernels (which write every lane, pads included) can
 * run, zeroed when a user kernel is registered (it may skip the pads). */
mft_tensor *mft__pool_alloc_out(const char *fn, int ndim, const int64_t *sizes, mft_dtype dtype,
                                mft_format fmt);

/* ---------------------------------------------------------------- reference.c
 * The naive kernels, which define the semantics: the 2-D forward ones in the
 * input's dtype, the rank-generic ones (the rest) computing in double. The
 * F64 ones serve the tables; the tests reach the F32 ones through these
 * lookups (also declared by the tests themselves). */
mft_kernel_fn mft__pool_reference(mft__op_id op, mft_dtype dt);
mft_kernel_fn mft__pool_more_reference(mft__op_id op, mft_dtype dt);
void mft__pool_max_pool2d_ref_F32(const mft_kernel_args *a);
void mft__pool_max_pool2d_ref_F64(const mft_kernel_args *a);
void mft__pool_avg_pool2d_ref_F32(const mft_kernel_args *a);
void mft__pool_avg_pool2d_ref_F64(const mft_kernel_args *a);
void mft__pool_relu_max_pool2d_ref_F32(const mft_kernel_args *a);
void mft__pool_relu_max_pool2d_ref_F64(const mft_kernel_args *a);
void mft__pool_max_pool3d_ref(const mft_kernel_args *a);
void mft__pool_avg_pool3d_ref(const mft_kernel_args *a);
void mft__pool_adaptive_ref(const mft_kernel_args *a);
void mft__pool_max_backward_ref(const mft_kernel_args *a);
void mft__pool_avg_pool2d_backward_ref(const mft_kernel_args *a);
void mft__pool_avg_pool3d_backward_ref(const mft_kernel_args *a);
void mft__pool_adaptive_avg_backward_ref(const mft_kernel_args *a);

#endif
