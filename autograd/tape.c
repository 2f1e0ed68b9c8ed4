/* autograd/tape.c — the tape and the recording ops do (Note [Tape] in
 * mft/autograd.h): requires_grad flags and leaf gradients, per-thread
 * recording and grad mode, tape begin / end, and the record call. Each node
 * also keeps what ran for it forward and backward (kernels, conversions,
 * layouts, the call site and module path of its forward) for the backward
 * walk's events and the DOT picture (autograd/dot.c). This is the
 * layer just above the tensor core: it calls no op. The backward walk is
 * autograd/backward.c; each node's backward function sits beside its
 * forward in ops/. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include "autograd_internal.h"

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

int64_t mft__ag_producer(const mft_tensor *t) {
    const mft__ag_meta *m = t ? t->autograd : NULL;
    if (!m || !tl_tape || m->tape_id != tl_tape->id) return -1;
    return m->node;
}

bool mft__ag_recorded_elsewhere(const mft_tensor *t) {
    const mft__ag_meta *m = t ? t->autograd : NULL;
    return m && m->tape_id != 0 && (!tl_tape || m->tape_id != tl_tape->id);
}

static bool ag_is_marked_leaf(const mft_tensor *t) {
    return t && t->autograd && t->autograd->requires_grad && mft__ag_producer(t) < 0;
}

bool mft_tensor_requires_grad(const mft_tensor *t) {
    return t && t->autograd && (t->autograd->requires_grad || mft__ag_producer(t) >= 0);
}

bool mft_tensor_is_leaf(const mft_tensor *t) { return mft__ag_producer(t) < 0; }

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
    if (mft__ag_producer(t) >= 0) {
        mft__set_error(MFT_ERR_INVALID,
                       "%s: tensor is the output of op '%s' recorded on the open tape; only "
                       "leaves can be marked",
                       fn, tl_tape->nodes[mft__ag_producer(t)]->name);
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
void mft_autograd_conversions_reset(void) { tl_conversions = 0; }

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

void mft__ag_node_release_saved(mft__ag_node *n) {
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
    mft__ag_node_release_saved(n);
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
void mft__ag_note_kernels(mft__ag_events *e, int64_t from, int64_t to) {
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
void mft__ag_note_convs(mft__ag_events *e, const mft__ag_node *n, int64_t from, int64_t to,
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
    const char *path = mft_module_path(), *kind = mft_module_kind();
    const size_t path_len = strlen(path), kind_len = strlen(kind);
    /* MFT_BLOCKED inputs keep their descriptor: their gradient gets it */
    int nblk = 0;
    for (int k = 0; k < nin; k++)
        if (inputs[k] && inputs[k]->nblocks && inputs[k]->tag == MFT_BLOCKED) nblk++;
    size_t off_lay = off_par + ag_align(params_size);
    size_t off_path = off_lay + ag_align((size_t)nblk * sizeof(mft_layout));
    size_t total = off_path + path_len + 1 + kind_len + 1;
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
    memcpy(blk + off_path, path, path_len + 1);
    memcpy(blk + off_path + path_len + 1, kind, kind_len + 1);
    n->module = blk + off_path;
    n->module_kind = blk + off_path + path_len + 1;
    mft_layout *lay = (mft_layout *)(blk + off_lay);
    for (int k = 0; k < nin; k++) {
        const mft_tensor *x = inputs[k];
        mft__ag_input *in = &n->in[k];
        in->node = -1;
        if (!x) continue;
        if (x->nblocks && x->tag == MFT_BLOCKED) {
            mft_layout have;
            mft__layout_of(x, &have);
            mft__layout_packed_like(&have, lay);
            in->blocked = lay++;
        }
        in->layout = mft__layout_label(x);
        in->tag = x->tag;
        in->dtype = x->dtype;
        in->ndim = x->ndim;
        memcpy(in->sizes, x->sizes, (size_t)x->ndim * sizeof(int64_t));
        int64_t p = mft__ag_producer(x);
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
    mft__ag_note_kernels(&n->fwd, kmark, tl_kernel_mark);
    mft__ag_note_convs(&n->fwd, n, cmark, tl_conv_mark, -1, false);
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

/* ---------------------------------------------------------------- for the backward engine */
void mft__ag_count_conversion(void) { tl_conversions++; }

void mft__ag_restart_events(void) {
    tl_kernel_mark = mft__kernel_seq();
    tl_conv_mark = mft__conv_seq();
}
