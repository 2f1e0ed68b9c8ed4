/* ops/pool/pool1d.c — the entry points of 1-D max and average pooling
 * (mft/pool.h), forward and backward, of (N, C, L) or (C, L) tensors. They run
 * the 2-D ops on an (N, C, 1, L) view (as PyTorch does) through the
 * machinery of common.c: the kernels are those of max_pool2d / avg_pool2d
 * and their backward; indices are flat positions l. */
#include "pool_internal.h"
#include "blocked_outputs.h"

mft_tensor *mft_max_pool1d(const mft_tensor *x, const int64_t kernel[1], const int64_t stride[1],
                           const int64_t padding[1], const int64_t dilation[1], bool ceil_mode) {
    MFT__BLOCKED_FALLBACK("max_pool1d",
                          mft_max_pool1d(x, kernel, stride, padding, dilation, ceil_mode), 1, &x);
    pm_req q = {kernel, stride, padding, dilation, ceil_mode, false, 0};
    return mft__pool_forward("mft_max_pool1d", 1, true, x, &q, NULL);
}

mft_tensor *mft_max_pool1d_with_indices(const mft_tensor *x, const int64_t kernel[1],
                                        const int64_t stride[1], const int64_t padding[1],
                                        const int64_t dilation[1], bool ceil_mode,
                                        mft_tensor **indices) {
    MFT__BLOCKED_FALLBACK_OUTS(
        "max_pool1d_with_indices",
        mft_max_pool1d_with_indices(x, kernel, stride, padding, dilation, ceil_mode, indices), 1,
        ((mft_tensor **[]){indices}), ((const mft_tensor *[]){NULL}), 1, &x);
    static const char fn[] = "mft_max_pool1d_with_indices";
    pm_req q = {kernel, stride, padding, dilation, ceil_mode, false, 0};
    return mft__pool_indices_arg(fn, x, indices) ? mft__pool_forward(fn, 1, true, x, &q, indices)
                                                 : NULL;
}

mft_tensor *mft_max_pool1d_backward(const mft_tensor *grad_out, const mft_tensor *x,
                                    const mft_tensor *indices) {
    MFT__BLOCKED_FALLBACK_LIKE("max_pool1d_backward", x,
                               mft_max_pool1d_backward(grad_out, x, indices), 3, &grad_out, &x,
                               &indices);
    return mft__pool_max_backward("mft_max_pool1d_backward", 1, grad_out, x, indices, NULL);
}

mft_tensor *mft_avg_pool1d(const mft_tensor *x, const int64_t kernel[1], const int64_t stride[1],
                           const int64_t padding[1], bool ceil_mode, bool count_include_pad) {
    MFT__BLOCKED_FALLBACK("avg_pool1d",
                          mft_avg_pool1d(x, kernel, stride, padding, ceil_mode, count_include_pad),
                          1, &x);
    pm_req q = {kernel, stride, padding, NULL, ceil_mode, count_include_pad, 0};
    return mft__pool_forward("mft_avg_pool1d", 1, false, x, &q, NULL);
}

mft_tensor *mft_avg_pool1d_backward(const mft_tensor *grad_out, const mft_tensor *x,
                                    const int64_t kernel[1], const int64_t stride[1],
                                    const int64_t padding[1], bool ceil_mode,
                                    bool count_include_pad) {
    MFT__BLOCKED_FALLBACK_LIKE(
        "avg_pool1d_backward", x,
        mft_avg_pool1d_backward(grad_out, x, kernel, stride, padding, ceil_mode, count_include_pad),
        2, &grad_out, &x);
    pm_req q = {kernel, stride, padding, NULL, ceil_mode, count_include_pad, 0};
    return mft__pool_avg_backward("mft_avg_pool1d_backward", 1, grad_out, x, &q);
}
