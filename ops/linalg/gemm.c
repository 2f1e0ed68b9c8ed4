/* ops/linalg/gemm.c — matrix multiplication (mft_matmul, mft_linear), dispatched as
 * op "matmul" (DESIGN §7, mft/cnn.h).
 *
 * The file reads top to bottom: argument checks and the entry points, the
 * shared batch/stride bookkeeping, the reference kernels (which define the
 * semantics), the packed fast kernels, and the kernel table.
 *
 * What a matmul kernel receives (built by the entry points):
 *   inputs[0] A: (batch..., M, K), or (batch..., K, M) used as its
 *   transpose when params.transpose_a; inputs[1] B: (batch..., K, N), or
 *   (batch..., N, K) used as its transpose when params.transpose_b;
 *   outputs[0] C: (batch..., M, N) packed CONTIGUOUS (the result's format,
 *   SPEC §4).
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
 * Fast kernels (GotoBLAS/BLIS structure): one matrix is split into one
 * region per thread, column ranges of whole NR strips (or row ranges of MR
 * strips when N is narrow next to M), so B is packed once over all threads;
 * each thread loops over its region: NC-wide panel -> KC-deep block (pack the
 * B panel into NR-wide strips in a per-thread buffer that stays in L2) -> MC
 * rows (pack A into MR-row strips) -> NR strip -> MR strip -> micro-kernel,
 * storing the first KC block and adding the later ones; F32 packs a
 * transposed B (the weight of linear) and row-major A strips with 8x8 AVX
 * transposes. Edge tiles run the same micro-kernel into a scratch tile. K is
 * never split across threads, K blocks always start at multiples of KC, and
 * every element is computed by the same instruction sequence whatever the
 * partition, so results are bit-identical for any thread count.
 * Micro-kernels: F32 6x16 and F64 6x8 AVX2/FMA ones when compiled with
 * AVX2+FMA, else (and through mft__gemm_set_portable, for
 * tests) portable C ones of the same tile sizes. Batched inputs run one
 * matrix per thread chunk (parallel over the batch) when there is more than
 * one matrix. If the packing buffers cannot be allocated (kernels cannot
 * fail) the kernel falls back to a plain loop. Mixed dtypes are rejected
 * (no type promotion); the bias of linear is added in place with mft_add_
 * on the internal result (not fused into the kernel's store).
 * Autograd: mft_matmul / mft_linear record a tape node under a recording
 * tape (the autograd section, before the backward functions). */
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include "autograd_internal.h"
#include "ops_internal.h"

/* Note [Kernel tables]: the built-in kernels this family dispatches to. */
static const mft__kernel_def *const g_tables[] = {mft__kernels_gemm, NULL};
#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#define GEMM_AVX2 1
#if defined(__AVX512F__)
#define GEMM_AVX512 1
#else
#define GEMM_AVX512 0
#endif
#else
#define GEMM_AVX2 0
#define GEMM_AVX512 0
#endif

/* For tests (ops_internal.h is shared; declared here): the reference kernel
 * of a dtype, and forcing the portable micro-kernels (not thread-safe
 * against running matmuls). */
mft_kernel_fn mft__gemm_reference(mft_dtype dt);
void mft__gemm_set_portable(bool on);

static bool gemm_portable = false;
void mft__gemm_set_portable(bool on) { gemm_portable = on; }

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

/* Hands an internal result to the caller (registered in the user's scope). */
static mft_tensor *matmul_finish(const char *fn, mft_tensor *res) {
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
            return matmul_finish(fn, res);
        }
        if (mft_last_error() != MFT_ERR_NOT_VIEWABLE) {
            mft__scope_resume();
            return matmul_finish(fn, NULL);
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
    return matmul_finish(fn, res);
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
    if (!res) {
        mft__relabel_error(fn);
        return NULL;
    }
    mft_tensor *r = mft__retain_result(fn, res);
    mft_tensor_release(res);
    return r;
}

/* ---------------------------------------------------------------- autograd
 * Nodes "matmul" (inputs {a, b}, saved {a, b}) and "linear" (inputs {x, w,
 * b}, saved {x, w}; b may be NULL) (Note [Tape] in mft/autograd.h). Their
 * backward asks the public backward functions only for the gradients whose
 * inputs need grad; those come packed in the input's format (SPEC §5). Under
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
    const mft_tensor *ins[2] = {a, b};
    if (!mft__ag_wants(2, ins)) return matmul_impl(a, b);
    const bool grad_was = mft_set_grad_enabled(false);
    mft_tensor *y = matmul_impl(a, b);
    mft_set_grad_enabled(grad_was);
    const gemm_ag_params p = {false};
    return gemm_ag_finish("mft_matmul", "matmul", matmul_node_backward, 2, ins, y, &p);
}

mft_tensor *mft_linear(const mft_tensor *x, const mft_tensor *w, const mft_tensor *b) {
    const mft_tensor *ins[3] = {x, w, b};
    if (!mft__ag_wants(3, ins)) return linear_impl(x, w, b);
    const bool grad_was = mft_set_grad_enabled(false);
    mft_tensor *y = linear_impl(x, w, b);
    mft_set_grad_enabled(grad_was);
    const gemm_ag_params p = {b != NULL};
    return gemm_ag_finish("mft_linear", "linear", linear_node_backward, 3, ins, y, &p);
}

/* ---------------------------------------------------------------- backward
 * Built on the dispatched matmul (PyTorch's formulas, DESIGN §7):
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
 * for ranks 3-5, else CONTIGUOUS (SPEC §5); NULL on error. */
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

/* ---------------------------------------------------------------- bookkeeping */
typedef struct gemm_shape {
    const mft_tensor *A, *B, *C;
    int r;                   /* rank of A, B, C */
    int64_t batch, M, N, K;
    int64_t ars, acs;        /* A(i, k) at i*ars + k*acs */
    int64_t bks, bns;        /* B(k, n) at k*bks + n*bns (transpose handled here) */
} gemm_shape;

static void gemm_shape_init(const mft_kernel_args *a, gemm_shape *g) {
    const mft_matmul_params *p = a->params;
    g->A = a->inputs[0];
    g->B = a->inputs[1];
    g->C = a->outputs[0];
    const int r = g->r = g->C->ndim;
    g->M = g->C->sizes[r - 2];
    g->N = g->C->sizes[r - 1];
    g->K = g->A->sizes[r - (p->transpose_a ? 2 : 1)];
    g->ars = g->A->strides[r - (p->transpose_a ? 1 : 2)];
    g->acs = g->A->strides[r - (p->transpose_a ? 2 : 1)];
    g->bks = g->B->strides[r - (p->transpose_b ? 1 : 2)];
    g->bns = g->B->strides[r - (p->transpose_b ? 2 : 1)];
    g->batch = 1;
    for (int d = 0; d < r - 2; d++) g->batch *= g->C->sizes[d];
}

/* Element offsets of matrix bi of the batch in A and B (C is packed: bi*M*N). */
static void gemm_batch_offsets(const gemm_shape *g, int64_t bi, int64_t *ao, int64_t *bo) {
    int64_t oa = 0, ob = 0;
    for (int d = g->r - 3; d >= 0; d--) {
        int64_t n = g->C->sizes[d], i = bi % n;
        bi /= n;
        oa += i * g->A->strides[d];
        ob += i * g->B->strides[d];
    }
    *ao = oa;
    *bo = ob;
}

/* ---------------------------------------------------------------- reference kernels
 * Triple loop accumulating in double, through the real strides. */
#define GEMM_REF(D)                                                                           \
    static void matmul_ref_##D(const mft_kernel_args *a) {                                    \
        typedef MFT__T_##D T;                                                                 \
        gemm_shape g;                                                                         \
        gemm_shape_init(a, &g);                                                               \
        const T *A = (const T *)(const void *)mft__tensor_ptr(g.A);                           \
        const T *B = (const T *)(const void *)mft__tensor_ptr(g.B);                           \
        T *C = (T *)(void *)mft__tensor_ptr(g.C);                                             \
        for (int64_t bi = 0; bi < g.batch; bi++) {                                            \
            int64_t ao, bo;                                                                   \
            gemm_batch_offsets(&g, bi, &ao, &bo);                                             \
            T *c = C + bi * g.M * g.N;                                                        \
            for (int64_t i = 0; i < g.M; i++)                                                 \
                for (int64_t j = 0; j < g.N; j++) {                                           \
                    double s = 0;                                                             \
                    for (int64_t k = 0; k < g.K; k++)                                         \
                        s += (double)A[ao + i * g.ars + k * g.acs] *                          \
                             (double)B[bo + k * g.bks + j * g.bns];                           \
                    c[i * g.N + j] = (T)s;                                                    \
                }                                                                             \
        }                                                                                     \
    }
GEMM_REF(F32)
GEMM_REF(F64)

mft_kernel_fn mft__gemm_reference(mft_dtype dt) {
    return dt == MFT_F32 ? matmul_ref_F32 : dt == MFT_F64 ? matmul_ref_F64 : NULL;
}

/* ---------------------------------------------------------------- micro-kernels
 * c[MR x NR] (row stride ldc) = (acc ? c : 0) + sum_p ap[p*MR + i] * bp[p*NR + j]. */
/* One row at a time, so a row of accumulators stays in vector registers
 * (the compiler vectorizes the j loop); the B panel is re-read from L1. */
#define GEMM_MICRO_C(T, S, MR, NR)                                                            \
    static void micro_##S(int64_t kc, const T *restrict ap, const T *restrict bp,            \
                          T *restrict c, int64_t ldc, bool acc) {                             \
        for (int i = 0; i < MR; i++) {                                                        \
            T t[NR];                                                                          \
            for (int j = 0; j < NR; j++) t[j] = 0;                                            \
            for (int64_t p = 0; p < kc; p++) {                                                \
                const T av = ap[p * MR + i];                                                  \
                const T *b = bp + p * NR;                                                     \
                for (int j = 0; j < NR; j++) t[j] += av * b[j];                               \
            }                                                                                 \
            T *cr = c + i * ldc;                                                              \
            for (int j = 0; j < NR; j++) cr[j] = acc ? cr[j] + t[j] : t[j];                   \
        }                                                                                     \
    }
GEMM_MICRO_C(float, f32c, 6, 16)
GEMM_MICRO_C(double, f64c, 6, 8)

#if GEMM_AVX2
/* The F32 and F64 micro-kernels are written out twice on purpose: one macro
 * body with an accumulator array (r[6][2]) ran at ~27 GFLOP/s instead of ~38
 * on 512^3 (GCC 12 -O3 did not keep the array in registers). */
static void micro_f32avx(int64_t kc, const float *restrict ap, const float *restrict bp,
                         float *restrict c, int64_t ldc, bool acc) {
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
           c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    /* one k step o: two B vectors, six A broadcasts, twelve FMAs */
#define GEMM_STEP(o)                                                                          \
    do {                                                                                      \
        const __m256 b0 = _mm256_loadu_ps(bp + 16 * (o));                                     \
        const __m256 b1 = _mm256_loadu_ps(bp + 16 * (o) + 8);                                 \
        __m256 av = _mm256_broadcast_ss(ap + 6 * (o) + 0);                                    \
        c00 = _mm256_fmadd_ps(av, b0, c00);                                                   \
        c01 = _mm256_fmadd_ps(av, b1, c01);                                                   \
        av = _mm256_broadcast_ss(ap + 6 * (o) + 1);                                           \
        c10 = _mm256_fmadd_ps(av, b0, c10);                                                   \
        c11 = _mm256_fmadd_ps(av, b1, c11);                                                   \
        av = _mm256_broadcast_ss(ap + 6 * (o) + 2);                                           \
        c20 = _mm256_fmadd_ps(av, b0, c20);                                                   \
        c21 = _mm256_fmadd_ps(av, b1, c21);                                                   \
        av = _mm256_broadcast_ss(ap + 6 * (o) + 3);                                           \
        c30 = _mm256_fmadd_ps(av, b0, c30);                                                   \
        c31 = _mm256_fmadd_ps(av, b1, c31);                                                   \
        av = _mm256_broadcast_ss(ap + 6 * (o) + 4);                                           \
        c40 = _mm256_fmadd_ps(av, b0, c40);                                                   \
        c41 = _mm256_fmadd_ps(av, b1, c41);                                                   \
        av = _mm256_broadcast_ss(ap + 6 * (o) + 5);                                           \
        c50 = _mm256_fmadd_ps(av, b0, c50);                                                   \
        c51 = _mm256_fmadd_ps(av, b1, c51);                                                   \
    } while (0)
    /* Unrolled by 4 with the A panel prefetched 4 steps ahead: the loop
     * overhead cost ~10% on Zen 3 (80 -> ~90 GFLOP/s on L1-resident panels).
     * Each accumulator still sees its FMAs in ascending p. */
    int64_t p = 0;
    for (; p + 4 <= kc; p += 4, ap += 24, bp += 64) {
        _mm_prefetch((const char *)(ap + 96), _MM_HINT_T0);
        GEMM_STEP(0);
        GEMM_STEP(1);
        GEMM_STEP(2);
        GEMM_STEP(3);
    }
    for (; p < kc; p++, ap += 6, bp += 16) GEMM_STEP(0);
#undef GEMM_STEP
#define GEMM_STORE_ROW(i, lo, hi)                                                             \
    do {                                                                                      \
        float *cr = c + (i) * ldc;                                                            \
        if (acc) {                                                                            \
            lo = _mm256_add_ps(_mm256_loadu_ps(cr), lo);                                      \
            hi = _mm256_add_ps(_mm256_loadu_ps(cr + 8), hi);                                  \
        }                                                                                     \
        _mm256_storeu_ps(cr, lo);                                                             \
        _mm256_storeu_ps(cr + 8, hi);                                                         \
    } while (0)
    GEMM_STORE_ROW(0, c00, c01);
    GEMM_STORE_ROW(1, c10, c11);
    GEMM_STORE_ROW(2, c20, c21);
    GEMM_STORE_ROW(3, c30, c31);
    GEMM_STORE_ROW(4, c40, c41);
    GEMM_STORE_ROW(5, c50, c51);
#undef GEMM_STORE_ROW
}

#if GEMM_AVX512
/* F32 6 x 32 over two packed 16-wide B strips, one 16-lane register per
 * row and strip: 8 loads per 12 FMAs (the 6x16 AVX2 kernel: 8 per 12 at
 * half the width). Each accumulator sees its FMAs in ascending p from zero,
 * as in micro_f32avx, so both give bit-identical C elements. */
static void micro2_f32avx512(int64_t kc, const float *restrict ap, const float *restrict bp0,
                             const float *restrict bp1, float *restrict c, int64_t ldc,
                             bool acc) {
#define G512_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)
#define DECL(i) __m512 c##i = _mm512_setzero_ps(), d##i = c##i;
    G512_ROWS(DECL)
#undef DECL
    for (int64_t p = 0; p < kc; p++, ap += 6, bp0 += 16, bp1 += 16) {
        const __m512 b0 = _mm512_loadu_ps(bp0), b1 = _mm512_loadu_ps(bp1);
        __m512 av;
#define STEP(i)                                                                               \
    av = _mm512_set1_ps(ap[i]);                                                               \
    c##i = _mm512_fmadd_ps(av, b0, c##i);                                                     \
    d##i = _mm512_fmadd_ps(av, b1, d##i);
        G512_ROWS(STEP)
#undef STEP
    }
#define STORE(i)                                                                              \
    if (acc) {                                                                                \
        c##i = _mm512_add_ps(_mm512_loadu_ps(c + i * ldc), c##i);                             \
        d##i = _mm512_add_ps(_mm512_loadu_ps(c + i * ldc + 16), d##i);                        \
    }                                                                                         \
    _mm512_storeu_ps(c + i * ldc, c##i);                                                      \
    _mm512_storeu_ps(c + i * ldc + 16, d##i);
    G512_ROWS(STORE)
#undef STORE
#undef G512_ROWS
}
#endif

/* F64: 6 rows x 8 columns = 12 accumulators of 4 doubles. */
static void micro_f64avx(int64_t kc, const double *restrict ap, const double *restrict bp,
                         double *restrict c, int64_t ldc, bool acc) {
    __m256d c00 = _mm256_setzero_pd(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
            c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    for (int64_t p = 0; p < kc; p++, ap += 6, bp += 8) {
        const __m256d b0 = _mm256_loadu_pd(bp), b1 = _mm256_loadu_pd(bp + 4);
        __m256d av = _mm256_broadcast_sd(ap + 0);
        c00 = _mm256_fmadd_pd(av, b0, c00);
        c01 = _mm256_fmadd_pd(av, b1, c01);
        av = _mm256_broadcast_sd(ap + 1);
        c10 = _mm256_fmadd_pd(av, b0, c10);
        c11 = _mm256_fmadd_pd(av, b1, c11);
        av = _mm256_broadcast_sd(ap + 2);
        c20 = _mm256_fmadd_pd(av, b0, c20);
        c21 = _mm256_fmadd_pd(av, b1, c21);
        av = _mm256_broadcast_sd(ap + 3);
        c30 = _mm256_fmadd_pd(av, b0, c30);
        c31 = _mm256_fmadd_pd(av, b1, c31);
        av = _mm256_broadcast_sd(ap + 4);
        c40 = _mm256_fmadd_pd(av, b0, c40);
        c41 = _mm256_fmadd_pd(av, b1, c41);
        av = _mm256_broadcast_sd(ap + 5);
        c50 = _mm256_fmadd_pd(av, b0, c50);
        c51 = _mm256_fmadd_pd(av, b1, c51);
    }
#define GEMM_STORE_ROW(i, lo, hi)                                                             \
    do {                                                                                      \
        double *cr = c + (i) * ldc;                                                           \
        if (acc) {                                                                            \
            lo = _mm256_add_pd(_mm256_loadu_pd(cr), lo);                                      \
            hi = _mm256_add_pd(_mm256_loadu_pd(cr + 4), hi);                                  \
        }                                                                                     \
        _mm256_storeu_pd(cr, lo);                                                             \
        _mm256_storeu_pd(cr + 4, hi);                                                         \
    } while (0)
    GEMM_STORE_ROW(0, c00, c01);
    GEMM_STORE_ROW(1, c10, c11);
    GEMM_STORE_ROW(2, c20, c21);
    GEMM_STORE_ROW(3, c30, c31);
    GEMM_STORE_ROW(4, c40, c41);
    GEMM_STORE_ROW(5, c50, c51);
#undef GEMM_STORE_ROW
}
#endif

/* ---------------------------------------------------------------- packing helpers
 * F32 fast paths of the packing step (AVX 8x8 transposes where the source
 * runs along the wrong dimension); each has a scalar twin used without AVX2
 * and under mft__gemm_set_portable. They only move data, so they cannot
 * change results. */
#if GEMM_AVX2
/* Transposes the 8x8 block r[0..7] (row i = r[i]) in place. */
static inline void gemm_tr8x8(__m256 r[8]) {
    const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
    r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
    r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
    r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
    r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
    r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
    r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
    r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}
#endif

/* ns full 16-wide strips s of kc rows: dst[s*16*kc + kk*16 + jj] =
 * src[kk*lds + s*16 + jj] (B rows contiguous: read row by row, so every row
 * is one sequential stream). */
static void gemm_pack_b16_rows_f32(const float *src, int64_t lds, int64_t kc, int64_t ns,
                                   float *dst) {
    for (int64_t kk = 0; kk < kc; kk++, src += lds) {
        float *d = dst + kk * 16;
#if GEMM_AVX2
        if (!gemm_portable) {
            for (int64_t s = 0; s < ns; s++, d += 16 * kc) {
                _mm256_storeu_ps(d, _mm256_loadu_ps(src + s * 16));
                _mm256_storeu_ps(d + 8, _mm256_loadu_ps(src + s * 16 + 8));
            }
            continue;
        }
#endif
        for (int64_t s = 0; s < ns; s++, d += 16 * kc)
            for (int jj = 0; jj < 16; jj++) d[jj] = src[s * 16 + jj];
    }
}

/* dst[kk*16 + jj] = src[jj*lds + kk] (a B strip read from the packed B^T). */
static void gemm_pack_b16_trans_f32(const float *src, int64_t lds, int64_t kc, float *dst) {
    int64_t kk = 0;
#if GEMM_AVX2
    if (!gemm_portable)
        for (; kk + 8 <= kc; kk += 8)
            for (int h = 0; h < 2; h++) {
                __m256 r[8];
                for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(src + (h * 8 + i) * lds + kk);
                gemm_tr8x8(r);
                for (int i = 0; i < 8; i++) _mm256_storeu_ps(dst + (kk + i) * 16 + h * 8, r[i]);
            }
#endif
    for (; kk < kc; kk++)
        for (int jj = 0; jj < 16; jj++) dst[kk * 16 + jj] = src[jj * lds + kk];
}

/* dst[kk*6 + ii] = src[ii*lds + kk] (an A strip of 6 contiguous rows). The
 * AVX path stores 8 lanes per kk: the two extra lanes land on the next kk's
 * slots (rewritten next) or on the 2 floats after the strip, which the
 * caller provides (the next strip, packed later, or padding). */
static void gemm_pack_a6_rows_f32(const float *src, int64_t lds, int64_t kc, float *dst) {
    int64_t kk = 0;
#if GEMM_AVX2
    if (!gemm_portable)
        for (; kk + 8 <= kc; kk += 8) {
            __m256 r[8];
            for (int i = 0; i < 6; i++) r[i] = _mm256_loadu_ps(src + i * lds + kk);
            r[6] = r[7] = _mm256_setzero_ps();
            gemm_tr8x8(r);
            for (int i = 0; i < 8; i++) _mm256_storeu_ps(dst + (kk + i) * 6, r[i]);
        }
#endif
    for (; kk < kc; kk++)
        for (int ii = 0; ii < 6; ii++) dst[kk * 6 + ii] = src[ii * lds + kk];
}

/* ---------------------------------------------------------------- packed driver
 * One template per dtype: S suffix, MR x NR micro-tile, KC depth, MC rows
 * (multiple of MR) per packed A block and NC columns (multiple of NR) per
 * packed B panel; F32 selects the F32 packing helpers above.
 * One matrix is split into at most one region per thread: column ranges of
 * whole NR strips (the usual case: B is then packed once over all threads
 * and A once per thread), or row ranges of whole MR strips when N is
 * narrower than M. A region loops: NC panel -> KC block (pack the B panel,
 * KC x NC, into the thread's buffer: L2-resident) -> MC block (pack A, MC x
 * KC) -> NR strip (in L1) -> MR strip -> micro-kernel. K blocks start at
 * multiples of KC whatever the region, and the micro-kernel computes each
 * C element from zero per K block and adds it to C, so results do not
 * depend on the partition or the thread count. */
#define GEMM_SERIAL_FLOPS ((int64_t)1 << 17) /* below M*N*K: one thread per matrix */

#define GEMM_DRIVER(T, S, MR, NR, KC, MC, NC, F32)                                            \
    typedef void (*micro_fn_##S)(int64_t, const T *, const T *, T *, int64_t, bool);          \
    /* MR x 2NR over two packed B strips (NULL: none) */                                      \
    typedef void (*micro2_fn_##S)(int64_t, const T *, const T *, const T *, T *, int64_t,     \
                                  bool);                                                      \
    typedef struct gemm_job_##S {                                                             \
        const T *A, *B;                                                                       \
        T *C;                                                                                 \
        int64_t M, N, K, ars, acs, bks, bns;                                                  \
        int64_t nitems;                                                                       \
        bool split_n;                                                                         \
        micro_fn_##S micro;                                                                   \
        micro2_fn_##S micro2;                                                                 \
    } gemm_job_##S;                                                                           \
    /* plain loop for rows [i0, i1) x cols [n0, n1) (allocation failures only) */            \
    static void gemm_plain_##S(const gemm_job_##S *j, int64_t i0, int64_t i1, int64_t n0,     \
                               int64_t n1) {                                                  \
        for (int64_t i = i0; i < i1; i++)                                                     \
            for (int64_t c = n0; c < n1; c++) {                                               \
                T s = 0;                                                                      \
                for (int64_t k = 0; k < j->K; k++)                                            \
                    s += j->A[i * j->ars + k * j->acs] * j->B[k * j->bks + c * j->bns];       \
                j->C[i * j->N + c] = s;                                                       \
            }                                                                                 \
    }                                                                                         \
    /* B rows [k0, k0+kc) x cols [n0, n0+nw) into NR-wide strips (zero padded) */            \
    static void gemm_pack_b_##S(const gemm_job_##S *j, int64_t k0, int64_t kc, int64_t n0,    \
                                int64_t nw, T *Bp) {                                          \
        int64_t s = 0;                                                                        \
        if (F32 && j->bns == 1) { /* the full strips row by row */                            \
            s = nw / NR;                                                                      \
            gemm_pack_b16_rows_f32((const float *)(const void *)(j->B + k0 * j->bks + n0),    \
                                   j->bks, kc, s, (float *)(void *)Bp);                       \
        }                                                                                     \
        for (; s * NR < nw; s++) {                                                            \
            T *dst = Bp + s * NR * kc;                                                        \
            const int64_t nv = nw - s * NR < NR ? nw - s * NR : NR;                           \
            const T *src = j->B + k0 * j->bks + (n0 + s * NR) * j->bns;                       \
            if (F32 && nv == NR && j->bks == 1) {                                             \
                gemm_pack_b16_trans_f32((const float *)(const void *)src, j->bns, kc,         \
                                        (float *)(void *)dst);                                \
                continue;                                                                     \
            }                                                                                 \
            for (int64_t kk = 0; kk < kc; kk++) /* (one loop: no memset per kk) */           \
                for (int64_t jj = 0; jj < NR; jj++)                                           \
                    dst[kk * NR + jj] = jj < nv ? src[kk * j->bks + jj * j->bns] : (T)0;      \
        }                                                                                     \
    }                                                                                         \
    /* A rows [i0, i0+m) x cols [k0, k0+kc) into MR-row strips (zero padded), in order */    \
    static void gemm_pack_a_##S(const gemm_job_##S *j, int64_t i0, int64_t m, int64_t k0,     \
                                int64_t kc, T *Ap) {                                          \
        for (int64_t r = 0; r * MR < m; r++) {                                                \
            T *dst = Ap + r * MR * kc;                                                        \
            const int64_t mv = m - r * MR < MR ? m - r * MR : MR;                             \
            const T *src = j->A + (i0 + r * MR) * j->ars + k0 * j->acs;                       \
            if (F32 && mv == MR && j->acs == 1) {                                             \
                gemm_pack_a6_rows_f32((const float *)(const void *)src, j->ars, kc,           \
                                      (float *)(void *)dst);                                  \
                continue;                                                                     \
            }                                                                                 \
            for (int64_t kk = 0; kk < kc; kk++)                                               \
                for (int64_t ii = 0; ii < MR; ii++)                                           \
                    dst[kk * MR + ii] = ii < mv ? src[ii * j->ars + kk * j->acs] : (T)0;      \
        }                                                                                     \
    }                                                                                         \
    /* C rows [i0, i1) x cols [n0, n1) (i0, n0 on strip boundaries); Bp: a KC x NC panel,   \
     * Ap: an MC x KC block + 16 (both capped by the matrix sizes) */                         \
    static void gemm_region_##S(const gemm_job_##S *j, int64_t i0, int64_t i1, int64_t n0,    \
                                int64_t n1, T *Bp, T *Ap) {                                   \
        for (int64_t nc0 = n0; nc0 < n1; nc0 += NC) {                                         \
            const int64_t nw = n1 - nc0 < NC ? n1 - nc0 : NC;                                 \
            for (int64_t k0 = 0; k0 < j->K; k0 += KC) {                                       \
                const int64_t kc = j->K - k0 < KC ? j->K - k0 : KC;                           \
                const bool acc = k0 > 0;                                                      \
                gemm_pack_b_##S(j, k0, kc, nc0, nw, Bp);                                      \
                for (int64_t ic = i0; ic < i1; ic += MC) {                                    \
                    const int64_t m = i1 - ic < MC ? i1 - ic : MC;                            \
                    gemm_pack_a_##S(j, ic, m, k0, kc, Ap);                                    \
                    for (int64_t jr = 0; jr < nw;) {                                          \
                        /* two full strips side by side: the MR x 2NR kernel if any */        \
                        const bool two = j->micro2 && nw - jr >= 2 * NR;                      \
                        for (int64_t ir = 0; ir < m; ir += MR) {                              \
                            const int64_t mr = m - ir < MR ? m - ir : MR;                     \
                            const T *as = Ap + ir * kc;                                       \
                            T *cp = j->C + (ic + ir) * j->N + nc0 + jr;                       \
                            if (two && mr == MR) {                                            \
                                j->micro2(kc, as, Bp + jr * kc, Bp + (jr + NR) * kc, cp,      \
                                          j->N, acc);                                         \
                                continue;                                                     \
                            }                                                                 \
                            for (int64_t h = 0; h < (two ? 2 : 1); h++) {                     \
                                const int64_t js = jr + h * NR;                               \
                                const int64_t nr = nw - js < NR ? nw - js : NR;               \
                                const T *bs = Bp + js * kc;                                   \
                                if (mr == MR && nr == NR) {                                   \
                                    j->micro(kc, as, bs, cp + h * NR, j->N, acc);             \
                                    continue;                                                 \
                                }                                                             \
                                T tile[MR * NR];                                              \
                                j->micro(kc, as, bs, tile, NR, false);                        \
                                for (int64_t i = 0; i < mr; i++)                              \
                                    for (int64_t c = 0; c < nr; c++) {                        \
                                        T *d = cp + h * NR + i * j->N + c;                    \
                                        *d = acc ? *d + tile[i * NR + c] : tile[i * NR + c];  \
                                    }                                                         \
                            }                                                                 \
                        }                                                                     \
                        jr += two ? 2 * NR : NR;                                              \
                    }                                                                         \
                }                                                                             \
            }                                                                                 \
        }                                                                                     \
    }                                                                                         \
    /* regions [begin, end) of j's partition */                                               \
    static void gemm_items_##S(void *ctx, int64_t begin, int64_t end) {                       \
        const gemm_job_##S *j = ctx;                                                          \
        const int64_t ms = (j->M + MR - 1) / MR, ns = (j->N + NR - 1) / NR;                   \
        const int64_t kcm = j->K < KC ? j->K : KC, ncm = ns * NR < NC ? ns * NR : NC;         \
        const int64_t mcm = ms * MR < MC ? ms * MR : MC;                                      \
        T *buf = malloc(sizeof(T) * (size_t)(kcm * ncm + mcm * kcm + 16));                    \
        for (int64_t t = begin; t < end; t++) {                                               \
            int64_t i0 = 0, i1 = j->M, n0 = 0, n1 = j->N;                                     \
            if (j->split_n) {                                                                 \
                n0 = t * ns / j->nitems * NR;                                                 \
                n1 = (t + 1) * ns / j->nitems * NR;                                           \
                if (n1 > j->N) n1 = j->N;                                                     \
            } else {                                                                          \
                i0 = t * ms / j->nitems * MR;                                                 \
                i1 = (t + 1) * ms / j->nitems * MR;                                           \
                if (i1 > j->M) i1 = j->M;                                                     \
            }                                                                                 \
            if (i0 >= i1 || n0 >= n1) continue;                                               \
            if (buf) gemm_region_##S(j, i0, i1, n0, n1, buf, buf + kcm * ncm);                \
            else gemm_plain_##S(j, i0, i1, n0, n1);                                           \
        }                                                                                     \
        free(buf);                                                                            \
    }                                                                                         \
    /* one matrix: C[M,N] (row stride N) = A @ B */                                           \
    static void gemm_matrix_##S(gemm_job_##S *j, bool parallel) {                             \
        if (j->M == 0 || j->N == 0) return;                                                   \
        if (j->K == 0) {                                                                      \
            memset(j->C, 0, sizeof(T) * (size_t)(j->M * j->N));                               \
            return;                                                                           \
        }                                                                                     \
        const int nt = mft_get_num_threads();                                                 \
        parallel = parallel && j->M * j->N * j->K >= GEMM_SERIAL_FLOPS && nt > 1;             \
        j->nitems = parallel ? nt : 1;                                                        \
        const int64_t ms = (j->M + MR - 1) / MR, ns = (j->N + NR - 1) / NR;                   \
        /* split N (B packed once in all) unless N is narrow next to M */                     \
        j->split_n = ns >= j->nitems && (j->N >= j->M || ms < j->nitems);                     \
        if (parallel) mft__parallel_for(0, j->nitems, 1, gemm_items_##S, j);                  \
        else gemm_items_##S(j, 0, 1);                                                         \
    }                                                                                         \
    typedef struct gemm_batch_##S {                                                           \
        gemm_shape g;                                                                         \
        micro_fn_##S micro;                                                                   \
        micro2_fn_##S micro2;                                                                 \
    } gemm_batch_##S;                                                                         \
    static void gemm_job_init_##S(const gemm_batch_##S *b, int64_t bi, gemm_job_##S *j) {     \
        int64_t ao, bo;                                                                       \
        gemm_batch_offsets(&b->g, bi, &ao, &bo);                                              \
        memset(j, 0, sizeof *j);                                                              \
        j->A = (const T *)(const void *)mft__tensor_ptr(b->g.A) + ao;                         \
        j->B = (const T *)(const void *)mft__tensor_ptr(b->g.B) + bo;                         \
        j->C = (T *)(void *)mft__tensor_ptr(b->g.C) + bi * b->g.M * b->g.N;                   \
        j->M = b->g.M, j->N = b->g.N, j->K = b->g.K;                                          \
        j->ars = b->g.ars, j->acs = b->g.acs, j->bks = b->g.bks, j->bns = b->g.bns;           \
        j->micro = b->micro;                                                                  \
        j->micro2 = b->micro2;                                                                \
    }                                                                                         \
    static void gemm_batch_range_##S(void *ctx, int64_t begin, int64_t end) {                 \
        const gemm_batch_##S *b = ctx;                                                        \
        for (int64_t bi = begin; bi < end; bi++) {                                            \
            gemm_job_##S j;                                                                   \
            gemm_job_init_##S(b, bi, &j);                                                     \
            gemm_matrix_##S(&j, false);                                                       \
        }                                                                                     \
    }                                                                                         \
    static void gemm_run_##S(const mft_kernel_args *a, micro_fn_##S micro,                    \
                             micro2_fn_##S micro2) {                                          \
        gemm_batch_##S b;                                                                     \
        gemm_shape_init(a, &b.g);                                                             \
        b.micro = micro;                                                                      \
        b.micro2 = micro2;                                                                    \
        if (b.g.batch == 1) {                                                                 \
            gemm_job_##S j;                                                                   \
            gemm_job_init_##S(&b, 0, &j);                                                     \
            gemm_matrix_##S(&j, true);                                                        \
        } else if (b.g.batch > 1) {                                                           \
            const int64_t work = b.g.M * b.g.N * (b.g.K ? b.g.K : 1);                         \
            const int64_t grain = work >= GEMM_SERIAL_FLOPS ? 1 : GEMM_SERIAL_FLOPS / (work ? work : 1); \
            mft__parallel_for(0, b.g.batch, grain, gemm_batch_range_##S, &b);                 \
        }                                                                                     \
    }
GEMM_DRIVER(float, f32, 6, 16, 256, 72, 256, 1)
GEMM_DRIVER(double, f64, 6, 8, 256, 72, 128, 0)

static void matmul_f32(const mft_kernel_args *a) {
#if GEMM_AVX512
    if (!gemm_portable) {
        gemm_run_f32(a, micro_f32avx, micro2_f32avx512);
        return;
    }
#elif GEMM_AVX2
    if (!gemm_portable) {
        gemm_run_f32(a, micro_f32avx, NULL);
        return;
    }
#endif
    gemm_run_f32(a, micro_f32c, NULL);
}

static void matmul_f64(const mft_kernel_args *a) {
#if GEMM_AVX2
    if (!gemm_portable) {
        gemm_run_f64(a, micro_f64avx, NULL);
        return;
    }
#endif
    gemm_run_f64(a, micro_f64c, NULL);
}

/* ---------------------------------------------------------------- kernel table
 * Both kernels read any strides (see the top of the file) and write a packed
 * CONTIGUOUS result; the reference kernels are reached through
 * mft__gemm_reference. */
const mft__kernel_def mft__kernels_gemm[] = {
#if GEMM_AVX512
    {MFT__OP_MATMUL, MFT_CONTIGUOUS, MFT_F32, "matmul.f32.packed.avx512", matmul_f32},
    {MFT__OP_MATMUL, MFT_CONTIGUOUS, MFT_F64, "matmul.f64.packed.avx2", matmul_f64},
#elif GEMM_AVX2
    {MFT__OP_MATMUL, MFT_CONTIGUOUS, MFT_F32, "matmul.f32.packed.avx2", matmul_f32},
    {MFT__OP_MATMUL, MFT_CONTIGUOUS, MFT_F64, "matmul.f64.packed.avx2", matmul_f64},
#else
    {MFT__OP_MATMUL, MFT_CONTIGUOUS, MFT_F32, "matmul.f32.packed", matmul_f32},
    {MFT__OP_MATMUL, MFT_CONTIGUOUS, MFT_F64, "matmul.f64.packed", matmul_f64},
#endif
    {0},
};
