/* ops/shape/split.c — the layout op split (mft/cnn.h; not dispatched: the
 * chunks are views, narrows of x along dim): the checks and the forward,
 * then the autograd node.
 *
 * Autograd (docs/architecture.md §8): mft_split records one node with one output per
 * chunk; x's gradient is the chunks' gradients (zeros for chunks nobody
 * used, from the engine) copied into one tensor in x's format: the engine
 * converts nothing. */
#include "shape_internal.h"
#include "blocked_outputs.h"

/* ---------------------------------------------------------------- checks, forward */
/* The views, not yet registered in any scope (the caller hands them over). */
static mft_status split_forward(const char *fn, const mft_tensor *x, int64_t split_size, int dim,
                                int max_out, mft_tensor **outs, int *nout) {
    if (nout) *nout = 0;
    if (!x) {
        mft__null_arg(fn, "x");
        return MFT_ERR_NULL; /* the call's own status; the message keeps an earlier error */
    }
    if (!outs || !nout) {
        mft__set_error(MFT_ERR_NULL, "%s: argument '%s' is NULL", fn, !outs ? "outs" : "nout");
        return MFT_ERR_NULL;
    }
    if (x->ndim == 0) {
        mft__set_error(MFT_ERR_RANK, "%s: cannot split a zero-dimensional tensor", fn);
        return MFT_ERR_RANK;
    }
    int d = mft__wrap_dim(fn, dim, x->ndim);
    if (d < 0) return mft_last_error();
    const int64_t size = x->sizes[d];
    if (split_size < 0) {
        mft__set_error(MFT_ERR_INVALID, "%s: split expects split_size be non-negative, but got "
                       "split_size=%lld", fn, (long long)split_size);
        return MFT_ERR_INVALID;
    }
    if (split_size == 0 && size != 0) {
        mft__set_error(MFT_ERR_INVALID, "%s: split_size can only be 0 if dimension size is 0, but "
                       "got dimension size of %lld", fn, (long long)size);
        return MFT_ERR_INVALID;
    }
    int64_t chunks = split_size == 0 ? 1 : size / split_size + (size % split_size != 0);
    if (chunks < 1) chunks = 1;
    if (chunks > max_out) {
        mft__set_error(MFT_ERR_INVALID, "%s: %lld chunks (size %lld, split_size %lld) exceed "
                       "max_out %d", fn, (long long)chunks, (long long)size,
                       (long long)split_size, max_out);
        return MFT_ERR_INVALID;
    }
    for (int64_t c = 0; c < chunks; c++) {
        int64_t start = c * split_size;
        int64_t len = size - start < split_size ? size - start : split_size;
        if (split_size == 0) start = len = 0;
        outs[c] = mft_narrow(x, d, start, len);
        if (!outs[c]) {
            mft_status st = mft__relabel_error(fn);
            for (int64_t k = 0; k < c; k++) {
                mft_tensor_release(outs[k]);
                outs[k] = NULL;
            }
            return st;
        }
    }
    *nout = (int)chunks;
    return MFT_OK;
}

/* ---------------------------------------------------------------- autograd
 * x's gradient is the chunks' gradients copied side by side into a
 * tensor packed in x's format. */
typedef struct split_ag_params {
    int dim;
} split_ag_params;

static mft_status split_node_backward(const mft__ag_node *n, mft_tensor *const *gout,
                                      mft_tensor **gin) {
    const split_ag_params *p = n->params;
    const mft__ag_input *in = &n->in[0];
    if (!in->needs_grad) return MFT_OK;
    const mft_format fmt = mft__rule_grad_format(in->tag, in->ndim);
    mft_tensor *g = mft_empty(in->ndim, in->sizes, in->dtype, fmt);
    if (!g) return mft_last_error();
    int64_t off = 0;
    for (int j = 0; j < n->nout; j++) {
        const int64_t len = gout[j]->sizes[p->dim];
        mft_tensor *v = len ? mft_narrow(g, p->dim, off, len) : NULL;
        if (len && (!v || mft_copy_(v, gout[j]) != MFT_OK)) {
            mft_tensor_release(v);
            mft_tensor_release(g);
            return mft_last_error();
        }
        mft_tensor_release(v);
        off += len;
    }
    gin[0] = g;
    return MFT_OK;
}

/* Whether every chunk of a blocked x is a view (docs/spec.md §7.8: a narrow
 * of a blocked dim starts at a multiple of its block and ends at one or at
 * the dim's end): dim carries no block, or split_size is a multiple of it.
 * Arguments the forward refuses count as viewable (it reports them). */
static bool split_viewable(const mft_tensor *x, int64_t split_size, int dim) {
    if (!x->nblocks || dim < -x->ndim || dim >= x->ndim || split_size <= 0) return true;
    const int d = dim < 0 ? dim + x->ndim : dim;
    int64_t b = 1;
    for (int k = 0; k < x->nblocks; k++)
        if (x->block_dim[k] == d) b *= x->block_size[k];
    return split_size % b == 0;
}

/* A blocked x splits into views when the chunks are viewable; otherwise
 * through a plain copy (Note [Blocked fallback outputs]), the chunks back in
 * x's format. */
mft_status mft_split(const mft_tensor *x, int64_t split_size, int dim, int max_out,
                     mft_tensor **outs, int *nout) {
    static const char fn[] = "mft_split";
    if (x && outs && nout && !split_viewable(x, split_size, dim)) {
        *nout = 0;
        mft__unblock_list u;
        const int r = mft__unblock_list_begin(&u, "split", 1, &x);
        if (r < 0) return mft_last_error();
        mft__scope_suspend();
        mft_status st = mft_split(u.plain[0], split_size, dim, max_out, outs, nout);
        mft__scope_resume();
        st = mft__unblock_list_end_status(&u, st, st == MFT_OK ? *nout : 0, outs, false);
        if (st != MFT_OK) *nout = 0;
        return st;
    }
    const bool rec = mft__ag_wants(1, &x);
    const bool prev = mft__shape_ag_begin(); /* the views are registered below, once all exist */
    mft_status st = split_forward(fn, x, split_size, dim, max_out, outs, nout);
    mft__shape_ag_end(prev);
    if (st != MFT_OK) return st;
    const int k = *nout;
    if (rec) {
        split_ag_params p = {mft__wrap_dim(fn, dim, x->ndim)};
        st = mft__ag_record(fn, "split", split_node_backward, 1, &x, k, outs, 0, NULL, &p,
                            sizeof p);
        if (st != MFT_OK) {
            for (int j = 0; j < k; j++) {
                mft_tensor_release(outs[j]);
                outs[j] = NULL;
            }
            *nout = 0;
            return st;
        }
    }
    for (int j = 0; j < k; j++) {
        mft_tensor *v = outs[j];
        outs[j] = mft__retain_result(fn, v);
        mft_tensor_release(v);
        if (!outs[j]) {
            /* out of memory registering in the open scope, which owns (and
             * releases) the views registered before; ours go now */
            for (int i = j + 1; i < k; i++) mft_tensor_release(outs[i]);
            for (int i = 0; i < k; i++) outs[i] = NULL;
            *nout = 0;
            return MFT_ERR_NOMEM;
        }
    }
    return MFT_OK;
}
