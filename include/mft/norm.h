/* mft/norm.h — batch / layer / group / instance normalisation,
 * forward and backward, dispatched by (op, format, dtype) (mft/dispatch.h). */
#ifndef MFT_NORM_H
#define MFT_NORM_H

#include <stdbool.h>
#include <stdint.h>
#include "mft/dispatch.h"
#include "mft/export.h"
#include "mft/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ normalisation
 * batch_norm over (N, spatial) per channel of an (N, C, ...) tensor. In
 * training the batch statistics normalise (biased variance) and the running
 * stats, if given, are updated in place: running = (1-momentum)*running +
 * momentum*stat, with the UNBIASED variance (PyTorch). In eval the running
 * stats normalise (both required). weight/bias (C) may be NULL. Result packed
 * in x's tag. layer_norm normalises over the last nnorm dims (whose sizes
 * must equal normalized_shape), weight/bias of normalized_shape or NULL.
 * group_norm splits C into groups; weight/bias (C) or NULL. instance_norm is
 * group_norm with one group per channel (no running stats).
 * Autograd: under a recording tape each of these (the _ex variants too)
 * records one node; x, weight and bias get gradients (x's in x's format),
 * the running statistics never: they are updated by the training forward
 * only, and one that requires grad is refused in training while recording. */
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



/* Forward variants that also return the statistics the backward needs (new
 * references; each out pointer may be NULL). batch_norm: save_mean and
 * save_invstd (C) = the batch mean and 1/sqrt(biased var + eps) in
 * training, the running ones in eval. layer_norm: mean / rstd with one
 * element per normalised set (numel / prod(normalized_shape), flat 1-D);
 * group_norm / instance_norm: (N * groups) flat 1-D. All in x's dtype. */
MFT_API mft_tensor *mft_batch_norm_ex(const mft_tensor *x, mft_tensor *running_mean,
                                      mft_tensor *running_var, const mft_tensor *weight,
                                      const mft_tensor *bias, bool training, double momentum,
                                      double eps, mft_tensor **save_mean,
                                      mft_tensor **save_invstd);
MFT_API mft_tensor *mft_layer_norm_ex(const mft_tensor *x, int nnorm,
                                      const int64_t *normalized_shape, const mft_tensor *weight,
                                      const mft_tensor *bias, double eps, mft_tensor **mean,
                                      mft_tensor **rstd);
MFT_API mft_tensor *mft_group_norm_ex(const mft_tensor *x, int64_t groups,
                                      const mft_tensor *weight, const mft_tensor *bias,
                                      double eps, mft_tensor **mean, mft_tensor **rstd);

/* Backward functions. grad_x is packed in x's tag (docs/spec.md §5); grad_weight /
 * grad_bias are 1-D (batch/group/instance norm: C) or of normalized_shape
 * (layer_norm), packed. Each out pointer may be NULL (not computed); weight
 * may be NULL (= 1). The statistics are those the _ex forward returned
 * (batch_norm: required; in eval the running statistics, so grad_x =
 * grad_out * w * invstd); for layer / group / instance norm they may be
 * NULL and are then recomputed from x with eps. On error every requested
 * pointer is set to NULL. */
MFT_API mft_status mft_batch_norm_backward(const mft_tensor *grad_out, const mft_tensor *x,
                                           const mft_tensor *weight, const mft_tensor *save_mean,
                                           const mft_tensor *save_invstd, bool training,
                                           mft_tensor **grad_x, mft_tensor **grad_weight,
                                           mft_tensor **grad_bias);
MFT_API mft_status mft_layer_norm_backward(const mft_tensor *grad_out, const mft_tensor *x,
                                           int nnorm, const int64_t *normalized_shape,
                                           const mft_tensor *mean, const mft_tensor *rstd,
                                           const mft_tensor *weight, double eps,
                                           mft_tensor **grad_x, mft_tensor **grad_weight,
                                           mft_tensor **grad_bias);
MFT_API mft_status mft_group_norm_backward(const mft_tensor *grad_out, const mft_tensor *x,
                                           int64_t groups, const mft_tensor *mean,
                                           const mft_tensor *rstd, const mft_tensor *weight,
                                           double eps, mft_tensor **grad_x,
                                           mft_tensor **grad_weight, mft_tensor **grad_bias);
MFT_API mft_status mft_instance_norm_backward(const mft_tensor *grad_out, const mft_tensor *x,
                                              const mft_tensor *mean, const mft_tensor *rstd,
                                              const mft_tensor *weight, double eps,
                                              mft_tensor **grad_x, mft_tensor **grad_weight,
                                              mft_tensor **grad_bias);

#ifdef __cplusplus
}
#endif
#endif
