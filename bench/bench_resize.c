/* bench/bench_resize.c — interpolate (upsample x2, nearest and bilinear with
 * align_corners false) forward and backward, and dropout p = 0.5 forward,
 * through the public API on 8x64x56x56 F32 NHWC (channels_last) and NCHW
 * inputs, against a STREAM copy measured in the same process at the same
 * thread count.
 *
 * Cases (keys shared with bench/peer_resize.py):
 *   <mode>_fwd_<fmt>_8x64x56x56_x2    y = interpolate(x, (112, 112), mode)
 *   <mode>_bwd_<fmt>_8x64x56x56_x2    grad_x = interpolate_backward(grad_y, x)
 *                                     (grad_y in x's format)
 *   dropout_fwd_<fmt>_8x64x56x56_p0.5 y = dropout(x, 0.5, training)
 * mode: nearest, bilinear; fmt: nhwc, nchw. flops = 0 (memory-bound);
 * bytes = read x + write y (forward), read grad_y + write grad_x (backward),
 * i.e. 5 x 6.4 MB for the x2 upsamples, 2 x 6.4 MB for dropout. Target:
 * NHWC >= 80% of the STREAM copy bandwidth, and no slower than PyTorch.
 *
 * CLI: bench_resize [--threads 1,2] [--reps 15] [--json]. Exit 1 on an mft
 * error. */
#include "bench_util.h"
#include "mft/cnn.h"
#include "mft/mft.h"

typedef struct rs_case {
    char key[96];
    int kind; /* 0 forward, 1 backward, 2 dropout */
    mft_interp_mode mode;
    mft_tensor *x, *gy;
    double bytes;
} rs_case;

static const int64_t OUT_HW[2] = {112, 112};

static int run_case(void *ctx) {
    rs_case *c = ctx;
    mft_tensor *r = NULL;
    if (c->kind == 0) r = mft_interpolate(c->x, OUT_HW, c->mode, false);
    else if (c->kind == 1) r = mft_interpolate_backward(c->gy, c->x, c->mode, false);
    else r = mft_dropout(c->x, 0.5, true, 42);
    if (!r) return 1;
    bench_escape(mft_tensor_data(r));
    mft_tensor_release(r);
    return 0;
}

static mft_tensor *filled(int nd, const int64_t *s, mft_format fmt, uint32_t seed) {
    mft_tensor *t = mft_empty(nd, s, MFT_F32, fmt);
    if (t) bench_fill_f32(mft_tensor_data(t), (size_t)mft_tensor_numel(t), seed);
    return t;
}

static void set_threads(int t) { mft_set_num_threads(t); }

/* The kernel each case ran (one more call, outside the timing). */
static const char *kernel_of(int i, void *ctx) {
    rs_case *cs = ctx;
    run_case(&cs[i]);
    return cs[i].kind == 2 ? "(dropout loop)" : mft_dispatch_last()->kernel;
}

int main(int argc, char **argv) {
    bench_cnn_args a;
    if (bench_cnn_parse(argc, argv, "bench_resize", &a)) return 2;
    bench_env_warnings("bench_resize", a.threads, a.nth);
    enum { NC = 10 };
    rs_case cs[NC];
    bench_case bc[NC];
    memset(cs, 0, sizeof cs);
    memset(bc, 0, sizeof bc);
    const int64_t xs[4] = {8, 64, 56, 56}, ys[4] = {8, 64, 112, 112};
    const double xb = 4.0 * 8 * 64 * 56 * 56, yb = 4.0 * xb;
    int n = 0;
    for (int f = 0; f < 2; f++) {
        const mft_format fmt = f ? MFT_CONTIGUOUS : MFT_CHANNELS_LAST;
        const char *fs = f ? "nchw" : "nhwc";
        mft_tensor *x = filled(4, xs, fmt, 1), *gy = filled(4, ys, fmt, 2);
        if (!x || !gy) return 1;
        for (int m = 0; m < 2; m++)
            for (int b = 0; b < 2; b++) {
                rs_case *c = &cs[n];
                c->kind = b;
                c->mode = m ? MFT_INTERP_BILINEAR : MFT_INTERP_NEAREST;
                snprintf(c->key, sizeof c->key, "%s_%s_%s_8x64x56x56_x2",
                         m ? "bilinear" : "nearest", b ? "bwd" : "fwd", fs);
                c->x = mft_tensor_retain(x);
                c->gy = mft_tensor_retain(gy);
                c->bytes = xb + yb;
                n++;
            }
        rs_case *c = &cs[n];
        c->kind = 2;
        snprintf(c->key, sizeof c->key, "dropout_fwd_%s_8x64x56x56_p0.5", fs);
        c->x = mft_tensor_retain(x);
        c->bytes = 2 * xb;
        n++;
        mft_tensor_release(x);
        mft_tensor_release(gy);
    }
    for (int i = 0; i < n; i++)
        bc[i] = (bench_case){.key = cs[i].key, .desc = cs[i].key, .fn = run_case, .ctx = &cs[i],
                             .bytes = cs[i].bytes};
    int rc = bench_cnn_run("resize", bc, NULL, n, &a, set_threads, kernel_of, cs);
    if (rc) fprintf(stderr, "bench_resize: %s\n", mft_last_error_message());
    for (int i = 0; i < n; i++) {
        mft_tensor_release(cs[i].x);
        mft_tensor_release(cs[i].gy);
    }
    return rc;
}
