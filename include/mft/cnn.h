/* mft/cnn.h — CNN operators dispatched by (op, format, dtype) (see
 * mft/dispatch.h): pooling and softmax so far. Output formats follow SPEC §4: pooling
 * results are packed in the input's tag. Ownership and NULL propagation as
 * in mft/tensor.h. */
#ifndef MFT_CNN_H
#define MFT_CNN_H

#include <stdbool.h>
#include <stdint.h>
#include "mft/dispatch.h"
#include "mft/export.h"
#include "mft/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Parameters of 2-D pooling kernels (what a registered max_pool2d /
 * avg_pool2d kernel receives in mft_kernel_args.params). Output sizes:
 * out = floor_or_ceil((in + 2*pad - dilation*(kernel-1) - 1) / stride) + 1,
 * with PyTorch's ceil_mode rule (the last window must start inside the input
 * or its left padding). */
typedef struct mft_pool2d_params {
    int64_t kernel[2], stride[2], padding[2], dilation[2];
    bool ceil_mode;
    bool count_include_pad;   /* avg only */
    int64_t divisor_override; /* avg only; 0 = none */
} mft_pool2d_params;

/* Max pooling over (H, W) of an (N,C,H,W) or (C,H,W) tensor, F32 or F64.
 * stride NULL or zeros = kernel; padding <= kernel/2; dilation >= 1.
 * NaN propagates. Result packed in x's tag. Errors name the values. */
MFT_API mft_tensor *mft_max_pool2d(const mft_tensor *x, const int64_t kernel[2],
                                   const int64_t stride[2], const int64_t padding[2],
                                   const int64_t dilation[2], bool ceil_mode);
/* The same, also returning (new reference in *indices) the flat index
 * h*W + w of each maximum within its (n, c) plane, I64, laid out like the
 * result (PyTorch's return_indices). */
MFT_API mft_tensor *mft_max_pool2d_with_indices(const mft_tensor *x, const int64_t kernel[2],
                                                const int64_t stride[2], const int64_t padding[2],
                                                const int64_t dilation[2], bool ceil_mode,
                                                mft_tensor **indices);
/* Average pooling (PyTorch's semantics for count_include_pad and
 * divisor_override; 0 = no override). */
MFT_API mft_tensor *mft_avg_pool2d(const mft_tensor *x, const int64_t kernel[2],
                                   const int64_t stride[2], const int64_t padding[2],
                                   bool ceil_mode, bool count_include_pad,
                                   int64_t divisor_override);

/* What a registered softmax / log_softmax kernel receives as params. */
typedef struct mft_softmax_params {
    int dim; /* already wrapped to 0..ndim-1 */
} mft_softmax_params;

/* softmax(x)_i = exp(x_i - max) / sum_j exp(x_j - max) along dim (negative
 * counts from the end), F32 or F64, any rank >= 1; log_softmax is
 * x_i - max - log(sum_j exp(x_j - max)). Result packed in x's tag (SPEC §4;
 * deviation: PyTorch 1.13 returns contiguous strides). A size-0 dim gives an
 * empty result. */
MFT_API mft_tensor *mft_softmax(const mft_tensor *x, int dim);
MFT_API mft_tensor *mft_log_softmax(const mft_tensor *x, int dim);

#ifdef __cplusplus
}
#endif
#endif
