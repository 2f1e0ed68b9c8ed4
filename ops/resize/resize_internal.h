/* ops/resize/resize_internal.h — what the files of the resize family share
 * (ops/resize/: resize.c the entry points, reference.c the reference
 * kernels, gather.c the fast 2-D F32 kernels and the kernel table): the size
 * limits, the per-dimension taps that define the semantics (PyTorch 1.13's,
 * stated at the top of resize.c), and the reference kernels, which the fast
 * kernels fall back to and the kernel table lists. */
#ifndef MFT_OPS_RESIZE_INTERNAL_H
#define MFT_OPS_RESIZE_INTERNAL_H

#include <math.h>
#include "ops_internal.h"
#include "mft/resize.h"

/* Largest input or output size per spatial dim: indices fit in int32 (the
 * fast kernels' tables); the allocation checks the total size. */
#define INTERP_MAX_SIZE ((int64_t)1 << 31)
#define INTERP_MAX_TAPS 4

/* ---------------------------------------------------------------- taps
 * taps_T(mode, align_corners, in, out, o, idx, w): the input indices and
 * weights output index o of one dim reads; returns their count (1, 2 or 4). */
static inline int64_t nearest_src(int64_t in, int64_t out, int64_t o, bool exact) {
    if (!exact && out == in) return o;
    if (!exact && out == 2 * in) return o >> 1;
    const float scale = (float)in / (float)out;
    int64_t i = exact ? (int64_t)floorf((float)(((double)o + 0.5) * (double)scale))
                      : (int64_t)floorf((float)o * scale);
    return i < in - 1 ? i : in - 1;
}

#define TAPS_DEF(D)                                                                          \
    static inline int taps_##D(mft_interp_mode m, bool ac, int64_t in, int64_t out,          \
                               int64_t o, int64_t *idx, MFT__T_##D *w) {                     \
        typedef MFT__T_##D T;                                                                \
        if (m == MFT_INTERP_NEAREST || m == MFT_INTERP_NEAREST_EXACT) {                      \
            idx[0] = nearest_src(in, out, o, m == MFT_INTERP_NEAREST_EXACT);                 \
            w[0] = (T)1;                                                                     \
            return 1;                                                                        \
        }                                                                                    \
        const T scale = ac ? (out > 1 ? (T)(in - 1) / (T)(out - 1) : (T)0) : (T)in / (T)out; \
        if (m == MFT_INTERP_BICUBIC) {                                                       \
            const T src = ac ? scale * (T)o : scale * ((T)o + (T)0.5) - (T)0.5;              \
            const T fl = MFT__MF_##D(floor)(src);                                            \
            const int64_t i = (int64_t)fl;                                                   \
            const T t = src - fl, A = (T)-0.75;                                              \
            const T x0 = t + (T)1, x1 = t, x2 = (T)1 - t, x3 = (T)2 - t;                     \
            w[0] = ((A * x0 - (T)5 * A) * x0 + (T)8 * A) * x0 - (T)4 * A;                    \
            w[1] = ((A + (T)2) * x1 - (A + (T)3)) * x1 * x1 + (T)1;                          \
            w[2] = ((A + (T)2) * x2 - (A + (T)3)) * x2 * x2 + (T)1;                          \
            w[3] = ((A * x3 - (T)5 * A) * x3 + (T)8 * A) * x3 - (T)4 * A;                    \
            for (int k = 0; k < 4; k++) {                                                    \
                int64_t j = i - 1 + k;                                                       \
                idx[k] = j < 0 ? 0 : j > in - 1 ? in - 1 : j;                                \
            }                                                                                \
            return 4;                                                                        \
        }                                                                                    \
        if (out == in) {                                                                     \
            idx[0] = idx[1] = o;                                                             \
            w[0] = (T)1;                                                                     \
            w[1] = (T)0;                                                                     \
            return 2;                                                                        \
        }                                                                                    \
        T src = ac ? scale * (T)o : scale * ((T)o + (T)0.5) - (T)0.5;                        \
        if (src < (T)0) src = (T)0;                                                          \
        int64_t i0 = (int64_t)src;                                                           \
        if (i0 > in - 1) i0 = in - 1;                                                        \
        idx[0] = i0;                                                                         \
        idx[1] = i0 + (i0 < in - 1 ? 1 : 0);                                                 \
        w[1] = src - (T)i0;                                                                  \
        w[0] = (T)1 - w[1];                                                                  \
        return 2;                                                                            \
    }
TAPS_DEF(F32)
TAPS_DEF(F64)

void mft__interpolate_ref_F32(const mft_kernel_args *a);
void mft__interpolate_ref_F64(const mft_kernel_args *a);
void mft__interpolate_backward_ref_F32(const mft_kernel_args *a);
void mft__interpolate_backward_ref_F64(const mft_kernel_args *a);
/* The reference kernel of op (interpolate or its backward) for dt, for the
 * tests; NULL for other dtypes. */
mft_kernel_fn mft__interp_reference(mft__op_id op, mft_dtype dt);

#endif
