/* ops/pool/blocked16_common.c — the out-of-line helpers the nChw16c pooling
 * files share (blocked16_internal.h): the job of a call (b16_job) and the
 * allocation and column tables of the rings of Note [nChw16c row rings],
 * which the max and avg gathered backward both use. */
#include "blocked16_internal.h"

/* the job of a call (blocked16_internal.h states the functions below) */
b16_job mft__pool_b16_job_of(const mft_kernel_args *a, bool fwd) {
    const mft_tensor *x = fwd ? a->inputs[0] : a->outputs[0];
    const mft_tensor *y = fwd ? a->outputs[0] : a->inputs[0];
    b16_job j;
    memset(&j, 0, sizeof j);
    j.p = a->params;
    j.x = (const float *)(const void *)mft__tensor_ptr(a->inputs[0]);
    j.y = (float *)(void *)mft__tensor_ptr(a->outputs[0]);
    j.N = x->sizes[0];
    j.C = x->sizes[1];
    j.C1 = (j.C + 15) / 16;
    j.H = x->sizes[2];
    j.W = x->sizes[3];
    j.OH = y->sizes[2];
    j.OW = y->sizes[3];
    return j;
}

bool mft__pool_b16_ring_init(b16_ring *g, int64_t n, size_t row_bytes) {
    g->n = (int)n;
    g->row_bytes = row_bytes;
    for (int k = 0; k < B16_RING; k++) g->tag[k] = -1;
    g->buf = n >= 1 && n <= B16_RING ? mft__alloc((size_t)(n + 1) * row_bytes, 64) : NULL;
    return g->buf != NULL;
}

void mft__pool_b16_ring_cols(const int64_t *tw0, const int64_t *tw1, int64_t W, int64_t OW,
                             int64_t nw, int32_t *cols) {
    for (int64_t iw = 0; iw < W; iw++)
        for (int64_t b = 0; b < nw; b++)
            cols[iw * nw + b] = (int32_t)(tw0[iw] + b < tw1[iw] ? tw0[iw] + b : OW);
}
