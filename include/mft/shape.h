/* mft/shape.h — padding, cat / stack / split, and their backward
 * functions. pad is dispatched (mft/dispatch.h); cat, stack and split are
 * built on copies and views. */
#ifndef MFT_SHAPE_H
#define MFT_SHAPE_H

#include <stdbool.h>
#include <stdint.h>
#include "mft/dispatch.h"
#include "mft/export.h"
#include "mft/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ padding, cat
 * pads: npad entries, pairs (before, after) for the LAST dims first, as
 * PyTorch's F.pad: {w_before, w_after, h_before, h_after, ...}; npad even
 * and <= 2*ndim. Negative pads crop (constant mode). reflect needs pad <
 * size, replicate needs size > 0. Result packed in x's tag (docs/spec.md §4). */
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
 * CONTIGUOUS (docs/spec.md §4). stack inserts a new dim first. */
MFT_API mft_tensor *mft_cat(int n, const mft_tensor *const *ts, int dim);
MFT_API mft_tensor *mft_stack(int n, const mft_tensor *const *ts, int dim);
/* Views of x in chunks of split_size along dim (the last may be smaller);
 * writes up to max_out new references into outs and their count into
 * *nout. More chunks than max_out: MFT_ERR_INVALID, nothing returned. */
/* Autograd: pad, cat, stack record one node each; split records one node
 * with one output per chunk (chunks nobody uses contribute zeros). */
MFT_API mft_status mft_split(const mft_tensor *x, int64_t split_size, int dim, int max_out,
                             mft_tensor **outs, int *nout);


/* Backward of pad: grad_x (x's sizes, packed in x's tag) = the sum of
 * grad_out over every output element that read each input element
 * (constant: the un-padded window; reflect / replicate accumulate the
 * mirrored / clamped elements). */
MFT_API mft_tensor *mft_pad_backward(const mft_tensor *grad_out, const mft_tensor *x, int npad,
                                     const int64_t *pads, mft_pad_mode mode);
/* Backward of cat / stack: grads[i] (new references, n of them) = the slice
 * of grad_out that came from ts[i], packed in ts[i]'s tag. On error nothing
 * is written to grads. */
MFT_API mft_status mft_cat_backward(const mft_tensor *grad_out, int n,
                                    const mft_tensor *const *ts, int dim, mft_tensor **grads);
MFT_API mft_status mft_stack_backward(const mft_tensor *grad_out, int n,
                                      const mft_tensor *const *ts, int dim, mft_tensor **grads);

#ifdef __cplusplus
}
#endif
#endif
