/* examples/fashion_mnist.c — the main job: train a small CNN on Fashion-MNIST
 * in C, channels_last by default, with the autograd tape, the nn toolkit and
 * no Python. The same model, data and optimiser as the PyTorch anchor
 * (examples/fashion_mnist_torch.py), so times and accuracies compare directly.
 *
 *   build/examples/fashion_mnist                      # 1 epoch, NHWC
 *   build/examples/fashion_mnist --epochs 2 --format nchw --threads 2
 *   build/examples/fashion_mnist --batchnorm --optimizer adam --save ck.mft
 *   build/examples/fashion_mnist --load ck.mft --epochs 0   # evaluate only
 *   build/examples/fashion_mnist --epochs 1 --save ck.mft   # stop after epoch 1 ...
 *   build/examples/fashion_mnist --load ck.mft --start-epoch 2 --epochs 1   # ... and resume
 *   build/examples/fashion_mnist --epochs 6 --lr-step 2 --lr-gamma 0.5
 *   build/examples/fashion_mnist --steps 1 --dot tape.dot   # dot -Tpng tape.dot > tape.png
 *   build/examples/fashion_mnist --export model.safetensors  # weights for PyTorch
 *   build/examples/fashion_mnist --import torch.safetensors --format nchw16c --epochs 0
 *
 * Model (mft_nn_fashion_cnn, mft/nn.h): conv 1->32 3x3 p1, relu, maxpool 2,
 * conv 32->64 3x3 p1, relu, maxpool 2, flatten, linear 3136->128, relu,
 * linear 128->10 (--batchnorm adds batch_norm after each conv); SGD momentum
 * 0.9, lr 0.01, batch 64.
 * Checkpoints (--save / --load) hold the model and the optimiser state in one
 * file (mft_module_save / mft_module_load, mft/state.h); resuming with
 * --start-epoch at the next epoch reproduces an uninterrupted run exactly
 * (same shuffles, learning rate and optimiser state).
 * --export / --import move the weights to and from PyTorch as a safetensors
 * state_dict under PyTorch's names (conv1.weight ... fc2.bias;
 * mft_module_save_safetensors / mft_module_load_safetensors, mft/state.h):
 * examples/fashion_mnist_torch.py --load evaluates an exported file, and its
 * --train --save writes one to import (docs/interop.md).
 * Prints one line per epoch (a progress bar when stderr is a terminal),
 * writes a TSV of per-epoch metrics, and ends with which kernels ran and how
 * many format conversions a training step needed, per cause (mft/profile.h).
 * --dot FILE writes the autograd tape of the first training step (forward
 * and backward, with kernels, layouts and conversions) as Graphviz DOT.
 * --format nchw16c: the conv weights are blocked (conv1 Ohwi16o, conv2
 * OIhw16i16o) and the 1-channel batch is fed as plain NCHW: conv1 reads it
 * in place and gives nChw16c (16 lanes per pixel made once, by the conv,
 * instead of a converted input with 15 pad lanes per pixel read). */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <mft/mft.h>
#include <mft/state.h>

/* The dataset: Debian's dataset-fashion-mnist, IDX files read by mft_mnist_load. */
#define FMNIST_DIR "/usr/share/datasets/fashion-mnist"
#define FMNIST_IMAGE_SIZE 28     /* images are 28 x 28 grey pixels */
#define FMNIST_CLASSES 10        /* labels 0..9 */
#define FMNIST_TRAIN_IMAGES 60000
#define FMNIST_TEST_IMAGES 10000
/* Per-pixel normalisation (x / 255 - MEAN) / STD: the training set's mean and
 * standard deviation, as examples/fashion_mnist_torch.py uses. */
#define FMNIST_MEAN 0.2860
#define FMNIST_STD 0.3530

#define MAX_PARAMS 64   /* parameters of the model, at most */
#define EVAL_BATCH 1000 /* images per evaluation forward */

typedef struct options {
    const char *data_dir, *format, *optimizer, *save, *load, *metrics, *dot, *export_to, *import;
    int epochs, start_epoch, threads, batch;
    int64_t limit, test_limit, steps;
    double lr, lr_gamma;
    int64_t lr_step;
    bool batchnorm, quiet, profile, no_fuse;
    uint64_t seed;
} options;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int fail(const char *what) {
    fprintf(stderr, "fashion_mnist: %s: %s (%s)\n", what, mft_last_error_message(),
            mft_status_str(mft_last_error()));
    return 1;
}

static void usage(FILE *to) {
    fprintf(to,
            "usage: fashion_mnist [--format nhwc|nchw|nchw16c|nchw8c] [--epochs N] [--threads T] [--batch B]\n"
            "                     [--batchnorm] [--optimizer sgd|adam] [--lr LR] [--seed S]\n"
            "                     [--lr-step EPOCHS [--lr-gamma G]]   (StepLR schedule)\n"
            "                     [--save FILE] [--load FILE [--start-epoch E]]\n"
            "                     [--export FILE.safetensors] [--import FILE.safetensors]\n"
            "                     [--metrics FILE.tsv]\n"
            "                     [--data DIR] [--limit N] [--test-limit N] [--steps N] [--quiet]\n"
            "                     [--dot FILE.dot] [--profile] [--no-fuse] [--help]\n"
            "  --steps N      at most N training steps per epoch\n"
            "  --save FILE    after training, write the model, the optimiser state and\n"
            "                 the learning rate to FILE (one checkpoint, mft_module_save)\n"
            "  --load FILE    start from FILE's model (and, when training, its optimiser\n"
            "                 state and learning rate)\n"
            "  --start-epoch E  number the first epoch E (default 1): the epoch after the\n"
            "                 checkpoint's, so shuffles and the schedule continue exactly\n"
            "  --export FILE  after training, write the model's weights as a safetensors\n"
            "                 state_dict (conv1.weight ... fc2.bias, NCHW) that PyTorch\n"
            "                 loads: examples/fashion_mnist_torch.py --load FILE\n"
            "  --import FILE  start from a safetensors state_dict's weights (PyTorch's:\n"
            "                 fashion_mnist_torch.py --train --save FILE), in any --format;\n"
            "                 with --epochs 0 only evaluate. Weights only (training\n"
            "                 starts a fresh optimiser); not with --load\n"
            "  --profile      time every kernel of the first epoch's training steps\n"
            "                 after the first (op, kernel, formats, calls, ms, MB)\n"
            "  --no-fuse      run relu and max_pool2d as two ops (default: one fused\n"
            "                 relu_max_pool2d, same values and gradients)\n"
            "  --limit N      use the first N training images (--test-limit: test images)\n"
            "  --dot FILE     write the autograd tape of the first training step (forward +\n"
            "                 backward: ops, kernels, layouts, conversions in red) as Graphviz\n"
            "                 DOT; render with `dot -Tpng FILE -o tape.png`. Quick: --steps 1\n");
}

static int parse(int argc, char **argv, options *o) {
    *o = (options){FMNIST_DIR, "nhwc", "sgd", NULL, NULL, "fashion_mnist_metrics.tsv", NULL,
                   NULL, NULL, 1, 1, 0, 64, 0, 0, 0, -1.0, 0.1, 0, false, false, false, false, 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define OPT(name) (strcmp(a, name) == 0 && v && (i++, 1))
        if (OPT("--format")) o->format = v;
        else if (OPT("--epochs")) o->epochs = atoi(v);
        else if (OPT("--start-epoch")) o->start_epoch = atoi(v);
        else if (OPT("--threads")) o->threads = atoi(v);
        else if (OPT("--batch")) o->batch = atoi(v);
        else if (OPT("--optimizer")) o->optimizer = v;
        else if (OPT("--lr")) o->lr = atof(v);
        else if (OPT("--lr-step")) o->lr_step = atoll(v);
        else if (OPT("--lr-gamma")) o->lr_gamma = atof(v);
        else if (OPT("--seed")) o->seed = strtoull(v, NULL, 10);
        else if (OPT("--save")) o->save = v;
        else if (OPT("--load")) o->load = v;
        else if (OPT("--metrics")) o->metrics = v;
        else if (OPT("--export")) o->export_to = v;
        else if (OPT("--import")) o->import = v;
        else if (OPT("--data")) o->data_dir = v;
        else if (OPT("--limit")) o->limit = atoll(v);
        else if (OPT("--test-limit")) o->test_limit = atoll(v);
        else if (OPT("--steps")) o->steps = atoll(v);
        else if (OPT("--dot")) o->dot = v;
        else if (strcmp(a, "--batchnorm") == 0) o->batchnorm = true;
        else if (strcmp(a, "--quiet") == 0) o->quiet = true;
        else if (strcmp(a, "--profile") == 0) o->profile = true;
        else if (strcmp(a, "--no-fuse") == 0) o->no_fuse = true;
        else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return -1;
        } else {
            usage(stderr);
            return 2;
        }
#undef OPT
    }
    if ((strcmp(o->format, "nhwc") && strcmp(o->format, "nchw") && strcmp(o->format, "nchw16c") &&
         strcmp(o->format, "nchw8c")) ||
        (strcmp(o->optimizer, "sgd") && strcmp(o->optimizer, "adam")) || o->epochs < 0 ||
        o->start_epoch < 1 ||
        o->batch <= 0 || o->threads < 0 || o->lr_step < 0 || (o->load && o->import)) {
        usage(stderr);
        return 2;
    }
    if (o->lr < 0) o->lr = strcmp(o->optimizer, "sgd") == 0 ? 0.01 : 1e-3;
    return 0;
}

/* ------------------------------------------------------------------ dataset */
/* Is (images, labels) one split of Fashion-MNIST: n images of
 * FMNIST_IMAGE_SIZE^2 pixels (U8, N x H x W) and n labels (I64) in
 * 0..FMNIST_CLASSES-1? */
static bool split_ok(const mft_tensor *images, const mft_tensor *labels, int64_t n) {
    const int64_t *s = mft_tensor_sizes(images);
    if (mft_tensor_ndim(images) != 3 || s[0] != n || s[1] != FMNIST_IMAGE_SIZE ||
        s[2] != FMNIST_IMAGE_SIZE || mft_tensor_ndim(labels) != 1 ||
        mft_tensor_sizes(labels)[0] != n || mft_tensor_dtype(labels) != MFT_I64)
        return false;
    const int64_t *y = mft_tensor_data(labels);
    for (int64_t i = 0; i < n; i++)
        if (y[i] < 0 || y[i] >= FMNIST_CLASSES) return false;
    return true;
}

/* ------------------------------------------------------------------ progress */
static void progress(int64_t done, int64_t total, double t0, double loss) {
    double el = now_s() - t0, rate = el > 0 ? (double)done / el : 0.0;
    double eta = rate > 0 ? (double)(total - done) / rate : 0.0;
    int width = 30, fill = total ? (int)((double)width * (double)done / (double)total) : 0;
    char bar[64];
    for (int i = 0; i < width; i++) bar[i] = i < fill ? '=' : (i == fill ? '>' : ' ');
    bar[width] = 0;
    fprintf(stderr, "\r  [%s] %6lld/%lld  %7.0f img/s  ETA %4.0fs  loss %.4f ", bar,
            (long long)done, (long long)total, rate, eta, loss);
    fflush(stderr);
}

/* ------------------------------------------------------------------ evaluation */
static int evaluate(mft_module *model, const mft_tensor *images, const mft_tensor *labels,
                    int64_t n, mft_format fmt, double *acc) {
    mft_module_set_training(model, false);
    bool prev = mft_set_grad_enabled(false);
    int64_t correct = 0;
    int64_t *idx = malloc((size_t)EVAL_BATCH * sizeof *idx);
    int rc = 0;
    for (int64_t s = 0; s < n && !rc; s += EVAL_BATCH) {
        int64_t cnt = n - s < EVAL_BATCH ? n - s : EVAL_BATCH;
        for (int64_t i = 0; i < cnt; i++) idx[i] = s + i;
        mft_scope_begin();
        mft_tensor *x = mft_images_to_batch(images, idx, cnt, 1.0 / 255.0, FMNIST_MEAN,
                                            FMNIST_STD, fmt, MFT_F32);
        mft_tensor *y = mft_gather_rows(labels, idx, cnt);
        mft_tensor *hits = mft_accuracy_count(mft_module_forward(model, x), y);
        if (!hits)
            rc = fail("evaluate");
        else
            correct += (int64_t)mft_tensor_get(hits, NULL);
        mft_scope_end();
    }
    free(idx);
    mft_set_grad_enabled(prev);
    mft_module_set_training(model, true);
    *acc = n ? 100.0 * (double)correct / (double)n : 0.0;
    return rc;
}

/* ------------------------------------------------------------------ reports */
/* The open tape (first training step) as Graphviz DOT into path. */
static mft_status write_dot(const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "fashion_mnist: cannot write %s\n", path);
        return MFT_ERR_IO;
    }
    mft_status st = mft_tape_to_dot(f);
    if (fclose(f) != 0 && st == MFT_OK) st = MFT_ERR_IO;
    if (st == MFT_OK)
        printf("tape of the first training step (%lld ops) written to %s\n",
               (long long)mft_tape_size(), path);
    return st;
}

static void counts_add(mft_conversion_counts *acc, mft_conversion_counts c) {
    for (int k = 0; k < MFT_CAUSE_COUNT; k++) {
        acc->count[k] += c.count[k];
        acc->bytes[k] += c.bytes[k];
    }
    acc->hidden += c.hidden;
    acc->total += c.total;
}

/* A report of the library's that prints into a caller's buffer (size_t
 * fn(char *buf, size_t len), returning the length needed): measure, fill,
 * print under a title. */
static void print_report(const char *title, size_t (*fn)(char *, size_t)) {
    size_t need = fn(NULL, 0);
    char *buf = malloc(need + 1);
    if (!buf) return;
    fn(buf, need + 1);
    printf("\n%s:\n%s", title, buf);
    free(buf);
}

/* Format conversions per training step (forward + backward + update), per
 * cause (Note [Conversions and their causes] in mft/profile.h). */
static void print_conversions(const mft_conversion_counts *c, int64_t steps) {
    double n = (double)steps, bytes = 0.0;
    printf("format conversions per training step: %.2f", (double)c->total / n);
    for (int k = 0; k < MFT_CAUSE_COUNT; k++) {
        printf("%s%s %.2f", k ? ", " : " (", mft_conversion_cause_name((mft_conversion_cause)k),
               (double)c->count[k] / n);
        bytes += (double)c->bytes[k];
    }
    printf("), %.2f MB copied; hidden (fallback + gradient + operand): %.2f\n",
           bytes / n * 1e-6, (double)c->hidden / n);
}

/* ------------------------------------------------------------------ import */
/* Loads a safetensors state_dict into model (all or nothing: a refused file
 * leaves the model as built) and prints what was loaded, name and sizes. */
static int import_weights(const char *path, mft_module *model) {
    int nloaded = 0;
    if (mft_module_load_safetensors(path, model, 0, &nloaded) != MFT_OK) {
        fprintf(stderr, "fashion_mnist: importing %s failed, nothing was loaded: %s (%s)\n",
                path, mft_last_error_message(), mft_status_str(mft_last_error()));
        return 1;
    }
    mft_tensor *t[MAX_PARAMS];
    const char *names[MAX_PARAMS];
    const int np = mft_module_parameters(model, t, names, MAX_PARAMS);
    const int nb = mft_module_buffers(model, t + np, names + np, MAX_PARAMS - np);
    printf("imported %d tensors from %s:", nloaded, path);
    for (int i = 0; i < np + nb && i < MAX_PARAMS; i++) {
        char dims[64] = "";
        size_t k = 0;
        for (int d = 0; d < mft_tensor_ndim(t[i]) && k < sizeof dims; d++)
            k += (size_t)snprintf(dims + k, sizeof dims - k, "%s%lld", d ? "x" : "",
                                  (long long)mft_tensor_sizes(t[i])[d]);
        printf(" %s[%s]", names[i], dims);
    }
    printf("%s\n", nloaded < np + nb ? " (num_batches_tracked absent: set to 0)" : "");
    return 0;
}

/* ------------------------------------------------------------------ main */
int main(int argc, char **argv) {
    options o;
    int rc = parse(argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc; /* -1: --help */
    if (o.threads > 0) mft_set_num_threads(o.threads);
    const mft_format fmt = !strcmp(o.format, "nhwc")      ? MFT_CHANNELS_LAST
                           : !strcmp(o.format, "nchw16c") ? MFT_NCHW16C
                           : !strcmp(o.format, "nchw8c")  ? MFT_NCHW8C
                                                          : MFT_CONTIGUOUS;
    const bool bar = !o.quiet && isatty(STDERR_FILENO);
    /* the batch's format: nChw16c models take a plain NCHW batch (their
     * first conv's blocked weight makes the activations nChw16c) */
    const mft_format batch_fmt = fmt == MFT_NCHW16C ? MFT_CONTIGUOUS : fmt;

    mft_tensor *tr_x = NULL, *tr_y = NULL, *te_x = NULL, *te_y = NULL;
    if (mft_mnist_load(o.data_dir, "train", &tr_x, &tr_y) != MFT_OK ||
        mft_mnist_load(o.data_dir, "t10k", &te_x, &te_y) != MFT_OK) {
        fail("loading Fashion-MNIST (apt-get install dataset-fashion-mnist)");
        mft_tensor_release(tr_x), mft_tensor_release(tr_y);
        return 1;
    }
    if (!split_ok(tr_x, tr_y, FMNIST_TRAIN_IMAGES) || !split_ok(te_x, te_y, FMNIST_TEST_IMAGES)) {
        fprintf(stderr,
                "fashion_mnist: %s does not hold Fashion-MNIST (%d + %d images of %dx%d, "
                "labels 0..%d)\n",
                o.data_dir, FMNIST_TRAIN_IMAGES, FMNIST_TEST_IMAGES, FMNIST_IMAGE_SIZE,
                FMNIST_IMAGE_SIZE, FMNIST_CLASSES - 1);
        rc = 1;
        goto out_data;
    }
    int64_t ntrain = FMNIST_TRAIN_IMAGES, ntest = FMNIST_TEST_IMAGES;
    if (o.limit > 0 && o.limit < ntrain) ntrain = o.limit;
    if (o.test_limit > 0 && o.test_limit < ntest) ntest = o.test_limit;

    mft_module *model = mft_nn_fashion_cnn(&(mft_fashion_cnn_config){
        .image_size = FMNIST_IMAGE_SIZE, .batch_norm = o.batchnorm, .format = fmt, .seed = o.seed});
    if (!model) {
        rc = fail("building the model");
        goto out_data;
    }
    mft_module_set_fusion(model, !o.no_fuse);
    mft_tensor *params[MAX_PARAMS];
    int nparams = mft_module_parameters(model, params, NULL, MAX_PARAMS);
    mft_optimizer *opt =
        strcmp(o.optimizer, "sgd") == 0
            ? mft_sgd_new(nparams, params, &(mft_sgd_opts){o.lr, 0.9, 0.0, 0.0, false})
            : mft_adam_new(nparams, params, &(mft_adam_opts){o.lr, 0.9, 0.999, 1e-8, 0.0});
    if (!opt) {
        rc = fail("creating the optimiser");
        goto out_model;
    }
    if (o.load) { /* evaluation only needs the model */
        if (mft_module_load(o.load, model, o.epochs > 0 ? opt : NULL) != MFT_OK) {
            rc = fail("loading the checkpoint");
            goto out_opt;
        }
        printf("loaded the model%s from %s\n", o.epochs > 0 ? " and the optimiser" : "", o.load);
    }
    if (o.import && import_weights(o.import, model) != 0) {
        rc = 1;
        goto out_opt;
    }
    printf("fashion_mnist: %s, %d thread(s), %lld train / %lld test images, batch %d, %s lr %g%s, "
           "%lld parameters\n",
           o.format, mft_num_threads(), (long long)ntrain, (long long)ntest, o.batch,
           o.optimizer, mft_optimizer_lr(opt), o.batchnorm ? ", batchnorm" : "",
           (long long)mft_module_num_parameters(model));
    FILE *tsv = o.epochs > 0 && o.metrics ? fopen(o.metrics, "w") : NULL;
    if (tsv) fprintf(tsv, "epoch\ttrain_loss\ttest_acc\tepoch_seconds\timages_per_second\tms_per_step\n");

    int64_t *idx = malloc((size_t)ntrain * sizeof *idx);
    int64_t total_steps = 0;
    mft_conversion_counts train_conv = {{0}, {0}, 0, 0}; /* training steps only */
    mft_dispatch_stats_reset();
    for (int epoch = o.start_epoch; epoch < o.start_epoch + o.epochs && !rc; epoch++) {
        if (o.lr_step > 0) mft_optimizer_set_lr(opt, mft_step_lr(o.lr, o.lr_step, o.lr_gamma, epoch - 1));
        mft_shuffle_indices(idx, ntrain, o.seed * 1000003u + (uint64_t)epoch);
        int64_t nsteps = (ntrain + o.batch - 1) / o.batch;
        if (o.steps > 0 && o.steps < nsteps) nsteps = o.steps;
        int64_t nimg = 0;
        double loss_sum = 0.0, t0 = now_s(), last_bar = 0.0;
        mft_conversion_counts_reset();
        for (int64_t s = 0; s < nsteps; s++) {
            int64_t cnt = ntrain - s * o.batch < o.batch ? ntrain - s * o.batch : o.batch;
            const int64_t *bi = idx + s * o.batch;
            mft_scope_begin();
            mft_tensor *x = mft_images_to_batch(tr_x, bi, cnt, 1.0 / 255.0, FMNIST_MEAN,
                                                FMNIST_STD, batch_fmt, MFT_F32);
            mft_tensor *y = mft_gather_rows(tr_y, bi, cnt);
            mft_tape_begin();
            mft_tensor *logits = MFT_AT(mft_module_forward(model, x));
            mft_tensor *loss =
                MFT_AT(mft_cross_entropy(logits, y, NULL, -100, 0.0, MFT_REDUCTION_MEAN));
            mft_status bst = loss ? MFT_AT(mft_backward(loss, NULL)) : mft_last_error();
            if (bst == MFT_OK && o.dot && total_steps == 0) bst = write_dot(o.dot);
            mft_tape_end();
            if (bst == MFT_OK) bst = mft_optimizer_step(opt);
            mft_optimizer_zero_grad(opt);
            if (bst == MFT_OK) loss_sum += mft_tensor_get(loss, NULL);
            mft_scope_end();
            if (bst != MFT_OK) {
                rc = fail("training step");
                break;
            }
            nimg += cnt;
            total_steps++;
            /* The first step warms caches and the block pool; profile the rest. */
            if (o.profile && total_steps == 1) mft_profile_begin();
            if (bar && now_s() - last_bar > 0.1) {
                last_bar = now_s();
                progress(nimg, nsteps * o.batch < ntrain ? nsteps * o.batch : ntrain, t0,
                         loss_sum / (double)(s + 1));
            }
        }
        if (rc) break;
        double dt = now_s() - t0;
        if (bar) fprintf(stderr, "\r%*s\r", 110, "");
        counts_add(&train_conv, mft_conversion_counts_get());
        bool profiled = o.profile && mft_profile_active();
        if (profiled) mft_profile_end(); /* training steps of the first epoch only */
        double acc = 0.0;
        if (evaluate(model, te_x, te_y, ntest, batch_fmt, &acc)) {
            rc = 1;
            break;
        }
        double ms = 1000.0 * dt / (double)nsteps;
        printf("epoch %d loss %.4f test_acc %.2f time %.3f steps %lld ms_per_step %.3f img/s %.0f\n",
               epoch, loss_sum / (double)nsteps, acc, dt, (long long)nsteps, ms,
               (double)nimg / dt);
        fflush(stdout);
        if (tsv)
            fprintf(tsv, "%d\t%.6f\t%.4f\t%.4f\t%.1f\t%.4f\n", epoch, loss_sum / (double)nsteps,
                    acc, dt, (double)nimg / dt, ms);
    }
    if (!rc && o.epochs == 0) {
        double acc = 0.0;
        rc = evaluate(model, te_x, te_y, ntest, batch_fmt, &acc);
        if (!rc) printf("test_acc %.2f\n", acc);
    }
    if (tsv) {
        fclose(tsv);
        printf("metrics written to %s\n", o.metrics);
    }
    if (!rc && o.profile && mft_profile_event_count() > 0)
        print_report("profile of the first epoch's training steps after the first",
                     mft_profile_table);
    if (!rc && total_steps > 0) {
        print_report("kernels that ran (training and evaluation, this thread)", mft_dispatch_stats);
        print_conversions(&train_conv, total_steps);
    }
    if (!rc && o.export_to) {
        if (mft_module_save_safetensors(o.export_to, model, 0) != MFT_OK)
            rc = fail("exporting the weights");
        else
            printf("exported %d parameters and %d buffers (%lld values, NCHW) to %s\n",
                   mft_module_parameters(model, NULL, NULL, 0),
                   mft_module_buffers(model, NULL, NULL, 0),
                   (long long)mft_module_num_parameters(model), o.export_to);
    }
    if (!rc && o.save) {
        if (mft_module_save(o.save, model, opt) != MFT_OK)
            rc = fail("saving the checkpoint");
        else
            printf("saved the model and the optimiser to %s\n", o.save);
    }
    free(idx);
out_opt:
    mft_optimizer_free(opt);
out_model:
    mft_module_free(model);
out_data:
    mft_tensor_release(tr_x), mft_tensor_release(tr_y);
    mft_tensor_release(te_x), mft_tensor_release(te_y);
    return rc;
}
