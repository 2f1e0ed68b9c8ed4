/* nn/module_internal.h — the private struct of mft_module and what the nn/
 * files share about it: the kinds, the fixed name buffers, the constructors'
 * common steps, the forward of one module (nn/layers.c) and of a container's
 * child (nn/compose.c). Included by nn/ only.
 *
 * A module is a node of a tree (docs/nn.md): leaves hold parameters and
 * buffers, containers (sequential, residual, custom) hold children in
 * child[0..n), each with its name in the parent ("0", "body", the user's
 * names). Everything that walks a model (free, listing, set_training,
 * to_format, describe, the undo record of a forward) walks child[], so a new
 * container kind only says how its forward combines its children. */
#ifndef MFT_NN_MODULE_INTERNAL_H
#define MFT_NN_MODULE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include "internal.h"
#include "mft/nn.h"

/* A child's name in its parent: at most 63 characters. */
#define MFT__NN_NAME_LEN 64
/* A parameter's dotted path: at most 255 characters (mft_tensor_set_name's limit). */
#define MFT__NN_PATH_LEN 256
/* The kind label pushed on the module path ("Conv2d(1, 16, 3x3)"). */
#define MFT__NN_LABEL_LEN 96

typedef enum {
    MFT__NN_CONV2D,
    MFT__NN_LINEAR,
    MFT__NN_BATCH_NORM,
    MFT__NN_GROUP_NORM,
    MFT__NN_LAYER_NORM,
    MFT__NN_RELU,
    MFT__NN_MAX_POOL2D,
    MFT__NN_FLATTEN,
    MFT__NN_DROPOUT,
    MFT__NN_ADAPTIVE_AVG_POOL2D,
    MFT__NN_SEQUENTIAL,
    MFT__NN_RESIDUAL,
    MFT__NN_CUSTOM
} mft__nn_kind;

struct mft_module {
    mft__nn_kind kind;
    bool training;
    /* the tree: the container that owns this module (NULL for a root) and
     * this module's name in it ("" for a root) */
    mft_module *parent;
    char name[MFT__NN_NAME_LEN];
    char label[MFT__NN_LABEL_LEN]; /* kind label: "BatchNorm2d(16)", "Residual" */
    /* parameters (weight, bias) and buffers (running_mean, running_var,
     * num_batches_tracked); NULL when absent. Their dotted paths from the
     * root ("1.body.0.weight"), also set as the tensors' names. */
    mft_tensor *param[2];
    mft_tensor *buf[3];
    char pname[2][MFT__NN_PATH_LEN];
    char bname[3][MFT__NN_PATH_LEN];
    /* conv / pool / linear geometry; adaptive pool: kernel = output size */
    int64_t in, out, kernel[2], stride[2], padding[2], dilation[2], groups;
    /* norms */
    double eps, momentum;
    int nnorm;
    int64_t nshape[MFT_MAX_DIMS];
    /* flatten */
    int start_dim, end_dim;
    /* dropout */
    double p;
    uint64_t seed, forwards;
    /* containers: children in order */
    int n;
    mft_module **child;
    bool no_fuse;     /* mft_module_set_fusion(l, false) */
    bool relu;        /* residual: relu after the add */
    /* custom */
    mft_module_forward_fn fwd;
    void *ctx;
    void (*ctx_free)(void *ctx);
    /* error path of the container constructors (mft__nn_free_unowned) */
    bool doomed;
    mft_module *next_doomed;
};

/* nn/layers.c ------------------------------------------------------------- */
/* A zeroed module of kind (training mode) with its label set from fmt, or
 * NULL (NOMEM naming fn). */
mft_module *mft__nn_new(const char *fn, mft__nn_kind kind, const char *label_fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Runs l on x, scope suspended: a plain new reference or NULL (error set).
 * Marks l as running on this thread for the duration (a custom forward
 * calling mft_module_forward on its own child is told apart by it). */
mft_tensor *mft__nn_run(mft_module *l, const mft_tensor *x);
/* The module whose forward runs innermost on this thread (NULL outside). */
mft_module *mft__nn_running(void);

/* nn/compose.c ------------------------------------------------------------ */
/* Runs child c of a running container on x: pushes c's name and label on the
 * module path, runs it, labels a failure with the path (Note [Layer errors]
 * in nn/compose.c), pops. A plain new reference or NULL. */
mft_tensor *mft__nn_run_child(mft_module *c, const mft_tensor *x);
/* Forward of a container (sequential, residual, custom), scope suspended. */
mft_tensor *mft__nn_container_forward(mft_module *l, const mft_tensor *x);
/* Sets the dotted names of l's tensors (and its children's) under prefix
 * ("" for a root, "1.body." inside): pname/bname and the tensors' names.
 * MFT_ERR_NOMEM (naming fn) if a tensor name cannot be stored. */
mft_status mft__nn_set_names(const char *fn, mft_module *l, const char *prefix);

#endif
