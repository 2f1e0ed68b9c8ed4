/* autograd/backward.c — the backward engine (Note [Tape] in mft/autograd.h):
 * mft_backward walks this thread's open tape from the loss's node down,
 * checks each node's saved versions, runs its backward function (which
 * lives beside its forward in ops/), converts each input gradient to the
 * input's format (docs/spec.md §5), accumulates gradients of shared inputs,
 * and commits leaf .grad only when the whole walk succeeded. It is the
 * layer above ops: it calls public ops (add, contiguous, to_dtype) on the
 * gradients. The tape itself and the recording that ops do are in
 * autograd/tape.c. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include "autograd_internal.h"
#include "mft/ops.h"

typedef struct ag_pending {
    mft_tensor *leaf; /* borrowed (the node holds a reference) */
    mft_tensor *grad; /* owned */
} ag_pending;

typedef struct ag_walk {
    ag_pending *items;
    int64_t len, cap;
    const char *site_file; /* the call site of mft_backward, restored at the end */
    int site_line;
} ag_walk;

/* a + b into a new tensor; releases both. */
static mft_tensor *ag_sum2(mft_tensor *a, mft_tensor *b) {
    mft_tensor *s = mft_add(a, b);
    mft_tensor_release(a);
    mft_tensor_release(b);
    return s;
}

static mft_status ag_add_pending(ag_walk *w, mft_tensor *leaf, mft_tensor *g) {
    mft__ag_meta *m = leaf->autograd;
    if (m->pending >= 0) {
        ag_pending *p = &w->items[m->pending];
        p->grad = ag_sum2(p->grad, g);
        return p->grad ? MFT_OK : mft_last_error();
    }
    if (w->len == w->cap) {
        int64_t cap = w->cap ? w->cap * 2 : 32;
        ag_pending *ni = mft__alloc_or_err("mft_backward", (size_t)cap * sizeof *ni,
                                           _Alignof(ag_pending));
        if (!ni) {
            mft_tensor_release(g);
            return MFT_ERR_NOMEM;
        }
        if (w->len) memcpy(ni, w->items, (size_t)w->len * sizeof *ni);
        mft__free(w->items);
        w->items = ni;
        w->cap = cap;
    }
    m->pending = w->len;
    w->items[w->len++] = (ag_pending){leaf, g};
    return MFT_OK;
}

/* The format an input's gradient must have (docs/spec.md §5). */
static mft_format ag_target_format(const mft__ag_input *in) {
    return mft__rule_grad_format(in->tag, in->ndim);
}

/* Checks and converts one gradient; consumes g, returns the converted one. */
static mft_tensor *ag_fix_grad(const mft__ag_node *n, int k, mft_tensor *g) {
    const mft__ag_input *in = &n->in[k];
    char a[MFT__DIMS_BUF], b[MFT__DIMS_BUF];
    if (g->ndim != in->ndim || memcmp(g->sizes, in->sizes, (size_t)in->ndim * sizeof(int64_t))) {
        mft__set_error(MFT_ERR_INTERNAL,
                       "mft_backward: op '%s' returned a gradient of sizes %s for input %d of "
                       "sizes %s",
                       n->name, mft__fmt_dims(a, sizeof a, g->ndim, g->sizes), k,
                       mft__fmt_dims(b, sizeof b, in->ndim, in->sizes));
        mft_tensor_release(g);
        return NULL;
    }
    if (g->dtype != in->dtype) {
        mft_tensor *c = mft_to_dtype(g, in->dtype);
        mft_tensor_release(g);
        if (!c) return NULL;
        g = c;
    }
    if (in->blocked) { /* an MFT_BLOCKED input: its own packed descriptor */
        mft_layout have;
        mft__layout_of(g, &have);
        if (mft_layout_equal(&have, in->blocked)) return g;
        mft__cause_push(MFT_CAUSE_GRADIENT, n->name);
        mft_tensor *c = mft__to_layout("mft_backward", g, in->blocked);
        mft__cause_pop();
        mft_tensor_release(g);
        if (c) mft__ag_count_conversion();
        return c;
    }
    mft_format f = ag_target_format(in);
    if (!mft_tensor_is_contiguous(g, f)) {
        mft__cause_push(MFT_CAUSE_GRADIENT, n->name);
        mft_tensor *c = mft_contiguous(g, f);
        mft__cause_pop();
        mft_tensor_release(g);
        if (!c) return NULL;
        mft__ag_count_conversion();
        g = c;
    } else if (in->ndim >= 3 && in->ndim <= 5 && g->tag != f) {
        mft__tensor_declare(g, f); /* strides fit both: say which one was meant */
    }
    return g;
}

/* The .grad a leaf gets the first time (PyTorch's layout contract): g
 * itself when we own it alone and it already has the right strides, else a
 * copy with the leaf's strides (dense leaf) or contiguous. */
static mft_tensor *ag_leaf_grad_layout(const mft_tensor *leaf, mft_tensor *g) {
    bool dense = mft_tensor_is_dense(leaf);
    bool same = true;
    if (leaf->nblocks) { /* a blocked leaf: its own descriptor (docs/spec.md §7) */
        mft_layout a, b;
        mft__layout_of(leaf, &a);
        mft__layout_of(g, &b);
        same = g->nblocks && mft_layout_equal(&a, &b);
    } else if (dense) {
        for (int d = 0; d < leaf->ndim; d++)
            if (leaf->sizes[d] > 1 && g->strides[d] != leaf->strides[d]) same = false;
    } else {
        same = mft_tensor_is_contiguous(g, MFT_CONTIGUOUS);
    }
    bool sole = atomic_load(&g->refcount) == 1 && atomic_load(&g->storage->refcount) == 1 &&
                g->offset == 0;
    if (same && sole) return mft_tensor_retain(g);
    mft_tensor *c = leaf->nblocks ? mft_empty_like(leaf, MFT_PRESERVE)
                    : dense ? mft_empty_strided(leaf->ndim, leaf->sizes, leaf->strides, leaf->dtype)
                            : mft_empty(leaf->ndim, leaf->sizes, leaf->dtype, MFT_CONTIGUOUS);
    if (!c) return NULL;
    if (dense && leaf->ndim >= 3 && leaf->ndim <= 5) mft__tensor_set_tag_from(c, leaf->tag);
    if (mft_copy_(c, g) != MFT_OK) {
        mft_tensor_release(c);
        return NULL;
    }
    return c;
}

/* Backward events carry the module path of the forward op (Note [Module
 * path] in tensor/naming.c): the node's path is pushed while it runs (on top
 * of the path at the mft_backward call, "" in a training loop). Returns
 * whether a pop is owed; a push that fails (a path over the limits) is
 * still popped, and leaves the thread's last error as it was. */
static bool ag_module_enter(const mft__ag_node *n) {
    if (!n->module || !n->module[0]) return false;
    const mft_status before = mft_last_error();
    char msg[512];
    snprintf(msg, sizeof msg, "%s", mft_last_error_message());
    if (mft_module_path_push(n->module, n->module_kind[0] ? n->module_kind : NULL) != MFT_OK) {
        if (before == MFT_OK)
            mft_clear_error();
        else
            mft__set_error(before, "%s", msg);
    }
    return true;
}

/* Runs node i: versions, backward function, conversion, accumulation. */
static mft_status ag_run_node(mft__ag_node *const *nodes, int64_t i, ag_walk *w) {
    mft__ag_node *n = nodes[i];
    bool any = false;
    for (int j = 0; j < n->nout; j++) any = any || n->out[j].grad;
    if (!any) return MFT_OK;
    if (n->released) {
        mft__set_error(MFT_ERR_STALE,
                       "mft_backward: op '%s' (node %lld) already ran backward; a tape runs "
                       "backward once",
                       n->name, (long long)i);
        return MFT_ERR_STALE;
    }
    for (int s = 0; s < n->nsaved; s++) {
        const mft_tensor *t = n->saved[s];
        if (!t) continue;
        int64_t v = (int64_t)atomic_load(&t->storage->version);
        if (v != n->saved_version[s]) {
            char a[MFT__DIMS_BUF];
            mft__set_error(MFT_ERR_STALE,
                           "mft_backward: op '%s' (node %lld): saved tensor %d of sizes %s was "
                           "modified in place after it was saved (version %lld, now %lld)",
                           n->name, (long long)i, s, mft__fmt_dims(a, sizeof a, t->ndim, t->sizes),
                           (long long)n->saved_version[s], (long long)v);
            return MFT_ERR_STALE;
        }
    }
    mft_tensor *gout[16] = {0}, *gin[64] = {0};
    mft_tensor **gout_p = gout, **gin_p = gin;
    mft_status st = MFT_OK;
    /* backward events point at the forward call that recorded the node */
    if (n->site_file) mft_profile_site(n->site_file, n->site_line);
    else mft_profile_site(w->site_file, w->site_line);
    const bool module_pushed = ag_module_enter(n);
    const int64_t kmark = mft__kernel_seq();
    int64_t cmark = mft__conv_seq();
    if (n->nout > 16 || n->nin > 64) {
        gout_p = mft__alloc_or_err("mft_backward", (size_t)n->nout * sizeof *gout_p, 16);
        gin_p = mft__alloc_or_err("mft_backward", (size_t)n->nin * sizeof *gin_p, 16);
        if (!gout_p || !gin_p) {
            st = MFT_ERR_NOMEM;
            goto done;
        }
        memset(gout_p, 0, (size_t)n->nout * sizeof *gout_p);
        memset(gin_p, 0, (size_t)n->nin * sizeof *gin_p);
    }
    for (int j = 0; j < n->nout; j++) {
        mft__ag_output *o = &n->out[j];
        if (o->grad) {
            gout_p[j] = mft_tensor_retain(o->grad);
        } else {
            mft_format f = (o->tag == MFT_CHANNELS_LAST && o->ndim >= 3 && o->ndim <= 5)
                               ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
            gout_p[j] = mft_zeros(o->ndim, o->sizes, o->dtype, f);
            if (!gout_p[j]) {
                st = mft_last_error();
                goto done;
            }
        }
    }
    st = n->backward(n, gout_p, gin_p);
    mft__ag_note_convs(&n->bwd, n, cmark, mft__conv_seq(), -1, true);
    cmark = mft__conv_seq();
    if (st != MFT_OK) goto done;
    for (int k = 0; k < n->nin && st == MFT_OK; k++) {
        mft_tensor *g = gin_p[k];
        gin_p[k] = NULL;
        if (!g) continue;
        mft__ag_input *in = &n->in[k];
        if (!in->needs_grad) {
            mft_tensor_release(g);
            continue;
        }
        g = ag_fix_grad(n, k, g);
        mft__ag_note_convs(&n->bwd, n, cmark, mft__conv_seq(), k, true);
        cmark = mft__conv_seq();
        if (!g) {
            st = mft_last_error();
            break;
        }
        in->grad_layout = mft__layout_label(g);
        if (in->node >= 0) {
            mft__ag_output *dst = &nodes[in->node]->out[in->out];
            if (!dst->grad) {
                dst->grad = g;
            } else {
                dst->grad = ag_sum2(dst->grad, g);
                if (!dst->grad) st = mft_last_error();
            }
        } else if (in->leaf) {
            st = ag_add_pending(w, in->leaf, g);
        } else {
            mft_tensor_release(g);
        }
    }
done:
    mft__ag_note_kernels(&n->bwd, kmark, mft__kernel_seq());
    mft__ag_note_convs(&n->bwd, n, cmark, mft__conv_seq(), -1, true);
    if (module_pushed) mft_module_path_pop();
    for (int j = 0; gout_p && j < n->nout; j++) mft_tensor_release(gout_p[j]);
    for (int k = 0; gin_p && k < n->nin; k++) mft_tensor_release(gin_p[k]);
    if (gout_p != gout) mft__free(gout_p);
    if (gin_p != gin) mft__free(gin_p);
    if (st == MFT_OK) mft__ag_node_release_saved(n);
    if (st != MFT_OK && mft_last_error() == MFT_OK)
        mft__set_error(st, "mft_backward: op '%s' failed", n->name);
    return st;
}

/* Makes every pending leaf gradient final, then commits all of them. */
static mft_status ag_commit(ag_walk *w) {
    for (int64_t i = 0; i < w->len; i++) {
        ag_pending *p = &w->items[i];
        if (p->leaf->autograd->grad) continue;
        mft_tensor *c = ag_leaf_grad_layout(p->leaf, p->grad);
        if (!c) return mft_last_error();
        mft_tensor_release(p->grad);
        p->grad = c;
    }
    for (int64_t i = 0; i < w->len; i++) {
        ag_pending *p = &w->items[i];
        mft__ag_meta *m = p->leaf->autograd;
        if (m->grad) {
            mft_status st = mft_add_(m->grad, p->grad);
            if (st != MFT_OK) return st; /* only a user-made broken grad gets here */
        } else {
            m->grad = p->grad;
            p->grad = NULL;
        }
    }
    return MFT_OK;
}

mft_status mft_backward(mft_tensor *loss, const mft_tensor *grad_output) {
    static const char fn[] = "mft_backward";
    if (!loss) {
        mft__null_arg(fn, "loss");
        return MFT_ERR_NULL; /* the call's own status; the message keeps an earlier error */
    }
    mft__ag_node *const *nodes = NULL;
    int64_t len = 0;
    const bool open = mft__ag_tape_view(&nodes, &len);
    int64_t root = mft__ag_producer(loss);
    if (open && root < 0 && !mft_tensor_requires_grad(loss) && !mft__ag_recorded_elsewhere(loss)) {
        /* nothing recorded it: none of its ops had an input requiring grad */
        mft__set_error(MFT_ERR_INVALID,
                       "%s: the loss does not require grad: no input of the ops that produced it "
                       "requires grad (mark parameters with mft_tensor_set_requires_grad)%s",
                       fn, mft_grad_enabled() ? "" : "; grad mode is off on this thread");
        return MFT_ERR_INVALID;
    }
    if (!open || root < 0) {
        mft__set_error(MFT_ERR_INVALID,
                       "%s: loss was not produced by an op recorded on this thread's open tape%s",
                       fn,
                       !open ? " (no tape is open: call mft_tape_begin before the forward)"
                       : mft__ag_recorded_elsewhere(loss)
                           ? " (it was recorded on another tape: one that has ended, or another "
                             "thread's)"
                           : " (it is a leaf)");
        return MFT_ERR_INVALID;
    }
    mft_tensor *seed = NULL;
    if (grad_output) {
        char a[MFT__DIMS_BUF], b[MFT__DIMS_BUF];
        if (grad_output->ndim != loss->ndim ||
            memcmp(grad_output->sizes, loss->sizes, (size_t)loss->ndim * sizeof(int64_t))) {
            mft__set_error(MFT_ERR_SHAPE, "%s: grad_output sizes %s differ from loss sizes %s", fn,
                           mft__fmt_dims(a, sizeof a, grad_output->ndim, grad_output->sizes),
                           mft__fmt_dims(b, sizeof b, loss->ndim, loss->sizes));
            return MFT_ERR_SHAPE;
        }
        if (grad_output->dtype != loss->dtype) { /* as PyTorch: no silent cast */
            mft__set_error(MFT_ERR_DTYPE, "%s: grad_output has dtype %s but loss has dtype %s", fn,
                           mft_dtype_name(grad_output->dtype), mft_dtype_name(loss->dtype));
            return MFT_ERR_DTYPE;
        }
    } else if (loss->numel != 1) {
        char a[MFT__DIMS_BUF];
        mft__set_error(MFT_ERR_SHAPE,
                       "%s: loss of sizes %s has %lld elements; pass grad_output for a non-scalar "
                       "loss",
                       fn, mft__fmt_dims(a, sizeof a, loss->ndim, loss->sizes),
                       (long long)loss->numel);
        return MFT_ERR_SHAPE;
    }
    mft__ag_node *rn = nodes[root];
    if (rn->released) {
        mft__set_error(MFT_ERR_STALE,
                       "%s: op '%s' that produced loss already ran backward; a tape runs "
                       "backward once",
                       fn, rn->name);
        return MFT_ERR_STALE;
    }
    ag_walk w = {0};
    mft__site_get(&w.site_file, &w.site_line);
    mft__scope_suspend();
    bool was_enabled = mft_set_grad_enabled(false);
    seed = grad_output ? mft_tensor_retain((mft_tensor *)grad_output)
                       : mft_ones(loss->ndim, loss->sizes, loss->dtype, MFT_CONTIGUOUS);
    mft_status st = seed ? MFT_OK : mft_last_error();
    if (st == MFT_OK) {
        mft__ag_output *o = &rn->out[loss->autograd->out];
        mft_tensor_release(o->grad);
        o->grad = seed;
        for (int64_t i = root; i >= 0 && st == MFT_OK; i--) st = ag_run_node(nodes, i, &w);
        if (st == MFT_OK) st = ag_commit(&w);
    }
    for (int64_t i = 0; i < w.len; i++) {
        w.items[i].leaf->autograd->pending = -1;
        mft_tensor_release(w.items[i].grad);
    }
    mft__free(w.items);
    if (st != MFT_OK) /* gradients parked on nodes die with the failed walk */
        for (int64_t i = root; i >= 0; i--)
            for (int j = 0; j < nodes[i]->nout; j++) {
                mft_tensor_release(nodes[i]->out[j].grad);
                nodes[i]->out[j].grad = NULL;
            }
    mft_set_grad_enabled(was_enabled);
    mft__scope_resume();
    mft_profile_site(w.site_file, w.site_line);
    mft__ag_restart_events(); /* a later forward record starts here */
    return st;
}
