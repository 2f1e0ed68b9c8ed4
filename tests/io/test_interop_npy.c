/* tests/io/test_interop_npy.c — mft/npy.h against NumPy run live from
 * /usr/bin/python3 (skipped, exit 77, without it or without numpy).
 *   mft -> NumPy: files mft saves (every dtype, ranks 0-5, empty, logical and
 *     physical modes of CONTIGUOUS, CHANNELS_LAST, transposed and NCHW8C /
 *     NCHW16C tensors, format 2.0 forced) are checked by tests/io/npy_check.py:
 *     np.load gives the array NumPy computes itself from the generator's
 *     formula (a channels_last tensor's physical file is
 *     np.ascontiguousarray(x.transpose(0,2,3,1))), the data starts at a
 *     multiple of 64, and the file is byte-identical to NumPy's own file of
 *     that array.
 *   NumPy -> mft: tests/golden/gen_npy.py writes its files (v1/v2/v3, Fortran,
 *     every dtype, big-endian, ranks 0-5, empty, refused dtypes) into a
 *     scratch directory and they are checked as the committed golden ones.
 *   A header with one more key ('mft_layout') is refused by np.load with
 *     "Header does not contain the correct keys" (why layout metadata cannot
 *     ride in a .npy header, docs/spec.md §8.2), and by mft. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, popen */
#include <sys/wait.h>
#include <unistd.h>
#include "io/npy_util.h"

#define PYTHON "/usr/bin/python3"

static char tmpdir[256];
static bool g_have_numpy;

static void add(FILE *manifest, const char *name, const char *kind, const mft_tensor *t,
                const int64_t *shape_for_numpy, int nd, unsigned flags) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", tmpdir, name);
    CHECK_MSG(mft_save_npy(p, t, flags) == MFT_OK, "%s: %s", name, mft_last_error_message());
    static const char *const descr[MFT_DTYPE_COUNT] = {"<f4", "<f8", "<i4", "<i8", "|u1"};
    fprintf(manifest, "%s %s %s %d ", name, kind, descr[mft_tensor_dtype(t)],
            (flags & MFT_NPY_VERSION2) ? 2 : 1);
    for (int d = 0; d < nd; d++) fprintf(manifest, d ? ",%lld" : "%lld", (long long)shape_for_numpy[d]);
    fprintf(manifest, nd ? "\n" : "-\n");
}

/* Runs cmd, returns its exit status and appends its output to out. */
static int run(const char *cmd, char *out, size_t len) {
    FILE *f = popen(cmd, "r");
    if (!f) return -1;
    size_t k = strlen(out);
    while (k + 1 < len && fgets(out + k, (int)(len - k), f)) k += strlen(out + k);
    int st = pclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_mft_to_numpy(void) {
    if (!g_have_numpy) SKIP("no NumPy under " PYTHON);
    char mpath[512];
    snprintf(mpath, sizeof mpath, "%s/manifest.txt", tmpdir);
    FILE *m = fopen(mpath, "w");
    CHECK(m != NULL);
    if (!m) return;
    static const mft_dtype dts[5] = {MFT_F32, MFT_F64, MFT_I32, MFT_I64, MFT_U8};
    static const int64_t sz[5] = {2, 3, 4, 1, 5}, empty[3] = {2, 0, 3};
    int files = 0;
    char name[128];
    for (int d = 0; d < 5; d++) {
        for (int nd = 0; nd <= 5; nd++) {
            mft_tensor *x = make(nd, sz, dts[d], MFT_CONTIGUOUS);
            snprintf(name, sizeof name, "c_%s_r%d.npy", mft_dtype_name(dts[d]), nd);
            add(m, name, "c", x, sz, nd, MFT_NPY_PHYSICAL), files++;
            if (nd >= 3) {
                mft_tensor *y = make(nd, sz, dts[d], MFT_CHANNELS_LAST);
                snprintf(name, sizeof name, "cl_phys_%s_r%d.npy", mft_dtype_name(dts[d]), nd);
                add(m, name, "cl", y, sz, nd, MFT_NPY_PHYSICAL), files++;
                snprintf(name, sizeof name, "cl_log_%s_r%d.npy", mft_dtype_name(dts[d]), nd);
                add(m, name, "c", y, sz, nd, MFT_NPY_LOGICAL), files++;
                mft_tensor *b = make(nd, sz, dts[d], d % 2 ? MFT_NCHW8C : MFT_NCHW16C);
                snprintf(name, sizeof name, "blk_%s_r%d.npy", mft_dtype_name(dts[d]), nd);
                add(m, name, d % 2 ? "b8" : "b16", b, sz, nd, MFT_NPY_PHYSICAL), files++;
                snprintf(name, sizeof name, "blk_log_%s_r%d.npy", mft_dtype_name(dts[d]), nd);
                add(m, name, "c", b, sz, nd, MFT_NPY_LOGICAL), files++;
                mft_tensor_release(b);
                mft_tensor_release(y);
            }
            mft_tensor_release(x);
        }
        mft_tensor *e = make(3, empty, dts[d], MFT_CHANNELS_LAST);
        snprintf(name, sizeof name, "empty_%s.npy", mft_dtype_name(dts[d]));
        add(m, name, "c", e, empty, 3, MFT_NPY_LOGICAL), files++;
        snprintf(name, sizeof name, "v2_%s.npy", mft_dtype_name(dts[d]));
        add(m, name, "cl", e, empty, 3, MFT_NPY_VERSION2), files++;
        mft_tensor_release(e);
        /* a transpose: physical is the memory (3,5) as NumPy's column-major
         * (5,3) array, logical its C-order copy */
        static const int64_t s35[2] = {3, 5};
        mft_tensor *base = make(2, s35, dts[d], MFT_CONTIGUOUS), *tr = mft_transpose(base, 0, 1);
        snprintf(name, sizeof name, "tr_phys_%s.npy", mft_dtype_name(dts[d]));
        add(m, name, "F", tr, s35, 2, MFT_NPY_PHYSICAL), files++;
        snprintf(name, sizeof name, "tr_log_%s.npy", mft_dtype_name(dts[d]));
        add(m, name, "T", tr, s35, 2, MFT_NPY_LOGICAL | MFT_NPY_VERSION2), files++;
        mft_tensor_release(tr);
        mft_tensor_release(base);
    }
    fclose(m);
    char cmd[1024], out[65536] = "";
    snprintf(cmd, sizeof cmd, PYTHON " '%s/../io/npy_check.py' '%s' 2>&1", MFT_TEST_DATA_DIR, tmpdir);
    int st = run(cmd, out, sizeof out);
    int ok = 0;
    for (const char *s = out; (s = strstr(s, "OK ")) != NULL; s += 3) ok += s == out || s[-1] == '\n';
    CHECK_MSG(st == 0 && ok == files, "npy_check.py: exit %d, %d of %d files OK:\n%s", st, ok, files,
              out);
    /* NumPy refuses a header with one more key; so does mft */
    CHECK_MSG(strstr(out, "EXTRA_KEY: Header does not contain the correct keys") != NULL, "%s", out);
    char p[512];
    snprintf(p, sizeof p, "%s/extra_key.npy", tmpdir);
    CHECK(mft_load_npy(p, MFT_CONTIGUOUS) == NULL);
    CHECK_ERR(MFT_ERR_CORRUPT, "unknown key 'mft_layout'");
}

static void test_numpy_to_mft(void) {
    if (!g_have_numpy) SKIP("no NumPy under " PYTHON);
    char dir[512], cmd[1024], out[8192] = "";
    snprintf(dir, sizeof dir, "%s/from_numpy", tmpdir);
    snprintf(cmd, sizeof cmd, PYTHON " '%s/gen_npy.py' '%s' 2>&1", MFT_TEST_DATA_DIR, dir);
    int st = run(cmd, out, sizeof out);
    CHECK_MSG(st == 0, "gen_npy.py: exit %d:\n%s", st, out);
    if (st == 0) npy_check_cases(dir);
}

int main(void) {
    g_have_numpy = access(PYTHON, X_OK) == 0 &&
                   system(PYTHON " -c 'import numpy' >/dev/null 2>&1") == 0;
    if (!npy_tmpdir(tmpdir, sizeof tmpdir, "mft_npy_interop")) return 1;
    RUN(test_mft_to_numpy);
    RUN(test_numpy_to_mft);
    npy_tmpdir_remove(tmpdir);
    TEST_MAIN_END();
}
