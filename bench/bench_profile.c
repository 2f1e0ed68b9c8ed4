/* bench/bench_profile.c — what the profiler hooks cost (the promise: "the
 * profiler costs nothing measurable when off"). Every kernel run calls
 * mft__kernel_begin / mft__kernel_end (tensor/internal.h); this bench times
 * three workloads in three modes, side by side in one run (round-robin,
 * medians):
 *   bypass  the hooks return at their first instruction (a switch that only
 *           this bench sets): the closest thing to a build without hooks;
 *   off     the normal state: no profiler, no MFT_VERBOSE, no tape;
 *   on      mft_profile_begin() recording every kernel run and conversion.
 * Workloads: relu on 16 floats (the smallest op: per-call overhead shows up
 * most), an 8x8x8 NHWC 3x3 conv (a dispatched op), and one training step of
 * the Fashion-MNIST CNN (batch 64, NHWC, forward + backward + SGD).
 * Usage: bench_profile [--reps N] [--threads T] */
#include "bench_util.h"

#include <mft/mft.h>

extern bool mft__hooks_bypass; /* tensor/events.c; set here only */

typedef enum mode { MODE_BYPASS, MODE_OFF, MODE_ON, MODE_COUNT } mode;
static const char *const mode_names[MODE_COUNT] = {"bypass", "off", "on"};

static void set_mode(mode m) {
    mft__hooks_bypass = m == MODE_BYPASS;
    if (m == MODE_ON) {
        /* keep recording across samples; restart when the buffer is large */
        if (!mft_profile_active() || mft_profile_event_count() > 200000) mft_profile_begin();
    } else if (mft_profile_active()) {
        mft_profile_end();
        mft_profile_clear();
    }
}

typedef struct work {
    const char *name;
    int inner;
    int (*run)(struct work *w);
    mft_tensor *x, *w;
    mft_module *model;
    mft_optimizer *opt;
    mft_tensor *y;
} work;

typedef struct wcase {
    work *w;
    mode m;
} wcase;

static int run_relu(work *w) {
    for (int i = 0; i < w->inner; i++) {
        mft_tensor *r = mft_relu(w->x);
        if (!r) return 1;
        mft_tensor_release(r);
    }
    return 0;
}

static int run_conv(work *w) {
    const int64_t one[2] = {1, 1};
    for (int i = 0; i < w->inner; i++) {
        mft_tensor *r = mft_conv2d(w->x, w->w, NULL, one, one, one, 1);
        if (!r) return 1;
        mft_tensor_release(r);
    }
    return 0;
}

static int run_step(work *w) {
    mft_scope_begin();
    mft_tape_begin();
    mft_tensor *logits = mft_module_forward(w->model, w->x);
    mft_tensor *loss =
        logits ? mft_cross_entropy(logits, w->y, NULL, -100, 0.0, MFT_REDUCTION_MEAN) : NULL;
    mft_status st = loss ? mft_backward(loss, NULL) : MFT_ERR_INVALID;
    mft_tape_end();
    if (st == MFT_OK) st = mft_optimizer_step(w->opt);
    mft_optimizer_zero_grad(w->opt);
    mft_scope_end();
    return st != MFT_OK;
}

static int case_fn(void *ctx) {
    wcase *c = ctx;
    set_mode(c->m);
    return c->w->run(c->w);
}

static bool make_step(work *w) {
    /* the Fashion-MNIST CNN (seeds 1..4), channels_last like the example */
    w->model = mft_nn_fashion_cnn(&(mft_fashion_cnn_config){.format = MFT_CHANNELS_LAST});
    if (!w->model) return false;
    mft_tensor *ps[16];
    int np = mft_module_parameters(w->model, ps, NULL, 16);
    mft_sgd_opts o = {0};
    o.lr = 0.01;
    o.momentum = 0.9;
    w->opt = mft_sgd_new(np, ps, &o);
    const int64_t xs[4] = {64, 1, 28, 28}, ys[1] = {64};
    w->x = mft_rand(4, xs, MFT_F32, MFT_CHANNELS_LAST, 3);
    w->y = mft_zeros(1, ys, MFT_I64, MFT_CONTIGUOUS);
    return w->opt && w->x && w->y;
}

int main(int argc, char **argv) {
    int reps = 21, threads = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            reps = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            threads = atoi(argv[++i]);
        } else {
            fprintf(stderr, "usage: bench_profile [--reps N] [--threads T]\n");
            return 2;
        }
    }
    mft_set_num_threads(threads);
    mft_set_verbose(0);
    enum { NW = 3 };
    work works[NW] = {{.name = "relu 16 floats", .inner = 4000, .run = run_relu},
                      {.name = "conv2d NHWC 1x8x8x8 k8 3x3", .inner = 400, .run = run_conv},
                      {.name = "train step FMNIST CNN b64 NHWC", .inner = 1, .run = run_step}};
    const int64_t xs[4] = {1, 16, 1, 1}, cs[4] = {1, 8, 8, 8}, ws[4] = {8, 8, 3, 3};
    works[0].x = mft_rand(4, xs, MFT_F32, MFT_CONTIGUOUS, 1);
    works[1].x = mft_rand(4, cs, MFT_F32, MFT_CHANNELS_LAST, 1);
    works[1].w = mft_rand(4, ws, MFT_F32, MFT_CHANNELS_LAST, 2);
    if (!works[0].x || !works[1].x || !works[1].w || !make_step(&works[2])) {
        fprintf(stderr, "bench_profile: setup failed: %s\n", mft_last_error_message());
        return 1;
    }
    printf("# bench_profile: hook cost per call, %d threads, %d samples per case (median)\n",
           threads, reps);
    printf("%-32s %12s %12s %12s %10s %10s\n", "workload", "bypass us", "off us", "on us",
           "off/bypass", "on/off");
    int rc = 0;
    for (int k = 0; k < NW && !rc; k++) {
        wcase wc[MODE_COUNT];
        bench_case cases[MODE_COUNT];
        double *samples = malloc((size_t)(MODE_COUNT * reps) * sizeof *samples);
        if (!samples) return 1;
        for (int m = 0; m < MODE_COUNT; m++) {
            wc[m] = (wcase){&works[k], (mode)m};
            cases[m] = (bench_case){
                mode_names[m], mode_names[m], case_fn, &wc[m], 0, samples + m * reps, {0}};
        }
        bench_opts o = bench_default_opts();
        o.reps = reps;
        o.warmup = 3;
        o.pre = 0;
        o.shuffle = 1;
        rc = bench_run(cases, MODE_COUNT, &o);
        set_mode(MODE_OFF);
        if (rc) {
            fprintf(stderr, "bench_profile: %s failed: %s\n", works[k].name,
                    mft_last_error_message());
            free(samples);
            break;
        }
        double per[MODE_COUNT];
        for (int m = 0; m < MODE_COUNT; m++) per[m] = cases[m].stats.median * 1e6 / works[k].inner;
        printf("%-32s %12.3f %12.3f %12.3f %10.3f %10.3f\n", works[k].name, per[MODE_BYPASS],
               per[MODE_OFF], per[MODE_ON], per[MODE_OFF] / per[MODE_BYPASS],
               per[MODE_ON] / per[MODE_OFF]);
        free(samples);
    }
    mft__hooks_bypass = false;
    for (int k = 0; k < NW; k++) {
        mft_tensor_release(works[k].x);
        mft_tensor_release(works[k].w);
        mft_tensor_release(works[k].y);
        mft_optimizer_free(works[k].opt);
        mft_module_free(works[k].model);
    }
    return rc;
}
