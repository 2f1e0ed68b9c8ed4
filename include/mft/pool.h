/* mft/pool.h — pooling: max / avg pools in 1-D, 2-D and 3-D, adaptive
 * pools, and their backward functions; dispatched by (op, format, dtype)
 * (mft/dispatch.h). Results and input gradients are packed in the input's
 * tag (docs/spec.md §4, §5). Ownership and NULL propagation as in mft/tensor.h. */
#ifndef MFT_POOL_H
#define MFT_POOL_H

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
    int64_t divisor_override; /* avg only; 0 = none; any other value divides (negative too, as PyTorch) */
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
/* max_pool2d(relu(x)) in one pass, for the relu -> max_pool2d pair of CNNs
 * (mft_nn_sequential fuses it; mft/nn.h). relu is monotone, so this is
 * relu of each window's maximum m: equal values to the two-op chain (a zero
 * may differ in sign), NaN propagates. The gradient is the chain's too: the
 * index of a window with m <= 0 is -1 (no input gets its gradient, which
 * relu's backward would zero), else the position of the first maximum, as
 * mft_max_pool2d_with_indices gives it. The relu-sized intermediate (four
 * times the result for 2x2 windows) is never written, nor read back in
 * backward. Records node "relu_max_pool2d", whose backward is
 * mft_max_pool2d_backward. Dispatched as op "relu_max_pool2d" (kernel
 * outputs {values, indices}, params mft_pool2d_params). Parameters that
 * leave a window with no input element (possible with dilation and
 * padding; max_pool2d gives -inf there) are refused (MFT_ERR_INVALID). */
MFT_API mft_tensor *mft_relu_max_pool2d(const mft_tensor *x, const int64_t kernel[2],
                                        const int64_t stride[2], const int64_t padding[2],
                                        const int64_t dilation[2], bool ceil_mode);
MFT_API mft_tensor *mft_relu_max_pool2d_with_indices(const mft_tensor *x,
                                                     const int64_t kernel[2],
                                                     const int64_t stride[2],
                                                     const int64_t padding[2],
                                                     const int64_t dilation[2], bool ceil_mode,
                                                     mft_tensor **indices);
/* Average pooling (PyTorch's semantics for count_include_pad and
 * divisor_override; 0 = no override). */
MFT_API mft_tensor *mft_avg_pool2d(const mft_tensor *x, const int64_t kernel[2],
                                   const int64_t stride[2], const int64_t padding[2],
                                   bool ceil_mode, bool count_include_pad,
                                   int64_t divisor_override);



/* Backward of max pooling (any of the max pools below, 1d/2d/3d and
 * adaptive): grad_x[n, c, i] = sum of grad_out over the windows whose
 * maximum was at flat spatial index i (indices as returned by the
 * *_with_indices forward; an index outside the plane is ignored). x gives
 * the input's sizes, dtype and format; grad_x is packed in x's tag (docs/spec.md
 * §5) whatever grad_out's layout. grad_out (x's dtype and rank, x's batch
 * and channels, spatial sizes >= 1) and indices (I64, grad_out's sizes)
 * stand for the forward result. Deterministic: the result does not depend
 * on the thread count. Kernels (ops max_pool2d_backward, max_pool3d_backward)
 * get inputs {grad_out, indices}, output {grad_x} and params NULL (but see
 * mft_max_pool2d_backward_windows). */
MFT_API mft_tensor *mft_max_pool2d_backward(const mft_tensor *grad_out, const mft_tensor *x,
                                            const mft_tensor *indices);
/* mft_max_pool2d_backward told the forward's windows (PyTorch's
 * max_pool2d_with_indices_backward takes them too): the same grad_x, bit for
 * bit, for indices that forward returned. With windows that do not
 * overlap (2x2 / stride 2) the NHWC kernel writes each grad_x pixel once
 * from the window holding it instead of zeroing grad_x and scattering
 * into it; with overlapping windows (3x3 / stride 2) it compares each index
 * with its window's positions. An index outside its own window adds
 * nothing here (mft_max_pool2d_backward would add it where it points); the
 * forward returns such an index only for a window with no input element
 * (its start), which both functions add where it points.
 * grad_out must have the sizes these windows give x; errors name the
 * values. relu_max_pool2d's tape node calls it, and so does max_pool2d's.
 * Kernels of op max_pool2d_backward receive params NULL (from
 * mft_max_pool2d_backward) or these windows as an mft_pool2d_params. */
MFT_API mft_tensor *mft_max_pool2d_backward_windows(const mft_tensor *grad_out,
                                                    const mft_tensor *x,
                                                    const mft_tensor *indices,
                                                    const int64_t kernel[2],
                                                    const int64_t stride[2],
                                                    const int64_t padding[2],
                                                    const int64_t dilation[2], bool ceil_mode);
/* Backward of avg_pool2d with the forward's parameters: grad_x[i] = sum
 * over the windows holding i of grad_out / divisor. grad_out must have the
 * forward result's sizes. Kernel params: mft_pool2d_params. */
MFT_API mft_tensor *mft_avg_pool2d_backward(const mft_tensor *grad_out, const mft_tensor *x,
                                            const int64_t kernel[2], const int64_t stride[2],
                                            const int64_t padding[2], bool ceil_mode,
                                            bool count_include_pad, int64_t divisor_override);

/* 1-D pools of (N, C, L) or (C, L) tensors (PyTorch runs them as 2-D pools
 * with H = 1; so do we: the max_pool2d / avg_pool2d kernels run on the
 * (N, C, 1, L) view). Indices are flat positions l. Results of an (N, C, L)
 * input are packed in its tag (rank-3 CHANNELS_LAST = N,L,C); of a (C, L)
 * input, contiguous. Errors name the 1-D function. */
MFT_API mft_tensor *mft_max_pool1d(const mft_tensor *x, const int64_t kernel[1],
                                   const int64_t stride[1], const int64_t padding[1],
                                   const int64_t dilation[1], bool ceil_mode);
MFT_API mft_tensor *mft_max_pool1d_with_indices(const mft_tensor *x, const int64_t kernel[1],
                                                const int64_t stride[1], const int64_t padding[1],
                                                const int64_t dilation[1], bool ceil_mode,
                                                mft_tensor **indices);
MFT_API mft_tensor *mft_max_pool1d_backward(const mft_tensor *grad_out, const mft_tensor *x,
                                            const mft_tensor *indices);
MFT_API mft_tensor *mft_avg_pool1d(const mft_tensor *x, const int64_t kernel[1],
                                   const int64_t stride[1], const int64_t padding[1],
                                   bool ceil_mode, bool count_include_pad);
MFT_API mft_tensor *mft_avg_pool1d_backward(const mft_tensor *grad_out, const mft_tensor *x,
                                            const int64_t kernel[1], const int64_t stride[1],
                                            const int64_t padding[1], bool ceil_mode,
                                            bool count_include_pad);

/* 3-D pools of (N, C, D, H, W) or (C, D, H, W) tensors; results packed in
 * x's tag (CHANNELS_LAST_3D stays NDHWC; an unbatched input gives
 * CONTIGUOUS). Indices are flat d*H*W + h*W + w. Semantics (windows,
 * NaN, count_include_pad, divisor_override, ceil_mode) as the 2-D pools.
 * Kernels (max_pool3d: 1 in, 2 out; avg_pool3d and the backward ops) get
 * mft_pool3d_params (stride filled in, dilation 1 for avg). */
typedef struct mft_pool3d_params {
    int64_t kernel[3], stride[3], padding[3], dilation[3];
    bool ceil_mode;
    bool count_include_pad;   /* avg only */
    int64_t divisor_override; /* avg only; 0 = none; any other value divides (negative too, as PyTorch) */
} mft_pool3d_params;
MFT_API mft_tensor *mft_max_pool3d(const mft_tensor *x, const int64_t kernel[3],
                                   const int64_t stride[3], const int64_t padding[3],
                                   const int64_t dilation[3], bool ceil_mode);
MFT_API mft_tensor *mft_max_pool3d_with_indices(const mft_tensor *x, const int64_t kernel[3],
                                                const int64_t stride[3], const int64_t padding[3],
                                                const int64_t dilation[3], bool ceil_mode,
                                                mft_tensor **indices);
MFT_API mft_tensor *mft_max_pool3d_backward(const mft_tensor *grad_out, const mft_tensor *x,
                                            const mft_tensor *indices);
MFT_API mft_tensor *mft_avg_pool3d(const mft_tensor *x, const int64_t kernel[3],
                                   const int64_t stride[3], const int64_t padding[3],
                                   bool ceil_mode, bool count_include_pad,
                                   int64_t divisor_override);
MFT_API mft_tensor *mft_avg_pool3d_backward(const mft_tensor *grad_out, const mft_tensor *x,
                                            const int64_t kernel[3], const int64_t stride[3],
                                            const int64_t padding[3], bool ceil_mode,
                                            bool count_include_pad, int64_t divisor_override);

/* Adaptive pools of (N, C, H, W) or (C, H, W) tensors to out[0] x out[1]
 * (each in [1, 2^30]; larger than the input is allowed): window i covers
 * [floor(i*in/out), ceil((i+1)*in/out)); avg divides by the window's size;
 * max as max_pool2d (NaN propagates, first of equal maxima), indices
 * h*W + w. Results packed in x's tag. adaptive_max_pool2d_backward is
 * max_pool2d_backward; adaptive_avg_pool2d_backward takes the output size
 * from grad_out. Kernels get mft_adaptive_pool_params (the output size). */
typedef struct mft_adaptive_pool_params {
    int64_t out[3]; /* the 2-D pools use out[0], out[1]; the 3-D ones all three */
} mft_adaptive_pool_params;
MFT_API mft_tensor *mft_adaptive_avg_pool2d(const mft_tensor *x, const int64_t out[2]);
MFT_API mft_tensor *mft_adaptive_avg_pool2d_backward(const mft_tensor *grad_out,
                                                     const mft_tensor *x);
MFT_API mft_tensor *mft_adaptive_max_pool2d(const mft_tensor *x, const int64_t out[2]);
MFT_API mft_tensor *mft_adaptive_max_pool2d_with_indices(const mft_tensor *x,
                                                         const int64_t out[2],
                                                         mft_tensor **indices);
MFT_API mft_tensor *mft_adaptive_max_pool2d_backward(const mft_tensor *grad_out,
                                                     const mft_tensor *x,
                                                     const mft_tensor *indices);

/* Adaptive pools of (N, C, D, H, W) or (C, D, H, W) tensors to
 * out[0] x out[1] x out[2] (each in [1, 2^30]; larger than the input is
 * allowed), F32 or F64, as the 2-D ones per dim: window i of a dim covers
 * [floor(i*in/out), ceil((i+1)*in/out)); avg divides by the window's
 * volume; max as max_pool3d (NaN propagates, the last NaN / first of equal
 * maxima wins), indices flat d*H*W + h*W + w within the (n, c) volume.
 * Results (and indices) packed in x's tag: CHANNELS_LAST stays NDHWC, an
 * unbatched input gives CONTIGUOUS. Errors name the function and the
 * values (NULL x / out / indices, rank, dtype, an output size out of
 * range). Recorded on the tape (nodes "adaptive_avg_pool3d",
 * "adaptive_max_pool3d"), with gradients packed in x's tag. Dispatched as
 * ops adaptive_avg_pool3d (1 in, 1 out) and adaptive_max_pool3d (1 in,
 * 2 out: values, I64 indices), kernels given mft_adaptive_pool_params
 * (all three entries used). */
MFT_API mft_tensor *mft_adaptive_avg_pool3d(const mft_tensor *x, const int64_t out[3]);
MFT_API mft_tensor *mft_adaptive_max_pool3d(const mft_tensor *x, const int64_t out[3]);
/* The same, also returning (new reference in *indices) the I64 indices,
 * laid out like the result. */
MFT_API mft_tensor *mft_adaptive_max_pool3d_with_indices(const mft_tensor *x,
                                                         const int64_t out[3],
                                                         mft_tensor **indices);
/* Backward of adaptive_avg_pool3d: the output size is grad_out's (x's batch
 * and channels, spatial sizes in [1, 2^30]); grad_x[i] = sum over the
 * windows holding i of grad_out / the window's volume, packed in x's tag
 * whatever grad_out's layout. Op adaptive_avg_pool3d_backward (1 in:
 * grad_out; 1 out: grad_x; params mft_adaptive_pool_params). */
MFT_API mft_tensor *mft_adaptive_avg_pool3d_backward(const mft_tensor *grad_out,
                                                     const mft_tensor *x);
/* Backward of adaptive_max_pool3d: mft_max_pool3d_backward under this name
 * (grad_x[n, c, i] = sum of grad_out where indices == i; op
 * max_pool3d_backward, params NULL). */
MFT_API mft_tensor *mft_adaptive_max_pool3d_backward(const mft_tensor *grad_out,
                                                     const mft_tensor *x,
                                                     const mft_tensor *indices);

#ifdef __cplusplus
}
#endif
#endif
