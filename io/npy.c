/* io/npy.c — NumPy .npy files (mft/npy.h): the writer (mft_save_npy) and the
 * reader (mft_load_npy) of format versions 1.0-3.0 (docs/spec.md §8.2 records
 * the decisions; numpy/lib/format.py of NumPy 1.24 is the reference the
 * facts come from).
 *
 * File: "\x93NUMPY", major, minor, the header length (u16 LE for 1.0, u32 LE
 * for 2.0 / 3.0), the header — a Python dict literal with the keys descr,
 * fortran_order and shape, padded with spaces and a final newline so the data
 * starts at a multiple of 64 — then the data, C or Fortran order.
 *
 * Invariants: a save writes "<path>.tmp" and renames it only when complete; a
 * load parses the whole header and checks the file's length against shape x
 * itemsize before it allocates, reads the data once into the tensor's own
 * storage and never copies it after (a big-endian file is swapped in place). */
#define _POSIX_C_SOURCE 200809L /* fileno, fsync, fstat */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "internal.h"
#include "io_util.h"
#include "mft/npy.h"

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
#define NPY_ALIGN 64         /* data offset alignment NumPy's writer uses */
#define NPY_GROWTH_DIGITS 21 /* NumPy's spare room after the header for a growing axis */

/* ------------------------------------------------------------------ dtypes */
/* The type letter and size NumPy's descr uses for each mft dtype. */
static const struct npy_kind {
    mft_dtype dtype;
    char letter;
    char size;
} NPY_KINDS[] = {
    {MFT_F32, 'f', '4'}, {MFT_F64, 'f', '8'}, {MFT_I32, 'i', '4'},
    {MFT_I64, 'i', '8'}, {MFT_U8, 'u', '1'},
};
enum { NPY_NKINDS = sizeof NPY_KINDS / sizeof NPY_KINDS[0] };

/* descr for dt in host byte order ("<f4", "|u1"); buf holds 4 bytes. */
static void npy_descr_of(mft_dtype dt, char *buf) {
    for (int i = 0; i < NPY_NKINDS; i++) {
        if (NPY_KINDS[i].dtype != dt) continue;
        buf[0] = NPY_KINDS[i].size == '1' ? '|' : !mft__io_host_le() ? '>' : '<';
        buf[1] = NPY_KINDS[i].letter;
        buf[2] = NPY_KINDS[i].size;
        buf[3] = '\0';
        return;
    }
    buf[0] = '\0';
}

/* The dtype of a descr string, and whether its byte order is the host's
 * opposite (a swap after the read). '|' only for one-byte types. */
static bool npy_dtype_of(const char *s, size_t n, mft_dtype *dt, bool *swap) {
    if (n != 3 || (s[0] != '<' && s[0] != '>' && s[0] != '|')) return false;
    for (int i = 0; i < NPY_NKINDS; i++) {
        if (s[1] != NPY_KINDS[i].letter || s[2] != NPY_KINDS[i].size) continue;
        if (s[0] == '|' && NPY_KINDS[i].size != '1') return false;
        *dt = NPY_KINDS[i].dtype;
        *swap = NPY_KINDS[i].size != '1' && (s[0] == '>') != !mft__io_host_le();
        return true;
    }
    return false;
}

/* ------------------------------------------------------------------ errors */
/* A piece of the header for a message: at most 40 bytes, non-printable bytes
 * as '?'. */
static const char *npy_shown(char *buf, size_t len, const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n && i < 40 && k + 1 < len; i++)
        buf[k++] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
    if (n > 40 && k + 4 < len) memcpy(buf + k, "...", 3), k += 3;
    buf[k] = '\0';
    return buf;
}

/* ------------------------------------------------------------------ header parser
 * Note [npy header grammar]
 * NumPy evaluates the header with ast.literal_eval and then checks that the
 * dict has exactly the three keys. mft accepts the subset of Python literal
 * syntax a dict of those three keys can be written in:
 *   header := ws '{' ws entry (ws ',' ws entry)* [ws ','] ws '}' ws
 *   entry  := string ws ':' ws value
 *   string := '...' or "..." with no backslash
 *   descr: a string; fortran_order: True | False;
 *   shape: '(' ')' | '(' int ws ',' ws ')' | '(' int (ws ',' ws int)+ [ws ','] ws ')'
 *   int    := 0 | [1-9][0-9]*, an 'L' suffix allowed in versions 1.0 / 2.0
 *             (Python 2 writers; NumPy's reader strips it too)
 * ws is spaces, tabs, CR and LF. A key given twice is refused (Python would
 * keep the last one silently). */
typedef struct npy_header {
    mft_dtype dtype;
    bool swap, fortran;
    int ndim;
    int64_t shape[MFT_MAX_DIMS];
} npy_header;

typedef struct npy_parser {
    const char *p, *end;
    const char *fn, *path;
    int major;
} npy_parser;

static void npy_ws(npy_parser *ps) {
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

static bool npy_accept(npy_parser *ps, char c) {
    npy_ws(ps);
    if (ps->p < ps->end && *ps->p == c) {
        ps->p++;
        return true;
    }
    return false;
}

/* What is at the cursor, for "expected X at byte K, found ...". */
static mft_status npy_syntax(npy_parser *ps, const char *header, const char *expected) {
    char shown[64];
    npy_ws(ps);
    return mft__io_fail(MFT_ERR_CORRUPT, ps->fn, ps->path,
                    "header: expected %s at byte %lld of the dict, found '%s'", expected,
                    (long long)(ps->p - header),
                    ps->p < ps->end ? npy_shown(shown, sizeof shown, ps->p, (size_t)(ps->end - ps->p))
                                    : "the end");
}

static bool npy_string(npy_parser *ps, const char **s, size_t *n) {
    npy_ws(ps);
    if (ps->p >= ps->end || (*ps->p != '\'' && *ps->p != '"')) return false;
    const char q = *ps->p;
    const char *start = ps->p + 1, *c = start;
    while (c < ps->end && *c != q && *c != '\\' && *c != '\n') c++;
    if (c >= ps->end || *c != q) return false;
    *s = start;
    *n = (size_t)(c - start);
    ps->p = c + 1;
    return true;
}

static bool npy_is_ident(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

static mft_status npy_parse_descr(npy_parser *ps, const char *header, npy_header *h) {
    const char *s;
    size_t n;
    npy_ws(ps);
    if (ps->p < ps->end && *ps->p == '[')
        return mft__io_fail(MFT_ERR_UNSUPPORTED, ps->fn, ps->path,
                        "descr is a list: a structured dtype, which mft does not support");
    if (!npy_string(ps, &s, &n)) return npy_syntax(ps, header, "a string for descr");
    if (!npy_dtype_of(s, n, &h->dtype, &h->swap)) {
        char shown[64];
        return mft__io_fail(MFT_ERR_UNSUPPORTED, ps->fn, ps->path,
                        "descr '%s' is not supported (mft reads '<f4' '<f8' '<i4' '<i8' '|u1' "
                        "'<u1', and '>' byte order)",
                        npy_shown(shown, sizeof shown, s, n));
    }
    return MFT_OK;
}

static mft_status npy_parse_bool(npy_parser *ps, const char *header, npy_header *h) {
    npy_ws(ps);
    size_t left = (size_t)(ps->end - ps->p);
    for (int v = 0; v < 2; v++) {
        const char *word = v ? "True" : "False";
        size_t n = strlen(word);
        if (left >= n && memcmp(ps->p, word, n) == 0 && (left == n || !npy_is_ident(ps->p[n]))) {
            h->fortran = v;
            ps->p += n;
            return MFT_OK;
        }
    }
    return npy_syntax(ps, header, "True or False for fortran_order");
}

/* One shape entry: a non-negative decimal int64. */
static mft_status npy_parse_int(npy_parser *ps, const char *header, int64_t *out) {
    npy_ws(ps);
    const char *c = ps->p;
    if (c < ps->end && *c == '-') {
        const char *e = c + 1;
        while (e < ps->end && *e >= '0' && *e <= '9') e++;
        char shown[64];
        return mft__io_fail(MFT_ERR_CORRUPT, ps->fn, ps->path, "header: shape entry '%s' is negative",
                        npy_shown(shown, sizeof shown, c, (size_t)(e - c)));
    }
    if (c >= ps->end || *c < '0' || *c > '9') return npy_syntax(ps, header, "an integer in shape");
    if (*c == '0' && c + 1 < ps->end && c[1] >= '0' && c[1] <= '9')
        return npy_syntax(ps, header, "an integer without leading zeros in shape");
    int64_t v = 0;
    for (; c < ps->end && *c >= '0' && *c <= '9'; c++) {
        if (v > (INT64_MAX - (*c - '0')) / 10)
            return mft__io_fail(MFT_ERR_CORRUPT, ps->fn, ps->path,
                            "header: shape entry '%.*s...' exceeds int64", (int)(c - ps->p + 1),
                            ps->p);
        v = v * 10 + (*c - '0');
    }
    if (ps->major < 3 && c < ps->end && *c == 'L') c++;
    if (c < ps->end && npy_is_ident(*c)) {
        ps->p = c;
        return npy_syntax(ps, header, "',' or ')' after a shape entry");
    }
    ps->p = c;
    *out = v;
    return MFT_OK;
}

static mft_status npy_parse_shape(npy_parser *ps, const char *header, npy_header *h) {
    mft_status st;
    if (!npy_accept(ps, '(')) return npy_syntax(ps, header, "a tuple '(' for shape");
    h->ndim = 0;
    if (npy_accept(ps, ')')) return MFT_OK;
    for (;;) {
        int64_t v = 0;
        if ((st = npy_parse_int(ps, header, &v)) != MFT_OK) return st;
        if (h->ndim == MFT_MAX_DIMS)
            return mft__io_fail(MFT_ERR_UNSUPPORTED, ps->fn, ps->path,
                            "shape has more than %d dims (MFT_MAX_DIMS)", MFT_MAX_DIMS);
        h->shape[h->ndim++] = v;
        if (npy_accept(ps, ')')) {
            if (h->ndim == 1) /* "(5)" is an int in Python, not a tuple */
                return mft__io_fail(MFT_ERR_CORRUPT, ps->fn, ps->path,
                                "header: shape (%lld) is not a tuple (a 1-dim shape is written "
                                "(%lld,))",
                                (long long)v, (long long)v);
            return MFT_OK;
        }
        if (!npy_accept(ps, ',')) return npy_syntax(ps, header, "',' or ')' in shape");
        if (npy_accept(ps, ')')) return MFT_OK;
    }
}

static mft_status npy_parse_header(const char *fn, const char *path, int major, const char *header,
                                   size_t len, npy_header *h) {
    static const char *const keys[3] = {"descr", "fortran_order", "shape"};
    npy_parser ps = {header, header + len, fn, path, major};
    bool seen[3] = {false, false, false};
    mft_status st;
    if (!npy_accept(&ps, '{')) return npy_syntax(&ps, header, "'{' (the header is a dict)");
    if (!npy_accept(&ps, '}')) {
        for (;;) {
            const char *k;
            size_t n;
            if (!npy_string(&ps, &k, &n)) return npy_syntax(&ps, header, "a quoted key");
            int which = -1;
            for (int i = 0; i < 3; i++)
                if (strlen(keys[i]) == n && memcmp(keys[i], k, n) == 0) which = i;
            char shown[64];
            if (which < 0)
                return mft__io_fail(MFT_ERR_CORRUPT, fn, path,
                                "header: unknown key '%s' (a .npy header has exactly the keys "
                                "descr, fortran_order and shape)",
                                npy_shown(shown, sizeof shown, k, n));
            if (seen[which])
                return mft__io_fail(MFT_ERR_CORRUPT, fn, path, "header: key '%s' appears twice",
                                keys[which]);
            seen[which] = true;
            if (!npy_accept(&ps, ':')) return npy_syntax(&ps, header, "':' after a key");
            st = which == 0   ? npy_parse_descr(&ps, header, h)
                 : which == 1 ? npy_parse_bool(&ps, header, h)
                              : npy_parse_shape(&ps, header, h);
            if (st != MFT_OK) return st;
            if (npy_accept(&ps, '}')) break;
            if (!npy_accept(&ps, ',')) return npy_syntax(&ps, header, "',' or '}' after a value");
            if (npy_accept(&ps, '}')) break;
        }
    }
    npy_ws(&ps);
    if (ps.p != ps.end) return npy_syntax(&ps, header, "only padding after the dict");
    for (int i = 0; i < 3; i++)
        if (!seen[i])
            return mft__io_fail(MFT_ERR_CORRUPT, fn, path,
                            "header: key '%s' is missing (a .npy header has exactly the keys "
                            "descr, fortran_order and shape)",
                            keys[i]);
    return MFT_OK;
}

/* ------------------------------------------------------------------ load */
/* fopen with the error set: "cannot open" (mode "rb") / "cannot create". */
static FILE *npy_open(const char *fn, const char *path, const char *mode) {
    errno = 0;
    FILE *f = fopen(path, mode);
    if (!f) {
        int e = errno;
        mft__set_error(MFT_ERR_IO, "%s: cannot %s '%s': %s", fn,
                       mode[0] == 'r' ? "open" : "create", path, strerror(e));
    }
    return f;
}

static uint32_t npy_le(const unsigned char *p, int n) {
    uint32_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* Reads exactly n bytes; false on a short read or error. */
static bool npy_read(FILE *f, void *buf, size_t n) {
    char *c = buf;
    while (n > 0) {
        size_t chunk = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n;
        if (fread(c, 1, chunk, f) != chunk) return false;
        c += chunk;
        n -= chunk;
    }
    return true;
}

/* The tag's provenance (mft_tensor_provenance, mft-explain): declared by the
 * caller's as = CHANNELS_LAST, or inferred from the array's own strides (C or
 * Fortran order); the tag itself is already set. */
static void npy_record(mft_tensor *t, bool cl) {
    mft__decision d =
        mft__rule_decide(cl ? MFT__RULE_FACTORY : MFT__RULE_STRIDED,
                         cl ? "load_npy (declared: the file read as the physical N,...,C array)"
                            : "load_npy (inferred from the file's strides)",
                         0, NULL, cl ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS, 0);
    mft__rule_record(t, &d);
}

/* Sizes and strides of the result: the array as it is (C or Fortran order),
 * or the logical N,C,... view of a physical N,...,C array. C-order and
 * channels-last strides are the library's packed strides of the format
 * (PyTorch's, also for empty arrays). */
static void npy_geometry(const npy_header *h, bool channels_last, int64_t *sizes, int64_t *strides) {
    const int nd = h->ndim;
    if (h->fortran) { /* column-major: dim 0 fastest */
        int64_t step = 1;
        for (int d = 0; d < nd; d++) {
            sizes[d] = h->shape[d];
            strides[d] = step;
            step *= h->shape[d] > 0 ? h->shape[d] : 1;
        }
        return;
    }
    for (int d = 0; d < nd; d++) sizes[d] = h->shape[d];
    if (channels_last) { /* file (N, S1..Sk, C) -> logical (N, C, S1..Sk) */
        sizes[1] = h->shape[nd - 1];
        for (int d = 2; d < nd; d++) sizes[d] = h->shape[d - 1];
    }
    mft__format_strides(nd, sizes, channels_last ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS, strides);
}

static mft_tensor *npy_load(const char *fn, const char *path, mft_format as) {
    char b1[MFT__DIMS_BUF];
    FILE *f = npy_open(fn, path, "rb");
    if (!f) return NULL;
    mft_tensor *t = NULL;
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        mft__io_fail(MFT_ERR_IO, fn, path, "not a regular file");
        goto done;
    }
    const uint64_t size = (uint64_t)sb.st_size;
    unsigned char pre[12];
    if (size < 10 || !npy_read(f, pre, 8)) {
        mft__io_fail(MFT_ERR_CORRUPT, fn, path, "%llu bytes: too short for a .npy preamble",
                 (unsigned long long)size);
        goto done;
    }
    if (memcmp(pre, NPY_MAGIC, NPY_MAGIC_LEN) != 0) {
        mft__io_fail(MFT_ERR_CORRUPT, fn, path, "not a .npy file (the magic \\x93NUMPY is missing)");
        goto done;
    }
    const int major = pre[6], minor = pre[7];
    if (major < 1 || major > 3 || minor != 0) {
        mft__io_fail(MFT_ERR_UNSUPPORTED, fn, path, "format version %d.%d (mft reads 1.0, 2.0, 3.0)",
                 major, minor);
        goto done;
    }
    const int lenbytes = major == 1 ? 2 : 4;
    const uint64_t pre_len = 8 + (uint64_t)lenbytes;
    if (size < pre_len || !npy_read(f, pre + 8, (size_t)lenbytes)) {
        mft__io_fail(MFT_ERR_CORRUPT, fn, path, "%llu bytes: too short for a version %d.0 preamble",
                 (unsigned long long)size, major);
        goto done;
    }
    const uint64_t hlen = npy_le(pre + 8, lenbytes);
    if (hlen > MFT_NPY_MAX_HEADER) {
        mft__io_fail(MFT_ERR_UNSUPPORTED, fn, path,
                 "header of %llu bytes exceeds NumPy's %d-byte safety limit",
                 (unsigned long long)hlen, MFT_NPY_MAX_HEADER);
        goto done;
    }
    if (pre_len + hlen > size) {
        mft__io_fail(MFT_ERR_CORRUPT, fn, path,
                 "header length %llu runs past the end of the %llu-byte file",
                 (unsigned long long)hlen, (unsigned long long)size);
        goto done;
    }
    char header[MFT_NPY_MAX_HEADER];
    if (!npy_read(f, header, (size_t)hlen)) {
        mft__io_fail(MFT_ERR_IO, fn, path, "reading the %llu-byte header failed",
                 (unsigned long long)hlen);
        goto done;
    }
    npy_header h;
    memset(&h, 0, sizeof h);
    if (npy_parse_header(fn, path, major, header, (size_t)hlen, &h) != MFT_OK) goto done;

    const bool cl = as == MFT_CHANNELS_LAST;
    if (cl && (h.ndim < 3 || h.ndim > 5)) {
        mft__io_fail(MFT_ERR_FORMAT, fn, path,
                 "as CHANNELS_LAST needs the physical array (N,L,C), (N,H,W,C) or (N,D,H,W,C); "
                 "the file's shape %s has rank %d",
                 mft__fmt_dims(b1, sizeof b1, h.ndim, h.shape), h.ndim);
        goto done;
    }
    if (cl && h.fortran) {
        mft__io_fail(MFT_ERR_FORMAT, fn, path,
                 "as CHANNELS_LAST needs a C-order file; this one is fortran_order (its bytes "
                 "are not the physical (N,...,C) array)");
        goto done;
    }
    /* the element count under Note [Geometry bound] (size-0 dims count as 1) */
    const size_t es = mft__elem_size(h.dtype);
    int64_t bound = 1, numel = 1;
    for (int d = 0; d < h.ndim; d++) {
        int64_t s = h.shape[d] > 0 ? h.shape[d] : 1;
        if (bound > MFT__MAX_BYTES / (int64_t)es / s) {
            mft__io_fail(MFT_ERR_CORRUPT, fn, path,
                     "shape %s of %s is beyond the 2^59-byte geometry bound (docs/spec.md 1.1)",
                     mft__fmt_dims(b1, sizeof b1, h.ndim, h.shape), mft_dtype_name(h.dtype));
            goto done;
        }
        bound *= s;
        numel *= h.shape[d];
    }
    const uint64_t nbytes = (uint64_t)numel * es, data_off = pre_len + hlen;
    if (size - data_off != nbytes) {
        mft__io_fail(MFT_ERR_CORRUPT, fn, path,
                 "%llu bytes of data after the header, shape %s of %s needs %llu (%s)",
                 (unsigned long long)(size - data_off),
                 mft__fmt_dims(b1, sizeof b1, h.ndim, h.shape), mft_dtype_name(h.dtype),
                 (unsigned long long)nbytes,
                 size - data_off < nbytes ? "truncated" : "trailing bytes");
        goto done;
    }
    int64_t sizes[MFT_MAX_DIMS], strides[MFT_MAX_DIMS];
    npy_geometry(&h, cl, sizes, strides);
    t = mft__tensor_alloc_strided(fn, h.ndim, sizes, strides, h.dtype);
    if (!t) goto done;
    if (nbytes > 0 && !npy_read(f, mft__tensor_ptr(t), (size_t)nbytes)) {
        mft__io_fail(MFT_ERR_IO, fn, path, "reading %llu bytes of data failed",
                 (unsigned long long)nbytes);
        mft_tensor_release(t);
        t = NULL;
        goto done;
    }
    if (h.swap) mft__io_swap(mft__tensor_ptr(t), numel, es);
    if (cl)
        mft__tensor_declare(t, MFT_CHANNELS_LAST);
    else
        mft__tensor_set_tag_from(t, MFT_CONTIGUOUS);
    npy_record(t, cl);
done:
    fclose(f);
    return t;
}

mft_tensor *mft_load_npy(const char *path, mft_format as) {
    static const char fn[] = "mft_load_npy";
    if (!path) {
        mft__null_arg(fn, "path");
        return NULL;
    }
    if (as != MFT_CONTIGUOUS && as != MFT_PRESERVE && as != MFT_CHANNELS_LAST) {
        mft__set_error(MFT_ERR_FORMAT,
                       "%s: as %s (%d): a .npy file loads as CONTIGUOUS / PRESERVE (the array as "
                       "it is) or CHANNELS_LAST (a physical N,...,C array)",
                       fn, mft_format_name(as), (int)as);
        return NULL;
    }
    mft__scope_suspend();
    mft_tensor *t = npy_load(fn, path, as);
    mft__scope_resume();
    if (!t) return NULL;
    mft_tensor *r = mft__retain_result(fn, t);
    mft_tensor_release(t);
    return r;
}

/* ------------------------------------------------------------------ save */
/* What goes into the file: nbytes from src's first element as the array of
 * shape[0..ndim), C order unless fortran. copy: a packed copy of the
 * caller's tensor (src then points at it), released after the write. */
typedef struct npy_plan {
    const mft_tensor *src;
    mft_tensor *copy;
    bool fortran; /* shape is logical, the data column-major */
    int ndim;
    int64_t shape[MFT_MAX_DIMS + 1];
    uint64_t nbytes;
} npy_plan;

/* A packed copy of t in fmt into plan->copy (scopes suspended). */
static mft_status npy_pack(const char *fn, const mft_tensor *t, mft_format fmt, npy_plan *plan) {
    mft__scope_suspend();
    plan->copy = mft__contiguous(fn, t, fmt);
    mft__scope_resume();
    if (!plan->copy) return mft_last_error();
    plan->src = plan->copy;
    return MFT_OK;
}

/* The physical array of a packed NCHW8C / NCHW16C tensor: (N, C1, spatial,
 * C0), its whole storage span, pad lanes included. */
static void npy_plan_blocked(const mft_tensor *t, npy_plan *plan) {
    const int nd = t->ndim;
    const int64_t c0 = t->block_size[0];
    plan->ndim = nd + 1;
    plan->shape[0] = t->sizes[0];
    plan->shape[1] = t->padded[1] / c0;
    for (int d = 2; d < nd; d++) plan->shape[d] = t->sizes[d];
    plan->shape[nd] = c0;
    int64_t n = 1;
    for (int d = 0; d <= nd; d++) n *= plan->shape[d];
    plan->nbytes = (uint64_t)n * mft__elem_size(t->dtype);
}

/* Packed column-major (dim 0 fastest; size-1 dims skipped), non-empty. */
static bool npy_column_major(const mft_tensor *t) {
    int64_t step = 1;
    if (t->numel == 0) return false;
    for (int d = 0; d < t->ndim; d++) {
        if (t->sizes[d] == 1) continue;
        if (t->strides[d] != step) return false;
        step *= t->sizes[d];
    }
    return true;
}

/* The physical array of a dense plain tensor: its dims slowest first (the
 * tag's order when the strides fit it, which settles size-1 ties); a
 * column-major tensor that is not C-contiguous keeps its logical shape with
 * fortran_order True, as np.save writes such an array. */
static void npy_plan_dense(const mft_tensor *t, npy_plan *plan) {
    const int nd = t->ndim;
    int order[MFT_MAX_DIMS];
    const bool tag_fits =
        nd >= 3 && nd <= 5 && mft__layout_order_fits(nd, t->sizes, t->strides, t->tag);
    plan->nbytes = (uint64_t)t->numel * mft__elem_size(t->dtype);
    plan->ndim = nd;
    if (!(tag_fits && t->tag == MFT_CHANNELS_LAST) && !mft_tensor_is_contiguous(t, MFT_CONTIGUOUS) &&
        npy_column_major(t)) {
        plan->fortran = true;
        memcpy(plan->shape, t->sizes, sizeof(int64_t) * (size_t)nd);
        return;
    }
    if (tag_fits) {
        mft__format_order(nd, t->tag, order);
    } else if (mft__layout_order_fits(nd, t->sizes, t->strides, MFT_CONTIGUOUS) || nd < 2) {
        for (int d = 0; d < nd; d++) order[d] = d;
    } else {
        int m2m[MFT_MAX_DIMS];
        mft_minor_to_major_from_strides(nd, t->sizes, t->strides, m2m);
        for (int d = 0; d < nd; d++) order[d] = m2m[nd - 1 - d];
    }
    for (int d = 0; d < nd; d++) plan->shape[d] = t->sizes[order[d]];
}

static mft_status npy_make_plan(const char *fn, const mft_tensor *t, unsigned flags,
                                npy_plan *plan) {
    memset(plan, 0, sizeof *plan);
    plan->src = t;
    mft_status st;
    if (flags & MFT_NPY_LOGICAL) {
        if (!mft_tensor_is_contiguous(t, MFT_CONTIGUOUS) &&
            (st = npy_pack(fn, t, MFT_CONTIGUOUS, plan)) != MFT_OK)
            return st;
        plan->ndim = t->ndim;
        memcpy(plan->shape, t->sizes, sizeof(int64_t) * (size_t)t->ndim);
        plan->nbytes = (uint64_t)t->numel * mft__elem_size(t->dtype);
        return MFT_OK;
    }
    if (mft__is_blocked(t)) {
        if (t->tag != MFT_NCHW8C && t->tag != MFT_NCHW16C) {
            mft__set_error(MFT_ERR_FORMAT,
                           "%s: MFT_NPY_PHYSICAL of a %s tensor: only NCHW8C / NCHW16C blocks "
                           "are written as their array; use MFT_NPY_LOGICAL",
                           fn, mft_format_name(t->tag));
            return MFT_ERR_FORMAT;
        }
        if (!mft_tensor_is_contiguous(t, t->tag) && (st = npy_pack(fn, t, t->tag, plan)) != MFT_OK)
            return st;
        npy_plan_blocked(plan->src, plan);
        return MFT_OK;
    }
    if (!(t->flags & MFT__F_DENSE) && t->numel > 0) {
        const mft_format to = t->ndim >= 3 && t->ndim <= 5 ? t->tag : MFT_CONTIGUOUS;
        if ((st = npy_pack(fn, t, to, plan)) != MFT_OK) return st;
    }
    npy_plan_dense(plan->src, plan);
    return MFT_OK;
}

/* The header NumPy writes for (descr, shape), with the preamble: magic,
 * version, length, the dict, spaces and '\n' up to a multiple of 64. Returns
 * its length (0 when it does not fit buf, which cannot happen for rank <= 9). */
static size_t npy_build_header(char *buf, size_t len, const char *descr, const npy_plan *plan,
                               bool version2) {
    const int ndim = plan->ndim;
    const int64_t *shape = plan->shape;
    char dict[512];
    size_t k = (size_t)snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': %s, 'shape': (",
                                descr, plan->fortran ? "True" : "False");
    for (int d = 0; d < ndim; d++)
        k += (size_t)snprintf(dict + k, sizeof dict - k, d ? ", %lld" : "%lld",
                              (long long)shape[d]);
    k += (size_t)snprintf(dict + k, sizeof dict - k, "%s), }", ndim == 1 ? "," : "");
    if (ndim > 0) { /* NumPy's spare room for rewriting the growing axis in place */
        int digits = snprintf(NULL, 0, "%lld", (long long)shape[plan->fortran ? ndim - 1 : 0]);
        for (int i = digits; i < NPY_GROWTH_DIGITS; i++) dict[k++] = ' ';
    }
    /* version 1.0 unless its u16 header length cannot hold the padded dict */
    size_t pre = 10, pad = NPY_ALIGN - (pre + k + 1) % NPY_ALIGN; /* 1..64, as NumPy */
    if (version2 || k + pad + 1 > 65535) {
        pre = 12;
        pad = NPY_ALIGN - (pre + k + 1) % NPY_ALIGN;
    }
    size_t total = pre + k + pad + 1;
    if (total > len) return 0;
    const uint32_t hlen = (uint32_t)(k + pad + 1);
    memcpy(buf, NPY_MAGIC, NPY_MAGIC_LEN);
    buf[6] = pre == 12 ? 2 : 1;
    buf[7] = 0;
    for (size_t i = 0; i < pre - 8; i++) buf[8 + i] = (char)(hlen >> (8 * i));
    memcpy(buf + pre, dict, k);
    memset(buf + pre + k, ' ', pad);
    buf[total - 1] = '\n';
    return total;
}

/* Writes header + data through "<path>.tmp", renamed into place when complete
 * (io/io_util.h). */
static mft_status npy_write_file(const char *fn, const char *path, const char *header,
                                 size_t hbytes, const char *data, uint64_t nbytes) {
    char *tmp = NULL;
    FILE *f = mft__io_create_tmp(fn, path, &tmp);
    if (!f) return mft_last_error();
    errno = 0;
    bool ok = fwrite(header, 1, hbytes, f) == hbytes;
    uint64_t done = 0;
    while (ok && done < nbytes) {
        size_t chunk = nbytes - done > ((uint64_t)1 << 30) ? ((size_t)1 << 30) : (size_t)(nbytes - done);
        ok = fwrite(data + done, 1, chunk, f) == chunk;
        done += ok ? chunk : 0;
    }
    return mft__io_finish_tmp(fn, f, tmp, path, MFT_OK, ok, errno);
}

mft_status mft_save_npy(const char *path, const mft_tensor *t, unsigned flags) {
    static const char fn[] = "mft_save_npy";
    if (!path || !t) {
        mft__null_arg(fn, !path ? "path" : "t");
        return MFT_ERR_NULL;
    }
    const unsigned known = MFT_NPY_LOGICAL | MFT_NPY_VERSION2;
    if (flags & ~known) {
        mft__set_error(MFT_ERR_INVALID, "%s: flags 0x%x has unknown bits 0x%x", fn, flags,
                       flags & ~known);
        return MFT_ERR_INVALID;
    }
    npy_plan plan;
    mft_status st = npy_make_plan(fn, t, flags, &plan);
    if (st != MFT_OK) return st;
    char descr[4], header[1024];
    npy_descr_of(t->dtype, descr);
    const size_t hbytes =
        npy_build_header(header, sizeof header, descr, &plan, (flags & MFT_NPY_VERSION2) != 0);
    st = npy_write_file(fn, path, header, hbytes, plan.nbytes ? mft__tensor_ptr(plan.src) : NULL,
                        plan.nbytes);
    mft_tensor_release(plan.copy);
    return st;
}
