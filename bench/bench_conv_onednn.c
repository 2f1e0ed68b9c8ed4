/* bench/bench_conv_onednn.c — conv2d on nChw16c activations, mft against
 * oneDNN 2.6 (Debian libdnnl-dev, called from C), side by side in one run.
 *
 * Per (shape, threads), interleaved by bench_run (medians of --reps):
 *   mft fwd     mft_conv2d(x, w, NULL, ...): x packed nChw16c, w a plain
 *               (K, C, k, k) tensor as users keep it (the kernel reorders it
 *               per call: that cost is in the time);
 *   mft f+b     forward, then mft_conv2d_backward for grad_x and grad_w;
 *   mft fwd bw  the same with the weight pre-blocked once outside the timing,
 *   mft f+b bw  as oneDNN's (OIhw16i16o; Ohwi16o for C < 16, whose x is then
 *               plain NCHW as oneDNN's first layer: conv2d reads it in place,
 *               and grad_x, plain, goes through the counted fallback);
 *   dnnl fwd    oneDNN's convolution (direct) with src / dst nChw16c and the
 *               weights already in the layout it chose (format "any",
 *               reordered once outside the timing); for C < 16 (a first
 *               layer) the src is plain nchw, oneDNN's own first-layer
 *               configuration (its nChw16c src runs a reference kernel there);
 *   dnnl f+b    forward, backward_data and backward_weights primitives.
 * --passes times the two backward passes alone instead, each against its
 * oneDNN primitive (mft with the blocked weight: grad_x only, grad_w only).
 * Each primitive is created once outside the timing. Threads: mft_set_num_
 * threads(T) for mft, omp_set_num_threads(T) for oneDNN (OpenMP runtime).
 * Ratios printed are oneDNN time / mft time (> 1: mft faster).
 *
 * Without oneDNN (no libdnnl-dev at configure time) the program says so and
 * exits 0. Shapes: the four ResNet 3x3 ones, the 1x1 one and the Fashion-
 * MNIST first layer; --shape N,C,H,W,K,k,stride[,groups] (pad k/2) replaces
 * them; --depthwise runs the MobileNet depthwise layers instead (N = 8, 3x3,
 * groups = C: 32 at 112x112, 64 at 56x56 stride 2, 128 at 28x28, 256 at
 * 14x14), oneDNN's weights (G, 1, 1, k, k) in its chosen layout (Goihw16g). */
#include "bench_util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mft/mft.h"
#ifdef MFT_BENCH_HAVE_DNNL
#include <omp.h>
#include <dnnl.h>
#endif

#define MAX_SHAPES 16
#define MAX_THREADS 4

typedef struct shape {
    int64_t n, c, h, w, k, r, s, g; /* s: stride; pad r / 2; g: groups */
} shape;

#ifdef MFT_BENCH_HAVE_DNNL
typedef struct dnnl_conv {
    dnnl_engine_t eng;
    dnnl_stream_t st;
    dnnl_primitive_desc_t pd[3]; /* fwd, bwd data, bwd weights */
    dnnl_primitive_t p[3];
    dnnl_memory_t src, wei, dst, dsrc, dwei, ddst;
} dnnl_conv;

static int dn_ok(dnnl_status_t s, const char *what) {
    if (s == dnnl_success) return 1;
    fprintf(stderr, "bench_conv_onednn: %s failed (%d)\n", what, (int)s);
    return 0;
}

static void dn_free(dnnl_conv *d) {
    for (int i = 0; i < 3; i++) {
        if (d->p[i]) dnnl_primitive_destroy(d->p[i]);
        if (d->pd[i]) dnnl_primitive_desc_destroy(d->pd[i]);
    }
    dnnl_memory_t m[6] = {d->src, d->wei, d->dst, d->dsrc, d->dwei, d->ddst};
    for (int i = 0; i < 6; i++)
        if (m[i]) dnnl_memory_destroy(m[i]);
    if (d->st) dnnl_stream_destroy(d->st);
    if (d->eng) dnnl_engine_destroy(d->eng);
    memset(d, 0, sizeof *d);
}

/* A memory of the descriptor pd chose for `what`, filled with small values. */
static int dn_mem(dnnl_conv *d, const dnnl_primitive_desc_t pd, dnnl_query_t what,
                  dnnl_memory_t *m) {
    const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, what, 0);
    if (!md || !dn_ok(dnnl_memory_create(m, md, d->eng, DNNL_MEMORY_ALLOCATE), "memory"))
        return 0;
    void *h = NULL;
    dnnl_memory_get_data_handle(*m, &h);
    bench_fill_f32(h, dnnl_memory_desc_get_size(md) / sizeof(float), 7);
    return 1;
}

static int dn_init(dnnl_conv *d, const shape *s) {
    memset(d, 0, sizeof *d);
    const int64_t pad = s->r / 2, oh = (s->h + 2 * pad - s->r) / s->s + 1,
                  ow = (s->w + 2 * pad - s->r) / s->s + 1;
    dnnl_dims_t src = {s->n, s->c, s->h, s->w}, dst = {s->n, s->k, oh, ow}, str = {s->s, s->s},
                pl = {pad, pad};
    dnnl_dims_t wei = {s->k, s->c, s->r, s->r}, gwei = {s->g, s->k / s->g, s->c / s->g, s->r, s->r};
    dnnl_memory_desc_t msrc, mwei, mdst;
    if (!dn_ok(dnnl_engine_create(&d->eng, dnnl_cpu, 0), "engine") ||
        !dn_ok(dnnl_stream_create(&d->st, d->eng, dnnl_stream_default_flags), "stream") ||
        !dn_ok(dnnl_memory_desc_init_by_tag(&msrc, 4, src, dnnl_f32,
                                            s->c < 16 ? dnnl_nchw : dnnl_nChw16c),
               "md") ||
        !dn_ok(dnnl_memory_desc_init_by_tag(&mwei, s->g > 1 ? 5 : 4, s->g > 1 ? gwei : wei,
                                            dnnl_f32, dnnl_format_tag_any),
               "md") ||
        !dn_ok(dnnl_memory_desc_init_by_tag(&mdst, 4, dst, dnnl_f32, dnnl_nChw16c), "md"))
        return 0;
    dnnl_convolution_desc_t cf, cbd, cbw;
    if (!dn_ok(dnnl_convolution_forward_desc_init(&cf, dnnl_forward_training,
                                                  dnnl_convolution_direct, &msrc, &mwei, NULL,
                                                  &mdst, str, pl, pl),
               "forward desc") ||
        !dn_ok(dnnl_primitive_desc_create(&d->pd[0], &cf, NULL, d->eng, NULL), "forward pd") ||
        !dn_ok(dnnl_convolution_backward_data_desc_init(&cbd, dnnl_convolution_direct, &msrc,
                                                        &mwei, &mdst, str, pl, pl),
               "bwd data desc") ||
        !dn_ok(dnnl_primitive_desc_create(&d->pd[1], &cbd, NULL, d->eng, d->pd[0]), "bwd data pd") ||
        !dn_ok(dnnl_convolution_backward_weights_desc_init(&cbw, dnnl_convolution_direct, &msrc,
                                                           &mwei, NULL, &mdst, str, pl, pl),
               "bwd weights desc") ||
        !dn_ok(dnnl_primitive_desc_create(&d->pd[2], &cbw, NULL, d->eng, d->pd[0]),
               "bwd weights pd"))
        return 0;
    for (int i = 0; i < 3; i++)
        if (!dn_ok(dnnl_primitive_create(&d->p[i], d->pd[i]), "primitive")) return 0;
    return dn_mem(d, d->pd[0], dnnl_query_src_md, &d->src) &&
           dn_mem(d, d->pd[0], dnnl_query_weights_md, &d->wei) &&
           dn_mem(d, d->pd[0], dnnl_query_dst_md, &d->dst) &&
           dn_mem(d, d->pd[1], dnnl_query_diff_src_md, &d->dsrc) &&
           dn_mem(d, d->pd[2], dnnl_query_diff_weights_md, &d->dwei) &&
           dn_mem(d, d->pd[1], dnnl_query_diff_dst_md, &d->ddst);
}

/* primitive i of d on its three arguments, then a wait (0 on success) */
static int dn_exec(dnnl_conv *d, int i, int k0, dnnl_memory_t m0, int k1, dnnl_memory_t m1, int k2,
                   dnnl_memory_t m2) {
    dnnl_exec_arg_t a[3] = {{k0, m0}, {k1, m1}, {k2, m2}};
    return dnnl_primitive_execute(d->p[i], d->st, 3, a) == dnnl_success &&
                   dnnl_stream_wait(d->st) == dnnl_success
               ? 0
               : 1;
}

static int dn_fwd(dnnl_conv *d) {
    return dn_exec(d, 0, DNNL_ARG_SRC, d->src, DNNL_ARG_WEIGHTS, d->wei, DNNL_ARG_DST, d->dst);
}
static int dn_bd(dnnl_conv *d) {
    return dn_exec(d, 1, DNNL_ARG_DIFF_DST, d->ddst, DNNL_ARG_WEIGHTS, d->wei, DNNL_ARG_DIFF_SRC,
                   d->dsrc);
}
static int dn_bw(dnnl_conv *d) {
    return dn_exec(d, 2, DNNL_ARG_SRC, d->src, DNNL_ARG_DIFF_DST, d->ddst, DNNL_ARG_DIFF_WEIGHTS,
                   d->dwei);
}
static int dn_fb(dnnl_conv *d) { return dn_fwd(d) || dn_bd(d) || dn_bw(d) ? 1 : 0; }
#endif

typedef struct mft_conv {
    mft_tensor *x, *w, *g;
    int64_t stride[2], pad[2], dil[2], groups;
} mft_conv;

/* w in oneDNN's weight layout tag (new tensor; NULL on failure) */
static mft_tensor *to_onednn(const mft_tensor *w, const char *tag) {
    mft_layout l;
    return mft_layout_from_onednn(4, mft_tensor_sizes(w), tag, &l) == MFT_OK ? mft_to_layout(w, &l)
                                                                            : NULL;
}

static int mft_fwd(void *vc) {
    mft_conv *c = vc;
    mft_scope_begin();
    mft_tensor *y = mft_conv2d(c->x, c->w, NULL, c->stride, c->pad, c->dil, c->groups);
    mft_scope_end();
    return y ? 0 : 1;
}

static int mft_fb(void *vc) {
    mft_conv *c = vc;
    mft_scope_begin();
    mft_tensor *y = mft_conv2d(c->x, c->w, NULL, c->stride, c->pad, c->dil, c->groups);
    mft_tensor *gx = NULL, *gw = NULL;
    mft_status st = y ? mft_conv2d_backward(c->g, c->x, c->w, c->stride, c->pad, c->dil,
                                            c->groups, &gx, &gw, NULL)
                      : MFT_ERR_INVALID;
    mft_tensor_release(gx);
    mft_tensor_release(gw);
    mft_scope_end();
    return st == MFT_OK ? 0 : 1;
}

/* one backward pass alone: grad_x (gw == false) or grad_w */
static int mft_bpass(mft_conv *c, bool gw) {
    mft_tensor *g = NULL;
    const mft_status st = mft_conv2d_backward(c->g, c->x, c->w, c->stride, c->pad, c->dil,
                                              c->groups, gw ? NULL : &g, gw ? &g : NULL, NULL);
    mft_tensor_release(g);
    return st == MFT_OK ? 0 : 1;
}
static int mft_bd(void *vc) { return mft_bpass(vc, false); }
static int mft_bw(void *vc) { return mft_bpass(vc, true); }

#ifdef MFT_BENCH_HAVE_DNNL
static int dn_fwd_case(void *d) { return dn_fwd(d); }
static int dn_fb_case(void *d) { return dn_fb(d); }
static int dn_bd_case(void *d) { return dn_bd(d); }
static int dn_bw_case(void *d) { return dn_bw(d); }
#endif

int main(int argc, char **argv) {
    shape shapes[MAX_SHAPES] = {{8, 64, 56, 56, 64, 3, 1, 1},   {8, 128, 28, 28, 128, 3, 1, 1},
                                {8, 256, 14, 14, 256, 3, 1, 1}, {8, 512, 7, 7, 512, 3, 1, 1},
                                {8, 256, 14, 14, 64, 1, 1, 1},  {64, 1, 28, 28, 32, 3, 1, 1}};
    static const shape mobilenet_dw[4] = {{8, 32, 112, 112, 32, 3, 1, 32},
                                          {8, 64, 56, 56, 64, 3, 2, 64},
                                          {8, 128, 28, 28, 128, 3, 1, 128},
                                          {8, 256, 14, 14, 256, 3, 1, 256}};
    int nshapes = 6, threads[MAX_THREADS] = {1, 2}, nth = 2, reps = 7, custom = 0, passes = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            nth = bench_parse_int_list(argv[++i], threads, MAX_THREADS);
        } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            reps = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--passes")) {
            passes = 1;
        } else if (!strcmp(argv[i], "--depthwise") && !custom) {
            nshapes = 4, custom = 1;
            memcpy(shapes, mobilenet_dw, sizeof mobilenet_dw);
        } else if (!strcmp(argv[i], "--shape") && i + 1 < argc && nshapes < MAX_SHAPES) {
            int64_t v[8] = {0, 0, 0, 0, 0, 0, 0, 1};
            const int nv = bench_parse_dims(argv[++i], v, 8);
            if ((nv != 7 && nv != 8) || v[7] < 1 || v[1] % v[7] || v[4] % v[7]) {
                fprintf(stderr, "bench_conv_onednn: --shape N,C,H,W,K,k,stride[,groups]\n");
                return 2;
            }
            if (!custom) nshapes = 0, custom = 1;
            shapes[nshapes++] = (shape){v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]};
        } else {
            fprintf(stderr,
                    "usage: %s [--threads 1,2] [--reps 7] [--depthwise] [--passes]\n"
                    "          [--shape N,C,H,W,K,k,stride[,groups]]...\n",
                    argv[0]);
            return 2;
        }
    }
    if (nth <= 0 || reps <= 0) return 2;
#ifndef MFT_BENCH_HAVE_DNNL
    (void)shapes;
    (void)threads;
    printf("bench_conv_onednn: built without oneDNN (apt-get install libdnnl-dev, reconfigure)\n");
    return 0;
#else
    bench_env_warnings("bench_conv_onednn", threads, nth);
    printf("conv2d on nChw16c: ratio = oneDNN 2.6 time / mft time (> 1: mft faster); medians of %d\n",
           reps);
    printf("%-26s %2s %10s %10s %10s %6s %6s %10s %10s %10s %6s %6s\n", "shape N,C,H,W->K kxk/s",
           "T", "mft fwd", "mft fwd bw", "dnnl fwd", "ratio", "r bw", "mft f+b", "mft f+b bw",
           "dnnl f+b", "ratio", "r bw");
    for (int si = 0; si < nshapes; si++) {
        const shape *s = &shapes[si];
        const int64_t pad = s->r / 2;
        const int64_t xs[4] = {s->n, s->c, s->h, s->w}, ws[4] = {s->k, s->c / s->g, s->r, s->r};
        const int64_t oh = (s->h + 2 * pad - s->r) / s->s + 1, ow = (s->w + 2 * pad - s->r) / s->s + 1;
        const int64_t gs[4] = {s->n, s->k, oh, ow};
        mft_conv mc = {mft_randn(4, xs, MFT_F32, MFT_NCHW16C, 1), mft_randn(4, ws, MFT_F32, MFT_CONTIGUOUS, 2),
                       mft_randn(4, gs, MFT_F32, MFT_NCHW16C, 3), {s->s, s->s}, {pad, pad}, {1, 1},
                       s->g};
        /* the pre-blocked weight (groups 1; a depthwise weight stays plain);
         * a first layer's x plain NCHW */
        const bool blk = s->g == 1;
        mft_conv mb = mc;
        mb.x = blk && s->c < 16 ? mft_randn(4, xs, MFT_F32, MFT_CONTIGUOUS, 1) : mft_tensor_retain(mc.x);
        mb.w = !mc.w ? NULL
               : blk ? to_onednn(mc.w, s->c < 16 ? "Ohwi16o" : "OIhw16i16o")
                     : mft_tensor_retain(mc.w);
        for (int ti = 0; ti < nth && mc.x && mc.w && mc.g && mb.x && mb.w; ti++) {
            const int T = threads[ti];
            mft_set_num_threads(T);
            omp_set_num_threads(T);
            /* oneDNN fixes a primitive's thread count when it is created:
             * create them under T threads, once per T */
            dnnl_conv dc;
            const int have_dnnl = dn_init(&dc, s);
            if (have_dnnl && ti == 0) { /* which oneDNN implementations the primitives got */
                const char *impl[3] = {"?", "?", "?"};
                for (int i = 0; i < 3; i++)
                    dnnl_primitive_desc_query(dc.pd[i], dnnl_query_impl_info_str, 0, &impl[i]);
                printf("# oneDNN implementations: forward %s, backward data %s, backward weights "
                       "%s\n",
                       impl[0], impl[1], impl[2]);
            }
            if (passes) { /* the two backward passes alone, blocked weight */
                double ps[4][64];
                bench_case pc[4] = {
                    {"mft_bd", "mft backward data", mft_bd, &mb, 0, ps[0], {0}},
                    {"mft_bw", "mft backward weights", mft_bw, &mb, 0, ps[1], {0}},
                    {"dnnl_bd", "oneDNN backward data", have_dnnl ? dn_bd_case : NULL, &dc, 0,
                     ps[2], {0}},
                    {"dnnl_bw", "oneDNN backward weights", have_dnnl ? dn_bw_case : NULL, &dc, 0,
                     ps[3], {0}},
                };
                bench_opts o = bench_default_opts();
                o.reps = reps > 64 ? 64 : reps;
                o.warmup = 2;
                const int failed = bench_run(pc, have_dnnl ? 4 : 2, &o) != 0;
                dn_free(&dc);
                if (failed || !have_dnnl) {
                    fprintf(stderr, "bench_conv_onednn: --passes: %s\n",
                            failed ? mft_last_error_message() : "needs oneDNN");
                    break;
                }
                const double v[4] = {pc[0].stats.median * 1e3, pc[1].stats.median * 1e3,
                                     pc[2].stats.median * 1e3, pc[3].stats.median * 1e3};
                printf("%lld,%lld,%lld,%lld->%lld %lldx%lld/%lld T=%d  bwd data: mft %.3fms dnnl "
                       "%.3fms ratio %.2f   bwd weights: mft %.3fms dnnl %.3fms ratio %.2f\n",
                       (long long)s->n, (long long)s->c, (long long)s->h, (long long)s->w,
                       (long long)s->k, (long long)s->r, (long long)s->r, (long long)s->s, T, v[0],
                       v[2], v[2] / v[0], v[1], v[3], v[3] / v[1]);
                continue;
            }
            double samples[6][64];
            bench_case cases[6] = {
                {"mft_fwd", "mft forward", mft_fwd, &mc, 0, samples[0], {0}},
                {"mft_fb", "mft forward+backward", mft_fb, &mc, 0, samples[1], {0}},
                {"mft_fwd_bw", "mft forward, blocked weight", mft_fwd, &mb, 0, samples[4], {0}},
                {"mft_fb_bw", "mft forward+backward, blocked weight", mft_fb, &mb, 0, samples[5], {0}},
                {"dnnl_fwd", "oneDNN forward", have_dnnl ? dn_fwd_case : NULL, &dc, 0, samples[2], {0}},
                {"dnnl_fb", "oneDNN forward+backward", have_dnnl ? dn_fb_case : NULL, &dc, 0, samples[3], {0}},
            };
            bench_opts o = bench_default_opts();
            o.reps = reps > 64 ? 64 : reps;
            o.warmup = 2;
            const int failed = bench_run(cases, have_dnnl ? 6 : 4, &o) != 0;
            dn_free(&dc);
            if (failed) {
                fprintf(stderr, "bench_conv_onednn: a case failed: %s\n", mft_last_error_message());
                break;
            }
            char name[80];
            snprintf(name, sizeof name, "%lld,%lld,%lld,%lld->%lld %lldx%lld/%lld%s", (long long)s->n,
                     (long long)s->c, (long long)s->h, (long long)s->w, (long long)s->k,
                     (long long)s->r, (long long)s->r, (long long)s->s, s->g > 1 ? " dw" : "");
            const double mf = cases[0].stats.median * 1e3, mfb = cases[1].stats.median * 1e3;
            const double bf = cases[2].stats.median * 1e3, bfb = cases[3].stats.median * 1e3;
            if (have_dnnl) {
                const double df = cases[4].stats.median * 1e3, db = cases[5].stats.median * 1e3;
                printf("%-26s %2d %9.3fms %9.3fms %9.3fms %6.2f %6.2f %9.3fms %9.3fms %9.3fms %6.2f "
                       "%6.2f\n",
                       name, T, mf, bf, df, df / mf, df / bf, mfb, bfb, db, db / mfb, db / bfb);
            } else {
                printf("%-26s %2d %9.3fms %9.3fms %10s %6s %6s %9.3fms %9.3fms %10s %6s %6s\n", name,
                       T, mf, bf, "n/a", "-", "-", mfb, bfb, "n/a", "-", "-");
            }
        }
        mft_tensor_release(mc.x);
        mft_tensor_release(mc.w);
        mft_tensor_release(mc.g);
        mft_tensor_release(mb.x);
        mft_tensor_release(mb.w);
    }
    mft_set_num_threads(0);
    return 0;
#endif
}
