/* mft/linalg.h — matmul and linear with their backward functions,
 * dispatched as op "matmul" (mft/dispatch.h). */
#ifndef MFT_LINALG_H
#define MFT_LINALG_H

#include <stdbool.h>
#include <stdint.h>
#include "mft/dispatch.h"
#include "mft/export.h"
#include "mft/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ linear algebra
 * matmul: PyTorch's semantics (1-D/2-D/batched with broadcasting of batch
 * dims), F32/F64; result CONTIGUOUS. linear(x, w, b) = x @ w^T + b with w
 * (out, in) and b (out) or NULL; x (..., in). */
typedef struct mft_matmul_params {
    bool transpose_b; /* linear: b is (N, K) and used as its transpose */
    bool transpose_a; /* a is (K, M) and used as its transpose (a^T of a packed a) */
} mft_matmul_params;
MFT_API mft_tensor *mft_matmul(const mft_tensor *a, const mft_tensor *b);
MFT_API mft_tensor *mft_linear(const mft_tensor *x, const mft_tensor *w, const mft_tensor *b);
/* flatten_linear(x, w, b) = linear(flatten(x, 1, -1), w, b): x (N, ...) of
 * rank >= 2 in any layout, w (O, K) with K the product of x's sizes after N,
 * b (O) or NULL; result (N, O) CONTIGUOUS. When each image of x is one dense
 * chunk of memory (packed NCHW, NHWC, nChw16c, nChw8c: batch outermost) the
 * product runs over x's physical order, so nothing is copied: w's columns
 * are gathered into that order (zeros for blocked pad lanes) and one GEMM
 * reads x's memory as it is (docs/spec.md §4.2). Other layouts (gaps,
 * broadcast, batch not outermost), an empty x and a blocked w or b run
 * flatten then linear, the flatten's copy counted (cause reshape). Values
 * equal the composition's within float rounding (the sum runs in another
 * order; identical for packed NCHW). Records the tape node
 * "flatten_linear". Errors: MFT_ERR_RANK (x below rank 2, w not 2-D),
 * MFT_ERR_SHAPE (w's in features or b's size), MFT_ERR_DTYPE (not F32/F64,
 * or dtypes that differ). */
MFT_API mft_tensor *mft_flatten_linear(const mft_tensor *x, const mft_tensor *w,
                                       const mft_tensor *b);


/* Backward of matmul: grad_a = grad_out @ b^T, grad_b = a^T @ grad_out,
 * reduced over broadcast batch dims to a's / b's sizes (1-D operands as
 * PyTorch). Backward of linear: grad_x = grad_out @ w, grad_w = grad_out^T
 * @ x (summed over x's leading dims), grad_b = sum of grad_out over all but
 * the last dim. Each out pointer may be NULL (that gradient is not
 * computed); gradients are CONTIGUOUS packed (what x / w / b are for every
 * input these ops accept without a copy), or in the input's tag if it has
 * one. On error every requested pointer is set to NULL. */
MFT_API mft_status mft_matmul_backward(const mft_tensor *grad_out, const mft_tensor *a,
                                       const mft_tensor *b, mft_tensor **grad_a,
                                       mft_tensor **grad_b);
/* Backward of flatten_linear: grad_x in x's format (docs/spec.md §5; a
 * blocked x gets its blocks, pad lanes 0) written by one GEMM without a
 * copy when x is read without one, grad_w (O, K) and grad_b (O) CONTIGUOUS;
 * grad_out is (N, O). Out pointers as mft_linear_backward. */
MFT_API mft_status mft_flatten_linear_backward(const mft_tensor *grad_out, const mft_tensor *x,
                                               const mft_tensor *w, mft_tensor **grad_x,
                                               mft_tensor **grad_w, mft_tensor **grad_b);
MFT_API mft_status mft_linear_backward(const mft_tensor *grad_out, const mft_tensor *x,
                                       const mft_tensor *w, mft_tensor **grad_x,
                                       mft_tensor **grad_w, mft_tensor **grad_b);

#ifdef __cplusplus
}
#endif
#endif
