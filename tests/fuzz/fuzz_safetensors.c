/* tests/fuzz/fuzz_safetensors.c — fuzz target for the safetensors reader
 * (mft/safetensors.h).
 *
 * The input is a safetensors file, written to a per-process scratch file.
 * Oracles:
 *  - mft_safetensors_load through the mapping and with MFT_SAFETENSORS_READ
 *    give the same status; on failure the outputs are 0 / NULL and the
 *    message starts with "mft_safetensors_load"; on success the same names
 *    in the same order and tensors with equal dtype, sizes, tag and values
 *    (hash); blocked tensors have zero pad lanes;
 *  - mft_safetensors_load_into of a fixed set of targets ("x" F32 (1,3,2,2)
 *    channels_last, "a" F32 (2), "b" F32 (4), "s" I64 0-dim), all at once:
 *    when load succeeded, OK exactly when every name is in the file with the
 *    target's sizes and dtype; any failure leaves every target's bytes and
 *    version as they were;
 *  - a loaded file saved again (logical and physical mode) loads back with
 *    the same names (in the writer's order), values and tags;
 *  - no tensor or storage outlives the input (the mapping is released). */
#define _POSIX_C_SOURCE 200809L
#include "fuzz_common.h"

enum { NT = 4 };
static const char *const NAMES[NT] = {"x", "a", "b", "s"};
static char g_path[512], g_path2[512];

typedef struct loaded {
    mft_status st;
    int n;
    char **names;
    mft_tensor **ts;
} loaded;

static loaded load(const char *path, unsigned flags) {
    loaded l = {MFT_OK, -1, (char **)1, (mft_tensor **)1};
    mft_clear_error();
    l.st = mft_safetensors_load(path, flags, &l.n, &l.names, &l.ts);
    if (l.st != MFT_OK) {
        FZ_FAILED("mft_safetensors_load");
        FZ_CHECK(l.n == 0 && !l.names && !l.ts, "a failed load left outputs set");
    }
    return l;
}

/* b has a's tensors: in the same order (in_order), else found by name (a
 * re-saved file is in the writer's order). */
static void same(const loaded *a, const loaded *b, const char *what, bool in_order) {
    FZ_CHECK(a->st == b->st, "%s: status %s vs %s", what, mft_status_str(a->st),
             mft_status_str(b->st));
    if (a->st != MFT_OK) return;
    FZ_CHECK(a->n == b->n, "%s: %d vs %d tensors", what, a->n, b->n);
    for (int i = 0; i < a->n; i++) {
        int j = in_order ? i : -1;
        for (int k = 0; k < b->n && j < 0; k++)
            if (strcmp(a->names[i], b->names[k]) == 0) j = k;
        FZ_CHECK(j >= 0 && strcmp(a->names[i], b->names[j]) == 0, "%s: name %d ('%s') differs",
                 what, i, a->names[i]);
        const mft_tensor *x = a->ts[i], *y = b->ts[j];
        int nd = mft_tensor_ndim(x);
        FZ_CHECK(nd == mft_tensor_ndim(y) && mft_tensor_dtype(x) == mft_tensor_dtype(y) &&
                     memcmp(mft_tensor_sizes(x), mft_tensor_sizes(y), sizeof(int64_t) * (size_t)nd) == 0,
                 "%s: '%s' geometry differs", what, a->names[i]);
        FZ_CHECK(mft_tensor_hash(x) == mft_tensor_hash(y), "%s: '%s' values differ", what,
                 a->names[i]);
        if (nd >= 3 && nd <= 5)
            FZ_CHECK(mft_tensor_format(x) == mft_tensor_format(y), "%s: '%s' tag differs", what,
                     a->names[i]);
        if (mft_tensor_is_blocked(x))
            FZ_CHECK(mft_tensor_check_padding(x) == MFT_OK, "%s: '%s' pad lanes", what, a->names[i]);
    }
}

static void resave(const loaded *l) {
    for (unsigned fl = 0; fl <= MFT_SAFETENSORS_PHYSICAL; fl++) {
        mft_clear_error();
        mft_status st = mft_safetensors_save(g_path2, l->n, (const char *const *)l->names,
                                             (const mft_tensor *const *)l->ts, fl);
        FZ_CHECK(st == MFT_OK, "re-saving the loaded tensors (flags %u): %s", fl,
                 mft_last_error_message());
        loaded again = load(g_path2, 0);
        same(l, &again, "re-saved file", false);
        mft_safetensors_free_list(again.n, again.names, again.ts);
        remove(g_path2);
    }
}

static void load_into(const loaded *l) {
    static const int64_t sx[4] = {1, 3, 2, 2}, sa[1] = {2}, sb[1] = {4};
    mft_tensor *t[NT] = {mft_full(4, sx, MFT_F32, MFT_CHANNELS_LAST, 0.5),
                         mft_full(1, sa, MFT_F32, MFT_CONTIGUOUS, 1.5),
                         mft_full(1, sb, MFT_F32, MFT_CONTIGUOUS, 2.5),
                         mft_full(0, NULL, MFT_I64, MFT_CONTIGUOUS, 3)};
    uint64_t h[NT];
    int64_t v[NT];
    for (int i = 0; i < NT; i++) {
        FZ_CHECK(t[i] != NULL, "setup");
        h[i] = mft_tensor_hash(t[i]);
        v[i] = mft_tensor_version(t[i]);
    }
    mft_clear_error();
    mft_status st = mft_safetensors_load_into(g_path, NT, (const char *const *)NAMES, t, 0);
    if (l->st == MFT_OK) {
        mft_status want = MFT_OK;
        for (int i = 0; i < NT && want == MFT_OK; i++) {
            int k = -1;
            for (int j = 0; j < l->n; j++)
                if (strcmp(l->names[j], NAMES[i]) == 0) k = j;
            const mft_tensor *e = k >= 0 ? l->ts[k] : NULL;
            int nd = e ? mft_tensor_ndim(e) : 0;
            if (!e) want = MFT_ERR_INVALID;
            else if (mft_tensor_dtype(e) != mft_tensor_dtype(t[i])) want = MFT_ERR_DTYPE;
            else if (nd != mft_tensor_ndim(t[i]) ||
                     memcmp(mft_tensor_sizes(e), mft_tensor_sizes(t[i]), sizeof(int64_t) * (size_t)nd))
                want = MFT_ERR_SHAPE;
        }
        FZ_CHECK(st == want, "load_into: %s, expected %s", mft_status_str(st), mft_status_str(want));
    }
    if (st != MFT_OK) {
        FZ_FAILED("mft_safetensors_load_into");
        for (int i = 0; i < NT; i++)
            FZ_CHECK(mft_tensor_hash(t[i]) == h[i] && mft_tensor_version(t[i]) == v[i],
                     "a failed load_into changed target '%s'", NAMES[i]);
    }
    for (int i = 0; i < NT; i++) mft_tensor_release(t[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    mft_set_num_threads(1);
    fz_scratch_path(g_path, sizeof g_path, "st", ".safetensors");
    fz_scratch_path(g_path2, sizeof g_path2, "st", ".resaved.safetensors");
    fz_write_file(g_path, data, size);
    loaded m = load(g_path, 0), r = load(g_path, MFT_SAFETENSORS_READ);
    same(&m, &r, "mmap vs read", true);
    if (m.st == MFT_OK) resave(&m);
    load_into(&m);
    mft_safetensors_free_list(m.n, m.names, m.ts);
    mft_safetensors_free_list(r.n, r.names, r.ts);
    remove(g_path);
    fz_check_no_leaks();
    return 0;
}
