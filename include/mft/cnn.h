/* mft/cnn.h — CNN operators dispatched by (op, format, dtype) (see
 * mft/dispatch.h): pooling, softmax, padding/cat, matmul/linear and the
 * normalisation layers (forward). Output formats follow SPEC §4: pooling
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

/* ------------------------------------------------------------------ padding, cat
 * pads: npad entries, pairs (before, after) for the LAST dims first, as
 * PyTorch's F.pad: {w_before, w_after, h_before, h_after, ...}; npad even
 * and <= 2*ndim. Negative pads crop (constant mode). reflect needs pad <
 * size, replicate needs size > 0. Result packed in x's tag (SPEC §4). */
typedef enum mft_pad_mode {
    MFT_PAD_CONSTANT,
    MFT_PAD_REFLECT,
    MFT_PAD_REPLICATE,
    MFT_PAD_MODE_COUNT
} mft_pad_mode;
/* What a registered pad kernel receives as params (pads expanded to every
 * dim: before[d], after[d]). */
typedef struct mft_pad_params {
    int64_t before[MFT_MAX_DIMS], after[MFT_MAX_DIMS];
    mft_pad_mode mode;
    double value;
} mft_pad_params;
MFT_API mft_tensor *mft_pad(const mft_tensor *x, int npad, const int64_t *pads, mft_pad_mode mode,
                            double value);
/* Concatenation along dim of n tensors with equal other sizes (promoted
 * dtype); result: the common tag of all inputs if they share one, else
 * CONTIGUOUS (SPEC §4). stack inserts a new dim first. */
MFT_API mft_tensor *mft_cat(int n, const mft_tensor *const *ts, int dim);
MFT_API mft_tensor *mft_stack(int n, const mft_tensor *const *ts, int dim);
/* Views of x in chunks of split_size along dim (the last may be smaller);
 * writes up to max_out new references into outs and their count into
 * *nout. More chunks than max_out: MFT_ERR_INVALID, nothing returned. */
MFT_API mft_status mft_split(const mft_tensor *x, int64_t split_size, int dim, int max_out,
                             mft_tensor **outs, int *nout);

/* ------------------------------------------------------------------ linear algebra
 * matmul: PyTorch's semantics (1-D/2-D/batched with broadcasting of batch
 * dims), F32/F64; result CONTIGUOUS. linear(x, w, b) = x @ w^T + b with w
 * (out, in) and b (out) or NULL; x (..., in). */
typedef struct mft_matmul_params {
    bool transpose_b; /* linear: b is (N, K) and used as its transpose */
} mft_matmul_params;
MFT_API mft_tensor *mft_matmul(const mft_tensor *a, const mft_tensor *b);
MFT_API mft_tensor *mft_linear(const mft_tensor *x, const mft_tensor *w, const mft_tensor *b);

/* ------------------------------------------------------------------ normalisation
 * batch_norm over (N, spatial) per channel of an (N, C, ...) tensor. In
 * training the batch statistics normalise (biased variance) and the running
 * stats, if given, are updated in place: running = (1-momentum)*running +
 * momentum*stat, with the UNBIASED variance (PyTorch). In eval the running
 * stats normalise (both required). weight/bias (C) may be NULL. Result packed
 * in x's tag. layer_norm normalises over the last nnorm dims (whose sizes
 * must equal normalized_shape), weight/bias of normalized_shape or NULL.
 * group_norm splits C into groups; weight/bias (C) or NULL. instance_norm is
 * group_norm with one group per channel (no running stats). */
typedef struct mft_norm_params {
    double eps, momentum;
    bool training;
    int64_t groups; /* group_norm */
    int nnorm;      /* layer_norm: number of trailing dims normalised */
} mft_norm_params;
MFT_API mft_tensor *mft_batch_norm(const mft_tensor *x, mft_tensor *running_mean,
                                   mft_tensor *running_var, const mft_tensor *weight,
                                   const mft_tensor *bias, bool training, double momentum,
                                   double eps);
MFT_API mft_tensor *mft_layer_norm(const mft_tensor *x, int nnorm, const int64_t *normalized_shape,
                                   const mft_tensor *weight, const mft_tensor *bias, double eps);
MFT_API mft_tensor *mft_group_norm(const mft_tensor *x, int64_t groups, const mft_tensor *weight,
                                   const mft_tensor *bias, double eps);
MFT_API mft_tensor *mft_instance_norm(const mft_tensor *x, const mft_tensor *weight,
                                      const mft_tensor *bias, double eps);

#ifdef __cplusplus
}
#endif
#endif
