/* mft/autograd.h — the autograd tape (docs/architecture.md §8, docs/spec.md §5): requires_grad
 * flags, explicit recording, backward, leaf gradients, no-grad mode and
 * gradcheck.
 *
 * Note [Tape]
 * Recording is explicit: between mft_tape_begin() and mft_tape_end() on a
 * thread, every differentiable op whose inputs include a tensor that
 * requires grad appends one node to the thread's tape (backward function,
 * saved tensors with their storage versions, each input's format tag, sizes
 * and dtype, a copy of the op's parameters) and marks its output as
 * requiring grad. mft_backward(loss, ...) walks the nodes in reverse (the tape
 * is already in topological order), runs each op's backward function, turns
 * each input's gradient into that input's format (docs/spec.md §5: an NHWC
 * activation gets an NHWC gradient, an NCHW weight an NCHW one) and
 * accumulates. Leaf gradients are committed only when the whole walk
 * succeeded: a failing backward leaves every .grad as it was.
 *
 *   mft_tape_begin();
 *   mft_tensor *loss = ...forward ops...;
 *   mft_backward(loss, NULL);          // leaf .grad now set
 *   mft_tape_end();                    // frees nodes and saved tensors
 *
 * A tensor modified in place after an op saved it (storage version counter,
 * shared by all views) makes backward fail with MFT_ERR_STALE naming the op.
 * In-place ops on a tensor that requires grad while recording are refused
 * (MFT_ERR_UNSUPPORTED): write the out-of-place form. */
#ifndef MFT_AUTOGRAD_H
#define MFT_AUTOGRAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "mft/export.h"
#include "mft/status.h"
#include "mft/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ flags */
/* Marks t as a leaf that requires grad (or clears the mark). Only floating
 * tensors can require grad (MFT_ERR_DTYPE otherwise); t must not be the
 * output of a recorded op (MFT_ERR_INVALID: only leaves are marked). */
MFT_API mft_status mft_tensor_set_requires_grad(mft_tensor *t, bool requires_grad);
/* True for a marked leaf and for outputs of ops recorded on the live tape. */
MFT_API bool mft_tensor_requires_grad(const mft_tensor *t);
/* True unless t is the output of an op recorded on the thread's live tape. */
MFT_API bool mft_tensor_is_leaf(const mft_tensor *t);

/* ------------------------------------------------------------------ leaf grads
 * .grad of a leaf follows PyTorch's layout contract (docs/spec.md §5): the leaf's
 * strides when the leaf is dense, else contiguous; later backward calls
 * accumulate into it in place. */
/* Borrowed; NULL if no gradient has been accumulated yet. */
MFT_API mft_tensor *mft_tensor_grad(const mft_tensor *t);
/* Drops the gradient (set_to_none); a no-op for NULL or without a grad. */
MFT_API void mft_tensor_zero_grad(mft_tensor *t);
/* Replaces t's gradient with g (retained; NULL drops it). g must have t's
 * sizes and dtype (MFT_ERR_SHAPE / MFT_ERR_DTYPE). g must not be t, share
 * memory with t (gradients accumulate in place, which would write t), or
 * have t somewhere in its own chain of gradients (the references would form
 * a cycle that is never freed): MFT_ERR_INVALID, as PyTorch's "can't assign
 * Variable as its own grad". Optimiser tests and gradient surgery use it. */
MFT_API mft_status mft_tensor_set_grad(mft_tensor *t, mft_tensor *g);

/* ------------------------------------------------------------------ tape */
/* Starts recording on this thread. MFT_ERR_SCOPE if a tape is already open
 * (tapes do not nest). */
MFT_API mft_status mft_tape_begin(void);
/* Stops recording and frees the tape: its nodes, saved tensors and pending
 * gradients. Outputs recorded on it become plain tensors (no longer require
 * grad). MFT_ERR_SCOPE if no tape is open. */
MFT_API mft_status mft_tape_end(void);
/* True while a tape is open on this thread and grad mode is enabled. */
MFT_API bool mft_tape_recording(void);
/* Number of nodes on this thread's tape (0 without a tape). */
MFT_API int64_t mft_tape_size(void);

/* Writes this thread's open tape to f as a Graphviz DOT graph (render with
 * `dot -Tpng`): one box per recorded op (op, the kernels that ran for it,
 * layout of input 0 -> output 0, the module path and kind it was recorded
 * in, call site), one ellipse per leaf (its tensor name when set, else
 * "leaf"; sizes, dtype, layout) and per constant input, edges in data order;
 * after mft_backward, a second cluster with one box per op whose backward
 * ran (its kernels, its module, the layouts of the gradients it produced)
 * and edges in gradient order. Every conversion (mft/profile.h) made while an op ran is a separate
 * red node (cause, layouts from -> to, bytes) on the edge where it
 * happened. Kernels and conversions are read from the thread's recent-event
 * rings when each node is recorded / runs backward: per op at most 4 distinct
 * kernels and 4 conversions are drawn, the rest as counts. Errors:
 * MFT_ERR_NULL (f NULL), MFT_ERR_SCOPE (no tape open on this thread),
 * MFT_ERR_IO (a write failed). */
MFT_API mft_status mft_tape_to_dot(FILE *f);

/* Grad mode (PyTorch's no_grad): with it off, ops do not record even under
 * an open tape. Returns the previous setting. Per thread; on by default. */
MFT_API bool mft_set_grad_enabled(bool enabled);
MFT_API bool mft_grad_enabled(void);

/* Backpropagates from loss through this thread's tape. grad_output has
 * loss's sizes and dtype (NULL means 1 for a one-element loss; a larger loss
 * without grad_output is MFT_ERR_SHAPE, another dtype MFT_ERR_DTYPE). Nodes
 * run once: their saved tensors are released as they run, so a second
 * backward over the same nodes is MFT_ERR_STALE. Each node's backward runs
 * with its forward's call site and module path (mft/profile.h), so its
 * events are attributed to the forward. Errors: loss NULL (MFT_ERR_NULL);
 * MFT_ERR_INVALID when loss has no node on the open tape, saying why: no
 * tape is open, the loss does not require grad (no input of the ops that
 * produced it required grad, so nothing was recorded), it was recorded on
 * another tape (ended, or another thread's), or it is a leaf; stale saved
 * tensors; a backward kernel's failure (naming the op). On any error no
 * leaf gradient changes. */
MFT_API mft_status mft_backward(mft_tensor *loss, const mft_tensor *grad_output);

/* Gradients that backward had to convert into their input's format on this
 * thread since the last reset (0 when every backward kernel already writes
 * the input's layout, the goal in channels_last). */
MFT_API int64_t mft_autograd_conversions(void);
MFT_API void mft_autograd_conversions_reset(void);

/* ------------------------------------------------------------------ gradcheck */
/* fn computes one output from inputs (new reference, NULL on error); ctx is
 * passed through. */
typedef mft_tensor *(*mft_grad_fn)(void *ctx, mft_tensor *const *inputs);

typedef struct mft_gradcheck_opts {
    double eps;  /* central-difference step (default 1e-6) */
    double atol; /* default 1e-5 */
    double rtol; /* default 1e-3 */
    uint64_t seed; /* for the random output weights */
} mft_gradcheck_opts;

/* Compares the tape's gradient of sum(fn(inputs) * r) (r random, fixed by
 * seed) with central differences, for every input that requires grad. All
 * inputs must be F64. Each input is perturbed in place and restored.
 * Returns MFT_OK if |analytic - numeric| <= atol + rtol * |numeric| for
 * every element; otherwise MFT_ERR_INVALID with a message naming the input,
 * the element and both values. opts may be NULL (defaults). Must be called
 * with no tape open (it opens its own). */
MFT_API mft_status mft_gradcheck(mft_grad_fn fn, void *ctx, int n, mft_tensor *const *inputs,
                                 const mft_gradcheck_opts *opts);

#ifdef __cplusplus
}
#endif
#endif
