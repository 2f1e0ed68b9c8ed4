/* tensor/describe.c — mft_tensor_describe: the human-readable analysis of a
 * tensor's layout that tools/mft-explain prints: geometry (sizes with their
 * dims named in logical order), tag and origin, every predicate, the
 * physical order as letters and minor_to_major, and a map from the first
 * storage slots of the view to logical coordinates. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include "internal.h"

/* The names of the dims in logical order (sizes and indices are always
 * given in it, whatever the layout: docs/spec.md §1), spelled with commas so
 * that nobody reads them as a physical order like "NCHW". */
static const char *desc_dim_names(int ndim) {
    switch (ndim) {
    case 3: return "N,C,L";
    case 4: return "N,C,H,W";
    case 5: return "N,C,D,H,W";
    default: return NULL;
    }
}

#define DESC_MAP_SLOTS 24
#define DESC_MAP_MAX_ELEMS (1 << 22)

/* For each of the first DESC_MAP_SLOTS storage slots after the view's offset,
 * the logical index stored there (first found), how many elements land there. */
static void desc_map(mft__text *b, const mft_tensor *t) {
    int64_t first[DESC_MAP_SLOTS][MFT_MAX_DIMS];
    int count[DESC_MAP_SLOTS] = {0};
    int64_t slots = mft_tensor_storage_numel(t) - t->offset;
    if (slots > DESC_MAP_SLOTS) slots = DESC_MAP_SLOTS;
    if (t->numel == 0 || slots <= 0) {
        mft__text_printf(b, "storage map: (empty)\n");
        return;
    }
    if (t->numel > DESC_MAP_MAX_ELEMS) {
        mft__text_printf(b, "storage map: skipped (%lld elements)\n", (long long)t->numel);
        return;
    }
    int64_t idx[MFT_MAX_DIMS] = {0};
    for (int64_t e = 0; e < t->numel; e++) {
        int64_t off = 0;
        for (int d = 0; d < t->ndim; d++) off += idx[d] * t->strides[d];
        if (off < slots) {
            if (count[off] == 0) memcpy(first[off], idx, sizeof idx);
            count[off]++;
        }
        for (int d = t->ndim - 1; d >= 0; d--) {
            if (++idx[d] < t->sizes[d]) break;
            idx[d] = 0;
        }
    }
    const char *names = desc_dim_names(t->ndim);
    mft__text_printf(b, "storage map (slot after offset -> logical index%s%s%s):\n",
                     names ? " (" : "", names ? names : "", names ? ")" : "");
    for (int64_t s = 0; s < slots; s++) {
        mft__text_printf(b, "  %3lld: ", (long long)s);
        if (count[s] == 0) {
            mft__text_printf(b, "-  (gap)\n");
            continue;
        }
        mft__text_printf(b, "(");
        for (int d = 0; d < t->ndim; d++)
            mft__text_printf(b, d ? ",%lld" : "%lld", (long long)first[s][d]);
        mft__text_printf(b, ")");
        if (count[s] > 1) mft__text_printf(b, "  x%d (overlap/broadcast)", count[s]);
        mft__text_printf(b, "\n");
    }
}

/* A blocked tensor (docs/spec.md §7): the descriptor, its names in the
 * three vocabularies, storage against logical elements, and the first
 * slots of the storage: which logical element or pad lane each holds. */
static void desc_blocked(mft__text *b, const mft_tensor *t) {
    /* a vocabulary without a name for the layout sets an error; describe
     * leaves the caller's error state as it found it */
    const mft_status err0 = mft_last_error();
    char msg0[512];
    snprintf(msg0, sizeof msg0, "%s", mft_last_error_message());
    char s1[MFT__DIMS_BUF], name[96];
    mft_layout l;
    mft__layout_of(t, &l);
    mft__text_printf(b, "padded   %s\n", mft__fmt_dims(s1, sizeof s1, t->ndim, t->padded));
    mft__text_printf(b, "outer strides %s  (elements per step of i_d / B_d)\n",
                     mft__fmt_dims(s1, sizeof s1, t->ndim, t->strides));
    mft__text_printf(b, "blocks  ");
    for (int k = 0; k < t->nblocks; k++)
        mft__text_printf(b, " %lld on dim %d", (long long)t->block_size[k], t->block_dim[k]);
    mft__text_printf(b, "  (outermost first)\n");
    int64_t need = 0;
    mft_layout_storage_numel(&l, &need);
    mft__text_printf(
        b,
        "offset   %lld   dtype %s   numel %lld   layout spans %lld elems (%lld pad or gap)"
        "   storage %lld elems\n",
        (long long)t->offset, mft_dtype_name(t->dtype), (long long)t->numel, (long long)need,
        (long long)(need - t->numel), (long long)mft_tensor_storage_numel(t));
    mft__text_printf(b, "tag      %s (%s)\n", mft_format_name(t->tag), mft_origin_name(t->origin));
    const size_t es = mft__elem_size(t->dtype);
    mft__text_printf(b, "oneDNN   %s\n",
                     mft_layout_to_onednn(&l, name, sizeof name) >= 0 ? name : "-");
    mft__text_printf(b, "Ascend   %s\n",
                     mft_layout_to_ascend(&l, es, name, sizeof name) >= 0 ? name : "-");
    mft__text_printf(b, "XLA      %s\n",
                     mft_layout_to_xla(&l, name, sizeof name) >= 0 ? name : "-");
    if (t->tag == MFT_NCHW8C || t->tag == MFT_NCHW16C)
        mft__text_printf(b, "is_contiguous(%s)  %s\n", mft_format_name(t->tag),
                         mft_tensor_is_contiguous(t, t->tag) ? "true" : "false");
    int64_t slots = need < DESC_MAP_SLOTS ? need : DESC_MAP_SLOTS;
    mft__text_printf(b, "storage map (slot after offset -> logical index, pad lanes marked):\n");
    for (int64_t s = 0; s < slots; s++) {
        int64_t idx[MFT_MAX_DIMS];
        mft_layout_slot_kind kind;
        mft__text_printf(b, "  %3lld: ", (long long)s);
        if (mft_layout_slot(&l, s, idx, &kind) != MFT_OK) {
            mft__text_printf(b, "?\n");
            continue;
        }
        if (kind == MFT_SLOT_ELEMENT) {
            mft__text_printf(b, "(");
            for (int d = 0; d < t->ndim; d++)
                mft__text_printf(b, d ? ",%lld" : "%lld", (long long)idx[d]);
            mft__text_printf(b, ")\n");
        } else {
            mft__text_printf(b, kind == MFT_SLOT_PAD ? "pad\n" : "-  (gap)\n");
        }
    }
    if (err0 == MFT_OK) mft_clear_error();
    else mft__set_error(err0, "%s", msg0);
}

size_t mft_tensor_describe(const mft_tensor *t, char *buf, size_t len) {
    if (!buf) len = 0; /* measure only */
    mft__text b = {buf, len, 0};
    if (len) buf[0] = '\0';
    if (!t) {
        mft__null_arg("mft_tensor_describe", "t");
        mft__text_printf(&b, "(null tensor)\n");
        return b.pos;
    }
    char s1[MFT__DIMS_BUF], s2[MFT__DIMS_BUF];
    const char *names = desc_dim_names(t->ndim);
    mft__text_printf(&b, "sizes    %s%s%s%s\n", mft__fmt_dims(s1, sizeof s1, t->ndim, t->sizes),
                     names ? "  (logical " : "", names ? names : "", names ? ")" : "");
    if (t->nblocks) {
        desc_blocked(&b, t);
        goto provenance;
    }
    mft__text_printf(&b, "strides  %s  (elements)\n",
                     mft__fmt_dims(s2, sizeof s2, t->ndim, t->strides));
    int64_t need = 0;
    mft_min_storage_numel(t->ndim, t->sizes, t->strides, &need);
    mft__text_printf(
        &b, "offset   %lld   dtype %s   numel %lld   min buffer %lld elems   storage %lld elems\n",
        (long long)t->offset, mft_dtype_name(t->dtype), (long long)t->numel, (long long)need,
        (long long)mft_tensor_storage_numel(t));
    mft__text_printf(&b, "tag      %s (%s)\n", mft_format_name(t->tag), mft_origin_name(t->origin));
    if (names) {
        char letters[8];
        int m2m[MFT_MAX_DIMS];
        if (mft_letters_from_strides(t->ndim, t->sizes, t->strides, letters, sizeof letters) == MFT_OK &&
            mft_minor_to_major_from_strides(t->ndim, t->sizes, t->strides, m2m) == MFT_OK)
            mft__text_printf(&b, "order    %s  (minor_to_major %s)\n", letters,
                             mft__fmt_ints(s1, sizeof s1, t->ndim, m2m));
    }
    bool fc = mft_tensor_order_fits(t, MFT_CONTIGUOUS), fl = mft_tensor_order_fits(t, MFT_CHANNELS_LAST);
    mft__text_printf(&b, "is_contiguous(CONTIGUOUS)     %s\n",
                     mft_tensor_is_contiguous(t, MFT_CONTIGUOUS) ? "true" : "false");
    mft__text_printf(&b, "is_contiguous(CHANNELS_LAST)  %s\n",
                     mft_tensor_is_contiguous(t, MFT_CHANNELS_LAST) ? "true" : "false");
    mft__text_printf(&b, "is_dense                      %s\n",
                     mft_tensor_is_dense(t) ? "true" : "false");
    mft__text_printf(&b, "strides_like_channels_last    %s\n",
                     mft_tensor_strides_like_channels_last(t) ? "true" : "false");
    mft__text_printf(&b, "suggest_format                %s\n",
                     mft_format_name(mft_tensor_suggest_format(t)));
    mft__text_printf(&b, "order fits                    %s%s%s%s\n", fc ? "CONTIGUOUS" : "",
                     fc && fl ? " and " : "", fl ? "CHANNELS_LAST" : "",
                     fc && fl ? "  (ambiguous: tag decides)"
                              : (!fc && !fl ? "neither (plain strided)" : ""));
    desc_map(&b, t);
provenance:;
    size_t pn = mft_tensor_provenance(t, NULL, 0); /* why the tag (tensor/rules.c) */
    char *pv = pn ? malloc(pn + 1) : NULL;
    if (pv) {
        mft_tensor_provenance(t, pv, pn + 1);
        mft__text_printf(&b, "why this tag (provenance, newest first):\n%s", pv);
        free(pv);
    }
    return b.pos;
}
