/* mft/nn.h — the nn toolkit: modules (PyTorch's nn.Module: a layer with its
 * parameters, or a container of modules) made by the mft_nn_* constructors
 * (conv2d, linear, batch/group/layer norm, relu, max_pool2d,
 * adaptive/global avg pool, flatten, dropout; the containers sequential,
 * residual and custom) with PyTorch's default initialisation, and a
 * ready-made model built from them (mft_nn_fashion_cnn), all used through
 * the mft_module_* functions (forward, training mode, fusion,
 * parameter/buffer listing under dotted names, children, moving a model to a
 * memory format or dtype, description); and the optimisers SGD, Adam, AdamW
 * with a step learning-rate schedule. docs/nn.md walks through the module
 * API with a ResNet.
 *
 * Ownership: a module or optimiser is owned by the caller and freed with
 * mft_module_free / mft_optimizer_free; a container owns its children (given
 * to its constructor, which takes them whether it succeeds or not).
 * Parameter, buffer and state tensors are owned by their module / optimiser:
 * the pointers the listing functions return are BORROWED (valid until the
 * owner is freed). Constructors return NULL with the thread-local error set
 * on failure. Modules and optimisers create their tensors outside any open
 * scope (mft_scope_begin), so a scope never releases a parameter. */
#ifndef MFT_NN_H
#define MFT_NN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "mft/export.h"
#include "mft/status.h"
#include "mft/tensor.h"
#include "mft/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ modules
 * Note [Module tree]
 * A model is a tree of modules: leaves (conv2d, batch_norm2d, relu, ...) and
 * containers (sequential, residual, custom) that own their children. Every
 * child has a name in its parent: a sequential's are "0", "1", ...; a
 * residual's "body" and "shortcut"; a custom module's the names it was given.
 * Parameters and buffers are named by their dotted path from the root, as
 * PyTorch's state_dict: "weight" for a lone layer, "3.bias" in a
 * sequential, "1.body.0.weight" deeper; each tensor also carries that path
 * as its name (mft_tensor_name), renewed whenever its subtree is put into a
 * container. While a forward runs, each container pushes its child's name
 * and kind label ("Conv2d(1, 16, 3x3)", "BatchNorm2d(16)", "ReLU",
 * "Residual", a custom module's kind) on the thread's module path
 * (mft_module_path_push in mft/tensor.h) and pops it after, so events,
 * profile rows and errors can say where they happened. */
typedef struct mft_module mft_module; /* opaque, owned by the caller (mft_module_free) */

/* Parameters are initialised as PyTorch's defaults from a seeded generator:
 * conv2d / linear weight and bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in))
 * (fan_in = in_ch/groups*kH*kW or in_features; PyTorch's kaiming_uniform
 * with a = sqrt(5) gives that bound for the weight). The same seed gives the
 * same parameters. F32 parameters, CONTIGUOUS until mft_module_to_format.
 * Parameters are leaves with requires_grad set.
 * conv2d: weight (out_ch, in_ch/groups, kH, kW), bias (out_ch); stride,
 * padding, dilation NULL mean 1, 0, 1. Errors (MFT_ERR_INVALID): non-positive
 * channels / kernel / groups, groups not dividing both channel counts.
 * Kind label "Conv2d(in, out, kHxkW)" (", stride sHxsW" when not 1). */
MFT_API mft_module *mft_nn_conv2d(int64_t in_ch, int64_t out_ch, const int64_t kernel[2],
                                    const int64_t stride[2], const int64_t padding[2],
                                    const int64_t dilation[2], int64_t groups, bool bias,
                                    uint64_t seed);
/* weight (out_features, in_features), bias (out_features). "Linear(in, out)". */
MFT_API mft_module *mft_nn_linear(int64_t in_features, int64_t out_features, bool bias,
                                    uint64_t seed);
/* weight 1, bias 0 (C); buffers running_mean 0, running_var 1 (C) and
 * num_batches_tracked (I64, 1 element, incremented per training forward).
 * Training: batch statistics, running stats updated with momentum (0..1).
 * "BatchNorm2d(C)". */
MFT_API mft_module *mft_nn_batch_norm2d(int64_t channels, double eps, double momentum);
/* weight 1, bias 0 (channels); groups must divide channels. "GroupNorm(G, C)". */
MFT_API mft_module *mft_nn_group_norm(int64_t groups, int64_t channels, double eps);
/* weight 1, bias 0 of normalized_shape (nnorm dims, 1..MFT_MAX_DIMS).
 * "LayerNorm([d0,d1])". */
MFT_API mft_module *mft_nn_layer_norm(int nnorm, const int64_t *normalized_shape, double eps);
/* "ReLU". */
MFT_API mft_module *mft_nn_relu(void);
/* stride NULL means stride = kernel (PyTorch's default). "MaxPool2d(kHxkW)". */
MFT_API mft_module *mft_nn_max_pool2d(const int64_t kernel[2], const int64_t stride[2]);
/* PyTorch's AdaptiveAvgPool2d((out_h, out_w)): mft_adaptive_avg_pool2d
 * (mft/pool.h) of an (N, C, H, W) input gives (N, C, out_h, out_w), in the
 * input's format. No parameters. Errors: out_h or out_w < 1
 * (MFT_ERR_INVALID). "AdaptiveAvgPool2d(out_hxout_w)". */
MFT_API mft_module *mft_nn_adaptive_avg_pool2d(int64_t out_h, int64_t out_w);
/* The global average pool of ResNet's head: exactly
 * mft_nn_adaptive_avg_pool2d(1, 1) ((N, C, H, W) -> (N, C, 1, 1); follow it
 * with mft_nn_flatten(1, 3) for (N, C)). */
MFT_API mft_module *mft_nn_global_avg_pool2d(void);
/* "Flatten(start, end)". */
MFT_API mft_module *mft_nn_flatten(int start_dim, int end_dim);
/* p in [0, 1]. The seed of forward k (k = 0, 1, ... training forwards) is
 * seed + k, so successive batches get different masks. Identity in eval.
 * "Dropout(p)". */
MFT_API mft_module *mft_nn_dropout(double p, uint64_t seed);

/* ------------------------------------------------------------------ containers
 * The three take ownership of the modules they are given, also when they
 * fail (then every given module that no other container owns is freed, and
 * a custom module's ctx_free(ctx) is called). Errors common to the three:
 * a NULL module (MFT_ERR_NULL; a NULL that comes from a failed constructor
 * keeps that constructor's error), a module already owned by a container or
 * given twice (MFT_ERR_INVALID), a parameter's dotted name that would pass
 * 255 characters (MFT_ERR_INVALID), MFT_ERR_NOMEM. */

/* Runs modules[0..n) in order ("Sequential"); children named "0".."n-1". */
MFT_API mft_module *mft_nn_sequential(int n, mft_module *const *modules);
/* The same container with its children named names[0..n) (PyTorch's
 * nn.Sequential(OrderedDict([("conv1", ...), ...]))): parameters are then
 * "conv1.weight" instead of "0.weight". Runs, fuses and describes exactly as
 * mft_nn_sequential; names NULL means "0".."n-1". Errors: those common to
 * the containers, and a NULL name (MFT_ERR_NULL), an empty / longer than 63
 * characters / dotted / repeated name (MFT_ERR_INVALID, naming it). */
MFT_API mft_module *mft_nn_sequential_named(int n, mft_module *const *modules,
                                            const char *const *names);

/* PyTorch's residual block ("Residual"):
 *   y = body(x) + shortcut(x)         (relu false)
 *   y = relu(body(x) + shortcut(x))   (relu true: torchvision's BasicBlock)
 * with shortcut NULL meaning the identity (y = body(x) + x). Children
 * "body" and "shortcut" (absent for the identity). body(x) and
 * shortcut(x) must have the same sizes (else the add's MFT_ERR_SHAPE,
 * labelled with the residual's path). The sum's format follows mft_add's
 * rule (docs/spec.md §4): channels_last branches give a channels_last sum.
 * Errors: body NULL (MFT_ERR_NULL). Beware: a shortcut constructor that
 * failed returns NULL, which here means the identity: check it first. */
MFT_API mft_module *mft_nn_residual(mft_module *body, mft_module *shortcut, bool relu);

/* Note [Custom forward]
 * The forward of a user-defined block: computes self's output from x (borrowed)
 * with any mft ops and its children, run as
 *   mft_module_forward(mft_module_child(self, i), h)
 * or mft_module_child_by_name(self, "conv"); a child run so gets its name
 * pushed on the module path and its errors labelled (Note [Layer errors] in
 * nn/compose.c). It runs inside a scope opened for the call (mft_scope_begin),
 * so every tensor it makes is released when it returns: it releases nothing
 * itself and returns a BORROWED result (one it made, x itself, or one held
 * in ctx); mft keeps its own reference to it. A scope it opens must be
 * closed before it returns. It returns NULL on failure, with the error of the
 * failing call in place (NULL with no error set becomes MFT_ERR_INVALID).
 * mft_module_training(self) says whether the model is in training mode.
 * Running self, or a module that contains it, from inside is refused
 * (MFT_ERR_INVALID). The tape records its ops like any others'. */
typedef mft_tensor *(*mft_module_forward_fn)(mft_module *self, const mft_tensor *x, void *ctx);

/* A user-defined block with the kind label `kind` (1-95 characters, e.g.
 * "SEBlock"): forward (Note [Custom forward]) over children[0..n) named
 * names[0..n) (each 1-63 characters, no '.', distinct; names NULL means
 * "0".."n-1"); n may be 0 (a parameter-free function). ctx is passed to every
 * forward; ctx_free(ctx) (may be NULL) is called once when the module is
 * freed, or at once if the constructor fails. Parameters, buffers,
 * training mode, fusion, to_format / to_dtype, describe and free recurse
 * into the children like every container's. Errors: kind or forward NULL
 * (MFT_ERR_NULL), kind empty or too long, a NULL name (MFT_ERR_NULL), an
 * empty / too long / dotted / repeated name (MFT_ERR_INVALID), and the
 * common ones above. */
MFT_API mft_module *mft_nn_custom(const char *kind, int n, mft_module *const *children,
                                  const char *const *names, mft_module_forward_fn forward,
                                  void *ctx, void (*ctx_free)(void *ctx));

/* Children of a container (0 for a leaf or NULL m). */
MFT_API int mft_module_num_children(const mft_module *m);
/* Child i (BORROWED, owned by m). Errors: m NULL (MFT_ERR_NULL), i outside
 * 0..n-1 (MFT_ERR_INVALID); NULL then. */
MFT_API mft_module *mft_module_child(const mft_module *m, int i);
/* The descendant at a dotted path of names ("body", "1.body.0", as PyTorch's
 * get_submodule), BORROWED. Errors: NULL arguments (MFT_ERR_NULL); an empty
 * path, a name no child has (MFT_ERR_INVALID, naming it); NULL then. */
MFT_API mft_module *mft_module_child_by_name(const mft_module *m, const char *path);
/* m's name in its parent ("1", "body"); "" for a module no container owns
 * (and for NULL). Borrowed, valid while m lives. */
MFT_API const char *mft_module_name(const mft_module *m);
/* m's kind label, the one pushed on the module path and used in error
 * prefixes ("Conv2d(1, 16, 3x3)", "Residual", a custom kind); "" for NULL. */
MFT_API const char *mft_module_label(const mft_module *m);

/* ------------------------------------------------------------------ using a module */
/* Forward pass: the layer's op(s) applied to x, so it is recorded on an open
 * tape like the ops themselves. Output format: that of the ops (docs/spec.md §4).
 * Returns a NEW reference (owned by the innermost scope if one is open);
 * intermediates of a container are released inside. A NULL l or x
 * propagates (an earlier error, such as a failed mft_module_child_by_name,
 * is kept; else MFT_ERR_NULL).
 * Errors are those of the ops (the message names the failing op); when a
 * module inside l fails, the message starts with ONE prefix naming that
 * innermost module by its dotted path from l and its kind label, after the
 * name of this function as every message starts (Note [Layer errors] in
 * nn/compose.c):
 *   "mft_module_forward: layer 1.4 BatchNorm2d(16): mft_batch_norm: ..."
 * (a container's own op failing — a residual's add — names the container).
 * All or nothing: on failure the running statistics and draw counters of
 * l's batch norms and dropouts are as before the call. The thread's module
 * path is as before the call, whatever happened. */
MFT_API mft_tensor *mft_module_forward(mft_module *l, const mft_tensor *x);
/* Fusion (on by default), recursively: a sequential runs a relu layer
 * directly followed by a max_pool2d layer as one mft_relu_max_pool2d
 * (mft/pool.h): equal values and gradients, one tape node
 * "relu_max_pool2d" instead of two, and the relu-sized intermediate is never
 * written (on the module path: the relu's name, kind "ReLU+MaxPool2d(2x2)");
 * and a flatten layer over every dim after N directly followed by a linear
 * layer as one mft_flatten_linear (mft/linalg.h): one tape node
 * "flatten_linear", and an NHWC or nChw16c / nChw8c activation is not
 * copied into the flattened order (values equal within float rounding; kind
 * "Flatten(1, 3)+Linear(3136, 128)"). Off: every layer runs its own op (to
 * see or time them apart). */
MFT_API void mft_module_set_fusion(mft_module *l, bool on);
MFT_API bool mft_module_fusion(const mft_module *l);
/* Training (default) or eval mode, recursively (batch_norm, dropout, and
 * what a custom forward reads with mft_module_training). */
MFT_API void mft_module_set_training(mft_module *l, bool training);
MFT_API bool mft_module_training(const mft_module *l);
/* Like PyTorch's model.to(memory_format=fmt): every 4-D parameter (conv
 * weights) is converted to fmt IN PLACE — the mft_tensor objects stay the
 * same (an optimiser built before still points at them), only their storage,
 * strides and tag change; an existing .grad is kept as it is. Other
 * parameters and buffers are unchanged. fmt: CONTIGUOUS, CHANNELS_LAST or
 * NCHW16C (else MFT_ERR_FORMAT). NCHW16C makes each conv weight (O, I, kh,
 * kw) a blocked weight the nChw16c conv2d reads in place (docs/spec.md
 * §7.10): oneDNN's Ohwi16o when I < 16 (a first layer: no pad lanes of I),
 * else OIhw16i16o; a conv with such a weight gives an nChw16c result, from
 * a plain input too. On failure (NOMEM) no parameter has changed. */
MFT_API mft_status mft_module_to_format(mft_module *l, mft_format fmt);
/* Like PyTorch's model.to(dtype) (model.double()): every F32/F64 parameter
 * and buffer (not num_batches_tracked) becomes dtype IN PLACE, keeping its
 * layout and its mft_tensor object; an existing .grad is dropped (its dtype
 * would differ). Build optimisers after. For gradchecking a model in F64
 * (mft_gradcheck). dtype: F32 or F64 (else MFT_ERR_DTYPE). On failure
 * (NOMEM) nothing has changed. */
MFT_API mft_status mft_module_to_dtype(mft_module *l, mft_dtype dtype);
/* Borrowed parameter pointers and their dotted names (Note [Module tree]:
 * "weight", "bias" for a single layer; "0.weight", "3.bias" inside a
 * sequential, "1.body.0.weight" deeper) in registration order — a module's
 * own first, then its children's in order, as PyTorch's named_parameters —
 * into params[0..max) / names[0..max) (either array may be NULL). Names are
 * valid until the module is freed or put into a container. Returns the
 * total count (may exceed max; pass max 0 to count); 0 for NULL l. */
MFT_API int mft_module_parameters(const mft_module *l, mft_tensor **params, const char **names,
                                 int max);
/* Buffers likewise: running_mean, running_var (F32, C) and
 * num_batches_tracked (I64, 1 element) of every batch_norm
 * ("3.running_mean", "1.body.1.num_batches_tracked"). */
MFT_API int mft_module_buffers(const mft_module *l, mft_tensor **bufs, const char **names, int max);
/* Total number of elements of all parameters. */
MFT_API int64_t mft_module_num_parameters(const mft_module *l);
/* The tree, one line per module, each child indented two spaces under its
 * parent and prefixed with its name:
 *   Sequential(2 layers, 2480 parameters)
 *     0: Conv2d(1, 16, kernel=3x3, stride=1x1, padding=1x1, ..., weight CONTIGUOUS)
 *     1: Residual(y = relu(body(x) + x), 2336 parameters)
 *       body: Sequential(2 layers, 2336 parameters)
 *         0: Conv2d(16, 16, kernel=3x3, ...)
 *         1: BatchNorm2d(16, eps=1e-05, momentum=0.1)
 * (a custom module: "<kind>(custom, N children, P parameters)"; the module
 * described is printed without its name). As
 * snprintf: writes at most len bytes (NUL-terminated when len > 0) and
 * returns the length the full text needs. */
MFT_API size_t mft_module_describe(const mft_module *l, char *buf, size_t len);
/* Frees the module, its children and its parameters (tensors still retained
 * elsewhere stay alive), and calls a custom module's ctx_free. NULL is a
 * no-op. A module owned by a container is freed with its root only. */
MFT_API void mft_module_free(mft_module *l);

/* ------------------------------------------------------------------ models */
/* The most layers mft_nn_fashion_cnn makes (with batch_norm). */
#define MFT_FASHION_CNN_MAX_LAYERS 12

/* Configuration of mft_nn_fashion_cnn. Zero-initialise it
 * (mft_fashion_cnn_config c = {0};) and set what differs: every field's 0
 * means its default. */
typedef struct mft_fashion_cnn_config {
    int64_t in_channels; /* input channels C; 0 means 1 (grey images) */
    int64_t image_size;  /* input height = width S; 0 means 28; else >= 4 */
    int64_t width;       /* channels W of the first conv; 0 means 32 */
    bool batch_norm;     /* a batch_norm2d (eps 1e-5, momentum 0.1) after each conv */
    mft_format format;   /* CONTIGUOUS (0), CHANNELS_LAST or NCHW16C: the model
                          * is moved there (mft_module_to_format) before it is
                          * returned (NCHW16C: conv weights Ohwi16o / OIhw16i16o,
                          * so a plain NCHW batch gives nChw16c activations);
                          * NCHW8C: the model is for blocked activations and
                          * keeps CONTIGUOUS parameters */
    uint64_t seed;       /* the four affine layers get seed + 1 .. seed + 4 */
    /* Optional output: when non-NULL, on success layers[0..n) receive the
     * model's n layers in order (BORROWED: owned by the model, valid until it
     * is freed; to run or inspect them one by one) and layers[n..
     * MFT_FASHION_CNN_MAX_LAYERS) NULL. Untouched on failure. */
    mft_module **layers;
} mft_fashion_cnn_config;

/* The small Fashion-MNIST CNN of examples/fashion_mnist.c (PyTorch anchor:
 * examples/fashion_mnist_torch.py) as one mft_nn_sequential_named, in this
 * order, each layer under the name before its colon (Q = floor(S / 4)):
 *   conv1: conv2d(C, W, 3x3, stride 1, padding 1, bias; seed + 1)
 *   [bn1: batch_norm2d(W)]
 *   relu1: relu, pool1: max_pool2d(2x2, stride 2)
 *   conv2: conv2d(W, 2W, 3x3, stride 1, padding 1, bias; seed + 2)
 *   [bn2: batch_norm2d(2W)]
 *   relu2: relu, pool2: max_pool2d(2x2, stride 2)
 *   flatten: flatten(1, 3)
 *   fc1: linear(2W*Q*Q, 4W, bias; seed + 3), relu3: relu
 *   fc2: linear(4W, 10, bias; seed + 4)
 * 10 layers, 12 with batch_norm (the [bracketed] ones). The parameters and
 * buffers carry PyTorch's state_dict names of the same model: "conv1.weight",
 * "conv1.bias", ["bn1.weight", "bn1.bias", "bn1.running_mean",
 * "bn1.running_var", "bn1.num_batches_tracked",] "conv2.weight", ...,
 * "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias" (docs/spec.md §8.4).
 * With the defaults, an (N, 1, 28, 28) input gives
 * (N, 32, 28, 28) after conv1, (N, 32, 14, 14) after the first pool,
 * (N, 64, 14, 14) after conv2, (N, 64, 7, 7) after the second pool,
 * (N, 3136) after flatten, (N, 128) after linear1 and (N, 10) logits.
 * Parameters: conv1 9CW + W, conv2 18W^2 + 2W, linear1 8W^2*Q^2 + 4W,
 * linear2 40W + 10, with batch_norm 2W + 4W more: 421,642 with the
 * defaults (320 + 18,496 + 401,536 + 1,290), 421,834 with batch_norm.
 * Same initialisation as the constructors (so the same cfg gives the same
 * parameters, whatever else runs). Fusion is on (mft_module_set_fusion);
 * training mode. The activations follow the ops' format rules (docs/spec.md §4): a
 * CHANNELS_LAST input, or CHANNELS_LAST weights, give CHANNELS_LAST conv,
 * relu and pool activations.
 * Errors (NULL returned, nothing leaked, the message names
 * mft_nn_fashion_cnn): NULL cfg (MFT_ERR_NULL); format not CONTIGUOUS,
 * CHANNELS_LAST, NCHW8C or NCHW16C (MFT_ERR_FORMAT); negative in_channels or width,
 * image_size in 1..3 or negative, a feature count overflowing int64
 * (MFT_ERR_INVALID); those of the layer constructors, mft_nn_sequential
 * and mft_module_to_format (e.g. MFT_ERR_NOMEM). */
MFT_API mft_module *mft_nn_fashion_cnn(const mft_fashion_cnn_config *cfg);

/* ------------------------------------------------------------------ optimisers
 * Semantics of torch.optim 1.13 (single-tensor path), per parameter p with
 * gradient g (parameters whose grad is NULL are skipped):
 *   SGD:   g += wd*p; if momentum: buf = g on the parameter's first step,
 *          else buf = momentum*buf + (1-dampening)*g; g = nesterov ?
 *          g + momentum*buf : buf; p -= lr*g.
 *   Adam:  g += wd*p (L2); m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g^2;
 *          p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps).
 *   AdamW: p *= 1 - lr*wd (decoupled), then Adam without the L2 term.
 * A step runs with grad mode off and updates p in place (its version bumps)
 * in one fused pass per parameter; p keeps its strides (a channels_last
 * parameter stays channels_last). F32 and F64 parameters. */
typedef struct mft_optimizer mft_optimizer;
typedef struct mft_sgd_opts {
    double lr, momentum, dampening, weight_decay;
    bool nesterov;
} mft_sgd_opts;
typedef struct mft_adam_opts {
    double lr, beta1, beta2, eps, weight_decay;
} mft_adam_opts;

/* params: n >= 1 distinct floating tensors (retained by the optimiser).
 * Errors: NULL params / opts / entry (MFT_ERR_NULL), n < 1 ("empty parameter
 * list"), a non-floating parameter (MFT_ERR_DTYPE), and as PyTorch
 * (MFT_ERR_INVALID): lr < 0, momentum < 0, weight_decay < 0, nesterov
 * without momentum > 0 and dampening == 0; Adam: eps < 0, betas outside
 * [0, 1). State (zeros, in each parameter's layout) is allocated here. */
MFT_API mft_optimizer *mft_sgd_new(int n, mft_tensor *const *params, const mft_sgd_opts *o);
MFT_API mft_optimizer *mft_adam_new(int n, mft_tensor *const *params, const mft_adam_opts *o);
MFT_API mft_optimizer *mft_adamw_new(int n, mft_tensor *const *params, const mft_adam_opts *o);
/* One update of every parameter that has a grad. Errors: NULL o, a grad
 * whose dtype/sizes differ from its parameter's (nothing updated then). */
MFT_API mft_status mft_optimizer_step(mft_optimizer *o);
/* Drops every parameter's grad (set_to_none). */
MFT_API void mft_optimizer_zero_grad(mft_optimizer *o);
MFT_API double mft_optimizer_lr(const mft_optimizer *o);
/* Sets the learning rate for the next steps. Errors: MFT_ERR_NULL,
 * MFT_ERR_INVALID (lr negative, NaN or infinite; the rate is unchanged). */
MFT_API mft_status mft_optimizer_set_lr(mft_optimizer *o, double lr);
/* State tensors for checkpoints, BORROWED, with names, in a fixed order that
 * is the same before and after the first step: "step" (F64, 1 element:
 * optimizer steps taken), then per parameter i: "i.step" (F64, 1 element:
 * steps that updated parameter i), and "i.momentum_buffer" (SGD with
 * momentum) or "i.exp_avg", "i.exp_avg_sq" (Adam/AdamW), laid out like the
 * parameter (if the parameter changes format, e.g. mft_module_to_format after
 * construction, the next step re-lays its state out in place: same tensor
 * objects). Loading a checkpoint copies into these.
 * Returns the total count (may exceed max; max 0 counts). */
MFT_API int mft_optimizer_state(const mft_optimizer *o, mft_tensor **state, const char **names,
                                int max);
/* Releases the state and the optimiser's references to the parameters. */
MFT_API void mft_optimizer_free(mft_optimizer *o);
/* StepLR: base_lr * gamma^floor(epoch / step_size) (step_size >= 1; epoch >= 0). */
MFT_API double mft_step_lr(double base_lr, int64_t step_size, double gamma, int64_t epoch);

#ifdef __cplusplus
}
#endif
#endif
