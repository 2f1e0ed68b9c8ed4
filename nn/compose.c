/* nn/compose.c — the containers of mft/nn.h and the tree they make:
 * mft_nn_sequential (children numbered, or named: mft_nn_sequential_named),
 * mft_nn_residual and mft_nn_custom (a user-defined block: the user's
 * forward over named children); adoption (a container owns its
 * children whether its constructor succeeds or not, and decides what to free
 * before freeing anything), the dotted names of parameters and buffers (set
 * on the tensors too, and renewed whenever a subtree is put into a
 * container), the accessors of children, and running a child: its name and
 * kind pushed on the thread's module path around its forward (Note [Module
 * path] in tensor/naming.c) and one prefix on a failure naming the innermost
 * failing module (Note [Layer errors]). docs/nn.md describes the whole. */
#include <stdio.h>
#include <string.h>
#include "module_internal.h"

/* ------------------------------------------------------------------ names */
mft_status mft__nn_set_names(const char *fn, mft_module *l, const char *prefix) {
    static const char *const pbase[2] = {"weight", "bias"};
    static const char *const bbase[3] = {"running_mean", "running_var", "num_batches_tracked"};
    for (int i = 0; i < 2; i++) {
        snprintf(l->pname[i], MFT__NN_PATH_LEN, "%s%s", prefix, pbase[i]);
        if (l->param[i] && mft_tensor_set_name(l->param[i], l->pname[i]) != MFT_OK)
            return mft__relabel_error(fn);
    }
    for (int i = 0; i < 3; i++) {
        snprintf(l->bname[i], MFT__NN_PATH_LEN, "%s%s", prefix, bbase[i]);
        if (l->buf[i] && mft_tensor_set_name(l->buf[i], l->bname[i]) != MFT_OK)
            return mft__relabel_error(fn);
    }
    for (int i = 0; i < l->n; i++) {
        char p[MFT__NN_PATH_LEN];
        snprintf(p, sizeof p, "%s%s.", prefix, l->child[i]->name);
        if (mft__nn_set_names(fn, l->child[i], p) != MFT_OK) return mft_last_error();
    }
    return MFT_OK;
}

/* The longest dotted name of a tensor under l when l's names start with a
 * prefix of `prefix` characters (0 when l holds no tensor). */
static size_t nn_longest_name(const mft_module *l, size_t prefix) {
    static const size_t pbase[2] = {6, 4};      /* weight, bias */
    static const size_t bbase[3] = {12, 11, 19}; /* running_mean ... num_batches_tracked */
    size_t best = 0;
    for (int i = 0; i < 2; i++)
        if (l->param[i] && prefix + pbase[i] > best) best = prefix + pbase[i];
    for (int i = 0; i < 3; i++)
        if (l->buf[i] && prefix + bbase[i] > best) best = prefix + bbase[i];
    for (int i = 0; i < l->n; i++) {
        size_t c = nn_longest_name(l->child[i], prefix + strlen(l->child[i]->name) + 1);
        if (c > best) best = c;
    }
    return best;
}

/* ------------------------------------------------------------------ construction */
/* What a container constructor asks for. The container owns children[0..n)
 * and ctx (freed by ctx_free) whether it is made or not. */
typedef struct nn_spec {
    const char *fn;
    mft__nn_kind kind;
    const char *label;
    int n;
    mft_module *const *children;
    const char *arg;          /* how messages name children[i]: "layers[i]", "children[i]" */
    const char *const *slots; /* or by slot (residual: "body", "shortcut"); NULL: by arg */
    const char *const *names; /* the children's names; NULL: "0", "1", ... */
    void *ctx;
    void (*ctx_free)(void *ctx);
} nn_spec;

/* "layers[2]", "children[1] ('conv')" or "body": children[i] in a message. */
static const char *nn_slot(const nn_spec *s, int i, char *buf, size_t len) {
    if (s->slots)
        snprintf(buf, len, "%s", s->slots[i]);
    else if (s->names && s->names[i])
        snprintf(buf, len, "%s[%d] ('%.63s')", s->arg, i, s->names[i]);
    else
        snprintf(buf, len, "%s[%d]", s->arg, i);
    return buf;
}

/* The error path of the container constructors, which own their arguments
 * whether they succeed or not: frees each distinct module of ms[0..n) that
 * no container owns. What to free is decided before anything is freed: a
 * freed container frees its children, and ms[i] may be such a child, so
 * looking at it after a free would read freed memory. The chosen modules are
 * linked through `next_doomed` while all are alive; a module no container
 * owns is nobody's child, so freeing one chosen module never frees another. */
static void nn_free_unowned(int n, mft_module *const *ms) {
    mft_module *doomed = NULL;
    for (int i = 0; ms && i < n; i++) {
        mft_module *l = ms[i];
        if (!l || l->parent || l->doomed) continue; /* owned elsewhere, or a duplicate */
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

/* Everything about the arguments that can be wrong, checked before anything
 * is allocated or changed; false with the error set. */
static bool nn_check(const nn_spec *s) {
    const char *fn = s->fn;
    char a[96], b[96];
    if (s->n < 0 || (s->n > 0 && !s->children)) {
        mft__set_error(s->n < 0 ? MFT_ERR_INVALID : MFT_ERR_NULL, "%s: invalid n=%d / %s %s", fn,
                       s->n, s->arg, s->children ? "given" : "NULL");
        return false;
    }
    for (int i = 0; i < s->n; i++) {
        const mft_module *c = s->children[i];
        if (!c && mft_last_error() != MFT_OK) return false; /* NULL propagation */
        if (!c || c->parent) {
            mft__set_error(c ? MFT_ERR_INVALID : MFT_ERR_NULL, "%s: %s is %s", fn,
                           nn_slot(s, i, a, sizeof a),
                           c ? "already owned by a container" : "NULL");
            return false;
        }
    }
    for (int i = 0; i < s->n; i++)
        for (int j = 0; j < i; j++)
            if (s->children[i] == s->children[j]) {
                mft__set_error(MFT_ERR_INVALID, "%s: %s and %s are the same layer", fn,
                               nn_slot(s, j, a, sizeof a), nn_slot(s, i, b, sizeof b));
                return false;
            }
    for (int i = 0; s->names && i < s->n; i++) {
        const char *nm = s->names[i];
        const size_t len = nm ? strlen(nm) : 0;
        if (!nm || len == 0 || len >= MFT__NN_NAME_LEN || strchr(nm, '.')) {
            mft__set_error(nm ? MFT_ERR_INVALID : MFT_ERR_NULL,
                           "%s: names[%d] %s%.80s%s (a child's name has 1 to %d characters and "
                           "no '.')",
                           fn, i, nm ? "= '" : "is NULL", nm ? nm : "", nm ? "'" : "",
                           MFT__NN_NAME_LEN - 1);
            return false;
        }
        for (int j = 0; j < i; j++)
            if (!strcmp(s->names[j], nm)) {
                mft__set_error(MFT_ERR_INVALID, "%s: names[%d] and names[%d] are both '%s'", fn,
                               j, i, nm);
                return false;
            }
    }
    for (int i = 0; i < s->n; i++) {
        char nm[MFT__NN_NAME_LEN];
        if (s->names)
            snprintf(nm, sizeof nm, "%s", s->names[i]);
        else
            snprintf(nm, sizeof nm, "%d", i);
        const size_t longest = nn_longest_name(s->children[i], strlen(nm) + 1);
        if (longest >= MFT__NN_PATH_LEN) {
            mft__set_error(MFT_ERR_INVALID,
                           "%s: %s would give a parameter a dotted name of %zu characters "
                           "(at most %d)",
                           fn, nn_slot(s, i, a, sizeof a), longest, MFT__NN_PATH_LEN - 1);
            return false;
        }
    }
    return true;
}

/* The container of s, owning its children, with every dotted name set; or
 * NULL with the children (those no container owns) and ctx freed. */
static mft_module *nn_container(const nn_spec *s) {
    if (!nn_check(s)) goto fail;
    mft_module *l = mft__nn_new(s->fn, s->kind, "%s", s->label);
    if (!l) goto fail;
    /* from here on l owns ctx, and once adopted the children: freeing l
     * frees them */
    l->ctx = s->ctx;
    l->ctx_free = s->ctx_free;
    if (s->n > 0) {
        l->child = mft__alloc_or_err(s->fn, (size_t)s->n * sizeof *l->child, 16);
        if (!l->child) {
            mft_module_free(l); /* ctx goes with it; no child adopted yet */
            nn_free_unowned(s->n, s->children);
            return NULL;
        }
    }
    for (int i = 0; i < s->n; i++) {
        mft_module *c = s->children[i];
        l->child[i] = c;
        c->parent = l;
        if (s->names)
            snprintf(c->name, sizeof c->name, "%s", s->names[i]);
        else
            snprintf(c->name, sizeof c->name, "%d", i);
    }
    l->n = s->n;
    if (mft__nn_set_names(s->fn, l, "") != MFT_OK) {
        mft_module_free(l); /* with every child */
        return NULL;
    }
    return l;
fail:
    if (s->ctx_free) s->ctx_free(s->ctx);
    nn_free_unowned(s->n, s->children);
    return NULL;
}

mft_module *mft_nn_sequential(int n, mft_module *const *layers) {
    const nn_spec s = {"mft_nn_sequential", MFT__NN_SEQUENTIAL, "Sequential", n, layers,
                       "layers", NULL, NULL, NULL, NULL};
    return nn_container(&s);
}

mft_module *mft_nn_sequential_named(int n, mft_module *const *layers, const char *const *names) {
    const nn_spec s = {"mft_nn_sequential_named", MFT__NN_SEQUENTIAL, "Sequential", n, layers,
                       "layers", NULL, names, NULL, NULL};
    return nn_container(&s);
}

mft_module *mft_nn_residual(mft_module *body, mft_module *shortcut, bool relu) {
    static const char *const slots[2] = {"body", "shortcut"};
    mft_module *const ch[2] = {body, shortcut};
    const nn_spec s = {"mft_nn_residual", MFT__NN_RESIDUAL, "Residual", shortcut ? 2 : 1, ch,
                       "children", slots, slots, NULL, NULL};
    mft_module *l = nn_container(&s);
    if (l) l->relu = relu;
    return l;
}

mft_module *mft_nn_custom(const char *kind, int n, mft_module *const *children,
                          const char *const *names, mft_module_forward_fn forward, void *ctx,
                          void (*ctx_free)(void *ctx)) {
    static const char fn[] = "mft_nn_custom";
    const size_t klen = kind ? strlen(kind) : 0;
    const char *bad = !kind                        ? "kind is NULL"
                      : klen == 0                  ? "kind is empty"
                      : klen >= MFT__NN_LABEL_LEN  ? "kind is too long"
                      : !forward                   ? "forward is NULL"
                                                   : NULL;
    if (bad) {
        mft__set_error(kind && forward ? MFT_ERR_INVALID : MFT_ERR_NULL,
                       "%s: %s (kind: 1 to %d characters; forward: the block's function)", fn,
                       bad, MFT__NN_LABEL_LEN - 1);
        if (ctx_free) ctx_free(ctx);
        nn_free_unowned(n > 0 ? n : 0, children);
        return NULL;
    }
    const nn_spec s = {fn,    MFT__NN_CUSTOM, kind, n,  children, "children",
                       NULL,  names,          ctx,  ctx_free};
    mft_module *l = nn_container(&s);
    if (l) l->fwd = forward;
    return l;
}

/* ------------------------------------------------------------------ children */
int mft_module_num_children(const mft_module *m) { return m ? m->n : 0; }

mft_module *mft_module_child(const mft_module *m, int i) {
    static const char fn[] = "mft_module_child";
    if (!m) {
        mft__set_error(MFT_ERR_NULL, "%s: argument 'm' is NULL", fn);
        return NULL;
    }
    if (i < 0 || i >= m->n) {
        mft__set_error(MFT_ERR_INVALID, "%s: index %d out of range for %s with %d children", fn,
                       i, m->label, m->n);
        return NULL;
    }
    return m->child[i];
}

mft_module *mft_module_child_by_name(const mft_module *m, const char *path) {
    static const char fn[] = "mft_module_child_by_name";
    if (!m || !path) {
        mft__set_error(MFT_ERR_NULL, "%s: argument '%s' is NULL", fn, m ? "path" : "m");
        return NULL;
    }
    const mft_module *cur = m;
    const char *p = path;
    while (*p) {
        const char *dot = strchr(p, '.');
        const size_t len = dot ? (size_t)(dot - p) : strlen(p);
        const mft_module *next = NULL;
        for (int i = 0; i < cur->n && !next; i++)
            if (strlen(cur->child[i]->name) == len && !strncmp(cur->child[i]->name, p, len))
                next = cur->child[i];
        if (!next) {
            mft__set_error(MFT_ERR_INVALID, "%s: no child '%.*s' in %s (path '%s')", fn,
                           (int)(len < 80 ? len : 80), p, cur->label, path);
            return NULL;
        }
        cur = next;
        p = dot ? dot + 1 : p + len;
        if (dot && !*p) {
            mft__set_error(MFT_ERR_INVALID, "%s: path '%s' ends with '.'", fn, path);
            return NULL;
        }
    }
    if (cur == m) {
        mft__set_error(MFT_ERR_INVALID, "%s: empty path", fn);
        return NULL;
    }
    return (mft_module *)cur;
}

const char *mft_module_name(const mft_module *m) { return m ? m->name : ""; }

const char *mft_module_label(const mft_module *m) { return m ? m->label : ""; }

/* ------------------------------------------------------------------ running children
 * Note [Layer errors]
 * When a module inside a model fails, the message gets one prefix naming it
 * by its dotted path from the module the user ran and its kind label:
 *   mft_module_forward: layer 1.4 BatchNorm2d(16): mft_batch_norm: ...
 * It starts with the function the user called, as every message does
 * (docs/architecture.md §4), and keeps the failing op's own message after
 * the label. The innermost failing module adds it: nn_label runs after a
 * child's forward failed, while the child's name is still on the module
 * path, and leaves a message that already carries a label alone, so the
 * containers above add nothing. A failure of a container's own op (the
 * residual's add, an op called by a custom forward) is labelled, one level
 * up, with the container's path and kind. The module the user runs is not
 * labelled: it has no path, and the message names the op. */

#define NN_LABEL_PREFIX "mft_module_forward: layer "

/* Pushes name/kind on the module path. A failed push (the path is too deep
 * or too long) leaves the path and the thread's last error as they were:
 * the forward runs on, only the path is not extended. */
static bool nn_push(const char *name, const char *kind) {
    const mft_status prev = mft_last_error();
    char saved[512];
    if (prev != MFT_OK) snprintf(saved, sizeof saved, "%s", mft_last_error_message());
    if (mft_module_path_push(name, kind) == MFT_OK) return true;
    if (prev == MFT_OK)
        mft_clear_error();
    else
        mft__set_error(prev, "%s", saved);
    return false;
}

/* Note [Layer errors]: prefixes the failure of the module name/kind whose
 * push succeeded (pushed) or not. */
static void nn_label(const char *name, const char *kind, bool pushed) {
    const char *msg = mft_last_error_message();
    if (mft_last_error() == MFT_OK || !strncmp(msg, NN_LABEL_PREFIX, strlen(NN_LABEL_PREFIX)))
        return;
    char out[512];
    if (pushed)
        snprintf(out, sizeof out, NN_LABEL_PREFIX "%s %s: %s", mft_module_path(), kind, msg);
    else if (mft_module_depth() > 0)
        snprintf(out, sizeof out, NN_LABEL_PREFIX "%s.%s %s: %s", mft_module_path(), name, kind,
                 msg);
    else
        snprintf(out, sizeof out, NN_LABEL_PREFIX "%s %s: %s", name, kind, msg);
    mft__set_error(mft_last_error(), "%s", out);
}

mft_tensor *mft__nn_run_child(mft_module *c, const mft_tensor *x) {
    const bool pushed = nn_push(c->name, c->label);
    mft_tensor *y = mft__nn_run(c, x);
    if (!y) nn_label(c->name, c->label, pushed);
    mft_module_path_pop();
    return y;
}

/* ------------------------------------------------------------------ forward
 * Note [Sequential peepholes]
 * Unless fusion is off (mft_module_set_fusion), a sequential runs two
 * adjacent children as one op where one op computes exactly their
 * composition:
 *   - ReLU then MaxPool2d: mft_relu_max_pool2d (one pass; the relu-sized
 *     intermediate is never written; equal values and gradients);
 *   - Flatten over every dim after N (start 1, end the last dim for the
 *     input's rank) then Linear: mft_flatten_linear, which reads an NHWC or
 *     blocked (nChw16c, nChw8c) activation in its own memory order instead
 *     of copying it into the flattened order (docs/spec.md §4.2): the copy
 *     and its reverse in the backward (two conversions of cause reshape per
 *     training step) disappear. Values equal within float rounding (the sum
 *     runs in the memory order; bit for bit for NCHW).
 * On the module path the pair is the first child's name with the kind
 * "ReLU+MaxPool2d(2x2)" / "Flatten(1, 3)+Linear(3136, 128)", and the tape
 * holds one node, named by the op. */
static bool nn_flatten_linear_pair(const mft_module *c, const mft_module *nxt,
                                   const mft_tensor *x) {
    if (c->kind != MFT__NN_FLATTEN || !nxt || nxt->kind != MFT__NN_LINEAR) return false;
    const int r = mft_tensor_ndim(x);
    const int s = c->start_dim < 0 ? c->start_dim + r : c->start_dim;
    const int e = c->end_dim < 0 ? c->end_dim + r : c->end_dim;
    return r >= 2 && s == 1 && e == r - 1;
}

static bool nn_fusable_pair(const mft_module *c, const mft_module *nxt, const mft_tensor *x) {
    return (c->kind == MFT__NN_RELU && nxt && nxt->kind == MFT__NN_MAX_POOL2D) ||
           nn_flatten_linear_pair(c, nxt, x);
}

/* Runs the pair c, nxt as one op on the module path (Note [Sequential
 * peepholes]). */
static mft_tensor *nn_run_pair(mft_module *c, mft_module *nxt, const mft_tensor *x) {
    char kind[2 * MFT__NN_LABEL_LEN];
    snprintf(kind, sizeof kind, "%s+%s", c->label, nxt->label);
    const bool pushed = nn_push(c->name, kind);
    mft_tensor *y = c->kind == MFT__NN_RELU
                        ? mft_relu_max_pool2d(x, nxt->kernel, nxt->stride, NULL, NULL, false)
                        : mft_flatten_linear(x, nxt->param[0], nxt->param[1]);
    if (!y) nn_label(c->name, kind, pushed);
    mft_module_path_pop();
    return y;
}

/* Children in order, adjacent pairs fused (Note [Sequential peepholes]). */
static mft_tensor *sequential_forward(mft_module *l, const mft_tensor *x) {
    if (l->n == 0) return mft_tensor_retain((mft_tensor *)x);
    mft_tensor *cur = NULL;
    for (int i = 0; i < l->n; i++) {
        const mft_tensor *in = i == 0 ? x : cur;
        mft_module *c = l->child[i];
        mft_module *nxt = i + 1 < l->n ? l->child[i + 1] : NULL;
        mft_tensor *nx;
        if (!l->no_fuse && nn_fusable_pair(c, nxt, in)) {
            nx = nn_run_pair(c, nxt, in);
            i++;
        } else {
            nx = mft__nn_run_child(c, in);
        }
        mft_tensor_release(cur);
        cur = nx;
        if (!cur) return NULL;
    }
    return cur;
}

/* y = body(x) + shortcut(x) (x itself without a shortcut), then relu if
 * asked: PyTorch's BasicBlock adds before its last relu. */
static mft_tensor *residual_forward(mft_module *l, const mft_tensor *x) {
    mft_tensor *b = mft__nn_run_child(l->child[0], x);
    if (!b) return NULL;
    mft_tensor *s = l->n > 1 ? mft__nn_run_child(l->child[1], x) : mft_tensor_retain((mft_tensor *)x);
    mft_tensor *y = s ? mft_add(b, s) : NULL;
    mft_tensor_release(b);
    mft_tensor_release(s);
    if (y && l->relu) {
        mft_tensor *r = mft_relu(y);
        mft_tensor_release(y);
        y = r;
    }
    return y;
}

/* The user's forward, in a scope of its own: what it makes is released when
 * it returns, except the result, which is retained here (Note [Custom
 * forward] in mft/nn.h). The caller (mft__nn_run) suspended the user's scope;
 * it is resumed around the call so the inner scope owns the forward's
 * tensors. */
static mft_tensor *custom_forward(mft_module *l, const mft_tensor *x) {
    static const char fn[] = "mft_module_forward";
    mft_tensor *y = NULL;
    mft__scope_resume();
    if (mft_scope_begin() == MFT_OK) {
        y = l->fwd(l, x, l->ctx);
        if (y)
            mft_tensor_retain(y);
        else if (mft_last_error() == MFT_OK)
            mft__set_error(MFT_ERR_INVALID, "%s: the forward of %s returned NULL without an error",
                           fn, l->label);
        mft_scope_end();
    } else {
        mft__relabel_error(fn);
    }
    mft__scope_suspend();
    return y;
}

mft_tensor *mft__nn_container_forward(mft_module *l, const mft_tensor *x) {
    switch (l->kind) {
    case MFT__NN_SEQUENTIAL: return sequential_forward(l, x);
    case MFT__NN_RESIDUAL: return residual_forward(l, x);
    case MFT__NN_CUSTOM: return custom_forward(l, x);
    default: break;
    }
    mft__set_error(MFT_ERR_INTERNAL, "mft_module_forward: %s is not a container", l->label);
    return NULL;
}
