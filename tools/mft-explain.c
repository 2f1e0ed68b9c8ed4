/* tools/mft-explain.c — the layout explainer: builds one tensor from a
 * command line (sizes plus a named format, explicit strides, a dimension-letter
 * string or an XLA minor_to_major list) and prints mft_tensor_describe's
 * analysis of it: strides, tag + origin, every predicate, physical order and
 * the storage map.
 *
 * The tool only parses arguments and builds the tensor through the public API;
 * every analysis comes from the library. Explicit layouts wrap a zeroed buffer
 * of exactly the minimum size (mft_min_storage_numel + offset) with
 * mft_from_blob, so padded and broadcast strides are shown as they are, never
 * copied. Exit status: 0 ok, 2 bad arguments (usage or the library's error
 * message), 1 anything else (e.g. out of memory). */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mft/mft.h>

#define EXIT_BAD_ARGS 2

static const char *prog = "mft-explain";

static void usage(FILE *f) {
    fprintf(f,
            "usage: %s SIZES [--format FMT | --strides S | --layout LETTERS |\n"
            "                 --minor-to-major M] [--offset K] [--dtype DT]\n"
            "\n"
            "Builds a tensor of logical SIZES (N,C,[D,]H,W order, comma-separated)\n"
            "and explains its memory layout: strides, the soft format tag and its\n"
            "origin, the layout predicates, the physical order and which logical\n"
            "element each of the first storage slots holds.\n"
            "\n"
            "  -f, --format FMT          packed in a named format, tag DECLARED:\n"
            "                            contiguous | nchw | ncl | ncdhw  (channels first)\n"
            "                            channels_last | cl | nhwc | nlc | nwc | ndhwc\n"
            "  -s, --strides S           explicit strides in elements, one per dim;\n"
            "                            gaps (padding) and 0 (broadcast) are allowed\n"
            "  -l, --layout LETTERS      physical order as letters, slowest first\n"
            "                            (NCHW, NHWC, NCDHW, NDHWC, NCL, NLC/NWC)\n"
            "  -m, --minor-to-major M    physical order as an XLA minor_to_major list,\n"
            "                            fastest dim first (NHWC is 1,3,2,0)\n"
            "  -o, --offset K            storage offset in elements (default 0)\n"
            "  -d, --dtype DT            f32 (default), f64, i32, i64, u8\n"
            "  -h, --help                this text\n"
            "  -V, --version             the library version\n"
            "\n"
            "With none of --format/--strides/--layout/--minor-to-major the tensor is\n"
            "packed contiguous (mft_empty). Explicit layouts wrap a buffer of exactly\n"
            "the minimum size (mft_from_blob); their tag is inferred from the strides.\n"
            "\n"
            "examples:\n"
            "  %s 2,3,4,4                          NCHW, contiguous\n"
            "  %s 2,3,4,4 --format channels_last   the same tensor in NHWC\n"
            "  %s 2,1,4,4 --format nhwc            C == 1: strides fit both formats\n"
            "  %s 2,3,4,4 --strides 48,1,12,3      NHWC given by strides\n"
            "  %s 2,3,4,4 --layout NHWC            NHWC given by letters\n"
            "  %s 2,3,4,4 --minor-to-major 1,3,2,0 NHWC given XLA-style\n"
            "  %s 1,3,4,3 --strides 60,20,5,1      padded rows (pitch 5, 3 valid)\n"
            "  %s 2,3,4,4 --strides 0,1,0,0        a per-channel vector broadcast\n"
            "  %s 2,3,4,4 --strides 48,1,12,3 --offset 5 --dtype f64\n",
            prog, prog, prog, prog, prog, prog, prog, prog, prog, prog);
}

#if defined(__GNUC__) || defined(__clang__)
#define EXPLAIN_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define EXPLAIN_PRINTF(f, a)
#endif

/* Reports a usage problem (printf-style) and exits 2. */
EXPLAIN_PRINTF(1, 2) static _Noreturn void bad_args(const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "%s: ", prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(run '%s --help' for usage)\n", prog);
    exit(EXIT_BAD_ARGS);
}

/* Reports the library's last error and exits: 1 for out of memory (not the
 * user's fault), 2 for everything else (bad sizes, strides, format...). */
static _Noreturn void lib_error(const char *what) {
    mft_status s = mft_last_error();
    const char *msg = mft_last_error_message();
    if (msg && msg[0]) /* library messages already name the function */
        fprintf(stderr, "%s: %s\n", prog, msg);
    else
        fprintf(stderr, "%s: %s failed: %s\n", prog, what, mft_status_str(s));
    exit(s == MFT_ERR_NOMEM ? 1 : EXIT_BAD_ARGS);
}

/* Parses one decimal integer (optionally signed) filling all of [s, end). */
static bool parse_i64(const char *s, const char *end, int64_t *out) {
    char tmp[32];
    size_t n = (size_t)(end - s);
    if (n == 0 || n >= sizeof tmp) return false;
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)tmp[i]) && !(i == 0 && (tmp[i] == '-' || tmp[i] == '+')))
            return false;
    }
    errno = 0;
    char *stop = NULL;
    long long v = strtoll(tmp, &stop, 10);
    if (errno != 0 || stop != tmp + n) return false;
    *out = (int64_t)v;
    return true;
}

/* Parses "a,b,c" into at most MFT_MAX_DIMS integers; returns the count, or -1
 * (with *bad set to the offending item) when an item is not an integer. The
 * empty string and "-" are rank 0 (a scalar). */
static int parse_list(const char *s, int64_t *out, const char *what) {
    if (s[0] == '\0' || strcmp(s, "-") == 0 || strcmp(s, "[]") == 0) return 0;
    if (s[0] == '[' || s[0] == '(') s++;
    size_t len = strlen(s);
    if (len > 0 && (s[len - 1] == ']' || s[len - 1] == ')')) len--;
    const char *end = s + len;
    int n = 0;
    const char *p = s;
    for (;;) {
        const char *q = p;
        while (q < end && *q != ',') q++;
        if (n == MFT_MAX_DIMS) bad_args("too many %s (at most %d)", what, MFT_MAX_DIMS);
        if (!parse_i64(p, q, &out[n]))
            bad_args("%s: '%.*s' is not an integer", what, (int)(q - p), p);
        n++;
        if (q == end) break;
        p = q + 1;
    }
    return n;
}

static int ieq(const char *a, const char *b) {
    for (; *a && *b; a++, b++)
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return 0;
    return *a == *b;
}

static bool parse_format(const char *s, mft_format *out) {
    static const char *const first[] = {"contiguous", "channels_first", "nchw", "ncl",
                                        "ncw",        "ncdhw",          "cf"};
    static const char *const last[] = {"channels_last", "cl", "nhwc", "nlc", "nwc", "ndhwc"};
    for (size_t i = 0; i < sizeof first / sizeof first[0]; i++)
        if (ieq(s, first[i])) return *out = MFT_CONTIGUOUS, true;
    for (size_t i = 0; i < sizeof last / sizeof last[0]; i++)
        if (ieq(s, last[i])) return *out = MFT_CHANNELS_LAST, true;
    return false;
}

static bool parse_dtype(const char *s, mft_dtype *out) {
    for (int d = 0; d < MFT_DTYPE_COUNT; d++) {
        if (ieq(s, mft_dtype_name((mft_dtype)d))) return *out = (mft_dtype)d, true;
    }
    if (ieq(s, "float") || ieq(s, "float32")) return *out = MFT_F32, true;
    if (ieq(s, "double") || ieq(s, "float64")) return *out = MFT_F64, true;
    return false;
}

/* Formats "[a,b,c]" for the header line. */
static const char *fmt_dims(char *buf, size_t len, int n, const int64_t *v) {
    size_t pos = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < n && pos < len; i++)
        pos += (size_t)snprintf(buf + pos, len - pos, i ? ",%lld" : "%lld", (long long)v[i]);
    if (pos < len) snprintf(buf + pos, len - pos, "]");
    return buf;
}

static void free_buffer(void *data, void *ctx) {
    (void)ctx;
    free(data);
}

enum layout_kind { BY_DEFAULT, BY_FORMAT, BY_STRIDES, BY_LETTERS, BY_MINOR_TO_MAJOR };
enum { OPT_OFFSET = BY_MINOR_TO_MAJOR + 1, OPT_DTYPE };

/* Options taking a value; the layout ones use their enum layout_kind. */
static const struct explain_option {
    const char *shortname, *longname, *alias;
    int kind;
} options[] = {
    {"-f", "--format", NULL, BY_FORMAT},
    {"-s", "--strides", NULL, BY_STRIDES},
    {"-l", "--layout", "--letters", BY_LETTERS},
    {"-m", "--minor-to-major", "--minor_to_major", BY_MINOR_TO_MAJOR},
    {"-o", "--offset", NULL, OPT_OFFSET},
    {"-d", "--dtype", NULL, OPT_DTYPE},
};

int main(int argc, char **argv) {
    const char *sizes_arg = NULL;
    const char *layout_arg = NULL; /* value of the one layout option given */
    char layout_opt[32] = "";      /* its name, for messages */
    enum layout_kind kind = BY_DEFAULT;
    const char *offset_arg = NULL;
    mft_dtype dtype = MFT_F32;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "-V") || !strcmp(a, "--version")) {
            printf("mft-explain (mft %s)\n", mft_version());
            return 0;
        }
        if (!(a[0] == '-' && a[1] != '\0' && !isdigit((unsigned char)a[1]))) {
            /* not an option (negative numbers and "-" are values): the sizes */
            if (sizes_arg) bad_args("unexpected argument '%s' (sizes already given)", a);
            sizes_arg = a;
            continue;
        }
        /* --opt=value or --opt value */
        const char *eq = strchr(a, '=');
        size_t n = eq ? (size_t)(eq - a) : strlen(a);
        const struct explain_option *opt = NULL;
        for (size_t j = 0; j < sizeof options / sizeof options[0] && !opt; j++) {
            if ((strlen(options[j].shortname) == n && !strncmp(a, options[j].shortname, n)) ||
                (strlen(options[j].longname) == n && !strncmp(a, options[j].longname, n)) ||
                (options[j].alias && strlen(options[j].alias) == n &&
                 !strncmp(a, options[j].alias, n)))
                opt = &options[j];
        }
        if (!opt) bad_args("unknown option '%.*s'", (int)n, a);
        const char *val = NULL;
        if (eq) {
            val = eq + 1;
        } else if (i + 1 < argc) {
            val = argv[++i];
        } else {
            bad_args("option '%s' needs a value", a);
        }
        if (opt->kind == OPT_OFFSET) {
            offset_arg = val;
            continue;
        }
        if (opt->kind == OPT_DTYPE) {
            if (!parse_dtype(val, &dtype)) bad_args("unknown dtype '%s' (f32 f64 i32 i64 u8)", val);
            continue;
        }
        enum layout_kind k = (enum layout_kind)opt->kind;
        const char *name = opt->longname;
        if (kind != BY_DEFAULT)
            bad_args("%s and %s both describe the layout; give only one", layout_opt, name);
        kind = k;
        layout_arg = val;
        snprintf(layout_opt, sizeof layout_opt, "%s", name);
    }
    if (!sizes_arg) {
        usage(stderr);
        return EXIT_BAD_ARGS;
    }

    int64_t sizes[MFT_MAX_DIMS] = {0};
    int ndim = parse_list(sizes_arg, sizes, "sizes");

    int64_t offset = 0;
    if (offset_arg) {
        if (!parse_i64(offset_arg, offset_arg + strlen(offset_arg), &offset))
            bad_args("offset: '%s' is not an integer", offset_arg);
        if (offset < 0) bad_args("offset: %s is negative", offset_arg);
    }

    /* ---- the layout: a named format, or strides from one of the descriptions */
    mft_format fmt = MFT_CONTIGUOUS;
    int64_t strides[MFT_MAX_DIMS] = {0};
    char how[1024];
    char dims[256];
    fmt_dims(dims, sizeof dims, ndim, sizes);
    switch (kind) {
    case BY_DEFAULT:
    case BY_FORMAT:
        if (kind == BY_FORMAT && !parse_format(layout_arg, &fmt))
            bad_args("unknown format '%s' (contiguous/nchw or channels_last/cl/nhwc)", layout_arg);
        break;
    case BY_STRIDES: {
        int n = parse_list(layout_arg, strides, "strides");
        if (n != ndim)
            bad_args("%d stride%s given for %d size%s", n, n == 1 ? "" : "s", ndim,
                     ndim == 1 ? "" : "s");
        break;
    }
    case BY_LETTERS: {
        char letters[MFT_MAX_DIMS + 2];
        size_t n = strlen(layout_arg);
        if (n >= sizeof letters) bad_args("layout '%s' is too long", layout_arg);
        for (size_t i = 0; i <= n; i++) letters[i] = (char)toupper((unsigned char)layout_arg[i]);
        if (mft_strides_from_letters(ndim, sizes, letters, strides) != MFT_OK)
            lib_error("mft_strides_from_letters");
        break;
    }
    case BY_MINOR_TO_MAJOR: {
        int64_t m64[MFT_MAX_DIMS];
        int m2m[MFT_MAX_DIMS];
        int n = parse_list(layout_arg, m64, "minor-to-major");
        if (n != ndim)
            bad_args("minor-to-major has %d entr%s for %d dims", n, n == 1 ? "y" : "ies", ndim);
        for (int i = 0; i < n; i++) {
            if (m64[i] < INT_MIN || m64[i] > INT_MAX)
                bad_args("minor-to-major: %lld is out of range", (long long)m64[i]);
            m2m[i] = (int)m64[i];
        }
        if (mft_strides_from_minor_to_major(ndim, sizes, m2m, strides) != MFT_OK)
            lib_error("mft_strides_from_minor_to_major");
        break;
    }
    }

    /* ---- build the tensor */
    mft_tensor *t = NULL;
    if ((kind == BY_DEFAULT || kind == BY_FORMAT) && offset == 0) {
        t = mft_empty(ndim, sizes, dtype, fmt);
        if (!t) lib_error("mft_empty");
        snprintf(how, sizeof how, "mft_empty(sizes=%s, %s, %s)", dims, mft_dtype_name(dtype),
                 mft_format_name(fmt));
    } else {
        if (kind == BY_DEFAULT || kind == BY_FORMAT) {
            /* A named format at an offset: wrap packed strides, then declare
             * the format with the no-copy mft_to_format. */
            if (mft_strides_for_format(ndim, sizes, fmt, strides) != MFT_OK)
                lib_error("mft_strides_for_format");
        }
        int64_t need = 0;
        if (mft_min_storage_numel(ndim, sizes, strides, &need) != MFT_OK)
            lib_error("mft_min_storage_numel");
        size_t esize = mft_dtype_size(dtype);
        if (need > INT64_MAX - offset || (uint64_t)(need + offset) > SIZE_MAX / esize) {
            fprintf(stderr, "%s: a buffer of %lld + %lld elements does not fit in memory\n", prog,
                    (long long)need, (long long)offset);
            return EXIT_BAD_ARGS;
        }
        size_t nbytes = (size_t)(need + offset) * esize;
        /* calloc(0) may return NULL; keep one element so the pointer is real. */
        void *buf = calloc(nbytes ? nbytes : 1, 1);
        if (!buf) {
            fprintf(stderr, "%s: cannot allocate %zu bytes\n", prog, nbytes);
            return 1;
        }
        t = mft_from_blob(buf, nbytes, ndim, sizes, strides, offset, dtype, free_buffer, NULL);
        if (!t) {
            free(buf); /* on failure the deleter is not called: still ours */
            lib_error("mft_from_blob");
        }
        char sdims[256];
        fmt_dims(sdims, sizeof sdims, ndim, strides);
        snprintf(how, sizeof how,
                 "mft_from_blob(buffer of %lld %s elements, sizes=%s, strides=%s, offset=%lld)",
                 (long long)(need + offset), mft_dtype_name(dtype), dims, sdims, (long long)offset);
        if (kind == BY_FORMAT) {
            mft_tensor *u = mft_to_format(t, fmt);
            mft_tensor_release(t);
            if (!u) lib_error("mft_to_format");
            t = u;
            size_t used = strlen(how);
            snprintf(how + used, sizeof how - used, " then mft_to_format(%s)",
                     mft_format_name(fmt));
        }
    }

    /* ---- the library's analysis */
    size_t need = mft_tensor_describe(t, NULL, 0);
    char *text = malloc(need + 1);
    if (!text) {
        mft_tensor_release(t);
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }
    mft_tensor_describe(t, text, need + 1);
    printf("# built with %s\n", how);
    fputs(text, stdout);
    if (need == 0 || text[need - 1] != '\n') putchar('\n');
    free(text);
    mft_tensor_release(t);
    return 0;
}
