/* ops/linalg/linalg_internal.h — what the files of the matrix multiplication
 * family (op "matmul") share beyond ops/ops_internal.h: the batch / stride
 * bookkeeping of a kernel call (gemm_shape, defined in reference.c), which
 * the reference kernels and the packed driver of gemm.c both read, and the
 * test hooks.
 *
 * The files: matmul.c holds the entry points mft_matmul and mft_linear, their
 * backward and their autograd nodes; flatten_linear.c mft_flatten_linear
 * (linear over a flattened activation in its memory order) and its backward;
 * gemm.c the packed (blocked) kernels and the kernel table; reference.c the
 * reference kernels and the bookkeeping. */
#ifndef MFT_OPS_LINALG_INTERNAL_H
#define MFT_OPS_LINALG_INTERNAL_H

#include "ops_internal.h"

/* ---------------------------------------------------------------- ops/linalg/reference.c */
/* One kernel call seen as a batch of matrices C = A @ B, with the transposes
 * of mft_matmul_params folded into A's and B's strides. */
typedef struct gemm_shape {
    const mft_tensor *A, *B, *C;
    int r;                   /* rank of A, B, C */
    int64_t batch, M, N, K;
    int64_t ars, acs;        /* A(i, k) at i*ars + k*acs */
    int64_t bks, bns;        /* B(k, n) at k*bks + n*bns (transpose handled here) */
} gemm_shape;

void mft__gemm_shape_init(const mft_kernel_args *a, gemm_shape *g);

/* ---------------------------------------------------------------- ops/linalg/matmul.c */
/* Hands an internal result res (consumed) to the caller, registered in the
 * user's scope; NULL res relabels the thread's error with fn. */
mft_tensor *mft__linalg_hand_over(const char *fn, mft_tensor *res);
/* Element offsets of matrix bi of the batch in A and B (C is packed: bi*M*N). */
void mft__gemm_batch_offsets(const gemm_shape *g, int64_t bi, int64_t *ao, int64_t *bo);

/* For tests (ops_internal.h is shared; declared here): the reference kernel
 * of a dtype (reference.c), and forcing the portable micro-kernels (gemm.c;
 * not thread-safe against running matmuls). */
mft_kernel_fn mft__gemm_reference(mft_dtype dt);
void mft__gemm_set_portable(bool on);

#endif
