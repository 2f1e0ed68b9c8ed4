/* ops/norm/reference.c — the reference kernels of batch_norm, group_norm and
 * layer_norm, forward and backward (instance_norm is group_norm with groups
 * = C): one loop nest per direction for the three ops, over logical indices
 * reading and writing through the real strides (any layout), statistics
 * accumulated in double, sets in order (serial). They define the
 * semantics the fast kernels must match.
 *
 * Forward: two passes per statistics set (mean, then sum of squared
 * deviations), then the normalisation. Registered as the CONTIGUOUS F64
 * kernels of all three ops and (since it reads any strides) as the
 * CHANNELS_LAST F64 group_norm kernel ("group_norm.nhwc.f64.ref").
 * Backward: one pass for s1, s2 and grad_weight / grad_bias per set, one
 * writing grad_x (the formulas in ops/norm/norm_internal.h). Registered as
 * the F64 kernels (CONTIGUOUS and, since it reads any strides,
 * CHANNELS_LAST).
 * Both are exported to tests (mft__norm_reference,
 * mft__norm_backward_reference). */
#include "norm_internal.h"

/* The statistics sets of op (0 batch, 1 group, 2 layer) over x: nstat sets
 * of len elements; C channels, S the spatial size and G groups (ops 0 and
 * 1), lead the first normalised dim and L the normalised size (op 2). */
typedef struct norm_ref_sets {
    int64_t C, S, G, L, nstat, len;
    int lead;
} norm_ref_sets;

static inline norm_ref_sets norm_ref_sets_of(const mft_tensor *x, int op,
                                             const mft_norm_params *p) {
    norm_ref_sets r;
    const int nd = x->ndim;
    const int64_t N = x->sizes[0];
    r.C = op == 2 ? 1 : x->sizes[1];
    r.S = op == 2 ? 1 : mft__dims_prod(x, 2, nd);
    r.G = op == 1 ? p->groups : 1;
    r.lead = op == 2 ? nd - p->nnorm : 0;
    r.L = op == 2 ? mft__dims_prod(x, r.lead, nd) : 0;
    r.nstat = op == 0 ? r.C : op == 1 ? N * r.G : r.L ? x->numel / r.L : 0;
    r.len = op == 0 ? N * r.S : op == 1 ? (r.C / r.G) * r.S : r.L;
    return r;
}

/* Element j of statistics set k (op: 0 batch, 1 group, 2 layer; S the
 * spatial size, G groups, C channels): its sample n, channel c and spatial
 * index s (ops 0 and 1), and its affine index (the return value). */
static inline int64_t norm_ref_elem(int op, int64_t k, int64_t j, int64_t S, int64_t G,
                                    int64_t C, int64_t *n, int64_t *c, int64_t *s) {
    if (op == 0) {
        *n = j / S, *c = k, *s = j % S;
        return k;
    }
    if (op == 1) {
        *n = k / G, *c = (k % G) * (C / G) + j / S, *s = j % S;
        return *c;
    }
    *n = *c = *s = 0;
    return j;
}

/* The offset of that element in t (op 2: row k of the dims before lead,
 * element j of the normalised dims from lead on). */
static inline int64_t norm_ref_off(const mft_tensor *t, int op, int lead, int64_t k, int64_t j,
                                   int64_t n, int64_t c, int64_t s) {
    const int nd = t->ndim;
    if (op == 2) return mft__dims_off(t, 0, lead, k) + mft__dims_off(t, lead, nd, j);
    return n * t->strides[0] + c * t->strides[1] + mft__dims_off(t, 2, nd, s);
}

/* ---------------------------------------------------------------- forward */
/* The three ops as one loop nest: nstat statistics sets; set k has `len`
 * elements whose offsets come from norm_ref_off; the affine parameters are
 * indexed as norm_ref_elem says. op: 0 batch, 1 group, 2 layer. */
#define NORM_REF(D)                                                                           \
    static void norm_ref_run_##D(const mft_kernel_args *a, int op) {                          \
        typedef MFT__T_##D T;                                                                 \
        const mft__norm_kparams *kp = a->params;                                              \
        const mft_tensor *x = a->inputs[0];                                                   \
        mft_tensor *y = a->outputs[0];                                                        \
        if (x->numel == 0) return;                                                            \
        const T *xp = (const T *)(const void *)mft__tensor_ptr(x);                           \
        T *yp = (T *)(void *)mft__tensor_ptr(y);                                              \
        const norm_ref_sets q = norm_ref_sets_of(x, op, &kp->p);                              \
        const int64_t C = q.C, S = q.S, G = q.G, nstat = q.nstat, len = q.len;                \
        const int lead = q.lead;                                                              \
        for (int64_t k = 0; k < nstat; k++) {                                                 \
            /* element j of set k: x offset, y offset, affine index */                        \
            for (int pass = 0; pass < 3; pass++) {                                            \
                if (pass < 2 && !kp->p.training) continue;                                    \
                double acc = 0.0, mean = pass ? kp->mean[k] : 0.0, rstd = 0.0;                \
                if (pass == 2) rstd = 1.0 / sqrt(kp->var[k] + kp->p.eps);                     \
                for (int64_t j = 0; j < len; j++) {                                           \
                    int64_t n, c, s;                                                          \
                    const int64_t ai = norm_ref_elem(op, k, j, S, G, C, &n, &c, &s);          \
                    const int64_t xo = norm_ref_off(x, op, lead, k, j, n, c, s);              \
                    const int64_t yo = norm_ref_off(y, op, lead, k, j, n, c, s);              \
                    const double v = (double)xp[xo];                                          \
                    if (pass == 0)                                                            \
                        acc += v;                                                             \
                    else if (pass == 1)                                                       \
                        acc += (v - mean) * (v - mean);                                       \
                    else                                                                      \
                        yp[yo] = (T)((v - mean) * rstd * norm_ld_##D(kp->weight, ai, 1.0) +   \
                                     norm_ld_##D(kp->bias, ai, 0.0));                         \
                }                                                                             \
                if (pass == 0) kp->mean[k] = acc / (double)len;                               \
                if (pass == 1) kp->var[k] = acc / (double)len;                                \
            }                                                                                 \
        }                                                                                     \
    }                                                                                         \
    void mft__batch_norm_ref_##D(const mft_kernel_args *a) { norm_ref_run_##D(a, 0); }       \
    void mft__group_norm_ref_##D(const mft_kernel_args *a) { norm_ref_run_##D(a, 1); }       \
    void mft__layer_norm_ref_##D(const mft_kernel_args *a) { norm_ref_run_##D(a, 2); }
NORM_REF(F32)
NORM_REF(F64)

/* ---------------------------------------------------------------- backward */
/* op: 0 batch, 1 group, 2 layer. Set k has len elements; element j: offsets
 * in grad_out, x, grad_x and affine index (norm_ref_elem, norm_ref_off). */
#define NORMB_REF(D)                                                                          \
    static void normb_ref_run_##D(const mft_kernel_args *a, int op) {                         \
        typedef MFT__T_##D T;                                                                 \
        const mft__normb_kparams *kp = a->params;                                             \
        const mft_tensor *g = a->inputs[0], *x = a->inputs[1];                                \
        mft_tensor *y = a->outputs[0];                                                        \
        const norm_ref_sets q = norm_ref_sets_of(x, op, &kp->p);                              \
        const int64_t C = q.C, S = q.S, G = q.G, nstat = q.nstat, len = q.len;                \
        const int lead = q.lead;                                                              \
        const int64_t naff = op == 2 ? q.L : C;                                               \
        for (int64_t i = 0; i < naff; i++) kp->gw[i] = kp->gb[i] = 0.0;                       \
        if (x->numel == 0) return;                                                            \
        const T *gp = (const T *)(const void *)mft__tensor_ptr(g);                           \
        const T *xp = (const T *)(const void *)mft__tensor_ptr(x);                           \
        T *yp = (T *)(void *)mft__tensor_ptr(y);                                              \
        const bool train = op != 0 || kp->p.training;                                         \
        for (int64_t k = 0; k < nstat; k++) {                                                 \
            const double m = kp->mean[k], rs = kp->rstd[k];                                   \
            double s1 = 0.0, s2 = 0.0;                                                        \
            for (int pass = 0; pass < 2; pass++) {                                            \
                for (int64_t j = 0; j < len; j++) {                                           \
                    int64_t n, c, s;                                                          \
                    const int64_t ai = norm_ref_elem(op, k, j, S, G, C, &n, &c, &s);          \
                    const int64_t go = norm_ref_off(g, op, lead, k, j, n, c, s);              \
                    const int64_t xo = norm_ref_off(x, op, lead, k, j, n, c, s);              \
                    const int64_t yo = norm_ref_off(y, op, lead, k, j, n, c, s);              \
                    const double dy = (double)gp[go], xh = ((double)xp[xo] - m) * rs;         \
                    const double w = norm_ld_##D(kp->weight, ai, 1.0);                       \
                    if (pass == 0) {                                                          \
                        s1 += w * dy;                                                         \
                        s2 += w * dy * xh;                                                    \
                        kp->gw[ai] += dy * xh;                                                \
                        kp->gb[ai] += dy;                                                     \
                    } else if (train) {                                                       \
                        yp[yo] = (T)(rs * (w * dy - s1 / (double)len -                        \
                                           xh * s2 / (double)len));                           \
                    } else {                                                                  \
                        yp[yo] = (T)(dy * w * rs);                                            \
                    }                                                                         \
                }                                                                             \
            }                                                                                 \
        }                                                                                     \
    }                                                                                         \
    void mft__batch_norm_bwd_ref_##D(const mft_kernel_args *a) { normb_ref_run_##D(a, 0); }  \
    void mft__group_norm_bwd_ref_##D(const mft_kernel_args *a) { normb_ref_run_##D(a, 1); }  \
    void mft__layer_norm_bwd_ref_##D(const mft_kernel_args *a) { normb_ref_run_##D(a, 2); }
NORMB_REF(F32)
NORMB_REF(F64)

/* ---------------------------------------------------------------- for tests */
mft_kernel_fn mft__norm_reference(int op, mft_dtype dt) {
    static const mft_kernel_fn f32[3] = {mft__batch_norm_ref_F32, mft__group_norm_ref_F32,
                                         mft__layer_norm_ref_F32};
    static const mft_kernel_fn f64[3] = {mft__batch_norm_ref_F64, mft__group_norm_ref_F64,
                                         mft__layer_norm_ref_F64};
    if (op < 0 || op > 2) return NULL;
    return dt == MFT_F32 ? f32[op] : dt == MFT_F64 ? f64[op] : NULL;
}

mft_kernel_fn mft__norm_backward_reference(int op, mft_dtype dt) {
    static const mft_kernel_fn f32[3] = {mft__batch_norm_bwd_ref_F32, mft__group_norm_bwd_ref_F32,
                                         mft__layer_norm_bwd_ref_F32};
    static const mft_kernel_fn f64[3] = {mft__batch_norm_bwd_ref_F64, mft__group_norm_bwd_ref_F64,
                                         mft__layer_norm_bwd_ref_F64};
    if (op < 0 || op > 2) return NULL;
    return dt == MFT_F32 ? f32[op] : dt == MFT_F64 ? f64[op] : NULL;
}
