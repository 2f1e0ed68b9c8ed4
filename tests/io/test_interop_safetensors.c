/* tests/io/test_interop_safetensors.c — safetensors files against live
 * /usr/bin/python3 (torch 1.13) and tests/io/safetensors_ref.py, a stdlib
 * reader/writer written independently of mft:
 *   - files mft writes (logical and physical mode) are read by the Python
 *     reader and by torch.frombuffer, and equal reference tensors torch builds
 *     itself from the value formula; in physical mode the channels_last
 *     entries become torch channels_last tensors after permute(0,3,1,2);
 *   - a file of untagged tensors written by mft is byte-identical to the
 *     Python writer's (the reference writer's order and padding);
 *   - files the Python writer makes from its own bytes, and from torch tensors
 *     (a channels_last one made contiguous, as safetensors.torch requires),
 *     load in mft with the formula's values.
 * Skipped (77) without /usr/bin/python3 + torch. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include <sys/wait.h>
#include <unistd.h>
#include "test_util.h"

#define SCRIPT MFT_TEST_DATA_DIR "/../io/safetensors_ref.py"

static char tmpdir[256];

/* the tensors of safetensors_ref.py's REFERENCE: name, dtype, sizes, salt, tag */
typedef struct ref_t {
    const char *name;
    mft_dtype dt;
    int nd;
    int64_t sizes[4];
    int salt;
    mft_format fmt;
} ref_t;
static const ref_t REF[6] = {
    {"conv.weight", MFT_F32, 4, {4, 3, 2, 2}, 1, MFT_CHANNELS_LAST},
    {"act", MFT_F64, 4, {2, 3, 4, 5}, 2, MFT_CHANNELS_LAST},
    {"bias", MFT_F32, 1, {4}, 3, MFT_CONTIGUOUS},
    {"ids", MFT_I64, 2, {2, 3}, 4, MFT_CONTIGUOUS},
    {"mask", MFT_U8, 1, {5}, 5, MFT_CONTIGUOUS},
    {"count", MFT_I32, 0, {0}, 6, MFT_CONTIGUOUS},
};

/* the values: tu_formula, the formula safetensors_ref.py builds in torch */
static mft_tensor *make(const ref_t *r) {
    mft_tensor *t = mft_empty(r->nd, r->sizes, r->dt, r->fmt);
    tu_formula_walk(t, r->salt, true);
    return t;
}

static bool matches(const mft_tensor *t, const ref_t *r) {
    return tu_has_sizes(t, r->nd, r->sizes) && mft_tensor_dtype(t) == r->dt &&
           tu_formula_walk((mft_tensor *)t, r->salt, false);
}

static int run_py(const char *cmd, const char *file, const char *arg) {
    char line[1200];
    snprintf(line, sizeof line, "/usr/bin/python3 %s %s %s %s", SCRIPT, cmd, file, arg ? arg : "");
    int rc = system(line);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static bool have_torch(void) {
    if (access("/usr/bin/python3", X_OK) != 0) return false;
    int rc = system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1");
    return WIFEXITED(rc) && WEXITSTATUS(rc) == 0;
}

static void save_all(const char *path, unsigned flags) {
    mft_tensor *ts[6];
    const char *names[6];
    for (int i = 0; i < 6; i++) {
        ts[i] = make(&REF[i]);
        names[i] = REF[i].name;
    }
    CHECK_MSG(mft_safetensors_save(path, 6, names, (const mft_tensor *const *)ts, flags) == MFT_OK,
              "%s", mft_last_error_message());
    for (int i = 0; i < 6; i++) mft_tensor_release(ts[i]);
}

static void test_mft_files_in_python(void) {
    if (!have_torch()) SKIP("/usr/bin/python3 with torch is not available");
    char p[300];
    snprintf(p, sizeof p, "%s/logical.safetensors", tmpdir);
    save_all(p, 0);
    CHECK_EQ_I(run_py("check", p, "logical"), 0);
    remove(p);
    snprintf(p, sizeof p, "%s/physical.safetensors", tmpdir);
    save_all(p, MFT_SAFETENSORS_PHYSICAL);
    CHECK_EQ_I(run_py("check", p, "physical"), 0);
    remove(p);
}

static void test_byte_identical_to_reference_writer(void) {
    if (!have_torch()) SKIP("/usr/bin/python3 with torch is not available");
    char pm[300], pp[300];
    snprintf(pm, sizeof pm, "%s/plain_mft.safetensors", tmpdir);
    snprintf(pp, sizeof pp, "%s/plain_py.safetensors", tmpdir);
    mft_tensor *ts[4];
    const char *names[4];
    int k = 0;
    for (int i = 0; i < 6; i++)
        if (REF[i].fmt == MFT_CONTIGUOUS) {
            ts[k] = make(&REF[i]);
            names[k++] = REF[i].name;
        }
    CHECK(mft_safetensors_save(pm, k, names, (const mft_tensor *const *)ts, 0) == MFT_OK);
    for (int i = 0; i < k; i++) mft_tensor_release(ts[i]);
    CHECK_EQ_I(run_py("write-plain", pp, NULL), 0);
    size_t n1 = 0, n2 = 0;
    unsigned char *a = tu_read_file(pm, &n1), *b = tu_read_file(pp, &n2);
    CHECK_MSG(a && b && n1 == n2 && memcmp(a, b, n1) == 0, "mft %zu bytes, python %zu bytes", n1,
              n2);
    free(a);
    free(b);
    remove(pm);
    remove(pp);
}

static void load_python_file(const char *cmd) {
    char p[300];
    snprintf(p, sizeof p, "%s/%s.safetensors", tmpdir, cmd);
    CHECK_EQ_I(run_py(cmd, p, NULL), 0);
    for (unsigned fl = 0; fl <= MFT_SAFETENSORS_READ; fl += MFT_SAFETENSORS_READ) {
        int n = 0;
        char **names = NULL;
        mft_tensor **ts = NULL;
        CHECK_MSG(mft_safetensors_load(p, fl, &n, &names, &ts) == MFT_OK && n == 6, "%s: %s", cmd,
                  mft_last_error_message());
        for (int i = 0; i < n; i++) {
            const ref_t *r = NULL;
            for (int j = 0; j < 6; j++)
                if (strcmp(names[i], REF[j].name) == 0) r = &REF[j];
            CHECK_MSG(r && matches(ts[i], r), "%s: tensor '%s' differs", cmd, names[i]);
            /* no mft metadata: plain C order, tag inferred */
            CHECK(mft_tensor_is_contiguous(ts[i], MFT_CONTIGUOUS));
        }
        mft_safetensors_free_list(n, names, ts);
    }
    remove(p);
}

static void test_python_files_in_mft(void) {
    if (!have_torch()) SKIP("/usr/bin/python3 with torch is not available");
    load_python_file("write");
    load_python_file("write-torch");
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/mft_sti_XXXXXX");
    if (mkdtemp(tmpdir) == NULL) return perror("mkdtemp"), 1;
    RUN(test_mft_files_in_python);
    RUN(test_byte_identical_to_reference_writer);
    RUN(test_python_files_in_mft);
    rmdir(tmpdir); /* each test removed its files */
    TEST_MAIN_END();
}
