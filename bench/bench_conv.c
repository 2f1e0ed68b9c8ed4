/* bench/bench_conv.c — 2-D convolution through the public API (mft_conv2d,
 * mft_conv2d_backward with grad_input + grad_weight), F32, no bias, NHWC
 * (channels_last), NCHW and nChw16c (MFT_NCHW16C, blocked) inputs, side by
 * side in one run, against the FMA peak and a STREAM copy
 * measured in the same process at the same thread count.
 *
 * Cases (keys shared with bench/peer_conv.py):
 *   fwd_<fmt>_<N>x<C>x<H>x<W>_k<Cout>_<k>x<k>     forward, stride 1, pad k/2
 *   fwdbwd_<fmt>_...                               forward + backward (grad_x, grad_w)
 * with fmt nhwc, nchw or nchw16c (x and grad_y blocked, w plain)
 * for 8x64x56x56 k64 3x3, 8x128x28x28 k128 3x3, 8x256x14x14 k256 3x3,
 * 32x32x28x28 k64 3x3, 8x64x56x56 k64 1x1, the first layer 64x1x28x28 k32
 * 3x3, and depthwise 8x64x56x56 3x3 (groups 64; key ..._dw_3x3).
 * --depthwise runs the MobileNet depthwise layers instead: N = 8, 3x3,
 * padding 1, C = 32 at 112x112, 64 at 56x56 stride 2 (key suffix _s2),
 * 128 at 28x28, 256 at 14x14.
 * flops = 2*MACs (x3 for fwdbwd; 0 for the memory-bound depthwise cases);
 * bytes = x + w + y (+ the backward's reads and writes: grad_y twice, w, x,
 * grad_x, grad_w).
 *
 * CLI: bench_conv [--threads 1,2] [--reps 15] [--json] [--depthwise]. Exit 1
 * on an mft error. */
#include "bench_util.h"
#include "mft/cnn.h"
#include "mft/mft.h"

typedef struct conv_case {
    char key[96];
    int64_t N, C, H, W, K, k, groups, s;
    mft_format fmt;
    int bwd; /* 0 forward, 1 forward + both backwards, 2 backward_input, 3 backward_weight */
    mft_tensor *x, *w, *gy;
    double flops, bytes;
} conv_case;

static int run_conv(void *ctx) {
    conv_case *c = ctx;
    const int64_t st[2] = {c->s, c->s}, pd[2] = {c->k / 2, c->k / 2}, dl[2] = {1, 1};
    mft_tensor *y = NULL;
    if (c->bwd <= 1) {
        y = mft_conv2d(c->x, c->w, NULL, st, pd, dl, c->groups);
        if (!y) return 1;
        bench_escape(mft_tensor_data(y));
    }
    int rc = 0;
    if (c->bwd) {
        mft_tensor *gx = NULL, *gw = NULL;
        if (mft_conv2d_backward(c->gy, c->x, c->w, st, pd, dl, c->groups, c->bwd != 3 ? &gx : NULL,
                                c->bwd != 2 ? &gw : NULL, NULL) != MFT_OK)
            rc = 1;
        mft_tensor_release(gx);
        mft_tensor_release(gw);
    }
    mft_tensor_release(y);
    return rc;
}

static mft_tensor *filled(int nd, const int64_t *s, mft_format fmt, uint32_t seed) {
    const bool blk = fmt == MFT_NCHW16C; /* filled plain: the pad lanes stay zero */
    mft_tensor *t = mft_empty(nd, s, MFT_F32, blk ? MFT_CONTIGUOUS : fmt);
    if (t) bench_fill_f32(mft_tensor_data(t), (size_t)mft_tensor_numel(t), seed);
    if (t && blk) {
        mft_tensor *b = mft_to_format(t, fmt);
        mft_tensor_release(t);
        t = b;
    }
    return t;
}

static int setup(conv_case *c, const int64_t *v, mft_format fmt, int bwd) {
    const int64_t N = v[0], C = v[1], H = v[2], W = v[3], K = v[4], k = v[5], groups = v[6],
                  s = v[7];
    c->N = N, c->C = C, c->H = H, c->W = W, c->K = K, c->k = k, c->groups = groups, c->s = s;
    c->fmt = fmt;
    c->bwd = bwd;
    snprintf(c->key, sizeof c->key, "%s_%s_%lldx%lldx%lldx%lld_%s%lld_%lldx%lld",
             (const char *[]){"fwd", "fwdbwd", "bwdin", "bwdw"}[bwd],
             fmt == MFT_CHANNELS_LAST ? "nhwc" : fmt == MFT_NCHW16C ? "nchw16c" : "nchw", (long long)N,
             (long long)C, (long long)H, (long long)W, groups > 1 ? "dw" : "k",
             (long long)(groups > 1 ? 0 : K), (long long)k, (long long)k);
    if (groups > 1) { /* "..._dw_3x3" */
        char *p = strstr(c->key, "_dw0_");
        if (p) memmove(p + 3, p + 4, strlen(p + 4) + 1);
    }
    if (s > 1) { /* "..._s2" */
        const size_t len = strlen(c->key);
        snprintf(c->key + len, sizeof c->key - len, "_s%lld", (long long)s);
    }
    const int64_t OH = (H + 2 * (k / 2) - k) / s + 1, OW = (W + 2 * (k / 2) - k) / s + 1;
    const int64_t xs[4] = {N, C, H, W}, ws[4] = {K, C / groups, k, k}, ys[4] = {N, K, OH, OW};
    c->x = filled(4, xs, fmt, 1);
    c->w = filled(4, ws, MFT_CONTIGUOUS, 2);
    c->gy = filled(4, ys, fmt, 3);
    if (!c->x || !c->w || !c->gy) return 1;
    const double macs = (double)N * OH * OW * K * (double)(C / groups) * k * k;
    const double xb = 4.0 * N * C * H * W, yb = 4.0 * N * K * OH * OW,
                 wb = 4.0 * K * (C / groups) * k * k;
    /* depthwise is memory-bound: no FLOPs credited (compared with STREAM) */
    c->flops = groups > 1 ? 0 : 2 * macs * (bwd == 1 ? 3 : 1);
    c->bytes = bwd == 0   ? xb + wb + yb
               : bwd == 1 ? xb + wb + yb + (2 * yb + wb + xb + xb + wb + xb)
               : bwd == 2 ? yb + wb + xb
                          : yb + xb + wb;
    return 0;
}

int main(int argc, char **argv) {
    int threads[4] = {1, 2}, nth = 2, reps = 15, json = 0, split = 0, blocked = 0, dwise = 0;
    int64_t user[8][8];
    int nuser = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            nth = bench_parse_int_list(argv[++i], threads, 4);
            if (nth <= 0) return 2;
        } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            if (bench_parse_int(argv[++i], &reps) || reps < 1) return 2;
        } else if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (!strcmp(argv[i], "--split")) {
            split = 1;
        } else if (!strcmp(argv[i], "--blocked")) {
            blocked = 1;
        } else if (!strcmp(argv[i], "--depthwise")) {
            dwise = 1;
        } else if (!strcmp(argv[i], "--shape") && i + 1 < argc && nuser < 8) {
            long long v[7];
            if (sscanf(argv[++i], "%lld,%lld,%lld,%lld,%lld,%lld,%lld", &v[0], &v[1], &v[2], &v[3],
                       &v[4], &v[5], &v[6]) != 7)
                return fprintf(stderr, "bench_conv: --shape wants N,C,H,W,K,k,groups\n"), 2;
            for (int j = 0; j < 7; j++) user[nuser][j] = v[j];
            user[nuser][7] = 1;
            nuser++;
        } else {
            fprintf(stderr, "usage: bench_conv [--threads 1,2] [--reps 15] [--json] [--split]\n"
                            "                  [--blocked] [--depthwise]\n"
                            "                  [--shape N,C,H,W,K,k,groups]...  (up to 8)\n"
                            "  --split   also time backward_input and backward_weight alone\n"
                            "  --blocked each case's samples back to back (as compare_cnn.py\n"
                            "            times PyTorch), not interleaved with the other cases\n"
                            "  --depthwise the MobileNet depthwise layers instead of the anchors\n");
            return 2;
        }
    }
    bench_env_warnings("bench_conv", threads, nth);
    /* the ResNet-style anchor shapes, then the Fashion-MNIST CNN's second conv */
    /* N, C, H, W, K, k, groups, stride */
    static const int64_t anchors[][8] = {
        {8, 64, 56, 56, 64, 3, 1, 1},  {8, 128, 28, 28, 128, 3, 1, 1},
        {8, 256, 14, 14, 256, 3, 1, 1}, {32, 32, 28, 28, 64, 3, 1, 1},
        {8, 64, 56, 56, 64, 1, 1, 1},  {64, 1, 28, 28, 32, 3, 1, 1},
        {8, 64, 56, 56, 64, 3, 64, 1}, {64, 32, 14, 14, 64, 3, 1, 1},
    };
    static const int64_t mobilenet_dw[][8] = {
        {8, 32, 112, 112, 32, 3, 32, 1},
        {8, 64, 56, 56, 64, 3, 64, 2},
        {8, 128, 28, 28, 128, 3, 128, 1},
        {8, 256, 14, 14, 256, 3, 256, 1},
    };
    const int64_t(*shapes)[8] = nuser   ? (const int64_t(*)[8])user
                                : dwise ? mobilenet_dw
                                        : anchors;
    const int NS = nuser   ? nuser
                   : dwise ? (int)(sizeof mobilenet_dw / sizeof mobilenet_dw[0])
                           : (int)(sizeof anchors / sizeof anchors[0]);
    static const mft_format fmts[3] = {MFT_CHANNELS_LAST, MFT_CONTIGUOUS, MFT_NCHW16C};
    const int NB = split ? 4 : 2, NC = NS * NB * 3;
    conv_case *cs = calloc(NC, sizeof *cs);
    bench_case *bc = calloc(NC, sizeof *bc);
    double *samples = calloc((size_t)NC * (size_t)reps, sizeof(double));
    if (!cs || !bc || !samples) return 1;
    int n = 0;
    for (int s = 0; s < NS; s++)
        for (int b = 0; b < NB; b++)
            for (int f = 0; f < 3; f++) {
                const int64_t *v = shapes[s];
                if (setup(&cs[n], v, fmts[f], b)) {
                    fprintf(stderr, "bench_conv: setup failed: %s\n", mft_last_error_message());
                    return 1;
                }
                bc[n].key = cs[n].key;
                bc[n].desc = cs[n].key;
                bc[n].fn = run_conv;
                bc[n].ctx = &cs[n];
                bc[n].bytes = cs[n].bytes;
                bc[n].samples = samples + (size_t)n * (size_t)reps;
                n++;
            }
    const size_t sn = (size_t)32 << 20; /* 2 x 128 MB buffers */
    float *sa = bench_alloc(sn * sizeof(float)), *sb = bench_alloc(sn * sizeof(float));
    if (!sa || !sb) return 1;
    bench_fill_f32(sb, sn, 7);
    if (json) printf("{\"bench\":\"conv\",\"results\":[");
    for (int t = 0; t < nth; t++) {
        const int T = threads[t];
        mft_set_num_threads(T);
        /* references */
        double st[5], pk[5];
        for (int r = 0; r < 5; r++) {
            double t0 = bench_now();
            bench_stream_copy_f32(sa, sb, sn, T);
            st[r] = bench_now() - t0;
            t0 = bench_now();
            double fl = bench_fma_peak_flops(20000000L, T);
            pk[r] = fl / (bench_now() - t0);
        }
        const double stream_gbs = 2.0 * (double)sn * 4.0 / bench_median(st, 5) / 1e9;
        const double peak_gf = bench_median(pk, 5) / 1e9;
        bench_opts o = bench_default_opts();
        o.reps = reps;
        o.blocked = blocked;
        if (bench_run(bc, n, &o)) {
            fprintf(stderr, "bench_conv: %s\n", mft_last_error_message());
            return 1;
        }
        if (json) {
            printf("%s{\"threads\":%d,\"refs\":{\"fma_peak_gflops\":", t ? "," : "", T);
            bench_json_num(stdout, peak_gf);
            printf(",\"stream_copy_gbs\":");
            bench_json_num(stdout, stream_gbs);
            printf("},\"cases\":[");
            for (int i = 0; i < n; i++) {
                printf("%s{\"key\":", i ? "," : "");
                bench_json_str(stdout, cs[i].key);
                printf(",\"seconds\":");
                bench_json_num(stdout, bc[i].stats.median);
                printf(",\"flops\":");
                bench_json_num(stdout, cs[i].flops);
                printf(",\"bytes\":");
                bench_json_num(stdout, cs[i].bytes);
                printf("}");
            }
            printf("]}");
        } else {
            printf("threads %d: FMA peak %.1f GFLOP/s, STREAM copy %.1f GB/s\n", T, peak_gf,
                   stream_gbs);
            printf("  %-40s %10s %10s %8s %8s  %s\n", "case", "ms", "GFLOP/s", "%peak", "GB/s",
                   "kernel");
            for (int i = 0; i < n; i++) {
                run_conv(&cs[i]);
                const double sec = bc[i].stats.median;
                printf("  %-40s %10.3f %10.1f %7.1f%% %8.1f  %s\n", cs[i].key, sec * 1e3,
                       cs[i].flops / sec / 1e9, 100.0 * cs[i].flops / sec / 1e9 / peak_gf,
                       cs[i].bytes / sec / 1e9, mft_dispatch_last()->kernel);
            }
        }
    }
    if (json) printf("]}\n");
    for (int i = 0; i < n; i++) {
        mft_tensor_release(cs[i].x);
        mft_tensor_release(cs[i].w);
        mft_tensor_release(cs[i].gy);
    }
    free(cs);
    free(bc);
    free(samples);
    free(sa);
    free(sb);
    return 0;
}
