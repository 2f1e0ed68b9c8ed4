/* bench/bench_pool.c — pooling forward and backward through the public API
 * on 8x64x56x56 F32 NHWC (channels_last) and NCHW inputs, against a STREAM
 * copy and the FMA peak measured in the same process at the same thread
 * count.
 *
 * Cases (keys shared with bench/peer_pool.py), fmt = nhwc | nchw:
 *   max_pool2d_k3s2p1_{fwd,bwd}_<fmt>_8x64x56x56  ResNet stem pool
 *   max_pool2d_k2s2_{fwd,bwd}_<fmt>_8x64x56x56
 *   avg_pool2d_k3s1p1_{fwd,bwd}_<fmt>_8x64x56x56   count_include_pad
 *   adaptive_avg_pool2d_o1_{fwd,bwd}_<fmt>_8x64x56x56   global pooling
 *   adaptive_avg_pool2d_o7_{fwd,bwd}_<fmt>_8x64x56x56
 * Max forward = mft_max_pool2d_with_indices (training: indices are saved);
 * max backward = mft_max_pool2d_backward_windows(grad_out, x, indices, the
 * forward's windows), as the training tape calls it and as PyTorch's
 * max_pool2d_with_indices_backward takes them; avg
 * backward = mft_avg_pool2d_backward / mft_adaptive_avg_pool2d_backward;
 * grad_out in x's format. flops = 0 (memory-bound); bytes = what an optimal
 * kernel moves: forward read x + write y (+ write the I64 indices for max),
 * backward read grad_out (+ indices) + write grad_x. Target: NHWC >= 80% of
 * the STREAM copy bandwidth and no slower than PyTorch.
 *
 * CLI: bench_pool [--threads 1,2] [--reps 15] [--json]. Exit 1 on an mft
 * error. */
#include "bench_util.h"
#include "mft/cnn.h"
#include "mft/mft.h"

enum { K_MAX3, K_MAX2, K_AVG3, K_AAVG1, K_AAVG7, K_COUNT };
static const char *const KNAME[K_COUNT] = {"max_pool2d_k3s2p1", "max_pool2d_k2s2",
                                           "avg_pool2d_k3s1p1", "adaptive_avg_pool2d_o1",
                                           "adaptive_avg_pool2d_o7"};

typedef struct pl_case {
    char key[96];
    int kind, bwd;
    mft_tensor *x, *gy, *ind;
    double bytes;
} pl_case;

static void kparams(int kind, int64_t k[2], int64_t s[2], int64_t p[2]) {
    const int64_t kk = kind == K_MAX2 ? 2 : 3, ss = kind == K_AVG3 ? 1 : 2,
                  pp = kind == K_MAX2 ? 0 : 1;
    k[0] = k[1] = kk;
    s[0] = s[1] = ss;
    p[0] = p[1] = pp;
}

static int run_case(void *ctx) {
    pl_case *c = ctx;
    int64_t k[2], s[2], p[2], o[2];
    kparams(c->kind, k, s, p);
    o[0] = o[1] = c->kind == K_AAVG1 ? 1 : 7;
    mft_tensor *r = NULL, *ri = NULL;
    switch (c->kind) {
    case K_MAX3:
    case K_MAX2:
        r = c->bwd ? mft_max_pool2d_backward_windows(c->gy, c->x, c->ind, k, s, p, NULL, false)
                   : mft_max_pool2d_with_indices(c->x, k, s, p, NULL, false, &ri);
        break;
    case K_AVG3:
        r = c->bwd ? mft_avg_pool2d_backward(c->gy, c->x, k, s, p, false, true, 0)
                   : mft_avg_pool2d(c->x, k, s, p, false, true, 0);
        break;
    default:
        r = c->bwd ? mft_adaptive_avg_pool2d_backward(c->gy, c->x) : mft_adaptive_avg_pool2d(c->x, o);
        break;
    }
    if (!r) return 1;
    bench_escape(mft_tensor_data(r));
    mft_tensor_release(r);
    mft_tensor_release(ri);
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
    pl_case *cs = ctx;
    run_case(&cs[i]);
    return mft_dispatch_last()->kernel;
}

int main(int argc, char **argv) {
    bench_cnn_args a;
    if (bench_cnn_parse(argc, argv, "bench_pool", &a)) return 2;
    bench_env_warnings("bench_pool", a.threads, a.nth);
    enum { NC = 2 * 2 * K_COUNT };
    pl_case cs[NC];
    bench_case bc[NC];
    memset(cs, 0, sizeof cs);
    memset(bc, 0, sizeof bc);
    const int64_t xs[4] = {8, 64, 56, 56};
    const double xb = 4.0 * 8 * 64 * 56 * 56;
    int n = 0;
    for (int f = 0; f < 2; f++) {
        const mft_format fmt = f ? MFT_CONTIGUOUS : MFT_CHANNELS_LAST;
        const char *fs = f ? "nchw" : "nhwc";
        mft_tensor *x = filled(4, xs, fmt, 1);
        if (!x) return 1;
        for (int kind = 0; kind < K_COUNT; kind++) {
            /* the forward result (and indices) give grad_out's sizes */
            int64_t k[2], s[2], p[2], o[2];
            kparams(kind, k, s, p);
            o[0] = o[1] = kind == K_AAVG1 ? 1 : 7;
            mft_tensor *ind = NULL, *y;
            if (kind <= K_MAX2) y = mft_max_pool2d_with_indices(x, k, s, p, NULL, false, &ind);
            else if (kind == K_AVG3) y = mft_avg_pool2d(x, k, s, p, false, true, 0);
            else y = mft_adaptive_avg_pool2d(x, o);
            if (!y) return 1;
            mft_tensor *gy = filled(4, mft_tensor_sizes(y), fmt, 2);
            const double yb = 4.0 * (double)mft_tensor_numel(y);
            const double ib = ind ? 2.0 * yb : 0.0;
            for (int b = 0; b < 2; b++) {
                pl_case *c = &cs[n++];
                c->kind = kind;
                c->bwd = b;
                snprintf(c->key, sizeof c->key, "%s_%s_%s_8x64x56x56", KNAME[kind],
                         b ? "bwd" : "fwd", fs);
                c->x = mft_tensor_retain(x);
                c->gy = mft_tensor_retain(gy);
                c->ind = mft_tensor_retain(ind);
                c->bytes = xb + yb + ib;
            }
            mft_tensor_release(y);
            mft_tensor_release(ind);
            mft_tensor_release(gy);
        }
        mft_tensor_release(x);
    }
    for (int i = 0; i < n; i++)
        bc[i] = (bench_case){.key = cs[i].key, .desc = cs[i].key, .fn = run_case, .ctx = &cs[i],
                             .bytes = cs[i].bytes};
    int rc = bench_cnn_run("pool", bc, NULL, n, &a, set_threads, kernel_of, cs);
    if (rc) fprintf(stderr, "bench_pool: %s\n", mft_last_error_message());
    for (int i = 0; i < n; i++) {
        mft_tensor_release(cs[i].x);
        mft_tensor_release(cs[i].gy);
        mft_tensor_release(cs[i].ind);
    }
    return rc;
}
