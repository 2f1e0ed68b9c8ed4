/* io/safetensors_load.c — tensors from a verified safetensors header
 * (mft/safetensors.h): zero-copy views into the shared file mapping where an
 * entry's bytes are aligned to its element size, else owned memory filled
 * from the file (pread in MFT_SAFETENSORS_READ mode); the tag restored from
 * mft metadata (a logical file's channels_last entry reordered back) or
 * inferred from the file's strides, with that provenance recorded;
 * mft_safetensors_load, _load_into (all entries made and checked before the
 * first write) and _free_list. docs/spec.md §8.3. */
#define _POSIX_C_SOURCE 200809L /* pread */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "mft/safetensors.h"
#include "io_util.h"
#include "mft/io.h"
#include "safetensors_internal.h"

/* Provenance ops of a loaded tensor's tag (mft_tensor_provenance). */
static const char ST_OP_META[] = "safetensors_load (restored from metadata)";
static const char ST_OP_STRIDES[] = "safetensors_load (inferred from the file's strides)";

static void st_deleter(void *data, void *ctx) {
    (void)data;
    mft__st_map_release(ctx);
}

static mft_status st_fail(mft_status s, const char *fn, const mft__st_file *f,
                          const mft__st_entry *e, const char *what) {
    mft__set_error(s, "%s: '%s': tensor '%.*s': %s", fn, f->path,
                   e->name_len > 120 ? 120 : (int)e->name_len, e->name, what);
    return s;
}

bool mft__st_zero_copy(const mft__st_file *f, const mft__st_entry *e) {
    const size_t es = mft__elem_size(e->dtype);
    return f->map && e->end > e->begin && (f->data_start + e->begin) % es == 0;
}

mft_tensor *mft__st_make(const char *fn, mft__st_file *f, const mft__st_entry *e) {
    const size_t es = mft__elem_size(e->dtype);
    const uint64_t off = f->data_start + e->begin;
    const size_t nbytes = (size_t)(e->end - e->begin);
    const bool blocked = e->layout_kind == ST_LAYOUT_ONEDNN;
    mft_tensor *t;
    if (mft__st_zero_copy(f, e)) {
        void *p = (char *)f->map->base + off;
        t = blocked ? mft_from_blob_layout(p, nbytes, &e->layout, 0, e->dtype, st_deleter, f->map)
                    : mft_from_blob(p, nbytes, e->ndim, e->sizes, e->strides, 0, e->dtype,
                                    st_deleter, f->map);
        if (!t) {
            char why[MFT__ERRBUF];
            snprintf(why, sizeof why, "%s", mft_last_error_message());
            st_fail(blocked && mft_last_error() == MFT_ERR_INVALID ? MFT_ERR_CORRUPT
                                                                     : mft_last_error(),
                    fn, f, e, why);
            return NULL;
        }
        atomic_fetch_add(&f->map->refs, 1); /* the storage's, dropped by st_deleter */
        return t;
    }
    t = blocked ? mft__tensor_alloc_layout(fn, &e->layout, e->dtype)
                : mft__tensor_alloc_strided(fn, e->ndim, e->sizes, e->strides, e->dtype);
    if (!t) return NULL;
    char *dst = t->storage->data; /* packed from offset 0: the file's bytes as they lie */
    if (nbytes && f->map) {
        memcpy(dst, (const char *)f->map->base + off, nbytes);
    } else if (nbytes) {
        size_t left = nbytes;
        uint64_t at = off;
        while (left > 0) {
            ssize_t got = pread(f->fd, dst, left > ((size_t)1 << 30) ? ((size_t)1 << 30) : left,
                                (off_t)at);
            if (got < 0 && errno == EINTR) continue;
            if (got <= 0) {
                int er = errno;
                char why[200];
                snprintf(why, sizeof why, "reading %zu bytes at offset %llu failed: %s", nbytes,
                         (unsigned long long)off, got < 0 ? strerror(er) : "the file shrank");
                mft_tensor_release(t);
                st_fail(MFT_ERR_IO, fn, f, e, why);
                return NULL;
            }
            dst += got;
            left -= (size_t)got;
            at += (uint64_t)got;
        }
    }
    if (!mft__io_host_le()) mft__io_swap(t->storage->data, e->fnumel, es);
    if (blocked && mft_tensor_check_padding(t) != MFT_OK) {
        char why[MFT__ERRBUF];
        snprintf(why, sizeof why, "%s", mft_last_error_message());
        mft_tensor_release(t);
        st_fail(MFT_ERR_CORRUPT, fn, f, e, why);
        return NULL;
    }
    return t;
}

static void st_record(mft_tensor *t, mft__rule_id rule, const char *op, mft_format declared) {
    mft__decision d = mft__rule_decide(rule, op, 0, NULL, declared, 0);
    mft__rule_apply(t, &d);
}

mft_tensor *mft__st_restore(const char *fn, const mft__st_entry *e, mft_tensor *t) {
    if (!e->has_format) {
        if (e->layout_kind == ST_LAYOUT_ONEDNN)
            st_record(t, MFT__RULE_FACTORY, ST_OP_META, MFT_CONTIGUOUS);
        else
            st_record(t, MFT__RULE_STRIDED, ST_OP_STRIDES, MFT_CONTIGUOUS);
        return t;
    }
    const mft_format fm = e->format;
    const bool in_place = mft__format_is_blocked(fm)
                              ? mft__is_blocked(t) && t->tag == fm
                              : !mft__is_blocked(t) && mft_tensor_is_contiguous(t, fm);
    mft_tensor *r = t;
    if (!in_place) {
        r = mft__format_is_blocked(fm) ? mft__to_format(fn, t, fm) : mft__contiguous(fn, t, fm);
        mft_tensor_release(t);
        if (!r) return NULL;
    }
    st_record(r, MFT__RULE_FACTORY, ST_OP_META, fm);
    return r;
}

static mft_status st_check_flags(const char *fn, unsigned flags, unsigned allowed) {
    if (flags & ~allowed) {
        mft__set_error(MFT_ERR_INVALID, "%s: unknown flag bits 0x%x", fn, flags & ~allowed);
        return MFT_ERR_INVALID;
    }
    return MFT_OK;
}

/* The same lists as mft_load_tensors returns: one way to free them. */
void mft_safetensors_free_list(int n, char **names, mft_tensor **tensors) {
    mft_checkpoint_free_list(n, names, tensors);
}

mft_status mft_safetensors_load(const char *path, unsigned flags, int *n, char ***names,
                                mft_tensor ***tensors) {
    static const char fn[] = "mft_safetensors_load";
    if (n) *n = 0;
    if (names) *names = NULL;
    if (tensors) *tensors = NULL;
    if (!path || !n || !names || !tensors) {
        mft__null_arg(fn, !path ? "path" : !n ? "n" : !names ? "names" : "tensors");
        return MFT_ERR_NULL;
    }
    mft_status st = st_check_flags(fn, flags, MFT_SAFETENSORS_READ);
    if (st != MFT_OK) return st;
    mft__st_file f;
    st = mft__st_open(fn, path, flags, &f);
    char **nv = NULL;
    mft_tensor **tv = NULL;
    int made = 0;
    if (st == MFT_OK && f.count > 0) {
        nv = mft__alloc_or_err(fn, sizeof(char *) * f.count, 16);
        tv = nv ? mft__alloc_or_err(fn, sizeof(mft_tensor *) * f.count, 16) : NULL;
        if (!tv) st = MFT_ERR_NOMEM;
    }
    mft__scope_suspend();
    for (; st == MFT_OK && made < (int)f.count; made++) {
        const mft__st_entry *e = &f.entries[made];
        nv[made] = mft__alloc_or_err(fn, e->name_len + 1, 1);
        mft_tensor *t = nv[made] ? mft__st_make(fn, &f, e) : NULL;
        if (t) t = mft__st_restore(fn, e, t);
        if (!t) {
            mft__free(nv[made]);
            st = mft_last_error() != MFT_OK ? mft_last_error() : MFT_ERR_NOMEM;
            break;
        }
        memcpy(nv[made], e->name, e->name_len + 1);
        tv[made] = t;
    }
    mft__scope_resume();
    mft__st_close(&f); /* the mapping lives on in the tensors viewing it */
    if (st != MFT_OK) {
        mft_safetensors_free_list(made, nv, tv);
        return st;
    }
    *n = made;
    *names = nv;
    *tensors = tv;
    return MFT_OK;
}

/* Arguments of load_into: non-NULL, writable targets, distinct names. */
static mft_status st_check_into(const char *fn, const char *path, int n, const char *const *names,
                                mft_tensor *const *tensors) {
    mft_status st = mft__io_check_list(fn, path, n, names, (const mft_tensor *const *)tensors);
    for (int i = 0; i < n && st == MFT_OK; i++) st = mft__check_writable(fn, tensors[i]);
    return st == MFT_OK ? mft__io_check_distinct(fn, n, names, "requested twice") : st;
}

mft_status mft_safetensors_load_into(const char *path, int n, const char *const *names,
                                     mft_tensor *const *tensors, unsigned flags) {
    static const char fn[] = "mft_safetensors_load_into";
    mft_status st = st_check_into(fn, path, n, names, tensors);
    if (st == MFT_OK) st = st_check_flags(fn, flags, MFT_SAFETENSORS_READ);
    if (st != MFT_OK) return st;
    mft__st_file f;
    mft_tensor **src = NULL;
    char b1[MFT__DIMS_BUF], b2[MFT__DIMS_BUF];
    st = mft__st_open(fn, path, flags, &f);
    for (int i = 0; i < n && st == MFT_OK; i++) {
        const mft_tensor *t = tensors[i];
        long k = mft__st_find(&f, names[i]);
        const mft__st_entry *e = k >= 0 ? &f.entries[k] : NULL;
        bool same = e && e->ndim == t->ndim;
        for (int d = 0; same && d < t->ndim; d++) same = e->sizes[d] == t->sizes[d];
        if (!e) {
            mft__set_error(MFT_ERR_INVALID, "%s: '%s' has no tensor named '%.200s' (%zu tensors)",
                           fn, path, names[i], f.count);
            st = MFT_ERR_INVALID;
        } else if (e->dtype != t->dtype) {
            mft__set_error(MFT_ERR_DTYPE, "%s: '%s': tensor '%.200s' is %s, the target is %s", fn,
                           path, names[i], mft_dtype_name(e->dtype), mft_dtype_name(t->dtype));
            st = MFT_ERR_DTYPE;
        } else if (!same) {
            mft__set_error(MFT_ERR_SHAPE,
                           "%s: '%s': tensor '%.200s' has sizes %s, the target has sizes %s", fn,
                           path, names[i], mft__fmt_dims(b1, sizeof b1, e->ndim, e->sizes),
                           mft__fmt_dims(b2, sizeof b2, t->ndim, t->sizes));
            st = MFT_ERR_SHAPE;
        }
    }
    if (st == MFT_OK && n > 0) {
        src = mft__alloc_or_err(fn, sizeof *src * (size_t)n, 16);
        if (src) memset(src, 0, sizeof *src * (size_t)n);
        else st = MFT_ERR_NOMEM;
    }
    /* every source exists (pad lanes checked, bytes read) before the first write */
    mft__scope_suspend();
    for (int i = 0; i < n && st == MFT_OK; i++) {
        src[i] = mft__st_make(fn, &f, &f.entries[mft__st_find(&f, names[i])]);
        if (!src[i]) st = mft_last_error() != MFT_OK ? mft_last_error() : MFT_ERR_NOMEM;
    }
    mft__scope_resume();
    for (int i = 0; i < n && st == MFT_OK; i++)
        if (mft_copy_(tensors[i], src[i]) != MFT_OK) st = mft__relabel_error(fn);
    if (src)
        for (int i = 0; i < n; i++) mft_tensor_release(src[i]);
    mft__free(src);
    mft__st_close(&f);
    return st;
}
