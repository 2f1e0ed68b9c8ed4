/* tests/fuzz/fuzz_checkpoint.c — fuzz target for checkpoint loading (mft/io.h).
 *
 * The input is a checkpoint file. It is written to a per-process scratch file and
 * read twice more if its trailer is not already right: once as is (so the XXH3
 * check itself is exercised) and once with the trailer replaced by the correct
 * XXH3-64 of the bytes before it (so mutations get past the checksum and reach
 * the entry parser). Each version is read with
 *   - mft_load_tensors (inspection), and
 *   - mft_load_tensors_into, into all of a fixed set of targets at once and into
 *     each target alone. The targets have the names the seed files use: "weight"
 *     F32 (4,3,2,2) NHWC, "bias" F64 (3), "step" I64 0-dim, "mask" U8 (2,5),
 *     "ids" I32 (2,3,4), "empty" F32 (0,3), and "slice", an F32 (4,3) view with
 *     gaps (every other column of a (4,6) tensor).
 * Oracles:
 *  - a failed load_into leaves every target's whole storage bit-for-bit unchanged
 *    and its version counter as it was, and sets an "mft_..." error;
 *  - load_into succeeds exactly when inspection succeeded and every requested
 *    name is in the file with the target's sizes and dtype; a failing inspection
 *    and load_into report the same status; with a good file the status is that of
 *    the first mismatching target (INVALID missing, DTYPE, SHAPE);
 *  - a successful load_into gives each requested target the entry's values
 *    (equal hashes), bumps its version (non-empty), and changes nothing else:
 *    other targets and the gaps around the "slice" view keep their bytes;
 *  - inspected tensors are valid (dense when non-empty, inside their storage);
 *    saving them again and inspecting the new file gives the same entries, and
 *    when every entry is dense the new file is byte-identical to the input;
 *  - no tensor or storage outlives the input. */
#define _POSIX_C_SOURCE 200809L
#define XXH_INLINE_ALL
#include <xxhash.h>
#include "fuzz_common.h"

enum { NT = 7 };
static const char *const NAMES[NT] = {"weight", "bias", "step", "mask", "ids", "empty", "slice"};

typedef struct target {
    mft_tensor *base; /* owns the storage (== view except for "slice") */
    mft_tensor *view; /* what load_into writes */
    unsigned char *snap;
    size_t bytes;
    int64_t version;
} target;

static target g_t[NT];
static char g_path[512], g_path2[512];

static void make_targets(void) {
    static const int64_t s_weight[4] = {4, 3, 2, 2}, s_bias[1] = {3}, s_mask[2] = {2, 5},
                         s_ids[3] = {2, 3, 4}, s_empty[2] = {0, 3}, s_base[2] = {4, 6};
    g_t[0].base = mft_arange(0, 48, 1, MFT_F32);
    mft_tensor *w = mft_empty(4, s_weight, MFT_F32, MFT_CHANNELS_LAST);
    FZ_CHECK(g_t[0].base && w, "setup");
    mft_tensor *w4 = mft_view(g_t[0].base, 4, s_weight);
    FZ_CHECK(w4 && mft_copy_(w, w4) == MFT_OK, "setup");
    mft_tensor_release(w4);
    mft_tensor_release(g_t[0].base);
    g_t[0].base = w;
    g_t[1].base = mft_full(1, s_bias, MFT_F64, MFT_CONTIGUOUS, -1.5);
    g_t[2].base = mft_full(0, NULL, MFT_I64, MFT_CONTIGUOUS, 7);
    g_t[3].base = mft_full(2, s_mask, MFT_U8, MFT_CONTIGUOUS, 3);
    g_t[4].base = mft_full(3, s_ids, MFT_I32, MFT_CONTIGUOUS, -9);
    g_t[5].base = mft_zeros(2, s_empty, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *b = mft_arange(100, 124, 1, MFT_F32), *b2 = b ? mft_view(b, 2, s_base) : NULL;
    mft_tensor_release(b);
    g_t[6].base = b2;
    FZ_CHECK(b2 != NULL, "setup");
    for (int i = 0; i < NT; i++) {
        FZ_CHECK(g_t[i].base != NULL, "setup of target %s", NAMES[i]);
        g_t[i].view = i == 6 ? mft_slice(b2, 1, 0, 6, 2) : mft_tensor_retain(g_t[i].base);
        FZ_CHECK(g_t[i].view != NULL, "setup of target %s", NAMES[i]);
        g_t[i].bytes = (size_t)mft_tensor_storage_numel(g_t[i].base) * mft_dtype_size(mft_tensor_dtype(g_t[i].base));
        g_t[i].snap = malloc(g_t[i].bytes ? g_t[i].bytes : 1);
        FZ_CHECK(g_t[i].snap != NULL, "setup");
    }
}

static void free_targets(void) {
    for (int i = 0; i < NT; i++) {
        mft_tensor_release(g_t[i].view);
        mft_tensor_release(g_t[i].base);
        free(g_t[i].snap);
        memset(&g_t[i], 0, sizeof g_t[i]);
    }
}

/* Storage bytes from the first element of base (base views start at offset 0). */
static const unsigned char *storage_bytes(const target *t) {
    return (const unsigned char *)mft_tensor_data(t->base);
}

static void snapshot(void) {
    for (int i = 0; i < NT; i++) {
        if (g_t[i].bytes) memcpy(g_t[i].snap, storage_bytes(&g_t[i]), g_t[i].bytes);
        g_t[i].version = mft_tensor_version(g_t[i].view);
    }
}

static bool unchanged(int i) {
    return (g_t[i].bytes == 0 || memcmp(g_t[i].snap, storage_bytes(&g_t[i]), g_t[i].bytes) == 0) &&
           g_t[i].version == mft_tensor_version(g_t[i].view);
}

/* The "slice" target: bytes outside its elements (the gaps) are unchanged. */
static void check_slice_gaps(void) {
    const target *t = &g_t[6];
    const float *now = (const float *)(const void *)storage_bytes(t);
    const float *old = (const float *)(const void *)t->snap;
    for (int r = 0; r < 4; r++)
        for (int c = 1; c < 6; c += 2)
            FZ_CHECK(memcmp(&now[r * 6 + c], &old[r * 6 + c], sizeof(float)) == 0,
                     "load_into wrote a gap next to the 'slice' view (row %d col %d)", r, c);
}

typedef struct inspection {
    mft_status st;
    int n;
    char **names;
    mft_tensor **ts;
} inspection;

static int find_entry(const inspection *in, const char *name) {
    for (int i = 0; i < in->n; i++)
        if (strcmp(in->names[i], name) == 0) return i;
    return -1;
}

static bool same_sizes(const mft_tensor *a, const mft_tensor *b) {
    return mft_tensor_ndim(a) == mft_tensor_ndim(b) &&
           memcmp(mft_tensor_sizes(a), mft_tensor_sizes(b), sizeof(int64_t) * (size_t)mft_tensor_ndim(a)) == 0;
}

/* The status load_into must report for these targets, given a good file. */
static mft_status expected_into(const inspection *in, int k, const int *which) {
    for (int j = 0; j < k; j++) {
        const mft_tensor *t = g_t[which[j]].view;
        int e = find_entry(in, NAMES[which[j]]);
        if (e < 0) return MFT_ERR_INVALID;
        if (mft_tensor_dtype(in->ts[e]) != mft_tensor_dtype(t)) return MFT_ERR_DTYPE;
        if (!same_sizes(in->ts[e], t)) return MFT_ERR_SHAPE;
    }
    return MFT_OK;
}

static void load_into(const inspection *in, int k, const int *which) {
    const char *names[NT];
    mft_tensor *ts[NT];
    for (int j = 0; j < k; j++) {
        names[j] = NAMES[which[j]];
        ts[j] = g_t[which[j]].view;
    }
    snapshot();
    mft_clear_error();
    mft_status st = mft_load_tensors_into(g_path, k, names, ts);
    if (in->st != MFT_OK) {
        FZ_CHECK(st == in->st, "load_tensors_into: %s, inspection of the same file: %s", mft_status_str(st),
                 mft_status_str(in->st));
    } else {
        mft_status want = expected_into(in, k, which);
        FZ_CHECK(st == want, "load_tensors_into of %d targets (first '%s'): %s, expected %s", k, names[0],
                 mft_status_str(st), mft_status_str(want));
    }
    if (st != MFT_OK) {
        FZ_FAILED("mft_load_tensors_into");
        for (int i = 0; i < NT; i++)
            FZ_CHECK(unchanged(i), "failed load_tensors_into (%s) changed target '%s'", mft_status_str(st),
                     NAMES[i]);
        return;
    }
    bool requested[NT] = {false};
    for (int j = 0; j < k; j++) requested[which[j]] = true;
    for (int i = 0; i < NT; i++) {
        if (!requested[i]) {
            FZ_CHECK(unchanged(i), "load_tensors_into changed target '%s', which was not requested", NAMES[i]);
            continue;
        }
        const mft_tensor *e = in->ts[find_entry(in, NAMES[i])];
        FZ_CHECK(mft_tensor_hash(g_t[i].view) == mft_tensor_hash(e), "target '%s' does not hold the entry's values",
                 NAMES[i]);
        if (mft_tensor_numel(e) > 0)
            FZ_CHECK(mft_tensor_version(g_t[i].view) > g_t[i].version, "version of '%s' not bumped", NAMES[i]);
    }
    if (requested[6]) check_slice_gaps();
}

/* Whole file into a malloc'd buffer. */
static unsigned char *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    FZ_CHECK(f != NULL, "cannot open '%s'", path);
    size_t cap = 4096, len = 0;
    unsigned char *buf = malloc(cap);
    FZ_CHECK(buf != NULL, "out of memory");
    for (;;) {
        len += fread(buf + len, 1, cap - len, f);
        if (len < cap) break;
        cap *= 2;
        buf = realloc(buf, cap);
        FZ_CHECK(buf != NULL, "out of memory");
    }
    fclose(f);
    *n = len;
    return buf;
}

static void check_inspection(const inspection *in, const uint8_t *file, size_t size) {
    bool all_dense = true, any_blocked = false;
    for (int i = 0; i < in->n; i++) {
        const mft_tensor *t = in->ts[i];
        FZ_CHECK(in->names[i] && in->names[i][0] && strlen(in->names[i]) <= MFT_CHECKPOINT_MAX_NAME,
                 "entry %d: bad name", i);
        FZ_CHECK(t != NULL, "entry %d: NULL tensor", i);
        if (mft_tensor_is_blocked(t)) { /* format codes 2 / 3 (version 2): packed, pads zero */
            const mft_format f = mft_tensor_format(t);
            FZ_CHECK((f == MFT_NCHW8C || f == MFT_NCHW16C) && mft_tensor_is_contiguous(t, f) &&
                         mft_tensor_check_padding(t) == MFT_OK,
                     "entry %d ('%s'): a blocked entry that is not a packed, zero-padded %s", i,
                     in->names[i], mft_format_name(f));
            any_blocked = true;
            (void)mft_tensor_hash(t);
            continue;
        }
        int nd = mft_tensor_ndim(t);
        const int64_t *sz = mft_tensor_sizes(t), *st = mft_tensor_strides(t);
        int64_t reach = 0, term;
        bool ok = true;
        for (int d = 0; d < nd; d++) {
            FZ_CHECK(sz[d] >= 0 && st[d] >= 0, "entry %d: negative size or stride", i);
            if (__builtin_mul_overflow(sz[d] > 0 ? sz[d] - 1 : 0, st[d], &term) ||
                __builtin_add_overflow(reach, term, &reach))
                ok = false;
        }
        if (mft_tensor_numel(t) > 0) {
            FZ_CHECK(mft_tensor_is_dense(t), "entry %d ('%s'): non-empty and not dense", i, in->names[i]);
            FZ_CHECK(ok && reach < mft_tensor_storage_numel(t) - mft_tensor_offset(t),
                     "entry %d: view outside its storage", i);
        }
        if (!mft_tensor_is_dense(t)) all_dense = false;
        (void)mft_tensor_hash(t);
    }
    /* save again: same entries; byte-identical when nothing had to be packed */
    mft_clear_error();
    mft_status st = mft_save_tensors(g_path2, in->n, (const char *const *)in->names,
                                     (const mft_tensor *const *)in->ts);
    FZ_CHECK(st == MFT_OK, "saving the inspected entries failed: %s", mft_status_str(st));
    if (all_dense) {
        /* the writer picks the version (2 only with blocked entries): a
         * file of the other valid version is reproduced but for the version
         * field and the checksum over it */
        size_t n2;
        unsigned char *again = read_all(g_path2, &n2);
        const unsigned char want_version = any_blocked ? 2 : 1;
        FZ_CHECK(n2 == size && size >= 24 && again[8] == want_version,
                 "re-saved file: %zu bytes (the file %zu), version %u (want %u)", n2, size,
                 n2 > 8 ? (unsigned)again[8] : 0u, (unsigned)want_version);
        const bool same_version = file[8] == want_version;
        FZ_CHECK(same_version ? memcmp(again, file, size) == 0
                              : memcmp(again + 12, file + 12, size - 20) == 0,
                 "saving the loaded entries did not reproduce the file (%zu vs %zu bytes)", n2, size);
        free(again);
    }
    inspection re = {MFT_OK, 0, NULL, NULL};
    re.st = mft_load_tensors(g_path2, &re.n, &re.names, &re.ts);
    FZ_CHECK(re.st == MFT_OK && re.n == in->n, "re-saved file does not load back: %s", mft_status_str(re.st));
    for (int i = 0; i < re.n; i++) {
        FZ_CHECK(strcmp(re.names[i], in->names[i]) == 0, "re-saved entry %d has another name", i);
        FZ_CHECK(same_sizes(re.ts[i], in->ts[i]) && mft_tensor_dtype(re.ts[i]) == mft_tensor_dtype(in->ts[i]) &&
                     mft_tensor_hash(re.ts[i]) == mft_tensor_hash(in->ts[i]),
                 "re-saved entry '%s' differs", in->names[i]);
        int nd = mft_tensor_ndim(re.ts[i]);
        if (nd >= 3 && nd <= 5)
            FZ_CHECK(mft_tensor_format(re.ts[i]) == mft_tensor_format(in->ts[i]), "re-saved entry '%s' changed its tag",
                     in->names[i]);
    }
    mft_checkpoint_free_list(re.n, re.names, re.ts);
    remove(g_path2);
}

/* Everything for one version of the file (already written to g_path). */
static void run_file(const uint8_t *file, size_t size) {
    inspection in = {MFT_OK, 0, NULL, NULL};
    mft_clear_error();
    in.st = mft_load_tensors(g_path, &in.n, &in.names, &in.ts);
    if (in.st != MFT_OK) {
        FZ_FAILED("mft_load_tensors");
        FZ_CHECK(in.n == 0 && in.names == NULL && in.ts == NULL, "failed inspection left outputs set");
    } else {
        check_inspection(&in, file, size);
    }
    make_targets();
    int all[NT];
    for (int i = 0; i < NT; i++) all[i] = i;
    load_into(&in, NT, all);
    for (int i = 0; i < NT; i++) load_into(&in, 1, &all[i]);
    free_targets();
    mft_checkpoint_free_list(in.n, in.names, in.ts);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    mft_set_num_threads(1);
    fz_scratch_path(g_path, sizeof g_path, "ckpt", ".mftckpt");
    fz_scratch_path(g_path2, sizeof g_path2, "ckpt", ".resaved.mftckpt");
    fz_write_file(g_path, data, size);
    run_file(data, size);
    if (size >= 24) { /* the same bytes with a correct trailer */
        uint8_t *fixed = malloc(size);
        FZ_CHECK(fixed != NULL, "out of memory");
        memcpy(fixed, data, size);
        uint64_t h = XXH3_64bits(fixed, size - 8);
        for (int i = 0; i < 8; i++) fixed[size - 8 + (size_t)i] = (uint8_t)(h >> (8 * i));
        if (memcmp(fixed, data, size) != 0) {
            fz_write_file(g_path, fixed, size);
            run_file(fixed, size);
        }
        free(fixed);
    }
    remove(g_path);
    fz_check_no_leaks();
    return 0;
}
