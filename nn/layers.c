/* nn/layers.c — the nn layers of mft/nn.h: construction with PyTorch's
 * default initialisation (seeded), forward through the public ops (so the
 * tape records them), training/eval mode, parameter and buffer listing with
 * dotted names, counting, description, and model.to(memory_format) done in
 * place on the existing parameter tensors (layer_swap_layout). A sequential
 * runs a relu followed by a max_pool2d as one mft_relu_max_pool2d unless
 * fusion is turned off. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "internal.h"
#include "mft/nn.h"

#define NN_NAME_LEN 64

typedef enum {
    L_CONV2D,
    L_LINEAR,
    L_BATCH_NORM,
    L_GROUP_NORM,
    L_LAYER_NORM,
    L_RELU,
    L_MAX_POOL2D,
    L_FLATTEN,
    L_DROPOUT,
    L_SEQUENTIAL
} layer_kind;

struct mft_module {
    layer_kind kind;
    bool training;
    bool adopted; /* owned by a container */
    /* parameters (weight, bias) and buffers (running_mean, running_var,
     * num_batches_tracked); NULL when absent */
    mft_tensor *param[2];
    mft_tensor *buf[3];
    char pname[2][NN_NAME_LEN];
    char bname[3][NN_NAME_LEN];
    /* conv / pool / linear geometry */
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
    /* sequential */
    int n;
    mft_module **child;
    bool no_fuse; /* mft_module_set_fusion(l, false) */
    /* error path of mft_nn_sequential (layer_free_unowned) */
    bool doomed;
    mft_module *next_doomed;
};

static const char *const k_pbase[2] = {"weight", "bias"};
static const char *const k_bbase[3] = {"running_mean", "running_var", "num_batches_tracked"};

static void layer_set_prefix(mft_module *l, const char *prefix) {
    for (int i = 0; i < 2; i++) snprintf(l->pname[i], NN_NAME_LEN, "%s%s", prefix, k_pbase[i]);
    for (int i = 0; i < 3; i++) snprintf(l->bname[i], NN_NAME_LEN, "%s%s", prefix, k_bbase[i]);
    for (int i = 0; i < l->n; i++) {
        char p[NN_NAME_LEN];
        snprintf(p, sizeof p, "%s%d.", prefix, i);
        layer_set_prefix(l->child[i], p);
    }
}

static mft_module *layer_new(const char *fn, layer_kind kind) {
    mft_module *l = mft__alloc_or_err(fn, sizeof *l, 16);
    if (!l) return NULL;
    memset(l, 0, sizeof *l);
    l->kind = kind;
    l->training = true;
    layer_set_prefix(l, "");
    return l;
}

void mft_module_free(mft_module *l) {
    if (!l) return;
    for (int i = 0; i < 2; i++) mft_tensor_release(l->param[i]);
    for (int i = 0; i < 3; i++) mft_tensor_release(l->buf[i]);
    for (int i = 0; i < l->n; i++) mft_module_free(l->child[i]);
    mft__free(l->child);
    mft__free(l);
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
static mft_module *nn_affine(const char *fn, layer_kind kind, int wnd, const int64_t *wsizes,
                            int64_t bsize, bool bias, uint64_t seed) {
    if (mft__check_geometry(fn, wnd, wsizes, NULL, MFT_F32) != MFT_OK ||
        (bias && mft__check_geometry(fn, 1, &bsize, NULL, MFT_F32) != MFT_OK))
        return NULL;
    int64_t fan_in = 1; /* cannot overflow: the weight's element count fits */
    for (int d = 1; d < wnd; d++) fan_in *= wsizes[d];
    mft_module *l = layer_new(fn, kind);
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
    return l;
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
    int64_t ws[4] = {out_ch, in_ch / groups, kernel[0], kernel[1]};
    mft_module *l =
        nn_affine(fn, L_CONV2D, 4, ws, out_ch, bias, seed);
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
    int64_t ws[2] = {out_features, in_features};
    mft_module *l = nn_affine(fn, L_LINEAR, 2, ws, out_features, bias, seed);
    if (!l) return NULL;
    l->in = in_features;
    l->out = out_features;
    return l;
}

/* weight 1 / bias 0 of (nd, sizes); marks them. */
static mft_module *nn_norm(const char *fn, layer_kind kind, int nd, const int64_t *sizes) {
    mft_module *l = layer_new(fn, kind);
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
    mft_module *l = nn_norm(fn, L_BATCH_NORM, 1, &channels);
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
    return l;
}

mft_module *mft_nn_group_norm(int64_t groups, int64_t channels, double eps) {
    static const char fn[] = "mft_nn_group_norm";
    if (groups <= 0 || channels <= 0 || channels % groups || !(eps >= 0)) {
        mft__set_error(MFT_ERR_INVALID, "%s: invalid groups=%lld channels=%lld eps=%g", fn,
                       (long long)groups, (long long)channels, eps);
        return NULL;
    }
    mft_module *l = nn_norm(fn, L_GROUP_NORM, 1, &channels);
    if (!l) return NULL;
    l->groups = groups;
    l->in = l->out = channels;
    l->eps = eps;
    return l;
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
    mft_module *l = nn_norm(fn, L_LAYER_NORM, nnorm, normalized_shape);
    if (!l) return NULL;
    l->nnorm = nnorm;
    memcpy(l->nshape, normalized_shape, (size_t)nnorm * sizeof(int64_t));
    l->eps = eps;
    return l;
}

mft_module *mft_nn_relu(void) { return layer_new("mft_nn_relu", L_RELU); }

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
    mft_module *l = layer_new(fn, L_MAX_POOL2D);
    if (!l) return NULL;
    for (int i = 0; i < 2; i++) {
        l->kernel[i] = kernel[i];
        l->stride[i] = st[i];
    }
    return l;
}

mft_module *mft_nn_flatten(int start_dim, int end_dim) {
    mft_module *l = layer_new("mft_nn_flatten", L_FLATTEN);
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
    mft_module *l = layer_new(fn, L_DROPOUT);
    if (!l) return NULL;
    l->p = p;
    l->seed = seed;
    return l;
}

/* The error path of mft_nn_sequential, which owns its arguments whether
 * it succeeds or not: frees each distinct layer of layers[0..n) that no
 * container owns. What to free is decided before anything is freed: a freed
 * container frees its children, and layers[i] may be such a child, so looking
 * at it after a free would read freed memory. The chosen layers are linked
 * through `next_doomed` while all are alive; a layer no container owns is
 * nobody's child, so freeing one chosen layer never frees another. */
static void layer_free_unowned(int n, mft_module *const *layers) {
    mft_module *doomed = NULL;
    for (int i = 0; layers && i < n; i++) {
        mft_module *l = layers[i];
        if (!l || l->adopted || l->doomed) continue; /* owned elsewhere, or a duplicate */
        l->doomed = true;
        l->next_doomed = doomed;
        doomed = l;
    }
    while (doomed) {
        mft_module *next = doomed->next_doomed;
        mft_module_free(doomed);
        doomed = next;
    }
}

mft_module *mft_nn_sequential(int n, mft_module *const *layers) {
    static const char fn[] = "mft_nn_sequential";
    mft_module *l = NULL;
    if (n < 0 || (n > 0 && !layers)) {
        mft__set_error(n < 0 ? MFT_ERR_INVALID : MFT_ERR_NULL, "%s: invalid n=%d / layers %s",
                       fn, n, layers ? "given" : "NULL");
        goto fail;
    }
    for (int i = 0; i < n; i++)
        if (!layers[i] || layers[i]->adopted) {
            if (!layers[i] && mft_last_error() != MFT_OK) goto fail; /* NULL propagation */
            mft__set_error(layers[i] ? MFT_ERR_INVALID : MFT_ERR_NULL,
                           "%s: layers[%d] is %s", fn, i,
                           layers[i] ? "already owned by a container" : "NULL");
            goto fail;
        }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            if (layers[i] == layers[j]) {
                mft__set_error(MFT_ERR_INVALID, "%s: layers[%d] and layers[%d] are the same layer",
                               fn, j, i);
                goto fail;
            }
    l = layer_new(fn, L_SEQUENTIAL);
    if (!l) goto fail;
    if (n > 0) {
        l->child = mft__alloc_or_err(fn, (size_t)n * sizeof *l->child, 16);
        if (!l->child) goto fail;
    }
    for (int i = 0; i < n; i++) {
        l->child[i] = layers[i];
        layers[i]->adopted = true;
    }
    l->n = n;
    layer_set_prefix(l, "");
    return l;
fail:
    mft_module_free(l); /* adopted nothing yet */
    layer_free_unowned(n, layers);
    return NULL;
}

/* ------------------------------------------------------------------ forward */
/* Runs l on x with the scope suspended: returns a plain new reference. */
static mft_tensor *layer_forward_impl(mft_module *l, const mft_tensor *x) {
    switch (l->kind) {
    case L_CONV2D:
        return mft_conv2d(x, l->param[0], l->param[1], l->stride, l->padding, l->dilation,
                          l->groups);
    case L_LINEAR: return mft_linear(x, l->param[0], l->param[1]);
    case L_BATCH_NORM: {
        mft_tensor *y = mft_batch_norm(x, l->buf[0], l->buf[1], l->param[0], l->param[1],
                                       l->training, l->momentum, l->eps);
        if (y && l->training) {
            int64_t *nbt = mft_tensor_data(l->buf[2]);
            nbt[0]++;
            atomic_fetch_add(&l->buf[2]->storage->version, 1);
        }
        return y;
    }
    case L_GROUP_NORM: return mft_group_norm(x, l->groups, l->param[0], l->param[1], l->eps);
    case L_LAYER_NORM:
        return mft_layer_norm(x, l->nnorm, l->nshape, l->param[0], l->param[1], l->eps);
    case L_RELU: return mft_relu(x);
    case L_MAX_POOL2D: return mft_max_pool2d(x, l->kernel, l->stride, NULL, NULL, false);
    case L_FLATTEN: return mft_flatten(x, l->start_dim, l->end_dim);
    case L_DROPOUT: {
        mft_tensor *y = mft_dropout(x, l->p, l->training, l->seed + l->forwards);
        if (y && l->training) l->forwards++;
        return y;
    }
    case L_SEQUENTIAL: {
        if (l->n == 0) return mft_tensor_retain((mft_tensor *)x);
        mft_tensor *cur = NULL;
        for (int i = 0; i < l->n; i++) {
            const mft_tensor *in = i == 0 ? x : cur;
            mft_tensor *nx;
            const mft_module *nxt = i + 1 < l->n ? l->child[i + 1] : NULL;
            if (!l->no_fuse && l->child[i]->kind == L_RELU && nxt && nxt->kind == L_MAX_POOL2D) {
                /* relu -> max_pool2d: one pass, same values and gradients */
                nx = mft_relu_max_pool2d(in, nxt->kernel, nxt->stride, NULL, NULL, false);
                i++;
            } else {
                nx = layer_forward_impl(l->child[i], in);
            }
            mft_tensor_release(cur);
            cur = nx;
            if (!cur) return NULL;
        }
        return cur;
    }
    }
    return NULL;
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

static int undo_count(const mft_module *l) {
    int n = l->training && (l->kind == L_BATCH_NORM || l->kind == L_DROPOUT);
    for (int i = 0; i < l->n; i++) n += undo_count(l->child[i]);
    return n;
}

static bool undo_record(const char *fn, layer_undo *u, mft_module *l) {
    if (l->training && (l->kind == L_BATCH_NORM || l->kind == L_DROPOUT)) {
        undo_item *it = &u->items[u->n++];
        memset(it, 0, sizeof *it);
        it->l = l;
        it->forwards = l->forwards;
        if (l->kind == L_BATCH_NORM) {
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
        if (l->kind != L_BATCH_NORM) continue;
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
        mft__set_error(MFT_ERR_NULL, "%s: argument 'l' is NULL", fn);
        return NULL;
    }
    if (!x) {
        mft__null_arg(fn, "x");
        return NULL;
    }
    mft__scope_suspend();
    layer_undo undo;
    mft_tensor *y = undo_begin(fn, &undo, l) ? layer_forward_impl(l, x) : NULL;
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

/* ------------------------------------------------------------------ to_format */
/* Gives t the storage, offset, strides and tag of src (same sizes and dtype):
 * the mft_tensor object stays, so every holder of the pointer sees the new
 * layout. */
static void layer_swap_layout(mft_tensor *t, mft_tensor *src) {
    mft__storage_retain(src->storage);
    mft__storage_release(t->storage);
    t->storage = src->storage;
    t->offset = src->offset;
    memcpy(t->strides, src->strides, sizeof t->strides);
    mft__tensor_refresh(t);
    t->tag = src->tag;
    t->origin = src->origin;
}

mft_status mft_module_to_format(mft_module *l, mft_format fmt) {
    static const char fn[] = "mft_module_to_format";
    if (!l) {
        mft__set_error(MFT_ERR_NULL, "%s: argument 'l' is NULL", fn);
        return MFT_ERR_NULL;
    }
    if (fmt != MFT_CONTIGUOUS && fmt != MFT_CHANNELS_LAST) {
        mft__set_error(MFT_ERR_FORMAT, "%s: format must be CONTIGUOUS or CHANNELS_LAST, got %s",
                       fn, mft_format_name(fmt));
        return MFT_ERR_FORMAT;
    }
    int np = mft_module_parameters(l, NULL, NULL, 0);
    if (np == 0) return MFT_OK;
    mft_tensor **ps = mft__alloc_or_err(fn, (size_t)np * 2 * sizeof *ps, 16);
    if (!ps) return MFT_ERR_NOMEM;
    mft_tensor **conv = ps + np;
    mft_module_parameters(l, ps, NULL, np);
    mft_status st = MFT_OK;
    /* convert everything first, then swap: on failure nothing changed. Grad
     * mode off: the copies of parameters must not be recorded on a tape. */
    bool grad_was = mft_set_grad_enabled(false);
    mft__scope_suspend();
    for (int i = 0; i < np; i++) {
        conv[i] = NULL;
        if (ps[i]->ndim != 4 || st != MFT_OK) continue;
        /* PyTorch's packed strides for fmt exactly (a (32,1,3,3) weight gets
         * (9,1,3,1) in channels_last, though (9,9,3,1) would also fit) */
        int64_t want[MFT_MAX_DIMS];
        mft__format_strides(4, ps[i]->sizes, fmt, want);
        if (!memcmp(want, ps[i]->strides, 4 * sizeof(int64_t))) continue;
        conv[i] = mft_clone(ps[i], fmt);
        if (!conv[i]) st = mft__relabel_error(fn);
    }
    mft__scope_resume();
    mft_set_grad_enabled(grad_was);
    for (int i = 0; i < np; i++) {
        if (st == MFT_OK && conv[i]) layer_swap_layout(ps[i], conv[i]);
        if (st == MFT_OK && ps[i]->ndim == 4) {
            const mft_tensor *src = ps[i];
            mft__decision d = mft__rule_decide(MFT__RULE_CONVERT, "layer_to_format", 1, &src, fmt, 0);
            mft__rule_apply(ps[i], &d);
        }
        mft_tensor_release(conv[i]);
    }
    mft__free(ps);
    return st;
}

/* ------------------------------------------------------------------ describe */
typedef struct {
    char *buf;
    size_t len, used;
} nn_text;

static void nn_printf(nn_text *t, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void nn_printf(nn_text *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *dst = t->used < t->len ? t->buf + t->used : NULL;
    size_t room = t->used < t->len ? t->len - t->used : 0;
    int w = vsnprintf(dst, room, fmt, ap);
    va_end(ap);
    if (w > 0) t->used += (size_t)w;
}

static void nn_describe(const mft_module *l, nn_text *t, const char *label, int depth) {
    nn_printf(t, "%*s%s", 2 * depth, "", label);
    switch (l->kind) {
    case L_CONV2D:
        nn_printf(t,
                  "Conv2d(%lld, %lld, kernel=%lldx%lld, stride=%lldx%lld, padding=%lldx%lld, "
                  "dilation=%lldx%lld, groups=%lld, bias=%s, weight %s)\n",
                  (long long)l->in, (long long)l->out, (long long)l->kernel[0],
                  (long long)l->kernel[1], (long long)l->stride[0], (long long)l->stride[1],
                  (long long)l->padding[0], (long long)l->padding[1], (long long)l->dilation[0],
                  (long long)l->dilation[1], (long long)l->groups, l->param[1] ? "true" : "false",
                  mft_format_name(l->param[0]->tag));
        break;
    case L_LINEAR:
        nn_printf(t, "Linear(%lld, %lld, bias=%s)\n", (long long)l->in, (long long)l->out,
                  l->param[1] ? "true" : "false");
        break;
    case L_BATCH_NORM:
        nn_printf(t, "BatchNorm2d(%lld, eps=%g, momentum=%g)\n", (long long)l->in, l->eps,
                  l->momentum);
        break;
    case L_GROUP_NORM:
        nn_printf(t, "GroupNorm(%lld, %lld, eps=%g)\n", (long long)l->groups, (long long)l->in,
                  l->eps);
        break;
    case L_LAYER_NORM: {
        char dims[MFT__DIMS_BUF];
        nn_printf(t, "LayerNorm(%s, eps=%g)\n", mft__fmt_dims(dims, sizeof dims, l->nnorm,
                                                               l->nshape), l->eps);
        break;
    }
    case L_RELU: nn_printf(t, "ReLU()\n"); break;
    case L_MAX_POOL2D:
        nn_printf(t, "MaxPool2d(kernel=%lldx%lld, stride=%lldx%lld)\n", (long long)l->kernel[0],
                  (long long)l->kernel[1], (long long)l->stride[0], (long long)l->stride[1]);
        break;
    case L_FLATTEN: nn_printf(t, "Flatten(%d, %d)\n", l->start_dim, l->end_dim); break;
    case L_DROPOUT: nn_printf(t, "Dropout(p=%g)\n", l->p); break;
    case L_SEQUENTIAL:
        nn_printf(t, "Sequential(%d layers, %lld parameters)\n", l->n,
                  (long long)mft_module_num_parameters(l));
        for (int i = 0; i < l->n; i++) {
            char lab[24];
            snprintf(lab, sizeof lab, "%d: ", i);
            nn_describe(l->child[i], t, lab, depth + 1);
        }
        break;
    }
}

size_t mft_module_describe(const mft_module *l, char *buf, size_t len) {
    nn_text t = {buf, buf ? len : 0, 0};
    if (t.len > 0) buf[0] = '\0';
    if (!l) {
        nn_printf(&t, "(null layer)\n");
        return t.used;
    }
    nn_describe(l, &t, "", 0);
    return t.used;
}
