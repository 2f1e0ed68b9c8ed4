/* ops/elementwise/engine.c — the elementwise driver shared by unary, binary and
 * ternary ops: argument checks, PyTorch's type promotion (result_type with
 * dim / 0-dim / scalar priority groups), the result layout rule of docs/spec.md §4
 * (fast setup or stride-order reorder, then the first operand's tag for
 * ambiguous strides), destination checks for in-place and _out variants, and
 * the run through the iterator. Kernels live in unary.c, binary.c, ternary.c.
 * In-place and _out variants all pass mft__ew_run_into, which refuses them
 * while the tape records (mft__agew_check_into). */
#include <string.h>
#include "mft/autograd.h"
#include "ops_internal.h"

/* elementwise_backward.c: refusal of in-place / out= writes while recording */

/* ---------------------------------------------------------------- promotion */
bool mft__is_float(mft_dtype dt) { return dt == MFT_F32 || dt == MFT_F64; }

bool mft__scalar_is_int(double s) { return isfinite(s) && s == floor(s); }

/* Lattice U8 < I32 < I64 < F32 < F64 (any float beats any integer). */
mft_dtype mft__promote(mft_dtype a, mft_dtype b) {
    if (a == MFT_DTYPE_COUNT) return b;
    if (b == MFT_DTYPE_COUNT) return a;
    static const int rank[MFT_DTYPE_COUNT] = {[MFT_U8] = 0, [MFT_I32] = 1, [MFT_I64] = 2,
                                              [MFT_F32] = 3, [MFT_F64] = 4};
    return rank[a] >= rank[b] ? a : b;
}

bool mft_can_cast(mft_dtype from, mft_dtype to) {
    if ((unsigned)from >= MFT_DTYPE_COUNT || (unsigned)to >= MFT_DTYPE_COUNT) return false;
    return !(mft__is_float(from) && !mft__is_float(to));
}

/* PyTorch's combine_categories: a lower-priority group only counts when it
 * is floating and the higher one is not (MFT_DTYPE_COUNT = undefined). */
static mft_dtype ew_combine(mft_dtype higher, mft_dtype lower) {
    if (higher != MFT_DTYPE_COUNT && mft__is_float(higher)) return higher;
    if (lower != MFT_DTYPE_COUNT && mft__is_float(lower)) return mft__promote(higher, lower);
    return higher != MFT_DTYPE_COUNT ? higher : lower;
}

/* Promoted dtype of n tensors and nscalars scalars (Python-number-like). */
static mft_dtype ew_result_type(int n, const mft_tensor *const *ts, int nscalars,
                                const double *scalars) {
    mft_dtype dim = MFT_DTYPE_COUNT, zero = MFT_DTYPE_COUNT, wrapped = MFT_DTYPE_COUNT;
    for (int i = 0; i < n; i++) {
        if (ts[i]->ndim > 0)
            dim = mft__promote(dim, ts[i]->dtype);
        else
            zero = mft__promote(zero, ts[i]->dtype);
    }
    for (int i = 0; i < nscalars; i++)
        wrapped = mft__promote(wrapped, mft__scalar_is_int(scalars[i]) ? MFT_I64 : MFT_F32);
    return ew_combine(dim, ew_combine(zero, wrapped));
}

mft_dtype mft_result_type(int n, const mft_tensor *const *ts, bool has_scalar, double scalar) {
    if (n < 0 || (n > 0 && !ts)) {
        mft__set_error(MFT_ERR_NULL, "mft_result_type: tensor list is NULL for n %d", n);
        return MFT_DTYPE_COUNT;
    }
    for (int i = 0; i < n; i++) {
        if (!ts[i]) {
            mft__null_arg("mft_result_type", "ts[i]");
            return MFT_DTYPE_COUNT;
        }
    }
    if (n == 0 && !has_scalar) {
        mft__set_error(MFT_ERR_INVALID, "mft_result_type: no tensor and no scalar");
        return MFT_DTYPE_COUNT;
    }
    return ew_result_type(n, ts, has_scalar ? 1 : 0, &scalar);
}

/* ---------------------------------------------------------------- layout */
static bool ew_same_sizes(const mft_tensor *t, int ndim, const int64_t *shape) {
    if (t->ndim != ndim) return false;
    for (int d = 0; d < ndim; d++)
        if (t->sizes[d] != shape[d]) return false;
    return true;
}

void mft__ew_result_strides(int nin, const mft_tensor *const *inputs, bool scalar_operand,
                            int ndim, const int64_t *shape, int64_t *strides) {
    /* fast setup: no broadcasting and one common packed/dense layout */
    bool same = !scalar_operand, contig = true, cl = true, dense_same = true;
    for (int k = 0; k < nin; k++) {
        const mft_tensor *t = inputs[k];
        same = same && ew_same_sizes(t, ndim, shape);
        contig = contig && (t->flags & MFT__F_CONTIG);
        cl = cl && (t->flags & MFT__F_CL_CONTIG);
        dense_same = dense_same && (t->flags & MFT__F_DENSE);
    }
    for (int k = 1; same && !contig && !cl && dense_same && k < nin; k++)
        for (int i = 0; dense_same && i < ndim; i++)
            dense_same = inputs[k]->strides[i] == inputs[0]->strides[i];
    if (same && contig) {
        mft__format_strides(ndim, shape, MFT_CONTIGUOUS, strides);
        return;
    }
    if (same && cl) {
        mft__format_strides(ndim, shape, MFT_CHANNELS_LAST, strides);
        return;
    }
    if (same && dense_same) {
        memcpy(strides, inputs[0]->strides, sizeof(int64_t) * (size_t)ndim);
        return;
    }
    /* general: the iterator's dim order over the inputs, packed */
    int64_t est[MFT__ITER_MAX_OPERANDS][MFT_MAX_DIMS] = {{0}};
    for (int k = 0; k < nin; k++) {
        const mft_tensor *t = inputs[k];
        int off = ndim - t->ndim;
        for (int i = 0; i < ndim; i++) {
            int td = i - off;
            est[k][i] = (td < 0 || (t->sizes[td] == 1 && shape[i] != 1)) ? 0 : t->strides[td];
        }
    }
    int perm[MFT_MAX_DIMS];
    mft__iter_reorder(nin, ndim, shape, &est[0][0], perm);
    int64_t acc = 1; /* plain products, as PyTorch: a size-0 dim zeroes the outer strides */
    for (int i = 0; i < ndim; i++) {
        strides[perm[i]] = acc;
        acc *= shape[perm[i]];
    }
}

/* ---------------------------------------------------------------- driver */
typedef struct ew_plan {
    mft_dtype compute, result;
    int ndim;
    int64_t shape[MFT_MAX_DIMS];
} ew_plan;

static bool ew_plan_make(const char *fn, const mft__ew_op *op, const mft_tensor *const *in,
                         const double *params, ew_plan *p) {
    int first = op->rule == MFT__EW_WHERE ? 1 : 0;
    static const double no_params[2] = {0, 0};
    mft_dtype t = ew_result_type(op->ninputs - first, in + first, op->scalar_promotes,
                                 params ? params : no_params);
    if (op->float_only && !mft__is_float(t)) {
        mft__set_error(MFT_ERR_DTYPE, "%s: dtype %s is not supported (floating types only)", fn,
                       mft_dtype_name(t));
        return false;
    }
    p->compute = (op->rule == MFT__EW_FLOAT && !mft__is_float(t)) ? MFT_F32 : t;
    /* Note [Integer scalars]: an integral scalar must fit an integer compute
     * dtype (a non-integral one has made it floating above) */
    static const char *const what[2] = {"scalar", "second scalar"};
    const mft_dtype range = op->scalar_wraps && !mft__is_float(p->compute) ? MFT_I64 : p->compute;
    for (int i = 0; i < op->scalar_promotes && params; i++)
        if (mft__check_int_value(fn, what[i], range, params[i]) != MFT_OK) return false;
    p->result = op->rule == MFT__EW_COMPARE ? MFT_U8 : p->compute;
    if (!op->loops[p->compute]) {
        mft__set_error(MFT_ERR_DTYPE, "%s: dtype %s is not supported", fn,
                       mft_dtype_name(p->compute));
        return false;
    }
    int nd[MFT__ITER_MAX_OPERANDS];
    const int64_t *sz[MFT__ITER_MAX_OPERANDS];
    for (int k = 0; k < op->ninputs; k++) {
        nd[k] = in[k]->ndim;
        sz[k] = in[k]->sizes;
    }
    if (mft__broadcast_shape(fn, op->ninputs, nd, sz, &p->ndim, p->shape) != MFT_OK) return false;
    /* the broadcast result may hold more elements than any input */
    return mft__check_geometry(fn, p->ndim, p->shape, NULL, p->result) == MFT_OK;
}

/* Destination checks for in-place / _out (docs/spec.md §4 row 2, §6). */
static bool ew_check_dest(const char *fn, const mft__ew_op *op, const mft_tensor *out,
                          const mft_tensor *const *in, const ew_plan *p) {
    char a[MFT__DIMS_BUF], b[MFT__DIMS_BUF];
    if (!ew_same_sizes(out, p->ndim, p->shape)) {
        mft__set_error(MFT_ERR_SHAPE,
                       "%s: destination sizes %s differ from the broadcast result sizes %s "
                       "(destinations are never resized)",
                       fn, mft__fmt_dims(a, sizeof a, out->ndim, out->sizes),
                       mft__fmt_dims(b, sizeof b, p->ndim, p->shape));
        return false;
    }
    if (!mft_can_cast(p->result, out->dtype)) {
        mft__set_error(MFT_ERR_DTYPE, "%s: result dtype %s cannot be stored in a %s destination",
                       fn, mft_dtype_name(p->result), mft_dtype_name(out->dtype));
        return false;
    }
    if (mft__check_writable(fn, out) != MFT_OK) return false;
    for (int k = 0; k < op->ninputs; k++)
        if (mft__check_overlap(fn, out, in[k]) != MFT_OK) return false;
    return true;
}

typedef struct ew_temps {
    mft_tensor *t[MFT__ITER_MAX_OPERANDS + 1];
    int n;
} ew_temps;

static void ew_temps_release(ew_temps *tmp) {
    for (int i = 0; i < tmp->n; i++) mft_tensor_release(tmp->t[i]);
    tmp->n = 0;
}

/* Inputs converted to the compute dtype (cond of where to U8). */
static bool ew_cast_inputs(const char *fn, const mft__ew_op *op, const mft_tensor *const *in,
                           const ew_plan *p, mft_tensor **cast, ew_temps *tmp) {
    for (int k = 0; k < op->ninputs; k++) {
        bool cond = op->rule == MFT__EW_WHERE && k == 0;
        mft_dtype want = cond ? MFT_U8 : p->compute;
        if (in[k]->dtype == want) {
            cast[k] = (mft_tensor *)in[k];
            continue;
        }
        mft__scope_suspend(); /* a condition means "non-zero", not a cast (0.5 is true) */
        bool grad = mft_set_grad_enabled(false); /* an internal cast records nothing */
        mft_tensor *c = cond ? mft_ne_scalar(in[k], 0.0) : mft_to_dtype(in[k], want);
        mft_set_grad_enabled(grad);
        mft__scope_resume();
        if (!c) {
            mft__relabel_error(fn);
            return false;
        }
        tmp->t[tmp->n++] = c;
        cast[k] = c;
    }
    return true;
}

/* ---------------------------------------------------------------- blocked operands
 * Note [Blocked elementwise] (docs/spec.md §7): when every blocked operand
 * has the result's sizes and all blocked operands and the destination share
 * one blocking, the op runs natively: the result takes the blocked
 * operands' layout, plain operands (a (1, C, 1, 1) bias, a scalar tensor, a
 * same-shape plain tensor) are expanded to the result's sizes, and all are
 * cut into plain pieces (Note [Plain pieces]) that the ordinary loops run
 * over. Pad lanes are never visited, so f(0) != 0 (exp, x + 1) leaves them
 * zero. Otherwise the blocked operands are converted to plain (counted,
 * cause "fallback") and the result is plain; a blocked destination then
 * gets the plain result copied in. */
static bool ew_any_blocked(const mft__ew_op *op, const mft_tensor *out,
                           const mft_tensor *const *in) {
    bool b = out && out->nblocks;
    for (int k = 0; k < op->ninputs; k++) b = b || in[k]->nblocks;
    return b;
}

static bool ew_blocked_native(const mft__ew_op *op, const mft_tensor *out,
                              const mft_tensor *const *in, const ew_plan *p) {
    const mft_tensor *bl[MFT__ITER_MAX_OPERANDS + 1];
    int n = 0;
    if (out && out->nblocks) bl[n++] = out;
    for (int k = 0; k < op->ninputs; k++) {
        if (!in[k]->nblocks) continue;
        if (!ew_same_sizes(in[k], p->ndim, p->shape)) return false;
        bl[n++] = in[k];
    }
    if (out && !out->nblocks) return false; /* a plain destination: the plain path */
    return n > 0 && mft__blk_can_cut(n, bl);
}

/* The inputs with every blocked one replaced by a plain packed copy. */
static bool ew_unblock_inputs(const char *fn, const mft__ew_op *op, const mft_tensor **in,
                              ew_temps *tmp) {
    for (int k = 0; k < op->ninputs; k++) {
        if (!in[k]->nblocks) continue;
        mft__scope_suspend();
        mft__cause_push(MFT_CAUSE_FALLBACK, strncmp(op->name, "mft_", 4) ? op->name : op->name + 4);
        mft_tensor *c = mft__contiguous(fn, in[k], MFT_CONTIGUOUS);
        mft__cause_pop();
        mft__scope_resume();
        if (!c) return false;
        tmp->t[tmp->n++] = c;
        in[k] = c;
    }
    return true;
}

typedef struct ew_piece_ctx {
    const mft__ew_op *op;
    const ew_plan *p;
    const double *params;
} ew_piece_ctx;

static void ew_piece(void *vctx, mft_tensor *const *pieces) {
    const ew_piece_ctx *c = vctx;
    mft__iter it;
    if (mft__iter_build(c->op->name, &it, c->op->ninputs + 1, pieces, pieces[0]->ndim,
                        pieces[0]->sizes) != MFT_OK)
        return;
    mft__iter_run(&it, c->op->loops[c->p->compute], (void *)c->params, MFT__EW_GRAIN);
}

/* Runs the loops over the plain pieces of blocked operands (plain ones
 * expanded to the result's sizes first). */
static void ew_execute_blocked(const mft__ew_op *op, mft_tensor *const *ops, const ew_plan *p,
                               const double *params) {
    const mft_tensor *full[MFT__ITER_MAX_OPERANDS];
    mft_tensor *tmp[MFT__ITER_MAX_OPERANDS] = {0};
    bool ok = true;
    mft__scope_suspend();
    for (int k = 0; k < op->ninputs + 1; k++) {
        full[k] = ops[k];
        if (ops[k]->nblocks || ew_same_sizes(ops[k], p->ndim, p->shape)) continue;
        tmp[k] = mft__view_expand(op->name, ops[k], p->ndim, p->shape, NULL);
        ok = ok && tmp[k];
        full[k] = tmp[k];
    }
    ew_piece_ctx c = {op, p, params};
    if (ok) mft__blk_foreach(op->name, op->ninputs + 1, full, ew_piece, &c);
    for (int k = 0; k < op->ninputs + 1; k++) mft_tensor_release(tmp[k]);
    mft__scope_resume();
}

static void ew_execute(const mft__ew_op *op, mft_tensor *dst, mft_tensor *const *cast,
                       const ew_plan *p, const double *params) {
    mft_tensor *ops[MFT__ITER_MAX_OPERANDS];
    ops[0] = dst;
    bool blocked = dst->nblocks;
    for (int k = 0; k < op->ninputs; k++) {
        ops[k + 1] = cast[k];
        blocked = blocked || cast[k]->nblocks;
    }
    uint64_t t0 = mft__kernel_begin();
    static const double no_params[2] = {0, 0};
    if (blocked) {
        ew_execute_blocked(op, ops, p, params ? params : no_params);
    } else {
        mft__iter it;
        mft__iter_build(op->name, &it, op->ninputs + 1, ops, p->ndim, p->shape);
        mft__iter_run(&it, op->loops[p->compute], (void *)(params ? params : no_params),
                      MFT__EW_GRAIN);
    }
    atomic_fetch_add(&dst->storage->version, 1);
    const mft_tensor *out[1] = {dst};
    mft__kernel_end(t0, &(mft__kernel_info){strncmp(op->name, "mft_", 4) ? op->name : op->name + 4,
                                            blocked ? "elementwise.blocked" : "elementwise.iter",
                                            MFT_FORMAT_COUNT,
                                            MFT_FORMAT_COUNT, p->compute, op->ninputs, 1,
                                            (const mft_tensor *const *)cast, out, 0, false});
}

static mft_tensor *ew_alloc_result(const char *fn, const mft__ew_op *op,
                                   const mft_tensor *const *in, const ew_plan *p, mft_dtype dt) {
    for (int k = 0; k < op->ninputs; k++) { /* Note [Blocked elementwise] */
        if (!in[k]->nblocks) continue;
        mft_layout l;
        mft__layout_of(in[k], &l);
        mft__layout_packed_like(&l, &l);
        mft_tensor *r = mft__tensor_alloc_layout(fn, &l, dt);
        static const mft__rule_id brows[4] = {MFT__RULE_UNARY, MFT__RULE_UNARY,
                                              MFT__RULE_BINARY, MFT__RULE_TERNARY};
        if (r) {
            const char *name = strncmp(op->name, "mft_", 4) ? op->name : op->name + 4;
            const mft__decision d = mft__rule_decide(brows[op->ninputs & 3], name, op->ninputs,
                                                     in, MFT_CONTIGUOUS, 0);
            mft__rule_apply(r, &d);
        }
        return r;
    }
    int64_t strides[MFT_MAX_DIMS];
    mft__ew_result_strides(op->ninputs, in, op->scalar_operand, p->ndim, p->shape, strides);
    mft_tensor *r = mft__tensor_alloc_strided(fn, p->ndim, p->shape, strides, dt);
    static const mft__rule_id rows[4] = {MFT__RULE_UNARY, MFT__RULE_UNARY, MFT__RULE_BINARY,
                                         MFT__RULE_TERNARY};
    if (r) {
        const char *name = strncmp(op->name, "mft_", 4) ? op->name : op->name + 4;
        const mft__decision d =
            mft__rule_decide(rows[op->ninputs & 3], name, op->ninputs, in, MFT_CONTIGUOUS, 0);
        mft__rule_apply(r, &d);
    }
    return r;
}

static bool ew_check_null(const char *fn, const mft__ew_op *op, const mft_tensor *const *in) {
    static const char *names[] = {"input 0", "input 1", "input 2", "input 3"};
    for (int k = 0; k < op->ninputs; k++) {
        if (!in[k]) {
            mft__null_arg(fn, names[k]);
            return false;
        }
    }
    return true;
}

/* out == NULL: allocate the result; else write into out. */
static mft_tensor *ew_run(const char *fn, const mft__ew_op *op, mft_tensor *out,
                          const mft_tensor *const *in_, const double *params) {
    ew_plan p;
    if (!ew_plan_make(fn, op, in_, params, &p)) return NULL;
    if (out && !ew_check_dest(fn, op, out, in_, &p)) return NULL;
    ew_temps tmp = {.n = 0};
    const mft_tensor *in[MFT__ITER_MAX_OPERANDS];
    for (int k = 0; k < op->ninputs; k++) in[k] = in_[k];
    bool native = true; /* Note [Blocked elementwise] */
    if (ew_any_blocked(op, out, in) && !(native = ew_blocked_native(op, out, in, &p)) &&
        !ew_unblock_inputs(fn, op, in, &tmp)) {
        ew_temps_release(&tmp);
        return NULL;
    }
    mft_tensor *cast[MFT__ITER_MAX_OPERANDS];
    if (!ew_cast_inputs(fn, op, in, &p, cast, &tmp)) {
        ew_temps_release(&tmp);
        return NULL;
    }
    mft_tensor *result = out;
    if (!out) {
        result = ew_alloc_result(fn, op, in, &p, p.result);
        if (result && result->numel) ew_execute(op, result, cast, &p, params);
    } else if (out->dtype == p.result && (native || !out->nblocks)) {
        if (out->numel) ew_execute(op, out, cast, &p, params);
    } else { /* compute in the result dtype, then convert into out */
        mft__scope_suspend();
        mft_tensor *r = ew_alloc_result(fn, op, in, &p, p.result);
        mft__scope_resume();
        if (r) {
            if (r->numel) ew_execute(op, r, cast, &p, params);
            mft__copy_kernel(out, r);
            mft_tensor_release(r);
        } else {
            result = NULL;
        }
    }
    ew_temps_release(&tmp);
    return result;
}

mft_tensor *mft__ew_run(const mft__ew_op *op, const mft_tensor *const *inputs,
                        const double *params) {
    if (!ew_check_null(op->name, op, inputs)) return NULL;
    return ew_run(op->name, op, NULL, inputs, params);
}

mft_status mft__ew_run_into(const mft__ew_op *op, const char *fn, mft_tensor *out,
                            const mft_tensor *const *inputs, const double *params) {
    if (!out) {
        mft__null_arg(fn, "out");
        return MFT_ERR_NULL;
    }
    if (!ew_check_null(fn, op, inputs)) return MFT_ERR_NULL;
    /* Note [Tape]: no in-place write to a tensor that requires grad, no out=
     * from inputs that require grad, while the tape records */
    mft_status st = mft__agew_check_into(fn, out, op->ninputs, inputs);
    if (st != MFT_OK) return st;
    return ew_run(fn, op, out, inputs, params) ? MFT_OK : mft_last_error();
}
