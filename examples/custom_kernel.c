/* examples/custom_kernel.c — prototyping an NHWC kernel without editing the
 * library: register a user kernel for (avg_pool2d, CHANNELS_LAST, F32), run
 * the op on a channels_last tensor, see the dispatcher pick it (and report
 * it), compare it with the built-in kernel, then unregister it.
 *
 * Build (installed mft): cc custom_kernel.c $(pkg-config --cflags --libs mft)
 * In this tree: build/examples/custom_kernel */
#include <math.h>
#include <stdio.h>
#include <mft/mft.h>

/* 2x2 average pooling, stride 2, no padding, for NHWC-packed F32 input:
 * for each output pixel, average four contiguous channel rows. The
 * dispatcher guarantees packed channels_last input and output. */
static void my_avg2x2_nhwc(const mft_kernel_args *a) {
    const mft_pool2d_params *p = a->params;
    const mft_tensor *x = a->inputs[0];
    mft_tensor *y = a->outputs[0];
    const int64_t *xs = mft_tensor_sizes(x), *ys = mft_tensor_sizes(y);
    const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], OH = ys[2], OW = ys[3];
    const float *in = mft_tensor_data(x);
    float *out = mft_tensor_data(y);
    (void)H;
    for (int64_t n = 0; n < N; n++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                float *o = out + ((n * OH + oh) * OW + ow) * C;
                for (int64_t c = 0; c < C; c++) o[c] = 0.0f;
                for (int64_t kh = 0; kh < p->kernel[0]; kh++)
                    for (int64_t kw = 0; kw < p->kernel[1]; kw++) {
                        const float *i = in + ((n * H + oh * p->stride[0] + kh) * W +
                                               ow * p->stride[1] + kw) * C;
                        for (int64_t c = 0; c < C; c++) o[c] += i[c];
                    }
                const float inv = 1.0f / (float)(p->kernel[0] * p->kernel[1]);
                for (int64_t c = 0; c < C; c++) o[c] *= inv;
            }
}

static void report(const char *what) {
    const mft_dispatch_info *d = mft_dispatch_last();
    printf("%-22s op %s, kernel %s%s, format %s (kernel ran in %s), %s, %d conversions\n", what,
           d->op, d->kernel, d->user ? " [user]" : "", mft_format_name(d->format),
           mft_format_name(d->kernel_format), mft_dtype_name(d->dtype), d->conversions);
}

int main(void) {
    const int64_t sizes[4] = {2, 16, 8, 8}, k[2] = {2, 2}, pad[2] = {0, 0};
    mft_tensor *x = mft_randn(4, sizes, MFT_F32, MFT_CHANNELS_LAST, 7);
    mft_tensor *ref = mft_avg_pool2d(x, k, NULL, pad, false, true, 0);
    report("built-in:");

    if (mft_dispatch_register("avg_pool2d", MFT_CHANNELS_LAST, MFT_F32, "example.avg2x2.nhwc",
                              my_avg2x2_nhwc) != MFT_OK) {
        fprintf(stderr, "register: %s\n", mft_last_error_message());
        return 1;
    }
    mft_dispatch_set_strict(true); /* prove our kernel ran: no fallback allowed */
    mft_tensor *mine = mft_avg_pool2d(x, k, NULL, pad, false, true, 0);
    report("with the user kernel:");
    mft_dispatch_set_strict(false);
    if (!ref || !mine) {
        fprintf(stderr, "%s\n", mft_last_error_message());
        return 1;
    }
    mft_tensor *diff = mft_sub(mine, ref), *ad = mft_abs(diff), *mx = mft_amax(ad, 0, NULL, false);
    double err = mx ? mft_tensor_get(mx, NULL) : NAN;
    printf("max |user - built-in| = %g, result is %s\n", err,
           mft_tensor_is_contiguous(mine, MFT_CHANNELS_LAST) ? "NHWC" : "not NHWC");

    char table[4096];
    mft_dispatch_list(table, sizeof table);
    printf("\nkernel table:\n%s", table);
    mft_dispatch_unregister("avg_pool2d", MFT_CHANNELS_LAST, MFT_F32);

    mft_tensor *all[] = {x, ref, mine, diff, ad, mx};
    for (int i = 0; i < 6; i++) mft_tensor_release(all[i]);
    return err < 1e-5 ? 0 : 1;
}
