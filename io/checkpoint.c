/* io/checkpoint.c — checkpoints (mft/io.h): named tensors in one binary
 * file with sizes, strides, dtype and format tag, zero-padded 64-byte aligned
 * payloads and an XXH3-64 checksum of everything before it. The format is
 * specified in docs/checkpoint-format.md; this file is its only writer and
 * reader.
 *
 * Invariants: a save writes "<path>.tmp" and renames it only when complete; a
 * load reads the whole file and verifies all of it (size, magic, version,
 * checksum, every entry, every requested name/sizes/dtype, every view
 * allocated) before the first target is written, so a refused file leaves
 * every tensor untouched. */
#define _POSIX_C_SOURCE 200809L /* fileno, fsync, fstat */
#define XXH_INLINE_ALL
#include <xxhash.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "internal.h"
#include "io_internal.h"

#define CK_MAGIC "MFTCKPT\0"
#define CK_MAGIC_LEN 8
#define CK_HEADER_LEN 16 /* magic, u32 version, u32 count */
#define CK_TRAILER_LEN 8 /* u64 XXH3-64 */
#define CK_ALIGN 64      /* payload alignment in the file */
/* smallest entry: u32 name_len, 1 name byte, 4 code bytes, i64 offset, u64 bytes */
#define CK_MIN_ENTRY 25

/* dtype codes in the file (fixed by the format, independent of the enum) */
static const mft_dtype CK_DTYPES[] = {MFT_F32, MFT_F64, MFT_I32, MFT_I64, MFT_U8};
enum { CK_NDTYPES = 5 };

static int ck_dtype_code(mft_dtype dt) {
    for (int i = 0; i < CK_NDTYPES; i++)
        if (CK_DTYPES[i] == dt) return i;
    return -1;
}

static bool ck_host_le(void) {
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

/* Byte-swaps numel elements of es bytes in place (big-endian hosts only). */
static void ck_swap(void *p, int64_t numel, size_t es) {
    unsigned char *c = p;
    if (es == 1) return;
    for (int64_t i = 0; i < numel; i++, c += es)
        for (size_t a = 0, b = es - 1; a < b; a++, b--) {
            unsigned char t = c[a];
            c[a] = c[b];
            c[b] = t;
        }
}

static void ck_put_u32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void ck_put_u64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t ck_get_u32(const unsigned char *p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = v << 8 | p[i];
    return v;
}
static uint64_t ck_get_u64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* Sorting names (length, bytes) to find duplicates and look names up. */
typedef struct ck_name {
    const char *s;
    size_t len;
    int index;
} ck_name;

static int ck_name_cmp(const void *a, const void *b) {
    const ck_name *x = a, *y = b;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return memcmp(x->s, y->s, x->len);
}

/* ------------------------------------------------------------------ save */
typedef struct ck_writer {
    FILE *f;
    XXH3_state_t hash;
    uint64_t pos;
    bool failed;
    int err;
} ck_writer;

static void ck_write(ck_writer *w, const void *p, size_t n) {
    if (w->failed || n == 0) return;
    if (fwrite(p, 1, n, w->f) != n) {
        w->failed = true;
        w->err = errno;
        return;
    }
    XXH3_64bits_update(&w->hash, p, n);
    w->pos += n;
}

static void ck_write_pad(ck_writer *w) {
    static const unsigned char zeros[CK_ALIGN] = {0};
    size_t pad = (size_t)((CK_ALIGN - w->pos % CK_ALIGN) % CK_ALIGN);
    ck_write(w, zeros, pad);
}

/* Writes numel elements at p (es bytes each) in little-endian order. */
static void ck_write_elems(ck_writer *w, const void *p, int64_t numel, size_t es) {
    if (ck_host_le() || es == 1) {
        const char *c = p;
        uint64_t left = (uint64_t)numel * es;
        while (left > 0 && !w->failed) { /* chunks: fwrite sizes stay moderate */
            size_t n = left > ((size_t)1 << 30) ? ((size_t)1 << 30) : (size_t)left;
            ck_write(w, c, n);
            c += n;
            left -= n;
        }
        return;
    }
    unsigned char buf[4096];
    const unsigned char *c = p;
    int64_t per = (int64_t)(sizeof buf / es);
    for (int64_t i = 0; i < numel && !w->failed; i += per) {
        int64_t k = numel - i < per ? numel - i : per;
        memcpy(buf, c + (size_t)i * es, (size_t)k * es);
        ck_swap(buf, k, es);
        ck_write(w, buf, (size_t)k * es);
    }
}

/* Validates the save arguments; sets the error. */
static mft_status ck_check_save_args(const char *fn, const char *path, int n,
                                     const char *const *names, const mft_tensor *const *tensors) {
    if (!path) {
        mft__null_arg(fn, "path");
        return MFT_ERR_NULL;
    }
    if (n < 0) {
        mft__set_error(MFT_ERR_INVALID, "%s: n %d is negative", fn, n);
        return MFT_ERR_INVALID;
    }
    if (n > 0 && (!names || !tensors)) {
        mft__null_arg(fn, !names ? "names" : "tensors");
        return MFT_ERR_NULL;
    }
    for (int i = 0; i < n; i++) {
        if (!names[i]) {
            mft__set_error(MFT_ERR_NULL, "%s: names[%d] is NULL", fn, i);
            return MFT_ERR_NULL;
        }
        if (!tensors[i]) {
            char what[32];
            snprintf(what, sizeof what, "tensors[%d]", i);
            mft__null_arg(fn, what); /* keeps an earlier error (NULL propagation) */
            return MFT_ERR_NULL; /* the call's own status; the message keeps an earlier error */
        }
        size_t len = strlen(names[i]);
        if (len == 0 || len > MFT_CHECKPOINT_MAX_NAME) {
            mft__set_error(MFT_ERR_INVALID, "%s: names[%d] has length %zu, outside 1..%d", fn, i,
                           len, MFT_CHECKPOINT_MAX_NAME);
            return MFT_ERR_INVALID;
        }
    }
    return MFT_OK;
}

/* Names sorted for duplicate detection and lookup; NULL on NOMEM (error set).
 * n == 0 returns a dummy non-NULL pointer only if allocation succeeded. */
static ck_name *ck_sorted_names(const char *fn, int n, const char *const *names) {
    ck_name *v = mft__alloc_or_err(fn, sizeof(ck_name) * (size_t)(n > 0 ? n : 1), 16);
    if (!v) return NULL;
    for (int i = 0; i < n; i++) v[i] = (ck_name){names[i], strlen(names[i]), i};
    if (n > 1) qsort(v, (size_t)n, sizeof *v, ck_name_cmp);
    return v;
}

/* Index of the first duplicate pair in a sorted list, or -1. */
static int ck_find_duplicate(const ck_name *v, int n) {
    for (int i = 1; i < n; i++)
        if (ck_name_cmp(&v[i - 1], &v[i]) == 0) return i;
    return -1;
}

/* The format code of a tensor stored in its blocks (2: NCHW8C, 3: NCHW16C;
 * docs/checkpoint-format.md), 0 for one stored with plain strides (other
 * blocked layouts are stored as their plain copy). */
static int ck_blocked_code(const mft_tensor *t) {
    if (!t || !t->nblocks) return 0;
    return t->tag == MFT_NCHW8C ? 2 : t->tag == MFT_NCHW16C ? 3 : 0;
}

mft_status mft_save_tensors(const char *path, int n, const char *const *names,
                            const mft_tensor *const *tensors) {
    static const char fn[] = "mft_save_tensors";
    mft_status st = ck_check_save_args(fn, path, n, names, tensors);
    if (st != MFT_OK) return st;
    ck_name *sorted = ck_sorted_names(fn, n, names);
    if (!sorted) return MFT_ERR_NOMEM;
    int dup = ck_find_duplicate(sorted, n);
    if (dup >= 0) {
        int i0 = sorted[dup - 1].index, i1 = sorted[dup].index;
        mft__set_error(MFT_ERR_INVALID, "%s: name '%s' is given twice (names[%d] and names[%d])",
                       fn, sorted[dup].s, i0 < i1 ? i0 : i1, i0 < i1 ? i1 : i0);
        mft__free(sorted);
        return MFT_ERR_INVALID;
    }
    mft__free(sorted);

    char *tmp = mft__io_tmp_path(fn, path);
    if (!tmp) return mft_last_error();
    errno = 0;
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        int e = errno;
        mft__set_error(MFT_ERR_IO, "%s: cannot create '%s': %s", fn, tmp, strerror(e));
        mft__free(tmp);
        return MFT_ERR_IO;
    }
    ck_writer w;
    memset(&w, 0, sizeof w);
    w.f = f;
    XXH3_INITSTATE(&w.hash);
    XXH3_64bits_reset(&w.hash);

    unsigned char head[CK_HEADER_LEN];
    memcpy(head, CK_MAGIC, CK_MAGIC_LEN);
    uint32_t version = 1; /* version 2 only for files with blocked entries */
    for (int i = 0; i < n; i++)
        if (ck_blocked_code(tensors[i])) version = 2;
    ck_put_u32(head + 8, version);
    ck_put_u32(head + 12, (uint32_t)n);
    ck_write(&w, head, sizeof head);

    for (int i = 0; i < n && !w.failed && st == MFT_OK; i++) {
        const mft_tensor *t = tensors[i];
        mft_tensor *packed = NULL;
        const int bcode = ck_blocked_code(t);
        if (bcode) { /* in its blocks, packed (a view is packed first) */
            if (!mft_tensor_is_contiguous(t, t->tag)) {
                mft__scope_suspend();
                packed = mft_contiguous(t, t->tag);
                mft__scope_resume();
                if (!packed) {
                    st = mft__relabel_error(fn);
                    break;
                }
                t = packed;
            }
        } else if (!(t->flags & MFT__F_DENSE)) { /* gaps, broadcasts, overlaps: packed in its tag */
            /* a blocked tensor is saved as its plain NCHW copy (the format
             * stores plain strides only) and so loads plain; loading into a
             * blocked target copies into its blocks */
            const mft_format to =
                mft__is_blocked(t) || t->ndim < 3 || t->ndim > 5 ? MFT_CONTIGUOUS : t->tag;
            mft__scope_suspend();
            packed = mft_contiguous(t, to);
            mft__scope_resume();
            if (!packed) {
                st = mft__relabel_error(fn);
                break;
            }
            t = packed;
        }
        size_t es = mft__elem_size(t->dtype);
        unsigned char eh[4 + MFT_CHECKPOINT_MAX_NAME + 4 + 16 * MFT_MAX_DIMS + 16];
        size_t len = strlen(names[i]), k = 0;
        ck_put_u32(eh, (uint32_t)len);
        memcpy(eh + 4, names[i], len);
        k = 4 + len;
        eh[k++] = (unsigned char)ck_dtype_code(t->dtype);
        eh[k++] = bcode ? (unsigned char)bcode
                        : (unsigned char)(t->ndim >= 3 && t->ndim <= 5 && t->tag == MFT_CHANNELS_LAST);
        eh[k++] = (unsigned char)t->ndim;
        eh[k++] = 0;
        /* codes 2 / 3: the packed descriptor's outer strides exactly (a view's
         * dims of outer extent 1 may carry any stride; the file does not) */
        mft_layout l;
        const int64_t *strides = t->strides;
        if (bcode) {
            if (mft__layout_for_format(fn, t->ndim, t->sizes, t->tag, &l) != MFT_OK) {
                mft_tensor_release(packed);
                st = mft__relabel_error(fn);
                break;
            }
            strides = l.strides;
        }
        for (int d = 0; d < t->ndim; d++, k += 8) ck_put_u64(eh + k, (uint64_t)t->sizes[d]);
        for (int d = 0; d < t->ndim; d++, k += 8) ck_put_u64(eh + k, (uint64_t)strides[d]);
        ck_put_u64(eh + k, 0); /* storage offset */
        k += 8;
        /* a dense view covers exactly numel slots starting at its first
         * element; a packed blocked one its layout's storage, pads included */
        int64_t slots = t->numel;
        if (bcode) mft_layout_storage_numel(&l, &slots);
        ck_put_u64(eh + k, (uint64_t)slots * es);
        k += 8;
        ck_write(&w, eh, k);
        ck_write_pad(&w);
        if (slots > 0) ck_write_elems(&w, mft__tensor_ptr(t), slots, es);
        mft_tensor_release(packed);
    }
    if (st == MFT_OK && !w.failed) {
        unsigned char tr[CK_TRAILER_LEN];
        ck_put_u64(tr, XXH3_64bits_digest(&w.hash));
        if (fwrite(tr, 1, sizeof tr, f) != sizeof tr) w.failed = true, w.err = errno;
    }
    if (st == MFT_OK && !w.failed && fflush(f) != 0) w.failed = true, w.err = errno;
    if (st == MFT_OK && !w.failed && fsync(fileno(f)) != 0) w.failed = true, w.err = errno;
    if (fclose(f) != 0 && st == MFT_OK && !w.failed) w.failed = true, w.err = errno;
    if (st == MFT_OK && w.failed) {
        mft__set_error(MFT_ERR_IO, "%s: writing '%s' failed after %llu bytes: %s", fn, tmp,
                       (unsigned long long)w.pos, strerror(w.err));
        st = MFT_ERR_IO;
    }
    if (st == MFT_OK && rename(tmp, path) != 0) {
        int e = errno;
        mft__set_error(MFT_ERR_IO, "%s: cannot rename '%s' to '%s': %s", fn, tmp, path,
                       strerror(e));
        st = MFT_ERR_IO;
    }
    if (st != MFT_OK) remove(tmp);
    mft__free(tmp);
    return st;
}

/* ------------------------------------------------------------------ load */
typedef struct ck_entry {
    const char *name; /* inside the file buffer, not NUL-terminated */
    size_t name_len;
    mft_dtype dtype;
    mft_format tag;
    int ndim;
    int64_t sizes[MFT_MAX_DIMS];
    int64_t strides[MFT_MAX_DIMS];
    int64_t numel;
    int64_t slots;        /* elements in the payload (numel, or a blocked layout's storage) */
    bool blocked;         /* format code 2 / 3: layout holds the descriptor */
    mft_layout layout;
    unsigned char *payload;
    uint64_t payload_bytes;
} ck_entry;

typedef struct ck_file {
    unsigned char *buf;
    uint64_t size;
    uint32_t count;
    ck_entry *entries;
    ck_name *sorted; /* entry names sorted (ck_name.index = entry index) */
} ck_file;

static void ck_file_free(ck_file *cf) {
    mft__free(cf->buf);
    mft__free(cf->entries);
    mft__free(cf->sorted);
    memset(cf, 0, sizeof *cf);
}

static mft_status ck_corrupt(const char *fn, const char *path, uint32_t entry, const char *what) {
    mft__set_error(MFT_ERR_CORRUPT, "%s: '%s': entry %u: %s", fn, path, (unsigned)entry, what);
    return MFT_ERR_CORRUPT;
}

/* Reads the whole file into a 64-byte aligned buffer. */
static mft_status ck_read_file(const char *fn, const char *path, ck_file *cf) {
    errno = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        mft__set_error(MFT_ERR_IO, "%s: cannot open '%s': %s", fn, path, strerror(e));
        return MFT_ERR_IO;
    }
    struct stat sb;
    errno = 0;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        int e = errno;
        fclose(f);
        mft__set_error(MFT_ERR_IO, "%s: '%s' is not a regular file%s%s", fn, path,
                       e ? ": " : "", e ? strerror(e) : "");
        return MFT_ERR_IO;
    }
    long end = -1;
    if (fseek(f, 0, SEEK_END) == 0) end = ftell(f);
    if (end < 0 || fseek(f, 0, SEEK_SET) != 0) {
        int e = errno;
        fclose(f);
        mft__set_error(MFT_ERR_IO, "%s: cannot determine the size of '%s': %s", fn, path,
                       strerror(e));
        return MFT_ERR_IO;
    }
    cf->size = (uint64_t)end;
    if (cf->size > SIZE_MAX - CK_ALIGN) {
        fclose(f);
        mft__set_error(MFT_ERR_NOMEM, "%s: '%s' of %llu bytes does not fit in memory", fn, path,
                       (unsigned long long)cf->size);
        return MFT_ERR_NOMEM;
    }
    cf->buf = mft__alloc_or_err(fn, (size_t)cf->size + 1, CK_ALIGN);
    if (!cf->buf) {
        fclose(f);
        return MFT_ERR_NOMEM;
    }
    size_t got = fread(cf->buf, 1, (size_t)cf->size, f);
    int e = errno;
    bool err = ferror(f) != 0;
    bool more = !err && fgetc(f) != EOF;
    fclose(f);
    if (err || got != cf->size || more) {
        mft__set_error(MFT_ERR_IO, "%s: reading '%s' failed (%zu of %llu bytes%s): %s", fn, path,
                       got, (unsigned long long)cf->size, more ? ", file grew" : "",
                       err ? strerror(e) : "size changed while reading");
        return MFT_ERR_IO;
    }
    return MFT_OK;
}

/* Reads and verifies a whole checkpoint: on MFT_OK every entry is valid and
 * cf->sorted holds the distinct names. */
/* Every pad lane of a blocked entry's payload is zero (docs/spec.md §7.2). */
static bool ck_pads_zero(const ck_entry *e) {
    const size_t es = mft__elem_size(e->dtype);
    for (int64_t s = 0; s < e->slots; s++) {
        bool pad = false;
        if (mft_layout_is_pad(&e->layout, s, &pad) != MFT_OK) return false;
        if (!pad) continue;
        for (size_t k = 0; k < es; k++)
            if (e->payload[(size_t)s * es + k]) return false;
    }
    return true;
}

static mft_status ck_open(const char *fn, const char *path, ck_file *cf) {
    memset(cf, 0, sizeof *cf);
    mft_status st = ck_read_file(fn, path, cf);
    if (st != MFT_OK) return st;
    const unsigned char *b = cf->buf;
    const uint64_t size = cf->size;
    if (size < CK_HEADER_LEN + CK_TRAILER_LEN) {
        mft__set_error(MFT_ERR_CORRUPT,
                       "%s: '%s' is truncated or not a checkpoint: %llu bytes, at least %d needed",
                       fn, path, (unsigned long long)size, CK_HEADER_LEN + CK_TRAILER_LEN);
        return MFT_ERR_CORRUPT;
    }
    if (memcmp(b, CK_MAGIC, CK_MAGIC_LEN) != 0) {
        mft__set_error(MFT_ERR_CORRUPT,
                       "%s: '%s' is not an mft checkpoint: magic %02x %02x %02x %02x %02x %02x %02x "
                       "%02x (expected \"MFTCKPT\\0\")",
                       fn, path, b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]);
        return MFT_ERR_CORRUPT;
    }
    uint32_t version = ck_get_u32(b + 8);
    if (version < 1 || version > MFT_CHECKPOINT_VERSION) {
        mft__set_error(MFT_ERR_UNSUPPORTED,
                       "%s: '%s' has checkpoint format version %u; this library reads versions "
                       "1-%d",
                       fn, path, (unsigned)version, MFT_CHECKPOINT_VERSION);
        return MFT_ERR_UNSUPPORTED;
    }
    const uint64_t body = size - CK_TRAILER_LEN;
    uint64_t want = ck_get_u64(b + body), have = XXH3_64bits(b, (size_t)body);
    if (want != have) {
        mft__set_error(MFT_ERR_CORRUPT,
                       "%s: '%s' is corrupted or truncated: XXH3 checksum %016llx of its %llu bytes "
                       "does not match the recorded %016llx",
                       fn, path, (unsigned long long)have, (unsigned long long)body,
                       (unsigned long long)want);
        return MFT_ERR_CORRUPT;
    }
    cf->count = ck_get_u32(b + 12);
    if (cf->count > (body - CK_HEADER_LEN) / CK_MIN_ENTRY) {
        mft__set_error(MFT_ERR_CORRUPT, "%s: '%s': %u entries cannot fit in %llu bytes", fn, path,
                       (unsigned)cf->count, (unsigned long long)size);
        return MFT_ERR_CORRUPT;
    }
    size_t ne = cf->count ? cf->count : 1;
    cf->entries = mft__alloc_or_err(fn, sizeof(ck_entry) * ne, 16);
    cf->sorted = cf->entries ? mft__alloc_or_err(fn, sizeof(ck_name) * ne, 16) : NULL;
    if (!cf->sorted) return MFT_ERR_NOMEM;
    uint64_t p = CK_HEADER_LEN;
    char msg[512];
    for (uint32_t i = 0; i < cf->count; i++) {
        ck_entry *e = &cf->entries[i];
        memset(e, 0, sizeof *e);
        if (body - p < 4 + 4) return ck_corrupt(fn, path, i, "header runs past the end");
        uint32_t nl = ck_get_u32(b + p);
        if (nl == 0 || nl > MFT_CHECKPOINT_MAX_NAME) {
            snprintf(msg, sizeof msg, "name length %u outside 1..%d", (unsigned)nl,
                     MFT_CHECKPOINT_MAX_NAME);
            return ck_corrupt(fn, path, i, msg);
        }
        p += 4;
        if (body - p < (uint64_t)nl + 4) return ck_corrupt(fn, path, i, "name runs past the end");
        e->name = (const char *)b + p;
        e->name_len = nl;
        if (memchr(e->name, 0, nl)) return ck_corrupt(fn, path, i, "name contains a NUL byte");
        p += nl;
        unsigned dcode = b[p], tcode = b[p + 1], nd = b[p + 2], resv = b[p + 3];
        p += 4;
        /* format codes 2 / 3 (NCHW8C / NCHW16C, in their blocks) exist from version 2 */
        if (dcode >= CK_NDTYPES || tcode > (version >= 2 ? 3u : 1u) || nd > MFT_MAX_DIMS ||
            resv != 0 || (tcode >= 1 && (nd < 3 || nd > 5))) {
            snprintf(msg, sizeof msg,
                     "bad codes: dtype %u, format %u, ndim %u, reserved %u", dcode, tcode, nd,
                     resv);
            return ck_corrupt(fn, path, i, msg);
        }
        e->dtype = CK_DTYPES[dcode];
        static const mft_format tags[4] = {MFT_CONTIGUOUS, MFT_CHANNELS_LAST, MFT_NCHW8C,
                                           MFT_NCHW16C};
        e->tag = tags[tcode];
        e->blocked = tcode >= 2;
        e->ndim = (int)nd;
        if (body - p < 16 * (uint64_t)nd + 16)
            return ck_corrupt(fn, path, i, "sizes and strides run past the end");
        bool bad = false;
        for (int d = 0; d < e->ndim; d++) {
            uint64_t s = ck_get_u64(b + p + 8 * (uint64_t)d);
            uint64_t t = ck_get_u64(b + p + 8 * (uint64_t)(nd + d));
            if (s > INT64_MAX || t > INT64_MAX) bad = true;
            e->sizes[d] = (int64_t)(s & INT64_MAX);
            e->strides[d] = (int64_t)(t & INT64_MAX);
        }
        char b1[MFT__DIMS_BUF], b2[MFT__DIMS_BUF];
        mft__fmt_dims(b1, sizeof b1, e->ndim, e->sizes);
        mft__fmt_dims(b2, sizeof b2, e->ndim, e->strides);
        /* the rule every header obeys (Note [Geometry bound]), empty or not;
         * a blocked entry's strides are the outer strides of its packed
         * descriptor on every dim (those of outer extent 1 too: what the
         * writer writes, so a loaded file re-saves identical) */
        if (!bad && e->blocked) {
            int64_t need = 0;
            bad = mft__check_geometry(fn, e->ndim, e->sizes, NULL, e->dtype) != MFT_OK ||
                  mft__layout_for_format(fn, e->ndim, e->sizes, e->tag, &e->layout) != MFT_OK ||
                  mft_layout_storage_numel(&e->layout, &need) != MFT_OK ||
                  (uint64_t)need > (uint64_t)MFT__MAX_BYTES / mft__elem_size(e->dtype);
            for (int d = 0; !bad && d < e->ndim; d++) bad = e->strides[d] != e->layout.strides[d];
            if (bad) {
                char s1[MFT__DIMS_BUF], s2[MFT__DIMS_BUF];
                snprintf(msg, sizeof msg, "sizes %s / strides %s are not a packed %s layout",
                         mft__fmt_dims(s1, sizeof s1, e->ndim, e->sizes),
                         mft__fmt_dims(s2, sizeof s2, e->ndim, e->strides),
                         mft_format_name(e->tag));
                return ck_corrupt(fn, path, i, msg);
            }
            e->slots = need;
        }
        if (bad || (!e->blocked &&
                    mft__check_geometry(fn, e->ndim, e->sizes, e->strides, e->dtype) != MFT_OK)) {
            snprintf(msg, sizeof msg, "sizes %s / strides %s are negative or overflow", b1, b2);
            return ck_corrupt(fn, path, i, msg);
        }
        int64_t numel = 1;
        for (int d = 0; d < e->ndim; d++) numel *= e->sizes[d];
        size_t es = mft__elem_size(e->dtype);
        e->numel = numel;
        if (!e->blocked) e->slots = numel;
        p += 16 * (uint64_t)nd;
        uint64_t off = ck_get_u64(b + p), nbytes = ck_get_u64(b + p + 8);
        p += 16;
        if (off != 0 || nbytes != (uint64_t)e->slots * es) {
            snprintf(msg, sizeof msg, "storage offset %llu / payload %llu bytes, expected 0 / %llu",
                     (unsigned long long)off, (unsigned long long)nbytes,
                     (unsigned long long)e->slots * es);
            return ck_corrupt(fn, path, i, msg);
        }
        if (e->blocked) {
            /* no plain-stride checks; the pad lanes are checked below */
        } else if (numel > 0 && !mft__layout_is_dense(e->ndim, e->sizes, e->strides)) {
            snprintf(msg, sizeof msg, "strides %s are not dense for sizes %s", b2, b1);
            return ck_corrupt(fn, path, i, msg);
        }
        bool fits_c = mft__layout_order_fits(e->ndim, e->sizes, e->strides, MFT_CONTIGUOUS);
        bool fits_l = mft__layout_order_fits(e->ndim, e->sizes, e->strides, MFT_CHANNELS_LAST);
        if (!e->blocked && (e->tag == MFT_CHANNELS_LAST ? !fits_l : (fits_l && !fits_c))) {
            snprintf(msg, sizeof msg, "format tag %s contradicts strides %s for sizes %s",
                     mft_format_name(e->tag), b2, b1);
            return ck_corrupt(fn, path, i, msg);
        }
        uint64_t pad = (CK_ALIGN - p % CK_ALIGN) % CK_ALIGN;
        if (body - p < pad || body - p - pad < nbytes)
            return ck_corrupt(fn, path, i, "payload runs past the end");
        for (uint64_t k = 0; k < pad; k++)
            if (b[p + k] != 0) return ck_corrupt(fn, path, i, "non-zero alignment padding");
        p += pad;
        e->payload = cf->buf + p;
        e->payload_bytes = nbytes;
        if (e->blocked && !ck_pads_zero(e)) return ck_corrupt(fn, path, i, "a pad lane is not zero");
        p += nbytes;
        cf->sorted[i] = (ck_name){e->name, e->name_len, (int)i};
    }
    if (p != body) {
        mft__set_error(MFT_ERR_CORRUPT, "%s: '%s': %llu unexpected bytes after the last of %u entries",
                       fn, path, (unsigned long long)(body - p), (unsigned)cf->count);
        return MFT_ERR_CORRUPT;
    }
    if (cf->count > 1) qsort(cf->sorted, cf->count, sizeof *cf->sorted, ck_name_cmp);
    int dup = ck_find_duplicate(cf->sorted, (int)cf->count);
    if (dup >= 0) {
        mft__set_error(MFT_ERR_CORRUPT, "%s: '%s': name '%.*s' appears twice", fn, path,
                       (int)cf->sorted[dup].len, cf->sorted[dup].s);
        return MFT_ERR_CORRUPT;
    }
    if (!ck_host_le())
        for (uint32_t i = 0; i < cf->count; i++)
            ck_swap(cf->entries[i].payload, cf->entries[i].slots,
                    mft__elem_size(cf->entries[i].dtype));
    return MFT_OK;
}

static const ck_entry *ck_lookup(const ck_file *cf, const char *name) {
    ck_name key = {name, strlen(name), 0};
    const ck_name *hit = cf->count ? bsearch(&key, cf->sorted, cf->count, sizeof key, ck_name_cmp)
                                   : NULL;
    return hit ? &cf->entries[hit->index] : NULL;
}

mft_status mft_load_tensors_into(const char *path, int n, const char *const *names,
                                 mft_tensor *const *tensors) {
    static const char fn[] = "mft_load_tensors_into";
    mft_status st = ck_check_save_args(fn, path, n, names, (const mft_tensor *const *)tensors);
    if (st != MFT_OK) return st;
    ck_name *req = ck_sorted_names(fn, n, names);
    if (!req) return MFT_ERR_NOMEM;
    int dup = ck_find_duplicate(req, n);
    if (dup >= 0) {
        int i0 = req[dup - 1].index, i1 = req[dup].index;
        mft__set_error(MFT_ERR_INVALID, "%s: name '%s' is requested twice (names[%d] and names[%d])",
                       fn, req[dup].s, i0 < i1 ? i0 : i1, i0 < i1 ? i1 : i0);
        mft__free(req);
        return MFT_ERR_INVALID;
    }
    mft__free(req);
    for (int i = 0; i < n; i++)
        if ((st = mft__check_writable(fn, tensors[i])) != MFT_OK) return st;

    ck_file cf;
    mft_tensor **src = NULL;
    const ck_entry **match = NULL;
    char b1[MFT__DIMS_BUF], b2[MFT__DIMS_BUF];
    st = ck_open(fn, path, &cf);
    if (st != MFT_OK) goto done;
    src = mft__alloc_or_err(fn, sizeof(mft_tensor *) * (size_t)(n > 0 ? n : 1), 16);
    if (src) memset(src, 0, sizeof(mft_tensor *) * (size_t)(n > 0 ? n : 1));
    match = src ? mft__alloc_or_err(fn, sizeof(ck_entry *) * (size_t)(n > 0 ? n : 1), 16) : NULL;
    if (!match) {
        st = MFT_ERR_NOMEM;
        goto done;
    }
    for (int i = 0; i < n; i++) {
        const mft_tensor *t = tensors[i];
        const ck_entry *e = match[i] = ck_lookup(&cf, names[i]);
        if (!e) {
            mft__set_error(MFT_ERR_INVALID, "%s: '%s' has no entry named '%s' (%u entries)", fn,
                           path, names[i], (unsigned)cf.count);
            st = MFT_ERR_INVALID;
        } else if (e->dtype != t->dtype) {
            mft__set_error(MFT_ERR_DTYPE, "%s: '%s': entry '%s' is %s, the target is %s", fn, path,
                           names[i], mft_dtype_name(e->dtype), mft_dtype_name(t->dtype));
            st = MFT_ERR_DTYPE;
        } else {
            bool same = e->ndim == t->ndim;
            for (int d = 0; same && d < t->ndim; d++) same = e->sizes[d] == t->sizes[d];
            if (!same) {
                mft__set_error(MFT_ERR_SHAPE,
                               "%s: '%s': entry '%s' has sizes %s, the target has sizes %s", fn,
                               path, names[i], mft__fmt_dims(b1, sizeof b1, e->ndim, e->sizes),
                               mft__fmt_dims(b2, sizeof b2, t->ndim, t->sizes));
                st = MFT_ERR_SHAPE;
            }
        }
        if (st != MFT_OK) goto done;
    }
    /* every source view exists before the first write */
    mft__scope_suspend();
    for (int i = 0; i < n && st == MFT_OK; i++) {
        const ck_entry *e = match[i];
        src[i] = e->blocked ? mft_from_blob_layout(e->payload, (size_t)e->payload_bytes,
                                                   &e->layout, 0, e->dtype, NULL, NULL)
                            : mft_from_blob(e->payload, (size_t)e->payload_bytes, e->ndim,
                                            e->sizes, e->strides, 0, e->dtype, NULL, NULL);
        if (!src[i]) st = mft__relabel_error(fn);
    }
    mft__scope_resume();
    if (st == MFT_OK) {
        for (int i = 0; i < n; i++) {
            mft_status cst = mft_copy_(tensors[i], src[i]);
            if (cst != MFT_OK && st == MFT_OK) st = mft__relabel_error(fn); /* cannot happen */
        }
    }
done:
    if (src)
        for (int i = 0; i < n; i++) mft_tensor_release(src[i]);
    mft__free(src);
    mft__free((void *)match);
    ck_file_free(&cf);
    return st;
}

void mft_checkpoint_free_list(int n, char **names, mft_tensor **tensors) {
    for (int i = 0; i < n; i++) {
        if (names) mft__free(names[i]);
        if (tensors) mft_tensor_release(tensors[i]);
    }
    mft__free(names);
    mft__free(tensors);
}

mft_status mft_load_tensors(const char *path, int *n, char ***names, mft_tensor ***tensors) {
    static const char fn[] = "mft_load_tensors";
    if (n) *n = 0;
    if (names) *names = NULL;
    if (tensors) *tensors = NULL;
    if (!path || !n || !names || !tensors) {
        mft__null_arg(fn, !path ? "path" : !n ? "n" : !names ? "names" : "tensors");
        return MFT_ERR_NULL; /* the call's own status; the message keeps an earlier error */
    }
    ck_file cf;
    mft_status st = ck_open(fn, path, &cf);
    char **nv = NULL;
    mft_tensor **tv = NULL;
    int made = 0;
    if (st != MFT_OK) goto done;
    if (cf.count > (uint32_t)INT32_MAX) {
        mft__set_error(MFT_ERR_CORRUPT, "%s: '%s': %u entries", fn, path, (unsigned)cf.count);
        st = MFT_ERR_CORRUPT;
        goto done;
    }
    if (cf.count > 0) {
        nv = mft__alloc_or_err(fn, sizeof(char *) * cf.count, 16);
        tv = nv ? mft__alloc_or_err(fn, sizeof(mft_tensor *) * cf.count, 16) : NULL;
        if (!tv) {
            st = MFT_ERR_NOMEM;
            goto done;
        }
    }
    mft__scope_suspend();
    for (; made < (int)cf.count; made++) {
        const ck_entry *e = &cf.entries[made];
        nv[made] = mft__alloc_or_err(fn, e->name_len + 1, 1);
        tv[made] = !nv[made]    ? NULL
                   : e->blocked ? mft__tensor_alloc_layout(fn, &e->layout, e->dtype)
                                : mft__tensor_alloc_strided(fn, e->ndim, e->sizes, e->strides,
                                                            e->dtype);
        if (!tv[made]) {
            mft__free(nv[made]);
            st = MFT_ERR_NOMEM;
            break;
        }
        memcpy(nv[made], e->name, e->name_len);
        nv[made][e->name_len] = '\0';
        if (e->payload_bytes) memcpy(mft__tensor_ptr(tv[made]), e->payload, e->payload_bytes);
        mft__tensor_set_tag_from(tv[made], e->tag);
    }
    mft__scope_resume();
done:
    if (st != MFT_OK) {
        mft_checkpoint_free_list(made, nv, tv);
    } else {
        *n = (int)cf.count;
        *names = nv;
        *tensors = tv;
    }
    ck_file_free(&cf);
    return st;
}
