/* data/idx.c — the IDX reader (mft_idx_load) and MNIST/Fashion-MNIST split
 * loading (mft_mnist_load). Files are read through zlib's gz* API, which
 * reads gzip and raw files alike.
 *
 * Invariant: a header is never trusted for memory. Up to IDX_DIRECT_LIMIT
 * bytes of elements are read straight into the result; beyond it, the data is
 * first read into a buffer that grows only as bytes actually arrive, so a
 * corrupted header announcing terabytes fails as "truncated" instead of
 * allocating. Every malformed input is an error naming the path and values. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "internal.h"

#define IDX_DIRECT_LIMIT ((uint64_t)256 << 20) /* bytes read straight into the tensor */
#define IDX_CHUNK ((uint64_t)1 << 26)           /* largest single gzread */

typedef struct idx_type {
    unsigned char code;
    const char *name;
    size_t file_size; /* bytes per element in the file */
    mft_dtype dtype;  /* result dtype */
} idx_type;

static const idx_type IDX_TYPES[] = {
    {0x08, "u8", 1, MFT_U8},   {0x09, "i8", 1, MFT_I32},  {0x0B, "i16", 2, MFT_I32},
    {0x0C, "i32", 4, MFT_I32}, {0x0D, "f32", 4, MFT_F32}, {0x0E, "f64", 8, MFT_F64},
};

static uint32_t idx_be32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* Sets the error for a failed or short gzread. */
static mft_status idx_read_error(const char *fn, const char *path, gzFile gz, const char *what,
                                 uint64_t got, uint64_t want, int saved_errno) {
    int zerr = Z_OK;
    const char *zmsg = gzerror(gz, &zerr);
    if (zerr == Z_ERRNO) {
        mft__set_error(MFT_ERR_IO, "%s: '%s': reading the %s failed: %s", fn, path, what,
                       strerror(saved_errno));
        return MFT_ERR_IO;
    }
    if (zerr != Z_OK && zerr != Z_STREAM_END) {
        mft__set_error(MFT_ERR_CORRUPT, "%s: '%s': damaged gzip data in the %s after %llu of %llu bytes: %s",
                       fn, path, what, (unsigned long long)got, (unsigned long long)want,
                       zmsg ? zmsg : "zlib error");
        return MFT_ERR_CORRUPT;
    }
    mft__set_error(MFT_ERR_CORRUPT, "%s: '%s': truncated %s: %llu of %llu bytes", fn, path, what,
                   (unsigned long long)got, (unsigned long long)want);
    return MFT_ERR_CORRUPT;
}

/* Reads up to want bytes into dst in chunks; *got = bytes read. false on a
 * read error (gzread < 0); a short read at end of file returns true. */
static bool idx_read_some(gzFile gz, void *dst, uint64_t want, uint64_t *got, int *err) {
    *got = 0;
    while (*got < want) {
        uint64_t n = want - *got < IDX_CHUNK ? want - *got : IDX_CHUNK;
        errno = 0;
        int r = gzread(gz, (char *)dst + *got, (unsigned)n);
        if (r < 0) {
            *err = errno;
            return false;
        }
        if (r == 0) break;
        *got += (uint64_t)r;
    }
    return true;
}

/* Reads exactly want bytes into a buffer grown as data arrives (for sizes
 * above IDX_DIRECT_LIMIT). Returns the buffer (mft__free) or NULL (error set). */
static void *idx_read_growing(const char *fn, const char *path, gzFile gz, uint64_t want) {
    uint64_t cap = IDX_DIRECT_LIMIT, have = 0;
    void *buf = mft__alloc_or_err(fn, (size_t)cap, 64);
    if (!buf) return NULL;
    for (;;) {
        uint64_t got = 0;
        int err = 0;
        uint64_t step = (cap < want ? cap : want) - have;
        if (!idx_read_some(gz, (char *)buf + have, step, &got, &err)) {
            idx_read_error(fn, path, gz, "data", have + got, want, err);
            mft__free(buf);
            return NULL;
        }
        have += got;
        if (have == want) return buf;
        if (got < step) {
            idx_read_error(fn, path, gz, "data", have, want, 0);
            mft__free(buf);
            return NULL;
        }
        uint64_t ncap = cap * 2 < want ? cap * 2 : want;
        if (ncap > SIZE_MAX) {
            mft__set_error(MFT_ERR_NOMEM, "%s: '%s': %llu bytes of data do not fit in memory", fn,
                           path, (unsigned long long)want);
            mft__free(buf);
            return NULL;
        }
        void *nb = mft__alloc_or_err(fn, (size_t)ncap, 64);
        if (!nb) {
            mft__free(buf);
            return NULL;
        }
        memcpy(nb, buf, (size_t)have);
        mft__free(buf);
        buf = nb;
        cap = ncap;
    }
}

/* Converts numel big-endian file elements at src into the tensor data dst
 * (src may equal dst when the element sizes are equal). */
static void idx_convert(const idx_type *ty, const unsigned char *src, void *dst, int64_t numel) {
    switch (ty->code) {
    case 0x08:
        if (src != dst) memcpy(dst, src, (size_t)numel);
        break;
    case 0x09: {
        int32_t *o = dst;
        for (int64_t i = 0; i < numel; i++) o[i] = (int32_t)(int8_t)src[i];
        break;
    }
    case 0x0B: {
        int32_t *o = dst;
        for (int64_t i = 0; i < numel; i++)
            o[i] = (int32_t)(int16_t)(uint16_t)((unsigned)src[2 * i] << 8 | src[2 * i + 1]);
        break;
    }
    case 0x0C:
    case 0x0D: {
        /* the same 4 bytes reinterpreted: no aliasing issue through memcpy */
        unsigned char *o = dst;
        for (int64_t i = 0; i < numel; i++) {
            uint32_t v = idx_be32(src + 4 * i);
            memcpy(o + 4 * i, &v, 4);
        }
        break;
    }
    case 0x0E: {
        unsigned char *o = dst;
        for (int64_t i = 0; i < numel; i++) {
            uint64_t v = (uint64_t)idx_be32(src + 8 * i) << 32 | idx_be32(src + 8 * i + 4);
            memcpy(o + 8 * i, &v, 8);
        }
        break;
    }
    default:
        break;
    }
}

/* The reader proper; results are not registered in a scope (the caller
 * suspends). */
static mft_tensor *idx_load(const char *fn, const char *path) {
    errno = 0;
    gzFile gz = gzopen(path, "rb");
    if (!gz) {
        int e = errno;
        mft__set_error(e ? MFT_ERR_IO : MFT_ERR_NOMEM, "%s: cannot open '%s': %s", fn, path,
                       e ? strerror(e) : "out of memory");
        return NULL;
    }
    gzbuffer(gz, 1 << 17);
    mft_tensor *t = NULL;
    void *stage = NULL;
    unsigned char head[4 + 4 * MFT_MAX_DIMS];
    uint64_t got = 0;
    int err = 0;
    if (!idx_read_some(gz, head, 4, &got, &err) || got < 4) {
        idx_read_error(fn, path, gz, "header", got, 4, err);
        goto done;
    }
    if (head[0] != 0 || head[1] != 0) {
        mft__set_error(MFT_ERR_CORRUPT,
                       "%s: '%s' is not an IDX file: magic bytes %02x %02x %02x %02x (expected 00 00 "
                       "<type> <rank>)",
                       fn, path, head[0], head[1], head[2], head[3]);
        goto done;
    }
    const idx_type *ty = NULL;
    for (size_t i = 0; i < sizeof IDX_TYPES / sizeof IDX_TYPES[0]; i++)
        if (IDX_TYPES[i].code == head[2]) ty = &IDX_TYPES[i];
    if (!ty) {
        mft__set_error(MFT_ERR_CORRUPT,
                       "%s: '%s': unknown IDX element type 0x%02x (known: 0x08 u8, 0x09 i8, 0x0b "
                       "i16, 0x0c i32, 0x0d f32, 0x0e f64)",
                       fn, path, head[2]);
        goto done;
    }
    int ndim = head[3];
    if (ndim < 1 || ndim > MFT_MAX_DIMS) {
        mft__set_error(MFT_ERR_CORRUPT, "%s: '%s': IDX rank %d outside 1..%d", fn, path, ndim,
                       MFT_MAX_DIMS);
        goto done;
    }
    uint64_t want = 4 * (uint64_t)ndim;
    if (!idx_read_some(gz, head + 4, want, &got, &err) || got < want) {
        idx_read_error(fn, path, gz, "header sizes", got, want, err);
        goto done;
    }
    int64_t sizes[MFT_MAX_DIMS];
    for (int d = 0; d < ndim; d++) sizes[d] = (int64_t)idx_be32(head + 4 + 4 * d);
    char b1[MFT__DIMS_BUF];
    /* sizes no tensor can have (Note [Geometry bound], size-0 dims counted
     * as 1) are a corrupt header, whatever the other sizes are */
    if (mft__check_geometry(fn, ndim, sizes, NULL, ty->dtype) != MFT_OK) {
        mft__set_error(MFT_ERR_CORRUPT, "%s: '%s': IDX sizes %s overflow (absurd header)", fn, path,
                       mft__fmt_dims(b1, sizeof b1, ndim, sizes));
        goto done;
    }
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++) numel *= sizes[d];
    uint64_t nbytes = (uint64_t)numel * ty->file_size;
    const unsigned char *src = NULL;
    if (nbytes > IDX_DIRECT_LIMIT) {
        stage = idx_read_growing(fn, path, gz, nbytes);
        if (!stage) goto done;
        src = stage;
    }
    t = mft__tensor_alloc(fn, ndim, sizes, ty->dtype, MFT_CONTIGUOUS);
    mft__decision dec = mft__rule_decide(MFT__RULE_DATA, "idx_load", 0, NULL, MFT_CONTIGUOUS, 0);
    mft__rule_apply(t, &dec);
    if (!t) goto done;
    if (!src && nbytes > 0) {
        unsigned char *dst = NULL; /* in place when the element sizes agree */
        if (ty->file_size == mft__elem_size(ty->dtype)) {
            dst = (unsigned char *)mft__tensor_ptr(t);
        } else {
            stage = mft__alloc_or_err(fn, (size_t)nbytes, 64);
            if (!stage) goto fail;
            dst = stage;
        }
        src = dst;
        if (!idx_read_some(gz, dst, nbytes, &got, &err) || got < nbytes) {
            idx_read_error(fn, path, gz, "data", got, nbytes, err);
            goto fail;
        }
    }
    /* nothing may follow the last element */
    unsigned char extra[64];
    if (!idx_read_some(gz, extra, sizeof extra, &got, &err)) {
        idx_read_error(fn, path, gz, "data", nbytes, nbytes, err);
        goto fail;
    }
    int zerr = Z_OK;
    gzerror(gz, &zerr);
    if (got == 0 && zerr != Z_OK) { /* e.g. a gzip trailer (CRC, length) cut short */
        idx_read_error(fn, path, gz, "gzip stream", nbytes, nbytes, 0);
        goto fail;
    }
    if (got > 0) {
        mft__set_error(MFT_ERR_CORRUPT,
                       "%s: '%s': %s%llu trailing bytes after the %llu bytes of data of sizes %s",
                       fn, path, got == sizeof extra ? "at least " : "", (unsigned long long)got,
                       (unsigned long long)nbytes, mft__fmt_dims(b1, sizeof b1, ndim, sizes));
        goto fail;
    }
    if (nbytes > 0) idx_convert(ty, src, mft__tensor_ptr(t), numel);
    goto done;
fail:
    mft_tensor_release(t);
    t = NULL;
done:
    mft__free(stage);
    gzclose(gz);
    return t;
}

mft_tensor *mft_idx_load(const char *path) {
    static const char fn[] = "mft_idx_load";
    if (!path) {
        mft__null_arg(fn, "path");
        return NULL;
    }
    mft__scope_suspend();
    mft_tensor *t = idx_load(fn, path);
    mft__scope_resume();
    if (!t) return NULL;
    mft_tensor *r = mft__retain_result(fn, t);
    mft_tensor_release(t);
    return r;
}

/* "<dir>/<split>-<kind>-ubyte.gz" if it exists, else without ".gz". Returns a
 * mft__alloc'd string or NULL (error set). */
static char *mnist_path(const char *fn, const char *dir, const char *split, const char *kind) {
    size_t len = strlen(dir) + strlen(split) + strlen(kind) + 16;
    char *p = mft__alloc_or_err(fn, len, 1);
    if (!p) return NULL;
    snprintf(p, len, "%s/%s-%s-ubyte.gz", dir, split, kind);
    FILE *f = fopen(p, "rb");
    if (f) fclose(f);
    else p[strlen(p) - 3] = '\0';
    return p;
}

mft_status mft_mnist_load(const char *dir, const char *split, mft_tensor **images,
                          mft_tensor **labels) {
    static const char fn[] = "mft_mnist_load";
    if (images) *images = NULL;
    if (labels) *labels = NULL;
    if (!dir || !split || !images || !labels) {
        mft__null_arg(fn, !dir ? "dir" : !split ? "split" : !images ? "images" : "labels");
        return MFT_ERR_NULL; /* the call's own status; the message keeps an earlier error */
    }
    if (strcmp(split, "train") != 0 && strcmp(split, "t10k") != 0) {
        mft__set_error(MFT_ERR_INVALID, "%s: split '%s' is neither \"train\" nor \"t10k\"", fn,
                       split);
        return MFT_ERR_INVALID;
    }
    mft_status st = MFT_OK;
    char *ipath = NULL, *lpath = NULL;
    mft_tensor *img = NULL, *lab = NULL, *lab64 = NULL;
    char b1[MFT__DIMS_BUF];
    mft__scope_suspend();
    ipath = mnist_path(fn, dir, split, "images-idx3");
    lpath = ipath ? mnist_path(fn, dir, split, "labels-idx1") : NULL;
    if (!lpath) goto fail;
    img = idx_load(fn, ipath);
    if (!img) goto fail;
    if (img->dtype != MFT_U8 || img->ndim != 3) {
        mft__set_error(MFT_ERR_CORRUPT, "%s: '%s': images must be u8 of rank 3, got %s of sizes %s",
                       fn, ipath, mft_dtype_name(img->dtype),
                       mft__fmt_dims(b1, sizeof b1, img->ndim, img->sizes));
        goto fail;
    }
    lab = idx_load(fn, lpath);
    if (!lab) goto fail;
    if ((lab->dtype != MFT_U8 && lab->dtype != MFT_I32) || lab->ndim != 1) {
        mft__set_error(MFT_ERR_CORRUPT,
                       "%s: '%s': labels must be u8 or i32 of rank 1, got %s of sizes %s", fn,
                       lpath, mft_dtype_name(lab->dtype),
                       mft__fmt_dims(b1, sizeof b1, lab->ndim, lab->sizes));
        goto fail;
    }
    if (lab->sizes[0] != img->sizes[0]) {
        mft__set_error(MFT_ERR_CORRUPT, "%s: '%s' has %lld images but '%s' has %lld labels", fn,
                       ipath, (long long)img->sizes[0], lpath, (long long)lab->sizes[0]);
        goto fail;
    }
    lab64 = mft__tensor_alloc(fn, 1, lab->sizes, MFT_I64, MFT_CONTIGUOUS);
    if (!lab64) goto fail;
    {
        int64_t *o = (int64_t *)(void *)mft__tensor_ptr(lab64);
        const unsigned char *u = (const unsigned char *)mft__tensor_ptr(lab);
        const int32_t *s = (const int32_t *)(const void *)mft__tensor_ptr(lab);
        for (int64_t i = 0; i < lab->numel; i++) {
            int64_t v = lab->dtype == MFT_U8 ? (int64_t)u[i] : (int64_t)s[i];
            if (v < 0 || v > 255) {
                mft__set_error(MFT_ERR_CORRUPT, "%s: '%s': label %lld at index %lld outside 0..255",
                               fn, lpath, (long long)v, (long long)i);
                goto fail;
            }
            o[i] = v;
        }
    }
    mft__scope_resume();
    *images = mft__retain_result(fn, img);
    *labels = *images ? mft__retain_result(fn, lab64) : NULL;
    if (!*labels) {
        if (*images) { /* take the reference back from the scope, then drop it */
            mft_tensor *keep = *images;
            *images = NULL;
            mft_scope_keep(keep); /* fails only when no scope owns it: ours either way */
            mft_tensor_release(keep);
            mft__set_error(MFT_ERR_NOMEM, "%s: out of memory registering the results", fn);
        }
        st = MFT_ERR_NOMEM;
    }
    mft_tensor_release(img);
    mft_tensor_release(lab);
    mft_tensor_release(lab64);
    mft__free(ipath);
    mft__free(lpath);
    return st;
fail:
    mft__scope_resume();
    st = mft_last_error() != MFT_OK ? mft_last_error() : MFT_ERR_INTERNAL;
    mft_tensor_release(img);
    mft_tensor_release(lab);
    mft_tensor_release(lab64);
    mft__free(ipath);
    mft__free(lpath);
    return st;
}
