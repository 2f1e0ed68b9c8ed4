/* bench/bench_gemm.c — F32 matmul / linear forward and backward against the
 * machine's FMA peak, measured side by side in one run.
 *
 * Cases (F32, CONTIGUOUS):
 *   mm_512            matmul (512 x 512) @ (512 x 512)
 *   mm_1024           matmul (1024 x 1024) @ (1024 x 1024)
 *   linear_fwd        linear x (64 x 3136), w (128 x 3136), b (128): x @ w^T + b
 *   linear_bwd_input  grad_out (64 x 128) @ w (128 x 3136)            (grad_x)
 *   linear_bwd_weight grad_out^T (128 x 64 view) @ x (64 x 3136)      (grad_w)
 *   linear_bwd        mft_linear_backward: grad_x, grad_w and grad_b
 * For each thread count (--threads, default 1,2) it reports the median time,
 * GFLOP/s (2*M*N*K per product) and the fraction of the FMA peak measured at
 * the same thread count (bench_fma_peak_flops); --json prints one JSON
 * object as bench/README.md describes. Every result is checked once against
 * a double-precision loop on a few sampled elements before timing.
 *
 * Exit status: 0 ok, 1 mft error or wrong result, 2 usage. */
#include "bench_util.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "mft/mft.h"


typedef enum kind { K_MM, K_LIN_FWD, K_LIN_BWD_IN, K_LIN_BWD_W, K_LIN_BWD } kind;

typedef struct gcase {
    const char *key, *desc;
    kind kind;
    int64_t M, N, K; /* the product (for K_LIN_BWD: the linear's batch, out, in) */
    mft_tensor *a, *b, *bias, *g;
    double flops, bytes;
} gcase;

static int run_case(void *ctx) {
    gcase *c = ctx;
    mft_tensor *r = NULL, *r2 = NULL, *r3 = NULL;
    switch (c->kind) {
    case K_MM: r = mft_matmul(c->a, c->b); break;
    case K_LIN_FWD: r = mft_linear(c->a, c->b, c->bias); break;
    case K_LIN_BWD_IN: r = mft_matmul(c->g, c->b); break;
    case K_LIN_BWD_W: {
        mft_tensor *gt = mft_transpose(c->g, 0, 1);
        r = gt ? mft_matmul(gt, c->a) : NULL;
        mft_tensor_release(gt);
        break;
    }
    case K_LIN_BWD:
        if (mft_linear_backward(c->g, c->a, c->b, &r, &r2, &r3) != MFT_OK) r = NULL;
        break;
    }
    if (!r) {
        fprintf(stderr, "%s: %s\n", c->key, mft_last_error_message());
        return 1;
    }
    mft_tensor_release(r);
    mft_tensor_release(r2);
    mft_tensor_release(r3);
    return 0;
}

static mft_tensor *rnd(int64_t r, int64_t c, uint64_t seed) {
    const int64_t s[2] = {r, c};
    return mft_randn(2, s, MFT_F32, MFT_CONTIGUOUS, seed);
}

/* Sampled check of C = A @ B (B^T when bt) against a double loop. */
static bool check_product(const mft_tensor *C, const mft_tensor *A, const mft_tensor *B, bool at,
                          bool bt) {
    const int64_t *cs = mft_tensor_sizes(C), *as = mft_tensor_sizes(A);
    const int64_t M = cs[0], N = cs[1], K = at ? as[0] : as[1];
    for (int s = 0; s < 64; s++) {
        int64_t i = (s * 7919) % M, j = (s * 104729) % N;
        double acc = 0, mag = 0;
        for (int64_t k = 0; k < K; k++) {
            int64_t ia[2] = {at ? k : i, at ? i : k}, ib[2] = {bt ? j : k, bt ? k : j};
            double p = mft_tensor_get(A, ia) * mft_tensor_get(B, ib);
            acc += p;
            mag += fabs(p);
        }
        int64_t ic[2] = {i, j};
        if (fabs(mft_tensor_get(C, ic) - acc) > 1e-5 * mag + 1e-6) return false;
    }
    return true;
}

static bool verify(gcase *c) {
    bool ok = false;
    if (c->kind == K_MM) {
        mft_tensor *r = mft_matmul(c->a, c->b);
        ok = r && check_product(r, c->a, c->b, false, false);
        mft_tensor_release(r);
    } else if (c->kind == K_LIN_FWD) {
        mft_tensor *r = mft_linear(c->a, c->b, NULL);
        ok = r && check_product(r, c->a, c->b, false, true);
        mft_tensor_release(r);
    } else {
        mft_tensor *gx = NULL, *gw = NULL;
        ok = mft_linear_backward(c->g, c->a, c->b, &gx, &gw, NULL) == MFT_OK &&
             check_product(gx, c->g, c->b, false, false) && check_product(gw, c->g, c->a, true, false);
        mft_tensor_release(gx);
        mft_tensor_release(gw);
    }
    if (!ok) fprintf(stderr, "bench_gemm: wrong result for %s\n", c->key);
    return ok;
}

static void set_threads(int t) { mft_set_num_threads(t); }

static const char *desc_of(int i, void *ctx) { return ((const gcase *)ctx)[i].desc; }

int main(int argc, char **argv) {
    bench_cnn_args args;
    if (bench_cnn_parse(argc, argv, "bench_gemm", &args)) return 2;
    bench_env_warnings("bench_gemm", args.threads, args.nth);
    const int64_t LB = 64, LO = 128, LI = 3136;
    gcase cs[] = {
        {"mm_512", "matmul 512x512 @ 512x512", K_MM, 512, 512, 512, 0, 0, 0, 0, 0, 0},
        {"mm_1024", "matmul 1024^3", K_MM, 1024, 1024, 1024, 0, 0, 0, 0, 0, 0},
        {"linear_fwd", "linear (64x3136) w (128x3136) +b", K_LIN_FWD, LB, LO, LI, 0, 0, 0, 0, 0, 0},
        {"linear_bwd_input", "grad (64x128) @ w (128x3136)", K_LIN_BWD_IN, LB, LI, LO, 0, 0, 0, 0, 0, 0},
        {"linear_bwd_weight", "grad^T (128x64) @ x (64x3136)", K_LIN_BWD_W, LO, LI, LB, 0, 0, 0, 0, 0, 0},
        {"linear_bwd", "mft_linear_backward (x, w, b)", K_LIN_BWD, LB, LO, LI, 0, 0, 0, 0, 0, 0},
    };
    const int nc = (int)(sizeof cs / sizeof cs[0]);
    for (int i = 0; i < nc; i++) {
        gcase *c = &cs[i];
        if (c->kind == K_MM) {
            c->a = rnd(c->M, c->K, 1 + (uint64_t)i);
            c->b = rnd(c->K, c->N, 100 + (uint64_t)i);
            c->flops = 2.0 * (double)(c->M * c->N * c->K);
            c->bytes = 4.0 * (double)(c->M * c->K + c->K * c->N + c->M * c->N);
        } else {
            c->a = rnd(LB, LI, 7);
            c->b = rnd(LO, LI, 8);
            const int64_t bs[1] = {LO};
            c->bias = mft_randn(1, bs, MFT_F32, MFT_CONTIGUOUS, 9);
            c->g = rnd(LB, LO, 10);
            const double mnk = (double)(LB * LO * LI);
            c->flops = c->kind == K_LIN_BWD ? 4.0 * mnk + (double)(LB * LO) : 2.0 * mnk;
            c->bytes = c->kind == K_LIN_BWD
                           ? 4.0 * (double)(2 * LB * LI + 2 * LO * LI + LB * LO + LO)
                           : 4.0 * (double)(LB * LI + LO * LI + LB * LO);
        }
        if (!c->a || !c->b || (c->kind != K_MM && (!c->g || !c->bias))) {
            fprintf(stderr, "bench_gemm: %s\n", mft_last_error_message());
            return 1;
        }
        if (!verify(c)) return 1;
    }
    bench_case bc[16];
    double flops[16];
    for (int i = 0; i < nc; i++) {
        bc[i] = (bench_case){.key = cs[i].key, .desc = cs[i].desc, .fn = run_case, .ctx = &cs[i],
                             .bytes = cs[i].bytes};
        flops[i] = cs[i].flops;
    }
    int rc = bench_cnn_run("gemm", bc, flops, nc, &args, set_threads, desc_of, cs);
    for (int i = 0; i < nc; i++) {
        mft_tensor_release(cs[i].a);
        mft_tensor_release(cs[i].b);
        mft_tensor_release(cs[i].bias);
        mft_tensor_release(cs[i].g);
    }
    return rc;
}
