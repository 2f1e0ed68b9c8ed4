/* ops/shape/views.c — the public views (mft/tensor.h): each runs the core
 * view of tensor/view.c and records a tape node when its input requires
 * grad (Note [Tape]). Backward: the inverse permute / transpose of the
 * gradient; for narrow, select and slice a zero tensor laid out like the
 * input with the gradient copied into the same view of it; a reshape back
 * to the input's sizes for unsqueeze, squeeze, view, reshape and flatten
 * (and, when the forward had to copy, a copy into the input's format);
 * mft_sum_to_size for expand. as_strided is not differentiable and lives in
 * the core. */
#include <string.h>
#include "autograd_internal.h"
#include "ops_internal.h"

static mft_format view_ag_target(const mft__ag_input *in) {
    return mft__rule_grad_format(in->tag, in->ndim);
}

static mft_status view_ag_backward(const mft__ag_node *n, mft_tensor *const *gout,
                                   mft_tensor **gin) {
    const mft__view_note *p = n->params;
    const mft__ag_input *in = &n->in[0];
    mft_tensor *g = gout[0], *r = NULL;
    switch (p->kind) {
    case MFT__VIEW_PERMUTE: {
        int inv[MFT_MAX_DIMS];
        for (int i = 0; i < in->ndim; i++) inv[p->dims[i]] = i;
        r = mft_permute(g, inv);
        break;
    }
    case MFT__VIEW_TRANSPOSE: r = mft_transpose(g, p->dim, p->d1); break;
    case MFT__VIEW_NARROW:
    case MFT__VIEW_SELECT:
    case MFT__VIEW_SLICE: {
        r = mft_zeros(in->ndim, in->sizes, in->dtype, view_ag_target(in));
        mft_tensor *v = !r                             ? NULL
                        : p->kind == MFT__VIEW_NARROW ? mft_narrow(r, p->dim, p->a, p->b)
                        : p->kind == MFT__VIEW_SELECT ? mft_select(r, p->dim, p->a)
                                                      : mft_slice(r, p->dim, p->a, p->b, p->c);
        if (!v || mft_copy_(v, g) != MFT_OK) {
            mft_tensor_release(r);
            r = NULL;
        }
        mft_tensor_release(v);
        break;
    }
    case MFT__VIEW_RESHAPE:
        r = mft_reshape(g, in->ndim, in->sizes);
        if (r && p->c && !mft_tensor_is_contiguous(r, view_ag_target(in))) {
            /* the forward had to copy (c = 1): so does its backward, straight
             * into the input's format, and it is the reshape's copy, not a
             * hidden gradient conversion (Note [Conversions and their causes]) */
            mft__cause_push(MFT_CAUSE_RESHAPE, n->name);
            mft_tensor *c = mft_contiguous(r, view_ag_target(in));
            mft__cause_pop();
            mft_tensor_release(r);
            r = c;
        }
        break;
    case MFT__VIEW_EXPAND: r = mft_sum_to_size(g, in->ndim, in->sizes); break;
    }
    if (!r) return mft_last_error() != MFT_OK ? mft_last_error() : MFT_ERR_INTERNAL;
    gin[0] = r;
    return MFT_OK;
}

/* Records v = view of t (when t requires grad on a recording thread);
 * releases v and returns NULL if recording fails. */
static mft_tensor *view_record(const char *fn, const mft_tensor *t, mft_tensor *v,
                               const mft__view_note *note) {
    if (!v || !mft__ag_wants(1, &t)) return v;
    if (mft__ag_record1(fn, fn + 4, view_ag_backward, t, v, false, false, note, sizeof *note) !=
        MFT_OK) {
        mft__ag_drop_result(v);
        return NULL;
    }
    return v;
}

mft_tensor *mft_permute(const mft_tensor *t, const int *dims) {
    mft__view_note n;
    return view_record("mft_permute", t, mft__view_permute("mft_permute", t, dims, &n), &n);
}

mft_tensor *mft_transpose(const mft_tensor *t, int d0, int d1) {
    mft__view_note n;
    return view_record("mft_transpose", t, mft__view_transpose("mft_transpose", t, d0, d1, &n),
                       &n);
}

mft_tensor *mft_narrow(const mft_tensor *t, int dim, int64_t start, int64_t length) {
    mft__view_note n;
    return view_record("mft_narrow", t, mft__view_narrow("mft_narrow", t, dim, start, length, &n),
                       &n);
}

mft_tensor *mft_select(const mft_tensor *t, int dim, int64_t i) {
    mft__view_note n;
    return view_record("mft_select", t, mft__view_select("mft_select", t, dim, i, &n), &n);
}

mft_tensor *mft_slice(const mft_tensor *t, int dim, int64_t start, int64_t end, int64_t step) {
    mft__view_note n;
    return view_record("mft_slice", t, mft__view_slice("mft_slice", t, dim, start, end, step, &n),
                       &n);
}

mft_tensor *mft_unsqueeze(const mft_tensor *t, int dim) {
    mft__view_note n;
    return view_record("mft_unsqueeze", t, mft__view_unsqueeze("mft_unsqueeze", t, dim, &n), &n);
}

mft_tensor *mft_squeeze(const mft_tensor *t, int dim) {
    mft__view_note n;
    return view_record("mft_squeeze", t, mft__view_squeeze("mft_squeeze", t, dim, &n), &n);
}

mft_tensor *mft_expand(const mft_tensor *t, int ndim, const int64_t *sizes) {
    mft__view_note n;
    return view_record("mft_expand", t, mft__view_expand("mft_expand", t, ndim, sizes, &n), &n);
}

mft_tensor *mft_view(const mft_tensor *t, int ndim, const int64_t *sizes) {
    mft__view_note n;
    return view_record("mft_view", t, mft__view_reshape("mft_view", t, ndim, sizes, false, &n),
                       &n);
}

mft_tensor *mft_reshape(const mft_tensor *t, int ndim, const int64_t *sizes) {
    mft__view_note n;
    return view_record("mft_reshape", t,
                       mft__view_reshape("mft_reshape", t, ndim, sizes, true, &n), &n);
}

mft_tensor *mft_flatten(const mft_tensor *t, int start, int end) {
    int ndim;
    int64_t sizes[MFT_MAX_DIMS];
    if (!mft__view_flatten_sizes("mft_flatten", t, start, end, &ndim, sizes)) return NULL;
    mft__view_note n;
    return view_record("mft_flatten", t,
                       mft__view_reshape("mft_flatten", t, ndim, sizes, true, &n), &n);
}
