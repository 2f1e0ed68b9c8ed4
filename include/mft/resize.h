/* mft/resize.h — interpolation (upsampling / downsampling to a given size)
 * and dropout, forward and backward. interpolate is dispatched by (op,
 * format, dtype) (mft/dispatch.h); results and input gradients are packed in
 * the input's tag (SPEC §4, §5). */
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
MFT_API mft_tensor *mft_interpolate(const mft_tensor *x, const int64_t *out_size,
                                    mft_interp_mode mode, bool align_corners);
/* grad_x (x's sizes, packed in x's tag) from grad_out (the forward result's
 * sizes): every input element receives the weighted sum of the gradients of
 * the outputs that read it. */
MFT_API mft_tensor *mft_interpolate_backward(const mft_tensor *grad_out, const mft_tensor *x,
                                             mft_interp_mode mode, bool align_corners);

/* Dropout (training): each element is kept with probability 1 - p and
 * scaled by 1/(1-p), else zeroed; dropout2d zeroes whole channels (one
 * draw per (n, c) of an (N, C, ...) tensor). The draw is a pure function of
 * (seed, logical index of the element / channel), so the mask does not
 * depend on the layout or thread count, and the backward regenerates it
 * from the seed: grad_x = dropout(grad_out) with the same seed. 0 <= p <= 1
 * (p = 1 zeroes everything). p = 0 or training = false: x itself (a new
 * reference, SPEC §4). Result packed in x's tag. */
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
