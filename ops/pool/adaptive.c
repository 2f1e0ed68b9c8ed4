/* ops/pool/adaptive.c — the entry points of adaptive average and max
 * pooling, 2-D and 3-D (mft/pool.h), forward and backward: window i of a dim
 * covers [floor(i*in/out), ceil((i+1)*in/out)), so its checks bound the
 * window arithmetic; they run through the machinery of common.c. The
 * kernels are the rank-generic ones with adaptive windows (pm_geom kind
 * PM_ADAPT): max_nchw.c, max_nhwc.c (forward; the backward is max pooling's),
 * avg_nchw.c (with the global pooling paths), avg_nhwc.c, reference.c;
 * blocked16_avg.c and blocked16_avg_backward.c run adaptive avg pooling
 * (2-D, forward and backward) and blocked16_max_backward.c the max backward
 * on rank-4 F32 operands packed in NCHW16C without conversion; other
 * blocked operands take the counted fallback. */
#include "pool_internal.h"
#include "blocked_outputs.h"

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
    if (!mft__pool_check_x(fn, x, nsp, "x")) return NULL;
    if (!out) {
        mft__set_error(MFT_ERR_NULL, "%s: argument 'out' is NULL", fn);
        return NULL;
    }
    for (int i = 0; i < nsp; i++)
        if (out[i] < 1 || out[i] > POOL_MAX_PARAM) {
            mft__set_error(MFT_ERR_INVALID, "%s: output size %s should be in [1, %lld]", fn,
                           mft__fmt_dims(b1, sizeof b1, nsp, out), (long long)POOL_MAX_PARAM);
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
    mft__pool_sizes(&e, x, nsp, &g, false);
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
    return mft__pool_execute(&e, indices);
}

static mft_tensor *pm_adaptive_with_indices(const char *fn, int nsp, const mft_tensor *x,
                                            const int64_t *out, mft_tensor **indices) {
    return mft__pool_indices_arg(fn, x, indices) ? pm_adaptive(fn, nsp, true, x, out, indices)
                                                 : NULL;
}

/* Backward of adaptive avg pooling of nsp (2 or 3) dims; the output size is
 * grad_out's. */
static mft_tensor *pm_adaptive_avg_backward(const char *fn, int nsp, const mft_tensor *grad_out,
                                            const mft_tensor *x) {
    pm_geom g;
    if (!mft__pool_check_backward(fn, nsp, grad_out, x, &g) ||
        !pm_adaptive_fits(fn, nsp, x, g.in + 3 - nsp, g.out + 3 - nsp))
        return NULL;
    g.kind = PM_ADAPT;
    mft_adaptive_pool_params p;
    memset(&p, 0, sizeof p);
    for (int i = 0; i < nsp; i++) p.out[i] = g.out[3 - nsp + i];
    pm_exec e;
    memset(&e, 0, sizeof e);
    mft__pool_sizes(&e, x, nsp, &g, true);
    e.fn = fn;
    e.op = nsp == 3 ? MFT__OP_ADAPTIVE_AVG_POOL3D_BACKWARD : MFT__OP_ADAPTIVE_AVG_POOL2D_BACKWARD;
    e.nin = 1;
    e.in[0] = grad_out;
    e.nout = 1;
    e.odt[0] = x->dtype;
    e.params = &p;
    return mft__pool_execute(&e, NULL);
}

/* ---------------------------------------------------------------- entry points */
mft_tensor *mft_adaptive_avg_pool2d(const mft_tensor *x, const int64_t out[2]) {
    if (!mft__pool_native16(x, NULL))
        MFT__BLOCKED_FALLBACK("adaptive_avg_pool2d", mft_adaptive_avg_pool2d(x, out), 1, &x);
    return pm_adaptive("mft_adaptive_avg_pool2d", 2, false, x, out, NULL);
}

mft_tensor *mft_adaptive_max_pool2d(const mft_tensor *x, const int64_t out[2]) {
    MFT__BLOCKED_FALLBACK("adaptive_max_pool2d", mft_adaptive_max_pool2d(x, out), 1, &x);
    return pm_adaptive("mft_adaptive_max_pool2d", 2, true, x, out, NULL);
}

mft_tensor *mft_adaptive_max_pool2d_with_indices(const mft_tensor *x, const int64_t out[2],
                                                 mft_tensor **indices) {
    MFT__BLOCKED_FALLBACK_OUTS("adaptive_max_pool2d_with_indices",
                               mft_adaptive_max_pool2d_with_indices(x, out, indices), 1,
                               ((mft_tensor **[]){indices}), ((const mft_tensor *[]){NULL}), 1, &x);
    return pm_adaptive_with_indices("mft_adaptive_max_pool2d_with_indices", 2, x, out, indices);
}

mft_tensor *mft_adaptive_max_pool2d_backward(const mft_tensor *grad_out, const mft_tensor *x,
                                             const mft_tensor *indices) {
    if (!mft__pool_native16(grad_out, NULL) || !mft__pool_native16(x, indices))
        MFT__BLOCKED_FALLBACK_LIKE("adaptive_max_pool2d_backward", x,
                               mft_adaptive_max_pool2d_backward(grad_out, x, indices), 3, &grad_out,
                               &x, &indices);
    return mft__pool_max_backward("mft_adaptive_max_pool2d_backward", 2, grad_out, x, indices,
                                  NULL);
}

mft_tensor *mft_adaptive_avg_pool2d_backward(const mft_tensor *grad_out, const mft_tensor *x) {
    if (!mft__pool_native16(grad_out, NULL) || !mft__pool_native16(x, NULL))
        MFT__BLOCKED_FALLBACK_LIKE("adaptive_avg_pool2d_backward", x,
                               mft_adaptive_avg_pool2d_backward(grad_out, x), 2, &grad_out, &x);
    return pm_adaptive_avg_backward("mft_adaptive_avg_pool2d_backward", 2, grad_out, x);
}

mft_tensor *mft_adaptive_avg_pool3d(const mft_tensor *x, const int64_t out[3]) {
    MFT__BLOCKED_FALLBACK("adaptive_avg_pool3d", mft_adaptive_avg_pool3d(x, out), 1, &x);
    return pm_adaptive("mft_adaptive_avg_pool3d", 3, false, x, out, NULL);
}

mft_tensor *mft_adaptive_max_pool3d(const mft_tensor *x, const int64_t out[3]) {
    MFT__BLOCKED_FALLBACK("adaptive_max_pool3d", mft_adaptive_max_pool3d(x, out), 1, &x);
    return pm_adaptive("mft_adaptive_max_pool3d", 3, true, x, out, NULL);
}

mft_tensor *mft_adaptive_max_pool3d_with_indices(const mft_tensor *x, const int64_t out[3],
                                                 mft_tensor **indices) {
    MFT__BLOCKED_FALLBACK_OUTS("adaptive_max_pool3d_with_indices",
                               mft_adaptive_max_pool3d_with_indices(x, out, indices), 1,
                               ((mft_tensor **[]){indices}), ((const mft_tensor *[]){NULL}), 1, &x);
    return pm_adaptive_with_indices("mft_adaptive_max_pool3d_with_indices", 3, x, out, indices);
}

mft_tensor *mft_adaptive_max_pool3d_backward(const mft_tensor *grad_out, const mft_tensor *x,
                                             const mft_tensor *indices) {
    MFT__BLOCKED_FALLBACK_LIKE("adaptive_max_pool3d_backward", x,
                               mft_adaptive_max_pool3d_backward(grad_out, x, indices), 3, &grad_out,
                               &x, &indices);
    return mft__pool_max_backward("mft_adaptive_max_pool3d_backward", 3, grad_out, x, indices,
                                  NULL);
}

mft_tensor *mft_adaptive_avg_pool3d_backward(const mft_tensor *grad_out, const mft_tensor *x) {
    MFT__BLOCKED_FALLBACK_LIKE("adaptive_avg_pool3d_backward", x,
                               mft_adaptive_avg_pool3d_backward(grad_out, x), 2, &grad_out, &x);
    return pm_adaptive_avg_backward("mft_adaptive_avg_pool3d_backward", 3, grad_out, x);
}
