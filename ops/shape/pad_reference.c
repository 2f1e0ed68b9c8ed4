/* ops/shape/pad_reference.c — the naive reference kernels of pad (dispatched
 * ops "pad" and "pad_backward"), which define the semantics (PyTorch's, see
 * the head of pad.c), for F32 and F64 in any layout: the forward, and the
 * backward beside it. Reached by the tests through mft__pad_reference and
 * mft__pad_backward_reference; the F64 forward (mft__pad_ref_f64) is also
 * the F64 "pad" entry of the kernel table (pad_packed.c). */
#include "shape_internal.h"

/* ---------------------------------------------------------------- reference kernels
 * Element by element with the real strides of both tensors (any layout). */
#define REF_KERNEL(D, FN)                                                                    \
    FN(const mft_kernel_args *a) {                                                           \
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
REF_KERNEL(F32, static void pad_ref_F32)
REF_KERNEL(F64, void mft__pad_ref_f64)
#undef REF_KERNEL

mft_kernel_fn mft__pad_reference(mft_dtype dt) {
    return dt == MFT_F32 ? pad_ref_F32 : dt == MFT_F64 ? mft__pad_ref_f64 : NULL;
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
