/* mft/conv.h — convolutions (1-D, 2-D, 3-D, transposed 2-D) and their
 * backward functions, dispatched by (op, format, dtype) (mft/dispatch.h).
 *
 * Semantics are PyTorch's functional ones (F.conv1d/2d/3d,
 * F.conv_transpose2d). x is (N, C_in, spatial...) or unbatched (C_in,
 * spatial...); w is (C_out, C_in/groups, k...) (transposed: (C_in,
 * C_out/groups, k...)); b is (C_out) or NULL. x, w, b share one dtype (F32
 * or F64). Array arguments have one entry per spatial dim; NULL means the
 * default (stride 1, padding 0, dilation 1, output_padding 0).
 *   out = (in + 2*pad - dilation*(k-1) - 1) / stride + 1          (conv)
 *   out = (in-1)*stride - 2*pad + dilation*(k-1) + output_padding + 1
 *                                                                  (transposed)
 * Output format (docs/spec.md §4): CHANNELS_LAST (CHANNELS_LAST_3D for 3-D) if x's
 * or w's tag is channels-last, else CONTIGUOUS; 1-D convs run as 2-D convs
 * with H = 1 and keep x's tag. Blocked operands (docs/spec.md §7.10): conv2d
 * (F32, groups 1) on an nChw16c x, or with a weight blocked by 16 on O / I
 * (oneDNN's OIhw16i16o, Ohwi16o: mft_layout_from_onednn + mft_to_layout),
 * runs natively and gives nChw16c, also from a plain x (a first layer); the
 * weight's gradient comes back in its layout. Errors name the values: non-positive stride
 * or dilation, negative padding, output_padding >= stride and >= dilation,
 * groups not dividing C_in and C_out, weight rank or channel mismatch, an
 * empty output (kernel larger than the padded input), dtype mismatch. */
#ifndef MFT_CONV_H
#define MFT_CONV_H

#include <stdbool.h>
#include <stdint.h>
#include "mft/dispatch.h"
#include "mft/export.h"
#include "mft/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a registered convolution kernel receives in mft_kernel_args.params.
 * Six dispatched ops share it ("conv2d", "conv3d" and their
 * "_backward_input" / "_backward_weight" ops); their kernels see batched
 * tensors of rank 4 (2-D) or 5 (3-D) only (the entry points add the batch
 * dim and turn 1-D into 2-D):
 *   convNd:                 inputs {x, w}, outputs {y};
 *                           y = conv(x, w) + bias.
 *   convNd_backward_input:  inputs {grad_y, w}, outputs {grad_x};
 *                           grad_x = conv_transpose(grad_y, w) + bias.
 *                           (conv_transpose2d's forward runs this op with
 *                           its bias.) grad_x's spatial sizes are in
 *                           outputs[0]; positions no window reaches get 0.
 *   convNd_backward_weight: inputs {grad_y, x}, outputs {grad_w};
 *                           grad_w = sum over n, output positions of
 *                           grad_y * x (the gradient of conv w.r.t. w).
 * w is (C_out, C_in/groups, k...) in every op; x/y/grad are (N, C, sp...).
 * Activations (x, y, grad_y, grad_x) and grad_w are packed in the kernel's
 * format; w is passed as the caller gave it (any strides: fast kernels
 * repack weights anyway). Every output is fully overwritten. */
typedef struct mft_conv_params {
    int nspatial; /* 2 or 3 (the rank of the kernel's tensors minus 2) */
    int64_t stride[3], padding[3], dilation[3];
    int64_t groups;
    const mft_tensor *bias; /* (C of outputs[0]) any strides, or NULL; forward
                               and backward_input only */
} mft_conv_params;

/* Winograd F(4x4, 3x3) (ops/conv/winograd.c): the fast F32 conv2d kernels use it
 * for 3x3 convolutions with stride 1, dilation 1 and groups 1 (forward and
 * backward_input, NHWC and NCHW) when the channels and the image are large
 * enough for it to pay; it needs 4x fewer multiplications than the direct
 * sum but rounds differently (about 1e-6 of the output's scale). The
 * dispatch reports it in the kernel name (mft_dispatch_last()->kernel ends
 * in "winograd_f4x3"). On by default; MFT_CONV_WINOGRAD=0 in the
 * environment or mft_conv_set_winograd(false) keeps the direct kernels.
 * Process-wide; may be changed from any thread (a convolution running at that
 * moment uses either setting). */
MFT_API void mft_conv_set_winograd(bool enabled);
MFT_API bool mft_conv_winograd(void);

MFT_API mft_tensor *mft_conv1d(const mft_tensor *x, const mft_tensor *w, const mft_tensor *b,
                               const int64_t stride[1], const int64_t padding[1],
                               const int64_t dilation[1], int64_t groups);
MFT_API mft_tensor *mft_conv2d(const mft_tensor *x, const mft_tensor *w, const mft_tensor *b,
                               const int64_t stride[2], const int64_t padding[2],
                               const int64_t dilation[2], int64_t groups);
MFT_API mft_tensor *mft_conv3d(const mft_tensor *x, const mft_tensor *w, const mft_tensor *b,
                               const int64_t stride[3], const int64_t padding[3],
                               const int64_t dilation[3], int64_t groups);
/* w is (C_in, C_out/groups, kH, kW). */
MFT_API mft_tensor *mft_conv_transpose2d(const mft_tensor *x, const mft_tensor *w,
                                         const mft_tensor *b, const int64_t stride[2],
                                         const int64_t padding[2],
                                         const int64_t output_padding[2],
                                         const int64_t dilation[2], int64_t groups);

/* Backward functions: given grad_out (the forward result's sizes, any
 * layout) and the forward's inputs and parameters, compute the requested
 * gradients (an out pointer that is NULL is not computed): grad_x in x's
 * format, grad_w in w's format, grad_b (C_out) packed (docs/spec.md §5). On error
 * every requested pointer is set to NULL and nothing is allocated. */
MFT_API mft_status mft_conv1d_backward(const mft_tensor *grad_out, const mft_tensor *x,
                                       const mft_tensor *w, const int64_t stride[1],
                                       const int64_t padding[1], const int64_t dilation[1],
                                       int64_t groups, mft_tensor **grad_x, mft_tensor **grad_w,
                                       mft_tensor **grad_b);
MFT_API mft_status mft_conv2d_backward(const mft_tensor *grad_out, const mft_tensor *x,
                                       const mft_tensor *w, const int64_t stride[2],
                                       const int64_t padding[2], const int64_t dilation[2],
                                       int64_t groups, mft_tensor **grad_x, mft_tensor **grad_w,
                                       mft_tensor **grad_b);
MFT_API mft_status mft_conv3d_backward(const mft_tensor *grad_out, const mft_tensor *x,
                                       const mft_tensor *w, const int64_t stride[3],
                                       const int64_t padding[3], const int64_t dilation[3],
                                       int64_t groups, mft_tensor **grad_x, mft_tensor **grad_w,
                                       mft_tensor **grad_b);
MFT_API mft_status mft_conv_transpose2d_backward(const mft_tensor *grad_out, const mft_tensor *x,
                                                 const mft_tensor *w, const int64_t stride[2],
                                                 const int64_t padding[2],
                                                 const int64_t output_padding[2],
                                                 const int64_t dilation[2], int64_t groups,
                                                 mft_tensor **grad_x, mft_tensor **grad_w,
                                                 mft_tensor **grad_b);

#ifdef __cplusplus
}
#endif
#endif
