/* tests/nn/test_nn_safetensors.c — a model's state_dict as safetensors
 * (mft_module_save_safetensors / mft_module_load_safetensors, mft/state.h;
 * docs/spec.md §8.4), on mft_nn_fashion_cnn:
 *   - names: the file holds exactly PyTorch's state_dict keys of the same
 *     model (written out here by hand from torch 1.13's nn.Conv2d /
 *     BatchNorm2d / Linear: weight, bias, running_mean, running_var,
 *     num_batches_tracked), with and without batch norm, each with the
 *     model tensor's dtype, sizes and values; num_batches_tracked is I64 of
 *     shape [] as PyTorch's (tests/system/interop_model.sh checks the same
 *     files against PyTorch live, with a strict load_state_dict);
 *   - round trips between memory formats (channels_last -> nChw16c blocked
 *     weights, NCHW -> channels_last), logical and physical files, mapped and
 *     read loads: every tensor takes the saved values and keeps its own
 *     layout and object;
 *   - num_batches_tracked as PyTorch writes it (shape []) or as mft holds it
 *     ([1]) is loaded; absent, it is set to 0 (PyTorch's load_state_dict);
 *   - refusals leave every parameter and buffer bit-identical (hash of the
 *     logical values, data pointer, strides): a file of the same model
 *     with numbered children ("0.weight": an mft model or checkpoint of
 *     before the layers were named), other sizes, another dtype, an extra
 *     or a missing tensor, a bad counter shape, a truncated file, a missing
 *     file, NULL arguments; each status and message names the function, the
 *     file and the tensor;
 *   - no leaks (TEST_MAIN_END). */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include <stdint.h>
#include <unistd.h>
#include "harness.h"
#include "mft/io.h"
#include "mft/nn.h"
#include "mft/safetensors.h"
#include "mft/state.h"

#define MAXT 32

static char g_dir[256];

static void tmp_path(char *buf, size_t len, const char *name) {
    snprintf(buf, len, "%s/%s", g_dir, name);
}

/* A small Fashion-MNIST CNN: 1 x 8 x 8 images, width 4. */
static mft_module *model(bool bn, mft_format fmt, uint64_t seed) {
    return mft_nn_fashion_cnn(&(mft_fashion_cnn_config){
        .image_size = 8, .width = 4, .batch_norm = bn, .format = fmt, .seed = seed});
}

/* One training forward: running statistics move, num_batches_tracked = 1. */
static void forward_once(mft_module *m, uint64_t seed) {
    mft_scope_begin();
    mft_tensor *x = mft_randn(4, (const int64_t[]){3, 1, 8, 8}, MFT_F32, MFT_CONTIGUOUS, seed);
    CHECK(mft_module_forward(m, x) != NULL);
    mft_scope_end();
}

/* Every tensor of a model: parameters then buffers. */
typedef struct tlist {
    int n;
    mft_tensor *t[MAXT];
    const char *name[MAXT];
} tlist;

static void tlist_of(const mft_module *m, tlist *l) {
    const int np = mft_module_parameters(m, l->t, l->name, MAXT);
    l->n = np + mft_module_buffers(m, l->t + np, l->name + np, MAXT - np);
}

/* What must not change on a refused load. */
typedef struct snap {
    int n;
    uint64_t hash[MAXT];
    const void *data[MAXT];
    int64_t strides[MAXT][MFT_MAX_DIMS];
} snap;

static void snap_take(const mft_module *m, snap *s) {
    tlist l;
    tlist_of(m, &l);
    memset(s, 0, sizeof *s);
    s->n = l.n;
    for (int i = 0; i < l.n; i++) {
        s->hash[i] = mft_tensor_hash(l.t[i]);
        s->data[i] = mft_tensor_data(l.t[i]);
        const int64_t *st = mft_tensor_strides(l.t[i]); /* NULL for a blocked weight */
        if (st) memcpy(s->strides[i], st, sizeof(int64_t) * (size_t)mft_tensor_ndim(l.t[i]));
    }
}

static bool snap_equal(const snap *a, const snap *b) {
    return a->n == b->n && memcmp(a->hash, b->hash, sizeof a->hash) == 0 &&
           memcmp(a->data, b->data, sizeof a->data) == 0 &&
           memcmp(a->strides, b->strides, sizeof a->strides) == 0;
}

/* The value of a one-element I64 tensor. */
static int64_t i64_value(const mft_tensor *t) {
    return t && mft_tensor_dtype(t) == MFT_I64 && mft_tensor_numel(t) == 1
               ? *(const int64_t *)mft_tensor_data(t)
               : -12345;
}

/* Writes m's tensors to path as a safetensors file, without the one named
 * drop (may be NULL) and with the one named swap replaced by with (may be
 * NULL), plus extra under extra_name (may be NULL). */
static mft_status write_edited(const char *path, const mft_module *m, const char *drop,
                               const char *swap, const mft_tensor *with, const char *extra_name,
                               const mft_tensor *extra) {
    tlist l;
    tlist_of(m, &l);
    const char *names[MAXT + 1];
    const mft_tensor *ts[MAXT + 1];
    int n = 0;
    for (int i = 0; i < l.n; i++) {
        if (drop && !strcmp(l.name[i], drop)) continue;
        names[n] = l.name[i];
        ts[n++] = swap && !strcmp(l.name[i], swap) ? with : l.t[i];
    }
    if (extra_name) {
        names[n] = extra_name;
        ts[n++] = extra;
    }
    return mft_safetensors_save(path, n, names, ts, 0);
}

/* ------------------------------------------------------------------ names */
static void check_file_names(bool bn) {
    static const char *const plain[8] = {"conv1.weight", "conv1.bias", "conv2.weight",
                                         "conv2.bias",   "fc1.weight", "fc1.bias",
                                         "fc2.weight",   "fc2.bias"};
    static const char *const with_bn[18] = {
        "conv1.weight",         "conv1.bias",       "bn1.weight",      "bn1.bias",
        "conv2.weight",         "conv2.bias",       "bn2.weight",      "bn2.bias",
        "fc1.weight",           "fc1.bias",         "fc2.weight",      "fc2.bias",
        "bn1.running_mean",     "bn1.running_var",  "bn1.num_batches_tracked",
        "bn2.running_mean",     "bn2.running_var",  "bn2.num_batches_tracked"};
    const char *const *want = bn ? with_bn : plain;
    const int nwant = bn ? 18 : 8;
    char path[300];
    tmp_path(path, sizeof path, bn ? "names_bn.safetensors" : "names.safetensors");
    mft_module *m = model(bn, MFT_CHANNELS_LAST, 3);
    CHECK(m != NULL);
    if (!m) return;
    if (bn) forward_once(m, 5);
    tlist l;
    tlist_of(m, &l);
    CHECK_EQ_I(l.n, nwant);
    for (int i = 0; i < l.n && i < nwant; i++)
        CHECK_MSG(!strcmp(l.name[i], want[i]), "tensor %d: '%s', expected '%s'", i, l.name[i],
                  want[i]);
    CHECK(mft_module_save_safetensors(path, m, 0) == MFT_OK);
    int nf = 0;
    char **fn = NULL;
    mft_tensor **ft = NULL;
    CHECK(mft_safetensors_load(path, 0, &nf, &fn, &ft) == MFT_OK);
    CHECK_EQ_I(nf, nwant);
    for (int i = 0; i < nwant; i++) {
        int j = 0;
        while (j < nf && strcmp(fn[j], want[i])) j++;
        CHECK_MSG(j < nf, "'%s' not in the file", want[i]);
        if (j == nf) continue;
        if (strstr(want[i], "num_batches_tracked")) {
            CHECK_MSG(mft_tensor_ndim(ft[j]) == 0 && mft_tensor_dtype(ft[j]) == MFT_I64,
                      "%s: ndim %d dtype %s, PyTorch's is a 0-dim int64", want[i],
                      mft_tensor_ndim(ft[j]), mft_dtype_name(mft_tensor_dtype(ft[j])));
            CHECK_EQ_I(i64_value(ft[j]), 1);
            CHECK_EQ_I(i64_value(l.t[i]), 1);
        } else {
            CHECK_MSG(mft_tensor_hash(ft[j]) == mft_tensor_hash(l.t[i]), "%s: values differ",
                      want[i]);
        }
    }
    mft_safetensors_free_list(nf, fn, ft);
    mft_module_free(m);
    remove(path);
}

static void test_names(void) {
    check_file_names(false);
    check_file_names(true);
}

/* ------------------------------------------------------------------ round trips */
static void roundtrip(mft_format from, mft_format to, unsigned save_flags, unsigned load_flags) {
    char path[300];
    tmp_path(path, sizeof path, "roundtrip.safetensors");
    mft_module *a = model(true, from, 11), *b = model(true, to, 12);
    CHECK(a && b);
    if (a && b) {
        forward_once(a, 13);
        forward_once(a, 14); /* a's counters: 2, b's: 0 */
        CHECK(mft_module_save_safetensors(path, a, save_flags) == MFT_OK);
        tlist la, lb, lb0;
        tlist_of(a, &la);
        tlist_of(b, &lb0);
        int nloaded = -1;
        CHECK_MSG(mft_module_load_safetensors(path, b, load_flags, &nloaded) == MFT_OK, "%s",
                  mft_last_error_message());
        CHECK_EQ_I(nloaded, 18);
        tlist_of(b, &lb);
        CHECK_EQ_I(lb.n, la.n);
        for (int i = 0; i < la.n && i < lb.n; i++) {
            CHECK_MSG(lb.t[i] == lb0.t[i], "%s: a new tensor object", lb.name[i]);
            CHECK_MSG(mft_tensor_hash(lb.t[i]) == mft_tensor_hash(la.t[i]),
                      "%s: not the saved values (%s -> %s)", lb.name[i], mft_format_name(from),
                      mft_format_name(to));
        }
        /* the layouts are b's own: blocked conv weights stay blocked, a
         * channels_last weight channels_last */
        const mft_tensor *w = lb.t[0];
        if (to == MFT_NCHW16C) CHECK(mft_tensor_is_blocked(w));
        if (to == MFT_CHANNELS_LAST) CHECK(mft_tensor_is_contiguous(w, MFT_CHANNELS_LAST));
        if (to == MFT_CONTIGUOUS) CHECK(mft_tensor_is_contiguous(w, MFT_CONTIGUOUS));
    }
    mft_module_free(a);
    mft_module_free(b);
    remove(path);
}

static void test_roundtrips(void) {
    roundtrip(MFT_CHANNELS_LAST, MFT_NCHW16C, 0, 0);
    roundtrip(MFT_CONTIGUOUS, MFT_CHANNELS_LAST, 0, MFT_SAFETENSORS_READ);
    roundtrip(MFT_NCHW16C, MFT_CONTIGUOUS, 0, 0);
    roundtrip(MFT_CHANNELS_LAST, MFT_CONTIGUOUS, MFT_SAFETENSORS_PHYSICAL, 0);
    roundtrip(MFT_NCHW16C, MFT_CHANNELS_LAST, MFT_SAFETENSORS_PHYSICAL, MFT_SAFETENSORS_READ);
}

/* ------------------------------------------------------------------ num_batches_tracked */
static void test_counter_forms(void) {
    char path[300];
    tmp_path(path, sizeof path, "counter.safetensors");
    mft_module *a = model(true, MFT_CONTIGUOUS, 21), *b = model(true, MFT_CONTIGUOUS, 22);
    CHECK(a && b);
    if (a && b) {
        mft_module *bn1 = mft_module_child_by_name(b, "bn1");
        mft_tensor *bufs[3];
        CHECK(mft_module_buffers(bn1, bufs, NULL, 3) == 3);
        /* mft's own form, [1], holding 7 */
        mft_tensor *seven = mft_full(1, (const int64_t[]){1}, MFT_I64, MFT_CONTIGUOUS, 7.0);
        CHECK(write_edited(path, a, NULL, "bn1.num_batches_tracked", seven, NULL, NULL) == MFT_OK);
        int nloaded = 0;
        CHECK(mft_module_load_safetensors(path, b, 0, &nloaded) == MFT_OK && nloaded == 18);
        CHECK_EQ_I(i64_value(bufs[2]), 7);
        mft_tensor_release(seven);
        /* absent: set to 0, as PyTorch's load_state_dict */
        forward_once(b, 23);
        CHECK_EQ_I(i64_value(bufs[2]), 8);
        CHECK(write_edited(path, a, "bn1.num_batches_tracked", NULL, NULL, NULL, NULL) == MFT_OK);
        CHECK(mft_module_load_safetensors(path, b, 0, &nloaded) == MFT_OK);
        CHECK_EQ_I(nloaded, 17);
        CHECK_EQ_I(i64_value(bufs[2]), 0);
    }
    mft_module_free(a);
    mft_module_free(b);
    remove(path);
}

/* ------------------------------------------------------------------ refusals */
/* mft_module_load_safetensors(path, m) must fail with status, a message
 * holding the function, the path and needle, and change nothing of m. */
static void expect_refused(const char *path, mft_module *m, mft_status status,
                           const char *needle) {
    snap s0, s1;
    snap_take(m, &s0);
    mft_clear_error();
    int nloaded = 99;
    const mft_status st = mft_module_load_safetensors(path, m, 0, &nloaded);
    CHECK_MSG(st == status, "status %s, want %s (%s)", mft_status_str(st), mft_status_str(status),
              mft_last_error_message());
    CHECK_EQ_I(nloaded, 0);
    const char *msg = mft_last_error_message();
    CHECK_MSG(!strncmp(msg, "mft_module_load_safetensors: ", 29), "message '%s'", msg);
    CHECK_MSG(!path || strstr(msg, path), "message '%s' lacks the path", msg);
    CHECK_MSG(strstr(msg, needle) != NULL, "message '%s' lacks '%s'", msg, needle);
    mft_clear_error();
    snap_take(m, &s1);
    CHECK_MSG(snap_equal(&s0, &s1), "a refused load (%s) changed the model", needle);
}

/* m's (mft_nn_fashion_cnn without batch norm) tensors under the names its
 * numbered sequential gave them before its layers were named, as a
 * safetensors file or an mft checkpoint. */
static mft_status write_numbered(const char *path, const mft_module *m, bool safetensors) {
    static const char *const numbered[8] = {"0.weight", "0.bias", "3.weight", "3.bias",
                                            "7.weight", "7.bias", "9.weight", "9.bias"};
    tlist l;
    tlist_of(m, &l);
    if (l.n != 8) return MFT_ERR_INVALID;
    const mft_tensor *ts[8];
    for (int i = 0; i < 8; i++) ts[i] = l.t[i];
    return safetensors ? mft_safetensors_save(path, 8, numbered, ts, 0)
                       : mft_save_tensors(path, 8, numbered, ts);
}

static void test_refusals(void) {
    char good[300], bad[300];
    tmp_path(good, sizeof good, "good.safetensors");
    tmp_path(bad, sizeof bad, "bad.safetensors");
    mft_module *a = model(true, MFT_CONTIGUOUS, 31), *b = model(true, MFT_NCHW16C, 32);
    mft_module *plain = model(false, MFT_CHANNELS_LAST, 33), *old = model(false, MFT_CONTIGUOUS, 34);
    mft_module *wide = mft_nn_fashion_cnn(&(mft_fashion_cnn_config){
        .image_size = 8, .width = 8, .batch_norm = true, .seed = 35});
    CHECK(a && b && plain && old && wide);
    if (!a || !b || !plain || !old || !wide) goto out;
    forward_once(b, 36);
    CHECK(mft_module_save_safetensors(good, a, 0) == MFT_OK);

    /* numbered names: an mft model (or checkpoint) from before the names */
    CHECK(write_numbered(bad, old, true) == MFT_OK);
    expect_refused(bad, plain, MFT_ERR_INVALID,
                   "tensor 'conv1.weight' of the model is missing from the file");
    CHECK(write_numbered(bad, old, false) == MFT_OK); /* an old checkpoint, mft's format */
    snap s0, s1;
    snap_take(plain, &s0);
    CHECK(mft_module_load(bad, plain, NULL) == MFT_ERR_INVALID);
    CHECK_ERR(MFT_ERR_INVALID, "tensor 'conv1.weight' of the model is missing from the file");
    snap_take(plain, &s1);
    CHECK(snap_equal(&s0, &s1));

    /* a batch-norm file into a model without: extra tensors */
    expect_refused(good, plain, MFT_ERR_INVALID,
                   "that the model does not have");
    /* other sizes */
    CHECK(mft_module_save_safetensors(bad, wide, 0) == MFT_OK);
    expect_refused(bad, b, MFT_ERR_SHAPE,
                   "tensor 'conv1.weight' has sizes [8,1,3,3] in the file, [4,1,3,3] in the model");
    /* another dtype */
    tlist la;
    tlist_of(a, &la);
    mft_tensor *f64 = mft_to_dtype(la.t[1], MFT_F64); /* conv1.bias */
    CHECK(write_edited(bad, a, NULL, "conv1.bias", f64, NULL, NULL) == MFT_OK);
    mft_tensor_release(f64);
    expect_refused(bad, b, MFT_ERR_DTYPE, "tensor 'conv1.bias' is f64 in the file, f32 in the model");
    /* a missing tensor, the last of the file order */
    CHECK(write_edited(bad, a, "fc2.weight", NULL, NULL, NULL, NULL) == MFT_OK);
    expect_refused(bad, b, MFT_ERR_INVALID, "tensor 'fc2.weight' of the model is missing");
    /* an extra tensor */
    mft_tensor *extra = mft_zeros(1, (const int64_t[]){3}, MFT_F32, MFT_CONTIGUOUS);
    CHECK(write_edited(bad, a, NULL, NULL, NULL, "fc3.weight", extra) == MFT_OK);
    expect_refused(bad, b, MFT_ERR_INVALID, "the file has tensor 'fc3.weight' (f32 [3])");
    mft_tensor_release(extra);
    /* a counter of two elements */
    mft_tensor *two = mft_zeros(1, (const int64_t[]){2}, MFT_I64, MFT_CONTIGUOUS);
    CHECK(write_edited(bad, a, NULL, "bn2.num_batches_tracked", two, NULL, NULL) == MFT_OK);
    expect_refused(bad, b, MFT_ERR_SHAPE, "tensor 'bn2.num_batches_tracked' has sizes [2]");
    mft_tensor_release(two);
    /* a truncated file, a missing file */
    FILE *in = fopen(good, "rb"), *out = fopen(bad, "wb");
    CHECK(in && out);
    if (in && out) {
        char buf[4096];
        size_t k = fread(buf, 1, sizeof buf, in);
        CHECK(k == sizeof buf && fwrite(buf, 1, k, out) == k);
    }
    if (in) fclose(in);
    if (out) fclose(out);
    expect_refused(bad, b, MFT_ERR_CORRUPT, "");
    remove(bad);
    expect_refused(bad, b, MFT_ERR_IO, "");
    /* NULL arguments */
    CHECK(mft_module_load_safetensors(NULL, b, 0, NULL) == MFT_ERR_NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_module_load_safetensors: argument 'path' is NULL");
    CHECK(mft_module_load_safetensors(good, NULL, 0, NULL) == MFT_ERR_NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_module_load_safetensors: argument 'm' is NULL");
    CHECK(mft_module_save_safetensors(NULL, a, 0) == MFT_ERR_NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_module_save_safetensors: argument 'path' is NULL");
    CHECK(mft_module_save_safetensors(good, NULL, 0) == MFT_ERR_NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_module_save_safetensors: argument 'm' is NULL");
    /* an unwritable path: an error naming the function, no file */
    CHECK(mft_module_save_safetensors("/nonexistent-dir/x.safetensors", a, 0) == MFT_ERR_IO);
    CHECK_ERR(MFT_ERR_IO, "mft_module_save_safetensors: ");
out:
    mft_module_free(a);
    mft_module_free(b);
    mft_module_free(plain);
    mft_module_free(old);
    mft_module_free(wide);
    remove(good);
    remove(bad);
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "%s", "/tmp/mft_test_nn_safetensors_XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_names);
    RUN(test_roundtrips);
    RUN(test_counter_forms);
    RUN(test_refusals);
    rmdir(g_dir);
    TEST_MAIN_END();
}
