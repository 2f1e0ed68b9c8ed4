/* tests/fuzz/make_seeds.c — writes the committed seed corpora of the fuzz targets
 * (tests/fuzz/corpus/<target>/). Run from a build directory:
 *     ./tests/fuzz/fuzz_make_seeds ../tests/fuzz/corpus
 * It overwrites the files it writes (named seed-*) and leaves other files (e.g.
 * regression inputs added from findings) alone.
 *   checkpoint/  real files written by mft_save_tensors (all targets, subsets,
 *                wrong dtype/shape, extra entries, NCHW vs NHWC, rank 0 and 8,
 *                empty tensors, a long name) and damaged copies (truncated, bad
 *                checksum, version, magic);
 *   idx/         one mode byte + an IDX file: each element type, rank 1..8, empty,
 *                real .gz files (written with gzopen/gzwrite), truncated header
 *                or data, trailing bytes, bad magic/type/rank, a cut .gz;
 *   geometry/    encoded from_blob arguments + view chains (see fuzz_geometry.c);
 *   overlap/     encoded cases (see fuzz_overlap.c);
 *   layout/      layout strings of the three vocabularies (see fuzz_layout.c);
 *   safetensors/ files written by mft_safetensors_save in both modes (the
 *                fuzz target's targets, channels_last, nChw16c, a scalar,
 *                empty and plain tensors); the directory also holds copies of
 *                the golden files tests/golden/safetensors/ (valid and
 *                malformed, from gen_safetensors.py), not written here;
 *   npy/         .npy files from mft_save_npy (every dtype, rank 0-5, empty,
 *                channels_last physical, NCHW16C blocks, a transpose, format
 *                2.0) and hand-built headers (Fortran order, big-endian, 3.0,
 *                keys reordered, Python 2's 'L') with damaged variants. The
 *                numpy-* files there were written by NumPy (copies of
 *                tests/golden/npy/ files) and are not rewritten. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>
#define XXH_INLINE_ALL
#include <xxhash.h>
#include "mft/mft.h"

static const char *g_root;

static void die(const char *what) {
    fprintf(stderr, "make_seeds: %s: %s\n", what, mft_last_error_message());
    exit(1);
}

static void path_of(char *buf, size_t len, const char *target, const char *name) {
    snprintf(buf, len, "%s/%s/seed-%s", g_root, target, name);
}

static void write_bytes(const char *target, const char *name, const void *p, size_t n) {
    char path[1024];
    path_of(path, sizeof path, target, name);
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(p, 1, n, f) != n) || fclose(f) != 0) {
        fprintf(stderr, "make_seeds: cannot write %s: %s\n", path, strerror(errno));
        exit(1);
    }
}

static unsigned char *read_bytes(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    unsigned char *buf = malloc(1 << 20);
    *n = buf ? fread(buf, 1, 1 << 20, f) : 0;
    fclose(f);
    return buf;
}

/* ------------------------------------------------------------------ checkpoint */
static mft_tensor *filled(int nd, const int64_t *sizes, mft_dtype dt, mft_format f, double start) {
    mft_tensor *t = mft_empty(nd, sizes, dt, f);
    if (!t) die("empty");
    int64_t n = mft_tensor_numel(t);
    mft_tensor *a = mft_arange(start, start + (double)n, 1, dt);
    mft_tensor *v = a ? mft_reshape(a, nd, sizes) : NULL;
    if (!v || mft_copy_(t, v) != MFT_OK) die("fill");
    mft_tensor_release(v);
    mft_tensor_release(a);
    return t;
}

static void save(const char *name, int n, const char *const *names, mft_tensor *const *ts) {
    char path[1024];
    path_of(path, sizeof path, "checkpoint", name);
    if (mft_save_tensors(path, n, names, (const mft_tensor *const *)ts) != MFT_OK) die("save");
}

static void damaged(const char *from, const char *name, size_t at, int xor_byte, size_t cut) {
    char path[1024];
    path_of(path, sizeof path, "checkpoint", from);
    size_t n;
    unsigned char *b = read_bytes(path, &n);
    if (!b) die("read back");
    if (at < n) b[at] ^= (unsigned char)xor_byte;
    write_bytes("checkpoint", name, b, cut && cut < n ? cut : n);
    free(b);
}

/* A hand-built file (docs/checkpoint-format.md): one rank-4 entry "empty" of
 * sizes (0, 39, 0, 0) with strides (0, INT64_MAX, 0, 0), which an empty tensor may
 * carry (a regression input: such an entry once overflowed in the reader). */
static void checkpoint_empty_huge_strides(void) {
    unsigned char b[192] = {0};
    size_t k = 0;
    memcpy(b, "MFTCKPT", 8);
    k = 8;
    b[k] = 1, k += 4;               /* version */
    b[k] = 1, k += 4;               /* one entry */
    b[k] = 5, k += 4;               /* name length */
    memcpy(b + k, "empty", 5), k += 5;
    b[k++] = 0, b[k++] = 0, b[k++] = 4, b[k++] = 0; /* f32, CONTIGUOUS, rank 4, reserved */
    const uint64_t sizes[4] = {0, 39, 0, 0}, strides[4] = {0, INT64_MAX, 0, 0};
    for (int d = 0; d < 8; d++, k += 8) {
        uint64_t v = d < 4 ? sizes[d] : strides[d - 4];
        for (int i = 0; i < 8; i++) b[k + (size_t)i] = (unsigned char)(v >> (8 * i));
    }
    k += 16;            /* storage offset 0, payload 0 bytes */
    k = (k + 63) / 64 * 64; /* zero padding to the (empty) payload */
    uint64_t h = XXH3_64bits(b, k);
    for (int i = 0; i < 8; i++) b[k + (size_t)i] = (unsigned char)(h >> (8 * i));
    write_bytes("checkpoint", "empty-huge-strides", b, k + 8);
}

static void checkpoint_seeds(void) {
    checkpoint_empty_huge_strides();
    static const int64_t s_weight[4] = {4, 3, 2, 2}, s_bias[1] = {3}, s_mask[2] = {2, 5},
                         s_ids[3] = {2, 3, 4}, s_empty[2] = {0, 3}, s_slice[2] = {4, 3},
                         s_mask_t[2] = {5, 2}, s_r5[5] = {1, 2, 1, 2, 3}, s_r8[8] = {1, 1, 1, 1, 1, 1, 2, 1},
                         s_c1[4] = {2, 1, 2, 2}, s_wide[2] = {4, 6};
    const char *names[9] = {"weight", "bias", "step", "mask", "ids", "empty", "slice", "extra", "packed"};
    mft_tensor *ts[9];
    ts[0] = filled(4, s_weight, MFT_F32, MFT_CHANNELS_LAST, 1000);
    ts[1] = filled(1, s_bias, MFT_F64, MFT_CONTIGUOUS, 0.25);
    ts[2] = filled(0, NULL, MFT_I64, MFT_CONTIGUOUS, 42);
    ts[3] = filled(2, s_mask, MFT_U8, MFT_CONTIGUOUS, 1);
    ts[4] = filled(3, s_ids, MFT_I32, MFT_CONTIGUOUS, -12);
    ts[5] = filled(2, s_empty, MFT_F32, MFT_CONTIGUOUS, 0);
    ts[6] = filled(2, s_slice, MFT_F32, MFT_CONTIGUOUS, 500);
    ts[7] = filled(5, s_r5, MFT_I32, MFT_CHANNELS_LAST, 7);
    mft_tensor *wide = filled(2, s_wide, MFT_F64, MFT_CONTIGUOUS, 3);
    ts[8] = mft_slice(wide, 1, 1, 6, 2); /* non-dense: saved packed */
    if (!ts[8]) die("slice");
    save("all", 7, names, ts);
    save("all-extra", 9, names, ts);
    save("weight-bias", 2, names, ts);
    for (int i = 0; i < 7; i++) {
        char n[64];
        snprintf(n, sizeof n, "only-%s", names[i]);
        save(n, 1, &names[i], &ts[i]);
    }
    save("none", 0, NULL, NULL);
    /* mismatches */
    mft_tensor *bias32 = filled(1, s_bias, MFT_F32, MFT_CONTIGUOUS, 0);
    mft_tensor *mask_t = filled(2, s_mask_t, MFT_U8, MFT_CONTIGUOUS, 0);
    mft_tensor *w_nchw = filled(4, s_weight, MFT_F32, MFT_CONTIGUOUS, -5);
    mft_tensor *mix[7] = {w_nchw, bias32, ts[2], mask_t, ts[4], ts[5], ts[6]};
    save("wrong-dtype-bias", 2, &names[0], (mft_tensor *const[]){ts[0], bias32});
    save("wrong-shape-mask", 1, &names[3], &mask_t);
    save("weight-nchw", 1, &names[0], &w_nchw);
    save("mixed", 7, names, mix);
    /* shapes at the edges */
    mft_tensor *r8 = filled(8, s_r8, MFT_U8, MFT_CONTIGUOUS, 9);
    mft_tensor *c1 = filled(4, s_c1, MFT_F64, MFT_CHANNELS_LAST, 2);
    const char *edge_names[3] = {"rank8", "c1-nhwc", "ids"};
    mft_tensor *edge[3] = {r8, c1, ts[4]};
    save("edge", 3, edge_names, edge);
    char long_name[301];
    memset(long_name, 'n', 300);
    long_name[300] = '\0';
    const char *ln[1] = {long_name};
    save("long-name", 1, ln, &ts[1]);
    /* blocked entries (format version 2): nChw16c and nChw8c with pad lanes */
    static const int64_t s_b16[4] = {2, 17, 2, 3}, s_b8[4] = {1, 3, 2, 2};
    mft_tensor *b16 = filled(4, s_b16, MFT_F32, MFT_NCHW16C, 1);
    mft_tensor *b8 = filled(4, s_b8, MFT_F64, MFT_NCHW8C, -3);
    const char *bnames[3] = {"b16", "b8", "bias"};
    save("blocked", 3, bnames, (mft_tensor *const[]){b16, b8, ts[1]});
    damaged("blocked", "blocked-version1", 8, 0x03, 0); /* 2 -> 1: codes 2 / 3 refused */
    /* damaged copies of "all" */
    damaged("all", "bad-magic", 0, 0x20, 0);
    damaged("all", "bad-version", 8, 0x02, 0);
    damaged("all", "bad-payload", 200, 0x01, 0);
    damaged("all", "bad-count", 12, 0x01, 0);
    damaged("all", "truncated", 0, 0, 300);
    damaged("weight-bias", "bad-ndim", 16 + 4 + 6 + 2, 0x0f, 0);
    mft_tensor *dead[8] = {bias32, mask_t, w_nchw, r8, c1, wide, b16, b8};
    for (int i = 0; i < 8; i++) mft_tensor_release(dead[i]);
    for (int i = 0; i < 9; i++) mft_tensor_release(ts[i]);
}

/* ------------------------------------------------------------------ idx */
static size_t idx_file(unsigned char *buf, uint8_t mode, uint8_t type, int nd, const uint32_t *sizes,
                       size_t esize) {
    size_t k = 0, numel = 1;
    buf[k++] = mode;
    buf[k++] = 0;
    buf[k++] = 0;
    buf[k++] = type;
    buf[k++] = (uint8_t)nd;
    for (int d = 0; d < nd; d++) {
        for (int b = 3; b >= 0; b--) buf[k++] = (uint8_t)(sizes[d] >> (8 * b));
        numel *= sizes[d];
    }
    for (size_t i = 0; i < numel * esize; i++) buf[k++] = (uint8_t)(i * 37 + 11 + type);
    return k;
}

static void idx_gz(const char *name, const unsigned char *p, size_t n, size_t cut) {
    char path[1024];
    path_of(path, sizeof path, "idx", name);
    gzFile gz = gzopen(path, "wb9");
    if (!gz || gzwrite(gz, p, (unsigned)n) != (int)n || gzclose(gz) != Z_OK) die("gzwrite");
    size_t len;
    unsigned char *b = read_bytes(path, &len);
    if (!b) die("read back");
    unsigned char *m = malloc(len + 1);
    m[0] = 0; /* mode: raw (the file itself is gzip) */
    memcpy(m + 1, b, len);
    write_bytes("idx", name, m, 1 + (cut && cut < len ? cut : len));
    free(m);
    free(b);
}

static void idx_seeds(void) {
    unsigned char buf[4096];
    size_t n;
    const uint32_t s233[3] = {2, 3, 3}, s5[1] = {5}, s22[2] = {2, 2}, s3[1] = {3}, s12[2] = {1, 2},
                   s8[8] = {1, 2, 1, 1, 2, 1, 1, 2}, s05[2] = {0, 5}, s344[3] = {3, 4, 4}, s23[2] = {2, 3};
    n = idx_file(buf, 0, 0x08, 3, s233, 1), write_bytes("idx", "u8-2x3x3", buf, n);
    n = idx_file(buf, 1, 0x08, 3, s233, 1), write_bytes("idx", "u8-2x3x3-gzip-mode", buf, n);
    n = idx_file(buf, 0x21 | 0x40, 0x08, 3, s233, 1), write_bytes("idx", "u8-gzip-cut", buf, n);
    n = idx_file(buf, 0, 0x09, 1, s5, 1), write_bytes("idx", "i8-5", buf, n);
    n = idx_file(buf, 0, 0x0B, 2, s22, 2), write_bytes("idx", "i16-2x2", buf, n);
    n = idx_file(buf, 3, 0x0C, 1, s3, 4), write_bytes("idx", "i32-3", buf, n);
    n = idx_file(buf, 0, 0x0D, 2, s22, 4), write_bytes("idx", "f32-2x2", buf, n);
    n = idx_file(buf, 0, 0x0E, 2, s12, 8), write_bytes("idx", "f64-1x2", buf, n);
    n = idx_file(buf, 0, 0x08, 8, s8, 1), write_bytes("idx", "u8-rank8", buf, n);
    n = idx_file(buf, 5, 0x08, 2, s05, 1), write_bytes("idx", "u8-empty", buf, n);
    /* malformed */
    n = idx_file(buf, 0, 0x08, 3, s233, 1);
    write_bytes("idx", "truncated-data", buf, n - 5);
    write_bytes("idx", "truncated-header", buf, 7);
    buf[n] = 0xAB, buf[n + 1] = 0xCD;
    write_bytes("idx", "trailing-bytes", buf, n + 2);
    n = idx_file(buf, 0, 0x08, 3, s233, 1), buf[2] = 1, write_bytes("idx", "bad-magic", buf, n);
    n = idx_file(buf, 0, 0x0A, 3, s233, 1), write_bytes("idx", "bad-type", buf, n);
    n = idx_file(buf, 0, 0x08, 0, s233, 1), write_bytes("idx", "rank0", buf, n);
    const uint32_t s9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 2};
    n = idx_file(buf, 0, 0x08, 9, s9, 1), write_bytes("idx", "rank9", buf, n);
    const uint32_t huge[3] = {60000, 60000, 60000};
    n = idx_file(buf, 0, 0x08, 3, huge, 0), write_bytes("idx", "absurd-sizes", buf, n);
    /* real gzip files (the mode byte says raw: the bytes are the .gz file) */
    n = idx_file(buf, 0, 0x08, 3, s344, 1), idx_gz("u8-3x4x4.gz", buf + 1, n - 1, 0);
    n = idx_file(buf, 0, 0x0D, 2, s23, 4), idx_gz("f32-2x3.gz", buf + 1, n - 1, 0);
    n = idx_file(buf, 0, 0x08, 3, s344, 1), idx_gz("u8-cut.gz", buf + 1, n - 1, 30);
    n = idx_file(buf, 0, 0x08, 3, s233, 1), idx_gz("u8-truncated-data.gz", buf + 1, n - 4, 0);
}

/* ------------------------------------------------------------------ geometry */
/* fz_i64 encoding of small values: 0..7 as is, -16..15 via 0x60, 8..39 via 0xE0. */
static uint8_t enc(int v) {
    if (v >= 0 && v <= 7) return (uint8_t)v;
    if (v >= -16 && v <= 15) return (uint8_t)(0x60 | (v + 16));
    return (uint8_t)(0xE0 | (v - 8));
}

static void geometry_seeds(void) {
    /* seed, dtype, ndim, flags, sizes..., [strides...], [offset], then per step:
     * describe-cut, conversions (clone fmt, to_dtype), op, op args */
    const uint8_t nchw[] = {7, 0, 4, 1, enc(2), enc(3), enc(4), enc(5), 40, 0, 1, 1, 0, 3, 2, 1, 0,
                            20, 1, 4, 1, 2, 1, 1, 5, 2, 2, 0, 0, 4, 9, 2, 1};
    const uint8_t nhwc[] = {3, 0, 4, 0, enc(2), enc(3), enc(2), enc(2), enc(12), enc(1), enc(6), enc(3),
                            10, 2, 3, 7, 1, 0, 2, 0, 1, 0, 0, 1, 6, 0, 4, 5, 3, 2, 1, 1};
    const uint8_t padded[] = {9, 1, 3, 2, enc(2), enc(3), enc(4), enc(32), enc(1), enc(8), enc(5),
                              5, 1, 2, 2, 2, enc(-1), enc(2), 9, 2, 0, 4, 0, enc(2), 3};
    const uint8_t bcast[] = {1, 4, 2, 1, enc(3), enc(1), 0, 0, 1, 7, 2, 0, enc(-1), 7, enc(4), 0, 0,
                             3, 1, 1, 8, 0, 2, enc(6), enc(2)};
    const uint8_t scalar[] = {5, 3, 0, 0, 0, 0, 0, 5, 0, 0, 6, 1, 0, 0, 1, 0, 11, 0, 0};
    const uint8_t empty[] = {2, 2, 3, 0, enc(2), 0, enc(3), enc(4), 0x80, enc(1), 0, 1, 1, 2, 1, 4,
                             0, 2, 2, 0, 3, 2, 0, 1, 3};
    const uint8_t huge_stride_size1[] = {4, 0, 3, 0, enc(1), enc(2), enc(1), 0x80, enc(1), 0x88, 0, 1,
                                         1, 5, 3, 0, 1, 1, 6, 0, 0, 0, 1, 0, 7, 4, 1, 0, 0};
    const uint8_t strided_r5[] = {6, 1, 5, 0, enc(1), enc(2), enc(2), enc(2), enc(2), enc(16), enc(1),
                                  enc(8), enc(4), enc(2), 0, 1, 2, 0, 4, 0, enc(1), enc(3), enc(1)};
    const uint8_t misaligned[] = {8, 0, 1, 4, enc(3), 2};
    const uint8_t bad_dtype[] = {0, 250, 2, 1, enc(2), enc(2)};
    const uint8_t bad_ndim[] = {0, 0, 241, 1};
    const uint8_t out_of_bounds[] = {0, 0, 2, 10, enc(4), enc(4), enc(4), enc(1), enc(3), 8, 0};
    const uint8_t i64_chain[] = {11, 3, 2, 1, enc(6), enc(4), 0, 0, 9, 10, 2, enc(2), enc(2), enc(3),
                                 0, 0, 11, 0, 1, 0, 0, 3, 5, 1, 0, 0, 5, 0, 0, 0};
    struct { const char *name; const uint8_t *p; size_t n; } g[] = {
        {"nchw-chain", nchw, sizeof nchw}, {"nhwc-chain", nhwc, sizeof nhwc},
        {"padded-f64", padded, sizeof padded}, {"broadcast-u8", bcast, sizeof bcast},
        {"scalar", scalar, sizeof scalar}, {"empty", empty, sizeof empty},
        {"huge-stride-size1", huge_stride_size1, sizeof huge_stride_size1},
        {"strided-rank5", strided_r5, sizeof strided_r5}, {"misaligned", misaligned, sizeof misaligned},
        {"bad-dtype", bad_dtype, sizeof bad_dtype}, {"bad-ndim", bad_ndim, sizeof bad_ndim},
        {"out-of-bounds", out_of_bounds, sizeof out_of_bounds}, {"i64-chain", i64_chain, sizeof i64_chain},
    };
    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) write_bytes("geometry", g[i].name, g[i].p, g[i].n);
}

/* ------------------------------------------------------------------ overlap */
static void overlap_seeds(void) {
    /* dtype, fill, wrap mode, then cases: op, dst (nd, sizes, strides, offset[, wrap]), inputs... */
    const uint8_t views_add[] = {0, 0, 0, 0, 2, 3, 4, 4, 1, 0, 2, 1, 2, 0};
    const uint8_t views_copy_shift[] = {2, 2, 0, 11, 1, 8, 1, 0, 2, 1, 0, 0};
    const uint8_t wraps_mul[] = {0, 4, 1, 2, 1, 8, 1, 4, 3, 5, 1, 0, 1, 4};
    const uint8_t mixed_where[] = {1, 6, 2, 26, 2, 2, 4, 4, 1, 0, 0, 4, 1, 1, 2, 2, 0, 1, 0, 3, 3, 1};
    const uint8_t inplace_bcast[] = {3, 8, 0, 6, 2, 3, 3, 3, 1, 0, 4, 1, 1, 1, 5, 4};
    const uint8_t unary_chain[] = {4, 1, 1, 12, 1, 6, 1, 0, 2, 7, 13, 2, 2, 2, 2, 1, 9, 0, 0,
                                   24, 1, 5, 1, 2, 1, 3, 1, 0, 27, 2, 2, 2, 0, 0, 0};
    const uint8_t self_overlap[] = {0, 2, 0, 20, 2, 3, 3, 1, 1, 0, 27, 2, 2, 2, 0, 1, 3};
    const uint8_t copy_convert[] = {1, 0, 2, 11, 2, 2, 3, 3, 1, 0, 1, 2, 5, 1, 200, 0, 0};
    struct { const char *name; const uint8_t *p; size_t n; } s[] = {
        {"views-add", views_add, sizeof views_add}, {"views-copy-shift", views_copy_shift, sizeof views_copy_shift},
        {"wraps-mul", wraps_mul, sizeof wraps_mul}, {"mixed-where", mixed_where, sizeof mixed_where},
        {"inplace-broadcast", inplace_bcast, sizeof inplace_bcast}, {"unary-chain", unary_chain, sizeof unary_chain},
        {"self-overlap", self_overlap, sizeof self_overlap}, {"copy-convert", copy_convert, sizeof copy_convert},
    };
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++) write_bytes("overlap", s[i].name, s[i].p, s[i].n);
}

/* layout/: mode byte, rank byte, sizes, then a layout string in one of the
 * three vocabularies (see fuzz_layout.c). */
static void layout_seed(const char *name, uint8_t mode, int nd, const uint8_t *sizes,
                        const char *s) {
    uint8_t buf[128];
    size_t n = 0;
    buf[n++] = mode;
    buf[n++] = (uint8_t)(nd - 1);
    for (int d = 0; d < nd; d++) buf[n++] = sizes[d];
    size_t len = strlen(s);
    memcpy(buf + n, s, len);
    write_bytes("layout", name, buf, n + len);
}

static void layout_seeds(void) {
    layout_seed("nchw16c", 0, 4, (const uint8_t[]){2, 9, 3, 2}, "nChw16c");
    layout_seed("nchw8c-letters", 0, 4, (const uint8_t[]){1, 3, 2, 5}, "aBcd8b");
    layout_seed("ncdhw16c", 0, 5, (const uint8_t[]){1, 5, 2, 2, 3}, "nCdhw16c");
    layout_seed("weights", 0, 4, (const uint8_t[]){5, 7, 3, 3}, "OIhw4i16o4i");
    layout_seed("ohwi16o", 0, 4, (const uint8_t[]){9, 2, 3, 3}, "Ohwi16o");
    layout_seed("nhwc", 0, 4, (const uint8_t[]){2, 3, 4, 4}, "nhwc");
    layout_seed("n-blocked", 0, 2, (const uint8_t[]){9, 5}, "Ab4a");
    layout_seed("nc1hwc0", 1 | (2 << 2), 4, (const uint8_t[]){2, 9, 2, 2}, "NC1HWC0");
    layout_seed("ndc1hwc0", 1 | (0 << 2), 5, (const uint8_t[]){1, 9, 2, 2, 2}, "NDC1HWC0");
    layout_seed("fractal-z", 1 | (3 << 2), 4, (const uint8_t[]){9, 5, 3, 3}, "FRACTAL_Z");
    layout_seed("fractal-nz", 1 | (2 << 2), 3, (const uint8_t[]){2, 9, 7}, "FRACTAL_NZ");
    layout_seed("xla-tile", 2, 2, (const uint8_t[]){3, 5}, "{1,0:T(2,2)}");
    layout_seed("xla-two-level", 2, 2, (const uint8_t[]){9, 9}, "{1,0:T(4,4)(2,1)}");
    layout_seed("xla-plain", 2, 3, (const uint8_t[]){2, 3, 4}, "{0,2,1}");
}

/* ------------------------------------------------------------------ safetensors */
static void safetensors_seeds(void) {
    const int64_t sx[4] = {1, 3, 2, 2}, sa[1] = {2}, sb[1] = {4}, sc[4] = {2, 17, 2, 3};
    mft_tensor *x = filled(4, sx, MFT_F32, MFT_CHANNELS_LAST, 1);
    mft_tensor *a = filled(1, sa, MFT_F32, MFT_CONTIGUOUS, 10);
    mft_tensor *b = filled(1, sb, MFT_F32, MFT_CONTIGUOUS, 20);
    mft_tensor *s = mft_full(0, NULL, MFT_I64, MFT_CONTIGUOUS, -3);
    mft_tensor *c = filled(4, sc, MFT_F64, MFT_CHANNELS_LAST, 0);
    mft_tensor *c16 = c ? mft_to_format(c, MFT_NCHW16C) : NULL;
    mft_tensor *e = mft_zeros(2, (int64_t[]){0, 5}, MFT_U8, MFT_CONTIGUOUS);
    if (!s || !c16 || !e) die("safetensors tensors");
    const char *names[7] = {"x", "a", "b", "s", "c", "c16", "e"};
    mft_tensor *ts[7] = {x, a, b, s, c, c16, e};
    const char *files[4] = {"targets-logical", "targets-physical", "mixed-logical",
                            "mixed-physical"};
    for (int k = 0; k < 4; k++) {
        char path[1024];
        path_of(path, sizeof path, "safetensors", files[k]);
        if (mft_safetensors_save(path, k < 2 ? 4 : 7, names, (const mft_tensor *const *)ts,
                                 k % 2 ? MFT_SAFETENSORS_PHYSICAL : 0) != MFT_OK)
            die("safetensors save");
    }
    for (int i = 0; i < 7; i++) mft_tensor_release(ts[i]);
}

/* ------------------------------------------------------------------ npy */
static void npy_save(const char *name, const mft_tensor *t, unsigned flags) {
    char path[1024];
    path_of(path, sizeof path, "npy", name);
    if (mft_save_npy(path, t, flags) != MFT_OK) die("save_npy");
}

/* A hand-built file: preamble of version major, the dict padded to 64, data. */
static void npy_raw(const char *name, int major, const char *dict, size_t nbytes, size_t cut) {
    unsigned char b[1024] = {0};
    size_t pre = major == 1 ? 10 : 12, dl = strlen(dict), total = (pre + dl + 1 + 63) / 64 * 64;
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (unsigned char)major;
    for (size_t i = 0; i < pre - 8; i++) b[8 + i] = (unsigned char)((total - pre) >> (8 * i));
    memcpy(b + pre, dict, dl);
    memset(b + pre + dl, ' ', total - pre - dl - 1);
    b[total - 1] = '\n';
    for (size_t i = 0; i < nbytes && total + i < sizeof b; i++) b[total + i] = (unsigned char)(i * 29 + 3);
    write_bytes("npy", name, b, cut ? cut : total + nbytes);
}

static void npy_seeds(void) {
    static const int64_t s4[4] = {2, 3, 2, 2}, s5[5] = {1, 2, 2, 1, 3}, s3[3] = {2, 2, 3},
                         s1[1] = {5}, s2[2] = {3, 4}, se[3] = {2, 0, 3}, sb[4] = {1, 17, 1, 2};
    mft_tensor *t[10];
    t[0] = filled(4, s4, MFT_F32, MFT_CHANNELS_LAST, 1);
    t[1] = filled(4, s4, MFT_F64, MFT_CONTIGUOUS, -3);
    t[2] = filled(5, s5, MFT_I32, MFT_CHANNELS_LAST, 7);
    t[3] = filled(3, s3, MFT_I64, MFT_CHANNELS_LAST, 100);
    t[4] = filled(1, s1, MFT_U8, MFT_CONTIGUOUS, 250);
    t[5] = filled(0, NULL, MFT_F64, MFT_CONTIGUOUS, 0.5);
    t[6] = filled(3, se, MFT_F32, MFT_CHANNELS_LAST, 0);
    t[7] = filled(4, sb, MFT_F32, MFT_NCHW16C, 1);
    t[8] = filled(2, s2, MFT_I32, MFT_CONTIGUOUS, -6);
    t[9] = mft_transpose(t[8], 0, 1);
    if (!t[9]) die("transpose");
    npy_save("f32-nhwc-physical", t[0], MFT_NPY_PHYSICAL);
    npy_save("f32-nhwc-logical", t[0], MFT_NPY_LOGICAL);
    npy_save("f64-nchw", t[1], 0);
    npy_save("i32-ndhwc", t[2], 0);
    npy_save("i64-nlc", t[3], 0);
    npy_save("u8-rank1", t[4], 0);
    npy_save("f64-rank0", t[5], 0);
    npy_save("f32-empty", t[6], 0);
    npy_save("f32-nchw16c", t[7], 0);
    npy_save("i32-transposed", t[9], 0);
    npy_save("f64-version2", t[1], MFT_NPY_VERSION2);
    for (int i = 0; i < 10; i++) mft_tensor_release(t[i]);
    npy_raw("fortran", 1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3, 2), }", 48, 0);
    npy_raw("big-endian", 1, "{'descr': '>f8', 'fortran_order': False, 'shape': (2, 2), }", 32, 0);
    npy_raw("version3", 3, "{'descr': '<i8', 'fortran_order': False, 'shape': (1, 2, 2, 1), }", 32, 0);
    npy_raw("reordered", 1, "{\"shape\": (3,), \"fortran_order\": False, \"descr\": \"|u1\"}", 3, 0);
    npy_raw("python2-long", 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (2L, 1L, 3L), }", 24, 0);
    npy_raw("extra-key", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", 8, 0);
    npy_raw("structured", 1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", 8, 0);
    npy_raw("float16", 1, "{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }", 4, 0);
    npy_raw("truncated", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 24, 80);
    npy_raw("trailing", 1, "{'descr': '|u1', 'fortran_order': False, 'shape': (2,), }", 3, 0);
    npy_raw("huge-shape", 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (0, 4294967296, 65536), }", 0, 0);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR   (tests/fuzz/corpus)\n", argv[0]);
        return 2;
    }
    g_root = argv[1];
    if (mkdir(g_root, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "make_seeds: cannot create %s: %s\n", g_root, strerror(errno));
        return 1;
    }
    const char *targets[7] = {"checkpoint", "idx", "geometry", "overlap", "layout",
                              "safetensors", "npy"};
    for (int i = 0; i < 7; i++) {
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", g_root, targets[i]);
        if (mkdir(p, 0777) != 0 && errno != EEXIST) {
            fprintf(stderr, "make_seeds: cannot create %s: %s\n", p, strerror(errno));
            return 1;
        }
    }
    checkpoint_seeds();
    idx_seeds();
    geometry_seeds();
    overlap_seeds();
    layout_seeds();
    safetensors_seeds();
    npy_seeds();
    if (mft_live_tensors() != 0 || mft_live_storages() != 0) {
        fprintf(stderr, "make_seeds: leaked tensors\n");
        return 1;
    }
    printf("seeds written under %s\n", g_root);
    return 0;
}
