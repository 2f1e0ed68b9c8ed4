/* mft/softmax.h — softmax and log_softmax along one dim, forward and
 * backward, dispatched by (op, format, dtype) (mft/dispatch.h). */
#ifndef MFT_SOFTMAX_H
#define MFT_SOFTMAX_H

#include <stdbool.h>
#include <stdint.h>
#include "mft/dispatch.h"
#include "mft/export.h"
#include "mft/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a registered softmax / log_softmax kernel receives as params. */
typedef struct mft_softmax_params {
    int dim; /* already wrapped to 0..ndim-1 */
} mft_softmax_params;

/* softmax(x)_i = exp(x_i - max) / sum_j exp(x_j - max) along dim (negative
 * counts from the end), F32 or F64, any rank >= 1; log_softmax is
 * x_i - max - log(sum_j exp(x_j - max)). Result packed in x's tag (docs/spec.md §4;
 * deviation: PyTorch 1.13 returns contiguous strides). A size-0 dim gives an
 * empty result. */
/* Autograd: softmax / log_softmax record one node (the output saved). */
MFT_API mft_tensor *mft_softmax(const mft_tensor *x, int dim);
MFT_API mft_tensor *mft_log_softmax(const mft_tensor *x, int dim);


/* Backward from the forward's result out (softmax: y; log_softmax: log y):
 *   softmax:     grad_x = y * (grad_out - sum_dim(grad_out * y))
 *   log_softmax: grad_x = grad_out - exp(out) * sum_dim(grad_out)
 * grad_x is packed in out's tag (= the input's, docs/spec.md §5). */
MFT_API mft_tensor *mft_softmax_backward(const mft_tensor *grad_out, const mft_tensor *out,
                                         int dim);
MFT_API mft_tensor *mft_log_softmax_backward(const mft_tensor *grad_out, const mft_tensor *out,
                                             int dim);

#ifdef __cplusplus
}
#endif
#endif
