/* mft/resize.h — interpolation (upsampling / downsampling to a given size)
 * and dropout, forward and backward. interpolate is dispatched by (op,
 * format, dtype) (mft/dispatch.h); results and input gradients are packed in
 * the input's tag (docs/spec.md §4, §5). */
#ifndef MFT_RESIZE_H
#define MFT_RESIZE_H

#include <stdbool.h>
#include <stdint.h>
#include "mft/dispatch.h"
#include "mft/export.h"
#include "mft/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* PyTorch's F.interpolate(x, size=out_size, mode=...). x is (N, C, sp...)
 * with 1-3 spatial dims; out_size has one entry per spatial dim (>= 1).
 * NEAREST (PyTorch's "nearest": src = floor(dst * in/out)), NEAREST_EXACT
 * (src = floor((dst + 0.5) * in/out)): any spatial rank. LINEAR (1-D),
 * BILINEAR (2-D), BICUBIC (2-D, A = -0.75, clamped borders), TRILINEAR (3-D):
 * the rank must match; align_corners as PyTorch (only for these modes). */
typedef enum mft_interp_mode {
    MFT_INTERP_NEAREST,
    MFT_INTERP_NEAREST_EXACT,
    MFT_INTERP_LINEAR,
    MFT_INTERP_BILINEAR,
    MFT_INTERP_BICUBIC,
    MFT_INTERP_TRILINEAR,
    MFT_INTERP_MODE_COUNT
} mft_interp_mode;
/* What a registered interpolate / interpolate_backward kernel receives. */
typedef struct mft_interp_params {
    mft_interp_mode mode;
    bool align_corners;
} mft_interp_params;
/* Result: (N, C, out_size...), x's dtype, packed in x's tag (docs/spec.md §4; rank-3
 * CHANNELS_LAST is N, L, C, an mft extension). Kernels: interpolate.nchw.f32 /
 * interpolate.nhwc.f32 (rank-4 nearest, nearest-exact, bilinear, bicubic by
 * separable gather tables; other ranks through the reference on packed
 * tensors) and the strided references interpolate.ref.f32 / .f64 (also
 * under MFT_FORMAT_ANY). Errors (message naming the function and values):
 * NULL x / out_size, mode out of range, rank not 3-5 or not the mode's rank,
 * dtype not f32/f64, align_corners with a nearest mode, a spatial size (in
 * or out) < 1 or > 2^31. N or C may be 0 (empty result). */
/* Autograd: records one node under a recording tape. */
MFT_API mft_tensor *mft_interpolate(const mft_tensor *x, const int64_t *out_size,
                                    mft_interp_mode mode, bool align_corners);
/* grad_x (x's sizes, packed in x's tag) from grad_out (the forward result's
 * sizes, any layout; its spatial sizes are the output sizes): every input
 * element receives the weighted sum of the gradients of the outputs that
 * read it. Only x's sizes, dtype and tag are used. Deterministic: each grad_x
 * element is summed by one thread in a fixed order (the fast kernels gather
 * over transposed tap tables; no atomics). Errors: as the forward, plus
 * grad_out of another rank, N, C or dtype. */
MFT_API mft_tensor *mft_interpolate_backward(const mft_tensor *grad_out, const mft_tensor *x,
                                             mft_interp_mode mode, bool align_corners);

/* Dropout (training; ops/dropout/dropout.c): each element is kept with probability
 * 1 - p and scaled by 1/(1-p), else zeroed; dropout2d zeroes whole channels (one
 * draw per (n, c) of an (N, C, ...) tensor). The draw is a pure function of
 * (seed, logical index of the element / channel), so the mask does not
 * depend on the layout or thread count, and the backward regenerates it
 * from the seed: grad_x = dropout(grad_out) with the same seed. 0 <= p <= 1
 * (p = 1 zeroes everything). p = 0 or training = false: x itself (a new
 * reference, docs/spec.md §4). Result packed in x's tag.
 * The draw (Note [Dropout draws] in ops/dropout/dropout.c): a 32-bit hash h of
 * (seed, key); keep iff h / 2^32 >= p. Deviations from PyTorch: the masks
 * cannot equal PyTorch's (different RNG; only the statistics match), and a
 * dropped element is 0 even when x is inf or NaN (PyTorch multiplies by a
 * 0 mask, giving NaN). Errors: NULL x, p outside [0, 1] or NaN (also when
 * not training), dtype not f32/f64, dropout2d of rank < 2 (dims 0 and 1 are
 * N and C; rank 2 drops single elements of an (N, C) matrix). */
/* Autograd: one node; the backward regenerates the mask from the seed;
 * p = 0 or eval returns x itself and records nothing. */
MFT_API mft_tensor *mft_dropout(const mft_tensor *x, double p, bool training, uint64_t seed);
MFT_API mft_tensor *mft_dropout2d(const mft_tensor *x, double p, bool training, uint64_t seed);
MFT_API mft_tensor *mft_dropout_backward(const mft_tensor *grad_out, double p, bool training,
                                         uint64_t seed);
MFT_API mft_tensor *mft_dropout2d_backward(const mft_tensor *grad_out, double p, bool training,
                                           uint64_t seed);

#ifdef __cplusplus
}
#endif
#endif
