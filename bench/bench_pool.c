/* bench/bench_pool.c — pooling forward and backward through the public API
 * on F32 NHWC (channels_last), NCHW and nChw16c (MFT_NCHW16C, the native
 * blocked kernels of ops/pool/blocked16_*.c) inputs, against a STREAM copy and
 * the FMA peak measured in the same process at the same thread count.
 *
 * Cases (keys shared with bench/peer_pool.py for nhwc / nchw), fmt = nhwc |
 * nchw | nchw16c:
 *   max_pool2d_k3s2p1_{fwd,bwd}_<fmt>_8x64x56x56  ResNet stem pool
 *   max_pool2d_k2s2_{fwd,bwd}_<fmt>_8x64x56x56
 *   avg_pool2d_k3s1p1_{fwd,bwd}_<fmt>_8x64x56x56   count_include_pad
 *   adaptive_avg_pool2d_o1_{fwd,bwd}_<fmt>_8x64x56x56   global pooling
 *   adaptive_avg_pool2d_o7_{fwd,bwd}_<fmt>_8x64x56x56
 * and, nhwc next to nchw16c only (the blocked targets: nChw16c >= 1.0x NHWC):
 *   max_pool2d_k3s2p1_{fwd,bwd}_<fmt>_32x64x56x56
 *   avg_pool2d_k2s2_{fwd,bwd}_<fmt>_32x64x28x28
 *   max_pool2d_k3s2p1 / avg_pool2d_k2s2 _{fwd,bwd}_<fmt>_16x{17,24}x56x56
 *     (channel counts that fill part of a 16-lane block)
 *   adaptive_avg_pool2d_o1_{fwd,bwd}_<fmt>_32x512x7x7   the heads' global pool
 * Max forward = mft_max_pool2d_with_indices (training: indices are saved;
 * nChw16c indices are I64 nChw16c);
 * max backward = mft_max_pool2d_backward_windows(grad_out, x, indices, the
 * forward's windows), as the training tape calls it and as PyTorch's
 * max_pool2d_with_indices_backward takes them; avg
 * backward = mft_avg_pool2d_backward / mft_adaptive_avg_pool2d_backward;
 * grad_out in x's format. flops = 0 (memory-bound); bytes = what an optimal
 * kernel moves on the logical sizes (the same for every format, so the
 * formats compare by time): forward read x + write y (+ write the I64
 * indices for max), backward read grad_out (+ indices) + write grad_x.
 * Target: NHWC >= 80% of the STREAM copy bandwidth and no slower than
 * PyTorch.
 *
 * CLI: bench_pool [--threads 1,2] [--reps 15] [--json] [--blocked] [--only
 * SUB1,SUB2] (--only: the cases whose key contains one of the strings).
 * Exit 1 on an mft error. */
#include "bench_util.h"
#include "mft/cnn.h"
#include "mft/mft.h"

enum { K_MAX3, K_MAX2, K_AVG3, K_AAVG1, K_AAVG7, K_AVG2, K_COUNT };
static const char *const KNAME[K_COUNT] = {"max_pool2d_k3s2p1", "max_pool2d_k2s2",
                                           "avg_pool2d_k3s1p1", "adaptive_avg_pool2d_o1",
                                           "adaptive_avg_pool2d_o7", "avg_pool2d_k2s2"};

typedef struct pl_case {
    char key[96];
    int kind, bwd;
    mft_tensor *x, *gy, *ind;
    double bytes;
} pl_case;

static void kparams(int kind, int64_t k[2], int64_t s[2], int64_t p[2]) {
    const bool two = kind == K_MAX2 || kind == K_AVG2;
    const int64_t kk = two ? 2 : 3, ss = kind == K_AVG3 ? 1 : 2, pp = two ? 0 : 1;
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
    case K_AVG2:
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

/* A tensor of sizes s in fmt filled with bench_fill_f32's values (blocked:
 * filled plain, then converted, so the pad lanes are zero). */
static mft_tensor *filled(int nd, const int64_t *s, mft_format fmt, uint32_t seed) {
    const bool blocked = fmt == MFT_NCHW16C;
    mft_tensor *t = mft_empty(nd, s, MFT_F32, blocked ? MFT_CONTIGUOUS : fmt);
    if (t) bench_fill_f32(mft_tensor_data(t), (size_t)mft_tensor_numel(t), seed);
    if (t && blocked) {
        mft_tensor *b = mft_to_format(t, MFT_NCHW16C);
        mft_tensor_release(t);
        t = b;
    }
    return t;
}

/* The shapes: sizes, which kinds, which formats (bit 0 nhwc, 1 nchw, 2 nchw16c). */
typedef struct pl_shape {
    int64_t sz[4];
    unsigned kinds, fmts;
} pl_shape;
#define KB(k) (1u << (k))
static const pl_shape SHAPES[] = {
    {{8, 64, 56, 56}, KB(K_MAX3) | KB(K_MAX2) | KB(K_AVG3) | KB(K_AAVG1) | KB(K_AAVG7), 7},
    {{32, 64, 56, 56}, KB(K_MAX3), 5},
    {{32, 64, 28, 28}, KB(K_AVG2), 5},
    {{16, 17, 56, 56}, KB(K_MAX3) | KB(K_AVG2), 5},
    {{16, 24, 56, 56}, KB(K_MAX3) | KB(K_AVG2), 5},
    {{32, 512, 7, 7}, KB(K_AAVG1), 5},
};
#define NSHAPES ((int)(sizeof SHAPES / sizeof SHAPES[0]))

static void set_threads(int t) { mft_set_num_threads(t); }

/* The kernel each case ran (one more call, outside the timing). */
static const char *kernel_of(int i, void *ctx) {
    pl_case *cs = ctx;
    run_case(&cs[i]);
    return mft_dispatch_last()->kernel;
}

/* Whether key contains one of the comma-separated strings of only (NULL: all). */
static bool selected(const char *key, const char *only) {
    if (!only) return true;
    for (const char *s = only; *s;) {
        const char *e = strchr(s, ',');
        const size_t len = e ? (size_t)(e - s) : strlen(s);
        char sub[96];
        if (len > 0 && len < sizeof sub) {
            memcpy(sub, s, len);
            sub[len] = '\0';
            if (strstr(key, sub)) return true;
        }
        s += len + (e ? 1 : 0);
    }
    return false;
}

int main(int argc, char **argv) {
    bench_cnn_args a;
    /* --only is this bench's own: taken out before the shared parser */
    const char *only = NULL;
    char *rest[64];
    int nrest = 0;
    for (int i = 0; i < argc && nrest < 64; i++) {
        if (i > 0 && !strcmp(argv[i], "--only") && i + 1 < argc)
            only = argv[++i];
        else
            rest[nrest++] = argv[i];
    }
    if (bench_cnn_parse(nrest, rest, "bench_pool", &a)) return 2;
    bench_env_warnings("bench_pool", a.threads, a.nth);
    enum { NC = 2 * 3 * K_COUNT * 6 };
    static pl_case cs[NC];
    static bench_case bc[NC];
    int n = 0;
    for (int sh = 0; sh < NSHAPES; sh++) {
        const int64_t *xs = SHAPES[sh].sz;
        const double xb = 4.0 * (double)(xs[0] * xs[1] * xs[2] * xs[3]);
        char shape[48];
        snprintf(shape, sizeof shape, "%lldx%lldx%lldx%lld", (long long)xs[0], (long long)xs[1],
                 (long long)xs[2], (long long)xs[3]);
        for (int f = 0; f < 3; f++) {
            if (!(SHAPES[sh].fmts & (1u << f))) continue;
            static const mft_format fmts[3] = {MFT_CHANNELS_LAST, MFT_CONTIGUOUS, MFT_NCHW16C};
            static const char *const fnames[3] = {"nhwc", "nchw", "nchw16c"};
            const mft_format fmt = fmts[f];
            mft_tensor *x = filled(4, xs, fmt, 1);
            if (!x) return 1;
            for (int kind = 0; kind < K_COUNT; kind++) {
                if (!(SHAPES[sh].kinds & KB(kind))) continue;
                /* the forward result (and indices) give grad_out's sizes */
                int64_t k[2], s[2], p[2], o[2];
                kparams(kind, k, s, p);
                o[0] = o[1] = kind == K_AAVG1 ? 1 : 7;
                mft_tensor *ind = NULL, *y;
                if (kind <= K_MAX2) y = mft_max_pool2d_with_indices(x, k, s, p, NULL, false, &ind);
                else if (kind == K_AVG3 || kind == K_AVG2) y = mft_avg_pool2d(x, k, s, p, false, true, 0);
                else y = mft_adaptive_avg_pool2d(x, o);
                if (!y) return 1;
                mft_tensor *gy = filled(4, mft_tensor_sizes(y), fmt, 2);
                const double yb = 4.0 * (double)mft_tensor_numel(y);
                const double ib = ind ? 2.0 * yb : 0.0;
                for (int b = 0; b < 2; b++) {
                    pl_case *c = &cs[n++];
                    c->kind = kind;
                    c->bwd = b;
                    snprintf(c->key, sizeof c->key, "%s_%s_%s_%s", KNAME[kind], b ? "bwd" : "fwd",
                             fnames[f], shape);
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
    }
    int nb = 0; /* the selected cases first */
    for (int i = 0; i < n; i++)
        if (selected(cs[i].key, only)) {
            const pl_case t = cs[nb];
            cs[nb++] = cs[i];
            cs[i] = t;
        }
    for (int i = 0; i < nb; i++)
        bc[i] = (bench_case){.key = cs[i].key, .desc = cs[i].key, .fn = run_case, .ctx = &cs[i],
                             .bytes = cs[i].bytes};
    int rc = bench_cnn_run("pool", bc, NULL, nb, &a, set_threads, kernel_of, cs);
    if (rc) fprintf(stderr, "bench_pool: %s\n", mft_last_error_message());
    for (int i = 0; i < n; i++) {
        mft_tensor_release(cs[i].x);
        mft_tensor_release(cs[i].gy);
        mft_tensor_release(cs[i].ind);
    }
    return rc;
}
