/* tests/io/test_npy.c — mft/npy.h without Python: the golden files NumPy 1.24
 * wrote (tests/golden/npy/, made by tests/golden/gen_npy.py with the cases in
 * cases.txt) load with NumPy's shape, the dtype its descr names, C-order or
 * reversed (Fortran) strides and the values of the generator's formula, the
 * weighted sum NumPy computed agreeing; refused dtypes are refused naming their
 * descr; as CHANNELS_LAST gives the logical view of the (N,...,C) files with no
 * copy after the read. mft's files are byte-identical to NumPy's for the same
 * array (header, padding, data; the channels_last tensor's physical file equals
 * NumPy's (N,H,W,C) file), with no copy of a dense tensor; non-dense,
 * transposed and blocked tensors in both modes; round trips of every dtype,
 * rank 0-5 and format; every malformed-header and file-length check refused
 * with the function, the path and the problem; save errors leave no file;
 * allocation failures leak nothing. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include <sys/stat.h>
#include <unistd.h>
#include "fail_alloc.h"
#include "io/npy_util.h"

static char tmpdir[256];

static void tmp_path(char *buf, size_t len, const char *name) {
    snprintf(buf, len, "%s/%s", tmpdir, name);
}

static void golden_path(char *buf, size_t len, const char *name) {
    snprintf(buf, len, "%s/npy/%s.npy", MFT_TEST_DATA_DIR, name);
}

static bool write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = n == 0 || fwrite(p, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

static bool same_file_bytes(const char *a, const char *b) {
    size_t na, nb;
    unsigned char *x = tu_read_file(a, &na), *y = tu_read_file(b, &nb);
    bool same = x && y && na == nb && memcmp(x, y, na) == 0;
    if (!same) fprintf(stderr, "files differ: %s (%zu bytes) and %s (%zu bytes)\n", a, na, b, nb);
    free(x);
    free(y);
    return same;
}

static void test_golden_files(void) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/npy", MFT_TEST_DATA_DIR);
    npy_check_cases(dir);
}

/* as CHANNELS_LAST over NumPy's (N,H,W,C) / (N,L,C) / (N,D,H,W,C) files: the
 * logical view of the generator's channels-first tensor, no copy. */
static void test_golden_channels_last(void) {
    static const struct {
        const char *name;
        int nd;
        int64_t logical[5], strides[5];
        mft_dtype dt;
    } cases[] = {
        {"nhwc_f4_2x4x5x3", 4, {2, 3, 4, 5}, {60, 1, 15, 3}, MFT_F32},
        {"nlc_i4_2x5x3", 3, {2, 3, 5}, {15, 1, 3}, MFT_I32},
        {"ndhwc_f8_1x2x2x3x3", 5, {1, 3, 2, 2, 3}, {36, 1, 18, 9, 3}, MFT_F64},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char p[512];
        golden_path(p, sizeof p, cases[i].name);
        mft_tensor *t = mft_load_npy(p, MFT_CHANNELS_LAST);
        CHECK_MSG(t != NULL, "%s: %s", cases[i].name, mft_last_error_message());
        if (!t) continue;
        CHECK(tu_has_sizes(t, cases[i].nd, cases[i].logical));
        CHECK(memcmp(mft_tensor_strides(t), cases[i].strides,
                     sizeof(int64_t) * (size_t)cases[i].nd) == 0);
        CHECK(mft_tensor_format(t) == MFT_CHANNELS_LAST &&
              mft_tensor_format_origin(t) == MFT_DECLARED);
        CHECK(mft_tensor_is_contiguous(t, MFT_CHANNELS_LAST));
        CHECK(mft_tensor_dtype(t) == cases[i].dt);
        CHECK(mft_tensor_storage_numel(t) == mft_tensor_numel(t));
        CHECK_MSG(has_formula_values(t), "%s", cases[i].name);
        char prov[512];
        mft_tensor_provenance(t, prov, sizeof prov);
        CHECK_MSG(strstr(prov, "load_npy (declared: the file read as the physical") != NULL,
                  "%s: %s", cases[i].name, prov);
        /* the same file as it is: a plain array, its tag inferred from its strides */
        mft_tensor *u = mft_load_npy(p, MFT_CONTIGUOUS);
        CHECK_MSG(u != NULL, "%s: %s", cases[i].name, mft_last_error_message());
        if (u) {
            mft_tensor_provenance(u, prov, sizeof prov);
            CHECK_MSG(strstr(prov, "load_npy (inferred from the file's strides)") != NULL,
                      "%s: %s", cases[i].name, prov);
            mft_tensor_release(u);
        }
        mft_tensor_release(t);
    }
    /* what as cannot make of a file */
    static const struct {
        const char *file;
        mft_format as;
        mft_status st;
        const char *needle;
    } refused[] = {
        {"rank2_f8", MFT_CHANNELS_LAST, MFT_ERR_FORMAT, "has rank 2"},
        {"fortran_f4_3x4x5", MFT_CHANNELS_LAST, MFT_ERR_FORMAT, "fortran_order"},
        {"fortran_f4_3x4x5", MFT_NCHW16C, MFT_ERR_FORMAT, "mft_load_npy: as NCHW16C"},
        {NULL, MFT_CONTIGUOUS, MFT_ERR_NULL, "mft_load_npy: argument 'path'"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        char p[512];
        if (refused[i].file) golden_path(p, sizeof p, refused[i].file);
        mft_clear_error();
        CHECK(mft_load_npy(refused[i].file ? p : NULL, refused[i].as) == NULL);
        CHECK_ERR(refused[i].st, refused[i].needle);
    }
}

/* ------------------------------------------------------------------ writing */
/* A counting allocator: the largest request while it is installed. */
static size_t g_largest;
static long long g_allocs;
static void *count_alloc(size_t size, size_t align, void *ctx) {
    (void)ctx;
    g_allocs++;
    if (size > g_largest) g_largest = size;
    if (align < sizeof(void *)) align = sizeof(void *);
    return aligned_alloc(align, (size + align - 1) / align * align + align);
}
static void count_free(void *p, void *ctx) {
    (void)ctx;
    free(p);
}
static void count_begin(void) {
    g_largest = 0;
    g_allocs = 0;
    mft_allocator a = {count_alloc, count_free, NULL};
    mft_set_allocator(&a);
}

/* mft's files equal NumPy's byte for byte: every golden C-order little-endian
 * version 1.0 / 2.0 file, loaded and saved again (2.0 with MFT_NPY_VERSION2),
 * and tensors built here from the formula. */
static void test_bytes_equal_numpy(void) {
    static const char *const names[] = {
        "c_f4_2x3x4x5", "c_f8_2x3x4x5",   "c_i4_2x3x4x5", "c_i8_2x3x4x5", "c_u1_2x3x4x5",
        "rank0_f8",     "rank1_f8",       "rank2_f8",     "rank3_f8",     "rank5_f8",
        "empty_f4_0",   "empty_f4_0x3",   "empty_f4_2x0x4", "empty_f4_2x3x0x1",
        "fortran_empty_i8_0x3", "nhwc_f4_2x4x5x3", "v2_f4_2x3"};
    char g[512], p[512];
    tmp_path(p, sizeof p, "resaved.npy");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        golden_path(g, sizeof g, names[i]);
        mft_tensor *t = mft_load_npy(g, MFT_CONTIGUOUS);
        CHECK_MSG(t != NULL, "%s: %s", names[i], mft_last_error_message());
        unsigned flags = strncmp(names[i], "v2_", 3) == 0 ? MFT_NPY_VERSION2 : MFT_NPY_PHYSICAL;
        CHECK(mft_save_npy(p, t, flags) == MFT_OK);
        CHECK_MSG(same_file_bytes(p, g), "%s", names[i]);
        CHECK(access(p, F_OK) == 0);
        mft_tensor_release(t);
    }
    /* built from the formula, in both formats and both modes */
    static const int64_t s4[4] = {2, 3, 4, 5};
    static const mft_dtype dts[5] = {MFT_F32, MFT_F64, MFT_I32, MFT_I64, MFT_U8};
    static const char *const cnames[5] = {"c_f4_2x3x4x5", "c_f8_2x3x4x5", "c_i4_2x3x4x5",
                                          "c_i8_2x3x4x5", "c_u1_2x3x4x5"};
    for (int i = 0; i < 5; i++) {
        golden_path(g, sizeof g, cnames[i]);
        mft_tensor *x = make(4, s4, dts[i], MFT_CONTIGUOUS), *y = make(4, s4, dts[i], MFT_CHANNELS_LAST);
        CHECK(mft_save_npy(p, x, MFT_NPY_PHYSICAL) == MFT_OK && same_file_bytes(p, g));
        CHECK(mft_save_npy(p, x, MFT_NPY_LOGICAL) == MFT_OK && same_file_bytes(p, g));
        CHECK(mft_save_npy(p, y, MFT_NPY_LOGICAL) == MFT_OK && same_file_bytes(p, g));
        mft_tensor_release(x);
        mft_tensor_release(y);
    }
}

/* A channels_last tensor's physical file is NumPy's
 * np.ascontiguousarray(x.transpose(0,2,3,1)), written with no copy. */
static void test_channels_last_physical(void) {
    static const int64_t s4[4] = {2, 3, 4, 5};
    char g[512], p[512];
    golden_path(g, sizeof g, "nhwc_f4_2x4x5x3");
    tmp_path(p, sizeof p, "cl.npy");
    mft_tensor *x = make(4, s4, MFT_F32, MFT_CHANNELS_LAST);
    CHECK(mft_save_npy(p, x, MFT_NPY_PHYSICAL) == MFT_OK && same_file_bytes(p, g));
    /* rank 3 and 5 likewise */
    static const int64_t s3[3] = {2, 3, 5}, s5[5] = {1, 3, 2, 2, 3};
    mft_tensor *x3 = make(3, s3, MFT_I32, MFT_CHANNELS_LAST), *x5 = make(5, s5, MFT_F64, MFT_CHANNELS_LAST);
    golden_path(g, sizeof g, "nlc_i4_2x5x3");
    CHECK(mft_save_npy(p, x3, 0) == MFT_OK && same_file_bytes(p, g));
    golden_path(g, sizeof g, "ndhwc_f8_1x2x2x3x3");
    CHECK(mft_save_npy(p, x5, 0) == MFT_OK && same_file_bytes(p, g));
    mft_tensor_release(x3);
    mft_tensor_release(x5);
    /* no copy: a 1 MiB tensor is saved with no allocation near its size */
    static const int64_t big[4] = {4, 16, 64, 64};
    mft_tensor *b = mft_zeros(4, big, MFT_F32, MFT_CHANNELS_LAST);
    count_begin();
    CHECK(mft_save_npy(p, b, MFT_NPY_PHYSICAL) == MFT_OK);
    mft_set_allocator(NULL);
    CHECK_MSG(g_largest < 4096, "largest allocation while saving: %zu bytes", g_largest);
    count_begin();
    CHECK(mft_save_npy(p, b, MFT_NPY_LOGICAL) == MFT_OK); /* a logical copy is one */
    mft_set_allocator(NULL);
    CHECK(g_largest >= (size_t)mft_tensor_numel(b) * 4);
    /* and the load: one allocation holding the data, nothing larger after it */
    CHECK(mft_save_npy(p, b, MFT_NPY_PHYSICAL) == MFT_OK);
    count_begin();
    mft_tensor *r = mft_load_npy(p, MFT_CHANNELS_LAST);
    mft_set_allocator(NULL);
    CHECK(r != NULL && mft_tensor_hash(r) == mft_tensor_hash(b));
    CHECK_MSG(g_largest >= (size_t)mft_tensor_numel(b) * 4 &&
                  g_largest < (size_t)mft_tensor_numel(b) * 4 + 4096,
              "largest allocation while loading: %zu bytes", g_largest);
    mft_tensor_release(r);
    mft_tensor_release(b);
    mft_tensor_release(x);
}

/* Views, transposes, broadcasts and blocked tensors. */
static void test_layouts(void) {
    char p[512];
    tmp_path(p, sizeof p, "views.npy");
    static const int64_t s46[2] = {4, 6}, s34[2] = {3, 4};
    /* a slice with gaps: packed, values kept */
    mft_tensor *base = make(2, s46, MFT_F64, MFT_CONTIGUOUS);
    mft_tensor *sl = mft_slice(base, 1, 1, 6, 2);
    CHECK(mft_save_npy(p, sl, MFT_NPY_PHYSICAL) == MFT_OK);
    mft_tensor *r = mft_load_npy(p, MFT_CONTIGUOUS);
    CHECK(r && mft_tensor_hash(r) == mft_tensor_hash(sl));
    mft_tensor_release(r);
    /* a transposed matrix: physical = its memory, written as NumPy writes a
     * column-major array (fortran_order True, the logical shape (4,3)) */
    mft_tensor *m = make(2, s34, MFT_I32, MFT_CONTIGUOUS), *mt = mft_transpose(m, 0, 1);
    CHECK(mft_save_npy(p, mt, MFT_NPY_PHYSICAL) == MFT_OK);
    r = mft_load_npy(p, MFT_CONTIGUOUS);
    CHECK(r && mft_tensor_hash(r) == mft_tensor_hash(mt) &&
          memcmp(mft_tensor_strides(r), mft_tensor_strides(mt), 2 * sizeof(int64_t)) == 0);
    mft_tensor_release(r);
    /* a rank-3 column-major view: byte-identical to NumPy's Fortran file */
    char g[512];
    golden_path(g, sizeof g, "fortran_f4_3x4x5");
    static const int64_t s543[3] = {5, 4, 3};
    static const int rev[3] = {2, 1, 0};
    mft_tensor *f3 = make(3, s543, MFT_F32, MFT_CONTIGUOUS), *f3t = mft_permute(f3, rev);
    CHECK(mft_save_npy(p, f3t, MFT_NPY_PHYSICAL) == MFT_OK);
    r = mft_load_npy(g, MFT_CONTIGUOUS); /* NumPy's file of value((3,4,5)) in F order */
    mft_tensor *q = mft_load_npy(p, MFT_CONTIGUOUS);
    CHECK(r && q && tu_has_sizes(q, 3, (const int64_t[]){3, 4, 5}));
    mft_tensor_release(q);
    /* rewrite r's values as f3t's layout: same file bytes as NumPy's */
    CHECK(r && mft_save_npy(p, r, MFT_NPY_PHYSICAL) == MFT_OK && same_file_bytes(p, g));
    mft_tensor_release(r);
    mft_tensor_release(f3t);
    mft_tensor_release(f3);
    CHECK(mft_save_npy(p, mt, MFT_NPY_LOGICAL) == MFT_OK);
    r = mft_load_npy(p, MFT_CONTIGUOUS);
    CHECK(r && mft_tensor_hash(r) == mft_tensor_hash(mt) && mft_tensor_is_contiguous(r, MFT_CONTIGUOUS));
    mft_tensor_release(r);
    /* a broadcast: packed */
    static const int64_t s31[2] = {3, 1};
    mft_tensor *col = make(2, s31, MFT_U8, MFT_CONTIGUOUS), *ex = mft_expand(col, 2, s34);
    CHECK(mft_save_npy(p, ex, 0) == MFT_OK);
    r = mft_load_npy(p, MFT_CONTIGUOUS);
    CHECK(r && mft_tensor_hash(r) == mft_tensor_hash(ex));
    mft_tensor_release(r);
    /* NCHW16C: physical = (N,C1,H,W,C0) with zero pad lanes; logical = NCHW */
    static const int64_t sb[4] = {2, 17, 2, 3};
    mft_tensor *b = make(4, sb, MFT_F32, MFT_NCHW16C);
    CHECK(b != NULL);
    CHECK(mft_save_npy(p, b, MFT_NPY_PHYSICAL) == MFT_OK);
    r = mft_load_npy(p, MFT_CONTIGUOUS);
    static const int64_t phys[5] = {2, 2, 2, 3, 16};
    CHECK(r && tu_has_sizes(r, 5, phys));
    bool ok = r != NULL;
    for (int64_t n = 0; ok && n < 2; n++)
        for (int64_t c = 0; c < 32; c++)
            for (int64_t h = 0; h < 2; h++)
                for (int64_t w = 0; w < 3; w++) {
                    int64_t ix[5] = {n, c / 16, h, w, c % 16};
                    double want = c < 17 ? formula(((n * 17 + c) * 2 + h) * 3 + w, MFT_F32) : 0;
                    ok = ok && mft_tensor_get(r, ix) == want;
                }
    CHECK_MSG(ok, "NCHW16C physical array");
    mft_tensor_release(r);
    CHECK(mft_save_npy(p, b, MFT_NPY_LOGICAL) == MFT_OK);
    r = mft_load_npy(p, MFT_CONTIGUOUS);
    CHECK(r && tu_has_sizes(r, 4, sb) && has_formula_values(r));
    mft_tensor_release(r);
    /* NCHW8C view on a batch boundary: still packed */
    mft_tensor *b8 = make(4, sb, MFT_F64, MFT_NCHW8C), *b8v = mft_narrow(b8, 0, 1, 1);
    CHECK(mft_save_npy(p, b8v, MFT_NPY_PHYSICAL) == MFT_OK);
    r = mft_load_npy(p, MFT_CONTIGUOUS);
    static const int64_t phys8[5] = {1, 3, 2, 3, 8};
    CHECK(r && tu_has_sizes(r, 5, phys8));
    int64_t i0[5] = {0, 2, 1, 2, 0}, i1[5] = {0, 2, 1, 2, 1}, l0[4] = {0, 16, 1, 2};
    CHECK(r && mft_tensor_get(r, i0) == mft_tensor_get(b8v, l0) && mft_tensor_get(r, i1) == 0);
    mft_tensor_release(r);
    /* another blocked descriptor: logical only */
    mft_layout l;
    static const int64_t sw[4] = {5, 7, 3, 3};
    CHECK(mft_layout_from_onednn(4, sw, "OIhw16i16o", &l) == MFT_OK);
    mft_tensor *wz = mft_empty_layout(&l, MFT_F32), *w = wz ? mft_zeros(4, sw, MFT_F32, MFT_CONTIGUOUS) : NULL;
    mft_tensor *src = make(4, sw, MFT_F32, MFT_CONTIGUOUS);
    CHECK(wz && w && mft_copy_(wz, src) == MFT_OK);
    CHECK(mft_save_npy(p, wz, MFT_NPY_PHYSICAL) == MFT_ERR_FORMAT);
    CHECK_ERR(MFT_ERR_FORMAT, "mft_save_npy: MFT_NPY_PHYSICAL of a BLOCKED tensor");
    CHECK(mft_save_npy(p, wz, MFT_NPY_LOGICAL) == MFT_OK);
    r = mft_load_npy(p, MFT_CONTIGUOUS);
    CHECK(r && has_formula_values(r));
    mft_tensor *drop[] = {r, w, wz, src, b8v, b8, b, ex, col, mt, m, sl, base};
    for (size_t i = 0; i < sizeof drop / sizeof drop[0]; i++) mft_tensor_release(drop[i]);
}

/* Save then load: every dtype, rank 0-5, both formats, both modes. */
static void test_round_trips(void) {
    static const int64_t sz[5] = {2, 3, 2, 1, 4};
    static const mft_dtype dts[5] = {MFT_F32, MFT_F64, MFT_I32, MFT_I64, MFT_U8};
    char p[512];
    tmp_path(p, sizeof p, "rt.npy");
    for (int d = 0; d < 5; d++)
        for (int nd = 0; nd <= 5; nd++)
            for (int cl = 0; cl < 2; cl++)
                for (unsigned flags = 0; flags < 4; flags++) {
                    if (cl && (nd < 3)) continue;
                    mft_format fmt = cl ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
                    mft_tensor *x = make(nd, sz, dts[d], fmt);
                    CHECK(mft_save_npy(p, x, flags) == MFT_OK);
                    bool phys_cl = cl && !(flags & MFT_NPY_LOGICAL);
                    mft_tensor *r = mft_load_npy(p, phys_cl ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS);
                    CHECK_MSG(r && mft_tensor_hash(r) == mft_tensor_hash(x),
                              "dtype %s rank %d %s flags %u", mft_dtype_name(dts[d]), nd,
                              mft_format_name(fmt), flags);
                    if (r && nd >= 3)
                        CHECK(mft_tensor_format(r) == (phys_cl ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS) &&
                              memcmp(mft_tensor_strides(r), mft_tensor_strides(phys_cl ? x : r),
                                     sizeof(int64_t) * (size_t)nd) == 0);
                    mft_tensor_release(r);
                    mft_tensor_release(x);
                }
}

/* ------------------------------------------------------------------ refusals */
/* A .npy file: preamble of version major.minor, the dict padded to 64 with
 * spaces and '\n', then nbytes data bytes. */
static bool write_npy(const char *path, int major, int minor, const char *dict, size_t pad_to,
                      size_t nbytes) {
    size_t pre = major == 1 ? 10 : 12, dl = strlen(dict);
    size_t total = pre + dl + 1;
    if (pad_to < total) pad_to = (total + 63) / 64 * 64;
    unsigned char *b = calloc(pad_to + nbytes + 1, 1);
    if (!b) return false;
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (unsigned char)major, b[7] = (unsigned char)minor;
    size_t hlen = pad_to - pre;
    for (size_t i = 0; i < pre - 8; i++) b[8 + i] = (unsigned char)(hlen >> (8 * i));
    memcpy(b + pre, dict, dl);
    memset(b + pre + dl, ' ', pad_to - pre - dl - 1);
    b[pad_to - 1] = '\n';
    for (size_t i = 0; i < nbytes; i++) b[pad_to + i] = (unsigned char)i;
    bool ok = write_bytes(path, b, pad_to + nbytes);
    free(b);
    return ok;
}

#define GOOD "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"

static void expect_refused(const char *path, mft_status st, const char *needle) {
    mft_clear_error();
    mft_tensor *t = mft_load_npy(path, MFT_CONTIGUOUS);
    CHECK_MSG(t == NULL, "'%s' loaded (expected: %s)", path, needle);
    mft_tensor_release(t);
    const char *m = mft_last_error_message();
    CHECK_MSG(mft_last_error() == st, "status %s (expected %s), message '%s'",
              mft_status_str(mft_last_error()), mft_status_str(st), m);
    CHECK_MSG(strncmp(m, "mft_load_npy: ", 14) == 0 && strstr(m, path) && strstr(m, needle),
              "message '%s' lacks the function, the path or '%s'", m, needle);
    mft_clear_error();
}

static void test_malformed(void) {
    static const struct {
        const char *name;
        int major, minor;
        const char *dict;
        size_t nbytes;
        mft_status st;
        const char *needle;
    } cases[] = {
        {"version4", 4, 0, GOOD, 24, MFT_ERR_UNSUPPORTED, "format version 4.0"},
        {"version1.1", 1, 1, GOOD, 24, MFT_ERR_UNSUPPORTED, "format version 1.1"},
        {"truncated", 1, 0, GOOD, 23, MFT_ERR_CORRUPT, "23 bytes of data after the header, shape [2,3] of f32 needs 24 (truncated)"},
        {"trailing", 1, 0, GOOD, 25, MFT_ERR_CORRUPT, "(trailing bytes)"},
        {"missing-key", 1, 0, "{'descr': '<f4', 'shape': (2, 3), }", 24, MFT_ERR_CORRUPT, "key 'fortran_order' is missing"},
        {"extra-key", 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'mft_layout': 'nhwc', }", 24, MFT_ERR_CORRUPT, "unknown key 'mft_layout'"},
        {"duplicate-key", 1, 0, "{'descr': '<f4', 'fortran_order': False, 'descr': '<f4', 'shape': (2, 3)}", 24, MFT_ERR_CORRUPT, "key 'descr' appears twice"},
        {"shape-int", 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (6)}", 24, MFT_ERR_CORRUPT, "shape (6) is not a tuple"},
        {"shape-list", 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3]}", 24, MFT_ERR_CORRUPT, "a tuple '(' for shape"},
        {"negative", 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (-2, 3)}", 24, MFT_ERR_CORRUPT, "shape entry '-2' is negative"},
        {"leading-zero", 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (02, 3)}", 24, MFT_ERR_CORRUPT, "without leading zeros"},
        {"entry-overflow", 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", 24, MFT_ERR_CORRUPT, "exceeds int64"},
        {"numel-overflow", 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 16)}", 24, MFT_ERR_CORRUPT, "beyond the 2^59-byte geometry bound"},
        {"byte-overflow", 1, 0, "{'descr': '<f8', 'fortran_order': False, 'shape': (1152921504606846976,)}", 24, MFT_ERR_CORRUPT, "beyond the 2^59-byte geometry bound"},
        {"rank9", 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 6)}", 24, MFT_ERR_UNSUPPORTED, "more than 8 dims"},
        {"fortran-int", 1, 0, "{'descr': '<f4', 'fortran_order': 0, 'shape': (2, 3)}", 24, MFT_ERR_CORRUPT, "True or False for fortran_order"},
        {"unclosed-quote", 1, 0, "{'descr': '<f4", 24, MFT_ERR_CORRUPT, "a string for descr"},
        {"descr-not-string", 1, 0, "{'descr': 4, 'fortran_order': False, 'shape': (2, 3)}", 24, MFT_ERR_CORRUPT, "a string for descr"},
        {"after-dict", 1, 0, GOOD " x", 24, MFT_ERR_CORRUPT, "only padding after the dict"},
        {"not-a-dict", 1, 0, "[1, 2]", 24, MFT_ERR_CORRUPT, "'{' (the header is a dict)"},
        {"missing-comma", 1, 0, "{'descr': '<f4' 'fortran_order': False, 'shape': (2, 3)}", 24, MFT_ERR_CORRUPT, "',' or '}' after a value"},
        {"native-order", 1, 0, "{'descr': '=f4', 'fortran_order': False, 'shape': (2, 3)}", 24, MFT_ERR_UNSUPPORTED, "descr '=f4' is not supported"},
        {"pipe-f4", 1, 0, "{'descr': '|f4', 'fortran_order': False, 'shape': (2, 3)}", 24, MFT_ERR_UNSUPPORTED, "descr '|f4'"},
        {"struct", 1, 0, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2, 3)}", 24, MFT_ERR_UNSUPPORTED, "structured dtype"},
        {"L-in-v3", 3, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L)}", 24, MFT_ERR_CORRUPT, "after a shape entry"},
    };
    char p[512];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tmp_path(p, sizeof p, cases[i].name);
        CHECK(write_npy(p, cases[i].major, cases[i].minor, cases[i].dict, 0, cases[i].nbytes));
        expect_refused(p, cases[i].st, cases[i].needle);
    }
    /* a header past NumPy's limit (version 2.0, 10048 bytes of dict) */
    tmp_path(p, sizeof p, "huge-header");
    CHECK(write_npy(p, 2, 0, GOOD, 12 + 10048, 24));
    expect_refused(p, MFT_ERR_UNSUPPORTED, "header of 10048 bytes exceeds NumPy's 10000-byte");
    /* accepted variants: any key order, double quotes, no trailing comma,
     * Python 2's 'L' suffix in 1.0, a header exactly at the limit */
    static const char *const fine[] = {
        "{\"shape\": (2, 3), \"descr\": \"<f4\", \"fortran_order\": False}",
        "{'fortran_order':False,'shape':(2,3,),'descr':'<f4'}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }",
        "  {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}\t",
    };
    for (size_t i = 0; i < sizeof fine / sizeof fine[0]; i++) {
        tmp_path(p, sizeof p, "fine.npy");
        CHECK(write_npy(p, 1, 0, fine[i], 0, 24));
        mft_tensor *t = mft_load_npy(p, MFT_CONTIGUOUS);
        static const int64_t s23[2] = {2, 3};
        CHECK_MSG(t && tu_has_sizes(t, 2, s23) && mft_tensor_dtype(t) == MFT_F32, "'%s': %s",
                  fine[i], mft_last_error_message());
        /* the data bytes 0,1,2,3 are the first float's */
        const unsigned char *d = t ? mft_tensor_data(t) : NULL;
        CHECK(d && d[0] == 0 && d[1] == 1 && d[2] == 2 && d[3] == 3 && d[23] == 23);
        mft_tensor_release(t);
    }
    tmp_path(p, sizeof p, "at-limit");
    CHECK(write_npy(p, 2, 0, GOOD, 12 + 10000, 24));
    mft_tensor *t = mft_load_npy(p, MFT_CONTIGUOUS);
    CHECK_MSG(t != NULL, "%s", mft_last_error_message());
    mft_tensor_release(t);
    /* magic, preamble, header length, the file itself */
    tmp_path(p, sizeof p, "magic");
    CHECK(write_npy(p, 1, 0, GOOD, 0, 24));
    size_t n;
    unsigned char *b = tu_read_file(p, &n);
    b[1] = 'n';
    CHECK(write_bytes(p, b, n));
    expect_refused(p, MFT_ERR_CORRUPT, "not a .npy file");
    CHECK(write_bytes(p, "\x93NUMPY\x01\x00\xf4\x01{'descr'", 17)); /* HEADER_LEN 500 */
    expect_refused(p, MFT_ERR_CORRUPT, "header length 500 runs past the end of the 17-byte file");
    CHECK(write_bytes(p, "\x93NUMPY\x02\x00\x10\x00", 10));
    expect_refused(p, MFT_ERR_CORRUPT, "too short for a version 2.0 preamble");
    CHECK(write_bytes(p, "\x93NUM", 5));
    expect_refused(p, MFT_ERR_CORRUPT, "5 bytes: too short");
    CHECK(write_bytes(p, "", 0));
    expect_refused(p, MFT_ERR_CORRUPT, "0 bytes: too short");
    free(b);
    tmp_path(p, sizeof p, "no-such-file.npy");
    expect_refused(p, MFT_ERR_IO, "cannot open");
    expect_refused(tmpdir, MFT_ERR_IO, "not a regular file");
}

/* Save errors: nothing at path, no .tmp left, an existing file untouched. */
static void test_save_errors(void) {
    static const int64_t s2[2] = {2, 3};
    mft_tensor *x = make(2, s2, MFT_F32, MFT_CONTIGUOUS);
    char p[512], tmp[520];
    tmp_path(p, sizeof p, "keep.npy");
    snprintf(tmp, sizeof tmp, "%s.tmp", p);
    CHECK(mft_save_npy(NULL, x, 0) == MFT_ERR_NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_save_npy: argument 'path'");
    CHECK(mft_save_npy(p, NULL, 0) == MFT_ERR_NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_save_npy: argument 't'");
    CHECK(mft_save_npy(p, x, 8u) == MFT_ERR_INVALID);
    CHECK_ERR(MFT_ERR_INVALID, "flags 0x8 has unknown bits 0x8");
    CHECK(access(p, F_OK) != 0);
    CHECK(write_bytes(p, "old", 3));
    CHECK(mkdir(tmp, 0700) == 0); /* "<path>.tmp" is a directory: refused */
    CHECK(mft_save_npy(p, x, 0) == MFT_ERR_IO);
    CHECK_ERR(MFT_ERR_IO, "exists and is not a regular file");
    size_t n;
    unsigned char *b = tu_read_file(p, &n);
    CHECK(b && n == 3 && memcmp(b, "old", 3) == 0);
    free(b);
    CHECK(rmdir(tmp) == 0);
    CHECK(mft_save_npy(tmpdir, x, 0) == MFT_ERR_IO); /* path is a directory */
    CHECK_ERR(MFT_ERR_IO, "not a regular file");
    tmp_path(p, sizeof p, "no-dir/x.npy");
    CHECK(mft_save_npy(p, x, 0) == MFT_ERR_IO);
    CHECK_ERR(MFT_ERR_IO, "cannot create");
    mft_tensor_release(x);
}

/* Every allocation failing in turn: an error, nothing leaked, no file. */
static void test_alloc_failures(void) {
    static const int64_t s4[4] = {2, 3, 4, 5};
    mft_tensor *x = make(4, s4, MFT_F32, MFT_CHANNELS_LAST);
    mft_tensor *v = mft_slice(x, 3, 0, 5, 2);
    char p[512];
    tmp_path(p, sizeof p, "fa.npy");
    CHECK(mft_save_npy(p, x, 0) == MFT_OK);
    fa_install();
    for (long long k = 1; k < 40; k++) {
        fa_arm(k);
        mft_tensor *r = mft_load_npy(p, MFT_CHANNELS_LAST);
        if (r) CHECK(mft_tensor_hash(r) == mft_tensor_hash(x));
        else CHECK(mft_last_error() == MFT_ERR_NOMEM);
        mft_tensor_release(r);
        mft_clear_error();
        fa_arm(k);
        char q[520];
        snprintf(q, sizeof q, "%s.%lld", p, k);
        mft_status st = mft_save_npy(q, v, MFT_NPY_LOGICAL);
        CHECK(st == MFT_OK || (st == MFT_ERR_NOMEM && access(q, F_OK) != 0));
        remove(q);
        mft_clear_error();
    }
    fa_arm(0);
    mft_set_allocator(NULL);
    CHECK_EQ_I(g_fa.live, 0);
    mft_tensor_release(v);
    mft_tensor_release(x);
}

int main(void) {
    if (!npy_tmpdir(tmpdir, sizeof tmpdir, "mft_npy")) return 1;
    RUN(test_golden_files);
    RUN(test_golden_channels_last);
    RUN(test_bytes_equal_numpy);
    RUN(test_channels_last_physical);
    RUN(test_layouts);
    RUN(test_round_trips);
    RUN(test_malformed);
    RUN(test_save_errors);
    RUN(test_alloc_failures);
    npy_tmpdir_remove(tmpdir);
    TEST_MAIN_END();
}
