/* bench/bench_linear_flat.c — a CNN head, flatten then linear, on an NHWC and
 * an nChw16c activation: the composition mft_linear(mft_flatten(x, 1, -1))
 * (flatten copies the activation into logical order, and its backward
 * copies the gradient back) against the fused mft_flatten_linear (w's
 * columns gathered into the activation's memory order, no activation copy;
 * Note [Linear over the physical order] in ops/linalg/flatten_linear.c),
 * measured side by side in one run.
 *
 * Shapes (F32, bias on):
 *   head     x (64, 32, 7, 7) -> 64 outputs    (K = 1568)
 *   fashion  x (64, 64, 7, 7) -> 128 outputs   (K = 3136: examples/fashion_mnist's linear1)
 *   big      x (64, 64, 14, 14) -> 256 outputs (K = 12544)
 * Cases, per shape and format: "fwd" the forward alone; "step" forward and
 * backward under a tape (x, w, b require grad; mft_backward with a fixed
 * grad_out, the gradients cleared after each call), as a training step
 * runs the head. FLOPs: 2·N·O·K forward, 6·N·O·K for a step.
 * For each thread count (--threads, default 1,2) it prints the median time
 * and GFLOP/s of every case (bench_cnn_run); the fused / composed ratio is
 * what bench/README.md records. The fused results are checked once against
 * the composition before timing.
 *
 * Usage: bench_linear_flat [--threads 1,2] [--reps 15] [--json] [--blocked]
 * Exit status: 0 ok, 1 mft error or wrong result, 2 usage. */
#include "bench_util.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "mft/mft.h"

typedef struct lcase {
    const char *key, *desc;
    bool fused, step;
    mft_tensor *x, *w, *b, *g; /* borrowed from the shape's set */
} lcase;

static mft_tensor *head(const lcase *c) {
    if (c->fused) return mft_flatten_linear(c->x, c->w, c->b);
    mft_tensor *f = mft_flatten(c->x, 1, -1);
    mft_tensor *y = f ? mft_linear(f, c->w, c->b) : NULL;
    mft_tensor_release(f);
    return y;
}

static int run_case(void *ctx) {
    lcase *c = ctx;
    if (!c->step) {
        mft_tensor *y = head(c);
        if (!y) goto fail;
        mft_tensor_release(y);
        return 0;
    }
    if (mft_tape_begin() != MFT_OK) goto fail;
    mft_tensor *y = head(c);
    mft_status st = y ? mft_backward(y, c->g) : mft_last_error();
    mft_tensor_release(y);
    mft_tape_end();
    mft_tensor *ts[3] = {c->x, c->w, c->b};
    for (int i = 0; i < 3; i++) mft_tensor_set_grad(ts[i], NULL);
    if (st != MFT_OK) goto fail;
    return 0;
fail:
    fprintf(stderr, "%s: %s\n", c->key, mft_last_error_message());
    return 1;
}

/* The fused forward equals the composition within float rounding. */
static bool verify(const lcase *fused, const lcase *composed) {
    mft_tensor *a = head(fused), *r = head(composed);
    bool ok = a && r;
    if (ok) {
        const float *p = mft_tensor_data(a), *q = mft_tensor_data(r);
        double err = 0, scale = 1;
        for (int64_t i = 0; i < mft_tensor_numel(r); i++) {
            err = fmax(err, fabs((double)p[i] - (double)q[i]));
            scale = fmax(scale, fabs((double)q[i]));
        }
        ok = err <= 1e-4 * scale;
    }
    if (!ok) fprintf(stderr, "bench_linear_flat: %s differs from %s\n", fused->key, composed->key);
    mft_tensor_release(a);
    mft_tensor_release(r);
    return ok;
}

static void set_threads(int t) { mft_set_num_threads(t); }

static const char *desc_of(int i, void *ctx) { return ((const lcase *)ctx)[i].desc; }

enum { NSHAPES = 3, NFMT = 2, NCASES = NSHAPES * NFMT * 4 };

int main(int argc, char **argv) {
    bench_cnn_args args;
    if (bench_cnn_parse(argc, argv, "bench_linear_flat", &args)) return 2;
    bench_env_warnings("bench_linear_flat", args.threads, args.nth);
    static const struct {
        const char *name;
        int64_t N, C, H, W, O;
    } shapes[NSHAPES] = {
        {"head", 64, 32, 7, 7, 64}, {"fashion", 64, 64, 7, 7, 128}, {"big", 64, 64, 14, 14, 256}};
    static const struct {
        const char *name;
        mft_format fmt;
    } fmts[NFMT] = {{"nhwc", MFT_CHANNELS_LAST}, {"nchw16c", MFT_NCHW16C}};
    static char keys[NCASES][48], descs[NCASES][96];
    lcase cs[NCASES];
    double flops[NCASES];
    mft_tensor *owned[NSHAPES * NFMT * 4];
    int nowned = 0, nc = 0, rc = 0;
    for (int s = 0; s < NSHAPES; s++)
        for (int f = 0; f < NFMT; f++) {
            const int64_t xs[4] = {shapes[s].N, shapes[s].C, shapes[s].H, shapes[s].W};
            const int64_t K = shapes[s].C * shapes[s].H * shapes[s].W, O = shapes[s].O;
            const int64_t ws[2] = {O, K}, gs[2] = {shapes[s].N, O};
            mft_tensor *x = mft_randn(4, xs, MFT_F32, fmts[f].fmt, 1);
            mft_tensor *w = mft_randn(2, ws, MFT_F32, MFT_CONTIGUOUS, 2);
            mft_tensor *b = mft_randn(1, &O, MFT_F32, MFT_CONTIGUOUS, 3);
            mft_tensor *g = mft_randn(2, gs, MFT_F32, MFT_CONTIGUOUS, 4);
            owned[nowned++] = x, owned[nowned++] = w, owned[nowned++] = b, owned[nowned++] = g;
            if (!x || !w || !b || !g) {
                fprintf(stderr, "bench_linear_flat: %s\n", mft_last_error_message());
                rc = 1;
                goto done;
            }
            mft_tensor_set_requires_grad(x, true);
            mft_tensor_set_requires_grad(w, true);
            mft_tensor_set_requires_grad(b, true);
            const double mnk = (double)(shapes[s].N * O * K);
            for (int k = 0; k < 4; k++) {
                const bool step = k >= 2, fused = k % 2 == 1;
                snprintf(keys[nc], sizeof keys[nc], "%s_%s_%s_%s", shapes[s].name, fmts[f].name,
                         step ? "step" : "fwd", fused ? "fused" : "composed");
                snprintf(descs[nc], sizeof descs[nc], "%s %s %s: %s", shapes[s].name,
                         fmts[f].name, step ? "fwd+bwd" : "forward",
                         fused ? "flatten_linear" : "flatten + linear");
                cs[nc] = (lcase){keys[nc], descs[nc], fused, step, x, w, b, g};
                flops[nc] = (step ? 6.0 : 2.0) * mnk;
                nc++;
            }
            if (!verify(&cs[nc - 3], &cs[nc - 4])) {
                rc = 1;
                goto done;
            }
        }
    bench_case bc[NCASES];
    for (int i = 0; i < nc; i++)
        bc[i] = (bench_case){.key = cs[i].key, .desc = cs[i].desc, .fn = run_case, .ctx = &cs[i],
                             .bytes = 0};
    rc = bench_cnn_run("linear_flat", bc, flops, nc, &args, set_threads, desc_of, cs);
done:
    for (int i = 0; i < nowned; i++) mft_tensor_release(owned[i]);
    return rc;
}
