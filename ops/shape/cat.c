/* ops/shape/cat.c — the layout ops cat and stack (mft/cnn.h; not
 * dispatched: built on copies and views): the checks and the forward (stack
 * is a cat of the inputs unsqueezed at dim), their public backward
 * (mft_cat_backward, mft_stack_backward), and their autograd node.
 *
 * cat follows PyTorch 1.13's torch.cat, legacy rule included: 1-D tensors of
 * size 0 take no part. The result's format is the CAT row's decision
 * (tensor/rules.def) over the tensors that take part.
 *
 * Autograd (docs/architecture.md §8): mft_cat and mft_stack record one node each (the
 * "autograd" section at the end). cat / stack save nothing, so a constant
 * input may still be changed in place before backward: each input's
 * gradient is the narrow (cat) / select (stack) of grad_out copied into a
 * tensor of that input's sizes and dtype packed in its format (what
 * mft_cat_backward computes, from the node's input records). Every gradient
 * is made in its input's format: the engine converts nothing. */
#include <stdio.h>
#include <string.h>
#include "shape_internal.h"
#include "blocked_outputs.h"

/* ---------------------------------------------------------------- cat, stack */
/* PyTorch's legacy rule: 1-D tensors of size 0 take no part in cat. */
static bool cat_skipped(const mft_tensor *t) { return t->ndim == 1 && t->sizes[0] == 0; }

/* Concatenates ts (already validated non-NULL) along dim; skip enables the
 * legacy empty rule (cat), off for stack. Messages name fn. */
/* Validates a cat of ts along dim and computes the result's sizes, wrapped
 * dim, dtype and format; false with the error set (naming fn). */
typedef struct cat_plan {
    int d, nd;
    bool all_skipped;
    int64_t sizes[MFT_MAX_DIMS];
    mft_dtype dt;
    mft_format fmt;
    mft__decision dec; /* the CAT row's decision (tensor/rules.def) */
} cat_plan;

static bool cat_check(const char *fn, int n, const mft_tensor *const *ts, int dim, bool skip,
                      cat_plan *cp) {
    char b1[MFT__DIMS_BUF], b2[MFT__DIMS_BUF];
    int ref = -1;
    for (int i = 0; i < n; i++) {
        if (ts[i]->ndim == 0) {
            mft__set_error(MFT_ERR_RANK, "%s: zero-dimensional tensor (at position %d) cannot be "
                           "concatenated", fn, i);
            return false;
        }
        if (ref < 0 && !(skip && cat_skipped(ts[i]))) ref = i;
    }
    const bool all_skipped = ref < 0;
    if (all_skipped) ref = 0;
    const mft_tensor *r = ts[ref];
    const int nd = r->ndim;
    int d = mft__wrap_dim(fn, dim, nd);
    if (d < 0) return false;
    int64_t sizes[MFT_MAX_DIMS];
    memcpy(sizes, r->sizes, sizeof sizes);
    sizes[d] = 0;
    for (int i = 0; i < n; i++) {
        const mft_tensor *t = ts[i];
        if (skip && cat_skipped(t) && !all_skipped) continue;
        if (t->ndim != nd) {
            mft__set_error(MFT_ERR_RANK, "%s: tensors must have same number of dimensions: got %d "
                           "and %d (tensor number %d in the list)", fn, nd, t->ndim, i);
            return false;
        }
        for (int k = 0; k < nd; k++)
            if (k != d && t->sizes[k] != r->sizes[k]) {
                mft__set_error(MFT_ERR_SHAPE,
                               "%s: sizes of tensors must match except in dimension %d. Expected "
                               "size %lld but got size %lld for tensor number %d in the list "
                               "(sizes %s and %s)",
                               fn, d, (long long)r->sizes[k], (long long)t->sizes[k], i,
                               mft__fmt_dims(b1, sizeof b1, nd, r->sizes),
                               mft__fmt_dims(b2, sizeof b2, nd, t->sizes));
                return false;
            }
        if (sizes[d] > INT64_MAX - t->sizes[d]) {
            mft__set_error(MFT_ERR_OVERFLOW, "%s: concatenated size overflows", fn);
            return false;
        }
        sizes[d] += t->sizes[d];
    }
    mft_dtype dt = mft_result_type(n, ts, false, 0.0);
    if (dt == MFT_DTYPE_COUNT) {
        mft__relabel_error(fn);
        return false;
    }
    cp->d = d;
    cp->nd = nd;
    cp->all_skipped = all_skipped;
    memcpy(cp->sizes, sizes, sizeof sizes);
    cp->dt = dt;
    /* the COMMON row over the tensors that take part (skipped ones as NULL) */
    const mft_tensor *small[16];
    const mft_tensor **part = n <= 16 ? small : mft__alloc_or_err(fn, (size_t)n * sizeof *part, 8);
    if (!part) return false;
    for (int i = 0; i < n; i++) part[i] = skip && cat_skipped(ts[i]) && !all_skipped ? NULL : ts[i];
    cp->dec = mft__rule_decide(MFT__RULE_CAT, fn + 4, n, part, MFT_CONTIGUOUS, 0);
    if (part != small) mft__free((void *)part);
    cp->fmt = cp->dec.tag;
    return true;
}

static mft_tensor *cat_impl(const char *fn, int n, const mft_tensor *const *ts, int dim, bool skip) {
    cat_plan cp;
    if (!cat_check(fn, n, ts, dim, skip, &cp)) return NULL;
    const int nd = cp.nd, d = cp.d;
    const bool all_skipped = cp.all_skipped;
    const int64_t *sizes = cp.sizes;
    const mft_dtype dt = cp.dt;
    const mft_format fmt = cp.fmt;

    mft__scope_suspend();
    mft_tensor *y = mft__tensor_alloc(fn, nd, sizes, dt, fmt);
    bool ok = y != NULL;
    int64_t off = 0;
    for (int i = 0; ok && i < n && !all_skipped; i++) {
        const mft_tensor *t = ts[i];
        if ((skip && cat_skipped(t)) || t->sizes[d] == 0) continue;
        mft_tensor *v = mft_narrow(y, d, off, t->sizes[d]);
        ok = v != NULL;
        if (ok && v->numel) mft__copy_kernel(v, t);
        mft_tensor_release(v);
        off += t->sizes[d];
    }
    mft__scope_resume();
    if (!ok) {
        mft__relabel_error(fn);
        mft_tensor_release(y);
        return NULL;
    }
    mft__rule_apply(y, &cp.dec);
    mft_tensor *res = mft__retain_result(fn, y);
    mft_tensor_release(y);
    return res;
}

static bool list_check(const char *fn, int n, const mft_tensor *const *ts) {
    if (!ts) {
        mft__set_error(MFT_ERR_NULL, "%s: argument 'ts' is NULL", fn);
        return false;
    }
    if (n < 1) {
        mft__set_error(MFT_ERR_INVALID, "%s: expected a non-empty list of tensors, got n = %d", fn,
                       n);
        return false;
    }
    for (int i = 0; i < n; i++)
        if (!ts[i]) {
            char what[32];
            snprintf(what, sizeof what, "ts[%d]", i);
            mft__null_arg(fn, what);
            return false;
        }
    return true;
}

static mft_tensor *cat_forward(const char *fn, int n, const mft_tensor *const *ts, int dim) {
    if (!list_check(fn, n, ts)) return NULL;
    return cat_impl(fn, n, ts, dim, true);
}

static mft_tensor *stack_forward(const char *fn, int n, const mft_tensor *const *ts, int dim) {
    char b1[MFT__DIMS_BUF], b2[MFT__DIMS_BUF];
    if (!list_check(fn, n, ts)) return NULL;
    for (int i = 1; i < n; i++) {
        bool eq = ts[i]->ndim == ts[0]->ndim;
        for (int k = 0; eq && k < ts[0]->ndim; k++) eq = ts[i]->sizes[k] == ts[0]->sizes[k];
        if (!eq) {
            mft__set_error(MFT_ERR_SHAPE, "%s: expects each tensor to be equal size, but got %s at "
                           "entry 0 and %s at entry %d", fn,
                           mft__fmt_dims(b1, sizeof b1, ts[0]->ndim, ts[0]->sizes),
                           mft__fmt_dims(b2, sizeof b2, ts[i]->ndim, ts[i]->sizes), i);
            return NULL;
        }
    }
    if (ts[0]->ndim + 1 > MFT_MAX_DIMS) {
        mft__set_error(MFT_ERR_RANK, "%s: stacking rank-%d tensors exceeds %d dims", fn,
                       ts[0]->ndim, MFT_MAX_DIMS);
        return NULL;
    }
    int d = mft__wrap_dim(fn, dim, ts[0]->ndim + 1);
    if (d < 0) return NULL;
    mft_tensor **us = mft__alloc_or_err(fn, (size_t)n * sizeof *us, sizeof(void *));
    if (!us) return NULL;
    bool ok = true;
    int made = 0;
    mft__scope_suspend();
    for (; made < n && ok; made++) {
        us[made] = mft_unsqueeze(ts[made], d);
        ok = us[made] != NULL;
    }
    mft__scope_resume();
    mft_tensor *r = NULL;
    if (ok) r = cat_impl(fn, n, (const mft_tensor *const *)us, d, false);
    else mft__relabel_error(fn);
    for (int i = 0; i < made; i++) mft_tensor_release(us[i]);
    mft__free(us);
    return r;
}

/* ---------------------------------------------------------------- cat / stack backward
 * grads[i] = the part of grad_out that came from ts[i] (a narrow for cat, a
 * select for stack), copied into a new tensor of ts[i]'s sizes and dtype,
 * packed in ts[i]'s tag for ranks 3-5, else CONTIGUOUS (docs/spec.md §5). Inputs
 * the cat skipped (legacy 1-D empty) get an empty gradient. */
static mft_status grads_finish(const char *fn, bool ok, int n, mft_tensor **tmp,
                               mft_tensor **grads) {
    for (int i = 0; i < n && ok; i++) {
        mft_tensor *r = mft__retain_result(fn, tmp[i]);
        mft_tensor_release(tmp[i]);
        tmp[i] = r;
        if (!r) {
            for (int k = 0; k < i; k++) mft_tensor_release(tmp[k]);
            for (int k = i + 1; k < n; k++) mft_tensor_release(tmp[k]);
            ok = false;
            n = 0;
        }
    }
    if (!ok) {
        for (int i = 0; i < n; i++) mft_tensor_release(tmp[i]);
        mft__free(tmp);
        return mft__relabel_error(fn);
    }
    for (int i = 0; i < n; i++) grads[i] = tmp[i];
    mft__free(tmp);
    return MFT_OK;
}

/* A packed copy of part (any strides) with t's sizes and dtype in t's tag. */
static mft_tensor *grad_piece(const char *fn, const mft_tensor *part, const mft_tensor *t) {
    const mft__decision dec = mft__rule_decide(MFT__RULE_BACKWARD, fn + 4, 1, &t, MFT_CONTIGUOUS, 0);
    const mft_format fmt = dec.tag;
    mft_tensor *g = mft__tensor_alloc(fn, t->ndim, t->sizes, t->dtype, fmt);
    if (!g) return NULL;
    if (g->numel) {
        if (part) {
            mft__copy_kernel(g, part);
        } else {
            mft__fill(g, 0.0);
        }
    }
    mft__rule_apply(g, &dec);
    return g;
}

static bool grad_out_check(const char *fn, const mft_tensor *grad_out, int nd,
                           const int64_t *sizes) {
    char b1[MFT__DIMS_BUF], b2[MFT__DIMS_BUF];
    if (!grad_out) {
        mft__null_arg(fn, "grad_out");
        return false;
    }
    bool same = grad_out->ndim == nd;
    for (int d = 0; same && d < nd; d++) same = grad_out->sizes[d] == sizes[d];
    if (!same) {
        mft__set_error(MFT_ERR_SHAPE, "%s: grad_out of sizes %s does not match the result's sizes %s",
                       fn, mft__fmt_dims(b1, sizeof b1, grad_out->ndim, grad_out->sizes),
                       mft__fmt_dims(b2, sizeof b2, nd, sizes));
        return false;
    }
    return true;
}

/* cat_backward / stack_backward with a blocked grad_out or blocked tensors
 * in ts: on plain copies, each gradient back in its tensor's format (Note
 * [Blocked fallback outputs]); grads is written only on success. *done
 * false: nothing is blocked, the caller runs the op. */
static mft_status list_bw_unblocked(const char *fn, const char *op, const mft_tensor *grad_out,
                                    int n, const mft_tensor *const *ts, int dim, mft_tensor **grads,
                                    bool stack, bool *done) {
    *done = false;
    if (!grads || !ts || n < 1) return MFT_OK; /* the op reports it */
    bool any = mft__is_blocked(grad_out);
    for (int i = 0; i < n && !any; i++) any = mft__is_blocked(ts[i]);
    if (!any) return MFT_OK;
    *done = true;
    mft_tensor **tmp = mft__alloc_or_err(fn, (size_t)n * sizeof *tmp, sizeof(void *));
    if (!tmp) return mft_last_error();
    memset(tmp, 0, (size_t)n * sizeof *tmp);
    mft__unblock_list ul;
    mft__unblock ug;
    const int rl = mft__unblock_list_begin(&ul, op, n, ts);
    const int rg = rl < 0 ? -1 : mft__unblock_begin(&ug, op, 1, &grad_out);
    if (rg < 0) {
        if (rl > 0) mft__unblock_list_end_status(&ul, MFT_ERR_NOMEM, 0, NULL, true);
        mft__free(tmp);
        return mft_last_error();
    }
    const mft_tensor *const *list = rl > 0 ? ul.plain : ts;
    mft__scope_suspend();
    mft_status st = stack ? mft_stack_backward(grad_out, n, list, dim, tmp)
                          : mft_cat_backward(grad_out, n, list, dim, tmp);
    mft__scope_resume();
    st = mft__unblock_end_status(&ug, st);
    if (rl > 0) {
        st = mft__unblock_list_end_status(&ul, st, n, tmp, true);
    } else { /* only grad_out was blocked: the plain results are the caller's */
        for (int i = 0; st == MFT_OK && i < n; i++) {
            mft_tensor *g = tmp[i];
            tmp[i] = mft__retain_result(op, g);
            mft_tensor_release(g);
            if (!tmp[i]) { /* a scope owns the ones before */
                for (int j = i + 1; j < n; j++) mft_tensor_release(tmp[j]);
                st = MFT_ERR_NOMEM;
            }
        }
    }
    if (st == MFT_OK) memcpy(grads, tmp, (size_t)n * sizeof *tmp);
    mft__free(tmp);
    return st;
}

mft_status mft_cat_backward(const mft_tensor *grad_out, int n, const mft_tensor *const *ts,
                            int dim, mft_tensor **grads) {
    static const char fn[] = "mft_cat_backward";
    bool done;
    const mft_status bst =
        list_bw_unblocked(fn, "cat_backward", grad_out, n, ts, dim, grads, false, &done);
    if (done || bst != MFT_OK) return bst;
    if (!list_check(fn, n, ts)) return mft_last_error();
    if (!grads) {
        mft__set_error(MFT_ERR_NULL, "%s: argument 'grads' is NULL", fn);
        return MFT_ERR_NULL;
    }
    cat_plan cp;
    if (!cat_check(fn, n, ts, dim, true, &cp)) return mft_last_error();
    if (!grad_out_check(fn, grad_out, cp.nd, cp.sizes)) return mft_last_error();
    mft_tensor **tmp = mft__alloc_or_err(fn, (size_t)n * sizeof *tmp, sizeof(void *));
    if (!tmp) return mft_last_error();
    bool ok = true;
    int made = 0;
    int64_t off = 0;
    mft__scope_suspend();
    for (; ok && made < n; made++) {
        const mft_tensor *t = ts[made];
        mft_tensor *part = NULL;
        if (!(cat_skipped(t) && !cp.all_skipped) && !cp.all_skipped) {
            part = mft_narrow(grad_out, cp.d, off, t->sizes[cp.d]);
            ok = part != NULL;
            off += t->sizes[cp.d];
        }
        tmp[made] = ok ? grad_piece(fn, part, t) : NULL;
        ok = ok && tmp[made] != NULL;
        mft_tensor_release(part);
    }
    mft__scope_resume();
    if (!ok) {
        for (int i = 0; i < made; i++) mft_tensor_release(tmp[i]);
        mft__free(tmp);
        return mft__relabel_error(fn);
    }
    return grads_finish(fn, true, n, tmp, grads);
}

mft_status mft_stack_backward(const mft_tensor *grad_out, int n, const mft_tensor *const *ts,
                              int dim, mft_tensor **grads) {
    static const char fn[] = "mft_stack_backward";
    char b1[MFT__DIMS_BUF], b2[MFT__DIMS_BUF];
    bool done;
    const mft_status bst =
        list_bw_unblocked(fn, "stack_backward", grad_out, n, ts, dim, grads, true, &done);
    if (done || bst != MFT_OK) return bst;
    if (!list_check(fn, n, ts)) return mft_last_error();
    if (!grads) {
        mft__set_error(MFT_ERR_NULL, "%s: argument 'grads' is NULL", fn);
        return MFT_ERR_NULL;
    }
    for (int i = 1; i < n; i++) {
        bool eq = ts[i]->ndim == ts[0]->ndim;
        for (int k = 0; eq && k < ts[0]->ndim; k++) eq = ts[i]->sizes[k] == ts[0]->sizes[k];
        if (!eq) {
            mft__set_error(MFT_ERR_SHAPE, "%s: expects each tensor to be equal size, but got %s at "
                           "entry 0 and %s at entry %d", fn,
                           mft__fmt_dims(b1, sizeof b1, ts[0]->ndim, ts[0]->sizes),
                           mft__fmt_dims(b2, sizeof b2, ts[i]->ndim, ts[i]->sizes), i);
            return MFT_ERR_SHAPE;
        }
    }
    const int nd = ts[0]->ndim + 1;
    if (nd > MFT_MAX_DIMS) {
        mft__set_error(MFT_ERR_RANK, "%s: stacking rank-%d tensors exceeds %d dims", fn,
                       ts[0]->ndim, MFT_MAX_DIMS);
        return MFT_ERR_RANK;
    }
    const int d = mft__wrap_dim(fn, dim, nd);
    if (d < 0) return mft_last_error();
    int64_t sizes[MFT_MAX_DIMS];
    for (int k = 0, s = 0; k < nd; k++) sizes[k] = k == d ? n : ts[0]->sizes[s++];
    if (!grad_out_check(fn, grad_out, nd, sizes)) return mft_last_error();
    mft_tensor **tmp = mft__alloc_or_err(fn, (size_t)n * sizeof *tmp, sizeof(void *));
    if (!tmp) return mft_last_error();
    bool ok = true;
    int made = 0;
    mft__scope_suspend();
    for (; ok && made < n; made++) {
        mft_tensor *part = mft_select(grad_out, d, made);
        tmp[made] = part ? grad_piece(fn, part, ts[made]) : NULL;
        ok = tmp[made] != NULL;
        mft_tensor_release(part);
    }
    mft__scope_resume();
    if (!ok) {
        for (int i = 0; i < made; i++) mft_tensor_release(tmp[i]);
        mft__free(tmp);
        return mft__relabel_error(fn);
    }
    return grads_finish(fn, true, n, tmp, grads);
}

/* ---------------------------------------------------------------- autograd */
/* A tensor of input in's sizes and dtype, packed in its format (docs/spec.md §5),
 * holding part (a view of a gradient with in's sizes), or NULL. */
static mft_tensor *ag_grad_like_input(const mft__ag_input *in, const mft_tensor *part) {
    const mft_format fmt = mft__rule_grad_format(in->tag, in->ndim);
    mft_tensor *g = mft_empty(in->ndim, in->sizes, in->dtype, fmt);
    if (g && g->numel && mft_copy_(g, part) != MFT_OK) {
        mft_tensor_release(g);
        return NULL;
    }
    return g;
}

/* cat / stack: dim wrapped against the result's rank. */
typedef struct cat_ag_params {
    int dim;
    bool stack;
} cat_ag_params;

static mft_status cat_node_backward(const mft__ag_node *n, mft_tensor *const *gout,
                                    mft_tensor **gin) {
    const cat_ag_params *p = n->params;
    int64_t off = 0;
    for (int k = 0; k < n->nin; k++) {
        const mft__ag_input *in = &n->in[k];
        const bool skipped = !p->stack && in->ndim == 1 && in->sizes[0] == 0; /* legacy empty */
        mft_tensor *part = NULL;
        if (p->stack) {
            if (!in->needs_grad) continue;
            part = mft_select(gout[0], p->dim, k);
        } else if (!skipped) {
            const int64_t len = in->sizes[p->dim];
            off += len;
            if (!in->needs_grad) continue;
            part = mft_narrow(gout[0], p->dim, off - len, len);
        } else if (!in->needs_grad) {
            continue;
        }
        if (!skipped && !part) return mft_last_error();
        gin[k] = ag_grad_like_input(in, part); /* skipped: an empty [0] tensor */
        mft_tensor_release(part);
        if (!gin[k]) return mft_last_error(); /* the engine releases gin[0..k) */
    }
    return MFT_OK;
}

/* Forward plus recording of cat (stack = false) or stack. */
static mft_tensor *cat_entry(const char *fn, int n, const mft_tensor *const *ts, int dim,
                             bool stack) {
    if (!ts || n < 1 || !mft__ag_wants(n, ts))
        return stack ? stack_forward(fn, n, ts, dim) : cat_forward(fn, n, ts, dim);
    const bool prev = mft__shape_ag_begin();
    mft_tensor *y = stack ? stack_forward(fn, n, ts, dim) : cat_forward(fn, n, ts, dim);
    mft__shape_ag_end(prev);
    if (!y) return NULL;
    cat_ag_params p;
    memset(&p, 0, sizeof p);
    p.dim = mft__wrap_dim(fn, dim, y->ndim); /* valid: the forward accepted it */
    p.stack = stack;
    if (mft__ag_record(fn, stack ? "stack" : "cat", cat_node_backward, n, ts, 1, &y, 0, NULL, &p,
                       sizeof p) != MFT_OK) {
        mft_tensor_release(y);
        return NULL;
    }
    return mft__shape_ag_hand_over(fn, y);
}

/* Blocked tensors of the list go through plain copies (Note [Blocked
 * fallback outputs], ops/blocked_outputs.c); a cat result follows the first
 * blocked one, a stack result (one dim more) stays plain. */
mft_tensor *mft_cat(int n, const mft_tensor *const *ts, int dim) {
    mft__unblock_list u;
    const int r = mft__unblock_list_begin(&u, "cat", n, ts);
    if (r < 0) return NULL;
    if (r > 0) {
        mft__scope_suspend();
        mft_tensor *y = mft_cat(n, u.plain, dim);
        mft__scope_resume();
        return mft__unblock_list_end(&u, y);
    }
    return cat_entry("mft_cat", n, ts, dim, false);
}

mft_tensor *mft_stack(int n, const mft_tensor *const *ts, int dim) {
    mft__unblock_list u;
    const int r = mft__unblock_list_begin(&u, "stack", n, ts);
    if (r < 0) return NULL;
    if (r > 0) {
        mft__scope_suspend();
        mft_tensor *y = mft_stack(n, u.plain, dim);
        mft__scope_resume();
        return mft__unblock_list_end(&u, y);
    }
    return cat_entry("mft_stack", n, ts, dim, true);
}
