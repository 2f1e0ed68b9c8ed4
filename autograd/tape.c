/* autograd/tape.c — the tape (Note [Tape] in mft/autograd.h): requires_grad
 * flags and leaf gradients, per-thread recording and grad mode, the record
 * call ops make, and the backward walk. Each node also keeps what ran for it
 * forward and backward (kernels, conversions, layouts, the call site) for
 * the DOT picture (autograd/dot.c), and backward runs each node at its
 * forward call site. No op formulas live here: each node's backward
 * function sits beside its forward in ops/. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include "autograd_internal.h"
#include "mft/ops.h"

typedef struct mft__tape {
    uint64_t id;
    mft__ag_node **nodes;
    int64_t len, cap;
} mft__tape;

static atomic_ullong g_next_tape_id = 1;
static _Thread_local mft__tape *tl_tape = NULL;
static _Thread_local bool tl_grad_disabled = false;
static _Thread_local int64_t tl_conversions = 0;
/* Newest kernel / conversion event already given to a node: a forward node
 * gets the events after the previous record (or mft_tape_begin). */
static _Thread_local int64_t tl_kernel_mark = 0, tl_conv_mark = 0;

/* ---------------------------------------------------------------- meta */
static mft__ag_meta *ag_meta(mft_tensor *t, const char *fn) {
    if (t->autograd) return t->autograd;
    mft__ag_meta *m = mft__alloc_or_err(fn, sizeof *m, _Alignof(mft__ag_meta));
    if (!m) return NULL;
    memset(m, 0, sizeof *m);
    m->node = -1;
    m->pending = -1;
    t->autograd = m;
    return m;
}

/* Producer node index of t on the open tape, or -1. */
static int64_t ag_producer(const mft_tensor *t) {
    const mft__ag_meta *m = t ? t->autograd : NULL;
    if (!m || !tl_tape || m->tape_id != tl_tape->id) return -1;
    return m->node;
}

static bool ag_is_marked_leaf(const mft_tensor *t) {
    return t && t->autograd && t->autograd->requires_grad && ag_producer(t) < 0;
}

bool mft_tensor_requires_grad(const mft_tensor *t) {
    return t && t->autograd && (t->autograd->requires_grad || ag_producer(t) >= 0);
}

bool mft_tensor_is_leaf(const mft_tensor *t) { return ag_producer(t) < 0; }

mft_status mft_tensor_set_requires_grad(mft_tensor *t, bool requires_grad) {
    static const char fn[] = "mft_tensor_set_requires_grad";
    if (!t) {
        mft__null_arg(fn, "t");
        return MFT_ERR_NULL; /* the call's own status; the message keeps an earlier error */
    }
    if (t->dtype != MFT_F32 && t->dtype != MFT_F64) {
        mft__set_error(MFT_ERR_DTYPE, "%s: only floating tensors can require grad, got %s", fn,
                       mft_dtype_name(t->dtype));
        return MFT_ERR_DTYPE;
    }
    if (ag_producer(t) >= 0) {
        mft__set_error(MFT_ERR_INVALID,
                       "%s: tensor is the output of op '%s' recorded on the open tape; only "
                       "leaves can be marked",
                       fn, tl_tape->nodes[ag_producer(t)]->name);
        return MFT_ERR_INVALID;
    }
    if (!requires_grad && !t->autograd) return MFT_OK;
    mft__ag_meta *m = ag_meta(t, fn);
    if (!m) return MFT_ERR_NOMEM;
    m->requires_grad = requires_grad;
    return MFT_OK;
}

mft_tensor *mft_tensor_grad(const mft_tensor *t) {
    return t && t->autograd ? t->autograd->grad : NULL;
}

void mft_tensor_zero_grad(mft_tensor *t) {
    if (!t || !t->autograd) return;
    mft_tensor_release(t->autograd->grad);
    t->autograd->grad = NULL;
}

mft_status mft_tensor_set_grad(mft_tensor *t, mft_tensor *g) {
    static const char fn[] = "mft_tensor_set_grad";
    if (!t) {
        mft__null_arg(fn, "t");
        return MFT_ERR_NULL;
    }
    if (g) {
        char a[MFT__DIMS_BUF], b[MFT__DIMS_BUF];
        if (g->ndim != t->ndim || memcmp(g->sizes, t->sizes, (size_t)t->ndim * sizeof(int64_t))) {
            mft__set_error(MFT_ERR_SHAPE, "%s: grad sizes %s differ from the tensor's %s", fn,
                           mft__fmt_dims(a, sizeof a, g->ndim, g->sizes),
                           mft__fmt_dims(b, sizeof b, t->ndim, t->sizes));
            return MFT_ERR_SHAPE;
        }
        if (g->dtype != t->dtype) {
            mft__set_error(MFT_ERR_DTYPE, "%s: grad dtype %s differs from the tensor's %s", fn,
                           mft_dtype_name(g->dtype), mft_dtype_name(t->dtype));
            return MFT_ERR_DTYPE;
        }
    }
    if (g) {
        /* a tensor reachable from g through .grad links must not be t: the
         * references would form a cycle that no release ever frees */
        for (const mft_tensor *c = g; c; c = c->autograd ? c->autograd->grad : NULL)
            if (c == t) {
                mft__set_error(MFT_ERR_INVALID,
                               "%s: g is t itself or has t in its own chain of gradients (a "
                               "reference cycle); assign a copy",
                               fn);
                return MFT_ERR_INVALID;
            }
        if (t->numel > 0 && g->numel > 0 && mft__tensor_overlaps(t, g)) {
            mft__set_error(MFT_ERR_INVALID,
                           "%s: g shares memory with t (gradients accumulate in place and would "
                           "write t); assign a copy",
                           fn);
            return MFT_ERR_INVALID;
        }
    }
    if (!g && !t->autograd) return MFT_OK;
    mft__ag_meta *m = ag_meta(t, fn);
    if (!m) return MFT_ERR_NOMEM;
    if (g) mft_tensor_retain(g);
    mft_tensor_release(m->grad);
    m->grad = g;
    return MFT_OK;
}

/* ---------------------------------------------------------------- modes */
bool mft_set_grad_enabled(bool enabled) {
    bool prev = !tl_grad_disabled;
    tl_grad_disabled = !enabled;
    return prev;
}
bool mft_grad_enabled(void) { return !tl_grad_disabled; }
bool mft_tape_recording(void) { return tl_tape && !tl_grad_disabled; }
int64_t mft_tape_size(void) { return tl_tape ? tl_tape->len : 0; }
int64_t mft_autograd_conversions(void) { return tl_conversions; }
void mft_autograd_reset_conversions(void) { tl_conversions = 0; }

/* Thread exit with the tape still open: end it (tensor/thread_exit.c). */
static void ag_tape_end_at_exit(void) {
    if (tl_tape) mft_tape_end();
}

mft_status mft_tape_begin(void) {
    static const char fn[] = "mft_tape_begin";
    if (tl_tape) {
        mft__set_error(MFT_ERR_SCOPE, "%s: a tape is already open on this thread (%lld nodes)",
                       fn, (long long)tl_tape->len);
        return MFT_ERR_SCOPE;
    }
    mft__tape *tp = mft__alloc_or_err(fn, sizeof *tp, _Alignof(mft__tape));
    if (!tp) return MFT_ERR_NOMEM;
    memset(tp, 0, sizeof *tp);
    tp->id = atomic_fetch_add(&g_next_tape_id, 1);
    tl_tape = tp;
    mft__thread_exit_arm(MFT__TEXIT_TAPE, ag_tape_end_at_exit);
    mft__tl_tape_open = true;
    tl_kernel_mark = mft__kernel_seq();
    tl_conv_mark = mft__conv_seq();
    return MFT_OK;
}

bool mft__ag_tape_view(mft__ag_node *const **nodes, int64_t *len) {
    if (!tl_tape) return false;
    *nodes = tl_tape->nodes;
    *len = tl_tape->len;
    return true;
}

static void ag_node_release_saved(mft__ag_node *n) {
    for (int i = 0; i < n->nsaved; i++) {
        mft_tensor_release(n->saved[i]);
        n->saved[i] = NULL;
    }
    for (int j = 0; j < n->nout; j++) {
        mft_tensor_release(n->out[j].grad);
        n->out[j].grad = NULL;
    }
    n->released = true;
}

static void ag_node_free(mft__ag_node *n) {
    if (!n) return;
    ag_node_release_saved(n);
    for (int k = 0; k < n->nin; k++) mft_tensor_release(n->in[k].leaf);
    mft__free(n);
}

mft_status mft_tape_end(void) {
    if (!tl_tape) {
        mft__set_error(MFT_ERR_SCOPE, "mft_tape_end: no tape is open on this thread");
        return MFT_ERR_SCOPE;
    }
    mft__tape *tp = tl_tape;
    tl_tape = NULL; /* outputs stop resolving to nodes from here on */
    mft__tl_tape_open = false;
    mft__thread_exit_disarm(MFT__TEXIT_TAPE);
    for (int64_t i = tp->len - 1; i >= 0; i--) ag_node_free(tp->nodes[i]);
    mft__free(tp->nodes);
    mft__free(tp);
    return MFT_OK;
}

/* ---------------------------------------------------------------- events */
static bool ag_same_str(const char *a, const char *b) {
    return a == b || (a && b && strcmp(a, b) == 0);
}

/* Adds kernel runs (from, to] to e: counts them all and keeps the first
 * MFT__AG_KEEP distinct (op, kernel) pairs still in the ring. */
static void ag_note_kernels(mft__ag_events *e, int64_t from, int64_t to) {
    if (to <= from) return;
    e->nkernels += to - from;
    int64_t s = to - from > MFT__EVENT_RING ? to - MFT__EVENT_RING + 1 : from + 1;
    for (; s <= to; s++) {
        mft__kernel_rec r;
        if (!mft__kernel_get(s, &r)) continue;
        int j = 0;
        while (j < e->nkept &&
               !(ag_same_str(e->kernel[j].op, r.op) && ag_same_str(e->kernel[j].kernel, r.kernel)))
            j++;
        if (j < e->nkept) {
            e->kernel_calls[j]++;
        } else if (j < MFT__AG_KEEP) {
            e->kernel[j] = r;
            e->kernel_calls[j] = 1;
            e->nkept++;
        }
    }
}

/* The input of n a conversion with unknown owner belongs to, by layout
 * labels. Forward: a copy the op made (fallback, operand, reshape) starts
 * from an input, so the input laid out as its source; an explicit one was
 * made by the user before the op, so first the input laid out as its
 * result. Backward: an input needing grad laid out as the copy's result.
 * -1 when none fits. */
static int ag_conv_owner(const mft__ag_node *n, const mft__conv_rec *r, bool backward) {
    const bool result_first = backward || r->cause == MFT_CAUSE_EXPLICIT;
    for (int pass = 0; pass < (backward ? 1 : 2); pass++) {
        const char *want = result_first != (pass == 1) ? r->to : r->from;
        for (int k = 0; k < n->nin; k++) {
            const mft__ag_input *in = &n->in[k];
            if (!in->layout || (backward && !in->needs_grad)) continue;
            if (ag_same_str(in->layout, want)) return k;
        }
    }
    return -1;
}

/* Adds conversions (from, to] to e as belonging to input k (-1: unknown,
 * guessed by ag_conv_owner). */
static void ag_note_convs(mft__ag_events *e, const mft__ag_node *n, int64_t from, int64_t to,
                          int k, bool backward) {
    if (to <= from) return;
    e->nconv += to - from;
    int64_t s = to - from > MFT__EVENT_RING ? to - MFT__EVENT_RING + 1 : from + 1;
    for (; s <= to; s++) {
        mft__conv_rec r;
        if (!mft__conv_get(s, &r)) continue;
        e->conv_bytes += r.bytes;
        if (e->nconv_kept == MFT__AG_KEEP) continue;
        e->conv[e->nconv_kept] = r;
        e->conv_input[e->nconv_kept++] = k >= 0 ? k : ag_conv_owner(n, &r, backward);
    }
}

/* ---------------------------------------------------------------- recording */
bool mft__ag_wants(int n, const mft_tensor *const *inputs) {
    if (!tl_tape || tl_grad_disabled) return false;
    for (int k = 0; k < n; k++)
        if (mft_tensor_requires_grad(inputs[k])) return true;
    return false;
}

mft_status mft__ag_check_inplace(const char *fn, const mft_tensor *t) {
    if (!tl_tape || tl_grad_disabled || !mft_tensor_requires_grad(t)) return MFT_OK;
    mft__set_error(MFT_ERR_UNSUPPORTED,
                   "%s: in-place or out= write to a tensor that requires grad while the tape "
                   "records (use the out-of-place op, or disable grad mode)",
                   fn);
    return MFT_ERR_UNSUPPORTED;
}

static size_t ag_align(size_t n) { return (n + 15) & ~(size_t)15; }

mft_status mft__ag_record(const char *fn, const char *name, mft__ag_backward_fn backward,
                          int nin, const mft_tensor *const *inputs, int nout,
                          mft_tensor *const *outputs, int nsaved,
                          const mft_tensor *const *saved, const void *params,
                          size_t params_size) {
    mft__tape *tp = tl_tape;
    if (!tp) return MFT_OK;
    /* this node's stretch of events: everything since the previous record */
    const int64_t kmark = tl_kernel_mark, cmark = tl_conv_mark;
    tl_kernel_mark = mft__kernel_seq();
    tl_conv_mark = mft__conv_seq();
    /* an op that returned one of its inputs (a no-op contiguous, say) adds
     * nothing: the gradient flows through the same object */
    for (int j = 0; j < nout; j++)
        for (int k = 0; k < nin; k++)
            if (outputs[j] == inputs[k]) return MFT_OK;
    /* everything that can fail happens before the tape changes */
    for (int j = 0; j < nout; j++)
        if (!ag_meta(outputs[j], fn)) return MFT_ERR_NOMEM;
    if (tp->len == tp->cap) {
        int64_t cap = tp->cap ? tp->cap * 2 : 256;
        mft__ag_node **nn = mft__alloc_or_err(fn, (size_t)cap * sizeof *nn, _Alignof(void *));
        if (!nn) return MFT_ERR_NOMEM;
        if (tp->len) memcpy(nn, tp->nodes, (size_t)tp->len * sizeof *nn);
        mft__free(tp->nodes);
        tp->nodes = nn;
        tp->cap = cap;
    }
    size_t off_in = ag_align(sizeof(mft__ag_node));
    size_t off_out = off_in + ag_align((size_t)nin * sizeof(mft__ag_input));
    size_t off_saved = off_out + ag_align((size_t)nout * sizeof(mft__ag_output));
    size_t off_ver = off_saved + ag_align((size_t)nsaved * sizeof(mft_tensor *));
    size_t off_par = off_ver + ag_align((size_t)nsaved * sizeof(int64_t));
    size_t total = off_par + ag_align(params_size);
    char *blk = mft__alloc_or_err(fn, total, 16);
    if (!blk) return MFT_ERR_NOMEM;
    memset(blk, 0, total);
    mft__ag_node *n = (mft__ag_node *)blk;
    n->name = name;
    n->backward = backward;
    n->nin = nin;
    n->nout = nout;
    n->nsaved = nsaved;
    n->in = (mft__ag_input *)(blk + off_in);
    n->out = (mft__ag_output *)(blk + off_out);
    n->saved = (mft_tensor **)(blk + off_saved);
    n->saved_version = (int64_t *)(blk + off_ver);
    if (params_size) memcpy(blk + off_par, params, params_size);
    n->params = params_size ? blk + off_par : NULL;
    n->params_size = params_size;
    for (int k = 0; k < nin; k++) {
        const mft_tensor *x = inputs[k];
        mft__ag_input *in = &n->in[k];
        in->node = -1;
        if (!x) continue;
        in->layout = mft__layout_label(x);
        in->tag = x->tag;
        in->dtype = x->dtype;
        in->ndim = x->ndim;
        memcpy(in->sizes, x->sizes, (size_t)x->ndim * sizeof(int64_t));
        int64_t p = ag_producer(x);
        if (p >= 0) {
            in->needs_grad = true;
            in->node = p;
            in->out = x->autograd->out;
        } else if (ag_is_marked_leaf(x)) {
            in->needs_grad = true;
            in->leaf = mft_tensor_retain((mft_tensor *)x);
        }
    }
    for (int i = 0; i < nsaved; i++) {
        if (!saved[i]) continue;
        n->saved[i] = mft_tensor_retain((mft_tensor *)saved[i]);
        n->saved_version[i] = (int64_t)atomic_load(&saved[i]->storage->version);
    }
    for (int j = 0; j < nout; j++) {
        mft_tensor *y = outputs[j];
        mft__ag_output *o = &n->out[j];
        o->tag = y->tag;
        o->layout = mft__layout_label(y);
        o->dtype = y->dtype;
        o->ndim = y->ndim;
        memcpy(o->sizes, y->sizes, (size_t)y->ndim * sizeof(int64_t));
        /* integer outputs (pool indices) carry no gradient */
        if (y->dtype != MFT_F32 && y->dtype != MFT_F64) continue;
        y->autograd->tape_id = tp->id;
        y->autograd->node = tp->len;
        y->autograd->out = j;
    }
    mft__site_get(&n->site_file, &n->site_line);
    ag_note_kernels(&n->fwd, kmark, tl_kernel_mark);
    ag_note_convs(&n->fwd, n, cmark, tl_conv_mark, -1, false);
    tp->nodes[tp->len++] = n;
    return MFT_OK;
}

void mft__ag_drop_result(mft_tensor *y) {
    if (!y) return;
    mft_status st = mft_last_error();
    char msg[512];
    snprintf(msg, sizeof msg, "%s", mft_last_error_message());
    (void)mft_scope_keep(y); /* fails harmlessly when the scope does not own y */
    mft_tensor_release(y);
    mft__set_error(st != MFT_OK ? st : MFT_ERR_NOMEM, "%s", msg);
}

mft_status mft__ag_record1(const char *fn, const char *name, mft__ag_backward_fn backward,
                           const mft_tensor *x, mft_tensor *y, bool save_input,
                           bool save_output, const void *params, size_t params_size) {
    const mft_tensor *saved[2];
    int ns = 0;
    if (save_input) saved[ns++] = x;
    if (save_output) saved[ns++] = y;
    mft_tensor *outs[1] = {y};
    return mft__ag_record(fn, name, backward, 1, &x, 1, outs, ns, saved, params, params_size);
}

/* ---------------------------------------------------------------- backward */
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

/* The format an input's gradient must have (SPEC §5). */
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
    mft_format f = ag_target_format(in);
    if (!mft_tensor_is_contiguous(g, f)) {
        mft__cause_push(MFT_CAUSE_GRADIENT, n->name);
        mft_tensor *c = mft_contiguous(g, f);
        mft__cause_pop();
        mft_tensor_release(g);
        if (!c) return NULL;
        tl_conversions++;
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
    if (dense) {
        for (int d = 0; d < leaf->ndim; d++)
            if (leaf->sizes[d] > 1 && g->strides[d] != leaf->strides[d]) same = false;
    } else {
        same = mft_tensor_is_contiguous(g, MFT_CONTIGUOUS);
    }
    bool sole = atomic_load(&g->refcount) == 1 && atomic_load(&g->storage->refcount) == 1 &&
                g->offset == 0;
    if (same && sole) return mft_tensor_retain(g);
    mft_tensor *c = dense ? mft_empty_strided(leaf->ndim, leaf->sizes, leaf->strides, leaf->dtype)
                          : mft_empty(leaf->ndim, leaf->sizes, leaf->dtype, MFT_CONTIGUOUS);
    if (!c) return NULL;
    if (dense && leaf->ndim >= 3 && leaf->ndim <= 5) mft__tensor_set_tag_from(c, leaf->tag);
    if (mft_copy_(c, g) != MFT_OK) {
        mft_tensor_release(c);
        return NULL;
    }
    return c;
}

/* Runs node i: versions, backward function, conversion, accumulation. */
static mft_status ag_run_node(mft__tape *tp, int64_t i, ag_walk *w) {
    mft__ag_node *n = tp->nodes[i];
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
    ag_note_convs(&n->bwd, n, cmark, mft__conv_seq(), -1, true);
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
        ag_note_convs(&n->bwd, n, cmark, mft__conv_seq(), k, true);
        cmark = mft__conv_seq();
        if (!g) {
            st = mft_last_error();
            break;
        }
        in->grad_layout = mft__layout_label(g);
        if (in->node >= 0) {
            mft__ag_output *dst = &tp->nodes[in->node]->out[in->out];
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
    ag_note_kernels(&n->bwd, kmark, mft__kernel_seq());
    ag_note_convs(&n->bwd, n, cmark, mft__conv_seq(), -1, true);
    for (int j = 0; gout_p && j < n->nout; j++) mft_tensor_release(gout_p[j]);
    for (int k = 0; gin_p && k < n->nin; k++) mft_tensor_release(gin_p[k]);
    if (gout_p != gout) mft__free(gout_p);
    if (gin_p != gin) mft__free(gin_p);
    if (st == MFT_OK) ag_node_release_saved(n);
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
    mft__tape *tp = tl_tape;
    int64_t root = ag_producer(loss);
    if (!tp || root < 0) {
        mft__set_error(MFT_ERR_INVALID,
                       "%s: loss was not produced by an op recorded on this thread's open tape%s",
                       fn, tp ? "" : " (no tape is open: call mft_tape_begin before the forward)");
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
    mft__ag_node *rn = tp->nodes[root];
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
        for (int64_t i = root; i >= 0 && st == MFT_OK; i--) st = ag_run_node(tp, i, &w);
        if (st == MFT_OK) st = ag_commit(&w);
    }
    for (int64_t i = 0; i < w.len; i++) {
        w.items[i].leaf->autograd->pending = -1;
        mft_tensor_release(w.items[i].grad);
    }
    mft__free(w.items);
    if (st != MFT_OK) /* gradients parked on nodes die with the failed walk */
        for (int64_t i = root; i >= 0; i--)
            for (int j = 0; j < tp->nodes[i]->nout; j++) {
                mft_tensor_release(tp->nodes[i]->out[j].grad);
                tp->nodes[i]->out[j].grad = NULL;
            }
    mft_set_grad_enabled(was_enabled);
    mft__scope_resume();
    mft_profile_site(w.site_file, w.site_line);
    tl_kernel_mark = mft__kernel_seq(); /* a later forward record starts here */
    tl_conv_mark = mft__conv_seq();
    return st;
}
