/* tests/nn/test_nn_compose.c — the containers of mft/nn.h and the tree they
 * make (nn/compose.c), every expectation written here from the documented
 * behaviour, not read off a run:
 *   - composition: a residual's forward equals body(x) + shortcut(x) (then
 *     relu) chained by hand with the ops on the module's own parameters,
 *     with a projection and with an identity shortcut, NCHW and NHWC; a
 *     custom module equals the user's function computed by hand; adaptive
 *     and global average pools equal mft_adaptive_avg_pool2d;
 *   - the tree: parameter and buffer names against hand-written dotted
 *     lists (numbered and named sequentials), the tensors' own names following a subtree into each new
 *     container, children by index and by dotted path, describe line by
 *     line, to_format / to_dtype / set_training reaching every module;
 *   - the module path: seen from inside custom forwards while running, and
 *     back to depth 0 after a failing forward;
 *   - errors: one "layer <path> <kind>" prefix on a failure deep inside a
 *     residual in a sequential (and on a residual's own add, and inside a
 *     custom forward's child), no prefix for the module the user runs,
 *     batch-norm statistics untouched by a failed forward; every
 *     constructor's argument error and allocation failure returning NULL
 *     with the given children and ctx freed, and nothing leaked. */
#include "fail_alloc.h"
#include "harness.h"

static const int64_t K1[2] = {1, 1}, K3[2] = {3, 3}, P1[2] = {1, 1};

static mft_tensor *randx(int nd, const int64_t *sizes, mft_format fmt, uint64_t seed) {
    return mft_randn(nd, sizes, MFT_F32, fmt, seed);
}

/* Same sizes and the same values within tol (any layouts). */
static bool same_values(const mft_tensor *a, const mft_tensor *b, double tol) {
    if (!a || !b || mft_tensor_ndim(a) != mft_tensor_ndim(b)) return false;
    for (int d = 0; d < mft_tensor_ndim(a); d++)
        if (mft_tensor_sizes(a)[d] != mft_tensor_sizes(b)[d]) return false;
    mft_tensor *da = mft_to_dtype(a, MFT_F64), *db = mft_to_dtype(b, MFT_F64);
    mft_tensor *ca = mft_contiguous(da, MFT_CONTIGUOUS), *cb = mft_contiguous(db, MFT_CONTIGUOUS);
    const double *x = mft_tensor_data(ca), *y = mft_tensor_data(cb);
    bool ok = x && y;
    for (int64_t i = 0; ok && i < mft_tensor_numel(a); i++) ok = fabs(x[i] - y[i]) <= tol;
    mft_tensor *list[] = {da, db, ca, cb};
    for (int i = 0; i < 4; i++) mft_tensor_release(list[i]);
    return ok;
}

static bool starts_with(const char *s, const char *prefix) {
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static int count_of(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

/* conv (no bias) -> batch_norm, the pair of a ResNet. */
static mft_module *conv_bn(int64_t in, int64_t out, const int64_t *k, const int64_t *stride,
                           const int64_t *pad, uint64_t seed) {
    mft_module *l[2] = {mft_nn_conv2d(in, out, k, stride, pad, NULL, 1, false, seed),
                        mft_nn_batch_norm2d(out, 1e-5, 0.1)};
    return mft_nn_sequential(2, l);
}

/* torchvision's BasicBlock: body conv3x3(stride) BN relu conv3x3 BN; a
 * 1x1 conv + BN projection when the shape changes; relu after the add. */
static mft_module *basic_block(int64_t in, int64_t out, int64_t stride, uint64_t seed) {
    const int64_t st[2] = {stride, stride};
    mft_module *b[5] = {mft_nn_conv2d(in, out, K3, st, P1, NULL, 1, false, seed),
                        mft_nn_batch_norm2d(out, 1e-5, 0.1), mft_nn_relu(),
                        mft_nn_conv2d(out, out, K3, NULL, P1, NULL, 1, false, seed + 1),
                        mft_nn_batch_norm2d(out, 1e-5, 0.1)};
    mft_module *body = mft_nn_sequential(5, b);
    mft_module *sc = NULL;
    if (stride != 1 || in != out) {
        /* a NULL shortcut means the identity: a failed one must not pass as it */
        sc = conv_bn(in, out, K1, st, NULL, seed + 2);
        if (!sc) {
            mft_module_free(body);
            return NULL;
        }
    }
    return mft_nn_residual(body, sc, true);
}

/* A clone of t, so a hand computation's batch norm updates its own copy of
 * the running statistics. */
static mft_tensor *copy_of(const mft_tensor *t) { return mft_clone(t, MFT_PRESERVE); }

/* conv -> training batch norm by hand on the parameters p[0..2] (weight,
 * bn weight, bn bias) and copies of the running statistics rb[0..1]. */
static mft_tensor *conv_bn_by_hand(const mft_tensor *x, mft_tensor *const *p,
                                   mft_tensor *const *rb, const int64_t *stride,
                                   const int64_t *pad) {
    mft_tensor *rm = copy_of(rb[0]), *rv = copy_of(rb[1]);
    mft_tensor *c = mft_conv2d(x, p[0], NULL, stride, pad, NULL, 1);
    mft_tensor *y = mft_batch_norm(c, rm, rv, p[1], p[2], true, 0.1, 1e-5);
    mft_tensor_release(c);
    mft_tensor_release(rm);
    mft_tensor_release(rv);
    return y;
}

/* ------------------------------------------------------------------ composition */
static void check_block_by_hand(int64_t in, int64_t out, int64_t stride, mft_format fmt) {
    mft_module *blk = basic_block(in, out, stride, 40);
    CHECK_MSG(blk != NULL, "basic_block: %s", mft_last_error_message());
    if (!blk) return;
    const bool proj = stride != 1 || in != out;
    mft_tensor *p[9], *b[9];
    CHECK_EQ_I(mft_module_parameters(blk, p, NULL, 9), proj ? 9 : 6);
    CHECK_EQ_I(mft_module_buffers(blk, b, NULL, 9), proj ? 9 : 6);
    CHECK(mft_module_to_format(blk, fmt) == MFT_OK);
    const int64_t xs[4] = {2, in, 8, 8}, st[2] = {stride, stride};
    mft_tensor *x = randx(4, xs, fmt, 41);
    mft_tensor *rb[6] = {b[0], b[1], b[3], b[4], proj ? b[6] : NULL, proj ? b[7] : NULL};
    /* by hand: body and shortcut, add, relu */
    mft_tensor *h1 = conv_bn_by_hand(x, (mft_tensor *[]){p[0], p[1], p[2]}, rb, st, P1);
    mft_tensor *r1 = mft_relu(h1);
    mft_tensor *h2 = conv_bn_by_hand(r1, (mft_tensor *[]){p[3], p[4], p[5]}, rb + 2, NULL, P1);
    mft_tensor *s = proj ? conv_bn_by_hand(x, (mft_tensor *[]){p[6], p[7], p[8]}, rb + 4, st, NULL)
                         : mft_tensor_retain(x);
    mft_tensor *sum = mft_add(h2, s);
    mft_tensor *want = mft_relu(sum);
    mft_tensor *y = mft_module_forward(blk, x);
    CHECK_MSG(y && want && same_values(y, want, 0.0), "residual %lld->%lld stride %lld %s",
              (long long)in, (long long)out, (long long)stride, mft_format_name(fmt));
    CHECK(y && mft_tensor_format(y) == fmt);
    CHECK(y && mft_tensor_sizes(y)[1] == out && mft_tensor_sizes(y)[2] == 8 / stride);
    /* the relu is there: no negative value, and some were negative before */
    mft_tensor *mn = mft_amin(y, 0, NULL, false), *smin = mft_amin(sum, 0, NULL, false);
    CHECK(mn && mft_tensor_get(mn, NULL) == 0.0);
    CHECK(smin && mft_tensor_get(smin, NULL) < 0.0);
    mft_tensor *list[] = {x, h1, r1, h2, s, sum, want, y, mn, smin};
    for (size_t i = 0; i < sizeof list / sizeof *list; i++) mft_tensor_release(list[i]);
    mft_module_free(blk);
}

static void test_residual_equals_ops(void) {
    check_block_by_hand(4, 8, 2, MFT_CONTIGUOUS);    /* projection shortcut */
    check_block_by_hand(4, 8, 2, MFT_CHANNELS_LAST);
    check_block_by_hand(6, 6, 1, MFT_CONTIGUOUS);    /* identity shortcut */
    check_block_by_hand(6, 6, 1, MFT_CHANNELS_LAST);

    /* relu false: y = body(x) + x exactly, negative values kept */
    mft_module *body = mft_nn_conv2d(3, 3, K3, NULL, P1, NULL, 1, true, 5);
    mft_module *r = mft_nn_residual(body, NULL, false);
    CHECK(r != NULL && mft_module_num_children(r) == 1);
    const int64_t xs[4] = {1, 3, 5, 5};
    mft_tensor *x = randx(4, xs, MFT_CONTIGUOUS, 6);
    mft_tensor *p[2];
    mft_module_parameters(r, p, NULL, 2);
    mft_tensor *c = mft_conv2d(x, p[0], p[1], NULL, P1, NULL, 1);
    mft_tensor *want = mft_add(c, x);
    mft_tensor *y = mft_module_forward(r, x);
    CHECK(same_values(y, want, 0.0));
    mft_tensor *mn = mft_amin(y, 0, NULL, false);
    CHECK(mn && mft_tensor_get(mn, NULL) < 0.0);
    mft_tensor *list[] = {x, c, want, y, mn};
    for (size_t i = 0; i < sizeof list / sizeof *list; i++) mft_tensor_release(list[i]);
    mft_module_free(r);
}

static void test_pools(void) {
    const int64_t xs[4] = {2, 3, 7, 5};
    for (int f = 0; f < 2; f++) {
        const mft_format fmt = f ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
        mft_tensor *x = randx(4, xs, fmt, 11 + (uint64_t)f);
        mft_module *g = mft_nn_global_avg_pool2d(), *a = mft_nn_adaptive_avg_pool2d(3, 2);
        mft_tensor *yg = mft_module_forward(g, x), *ya = mft_module_forward(a, x);
        mft_tensor *wa = mft_adaptive_avg_pool2d(x, (const int64_t[]){3, 2});
        /* the global pool is the mean over H and W, computed here by sum */
        mft_tensor *sum = mft_sum(x, 2, (const int[]){2, 3}, true);
        mft_tensor *wg = mft_mul_scalar(sum, 1.0 / 35.0);
        CHECK(yg && mft_tensor_ndim(yg) == 4 && mft_tensor_sizes(yg)[2] == 1 &&
              mft_tensor_sizes(yg)[3] == 1);
        CHECK(same_values(yg, wg, 1e-6));
        CHECK(same_values(ya, wa, 0.0));
        CHECK(ya && mft_tensor_format(ya) == fmt);
        CHECK(strcmp(mft_module_label(g), "AdaptiveAvgPool2d(1x1)") == 0);
        CHECK(strcmp(mft_module_label(a), "AdaptiveAvgPool2d(3x2)") == 0);
        CHECK_EQ_I(mft_module_num_parameters(g), 0);
        mft_tensor *list[] = {x, yg, ya, wa, sum, wg};
        for (size_t i = 0; i < sizeof list / sizeof *list; i++) mft_tensor_release(list[i]);
        mft_module_free(g);
        mft_module_free(a);
    }
    CHECK(mft_nn_adaptive_avg_pool2d(0, 2) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "mft_nn_adaptive_avg_pool2d: invalid output size 0x2");
    CHECK(mft_nn_adaptive_avg_pool2d(2, -1) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "2x-1");
}

/* ------------------------------------------------------------------ custom */
typedef struct gate_ctx {
    double scale;
    int freed;               /* ctx_free calls */
    char path[8][64];        /* mft_module_path() seen by the probes, in order */
    char kind[8][64];
    int seen;
    bool training_seen;
} gate_ctx;

static void gate_free(void *ctx) { ((gate_ctx *)ctx)->freed++; }

/* y = a(x) * scale + b(x) * sigmoid(a(x)): a gated block over children "a"
 * and "b", in a scope (nothing released here). */
static mft_tensor *gate_forward(mft_module *self, const mft_tensor *x, void *ctx) {
    gate_ctx *c = ctx;
    c->training_seen = mft_module_training(self);
    mft_tensor *a = mft_module_forward(mft_module_child_by_name(self, "a"), x);
    mft_tensor *b = mft_module_forward(mft_module_child(self, 1), x);
    mft_tensor *g = mft_sigmoid(a);
    return mft_add(mft_mul_scalar(a, c->scale), mft_mul(b, g));
}

/* Records the module path and kind while it runs; returns x. */
static mft_tensor *probe_forward(mft_module *self, const mft_tensor *x, void *ctx) {
    (void)self;
    gate_ctx *c = ctx;
    if (c->seen < 8) {
        snprintf(c->path[c->seen], 64, "%s", mft_module_path());
        snprintf(c->kind[c->seen], 64, "%s", mft_module_kind());
        c->seen++;
    }
    return (mft_tensor *)x;
}

static void test_custom_equals_function(void) {
    gate_ctx c = {.scale = 0.5};
    mft_module *kids[2] = {mft_nn_linear(6, 4, true, 1), mft_nn_linear(6, 4, true, 2)};
    const char *names[2] = {"a", "b"};
    mft_module *m = mft_nn_custom("Gate", 2, kids, names, gate_forward, &c, gate_free);
    CHECK_MSG(m != NULL, "%s", mft_last_error_message());
    if (!m) return;
    CHECK(strcmp(mft_module_label(m), "Gate") == 0 && mft_module_num_children(m) == 2);
    CHECK(mft_module_child(m, 0) == kids[0] && mft_module_child_by_name(m, "b") == kids[1]);
    CHECK(strcmp(mft_module_name(kids[1]), "b") == 0 && strcmp(mft_module_name(m), "") == 0);
    const int64_t xs[2] = {5, 6};
    mft_tensor *x = randx(2, xs, MFT_CONTIGUOUS, 3);
    mft_tensor *p[4];
    CHECK_EQ_I(mft_module_parameters(m, p, NULL, 4), 4);
    /* by hand, with the ops */
    mft_tensor *a = mft_linear(x, p[0], p[1]), *b = mft_linear(x, p[2], p[3]);
    mft_tensor *g = mft_sigmoid(a), *as = mft_mul_scalar(a, 0.5), *bg = mft_mul(b, g);
    mft_tensor *want = mft_add(as, bg);
    const int64_t live = mft_live_tensors();
    mft_tensor *y = mft_module_forward(m, x);
    CHECK(same_values(y, want, 0.0));
    /* the forward's own tensors went with its scope: only y is new */
    CHECK_EQ_I(mft_live_tensors(), live + 1);
    CHECK(c.training_seen);
    mft_module_set_training(m, false);
    mft_tensor *y2 = mft_module_forward(m, x);
    CHECK(!c.training_seen && same_values(y2, want, 0.0));
    /* inside the user's scope the result belongs to it */
    mft_scope_begin();
    mft_tensor *y3 = mft_module_forward(m, x);
    CHECK(y3 && mft_tensor_hash(y3) == mft_tensor_hash(want)); /* makes no tensor */
    mft_scope_end();
    CHECK_EQ_I(mft_live_tensors(), live + 2);
    /* under the tape: gradients reach the children's parameters */
    mft_module_set_training(m, true);
    mft_tape_begin();
    mft_tensor *yt = mft_module_forward(m, x);
    mft_tensor *loss = mft_sum(yt, 0, NULL, false);
    CHECK(loss && mft_backward(loss, NULL) == MFT_OK);
    mft_tape_end();
    for (int i = 0; i < 4; i++) CHECK(mft_tensor_grad(p[i]) != NULL);
    for (int i = 0; i < 4; i++) mft_tensor_zero_grad(p[i]);
    mft_tensor *list[] = {x, a, b, g, as, bg, want, y, y2, yt, loss};
    for (size_t i = 0; i < sizeof list / sizeof *list; i++) mft_tensor_release(list[i]);
    CHECK_EQ_I(c.freed, 0);
    mft_module_free(m);
    CHECK_EQ_I(c.freed, 1);

    /* a parameter-free custom module, no ctx_free */
    mft_module *id = mft_nn_custom("Identity", 0, NULL, NULL, probe_forward, &c, NULL);
    x = randx(2, xs, MFT_CONTIGUOUS, 4);
    y = mft_module_forward(id, x);
    CHECK(y == x && mft_module_num_parameters(id) == 0);
    mft_tensor_release(y);
    mft_tensor_release(x);
    mft_module_free(id);
    CHECK_EQ_I(c.freed, 1);
}

static mft_tensor *null_forward(mft_module *self, const mft_tensor *x, void *ctx) {
    (void)self, (void)x, (void)ctx;
    return NULL;
}

static mft_tensor *self_forward(mft_module *self, const mft_tensor *x, void *ctx) {
    (void)ctx;
    return mft_module_forward(self, x);
}

/* The module path seen from inside: probes as children at two depths. */
static void test_module_path_while_running(void) {
    gate_ctx c = {0};
    mft_module *probe1 = mft_nn_custom("Probe", 0, NULL, NULL, probe_forward, &c, NULL);
    mft_module *probe2 = mft_nn_custom("Probe", 0, NULL, NULL, probe_forward, &c, NULL);
    mft_module *res = mft_nn_residual(probe2, NULL, false);
    mft_module *top[3] = {probe1, res, mft_nn_relu()};
    mft_module *m = mft_nn_sequential(3, top);
    CHECK(m != NULL);
    const int64_t xs[2] = {2, 3};
    mft_tensor *x = randx(2, xs, MFT_CONTIGUOUS, 9);
    CHECK_EQ_I(mft_module_depth(), 0);
    mft_tensor *y = mft_module_forward(m, x);
    CHECK(y != NULL);
    CHECK_EQ_I(c.seen, 2);
    CHECK(strcmp(c.path[0], "0") == 0 && strcmp(c.kind[0], "Probe") == 0);
    CHECK_MSG(strcmp(c.path[1], "1.body") == 0 && strcmp(c.kind[1], "Probe") == 0, "%s %s",
              c.path[1], c.kind[1]);
    CHECK_EQ_I(mft_module_depth(), 0);
    /* inside an outer path of the user's own, the model's names nest under it */
    c.seen = 0;
    CHECK(mft_module_path_push("model", "Net") == MFT_OK);
    mft_tensor *y2 = mft_module_forward(m, x);
    CHECK(y2 != NULL && c.seen == 2 && strcmp(c.path[1], "model.1.body") == 0);
    mft_module_path_pop();
    CHECK_EQ_I(mft_module_depth(), 0);
    mft_tensor_release(y);
    mft_tensor_release(y2);
    mft_module_free(m);
    mft_tensor_release(x);
}

/* Wrap2: forward = its child "inner" run through mft_module_forward. */
static mft_tensor *wrap_forward(mft_module *self, const mft_tensor *x, void *ctx) {
    gate_ctx *c = ctx;
    if (c->seen < 8) {
        snprintf(c->path[c->seen], 64, "%s", mft_module_path());
        snprintf(c->kind[c->seen], 64, "%s", mft_module_kind());
        c->seen++;
    }
    return mft_module_forward(mft_module_child_by_name(self, "inner"), x);
}

static void test_custom_calls_child(void) {
    gate_ctx c = {0};
    mft_module *probe = mft_nn_custom("Probe", 0, NULL, NULL, probe_forward, &c, NULL);
    mft_module *wrap = mft_nn_custom("Wrap", 1, &probe, (const char *[]){"inner"}, wrap_forward,
                                     &c, NULL);
    mft_module *top[2] = {mft_nn_relu(), wrap};
    mft_module *m = mft_nn_sequential(2, top);
    const int64_t xs[2] = {2, 3};
    mft_tensor *x = randx(2, xs, MFT_CONTIGUOUS, 9);
    mft_tensor *y = mft_module_forward(m, x);
    mft_tensor *want = mft_relu(x);
    CHECK(same_values(y, want, 0.0));
    CHECK_EQ_I(c.seen, 2);
    CHECK(strcmp(c.path[0], "1") == 0 && strcmp(c.kind[0], "Wrap") == 0);
    CHECK_MSG(strcmp(c.path[1], "1.inner") == 0 && strcmp(c.kind[1], "Probe") == 0, "%s %s",
              c.path[1], c.kind[1]);
    CHECK_EQ_I(mft_module_depth(), 0);
    mft_tensor_release(y);
    mft_tensor_release(want);
    mft_module_free(m);

    /* NULL without an error, and a forward calling itself */
    mft_module *bad = mft_nn_custom("Silent", 0, NULL, NULL, null_forward, NULL, NULL);
    mft_clear_error();
    CHECK(mft_module_forward(bad, x) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "mft_module_forward: the forward of Silent returned NULL");
    mft_module *rec = mft_nn_custom("Loop", 0, NULL, NULL, self_forward, NULL, NULL);
    CHECK(mft_module_forward(rec, x) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "Loop is already running");
    CHECK_EQ_I(mft_module_depth(), 0);
    mft_module_free(bad);
    mft_module_free(rec);
    mft_tensor_release(x);
}

/* ------------------------------------------------------------------ the tree */
static mft_tensor *head_forward(mft_module *self, const mft_tensor *x, void *ctx) {
    (void)ctx;
    mft_tensor *h = mft_module_forward(mft_module_child_by_name(self, "pool"), x);
    h = mft_module_forward(mft_module_child_by_name(self, "flat"), h);
    return mft_module_forward(mft_module_child_by_name(self, "fc"), h);
}

/* stem conv 1->8 + BN + relu, a BasicBlock 8->16 stride 2, a custom head
 * (pool, flatten, fc 16->3). */
static mft_module *tiny_tree(void) {
    mft_module *head_kids[3] = {mft_nn_global_avg_pool2d(), mft_nn_flatten(1, 3),
                                mft_nn_linear(16, 3, true, 9)};
    mft_module *head = mft_nn_custom("Head", 3, head_kids, (const char *[]){"pool", "flat", "fc"},
                                     head_forward, NULL, NULL);
    mft_module *l[5] = {mft_nn_conv2d(1, 8, K3, NULL, P1, NULL, 1, false, 1),
                        mft_nn_batch_norm2d(8, 1e-5, 0.1), mft_nn_relu(), basic_block(8, 16, 2, 2),
                        head};
    return mft_nn_sequential(5, l);
}

static void test_names(void) {
    mft_module *m = tiny_tree();
    CHECK_MSG(m != NULL, "%s", mft_last_error_message());
    if (!m) return;
    /* as PyTorch's state_dict of the same nn.Sequential, with a block whose
     * attributes are body and shortcut and a head with pool, flat, fc */
    static const char *const want_p[14] = {
        "0.weight",          "1.weight",          "1.bias",
        "3.body.0.weight",   "3.body.1.weight",   "3.body.1.bias",
        "3.body.3.weight",   "3.body.4.weight",   "3.body.4.bias",
        "3.shortcut.0.weight", "3.shortcut.1.weight", "3.shortcut.1.bias",
        "4.fc.weight",       "4.fc.bias"};
    static const char *const bn_at[4] = {"1.", "3.body.1.", "3.body.4.", "3.shortcut.1."};
    mft_tensor *p[20], *b[20];
    const char *pn[20], *bn[20];
    CHECK_EQ_I(mft_module_parameters(m, p, pn, 20), 14);
    for (int i = 0; i < 14; i++) {
        CHECK_MSG(strcmp(pn[i], want_p[i]) == 0, "param %d: %s, expected %s", i, pn[i], want_p[i]);
        CHECK_MSG(mft_tensor_name(p[i]) && strcmp(mft_tensor_name(p[i]), want_p[i]) == 0,
                  "tensor name of %s: %s", want_p[i], mft_tensor_name(p[i]));
    }
    CHECK_EQ_I(mft_module_buffers(m, b, bn, 20), 12);
    static const char *const bufs[3] = {"running_mean", "running_var", "num_batches_tracked"};
    for (int i = 0; i < 12; i++) {
        char want[64];
        snprintf(want, sizeof want, "%s%s", bn_at[i / 3], bufs[i % 3]);
        CHECK_MSG(strcmp(bn[i], want) == 0, "buffer %d: %s, expected %s", i, bn[i], want);
        CHECK(mft_tensor_name(b[i]) && strcmp(mft_tensor_name(b[i]), want) == 0);
    }
    /* by hand: 8*9 + 16 + (16*8*9 + 32 + 16*16*9 + 32) + (16*8 + 32) + (16*3 + 3) */
    CHECK_EQ_I(mft_module_num_parameters(m), 72 + 16 + 1152 + 32 + 2304 + 32 + 128 + 32 + 51);

    /* children by index and by dotted path */
    CHECK_EQ_I(mft_module_num_children(m), 5);
    mft_module *bnm = mft_module_child_by_name(m, "3.body.1");
    CHECK(bnm && strcmp(mft_module_label(bnm), "BatchNorm2d(16)") == 0 &&
          strcmp(mft_module_name(bnm), "1") == 0);
    mft_module *blk = mft_module_child(m, 3);
    CHECK(blk && strcmp(mft_module_label(blk), "Residual") == 0);
    CHECK(mft_module_child_by_name(blk, "shortcut.0") ==
          mft_module_child_by_name(m, "3.shortcut.0"));
    CHECK(strcmp(mft_module_label(mft_module_child_by_name(m, "3.shortcut.0")),
                 "Conv2d(8, 16, 1x1, stride 2x2)") == 0);
    CHECK(strcmp(mft_module_label(mft_module_child_by_name(m, "4.fc")), "Linear(16, 3)") == 0);
    CHECK(mft_module_child_by_name(m, "3.nope") == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "no child 'nope' in Residual (path '3.nope')");
    CHECK(mft_module_child_by_name(m, "") == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "empty path");
    CHECK(mft_module_child_by_name(m, "3.") == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "ends with '.'");
    CHECK(mft_module_child_by_name(m, NULL) == NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_module_child_by_name");
    CHECK(mft_module_child(m, 5) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "index 5 out of range for Sequential with 5 children");
    CHECK(mft_module_child(NULL, 0) == NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_module_child");
    CHECK(mft_module_num_children(bnm) == 0 && mft_module_num_children(NULL) == 0);
    mft_module_free(m);

    /* a tensor's name follows its subtree into each container */
    mft_module *conv = mft_nn_conv2d(2, 2, K3, NULL, P1, NULL, 1, true, 3);
    mft_tensor *w;
    mft_module_parameters(conv, &w, NULL, 1);
    CHECK(strcmp(mft_tensor_name(w), "weight") == 0);
    mft_module *seq = mft_nn_sequential(2, (mft_module *[]){mft_nn_relu(), conv});
    CHECK(strcmp(mft_tensor_name(w), "1.weight") == 0);
    mft_module *res = mft_nn_residual(seq, NULL, true);
    CHECK(strcmp(mft_tensor_name(w), "body.1.weight") == 0);
    mft_module *outer = mft_nn_sequential(2, (mft_module *[]){mft_nn_relu(), res});
    CHECK(strcmp(mft_tensor_name(w), "1.body.1.weight") == 0);
    const char *nm[2];
    CHECK_EQ_I(mft_module_parameters(outer, NULL, nm, 2), 2);
    CHECK(strcmp(nm[1], "1.body.1.bias") == 0);
    mft_module_free(outer);
}

static void test_describe(void) {
    mft_module *m = tiny_tree();
    if (!m) return;
    size_t need = mft_module_describe(m, NULL, 0);
    char *text = malloc(need + 1);
    CHECK(text && mft_module_describe(m, text, need + 1) == need && strlen(text) == need);
    /* one line per module, children indented under their parent with their
     * names; the counts summed by hand (see test_names) */
    static const char *const want[] = {
        "Sequential(5 layers, 3819 parameters)",
        "  0: Conv2d(1, 8, kernel=3x3, stride=1x1, padding=1x1, dilation=1x1, groups=1, "
        "bias=false, weight CONTIGUOUS)",
        "  1: BatchNorm2d(8, eps=1e-05, momentum=0.1)",
        "  2: ReLU()",
        "  3: Residual(y = relu(body(x) + shortcut(x)), 3680 parameters)",
        "    body: Sequential(5 layers, 3520 parameters)",
        "      0: Conv2d(8, 16, kernel=3x3, stride=2x2, padding=1x1, dilation=1x1, groups=1, "
        "bias=false, weight CONTIGUOUS)",
        "      1: BatchNorm2d(16, eps=1e-05, momentum=0.1)",
        "      2: ReLU()",
        "      3: Conv2d(16, 16, kernel=3x3, stride=1x1, padding=1x1, dilation=1x1, groups=1, "
        "bias=false, weight CONTIGUOUS)",
        "      4: BatchNorm2d(16, eps=1e-05, momentum=0.1)",
        "    shortcut: Sequential(2 layers, 160 parameters)",
        "      0: Conv2d(8, 16, kernel=1x1, stride=2x2, padding=0x0, dilation=1x1, groups=1, "
        "bias=false, weight CONTIGUOUS)",
        "      1: BatchNorm2d(16, eps=1e-05, momentum=0.1)",
        "  4: Head(custom, 3 children, 51 parameters)",
        "    pool: AdaptiveAvgPool2d(output=1x1)",
        "    flat: Flatten(1, 3)",
        "    fc: Linear(16, 3, bias=true)",
    };
    const int nwant = (int)(sizeof want / sizeof *want);
    const char *line = text;
    for (int i = 0; i < nwant && line; i++) {
        const char *e = strchr(line, '\n');
        size_t n = e ? (size_t)(e - line) : strlen(line);
        CHECK_MSG(n == strlen(want[i]) && strncmp(line, want[i], n) == 0,
                  "line %d: '%.*s', expected '%s'", i, (int)n, line, want[i]);
        line = e ? e + 1 : NULL;
    }
    CHECK_MSG(line && *line == '\0', "extra text:\n%s", line ? line : "(none)");
    /* a child described alone is the root of its text: no name, no indent */
    char buf[256];
    mft_module_describe(mft_module_child_by_name(m, "3.shortcut"), buf, sizeof buf);
    CHECK(starts_with(buf, "Sequential(2 layers, 160 parameters)\n  0: Conv2d(8, 16"));
    free(text);
    mft_module_free(m);
}

static void test_to_format_and_modes(void) {
    mft_module *m = tiny_tree();
    if (!m) return;
    mft_tensor *p[20], *b[20];
    const char *pn[20];
    const int np = mft_module_parameters(m, p, pn, 20), nb = mft_module_buffers(m, b, NULL, 20);
    uint64_t h[20];
    for (int i = 0; i < np; i++) h[i] = mft_tensor_hash(p[i]);
    CHECK(mft_module_to_format(m, MFT_CHANNELS_LAST) == MFT_OK);
    int convs = 0;
    for (int i = 0; i < np; i++) {
        /* the same objects, the same values; every conv weight (4-D) is
         * channels_last, every other parameter as it was */
        CHECK(mft_tensor_hash(p[i]) == h[i]);
        if (mft_tensor_ndim(p[i]) == 4) {
            convs++;
            CHECK_MSG(mft_tensor_is_contiguous(p[i], MFT_CHANNELS_LAST) &&
                          mft_tensor_format(p[i]) == MFT_CHANNELS_LAST,
                      "%s not channels_last", pn[i]);
        } else {
            CHECK(mft_tensor_is_contiguous(p[i], MFT_CONTIGUOUS));
        }
    }
    CHECK_EQ_I(convs, 4); /* stem, two in the body, the shortcut's */
    const int64_t xs[4] = {2, 1, 8, 8};
    mft_tensor *x = randx(4, xs, MFT_CHANNELS_LAST, 5);
    mft_tensor *y = mft_module_forward(m, x);
    CHECK(y && mft_tensor_ndim(y) == 2 && mft_tensor_sizes(y)[1] == 3);
    CHECK(mft_module_to_format(m, MFT_CONTIGUOUS) == MFT_OK);
    for (int i = 0; i < np; i++) CHECK(mft_tensor_is_contiguous(p[i], MFT_CONTIGUOUS));

    /* eval mode reaches every module: the batch norms' counters stay */
    mft_module_set_training(m, false);
    const char *paths[] = {"1", "3", "3.body", "3.body.1", "3.shortcut.1", "4", "4.fc"};
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++)
        CHECK_MSG(!mft_module_training(mft_module_child_by_name(m, paths[i])), "%s", paths[i]);
    double nbt[4];
    for (int i = 0; i < 4; i++) nbt[i] = mft_tensor_get(b[3 * i + 2], (int64_t[]){0});
    mft_tensor *ye = mft_module_forward(m, x);
    CHECK(ye != NULL);
    for (int i = 0; i < 4; i++) CHECK(mft_tensor_get(b[3 * i + 2], (int64_t[]){0}) == nbt[i]);
    mft_module_set_training(m, true);
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++)
        CHECK(mft_module_training(mft_module_child_by_name(m, paths[i])));
    mft_tensor *yt = mft_module_forward(m, x);
    for (int i = 0; i < 4; i++) CHECK(mft_tensor_get(b[3 * i + 2], (int64_t[]){0}) == nbt[i] + 1);

    /* to_dtype: every parameter and floating buffer, in place */
    CHECK(mft_module_to_dtype(m, MFT_F64) == MFT_OK);
    for (int i = 0; i < np; i++) CHECK(mft_tensor_dtype(p[i]) == MFT_F64);
    for (int i = 0; i < nb; i++)
        CHECK(mft_tensor_dtype(b[i]) == (i % 3 == 2 ? MFT_I64 : MFT_F64));
    mft_tensor *x64 = mft_to_dtype(x, MFT_F64);
    mft_tensor *y64 = mft_module_forward(m, x64);
    CHECK(y64 && mft_tensor_dtype(y64) == MFT_F64);
    CHECK(mft_module_to_dtype(m, MFT_I32) == MFT_ERR_DTYPE);
    CHECK_ERR(MFT_ERR_DTYPE, "mft_module_to_dtype: dtype must be f32 or f64, got i32");
    CHECK(mft_module_to_dtype(m, MFT_F32) == MFT_OK);
    for (int i = 0; i < np; i++) CHECK(mft_tensor_dtype(p[i]) == MFT_F32);
    mft_tensor *list[] = {x, y, ye, yt, x64, y64};
    for (size_t i = 0; i < sizeof list / sizeof *list; i++) mft_tensor_release(list[i]);
    mft_module_free(m);
}

/* ------------------------------------------------------------------ errors */
/* A shape mismatch deep inside: seq[conv 3->8, residual(body seq[conv 8->8,
 * batch_norm(16), relu])]: the batch norm of channels 16 gets 8. */
static void test_error_prefix(void) {
    mft_module *body_l[3] = {mft_nn_conv2d(8, 8, K3, NULL, P1, NULL, 1, true, 2),
                             mft_nn_batch_norm2d(16, 1e-5, 0.1), mft_nn_relu()};
    mft_module *top[3] = {mft_nn_conv2d(3, 8, K3, NULL, P1, NULL, 1, true, 1),
                          mft_nn_batch_norm2d(8, 1e-5, 0.1),
                          mft_nn_residual(mft_nn_sequential(3, body_l), NULL, true)};
    mft_module *m = mft_nn_sequential(3, top);
    CHECK(m != NULL);
    const int64_t xs[4] = {2, 3, 6, 6};
    mft_tensor *x = randx(4, xs, MFT_CONTIGUOUS, 7);
    mft_tensor *b[6];
    mft_module_buffers(m, b, NULL, 6);
    const uint64_t h0 = mft_tensor_hash(b[0]), h1 = mft_tensor_hash(b[1]);
    mft_clear_error();
    CHECK(mft_module_forward(m, x) == NULL);
    const char *msg = mft_last_error_message();
    CHECK_MSG(starts_with(msg, "mft_module_forward: layer 2.body.1 BatchNorm2d(16): mft_batch_norm"),
              "%s", msg);
    CHECK_MSG(count_of(msg, "layer ") == 1, "%s", msg);
    CHECK(mft_last_error() != MFT_OK);
    mft_clear_error();
    CHECK_EQ_I(mft_module_depth(), 0);
    CHECK(strcmp(mft_module_path(), "") == 0);
    /* the first batch norm ran in training mode before the failure: undone */
    CHECK(mft_tensor_hash(b[0]) == h0 && mft_tensor_hash(b[1]) == h1);
    CHECK(mft_tensor_get(b[2], (int64_t[]){0}) == 0.0);
    mft_module_free(m);

    /* the residual's own add failing names the residual */
    mft_module *widen = mft_nn_conv2d(3, 6, K3, NULL, P1, NULL, 1, true, 3);
    mft_module *m2 = mft_nn_sequential(2, (mft_module *[]){mft_nn_relu(),
                                                          mft_nn_residual(widen, NULL, false)});
    CHECK(mft_module_forward(m2, x) == NULL);
    msg = mft_last_error_message();
    CHECK_MSG(starts_with(msg, "mft_module_forward: layer 1 Residual: mft_add"), "%s", msg);
    CHECK(count_of(msg, "layer ") == 1);
    mft_clear_error();
    CHECK_EQ_I(mft_module_depth(), 0);
    mft_module_free(m2);

    /* inside a custom forward: the child's path under the custom module */
    gate_ctx c = {0};
    mft_module *wrap = mft_nn_custom(
        "Wrap", 1, (mft_module *[]){mft_nn_linear(5, 2, true, 1)}, (const char *[]){"inner"},
        wrap_forward, &c, NULL);
    mft_module *m3 = mft_nn_sequential(2, (mft_module *[]){mft_nn_relu(), wrap});
    CHECK(mft_module_forward(m3, x) == NULL);
    msg = mft_last_error_message();
    CHECK_MSG(starts_with(msg, "mft_module_forward: layer 1.inner Linear(5, 2): mft_linear"), "%s",
              msg);
    CHECK(count_of(msg, "layer ") == 1);
    mft_clear_error();
    CHECK_EQ_I(mft_module_depth(), 0);
    mft_module_free(m3);

    /* a custom forward asking for a child that does not exist: the lookup's
     * error, labelled with the custom module's path */
    mft_module *typo = mft_nn_custom("Wrap", 1, (mft_module *[]){mft_nn_relu()},
                                     (const char *[]){"innr"}, wrap_forward, &c, NULL);
    mft_module *m4 = mft_nn_sequential(2, (mft_module *[]){mft_nn_relu(), typo});
    CHECK(mft_module_forward(m4, x) == NULL);
    msg = mft_last_error_message();
    CHECK_MSG(starts_with(msg, "mft_module_forward: layer 1 Wrap: mft_module_child_by_name: no "
                               "child 'inner' in Wrap"),
              "%s", msg);
    CHECK(mft_last_error() == MFT_ERR_INVALID);
    mft_clear_error();
    CHECK_EQ_I(mft_module_depth(), 0);
    mft_module_free(m4);

    /* the module the user runs gets no prefix: the message names the op */
    mft_module *lone = mft_nn_batch_norm2d(16, 1e-5, 0.1);
    CHECK(mft_module_forward(lone, x) == NULL);
    CHECK_MSG(starts_with(mft_last_error_message(), "mft_batch_norm"), "%s",
              mft_last_error_message());
    mft_clear_error();
    mft_module_free(lone);
    mft_tensor_release(x);
}

static int g_freed;
static void count_free(void *ctx) {
    (void)ctx;
    g_freed++;
}

/* mft_nn_sequential_named: the same forward as the numbered sequential of
 * the same layers (bit for bit, fusion included), parameters under the
 * given names, errors labelled with them, and its argument errors. */
static mft_module *conv_bn_pool(const char *const *names, uint64_t seed) {
    mft_module *l[4] = {mft_nn_conv2d(2, 4, K3, NULL, P1, NULL, 1, true, seed),
                        mft_nn_batch_norm2d(4, 1e-5, 0.1), mft_nn_relu(),
                        mft_nn_max_pool2d((const int64_t[]){2, 2}, NULL)};
    return names ? mft_nn_sequential_named(4, l, names) : mft_nn_sequential(4, l);
}

static void test_sequential_named(void) {
    static const char *const names[4] = {"conv", "bn", "act", "pool"};
    mft_module *a = conv_bn_pool(names, 5), *b = conv_bn_pool(NULL, 5);
    CHECK(a && b);
    if (!a || !b) {
        mft_module_free(a);
        mft_module_free(b);
        return;
    }
    const char *na[4], *nb[6];
    CHECK_EQ_I(mft_module_parameters(a, NULL, na, 4), 4);
    CHECK_EQ_I(mft_module_buffers(a, NULL, nb, 6), 3);
    CHECK(!strcmp(na[0], "conv.weight") && !strcmp(na[1], "conv.bias") &&
          !strcmp(na[2], "bn.weight") && !strcmp(na[3], "bn.bias"));
    CHECK(!strcmp(nb[0], "bn.running_mean") && !strcmp(nb[2], "bn.num_batches_tracked"));
    CHECK(mft_module_child_by_name(a, "bn") == mft_module_child(a, 1));
    CHECK(!strcmp(mft_module_name(mft_module_child(a, 3)), "pool"));
    CHECK(!strcmp(mft_module_label(a), "Sequential"));
    mft_tensor *x = randx(4, (const int64_t[]){2, 2, 6, 6}, MFT_CHANNELS_LAST, 8);
    mft_tensor *ya = mft_module_forward(a, x), *yb = mft_module_forward(b, x);
    CHECK(ya && yb && mft_tensor_hash(ya) == mft_tensor_hash(yb));
    mft_tensor_release(ya);
    mft_tensor_release(yb);
    mft_tensor_release(x);
    /* a failure is labelled with the child's name */
    mft_tensor *x3 = randx(4, (const int64_t[]){2, 3, 6, 6}, MFT_CONTIGUOUS, 9);
    CHECK(mft_module_forward(a, x3) == NULL);
    CHECK_MSG(starts_with(mft_last_error_message(), "mft_module_forward: layer conv Conv2d(2, 4, "
                                                    "3x3): "),
              "%s", mft_last_error_message());
    mft_clear_error();
    mft_tensor_release(x3);
    mft_module_free(a);
    mft_module_free(b);
    /* argument errors: the given layers are freed (TEST_MAIN_END counts) */
    static const char *const dotted[4] = {"conv", "b.n", "act", "pool"};
    static const char *const twice[4] = {"conv", "bn", "conv", "pool"};
    static const char *const null_name[4] = {"conv", NULL, "act", "pool"};
    CHECK(conv_bn_pool(dotted, 1) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "mft_nn_sequential_named: names[1] = 'b.n'");
    CHECK(conv_bn_pool(twice, 1) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "mft_nn_sequential_named: names[0] and names[2] are both 'conv'");
    CHECK(conv_bn_pool(null_name, 1) == NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_nn_sequential_named: names[1] is NULL");
}

static void test_constructor_errors(void) {
    const int64_t live0 = mft_live_tensors();
    /* residual */
    CHECK(mft_nn_residual(NULL, mft_nn_relu(), true) == NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_nn_residual: body is NULL");
    mft_module *r = mft_nn_relu();
    CHECK(mft_nn_residual(r, r, true) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "body and shortcut are the same layer");
    mft_module *inner = mft_nn_linear(2, 2, true, 1);
    mft_module *owner = mft_nn_sequential(1, &inner);
    CHECK(mft_nn_residual(inner, mft_nn_linear(2, 2, false, 2), true) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "mft_nn_residual: body is already owned by a container");
    CHECK(mft_module_child(owner, 0) == inner); /* the owner is intact */
    mft_tensor *iw = NULL;
    const char *iwn = NULL;
    CHECK_EQ_I(mft_module_parameters(owner, &iw, &iwn, 1), 2);
    CHECK(iw && strcmp(iwn, "0.weight") == 0 && strcmp(mft_tensor_name(iw), "0.weight") == 0);
    mft_module_free(owner);
    /* a failed constructor's NULL keeps its error */
    CHECK(mft_nn_residual(mft_nn_conv2d(0, 1, K3, NULL, NULL, NULL, 1, true, 1), NULL, true) ==
          NULL);
    CHECK_ERR(MFT_ERR_INVALID, "mft_nn_conv2d: invalid configuration in_ch=0");

    /* custom: ctx_free once on every failure, the children freed */
    struct {
        const char *kind;
        int n;
        const char *names[2];
        bool null_names, null_fwd, null_kids;
        mft_status st;
        const char *msg;
    } cases[] = {
        {NULL, 1, {"a"}, false, false, false, MFT_ERR_NULL, "mft_nn_custom: kind is NULL"},
        {"", 1, {"a"}, false, false, false, MFT_ERR_INVALID, "kind is empty"},
        {"K", 1, {"a"}, false, true, false, MFT_ERR_NULL, "forward is NULL"},
        {"K", 2, {"a", NULL}, false, false, false, MFT_ERR_NULL, "names[1] is NULL"},
        {"K", 2, {"a", "a"}, false, false, false, MFT_ERR_INVALID, "names[0] and names[1] are both 'a'"},
        {"K", 1, {"a.b"}, false, false, false, MFT_ERR_INVALID, "names[0] = 'a.b'"},
        {"K", 1, {""}, false, false, false, MFT_ERR_INVALID, "names[0] = ''"},
        {"K", 2, {"a", "b"}, false, false, true, MFT_ERR_NULL, "children[0] ('a') is NULL"},
        {"K", -1, {"a"}, false, false, false, MFT_ERR_INVALID, "invalid n=-1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        g_freed = 0;
        mft_module *kids[2] = {mft_nn_linear(2, 2, true, 1), mft_nn_relu()};
        if (cases[i].null_kids) {
            mft_module_free(kids[0]);
            kids[0] = NULL;
        }
        mft_clear_error();
        const int n = cases[i].n;
        mft_module *m = mft_nn_custom(cases[i].kind, n, kids, cases[i].names,
                                      cases[i].null_fwd ? NULL : probe_forward, NULL, count_free);
        CHECK_MSG(m == NULL, "case %zu", i);
        CHECK_MSG(g_freed == 1, "case %zu: ctx_free called %d times", i, g_freed);
        CHECK_ERR(cases[i].st, cases[i].msg);
        /* children the constructor did not take (beyond n) are still ours */
        for (int k = n > 0 ? n : 0; k < 2; k++) mft_module_free(kids[k]);
        CHECK_MSG(mft_live_tensors() == live0, "case %zu: %lld tensors leaked", i,
                  (long long)(mft_live_tensors() - live0));
    }
    char longkind[200];
    memset(longkind, 'k', sizeof longkind - 1);
    longkind[sizeof longkind - 1] = '\0';
    g_freed = 0;
    CHECK(mft_nn_custom(longkind, 0, NULL, NULL, probe_forward, NULL, count_free) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "kind is too long");
    CHECK_EQ_I(g_freed, 1);
    char longname[80];
    memset(longname, 'n', 64);
    longname[64] = '\0';
    CHECK(mft_nn_custom("K", 1, (mft_module *[]){mft_nn_relu()}, (const char *[]){longname},
                        probe_forward, NULL, count_free) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "a child's name has 1 to 63 characters");
    CHECK_EQ_I(g_freed, 2);

    /* dotted names past 255 characters: four levels of 63-character names */
    longname[63] = '\0';
    mft_module *cur = mft_nn_linear(2, 2, true, 1);
    int level = 0;
    for (; level < 5 && cur; level++) {
        const char *nm[1] = {longname};
        cur = mft_nn_custom("Deep", 1, &cur, nm, probe_forward, NULL, NULL);
    }
    CHECK(cur == NULL && level == 4); /* 3 * 64 + 63 + "weight" > 255 at the fourth */
    CHECK_ERR(MFT_ERR_INVALID, "a dotted name of 262 characters (at most 255)");

    /* sequential keeps its messages */
    CHECK(mft_nn_sequential(2, (mft_module *[]){mft_nn_relu(), NULL}) == NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_nn_sequential: layers[1] is NULL");
    CHECK_EQ_I(mft_live_tensors(), live0);
}

/* Builds tiny_tree with a counted ctx_free on the head. */
static mft_module *tree_counted(void) {
    mft_module *head_kids[3] = {mft_nn_global_avg_pool2d(), mft_nn_flatten(1, 3),
                                mft_nn_linear(16, 3, true, 9)};
    mft_module *head = mft_nn_custom("Head", 3, head_kids, (const char *[]){"pool", "flat", "fc"},
                                     head_forward, NULL, count_free);
    mft_module *l[5] = {mft_nn_conv2d(1, 8, K3, NULL, P1, NULL, 1, false, 1),
                        mft_nn_batch_norm2d(8, 1e-5, 0.1), mft_nn_relu(), basic_block(8, 16, 2, 2),
                        head};
    mft_module *m = mft_nn_sequential(5, l);
    if (m && mft_module_to_format(m, MFT_CHANNELS_LAST) != MFT_OK) {
        mft_module_free(m);
        return NULL;
    }
    return m;
}

/* Every allocation of building the tree failing in turn, then every
 * allocation of a training forward + backward. */
static void test_allocation_failures(void) {
    const int64_t live0 = mft_live_tensors(), st0 = mft_live_storages();
    fa_install();
    long long failures = 0;
    for (long long k = 1; k < 5000; k++) {
        g_freed = 0;
        mft_clear_error();
        fa_arm(k);
        mft_module *m = tree_counted();
        const long long injected = g_fa.injected;
        const size_t failed_size = g_fa.failed_size;
        fa_arm(0);
        if (m) {
            CHECK_MSG(injected == 0, "build, allocation %lld (of %zu bytes) failed unseen", k,
                      failed_size);
            mft_module_free(m);
            CHECK_EQ_I(g_freed, 1);
            break;
        }
        failures++;
        CHECK_MSG(mft_last_error() == MFT_ERR_NOMEM && starts_with(mft_last_error_message(), "mft_"),
                  "build, allocation %lld: %s", k, mft_last_error_message());
        CHECK_MSG(g_freed == 1, "build, allocation %lld: ctx_free called %d times", k, g_freed);
        CHECK_MSG(mft_live_tensors() == live0 && mft_live_storages() == st0 && g_fa.live == 0,
                  "build, allocation %lld: %lld tensors, %lld blocks left", k,
                  (long long)(mft_live_tensors() - live0), g_fa.live);
    }
    CHECK_MSG(failures > 60, "only %lld allocations failed in turn", failures);

    /* forward + backward: NULL or a failed status, nothing left, the path
     * empty, the batch-norm statistics as before a failed forward */
    fa_arm(0);
    mft_module *m = tree_counted();
    const int64_t xs[4] = {2, 1, 8, 8};
    mft_tensor *x = randx(4, xs, MFT_CHANNELS_LAST, 5);
    mft_tensor *b[12];
    mft_module_buffers(m, b, NULL, 12);
    const int64_t live1 = mft_live_tensors();
    long long blocks1 = g_fa.live, fwd_failures = 0;
    for (long long k = 1; k < 5000; k++) {
        uint64_t h[12];
        for (int i = 0; i < 12; i++) h[i] = mft_tensor_hash(b[i]);
        mft_clear_error();
        fa_arm(k);
        mft_tape_begin();
        mft_tensor *y = mft_module_forward(m, x);
        const bool fwd_ok = y != NULL;
        mft_tensor *loss = y ? mft_sum(y, 0, NULL, false) : NULL;
        mft_status st = loss ? mft_backward(loss, NULL) : MFT_ERR_NOMEM;
        mft_tape_end();
        const long long injected = g_fa.injected;
        fa_arm(0);
        mft_tensor_release(loss);
        mft_tensor_release(y);
        mft_tensor *p[16];
        const int np = mft_module_parameters(m, p, NULL, 16);
        for (int i = 0; i < np; i++) mft_tensor_zero_grad(p[i]);
        CHECK_EQ_I(mft_module_depth(), 0);
        if (!fwd_ok) {
            fwd_failures++;
            CHECK_MSG(mft_last_error() == MFT_ERR_NOMEM, "forward, allocation %lld: %s", k,
                      mft_last_error_message());
            for (int i = 0; i < 12; i++)
                CHECK_MSG(mft_tensor_hash(b[i]) == h[i], "allocation %lld: buffer %d changed", k, i);
        }
        CHECK_MSG(mft_live_tensors() == live1 && g_fa.live == blocks1,
                  "forward, allocation %lld: %lld tensors, %lld blocks left", k,
                  (long long)(mft_live_tensors() - live1), g_fa.live - blocks1);
        if (injected == 0 && st == MFT_OK) break;
    }
    CHECK_MSG(fwd_failures > 20, "only %lld forwards failed", fwd_failures);
    mft_tensor_release(x);
    mft_module_free(m);
    mft_set_allocator(NULL);
    mft_clear_error();
}

int main(void) {
    RUN(test_residual_equals_ops);
    RUN(test_pools);
    RUN(test_custom_equals_function);
    RUN(test_module_path_while_running);
    RUN(test_custom_calls_child);
    RUN(test_names);
    RUN(test_describe);
    RUN(test_to_format_and_modes);
    RUN(test_error_prefix);
    RUN(test_sequential_named);
    RUN(test_constructor_errors);
    RUN(test_allocation_failures);
    TEST_MAIN_END();
}
