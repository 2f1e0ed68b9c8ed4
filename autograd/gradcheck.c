/* autograd/gradcheck.c — mft_gradcheck: the tape's gradient of
 * sum(fn(inputs) * r) against central differences in F64, element by
 * element, for every input that requires grad. Op authors and the tests use
 * it; it knows nothing about any op. */
#include <math.h>
#include <string.h>
#include "autograd_internal.h"
#include "mft/ops.h"

/* Logical index of element e (row-major over sizes). */
static void gc_unravel(const mft_tensor *t, int64_t e, int64_t *idx) {
    for (int d = t->ndim - 1; d >= 0; d--) {
        int64_t s = t->sizes[d] ? t->sizes[d] : 1;
        idx[d] = e % s;
        e /= s;
    }
}

/* sum(out * r) with out read through its strides. */
static double gc_dot(const mft_tensor *out, const mft_tensor *r) {
    int64_t idx[MFT_MAX_DIMS];
    double acc = 0.0;
    for (int64_t e = 0; e < out->numel; e++) {
        gc_unravel(out, e, idx);
        acc += mft_tensor_get(out, idx) * mft_tensor_get(r, idx);
    }
    return acc;
}

/* fn(inputs) evaluated with grad off, dotted with r. */
static mft_status gc_eval(mft_grad_fn fn, void *ctx, mft_tensor *const *inputs,
                          const mft_tensor *r, double *val) {
    mft_tensor *out = fn(ctx, inputs);
    if (!out) return mft_last_error() != MFT_OK ? mft_last_error() : MFT_ERR_INTERNAL;
    if (out->numel != r->numel) {
        mft_tensor_release(out);
        mft__set_error(MFT_ERR_INTERNAL, "mft_gradcheck: fn returned %lld elements, then %lld",
                       (long long)r->numel, (long long)out->numel);
        return MFT_ERR_INTERNAL;
    }
    *val = gc_dot(out, r);
    mft_tensor_release(out);
    return MFT_OK;
}

mft_status mft_gradcheck(mft_grad_fn fn, void *ctx, int n, mft_tensor *const *inputs,
                         const mft_gradcheck_opts *opts) {
    static const char fnname[] = "mft_gradcheck";
    if (!fn || !inputs || n <= 0) {
        mft__set_error(MFT_ERR_NULL, "%s: fn, inputs and n > 0 are required (n = %d)", fnname, n);
        return MFT_ERR_NULL;
    }
    mft_gradcheck_opts o = {1e-6, 1e-5, 1e-3, 1};
    if (opts) {
        o = *opts;
        if (o.eps <= 0) o.eps = 1e-6;
    }
    int nreq = 0;
    for (int i = 0; i < n; i++) {
        if (!inputs[i]) {
            mft__set_error(MFT_ERR_NULL, "%s: input %d is NULL", fnname, i);
            return MFT_ERR_NULL;
        }
        if (!mft_tensor_requires_grad(inputs[i])) continue;
        if (inputs[i]->dtype != MFT_F64) {
            mft__set_error(MFT_ERR_DTYPE, "%s: input %d is %s; gradcheck needs F64", fnname, i,
                           mft_dtype_name(inputs[i]->dtype));
            return MFT_ERR_DTYPE;
        }
        nreq++;
    }
    if (nreq == 0) {
        mft__set_error(MFT_ERR_INVALID, "%s: no input requires grad", fnname);
        return MFT_ERR_INVALID;
    }
    mft_status st = mft_tape_begin();
    if (st != MFT_OK) return st;
    /* the user's own gradients are set aside and restored at the end */
    mft_tensor *kept[64] = {0};
    mft_tensor *analytic[64] = {0};
    if (n > 64) {
        mft_tape_end();
        mft__set_error(MFT_ERR_INVALID, "%s: at most 64 inputs, got %d", fnname, n);
        return MFT_ERR_INVALID;
    }
    for (int i = 0; i < n; i++) {
        if (inputs[i]->autograd && inputs[i]->autograd->grad) {
            kept[i] = inputs[i]->autograd->grad;
            inputs[i]->autograd->grad = NULL;
        }
    }
    mft_tensor *r = NULL, *out = fn(ctx, inputs);
    if (!out) st = mft_last_error() != MFT_OK ? mft_last_error() : MFT_ERR_INTERNAL;
    if (st == MFT_OK) {
        r = mft_rand(out->ndim, out->sizes, MFT_F64, MFT_CONTIGUOUS, o.seed);
        if (r) {
            mft_tensor *r2 = mft_mul_scalar(r, 2.0), *r3 = r2 ? mft_sub_scalar(r2, 1.0) : NULL;
            mft_tensor_release(r);
            mft_tensor_release(r2);
            r = r3;
        }
        if (!r) st = mft_last_error();
    }
    if (st == MFT_OK && out->dtype != MFT_F64) {
        mft__set_error(MFT_ERR_DTYPE, "%s: fn returned %s; gradcheck needs F64", fnname,
                       mft_dtype_name(out->dtype));
        st = MFT_ERR_DTYPE;
    }
    if (st == MFT_OK && !mft_tensor_requires_grad(out)) {
        mft__set_error(MFT_ERR_INVALID,
                       "%s: fn's output does not require grad (no differentiable op recorded)",
                       fnname);
        st = MFT_ERR_INVALID;
    }
    if (st == MFT_OK) st = mft_backward(out, r);
    for (int i = 0; i < n; i++) {
        if (inputs[i]->autograd) {
            analytic[i] = inputs[i]->autograd->grad;
            inputs[i]->autograd->grad = kept[i];
        } else {
            mft_tensor_release(kept[i]);
        }
    }
    mft_tensor_release(out);
    mft_tape_end();
    /* numeric: perturb each element in place (grad off: no tape is open) */
    int64_t idx[MFT_MAX_DIMS];
    for (int i = 0; i < n && st == MFT_OK; i++) {
        mft_tensor *x = inputs[i];
        if (!mft_tensor_requires_grad(x)) continue;
        for (int64_t e = 0; e < x->numel && st == MFT_OK; e++) {
            gc_unravel(x, e, idx);
            double orig = mft_tensor_get(x, idx), fp = 0, fm = 0;
            mft_tensor_set(x, idx, orig + o.eps);
            st = gc_eval(fn, ctx, inputs, r, &fp);
            mft_tensor_set(x, idx, orig - o.eps);
            if (st == MFT_OK) st = gc_eval(fn, ctx, inputs, r, &fm);
            mft_tensor_set(x, idx, orig);
            if (st != MFT_OK) break;
            double num = (fp - fm) / (2 * o.eps);
            double ana = analytic[i] ? mft_tensor_get(analytic[i], idx) : 0.0;
            if (!(fabs(ana - num) <= o.atol + o.rtol * fabs(num))) {
                char a[MFT__DIMS_BUF];
                mft__set_error(MFT_ERR_INVALID,
                               "%s: input %d element %s: analytic %.10g, numeric %.10g "
                               "(atol %g, rtol %g)",
                               fnname, i, mft__fmt_dims(a, sizeof a, x->ndim, idx), ana, num,
                               o.atol, o.rtol);
                st = MFT_ERR_INVALID;
            }
        }
    }
    for (int i = 0; i < n; i++) mft_tensor_release(analytic[i]);
    mft_tensor_release(r);
    return st;
}
