/* tests/data/test_data.c — mft/data.h: the IDX reader on the real Fashion-MNIST
 * files (sizes, label histogram, XXH3 of the element bytes against
 * tests/golden/data_cases.txt from gen_data.py), on hand-written raw and gzip
 * files of every element type, and on malformed files (each refused with the
 * right status and a message naming the path); mft_images_to_batch against a
 * naive per-element loop in both output formats and several input layouts;
 * mft_gather_rows; the shuffle against an independent Python implementation,
 * its determinism and that it is a permutation; the mft_batches iterator. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, rmdir, unlink */
#define XXH_INLINE_ALL
#include <xxhash.h>
#include <unistd.h>
#include <zlib.h>
#include "fail_alloc.h"
#include "test_util.h"

#define FMNIST_DIR "/usr/share/datasets/fashion-mnist"

static char tmpdir[256];
static bool mkdir_p(const char *d);

static void tmp_path(char *buf, size_t len, const char *name) {
    snprintf(buf, len, "%s/%s", tmpdir, name);
}

static bool write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fwrite(data, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

static bool write_gz(const char *path, const void *data, size_t n) {
    gzFile g = gzopen(path, "wb");
    if (!g) return false;
    bool ok = n == 0 || gzwrite(g, data, (unsigned)n) == (int)n;
    return gzclose(g) == Z_OK && ok;
}

/* An IDX header: 00 00 type ndim, sizes big-endian. Returns its length. */
static size_t idx_header(unsigned char *p, int type, int ndim, const uint32_t *sizes) {
    p[0] = 0, p[1] = 0, p[2] = (unsigned char)type, p[3] = (unsigned char)ndim;
    for (int d = 0; d < ndim; d++) {
        p[4 + 4 * d] = (unsigned char)(sizes[d] >> 24);
        p[5 + 4 * d] = (unsigned char)(sizes[d] >> 16);
        p[6 + 4 * d] = (unsigned char)(sizes[d] >> 8);
        p[7 + 4 * d] = (unsigned char)sizes[d];
    }
    return 4 + 4 * (size_t)ndim;
}

/* ------------------------------------------------------------------ golden file */
typedef struct golden_idx {
    char split[8], kind[8];
    int ndim;
    int64_t sizes[4];
    uint64_t hash;
} golden_idx;

static golden_idx GIDX[4];
static int n_gidx = 0;

static bool load_golden_idx(void) {
    FILE *f = fopen(MFT_TEST_DATA_DIR "/data_cases.txt", "r");
    if (!f) return false;
    char line[8192];
    while (fgets(line, sizeof line, f) && n_gidx < 4) {
        if (strncmp(line, "idx ", 4) != 0) continue;
        golden_idx *g = &GIDX[n_gidx];
        char *p = line + 4;
        int used = 0;
        if (sscanf(p, "%7s %7s%n", g->split, g->kind, &used) != 2) continue;
        p += used;
        /* sizes then the hex hash: the last token is the hash */
        int64_t vals[5];
        int nv = 0;
        char tok[32];
        while (nv < 5 && sscanf(p, "%31s%n", tok, &used) == 1) {
            p += used;
            if (strlen(tok) == 16) g->hash = strtoull(tok, NULL, 16);
            else vals[nv++] = strtoll(tok, NULL, 10);
        }
        g->ndim = nv;
        for (int d = 0; d < nv; d++) g->sizes[d] = vals[d];
        n_gidx++;
    }
    fclose(f);
    return n_gidx == 4;
}

static const golden_idx *find_gidx(const char *split, const char *kind) {
    for (int i = 0; i < n_gidx; i++)
        if (!strcmp(GIDX[i].split, split) && !strcmp(GIDX[i].kind, kind)) return &GIDX[i];
    return NULL;
}

/* ------------------------------------------------------------------ real data */
static void check_split(const char *split, int64_t n) {
    mft_tensor *img = NULL, *lab = NULL;
    mft_status st = mft_mnist_load(FMNIST_DIR, split, &img, &lab);
    CHECK_MSG(st == MFT_OK, "%s: %s", split, mft_last_error_message());
    if (st != MFT_OK) return;
    const int64_t isz[3] = {n, 28, 28}, lsz[1] = {n};
    CHECK(tu_has_sizes(img, 3, isz));
    CHECK(tu_has_sizes(lab, 1, lsz));
    CHECK(mft_tensor_dtype(img) == MFT_U8);
    CHECK(mft_tensor_dtype(lab) == MFT_I64);
    CHECK(mft_tensor_is_contiguous(img, MFT_CONTIGUOUS));
    const golden_idx *gi = find_gidx(split, "images"), *gl = find_gidx(split, "labels");
    CHECK(gi && gl);
    if (gi) {
        CHECK(tu_has_sizes(img, gi->ndim, gi->sizes));
        uint64_t h = XXH3_64bits(mft_tensor_data(img), (size_t)mft_tensor_numel(img));
        CHECK_MSG(h == gi->hash, "%s images: xxh3 %016llx, golden %016llx", split,
                  (unsigned long long)h, (unsigned long long)gi->hash);
    }
    /* histogram, and the label bytes hash as in the file */
    int64_t hist[256] = {0};
    const int64_t *l = mft_tensor_data(lab);
    unsigned char *bytes = malloc((size_t)n);
    bool in_range = true;
    for (int64_t i = 0; i < n; i++) {
        in_range = in_range && l[i] >= 0 && l[i] < 10;
        if (l[i] >= 0 && l[i] < 256) hist[l[i]]++;
        bytes[i] = (unsigned char)l[i];
    }
    CHECK(in_range);
    for (int c = 0; c < 10; c++) CHECK_EQ_I(hist[c], n / 10);
    if (gl) CHECK(XXH3_64bits(bytes, (size_t)n) == gl->hash);
    free(bytes);
    mft_tensor_release(img);
    mft_tensor_release(lab);
}

static void test_fashion_mnist(void) {
    if (access(FMNIST_DIR "/train-images-idx3-ubyte.gz", R_OK) != 0) {
        SKIP("%s not present (Debian package dataset-fashion-mnist): the real-data test cannot run",
             FMNIST_DIR);
    }
    CHECK(load_golden_idx());
    check_split("train", 60000);
    check_split("t10k", 10000);
    /* mft_idx_load directly: labels are u8 of rank 1 */
    mft_tensor *l = mft_idx_load(FMNIST_DIR "/t10k-labels-idx1-ubyte.gz");
    const int64_t lsz[1] = {10000};
    CHECK(l && mft_tensor_dtype(l) == MFT_U8 && tu_has_sizes(l, 1, lsz));
    const golden_idx *gl = find_gidx("t10k", "labels");
    if (l && gl) CHECK(XXH3_64bits(mft_tensor_data(l), 10000) == gl->hash);
    mft_tensor_release(l);
    /* a bad split and a directory without the files */
    mft_tensor *a = (mft_tensor *)1, *b = (mft_tensor *)1;
    CHECK(mft_mnist_load(FMNIST_DIR, "test", &a, &b) == MFT_ERR_INVALID);
    CHECK(a == NULL && b == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "'test'");
    CHECK(mft_mnist_load(tmpdir, "train", &a, &b) == MFT_ERR_IO);
    CHECK(a == NULL && b == NULL);
    CHECK_ERR(MFT_ERR_IO, "No such file");
}

/* mft_mnist_load on hand-made files: N mismatch, label range, image rank. */
static void test_mnist_checks(void) {
    char dir[300], p[400];
    snprintf(dir, sizeof dir, "%s/mn", tmpdir);
    CHECK(mkdir_p(dir));
    unsigned char buf[64];
    uint32_t isz[3] = {3, 2, 2}, lsz[1] = {3};
    size_t h = idx_header(buf, 0x08, 3, isz);
    for (int i = 0; i < 12; i++) buf[h + (size_t)i] = (unsigned char)(i * 20);
    snprintf(p, sizeof p, "%s/train-images-idx3-ubyte", dir);
    CHECK(write_file(p, buf, h + 12));
    /* labels as i32 (allowed) with one value 300 */
    h = idx_header(buf, 0x0C, 1, lsz);
    const int32_t lv[3] = {1, 300, 2};
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 4; k++) buf[h + 4 * (size_t)i + (size_t)k] = (unsigned char)((uint32_t)lv[i] >> (24 - 8 * k));
    snprintf(p, sizeof p, "%s/train-labels-idx1-ubyte.gz", dir);
    CHECK(write_gz(p, buf, h + 12));
    mft_tensor *im = NULL, *lb = NULL;
    CHECK(mft_mnist_load(dir, "train", &im, &lb) == MFT_ERR_CORRUPT);
    CHECK(!im && !lb);
    CHECK_ERR(MFT_ERR_CORRUPT, "label 300 at index 1");
    /* valid i32 labels: converted to I64 */
    buf[h + 4 + 2] = 0, buf[h + 4 + 3] = 9;
    CHECK(write_gz(p, buf, h + 12));
    CHECK(mft_mnist_load(dir, "train", &im, &lb) == MFT_OK);
    if (lb) {
        CHECK(mft_tensor_dtype(lb) == MFT_I64);
        CHECK(mft_tensor_get(lb, (int64_t[]){0}) == 1 && mft_tensor_get(lb, (int64_t[]){1}) == 9 &&
              mft_tensor_get(lb, (int64_t[]){2}) == 2);
    }
    if (im) CHECK(mft_tensor_get(im, (int64_t[]){2, 1, 1}) == 220);
    mft_tensor_release(im);
    mft_tensor_release(lb);
    /* 4 labels for 3 images */
    uint32_t l4[1] = {4};
    h = idx_header(buf, 0x08, 1, l4);
    memset(buf + h, 1, 4);
    CHECK(write_gz(p, buf, h + 4));
    CHECK(mft_mnist_load(dir, "train", &im, &lb) == MFT_ERR_CORRUPT);
    CHECK_ERR(MFT_ERR_CORRUPT, "has 3 images but");
    /* images of rank 2 */
    uint32_t i2[2] = {4, 3};
    h = idx_header(buf, 0x08, 2, i2);
    memset(buf + h, 7, 12);
    snprintf(p, sizeof p, "%s/train-images-idx3-ubyte", dir);
    CHECK(write_file(p, buf, h + 12));
    CHECK(mft_mnist_load(dir, "train", &im, &lb) == MFT_ERR_CORRUPT);
    CHECK_ERR(MFT_ERR_CORRUPT, "rank 3");
    CHECK(mft_mnist_load(NULL, "train", &im, &lb) == MFT_ERR_NULL);
    CHECK_ERR(MFT_ERR_NULL, "dir");
}

/* ------------------------------------------------------------------ element types */
static void test_idx_types(void) {
    char p[400];
    unsigned char buf[256];
    struct {
        int type;
        mft_dtype dt;
        size_t es;
        const unsigned char *bytes; /* big-endian elements */
        double want[4];
    } cases[] = {
        {0x08, MFT_U8, 1, (const unsigned char[]){0, 7, 200, 255}, {0, 7, 200, 255}},
        {0x09, MFT_I32, 1, (const unsigned char[]){0xFF, 0x7F, 0x80, 0x05}, {-1, 127, -128, 5}},
        {0x0B, MFT_I32, 2, (const unsigned char[]){0xFF, 0xFE, 0x01, 0x2C, 0x7F, 0xFF, 0x80, 0x00},
         {-2, 300, 32767, -32768}},
        {0x0C, MFT_I32, 4,
         (const unsigned char[]){0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x01, 0x00, 0x00, 0x7F, 0xFF, 0xFF,
                                 0xFF, 0x80, 0, 0, 0},
         {-1, 65536, 2147483647.0, -2147483648.0}},
        /* 1.5, -2.25, 0, 10 */
        {0x0D, MFT_F32, 4,
         (const unsigned char[]){0x3F, 0xC0, 0, 0, 0xC0, 0x10, 0, 0, 0, 0, 0, 0, 0x41, 0x20, 0, 0},
         {1.5, -2.25, 0, 10}},
        {0x0E, MFT_F64, 8,
         (const unsigned char[]){0x3F, 0xF8, 0, 0, 0, 0, 0, 0, 0xC0, 0x02, 0, 0, 0, 0, 0, 0,
                                 0x40, 0x59, 0, 0, 0, 0, 0, 0, 0x3F, 0xD0, 0, 0, 0, 0, 0, 0},
         {1.5, -2.25, 100, 0.25}},
    };
    uint32_t sz[2] = {2, 2};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        size_t h = idx_header(buf, cases[c].type, 2, sz);
        memcpy(buf + h, cases[c].bytes, 4 * cases[c].es);
        for (int gz = 0; gz < 2; gz++) {
            snprintf(p, sizeof p, "%s/type%02x%s", tmpdir, cases[c].type, gz ? ".gz" : "");
            CHECK(gz ? write_gz(p, buf, h + 4 * cases[c].es) : write_file(p, buf, h + 4 * cases[c].es));
            mft_tensor *t = mft_idx_load(p);
            CHECK_MSG(t != NULL, "type 0x%02x gz %d: %s", cases[c].type, gz, mft_last_error_message());
            if (!t) continue;
            const int64_t s2[2] = {2, 2};
            CHECK(tu_has_sizes(t, 2, s2));
            CHECK_MSG(mft_tensor_dtype(t) == cases[c].dt, "type 0x%02x", cases[c].type);
            for (int i = 0; i < 4; i++) {
                int64_t ix[2] = {i / 2, i % 2};
                CHECK_MSG(mft_tensor_get(t, ix) == cases[c].want[i], "type 0x%02x elem %d: %g vs %g",
                          cases[c].type, i, mft_tensor_get(t, ix), cases[c].want[i]);
            }
            mft_tensor_release(t);
        }
    }
    /* rank 4 u8 and an empty tensor (a zero size) */
    uint32_t s4[4] = {2, 1, 2, 3};
    size_t h = idx_header(buf, 0x08, 4, s4);
    for (int i = 0; i < 12; i++) buf[h + (size_t)i] = (unsigned char)(i + 1);
    tmp_path(p, sizeof p, "rank4");
    CHECK(write_file(p, buf, h + 12));
    mft_tensor *t = mft_idx_load(p);
    const int64_t e4[4] = {2, 1, 2, 3};
    CHECK(t && tu_has_sizes(t, 4, e4) && mft_tensor_format(t) == MFT_CONTIGUOUS);
    if (t) CHECK(mft_tensor_get(t, (int64_t[]){1, 0, 1, 2}) == 12);
    mft_tensor_release(t);
    uint32_t s0[2] = {0, 5};
    h = idx_header(buf, 0x0D, 2, s0);
    tmp_path(p, sizeof p, "empty.gz");
    CHECK(write_gz(p, buf, h));
    t = mft_idx_load(p);
    CHECK(t && mft_tensor_numel(t) == 0 && mft_tensor_dtype(t) == MFT_F32);
    mft_tensor_release(t);
    /* inside a scope the result is scope-owned like any other */
    CHECK(mft_scope_begin() == MFT_OK);
    tmp_path(p, sizeof p, "rank4");
    t = mft_idx_load(p);
    CHECK(t != NULL);
    CHECK(mft_scope_end() == MFT_OK);
}

/* ------------------------------------------------------------------ malformed */
#define EXPECT_LOAD_FAIL(path, status, needle)                                         \
    do {                                                                               \
        mft_tensor *t_ = mft_idx_load(path);                                           \
        CHECK_MSG(t_ == NULL, "%s loaded", path);                                      \
        mft_tensor_release(t_);                                                        \
        CHECK_MSG(strstr(mft_last_error_message(), path) != NULL, "message '%s' lacks the path", \
                  mft_last_error_message());                                           \
        CHECK_ERR(status, needle);                                                     \
    } while (0)

static void test_idx_malformed(void) {
    char p[400];
    unsigned char buf[1024];
    uint32_t sz[2] = {4, 8};
    size_t h = idx_header(buf, 0x08, 2, sz);
    for (int i = 0; i < 32; i++) buf[h + (size_t)i] = (unsigned char)(i * 7);
    const size_t full = h + 32;

    tmp_path(p, sizeof p, "missing");
    EXPECT_LOAD_FAIL(p, MFT_ERR_IO, "No such file");
    EXPECT_LOAD_FAIL(tmpdir, MFT_ERR_IO, "Is a directory");
    CHECK(mft_idx_load(NULL) == NULL);
    CHECK_ERR(MFT_ERR_NULL, "path");

    tmp_path(p, sizeof p, "empty");
    CHECK(write_file(p, buf, 0));
    EXPECT_LOAD_FAIL(p, MFT_ERR_CORRUPT, "truncated header: 0 of 4");

    unsigned char bad[64];
    memcpy(bad, buf, full);
    bad[1] = 0x01; /* bad magic */
    tmp_path(p, sizeof p, "magic");
    CHECK(write_file(p, bad, full));
    EXPECT_LOAD_FAIL(p, MFT_ERR_CORRUPT, "magic bytes 00 01 08 02");
    memcpy(bad, buf, full);
    bad[2] = 0x0A; /* unknown type */
    tmp_path(p, sizeof p, "type");
    CHECK(write_file(p, bad, full));
    EXPECT_LOAD_FAIL(p, MFT_ERR_CORRUPT, "type 0x0a");
    memcpy(bad, buf, full);
    bad[3] = 0; /* rank 0 */
    tmp_path(p, sizeof p, "rank0");
    CHECK(write_file(p, bad, full));
    EXPECT_LOAD_FAIL(p, MFT_ERR_CORRUPT, "rank 0 outside 1..8");
    bad[3] = 9;
    CHECK(write_file(p, bad, full));
    EXPECT_LOAD_FAIL(p, MFT_ERR_CORRUPT, "rank 9");

    /* truncated at every length, raw and gzip */
    for (size_t len = 1; len < full; len++) {
        tmp_path(p, sizeof p, "trunc");
        CHECK(write_file(p, buf, len));
        EXPECT_LOAD_FAIL(p, MFT_ERR_CORRUPT, "truncated");
        tmp_path(p, sizeof p, "trunc.gz");
        CHECK(write_gz(p, buf, len));
        EXPECT_LOAD_FAIL(p, MFT_ERR_CORRUPT, "truncated");
    }
    /* trailing garbage */
    memcpy(bad, buf, full);
    bad[full] = 0;
    tmp_path(p, sizeof p, "trail");
    CHECK(write_file(p, bad, full + 1));
    EXPECT_LOAD_FAIL(p, MFT_ERR_CORRUPT, "1 trailing bytes");
    tmp_path(p, sizeof p, "trail.gz");
    CHECK(write_gz(p, bad, full + 1));
    EXPECT_LOAD_FAIL(p, MFT_ERR_CORRUPT, "trailing");

    /* absurd sizes: product overflows; huge but representable (never allocated) */
    uint32_t huge[3] = {0xFFFFFFFFu, 0xFFFFFFFFu, 2};
    size_t hh = idx_header(bad, 0x0E, 3, huge);
    tmp_path(p, sizeof p, "overflow");
    CHECK(write_file(p, bad, hh + 16));
    EXPECT_LOAD_FAIL(p, MFT_ERR_CORRUPT, "overflow");
    uint32_t big[3] = {100000, 100000, 1000}; /* 10^13 bytes announced */
    hh = idx_header(bad, 0x08, 3, big);
    memset(bad + hh, 3, 40);
    tmp_path(p, sizeof p, "big.gz");
    CHECK(write_gz(p, bad, hh + 40));
    EXPECT_LOAD_FAIL(p, MFT_ERR_CORRUPT, "truncated data");
    uint32_t mid[2] = {300, 1000000}; /* 300 MB announced, > the direct-read limit */
    hh = idx_header(bad, 0x08, 2, mid);
    tmp_path(p, sizeof p, "mid");
    CHECK(write_file(p, bad, hh + 40));
    EXPECT_LOAD_FAIL(p, MFT_ERR_CORRUPT, "truncated data: 40 of 300000000");

    /* gzip corruption: a damaged byte in the deflate stream or in the trailer,
     * and a cut stream. The data is long and varied so the stream has real
     * Huffman blocks. */
    unsigned char data[16 + 4096];
    uint32_t gsz[2] = {64, 64};
    size_t gh = idx_header(data, 0x08, 2, gsz);
    uint64_t rng = 12345;
    for (int i = 0; i < 4096; i++) data[gh + (size_t)i] = (unsigned char)(tu_rng_next(&rng) % 17);
    tmp_path(p, sizeof p, "good.gz");
    CHECK(write_gz(p, data, gh + 4096));
    mft_tensor *ok = mft_idx_load(p);
    CHECK(ok != NULL);
    if (ok) CHECK(memcmp(mft_tensor_data(ok), data + gh, 4096) == 0);
    mft_tensor_release(ok);
    size_t gzn = 0;
    unsigned char *gzb = tu_read_file(p, &gzn);
    CHECK(gzb && gzn > 40);
    if (gzb && gzn > 40) {
        const size_t pos[] = {20, gzn / 3, gzn / 2, gzn - 12, gzn - 6, gzn - 2};
        for (size_t k = 0; k < sizeof pos / sizeof pos[0]; k++) {
            gzb[pos[k]] ^= 0x55;
            tmp_path(p, sizeof p, "damaged.gz");
            CHECK(write_file(p, gzb, gzn));
            mft_tensor *t = mft_idx_load(p);
            CHECK_MSG(t == NULL, "flip at %zu of %zu loaded", pos[k], gzn);
            mft_tensor_release(t);
            CHECK_MSG(mft_last_error() == MFT_ERR_CORRUPT, "flip at %zu: %s", pos[k],
                      mft_last_error_message());
            mft_clear_error();
            gzb[pos[k]] ^= 0x55;
        }
        for (size_t len = 10; len < gzn; len += 37) {
            tmp_path(p, sizeof p, "cut.gz");
            CHECK(write_file(p, gzb, len));
            mft_tensor *t = mft_idx_load(p);
            CHECK_MSG(t == NULL, "cut at %zu of %zu loaded", len, gzn);
            mft_tensor_release(t);
            CHECK_MSG(mft_last_error() == MFT_ERR_CORRUPT, "cut at %zu: %s", len,
                      mft_last_error_message());
            mft_clear_error();
        }
    }
    free(gzb);
}

/* ------------------------------------------------------------------ batching */
/* U8 images with value (7*linear + 3) % 256 in logical order. */
static mft_tensor *make_images(int nd, const int64_t *sz, mft_format fmt) {
    mft_tensor *t = mft_empty(nd, sz, MFT_U8, fmt);
    int64_t ix[4] = {0}, lin = 0;
    if (!t) return NULL;
    do {
        mft_tensor_set(t, ix, (double)((7 * lin++ + 3) % 256));
    } while (tu_next_index(nd, sz, ix));
    return t;
}

/* Compares a batch with the naive formula: every element of (count,C,H,W). */
static int check_batch(const mft_tensor *out, const mft_tensor *img, const int64_t *idx,
                       int64_t count, double scale, double mean, double std, mft_format fmt,
                       mft_dtype dt) {
    int bad = 0;
    int ind = mft_tensor_ndim(img);
    const int64_t *is = mft_tensor_sizes(img);
    int64_t C = ind == 4 ? is[1] : 1, H = is[ind - 2], W = is[ind - 1];
    const int64_t want_sz[4] = {count, C, H, W};
    if (!tu_has_sizes(out, 4, want_sz) || mft_tensor_dtype(out) != dt ||
        !mft_tensor_is_contiguous(out, fmt) || mft_tensor_format(out) != fmt)
        return 1000;
    for (int64_t b = 0; b < count; b++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t w = 0; w < W; w++) {
                    int64_t si[4] = {idx[b], c, h, w}, s3[3] = {idx[b], h, w}, oi[4] = {b, c, h, w};
                    double v = mft_tensor_get(img, ind == 4 ? si : s3);
                    double want = (v * scale - mean) / std;
                    if (dt == MFT_F32) want = (float)want;
                    if (mft_tensor_get(out, oi) != want) bad++;
                }
    return bad;
}

static void test_images_to_batch(void) {
    const double scale = 1.0 / 255.0, mean = 0.2860, std = 0.3530;
    const mft_format fmts[2] = {MFT_CONTIGUOUS, MFT_CHANNELS_LAST};
    const mft_dtype dts[2] = {MFT_F32, MFT_F64};
    /* rank 3 (N,H,W), rank 4 in NCHW and NHWC, and a non-dense slice */
    const int64_t s3[3] = {9, 5, 4}, s4[4] = {6, 3, 4, 5};
    mft_tensor *im3 = make_images(3, s3, MFT_CONTIGUOUS);
    mft_tensor *im4 = make_images(4, s4, MFT_CONTIGUOUS);
    mft_tensor *im4cl = make_images(4, s4, MFT_CHANNELS_LAST);
    mft_tensor *im4big = make_images(4, (const int64_t[]){6, 3, 6, 7}, MFT_CHANNELS_LAST);
    mft_tensor *im4sl = mft_slice(im4big, 3, 1, 6, 1); /* W 1..5: gaps in the rows */
    mft_tensor *slh = mft_narrow(im4sl, 2, 1, 4);       /* H 1..4 */
    const mft_tensor *inputs[4] = {im3, im4, im4cl, slh};
    const int64_t idx[5] = {3, 0, 5, 3, 1};
    for (int i = 0; i < 4; i++)
        for (int f = 0; f < 2; f++)
            for (int d = 0; d < 2; d++) {
                mft_tensor *out = mft_images_to_batch(inputs[i], idx, 5, scale, mean, std, fmts[f], dts[d]);
                CHECK_MSG(out != NULL, "%s", mft_last_error_message());
                int bad = out ? check_batch(out, inputs[i], idx, 5, scale, mean, std, fmts[f], dts[d]) : -1;
                CHECK_MSG(bad == 0, "input %d fmt %d dtype %d: %d bad", i, f, d, bad);
                mft_tensor_release(out);
            }
    /* big enough to run in parallel chunks */
    const int64_t sb[3] = {300, 28, 28};
    mft_tensor *big = make_images(3, sb, MFT_CONTIGUOUS);
    int64_t bidx[200];
    for (int i = 0; i < 200; i++) bidx[i] = (i * 37) % 300;
    for (int f = 0; f < 2; f++) {
        mft_tensor *out = mft_images_to_batch(big, bidx, 200, 2.0, 1.0, 0.5, fmts[f], MFT_F32);
        CHECK(out && check_batch(out, big, bidx, 200, 2.0, 1.0, 0.5, fmts[f], MFT_F32) == 0);
        mft_tensor_release(out);
    }
    /* an empty batch */
    mft_tensor *e = mft_images_to_batch(im3, NULL, 0, 1, 0, 1, MFT_CHANNELS_LAST, MFT_F32);
    const int64_t es[4] = {0, 1, 5, 4};
    CHECK(e && tu_has_sizes(e, 4, es));
    mft_tensor_release(e);
    /* errors */
    const int64_t badidx[3] = {0, 2, 9};
    CHECK(mft_images_to_batch(im3, badidx, 3, 1, 0, 1, MFT_CONTIGUOUS, MFT_F32) == NULL);
    CHECK_ERR(MFT_ERR_DIM, "idx[2] = 9 is outside 0..8");
    const int64_t neg[1] = {-1};
    CHECK(mft_images_to_batch(im3, neg, 1, 1, 0, 1, MFT_CONTIGUOUS, MFT_F32) == NULL);
    CHECK_ERR(MFT_ERR_DIM, "idx[0] = -1");
    CHECK(mft_images_to_batch(im3, idx, 2, 1, 0, 0, MFT_CONTIGUOUS, MFT_F32) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "std 0");
    CHECK(mft_images_to_batch(im3, idx, 2, 1, 0, 1, MFT_PRESERVE, MFT_F32) == NULL);
    CHECK_ERR(MFT_ERR_FORMAT, "PRESERVE");
    CHECK(mft_images_to_batch(im3, idx, 2, 1, 0, 1, MFT_CONTIGUOUS, MFT_I32) == NULL);
    CHECK_ERR(MFT_ERR_DTYPE, "i32");
    mft_tensor *f32 = mft_zeros(3, s3, MFT_F32, MFT_CONTIGUOUS);
    CHECK(mft_images_to_batch(f32, idx, 2, 1, 0, 1, MFT_CONTIGUOUS, MFT_F32) == NULL);
    CHECK_ERR(MFT_ERR_DTYPE, "u8");
    CHECK(mft_images_to_batch(NULL, idx, 2, 1, 0, 1, MFT_CONTIGUOUS, MFT_F32) == NULL);
    CHECK_ERR(MFT_ERR_NULL, "images");
    CHECK(mft_images_to_batch(im3, NULL, 2, 1, 0, 1, MFT_CONTIGUOUS, MFT_F32) == NULL);
    CHECK_ERR(MFT_ERR_NULL, "idx");
    mft_tensor *r2 = mft_zeros(2, s3, MFT_U8, MFT_CONTIGUOUS);
    CHECK(mft_images_to_batch(r2, idx, 2, 1, 0, 1, MFT_CONTIGUOUS, MFT_F32) == NULL);
    CHECK_ERR(MFT_ERR_RANK, "(N,H,W)");
    mft_tensor *objs[] = {im3, im4, im4cl, im4big, im4sl, slh, big, f32, r2};
    for (size_t i = 0; i < sizeof objs / sizeof objs[0]; i++) mft_tensor_release(objs[i]);
}

static void test_gather_rows(void) {
    /* I64 labels */
    mft_tensor *lab = mft_arange(100, 110, 1, MFT_I64);
    const int64_t idx[4] = {9, 0, 4, 4};
    mft_tensor *g = mft_gather_rows(lab, idx, 4);
    CHECK(g && mft_tensor_ndim(g) == 1 && mft_tensor_sizes(g)[0] == 4 && mft_tensor_dtype(g) == MFT_I64);
    for (int i = 0; g && i < 4; i++) CHECK(mft_tensor_get(g, (int64_t[]){i}) == 100 + idx[i]);
    mft_tensor_release(g);
    /* rank 4 in both formats, F32, and a non-dense (transposed) input */
    const int64_t sz[4] = {5, 3, 2, 4};
    const mft_format fmts[2] = {MFT_CONTIGUOUS, MFT_CHANNELS_LAST};
    for (int f = 0; f < 3; f++) {
        mft_tensor *base = tu_iota(4, sz, MFT_F64, 1.0);
        mft_tensor *src = f < 2 ? mft_contiguous(base, fmts[f]) : mft_transpose(base, 2, 3);
        const int64_t *ssz = mft_tensor_sizes(src);
        g = mft_gather_rows(src, idx + 1, 3);
        CHECK_MSG(g != NULL, "%s", mft_last_error_message());
        if (g) {
            CHECK(mft_tensor_sizes(g)[0] == 3);
            if (f < 2) CHECK(mft_tensor_is_contiguous(g, fmts[f]) && mft_tensor_format(g) == fmts[f]);
            int64_t ix[4] = {0}, bad = 0;
            const int64_t gsz[4] = {3, ssz[1], ssz[2], ssz[3]};
            do {
                int64_t sx[4] = {idx[1 + ix[0]], ix[1], ix[2], ix[3]};
                bad += mft_tensor_get(g, ix) != mft_tensor_get(src, sx);
            } while (tu_next_index(4, gsz, ix));
            CHECK_MSG(bad == 0, "layout %d: %lld bad", f, (long long)bad);
        }
        mft_tensor_release(g);
        mft_tensor_release(src);
        mft_tensor_release(base);
    }
    /* U8 rank 2 with a row slice (strided rows) */
    mft_tensor *u = tu_iota(2, (const int64_t[]){6, 5}, MFT_U8, 0);
    mft_tensor *us = mft_slice(u, 1, 0, 5, 2); /* cols 0,2,4 */
    g = mft_gather_rows(us, (const int64_t[]){5, 1}, 2);
    CHECK(g && mft_tensor_get(g, (int64_t[]){0, 2}) == 29 && mft_tensor_get(g, (int64_t[]){1, 1}) == 7);
    mft_tensor_release(g);
    /* errors */
    CHECK(mft_gather_rows(lab, (const int64_t[]){3, 10}, 2) == NULL);
    CHECK_ERR(MFT_ERR_DIM, "idx[1] = 10 is outside 0..9");
    CHECK(mft_gather_rows(lab, idx, -1) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "count -1");
    mft_tensor *s0 = mft_zeros(0, NULL, MFT_F32, MFT_CONTIGUOUS);
    CHECK(mft_gather_rows(s0, idx, 1) == NULL);
    CHECK_ERR(MFT_ERR_RANK, "rank 0");
    CHECK(mft_gather_rows(NULL, idx, 1) == NULL);
    CHECK_ERR(MFT_ERR_NULL, "t");
    g = mft_gather_rows(lab, NULL, 0);
    CHECK(g && mft_tensor_numel(g) == 0);
    mft_tensor_release(g);
    mft_tensor_release(s0);
    mft_tensor_release(us);
    mft_tensor_release(u);
    mft_tensor_release(lab);
}

/* ------------------------------------------------------------------ shuffle */
static void test_shuffle_golden(void) {
    FILE *f = fopen(MFT_TEST_DATA_DIR "/data_cases.txt", "r");
    CHECK(f != NULL);
    if (!f) return;
    static char line[16384];
    int cases = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "shuffle ", 8) != 0) continue;
        char *p = line + 8, *end;
        int64_t n = strtoll(p, &end, 10);
        p = end;
        uint64_t seed = strtoull(p, &end, 10);
        p = end;
        int64_t *got = malloc(sizeof(int64_t) * (size_t)n);
        mft_shuffle_indices(got, n, seed);
        int64_t bad = 0;
        for (int64_t i = 0; i < n; i++) {
            int64_t want = strtoll(p, &end, 10);
            p = end;
            bad += got[i] != want;
        }
        CHECK_MSG(bad == 0, "shuffle n %lld seed %llu: %lld positions differ from gen_data.py",
                  (long long)n, (unsigned long long)seed, (long long)bad);
        free(got);
        cases++;
    }
    fclose(f);
    CHECK_EQ_I(cases, 8);
}

static void test_shuffle_properties(void) {
    const int64_t n = 100000;
    int64_t *a = malloc(sizeof(int64_t) * (size_t)n), *b = malloc(sizeof(int64_t) * (size_t)n);
    unsigned char *seen = calloc((size_t)n, 1);
    mft_shuffle_indices(a, n, 7);
    mft_shuffle_indices(b, n, 7);
    CHECK(memcmp(a, b, sizeof(int64_t) * (size_t)n) == 0); /* deterministic */
    bool perm = true;
    int64_t fixed = 0;
    for (int64_t i = 0; i < n; i++) {
        if (a[i] < 0 || a[i] >= n || seen[a[i]]) perm = false;
        else seen[a[i]] = 1;
        fixed += a[i] == i;
    }
    CHECK(perm);
    CHECK(fixed < 20); /* about 1 fixed point is expected; the identity would have n */
    mft_shuffle_indices(b, n, 8);
    int64_t same = 0;
    for (int64_t i = 0; i < n; i++) same += a[i] == b[i];
    CHECK(same < 20);
    mft_shuffle_indices(NULL, 0, 1); /* no-op */
    mft_shuffle_indices(NULL, 3, 1);
    CHECK_ERR(MFT_ERR_NULL, "idx");
    free(a);
    free(b);
    free(seen);
}

static void test_batches(void) {
    mft_batches bt;
    CHECK(mft_batches_init(&bt, 10, 4, false, 0, false) == MFT_OK);
    CHECK_EQ_I(mft_batches_count(&bt), 3);
    const int64_t *idx;
    int64_t count, total = 0, nb = 0;
    while (mft_batches_next(&bt, &idx, &count)) {
        for (int64_t i = 0; i < count; i++) CHECK_EQ_I(idx[i], total + i);
        total += count;
        nb++;
    }
    CHECK_EQ_I(total, 10);
    CHECK_EQ_I(nb, 3);
    mft_batches_free(&bt);
    CHECK(mft_batches_init(&bt, 10, 4, true, 99, true) == MFT_OK);
    CHECK_EQ_I(mft_batches_count(&bt), 2);
    int64_t want[10];
    for (uint64_t ep = 0; ep < 3; ep++) {
        mft_batches_start_epoch(&bt, ep);
        mft_shuffle_indices(want, 10, 99 + ep);
        total = 0, nb = 0;
        while (mft_batches_next(&bt, &idx, &count)) {
            CHECK_EQ_I(count, 4);
            for (int64_t i = 0; i < count; i++) CHECK_EQ_I(idx[i], want[total + i]);
            total += count;
            nb++;
        }
        CHECK_EQ_I(nb, 2);
    }
    mft_batches_free(&bt);
    CHECK(mft_batches_init(&bt, 5, 0, true, 1, false) == MFT_ERR_INVALID);
    CHECK_ERR(MFT_ERR_INVALID, "batch_size 0");
    mft_batches_free(&bt);
    CHECK(mft_batches_init(&bt, 0, 3, true, 1, false) == MFT_OK);
    CHECK(!mft_batches_next(&bt, &idx, &count));
    mft_batches_free(&bt);
}

/* ------------------------------------------------------------------ temp dir */
static bool mkdir_p(const char *d) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", d);
    return system(cmd) == 0;
}

/* ------------------------------------------------------------------ allocation failures */
/* A counting allocator that fails allocation number fail_at (1-based; 0 never). */

/* Every allocation of the loaders and batch functions, failed in turn. */
static void test_alloc_failures(void) {
    fa_install();
    char dir[300], p[400];
    snprintf(dir, sizeof dir, "%s/af", tmpdir);
    CHECK(mkdir_p(dir));
    unsigned char buf[256];
    uint32_t isz[3] = {4, 3, 5}, lsz[1] = {4};
    size_t h = idx_header(buf, 0x08, 3, isz);
    for (int i = 0; i < 60; i++) buf[h + (size_t)i] = (unsigned char)(i * 3);
    snprintf(p, sizeof p, "%s/t10k-images-idx3-ubyte.gz", dir);
    CHECK(write_gz(p, buf, h + 60));
    h = idx_header(buf, 0x0B, 1, lsz); /* i16 labels: the staging-buffer path */
    memset(buf + h, 0, 8);
    snprintf(p, sizeof p, "%s/t10k-labels-idx1-ubyte", dir);
    CHECK(write_file(p, buf, h + 8));
    const int64_t tens0 = mft_live_tensors();
    const long long live0 = g_fa.live;
    int nomem = 0;
    bool completed = false;
    for (long long k = 1; k < 1000 && !completed; k++) {
        fa_arm(k);
        mft_tensor *im = NULL, *lb = NULL, *b = NULL, *g = NULL;
        mft_status st = mft_mnist_load(dir, "t10k", &im, &lb);
        CHECK_MSG(st == MFT_OK || st == MFT_ERR_NOMEM, "k %lld: %s", k, mft_last_error_message());
        bool failed = st != MFT_OK;
        if (failed) CHECK(!im && !lb);
        if (!failed) {
            const int64_t idx[3] = {3, 1, 3};
            b = mft_images_to_batch(im, idx, 3, 1.0 / 255, 0.5, 0.5, MFT_CHANNELS_LAST, MFT_F32);
            g = b ? mft_gather_rows(lb, idx, 3) : NULL;
            failed = !g;
            if (failed) CHECK(mft_last_error() == MFT_ERR_NOMEM);
        }
        if (!failed) {
            mft_batches bt;
            failed = mft_batches_init(&bt, 100, 7, true, 1, false) != MFT_OK;
            if (failed) CHECK(mft_last_error() == MFT_ERR_NOMEM);
            mft_batches_free(&bt);
        }
        fa_arm(0);
        mft_tensor_release(im);
        mft_tensor_release(lb);
        mft_tensor_release(b);
        mft_tensor_release(g);
        CHECK_MSG(mft_live_tensors() == tens0 && g_fa.live == live0, "k %lld: leak", k);
        mft_clear_error();
        if (!failed) completed = true;
        else nomem++;
    }
    CHECK(completed && nomem > 5);
    mft_set_allocator(NULL);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "%s/mft_test_data.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_fashion_mnist);
    RUN(test_mnist_checks);
    RUN(test_idx_types);
    RUN(test_idx_malformed);
    RUN(test_images_to_batch);
    RUN(test_gather_rows);
    RUN(test_shuffle_golden);
    RUN(test_shuffle_properties);
    RUN(test_batches);
    RUN(test_alloc_failures);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    TEST_MAIN_END();
}
