/* ops/linalg/reference.c — the reference kernels of op "matmul" (F32, F64),
 * which define the semantics: a triple loop accumulating in double through
 * the real strides, reached through mft__gemm_reference (tests; they are not
 * in the kernel table); and the batch / stride bookkeeping of a kernel call
 * (gemm_shape, linalg_internal.h) they share with the packed driver of
 * gemm.c. */
#include "linalg_internal.h"

/* ---------------------------------------------------------------- bookkeeping */
void mft__gemm_shape_init(const mft_kernel_args *a, gemm_shape *g) {
    const mft_matmul_params *p = a->params;
    g->A = a->inputs[0];
    g->B = a->inputs[1];
    g->C = a->outputs[0];
    const int r = g->r = g->C->ndim;
    g->M = g->C->sizes[r - 2];
    g->N = g->C->sizes[r - 1];
    g->K = g->A->sizes[r - (p->transpose_a ? 2 : 1)];
    g->ars = g->A->strides[r - (p->transpose_a ? 1 : 2)];
    g->acs = g->A->strides[r - (p->transpose_a ? 2 : 1)];
    g->bks = g->B->strides[r - (p->transpose_b ? 1 : 2)];
    g->bns = g->B->strides[r - (p->transpose_b ? 2 : 1)];
    g->batch = 1;
    for (int d = 0; d < r - 2; d++) g->batch *= g->C->sizes[d];
}

void mft__gemm_batch_offsets(const gemm_shape *g, int64_t bi, int64_t *ao, int64_t *bo) {
    int64_t oa = 0, ob = 0;
    for (int d = g->r - 3; d >= 0; d--) {
        int64_t n = g->C->sizes[d], i = bi % n;
        bi /= n;
        oa += i * g->A->strides[d];
        ob += i * g->B->strides[d];
    }
    *ao = oa;
    *bo = ob;
}

/* ---------------------------------------------------------------- reference kernels
 * Triple loop accumulating in double, through the real strides. */
#define GEMM_REF(D)                                                                           \
    static void matmul_ref_##D(const mft_kernel_args *a) {                                    \
        typedef MFT__T_##D T;                                                                 \
        gemm_shape g;                                                                         \
        mft__gemm_shape_init(a, &g);                                                          \
        const T *A = (const T *)(const void *)mft__tensor_ptr(g.A);                           \
        const T *B = (const T *)(const void *)mft__tensor_ptr(g.B);                           \
        T *C = (T *)(void *)mft__tensor_ptr(g.C);                                             \
        for (int64_t bi = 0; bi < g.batch; bi++) {                                            \
            int64_t ao, bo;                                                                   \
            mft__gemm_batch_offsets(&g, bi, &ao, &bo);                                        \
            T *c = C + bi * g.M * g.N;                                                        \
            for (int64_t i = 0; i < g.M; i++)                                                 \
                for (int64_t j = 0; j < g.N; j++) {                                           \
                    double s = 0;                                                             \
                    for (int64_t k = 0; k < g.K; k++)                                         \
                        s += (double)A[ao + i * g.ars + k * g.acs] *                          \
                             (double)B[bo + k * g.bks + j * g.bns];                           \
                    c[i * g.N + j] = (T)s;                                                    \
                }                                                                             \
        }                                                                                     \
    }
GEMM_REF(F32)
GEMM_REF(F64)

mft_kernel_fn mft__gemm_reference(mft_dtype dt) {
    return dt == MFT_F32 ? matmul_ref_F32 : dt == MFT_F64 ? matmul_ref_F64 : NULL;
}
