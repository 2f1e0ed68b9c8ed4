/* tests/autograd/test_autograd_cnn.c — autograd of the convolution, pooling and
 * linear-algebra entry points (ops/conv/, ops/pool/, ops/pool/,
 * ops/linalg/): mft_gradcheck (F64, tiny sizes) of every recorded op with
 * NCHW and NHWC inputs and mixed conv input/weight formats (groups,
 * depthwise, stride, dilation, padding, bias or not); the gradients' formats
 * (docs/spec.md §5: the engine converts nothing, x's grad in x's format, w's in w's,
 * bias packed); a first conv layer (x constant) that computes no grad_input
 * and never dispatches the backward_input op; batched and broadcast
 * matmul / linear; an NHWC conv -> max_pool -> conv -> avg_pool chain with 0
 * conversions and the gradients of the NCHW chain; stale saved tensors;
 * allocation failure while recording (inside and outside a scope); leaks. */
#include <stdbool.h>
#include "harness.h"
#include "test_util.h"

#define CL MFT_CHANNELS_LAST
#define CT MFT_CONTIGUOUS

/* ---------------------------------------------------------------- ops under test */
typedef enum op_kind {
    OP_CONV1D,
    OP_CONV2D,
    OP_CONV3D,
    OP_CONVT2D,
    OP_MAXP1,
    OP_MAXP2,
    OP_MAXP2I,
    OP_RMAXP2,
    OP_MAXP3,
    OP_MAXP3I,
    OP_AVGP1,
    OP_AVGP2,
    OP_AVGP3,
    OP_AMAXP2,
    OP_AAVGP2,
    OP_AMAXP3,
    OP_AAVGP3,
    OP_MATMUL,
    OP_LINEAR,
} op_kind;

typedef struct op_ctx {
    op_kind op;
    int64_t kernel[3], stride[3], padding[3], dilation[3], outpad[3];
    int64_t groups;
    bool has_bias; /* inputs[2] is the bias */
    bool ceil_mode, count_include_pad;
    int64_t divisor;
    int64_t out[3];
} op_ctx;

/* One forward of c->op on in[] (new reference). */
static mft_tensor *op_fn(void *vctx, mft_tensor *const *in) {
    const op_ctx *c = vctx;
    const mft_tensor *b = c->has_bias ? in[2] : NULL;
    mft_tensor *idx = NULL, *y = NULL;
    switch (c->op) {
    case OP_CONV1D:
        return mft_conv1d(in[0], in[1], b, c->stride, c->padding, c->dilation, c->groups);
    case OP_CONV2D:
        return mft_conv2d(in[0], in[1], b, c->stride, c->padding, c->dilation, c->groups);
    case OP_CONV3D:
        return mft_conv3d(in[0], in[1], b, c->stride, c->padding, c->dilation, c->groups);
    case OP_CONVT2D:
        return mft_conv_transpose2d(in[0], in[1], b, c->stride, c->padding, c->outpad,
                                    c->dilation, c->groups);
    case OP_MAXP1:
        return mft_max_pool1d(in[0], c->kernel, c->stride, c->padding, c->dilation, c->ceil_mode);
    case OP_MAXP2:
        return mft_max_pool2d(in[0], c->kernel, c->stride, c->padding, c->dilation, c->ceil_mode);
    case OP_MAXP2I:
        y = mft_max_pool2d_with_indices(in[0], c->kernel, c->stride, c->padding, c->dilation,
                                        c->ceil_mode, &idx);
        mft_tensor_release(idx);
        return y;
    case OP_RMAXP2:
        return mft_relu_max_pool2d(in[0], c->kernel, c->stride, c->padding, c->dilation,
                                   c->ceil_mode);
    case OP_MAXP3:
        return mft_max_pool3d(in[0], c->kernel, c->stride, c->padding, c->dilation, c->ceil_mode);
    case OP_MAXP3I:
        y = mft_max_pool3d_with_indices(in[0], c->kernel, c->stride, c->padding, c->dilation,
                                        c->ceil_mode, &idx);
        mft_tensor_release(idx);
        return y;
    case OP_AVGP1:
        return mft_avg_pool1d(in[0], c->kernel, c->stride, c->padding, c->ceil_mode,
                              c->count_include_pad);
    case OP_AVGP2:
        return mft_avg_pool2d(in[0], c->kernel, c->stride, c->padding, c->ceil_mode,
                              c->count_include_pad, c->divisor);
    case OP_AVGP3:
        return mft_avg_pool3d(in[0], c->kernel, c->stride, c->padding, c->ceil_mode,
                              c->count_include_pad, c->divisor);
    case OP_AMAXP2:
        return mft_adaptive_max_pool2d(in[0], c->out);
    case OP_AAVGP2:
        return mft_adaptive_avg_pool2d(in[0], c->out);
    case OP_AMAXP3:
        return mft_adaptive_max_pool3d(in[0], c->out);
    case OP_AAVGP3:
        return mft_adaptive_avg_pool3d(in[0], c->out);
    case OP_MATMUL:
        return mft_matmul(in[0], in[1]);
    case OP_LINEAR:
        return mft_linear(in[0], in[1], b);
    }
    return NULL;
}

static const char *fmt_s(mft_format f) { return f == CL ? "CL" : "C"; }

/* ---------------------------------------------------------------- checkers */
/* A backward of op on in[0..n) (the ones in `req` require grad) with a
 * random grad_output in gfmt: no gradient conversion by the engine; each
 * leaf grad has its input's sizes, strides and tag; a 1-D grad (bias) is
 * packed; inputs not in req get no grad. */
static void check_formats(const char *what, op_ctx *c, int n, mft_tensor **in, const bool *req,
                          mft_format gfmt) {
    for (int i = 0; i < n; i++) {
        mft_tensor_zero_grad(in[i]);
        mft_tensor_set_requires_grad(in[i], req[i]);
    }
    mft_autograd_conversions_reset();
    CHECK(mft_tape_begin() == MFT_OK);
    mft_tensor *y = op_fn(c, in);
    CHECK_MSG(y != NULL, "%s: forward failed: %s", what, mft_last_error_message());
    if (!y) {
        mft_tape_end();
        return;
    }
    CHECK_MSG(mft_tensor_requires_grad(y) && !mft_tensor_is_leaf(y), "%s: output not recorded",
              what);
    CHECK_EQ_I(mft_tape_size(), 1);
    int nd = mft_tensor_ndim(y);
    mft_format gf = (nd >= 3 && nd <= 5) ? gfmt : CT;
    mft_tensor *g = mft_randn(nd, mft_tensor_sizes(y), mft_tensor_dtype(y), gf, 77);
    mft_status st = mft_backward(y, g);
    CHECK_MSG(st == MFT_OK, "%s: backward: %s", what, mft_last_error_message());
    mft_tape_end();
    CHECK_MSG(mft_autograd_conversions() == 0, "%s: engine converted %lld gradients", what,
              (long long)mft_autograd_conversions());
    for (int i = 0; i < n; i++) {
        mft_tensor *gi = mft_tensor_grad(in[i]);
        if (!req[i]) {
            CHECK_MSG(gi == NULL, "%s: input %d got a grad without requiring one", what, i);
            continue;
        }
        CHECK_MSG(gi != NULL, "%s: input %d has no grad", what, i);
        if (!gi) continue;
        int ndi = mft_tensor_ndim(in[i]);
        CHECK(tu_has_sizes(gi, ndi, mft_tensor_sizes(in[i])));
        if (ndi >= 3 && ndi <= 5)
            CHECK_MSG(mft_tensor_format(gi) == mft_tensor_format(in[i]),
                      "%s: grad %d tag %s, input tag %s", what, i,
                      mft_format_name(mft_tensor_format(gi)),
                      mft_format_name(mft_tensor_format(in[i])));
        bool same = true;
        for (int d = 0; d < ndi; d++)
            if (mft_tensor_sizes(in[i])[d] > 1 &&
                mft_tensor_strides(gi)[d] != mft_tensor_strides(in[i])[d])
                same = false;
        CHECK_MSG(same, "%s: grad %d strides differ from the input's", what, i);
        if (ndi == 1) CHECK(mft_tensor_is_contiguous(gi, CT));
    }
    for (int i = 0; i < n; i++) mft_tensor_zero_grad(in[i]);
    mft_tensor_release(y);
    mft_tensor_release(g);
}

/* gradcheck with every input requiring grad, then the format checks with
 * grad_output contiguous and channels-last. */
static void gc(const char *what, op_ctx *c, int n, mft_tensor **in) {
    bool req[4] = {true, true, true, true};
    for (int i = 0; i < n; i++) {
        CHECK_MSG(in[i] != NULL, "%s: input %d not created", what, i);
        if (!in[i]) return;
        mft_tensor_set_requires_grad(in[i], true);
    }
    mft_status st = mft_gradcheck(op_fn, c, n, in, NULL);
    CHECK_MSG(st == MFT_OK, "%s: %s", what, mft_last_error_message());
    mft_clear_error();
    check_formats(what, c, n, in, req, CT);
    check_formats(what, c, n, in, req, CL);
    CHECK_EQ_I(mft_tape_size(), 0);
}

static mft_tensor *rnd(int nd, const int64_t *sz, mft_format f, uint64_t seed) {
    return mft_randn(nd, sz, MFT_F64, f, seed);
}

static void release_all(int n, mft_tensor **t) {
    for (int i = 0; i < n; i++) mft_tensor_release(t[i]);
}

/* ---------------------------------------------------------------- convolutions */
typedef struct conv_case {
    const char *name;
    op_kind op;
    int nd;             /* rank of x and w */
    int64_t x[5], w[5]; /* sizes */
    int64_t stride[3], padding[3], dilation[3], outpad[3], groups;
    bool bias;
} conv_case;

static void test_gradcheck_conv(void) {
    static const conv_case cases[] = {
        {"conv2d pad1 bias", OP_CONV2D, 4, {2, 3, 5, 5}, {4, 3, 3, 3},
         {1, 1}, {1, 1}, {1, 1}, {0}, 1, true},
        {"conv2d stride dilation groups", OP_CONV2D, 4, {1, 4, 7, 6}, {6, 2, 3, 3},
         {2, 1}, {2, 1}, {2, 1}, {0}, 2, false},
        {"conv2d depthwise", OP_CONV2D, 4, {2, 3, 5, 4}, {6, 1, 3, 3},
         {1, 1}, {1, 1}, {1, 1}, {0}, 3, true},
        {"conv2d 1x1 stride2", OP_CONV2D, 4, {2, 4, 4, 3}, {3, 4, 1, 1},
         {2, 2}, {0, 0}, {1, 1}, {0}, 1, true},
        {"conv2d unbatched", OP_CONV2D, 3, {3, 5, 5}, {2, 3, 3, 3},
         {1, 1}, {1, 1}, {1, 1}, {0}, 1, true},
        {"conv1d", OP_CONV1D, 3, {2, 3, 8}, {4, 3, 3},
         {2}, {1}, {1}, {0}, 1, true},
        {"conv1d groups dilation", OP_CONV1D, 3, {2, 4, 9}, {4, 2, 2},
         {1}, {0}, {3}, {0}, 2, false},
        {"conv3d", OP_CONV3D, 5, {1, 2, 3, 4, 4}, {3, 2, 2, 2, 2},
         {1, 2, 1}, {1, 0, 1}, {1, 1, 1}, {0}, 1, true},
        {"conv_transpose2d", OP_CONVT2D, 4, {2, 4, 3, 3}, {4, 3, 3, 3},
         {2, 2}, {1, 1}, {1, 1}, {1, 1}, 1, true},
        {"conv_transpose2d groups", OP_CONVT2D, 4, {1, 4, 3, 2}, {4, 2, 2, 3},
         {2, 1}, {0, 1}, {1, 2}, {1, 0}, 2, false},
    };
    const mft_format fmts[4][2] = {{CT, CT}, {CL, CL}, {CT, CL}, {CL, CT}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        const conv_case *cc = &cases[k];
        for (int f = 0; f < 4; f++) {
            /* an unbatched rank-3 x of a 2-D conv has no channels-last layout */
            if (cc->op == OP_CONV2D && cc->nd == 3 && fmts[f][0] == CL) continue;
            op_ctx c;
            memset(&c, 0, sizeof c);
            c.op = cc->op;
            memcpy(c.stride, cc->stride, sizeof c.stride);
            memcpy(c.padding, cc->padding, sizeof c.padding);
            memcpy(c.dilation, cc->dilation, sizeof c.dilation);
            memcpy(c.outpad, cc->outpad, sizeof c.outpad);
            c.groups = cc->groups;
            c.has_bias = cc->bias;
            int wnd = cc->op == OP_CONV2D && cc->nd == 3 ? 4 : cc->nd;
            int64_t cout = cc->op == OP_CONVT2D ? cc->w[1] * cc->groups : cc->w[0];
            mft_tensor *in[3] = {rnd(cc->nd, cc->x, fmts[f][0], 10 + k),
                                 rnd(wnd, cc->w, fmts[f][1], 20 + k),
                                 cc->bias ? rnd(1, &cout, CT, 30 + k) : NULL};
            char what[128];
            snprintf(what, sizeof what, "%s x %s w %s", cc->name, fmt_s(fmts[f][0]),
                     fmt_s(fmts[f][1]));
            gc(what, &c, cc->bias ? 3 : 2, in);
            release_all(3, in);
        }
    }
}

/* Only some inputs require grad: x constant (first layer), w constant, bias
 * alone. The others get no grad, the engine converts nothing. */
static void test_conv_partial_requires(void) {
    const int64_t xs[4] = {2, 3, 5, 5}, ws[4] = {4, 3, 3, 3}, bs[1] = {4};
    op_ctx c;
    memset(&c, 0, sizeof c);
    c.op = OP_CONV2D;
    c.stride[0] = c.stride[1] = 1;
    c.padding[0] = c.padding[1] = 1;
    c.dilation[0] = c.dilation[1] = 1;
    c.groups = 1;
    c.has_bias = true;
    const bool reqs[4][3] = {{false, true, true}, {true, false, false}, {false, false, true},
                             {true, true, false}};
    for (int f = 0; f < 2; f++) {
        mft_format fm = f ? CL : CT;
        mft_tensor *in[3] = {rnd(4, xs, fm, 1), rnd(4, ws, fm, 2), rnd(1, bs, CT, 3)};
        for (int r = 0; r < 4; r++) {
            char what[96];
            snprintf(what, sizeof what, "conv2d %s requires %d%d%d", fmt_s(fm), reqs[r][0],
                     reqs[r][1], reqs[r][2]);
            check_formats(what, &c, 3, in, reqs[r], fm);
            /* gradcheck of the ones that require grad */
            for (int i = 0; i < 3; i++) mft_tensor_set_requires_grad(in[i], reqs[r][i]);
            mft_status st = mft_gradcheck(op_fn, &c, 3, in, NULL);
            CHECK_MSG(st == MFT_OK, "%s: %s", what, mft_last_error_message());
            mft_clear_error();
        }
        release_all(3, in);
    }
}

/* Log lines of the dispatches during a backward. */
typedef struct log_capture {
    int bwd_input, bwd_weight, lines;
} log_capture;
static void log_cb(const char *line, void *ctx) {
    log_capture *l = ctx;
    l->lines++;
    if (strstr(line, "backward_input")) l->bwd_input++;
    if (strstr(line, "backward_weight")) l->bwd_weight++;
}

/* The first layer of a CNN: x (the image batch) requires no grad. The node
 * is recorded, w and b get grads, x none, and no convNd_backward_input op is
 * dispatched (the same run with x requiring grad dispatches one: the check
 * can fail). */
static void test_first_layer(void) {
    const int64_t xs[4] = {2, 1, 6, 6}, ws[4] = {4, 1, 3, 3}, bs[1] = {4};
    const int64_t st[2] = {1, 1}, pd[2] = {1, 1}, dl[2] = {1, 1};
    for (int pass = 0; pass < 2; pass++) {
        bool x_req = pass == 1;
        mft_tensor *x = mft_randn(4, xs, MFT_F32, CL, 5);
        mft_tensor *w = mft_randn(4, ws, MFT_F32, CL, 6);
        mft_tensor *b = mft_randn(1, bs, MFT_F32, CT, 7);
        mft_tensor_set_requires_grad(x, x_req);
        mft_tensor_set_requires_grad(w, true);
        mft_tensor_set_requires_grad(b, true);
        mft_autograd_conversions_reset();
        mft_tape_begin();
        mft_tensor *y = mft_conv2d(x, w, b, st, pd, dl, 1);
        CHECK(y && mft_tensor_requires_grad(y));
        CHECK_EQ_I(mft_tape_size(), 1);
        mft_tensor *g = y ? mft_ones(4, mft_tensor_sizes(y), MFT_F32, CL) : NULL;
        log_capture lc = {0, 0, 0};
        int prev_level = mft_verbose();
        mft_set_log_callback(log_cb, &lc);
        mft_set_verbose(1);
        CHECK(mft_backward(y, g) == MFT_OK);
        mft_set_verbose(prev_level);
        mft_set_log_callback(NULL, NULL);
        mft_tape_end();
        CHECK(lc.lines > 0);
        CHECK_EQ_I(lc.bwd_weight, 1);
        CHECK_EQ_I(lc.bwd_input, x_req ? 1 : 0);
        CHECK((mft_tensor_grad(x) != NULL) == x_req);
        CHECK(mft_tensor_grad(w) != NULL && mft_tensor_grad(b) != NULL);
        CHECK_EQ_I(mft_autograd_conversions(), 0);
        /* grad_b = sum of ones over N, H, W = 2 * 6 * 6 */
        if (mft_tensor_grad(b))
            for (int64_t i = 0; i < 4; i++) CHECK_NEAR(mft_tensor_get(mft_tensor_grad(b), &i), 72.0, 1e-4);
        mft_tensor *list[] = {x, w, b, y, g};
        release_all(5, list);
    }
}

/* ---------------------------------------------------------------- pooling */
static void pool_ctx(op_ctx *c, op_kind op, int nsp, const int64_t *k, const int64_t *s,
                     const int64_t *p, const int64_t *d) {
    memset(c, 0, sizeof *c);
    c->op = op;
    for (int i = 0; i < nsp; i++) {
        c->kernel[i] = k[i];
        c->stride[i] = s ? s[i] : 0;
        c->padding[i] = p ? p[i] : 0;
        c->dilation[i] = d ? d[i] : 1;
    }
}

static void gc_pool(const char *name, op_ctx *c, int nd, const int64_t *xs, bool cl_ok,
                    uint64_t seed) {
    for (int f = 0; f < (cl_ok ? 2 : 1); f++) {
        mft_format fm = f ? CL : CT;
        mft_tensor *in[1] = {rnd(nd, xs, fm, seed)};
        char what[128];
        snprintf(what, sizeof what, "%s x %s", name, fmt_s(fm));
        gc(what, c, 1, in);
        mft_tensor_release(in[0]);
    }
}

static void test_gradcheck_pool(void) {
    op_ctx c;
    const int64_t x4[4] = {2, 3, 6, 6}, x4b[4] = {1, 2, 5, 7}, x3[3] = {3, 6, 6};
    const int64_t x1[3] = {2, 3, 9}, x5[5] = {1, 2, 4, 4, 5};
    /* max_pool2d */
    pool_ctx(&c, OP_MAXP2, 2, (int64_t[]){3, 3}, (int64_t[]){2, 2}, (int64_t[]){1, 1}, NULL);
    gc_pool("max_pool2d k3 s2 p1", &c, 4, x4, true, 40);
    pool_ctx(&c, OP_MAXP2, 2, (int64_t[]){2, 2}, NULL, NULL, (int64_t[]){2, 1});
    gc_pool("max_pool2d k2 dilation", &c, 4, x4b, true, 41);
    pool_ctx(&c, OP_MAXP2, 2, (int64_t[]){2, 2}, (int64_t[]){2, 2}, NULL, NULL);
    c.ceil_mode = true;
    gc_pool("max_pool2d ceil", &c, 4, x4b, true, 42);
    pool_ctx(&c, OP_MAXP2, 2, (int64_t[]){2, 2}, NULL, NULL, NULL);
    gc_pool("max_pool2d unbatched", &c, 3, x3, false, 43);
    pool_ctx(&c, OP_MAXP2I, 2, (int64_t[]){3, 2}, (int64_t[]){2, 1}, (int64_t[]){1, 0}, NULL);
    gc_pool("max_pool2d_with_indices", &c, 4, x4, true, 44);
    /* relu_max_pool2d (fused relu -> max_pool2d) */
    pool_ctx(&c, OP_RMAXP2, 2, (int64_t[]){2, 2}, NULL, NULL, NULL);
    gc_pool("relu_max_pool2d k2", &c, 4, x4, true, 58);
    pool_ctx(&c, OP_RMAXP2, 2, (int64_t[]){3, 3}, (int64_t[]){2, 2}, (int64_t[]){1, 1}, NULL);
    gc_pool("relu_max_pool2d k3 s2 p1", &c, 4, x4, true, 59);
    /* avg_pool2d */
    pool_ctx(&c, OP_AVGP2, 2, (int64_t[]){3, 3}, (int64_t[]){2, 2}, (int64_t[]){1, 1}, NULL);
    c.count_include_pad = true;
    gc_pool("avg_pool2d include_pad", &c, 4, x4, true, 45);
    c.count_include_pad = false;
    c.ceil_mode = true;
    gc_pool("avg_pool2d exclude_pad ceil", &c, 4, x4b, true, 46);
    c.divisor = 5;
    gc_pool("avg_pool2d divisor", &c, 4, x4, true, 47);
    pool_ctx(&c, OP_AVGP2, 2, (int64_t[]){2, 2}, NULL, NULL, NULL);
    gc_pool("avg_pool2d unbatched", &c, 3, x3, false, 48);
    /* 1-D */
    pool_ctx(&c, OP_MAXP1, 1, (int64_t[]){3}, (int64_t[]){2}, (int64_t[]){1}, NULL);
    gc_pool("max_pool1d", &c, 3, x1, true, 49);
    pool_ctx(&c, OP_AVGP1, 1, (int64_t[]){3}, (int64_t[]){2}, (int64_t[]){1}, NULL);
    c.count_include_pad = false;
    gc_pool("avg_pool1d", &c, 3, x1, true, 50);
    /* 3-D */
    pool_ctx(&c, OP_MAXP3, 3, (int64_t[]){2, 2, 2}, NULL, NULL, NULL);
    gc_pool("max_pool3d", &c, 5, x5, true, 51);
    pool_ctx(&c, OP_MAXP3I, 3, (int64_t[]){2, 3, 2}, (int64_t[]){1, 2, 2}, (int64_t[]){1, 1, 0},
             NULL);
    gc_pool("max_pool3d_with_indices", &c, 5, x5, true, 52);
    pool_ctx(&c, OP_AVGP3, 3, (int64_t[]){2, 3, 2}, (int64_t[]){1, 2, 2}, (int64_t[]){1, 1, 0},
             NULL);
    c.count_include_pad = true;
    gc_pool("avg_pool3d", &c, 5, x5, true, 53);
    c.divisor = 7;
    gc_pool("avg_pool3d divisor", &c, 5, x5, true, 54);
    /* adaptive */
    memset(&c, 0, sizeof c);
    c.op = OP_AAVGP2;
    c.out[0] = 3, c.out[1] = 2;
    gc_pool("adaptive_avg_pool2d", &c, 4, x4b, true, 55);
    c.op = OP_AMAXP2;
    c.out[0] = 2, c.out[1] = 3;
    gc_pool("adaptive_max_pool2d", &c, 4, x4b, true, 56);
    c.op = OP_AAVGP2;
    c.out[0] = 1, c.out[1] = 1;
    gc_pool("adaptive_avg_pool2d global", &c, 4, x4, true, 57);
    c.op = OP_AAVGP3;
    c.out[0] = 3, c.out[1] = 2, c.out[2] = 7;
    gc_pool("adaptive_avg_pool3d", &c, 5, x5, true, 60);
    c.op = OP_AMAXP3;
    c.out[0] = 2, c.out[1] = 3, c.out[2] = 2;
    gc_pool("adaptive_max_pool3d", &c, 5, x5, true, 61);
    c.op = OP_AAVGP3;
    c.out[0] = 1, c.out[1] = 1, c.out[2] = 1;
    gc_pool("adaptive_avg_pool3d global", &c, 5, x5, true, 62);
    c.op = OP_AMAXP3;
    c.out[0] = 2, c.out[1] = 4, c.out[2] = 3;
    gc_pool("adaptive_max_pool3d unbatched", &c, 4, x4, false, 63);
}

/* The indices returned by a recorded max_pool2d_with_indices are the
 * forward's, and the recorded backward routes grad_out to them. */
static void test_max_pool_indices(void) {
    const int64_t xs[4] = {1, 2, 4, 4}, k[2] = {2, 2};
    mft_tensor *x = mft_randn(4, xs, MFT_F64, CL, 9);
    mft_tensor_set_requires_grad(x, true);
    mft_tensor *idx0 = NULL, *idx1 = NULL;
    mft_tensor *y0 = mft_max_pool2d_with_indices(x, k, NULL, NULL, NULL, false, &idx0);
    mft_tape_begin();
    mft_tensor *y1 = mft_max_pool2d_with_indices(x, k, NULL, NULL, NULL, false, &idx1);
    CHECK(y1 && idx1 && mft_tensor_requires_grad(y1) && !mft_tensor_requires_grad(idx1));
    CHECK_EQ_I(mft_tape_size(), 1);
    mft_tensor *g = mft_ones(4, mft_tensor_sizes(y1), MFT_F64, CT);
    CHECK(mft_backward(y1, g) == MFT_OK);
    mft_tape_end();
    int64_t i[4] = {0};
    do {
        CHECK(mft_tensor_get(idx0, i) == mft_tensor_get(idx1, i));
    } while (tu_next_index(4, mft_tensor_sizes(idx0), i));
    /* every 2x2 window of x holds exactly one 1 in the grad, at the maximum */
    mft_tensor *gx = mft_tensor_grad(x);
    CHECK(gx != NULL);
    if (gx) {
        int64_t j[4] = {0};
        do {
            int64_t h = j[2], w = j[3], p[4] = {j[0], j[1], h / 2, w / 2};
            double want = mft_tensor_get(idx0, p) == (double)(h * 4 + w) ? 1.0 : 0.0;
            CHECK(mft_tensor_get(gx, j) == want);
        } while (tu_next_index(4, xs, j));
    }
    mft_tensor *list[] = {x, idx0, idx1, y0, y1, g};
    release_all(6, list);
}

static bool all_close(const mft_tensor *a, const mft_tensor *b, double tol);

/* relu_max_pool2d on the tape against the relu -> max_pool2d chain it
 * fuses: equal values, bit-identical grad_x (NHWC and NCHW; 2x2 windows,
 * where NHWC runs the dense backward, and overlapping 3x3 / stride 2 ones,
 * which scatter), one node instead of two. */
static void test_relu_max_pool_chain(void) {
    const int64_t xs[4] = {2, 32, 10, 12};
    for (int f = 0; f < 2; f++)
        for (int geo = 0; geo < 2; geo++) {
            const mft_format fm = f ? CL : CT;
            const int64_t k[2] = {2 + geo, 2 + geo}, s[2] = {2, 2}, pd[2] = {geo, geo};
            mft_tensor *x = mft_randn(4, xs, MFT_F32, fm, 70 + (uint64_t)(2 * f + geo));
            mft_tensor_set_requires_grad(x, true);
            mft_tensor *gx[2] = {NULL, NULL}, *y[2] = {NULL, NULL}, *g = NULL;
            for (int fused = 0; fused < 2; fused++) {
                mft_tape_begin();
                mft_tensor *r = fused ? NULL : mft_relu(x);
                y[fused] = fused ? mft_relu_max_pool2d(x, k, s, pd, NULL, false)
                                 : mft_max_pool2d(r, k, s, pd, NULL, false);
                CHECK_EQ_I(mft_tape_size(), fused ? 1 : 2);
                if (!g) g = mft_randn(4, mft_tensor_sizes(y[fused]), MFT_F32, fm, 5);
                CHECK(mft_backward(y[fused], g) == MFT_OK);
                mft_tape_end();
                const mft_tensor *gr = mft_tensor_grad(x);
                CHECK(gr && mft_tensor_format(gr) == fm); /* x's format (docs/spec.md §5) */
                gx[fused] = mft_clone(gr, CT);
                mft_tensor_zero_grad(x);
                mft_tensor_release(r);
            }
            CHECK(gx[0] && gx[1]);
            CHECK(all_close(y[0], y[1], 0.0));
            if (gx[0] && gx[1]) {
                CHECK_MSG(memcmp(mft_tensor_data(gx[0]), mft_tensor_data(gx[1]),
                                 (size_t)mft_tensor_numel(x) * sizeof(float)) == 0,
                          "relu_max_pool2d grad differs from the chain's (%s, k%lld)",
                          fmt_s(fm), (long long)k[0]);
            }
            mft_tensor *list[] = {x, gx[0], gx[1], y[0], y[1], g};
            release_all(6, list);
        }
}

/* ---------------------------------------------------------------- matmul / linear */
static void test_gradcheck_linalg(void) {
    typedef struct mm_case {
        const char *name;
        int na, nb;
        int64_t a[4], b[4];
        mft_format fa;
    } mm_case;
    static const mm_case mm[] = {
        {"matmul 2d", 2, 2, {3, 4}, {4, 5}, CT},
        {"matmul batched", 3, 3, {2, 3, 4}, {2, 4, 5}, CT},
        {"matmul broadcast batch", 4, 3, {2, 1, 3, 4}, {3, 4, 2}, CT},
        {"matmul 2d @ batched", 2, 3, {3, 4}, {2, 4, 5}, CT},
        {"matmul batched @ 2d", 3, 2, {2, 3, 4}, {4, 5}, CT},
        {"matmul 1d @ 2d", 1, 2, {4}, {4, 5}, CT},
        {"matmul batched @ 1d", 3, 1, {2, 3, 4}, {4}, CT},
        {"matmul 1d @ 1d", 1, 1, {4}, {4}, CT},
        {"matmul 4d CL @ 2d", 4, 2, {2, 3, 4, 5}, {5, 3}, CL},
        {"matmul 4d CL @ 4d", 4, 4, {2, 3, 4, 5}, {2, 3, 5, 2}, CL},
    };
    op_ctx c;
    memset(&c, 0, sizeof c);
    c.op = OP_MATMUL;
    for (size_t k = 0; k < sizeof mm / sizeof *mm; k++) {
        mft_tensor *in[2] = {rnd(mm[k].na, mm[k].a, mm[k].fa, 60 + k),
                             rnd(mm[k].nb, mm[k].b, CT, 70 + k)};
        gc(mm[k].name, &c, 2, in);
        release_all(2, in);
    }
    typedef struct lin_case {
        const char *name;
        int nx;
        int64_t x[4];
        mft_format fx;
        bool bias;
    } lin_case;
    static const lin_case lin[] = {
        {"linear 2d bias", 2, {3, 4}, CT, true},
        {"linear 3d no bias", 3, {2, 3, 4}, CT, false},
        {"linear 1d bias", 1, {4}, CT, true},
        {"linear 4d CL bias", 4, {2, 3, 2, 4}, CL, true},
    };
    c.op = OP_LINEAR;
    const int64_t ws[2] = {5, 4}, bs[1] = {5};
    for (size_t k = 0; k < sizeof lin / sizeof *lin; k++) {
        c.has_bias = lin[k].bias;
        mft_tensor *in[3] = {rnd(lin[k].nx, lin[k].x, lin[k].fx, 80 + k), rnd(2, ws, CT, 90 + k),
                             lin[k].bias ? rnd(1, bs, CT, 95 + k) : NULL};
        gc(lin[k].name, &c, lin[k].bias ? 3 : 2, in);
        /* x constant (a first linear layer) and w alone */
        const bool r1[3] = {false, true, true}, r2[3] = {false, true, false};
        check_formats(lin[k].name, &c, lin[k].bias ? 3 : 2, in, r1, CT);
        check_formats(lin[k].name, &c, lin[k].bias ? 3 : 2, in, r2, CT);
        release_all(3, in);
    }
    /* matmul with only b requiring grad */
    c.op = OP_MATMUL;
    c.has_bias = false;
    mft_tensor *in[2] = {rnd(3, (int64_t[]){2, 3, 4}, CT, 99), rnd(2, (int64_t[]){4, 2}, CT, 98)};
    const bool rb[2] = {false, true};
    check_formats("matmul b only", &c, 2, in, rb, CT);
    release_all(2, in);
}

/* ---------------------------------------------------------------- a CNN chain */
/* conv(pad 1) -> max_pool 2 -> conv(pad 1) -> avg_pool 2 in F32, inputs
 * in fx (x) and fw (weights). Returns the four grads (new references) in
 * g[] (x, w1, w2, b2) and the engine's conversion count. */
static int64_t run_chain(mft_format fx, mft_format fw, mft_tensor *const *src, mft_tensor **g) {
    /* fresh leaves (clones) each run, so no grad accumulates across runs */
    mft_tensor *x = mft_clone(src[0], fx), *w1 = mft_clone(src[1], fw);
    mft_tensor *w2 = mft_clone(src[2], fw), *b2 = mft_clone(src[3], MFT_PRESERVE);
    mft_tensor *go = src[4];
    mft_tensor *leaves[4] = {x, w1, w2, b2};
    for (int i = 0; i < 4; i++) mft_tensor_set_requires_grad(leaves[i], true);
    const int64_t one[2] = {1, 1}, k2[2] = {2, 2};
    mft_autograd_conversions_reset();
    mft_tape_begin();
    mft_scope_begin();
    mft_tensor *y1 = mft_conv2d(x, w1, NULL, one, one, one, 1);
    mft_tensor *p1 = mft_max_pool2d(y1, k2, NULL, NULL, NULL, false);
    mft_tensor *y2 = mft_conv2d(p1, w2, b2, one, one, one, 1);
    mft_tensor *out = mft_avg_pool2d(y2, k2, NULL, NULL, false, true, 0);
    CHECK(out != NULL);
    CHECK_EQ_I(mft_tape_size(), 4);
    if (out) {
        CHECK(mft_tensor_format(y1) == (fx == CL || fw == CL ? CL : CT));
        CHECK(mft_backward(out, go) == MFT_OK);
    }
    mft_scope_end();
    mft_tape_end();
    int64_t conv = mft_autograd_conversions();
    for (int i = 0; i < 4; i++) {
        g[i] = mft_tensor_grad(leaves[i]);
        CHECK(g[i] != NULL);
        if (g[i]) mft_tensor_retain(g[i]);
        mft_tensor_release(leaves[i]);
    }
    return conv;
}

static bool all_close(const mft_tensor *a, const mft_tensor *b, double tol) {
    if (!a || !b || mft_tensor_numel(a) != mft_tensor_numel(b)) return false;
    int64_t idx[MFT_MAX_DIMS] = {0};
    int nd = mft_tensor_ndim(a);
    do {
        double u = mft_tensor_get(a, idx), v = mft_tensor_get(b, idx);
        if (!(fabs(u - v) <= tol * (1.0 + fabs(v)))) return false;
    } while (tu_next_index(nd, mft_tensor_sizes(a), idx));
    return true;
}

static void test_chain_conversions(void) {
    const int64_t xs[4] = {2, 3, 8, 8}, w1s[4] = {4, 3, 3, 3}, w2s[4] = {5, 4, 3, 3};
    const int64_t b2s[1] = {5}, gs[4] = {2, 5, 2, 2};
    mft_tensor *src[5] = {mft_randn(4, xs, MFT_F32, CT, 1), mft_randn(4, w1s, MFT_F32, CT, 2),
                          mft_randn(4, w2s, MFT_F32, CT, 3), mft_randn(1, b2s, MFT_F32, CT, 4),
                          mft_randn(4, gs, MFT_F32, CT, 5)};
    mft_tensor *ref[4], *g[4];
    CHECK_EQ_I(run_chain(CT, CT, src, ref), 0);
    const mft_format combos[3][2] = {{CL, CL}, {CL, CT}, {CT, CL}};
    for (int k = 0; k < 3; k++) {
        int64_t conv = run_chain(combos[k][0], combos[k][1], src, g);
        CHECK_MSG(conv == 0, "chain x %s w %s: %lld conversions", fmt_s(combos[k][0]),
                  fmt_s(combos[k][1]), (long long)conv);
        for (int i = 0; i < 4; i++) {
            CHECK_MSG(all_close(g[i], ref[i], 1e-4), "chain x %s w %s: grad %d differs from NCHW",
                      fmt_s(combos[k][0]), fmt_s(combos[k][1]), i);
            if (g[i] && i < 3)
                CHECK(mft_tensor_is_contiguous(g[i], i == 0 ? combos[k][0] : combos[k][1]));
        }
        release_all(4, g);
    }
    /* the reference grads are not all zero (the comparison means something) */
    double s = 0;
    int64_t idx[4] = {0};
    do {
        s += fabs(mft_tensor_get(ref[1], idx));
    } while (tu_next_index(4, w1s, idx));
    CHECK(s > 0.1);
    release_all(4, ref);
    release_all(5, src);
}

/* ---------------------------------------------------------------- errors */
static void test_stale_and_null(void) {
    const int64_t xs[4] = {1, 2, 4, 4}, ws[4] = {3, 2, 3, 3};
    mft_tensor *x = mft_randn(4, xs, MFT_F32, CL, 1), *w = mft_randn(4, ws, MFT_F32, CT, 2);
    mft_tensor_set_requires_grad(w, true);
    mft_tape_begin();
    mft_tensor *y = mft_conv2d(x, w, NULL, NULL, NULL, NULL, 1);
    CHECK(y != NULL);
    /* x (saved, a constant) modified in place after the op saved it */
    CHECK(mft_mul_scalar_(x, 2.0) == MFT_OK);
    mft_tensor *g = mft_ones(4, mft_tensor_sizes(y), MFT_F32, CT);
    CHECK(mft_backward(y, g) == MFT_ERR_STALE);
    CHECK_ERR(MFT_ERR_STALE, "conv2d");
    CHECK(mft_tensor_grad(w) == NULL);
    /* NULL propagates through a recording op and records nothing */
    int64_t n0 = mft_tape_size();
    CHECK(mft_conv2d(NULL, w, NULL, NULL, NULL, NULL, 1) == NULL);
    CHECK(mft_max_pool2d(NULL, (int64_t[]){2, 2}, NULL, NULL, NULL, false) == NULL);
    CHECK(mft_linear(NULL, w, NULL) == NULL);
    CHECK(mft_matmul(w, NULL) == NULL);
    CHECK_EQ_I(mft_tape_size(), n0);
    mft_clear_error();
    /* a bad argument under recording: error, nothing recorded */
    CHECK(mft_conv2d(x, w, NULL, (int64_t[]){0, 1}, NULL, NULL, 1) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "mft_conv2d");
    CHECK_EQ_I(mft_tape_size(), n0);
    mft_tape_end();
    mft_tensor *list[] = {x, w, y, g};
    release_all(4, list);
}

/* ---------------------------------------------------------------- allocation failure */
typedef struct fail_alloc {
    long long calls, fail_at;
} fail_alloc;
static fail_alloc g_fa;
static void *fa_alloc(size_t size, size_t align, void *ctx) {
    fail_alloc *f = ctx;
    if (++f->calls == f->fail_at) return NULL;
    size_t r = (size + align - 1) / align * align;
    return aligned_alloc(align, r ? r : align);
}
static void fa_free(void *p, void *ctx) {
    (void)ctx;
    free(p);
}

/* Each recording op with the k-th allocation failing, for every k, inside
 * and outside a scope: either the op succeeds and its node is on the tape,
 * or it returns NULL with NOMEM and the tape is unchanged; nothing leaks. */
static void test_alloc_failure(void) {
    const int64_t xs[4] = {1, 2, 5, 5}, ws[4] = {3, 2, 3, 3}, ls[2] = {4, 5}, bs[1] = {3};
    mft_tensor *x = mft_randn(4, xs, MFT_F32, CL, 1), *w = mft_randn(4, ws, MFT_F32, CT, 2);
    mft_tensor *b = mft_randn(1, bs, MFT_F32, CT, 3), *lw = mft_randn(2, ls, MFT_F32, CT, 4);
    mft_tensor *x3 = mft_randn(5, (int64_t[]){1, 2, 4, 4, 4}, MFT_F32, CL, 5);
    mft_tensor *all[] = {x, w, b, lw, x3};
    for (int i = 0; i < 5; i++) mft_tensor_set_requires_grad(all[i], true);
    const int64_t base_t = mft_live_tensors(), base_s = mft_live_storages();
    mft_allocator fa = {fa_alloc, fa_free, &g_fa};
    for (int op = 0; op < 6; op++) {
        for (int scoped = 0; scoped < 2; scoped++) {
            bool done = false;
            for (long long k = 1; k < 400 && !done; k++) {
                mft_tape_begin();
                if (scoped) mft_scope_begin();
                g_fa.calls = 0;
                g_fa.fail_at = k;
                mft_set_allocator(&fa);
                mft_tensor *y = NULL, *idx = NULL;
                switch (op) {
                case 0: y = mft_conv2d(x, w, b, NULL, (int64_t[]){1, 1}, NULL, 1); break;
                case 1: y = mft_max_pool2d(x, (int64_t[]){2, 2}, NULL, NULL, NULL, false); break;
                case 2:
                    y = mft_max_pool3d_with_indices(x3, (int64_t[]){2, 2, 2}, NULL, NULL, NULL,
                                                    false, &idx);
                    break;
                case 3: y = mft_adaptive_avg_pool2d(x, (int64_t[]){2, 2}); break;
                case 4: y = mft_linear(lw, lw, NULL); break;
                default: y = mft_matmul(x3, x3); break; /* batched (..,4,4) @ (..,4,4) */
                }
                mft_set_allocator(NULL);
                bool failed = g_fa.calls >= k;
                if (y) {
                    CHECK_EQ_I(mft_tape_size(), 1);
                } else {
                    CHECK_EQ_I(mft_tape_size(), 0);
                    CHECK(idx == NULL);
                    if (failed && mft_last_error() != MFT_ERR_NOMEM)
                        CHECK_MSG(false, "op %d k %lld: %s", op, k, mft_last_error_message());
                }
                if (!failed) done = true; /* the run made fewer than k allocations */
                if (!scoped) {
                    mft_tensor_release(y);
                    mft_tensor_release(idx);
                }
                if (scoped) mft_scope_end();
                mft_tape_end();
                mft_clear_error();
                CHECK_EQ_I(mft_live_tensors(), base_t);
                CHECK_EQ_I(mft_live_storages(), base_s);
            }
            CHECK(done);
        }
    }
    release_all(5, all);
}

int main(void) {
    RUN(test_gradcheck_conv);
    RUN(test_conv_partial_requires);
    RUN(test_first_layer);
    RUN(test_gradcheck_pool);
    RUN(test_max_pool_indices);
    RUN(test_relu_max_pool_chain);
    RUN(test_gradcheck_linalg);
    RUN(test_chain_conversions);
    RUN(test_stale_and_null);
    RUN(test_alloc_failure);
    TEST_MAIN_END();
}
