/* ops/blocked_fallback.c — the counted fallback of ops without a kernel for
 * blocked operands (docs/spec.md §7, Note [Blocked fallback]).
 *
 * Note [Blocked fallback]
 * An op that has no native path for blocked tensors starts with
 * MFT__BLOCKED_FALLBACK (ops_internal.h). When none of the named operands is
 * blocked it costs one test per operand. Otherwise each blocked operand is
 * converted to a plain packed copy through mft_contiguous (a conversion of
 * cause "fallback" attributed to the op, recorded on the tape, so its
 * gradient returns in the operand's layout), the caller's variable is
 * pointed at the copy and the op runs again on plain operands; a result of
 * the first blocked operand's rank is converted back to that operand's
 * format (NCHW8C / NCHW16C; another fallback conversion), other results
 * (reductions to fewer dims, flattened activations, a BLOCKED lead) stay
 * plain. Never a silent slow path: mft_conversion_counts and the profiler
 * count both conversions, and a reorder budget catches them. */
#include <stdarg.h>
#include "ops_internal.h"

int mft__unblock_begin(mft__unblock *u, const char *op, int n, ...) {
    u->n = 0;
    u->op = op;
    u->lead = NULL;
    u->lead_tag = MFT_CONTIGUOUS;
    va_list ap;
    va_start(ap, n);
    const mft_tensor **slots[MFT__UNBLOCK_MAX];
    int m = 0;
    for (int i = 0; i < n; i++) {
        const mft_tensor **s = va_arg(ap, const mft_tensor **);
        if (m < MFT__UNBLOCK_MAX && s && *s && (*s)->nblocks) slots[m++] = s;
    }
    va_end(ap);
    if (m == 0) return 0;
    u->lead = *slots[0];
    u->lead_tag = (*slots[0])->tag;
    u->lead_ndim = (*slots[0])->ndim;
    mft__cause_push(MFT_CAUSE_FALLBACK, op);
    for (int i = 0; i < m; i++) {
        mft__scope_suspend();
        mft_tensor *c = mft_contiguous(*slots[i], MFT_CONTIGUOUS);
        mft__scope_resume();
        if (!c) {
            mft__cause_pop();
            for (int j = 0; j < u->n; j++) {
                *u->slots[j] = u->orig[j];
                mft_tensor_release(u->plain[j]);
            }
            u->n = 0;
            return -1;
        }
        u->slots[u->n] = slots[i];
        u->orig[u->n] = *slots[i];
        u->plain[u->n++] = c;
        *slots[i] = c;
    }
    mft__cause_pop();
    return 1;
}

/* The result back in the lead's format when it keeps the lead's rank. */
static mft_tensor *unblock_reblock(const mft__unblock *u, mft_tensor *r) {
    if (!r || (u->lead_tag != MFT_NCHW8C && u->lead_tag != MFT_NCHW16C) ||
        r->ndim != u->lead_ndim || r->nblocks)
        return r;
    mft__cause_push(MFT_CAUSE_FALLBACK, u->op);
    mft__scope_suspend();
    mft_tensor *b = mft_to_format(r, u->lead_tag);
    mft__scope_resume();
    mft__cause_pop();
    mft_tensor_release(r);
    return b;
}

static void unblock_restore(mft__unblock *u) {
    for (int j = 0; j < u->n; j++) {
        *u->slots[j] = u->orig[j];
        mft_tensor_release(u->plain[j]);
    }
    u->n = 0;
}

mft_tensor *mft__unblock_end(mft__unblock *u, mft_tensor *result) {
    /* result was made with the scopes suspended (the macro): it is ours
     * until the final one is registered like any result */
    mft_tensor *out = unblock_reblock(u, result);
    unblock_restore(u);
    if (!out) return NULL;
    mft_tensor *kept = mft__retain_result(u->op, out);
    mft_tensor_release(out);
    return kept;
}

mft_status mft__unblock_end_status(mft__unblock *u, mft_status st) {
    unblock_restore(u);
    return st;
}
