/* ops/elementwise/backward.c — autograd of the elementwise family (unary,
 * scalar-parameter, binary and ternary ops): the fused backward kernels
 * (one pass through the elementwise iterator each, F32/F64, parallel, written
 * straight into a tensor laid out like the input), the per-op derivative
 * formulas (PyTorch's, including its tie conventions: relu/hardtanh/clamp at
 * their kinks, maximum/minimum splitting ties half/half), the record calls
 * the entry points of unary.c, binary.c and ternary.c make, and the
 * refusal of in-place / out= writes while recording.
 *
 * Entry points call mft__agew_unary / _binary / _ternary with the op's
 * registry id right after computing the result; they cost one thread-local test
 * when nothing records. Saved tensors: only what each formula reads (add
 * saves nothing, relu/sigmoid/tanh/exp save the output, mul saves the other
 * operand of each input that needs a gradient). */
#include <stdio.h>
#include <string.h>
#include "autograd_internal.h"
#include "ops_internal.h"

/* ---------------------------------------------------------------- kernels
 * BW_LOOP(name, D, NIN, EXPR): out = EXPR over g (input 1) and a, b (inputs
 * 2, 3 when NIN says so), parameters p0, p1. Packed rows get a plain loop
 * the compiler vectorises; anything else walks the strides. */
#define BW_LOOP(name, D, NIN, EXPR)                                                           \
    static void bwl_##name##_##D(void *ctx, char **data, const int64_t *st, int64_t n0,       \
                                 int64_t n1) {                                               \
        typedef MFT__T_##D T;                                                                \
        const double *prm = ctx;                                                             \
        const T p0 = (T)prm[0], p1 = (T)prm[1];                                              \
        (void)p0, (void)p1;                                                                  \
        enum { NOP = (NIN) + 1 };                                                            \
        const int64_t es = (int64_t)sizeof(T);                                               \
        bool packed = true;                                                                  \
        for (int k = 0; k < NOP; k++) packed = packed && st[k] == es;                        \
        char *const d0 = data[0];                                                            \
        const char *const q1 = data[1];                                                      \
        const char *const q2 = (NIN) > 1 ? data[(NIN) > 1 ? 2 : 1] : q1;                     \
        const char *const q3 = (NIN) > 2 ? data[(NIN) > 2 ? 3 : 1] : q1;                     \
        const int64_t so = st[0], s1 = st[1], s2 = (NIN) > 1 ? st[(NIN) > 1 ? 2 : 1] : s1;   \
        const int64_t s3 = (NIN) > 2 ? st[(NIN) > 2 ? 3 : 1] : s1;                           \
        const int64_t ro = st[NOP], r1 = st[NOP + 1];                                        \
        const int64_t r2 = (NIN) > 1 ? st[NOP + ((NIN) > 1 ? 2 : 1)] : r1;                   \
        const int64_t r3 = (NIN) > 2 ? st[NOP + ((NIN) > 2 ? 3 : 1)] : r1;                   \
        for (int64_t j = 0; j < n1; j++) {                                                   \
            char *o = d0 + j * ro;                                                           \
            const char *pg = q1 + j * r1, *pa = q2 + j * r2, *pb = q3 + j * r3;              \
            if (packed) {                                                                    \
                T *O = (T *)(void *)o;                                                       \
                const T *G = (const T *)(const void *)pg, *A = (const T *)(const void *)pa;  \
                const T *B = (const T *)(const void *)pb;                                    \
                for (int64_t i = 0; i < n0; i++) {                                           \
                    const T g = G[i], a = A[i], b = B[i];                                    \
                    (void)a, (void)b;                                                        \
                    O[i] = (T)(EXPR);                                                        \
                }                                                                            \
            } else {                                                                         \
                for (int64_t i = 0; i < n0; i++) {                                           \
                    const T g = *(const T *)(const void *)(pg + i * s1);                     \
                    const T a = *(const T *)(const void *)(pa + i * s2);                     \
                    const T b = *(const T *)(const void *)(pb + i * s3);                     \
                    (void)a, (void)b;                                                        \
                    *(T *)(void *)(o + i * so) = (T)(EXPR);                                  \
                }                                                                            \
            }                                                                                \
        }                                                                                    \
    }

#define BW_OP(name, NIN, EXPR_F32, EXPR_F64)                                                  \
    BW_LOOP(name, F32, NIN, EXPR_F32)                                                        \
    BW_LOOP(name, F64, NIN, EXPR_F64)                                                        \
    static const mft__ew_op bw_##name = {"mft_backward(" #name ")", NIN, MFT__EW_SAME, 0, true,   \
                                         false,                                             \
                                         {[MFT_F32] = bwl_##name##_F32,                      \
                                          [MFT_F64] = bwl_##name##_F64},                     \
                                         false};
/* EXPR(fsuffix) stamps an expression for both float types */
#define BW_OPF(name, NIN, EXPR) BW_OP(name, NIN, EXPR(f), EXPR())
#define FN(f, s) f##s

/* g * p0, g / p0 */
#define X_scale(s) g * p0
BW_OPF(scale, 1, X_scale)
#define X_divs(s) g / p0
BW_OPF(divs, 1, X_divs)
/* g * a, g * a * p0, g / a */
#define X_mul(s) g * a
BW_OPF(mul, 2, X_mul)
#define X_mulp(s) g * a * p0
BW_OPF(mulp, 2, X_mulp)
#define X_div(s) g / a
BW_OPF(div, 2, X_div)
/* unary, from the output y (= a) */
#define X_relu(s) (a <= 0 ? (T)0 : g) /* threshold_backward(grad, result, 0) */
BW_OPF(relu, 2, X_relu)
#define X_sigmoid(s) g * (((T)1 - a) * a)
BW_OPF(sigmoid, 2, X_sigmoid)
#define X_tanh(s) g * ((T)1 - a * a)
BW_OPF(tanh, 2, X_tanh)
#define X_sqrt(s) g / ((T)2 * a)
BW_OPF(sqrt, 2, X_sqrt)
#define X_rsqrt(s) (T)-0.5 * g * (a * a * a)
BW_OPF(rsqrt, 2, X_rsqrt)
#define X_recip(s) -g * (a * a)
BW_OPF(recip, 2, X_recip)
/* unary, from the input x (= a) */
#define X_abs(s) g * (T)((a > 0) - (a < 0))
BW_OPF(abs, 2, X_abs)
#define X_sin(s) g * FN(cos, s)(a)
BW_OPF(sin, 2, X_sin)
#define X_cos(s) -g * FN(sin, s)(a)
BW_OPF(cos, 2, X_cos)
#define X_square(s) g * ((T)2 * a)
BW_OPF(square, 2, X_square)
#define X_gelu(s)                                                                            \
    g * ((T)0.5 * ((T)1 + FN(erf, s)(a * (T)0.70710678118654752440)) +                       \
         a * (T)0.39894228040143267794 * FN(exp, s)((T)-0.5 * a * a))
BW_OPF(gelu, 2, X_gelu)
#define X_silu(s) g * ((T)1 / ((T)1 + FN(exp, s)(-a))) * ((T)1 + a * ((T)1 - (T)1 / ((T)1 + FN(exp, s)(-a))))
BW_OPF(silu, 2, X_silu)
#define X_maxs(s) (a == p0 ? g * (T)0.5 : a < p0 ? (T)0 : g)
BW_OPF(maxs, 2, X_maxs)
#define X_mins(s) (a == p0 ? g * (T)0.5 : a > p0 ? (T)0 : g)
BW_OPF(mins, 2, X_mins)
#define X_pows(s) (p0 == 0 ? (T)0 : g * (p0 * FN(pow, s)(a, p0 - (T)1)))
BW_OPF(pows, 2, X_pows)
#define X_leaky(s) (a > 0 ? g : g * p0)
BW_OPF(leaky, 2, X_leaky)
#define X_clamp(s) ((a >= p0 && a <= p1) ? g : (T)0)
BW_OPF(clamp, 2, X_clamp)
#define X_hardtanh(s) ((a <= p0 || a >= p1) ? (T)0 : g)
BW_OPF(hardtanh, 2, X_hardtanh)
#define X_lerps(s) g * ((T)1 - a)
BW_OPF(lerps, 2, X_lerps)
/* binary: (g, a, b) */
#define X_divb(s) -g * a / (b * b)
BW_OPF(divb, 3, X_divb)
#define X_maxa(s) (a == b ? g * (T)0.5 : a < b ? (T)0 : g)
BW_OPF(maxa, 3, X_maxa)
#define X_maxb(s) (a == b ? g * (T)0.5 : a > b ? (T)0 : g)
BW_OPF(maxb, 3, X_maxb)
#define X_mina(s) (a == b ? g * (T)0.5 : a > b ? (T)0 : g)
BW_OPF(mina, 3, X_mina)
#define X_minb(s) (a == b ? g * (T)0.5 : a < b ? (T)0 : g)
BW_OPF(minb, 3, X_minb)
#define X_powa(s) (b == 0 ? (T)0 : g * (b * FN(pow, s)(a, b - (T)1)))
BW_OPF(powa, 3, X_powa)
#define X_powb(s) ((a == 0 && b >= 0) ? (T)0 : g * (FN(pow, s)(a, b) * FN(log, s)(a)))
BW_OPF(powb, 3, X_powb)
#define X_lerpw(s) g * (b - a) /* (g, start, end) */
BW_OPF(lerpw, 3, X_lerpw)

/* ---------------------------------------------------------------- helpers */
static mft_format bw_target(const mft__ag_input *in) {
    return mft__rule_grad_format(in->tag, in->ndim);
}

static bool bw_same_sizes(const mft__ag_input *in, const mft_tensor *t) {
    return t->ndim == in->ndim &&
           !memcmp(t->sizes, in->sizes, (size_t)in->ndim * sizeof(int64_t));
}

/* r (consumed) summed down to input k's sizes and cast to its dtype. */
static mft_tensor *bw_finish(const mft__ag_input *in, mft_tensor *r) {
    if (!r) return NULL;
    if (!bw_same_sizes(in, r)) {
        mft_tensor *s = mft_sum_to_size(r, in->ndim, in->sizes);
        mft_tensor_release(r);
        if (!s) return NULL;
        r = s;
    }
    if (r->dtype != in->dtype) {
        mft_tensor *c = mft_to_dtype(r, in->dtype);
        mft_tensor_release(r);
        r = c;
    }
    return r;
}

/* The gradient of input in: kernel op over ins (ins[0] = g, which has the
 * node output's sizes). Same sizes: one pass into a tensor laid out like the
 * input, in its dtype. Broadcast: the op in g's layout, then sum_to_size. */
static mft_tensor *bw_run(const mft__ag_input *in, const mft__ew_op *op,
                          const mft_tensor *const *ins, double p0, double p1) {
    const double prm[2] = {p0, p1};
    if (bw_same_sizes(in, ins[0])) {
        mft_tensor *out = mft_empty(in->ndim, in->sizes, in->dtype, bw_target(in));
        if (!out) return NULL;
        if (mft__ew_run_into(op, op->name, out, ins, prm) != MFT_OK) {
            mft_tensor_release(out);
            return NULL;
        }
        return out;
    }
    return bw_finish(in, mft__ew_run(op, ins, prm));
}

/* g passed through (add, sub's a, ...): g itself when it already has the
 * input's sizes, dtype and format, else one copy into the input's layout.
 * A copy that changes the layout is a gradient conversion of op (Note
 * [Conversions and their causes]); a pure dtype cast is not. */
static mft_tensor *bw_identity(const char *op, const mft__ag_input *in, mft_tensor *g) {
    if (!bw_same_sizes(in, g)) return bw_finish(in, mft_tensor_retain(g));
    const mft_format f = bw_target(in);
    const bool layout_ok = mft_tensor_is_contiguous(g, f);
    if (g->dtype == in->dtype && layout_ok) return mft_tensor_retain(g);
    mft_tensor *out = mft_empty(in->ndim, in->sizes, in->dtype, f);
    if (out && mft_copy_(out, g) != MFT_OK) {
        mft_tensor_release(out);
        return NULL;
    }
    if (out && !layout_ok) mft__note_conversion_as(MFT_CAUSE_GRADIENT, op, g, out);
    return out;
}

static mft_tensor *bw1(const mft__ag_input *in, const mft__ew_op *op, mft_tensor *g,
                       double p0, double p1) {
    const mft_tensor *ins[1] = {g};
    return bw_run(in, op, ins, p0, p1);
}
static mft_tensor *bw2(const mft__ag_input *in, const mft__ew_op *op, mft_tensor *g,
                       const mft_tensor *a, double p0, double p1) {
    const mft_tensor *ins[2] = {g, a};
    return bw_run(in, op, ins, p0, p1);
}
static mft_tensor *bw3(const mft__ag_input *in, const mft__ew_op *op, mft_tensor *g,
                       const mft_tensor *a, const mft_tensor *b) {
    const mft_tensor *ins[3] = {g, a, b};
    return bw_run(in, op, ins, 0, 0);
}

static mft_tensor *bw_zeros(const mft__ag_input *in) {
    return mft_zeros(in->ndim, in->sizes, in->dtype, bw_target(in));
}

/* ---------------------------------------------------------------- op tables
 * Which ops are differentiable is the registry's word (kind DIFF in
 * mft/registry.h); the formulas below switch on the op id; this table says
 * only what a unary formula reads: the input (SAVE_IN) or the output
 * (SAVE_OUT). */
enum { SAVE_IN = 1, SAVE_OUT = 2 };

static const unsigned char agew_unary_saves[MFT__OP_COUNT] = {
    [MFT__OP_ABS] = SAVE_IN,         [MFT__OP_SQRT] = SAVE_OUT,     [MFT__OP_RSQRT] = SAVE_OUT,
    [MFT__OP_EXP] = SAVE_OUT,        [MFT__OP_LOG] = SAVE_IN,       [MFT__OP_SIN] = SAVE_IN,
    [MFT__OP_COS] = SAVE_IN,         [MFT__OP_TANH] = SAVE_OUT,     [MFT__OP_SIGMOID] = SAVE_OUT,
    [MFT__OP_RELU] = SAVE_OUT,       [MFT__OP_GELU] = SAVE_IN,      [MFT__OP_SILU] = SAVE_IN,
    [MFT__OP_SQUARE] = SAVE_IN,      [MFT__OP_RECIPROCAL] = SAVE_OUT,
    [MFT__OP_MAXIMUM_SCALAR] = SAVE_IN, [MFT__OP_MINIMUM_SCALAR] = SAVE_IN,
    [MFT__OP_POW_SCALAR] = SAVE_IN,  [MFT__OP_LEAKY_RELU] = SAVE_IN, [MFT__OP_CLAMP] = SAVE_IN,
    [MFT__OP_HARDTANH] = SAVE_IN,
};

/* True when the registry marks op differentiable. */
static bool agew_differentiable(mft__op_id op) {
    const mft_op_info *info = mft_op_at((int)op);
    return info && info->kind == MFT_OP_KIND_DIFF;
}

typedef struct agew_params {
    mft__op_id op;
    double p0, p1;
} agew_params;

/* ---------------------------------------------------------------- unary */
static mft_status agew_unary_bw(const mft__ag_node *n, mft_tensor *const *gout,
                                mft_tensor **gin) {
    const agew_params *p = n->params;
    const mft__ag_input *in = &n->in[0];
    mft_tensor *g = gout[0];
    const mft_tensor *s = n->saved[0]; /* the input or the output, per the table */
    mft_tensor *r = NULL;
    switch (p->op) {
    case MFT__OP_NEG: r = bw1(in, &bw_scale, g, -1, 0); break;
    case MFT__OP_ABS: r = bw2(in, &bw_abs, g, s, 0, 0); break;
    case MFT__OP_SQRT: r = bw2(in, &bw_sqrt, g, s, 0, 0); break;
    case MFT__OP_RSQRT: r = bw2(in, &bw_rsqrt, g, s, 0, 0); break;
    case MFT__OP_EXP: r = bw2(in, &bw_mul, g, s, 0, 0); break;
    case MFT__OP_LOG: r = bw2(in, &bw_div, g, s, 0, 0); break;
    case MFT__OP_SIN: r = bw2(in, &bw_sin, g, s, 0, 0); break;
    case MFT__OP_COS: r = bw2(in, &bw_cos, g, s, 0, 0); break;
    case MFT__OP_TANH: r = bw2(in, &bw_tanh, g, s, 0, 0); break;
    case MFT__OP_SIGMOID: r = bw2(in, &bw_sigmoid, g, s, 0, 0); break;
    case MFT__OP_RELU: r = bw2(in, &bw_relu, g, s, 0, 0); break;
    case MFT__OP_GELU: r = bw2(in, &bw_gelu, g, s, 0, 0); break;
    case MFT__OP_SILU: r = bw2(in, &bw_silu, g, s, 0, 0); break;
    case MFT__OP_SQUARE: r = bw2(in, &bw_square, g, s, 0, 0); break;
    case MFT__OP_RECIPROCAL: r = bw2(in, &bw_recip, g, s, 0, 0); break;
    case MFT__OP_SIGN:
    case MFT__OP_FLOOR:
    case MFT__OP_CEIL:
    case MFT__OP_ROUND: r = bw_zeros(in); break;
    case MFT__OP_ADD_SCALAR:
    case MFT__OP_SUB_SCALAR: r = bw_identity(n->name, in, g); break;
    case MFT__OP_RSUB_SCALAR: r = bw1(in, &bw_scale, g, -1, 0); break;
    case MFT__OP_MUL_SCALAR: r = bw1(in, &bw_scale, g, p->p0, 0); break;
    case MFT__OP_DIV_SCALAR: r = bw1(in, &bw_divs, g, p->p0, 0); break;
    case MFT__OP_MAXIMUM_SCALAR: r = bw2(in, &bw_maxs, g, s, p->p0, 0); break;
    case MFT__OP_MINIMUM_SCALAR: r = bw2(in, &bw_mins, g, s, p->p0, 0); break;
    case MFT__OP_POW_SCALAR: r = bw2(in, &bw_pows, g, s, p->p0, 0); break;
    case MFT__OP_LEAKY_RELU: r = bw2(in, &bw_leaky, g, s, p->p0, 0); break;
    case MFT__OP_CLAMP: r = bw2(in, &bw_clamp, g, s, p->p0, p->p1); break;
    case MFT__OP_HARDTANH: r = bw2(in, &bw_hardtanh, g, s, p->p0, p->p1); break;
    default:
        mft__set_error(MFT_ERR_INTERNAL, "mft_backward: op '%s': no unary formula (op id %d)", n->name,
                       (int)p->op);
        return MFT_ERR_INTERNAL;
    }
    if (!r) return mft_last_error();
    gin[0] = r;
    return MFT_OK;
}

mft_tensor *mft__agew_unary(mft__op_id op, const char *fn, const mft_tensor *x, mft_tensor *y,
                            double p0, double p1) {
    if (!y || !mft__ag_wants(1, &x) || !mft__is_float(y->dtype)) return y;
    if (!agew_differentiable(op)) return y;
    agew_params prm = {op, p0, p1};
    int save = agew_unary_saves[op];
    if (mft__ag_record1(fn, mft__op_name(op), agew_unary_bw, x, y, save & SAVE_IN,
                        save & SAVE_OUT, &prm, sizeof prm) != MFT_OK) {
        mft__ag_drop_result(y);
        return NULL;
    }
    return y;
}

/* ---------------------------------------------------------------- binary
 * saved[0] = a, saved[1] = b, each only when a formula reads it. */
static mft_status agew_binary_bw(const mft__ag_node *n, mft_tensor *const *gout,
                                 mft_tensor **gin) {
    const agew_params *p = n->params;
    mft_tensor *g = gout[0];
    const mft_tensor *a = n->saved[0], *b = n->saved[1];
    for (int k = 0; k < 2; k++) {
        const mft__ag_input *in = &n->in[k];
        if (!in->needs_grad) continue;
        mft_tensor *r = NULL;
        switch (p->op) {
        case MFT__OP_ADD: r = bw_identity(n->name, in, g); break;
        case MFT__OP_SUB: r = k == 0 ? bw_identity(n->name, in, g) : bw1(in, &bw_scale, g, -1, 0); break;
        case MFT__OP_ADD_ALPHA: r = k == 0 ? bw_identity(n->name, in, g) : bw1(in, &bw_scale, g, p->p0, 0); break;
        case MFT__OP_MUL: r = bw2(in, &bw_mul, g, k == 0 ? b : a, 0, 0); break;
        case MFT__OP_DIV: r = k == 0 ? bw2(in, &bw_div, g, b, 0, 0) : bw3(in, &bw_divb, g, a, b); break;
        case MFT__OP_MAXIMUM: r = bw3(in, k == 0 ? &bw_maxa : &bw_maxb, g, a, b); break;
        case MFT__OP_MINIMUM: r = bw3(in, k == 0 ? &bw_mina : &bw_minb, g, a, b); break;
        case MFT__OP_POW: r = bw3(in, k == 0 ? &bw_powa : &bw_powb, g, a, b); break;
        default:
            mft__set_error(MFT_ERR_INTERNAL, "mft_backward: op '%s': no binary formula (op id %d)",
                           n->name, (int)p->op);
            return MFT_ERR_INTERNAL;
        }
        if (!r) return mft_last_error();
        gin[k] = r;
    }
    return MFT_OK;
}

mft_tensor *mft__agew_binary(mft__op_id op, const char *fn, const mft_tensor *a,
                             const mft_tensor *b, mft_tensor *c, double alpha) {
    const mft_tensor *ins[2] = {a, b};
    if (!c || !mft__ag_wants(2, ins) || !mft__is_float(c->dtype)) return c;
    if (!agew_differentiable(op)) return c;
    bool ra = mft_tensor_requires_grad(a), rb = mft_tensor_requires_grad(b);
    const mft_tensor *saved[2] = {NULL, NULL};
    switch (op) {
    case MFT__OP_MUL: saved[0] = rb ? a : NULL; saved[1] = ra ? b : NULL; break;
    case MFT__OP_DIV: saved[0] = rb ? a : NULL; saved[1] = b; break;
    case MFT__OP_MAXIMUM: case MFT__OP_MINIMUM: case MFT__OP_POW: saved[0] = a; saved[1] = b; break;
    default: break;
    }
    agew_params prm = {op, alpha, 0};
    mft_tensor *outs[1] = {c};
    if (mft__ag_record(fn, mft__op_name(op), agew_binary_bw, 2, ins, 1, outs, 2, saved, &prm,
                       sizeof prm) != MFT_OK) {
        mft__ag_drop_result(c);
        return NULL;
    }
    return c;
}

/* ---------------------------------------------------------------- ternary
 * where: saved[0] = cond; addcmul: saved = {a, b}; lerp: {start, end,
 * weight}; lerp_scalar: nothing. */
static mft_tensor *bw_where(const mft__ag_input *in, mft_tensor *g, const mft_tensor *cond,
                            bool take_true) {
    mft_tensor *zero = mft_zeros(0, NULL, g->dtype, MFT_CONTIGUOUS);
    if (!zero) return NULL;
    mft_tensor *r = NULL;
    const mft_tensor *t = take_true ? g : zero, *f = take_true ? zero : g;
    if (bw_same_sizes(in, g)) {
        r = mft_empty(in->ndim, in->sizes, in->dtype, bw_target(in));
        if (r && mft_where_out(r, cond, t, f) != MFT_OK) {
            mft_tensor_release(r);
            r = NULL;
        }
    } else {
        r = bw_finish(in, mft_where(cond, t, f));
    }
    mft_tensor_release(zero);
    return r;
}

static mft_status agew_ternary_bw(const mft__ag_node *n, mft_tensor *const *gout,
                                  mft_tensor **gin) {
    const agew_params *p = n->params;
    mft_tensor *g = gout[0];
    mft_tensor *const *s = n->saved;
    for (int k = 0; k < n->nin; k++) {
        const mft__ag_input *in = &n->in[k];
        if (!in->needs_grad) continue;
        mft_tensor *r = NULL;
        switch (p->op) {
        case MFT__OP_WHERE:
            if (k == 0) continue; /* the condition is not differentiable */
            r = bw_where(in, g, s[0], k == 1);
            break;
        case MFT__OP_ADDCMUL:
            r = k == 0 ? bw_identity(n->name, in, g) : bw2(in, &bw_mulp, g, k == 1 ? s[1] : s[0], p->p0, 0);
            break;
        case MFT__OP_LERP:
            r = k == 0   ? bw2(in, &bw_lerps, g, s[2], 0, 0)
                : k == 1 ? bw2(in, &bw_mul, g, s[2], 0, 0)
                         : bw3(in, &bw_lerpw, g, s[0], s[1]);
            break;
        case MFT__OP_LERP_SCALAR: r = bw1(in, &bw_scale, g, k == 0 ? 1.0 - p->p0 : p->p0, 0); break;
        default:
            mft__set_error(MFT_ERR_INTERNAL, "mft_backward: op '%s': no ternary formula (op id %d)",
                           n->name, (int)p->op);
            return MFT_ERR_INTERNAL;
        }
        if (!r) return mft_last_error();
        gin[k] = r;
    }
    return MFT_OK;
}

mft_tensor *mft__agew_ternary(mft__op_id op, const char *fn, const mft_tensor *x,
                              const mft_tensor *a, const mft_tensor *b, mft_tensor *y,
                              double value) {
    const mft_tensor *ins[3] = {x, a, b};
    int nin = b ? 3 : 2; /* lerp_scalar has two tensor inputs */
    if (!y || !mft__ag_wants(nin, ins) || !mft__is_float(y->dtype)) return y;
    if (!agew_differentiable(op)) return y;
    const mft_tensor *saved[3] = {NULL, NULL, NULL};
    int nsaved = 0;
    switch (op) {
    case MFT__OP_WHERE: saved[0] = x; nsaved = 1; break;
    case MFT__OP_ADDCMUL:
        saved[0] = mft_tensor_requires_grad(b) ? a : NULL;
        saved[1] = mft_tensor_requires_grad(a) ? b : NULL;
        nsaved = 2;
        break;
    case MFT__OP_LERP:
        saved[0] = mft_tensor_requires_grad(b) ? x : NULL;
        saved[1] = mft_tensor_requires_grad(b) ? a : NULL;
        saved[2] = (mft_tensor_requires_grad(x) || mft_tensor_requires_grad(a)) ? b : NULL;
        nsaved = 3;
        break;
    default: break;
    }
    agew_params prm = {op, value, 0};
    mft_tensor *outs[1] = {y};
    if (mft__ag_record(fn, mft__op_name(op), agew_ternary_bw, nin, ins, 1, outs, nsaved, saved, &prm,
                       sizeof prm) != MFT_OK) {
        mft__ag_drop_result(y);
        return NULL;
    }
    return y;
}

/* ---------------------------------------------------------------- in place / out= */
mft_status mft__agew_check_into(const char *fn, const mft_tensor *out, int n,
                                const mft_tensor *const *inputs) {
    mft_status st = mft__ag_check_inplace(fn, out);
    if (st != MFT_OK) return st;
    if (n > 0 && inputs[0] != out && mft__ag_wants(n, inputs)) {
        mft__set_error(MFT_ERR_UNSUPPORTED,
                       "%s: out= with an input that requires grad while the tape records is not "
                       "differentiable (use the out-of-place op, or disable grad mode)",
                       fn);
        return MFT_ERR_UNSUPPORTED;
    }
    return MFT_OK;
}
