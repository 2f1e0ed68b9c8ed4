/* tests/io/test_checkpoint.c — mft/io.h checkpoints: the byte layout of a small
 * file against docs/checkpoint-format.md (built independently here), round
 * trips of F32/F64/I64/U8/I32, channels_last, non-dense (sliced, transposed,
 * broadcast), 0-dim and empty tensors through both loaders; refusal of every
 * single-byte corruption, every truncation, appended bytes, wrong magic and
 * version, files with a valid checksum but malformed entries, and name /
 * sizes / dtype mismatches, each leaving the targets untouched (hash before
 * and after); save errors (duplicate names, unwritable path) leaving no file. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, access */
#define XXH_INLINE_ALL
#include <xxhash.h>
#include <sys/stat.h>
#include <unistd.h>
#include "fail_alloc.h"
#include "test_util.h"

static char tmpdir[256];

static void tmp_path(char *buf, size_t len, const char *name) {
    snprintf(buf, len, "%s/%s", tmpdir, name);
}

static bool write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fwrite(data, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

static bool exists(const char *p) { return access(p, F_OK) == 0; }

/* Logical values: a function of the linear index, exact in every dtype. */
static void fill(mft_tensor *t, int salt) { tu_formula_walk(t, salt, true); }

/* ------------------------------------------------------------------ the documented layout */
static void put_u32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put_u64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void test_layout_bytes(void) {
    /* one U8 tensor "w" of sizes [3] = {1,2,3}, then one F64 0-dim "s" = -0.5 */
    const int64_t s3[1] = {3};
    mft_tensor *w = mft_empty(1, s3, MFT_U8, MFT_CONTIGUOUS);
    for (int i = 0; i < 3; i++) mft_tensor_set(w, (int64_t[]){i}, i + 1);
    mft_tensor *s = mft_full(0, NULL, MFT_F64, MFT_CONTIGUOUS, -0.5);
    char p[400];
    tmp_path(p, sizeof p, "layout.ckpt");
    const char *names[2] = {"w", "s"};
    const mft_tensor *ts[2] = {w, s};
    CHECK(mft_save_tensors(p, 2, names, ts) == MFT_OK);
    unsigned char want[256];
    memset(want, 0, sizeof want);
    memcpy(want, "MFTCKPT", 8); /* with its NUL */
    put_u32(want + 8, 1);
    put_u32(want + 12, 2);
    size_t k = 16;
    put_u32(want + k, 1), k += 4;
    want[k++] = 'w';
    want[k++] = 4, want[k++] = 0, want[k++] = 1, want[k++] = 0; /* u8, contiguous, ndim 1 */
    put_u64(want + k, 3), k += 8;                               /* sizes */
    put_u64(want + k, 1), k += 8;                               /* strides */
    put_u64(want + k, 0), k += 8;                               /* offset */
    put_u64(want + k, 3), k += 8;                               /* payload bytes */
    CHECK_EQ_I(k, 57);
    k = 64;                                                     /* zero padding */
    want[k++] = 1, want[k++] = 2, want[k++] = 3;
    put_u32(want + k, 1), k += 4;
    want[k++] = 's';
    want[k++] = 1, want[k++] = 0, want[k++] = 0, want[k++] = 0; /* f64, contiguous, ndim 0 */
    put_u64(want + k, 0), k += 8;
    put_u64(want + k, 8), k += 8;
    CHECK_EQ_I(k, 92);
    k = 128;
    double mh = -0.5;
    uint64_t bits;
    memcpy(&bits, &mh, 8);
    put_u64(want + k, bits), k += 8;
    put_u64(want + k, XXH3_64bits(want, k)), k += 8;
    size_t n = 0;
    unsigned char *got = tu_read_file(p, &n);
    CHECK_EQ_I(n, k);
    if (got && n == k) {
        size_t first = k;
        for (size_t i = 0; i < k; i++)
            if (got[i] != want[i]) {
                first = i;
                break;
            }
        CHECK_MSG(first == k, "byte %zu differs: %02x vs %02x", first, got[first], want[first]);
    }
    free(got);
    /* and a file written by hand loads */
    tmp_path(p, sizeof p, "byhand.ckpt");
    want[66] = 9; /* w = {1,2,9} */
    put_u64(want + 136, XXH3_64bits(want, 136));
    CHECK(write_file(p, want, 144));
    mft_tensor *w2 = mft_zeros(1, s3, MFT_U8, MFT_CONTIGUOUS), *s2 = mft_zeros(0, NULL, MFT_F64, MFT_CONTIGUOUS);
    mft_tensor *tg[2] = {w2, s2};
    CHECK(mft_load_tensors_into(p, 2, names, tg) == MFT_OK);
    CHECK(mft_tensor_get(w2, (int64_t[]){2}) == 9 && mft_tensor_get(w2, (int64_t[]){0}) == 1);
    CHECK(mft_tensor_get(s2, NULL) == -0.5);
    mft_tensor_release(w2);
    mft_tensor_release(s2);
    mft_tensor_release(w);
    mft_tensor_release(s);
}

/* ------------------------------------------------------------------ round trips */
enum { NT = 12 };
typedef struct set {
    const char *names[NT];
    mft_tensor *t[NT];
    mft_tensor *keep[NT]; /* bases of views */
} set;

static void make_set(set *s) {
    memset(s, 0, sizeof *s);
    int i = 0;
    const int64_t a[2] = {3, 4}, b[4] = {2, 3, 4, 5}, c[1] = {7}, d[3] = {2, 3, 5}, e[2] = {0, 3},
                  f[4] = {2, 0, 3, 3}, g[4] = {2, 4, 3, 3}, h[2] = {4, 6};
    s->names[i] = "f32.weight", s->t[i++] = mft_empty(2, a, MFT_F32, MFT_CONTIGUOUS);
    s->names[i] = "f64.nhwc", s->t[i++] = mft_empty(4, b, MFT_F64, MFT_CHANNELS_LAST);
    s->names[i] = "i64.steps", s->t[i++] = mft_empty(1, c, MFT_I64, MFT_CONTIGUOUS);
    s->names[i] = "u8.nlc", s->t[i++] = mft_empty(3, d, MFT_U8, MFT_CHANNELS_LAST);
    s->names[i] = "scalar", s->t[i++] = mft_empty(0, NULL, MFT_F32, MFT_CONTIGUOUS);
    s->names[i] = "empty", s->t[i++] = mft_empty(2, e, MFT_F64, MFT_CONTIGUOUS);
    s->names[i] = "empty.nhwc", s->t[i++] = mft_empty(4, f, MFT_F32, MFT_CHANNELS_LAST);
    s->names[i] = "i32.transposed";
    s->keep[i] = mft_empty(2, h, MFT_I32, MFT_CONTIGUOUS);
    fill(s->keep[i], i);
    s->t[i] = mft_transpose(s->keep[i], 0, 1); /* dense, not contiguous */
    i++;
    s->names[i] = "f32.nhwc.sliced";                 /* C 1..3 of 4: non-dense NHWC */
    s->keep[i] = mft_empty(4, g, MFT_F32, MFT_CHANNELS_LAST);
    fill(s->keep[i], i);
    s->t[i] = mft_narrow(s->keep[i], 1, 1, 2);
    i++;
    s->names[i] = "f64.step"; /* every other column: gaps */
    s->keep[i] = mft_empty(2, h, MFT_F64, MFT_CONTIGUOUS);
    fill(s->keep[i], i);
    s->t[i] = mft_slice(s->keep[i], 1, 0, 6, 2);
    i++;
    s->names[i] = "i64.broadcast"; /* stride 0 */
    s->keep[i] = mft_empty(2, (const int64_t[]){1, 5}, MFT_I64, MFT_CONTIGUOUS);
    fill(s->keep[i], i);
    s->t[i] = mft_expand(s->keep[i], 2, (const int64_t[]){3, 5});
    i++;
    s->names[i] = "f32.nchw.c1"; /* C == 1, declared contiguous (ambiguous strides) */
    s->t[i++] = mft_empty(4, (const int64_t[]){2, 1, 3, 3}, MFT_F32, MFT_CONTIGUOUS);
    for (int k = 0; k < NT; k++)
        if (!s->keep[k]) fill(s->t[k], k);
}

static void free_set(set *s) {
    for (int k = 0; k < NT; k++) {
        mft_tensor_release(s->t[k]);
        mft_tensor_release(s->keep[k]);
    }
}

static void test_round_trip(void) {
    set s;
    make_set(&s);
    char p[400];
    tmp_path(p, sizeof p, "rt.ckpt");
    CHECK(mft_save_tensors(p, NT, s.names, (const mft_tensor *const *)s.t) == MFT_OK);
    char tmp[420];
    snprintf(tmp, sizeof tmp, "%s.tmp", p);
    CHECK(exists(p) && !exists(tmp));

    /* inspection: recorded strides and tags; opened inside a scope, the list
     * is not scope-owned */
    int n = 0;
    char **names = NULL;
    mft_tensor **ts = NULL;
    CHECK(mft_scope_begin() == MFT_OK);
    mft_status st = mft_load_tensors(p, &n, &names, &ts);
    CHECK(mft_scope_end() == MFT_OK);
    CHECK_MSG(st == MFT_OK, "%s", mft_last_error_message());
    CHECK_EQ_I(n, NT);
    for (int k = 0; k < n && k < NT; k++) {
        const mft_tensor *o = s.t[k], *l = ts[k];
        CHECK_MSG(strcmp(names[k], s.names[k]) == 0, "entry %d is '%s'", k, names[k]);
        CHECK(mft_tensor_dtype(l) == mft_tensor_dtype(o));
        CHECK(tu_has_sizes(l, mft_tensor_ndim(o), mft_tensor_sizes(o)));
        CHECK_MSG(mft_tensor_hash(l) == mft_tensor_hash(o), "'%s' values differ", s.names[k]);
        CHECK_MSG(mft_tensor_format(l) == mft_tensor_format(o), "'%s': tag %s vs %s", s.names[k],
                  mft_format_name(mft_tensor_format(l)), mft_format_name(mft_tensor_format(o)));
        int64_t want[MFT_MAX_DIMS];
        int nd = mft_tensor_ndim(o);
        if (mft_tensor_is_dense(o)) {
            memcpy(want, mft_tensor_strides(o), sizeof(int64_t) * (size_t)nd);
        } else {
            CHECK(mft_strides_for_format(nd, mft_tensor_sizes(o), mft_tensor_format(o), want) == MFT_OK);
        }
        bool same = true;
        for (int d = 0; d < nd; d++) same = same && mft_tensor_strides(l)[d] == want[d];
        CHECK_MSG(same, "'%s': strides differ", s.names[k]);
    }
    /* the transposed one kept its transposed strides; the NHWC one its NHWC strides */
    if (n == NT) {
        CHECK(mft_tensor_strides(ts[7])[0] == 1 && mft_tensor_strides(ts[7])[1] == 6);
        CHECK(mft_tensor_is_contiguous(ts[1], MFT_CHANNELS_LAST));
        CHECK(mft_tensor_is_contiguous(ts[8], MFT_CHANNELS_LAST));
    }
    mft_checkpoint_free_list(n, names, ts);

    /* load into targets of the other layout (and zero-filled) */
    mft_tensor *tg[NT];
    for (int k = 0; k < NT; k++) {
        const mft_tensor *o = s.t[k];
        int nd = mft_tensor_ndim(o);
        mft_format f = nd >= 3 && nd <= 5 && mft_tensor_format(o) == MFT_CONTIGUOUS ? MFT_CHANNELS_LAST
                                                                                   : MFT_CONTIGUOUS;
        tg[k] = mft_zeros(nd, mft_tensor_sizes(o), mft_tensor_dtype(o), f);
    }
    int64_t v0 = mft_tensor_version(tg[0]);
    CHECK(mft_load_tensors_into(p, NT, s.names, tg) == MFT_OK);
    for (int k = 0; k < NT; k++) {
        CHECK_MSG(mft_tensor_hash(tg[k]) == mft_tensor_hash(s.t[k]), "'%s' loaded values differ",
                  s.names[k]);
    }
    CHECK(mft_tensor_is_contiguous(tg[1], MFT_CONTIGUOUS)); /* targets keep their layout */
    CHECK(mft_tensor_version(tg[0]) > v0);
    /* a subset, in another order */
    const char *sub[2] = {"i64.steps", "f32.weight"};
    mft_tensor *st2[2] = {mft_zeros(1, (const int64_t[]){7}, MFT_I64, MFT_CONTIGUOUS),
                          mft_zeros(2, (const int64_t[]){3, 4}, MFT_F32, MFT_CONTIGUOUS)};
    CHECK(mft_load_tensors_into(p, 2, sub, st2) == MFT_OK);
    CHECK(mft_tensor_hash(st2[0]) == mft_tensor_hash(s.t[2]) &&
          mft_tensor_hash(st2[1]) == mft_tensor_hash(s.t[0]));
    mft_tensor_release(st2[0]);
    mft_tensor_release(st2[1]);
    for (int k = 0; k < NT; k++) mft_tensor_release(tg[k]);

    /* saving again replaces the file */
    const char *one[1] = {"only"};
    const mft_tensor *t1[1] = {s.t[0]};
    CHECK(mft_save_tensors(p, 1, one, t1) == MFT_OK);
    CHECK(mft_load_tensors(p, &n, &names, &ts) == MFT_OK);
    CHECK(n == 1 && strcmp(names[0], "only") == 0);
    mft_checkpoint_free_list(n, names, ts);
    /* an empty checkpoint */
    CHECK(mft_save_tensors(p, 0, NULL, NULL) == MFT_OK);
    CHECK(mft_load_tensors(p, &n, &names, &ts) == MFT_OK);
    CHECK(n == 0 && names == NULL && ts == NULL);
    free_set(&s);
}

/* ------------------------------------------------------------------ refusals */
typedef struct targets {
    mft_tensor *t[3];
    uint64_t hash[3];
    int64_t version[3];
} targets;
static const char *const TNAMES[3] = {"conv.weight", "bn.running_mean", "step"};

static void make_targets(targets *g) {
    g->t[0] = mft_empty(4, (const int64_t[]){2, 3, 2, 2}, MFT_F32, MFT_CHANNELS_LAST);
    g->t[1] = mft_empty(1, (const int64_t[]){3}, MFT_F64, MFT_CONTIGUOUS);
    g->t[2] = mft_empty(0, NULL, MFT_I64, MFT_CONTIGUOUS);
    for (int i = 0; i < 3; i++) {
        fill(g->t[i], 50 + i); /* differs from what the file holds */
        g->hash[i] = mft_tensor_hash(g->t[i]);
        g->version[i] = mft_tensor_version(g->t[i]);
    }
}

static bool untouched(const targets *g) {
    for (int i = 0; i < 3; i++)
        if (mft_tensor_hash(g->t[i]) != g->hash[i] || mft_tensor_version(g->t[i]) != g->version[i])
            return false;
    return true;
}

static void free_targets(targets *g) {
    for (int i = 0; i < 3; i++) mft_tensor_release(g->t[i]);
}

/* Writes the small reference checkpoint (the targets' shapes, other values). */
static unsigned char *small_file(const char *p, size_t *n) {
    targets src;
    make_targets(&src);
    for (int i = 0; i < 3; i++) fill(src.t[i], i);
    CHECK(mft_save_tensors(p, 3, TNAMES, (const mft_tensor *const *)src.t) == MFT_OK);
    free_targets(&src);
    return tu_read_file(p, n);
}

static void test_corruption(void) {
    char p[400], q[400];
    tmp_path(p, sizeof p, "small.ckpt");
    tmp_path(q, sizeof q, "bad.ckpt");
    size_t n = 0;
    unsigned char *good = small_file(p, &n);
    CHECK(good && n > 100 && n < 2000);
    if (!good) return;
    targets g;
    make_targets(&g);
    /* sanity: the good file loads */
    targets ok;
    make_targets(&ok);
    CHECK(mft_load_tensors_into(p, 3, TNAMES, ok.t) == MFT_OK);
    CHECK(!untouched(&ok));
    free_targets(&ok);

    int accepted = 0;
    for (size_t i = 0; i < n; i++) { /* every byte, two different flips */
        for (int m = 0; m < 2; m++) {
            unsigned char save = good[i];
            good[i] ^= m ? 0x80 : 0x01;
            CHECK(write_file(q, good, n));
            good[i] = save;
            mft_status st = mft_load_tensors_into(q, 3, TNAMES, g.t);
            if (st == MFT_OK) accepted++;
            mft_clear_error();
            int ln = 0;
            char **nm = NULL;
            mft_tensor **ts = NULL;
            if (mft_load_tensors(q, &ln, &nm, &ts) == MFT_OK) accepted++;
            mft_clear_error();
        }
    }
    CHECK_EQ_I(accepted, 0);
    CHECK(untouched(&g));
    int truncated_ok = 0;
    for (size_t len = 0; len < n; len++) {
        CHECK(write_file(q, good, len));
        if (mft_load_tensors_into(q, 3, TNAMES, g.t) == MFT_OK) truncated_ok++;
        mft_clear_error();
    }
    CHECK_EQ_I(truncated_ok, 0);
    CHECK(untouched(&g));
    /* specific messages */
    CHECK(write_file(q, good, n - 1));
    CHECK(mft_load_tensors_into(q, 3, TNAMES, g.t) == MFT_ERR_CORRUPT);
    CHECK_ERR(MFT_ERR_CORRUPT, "checksum");
    CHECK(write_file(q, good, 10));
    CHECK(mft_load_tensors_into(q, 3, TNAMES, g.t) == MFT_ERR_CORRUPT);
    CHECK_ERR(MFT_ERR_CORRUPT, "10 bytes");
    unsigned char *big = malloc(n + 1);
    memcpy(big, good, n);
    big[n] = 0;
    CHECK(write_file(q, big, n + 1));
    CHECK(mft_load_tensors_into(q, 3, TNAMES, g.t) == MFT_ERR_CORRUPT);
    CHECK_ERR(MFT_ERR_CORRUPT, "checksum");
    free(big);
    good[0] = 'X';
    CHECK(write_file(q, good, n));
    CHECK(mft_load_tensors_into(q, 3, TNAMES, g.t) == MFT_ERR_CORRUPT);
    CHECK_ERR(MFT_ERR_CORRUPT, "not an mft checkpoint");
    good[0] = 'M';
    good[8] = 3; /* a version this library does not know */
    CHECK(write_file(q, good, n));
    CHECK(mft_load_tensors_into(q, 3, TNAMES, g.t) == MFT_ERR_UNSUPPORTED);
    CHECK_ERR(MFT_ERR_UNSUPPORTED, "version 3");
    good[8] = 1;
    tmp_path(q, sizeof q, "nonexistent.ckpt");
    CHECK(mft_load_tensors_into(q, 3, TNAMES, g.t) == MFT_ERR_IO);
    CHECK_ERR(MFT_ERR_IO, "No such file");
    CHECK(mft_load_tensors_into(tmpdir, 3, TNAMES, g.t) == MFT_ERR_IO);
    CHECK_ERR(MFT_ERR_IO, "not a regular file");
    CHECK(untouched(&g));
    free(good);
    free_targets(&g);
}

/* Files whose checksum is right but whose entries are malformed: the parser's
 * own checks. Each edit is applied to the small file, then re-checksummed. */
static void test_valid_checksum_malformed(void) {
    char p[400], q[400];
    tmp_path(p, sizeof p, "small2.ckpt");
    tmp_path(q, sizeof q, "bad2.ckpt");
    size_t n = 0;
    unsigned char *good = small_file(p, &n);
    if (!good) return;
    targets g;
    make_targets(&g);
    /* entry 0 starts at 16: name_len 11, "conv.weight", codes at 31..34, sizes at 35 */
    CHECK(good[16] == 11 && memcmp(good + 20, "conv.weight", 11) == 0);
    struct {
        size_t at;
        unsigned char v;
        mft_status st;
        const char *needle;
    } edits[] = {
        {31, 9, MFT_ERR_CORRUPT, "dtype 9"},                 /* unknown dtype code */
        {32, 2, MFT_ERR_CORRUPT, "format 2"},                /* unknown format code */
        {33, 9, MFT_ERR_CORRUPT, "ndim 9"},                  /* rank > 8 */
        {34, 1, MFT_ERR_CORRUPT, "reserved 1"},              /* reserved byte */
        {35, 3, MFT_ERR_CORRUPT, "payload"},                 /* sizes[0] 2 -> 3: payload size */
        {35 + 32 + 1, 0x70, MFT_ERR_CORRUPT, "not dense"}, /* strides[0] 12 -> big */
        {35 + 64, 1, MFT_ERR_CORRUPT, "storage offset 1"},   /* offset != 0 */
        {16, 0, MFT_ERR_CORRUPT, "name length 0"},
        {16, 200, MFT_ERR_CORRUPT, "name"},                  /* name runs into other fields */
        {20, 0, MFT_ERR_CORRUPT, "NUL"},
        {12, 4, MFT_ERR_CORRUPT, "entry 3"},                 /* count 4: a 4th entry missing */
        {12, 2, MFT_ERR_CORRUPT, "unexpected bytes"},        /* count 2: trailing entry */
    };
    for (size_t e = 0; e < sizeof edits / sizeof edits[0]; e++) {
        unsigned char *b = malloc(n);
        memcpy(b, good, n);
        b[edits[e].at] = edits[e].v;
        put_u64(b + n - 8, XXH3_64bits(b, n - 8));
        CHECK(write_file(q, b, n));
        free(b);
        CHECK_MSG(mft_load_tensors_into(q, 3, TNAMES, g.t) == edits[e].st, "edit %zu: %s", e,
                  mft_last_error_message());
        CHECK_ERR(edits[e].st, edits[e].needle);
        int ln = 0;
        char **nm = NULL;
        mft_tensor **ts = NULL;
        CHECK(mft_load_tensors(q, &ln, &nm, &ts) != MFT_OK && ln == 0 && !nm && !ts);
        mft_clear_error();
    }
    /* tag contradicting the strides: conv.weight is NHWC-strided, say CONTIGUOUS */
    unsigned char *b = malloc(n);
    memcpy(b, good, n);
    CHECK(b[32] == 1);
    b[32] = 0;
    put_u64(b + n - 8, XXH3_64bits(b, n - 8));
    CHECK(write_file(q, b, n));
    CHECK(mft_load_tensors_into(q, 3, TNAMES, g.t) == MFT_ERR_CORRUPT);
    CHECK_ERR(MFT_ERR_CORRUPT, "contradicts");
    /* an empty entry must obey Note [Geometry bound] too: sizes[0] 2 -> 0
     * with strides[1] 2^62 (sizes * strides would overflow later) */
    memcpy(b, good, n);
    put_u64(b + 35, 0);
    put_u64(b + 35 + 32 + 8, UINT64_C(1) << 62);
    put_u64(b + n - 8, XXH3_64bits(b, n - 8));
    CHECK(write_file(q, b, n));
    CHECK(mft_load_tensors_into(q, 3, TNAMES, g.t) == MFT_ERR_CORRUPT);
    CHECK_ERR(MFT_ERR_CORRUPT, "are negative or overflow");
    /* duplicate names in the file: save "aa" and "ab", patch "ab" into "aa" */
    const char *two[2] = {"aa", "ab"};
    const mft_tensor *tt[2] = {g.t[2], g.t[2]};
    CHECK(mft_save_tensors(q, 2, two, tt) == MFT_OK);
    size_t n2 = 0;
    unsigned char *d = tu_read_file(q, &n2);
    size_t at = 0;
    for (size_t i = 16; d && i + 2 < n2; i++)
        if (d[i] == 'a' && d[i + 1] == 'b') at = i + 1;
    CHECK(at > 0);
    if (d && at > 0) {
        d[at] = 'a';
        put_u64(d + n2 - 8, XXH3_64bits(d, n2 - 8));
        CHECK(write_file(q, d, n2));
        mft_tensor *one[1] = {g.t[2]};
        const char *aa[1] = {"aa"};
        CHECK(mft_load_tensors_into(q, 1, aa, one) == MFT_ERR_CORRUPT);
        CHECK_ERR(MFT_ERR_CORRUPT, "name 'aa' appears twice");
    }
    free(d);
    free(b);
    CHECK(untouched(&g));
    free(good);
    free_targets(&g);
}

static void test_mismatch(void) {
    char p[400];
    tmp_path(p, sizeof p, "small3.ckpt");
    size_t n = 0;
    free(small_file(p, &n));
    targets g;
    make_targets(&g);
    /* sizes */
    mft_tensor *w = mft_empty(4, (const int64_t[]){2, 3, 2, 3}, MFT_F32, MFT_CHANNELS_LAST);
    mft_tensor *m[3] = {w, g.t[1], g.t[2]};
    CHECK(mft_load_tensors_into(p, 3, TNAMES, m) == MFT_ERR_SHAPE);
    CHECK_ERR(MFT_ERR_SHAPE, "entry 'conv.weight' has sizes [2,3,2,2], the target has sizes [2,3,2,3]");
    /* dtype */
    mft_tensor *d = mft_empty(1, (const int64_t[]){3}, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *m2[3] = {g.t[0], d, g.t[2]};
    CHECK(mft_load_tensors_into(p, 3, TNAMES, m2) == MFT_ERR_DTYPE);
    CHECK_ERR(MFT_ERR_DTYPE, "'bn.running_mean' is f64, the target is f32");
    /* missing name */
    const char *nm[3] = {"conv.weight", "bn.running_var", "step"};
    CHECK(mft_load_tensors_into(p, 3, nm, g.t) == MFT_ERR_INVALID);
    CHECK_ERR(MFT_ERR_INVALID, "no entry named 'bn.running_var'");
    /* duplicate request */
    const char *dup[3] = {"step", "conv.weight", "step"};
    mft_tensor *m3[3] = {g.t[2], g.t[0], g.t[2]};
    CHECK(mft_load_tensors_into(p, 3, dup, m3) == MFT_ERR_INVALID);
    CHECK_ERR(MFT_ERR_INVALID, "'step' is requested twice (names[0] and names[2])");
    /* a broadcast target cannot be written */
    mft_tensor *one = mft_zeros(1, (const int64_t[]){1}, MFT_F64, MFT_CONTIGUOUS);
    mft_tensor *bc = mft_expand(one, 1, (const int64_t[]){3});
    mft_tensor *m4[3] = {g.t[0], bc, g.t[2]};
    CHECK(mft_load_tensors_into(p, 3, TNAMES, m4) == MFT_ERR_OVERLAP);
    mft_clear_error();
    /* NULLs */
    mft_tensor *m5[3] = {g.t[0], NULL, g.t[2]};
    CHECK(mft_load_tensors_into(p, 3, TNAMES, m5) == MFT_ERR_NULL);
    CHECK_ERR(MFT_ERR_NULL, "tensors[1]");
    CHECK(mft_load_tensors_into(NULL, 3, TNAMES, g.t) == MFT_ERR_NULL);
    CHECK_ERR(MFT_ERR_NULL, "path");
    CHECK(mft_load_tensors_into(p, -1, TNAMES, g.t) == MFT_ERR_INVALID);
    CHECK_ERR(MFT_ERR_INVALID, "n -1");
    CHECK(untouched(&g));
    int ln = 5;
    char **nms = (char **)1;
    mft_tensor **ts = (mft_tensor **)1;
    CHECK(mft_load_tensors(p, &ln, NULL, &ts) == MFT_ERR_NULL);
    CHECK_ERR(MFT_ERR_NULL, "names");
    CHECK(ln == 0 && ts == NULL);
    (void)nms;
    mft_tensor_release(w);
    mft_tensor_release(d);
    mft_tensor_release(bc);
    mft_tensor_release(one);
    free_targets(&g);
}

static void test_save_errors(void) {
    targets g;
    make_targets(&g);
    char p[400], tmp[420];
    tmp_path(p, sizeof p, "dup.ckpt");
    snprintf(tmp, sizeof tmp, "%s.tmp", p);
    const char *dup[3] = {"a", "b", "a"};
    CHECK(mft_save_tensors(p, 3, dup, (const mft_tensor *const *)g.t) == MFT_ERR_INVALID);
    CHECK_ERR(MFT_ERR_INVALID, "'a' is given twice (names[0] and names[2])");
    CHECK(!exists(p) && !exists(tmp));
    const char *empty[1] = {""};
    CHECK(mft_save_tensors(p, 1, empty, (const mft_tensor *const *)g.t) == MFT_ERR_INVALID);
    CHECK_ERR(MFT_ERR_INVALID, "length 0");
    char *longname = malloc(MFT_CHECKPOINT_MAX_NAME + 2);
    memset(longname, 'x', MFT_CHECKPOINT_MAX_NAME + 1);
    longname[MFT_CHECKPOINT_MAX_NAME + 1] = 0;
    const char *ln[1] = {longname};
    CHECK(mft_save_tensors(p, 1, ln, (const mft_tensor *const *)g.t) == MFT_ERR_INVALID);
    CHECK_ERR(MFT_ERR_INVALID, "length 4097");
    longname[MFT_CHECKPOINT_MAX_NAME] = 0; /* the longest allowed name round-trips */
    CHECK(mft_save_tensors(p, 1, ln, (const mft_tensor *const *)g.t) == MFT_OK);
    mft_tensor *back = mft_zeros(4, (const int64_t[]){2, 3, 2, 2}, MFT_F32, MFT_CONTIGUOUS);
    CHECK(mft_load_tensors_into(p, 1, ln, &back) == MFT_OK);
    CHECK(mft_tensor_hash(back) == g.hash[0]);
    mft_tensor_release(back);
    free(longname);
    const mft_tensor *withnull[2] = {g.t[0], NULL};
    const char *two[2] = {"x", "y"};
    CHECK(mft_save_tensors(p, 2, two, withnull) == MFT_ERR_NULL);
    CHECK_ERR(MFT_ERR_NULL, "tensors[1]");
    snprintf(p, sizeof p, "%s/no/such/dir/x.ckpt", tmpdir);
    CHECK(mft_save_tensors(p, 3, TNAMES, (const mft_tensor *const *)g.t) == MFT_ERR_IO);
    CHECK_ERR(MFT_ERR_IO, "No such file");
    CHECK(mft_save_tensors(NULL, 0, NULL, NULL) == MFT_ERR_NULL);
    CHECK_ERR(MFT_ERR_NULL, "path");
    /* a path naming something other than a regular file is never replaced
     * (the rename would swap a device node for a file) */
    struct stat before;
    if (stat("/dev/null", &before) == 0 && S_ISCHR(before.st_mode)) {
        CHECK(mft_save_tensors("/dev/null", 3, TNAMES, (const mft_tensor *const *)g.t) ==
              MFT_ERR_IO);
        CHECK_ERR(MFT_ERR_IO, "is not a regular file");
        struct stat after;
        CHECK(stat("/dev/null", &after) == 0 && S_ISCHR(after.st_mode) &&
              after.st_rdev == before.st_rdev);
    }
    CHECK(mft_save_tensors(tmpdir, 3, TNAMES, (const mft_tensor *const *)g.t) == MFT_ERR_IO);
    CHECK_ERR(MFT_ERR_IO, "is not a regular file");
    /* a NULL target is MFT_ERR_NULL even after an unrelated earlier error
     * (whose message NULL propagation keeps) */
    tmp_path(p, sizeof p, "nulltarget.ckpt");
    CHECK(mft_save_tensors(p, 3, TNAMES, (const mft_tensor *const *)g.t) == MFT_OK);
    CHECK(mft_view(NULL, 0, NULL) == NULL && mft_last_error() == MFT_ERR_NULL);
    CHECK(mft_reshape(g.t[0], 1, (const int64_t[]){7}) == NULL); /* an earlier SHAPE error */
    mft_tensor *none[1] = {NULL};
    CHECK(mft_load_tensors_into(p, 1, TNAMES, none) == MFT_ERR_NULL);
    mft_clear_error();
    CHECK(untouched(&g));
    free_targets(&g);
}

/* ------------------------------------------------------------------ allocation failures */
/* A counting allocator that fails allocation number fail_at (1-based; 0 never). */

/* Every allocation of save, load_into and load (+ free_list), failed in turn:
 * each run returns OK or NOMEM, leaves no file / untouched targets on failure,
 * and leaks nothing. */
static void test_alloc_failures(void) {
    fa_install();
    char p[400], tmp[420], src[400];
    tmp_path(p, sizeof p, "af.ckpt");
    snprintf(tmp, sizeof tmp, "%s.tmp", p);
    tmp_path(src, sizeof src, "af_src.ckpt");
    set s;
    make_set(&s);
    targets g;
    make_targets(&g);
    size_t n = 0;
    free(small_file(src, &n));
    const long long live0 = g_fa.live;
    const int64_t tens0 = mft_live_tensors();
    int nomem = 0;
    bool completed = false;
    for (long long k = 1; k < 10000 && !completed; k++) {
        remove(p);
        fa_arm(k);
        bool failed = false;
        mft_status st = mft_save_tensors(p, NT, s.names, (const mft_tensor *const *)s.t);
        CHECK_MSG(st == MFT_OK || st == MFT_ERR_NOMEM, "k %lld save: %s", k, mft_last_error_message());
        if (st != MFT_OK) {
            CHECK(!exists(p) && !exists(tmp));
            failed = true;
        }
        if (!failed) {
            st = mft_load_tensors_into(src, 3, TNAMES, g.t);
            CHECK_MSG(st == MFT_OK || st == MFT_ERR_NOMEM, "k %lld load_into: %s", k,
                      mft_last_error_message());
            if (st != MFT_OK) {
                CHECK(untouched(&g));
                failed = true;
            }
        }
        if (!failed) {
            int ln = 0;
            char **nm = NULL;
            mft_tensor **ts = NULL;
            st = mft_load_tensors(p, &ln, &nm, &ts);
            CHECK_MSG(st == MFT_OK || st == MFT_ERR_NOMEM, "k %lld load: %s", k, mft_last_error_message());
            if (st != MFT_OK) CHECK(ln == 0 && !nm && !ts);
            else CHECK_EQ_I(ln, NT);
            mft_checkpoint_free_list(ln, nm, ts);
            failed = st != MFT_OK;
        }
        fa_arm(0);
        if (!failed) completed = true;
        else nomem++;
        /* restore the targets for the next round */
        for (int i = 0; i < 3; i++) {
            fill(g.t[i], 50 + i);
            g.version[i] = mft_tensor_version(g.t[i]);
        }
        CHECK_MSG(mft_live_tensors() == tens0 && g_fa.live == live0,
                  "k %lld: %lld tensors, %lld blocks leaked", k,
                  (long long)(mft_live_tensors() - tens0), g_fa.live - live0);
        mft_clear_error();
    }
    CHECK(completed && nomem > 10);
    free_targets(&g);
    free_set(&s);
    mft_set_allocator(NULL);
}

/* NCHW8C / NCHW16C entries (version 2): stored in their blocks, loaded in
 * them; a view is packed first; a non-zero pad lane or a blocked code in a
 * version-1 file is refused. */
static void test_blocked_entries(void) {
    char p[400], q[400];
    tmp_path(p, sizeof p, "blocked.ckpt");
    tmp_path(q, sizeof q, "blocked_bad.ckpt");
    const int64_t s16[4] = {2, 17, 3, 3}, s8[4] = {4, 3, 2, 5}, sp[2] = {3, 4};
    mft_tensor *b16 = mft_randn(4, s16, MFT_F32, MFT_NCHW16C, 1);
    mft_tensor *b8full = mft_randn(4, s8, MFT_F64, MFT_NCHW8C, 2);
    mft_tensor *b8 = mft_narrow(b8full, 0, 1, 2); /* a view: packed when saved */
    mft_tensor *pl = mft_randn(2, sp, MFT_F32, MFT_CONTIGUOUS, 3);
    const char *names[3] = {"b16", "b8", "plain"};
    const mft_tensor *ts[3] = {b16, b8, pl};
    CHECK(mft_save_tensors(p, 3, names, ts) == MFT_OK);
    size_t n = 0;
    unsigned char *good = tu_read_file(p, &n);
    CHECK(good && n > 16 && good[8] == 2); /* version 2: it holds blocked entries */
    int cnt = 0;
    char **nv = NULL;
    mft_tensor **tv = NULL;
    CHECK(mft_load_tensors(p, &cnt, &nv, &tv) == MFT_OK && cnt == 3);
    for (int i = 0; i < cnt; i++) {
        int k = !strcmp(nv[i], "b16") ? 0 : !strcmp(nv[i], "b8") ? 1 : 2;
        const mft_format want[3] = {MFT_NCHW16C, MFT_NCHW8C, MFT_CONTIGUOUS};
        CHECK_MSG(mft_tensor_format(tv[i]) == want[k] && mft_tensor_is_contiguous(tv[i], want[k]),
                  "%s loaded as %s", nv[i], mft_format_name(mft_tensor_format(tv[i])));
        CHECK(mft_tensor_hash(tv[i]) == mft_tensor_hash(ts[k]));
        CHECK(mft_tensor_check_padding(tv[i]) == MFT_OK);
    }
    mft_checkpoint_free_list(cnt, nv, tv);
    /* into plain targets too */
    mft_tensor *t16 = mft_zeros(4, s16, MFT_F32, MFT_CHANNELS_LAST);
    CHECK(mft_load_tensors_into(p, 1, names, &t16) == MFT_OK &&
          mft_tensor_hash(t16) == mft_tensor_hash(b16));
    mft_tensor_release(t16);
    /* one (1,1,1,1) nChw16c entry: its 64-byte payload ends just before the
     * trailer, slot 0 the element, slots 1..15 pad lanes */
    const int64_t one[4] = {1, 1, 1, 1};
    mft_tensor *o = mft_full(4, one, MFT_F32, MFT_NCHW16C, 1.0);
    const char *oname[1] = {"o"};
    CHECK(mft_save_tensors(p, 1, oname, (const mft_tensor *const *)&o) == MFT_OK);
    free(good);
    good = tu_read_file(p, &n);
    mft_tensor *target = mft_zeros(4, one, MFT_F32, MFT_NCHW16C);
    if (good && n > 80) {
        unsigned char *b = malloc(n);
        memcpy(b, good, n);
        b[n - 8 - 64 + 4 + 3] = 0x3f; /* slot 1 = 0.5f: a pad lane */
        put_u64(b + n - 8, XXH3_64bits(b, n - 8));
        CHECK(write_file(q, b, n));
        CHECK(mft_load_tensors_into(q, 1, oname, &target) == MFT_ERR_CORRUPT);
        CHECK_ERR(MFT_ERR_CORRUPT, "pad lane");
        memcpy(b, good, n);
        b[8] = 1; /* version 1 has no blocked format codes */
        put_u64(b + n - 8, XXH3_64bits(b, n - 8));
        CHECK(write_file(q, b, n));
        CHECK(mft_load_tensors_into(q, 1, oname, &target) == MFT_ERR_CORRUPT);
        CHECK_ERR(MFT_ERR_CORRUPT, "format 3");
        CHECK(mft_tensor_get(target, (int64_t[]){0, 0, 0, 0}) == 0.0); /* untouched */
        /* a stride other than the packed descriptor's, on a dim of outer
         * extent 1 (N's at 16 + 4 + 1 + 4 + 4 * 8): refused */
        memcpy(b, good, n);
        CHECK(b[57] == 16);
        b[57] = 32;
        put_u64(b + n - 8, XXH3_64bits(b, n - 8));
        CHECK(write_file(q, b, n));
        CHECK(mft_load_tensors_into(q, 1, oname, &target) == MFT_ERR_CORRUPT);
        CHECK_ERR(MFT_ERR_CORRUPT, "not a packed");
        free(b);
    }
    free(good);
    /* a view whose dims of outer extent 1 keep its base's strides (one row
     * of one image): written with the packed strides, so the loaded entry
     * re-saves byte for byte */
    const int64_t s4[4] = {1, 15, 4, 3};
    mft_tensor *base = mft_randn(4, s4, MFT_F32, MFT_NCHW16C, 4);
    mft_tensor *row = mft_narrow(base, 2, 1, 1);
    CHECK(row && mft_tensor_is_contiguous(row, MFT_NCHW16C));
    const char *rname[1] = {"row"};
    CHECK(mft_save_tensors(p, 1, rname, (const mft_tensor *const *)&row) == MFT_OK);
    good = tu_read_file(p, &n);
    CHECK(mft_load_tensors(p, &cnt, &nv, &tv) == MFT_OK && cnt == 1);
    CHECK(cnt == 1 && mft_tensor_hash(tv[0]) == mft_tensor_hash(row));
    CHECK(cnt == 1 && mft_save_tensors(q, 1, rname, (const mft_tensor *const *)tv) == MFT_OK);
    size_t n2 = 0;
    unsigned char *again = tu_read_file(q, &n2);
    CHECK(good && again && n2 == n && memcmp(good, again, n) == 0);
    mft_checkpoint_free_list(cnt, nv, tv);
    free(good);
    free(again);
    mft_tensor *objs[] = {b16, b8full, b8, pl, o, target, base, row};
    for (size_t i = 0; i < sizeof objs / sizeof *objs; i++) mft_tensor_release(objs[i]);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "%s/mft_test_ckpt.XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_layout_bytes);
    RUN(test_round_trip);
    RUN(test_corruption);
    RUN(test_valid_checksum_malformed);
    RUN(test_mismatch);
    RUN(test_save_errors);
    RUN(test_alloc_failures);
    RUN(test_blocked_entries);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    TEST_MAIN_END();
}
