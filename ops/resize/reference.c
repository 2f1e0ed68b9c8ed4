/* ops/resize/reference.c — the reference kernels of interpolate and its
 * backward (F32 and F64, any strides, spatial rank 1-3), which define the
 * semantics with the taps of resize_internal.h; the fast kernels of gather.c
 * fall back to them and the kernel table lists them. */
#include "resize_internal.h"

/* Advances i over sizes in row-major order; false after the last. */
static bool interp_next(int nd, const int64_t *sizes, int64_t *i) {
    for (int d = nd - 1; d >= 0; d--) {
        if (++i[d] < sizes[d]) return true;
        i[d] = 0;
    }
    return false;
}

/* ---------------------------------------------------------------- reference kernels
 * x (N, C, S0[, S1[, S2]]) -> y (N, C, O0[, O1[, O2]]), any strides, any
 * spatial rank 1-3: each output element sums the products of its per-dim
 * taps. The backward zeroes grad_x and scatters each grad_out element in
 * logical order (serial, so deterministic). */
#define REF_KERNELS(D)                                                                         \
    static void interp_ref_##D(const mft_kernel_args *a, bool backward) {                      \
        typedef MFT__T_##D T;                                                                  \
        const mft_interp_params *p = a->params;                                                \
        const mft_tensor *src = a->inputs[0], *dst = a->outputs[0];                            \
        /* the small side (y forward, grad_out backward) drives the loops */                   \
        const mft_tensor *xt = backward ? dst : src, *yt = backward ? src : dst;               \
        T *xd = (T *)(void *)mft__tensor_ptr(xt);                                              \
        T *yd = (T *)(void *)mft__tensor_ptr(yt);                                              \
        const int nd = xt->ndim, sp = nd - 2;                                                  \
        if (backward) {                                                                        \
            int64_t i[MFT_MAX_DIMS] = {0};                                                     \
            if (xt->numel)                                                                     \
                do {                                                                           \
                    int64_t off = 0;                                                           \
                    for (int d = 0; d < nd; d++) off += i[d] * xt->strides[d];                 \
                    xd[off] = (T)0;                                                            \
                } while (interp_next(nd, xt->sizes, i));                                  \
        }                                                                                      \
        if (!yt->numel) return;                                                                \
        int64_t o[MFT_MAX_DIMS] = {0};                                                         \
        do {                                                                                   \
            int64_t ti[3][INTERP_MAX_TAPS];                                                    \
            T tw[3][INTERP_MAX_TAPS];                                                          \
            int cnt[3] = {1, 1, 1};                                                            \
            for (int d = 0; d < sp; d++)                                                       \
                cnt[d] = taps_##D(p->mode, p->align_corners, xt->sizes[2 + d],                 \
                                  yt->sizes[2 + d], o[2 + d], ti[d], tw[d]);                   \
            int64_t yoff = 0, xbase = o[0] * xt->strides[0] + o[1] * xt->strides[1];           \
            for (int d = 0; d < nd; d++) yoff += o[d] * yt->strides[d];                        \
            const T g = backward ? yd[yoff] : (T)0;                                            \
            T acc = (T)0;                                                                      \
            for (int k0 = 0; k0 < cnt[0]; k0++)                                                \
                for (int k1 = 0; k1 < (sp > 1 ? cnt[1] : 1); k1++)                             \
                    for (int k2 = 0; k2 < (sp > 2 ? cnt[2] : 1); k2++) {                       \
                        T w = tw[0][k0];                                                       \
                        int64_t off = xbase + ti[0][k0] * xt->strides[2];                      \
                        if (sp > 1) {                                                          \
                            w *= tw[1][k1];                                                    \
                            off += ti[1][k1] * xt->strides[3];                                 \
                        }                                                                      \
                        if (sp > 2) {                                                          \
                            w *= tw[2][k2];                                                    \
                            off += ti[2][k2] * xt->strides[4];                                 \
                        }                                                                      \
                        if (backward) xd[off] += w * g;                                        \
                        else acc += w * xd[off];                                               \
                    }                                                                          \
            if (!backward) yd[yoff] = acc;                                                     \
        } while (interp_next(nd, yt->sizes, o));                                          \
    }                                                                                          \
    void mft__interpolate_ref_##D(const mft_kernel_args *a) { interp_ref_##D(a, false); }    \
    void mft__interpolate_backward_ref_##D(const mft_kernel_args *a) {                       \
        interp_ref_##D(a, true);                                                               \
    }

REF_KERNELS(F32)
REF_KERNELS(F64)

mft_kernel_fn mft__interp_reference(mft__op_id op, mft_dtype dt) {
    if (op == MFT__OP_INTERPOLATE)
        return dt == MFT_F32 ? mft__interpolate_ref_F32 : dt == MFT_F64 ? mft__interpolate_ref_F64 : NULL;
    if (op == MFT__OP_INTERPOLATE_BACKWARD)
        return dt == MFT_F32   ? mft__interpolate_backward_ref_F32
               : dt == MFT_F64 ? mft__interpolate_backward_ref_F64
                               : NULL;
    return NULL;
}
