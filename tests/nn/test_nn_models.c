/* tests/nn/test_nn_models.c — the ready-made models of mft/nn.h
 * (nn/models.c): mft_nn_fashion_cnn checked against expectations written
 * here from the documented architecture, not read off a run:
 *   - structure: the layer list (mft_module_describe), parameter names and
 *     shapes, and the parameter count summed by hand, for the defaults and
 *     for a small variant (width 8, 3 input channels, 12x12, batch_norm);
 *   - seeds: each affine layer's parameters are bit-identical to those of
 *     the layer constructor called alone with seed + 1 .. seed + 4 (what the
 *     example's per-epoch numbers depend on), the same cfg twice gives the
 *     same model, another seed another one;
 *   - forward: (N, 10) logits for (N, C, S, S) inputs (S = 28 and 30), the
 *     activations' shapes after each layer, and their format following the
 *     input (channels_last in -> channels_last conv/relu/pool activations)
 *     or the weights (a CHANNELS_LAST model); NCHW and NHWC inputs give the
 *     same logits; an NCHW16C model has blocked conv weights and gives
 *     nChw16c activations from a plain or an nChw16c input, bit for bit;
 *   - errors: NULL cfg, bad format, bad width / channels / image size, an
 *     overflowing feature count, and every allocation failure on the way
 *     (fail_alloc.h) return NULL, name mft_nn_fashion_cnn, leave the
 *     optional layers array alone and leak no tensor. */
#include "fail_alloc.h"
#include <math.h>
#include "harness.h"

static const int64_t k3[2] = {3, 3}, one[2] = {1, 1};

/* The parameter count of the documented architecture, term by term. */
static int64_t expected_params(int64_t c, int64_t w, int64_t s, bool bn) {
    int64_t q = s / 4; /* two 2x2 pools, floor each time */
    int64_t conv1 = w * c * 3 * 3 + w;
    int64_t conv2 = (2 * w) * w * 3 * 3 + 2 * w;
    int64_t lin1 = (4 * w) * (2 * w * q * q) + 4 * w;
    int64_t lin2 = 10 * (4 * w) + 10;
    int64_t norms = bn ? 2 * w + 2 * (2 * w) : 0;
    return conv1 + conv2 + lin1 + lin2 + norms;
}

static bool has_sizes(const mft_tensor *t, int nd, const int64_t *want) {
    if (!t || mft_tensor_ndim(t) != nd) return false;
    for (int d = 0; d < nd; d++)
        if (mft_tensor_sizes(t)[d] != want[d]) return false;
    return true;
}

/* Line i (0-based) of text, without its newline, into buf. */
static const char *line_of(const char *text, int i, char *buf, size_t len) {
    const char *p = text;
    for (int k = 0; k < i && p; k++) {
        p = strchr(p, '\n');
        if (p) p++;
    }
    buf[0] = '\0';
    if (!p) return buf;
    const char *e = strchr(p, '\n');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (n >= len) n = len - 1;
    memcpy(buf, p, n);
    buf[n] = '\0';
    return buf;
}

static bool starts_with(const char *s, const char *prefix) {
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* ------------------------------------------------------------------ structure */

/* mft_nn_fashion_cnn(cfg), checked to succeed. */
static mft_module *build_ok(const mft_fashion_cnn_config *cfg) {
    mft_module *m = mft_nn_fashion_cnn(cfg);
    CHECK_MSG(m != NULL, "mft_nn_fashion_cnn: %s", mft_last_error_message());
    return m;
}

/* m's parameters are exactly n: names[i] with sizes[i] (nd[i] dims), F32
 * leaves that require grad, the 4-D ones packed in fmt. */
static void check_params(const mft_module *m, int n, const char *const *names, const int *nd,
                         const int64_t (*sizes)[4], mft_format fmt) {
    mft_tensor *ps[16];
    const char *got[16];
    CHECK_EQ_I(mft_module_parameters(m, ps, got, 16), n);
    for (int i = 0; i < n && i < 16; i++) {
        CHECK_MSG(strcmp(got[i], names[i]) == 0, "param %d: %s, expected %s", i, got[i], names[i]);
        CHECK_MSG(has_sizes(ps[i], nd[i], sizes[i]), "param %d (%s) sizes", i, names[i]);
        CHECK(mft_tensor_requires_grad(ps[i]) && mft_tensor_dtype(ps[i]) == MFT_F32);
        if (nd[i] == 4)
            CHECK_MSG(mft_tensor_is_contiguous(ps[i], fmt) && mft_tensor_format(ps[i]) == fmt,
                      "param %d (%s) not %s", i, names[i], mft_format_name(fmt));
    }
}

static void test_default_structure(void) {
    const int64_t live0 = mft_live_tensors();
    mft_module *l[MFT_FASHION_CNN_MAX_LAYERS];
    mft_module *m = build_ok(&(mft_fashion_cnn_config){.layers = l});
    if (!m) return;
    /* 10 layers, the rest of the array NULL */
    for (int i = 0; i < MFT_FASHION_CNN_MAX_LAYERS; i++) CHECK((l[i] != NULL) == (i < 10));
    CHECK_EQ_I(mft_module_num_parameters(m), 421642);
    CHECK_EQ_I(mft_module_num_parameters(m), expected_params(1, 32, 28, false));
    CHECK_EQ_I(320 + 18496 + 401536 + 1290, 421642); /* the header's breakdown */
    CHECK(mft_module_training(m));
    CHECK(mft_module_fusion(m));
    CHECK_EQ_I(mft_module_buffers(m, NULL, NULL, 0), 0);

    /* parameters: names and shapes in registration order */
    /* PyTorch's state_dict keys of examples/fashion_mnist_torch.py's Net */
    static const char *const want_names[8] = {"conv1.weight", "conv1.bias", "conv2.weight",
                                              "conv2.bias",   "fc1.weight", "fc1.bias",
                                              "fc2.weight",   "fc2.bias"};
    static const int want_nd[8] = {4, 1, 4, 1, 2, 1, 2, 1};
    static const int64_t want_sizes[8][4] = {{32, 1, 3, 3}, {32},  {64, 32, 3, 3}, {64},
                                             {128, 3136},   {128}, {10, 128},      {10}};
    check_params(m, 8, want_names, want_nd, want_sizes, MFT_CONTIGUOUS);

    /* the layer list as mft_module_describe prints it */
    size_t need = mft_module_describe(m, NULL, 0);
    char *text = malloc(need + 1);
    CHECK(text && mft_module_describe(m, text, need + 1) == need);
    if (text) {
        static const char *const want[11] = {
            "Sequential(10 layers, 421642 parameters)",
            "  conv1: Conv2d(1, 32, kernel=3x3, stride=1x1, padding=1x1, dilation=1x1, groups=1, "
            "bias=true",
            "  relu1: ReLU()",
            "  pool1: MaxPool2d(kernel=2x2, stride=2x2)",
            "  conv2: Conv2d(32, 64, kernel=3x3, stride=1x1, padding=1x1, dilation=1x1, groups=1, "
            "bias=true",
            "  relu2: ReLU()",
            "  pool2: MaxPool2d(kernel=2x2, stride=2x2)",
            "  flatten: Flatten(1, 3)",
            "  fc1: Linear(3136, 128, bias=true)",
            "  relu3: ReLU()",
            "  fc2: Linear(128, 10, bias=true)"};
        char buf[256];
        for (int i = 0; i < 11; i++)
            CHECK_MSG(starts_with(line_of(text, i, buf, sizeof buf), want[i]),
                      "describe line %d: '%s', expected '%s...'\n%s", i, buf, want[i], text);
        CHECK_MSG(line_of(text, 11, buf, sizeof buf)[0] == '\0', "extra lines:\n%s", text);
    }
    free(text);
    mft_module_free(m);
    CHECK_EQ_I(mft_live_tensors(), live0);
}

/* width 8, 3 input channels, 12x12 images (Q = 3), batch_norm: 12 layers. */
static void test_small_batchnorm_structure(void) {
    const int64_t live0 = mft_live_tensors();
    mft_module *l[MFT_FASHION_CNN_MAX_LAYERS];
    const mft_fashion_cnn_config cfg = {
        .in_channels = 3, .image_size = 12, .width = 8, .batch_norm = true, .layers = l};
    mft_module *m = build_ok(&cfg);
    if (!m) return;
    for (int i = 0; i < MFT_FASHION_CNN_MAX_LAYERS; i++) CHECK(l[i] != NULL);
    /* by hand: conv1 3*8*9+8 = 224, bn1 16, conv2 16*8*9+16 = 1168, bn2 32,
     * linear1 32*144+32 = 4640, linear2 10*32+10 = 330 */
    CHECK_EQ_I(mft_module_num_parameters(m), 224 + 16 + 1168 + 32 + 4640 + 330);
    CHECK_EQ_I(mft_module_num_parameters(m), expected_params(3, 8, 12, true));
    static const char *const want_names[12] = {
        "conv1.weight", "conv1.bias", "bn1.weight", "bn1.bias", "conv2.weight", "conv2.bias",
        "bn2.weight",   "bn2.bias",   "fc1.weight", "fc1.bias", "fc2.weight",   "fc2.bias"};
    static const int want_nd[12] = {4, 1, 1, 1, 4, 1, 1, 1, 2, 1, 2, 1};
    static const int64_t want_sizes[12][4] = {{8, 3, 3, 3},  {8},  {8},      {8},
                                              {16, 8, 3, 3}, {16}, {16},     {16},
                                              {32, 144},     {32}, {10, 32}, {10}};
    check_params(m, 12, want_names, want_nd, want_sizes, MFT_CONTIGUOUS);
    /* batch norms: running_mean, running_var, num_batches_tracked each */
    const char *bnames[8];
    static const char *const want_bufs[6] = {"bn1.running_mean", "bn1.running_var",
                                             "bn1.num_batches_tracked", "bn2.running_mean",
                                             "bn2.running_var", "bn2.num_batches_tracked"};
    CHECK_EQ_I(mft_module_buffers(m, NULL, bnames, 8), 6);
    for (int i = 0; i < 6; i++)
        CHECK_MSG(strcmp(bnames[i], want_bufs[i]) == 0, "buffer %d: '%s', expected '%s'", i,
                  bnames[i], want_bufs[i]);
    size_t need = mft_module_describe(m, NULL, 0);
    char *text = malloc(need + 1);
    if (text) {
        mft_module_describe(m, text, need + 1);
        char buf[256];
        CHECK(starts_with(line_of(text, 0, buf, sizeof buf),
                          "Sequential(12 layers, 6410 parameters)"));
        CHECK(starts_with(line_of(text, 1, buf, sizeof buf), "  conv1: Conv2d(3, 8, kernel=3x3"));
        CHECK(starts_with(line_of(text, 2, buf, sizeof buf),
                          "  bn1: BatchNorm2d(8, eps=1e-05, momentum=0.1)"));
        CHECK(starts_with(line_of(text, 5, buf, sizeof buf), "  conv2: Conv2d(8, 16, kernel=3x3"));
        CHECK(starts_with(line_of(text, 6, buf, sizeof buf),
                          "  bn2: BatchNorm2d(16, eps=1e-05, momentum=0.1)"));
        CHECK(starts_with(line_of(text, 10, buf, sizeof buf), "  fc1: Linear(144, 32, bias=true)"));
        CHECK(starts_with(line_of(text, 12, buf, sizeof buf), "  fc2: Linear(32, 10, bias=true)"));
    }
    free(text);
    mft_module_free(m);
    CHECK_EQ_I(mft_live_tensors(), live0);
}

/* ------------------------------------------------------------------ seeds */

static bool same_values(const mft_tensor *a, const mft_tensor *b) {
    if (!a || !b || mft_tensor_numel(a) != mft_tensor_numel(b)) return false;
    mft_tensor *ca = mft_contiguous(a, MFT_CONTIGUOUS), *cb = mft_contiguous(b, MFT_CONTIGUOUS);
    bool same = ca && cb &&
                memcmp(mft_tensor_data(ca), mft_tensor_data(cb),
                       (size_t)mft_tensor_numel(a) * sizeof(float)) == 0;
    mft_tensor_release(ca);
    mft_tensor_release(cb);
    return same;
}

/* Parameter k of model m (registration order), borrowed. */
static mft_tensor *param_at(const mft_module *m, int k) {
    mft_tensor *ps[16];
    int n = mft_module_parameters(m, ps, NULL, 16);
    return k < n ? ps[k] : NULL;
}

static void test_seeds(void) {
    const int64_t live0 = mft_live_tensors();
    const uint64_t seed = 41;
    mft_fashion_cnn_config cfg = {0};
    cfg.seed = seed;
    cfg.format = MFT_CHANNELS_LAST; /* the values do not depend on the layout */
    mft_module *m = mft_nn_fashion_cnn(&cfg);
    mft_module *again = mft_nn_fashion_cnn(&cfg);
    cfg.seed = seed + 1;
    mft_module *other = mft_nn_fashion_cnn(&cfg);
    /* the four affine layers as the constructors make them alone */
    mft_module *ref[4] = {mft_nn_conv2d(1, 32, k3, one, one, one, 1, true, seed + 1),
                          mft_nn_conv2d(32, 64, k3, one, one, one, 1, true, seed + 2),
                          mft_nn_linear(3136, 128, true, seed + 3),
                          mft_nn_linear(128, 10, true, seed + 4)};
    CHECK(m && again && other && ref[0] && ref[1] && ref[2] && ref[3]);
    if (m && again && other && ref[0] && ref[1] && ref[2] && ref[3]) {
        for (int k = 0; k < 8; k++) {
            CHECK_MSG(same_values(param_at(m, k), param_at(ref[k / 2], k % 2)),
                      "parameter %d differs from the constructor's with seed + %d", k, k / 2 + 1);
            CHECK_MSG(same_values(param_at(m, k), param_at(again, k)), "parameter %d", k);
        }
        for (int k = 0; k < 8; k += 2) /* another seed: other weights everywhere */
            CHECK_MSG(!same_values(param_at(m, k), param_at(other, k)), "parameter %d", k);
    }
    for (int i = 0; i < 4; i++) mft_module_free(ref[i]);
    mft_module_free(m);
    mft_module_free(again);
    mft_module_free(other);
    CHECK_EQ_I(mft_live_tensors(), live0);
}

/* ------------------------------------------------------------------ forward */

/* Runs layers[0..n) one by one on x (inside the caller's scope); checks the
 * sizes after each against want[i] (nd[i] dims) and, for the 4-D ones, the
 * format against fmt. Returns the logits. */
static mft_tensor *walk(mft_module *const *layers, int n, mft_tensor *x, const int *nd,
                        int64_t (*want)[4], mft_format fmt, const char *what) {
    mft_tensor *h = x;
    for (int i = 0; i < n && h; i++) {
        h = mft_module_forward(layers[i], h);
        CHECK_MSG(h != NULL, "%s: layer %d: %s", what, i, mft_last_error_message());
        if (!h) return NULL;
        CHECK_MSG(has_sizes(h, nd[i], want[i]), "%s: layer %d sizes", what, i);
        if (nd[i] == 4)
            CHECK_MSG(mft_tensor_format(h) == fmt && mft_tensor_is_contiguous(h, fmt),
                      "%s: layer %d is %s, expected %s", what, i,
                      mft_format_name(mft_tensor_format(h)), mft_format_name(fmt));
    }
    return h;
}

/* The documented activation sizes after each of the 10 layers for an
 * (n, c, s, s) input and width w: conv1 and relu (n, w, s, s), pool
 * (n, w, s/2, s/2), conv2 and relu (n, 2w, s/2, s/2), pool (n, 2w, s/4,
 * s/4) (floors), flatten (n, 2w*(s/4)^2), linear1 and relu (n, 4w),
 * linear2 (n, 10). */
static void expected_sizes(int64_t n, int64_t w, int64_t s, int nd[10], int64_t want[10][4]) {
    const int64_t h = s / 2, q = h / 2;
    const int64_t rows[10][4] = {
        {n, w, s, s},     {n, w, s, s},       {n, w, h, h}, {n, 2 * w, h, h}, {n, 2 * w, h, h},
        {n, 2 * w, q, q}, {n, 2 * w * q * q}, {n, 4 * w},   {n, 4 * w},       {n, 10}};
    for (int i = 0; i < 10; i++) {
        nd[i] = i < 6 ? 4 : 2;
        memcpy(want[i], rows[i], sizeof rows[i]);
    }
}

static void test_forward_default(void) {
    const int64_t live0 = mft_live_tensors();
    enum { N = 2 };
    mft_module *l[MFT_FASHION_CNN_MAX_LAYERS];
    mft_module *m = build_ok(&(mft_fashion_cnn_config){.layers = l});
    if (!m) return;
    int nd[10];
    int64_t want[10][4];
    expected_sizes(N, 32, 28, nd, want);
    CHECK(want[5][2] == 7 && want[6][1] == 3136); /* the header's numbers */
    mft_scope_begin();
    const int64_t xs[4] = {N, 1, 28, 28};
    mft_tensor *x_nchw = mft_rand(4, xs, MFT_F32, MFT_CONTIGUOUS, 5);
    mft_tensor *x_nhwc = mft_contiguous(x_nchw, MFT_CHANNELS_LAST);
    /* NCHW weights: an NCHW input stays NCHW, an NHWC one NHWC */
    mft_tensor *a = walk(l, 10, x_nchw, nd, want, MFT_CONTIGUOUS, "nchw model, nchw input");
    mft_tensor *b = walk(l, 10, x_nhwc, nd, want, MFT_CHANNELS_LAST, "nchw model, nhwc input");
    /* the sequential itself: the same logits (fusion on) */
    mft_tensor *y = mft_module_forward(m, x_nhwc);
    const int64_t ys[2] = {N, 10};
    CHECK(has_sizes(y, 2, ys));
    CHECK(a && b && y);
    if (a && b && y) {
        double worst = 0.0;
        for (int64_t i = 0; i < N; i++)
            for (int64_t j = 0; j < 10; j++) {
                const int64_t ix[2] = {i, j};
                double va = mft_tensor_get(a, ix), vb = mft_tensor_get(b, ix),
                       vy = mft_tensor_get(y, ix);
                CHECK(isfinite(va));
                worst = fmax(worst, fmax(fabs(va - vb), fabs(vb - vy)));
            }
        CHECK_MSG(worst < 1e-4, "NCHW / NHWC / sequential logits differ by %g", worst);
    }
    mft_scope_end();
    mft_module_free(m);
    CHECK_EQ_I(mft_live_tensors(), live0);
}

/* A CHANNELS_LAST model: 4-D weights CHANNELS_LAST; an NCHW 3-channel
 * 30x30 input (Q = floor(30 / 4) = 7) gives CHANNELS_LAST activations (the
 * conv follows its weight), and (N, 10) logits. */
static void test_forward_channels_last_model(void) {
    const int64_t live0 = mft_live_tensors();
    enum { N = 3 };
    mft_module *l[MFT_FASHION_CNN_MAX_LAYERS];
    const mft_fashion_cnn_config cfg = {
        .in_channels = 3, .image_size = 30, .format = MFT_CHANNELS_LAST, .layers = l};
    mft_module *m = build_ok(&cfg);
    if (!m) return;
    CHECK_EQ_I(mft_module_num_parameters(m), expected_params(3, 32, 30, false));
    mft_tensor *ps[16];
    int np = mft_module_parameters(m, ps, NULL, 16);
    for (int i = 0; i < np; i++)
        if (mft_tensor_ndim(ps[i]) == 4)
            CHECK(mft_tensor_format(ps[i]) == MFT_CHANNELS_LAST &&
                  mft_tensor_is_contiguous(ps[i], MFT_CHANNELS_LAST));
    int nd[10];
    int64_t want[10][4];
    expected_sizes(N, 32, 30, nd, want); /* 30 -> 15 -> 7 */
    mft_scope_begin();
    const int64_t xs[4] = {N, 3, 30, 30};
    mft_tensor *x = mft_rand(4, xs, MFT_F32, MFT_CONTIGUOUS, 9);
    CHECK(walk(l, 10, x, nd, want, MFT_CHANNELS_LAST, "nhwc model, nchw input") != NULL);
    mft_scope_end();
    mft_module_free(m);
    CHECK_EQ_I(mft_live_tensors(), live0);
}

/* ------------------------------------------------------------------ errors */

static void check_fails(const mft_fashion_cnn_config *cfg, mft_status st, const char *needle) {
    mft_clear_error();
    mft_module *m = mft_nn_fashion_cnn(cfg);
    CHECK(m == NULL);
    mft_module_free(m);
    CHECK_MSG(starts_with(mft_last_error_message(), "mft_nn_fashion_cnn: "), "message '%s'",
              mft_last_error_message());
    CHECK_ERR(st, needle);
}

/* An NCHW16C model: conv weights blocked (Ohwi16o: both convs have fewer
 * than 16 input channels here), the rest CONTIGUOUS; nChw16c activations
 * through conv, relu and pool from an nChw16c or a plain NCHW input (conv1
 * makes them), and the logits of the plain model (same seed). */
static void test_forward_blocked_model(void) {
    const int64_t live0 = mft_live_tensors();
    mft_module *lb[MFT_FASHION_CNN_MAX_LAYERS];
    mft_module *b = build_ok(&(mft_fashion_cnn_config){
        .in_channels = 3, .image_size = 12, .width = 5, .format = MFT_NCHW16C, .layers = lb});
    mft_module *p = build_ok(&(mft_fashion_cnn_config){.in_channels = 3, .image_size = 12, .width = 5});
    if (!b || !p) {
        mft_module_free(b);
        mft_module_free(p);
        return;
    }
    mft_tensor *ps[16];
    int np = mft_module_parameters(b, ps, NULL, 16);
    for (int i = 0; i < np; i++) {
        mft_layout want, have;
        if (mft_tensor_ndim(ps[i]) == 4)
            CHECK(mft_layout_from_onednn(4, mft_tensor_sizes(ps[i]), "Ohwi16o", &want) == MFT_OK &&
                  mft_tensor_layout(ps[i], &have) == MFT_OK && mft_layout_equal(&want, &have));
        else
            CHECK(mft_tensor_is_contiguous(ps[i], MFT_CONTIGUOUS));
    }
    mft_scope_begin();
    const int64_t xs[4] = {2, 3, 12, 12};
    mft_tensor *x = mft_rand(4, xs, MFT_F32, MFT_CONTIGUOUS, 5);
    mft_tensor *xb = mft_to_format(x, MFT_NCHW16C);
    mft_tensor *h = mft_module_forward(lb[0], xb); /* conv1 */
    CHECK(h && mft_tensor_format(h) == MFT_NCHW16C && mft_tensor_check_padding(h) == MFT_OK);
    mft_tensor *h0 = mft_module_forward(lb[0], x); /* conv1 on the plain batch */
    CHECK(h0 && mft_tensor_format(h0) == MFT_NCHW16C && mft_tensor_check_padding(h0) == MFT_OK);
    mft_tensor *y0 = mft_module_forward(b, x);
    mft_tensor *yb = mft_module_forward(b, xb), *yp = mft_module_forward(p, x);
    CHECK(y0 && yb && mft_tensor_hash(y0) == mft_tensor_hash(yb));
    CHECK(yb && yp && mft_tensor_numel(yb) == 20 && mft_tensor_numel(yp) == 20);
    int bad = 0; /* native blocked kernels may sum in another order */
    for (int64_t i = 0; yb && yp && i < 2; i++)
        for (int64_t j = 0; j < 10; j++) {
            const int64_t ij[2] = {i, j};
            const double a = mft_tensor_get(yb, ij), e = mft_tensor_get(yp, ij);
            bad += !(fabs(a - e) <= 1e-4 * (1.0 + fabs(e)));
        }
    CHECK_EQ_I(bad, 0);
    mft_scope_end();
    mft_module_free(b);
    mft_module_free(p);
    CHECK_EQ_I(mft_live_tensors(), live0);
}

static void test_errors(void) {
    const int64_t live0 = mft_live_tensors();
    mft_module *sentinel = (mft_module *)&live0; /* never dereferenced */
    mft_module *l[MFT_FASHION_CNN_MAX_LAYERS];
    for (int i = 0; i < MFT_FASHION_CNN_MAX_LAYERS; i++) l[i] = sentinel;

    check_fails(NULL, MFT_ERR_NULL, "argument 'cfg' is NULL");
    mft_fashion_cnn_config cfg = {0};
    cfg.layers = l;
    cfg.format = MFT_PRESERVE;
    check_fails(&cfg, MFT_ERR_FORMAT, "got PRESERVE");
    cfg.format = (mft_format)42;
    check_fails(&cfg, MFT_ERR_FORMAT, "CONTIGUOUS, CHANNELS_LAST, NCHW8C or NCHW16C");
    cfg.format = MFT_CHANNELS_LAST;
    cfg.width = -1;
    check_fails(&cfg, MFT_ERR_INVALID, "width=-1");
    cfg.width = 0;
    cfg.in_channels = -3;
    check_fails(&cfg, MFT_ERR_INVALID, "in_channels=-3");
    cfg.in_channels = 0;
    cfg.image_size = 3; /* pooled to nothing */
    check_fails(&cfg, MFT_ERR_INVALID, "image_size=3");
    cfg.image_size = -28;
    check_fails(&cfg, MFT_ERR_INVALID, "image_size=-28");
    cfg.image_size = 0;
    cfg.width = INT64_MAX / 2; /* 4 * width overflows */
    check_fails(&cfg, MFT_ERR_INVALID, "overflows");
    cfg.width = 1 << 20;
    cfg.image_size = (int64_t)1 << 40; /* 2W * Q^2 overflows */
    check_fails(&cfg, MFT_ERR_INVALID, "overflows");
    /* the counts fit int64, but no conv weight of (2^56, 1, 3, 3) floats
     * (2^61 bytes, more than any address space) can be made: the
     * constructor's error, under this function's name */
    cfg.image_size = 0;
    cfg.width = (int64_t)1 << 56;
    mft_clear_error();
    CHECK(mft_nn_fashion_cnn(&cfg) == NULL);
    CHECK(mft_last_error() != MFT_OK);
    CHECK_MSG(starts_with(mft_last_error_message(), "mft_nn_fashion_cnn: "), "message '%s'",
              mft_last_error_message());
    mft_clear_error();
    for (int i = 0; i < MFT_FASHION_CNN_MAX_LAYERS; i++) CHECK(l[i] == sentinel);
    CHECK_EQ_I(mft_live_tensors(), live0);
}

/* Every allocation of a build (CHANNELS_LAST with batch_norm: the most
 * work) failing in turn: NULL, NOMEM under this function's name, the layers
 * array untouched, no tensor and no block left; then a build succeeds. */
static void test_allocation_failures(void) {
    const int64_t live0 = mft_live_tensors(), storages0 = mft_live_storages();
    mft_module *sentinel = (mft_module *)&live0;
    mft_module *l[MFT_FASHION_CNN_MAX_LAYERS];
    const mft_fashion_cnn_config cfg = {.in_channels = 3,
                                        .image_size = 8,
                                        .width = 4,
                                        .batch_norm = true,
                                        .format = MFT_CHANNELS_LAST,
                                        .layers = l};
    fa_install();
    long long k = 1, failures = 0;
    for (;; k++) {
        for (int i = 0; i < MFT_FASHION_CNN_MAX_LAYERS; i++) l[i] = sentinel;
        mft_clear_error();
        fa_arm(k);
        mft_module *m = mft_nn_fashion_cnn(&cfg);
        const long long injected = g_fa.injected;
        fa_arm(0);
        if (m) {
            CHECK_EQ_I(injected, 0); /* a failure absorbed would be a surprise */
            mft_module_free(m);
            break;
        }
        failures++;
        CHECK_MSG(mft_last_error() == MFT_ERR_NOMEM &&
                      starts_with(mft_last_error_message(), "mft_nn_fashion_cnn: "),
                  "allocation %lld: %s (%s)", k, mft_last_error_message(),
                  mft_status_str(mft_last_error()));
        for (int i = 0; i < MFT_FASHION_CNN_MAX_LAYERS; i++) CHECK(l[i] == sentinel);
        CHECK_EQ_I(mft_live_tensors(), live0);
        CHECK_EQ_I(mft_live_storages(), storages0);
        CHECK_MSG(g_fa.live == 0, "allocation %lld failing: %lld blocks left", k, g_fa.live);
        if (k > 10000) break; /* never reached: a build makes a few dozen */
    }
    mft_set_allocator(NULL);
    mft_clear_error();
    /* 12 layers, 12 parameters, 6 buffers, the sequential's child array and
     * the format conversion: dozens of allocations, each one failed once */
    CHECK_MSG(failures >= 30, "only %lld allocations failed in turn", failures);
}

int main(void) {
    RUN(test_default_structure);
    RUN(test_small_batchnorm_structure);
    RUN(test_seeds);
    RUN(test_forward_default);
    RUN(test_forward_channels_last_model);
    RUN(test_forward_blocked_model);
    RUN(test_errors);
    RUN(test_allocation_failures);
    TEST_MAIN_END();
}
