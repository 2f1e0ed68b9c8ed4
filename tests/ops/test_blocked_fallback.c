/* tests/ops/test_blocked_fallback.c — ops on blocked tensors (docs/spec.md
 * §7.9) beyond what the gradcheck sweep's blocked run checks: the forms of
 * the fallback with out parameters and operand lists (Note [Blocked
 * fallback outputs], ops/blocked_outputs.c), and the services that take
 * tensors (optimizer step, checkpoints, data, the dispatcher).
 *   - backward functions called directly with blocked operands: each
 *     gradient equals the plain call's bit for bit and follows its input's
 *     format (grad_x like x, grad_w like w), not grad_out's;
 *   - *_with_indices and the _ex norms: the result blocked like x, indices
 *     and statistics plain; the running statistics updated as on plain
 *     operands; a blocked running statistic refused (MFT_ERR_FORMAT);
 *   - cat / stack / split / cat_backward: lists with blocked tensors; split
 *     stays a view when the chunks are viewable, else goes through a copy;
 *     a failing cat_backward writes nothing;
 *   - conversions are counted with cause "fallback"; inside a scope nothing
 *     leaks and the scope owns exactly the results;
 *   - SGD / Adam (eps 0) step a blocked parameter as its plain copy, pads
 *     stay zero; checkpoints save a blocked tensor in its blocks and
 *     load into a blocked target; gather_rows / images_to_batch take blocked
 *     input; mft_dispatch_call_builtin refuses a blocked operand;
 *   - allocation failures (tests/fail_alloc.h, every k, single and sticky)
 *     inside these fallbacks: MFT_ERR_NOMEM, nothing leaks, and a failed
 *     optimizer step leaves the parameter and its state as they were. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>
#include "fail_alloc.h"
#include "harness.h"
#include "test_util.h"

#define CT  MFT_CONTIGUOUS
#define B16 MFT_NCHW16C
#define B8  MFT_NCHW8C

/* t's values in fmt (a new tensor). */
static mft_tensor *in_fmt(const mft_tensor *t, mft_format fmt) { return mft_to_format(t, fmt); }

/* a and b hold the same values (dtype, sizes, logical order) */
static bool same(const mft_tensor *a, const mft_tensor *b) {
    return a && b && mft_tensor_dtype(a) == mft_tensor_dtype(b) &&
           tu_has_sizes(a, mft_tensor_ndim(b), mft_tensor_sizes(b)) &&
           mft_tensor_hash(a) == mft_tensor_hash(b);
}

/* t is in fmt and, when blocked, its pad lanes are zero */
static bool in_format(const mft_tensor *t, mft_format fmt) {
    return t && mft_tensor_format(t) == fmt &&
           (!mft_tensor_is_blocked(t) || mft_tensor_check_padding(t) == MFT_OK);
}

/* expr fails with status st (a message set) */
#define FAIL_NULL(expr, st)                                                                        \
    do {                                                                                           \
        TU_EXPECT_NULL_(expr, #expr);                                                              \
        CHECK_MSG(mft_last_error() == (st) && mft_last_error_message()[0], "%s: status %s (%s)",   \
                  #expr, mft_status_str(mft_last_error()), mft_last_error_message());              \
        mft_clear_error();                                                                         \
    } while (0)
#define FAIL_STATUS(expr, st)                                                                      \
    do {                                                                                           \
        TU_EXPECT_STATUS_(expr, #expr, st);                                                        \
        CHECK_MSG(mft_last_error_message()[0], "%s: no message", #expr);                           \
        mft_clear_error();                                                                         \
    } while (0)

static int64_t fallbacks(void) { return mft_conversion_counts_get().count[MFT_CAUSE_FALLBACK]; }

static void release_all(int n, mft_tensor **ts) {
    for (int i = 0; i < n; i++) {
        mft_tensor_release(ts[i]);
        ts[i] = NULL;
    }
}

/* ---------------------------------------------------------------- backward functions */
static void test_conv_backward(void) {
    const int64_t xs[4] = {2, 3, 5, 5}, ws[4] = {4, 3, 3, 3}, ys[4] = {2, 4, 5, 5};
    const int64_t one[2] = {1, 1};
    mft_tensor *x = mft_randn(4, xs, MFT_F64, CT, 1), *w = mft_randn(4, ws, MFT_F64, CT, 2);
    mft_tensor *go = mft_randn(4, ys, MFT_F64, CT, 3);
    mft_tensor *gx = NULL, *gw = NULL, *gb = NULL;
    TU_OK_S(mft_conv2d_backward(go, x, w, one, one, one, 1, &gx, &gw, &gb));
    mft_tensor *xb = in_fmt(x, B16), *wb = in_fmt(w, B8), *gob = in_fmt(go, B8);
    /* everything blocked: grad_x like x (nChw16c), grad_w like w (nChw8c) */
    mft_tensor *bx = NULL, *bw = NULL, *bb = NULL;
    mft_conversion_counts_reset();
    TU_OK_S(mft_conv2d_backward(gob, xb, wb, one, one, one, 1, &bx, &bw, &bb));
    CHECK_EQ_I(fallbacks(), 3 + 2); /* three operands in, two gradients out */
    CHECK(same(bx, gx) && in_format(bx, B16));
    CHECK(same(bw, gw) && in_format(bw, B8));
    CHECK(same(bb, gb) && mft_tensor_format(bb) == CT);
    mft_tensor *r[3] = {bx, bw, bb};
    release_all(3, r);
    /* only grad_out blocked: the gradients follow x and w, plain */
    bx = bw = NULL;
    TU_OK_S(mft_conv2d_backward(gob, x, w, one, one, one, 1, &bx, &bw, NULL));
    CHECK(same(bx, gx) && in_format(bx, CT) && same(bw, gw) && in_format(bw, CT));
    mft_tensor_release(bx);
    mft_tensor_release(bw);
    /* an error: every requested pointer NULL */
    bx = bw = x;
    CHECK(mft_conv2d_backward(xb, xb, wb, one, one, one, 1, &bx, &bw, NULL) == MFT_ERR_SHAPE);
    CHECK(bx == NULL && bw == NULL);
    mft_clear_error();
    mft_tensor *all[9] = {x, w, go, gx, gw, gb, xb, wb, gob};
    release_all(9, all);
}

static void test_pool_with_indices(void) {
    const int64_t xs[4] = {2, 19, 6, 6}, k[2] = {2, 2};
    mft_tensor *x = mft_randn(4, xs, MFT_F64, CT, 4), *idx = NULL;
    mft_tensor *y = mft_max_pool2d_with_indices(x, k, NULL, NULL, NULL, false, &idx);
    mft_tensor *xb = in_fmt(x, B16), *bidx = NULL;
    mft_conversion_counts_reset();
    mft_tensor *by = mft_max_pool2d_with_indices(xb, k, NULL, NULL, NULL, false, &bidx);
    CHECK_EQ_I(fallbacks(), 2);
    CHECK(same(by, y) && in_format(by, B16));
    CHECK(same(bidx, idx) && !mft_tensor_is_blocked(bidx));
    /* the backward with the blocked pieces: like x */
    mft_tensor *go = in_fmt(y, B8);
    mft_tensor *g = mft_max_pool2d_backward(y, x, idx), *bg = mft_max_pool2d_backward(go, xb, bidx);
    CHECK(same(bg, g) && in_format(bg, B16));
    mft_tensor *bg2 = mft_max_pool2d_backward(go, x, idx); /* x plain: plain */
    CHECK(same(bg2, g) && in_format(bg2, CT));
    /* the indices argument is still required */
    FAIL_NULL(mft_max_pool2d_with_indices(xb, k, NULL, NULL, NULL, false, NULL), MFT_ERR_NULL);
    mft_tensor *all[10] = {x, idx, y, xb, bidx, by, go, g, bg, bg2};
    release_all(10, all);
}

static void test_norm_stats(void) {
    const int64_t xs[4] = {3, 5, 4, 4}, c[1] = {5};
    mft_tensor *x = mft_randn(4, xs, MFT_F64, CT, 5), *xb = in_fmt(x, B16);
    mft_tensor *w = mft_randn(1, c, MFT_F64, CT, 6), *b = mft_randn(1, c, MFT_F64, CT, 7);
    mft_tensor *rm = mft_zeros(1, c, MFT_F64, CT), *rv = mft_ones(1, c, MFT_F64, CT);
    mft_tensor *brm = mft_zeros(1, c, MFT_F64, CT), *brv = mft_ones(1, c, MFT_F64, CT);
    mft_tensor *sm = NULL, *sv = NULL, *bsm = NULL, *bsv = NULL;
    mft_tensor *y = mft_batch_norm_ex(x, rm, rv, w, b, true, 0.1, 1e-5, &sm, &sv);
    mft_tensor *by = mft_batch_norm_ex(xb, brm, brv, w, b, true, 0.1, 1e-5, &bsm, &bsv);
    CHECK(same(by, y) && in_format(by, B16));
    CHECK(same(bsm, sm) && same(bsv, sv) && !mft_tensor_is_blocked(bsm));
    CHECK(same(brm, rm) && same(brv, rv)); /* the caller's running statistics updated */
    mft_tensor *go = mft_randn(4, xs, MFT_F64, CT, 8), *gob = in_fmt(go, B8);
    mft_tensor *gx = NULL, *gw = NULL, *gb = NULL, *bx = NULL, *bw = NULL, *bb = NULL;
    TU_OK_S(mft_batch_norm_backward(go, x, w, sm, sv, true, &gx, &gw, &gb));
    TU_OK_S(mft_batch_norm_backward(gob, xb, w, bsm, bsv, true, &bx, &bw, &bb));
    CHECK(same(bx, gx) && in_format(bx, B16) && same(bw, gw) && same(bb, gb));
    /* group norm and layer norm _ex: statistics plain */
    mft_tensor *gm = NULL, *gr = NULL, *bgm = NULL, *bgr = NULL;
    mft_tensor *gy = mft_group_norm_ex(x, 5, w, b, 1e-5, &gm, &gr);
    mft_tensor *bgy = mft_group_norm_ex(xb, 5, w, b, 1e-5, &bgm, &bgr);
    CHECK(same(bgy, gy) && in_format(bgy, B16) && same(bgm, gm) && same(bgr, gr));
    mft_tensor *lm = NULL, *lr = NULL, *blm = NULL, *blr = NULL;
    const int64_t ln[2] = {4, 4};
    mft_tensor *ly = mft_layer_norm_ex(x, 2, ln, NULL, NULL, 1e-5, &lm, &lr);
    mft_tensor *bly = mft_layer_norm_ex(xb, 2, ln, NULL, NULL, 1e-5, &blm, &blr);
    CHECK(same(bly, ly) && in_format(bly, B16) && same(blm, lm) && same(blr, lr));
    /* a blocked running statistic (a 1-D descriptor with a block) is refused */
    mft_layout l;
    TU_OK_S(mft_layout_from_onednn(1, c, "A8a", &l));
    mft_tensor *odd = mft_empty_layout(&l, MFT_F64);
    CHECK(odd && mft_tensor_is_blocked(odd));
    FAIL_NULL(mft_batch_norm(x, odd, rv, w, b, true, 0.1, 1e-5), MFT_ERR_FORMAT);
    mft_tensor *p1 = x, *p2 = x;
    FAIL_NULL(mft_batch_norm_ex(xb, rm, odd, w, b, true, 0.1, 1e-5, &p1, &p2), MFT_ERR_FORMAT);
    CHECK(p1 == NULL && p2 == NULL);
    mft_tensor *all[34] = {x,   xb,  w,  b,   rm, rv, brm, brv, sm, sv, bsm, bsv,
                           y,   by,  go, gob, gx, gw, gb,  bx,  bw, bb, gm,  gr,
                           bgm, bgr, gy, bgy, lm, lr, blm, blr, ly, bly};
    release_all(34, all);
    mft_tensor_release(odd);
}

static void test_linalg_and_losses(void) {
    const int64_t as[3] = {2, 3, 4}, bs[2] = {4, 5}, ys[3] = {2, 3, 5};
    mft_tensor *a = mft_randn(3, as, MFT_F64, CT, 9), *b = mft_randn(2, bs, MFT_F64, CT, 10);
    mft_tensor *go = mft_randn(3, ys, MFT_F64, CT, 11);
    mft_tensor *ga = NULL, *gb = NULL, *ba = NULL, *bb = NULL;
    TU_OK_S(mft_matmul_backward(go, a, b, &ga, &gb));
    mft_tensor *ab = in_fmt(a, B8), *gob = in_fmt(go, B16);
    TU_OK_S(mft_matmul_backward(gob, ab, b, &ba, &bb));
    CHECK(same(ba, ga) && in_format(ba, B8) && same(bb, gb) && in_format(bb, CT));
    mft_tensor *y = mft_matmul(a, b), *by = mft_matmul(ab, b);
    CHECK(same(by, y) && in_format(by, CT)); /* linalg results are plain */
    /* mse_loss backward: like input */
    mft_tensor *t = mft_randn(3, as, MFT_F64, CT, 12), *tb = in_fmt(t, B16);
    const int64_t s1[1] = {1};
    mft_tensor *g1 = mft_ones(0, s1, MFT_F64, CT);
    mft_tensor *gl = mft_mse_loss_backward(g1, a, t, MFT_REDUCTION_SUM);
    mft_tensor *bgl = mft_mse_loss_backward(g1, ab, tb, MFT_REDUCTION_SUM);
    mft_tensor *bgl2 = mft_mse_loss_backward(g1, a, tb, MFT_REDUCTION_SUM);
    CHECK(same(bgl, gl) && in_format(bgl, B8) && same(bgl2, gl) && in_format(bgl2, CT));
    mft_tensor *all[16] = {a, b, go, ga, gb, ba, bb, ab, gob, y, by, t, tb, g1, gl, bgl};
    release_all(16, all);
    mft_tensor_release(bgl2);
}

/* ---------------------------------------------------------------- lists */
static void test_cat_split(void) {
    const int64_t s0[4] = {2, 3, 4, 4}, s1[4] = {2, 2, 4, 4}, so[4] = {2, 5, 4, 4};
    mft_tensor *x0 = mft_randn(4, s0, MFT_F64, CT, 13), *x1 = mft_randn(4, s1, MFT_F64, CT, 14);
    mft_tensor *x0b = in_fmt(x0, B16);
    const mft_tensor *plain[2] = {x0, x1}, *mixed[2] = {x1, x0b};
    mft_tensor *y = mft_cat(2, plain, 1);
    const mft_tensor *rev[2] = {x1, x0};
    mft_tensor *yr = mft_cat(2, rev, 1), *by = mft_cat(2, mixed, 1);
    CHECK(same(by, yr) && in_format(by, B16)); /* follows the first blocked tensor */
    /* cat_backward: each gradient in its tensor's format */
    mft_tensor *go = mft_randn(4, so, MFT_F64, CT, 15), *gob = in_fmt(go, B8);
    mft_tensor *g[2] = {NULL, NULL}, *bg[2] = {NULL, NULL};
    const mft_tensor *pmixed[2] = {x0b, x1};
    TU_OK_S(mft_cat_backward(go, 2, plain, 1, g));
    TU_OK_S(mft_cat_backward(gob, 2, pmixed, 1, bg));
    CHECK(same(bg[0], g[0]) && in_format(bg[0], B16) && same(bg[1], g[1]) && in_format(bg[1], CT));
    /* a failing call writes nothing */
    mft_tensor *keep[2] = {x0, x1};
    CHECK(mft_cat_backward(gob, 2, pmixed, 7, keep) != MFT_OK);
    CHECK(keep[0] == x0 && keep[1] == x1);
    mft_clear_error();
    /* split along the blocked dim: 8 is not a multiple of 16, copies */
    const int64_t cs[4] = {2, 20, 3, 3};
    mft_tensor *c = mft_randn(4, cs, MFT_F64, CT, 16), *cb = in_fmt(c, B16);
    mft_tensor *ch[4] = {0}, *bch[4] = {0};
    int n = 0, bn = 0;
    TU_OK_S(mft_split(c, 8, 1, 4, ch, &n));
    mft_conversion_counts_reset();
    TU_OK_S(mft_split(cb, 8, 1, 4, bch, &bn));
    CHECK_EQ_I(bn, 3);
    CHECK_EQ_I(fallbacks(), 1 + 3);
    for (int i = 0; i < n && i < bn; i++) CHECK(same(bch[i], ch[i]) && in_format(bch[i], B16));
    release_all(4, ch);
    release_all(4, bch);
    /* split by 16 along it, or along H: views, no conversion */
    const int64_t ws[4] = {2, 40, 3, 3};
    mft_tensor *wide = mft_randn(4, ws, MFT_F64, B16, 17);
    mft_conversion_counts_reset();
    TU_OK_S(mft_split(wide, 16, 1, 4, bch, &bn));
    CHECK_EQ_I(bn, 3);
    CHECK_EQ_I(fallbacks(), 0);
    CHECK(bn == 3 && mft_tensor_data(bch[0]) == mft_tensor_data(wide) && in_format(bch[1], B16) &&
          mft_tensor_sizes(bch[2])[1] == 8);
    release_all(4, bch);
    TU_OK_S(mft_split(wide, 2, 2, 4, bch, &bn));
    CHECK(bn == 2 && mft_tensor_data(bch[0]) == mft_tensor_data(wide) && fallbacks() == 0);
    release_all(4, bch);
    mft_tensor *all[14] = {x0, x1, x0b, y, yr, by, go, gob, g[0], g[1], bg[0], bg[1], c, cb};
    release_all(14, all);
    mft_tensor_release(wide);
}

/* ---------------------------------------------------------------- scopes */
static void test_scopes(void) {
    const int64_t xs[4] = {2, 3, 6, 6}, ws[4] = {4, 3, 3, 3}, k[2] = {2, 2}, one[2] = {1, 1};
    mft_tensor *x = mft_randn(4, xs, MFT_F64, B16, 18), *w = mft_randn(4, ws, MFT_F64, CT, 19);
    const int64_t live = mft_live_tensors();
    TU_OK_S(mft_scope_begin());
    mft_tensor *y = mft_conv2d(x, w, NULL, one, one, one, 1);
    mft_tensor *idx = NULL;
    mft_tensor *p = mft_max_pool2d_with_indices(y, k, NULL, NULL, NULL, false, &idx);
    mft_tensor *gx = NULL, *gw = NULL;
    TU_OK_S(mft_conv2d_backward(y, x, w, one, one, one, 1, &gx, &gw, NULL));
    const mft_tensor *two[2] = {x, y};
    mft_tensor *c = mft_cat(2, two, 1);
    mft_tensor *ch[2] = {0};
    int n = 0;
    TU_OK_S(mft_split(c, 5, 1, 2, ch, &n));
    CHECK(y && p && idx && gx && gw && c && n == 2);
    CHECK(in_format(y, B16) && in_format(p, B16) && in_format(gx, B16));
    /* the results belong to the scope, and only they: 8 tensors */
    CHECK_EQ_I(mft_live_tensors() - live, 8);
    TU_OK_S(mft_scope_end());
    CHECK_EQ_I(mft_live_tensors(), live);
    mft_tensor_release(x);
    mft_tensor_release(w);
}

/* ---------------------------------------------------------------- optimizer */
/* Three steps of o on a blocked parameter equal three on its plain copy. */
static void optim_case(bool adam, mft_format pf, mft_format gf) {
    const int64_t ps[4] = {2, 3, 3, 4};
    mft_tensor *p = mft_randn(4, ps, MFT_F64, CT, 20), *pb = in_fmt(p, pf);
    mft_tensor *g = mft_randn(4, ps, MFT_F64, CT, 21), *gb = in_fmt(g, gf);
    TU_OK_S(mft_tensor_set_requires_grad(p, true));
    TU_OK_S(mft_tensor_set_requires_grad(pb, true));
    TU_OK_S(mft_tensor_set_grad(p, g));
    TU_OK_S(mft_tensor_set_grad(pb, gb));
    const mft_adam_opts ao = {0.05, 0.9, 0.999, 0.0, 0.01}; /* eps 0: a pad visited is NaN */
    const mft_sgd_opts so = {0.1, 0.9, 0.0, 0.01, true};
    mft_optimizer *o = adam ? mft_adam_new(1, &p, &ao) : mft_sgd_new(1, &p, &so);
    mft_optimizer *ob = adam ? mft_adam_new(1, &pb, &ao) : mft_sgd_new(1, &pb, &so);
    CHECK(o && ob);
    for (int s = 0; o && ob && s < 3; s++) {
        TU_OK_S(mft_optimizer_step(o));
        TU_OK_S(mft_optimizer_step(ob));
    }
    CHECK_MSG(same(pb, p) && in_format(pb, pf), "%s %s / %s grad: the blocked parameter differs",
              adam ? "adam" : "sgd", mft_format_name(pf), mft_format_name(gf));
    mft_tensor *st[8];
    const int ns = ob ? mft_optimizer_state(ob, st, NULL, 8) : 0;
    for (int i = 0; i < ns && i < 8; i++) CHECK(mft_tensor_check_padding(st[i]) == MFT_OK);
    mft_optimizer_free(o);
    mft_optimizer_free(ob);
    mft_tensor *all[4] = {p, pb, g, gb};
    release_all(4, all);
}

static void test_optimizer(void) {
    optim_case(false, B16, B16);
    optim_case(true, B16, B16);
    optim_case(true, B8, CT);  /* a plain grad of a blocked parameter */
    optim_case(true, B16, B8); /* a grad in other blocks */
    optim_case(false, CT, B16);
}

/* ---------------------------------------------------------------- services */
static void test_checkpoint(void) {
    char dir[] = "/tmp/mft_blk_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[64];
    snprintf(path, sizeof path, "%s/t.ckpt", dir);
    const int64_t xs[4] = {2, 3, 4, 5};
    mft_tensor *x = mft_randn(4, xs, MFT_F32, B16, 22);
    const char *names[1] = {"x"};
    const mft_tensor *ts[1] = {x};
    TU_OK_S(mft_save_tensors(path, 1, names, ts));
    int n = 0;
    char **nv = NULL;
    mft_tensor **tv = NULL;
    TU_OK_S(mft_load_tensors(path, &n, &nv, &tv));
    CHECK(n == 1 && same(tv[0], x) && in_format(tv[0], B16)); /* loaded in its blocks */
    mft_tensor *into = mft_zeros(4, xs, MFT_F32, B8);
    mft_tensor *targets[1] = {into};
    TU_OK_S(mft_load_tensors_into(path, 1, names, targets));
    CHECK(same(into, x) && in_format(into, B8));
    mft_checkpoint_free_list(n, nv, tv);
    mft_tensor_release(into);
    mft_tensor_release(x);
    remove(path);
    rmdir(dir);
}

static void test_data(void) {
    const int64_t ts[4] = {5, 3, 2, 2}, idx[3] = {4, 0, 2};
    mft_tensor *t = mft_randn(4, ts, MFT_F64, CT, 23), *tb = in_fmt(t, B8);
    mft_tensor *r = mft_gather_rows(t, idx, 3), *rb = mft_gather_rows(tb, idx, 3);
    CHECK(same(rb, r) && in_format(rb, B8));
    mft_tensor *img = mft_empty(4, ts, MFT_U8, CT);
    int64_t i[4] = {0};
    unsigned v = 7;
    do {
        mft_tensor_set(img, i, (double)(v = (v * 37 + 11) % 256));
    } while (tu_next_index(4, ts, i));
    mft_tensor *imgb = in_fmt(img, B16);
    CHECK(mft_tensor_is_blocked(imgb));
    mft_tensor *a = mft_images_to_batch(img, idx, 3, 1.0 / 255, 0.5, 0.25, CT, MFT_F32);
    mft_tensor *ab = mft_images_to_batch(imgb, idx, 3, 1.0 / 255, 0.5, 0.25, CT, MFT_F32);
    CHECK(same(ab, a) && in_format(ab, CT));
    mft_tensor *all[8] = {t, tb, r, rb, img, imgb, a, ab};
    release_all(8, all);
}

static void test_dispatch_refuses(void) {
    const int64_t xs[4] = {2, 3, 8, 8}, ys[4] = {2, 3, 4, 4};
    const mft_pool2d_params pp = {{2, 2}, {2, 2}, {0, 0}, {1, 1}, false, true, 0};
    mft_tensor *x = mft_randn(4, xs, MFT_F32, B16, 24), *y = mft_empty(4, ys, MFT_F32, CT);
    const mft_tensor *ins[1] = {x};
    mft_tensor *outs[1] = {y};
    const mft_kernel_args args = {1, 1, ins, outs, &pp};
    FAIL_STATUS(mft_dispatch_call_builtin("avg_pool2d", CT, MFT_F32, NULL, &args), MFT_ERR_FORMAT);
    mft_tensor_release(x);
    mft_tensor_release(y);
}

/* ---------------------------------------------------------------- allocation failures */
static mft_tensor *g_x, *g_w, *g_go, *g_p, *g_g; /* blocked inputs of the scenarios */
static mft_optimizer *g_opt;

static bool fa_conv_forward(void) {
    const int64_t one[2] = {1, 1};
    mft_tensor *y = mft_conv2d(g_x, g_w, NULL, one, one, one, 1);
    mft_tensor_release(y);
    return y != NULL;
}

static bool fa_conv_backward(void) {
    const int64_t one[2] = {1, 1};
    mft_tensor *gx = NULL, *gw = NULL, *gb = NULL;
    const mft_status st = mft_conv2d_backward(g_go, g_x, g_w, one, one, one, 1, &gx, &gw, &gb);
    CHECK(st == MFT_OK || (!gx && !gw && !gb));
    mft_tensor *r[3] = {gx, gw, gb};
    release_all(3, r);
    return st == MFT_OK;
}

static bool fa_pool_indices(void) {
    const int64_t k[2] = {2, 2};
    mft_tensor *idx = NULL;
    mft_tensor *y = mft_max_pool2d_with_indices(g_x, k, NULL, NULL, NULL, false, &idx);
    CHECK(y ? idx != NULL : idx == NULL);
    mft_tensor_release(y);
    mft_tensor_release(idx);
    return y != NULL;
}

static bool fa_lists(void) {
    const mft_tensor *ts[2] = {g_x, g_go};
    mft_tensor *c = mft_cat(2, ts, 1);
    mft_tensor *g[2] = {g_x, g_w}; /* written only on success */
    const mft_status st = c ? mft_cat_backward(c, 2, ts, 1, g) : MFT_ERR_NOMEM;
    if (st != MFT_OK) CHECK(g[0] == g_x && g[1] == g_w);
    mft_tensor *ch[4] = {0};
    int n = 0;
    const mft_status sst = st == MFT_OK ? mft_split(g_x, 2, 1, 4, ch, &n) : MFT_ERR_NOMEM;
    if (st == MFT_OK) release_all(2, g);
    release_all(4, ch);
    mft_tensor_release(c);
    return st == MFT_OK && sst == MFT_OK;
}

/* g_p's values in logical order (mft_tensor_get: no allocation) */
static void fa_values(double *v) {
    int64_t idx[4] = {0}, e = 0;
    do {
        v[e++] = mft_tensor_get(g_p, idx);
    } while (tu_next_index(4, mft_tensor_sizes(g_p), idx));
}

static bool fa_optim_step(void) {
    double before[24], after[24];
    fa_values(before);
    const mft_status st = mft_optimizer_step(g_opt);
    fa_values(after);
    if (st != MFT_OK)
        CHECK_MSG(!memcmp(before, after, sizeof before), "a failed step changed the parameter");
    return st == MFT_OK;
}

/* Runs sc cleanly to count its allocations N, then with allocation k failing
 * (alone, then k and every later one) for k = 1..N. */
static void fa_sweep(const char *name, bool (*sc)(void)) {
    fa_arm(0);
    CHECK_MSG(sc(), "%s: the clean run failed: %s", name, mft_last_error_message());
    const long long n = g_fa.calls;
    int bad = 0;
    for (int sticky = 0; sticky < 2; sticky++)
        for (long long k = 1; k <= n; k++) {
            const int64_t live = mft_live_tensors(), storages = mft_live_storages();
            const long long blocks = g_fa.live;
            mft_clear_error();
            fa_arm_mode(k, sticky != 0);
            const bool ok = sc();
            const long long injected = g_fa.injected;
            fa_arm_mode(0, false);
            const bool good = (ok || mft_last_error() == MFT_ERR_NOMEM) &&
                              mft_live_tensors() == live && mft_live_storages() == storages &&
                              g_fa.live == blocks;
            if (!good && bad++ < 3)
                CHECK_MSG(good,
                          "%s: allocation %lld%s failing (%lld injected): ok %d, %s (%s), "
                          "tensors %+lld, blocks %+lld",
                          name, k, sticky ? "+" : "", injected, ok,
                          mft_status_str(mft_last_error()), mft_last_error_message(),
                          (long long)(mft_live_tensors() - live), g_fa.live - blocks);
            mft_clear_error();
        }
    CHECK_MSG(bad == 0, "%s: %d failing runs misbehaved", name, bad);
    printf("  %s: %lld allocations, each failed alone and sticky\n", name, n);
}

static void test_allocation_failures(void) {
    fa_install();
    const int64_t xs[4] = {2, 3, 5, 5}, ws[4] = {4, 3, 3, 3}, ps[4] = {2, 3, 2, 2};
    g_x = mft_randn(4, xs, MFT_F32, B16, 30);
    g_w = mft_randn(4, ws, MFT_F32, B8, 31);
    g_go = mft_randn(4, (const int64_t[]){2, 4, 5, 5}, MFT_F32, B8, 32);
    g_p = mft_randn(4, ps, MFT_F64, B16, 33);
    g_g = mft_randn(4, ps, MFT_F64, B8, 34); /* another blocking: copied at each step */
    TU_OK_S(mft_tensor_set_requires_grad(g_p, true));
    TU_OK_S(mft_tensor_set_grad(g_p, g_g));
    const mft_adam_opts ao = {0.01, 0.9, 0.999, 1e-8, 0.0};
    g_opt = mft_adam_new(1, &g_p, &ao);
    CHECK(g_x && g_w && g_go && g_p && g_g && g_opt);
    if (g_x && g_w && g_go && g_p && g_g && g_opt) {
        fa_sweep("conv2d", fa_conv_forward);
        fa_sweep("conv2d_backward", fa_conv_backward);
        fa_sweep("max_pool2d_with_indices", fa_pool_indices);
        fa_sweep("cat, cat_backward, split", fa_lists);
        fa_sweep("optimizer step", fa_optim_step);
    }
    mft_optimizer_free(g_opt);
    mft_tensor *all[5] = {g_x, g_w, g_go, g_p, g_g};
    release_all(5, all);
    mft_set_allocator(NULL);
}

int main(void) {
    RUN(test_conv_backward);
    RUN(test_pool_with_indices);
    RUN(test_norm_stats);
    RUN(test_linalg_and_losses);
    RUN(test_cat_split);
    RUN(test_scopes);
    RUN(test_optimizer);
    RUN(test_checkpoint);
    RUN(test_data);
    RUN(test_dispatch_refuses);
    RUN(test_allocation_failures);
    TEST_MAIN_END();
}
