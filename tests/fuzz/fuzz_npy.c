/* tests/fuzz/fuzz_npy.c — fuzz target for the .npy reader (mft/npy.h).
 *
 * The input is a .npy file. It is written to a per-process scratch file and
 * loaded with mft_load_npy as CONTIGUOUS and as CHANNELS_LAST.
 * Oracles:
 *  - a refusal sets an "mft_load_npy" error of a status the header documents
 *    (CORRUPT, UNSUPPORTED, FORMAT; never IO for a readable file);
 *  - a load succeeds only for what a second, independent reading of the
 *    preamble says is a whole file: magic, version 1.0-3.0, the header length
 *    inside the file, and exactly numel x itemsize bytes after the header;
 *  - the tensor's bytes are the file's data bytes (for 1-byte elements
 *    exactly; wider ones as they are or byte-reversed per element, a
 *    big-endian file);
 *  - as CONTIGUOUS gives packed C-order or column-major strides, no offset
 *    and storage of exactly numel elements; as CHANNELS_LAST gives a rank 3-5
 *    tensor tagged CHANNELS_LAST and channels_last-contiguous, whose values
 *    are the CONTIGUOUS load's with C moved from last to second (both loads
 *    of a C-order rank 3-5 file succeed or fail together);
 *  - saving a loaded tensor and loading the new file gives equal values and
 *    strides (mft_save_npy's physical mode), and the same values through the
 *    logical mode;
 *  - no tensor or storage outlives the input. */
#define _POSIX_C_SOURCE 200809L
#include "fuzz_common.h"

static char g_path[512], g_path2[512];

/* The preamble as the format defines it: data offset, or 0 when the bytes do
 * not even hold a valid preamble and header length. */
static size_t data_offset(const uint8_t *d, size_t n) {
    if (n < 10 || memcmp(d, "\x93NUMPY", 6) != 0 || d[6] < 1 || d[6] > 3 || d[7] != 0) return 0;
    size_t lb = d[6] == 1 ? 2 : 4;
    if (n < 8 + lb) return 0;
    size_t h = 0;
    for (size_t i = lb; i-- > 0;) h = h << 8 | d[8 + i];
    return 8 + lb + h <= n ? 8 + lb + h : 0;
}

/* The header mentions True (fortran_order True: the only place it can). */
static bool header_says_true(const uint8_t *d, size_t off) {
    for (size_t i = 0; i + 4 <= off; i++)
        if (memcmp(d + i, "True", 4) == 0) return true;
    return false;
}

static bool is_status(mft_status st) {
    return st == MFT_ERR_CORRUPT || st == MFT_ERR_UNSUPPORTED || st == MFT_ERR_FORMAT ||
           st == MFT_ERR_NOMEM;
}

/* Storage bytes of t equal data, as is or each element reversed. */
static bool same_bytes(const mft_tensor *t, const uint8_t *data, size_t nbytes) {
    const uint8_t *p = mft_tensor_data(t);
    size_t es = mft_dtype_size(mft_tensor_dtype(t));
    if (nbytes == 0 || memcmp(p, data, nbytes) == 0) return true;
    if (es == 1) return false;
    for (size_t i = 0; i < nbytes; i += es)
        for (size_t b = 0; b < es; b++)
            if (p[i + b] != data[i + es - 1 - b]) return false;
    return true;
}

static void check_strides(const mft_tensor *t) {
    int nd = mft_tensor_ndim(t);
    const int64_t *sz = mft_tensor_sizes(t), *st = mft_tensor_strides(t);
    bool c = true, f = true;
    int64_t sc = 1, sf = 1;
    for (int d = 0; d < nd; d++) {
        int dc = nd - 1 - d;
        c = c && st[dc] == sc;
        f = f && st[d] == sf;
        sc *= sz[dc] > 0 ? sz[dc] : 1;
        sf *= sz[d] > 0 ? sz[d] : 1;
    }
    FZ_CHECK(c || f, "strides neither C order nor column-major");
    FZ_CHECK(mft_tensor_offset(t) == 0, "offset %lld", (long long)mft_tensor_offset(t));
    FZ_CHECK(mft_tensor_storage_numel(t) == mft_tensor_numel(t) || mft_tensor_numel(t) == 0,
             "storage of %lld elements for %lld", (long long)mft_tensor_storage_numel(t),
             (long long)mft_tensor_numel(t));
}

/* Save t in both modes, load each back: the same values (and, physical, strides). */
static void round_trip(const mft_tensor *t, mft_format as) {
    for (unsigned flags = 0; flags < 2; flags++) {
        FZ_CHECK(mft_save_npy(g_path2, t, flags) == MFT_OK, "saving a loaded tensor failed");
        mft_tensor *r = mft_load_npy(g_path2, flags ? MFT_CONTIGUOUS : as);
        FZ_CHECK(r != NULL, "reloading a saved tensor failed");
        FZ_CHECK(mft_tensor_hash(r) == mft_tensor_hash(t), "values changed through a save (flags %u)",
                 flags);
        for (int d = 0; !flags && mft_tensor_numel(t) > 0 && d < mft_tensor_ndim(t); d++)
            FZ_CHECK(mft_tensor_sizes(t)[d] == 1 ||
                         mft_tensor_strides(r)[d] == mft_tensor_strides(t)[d],
                     "stride of dim %d changed through a physical save", d);
        mft_tensor_release(r);
    }
    remove(g_path2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    mft_set_num_threads(1);
    fz_scratch_path(g_path, sizeof g_path, "npy", ".npy");
    fz_scratch_path(g_path2, sizeof g_path2, "npy", ".resaved.npy");
    fz_write_file(g_path, data, size);
    mft_clear_error();
    mft_tensor *c = mft_load_npy(g_path, MFT_CONTIGUOUS);
    if (!c) {
        FZ_FAILED("mft_load_npy");
        FZ_CHECK(is_status(mft_last_error()) && mft_last_error() != MFT_ERR_FORMAT,
                 "status %s", mft_status_str(mft_last_error()));
    }
    mft_clear_error();
    mft_tensor *l = mft_load_npy(g_path, MFT_CHANNELS_LAST);
    if (!l) {
        FZ_FAILED("mft_load_npy");
        FZ_CHECK(is_status(mft_last_error()), "status %s", mft_status_str(mft_last_error()));
    }
    const size_t off = data_offset(data, size);
    if (c) {
        FZ_CHECK(off > 0, "a load succeeded without a valid preamble");
        size_t nbytes = (size_t)mft_tensor_numel(c) * mft_dtype_size(mft_tensor_dtype(c));
        FZ_CHECK(size - off == nbytes, "%zu data bytes loaded as %zu", size - off, nbytes);
        FZ_CHECK(same_bytes(c, data + off, nbytes), "tensor bytes are not the file's");
        check_strides(c);
        int nd = mft_tensor_ndim(c);
        if (nd >= 3 && nd <= 5 && !header_says_true(data, off))
            FZ_CHECK(l != NULL, "as CHANNELS_LAST refused a C-order rank-%d file", nd);
        /* a physical save writes a tensor tagged CHANNELS_LAST as its (N,...,C) array
         * (docs/spec.md §8.2), also when the tag was inferred from a column-major
         * file's strides (rank 3 with N = 1): read it back as that array */
        round_trip(c, mft_tensor_format(c) == MFT_CHANNELS_LAST ? MFT_CHANNELS_LAST
                                                                : MFT_CONTIGUOUS);
    }
    if (l) {
        FZ_CHECK(c != NULL, "as CHANNELS_LAST loaded what CONTIGUOUS refused");
        int nd = mft_tensor_ndim(l);
        FZ_CHECK(nd >= 3 && nd <= 5 && mft_tensor_format(l) == MFT_CHANNELS_LAST &&
                     mft_tensor_is_contiguous(l, MFT_CHANNELS_LAST),
                 "as CHANNELS_LAST: rank %d, tag %s", nd, mft_format_name(mft_tensor_format(l)));
        int perm[5] = {0};
        perm[1] = nd - 1;
        for (int d = 2; d < nd; d++) perm[d] = d - 1;
        mft_tensor *v = mft_permute(c, perm);
        FZ_CHECK(v && mft_tensor_hash(v) == mft_tensor_hash(l),
                 "as CHANNELS_LAST differs from the file's array with C moved second");
        mft_tensor_release(v);
        round_trip(l, MFT_CHANNELS_LAST);
    }
    mft_tensor_release(c);
    mft_tensor_release(l);
    remove(g_path);
    fz_check_no_leaks();
    return 0;
}
