/* examples/resnet.c — a small ResNet on Fashion-MNIST, built as ONE module:
 * residual blocks (mft_nn_residual) with projection shortcuts where the
 * shape changes, a global average pool and a linear head inside one
 * mft_nn_sequential, so forward, parameters (with PyTorch's state_dict
 * names), training mode, to_format, describe and free each take one call.
 * The PyTorch 1.13 twin is examples/resnet_torch.py (same architecture,
 * optimiser, learning rate, batch size and subset), printing the same lines.
 *
 *   build/examples/resnet                          # NHWC, 3 epochs of 30000 images
 *   build/examples/resnet --format nchw --threads 2 --epochs 1 --train-limit 10000
 *   /usr/bin/python3 examples/resnet_torch.py --format nhwc --threads 2
 *
 * Model (docs/nn.md):
 *   0-2  stem: conv 1->16 3x3 p1 (no bias), batch_norm, relu      28x28
 *   3    BasicBlock 16->16                                         28x28
 *   4    BasicBlock 16->32 stride 2, shortcut conv 1x1 s2 + BN    14x14
 *   5    BasicBlock 32->64 stride 2, shortcut conv 1x1 s2 + BN     7x7
 *   6-8  global average pool, flatten, linear 64->10
 * A BasicBlock is relu(body(x) + shortcut(x)), body = conv 3x3 (stride),
 * BN, relu, conv 3x3, BN (torchvision's). SGD momentum 0.9, lr 0.05,
 * batch 64; inputs scaled to [0,1] and normalised (mean 0.2860, std 0.3530).
 * Prints the model tree, then per epoch the mean training loss, the test
 * accuracy and the milliseconds per training step (forward, backward and
 * update; data batching included, evaluation not). */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <mft/mft.h>

#define MEAN 0.2860
#define STD 0.3530
#define MAX_PARAMS 64

typedef struct options {
    const char *data_dir, *format;
    int epochs, threads, batch;
    int64_t train_limit, test_limit;
    double lr;
    uint64_t seed;
    bool quiet;
} options;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int fail(const char *what) {
    fprintf(stderr, "resnet: %s: %s (%s)\n", what, mft_last_error_message(),
            mft_status_str(mft_last_error()));
    return 1;
}

static void usage(FILE *to) {
    fprintf(to, "usage: resnet [--format nhwc|nchw] [--epochs N] [--train-limit N] [--test-limit N]\n"
                "              [--threads T] [--batch B] [--lr LR] [--seed S] [--data DIR] [--quiet]\n"
                "  --epochs N       passes over the training subset (default 3)\n"
                "  --train-limit N  train on the first N images (default 30000; 0: all 60000)\n"
                "  --test-limit N   evaluate on the first N test images (default: all 10000)\n");
}

static int parse(int argc, char **argv, options *o) {
    *o = (options){"/usr/share/datasets/fashion-mnist", "nhwc", 3, 0, 64, 30000, 0, 0.05, 1,
                   false};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define OPT(name) (strcmp(a, name) == 0 && v && (i++, 1))
        if (OPT("--format")) o->format = v;
        else if (OPT("--epochs")) o->epochs = atoi(v);
        else if (OPT("--threads")) o->threads = atoi(v);
        else if (OPT("--batch")) o->batch = atoi(v);
        else if (OPT("--lr")) o->lr = atof(v);
        else if (OPT("--seed")) o->seed = strtoull(v, NULL, 10);
        else if (OPT("--train-limit")) o->train_limit = atoll(v);
        else if (OPT("--test-limit")) o->test_limit = atoll(v);
        else if (OPT("--data")) o->data_dir = v;
        else if (strcmp(a, "--quiet") == 0) o->quiet = true;
        else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return -1;
        } else {
            usage(stderr);
            return 2;
        }
#undef OPT
    }
    if ((strcmp(o->format, "nhwc") && strcmp(o->format, "nchw")) || o->epochs < 0 ||
        o->batch <= 0 || o->threads < 0 || o->train_limit < 0 || o->test_limit < 0 ||
        !(o->lr >= 0)) {
        usage(stderr);
        return 2;
    }
    return 0;
}

/* ------------------------------------------------------------------ the model */
static const int64_t K1[2] = {1, 1}, K3[2] = {3, 3}, P1[2] = {1, 1};

/* torchvision's BasicBlock: relu(body(x) + shortcut(x)), body = conv 3x3
 * (stride) BN relu conv 3x3 BN, shortcut = conv 1x1 (stride) BN when the
 * shape changes, else the identity. Children "body" and "shortcut"; NULL
 * on failure (every constructor frees what it was given). */
static mft_module *basic_block(int64_t in, int64_t out, int64_t stride, uint64_t seed) {
    const int64_t st[2] = {stride, stride};
    mft_module *body[5] = {mft_nn_conv2d(in, out, K3, st, P1, NULL, 1, false, seed),
                           mft_nn_batch_norm2d(out, 1e-5, 0.1), mft_nn_relu(),
                           mft_nn_conv2d(out, out, K3, NULL, P1, NULL, 1, false, seed + 1),
                           mft_nn_batch_norm2d(out, 1e-5, 0.1)};
    mft_module *b = mft_nn_sequential(5, body);
    if (stride == 1 && in == out) return mft_nn_residual(b, NULL, true);
    mft_module *sc[2] = {mft_nn_conv2d(in, out, K1, st, NULL, NULL, 1, false, seed + 2),
                         mft_nn_batch_norm2d(out, 1e-5, 0.1)};
    mft_module *s = mft_nn_sequential(2, sc);
    if (!s) { /* NULL would mean the identity: do not pass it on */
        mft_module_free(b);
        return NULL;
    }
    return mft_nn_residual(b, s, true);
}

static mft_module *resnet(uint64_t seed) {
    mft_module *l[9] = {mft_nn_conv2d(1, 16, K3, NULL, P1, NULL, 1, false, seed + 1),
                        mft_nn_batch_norm2d(16, 1e-5, 0.1),
                        mft_nn_relu(),
                        basic_block(16, 16, 1, seed + 10),
                        basic_block(16, 32, 2, seed + 20),
                        basic_block(32, 64, 2, seed + 30),
                        mft_nn_global_avg_pool2d(),
                        mft_nn_flatten(1, 3),
                        mft_nn_linear(64, 10, true, seed + 40)};
    return mft_nn_sequential(9, l);
}

/* ------------------------------------------------------------------ evaluation */
static int evaluate(mft_module *model, const mft_tensor *images, const mft_tensor *labels,
                    int64_t n, mft_format fmt, double *acc) {
    mft_module_set_training(model, false);
    bool prev = mft_set_grad_enabled(false);
    int64_t correct = 0, bs = 1000;
    int64_t *idx = malloc((size_t)bs * sizeof *idx);
    int rc = idx ? 0 : 1;
    for (int64_t s = 0; s < n && !rc; s += bs) {
        int64_t cnt = n - s < bs ? n - s : bs;
        for (int64_t i = 0; i < cnt; i++) idx[i] = s + i;
        mft_scope_begin();
        mft_tensor *x = mft_images_to_batch(images, idx, cnt, 1.0 / 255.0, MEAN, STD, fmt, MFT_F32);
        mft_tensor *pred = mft_argmax(mft_module_forward(model, x), 1, false);
        if (!pred) {
            rc = fail("evaluate");
        } else {
            const int64_t *p = mft_tensor_data(pred);
            const int64_t *y = (const int64_t *)mft_tensor_data(labels) + s;
            for (int64_t i = 0; i < cnt; i++) correct += p[i] == y[i];
        }
        mft_scope_end();
    }
    free(idx);
    mft_set_grad_enabled(prev);
    mft_module_set_training(model, true);
    *acc = n ? 100.0 * (double)correct / (double)n : 0.0;
    return rc;
}

/* ------------------------------------------------------------------ main */
int main(int argc, char **argv) {
    options o;
    int rc = parse(argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc; /* -1: --help */
    if (o.threads > 0) mft_set_num_threads(o.threads);
    const mft_format fmt = strcmp(o.format, "nhwc") == 0 ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;

    mft_tensor *tr_x = NULL, *tr_y = NULL, *te_x = NULL, *te_y = NULL;
    if (mft_mnist_load(o.data_dir, "train", &tr_x, &tr_y) != MFT_OK ||
        mft_mnist_load(o.data_dir, "t10k", &te_x, &te_y) != MFT_OK) {
        fail("loading Fashion-MNIST (apt-get install dataset-fashion-mnist)");
        mft_tensor_release(tr_x), mft_tensor_release(tr_y);
        return 1;
    }
    int64_t ntrain = mft_tensor_sizes(tr_x)[0], ntest = mft_tensor_sizes(te_x)[0];
    if (o.train_limit > 0 && o.train_limit < ntrain) ntrain = o.train_limit;
    if (o.test_limit > 0 && o.test_limit < ntest) ntest = o.test_limit;

    /* one module: built, moved to the format, listed, trained, freed */
    mft_module *model = resnet(o.seed);
    if (!model || mft_module_to_format(model, fmt) != MFT_OK) {
        rc = fail("building the model");
        goto out_model;
    }
    mft_tensor *params[MAX_PARAMS];
    int nparams = mft_module_parameters(model, params, NULL, MAX_PARAMS);
    if (nparams > MAX_PARAMS) {
        fprintf(stderr, "resnet: %d parameters, room for %d\n", nparams, MAX_PARAMS);
        rc = 1;
        goto out_model;
    }
    mft_optimizer *opt = mft_sgd_new(nparams, params, &(mft_sgd_opts){o.lr, 0.9, 0.0, 0.0, false});
    if (!opt) {
        rc = fail("creating the optimiser");
        goto out_model;
    }
    printf("resnet: %s, %d thread(s), %lld train / %lld test images, batch %d, sgd lr %g "
           "momentum 0.9, %lld parameters in %d tensors\n",
           o.format, mft_num_threads(), (long long)ntrain, (long long)ntest, o.batch, o.lr,
           (long long)mft_module_num_parameters(model), nparams);
    if (!o.quiet) {
        size_t need = mft_module_describe(model, NULL, 0);
        char *text = malloc(need + 1);
        if (text) {
            mft_module_describe(model, text, need + 1);
            printf("%s", text);
            free(text);
        }
    }
    fflush(stdout);

    int64_t *idx = malloc((size_t)ntrain * sizeof *idx);
    if (!idx) {
        rc = 1;
        goto out_opt;
    }
    for (int epoch = 1; epoch <= o.epochs && !rc; epoch++) {
        mft_shuffle_indices(idx, ntrain, o.seed * 1000003u + (uint64_t)epoch);
        const int64_t nsteps = (ntrain + o.batch - 1) / o.batch;
        double loss_sum = 0.0, t0 = now_s();
        for (int64_t s = 0; s < nsteps; s++) {
            int64_t cnt = ntrain - s * o.batch < o.batch ? ntrain - s * o.batch : o.batch;
            const int64_t *bi = idx + s * o.batch;
            mft_scope_begin();
            mft_tensor *x = mft_images_to_batch(tr_x, bi, cnt, 1.0 / 255.0, MEAN, STD, fmt, MFT_F32);
            mft_tensor *y = mft_gather_rows(tr_y, bi, cnt);
            mft_tape_begin();
            mft_tensor *logits = mft_module_forward(model, x);
            mft_tensor *loss = mft_cross_entropy(logits, y, NULL, -100, 0.0, MFT_REDUCTION_MEAN);
            mft_status st = loss ? mft_backward(loss, NULL) : mft_last_error();
            mft_tape_end();
            if (st == MFT_OK) st = mft_optimizer_step(opt);
            mft_optimizer_zero_grad(opt);
            if (st == MFT_OK) loss_sum += mft_tensor_get(loss, NULL);
            mft_scope_end();
            if (st != MFT_OK) {
                rc = fail("training step");
                break;
            }
        }
        if (rc) break;
        const double dt = now_s() - t0;
        double acc = 0.0;
        if (evaluate(model, te_x, te_y, ntest, fmt, &acc)) {
            rc = 1;
            break;
        }
        printf("epoch %d loss %.4f test_acc %.2f time %.3f steps %lld ms_per_step %.3f\n", epoch,
               loss_sum / (double)nsteps, acc, dt, (long long)nsteps, 1000.0 * dt / (double)nsteps);
        fflush(stdout);
    }
    if (!rc && o.epochs == 0) {
        double acc = 0.0;
        rc = evaluate(model, te_x, te_y, ntest, fmt, &acc);
        if (!rc) printf("test_acc %.2f (untrained)\n", acc);
    }
    free(idx);
out_opt:
    mft_optimizer_free(opt);
out_model:
    mft_module_free(model);
    mft_tensor_release(tr_x), mft_tensor_release(tr_y);
    mft_tensor_release(te_x), mft_tensor_release(te_y);
    return rc;
}
