/* tensor/hash.c — mft_tensor_hash: XXH3-64 over (dtype, ndim, sizes, values
 * in LOGICAL order), so equal logical tensors hash equal in every layout.
 * Packed-contiguous views hash their bytes in one call; other layouts are
 * gathered row by row (last logical dim) into a small buffer; blocked ones
 * are copied to a plain packed temporary first (0 with MFT_ERR_NOMEM when
 * that cannot be allocated). */
#define XXH_INLINE_ALL
#include <xxhash.h>
#include <string.h>
#include "internal.h"

uint64_t mft_tensor_hash(const mft_tensor *t) {
    if (!t) {
        mft__null_arg("mft_tensor_hash", "t");
        return 0;
    }
    XXH3_state_t st;
    XXH3_INITSTATE(&st);
    XXH3_64bits_reset(&st);
    int32_t head[2] = {(int32_t)t->dtype, (int32_t)t->ndim};
    XXH3_64bits_update(&st, head, sizeof head);
    XXH3_64bits_update(&st, t->sizes, sizeof(int64_t) * (size_t)t->ndim);
    size_t es = mft__elem_size(t->dtype);
    if (t->numel == 0) return XXH3_64bits_digest(&st);
    if (t->nblocks) { /* logical order through a plain packed copy (pads never enter) */
        mft__scope_suspend();
        mft_tensor *p = mft__tensor_alloc("mft_tensor_hash", t->ndim, t->sizes, t->dtype,
                                          MFT_CONTIGUOUS);
        mft__scope_resume();
        if (!p) return 0;
        mft__copy_kernel(p, t);
        XXH3_64bits_update(&st, mft__tensor_ptr(p), (size_t)p->numel * es);
        mft_tensor_release(p);
        return XXH3_64bits_digest(&st);
    }
    if (t->flags & MFT__F_CONTIG) {
        XXH3_64bits_update(&st, mft__tensor_ptr(t), (size_t)t->numel * es);
        return XXH3_64bits_digest(&st);
    }
    /* gather along the last logical dim in chunks */
    enum { CHUNK = 4096 };
    _Alignas(8) unsigned char buf[CHUNK * 8];
    int last = t->ndim - 1;
    int64_t row = t->ndim ? t->sizes[last] : 1, rs = t->ndim ? t->strides[last] : 0;
    int64_t rows = t->numel / row;
    int64_t idx[MFT_MAX_DIMS] = {0};
    for (int64_t r = 0; r < rows; r++) {
        const char *base = mft__tensor_ptr(t);
        for (int d = 0; d < last; d++) base += idx[d] * t->strides[d] * (int64_t)es;
        for (int64_t i0 = 0; i0 < row; i0 += CHUNK) {
            int64_t n = row - i0 < CHUNK ? row - i0 : CHUNK;
            for (int64_t i = 0; i < n; i++) memcpy(buf + i * (int64_t)es, base + (i0 + i) * rs * (int64_t)es, es);
            XXH3_64bits_update(&st, buf, (size_t)n * es);
        }
        for (int d = last - 1; d >= 0; d--) {
            if (++idx[d] < t->sizes[d]) break;
            idx[d] = 0;
        }
    }
    return XXH3_64bits_digest(&st);
}
