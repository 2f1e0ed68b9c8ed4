/* tests/fuzz/fuzz_layout.c — fuzz target for the layout vocabularies and blocked
 * tensors (mft/layout.h, docs/spec.md §7).
 *
 * Input: a mode byte (bits 0-1: the vocabulary, oneDNN / Ascend / XLA / oneDNN;
 * bits 2-3: the Ascend element size 1, 2, 4 or 8), a rank byte (1..5), one byte
 * per size (0..9), then the layout string (at most 80 bytes, cut at a NUL).
 * Oracles, for every input:
 *   - the parser returns MFT_OK or fails with a message naming an mft_
 *     function; a descriptor it returns passes mft_layout_check, has the given
 *     sizes, and prints (oneDNN letters, Ascend name, XLA string) snprintf-style
 *     without overflowing; a printed oneDNN tag parses back to an equal layout;
 *   - when the layout spans at most 4096 elements: mft_to_layout of a plain
 *     tensor holding 1, 2, 3, ... succeeds, gives exactly that layout, zero pad
 *     lanes, the same hash and every element back through get and through
 *     mft_contiguous; a narrow of dim 0 to its first half follows the view rules
 *     (docs/spec.md §7.8: a view when legal, else MFT_ERR_NOT_VIEWABLE) and a
 *     view reads the same elements as the plain narrow;
 *   - no tensor or storage outlives the input. */
#define _POSIX_C_SOURCE 200809L
#include "fuzz_common.h"

#define FZ_LAYOUT_MAX_SLOTS 4096

static void layout_print_checks(const mft_layout *l, size_t eb) {
    char small[4], big[256];
    int n1 = mft_layout_to_onednn(l, small, sizeof small);
    if (n1 >= 0) {
        FZ_CHECK(strlen(small) == (size_t)(n1 < 3 ? n1 : 3), "onednn: truncation");
        int n2 = mft_layout_to_onednn(l, big, sizeof big);
        FZ_CHECK(n2 == n1, "onednn: length %d then %d", n1, n2);
        if (n2 < (int)sizeof big) {
            mft_layout back;
            FZ_CHECK(mft_layout_from_onednn(l->ndim, l->sizes, big, &back) == MFT_OK &&
                         mft_layout_equal(&back, l),
                     "onednn tag '%s' does not parse back to the layout", big);
        }
    } else {
        FZ_FAILED("mft_layout_to_onednn");
    }
    if (mft_layout_to_ascend(l, eb, big, sizeof big) < 0) FZ_FAILED("mft_layout_to_ascend");
    if (mft_layout_to_xla(l, big, sizeof big) < 0) FZ_FAILED("mft_layout_to_xla");
}

/* The plain tensor 1, 2, 3, ... through the layout and back. */
static void layout_tensor_checks(const mft_layout *l) {
    mft_tensor *x = mft_empty(l->ndim, l->sizes, MFT_F32, MFT_CONTIGUOUS);
    FZ_CHECK(x != NULL, "mft_empty");
    int64_t idx[MFT_MAX_DIMS] = {0}, e = 0, n = mft_tensor_numel(x);
    for (e = 0; e < n; e++) {
        mft_tensor_set(x, idx, (double)(e + 1));
        for (int d = l->ndim - 1; d >= 0; d--) {
            if (++idx[d] < l->sizes[d]) break;
            idx[d] = 0;
        }
    }
    mft_tensor *b = mft_to_layout(x, l);
    FZ_CHECK(b != NULL, "mft_to_layout of a checked descriptor failed");
    mft_layout got;
    FZ_CHECK(mft_tensor_layout(b, &got) == MFT_OK && mft_layout_equal(&got, l),
             "the result's layout differs");
    FZ_CHECK(mft_tensor_check_padding(b) == MFT_OK, "pad lanes not zero");
    FZ_CHECK(mft_tensor_hash(b) == mft_tensor_hash(x), "hash differs");
    memset(idx, 0, sizeof idx);
    for (e = 0; e < n; e++) {
        FZ_CHECK(mft_tensor_get(b, idx) == (double)(e + 1), "element %lld", (long long)e);
        for (int d = l->ndim - 1; d >= 0; d--) {
            if (++idx[d] < l->sizes[d]) break;
            idx[d] = 0;
        }
    }
    mft_tensor *c = mft_contiguous(b, MFT_CONTIGUOUS);
    FZ_CHECK(c && mft_tensor_hash(c) == mft_tensor_hash(x), "contiguous differs");
    /* a narrow of dim 0 to its first half */
    if (l->ndim > 0 && l->sizes[0] > 1) {
        const int64_t len = l->sizes[0] / 2;
        int64_t b0 = 1;
        for (int k = 0; k < l->nblocks; k++)
            if (l->block_dim[k] == 0) b0 *= l->block_size[k];
        int nb0 = 0;
        for (int k = 0; k < l->nblocks; k++) nb0 += l->block_dim[k] == 0;
        const bool legal = nb0 == 0 || (nb0 == 1 && len % b0 == 0);
        mft_clear_error();
        mft_tensor *v = mft_narrow(b, 0, 0, len), *p = mft_narrow(x, 0, 0, len);
        FZ_CHECK(p != NULL, "plain narrow");
        if (legal) {
            FZ_CHECK(v != NULL, "a legal narrow was refused");
            FZ_CHECK(mft_tensor_hash(v) == mft_tensor_hash(p), "the narrow view reads other elements");
            FZ_CHECK(mft_tensor_check_padding(v) == MFT_OK, "the view's pad lanes");
        } else {
            FZ_CHECK(v == NULL && mft_last_error() == MFT_ERR_NOT_VIEWABLE,
                     "an illegal narrow was not refused as NOT_VIEWABLE");
        }
        mft_tensor_release(v);
        mft_tensor_release(p);
    }
    mft_tensor_release(c);
    mft_tensor_release(b);
    mft_tensor_release(x);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_in in = {data, size};
    const uint8_t mode = fz_u8(&in);
    const int nd = 1 + fz_u8(&in) % 5;
    int64_t sizes[MFT_MAX_DIMS];
    for (int d = 0; d < nd; d++) sizes[d] = fz_u8(&in) % 10;
    char s[81];
    size_t k = 0;
    while (k < sizeof s - 1 && in.n > 0) {
        const char c = (char)fz_u8(&in);
        if (!c) break;
        s[k++] = c;
    }
    s[k] = '\0';
    static const size_t ebytes[4] = {1, 2, 4, 8};
    const size_t eb = ebytes[(mode >> 2) & 3];
    mft_layout l;
    memset(&l, 0, sizeof l);
    mft_status st;
    const char *fn;
    switch (mode & 3) {
    case 1:
        fn = "mft_layout_from_ascend";
        st = mft_layout_from_ascend(nd, sizes, s, eb, &l);
        break;
    case 2:
        fn = "mft_layout_from_xla";
        st = mft_layout_from_xla(nd, sizes, s, &l);
        break;
    default:
        fn = "mft_layout_from_onednn";
        st = mft_layout_from_onednn(nd, sizes, s, &l);
        break;
    }
    FZ_TRACE("%s(%d, '%s') -> %s\n", fn, nd, s, mft_status_str(st));
    if (st != MFT_OK) {
        FZ_FAILED(fn);
    } else {
        FZ_CHECK(mft_layout_check(&l) == MFT_OK, "%s gave a descriptor that fails the check", fn);
        FZ_CHECK(l.ndim == nd && !memcmp(l.sizes, sizes, sizeof(int64_t) * (size_t)nd),
                 "%s changed the sizes", fn);
        layout_print_checks(&l, eb);
        int64_t slots = -1;
        FZ_CHECK(mft_layout_storage_numel(&l, &slots) == MFT_OK, "storage size");
        if (slots <= FZ_LAYOUT_MAX_SLOTS) layout_tensor_checks(&l);
    }
    fz_check_no_leaks();
    return 0;
}
