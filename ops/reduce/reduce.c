/* ops/reduce/reduce.c — reductions over a set of dims: sum, mean, amax, amin,
 * var, std, argmax, and sum_to_size (the gradient of a broadcast).
 *
 * Note [Deterministic parallel reductions]
 * A reduction runs through the elementwise iterator with two operands: the
 * accumulator, broadcast (stride 0) over the reduced dims, and the input.
 * The linear iteration range is cut into one chunk per thread; each chunk
 * accumulates into its own zero/identity-initialised copy of the
 * accumulator, and the copies are then combined in chunk order. The result
 * therefore depends only on the thread count, never on scheduling. Sums of
 * F32 accumulate in F64. Results with keepdim are packed in the input's tag
 * (docs/spec.md §4), others contiguous.
 *
 * Autograd: sum, mean, amax, amin, var, std and sum_to_size record a node
 * (backward formulas below the reductions); argmax is not differentiable. */
#include <math.h>
#include <string.h>
#include "autograd_internal.h"
#include "ops_internal.h"

/* elementwise_backward.c: releases a result whose recording failed (taking
 * it back from the user's scope first), keeping the error */

typedef enum reduce_kind { R_SUM, R_MEAN, R_AMAX, R_AMIN, R_VAR, R_STD } reduce_kind;

/* ---------------------------------------------------------------- loops
 * data[0] = accumulator (stride 0 along reduced dims), data[1] = input
 * (data[2] = input and data[1] = mean for var). */
#define SUM_LOOP(AD, ID)                                                                       \
    static void loop_sum_##AD##_##ID(void *ctx, char **data, const int64_t *st, int64_t n0,     \
                                     int64_t n1) {                                             \
        typedef MFT__T_##AD A;                                                                 \
        typedef MFT__T_##ID T;                                                                 \
        (void)ctx;                                                                             \
        for (int64_t j = 0; j < n1; j++) {                                                     \
            char *a = data[0] + j * st[2];                                                     \
            const char *x = data[1] + j * st[3];                                               \
            if (st[0] == 0 && st[1] == (int64_t)sizeof(T)) {                                   \
                /* packed inner reduction: 16 independent lanes (vectorised, fixed order) */  \
                const T *xr = (const T *)(const void *)x;                                      \
                A s[16] = {0};                                                                 \
                int64_t i = 0;                                                                 \
                for (; i + 16 <= n0; i += 16)                                                  \
                    for (int k = 0; k < 16; k++) s[k] += (A)xr[i + k];                         \
                for (; i < n0; i++) s[0] += (A)xr[i];                                          \
                for (int k = 8; k > 0; k /= 2)                                                 \
                    for (int q = 0; q < k; q++) s[q] += s[q + k];                              \
                *(A *)(void *)a += s[0];                                                       \
            } else if (st[0] == 0) { /* strided inner reduction: four partial sums */         \
                const int64_t sx = st[1];                                                      \
                A s[4] = {0, 0, 0, 0};                                                         \
                int64_t i = 0;                                                                 \
                for (; i + 4 <= n0; i += 4)                                                    \
                    for (int k = 0; k < 4; k++)                                                \
                        s[k] += (A) * (const T *)(const void *)(x + (i + k) * sx);             \
                for (; i < n0; i++) s[0] += (A) * (const T *)(const void *)(x + i * sx);       \
                *(A *)(void *)a += (s[0] + s[1]) + (s[2] + s[3]);                              \
            } else if (st[0] == (int64_t)sizeof(A) && st[1] == (int64_t)sizeof(T)) {           \
                A *ar = (A *)(void *)a;                                                        \
                const T *xr = (const T *)(const void *)x;                                      \
                if (st[2] == 0 && j + 4 <= n1) {                                               \
                    /* 4 rows into the same accumulator row: one add chain, not four */       \
                    const T *x1 = (const T *)(const void *)(x + st[3]),                        \
                            *x2 = (const T *)(const void *)(x + 2 * st[3]),                    \
                            *x3 = (const T *)(const void *)(x + 3 * st[3]);                    \
                    for (int64_t i = 0; i < n0; i++)                                           \
                        ar[i] += ((A)xr[i] + (A)x1[i]) + ((A)x2[i] + (A)x3[i]);                \
                    j += 3;                                                                    \
                    continue;                                                                  \
                }                                                                              \
                for (int64_t i = 0; i < n0; i++) ar[i] += (A)xr[i];                            \
            } else {                                                                           \
                for (int64_t i = 0; i < n0; i++)                                               \
                    *(A *)(void *)(a + i * st[0]) += (A) * (const T *)(const void *)(x + i * st[1]); \
            }                                                                                  \
        }                                                                                      \
    }
SUM_LOOP(F64, F32)
SUM_LOOP(F64, F64)
SUM_LOOP(W64, I32)
SUM_LOOP(W64, I64)
SUM_LOOP(W64, U8)

/* amax / amin: a NaN input makes the accumulator NaN for good. */
#define EXT_LOOP(name, D, CMP)                                                                 \
    static void loop_##name##_##D(void *ctx, char **data, const int64_t *st, int64_t n0,        \
                                  int64_t n1) {                                                \
        typedef MFT__T_##D T;                                                                  \
        (void)ctx;                                                                             \
        for (int64_t j = 0; j < n1; j++) {                                                     \
            char *a = data[0] + j * st[2];                                                     \
            const char *x = data[1] + j * st[3];                                               \
            for (int64_t i = 0; i < n0; i++) {                                                 \
                T *ap = (T *)(void *)(a + i * st[0]);                                          \
                const T v = *(const T *)(const void *)(x + i * st[1]);                         \
                if (v != v || (*ap == *ap && v CMP * ap)) *ap = v;                             \
            }                                                                                  \
        }                                                                                      \
    }
#define EXT_ALL(name, CMP) \
    EXT_LOOP(name, F32, CMP) EXT_LOOP(name, F64, CMP) EXT_LOOP(name, I32, CMP) \
    EXT_LOOP(name, I64, CMP) EXT_LOOP(name, U8, CMP)
EXT_ALL(amax, >)
EXT_ALL(amin, <)

/* var: acc += (x - mean)^2, mean in F64 broadcast like acc */
#define VAR_LOOP(ID)                                                                           \
    static void loop_var_##ID(void *ctx, char **data, const int64_t *st, int64_t n0,            \
                              int64_t n1) {                                                    \
        typedef MFT__T_##ID T;                                                                 \
        (void)ctx;                                                                             \
        for (int64_t j = 0; j < n1; j++) {                                                     \
            char *a = data[0] + j * st[3];                                                     \
            const char *m = data[1] + j * st[4], *x = data[2] + j * st[5];                     \
            for (int64_t i = 0; i < n0; i++) {                                                 \
                double d = (double)*(const T *)(const void *)(x + i * st[2]) -                 \
                           *(const double *)(const void *)(m + i * st[1]);                     \
                *(double *)(void *)(a + i * st[0]) += d * d;                                   \
            }                                                                                  \
        }                                                                                      \
    }
VAR_LOOP(F32)
VAR_LOOP(F64)

/* Adds partial src into dst elementwise (same packed layout, dtype dt). */
static void reduce_combine(reduce_kind kind, mft_dtype dt, char *dst, const char *src, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        switch (kind) {
        case R_AMAX:
        case R_AMIN: {
            double a = mft__load(dt, dst + i * (int64_t)mft__elem_size(dt));
            double b = mft__load(dt, src + i * (int64_t)mft__elem_size(dt));
            bool take = b != b || (a == a && (kind == R_AMAX ? b > a : b < a));
            if (take) memcpy(dst + i * (int64_t)mft__elem_size(dt), src + i * (int64_t)mft__elem_size(dt), mft__elem_size(dt));
            break;
        }
        default:
            if (dt == MFT_I64) /* wraps, as the chunk sums did (MFT__T_W64) */
                ((uint64_t *)(void *)dst)[i] += ((const uint64_t *)(const void *)src)[i];
            else
                ((double *)(void *)dst)[i] += ((const double *)(const void *)src)[i];
        }
    }
}

/* ---------------------------------------------------------------- driver */
typedef struct reduce_plan {
    const char *fn;
    int ndim;
    bool mask[MFT_MAX_DIMS];
    int64_t keep_sizes[MFT_MAX_DIMS]; /* keepdim shape */
    int64_t count;                    /* elements folded into each result */
} reduce_plan;

static bool reduce_parse_dims(const char *fn, const mft_tensor *x, int ndims, const int *dims,
                              reduce_plan *p) {
    p->fn = fn;
    p->ndim = x->ndim;
    memset(p->mask, 0, sizeof p->mask);
    if (ndims < 0 || ndims > MFT_MAX_DIMS || (ndims > 0 && !dims)) {
        mft__set_error(ndims > 0 && !dims ? MFT_ERR_NULL : MFT_ERR_INVALID,
                       "%s: %d dims%s", fn, ndims, ndims > 0 && !dims ? " but dims is NULL" : " is invalid");
        return false;
    }
    for (int i = 0; i < ndims; i++) {
        int d = mft__wrap_dim(fn, dims[i], x->ndim);
        if (d < 0) return false;
        if (p->mask[d]) {
            char buf[MFT__DIMS_BUF];
            mft__set_error(MFT_ERR_DIM, "%s: dim %d appears more than once in dims %s", fn, d,
                           mft__fmt_ints(buf, sizeof buf, ndims, dims));
            return false;
        }
        p->mask[d] = true;
    }
    p->count = 1;
    for (int d = 0; d < x->ndim; d++) {
        if (ndims == 0) p->mask[d] = true;
        p->keep_sizes[d] = p->mask[d] ? 1 : x->sizes[d];
        if (p->mask[d]) p->count *= x->sizes[d];
    }
    return true;
}

/* The user's result: keepdim shape packed in x's tag, or the squeezed shape
 * contiguous; *keep_view receives a keepdim-shaped internal view of it. */
static mft_tensor *reduce_alloc_result(const reduce_plan *p, const mft_tensor *x, bool keepdim,
                                       mft_dtype dt, mft_tensor **keep_view) {
    mft_tensor *res;
    if (keepdim) {
        const mft__decision d =
            mft__rule_decide(MFT__RULE_REDUCE_KEEPDIM, p->fn + 4, 1, &x, MFT_CONTIGUOUS, 0);
        res = mft__tensor_alloc(p->fn, p->ndim, p->keep_sizes, dt, d.tag);
        mft__rule_apply(res, &d);
        *keep_view = mft_tensor_retain(res);
        return res;
    }
    int64_t sq[MFT_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < p->ndim; d++)
        if (!p->mask[d]) sq[n++] = p->keep_sizes[d];
    res = mft__tensor_alloc(p->fn, n, sq, dt, MFT_CONTIGUOUS);
    if (!res) return NULL;
    mft__rule_apply1(res, MFT__RULE_REDUCE, p->fn + 4, x); /* the row, not a declaration */
    mft__scope_suspend();
    *keep_view = mft_view(res, p->ndim, p->keep_sizes);
    mft__scope_resume();
    if (!*keep_view) {
        mft_tensor_release(res);
        mft__relabel_error(p->fn);
        return NULL;
    }
    return res;
}

typedef struct reduce_job {
    mft__iter it;
    mft__loop2d loop;
    reduce_kind kind;
    mft_dtype acc_dtype;
    int64_t acc_bytes, chunk, total;
    char *partials; /* one accumulator copy per chunk after the first */
    const mft_tensor *acc;
} reduce_job;

static void reduce_chunk(void *vctx, int64_t begin, int64_t end) {
    reduce_job *job = vctx;
    for (int64_t c = begin; c < end; c++) {
        mft__iter it = job->it;
        if (c > 0) it.data[0] = job->partials + (c - 1) * job->acc_bytes;
        int64_t b = c * job->chunk, e = b + job->chunk < job->total ? b + job->chunk : job->total;
        if (b < e) mft__iter_run_range(&it, job->loop, NULL, b, e);
    }
}

/* Runs loop over [acc broadcast over the reduced dims, extra..., x] with
 * per-chunk partial accumulators (Note [Deterministic parallel reductions]).
 * acc is packed (contiguous storage of acc->numel elements) and initialised. */
static bool reduce_run(const reduce_plan *p, mft_tensor *acc, int nextra, mft_tensor *const *extra,
                       const mft_tensor *x, mft__loop2d loop, reduce_kind kind, double identity) {
    mft_tensor *ops[4];
    uint64_t t0 = mft__kernel_begin();
    mft__scope_suspend();
    ops[0] = mft_expand(acc, x->ndim, x->sizes);
    mft__scope_resume();
    if (!ops[0]) return mft__relabel_error(p->fn), false;
    for (int k = 0; k < nextra; k++) ops[1 + k] = extra[k];
    ops[1 + nextra] = (mft_tensor *)x;
    reduce_job job;
    memset(&job, 0, sizeof job);
    mft__iter_build(p->fn, &job.it, 2 + nextra, ops, x->ndim, x->sizes);
    mft_tensor_release(ops[0]);
    job.loop = loop;
    job.kind = kind;
    job.acc_dtype = acc->dtype;
    job.acc_bytes = acc->numel * (int64_t)mft__elem_size(acc->dtype);
    job.total = job.it.numel;
    job.acc = acc;
    int nchunks = job.total >= 2 * MFT__EW_GRAIN ? mft_num_threads() : 1;
    if (nchunks < 1) nchunks = 1;
    job.chunk = (job.total + nchunks - 1) / nchunks;
    if (job.chunk == 0) job.chunk = 1;
    if (nchunks > 1) {
        job.partials = mft__alloc_or_err(p->fn, (size_t)(job.acc_bytes * (nchunks - 1)), 64);
        if (!job.partials) return false;
        /* each partial starts as a copy of the initialised accumulator */
        for (int c = 1; c < nchunks; c++) {
            char *part = job.partials + (c - 1) * job.acc_bytes;
            for (int64_t i = 0; i < acc->numel; i++)
                mft__store(acc->dtype, part + i * (int64_t)mft__elem_size(acc->dtype), identity);
        }
    }
    mft__parallel_for(0, nchunks, 1, reduce_chunk, &job);
    for (int c = 1; c < nchunks; c++)
        reduce_combine(kind, acc->dtype, mft__tensor_ptr(acc), job.partials + (c - 1) * job.acc_bytes,
                       acc->numel);
    mft__free(job.partials);
    atomic_fetch_add(&acc->storage->version, 1);
    const mft_tensor *in[1] = {x}, *out[1] = {acc};
    mft__kernel_end(t0, &(mft__kernel_info){strncmp(p->fn, "mft_", 4) ? p->fn : p->fn + 4,
                                            "reduce.iter", MFT_FORMAT_COUNT, MFT_FORMAT_COUNT,
                                            x->dtype, 1, 1, in, out, 0, false});
    return true;
}

/* Registers a finished result in the user's scope (it was made with the scope
 * suspended, so a failure on the way could release it). */
static mft_tensor *reduce_hand_over(const char *fn, mft_tensor *res) {
    if (mft__scope_register(res) != MFT_OK) {
        mft_tensor_release(res);
        mft__set_error(MFT_ERR_NOMEM, "%s: out of memory registering the result in a scope", fn);
        return NULL;
    }
    return res;
}

static mft_tensor *reduce_impl(const char *fn, const mft_tensor *x, int ndims, const int *dims,
                               bool keepdim, reduce_kind kind, double correction) {
    if (!x) {
        mft__null_arg(fn, "x");
        return NULL;
    }
    if ((kind == R_VAR || kind == R_STD) && !isfinite(correction)) {
        mft__set_error(MFT_ERR_INVALID, "%s: correction %g must be finite", fn, correction);
        return NULL;
    }
    reduce_plan p;
    if (!reduce_parse_dims(fn, x, ndims, dims, &p)) return NULL;
    bool is_float = mft__is_float(x->dtype);
    if ((kind == R_MEAN || kind == R_VAR || kind == R_STD) && !is_float) {
        mft__set_error(MFT_ERR_DTYPE, "%s: dtype %s is not supported (floating types only)", fn,
                       mft_dtype_name(x->dtype));
        return NULL;
    }
    if ((kind == R_AMAX || kind == R_AMIN) && p.count == 0) {
        char a[MFT__DIMS_BUF];
        mft__set_error(MFT_ERR_SHAPE, "%s: cannot reduce over a size-0 dim of sizes %s (no identity)",
                       fn, mft__fmt_dims(a, sizeof a, x->ndim, x->sizes));
        return NULL;
    }
    mft_dtype res_dt = kind == R_SUM && !is_float ? MFT_I64 : x->dtype;
    mft_dtype acc_dt = (kind == R_AMAX || kind == R_AMIN) ? x->dtype : is_float ? MFT_F64 : MFT_I64;
    double identity = 0.0;
    if (kind == R_AMAX) identity = is_float ? -INFINITY : x->dtype == MFT_U8 ? 0.0 : -9.3e18;
    if (kind == R_AMIN) identity = is_float ? INFINITY : x->dtype == MFT_U8 ? 255.0 : 9.3e18;

    mft_tensor *keep = NULL, *acc = NULL, *mean = NULL;
    /* the result joins the user's scope only on success (a failure releases it) */
    mft__scope_suspend();
    mft_tensor *res = reduce_alloc_result(&p, x, keepdim, res_dt, &keep);
    if (!res) {
        mft__scope_resume();
        return NULL;
    }
    bool ok = true;
    if (acc_dt == res_dt && (keep->flags & MFT__F_CONTIG || keep->flags & MFT__F_CL_CONTIG) &&
        kind != R_MEAN && kind != R_VAR && kind != R_STD) {
        acc = mft_tensor_retain(keep); /* accumulate straight into the result */
    } else {
        mft_format f = (x->ndim >= 3 && x->ndim <= 5) ? x->tag : MFT_CONTIGUOUS;
        acc = mft__tensor_alloc(fn, p.ndim, p.keep_sizes, acc_dt, f);
        ok = acc != NULL;
    }
    if (ok && acc->numel) mft__fill(acc, identity);
    if (ok && x->numel) {
        if (kind == R_VAR || kind == R_STD) {
            /* pass 1: mean in F64; pass 2: sum of squared deviations */
            mean = mft__tensor_alloc(fn, p.ndim, p.keep_sizes, MFT_F64, MFT_CONTIGUOUS);
            ok = mean != NULL;
            if (ok) {
                mft__fill(mean, 0.0);
                ok = reduce_run(&p, mean, 0, NULL, x, x->dtype == MFT_F32 ? loop_sum_F64_F32 : loop_sum_F64_F64,
                                R_SUM, 0.0);
            }
            if (ok) {
                double *m = mft_tensor_data(mean);
                for (int64_t i = 0; i < mean->numel; i++) m[i] /= (double)p.count;
                mft_tensor *mv = NULL;
                mv = mft_expand(mean, x->ndim, x->sizes);
                ok = mv != NULL;
                if (ok)
                    ok = reduce_run(&p, acc, 1, &mv, x, x->dtype == MFT_F32 ? loop_var_F32 : loop_var_F64,
                                    R_SUM, 0.0);
                mft_tensor_release(mv);
            }
        } else {
            mft__loop2d loop = NULL;
            if (kind == R_SUM || kind == R_MEAN) {
                static const mft__loop2d sums[MFT_DTYPE_COUNT] = {
                    [MFT_F32] = loop_sum_F64_F32, [MFT_F64] = loop_sum_F64_F64, [MFT_I32] = loop_sum_W64_I32,
                    [MFT_I64] = loop_sum_W64_I64, [MFT_U8] = loop_sum_W64_U8};
                loop = sums[x->dtype];
            } else {
                static const mft__loop2d maxs[MFT_DTYPE_COUNT] = {
                    [MFT_F32] = loop_amax_F32, [MFT_F64] = loop_amax_F64, [MFT_I32] = loop_amax_I32,
                    [MFT_I64] = loop_amax_I64, [MFT_U8] = loop_amax_U8};
                static const mft__loop2d mins[MFT_DTYPE_COUNT] = {
                    [MFT_F32] = loop_amin_F32, [MFT_F64] = loop_amin_F64, [MFT_I32] = loop_amin_I32,
                    [MFT_I64] = loop_amin_I64, [MFT_U8] = loop_amin_U8};
                loop = kind == R_AMAX ? maxs[x->dtype] : mins[x->dtype];
            }
            ok = reduce_run(&p, acc, 0, NULL, x, loop, kind == R_MEAN ? R_SUM : kind, identity);
        }
    }
    if (ok && acc != keep) {
        /* finalise in F64 (mean, var, std), then convert into the result */
        if (kind == R_MEAN || kind == R_VAR || kind == R_STD) {
            double div = kind == R_MEAN ? (double)p.count : (double)p.count - correction;
            if (div < 0) div = 0;
            double *a = mft_tensor_data(acc);
            for (int64_t i = 0; i < acc->numel; i++) {
                a[i] = a[i] / div;
                if (kind == R_STD) a[i] = sqrt(a[i]);
            }
        }
        if (keep->numel) mft__copy_kernel(keep, acc);
    }
    mft__scope_resume();
    mft_tensor_release(mean);
    mft_tensor_release(acc);
    mft_tensor_release(keep);
    if (!ok) {
        mft_tensor_release(res);
        return NULL;
    }
    atomic_fetch_add(&res->storage->version, 1);
    return reduce_hand_over(fn, res);
}

/* ---------------------------------------------------------------- autograd
 * Backward of the reductions (PyTorch's formulas): the gradient, viewed with
 * the keepdim shape and expanded over the reduced dims, written into a
 * tensor laid out like the input: sum copies it, mean divides by the count,
 * amax/amin share it evenly among the elements equal to the extreme (ties
 * split, as PyTorch's amax/amin), var multiplies by 2 (x - mean) / (N -
 * correction), std by (x - mean) / ((N - correction) std) (0 where std is 0).
 * argmax is not differentiable. */
typedef struct reduce_ag_params {
    reduce_kind kind;
    bool keepdim;
    int ndims;
    int dims[MFT_MAX_DIMS];
    int64_t keep_sizes[MFT_MAX_DIMS];
    int64_t count;
    double correction;
} reduce_ag_params;

static mft_format reduce_ag_target(const mft__ag_input *in) {
    return mft__rule_grad_format(in->tag, in->ndim);
}

static mft_status reduce_ag_backward(const mft__ag_node *n, mft_tensor *const *gout,
                                     mft_tensor **gin) {
    const reduce_ag_params *p = n->params;
    const mft__ag_input *in = &n->in[0];
    const mft_tensor *x = n->saved[0], *y = n->saved[1];
    mft_tensor *gk = NULL, *ge = NULL, *out = NULL, *yk = NULL, *t1 = NULL, *t2 = NULL,
               *t3 = NULL, *zero = NULL;
    bool ok = true;
    gk = mft_reshape(gout[0], in->ndim, p->keep_sizes);
    ge = gk ? mft_expand(gk, in->ndim, in->sizes) : NULL;
    out = ge ? mft_empty(in->ndim, in->sizes, in->dtype, reduce_ag_target(in)) : NULL;
    ok = out != NULL;
    if (ok && (p->kind == R_AMAX || p->kind == R_AMIN || p->kind == R_STD)) {
        yk = mft_reshape(y, in->ndim, p->keep_sizes);
        zero = mft_zeros(0, NULL, gout[0]->dtype, MFT_CONTIGUOUS);
        ok = yk && zero;
    }
    if (ok) {
        switch (p->kind) {
        case R_SUM: ok = mft_copy_(out, ge) == MFT_OK; break;
        case R_MEAN: ok = mft_div_scalar_out(out, ge, (double)p->count) == MFT_OK; break;
        case R_AMAX:
        case R_AMIN:
            t1 = mft_eq(x, yk); /* the elements equal to their extreme */
            t2 = t1 ? mft_sum(t1, p->ndims, p->dims, true) : NULL;
            t3 = t2 ? mft_div(gk, t2) : NULL;
            ok = t3 && mft_where_out(out, t1, t3, zero) == MFT_OK;
            break;
        case R_VAR:
        case R_STD: {
            double k = 2.0 / ((double)p->count - p->correction);
            mft_tensor *gv = mft_tensor_retain(ge);
            if (p->kind == R_STD) { /* grad / (2 std), 0 where std == 0 */
                mft_tensor *q = mft_div(gk, yk), *q2 = q ? mft_mul_scalar(q, 0.5) : NULL;
                mft_tensor *z = q2 ? mft_eq_scalar(yk, 0.0) : NULL;
                mft_tensor *q3 = z ? mft_where(z, zero, q2) : NULL;
                mft_tensor_release(gv);
                gv = q3 ? mft_expand(q3, in->ndim, in->sizes) : NULL;
                mft_tensor_release(q);
                mft_tensor_release(q2);
                mft_tensor_release(z);
                mft_tensor_release(q3);
            }
            t1 = gv ? mft_mean(x, p->ndims, p->dims, true) : NULL;
            t2 = t1 ? mft_sub(x, t1) : NULL;
            t3 = t2 ? mft_mul(t2, gv) : NULL;
            ok = t3 && mft_mul_scalar_out(out, t3, k) == MFT_OK;
            mft_tensor_release(gv);
            break;
        }
        }
    }
    mft_tensor_release(gk);
    mft_tensor_release(ge);
    mft_tensor_release(yk);
    mft_tensor_release(t1);
    mft_tensor_release(t2);
    mft_tensor_release(t3);
    mft_tensor_release(zero);
    if (!ok) {
        mft_tensor_release(out);
        return mft_last_error() != MFT_OK ? mft_last_error() : MFT_ERR_INTERNAL;
    }
    gin[0] = out;
    return MFT_OK;
}

/* Records res = reduction of x; releases res and returns NULL on failure. */
static mft_tensor *reduce_record(const char *fn, const char *name, const mft_tensor *x,
                                 mft_tensor *res, int ndims, const int *dims, bool keepdim,
                                 reduce_kind kind, double correction) {
    if (!res || !mft__ag_wants(1, &x) || !mft__is_float(res->dtype)) return res;
    reduce_plan p;
    if (!reduce_parse_dims(fn, x, ndims, dims, &p)) { /* cannot happen: the op succeeded */
        mft__ag_drop_result(res);
        return NULL;
    }
    reduce_ag_params prm;
    memset(&prm, 0, sizeof prm);
    prm.kind = kind;
    prm.keepdim = keepdim;
    prm.count = p.count;
    prm.correction = correction;
    for (int d = 0; d < x->ndim; d++) {
        prm.keep_sizes[d] = p.keep_sizes[d];
        if (p.mask[d]) prm.dims[prm.ndims++] = d;
    }
    bool save_x = kind != R_SUM && kind != R_MEAN;
    bool save_y = kind == R_AMAX || kind == R_AMIN || kind == R_STD;
    const mft_tensor *saved[2] = {save_x ? x : NULL, save_y ? res : NULL};
    mft_tensor *outs[1] = {res};
    if (mft__ag_record(fn, name, reduce_ag_backward, 1, &x, 1, outs, 2, saved, &prm,
                       sizeof prm) != MFT_OK) {
        mft__ag_drop_result(res);
        return NULL;
    }
    return res;
}

mft_tensor *mft_sum(const mft_tensor *x, int ndims, const int *dims, bool keepdim) {
    MFT__BLOCKED_FALLBACK("sum", mft_sum(x, ndims, dims, keepdim), 1, &x);
    return reduce_record("mft_sum", "sum", x, reduce_impl("mft_sum", x, ndims, dims, keepdim, R_SUM, 0),
                         ndims, dims, keepdim, R_SUM, 0);
}
mft_tensor *mft_mean(const mft_tensor *x, int ndims, const int *dims, bool keepdim) {
    MFT__BLOCKED_FALLBACK("mean", mft_mean(x, ndims, dims, keepdim), 1, &x);
    return reduce_record("mft_mean", "mean", x,
                         reduce_impl("mft_mean", x, ndims, dims, keepdim, R_MEAN, 0), ndims, dims,
                         keepdim, R_MEAN, 0);
}
mft_tensor *mft_amax(const mft_tensor *x, int ndims, const int *dims, bool keepdim) {
    MFT__BLOCKED_FALLBACK("amax", mft_amax(x, ndims, dims, keepdim), 1, &x);
    return reduce_record("mft_amax", "amax", x,
                         reduce_impl("mft_amax", x, ndims, dims, keepdim, R_AMAX, 0), ndims, dims,
                         keepdim, R_AMAX, 0);
}
mft_tensor *mft_amin(const mft_tensor *x, int ndims, const int *dims, bool keepdim) {
    MFT__BLOCKED_FALLBACK("amin", mft_amin(x, ndims, dims, keepdim), 1, &x);
    return reduce_record("mft_amin", "amin", x,
                         reduce_impl("mft_amin", x, ndims, dims, keepdim, R_AMIN, 0), ndims, dims,
                         keepdim, R_AMIN, 0);
}
mft_tensor *mft_var(const mft_tensor *x, int ndims, const int *dims, double correction,
                    bool keepdim) {
    MFT__BLOCKED_FALLBACK("var", mft_var(x, ndims, dims, correction, keepdim), 1, &x);
    return reduce_record("mft_var", "var", x,
                         reduce_impl("mft_var", x, ndims, dims, keepdim, R_VAR, correction), ndims,
                         dims, keepdim, R_VAR, correction);
}
mft_tensor *mft_std(const mft_tensor *x, int ndims, const int *dims, double correction,
                    bool keepdim) {
    MFT__BLOCKED_FALLBACK("std", mft_std(x, ndims, dims, correction, keepdim), 1, &x);
    return reduce_record("mft_std", "std", x,
                         reduce_impl("mft_std", x, ndims, dims, keepdim, R_STD, correction), ndims,
                         dims, keepdim, R_STD, correction);
}

/* ---------------------------------------------------------------- argmax */
typedef struct argmax_ctx {
    int64_t len, stride; /* along the reduced dim, bytes */
    mft_dtype dt;
} argmax_ctx;

static void argmax_loop(void *vctx, char **data, const int64_t *st, int64_t n0, int64_t n1) {
    const argmax_ctx *c = vctx;
    for (int64_t j = 0; j < n1; j++)
        for (int64_t i = 0; i < n0; i++) {
            const char *x = data[1] + j * st[3] + i * st[1];
            int64_t best = 0;
            double bv = mft__load(c->dt, x);
            for (int64_t k = 1; k < c->len && bv == bv; k++) {
                double v = mft__load(c->dt, x + k * c->stride);
                if (v != v || v > bv) {
                    bv = v;
                    best = k;
                }
            }
            *(int64_t *)(void *)(data[0] + j * st[2] + i * st[0]) = best;
        }
}

mft_tensor *mft_argmax(const mft_tensor *x, int dim, bool keepdim) {
    MFT__BLOCKED_FALLBACK("argmax", mft_argmax(x, dim, keepdim), 1, &x);
    const char *fn = "mft_argmax";
    if (!x) {
        mft__null_arg(fn, "x");
        return NULL;
    }
    reduce_plan p;
    if (x->ndim == 0) {
        mft__set_error(MFT_ERR_RANK, "%s: cannot take argmax along a dim of a rank-0 tensor", fn);
        return NULL;
    }
    if (!reduce_parse_dims(fn, x, 1, &dim, &p)) return NULL;
    int d = mft__wrap_dim(fn, dim, x->ndim);
    if (x->sizes[d] == 0) {
        mft__set_error(MFT_ERR_SHAPE, "%s: dim %d has size 0 (no maximum)", fn, d);
        return NULL;
    }
    mft_tensor *keep = NULL;
    mft__scope_suspend();
    bool grad = mft_set_grad_enabled(false); /* internal views record nothing */
    mft_tensor *res = reduce_alloc_result(&p, x, keepdim, MFT_I64, &keep);
    mft_tensor *xs = res ? mft_select(x, d, 0) : NULL, *rs = res ? mft_select(keep, d, 0) : NULL;
    mft_set_grad_enabled(grad);
    mft__scope_resume();
    if (!res) return NULL;
    if (xs && rs && rs->numel) {
        argmax_ctx c = {x->sizes[d], x->strides[d] * (int64_t)mft__elem_size(x->dtype), x->dtype};
        mft__iter it;
        mft_tensor *ops[2] = {rs, xs};
        mft__iter_build(fn, &it, 2, ops, rs->ndim, rs->sizes);
        mft__iter_run(&it, argmax_loop, &c, MFT__EW_GRAIN / 16);
    }
    bool ok = xs && rs;
    mft_tensor_release(xs);
    mft_tensor_release(rs);
    mft_tensor_release(keep);
    if (!ok) {
        mft_tensor_release(res);
        mft__relabel_error(fn);
        return NULL;
    }
    return reduce_hand_over(fn, res);
}

/* ---------------------------------------------------------------- sum_to_size */
/* Backward: the gradient expanded back to the input's sizes, laid out like it. */
static mft_status sum_to_size_backward(const mft__ag_node *n, mft_tensor *const *gout,
                                       mft_tensor **gin) {
    const mft__ag_input *in = &n->in[0];
    mft_tensor *ge = mft_expand(gout[0], in->ndim, in->sizes);
    mft_tensor *out = ge ? mft_empty(in->ndim, in->sizes, in->dtype, reduce_ag_target(in)) : NULL;
    if (!out || mft_copy_(out, ge) != MFT_OK) {
        mft_tensor_release(ge);
        mft_tensor_release(out);
        return mft_last_error();
    }
    mft_tensor_release(ge);
    gin[0] = out;
    return MFT_OK;
}

static mft_tensor *sum_to_size_record(const char *fn, const mft_tensor *x, mft_tensor *r) {
    if (!r || !mft__ag_wants(1, &x) || !mft__is_float(r->dtype)) return r;
    if (mft__ag_record1(fn, "sum_to_size", sum_to_size_backward, x, r, false, false, NULL, 0) !=
        MFT_OK) {
        mft__ag_drop_result(r);
        return NULL;
    }
    return r;
}

mft_tensor *mft_sum_to_size(const mft_tensor *x, int ndim, const int64_t *sizes) {
    MFT__BLOCKED_FALLBACK("sum_to_size", mft_sum_to_size(x, ndim, sizes), 1, &x);
    const char *fn = "mft_sum_to_size";
    if (!x) {
        mft__null_arg(fn, "x");
        return NULL;
    }
    char a[MFT__DIMS_BUF], b[MFT__DIMS_BUF];
    if (ndim > 0 && !sizes) {
        mft__set_error(MFT_ERR_NULL, "%s: sizes is NULL for ndim %d", fn, ndim);
        return NULL;
    }
    if (ndim < 0 || ndim > x->ndim) {
        mft__set_error(MFT_ERR_SHAPE, "%s: cannot sum sizes %s to %d dims", fn,
                       mft__fmt_dims(a, sizeof a, x->ndim, x->sizes), ndim);
        return NULL;
    }
    int dims[MFT_MAX_DIMS], n = 0, off = x->ndim - ndim;
    for (int d = 0; d < x->ndim; d++) {
        int td = d - off;
        if (td < 0) {
            dims[n++] = d;
        } else if (sizes[td] != x->sizes[d]) {
            if (sizes[td] != 1) {
                mft__set_error(MFT_ERR_SHAPE, "%s: sizes %s do not broadcast to %s (dim %d)", fn,
                               mft__fmt_dims(a, sizeof a, ndim, sizes),
                               mft__fmt_dims(b, sizeof b, x->ndim, x->sizes), d);
                return NULL;
            }
            dims[n++] = d;
        }
    }
    if (n == 0) return mft__retain_result(fn, (mft_tensor *)x);
    mft__scope_suspend();
    mft_tensor *s = reduce_impl(fn, x, n, dims, true, R_SUM, 0);
    mft__scope_resume();
    if (!s) return NULL;
    if (off == 0) { /* s is the result: hand it to the scope like any result */
        if (mft__scope_register(s) != MFT_OK) {
            mft_tensor_release(s);
            mft__set_error(MFT_ERR_NOMEM, "%s: out of memory registering the result", fn);
            return NULL;
        }
        return sum_to_size_record(fn, x, s);
    }
    mft_tensor *v = mft_view(s, ndim, sizes);
    mft_tensor_release(s);
    if (!v) mft__relabel_error(fn);
    return sum_to_size_record(fn, x, v);
}
