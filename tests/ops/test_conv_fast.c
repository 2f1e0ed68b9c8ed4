/* tests/ops/test_conv_fast.c — the fast convolution kernels of ops/conv/ (chains.c
 * and the kernel files it picks),
 * called directly (mft_kernel_args built here, kernels looked up in
 * mft__kernels_conv_fast by op/format/dtype) and compared with a naive loop
 * written here (double accumulation; tolerance relative to sum |a*b|) over
 * sweeps of stride, padding, dilation, groups, depthwise multipliers, 1x1,
 * C_in/C_out = 1, odd channel counts, N = 1, 1x1 outputs, 3-D cases, in
 * NCHW and NHWC, with contiguous and channels-last weights. Also: results
 * bitwise identical at 1 and 2 threads, the portable micro-kernels and the
 * direct-loop fallback (forced, and through a failing allocator hook), and
 * Winograd's two forward schedules (forced) agreeing bit for bit. */
#include <string.h>
#include "mft/conv.h"
#include "conv/conv_internal.h"
#include "fail_alloc.h"
#include "test_util.h"

void mft__conv_fast_set_mode(int mode);

/* Tolerance factor of check_out: 1 for the direct kernels; Winograd rounds
 * more (Note [Winograd F(4x4, 3x3)]) and its tests set it higher. */
static double tol_scale = 1.0;
static double worst_ratio = 0.0; /* largest |got - want| / tol seen (report) */

static const mft__kernel_def *find_kernel(mft__op_id op, mft_format fmt, mft_dtype dt) {
    for (const mft__kernel_def *k = mft__kernels_conv_fast; k->fn; k++)
        if (k->op == op && k->fmt == fmt && k->dtype == dt) return k;
    return NULL;
}

static uint32_t rng_state = 12345u;
static float rnd(void) {
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)((int)(rng_state >> 9) % 2001 - 1000) / 500.0f;
}

/* Random packed tensor in fmt. */
static mft_tensor *rand_tensor(int nd, const int64_t *sizes, mft_format fmt) {
    mft_tensor *t = mft_empty(nd, sizes, MFT_F32, MFT_CONTIGUOUS);
    if (!t) return NULL;
    float *p = mft_tensor_data(t);
    for (int64_t i = 0; i < mft_tensor_numel(t); i++) p[i] = rnd();
    if (fmt == MFT_CONTIGUOUS) return t;
    mft_tensor *c = mft_contiguous(t, fmt);
    mft_tensor_release(t);
    return c;
}

/* Element (i0, i1, sp...) of a rank-(2+ns) F32 tensor; 3 spatial indices,
 * the first ignored when ns == 2. */
static double at(const mft_tensor *t, int ns, int64_t a, int64_t b, const int64_t *sp) {
    const float *p = (const float *)(const void *)mft__tensor_ptr(t);
    int64_t off = a * t->strides[0] + b * t->strides[1];
    for (int i = 0; i < ns; i++) off += sp[3 - ns + i] * t->strides[2 + i];
    return p[off];
}

typedef struct ccase {
    int ns;
    int64_t N, Cin, Cout, G;
    int64_t in[3], k[3], s[3], p[3], d[3];
    bool bias;
} ccase;

static int64_t osz(const ccase *c, int i) {
    return (c->in[i] + 2 * c->p[i] - c->d[i] * (c->k[i] - 1) - 1) / c->s[i] + 1;
}

/* op 0 forward, 1 backward_input, 2 backward_weight. Naive value and
 * sum |terms| of output element (a, b, sp) (a = n or co, b = c or ci). */
static void naive(const ccase *c, int op, const mft_tensor *A, const mft_tensor *B,
                  const mft_tensor *bias, int64_t a, int64_t b, const int64_t *sp, double *val,
                  double *mag) {
    const int ns = c->ns;
    const int64_t Cgi = c->Cin / c->G, Cgo = c->Cout / c->G;
    int64_t O[3] = {1, 1, 1}, I[3] = {1, 1, 1}, K[3] = {1, 1, 1}, S[3] = {1, 1, 1},
            P[3] = {0, 0, 0}, D[3] = {1, 1, 1};
    for (int i = 3 - ns; i < 3; i++) {
        O[i] = osz(c, i), I[i] = c->in[i], K[i] = c->k[i], S[i] = c->s[i], P[i] = c->p[i];
        D[i] = c->d[i];
    }
    double s = 0, m = 0;
    if (op == 0) { /* A = x, B = w; y[n=a][co=b][sp] */
        const int64_t g = b / Cgo;
        if (bias) s = ((const float *)mft_tensor_data(bias))[b];
        for (int64_t ci = 0; ci < Cgi; ci++)
            for (int64_t kd = 0; kd < K[0]; kd++)
                for (int64_t kh = 0; kh < K[1]; kh++)
                    for (int64_t kw = 0; kw < K[2]; kw++) {
                        int64_t ip[3] = {sp[0] * S[0] - P[0] + kd * D[0],
                                         sp[1] * S[1] - P[1] + kh * D[1],
                                         sp[2] * S[2] - P[2] + kw * D[2]};
                        bool ok = true;
                        for (int i = 0; i < 3; i++) ok &= ip[i] >= 0 && ip[i] < I[i];
                        if (!ok) continue;
                        int64_t kk[3] = {kd, kh, kw};
                        double v = at(A, ns, a, g * Cgi + ci, ip) * at(B, ns, b, ci, kk);
                        s += v;
                        m += fabs(v);
                    }
    } else if (op == 1) { /* A = grad_y, B = w; grad_x[n=a][c=b][sp] */
        const int64_t g = b / Cgi, ci = b % Cgi;
        if (bias) s = ((const float *)mft_tensor_data(bias))[b];
        for (int64_t co = g * Cgo; co < (g + 1) * Cgo; co++)
            for (int64_t kd = 0; kd < K[0]; kd++)
                for (int64_t kh = 0; kh < K[1]; kh++)
                    for (int64_t kw = 0; kw < K[2]; kw++) {
                        int64_t kk[3] = {kd, kh, kw}, op_[3];
                        bool ok = true;
                        for (int i = 0; i < 3; i++) {
                            int64_t v = sp[i] + P[i] - kk[i] * D[i];
                            ok &= v >= 0 && v % S[i] == 0 && v / S[i] < O[i];
                            op_[i] = v / S[i];
                        }
                        if (!ok) continue;
                        double v = at(A, ns, a, co, op_) * at(B, ns, co, ci, kk);
                        s += v;
                        m += fabs(v);
                    }
    } else { /* A = grad_y, B = x; grad_w[co=a][ci=b][k=sp] */
        const int64_t g = a / Cgo;
        for (int64_t n = 0; n < c->N; n++)
            for (int64_t od = 0; od < O[0]; od++)
                for (int64_t oh = 0; oh < O[1]; oh++)
                    for (int64_t ow = 0; ow < O[2]; ow++) {
                        int64_t o[3] = {od, oh, ow};
                        int64_t ip[3];
                        bool ok = true;
                        for (int i = 0; i < 3; i++) {
                            ip[i] = o[i] * S[i] - P[i] + sp[i] * D[i];
                            ok &= ip[i] >= 0 && ip[i] < I[i];
                        }
                        if (!ok) continue;
                        double v = at(A, ns, n, a, o) * at(B, ns, n, g * Cgi + b, ip);
                        s += v;
                        m += fabs(v);
                    }
    }
    *val = s;
    *mag = m;
}

/* Compares out (sizes d0 x d1 x spatial sz) with the naive loop. */
static bool check_out(const ccase *c, int op, const mft_tensor *A, const mft_tensor *B,
                      const mft_tensor *bias, const mft_tensor *out, const char *what) {
    const int ns = c->ns;
    int64_t sz[3] = {1, 1, 1};
    for (int i = 0; i < ns; i++) sz[3 - ns + i] = out->sizes[2 + i];
    int bad = 0;
    for (int64_t a = 0; a < out->sizes[0]; a++)
        for (int64_t b = 0; b < out->sizes[1]; b++)
            for (int64_t x0 = 0; x0 < sz[0]; x0++)
                for (int64_t x1 = 0; x1 < sz[1]; x1++)
                    for (int64_t x2 = 0; x2 < sz[2]; x2++) {
                        int64_t sp[3] = {x0, x1, x2};
                        double want, mag;
                        naive(c, op, A, B, bias, a, b, sp, &want, &mag);
                        double got = at(out, ns, a, b, sp);
                        double tol = tol_scale * (2e-6 * (mag + 1.0) + 1e-5 * mag / 8.0);
                        const double ratio = fabs(got - want) / tol;
                        if (ratio > worst_ratio) worst_ratio = ratio;
                        if (!(fabs(got - want) <= tol)) {
                            if (bad++ < 3)
                                CHECK_MSG(false,
                                          "%s op %d ns %d N%lld C%lld->%lld G%lld k%lld s%lld "
                                          "p%lld d%lld: [%lld,%lld,%lld,%lld,%lld] got %.7g want "
                                          "%.7g",
                                          what, op, ns, (long long)c->N, (long long)c->Cin,
                                          (long long)c->Cout, (long long)c->G, (long long)c->k[2],
                                          (long long)c->s[2], (long long)c->p[2],
                                          (long long)c->d[2], (long long)a, (long long)b,
                                          (long long)x0, (long long)x1, (long long)x2, got, want);
                        }
                    }
    if (!bad) CHECK(true);
    return bad == 0;
}

static mft_conv_params params_of(const ccase *c, const mft_tensor *bias) {
    mft_conv_params p;
    memset(&p, 0, sizeof p);
    p.nspatial = c->ns;
    for (int i = 0; i < c->ns; i++) {
        p.stride[i] = c->s[3 - c->ns + i];
        p.padding[i] = c->p[3 - c->ns + i];
        p.dilation[i] = c->d[3 - c->ns + i];
    }
    p.groups = c->G;
    p.bias = bias;
    return p;
}

/* Whether op (0 forward, 1 backward_input, 2 backward_weight) of case c runs Winograd in the
 * current mode (the library's own test of ops/conv/winograd.c, on the geometry
 * the kernels build); its results get the Winograd tolerance. */
#define WINO_TOL 8.0
static bool wino_runs(const ccase *c, int op) {
    if (c->ns != 2 || c->G != 1 || c->k[1] != 3 || c->k[2] != 3 || c->s[1] != 1 ||
        c->s[2] != 1 || c->d[1] != 1 || c->d[2] != 1 || (op == 1 && (c->p[1] > 2 || c->p[2] > 2)))
        return false;
    const int64_t OH = osz(c, 1), OW = osz(c, 2);
    mft__wino_geom g;
    memset(&g, 0, sizeof g);
    g.N = c->N, g.C = op ? c->Cout : c->Cin, g.K = op ? c->Cin : c->Cout;
    g.H = op ? OH : c->in[1], g.W = op ? OW : c->in[2];
    g.OH = op ? c->in[1] : OH, g.OW = op ? c->in[2] : OW;
    g.ph = op ? 2 - c->p[1] : c->p[1], g.pw = op ? 2 - c->p[2] : c->p[2];
    return mft__conv_wino_applies(&g);
}

/* Runs kernel k, returns a copy of its output's bytes (malloc'd). */
static void run_kernel(const mft__kernel_def *k, const mft_tensor *a0, const mft_tensor *a1,
                       mft_tensor *out, const mft_conv_params *p) {
    const mft_tensor *in[2] = {a0, a1};
    mft_tensor *outs[1] = {out};
    mft_kernel_args args = {2, 1, in, outs, p};
    /* poison the output: kernels must overwrite every element */
    float *o = mft_tensor_data(out);
    for (int64_t i = 0; i < mft_tensor_numel(out); i++) o[i] = NAN;
    k->fn(&args);
}

static bool same_bits(const mft_tensor *a, const mft_tensor *b) {
    return memcmp(mft_tensor_data(a), mft_tensor_data(b),
                  (size_t)mft_tensor_numel(a) * sizeof(float)) == 0;
}

/* One case through all three ops in format fmt, weights in wfmt. */
static void run_case(const ccase *c, mft_format fmt, mft_format wfmt, bool threads) {
    const int ns = c->ns, r = 2 + ns;
    mft__op_id ops[3] = {ns == 2 ? MFT__OP_CONV2D : MFT__OP_CONV3D,
                         ns == 2 ? MFT__OP_CONV2D_BACKWARD_INPUT : MFT__OP_CONV3D_BACKWARD_INPUT,
                         ns == 2 ? MFT__OP_CONV2D_BACKWARD_WEIGHT : MFT__OP_CONV3D_BACKWARD_WEIGHT};
    int64_t xs[5] = {c->N, c->Cin}, ys[5] = {c->N, c->Cout}, ws[5] = {c->Cout, c->Cin / c->G};
    for (int i = 0; i < ns; i++) {
        xs[2 + i] = c->in[3 - ns + i];
        ys[2 + i] = osz(c, 3 - ns + i);
        ws[2 + i] = c->k[3 - ns + i];
    }
    int64_t bs_o[1] = {c->Cout}, bs_i[1] = {c->Cin};
    mft_tensor *x = rand_tensor(r, xs, fmt), *w = rand_tensor(r, ws, wfmt);
    mft_tensor *gy = rand_tensor(r, ys, fmt);
    mft_tensor *bo = c->bias ? rand_tensor(1, bs_o, MFT_CONTIGUOUS) : NULL;
    mft_tensor *bi = c->bias ? rand_tensor(1, bs_i, MFT_CONTIGUOUS) : NULL;
    mft_tensor *y = mft_empty(r, ys, MFT_F32, fmt), *gx = mft_empty(r, xs, MFT_F32, fmt);
    mft_tensor *gw = mft_empty(r, ws, MFT_F32, fmt);
    CHECK(x && w && gy && y && gx && gw);
    if (!x || !w || !gy || !y || !gx || !gw) return;
    const char *fname = fmt == MFT_CONTIGUOUS ? "nchw" : "nhwc";
    for (int op = 0; op < 3; op++) {
        const mft__kernel_def *k = find_kernel(ops[op], fmt, MFT_F32);
        CHECK_MSG(k != NULL, "no kernel for op %d fmt %s", op, fname);
        if (!k) continue;
        const mft_tensor *bias = op == 0 ? bo : op == 1 ? bi : NULL;
        mft_conv_params p = params_of(c, bias);
        const mft_tensor *A = op == 0 ? x : gy, *B = op == 2 ? x : w;
        mft_tensor *out = op == 0 ? y : op == 1 ? gx : gw;
        if (threads) mft_set_num_threads(1);
        run_kernel(k, A, B, out, &p);
        const double scale = tol_scale;
        if (wino_runs(c, op)) tol_scale = WINO_TOL;
        const bool ok = check_out(c, op, A, B, bias, out, k->name);
        tol_scale = scale;
        if (!ok) continue;
        if (threads) {
            mft_tensor *copy = mft_clone(out, MFT_PRESERVE);
            mft_set_num_threads(2);
            run_kernel(k, A, B, out, &p);
            CHECK_MSG(copy && same_bits(copy, out), "%s: 1 vs 2 threads differ", k->name);
            mft_tensor_release(copy);
            mft_set_num_threads(0);
        }
    }
    mft_tensor_release(x);
    mft_tensor_release(w);
    mft_tensor_release(gy);
    mft_tensor_release(bo);
    mft_tensor_release(bi);
    mft_tensor_release(y);
    mft_tensor_release(gx);
    mft_tensor_release(gw);
}

static ccase mk2(int64_t N, int64_t Cin, int64_t Cout, int64_t G, int64_t H, int64_t W, int64_t k,
                 int64_t s, int64_t p, int64_t d, bool bias) {
    ccase c = {2, N, Cin, Cout, G, {1, H, W}, {1, k, k}, {1, s, s}, {0, p, p}, {1, d, d}, bias};
    return c;
}

static bool valid(const ccase *c) {
    for (int i = 0; i < 3; i++)
        if (osz(c, i) < 1) return false;
    return true;
}

static void sweep(bool threads) {
    const mft_format fmts[2] = {MFT_CHANNELS_LAST, MFT_CONTIGUOUS};
    /* stride x padding x dilation on a small odd image */
    for (int64_t s = 1; s <= 3; s++)
        for (int64_t p = 0; p <= 2; p++)
            for (int64_t d = 1; d <= 2; d++) {
                ccase c = mk2(2, 5, 19, 1, 9, 7, 3, s, p, d, (s + p) % 2 == 0);
                if (!valid(&c)) continue;
                for (int f = 0; f < 2; f++) run_case(&c, fmts[f], fmts[(s + d) % 2], threads);
            }
    /* padding larger than kernel/2, asymmetric H/W kernel */
    {
        ccase c = mk2(1, 3, 17, 1, 5, 6, 3, 1, 2, 1, true);
        c.k[1] = 2;
        c.p[2] = 1;
        for (int f = 0; f < 2; f++) run_case(&c, fmts[f], MFT_CONTIGUOUS, threads);
    }
    /* groups, odd channel counts, C = 1, 1x1, N = 1, 1x1 output */
    const ccase cs[] = {
        mk2(2, 8, 12, 2, 6, 5, 3, 1, 1, 1, true),   mk2(1, 16, 32, 4, 7, 7, 3, 2, 1, 1, false),
        mk2(2, 33, 17, 1, 5, 5, 3, 1, 1, 1, true),  mk2(3, 17, 33, 1, 4, 6, 1, 1, 0, 1, true),
        mk2(2, 1, 8, 1, 7, 6, 3, 1, 1, 1, true),    mk2(2, 7, 1, 1, 6, 7, 3, 1, 1, 1, true),
        mk2(1, 1, 1, 1, 5, 5, 3, 1, 0, 1, false),   mk2(2, 6, 6, 6, 7, 5, 3, 1, 1, 1, true),
        mk2(2, 5, 10, 5, 7, 6, 3, 2, 1, 1, true),   mk2(1, 12, 12, 12, 6, 6, 3, 1, 2, 2, false),
        mk2(2, 9, 20, 1, 3, 3, 3, 1, 0, 1, true),   mk2(1, 40, 24, 1, 1, 1, 1, 1, 0, 1, true),
        mk2(4, 20, 36, 1, 8, 8, 1, 1, 0, 1, false), mk2(2, 6, 40, 2, 5, 7, 5, 2, 2, 1, true),
        mk2(1, 3, 5, 1, 2, 3, 3, 1, 2, 2, true),    mk2(1, 4, 4, 2, 9, 9, 2, 3, 0, 2, false),
        mk2(2, 40, 40, 40, 5, 6, 3, 1, 1, 1, true), mk2(1, 37, 37, 37, 4, 5, 3, 2, 1, 1, true),
        mk2(2, 1, 40, 1, 6, 6, 3, 1, 1, 1, true),   mk2(1, 3, 48, 3, 5, 5, 3, 1, 1, 2, true),
        /* dense NCHW: per-image transposes (N >= 8), pointwise GEMM path (1x1,
         * stride 1, no padding; bias, groups, odd channels and plane sizes),
         * 1x1 with stride (not pointwise) */
        mk2(8, 5, 19, 1, 6, 7, 3, 1, 1, 1, true),   mk2(9, 12, 8, 2, 5, 4, 3, 2, 1, 2, false),
        mk2(8, 20, 36, 2, 5, 6, 1, 1, 0, 1, true),  mk2(2, 17, 13, 1, 9, 9, 1, 1, 0, 1, true),
        mk2(2, 40, 7, 1, 5, 5, 1, 2, 0, 1, true),   mk2(1, 7, 30, 1, 3, 11, 1, 1, 0, 1, false),
        /* depthwise (native NCHW kernels: unit W stride; backward_input unit strides):
         * rows longer than 32 and 8 with tails, multipliers, dilation, big padding,
         * 5x5, 1x1, H = 1, W = 1, stride 2 */
        mk2(2, 3, 3, 3, 5, 43, 3, 1, 1, 1, true),   mk2(1, 4, 12, 4, 6, 19, 3, 1, 2, 2, true),
        mk2(3, 2, 2, 2, 7, 9, 5, 1, 3, 1, false),   mk2(2, 5, 5, 5, 1, 11, 1, 1, 0, 1, true),
        mk2(2, 3, 6, 3, 1, 1, 3, 1, 1, 1, true),    mk2(2, 4, 4, 4, 9, 8, 3, 2, 1, 1, true),
        mk2(1, 2, 2, 2, 6, 40, 3, 1, 0, 3, false),  mk2(2, 1, 3, 1, 5, 9, 3, 1, 1, 1, true),
        /* one input channel, C_out % 16 == 0 (ops/conv/plane.c on AVX-512): one and
         * three 16-blocks, stride, dilation, padding wider than the kernel's reach,
         * 5x5 (taps in groups of 6 with a remainder), a 1x1 output, width < 6 */
        mk2(2, 1, 16, 1, 9, 7, 3, 2, 1, 1, true),   mk2(1, 1, 48, 1, 8, 11, 3, 1, 2, 2, false),
        mk2(2, 1, 32, 1, 9, 10, 5, 2, 0, 1, true),  mk2(3, 1, 32, 1, 3, 3, 3, 1, 0, 1, true),
        mk2(1, 1, 64, 1, 7, 4, 3, 1, 3, 1, true),   mk2(2, 1, 16, 1, 12, 13, 2, 3, 1, 2, false),
        /* depthwise with 64-channel blocks (AVX-512 pixel kernels) and a 16-channel tail;
         * stride and dilation */
        mk2(2, 64, 64, 64, 7, 9, 3, 1, 1, 1, true), mk2(1, 80, 80, 80, 6, 5, 3, 1, 1, 1, false),
        mk2(2, 64, 64, 64, 9, 8, 3, 2, 1, 2, true),
        /* the sliding forward (3 taps along W, unit stride and dilation, C % 16
         * == 0): one tap row (H = 1), two (edge rows), one interior pixel
         * (W = 3), no padding, padding 2, 16 and 48 channels */
        mk2(2, 64, 64, 64, 1, 9, 3, 1, 1, 1, true), mk2(1, 32, 32, 32, 5, 3, 3, 1, 1, 1, false),
        mk2(2, 48, 48, 48, 6, 12, 3, 1, 0, 1, true), mk2(1, 16, 16, 16, 4, 20, 3, 1, 2, 1, true),
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        for (int f = 0; f < 2; f++) run_case(&cs[i], fmts[f], fmts[(i + (size_t)f) % 2], threads);
    /* 3-D */
    const ccase c3[] = {
        {3, 2, 4, 9, 1, {4, 5, 3}, {3, 3, 2}, {1, 1, 1}, {1, 1, 0}, {1, 1, 1}, true},
        {3, 1, 6, 20, 2, {5, 4, 4}, {2, 3, 3}, {2, 1, 2}, {0, 1, 1}, {1, 2, 1}, false},
        {3, 2, 5, 10, 5, {3, 4, 5}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, true},
        {3, 1, 17, 3, 1, {2, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}, true},
        {3, 8, 6, 20, 2, {3, 4, 4}, {2, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, true},
        {3, 2, 9, 12, 1, {3, 4, 5}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}, true},
    };
    for (size_t i = 0; i < sizeof c3 / sizeof c3[0]; i++)
        for (int f = 0; f < 2; f++)
            run_case(&c3[i], fmts[f], fmts[(i + (size_t)f + 1) % 2], threads);
}

static void test_sweep(void) { sweep(false); }

/* Bitwise identical at 1 and 2 threads (bigger shapes: several work items). */
static void test_threads(void) {
    sweep(true);
    const ccase cs[] = {
        mk2(2, 32, 48, 1, 13, 11, 3, 1, 1, 1, true),
        mk2(3, 16, 16, 16, 9, 10, 3, 1, 1, 1, true),
        mk2(2, 1, 32, 1, 14, 14, 3, 1, 1, 1, true),
        /* dense NCHW: per-image path with several images per thread; pointwise */
        mk2(8, 24, 40, 1, 12, 13, 3, 1, 1, 1, true),
        mk2(2, 64, 48, 1, 20, 20, 1, 1, 0, 1, true),
        mk2(4, 32, 32, 32, 64, 64, 3, 1, 1, 1, true),
        /* big enough (2^22 outputs) for the streaming-store path of the depthwise kernels */
        mk2(1, 16, 16, 16, 512, 512, 3, 1, 1, 1, true),
        mk2(8, 1, 64, 1, 32, 32, 3, 1, 1, 1, true),
        /* native NCHW depthwise: several backward_weight chunks per channel */
        mk2(20, 3, 3, 3, 12, 37, 3, 1, 1, 1, true),
        /* row-chunked backward_weight (bwc_range / pwbc_range): 1x1 with several c_out
         * blocks; 4 output rows (< 8 chunks: per-block items), padded grad_y (c_out per
         * group 20), stride and padding; a 2x2 kernel (several taps per partial) */
        mk2(3, 64, 64, 1, 9, 31, 1, 1, 0, 1, false),
        mk2(1, 20, 40, 2, 5, 7, 1, 2, 1, 1, true),
        mk2(2, 13, 33, 1, 6, 9, 2, 1, 1, 1, true),
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        for (int f = 0; f < 2; f++)
            run_case(&cs[i], f ? MFT_CONTIGUOUS : MFT_CHANNELS_LAST, MFT_CONTIGUOUS, true);
}

static void test_portable(void) {
    mft__conv_fast_set_mode(1);
    sweep(false);
    mft__conv_fast_set_mode(2);
    sweep(false);
    mft__conv_fast_set_mode(0);
}

/* Note [Kernel scratch]: a kernel whose scratch allocation fails makes the op
 * fail with MFT_ERR_NOMEM naming the public function; it never computes the
 * result another way (which would round differently: before, the fallback
 * loops gave other bits, and with two threads some outputs were never
 * written). Every allocation of mft_conv2d and mft_conv2d_backward (each
 * algorithm these shapes reach: indirect 6x32 tiles, class order, pointwise,
 * depthwise, single-channel planes, NCHW per-image and transposed paths,
 * backward_weight chunks) fails in turn, alone and from there on; each run
 * gives the clean run's bits or NOMEM naming the function, and leaks
 * nothing. Workers allocate scratch inside parallel regions, hence the
 * atomic counters of fail_alloc.h. */
typedef struct conv_run {
    mft_tensor *y, *gx, *gw, *gb;
    mft_status st;
} conv_run;

static conv_run conv_public(const ccase *c, const mft_tensor *x, const mft_tensor *w,
                            const mft_tensor *b, const mft_tensor *gy) {
    const int64_t st[2] = {c->s[1], c->s[2]}, pd[2] = {c->p[1], c->p[2]},
                  dl[2] = {c->d[1], c->d[2]};
    conv_run r = {NULL, NULL, NULL, NULL, MFT_OK};
    r.y = mft_conv2d(x, w, b, st, pd, dl, c->G);
    if (!r.y) {
        r.st = mft_last_error();
        return r;
    }
    r.st = mft_conv2d_backward(gy, x, w, st, pd, dl, c->G, &r.gx, &r.gw, b ? &r.gb : NULL);
    return r;
}

static void conv_run_free(conv_run *r) {
    mft_tensor_release(r->y);
    mft_tensor_release(r->gx);
    mft_tensor_release(r->gw);
    mft_tensor_release(r->gb);
}

static void run_case_failing(const ccase *c, mft_format fmt) {
    const int r = 2 + c->ns;
    int64_t xs[4] = {c->N, c->Cin}, ys[4] = {c->N, c->Cout}, ws[4] = {c->Cout, c->Cin / c->G};
    for (int i = 0; i < c->ns; i++) {
        xs[2 + i] = c->in[1 + i];
        ys[2 + i] = osz(c, 1 + i);
        ws[2 + i] = c->k[1 + i];
    }
    int64_t bs[1] = {c->Cout};
    mft_tensor *x = rand_tensor(r, xs, fmt), *w = rand_tensor(r, ws, MFT_CONTIGUOUS);
    mft_tensor *gy = rand_tensor(r, ys, fmt);
    mft_tensor *b = c->bias ? rand_tensor(1, bs, MFT_CONTIGUOUS) : NULL;
    const long long live0 = mft_live_tensors();
    fa_install();
    conv_run clean = conv_public(c, x, w, b, gy);
    const long long n = g_fa.calls;
    int in_kernel = 0; /* failures the kernels themselves reported */
    CHECK(clean.st == MFT_OK && n > 0);
    for (int sticky = 0; sticky < 2; sticky++)
        for (long long k = 1; k <= n && clean.st == MFT_OK; k++) {
            fa_arm(k);
            g_fa.sticky = sticky;
            mft_clear_error();
            conv_run f = conv_public(c, x, w, b, gy);
            g_fa.fail_at = 0;
            g_fa.sticky = false;
            if (f.st == MFT_OK) { /* absorbed: the same bits */
                CHECK_MSG(mft_tensor_hash(f.y) == mft_tensor_hash(clean.y) &&
                              mft_tensor_hash(f.gx) == mft_tensor_hash(clean.gx) &&
                              mft_tensor_hash(f.gw) == mft_tensor_hash(clean.gw),
                          "fmt %d k %lld%s: an absorbed failure changed the result", (int)fmt, k,
                          sticky ? "+" : "");
            } else {
                const char *m = mft_last_error_message();
                CHECK_MSG(f.st == MFT_ERR_NOMEM && (strstr(m, "mft_conv2d:") == m ||
                                                    strstr(m, "mft_conv2d_backward:") == m),
                          "fmt %d k %lld%s: %s: %s", (int)fmt, k, sticky ? "+" : "",
                          mft_status_str(f.st), m);
                in_kernel += strstr(m, "of scratch for kernel") != NULL;
            }
            conv_run_free(&f);
            CHECK_EQ_I(mft_live_tensors(), live0 + 4 - (b ? 0 : 1));
        }
    conv_run_free(&clean);
    mft_set_allocator(NULL);
    CHECK_EQ_I(g_fa.live, 0);
    CHECK_MSG(in_kernel > 0, "fmt %d: no kernel scratch allocation was failed", (int)fmt);
    mft_tensor_release(x);
    mft_tensor_release(w);
    mft_tensor_release(gy);
    mft_tensor_release(b);
}

static void test_alloc_failure(void) {
    const ccase cs[] = {
        mk2(2, 5, 19, 1, 7, 6, 3, 2, 1, 1, true), mk2(2, 4, 8, 4, 6, 6, 3, 1, 1, 1, true),
        mk2(1, 6, 12, 2, 5, 7, 3, 1, 2, 2, true), mk2(2, 1, 8, 1, 6, 6, 3, 1, 1, 1, true),
        mk2(2, 7, 1, 1, 5, 6, 3, 1, 1, 1, true),  mk2(2, 9, 9, 9, 5, 6, 3, 2, 1, 1, true),
        mk2(2, 3, 6, 3, 5, 11, 3, 1, 1, 1, true), mk2(1, 4, 4, 4, 6, 9, 3, 1, 2, 2, true),
        mk2(9, 16, 32, 1, 6, 6, 3, 1, 1, 1, false), mk2(2, 16, 32, 1, 6, 6, 1, 1, 0, 1, true),
        mk2(3, 1, 16, 1, 9, 9, 3, 1, 1, 1, true)};
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        run_case_failing(&cs[i], MFT_CHANNELS_LAST);
        run_case_failing(&cs[i], MFT_CONTIGUOUS);
    }
}

static void test_table(void) {
    /* every op in both formats has an F32 kernel with a descriptive name */
    const mft__op_id ops[6] = {
        MFT__OP_CONV2D, MFT__OP_CONV2D_BACKWARD_INPUT, MFT__OP_CONV2D_BACKWARD_WEIGHT,
        MFT__OP_CONV3D, MFT__OP_CONV3D_BACKWARD_INPUT, MFT__OP_CONV3D_BACKWARD_WEIGHT};
    for (int i = 0; i < 6; i++)
        for (int f = 0; f < 2; f++) {
            const mft__kernel_def *k =
                find_kernel(ops[i], f ? MFT_CONTIGUOUS : MFT_CHANNELS_LAST, MFT_F32);
            CHECK_MSG(k && strstr(k->name, mft__op_name(ops[i])) == k->name, "op %s format %d",
                      mft__op_name(ops[i]), f);
        }
}

/* ---------------------------------------------------------------- Winograd
 * ops/conv/winograd.c, forced wherever legal (3x3, stride 1, dilation 1, groups
 * 1, 2-D): forward and backward_input against the naive loop with the
 * Winograd tolerance, bitwise at 1 and 2 threads. The shapes cover partial
 * tiles at the bottom and right (outputs % 4 = 1, 2, 3), padding 0-2 (so
 * backward_input's padding 2 - p is 2-0), unequal H and W padding, C and K
 * not multiples of 16 or 32 (masked vectors, zero weight columns), several
 * 32-channel blocks, one input or output channel, a 1x1 output, several
 * tile blocks with a partial last one, N = 1 and 3, with and without bias,
 * contiguous and channels-last weights, NHWC and NCHW activations. */
static void test_winograd(void) {
    mft__conv_wino_set_mode(1);
    worst_ratio = 0.0;
    ccase cs[] = {
        mk2(2, 5, 19, 1, 9, 7, 3, 1, 0, 1, true),   mk2(2, 5, 19, 1, 9, 7, 3, 1, 1, 1, false),
        mk2(2, 5, 19, 1, 9, 7, 3, 1, 2, 1, true),   mk2(1, 1, 1, 1, 5, 5, 3, 1, 0, 1, false),
        mk2(3, 33, 40, 1, 6, 10, 3, 1, 1, 1, true), mk2(1, 16, 32, 1, 1, 1, 3, 1, 1, 1, true),
        mk2(2, 17, 65, 1, 3, 4, 3, 1, 2, 1, false), mk2(2, 8, 16, 1, 41, 34, 3, 1, 1, 1, true),
        mk2(1, 70, 24, 1, 10, 9, 3, 1, 1, 1, true), mk2(2, 1, 40, 1, 8, 8, 3, 1, 1, 1, true),
        mk2(1, 40, 1, 1, 7, 12, 3, 1, 1, 1, false), mk2(1, 64, 64, 1, 14, 14, 3, 1, 1, 1, true),
        mk2(2, 12, 20, 1, 11, 6, 3, 1, 0, 1, true),
    };
    cs[12].p[1] = 2; /* padding (2, 0) */
    const mft_format fmts[2] = {MFT_CHANNELS_LAST, MFT_CONTIGUOUS};
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        for (int f = 0; f < 2; f++) run_case(&cs[i], fmts[f], fmts[(i + (size_t)f) % 2], true);
    printf("  winograd: worst error %.3f of the tolerance\n", worst_ratio);
    mft__conv_wino_set_mode(0);
}

/* Both forward schedules of Winograd (Note [Winograd on few tiles]), forced
 * (tile blocks, then few tiles), on few-tile shapes: C and K odd (17, 33),
 * past one 64-channel weight chunk (80, 130, with a partial last chunk),
 * tile counts not a multiple of 6, padding 0 and 1, with and without bias,
 * NHWC and NCHW: run_case under each (forward, backward_input and
 * backward_weight against the naive loop with the Winograd tolerance, 1
 * and 2 threads bitwise), and forward and backward_input bitwise the same
 * under the two schedules. */
static void schedules_agree(const ccase *c, mft_format fmt, mft_format wfmt) {
    int64_t xs[4] = {c->N, c->Cin, c->in[1], c->in[2]}, ws[4] = {c->Cout, c->Cin, 3, 3};
    int64_t ys[4] = {c->N, c->Cout, osz(c, 1), osz(c, 2)}, bs[1] = {c->Cout};
    mft_tensor *x = rand_tensor(4, xs, fmt), *w = rand_tensor(4, ws, wfmt);
    mft_tensor *gy = rand_tensor(4, ys, fmt), *b = rand_tensor(1, bs, MFT_CONTIGUOUS);
    const mft__op_id ops[2] = {MFT__OP_CONV2D, MFT__OP_CONV2D_BACKWARD_INPUT};
    for (int op = 0; op < 2; op++) {
        const mft__kernel_def *k = find_kernel(ops[op], fmt, MFT_F32);
        mft_conv_params p = params_of(c, op == 0 && c->bias ? b : NULL);
        mft_tensor *out[2];
        for (int sc = 0; sc < 2; sc++) {
            mft__conv_wino_set_schedule(sc + 1);
            out[sc] = mft_empty(4, op == 0 ? ys : xs, MFT_F32, fmt);
            if (k && out[sc]) run_kernel(k, op == 0 ? x : gy, w, out[sc], &p);
        }
        CHECK_MSG(k && same_bits(out[0], out[1]), "op %d %dx%dx%dx%d k%d: schedules differ", op,
                  (int)c->N, (int)c->Cin, (int)c->in[1], (int)c->in[2], (int)c->Cout);
        mft_tensor_release(out[0]);
        mft_tensor_release(out[1]);
    }
    mft__conv_wino_set_schedule(0);
    mft_tensor_release(x);
    mft_tensor_release(w);
    mft_tensor_release(gy);
    mft_tensor_release(b);
}

static void test_winograd_schedules(void) {
    mft__conv_wino_set_mode(1);
    worst_ratio = 0.0;
    const ccase cs[] = {
        mk2(2, 17, 33, 1, 7, 7, 3, 1, 0, 1, true),   mk2(2, 17, 33, 1, 7, 7, 3, 1, 1, 1, false),
        mk2(1, 33, 17, 1, 14, 14, 3, 1, 1, 1, true), mk2(3, 80, 40, 1, 7, 5, 3, 1, 1, 1, true),
        mk2(1, 130, 33, 1, 6, 9, 3, 1, 0, 1, false), mk2(1, 33, 130, 1, 5, 5, 3, 1, 1, 1, true),
    };
    const mft_format fmts[2] = {MFT_CHANNELS_LAST, MFT_CONTIGUOUS};
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        for (int f = 0; f < 2; f++) {
            for (int sc = 1; sc <= 2; sc++) {
                mft__conv_wino_set_schedule(sc);
                run_case(&cs[i], fmts[f], fmts[(i + (size_t)f) % 2], true);
            }
            schedules_agree(&cs[i], fmts[f], fmts[(i + (size_t)f) % 2]);
        }
    printf("  winograd schedules: worst error %.3f of the tolerance\n", worst_ratio);
    mft__conv_wino_set_schedule(0);
    mft__conv_wino_set_mode(0);
}

/* The public ops report the algorithm (the kernel name ends in
 * winograd_f4x3) where the size heuristic picks it, and
 * mft_conv_set_winograd(false) restores the direct kernels. */
static void test_winograd_dispatch(void) {
    const int64_t one[2] = {1, 1};
    const mft_format fmts[2] = {MFT_CHANNELS_LAST, MFT_CONTIGUOUS};
    for (int f = 0; f < 2; f++)
        for (int on = 1; on >= 0; on--) {
            mft_conv_set_winograd(on);
            CHECK(mft_conv_winograd() == (on == 1));
            int64_t xs[4] = {2, 32, 16, 16}, ws[4] = {32, 32, 3, 3};
            mft_tensor *x = rand_tensor(4, xs, fmts[f]), *w = rand_tensor(4, ws, fmts[f]);
            /* the heuristic's answer; on AVX-512 builds it is yes when on */
            const ccase c = mk2(2, 32, 32, 1, 16, 16, 3, 1, 1, 1, false);
            const bool expect = wino_runs(&c, 0);
            CHECK(wino_runs(&c, 1) == expect);
#if defined(__AVX512F__)
            CHECK(expect == (on == 1));
#else
            CHECK(!expect);
#endif
            mft_tensor *y = mft_conv2d(x, w, NULL, one, one, one, 1);
            CHECK(y != NULL);
            const char *k = mft_dispatch_last()->kernel;
            const bool wino = strstr(k, "winograd_f4x3") != NULL;
            CHECK_MSG(wino == expect && strstr(k, f ? ".nchw." : ".nhwc."), "forward ran %s", k);
            mft_tensor *gx = NULL;
            CHECK(y && mft_conv2d_backward(y, x, w, one, one, one, 1, &gx, NULL, NULL) == MFT_OK);
            k = mft_dispatch_last()->kernel;
            CHECK_MSG((strstr(k, "winograd_f4x3") != NULL) == expect, "backward ran %s", k);
            mft_tensor *gw = NULL;
            CHECK(y && mft_conv2d_backward(y, x, w, one, one, one, 1, NULL, &gw, NULL) == MFT_OK);
            k = mft_dispatch_last()->kernel;
            CHECK_MSG((strstr(k, "winograd_f4x3") != NULL) == expect &&
                          strstr(k, "conv2d_backward_weight") == k,
                      "backward_weight ran %s", k);
            mft_tensor_release(gw);
            /* not where it does not apply: stride 2, a 1x1 kernel, groups, F64 */
            const int64_t two[2] = {2, 2};
            mft_tensor *y2 = mft_conv2d(x, w, NULL, two, one, one, 1);
            CHECK(y2 && !strstr(mft_dispatch_last()->kernel, "winograd"));
            mft_tensor_release(gx);
            mft_tensor_release(y);
            mft_tensor_release(y2);
            mft_tensor_release(x);
            mft_tensor_release(w);
        }
    mft_conv_set_winograd(true);
}

/* Winograd (forced wherever legal) with every allocation failing in turn:
 * the clean run's bits or NOMEM naming the function (Note [Kernel scratch]:
 * no more plain-loop blocks, which summed in another order). */
static void test_winograd_alloc_failure(void) {
    mft__conv_wino_set_mode(1);
    const ccase c = mk2(2, 9, 20, 1, 9, 10, 3, 1, 1, 1, true);
    run_case_failing(&c, MFT_CHANNELS_LAST);
    run_case_failing(&c, MFT_CONTIGUOUS);
    mft__conv_wino_set_mode(0);
}

int main(void) {
    RUN(test_table);
    RUN(test_winograd);
    RUN(test_winograd_schedules);
    RUN(test_winograd_dispatch);
    RUN(test_winograd_alloc_failure);
    RUN(test_sweep);
    RUN(test_threads);
    RUN(test_portable);
    RUN(test_alloc_failure);
    TEST_MAIN_END();
}
