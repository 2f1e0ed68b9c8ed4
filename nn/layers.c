/* nn/layers.c — the modules of mft/nn.h that apply one op (conv2d, linear,
 * batch/group/layer norm, relu, max_pool2d, flatten, dropout,
 * adaptive_avg_pool2d): construction with PyTorch's default initialisation
 * (seeded) and their forward through the public ops (so the tape records
 * them); and what every module shares, leaf or container: the forward entry
 * point (all or nothing for the state layers keep: layer_undo), freeing,
 * training/eval mode, fusion, parameter and buffer listing under dotted
 * names, counting, description, and model.to(memory_format) /
 * model.to(dtype) done in place on the existing tensors (layer_swap).
 * The containers (sequential, residual, custom), the names of a tree and the
 * module path while a forward runs live in nn/compose.c. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "module_internal.h"

static const char *const k_pbase[2] = {"weight", "bias"};
static const char *const k_bbase[3] = {"running_mean", "running_var", "num_batches_tracked"};

mft_module *mft__nn_new(const char *fn, mft__nn_kind kind, const char *label_fmt, ...) {
    mft_module *l = mft__alloc_or_err(fn, sizeof *l, 16);
    if (!l) return NULL;
    memset(l, 0, sizeof *l);
    l->kind = kind;
    l->training = true;
    va_list ap;
    va_start(ap, label_fmt);
    vsnprintf(l->label, sizeof l->label, label_fmt, ap);
    va_end(ap);
    for (int i = 0; i < 2; i++) snprintf(l->pname[i], sizeof l->pname[i], "%s", k_pbase[i]);
    for (int i = 0; i < 3; i++) snprintf(l->bname[i], sizeof l->bname[i], "%s", k_bbase[i]);
    return l;
}

void mft_module_free(mft_module *l) {
    if (!l) return;
    for (int i = 0; i < 2; i++) mft_tensor_release(l->param[i]);
    for (int i = 0; i < 3; i++) mft_tensor_release(l->buf[i]);
    for (int i = 0; i < l->n; i++) mft_module_free(l->child[i]);
    mft__free(l->child);
    if (l->ctx_free) l->ctx_free(l->ctx);
    mft__free(l);
}

/* A new leaf's tensors get their names ("weight", "running_mean"); on
 * failure l is freed and the error names fn. */
static mft_module *layer_named(const char *fn, mft_module *l) {
    if (mft__nn_set_names(fn, l, "") != MFT_OK) {
        mft_module_free(l);
        return NULL;
    }
    return l;
}

static uint64_t nn_mix(uint64_t x) { /* splitmix64 finaliser */
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* F32 CONTIGUOUS tensor ~ U(-bound, bound) from seed; not scope-owned. */
static mft_tensor *nn_uniform(int ndim, const int64_t *sizes, double bound, uint64_t seed) {
    mft_tensor *t = mft_rand(ndim, sizes, MFT_F32, MFT_CONTIGUOUS, seed);
    if (!t) return NULL;
    float *d = mft_tensor_data(t);
    for (int64_t i = 0; i < t->numel; i++) d[i] = (float)((2.0 * (double)d[i] - 1.0) * bound);
    return t;
}

static mft_status nn_mark(mft_module *l) {
    for (int i = 0; i < 2; i++)
        if (l->param[i] && mft_tensor_set_requires_grad(l->param[i], true) != MFT_OK)
            return mft_last_error();
    return MFT_OK;
}

/* weight ~ U(+-1/sqrt(fan_in)) of wsizes, bias (if any) of (bsize) likewise;
 * fan_in is the product of wsizes[1..]. Both shapes are validated before
 * anything is allocated: absurd sizes fail at once, naming fn, instead of
 * allocating (and filling) the bias first. */
static mft_module *nn_affine(const char *fn, mft__nn_kind kind, const char *label, int wnd,
                             const int64_t *wsizes, int64_t bsize, bool bias, uint64_t seed) {
    if (mft__check_geometry(fn, wnd, wsizes, NULL, MFT_F32) != MFT_OK ||
        (bias && mft__check_geometry(fn, 1, &bsize, NULL, MFT_F32) != MFT_OK))
        return NULL;
    int64_t fan_in = 1; /* cannot overflow: the weight's element count fits */
    for (int d = 1; d < wnd; d++) fan_in *= wsizes[d];
    mft_module *l = mft__nn_new(fn, kind, "%s", label);
    if (!l) return NULL;
    double bound = fan_in > 0 ? 1.0 / sqrt((double)fan_in) : 0.0;
    mft__scope_suspend();
    l->param[0] = nn_uniform(wnd, wsizes, bound, nn_mix(seed));
    if (bias) l->param[1] = nn_uniform(1, &bsize, bound, nn_mix(seed ^ 0x5851F42D4C957F2Dull));
    mft__scope_resume();
    if (!l->param[0] || (bias && !l->param[1]) || nn_mark(l) != MFT_OK) {
        mft__relabel_error(fn);
        mft_module_free(l);
        return NULL;
    }
    return layer_named(fn, l);
}

mft_module *mft_nn_conv2d(int64_t in_ch, int64_t out_ch, const int64_t kernel[2],
                            const int64_t stride[2], const int64_t padding[2],
                            const int64_t dilation[2], int64_t groups, bool bias, uint64_t seed) {
    static const char fn[] = "mft_nn_conv2d";
    if (!kernel) {
        mft__set_error(MFT_ERR_NULL, "%s: argument 'kernel' is NULL", fn);
        return NULL;
    }
    int64_t st[2] = {1, 1}, pd[2] = {0, 0}, dl[2] = {1, 1};
    for (int i = 0; i < 2; i++) {
        if (stride) st[i] = stride[i];
        if (padding) pd[i] = padding[i];
        if (dilation) dl[i] = dilation[i];
    }
    if (in_ch <= 0 || out_ch <= 0 || groups <= 0 || kernel[0] <= 0 || kernel[1] <= 0 ||
        in_ch % groups || out_ch % groups || st[0] <= 0 || st[1] <= 0 || dl[0] <= 0 ||
        dl[1] <= 0 || pd[0] < 0 || pd[1] < 0) {
        mft__set_error(MFT_ERR_INVALID,
                       "%s: invalid configuration in_ch=%lld out_ch=%lld kernel=%lldx%lld "
                       "stride=%lldx%lld padding=%lldx%lld dilation=%lldx%lld groups=%lld",
                       fn, (long long)in_ch, (long long)out_ch, (long long)kernel[0],
                       (long long)kernel[1], (long long)st[0], (long long)st[1], (long long)pd[0],
                       (long long)pd[1], (long long)dl[0], (long long)dl[1], (long long)groups);
        return NULL;
    }
    /* the kind label: PyTorch's repr, short ("Conv2d(16, 32, 3x3, stride 2x2)") */
    char label[256], strides[64] = "";
    if (st[0] != 1 || st[1] != 1)
        snprintf(strides, sizeof strides, ", stride %lldx%lld", (long long)st[0],
                 (long long)st[1]);
    snprintf(label, sizeof label, "Conv2d(%lld, %lld, %lldx%lld%s)", (long long)in_ch,
             (long long)out_ch, (long long)kernel[0], (long long)kernel[1], strides);
    int64_t ws[4] = {out_ch, in_ch / groups, kernel[0], kernel[1]};
    mft_module *l = nn_affine(fn, MFT__NN_CONV2D, label, 4, ws, out_ch, bias, seed);
    if (!l) return NULL;
    l->in = in_ch;
    l->out = out_ch;
    l->groups = groups;
    for (int i = 0; i < 2; i++) {
        l->kernel[i] = kernel[i];
        l->stride[i] = st[i];
        l->padding[i] = pd[i];
        l->dilation[i] = dl[i];
    }
    return l;
}

mft_module *mft_nn_linear(int64_t in_features, int64_t out_features, bool bias, uint64_t seed) {
    static const char fn[] = "mft_nn_linear";
    if (in_features <= 0 || out_features <= 0) {
        mft__set_error(MFT_ERR_INVALID, "%s: invalid in_features=%lld out_features=%lld", fn,
                       (long long)in_features, (long long)out_features);
        return NULL;
    }
    char label[MFT__NN_LABEL_LEN];
    snprintf(label, sizeof label, "Linear(%lld, %lld)", (long long)in_features,
             (long long)out_features);
    int64_t ws[2] = {out_features, in_features};
    mft_module *l = nn_affine(fn, MFT__NN_LINEAR, label, 2, ws, out_features, bias, seed);
    if (!l) return NULL;
    l->in = in_features;
    l->out = out_features;
    return l;
}

/* weight 1 / bias 0 of (nd, sizes); marks them. Not yet named. */
static mft_module *nn_norm(const char *fn, mft__nn_kind kind, const char *label, int nd,
                           const int64_t *sizes) {
    mft_module *l = mft__nn_new(fn, kind, "%s", label);
    if (!l) return NULL;
    mft__scope_suspend();
    l->param[0] = mft_ones(nd, sizes, MFT_F32, MFT_CONTIGUOUS);
    l->param[1] = mft_zeros(nd, sizes, MFT_F32, MFT_CONTIGUOUS);
    mft__scope_resume();
    if (!l->param[0] || !l->param[1] || nn_mark(l) != MFT_OK) {
        mft__relabel_error(fn);
        mft_module_free(l);
        return NULL;
    }
    return l;
}

mft_module *mft_nn_batch_norm2d(int64_t channels, double eps, double momentum) {
    static const char fn[] = "mft_nn_batch_norm2d";
    if (channels <= 0 || !(eps >= 0) || !(momentum >= 0 && momentum <= 1)) {
        mft__set_error(MFT_ERR_INVALID, "%s: invalid channels=%lld eps=%g momentum=%g", fn,
                       (long long)channels, eps, momentum);
        return NULL;
    }
    char label[MFT__NN_LABEL_LEN];
    snprintf(label, sizeof label, "BatchNorm2d(%lld)", (long long)channels);
    mft_module *l = nn_norm(fn, MFT__NN_BATCH_NORM, label, 1, &channels);
    if (!l) return NULL;
    l->in = l->out = channels;
    l->eps = eps;
    l->momentum = momentum;
    int64_t one = 1;
    mft__scope_suspend();
    l->buf[0] = mft_zeros(1, &channels, MFT_F32, MFT_CONTIGUOUS);
    l->buf[1] = mft_ones(1, &channels, MFT_F32, MFT_CONTIGUOUS);
    l->buf[2] = mft_zeros(1, &one, MFT_I64, MFT_CONTIGUOUS);
    mft__scope_resume();
    if (!l->buf[0] || !l->buf[1] || !l->buf[2]) {
        mft__relabel_error(fn);
        mft_module_free(l);
        return NULL;
    }
    return layer_named(fn, l);
}

mft_module *mft_nn_group_norm(int64_t groups, int64_t channels, double eps) {
    static const char fn[] = "mft_nn_group_norm";
    if (groups <= 0 || channels <= 0 || channels % groups || !(eps >= 0)) {
        mft__set_error(MFT_ERR_INVALID, "%s: invalid groups=%lld channels=%lld eps=%g", fn,
                       (long long)groups, (long long)channels, eps);
        return NULL;
    }
    char label[MFT__NN_LABEL_LEN];
    snprintf(label, sizeof label, "GroupNorm(%lld, %lld)", (long long)groups,
             (long long)channels);
    mft_module *l = nn_norm(fn, MFT__NN_GROUP_NORM, label, 1, &channels);
    if (!l) return NULL;
    l->groups = groups;
    l->in = l->out = channels;
    l->eps = eps;
    return layer_named(fn, l);
}

mft_module *mft_nn_layer_norm(int nnorm, const int64_t *normalized_shape, double eps) {
    static const char fn[] = "mft_nn_layer_norm";
    if (nnorm < 1 || nnorm > MFT_MAX_DIMS || !normalized_shape || !(eps >= 0)) {
        mft__set_error(normalized_shape ? MFT_ERR_INVALID : MFT_ERR_NULL,
                       "%s: invalid nnorm=%d (1..%d) / normalized_shape %s / eps=%g", fn, nnorm,
                       MFT_MAX_DIMS, normalized_shape ? "given" : "NULL", eps);
        return NULL;
    }
    for (int i = 0; i < nnorm; i++)
        if (normalized_shape[i] <= 0) {
            mft__set_error(MFT_ERR_INVALID, "%s: normalized_shape[%d] = %lld must be positive",
                           fn, i, (long long)normalized_shape[i]);
            return NULL;
        }
    char label[MFT__NN_LABEL_LEN], dims[MFT__DIMS_BUF];
    snprintf(label, sizeof label, "LayerNorm(%s)",
             mft__fmt_dims(dims, sizeof dims, nnorm, normalized_shape));
    mft_module *l = nn_norm(fn, MFT__NN_LAYER_NORM, label, nnorm, normalized_shape);
    if (!l) return NULL;
    l->nnorm = nnorm;
    memcpy(l->nshape, normalized_shape, (size_t)nnorm * sizeof(int64_t));
    l->eps = eps;
    return layer_named(fn, l);
}

mft_module *mft_nn_relu(void) { return mft__nn_new("mft_nn_relu", MFT__NN_RELU, "ReLU"); }

mft_module *mft_nn_max_pool2d(const int64_t kernel[2], const int64_t stride[2]) {
    static const char fn[] = "mft_nn_max_pool2d";
    if (!kernel) {
        mft__set_error(MFT_ERR_NULL, "%s: argument 'kernel' is NULL", fn);
        return NULL;
    }
    int64_t st[2] = {stride ? stride[0] : kernel[0], stride ? stride[1] : kernel[1]};
    if (kernel[0] <= 0 || kernel[1] <= 0 || st[0] <= 0 || st[1] <= 0) {
        mft__set_error(MFT_ERR_INVALID, "%s: invalid kernel=%lldx%lld stride=%lldx%lld", fn,
                       (long long)kernel[0], (long long)kernel[1], (long long)st[0],
                       (long long)st[1]);
        return NULL;
    }
    char strides[64] = "";
    if (st[0] != kernel[0] || st[1] != kernel[1])
        snprintf(strides, sizeof strides, ", stride %lldx%lld", (long long)st[0],
                 (long long)st[1]);
    mft_module *l = mft__nn_new(fn, MFT__NN_MAX_POOL2D, "MaxPool2d(%lldx%lld%s)",
                                (long long)kernel[0], (long long)kernel[1], strides);
    if (!l) return NULL;
    for (int i = 0; i < 2; i++) {
        l->kernel[i] = kernel[i];
        l->stride[i] = st[i];
    }
    return l;
}

mft_module *mft_nn_adaptive_avg_pool2d(int64_t out_h, int64_t out_w) {
    static const char fn[] = "mft_nn_adaptive_avg_pool2d";
    if (out_h <= 0 || out_w <= 0) {
        mft__set_error(MFT_ERR_INVALID, "%s: invalid output size %lldx%lld (both must be >= 1)",
                       fn, (long long)out_h, (long long)out_w);
        return NULL;
    }
    mft_module *l = mft__nn_new(fn, MFT__NN_ADAPTIVE_AVG_POOL2D, "AdaptiveAvgPool2d(%lldx%lld)",
                                (long long)out_h, (long long)out_w);
    if (!l) return NULL;
    l->kernel[0] = out_h;
    l->kernel[1] = out_w;
    return l;
}

mft_module *mft_nn_global_avg_pool2d(void) {
    mft_module *l = mft_nn_adaptive_avg_pool2d(1, 1);
    if (!l) mft__relabel_error("mft_nn_global_avg_pool2d");
    return l;
}

mft_module *mft_nn_flatten(int start_dim, int end_dim) {
    mft_module *l =
        mft__nn_new("mft_nn_flatten", MFT__NN_FLATTEN, "Flatten(%d, %d)", start_dim, end_dim);
    if (!l) return NULL;
    l->start_dim = start_dim;
    l->end_dim = end_dim;
    return l;
}

mft_module *mft_nn_dropout(double p, uint64_t seed) {
    static const char fn[] = "mft_nn_dropout";
    if (!(p >= 0 && p <= 1)) {
        mft__set_error(MFT_ERR_INVALID, "%s: p = %g must be in [0, 1]", fn, p);
        return NULL;
    }
    mft_module *l = mft__nn_new(fn, MFT__NN_DROPOUT, "Dropout(%g)", p);
    if (!l) return NULL;
    l->p = p;
    l->seed = seed;
    return l;
}

/* ------------------------------------------------------------------ forward */
/* Runs a leaf on x with the scope suspended: returns a plain new reference. */
static mft_tensor *layer_forward_impl(mft_module *l, const mft_tensor *x) {
    switch (l->kind) {
    case MFT__NN_CONV2D:
        return mft_conv2d(x, l->param[0], l->param[1], l->stride, l->padding, l->dilation,
                          l->groups);
    case MFT__NN_LINEAR: return mft_linear(x, l->param[0], l->param[1]);
    case MFT__NN_BATCH_NORM: {
        mft_tensor *y = mft_batch_norm(x, l->buf[0], l->buf[1], l->param[0], l->param[1],
                                       l->training, l->momentum, l->eps);
        if (y && l->training) {
            int64_t *nbt = mft_tensor_data(l->buf[2]);
            nbt[0]++;
            atomic_fetch_add(&l->buf[2]->storage->version, 1);
        }
        return y;
    }
    case MFT__NN_GROUP_NORM:
        return mft_group_norm(x, l->groups, l->param[0], l->param[1], l->eps);
    case MFT__NN_LAYER_NORM:
        return mft_layer_norm(x, l->nnorm, l->nshape, l->param[0], l->param[1], l->eps);
    case MFT__NN_RELU: return mft_relu(x);
    case MFT__NN_MAX_POOL2D: return mft_max_pool2d(x, l->kernel, l->stride, NULL, NULL, false);
    case MFT__NN_ADAPTIVE_AVG_POOL2D: return mft_adaptive_avg_pool2d(x, l->kernel);
    case MFT__NN_FLATTEN: return mft_flatten(x, l->start_dim, l->end_dim);
    case MFT__NN_DROPOUT: {
        mft_tensor *y = mft_dropout(x, l->p, l->training, l->seed + l->forwards);
        if (y && l->training) l->forwards++;
        return y;
    }
    case MFT__NN_SEQUENTIAL:
    case MFT__NN_RESIDUAL:
    case MFT__NN_CUSTOM: return mft__nn_container_forward(l, x);
    }
    return NULL;
}

/* The modules whose forward runs on this thread, innermost first: one frame
 * per running module, on the C stack of mft__nn_run. A custom forward that
 * calls mft_module_forward on its own child is recognised by it (its parent
 * runs innermost), and so is a forward that would call itself. */
typedef struct nn_frame {
    mft_module *m;
    struct nn_frame *up;
} nn_frame;
static _Thread_local nn_frame *tl_frames = NULL;

mft_module *mft__nn_running(void) { return tl_frames ? tl_frames->m : NULL; }

static bool nn_is_running(const mft_module *l) {
    for (const nn_frame *f = tl_frames; f; f = f->up)
        if (f->m == l) return true;
    return false;
}

mft_tensor *mft__nn_run(mft_module *l, const mft_tensor *x) {
    nn_frame f = {l, tl_frames};
    tl_frames = &f;
    mft_tensor *y = layer_forward_impl(l, x);
    tl_frames = f.up;
    return y;
}

/* A forward is all or nothing for the state layers keep: a training batch
 * norm updates its running statistics and batch count, a training dropout
 * its draw counter, as soon as that layer ran, so a later layer's failure
 * would leave them half-updated. layer_undo records them before the forward
 * and puts them back after a failed one. */
typedef struct undo_item {
    mft_module *l;
    mft_tensor *copy[2]; /* batch norm: running_mean, running_var */
    int64_t nbt;         /* batch norm: num_batches_tracked */
    uint64_t forwards;   /* dropout */
} undo_item;
typedef struct layer_undo {
    undo_item *items;
    int n, cap;
} layer_undo;

static bool undo_kept(const mft_module *l) {
    return l->training && (l->kind == MFT__NN_BATCH_NORM || l->kind == MFT__NN_DROPOUT);
}

static int undo_count(const mft_module *l) {
    int n = undo_kept(l);
    for (int i = 0; i < l->n; i++) n += undo_count(l->child[i]);
    return n;
}

static bool undo_record(const char *fn, layer_undo *u, mft_module *l) {
    if (undo_kept(l)) {
        undo_item *it = &u->items[u->n++];
        memset(it, 0, sizeof *it);
        it->l = l;
        it->forwards = l->forwards;
        if (l->kind == MFT__NN_BATCH_NORM) {
            for (int k = 0; k < 2; k++) {
                it->copy[k] = mft__tensor_alloc(fn, l->buf[k]->ndim, l->buf[k]->sizes,
                                                l->buf[k]->dtype, MFT_CONTIGUOUS);
                if (!it->copy[k]) return false;
                mft__copy_kernel(it->copy[k], l->buf[k]);
            }
            it->nbt = ((const int64_t *)mft_tensor_data(l->buf[2]))[0];
        }
    }
    for (int i = 0; i < l->n; i++)
        if (!undo_record(fn, u, l->child[i])) return false;
    return true;
}

static void undo_free(layer_undo *u) {
    for (int i = 0; i < u->n; i++)
        for (int k = 0; k < 2; k++) mft_tensor_release(u->items[i].copy[k]);
    mft__free(u->items);
    memset(u, 0, sizeof *u);
}

/* The state recorded, or false (NOMEM set, nothing changed). */
static bool undo_begin(const char *fn, layer_undo *u, mft_module *l) {
    memset(u, 0, sizeof *u);
    u->cap = undo_count(l);
    if (u->cap == 0) return true;
    u->items = mft__alloc_or_err(fn, (size_t)u->cap * sizeof *u->items, 16);
    if (!u->items) return false;
    if (!undo_record(fn, u, l)) {
        undo_free(u);
        return false;
    }
    return true;
}

static void undo_restore(layer_undo *u) {
    for (int i = 0; i < u->n; i++) {
        undo_item *it = &u->items[i];
        mft_module *l = it->l;
        l->forwards = it->forwards;
        if (l->kind != MFT__NN_BATCH_NORM) continue;
        for (int k = 0; k < 2; k++) {
            /* 1-D buffers (C): put back what changed, and say so */
            mft_tensor *b = l->buf[k];
            const size_t es = mft__elem_size(b->dtype);
            bool same = true;
            for (int64_t c = 0; same && c < b->numel; c++)
                same = !memcmp(mft__tensor_ptr(b) + (size_t)(c * b->strides[0]) * es,
                               mft__tensor_ptr(it->copy[k]) + (size_t)c * es, es);
            if (same) continue;
            mft__copy_kernel(b, it->copy[k]);
            atomic_fetch_add(&b->storage->version, 1);
        }
        int64_t *nbt = mft_tensor_data(l->buf[2]);
        if (nbt[0] != it->nbt) {
            nbt[0] = it->nbt;
            atomic_fetch_add(&l->buf[2]->storage->version, 1);
        }
    }
}

mft_tensor *mft_module_forward(mft_module *l, const mft_tensor *x) {
    static const char fn[] = "mft_module_forward";
    if (!l) {
        /* NULL propagation: keeps the error of a failed lookup
         * (mft_module_child_by_name in a custom forward) */
        mft__null_arg(fn, "l");
        return NULL;
    }
    if (!x) {
        mft__null_arg(fn, "x");
        return NULL;
    }
    if (nn_is_running(l)) {
        mft__set_error(MFT_ERR_INVALID,
                       "%s: %s is already running on this thread (a custom forward called "
                       "itself or a module that contains it)",
                       fn, l->label);
        return NULL;
    }
    mft_tensor *y;
    mft__scope_suspend();
    if (l->parent && l->parent == mft__nn_running()) {
        /* a custom forward calling one of its children: the path gets the
         * child's name, and the forward that runs the custom module keeps
         * the undo record for the whole tree */
        y = mft__nn_run_child(l, x);
        mft__scope_resume();
        mft_tensor *r = y ? mft__retain_result(fn, y) : NULL;
        mft_tensor_release(y);
        return r;
    }
    layer_undo undo;
    y = undo_begin(fn, &undo, l) ? mft__nn_run(l, x) : NULL;
    mft__scope_resume();
    mft_tensor *r = y ? mft__retain_result(fn, y) : NULL;
    mft_tensor_release(y);
    if (!r) undo_restore(&undo);
    undo_free(&undo);
    return r;
}

void mft_module_set_fusion(mft_module *l, bool on) {
    if (!l) return;
    l->no_fuse = !on;
    for (int i = 0; i < l->n; i++) mft_module_set_fusion(l->child[i], on);
}

bool mft_module_fusion(const mft_module *l) { return l && !l->no_fuse; }

void mft_module_set_training(mft_module *l, bool training) {
    if (!l) return;
    l->training = training;
    for (int i = 0; i < l->n; i++) mft_module_set_training(l->child[i], training);
}

bool mft_module_training(const mft_module *l) { return l && l->training; }

/* ------------------------------------------------------------------ listing */
typedef struct {
    mft_tensor **ts;
    const char **names;
    int max, count;
    int64_t numel;
} nn_list;

/* Own tensors first, then the children's in order: PyTorch's
 * named_parameters / named_buffers order. */
static void nn_collect(const mft_module *l, nn_list *c, bool buffers) {
    int k = buffers ? 3 : 2;
    for (int i = 0; i < k; i++) {
        mft_tensor *t = buffers ? l->buf[i] : l->param[i];
        if (!t) continue;
        if (c->count < c->max) {
            if (c->ts) c->ts[c->count] = t;
            if (c->names) c->names[c->count] = buffers ? l->bname[i] : l->pname[i];
        }
        c->count++;
        c->numel += t->numel;
    }
    for (int i = 0; i < l->n; i++) nn_collect(l->child[i], c, buffers);
}

int mft_module_parameters(const mft_module *l, mft_tensor **params, const char **names, int max) {
    nn_list c = {params, names, max, 0, 0};
    if (l) nn_collect(l, &c, false);
    return c.count;
}

int mft_module_buffers(const mft_module *l, mft_tensor **bufs, const char **names, int max) {
    nn_list c = {bufs, names, max, 0, 0};
    if (l) nn_collect(l, &c, true);
    return c.count;
}

int64_t mft_module_num_parameters(const mft_module *l) {
    nn_list c = {NULL, NULL, 0, 0, 0};
    if (l) nn_collect(l, &c, false);
    return c.numel;
}

/* ------------------------------------------------------------------ to_format, to_dtype */
/* Gives t the storage, offset, strides, dtype and tag of src (same sizes):
 * the mft_tensor object stays, so every holder of the pointer sees the new
 * layout. */
static void layer_swap(mft_tensor *t, mft_tensor *src) {
    mft__storage_retain(src->storage);
    mft__storage_release(t->storage);
    t->storage = src->storage;
    t->offset = src->offset;
    t->dtype = src->dtype;
    memcpy(t->strides, src->strides, sizeof t->strides);
    /* the descriptor too (Note [Blocked tensors]): blocks, padded sizes */
    t->nblocks = src->nblocks;
    memcpy(t->block_dim, src->block_dim, sizeof t->block_dim);
    memcpy(t->block_size, src->block_size, sizeof t->block_size);
    memcpy(t->padded, src->padded, sizeof t->padded);
    mft__tensor_refresh(t);
    t->tag = src->tag;
    t->origin = src->origin;
}

/* The converted copy of t that mft_module_to_format (to_dtype false: fmt) or
 * mft_module_to_dtype (dtype) swaps in; *none when t stays as it is. */
static mft_tensor *layer_converted(const mft_tensor *t, bool to_dtype, mft_format fmt,
                                   mft_dtype dtype, bool *none) {
    *none = true;
    if (to_dtype) {
        if ((t->dtype != MFT_F32 && t->dtype != MFT_F64) || t->dtype == dtype) return NULL;
        *none = false;
        return mft_to_dtype(t, dtype);
    }
    if (t->ndim != 4) return NULL;
    if (fmt == MFT_NCHW16C) { /* a conv weight blocked by 16 (docs/nn.md) */
        mft_layout want, have;
        const char *tag = t->sizes[1] < 16 ? "Ohwi16o" : "OIhw16i16o";
        if (mft_layout_from_onednn(4, t->sizes, tag, &want) != MFT_OK) {
            *none = false;
            return NULL;
        }
        mft__layout_of(t, &have);
        if (mft_layout_equal(&want, &have)) return NULL;
        *none = false;
        return mft_to_layout(t, &want);
    }
    /* PyTorch's packed strides for fmt exactly (a (32,1,3,3) weight gets
     * (9,1,3,1) in channels_last, though (9,9,3,1) would also fit) */
    int64_t want[MFT_MAX_DIMS];
    mft__format_strides(4, t->sizes, fmt, want);
    if (!t->nblocks && !memcmp(want, t->strides, 4 * sizeof(int64_t))) return NULL;
    *none = false;
    return mft_clone(t, fmt);
}

/* Converts every parameter (and, for a dtype, every floating buffer) of l:
 * everything is converted first, then swapped in, so on failure nothing
 * changed. Grad mode off: the copies of parameters must not be recorded. */
static mft_status layer_convert(const char *fn, mft_module *l, bool to_dtype, mft_format fmt,
                                mft_dtype dtype) {
    const int np = mft_module_parameters(l, NULL, NULL, 0);
    const int nt = np + (to_dtype ? mft_module_buffers(l, NULL, NULL, 0) : 0);
    if (nt == 0) return MFT_OK;
    mft_tensor **ts = mft__alloc_or_err(fn, (size_t)nt * 2 * sizeof *ts, 16);
    if (!ts) return MFT_ERR_NOMEM;
    mft_tensor **conv = ts + nt;
    mft_module_parameters(l, ts, NULL, np);
    if (to_dtype) mft_module_buffers(l, ts + np, NULL, nt - np);
    mft_status st = MFT_OK;
    bool grad_was = mft_set_grad_enabled(false);
    mft__scope_suspend();
    for (int i = 0; i < nt; i++) {
        bool none = true;
        conv[i] = st == MFT_OK ? layer_converted(ts[i], to_dtype, fmt, dtype, &none) : NULL;
        if (!none && !conv[i]) st = mft__relabel_error(fn);
    }
    mft__scope_resume();
    mft_set_grad_enabled(grad_was);
    for (int i = 0; i < nt; i++) {
        if (st == MFT_OK && conv[i]) {
            layer_swap(ts[i], conv[i]);
            if (to_dtype) mft_tensor_zero_grad(ts[i]); /* its dtype would differ */
        }
        if (st == MFT_OK && !to_dtype && ts[i]->ndim == 4 && !ts[i]->nblocks) {
            const mft_tensor *src = ts[i];
            mft__decision d = mft__rule_decide(MFT__RULE_CONVERT, "layer_to_format", 1, &src, fmt, 0);
            mft__rule_apply(ts[i], &d);
        }
        mft_tensor_release(conv[i]);
    }
    mft__free(ts);
    return st;
}

mft_status mft_module_to_format(mft_module *l, mft_format fmt) {
    static const char fn[] = "mft_module_to_format";
    if (!l) {
        mft__set_error(MFT_ERR_NULL, "%s: argument 'l' is NULL", fn);
        return MFT_ERR_NULL;
    }
    if (fmt != MFT_CONTIGUOUS && fmt != MFT_CHANNELS_LAST && fmt != MFT_NCHW16C) {
        mft__set_error(MFT_ERR_FORMAT,
                       "%s: format must be CONTIGUOUS, CHANNELS_LAST or NCHW16C, got %s", fn,
                       mft_format_name(fmt));
        return MFT_ERR_FORMAT;
    }
    return layer_convert(fn, l, false, fmt, MFT_F32);
}

mft_status mft_module_to_dtype(mft_module *l, mft_dtype dtype) {
    static const char fn[] = "mft_module_to_dtype";
    if (!l) {
        mft__set_error(MFT_ERR_NULL, "%s: argument 'l' is NULL", fn);
        return MFT_ERR_NULL;
    }
    if (dtype != MFT_F32 && dtype != MFT_F64) {
        mft__set_error(MFT_ERR_DTYPE, "%s: dtype must be f32 or f64, got %s", fn,
                       mft_dtype_name(dtype));
        return MFT_ERR_DTYPE;
    }
    return layer_convert(fn, l, true, MFT_CONTIGUOUS, dtype);
}

/* ------------------------------------------------------------------ describe */
/* One line for l ("<name>: <kind>(...)"; the module described, depth 0, is
 * printed without its name), indented by depth, then its children one level
 * deeper. */
static void nn_describe(const mft_module *l, mft__text *t, int depth) {
    if (depth > 0) mft__text_printf(t, "%*s%s: ", 2 * depth, "", l->name);
    switch (l->kind) {
    case MFT__NN_CONV2D:
        mft__text_printf(
            t,
            "Conv2d(%lld, %lld, kernel=%lldx%lld, stride=%lldx%lld, padding=%lldx%lld, "
            "dilation=%lldx%lld, groups=%lld, bias=%s, weight %s)\n",
            (long long)l->in, (long long)l->out, (long long)l->kernel[0], (long long)l->kernel[1],
            (long long)l->stride[0], (long long)l->stride[1], (long long)l->padding[0],
            (long long)l->padding[1], (long long)l->dilation[0], (long long)l->dilation[1],
            (long long)l->groups, l->param[1] ? "true" : "false",
            mft_format_name(l->param[0]->tag));
        break;
    case MFT__NN_LINEAR:
        mft__text_printf(t, "Linear(%lld, %lld, bias=%s)\n", (long long)l->in, (long long)l->out,
                         l->param[1] ? "true" : "false");
        break;
    case MFT__NN_BATCH_NORM:
        mft__text_printf(t, "BatchNorm2d(%lld, eps=%g, momentum=%g)\n", (long long)l->in, l->eps,
                         l->momentum);
        break;
    case MFT__NN_GROUP_NORM:
        mft__text_printf(t, "GroupNorm(%lld, %lld, eps=%g)\n", (long long)l->groups,
                         (long long)l->in, l->eps);
        break;
    case MFT__NN_LAYER_NORM: {
        char dims[MFT__DIMS_BUF];
        mft__text_printf(t, "LayerNorm(%s, eps=%g)\n",
                         mft__fmt_dims(dims, sizeof dims, l->nnorm, l->nshape), l->eps);
        break;
    }
    case MFT__NN_RELU: mft__text_printf(t, "ReLU()\n"); break;
    case MFT__NN_MAX_POOL2D:
        mft__text_printf(t, "MaxPool2d(kernel=%lldx%lld, stride=%lldx%lld)\n",
                         (long long)l->kernel[0], (long long)l->kernel[1], (long long)l->stride[0],
                         (long long)l->stride[1]);
        break;
    case MFT__NN_ADAPTIVE_AVG_POOL2D:
        mft__text_printf(t, "AdaptiveAvgPool2d(output=%lldx%lld)\n", (long long)l->kernel[0],
                         (long long)l->kernel[1]);
        break;
    case MFT__NN_FLATTEN: mft__text_printf(t, "Flatten(%d, %d)\n", l->start_dim, l->end_dim); break;
    case MFT__NN_DROPOUT: mft__text_printf(t, "Dropout(p=%g)\n", l->p); break;
    case MFT__NN_SEQUENTIAL:
        mft__text_printf(t, "Sequential(%d layers, %lld parameters)\n", l->n,
                         (long long)mft_module_num_parameters(l));
        break;
    case MFT__NN_RESIDUAL:
        mft__text_printf(t, "Residual(y = %sbody(x) + %s%s, %lld parameters)\n",
                         l->relu ? "relu(" : "", l->n > 1 ? "shortcut(x)" : "x", l->relu ? ")" : "",
                         (long long)mft_module_num_parameters(l));
        break;
    case MFT__NN_CUSTOM:
        mft__text_printf(t, "%s(custom, %d children, %lld parameters)\n", l->label, l->n,
                         (long long)mft_module_num_parameters(l));
        break;
    }
    for (int i = 0; i < l->n; i++) nn_describe(l->child[i], t, depth + 1);
}

size_t mft_module_describe(const mft_module *l, char *buf, size_t len) {
    mft__text t = {buf, buf ? len : 0, 0};
    if (t.len > 0) buf[0] = '\0';
    if (!l) {
        mft__text_printf(&t, "(null layer)\n");
        return t.pos;
    }
    nn_describe(l, &t, 0);
    return t.pos;
}
