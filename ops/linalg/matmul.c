/* ops/linalg/matmul.c — matrix multiplication (mft_matmul, mft_linear), dispatched as
 * op "matmul" (docs/architecture.md §7, mft/cnn.h): the argument checks and the entry
 * points, their autograd nodes, and their backward (mft_matmul_backward,
 * mft_linear_backward, built on the dispatched matmul). The kernels live in
 * gemm.c (the packed fast kernels and the kernel table) and reference.c (the
 * reference kernels, which define the semantics).
 *
 * What a matmul kernel receives (built by the entry points):
 *   inputs[0] A: (batch..., M, K), or (batch..., K, M) used as its
 *   transpose when params.transpose_a; inputs[1] B: (batch..., K, N), or
 *   (batch..., N, K) used as its transpose when params.transpose_b;
 *   outputs[0] C: (batch..., M, N) packed CONTIGUOUS (the result's format,
 *   docs/spec.md §4).
 * Layout choice: the kernels are registered under CONTIGUOUS and the op
 * passes convert = {true, true}, so every kernel (also a user's) gets packed
 * inputs as dispatch.h promises. The op avoids the copies where a packed
 * operand exists without one: a B whose last two dims are a transposed
 * packed matrix (w^T, the weight in linear) is passed as that packed matrix
 * with transpose_b, and an A that is a transposed packed matrix (x^T in
 * linear's grad_w) likewise with transpose_a; a batched A times a 2-D (or 1-D) B is folded into one
 * (batch*M, K) @ (K, N) product when A's batch dims merge into a view
 * (PyTorch does the same fold). Other inputs (strided slices, batch dims
 * broadcast by expand) are converted by the dispatcher, which
 * counts them (mft_dispatch_last()->conversions); PyTorch copies in these
 * cases too. The kernels themselves read A and B through their strides (the
 * packing step of the fast kernels accepts any), so they also run correctly
 * on unpacked inputs (a user calling them under MFT_FORMAT_ANY).
 *
 * Mixed dtypes are rejected (no type promotion); the bias of linear is added
 * in place with mft_add_ on the internal result (not fused into the kernel's
 * store).
 * Autograd: mft_matmul / mft_linear record a tape node under a recording
 * tape (the autograd section, before the backward functions). */
#include <string.h>
#include "autograd_internal.h"
#include "linalg_internal.h"
#include "blocked_outputs.h"

/* Note [Kernel tables]: the built-in kernels this family dispatches to. */
static const mft__kernel_def *const g_tables[] = {mft__kernels_gemm, NULL};

/* ---------------------------------------------------------------- entry points */
static bool gemm_check_dtypes(const char *fn, const char *n1, const mft_tensor *t1, const char *n2,
                              const mft_tensor *t2) {
    if (t1->dtype != MFT_F32 && t1->dtype != MFT_F64) {
        mft__set_error(MFT_ERR_DTYPE, "%s: dtype %s of '%s' is not supported (f32 and f64 only)",
                       fn, mft_dtype_name(t1->dtype), n1);
        return false;
    }
    if (t2->dtype != t1->dtype) {
        mft__set_error(MFT_ERR_DTYPE, "%s: expected '%s' and '%s' to have the same dtype, got %s "
                       "and %s", fn, n1, n2, mft_dtype_name(t1->dtype), mft_dtype_name(t2->dtype));
        return false;
    }
    return true;
}

/* Allocates C (rank r, CONTIGUOUS) and dispatches A @ B (B^T with
 * transpose_b; B of rank r). Returns C (internal reference) or NULL with the
 * error set. Called suspended. */
static mft_tensor *gemm_dispatch(const char *fn, const mft_tensor *A, const mft_tensor *B,
                                 int r, const int64_t *csizes, bool transpose_b) {
    /* a transposed packed B (or A): pass the packed matrix and flip
     * transpose_b (set transpose_a): no operand copy */
    mft_tensor *bt = NULL, *at = NULL;
    bool transpose_a = false;
    if (!mft_tensor_is_contiguous(B, MFT_CONTIGUOUS)) {
        bt = mft_transpose(B, -1, -2);
        if (!bt) return NULL;
        if (mft_tensor_is_contiguous(bt, MFT_CONTIGUOUS)) {
            B = bt;
            transpose_b = !transpose_b;
        }
    }
    if (!mft_tensor_is_contiguous(A, MFT_CONTIGUOUS) && A->ndim >= 2) {
        at = mft_transpose(A, -1, -2);
        if (!at) {
            mft_tensor_release(bt);
            return NULL;
        }
        if (mft_tensor_is_contiguous(at, MFT_CONTIGUOUS)) {
            A = at;
            transpose_a = true;
        }
    }
    mft_tensor *c = mft__tensor_alloc(fn, r, csizes, A->dtype, MFT_CONTIGUOUS);
    if (c) {
        const mft_matmul_params p = {transpose_b, transpose_a};
        const mft_tensor *ins[2] = {A, B};
        const bool convert[2] = {true, true};
        if (mft__dispatch(fn, g_tables, MFT__OP_MATMUL, MFT_CONTIGUOUS, A->dtype, 2, ins, convert, 1, &c,
                          &p) != MFT_OK) {
            mft_tensor_release(c);
            c = NULL;
        }
    }
    mft_tensor_release(bt);
    mft_tensor_release(at);
    return c;
}

/* Hands an internal result to the caller (registered in the user's scope);
 * NULL relabels the error with fn. Shared by the family (linalg_internal.h). */
mft_tensor *mft__linalg_hand_over(const char *fn, mft_tensor *res) {
    if (!res) {
        mft__relabel_error(fn);
        return NULL;
    }
    mft_tensor *r = mft__retain_result(fn, res);
    mft_tensor_release(res);
    return r;
}

static mft_tensor *matmul_impl(const mft_tensor *a, const mft_tensor *b) {
    static const char fn[] = "mft_matmul";
    char d1[MFT__DIMS_BUF], d2[MFT__DIMS_BUF];
    if (!a || !b) {
        mft__null_arg(fn, !a ? "a" : "b");
        return NULL;
    }
    if (a->ndim == 0 || b->ndim == 0) {
        mft__set_error(MFT_ERR_RANK, "%s: both arguments need to be at least 1-D, but they are "
                       "%d-D and %d-D", fn, a->ndim, b->ndim);
        return NULL;
    }
    if (!gemm_check_dtypes(fn, "a", a, "b", b)) return NULL;
    const bool a1 = a->ndim == 1, b1d = b->ndim == 1;
    const int64_t M = a1 ? 1 : a->sizes[a->ndim - 2], K = a->sizes[a->ndim - 1];
    const int64_t Kb = b1d ? b->sizes[0] : b->sizes[b->ndim - 2];
    const int64_t N = b1d ? 1 : b->sizes[b->ndim - 1];
    if (K != Kb) {
        mft__set_error(MFT_ERR_SHAPE, "%s: a of sizes %s and b of sizes %s cannot be multiplied "
                       "(a has %lld columns, b has %lld rows)", fn,
                       mft__fmt_dims(d1, sizeof d1, a->ndim, a->sizes),
                       mft__fmt_dims(d2, sizeof d2, b->ndim, b->sizes), (long long)K,
                       (long long)Kb);
        return NULL;
    }
    /* broadcast batch dims */
    const int nda = a->ndim > 2 ? a->ndim - 2 : 0, ndb = b->ndim > 2 ? b->ndim - 2 : 0;
    const int ndims[2] = {nda, ndb};
    const int64_t *szs[2] = {a->sizes, b->sizes};
    int bnd = 0;
    int64_t shape[MFT_MAX_DIMS];
    if (mft__broadcast_shape(fn, 2, ndims, szs, &bnd, shape) != MFT_OK) return NULL;
    int64_t asz[MFT_MAX_DIMS], bsz[MFT_MAX_DIMS], csz[MFT_MAX_DIMS], rsz[MFT_MAX_DIMS];
    memcpy(asz, shape, sizeof(int64_t) * (size_t)bnd);
    memcpy(bsz, shape, sizeof(int64_t) * (size_t)bnd);
    memcpy(csz, shape, sizeof(int64_t) * (size_t)bnd);
    memcpy(rsz, shape, sizeof(int64_t) * (size_t)bnd);
    asz[bnd] = M, asz[bnd + 1] = K;
    bsz[bnd] = K, bsz[bnd + 1] = N;
    csz[bnd] = M, csz[bnd + 1] = N;
    int rnd = bnd;
    if (!a1) rsz[rnd++] = M;
    if (!b1d) rsz[rnd++] = N;

    mft__scope_suspend();
    if (a->ndim >= 3 && b->ndim <= 2) {
        /* fold: (batch..., M, K) @ (K, N) as one (batch*M, K) @ (K, N) when a view allows it */
        int64_t rows = 1;
        for (int d = 0; d < a->ndim - 1; d++) rows *= a->sizes[d];
        const int64_t af[2] = {rows, K}, cf[2] = {rows, N};
        mft_tensor *av = mft_view(a, 2, af);
        if (av) {
            mft_tensor *bv = b1d ? mft_unsqueeze(b, 1) : mft_tensor_retain((mft_tensor *)b);
            mft_tensor *c = bv ? gemm_dispatch(fn, av, bv, 2, cf, false) : NULL;
            mft_tensor *res = c ? mft_view(c, rnd, rsz) : NULL;
            mft__scope_resume();
            mft_tensor_release(av);
            mft_tensor_release(bv);
            mft_tensor_release(c);
            return mft__linalg_hand_over(fn, res);
        }
        if (mft_last_error() != MFT_ERR_NOT_VIEWABLE) {
            mft__scope_resume();
            return mft__linalg_hand_over(fn, NULL);
        }
        mft_clear_error(); /* not viewable: the batched path below */
    }
    mft_tensor *a2 = a1 ? mft_unsqueeze(a, 0) : mft_tensor_retain((mft_tensor *)a);
    mft_tensor *b2 = b1d ? mft_unsqueeze(b, 1) : mft_tensor_retain((mft_tensor *)b);
    mft_tensor *ae = a2 ? mft_expand(a2, bnd + 2, asz) : NULL;
    mft_tensor *be = b2 ? mft_expand(b2, bnd + 2, bsz) : NULL;
    mft_tensor *c = ae && be ? gemm_dispatch(fn, ae, be, bnd + 2, csz, false) : NULL;
    mft_tensor *res = c ? mft_view(c, rnd, rsz) : NULL;
    mft__scope_resume();
    mft_tensor_release(a2);
    mft_tensor_release(b2);
    mft_tensor_release(ae);
    mft_tensor_release(be);
    mft_tensor_release(c);
    return mft__linalg_hand_over(fn, res);
}

static mft_tensor *linear_impl(const mft_tensor *x, const mft_tensor *w, const mft_tensor *b) {
    static const char fn[] = "mft_linear";
    char b1[MFT__DIMS_BUF], b2[MFT__DIMS_BUF];
    if (!x || !w) {
        mft__null_arg(fn, !x ? "x" : "w");
        return NULL;
    }
    if (x->ndim < 1 || w->ndim != 2) {
        mft__set_error(MFT_ERR_RANK, "%s: expected x of rank >= 1 and a 2-D weight (out, in), got "
                       "ranks %d and %d", fn, x->ndim, w->ndim);
        return NULL;
    }
    if (!gemm_check_dtypes(fn, "x", x, "w", w)) return NULL;
    if (b && !gemm_check_dtypes(fn, "x", x, "b", b)) return NULL;
    const int64_t K = x->sizes[x->ndim - 1], N = w->sizes[0];
    if (w->sizes[1] != K) {
        mft__set_error(MFT_ERR_SHAPE, "%s: x of sizes %s and weight of sizes %s do not match "
                       "(x has %lld features, weight expects %lld)", fn,
                       mft__fmt_dims(b1, sizeof b1, x->ndim, x->sizes),
                       mft__fmt_dims(b2, sizeof b2, 2, w->sizes), (long long)K,
                       (long long)w->sizes[1]);
        return NULL;
    }
    if (b && (b->ndim != 1 || b->sizes[0] != N)) {
        mft__set_error(MFT_ERR_SHAPE, "%s: bias of sizes %s should be 1-D of size %lld (the "
                       "weight's out features)", fn, mft__fmt_dims(b1, sizeof b1, b->ndim, b->sizes),
                       (long long)N);
        return NULL;
    }
    int64_t M = 1, rsz[MFT_MAX_DIMS];
    for (int d = 0; d < x->ndim - 1; d++) {
        M *= x->sizes[d];
        rsz[d] = x->sizes[d];
    }
    rsz[x->ndim - 1] = N;
    const int64_t x2sz[2] = {M, K}, csz[2] = {M, N};

    mft__scope_suspend();
    mft_tensor *x2 = mft_reshape(x, 2, x2sz); /* a view when the strides allow it */
    mft_tensor *c = x2 ? gemm_dispatch(fn, x2, w, 2, csz, true) : NULL;
    bool ok = c != NULL;
    if (ok && b) ok = mft_add_(c, b) == MFT_OK;
    mft_tensor *res = ok ? mft_view(c, x->ndim, rsz) : NULL;
    mft__scope_resume();
    mft_tensor_release(x2);
    mft_tensor_release(c);
    return mft__linalg_hand_over(fn, res);
}

/* ---------------------------------------------------------------- autograd
 * Nodes "matmul" (inputs {a, b}, saved {a, b}) and "linear" (inputs {x, w,
 * b}, saved {x, w}; b may be NULL) (Note [Tape] in mft/autograd.h). Their
 * backward asks the public backward functions only for the gradients whose
 * inputs need grad; those come packed in the input's format (docs/spec.md §5). Under
 * a recording tape the forward runs with grad mode off, so its internal
 * calls record nothing; if the node cannot be recorded the result is taken
 * back (gemm_ag_drop) and the call fails. */
typedef struct gemm_ag_params {
    bool has_bias;
} gemm_ag_params;

static mft_status matmul_node_backward(const mft__ag_node *n, mft_tensor *const *gout,
                                       mft_tensor **gin) {
    mft_tensor **ga = n->in[0].needs_grad ? &gin[0] : NULL;
    mft_tensor **gb = n->in[1].needs_grad ? &gin[1] : NULL;
    return mft_matmul_backward(gout[0], n->saved[0], n->saved[1], ga, gb);
}

static mft_status linear_node_backward(const mft__ag_node *n, mft_tensor *const *gout,
                                       mft_tensor **gin) {
    const gemm_ag_params *p = n->params;
    mft_tensor **gx = n->in[0].needs_grad ? &gin[0] : NULL;
    mft_tensor **gw = n->in[1].needs_grad ? &gin[1] : NULL;
    mft_tensor **gb = p->has_bias && n->in[2].needs_grad ? &gin[2] : NULL;
    if (!gx && !gw && !gb) return MFT_OK;
    return mft_linear_backward(gout[0], n->saved[0], n->saved[1], gx, gw, gb);
}

/* Records the node of y (the result handed to the caller); on failure drops
 * y and returns NULL. */
static mft_tensor *gemm_ag_finish(const char *fn, const char *name, mft__ag_backward_fn bw,
                                  int nin, const mft_tensor *const *ins, mft_tensor *y,
                                  const gemm_ag_params *p) {
    if (y && mft__ag_record(fn, name, bw, nin, ins, 1, &y, 2, ins, p, sizeof *p) != MFT_OK) {
        mft__ag_drop_result(y);
        return NULL;
    }
    return y;
}

mft_tensor *mft_matmul(const mft_tensor *a, const mft_tensor *b) {
    MFT__BLOCKED_FALLBACK_PLAIN("matmul", mft_matmul(a, b), 2, &a, &b);
    const mft_tensor *ins[2] = {a, b};
    if (!mft__ag_wants(2, ins)) return matmul_impl(a, b);
    const bool grad_was = mft_set_grad_enabled(false);
    mft_tensor *y = matmul_impl(a, b);
    mft_set_grad_enabled(grad_was);
    const gemm_ag_params p = {false};
    return gemm_ag_finish("mft_matmul", "matmul", matmul_node_backward, 2, ins, y, &p);
}

mft_tensor *mft_linear(const mft_tensor *x, const mft_tensor *w, const mft_tensor *b) {
    MFT__BLOCKED_FALLBACK_PLAIN("linear", mft_linear(x, w, b), 3, &x, &w, &b);
    const mft_tensor *ins[3] = {x, w, b};
    if (!mft__ag_wants(3, ins)) return linear_impl(x, w, b);
    const bool grad_was = mft_set_grad_enabled(false);
    mft_tensor *y = linear_impl(x, w, b);
    mft_set_grad_enabled(grad_was);
    const gemm_ag_params p = {b != NULL};
    return gemm_ag_finish("mft_linear", "linear", linear_node_backward, 3, ins, y, &p);
}

/* ---------------------------------------------------------------- backward
 * Built on the dispatched matmul (PyTorch's formulas, docs/architecture.md §7):
 *   matmul: grad_a = grad_out @ b^T, grad_b = a^T @ grad_out, with 1-D
 *   operands promoted as the forward does (a: (1, K), b: (K, 1)) and
 *   batch dims that were broadcast summed away (gemm_sum_to below).
 *   b^T of a packed b is read by the kernels as transpose_b and a^T of a
 *   packed a as transpose_a (no copies). When a is batched and b is not, grad_b folds the batch into
 *   the product's depth: one (K, rows) @ (rows, N) gemm instead of a batched
 *   product and a reduction.
 *   linear: grad_x = grad_out @ w (w packed: no copy), grad_w = grad_out^T @ x
 *   over the flattened leading dims, grad_b = column sums of grad_out.
 * Every reduction here (gemm_sum_to) sums each output element over the
 * reduced index space in one fixed order, accumulating in double, whatever
 * the thread count: gradients are bit-identical for any thread count. */

/* x (any strides) summed down to sizes tsz (nd <= x->ndim, broadcastable as
 * in sum_to_size), returned packed CONTIGUOUS (a new internal reference). */
typedef struct sumto_job {
    const char *x;
    char *y;
    mft_dtype dt;
    int nk, nr;                                    /* kept / reduced dims */
    int64_t ksz[MFT_MAX_DIMS], kxs[MFT_MAX_DIMS];  /* kept dims (outer first, last innermost) */
    int64_t rsz[MFT_MAX_DIMS], rxs[MFT_MAX_DIMS];  /* reduced dims */
    int64_t row, nblk;                             /* innermost kept size, blocks per row */
} sumto_job;

#define SUMTO_BLK 256
static void sumto_range(void *ctx, int64_t begin, int64_t end) {
    const sumto_job *j = ctx;
    const size_t es = mft__elem_size(j->dt);
    const int64_t ls = j->nk ? j->kxs[j->nk - 1] : 0;
    double acc[SUMTO_BLK];
    for (int64_t t = begin; t < end; t++) {
        int64_t r = t / j->nblk, j0 = (t % j->nblk) * SUMTO_BLK;
        const int64_t n = j->row - j0 < SUMTO_BLK ? j->row - j0 : SUMTO_BLK;
        int64_t base = j0 * ls, rem = r;
        for (int d = j->nk - 2; d >= 0; d--) {
            base += (rem % j->ksz[d]) * j->kxs[d];
            rem /= j->ksz[d];
        }
        for (int64_t i = 0; i < n; i++) acc[i] = 0;
        int64_t idx[MFT_MAX_DIMS] = {0}, roff = 0;
        for (;;) {
            const char *p = j->x + (size_t)(base + roff) * es;
            if (j->dt == MFT_F32) {
                const float *q = (const float *)(const void *)p;
                for (int64_t i = 0; i < n; i++) acc[i] += (double)q[i * ls];
            } else {
                const double *q = (const double *)(const void *)p;
                for (int64_t i = 0; i < n; i++) acc[i] += q[i * ls];
            }
            int d = j->nr - 1;
            for (; d >= 0; d--) {
                roff += j->rxs[d];
                if (++idx[d] < j->rsz[d]) break;
                roff -= idx[d] * j->rxs[d];
                idx[d] = 0;
            }
            if (d < 0) break;
        }
        char *y = j->y + (size_t)(r * j->row + j0) * es;
        for (int64_t i = 0; i < n; i++) mft__store(j->dt, y + (size_t)i * es, acc[i]);
    }
}

static mft_tensor *gemm_sum_to(const char *fn, const mft_tensor *x, int nd, const int64_t *tsz) {
    mft_tensor *y = mft__tensor_alloc(fn, nd, tsz, x->dtype, MFT_CONTIGUOUS);
    if (!y || y->numel == 0) return y;
    sumto_job j;
    memset(&j, 0, sizeof j);
    j.x = mft__tensor_ptr(x);
    j.y = mft__tensor_ptr(y);
    j.dt = x->dtype;
    const int off = x->ndim - nd;
    for (int d = 0; d < x->ndim; d++) {
        const int td = d - off;
        if (td >= 0 && tsz[td] == x->sizes[d]) {
            j.ksz[j.nk] = x->sizes[d];
            j.kxs[j.nk++] = x->strides[d];
        } else if (x->sizes[d] != 1) {
            j.rsz[j.nr] = x->sizes[d];
            j.rxs[j.nr++] = x->strides[d];
        }
    }
    if (x->numel == 0) { /* reduced over an empty dim */
        memset(j.y, 0, (size_t)y->numel * mft__elem_size(y->dtype));
        return y;
    }
    j.row = j.nk ? j.ksz[j.nk - 1] : 1;
    j.nblk = (j.row + SUMTO_BLK - 1) / SUMTO_BLK;
    int64_t red = 1;
    for (int d = 0; d < j.nr; d++) red *= j.rsz[d];
    const int64_t items = y->numel / j.row * j.nblk;
    int64_t grain = 65536 / (red * (j.row < SUMTO_BLK ? j.row : SUMTO_BLK));
    mft__parallel_for(0, items, grain > 0 ? grain : 1, sumto_range, &j);
    return y;
}

/* g (internal reference, consumed) viewed as sizes of t, packed in t's tag
 * for ranks 3-5, else CONTIGUOUS (docs/spec.md §5); NULL on error. */
static mft_tensor *gemm_grad_like(mft_tensor *g, const mft_tensor *t) {
    if (!g) return NULL;
    mft_tensor *v = mft_reshape(g, t->ndim, t->sizes);
    mft_tensor_release(g);
    if (!v) return NULL;
    const mft_format fmt = mft__rule_grad_format(t->tag, t->ndim);
    mft__cause_push(MFT_CAUSE_GRADIENT, "matmul");
    mft_tensor *r = mft_contiguous(v, fmt);
    mft__cause_pop();
    mft_tensor_release(v);
    return r;
}

/* The last two dims of t swapped (internal reference). */
static mft_tensor *gemm_mT(const mft_tensor *t) { return mft_transpose(t, -1, -2); }

/* Hands up to three internal results to the caller (each out may be NULL);
 * on failure every requested out is set to NULL and the results released. */
static mft_status gemm_bwd_finish(const char *fn, bool ok, int n, mft_tensor **const *outs,
                                  mft_tensor **res) {
    for (int i = 0; i < n && ok; i++)
        if (outs[i]) {
            mft_tensor *r = mft__retain_result(fn, res[i]);
            mft_tensor_release(res[i]);
            res[i] = NULL;
            *outs[i] = r;
            ok = r != NULL;
            if (!ok)
                for (int k = 0; k < i; k++)
                    if (outs[k]) {
                        mft_tensor_release(*outs[k]);
                        *outs[k] = NULL;
                    }
        }
    for (int i = 0; i < n; i++) {
        mft_tensor_release(res[i]);
        if (!ok && outs[i]) *outs[i] = NULL;
    }
    if (ok) return MFT_OK;
    return mft__relabel_error(fn);
}

mft_status mft_matmul_backward(const mft_tensor *grad_out, const mft_tensor *a,
                               const mft_tensor *b, mft_tensor **grad_a, mft_tensor **grad_b) {
    static const char fn[] = "mft_matmul_backward";
    MFT__BLOCKED_FALLBACK_OUTS_STATUS(
        "matmul_backward", mft_matmul_backward(grad_out, a, b, grad_a, grad_b), 2,
        ((mft_tensor **[]){grad_a, grad_b}), ((const mft_tensor *[]){a, b}), 3, &grad_out, &a, &b);
    char d1[MFT__DIMS_BUF], d2[MFT__DIMS_BUF];
    if (grad_a) *grad_a = NULL;
    if (grad_b) *grad_b = NULL;
    if (!grad_out || !a || !b) {
        mft__null_arg(fn, !grad_out ? "grad_out" : !a ? "a" : "b");
        return MFT_ERR_NULL;
    }
    if (a->ndim == 0 || b->ndim == 0) {
        mft__set_error(MFT_ERR_RANK, "%s: both arguments need to be at least 1-D, but they are "
                       "%d-D and %d-D", fn, a->ndim, b->ndim);
        return MFT_ERR_RANK;
    }
    if (!gemm_check_dtypes(fn, "a", a, "b", b) ||
        !gemm_check_dtypes(fn, "a", a, "grad_out", grad_out))
        return mft_last_error();
    const bool a1 = a->ndim == 1, b1d = b->ndim == 1;
    const int64_t M = a1 ? 1 : a->sizes[a->ndim - 2], K = a->sizes[a->ndim - 1];
    const int64_t Kb = b1d ? b->sizes[0] : b->sizes[b->ndim - 2];
    const int64_t N = b1d ? 1 : b->sizes[b->ndim - 1];
    if (K != Kb) {
        mft__set_error(MFT_ERR_SHAPE, "%s: a of sizes %s and b of sizes %s cannot be multiplied "
                       "(a has %lld columns, b has %lld rows)", fn,
                       mft__fmt_dims(d1, sizeof d1, a->ndim, a->sizes),
                       mft__fmt_dims(d2, sizeof d2, b->ndim, b->sizes), (long long)K,
                       (long long)Kb);
        return MFT_ERR_SHAPE;
    }
    const int nda = a->ndim > 2 ? a->ndim - 2 : 0, ndb = b->ndim > 2 ? b->ndim - 2 : 0;
    const int ndims[2] = {nda, ndb};
    const int64_t *szs[2] = {a->sizes, b->sizes};
    int bnd = 0;
    int64_t shape[MFT_MAX_DIMS];
    if (mft__broadcast_shape(fn, 2, ndims, szs, &bnd, shape) != MFT_OK) return mft_last_error();
    int64_t csz[MFT_MAX_DIMS], rsz[MFT_MAX_DIMS];
    memcpy(csz, shape, sizeof(int64_t) * (size_t)bnd);
    memcpy(rsz, shape, sizeof(int64_t) * (size_t)bnd);
    csz[bnd] = M, csz[bnd + 1] = N;
    int rnd = bnd;
    if (!a1) rsz[rnd++] = M;
    if (!b1d) rsz[rnd++] = N;
    bool same = grad_out->ndim == rnd;
    for (int d = 0; same && d < rnd; d++) same = grad_out->sizes[d] == rsz[d];
    if (!same) {
        mft__set_error(MFT_ERR_SHAPE, "%s: grad_out of sizes %s does not match the product's "
                       "sizes %s", fn, mft__fmt_dims(d1, sizeof d1, grad_out->ndim, grad_out->sizes),
                       mft__fmt_dims(d2, sizeof d2, rnd, rsz));
        return MFT_ERR_SHAPE;
    }
    if (!grad_a && !grad_b) return MFT_OK;

    mft__scope_suspend();
    mft_tensor *res[2] = {NULL, NULL};
    mft_tensor *a2 = a1 ? mft_unsqueeze(a, 0) : mft_tensor_retain((mft_tensor *)a);
    mft_tensor *b2 = b1d ? mft_unsqueeze(b, 1) : mft_tensor_retain((mft_tensor *)b);
    mft_tensor *g2 = mft_reshape(grad_out, bnd + 2, csz); /* a view: only size-1 dims added */
    bool ok = a2 && b2 && g2;
    if (ok && grad_a) { /* (batch.., M, N) @ (batch.., N, K), reduced to a2 */
        mft_tensor *bt = gemm_mT(b2);
        mft_tensor *full = bt ? mft_matmul(g2, bt) : NULL;
        mft_tensor *s = full ? gemm_sum_to(fn, full, a2->ndim, a2->sizes) : NULL;
        res[0] = gemm_grad_like(s, a);
        ok = res[0] != NULL;
        mft_tensor_release(bt);
        mft_tensor_release(full);
    }
    if (ok && grad_b) {
        mft_tensor *full = NULL;
        if (a2->ndim > 2 && b2->ndim == 2) { /* fold the batch into the depth */
            int64_t rows = 1;
            for (int d = 0; d < a2->ndim - 1; d++) rows *= a2->sizes[d];
            const int64_t af[2] = {rows, K}, gf[2] = {rows, N};
            mft_tensor *ar = mft_reshape(a2, 2, af), *gr = mft_reshape(g2, 2, gf);
            mft_tensor *at = ar ? gemm_mT(ar) : NULL;
            full = at && gr ? mft_matmul(at, gr) : NULL;
            mft_tensor_release(ar);
            mft_tensor_release(gr);
            mft_tensor_release(at);
        } else {
            mft_tensor *at = gemm_mT(a2);
            full = at ? mft_matmul(at, g2) : NULL;
            mft_tensor_release(at);
        }
        mft_tensor *s = full ? gemm_sum_to(fn, full, b2->ndim, b2->sizes) : NULL;
        res[1] = gemm_grad_like(s, b);
        ok = res[1] != NULL;
        mft_tensor_release(full);
    }
    mft__scope_resume();
    mft_tensor_release(a2);
    mft_tensor_release(b2);
    mft_tensor_release(g2);
    mft_tensor **outs[2] = {grad_a, grad_b};
    return gemm_bwd_finish(fn, ok, 2, outs, res);
}

mft_status mft_linear_backward(const mft_tensor *grad_out, const mft_tensor *x,
                               const mft_tensor *w, mft_tensor **grad_x, mft_tensor **grad_w,
                               mft_tensor **grad_b) {
    static const char fn[] = "mft_linear_backward";
    MFT__BLOCKED_FALLBACK_OUTS_STATUS("linear_backward",
                                      mft_linear_backward(grad_out, x, w, grad_x, grad_w, grad_b),
                                      3, ((mft_tensor **[]){grad_x, grad_w, grad_b}),
                                      ((const mft_tensor *[]){x, w, NULL}), 3, &grad_out, &x, &w);
    char d1[MFT__DIMS_BUF], d2[MFT__DIMS_BUF];
    if (grad_x) *grad_x = NULL;
    if (grad_w) *grad_w = NULL;
    if (grad_b) *grad_b = NULL;
    if (!grad_out || !x || !w) {
        mft__null_arg(fn, !grad_out ? "grad_out" : !x ? "x" : "w");
        return MFT_ERR_NULL;
    }
    if (x->ndim < 1 || w->ndim != 2) {
        mft__set_error(MFT_ERR_RANK, "%s: expected x of rank >= 1 and a 2-D weight (out, in), got "
                       "ranks %d and %d", fn, x->ndim, w->ndim);
        return MFT_ERR_RANK;
    }
    if (!gemm_check_dtypes(fn, "x", x, "w", w) ||
        !gemm_check_dtypes(fn, "x", x, "grad_out", grad_out))
        return mft_last_error();
    const int64_t K = x->sizes[x->ndim - 1], N = w->sizes[0];
    if (w->sizes[1] != K) {
        mft__set_error(MFT_ERR_SHAPE, "%s: x of sizes %s and weight of sizes %s do not match "
                       "(x has %lld features, weight expects %lld)", fn,
                       mft__fmt_dims(d1, sizeof d1, x->ndim, x->sizes),
                       mft__fmt_dims(d2, sizeof d2, 2, w->sizes), (long long)K,
                       (long long)w->sizes[1]);
        return MFT_ERR_SHAPE;
    }
    int64_t M = 1, rsz[MFT_MAX_DIMS];
    for (int d = 0; d < x->ndim - 1; d++) {
        M *= x->sizes[d];
        rsz[d] = x->sizes[d];
    }
    rsz[x->ndim - 1] = N;
    bool same = grad_out->ndim == x->ndim;
    for (int d = 0; same && d < x->ndim; d++) same = grad_out->sizes[d] == rsz[d];
    if (!same) {
        mft__set_error(MFT_ERR_SHAPE, "%s: grad_out of sizes %s does not match the output sizes %s",
                       fn, mft__fmt_dims(d1, sizeof d1, grad_out->ndim, grad_out->sizes),
                       mft__fmt_dims(d2, sizeof d2, x->ndim, rsz));
        return MFT_ERR_SHAPE;
    }
    if (!grad_x && !grad_w && !grad_b) return MFT_OK;
    const int64_t g2sz[2] = {M, N}, x2sz[2] = {M, K}, bsz[1] = {N};

    mft__scope_suspend();
    mft_tensor *res[3] = {NULL, NULL, NULL};
    mft_tensor *g2 = mft_reshape(grad_out, 2, g2sz);
    bool ok = g2 != NULL;
    if (ok && grad_x) {
        mft_tensor *gx = mft_matmul(g2, w);
        res[0] = gemm_grad_like(gx, x);
        ok = res[0] != NULL;
    }
    if (ok && grad_w) {
        mft_tensor *x2 = mft_reshape(x, 2, x2sz);
        mft_tensor *gt = gemm_mT(g2);
        mft_tensor *gw = x2 && gt ? mft_matmul(gt, x2) : NULL;
        res[1] = gemm_grad_like(gw, w);
        ok = res[1] != NULL;
        mft_tensor_release(x2);
        mft_tensor_release(gt);
    }
    if (ok && grad_b) {
        res[2] = gemm_sum_to(fn, g2, 1, bsz);
        ok = res[2] != NULL;
    }
    mft__scope_resume();
    mft_tensor_release(g2);
    mft_tensor **outs[3] = {grad_x, grad_w, grad_b};
    return gemm_bwd_finish(fn, ok, 3, outs, res);
}
