/* ops/ops_internal.h — what the op families share: the elementwise op
 * descriptor and its driver (validate -> promote -> allocate by the layout
 * rule -> iterate), dtype promotion helpers, and the per-dtype type/math
 * macros the kernel files use to stamp out loops. */
#ifndef MFT_OPS_INTERNAL_H
#define MFT_OPS_INTERNAL_H

#include <math.h>
#include <stdint.h>
#include "internal.h"
#include "mft/ops.h"

/* How an elementwise op derives its compute and result dtypes from the
 * promoted type of its inputs (and scalar). */
typedef enum mft__ew_rule {
    MFT__EW_SAME,     /* compute and result in the promoted type */
    MFT__EW_FLOAT,    /* integer promoted types compute in F32 */
    MFT__EW_COMPARE,  /* compute in the promoted type, result U8 */
    MFT__EW_WHERE,    /* input 0 (cond) is excluded from promotion */
} mft__ew_rule;

/* One elementwise op: its public name (for messages), tensor arity, dtype
 * rule, how many scalar parameters take part in promotion, and one
 * 2-D loop per compute dtype (NULL: dtype unsupported). Loops get data[0] =
 * result, data[1..] = inputs (already in the compute dtype; cond of where is
 * U8), strides as mft__loop2d documents, and ctx = const double params[2]. */
typedef struct mft__ew_op {
    const char *name;
    int ninputs;
    mft__ew_rule rule;
    int scalar_promotes; /* how many of params[] take part in promotion (0-2) */
    bool float_only; /* integer promoted types are MFT_ERR_DTYPE (e.g. leaky_relu) */
    /* params[0] acts as a 0-dim tensor operand (PyTorch's wrapped number in
     * x + 2, x < 2, ...): the operands then never share one shape, so the
     * result layout always comes from the stride-order rule. */
    bool scalar_operand;
    mft__loop2d loops[MFT_DTYPE_COUNT];
    /* Note [Integer scalars]: integer results are exact modulo 2^bits for
     * any scalar (add, sub, rsub, mul), so the scalar is checked against
     * i64 rather than the compute dtype */
    bool scalar_wraps;
} mft__ew_op;

/* Runs op on inputs and returns the new result, allocated by the docs/spec.md §4
 * rule; NULL on error with the message set (naming op->name). */
mft_tensor *mft__ew_run(const mft__ew_op *op, const mft_tensor *const *inputs,
                        const double *params);
/* The _ and _out variants: writes into out (in place when out is inputs[0]);
 * fn is the public name for messages ("mft_add_", "mft_add_out"). */
mft_status mft__ew_run_into(const mft__ew_op *op, const char *fn, mft_tensor *out,
                            const mft_tensor *const *inputs, const double *params);

/* Layout of a fresh elementwise result (docs/spec.md §4): strides for `shape` given
 * the inputs (fast setup or stride-order reorder). */
void mft__ew_result_strides(int nin, const mft_tensor *const *inputs, bool scalar_operand,
                            int ndim, const int64_t *shape, int64_t *strides);

/* Promotion */
mft_dtype mft__promote(mft_dtype a, mft_dtype b);
bool mft__is_float(mft_dtype dt);
/* Scalar category: integral finite values act as Python ints. */
bool mft__scalar_is_int(double s);

/* ------------------------------------------------------------------ kernel macros
 * Per dtype: C type, unsigned twin (for wrapping integer arithmetic), and
 * the math-function suffix. */
#define MFT__T_F32 float
#define MFT__T_F64 double
#define MFT__T_I32 int32_t
#define MFT__T_I64 int64_t
#define MFT__T_U8 uint8_t
/* integer sums accumulate in uint64_t: they wrap modulo 2^64 like the
 * elementwise integer ops (signed overflow would be undefined); the bits are
 * then read as the I64 result (two's complement) */
#define MFT__T_W64 uint64_t
#define MFT__UT_F32 float
#define MFT__UT_F64 double
#define MFT__UT_I32 uint32_t
#define MFT__UT_I64 uint64_t
#define MFT__UT_U8 uint8_t
#define MFT__ISF_F32 1
#define MFT__ISF_F64 1
#define MFT__ISF_I32 0
#define MFT__ISF_I64 0
#define MFT__ISF_U8 0
#define MFT__MF_F32(fn) fn##f
#define MFT__MF_F64(fn) fn

/* Converts a double parameter to an integer type without undefined
 * behaviour (saturating to int64, then wrapping like a C cast). */
static inline int64_t mft__param_i64(double v) {
    if (v != v) return 0;
    if (v <= -9223372036854775808.0) return INT64_MIN;
    if (v >= 9223372036854775807.0) return INT64_MAX;
    return (int64_t)v;
}
#define MFT__PARAM_F32(v) ((float)(v))
#define MFT__PARAM_F64(v) ((double)(v))
#define MFT__PARAM_I32(v) ((int32_t)(uint32_t)(uint64_t)mft__param_i64(v))
#define MFT__PARAM_I64(v) (mft__param_i64(v))
#define MFT__PARAM_U8(v) ((uint8_t)(uint64_t)mft__param_i64(v))

/* The integer dtypes and the floating dtypes, for stamping loops. */
#define MFT__FOR_FLOAT(M, ...) M(F32, __VA_ARGS__) M(F64, __VA_ARGS__)
#define MFT__FOR_INT(M, ...) M(I32, __VA_ARGS__) M(I64, __VA_ARGS__) M(U8, __VA_ARGS__)

/* Integer power by squaring, wrapping; negative exponents give 0 except for
 * bases 1 and -1 (PyTorch's integer pow). */
static inline int64_t mft__ipow(int64_t base, int64_t e) {
    if (e < 0) return base == 1 ? 1 : base == -1 ? ((e & 1) ? -1 : 1) : 0;
    uint64_t r = 1, b = (uint64_t)base;
    while (e) {
        if (e & 1) r *= b;
        b *= b;
        e >>= 1;
    }
    return (int64_t)r;
}

/* Note [Buffered strided loops]
 * A row with a non-unit stride is processed in blocks: gather the inputs
 * into small contiguous arrays, apply the op there (a loop the compiler
 * vectorises, and branch-free selects such as relu's), scatter the results.
 * Straight strided scalar code was 3-5x the dense time for x[..., ::2]
 * inputs, mostly mispredicted branches of the scalar selects. */
#define MFT__EW_BLOCK 256

/* dst[i] = element i of a row starting at src with byte stride sb. A stride
 * of two elements (x[..., ::2], interleaved pairs) gets a loop with a
 * constant stride, which the compiler turns into vector shuffles. */
#define MFT__GATHER_DEF(D)                                                                   \
    static inline void mft__gather_##D(MFT__T_##D *dst, const char *src, int64_t sb,         \
                                       int64_t m) {                                          \
        typedef MFT__T_##D T;                                                                \
        if (sb == 2 * (int64_t)sizeof(T)) {                                                  \
            const T *s = (const T *)(const void *)src;                                       \
            for (int64_t i = 0; i < m; i++) dst[i] = s[2 * i];                               \
        } else {                                                                             \
            for (int64_t i = 0; i < m; i++) dst[i] = *(const T *)(const void *)(src + i * sb); \
        }                                                                                    \
    }
MFT__GATHER_DEF(F32)
MFT__GATHER_DEF(F64)
MFT__GATHER_DEF(I32)
MFT__GATHER_DEF(I64)
MFT__GATHER_DEF(U8)

/* Element offset (through t's strides) of the row-major linear index lin
 * over dims [d0, d1), and the product of those dims' sizes: how the strided
 * reference kernels walk a sub-block of dims. */
static inline int64_t mft__dims_off(const mft_tensor *t, int d0, int d1, int64_t lin) {
    int64_t off = 0;
    for (int d = d1 - 1; d >= d0; d--) {
        const int64_t sz = t->sizes[d];
        off += (lin % sz) * t->strides[d];
        lin /= sz;
    }
    return off;
}
static inline int64_t mft__dims_prod(const mft_tensor *t, int d0, int d1) {
    int64_t n = 1;
    for (int d = d0; d < d1; d++) n *= t->sizes[d];
    return n;
}

/* Grain of the elementwise parallel split (elements). */
#define MFT__EW_GRAIN 32768

/* ------------------------------------------------------------------ ops
 * Every op's id, from the registry (mft/registry.h); the dispatched ones
 * have per-format kernels (mft/dispatch.h). */
#define MFT__OP_ENUM_(A, ID, ...) MFT__OP_##ID,
/* ... and the same ids under the ops' names (MFT__OPN_relu == MFT__OP_RELU),
 * for code generated from the name lists (MFT_UNARY_OPS and the like). */
#define MFT__OPN_ENUM_(A, ID, name, ...) MFT__OPN_##name = MFT__OP_##ID,
typedef enum mft__op_id {
    MFT_OP_REGISTRY(MFT__OP_ENUM_, 0) MFT__OP_COUNT,
    MFT_OP_REGISTRY(MFT__OPN_ENUM_, 0)
} mft__op_id;
#undef MFT__OP_ENUM_
#undef MFT__OPN_ENUM_

/* A built-in kernel; each family file exports a table ending with fn == NULL. */
typedef struct mft__kernel_def {
    mft__op_id op;
    mft_format fmt; /* CONTIGUOUS, CHANNELS_LAST or MFT_FORMAT_ANY */
    mft_dtype dtype;
    const char *name;
    mft_kernel_fn fn;
} mft__kernel_def;

extern const mft__kernel_def mft__kernels_pool[];
extern const mft__kernel_def mft__kernels_softmax[];
extern const mft__kernel_def mft__kernels_pad[];
extern const mft__kernel_def mft__kernels_gemm[];
extern const mft__kernel_def mft__kernels_norm[];
extern const mft__kernel_def mft__kernels_norm_backward[];
extern const mft__kernel_def mft__kernels_pool_more[];
extern const mft__kernel_def mft__kernels_conv[];
extern const mft__kernel_def mft__kernels_conv_fast[];
extern const mft__kernel_def mft__kernels_resize[];

const char *mft__op_name(mft__op_id op);

/* Runs op through the kernel tables: the user's kernels, then the built-in
 * tables of the op's family (NULL-terminated, fast kernels first; the
 * dispatcher knows no family: Note [Kernel tables]). fmt is the format the
 * op decided for its outputs (docs/spec.md §4); outputs are allocated by the
 * caller, packed in fmt, of dtype. Inputs with convert[k] set are converted to the kernel's packed
 * format when needed (counted). On a fallback the outputs are produced in
 * the kernel's format and converted back (counted). Errors: no kernel for
 * the dtype, strict-mode fallback, out of memory. */
mft_status mft__dispatch(const char *fn, const mft__kernel_def *const *tables, mft__op_id op,
                         mft_format fmt, mft_dtype dtype, int nin, const mft_tensor *const *in,
                         const bool *convert, int nout, mft_tensor *const *out,
                         const void *params);
/* The built-in kernels of every family, in search order (NULL-terminated;
 * ops/dispatch/kernel_index.c, for listings and the registry test). */
extern const mft__kernel_def *const mft__kernel_index[];
/* The user's kernels (mft_dispatch_register), read for listings: i in
 * [0, count). */
int mft__dispatch_user_count(void);
void mft__dispatch_user_get(int i, mft__kernel_def *k);

/* ---------------------------------------------------------------- autograd
 * Recording for the elementwise family (elementwise_backward.c): entry
 * points hand their fresh result to these, which record a node when an
 * input requires grad on a recording thread and return the result (NULL,
 * result released, if recording fails). op is the registry row (its kind
 * says whether the op is differentiable; its name names the node), fn the
 * public name an error while recording names ("mft_relu", "mft_add", ...). */
mft_tensor *mft__agew_unary(mft__op_id op, const char *fn, const mft_tensor *x, mft_tensor *y,
                            double p0, double p1);
mft_tensor *mft__agew_binary(mft__op_id op, const char *fn, const mft_tensor *a,
                             const mft_tensor *b, mft_tensor *c, double alpha);
mft_tensor *mft__agew_ternary(mft__op_id op, const char *fn, const mft_tensor *x,
                              const mft_tensor *a, const mft_tensor *b, mft_tensor *y,
                              double value);
/* The in-place / out= refusal while recording (MFT_ERR_UNSUPPORTED naming fn). */
mft_status mft__agew_check_into(const char *fn, const mft_tensor *out, int n,
                                const mft_tensor *const *inputs);

/* A built-in kernel that chose among algorithms reports this (static) name
 * for the current dispatch instead of its table name. */
void mft__dispatch_report_as(const char *name);

/* Note [Kernel scratch]
 * Kernels allocate their scratch (packed weights, tiles, partial sums) when
 * they run. A kernel whose scratch allocation fails must not compute the
 * result another way that rounds differently (the result would depend on
 * memory pressure and, with per-thread scratch, on the schedule): it calls
 * mft__kernel_nomem on the dispatching thread (after its parallel regions;
 * workers record the failure in their job, see mft__scratch_fail) and
 * returns, and mft__dispatch fails the op with MFT_ERR_NOMEM naming the
 * public function; the op releases its fresh outputs. Fallbacks that give
 * the same bits (another order of independent items) may still absorb it. */
void mft__kernel_nomem(size_t bytes);
/* True once the running kernel has called mft__kernel_nomem (a chain of
 * algorithms stops trying the next one). */
bool mft__kernel_failed(void);
/* For parallel workers: records a failed scratch allocation of `bytes` in
 * *flag (shared by the job; 0 = none) so that the driver can call
 * mft__kernel_nomem after the region. */
static inline void mft__scratch_fail(_Atomic long long *flag, size_t bytes) {
    atomic_store_explicit(flag, (long long)bytes, memory_order_relaxed);
}

/* ------------------------------------------------------------------ blocked fallback
 * Note [Blocked fallback] (ops/blocked_fallback.c). Usage, first statement
 * of an op whose operands are pointer variables x, w, b:
 *     MFT__BLOCKED_FALLBACK("conv2d", mft_conv2d(x, w, b, ...), 3, &x, &w, &b);
 * (MFT__BLOCKED_FALLBACK_STATUS for ops returning mft_status). */
#define MFT__UNBLOCK_MAX 8
typedef struct mft__unblock {
    int n;
    const char *op;
    const mft_tensor **slots[MFT__UNBLOCK_MAX];
    const mft_tensor *orig[MFT__UNBLOCK_MAX];
    mft_tensor *plain[MFT__UNBLOCK_MAX];
    const mft_tensor *lead;
    mft_format lead_tag;
    int lead_ndim;
} mft__unblock;
/* 0: no operand is blocked (nothing done); 1: the blocked ones now point
 * at plain copies; -1: a conversion failed (error set, nothing changed).
 * The n variadic arguments are const mft_tensor ** (NULL entries and NULL
 * tensors are skipped). */
int mft__unblock_begin(mft__unblock *u, const char *op, int n, ...);
/* Restores the caller's variables, converts result back (see the Note)
 * and returns it registered as a result. */
mft_tensor *mft__unblock_end(mft__unblock *u, mft_tensor *result);
mft_status mft__unblock_end_status(mft__unblock *u, mft_status st);
#define MFT__BLOCKED_FALLBACK(op, call, ...)                         \
    do {                                                             \
        mft__unblock u_;                                             \
        const int r_ = mft__unblock_begin(&u_, (op), __VA_ARGS__);   \
        if (r_ < 0) return NULL;                                     \
        if (r_ > 0) {                                                \
            mft__scope_suspend();                                    \
            mft_tensor *res_ = (call);                               \
            mft__scope_resume();                                     \
            return mft__unblock_end(&u_, res_);                      \
        }                                                            \
    } while (0)
#define MFT__BLOCKED_FALLBACK_STATUS(op, call, ...)                  \
    do {                                                             \
        mft__unblock u_;                                             \
        const int r_ = mft__unblock_begin(&u_, (op), __VA_ARGS__);   \
        if (r_ < 0) return mft_last_error();                         \
        if (r_ > 0) return mft__unblock_end_status(&u_, (call));     \
    } while (0)

#endif
