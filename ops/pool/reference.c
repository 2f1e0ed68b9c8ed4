/* ops/pool/reference.c — the naive reference kernels of every pooling op,
 * which define the semantics (PyTorch 1.13's: pool2d.c and pool_internal.h
 * state them): the 2-D forward ones (max, avg, relu_max) in the input's
 * dtype, and the rank-generic ones (3-D forward, adaptive forward, every
 * backward) computing in double. They index with the tensors' real strides,
 * so they accept any layout. The F64 ones are the tables' CONTIGUOUS F64
 * kernels (kernel_table.c); the tests reach the F32 ones through
 * mft__pool_reference and mft__pool_more_reference. */
#include "pool_internal.h"

/* ---------------------------------------------------------------- 2-D forward
 * The semantics in the simplest loops. They index with the tensors' real
 * strides, so they accept any layout (the tests call them on any). */
#define REF_KERNELS(D)                                                                        \
    void mft__pool_max_pool2d_ref_##D(const mft_kernel_args *a) {                             \
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
    void mft__pool_avg_pool2d_ref_##D(const mft_kernel_args *a) {                             \
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

/* relu_max_pool2d: max_pool2d, then RELU_CLAMP (pool_internal.h) on each output. */
#define RELU_REF(D)                                                                           \
    void mft__pool_relu_max_pool2d_ref_##D(const mft_kernel_args *a) {                        \
        typedef MFT__T_##D T;                                                                 \
        mft__pool_max_pool2d_ref_##D(a);                                                      \
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
        return dt == MFT_F32   ? mft__pool_max_pool2d_ref_F32
               : dt == MFT_F64 ? mft__pool_max_pool2d_ref_F64
                               : NULL;
    if (op == MFT__OP_RELU_MAX_POOL2D)
        return dt == MFT_F32   ? mft__pool_relu_max_pool2d_ref_F32
               : dt == MFT_F64 ? mft__pool_relu_max_pool2d_ref_F64
                               : NULL;
    if (op == MFT__OP_AVG_POOL2D)
        return dt == MFT_F32   ? mft__pool_avg_pool2d_ref_F32
               : dt == MFT_F64 ? mft__pool_avg_pool2d_ref_F64
                               : NULL;
    return NULL;
}

/* ---------------------------------------------------------------- rank-generic
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
void mft__pool_max_backward_ref(const mft_kernel_args *a) {
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
void mft__pool_max_pool3d_ref(const mft_kernel_args *a) {
    pm_geom g;
    pm_geom_init(&g, PM_MAX, a->inputs[0], a->outputs[0]);
    pm_geom_p3(&g, a->params);
    pm_fwd_ref(&g, a);
}
void mft__pool_avg_pool3d_ref(const mft_kernel_args *a) {
    pm_geom g;
    pm_geom_init(&g, PM_AVG, a->inputs[0], a->outputs[0]);
    pm_geom_p3(&g, a->params);
    pm_fwd_ref(&g, a);
}
/* Adaptive 2-D and 3-D (the output size is the output tensor's). */
void mft__pool_adaptive_ref(const mft_kernel_args *a) {
    pm_geom g;
    pm_geom_init(&g, PM_ADAPT, a->inputs[0], a->outputs[0]);
    pm_fwd_ref(&g, a);
}
void mft__pool_avg_pool2d_backward_ref(const mft_kernel_args *a) {
    pm_geom g;
    pm_geom_init(&g, PM_AVG, a->outputs[0], a->inputs[0]);
    pm_geom_p2(&g, a->params);
    pm_avgbwd_ref(&g, a);
}
void mft__pool_avg_pool3d_backward_ref(const mft_kernel_args *a) {
    pm_geom g;
    pm_geom_init(&g, PM_AVG, a->outputs[0], a->inputs[0]);
    pm_geom_p3(&g, a->params);
    pm_avgbwd_ref(&g, a);
}
void mft__pool_adaptive_avg_backward_ref(const mft_kernel_args *a) {
    pm_geom g;
    pm_geom_init(&g, PM_ADAPT, a->outputs[0], a->inputs[0]);
    pm_avgbwd_ref(&g, a);
}

mft_kernel_fn mft__pool_more_reference(mft__op_id op, mft_dtype dt) {
    if (dt != MFT_F32 && dt != MFT_F64) return NULL;
    switch (op) {
    case MFT__OP_MAX_POOL3D: return mft__pool_max_pool3d_ref;
    case MFT__OP_AVG_POOL3D: return mft__pool_avg_pool3d_ref;
    case MFT__OP_ADAPTIVE_AVG_POOL2D:
    case MFT__OP_ADAPTIVE_MAX_POOL2D:
    case MFT__OP_ADAPTIVE_AVG_POOL3D:
    case MFT__OP_ADAPTIVE_MAX_POOL3D: return mft__pool_adaptive_ref;
    case MFT__OP_MAX_POOL2D_BACKWARD:
    case MFT__OP_MAX_POOL3D_BACKWARD: return mft__pool_max_backward_ref;
    case MFT__OP_AVG_POOL2D_BACKWARD: return mft__pool_avg_pool2d_backward_ref;
    case MFT__OP_AVG_POOL3D_BACKWARD: return mft__pool_avg_pool3d_backward_ref;
    case MFT__OP_ADAPTIVE_AVG_POOL2D_BACKWARD:
    case MFT__OP_ADAPTIVE_AVG_POOL3D_BACKWARD:
        return mft__pool_adaptive_avg_backward_ref;
    default: return NULL;
    }
}
