/* tests/nn/test_nn_resnet.c — a ResNet as one module (mft_nn_residual,
 * mft_nn_custom, mft_nn_global_avg_pool2d inside mft_nn_sequential):
 *   - gradients: mft_gradcheck (central differences in F64) of a BasicBlock
 *     with a projection shortcut and of one with the identity, moved to F64
 *     with mft_module_to_dtype, against the input and every parameter, for
 *     NCHW and NHWC inputs; and of a custom gated block;
 *   - training: a tiny ResNet (stem, an identity block, a strided block with
 *     a projection, global pool, linear) trained with SGD + momentum on a
 *     synthetic 4-class problem (a bright quadrant per class, plus noise):
 *     the loss falls to a fraction of its start and the training accuracy
 *     rises, and the same run in NCHW and in NHWC (channels_last model and
 *     inputs) gives the same losses, parameters and logits within float
 *     tolerance; the trained model saved (mft_module_save) and loaded into a
 *     freshly built one of another seed gives the same logits bit for bit. */
#include <unistd.h>
#include "harness.h"

static const int64_t K1[2] = {1, 1}, K3[2] = {3, 3}, P1[2] = {1, 1};

/* torchvision's BasicBlock (bias on the convs when asked, for more to check). */
static mft_module *basic_block(int64_t in, int64_t out, int64_t stride, bool bias, uint64_t seed) {
    const int64_t st[2] = {stride, stride};
    mft_module *b[5] = {mft_nn_conv2d(in, out, K3, st, P1, NULL, 1, bias, seed),
                        mft_nn_batch_norm2d(out, 1e-5, 0.1), mft_nn_relu(),
                        mft_nn_conv2d(out, out, K3, NULL, P1, NULL, 1, bias, seed + 1),
                        mft_nn_batch_norm2d(out, 1e-5, 0.1)};
    mft_module *body = mft_nn_sequential(5, b);
    mft_module *sc = NULL;
    if (stride != 1 || in != out) {
        mft_module *s[2] = {mft_nn_conv2d(in, out, K1, st, NULL, NULL, 1, bias, seed + 2),
                            mft_nn_batch_norm2d(out, 1e-5, 0.1)};
        sc = mft_nn_sequential(2, s);
        if (!sc) {
            mft_module_free(body);
            return NULL;
        }
    }
    return mft_nn_residual(body, sc, true);
}

/* ------------------------------------------------------------------ gradcheck */
static mft_tensor *forward_fn(void *ctx, mft_tensor *const *inputs) {
    return mft_module_forward(ctx, inputs[0]);
}

/* gradcheck of m on an x of sizes xs in fmt, against x and every parameter. */
static void gradcheck_module(mft_module *m, const int64_t *xs, mft_format fmt, const char *what) {
    CHECK(mft_module_to_dtype(m, MFT_F64) == MFT_OK);
    mft_tensor *in[32];
    in[0] = mft_randn(4, xs, MFT_F64, fmt, 17);
    CHECK(mft_tensor_set_requires_grad(in[0], true) == MFT_OK);
    const int np = mft_module_parameters(m, in + 1, NULL, 31);
    CHECK(np > 0 && np < 31);
    for (int i = 1; i <= np; i++) CHECK(mft_tensor_dtype(in[i]) == MFT_F64);
    const mft_gradcheck_opts o = {1e-6, 1e-6, 1e-4, 3};
    mft_status st = mft_gradcheck(forward_fn, m, np + 1, in, &o);
    CHECK_MSG(st == MFT_OK, "%s (%s): %s", what, mft_format_name(fmt), mft_last_error_message());
    mft_clear_error();
    for (int i = 1; i <= np; i++) CHECK(mft_tensor_grad(in[i]) == NULL); /* left as found */
    mft_tensor_release(in[0]);
}

static void test_gradcheck_blocks(void) {
    for (int f = 0; f < 2; f++) {
        const mft_format fmt = f ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
        const int64_t xs[4] = {2, 2, 4, 4};
        mft_module *proj = basic_block(2, 3, 2, true, 5);
        CHECK(proj && mft_module_to_format(proj, fmt) == MFT_OK);
        gradcheck_module(proj, xs, fmt, "projection block");
        mft_module_free(proj);
        mft_module *ident = basic_block(2, 2, 1, false, 8);
        gradcheck_module(ident, xs, fmt, "identity block");
        mft_module_free(ident);
    }
}

/* y = a(x) * sigmoid(b(x)) + x over two 1x1 convs "a" and "b". */
static mft_tensor *gated_forward(mft_module *self, const mft_tensor *x, void *ctx) {
    (void)ctx;
    mft_tensor *a = mft_module_forward(mft_module_child_by_name(self, "a"), x);
    mft_tensor *b = mft_module_forward(mft_module_child_by_name(self, "b"), x);
    return mft_add(mft_mul(a, mft_sigmoid(b)), x);
}

static void test_gradcheck_custom(void) {
    mft_module *kids[2] = {mft_nn_conv2d(3, 3, K1, NULL, NULL, NULL, 1, true, 1),
                           mft_nn_conv2d(3, 3, K1, NULL, NULL, NULL, 1, true, 2)};
    mft_module *g = mft_nn_custom("Gated", 2, kids, (const char *[]){"a", "b"}, gated_forward,
                                  NULL, NULL);
    mft_module *r = mft_nn_residual(g, NULL, false);
    CHECK(r != NULL);
    const int64_t xs[4] = {2, 3, 3, 3};
    gradcheck_module(r, xs, MFT_CONTIGUOUS, "custom block in a residual");
    mft_module_free(r);
}

/* ------------------------------------------------------------------ training */
#define NCLASS 4
#define NIMG 64
#define BATCH 16
#define STEPS 48

/* NIMG 1x8x8 images: class c = i % 4 brightens quadrant c by 1.5 over N(0, 1)
 * noise; labels I64. Logically the same tensor in both formats. */
static void make_data(mft_format fmt, mft_tensor **x, mft_tensor **y) {
    const int64_t xs[4] = {NIMG, 1, 8, 8};
    mft_tensor *noise = mft_randn(4, xs, MFT_F32, MFT_CONTIGUOUS, 99);
    float *d = mft_tensor_data(noise);
    *y = mft_zeros(1, (const int64_t[]){NIMG}, MFT_I64, MFT_CONTIGUOUS);
    int64_t *lab = mft_tensor_data(*y);
    for (int i = 0; i < NIMG; i++) {
        const int c = i % NCLASS, r0 = (c / 2) * 4, c0 = (c % 2) * 4;
        lab[i] = c;
        for (int h = r0; h < r0 + 4; h++)
            for (int w = c0; w < c0 + 4; w++) d[i * 64 + h * 8 + w] += 1.5f;
    }
    *x = mft_contiguous(noise, fmt);
    mft_tensor_release(noise);
}

/* stem conv 1->8 + BN + relu, BasicBlock 8->8, BasicBlock 8->16 stride 2
 * (projection), global average pool, flatten, linear 16->4. */
static mft_module *tiny_resnet(uint64_t seed) {
    mft_module *l[8] = {mft_nn_conv2d(1, 8, K3, NULL, P1, NULL, 1, false, seed),
                        mft_nn_batch_norm2d(8, 1e-5, 0.1),
                        mft_nn_relu(),
                        basic_block(8, 8, 1, false, seed + 10),
                        basic_block(8, 16, 2, false, seed + 20),
                        mft_nn_global_avg_pool2d(),
                        mft_nn_flatten(1, 3),
                        mft_nn_linear(16, NCLASS, true, seed + 30)};
    return mft_nn_sequential(8, l);
}

typedef struct run_result {
    double loss[STEPS];
    double acc;          /* training accuracy in eval mode after the run */
    mft_tensor *logits;  /* eval logits of the whole set after the run */
    mft_tensor *params[40];
    int np;
    mft_module *model;
} run_result;

static void train(mft_format fmt, run_result *r) {
    memset(r, 0, sizeof *r);
    mft_module *m = tiny_resnet(7);
    CHECK(m && mft_module_to_format(m, fmt) == MFT_OK);
    if (!m) return;
    r->model = m;
    r->np = mft_module_parameters(m, r->params, NULL, 40);
    mft_optimizer *opt = mft_sgd_new(r->np, r->params, &(mft_sgd_opts){0.05, 0.9, 0.0, 0.0, false});
    mft_tensor *x, *y;
    make_data(fmt, &x, &y);
    for (int s = 0; s < STEPS; s++) {
        int64_t idx[BATCH];
        for (int i = 0; i < BATCH; i++) idx[i] = (s * BATCH + i * 5) % NIMG;
        mft_scope_begin();
        mft_tensor *xb = mft_gather_rows(x, idx, BATCH); /* packed in x's format */
        mft_tensor *yb = mft_gather_rows(y, idx, BATCH);
        mft_tape_begin();
        mft_tensor *logits = mft_module_forward(m, xb);
        mft_tensor *loss = mft_cross_entropy(logits, yb, NULL, -100, 0.0, MFT_REDUCTION_MEAN);
        CHECK(loss && mft_backward(loss, NULL) == MFT_OK);
        mft_tape_end();
        CHECK(mft_optimizer_step(opt) == MFT_OK);
        mft_optimizer_zero_grad(opt);
        r->loss[s] = loss ? mft_tensor_get(loss, NULL) : NAN;
        mft_scope_end();
    }
    mft_module_set_training(m, false);
    r->logits = mft_module_forward(m, x);
    mft_tensor *pred = mft_argmax(r->logits, 1, false);
    int correct = 0;
    for (int i = 0; pred && i < NIMG; i++)
        correct += ((const int64_t *)mft_tensor_data(pred))[i] ==
                   ((const int64_t *)mft_tensor_data(y))[i];
    r->acc = (double)correct / NIMG;
    CHECK_EQ_I(mft_module_depth(), 0);
    mft_tensor_release(pred);
    mft_tensor_release(x);
    mft_tensor_release(y);
    mft_optimizer_free(opt);
}

static void test_training_nchw_nhwc(void) {
    run_result a, b;
    train(MFT_CONTIGUOUS, &a);
    train(MFT_CHANNELS_LAST, &b);
    if (!a.model || !b.model) return;
    /* it learns: the loss of the last 8 steps is under a third of the first
     * step's (ln 4 = 1.386 at chance), and the training set is mostly right */
    double first = a.loss[0], last = 0.0;
    for (int s = STEPS - 8; s < STEPS; s++) last += a.loss[s] / 8.0;
    printf("loss %.4f -> %.4f, accuracy %.3f (NCHW) / %.3f (NHWC)\n", first, last, a.acc, b.acc);
    CHECK_MSG(first > 1.0 && last < first / 3.0, "loss %.4f -> %.4f", first, last);
    CHECK_MSG(a.acc >= 0.9, "training accuracy %.3f", a.acc);
    /* NCHW and NHWC: the same run up to float rounding */
    double worst = 0.0;
    for (int s = 0; s < STEPS; s++) {
        const double d = fabs(a.loss[s] - b.loss[s]) / fmax(1.0, fabs(a.loss[s]));
        if (d > worst) worst = d;
    }
    CHECK_MSG(worst < 1e-4, "losses differ by up to %.3g", worst);
    CHECK(a.acc == b.acc);
    CHECK_EQ_I(a.np, b.np);
    double pworst = 0.0;
    for (int i = 0; i < a.np && i < b.np; i++) {
        mft_tensor *d = mft_sub(a.params[i], b.params[i]);
        mft_tensor *ad = mft_abs(d), *mx = mft_amax(ad, 0, NULL, false);
        const double v = mx ? mft_tensor_get(mx, NULL) : INFINITY;
        if (v > pworst) pworst = v;
        CHECK(mft_tensor_ndim(b.params[i]) != 4 ||
              mft_tensor_is_contiguous(b.params[i], MFT_CHANNELS_LAST));
        mft_tensor_release(d);
        mft_tensor_release(ad);
        mft_tensor_release(mx);
    }
    CHECK_MSG(pworst < 1e-4, "parameters differ by up to %.3g", pworst);
    mft_tensor *dl = mft_sub(a.logits, b.logits);
    mft_tensor *adl = mft_abs(dl), *mdl = mft_amax(adl, 0, NULL, false);
    CHECK_MSG(mdl && mft_tensor_get(mdl, NULL) < 1e-3, "logits differ by %.3g",
              mdl ? mft_tensor_get(mdl, NULL) : -1.0);
    printf("NCHW vs NHWC: losses within %.2g (relative), parameters within %.2g, logits "
           "within %.2g\n",
           worst, pworst, mdl ? mft_tensor_get(mdl, NULL) : -1.0);
    /* the trained channels_last ResNet saved and reloaded into a freshly built
     * one (another seed, NCHW, then moved to channels_last): the same eval
     * logits bit for bit, so the same accuracy */
    char path[256];
    snprintf(path, sizeof path, "%s/mft_test_resnet_%d.mft",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
    CHECK(mft_module_save(path, b.model, NULL) == MFT_OK);
    mft_module *fresh = tiny_resnet(1234);
    CHECK(fresh && mft_module_to_format(fresh, MFT_CHANNELS_LAST) == MFT_OK);
    mft_tensor *x = NULL, *y = NULL;
    make_data(MFT_CHANNELS_LAST, &x, &y);
    mft_module_set_training(fresh, false);
    mft_tensor *before = mft_module_forward(fresh, x);
    CHECK(mft_module_load(path, fresh, NULL) == MFT_OK);
    mft_tensor *after = mft_module_forward(fresh, x);
    CHECK(before && after && mft_tensor_hash(before) != mft_tensor_hash(b.logits));
    CHECK_MSG(after && mft_tensor_hash(after) == mft_tensor_hash(b.logits),
              "reloaded ResNet gives other logits");
    remove(path);
    mft_tensor *list[] = {dl, adl, mdl, a.logits, b.logits, x, y, before, after};
    for (size_t i = 0; i < sizeof list / sizeof *list; i++) mft_tensor_release(list[i]);
    mft_module_free(fresh);
    mft_module_free(a.model);
    mft_module_free(b.model);
}

int main(void) {
    RUN(test_gradcheck_blocks);
    RUN(test_gradcheck_custom);
    RUN(test_training_nchw_nhwc);
    TEST_MAIN_END();
}
