/* mft/loss.h — PyTorch's functional losses (F.cross_entropy, F.nll_loss,
 * F.mse_loss, F.binary_cross_entropy_with_logits), each with a public
 * _backward beside it, plus an argmax accuracy count for training loops.
 *
 * Every loss records a node on the autograd tape (mft/autograd.h) when one
 * of its differentiable inputs requires grad, so `mft_backward(loss, NULL)`
 * works straight after a forward.
 *
 * Shapes. "Class" losses (cross_entropy, nll_loss) take the class dim at
 * dim 1 of an (N, C) or (N, C, d1, ..., dk) input (or dim 0 of an unbatched
 * (C) input); positions are the other dims, (N, d1, ..., dk) (or () for
 * (C)). Inputs may have any strides: NCHW, NHWC (channels_last), padded,
 * sliced. F32 and F64; every floating argument must share the input's dtype.
 *
 * Scalar results. mft supports 0-dim tensors, so MEAN and SUM return a
 * 0-dim tensor (ndim 0, one element) as PyTorch does. Backward functions
 * accept any one-element grad_out for MEAN / SUM (0-dim or (1)).
 *
 * Result formats. NONE returns the per-position loss: class losses a packed
 * CONTIGUOUS (N, d1, ...) tensor (for NHWC logits that is also the memory
 * order of the positions); mse / bce a dense tensor with the input's dim
 * order and tag (as empty_like PRESERVE). Backward functions return the
 * gradient packed like their first input (its strides when it is dense,
 * else dense in its dim order; its tag): NHWC logits give an NHWC gradient.
 *
 * Errors (NULL returned, message naming the function and the values):
 * NULL input or target (NULL propagates), non-floating input, dtype
 * mismatch, shape mismatch, class index outside [0, C) that is not
 * ignore_index (validated before anything is computed), weight not of
 * size C, label_smoothing outside [0, 1], bad reduction.
 *
 * Ownership: every function returns a new reference; arguments are
 * borrowed. */
#ifndef MFT_LOSS_H
#define MFT_LOSS_H

#include <stdint.h>
#include "mft/export.h"
#include "mft/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* NONE: per-position losses; MEAN / SUM: a 0-dim scalar. */
typedef enum mft_reduction {
    MFT_REDUCTION_NONE,
    MFT_REDUCTION_MEAN,
    MFT_REDUCTION_SUM,
    MFT_REDUCTION_COUNT
} mft_reduction;

/* PyTorch's default ignore_index. */
#define MFT_IGNORE_INDEX_DEFAULT (-100)

/* F.cross_entropy(logits, target, weight, ignore_index=, reduction=,
 * label_smoothing=): log_softmax over the class dim, then the negative
 * log-likelihood, in one fused pass (no temporaries).
 *   logits: (N, C, d1, ...), (N, C) or (C); any layout; F32 / F64.
 *   target: class indices, I64 of the positions' sizes ((N, d1, ...), (N)
 *     or ()), each in [0, C) or equal to ignore_index (ignored positions
 *     add 0 and no weight); OR class probabilities, of logits' dtype and
 *     sizes (ignore_index is then unused, as in PyTorch).
 *   weight: (C) per-class rescaling, logits' dtype, or NULL (all 1).
 *   label_smoothing in [0, 1]: the target mixes (1 - eps) of itself with
 *     eps / C of the uniform distribution (PyTorch's formula: ignored
 *     positions add nothing to either term).
 * MEAN divides by the sum of the weights of the non-ignored targets (the
 * number of positions for probability targets), exactly as F.cross_entropy;
 * it is NaN when that sum is 0. Differentiable w.r.t. logits and a
 * probability target; weight is a constant (no gradient flows to it). New
 * reference. */
MFT_API mft_tensor *mft_cross_entropy(const mft_tensor *logits, const mft_tensor *target,
                                      const mft_tensor *weight, int64_t ignore_index,
                                      double label_smoothing, mft_reduction reduction);
/* Gradient of mft_cross_entropy w.r.t. logits for grad_out (the forward
 * result's sizes; any one-element tensor for MEAN / SUM), packed like
 * logits. Same arguments and errors as the forward. New reference. */
MFT_API mft_tensor *mft_cross_entropy_backward(const mft_tensor *grad_out,
                                               const mft_tensor *logits,
                                               const mft_tensor *target,
                                               const mft_tensor *weight, int64_t ignore_index,
                                               double label_smoothing,
                                               mft_reduction reduction);

/* F.nll_loss(logp, target, weight, ignore_index=, reduction=): the loss at a
 * position is -weight[t] * logp[n, t, d...]; shapes, target (class indices
 * only, I64), weight, ignore_index and MEAN as mft_cross_entropy.
 * Differentiable w.r.t. logp. New reference. */
MFT_API mft_tensor *mft_nll_loss(const mft_tensor *logp, const mft_tensor *target,
                                 const mft_tensor *weight, int64_t ignore_index,
                                 mft_reduction reduction);
/* Gradient w.r.t. logp, packed like logp. New reference. */
MFT_API mft_tensor *mft_nll_loss_backward(const mft_tensor *grad_out, const mft_tensor *logp,
                                          const mft_tensor *target, const mft_tensor *weight,
                                          int64_t ignore_index, mft_reduction reduction);

/* F.mse_loss(input, target, reduction=): (input - target)^2, any rank and
 * layout. input and target must have the same sizes and dtype (deviation:
 * PyTorch broadcasts them with a warning; mft refuses, MFT_ERR_SHAPE).
 * Differentiable w.r.t. input and target. New reference. */
MFT_API mft_tensor *mft_mse_loss(const mft_tensor *input, const mft_tensor *target,
                                 mft_reduction reduction);
/* Gradient w.r.t. input (2 (input - target) grad_out, / numel for MEAN),
 * packed like input; the gradient w.r.t. target is its negation. New
 * reference. */
MFT_API mft_tensor *mft_mse_loss_backward(const mft_tensor *grad_out, const mft_tensor *input,
                                          const mft_tensor *target, mft_reduction reduction);

/* F.binary_cross_entropy_with_logits(x, target, weight, pos_weight=,
 * reduction=): per element, with lw = (pos_weight - 1) * target + 1
 * (1 without pos_weight),
 *   loss = weight * ((1 - target) * x + lw * log(1 + exp(-x)))
 * computed stably. x and target: same sizes and dtype, any layout.
 * weight: broadcastable to x's sizes (e.g. (N, 1) or (C)) or NULL.
 * pos_weight: broadcastable to x's sizes (typically (C), the last dim) or
 * NULL. Differentiable w.r.t. x and target; weight and pos_weight are
 * constants (no gradient flows to them, a deviation from PyTorch's
 * autograd). New reference. */
MFT_API mft_tensor *mft_binary_cross_entropy_with_logits(const mft_tensor *x,
                                                         const mft_tensor *target,
                                                         const mft_tensor *weight,
                                                         const mft_tensor *pos_weight,
                                                         mft_reduction reduction);
/* Gradient w.r.t. x: weight * (lw * sigmoid(x) - pos_weight * target) *
 * grad_out (/ numel for MEAN; pos_weight 1 when NULL), packed like x. New
 * reference. */
MFT_API mft_tensor *mft_binary_cross_entropy_with_logits_backward(
    const mft_tensor *grad_out, const mft_tensor *x, const mft_tensor *target,
    const mft_tensor *weight, const mft_tensor *pos_weight, mft_reduction reduction);

/* Number of positions whose argmax over the class dim (the first maximum;
 * NaN counts as the maximum, as torch.argmax) equals the target, for
 * logits / target shaped as in mft_cross_entropy (class indices, I64; an
 * index outside [0, C) simply never matches). Returns a 0-dim I64 tensor.
 * Not differentiable (never recorded). New reference. */
MFT_API mft_tensor *mft_accuracy_count(const mft_tensor *logits, const mft_tensor *target);

#ifdef __cplusplus
}
#endif
#endif
