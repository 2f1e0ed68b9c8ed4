/* ops/elementwise/ternary.c — three-input elementwise ops: where (cond ? a : b),
 * addcmul (x + value*a*b) and lerp (start + weight*(end - start), with a
 * tensor or a scalar weight), through the shared elementwise driver. Their
 * autograd nodes are recorded by mft__agew_ternary (ops/elementwise/backward.c). */
#include "ops_internal.h"

/* elementwise_backward.c: records the node of a differentiable ternary op */

/* data[0] = out, data[1..3] = inputs; strides st[0..3] inner, st[4..7] outer. */
#define TERNARY_LOOP(op, D, KIND, T1)                                                          \
    static void loop_##op##_##D(void *ctx, char **data, const int64_t *st, int64_t n0,          \
                                int64_t n1) {                                                  \
        typedef MFT__T_##D T;                                                                  \
        typedef MFT__UT_##D UT;                                                                \
        const double *prm = ctx;                                                               \
        const T p0 = MFT__PARAM_##D(prm[0]);                                                   \
        (void)p0, (void)sizeof(UT);                                                            \
        for (int64_t j = 0; j < n1; j++) {                                                     \
            char *o = data[0] + j * st[4];                                                     \
            const char *p1 = data[1] + j * st[5], *p2 = data[2] + j * st[6];                   \
            const char *p3 = data[3] + j * st[7];                                              \
            for (int64_t i = 0; i < n0; i++) {                                                 \
                const T1 x = *(const T1 *)(const void *)(p1 + i * st[1]);                      \
                const T a = *(const T *)(const void *)(p2 + i * st[2]);                        \
                const T b = *(const T *)(const void *)(p3 + i * st[3]);                        \
                *(T *)(void *)(o + i * st[0]) = (T)(E_##op##_##KIND(D, x, a, b));              \
            }                                                                                  \
        }                                                                                      \
    }

#define E_where_F(D, c, a, b) ((c) ? (a) : (b))
#define E_where_I E_where_F
#define E_addcmul_F(D, x, a, b) ((x) + p0 * (a) * (b))
#define E_addcmul_I(D, x, a, b) ((UT)(x) + (UT)p0 * (UT)(a) * (UT)(b))
/* PyTorch's two-sided lerp formula (exact at both ends) */
#define E_lerp_F(D, s, e, w) \
    (MFT__MF_##D(fabs)(w) < (T)0.5 ? (s) + (w) * ((e) - (s)) : (e) - ((e) - (s)) * ((T)1 - (w)))

TERNARY_LOOP(where, F32, F, uint8_t) TERNARY_LOOP(where, F64, F, uint8_t)
TERNARY_LOOP(where, I32, I, uint8_t) TERNARY_LOOP(where, I64, I, uint8_t)
TERNARY_LOOP(where, U8, I, uint8_t)
TERNARY_LOOP(addcmul, F32, F, float) TERNARY_LOOP(addcmul, F64, F, double)
TERNARY_LOOP(addcmul, I32, I, int32_t) TERNARY_LOOP(addcmul, I64, I, int64_t)
TERNARY_LOOP(addcmul, U8, I, uint8_t)
TERNARY_LOOP(lerp, F32, F, float) TERNARY_LOOP(lerp, F64, F, double)

/* lerp with a scalar weight: a binary loop with the weight as parameter */
#define LERP_SCALAR_LOOP(D)                                                                    \
    static void loop_lerp_scalar_##D(void *ctx, char **data, const int64_t *st, int64_t n0,     \
                                     int64_t n1) {                                             \
        typedef MFT__T_##D T;                                                                  \
        const T w = (T)((const double *)ctx)[0];                                               \
        for (int64_t j = 0; j < n1; j++) {                                                     \
            char *o = data[0] + j * st[3];                                                     \
            const char *ps = data[1] + j * st[4], *pe = data[2] + j * st[5];                   \
            for (int64_t i = 0; i < n0; i++) {                                                 \
                const T s = *(const T *)(const void *)(ps + i * st[1]);                        \
                const T e = *(const T *)(const void *)(pe + i * st[2]);                        \
                *(T *)(void *)(o + i * st[0]) = (T)(E_lerp_F(D, s, e, w));                     \
            }                                                                                  \
        }                                                                                      \
    }
LERP_SCALAR_LOOP(F32)
LERP_SCALAR_LOOP(F64)

#define LOOPS_FI(op)                                                                         \
    {[MFT_F32] = loop_##op##_F32, [MFT_F64] = loop_##op##_F64, [MFT_I32] = loop_##op##_I32, \
     [MFT_I64] = loop_##op##_I64, [MFT_U8] = loop_##op##_U8}
#define LOOPS_F(op) {[MFT_F32] = loop_##op##_F32, [MFT_F64] = loop_##op##_F64}

static const mft__ew_op op_where = {"mft_where", 3, MFT__EW_WHERE, 0, false, false,
                                   LOOPS_FI(where), false};
static const mft__ew_op op_addcmul = {"mft_addcmul", 3, MFT__EW_SAME, 0, false, false,
                                     LOOPS_FI(addcmul), false};
static const mft__ew_op op_lerp = {"mft_lerp", 3, MFT__EW_SAME, 0, true, false, LOOPS_F(lerp), false};
static const mft__ew_op op_lerp_scalar = {"mft_lerp_scalar", 2, MFT__EW_SAME, 0, true, false,
                                          LOOPS_F(lerp_scalar), false};

mft_tensor *mft_where(const mft_tensor *cond, const mft_tensor *a, const mft_tensor *b) {
    const mft_tensor *in[3] = {cond, a, b};
    return mft__agew_ternary(MFT__OP_WHERE, "mft_where", cond, a, b, mft__ew_run(&op_where, in, NULL), 0);
}
mft_status mft_where_out(mft_tensor *out, const mft_tensor *cond, const mft_tensor *a,
                         const mft_tensor *b) {
    const mft_tensor *in[3] = {cond, a, b};
    return mft__ew_run_into(&op_where, "mft_where_out", out, in, NULL);
}

/* addcmul on integers needs an integral value (as add's alpha). */
static bool ternary_check_value(const char *fn, const mft_tensor *x, const mft_tensor *a,
                                const mft_tensor *b, double value) {
    if (!x || !a || !b) return true;
    const mft_tensor *in[3] = {x, a, b};
    mft_dtype t = mft_result_type(3, in, false, 0.0);
    if (!mft__is_float(t) && !mft__scalar_is_int(value)) {
        mft__set_error(MFT_ERR_INVALID, "%s: value %g must be integral for %s inputs", fn, value,
                       mft_dtype_name(t));
        return false;
    }
    return mft__check_int_value(fn, "value", t, value) == MFT_OK;
}

mft_tensor *mft_addcmul(const mft_tensor *x, const mft_tensor *a, const mft_tensor *b,
                        double value) {
    const mft_tensor *in[3] = {x, a, b};
    const double prm[2] = {value, 0};
    if (!ternary_check_value("mft_addcmul", x, a, b, value)) return NULL;
    return mft__agew_ternary(MFT__OP_ADDCMUL, "mft_addcmul", x, a, b, mft__ew_run(&op_addcmul, in, prm), value);
}
mft_status mft_addcmul_(mft_tensor *x, const mft_tensor *a, const mft_tensor *b, double value) {
    const mft_tensor *in[3] = {x, a, b};
    const double prm[2] = {value, 0};
    if (!ternary_check_value("mft_addcmul_", x, a, b, value)) return MFT_ERR_INVALID;
    return mft__ew_run_into(&op_addcmul, "mft_addcmul_", x, in, prm);
}
mft_status mft_addcmul_out(mft_tensor *out, const mft_tensor *x, const mft_tensor *a,
                           const mft_tensor *b, double value) {
    const mft_tensor *in[3] = {x, a, b};
    const double prm[2] = {value, 0};
    if (!ternary_check_value("mft_addcmul_out", x, a, b, value)) return MFT_ERR_INVALID;
    return mft__ew_run_into(&op_addcmul, "mft_addcmul_out", out, in, prm);
}

/* lerp does not promote: every tensor must have start's dtype (PyTorch). */
static bool ternary_same_dtype(const char *fn, int n, const mft_tensor *const *in) {
    for (int k = 1; k < n; k++) {
        if (in[0] && in[k] && in[k]->dtype != in[0]->dtype) {
            mft__set_error(MFT_ERR_DTYPE, "%s: input %d has dtype %s, expected %s like start", fn,
                           k, mft_dtype_name(in[k]->dtype), mft_dtype_name(in[0]->dtype));
            return false;
        }
    }
    return true;
}

mft_tensor *mft_lerp(const mft_tensor *start, const mft_tensor *end, const mft_tensor *weight) {
    const mft_tensor *in[3] = {start, end, weight};
    if (!ternary_same_dtype("mft_lerp", 3, in)) return NULL;
    return mft__agew_ternary(MFT__OP_LERP, "mft_lerp", start, end, weight, mft__ew_run(&op_lerp, in, NULL), 0);
}
mft_status mft_lerp_(mft_tensor *start, const mft_tensor *end, const mft_tensor *weight) {
    const mft_tensor *in[3] = {start, end, weight};
    if (!ternary_same_dtype("mft_lerp_", 3, in)) return MFT_ERR_DTYPE;
    return mft__ew_run_into(&op_lerp, "mft_lerp_", start, in, NULL);
}
mft_tensor *mft_lerp_scalar(const mft_tensor *start, const mft_tensor *end, double weight) {
    const mft_tensor *in[2] = {start, end};
    const double prm[2] = {weight, 0};
    if (!ternary_same_dtype("mft_lerp_scalar", 2, in)) return NULL;
    return mft__agew_ternary(MFT__OP_LERP_SCALAR, "mft_lerp_scalar", start, end, NULL,
                             mft__ew_run(&op_lerp_scalar, in, prm), weight);
}
mft_status mft_lerp_scalar_(mft_tensor *start, const mft_tensor *end, double weight) {
    const mft_tensor *in[2] = {start, end};
    const double prm[2] = {weight, 0};
    if (!ternary_same_dtype("mft_lerp_scalar_", 2, in)) return MFT_ERR_DTYPE;
    return mft__ew_run_into(&op_lerp_scalar, "mft_lerp_scalar_", start, in, prm);
}
