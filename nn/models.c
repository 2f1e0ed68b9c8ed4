/* nn/models.c — ready-made models of mft/nn.h, built from the public layer
 * constructors of nn/layers.c. mft_nn_fashion_cnn: the small Fashion-MNIST
 * CNN (the model of the PyTorch anchor examples/fashion_mnist_torch.py) that
 * examples/fashion_mnist.c trains, examples/format_tour.c walks layer by
 * layer, bench/bench_profile.c times and tests/profile/test_scenarios.c counts the
 * conversions of. The configuration is validated before anything is
 * allocated; the layers are made in order, each affine one with its own
 * seed (so the parameters do not depend on what else is built), handed to
 * mft_nn_sequential_named under PyTorch-style names (conv1, bn1, ..., fc2,
 * so the parameters are "conv1.weight" ... "fc2.bias"), and the model is moved to the requested memory format.
 * Every failure frees what was made and names mft_nn_fashion_cnn. */
#include <stdint.h>
#include "internal.h"
#include "mft/nn.h"

/* conv1 width: 32 channels, as PyTorch's reference model */
#define FASHION_DEFAULT_WIDTH 32
#define FASHION_DEFAULT_IMAGE 28
#define FASHION_CLASSES       10

/* Frees layers[0..n) (none is owned by a container yet). */
static void fashion_free(int n, mft_module **layers) {
    for (int i = 0; i < n; i++) mft_module_free(layers[i]);
}

mft_module *mft_nn_fashion_cnn(const mft_fashion_cnn_config *cfg) {
    static const char fn[] = "mft_nn_fashion_cnn";
    if (!cfg) {
        mft__set_error(MFT_ERR_NULL, "%s: argument 'cfg' is NULL", fn);
        return NULL;
    }
    if (cfg->format != MFT_CONTIGUOUS && cfg->format != MFT_CHANNELS_LAST &&
        cfg->format != MFT_NCHW8C && cfg->format != MFT_NCHW16C) {
        mft__set_error(MFT_ERR_FORMAT,
                       "%s: format must be CONTIGUOUS, CHANNELS_LAST, NCHW8C or NCHW16C, got %s", fn,
                       mft_format_name(cfg->format));
        return NULL;
    }
    const int64_t c_in = cfg->in_channels ? cfg->in_channels : 1;
    const int64_t img = cfg->image_size ? cfg->image_size : FASHION_DEFAULT_IMAGE;
    const int64_t w = cfg->width ? cfg->width : FASHION_DEFAULT_WIDTH;
    if (c_in < 0 || w < 0 || img < 4) {
        mft__set_error(MFT_ERR_INVALID,
                       "%s: invalid in_channels=%lld width=%lld image_size=%lld (in_channels and "
                       "width must be >= 0, image_size 0 or >= 4; 0 means the default)",
                       fn, (long long)cfg->in_channels, (long long)cfg->width,
                       (long long)cfg->image_size);
        return NULL;
    }
    /* linear1: (2w * q * q) -> 4w features, q = floor(img / 4) after two 2x2 pools */
    const int64_t q = img / 4;
    if (w > INT64_MAX / 4 || q > INT64_MAX / q || 2 * w > INT64_MAX / (q * q)) {
        mft__set_error(MFT_ERR_INVALID,
                       "%s: width=%lld with image_size=%lld overflows the feature count", fn,
                       (long long)w, (long long)img);
        return NULL;
    }
    const int64_t k3[2] = {3, 3}, one[2] = {1, 1}, k2[2] = {2, 2};
    const int64_t feats = 2 * w * q * q;
    const double eps = 1e-5, momentum = 0.1;
    const uint64_t seed = cfg->seed;
    mft_module *l[MFT_FASHION_CNN_MAX_LAYERS];
    const char *names[MFT_FASHION_CNN_MAX_LAYERS];
    int n = 0;
    /* Each step makes one layer under its name; stop at the first failure.
     * The order, the names (PyTorch's state_dict names of the anchor model:
     * "conv1.weight", "bn1.running_mean", "fc2.bias") and the seeds (seed + 1
     * .. seed + 4 for the four affine layers) are part of the documented
     * contract: the same cfg gives the same parameters. */
#define FASHION_ADD(nm, expr)                                                                      \
    do {                                                                                           \
        names[n] = (nm);                                                                           \
        if (!(l[n] = (expr))) goto fail;                                                           \
        n++;                                                                                       \
    } while (0)
    FASHION_ADD("conv1", mft_nn_conv2d(c_in, w, k3, one, one, one, 1, true, seed + 1));
    if (cfg->batch_norm) FASHION_ADD("bn1", mft_nn_batch_norm2d(w, eps, momentum));
    FASHION_ADD("relu1", mft_nn_relu());
    FASHION_ADD("pool1", mft_nn_max_pool2d(k2, k2));
    FASHION_ADD("conv2", mft_nn_conv2d(w, 2 * w, k3, one, one, one, 1, true, seed + 2));
    if (cfg->batch_norm) FASHION_ADD("bn2", mft_nn_batch_norm2d(2 * w, eps, momentum));
    FASHION_ADD("relu2", mft_nn_relu());
    FASHION_ADD("pool2", mft_nn_max_pool2d(k2, k2));
    FASHION_ADD("flatten", mft_nn_flatten(1, 3));
    FASHION_ADD("fc1", mft_nn_linear(feats, 4 * w, true, seed + 3));
    FASHION_ADD("relu3", mft_nn_relu());
    FASHION_ADD("fc2", mft_nn_linear(4 * w, FASHION_CLASSES, true, seed + 4));
#undef FASHION_ADD
    /* Owns l[0..n) from here on, also when it fails (it frees them then). */
    mft_module *model = mft_nn_sequential_named(n, l, names);
    if (!model) {
        mft__relabel_error(fn);
        return NULL;
    }
    /* NCHW16C: conv weights blocked (conv1 Ohwi16o, conv2 OIhw16i16o), read
     * in place by the nChw16c kernels; conv1 turns a plain batch into
     * nChw16c (docs/spec.md §7.10). NCHW8C: no native kernel reads a
     * blocked weight with nChw8c activations, so the weights stay plain. */
    const mft_format pfmt = cfg->format == MFT_CHANNELS_LAST ? MFT_CHANNELS_LAST
                            : cfg->format == MFT_NCHW16C     ? MFT_NCHW16C
                                                             : MFT_CONTIGUOUS;
    if (mft_module_to_format(model, pfmt) != MFT_OK) {
        mft__relabel_error(fn);
        mft_module_free(model);
        return NULL;
    }
    if (cfg->layers)
        for (int i = 0; i < MFT_FASHION_CNN_MAX_LAYERS; i++) cfg->layers[i] = i < n ? l[i] : NULL;
    return model;
fail:
    mft__relabel_error(fn);
    fashion_free(n, l);
    return NULL;
}
