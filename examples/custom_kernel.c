/* examples/custom_kernel.c — prototyping an NHWC kernel without editing the
 * library (docs/dispatch.md): a 2x2 / stride 2 average-pooling kernel for
 * (avg_pool2d, CHANNELS_LAST, F32) that takes only the calls it was written
 * for (an applicability test declines the others, which the built-in
 * kernels keep), splits its work over the library's threads with
 * mft_parallel_for, is checked against the built-in kernel on the same
 * arguments (mft_dispatch_call_builtin), proves under strict level ALL that
 * it ran without any conversion, and is unregistered.
 *
 *   custom_kernel           the walk-through (exit status 0 when it holds)
 *   custom_kernel --bench   also times the kernel alone with 1 and 2 threads
 *
 * Build (installed mft): cc custom_kernel.c $(pkg-config --cflags --libs mft)
 * In this tree: build/examples/custom_kernel */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, CLOCK_MONOTONIC under -std=c11 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <mft/mft.h>
#include <mft/parallel.h>

/* ------------------------------------------------------------ the kernel */
/* Which calls it takes: 2x2 windows, stride 2, no padding, floor mode, no
 * divisor override (count_include_pad then makes no difference). Asked
 * before anything is converted; sizes and params are final. */
static bool avg2x2_applies(const mft_kernel_args *a, void *ctx) {
    const mft_pool2d_params *p = a->params;
    (void)ctx;
    return p->kernel[0] == 2 && p->kernel[1] == 2 && p->stride[0] == 2 && p->stride[1] == 2 &&
           p->padding[0] == 0 && p->padding[1] == 0 && !p->ceil_mode &&
           p->divisor_override == 0;
}

/* One job: input and output rows of NHWC-packed F32 tensors (the dispatcher
 * guarantees the packing: the kernel is registered under CHANNELS_LAST). */
typedef struct avg2x2_job {
    const float *in;
    float *out;
    int64_t C, H, W, OH, OW;
} avg2x2_job;

/* Output rows [r0, r1) of the N*OH rows: each output pixel is the mean of
 * four input pixels, each a contiguous row of C channels. */
static void avg2x2_rows(void *ctx, int64_t r0, int64_t r1) {
    const avg2x2_job *j = ctx;
    const int64_t C = j->C;
    for (int64_t r = r0; r < r1; r++) {
        const int64_t n = r / j->OH, oh = r % j->OH;
        const float *top = j->in + ((n * j->H + 2 * oh) * j->W) * C;
        const float *bot = top + j->W * C;
        float *o = j->out + r * j->OW * C;
        for (int64_t ow = 0; ow < j->OW; ow++, o += C) {
            const float *a = top + 2 * ow * C, *b = bot + 2 * ow * C;
            for (int64_t c = 0; c < C; c++) o[c] = 0.25f * ((a[c] + a[c + C]) + (b[c] + b[c + C]));
        }
    }
}

static void avg2x2_nhwc(const mft_kernel_args *a) {
    const int64_t *xs = mft_tensor_sizes(a->inputs[0]), *ys = mft_tensor_sizes(a->outputs[0]);
    avg2x2_job j = {mft_tensor_data(a->inputs[0]), mft_tensor_data(a->outputs[0]),
                    xs[1], xs[2], xs[3], ys[2], ys[3]};
    /* rows are independent; a grain of 4 rows keeps tiny images on one thread */
    mft_parallel_for(0, xs[0] * j.OH, 4, avg2x2_rows, &j);
}

/* ------------------------------------------------------------ reporting */
static void report(const char *what) {
    const mft_dispatch_info *d = mft_dispatch_last();
    printf("%-24s kernel %s%s, ran in %s, %d conversions", what, d->kernel,
           d->user ? " [user]" : "", mft_format_name(d->kernel_format), d->conversions);
    if (d->declines) printf(", declined by %s", d->declined);
    printf("\n");
}

static double max_abs_diff(const mft_tensor *a, const mft_tensor *b) {
    mft_tensor *d = mft_sub(a, b), *ad = mft_abs(d), *mx = mft_amax(ad, 0, NULL, false);
    double err = mx ? mft_tensor_get(mx, NULL) : NAN;
    mft_tensor_release(d);
    mft_tensor_release(ad);
    mft_tensor_release(mx);
    return err;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* Median time of one call of the kernel itself (the arguments the
 * dispatcher would give it, the output allocated and touched once before)
 * with `threads` threads, over reps runs after one warm-up. */
static double bench_ms(const mft_kernel_args *args, int threads, int reps) {
    double t[64];
    mft_set_num_threads(threads);
    avg2x2_nhwc(args);
    for (int i = 0; i < reps; i++) {
        double t0 = now_ms();
        avg2x2_nhwc(args);
        t[i] = now_ms() - t0;
    }
    for (int i = 1; i < reps; i++) /* insertion sort, reps is small */
        for (int k = i; k > 0 && t[k - 1] > t[k]; k--) {
            double s = t[k];
            t[k] = t[k - 1];
            t[k - 1] = s;
        }
    return t[reps / 2];
}

int main(int argc, char **argv) {
    const bool bench = argc > 1 && !strcmp(argv[1], "--bench");
    const int64_t sizes[4] = {2, 16, 8, 8}, k2[2] = {2, 2}, k3[2] = {3, 3}, s1[2] = {1, 1};
    mft_tensor *x = mft_randn(4, sizes, MFT_F32, MFT_CHANNELS_LAST, 7);
    mft_tensor *ref = mft_avg_pool2d(x, k2, NULL, NULL, false, true, 0);
    report("built-in:");

    const mft_kernel_reg reg = {"avg_pool2d", MFT_CHANNELS_LAST, MFT_F32, "example.avg2x2.nhwc",
                                avg2x2_nhwc, avg2x2_applies, NULL};
    if (mft_dispatch_register_ex(&reg) != MFT_OK) {
        fprintf(stderr, "register: %s\n", mft_last_error_message());
        return 1;
    }
    /* strict level ALL: no fallback and no conversion may happen, so a
     * result proves which kernel ran on which operands */
    mft_dispatch_set_strict_level(MFT_STRICT_ALL);
    mft_tensor *mine = mft_avg_pool2d(x, k2, NULL, NULL, false, true, 0);
    report("2x2 / stride 2:");
    const bool user_ran = mft_dispatch_last()->user;
    mft_tensor *other = mft_avg_pool2d(x, k3, s1, NULL, false, true, 0);
    report("3x3 / stride 1:");
    const bool declined = !mft_dispatch_last()->user && mft_dispatch_last()->declines == 1;
    mft_dispatch_set_strict_level(MFT_STRICT_OFF);
    if (!ref || !mine || !other) {
        fprintf(stderr, "%s\n", mft_last_error_message());
        return 1;
    }

    /* the built-in kernel on the very arguments the user kernel got */
    const mft_pool2d_params p = {{2, 2}, {2, 2}, {0, 0}, {1, 1}, false, true, 0};
    mft_tensor *check = mft_empty(4, mft_tensor_sizes(mine), MFT_F32, MFT_CHANNELS_LAST);
    const mft_tensor *ins[1] = {x};
    mft_tensor *outs[1] = {check};
    const mft_kernel_args args = {1, 1, ins, outs, &p};
    if (mft_dispatch_call_builtin("avg_pool2d", MFT_CHANNELS_LAST, MFT_F32, NULL, &args) !=
        MFT_OK) {
        fprintf(stderr, "call_builtin: %s\n", mft_last_error_message());
        return 1;
    }
    const double err = max_abs_diff(mine, check), err_op = max_abs_diff(mine, ref);
    printf("max |user - built-in kernel| = %g, |user - op before registering| = %g, result %s\n",
           err, err_op, mft_tensor_is_contiguous(mine, MFT_CHANNELS_LAST) ? "NHWC" : "not NHWC");

    char stats[1024];
    mft_dispatch_stats(stats, sizeof stats);
    printf("\nkernels that ran on this thread:\n%s", stats);

    int status = err < 1e-5 && err_op < 1e-5 && user_ran && declined ? 0 : 1;
    if (bench) {
        const int64_t big[4] = {16, 64, 56, 56}, half[4] = {16, 64, 28, 28};
        mft_tensor *xb = mft_randn(4, big, MFT_F32, MFT_CHANNELS_LAST, 9);
        mft_tensor *yb = mft_zeros(4, half, MFT_F32, MFT_CHANNELS_LAST);
        const mft_tensor *bins[1] = {xb};
        mft_tensor *bouts[1] = {yb};
        const mft_kernel_args bargs = {1, 1, bins, bouts, &p};
        const int prev = mft_num_threads();
        const double t1 = bench_ms(&bargs, 1, 31), t2 = bench_ms(&bargs, 2, 31);
        const int got2 = mft_num_threads();
        mft_set_num_threads(prev);
        printf("\nbench: the user kernel on [16,64,56,56] f32 NHWC (median of 31):\n"
               "  1 thread  %.3f ms\n  %d threads %.3f ms (%.2fx)\n", t1, got2, t2, t1 / t2);
        mft_tensor_release(xb);
        mft_tensor_release(yb);
    }
    mft_dispatch_unregister("avg_pool2d", MFT_CHANNELS_LAST, MFT_F32);
    mft_tensor *all[] = {x, ref, mine, other, check};
    for (int i = 0; i < 5; i++) mft_tensor_release(all[i]);
    return status;
}
