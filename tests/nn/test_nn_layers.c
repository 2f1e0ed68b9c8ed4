/* tests/nn/test_nn_layers.c — nn layers of mft/nn.h: PyTorch-default init bounds
 * and seeding, each layer's forward equal to its op called directly,
 * batch_norm train/eval, model.to(memory_format) in place (same tensor
 * objects, conv weights channels_last, values kept, an optimiser built
 * before still works), parameter / buffer listing and counts of the
 * Fashion-MNIST model, describe, scopes, errors, forward+backward under the
 * tape, and no leaks. */
#include <stdatomic.h>
#include "fail_alloc.h"
#include "harness.h"
#include "mft/nn.h"

static const int64_t K3[2] = {3, 3}, P1[2] = {1, 1}, K2[2] = {2, 2};

static mft_module *fmnist_model(uint64_t seed, bool bn) {
    mft_module *ls[12];
    int n = 0;
    ls[n++] = mft_nn_conv2d(1, 32, K3, NULL, P1, NULL, 1, true, seed);
    if (bn) ls[n++] = mft_nn_batch_norm2d(32, 1e-5, 0.1);
    ls[n++] = mft_nn_relu();
    ls[n++] = mft_nn_max_pool2d(K2, NULL);
    ls[n++] = mft_nn_conv2d(32, 64, K3, NULL, P1, NULL, 1, true, seed + 1);
    if (bn) ls[n++] = mft_nn_batch_norm2d(64, 1e-5, 0.1);
    ls[n++] = mft_nn_relu();
    ls[n++] = mft_nn_max_pool2d(K2, NULL);
    ls[n++] = mft_nn_flatten(1, -1);
    ls[n++] = mft_nn_linear(3136, 128, true, seed + 2);
    ls[n++] = mft_nn_relu();
    ls[n++] = mft_nn_linear(128, 10, true, seed + 3);
    return mft_nn_sequential(n, ls);
}

static mft_tensor *mft_ones_like_fmt_(const mft_tensor *t) {
    mft_tensor *z = mft_zeros_like(t, MFT_PRESERVE);
    if (z && mft_fill_(z, 1.0) != MFT_OK) {
        mft_tensor_release(z);
        return NULL;
    }
    return z;
}

static bool same_values(const mft_tensor *a, const mft_tensor *b, double tol) {
    if (!a || !b || mft_tensor_numel(a) != mft_tensor_numel(b)) return false;
    mft_tensor *ca = mft_contiguous(a, MFT_CONTIGUOUS), *cb = mft_contiguous(b, MFT_CONTIGUOUS);
    mft_tensor *da = mft_to_dtype(ca, MFT_F64), *db = mft_to_dtype(cb, MFT_F64);
    const double *x = mft_tensor_data(da), *y = mft_tensor_data(db);
    bool ok = x && y;
    for (int64_t i = 0; ok && i < mft_tensor_numel(a); i++)
        if (!(fabs(x[i] - y[i]) <= tol)) ok = false;
    mft_tensor_release(ca);
    mft_tensor_release(cb);
    mft_tensor_release(da);
    mft_tensor_release(db);
    return ok;
}

static void check_uniform(const mft_tensor *t, double bound, const char *what) {
    CHECK_MSG(t != NULL, "%s missing", what);
    if (!t) return;
    CHECK(mft_tensor_dtype(t) == MFT_F32);
    CHECK(mft_tensor_is_contiguous(t, MFT_CONTIGUOUS));
    CHECK(mft_tensor_requires_grad(t) && mft_tensor_is_leaf(t));
    const float *d = mft_tensor_data(t);
    int64_t n = mft_tensor_numel(t);
    double mx = 0, sum = 0, sq = 0;
    for (int64_t i = 0; i < n; i++) {
        mx = fmax(mx, fabs(d[i]));
        sum += d[i];
        sq += (double)d[i] * d[i];
    }
    CHECK_MSG(mx <= bound * (1 + 1e-6), "%s: max |v| %g > bound %g", what, mx, bound);
    if (n >= 1000) {
        /* U(-b, b): mean 0, variance b^2/3, max close to b */
        CHECK_MSG(mx > 0.99 * bound, "%s: max |v| %g far below bound %g", what, mx, bound);
        CHECK_MSG(fabs(sum / (double)n) < 0.05 * bound, "%s: mean %g", what, sum / (double)n);
        double var = sq / (double)n, want = bound * bound / 3;
        CHECK_MSG(fabs(var - want) < 0.06 * want, "%s: var %g want %g", what, var, want);
    }
}

static void test_init(void) {
    mft_module *c = mft_nn_conv2d(32, 64, K3, NULL, P1, NULL, 1, true, 7);
    mft_tensor *p[4];
    const char *nm[4];
    CHECK_EQ_I(mft_module_parameters(c, p, nm, 4), 2);
    CHECK(!strcmp(nm[0], "weight") && !strcmp(nm[1], "bias"));
    int64_t ws[4] = {64, 32, 3, 3};
    CHECK(mft_tensor_ndim(p[0]) == 4 && !memcmp(mft_tensor_sizes(p[0]), ws, sizeof ws));
    CHECK(mft_tensor_ndim(p[1]) == 1 && mft_tensor_sizes(p[1])[0] == 64);
    check_uniform(p[0], 1.0 / sqrt(288.0), "conv weight");
    check_uniform(p[1], 1.0 / sqrt(288.0), "conv bias");
    /* same seed: same values; another seed: different */
    mft_module *c2 = mft_nn_conv2d(32, 64, K3, NULL, P1, NULL, 1, true, 7);
    mft_module *c3 = mft_nn_conv2d(32, 64, K3, NULL, P1, NULL, 1, true, 8);
    mft_tensor *p2[2], *p3[2];
    mft_module_parameters(c2, p2, NULL, 2);
    mft_module_parameters(c3, p3, NULL, 2);
    CHECK(mft_tensor_hash(p[0]) == mft_tensor_hash(p2[0]));
    CHECK(mft_tensor_hash(p[1]) == mft_tensor_hash(p2[1]));
    CHECK(mft_tensor_hash(p[0]) != mft_tensor_hash(p3[0]));
    CHECK(mft_tensor_hash(p[1]) != mft_tensor_hash(p3[1]));
    /* bias is not the start of the weight's stream */
    CHECK(((const float *)mft_tensor_data(p[1]))[0] != ((const float *)mft_tensor_data(p[0]))[0]);
    mft_module_free(c);
    mft_module_free(c2);
    mft_module_free(c3);

    /* grouped conv: fan_in = in/groups * kH * kW; no bias */
    mft_module *g = mft_nn_conv2d(8, 4, (int64_t[]){5, 1}, NULL, NULL, NULL, 2, false, 1);
    CHECK_EQ_I(mft_module_parameters(g, p, NULL, 4), 1);
    CHECK(mft_tensor_sizes(p[0])[1] == 4);
    check_uniform(p[0], 1.0 / sqrt(20.0), "grouped conv weight");
    mft_module_free(g);

    mft_module *l = mft_nn_linear(3136, 128, true, 3);
    CHECK_EQ_I(mft_module_parameters(l, p, NULL, 4), 2);
    CHECK(mft_tensor_sizes(p[0])[0] == 128 && mft_tensor_sizes(p[0])[1] == 3136);
    check_uniform(p[0], 1.0 / sqrt(3136.0), "linear weight");
    check_uniform(p[1], 1.0 / sqrt(3136.0), "linear bias");
    CHECK_EQ_I(mft_module_num_parameters(l), 3136 * 128 + 128);
    mft_module_free(l);

    mft_module *bn = mft_nn_batch_norm2d(5, 1e-5, 0.1);
    mft_tensor *b[4];
    const char *bnm[4];
    CHECK_EQ_I(mft_module_parameters(bn, p, NULL, 4), 2);
    CHECK_EQ_I(mft_module_buffers(bn, b, bnm, 4), 3);
    CHECK(!strcmp(bnm[0], "running_mean") && !strcmp(bnm[1], "running_var") &&
          !strcmp(bnm[2], "num_batches_tracked"));
    for (int64_t i = 0; i < 5; i++) {
        CHECK(mft_tensor_get(p[0], &i) == 1.0 && mft_tensor_get(p[1], &i) == 0.0);
        CHECK(mft_tensor_get(b[0], &i) == 0.0 && mft_tensor_get(b[1], &i) == 1.0);
    }
    CHECK(mft_tensor_dtype(b[2]) == MFT_I64 && mft_tensor_numel(b[2]) == 1);
    CHECK(mft_tensor_requires_grad(p[0]) && !mft_tensor_requires_grad(b[0]));
    mft_module_free(bn);

    mft_module *ln = mft_nn_layer_norm(2, (int64_t[]){3, 4}, 1e-5);
    CHECK_EQ_I(mft_module_parameters(ln, p, NULL, 4), 2);
    CHECK(mft_tensor_ndim(p[0]) == 2 && mft_tensor_numel(p[0]) == 12);
    CHECK(mft_tensor_get(p[0], (int64_t[]){2, 3}) == 1.0);
    CHECK_EQ_I(mft_module_buffers(ln, NULL, NULL, 0), 0);
    mft_module_free(ln);
}

static mft_tensor *randx(int nd, const int64_t *s, mft_format f, uint64_t seed) {
    return mft_randn(nd, s, MFT_F32, f, seed);
}

/* forward(layer, x) equals want (exactly, same op, same inputs) */
static void check_fwd(mft_module *l, const mft_tensor *x, mft_tensor *want, const char *what) {
    mft_tensor *y = mft_module_forward(l, x);
    CHECK_MSG(y != NULL && want != NULL, "%s: %s", what, mft_last_error_message());
    if (y && want) {
        CHECK_MSG(mft_tensor_hash(y) == mft_tensor_hash(want) && same_values(y, want, 0),
                  "%s: forward differs from the op", what);
        CHECK_MSG(mft_tensor_format(y) == mft_tensor_format(want), "%s: format", what);
    }
    mft_tensor_release(y);
    mft_tensor_release(want);
}

static void test_forward_equals_ops(void) {
    int64_t xs[4] = {2, 4, 9, 7};
    for (int f = 0; f < 2; f++) {
        mft_format fmt = f ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
        mft_tensor *x = randx(4, xs, fmt, 11 + (uint64_t)f);
        mft_tensor *p[2];

        int64_t st[2] = {2, 1}, pd[2] = {1, 0}, dl[2] = {1, 2};
        mft_module *c = mft_nn_conv2d(4, 6, K3, st, pd, dl, 2, true, 5);
        mft_module_parameters(c, p, NULL, 2);
        check_fwd(c, x, mft_conv2d(x, p[0], p[1], st, pd, dl, 2), "conv2d");
        mft_module_free(c);

        mft_module *r = mft_nn_relu();
        check_fwd(r, x, mft_relu(x), "relu");
        mft_module_free(r);

        mft_module *mp = mft_nn_max_pool2d(K2, NULL);
        check_fwd(mp, x, mft_max_pool2d(x, K2, K2, NULL, NULL, false), "max_pool2d");
        mft_module_free(mp);
        mp = mft_nn_max_pool2d(K3, (int64_t[]){1, 2});
        check_fwd(mp, x, mft_max_pool2d(x, K3, (int64_t[]){1, 2}, NULL, NULL, false),
                  "max_pool2d stride");
        mft_module_free(mp);

        mft_module *fl = mft_nn_flatten(1, -1);
        check_fwd(fl, x, mft_flatten(x, 1, -1), "flatten");
        mft_module_free(fl);

        mft_module *gn = mft_nn_group_norm(2, 4, 1e-5);
        mft_module_parameters(gn, p, NULL, 2);
        check_fwd(gn, x, mft_group_norm(x, 2, p[0], p[1], 1e-5), "group_norm");
        mft_module_free(gn);

        mft_module *ln = mft_nn_layer_norm(2, (int64_t[]){9, 7}, 1e-4);
        mft_module_parameters(ln, p, NULL, 2);
        check_fwd(ln, x, mft_layer_norm(x, 2, (int64_t[]){9, 7}, p[0], p[1], 1e-4),
                  "layer_norm");
        mft_module_free(ln);

        /* dropout: forward k uses seed + k; eval is the identity */
        mft_module *dr = mft_nn_dropout(0.3, 100);
        check_fwd(dr, x, mft_dropout(x, 0.3, true, 100), "dropout #0");
        check_fwd(dr, x, mft_dropout(x, 0.3, true, 101), "dropout #1");
        mft_module_set_training(dr, false);
        CHECK(!mft_module_training(dr));
        check_fwd(dr, x, mft_tensor_retain(x), "dropout eval");
        mft_module_set_training(dr, true);
        check_fwd(dr, x, mft_dropout(x, 0.3, true, 102), "dropout #2");
        mft_module_free(dr);

        /* batch_norm (training): output and running stats as the op's */
        mft_module *bn = mft_nn_batch_norm2d(4, 1e-3, 0.2);
        mft_tensor *b[3];
        mft_module_parameters(bn, p, NULL, 2);
        mft_module_buffers(bn, b, NULL, 3);
        int64_t c4 = 4;
        mft_tensor *rm = mft_zeros(1, &c4, MFT_F32, MFT_CONTIGUOUS);
        mft_tensor *rv = mft_ones(1, &c4, MFT_F32, MFT_CONTIGUOUS);
        check_fwd(bn, x, mft_batch_norm(x, rm, rv, p[0], p[1], true, 0.2, 1e-3), "batch_norm");
        CHECK(same_values(b[0], rm, 0) && same_values(b[1], rv, 0));
        CHECK(mft_tensor_get(b[0], (int64_t[]){1}) != 0.0); /* stats did move */
        CHECK_EQ_I((int64_t)mft_tensor_get(b[2], (int64_t[]){0}), 1);
        mft_tensor_release(rm);
        mft_tensor_release(rv);
        mft_module_free(bn);
        mft_tensor_release(x);
    }
    int64_t ls[3] = {3, 5, 20};
    mft_tensor *x = randx(3, ls, MFT_CONTIGUOUS, 3);
    mft_module *li = mft_nn_linear(20, 7, true, 9);
    mft_tensor *p[2];
    mft_module_parameters(li, p, NULL, 2);
    check_fwd(li, x, mft_linear(x, p[0], p[1]), "linear");
    mft_module_free(li);
    li = mft_nn_linear(20, 7, false, 9);
    CHECK_EQ_I(mft_module_parameters(li, p, NULL, 2), 1);
    check_fwd(li, x, mft_linear(x, p[0], NULL), "linear no bias");
    mft_module_free(li);
    mft_tensor_release(x);
}

static void test_batch_norm_modes(void) {
    int64_t xs[4] = {4, 3, 5, 5};
    mft_tensor *x = randx(4, xs, MFT_CHANNELS_LAST, 21);
    mft_tensor *x2 = mft_add_scalar(x, 1.5);
    mft_module *ls[2] = {mft_nn_batch_norm2d(3, 1e-5, 0.1), mft_nn_relu()};
    mft_module *m = mft_nn_sequential(2, ls);
    mft_tensor *p[2], *b[3];
    const char *bn[3];
    mft_module_parameters(m, p, NULL, 2);
    CHECK_EQ_I(mft_module_buffers(m, b, bn, 3), 3);
    CHECK(!strcmp(bn[0], "0.running_mean") && !strcmp(bn[2], "0.num_batches_tracked"));
    mft_tensor *yt = mft_module_forward(m, x2);
    double rm1 = mft_tensor_get(b[0], (int64_t[]){2});
    mft_module_set_training(m, false); /* recursive */
    mft_tensor *ye = mft_module_forward(m, x2);
    /* eval normalises with the running stats and leaves them alone */
    mft_tensor *bne = mft_batch_norm(x2, b[0], b[1], p[0], p[1], false, 0.1, 1e-5);
    mft_tensor *want = mft_relu(bne);
    CHECK(same_values(ye, want, 0));
    CHECK(!same_values(ye, yt, 1e-3));
    CHECK(mft_tensor_get(b[0], (int64_t[]){2}) == rm1);
    CHECK_EQ_I((int64_t)mft_tensor_get(b[2], (int64_t[]){0}), 1);
    /* back to training: batch statistics again (mean of the output ~ that of yt) */
    mft_module_set_training(m, true);
    mft_tensor *yt2 = mft_module_forward(m, x2);
    CHECK(same_values(yt2, yt, 1e-5));
    CHECK_EQ_I((int64_t)mft_tensor_get(b[2], (int64_t[]){0}), 2);
    mft_tensor_release(yt);
    mft_tensor_release(yt2);
    mft_tensor_release(ye);
    mft_tensor_release(bne);
    mft_tensor_release(want);
    mft_tensor_release(x);
    mft_tensor_release(x2);
    mft_module_free(m);
}

static void test_fmnist_listing(void) {
    mft_module *m = fmnist_model(1, false);
    CHECK(m != NULL);
    mft_tensor *p[16];
    const char *nm[16];
    const char *want[8] = {"0.weight", "0.bias", "3.weight", "3.bias",
                           "7.weight", "7.bias", "9.weight", "9.bias"};
    CHECK_EQ_I(mft_module_parameters(m, NULL, NULL, 0), 8);
    CHECK_EQ_I(mft_module_parameters(m, p, nm, 16), 8);
    for (int i = 0; i < 8; i++) CHECK_MSG(!strcmp(nm[i], want[i]), "%s vs %s", nm[i], want[i]);
    CHECK_EQ_I(mft_module_num_parameters(m), 421642);
    CHECK_EQ_I(mft_module_buffers(m, NULL, NULL, 0), 0);
    /* truncated listing: counts all, fills max */
    mft_tensor *p3[3] = {NULL, NULL, NULL};
    CHECK_EQ_I(mft_module_parameters(m, p3, NULL, 2), 8);
    CHECK(p3[0] == p[0] && p3[1] == p[1] && p3[2] == NULL);
    char buf[2048];
    size_t n = mft_module_describe(m, buf, sizeof buf);
    CHECK(n == strlen(buf));
    CHECK(strstr(buf, "Conv2d(1, 32, kernel=3x3") != NULL);
    CHECK(strstr(buf, "Linear(3136, 128") != NULL && strstr(buf, "9: Linear(128, 10") != NULL);
    CHECK(strstr(buf, "421642 parameters") != NULL);
    int lines = 0;
    for (const char *s = buf; *s; s++) lines += *s == '\n';
    CHECK_EQ_I(lines, 11);
    char small[10];
    CHECK(mft_module_describe(m, small, sizeof small) == n && strlen(small) == 9);

    /* forward shape and equality with the ops chained by hand */
    int64_t xs[4] = {2, 1, 28, 28};
    mft_tensor *x = randx(4, xs, MFT_CONTIGUOUS, 5);
    mft_tensor *y = mft_module_forward(m, x);
    CHECK(y && mft_tensor_ndim(y) == 2 && mft_tensor_sizes(y)[0] == 2 &&
          mft_tensor_sizes(y)[1] == 10);
    mft_tensor *a = mft_conv2d(x, p[0], p[1], NULL, P1, NULL, 1), *t;
    t = mft_relu(a); mft_tensor_release(a); a = t;
    t = mft_max_pool2d(a, K2, K2, NULL, NULL, false); mft_tensor_release(a); a = t;
    t = mft_conv2d(a, p[2], p[3], NULL, P1, NULL, 1); mft_tensor_release(a); a = t;
    t = mft_relu(a); mft_tensor_release(a); a = t;
    t = mft_max_pool2d(a, K2, K2, NULL, NULL, false); mft_tensor_release(a); a = t;
    t = mft_flatten(a, 1, -1); mft_tensor_release(a); a = t;
    t = mft_linear(a, p[4], p[5]); mft_tensor_release(a); a = t;
    t = mft_relu(a); mft_tensor_release(a); a = t;
    t = mft_linear(a, p[6], p[7]); mft_tensor_release(a); a = t;
    CHECK(same_values(y, a, 0));
    mft_tensor_release(a);
    mft_tensor_release(y);
    mft_tensor_release(x);
    mft_module_free(m);

    /* with batch norm: buffers named after their layer index */
    m = fmnist_model(1, true);
    const char *bn[8];
    CHECK_EQ_I(mft_module_buffers(m, NULL, bn, 8), 6);
    CHECK(!strcmp(bn[0], "1.running_mean") && !strcmp(bn[1], "1.running_var") &&
          !strcmp(bn[2], "1.num_batches_tracked") && !strcmp(bn[3], "5.running_mean"));
    CHECK_EQ_I(mft_module_parameters(m, NULL, nm, 16), 12);
    CHECK(!strcmp(nm[2], "1.weight") && !strcmp(nm[11], "11.bias"));
    CHECK_EQ_I(mft_module_num_parameters(m), 421642 + 2 * 32 + 2 * 64);
    mft_module_free(m);

    /* nested sequential names */
    mft_module *inner[2] = {mft_nn_linear(4, 3, true, 1), mft_nn_relu()};
    mft_module *outer[2] = {mft_nn_linear(5, 4, false, 2), mft_nn_sequential(2, inner)};
    m = mft_nn_sequential(2, outer);
    CHECK_EQ_I(mft_module_parameters(m, NULL, nm, 16), 3);
    CHECK(!strcmp(nm[0], "0.weight") && !strcmp(nm[1], "1.0.weight") &&
          !strcmp(nm[2], "1.0.bias"));
    mft_module_free(m);
}

static void test_to_format(void) {
    mft_module *m = fmnist_model(2, true);
    mft_tensor *p[16], *q[16];
    int np = mft_module_parameters(m, p, NULL, 16);
    uint64_t h[16];
    int64_t lin_strides[2];
    for (int i = 0; i < np; i++) h[i] = mft_tensor_hash(p[i]);
    memcpy(lin_strides, mft_tensor_strides(p[8]), sizeof lin_strides);
    mft_sgd_opts so = {0.1, 0.9, 0, 0, false};
    mft_optimizer *o = mft_sgd_new(np, p, &so); /* built before the move */
    CHECK(mft_module_to_format(m, MFT_CHANNELS_LAST) == MFT_OK);
    CHECK_EQ_I(mft_module_parameters(m, q, NULL, 16), np);
    for (int i = 0; i < np; i++) {
        CHECK(q[i] == p[i]); /* same objects */
        CHECK(mft_tensor_hash(p[i]) == h[i]); /* same values */
        CHECK(mft_tensor_requires_grad(p[i]) && mft_tensor_is_leaf(p[i]));
    }
    int convs[2] = {0, 4};
    for (int k = 0; k < 2; k++) {
        mft_tensor *w = p[convs[k]];
        CHECK(mft_tensor_format(w) == MFT_CHANNELS_LAST);
        CHECK(mft_tensor_is_contiguous(w, MFT_CHANNELS_LAST));
        if (k == 1) CHECK(!mft_tensor_is_contiguous(w, MFT_CONTIGUOUS)); /* C_in 32 */
    }
    /* (32,1,3,3) in channels_last has PyTorch's strides (9,1,3,1) */
    CHECK(!memcmp(mft_tensor_strides(p[0]), ((int64_t[]){9, 1, 3, 1}), 4 * sizeof(int64_t)));
    CHECK(!memcmp(mft_tensor_strides(p[8]), lin_strides, sizeof lin_strides));
    CHECK(mft_tensor_format(p[1]) == MFT_CONTIGUOUS);

    /* forward in channels_last: the conv output is channels_last */
    int64_t xs[4] = {2, 1, 28, 28};
    mft_tensor *x = randx(4, xs, MFT_CHANNELS_LAST, 9);
    mft_tensor *y = mft_module_forward(m, x);
    CHECK(y != NULL && mft_tensor_sizes(y)[1] == 10);
    mft_tensor_release(y);

    /* the optimiser built before still updates the (moved) parameters */
    mft_tensor *g = mft_ones(4, mft_tensor_sizes(p[0]), MFT_F32, MFT_CHANNELS_LAST);
    double w0 = mft_tensor_get(p[0], (int64_t[]){5, 0, 1, 2});
    mft_tensor_set_grad(p[0], g);
    mft_tensor_release(g);
    CHECK(mft_optimizer_step(o) == MFT_OK);
    CHECK_NEAR(mft_tensor_get(p[0], (int64_t[]){5, 0, 1, 2}), w0 - 0.1, 1e-6);
    CHECK(mft_tensor_is_contiguous(p[0], MFT_CHANNELS_LAST));
    CHECK(mft_optimizer_step(o) == MFT_OK); /* momentum 0.9: buf 1.9 */
    CHECK_NEAR(mft_tensor_get(p[0], (int64_t[]){5, 0, 1, 2}), w0 - 0.1 - 0.19, 1e-6);

    /* and back */
    uint64_t h0 = mft_tensor_hash(p[4]);
    CHECK(mft_module_to_format(m, MFT_CONTIGUOUS) == MFT_OK);
    CHECK(mft_tensor_is_contiguous(p[4], MFT_CONTIGUOUS) &&
          mft_tensor_format(p[4]) == MFT_CONTIGUOUS);
    CHECK(mft_tensor_hash(p[4]) == h0);
    CHECK(mft_module_to_format(m, MFT_PRESERVE) == MFT_ERR_FORMAT);
    CHECK_ERR(MFT_ERR_FORMAT, "mft_module_to_format");
    CHECK(mft_module_to_format(NULL, MFT_CONTIGUOUS) == MFT_ERR_NULL);
    mft_clear_error();
    mft_optimizer_free(o);
    mft_tensor_release(x);
    mft_module_free(m);
}


/* A step before and after to_format: the momentum buffer keeps its values
 * and its object, and follows the parameter into channels_last. */
static void test_to_format_state(void) {
    mft_module *c = mft_nn_conv2d(3, 5, K3, NULL, NULL, NULL, 1, false, 3);
    mft_tensor *w;
    mft_module_parameters(c, &w, NULL, 1);
    mft_sgd_opts so = {0.1, 0.9, 0, 0, false};
    mft_optimizer *o = mft_sgd_new(1, &w, &so);
    mft_tensor *st[4];
    const char *nm[4];
    CHECK_EQ_I(mft_optimizer_state(o, st, nm, 4), 3);
    mft_tensor *buf = st[2];
    double w0 = mft_tensor_get(w, (int64_t[]){4, 2, 1, 0});
    mft_tensor *g = mft_ones(4, mft_tensor_sizes(w), MFT_F32, MFT_CONTIGUOUS);
    mft_tensor_set_grad(w, g);
    mft_tensor_release(g);
    CHECK(mft_optimizer_step(o) == MFT_OK);
    CHECK(mft_module_to_format(c, MFT_CHANNELS_LAST) == MFT_OK);
    g = mft_full(4, mft_tensor_sizes(w), MFT_F32, MFT_CHANNELS_LAST, 2.0);
    mft_tensor_set_grad(w, g);
    mft_tensor_release(g);
    CHECK(mft_optimizer_step(o) == MFT_OK);
    CHECK_EQ_I(mft_optimizer_state(o, st, nm, 4), 3);
    CHECK(st[2] == buf && !strcmp(nm[2], "0.momentum_buffer"));
    CHECK(mft_tensor_is_contiguous(buf, MFT_CHANNELS_LAST) &&
          mft_tensor_format(buf) == MFT_CHANNELS_LAST);
    CHECK(mft_tensor_is_contiguous(w, MFT_CHANNELS_LAST));
    /* buf = 0.9 * 1 + 2 = 2.9; w = w0 - 0.1 * 1 - 0.1 * 2.9 */
    CHECK_NEAR(mft_tensor_get(buf, (int64_t[]){4, 2, 1, 0}), 2.9, 1e-6);
    CHECK_NEAR(mft_tensor_get(w, (int64_t[]){4, 2, 1, 0}), w0 - 0.1 - 0.29, 1e-6);
    mft_optimizer_free(o);
    mft_module_free(c);
}

static void test_scope(void) {
    mft_scope_begin();
    mft_module *m = fmnist_model(3, false);
    mft_scope_end(); /* parameters are not scope-owned */
    mft_tensor *p[8];
    CHECK_EQ_I(mft_module_parameters(m, p, NULL, 8), 8);
    CHECK(mft_tensor_numel(p[6]) == 1280);
    int64_t live = mft_live_tensors();
    mft_scope_begin();
    int64_t xs[4] = {1, 1, 28, 28};
    mft_tensor *x = randx(4, xs, MFT_CONTIGUOUS, 1);
    mft_tensor *y = mft_module_forward(m, x);
    CHECK(y != NULL);
    mft_scope_end();
    CHECK_EQ_I(mft_live_tensors(), live);
    mft_module_free(m);
}

static void test_errors(void) {
    CHECK(mft_nn_conv2d(3, 4, K3, NULL, NULL, NULL, 2, true, 1) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "groups=2");
    CHECK(mft_nn_conv2d(3, 4, NULL, NULL, NULL, NULL, 1, true, 1) == NULL);
    CHECK_ERR(MFT_ERR_NULL, "kernel");
    CHECK(mft_nn_conv2d(3, 0, K3, NULL, NULL, NULL, 1, true, 1) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "out_ch=0");
    CHECK(mft_nn_linear(0, 3, true, 1) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "in_features=0");
    CHECK(mft_nn_batch_norm2d(3, 1e-5, -0.1) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "momentum=-0.1");
    CHECK(mft_nn_group_norm(3, 4, 1e-5) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "groups=3");
    CHECK(mft_nn_layer_norm(0, (int64_t[]){1}, 1e-5) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "nnorm=0");
    CHECK(mft_nn_dropout(1.5, 0) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "p = 1.5");
    CHECK(mft_nn_max_pool2d((int64_t[]){0, 2}, NULL) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "kernel=0x2");

    /* sequential takes ownership also on failure (the leak check sees it) */
    mft_module *ls[3] = {mft_nn_relu(), NULL, mft_nn_linear(2, 2, true, 1)};
    CHECK(mft_nn_sequential(3, ls) == NULL);
    CHECK_ERR(MFT_ERR_NULL, "layers[1]");
    mft_module *r = mft_nn_relu();
    mft_module *dup[3] = {r, mft_nn_linear(2, 2, true, 1), r};
    CHECK(mft_nn_sequential(3, dup) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "same layer");
    mft_module *one[1] = {mft_nn_relu()};
    mft_module *s1 = mft_nn_sequential(1, one);
    mft_module *again[1] = {one[0]};
    CHECK(mft_nn_sequential(1, again) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "already owned");
    /* {s1, a} where s1 already owns a: the error path frees s1 (and with it
     * a) without reading a afterwards (was a use after free; ASan checks) */
    mft_module *owner_and_child[2] = {s1, one[0]};
    CHECK(mft_nn_sequential(2, owner_and_child) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "already owned");
    /* {a, s2} with the owner after its child, and a duplicate owner */
    mft_module *two[1] = {mft_nn_relu()};
    mft_module *s2 = mft_nn_sequential(1, two);
    mft_module *child_then_owner[3] = {two[0], s2, s2};
    CHECK(mft_nn_sequential(3, child_then_owner) == NULL);
    CHECK_ERR(MFT_ERR_INVALID, "already owned");

    /* sizes are validated before anything is allocated: a weight whose
     * element count overflows fails at once, without building the bias */
    fa_install();
    CHECK(mft_nn_linear(INT64_C(1) << 40, INT64_C(1) << 40, true, 1) == NULL);
    CHECK_ERR(MFT_ERR_OVERFLOW, "mft_nn_linear");
    CHECK(mft_nn_conv2d(INT64_C(1) << 31, 1 << 20, (int64_t[]){1 << 16, 1 << 16}, NULL, NULL,
                           NULL, 1, true, 1) == NULL);
    CHECK_ERR(MFT_ERR_OVERFLOW, "mft_nn_conv2d");
    CHECK_EQ_I(g_fa.calls, 0);
    mft_set_allocator(NULL);

    /* forward errors: NULL layer / x, and the op's own error */
    CHECK(mft_module_forward(NULL, NULL) == NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_module_forward");
    mft_module *li = mft_nn_linear(3, 2, true, 1);
    CHECK(mft_module_forward(li, NULL) == NULL);
    CHECK_ERR(MFT_ERR_NULL, "'x'");
    int64_t xs[2] = {4, 5};
    mft_tensor *x = mft_zeros(2, xs, MFT_F32, MFT_CONTIGUOUS);
    CHECK(mft_module_forward(li, x) == NULL);
    CHECK_MSG(mft_last_error() != MFT_OK && strstr(mft_last_error_message(), "linear"),
              "%s", mft_last_error_message());
    mft_clear_error();
    mft_tensor_release(x);
    mft_module_free(li);
    mft_module_free(NULL);
    CHECK_EQ_I(mft_module_parameters(NULL, NULL, NULL, 0), 0);
    CHECK_EQ_I(mft_module_num_parameters(NULL), 0);
}

/* Forward + backward of the Fashion-MNIST model under the tape gives every
 * parameter a grad of its sizes, in its layout. Skipped (with a note) while
 * the ops do not record yet. */
static void test_backward(void) {
    for (int f = 0; f < 2; f++) {
        mft_format fmt = f ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
        mft_module *m = fmnist_model(4, true);
        mft_module_to_format(m, fmt);
        mft_tensor *p[16];
        int np = mft_module_parameters(m, p, NULL, 16);
        int64_t xs[4] = {3, 1, 28, 28};
        mft_tensor *x = randx(4, xs, fmt, 2);
        CHECK(mft_tape_begin() == MFT_OK);
        mft_tensor *y = mft_module_forward(m, x);
        mft_tensor *loss = mft_sum(y, 0, NULL, false);
        CHECK(loss != NULL);
        CHECK_MSG(mft_tape_size() > 0 && mft_tensor_requires_grad(loss),
                  "the forward recorded %lld tape nodes", (long long)mft_tape_size());
        {
            mft_status st = mft_backward(loss, NULL);
            CHECK_MSG(st == MFT_OK, "backward: %s", mft_last_error_message());
            mft_clear_error();
            if (st == MFT_OK) {
                for (int i = 0; i < np; i++) {
                    mft_tensor *g = mft_tensor_grad(p[i]);
                    CHECK_MSG(g != NULL, "param %d has no grad", i);
                    if (!g) continue;
                    CHECK(mft_tensor_ndim(g) == mft_tensor_ndim(p[i]) &&
                          !memcmp(mft_tensor_sizes(g), mft_tensor_sizes(p[i]),
                                  sizeof(int64_t) * (size_t)mft_tensor_ndim(g)));
                    if (mft_tensor_ndim(p[i]) == 4)
                        CHECK(mft_tensor_is_contiguous(g, fmt));
                }
                /* the last bias gets d(sum)/d(b) = batch size */
                CHECK_NEAR(mft_tensor_get(mft_tensor_grad(p[np - 1]), (int64_t[]){3}), 3.0,
                           1e-5);
            }
        }
        mft_tensor_release(loss);
        mft_tensor_release(y);
        CHECK(mft_tape_end() == MFT_OK);
        mft_tensor_release(x);
        mft_module_free(m);
    }
}


/* a and b (F32, same sizes and format) agree bit for bit, or within 1e-5
 * of b's scale when exact is false */
static bool fusion_agree(const mft_tensor *a, const mft_tensor *b, bool exact) {
    if (!a || !b || mft_tensor_numel(a) != mft_tensor_numel(b)) return false;
    const float *x = mft_tensor_data(a), *y = mft_tensor_data(b);
    const int64_t n = mft_tensor_numel(a);
    if (exact) return memcmp(x, y, (size_t)n * sizeof(float)) == 0;
    double scale = 1.0, err = 0.0;
    for (int64_t i = 0; i < n; i++) {
        scale = fmax(scale, fabs((double)y[i]));
        err = fmax(err, fabs((double)x[i] - (double)y[i]));
    }
    return err <= 1e-5 * scale;
}

/* Fusion: a sequential runs relu -> max_pool2d as one relu_max_pool2d and
 * flatten -> linear as one flatten_linear (one tape node instead of two
 * each). With fusion on and off the same model gives the same outputs and
 * parameter gradients, NCHW and NHWC, with and without batch_norm between
 * conv and relu: bit for bit in NCHW; in NHWC flatten_linear sums in the
 * activation's memory order, so within float rounding. */
static void test_fusion(void) {
    for (int f = 0; f < 2; f++)
        for (int bn = 0; bn < 2; bn++) {
            const mft_format fmt = f ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
            mft_module *m[2] = {fmnist_model(9, bn), fmnist_model(9, bn)};
            CHECK(mft_module_fusion(m[0]) && mft_module_fusion(m[1])); /* on by default */
            mft_module_set_fusion(m[0], false);
            CHECK(!mft_module_fusion(m[0]));
            int64_t xs[4] = {4, 1, 28, 28};
            mft_tensor *x = randx(4, xs, fmt, 11);
            mft_tensor *y[2] = {NULL, NULL}, *p[2][16];
            int64_t nodes[2] = {0, 0};
            int np = 0;
            for (int k = 0; k < 2; k++) {
                mft_module_to_format(m[k], fmt);
                np = mft_module_parameters(m[k], p[k], NULL, 16);
                CHECK(mft_tape_begin() == MFT_OK);
                y[k] = mft_module_forward(m[k], x);
                mft_tensor *loss = mft_sum(y[k], 0, NULL, false);
                nodes[k] = mft_tape_size();
                CHECK(loss && mft_backward(loss, NULL) == MFT_OK);
                mft_tensor_release(loss);
                CHECK(mft_tape_end() == MFT_OK);
            }
            /* two relu -> max_pool2d pairs and one flatten -> linear pair fused */
            CHECK_EQ_I(nodes[0] - nodes[1], 3);
            CHECK(fusion_agree(y[0], y[1], f == 0));
            for (int i = 0; i < np; i++) {
                const mft_tensor *g0 = mft_tensor_grad(p[0][i]), *g1 = mft_tensor_grad(p[1][i]);
                CHECK_MSG(g0 && g1 && mft_tensor_format(g0) == mft_tensor_format(g1) &&
                              fusion_agree(g0, g1, f == 0),
                          "param %d: fused and unfused gradients differ (fmt %d, bn %d)", i, f, bn);
            }
            mft_tensor_release(y[0]);
            mft_tensor_release(y[1]);
            mft_tensor_release(x);
            mft_module_free(m[0]);
            mft_module_free(m[1]);
        }
}

/* ------------------------------------------------------------------ allocation failure */
/* Atomic counters: the library allocates scratch inside parallel regions. */
typedef struct {
    atomic_llong calls, fail_at, live;
} nn_alloc;
static nn_alloc g_na;

static void *na_alloc(size_t size, size_t align, void *ctx) {
    nn_alloc *c = ctx;
    if (atomic_fetch_add(&c->calls, 1) + 1 == atomic_load(&c->fail_at)) return NULL;
    size_t r = (size + align - 1) / align * align;
    void *p = aligned_alloc(align, r ? r : align);
    if (p) atomic_fetch_add(&c->live, 1);
    return p;
}
static void na_free(void *p, void *ctx) {
    if (!p) return;
    atomic_fetch_sub(&((nn_alloc *)ctx)->live, 1);
    free(p);
}

/* A small model through every nn entry point; true when all succeeded. */
static bool nn_workload(void) {
    bool ok = false;
    mft_module *ls[6] = {mft_nn_conv2d(2, 4, K3, NULL, P1, NULL, 1, true, 1),
                        mft_nn_batch_norm2d(4, 1e-5, 0.1), mft_nn_relu(),
                        mft_nn_max_pool2d(K2, NULL), mft_nn_flatten(1, -1),
                        mft_nn_linear(64, 3, true, 2)};
    mft_module *m = mft_nn_sequential(6, ls);
    mft_tensor *x = NULL, *y = NULL, *p[8];
    mft_optimizer *sgd = NULL, *adam = NULL;
    int np = 0;
    if (!m || mft_module_to_format(m, MFT_CHANNELS_LAST) != MFT_OK) goto done;
    int64_t xs[4] = {2, 2, 8, 8};
    x = mft_randn(4, xs, MFT_F32, MFT_CHANNELS_LAST, 3);
    y = mft_module_forward(m, x);
    if (!y) goto done;
    np = mft_module_parameters(m, p, NULL, 8);
    for (int i = 0; i < np; i++) {
        mft_tensor *g = mft_ones_like_fmt_(p[i]);
        if (!g) goto done;
        mft_status st = mft_tensor_set_grad(p[i], g);
        mft_tensor_release(g);
        if (st != MFT_OK) goto done;
    }
    mft_sgd_opts so = {0.1, 0.9, 0, 0.01, true};
    mft_adam_opts ao = {0.01, 0.9, 0.999, 1e-8, 0.01};
    sgd = mft_sgd_new(np, p, &so);
    adam = mft_adamw_new(np, p, &ao);
    if (!sgd || !adam || mft_optimizer_step(sgd) != MFT_OK || mft_optimizer_step(adam) != MFT_OK)
        goto done;
    ok = true;
done:
    mft_optimizer_free(sgd);
    mft_optimizer_free(adam);
    mft_tensor_release(y);
    mft_tensor_release(x);
    mft_module_free(m);
    return ok;
}

static void test_alloc_failure(void) {
    mft_allocator a = {na_alloc, na_free, &g_na};
    mft_set_allocator(&a);
    g_na.fail_at = 0;
    g_na.calls = 0;
    CHECK(nn_workload());
    CHECK(nn_workload()); /* lazily built library state is in place now */
    long long base = g_na.live;
    g_na.calls = 0;
    CHECK(nn_workload());
    long long n = g_na.calls;
    CHECK_EQ_I(g_na.live, base);
    CHECK(n > 20);
    int failed_runs = 0;
    for (long long k = 1; k <= n; k++) {
        g_na.calls = 0;
        g_na.fail_at = k;
        if (!nn_workload()) {
            failed_runs++;
            CHECK_MSG(mft_last_error() != MFT_OK, "run %lld failed without an error", k);
        }
        mft_clear_error();
        CHECK_MSG(mft_live_tensors() == 0 && mft_live_storages() == 0,
                  "alloc %lld/%lld failing: %lld tensors %lld storages live", k, n,
                  (long long)mft_live_tensors(), (long long)mft_live_storages());
        CHECK_MSG(g_na.live == base, "alloc %lld failing: %lld blocks leaked", k,
                  g_na.live - base);
    }
    CHECK(failed_runs > n / 2);
    g_na.fail_at = 0;
    CHECK(nn_workload());
    CHECK_EQ_I(g_na.live, base);
    mft_set_allocator(NULL);
}

int main(void) {
    RUN(test_init);
    RUN(test_forward_equals_ops);
    RUN(test_batch_norm_modes);
    RUN(test_fmnist_listing);
    RUN(test_to_format);
    RUN(test_to_format_state);
    RUN(test_scope);
    RUN(test_errors);
    RUN(test_backward);
    RUN(test_fusion);
    RUN(test_alloc_failure);
    TEST_MAIN_END();
}
