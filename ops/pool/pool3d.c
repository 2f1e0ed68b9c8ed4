/* ops/pool/pool3d.c — the entry points of 3-D max and average pooling
 * (mft/pool.h), forward and backward, of (N, C, D, H, W) or (C, D, H, W)
 * tensors, through the machinery of common.c; the kernels (ops max_pool3d,
 * avg_pool3d and their backward) are the rank-generic ones of max_nchw.c,
 * max_nhwc.c, avg_nchw.c, avg_nhwc.c and reference.c. */
#include "pool_internal.h"
#include "blocked_outputs.h"

mft_tensor *mft_max_pool3d(const mft_tensor *x, const int64_t kernel[3], const int64_t stride[3],
                           const int64_t padding[3], const int64_t dilation[3], bool ceil_mode) {
    MFT__BLOCKED_FALLBACK("max_pool3d",
                          mft_max_pool3d(x, kernel, stride, padding, dilation, ceil_mode), 1, &x);
    pm_req q = {kernel, stride, padding, dilation, ceil_mode, false, 0};
    return mft__pool_forward("mft_max_pool3d", 3, true, x, &q, NULL);
}

mft_tensor *mft_max_pool3d_with_indices(const mft_tensor *x, const int64_t kernel[3],
                                        const int64_t stride[3], const int64_t padding[3],
                                        const int64_t dilation[3], bool ceil_mode,
                                        mft_tensor **indices) {
    MFT__BLOCKED_FALLBACK_OUTS(
        "max_pool3d_with_indices",
        mft_max_pool3d_with_indices(x, kernel, stride, padding, dilation, ceil_mode, indices), 1,
        ((mft_tensor **[]){indices}), ((const mft_tensor *[]){NULL}), 1, &x);
    static const char fn[] = "mft_max_pool3d_with_indices";
    pm_req q = {kernel, stride, padding, dilation, ceil_mode, false, 0};
    return mft__pool_indices_arg(fn, x, indices) ? mft__pool_forward(fn, 3, true, x, &q, indices)
                                                 : NULL;
}

mft_tensor *mft_max_pool3d_backward(const mft_tensor *grad_out, const mft_tensor *x,
                                    const mft_tensor *indices) {
    MFT__BLOCKED_FALLBACK_LIKE("max_pool3d_backward", x,
                               mft_max_pool3d_backward(grad_out, x, indices), 3, &grad_out, &x,
                               &indices);
    return mft__pool_max_backward("mft_max_pool3d_backward", 3, grad_out, x, indices, NULL);
}

mft_tensor *mft_avg_pool3d(const mft_tensor *x, const int64_t kernel[3], const int64_t stride[3],
                           const int64_t padding[3], bool ceil_mode, bool count_include_pad,
                           int64_t divisor_override) {
    MFT__BLOCKED_FALLBACK(
        "avg_pool3d",
        mft_avg_pool3d(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override),
        1, &x);
    pm_req q = {kernel, stride, padding, NULL, ceil_mode, count_include_pad, divisor_override};
    return mft__pool_forward("mft_avg_pool3d", 3, false, x, &q, NULL);
}

mft_tensor *mft_avg_pool3d_backward(const mft_tensor *grad_out, const mft_tensor *x,
                                    const int64_t kernel[3], const int64_t stride[3],
                                    const int64_t padding[3], bool ceil_mode,
                                    bool count_include_pad, int64_t divisor_override) {
    MFT__BLOCKED_FALLBACK_LIKE("avg_pool3d_backward", x,
                               mft_avg_pool3d_backward(grad_out, x, kernel, stride, padding,
                                                       ceil_mode, count_include_pad,
                                                       divisor_override),
                               2, &grad_out, &x);
    pm_req q = {kernel, stride, padding, NULL, ceil_mode, count_include_pad, divisor_override};
    return mft__pool_avg_backward("mft_avg_pool3d_backward", 3, grad_out, x, &q);
}
