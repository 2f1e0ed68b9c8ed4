/* ops/blocked_outputs.h — the blocked fallback (Note [Blocked fallback],
 * ops/blocked_fallback.c) for the ops MFT__BLOCKED_FALLBACK does not fit:
 * a result that follows another operand than the first blocked one, tensor
 * out parameters (indices, statistics, the several gradients of a backward
 * function), and operand lists (cat, stack, split and their backward).
 * Note [Blocked fallback outputs] in ops/blocked_outputs.c. */
#ifndef MFT_BLOCKED_OUTPUTS_H
#define MFT_BLOCKED_OUTPUTS_H

#include "ops_internal.h"

/* MFT__BLOCKED_FALLBACK whose result goes back to the format of `like` (an
 * operand as the caller passed it, read before the operands are replaced;
 * NULL or a plain one: the result stays plain). For backward functions,
 * whose gradient follows the forward input x whatever grad_out is:
 *     MFT__BLOCKED_FALLBACK_LIKE("pad_backward", x, mft_pad_backward(grad_out, x, ...),
 *                                2, &grad_out, &x); */
#define MFT__BLOCKED_FALLBACK_LIKE(op, like, call, ...)                                            \
    do {                                                                                           \
        const mft_tensor *like_ = (like);                                                          \
        mft__unblock u_;                                                                           \
        const int r_ = mft__unblock_begin(&u_, (op), __VA_ARGS__);                                 \
        if (r_ < 0) return NULL;                                                                   \
        if (r_ > 0) {                                                                              \
            mft__unblock_follow(&u_, like_);                                                       \
            mft__scope_suspend();                                                                  \
            mft_tensor *res_ = (call);                                                             \
            mft__scope_resume();                                                                   \
            return mft__unblock_end(&u_, res_);                                                    \
        }                                                                                          \
    } while (0)

/* MFT__BLOCKED_FALLBACK whose result stays plain whatever its rank: the ops
 * whose format rule makes a fresh plain layout for any input (linear /
 * matmul, losses: docs/rules.md, "Blocked operands"). */
#define MFT__BLOCKED_FALLBACK_PLAIN(op, call, ...)                                                 \
    MFT__BLOCKED_FALLBACK_LIKE(op, (const mft_tensor *)NULL, call, __VA_ARGS__)

/* An op returning a result and, through nout out parameters, more tensors:
 * outs is an array of the mft_tensor ** parameters (NULL entries: not
 * asked for), likes the operand each of them follows (NULL: stays plain),
 * both read before the operands are replaced. The result follows the
 * first blocked operand, as with MFT__BLOCKED_FALLBACK:
 *     MFT__BLOCKED_FALLBACK_OUTS("max_pool3d_with_indices",
 *         mft_max_pool3d_with_indices(x, ..., indices), 1,
 *         ((mft_tensor **[]){indices}), ((const mft_tensor *[]){NULL}), 1, &x); */
#define MFT__BLOCKED_FALLBACK_OUTS(op, call, nout, outs, likes, ...)                               \
    do {                                                                                           \
        mft_tensor **const *outs_ = (outs);                                                        \
        const mft_tensor *const *likes_ = (likes);                                                 \
        mft__unblock u_;                                                                           \
        const int r_ = mft__unblock_begin(&u_, (op), __VA_ARGS__);                                 \
        if (r_ < 0) {                                                                              \
            mft__unblock_clear_outs((nout), outs_);                                                \
            return NULL;                                                                           \
        }                                                                                          \
        if (r_ > 0) {                                                                              \
            mft__scope_suspend();                                                                  \
            mft_tensor *res_ = (call);                                                             \
            mft__scope_resume();                                                                   \
            return mft__unblock_end_outs(&u_, res_, (nout), outs_, likes_);                        \
        }                                                                                          \
    } while (0)

/* The same for an op returning a status whose tensors all come through out
 * parameters (a backward function's gradients). */
#define MFT__BLOCKED_FALLBACK_OUTS_STATUS(op, call, nout, outs, likes, ...)                        \
    do {                                                                                           \
        mft_tensor **const *outs_ = (outs);                                                        \
        const mft_tensor *const *likes_ = (likes);                                                 \
        mft__unblock u_;                                                                           \
        const int r_ = mft__unblock_begin(&u_, (op), __VA_ARGS__);                                 \
        if (r_ < 0) {                                                                              \
            mft__unblock_clear_outs((nout), outs_);                                                \
            return mft_last_error();                                                               \
        }                                                                                          \
        if (r_ > 0) {                                                                              \
            mft__scope_suspend();                                                                  \
            const mft_status st_ = (call);                                                         \
            mft__scope_resume();                                                                   \
            return mft__unblock_end_outs_status(&u_, st_, (nout), outs_, likes_);                  \
        }                                                                                          \
    } while (0)

/* The result of u follows like (its format when NCHW8C / NCHW16C and the
 * result has its rank; else the result stays plain). */
void mft__unblock_follow(mft__unblock *u, const mft_tensor *like);
/* Sets every requested out parameter to NULL. */
void mft__unblock_clear_outs(int nout, mft_tensor **const *outs);
/* Restores the operands; converts result and the out tensors back (each
 * following its like) and hands them over registered as results. On any
 * failure nothing is handed over: NULL, every out parameter NULL. */
mft_tensor *mft__unblock_end_outs(mft__unblock *u, mft_tensor *result, int nout,
                                  mft_tensor **const *outs, const mft_tensor *const *likes);
mft_status mft__unblock_end_outs_status(mft__unblock *u, mft_status st, int nout,
                                        mft_tensor **const *outs, const mft_tensor *const *likes);

/* ------------------------------------------------------------ operand lists
 * The n tensors of ts (NULL entries allowed) with the blocked ones replaced
 * by plain copies (conversions of cause "fallback" attributed to op). */
typedef struct mft__unblock_list {
    const char *op;
    int n;
    const mft_tensor *const *orig; /* the caller's list */
    const mft_tensor **plain;      /* the list to call the op with (owned) */
    const mft_tensor *lead;        /* the first blocked tensor of orig */
} mft__unblock_list;
/* 0: no tensor of ts is blocked (nothing done); 1: u->plain holds the list
 * to call op with; -1: a conversion failed (error set, nothing held). */
int mft__unblock_list_begin(mft__unblock_list *u, const char *op, int n,
                            const mft_tensor *const *ts);
/* Frees the list; the result (made with the scopes suspended) back in the
 * lead's format when it has the lead's rank, registered as a result. */
mft_tensor *mft__unblock_list_end(mft__unblock_list *u, mft_tensor *result);
/* Frees the list; when st is MFT_OK, outs[0..nout) (each made with the
 * scopes suspended) back in the format of orig[i] (each_like) or of the
 * lead, registered as results. On failure every outs[i] is NULL. */
mft_status mft__unblock_list_end_status(mft__unblock_list *u, mft_status st, int nout,
                                        mft_tensor **outs, bool each_like);

#endif
