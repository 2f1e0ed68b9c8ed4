/* ops/elementwise/unary.c — unary elementwise ops, their scalar-parameter forms (x op s,
 * comparisons with a scalar, leaky_relu, clamp, hardtanh, pow_scalar) and
 * fill_/zero_. Each op is one expression per dtype family stamped into a
 * 2-D loop (contiguous inner fast path the compiler vectorises, strided
 * fallback); the driver in engine.c does checks, promotion and layout.
 * Integer arithmetic goes through the unsigned twin type so overflow wraps
 * (as PyTorch) instead of being undefined. Every differentiable entry point
 * hands its result to mft__agew_unary (ops/elementwise/backward.c), which
 * records the autograd node; fill_/zero_ refuse a target that requires grad
 * while the tape records. */
#include "autograd_internal.h"
#include "ops_internal.h"

/* elementwise_backward.c: records the node of a differentiable unary op */

/* ---------------------------------------------------------------- loops
 * UNARY_LOOP(op, D): out[i] = E_<op>_<F|I>(D, x) with x = in[i] of type T,
 * parameters p0, p1 (the op's doubles converted to T) and the raw doubles
 * prm[0], prm[1]. */
#define UNARY_LOOP(op, D, KIND)                                                                 \
    static void loop_##op##_##D(void *ctx, char **data, const int64_t *st, int64_t n0,           \
                                int64_t n1) {                                                   \
        typedef MFT__T_##D T;                                                                   \
        typedef MFT__UT_##D UT;                                                                 \
        const double *prm = ctx;                                                                \
        const T p0 = MFT__PARAM_##D(prm[0]), p1 = MFT__PARAM_##D(prm[1]);                      \
        (void)p0, (void)p1, (void)sizeof(UT);                                                   \
        /* everything in locals: stores through char * could alias data[] and st[] */          \
        char *const d0 = data[0];                                                               \
        const char *const d1 = data[1];                                                         \
        const int64_t so = st[0], sa = st[1], ro = st[2], ra = st[3];                           \
        for (int64_t j = 0; j < n1; j++) {                                                      \
            char *o = d0 + j * ro;                                                              \
            const char *a = d1 + j * ra;                                                        \
            if (so == (int64_t)sizeof(T) && sa == (int64_t)sizeof(T)) {                         \
                T *O = (T *)(void *)o;                                                          \
                const T *A = (const T *)(const void *)a;                                        \
                for (int64_t i = 0; i < n0; i++) {                                              \
                    const T x = A[i];                                                           \
                    O[i] = (T)(E_##op##_##KIND(D, x));                                          \
                }                                                                               \
            } else { /* Note [Buffered strided loops] */                                        \
                T xin[MFT__EW_BLOCK], yout[MFT__EW_BLOCK];                                       \
                const bool packed_out = so == (int64_t)sizeof(T);                               \
                for (int64_t i0 = 0; i0 < n0; i0 += MFT__EW_BLOCK) {                            \
                    const int64_t m = n0 - i0 < MFT__EW_BLOCK ? n0 - i0 : MFT__EW_BLOCK;        \
                    T *y = packed_out ? (T *)(void *)(o + i0 * so) : yout;                      \
                    mft__gather_##D(xin, a + i0 * sa, sa, m);                                   \
                    for (int64_t i = 0; i < m; i++) {                                           \
                        const T x = xin[i];                                                     \
                        y[i] = (T)(E_##op##_##KIND(D, x));                                      \
                    }                                                                           \
                    if (!packed_out)                                                            \
                        for (int64_t i = 0; i < m; i++)                                         \
                            *(T *)(void *)(o + (i0 + i) * so) = yout[i];                        \
                }                                                                               \
            }                                                                                   \
        }                                                                                       \
    }

/* Comparisons with a scalar: compute in T, store U8. */
#define CMP_LOOP(op, D, KIND)                                                                   \
    static void loop_##op##_##D(void *ctx, char **data, const int64_t *st, int64_t n0,           \
                                int64_t n1) {                                                   \
        typedef MFT__T_##D T;                                                                   \
        const double *prm = ctx;                                                                \
        const T p0 = MFT__PARAM_##D(prm[0]);                                                    \
        for (int64_t j = 0; j < n1; j++) {                                                      \
            char *o = data[0] + j * st[2];                                                      \
            const char *a = data[1] + j * st[3];                                                \
            const int64_t so = st[0], sa = st[1];                                               \
            for (int64_t i = 0; i < n0; i++) {                                                  \
                const T x = *(const T *)(const void *)(a + i * sa);                             \
                *(uint8_t *)(o + i * so) = (uint8_t)(E_##op##_##KIND(D, x));                    \
            }                                                                                   \
        }                                                                                       \
    }

/* Stampers: float-only ops, ops with float and integer forms, comparisons. */
#define STAMP_F(op) UNARY_LOOP(op, F32, F) UNARY_LOOP(op, F64, F)
#define STAMP_FI(op) STAMP_F(op) UNARY_LOOP(op, I32, I) UNARY_LOOP(op, I64, I) UNARY_LOOP(op, U8, I)
#define STAMP_CMP(op) \
    CMP_LOOP(op, F32, F) CMP_LOOP(op, F64, F) CMP_LOOP(op, I32, I) CMP_LOOP(op, I64, I) CMP_LOOP(op, U8, I)
#define LOOPS_F(op) {[MFT_F32] = loop_##op##_F32, [MFT_F64] = loop_##op##_F64}
#define LOOPS_FI(op)                                                                         \
    {[MFT_F32] = loop_##op##_F32, [MFT_F64] = loop_##op##_F64, [MFT_I32] = loop_##op##_I32, \
     [MFT_I64] = loop_##op##_I64, [MFT_U8] = loop_##op##_U8}

#define MF(D, f) MFT__MF_##D(f)
/* x < 0 for any integer type (a function, so U8 draws no "always false" warning) */
static inline bool unary_is_neg(int64_t v) { return v < 0; }
#define INEG(x) unary_is_neg((int64_t)(x))

/* ---------------------------------------------------------------- expressions */
#define E_neg_F(D, x) (-(x))
#define E_neg_I(D, x) ((UT)0 - (UT)(x))
#define E_abs_F(D, x) MF(D, fabs)(x)
#define E_abs_I(D, x) (INEG(x) ? (UT)0 - (UT)(x) : (UT)(x))
#define E_sqrt_F(D, x) MF(D, sqrt)(x)
#define E_rsqrt_F(D, x) ((T)1 / MF(D, sqrt)(x))
#define E_exp_F(D, x) MF(D, exp)(x)
#define E_log_F(D, x) MF(D, log)(x)
#define E_sin_F(D, x) MF(D, sin)(x)
#define E_cos_F(D, x) MF(D, cos)(x)
#define E_tanh_F(D, x) MF(D, tanh)(x)
#define E_sigmoid_F(D, x) ((T)1 / ((T)1 + MF(D, exp)(-(x))))
#define E_relu_F(D, x) ((x) < 0 ? (T)0 : (x)) /* NaN passes through */
#define E_relu_I(D, x) (INEG(x) ? (T)0 : (x))
#define E_gelu_F(D, x) ((T)0.5 * (x) * ((T)1 + MF(D, erf)((x) * (T)0.70710678118654752440)))
#define E_silu_F(D, x) ((x) / ((T)1 + MF(D, exp)(-(x))))
#define E_square_F(D, x) ((x) * (x))
#define E_square_I(D, x) ((UT)(x) * (UT)(x))
#define E_reciprocal_F(D, x) ((T)1 / (x))
#define E_sign_F(D, x) ((T)(((x) > 0) - ((x) < 0)))
#define E_sign_I(D, x) ((T)(((x) > 0) - INEG(x)))
#define E_floor_F(D, x) MF(D, floor)(x)
#define E_floor_I(D, x) (x)
#define E_ceil_F(D, x) MF(D, ceil)(x)
#define E_ceil_I(D, x) (x)
#define E_round_F(D, x) MF(D, nearbyint)(x) /* default rounding mode: half to even */
#define E_round_I(D, x) (x)

#define E_add_scalar_F(D, x) ((x) + p0)
#define E_add_scalar_I(D, x) ((UT)(x) + (UT)p0)
#define E_sub_scalar_F(D, x) ((x) - p0)
#define E_sub_scalar_I(D, x) ((UT)(x) - (UT)p0)
#define E_rsub_scalar_F(D, x) (p0 - (x))
#define E_rsub_scalar_I(D, x) ((UT)p0 - (UT)(x))
#define E_mul_scalar_F(D, x) ((x) * p0)
#define E_mul_scalar_I(D, x) ((UT)(x) * (UT)p0)
#define E_div_scalar_F(D, x) ((x) / p0)
#define E_maximum_scalar_F(D, x) (((x) != (x) || (x) > p0) ? (x) : p0)
#define E_maximum_scalar_I(D, x) ((x) > p0 ? (x) : p0)
#define E_minimum_scalar_F(D, x) (((x) != (x) || (x) < p0) ? (x) : p0)
#define E_minimum_scalar_I(D, x) ((x) < p0 ? (x) : p0)
#define E_pow_scalar_F(D, x) MF(D, pow)((x), p0)
#define E_pow_scalar_I(D, x) mft__ipow((int64_t)(x), mft__param_i64(prm[0]))
#define E_leaky_relu_F(D, x) ((x) > 0 ? (x) : (x) * p0)
/* min(max(x, lo), hi): lo > hi gives hi, NaN stays NaN (as PyTorch) */
#define E_clamp_F(D, x) ((((x) < p0) ? p0 : (x)) > p1 ? p1 : (((x) < p0) ? p0 : (x)))
#define E_clamp_I E_clamp_F
#define E_hardtanh_F E_clamp_F
#define E_hardtanh_I E_clamp_F
#define E_eq_scalar_F(D, x) ((x) == p0)
#define E_eq_scalar_I E_eq_scalar_F
#define E_ne_scalar_F(D, x) ((x) != p0)
#define E_ne_scalar_I E_ne_scalar_F
#define E_lt_scalar_F(D, x) ((x) < p0)
#define E_lt_scalar_I E_lt_scalar_F
#define E_le_scalar_F(D, x) ((x) <= p0)
#define E_le_scalar_I E_le_scalar_F
#define E_gt_scalar_F(D, x) ((x) > p0)
#define E_gt_scalar_I E_gt_scalar_F
#define E_ge_scalar_F(D, x) ((x) >= p0)
#define E_ge_scalar_I E_ge_scalar_F

/* clamp on integers: compare in the parameter's integer value; a float bound
 * promotes the op to F32 (scalar_promotes = 2), so p0/p1 are exact here. */

STAMP_FI(neg) STAMP_FI(abs) STAMP_F(sqrt) STAMP_F(rsqrt) STAMP_F(exp) STAMP_F(log)
STAMP_F(sin) STAMP_F(cos) STAMP_F(tanh) STAMP_F(sigmoid) STAMP_FI(relu) STAMP_F(gelu)
STAMP_F(silu) STAMP_FI(square) STAMP_F(reciprocal) STAMP_FI(sign) STAMP_FI(floor)
STAMP_FI(ceil) STAMP_FI(round)
STAMP_FI(add_scalar) STAMP_FI(sub_scalar) STAMP_FI(rsub_scalar) STAMP_FI(mul_scalar)
STAMP_F(div_scalar) STAMP_FI(maximum_scalar) STAMP_FI(minimum_scalar) STAMP_FI(pow_scalar)
STAMP_F(leaky_relu) STAMP_FI(clamp) STAMP_FI(hardtanh)
STAMP_CMP(eq_scalar) STAMP_CMP(ne_scalar) STAMP_CMP(lt_scalar) STAMP_CMP(le_scalar)
STAMP_CMP(gt_scalar) STAMP_CMP(ge_scalar)

/* ---------------------------------------------------------------- op table */
#define OP(op, rule, nsc, fonly, loops) \
    static const mft__ew_op op_##op = {"mft_" #op, 1, rule, nsc, fonly, false, loops, false};
/* x op s where PyTorch wraps s as a 0-dim tensor operand; OPW: the integer
 * result is exact modulo 2^bits for any s (Note [Integer scalars]) */
#define OPS(op, rule, loops) \
    static const mft__ew_op op_##op = {"mft_" #op, 1, rule, 1, false, true, loops, false};
#define OPW(op, rule, loops) \
    static const mft__ew_op op_##op = {"mft_" #op, 1, rule, 1, false, true, loops, true};
OP(neg, MFT__EW_SAME, 0, false, LOOPS_FI(neg))
OP(abs, MFT__EW_SAME, 0, false, LOOPS_FI(abs))
OP(sqrt, MFT__EW_FLOAT, 0, false, LOOPS_F(sqrt))
OP(rsqrt, MFT__EW_FLOAT, 0, false, LOOPS_F(rsqrt))
OP(exp, MFT__EW_FLOAT, 0, false, LOOPS_F(exp))
OP(log, MFT__EW_FLOAT, 0, false, LOOPS_F(log))
OP(sin, MFT__EW_FLOAT, 0, false, LOOPS_F(sin))
OP(cos, MFT__EW_FLOAT, 0, false, LOOPS_F(cos))
OP(tanh, MFT__EW_FLOAT, 0, false, LOOPS_F(tanh))
OP(sigmoid, MFT__EW_FLOAT, 0, false, LOOPS_F(sigmoid))
OP(relu, MFT__EW_SAME, 0, false, LOOPS_FI(relu))
OP(gelu, MFT__EW_FLOAT, 0, false, LOOPS_F(gelu))
OP(silu, MFT__EW_FLOAT, 0, false, LOOPS_F(silu))
OP(square, MFT__EW_SAME, 0, false, LOOPS_FI(square))
OP(reciprocal, MFT__EW_FLOAT, 0, false, LOOPS_F(reciprocal))
OP(sign, MFT__EW_SAME, 0, false, LOOPS_FI(sign))
OP(floor, MFT__EW_SAME, 0, false, LOOPS_FI(floor))
OP(ceil, MFT__EW_SAME, 0, false, LOOPS_FI(ceil))
OP(round, MFT__EW_SAME, 0, false, LOOPS_FI(round))
OPW(add_scalar, MFT__EW_SAME, LOOPS_FI(add_scalar))
OPW(sub_scalar, MFT__EW_SAME, LOOPS_FI(sub_scalar))
OPW(rsub_scalar, MFT__EW_SAME, LOOPS_FI(rsub_scalar))
OPW(mul_scalar, MFT__EW_SAME, LOOPS_FI(mul_scalar))
OPS(div_scalar, MFT__EW_FLOAT, LOOPS_F(div_scalar))
OPS(maximum_scalar, MFT__EW_SAME, LOOPS_FI(maximum_scalar))
OPS(minimum_scalar, MFT__EW_SAME, LOOPS_FI(minimum_scalar))
OP(pow_scalar, MFT__EW_SAME, 1, false, LOOPS_FI(pow_scalar))
OP(leaky_relu, MFT__EW_SAME, 0, true, LOOPS_F(leaky_relu))
OP(clamp, MFT__EW_SAME, 2, false, LOOPS_FI(clamp))
OP(hardtanh, MFT__EW_SAME, 2, false, LOOPS_FI(hardtanh))
OPS(eq_scalar, MFT__EW_COMPARE, LOOPS_FI(eq_scalar))
OPS(ne_scalar, MFT__EW_COMPARE, LOOPS_FI(ne_scalar))
OPS(lt_scalar, MFT__EW_COMPARE, LOOPS_FI(lt_scalar))
OPS(le_scalar, MFT__EW_COMPARE, LOOPS_FI(le_scalar))
OPS(gt_scalar, MFT__EW_COMPARE, LOOPS_FI(gt_scalar))
OPS(ge_scalar, MFT__EW_COMPARE, LOOPS_FI(ge_scalar))

/* ---------------------------------------------------------------- entry points */
#define DEFINE_UNARY(op)                                                                 \
    mft_tensor *mft_##op(const mft_tensor *x) {                                          \
        const mft_tensor *in[1] = {x};                                                   \
        return mft__agew_unary(MFT__OPN_##op, "mft_" #op, x, mft__ew_run(&op_##op, in, NULL), 0, 0);           \
    }                                                                                    \
    mft_status mft_##op##_(mft_tensor *x) {                                              \
        const mft_tensor *in[1] = {x};                                                   \
        return mft__ew_run_into(&op_##op, "mft_" #op "_", x, in, NULL);                  \
    }                                                                                    \
    mft_status mft_##op##_out(mft_tensor *out, const mft_tensor *x) {                    \
        const mft_tensor *in[1] = {x};                                                   \
        return mft__ew_run_into(&op_##op, "mft_" #op "_out", out, in, NULL);             \
    }
MFT_UNARY_OPS(DEFINE_UNARY)

/* pow_scalar: integer bases with a negative integral exponent are refused
 * (PyTorch: "Integers to negative integer powers are not allowed"). */
static bool unary_check_param(const char *fn, const mft__ew_op *op, const mft_tensor *x, double s) {
    if (op == &op_pow_scalar && x && !mft__is_float(x->dtype) && mft__scalar_is_int(s) && s < 0) {
        mft__set_error(MFT_ERR_INVALID,
                       "%s: integer tensor (%s) to the negative integer power %g is not allowed",
                       fn, mft_dtype_name(x->dtype), s);
        return false;
    }
    return true;
}

#define DEFINE_SCALAR(op)                                                                  \
    mft_tensor *mft_##op(const mft_tensor *x, double s) {                                  \
        const mft_tensor *in[1] = {x};                                                     \
        const double prm[2] = {s, 0};                                                      \
        if (!unary_check_param("mft_" #op, &op_##op, x, s)) return NULL;                   \
        return mft__agew_unary(MFT__OPN_##op, "mft_" #op, x, mft__ew_run(&op_##op, in, prm), s, 0);              \
    }                                                                                      \
    mft_status mft_##op##_(mft_tensor *x, double s) {                                      \
        const mft_tensor *in[1] = {x};                                                     \
        const double prm[2] = {s, 0};                                                      \
        if (!unary_check_param("mft_" #op "_", &op_##op, x, s)) return MFT_ERR_INVALID;    \
        return mft__ew_run_into(&op_##op, "mft_" #op "_", x, in, prm);                     \
    }                                                                                      \
    mft_status mft_##op##_out(mft_tensor *out, const mft_tensor *x, double s) {            \
        const mft_tensor *in[1] = {x};                                                     \
        const double prm[2] = {s, 0};                                                      \
        if (!unary_check_param("mft_" #op "_out", &op_##op, x, s)) return MFT_ERR_INVALID; \
        return mft__ew_run_into(&op_##op, "mft_" #op "_out", out, in, prm);                \
    }
MFT_SCALAR_OPS(DEFINE_SCALAR)

static bool unary_check_range(const char *fn, double lo, double hi, bool ordered) {
    if (lo != lo || hi != hi || (ordered && lo > hi)) {
        mft__set_error(MFT_ERR_INVALID, "%s: bounds lo %g, hi %g are invalid%s", fn, lo, hi,
                       ordered ? " (need lo <= hi)" : " (NaN)");
        return false;
    }
    return true;
}

#define DEFINE_RANGE(op, ordered)                                                             \
    mft_tensor *mft_##op(const mft_tensor *x, double lo, double hi) {                         \
        const mft_tensor *in[1] = {x};                                                        \
        const double prm[2] = {lo, hi};                                                       \
        if (!unary_check_range("mft_" #op, lo, hi, ordered)) return NULL;                     \
        return mft__agew_unary(MFT__OPN_##op, "mft_" #op, x, mft__ew_run(&op_##op, in, prm), lo, hi);               \
    }                                                                                         \
    mft_status mft_##op##_(mft_tensor *x, double lo, double hi) {                             \
        const mft_tensor *in[1] = {x};                                                        \
        const double prm[2] = {lo, hi};                                                       \
        if (!unary_check_range("mft_" #op "_", lo, hi, ordered)) return MFT_ERR_INVALID;      \
        return mft__ew_run_into(&op_##op, "mft_" #op "_", x, in, prm);                        \
    }                                                                                         \
    mft_status mft_##op##_out(mft_tensor *out, const mft_tensor *x, double lo, double hi) {   \
        const mft_tensor *in[1] = {x};                                                        \
        const double prm[2] = {lo, hi};                                                       \
        if (!unary_check_range("mft_" #op "_out", lo, hi, ordered)) return MFT_ERR_INVALID;   \
        return mft__ew_run_into(&op_##op, "mft_" #op "_out", out, in, prm);                   \
    }
DEFINE_RANGE(clamp, false)
DEFINE_RANGE(hardtanh, true)

/* ---------------------------------------------------------------- fill */
mft_status mft_fill_(mft_tensor *t, double value) {
    if (!t) {
        mft__null_arg("mft_fill_", "t");
        return MFT_ERR_NULL;
    }
    mft_status st = mft__ag_check_inplace("mft_fill_", t);
    if (st != MFT_OK) return st;
    st = mft__check_int_value("mft_fill_", "value", t->dtype, value);
    if (st != MFT_OK) return st;
    st = mft__check_writable("mft_fill_", t);
    if (st != MFT_OK) return st;
    if (t->numel) mft__fill(t, value);
    return MFT_OK;
}

mft_status mft_zero_(mft_tensor *t) {
    if (!t) {
        mft__null_arg("mft_zero_", "t");
        return MFT_ERR_NULL;
    }
    mft_status st = mft__ag_check_inplace("mft_zero_", t);
    if (st != MFT_OK) return st;
    st = mft__check_writable("mft_zero_", t);
    if (st != MFT_OK) return st;
    if (t->numel) mft__fill(t, 0.0);
    return MFT_OK;
}
