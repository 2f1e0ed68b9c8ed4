/* tensor/iter.c — the elementwise iteration engine (Note [Elementwise
 * iteration] in internal.h): broadcast shape, per-operand strides, reorder by
 * stride with PyTorch's tie rules, coalescing, and the parallel 2-D loop
 * driver. Each step is a separate function with its own unit tests
 * (tests/tensor/test_iter.c). Copies, format conversion and (later) every pointwise op
 * run through it, which is how format propagation falls out of one rule. */
#include <string.h>
#include "internal.h"

mft_status mft__broadcast_shape(const char *fn, int nops, const int *ndims,
                                const int64_t *const *sizes, int *out_ndim, int64_t *out) {
    int nd = 0;
    bool equal = true; /* common case: identical sizes, nothing to broadcast */
    for (int k = 0; k < nops; k++) {
        if (ndims[k] > nd) nd = ndims[k];
        equal = equal && ndims[k] == ndims[0];
        for (int i = 0; equal && i < ndims[k]; i++) equal = sizes[k][i] == sizes[0][i];
    }
    if (equal) {
        for (int i = 0; i < nd; i++) out[i] = sizes[0][i];
        *out_ndim = nd;
        return MFT_OK;
    }
    for (int i = 0; i < nd; i++) out[i] = 1;
    for (int k = 0; k < nops; k++) {
        int off = nd - ndims[k];
        for (int i = 0; i < ndims[k]; i++) {
            int64_t s = sizes[k][i];
            int64_t *o = &out[off + i];
            if (s == *o || s == 1) continue;
            if (*o == 1) {
                *o = s;
                continue;
            }
            /* name the first operand that disagrees */
            char a[MFT__DIMS_BUF], b[MFT__DIMS_BUF];
            int first = 0;
            for (int j = 0; j < k; j++) {
                int oj = nd - ndims[j] + 0;
                int idx = off + i - oj;
                if (idx >= 0 && sizes[j][idx] == *o) { first = j; break; }
            }
            mft__set_error(MFT_ERR_SHAPE, "%s: sizes %s and %s do not broadcast at dim %d (%lld vs %lld)",
                           fn, mft__fmt_dims(a, sizeof a, ndims[first], sizes[first]),
                           mft__fmt_dims(b, sizeof b, ndims[k], sizes[k]), off + i,
                           (long long)*o, (long long)s);
            return MFT_ERR_SHAPE;
        }
    }
    *out_ndim = nd;
    return MFT_OK;
}

/* -1: dim a goes before (faster than) dim b; 1: after; 0: undecided. Operands
 * in order; a broadcast (stride 0) dim lets the next operand decide; equal
 * strides put the larger dim outward. */
static int iter_compare(int nops, const int64_t *shape, const int64_t *strides, int a, int b) {
    for (int k = 0; k < nops; k++) {
        int64_t sa = strides[k * MFT_MAX_DIMS + a], sb = strides[k * MFT_MAX_DIMS + b];
        if (sa == 0 || sb == 0) continue;
        if (sa < sb) return -1;
        if (sa > sb) return 1;
        if (shape[a] > shape[b]) return 1;
    }
    return 0;
}

void mft__iter_reorder(int nops, int ndim, const int64_t *shape, const int64_t *strides,
                       int *perm) {
    for (int i = 0; i < ndim; i++) perm[i] = ndim - 1 - i; /* last logical dim fastest */
    /* Insertion sort that only stops at a decided "stay": undecided pairs are
     * walked past, so a dim can move over broadcast dims (PyTorch's rule). */
    for (int i = 1; i < ndim; i++) {
        int cur = i;
        for (int j = i - 1; j >= 0; j--) {
            int c = iter_compare(nops, shape, strides, perm[j], perm[cur]);
            if (c > 0) {
                int tmp = perm[j];
                perm[j] = perm[cur];
                perm[cur] = tmp;
                cur = j;
            } else if (c < 0) {
                break;
            }
        }
    }
}

static bool iter_can_coalesce(const mft__iter *it, int d0, int d1) {
    if (it->shape[d0] == 1 || it->shape[d1] == 1) return true;
    for (int k = 0; k < it->nops; k++)
        if (it->strides[k][d0] * it->shape[d0] != it->strides[k][d1]) return false;
    return true;
}

void mft__iter_coalesce(mft__iter *it) {
    if (it->ndim <= 1) return;
    int prev = 0;
    for (int d = 1; d < it->ndim; d++) {
        if (iter_can_coalesce(it, prev, d)) {
            if (it->shape[prev] == 1)
                for (int k = 0; k < it->nops; k++) it->strides[k][prev] = it->strides[k][d];
            it->shape[prev] *= it->shape[d];
        } else {
            prev++;
            if (prev != d) {
                it->shape[prev] = it->shape[d];
                for (int k = 0; k < it->nops; k++) it->strides[k][prev] = it->strides[k][d];
            }
        }
    }
    it->ndim = prev + 1;
}

mft_status mft__iter_build(const char *fn, mft__iter *it, int nops, mft_tensor *const *ops,
                           int ndim, const int64_t *shape) {
    for (int k = 0; k < nops; k++)
        if (ops[k]->nblocks) { /* Note [Blocked tensors]: callers cut them into plain pieces */
            it->nops = nops;
            it->ndim = 0;
            it->numel = 0; /* an empty iteration if the caller runs it anyway */
            return mft__blk_refuse(fn, ops[k], "an elementwise iteration");
        }
    it->nops = nops;
    /* fast path: every operand has the full shape and one common dense
     * layout (all contiguous, all channels-last contiguous, or identical dense
     * strides): one flat loop over storage order */
    bool flat = true, contig = true, cl = true, same = true;
    for (int k = 0; k < nops && flat; k++) {
        const mft_tensor *t = ops[k];
        flat = t->ndim == ndim && (t->flags & MFT__F_DENSE);
        for (int i = 0; flat && i < ndim; i++) flat = t->sizes[i] == shape[i];
        contig = contig && (t->flags & MFT__F_CONTIG);
        cl = cl && (t->flags & MFT__F_CL_CONTIG);
    }
    for (int k = 1; flat && !contig && !cl && same && k < nops; k++)
        for (int i = 0; same && i < ndim; i++) same = ops[k]->strides[i] == ops[0]->strides[i];
    if (flat && (contig || cl || same)) {
        int64_t n = 1;
        for (int i = 0; i < ndim; i++) n *= shape[i];
        it->ndim = 1;
        it->shape[0] = n;
        it->numel = n;
        for (int k = 0; k < nops; k++) {
            it->data[k] = mft__tensor_ptr(ops[k]);
            it->strides[k][0] = (int64_t)mft__elem_size(ops[k]->dtype);
        }
        return MFT_OK;
    }
    int64_t est[MFT__ITER_MAX_OPERANDS][MFT_MAX_DIMS]; /* element strides, logical */
    for (int k = 0; k < nops; k++) {
        const mft_tensor *t = ops[k];
        int off = ndim - t->ndim;
        for (int i = 0; i < ndim; i++) {
            int td = i - off;
            est[k][i] = (td < 0 || (t->sizes[td] == 1 && shape[i] != 1)) ? 0 : t->strides[td];
        }
        it->data[k] = mft__tensor_ptr(t);
    }
    int perm[MFT_MAX_DIMS];
    mft__iter_reorder(nops, ndim, shape, &est[0][0], perm);
    it->numel = 1;
    for (int i = 0; i < ndim; i++) {
        it->shape[i] = shape[perm[i]];
        it->numel *= shape[perm[i]];
        for (int k = 0; k < nops; k++)
            it->strides[k][i] = est[k][perm[i]] * (int64_t)mft__elem_size(ops[k]->dtype);
    }
    it->ndim = ndim;
    if (ndim == 0) { /* a scalar iterates as one element */
        it->ndim = 1;
        it->shape[0] = 1;
    }
    mft__iter_coalesce(it);
    return MFT_OK;
}

typedef struct iter_run_ctx {
    const mft__iter *it;
    mft__loop2d loop;
    void *ctx;
} iter_run_ctx;

/* Visits linear elements [begin, end) of the iteration in order, in as few
 * 2-D loop calls as possible (whole rows along dim 1 when aligned). */
static void iter_run_range(void *vctx, int64_t begin, int64_t end) {
    const iter_run_ctx *rc = vctx;
    const mft__iter *it = rc->it;
    const int nops = it->nops;
    int64_t ctr[MFT_MAX_DIMS];
    int64_t rem = begin;
    for (int d = 0; d < it->ndim; d++) {
        ctr[d] = rem % it->shape[d];
        rem /= it->shape[d];
    }
    int64_t st[2 * MFT__ITER_MAX_OPERANDS];
    for (int k = 0; k < nops; k++) {
        st[k] = it->strides[k][0];
        st[nops + k] = it->ndim > 1 ? it->strides[k][1] : 0;
    }
    char *ptr[MFT__ITER_MAX_OPERANDS];
    int64_t pos = begin;
    while (pos < end) {
        for (int k = 0; k < nops; k++) {
            char *p = it->data[k];
            for (int d = 0; d < it->ndim; d++) p += ctr[d] * it->strides[k][d];
            ptr[k] = p;
        }
        int64_t n0 = it->shape[0] - ctr[0], n1 = 1;
        if (n0 > end - pos) n0 = end - pos;
        if (ctr[0] == 0 && n0 == it->shape[0] && it->ndim > 1) {
            n1 = (end - pos) / it->shape[0];
            if (n1 > it->shape[1] - ctr[1]) n1 = it->shape[1] - ctr[1];
        }
        rc->loop(rc->ctx, ptr, st, n0, n1);
        /* advance the counter by n0 * n1 elements */
        int64_t step = n0 * n1;
        pos += step;
        if (n1 > 1) {
            ctr[0] = 0;
            ctr[1] += n1;
        } else {
            ctr[0] += n0;
        }
        for (int d = 0; d < it->ndim - 1; d++) {
            if (ctr[d] < it->shape[d]) continue;
            ctr[d + 1] += ctr[d] / it->shape[d];
            ctr[d] %= it->shape[d];
        }
    }
}

void mft__iter_run_range(const mft__iter *it, mft__loop2d loop, void *ctx, int64_t begin,
                         int64_t end) {
    iter_run_ctx rc = {it, loop, ctx};
    iter_run_range(&rc, begin, end);
}

void mft__iter_run(const mft__iter *it, mft__loop2d loop, void *ctx, int64_t grain) {
    if (it->numel == 0) return;
    iter_run_ctx rc = {it, loop, ctx};
    mft__parallel_for(0, it->numel, grain, iter_run_range, &rc);
}
