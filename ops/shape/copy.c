/* ops/shape/copy.c — the public copies and format conversions (mft/tensor.h):
 * mft_copy_, mft_contiguous, mft_to_format, mft_clone and mft_to_dtype, each
 * the core function of tensor/copy.c plus its autograd (Note [Tape]):
 * contiguous, to_format, clone and to_dtype (floating result) record a node
 * whose backward hands the gradient back in the input's dtype and format; a
 * call that returns its input object records nothing (the gradient flows
 * through the same tensor). mft_copy_ refuses a destination that requires
 * grad while recording; a source that requires grad is copied without a
 * gradient (copy_ is not differentiable). */
#include "autograd_internal.h"
#include "ops_internal.h"

static mft_status copy_ag_backward(const mft__ag_node *n, mft_tensor *const *gout,
                                   mft_tensor **gin) {
    const mft__ag_input *in = &n->in[0];
    mft_format f = mft__rule_grad_format(in->tag, in->ndim);
    mft_tensor *g = gout[0];
    mft_tensor *r = g->dtype == in->dtype ? mft_tensor_retain(g) : mft_to_dtype(g, in->dtype);
    if (r && !mft_tensor_is_contiguous(r, f)) {
        mft__cause_push(MFT_CAUSE_GRADIENT, n->name);
        mft_tensor *c = mft_contiguous(r, f);
        mft__cause_pop();
        mft_tensor_release(r);
        r = c;
    }
    if (!r) return mft_last_error();
    gin[0] = r;
    return MFT_OK;
}

static mft_tensor *copy_record(const char *fn, const char *name, const mft_tensor *t,
                               mft_tensor *out) {
    if (!out || out == t || !mft__ag_wants(1, &t) ||
        (out->dtype != MFT_F32 && out->dtype != MFT_F64))
        return out;
    if (mft__ag_record1(fn, name, copy_ag_backward, t, out, false, false, NULL, 0) != MFT_OK) {
        mft__ag_drop_result(out);
        return NULL;
    }
    return out;
}

mft_status mft_copy_(mft_tensor *dst, const mft_tensor *src) {
    const char *fn = "mft_copy_";
    if (!dst || !src) {
        mft__null_arg(fn, !dst ? "dst" : "src");
        return MFT_ERR_NULL;
    }
    mft_status st = mft__copy_check_sizes(fn, dst, src);
    if (st == MFT_OK) st = mft__ag_check_inplace(fn, dst);
    if (st == MFT_OK) st = mft__copy_into(fn, dst, src);
    return st;
}

mft_tensor *mft_contiguous(const mft_tensor *t, mft_format fmt) {
    return copy_record("mft_contiguous", "contiguous", t,
                       mft__contiguous("mft_contiguous", t, fmt));
}

mft_tensor *mft_to_format(const mft_tensor *t, mft_format fmt) {
    return copy_record("mft_to_format", "to_format", t, mft__to_format("mft_to_format", t, fmt));
}

mft_tensor *mft_clone(const mft_tensor *t, mft_format fmt) {
    return copy_record("mft_clone", "clone", t, mft__clone("mft_clone", t, fmt));
}

mft_tensor *mft_to_layout(const mft_tensor *t, const mft_layout *l) {
    return copy_record("mft_to_layout", "to_layout", t, mft__to_layout("mft_to_layout", t, l));
}

mft_tensor *mft_to_dtype(const mft_tensor *t, mft_dtype dtype) {
    return copy_record("mft_to_dtype", "to_dtype", t, mft__to_dtype("mft_to_dtype", t, dtype));
}
