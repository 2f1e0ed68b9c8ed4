/* tests/autograd/test_autograd_norm.c — autograd of the norm, resize, dropout,
 * softmax and shape ops (the nodes recorded by ops/norm/, ops/resize/resize.c,
 * ops/dropout/dropout.c, ops/softmax/softmax.c, ops/shape/):
 *   (a) mft_gradcheck (F64, central differences: independent of the code
 *       under test) of every op with NCHW and NHWC inputs: batch_norm
 *       training / eval with and without weight and bias, group_norm with
 *       groups 1, C/2, C, layer_norm over the last 1 and 3 dims,
 *       instance_norm, interpolate (nearest, bilinear with and without
 *       align_corners, bicubic), dropout / dropout2d (p 0.5), softmax and
 *       log_softmax (dim 1 and the last), pad (constant, reflect, replicate,
 *       negative pads), cat / stack / split along C with mixed formats;
 *   (b) docs/spec.md §5 formats: NHWC and NCHW chains of these ops backpropagate
 *       with 0 engine conversions (every node already returns its input's
 *       format) and leaf grads keep the leaf's layout;
 *   (c) dropout's gradient is the forward's mask / (1 - p); p = 0 records
 *       nothing and passes the gradient through;
 *   (d) batch_norm's running statistics: updated by the training forward
 *       only, untouched by backward, no gradient; eval uses them as
 *       constants; a running stat that requires grad is refused in training;
 *   (e) split: unused chunks get zero gradients;
 *   (f) errors under the tape (forward failures record nothing), NULL
 *       propagation, scopes, F32, and allocation failure injected at every
 *       allocation of a recorded forward + backward: an error, never a leak.
 * Every test ends with no live tensor or storage (TEST_MAIN_END). */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "fail_alloc.h"
#include "harness.h"
#include "test_util.h"

/* ------------------------------------------------------------------ helpers */
static mft_tensor *leaf(int nd, const int64_t *sz, mft_dtype dt, mft_format f, uint64_t seed) {
    mft_tensor *t = mft_randn(nd, sz, dt, f, seed);
    mft_tensor_set_requires_grad(t, true);
    return t;
}

static bool close_all(const mft_tensor *a, const mft_tensor *b, double tol) {
    if (!a || !b || mft_tensor_ndim(a) != mft_tensor_ndim(b)) return false;
    int nd = mft_tensor_ndim(a);
    if (memcmp(mft_tensor_sizes(a), mft_tensor_sizes(b), (size_t)nd * sizeof(int64_t))) return false;
    if (mft_tensor_numel(a) == 0) return true;
    int64_t idx[MFT_MAX_DIMS] = {0};
    do {
        double x = mft_tensor_get(a, idx), y = mft_tensor_get(b, idx);
        if (!(fabs(x - y) <= tol * (1.0 + fabs(y)))) return false;
    } while (tu_next_index(nd, mft_tensor_sizes(a), idx));
    return true;
}

static const char *fmt_name(mft_format f) { return f == MFT_CHANNELS_LAST ? "NHWC" : "NCHW"; }

/* ------------------------------------------------------------------ the ops under gradcheck */
enum {
    OP_BN, OP_GN, OP_IN, OP_LN, OP_INTERP, OP_DROP, OP_DROP2D, OP_SOFTMAX, OP_LOGSOFTMAX,
    OP_PAD, OP_CAT, OP_STACK, OP_SPLIT
};

typedef struct op_ctx {
    int op;
    /* norms: inputs = {x, weight?, bias?} */
    bool has_w, has_b, training;
    mft_tensor *rm, *rv; /* batch_norm running stats (borrowed) */
    int64_t groups;
    int nnorm;
    /* interpolate */
    int64_t out_size[3];
    mft_interp_mode mode;
    bool align;
    /* dropout */
    double p;
    uint64_t seed;
    /* softmax / cat / stack / split */
    int dim;
    /* pad */
    int npad;
    int64_t pads[6];
    mft_pad_mode pmode;
    int n; /* cat / stack: number of inputs */
} op_ctx;

static mft_tensor *op_fn(void *vctx, mft_tensor *const *in) {
    const op_ctx *c = vctx;
    const mft_tensor *x = in[0];
    const mft_tensor *w = c->has_w ? in[1] : NULL;
    const mft_tensor *b = c->has_b ? in[c->has_w ? 2 : 1] : NULL;
    switch (c->op) {
    case OP_BN:
        return mft_batch_norm(x, c->rm, c->rv, w, b, c->training, 0.1, 1e-5);
    case OP_GN:
        return mft_group_norm(x, c->groups, w, b, 1e-5);
    case OP_IN:
        return mft_instance_norm(x, w, b, 1e-5);
    case OP_LN:
        return mft_layer_norm(x, c->nnorm, mft_tensor_sizes(x) + mft_tensor_ndim(x) - c->nnorm,
                              w, b, 1e-5);
    case OP_INTERP:
        return mft_interpolate(x, c->out_size, c->mode, c->align);
    case OP_DROP:
        return mft_dropout(x, c->p, true, c->seed);
    case OP_DROP2D:
        return mft_dropout2d(x, c->p, true, c->seed);
    case OP_SOFTMAX:
        return mft_softmax(x, c->dim);
    case OP_LOGSOFTMAX:
        return mft_log_softmax(x, c->dim);
    case OP_PAD:
        return mft_pad(x, c->npad, c->pads, c->pmode, 0.0);
    case OP_CAT:
        return mft_cat(c->n, (const mft_tensor *const *)in, c->dim);
    case OP_STACK:
        return mft_stack(c->n, (const mft_tensor *const *)in, c->dim);
    case OP_SPLIT: {
        /* chunks of 2 along dim: keep chunks 2 and 0 (reversed), drop 1 */
        mft_tensor *outs[8] = {0};
        int k = 0;
        if (mft_split(x, 2, c->dim, 8, outs, &k) != MFT_OK) return NULL;
        const mft_tensor *pick[2] = {outs[2], outs[0]};
        mft_tensor *r = k >= 3 ? mft_cat(2, pick, c->dim) : NULL;
        for (int i = 0; i < k; i++) mft_tensor_release(outs[i]);
        return r;
    }
    default:
        return NULL;
    }
}

/* gradcheck of c over inputs (which must require grad); reports the case. */
static void gc(op_ctx *c, int n, mft_tensor *const *in, const char *what) {
    mft_gradcheck_opts o = {1e-6, 1e-6, 1e-4, 7};
    mft_status st = mft_gradcheck(op_fn, c, n, in, &o);
    CHECK_MSG(st == MFT_OK, "%s: %s", what, mft_last_error_message());
    mft_clear_error();
}

/* Runs c once under a tape with x's format grad_output, backward, and
 * checks: 0 engine conversions, every leaf grad present with its leaf's
 * strides (leaves are dense), the tape recorded exactly one node per op. */
static void formats_once(op_ctx *c, int n, mft_tensor *const *in, const char *what) {
    mft_autograd_conversions_reset();
    CHECK(mft_tape_begin() == MFT_OK);
    mft_tensor *y = op_fn(c, in);
    CHECK_MSG(y && mft_tensor_requires_grad(y), "%s: %s", what, mft_last_error_message());
    if (y) {
        mft_tensor *g = mft_randn(mft_tensor_ndim(y), mft_tensor_sizes(y), mft_tensor_dtype(y),
                                  mft_tensor_format(y), 3);
        CHECK_MSG(mft_backward(y, g) == MFT_OK, "%s: %s", what, mft_last_error_message());
        mft_tensor_release(g);
    }
    mft_tape_end();
    CHECK_MSG(mft_autograd_conversions() == 0, "%s: %lld conversions", what,
              (long long)mft_autograd_conversions());
    for (int i = 0; i < n; i++) {
        mft_tensor *g = mft_tensor_grad(in[i]);
        CHECK_MSG(g != NULL, "%s: input %d has no grad", what, i);
        if (!g) continue;
        int nd = mft_tensor_ndim(g);
        bool same = true;
        for (int d = 0; d < nd; d++)
            if (mft_tensor_sizes(g)[d] > 1 && mft_tensor_strides(g)[d] != mft_tensor_strides(in[i])[d])
                same = false;
        CHECK_MSG(same, "%s: input %d grad strides differ from the leaf's", what, i);
        if (nd >= 3)
            CHECK_MSG(mft_tensor_format(g) == mft_tensor_format(in[i]), "%s: input %d grad is %s",
                      what, i, fmt_name(mft_tensor_format(g)));
        mft_tensor_zero_grad(in[i]);
    }
    mft_tensor_release(y);
}

static void run_case(op_ctx *c, int n, mft_tensor *const *in, const char *what) {
    gc(c, n, in, what);
    formats_once(c, n, in, what);
}

/* ------------------------------------------------------------------ (a) + (b) per op */
static void test_batch_norm(void) {
    int64_t sz[4] = {2, 3, 3, 2}, C = 3;
    for (int f = 0; f < 2; f++) {
        mft_format fmt = f ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
        for (int training = 0; training < 2; training++)
            for (int wb = 0; wb < 4; wb++) {
                op_ctx c;
                memset(&c, 0, sizeof c);
                c.op = OP_BN;
                c.training = training;
                c.has_w = wb & 1;
                c.has_b = (wb & 2) != 0;
                mft_tensor *rm = mft_rand(1, &C, MFT_F64, MFT_CONTIGUOUS, 11);
                mft_tensor *rv0 = mft_rand(1, &C, MFT_F64, MFT_CONTIGUOUS, 12);
                mft_tensor *rv = mft_add_scalar(rv0, 0.5);
                /* training without running stats too (the common functional form) */
                c.rm = training && wb == 3 ? NULL : rm;
                c.rv = training && wb == 3 ? NULL : rv;
                mft_tensor *in[3];
                int n = 0;
                in[n++] = leaf(4, sz, MFT_F64, fmt, 20 + (uint64_t)wb);
                if (c.has_w) in[n++] = leaf(1, &C, MFT_F64, MFT_CONTIGUOUS, 30);
                if (c.has_b) in[n++] = leaf(1, &C, MFT_F64, MFT_CONTIGUOUS, 31);
                char what[96];
                snprintf(what, sizeof what, "batch_norm %s training=%d w=%d b=%d", fmt_name(fmt),
                         training, c.has_w, c.has_b);
                run_case(&c, n, in, what);
                if (n > 1) { /* x a constant: only weight / bias get gradients */
                    mft_tensor_set_requires_grad(in[0], false);
                    strcat(what, " x const");
                    gc(&c, n, in, what);
                }
                for (int i = 0; i < n; i++) mft_tensor_release(in[i]);
                mft_tensor_release(rm), mft_tensor_release(rv0), mft_tensor_release(rv);
            }
    }
}

static void test_group_instance_layer_norm(void) {
    int64_t sz[4] = {2, 4, 3, 2}, C = 4;
    const int64_t groups[3] = {1, 2, 4};
    for (int f = 0; f < 2; f++) {
        mft_format fmt = f ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
        char what[96];
        for (int gi = 0; gi < 3; gi++)
            for (int wb = 0; wb < 2; wb++) {
                op_ctx c;
                memset(&c, 0, sizeof c);
                c.op = OP_GN;
                c.groups = groups[gi];
                c.has_w = c.has_b = wb;
                mft_tensor *in[3] = {leaf(4, sz, MFT_F64, fmt, 40 + (uint64_t)gi), NULL, NULL};
                if (wb) {
                    in[1] = leaf(1, &C, MFT_F64, MFT_CONTIGUOUS, 41);
                    in[2] = leaf(1, &C, MFT_F64, MFT_CONTIGUOUS, 42);
                }
                snprintf(what, sizeof what, "group_norm %s groups=%lld affine=%d", fmt_name(fmt),
                         (long long)c.groups, wb);
                run_case(&c, wb ? 3 : 1, in, what);
                for (int i = 0; i < 3; i++) mft_tensor_release(in[i]);
            }
        for (int wb = 0; wb < 2; wb++) {
            op_ctx c;
            memset(&c, 0, sizeof c);
            c.op = OP_IN;
            c.has_w = c.has_b = wb;
            mft_tensor *in[3] = {leaf(4, sz, MFT_F64, fmt, 50), NULL, NULL};
            if (wb) {
                in[1] = leaf(1, &C, MFT_F64, MFT_CONTIGUOUS, 51);
                in[2] = leaf(1, &C, MFT_F64, MFT_CONTIGUOUS, 52);
            }
            snprintf(what, sizeof what, "instance_norm %s affine=%d", fmt_name(fmt), wb);
            run_case(&c, wb ? 3 : 1, in, what);
            for (int i = 0; i < 3; i++) mft_tensor_release(in[i]);
        }
        for (int nn = 1; nn <= 3; nn += 2)
            for (int wb = 0; wb < 2; wb++) {
                op_ctx c;
                memset(&c, 0, sizeof c);
                c.op = OP_LN;
                c.nnorm = nn;
                c.has_w = c.has_b = wb;
                mft_tensor *in[3] = {leaf(4, sz, MFT_F64, fmt, 60 + (uint64_t)nn), NULL, NULL};
                if (wb) {
                    in[1] = leaf(nn, sz + 4 - nn, MFT_F64, MFT_CONTIGUOUS, 61);
                    in[2] = leaf(nn, sz + 4 - nn, MFT_F64, MFT_CONTIGUOUS, 62);
                }
                snprintf(what, sizeof what, "layer_norm %s nnorm=%d affine=%d", fmt_name(fmt), nn,
                         wb);
                run_case(&c, wb ? 3 : 1, in, what);
                for (int i = 0; i < 3; i++) mft_tensor_release(in[i]);
            }
    }
}

static void test_interpolate(void) {
    int64_t sz[4] = {2, 3, 3, 4};
    const struct {
        mft_interp_mode mode;
        bool align;
        int64_t out[2];
    } cases[] = {
        {MFT_INTERP_NEAREST, false, {5, 7}},   {MFT_INTERP_NEAREST, false, {2, 3}},
        {MFT_INTERP_BILINEAR, false, {5, 7}},  {MFT_INTERP_BILINEAR, true, {5, 7}},
        {MFT_INTERP_BILINEAR, false, {2, 3}},  {MFT_INTERP_BILINEAR, true, {2, 3}},
        {MFT_INTERP_BICUBIC, false, {5, 6}},   {MFT_INTERP_BICUBIC, true, {4, 3}},
        {MFT_INTERP_NEAREST_EXACT, false, {5, 3}},
    };
    for (int f = 0; f < 2; f++) {
        mft_format fmt = f ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
        for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
            op_ctx c;
            memset(&c, 0, sizeof c);
            c.op = OP_INTERP;
            c.mode = cases[k].mode;
            c.align = cases[k].align;
            c.out_size[0] = cases[k].out[0];
            c.out_size[1] = cases[k].out[1];
            mft_tensor *x = leaf(4, sz, MFT_F64, fmt, 70 + k);
            char what[96];
            snprintf(what, sizeof what, "interpolate %s mode=%d align=%d out=%lldx%lld",
                     fmt_name(fmt), (int)c.mode, c.align, (long long)c.out_size[0],
                     (long long)c.out_size[1]);
            run_case(&c, 1, &x, what);
            mft_tensor_release(x);
        }
    }
    /* 1-D linear on a rank-3 input */
    int64_t s3[3] = {2, 3, 5};
    op_ctx c;
    memset(&c, 0, sizeof c);
    c.op = OP_INTERP;
    c.mode = MFT_INTERP_LINEAR;
    c.out_size[0] = 8;
    mft_tensor *x = leaf(3, s3, MFT_F64, MFT_CONTIGUOUS, 79);
    run_case(&c, 1, &x, "interpolate linear 1-D");
    mft_tensor_release(x);
}

static void test_softmax(void) {
    int64_t sz[4] = {2, 4, 3, 2};
    for (int f = 0; f < 2; f++) {
        mft_format fmt = f ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
        for (int lg = 0; lg < 2; lg++)
            for (int di = 0; di < 2; di++) {
                op_ctx c;
                memset(&c, 0, sizeof c);
                c.op = lg ? OP_LOGSOFTMAX : OP_SOFTMAX;
                c.dim = di ? -1 : 1;
                mft_tensor *x = leaf(4, sz, MFT_F64, fmt, 80 + (uint64_t)(2 * lg + di));
                char what[96];
                snprintf(what, sizeof what, "%s %s dim=%d", lg ? "log_softmax" : "softmax",
                         fmt_name(fmt), c.dim);
                run_case(&c, 1, &x, what);
                mft_tensor_release(x);
            }
    }
    /* rank 2 (logits) */
    int64_t s2[2] = {3, 5};
    op_ctx c;
    memset(&c, 0, sizeof c);
    c.op = OP_LOGSOFTMAX;
    c.dim = 1;
    mft_tensor *x = leaf(2, s2, MFT_F64, MFT_CONTIGUOUS, 89);
    run_case(&c, 1, &x, "log_softmax rank 2");
    mft_tensor_release(x);
}

static void test_pad(void) {
    int64_t sz[4] = {2, 3, 4, 5};
    const struct {
        mft_pad_mode mode;
        int npad;
        int64_t pads[4];
    } cases[] = {
        {MFT_PAD_CONSTANT, 4, {1, 2, 0, 3}},   {MFT_PAD_CONSTANT, 4, {-1, 2, 1, -2}},
        {MFT_PAD_CONSTANT, 2, {-2, -1, 0, 0}}, {MFT_PAD_REFLECT, 4, {2, 1, 3, 1}},
        {MFT_PAD_REFLECT, 4, {-1, 2, 1, -1}},  {MFT_PAD_REPLICATE, 4, {3, 1, 0, 2}},
        {MFT_PAD_REPLICATE, 4, {-1, 2, 2, -1}},
    };
    for (int f = 0; f < 2; f++) {
        mft_format fmt = f ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
        for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
            op_ctx c;
            memset(&c, 0, sizeof c);
            c.op = OP_PAD;
            c.pmode = cases[k].mode;
            c.npad = cases[k].npad;
            memcpy(c.pads, cases[k].pads, sizeof cases[k].pads);
            mft_tensor *x = leaf(4, sz, MFT_F64, fmt, 90 + k);
            char what[96];
            snprintf(what, sizeof what, "pad %s mode=%d pads=%lld,%lld,%lld,%lld", fmt_name(fmt),
                     (int)c.pmode, (long long)c.pads[0], (long long)c.pads[1],
                     (long long)c.pads[2], (long long)c.pads[3]);
            run_case(&c, 1, &x, what);
            mft_tensor_release(x);
        }
    }
    /* value check of constant pad's gradient: the un-padded window of g */
    mft_tensor *x = leaf(4, sz, MFT_F64, MFT_CHANNELS_LAST, 99);
    mft_tape_begin();
    int64_t pads[4] = {1, -1, 2, 0};
    mft_tensor *y = mft_pad(x, 4, pads, MFT_PAD_CONSTANT, 5.0);
    mft_tensor *g = mft_randn(4, mft_tensor_sizes(y), MFT_F64, MFT_CONTIGUOUS, 5);
    CHECK(mft_backward(y, g) == MFT_OK);
    mft_tape_end();
    /* y[.., h, w] = x[.., h - 2, w - 1] for h >= 2, 1 <= w <= 4 (x's last col cropped) */
    mft_tensor *a = mft_narrow(g, 2, 2, 4), *b = mft_narrow(a, 3, 1, 4);
    mft_tensor *gx = mft_tensor_grad(x), *gx4 = mft_narrow(gx, 3, 0, 4), *gx5 = mft_narrow(gx, 3, 4, 1);
    CHECK(close_all(gx4, b, 0));
    mft_tensor *z = mft_zeros(4, (int64_t[]){2, 3, 4, 1}, MFT_F64, MFT_CONTIGUOUS);
    CHECK(close_all(gx5, z, 0));
    mft_tensor *list[] = {x, y, g, a, b, gx4, gx5, z};
    for (size_t i = 0; i < sizeof list / sizeof *list; i++) mft_tensor_release(list[i]);
}

static void test_cat_stack_split(void) {
    int64_t s1[4] = {2, 2, 3, 2}, s2[4] = {2, 3, 3, 2}, s3[4] = {2, 1, 3, 2};
    char what[96];
    /* cat along C: every format combination of three inputs */
    for (int mask = 0; mask < 8; mask++) {
        mft_format f[3];
        for (int i = 0; i < 3; i++) f[i] = (mask >> i) & 1 ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
        mft_tensor *in[3] = {leaf(4, s1, MFT_F64, f[0], 100), leaf(4, s2, MFT_F64, f[1], 101),
                             leaf(4, s3, MFT_F64, f[2], 102)};
        op_ctx c;
        memset(&c, 0, sizeof c);
        c.op = OP_CAT;
        c.n = 3;
        c.dim = 1;
        snprintf(what, sizeof what, "cat %s %s %s", fmt_name(f[0]), fmt_name(f[1]),
                 fmt_name(f[2]));
        run_case(&c, 3, in, what);
        c.op = OP_STACK;
        mft_tensor *st[2] = {in[0], leaf(4, s1, MFT_F64, f[2], 103)};
        snprintf(what, sizeof what, "stack %s %s", fmt_name(f[0]), fmt_name(f[2]));
        c.n = 2;
        run_case(&c, 2, st, what);
        c.dim = -1; /* stack along a new last dim */
        run_case(&c, 2, st, "stack dim -1");
        mft_tensor_release(st[1]);
        for (int i = 0; i < 3; i++) mft_tensor_release(in[i]);
    }
    /* a constant among the inputs gets nothing; the others still do */
    {
        mft_tensor *a = leaf(4, s1, MFT_F64, MFT_CHANNELS_LAST, 104);
        mft_tensor *k = mft_randn(4, s2, MFT_F64, MFT_CONTIGUOUS, 105);
        mft_tensor *in[2] = {k, a};
        mft_tape_begin();
        mft_tensor *y = mft_cat(2, (const mft_tensor *const *)in, 1);
        CHECK(mft_tensor_format(y) == MFT_CONTIGUOUS); /* mixed -> CONTIGUOUS (docs/spec.md §4) */
        mft_tensor *g = mft_randn(4, mft_tensor_sizes(y), MFT_F64, MFT_CONTIGUOUS, 6);
        mft_autograd_conversions_reset();
        CHECK(mft_backward(y, g) == MFT_OK);
        mft_tape_end();
        CHECK_EQ_I(mft_autograd_conversions(), 0);
        CHECK(mft_tensor_grad(k) == NULL);
        mft_tensor *part = mft_narrow(g, 1, 3, 2);
        CHECK(close_all(mft_tensor_grad(a), part, 0));
        CHECK(mft_tensor_format(mft_tensor_grad(a)) == MFT_CHANNELS_LAST);
        mft_tensor *list[] = {a, k, y, g, part};
        for (size_t i = 0; i < sizeof list / sizeof *list; i++) mft_tensor_release(list[i]);
    }
    /* split along C (chunks of 2 of C = 5: 2, 2, 1; chunk 1 unused) */
    int64_t s5[4] = {2, 5, 3, 2};
    for (int f = 0; f < 2; f++) {
        mft_format fmt = f ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
        op_ctx c;
        memset(&c, 0, sizeof c);
        c.op = OP_SPLIT;
        c.dim = 1;
        mft_tensor *x = leaf(4, s5, MFT_F64, fmt, 106);
        snprintf(what, sizeof what, "split %s", fmt_name(fmt));
        run_case(&c, 1, &x, what);
        /* (e) the unused chunk's slice of x.grad is exactly zero */
        mft_tape_begin();
        mft_tensor *outs[4] = {0};
        int k = 0;
        CHECK(mft_split(x, 2, 1, 4, outs, &k) == MFT_OK && k == 3);
        CHECK_EQ_I(mft_tape_size(), 1);
        CHECK(mft_tensor_requires_grad(outs[1]));
        mft_tensor *g = mft_ones(4, mft_tensor_sizes(outs[2]), MFT_F64, fmt);
        CHECK(mft_backward(outs[2], g) == MFT_OK);
        mft_tape_end();
        mft_tensor *gx = mft_tensor_grad(x);
        mft_tensor *head = mft_narrow(gx, 1, 0, 4), *tail = mft_narrow(gx, 1, 4, 1);
        mft_tensor *z = mft_zeros(4, mft_tensor_sizes(head), MFT_F64, MFT_CONTIGUOUS);
        CHECK(close_all(head, z, 0));
        CHECK(close_all(tail, g, 0));
        mft_tensor *list[] = {x, outs[0], outs[1], outs[2], g, head, tail, z};
        for (size_t i = 0; i < sizeof list / sizeof *list; i++) mft_tensor_release(list[i]);
    }
}

/* ------------------------------------------------------------------ (c) dropout */
static void test_dropout(void) {
    int64_t sz[4] = {2, 4, 3, 3};
    for (int f = 0; f < 2; f++) {
        mft_format fmt = f ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
        for (int ch = 0; ch < 2; ch++) {
            op_ctx c;
            memset(&c, 0, sizeof c);
            c.op = ch ? OP_DROP2D : OP_DROP;
            c.p = 0.5;
            c.seed = 1234;
            mft_tensor *x = leaf(4, sz, MFT_F64, fmt, 110 + (uint64_t)ch);
            char what[96];
            snprintf(what, sizeof what, "%s %s p=0.5", ch ? "dropout2d" : "dropout", fmt_name(fmt));
            run_case(&c, 1, &x, what);
            /* gradient = forward's mask / (1 - p) times grad_out */
            mft_tape_begin();
            mft_tensor *y = op_fn(&c, &x);
            mft_tensor *g = mft_randn(4, sz, MFT_F64, MFT_CONTIGUOUS, 9);
            CHECK(mft_backward(y, g) == MFT_OK);
            mft_tape_end();
            mft_tensor *gx = mft_tensor_grad(x);
            int64_t idx[4] = {0}, kept = 0, total = 0;
            bool ok = true;
            do {
                double xv = mft_tensor_get(x, idx), yv = mft_tensor_get(y, idx);
                bool keep = yv != 0.0;
                /* the forward: kept = x / (1 - p) */
                if (keep && fabs(yv - 2.0 * xv) > 1e-12) ok = false;
                double want = keep ? 2.0 * mft_tensor_get(g, idx) : 0.0;
                if (fabs(mft_tensor_get(gx, idx) - want) > 1e-12) ok = false;
                kept += keep;
                total++;
            } while (tu_next_index(4, sz, idx));
            CHECK_MSG(ok, "%s: grad differs from mask / (1 - p) * g", what);
            CHECK(kept > 0 && kept < total); /* a real mask, not all or nothing */
            CHECK(mft_tensor_format(gx) == fmt);
            mft_tensor_release(x), mft_tensor_release(y), mft_tensor_release(g);
        }
    }
    /* p = 0 and eval: x itself, nothing recorded, the gradient passes */
    int64_t s2[4] = {1, 2, 3, 2};
    mft_tensor *x = leaf(4, s2, MFT_F64, MFT_CHANNELS_LAST, 120);
    mft_tape_begin();
    mft_tensor *y0 = mft_dropout(x, 0.0, true, 1), *y1 = mft_dropout2d(x, 0.7, false, 1);
    CHECK(y0 == x && y1 == x);
    CHECK_EQ_I(mft_tape_size(), 0);
    int64_t pads[2] = {1, 1};
    mft_tensor *z = mft_pad(y0, 2, pads, MFT_PAD_CONSTANT, 0.0);
    mft_tensor *g = mft_randn(4, mft_tensor_sizes(z), MFT_F64, MFT_CHANNELS_LAST, 4);
    CHECK(mft_backward(z, g) == MFT_OK);
    mft_tape_end();
    mft_tensor *gin = mft_narrow(g, 3, 1, 2);
    CHECK(close_all(mft_tensor_grad(x), gin, 0));
    /* p = 1 drops everything: zero gradient */
    mft_tensor_zero_grad(x);
    mft_tape_begin();
    mft_tensor *y2 = mft_dropout(x, 1.0, true, 3);
    mft_tensor *g2 = mft_ones(4, s2, MFT_F64, MFT_CHANNELS_LAST);
    CHECK(mft_backward(y2, g2) == MFT_OK);
    mft_tape_end();
    mft_tensor *zz = mft_zeros(4, s2, MFT_F64, MFT_CONTIGUOUS);
    CHECK(close_all(mft_tensor_grad(x), zz, 0));
    mft_tensor *list[] = {x, y0, y1, z, g, gin, y2, g2, zz};
    for (size_t i = 0; i < sizeof list / sizeof *list; i++) mft_tensor_release(list[i]);
}

/* ------------------------------------------------------------------ (d) running stats */
static void test_running_stats(void) {
    int64_t sz[4] = {3, 2, 2, 2}, C = 2;
    mft_tensor *x = leaf(4, sz, MFT_F64, MFT_CHANNELS_LAST, 130);
    mft_tensor *rm = mft_zeros(1, &C, MFT_F64, MFT_CONTIGUOUS);
    mft_tensor *rv = mft_ones(1, &C, MFT_F64, MFT_CONTIGUOUS);
    mft_tensor *w = leaf(1, &C, MFT_F64, MFT_CONTIGUOUS, 131);
    mft_tape_begin();
    mft_tensor *y = mft_batch_norm(x, rm, rv, w, NULL, true, 0.5, 1e-5);
    CHECK(y && mft_tensor_requires_grad(y));
    /* the forward updated them: rm = 0.5 * batch mean (computed here) */
    for (int64_t c = 0; c < C; c++) {
        double s = 0;
        int64_t idx[4] = {0};
        do
            if (idx[1] == c) s += mft_tensor_get(x, idx);
        while (tu_next_index(4, sz, idx));
        CHECK_NEAR(mft_tensor_get(rm, &c), 0.5 * s / 12.0, 1e-12);
    }
    mft_tensor *rm_before = mft_clone(rm, MFT_CONTIGUOUS), *rv_before = mft_clone(rv, MFT_CONTIGUOUS);
    mft_tensor *g = mft_randn(4, sz, MFT_F64, MFT_CHANNELS_LAST, 7);
    CHECK(mft_backward(y, g) == MFT_OK);
    mft_tape_end();
    CHECK(close_all(rm, rm_before, 0) && close_all(rv, rv_before, 0));
    CHECK(mft_tensor_grad(rm) == NULL && mft_tensor_grad(rv) == NULL);
    CHECK(!mft_tensor_requires_grad(rm));
    CHECK(mft_tensor_grad(x) && mft_tensor_grad(w));
    /* eval: grad_x = g * w / sqrt(rv + eps), the running stats constants */
    mft_tensor_zero_grad(x);
    mft_tape_begin();
    mft_tensor *ye = mft_batch_norm(x, rm, rv, w, NULL, false, 0.5, 1e-5);
    CHECK(mft_backward(ye, g) == MFT_OK);
    mft_tape_end();
    CHECK(close_all(rm, rm_before, 0) && close_all(rv, rv_before, 0));
    {
        int64_t idx[4] = {0};
        bool ok = true;
        do {
            int64_t c = idx[1];
            double want = mft_tensor_get(g, idx) * mft_tensor_get(w, &c) /
                          sqrt(mft_tensor_get(rv, &c) + 1e-5);
            if (fabs(mft_tensor_get(mft_tensor_grad(x), idx) - want) > 1e-12) ok = false;
        } while (tu_next_index(4, sz, idx));
        CHECK(ok);
    }
    /* a running stat that requires grad is refused in training while recording */
    mft_tensor *rq = mft_zeros(1, &C, MFT_F64, MFT_CONTIGUOUS);
    mft_tensor_set_requires_grad(rq, true);
    mft_tape_begin();
    CHECK(mft_batch_norm(x, rq, rv, w, NULL, true, 0.5, 1e-5) == NULL);
    CHECK_ERR(MFT_ERR_UNSUPPORTED, "mft_batch_norm");
    CHECK_EQ_I(mft_tape_size(), 0);
    mft_tape_end();
    mft_tensor *list[] = {x, rm, rv, w, y, rm_before, rv_before, g, ye, rq};
    for (size_t i = 0; i < sizeof list / sizeof *list; i++) mft_tensor_release(list[i]);
}

/* ------------------------------------------------------------------ (b) chains, F32 */
/* interpolate -> pad -> batch_norm -> group_norm -> dropout -> split -> cat
 * -> layer_norm -> softmax -> log_softmax, all in one format: 0 conversions;
 * the F32 and F64 runs agree. */
static mft_tensor *chain(mft_tensor *x, mft_tensor *w, mft_tensor *rm, mft_tensor *rv) {
    int64_t up[2] = {6, 6}, pads[4] = {1, 1, 1, 1};
    mft_tensor *a = mft_interpolate(x, up, MFT_INTERP_BILINEAR, false);
    mft_tensor *b = mft_pad(a, 4, pads, MFT_PAD_REFLECT, 0.0);
    mft_tensor *c = mft_batch_norm(b, rm, rv, w, NULL, true, 0.1, 1e-5);
    mft_tensor *d = mft_group_norm(c, 2, w, NULL, 1e-5);
    mft_tensor *e = mft_dropout(d, 0.25, true, 77);
    mft_tensor *parts[4] = {0};
    int k = 0;
    mft_split(e, 3, 1, 4, parts, &k);
    const mft_tensor *rev[2] = {parts[1], parts[0]};
    mft_tensor *f = k == 2 ? mft_cat(2, rev, 1) : NULL;
    mft_tensor *g = f ? mft_layer_norm(f, 2, mft_tensor_sizes(f) + 2, NULL, NULL, 1e-5) : NULL;
    mft_tensor *h = mft_softmax(g, 1);
    mft_tensor *i = mft_log_softmax(h, -1);
    mft_tensor *list[] = {a, b, c, d, e, parts[0], parts[1], f, g, h};
    for (size_t j = 0; j < sizeof list / sizeof *list; j++) mft_tensor_release(list[j]);
    return i;
}

static void test_chains(void) {
    int64_t sz[4] = {2, 6, 3, 3}, C = 6;
    mft_tensor *grads[2][2] = {{0}};
    for (int f = 0; f < 2; f++) {
        mft_format fmt = f ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
        for (int dt = 0; dt < 2; dt++) {
            mft_dtype d = dt ? MFT_F64 : MFT_F32;
            mft_tensor *x = leaf(4, sz, d, fmt, 140), *w = leaf(1, &C, d, MFT_CONTIGUOUS, 141);
            mft_tensor *rm = mft_zeros(1, &C, d, MFT_CONTIGUOUS), *rv = mft_ones(1, &C, d, MFT_CONTIGUOUS);
            mft_autograd_conversions_reset();
            mft_tape_begin();
            mft_tensor *y = chain(x, w, rm, rv);
            CHECK_MSG(y != NULL, "%s", mft_last_error_message());
            CHECK_EQ_I(mft_tape_size(), 10);
            mft_tensor *g = y ? mft_randn(4, mft_tensor_sizes(y), d, fmt, 8) : NULL;
            CHECK(y && mft_tensor_format(y) == fmt);
            CHECK_MSG(y && mft_backward(y, g) == MFT_OK, "%s", mft_last_error_message());
            mft_tape_end();
            CHECK_MSG(mft_autograd_conversions() == 0, "chain %s %s: %lld conversions",
                      fmt_name(fmt), dt ? "f64" : "f32", (long long)mft_autograd_conversions());
            mft_tensor *gx = mft_tensor_grad(x);
            CHECK(gx && mft_tensor_format(gx) == fmt && mft_tensor_dtype(gx) == d);
            CHECK(mft_tensor_grad(w) != NULL);
            grads[f][dt] = gx ? mft_tensor_retain(gx) : NULL;
            mft_tensor *list[] = {x, w, rm, rv, y, g};
            for (size_t i = 0; i < sizeof list / sizeof *list; i++) mft_tensor_release(list[i]);
        }
    }
    /* values do not depend on the format or (within F32 rounding) the dtype */
    CHECK(close_all(grads[0][1], grads[1][1], 1e-10));
    CHECK(close_all(grads[0][0], grads[0][1], 2e-3));
    CHECK(close_all(grads[1][0], grads[1][1], 2e-3));
    for (int f = 0; f < 2; f++)
        for (int dt = 0; dt < 2; dt++) mft_tensor_release(grads[f][dt]);
}

/* ------------------------------------------------------------------ (f) errors, scopes */
static void test_errors_and_scopes(void) {
    int64_t sz[4] = {2, 3, 2, 2};
    mft_tensor *x = leaf(4, sz, MFT_F64, MFT_CHANNELS_LAST, 150);
    mft_tape_begin();
    CHECK(mft_softmax(x, 7) == NULL);
    CHECK_ERR(MFT_ERR_DIM, "mft_softmax");
    CHECK(mft_group_norm(x, 2, NULL, NULL, 1e-5) == NULL);
    CHECK_ERR(MFT_ERR_SHAPE, "mft_group_norm");
    int64_t bad[4] = {9, 9, 0, 0}; /* reflect needs pad < size */
    CHECK(mft_pad(x, 4, bad, MFT_PAD_REFLECT, 0.0) == NULL);
    CHECK(mft_last_error() != MFT_OK);
    CHECK_ERR(mft_last_error(), "mft_pad");
    CHECK(mft_dropout(x, 1.5, true, 1) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "mft_dropout");
    mft_tensor *outs[2] = {0};
    int k = -1;
    CHECK(mft_split(x, 1, 1, 2, outs, &k) == MFT_ERR_INVALID && k == 0);
    mft_clear_error();
    CHECK(mft_layer_norm(NULL, 1, sz, NULL, NULL, 1e-5) == NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_layer_norm");
    const mft_tensor *two[2] = {x, NULL};
    CHECK(mft_cat(2, two, 1) == NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_cat");
    CHECK_EQ_I(mft_tape_size(), 0);
    mft_tape_end();

    /* a recorded step inside a scope: nothing to release by hand */
    for (int rep = 0; rep < 2; rep++) {
        CHECK(mft_scope_begin() == MFT_OK);
        mft_tape_begin();
        int64_t up[2] = {3, 3};
        mft_tensor *a = mft_interpolate(x, up, MFT_INTERP_NEAREST, false);
        mft_tensor *parts[3] = {0};
        int n = 0;
        mft_split(a, 1, 1, 3, parts, &n);
        const mft_tensor *st[3] = {parts[2], parts[1], parts[0]};
        mft_tensor *b = mft_cat(3, st, 1);
        mft_tensor *c = mft_instance_norm(b, NULL, NULL, 1e-5);
        mft_tensor *m = NULL, *r = NULL;
        mft_tensor *d = mft_batch_norm_ex(c, NULL, NULL, NULL, NULL, true, 0.1, 1e-5, &m, &r);
        CHECK(d && m && r && mft_tensor_requires_grad(d) && !mft_tensor_requires_grad(m));
        mft_tensor *e = mft_log_softmax(d, 1);
        mft_tensor *g = e ? mft_ones(4, mft_tensor_sizes(e), MFT_F64, MFT_CHANNELS_LAST) : NULL;
        CHECK_MSG(e && mft_backward(e, g) == MFT_OK, "%s", mft_last_error_message());
        mft_tape_end();
        CHECK(mft_scope_end() == MFT_OK);
        CHECK(mft_tensor_grad(x) != NULL);
        mft_tensor_zero_grad(x);
    }
    mft_tensor_release(x);
}

/* ------------------------------------------------------------------ (f) allocation failure */

/* One recorded forward through every op and its backward; MFT_OK or the
 * first error. Leaves nothing alive. */
static mft_status fa_workload(void) {
    int64_t sz[4] = {2, 4, 3, 3}, C = 4;
    mft_status st = MFT_OK;
    mft_tensor *x = mft_randn(4, sz, MFT_F64, MFT_CHANNELS_LAST, 1);
    mft_tensor *w = mft_ones(1, &C, MFT_F64, MFT_CONTIGUOUS);
    if (!x || !w || mft_tensor_set_requires_grad(x, true) != MFT_OK ||
        mft_tensor_set_requires_grad(w, true) != MFT_OK) {
        mft_tensor_release(x);
        mft_tensor_release(w);
        return MFT_ERR_NOMEM;
    }
    if (mft_tape_begin() != MFT_OK) {
        mft_tensor_release(x);
        mft_tensor_release(w);
        return MFT_ERR_NOMEM;
    }
    mft_scope_begin();
    int64_t up[2] = {4, 4}, pads[4] = {1, 0, 0, 1};
    mft_tensor *a = mft_interpolate(x, up, MFT_INTERP_BICUBIC, false);
    mft_tensor *b = mft_pad(a, 4, pads, MFT_PAD_REPLICATE, 0.0);
    mft_tensor *c = mft_batch_norm(b, NULL, NULL, w, w, true, 0.1, 1e-5);
    mft_tensor *d = mft_group_norm(c, 2, w, NULL, 1e-5);
    mft_tensor *e = d ? mft_layer_norm(d, 1, mft_tensor_sizes(d) + 3, NULL, NULL, 1e-5) : NULL;
    mft_tensor *e2 = mft_instance_norm(e, NULL, w, 1e-5);
    mft_tensor *f = mft_dropout2d(e2, 0.5, true, 9);
    mft_tensor *parts[4] = {0};
    int k = 0;
    if (f) mft_split(f, 2, 1, 4, parts, &k);
    const mft_tensor *pc[2] = {parts[1], k == 2 ? parts[0] : NULL};
    mft_tensor *g = k == 2 ? mft_cat(2, pc, 1) : NULL;
    const mft_tensor *ps[2] = {g, g};
    mft_tensor *h = g ? mft_stack(2, ps, 0) : NULL;
    mft_tensor *i = mft_softmax(h, 1);
    mft_tensor *j = mft_log_softmax(i, -1);
    mft_tensor *go = j ? mft_ones(mft_tensor_ndim(j), mft_tensor_sizes(j), MFT_F64,
                                  MFT_CONTIGUOUS)
                       : NULL;
    if (!go) st = mft_last_error() != MFT_OK ? mft_last_error() : MFT_ERR_INTERNAL;
    if (st == MFT_OK) st = mft_backward(j, go);
    if (mft_scope_end() != MFT_OK && st == MFT_OK) st = MFT_ERR_INTERNAL;
    mft_tape_end();
    mft_tensor_release(x);
    mft_tensor_release(w);
    return st;
}

static void test_alloc_failure(void) {
    mft_alloc_cache_set_limit(0);
    fa_install();
    mft_clear_error();
    mft_status st = fa_workload();
    CHECK_MSG(st == MFT_OK, "clean run: %s", mft_last_error_message());
    long long n = g_fa.calls;
    CHECK(n > 50);
    CHECK_EQ_I(g_fa.live, 0);
    long long failed = 0;
    for (long long k = 1; k <= n && st == MFT_OK; k++) {
        g_fa.live = 0;
        g_fa.sticky = true; /* every allocation from the k-th on fails */
        fa_arm(k);
        mft_clear_error();
        mft_status s = fa_workload();
        if (s != MFT_OK) failed++;
        CHECK_MSG(s == MFT_OK || s == MFT_ERR_NOMEM, "k = %lld: %s (%s)", k, mft_status_str(s),
                  mft_last_error_message());
        CHECK_MSG(g_fa.live == 0, "k = %lld: %lld blocks leaked", k, g_fa.live);
        CHECK_MSG(mft_live_tensors() == 0 && mft_live_storages() == 0,
                  "k = %lld: %lld tensors, %lld storages alive", k,
                  (long long)mft_live_tensors(), (long long)mft_live_storages());
        CHECK(mft_tape_size() == 0);
        if (mft_live_tensors() != 0 || g_fa.live != 0) break; /* one report is enough */
    }
    CHECK(failed > n / 2);
    mft_set_allocator(NULL);
}

int main(void) {
    RUN(test_batch_norm);
    RUN(test_group_instance_layer_norm);
    RUN(test_interpolate);
    RUN(test_softmax);
    RUN(test_pad);
    RUN(test_cat_stack_split);
    RUN(test_dropout);
    RUN(test_running_stats);
    RUN(test_chains);
    RUN(test_errors_and_scopes);
    RUN(test_alloc_failure);
    TEST_MAIN_END();
}
