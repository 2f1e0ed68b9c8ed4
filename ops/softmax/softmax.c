/* ops/softmax/softmax.c — softmax and log_softmax along one dim (mft/cnn.h), through
 * the kernel dispatcher (docs/architecture.md §7). Results are packed in the input's tag
 * for rank 3-5, else contiguous (docs/spec.md §4; deviation: PyTorch 1.13 returns
 * contiguous strides).
 *
 * Kernels:
 *   - reference (F32 and F64): the plain three-pass formula (max, sum of
 *     exp(x - max) in double, divide / subtract the log) along dim, read and
 *     written through the real strides (so it accepts any layout). The F64
 *     one is the built-in CONTIGUOUS F64 kernel; both are exposed to tests
 *     through mft__softmax_reference.
 *   - fast F32, one function for CONTIGUOUS and CHANNELS_LAST (Note [Softmax
 *     in memory terms]).
 *
 * Note [Softmax in memory terms]
 * In a packed tensor the softmax dim has stride `inner` (the number of
 * elements physically faster than it), so the data is [outer, len, inner].
 * inner == 1 (last dim of NCHW, C of NHWC): each row is contiguous; the max
 * and sum passes use 16 fixed lanes (vectorisable, fixed order). inner > 1
 * (C of NCHW, ...): blocks of up to SMX_COLS columns are processed together
 * with running max / sum arrays, so every pass streams contiguous memory.
 * Work items (rows, or (outer, column block) pairs) are split over threads
 * with mft__parallel_for; each row / column is computed by exactly one
 * thread in the same order, so results are bit-identical for every thread
 * count. Input and output are packed in the same format, so one memory offset
 * names the same logical element in both (strides of size-1 dims may differ,
 * which is why len == 1 is treated as [numel, 1, 1]).
 *
 * Backward (SOFTMAX_BACKWARD / LOG_SOFTMAX_BACKWARD; inputs {grad_out, out},
 * outputs {grad_x}, params mft_softmax_params; out is the forward's result):
 *   softmax:     grad_x = y * (g - sum_dim(g * y))
 *   log_softmax: grad_x = g - exp(out) * sum_dim(g)
 * Reference (F32, F64; any strides, sums in double; F64 kernels of both
 * formats) and fast F32 kernels with the forward's structure (rows when the
 * dim is physically innermost, else column blocks), sums in double in a
 * fixed order, each element written once.
 *
 * Autograd: mft_softmax / mft_log_softmax record one node (output saved)
 * whose backward calls the public backward above (softmax_entry).
 *
 * NaN and infinities follow PyTorch: any NaN or +inf in a row, or a row of
 * only -inf, gives a NaN row (inf - inf); -inf elements otherwise give 0
 * (softmax) / -inf (log_softmax). */
#include <string.h>
#include "autograd_internal.h"
#include "mft/cnn.h"
#include "ops_internal.h"
#include "blocked_outputs.h"

/* Note [Kernel tables]: the built-in kernels this family dispatches to. */
static const mft__kernel_def *const g_tables[] = {mft__kernels_softmax, NULL};

/* ---------------------------------------------------------------- reference */
#define SMX_REF(D)                                                                             \
    static void softmax_ref_run_##D(const mft_kernel_args *a, bool lg) {                       \
        typedef MFT__T_##D T;                                                                  \
        const mft_tensor *x = a->inputs[0];                                                    \
        mft_tensor *y = a->outputs[0];                                                         \
        const int dim = ((const mft_softmax_params *)a->params)->dim;                          \
        if (x->numel == 0) return;                                                             \
        const int nd = x->ndim;                                                                \
        const int64_t len = x->sizes[dim], xs = x->strides[dim], ys = y->strides[dim];         \
        const int64_t rows = x->numel / len;                                                   \
        const T *xp = (const T *)(const void *)mft__tensor_ptr(x);                             \
        T *yp = (T *)(void *)mft__tensor_ptr(y);                                               \
        int64_t idx[MFT_MAX_DIMS] = {0};                                                       \
        for (int64_t r = 0; r < rows; r++) {                                                   \
            int64_t xo = 0, yo = 0;                                                            \
            for (int d = 0; d < nd; d++) {                                                     \
                xo += idx[d] * x->strides[d];                                                  \
                yo += idx[d] * y->strides[d];                                                  \
            }                                                                                  \
            double m = -INFINITY;                                                              \
            for (int64_t k = 0; k < len; k++) {                                                \
                double v = (double)xp[xo + k * xs];                                            \
                if (v > m || v != v) m = v;                                                    \
                if (m != m) break;                                                             \
            }                                                                                  \
            double s = 0.0;                                                                    \
            for (int64_t k = 0; k < len; k++) s += exp((double)xp[xo + k * xs] - m);           \
            const double ls = log(s);                                                          \
            for (int64_t k = 0; k < len; k++) {                                                \
                double v = (double)xp[xo + k * xs] - m;                                        \
                yp[yo + k * ys] = (T)(lg ? v - ls : exp(v) / s);                               \
            }                                                                                  \
            /* next index over the dims other than dim, row-major */                          \
            for (int d = nd - 1; d >= 0; d--) {                                                \
                if (d == dim) continue;                                                        \
                if (++idx[d] < x->sizes[d]) break;                                             \
                idx[d] = 0;                                                                    \
            }                                                                                  \
        }                                                                                      \
    }                                                                                          \
    static void softmax_ref_##D(const mft_kernel_args *a) { softmax_ref_run_##D(a, false); }   \
    static void log_softmax_ref_##D(const mft_kernel_args *a) { softmax_ref_run_##D(a, true); }
SMX_REF(F32)
SMX_REF(F64)

/* ---------------------------------------------------------------- fast F32 */
#define SMX_LANES 16
#define SMX_COLS 256
#define SMX_GRAIN 16384 /* elements per parallel chunk, at least */

typedef struct smx_job {
    const float *x;
    float *y;
    int64_t outer, len, inner, nblocks;
    bool lg;
} smx_job;

/* NaN is not kept here: a NaN element makes the row's sum NaN, and so every
 * output of the row, exactly as a NaN maximum would. The plain compare lets
 * the compiler vectorise (maxps). */
static inline float smx_max(float m, float v) { return v > m ? v : m; }

/* One contiguous row of n elements. */
static void smx_row(const float *restrict x, float *restrict y, int64_t n, bool lg) {
    /* max is exact, so lanes combined in any order give the same m (a NaN
     * never wins a comparison, in a lane or when lanes combine) */
    float lane[16];
    for (int k = 0; k < 16; k++) lane[k] = -INFINITY;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int k = 0; k < 16; k++) lane[k] = smx_max(lane[k], x[i + k]);
    float m = -INFINITY;
    for (; i < n; i++) m = smx_max(m, x[i]);
    for (int k = 0; k < 16; k++) m = smx_max(m, lane[k]);

    double s[SMX_LANES] = {0};
    i = 0;
    if (lg) {
        for (; i + SMX_LANES <= n; i += SMX_LANES)
            for (int k = 0; k < SMX_LANES; k++) s[k] += (double)expf(x[i + k] - m);
        for (; i < n; i++) s[0] += (double)expf(x[i] - m);
    } else {
        for (; i + SMX_LANES <= n; i += SMX_LANES)
            for (int k = 0; k < SMX_LANES; k++) {
                const float e = expf(x[i + k] - m);
                y[i + k] = e;
                s[k] += (double)e;
            }
        for (; i < n; i++) {
            const float e = expf(x[i] - m);
            y[i] = e;
            s[0] += (double)e;
        }
    }
    for (int k = SMX_LANES / 2; k > 0; k /= 2)
        for (int q = 0; q < k; q++) s[q] += s[q + k];
    if (lg) {
        const float ls = (float)log(s[0]);
        for (i = 0; i < n; i++) y[i] = (x[i] - m) - ls;
    } else {
        const float inv = (float)(1.0 / s[0]);
        for (i = 0; i < n; i++) y[i] *= inv;
    }
}

static void smx_rows(void *vjob, int64_t begin, int64_t end) {
    const smx_job *j = vjob;
    for (int64_t r = begin; r < end; r++) smx_row(j->x + r * j->len, j->y + r * j->len, j->len, j->lg);
}

/* w (<= SMX_COLS) columns, rows `inner` apart. */
static void smx_cols(const float *restrict x, float *restrict y, int64_t len, int64_t inner,
                     int64_t w, bool lg) {
    float m[SMX_COLS], t[SMX_COLS];
    double s[SMX_COLS];
    for (int64_t i = 0; i < w; i++) m[i] = -INFINITY;
    for (int64_t k = 0; k < len; k++) {
        const float *xr = x + k * inner;
        for (int64_t i = 0; i < w; i++) m[i] = smx_max(m[i], xr[i]);
    }
    for (int64_t i = 0; i < w; i++) s[i] = 0.0;
    for (int64_t k = 0; k < len; k++) {
        const float *xr = x + k * inner;
        float *yr = y + k * inner;
        if (lg)
            for (int64_t i = 0; i < w; i++) s[i] += (double)expf(xr[i] - m[i]);
        else
            for (int64_t i = 0; i < w; i++) {
                const float e = expf(xr[i] - m[i]);
                yr[i] = e;
                s[i] += (double)e;
            }
    }
    if (lg) {
        for (int64_t i = 0; i < w; i++) t[i] = (float)log(s[i]);
        for (int64_t k = 0; k < len; k++) {
            const float *xr = x + k * inner;
            float *yr = y + k * inner;
            for (int64_t i = 0; i < w; i++) yr[i] = (xr[i] - m[i]) - t[i];
        }
    } else {
        for (int64_t i = 0; i < w; i++) t[i] = (float)(1.0 / s[i]);
        for (int64_t k = 0; k < len; k++) {
            float *yr = y + k * inner;
            for (int64_t i = 0; i < w; i++) yr[i] *= t[i];
        }
    }
}

static void smx_blocks(void *vjob, int64_t begin, int64_t end) {
    const smx_job *j = vjob;
    for (int64_t it = begin; it < end; it++) {
        const int64_t o = it / j->nblocks, c0 = (it % j->nblocks) * SMX_COLS;
        const int64_t w = j->inner - c0 < SMX_COLS ? j->inner - c0 : SMX_COLS;
        const int64_t base = o * j->len * j->inner + c0;
        smx_cols(j->x + base, j->y + base, j->len, j->inner, w, j->lg);
    }
}

static void softmax_fast_run(const mft_kernel_args *a, bool lg) {
    const mft_tensor *x = a->inputs[0];
    mft_tensor *y = a->outputs[0];
    const int dim = ((const mft_softmax_params *)a->params)->dim;
    if (x->numel == 0) return;
    smx_job j;
    j.x = (const float *)(const void *)mft__tensor_ptr(x);
    j.y = (float *)(void *)mft__tensor_ptr(y);
    j.lg = lg;
    j.len = x->sizes[dim];
    j.inner = j.len > 1 ? x->strides[dim] : 1;
    j.outer = x->numel / (j.len * j.inner);
    if (j.inner == 1) {
        j.nblocks = 1;
        int64_t grain = SMX_GRAIN / j.len;
        mft__parallel_for(0, j.outer, grain < 1 ? 1 : grain, smx_rows, &j);
    } else {
        j.nblocks = (j.inner + SMX_COLS - 1) / SMX_COLS;
        int64_t per = j.len * (j.inner < SMX_COLS ? j.inner : SMX_COLS);
        int64_t grain = SMX_GRAIN / per;
        mft__parallel_for(0, j.outer * j.nblocks, grain < 1 ? 1 : grain, smx_blocks, &j);
    }
}

static void softmax_fast_f32(const mft_kernel_args *a) { softmax_fast_run(a, false); }
static void log_softmax_fast_f32(const mft_kernel_args *a) { softmax_fast_run(a, true); }

/* ---------------------------------------------------------------- backward */
#define SMXB_REF(D)                                                                            \
    static void softmax_bwd_ref_run_##D(const mft_kernel_args *a, bool lg) {                   \
        typedef MFT__T_##D T;                                                                  \
        const mft_tensor *g = a->inputs[0], *o = a->inputs[1];                                 \
        mft_tensor *y = a->outputs[0];                                                         \
        const int dim = ((const mft_softmax_params *)a->params)->dim;                          \
        if (o->numel == 0) return;                                                             \
        const int nd = o->ndim;                                                                \
        const int64_t len = o->sizes[dim], gs = g->strides[dim], os = o->strides[dim];         \
        const int64_t ys = y->strides[dim], rows = o->numel / len;                             \
        const T *gp = (const T *)(const void *)mft__tensor_ptr(g);                             \
        const T *op = (const T *)(const void *)mft__tensor_ptr(o);                             \
        T *yp = (T *)(void *)mft__tensor_ptr(y);                                               \
        int64_t idx[MFT_MAX_DIMS] = {0};                                                       \
        for (int64_t r = 0; r < rows; r++) {                                                   \
            int64_t go = 0, oo = 0, yo = 0;                                                    \
            for (int d = 0; d < nd; d++) {                                                     \
                go += idx[d] * g->strides[d];                                                  \
                oo += idx[d] * o->strides[d];                                                  \
                yo += idx[d] * y->strides[d];                                                  \
            }                                                                                  \
            double s = 0.0;                                                                    \
            for (int64_t k = 0; k < len; k++)                                                  \
                s += lg ? (double)gp[go + k * gs]                                              \
                        : (double)gp[go + k * gs] * (double)op[oo + k * os];                   \
            for (int64_t k = 0; k < len; k++) {                                                \
                const double gv = (double)gp[go + k * gs], ov = (double)op[oo + k * os];      \
                yp[yo + k * ys] = (T)(lg ? gv - exp(ov) * s : ov * (gv - s));                  \
            }                                                                                  \
            for (int d = nd - 1; d >= 0; d--) {                                                \
                if (d == dim) continue;                                                        \
                if (++idx[d] < o->sizes[d]) break;                                             \
                idx[d] = 0;                                                                    \
            }                                                                                  \
        }                                                                                      \
    }                                                                                          \
    static void softmax_bwd_ref_##D(const mft_kernel_args *a) {                                \
        softmax_bwd_ref_run_##D(a, false);                                                     \
    }                                                                                          \
    static void log_softmax_bwd_ref_##D(const mft_kernel_args *a) {                            \
        softmax_bwd_ref_run_##D(a, true);                                                      \
    }
SMXB_REF(F32)
SMXB_REF(F64)

typedef struct smxb_job {
    const float *g, *o;
    float *y;
    int64_t outer, len, inner, nblocks;
    bool lg;
} smxb_job;

/* One contiguous row: g, o, y of n elements. */
static void smxb_row(const float *restrict g, const float *restrict o, float *restrict y,
                     int64_t n, bool lg) {
    double s[SMX_LANES] = {0};
    int64_t i = 0;
    if (lg) {
        for (; i + SMX_LANES <= n; i += SMX_LANES)
            for (int k = 0; k < SMX_LANES; k++) s[k] += (double)g[i + k];
        for (; i < n; i++) s[0] += (double)g[i];
    } else {
        for (; i + SMX_LANES <= n; i += SMX_LANES)
            for (int k = 0; k < SMX_LANES; k++) s[k] += (double)g[i + k] * (double)o[i + k];
        for (; i < n; i++) s[0] += (double)g[i] * (double)o[i];
    }
    for (int k = SMX_LANES / 2; k > 0; k /= 2)
        for (int q = 0; q < k; q++) s[q] += s[q + k];
    const float sf = (float)s[0];
    if (lg)
        for (i = 0; i < n; i++) y[i] = g[i] - expf(o[i]) * sf;
    else
        for (i = 0; i < n; i++) y[i] = o[i] * (g[i] - sf);
}

static void smxb_rows(void *vjob, int64_t begin, int64_t end) {
    const smxb_job *j = vjob;
    for (int64_t r = begin; r < end; r++)
        smxb_row(j->g + r * j->len, j->o + r * j->len, j->y + r * j->len, j->len, j->lg);
}

/* w (<= SMX_COLS) columns, rows `inner` apart. */
static void smxb_cols(const float *restrict g, const float *restrict o, float *restrict y,
                      int64_t len, int64_t inner, int64_t w, bool lg) {
    double s[SMX_COLS];
    float t[SMX_COLS];
    for (int64_t i = 0; i < w; i++) s[i] = 0.0;
    for (int64_t k = 0; k < len; k++) {
        const float *gr = g + k * inner, *orow = o + k * inner;
        if (lg)
            for (int64_t i = 0; i < w; i++) s[i] += (double)gr[i];
        else
            for (int64_t i = 0; i < w; i++) s[i] += (double)gr[i] * (double)orow[i];
    }
    for (int64_t i = 0; i < w; i++) t[i] = (float)s[i];
    for (int64_t k = 0; k < len; k++) {
        const float *gr = g + k * inner, *orow = o + k * inner;
        float *yr = y + k * inner;
        if (lg)
            for (int64_t i = 0; i < w; i++) yr[i] = gr[i] - expf(orow[i]) * t[i];
        else
            for (int64_t i = 0; i < w; i++) yr[i] = orow[i] * (gr[i] - t[i]);
    }
}

static void smxb_blocks(void *vjob, int64_t begin, int64_t end) {
    const smxb_job *j = vjob;
    for (int64_t it = begin; it < end; it++) {
        const int64_t o = it / j->nblocks, c0 = (it % j->nblocks) * SMX_COLS;
        const int64_t w = j->inner - c0 < SMX_COLS ? j->inner - c0 : SMX_COLS;
        const int64_t base = o * j->len * j->inner + c0;
        smxb_cols(j->g + base, j->o + base, j->y + base, j->len, j->inner, w, j->lg);
    }
}

/* grad_out, out and grad_x packed in one format (Note [Softmax in memory
 * terms]; the dim's stride in out decides inner). */
static void softmax_bwd_fast_run(const mft_kernel_args *a, bool lg) {
    const mft_tensor *o = a->inputs[1];
    const int dim = ((const mft_softmax_params *)a->params)->dim;
    if (o->numel == 0) return;
    smxb_job j;
    j.g = (const float *)(const void *)mft__tensor_ptr(a->inputs[0]);
    j.o = (const float *)(const void *)mft__tensor_ptr(o);
    j.y = (float *)(void *)mft__tensor_ptr(a->outputs[0]);
    j.lg = lg;
    j.len = o->sizes[dim];
    j.inner = j.len > 1 ? o->strides[dim] : 1;
    j.outer = o->numel / (j.len * j.inner);
    if (j.inner == 1) {
        j.nblocks = 1;
        int64_t grain = SMX_GRAIN / j.len;
        mft__parallel_for(0, j.outer, grain < 1 ? 1 : grain, smxb_rows, &j);
    } else {
        j.nblocks = (j.inner + SMX_COLS - 1) / SMX_COLS;
        int64_t per = j.len * (j.inner < SMX_COLS ? j.inner : SMX_COLS);
        int64_t grain = SMX_GRAIN / per;
        mft__parallel_for(0, j.outer * j.nblocks, grain < 1 ? 1 : grain, smxb_blocks, &j);
    }
}
static void softmax_bwd_fast_f32(const mft_kernel_args *a) { softmax_bwd_fast_run(a, false); }
static void log_softmax_bwd_fast_f32(const mft_kernel_args *a) { softmax_bwd_fast_run(a, true); }

/* ---------------------------------------------------------------- table */
const mft__kernel_def mft__kernels_softmax[] = {
    {MFT__OP_SOFTMAX, MFT_CONTIGUOUS, MFT_F32, "softmax.nchw.f32", softmax_fast_f32},
    {MFT__OP_SOFTMAX, MFT_CHANNELS_LAST, MFT_F32, "softmax.nhwc.f32", softmax_fast_f32},
    {MFT__OP_SOFTMAX, MFT_CONTIGUOUS, MFT_F64, "softmax.nchw.f64.ref", softmax_ref_F64},
    {MFT__OP_LOG_SOFTMAX, MFT_CONTIGUOUS, MFT_F32, "log_softmax.nchw.f32", log_softmax_fast_f32},
    {MFT__OP_LOG_SOFTMAX, MFT_CHANNELS_LAST, MFT_F32, "log_softmax.nhwc.f32",
     log_softmax_fast_f32},
    {MFT__OP_LOG_SOFTMAX, MFT_CONTIGUOUS, MFT_F64, "log_softmax.nchw.f64.ref", log_softmax_ref_F64},
    {MFT__OP_SOFTMAX_BACKWARD, MFT_CONTIGUOUS, MFT_F32, "softmax_backward.nchw.f32",
     softmax_bwd_fast_f32},
    {MFT__OP_SOFTMAX_BACKWARD, MFT_CHANNELS_LAST, MFT_F32, "softmax_backward.nhwc.f32",
     softmax_bwd_fast_f32},
    {MFT__OP_SOFTMAX_BACKWARD, MFT_CONTIGUOUS, MFT_F64, "softmax_backward.nchw.f64.ref",
     softmax_bwd_ref_F64},
    {MFT__OP_SOFTMAX_BACKWARD, MFT_CHANNELS_LAST, MFT_F64, "softmax_backward.nhwc.f64.ref",
     softmax_bwd_ref_F64},
    {MFT__OP_LOG_SOFTMAX_BACKWARD, MFT_CONTIGUOUS, MFT_F32, "log_softmax_backward.nchw.f32",
     log_softmax_bwd_fast_f32},
    {MFT__OP_LOG_SOFTMAX_BACKWARD, MFT_CHANNELS_LAST, MFT_F32, "log_softmax_backward.nhwc.f32",
     log_softmax_bwd_fast_f32},
    {MFT__OP_LOG_SOFTMAX_BACKWARD, MFT_CONTIGUOUS, MFT_F64, "log_softmax_backward.nchw.f64.ref",
     log_softmax_bwd_ref_F64},
    {MFT__OP_LOG_SOFTMAX_BACKWARD, MFT_CHANNELS_LAST, MFT_F64,
     "log_softmax_backward.nhwc.f64.ref", log_softmax_bwd_ref_F64},
    {0, 0, 0, NULL, NULL},
};

/* The reference kernels ("softmax.nchw.f32.ref", ...), for tests: they read
 * and write through the real strides, so any layout works. NULL for other
 * dtypes. (Declared here: ops_internal.h is not this file's to change.) */
mft_kernel_fn mft__softmax_reference(int log, mft_dtype dt);
mft_kernel_fn mft__softmax_reference(int log, mft_dtype dt) {
    if (dt == MFT_F32) return log ? log_softmax_ref_F32 : softmax_ref_F32;
    if (dt == MFT_F64) return log ? log_softmax_ref_F64 : softmax_ref_F64;
    return NULL;
}

/* Backward references, for tests (same contract). */
mft_kernel_fn mft__softmax_backward_reference(int log, mft_dtype dt);
mft_kernel_fn mft__softmax_backward_reference(int log, mft_dtype dt) {
    if (dt == MFT_F32) return log ? log_softmax_bwd_ref_F32 : softmax_bwd_ref_F32;
    if (dt == MFT_F64) return log ? log_softmax_bwd_ref_F64 : softmax_bwd_ref_F64;
    return NULL;
}

/* ---------------------------------------------------------------- entry points */
static mft_tensor *softmax_impl(const char *fn, mft__op_id op, const mft_tensor *x, int dim) {
    if (!x) {
        mft__null_arg(fn, "x");
        return NULL;
    }
    if (x->ndim < 1) {
        mft__set_error(MFT_ERR_RANK, "%s: needs a tensor of rank >= 1, got rank 0", fn);
        return NULL;
    }
    const int d = mft__wrap_dim(fn, dim, x->ndim);
    if (d < 0) return NULL;
    if (x->dtype != MFT_F32 && x->dtype != MFT_F64) {
        mft__set_error(MFT_ERR_DTYPE, "%s: dtype %s is not supported (f32 or f64 only)", fn,
                       mft_dtype_name(x->dtype));
        return NULL;
    }
    const mft__decision dec = mft__rule_decide(MFT__RULE_SOFTMAX, fn + 4, 1, &x, MFT_CONTIGUOUS, 0);
    const mft_format fmt = dec.tag;
    const mft_softmax_params p = {d};

    /* internal until the dispatch succeeded: not the user's scope result yet */
    mft__scope_suspend();
    mft_tensor *res = mft__tensor_alloc(fn, x->ndim, x->sizes, x->dtype, fmt);
    bool ok = res != NULL;
    if (ok) {
        const mft_tensor *ins[1] = {x};
        const bool convert[1] = {true};
        mft_tensor *outs[1] = {res};
        ok = mft__dispatch(fn, g_tables, op, fmt, x->dtype, 1, ins, convert, 1, outs, &p) == MFT_OK;
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

/* Autograd (docs/architecture.md §8): one node per call, the output saved (both
 * backward formulas read only y / log y); grad_x comes packed in the
 * output's tag, which is the input's (docs/spec.md §5, no conversion). */
typedef struct softmax_ag_params {
    int dim;
    bool log;
} softmax_ag_params;

static mft_status softmax_node_backward(const mft__ag_node *n, mft_tensor *const *gout,
                                        mft_tensor **gin) {
    const softmax_ag_params *p = n->params;
    gin[0] = p->log ? mft_log_softmax_backward(gout[0], n->saved[0], p->dim)
                    : mft_softmax_backward(gout[0], n->saved[0], p->dim);
    return gin[0] ? MFT_OK : mft_last_error();
}

/* The entry point: without a recording tape the plain forward; with one,
 * the forward runs with grad mode off and the user's scope suspended (its
 * helpers neither record nor register), the node is recorded, then the
 * result is handed over like any op result. */
static mft_tensor *softmax_entry(const char *fn, mft__op_id op, const mft_tensor *x, int dim) {
    if (!mft__ag_wants(1, &x)) return softmax_impl(fn, op, x, dim);
    mft__scope_suspend();
    const bool prev = mft_set_grad_enabled(false);
    mft_tensor *y = softmax_impl(fn, op, x, dim);
    mft_set_grad_enabled(prev);
    mft__scope_resume();
    if (!y) return NULL;
    const softmax_ag_params p = {dim, op == MFT__OP_LOG_SOFTMAX};
    if (mft__ag_record1(fn, p.log ? "log_softmax" : "softmax", softmax_node_backward, x, y, false,
                        true, &p, sizeof p) != MFT_OK) {
        mft_tensor_release(y);
        return NULL;
    }
    mft_tensor *r = mft__retain_result(fn, y);
    mft_tensor_release(y);
    return r;
}

mft_tensor *mft_softmax(const mft_tensor *x, int dim) {
    MFT__BLOCKED_FALLBACK("softmax", mft_softmax(x, dim), 1, &x);
    return softmax_entry("mft_softmax", MFT__OP_SOFTMAX, x, dim);
}

mft_tensor *mft_log_softmax(const mft_tensor *x, int dim) {
    MFT__BLOCKED_FALLBACK("log_softmax", mft_log_softmax(x, dim), 1, &x);
    return softmax_entry("mft_log_softmax", MFT__OP_LOG_SOFTMAX, x, dim);
}

static mft_tensor *softmax_bwd_impl(const char *fn, mft__op_id op, const mft_tensor *g,
                                    const mft_tensor *o, int dim) {
    if (!g) {
        mft__null_arg(fn, "grad_out");
        return NULL;
    }
    if (!o) {
        mft__null_arg(fn, "out");
        return NULL;
    }
    if (o->ndim < 1) {
        mft__set_error(MFT_ERR_RANK, "%s: needs a tensor of rank >= 1, got rank 0", fn);
        return NULL;
    }
    bool same = g->ndim == o->ndim;
    for (int k = 0; same && k < o->ndim; k++) same = g->sizes[k] == o->sizes[k];
    if (!same) {
        char b1[MFT__DIMS_BUF], b2[MFT__DIMS_BUF];
        mft__set_error(MFT_ERR_SHAPE, "%s: grad_out has shape %s, out has %s", fn,
                       mft__fmt_dims(b1, sizeof b1, g->ndim, g->sizes),
                       mft__fmt_dims(b2, sizeof b2, o->ndim, o->sizes));
        return NULL;
    }
    const int d = mft__wrap_dim(fn, dim, o->ndim);
    if (d < 0) return NULL;
    if (o->dtype != MFT_F32 && o->dtype != MFT_F64) {
        mft__set_error(MFT_ERR_DTYPE, "%s: dtype %s is not supported (f32 or f64 only)", fn,
                       mft_dtype_name(o->dtype));
        return NULL;
    }
    if (g->dtype != o->dtype) {
        mft__set_error(MFT_ERR_DTYPE, "%s: grad_out has dtype %s, out has %s", fn,
                       mft_dtype_name(g->dtype), mft_dtype_name(o->dtype));
        return NULL;
    }
    const mft__decision dec = mft__rule_decide(MFT__RULE_BACKWARD, fn + 4, 1, &o, MFT_CONTIGUOUS, 0);
    const mft_format fmt = dec.tag;
    const mft_softmax_params p = {d};
    mft__scope_suspend();
    mft_tensor *res = mft__tensor_alloc(fn, o->ndim, o->sizes, o->dtype, fmt);
    bool ok = res != NULL;
    if (ok) {
        const mft_tensor *ins[2] = {g, o};
        const bool convert[2] = {true, true};
        mft_tensor *outs[1] = {res};
        ok = mft__dispatch(fn, g_tables, op, fmt, o->dtype, 2, ins, convert, 1, outs, &p) == MFT_OK;
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

mft_tensor *mft_softmax_backward(const mft_tensor *grad_out, const mft_tensor *out, int dim) {
    MFT__BLOCKED_FALLBACK_LIKE("softmax_backward", out, mft_softmax_backward(grad_out, out, dim), 2,
                               &grad_out, &out);
    return softmax_bwd_impl("mft_softmax_backward", MFT__OP_SOFTMAX_BACKWARD, grad_out, out, dim);
}

mft_tensor *mft_log_softmax_backward(const mft_tensor *grad_out, const mft_tensor *out,
                                     int dim) {
    MFT__BLOCKED_FALLBACK_LIKE("log_softmax_backward", out,
                               mft_log_softmax_backward(grad_out, out, dim), 2, &grad_out, &out);
    return softmax_bwd_impl("mft_log_softmax_backward", MFT__OP_LOG_SOFTMAX_BACKWARD, grad_out,
                            out, dim);
}
