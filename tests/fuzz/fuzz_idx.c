/* tests/fuzz/fuzz_idx.c — fuzz target for the IDX reader (mft_idx_load, mft/data.h).
 *
 * Input: one mode byte, then the file contents P.
 *   - P is always written as is and loaded (a P that starts with the gzip magic
 *     1f 8b is read as a gzip stream by zlib; the seeds include real .gz files);
 *   - if mode bit 0 is set, P is also gzip-compressed with gzopen/gzwrite at level
 *     (mode >> 1) % 10 and loaded; if mode bit 5 is set too, the .gz file is then
 *     cut to a fuzzed shorter length (a truncated stream).
 * Oracles: no crash, no leak; for a P that is not itself gzip, an independent
 * parser of the format decides: the load succeeds exactly when P is a complete
 * well-formed IDX file (magic 00 00, known type, rank 1..8, exactly the announced
 * number of element bytes), and then the tensor has the header's sizes, the
 * documented dtype, a packed CONTIGUOUS layout and the big-endian values of the
 * file; otherwise it fails with MFT_ERR_CORRUPT and an "mft_idx_load: ..." message.
 * The gzipped P must give the same result as the raw one, a truncated one must
 * fail with MFT_ERR_CORRUPT. Any successful load (gzip seeds too) must match the
 * header of the decompressed bytes. */
#define _POSIX_C_SOURCE 200809L
#include <zlib.h>
#include "fuzz_common.h"

/* The format as documented: type byte -> element size in the file and result dtype. */
static bool idx_type(uint8_t code, size_t *fsize, mft_dtype *dt) {
    switch (code) {
    case 0x08: *fsize = 1, *dt = MFT_U8; return true;
    case 0x09: *fsize = 1, *dt = MFT_I32; return true;
    case 0x0B: *fsize = 2, *dt = MFT_I32; return true;
    case 0x0C: *fsize = 4, *dt = MFT_I32; return true;
    case 0x0D: *fsize = 4, *dt = MFT_F32; return true;
    case 0x0E: *fsize = 8, *dt = MFT_F64; return true;
    default: return false;
    }
}

typedef struct idx_model {
    bool header_ok; /* magic, type, rank, sizes present */
    bool valid;     /* header_ok and exactly the element bytes follow */
    bool absurd;    /* empty, but sizes no tensor can have (geometry bound): must be refused */
    int ndim;
    int64_t sizes[MFT_MAX_DIMS];
    int64_t numel;
    size_t fsize;
    mft_dtype dtype;
    const uint8_t *elems;
} idx_model;

static void idx_parse(const uint8_t *p, size_t n, idx_model *m) {
    memset(m, 0, sizeof *m);
    if (n < 4 || p[0] != 0 || p[1] != 0 || !idx_type(p[2], &m->fsize, &m->dtype)) return;
    m->ndim = p[3];
    if (m->ndim < 1 || m->ndim > MFT_MAX_DIMS || n < 4 + 4 * (size_t)m->ndim) return;
    m->header_ok = true;
    int64_t numel = 1;
    bool ovf = false;
    for (int d = 0; d < m->ndim; d++) {
        const uint8_t *s = p + 4 + 4 * d;
        m->sizes[d] = (int64_t)((uint32_t)s[0] << 24 | (uint32_t)s[1] << 16 | (uint32_t)s[2] << 8 | s[3]);
        if (__builtin_mul_overflow(numel, m->sizes[d], &numel)) ovf = true;
    }
    /* the geometry bound (docs/spec.md 1.1): prod max(size, 1) * itemsize <= 2^59 */
    int64_t count = 1, es = m->dtype == MFT_U8 ? 1 : m->dtype == MFT_F64 ? 8 : 4;
    for (int d = 0; d < m->ndim; d++)
        if (__builtin_mul_overflow(count, m->sizes[d] > 1 ? m->sizes[d] : 1, &count)) m->absurd = true;
    if (m->absurd || __builtin_mul_overflow(count, es, &count) || count > ((int64_t)1 << 59)) m->absurd = true;
    for (int d = 0; d < m->ndim; d++)
        if (m->sizes[d] == 0) numel = 0, ovf = false;
    if (numel != 0) m->absurd = false;
    uint64_t need;
    if (ovf || __builtin_mul_overflow((uint64_t)numel, (uint64_t)m->fsize, &need)) return;
    m->numel = numel;
    m->elems = p + 4 + 4 * (size_t)m->ndim;
    m->valid = need == n - (4 + 4 * (size_t)m->ndim);
}

/* Element i of the file, as the documented dtype converts it. */
static double idx_value(const idx_model *m, int64_t i) {
    const uint8_t *e = m->elems + (size_t)i * m->fsize;
    uint64_t v = 0;
    for (size_t k = 0; k < m->fsize; k++) v = v << 8 | e[k];
    switch (m->fsize) {
    case 1: return m->dtype == MFT_U8 ? (double)v : (double)(int8_t)(uint8_t)v;
    case 2: return (double)(int16_t)(uint16_t)v;
    case 4: {
        uint32_t w = (uint32_t)v;
        if (m->dtype == MFT_I32) return (double)(int32_t)w;
        float f;
        memcpy(&f, &w, 4);
        return (double)f;
    }
    default: {
        double d;
        memcpy(&d, &v, 8);
        return d;
    }
    }
}

static bool same_value(double a, double b) { return a == b || (a != a && b != b); }

/* A successful load matches the model's header (and values when they are known). */
static void check_loaded(const mft_tensor *t, const idx_model *m, bool values) {
    FZ_CHECK(m->header_ok, "a file without a valid IDX header loaded");
    FZ_CHECK(mft_tensor_ndim(t) == m->ndim, "rank %d, header says %d", mft_tensor_ndim(t), m->ndim);
    FZ_CHECK(memcmp(mft_tensor_sizes(t), m->sizes, sizeof(int64_t) * (size_t)m->ndim) == 0,
             "sizes differ from the header");
    FZ_CHECK(mft_tensor_dtype(t) == m->dtype, "dtype %s, expected %s", mft_dtype_name(mft_tensor_dtype(t)),
             mft_dtype_name(m->dtype));
    FZ_CHECK(mft_tensor_is_contiguous(t, MFT_CONTIGUOUS) && mft_tensor_format(t) == MFT_CONTIGUOUS,
             "not a packed CONTIGUOUS tensor");
    FZ_CHECK(mft_tensor_numel(t) == m->numel, "numel %lld, expected %lld", (long long)mft_tensor_numel(t),
             (long long)m->numel);
    if (!values) return;
    int64_t idx[MFT_MAX_DIMS] = {0};
    for (int64_t i = 0; i < m->numel; i++) {
        double got = mft_tensor_get(t, idx), want = idx_value(m, i);
        FZ_CHECK(same_value(got, want), "element %lld is %g, the file says %g", (long long)i, got, want);
        for (int d = m->ndim - 1; d >= 0; d--) {
            if (++idx[d] < m->sizes[d]) break;
            idx[d] = 0;
        }
    }
}

/* Loads path; returns the status and checks the error contract. */
static mft_status load(const char *path, mft_tensor **out) {
    mft_clear_error();
    mft_tensor *t = mft_idx_load(path);
    *out = t;
    if (t) return MFT_OK;
    FZ_FAILED("mft_idx_load");
    FZ_CHECK(strncmp(mft_last_error_message(), "mft_idx_load: ", 14) == 0, "message does not name mft_idx_load");
    return mft_last_error();
}

static bool is_gzip(const uint8_t *p, size_t n) { return n >= 2 && p[0] == 0x1f && p[1] == 0x8b; }

/* Decompresses a gzip P (whole, possibly damaged) to learn the header a
 * successful load must match. Returns a malloc'd buffer (or NULL). */
static uint8_t *gunzip_prefix(const char *path, size_t *n) {
    gzFile gz = gzopen(path, "rb");
    if (!gz) return NULL;
    size_t cap = 1 << 16;
    uint8_t *buf = malloc(cap);
    int r = buf ? gzread(gz, buf, (unsigned)cap) : -1;
    gzclose(gz);
    if (r < 0) {
        free(buf);
        return NULL;
    }
    *n = (size_t)r;
    return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    mft_set_num_threads(1);
    uint8_t mode = data[0];
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    char raw_path[512], gz_path[512];
    fz_scratch_path(raw_path, sizeof raw_path, "idx", ".idx");
    fz_scratch_path(gz_path, sizeof gz_path, "idx", ".idx.gz");

    idx_model m;
    bool modelled = !is_gzip(p, n);
    if (modelled) idx_parse(p, n, &m);

    /* raw */
    fz_write_file(raw_path, p, n);
    mft_tensor *t = NULL;
    mft_status raw_st = load(raw_path, &t);
    uint64_t raw_hash = 0;
    if (modelled) {
        /* a complete empty file whose sizes no tensor can have (the geometry bound
         * counts size-0 dims as 1) is refused as MFT_ERR_CORRUPT like any absurd header */
        if (m.absurd) m.valid = false;
        FZ_CHECK((raw_st == MFT_OK) == m.valid, "raw load %s a %s file (status %s)",
                 raw_st == MFT_OK ? "accepted" : "refused", m.valid ? "valid" : "malformed",
                 mft_status_str(raw_st));
        if (raw_st != MFT_OK)
            FZ_CHECK(raw_st == MFT_ERR_CORRUPT, "malformed raw file: status %s, expected MFT_ERR_CORRUPT",
                     mft_status_str(raw_st));
        else
            check_loaded(t, &m, true);
    } else if (t) {
        size_t dn = 0;
        uint8_t *dec = gunzip_prefix(raw_path, &dn);
        idx_model gm;
        if (dec) {
            idx_parse(dec, dn, &gm);
            if (dn < ((size_t)1 << 16)) check_loaded(t, &gm, gm.valid);
        }
        free(dec);
    }
    if (t) raw_hash = mft_tensor_hash(t);
    mft_tensor_release(t);
    t = NULL;

    /* the same bytes gzip-compressed (and maybe truncated) */
    if (mode & 1) {
        char wmode[8];
        snprintf(wmode, sizeof wmode, "wb%d", (mode >> 1) % 10);
        gzFile gz = gzopen(gz_path, wmode);
        FZ_CHECK(gz != NULL, "gzopen '%s' failed", gz_path);
        FZ_CHECK(n == 0 || gzwrite(gz, p, (unsigned)n) == (int)n, "gzwrite failed");
        FZ_CHECK(gzclose(gz) == Z_OK, "gzclose failed");
        bool cut = false;
        if (mode & 32) {
            struct stat sb;
            FZ_CHECK(stat(gz_path, &sb) == 0, "stat '%s'", gz_path);
            off_t len = (off_t)(((uint64_t)sb.st_size * (uint64_t)(mode >> 6)) / 4); /* 0, 1/4, 1/2, 3/4 */
            FZ_CHECK(truncate(gz_path, len) == 0, "truncate '%s'", gz_path);
            cut = true;
        }
        mft_status gz_st = load(gz_path, &t);
        if (cut) {
            FZ_CHECK(gz_st == MFT_ERR_CORRUPT, "truncated gzip file: status %s, expected MFT_ERR_CORRUPT",
                     mft_status_str(gz_st));
        } else if (modelled) {
            FZ_CHECK(gz_st == raw_st, "gzip load: status %s, raw load: %s", mft_status_str(gz_st),
                     mft_status_str(raw_st));
            if (t) {
                check_loaded(t, &m, true);
                FZ_CHECK(mft_tensor_hash(t) == raw_hash, "gzip and raw loads differ");
            }
        }
        mft_tensor_release(t);
        remove(gz_path);
    }
    remove(raw_path);
    fz_check_no_leaks();
    return 0;
}
