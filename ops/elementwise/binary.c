/* ops/elementwise/binary.c — binary elementwise ops with broadcasting: add, sub, mul,
 * div, maximum, minimum, pow, the comparisons (U8 results) and add with
 * alpha, each with in-place and _out variants. Loops have four paths: all
 * rows packed, one operand a broadcast scalar row (stride 0: the per-channel
 * bias of an NCHW tensor), and the strided fallback. Differentiable entry
 * points record through mft__agew_binary (ops/elementwise/backward.c). */
#include "ops_internal.h"

/* elementwise_backward.c: records the node of a differentiable binary op */

#define BINARY_LOOP(op, D, KIND, OT)                                                           \
    static void loop_##op##_##D(void *ctx, char **data, const int64_t *st, int64_t n0,          \
                                int64_t n1) {                                                  \
        typedef MFT__T_##D T;                                                                  \
        typedef MFT__UT_##D UT;                                                                \
        const double *prm = ctx;                                                               \
        const T p0 = MFT__PARAM_##D(prm[0]);                                                   \
        (void)p0, (void)sizeof(UT);                                                            \
        const int64_t es = (int64_t)sizeof(T), os = (int64_t)sizeof(OT);                       \
        /* everything in locals: stores through char * could alias data[] and st[] */         \
        char *const d0 = data[0];                                                              \
        const char *const d1 = data[1], *const d2 = data[2];                                   \
        const int64_t so = st[0], sa = st[1], sb = st[2], ro = st[3], ra = st[4], rb = st[5];  \
        for (int64_t j = 0; j < n1; j++) {                                                     \
            char *o = d0 + j * ro;                                                             \
            const char *pa = d1 + j * ra, *pb = d2 + j * rb;                                   \
            OT *O = (OT *)(void *)o;                                                           \
            const T *A = (const T *)(const void *)pa, *B = (const T *)(const void *)pb;        \
            if (so == os && sa == es && sb == es) {                                   \
                for (int64_t i = 0; i < n0; i++) {                                             \
                    const T a = A[i], b = B[i];                                                \
                    O[i] = (OT)(E_##op##_##KIND(D, a, b));                                     \
                }                                                                              \
            } else if (so == os && sa == es && sb == 0) {                             \
                const T b = B[0];                                                              \
                for (int64_t i = 0; i < n0; i++) {                                             \
                    const T a = A[i];                                                          \
                    O[i] = (OT)(E_##op##_##KIND(D, a, b));                                     \
                }                                                                              \
            } else if (so == os && sa == 0 && sb == es) {                             \
                const T a = A[0];                                                              \
                for (int64_t i = 0; i < n0; i++) {                                             \
                    const T b = B[i];                                                          \
                    O[i] = (OT)(E_##op##_##KIND(D, a, b));                                     \
                }                                                                              \
            } else { /* Note [Buffered strided loops] */                                       \
                T ain[MFT__EW_BLOCK], bin[MFT__EW_BLOCK];                                      \
                OT yout[MFT__EW_BLOCK];                                                        \
                const bool packed_out = so == os;                                              \
                for (int64_t i0 = 0; i0 < n0; i0 += MFT__EW_BLOCK) {                           \
                    const int64_t m = n0 - i0 < MFT__EW_BLOCK ? n0 - i0 : MFT__EW_BLOCK;       \
                    OT *y = packed_out ? (OT *)(void *)(o + i0 * so) : yout;                   \
                    /* packed operands are read in place, strided ones gathered */           \
                    const T *xa = sa == es ? (const T *)(const void *)(pa + i0 * sa) : ain;    \
                    const T *xb = sb == es ? (const T *)(const void *)(pb + i0 * sb) : bin;    \
                    if (sa != es) mft__gather_##D(ain, pa + i0 * sa, sa, m);                   \
                    if (sb != es) mft__gather_##D(bin, pb + i0 * sb, sb, m);                   \
                    for (int64_t i = 0; i < m; i++) {                                          \
                        const T a = xa[i], b = xb[i];                                          \
                        y[i] = (OT)(E_##op##_##KIND(D, a, b));                                 \
                    }                                                                          \
                    if (!packed_out)                                                           \
                        for (int64_t i = 0; i < m; i++)                                        \
                            *(OT *)(void *)(o + (i0 + i) * so) = yout[i];                      \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
    }

#define STAMP_F(op) BINARY_LOOP(op, F32, F, float) BINARY_LOOP(op, F64, F, double)
#define STAMP_FI(op)                                                                 \
    STAMP_F(op) BINARY_LOOP(op, I32, I, int32_t) BINARY_LOOP(op, I64, I, int64_t)    \
        BINARY_LOOP(op, U8, I, uint8_t)
#define STAMP_CMP(op)                                                                \
    BINARY_LOOP(op, F32, F, uint8_t) BINARY_LOOP(op, F64, F, uint8_t)                \
    BINARY_LOOP(op, I32, I, uint8_t) BINARY_LOOP(op, I64, I, uint8_t) BINARY_LOOP(op, U8, I, uint8_t)
#define LOOPS_F(op) {[MFT_F32] = loop_##op##_F32, [MFT_F64] = loop_##op##_F64}
#define LOOPS_FI(op)                                                                         \
    {[MFT_F32] = loop_##op##_F32, [MFT_F64] = loop_##op##_F64, [MFT_I32] = loop_##op##_I32, \
     [MFT_I64] = loop_##op##_I64, [MFT_U8] = loop_##op##_U8}

#define E_add_F(D, a, b) ((a) + (b))
#define E_add_I(D, a, b) ((UT)(a) + (UT)(b))
#define E_sub_F(D, a, b) ((a) - (b))
#define E_sub_I(D, a, b) ((UT)(a) - (UT)(b))
#define E_mul_F(D, a, b) ((a) * (b))
#define E_mul_I(D, a, b) ((UT)(a) * (UT)(b))
#define E_div_F(D, a, b) ((a) / (b))
#define E_maximum_F(D, a, b) (((a) != (a) || (a) > (b)) ? (a) : (b))
#define E_maximum_I(D, a, b) ((a) > (b) ? (a) : (b))
#define E_minimum_F(D, a, b) (((a) != (a) || (a) < (b)) ? (a) : (b))
#define E_minimum_I(D, a, b) ((a) < (b) ? (a) : (b))
#define E_pow_F(D, a, b) MFT__MF_##D(pow)((a), (b))
#define E_pow_I(D, a, b) mft__ipow((int64_t)(a), (int64_t)(b))
#define E_add_alpha_F(D, a, b) ((a) + p0 * (b))
#define E_add_alpha_I(D, a, b) ((UT)(a) + (UT)p0 * (UT)(b))
#define E_eq_F(D, a, b) ((a) == (b))
#define E_eq_I E_eq_F
#define E_ne_F(D, a, b) ((a) != (b))
#define E_ne_I E_ne_F
#define E_lt_F(D, a, b) ((a) < (b))
#define E_lt_I E_lt_F
#define E_le_F(D, a, b) ((a) <= (b))
#define E_le_I E_le_F
#define E_gt_F(D, a, b) ((a) > (b))
#define E_gt_I E_gt_F
#define E_ge_F(D, a, b) ((a) >= (b))
#define E_ge_I E_ge_F

STAMP_FI(add) STAMP_FI(sub) STAMP_FI(mul) STAMP_F(div) STAMP_FI(maximum) STAMP_FI(minimum)
STAMP_FI(pow) STAMP_FI(add_alpha)
STAMP_CMP(eq) STAMP_CMP(ne) STAMP_CMP(lt) STAMP_CMP(le) STAMP_CMP(gt) STAMP_CMP(ge)

#define OP(op, rule, loops) \
    static const mft__ew_op op_##op = {"mft_" #op, 2, rule, 0, false, false, loops, false};
OP(add, MFT__EW_SAME, LOOPS_FI(add))
OP(sub, MFT__EW_SAME, LOOPS_FI(sub))
OP(mul, MFT__EW_SAME, LOOPS_FI(mul))
OP(div, MFT__EW_FLOAT, LOOPS_F(div))
OP(maximum, MFT__EW_SAME, LOOPS_FI(maximum))
OP(minimum, MFT__EW_SAME, LOOPS_FI(minimum))
OP(pow, MFT__EW_SAME, LOOPS_FI(pow))
OP(add_alpha, MFT__EW_SAME, LOOPS_FI(add_alpha))
OP(eq, MFT__EW_COMPARE, LOOPS_FI(eq))
OP(ne, MFT__EW_COMPARE, LOOPS_FI(ne))
OP(lt, MFT__EW_COMPARE, LOOPS_FI(lt))
OP(le, MFT__EW_COMPARE, LOOPS_FI(le))
OP(gt, MFT__EW_COMPARE, LOOPS_FI(gt))
OP(ge, MFT__EW_COMPARE, LOOPS_FI(ge))

#define DEFINE_BINARY(op)                                                                    \
    mft_tensor *mft_##op(const mft_tensor *a, const mft_tensor *b) {                         \
        const mft_tensor *in[2] = {a, b};                                                    \
        return mft__agew_binary(MFT__OPN_##op, "mft_" #op, a, b, mft__ew_run(&op_##op, in, NULL), 0);              \
    }                                                                                        \
    mft_status mft_##op##_(mft_tensor *a, const mft_tensor *b) {                             \
        const mft_tensor *in[2] = {a, b};                                                    \
        return mft__ew_run_into(&op_##op, "mft_" #op "_", a, in, NULL);                      \
    }                                                                                        \
    mft_status mft_##op##_out(mft_tensor *out, const mft_tensor *a, const mft_tensor *b) {   \
        const mft_tensor *in[2] = {a, b};                                                    \
        return mft__ew_run_into(&op_##op, "mft_" #op "_out", out, in, NULL);                 \
    }
MFT_BINARY_OPS(DEFINE_BINARY)

/* An integer result needs an integral alpha (PyTorch: "For integral input
 * tensors, argument alpha must not be a floating point number"). */
static bool binary_check_alpha(const char *fn, const mft_tensor *a, const mft_tensor *b,
                               double alpha) {
    if (!a || !b) return true; /* the driver reports the NULL */
    const mft_tensor *in[2] = {a, b};
    mft_dtype t = mft_result_type(2, in, false, 0.0);
    if (!mft__is_float(t) && !mft__scalar_is_int(alpha)) {
        mft__set_error(MFT_ERR_INVALID, "%s: alpha %g must be integral for %s inputs", fn, alpha,
                       mft_dtype_name(t));
        return false;
    }
    return mft__check_int_value(fn, "alpha", t, alpha) == MFT_OK;
}

mft_tensor *mft_add_alpha(const mft_tensor *a, const mft_tensor *b, double alpha) {
    const mft_tensor *in[2] = {a, b};
    const double prm[2] = {alpha, 0};
    if (!binary_check_alpha("mft_add_alpha", a, b, alpha)) return NULL;
    return mft__agew_binary(MFT__OP_ADD_ALPHA, "mft_add_alpha", a, b, mft__ew_run(&op_add_alpha, in, prm), alpha);
}
mft_status mft_add_alpha_(mft_tensor *a, const mft_tensor *b, double alpha) {
    const mft_tensor *in[2] = {a, b};
    const double prm[2] = {alpha, 0};
    if (!binary_check_alpha("mft_add_alpha_", a, b, alpha)) return MFT_ERR_INVALID;
    return mft__ew_run_into(&op_add_alpha, "mft_add_alpha_", a, in, prm);
}
mft_status mft_add_alpha_out(mft_tensor *out, const mft_tensor *a, const mft_tensor *b,
                             double alpha) {
    const mft_tensor *in[2] = {a, b};
    const double prm[2] = {alpha, 0};
    if (!binary_check_alpha("mft_add_alpha_out", a, b, alpha)) return MFT_ERR_INVALID;
    return mft__ew_run_into(&op_add_alpha, "mft_add_alpha_out", out, in, prm);
}
