/* bench/bench_norm.c — normalisation forward and backward through the public
 * API on 8x64x56x56 F32 NHWC (channels_last) and NCHW inputs, against a
 * STREAM copy and the FMA peak measured in the same process at the same
 * thread count.
 *
 * Cases (keys shared with bench/peer_norm.py), fmt = nhwc | nchw:
 *   batch_norm_train_{fwd,bwd}_<fmt>_8x64x56x56   training batch_norm; the
 *       forward is mft_batch_norm_ex (saves mean / invstd, updates the
 *       running stats), the backward mft_batch_norm_backward (grad x, w, b)
 *   group_norm_g32_{fwd,bwd}_<fmt>_8x64x56x56     mft_group_norm_ex /
 *       mft_group_norm_backward with the saved statistics (grad x, w, b)
 *   layer_norm_chw_{fwd,bwd}_<fmt>_8x64x56x56     layer_norm over (C, H, W)
 *       with weight / bias of (C, H, W): mft_layer_norm_ex /
 *       mft_layer_norm_backward (grad x, w, b)
 * grad_out in x's format. flops = 0 (memory-bound); bytes = what an optimal
 * kernel moves: forward reads x twice (statistics, then normalise) and
 * writes y; backward reads grad_out and x twice and writes grad_x; plus the
 * layer_norm weight / bias (read, and written as gradients). Target: NHWC
 * >= 80% of the STREAM copy bandwidth and no slower than PyTorch.
 *
 * batch_norm in nChw16c against NHWC, side by side in the same run, fmt =
 * nhwc | nchw16c (x and grad_out packed in it), on NxCxHxW in {32x64x56x56,
 * 32x256x14x14, 32x17x56x56, 32x24x56x56}:
 *   bn_train_fwd_<fmt>_<shape>   mft_batch_norm_ex, training (as above)
 *   bn_eval_fwd_<fmt>_<shape>    mft_batch_norm, eval (running statistics;
 *       bytes: x read once, y written)
 *   bn_bwd_<fmt>_<shape>         mft_batch_norm_backward, training, grad x,
 *       w, b with the saved statistics
 * bytes count logical elements in both formats (nChw16c with C = 17 or 24
 * moves its pad lanes too), so the rates compare the times directly. Target:
 * nchw16c >= 1.0x nhwc on every shape.
 *
 * CLI: bench_norm [--threads 1,2] [--reps 15] [--json] [--only-bn16]
 * (--only-bn16: only the nChw16c / NHWC batch_norm cases). Exit 1 on an mft
 * error. */
#include "bench_util.h"
#include "mft/cnn.h"
#include "mft/mft.h"

enum { K_BN, K_GN, K_LN, K_COUNT };
static const char *const KNAME[K_COUNT] = {"batch_norm_train", "group_norm_g32",
                                           "layer_norm_chw"};

typedef struct nm_case {
    char key[96];
    int kind, bwd, eval;
    mft_tensor *x, *gy, *w, *b, *rm, *rv, *mean, *rstd;
    double bytes;
} nm_case;

static int run_case(void *ctx) {
    nm_case *c = ctx;
    mft_tensor *r = NULL, *r1 = NULL, *r2 = NULL;
    const int64_t *sz = mft_tensor_sizes(c->x);
    mft_status st = MFT_OK;
    switch (c->kind) {
    case K_BN:
        if (c->bwd)
            st = mft_batch_norm_backward(c->gy, c->x, c->w, c->mean, c->rstd, true, &r, &r1, &r2);
        else if (c->eval)
            r = mft_batch_norm(c->x, c->rm, c->rv, c->w, c->b, false, 0.1, 1e-5);
        else
            r = mft_batch_norm_ex(c->x, c->rm, c->rv, c->w, c->b, true, 0.1, 1e-5, &r1, &r2);
        break;
    case K_GN:
        if (c->bwd)
            st = mft_group_norm_backward(c->gy, c->x, 32, c->mean, c->rstd, c->w, 1e-5, &r, &r1,
                                         &r2);
        else
            r = mft_group_norm_ex(c->x, 32, c->w, c->b, 1e-5, &r1, &r2);
        break;
    default:
        if (c->bwd)
            st = mft_layer_norm_backward(c->gy, c->x, 3, sz + 1, c->mean, c->rstd, c->w, 1e-5, &r,
                                         &r1, &r2);
        else
            r = mft_layer_norm_ex(c->x, 3, sz + 1, c->w, c->b, 1e-5, &r1, &r2);
        break;
    }
    if (!r || st != MFT_OK) return 1;
    bench_escape(mft_tensor_data(r));
    mft_tensor_release(r);
    mft_tensor_release(r1);
    mft_tensor_release(r2);
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
    nm_case *cs = ctx;
    run_case(&cs[i]);
    return mft_dispatch_last()->kernel;
}

/* The nChw16c / NHWC batch_norm cases of shape xs; false on an mft error. */
static bool add_bn16(nm_case *cs, int *n, const int64_t *xs) {
    const double xb = 4.0 * (double)(xs[0] * xs[1] * xs[2] * xs[3]);
    char shape[48];
    snprintf(shape, sizeof shape, "%lldx%lldx%lldx%lld", (long long)xs[0], (long long)xs[1],
             (long long)xs[2], (long long)xs[3]);
    mft_tensor *x = filled(4, xs, MFT_CHANNELS_LAST, 1), *gy = filled(4, xs, MFT_CHANNELS_LAST, 2);
    mft_tensor *w = filled(1, xs + 1, MFT_CONTIGUOUS, 3), *b = filled(1, xs + 1, MFT_CONTIGUOUS, 4);
    bool ok = x && gy && w && b;
    for (int f = 0; f < 2 && ok; f++) {
        const char *fs = f ? "nchw16c" : "nhwc";
        mft_tensor *fx = f ? mft_to_format(x, MFT_NCHW16C) : mft_tensor_retain(x);
        mft_tensor *fg = f ? mft_to_format(gy, MFT_NCHW16C) : mft_tensor_retain(gy);
        mft_tensor *rm = mft_zeros(1, xs + 1, MFT_F32, MFT_CONTIGUOUS);
        mft_tensor *rv = mft_ones(1, xs + 1, MFT_F32, MFT_CONTIGUOUS);
        mft_tensor *m = NULL, *r = NULL;
        mft_tensor *y = fx && fg && rm && rv
                            ? mft_batch_norm_ex(fx, rm, rv, w, b, true, 0.1, 1e-5, &m, &r)
                            : NULL;
        ok = y != NULL;
        static const char *const what[3] = {"train_fwd", "eval_fwd", "bwd"};
        for (int k = 0; k < 3 && ok; k++) {
            nm_case *c = &cs[(*n)++];
            c->kind = K_BN;
            c->bwd = k == 2;
            c->eval = k == 1;
            snprintf(c->key, sizeof c->key, "bn_%s_%s_%s", what[k], fs, shape);
            c->x = mft_tensor_retain(fx);
            c->gy = mft_tensor_retain(fg);
            c->w = mft_tensor_retain(w);
            c->b = mft_tensor_retain(b);
            c->rm = mft_tensor_retain(rm);
            c->rv = mft_tensor_retain(rv);
            c->mean = mft_tensor_retain(m);
            c->rstd = mft_tensor_retain(r);
            c->bytes = k == 2 ? 5.0 * xb : k == 1 ? 2.0 * xb : 3.0 * xb;
        }
        mft_tensor *ts[] = {fx, fg, rm, rv, m, r, y};
        for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) mft_tensor_release(ts[i]);
    }
    mft_tensor *ts[] = {x, gy, w, b};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) mft_tensor_release(ts[i]);
    return ok;
}

int main(int argc, char **argv) {
    /* --only-bn16 is ours; the rest goes to bench_cnn_parse */
    bool only16 = false;
    int ac = 0;
    char *av[64];
    for (int i = 0; i < argc && ac < 64; i++) {
        if (!strcmp(argv[i], "--only-bn16")) only16 = true;
        else av[ac++] = argv[i];
    }
    bench_cnn_args a;
    if (bench_cnn_parse(ac, av, "bench_norm", &a)) return 2;
    bench_env_warnings("bench_norm", a.threads, a.nth);
    static const int64_t BN16_SHAPES[][4] = {
        {32, 64, 56, 56}, {32, 256, 14, 14}, {32, 17, 56, 56}, {32, 24, 56, 56}};
    enum { NBN16 = (int)(sizeof BN16_SHAPES / sizeof BN16_SHAPES[0]) };
    enum { NC = 2 * 2 * K_COUNT + NBN16 * 2 * 3 };
    nm_case cs[NC];
    bench_case bc[NC];
    memset(cs, 0, sizeof cs);
    memset(bc, 0, sizeof bc);
    const int64_t xs[4] = {8, 64, 56, 56};
    const double xb = 4.0 * 8 * 64 * 56 * 56, lwb = 4.0 * 64 * 56 * 56;
    int n = 0;
    for (int i = 0; i < NBN16; i++)
        if (!add_bn16(cs, &n, BN16_SHAPES[i])) {
            fprintf(stderr, "bench_norm: %s\n", mft_last_error_message());
            return 1;
        }
    for (int f = 0; f < 2 && !only16; f++) {
        const mft_format fmt = f ? MFT_CONTIGUOUS : MFT_CHANNELS_LAST;
        const char *fs = f ? "nchw" : "nhwc";
        mft_tensor *x = filled(4, xs, fmt, 1), *gy = filled(4, xs, fmt, 2);
        if (!x || !gy) return 1;
        for (int kind = 0; kind < K_COUNT; kind++) {
            const int wn = kind == K_LN ? 3 : 1;
            mft_tensor *w = filled(wn, xs + 1, MFT_CONTIGUOUS, 3);
            mft_tensor *b = filled(wn, xs + 1, MFT_CONTIGUOUS, 4);
            mft_tensor *rm = mft_zeros(1, xs + 1, MFT_F32, MFT_CONTIGUOUS);
            mft_tensor *rv = mft_ones(1, xs + 1, MFT_F32, MFT_CONTIGUOUS);
            mft_tensor *m = NULL, *r = NULL, *y;
            if (kind == K_BN) y = mft_batch_norm_ex(x, rm, rv, w, b, true, 0.1, 1e-5, &m, &r);
            else if (kind == K_GN) y = mft_group_norm_ex(x, 32, w, b, 1e-5, &m, &r);
            else y = mft_layer_norm_ex(x, 3, xs + 1, w, b, 1e-5, &m, &r);
            if (!y) {
                fprintf(stderr, "bench_norm: %s\n", mft_last_error_message());
                return 1;
            }
            for (int bw = 0; bw < 2; bw++) {
                nm_case *c = &cs[n++];
                c->kind = kind;
                c->bwd = bw;
                snprintf(c->key, sizeof c->key, "%s_%s_%s_8x64x56x56", KNAME[kind],
                         bw ? "bwd" : "fwd", fs);
                c->x = mft_tensor_retain(x);
                c->gy = mft_tensor_retain(gy);
                c->w = mft_tensor_retain(w);
                c->b = mft_tensor_retain(b);
                c->rm = mft_tensor_retain(rm);
                c->rv = mft_tensor_retain(rv);
                c->mean = mft_tensor_retain(m);
                c->rstd = mft_tensor_retain(r);
                c->bytes = bw ? 5.0 * xb : 3.0 * xb;
                if (kind == K_LN) c->bytes += bw ? 3.0 * lwb : 2.0 * lwb;
            }
            mft_tensor *ts[] = {y, m, r, w, b, rm, rv};
            for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) mft_tensor_release(ts[i]);
        }
        mft_tensor_release(x);
        mft_tensor_release(gy);
    }
    for (int i = 0; i < n; i++)
        bc[i] = (bench_case){.key = cs[i].key, .desc = cs[i].key, .fn = run_case, .ctx = &cs[i],
                             .bytes = cs[i].bytes};
    int rc = bench_cnn_run("norm", bc, NULL, n, &a, set_threads, kernel_of, cs);
    if (rc) fprintf(stderr, "bench_norm: %s\n", mft_last_error_message());
    for (int i = 0; i < n; i++) {
        mft_tensor *ts[] = {cs[i].x, cs[i].gy, cs[i].w, cs[i].b, cs[i].rm, cs[i].rv, cs[i].mean,
                            cs[i].rstd};
        for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) mft_tensor_release(ts[k]);
    }
    return rc;
}
