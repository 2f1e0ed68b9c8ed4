/* tests/nn/test_train.c — training end to end with the nn toolkit, the tape,
 * cross_entropy and SGD:
 *   - one step of a tiny CNN equals PyTorch's (loss, every gradient, the
 *     parameters after SGD momentum) with the model in NCHW and in NHWC
 *     (tests/golden/gen_train_step.py -> train_step_cases.txt);
 *   - 50 steps on a 1,000-image Fashion-MNIST subset reach the same loss in
 *     NCHW and NHWC and a loss well below the start (skipped, exit 77, when
 *     the dataset is not installed);
 *   - a whole step under a scope leaks nothing, and an allocation failure
 *     injected at every allocation of a step returns an error, leaks
 *     nothing and leaves the parameters as they were. */
#define _POSIX_C_SOURCE 200809L /* strtok_r */
#include <stdbool.h>
#include "fail_alloc.h"
#include "harness.h"
#include "test_util.h"

#define NPARAM 8
static const char *DATA_DIR = "/usr/share/datasets/fashion-mnist";

/* ------------------------------------------------------------------ model */
static mft_module *tiny_cnn(uint64_t seed) {
    const int64_t k3[2] = {3, 3}, one[2] = {1, 1}, k2[2] = {2, 2};
    mft_module *l[11] = {
        mft_nn_conv2d(1, 4, k3, one, one, one, 1, true, seed),
        mft_nn_relu(),
        mft_nn_max_pool2d(k2, k2),
        mft_nn_conv2d(4, 8, k3, one, one, one, 1, true, seed + 1),
        mft_nn_relu(),
        mft_nn_max_pool2d(k2, k2),
        mft_nn_flatten(1, 3),
        mft_nn_linear(392, 16, true, seed + 2),
        mft_nn_relu(),
        mft_nn_linear(16, 10, true, seed + 3),
    };
    return mft_nn_sequential(10, l);
}

static double fill_param(int k, int64_t i) {
    static const double fan[NPARAM] = {9, 9, 36, 36, 392, 392, 16, 16};
    return ((13 * i + 7 * k + 5) % 19 - 9) / (16 * sqrt(fan[k]));
}

/* Writes v(logical index) into t through its strides. */
static void set_all(mft_tensor *t, double (*v)(int, int64_t), int k) {
    int64_t idx[MFT_MAX_DIMS] = {0}, i = 0;
    do mft_tensor_set(t, idx, v(k, i++));
    while (tu_next_index(mft_tensor_ndim(t), mft_tensor_sizes(t), idx));
}
static double fill_x(int k, int64_t i) {
    (void)k;
    return sin(0.37 * (double)i + 0.11) * 1.5;
}

static double max_rel_err(const mft_tensor *t, const double *want, int64_t n) {
    if (!t || mft_tensor_numel(t) != n) return INFINITY;
    int64_t idx[MFT_MAX_DIMS] = {0}, i = 0;
    double e = 0;
    do {
        double d = fabs(mft_tensor_get(t, idx) - want[i]) / (1e-3 + fabs(want[i]));
        if (!(d <= e)) e = d;
        i++;
    } while (tu_next_index(mft_tensor_ndim(t), mft_tensor_sizes(t), idx));
    return e;
}

/* One step: forward, cross_entropy, backward, optimiser step, zero_grad,
 * all inside a scope. Returns the status; *loss_out the loss. */
static mft_status train_step(mft_module *m, mft_optimizer *opt, const mft_tensor *x,
                             const mft_tensor *y, double *loss_out) {
    mft_status st = mft_scope_begin();
    if (st != MFT_OK) return st;
    st = mft_tape_begin();
    if (st == MFT_OK) {
        mft_tensor *logits = mft_module_forward(m, x);
        mft_tensor *loss = mft_cross_entropy(logits, y, NULL, -100, 0.0, MFT_REDUCTION_MEAN);
        st = loss ? mft_backward(loss, NULL) : mft_last_error();
        if (st == MFT_OK && loss_out) *loss_out = mft_tensor_get(loss, NULL);
        mft_tape_end();
    }
    if (st == MFT_OK) st = mft_optimizer_step(opt);
    mft_optimizer_zero_grad(opt);
    mft_scope_end();
    return st;
}

/* ------------------------------------------------------------------ golden step */
typedef struct golden {
    double loss;
    int64_t ng[NPARAM], np[NPARAM];
    double *g[NPARAM], *p[NPARAM];
} golden;

static bool read_golden(golden *gd) {
    char path[512];
    snprintf(path, sizeof path, "%s/train_step_cases.txt", MFT_TEST_DATA_DIR);
    FILE *fp = fopen(path, "r");
    CHECK_MSG(fp != NULL, "cannot open %s", path);
    if (!fp) return false;
    memset(gd, 0, sizeof *gd);
    static char line[1 << 18];
    while (fgets(line, sizeof line, fp)) {
        char *save = NULL, *key = strtok_r(line, " \n", &save);
        if (!key || key[0] == '#') continue;
        if (!strcmp(key, "loss")) {
            gd->loss = atof(strtok_r(NULL, " \n", &save));
            continue;
        }
        bool isg = !strcmp(key, "grad");
        int k = atoi(strtok_r(NULL, " \n", &save));
        int64_t n = atoll(strtok_r(NULL, " \n", &save));
        if (k < 0 || k >= NPARAM || n <= 0) continue;
        double *v = malloc((size_t)n * sizeof *v);
        for (int64_t i = 0; i < n; i++) v[i] = atof(strtok_r(NULL, " \n", &save));
        if (isg) gd->g[k] = v, gd->ng[k] = n;
        else gd->p[k] = v, gd->np[k] = n;
    }
    fclose(fp);
    return true;
}

static void test_one_step_matches_pytorch(void) {
    golden gd;
    if (!read_golden(&gd)) return;
    for (int f = 0; f < 2; f++) {
        mft_format fmt = f ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
        mft_module *m = tiny_cnn(1);
        CHECK(m && mft_module_to_format(m, fmt) == MFT_OK);
        mft_tensor *params[16];
        int np = mft_module_parameters(m, params, NULL, 16);
        CHECK_EQ_I(np, NPARAM);
        bool prev = mft_set_grad_enabled(false);
        for (int k = 0; k < NPARAM && k < np; k++) set_all(params[k], fill_param, k);
        mft_set_grad_enabled(prev);
        mft_optimizer *opt = mft_sgd_new(np, params, &(mft_sgd_opts){0.01, 0.9, 0.0, 0.0, false});
        mft_tensor *x = mft_empty(4, (int64_t[]){4, 1, 28, 28}, MFT_F32, fmt);
        set_all(x, fill_x, 0);
        mft_tensor *y = mft_empty(1, (int64_t[]){4}, MFT_I64, MFT_CONTIGUOUS);
        int64_t labels[4] = {3, 1, 7, 0};
        for (int64_t i = 0; i < 4; i++) mft_tensor_set(y, &i, (double)labels[i]);
        /* forward + backward, gradients checked before the step */
        mft_tape_begin();
        mft_tensor *logits = mft_module_forward(m, x);
        mft_tensor *loss = mft_cross_entropy(logits, y, NULL, -100, 0.0, MFT_REDUCTION_MEAN);
        CHECK_MSG(loss != NULL, "forward: %s", mft_last_error_message());
        CHECK(loss && mft_backward(loss, NULL) == MFT_OK);
        mft_tape_end();
        CHECK_NEAR(loss ? mft_tensor_get(loss, NULL) : 0.0, gd.loss, 1e-5);
        mft_dispatch_conversions_reset();
        for (int k = 0; k < NPARAM && k < np; k++) {
            double e = max_rel_err(mft_tensor_grad(params[k]), gd.g[k], gd.ng[k]);
            CHECK_MSG(e < 2e-3, "%s: grad of parameter %d: max rel err %g",
                      f ? "nhwc" : "nchw", k, e);
            /* leaf contract: the grad has its parameter's strides */
            mft_tensor *g = mft_tensor_grad(params[k]);
            CHECK(g && memcmp(mft_tensor_strides(g), mft_tensor_strides(params[k]),
                              (size_t)mft_tensor_ndim(g) * sizeof(int64_t)) == 0);
        }
        CHECK(mft_optimizer_step(opt) == MFT_OK);
        for (int k = 0; k < NPARAM && k < np; k++) {
            if (!gd.p[k]) continue;
            double e = max_rel_err(params[k], gd.p[k], gd.np[k]);
            CHECK_MSG(e < 1e-4, "parameter %d after the step: max rel err %g", k, e);
        }
        mft_tensor_release(logits), mft_tensor_release(loss);
        mft_tensor_release(x), mft_tensor_release(y);
        mft_optimizer_free(opt);
        mft_module_free(m);
    }
    for (int k = 0; k < NPARAM; k++) free(gd.g[k]), free(gd.p[k]);
}

/* ------------------------------------------------------------------ 50 steps */

static void test_fifty_steps_nchw_equals_nhwc(void) {
    mft_tensor *imgs = NULL, *labels = NULL;
    if (mft_mnist_load(DATA_DIR, "train", &imgs, &labels) != MFT_OK) {
        const char *why = mft_last_error_message();
        char msg[512];
        snprintf(msg, sizeof msg, "%s", why);
        mft_clear_error();
        SKIP("%s not readable (%s); apt-get install dataset-fashion-mnist", DATA_DIR, msg);
    }
    const int64_t n = 1000, bs = 20, steps = 50;
    int64_t *idx = malloc((size_t)n * sizeof *idx);
    double first[2] = {0}, last[2] = {0};
    for (int f = 0; f < 2; f++) {
        mft_format fmt = f ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
        mft_module *m = tiny_cnn(7);
        CHECK(mft_module_to_format(m, fmt) == MFT_OK);
        mft_tensor *params[16];
        int np = mft_module_parameters(m, params, NULL, 16);
        mft_optimizer *opt = mft_sgd_new(np, params, &(mft_sgd_opts){0.05, 0.9, 0.0, 0.0, false});
        int64_t live = mft_live_tensors();
        double acc_first = 0, acc_last = 0;
        for (int64_t s = 0; s < steps; s++) {
            if (s % (n / bs) == 0) mft_shuffle_indices(idx, n, 42 + (uint64_t)s);
            const int64_t *bi = idx + (s % (n / bs)) * bs;
            mft_tensor *x = mft_images_to_batch(imgs, bi, bs, 1.0 / 255, 0.2860, 0.3530, fmt, MFT_F32);
            mft_tensor *y = mft_gather_rows(labels, bi, bs);
            double l = NAN;
            CHECK(train_step(m, opt, x, y, &l) == MFT_OK);
            if (s < 5) acc_first += l / 5;
            if (s >= steps - 5) acc_last += l / 5;
            mft_tensor_release(x), mft_tensor_release(y);
        }
        CHECK_EQ_I(mft_live_tensors(), live); /* steps leak nothing */
        first[f] = acc_first, last[f] = acc_last;
        mft_optimizer_free(opt);
        mft_module_free(m);
    }
    printf("50 steps: loss %.4f -> %.4f (NCHW), %.4f -> %.4f (NHWC)\n", first[0], last[0],
           first[1], last[1]);
    CHECK(last[0] < 0.6 * first[0]);
    CHECK(last[1] < 0.6 * first[1]);
    CHECK_NEAR(last[0], last[1], 2e-3 * (1 + last[0]));
    free(idx);
    mft_tensor_release(imgs), mft_tensor_release(labels);
}

/* ------------------------------------------------------------------ alloc failure */

static void test_step_alloc_failure_everywhere(void) {
    mft_alloc_cache_set_limit(0);
    fa_install();
    mft_module *m = tiny_cnn(3);
    CHECK(mft_module_to_format(m, MFT_CHANNELS_LAST) == MFT_OK);
    mft_tensor *params[16];
    int np = mft_module_parameters(m, params, NULL, 16);
    mft_optimizer *opt = mft_sgd_new(np, params, &(mft_sgd_opts){0.01, 0.9, 0.0, 0.0, false});
    mft_tensor *x = mft_randn(4, (int64_t[]){2, 1, 28, 28}, MFT_F32, MFT_CHANNELS_LAST, 1);
    mft_tensor *y = mft_zeros(1, (int64_t[]){2}, MFT_I64, MFT_CONTIGUOUS);
    /* a clean step counts the allocations (and initialises momentum) */
    CHECK(train_step(m, opt, x, y, NULL) == MFT_OK);
    g_fa.calls = 0;
    g_fa.fail_at = 0;
    CHECK(train_step(m, opt, x, y, NULL) == MFT_OK);
    long long total = g_fa.calls;
    CHECK(total > 50);
    int64_t live_t = mft_live_tensors(), live_s = mft_live_storages();
    long long live_a = g_fa.live;
    long long failed = 0;
    for (long long k = 1; k <= total; k++) {
        uint64_t before[16];
        for (int i = 0; i < np; i++) before[i] = mft_tensor_hash(params[i]);
        g_fa.calls = 0;
        g_fa.fail_at = k;
        mft_status st = train_step(m, opt, x, y, NULL);
        g_fa.fail_at = 0;
        if (st != MFT_OK) {
            failed++;
            CHECK_MSG(st == MFT_ERR_NOMEM, "allocation %lld: status %s (%s)", k,
                      mft_status_str(st), mft_last_error_message());
            bool same = true;
            for (int i = 0; i < np; i++) same = same && before[i] == mft_tensor_hash(params[i]);
            CHECK_MSG(same, "allocation %lld failed but parameters changed", k);
        }
        CHECK_MSG(mft_live_tensors() == live_t && mft_live_storages() == live_s,
                  "allocation %lld: live tensors %lld (want %lld)", k,
                  (long long)mft_live_tensors(), (long long)live_t);
        CHECK_MSG(g_fa.live == live_a, "allocation %lld: %lld blocks live (want %lld)", k,
                  g_fa.live, live_a);
        CHECK(!mft_tape_recording());
    }
    printf("alloc failure: %lld allocations per step, %lld injected failures reported NOMEM\n",
           total, failed);
    CHECK(failed > total / 2);
    mft_tensor_release(x), mft_tensor_release(y);
    mft_optimizer_free(opt);
    mft_module_free(m);
    mft_set_allocator(NULL);
}

int main(void) {
    RUN(test_one_step_matches_pytorch);
    RUN(test_fifty_steps_nchw_equals_nhwc);
    RUN(test_step_alloc_failure_everywhere);
    TEST_MAIN_END();
}
