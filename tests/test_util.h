/* tests/test_util.h — helpers that several tests/test_*.c files share, so that
 * each is written once. Header-only: every function is `static inline` (a file
 * that uses none of them gets no unused-function warning) and every name starts
 * with tu_ / TU_. It includes harness.h (the macros use CHECK_MSG).
 *
 *   random numbers  tu_rng_next, tu_rng_int: xorshift64, deterministic per seed
 *   indices         tu_next_index (row-major logical index), tu_shape_numel
 *   layouts         tu_strided_view: a view over a bigger base in a random
 *                   physical dim order with steps, a start offset and padding
 *   tensors         tu_iota, tu_has_sizes, tu_is_float, tu_describe,
 *                   tu_in_format (format + zero pad lanes), tu_close_rel
 *                   (values within a tolerance relative to the reference's
 *                   scale, any dtype and format)
 *   golden files    tu_list, tu_next_tok, tu_next_int, tu_next_list, tu_at_eol
 *                   (space-separated tokens), tu_fmt_list, tu_list_eq, and
 *                   tu_read_golden: the "case ... end" reading loop
 *   error checks    tu_dst_state / tu_snap / TU_CHECK_UNCHANGED (a failing call
 *                   leaves its destination alone), TU_HAS, TU_OK_S, and
 *                   TU_EXPECT_NULL_ / TU_EXPECT_STATUS_, the first half of each
 *                   file's FAIL_* macros.
 *
 * Only tu_read_golden and the TU_ macros run CHECKs, exactly the CHECKs their
 * per-file predecessors ran. */
#ifndef MFT_TEST_UTIL_H
#define MFT_TEST_UTIL_H

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include "harness.h"

/* ------------------------------------------------------------------ files */

/* The whole file at path in a malloc'd buffer (*n bytes; free it), NULL if
 * it cannot be opened or read. */
static inline unsigned char *tu_read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    *n = 0;
    if (!f) return NULL;
    long sz = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    unsigned char *b = sz >= 0 && fseek(f, 0, SEEK_SET) == 0 ? malloc((size_t)sz + 16) : NULL;
    if (b) *n = fread(b, 1, (size_t)sz, f);
    fclose(f);
    return b;
}

/* ------------------------------------------------------------------ random numbers */

static inline uint64_t tu_rng_next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static inline int64_t tu_rng_int(uint64_t *s, int64_t lo, int64_t hi) { /* inclusive */
    return lo + (int64_t)(tu_rng_next(s) % (uint64_t)(hi - lo + 1));
}

/* ------------------------------------------------------------------ indices */

/* Advances idx over sizes in row-major (logical) order; false after the last. */
static inline bool tu_next_index(int nd, const int64_t *sizes, int64_t *idx) {
    for (int d = nd - 1; d >= 0; d--) {
        if (++idx[d] < sizes[d]) return true;
        idx[d] = 0;
    }
    return false;
}

/* The value formula of the file-format tests (checkpoints, safetensors; the
 * same as tests/io/safetensors_ref.py): element number lin (row-major) holds
 * (lin * 13 + salt * 7) % 101, as v / 4 - 12 for floating dtypes; exact in
 * every dtype. */
static inline double tu_formula(int64_t lin, mft_dtype dt, int salt) {
    double v = (double)((lin * 13 + salt * 7) % 101);
    return dt == MFT_F32 || dt == MFT_F64 ? v / 4 - 12 : v;
}
/* Writes (fill) or compares (returns false at the first difference) the
 * formula over t's logical elements. */
static inline bool tu_formula_walk(mft_tensor *t, int salt, bool fill) {
    int nd = mft_tensor_ndim(t);
    const int64_t *sz = mft_tensor_sizes(t);
    int64_t ix[MFT_MAX_DIMS] = {0}, lin = 0;
    if (mft_tensor_numel(t) == 0) return true;
    do {
        double v = tu_formula(lin++, mft_tensor_dtype(t), salt);
        if (fill)
            mft_tensor_set(t, ix, v);
        else if (mft_tensor_get(t, ix) != v)
            return false;
    } while (tu_next_index(nd, sz, ix));
    return true;
}

static inline int64_t tu_shape_numel(int nd, const int64_t *sz) {
    int64_t n = 1;
    for (int d = 0; d < nd; d++) n *= sz[d];
    return n;
}

/* ------------------------------------------------------------------ random layouts */

/* How tu_strided_view draws its random numbers. The files differ here, and
 * each keeps its own draws (and so exactly the random cases it always had). */
typedef struct {
    int64_t step2_range; /* a dim has step 2 when tu_rng_int(rng, 0, step2_range) == 0 */
    int64_t pad_max;     /* end padding per dim: tu_rng_int(rng, 0, pad_max) */
    bool pad_last;       /* false: each dim draws step, start, padding in turn; true: all
                            steps and starts first, then the paddings in storage order */
} tu_layout_opts;

/* A view with logical `sizes` over a bigger base (every slot = fill): dims
 * stored in a random physical order (Fisher-Yates), each with step 1 or 2, a
 * start offset of 0 or 1 and padding at the end. *base_out receives the base
 * (to inspect the gaps; the caller releases it); with base_out NULL the view
 * alone keeps the base alive. */
static inline mft_tensor *tu_strided_view(int nd, const int64_t *sizes, mft_dtype dt, double fill,
                                          const tu_layout_opts *o, uint64_t *rng,
                                          mft_tensor **base_out) {
    int order[MFT_MAX_DIMS] = {0}, where_is[MFT_MAX_DIMS] = {0};
    int64_t step[MFT_MAX_DIMS], first[MFT_MAX_DIMS], extent[MFT_MAX_DIMS], phys[MFT_MAX_DIMS] = {0};
    for (int d = 0; d < nd; d++) order[d] = d;
    for (int d = nd - 1; d > 0; d--) {
        int j = (int)tu_rng_int(rng, 0, d), t = order[d];
        order[d] = order[j];
        order[j] = t;
    }
    for (int d = 0; d < nd; d++) where_is[order[d]] = d;
    for (int d = 0; d < nd; d++) {
        step[d] = tu_rng_int(rng, 0, o->step2_range) == 0 ? 2 : 1;
        first[d] = tu_rng_int(rng, 0, 1);
        extent[d] = first[d] + (sizes[d] > 0 ? (sizes[d] - 1) * step[d] + 1 : 0);
        if (!o->pad_last) extent[d] += tu_rng_int(rng, 0, o->pad_max);
    }
    if (o->pad_last)
        for (int p = 0; p < nd; p++) extent[order[p]] += tu_rng_int(rng, 0, o->pad_max);
    /* base dim p holds logical dim order[p]: view dim d = base dim where_is[d] */
    for (int p = 0; p < nd; p++) phys[p] = extent[order[p]];
    /* an integer base cannot hold a NaN poison (Note [Integer scalars]): -85
     * (0xAB as u8) marks the gaps instead */
    if (isnan(fill) && dt != MFT_F32 && dt != MFT_F64) fill = -85;
    mft_tensor *base = mft_full(nd, phys, dt, MFT_CONTIGUOUS, fill);
    mft_tensor *v = mft_permute(base, where_is);
    if (base_out) *base_out = base;
    else mft_tensor_release(base);
    for (int d = 0; d < nd && v; d++) {
        mft_tensor *s = mft_slice(v, d, first[d], first[d] + sizes[d] * step[d], step[d]);
        mft_tensor_release(v);
        v = s;
    }
    return v;
}

/* ------------------------------------------------------------------ tensors */

/* Packed contiguous tensor of sizes holding first, first + 1, ... in logical order. */
static inline mft_tensor *tu_iota(int nd, const int64_t *sz, mft_dtype dt, double first) {
    mft_tensor *flat = mft_arange(first, first + (double)tu_shape_numel(nd, sz), 1, dt);
    mft_tensor *t = mft_view(flat, nd, sz);
    mft_tensor_release(flat);
    return t;
}

/* t is non-NULL and has exactly these sizes. */
/* Fills t (any strides) in logical order with values on a 2^-19 grid in
 * [-1, 1): exact in F32, so products and sums of a few of them are exact and
 * naive references compare tightly. */
static inline void tu_fill_grid(mft_tensor *t, uint64_t *rng) {
    int64_t idx[MFT_MAX_DIMS] = {0};
    if (mft_tensor_numel(t) == 0) return;
    do {
        double v = (double)tu_rng_int(rng, 0, 1 << 20) / (double)(1 << 19) - 1.0;
        mft_tensor_set(t, idx, v);
    } while (tu_next_index(mft_tensor_ndim(t), mft_tensor_sizes(t), idx));
}

static inline bool tu_has_sizes(const mft_tensor *t, int nd, const int64_t *sz) {
    if (!t || mft_tensor_ndim(t) != nd) return false;
    for (int d = 0; d < nd; d++)
        if (mft_tensor_sizes(t)[d] != sz[d]) return false;
    return true;
}

static inline bool tu_is_float(mft_dtype dt) { return dt == MFT_F32 || dt == MFT_F64; }

/* t is in fmt and, when blocked, its pad lanes are zero. */
static inline bool tu_in_format(const mft_tensor *t, mft_format fmt) {
    return t && mft_tensor_format(t) == fmt &&
           (!mft_tensor_is_blocked(t) || mft_tensor_check_padding(t) == MFT_OK);
}

/* a and ref (any float dtype and format, the same sizes) differ by at most
 * rtol * max(1, max |ref|) anywhere; says the error on stderr when not. */
static inline bool tu_close_rel(const mft_tensor *a, const mft_tensor *ref, double rtol) {
    if (!a || !ref || !tu_has_sizes(a, mft_tensor_ndim(ref), mft_tensor_sizes(ref))) return false;
    mft_tensor *da = mft_to_dtype(a, MFT_F64), *dr = mft_to_dtype(ref, MFT_F64);
    mft_tensor *pa = da ? mft_contiguous(da, MFT_CONTIGUOUS) : NULL;
    mft_tensor *pr = dr ? mft_contiguous(dr, MFT_CONTIGUOUS) : NULL;
    double scale = 1.0, err = 0.0;
    if (pa && pr) {
        const double *x = mft_tensor_data(pa), *y = mft_tensor_data(pr);
        for (int64_t i = 0; i < mft_tensor_numel(pr); i++) {
            scale = fmax(scale, fabs(y[i]));
            err = fmax(err, fabs(x[i] - y[i]));
        }
    }
    const bool ok = pa && pr && err <= rtol * scale;
    if (pa && pr && !ok) fprintf(stderr, "  max error %g (scale %g)\n", err, scale);
    mft_tensor_release(da);
    mft_tensor_release(dr);
    mft_tensor_release(pa);
    mft_tensor_release(pr);
    return ok;
}

/* "dtype[sizes]/(strides)+offset" into buf, e.g. "f32[2,3]/(3,1)+0", with the
 * tag (" CONTIGUOUS") appended when with_format; truncated to len. */
static inline void tu_describe(const mft_tensor *t, char *buf, size_t len, bool with_format) {
    int nd = mft_tensor_ndim(t);
    size_t pos = (size_t)snprintf(buf, len, "%s[", mft_dtype_name(mft_tensor_dtype(t)));
    for (int d = 0; d < nd && pos < len; d++)
        pos += (size_t)snprintf(buf + pos, len - pos, d ? ",%lld" : "%lld",
                                (long long)mft_tensor_sizes(t)[d]);
    if (pos < len) pos += (size_t)snprintf(buf + pos, len - pos, "]/(");
    for (int d = 0; d < nd && pos < len; d++)
        pos += (size_t)snprintf(buf + pos, len - pos, d ? ",%lld" : "%lld",
                                (long long)mft_tensor_strides(t)[d]);
    if (pos >= len) return;
    if (with_format)
        snprintf(buf + pos, len - pos, ")+%lld %s", (long long)mft_tensor_offset(t),
                 mft_format_name(mft_tensor_format(t)));
    else
        snprintf(buf + pos, len - pos, ")+%lld", (long long)mft_tensor_offset(t));
}

/* ------------------------------------------------------------------ golden files */

#define TU_MAX_LIST 16

/* An integer list as the golden files write it: a count, then the values. */
typedef struct {
    int n;
    int64_t v[TU_MAX_LIST];
} tu_list;

/* Next space-separated token of *p into buf (truncated to len); false at end of line. */
static inline bool tu_next_tok(const char **p, char *buf, size_t len) {
    const char *s = *p;
    size_t n = 0;
    while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n') s++;
    if (*s == '\0') return false;
    while (*s && *s != ' ' && *s != '\t' && *s != '\r' && *s != '\n') {
        if (n + 1 < len) buf[n++] = *s;
        s++;
    }
    buf[n] = '\0';
    *p = s;
    return true;
}

/* Next token as a decimal integer; false if missing or not wholly a number. */
static inline bool tu_next_int(const char **p, int64_t *out) {
    char tok[64];
    char *end;
    long long v;
    if (!tu_next_tok(p, tok, sizeof tok)) return false;
    errno = 0;
    v = strtoll(tok, &end, 10);
    if (errno != 0 || *end != '\0' || end == tok) return false;
    *out = (int64_t)v;
    return true;
}

/* "n v0 ... v(n-1)" with 0 <= n <= TU_MAX_LIST. */
static inline bool tu_next_list(const char **p, tu_list *l) {
    int64_t n;
    if (!tu_next_int(p, &n) || n < 0 || n > TU_MAX_LIST) return false;
    l->n = (int)n;
    for (int i = 0; i < l->n; i++)
        if (!tu_next_int(p, &l->v[i])) return false;
    return true;
}

/* Nothing but white space is left. */
static inline bool tu_at_eol(const char *p) {
    char tok[8];
    return !tu_next_tok(&p, tok, sizeof tok);
}

static inline bool tu_next_double(const char **p, double *out) {
    char tok[64];
    char *end;
    if (!tu_next_tok(p, tok, sizeof tok)) return false;
    errno = 0;
    *out = strtod(tok, &end);
    return *end == '\0' && end != tok;
}

/* A dtype written by name ("f32", "u8", ...). */
static inline bool tu_next_dtype(const char **p, mft_dtype *out) {
    char tok[16];
    if (!tu_next_tok(p, tok, sizeof tok)) return false;
    for (int d = 0; d < (int)MFT_DTYPE_COUNT; d++) {
        if (strcmp(tok, mft_dtype_name((mft_dtype)d)) == 0) {
            *out = (mft_dtype)d;
            return true;
        }
    }
    return false;
}

/* The result block shared by the golden op files:
 *   result error | result DTYPE NDIM
 *   sizes LIST / strides LIST / values N v... | checksum N S */
#define TU_MAX_VALUES 64
enum { TU_R_SIZES = 1 << 0, TU_R_STRIDES = 1 << 1, TU_R_VALUES = 1 << 2 };
typedef struct tu_result {
    bool has_result, expect_error;
    mft_dtype dtype;
    int ndim;
    tu_list sizes, strides;
    bool full_values;
    int64_t nvalues;
    double values[TU_MAX_VALUES];
    double checksum;
    unsigned seen; /* TU_R_* lines read */
} tu_result;

/* Parses the rest of a line whose first token is key into r: 1 if parsed, 0
 * on a malformed line, -1 if key is not a result-block key. */
static inline int tu_parse_result_line(const char *key, const char *p, tu_result *r) {
    char tok[64];
    if (strcmp(key, "result") == 0) {
        const char *q = p;
        if (!tu_next_tok(&q, tok, sizeof tok)) return 0;
        r->has_result = true;
        if (strcmp(tok, "error") == 0) {
            r->expect_error = true;
            p = q;
        } else {
            int64_t nd;
            if (!tu_next_dtype(&p, &r->dtype) || !tu_next_int(&p, &nd) || nd < 0 ||
                nd > TU_MAX_LIST)
                return 0;
            r->ndim = (int)nd;
        }
    } else if (strcmp(key, "sizes") == 0) {
        r->seen |= TU_R_SIZES;
        if (!tu_next_list(&p, &r->sizes)) return 0;
    } else if (strcmp(key, "strides") == 0) {
        r->seen |= TU_R_STRIDES;
        if (!tu_next_list(&p, &r->strides)) return 0;
    } else if (strcmp(key, "values") == 0) {
        r->seen |= TU_R_VALUES;
        r->full_values = true;
        if (!tu_next_int(&p, &r->nvalues) || r->nvalues < 0 || r->nvalues > TU_MAX_VALUES) return 0;
        for (int64_t i = 0; i < r->nvalues; i++)
            if (!tu_next_double(&p, &r->values[i])) return 0;
    } else if (strcmp(key, "checksum") == 0) {
        r->seen |= TU_R_VALUES;
        r->full_values = false;
        if (!tu_next_int(&p, &r->nvalues) || r->nvalues < 0 || !tu_next_double(&p, &r->checksum))
            return 0;
    } else {
        return -1;
    }
    return tu_at_eol(p) ? 1 : 0;
}

/* "(v0,v1,...)" into buf, truncated to len. */
static inline void tu_fmt_list(char *buf, size_t len, int n, const int64_t *v) {
    size_t used = 0;
    int w = snprintf(buf, len, "(");
    if (w > 0) used = (size_t)w;
    for (int i = 0; i < n && used < len; i++) {
        w = snprintf(buf + used, len - used, "%s%lld", i ? "," : "", (long long)v[i]);
        if (w < 0) break;
        used += (size_t)w;
    }
    if (used < len) snprintf(buf + used, len - used, ")");
}

/* got[0..n) equals the list (got may be NULL only when n == 0). */
static inline bool tu_list_eq(const tu_list *want, int n, const int64_t *got) {
    if (n != want->n || (n > 0 && got == NULL)) return false;
    for (int i = 0; i < n; i++)
        if (got[i] != want->v[i]) return false;
    return true;
}

/* One golden data file: '#' comment lines, blank lines, and blocks
 * "case NAME" ... "end" whose other lines are the fields of that case. The
 * test file keeps the open case in its own storage: at "case" the reader
 * zeroes it, then stores the line number and the name into it. */
typedef struct {
    const char *path;
    char *buf; /* the line buffer */
    int buf_len;
    bool check_line_length; /* one CHECK per line: it fits in buf */
    void *case_ptr;         /* the open case, case_size bytes */
    size_t case_size;
    int *case_line;         /* its line field */
    char *name;             /* its name field, name_len bytes */
    size_t name_len;
    bool (*field)(const char *line);       /* a line inside a case; false: cannot parse */
    void (*end)(int lineno, bool in_case); /* "end": check the case is complete, run it */
} tu_golden_file;

/* Reads g->path through the callbacks. CHECKs: the file opens; no "case"
 * inside a case; every other line inside a case parses (a failed CHECK for
 * each one that does not, or that stands outside a case); the file does not
 * end inside a case; no syntax errors at all (a missing case name counts).
 * False when the file cannot be opened. */
static inline bool tu_read_golden(const tu_golden_file *g) {
    FILE *fp = fopen(g->path, "r");
    CHECK_MSG(fp != NULL, "cannot open %s", g->path);
    if (!fp) return false;
    bool in_case = false;
    int lineno = 0, syntax_errors = 0;
    while (fgets(g->buf, g->buf_len, fp)) {
        const char *p = g->buf;
        char key[32];
        lineno++;
        if (g->check_line_length)
            CHECK_MSG(strchr(g->buf, '\n') != NULL || feof(fp), "line %d longer than %d bytes",
                      lineno, g->buf_len - 1);
        if (g->buf[0] == '#' || !tu_next_tok(&p, key, sizeof key)) continue;
        if (strcmp(key, "case") == 0) {
            CHECK_MSG(!in_case, "line %d: 'case' inside case %s", lineno, g->name);
            memset(g->case_ptr, 0, g->case_size);
            *g->case_line = lineno;
            if (!tu_next_tok(&p, g->name, g->name_len)) syntax_errors++;
            in_case = true;
        } else if (strcmp(key, "end") == 0) {
            g->end(lineno, in_case);
            in_case = false;
        } else if (!in_case || !g->field(g->buf)) {
            syntax_errors++;
            CHECK_MSG(false, "line %d: cannot parse '%.80s' (case %s)", lineno, g->buf,
                      in_case ? g->name : "-");
        }
    }
    fclose(fp);
    CHECK_MSG(!in_case, "file ends inside case %s", g->name);
    CHECK_EQ_I(syntax_errors, 0);
    return true;
}

/* ------------------------------------------------------------------ error checks */

/* A destination's state: values (logical hash) and the storage version. */
typedef struct {
    uint64_t hash;
    int64_t version;
} tu_dst_state;

static inline tu_dst_state tu_snap(const mft_tensor *t) {
    tu_dst_state s = {mft_tensor_hash(t), mft_tensor_version(t)};
    return s;
}

/* Two CHECKs: t's values and version are those of the snapshot `before`. */
#define TU_CHECK_UNCHANGED(t, before)                                                              \
    do {                                                                                           \
        tu_dst_state now_ = tu_snap(t);                                                            \
        CHECK_MSG(now_.hash == (before).hash, "%s values changed by a failing call", #t);          \
        CHECK_MSG(now_.version == (before).version, "%s version bumped by a failing call", #t);    \
    } while (0)

/* One CHECK: the last error message contains needle. */
#define TU_HAS(needle)                                                                             \
    CHECK_MSG(strstr(mft_last_error_message(), (needle)) != NULL, "message '%s' lacks '%s'",       \
              mft_last_error_message(), (needle))

/* One CHECK: a status-returning call that must succeed. */
#define TU_OK_S(expr)                                                                              \
    do {                                                                                           \
        mft_status os_ = (expr);                                                                   \
        CHECK_MSG(os_ == MFT_OK, "%s returned %s: %s", #expr, mft_status_str(os_),                 \
                  mft_last_error_message());                                                       \
    } while (0)

/* One CHECK each: with the error cleared first, the tensor-returning call expr
 * returns NULL (a tensor it returns anyway is released) / the status-returning
 * call expr returns st. text is #expr, passed by the FAIL_* macro that wraps
 * these, so that the message shows the call as written. The caller then checks
 * the last error (CHECK_ERR, which clears it). */
#define TU_EXPECT_NULL_(expr, text)                                                                \
    do {                                                                                           \
        mft_clear_error();                                                                         \
        mft_tensor *ft_ = (expr);                                                                  \
        CHECK_MSG(ft_ == NULL, "%s returned a tensor", text);                                      \
        mft_tensor_release(ft_);                                                                   \
    } while (0)

#define TU_EXPECT_STATUS_(expr, text, st)                                                          \
    do {                                                                                           \
        mft_clear_error();                                                                         \
        mft_status fs_ = (expr);                                                                   \
        CHECK_MSG(fs_ == (st), "%s returned %s", text, mft_status_str(fs_));                       \
    } while (0)

#endif
