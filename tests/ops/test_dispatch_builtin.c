/* tests/ops/test_dispatch_builtin.c — calling built-in kernels directly
 * (mft_dispatch_call_builtin) and what registration refuses:
 *   - a built-in called by name on hand-built arguments gives the op's
 *     result (the same kernel: the same bits; the reference conv: a naive
 *     convolution computed here), and changes no dispatch record or counter;
 *   - name NULL picks the kernel the dispatcher runs;
 *   - the arguments every dispatched op really hands its kernel pass the
 *     checks: a probe kernel registered for each op's key hands its call to
 *     the built-in, and the op's results stay the same bits (norm ops
 *     included, whose internal params are only accepted from inside);
 *   - every kind of bad argument is refused with a message, the output left
 *     untouched;
 *   - registration refuses a dtype the op has no kernel for, CHANNELS_LAST
 *     for matmul, unknown ops, NULL and bad names, and keeps the previous
 *     kernel when it refuses. */
#include "dispatch/dispatch_internal.h"
#include "test_util.h"

static bool same_values(const mft_tensor *a, const mft_tensor *b) {
    if (!a || !b || mft_tensor_ndim(a) != mft_tensor_ndim(b)) return false;
    const int nd = mft_tensor_ndim(a);
    if (!tu_has_sizes(b, nd, mft_tensor_sizes(a))) return false;
    if (mft_tensor_numel(a) == 0) return true;
    int64_t i[MFT_MAX_DIMS] = {0};
    do {
        const double x = mft_tensor_get(a, i), y = mft_tensor_get(b, i);
        if (x != y && !(x != x && y != y)) return false;
    } while (tu_next_index(nd, mft_tensor_sizes(a), i));
    return true;
}

static double max_diff(const mft_tensor *a, const mft_tensor *b) {
    if (!a || !b) return INFINITY;
    double m = 0.0;
    int64_t i[MFT_MAX_DIMS] = {0};
    const int nd = mft_tensor_ndim(a);
    if (!tu_has_sizes(b, nd, mft_tensor_sizes(a))) return INFINITY;
    do {
        double d = fabs(mft_tensor_get(a, i) - mft_tensor_get(b, i));
        if (d > m) m = d;
    } while (tu_next_index(nd, mft_tensor_sizes(a), i));
    return m;
}

/* ---------------------------------------------------------------- by name */
static const int64_t XS[4] = {2, 3, 8, 8}, YS[4] = {2, 3, 4, 4};
static const mft_pool2d_params POOL2 = {{2, 2}, {2, 2}, {0, 0}, {1, 1}, false, true, 0};

static void test_pool_by_name_equals_op(void) {
    for (int f = 0; f < 2; f++) {
        const mft_format fmt = f ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
        const char *name = f ? "avg_pool2d.nhwc.f32" : "avg_pool2d.nchw.f32";
        mft_tensor *x = mft_randn(4, XS, MFT_F32, fmt, 3);
        const int64_t k[2] = {2, 2};
        mft_tensor *ref = mft_avg_pool2d(x, k, NULL, NULL, false, true, 0);
        CHECK(ref && !strcmp(mft_dispatch_last()->kernel, name));
        const mft_dispatch_info before = *mft_dispatch_last();
        const int64_t conv_before = mft_dispatch_conversions();
        for (int by_name = 0; by_name < 2; by_name++) {
            mft_tensor *out = mft_full(4, YS, MFT_F32, fmt, -1.0);
            const int64_t v0 = mft_tensor_version(out);
            const mft_tensor *ins[1] = {x};
            mft_tensor *outs[1] = {out};
            const mft_kernel_args args = {1, 1, ins, outs, &POOL2};
            TU_OK_S(mft_dispatch_call_builtin("avg_pool2d", fmt, MFT_F32, by_name ? name : NULL,
                                              &args));
            CHECK(same_values(out, ref));
            CHECK(mft_tensor_version(out) > v0);
            mft_tensor_release(out);
        }
        /* not a dispatch: the record and the counters are as before */
        CHECK(mft_dispatch_last()->seq == before.seq && mft_dispatch_conversions() == conv_before);
        mft_tensor_release(x);
        mft_tensor_release(ref);
    }
}

/* max pool: two outputs, values and I64 indices, both equal to the op's */
static void test_max_pool_two_outputs(void) {
    mft_tensor *x = mft_randn(4, XS, MFT_F32, MFT_CHANNELS_LAST, 4), *ind = NULL;
    const int64_t k[2] = {2, 2};
    mft_tensor *ref = mft_max_pool2d_with_indices(x, k, NULL, NULL, NULL, false, &ind);
    mft_tensor *y = mft_empty(4, YS, MFT_F32, MFT_CHANNELS_LAST);
    mft_tensor *i = mft_empty(4, YS, MFT_I64, MFT_CHANNELS_LAST);
    const mft_tensor *ins[1] = {x};
    mft_tensor *outs[2] = {y, i};
    const mft_kernel_args args = {1, 2, ins, outs, &POOL2};
    TU_OK_S(mft_dispatch_call_builtin("max_pool2d", MFT_CHANNELS_LAST, MFT_F32, NULL, &args));
    CHECK(same_values(y, ref) && same_values(i, ind));
    mft_tensor *all[] = {x, ind, ref, y, i};
    for (int j = 0; j < 5; j++) mft_tensor_release(all[j]);
}

/* naive y[n,co,oh,ow] = b[co] + sum x * w (stride s, padding p) */
static double naive_conv_err(const mft_tensor *y, const mft_tensor *x, const mft_tensor *w,
                             const mft_tensor *b, int64_t s, int64_t p) {
    const int64_t *xs = mft_tensor_sizes(x), *ws = mft_tensor_sizes(w), *ys = mft_tensor_sizes(y);
    double err = 0.0;
    int64_t o[4] = {0, 0, 0, 0};
    do {
        double acc = mft_tensor_get(b, &o[1]);
        for (int64_t ci = 0; ci < xs[1]; ci++)
            for (int64_t kh = 0; kh < ws[2]; kh++)
                for (int64_t kw = 0; kw < ws[3]; kw++) {
                    const int64_t ih = o[2] * s - p + kh, iw = o[3] * s - p + kw;
                    if (ih < 0 || ih >= xs[2] || iw < 0 || iw >= xs[3]) continue;
                    const int64_t xi[4] = {o[0], ci, ih, iw}, wi[4] = {o[1], ci, kh, kw};
                    acc += mft_tensor_get(x, xi) * mft_tensor_get(w, wi);
                }
        const double e = fabs(acc - mft_tensor_get(y, o));
        if (e > err) err = e;
    } while (tu_next_index(4, ys, o));
    return err;
}

/* the reference conv kernel, CONTIGUOUS and ANY, against a naive conv and
 * against mft_conv2d (whatever fast kernel it runs) */
static void test_conv_reference_by_name(void) {
    const int64_t xs[4] = {2, 4, 7, 7}, ws[4] = {5, 4, 3, 3}, bs[1] = {5}, ys[4] = {2, 5, 4, 4};
    mft_tensor *x = mft_randn(4, xs, MFT_F32, MFT_CONTIGUOUS, 5);
    mft_tensor *w = mft_randn(4, ws, MFT_F32, MFT_CONTIGUOUS, 6);
    mft_tensor *b = mft_randn(1, bs, MFT_F32, MFT_CONTIGUOUS, 7);
    const int64_t two[2] = {2, 2}, one[2] = {1, 1};
    mft_tensor *op = mft_conv2d(x, w, b, two, one, one, 1);
    const mft_conv_params p = {2, {2, 2, 1}, {1, 1, 0}, {1, 1, 1}, 1, b};
    mft_tensor *xcl = mft_contiguous(x, MFT_CHANNELS_LAST);
    for (int any = 0; any < 2; any++) {
        mft_tensor *y = mft_empty(4, ys, MFT_F32, any ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS);
        const mft_tensor *ins[2] = {any ? xcl : x, w};
        mft_tensor *outs[1] = {y};
        const mft_kernel_args args = {2, 1, ins, outs, &p};
        TU_OK_S(mft_dispatch_call_builtin("conv2d", any ? MFT_FORMAT_ANY : MFT_CONTIGUOUS, MFT_F32,
                                          any ? "conv2d.ref.any.f32" : "conv2d.ref.f32", &args));
        CHECK_MSG(naive_conv_err(y, x, w, b, 2, 1) < 1e-4, "err %g", naive_conv_err(y, x, w, b, 2, 1));
        CHECK_MSG(max_diff(y, op) < 1e-4, "diff %g", max_diff(y, op));
        mft_tensor_release(y);
    }
    mft_tensor *all[] = {x, w, b, op, xcl};
    for (int i = 0; i < 5; i++) mft_tensor_release(all[i]);
}

static void test_matmul_and_softmax_by_pick(void) {
    const int64_t as[2] = {3, 4}, bs[2] = {4, 5}, cs[2] = {3, 5};
    mft_tensor *a = mft_randn(2, as, MFT_F32, MFT_CONTIGUOUS, 8);
    mft_tensor *b = mft_randn(2, bs, MFT_F32, MFT_CONTIGUOUS, 9);
    mft_tensor *ref = mft_matmul(a, b), *c = mft_empty(2, cs, MFT_F32, MFT_CONTIGUOUS);
    const mft_matmul_params mp = {false, false};
    const mft_tensor *mins[2] = {a, b};
    mft_tensor *mouts[1] = {c};
    const mft_kernel_args margs = {2, 1, mins, mouts, &mp};
    TU_OK_S(mft_dispatch_call_builtin("matmul", MFT_CONTIGUOUS, MFT_F32, NULL, &margs));
    CHECK(same_values(c, ref));

    const int64_t ss[4] = {2, 3, 4, 5};
    mft_tensor *x = mft_randn(4, ss, MFT_F32, MFT_CHANNELS_LAST, 10);
    mft_tensor *sref = mft_softmax(x, 1), *y = mft_empty(4, ss, MFT_F32, MFT_CHANNELS_LAST);
    const mft_softmax_params sp = {1};
    const mft_tensor *sins[1] = {x};
    mft_tensor *souts[1] = {y};
    const mft_kernel_args sargs = {1, 1, sins, souts, &sp};
    TU_OK_S(mft_dispatch_call_builtin("softmax", MFT_CHANNELS_LAST, MFT_F32, "softmax.nhwc.f32",
                                      &sargs));
    CHECK(same_values(y, sref));
    mft_tensor *all[] = {a, b, ref, c, x, sref, y};
    for (int i = 0; i < 7; i++) mft_tensor_release(all[i]);
}

/* name NULL: the kernel the dispatcher ran for the same key */
static void test_pick_is_dispatchers(void) {
    const int64_t k[2] = {2, 2}, out[2] = {5, 6};
    struct {
        const char *op;
        mft_format fmt;
        mft_dtype dt;
    } keys[] = {{"avg_pool2d", MFT_CHANNELS_LAST, MFT_F32}, {"avg_pool2d", MFT_CONTIGUOUS, MFT_F64},
                {"interpolate", MFT_CONTIGUOUS, MFT_F32}, {"interpolate", MFT_CHANNELS_LAST, MFT_F32},
                {"softmax", MFT_CONTIGUOUS, MFT_F64}};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        mft_tensor *x = mft_randn(4, XS, keys[i].dt, keys[i].fmt, 11);
        mft_tensor *y = !strcmp(keys[i].op, "avg_pool2d") ? mft_avg_pool2d(x, k, NULL, NULL, false, true, 0)
                        : !strcmp(keys[i].op, "softmax")  ? mft_softmax(x, 1)
                                                          : mft_interpolate(x, out, MFT_INTERP_BILINEAR, false);
        const mft_op_info *info = mft_op_find(keys[i].op);
        const mft__kernel_def *d =
            mft__builtin_find((mft__op_id)(info - mft_op_at(0)), keys[i].fmt, keys[i].dt, NULL);
        CHECK_MSG(y && d && !strcmp(d->name, mft_dispatch_last()->kernel), "%s: picked %s, ran %s",
                  keys[i].op, d ? d->name : "none", mft_dispatch_last()->kernel);
        mft_tensor_release(x);
        mft_tensor_release(y);
    }
}

/* ---------------------------------------------------------------- probes */
static const char *g_probe_op = "";
static int g_probe_calls = 0, g_probe_fails = 0;
static char g_probe_msg[512];

static void probe(const mft_kernel_args *a, mft_format fmt) {
    g_probe_calls++;
    if (mft_dispatch_call_builtin(g_probe_op, fmt, MFT_F32, NULL, a) != MFT_OK) {
        g_probe_fails++;
        snprintf(g_probe_msg, sizeof g_probe_msg, "%s", mft_last_error_message());
    }
}
static void probe_nchw(const mft_kernel_args *a) { probe(a, MFT_CONTIGUOUS); }
static void probe_nhwc(const mft_kernel_args *a) { probe(a, MFT_CHANNELS_LAST); }

/* The tensors one case uses, made per layout. */
typedef struct probe_in {
    mft_format fmt;
    uint64_t seed;
} probe_in;
typedef mft_tensor *(*probe_case)(const probe_in *in);

static mft_tensor *rn(int nd, const int64_t *sz, probe_in *in) {
    return mft_randn(nd, sz, MFT_F32, nd >= 3 && nd <= 5 ? in->fmt : MFT_CONTIGUOUS, in->seed++);
}
static mft_tensor *rn_c(int nd, const int64_t *sz, probe_in *in) {
    return mft_randn(nd, sz, MFT_F32, MFT_CONTIGUOUS, in->seed++);
}

/* helpers returning one gradient of a status-returning backward */
static mft_tensor *pick(mft_status st, mft_tensor *keep, mft_tensor *drop1, mft_tensor *drop2) {
    mft_tensor_release(drop1);
    mft_tensor_release(drop2);
    if (st != MFT_OK) {
        mft_tensor_release(keep);
        return NULL;
    }
    return keep;
}

#define CASE(name) static mft_tensor *name(const probe_in *in0)
#define IN probe_in in_ = *in0, *in = &in_
#define REL(...)                                                                   \
    do {                                                                           \
        mft_tensor *rel_[] = {__VA_ARGS__};                                        \
        for (size_t r_ = 0; r_ < sizeof rel_ / sizeof rel_[0]; r_++) mft_tensor_release(rel_[r_]); \
    } while (0)

static const int64_t s1[2] = {1, 1}, s2[2] = {2, 2}, p1[2] = {1, 1}, p0[2] = {0, 0}, d2[2] = {2, 2};

CASE(c_conv2d) {
    IN;
    const int64_t xs[4] = {2, 4, 9, 8}, ws[4] = {6, 4, 3, 3}, bs[1] = {6};
    mft_tensor *x = rn(4, xs, in), *w = rn(4, ws, in), *b = rn_c(1, bs, in);
    mft_tensor *y = mft_conv2d(x, w, b, s2, p1, s1, 1);
    REL(x, w, b);
    return y;
}
CASE(c_conv2d_grouped) {
    IN;
    const int64_t xs[4] = {1, 6, 7, 7}, ws[4] = {4, 3, 3, 3};
    mft_tensor *x = rn(4, xs, in), *w = rn(4, ws, in);
    mft_tensor *y = mft_conv2d(x, w, NULL, s1, p0, d2, 2);
    REL(x, w);
    return y;
}
static mft_tensor *conv2d_bwd(const probe_in *in0, int which) {
    IN;
    const int64_t xs[4] = {2, 4, 9, 8}, ws[4] = {6, 4, 3, 3}, gs[4] = {2, 6, 5, 4};
    mft_tensor *x = rn(4, xs, in), *w = rn(4, ws, in), *g = rn(4, gs, in), *gx = NULL, *gw = NULL;
    mft_status st = mft_conv2d_backward(g, x, w, s2, p1, s1, 1, which == 0 ? &gx : NULL,
                                        which == 1 ? &gw : NULL, NULL);
    REL(x, w, g);
    return pick(st, which == 0 ? gx : gw, NULL, NULL);
}
CASE(c_conv2d_bwd_in) { return conv2d_bwd(in0, 0); }
CASE(c_conv2d_bwd_w) { return conv2d_bwd(in0, 1); }
/* transposed: runs conv2d_backward_input with output_padding, once with
 * output_padding < stride, once < dilation (and >= stride) */
static mft_tensor *conv_t(const probe_in *in0, int which, bool dil) {
    IN;
    const int64_t xs[4] = {1, 4, 5, 6}, ws[4] = {4, 3, 3, 3}, bs[1] = {3};
    const int64_t *st = dil ? s1 : s2, *dl = dil ? d2 : s1, op[2] = {1, 1};
    mft_tensor *x = rn(4, xs, in), *w = rn(4, ws, in), *b = rn_c(1, bs, in);
    mft_tensor *y = mft_conv_transpose2d(x, w, b, st, p1, op, dl, 1);
    if (which == 0 || !y) {
        REL(x, w, b);
        return y;
    }
    mft_tensor *g = mft_randn(4, mft_tensor_sizes(y), MFT_F32, in->fmt, 77), *gw = NULL;
    mft_status s = mft_conv_transpose2d_backward(g, x, w, st, p1, op, dl, 1, NULL, &gw, NULL);
    REL(x, w, b, y, g);
    return pick(s, gw, NULL, NULL);
}
CASE(c_convt_stride) { return conv_t(in0, 0, false); }
CASE(c_convt_dilation) { return conv_t(in0, 0, true); }
CASE(c_convt_bwd_w) { return conv_t(in0, 1, false); }
static mft_tensor *conv3d_case(const probe_in *in0, int which) {
    IN;
    const int64_t xs[5] = {1, 2, 4, 5, 5}, ws[5] = {3, 2, 2, 3, 3}, gs[5] = {1, 3, 3, 3, 3};
    const int64_t one[3] = {1, 1, 1}, zero[3] = {0, 0, 0};
    mft_tensor *x = rn(5, xs, in), *w = rn(5, ws, in);
    if (which == 2) {
        mft_tensor *y = mft_conv3d(x, w, NULL, one, zero, one, 1);
        REL(x, w);
        return y;
    }
    mft_tensor *g = rn(5, gs, in), *gx = NULL, *gw = NULL;
    mft_status st = mft_conv3d_backward(g, x, w, one, zero, one, 1, which == 0 ? &gx : NULL,
                                        which == 1 ? &gw : NULL, NULL);
    REL(x, w, g);
    return pick(st, which == 0 ? gx : gw, NULL, NULL);
}
CASE(c_conv3d) { return conv3d_case(in0, 2); }
CASE(c_conv3d_bwd_in) { return conv3d_case(in0, 0); }
CASE(c_conv3d_bwd_w) { return conv3d_case(in0, 1); }

static const int64_t PX[4] = {2, 3, 9, 10}, k3[2] = {3, 3};
CASE(c_max_pool2d) {
    IN;
    mft_tensor *x = rn(4, PX, in), *y = mft_max_pool2d(x, k3, s2, p1, s1, true);
    REL(x);
    return y;
}
CASE(c_relu_max_pool2d) {
    IN;
    mft_tensor *x = rn(4, PX, in), *y = mft_relu_max_pool2d(x, k3, s2, p1, s1, false);
    REL(x);
    return y;
}
CASE(c_avg_pool2d) {
    IN;
    mft_tensor *x = rn(4, PX, in), *y = mft_avg_pool2d(x, k3, s2, p1, true, false, 0);
    REL(x);
    return y;
}
static mft_tensor *max_bwd2(const probe_in *in0, bool windows) {
    IN;
    mft_tensor *x = rn(4, PX, in), *ind = NULL;
    mft_tensor *y = mft_max_pool2d_with_indices(x, k3, s2, p1, s1, false, &ind);
    mft_tensor *g = y ? mft_randn(4, mft_tensor_sizes(y), MFT_F32, in->fmt, 5) : NULL;
    mft_tensor *gx = windows ? mft_max_pool2d_backward_windows(g, x, ind, k3, s2, p1, s1, false)
                             : mft_max_pool2d_backward(g, x, ind);
    REL(x, ind, y, g);
    return gx;
}
CASE(c_max_pool2d_bwd) { return max_bwd2(in0, false); }
CASE(c_max_pool2d_bwd_windows) { return max_bwd2(in0, true); }
CASE(c_avg_pool2d_bwd) {
    IN;
    mft_tensor *x = rn(4, PX, in), *y = mft_avg_pool2d(x, k3, s2, p1, true, false, 0);
    mft_tensor *g = y ? mft_randn(4, mft_tensor_sizes(y), MFT_F32, in->fmt, 6) : NULL;
    mft_tensor *gx = mft_avg_pool2d_backward(g, x, k3, s2, p1, true, false, 0);
    REL(x, y, g);
    return gx;
}
static const int64_t PX3[5] = {1, 2, 5, 6, 7}, k33[3] = {2, 2, 2}, s33[3] = {2, 2, 2},
                     p33[3] = {1, 0, 1}, d33[3] = {1, 1, 1};
static mft_tensor *pool3(const probe_in *in0, int which) {
    IN;
    mft_tensor *x = rn(5, PX3, in), *ind = NULL, *r = NULL;
    if (which == 0) r = mft_max_pool3d(x, k33, s33, p33, d33, false);
    else if (which == 1) r = mft_avg_pool3d(x, k33, s33, p33, true, true, 0);
    else {
        mft_tensor *y = which == 2 ? mft_max_pool3d_with_indices(x, k33, s33, p33, d33, false, &ind)
                                   : mft_avg_pool3d(x, k33, s33, p33, true, true, 0);
        mft_tensor *g = y ? mft_randn(5, mft_tensor_sizes(y), MFT_F32, in->fmt, 7) : NULL;
        r = which == 2 ? mft_max_pool3d_backward(g, x, ind)
                       : mft_avg_pool3d_backward(g, x, k33, s33, p33, true, true, 0);
        REL(y, g, ind);
    }
    REL(x);
    return r;
}
CASE(c_max_pool3d) { return pool3(in0, 0); }
CASE(c_avg_pool3d) { return pool3(in0, 1); }
CASE(c_max_pool3d_bwd) { return pool3(in0, 2); }
CASE(c_avg_pool3d_bwd) { return pool3(in0, 3); }
static mft_tensor *adaptive(const probe_in *in0, int which) {
    IN;
    const int64_t o2[2] = {4, 3}, o3[3] = {3, 4, 2};
    mft_tensor *x2 = rn(4, PX, in), *x3 = rn(5, PX3, in), *r = NULL;
    switch (which) {
    case 0: r = mft_adaptive_avg_pool2d(x2, o2); break;
    case 1: r = mft_adaptive_max_pool2d(x2, o2); break;
    case 2: r = mft_adaptive_avg_pool3d(x3, o3); break;
    case 3: r = mft_adaptive_max_pool3d(x3, o3); break;
    case 4: {
        const int64_t gs[4] = {2, 3, 4, 3};
        mft_tensor *g = rn(4, gs, in);
        r = mft_adaptive_avg_pool2d_backward(g, x2);
        REL(g);
        break;
    }
    default: {
        const int64_t gs[5] = {1, 2, 3, 4, 2};
        mft_tensor *g = rn(5, gs, in);
        r = mft_adaptive_avg_pool3d_backward(g, x3);
        REL(g);
    }
    }
    REL(x2, x3);
    return r;
}
CASE(c_aavg2) { return adaptive(in0, 0); }
CASE(c_amax2) { return adaptive(in0, 1); }
CASE(c_aavg3) { return adaptive(in0, 2); }
CASE(c_amax3) { return adaptive(in0, 3); }
CASE(c_aavg2_bwd) { return adaptive(in0, 4); }
CASE(c_aavg3_bwd) { return adaptive(in0, 5); }
static mft_tensor *interp(const probe_in *in0, bool bwd) {
    IN;
    const int64_t o[2] = {13, 7}, gs[4] = {2, 3, 13, 7};
    mft_tensor *x = rn(4, PX, in);
    mft_tensor *g = bwd ? rn(4, gs, in) : NULL;
    mft_tensor *r = bwd ? mft_interpolate_backward(g, x, MFT_INTERP_BILINEAR, true)
                        : mft_interpolate(x, o, MFT_INTERP_BICUBIC, false);
    REL(x, g);
    return r;
}
CASE(c_interp) { return interp(in0, false); }
CASE(c_interp_bwd) { return interp(in0, true); }
static mft_tensor *pad_case(const probe_in *in0, bool bwd, mft_pad_mode mode) {
    IN;
    const int64_t pads[4] = {2, 1, -1, 3};
    const int64_t pr[4] = {2, 1, 1, 3};
    const int64_t *pp = mode == MFT_PAD_CONSTANT ? pads : pr;
    mft_tensor *x = rn(4, PX, in);
    if (!bwd) {
        mft_tensor *y = mft_pad(x, 4, pp, mode, mode == MFT_PAD_CONSTANT ? 0.5 : 0.0);
        REL(x);
        return y;
    }
    mft_tensor *y = mft_pad(x, 4, pp, mode, 0.0);
    mft_tensor *g = y ? mft_randn(4, mft_tensor_sizes(y), MFT_F32, in->fmt, 8) : NULL;
    mft_tensor *gx = mft_pad_backward(g, x, 4, pp, mode);
    REL(x, y, g);
    return gx;
}
CASE(c_pad_const) { return pad_case(in0, false, MFT_PAD_CONSTANT); }
CASE(c_pad_reflect) { return pad_case(in0, false, MFT_PAD_REFLECT); }
CASE(c_pad_bwd) { return pad_case(in0, true, MFT_PAD_REPLICATE); }
static mft_tensor *norm(const probe_in *in0, int which, bool bwd) {
    IN;
    const int64_t xs[4] = {2, 6, 5, 4}, cs[1] = {6};
    mft_tensor *x = rn(4, xs, in), *w = rn_c(1, cs, in), *b = rn_c(1, cs, in);
    mft_tensor *m = NULL, *s = NULL, *y = NULL, *gx = NULL;
    const int64_t ns[2] = {5, 4};
    mft_tensor *lw = rn_c(2, ns, in);
    if (which == 0) y = mft_batch_norm_ex(x, NULL, NULL, w, b, true, 0.1, 1e-5, &m, &s);
    else if (which == 1) y = mft_group_norm_ex(x, 3, w, b, 1e-5, &m, &s);
    else y = mft_layer_norm_ex(x, 2, ns, lw, NULL, 1e-5, &m, &s);
    if (bwd && y) {
        mft_tensor *g = mft_randn(4, xs, MFT_F32, in->fmt, 9);
        mft_status st = which == 0 ? mft_batch_norm_backward(g, x, w, m, s, true, &gx, NULL, NULL)
                        : which == 1 ? mft_group_norm_backward(g, x, 3, m, s, w, 1e-5, &gx, NULL, NULL)
                                     : mft_layer_norm_backward(g, x, 2, ns, m, s, lw, 1e-5, &gx, NULL, NULL);
        if (st != MFT_OK) gx = NULL;
        REL(g, y);
        y = gx;
    }
    REL(x, w, b, m, s, lw);
    return y;
}
CASE(c_bn) { return norm(in0, 0, false); }
CASE(c_gn) { return norm(in0, 1, false); }
CASE(c_ln) { return norm(in0, 2, false); }
CASE(c_bn_bwd) { return norm(in0, 0, true); }
CASE(c_gn_bwd) { return norm(in0, 1, true); }
CASE(c_ln_bwd) { return norm(in0, 2, true); }
static mft_tensor *smx(const probe_in *in0, bool lg, bool bwd) {
    IN;
    mft_tensor *x = rn(4, PX, in), *y = lg ? mft_log_softmax(x, 1) : mft_softmax(x, 1);
    if (bwd && y) {
        mft_tensor *g = rn(4, PX, in);
        mft_tensor *gx = lg ? mft_log_softmax_backward(g, y, 1) : mft_softmax_backward(g, y, 1);
        REL(g, y);
        y = gx;
    }
    REL(x);
    return y;
}
CASE(c_softmax) { return smx(in0, false, false); }
CASE(c_log_softmax) { return smx(in0, true, false); }
CASE(c_softmax_bwd) { return smx(in0, false, true); }
CASE(c_log_softmax_bwd) { return smx(in0, true, true); }
CASE(c_matmul_batched) {
    IN;
    const int64_t as[3] = {2, 3, 4}, bs[3] = {2, 4, 5};
    mft_tensor *a = rn(3, as, in), *b = rn(3, bs, in), *c = mft_matmul(a, b);
    REL(a, b);
    return c;
}
CASE(c_linear) { /* transpose_b */
    IN;
    const int64_t xs[2] = {6, 4}, ws[2] = {3, 4};
    mft_tensor *x = rn_c(2, xs, in), *w = rn_c(2, ws, in), *y = mft_linear(x, w, NULL);
    REL(x, w);
    return y;
}

static void test_probes_pass_real_args(void) {
    static const struct {
        const char *op;
        probe_case run;
        bool both_formats;
    } cases[] = {
        {"conv2d", c_conv2d, true}, {"conv2d", c_conv2d_grouped, true},
        {"conv2d_backward_input", c_conv2d_bwd_in, true},
        {"conv2d_backward_weight", c_conv2d_bwd_w, true},
        {"conv2d_backward_input", c_convt_stride, true},
        {"conv2d_backward_input", c_convt_dilation, true},
        {"conv2d_backward_weight", c_convt_bwd_w, true}, {"conv3d", c_conv3d, true},
        {"conv3d_backward_input", c_conv3d_bwd_in, true},
        {"conv3d_backward_weight", c_conv3d_bwd_w, true}, {"max_pool2d", c_max_pool2d, true},
        {"relu_max_pool2d", c_relu_max_pool2d, true}, {"avg_pool2d", c_avg_pool2d, true},
        {"max_pool2d_backward", c_max_pool2d_bwd, true},
        {"max_pool2d_backward", c_max_pool2d_bwd_windows, true},
        {"avg_pool2d_backward", c_avg_pool2d_bwd, true}, {"max_pool3d", c_max_pool3d, true},
        {"avg_pool3d", c_avg_pool3d, true}, {"max_pool3d_backward", c_max_pool3d_bwd, true},
        {"avg_pool3d_backward", c_avg_pool3d_bwd, true}, {"adaptive_avg_pool2d", c_aavg2, true},
        {"adaptive_max_pool2d", c_amax2, true}, {"adaptive_avg_pool3d", c_aavg3, true},
        {"adaptive_max_pool3d", c_amax3, true},
        {"adaptive_avg_pool2d_backward", c_aavg2_bwd, true},
        {"adaptive_avg_pool3d_backward", c_aavg3_bwd, true}, {"interpolate", c_interp, true},
        {"interpolate_backward", c_interp_bwd, true}, {"pad", c_pad_const, true},
        {"pad", c_pad_reflect, true}, {"pad_backward", c_pad_bwd, true},
        {"batch_norm", c_bn, true}, {"group_norm", c_gn, true}, {"layer_norm", c_ln, true},
        {"batch_norm_backward", c_bn_bwd, true}, {"group_norm_backward", c_gn_bwd, true},
        {"layer_norm_backward", c_ln_bwd, true}, {"softmax", c_softmax, true},
        {"log_softmax", c_log_softmax, true}, {"softmax_backward", c_softmax_bwd, true},
        {"log_softmax_backward", c_log_softmax_bwd, true}, {"matmul", c_matmul_batched, false},
        {"matmul", c_linear, false},
    };
    bool probed[MFT__OP_COUNT] = {false};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int f = 0; f < (cases[i].both_formats ? 2 : 1); f++) {
            const probe_in in = {f ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS, 100 + i};
            mft_tensor *ref = cases[i].run(&in);
            g_probe_op = cases[i].op;
            g_probe_calls = g_probe_fails = 0;
            g_probe_msg[0] = 0;
            TU_OK_S(mft_dispatch_register(cases[i].op, MFT_CONTIGUOUS, MFT_F32, "test.probe.nchw",
                                          probe_nchw));
            const bool cl = strcmp(cases[i].op, "matmul") != 0;
            if (cl)
                TU_OK_S(mft_dispatch_register(cases[i].op, MFT_CHANNELS_LAST, MFT_F32,
                                              "test.probe.nhwc", probe_nhwc));
            mft_tensor *got = cases[i].run(&in);
            TU_OK_S(mft_dispatch_unregister(cases[i].op, MFT_CONTIGUOUS, MFT_F32));
            if (cl) TU_OK_S(mft_dispatch_unregister(cases[i].op, MFT_CHANNELS_LAST, MFT_F32));
            CHECK_MSG(ref != NULL && got != NULL, "case %zu (%s) failed: %s", i, cases[i].op,
                      mft_last_error_message());
            CHECK_MSG(g_probe_calls >= 1 && g_probe_fails == 0,
                      "case %zu (%s, %s): %d calls, %d refused: %s", i, cases[i].op,
                      f ? "NHWC" : "NCHW", g_probe_calls, g_probe_fails, g_probe_msg);
            CHECK_MSG(same_values(ref, got), "case %zu (%s, %s): results differ by %g", i,
                      cases[i].op, f ? "NHWC" : "NCHW", max_diff(ref, got));
            const mft_op_info *info = mft_op_find(cases[i].op);
            if (info) probed[info - mft_op_at(0)] = true;
            mft_tensor_release(ref);
            mft_tensor_release(got);
            mft_clear_error();
        }
    /* every dispatched op was probed */
    for (int i = 0; i < mft_op_count(); i++)
        if (mft_op_at(i)->dispatched)
            CHECK_MSG(probed[i], "dispatched op %s has no probe case", mft_op_at(i)->name);
}

/* ---------------------------------------------------------------- refusals */
#define FAIL_CALL(args_, st_, needle_)                                                       \
    do {                                                                                     \
        TU_EXPECT_STATUS_(mft_dispatch_call_builtin("avg_pool2d", MFT_CHANNELS_LAST, MFT_F32, \
                                                    NULL, (args_)),                          \
                          #args_, st_);                                                      \
        CHECK_ERR(st_, needle_);                                                             \
        TU_CHECK_UNCHANGED(y, snap);                                                         \
    } while (0)

static void test_bad_arguments_refused(void) {
    mft_tensor *x = mft_randn(4, XS, MFT_F32, MFT_CHANNELS_LAST, 21);
    mft_tensor *y = mft_full(4, YS, MFT_F32, MFT_CHANNELS_LAST, 3.0);
    const tu_dst_state snap = tu_snap(y);
    const mft_tensor *ins[1] = {x};
    mft_tensor *outs[1] = {y};
    mft_kernel_args good = {1, 1, ins, outs, &POOL2};
    /* the key */
    TU_EXPECT_STATUS_(mft_dispatch_call_builtin(NULL, MFT_CONTIGUOUS, MFT_F32, NULL, &good), "NULL op", MFT_ERR_NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_dispatch_call_builtin: op name is NULL");
    TU_EXPECT_STATUS_(mft_dispatch_call_builtin("relu", MFT_CONTIGUOUS, MFT_F32, NULL, &good), "relu", MFT_ERR_INVALID);
    CHECK_ERR(MFT_ERR_INVALID, "no dispatched op named \"relu\"");
    TU_EXPECT_STATUS_(mft_dispatch_call_builtin("avg_pool2d", MFT_CHANNELS_LAST, MFT_F32, "nope", &good), "nope", MFT_ERR_INVALID);
    CHECK_ERR(MFT_ERR_INVALID, "no built-in kernel named \"nope\" for (avg_pool2d, CHANNELS_LAST, f32)");
    TU_EXPECT_STATUS_(mft_dispatch_call_builtin("avg_pool2d", MFT_CHANNELS_LAST, MFT_F32, "avg_pool2d.nchw.f32", &good), "other key", MFT_ERR_INVALID);
    CHECK_ERR(MFT_ERR_INVALID, "avg_pool2d has f32 built-ins in: CONTIGUOUS CHANNELS_LAST");
    TU_EXPECT_STATUS_(mft_dispatch_call_builtin("avg_pool2d", MFT_CHANNELS_LAST, MFT_U8, NULL, &good), "u8", MFT_ERR_INVALID);
    CHECK_ERR(MFT_ERR_INVALID, "avg_pool2d has u8 built-ins in: none");
    TU_EXPECT_STATUS_(mft_dispatch_call_builtin("avg_pool2d", (mft_format)7, MFT_F32, NULL, &good), "fmt 7", MFT_ERR_FORMAT);
    CHECK_ERR(MFT_ERR_FORMAT, "format 7");
    TU_EXPECT_STATUS_(mft_dispatch_call_builtin("avg_pool2d", MFT_CONTIGUOUS, (mft_dtype)9, NULL, &good), "dtype 9", MFT_ERR_DTYPE);
    CHECK_ERR(MFT_ERR_DTYPE, "dtype 9");
    TU_CHECK_UNCHANGED(y, snap);
    /* the arguments */
    FAIL_CALL(NULL, MFT_ERR_NULL, "args is NULL (op avg_pool2d)");
    mft_kernel_args a = good;
    a.ninputs = 2;
    FAIL_CALL(&a, MFT_ERR_INVALID, "kernels of avg_pool2d take 1 inputs (x) and 1 outputs (y), args has 2 and 1");
    a = good;
    a.inputs = NULL;
    FAIL_CALL(&a, MFT_ERR_NULL, "args inputs is NULL");
    const mft_tensor *null_in[1] = {NULL};
    a = good;
    a.inputs = null_in;
    FAIL_CALL(&a, MFT_ERR_NULL, "args inputs[0] (x) is NULL");
    a = good;
    a.params = NULL;
    FAIL_CALL(&a, MFT_ERR_NULL, "params is NULL; kernels of avg_pool2d take a mft_pool2d_params");
    /* dtype, packing, sizes, params */
    mft_tensor *x64 = mft_randn(4, XS, MFT_F64, MFT_CHANNELS_LAST, 22);
    const mft_tensor *in64[1] = {x64};
    a = good;
    a.inputs = in64;
    FAIL_CALL(&a, MFT_ERR_DTYPE, "inputs[0] has dtype f64, the kernel needs f32");
    mft_tensor *xc = mft_contiguous(x, MFT_CONTIGUOUS);
    const mft_tensor *inc[1] = {xc};
    a = good;
    a.inputs = inc;
    FAIL_CALL(&a, MFT_ERR_FORMAT, "inputs[0] (sizes [2,3,8,8], NCHW) is not packed CHANNELS_LAST, which kernel avg_pool2d.nhwc.f32 needs");
    const int64_t bad_ys[4] = {2, 3, 4, 5};
    mft_tensor *yb = mft_empty(4, bad_ys, MFT_F32, MFT_CHANNELS_LAST);
    mft_tensor *outb[1] = {yb};
    a = good;
    a.outputs = outb;
    FAIL_CALL(&a, MFT_ERR_SHAPE, "give 4 windows along spatial dim 1, outputs[0] (y) sizes [2,3,4,5] have 5");
    mft_pool2d_params pp = POOL2;
    pp.stride[1] = 0;
    a = good;
    a.params = &pp;
    FAIL_CALL(&a, MFT_ERR_INVALID, "params stride [2,0] out of range");
    pp = POOL2;
    pp.padding[0] = 2;
    a.params = &pp;
    FAIL_CALL(&a, MFT_ERR_INVALID, "params padding 2 is more than half of kernel 2");
    pp = POOL2;
    pp.dilation[0] = 2;
    a.params = &pp;
    FAIL_CALL(&a, MFT_ERR_INVALID, "params dilation [2,1] out of range [1, 1]");
    mft_tensor *all[] = {x, y, x64, xc, yb};
    for (int i = 0; i < 5; i++) mft_tensor_release(all[i]);

    /* overlap: softmax into its own input; outputs sharing memory */
    const int64_t ss[4] = {1, 2, 3, 4};
    mft_tensor *s = mft_randn(4, ss, MFT_F32, MFT_CONTIGUOUS, 23);
    const tu_dst_state ssnap = tu_snap(s);
    const mft_softmax_params sp = {1};
    const mft_tensor *sin[1] = {s};
    mft_tensor *sout[1] = {s};
    const mft_kernel_args sa = {1, 1, sin, sout, &sp};
    TU_EXPECT_STATUS_(mft_dispatch_call_builtin("softmax", MFT_CONTIGUOUS, MFT_F32, NULL, &sa), "softmax in place", MFT_ERR_OVERLAP);
    CHECK_ERR(MFT_ERR_OVERLAP, "outputs[0] shares memory with inputs[0]");
    TU_CHECK_UNCHANGED(s, ssnap);
    const mft_softmax_params sbad = {4};
    mft_tensor *so = mft_empty(4, ss, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *sout2[1] = {so};
    const mft_kernel_args sb = {1, 1, sin, sout2, &sbad};
    TU_EXPECT_STATUS_(mft_dispatch_call_builtin("softmax", MFT_CONTIGUOUS, MFT_F32, NULL, &sb), "dim 4", MFT_ERR_DIM);
    CHECK_ERR(MFT_ERR_DIM, "params dim 4 is not in [0, 4)");
    float buf[2 * 3 * 4 * 4 * 2];
    mft_tensor *mx = mft_randn(4, XS, MFT_F32, MFT_CONTIGUOUS, 24);
    mft_tensor *vals = mft_from_blob(buf, sizeof buf, 4, YS, NULL, 0, MFT_F32, NULL, NULL);
    mft_tensor *idx = mft_from_blob(buf, sizeof buf, 4, YS, NULL, 0, MFT_I64, NULL, NULL);
    const mft_tensor *min[1] = {mx};
    mft_tensor *mout[2] = {vals, idx};
    const mft_kernel_args ma = {1, 2, min, mout, &POOL2};
    TU_EXPECT_STATUS_(mft_dispatch_call_builtin("max_pool2d", MFT_CONTIGUOUS, MFT_F32, NULL, &ma), "shared outputs", MFT_ERR_OVERLAP);
    CHECK_ERR(MFT_ERR_OVERLAP, "outputs[1] shares memory with outputs[0]");
    mft_tensor *all2[] = {s, so, mx, vals, idx};
    for (int i = 0; i < 5; i++) mft_tensor_release(all2[i]);
}

/* conv, matmul, pad, interpolate and norm arguments that do not fit */
static void test_op_specific_refusals(void) {
    const int64_t xs[4] = {1, 4, 6, 6}, ws[4] = {3, 4, 3, 3}, w5[4] = {3, 5, 3, 3}, ys[4] = {1, 3, 4, 4};
    mft_tensor *x = mft_randn(4, xs, MFT_F32, MFT_CONTIGUOUS, 31);
    mft_tensor *w = mft_randn(4, ws, MFT_F32, MFT_CONTIGUOUS, 32);
    mft_tensor *wbad = mft_randn(4, w5, MFT_F32, MFT_CONTIGUOUS, 33);
    mft_tensor *y = mft_empty(4, ys, MFT_F32, MFT_CONTIGUOUS);
    mft_conv_params p = {2, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}, 1, NULL};
    const mft_tensor *ins[2] = {x, w};
    mft_tensor *outs[1] = {y};
    mft_kernel_args a = {2, 1, ins, outs, &p};
    TU_OK_S(mft_dispatch_call_builtin("conv2d", MFT_CONTIGUOUS, MFT_F32, "conv2d.ref.f32", &a));
    p.padding[0] = 1; /* y would be 6 high */
    TU_EXPECT_STATUS_(mft_dispatch_call_builtin("conv2d", MFT_CONTIGUOUS, MFT_F32, NULL, &a), "padding", MFT_ERR_SHAPE);
    CHECK_ERR(MFT_ERR_SHAPE, "do not fit kernel sizes [3,4,3,3] with the params' stride, padding and dilation (spatial dim 0)");
    p.padding[0] = 0;
    p.nspatial = 3;
    TU_EXPECT_STATUS_(mft_dispatch_call_builtin("conv2d", MFT_CONTIGUOUS, MFT_F32, NULL, &a), "nspatial", MFT_ERR_INVALID);
    CHECK_ERR(MFT_ERR_INVALID, "params nspatial is 3, op conv2d needs 2");
    p.nspatial = 2;
    const mft_tensor *insb[2] = {x, wbad};
    a.inputs = insb;
    TU_EXPECT_STATUS_(mft_dispatch_call_builtin("conv2d", MFT_CONTIGUOUS, MFT_F32, NULL, &a), "channels", MFT_ERR_SHAPE);
    CHECK_ERR(MFT_ERR_SHAPE, "inputs[1] (w) sizes [3,5,3,3] with groups 1 do not fit");
    a.inputs = ins;
    const int64_t bs2[1] = {4};
    mft_tensor *bias = mft_zeros(1, bs2, MFT_F32, MFT_CONTIGUOUS);
    p.bias = bias;
    TU_EXPECT_STATUS_(mft_dispatch_call_builtin("conv2d", MFT_CONTIGUOUS, MFT_F32, NULL, &a), "bias", MFT_ERR_SHAPE);
    CHECK_ERR(MFT_ERR_SHAPE, "params bias sizes [4] should be [3]");
    p.bias = NULL;
    p.groups = 0;
    TU_EXPECT_STATUS_(mft_dispatch_call_builtin("conv2d", MFT_CONTIGUOUS, MFT_F32, NULL, &a), "groups", MFT_ERR_INVALID);
    CHECK_ERR(MFT_ERR_INVALID, "params groups [0] out of range");

    /* matmul: inner sizes differ */
    const int64_t as[2] = {3, 4}, bs[2] = {5, 2}, cs[2] = {3, 2};
    mft_tensor *A = mft_randn(2, as, MFT_F32, MFT_CONTIGUOUS, 34), *B = mft_randn(2, bs, MFT_F32, MFT_CONTIGUOUS, 35);
    mft_tensor *C = mft_empty(2, cs, MFT_F32, MFT_CONTIGUOUS);
    const mft_matmul_params mp = {false, false};
    const mft_tensor *mi[2] = {A, B};
    mft_tensor *mo[1] = {C};
    const mft_kernel_args ma = {2, 1, mi, mo, &mp};
    TU_EXPECT_STATUS_(mft_dispatch_call_builtin("matmul", MFT_CONTIGUOUS, MFT_F32, NULL, &ma), "K", MFT_ERR_SHAPE);
    CHECK_ERR(MFT_ERR_SHAPE, "a sizes [3,4] and b sizes [5,2] (transpose_a 0, transpose_b 0) do not multiply into c sizes [3,2]");

    /* pad: sizes and reflect amounts */
    const int64_t px[2] = {3, 4}, py[2] = {3, 7};
    mft_tensor *X = mft_randn(2, px, MFT_F32, MFT_CONTIGUOUS, 36), *Y = mft_empty(2, py, MFT_F32, MFT_CONTIGUOUS);
    mft_pad_params pd;
    memset(&pd, 0, sizeof pd);
    pd.mode = MFT_PAD_REFLECT;
    pd.before[1] = 1;
    pd.after[1] = 1;
    const mft_tensor *pi[1] = {X};
    mft_tensor *po[1] = {Y};
    const mft_kernel_args pa = {1, 1, pi, po, &pd};
    TU_EXPECT_STATUS_(mft_dispatch_call_builtin("pad", MFT_CONTIGUOUS, MFT_F32, NULL, &pa), "pad sizes", MFT_ERR_SHAPE);
    CHECK_ERR(MFT_ERR_SHAPE, "padded by (1, 1) at dim 1 give 6, outputs[0] (y) sizes [3,7] have 7");
    pd.after[1] = 2;
    TU_OK_S(mft_dispatch_call_builtin("pad", MFT_CONTIGUOUS, MFT_F32, NULL, &pa));
    pd.before[1] = 4;
    pd.after[1] = -1;
    TU_EXPECT_STATUS_(mft_dispatch_call_builtin("pad", MFT_CONTIGUOUS, MFT_F32, NULL, &pa), "reflect", MFT_ERR_INVALID);
    CHECK_ERR(MFT_ERR_INVALID, "params pads (4, -1) at dim 1 do not fit inputs[0] (x) size 4");

    /* interpolate: a nearest mode with align_corners */
    const int64_t is[4] = {1, 2, 3, 3}, os[4] = {1, 2, 5, 5};
    mft_tensor *ix = mft_randn(4, is, MFT_F32, MFT_CONTIGUOUS, 37), *iy = mft_empty(4, os, MFT_F32, MFT_CONTIGUOUS);
    const mft_interp_params ip = {MFT_INTERP_NEAREST, true};
    const mft_tensor *ii[1] = {ix};
    mft_tensor *io[1] = {iy};
    const mft_kernel_args ia = {1, 1, ii, io, &ip};
    TU_EXPECT_STATUS_(mft_dispatch_call_builtin("interpolate", MFT_CONTIGUOUS, MFT_F32, NULL, &ia), "ac", MFT_ERR_INVALID);
    CHECK_ERR(MFT_ERR_INVALID, "align_corners is set with a nearest mode");
    const mft_interp_params ip3 = {MFT_INTERP_TRILINEAR, false};
    const mft_kernel_args ia3 = {1, 1, ii, io, &ip3};
    TU_EXPECT_STATUS_(mft_dispatch_call_builtin("interpolate", MFT_CONTIGUOUS, MFT_F32, NULL, &ia3), "rank", MFT_ERR_RANK);
    CHECK_ERR(MFT_ERR_RANK, "params mode 5 needs rank 5");

    /* norms: internal params, refused outside a dispatch of the op */
    const mft_norm_params np = {1e-5, 0.1, true, 1, 0};
    mft_tensor *ny = mft_empty(4, is, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *no[1] = {ny};
    const mft_kernel_args na = {1, 1, ii, no, &np};
    TU_EXPECT_STATUS_(mft_dispatch_call_builtin("batch_norm", MFT_CONTIGUOUS, MFT_F32, NULL, &na), "norm", MFT_ERR_UNSUPPORTED);
    CHECK_ERR(MFT_ERR_UNSUPPORTED, "the built-in kernels of batch_norm take internal parameters");
    mft_tensor *all[] = {x, w, wbad, y, bias, A, B, C, X, Y, ix, iy, ny};
    for (int i = 0; i < 13; i++) mft_tensor_release(all[i]);
}

/* ---------------------------------------------------------------- registration */
static int g_a_runs = 0, g_b_runs = 0;
static void kern_a(const mft_kernel_args *a) {
    g_a_runs++;
    mft_fill_(a->outputs[0], 1.0);
}
static void kern_b(const mft_kernel_args *a) {
    g_b_runs++;
    mft_fill_(a->outputs[0], 2.0);
}

static void test_registration_refusals(void) {
    TU_EXPECT_STATUS_(mft_dispatch_register("conv2d", MFT_CONTIGUOUS, MFT_U8, "k", kern_a), "u8", MFT_ERR_DTYPE);
    CHECK_ERR(MFT_ERR_DTYPE, "mft_dispatch_register: op conv2d has no kernels for dtype u8 (it dispatches f32, f64)");
    TU_EXPECT_STATUS_(mft_dispatch_register("softmax", MFT_CHANNELS_LAST, MFT_I32, "k", kern_a), "i32", MFT_ERR_DTYPE);
    CHECK_ERR(MFT_ERR_DTYPE, "op softmax has no kernels for dtype i32 (it dispatches f32, f64)");
    /* pad has integer kernels: accepted */
    TU_OK_S(mft_dispatch_register("pad", MFT_CHANNELS_LAST, MFT_U8, "test.pad.u8", kern_a));
    TU_OK_S(mft_dispatch_unregister("pad", MFT_CHANNELS_LAST, MFT_U8));
    TU_EXPECT_STATUS_(mft_dispatch_register("matmul", MFT_CHANNELS_LAST, MFT_F32, "k", kern_a), "matmul CL", MFT_ERR_FORMAT);
    CHECK_ERR(MFT_ERR_FORMAT, "op matmul is only dispatched in CONTIGUOUS");
    TU_OK_S(mft_dispatch_register("matmul", MFT_FORMAT_ANY, MFT_F32, "test.mm.any", kern_a));
    TU_OK_S(mft_dispatch_unregister("matmul", MFT_FORMAT_ANY, MFT_F32));
    TU_EXPECT_STATUS_(mft_dispatch_register("relu", MFT_CONTIGUOUS, MFT_F32, "k", kern_a), "relu", MFT_ERR_INVALID);
    CHECK_ERR(MFT_ERR_INVALID, "no dispatched op named \"relu\"");
    TU_EXPECT_STATUS_(mft_dispatch_register("conv2d", MFT_CONTIGUOUS, MFT_F32, NULL, kern_a), "NULL name", MFT_ERR_NULL);
    CHECK_ERR(MFT_ERR_NULL, "name is NULL (op conv2d)");
    TU_EXPECT_STATUS_(mft_dispatch_register("conv2d", MFT_CONTIGUOUS, MFT_F32, "", kern_a), "empty name", MFT_ERR_INVALID);
    CHECK_ERR(MFT_ERR_INVALID, "has 0 characters (1 to 63)");
    char longname[80];
    memset(longname, 'k', 64);
    longname[64] = 0;
    TU_EXPECT_STATUS_(mft_dispatch_register("conv2d", MFT_CONTIGUOUS, MFT_F32, longname, kern_a), "long name", MFT_ERR_INVALID);
    CHECK_ERR(MFT_ERR_INVALID, "has 64 characters (1 to 63)");
    TU_EXPECT_STATUS_(mft_dispatch_register_ex(NULL), "NULL reg", MFT_ERR_NULL);
    CHECK_ERR(MFT_ERR_NULL, "reg is NULL");

    /* replacing, and a refused registration keeps what was there */
    const int64_t sz[4] = {1, 2, 4, 4}, k[2] = {2, 2}, idx[4] = {0, 1, 1, 1};
    mft_tensor *x = mft_rand(4, sz, MFT_F32, MFT_CONTIGUOUS, 41);
    longname[63] = 0; /* 63 characters: accepted */
    TU_OK_S(mft_dispatch_register("avg_pool2d", MFT_CONTIGUOUS, MFT_F32, longname, kern_a));
    TU_OK_S(mft_dispatch_register("avg_pool2d", MFT_CONTIGUOUS, MFT_F32, "test.b", kern_b));
    TU_EXPECT_STATUS_(mft_dispatch_register("avg_pool2d", MFT_CONTIGUOUS, MFT_F32, "test.c", NULL), "NULL fn", MFT_ERR_NULL);
    CHECK_ERR(MFT_ERR_NULL, "fn is NULL");
    g_a_runs = g_b_runs = 0;
    mft_tensor *y = mft_avg_pool2d(x, k, NULL, NULL, false, true, 0);
    CHECK(y && g_b_runs == 1 && g_a_runs == 0 && mft_tensor_get(y, idx) == 2.0);
    CHECK(!strcmp(mft_dispatch_last()->kernel, "test.b"));
    TU_OK_S(mft_dispatch_unregister("avg_pool2d", MFT_CONTIGUOUS, MFT_F32));
    TU_EXPECT_STATUS_(mft_dispatch_unregister("avg_pool2d", MFT_CONTIGUOUS, MFT_F32), "twice", MFT_ERR_INVALID);
    CHECK_ERR(MFT_ERR_INVALID, "no user kernel for (avg_pool2d, CONTIGUOUS, f32)");
    mft_tensor_release(x);
    mft_tensor_release(y);
}

int main(void) {
    RUN(test_pool_by_name_equals_op);
    RUN(test_max_pool_two_outputs);
    RUN(test_conv_reference_by_name);
    RUN(test_matmul_and_softmax_by_pick);
    RUN(test_pick_is_dispatchers);
    RUN(test_probes_pass_real_args);
    RUN(test_bad_arguments_refused);
    RUN(test_op_specific_refusals);
    RUN(test_registration_refusals);
    TEST_MAIN_END();
}
