/* io/safetensors_header.c — opening a safetensors file and verifying its
 * whole header before any tensor is made (docs/spec.md §8.3): the header size
 * (limit, truncation), '{' first, UTF-8, JSON (duplicate keys anywhere
 * refused), space padding only after the object, string-only __metadata__,
 * every tensor entry (exactly dtype / shape / data_offsets, known dtype,
 * integer shape and offsets, END - BEGIN = numel x size), mft's layout and
 * format metadata against the shape, and offsets covering the data buffer
 * exactly (no hole, overlap, trailing byte, END past the file). */
#define _POSIX_C_SOURCE 200809L /* pread, fstat */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "mft/safetensors.h"
#include "io_util.h"
#include "safetensors_internal.h"

/* ------------------------------------------------------------------ dtypes */
typedef struct st_dtype {
    const char *name;
    int mft; /* mft_dtype, -1: a safetensors dtype mft does not have */
} st_dtype;

/* Every dtype of the format (huggingface/safetensors `enum Dtype`). */
static const st_dtype ST_DTYPES[] = {
    {"BOOL", -1},        {"F4", -1},          {"F6_E2M3", -1},     {"F6_E3M2", -1},
    {"U8", MFT_U8},      {"I8", -1},          {"F8_E5M2", -1},     {"F8_E4M3", -1},
    {"F8_E8M0", -1},     {"F8_E4M3FNUZ", -1}, {"F8_E5M2FNUZ", -1}, {"I16", -1},
    {"U16", -1},         {"F16", -1},         {"BF16", -1},        {"I32", MFT_I32},
    {"U32", -1},         {"F32", MFT_F32},    {"C64", -1},         {"F64", MFT_F64},
    {"I64", MFT_I64},    {"U64", -1},
};

const char *mft__st_dtype_name(mft_dtype dt) {
    for (size_t i = 0; i < sizeof ST_DTYPES / sizeof *ST_DTYPES; i++)
        if (ST_DTYPES[i].mft == (int)dt) return ST_DTYPES[i].name;
    return NULL;
}

/* ------------------------------------------------------------------ the mapping */
void mft__st_map_release(mft__st_map *m) {
    if (!m || atomic_fetch_sub(&m->refs, 1) != 1) return;
    munmap(m->base, m->len);
    mft__free(m);
}

/* ------------------------------------------------------------------ errors */
static const char *st_type_name(mft__json_type t) {
    static const char *const names[] = {"null", "false", "true", "number", "string", "array",
                                        "object"};
    return names[t];
}

/* A name for messages: at most 120 bytes of it. */
#define ST_NAME(e) (e)->name_len > 120 ? 120 : (int)(e)->name_len, (e)->name

/* ------------------------------------------------------------------ reading */
static mft_status st_pread_all(const char *fn, const char *path, int fd, void *buf, size_t n,
                               uint64_t off) {
    char *p = buf;
    while (n > 0) {
        size_t chunk = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n;
        ssize_t got = pread(fd, p, chunk, (off_t)off);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
            int e = errno;
            return mft__io_fail(MFT_ERR_IO, fn, path, "reading %zu bytes at offset %llu failed: %s", n,
                          (unsigned long long)off, got < 0 ? strerror(e) : "the file shrank");
        }
        p += got;
        n -= (size_t)got;
        off += (uint64_t)got;
    }
    return MFT_OK;
}

static uint64_t st_get_u64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* ------------------------------------------------------------------ names */
typedef struct mft__st_name {
    const char *s;
    size_t len;
    size_t index;
} st_name;

static int st_name_cmp(const void *a, const void *b) {
    const st_name *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->s, y->s, n);
    if (c) return c;
    return x->len < y->len ? -1 : x->len > y->len ? 1 : 0;
}

static long st_find_n(const mft__st_file *f, const char *name, size_t len) {
    const st_name key = {name, len, 0};
    const st_name *hit =
        f->count ? bsearch(&key, f->sorted, f->count, sizeof key, st_name_cmp) : NULL;
    return hit ? (long)hit->index : -1;
}

static mft_status st_sort_names(const char *fn, mft__st_file *f) {
    f->sorted = mft__alloc(sizeof *f->sorted * (f->count ? f->count : 1), 16);
    if (!f->sorted) return mft__io_fail(MFT_ERR_NOMEM, fn, f->path, "out of memory");
    for (size_t i = 0; i < f->count; i++)
        f->sorted[i] = (st_name){f->entries[i].name, f->entries[i].name_len, i};
    if (f->count > 1) qsort(f->sorted, f->count, sizeof *f->sorted, st_name_cmp);
    return MFT_OK;
}

long mft__st_find(const mft__st_file *f, const char *name) {
    return st_find_n(f, name, strlen(name));
}

/* ------------------------------------------------------------------ entries */
/* An array of non-negative integers (at most max_n of them, each <= INT64_MAX). */
static mft_status st_uint_array(const char *fn, const mft__st_file *f, const mft__st_entry *e,
                                const char *what, const mft__json_doc *d,
                                const mft__json_node *arr, int max_n, int64_t *out, int *n) {
    if (arr->type != MFT__JSON_ARRAY)
        return mft__io_fail(MFT_ERR_CORRUPT, fn, f->path, "tensor '%.*s': %s is a %s, not an array",
                      ST_NAME(e), what, st_type_name(arr->type));
    if (arr->count > (size_t)max_n)
        return mft__io_fail(max_n == ST_MAX_FILE_DIMS ? MFT_ERR_RANK : MFT_ERR_CORRUPT, fn, f->path,
                      "tensor '%.*s': %s has %zu entries, at most %d allowed", ST_NAME(e), what,
                      arr->count, max_n);
    int k = 0;
    for (size_t c = arr->first; c != MFT__JSON_NONE; c = d->nodes[c].next, k++) {
        const mft__json_node *v = &d->nodes[c];
        uint64_t x = 0;
        int rc = mft__json_uint(d, v, (uint64_t)INT64_MAX, &x);
        if (rc) {
            const int tl = v->type == MFT__JSON_NUMBER ? (v->len > 40 ? 40 : (int)v->len) : 0;
            return mft__io_fail(MFT_ERR_CORRUPT, fn, f->path,
                          "tensor '%.*s': %s entry %d (%s%.*s) is %s", ST_NAME(e), what, k,
                          tl ? "" : st_type_name(v->type), tl, tl ? d->text + v->str : "",
                          rc == 2 ? "larger than the int64 limit"
                                  : "negative or not an integer");
        }
        out[k] = (int64_t)x;
    }
    *n = k;
    return MFT_OK;
}

static mft_status st_parse_entry(const char *fn, mft__st_file *f, const mft__json_node *v,
                                 mft__st_entry *e) {
    const mft__json_doc *d = &f->doc;
    if (v->type != MFT__JSON_OBJECT)
        return mft__io_fail(MFT_ERR_CORRUPT, fn, f->path, "tensor '%.*s': entry is a %s, not an object",
                      ST_NAME(e), st_type_name(v->type));
    /* unknown fields are refused: a field such as "strides" that its writer
     * meant to be honoured would otherwise silently be dropped */
    for (size_t c = v->first; c != MFT__JSON_NONE; c = d->nodes[c].next) {
        const char *k = mft__json_key(d, &d->nodes[c]);
        if (strcmp(k, "dtype") && strcmp(k, "shape") && strcmp(k, "data_offsets"))
            return mft__io_fail(MFT_ERR_CORRUPT, fn, f->path,
                          "tensor '%.*s': unknown field '%.60s' (an entry has exactly dtype, "
                          "shape and data_offsets)",
                          ST_NAME(e), k);
    }
    static const char *const fields[3] = {"dtype", "shape", "data_offsets"};
    const mft__json_node *m[3];
    for (int i = 0; i < 3; i++)
        if (!(m[i] = mft__json_member(d, v, fields[i])))
            return mft__io_fail(MFT_ERR_CORRUPT, fn, f->path, "tensor '%.*s': missing field '%s'",
                          ST_NAME(e), fields[i]);
    if (m[0]->type != MFT__JSON_STRING)
        return mft__io_fail(MFT_ERR_CORRUPT, fn, f->path, "tensor '%.*s': dtype is a %s, not a string",
                      ST_NAME(e), st_type_name(m[0]->type));
    const char *dt = mft__json_str(d, m[0]);
    int found = -2;
    for (size_t i = 0; i < sizeof ST_DTYPES / sizeof *ST_DTYPES; i++)
        if (!m[0]->has_nul && strcmp(dt, ST_DTYPES[i].name) == 0) found = ST_DTYPES[i].mft;
    if (found == -2)
        return mft__io_fail(MFT_ERR_CORRUPT, fn, f->path, "tensor '%.*s': unknown dtype '%.40s'",
                      ST_NAME(e), dt);
    if (found == -1)
        return mft__io_fail(MFT_ERR_DTYPE, fn, f->path,
                      "tensor '%.*s' has dtype %s, which mft does not have (it reads F32, F64, "
                      "I32, I64, U8)",
                      ST_NAME(e), dt);
    e->dtype = (mft_dtype)found;
    mft_status st = st_uint_array(fn, f, e, "shape", d, m[1], ST_MAX_FILE_DIMS, e->fshape,
                                  &e->fndim);
    if (st != MFT_OK) return st;
    int64_t off[2];
    int noff = 0;
    if ((st = st_uint_array(fn, f, e, "data_offsets", d, m[2], 2, off, &noff)) != MFT_OK)
        return st;
    if (noff != 2)
        return mft__io_fail(MFT_ERR_CORRUPT, fn, f->path,
                      "tensor '%.*s': data_offsets has %d entries, not 2", ST_NAME(e), noff);
    /* element count and byte size, checked for overflow */
    const size_t es = mft__elem_size(e->dtype);
    int64_t numel = 1;
    bool zero = false, over = false;
    for (int i = 0; i < e->fndim; i++) zero |= e->fshape[i] == 0;
    for (int i = 0; i < e->fndim && !zero; i++)
        over |= __builtin_mul_overflow(numel, e->fshape[i], &numel);
    int64_t bytes = 0;
    if (zero) numel = 0;
    over |= __builtin_mul_overflow(numel, (int64_t)es, &bytes);
    char b1[MFT__DIMS_BUF];
    mft__fmt_dims(b1, sizeof b1, e->fndim, e->fshape);
    if (over)
        return mft__io_fail(MFT_ERR_CORRUPT, fn, f->path,
                      "tensor '%.*s': shape %s of %s has more bytes than int64 can count",
                      ST_NAME(e), b1, dt);
    e->fnumel = numel;
    e->begin = (uint64_t)off[0];
    e->end = (uint64_t)off[1];
    if (off[1] < off[0])
        return mft__io_fail(MFT_ERR_CORRUPT, fn, f->path,
                      "tensor '%.*s': data_offsets [%lld,%lld] end before they begin", ST_NAME(e),
                      (long long)off[0], (long long)off[1]);
    if (off[1] - off[0] != bytes)
        return mft__io_fail(MFT_ERR_CORRUPT, fn, f->path,
                      "tensor '%.*s': data_offsets [%lld,%lld] hold %lld bytes, shape %s of %s "
                      "needs %lld",
                      ST_NAME(e), (long long)off[0], (long long)off[1],
                      (long long)(off[1] - off[0]), b1, dt, (long long)bytes);
    return MFT_OK;
}

/* ------------------------------------------------------------------ mft metadata */
static const mft_format ST_FORMATS[] = {MFT_CONTIGUOUS, MFT_CHANNELS_LAST, MFT_NCHW8C,
                                        MFT_NCHW16C};

static mft_status st_meta_format(const char *fn, mft__st_file *f, mft__st_entry *e,
                                 const mft__json_node *v) {
    const char *s = mft__json_str(&f->doc, v);
    for (size_t i = 0; i < sizeof ST_FORMATS / sizeof *ST_FORMATS; i++)
        if (!v->has_nul && strcmp(s, mft_format_name(ST_FORMATS[i])) == 0) {
            e->has_format = true;
            e->format = ST_FORMATS[i];
            e->format_text = s;
            return MFT_OK;
        }
    return mft__io_fail(MFT_ERR_CORRUPT, fn, f->path,
                  "malformed mft metadata: mft.format.%.*s is '%.40s', not CONTIGUOUS, "
                  "CHANNELS_LAST, NCHW8C or NCHW16C",
                  ST_NAME(e), s);
}

/* "mft.layout.<name>": {"logical":[...],"perm":[...]} or
 * {"logical":[...],"onednn":"<tag>"}, nothing else. */
static mft_status st_meta_layout(const char *fn, mft__st_file *f, mft__st_entry *e,
                                 const mft__json_node *v) {
    const char *text = mft__json_str(&f->doc, v);
    e->layout_text = text;
    mft__json_doc d;
    char jerr[200];
    size_t end = 0;
    mft_status st = MFT_OK;
    int rc = v->has_nul ? -1 : mft__json_parse(text, v->len, &d, &end, jerr, sizeof jerr);
    if (rc == -2) {
        mft__json_free(&d);
        return mft__io_fail(MFT_ERR_NOMEM, fn, f->path, "out of memory parsing mft.layout.%.*s",
                      ST_NAME(e));
    }
#define BAD(...)                                                                               \
    do {                                                                                       \
        char why_[1024];                                                                       \
        snprintf(why_, sizeof why_, __VA_ARGS__);                                              \
        st = mft__io_fail(MFT_ERR_CORRUPT, fn, f->path, "malformed mft metadata: mft.layout.%.*s: %s", \
                    ST_NAME(e), why_);                                                         \
        goto done;                                                                             \
    } while (0)
    if (rc) {
        if (v->has_nul) memset(&d, 0, sizeof d);
        BAD("not JSON (%s)", v->has_nul ? "holds a NUL" : jerr);
    }
    if (d.nodes[0].type != MFT__JSON_OBJECT || end != v->len)
        BAD("not one JSON object");
    const mft__json_node *root = &d.nodes[0], *lg = mft__json_member(&d, root, "logical"),
                         *pm = mft__json_member(&d, root, "perm"),
                         *dn = mft__json_member(&d, root, "onednn");
    if (!lg || (!pm) == (!dn) || root->count != 2)
        BAD("needs \"logical\" and exactly one of \"perm\" / \"onednn\", nothing else");
    int n = 0;
    if ((st = st_uint_array(fn, f, e, "mft.layout logical", &d, lg, MFT_MAX_DIMS, e->sizes,
                            &n)) != MFT_OK)
        goto done;
    e->ndim = n;
    char b1[MFT__DIMS_BUF], b2[MFT__DIMS_BUF];
    mft__fmt_dims(b1, sizeof b1, e->ndim, e->sizes);
    mft__fmt_dims(b2, sizeof b2, e->fndim, e->fshape);
    if (pm) {
        int64_t p[MFT_MAX_DIMS];
        int np = 0;
        if ((st = st_uint_array(fn, f, e, "mft.layout perm", &d, pm, MFT_MAX_DIMS, p, &np)) !=
            MFT_OK)
            goto done;
        bool seen[MFT_MAX_DIMS] = {false}, ok = np == n && n == e->fndim;
        for (int i = 0; ok && i < n; i++) {
            ok = p[i] < n && !seen[p[i]] && e->fshape[i] == e->sizes[p[i]];
            if (ok) seen[p[i]] = true;
        }
        if (!ok) {
            char b3[MFT__DIMS_BUF];
            BAD("logical sizes %s with perm %s do not fit the file's shape %s", b1,
                mft__fmt_dims(b3, sizeof b3, np, p), b2);
        }
        /* the logical view: dim p[i] takes the packed stride of file dim i */
        int64_t ps[MFT_MAX_DIMS];
        mft__format_strides(n, e->fshape, MFT_CONTIGUOUS, ps);
        for (int i = 0; i < n; i++) e->strides[p[i]] = ps[i];
        e->layout_kind = ST_LAYOUT_PERM;
    } else {
        if (dn->type != MFT__JSON_STRING || dn->has_nul) BAD("\"onednn\" is not a string");
        const char *tag = mft__json_str(&d, dn);
        if (mft_layout_from_onednn(n, e->sizes, tag, &e->layout) != MFT_OK)
            BAD("oneDNN tag '%.40s' does not describe logical sizes %s (%s)", tag, b1,
                mft_last_error_message());
        int64_t shape[ST_MAX_FILE_DIMS];
        char canon[64];
        int r = mft__st_blocked_shape(fn, &e->layout, shape, canon, sizeof canon);
        bool ok = r == e->fndim;
        for (int i = 0; ok && i < r; i++) ok = shape[i] == e->fshape[i];
        if (!ok) {
            char b3[MFT__DIMS_BUF];
            if (r < 0) b3[0] = '\0';
            else mft__fmt_dims(b3, sizeof b3, r, shape);
            BAD("oneDNN tag '%.40s' with logical sizes %s is the array %s, the file's shape is %s",
                tag, b1, r < 0 ? "(none)" : b3, b2);
        }
        e->layout_kind = ST_LAYOUT_ONEDNN;
    }
#undef BAD
done:
    mft__json_free(&d);
    return st;
}

/* The metadata: mft.version, mft.format.<name>, mft.layout.<name>. */
static mft_status st_metadata(const char *fn, mft__st_file *f) {
    const mft__json_doc *d = &f->doc;
    if (!f->metadata) return MFT_OK;
    for (size_t c = f->metadata->first; c != MFT__JSON_NONE; c = d->nodes[c].next) {
        const mft__json_node *v = &d->nodes[c];
        const char *k = mft__json_key(d, v);
        const size_t kl = v->key_len;
        if (strcmp(k, "mft.version") == 0 && kl == strlen(k)) {
            if (strcmp(mft__json_str(d, v), "1") != 0 || v->len != 1)
                return mft__io_fail(MFT_ERR_UNSUPPORTED, fn, f->path,
                              "mft.version is '%.20s'; this library reads version 1",
                              mft__json_str(d, v));
            continue;
        }
        const bool is_fmt = kl > 11 && memcmp(k, "mft.format.", 11) == 0;
        const bool is_lay = kl > 11 && memcmp(k, "mft.layout.", 11) == 0;
        if (!is_fmt && !is_lay) continue; /* other keys are the user's */
        long i = st_find_n(f, k + 11, kl - 11);
        if (i < 0)
            return mft__io_fail(MFT_ERR_CORRUPT, fn, f->path,
                          "malformed mft metadata: key '%.140s' names no tensor of the file", k);
        mft_status st = is_fmt ? st_meta_format(fn, f, &f->entries[i], v)
                               : st_meta_layout(fn, f, &f->entries[i], v);
        if (st != MFT_OK) return st;
    }
    return MFT_OK;
}

/* Logical geometry of each entry, and its mft.format against it. */
static mft_status st_geometry(const char *fn, mft__st_file *f, mft__st_entry *e) {
    char b1[MFT__DIMS_BUF];
    if (e->layout_kind == ST_LAYOUT_NONE) {
        if (e->fndim > MFT_MAX_DIMS)
            return mft__io_fail(MFT_ERR_RANK, fn, f->path,
                          "tensor '%.*s' has %d dims; mft tensors have at most %d", ST_NAME(e),
                          e->fndim, MFT_MAX_DIMS);
        e->ndim = e->fndim;
        memcpy(e->sizes, e->fshape, sizeof e->sizes);
        mft__format_strides(e->ndim, e->sizes, MFT_CONTIGUOUS, e->strides);
    }
    mft__fmt_dims(b1, sizeof b1, e->ndim, e->sizes);
    /* bounded by the file already; this is the library's own geometry rule */
    if (mft__check_geometry(fn, e->ndim, e->sizes, NULL, e->dtype) != MFT_OK)
        return mft__io_fail(MFT_ERR_CORRUPT, fn, f->path, "tensor '%.*s': sizes %s are too large",
                      ST_NAME(e), b1);
    if (!e->has_format) return MFT_OK;
    const mft_format fm = e->format;
    if (fm != MFT_CONTIGUOUS && (e->ndim < 3 || e->ndim > 5))
        return mft__io_fail(MFT_ERR_CORRUPT, fn, f->path,
                      "malformed mft metadata: mft.format.%.*s is %s, which needs rank 3-5; the "
                      "tensor has sizes %s",
                      ST_NAME(e), mft_format_name(fm), b1);
    bool fits = true;
    if (e->layout_kind == ST_LAYOUT_PERM)
        fits = fm == MFT_CONTIGUOUS
                   ? mft__layout_is_contiguous(e->ndim, e->sizes, e->strides, e->fnumel)
               : fm == MFT_CHANNELS_LAST ? mft__layout_is_cl_contiguous(e->ndim, e->sizes, e->strides)
                                         : false;
    else if (e->layout_kind == ST_LAYOUT_ONEDNN)
        fits = mft__layout_format(&e->layout) == fm;
    if (!fits)
        return mft__io_fail(MFT_ERR_CORRUPT, fn, f->path,
                      "malformed mft metadata: mft.format.%.*s is %s but mft.layout.%.*s lays the "
                      "bytes out otherwise (%.80s)",
                      ST_NAME(e), mft_format_name(fm), ST_NAME(e), e->layout_text);
    return MFT_OK;
}

typedef struct st_span {
    uint64_t begin, end;
    size_t index;
} st_span;

static int st_span_cmp(const void *a, const void *b) {
    const st_span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* The entries' byte ranges cover the data buffer exactly. */
static mft_status st_coverage(const char *fn, mft__st_file *f) {
    const uint64_t buf = f->size - f->data_start;
    for (size_t i = 0; i < f->count; i++) {
        const mft__st_entry *e = &f->entries[i];
        if (e->end > buf)
            return mft__io_fail(MFT_ERR_CORRUPT, fn, f->path,
                          "tensor '%.*s': data_offsets [%llu,%llu] end beyond the %llu-byte data "
                          "buffer (truncated file?)",
                          ST_NAME(e), (unsigned long long)e->begin, (unsigned long long)e->end,
                          (unsigned long long)buf);
    }
    st_span *v = mft__alloc(sizeof *v * (f->count ? f->count : 1), 16);
    if (!v) return mft__io_fail(MFT_ERR_NOMEM, fn, f->path, "out of memory sorting %zu entries", f->count);
    for (size_t i = 0; i < f->count; i++) v[i] = (st_span){f->entries[i].begin, f->entries[i].end, i};
    if (f->count > 1) qsort(v, f->count, sizeof *v, st_span_cmp);
    uint64_t at = 0;
    mft_status st = MFT_OK;
    for (size_t i = 0; i < f->count && st == MFT_OK; i++) {
        const mft__st_entry *e = &f->entries[v[i].index];
        if (v[i].begin > at)
            st = mft__io_fail(MFT_ERR_CORRUPT, fn, f->path,
                        "bytes [%llu,%llu) of the data buffer belong to no tensor (a hole before "
                        "tensor '%.*s')",
                        (unsigned long long)at, (unsigned long long)v[i].begin, ST_NAME(e));
        else if (v[i].begin < at)
            st = mft__io_fail(MFT_ERR_CORRUPT, fn, f->path,
                        "tensor '%.*s': data_offsets [%llu,%llu] overlap the tensor before it, "
                        "which ends at %llu",
                        ST_NAME(e), (unsigned long long)v[i].begin,
                        (unsigned long long)v[i].end, (unsigned long long)at);
        at = v[i].end;
    }
    mft__free(v);
    if (st == MFT_OK && at != buf)
        st = mft__io_fail(MFT_ERR_CORRUPT, fn, f->path,
                    "%llu trailing bytes after the last tensor (the data buffer has %llu bytes, "
                    "the tensors cover %llu)",
                    (unsigned long long)(buf - at), (unsigned long long)buf,
                    (unsigned long long)at);
    return st;
}

/* ------------------------------------------------------------------ open */
static mft_status st_read_prefix(const char *fn, const char *path, unsigned flags,
                                 mft__st_file *f) {
    errno = 0;
    f->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (f->fd < 0) {
        int e = errno;
        return mft__io_fail(MFT_ERR_IO, fn, path, "cannot open: %s", strerror(e));
    }
    struct stat sb;
    if (fstat(f->fd, &sb) != 0 || !S_ISREG(sb.st_mode))
        return mft__io_fail(MFT_ERR_IO, fn, path, "not a regular file");
    f->size = (uint64_t)sb.st_size;
    if (f->size < 8)
        return mft__io_fail(MFT_ERR_CORRUPT, fn, path,
                      "file of %llu bytes is shorter than the 8-byte header size",
                      (unsigned long long)f->size);
    unsigned char b8[8];
    mft_status st = st_pread_all(fn, path, f->fd, b8, 8, 0);
    if (st != MFT_OK) return st;
    f->hlen = st_get_u64(b8);
    if (f->hlen > MFT_SAFETENSORS_MAX_HEADER)
        return mft__io_fail(MFT_ERR_CORRUPT, fn, path,
                      "header size %llu exceeds the limit of %d bytes",
                      (unsigned long long)f->hlen, MFT_SAFETENSORS_MAX_HEADER);
    if (f->hlen > f->size - 8)
        return mft__io_fail(MFT_ERR_CORRUPT, fn, path,
                      "header of %llu bytes runs past the end of the %llu-byte file (truncated?)",
                      (unsigned long long)f->hlen, (unsigned long long)f->size);
    f->data_start = 8 + f->hlen;
    if (!(flags & MFT_SAFETENSORS_READ) && mft__io_host_le() && f->size <= SIZE_MAX) {
        /* private and writable: writing to a loaded tensor copies the page,
         * never changes the file */
        void *base = mmap(NULL, (size_t)f->size, PROT_READ | PROT_WRITE, MAP_PRIVATE, f->fd, 0);
        if (base == MAP_FAILED) {
            int e = errno;
            return mft__io_fail(MFT_ERR_IO, fn, path, "cannot map %llu bytes: %s",
                          (unsigned long long)f->size, strerror(e));
        }
        f->map = mft__alloc(sizeof *f->map, 16);
        if (!f->map) {
            munmap(base, (size_t)f->size);
            return mft__io_fail(MFT_ERR_NOMEM, fn, path, "out of memory");
        }
        atomic_init(&f->map->refs, 1);
        f->map->base = base;
        f->map->len = (size_t)f->size;
        f->header = (unsigned char *)base + 8;
        return MFT_OK;
    }
    f->header = mft__alloc((size_t)f->hlen + 1, 16);
    if (!f->header)
        return mft__io_fail(MFT_ERR_NOMEM, fn, path, "out of memory for a %llu-byte header",
                      (unsigned long long)f->hlen);
    f->header_owned = true;
    return st_pread_all(fn, path, f->fd, f->header, (size_t)f->hlen, 8);
}

static mft_status st_parse_header(const char *fn, mft__st_file *f) {
    const char *path = f->path;
    const unsigned char *h = f->header;
    const size_t n = (size_t)f->hlen;
    if (n == 0) return mft__io_fail(MFT_ERR_CORRUPT, fn, path, "the JSON header is empty");
    if (h[0] != '{')
        return mft__io_fail(MFT_ERR_CORRUPT, fn, path,
                      "the JSON header starts with byte 0x%02x, not '{'", h[0]);
    size_t bad = 0;
    if (!mft__utf8_valid(h, n, &bad))
        return mft__io_fail(MFT_ERR_CORRUPT, fn, path,
                      "the JSON header is not valid UTF-8 (byte 0x%02x at offset %zu)", h[bad],
                      bad);
    char jerr[200];
    size_t end = 0;
    int rc = mft__json_parse((const char *)h, n, &f->doc, &end, jerr, sizeof jerr);
    if (rc == -2) return mft__io_fail(MFT_ERR_NOMEM, fn, path, "out of memory parsing the header");
    if (rc) return mft__io_fail(MFT_ERR_CORRUPT, fn, path, "the header is not valid JSON: %s", jerr);
    for (size_t p = end; p < n; p++)
        if (h[p] != ' ')
            return mft__io_fail(MFT_ERR_CORRUPT, fn, path,
                          "byte 0x%02x at offset %zu of the header follows its JSON object; only "
                          "space (0x20) padding may",
                          h[p], p);
    const mft__json_doc *d = &f->doc;
    const mft__json_node *root = &d->nodes[0];
    size_t count = 0;
    for (size_t c = root->first; c != MFT__JSON_NONE; c = d->nodes[c].next)
        if (strcmp(mft__json_key(d, &d->nodes[c]), "__metadata__") != 0 ||
            d->nodes[c].key_len != 12)
            count++;
    if (count > (size_t)INT32_MAX)
        return mft__io_fail(MFT_ERR_CORRUPT, fn, path, "%zu tensors", count);
    f->entries = mft__alloc(sizeof *f->entries * (count ? count : 1), 16);
    if (!f->entries) return mft__io_fail(MFT_ERR_NOMEM, fn, path, "out of memory for %zu entries", count);
    for (size_t c = root->first; c != MFT__JSON_NONE; c = d->nodes[c].next) {
        const mft__json_node *v = &d->nodes[c];
        const char *k = mft__json_key(d, v);
        if (v->key_len == 12 && strcmp(k, "__metadata__") == 0) {
            if (v->type != MFT__JSON_OBJECT)
                return mft__io_fail(MFT_ERR_CORRUPT, fn, path,
                              "__metadata__ is a %s, not an object of strings",
                              st_type_name(v->type));
            for (size_t m = v->first; m != MFT__JSON_NONE; m = d->nodes[m].next)
                if (d->nodes[m].type != MFT__JSON_STRING)
                    return mft__io_fail(MFT_ERR_CORRUPT, fn, path,
                                  "__metadata__ value of key '%.100s' is a %s, not a string",
                                  mft__json_key(d, &d->nodes[m]), st_type_name(d->nodes[m].type));
            f->metadata = v;
            f->nmeta = v->count;
            continue;
        }
        mft__st_entry *e = &f->entries[f->count];
        memset(e, 0, sizeof *e);
        e->name = k;
        e->name_len = v->key_len;
        if (v->key_has_nul)
            return mft__io_fail(MFT_ERR_CORRUPT, fn, path, "tensor name '%.*s...' holds a NUL character",
                          ST_NAME(e));
        if (v->key_len == 0) /* mft names are never empty (mft_safetensors_save) */
            return mft__io_fail(MFT_ERR_CORRUPT, fn, path, "a tensor name is empty");
        f->count++;
        mft_status st = st_parse_entry(fn, f, v, e);
        if (st != MFT_OK) return st;
    }
    mft_status st = st_sort_names(fn, f);
    if (st == MFT_OK) st = st_metadata(fn, f);
    for (size_t i = 0; i < f->count && st == MFT_OK; i++) st = st_geometry(fn, f, &f->entries[i]);
    if (st == MFT_OK) st = st_coverage(fn, f);
    return st;
}

mft_status mft__st_open(const char *fn, const char *path, unsigned flags, mft__st_file *f) {
    memset(f, 0, sizeof *f);
    f->fd = -1;
    f->path = path;
    mft_status st = st_read_prefix(fn, path, flags, f);
    if (st == MFT_OK) st = st_parse_header(fn, f);
    return st;
}

void mft__st_close(mft__st_file *f) {
    if (f->fd >= 0) close(f->fd);
    if (f->header_owned) mft__free(f->header);
    mft__st_map_release(f->map);
    mft__json_free(&f->doc);
    mft__free(f->entries);
    mft__free(f->sorted);
    memset(f, 0, sizeof *f);
    f->fd = -1;
}

/* ------------------------------------------------------------------ blocked shape */
int mft__st_blocked_shape(const char *fn, const mft_layout *l, int64_t *shape, char *tag,
                          size_t tag_len) {
    int need = mft_layout_to_onednn(l, tag, tag_len);
    if (need < 0) return -1;
    if ((size_t)need >= tag_len) {
        mft__set_error(MFT_ERR_UNSUPPORTED, "%s: oneDNN tag of %d characters is too long", fn,
                       need);
        return -1;
    }
    int64_t bprod[MFT_MAX_DIMS];
    for (int d = 0; d < l->ndim; d++) bprod[d] = 1;
    for (int k = 0; k < l->nblocks; k++) bprod[l->block_dim[k]] *= l->block_size[k];
    int r = 0, blocks = 0;
    const char *p = tag;
    for (; *p && !(*p >= '0' && *p <= '9'); p++) { /* outer dims, slowest first */
        int d = *p >= 'a' && *p <= 'z' ? *p - 'a' : *p - 'A';
        if (d < 0 || d >= l->ndim || r >= ST_MAX_FILE_DIMS) goto bad;
        shape[r++] = l->padded[d] / bprod[d];
    }
    while (*p) { /* inner blocks: digits then the dim's letter */
        int64_t b = 0;
        while (*p >= '0' && *p <= '9') b = b * 10 + (*p++ - '0');
        if (!(*p >= 'a' && *p <= 'z') || r >= ST_MAX_FILE_DIMS || blocks >= l->nblocks) goto bad;
        if (b != l->block_size[blocks++]) goto bad;
        shape[r++] = b;
        p++;
    }
    if (r != l->ndim + l->nblocks) goto bad;
    /* the array must hold exactly the layout's storage, pads included */
    int64_t slots = 0, prod = 1;
    if (mft_layout_storage_numel(l, &slots) != MFT_OK) return -1;
    for (int i = 0; i < r; i++)
        if (__builtin_mul_overflow(prod, shape[i], &prod)) goto bad;
    if (slots != prod && slots != 0) goto bad;
    return r;
bad:
    mft__set_error(MFT_ERR_UNSUPPORTED, "%s: layout '%s' is not a packed array of its blocks", fn,
                   tag);
    return -1;
}
