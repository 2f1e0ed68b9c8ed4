/* ops/blocked_outputs.c — the blocked fallback for results that follow a
 * given operand, tensor out parameters and operand lists (the macros and
 * declarations are in ops/blocked_outputs.h).
 *
 * Note [Blocked fallback outputs]
 * The same counted fallback as Note [Blocked fallback] (ops/blocked_fallback.c):
 * blocked operands become plain packed copies through mft_contiguous (cause
 * "fallback", recorded on the tape), the op runs again on them with the
 * scopes suspended, and what it returns goes back to a blocked format by
 * mft_to_format (cause "fallback") only where that is the format the op
 * promises:
 *   - a backward function's gradient follows the input it is the gradient
 *     of (grad_x like x, grad_w like w), not grad_out;
 *   - out parameters follow the operand named for each of them; indices and
 *     saved statistics follow none and stay plain (they are I64 positions
 *     or 1-D);
 *   - a list op (cat, stack, split, their backward) converts the blocked
 *     tensors of the list; its result follows the first blocked one, a
 *     gradient of the list follows its own tensor.
 * A tensor goes back only when the operand it follows is NCHW8C / NCHW16C
 * and has its rank (reductions, stack, rank-changing results stay plain, as
 * do results following an MFT_BLOCKED operand); linear / matmul and the
 * losses follow no operand (MFT__BLOCKED_FALLBACK_PLAIN): their format rule
 * lays a fresh plain result out for any input (docs/rules.md). All results are made with
 * the scopes suspended and registered at the end, once every conversion
 * succeeded: a failure hands nothing over and leaks nothing. */
#include <string.h>
#include "blocked_outputs.h"

/* r (owned) back in tag when it has ndim dims and tag is NCHW8C / NCHW16C;
 * the converted tensor (owned) or r itself. NULL on failure (r released). */
static mft_tensor *blk_reblock(const char *op, mft_format tag, int ndim, mft_tensor *r) {
    if (!r || (tag != MFT_NCHW8C && tag != MFT_NCHW16C) || r->ndim != ndim || r->nblocks) return r;
    mft__cause_push(MFT_CAUSE_FALLBACK, op);
    mft__scope_suspend();
    mft_tensor *b = mft_to_format(r, tag);
    mft__scope_resume();
    mft__cause_pop();
    mft_tensor_release(r);
    return b;
}

static mft_tensor *blk_reblock_like(const char *op, const mft_tensor *like, mft_tensor *r) {
    return like ? blk_reblock(op, like->tag, like->ndim, r) : r;
}

void mft__unblock_follow(mft__unblock *u, const mft_tensor *like) {
    u->lead_tag = like ? like->tag : MFT_CONTIGUOUS;
    u->lead_ndim = like ? like->ndim : -1;
}

void mft__unblock_clear_outs(int nout, mft_tensor **const *outs) {
    for (int i = 0; i < nout; i++)
        if (outs && outs[i]) *outs[i] = NULL;
}

/* Converts the requested outs back (each following likes[i]) and registers
 * them with result (converted already, or NULL for a status op). Every
 * tensor given is owned; on failure all are released, the outs NULL. */
static bool blk_hand_over(const char *op, mft_tensor **result, int nout, mft_tensor **const *outs,
                          const mft_tensor *const *likes) {
    mft_tensor *got[MFT__UNBLOCK_MAX] = {0};
    bool ok = nout <= MFT__UNBLOCK_MAX;
    for (int i = 0; i < nout; i++) {
        if (!outs[i]) continue;
        mft_tensor *t = *outs[i];
        *outs[i] = NULL;
        if (!ok) {
            mft_tensor_release(t);
            continue;
        }
        got[i] = blk_reblock_like(op, likes ? likes[i] : NULL, t);
        if (t && !got[i]) ok = false;
    }
    if (!ok) {
        for (int i = 0; i < nout && i < MFT__UNBLOCK_MAX; i++) mft_tensor_release(got[i]);
        if (result) {
            mft_tensor_release(*result);
            *result = NULL;
        }
        return false;
    }
    /* registering fails only inside a scope, which then owns the ones
     * registered before: those are not released here */
    const char *fn = op;
    if (result && *result) {
        mft_tensor *kept = mft__retain_result(fn, *result);
        mft_tensor_release(*result);
        *result = kept;
        if (!kept) ok = false;
    }
    for (int i = 0; i < nout; i++) {
        if (!got[i]) continue;
        mft_tensor *kept = ok ? mft__retain_result(fn, got[i]) : NULL;
        mft_tensor_release(got[i]);
        if (!kept) ok = false;
        if (outs[i]) *outs[i] = kept;
    }
    if (!ok) {
        mft__unblock_clear_outs(nout, outs);
        if (result) *result = NULL;
    }
    return ok;
}

mft_tensor *mft__unblock_end_outs(mft__unblock *u, mft_tensor *result, int nout,
                                  mft_tensor **const *outs, const mft_tensor *const *likes) {
    const char *op = u->op;
    mft_tensor *r = result ? blk_reblock(op, u->lead_tag, u->lead_ndim, result) : NULL;
    mft__unblock_end_status(u, MFT_OK); /* restores the caller's operands */
    if (!result) {                      /* the op failed and set every requested pointer to NULL */
        mft__unblock_clear_outs(nout, outs);
        return NULL;
    }
    if (!r) { /* the conversion failed: the outs are still ours */
        for (int i = 0; i < nout; i++) {
            if (!outs[i]) continue;
            mft_tensor_release(*outs[i]);
            *outs[i] = NULL;
        }
        return NULL;
    }
    return blk_hand_over(op, &r, nout, outs, likes) ? r : NULL;
}

mft_status mft__unblock_end_outs_status(mft__unblock *u, mft_status st, int nout,
                                        mft_tensor **const *outs, const mft_tensor *const *likes) {
    const char *op = u->op;
    mft__unblock_end_status(u, st);
    if (st != MFT_OK) { /* the op set every requested pointer to NULL */
        mft__unblock_clear_outs(nout, outs);
        return st;
    }
    if (blk_hand_over(op, NULL, nout, outs, likes)) return MFT_OK;
    const mft_status e = mft_last_error();
    return e == MFT_OK ? MFT_ERR_INTERNAL : e;
}

/* ---------------------------------------------------------------- operand lists */
int mft__unblock_list_begin(mft__unblock_list *u, const char *op, int n,
                            const mft_tensor *const *ts) {
    memset(u, 0, sizeof *u);
    u->op = op;
    if (!ts || n < 1) return 0;
    for (int i = 0; i < n && !u->lead; i++)
        if (ts[i] && ts[i]->nblocks) u->lead = ts[i];
    if (!u->lead) return 0;
    u->plain = mft__alloc_or_err(op, (size_t)n * sizeof *u->plain, _Alignof(mft_tensor *));
    if (!u->plain) return -1;
    u->n = n;
    u->orig = ts;
    mft__cause_push(MFT_CAUSE_FALLBACK, op);
    bool ok = true;
    for (int i = 0; i < n; i++) {
        u->plain[i] = ts[i];
        if (!ok || !ts[i] || !ts[i]->nblocks) continue;
        mft__scope_suspend();
        u->plain[i] = mft_contiguous(ts[i], MFT_CONTIGUOUS);
        mft__scope_resume();
        ok = u->plain[i] != NULL;
    }
    mft__cause_pop();
    if (!ok) {
        for (int i = 0; i < n; i++)
            if (u->plain[i] != ts[i]) mft_tensor_release((mft_tensor *)u->plain[i]);
        mft__free(u->plain);
        memset(u, 0, sizeof *u);
        return -1;
    }
    return 1;
}

static void list_free(mft__unblock_list *u) {
    for (int i = 0; i < u->n; i++)
        if (u->plain[i] != u->orig[i]) mft_tensor_release((mft_tensor *)u->plain[i]);
    mft__free(u->plain);
    u->plain = NULL;
    u->n = 0;
}

mft_tensor *mft__unblock_list_end(mft__unblock_list *u, mft_tensor *result) {
    mft_tensor *r = blk_reblock_like(u->op, u->lead, result);
    list_free(u);
    if (!r) return NULL;
    mft_tensor *kept = mft__retain_result(u->op, r);
    mft_tensor_release(r);
    return kept;
}

mft_status mft__unblock_list_end_status(mft__unblock_list *u, mft_status st, int nout,
                                        mft_tensor **outs, bool each_like) {
    if (st != MFT_OK) { /* the op wrote nothing (or NULLs) */
        list_free(u);
        return st;
    }
    bool ok = true;
    for (int i = 0; i < nout; i++) {
        const mft_tensor *like = each_like ? (i < u->n ? u->orig[i] : NULL) : u->lead;
        mft_tensor *t = outs[i];
        outs[i] = ok ? blk_reblock_like(u->op, like, t) : t;
        if (t && !outs[i]) ok = false;
    }
    list_free(u);
    if (!ok) { /* every tensor is still ours */
        for (int i = 0; i < nout; i++) {
            mft_tensor_release(outs[i]);
            outs[i] = NULL;
        }
        const mft_status e = mft_last_error();
        return e == MFT_OK ? MFT_ERR_INTERNAL : e;
    }
    /* registering fails only inside a scope, which then owns the ones
     * registered before */
    for (int i = 0; i < nout; i++) {
        if (!outs[i]) continue;
        mft_tensor *kept = ok ? mft__retain_result(u->op, outs[i]) : NULL;
        mft_tensor_release(outs[i]);
        outs[i] = kept;
        if (!kept) ok = false;
    }
    if (!ok) {
        for (int i = 0; i < nout; i++) outs[i] = NULL;
        return MFT_ERR_NOMEM;
    }
    return MFT_OK;
}
