/* mft/ops.h — operators. This part: the elementwise engine (unary, binary,
 * ternary, comparisons, in-place and _out variants, fill) and reductions.
 *
 * Shapes: binary and ternary ops broadcast as NumPy/PyTorch (right-aligned,
 * size-1 dims stretch). Ownership: functions returning mft_tensor * return a
 * NEW reference or NULL with the thread-local error set; inputs are borrowed;
 * a NULL input yields NULL and keeps the first error (docs/architecture.md §3).
 *
 * Output layout of a fresh result (docs/spec.md §4, as PyTorch's TensorIterator):
 *   - if all tensor operands have the same sizes and are all contiguous, all
 *     channels-last contiguous, or all dense with identical strides: that
 *     layout. The scalar forms of binary ops (x + s, x < s, ...) count s as
 *     a 0-dim operand (PyTorch's wrapped number), so they never take this
 *     path; unary ops with parameters (clamp, leaky_relu, pow_scalar) do;
 *   - otherwise dims are ordered by the operands' strides (operands in
 *     argument order, broadcast dims skipped, the first operand that decides
 *     wins, ties put the larger dim outward) and the result is packed in
 *     that order. So NHWC ⊕ scalar / (1,C,1,1) / (H,W) stays NHWC, NHWC ⊕ NCHW
 *     is NHWC and NCHW ⊕ NHWC is NCHW.
 *   - the tag is read from the result's strides; when they fit both formats
 *     (C == 1, H == W == 1, ...) the tag of the first tensor argument (in
 *     argument order, 0-dim tensors included; cond for where) is kept.
 *
 * dtypes (as PyTorch's type promotion, over F32, F64, I32, I64, U8):
 *   - tensors with dims outrank 0-dim tensors, which outrank scalars; within
 *     a group types promote (U8 < I32 < I64 < F32 < F64, any float wins);
 *     a lower group only matters when it is floating and the higher group is
 *     not: then the two promote (I32 tensor + F64 0-dim tensor -> F64,
 *     U8 tensor + I64 0-dim tensor -> U8, F32 tensor + F64 0-dim -> F32);
 *   - a float scalar promotes an integer tensor to F32 (the default dtype);
 *   - a double scalar counts as an integer scalar when its value is integral
 *     and finite, else as a float scalar: mft_mul_scalar(i32, 2) is I32,
 *     mft_mul_scalar(i32, 0.5) is F32 (PyTorch's `x * 2` vs `x * 0.5`);
 *   - "floating" unary ops (sqrt, exp, log, sin, cos, tanh, sigmoid, gelu,
 *     silu, rsqrt, reciprocal) and div turn integer inputs into F32;
 *   - comparisons compute in the promoted type and return U8 (0 or 1).
 *
 * In place (`mft_<op>_(a, ...)`, returns mft_status): the result is written
 * into a, which keeps its strides and tag. Out variants (`mft_<op>_out(out,
 * ...)`): out must already have the broadcast sizes (never resized) and keeps
 * its strides and tag. Errors, with the destination untouched: sizes that do
 * not broadcast or would grow the destination, a destination with a stride-0
 * dim of size > 1 or that may overlap itself, a destination partially
 * overlapping an input (an identical view is fine), a result dtype the
 * destination cannot hold (float into an integer tensor).
 *
 * Autograd (mft/autograd.h): every op here records a node when an input
 * requires grad on a recording thread, except the comparisons and argmax
 * (not differentiable). sign, floor, ceil and round give zero gradients;
 * relu/clamp/hardtanh/leaky_relu and maximum/minimum (ties split half/half,
 * the scalar forms too) and amax/amin (ties share evenly) follow PyTorch's
 * conventions. While recording, in-place variants, mft_fill_ and mft_zero_
 * refuse a destination that requires grad, and _out variants refuse inputs
 * that require grad (MFT_ERR_UNSUPPORTED, as PyTorch refuses out=). */
#ifndef MFT_OPS_H
#define MFT_OPS_H

#include <stdbool.h>
#include <stdint.h>
#include "mft/export.h"
#include "mft/registry.h"
#include "mft/status.h"
#include "mft/tensor.h"
#include "mft/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ dtypes */
/* The dtype PyTorch's promotion gives for these tensors (any may be 0-dim)
 * and, if has_scalar, one scalar of value `scalar`. NULL tensors are
 * MFT_ERR_NULL (returns MFT_DTYPE_COUNT). */
MFT_API mft_dtype mft_result_type(int n, const mft_tensor *const *ts, bool has_scalar,
                                  double scalar);
/* PyTorch's can_cast: false for a float into an integer type. */
MFT_API bool mft_can_cast(mft_dtype from, mft_dtype to);

/* ------------------------------------------------------------------ unary
 * y = f(x), same sizes. Each op X of sig UNARY in the registry
 * (mft/registry.h, MFT_UNARY_OPS) has mft_X(x), mft_X_(x) and
 * mft_X_out(out, x).
 *   neg abs square sign floor ceil round(half to even) relu: keep the dtype
 *   sqrt rsqrt exp log sin cos tanh sigmoid gelu(erf form) silu reciprocal:
 *   integer inputs compute in F32. */
#define MFT_DECLARE_UNARY_(name)                                                  \
    MFT_API mft_tensor *mft_##name(const mft_tensor *x);                          \
    MFT_API mft_status mft_##name##_(mft_tensor *x);                              \
    MFT_API mft_status mft_##name##_out(mft_tensor *out, const mft_tensor *x);
MFT_UNARY_OPS(MFT_DECLARE_UNARY_)
#undef MFT_DECLARE_UNARY_

/* Unary ops with parameters (same three variants each):
 *   leaky_relu(x, slope):  x > 0 ? x : slope * x (floating types only)
 *   clamp(x, lo, hi):      min(max(x, lo), hi) (NaN stays NaN; lo > hi gives hi, as
 *                          PyTorch); both bounds take part in promotion, so an
 *                          integer x with a non-integral bound gives F32
 *   hardtanh(x, lo, hi):   clamp with lo <= hi required
 *   pow_scalar(x, p):      x ** p (integer x with a non-integral p computes in F32;
 *                          integer x with a negative integral p is MFT_ERR_INVALID)
 * and the scalar forms of the binary ops (x op s): add/sub/mul/div/maximum/
 * minimum/pow/rsub (s - x), plus comparisons eq/ne/lt/le/gt/ge (U8 result). */
#define MFT_DECLARE_SCALAR_(name)                                                 \
    MFT_API mft_tensor *mft_##name(const mft_tensor *x, double s);                \
    MFT_API mft_status mft_##name##_(mft_tensor *x, double s);                    \
    MFT_API mft_status mft_##name##_out(mft_tensor *out, const mft_tensor *x, double s);
MFT_SCALAR_OPS(MFT_DECLARE_SCALAR_)
#undef MFT_DECLARE_SCALAR_
MFT_API mft_tensor *mft_clamp(const mft_tensor *x, double lo, double hi);
MFT_API mft_status mft_clamp_(mft_tensor *x, double lo, double hi);
MFT_API mft_status mft_clamp_out(mft_tensor *out, const mft_tensor *x, double lo, double hi);
MFT_API mft_tensor *mft_hardtanh(const mft_tensor *x, double lo, double hi);
MFT_API mft_status mft_hardtanh_(mft_tensor *x, double lo, double hi);
MFT_API mft_status mft_hardtanh_out(mft_tensor *out, const mft_tensor *x, double lo, double hi);

/* ------------------------------------------------------------------ binary
 * c = a op b with broadcasting and promotion. div is true division (integer
 * inputs give F32); pow of integers stays integer (negative exponents give
 * 0 unless the base is +-1, as PyTorch); maximum/minimum propagate NaN.
 * Comparisons eq ne lt le gt ge return U8. */
#define MFT_DECLARE_BINARY_(name)                                                        \
    MFT_API mft_tensor *mft_##name(const mft_tensor *a, const mft_tensor *b);            \
    MFT_API mft_status mft_##name##_(mft_tensor *a, const mft_tensor *b);                \
    MFT_API mft_status mft_##name##_out(mft_tensor *out, const mft_tensor *a, const mft_tensor *b);
MFT_BINARY_OPS(MFT_DECLARE_BINARY_)
#undef MFT_DECLARE_BINARY_
/* a + alpha * b (PyTorch's add with alpha); an integer result needs an
 * integral alpha. */
MFT_API mft_tensor *mft_add_alpha(const mft_tensor *a, const mft_tensor *b, double alpha);
MFT_API mft_status mft_add_alpha_(mft_tensor *a, const mft_tensor *b, double alpha);
MFT_API mft_status mft_add_alpha_out(mft_tensor *out, const mft_tensor *a, const mft_tensor *b,
                                     double alpha);

/* ------------------------------------------------------------------ ternary */
/* cond ? a : b elementwise; cond is any dtype (non-zero = true); the result
 * has the promoted dtype of a and b. */
MFT_API mft_tensor *mft_where(const mft_tensor *cond, const mft_tensor *a, const mft_tensor *b);
MFT_API mft_status mft_where_out(mft_tensor *out, const mft_tensor *cond, const mft_tensor *a,
                                 const mft_tensor *b);
/* x + value * a * b */
MFT_API mft_tensor *mft_addcmul(const mft_tensor *x, const mft_tensor *a, const mft_tensor *b,
                                double value);
MFT_API mft_status mft_addcmul_(mft_tensor *x, const mft_tensor *a, const mft_tensor *b,
                                double value);
MFT_API mft_status mft_addcmul_out(mft_tensor *out, const mft_tensor *x, const mft_tensor *a,
                                   const mft_tensor *b, double value);
/* start + weight * (end - start); floating dtypes only, and no promotion:
 * end and weight must have start's dtype (as PyTorch). */
MFT_API mft_tensor *mft_lerp(const mft_tensor *start, const mft_tensor *end,
                             const mft_tensor *weight);
MFT_API mft_status mft_lerp_(mft_tensor *start, const mft_tensor *end, const mft_tensor *weight);
MFT_API mft_tensor *mft_lerp_scalar(const mft_tensor *start, const mft_tensor *end, double weight);
MFT_API mft_status mft_lerp_scalar_(mft_tensor *start, const mft_tensor *end, double weight);

/* ------------------------------------------------------------------ fill */
/* Every element of t (through its strides) := value. Errors: a stride-0 dim
 * of size > 1. Bumps the version counter. */
MFT_API mft_status mft_fill_(mft_tensor *t, double value);
MFT_API mft_status mft_zero_(mft_tensor *t);

/* ------------------------------------------------------------------ reductions
 * dims: ndims entries (negative allowed, no repeats); ndims == 0 reduces over
 * every dim. keepdim keeps reduced dims as size 1: the result is then packed
 * in the input's tag (docs/spec.md §4; deviation: PyTorch 1.13 returns contiguous);
 * without keepdim it is contiguous. Reducing a size-0 dim: sum 0, mean NaN,
 * amax/amin/argmax error. Parallel reductions combine per-thread partials in
 * chunk order: results are reproducible for a given thread count.
 *   sum: integer inputs sum in I64 (PyTorch); F32 accumulates in F64.
 *   mean/var/std: floating inputs only (MFT_ERR_DTYPE otherwise).
 *   var/std: correction = 1 is the unbiased estimator (PyTorch's default).
 *   amax/amin: keep the dtype; NaN propagates.
 *   argmax: one dim (dim), index of the first maximum, I64 result. */
MFT_API mft_tensor *mft_sum(const mft_tensor *x, int ndims, const int *dims, bool keepdim);
MFT_API mft_tensor *mft_mean(const mft_tensor *x, int ndims, const int *dims, bool keepdim);
MFT_API mft_tensor *mft_amax(const mft_tensor *x, int ndims, const int *dims, bool keepdim);
MFT_API mft_tensor *mft_amin(const mft_tensor *x, int ndims, const int *dims, bool keepdim);
MFT_API mft_tensor *mft_var(const mft_tensor *x, int ndims, const int *dims, double correction,
                            bool keepdim);
MFT_API mft_tensor *mft_std(const mft_tensor *x, int ndims, const int *dims, double correction,
                            bool keepdim);
MFT_API mft_tensor *mft_argmax(const mft_tensor *x, int dim, bool keepdim);
/* Sums x down to sizes (which x must broadcast from): the gradient of a
 * broadcast. Returns x itself (new reference) when the sizes already match. */
MFT_API mft_tensor *mft_sum_to_size(const mft_tensor *x, int ndim, const int64_t *sizes);

#ifdef __cplusplus
}
#endif
#endif
