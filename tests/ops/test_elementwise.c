/* tests/ops/test_elementwise.c — every elementwise op of ops.h (unary, the
 * parameterised unaries, the scalar forms, binary, add_alpha, where, addcmul,
 * lerp, lerp_scalar, fill_, zero_) in its functional, in-place and _out forms,
 * over every dtype, against a naive per-element reference computed here in
 * double precision from the LOGICAL index only (mft_tensor_get on the inputs,
 * our own formula for the op). Inputs get random layouts (random physical
 * order, step-2 slices, storage offsets, padded pitches, stride-0 broadcasts,
 * ranks 0-5, zero-size, size-1 dims) and random broadcast-compatible shapes;
 * result dtypes are checked against our own table of ops.h's promotion rules;
 * in-place and _out destinations keep their strides and tag and the gaps of a
 * non-dense destination keep their sentinel values. Then: values do not
 * depend on the layout (equal mft_tensor_hash for NCHW / NHWC / strided
 * copies, including tensors big enough to run in parallel), a few
 * hand-derived output layouts (docs/spec.md §4), and the NaN / inf / wrap-around
 * edges ops.h promises. */
#include <float.h>
#include <limits.h>
#include <stdbool.h>
#include "test_util.h"

/* ------------------------------------------------------------------ random numbers */

static double ew_pick(uint64_t *s, const double *v, int n) { return v[tu_rng_int(s, 0, n - 1)]; }

static const mft_dtype EW_DTS[5] = {MFT_F32, MFT_F64, MFT_I32, MFT_I64, MFT_U8};
#define EW_SENTINEL 99.0

/* ------------------------------------------------------------------ the op list
 * One enum entry per op, generated from ops.h's own X-macro lists, so an op
 * added to a list without a reference formula here fails the test. */
#define EW_ENUM_(name) OP_##name,
enum {
    MFT_UNARY_OPS(EW_ENUM_) OP_clamp,
    OP_hardtanh,
    MFT_SCALAR_OPS(EW_ENUM_) MFT_BINARY_OPS(EW_ENUM_) OP_add_alpha,
    OP_where,
    OP_addcmul,
    OP_lerp,
    OP_lerp_scalar,
    OP_COUNT
};
#undef EW_ENUM_

enum { FAM_UNARY, FAM_SCALAR, FAM_CLAMP, FAM_BINARY, FAM_ALPHA, FAM_WHERE, FAM_ADDCMUL, FAM_LERP, FAM_LERPS };

#define EW_NAME_(name) [OP_##name] = #name,
static const char *const op_names[OP_COUNT] = {
    MFT_UNARY_OPS(EW_NAME_) MFT_SCALAR_OPS(EW_NAME_) MFT_BINARY_OPS(EW_NAME_)[OP_clamp] = "clamp",
    [OP_hardtanh] = "hardtanh",
    [OP_add_alpha] = "add_alpha",
    [OP_where] = "where",
    [OP_addcmul] = "addcmul",
    [OP_lerp] = "lerp",
    [OP_lerp_scalar] = "lerp_scalar",
};
#undef EW_NAME_

#define EW_FAM_U_(name) [OP_##name] = FAM_UNARY,
#define EW_FAM_S_(name) [OP_##name] = FAM_SCALAR,
#define EW_FAM_B_(name) [OP_##name] = FAM_BINARY,
static const int op_family[OP_COUNT] = {
    MFT_UNARY_OPS(EW_FAM_U_) MFT_SCALAR_OPS(EW_FAM_S_) MFT_BINARY_OPS(EW_FAM_B_)[OP_clamp] = FAM_CLAMP,
    [OP_hardtanh] = FAM_CLAMP,
    [OP_add_alpha] = FAM_ALPHA,
    [OP_where] = FAM_WHERE,
    [OP_addcmul] = FAM_ADDCMUL,
    [OP_lerp] = FAM_LERP,
    [OP_lerp_scalar] = FAM_LERPS,
};
#undef EW_FAM_U_
#undef EW_FAM_S_
#undef EW_FAM_B_

static int op_nin(int op) {
    switch (op_family[op]) {
    case FAM_UNARY: case FAM_SCALAR: case FAM_CLAMP: return 1;
    case FAM_BINARY: case FAM_ALPHA: case FAM_LERPS: return 2;
    default: return 3;
    }
}
static bool op_has_inplace(int op) { return op != OP_where; }
static bool op_has_out(int op) { return op != OP_lerp && op != OP_lerp_scalar; }

/* ------------------------------------------------------------------ calling the library */

static mft_tensor *op_call(int op, mft_tensor *const *in, double s1, double s2) {
    switch (op) {
#define EW_CASE_(name) case OP_##name: return mft_##name(in[0]);
        MFT_UNARY_OPS(EW_CASE_)
#undef EW_CASE_
#define EW_CASE_(name) case OP_##name: return mft_##name(in[0], s1);
        MFT_SCALAR_OPS(EW_CASE_)
#undef EW_CASE_
#define EW_CASE_(name) case OP_##name: return mft_##name(in[0], in[1]);
        MFT_BINARY_OPS(EW_CASE_)
#undef EW_CASE_
    case OP_clamp: return mft_clamp(in[0], s1, s2);
    case OP_hardtanh: return mft_hardtanh(in[0], s1, s2);
    case OP_add_alpha: return mft_add_alpha(in[0], in[1], s1);
    case OP_where: return mft_where(in[0], in[1], in[2]);
    case OP_addcmul: return mft_addcmul(in[0], in[1], in[2], s1);
    case OP_lerp: return mft_lerp(in[0], in[1], in[2]);
    case OP_lerp_scalar: return mft_lerp_scalar(in[0], in[1], s1);
    default: return NULL;
    }
}

/* In place: the destination is in[0]. */
static mft_status op_call_(int op, mft_tensor *const *in, double s1, double s2) {
    switch (op) {
#define EW_CASE_(name) case OP_##name: return mft_##name##_(in[0]);
        MFT_UNARY_OPS(EW_CASE_)
#undef EW_CASE_
#define EW_CASE_(name) case OP_##name: return mft_##name##_(in[0], s1);
        MFT_SCALAR_OPS(EW_CASE_)
#undef EW_CASE_
#define EW_CASE_(name) case OP_##name: return mft_##name##_(in[0], in[1]);
        MFT_BINARY_OPS(EW_CASE_)
#undef EW_CASE_
    case OP_clamp: return mft_clamp_(in[0], s1, s2);
    case OP_hardtanh: return mft_hardtanh_(in[0], s1, s2);
    case OP_add_alpha: return mft_add_alpha_(in[0], in[1], s1);
    case OP_addcmul: return mft_addcmul_(in[0], in[1], in[2], s1);
    case OP_lerp: return mft_lerp_(in[0], in[1], in[2]);
    case OP_lerp_scalar: return mft_lerp_scalar_(in[0], in[1], s1);
    default: return MFT_ERR_INTERNAL;
    }
}

static mft_status op_call_out(int op, mft_tensor *out, mft_tensor *const *in, double s1, double s2) {
    switch (op) {
#define EW_CASE_(name) case OP_##name: return mft_##name##_out(out, in[0]);
        MFT_UNARY_OPS(EW_CASE_)
#undef EW_CASE_
#define EW_CASE_(name) case OP_##name: return mft_##name##_out(out, in[0], s1);
        MFT_SCALAR_OPS(EW_CASE_)
#undef EW_CASE_
#define EW_CASE_(name) case OP_##name: return mft_##name##_out(out, in[0], in[1]);
        MFT_BINARY_OPS(EW_CASE_)
#undef EW_CASE_
    case OP_clamp: return mft_clamp_out(out, in[0], s1, s2);
    case OP_hardtanh: return mft_hardtanh_out(out, in[0], s1, s2);
    case OP_add_alpha: return mft_add_alpha_out(out, in[0], in[1], s1);
    case OP_where: return mft_where_out(out, in[0], in[1], in[2]);
    case OP_addcmul: return mft_addcmul_out(out, in[0], in[1], in[2], s1);
    default: return MFT_ERR_INTERNAL;
    }
}

/* ------------------------------------------------------------------ dtypes: our own table of ops.h's rules */

static int dt_rank(mft_dtype dt) {
    switch (dt) {
    case MFT_U8: return 0;
    case MFT_I32: return 1;
    case MFT_I64: return 2;
    case MFT_F32: return 3;
    default: return 4;
    }
}
#define DT_NONE MFT_DTYPE_COUNT
static mft_dtype dt_promote(mft_dtype a, mft_dtype b) {
    if (a == DT_NONE) return b;
    if (b == DT_NONE) return a;
    return dt_rank(a) >= dt_rank(b) ? a : b;
}
/* higher group vs lower group: the lower one only matters when it is floating
 * and the higher one is not. */
static mft_dtype dt_combine(mft_dtype higher, mft_dtype lower) {
    if (higher == DT_NONE) return lower;
    if (tu_is_float(higher)) return higher;
    if (lower != DT_NONE && tu_is_float(lower)) return dt_promote(higher, lower);
    return higher;
}
static bool is_integral(double s) { return isfinite(s) && s == floor(s); }

enum { SK_NONE, SK_INT, SK_FLOAT };
/* The promoted dtype of n tensors (dims tensors > 0-dim tensors > scalars) and
 * a scalar of kind sk (an integral finite double is an integer scalar, I64; a
 * float scalar counts as F32, the default dtype). */
static mft_dtype expected_type(int n, mft_tensor *const *ts, int sk) {
    mft_dtype dims = DT_NONE, zero = DT_NONE, wrapped = DT_NONE;
    for (int k = 0; k < n; k++) {
        mft_dtype dt = mft_tensor_dtype(ts[k]);
        if (mft_tensor_ndim(ts[k]) > 0)
            dims = dt_promote(dims, dt);
        else
            zero = dt_promote(zero, dt);
    }
    if (sk == SK_INT) wrapped = MFT_I64;
    if (sk == SK_FLOAT) wrapped = MFT_F32;
    return dt_combine(dt_combine(dims, zero), wrapped);
}
static int scalar_kind(double s) { return is_integral(s) ? SK_INT : SK_FLOAT; }

static bool op_floating_unary(int op) {
    switch (op) {
    case OP_sqrt: case OP_rsqrt: case OP_exp: case OP_log: case OP_sin: case OP_cos:
    case OP_tanh: case OP_sigmoid: case OP_gelu: case OP_silu: case OP_reciprocal: return true;
    default: return false;
    }
}
static bool op_comparison(int op) {
    switch (op) {
    case OP_eq: case OP_ne: case OP_lt: case OP_le: case OP_gt: case OP_ge:
    case OP_eq_scalar: case OP_ne_scalar: case OP_lt_scalar: case OP_le_scalar: case OP_gt_scalar:
    case OP_ge_scalar: return true;
    default: return false;
    }
}

/* Compute dtype (inputs are converted to it) and result dtype of the
 * functional form. */
static void op_dtypes(int op, mft_tensor *const *in, double s1, double s2, mft_dtype *cdt,
                      mft_dtype *rdt) {
    mft_dtype c;
    switch (op_family[op]) {
    case FAM_UNARY:
        c = mft_tensor_dtype(in[0]);
        if (op_floating_unary(op) && !tu_is_float(c)) c = MFT_F32;
        break;
    case FAM_SCALAR:
        c = expected_type(1, in, scalar_kind(s1));
        if (op == OP_div_scalar && !tu_is_float(c)) c = MFT_F32;
        break;
    case FAM_CLAMP:
        c = expected_type(1, in, (is_integral(s1) && is_integral(s2)) ? SK_INT : SK_FLOAT);
        break;
    case FAM_BINARY:
        c = expected_type(2, in, SK_NONE);
        if (op == OP_div && !tu_is_float(c)) c = MFT_F32;
        break;
    case FAM_ALPHA: c = expected_type(2, in, SK_NONE); break;
    case FAM_WHERE: c = expected_type(2, in + 1, SK_NONE); break;
    case FAM_ADDCMUL: c = expected_type(3, in, SK_NONE); break;
    default: c = mft_tensor_dtype(in[0]); break; /* lerp: one floating dtype */
    }
    *cdt = c;
    *rdt = op_comparison(op) ? MFT_U8 : c;
}

/* ------------------------------------------------------------------ reference arithmetic */

/* An integer computed modulo 2^64 (unsigned: no UB), reduced to dt's width. */
static double wrap_int(uint64_t u, mft_dtype dt) {
    switch (dt) {
    case MFT_I32: return (double)(int32_t)(uint32_t)u;
    case MFT_U8: return (double)(uint8_t)u;
    default: return (double)(int64_t)u;
    }
}
/* v (exact in its source dtype; integral when dt is an integer type) as a
 * value of dt. */
static double cast_to(double v, mft_dtype dt) {
    if (dt == MFT_F32) return (double)(float)v;
    if (dt == MFT_F64) return v;
    return wrap_int((uint64_t)(int64_t)v, dt);
}
static uint64_t as_u(double v) { return (uint64_t)(int64_t)v; }

/* PyTorch's powi: negative exponents give 0 unless the base is +-1. */
static double ref_powi(double base, double ex, mft_dtype dt) {
    int64_t b = (int64_t)base, e = (int64_t)ex;
    if (e < 0) {
        if (b == 1) return 1;
        if (b == -1) return (e % 2) ? -1 : 1;
        return 0;
    }
    uint64_t r = 1, ub = (uint64_t)b;
    for (int64_t i = 0; i < e; i++) r *= ub;
    return wrap_int(r, dt);
}
static double nan_max(double a, double b) { return (isnan(a) || isnan(b)) ? NAN : (a > b ? a : b); }
static double nan_min(double a, double b) { return (isnan(a) || isnan(b)) ? NAN : (a < b ? a : b); }
static double ref_cmp(int op, double a, double b) {
    switch (op) {
    case OP_eq: case OP_eq_scalar: return a == b;
    case OP_ne: case OP_ne_scalar: return a != b;
    case OP_lt: case OP_lt_scalar: return a < b;
    case OP_le: case OP_le_scalar: return a <= b;
    case OP_gt: case OP_gt_scalar: return a > b;
    default: return a >= b;
    }
}

/* Tolerance classes: exact, or approximate (transcendental / division). */
static bool op_approx(int op, mft_dtype cdt) {
    if (!tu_is_float(cdt)) return false;
    if (op_floating_unary(op)) return true;
    switch (op) {
    case OP_div: case OP_div_scalar: case OP_pow: case OP_pow_scalar: case OP_leaky_relu:
    case OP_lerp: case OP_lerp_scalar: return true;
    default: return false;
    }
}

static bool g_unknown_op = false;

/* The reference value of one output element. v: the logical input values.
 * Exact ops return the value already rounded to the compute dtype;
 * approximate ones the unrounded double result. */
static double ref_eval(int op, mft_dtype cdt, const double *v, double s1, double s2) {
    const bool I = !tu_is_float(cdt);
    const double x = op == OP_where ? v[0] : cast_to(v[0], cdt);
    switch (op) {
    /* unary, keeping the dtype */
    case OP_neg: return I ? wrap_int(0 - as_u(x), cdt) : cast_to(-x, cdt);
    case OP_abs: return I ? wrap_int(x < 0 ? 0 - as_u(x) : as_u(x), cdt) : cast_to(fabs(x), cdt);
    case OP_square: return I ? wrap_int(as_u(x) * as_u(x), cdt) : cast_to(x * x, cdt);
    case OP_sign: return (x > 0) - (x < 0);
    case OP_floor: return floor(x);
    case OP_ceil: return ceil(x);
    case OP_round: return nearbyint(x); /* default rounding mode: half to even */
    case OP_relu: return x > 0 ? x : 0;
    /* floating unary (x already in F32 for integer inputs) */
    case OP_sqrt: return sqrt(x);
    case OP_rsqrt: return 1.0 / sqrt(x);
    case OP_exp: return exp(x);
    case OP_log: return log(x);
    case OP_sin: return sin(x);
    case OP_cos: return cos(x);
    case OP_tanh: return tanh(x);
    case OP_sigmoid: return 1.0 / (1.0 + exp(-x));
    case OP_gelu: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case OP_silu: return x / (1.0 + exp(-x));
    case OP_reciprocal: return 1.0 / x;
    default: break;
    }
    if (op_family[op] == FAM_SCALAR) {
        const double s = cast_to(s1, cdt);
        switch (op) {
        case OP_add_scalar: return I ? wrap_int(as_u(x) + as_u(s), cdt) : cast_to(x + s, cdt);
        case OP_sub_scalar: return I ? wrap_int(as_u(x) - as_u(s), cdt) : cast_to(x - s, cdt);
        case OP_rsub_scalar: return I ? wrap_int(as_u(s) - as_u(x), cdt) : cast_to(s - x, cdt);
        case OP_mul_scalar: return I ? wrap_int(as_u(x) * as_u(s), cdt) : cast_to(x * s, cdt);
        case OP_div_scalar: return x / s;
        case OP_maximum_scalar: return nan_max(x, s);
        case OP_minimum_scalar: return nan_min(x, s);
        case OP_pow_scalar: return I ? ref_powi(x, s, cdt) : pow(x, s);
        case OP_leaky_relu: return x > 0 ? x : s * x;
        default: return ref_cmp(op, x, s);
        }
    }
    if (op == OP_clamp || op == OP_hardtanh) {
        if (isnan(x)) return NAN;
        double lo = cast_to(s1, cdt), hi = cast_to(s2, cdt), r = x < lo ? lo : x;
        return r > hi ? hi : r;
    }
    const double y = cast_to(v[1], cdt);
    switch (op) {
    case OP_add: return I ? wrap_int(as_u(x) + as_u(y), cdt) : cast_to(x + y, cdt);
    case OP_sub: return I ? wrap_int(as_u(x) - as_u(y), cdt) : cast_to(x - y, cdt);
    case OP_mul: return I ? wrap_int(as_u(x) * as_u(y), cdt) : cast_to(x * y, cdt);
    case OP_div: return x / y;
    case OP_maximum: return nan_max(x, y);
    case OP_minimum: return nan_min(x, y);
    case OP_pow: return I ? ref_powi(x, y, cdt) : pow(x, y);
    case OP_eq: case OP_ne: case OP_lt: case OP_le: case OP_gt: case OP_ge: return ref_cmp(op, x, y);
    case OP_add_alpha:
        return I ? wrap_int(as_u(x) + as_u(s1) * as_u(y), cdt) : cast_to(x + cast_to(s1, cdt) * y, cdt);
    case OP_where: return v[0] != 0 ? cast_to(v[1], cdt) : cast_to(v[2], cdt);
    case OP_addcmul: {
        double z = cast_to(v[2], cdt);
        return I ? wrap_int(as_u(x) + as_u(s1) * as_u(y) * as_u(z), cdt) : cast_to(x + s1 * y * z, cdt);
    }
    case OP_lerp: return x + v[2] * (y - x);
    case OP_lerp_scalar: return x + s1 * (y - x);
    default: g_unknown_op = true; return NAN;
    }
}

/* got vs want in dtype ddt; approximate results carry the tolerance of the
 * less precise of the compute and destination dtypes. */
static bool values_match(double got, double want, bool approx, mft_dtype cdt, mft_dtype ddt) {
    if (isnan(want)) return isnan(got);
    if (!approx) return got == cast_to(want, ddt);
    if (isinf(want)) return got == want;
    bool f32 = cdt == MFT_F32 || ddt == MFT_F32;
    double rtol = f32 ? 1e-5 : 1e-12, atol = f32 ? 1e-6 : 1e-13;
    return fabs(got - want) <= rtol * fabs(want) + atol;
}

/* ------------------------------------------------------------------ layouts */

/* Random layouts (tu_strided_view): step 2 in one dim of 3, padding 0-2; the
 * base (filled with the sentinel) shows which slots a destination writes. */
static const tu_layout_opts EW_LAYOUT = {2, 2, false};

enum { LK_CONTIG, LK_CL, LK_STRIDED, LK_BCAST };

/* A tensor of logical sizes in layout kind lk (never LK_BCAST); *base gets
 * the storage-owning base when the view has gaps (NULL otherwise). */
static mft_tensor *ew_layout(int nd, const int64_t *sz, mft_dtype dt, int lk, uint64_t *rng,
                             mft_tensor **base) {
    *base = NULL;
    if (lk == LK_STRIDED) return tu_strided_view(nd, sz, dt, EW_SENTINEL, &EW_LAYOUT, rng, base);
    mft_format f = (lk == LK_CL && nd >= 3 && nd <= 5) ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
    return mft_full(nd, sz, dt, f, EW_SENTINEL);
}

enum { D_ANY, D_POS, D_BASE, D_EXP, D_SMALL, D_COND, D_WEIGHT };
static double gen_value(uint64_t *rng, mft_dtype dt, int dom) {
    bool fl = tu_is_float(dt), u8 = dt == MFT_U8;
    switch (dom) {
    case D_POS:
        return fl ? (double)tu_rng_int(rng, 1, 32) / 4 : (double)tu_rng_int(rng, 1, u8 ? 40 : 20);
    case D_BASE: return fl ? (double)tu_rng_int(rng, -16, 16) / 4 : (double)tu_rng_int(rng, u8 ? 0 : -5, u8 ? 6 : 5);
    case D_EXP: {
        static const double fe[] = {-2, -1, -0.5, 0, 0.5, 1, 2, 3, 1.5};
        return fl ? ew_pick(rng, fe, 9) : (double)tu_rng_int(rng, u8 ? 0 : -2, 4);
    }
    case D_SMALL: return fl ? (double)tu_rng_int(rng, -4, 4) / 2 : (double)tu_rng_int(rng, u8 ? 0 : -2, u8 ? 4 : 2);
    case D_COND: {
        if (tu_rng_int(rng, 0, 1)) return 0;
        return fl ? (double)tu_rng_int(rng, 1, 3) / 2 : (double)tu_rng_int(rng, 1, 3);
    }
    case D_WEIGHT: return (double)tu_rng_int(rng, -2, 6) / 4;
    default: return fl ? (double)tu_rng_int(rng, -32, 32) / 4 : (double)tu_rng_int(rng, u8 ? 0 : -20, u8 ? 40 : 20);
    }
}

static void fill_random(mft_tensor *t, int dom, uint64_t *rng) {
    int nd = mft_tensor_ndim(t);
    int64_t idx[MFT_MAX_DIMS] = {0};
    if (mft_tensor_numel(t) == 0) return;
    do {
        mft_tensor_set(t, idx, gen_value(rng, mft_tensor_dtype(t), dom));
    } while (tu_next_index(nd, mft_tensor_sizes(t), idx));
}

/* A filled input of logical sizes: packed NCHW / NHWC, a strided view, or a
 * stride-0 broadcast (expand) of a smaller filled tensor. */
static mft_tensor *make_input(int nd, const int64_t *sz, mft_dtype dt, int dom, bool allow_bcast,
                              uint64_t *rng) {
    int lk = (int)tu_rng_int(rng, 0, allow_bcast && nd > 0 ? 3 : 2);
    mft_tensor *base = NULL, *t;
    if (lk == LK_BCAST) {
        int64_t inner[MFT_MAX_DIMS];
        for (int d = 0; d < nd; d++) inner[d] = tu_rng_int(rng, 0, 1) ? 1 : sz[d];
        mft_tensor *small = ew_layout(nd, inner, dt, (int)tu_rng_int(rng, 0, 2), rng, &base);
        fill_random(small, dom, rng);
        t = mft_expand(small, nd, sz);
        mft_tensor_release(small);
    } else {
        t = ew_layout(nd, sz, dt, lk, rng, &base);
        fill_random(t, dom, rng);
    }
    mft_tensor_release(base);
    return t;
}

/* Number of base slots outside the view that no longer hold the sentinel. */
static int64_t gaps_changed(const mft_tensor *base, const mft_tensor *view) {
    if (!base) return 0;
    int64_t n = mft_tensor_numel(base), bad = 0;
    if (n == 0) return 0;
    bool *mine = calloc((size_t)n, 1);
    int nd = mft_tensor_ndim(view);
    const int64_t *sz = mft_tensor_sizes(view), *st = mft_tensor_strides(view);
    int64_t idx[MFT_MAX_DIMS] = {0};
    if (mft_tensor_numel(view) > 0) {
        do {
            int64_t off = mft_tensor_offset(view) - mft_tensor_offset(base);
            for (int d = 0; d < nd; d++) off += idx[d] * st[d];
            if (off >= 0 && off < n) mine[off] = true;
        } while (tu_next_index(nd, sz, idx));
    }
    int bnd = mft_tensor_ndim(base);
    int64_t bidx[MFT_MAX_DIMS] = {0}, lin = 0;
    do {
        if (!mine[lin] && mft_tensor_get(base, bidx) != EW_SENTINEL) bad++;
        lin++;
    } while (tu_next_index(bnd, mft_tensor_sizes(base), bidx));
    free(mine);
    return bad;
}

/* docs/spec.md §3 invariant: the tag never contradicts unambiguous strides. */
static bool tag_consistent(const mft_tensor *t) {
    bool c = mft_tensor_order_fits(t, MFT_CONTIGUOUS), l = mft_tensor_order_fits(t, MFT_CHANNELS_LAST);
    if (c && !l) return mft_tensor_format(t) == MFT_CONTIGUOUS;
    if (l && !c) return mft_tensor_format(t) == MFT_CHANNELS_LAST;
    return true;
}

/* ------------------------------------------------------------------ one test case */

typedef struct {
    int op, nin, nd;
    mft_tensor *in[3];
    double s1, s2;
    int64_t sz[MFT_MAX_DIMS], numel;
    mft_dtype cdt, rdt;
    double *want; /* numel reference values, logical row-major order */
} ew_case;

/* Broadcast shape of the inputs (they are built compatible). */
static void case_shape(ew_case *c) {
    c->nd = 0;
    for (int k = 0; k < c->nin; k++)
        if (mft_tensor_ndim(c->in[k]) > c->nd) c->nd = mft_tensor_ndim(c->in[k]);
    for (int d = 0; d < c->nd; d++) c->sz[d] = 1;
    for (int k = 0; k < c->nin; k++) {
        int nd = mft_tensor_ndim(c->in[k]), off = c->nd - nd;
        for (int d = 0; d < nd; d++)
            if (mft_tensor_sizes(c->in[k])[d] != 1) c->sz[off + d] = mft_tensor_sizes(c->in[k])[d];
    }
    c->numel = tu_shape_numel(c->nd, c->sz);
}

/* Reads the inputs (before any in-place write) and computes the reference. */
static void case_reference(ew_case *c) {
    op_dtypes(c->op, c->in, c->s1, c->s2, &c->cdt, &c->rdt);
    c->want = malloc((size_t)(c->numel > 0 ? c->numel : 1) * sizeof(double));
    if (c->numel == 0) return;
    int64_t idx[MFT_MAX_DIMS] = {0}, lin = 0;
    do {
        double v[3] = {0, 0, 0};
        for (int k = 0; k < c->nin; k++) {
            int nd = mft_tensor_ndim(c->in[k]), off = c->nd - nd;
            int64_t kidx[MFT_MAX_DIMS];
            for (int d = 0; d < nd; d++) kidx[d] = mft_tensor_sizes(c->in[k])[d] == 1 ? 0 : idx[off + d];
            v[k] = mft_tensor_get(c->in[k], kidx);
        }
        c->want[lin++] = ref_eval(c->op, c->cdt, v, c->s1, c->s2);
    } while (tu_next_index(c->nd, c->sz, idx));
}

static void case_describe(const ew_case *c, char *buf, size_t len) {
    size_t pos = (size_t)snprintf(buf, len, "%s(", op_names[c->op]);
    for (int k = 0; k < c->nin && pos < len; k++) {
        char b[160];
        tu_describe(c->in[k], b, sizeof b, false);
        pos += (size_t)snprintf(buf + pos, len - pos, "%s%s", k ? ", " : "", b);
    }
    if (pos < len) snprintf(buf + pos, len - pos, "; s=%g,%g)", c->s1, c->s2);
}

/* Compares result r (dtype ddt) with the reference; reports the first bad
 * element. Returns the number of wrong elements. */
static int64_t case_compare(const ew_case *c, const mft_tensor *r, const char *variant, int iter) {
    mft_dtype ddt = mft_tensor_dtype(r);
    bool approx = op_approx(c->op, c->cdt);
    int64_t idx[MFT_MAX_DIMS] = {0}, lin = 0, bad = 0;
    if (c->numel == 0) return 0;
    do {
        double got = mft_tensor_get(r, idx), want = c->want[lin++];
        if (!values_match(got, want, approx, c->cdt, ddt)) {
            if (bad == 0) {
                char d[800], rb[160];
                case_describe(c, d, sizeof d);
                tu_describe(r, rb, sizeof rb, false);
                fprintf(stderr, "  [%s iter %d] %s -> %s: element %lld: got %.17g, want %.17g\n", variant,
                        iter, d, rb, (long long)(lin - 1), got, approx ? want : cast_to(want, ddt));
            }
            bad++;
        }
    } while (tu_next_index(c->nd, c->sz, idx));
    return bad;
}

static void case_release(ew_case *c) {
    for (int k = 0; k < c->nin; k++) {
        bool dup = false;
        for (int j = 0; j < k; j++) dup |= c->in[j] == c->in[k];
        if (!dup) mft_tensor_release(c->in[k]);
    }
    free(c->want);
    c->want = NULL;
}

/* ------------------------------------------------------------------ building random cases */

static int input_domain(int op, int k) {
    switch (op) {
    case OP_sqrt: case OP_rsqrt: case OP_log: return D_POS;
    case OP_pow: return k == 0 ? D_BASE : D_EXP;
    case OP_pow_scalar: return D_BASE;
    case OP_where: return k == 0 ? D_COND : D_ANY;
    case OP_lerp: return k == 2 ? D_WEIGHT : D_ANY;
    default: return op_comparison(op) ? D_SMALL : D_ANY;
    }
}

/* dtype of input k: lerp needs one floating dtype; leaky_relu is exercised on
 * floating inputs (ops.h does not say what integers do). */
static mft_dtype input_dtype(int op, int k, mft_dtype first, uint64_t *rng) {
    if (op_family[op] == FAM_LERP || op_family[op] == FAM_LERPS) {
        if (k > 0) return first;
        return tu_rng_int(rng, 0, 1) ? MFT_F32 : MFT_F64;
    }
    if (op == OP_leaky_relu) return tu_rng_int(rng, 0, 1) ? MFT_F32 : MFT_F64;
    return EW_DTS[tu_rng_int(rng, 0, 4)];
}

/* Scalars: exactly representable values; integral ones exercise the integer
 * scalar path, non-integral ones the F32 promotion. U8 never meets a negative
 * integral scalar where the op would compare it (its value in U8 is not
 * specified by ops.h). */
static void pick_scalars(ew_case *c, uint64_t *rng) {
    mft_dtype xdt = mft_tensor_dtype(c->in[0]);
    bool xint = !tu_is_float(xdt);
    c->s1 = c->s2 = 0;
    switch (c->op) {
    case OP_add_scalar: case OP_sub_scalar: case OP_rsub_scalar: case OP_mul_scalar: {
        static const double v[] = {3, -2, 0, 1, 0.5, -1.25, 2.5, 7, 300};
        c->s1 = ew_pick(rng, v, 9);
        break;
    }
    case OP_div_scalar: {
        static const double v[] = {2, -4, 0.5, 3, -0.25, 5};
        c->s1 = ew_pick(rng, v, 6);
        break;
    }
    case OP_maximum_scalar: case OP_minimum_scalar: case OP_eq_scalar: case OP_ne_scalar:
    case OP_lt_scalar: case OP_le_scalar: case OP_gt_scalar: case OP_ge_scalar: {
        static const double v[] = {0, 2, 1, -1.5, 2.5, 5, 0.5};
        c->s1 = ew_pick(rng, v, 7);
        break;
    }
    case OP_pow_scalar: {
        static const double fv[] = {0, 1, 2, 3, 0.5, -1, -2, 1.5}, iv[] = {0, 1, 2, 3, 4, 0.5, 1.5};
        c->s1 = xint ? ew_pick(rng, iv, 7) : ew_pick(rng, fv, 8);
        break;
    }
    case OP_leaky_relu: {
        static const double v[] = {0.25, 0.01, 0, 1.5, -0.5};
        c->s1 = ew_pick(rng, v, 5);
        break;
    }
    case OP_clamp: {
        static const double v[] = {-3, 0, 2, 5, -1.5, 0.5, 2.5}, u[] = {0, 2, 5, 10, 0.5, 2.5, -1.5};
        c->s1 = ew_pick(rng, xdt == MFT_U8 ? u : v, 7);
        c->s2 = ew_pick(rng, xdt == MFT_U8 ? u : v, 7); /* lo > hi allowed: gives hi */
        break;
    }
    case OP_hardtanh: {
        static const double v[] = {-3, 0, 2, 5, -1.5, 0.5, 2.5}, iv[] = {-3, 0, 2, 5, 7}, u[] = {0, 2, 5, 10};
        const double *p = xdt == MFT_U8 ? u : xint ? iv : v;
        int n = xdt == MFT_U8 ? 4 : xint ? 5 : 7;
        c->s1 = ew_pick(rng, p, n);
        c->s2 = ew_pick(rng, p, n);
        if (c->s1 > c->s2) {
            double t = c->s1;
            c->s1 = c->s2;
            c->s2 = t;
        }
        break;
    }
    case OP_add_alpha: case OP_addcmul: {
        mft_dtype cdt, rdt;
        op_dtypes(c->op, c->in, 0, 0, &cdt, &rdt);
        static const double iv[] = {1, 2, -3, 0}, fv[] = {1, 2, -1, 0.5, -1.5};
        c->s1 = tu_is_float(cdt) ? ew_pick(rng, fv, 5) : ew_pick(rng, iv, 4);
        break;
    }
    case OP_lerp_scalar: {
        static const double v[] = {0, 0.25, 0.5, 1, -0.5, 1.5, 0.3};
        c->s1 = ew_pick(rng, v, 7);
        break;
    }
    default: break;
    }
}

static void rand_shape(uint64_t *rng, int *nd, int64_t *sz) {
    *nd = (int)tu_rng_int(rng, 0, 5);
    for (int d = 0; d < *nd; d++) sz[d] = tu_rng_int(rng, 0, 14) == 0 ? 0 : tu_rng_int(rng, 1, 5);
    if (*nd >= 3 && tu_rng_int(rng, 0, 5) == 0) sz[1] = 1; /* C == 1 */
    if (*nd >= 4 && tu_rng_int(rng, 0, 5) == 0) sz[2] = sz[3] = 1; /* H == W == 1 */
}

/* Inputs for op: input 0 (the in-place destination when full_first) has the
 * full random shape; the others broadcast-compatible shapes (fewer leading
 * dims, size-1 dims, 0-dim tensors). */
static void build_case(ew_case *c, int op, uint64_t *rng, bool full_first) {
    int nd;
    int64_t sz[MFT_MAX_DIMS] = {0};
    rand_shape(rng, &nd, sz);
    memset(c, 0, sizeof *c);
    c->op = op;
    c->nin = op_nin(op);
    mft_dtype first = MFT_F32;
    for (int k = 0; k < c->nin; k++) {
        mft_dtype dt = input_dtype(op, k, first, rng);
        if (k == 0) first = dt;
        int knd = nd;
        int64_t ksz[MFT_MAX_DIMS];
        for (int d = 0; d < nd; d++) ksz[d] = sz[d];
        if (c->nin > 1 && !(k == 0 && full_first) && tu_rng_int(rng, 0, 1)) {
            knd = (int)tu_rng_int(rng, 0, nd);
            for (int d = 0; d < knd; d++)
                ksz[d] = tu_rng_int(rng, 0, 2) == 0 ? 1 : sz[nd - knd + d];
        }
        /* sometimes the very same tensor twice (a + a, where(c, x, x)) */
        if (k > 0 && tu_rng_int(rng, 0, 9) == 0 && mft_tensor_dtype(c->in[k - 1]) == dt &&
            input_domain(op, k) == input_domain(op, k - 1)) {
            c->in[k] = c->in[k - 1];
            continue;
        }
        c->in[k] = make_input(knd, ksz, dt, input_domain(op, k), !(k == 0 && full_first), rng);
    }
    pick_scalars(c, rng);
    case_shape(c);
}

/* ------------------------------------------------------------------ the three variants */

static int g_fail_budget; /* failing cases still reported for the current op and variant */

static void run_functional(int op, uint64_t *rng, int iters) {
    for (int it = 0; it < iters && g_fail_budget > 0; it++) {
        ew_case c;
        build_case(&c, op, rng, false);
        case_reference(&c);
        uint64_t h[3];
        int64_t ver[3];
        for (int k = 0; k < c.nin; k++) {
            h[k] = mft_tensor_hash(c.in[k]);
            ver[k] = mft_tensor_version(c.in[k]);
        }
        mft_clear_error();
        mft_tensor *r = op_call(op, c.in, c.s1, c.s2);
        char d[800];
        case_describe(&c, d, sizeof d);
        CHECK_MSG(r != NULL, "%s failed: %s", d, mft_last_error_message());
        CHECK_MSG(!g_unknown_op, "no reference formula for %s", op_names[op]);
        g_unknown_op = false; /* blame the next op only for itself */
        if (r) {
            int64_t bad = 0;
            CHECK_MSG(mft_tensor_dtype(r) == c.rdt, "%s: dtype %s, want %s", d,
                      mft_dtype_name(mft_tensor_dtype(r)), mft_dtype_name(c.rdt));
            CHECK_MSG(tu_has_sizes(r, c.nd, c.sz), "%s: wrong result sizes", d);
            if (tu_has_sizes(r, c.nd, c.sz)) bad = case_compare(&c, r, "functional", it);
            CHECK_MSG(bad == 0, "%s: %lld wrong values", d, (long long)bad);
            CHECK_MSG(mft_tensor_is_dense(r), "%s: fresh result is not dense", d);
            CHECK_MSG(tag_consistent(r), "%s: result tag contradicts its strides", d);
            if (bad) g_fail_budget--;
        } else {
            g_fail_budget--;
        }
        for (int k = 0; k < c.nin; k++) {
            CHECK_MSG(mft_tensor_hash(c.in[k]) == h[k], "%s modified input %d", d, k);
            CHECK_MSG(mft_tensor_version(c.in[k]) == ver[k], "%s bumped the version of input %d", d, k);
        }
        mft_tensor_release(r);
        case_release(&c);
    }
}

typedef struct {
    int64_t strides[MFT_MAX_DIMS];
    int64_t offset, version;
    mft_format tag;
    mft_origin origin;
    uint64_t hash;
} dst_snap;

static dst_snap take_snap(const mft_tensor *t) {
    dst_snap s;
    memset(&s, 0, sizeof s);
    for (int d = 0; d < mft_tensor_ndim(t); d++) s.strides[d] = mft_tensor_strides(t)[d];
    s.offset = mft_tensor_offset(t);
    s.version = mft_tensor_version(t);
    s.tag = mft_tensor_format(t);
    s.origin = mft_tensor_format_origin(t);
    s.hash = mft_tensor_hash(t);
    return s;
}
static bool same_geometry(const mft_tensor *t, const dst_snap *s) {
    for (int d = 0; d < mft_tensor_ndim(t); d++)
        if (mft_tensor_strides(t)[d] != s->strides[d]) return false;
    return mft_tensor_offset(t) == s->offset && mft_tensor_format(t) == s->tag &&
           mft_tensor_format_origin(t) == s->origin;
}

/* Checks a finished in-place / _out call on destination dst (with base for
 * gaps): either the expected dtype error with dst untouched, or success with
 * correct values, unchanged geometry and tag, gaps intact, version bumped. */
static void check_dest_call(const ew_case *c, mft_status st, mft_tensor *dst, mft_tensor *base,
                            const dst_snap *before, const char *variant, int it) {
    char d[800], db[160];
    case_describe(c, d, sizeof d);
    tu_describe(dst, db, sizeof db, false);
    bool must_fail = tu_is_float(c->rdt) && !tu_is_float(mft_tensor_dtype(dst));
    if (must_fail) {
        CHECK_MSG(st == MFT_ERR_DTYPE && mft_last_error() == MFT_ERR_DTYPE,
                  "%s %s into %s: %s result into an integer destination returned %s (%s)", variant, d, db,
                  mft_dtype_name(c->rdt), mft_status_str(st), mft_last_error_message());
        CHECK_MSG(mft_tensor_hash(dst) == before->hash && mft_tensor_version(dst) == before->version,
                  "%s %s: failing call changed the destination", variant, d);
        if (st == MFT_OK) g_fail_budget--;
        mft_clear_error();
        return;
    }
    CHECK_MSG(st == MFT_OK, "%s %s into %s failed: %s", variant, d, db, mft_last_error_message());
    CHECK_MSG(!g_unknown_op, "no reference formula for %s", op_names[c->op]);
    g_unknown_op = false;
    if (st != MFT_OK) {
        g_fail_budget--;
        return;
    }
    int64_t bad = case_compare(c, dst, variant, it);
    CHECK_MSG(bad == 0, "%s %s into %s: %lld wrong values", variant, d, db, (long long)bad);
    CHECK_MSG(same_geometry(dst, before), "%s %s: destination strides/offset/tag changed", variant, d);
    int64_t g = gaps_changed(base, dst);
    CHECK_MSG(g == 0, "%s %s into %s: %lld gap slots overwritten", variant, d, db, (long long)g);
    if (c->numel > 0)
        CHECK_MSG(mft_tensor_version(dst) > before->version, "%s %s: version not bumped", variant, d);
    if (bad || g) g_fail_budget--;
}

static void run_inplace(int op, uint64_t *rng, int iters) {
    for (int it = 0; it < iters && g_fail_budget > 0; it++) {
        ew_case c;
        build_case(&c, op, rng, true);
        /* the destination: replace in[0] by a copy in a random non-broadcast
         * layout (with gaps) whose base we keep */
        mft_tensor *base = NULL, *dst = ew_layout(mft_tensor_ndim(c.in[0]), mft_tensor_sizes(c.in[0]),
                                                   mft_tensor_dtype(c.in[0]), (int)tu_rng_int(rng, 0, 2), rng, &base);
        CHECK(mft_copy_(dst, c.in[0]) == MFT_OK);
        for (int k = c.nin - 1; k >= 0; k--)
            if (c.in[k] == c.in[0]) {
                if (k == 0) mft_tensor_release(c.in[0]);
                c.in[k] = dst;
            }
        case_reference(&c);
        uint64_t h[3];
        for (int k = 1; k < c.nin; k++) h[k] = mft_tensor_hash(c.in[k]);
        dst_snap before = take_snap(dst);
        mft_clear_error();
        mft_status st = op_call_(op, c.in, c.s1, c.s2);
        check_dest_call(&c, st, dst, base, &before, "in-place", it);
        for (int k = 1; k < c.nin; k++)
            if (c.in[k] != dst) CHECK_MSG(mft_tensor_hash(c.in[k]) == h[k], "%s_ modified input %d", op_names[op], k);
        mft_tensor_release(base);
        case_release(&c);
    }
}

static void run_out(int op, uint64_t *rng, int iters) {
    for (int it = 0; it < iters && g_fail_budget > 0; it++) {
        ew_case c;
        build_case(&c, op, rng, false);
        case_reference(&c);
        mft_tensor *base = NULL, *out = NULL;
        /* sometimes the destination is an input itself (an identical view is fine) */
        int alias = -1;
        if (tu_rng_int(rng, 0, 3) == 0) {
            int start = (int)tu_rng_int(rng, 0, c.nin - 1);
            for (int j = 0; j < c.nin && alias < 0; j++) {
                int k = (start + j) % c.nin;
                if (tu_has_sizes(c.in[k], c.nd, c.sz) && mft_tensor_is_dense(c.in[k])) alias = k;
            }
        }
        if (alias >= 0) {
            out = mft_tensor_retain(c.in[alias]);
        } else {
            mft_dtype odt = tu_rng_int(rng, 0, 1) ? c.rdt : EW_DTS[tu_rng_int(rng, 0, 4)];
            out = ew_layout(c.nd, c.sz, odt, (int)tu_rng_int(rng, 0, 2), rng, &base);
            CHECK(mft_fill_(out, 77) == MFT_OK);
        }
        uint64_t h[3];
        for (int k = 0; k < c.nin; k++) h[k] = mft_tensor_hash(c.in[k]);
        dst_snap before = take_snap(out);
        mft_clear_error();
        mft_status st = op_call_out(op, out, c.in, c.s1, c.s2);
        check_dest_call(&c, st, out, base, &before, "out", it);
        for (int k = 0; k < c.nin; k++)
            if (c.in[k] != out) CHECK_MSG(mft_tensor_hash(c.in[k]) == h[k], "%s_out modified input %d", op_names[op], k);
        mft_tensor_release(out);
        mft_tensor_release(base);
        case_release(&c);
    }
}

/* ------------------------------------------------------------------ tests */

static void test_all_ops_random_layouts(void) {
    uint64_t rng = 0xC0FFEE1234567ull;
    for (int op = 0; op < OP_COUNT; op++) {
        CHECK_MSG(op_names[op] != NULL, "op %d has no name", op);
        g_fail_budget = 4;
        run_functional(op, &rng, 70);
        g_fail_budget = 4;
        if (op_has_inplace(op)) run_inplace(op, &rng, 45);
        g_fail_budget = 4;
        if (op_has_out(op)) run_out(op, &rng, 45);
    }
}

/* The same op on NCHW, NHWC, mixed and strided copies of the same inputs gives
 * identical results (hash of dtype, sizes and logical values); done at a
 * small size, at the ambiguous shapes (C == 1, H == W == 1) and at a size
 * above the parallel grain, which is also checked against the reference. */
static void layout_invariance_one(int op, const int64_t *sz, bool bcast_second, mft_dtype dt,
                                  uint64_t *rng, bool check_values) {
    int nin = op_nin(op);
    mft_tensor *nchw[3], *nhwc[3], *strided[3];
    int64_t c_only[4] = {1, sz[1], 1, 1};
    for (int k = 0; k < nin; k++) {
        mft_dtype kdt = dt;
        if (op == OP_where && k == 0) kdt = MFT_U8;
        const int64_t *ksz = (bcast_second && k == 1) ? c_only : sz;
        mft_tensor *b = NULL;
        nchw[k] = mft_empty(4, ksz, kdt, MFT_CONTIGUOUS);
        fill_random(nchw[k], input_domain(op, k), rng);
        nhwc[k] = mft_contiguous(nchw[k], MFT_CHANNELS_LAST);
        strided[k] = tu_strided_view(4, ksz, kdt, EW_SENTINEL, &EW_LAYOUT, rng, &b);
        CHECK(mft_copy_(strided[k], nchw[k]) == MFT_OK);
        mft_tensor_release(b);
    }
    ew_case c;
    memset(&c, 0, sizeof c);
    c.op = op;
    c.nin = nin;
    for (int k = 0; k < nin; k++) c.in[k] = nchw[k];
    pick_scalars(&c, rng);
    mft_tensor *combos[5][3];
    for (int k = 0; k < nin; k++) {
        combos[0][k] = nchw[k];
        combos[1][k] = nhwc[k];
        combos[2][k] = k == 0 ? nhwc[k] : nchw[k];
        combos[3][k] = k == 0 ? nchw[k] : nhwc[k];
        combos[4][k] = strided[k];
    }
    mft_tensor *r[5];
    for (int m = 0; m < 5; m++) r[m] = op_call(op, combos[m], c.s1, c.s2);
    char d[800];
    case_describe(&c, d, sizeof d);
    CHECK_MSG(r[0] != NULL, "%s failed: %s", d, mft_last_error_message());
    for (int m = 1; m < 5; m++)
        CHECK_MSG(r[m] && r[0] && mft_tensor_hash(r[m]) == mft_tensor_hash(r[0]),
                  "%s: layout combination %d gives different values than all-NCHW", d, m);
    if (check_values && r[1]) {
        case_shape(&c);
        case_reference(&c);
        int64_t bad = case_compare(&c, r[1], "big NHWC", 0);
        CHECK_MSG(bad == 0, "%s (NHWC, %lld elements): %lld wrong values", d, (long long)c.numel, (long long)bad);
        free(c.want);
    }
    for (int m = 0; m < 5; m++) mft_tensor_release(r[m]);
    for (int k = 0; k < nin; k++) {
        mft_tensor_release(nchw[k]);
        mft_tensor_release(nhwc[k]);
        mft_tensor_release(strided[k]);
    }
}

static void test_layout_invariance(void) {
    uint64_t rng = 777;
    const int64_t shapes[3][4] = {{2, 3, 4, 5}, {2, 1, 3, 3}, {3, 4, 1, 1}}, big[4] = {2, 20, 30, 33};
    for (int op = 0; op < OP_COUNT; op++) {
        bool fl_only = op_family[op] == FAM_LERP || op_family[op] == FAM_LERPS || op == OP_leaky_relu;
        for (int s = 0; s < 3; s++) {
            layout_invariance_one(op, shapes[s], false, tu_rng_int(&rng, 0, 1) ? MFT_F32 : MFT_F64, &rng, false);
            if (!fl_only) layout_invariance_one(op, shapes[s], false, s & 1 ? MFT_I32 : MFT_U8, &rng, false);
            if (op_nin(op) > 1) layout_invariance_one(op, shapes[s], true, MFT_F32, &rng, false);
        }
        /* 39600 elements: above the parallel grain; values checked too */
        mft_dtype bdt = fl_only || op % 3 ? (op % 2 ? MFT_F32 : MFT_F64) : (op % 2 ? MFT_I32 : MFT_U8);
        layout_invariance_one(op, big, op_nin(op) > 1 && op % 2, bdt, &rng, true);
    }
}

/* In place and _out above the parallel grain, into strided destinations with
 * gaps (random physical order, steps, padding), with broadcast operands. */
static void test_big_destinations(void) {
    uint64_t rng = 8675309;
    const int ops[] = {OP_add, OP_mul, OP_sigmoid, OP_where, OP_addcmul, OP_lerp, OP_clamp, OP_pow_scalar,
                       OP_eq, OP_maximum, OP_add_alpha, OP_neg, OP_lerp_scalar, OP_div_scalar};
    const int64_t sz[4] = {2, 24, 32, 33}, c_only[4] = {1, 24, 1, 1};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        int op = ops[i];
        for (int variant = 0; variant < 2; variant++) {
            if ((variant == 0 && !op_has_inplace(op)) || (variant == 1 && !op_has_out(op))) continue;
            ew_case c;
            memset(&c, 0, sizeof c);
            c.op = op;
            c.nin = op_nin(op);
            mft_tensor *base = NULL, *dst = NULL;
            for (int k = 0; k < c.nin; k++) {
                mft_dtype dt = (op == OP_where && k == 0) ? MFT_U8 : MFT_F32;
                const int64_t *ksz = (k == c.nin - 1 && k > 0) ? c_only : sz;
                if (k == 0 && variant == 0) { /* the in-place destination: strided with gaps */
                    dst = tu_strided_view(4, sz, dt, EW_SENTINEL, &EW_LAYOUT, &rng, &base);
                    fill_random(dst, input_domain(op, k), &rng);
                    c.in[0] = dst;
                    continue;
                }
                c.in[k] = mft_empty(4, ksz, dt, k % 2 ? MFT_CONTIGUOUS : MFT_CHANNELS_LAST);
                fill_random(c.in[k], input_domain(op, k), &rng);
            }
            pick_scalars(&c, &rng);
            case_shape(&c);
            case_reference(&c);
            if (variant == 1) {
                dst = tu_strided_view(4, sz, MFT_F32, EW_SENTINEL, &EW_LAYOUT, &rng, &base);
                CHECK(mft_fill_(dst, -3) == MFT_OK);
            }
            dst_snap before = take_snap(dst);
            mft_status st = variant == 0 ? op_call_(op, c.in, c.s1, c.s2) : op_call_out(op, dst, c.in, c.s1, c.s2);
            g_fail_budget = 1;
            check_dest_call(&c, st, dst, base, &before, variant == 0 ? "big in-place" : "big out", 0);
            if (variant == 1) mft_tensor_release(dst);
            mft_tensor_release(base);
            case_release(&c);
        }
    }
}

/* Ranks 6 to 8 (MFT_MAX_DIMS): broadcasting and odd layouts still work. */
static void test_high_ranks(void) {
    uint64_t rng = 2718;
    const int ops[] = {OP_add, OP_mul, OP_where, OP_exp, OP_maximum_scalar, OP_addcmul, OP_sub, OP_ge};
    for (int it = 0; it < 48; it++) {
        int op = ops[it % 8];
        int nd = 6 + it % 3;
        int64_t sz[MFT_MAX_DIMS];
        for (int d = 0; d < nd; d++) sz[d] = tu_rng_int(&rng, 1, 3);
        ew_case c;
        memset(&c, 0, sizeof c);
        c.op = op;
        c.nin = op_nin(op);
        for (int k = 0; k < c.nin; k++) {
            int64_t ksz[MFT_MAX_DIMS];
            int knd = k == 0 ? nd : (int)tu_rng_int(&rng, 0, nd);
            for (int d = 0; d < knd; d++) ksz[d] = tu_rng_int(&rng, 0, 1) ? 1 : sz[nd - knd + d];
            c.in[k] = make_input(knd, k == 0 ? sz : ksz, EW_DTS[tu_rng_int(&rng, 0, 4)], input_domain(op, k), true, &rng);
        }
        pick_scalars(&c, &rng);
        case_shape(&c);
        case_reference(&c);
        mft_tensor *r = op_call(op, c.in, c.s1, c.s2);
        char d[800];
        case_describe(&c, d, sizeof d);
        CHECK_MSG(r != NULL, "%s failed: %s", d, mft_last_error_message());
        if (r) {
            CHECK_MSG(mft_tensor_dtype(r) == c.rdt && tu_has_sizes(r, c.nd, c.sz), "%s: dtype/sizes", d);
            if (tu_has_sizes(r, c.nd, c.sz)) CHECK_MSG(case_compare(&c, r, "rank 6-8", it) == 0, "%s: wrong values", d);
        }
        mft_tensor_release(r);
        case_release(&c);
    }
}

/* fill_ / zero_ over random layouts: every element, nothing else. */
static void test_fill_zero(void) {
    uint64_t rng = 4242;
    static const double vals[] = {0, 1, -3, 2.5, -2.75, 7, 0.25};
    for (int it = 0; it < 300; it++) {
        int nd;
        int64_t sz[MFT_MAX_DIMS] = {0};
        rand_shape(&rng, &nd, sz);
        mft_dtype dt = EW_DTS[tu_rng_int(&rng, 0, 4)];
        mft_tensor *base = NULL;
        mft_tensor *t = ew_layout(nd, sz, dt, (int)tu_rng_int(&rng, 0, 2), &rng, &base);
        double v = ew_pick(&rng, vals, 7);
        if (dt == MFT_U8) v = fabs(v);
        bool zero = tu_rng_int(&rng, 0, 3) == 0;
        dst_snap before = take_snap(t);
        mft_status st = zero ? mft_zero_(t) : mft_fill_(t, v);
        CHECK_MSG(st == MFT_OK, "%s failed: %s", zero ? "zero_" : "fill_", mft_last_error_message());
        double want = zero ? 0 : tu_is_float(dt) ? cast_to(v, dt) : trunc(v); /* integers: toward zero */
        int64_t idx[MFT_MAX_DIMS] = {0}, bad = 0;
        if (mft_tensor_numel(t) > 0) {
            do {
                bad += mft_tensor_get(t, idx) != want;
            } while (tu_next_index(nd, sz, idx));
        }
        char b[160];
        tu_describe(t, b, sizeof b, false);
        CHECK_MSG(bad == 0, "%s(%s, %g): %lld wrong", zero ? "zero_" : "fill_", b, v, (long long)bad);
        CHECK_MSG(gaps_changed(base, t) == 0, "fill_/zero_ of %s wrote into gaps", b);
        CHECK(same_geometry(t, &before));
        if (mft_tensor_numel(t) > 0) CHECK_MSG(mft_tensor_version(t) > before.version, "%s: version not bumped", b);
        mft_tensor_release(t);
        mft_tensor_release(base);
    }
    /* size-1 dims with stride 0 are not a broadcast: fill works */
    int64_t one = 1, ones[2] = {1, 1}, zeros[2] = {0, 0};
    mft_tensor *a = mft_zeros(1, &one, MFT_F32, MFT_CONTIGUOUS), *e = mft_as_strided(a, 2, ones, zeros, 0);
    CHECK(mft_fill_(e, 5) == MFT_OK);
    int64_t i0 = 0;
    CHECK(mft_tensor_get(a, &i0) == 5.0);
    mft_tensor_release(e);
    mft_tensor_release(a);
}

/* ------------------------------------------------------------------ dtype table (ops.h text) */

static mft_tensor *t1(mft_dtype dt, int nd, double v) { /* dims tensor (3,) or 0-dim */
    int64_t n = 3;
    return mft_full(nd, &n, dt, MFT_CONTIGUOUS, v);
}

static void test_promotion_examples(void) {
    struct {
        mft_dtype a;
        int and_;
        mft_dtype b;
        int bnd;
        mft_dtype want;
    } bin[] = {
        {MFT_I32, 1, MFT_F64, 0, MFT_F64}, /* ops.h: I32 tensor + F64 0-dim -> F64 */
        {MFT_U8, 1, MFT_I64, 0, MFT_U8},   /* U8 tensor + I64 0-dim -> U8 */
        {MFT_F32, 1, MFT_F64, 0, MFT_F32}, /* F32 tensor + F64 0-dim -> F32 */
        {MFT_U8, 1, MFT_I32, 1, MFT_I32},  {MFT_I32, 1, MFT_I64, 1, MFT_I64},
        {MFT_I64, 1, MFT_F32, 1, MFT_F32}, {MFT_F32, 1, MFT_F64, 1, MFT_F64},
        {MFT_U8, 0, MFT_I32, 0, MFT_I32},  {MFT_I32, 0, MFT_F32, 1, MFT_F32},
        {MFT_F64, 0, MFT_I32, 1, MFT_F64}, {MFT_F32, 0, MFT_U8, 1, MFT_F32},
        {MFT_I64, 0, MFT_U8, 1, MFT_U8},
    };
    for (size_t i = 0; i < sizeof bin / sizeof *bin; i++) {
        mft_tensor *a = t1(bin[i].a, bin[i].and_, 2), *b = t1(bin[i].b, bin[i].bnd, 3);
        mft_tensor *r = mft_add(a, b), *q = mft_div(a, b), *e = mft_eq(a, b), *m = mft_maximum(b, a);
        mft_dtype wq = tu_is_float(bin[i].want) ? bin[i].want : MFT_F32;
        CHECK_MSG(r && mft_tensor_dtype(r) == bin[i].want, "add(%s/%d, %s/%d) gave %s, want %s",
                  mft_dtype_name(bin[i].a), bin[i].and_, mft_dtype_name(bin[i].b), bin[i].bnd,
                  r ? mft_dtype_name(mft_tensor_dtype(r)) : "NULL", mft_dtype_name(bin[i].want));
        CHECK_MSG(m && mft_tensor_dtype(m) == bin[i].want, "maximum(%s, %s) order matters",
                  mft_dtype_name(bin[i].b), mft_dtype_name(bin[i].a));
        CHECK_MSG(q && mft_tensor_dtype(q) == wq, "div(%s, %s) gave %s", mft_dtype_name(bin[i].a),
                  mft_dtype_name(bin[i].b), q ? mft_dtype_name(mft_tensor_dtype(q)) : "NULL");
        CHECK(e && mft_tensor_dtype(e) == MFT_U8);
        const mft_tensor *ts[2] = {a, b};
        CHECK_MSG(mft_result_type(2, ts, false, 0) == bin[i].want, "mft_result_type case %zu", i);
        mft_tensor *all[] = {a, b, r, q, e, m};
        for (int k = 0; k < 6; k++) mft_tensor_release(all[k]);
    }
    /* scalars: integral finite doubles are integer scalars */
    struct {
        mft_dtype x;
        int nd;
        double s;
        mft_dtype want;
    } sc[] = {
        {MFT_I32, 1, 2, MFT_I32},  {MFT_I32, 1, 0.5, MFT_F32}, {MFT_U8, 1, 300, MFT_U8},
        {MFT_I64, 1, -1, MFT_I64}, {MFT_I64, 1, 1e10, MFT_I64}, {MFT_I32, 1, INFINITY, MFT_F32},
        {MFT_U8, 1, NAN, MFT_F32}, {MFT_F64, 1, 0.5, MFT_F64}, {MFT_F32, 1, 2, MFT_F32},
        {MFT_I32, 0, 0.5, MFT_F32}, {MFT_F64, 0, 0.5, MFT_F64}, {MFT_U8, 0, 2, MFT_U8},
    };
    for (size_t i = 0; i < sizeof sc / sizeof *sc; i++) {
        mft_tensor *x = t1(sc[i].x, sc[i].nd, 1);
        mft_tensor *r = mft_mul_scalar(x, sc[i].s), *q = mft_div_scalar(x, sc[i].s), *e = mft_lt_scalar(x, sc[i].s);
        CHECK_MSG(r && mft_tensor_dtype(r) == sc[i].want, "mul_scalar(%s, %g) gave %s, want %s",
                  mft_dtype_name(sc[i].x), sc[i].s, r ? mft_dtype_name(mft_tensor_dtype(r)) : "NULL",
                  mft_dtype_name(sc[i].want));
        CHECK(q && mft_tensor_dtype(q) == (tu_is_float(sc[i].want) ? sc[i].want : MFT_F32));
        if (sc[i].x == MFT_U8 && sc[i].s == 300) /* Note [Integer scalars]: 300 is no u8 */
            CHECK(!e && mft_last_error() == MFT_ERR_OVERFLOW &&
                  strstr(mft_last_error_message(), "mft_lt_scalar: scalar 300"));
        else
            CHECK(e && mft_tensor_dtype(e) == MFT_U8);
        mft_clear_error();
        const mft_tensor *ts[1] = {x};
        CHECK_MSG(mft_result_type(1, ts, true, sc[i].s) == sc[i].want, "mft_result_type scalar case %zu", i);
        mft_tensor_release(x);
        mft_tensor_release(r);
        mft_tensor_release(q);
        mft_tensor_release(e);
    }
    /* floating unary ops turn integers into F32 and keep F64; the others keep the dtype */
    for (int di = 0; di < 5; di++) {
        mft_tensor *x = t1(EW_DTS[di], 1, 4);
#define EW_UNARY_DT_(name)                                                                               \
    {                                                                                                    \
        mft_tensor *r_ = mft_##name(x);                                                                  \
        mft_dtype w_ = op_floating_unary(OP_##name) && !tu_is_float(EW_DTS[di]) ? MFT_F32 : EW_DTS[di];     \
        CHECK_MSG(r_ && mft_tensor_dtype(r_) == w_, #name "(%s) gave %s", mft_dtype_name(EW_DTS[di]),      \
                  r_ ? mft_dtype_name(mft_tensor_dtype(r_)) : "NULL");                                   \
        mft_tensor_release(r_);                                                                          \
    }
        MFT_UNARY_OPS(EW_UNARY_DT_)
#undef EW_UNARY_DT_
        mft_tensor *p = mft_pow_scalar(x, 2), *ph = mft_pow_scalar(x, 0.5);
        CHECK(p && mft_tensor_dtype(p) == EW_DTS[di]);
        CHECK(ph && mft_tensor_dtype(ph) == (tu_is_float(EW_DTS[di]) ? EW_DTS[di] : MFT_F32));
        mft_tensor *cl = mft_clamp(x, 0, 3), *clf = mft_clamp(x, 0.5, 3);
        CHECK(cl && mft_tensor_dtype(cl) == EW_DTS[di]);
        CHECK(clf && mft_tensor_dtype(clf) == (tu_is_float(EW_DTS[di]) ? EW_DTS[di] : MFT_F32));
        mft_tensor *all[] = {x, p, ph, cl, clf};
        for (int k = 0; k < 5; k++) mft_tensor_release(all[k]);
    }
    /* where: cond excluded from promotion; addcmul: all three */
    mft_tensor *cf = t1(MFT_F64, 1, 1), *a = t1(MFT_I32, 1, 1), *b = t1(MFT_U8, 1, 0), *z = t1(MFT_F32, 0, 1);
    mft_tensor *w1 = mft_where(cf, a, b), *w2 = mft_where(b, a, z), *am = mft_addcmul(b, a, z, 1);
    CHECK(w1 && mft_tensor_dtype(w1) == MFT_I32);
    CHECK(w2 && mft_tensor_dtype(w2) == MFT_F32); /* I32 dims + F32 0-dim -> F32 */
    CHECK(am && mft_tensor_dtype(am) == MFT_F32);
    CHECK(!mft_can_cast(MFT_F32, MFT_I32) && !mft_can_cast(MFT_F64, MFT_U8) && mft_can_cast(MFT_I64, MFT_U8) &&
          mft_can_cast(MFT_U8, MFT_F32) && mft_can_cast(MFT_F64, MFT_F32));
    mft_tensor *all[] = {cf, a, b, z, w1, w2, am};
    for (int k = 0; k < 7; k++) mft_tensor_release(all[k]);
}

/* ------------------------------------------------------------------ output layout (docs/spec.md §4), a few hand-derived cases */

static bool strides_are(const mft_tensor *t, int64_t s0, int64_t s1, int64_t s2, int64_t s3) {
    if (!t || mft_tensor_ndim(t) != 4) return false;
    const int64_t *s = mft_tensor_strides(t);
    return s[0] == s0 && s[1] == s1 && s[2] == s2 && s[3] == s3;
}

static void test_output_layout_rules(void) {
    const int64_t sz[4] = {2, 3, 4, 5}, c1[4] = {1, 3, 1, 1}, hw[2] = {4, 5};
    mft_tensor *cl = mft_full(4, sz, MFT_F32, MFT_CHANNELS_LAST, 1);
    mft_tensor *cf = mft_full(4, sz, MFT_F32, MFT_CONTIGUOUS, 2);
    mft_tensor *bias = mft_full(4, c1, MFT_F32, MFT_CONTIGUOUS, 3);
    mft_tensor *plane = mft_full(2, hw, MFT_F32, MFT_CONTIGUOUS, 4);
    mft_tensor *scal = mft_full(0, NULL, MFT_F64, MFT_CONTIGUOUS, 5);
    mft_tensor *r[10] = {
        mft_add(cl, bias),  /* NHWC + (1,C,1,1) -> NHWC */
        mft_add(cf, cl),    /* NCHW + NHWC -> NCHW (first wins) */
        mft_add(cl, cf),    /* NHWC + NCHW -> NHWC */
        mft_mul(cl, plane), /* NHWC * (H,W) -> NHWC */
        mft_sub(cl, scal),  /* NHWC - 0-dim -> NHWC */
        mft_add_scalar(cl, 1), mft_sigmoid(cl),
        mft_where(cf, cl, bias), /* cond is the first operand: NCHW */
        mft_addcmul(cl, cf, bias, 2),
        mft_add(bias, cl), /* (1,C,1,1) + NHWC: bias's dims are broadcast, NHWC decides */
    };
    for (int i = 0; i < 10; i++) {
        bool want_cl = i != 1 && i != 7;
        bool ok = want_cl ? strides_are(r[i], 60, 1, 15, 3) : strides_are(r[i], 60, 20, 5, 1);
        CHECK_MSG(ok && mft_tensor_format(r[i]) == (want_cl ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS),
                  "layout case %d: want %s", i, want_cl ? "NHWC" : "NCHW");
    }
    /* where(cond NHWC, NCHW, ...): cond is the first operand */
    mft_tensor *w = mft_where(cl, cf, cf);
    CHECK(strides_are(w, 60, 1, 15, 3));
    /* ambiguous strides (C == 1): the tag of the first tensor operand */
    const int64_t s1[4] = {2, 1, 4, 5};
    mft_tensor *a_cl = mft_full(4, s1, MFT_F32, MFT_CHANNELS_LAST, 1);
    mft_tensor *a_cf = mft_full(4, s1, MFT_F32, MFT_CONTIGUOUS, 1);
    mft_tensor *x1 = mft_add(a_cl, a_cf), *x2 = mft_add(a_cf, a_cl), *x3 = mft_relu(a_cl), *x4 = mft_neg(a_cf);
    CHECK(x1 && mft_tensor_format(x1) == MFT_CHANNELS_LAST);
    CHECK(x2 && mft_tensor_format(x2) == MFT_CONTIGUOUS);
    CHECK(x3 && mft_tensor_format(x3) == MFT_CHANNELS_LAST);
    CHECK(x4 && mft_tensor_format(x4) == MFT_CONTIGUOUS);
    CHECK(x1 && mft_tensor_is_contiguous(x1, MFT_CHANNELS_LAST) && mft_tensor_is_contiguous(x1, MFT_CONTIGUOUS));
    /* in place and _out keep the destination's own layout */
    mft_tensor *o = mft_empty(4, sz, MFT_F32, MFT_CONTIGUOUS);
    CHECK(mft_add_out(o, cl, cl) == MFT_OK && strides_are(o, 60, 20, 5, 1) && mft_tensor_format(o) == MFT_CONTIGUOUS);
    CHECK(mft_add_(cl, cf) == MFT_OK && strides_are(cl, 60, 1, 15, 3) && mft_tensor_format(cl) == MFT_CHANNELS_LAST);
    mft_tensor *all[] = {cl, cf, bias, plane, scal, w, a_cl, a_cf, x1, x2, x3, x4, o};
    for (int i = 0; i < 13; i++) mft_tensor_release(all[i]);
    for (int i = 0; i < 10; i++) mft_tensor_release(r[i]);
}

/* ------------------------------------------------------------------ edges ops.h promises */

static mft_tensor *vec(mft_dtype dt, int n, const double *v) {
    int64_t sz = n;
    mft_tensor *t = mft_empty(1, &sz, dt, MFT_CONTIGUOUS);
    for (int64_t i = 0; i < n; i++) mft_tensor_set(t, &i, v[i]);
    return t;
}
/* r holds exactly want[0..n) (NaN matches NaN; -0 vs +0 not distinguished) */
static bool vec_is(const mft_tensor *r, mft_dtype dt, int n, const double *want) {
    if (!r || mft_tensor_dtype(r) != dt || mft_tensor_ndim(r) != 1 || mft_tensor_sizes(r)[0] != n) return false;
    for (int64_t i = 0; i < n; i++) {
        double g = mft_tensor_get(r, &i);
        if (!(g == want[i] || (isnan(g) && isnan(want[i])))) {
            fprintf(stderr, "  element %lld: got %.17g, want %.17g\n", (long long)i, g, want[i]);
            return false;
        }
    }
    return true;
}
#define VEC_IS(r, dt, ...)                                                                             \
    do {                                                                                               \
        const double w_[] = {__VA_ARGS__};                                                             \
        mft_tensor *r_ = (r);                                                                          \
        CHECK_MSG(vec_is(r_, dt, (int)(sizeof w_ / sizeof *w_), w_), "%s (%s)", #r,                    \
                  r_ ? "values" : mft_last_error_message());                                           \
        mft_tensor_release(r_);                                                                        \
    } while (0)

static void test_nan_inf_edges(void) {
    for (int f = 0; f < 2; f++) {
        mft_dtype dt = f ? MFT_F64 : MFT_F32;
        const double av[] = {NAN, 1, NAN, -2, 3}, bv[] = {1, NAN, NAN, 5, -INFINITY};
        mft_tensor *a = vec(dt, 5, av), *b = vec(dt, 5, bv);
        VEC_IS(mft_maximum(a, b), dt, NAN, NAN, NAN, 5, 3);
        VEC_IS(mft_minimum(a, b), dt, NAN, NAN, NAN, -2, -INFINITY);
        VEC_IS(mft_maximum_scalar(a, 0), dt, NAN, 1, NAN, 0, 3);
        VEC_IS(mft_minimum_scalar(a, 0), dt, NAN, 0, NAN, -2, 0);
        VEC_IS(mft_maximum_scalar(b, NAN), dt, NAN, NAN, NAN, NAN, NAN);
        VEC_IS(mft_clamp(a, 0, 2), dt, NAN, 1, NAN, 0, 2);
        VEC_IS(mft_clamp(a, 2, 0), dt, NAN, 0, NAN, 0, 0); /* lo > hi gives hi */
        VEC_IS(mft_hardtanh(a, -1, 1), dt, NAN, 1, NAN, -1, 1);
        VEC_IS(mft_eq(a, a), MFT_U8, 0, 1, 0, 1, 1);
        VEC_IS(mft_ne(a, b), MFT_U8, 1, 1, 1, 1, 1);
        VEC_IS(mft_lt(a, b), MFT_U8, 0, 0, 0, 1, 0);
        VEC_IS(mft_ge_scalar(a, 1), MFT_U8, 0, 1, 0, 0, 1);
        /* round half to even; floor/ceil of negatives */
        const double rv[] = {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.49, -3.51};
        mft_tensor *r = vec(dt, 8, rv);
        VEC_IS(mft_round(r), dt, 0, 2, 2, -0.0, -2, -2, 3, -4);
        VEC_IS(mft_floor(r), dt, 0, 1, 2, -1, -2, -3, 3, -4);
        VEC_IS(mft_ceil(r), dt, 1, 2, 3, -0.0, -1, -2, 4, -3);
        mft_tensor *r2 = mft_clone(r, MFT_PRESERVE);
        CHECK(mft_round_(r2) == MFT_OK);
        CHECK(vec_is(r2, dt, 8, (const double[]){0, 2, 2, 0, -2, -2, 3, -4}));
        mft_tensor_release(r2);
        /* true division by zero */
        const double nv[] = {1, -1, 0}, zv[] = {0, 0, 0};
        mft_tensor *n = vec(dt, 3, nv), *z = vec(dt, 3, zv);
        VEC_IS(mft_div(n, z), dt, INFINITY, -INFINITY, NAN);
        mft_tensor *all[] = {a, b, r, n, z};
        for (int k = 0; k < 5; k++) mft_tensor_release(all[k]);
    }
    /* integer true division gives F32, including division by zero */
    const double nv[] = {1, -1, 0, 7}, zv[] = {0, 0, 0, 2};
    mft_tensor *n = vec(MFT_I32, 4, nv), *z = vec(MFT_I64, 4, zv);
    VEC_IS(mft_div(n, z), MFT_F32, INFINITY, -INFINITY, NAN, 3.5);
    VEC_IS(mft_div_scalar(n, 0), MFT_F32, INFINITY, -INFINITY, NAN, INFINITY);
    VEC_IS(mft_reciprocal(n), MFT_F32, 1, -1, INFINITY, (double)(1.0f / 7.0f));
    mft_tensor_release(n);
    mft_tensor_release(z);
}

static void test_integer_wrap(void) {
    /* I32: values exact in double, read back through mft_tensor_get */
    const double big[] = {2147483647, -2147483647 - 1.0, 65536, -5, 46341};
    mft_tensor *a = vec(MFT_I32, 5, big), *one = vec(MFT_I32, 5, (const double[]){1, 1, 65536, 3, 46341});
    VEC_IS(mft_add(a, one), MFT_I32, -2147483647 - 1.0, -2147483647, 131072, -2, wrap_int(46341u * 2u, MFT_I32));
    VEC_IS(mft_sub(one, a), MFT_I32, wrap_int(1u - 2147483647u, MFT_I32), wrap_int(1u + 2147483648u, MFT_I32), 0, 8, 0);
    VEC_IS(mft_mul(a, one), MFT_I32, 2147483647, -2147483647 - 1.0, 0, -15, wrap_int(46341ull * 46341ull, MFT_I32));
    VEC_IS(mft_neg(a), MFT_I32, -2147483647, -2147483647 - 1.0, -65536, 5, -46341);
    VEC_IS(mft_abs(a), MFT_I32, 2147483647, -2147483647 - 1.0, 65536, 5, 46341);
    VEC_IS(mft_square(a), MFT_I32, 1, 0, 0, 25, wrap_int(46341ull * 46341ull, MFT_I32));
    VEC_IS(mft_add_scalar(a, 1), MFT_I32, -2147483647 - 1.0, -2147483647, 65537, -4, 46342);
    VEC_IS(mft_mul_scalar(a, 2), MFT_I32, -2, 0, 131072, -10, 92682);
    VEC_IS(mft_add_alpha(a, one, 2), MFT_I32, wrap_int(2147483647u + 2u, MFT_I32), -2147483646, 196608, 1,
           wrap_int(46341u * 3u, MFT_I32));
    VEC_IS(mft_pow_scalar(a, 3), MFT_I32, wrap_int(2147483647ull * 2147483647ull * 2147483647ull, MFT_I32), 0, 0,
           -125, wrap_int(46341ull * 46341ull * 46341ull, MFT_I32));
    mft_tensor_release(a);
    mft_tensor_release(one);
    /* U8 wraps modulo 256 */
    mft_tensor *u = vec(MFT_U8, 4, (const double[]){0, 250, 16, 255}), *v = vec(MFT_U8, 4, (const double[]){1, 10, 16, 255});
    VEC_IS(mft_sub(u, v), MFT_U8, 255, 240, 0, 0);
    VEC_IS(mft_add(u, v), MFT_U8, 1, 4, 32, 254);
    VEC_IS(mft_mul(u, v), MFT_U8, 0, (250 * 10) % 256, 0, 1);
    VEC_IS(mft_neg(u), MFT_U8, 0, 6, 240, 1);
    VEC_IS(mft_add_scalar(u, 10), MFT_U8, 10, 4, 26, 9);
    VEC_IS(mft_rsub_scalar(u, 1), MFT_U8, 1, 7, 241, 2);
    VEC_IS(mft_sub_scalar(u, 1), MFT_U8, 255, 249, 15, 254);
    VEC_IS(mft_square(u), MFT_U8, 0, (250 * 250) % 256, 0, 1);
    CHECK(mft_add_(u, v) == MFT_OK);
    CHECK(vec_is(u, MFT_U8, 4, (const double[]){1, 4, 32, 254}));
    mft_tensor_release(u);
    mft_tensor_release(v);
    /* I64 beyond 2^53: raw values */
    int64_t n = 3;
    mft_tensor *x = mft_empty(1, &n, MFT_I64, MFT_CONTIGUOUS), *y = mft_empty(1, &n, MFT_I64, MFT_CONTIGUOUS);
    int64_t xv[3] = {INT64_MAX, INT64_MIN, (INT64_C(1) << 53) + 1}, yv[3] = {1, -1, 2};
    memcpy(mft_tensor_data(x), xv, sizeof xv);
    memcpy(mft_tensor_data(y), yv, sizeof yv);
    mft_tensor *s = mft_add(x, y), *m = mft_mul(x, y), *ng = mft_neg(x);
    CHECK(s && m && ng);
    if (s && m && ng) {
        int64_t sv[3], mv[3], nv[3];
        memcpy(sv, mft_tensor_data(s), sizeof sv);
        memcpy(mv, mft_tensor_data(m), sizeof mv);
        memcpy(nv, mft_tensor_data(ng), sizeof nv);
        CHECK(sv[0] == INT64_MIN && sv[1] == INT64_MAX && sv[2] == (INT64_C(1) << 53) + 3);
        CHECK(mv[0] == INT64_MAX && mv[1] == INT64_MIN && mv[2] == (INT64_C(1) << 54) + 2);
        CHECK(nv[0] == INT64_MIN + 1 && nv[1] == INT64_MIN && nv[2] == -((INT64_C(1) << 53) + 1));
    }
    mft_tensor *all[] = {x, y, s, m, ng};
    for (int k = 0; k < 5; k++) mft_tensor_release(all[k]);
}

static void test_integer_pow(void) {
    const double bv[] = {2, 1, -1, -1, 0, 3, -2, 5, 0, 7}, ev[] = {-1, -2, -3, -2, -1, 0, 3, 2, 0, 1};
    for (int di = 2; di < 4; di++) {
        mft_dtype dt = EW_DTS[di];
        mft_tensor *b = vec(dt, 10, bv), *e = vec(dt, 10, ev);
        VEC_IS(mft_pow(b, e), dt, 0, 1, -1, 1, 0, 1, -8, 25, 1, 7);
        mft_tensor *e32 = vec(MFT_I32, 10, ev);
        VEC_IS(mft_pow(b, e32), dt, 0, 1, -1, 1, 0, 1, -8, 25, 1, 7);
        VEC_IS(mft_pow_scalar(b, 2), dt, 4, 1, 1, 1, 0, 9, 4, 25, 0, 49);
        VEC_IS(mft_pow_scalar(b, 0), dt, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1);
        mft_tensor_release(b);
        mft_tensor_release(e);
        mft_tensor_release(e32);
    }
    /* 3^21 wraps in I32; 2^70 wraps to 0 in I64 */
    mft_tensor *b = vec(MFT_I32, 2, (const double[]){3, 2}), *e = vec(MFT_I32, 2, (const double[]){21, 31});
    VEC_IS(mft_pow(b, e), MFT_I32, wrap_int(10460353203ull, MFT_I32), -2147483647 - 1.0);
    mft_tensor *b64 = vec(MFT_I64, 1, (const double[]){2}), *e64 = vec(MFT_I64, 1, (const double[]){70});
    VEC_IS(mft_pow(b64, e64), MFT_I64, 0);
    /* integer base, non-integral exponent: F32 */
    mft_tensor *q = vec(MFT_I32, 2, (const double[]){4, 9});
    mft_tensor *hf = vec(MFT_F32, 2, (const double[]){0.5, -0.5});
    mft_tensor *p1 = mft_pow_scalar(q, 0.5), *p2 = mft_pow(q, hf);
    CHECK(p1 && mft_tensor_dtype(p1) == MFT_F32 && p2 && mft_tensor_dtype(p2) == MFT_F32);
    if (p1 && p2) {
        int64_t i0 = 0, i1 = 1;
        CHECK_NEAR(mft_tensor_get(p1, &i0), 2.0, 1e-6);
        CHECK_NEAR(mft_tensor_get(p1, &i1), 3.0, 1e-6);
        CHECK_NEAR(mft_tensor_get(p2, &i0), 2.0, 1e-6);
        CHECK_NEAR(mft_tensor_get(p2, &i1), 1.0 / 3.0, 1e-6);
    }
    mft_tensor_release(p1);
    mft_tensor_release(p2);
    mft_tensor *all[] = {b, e, b64, e64, q, hf};
    for (int k = 0; k < 6; k++) mft_tensor_release(all[k]);
}

/* In place / _out aliasing that is allowed: identical views, interleaved halves. */
static void test_allowed_aliasing(void) {
    const int64_t sz[2] = {3, 4};
    mft_tensor *a = mft_arange(0, 12, 1, MFT_F32), *v = mft_view(a, 2, sz);
    CHECK(mft_add_(v, v) == MFT_OK); /* 2x */
    CHECK(mft_mul_out(v, v, v) == MFT_OK); /* (2x)^2 */
    int64_t i[2] = {2, 3};
    CHECK(mft_tensor_get(v, i) == 4.0 * 121.0);
    mft_tensor *w = mft_view(a, 2, sz); /* a different header, same layout */
    CHECK(mft_sub_(v, w) == MFT_OK);
    CHECK(mft_tensor_get(v, i) == 0.0);
    /* even and odd elements of one buffer: disjoint */
    mft_tensor *b = mft_arange(0, 12, 1, MFT_F64);
    mft_tensor *ev = mft_slice(b, 0, 0, 12, 2), *od = mft_slice(b, 0, 1, 12, 2);
    CHECK(mft_neg_out(ev, od) == MFT_OK);
    CHECK(mft_add_(od, ev) == MFT_OK); /* od := od - od = 0 */
    int64_t k0 = 0, k4 = 4, k5 = 5;
    CHECK(mft_tensor_get(b, &k0) == -1.0 && mft_tensor_get(b, &k4) == -5.0 && mft_tensor_get(b, &k5) == 0.0);
    mft_tensor *all[] = {a, v, w, b, ev, od};
    for (int k = 0; k < 6; k++) mft_tensor_release(all[k]);
}

/* Results of ops made inside a scope belong to it (tensor.h); nothing leaks. */
static void test_scope_ownership(void) {
    const int64_t sz[4] = {2, 3, 4, 5};
    int64_t t0 = mft_live_tensors(), s0 = mft_live_storages();
    mft_tensor *keep = NULL;
    CHECK(mft_scope_begin() == MFT_OK);
    mft_tensor *a = mft_full(4, sz, MFT_F32, MFT_CHANNELS_LAST, 2);
    mft_tensor *b = mft_full(4, sz, MFT_F64, MFT_CONTIGUOUS, 3);
    mft_tensor *c = mft_add(a, b), *d = mft_sigmoid(c), *e = mft_where(a, c, d), *f = mft_addcmul(e, a, b, 2);
    mft_tensor *g = mft_lerp_scalar(d, e, 0.5), *h = mft_sum(f, 0, NULL, false), *i = mft_var(g, 0, NULL, 1, true);
    mft_tensor *j = mft_argmax(f, 1, true), *k = mft_sum_to_size(f, 1, sz + 3), *l = mft_eq_scalar(a, 2);
    CHECK(c && d && e && f && g && h && i && j && k && l);
    CHECK(mft_add_(a, a) == MFT_OK && mft_mul_out(c, a, b) == MFT_OK);
    keep = mft_scope_keep(h);
    CHECK(keep == h);
    CHECK(mft_scope_end() == MFT_OK);
    CHECK_EQ_I(mft_live_tensors(), t0 + 1);
    CHECK(keep && mft_tensor_get(keep, NULL) == 120.0 * (5.0 + 2.0 * 2.0 * 3.0)); /* f = 2+3 + 2*2*3 */
    mft_tensor_release(keep);
    CHECK_EQ_I(mft_live_tensors(), t0);
    CHECK_EQ_I(mft_live_storages(), s0);
}

int main(void) {
    printf("threads: %d\n", mft_num_threads());
    RUN(test_scope_ownership);
    RUN(test_promotion_examples);
    RUN(test_output_layout_rules);
    RUN(test_nan_inf_edges);
    RUN(test_integer_wrap);
    RUN(test_integer_pow);
    RUN(test_allowed_aliasing);
    RUN(test_fill_zero);
    RUN(test_big_destinations);
    RUN(test_high_ranks);
    RUN(test_all_ops_random_layouts);
    RUN(test_layout_invariance);
    TEST_MAIN_END();
}
