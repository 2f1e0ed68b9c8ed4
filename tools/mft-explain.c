/* tools/mft-explain.c — the layout explainer: builds one tensor from a
 * command line (sizes plus a named format, explicit strides, a dimension-letter
 * string, an XLA minor_to_major list, or a blocked layout named in oneDNN's,
 * Ascend's or XLA's vocabulary) and prints mft_tensor_describe's
 * analysis of it: strides, tag + origin, every predicate, physical order and
 * the storage map; then (unless --no-grid) a picture of the memory order: the
 * storage slots from the offset drawn as a grid whose cells name the logical
 * element in each slot ("B01" = channel 1, h 0, w 1; ".." a padding gap, "*"
 * a slot shared through broadcast), and a "channel order" line in the spirit
 * of the RRRGGGBBB vs RGBRGBRGB figure (docs/memory-order.md explains it).
 * Two more explanations run the library and live in explain_op.c: --to FMT
 * (what mft_to_format / mft_contiguous return for the tensor) and --op OP
 * --in SPEC... (an op's format rule on given inputs); both say whether
 * PyTorch 1.13 agrees on those tensors (explain_pytorch.c). --npy FILE [--as
 * FMT] explains the tensor mft_load_npy makes of a NumPy .npy file (the
 * file's header from explain_npy.c, then the same analysis). docs/tools.md
 * documents the options with real output.
 *
 * The tool only parses arguments and builds the tensor through the public API;
 * every analysis comes from the library, except the picture, which maps slots
 * back to logical indices here from the public sizes/strides/offset.
 * Explicit layouts wrap a zeroed buffer of exactly the minimum size
 * (mft_min_storage_numel + offset) with mft_from_blob, so padded and broadcast
 * strides are shown as they are, never copied. Exit status: 0 ok, 2 bad
 * arguments (usage or the library's error message), 1 anything else (e.g. out
 * of memory). */
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
#include "explain.h"

#define GRID_MAX_SLOTS 96 /* slots the picture draws; the rest are counted */

static const char *prog = "mft-explain";

static void usage(FILE *f) {
    fprintf(f,
            "usage: %s SIZES [--format FMT | --strides S | --layout LETTERS |\n"
            "                 --minor-to-major M] [--offset K] [--dtype DT]\n"
            "                 [--grid | --no-grid] [--ascii] [--to FMT]\n"
            "       %s --op OP --in SPEC [--in SPEC...] [--to FMT] [--dtype DT]\n"
            "       %s --safetensors FILE --name T [--grid | --no-grid]\n"
            "       %s --npy FILE [--as channels_last] [--grid | --no-grid] [--to FMT]\n"
            "\n"
            "Builds a tensor of logical SIZES (N,C,[D,]H,W order, comma-separated)\n"
            "and explains its memory layout: strides, the soft format tag and its\n"
            "origin, the layout predicates, the physical order and which logical\n"
            "element each of the first storage slots holds. Then it draws the memory\n"
            "order: storage slots from the offset in rows, each cell naming the logical\n"
            "element there, plus a one-line channel order (AAAA BBBB CCCC for NCHW,\n"
            "ABC ABC ABC ABC for NHWC); see docs/memory-order.md.\n"
            "\n"
            "  -f, --format FMT          packed in a named format, tag DECLARED:\n"
            "      --from FMT              contiguous | nchw | ncl | ncdhw  (channels first)\n"
            "                              channels_last | cl | nhwc | nlc | nwc | ndhwc\n"
            "  -s, --strides S           explicit strides in elements, one per dim;\n"
            "                            gaps (padding) and 0 (broadcast) are allowed\n"
            "  -l, --layout LETTERS      physical order as letters, slowest first\n"
            "                            (NCHW, NHWC, NCDHW, NDHWC, NCL, NLC/NWC)\n"
            "  -m, --minor-to-major M    physical order as an XLA minor_to_major list,\n"
            "                            fastest dim first (NHWC is 1,3,2,0)\n"
            "      --onednn TAG          a oneDNN layout tag: nChw16c, aBcd16b, OIhw16i16o,\n"
            "                            ABcd4b16a4b, ... (--format nchw16c / nchw8c too)\n"
            "      --ascend NAME         an Ascend format: NC1HWC0, NDC1HWC0, FRACTAL_Z,\n"
            "                            FRACTAL_NZ (C0 by the --dtype's size)\n"
            "      --xla LAYOUT          an XLA layout: {1,0:T(8,128)}\n"
            "                            (blocked layouts: the descriptor in all three\n"
            "                            vocabularies, and a picture with pad lanes '__')\n"
            "  -o, --offset K            storage offset in elements (default 0)\n"
            "  -d, --dtype DT            f32 (default), f64, i32, i64, u8\n"
            "      --grid / --no-grid    draw / omit the memory-order picture (default:\n"
            "                            drawn; the last of the two wins)\n"
            "      --ascii               ASCII-only picture (the default; always ASCII)\n"
            "  -t, --to FMT              instead of the analysis: what mft_to_format and\n"
            "                            mft_contiguous(x, FMT) return for the tensor x\n"
            "                            (sizes, strides, tag, provenance), whether they\n"
            "                            copied and why, and whether PyTorch 1.13's\n"
            "                            x.to() / x.contiguous() agree on x\n"
            "  -O, --op OP               the format rule of op OP (a registry name, see\n"
            "                            mft-rules) on the --in tensors: the rule row, the\n"
            "                            input that decides, the op's result (run with\n"
            "                            stride 1, no padding, 2-wide pool windows...) and\n"
            "                            whether PyTorch 1.13 agrees on these inputs;\n"
            "                            --to gives the format of to_format / contiguous /\n"
            "                            clone\n"
            "  -i, --in SPEC             one input of --op, in order (at most 8):\n"
            "                            [FMT:]SIZES[@STRIDES][/STEP...], e.g.\n"
            "                            nhwc:8,16,14,14  8,3,4,4@48,1,12,3\n"
            "                            nchw:8,1,28,28/contiguous:nhwc\n"
            "                            STEP: to_format:FMT contiguous:FMT select:D,I\n"
            "                            unsqueeze:D squeeze:D transpose:A,B\n"
            "                            permute:P0,P1,.. narrow:D,START,LEN\n"
            "                            slice:D,START,END,STEP\n",
            prog, prog, prog, prog);
    fprintf(f, "%s",
            "      --npy FILE            the tensor mft_load_npy makes of a NumPy .npy\n"
            "                            file: its header, then the analysis\n"
            "      --as FMT              with --npy: channels_last (nhwc, cl) reads the\n"
            "                            file as the physical (N,H,W,C) array and gives\n"
            "                            the logical NCHW view; contiguous (default):\n"
            "                            the array as it is\n"
            "      --safetensors FILE    with --name T: tensor T of a safetensors file: the\n"
            "  -n, --name T              file's entry, its mft metadata, the save mode, what\n"
            "                            mft_safetensors_load makes of it (a zero-copy view\n"
            "                            or a copy) and where its tag comes from (restored\n"
            "                            from metadata / inferred from the file's strides),\n"
            "                            then the analysis and picture of that tensor\n"
            "  -h, --help                this text\n"
            "  -V, --version             the library version\n");
    fprintf(f,
            "\n"
            "With none of --format/--strides/--layout/--minor-to-major the tensor is\n"
            "packed contiguous (mft_empty). Explicit layouts wrap a buffer of exactly\n"
            "the minimum size (mft_from_blob); their tag is inferred from the strides.\n"
            "\n"
            "The picture: a row starts at every step of the dim just outside the\n"
            "innermost run (for NCHW one W run, for NHWC C*W slots, for padded rows the\n"
            "pitch). Rank 3-5 cells are [n:]<channel letter A=c0,B=c1..><spatial>, e.g.\n"
            "B01 = (c1,h0,w1); other ranks show the index i,j,... '..' marks a gap (a\n"
            "slot no element uses), '*' a slot shared by several elements (stride 0).\n"
            "At most %d slots are drawn; the legend under the grid spells it out.\n"
            "\n"
            "PyTorch 1.13 lines: \"same\" when PyTorch would return the same strides\n"
            "(and copy the same way) and its suggest_memory_format reads them as mft's\n"
            "tag; else \"gives FORMAT here, because ...\" (docs/tools.md).\n",
            GRID_MAX_SLOTS);
    fprintf(f,
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
            "  %s 2,3,4,4 --strides 48,1,12,3 --offset 5 --dtype f64\n"
            "  %s 1,3,2,2 --format nhwc --no-grid  the analysis without the picture\n"
            "  %s 8,1,28,28 --from nchw --to nhwc  what converting C == 1 returns\n"
            "  %s 1,17,2,2 --onednn nChw16c        channel blocks of 16, 15 pad lanes\n"
            "  %s 20,17,3,3 --ascend FRACTAL_Z     an Ascend conv weight\n"
            "  %s --op conv2d --in nchw:8,16,14,14 --in nhwc:32,16,3,3\n"
            "                                              why conv2d gives NHWC here\n"
            "  %s --npy batch.npy --as channels_last  an (N,H,W,C) NumPy batch\n",
            prog, prog, prog, prog, prog, prog, prog, prog, prog, prog, prog, prog, prog, prog,
            prog);
}

/* Reports a usage problem (printf-style) and exits 2. */
void explain_bad_args(const char *fmt, ...) {
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
void explain_lib_error(const char *what) {
    mft_status s = mft_last_error();
    const char *msg = mft_last_error_message();
    if (msg && msg[0]) /* library messages already name the function */
        fprintf(stderr, "%s: %s\n", prog, msg);
    else
        fprintf(stderr, "%s: %s failed: %s\n", prog, what, mft_status_str(s));
    exit(s == MFT_ERR_NOMEM ? 1 : EXIT_BAD_ARGS);
}

/* Parses one decimal integer (optionally signed) filling all of [s, end). */
bool explain_parse_i64(const char *s, const char *end, int64_t *out) {
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
int explain_parse_list(const char *s, int64_t *out, const char *what) {
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
        if (n == MFT_MAX_DIMS) explain_bad_args("too many %s (at most %d)", what, MFT_MAX_DIMS);
        if (!explain_parse_i64(p, q, &out[n]))
            explain_bad_args("%s: '%.*s' is not an integer", what, (int)(q - p), p);
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

bool explain_parse_format(const char *s, mft_format *out) {
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
const char *explain_dims(char *buf, size_t len, int n, const int64_t *v) {
    size_t pos = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < n && pos < len; i++)
        pos += (size_t)snprintf(buf + pos, len - pos, i ? ",%lld" : "%lld", (long long)v[i]);
    if (pos < len) snprintf(buf + pos, len - pos, "]");
    return buf;
}

void explain_append(char *buf, size_t len, size_t *pos, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(*pos < len ? buf + *pos : NULL, *pos < len ? len - *pos : 0, fmt, ap);
    va_end(ap);
    if (n > 0) *pos += (size_t)n;
}

const char *explain_layout_name(int ndim, mft_format fmt) {
    static const char *const names[3][2] = {{"NCL", "NLC"}, {"NCHW", "NHWC"}, {"NCDHW", "NDHWC"}};
    bool cl = fmt == MFT_CHANNELS_LAST;
    if (ndim >= 3 && ndim <= 5) return names[ndim - 3][cl];
    return cl ? "?" : "contiguous";
}

static void free_buffer(void *data, void *ctx) {
    (void)ctx;
    free(data);
}

mft_tensor *explain_wrap_strided(int ndim, const int64_t *sizes, const int64_t *strides,
                                 int64_t offset, mft_dtype dtype) {
    int64_t need = 0;
    if (mft_min_storage_numel(ndim, sizes, strides, &need) != MFT_OK)
        explain_lib_error("mft_min_storage_numel");
    size_t esize = mft_dtype_size(dtype);
    if (need > INT64_MAX - offset || (uint64_t)(need + offset) > SIZE_MAX / esize) {
        fprintf(stderr, "%s: a buffer of %lld + %lld elements does not fit in memory\n", prog,
                (long long)need, (long long)offset);
        exit(EXIT_BAD_ARGS);
    }
    size_t nbytes = (size_t)(need + offset) * esize;
    /* calloc(0) may return NULL; keep one element so the pointer is real. */
    void *buf = calloc(nbytes ? nbytes : 1, 1);
    if (!buf) {
        fprintf(stderr, "%s: cannot allocate %zu bytes\n", prog, nbytes);
        exit(1);
    }
    mft_tensor *t =
        mft_from_blob(buf, nbytes, ndim, sizes, strides, offset, dtype, free_buffer, NULL);
    if (!t) {
        free(buf); /* on failure the deleter is not called: still ours */
        explain_lib_error("mft_from_blob");
    }
    return t;
}

/* ==================================================================== grid
 * The memory-order picture: storage slots 0.. after the offset, in rows, each
 * cell naming the logical element stored there (docs/memory-order.md). The
 * slot -> element map is computed here from the public sizes/strides, by a
 * small dynamic program over the shown slots only, so huge or broadcast
 * tensors cost O(ndim * GRID_MAX_SLOTS^2), never O(numel). */
#define GRID_MAX_LINE 96 /* a row wider than this wraps */
#define GRID_CELL_LEN 64

/* What one storage slot holds: how many logical elements map to it
 * (saturating; 0 = a gap) and the first of them in logical (row-major) order. */
struct grid_slot {
    uint64_t count;
    int64_t idx[MFT_MAX_DIMS];
};

static uint64_t sat_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }
static uint64_t sat_mul(uint64_t a, uint64_t b) {
    return (a != 0 && b > UINT64_MAX / a) ? UINT64_MAX : a * b;
}

/* Adds dim d (processed last to first) to the slot map: count[s] sums over
 * i_d, and the first element takes the smallest i_d whose remainder slot is
 * reachable by dims d+1.. (so the kept index is the lexicographic minimum). */
static void grid_add_dim(struct grid_slot *slots, struct grid_slot *tmp, int64_t nslots, int d,
                         int64_t size, int64_t stride) {
    for (int64_t s = 0; s < nslots; s++) {
        tmp[s] = slots[s];
        tmp[s].count = 0;
        bool first = true;
        int64_t imax = stride == 0 ? 0 : (size - 1 < s / stride ? size - 1 : s / stride);
        for (int64_t i = 0; i <= imax; i++) {
            const struct grid_slot *from = &slots[s - i * stride];
            if (from->count == 0) continue;
            uint64_t c = stride == 0 ? sat_mul(from->count, (uint64_t)size) : from->count;
            tmp[s].count = sat_add(tmp[s].count, c);
            if (first) {
                memcpy(tmp[s].idx, from->idx, sizeof tmp[s].idx);
                tmp[s].idx[d] = i;
                first = false;
            }
        }
    }
    memcpy(slots, tmp, (size_t)nslots * sizeof *slots);
}

/* Fills slots[0..nslots) for a non-empty tensor. */
static void grid_map_slots(int ndim, const int64_t *sizes, const int64_t *strides, int64_t nslots,
                           struct grid_slot *slots) {
    struct grid_slot tmp[GRID_MAX_SLOTS];
    memset(slots, 0, (size_t)nslots * sizeof *slots);
    slots[0].count = 1; /* no dims yet: the empty index sits at slot 0 */
    for (int d = ndim - 1; d >= 0; d--) grid_add_dim(slots, tmp, nslots, d, sizes[d], strides[d]);
}

/* Smallest stride, among dims other than `skip` that have size > 1, that is
 * at least `span`; 0 when none. */
static int64_t grid_next_stride(int ndim, const int64_t *sizes, const int64_t *strides, int skip,
                                int64_t span, int *dim_out) {
    int64_t best = 0;
    *dim_out = -1;
    for (int d = 0; d < ndim; d++) {
        if (d == skip || sizes[d] <= 1 || strides[d] < span || strides[d] == 0) continue;
        if (best == 0 || strides[d] < best) best = strides[d], *dim_out = d;
    }
    return best;
}

/* The row rule: k is the last dim (logical order) that moves through storage
 * (size > 1, stride > 0), usually W; a row is one step of the dim just outside
 * k's run, i.e. the smallest stride >= k's span. So NCHW rows hold one w run,
 * NHWC rows one w run of whole pixels (C*W), padded rows their full pitch.
 * Returns 0 (one row = everything) when no dim steps outside the run. */
static int64_t grid_row_len(int ndim, const int64_t *sizes, const int64_t *strides, int *dim_out,
                            int *run_out) {
    int k = -1;
    for (int d = ndim - 1; d >= 0 && k < 0; d--)
        if (sizes[d] > 1 && strides[d] > 0) k = d;
    *dim_out = -1;
    *run_out = k;
    if (k < 0) return 0;
    return grid_next_stride(ndim, sizes, strides, k, strides[k] * (sizes[k] - 1) + 1, dim_out);
}

/* Channel runs for the "channel order" line: a channels-first C steps over a
 * whole plane (group = C's stride); a C stored innermost groups one pixel (the
 * next stride >= C's span). 0: no break (also for a broadcast or size-1 C). */
static int64_t grid_channel_group(int ndim, const int64_t *sizes, const int64_t *strides) {
    int dim;
    if (sizes[1] <= 1 || strides[1] == 0) return 0;
    if (strides[1] > 1) return strides[1];
    return grid_next_stride(ndim, sizes, strides, 1, sizes[1], &dim);
}

static bool grid_has_channels(int ndim) { return ndim >= 3 && ndim <= 5; }

static const char *grid_dim_name(int ndim, int d) {
    static const char *const names[3][5] = {
        {"N", "C", "L"}, {"N", "C", "H", "W"}, {"N", "C", "D", "H", "W"}};
    static char buf[16];
    if (grid_has_channels(ndim)) return names[ndim - 3][d];
    snprintf(buf, sizeof buf, "dim %d", d);
    return buf;
}

/* Channel token: a letter A.. for C <= 26, else "c<i>." */
static int grid_channel_token(char *buf, size_t len, int64_t c, int64_t nc) {
    if (nc <= 26) return snprintf(buf, len, "%c", (char)('A' + c));
    return snprintf(buf, len, "c%lld.", (long long)c);
}

/* One cell: rank 3-5 "[n:]<channel><spatial>" (spatial digits run together
 * when every spatial size is <= 10, else comma-separated); other ranks the
 * index as "i,j,..". "()" for rank 0. */
static void grid_cell(char *buf, size_t len, int ndim, const int64_t *sizes, const int64_t *idx) {
    size_t pos = 0;
#define GRID_PUT(...)                                                                              \
    do {                                                                                           \
        int w_ = snprintf(buf + pos, pos < len ? len - pos : 0, __VA_ARGS__);                      \
        if (w_ > 0) pos += (size_t)w_;                                                             \
    } while (0)
    if (ndim == 0) {
        GRID_PUT("()");
        return;
    }
    if (!grid_has_channels(ndim)) {
        for (int d = 0; d < ndim; d++) GRID_PUT(d ? ",%lld" : "%lld", (long long)idx[d]);
        return;
    }
    bool tight = true;
    for (int d = 2; d < ndim; d++) tight = tight && sizes[d] <= 10;
    if (sizes[0] > 1) GRID_PUT("%lld:", (long long)idx[0]);
    if (pos < len) pos += (size_t)grid_channel_token(buf + pos, len - pos, idx[1], sizes[1]);
    for (int d = 2; d < ndim; d++)
        GRID_PUT((d > 2 && !tight) ? ",%lld" : "%lld", (long long)idx[d]);
#undef GRID_PUT
}

/* Summary of the shown slots, for the legend. */
struct grid_stats {
    int64_t gaps, shared;
    uint64_t min_share, max_share;
    int last_used; /* a slot to spell out as the legend's example */
};

static struct grid_stats grid_collect(const struct grid_slot *slots, int64_t n) {
    struct grid_stats st = {0, 0, 0, 0, -1};
    for (int64_t s = 0; s < n; s++) {
        if (slots[s].count == 0) {
            st.gaps++;
            continue;
        }
        st.last_used = (int)s;
        if (slots[s].count < 2) continue;
        if (st.shared++ == 0 || slots[s].count < st.min_share) st.min_share = slots[s].count;
        if (slots[s].count > st.max_share) st.max_share = slots[s].count;
    }
    return st;
}

/* Draws the rows; returns true when a row was too wide and wrapped. Cells are
 * left-aligned in columns of cellw, with no trailing blanks. */
static bool grid_print_rows(int ndim, const int64_t *sizes, const struct grid_slot *slots,
                            int64_t n, int64_t rowlen, int cellw, int labelw) {
    int64_t per_line = GRID_MAX_LINE / (cellw + 1);
    if (per_line < 1) per_line = 1;
    bool wrapped = false;
    int pad = 0; /* blanks owed by the previous cell on this line */
    for (int64_t s = 0; s < n; s++) {
        int64_t col = s % rowlen;
        if (col == 0) {
            printf("%s  %*lld |", s ? "\n" : "", labelw, (long long)s);
            pad = 0;
        } else if (col % per_line == 0) {
            printf("\n  %*s :", labelw, "");
            pad = 0;
            wrapped = true;
        }
        char cell[GRID_CELL_LEN];
        if (slots[s].count == 0) {
            snprintf(cell, sizeof cell, "..");
        } else {
            grid_cell(cell, sizeof cell, ndim, sizes, slots[s].idx);
            if (slots[s].count > 1) strncat(cell, "*", sizeof cell - strlen(cell) - 1);
        }
        printf("%*s %s", pad, "", cell);
        pad = cellw - (int)strlen(cell);
    }
    putchar('\n');
    return wrapped;
}

/* The legend under the grid: the cell format with a worked example, the row
 * rule, and the gap / share markers when the picture has them. */
static void grid_print_legend(int ndim, const int64_t *sizes, const struct grid_slot *slots,
                              const struct grid_stats *st, int64_t rowlen, int rowdim, int rundim,
                              int64_t total, bool wrapped) {
    char cell[GRID_CELL_LEN];
    if (grid_has_channels(ndim)) {
        static const char *const spatial[3] = {"l", "h w", "d h w"};
        printf("legend: cell = %schannel %s, then %s", sizes[0] > 1 ? "batch n + ':', " : "",
               sizes[1] <= 26 ? "letter (A = c0, B = c1, ...)" : "as c<index>.", spatial[ndim - 3]);
        bool tight = true;
        for (int d = 2; d < ndim; d++) tight = tight && sizes[d] <= 10;
        if (ndim > 3) fputs(tight ? " digits" : " comma-separated", stdout);
    } else {
        printf("legend: cell = the logical index%s", ndim ? " (i0,i1,...)" : " of a scalar");
    }
    if (st->last_used >= 0 && grid_has_channels(ndim)) {
        const int64_t *ix = slots[st->last_used].idx;
        grid_cell(cell, sizeof cell, ndim, sizes, ix);
        printf("; e.g. %s = (", cell);
        for (int d = 0; d < ndim; d++)
            printf("%s%c%lld", d ? "," : "", tolower((unsigned char)grid_dim_name(ndim, d)[0]),
                   (long long)ix[d]);
        printf(")");
    }
    printf("\n");
    if (rowlen == total || rowdim < 0)
        printf("        one row = all %lld slot%s (no dim steps past the innermost run)\n",
               (long long)total, total == 1 ? "" : "s");
    else {
        printf("        one row = %lld slots = the stride of %s, ", (long long)rowlen,
               grid_dim_name(ndim, rowdim));
        printf("the dim stepping over whole %s runs\n", grid_dim_name(ndim, rundim));
    }
    printf("        row label = slot number after the offset%s\n",
           wrapped ? "; ':' continues a row too wide for one line" : "");
    if (st->gaps)
        printf("        .. = gap: no logical element uses this slot (padding; %lld shown)\n",
               (long long)st->gaps);
    if (st->shared) {
        printf("        * = %llu", (unsigned long long)st->min_share);
        if (st->min_share != st->max_share) printf(" to %llu", (unsigned long long)st->max_share);
        printf(" logical elements share this slot (stride-0 broadcast or overlapping strides); "
               "the cell names the first\n");
    }
}

/* "channel order: AAAA BBBB CCCC": the channel of each shown slot ('.' for
 * a gap), a space between channel runs (grid_channel_group). Rank 3-5 with
 * C <= 26 only. */
static void grid_print_channel_order(int ndim, const int64_t *sizes, const int64_t *strides,
                                     const struct grid_slot *slots, int64_t n, int64_t total) {
    if (!grid_has_channels(ndim)) return;
    if (sizes[1] > 26) {
        printf("channel order: (not drawn: more than 26 channels)\n");
        return;
    }
    int64_t group = grid_channel_group(ndim, sizes, strides);
    printf("channel order: ");
    for (int64_t s = 0; s < n; s++) {
        if (s > 0 && group > 0 && s % group == 0) putchar(' ');
        putchar(slots[s].count ? 'A' + (int)slots[s].idx[1] : '.');
    }
    printf(n < total ? " ...\n" : "\n");
}

/* Prints the picture for t (after mft_tensor_describe's text). */
static int print_grid(const mft_tensor *t) {
    int ndim = mft_tensor_ndim(t);
    const int64_t *sizes = mft_tensor_sizes(t);
    const int64_t *strides = mft_tensor_strides(t);
    int64_t offset = mft_tensor_offset(t);
    int64_t total = 0;
    if (mft_min_storage_numel(ndim, sizes, strides, &total) != MFT_OK) return -1;
    printf("memory order (storage slots after the offset, %lld in all):\n", (long long)total);
    if (offset > 0)
        printf("  (offset %lld slot%s skipped: storage slots before the first element)\n",
               (long long)offset, offset == 1 ? "" : "s");
    if (total == 0) {
        printf("  (no slots: the tensor has no elements)\n");
        return 0;
    }
    int64_t n = total < GRID_MAX_SLOTS ? total : GRID_MAX_SLOTS;
    struct grid_slot slots[GRID_MAX_SLOTS];
    grid_map_slots(ndim, sizes, strides, n, slots);

    int rowdim, rundim;
    int64_t rowlen = grid_row_len(ndim, sizes, strides, &rowdim, &rundim);
    if (rowlen <= 0) rowlen = total;
    int cellw = 2, labelw = snprintf(NULL, 0, "%lld", (long long)(n - 1));
    for (int64_t s = 0; s < n; s++) {
        char cell[GRID_CELL_LEN];
        if (!slots[s].count) continue;
        grid_cell(cell, sizeof cell, ndim, sizes, slots[s].idx);
        int w = (int)strlen(cell) + (slots[s].count > 1);
        if (w > cellw) cellw = w;
    }
    bool wrapped = grid_print_rows(ndim, sizes, slots, n, rowlen, cellw, labelw);
    if (n < total)
        printf("  ... %lld more slot%s not drawn (the picture stops at %d)\n",
               (long long)(total - n), total - n == 1 ? "" : "s", GRID_MAX_SLOTS);
    struct grid_stats st = grid_collect(slots, n);
    grid_print_legend(ndim, sizes, slots, &st, rowlen, rowdim, rundim, total, wrapped);
    grid_print_channel_order(ndim, sizes, strides, slots, n, total);
    return 0;
}

/* A blocked tensor (docs/spec.md §7): the slots in rows of one inner tile
 * (the product of the block sizes: 16 lanes of nChw16c), each cell the
 * logical element there or "__" for a pad lane, from mft_layout_slot. */
static int print_grid_blocked(const mft_tensor *t) {
    mft_layout l;
    int64_t total = 0, tile = 1;
    if (mft_tensor_layout(t, &l) != MFT_OK || mft_layout_storage_numel(&l, &total) != MFT_OK)
        return -1;
    for (int k = 0; k < l.nblocks; k++) tile *= l.block_size[k];
    printf("memory order (storage slots, %lld in all, rows of one %lld-slot block tile):\n",
           (long long)total, (long long)tile);
    int64_t n = total < GRID_MAX_SLOTS ? total : GRID_MAX_SLOTS;
    int cellw = 2, labelw = snprintf(NULL, 0, "%lld", (long long)(n - 1));
    char cells[GRID_MAX_SLOTS][GRID_CELL_LEN];
    int64_t pads = 0;
    for (int64_t s = 0; s < n; s++) {
        int64_t idx[MFT_MAX_DIMS];
        mft_layout_slot_kind kind;
        if (mft_layout_slot(&l, s, idx, &kind) != MFT_OK) return -1;
        if (kind == MFT_SLOT_ELEMENT) grid_cell(cells[s], sizeof cells[s], l.ndim, l.sizes, idx);
        else snprintf(cells[s], sizeof cells[s], "%s", kind == MFT_SLOT_PAD ? "__" : "..");
        pads += kind == MFT_SLOT_PAD;
        int w = (int)strlen(cells[s]);
        if (w > cellw) cellw = w;
    }
    for (int64_t s = 0; s < n; s += tile) {
        printf("  %*lld |", labelw, (long long)s);
        for (int64_t j = s; j < s + tile && j < n; j++) printf(" %*s", cellw, cells[j]);
        printf("\n");
    }
    if (n < total)
        printf("  ... %lld more slot%s not drawn (the picture stops at %d)\n",
               (long long)(total - n), total - n == 1 ? "" : "s", GRID_MAX_SLOTS);
    printf("legend: a cell names the element in the slot (channel letter A=c0, B=c1, ..., then "
           "the spatial index); '__' is a pad lane (always zero), '..' a gap; %lld of the %lld "
           "slots drawn are pad lanes\n",
           (long long)pads, (long long)n);
    return 0;
}

/* "# built with HOW" (unless how is empty), then mft_tensor_describe's text;
 * 1 (t released, message printed) when out of memory. */
static int print_analysis(mft_tensor *t, const char *how) {
    size_t need = mft_tensor_describe(t, NULL, 0);
    char *text = malloc(need + 1);
    if (!text) {
        mft_tensor_release(t);
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }
    mft_tensor_describe(t, text, need + 1);
    if (how[0]) printf("# built with %s\n", how);
    fputs(text, stdout);
    if (need == 0 || text[need - 1] != '\n') putchar('\n');
    free(text);
    return 0;
}

/* --format nchw16c / nchw8c: the blocked tags (false for other names). */
static bool parse_blocked_format(const char *s, mft_layout_tag *tag) {
    if (ieq(s, "nchw16c") || ieq(s, "nc1hwc0")) return *tag = MFT_LAYOUT_NCHW16C, true;
    if (ieq(s, "nchw8c")) return *tag = MFT_LAYOUT_NCHW8C, true;
    return false;
}

enum layout_kind {
    BY_DEFAULT,
    BY_FORMAT,
    BY_STRIDES,
    BY_LETTERS,
    BY_MINOR_TO_MAJOR,
    BY_ONEDNN,
    BY_ASCEND,
    BY_XLA
};
enum { OPT_OFFSET = BY_XLA + 1, OPT_DTYPE, OPT_TO, OPT_OP, OPT_IN, OPT_SAFETENSORS, OPT_NAME, OPT_NPY, OPT_AS };
#define MAX_INPUTS 8 /* --in given at most this often */

/* Options taking a value; the layout ones use their enum layout_kind. */
static const struct explain_option {
    const char *shortname, *longname, *alias;
    int kind;
} options[] = {
    {"-f", "--format", "--from", BY_FORMAT},
    {"-s", "--strides", NULL, BY_STRIDES},
    {"-l", "--layout", "--letters", BY_LETTERS},
    {"-m", "--minor-to-major", "--minor_to_major", BY_MINOR_TO_MAJOR},
    {"--onednn", "--onednn", "--dnnl", BY_ONEDNN},
    {"--ascend", "--ascend", NULL, BY_ASCEND},
    {"--xla", "--xla", NULL, BY_XLA},
    {"-o", "--offset", NULL, OPT_OFFSET},
    {"-d", "--dtype", NULL, OPT_DTYPE},
    {"-t", "--to", NULL, OPT_TO},
    {"-O", "--op", NULL, OPT_OP},
    {"-i", "--in", NULL, OPT_IN},
    {"--safetensors", "--safetensors", NULL, OPT_SAFETENSORS},
    {"-n", "--name", NULL, OPT_NAME},
    {"--npy", "--npy", NULL, OPT_NPY},
    {"--as", "--as", NULL, OPT_AS},
};

/* Note [What --format builds]
 * --format FMT builds a fresh tensor packed in FMT (mft_empty). When C == 1 or
 * every spatial size is 1, that is not what converting a tensor of the other
 * format to FMT returns: mft_to_format / mft_contiguous keep the strides,
 * which already fit both formats, and only record the tag. So next to a
 * --format tensor the tool states what the conversions return, computed by
 * running them, and points at the --to explanation. */
static void note_conversions(const mft_tensor *t, const char *sizes_arg, mft_format fmt,
                             mft_dtype dtype) {
    int ndim = mft_tensor_ndim(t);
    if (ndim < 3 || ndim > 5) return;
    mft_format other = fmt == MFT_CHANNELS_LAST ? MFT_CONTIGUOUS : MFT_CHANNELS_LAST;
    mft_tensor *u = mft_empty(ndim, mft_tensor_sizes(t), dtype, other);
    if (!u) explain_lib_error("mft_empty");
    mft_tensor *v[2] = {mft_to_format(u, fmt), mft_contiguous(u, fmt)};
    if (!v[0] || !v[1]) {
        mft_tensor_release(v[0]);
        mft_tensor_release(v[1]);
        mft_tensor_release(u);
        explain_lib_error(v[0] ? "mft_contiguous" : "mft_to_format");
    }
    static const char *const fns[2] = {"mft_to_format", "mft_contiguous"};
    size_t bytes = (size_t)ndim * sizeof(int64_t);
    bool differs[2], shared[2];
    for (int k = 0; k < 2; k++) {
        differs[k] = memcmp(mft_tensor_strides(v[k]), mft_tensor_strides(t), bytes) != 0;
        shared[k] = mft_tensor_shares_storage(u, v[k]);
    }
    bool one_line = differs[0] && differs[1] && shared[0] == shared[1] &&
                    !memcmp(mft_tensor_strides(v[0]), mft_tensor_strides(v[1]), bytes);
    for (int k = 0; k < 2; k++) {
        if (!differs[k] || (one_line && k == 1)) continue;
        char sv[256];
        explain_dims(sv, sizeof sv, ndim, mft_tensor_strides(v[k]));
        printf("# note: %s%s(<%s tensor of these sizes>, %s) return%s strides %s, not these (%s)\n",
               one_line ? "mft_to_format and " : "", one_line ? fns[1] : fns[k],
               explain_layout_name(ndim, other), mft_format_name(fmt), one_line ? "" : "s", sv,
               shared[k] ? "no copy: strides already fit both formats; tag recorded" : "a copy");
    }
    if (differs[0] || differs[1]) {
        char from[8], to[8];
        snprintf(from, sizeof from, "%s", explain_layout_name(ndim, other));
        snprintf(to, sizeof to, "%s", explain_layout_name(ndim, fmt));
        for (char *c = from; *c; c++) *c = (char)tolower((unsigned char)*c);
        for (char *c = to; *c; c++) *c = (char)tolower((unsigned char)*c);
        printf("#       `%s %s --from %s --to %s` explains the conversions\n", prog, sizes_arg,
               from, to);
    }
    mft_tensor_release(v[0]);
    mft_tensor_release(v[1]);
    mft_tensor_release(u);
}

/* The analysis and (grid) the picture of t, plain or blocked; releases t.
 * Returns the exit status. */
static int show_and_release(mft_tensor *t, const char *how, bool grid) {
    if (print_analysis(t, how) != 0) return 1;
    int rc = 0;
    if (grid) rc = mft_tensor_is_blocked(t) ? print_grid_blocked(t) : print_grid(t);
    mft_tensor_release(t);
    if (rc != 0) explain_lib_error("mft_layout_slot");
    return 0;
}

/* --npy FILE [--as FMT]: the file's header, then the analysis (or --to) of
 * what mft_load_npy returns. */
static int explain_npy_file(const char *path, const char *as_arg, bool other_source, bool grid,
                            const mft_format *to) {
    if (other_source)
        explain_bad_args("--npy takes the tensor from the file, not from sizes, layout "
                         "options, --offset or --op");
    mft_format as = MFT_CONTIGUOUS;
    if (as_arg && !explain_parse_format(as_arg, &as) && !ieq(as_arg, "preserve"))
        explain_bad_args("unknown format '%s' for --as (contiguous or channels_last/nhwc)",
                         as_arg);
    if (as_arg && ieq(as_arg, "preserve")) as = MFT_PRESERVE;
    explain_npy_header(path);
    mft_tensor *t = mft_load_npy(path, as);
    if (!t) explain_lib_error("mft_load_npy");
    char how[1200];
    snprintf(how, sizeof how, "mft_load_npy('%s', %s)", path, mft_format_name(as));
    if (to) {
        int rc = explain_convert(t, how, *to);
        mft_tensor_release(t);
        return rc;
    }
    return show_and_release(t, how, grid);
}

int main(int argc, char **argv) {
    const char *sizes_arg = NULL;
    const char *layout_arg = NULL; /* value of the one layout option given */
    char layout_opt[32] = "";      /* its name, for messages */
    enum layout_kind kind = BY_DEFAULT;
    const char *offset_arg = NULL;
    mft_dtype dtype = MFT_F32;
    bool grid = true; /* --grid / --no-grid: the last one wins */
    const char *to_arg = NULL, *op_arg = NULL, *st_arg = NULL, *name_arg = NULL;
    const char *npy_arg = NULL, *as_arg = NULL;
    const char *in_args[MAX_INPUTS];
    int nin = 0;

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
        if (!strcmp(a, "--grid") || !strcmp(a, "--no-grid")) {
            grid = a[2] == 'g';
            continue;
        }
        if (!strcmp(a, "--ascii")) continue; /* the output is always ASCII */
        if (!(a[0] == '-' && a[1] != '\0' && !isdigit((unsigned char)a[1]))) {
            /* not an option (negative numbers and "-" are values): the sizes */
            if (sizes_arg) explain_bad_args("unexpected argument '%s' (sizes already given)", a);
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
        if (!opt) explain_bad_args("unknown option '%.*s'", (int)n, a);
        const char *val = NULL;
        if (eq) {
            val = eq + 1;
        } else if (i + 1 < argc) {
            val = argv[++i];
        } else {
            explain_bad_args("option '%s' needs a value", a);
        }
        switch (opt->kind) {
        case OPT_OFFSET: offset_arg = val; continue;
        case OPT_DTYPE:
            if (!parse_dtype(val, &dtype))
                explain_bad_args("unknown dtype '%s' (f32 f64 i32 i64 u8)", val);
            continue;
        case OPT_TO:
            if (to_arg) explain_bad_args("--to given twice ('%s' and '%s')", to_arg, val);
            to_arg = val;
            continue;
        case OPT_OP:
            if (op_arg) explain_bad_args("--op given twice ('%s' and '%s')", op_arg, val);
            op_arg = val;
            continue;
        case OPT_IN:
            if (nin == MAX_INPUTS) explain_bad_args("more than %d --in inputs", MAX_INPUTS);
            in_args[nin++] = val;
            continue;
        case OPT_SAFETENSORS: st_arg = val; continue;
        case OPT_NAME: name_arg = val; continue;
        case OPT_NPY: npy_arg = val; continue;
        case OPT_AS: as_arg = val; continue;
        default: break;
        }
        enum layout_kind k = (enum layout_kind)opt->kind;
        const char *name = opt->longname;
        if (kind != BY_DEFAULT)
            explain_bad_args("%s and %s both describe the layout; give only one", layout_opt, name);
        kind = k;
        layout_arg = val;
        snprintf(layout_opt, sizeof layout_opt, "%s", name);
    }

    mft_format to_fmt = MFT_CONTIGUOUS;
    if (to_arg && !explain_parse_format(to_arg, &to_fmt))
        explain_bad_args("unknown format '%s' for --to (contiguous/nchw or channels_last/nhwc)",
                         to_arg);

    /* ---- --safetensors FILE --name T: a tensor of a file */
    if (st_arg || name_arg) {
        if (!st_arg || !name_arg)
            explain_bad_args("--safetensors FILE and --name T go together");
        if (sizes_arg || kind != BY_DEFAULT || offset_arg || op_arg || to_arg || nin)
            explain_bad_args("--safetensors takes the tensor from the file; no sizes, layout, "
                             "--offset, --op or --to");
        mft_tensor *t = explain_safetensors(st_arg, name_arg);
        char how[600];
        snprintf(how, sizeof how, "mft_safetensors_load('%s'), tensor '%s'", st_arg, name_arg);
        return show_and_release(t, how, grid);
    }
    if (npy_arg) return explain_npy_file(npy_arg, as_arg, sizes_arg || kind != BY_DEFAULT ||
                                                        offset_arg || op_arg || nin,
                                         grid, to_arg ? &to_fmt : NULL);
    if (as_arg) explain_bad_args("--as needs --npy (the file it reads)");

    /* ---- --op: the inputs come from --in, not from SIZES and the layout options */
    if (op_arg) {
        if (sizes_arg)
            explain_bad_args("--op takes its inputs from --in, not from sizes ('%s')", sizes_arg);
        if (kind != BY_DEFAULT || offset_arg)
            explain_bad_args("--op takes its inputs from --in SPEC (FMT:SIZES[@STRIDES]), not "
                             "from %s",
                             kind != BY_DEFAULT ? layout_opt : "--offset");
        return explain_op(op_arg, nin, in_args, to_fmt, to_arg != NULL, dtype);
    }
    if (nin > 0) explain_bad_args("--in needs --op (the op the inputs are for)");
    if (!sizes_arg) {
        usage(stderr);
        return EXIT_BAD_ARGS;
    }

    int64_t sizes[MFT_MAX_DIMS] = {0};
    int ndim = explain_parse_list(sizes_arg, sizes, "sizes");

    int64_t offset = 0;
    if (offset_arg) {
        if (!explain_parse_i64(offset_arg, offset_arg + strlen(offset_arg), &offset))
            explain_bad_args("offset: '%s' is not an integer", offset_arg);
        if (offset < 0) explain_bad_args("offset: %s is negative", offset_arg);
    }

    /* ---- the layout: a named format, or strides from one of the descriptions */
    mft_format fmt = MFT_CONTIGUOUS;
    int64_t strides[MFT_MAX_DIMS] = {0};
    char how[1024];
    char dims[256];
    explain_dims(dims, sizeof dims, ndim, sizes);
    mft_layout_tag btag;
    if (kind == BY_FORMAT && parse_blocked_format(layout_arg, &btag)) kind = BY_ONEDNN;
    if (kind == BY_ONEDNN || kind == BY_ASCEND || kind == BY_XLA) {
        /* ---- a descriptor (docs/spec.md §7): the tensor is laid out by it */
        if (offset != 0) explain_bad_args("%s: descriptors start at offset 0 here", layout_opt);
        if (to_arg) explain_bad_args("--to explains plain formats only (not %s)", layout_opt);
        mft_layout l;
        mft_status st;
        if (kind == BY_FORMAT || (kind == BY_ONEDNN && parse_blocked_format(layout_arg, &btag)))
            st = mft_layout_for_tag(ndim, sizes, btag, &l);
        else if (kind == BY_ONEDNN)
            st = mft_layout_from_onednn(ndim, sizes, layout_arg, &l);
        else if (kind == BY_ASCEND)
            st = mft_layout_from_ascend(ndim, sizes, layout_arg, mft_dtype_size(dtype), &l);
        else
            st = mft_layout_from_xla(ndim, sizes, layout_arg, &l);
        if (st != MFT_OK) explain_bad_args("%s", mft_last_error_message());
        mft_tensor *t = mft_empty_layout(&l, dtype);
        if (!t) explain_lib_error("mft_empty_layout");
        snprintf(how, sizeof how, "mft_empty_layout(%s '%s', sizes=%s, %s)", layout_opt,
                 layout_arg, dims, mft_dtype_name(dtype));
        return show_and_release(t, how, grid);
    }
    switch (kind) {
    case BY_DEFAULT:
    case BY_FORMAT:
        if (kind == BY_FORMAT && !explain_parse_format(layout_arg, &fmt))
            explain_bad_args("unknown format '%s' (contiguous/nchw or channels_last/cl/nhwc)",
                             layout_arg);
        break;
    case BY_STRIDES: {
        int n = explain_parse_list(layout_arg, strides, "strides");
        if (n != ndim)
            explain_bad_args("%d stride%s given for %d size%s", n, n == 1 ? "" : "s", ndim,
                             ndim == 1 ? "" : "s");
        break;
    }
    case BY_LETTERS: {
        char letters[MFT_MAX_DIMS + 2];
        size_t n = strlen(layout_arg);
        if (n >= sizeof letters) explain_bad_args("layout '%s' is too long", layout_arg);
        for (size_t i = 0; i <= n; i++) letters[i] = (char)toupper((unsigned char)layout_arg[i]);
        if (mft_strides_from_letters(ndim, sizes, letters, strides) != MFT_OK)
            explain_lib_error("mft_strides_from_letters");
        break;
    }
    case BY_ONEDNN:
    case BY_ASCEND:
    case BY_XLA: break; /* handled above */
    case BY_MINOR_TO_MAJOR: {
        int64_t m64[MFT_MAX_DIMS];
        int m2m[MFT_MAX_DIMS];
        int n = explain_parse_list(layout_arg, m64, "minor-to-major");
        if (n != ndim)
            explain_bad_args("minor-to-major has %d entr%s for %d dims", n, n == 1 ? "y" : "ies",
                             ndim);
        for (int i = 0; i < n; i++) {
            if (m64[i] < INT_MIN || m64[i] > INT_MAX)
                explain_bad_args("minor-to-major: %lld is out of range", (long long)m64[i]);
            m2m[i] = (int)m64[i];
        }
        if (mft_strides_from_minor_to_major(ndim, sizes, m2m, strides) != MFT_OK)
            explain_lib_error("mft_strides_from_minor_to_major");
        break;
    }
    }

    /* ---- build the tensor (zeroed when it is converted: the copies read it) */
    mft_tensor *t = NULL;
    if ((kind == BY_DEFAULT || kind == BY_FORMAT) && offset == 0) {
        t = to_arg ? mft_zeros(ndim, sizes, dtype, fmt) : mft_empty(ndim, sizes, dtype, fmt);
        if (!t) explain_lib_error(to_arg ? "mft_zeros" : "mft_empty");
        snprintf(how, sizeof how, "%s(sizes=%s, %s, %s)", to_arg ? "mft_zeros" : "mft_empty", dims,
                 mft_dtype_name(dtype), mft_format_name(fmt));
    } else {
        if (kind == BY_DEFAULT || kind == BY_FORMAT) {
            /* A named format at an offset: wrap packed strides, then declare
             * the format with the no-copy mft_to_format. */
            if (mft_strides_for_format(ndim, sizes, fmt, strides) != MFT_OK)
                explain_lib_error("mft_strides_for_format");
        }
        t = explain_wrap_strided(ndim, sizes, strides, offset, dtype);
        char sdims[256];
        explain_dims(sdims, sizeof sdims, ndim, strides);
        snprintf(how, sizeof how,
                 "mft_from_blob(buffer of %lld %s elements, sizes=%s, strides=%s, offset=%lld)",
                 (long long)(mft_tensor_storage_numel(t)), mft_dtype_name(dtype), dims, sdims,
                 (long long)offset);
        if (kind == BY_FORMAT) {
            mft_tensor *u = mft_to_format(t, fmt);
            mft_tensor_release(t);
            if (!u) explain_lib_error("mft_to_format");
            t = u;
            size_t used = strlen(how);
            snprintf(how + used, sizeof how - used, " then mft_to_format(%s)",
                     mft_format_name(fmt));
        }
    }

    /* ---- --to: what the conversions return */
    if (to_arg) {
        int rc = explain_convert(t, how, to_fmt);
        mft_tensor_release(t);
        return rc;
    }

    /* ---- the library's analysis */
    if (kind == BY_FORMAT && offset == 0) {
        printf("# built with %s\n", how);
        note_conversions(t, sizes_arg, fmt, dtype);
        how[0] = '\0';
    }
    if (print_analysis(t, how) != 0) return 1;
    if (grid && print_grid(t) != 0) {
        mft_tensor_release(t);
        explain_lib_error("mft_min_storage_numel");
    }
    mft_tensor_release(t);
    return 0;
}
