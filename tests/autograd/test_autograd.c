/* tests/autograd/test_autograd.c — the tape engine on its own (autograd/tape.c,
 * autograd/gradcheck.c), with three small ops defined here so the engine
 * is tested independently of the library's op wiring: scale2 (y = 2x),
 * mulxy (z = x * y, same sizes) and sumall (s = sum(x), 0-dim).
 * Checks: flags, values of leaf gradients, accumulation, leaf layout
 * contract, format conversion of gradients (docs/spec.md §5), stale saved tensors,
 * backward twice, no-grad mode, in-place refusal, atomic failure, gradcheck
 * catching a wrong backward, scopes, leaks. */
#include "autograd_internal.h"
#include "harness.h"
#include "test_util.h"

/* ---------------------------------------------------------------- test ops */
static mft_status scale2_bw(const mft__ag_node *n, mft_tensor *const *g, mft_tensor **gin) {
    double k = *(const double *)n->params;
    gin[0] = mft_mul_scalar(g[0], k);
    return gin[0] ? MFT_OK : mft_last_error();
}
/* y = 2x; the backward multiplies by bw_factor (2 is right, 3 is a bug). */
static mft_tensor *op_scale(const mft_tensor *x, double bw_factor) {
    bool prev = mft_set_grad_enabled(false);
    mft_tensor *y = mft_mul_scalar(x, 2.0);
    mft_set_grad_enabled(prev);
    if (y && mft__ag_wants(1, &x) &&
        mft__ag_record1("op_scale", "scale2", scale2_bw, x, y, false, false, &bw_factor,
                        sizeof bw_factor) != MFT_OK) {
        mft_tensor_release(y);
        return NULL;
    }
    return y;
}

static mft_status mulxy_bw(const mft__ag_node *n, mft_tensor *const *g, mft_tensor **gin) {
    if (n->in[0].needs_grad) gin[0] = mft_mul(g[0], n->saved[1]);
    if (n->in[1].needs_grad) gin[1] = mft_mul(g[0], n->saved[0]);
    return MFT_OK;
}
static mft_tensor *op_mul(const mft_tensor *x, const mft_tensor *y) {
    bool prev = mft_set_grad_enabled(false);
    mft_tensor *z = mft_mul(x, y);
    mft_set_grad_enabled(prev);
    const mft_tensor *ins[2] = {x, y};
    if (z && mft__ag_wants(2, ins) &&
        mft__ag_record("op_mul", "mulxy", mulxy_bw, 2, ins, 1, &z, 2, ins, NULL, 0) != MFT_OK) {
        mft_tensor_release(z);
        return NULL;
    }
    return z;
}

/* The gradient of a sum is grad broadcast to x: returned CONTIGUOUS on
 * purpose, so a channels-last x needs the engine's conversion. */
static mft_status sumall_bw(const mft__ag_node *n, mft_tensor *const *g, mft_tensor **gin) {
    double gv = mft_tensor_get(g[0], (int64_t[]){0});
    gin[0] = mft_full(n->in[0].ndim, n->in[0].sizes, n->in[0].dtype, MFT_CONTIGUOUS, gv);
    return gin[0] ? MFT_OK : mft_last_error();
}
static mft_tensor *op_sum(const mft_tensor *x) {
    bool prev = mft_set_grad_enabled(false);
    mft_tensor *s1 = mft_sum(x, 0, NULL, false); /* 0-dim */
    mft_set_grad_enabled(prev);
    if (s1 && mft__ag_wants(1, &x) &&
        mft__ag_record1("op_sum", "sumall", sumall_bw, x, s1, false, false, NULL, 0) != MFT_OK) {
        mft_tensor_release(s1);
        return NULL;
    }
    return s1;
}

static mft_status failing_bw(const mft__ag_node *n, mft_tensor *const *g, mft_tensor **gin) {
    (void)n, (void)g, (void)gin;
    mft__set_error(MFT_ERR_INTERNAL, "failing_bw: deliberate failure");
    return MFT_ERR_INTERNAL;
}
static mft_tensor *op_failing(const mft_tensor *x) {
    bool prev = mft_set_grad_enabled(false);
    mft_tensor *y = mft_clone(x, MFT_PRESERVE);
    mft_set_grad_enabled(prev);
    if (y && mft__ag_wants(1, &x) &&
        mft__ag_record1("op_failing", "failing", failing_bw, x, y, false, false, NULL, 0) != MFT_OK) {
        mft_tensor_release(y);
        return NULL;
    }
    return y;
}

static mft_tensor *randt(int nd, const int64_t *sz, mft_dtype dt, mft_format f, uint64_t seed) {
    mft_tensor *t = mft_randn(nd, sz, dt, f, seed);
    return t;
}

static bool all_close(const mft_tensor *a, const mft_tensor *b, double tol) {
    if (mft_tensor_numel(a) != mft_tensor_numel(b)) return false;
    int64_t idx[MFT_MAX_DIMS] = {0};
    int nd = mft_tensor_ndim(a);
    do {
        if (fabs(mft_tensor_get(a, idx) - mft_tensor_get(b, idx)) > tol) return false;
    } while (tu_next_index(nd, mft_tensor_sizes(a), idx));
    return true;
}

/* ---------------------------------------------------------------- tests */
static void test_flags(void) {
    int64_t sz[2] = {2, 3};
    mft_tensor *x = mft_zeros(2, sz, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *i = mft_zeros(2, sz, MFT_I64, MFT_CONTIGUOUS);
    CHECK(!mft_tensor_requires_grad(x));
    CHECK(mft_tensor_is_leaf(x));
    CHECK(mft_tensor_set_requires_grad(x, true) == MFT_OK);
    CHECK(mft_tensor_requires_grad(x));
    CHECK(mft_tensor_set_requires_grad(i, true) == MFT_ERR_DTYPE);
    CHECK_ERR(MFT_ERR_DTYPE, "mft_tensor_set_requires_grad");
    CHECK(mft_tensor_set_requires_grad(NULL, true) != MFT_OK);
    CHECK(mft_tape_end() == MFT_ERR_SCOPE);
    CHECK(mft_tape_begin() == MFT_OK);
    CHECK(mft_tape_begin() == MFT_ERR_SCOPE);
    CHECK(mft_tape_recording());
    mft_tensor *y = op_scale(x, 2.0);
    CHECK(mft_tensor_requires_grad(y));
    CHECK(!mft_tensor_is_leaf(y));
    CHECK_EQ_I(mft_tape_size(), 1);
    CHECK(mft_tensor_set_requires_grad(y, false) == MFT_ERR_INVALID);
    /* a constant input records nothing */
    mft_tensor *c = op_scale(i, 2.0);
    CHECK_EQ_I(mft_tape_size(), 1);
    /* no-grad mode */
    CHECK(mft_set_grad_enabled(false) == true);
    CHECK(!mft_tape_recording());
    mft_tensor *y2 = op_scale(x, 2.0);
    CHECK(!mft_tensor_requires_grad(y2));
    CHECK_EQ_I(mft_tape_size(), 1);
    CHECK(mft_set_grad_enabled(true) == false);
    /* in-place guard */
    CHECK(mft__ag_check_inplace("mft_relu_", y) == MFT_ERR_UNSUPPORTED);
    CHECK_ERR(MFT_ERR_UNSUPPORTED, "mft_relu_");
    CHECK(mft__ag_check_inplace("mft_relu_", y2) == MFT_OK);
    /* backward on a non-scalar without grad_output; on a leaf */
    CHECK(mft_backward(y, NULL) == MFT_ERR_SHAPE);
    CHECK_ERR(MFT_ERR_SHAPE, "grad_output");
    CHECK(mft_backward(x, NULL) == MFT_ERR_INVALID);
    CHECK(mft_backward(NULL, NULL) != MFT_OK);
    CHECK(mft_tape_end() == MFT_OK);
    /* after the tape ends its outputs are plain tensors again */
    CHECK(!mft_tensor_requires_grad(y));
    CHECK(mft_tensor_is_leaf(y));
    CHECK_EQ_I(mft_tape_size(), 0);
    mft_tensor_release(x), mft_tensor_release(i), mft_tensor_release(y);
    mft_tensor_release(c), mft_tensor_release(y2);
}

/* s = sum(scale2(x) * w): x.grad = 2w, w.grad = 2x. x channels-last: its
 * grad keeps x's strides (leaf contract) although sumall returns
 * contiguous gradients (the engine converts, counted). */
static void test_chain_values_and_formats(void) {
    int64_t sz[4] = {2, 3, 4, 5};
    for (int dt = 0; dt < 2; dt++) {
        mft_dtype d = dt ? MFT_F64 : MFT_F32;
        mft_tensor *x = randt(4, sz, d, MFT_CHANNELS_LAST, 1);
        mft_tensor *w = randt(4, sz, d, MFT_CONTIGUOUS, 2);
        mft_tensor_set_requires_grad(x, true);
        mft_tensor_set_requires_grad(w, true);
        mft_autograd_conversions_reset();
        mft_tape_begin();
        mft_tensor *y = op_scale(x, 2.0);
        mft_tensor *z = op_mul(y, w);
        mft_tensor *s = op_sum(z);
        CHECK(s && mft_tensor_requires_grad(s));
        CHECK(mft_backward(s, NULL) == MFT_OK);
        mft_tape_end();
        mft_tensor *gx = mft_tensor_grad(x), *gw = mft_tensor_grad(w);
        CHECK(gx && gw);
        mft_tensor *w2 = mft_mul_scalar(w, 2.0), *x2 = mft_mul_scalar(x, 2.0);
        CHECK(all_close(gx, w2, 1e-6));
        CHECK(all_close(gw, x2, 1e-6));
        CHECK(memcmp(mft_tensor_strides(gx), mft_tensor_strides(x), 4 * sizeof(int64_t)) == 0);
        CHECK(mft_tensor_format(gx) == MFT_CHANNELS_LAST);
        CHECK(mft_tensor_is_contiguous(gw, MFT_CONTIGUOUS));
        /* sumall's contiguous grad had to become channels-last for x's path
         * (mulxy input 0 is y, tagged like x) */
        CHECK(mft_autograd_conversions() >= 1);
        /* a second backward accumulates in place into the same grad object */
        mft_tape_begin();
        mft_tensor *y3 = op_scale(x, 2.0), *z3 = op_mul(y3, w), *s3 = op_sum(z3);
        CHECK(mft_backward(s3, NULL) == MFT_OK);
        mft_tape_end();
        CHECK(mft_tensor_grad(x) == gx);
        mft_tensor *w4 = mft_mul_scalar(w, 4.0);
        CHECK(all_close(gx, w4, 1e-5));
        mft_tensor_zero_grad(x);
        CHECK(mft_tensor_grad(x) == NULL);
        mft_tensor *list[] = {x, w, y, z, s, w2, x2, y3, z3, s3, w4};
        for (size_t i = 0; i < sizeof list / sizeof *list; i++) mft_tensor_release(list[i]);
    }
}

/* x used twice: z = x * x, s = sum(z) -> 2x. */
static void test_accumulation_and_grad_output(void) {
    int64_t sz[2] = {3, 4};
    mft_tensor *x = randt(2, sz, MFT_F64, MFT_CONTIGUOUS, 3);
    mft_tensor_set_requires_grad(x, true);
    mft_tape_begin();
    mft_tensor *z = op_mul(x, x);
    mft_tensor *g = mft_full(2, sz, MFT_F64, MFT_CONTIGUOUS, 0.5);
    CHECK(mft_backward(z, g) == MFT_OK); /* grad_output 0.5: grad = x */
    mft_tape_end();
    CHECK(all_close(mft_tensor_grad(x), x, 1e-12));
    /* wrong grad_output sizes */
    mft_tape_begin();
    mft_tensor *z2 = op_mul(x, x);
    mft_tensor *bad = mft_zeros(1, (int64_t[]){12}, MFT_F64, MFT_CONTIGUOUS);
    CHECK(mft_backward(z2, bad) == MFT_ERR_SHAPE);
    /* a grad_output of another dtype is refused, as PyTorch ("Mismatch in
     * dtype"), not cast silently; the leaf's grad is untouched */
    mft_tensor *g32 = mft_full(2, sz, MFT_F32, MFT_CONTIGUOUS, 0.5);
    uint64_t before = mft_tensor_hash(mft_tensor_grad(x));
    CHECK(mft_backward(z2, g32) == MFT_ERR_DTYPE);
    CHECK(strstr(mft_last_error_message(), "mft_backward: grad_output has dtype f32"));
    CHECK(mft_tensor_hash(mft_tensor_grad(x)) == before);
    mft_clear_error();
    mft_tape_end();
    mft_tensor *list[] = {x, z, g, z2, bad, g32};
    for (size_t i = 0; i < sizeof list / sizeof *list; i++) mft_tensor_release(list[i]);
}

static void test_stale_and_twice(void) {
    int64_t sz[2] = {2, 2};
    mft_tensor *x = randt(2, sz, MFT_F64, MFT_CONTIGUOUS, 4);
    mft_tensor *w = randt(2, sz, MFT_F64, MFT_CONTIGUOUS, 5);
    mft_tensor_set_requires_grad(x, true);
    /* an existing grad must survive a failed backward untouched */
    mft_tensor *g0 = mft_full(2, sz, MFT_F64, MFT_CONTIGUOUS, 7.0);
    mft_tensor_set_grad(x, g0);
    mft_tape_begin();
    mft_tensor *z = op_mul(x, w);
    mft_tensor *s = op_sum(z);
    CHECK(mft_fill_(w, 1.0) == MFT_OK); /* w is saved by mulxy */
    CHECK(mft_backward(s, NULL) == MFT_ERR_STALE);
    CHECK_ERR(MFT_ERR_STALE, "mulxy");
    mft_tape_end();
    CHECK(mft_tensor_grad(x) == g0);
    CHECK(mft_tensor_get(g0, (int64_t[]){1, 1}) == 7.0);
    /* backward twice over one tape */
    mft_tensor_zero_grad(x);
    mft_tape_begin();
    mft_tensor *z2 = op_mul(x, w), *s2 = op_sum(z2);
    CHECK(mft_backward(s2, NULL) == MFT_OK);
    CHECK(mft_backward(s2, NULL) == MFT_ERR_STALE);
    mft_tape_end();
    /* a failing backward kernel halfway: grads untouched, error names it */
    mft_tensor *before = mft_clone(mft_tensor_grad(x), MFT_PRESERVE);
    mft_tape_begin();
    mft_tensor *a = op_mul(x, w), *b = op_failing(a), *c = op_sum(b);
    CHECK(mft_backward(c, NULL) == MFT_ERR_INTERNAL);
    CHECK_ERR(MFT_ERR_INTERNAL, "deliberate");
    mft_tape_end();
    CHECK(all_close(mft_tensor_grad(x), before, 0.0));
    mft_tensor *list[] = {x, w, g0, z, s, z2, s2, before, a, b, c};
    for (size_t i = 0; i < sizeof list / sizeof *list; i++) mft_tensor_release(list[i]);
}

/* A non-dense leaf gets a contiguous grad; set_grad validates. */
static void test_leaf_layout(void) {
    int64_t sz[2] = {4, 6};
    mft_tensor *base = randt(2, sz, MFT_F32, MFT_CONTIGUOUS, 6);
    mft_tensor *x = mft_slice(base, 1, 0, 6, 2); /* (4,3) strides (6,2) */
    mft_tensor_set_requires_grad(x, true);
    mft_tape_begin();
    mft_tensor *y = op_scale(x, 2.0), *s = op_sum(y);
    CHECK(mft_backward(s, NULL) == MFT_OK);
    mft_tape_end();
    mft_tensor *g = mft_tensor_grad(x);
    CHECK(g && mft_tensor_is_contiguous(g, MFT_CONTIGUOUS));
    CHECK(g && mft_tensor_get(g, (int64_t[]){3, 2}) == 2.0);
    mft_tensor *wrong = mft_zeros(2, sz, MFT_F32, MFT_CONTIGUOUS);
    CHECK(mft_tensor_set_grad(x, wrong) == MFT_ERR_SHAPE);
    CHECK_ERR(MFT_ERR_SHAPE, "mft_tensor_set_grad");
    mft_tensor *list[] = {base, x, y, s, wrong};
    for (size_t i = 0; i < sizeof list / sizeof *list; i++) mft_tensor_release(list[i]);
}

/* y = x in a descriptor without a tag (MFT_BLOCKED); its backward keeps the
 * layout of the gradient it was given and returns it plain. */
static mft_layout g_seen_layout;
static mft_status blockify_bw(const mft__ag_node *n, mft_tensor *const *g, mft_tensor **gin) {
    (void)n;
    if (mft_tensor_layout(g[0], &g_seen_layout) != MFT_OK) return mft_last_error();
    gin[0] = mft_contiguous(g[0], MFT_CONTIGUOUS);
    return gin[0] ? MFT_OK : mft_last_error();
}
static mft_tensor *op_blockify(const mft_tensor *x, const mft_layout *l) {
    bool prev = mft_set_grad_enabled(false);
    mft_tensor *y = mft_to_layout(x, l);
    mft_set_grad_enabled(prev);
    if (y && mft__ag_wants(1, &x) &&
        mft__ag_record1("op_blockify", "blockify", blockify_bw, x, y, false, false, NULL, 0) !=
            MFT_OK) {
        mft_tensor_release(y);
        return NULL;
    }
    return y;
}

/* A non-leaf input in a descriptor without a tag gets its gradient in that
 * descriptor, packed (docs/spec.md §7.9): sumall returns a CONTIGUOUS
 * gradient, the engine converts it (one counted conversion). */
static void test_blocked_nonleaf_grad(void) {
    int64_t sz[4] = {2, 5, 3, 3};
    mft_tensor *x = randt(4, sz, MFT_F32, MFT_CONTIGUOUS, 11);
    mft_tensor_set_requires_grad(x, true);
    mft_layout d, want;
    CHECK(mft_layout_from_onednn(4, sz, "aBcd4b", &d) == MFT_OK);
    mft__layout_packed_like(&d, &want);
    mft_autograd_conversions_reset();
    memset(&g_seen_layout, 0, sizeof g_seen_layout);
    mft_tape_begin();
    mft_tensor *y = op_blockify(x, &d), *s = op_sum(y);
    CHECK(y && mft_tensor_format(y) == MFT_BLOCKED);
    CHECK(mft_backward(s, NULL) == MFT_OK);
    mft_tape_end();
    CHECK(mft_layout_equal(&g_seen_layout, &want));
    CHECK(mft_autograd_conversions() == 1);
    mft_tensor *g = mft_tensor_grad(x);
    CHECK(g && mft_tensor_get(g, (int64_t[]){1, 4, 2, 2}) == 1.0);
    CHECK(g && mft_tensor_get(g, (int64_t[]){0, 0, 0, 0}) == 1.0);
    mft_tensor *list[] = {x, y, s};
    for (size_t i = 0; i < sizeof list / sizeof *list; i++) mft_tensor_release(list[i]);
}

typedef struct gc_ctx { double bw; } gc_ctx;
static mft_tensor *gc_fn(void *ctx, mft_tensor *const *in) {
    const gc_ctx *c = ctx;
    mft_tensor *y = op_scale(in[0], c->bw);
    mft_tensor *z = op_mul(y, in[1]);
    mft_tensor_release(y);
    return z;
}

static void test_gradcheck(void) {
    int64_t sz[4] = {1, 2, 3, 2};
    mft_tensor *x = randt(4, sz, MFT_F64, MFT_CHANNELS_LAST, 7);
    mft_tensor *w = randt(4, sz, MFT_F64, MFT_CONTIGUOUS, 8);
    mft_tensor_set_requires_grad(x, true);
    mft_tensor_set_requires_grad(w, true);
    mft_tensor *g0 = mft_full(4, sz, MFT_F64, MFT_CHANNELS_LAST, 3.0);
    mft_tensor_set_grad(x, g0);
    mft_tensor *in[2] = {x, w};
    gc_ctx good = {2.0}, bad = {3.0};
    CHECK(mft_gradcheck(gc_fn, &good, 2, in, NULL) == MFT_OK);
    CHECK(mft_gradcheck(gc_fn, &bad, 2, in, NULL) == MFT_ERR_INVALID);
    CHECK_ERR(MFT_ERR_INVALID, "analytic");
    CHECK(mft_tensor_grad(x) == g0); /* the user's grad is restored */
    CHECK(mft_tensor_grad(w) == NULL);
    /* F32 inputs are refused */
    mft_tensor *f = randt(4, sz, MFT_F32, MFT_CONTIGUOUS, 9);
    mft_tensor_set_requires_grad(f, true);
    mft_tensor *in2[2] = {f, w};
    CHECK(mft_gradcheck(gc_fn, &good, 2, in2, NULL) == MFT_ERR_DTYPE);
    mft_tensor *list[] = {x, w, g0, f};
    for (size_t i = 0; i < sizeof list / sizeof *list; i++) mft_tensor_release(list[i]);
}

/* A whole step inside a scope: intermediates are released at scope end,
 * leaf grads survive, nothing leaks. */
static void test_scope(void) {
    int64_t sz[2] = {5, 5};
    mft_tensor *x = randt(2, sz, MFT_F32, MFT_CONTIGUOUS, 10);
    mft_tensor_set_requires_grad(x, true);
    int64_t live = mft_live_tensors();
    for (int step = 0; step < 3; step++) {
        mft_scope_begin();
        mft_tape_begin();
        mft_tensor *s = op_sum(op_mul(op_scale(x, 2.0), x));
        CHECK(mft_backward(s, NULL) == MFT_OK);
        mft_tape_end();
        mft_scope_end();
    }
    CHECK_EQ_I(mft_live_tensors(), live + 1); /* x's grad */
    mft_tensor *x4 = mft_mul_scalar(x, 12.0); /* 3 steps of d(2x*x)/dx = 4x */
    CHECK(all_close(mft_tensor_grad(x), x4, 1e-4));
    mft_tensor_release(x4);
    mft_tensor_release(x);
}

/* mft_tensor_set_grad refuses what would make a reference cycle (g is t,
 * or t is in g's chain of gradients) or let in-place accumulation write t
 * (g shares memory with t), as PyTorch's "can't assign Variable as its own
 * grad"; the zero-leak check at the end proves no cycle was made. */
static void test_set_grad_misuse(void) {
    int64_t sz[2] = {2, 3};
    mft_tensor *a = randt(2, sz, MFT_F32, MFT_CONTIGUOUS, 1);
    mft_tensor *b = randt(2, sz, MFT_F32, MFT_CONTIGUOUS, 2);
    mft_tensor *c = randt(2, sz, MFT_F32, MFT_CONTIGUOUS, 3);
    mft_tensor *t1 = mft_transpose(a, 0, 1);
    mft_tensor *av = mft_transpose(t1, 0, 1); /* another header on a's memory */
    CHECK(mft_tensor_set_grad(a, a) == MFT_ERR_INVALID);
    CHECK(strstr(mft_last_error_message(), "mft_tensor_set_grad:"));
    CHECK(mft_tensor_set_grad(a, av) == MFT_ERR_INVALID);
    CHECK(strstr(mft_last_error_message(), "shares memory"));
    CHECK(mft_tensor_set_grad(a, b) == MFT_OK);
    CHECK(mft_tensor_set_grad(b, c) == MFT_OK);
    CHECK(mft_tensor_set_grad(c, a) == MFT_ERR_INVALID); /* a -> b -> c -> a */
    CHECK(strstr(mft_last_error_message(), "cycle"));
    CHECK(mft_tensor_grad(c) == NULL && mft_tensor_grad(a) == b);
    mft_clear_error();
    CHECK(mft_tensor_set_grad(a, NULL) == MFT_OK);
    CHECK(mft_tensor_set_grad(c, a) == MFT_OK); /* no cycle any more */
    mft_tensor *list[] = {a, b, c, av, t1};
    for (size_t i = 0; i < sizeof list / sizeof *list; i++) mft_tensor_release(list[i]);
}

int main(void) {
    RUN(test_flags);
    RUN(test_chain_values_and_formats);
    RUN(test_accumulation_and_grad_output);
    RUN(test_stale_and_twice);
    RUN(test_leaf_layout);
    RUN(test_blocked_nonleaf_grad);
    RUN(test_gradcheck);
    RUN(test_scope);
    RUN(test_set_grad_misuse);
    TEST_MAIN_END();
}
