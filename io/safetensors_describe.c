/* io/safetensors_describe.c — mft_safetensors_describe (mft/safetensors.h):
 * one tensor of a safetensors file explained for people, from the verified
 * header and the tensor the loader actually makes of it (so the text says
 * what load does: view or copy, reorder, and the tag's provenance, "restored
 * from metadata" or "inferred from the file's strides"). Used by
 * `mft-explain --safetensors` (tools/explain_safetensors.c). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "mft/safetensors.h"
#include "safetensors_internal.h"

/* The tensor that loading makes: its geometry, how it sits in memory. */
static void st_describe_tensor(mft__text *x, const mft__st_file *f, const mft__st_entry *e,
                               const mft_tensor *t, bool made_view, bool reordered) {
    char b1[MFT__DIMS_BUF], b2[MFT__DIMS_BUF];
    mft__fmt_dims(b1, sizeof b1, t->ndim, t->sizes);
    if (mft_tensor_is_blocked(t)) {
        mft_layout l;
        char tag[64] = "?";
        mft_tensor_layout(t, &l);
        mft_layout_to_onednn(&l, tag, sizeof tag); /* a loaded blocked layout has a tag */
        mft__text_printf(x, "  loads as:   %s sizes %s in blocks, oneDNN %s",
                         mft_dtype_name(t->dtype), b1, tag);
    } else {
        mft__fmt_dims(b2, sizeof b2, t->ndim, t->strides);
        mft__text_printf(x, "  loads as:   %s sizes %s strides %s (%s)", mft_dtype_name(t->dtype),
                         b1, b2, mft__layout_label(t));
    }
    if (made_view)
        mft__text_printf(x, ", a zero-copy view of the mapped file\n");
    else if (reordered)
        mft__text_printf(x, ", reordered from the file's order into new memory (a copy)\n");
    else if (e->end == e->begin)
        mft__text_printf(x, ", empty\n");
    else
        mft__text_printf(x, ", copied into memory it owns (%s)\n",
                         f->map ? "its bytes are not aligned to the element size" : "read mode");
}

static void st_describe_tag(mft__text *x, const mft__st_entry *e, const mft_tensor *t) {
    mft__text_printf(x, "  tag:        %s (%s), ", mft_format_name(t->tag),
                     mft_origin_name(t->origin));
    if (e->has_format)
        mft__text_printf(x, "restored from metadata (mft.format.%s = %s)\n", e->name,
                         mft_format_name(e->format));
    else if (e->layout_kind == ST_LAYOUT_ONEDNN)
        mft__text_printf(x, "restored from metadata (the blocks of mft.layout.%s)\n", e->name);
    else
        mft__text_printf(x, "inferred from the file's strides (%s)\n",
                         e->layout_kind == ST_LAYOUT_PERM
                             ? "the mft.layout permutation of the file's array"
                             : "C order, as every safetensors array");
}

size_t mft_safetensors_describe(const char *path, const char *name, char *buf, size_t len) {
    static const char fn[] = "mft_safetensors_describe";
    if (len && buf) buf[0] = '\0';
    if (!path || !name) {
        mft__null_arg(fn, !path ? "path" : "name");
        return 0;
    }
    mft__st_file f;
    mft__text x = {buf, buf ? len : 0, 0};
    mft_status st = mft__st_open(fn, path, 0, &f);
    long k = st == MFT_OK ? mft__st_find(&f, name) : -1;
    if (st == MFT_OK && k < 0) {
        mft__set_error(MFT_ERR_INVALID, "%s: '%s' has no tensor named '%.200s' (%zu tensors)", fn,
                       path, name, f.count);
        st = MFT_ERR_INVALID;
    }
    mft_tensor *t = NULL;
    bool view = false, reordered = false;
    if (st == MFT_OK) {
        mft__scope_suspend();
        t = mft__st_make(fn, &f, &f.entries[k]);
        const void *before = t ? t->storage->data : NULL;
        if (t) t = mft__st_restore(fn, &f.entries[k], t);
        reordered = t && t->storage->data != before;
        view = t && !reordered && f.map &&
               (char *)before >= (char *)f.map->base &&
               (char *)before < (char *)f.map->base + f.map->len;
        mft__scope_resume();
        if (!t) st = mft_last_error();
    }
    if (st != MFT_OK) {
        mft__st_close(&f);
        return 0;
    }
    const mft__st_entry *e = &f.entries[k];
    char b1[MFT__DIMS_BUF];
    mft__text_printf(
        &x, "file '%s': %zu tensor%s, JSON header of %llu bytes, data buffer of %llu bytes\n", path,
        f.count, f.count == 1 ? "" : "s", (unsigned long long)f.hlen,
        (unsigned long long)(f.size - f.data_start));
    mft__text_printf(
        &x,
        "tensor '%s':\n  file entry: dtype %s, shape %s, data_offsets [%llu,%llu] (file "
        "bytes %llu..%llu)\n",
        e->name, mft__st_dtype_name(e->dtype), mft__fmt_dims(b1, sizeof b1, e->fndim, e->fshape),
        (unsigned long long)e->begin, (unsigned long long)e->end,
        (unsigned long long)(f.data_start + e->begin), (unsigned long long)(f.data_start + e->end));
    if (e->has_format || e->layout_kind != ST_LAYOUT_NONE) {
        mft__text_printf(&x, "  metadata:  ");
        if (e->has_format) mft__text_printf(&x, " mft.format.%s = \"%s\"", e->name, e->format_text);
        if (e->layout_kind != ST_LAYOUT_NONE)
            mft__text_printf(&x, "%s mft.layout.%s = %s", e->has_format ? ";" : "", e->name,
                             e->layout_text);
        mft__text_printf(&x, "\n");
    } else {
        mft__text_printf(&x, "  metadata:   none for this tensor\n");
    }
    if (e->layout_kind == ST_LAYOUT_NONE)
        mft__text_printf(&x,
                         "  mode:       logical (the file holds the logical values in C order; any "
                         "reader sees them)\n");
    else
        mft__text_printf(
            &x,
            "  mode:       physical (the file holds the bytes as they lie in memory; a "
            "foreign reader sees the %s array)\n",
            e->layout_kind == ST_LAYOUT_ONEDNN ? "blocked" : "permuted");
    st_describe_tensor(&x, &f, e, t, view, reordered);
    st_describe_tag(&x, e, t);
    mft_tensor_release(t);
    mft__st_close(&f);
    return x.pos;
}
