/* io/safetensors_save.c — mft_safetensors_save (mft/safetensors.h): the
 * bytes each tensor contributes (logical mode: C order, reordered when the
 * tensor is not; physical mode: as it lies, in its dim order or its blocks),
 * the order of the reference writer (larger elements first, then by name,
 * back to back: every tensor aligned to its element size), the JSON header
 * with __metadata__ (mft.version, mft.format.<name>, mft.layout.<name>;
 * string values only) padded with spaces to a multiple of 8, written to
 * "<path>.tmp" and renamed. docs/spec.md §8.3. */
#define _POSIX_C_SOURCE 200809L /* fileno, fsync */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "mft/safetensors.h"
#include "io_util.h"
#include "safetensors_internal.h"

/* What one tensor puts in the file. */
typedef struct st_plan {
    const char *name;
    size_t name_len;
    mft_tensor *hold;        /* a packed copy made for the file, or NULL */
    const char *bytes;       /* nbytes bytes, in the file's order */
    uint64_t nbytes;
    size_t es;
    mft_dtype dtype;
    int fndim;
    int64_t fshape[ST_MAX_FILE_DIMS];
    mft_format format;       /* recorded as mft.format unless CONTIGUOUS */
    char layout[512];        /* mft.layout value, "" when none */
    uint64_t begin;
} st_plan;

static const char *st_join(char *buf, size_t len, int n, const int64_t *v) {
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && k < len; i++)
        k += (size_t)snprintf(buf + k, len - k, "%s%lld", i ? "," : "", (long long)v[i]);
    return buf;
}

/* A packed copy of t in fmt (CONTIGUOUS / CHANNELS_LAST / a blocked layout
 * when l is given), not owned by the caller's scope. */
static mft_tensor *st_pack(const char *fn, const mft_tensor *t, mft_format fmt,
                           const mft_layout *l) {
    mft__scope_suspend();
    mft_tensor *r = l ? mft__to_layout(fn, t, l) : mft__contiguous(fn, t, fmt);
    mft__scope_resume();
    return r;
}

/* The format mft.format records: the tag of rank 3-5 tensors. */
static mft_format st_recorded_format(const mft_tensor *t) {
    if (t->ndim < 3 || t->ndim > 5) return MFT_CONTIGUOUS;
    return t->tag == MFT_CHANNELS_LAST || t->tag == MFT_NCHW8C || t->tag == MFT_NCHW16C
               ? t->tag
               : MFT_CONTIGUOUS;
}

static mft_status st_plan_logical(const char *fn, const mft_tensor *t, st_plan *p) {
    if (mft__is_blocked(t) || !mft_tensor_is_contiguous(t, MFT_CONTIGUOUS)) {
        if (!(p->hold = st_pack(fn, t, MFT_CONTIGUOUS, NULL))) return mft_last_error();
        t = p->hold;
    }
    p->bytes = mft__tensor_ptr(t);
    p->nbytes = (uint64_t)t->numel * p->es;
    p->fndim = t->ndim;
    memcpy(p->fshape, t->sizes, sizeof(int64_t) * (size_t)t->ndim);
    return MFT_OK;
}

/* A blocked tensor as its packed blocks; false (nothing set) when its
 * layout has no oneDNN tag that round-trips, so the logical form is used. */
static mft_status st_plan_blocked(const char *fn, const mft_tensor *t, st_plan *p, bool *done) {
    mft_layout l, pl, back;
    char tag[64], b1[MFT__DIMS_BUF * 2];
    *done = false;
    mft__layout_of(t, &l);
    mft__layout_packed_like(&l, &pl);
    int r = mft__st_blocked_shape(fn, &pl, p->fshape, tag, sizeof tag);
    const mft_status saved = mft_last_error();
    char msg[MFT__ERRBUF];
    snprintf(msg, sizeof msg, "%s", mft_last_error_message());
    if (r < 0 || mft_layout_from_onednn(pl.ndim, pl.sizes, tag, &back) != MFT_OK ||
        !mft_layout_equal(&back, &pl)) {
        /* no tag: the logical form is written; the caller's last error stays */
        if (saved == MFT_OK) mft_clear_error();
        else mft__set_error(saved, "%s", msg);
        return MFT_OK;
    }
    if (!mft_layout_equal(&l, &pl)) {
        if (!(p->hold = st_pack(fn, t, MFT_CONTIGUOUS, &pl))) return mft_last_error();
        t = p->hold;
    }
    int64_t slots = 0;
    mft_layout_storage_numel(&pl, &slots);
    p->bytes = mft__tensor_ptr(t);
    p->nbytes = (uint64_t)slots * p->es;
    p->fndim = r;
    snprintf(p->layout, sizeof p->layout, "{\"logical\":[%s],\"onednn\":\"%s\"}",
             st_join(b1, sizeof b1, t->ndim, t->sizes), tag);
    *done = true;
    return MFT_OK;
}

/* A plain tensor as it lies: dense in some dim order (packed first when
 * it is not dense), shape in that order, "perm" unless it is C order. */
static mft_status st_plan_physical(const char *fn, const mft_tensor *t, st_plan *p) {
    if (mft__is_blocked(t)) {
        bool done = false;
        mft_status st = st_plan_blocked(fn, t, p, &done);
        if (st != MFT_OK || done) return st;
        return st_plan_logical(fn, t, p);
    }
    const mft_format fm = st_recorded_format(t);
    if (!(t->flags & MFT__F_DENSE) && t->numel > 0) {
        if (!(p->hold = st_pack(fn, t, fm, NULL))) return mft_last_error();
        t = p->hold;
    }
    int order[MFT_MAX_DIMS]; /* slowest first */
    if (fm == MFT_CHANNELS_LAST && mft_tensor_is_contiguous(t, MFT_CHANNELS_LAST)) {
        mft__format_order(t->ndim, MFT_CHANNELS_LAST, order);
    } else if (mft_tensor_is_contiguous(t, MFT_CONTIGUOUS) || t->numel == 0) {
        for (int d = 0; d < t->ndim; d++) order[d] = d;
    } else {
        int m2m[MFT_MAX_DIMS];
        mft_minor_to_major_from_strides(t->ndim, t->sizes, t->strides, m2m);
        for (int d = 0; d < t->ndim; d++) order[d] = m2m[t->ndim - 1 - d];
    }
    bool identity = true;
    int64_t perm[MFT_MAX_DIMS];
    for (int d = 0; d < t->ndim; d++) {
        p->fshape[d] = t->sizes[order[d]];
        perm[d] = order[d];
        identity &= order[d] == d;
    }
    p->fndim = t->ndim;
    p->bytes = mft__tensor_ptr(t); /* dense, strides >= 0: element 0 is the lowest address */
    p->nbytes = (uint64_t)t->numel * p->es;
    if (!identity) {
        char b1[MFT__DIMS_BUF * 2], b2[MFT__DIMS_BUF * 2];
        snprintf(p->layout, sizeof p->layout, "{\"logical\":[%s],\"perm\":[%s]}",
                 st_join(b1, sizeof b1, t->ndim, t->sizes), st_join(b2, sizeof b2, t->ndim, perm));
    }
    return MFT_OK;
}

static int st_plan_cmp(const void *a, const void *b) {
    const st_plan *x = a, *y = b;
    if (x->es != y->es) return x->es > y->es ? -1 : 1; /* larger alignment first */
    size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
    int c = memcmp(x->name, y->name, n);
    if (c) return c;
    return x->name_len < y->name_len ? -1 : x->name_len > y->name_len;
}

static int st_byname_cmp(const void *a, const void *b) {
    return strcmp((*(const st_plan *const *)a)->name, (*(const st_plan *const *)b)->name);
}

static mft_status st_check_save(const char *fn, const char *path, int n, const char *const *names,
                                const mft_tensor *const *tensors, unsigned flags) {
    mft_status st = mft__io_check_list(fn, path, n, names, tensors);
    if (st != MFT_OK) return st;
    if (flags & ~MFT_SAFETENSORS_PHYSICAL) {
        mft__set_error(MFT_ERR_INVALID, "%s: unknown flag bits 0x%x", fn,
                       flags & ~MFT_SAFETENSORS_PHYSICAL);
        return MFT_ERR_INVALID;
    }
    for (int i = 0; i < n; i++) {
        size_t len = strlen(names[i]), bad = 0;
        const char *why = len == 0                                 ? "empty"
                          : strcmp(names[i], "__metadata__") == 0 ? "reserved by the format"
                          : !mft__utf8_valid((const unsigned char *)names[i], len, &bad)
                              ? "not valid UTF-8"
                              : NULL;
        if (why) {
            mft__set_error(MFT_ERR_INVALID, "%s: names[%d] '%.200s' is %s", fn, i, names[i], why);
            return MFT_ERR_INVALID;
        }
    }
    return mft__io_check_distinct(fn, n, names, "given twice");
}

/* The JSON header (padded with spaces to a multiple of 8) for plans sorted
 * in file order. */
static mft_status st_header(const char *fn, int n, const st_plan *plans, mft__json_buf *b) {
    /* __metadata__ keys sorted: "mft.format.<name>" < "mft.layout.<name>" <
     * "mft.version", and names in byte order within each */
    mft__jb_raw(b, "{\"__metadata__\":{", 17);
    const st_plan **byname = mft__alloc_or_err(fn, sizeof *byname * (size_t)(n ? n : 1), 16);
    if (!byname) return MFT_ERR_NOMEM;
    for (int i = 0; i < n; i++) byname[i] = &plans[i];
    if (n > 1) qsort(byname, (size_t)n, sizeof *byname, st_byname_cmp);
    bool first = true;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n; i++) {
            const st_plan *p = byname[i];
            if (pass == 0 ? p->format == MFT_CONTIGUOUS : !p->layout[0]) continue;
            if (!first) mft__jb_raw(b, ",", 1);
            first = false;
            mft__json_buf k = {0}; /* the key: "mft.format." or "mft.layout." + name */
            mft__jb_raw(&k, pass ? "mft.layout." : "mft.format.", 11);
            mft__jb_raw(&k, p->name, p->name_len);
            if (k.failed) b->failed = true;
            else mft__jb_str(b, k.data);
            mft__jb_free(&k);
            mft__jb_raw(b, ":", 1);
            mft__jb_str(b, pass ? p->layout : mft_format_name(p->format));
        }
    mft__free((void *)byname);
    mft__jb_raw(b, first ? "\"mft.version\":\"1\"}" : ",\"mft.version\":\"1\"}", first ? 18 : 19);
    for (int i = 0; i < n; i++) {
        const st_plan *p = &plans[i];
        char b1[MFT__DIMS_BUF * 2];
        mft__jb_raw(b, ",", 1);
        mft__jb_str(b, p->name);
        mft__jb_printf(b, ":{\"dtype\":\"%s\",\"shape\":[%s],\"data_offsets\":[%llu,%llu]}",
                       mft__st_dtype_name(p->dtype), st_join(b1, sizeof b1, p->fndim, p->fshape),
                       (unsigned long long)p->begin, (unsigned long long)(p->begin + p->nbytes));
    }
    mft__jb_raw(b, "}", 1);
    while (!b->failed && b->len % 8) mft__jb_raw(b, " ", 1);
    if (b->failed) {
        mft__set_error(MFT_ERR_NOMEM, "%s: out of memory building the header", fn);
        return MFT_ERR_NOMEM;
    }
    if (b->len > MFT_SAFETENSORS_MAX_HEADER) {
        mft__set_error(MFT_ERR_INVALID,
                       "%s: the header would have %zu bytes, over the format's limit of %d", fn,
                       b->len, MFT_SAFETENSORS_MAX_HEADER);
        return MFT_ERR_INVALID;
    }
    return MFT_OK;
}

/* Writes n bytes (elements of es bytes) little-endian; false with errno. */
static bool st_write_le(FILE *f, const char *p, uint64_t n, size_t es) {
    if (mft__io_host_le() || es == 1) {
        while (n > 0) {
            size_t k = n > ((uint64_t)1 << 30) ? ((size_t)1 << 30) : (size_t)n;
            if (fwrite(p, 1, k, f) != k) return false;
            p += k;
            n -= k;
        }
        return true;
    }
    unsigned char buf[4096];
    const size_t per = sizeof buf / es * es;
    for (uint64_t at = 0; at < n; at += per) {
        size_t k = n - at < per ? (size_t)(n - at) : per;
        memcpy(buf, p + at, k);
        for (size_t e = 0; e < k; e += es)
            for (size_t a = 0, z = es - 1; a < z; a++, z--) {
                unsigned char t = buf[e + a];
                buf[e + a] = buf[e + z];
                buf[e + z] = t;
            }
        if (fwrite(buf, 1, k, f) != k) return false;
    }
    return true;
}

/* Writes header + bytes to "<path>.tmp", then renames it to path. */
static mft_status st_write_file(const char *fn, const char *path, const mft__json_buf *h, int n,
                                const st_plan *plans) {
    char *tmp = NULL;
    FILE *f = mft__io_create_tmp(fn, path, &tmp);
    if (!f) return mft_last_error();
    unsigned char n8[8];
    for (int i = 0; i < 8; i++) n8[i] = (unsigned char)((uint64_t)h->len >> (8 * i));
    bool ok = fwrite(n8, 1, 8, f) == 8 && fwrite(h->data, 1, h->len, f) == h->len;
    for (int i = 0; ok && i < n; i++) ok = st_write_le(f, plans[i].bytes, plans[i].nbytes, plans[i].es);
    return mft__io_finish_tmp(fn, f, tmp, path, MFT_OK, ok, errno);
}

mft_status mft_safetensors_save(const char *path, int n, const char *const *names,
                                const mft_tensor *const *tensors, unsigned flags) {
    static const char fn[] = "mft_safetensors_save";
    mft_status st = st_check_save(fn, path, n, names, tensors, flags);
    if (st != MFT_OK) return st;
    st_plan *plans = mft__alloc_or_err(fn, sizeof *plans * (size_t)(n ? n : 1), 16);
    if (!plans) return MFT_ERR_NOMEM;
    memset(plans, 0, sizeof *plans * (size_t)(n ? n : 1));
    for (int i = 0; i < n && st == MFT_OK; i++) {
        const mft_tensor *t = tensors[i];
        st_plan *p = &plans[i];
        p->name = names[i];
        p->name_len = strlen(names[i]);
        p->dtype = t->dtype;
        p->es = mft__elem_size(t->dtype);
        p->format = st_recorded_format(t);
        st = flags & MFT_SAFETENSORS_PHYSICAL ? st_plan_physical(fn, t, p)
                                              : st_plan_logical(fn, t, p);
        if (st != MFT_OK) mft__relabel_error(fn);
    }
    mft__json_buf h = {0};
    if (st == MFT_OK) {
        if (n > 1) qsort(plans, (size_t)n, sizeof *plans, st_plan_cmp);
        uint64_t at = 0;
        for (int i = 0; i < n; i++) {
            plans[i].begin = at;
            at += plans[i].nbytes;
        }
        st = st_header(fn, n, plans, &h);
    }
    if (st == MFT_OK) st = st_write_file(fn, path, &h, n, plans);
    mft__jb_free(&h);
    for (int i = 0; i < n; i++) mft_tensor_release(plans[i].hold);
    mft__free(plans);
    return st;
}
