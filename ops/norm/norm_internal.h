/* ops/norm/norm_internal.h — what the files of the normalisation family
 * share beyond ops/ops_internal.h: the kernel parameter blocks of the
 * forward and backward ops (the kernel interface), the blocking constants,
 * the hot statistics helpers (static inline, so every kernel inlines them),
 * and the declarations of ops/norm/common.c (validation, the run / dispatch
 * / record skeleton) and of the kernels its tables list.
 *
 * The family's files: batch_norm.c, group_norm.c (group and instance
 * norm), layer_norm.c (each: fast kernels forward and backward, entry
 * points, autograd), channel_backward.c (the fast backward batch_norm and
 * group_norm share), reference.c (the strided reference kernels of all
 * three ops), batch_norm_blocked.c (batch_norm's native nChw16c F32
 * kernels), common.c. */
#ifndef MFT_OPS_NORM_INTERNAL_H
#define MFT_OPS_NORM_INTERNAL_H

#include "mft/cnn.h"
#include "ops_internal.h"

/* ---------------------------------------------------------------- forward kernel interface
 * (BATCH_NORM, GROUP_NORM, LAYER_NORM; instance_norm is group_norm with
 * groups = C)
 *   inputs  = {x}            (converted to the kernel's packed format)
 *   outputs = {y}            (packed in the kernel's format, same dtype)
 *   params  = const mft__norm_kparams * (below; starts with mft_norm_params,
 *             so a user kernel may read it as mft_norm_params).
 * Optional tensors cannot pass through the dispatcher (it cannot convert a
 * NULL), so weight / bias travel in the params struct: 1-D (batch_norm,
 * group_norm: C elements) or of normalized_shape (layer_norm), any strides,
 * the dtype of x, NULL meaning 1 / 0. Statistics live in double arrays the
 * op allocates:
 *   mean[nstat], var[nstat]  nstat = C (batch_norm), N*groups (group_norm),
 *                            numel / prod(normalized_shape) (layer_norm).
 *   If p.training (always set for layer/group norm) the kernel writes the
 *   statistics (mean, BIASED variance) there; otherwise (batch_norm eval)
 *   they hold the running statistics and the kernel only normalises:
 *   y = (x - mean) / sqrt(var + eps) * w + b.
 *   scratch[nscratch]: work space for the built-in kernels: batch_norm
 *   2*C + max(N*C, ceil(N*S / NORM_ROWS)*C) doubles (S = spatial numel),
 *   group_norm gn_nhwc_scratch, layer_norm L + 1 (2*L floats, L = prod(normalized_shape)).
 * The op itself reads the running stats before (eval) and updates them after
 * (training: running = (1-momentum)*running + momentum*stat, unbiased var)
 * the kernel, so kernels never touch them. */
typedef struct mft__norm_kparams {
    mft_norm_params p;
    const mft_tensor *weight, *bias; /* NULL: 1 / 0 */
    double *mean, *var;              /* [nstat] */
    double *scratch;                 /* [nscratch] (batch_norm) */
    int64_t nscratch;
} mft__norm_kparams;

/* ---------------------------------------------------------------- backward kernel interface
 * (BATCH_NORM_BACKWARD, LAYER_NORM_BACKWARD, GROUP_NORM_BACKWARD;
 * instance_norm is group_norm with groups = C)
 *   inputs  = {grad_out, x}  (both converted to the kernel's packed format)
 *   outputs = {grad_x}       (packed in the kernel's format)
 *   params  = const mft__normb_kparams * (below; starts with mft_norm_params:
 *             eps, training (batch_norm), groups, nnorm). The statistics
 *             travel as double arrays mean[nstat], rstd[nstat] (nstat as in
 *             the forward: C, N*groups, numel / prod(normalized_shape)),
 *             weight as a tensor of any strides (NULL = 1). The kernel
 *             writes gw[naff] = sum dy*xhat and gb[naff] = sum dy (naff = C,
 *             or prod(normalized_shape)) unless need_wb is false (then it
 *             may leave them alone). scratch[nscratch] doubles of work
 *             space (the entry point sizes it for the built-in kernels:
 *             nb_scratch in ops/norm/channel_backward.c, and the layer_norm
 *             entry point).
 * Formulas (xhat = (x - mean) * rstd, one statistics set of M elements,
 * w the affine weight of each element, 1 when absent):
 *   grad_bias[a]   = sum of dy over the elements with affine index a
 *   grad_weight[a] = sum of dy * xhat over the same elements
 *   grad_x = rstd * (w dy - s1 / M - xhat * s2 / M),
 *            s1 = sum_set w dy, s2 = sum_set w dy xhat
 *   batch_norm eval: grad_x = dy * w * rstd (running statistics). */
typedef struct mft__normb_kparams {
    mft_norm_params p;
    const mft_tensor *weight; /* NULL: 1 */
    const double *mean, *rstd; /* [nstat] */
    double *gw, *gb;           /* [naff] */
    bool need_wb;
    double *scratch; /* [nscratch] */
    int64_t nscratch;
} mft__normb_kparams;

/* ---------------------------------------------------------------- blocking */
#define NORM_ROWS 256    /* rows per partial-sum block of the NHWC kernels */
#define NORM_GRAIN 32768 /* elements per parallel chunk, at least */
/* NHWC per-channel sums: chunks of NORM_CCH channels, sub-blocks of
 * NORM_SUB rows summed in float (vectorised over channels), then in double */
#define NORM_CCH 256
#define NORM_SUB 32

static inline int64_t norm_grain(int64_t per_item) {
    int64_t g = NORM_GRAIN / (per_item > 0 ? per_item : 1);
    return g < 1 ? 1 : g;
}

/* Element i (row-major over t's logical dims, read through its strides) of
 * the affine tensor t, of dtype D, as double; dflt when t is NULL. */
#define NORM_LD(D)                                                                            \
    static inline double norm_ld_##D(const mft_tensor *t, int64_t i, double dflt) {          \
        if (!t) return dflt;                                                                  \
        const MFT__T_##D *p = (const MFT__T_##D *)(const void *)mft__tensor_ptr(t);          \
        return (double)p[mft__dims_off(t, 0, t->ndim, i)];                                    \
    }
NORM_LD(F32)
NORM_LD(F64)
#undef NORM_LD

/* ---------------------------------------------------------------- statistics helpers */
#define NORM_LANES 8
/* Sum (pass 0) or sum of squared deviations from m (pass 1) of n floats. */
static inline double norm_sum(const float *restrict x, int64_t n, double m, int pass) {
    double s[NORM_LANES] = {0};
    int64_t i = 0;
    if (pass == 0) {
        for (; i + NORM_LANES <= n; i += NORM_LANES)
            for (int k = 0; k < NORM_LANES; k++) s[k] += (double)x[i + k];
        for (; i < n; i++) s[0] += (double)x[i];
    } else {
        for (; i + NORM_LANES <= n; i += NORM_LANES)
            for (int k = 0; k < NORM_LANES; k++) {
                const double d = (double)x[i + k] - m;
                s[k] += d * d;
            }
        for (; i < n; i++) {
            const double d = (double)x[i] - m;
            s[0] += d * d;
        }
    }
    for (int k = NORM_LANES / 2; k > 0; k /= 2)
        for (int q = 0; q < k; q++) s[q] += s[q + k];
    return s[0];
}

/* sum of w dy and of w dy (x - m) over n floats (w NULL: 1): blocks of
 * NB_FBLK elements summed in float (an `omp simd` reduction: vectorised,
 * in an order fixed at compile time, so the same for every thread count),
 * each block's sum added to double totals. */
#define NB_FBLK 512
static inline void nb_sums_w(const float *restrict dy, const float *restrict x,
                             const float *restrict w, int64_t n, double m, double *sdb,
                             double *sds) {
    const float mf = (float)m;
    const double dm = (double)mf - m; /* x - m = (x - mf) + dm */
    double A = 0.0, B = 0.0;
    for (int64_t i0 = 0; i0 < n; i0 += NB_FBLK) {
        const int64_t i1 = i0 + NB_FBLK < n ? i0 + NB_FBLK : n;
        float a = 0.0f, b = 0.0f;
        if (w) {
#ifdef MFT_HAVE_OPENMP
#pragma omp simd reduction(+ : a, b)
#endif
            for (int64_t i = i0; i < i1; i++) {
                const float d = dy[i] * w[i];
                a += d;
                b += d * (x[i] - mf);
            }
        } else {
#ifdef MFT_HAVE_OPENMP
#pragma omp simd reduction(+ : a, b)
#endif
            for (int64_t i = i0; i < i1; i++) {
                a += dy[i];
                b += dy[i] * (x[i] - mf);
            }
        }
        A += (double)a;
        B += (double)b;
    }
    *sdb = A;
    *sds = B + A * dm;
}

/* ---------------------------------------------------------------- fast group/layer norm F32
 * CONTIGUOUS only: then each statistics set (group (n, g): C/groups channel
 * planes; layer_norm row: the last nnorm dims) is one contiguous run of len
 * elements. Work item = one set, computed by one thread (two passes with
 * norm_sum, then the normalisation), so results do not depend on the thread
 * count. (gn_sets in ops/norm/group_norm.c, ln_sets in ops/norm/layer_norm.c.) */
typedef struct gln_job {
    const float *x;
    float *y;
    int64_t len, S, C, G; /* group_norm: S spatial, C channels, G groups */
    const mft__norm_kparams *kp;
    const float *w, *b; /* layer_norm: packed weight / bias, or NULL (then read by strides) */
} gln_job;

/* Starts a job on a's x and y (w, b NULL); false for an empty x (nothing
 * to do). */
static inline bool gln_init(gln_job *j, const mft_kernel_args *a) {
    const mft_tensor *x = a->inputs[0];
    if (x->numel == 0) return false;
    j->x = (const float *)(const void *)mft__tensor_ptr(x);
    j->y = (float *)(void *)mft__tensor_ptr(a->outputs[0]);
    j->kp = a->params;
    j->w = j->b = NULL;
    return true;
}

static inline void gln_stats(const gln_job *j, int64_t k, const float *x) {
    const double m = norm_sum(x, j->len, 0.0, 0) / (double)j->len;
    j->kp->mean[k] = m;
    j->kp->var[k] = norm_sum(x, j->len, m, 1) / (double)j->len;
}

/* ---------------------------------------------------------------- validation (common.c)
 * Each sets the error (naming fn) and returns false / a non-zero status. */
/* x non-NULL, of rank >= min_rank, F32 or F64; `what` names x in the rank
 * message ("a tensor", "x"). */
bool mft__norm_check_x(const char *fn, const mft_tensor *x, int min_rank, const char *what);
/* The backward's grad_out and x: both non-NULL, x as mft__norm_check_x,
 * grad_out of x's sizes and dtype. */
bool mft__norm_check_grad_x(const char *fn, const mft_tensor *go, const mft_tensor *x,
                            int min_rank);
/* t NULL (allowed unless required), or of shape want[0..n) and x's dtype. */
bool mft__norm_check_param(const char *fn, const char *what, const mft_tensor *t,
                           const mft_tensor *x, int n, const int64_t *want, bool required);
bool mft__norm_check_eps(const char *fn, double eps);
/* groups >= 1 and dividing C. */
bool mft__norm_check_groups(const char *fn, int64_t groups, int64_t C);
/* layer_norm's nnorm (1..rank of x) and normalized_shape (non-NULL, the
 * last nnorm sizes of x): MFT_OK, else the status the backward returns
 * (MFT_ERR_NULL for a NULL normalized_shape, whatever message is kept). */
mft_status mft__norm_check_layer_shape(const char *fn, const mft_tensor *x, int nnorm,
                                       const int64_t *normalized_shape);

/* ---------------------------------------------------------------- forward run (common.c) */
/* The running statistics of a training batch_norm, computed but not yet
 * written: the op writes them only once nothing can fail any more (the
 * result registered, the tape node recorded), so a failed call leaves them
 * untouched. vals: the batch's mean [C] then biased variance [C]. */
typedef struct bn_pending {
    double *vals;
    int64_t C, count;
    double momentum;
    mft_tensor *rmean, *rvar;
} bn_pending;

/* Allocates the result and stats, dispatches. Running stats: kp->mean/var
 * are filled from rmean / rvar before the kernel (eval); for training with
 * `pending` the batch statistics are handed to *pending for bn_commit
 * (pending->vals stays NULL when nothing is to be written). Returns the
 * result (owned like any op result) or NULL. */
mft_tensor *mft__norm_run(const char *fn, mft__op_id op, const mft_tensor *x,
                          mft__norm_kparams *kp, int64_t nstat, int64_t nscratch,
                          const mft_tensor *rmean, const mft_tensor *rvar, bn_pending *pending,
                          mft_tensor **smean, mft_tensor **srstd);

/* ---------------------------------------------------------------- backward run (common.c) */
/* Sets the requested gradient pointers to NULL. */
void mft__normb_clear(mft_tensor **gx, mft_tensor **gw, mft_tensor **gb);
/* Shared tail: loads the statistics (stat tensors: 1-D of nstat), allocates,
 * dispatches, builds the results. aff_nd / aff_sizes: grad_weight shape. */
mft_status mft__normb_run(const char *fn, mft__op_id op, const mft_tensor *go,
                          const mft_tensor *x, mft__normb_kparams *kp, int64_t nstat,
                          const mft_tensor *smean, const mft_tensor *srstd, int aff_nd,
                          const int64_t *aff_sizes, int64_t nscratch, mft_tensor **gx,
                          mft_tensor **gw, mft_tensor **gb);
/* The forward that recomputes the statistics (mean, rstd) of x for a
 * backward given none (kp: the backward's parameters; aff_sizes: as for
 * mft__normb_run). Returns the forward's result. */
typedef mft_tensor *(*mft__normb_stats_fn)(const mft_tensor *x, const mft__normb_kparams *kp,
                                           const int64_t *aff_sizes, mft_tensor **mean,
                                           mft_tensor **rstd);
/* mft__normb_run for group / instance / layer norm after checking the
 * weight (of aff_sizes), the statistics (nstat each; both NULL, then
 * recomputed with `stats`, or both given) and kp->p.eps. */
mft_status mft__normb_run_stats(const char *fn, mft__op_id op, const mft_tensor *go,
                                const mft_tensor *x, mft__normb_kparams *kp, int64_t nstat,
                                const mft_tensor *mean, const mft_tensor *rstd, int aff_nd,
                                const int64_t *aff_sizes, int64_t nscratch,
                                mft__normb_stats_fn stats, mft_tensor **gx, mft_tensor **gw,
                                mft_tensor **gb);

/* ---------------------------------------------------------------- autograd (common.c) */
enum { NORM_AG_BATCH, NORM_AG_GROUP, NORM_AG_INSTANCE, NORM_AG_LAYER };

typedef struct norm_ag_params {
    int64_t shape[MFT_MAX_DIMS]; /* layer_norm: normalized_shape[0..nnorm) */
    int64_t groups;
    double eps;
    int kind, nnorm;
    bool training;
} norm_ag_params;

/* The op without its tape node: y from ctx, the statistics in *smean /
 * *srstd when asked; may complete *p (the node's parameters) on success. */
typedef mft_tensor *(*mft__norm_impl_fn)(const void *ctx, norm_ag_params *p,
                                         mft_tensor **smean, mft_tensor **srstd);
/* Runs impl directly when nothing records; else with grad mode off and the
 * user's scope suspended, then records node `name` (inputs ins = {x,
 * weight, bias}, saved {x, weight, mean, rstd}, parameters *p) and hands y
 * and the statistics (to *um / *ur when asked) over. NULL on failure, with
 * *um, *ur NULL. */
mft_tensor *mft__norm_entry(const char *fn, const char *name, const mft_tensor *const *ins,
                            mft__norm_impl_fn impl, const void *ctx, norm_ag_params *p,
                            mft_tensor **um, mft_tensor **ur);

/* ---------------------------------------------------------------- kernels
 * Listed by the tables mft__kernels_norm / mft__kernels_norm_backward
 * (common.c). */
void mft__batch_norm_nchw_f32(const mft_kernel_args *a);
void mft__batch_norm_nhwc_f32(const mft_kernel_args *a);
void mft__group_norm_nchw_f32(const mft_kernel_args *a);
void mft__group_norm_nhwc_f32(const mft_kernel_args *a);
void mft__layer_norm_nchw_f32(const mft_kernel_args *a);
void mft__layer_norm_nhwc_f32(const mft_kernel_args *a);
void mft__batch_norm_bwd_nchw_f32(const mft_kernel_args *a);
void mft__batch_norm_bwd_nhwc_f32(const mft_kernel_args *a);
void mft__group_norm_bwd_nchw_f32(const mft_kernel_args *a);
void mft__group_norm_bwd_nhwc_f32(const mft_kernel_args *a);
void mft__layer_norm_bwd_nchw_f32(const mft_kernel_args *a);
void mft__layer_norm_bwd_nhwc_f32(const mft_kernel_args *a);
/* reference.c */
#define MFT__NORM_REF_DECL(D)                                                                 \
    void mft__batch_norm_ref_##D(const mft_kernel_args *a);                                   \
    void mft__group_norm_ref_##D(const mft_kernel_args *a);                                   \
    void mft__layer_norm_ref_##D(const mft_kernel_args *a);                                   \
    void mft__batch_norm_bwd_ref_##D(const mft_kernel_args *a);                               \
    void mft__group_norm_bwd_ref_##D(const mft_kernel_args *a);                               \
    void mft__layer_norm_bwd_ref_##D(const mft_kernel_args *a);
MFT__NORM_REF_DECL(F32)
MFT__NORM_REF_DECL(F64)
#undef MFT__NORM_REF_DECL
/* The reference kernels for tests (op: 0 batch_norm, 1 group_norm, 2
 * layer_norm); they read and write through the real strides. NULL for other
 * dtypes. */
mft_kernel_fn mft__norm_reference(int op, mft_dtype dt);
mft_kernel_fn mft__norm_backward_reference(int op, mft_dtype dt);

/* channel_backward.c: the fast F32 backward of batch_norm (bn) and
 * group_norm, CHANNELS_LAST when cl. */
void mft__nb_fast_run(const mft_kernel_args *a, bool bn, bool cl);
/* Scratch (doubles) the fast batch/group norm backward kernels need. */
int64_t mft__nb_scratch(int64_t N, int64_t C, int64_t S);

/* batch_norm_blocked.c: the native nChw16c F32 batch_norm kernels (Note
 * [Batch norm in nChw16c]) and the scratch (doubles) they need for an x of
 * N samples, C channels and S spatial elements: forward, backward. */
void mft__batch_norm_nchw16c_f32(const mft_kernel_args *a);
void mft__batch_norm_bwd_nchw16c_f32(const mft_kernel_args *a);
int64_t mft__bn16_scratch(int64_t N, int64_t C, int64_t S);
int64_t mft__bn16_bwd_scratch(int64_t N, int64_t C, int64_t S);

#endif
