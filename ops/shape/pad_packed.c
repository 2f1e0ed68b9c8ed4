/* ops/shape/pad_packed.c — the fast kernels of pad (dispatched ops "pad" and
 * "pad_backward") on inputs and outputs packed in the kernel's format
 * (CONTIGUOUS / NCHW or CHANNELS_LAST / NHWC): the forward, a row copier
 * that serves every dtype, and the backward beside it, a row gatherer for
 * F32 and F64 that matches the reference bit for bit; then the kernel table
 * mft__kernels_pad (whose F64 forward is the reference kernel,
 * pad_reference.c). */
#include <string.h>
#include "shape_internal.h"

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
    {MFT__OP_PAD, MFT_CONTIGUOUS, MFT_F64, "pad.nchw.f64.ref", mft__pad_ref_f64},
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
