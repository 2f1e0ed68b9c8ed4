/* ops/conv/reference.c — the naive reference kernels of the six dispatched
 * convolution ops (conv2d, conv3d and their _backward_input /
 * _backward_weight ops), which define the semantics (PyTorch's), for F32
 * and F64 in any layout, and their kernel table mft__kernels_conv (searched
 * after the fast kernels' table of chains.c). Called through mft__dispatch
 * from the entry points of entry.c, and directly by the tests
 * (mft__conv_reference). */
#include "conv_internal.h"

/* ---------------------------------------------------------------- reference kernels
 * Every tensor is seen as 5-D (N, C, D, H, W) through its real strides (a
 * 4-D tensor gets D = 1, stride 0), so the kernels accept any layout. They
 * accumulate in double. Work items are disjoint output slices, each computed
 * by one thread in a fixed order: results do not depend on the thread count. */
typedef struct conv_t5 {
    char *data;
    int64_t size[5], stride[5]; /* elements */
} conv_t5;

static conv_t5 conv_t5_of(const mft_tensor *t) {
    conv_t5 v;
    v.data = mft__tensor_ptr(t);
    if (t->ndim == 5) {
        for (int d = 0; d < 5; d++) {
            v.size[d] = t->sizes[d];
            v.stride[d] = t->strides[d];
        }
    } else {
        v.size[0] = t->sizes[0];
        v.size[1] = t->sizes[1];
        v.size[2] = 1;
        v.size[3] = t->sizes[2];
        v.size[4] = t->sizes[3];
        v.stride[0] = t->strides[0];
        v.stride[1] = t->strides[1];
        v.stride[2] = 0;
        v.stride[3] = t->strides[2];
        v.stride[4] = t->strides[3];
    }
    return v;
}

typedef struct conv_job {
    conv_t5 a, b, o;     /* the two inputs and the output */
    int64_t s[3], p[3], d[3]; /* D, H, W */
    int64_t groups;
    const char *bias;
    int64_t bias_stride;
} conv_job;

static conv_job conv_job_of(const mft_kernel_args *args) {
    const mft_conv_params *p = args->params;
    conv_job j;
    j.a = conv_t5_of(args->inputs[0]);
    j.b = conv_t5_of(args->inputs[1]);
    j.o = conv_t5_of(args->outputs[0]);
    const int first = 3 - p->nspatial;
    for (int d = 0; d < 3; d++) {
        j.s[d] = d < first ? 1 : p->stride[d - first];
        j.p[d] = d < first ? 0 : p->padding[d - first];
        j.d[d] = d < first ? 1 : p->dilation[d - first];
    }
    j.groups = p->groups;
    j.bias = p->bias ? mft__tensor_ptr(p->bias) : NULL;
    j.bias_stride = p->bias ? p->bias->strides[0] : 0;
    return j;
}

static inline int64_t conv_off(const conv_t5 *t, int64_t n, int64_t c, int64_t z, int64_t y,
                               int64_t x) {
    return n * t->stride[0] + c * t->stride[1] + z * t->stride[2] + y * t->stride[3] +
           x * t->stride[4];
}

/* The k in [0, K) with 0 <= base + k*step < I, as [*k0, *k1) (empty: k0 ==
 * k1). Forward: base = o*stride - pad, step = dilation, over kernel taps;
 * backward_weight: base = k*dilation - pad, step = stride, over outputs. */
static inline void conv_range(int64_t base, int64_t step, int64_t I, int64_t K, int64_t *k0,
                              int64_t *k1) {
    int64_t lo = base >= 0 ? 0 : (-base + step - 1) / step;
    int64_t hi = I - 1 - base < 0 ? 0 : (I - 1 - base) / step + 1;
    if (hi > K) hi = K;
    *k0 = lo < hi ? lo : hi;
    *k1 = hi;
}

/* Per dtype D (T = its C type), three range functions over work items:
 *
 * forward: a = x (N, C_in, D, H, W), b = w (C_out, C_in/g, kD, kH, kW),
 * o = y (N, C_out, OD, OH, OW). Work item (n, co); y = bias + sum over the
 * group's input channels and the taps that land inside x.
 *
 * backward_input: a = grad_y (N, C_out, OD, OH, OW), b = w, o = grad_x (N,
 * C_in, D, H, W). Work item (n, ci); grad_x = bias + sum over the group's
 * output channels and taps k with (i + pad - k*dil) a multiple of stride
 * whose quotient is a valid output position.
 *
 * backward_weight: a = grad_y, b = x, o = grad_w (C_out, C_in/g, kD, kH,
 * kW). Work item (co, ci_local); grad_w = sum over n and the outputs whose
 * tap lands inside x. Sums run in double, in a fixed order. */
#define CONV_REF_RANGES(D)                                                                        \
    static void conv_fwd_range_##D(void *ctx, int64_t begin, int64_t end) {                       \
        typedef MFT__T_##D T;                                                                     \
        const conv_job *j = ctx;                                                                  \
        const conv_t5 *x = &j->a, *w = &j->b, *y = &j->o;                                        \
        const T *xd = (const T *)(const void *)x->data, *wd = (const T *)(const void *)w->data;   \
        T *yd = (T *)(void *)y->data;                                                             \
        const int64_t Co = y->size[1], cig = w->size[1], cog = Co / j->groups;                    \
        for (int64_t it = begin; it < end; it++) {                                                \
            const int64_t n = it / Co, co = it % Co, c0 = (co / cog) * cig;                       \
            const double bias =                                                                   \
                j->bias ? (double)((const T *)(const void *)j->bias)[co * j->bias_stride] : 0.0;  \
            for (int64_t oz = 0; oz < y->size[2]; oz++) {                                         \
                int64_t z0, z1;                                                                   \
                conv_range(oz * j->s[0] - j->p[0], j->d[0], x->size[2], w->size[2], &z0, &z1);    \
                for (int64_t oy = 0; oy < y->size[3]; oy++) {                                     \
                    int64_t y0, y1;                                                               \
                    conv_range(oy * j->s[1] - j->p[1], j->d[1], x->size[3], w->size[3], &y0,     \
                               &y1);                                                              \
                    for (int64_t ox = 0; ox < y->size[4]; ox++) {                                 \
                        int64_t x0, x1;                                                           \
                        conv_range(ox * j->s[2] - j->p[2], j->d[2], x->size[4], w->size[4], &x0, \
                                   &x1);                                                          \
                        double acc = bias;                                                        \
                        for (int64_t ci = 0; ci < cig; ci++)                                      \
                            for (int64_t kz = z0; kz < z1; kz++)                                  \
                                for (int64_t ky = y0; ky < y1; ky++) {                            \
                                    const int64_t xo = conv_off(x, n, c0 + ci,                    \
                                                                oz * j->s[0] - j->p[0] + kz * j->d[0], \
                                                                oy * j->s[1] - j->p[1] + ky * j->d[1], \
                                                                ox * j->s[2] - j->p[2]);          \
                                    const int64_t wo = conv_off(w, co, ci, kz, ky, 0);            \
                                    for (int64_t kx = x0; kx < x1; kx++)                          \
                                        acc += (double)xd[xo + kx * j->d[2] * x->stride[4]] *     \
                                               (double)wd[wo + kx * w->stride[4]];                \
                                }                                                                 \
                        yd[conv_off(y, n, co, oz, oy, ox)] = (T)acc;                              \
                    }                                                                             \
                }                                                                                 \
            }                                                                                     \
        }                                                                                         \
    }                                                                                             \
    static void conv_bwd_input_range_##D(void *ctx, int64_t begin, int64_t end) {                 \
        typedef MFT__T_##D T;                                                                     \
        const conv_job *j = ctx;                                                                  \
        const conv_t5 *gy = &j->a, *w = &j->b, *gx = &j->o;                                     \
        const T *gd = (const T *)(const void *)gy->data, *wd = (const T *)(const void *)w->data;  \
        T *od = (T *)(void *)gx->data;                                                            \
        const int64_t Ci = gx->size[1], cig = w->size[1], cog = w->size[0] / j->groups;           \
        for (int64_t it = begin; it < end; it++) {                                                \
            const int64_t n = it / Ci, ci = it % Ci, grp = ci / cig, cl = ci % cig;               \
            const double bias =                                                                   \
                j->bias ? (double)((const T *)(const void *)j->bias)[ci * j->bias_stride] : 0.0;  \
            for (int64_t iz = 0; iz < gx->size[2]; iz++)                                          \
                for (int64_t iy = 0; iy < gx->size[3]; iy++)                                      \
                    for (int64_t ix = 0; ix < gx->size[4]; ix++) {                                \
                        double acc = bias;                                                        \
                        for (int64_t co = grp * cog; co < (grp + 1) * cog; co++)                  \
                            for (int64_t kz = 0; kz < w->size[2]; kz++) {                         \
                                const int64_t tz = iz + j->p[0] - kz * j->d[0];                   \
                                if (tz < 0 || tz % j->s[0] || tz / j->s[0] >= gy->size[2])        \
                                    continue;                                                     \
                                for (int64_t ky = 0; ky < w->size[3]; ky++) {                     \
                                    const int64_t ty = iy + j->p[1] - ky * j->d[1];               \
                                    if (ty < 0 || ty % j->s[1] || ty / j->s[1] >= gy->size[3])    \
                                        continue;                                                 \
                                    for (int64_t kx = 0; kx < w->size[4]; kx++) {                 \
                                        const int64_t tx = ix + j->p[2] - kx * j->d[2];           \
                                        if (tx < 0 || tx % j->s[2] ||                             \
                                            tx / j->s[2] >= gy->size[4])                          \
                                            continue;                                             \
                                        acc += (double)gd[conv_off(gy, n, co, tz / j->s[0],       \
                                                                   ty / j->s[1], tx / j->s[2])] * \
                                               (double)wd[conv_off(w, co, cl, kz, ky, kx)];       \
                                    }                                                             \
                                }                                                                 \
                            }                                                                     \
                        od[conv_off(gx, n, ci, iz, iy, ix)] = (T)acc;                             \
                    }                                                                             \
        }                                                                                         \
    }                                                                                             \
    static void conv_bwd_weight_range_##D(void *ctx, int64_t begin, int64_t end) {                \
        typedef MFT__T_##D T;                                                                     \
        const conv_job *j = ctx;                                                                  \
        const conv_t5 *gy = &j->a, *x = &j->b, *gw = &j->o;                                     \
        const T *gd = (const T *)(const void *)gy->data, *xd = (const T *)(const void *)x->data;  \
        T *od = (T *)(void *)gw->data;                                                            \
        const int64_t cig = gw->size[1], cog = gw->size[0] / j->groups;                           \
        for (int64_t it = begin; it < end; it++) {                                                \
            const int64_t co = it / cig, cl = it % cig, ci = (co / cog) * cig + cl;               \
            for (int64_t kz = 0; kz < gw->size[2]; kz++) {                                        \
                int64_t z0, z1;                                                                   \
                conv_range(kz * j->d[0] - j->p[0], j->s[0], x->size[2], gy->size[2], &z0, &z1);   \
                for (int64_t ky = 0; ky < gw->size[3]; ky++) {                                    \
                    int64_t y0, y1;                                                               \
                    conv_range(ky * j->d[1] - j->p[1], j->s[1], x->size[3], gy->size[3], &y0,    \
                               &y1);                                                              \
                    for (int64_t kx = 0; kx < gw->size[4]; kx++) {                                \
                        int64_t x0, x1;                                                           \
                        conv_range(kx * j->d[2] - j->p[2], j->s[2], x->size[4], gy->size[4], &x0, \
                                   &x1);                                                          \
                        double acc = 0.0;                                                         \
                        for (int64_t n = 0; n < gy->size[0]; n++)                                 \
                            for (int64_t oz = z0; oz < z1; oz++)                                  \
                                for (int64_t oy = y0; oy < y1; oy++) {                            \
                                    const int64_t go = conv_off(gy, n, co, oz, oy, 0);            \
                                    const int64_t xo = conv_off(x, n, ci,                         \
                                                                oz * j->s[0] - j->p[0] + kz * j->d[0], \
                                                                oy * j->s[1] - j->p[1] + ky * j->d[1], \
                                                                kx * j->d[2] - j->p[2]);          \
                                    for (int64_t ox = x0; ox < x1; ox++)                          \
                                        acc += (double)gd[go + ox * gy->stride[4]] *              \
                                               (double)xd[xo + ox * j->s[2] * x->stride[4]];      \
                                }                                                                 \
                        od[conv_off(gw, co, cl, kz, ky, kx)] = (T)acc;                            \
                    }                                                                             \
                }                                                                                 \
            }                                                                                     \
        }                                                                                         \
    }
CONV_REF_RANGES(F32)
CONV_REF_RANGES(F64)

/* Work items per chunk for about 64k multiply-adds each. */
static int64_t conv_grain(int64_t macs_per_item) {
    int64_t g = 65536 / (macs_per_item > 0 ? macs_per_item : 1);
    return g > 0 ? g : 1;
}

/* a*b for non-negative a, b, saturating at INT64_MAX (only a grain hint). */
static int64_t conv_mul(int64_t a, int64_t b) {
    return (b != 0 && a > INT64_MAX / b) ? INT64_MAX : a * b;
}

static int64_t conv_prod(const int64_t *v, int n) {
    int64_t p = 1;
    for (int i = 0; i < n; i++) p = conv_mul(p, v[i]);
    return p;
}

static void conv_fwd_ref(const mft_kernel_args *args) {
    conv_job j = conv_job_of(args);
    const int64_t items = j.o.size[0] * j.o.size[1];
    const int64_t macs = conv_mul(conv_prod(j.o.size + 2, 3), conv_prod(j.b.size + 1, 4));
    mft__parallel_for(0, items, conv_grain(macs),
                      args->outputs[0]->dtype == MFT_F64 ? conv_fwd_range_F64 : conv_fwd_range_F32,
                      &j);
}

static void conv_bwd_input_ref(const mft_kernel_args *args) {
    conv_job j = conv_job_of(args);
    const int64_t items = j.o.size[0] * j.o.size[1];
    const int64_t macs = conv_mul(conv_mul(conv_prod(j.o.size + 2, 3), j.b.size[0] / j.groups),
                                  conv_prod(j.b.size + 2, 3));
    mft__parallel_for(0, items, conv_grain(macs),
                      args->outputs[0]->dtype == MFT_F64 ? conv_bwd_input_range_F64
                                                         : conv_bwd_input_range_F32,
                      &j);
}

static void conv_bwd_weight_ref(const mft_kernel_args *args) {
    conv_job j = conv_job_of(args);
    const int64_t items = j.o.size[0] * j.o.size[1];
    const int64_t macs = conv_mul(conv_mul(conv_prod(j.o.size + 2, 3), j.a.size[0]),
                                  conv_prod(j.a.size + 2, 3));
    mft__parallel_for(0, items, conv_grain(macs),
                      args->outputs[0]->dtype == MFT_F64 ? conv_bwd_weight_range_F64
                                                         : conv_bwd_weight_range_F32,
                      &j);
}

mft_kernel_fn mft__conv_reference(mft__op_id op, mft_dtype dt) {
    if (dt != MFT_F32 && dt != MFT_F64) return NULL;
    switch (op) {
    case MFT__OP_CONV2D:
    case MFT__OP_CONV3D: return conv_fwd_ref;
    case MFT__OP_CONV2D_BACKWARD_INPUT:
    case MFT__OP_CONV3D_BACKWARD_INPUT: return conv_bwd_input_ref;
    case MFT__OP_CONV2D_BACKWARD_WEIGHT:
    case MFT__OP_CONV3D_BACKWARD_WEIGHT: return conv_bwd_weight_ref;
    default: return NULL;
    }
}

/* ---------------------------------------------------------------- kernel table
 * The reference kernels under CONTIGUOUS and ANY, F32 and F64 (the fast
 * table, searched first, holds the faster kernels of the same keys). */
#define CONV_REF_ROWS(OP, name, fn)                                                   \
    {MFT__OP_##OP, MFT_CONTIGUOUS, MFT_F32, name ".ref.f32", fn},                     \
    {MFT__OP_##OP, MFT_CONTIGUOUS, MFT_F64, name ".ref.f64", fn},                     \
    {MFT__OP_##OP, MFT_FORMAT_ANY, MFT_F32, name ".ref.any.f32", fn},                 \
    {MFT__OP_##OP, MFT_FORMAT_ANY, MFT_F64, name ".ref.any.f64", fn},
const mft__kernel_def mft__kernels_conv[] = {
    CONV_REF_ROWS(CONV2D, "conv2d", conv_fwd_ref)
    CONV_REF_ROWS(CONV2D_BACKWARD_INPUT, "conv2d_backward_input", conv_bwd_input_ref)
    CONV_REF_ROWS(CONV2D_BACKWARD_WEIGHT, "conv2d_backward_weight", conv_bwd_weight_ref)
    CONV_REF_ROWS(CONV3D, "conv3d", conv_fwd_ref)
    CONV_REF_ROWS(CONV3D_BACKWARD_INPUT, "conv3d_backward_input", conv_bwd_input_ref)
    CONV_REF_ROWS(CONV3D_BACKWARD_WEIGHT, "conv3d_backward_weight", conv_bwd_weight_ref)
    {0, 0, 0, NULL, NULL},
};
