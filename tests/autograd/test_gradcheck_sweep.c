/* tests/autograd/test_gradcheck_sweep.c — the op registry's promise (mft/registry.h):
 * every differentiable op (kind DIFF) has a backward and a sample in the
 * gradcheck sweep.
 *
 *   - coverage: the table below has at least one sample for every DIFF row
 *     of the registry (read at run time, mft_op_count / mft_op_at), and no
 *     sample names an op that is not a DIFF row (a stale entry after a
 *     rename or a reclassification fails too);
 *   - each sample builds small F64 inputs (deterministic, see grid()), marks
 *     the differentiable ones requires_grad and runs mft_gradcheck;
 *   - "a backward exists": one forward under an open tape records a node
 *     (the result requires grad and is not a leaf), and mft_backward with a
 *     random grad_output succeeds;
 *   - gradient formats (docs/spec.md §5): every input that requires grad gets a
 *     .grad with its sizes and its format tag; the samples whose activation
 *     has a channels-last layout (conv, pool, norm, elementwise, reductions,
 *     softmax, interpolate, pad, dropout, views, conversions, losses) run
 *     with the activation CONTIGUOUS and again CHANNELS_LAST (NDHWC for the
 *     5-D ones, N,L,C for the 1-D ones);
 *   - blocked tensors (docs/spec.md §7.9): every sample runs a third time
 *     with the activation (and the inputs its builder lays out like it) in
 *     nChw16c, or nChw8c for the samples whose (op, variant) sorts at an odd
 *     position. The checks above hold (a blocked input's .grad has its tag
 *     and zero pads), the result equals the contiguous run's bit for bit
 *     (mft_tensor_hash: dtype, sizes, values in logical order; within
 *     rounding for flatten_linear, which sums in the blocked order) and a
 *     blocked result has zero pads. The views refused on blocked tensors by
 *     design (BLOCKED_REFUSED: permute, transpose, unsqueeze, squeeze,
 *     expand with MFT_ERR_FORMAT; view and a step-2 slice of the blocked
 *     dim with MFT_ERR_NOT_VIEWABLE) assert that refusal instead (no
 *     result, no tape node, no leak); every other DIFF op must have a
 *     blocked run.
 * Values are kept away from kinks and ties (relu, abs, clamp, max pools,
 * amax, maximum, floor / round jumps) so central differences are valid;
 * sign / floor / ceil / round give zero gradients, which gradcheck checks
 * like any other away from their jumps. */
#include <stdbool.h>
#include "harness.h"
#include "test_util.h"

#define CT MFT_CONTIGUOUS
#define CL MFT_CHANNELS_LAST
#define MAXIN 6

/* ---------------------------------------------------------------- inputs */
static const int64_t S4[4] = {2, 3, 4, 4};    /* N, C, H, W */
static const int64_t S5[5] = {1, 2, 3, 4, 4}; /* N, C, D, H, W */
static const int64_t S3[3] = {2, 3, 6};       /* N, C, L */
static const int64_t SB[4] = {1, 3, 1, 4};    /* broadcasts against S4 */

/* An F64 tensor of sizes sz (laid out in f for ranks 3-5, else contiguous)
 * whose n elements are lo + (p(e) + phase) * (hi - lo) / n in logical order,
 * p a permutation of 0..n-1 drawn from seed. The values are all distinct
 * (no ties in max pools, amax, maximum), at least min(phase, 1 - phase)
 * steps apart from every point c with (c - lo) * n / (hi - lo) integral
 * (0, the integers and half-integers for [-2, 2] and n a multiple of 8: the
 * kinks of relu / abs / sign / floor / round and the clamp bounds below),
 * and two tensors built with phases 0.3 and 0.7 never hold the same value. */
static mft_tensor *grid(int nd, const int64_t *sz, mft_format f, uint64_t seed, double lo,
                        double hi, double phase) {
    mft_tensor *t = mft_empty(nd, sz, MFT_F64, nd >= 3 && nd <= 5 ? f : CT);
    if (!t) return NULL;
    int64_t n = tu_shape_numel(nd, sz);
    int64_t *perm = malloc((size_t)(n > 0 ? n : 1) * sizeof *perm);
    if (!perm) {
        mft_tensor_release(t);
        return NULL;
    }
    uint64_t rng = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = tu_rng_int(&rng, 0, i), s = perm[i];
        perm[i] = perm[j];
        perm[j] = s;
    }
    int64_t idx[MFT_MAX_DIMS] = {0}, e = 0;
    if (n > 0) do {
            mft_tensor_set(t, idx, lo + ((double)perm[e++] + phase) * (hi - lo) / (double)n);
        } while (tu_next_index(nd, sz, idx));
    free(perm);
    return t;
}

/* Marks t as a leaf that requires grad; returns t. */
static mft_tensor *leaf(mft_tensor *t) {
    if (t) mft_tensor_set_requires_grad(t, true);
    return t;
}

/* [-2, 2], requiring grad: the default activation. */
static mft_tensor *act(int nd, const int64_t *sz, mft_format f, uint64_t seed) {
    return leaf(grid(nd, sz, f, seed, -2.0, 2.0, 0.3));
}

/* A (p) vector in [lo, hi), requiring grad or not. */
static mft_tensor *vec(int64_t p, uint64_t seed, double lo, double hi, bool req) {
    mft_tensor *t = grid(1, &p, CT, seed, lo, hi, 0.5);
    return req ? leaf(t) : t;
}

/* I64 class indices in [0, classes) of sizes sz; element 0 is ignore_index
 * when ignore is set. Never requires grad. */
static mft_tensor *classes_target(int nd, const int64_t *sz, int64_t classes, uint64_t seed,
                                  bool ignore) {
    mft_tensor *t = mft_empty(nd, sz, MFT_I64, CT);
    if (!t) return NULL;
    uint64_t rng = seed * 0x9E3779B97F4A7C15ull + 1;
    int64_t idx[MFT_MAX_DIMS] = {0};
    do {
        mft_tensor_set(t, idx, (double)tu_rng_int(&rng, 0, classes - 1));
    } while (tu_next_index(nd, sz, idx));
    if (ignore) {
        int64_t zero[MFT_MAX_DIMS] = {0};
        mft_tensor_set(t, zero, (double)MFT_IGNORE_INDEX_DEFAULT);
    }
    return t;
}

static mft_format other(mft_format f) { return f == CL ? CT : CL; }

/* ---------------------------------------------------------------- builders
 * Each fills in[] (in[0] the activation, laid out in f) and returns the
 * number of inputs; gradcheck checks those that require grad. */
typedef int (*build_fn)(mft_format f, mft_tensor **in);

static int b_x(mft_format f, mft_tensor **in) {
    in[0] = act(4, S4, f, 1);
    return 1;
}
static int b_pos(mft_format f, mft_tensor **in) { /* sqrt, log, reciprocal, pow: x in [0.5, 2) */
    in[0] = leaf(grid(4, S4, f, 2, 0.5, 2.0, 0.3));
    return 1;
}
static int b_x3(mft_format f, mft_tensor **in) {
    in[0] = act(3, S3, f, 3);
    return 1;
}
static int b_x5(mft_format f, mft_tensor **in) {
    in[0] = act(5, S5, f, 4);
    return 1;
}
static int b_bin(mft_format f, mft_tensor **in) { /* a (2,3,4,4) op b (1,3,1,4): broadcast */
    in[0] = act(4, S4, f, 5);
    in[1] = leaf(grid(4, SB, CT, 6, -2.0, 2.0, 0.7));
    return 2;
}
static int b_bin_pos(mft_format f, mft_tensor **in) { /* div: b in [0.5, 2) */
    in[0] = act(4, S4, f, 7);
    in[1] = leaf(grid(4, SB, CT, 8, 0.5, 2.0, 0.7));
    return 2;
}
static int b_bin_pow(mft_format f, mft_tensor **in) { /* a in [0.5, 2), b in [-1.5, 1.5) */
    in[0] = leaf(grid(4, S4, f, 9, 0.5, 2.0, 0.3));
    in[1] = leaf(grid(4, SB, CT, 10, -1.5, 1.5, 0.7));
    return 2;
}
static int b_two(mft_format f, mft_tensor **in) { /* same sizes, the second contiguous */
    in[0] = act(4, S4, f, 11);
    in[1] = leaf(grid(4, S4, CT, 12, -2.0, 2.0, 0.7));
    return 2;
}
static int b_where(mft_format f, mft_tensor **in) { /* cond (U8, constant), a, b */
    mft_tensor *c = grid(4, S4, f, 13, -2.0, 2.0, 0.3);
    in[0] = mft_gt_scalar(c, 0.0);
    mft_tensor_release(c);
    in[1] = act(4, S4, f, 14);
    in[2] = leaf(grid(4, SB, CT, 15, -2.0, 2.0, 0.7));
    return 3;
}
static int b_addcmul(mft_format f, mft_tensor **in) { /* x, a (1,3,1,1), b */
    in[0] = act(4, S4, f, 16);
    in[1] = leaf(grid(4, (const int64_t[]){1, 3, 1, 1}, CT, 17, -2.0, 2.0, 0.5));
    in[2] = leaf(grid(4, S4, CT, 18, -2.0, 2.0, 0.7));
    return 3;
}
static int b_lerp(mft_format f, mft_tensor **in) { /* start, end, weight (1,1,4,4) in [0, 1) */
    in[0] = act(4, S4, f, 19);
    in[1] = leaf(grid(4, S4, CT, 20, -2.0, 2.0, 0.7));
    in[2] = leaf(grid(4, (const int64_t[]){1, 1, 4, 4}, CT, 21, 0.0, 1.0, 0.5));
    return 3;
}
static int b_x_sq(mft_format f, mft_tensor **in) { /* (2,3,1,4) for squeeze */
    in[0] = act(4, (const int64_t[]){2, 3, 1, 4}, f, 22);
    return 1;
}
static int b_x_exp(mft_format f, mft_tensor **in) { /* (1,3,1,4) for expand */
    in[0] = act(4, SB, f, 23);
    return 1;
}
static int b_x_split(mft_format f, mft_tensor **in) { /* (2,3,5,4): chunks 2, 2, 1 of H */
    in[0] = act(4, (const int64_t[]){2, 3, 5, 4}, f, 24);
    return 1;
}
static int b_cat(mft_format f, mft_tensor **in) { /* channels 3 + 2 + 2, mixed formats */
    in[0] = act(4, S4, f, 25);
    in[1] = leaf(grid(4, (const int64_t[]){2, 2, 4, 4}, CT, 26, -2.0, 2.0, 0.7));
    in[2] = leaf(grid(4, (const int64_t[]){2, 2, 4, 4}, f, 27, -2.0, 2.0, 0.5));
    return 3;
}
static int b_stack(mft_format f, mft_tensor **in) {
    in[0] = act(4, S4, f, 28);
    in[1] = leaf(grid(4, S4, CT, 29, -2.0, 2.0, 0.7));
    in[2] = leaf(grid(4, S4, f, 30, -2.0, 2.0, 0.5));
    return 3;
}

/* convolutions: x, w (in x's format for ranks 4-5), bias */
static int b_conv2d(mft_format f, mft_tensor **in) {
    in[0] = act(4, S4, f, 31);
    in[1] = leaf(grid(4, (const int64_t[]){4, 3, 3, 3}, f, 32, -1.0, 1.0, 0.5));
    in[2] = vec(4, 33, -1.0, 1.0, true);
    return 3;
}
static int b_convt2d(mft_format f, mft_tensor **in) { /* w (C_in, C_out/groups, kH, kW) */
    in[0] = act(4, (const int64_t[]){2, 3, 3, 3}, f, 34);
    in[1] = leaf(grid(4, (const int64_t[]){3, 2, 3, 3}, f, 35, -1.0, 1.0, 0.5));
    in[2] = vec(2, 36, -1.0, 1.0, true);
    return 3;
}
static int b_conv3d(mft_format f, mft_tensor **in) {
    in[0] = act(5, S5, f, 37);
    in[1] = leaf(grid(5, (const int64_t[]){3, 2, 2, 2, 2}, f, 38, -1.0, 1.0, 0.5));
    in[2] = vec(3, 39, -1.0, 1.0, true);
    return 3;
}
static int b_conv1d(mft_format f, mft_tensor **in) { /* the weight stays (C_out, C_in, k) packed */
    in[0] = act(3, S3, f, 40);
    in[1] = leaf(grid(3, (const int64_t[]){4, 3, 3}, CT, 41, -1.0, 1.0, 0.5));
    in[2] = vec(4, 42, -1.0, 1.0, true);
    return 3;
}

/* norms: x, weight, bias (C = 3), then the running statistics (constants) */
static int b_bn_train(mft_format f, mft_tensor **in) {
    in[0] = act(4, S4, f, 43);
    in[1] = vec(3, 44, 0.5, 1.5, true);
    in[2] = vec(3, 45, -0.5, 0.5, true);
    in[3] = mft_zeros(1, (const int64_t[]){3}, MFT_F64, CT);
    in[4] = mft_ones(1, (const int64_t[]){3}, MFT_F64, CT);
    return 5;
}
static int b_bn_eval(mft_format f, mft_tensor **in) {
    in[0] = act(4, S4, f, 46);
    in[1] = vec(3, 47, 0.5, 1.5, true);
    in[2] = vec(3, 48, -0.5, 0.5, true);
    in[3] = vec(3, 49, -0.5, 0.5, false);
    in[4] = vec(3, 50, 0.5, 2.0, false);
    return 5;
}
static int b_x_bnone(mft_format f, mft_tensor **in) { /* x, weight, bias; no running stats */
    in[0] = act(4, S4, f, 51);
    in[1] = vec(3, 52, 0.5, 1.5, true);
    in[2] = vec(3, 53, -0.5, 0.5, true);
    return 3;
}
static int b_gn(mft_format f, mft_tensor **in) { /* (2,4,3,3), 2 groups */
    in[0] = act(4, (const int64_t[]){2, 4, 3, 3}, f, 54);
    in[1] = vec(4, 55, 0.5, 1.5, true);
    in[2] = vec(4, 56, -0.5, 0.5, true);
    return 3;
}
static int b_ln(mft_format f, mft_tensor **in) { /* normalized_shape (4, 4) */
    in[0] = act(4, S4, f, 57);
    in[1] = leaf(grid(2, (const int64_t[]){4, 4}, CT, 58, 0.5, 1.5, 0.5));
    in[2] = leaf(grid(2, (const int64_t[]){4, 4}, CT, 59, -0.5, 0.5, 0.5));
    return 3;
}
static int b_ln3(mft_format f, mft_tensor **in) { /* normalized_shape (3, 4, 4), no bias */
    in[0] = act(4, S4, f, 60);
    in[1] = leaf(grid(3, (const int64_t[]){3, 4, 4}, CT, 61, 0.5, 1.5, 0.5));
    return 2;
}

/* linear algebra */
static int b_linear(mft_format f, mft_tensor **in) { /* x (2,3,5), w (4,5), b (4) */
    in[0] = act(3, (const int64_t[]){2, 3, 5}, f, 62);
    in[1] = leaf(grid(2, (const int64_t[]){4, 5}, CT, 63, -1.0, 1.0, 0.5));
    in[2] = vec(4, 64, -1.0, 1.0, true);
    return 3;
}
static int b_flatten_linear(mft_format f, mft_tensor **in) { /* x (2,3,4,4), w (5,48), b (5) */
    in[0] = act(4, S4, f, 98);
    in[1] = leaf(grid(2, (const int64_t[]){5, 48}, CT, 99, -1.0, 1.0, 0.5));
    in[2] = vec(5, 100, -1.0, 1.0, true);
    return 3;
}
static int b_flatten_linear_nobias(mft_format f, mft_tensor **in) {
    in[0] = act(4, S4, f, 101);
    in[1] = leaf(grid(2, (const int64_t[]){5, 48}, CT, 102, -1.0, 1.0, 0.5));
    return 2;
}
static int b_matmul(mft_format f, mft_tensor **in) { /* (2,3,4) @ (4,5) */
    in[0] = act(3, (const int64_t[]){2, 3, 4}, f, 65);
    in[1] = leaf(grid(2, (const int64_t[]){4, 5}, CT, 66, -1.0, 1.0, 0.5));
    return 2;
}
static int b_matmul_bcast(mft_format f, mft_tensor **in) { /* (2,1,3,4) @ (3,4,2) */
    in[0] = act(4, (const int64_t[]){2, 1, 3, 4}, f, 67);
    in[1] = leaf(grid(3, (const int64_t[]){3, 4, 2}, CT, 68, -1.0, 1.0, 0.5));
    return 2;
}

/* losses: logits (2,4,3,3) in f, class targets (2,3,3) with one ignored,
 * class weights (4) (constants) */
static const int64_t SL[4] = {2, 4, 3, 3};
static int b_ce_idx(mft_format f, mft_tensor **in) {
    in[0] = act(4, SL, f, 69);
    in[1] = classes_target(3, (const int64_t[]){2, 3, 3}, 4, 70, true);
    in[2] = vec(4, 71, 0.5, 2.0, false);
    return 3;
}
static int b_ce_prob(mft_format f, mft_tensor **in) { /* probability targets require grad */
    in[0] = act(4, SL, f, 72);
    in[1] = leaf(grid(4, SL, f, 73, 0.0, 1.0, 0.5));
    return 2;
}
static int b_bce(mft_format f, mft_tensor **in) { /* x, target, weight (1,3,1,1), pos_weight (4) */
    in[0] = act(4, S4, f, 74);
    in[1] = leaf(grid(4, S4, CT, 75, 0.0, 1.0, 0.5));
    in[2] = grid(4, (const int64_t[]){1, 3, 1, 1}, CT, 76, 0.5, 2.0, 0.5);
    in[3] = vec(4, 77, 0.5, 3.0, false);
    return 4;
}

/* ---------------------------------------------------------------- forwards
 * One call of the op on in[] (new reference). Multi-output ops return their
 * differentiable output (split: a combination of two of its chunks). FN is
 * variadic so that compound literals' commas pass through. */
#define FN(fname, ...)                                                         \
    static mft_tensor *fname(void *ctx_, mft_tensor *const *in) {              \
        (void)ctx_;                                                            \
        return (__VA_ARGS__);                                                  \
    }
#define FN_UN(op) FN(f_##op, mft_##op(in[0]))
#define FN_BIN(op) FN(f_##op, mft_##op(in[0], in[1]))

/* elementwise */
FN_UN(neg)
FN_UN(abs)
FN_UN(sqrt)
FN_UN(rsqrt)
FN_UN(exp)
FN_UN(log)
FN_UN(sin)
FN_UN(cos)
FN_UN(tanh)
FN_UN(sigmoid)
FN_UN(relu)
FN_UN(gelu)
FN_UN(silu)
FN_UN(square)
FN_UN(reciprocal)
FN_UN(sign)
FN_UN(floor)
FN_UN(ceil)
FN_UN(round)
/* bounds on the value grid's integral points (see grid()): never hit */
FN(f_clamp, mft_clamp(in[0], -0.5, 0.75))
FN(f_hardtanh, mft_hardtanh(in[0], -1.0, 1.0))
FN(f_add_scalar, mft_add_scalar(in[0], 1.5))
FN(f_sub_scalar, mft_sub_scalar(in[0], 0.25))
FN(f_rsub_scalar, mft_rsub_scalar(in[0], 2.0))
FN(f_mul_scalar, mft_mul_scalar(in[0], -3.0))
FN(f_div_scalar, mft_div_scalar(in[0], 4.0))
FN(f_maximum_scalar, mft_maximum_scalar(in[0], 0.0))
FN(f_minimum_scalar, mft_minimum_scalar(in[0], 0.5))
FN(f_pow_scalar, mft_pow_scalar(in[0], 2.5))
FN(f_pow_scalar_int, mft_pow_scalar(in[0], 3.0))
FN(f_leaky_relu, mft_leaky_relu(in[0], 0.1))
FN(f_lerp_scalar, mft_lerp_scalar(in[0], in[1], 0.3))
FN_BIN(add)
FN_BIN(sub)
FN_BIN(mul)
FN_BIN(div)
FN_BIN(maximum)
FN_BIN(minimum)
FN_BIN(pow)
FN(f_add_alpha, mft_add_alpha(in[0], in[1], -1.5))
FN(f_where, mft_where(in[0], in[1], in[2]))
FN(f_addcmul, mft_addcmul(in[0], in[1], in[2], 0.5))
FN(f_lerp, mft_lerp(in[0], in[1], in[2]))

/* F64 -> F32 -> F64: both casts record a node (F64 -> F64 returns x itself
 * and records nothing). The F32 rounding (2^-24 relative) needs a larger
 * step than gradcheck's default: see the sample's eps. */
static mft_tensor *f_to_dtype(void *ctx, mft_tensor *const *in) {
    (void)ctx;
    mft_tensor *h = mft_to_dtype(in[0], MFT_F32);
    mft_tensor *y = mft_to_dtype(h, MFT_F64);
    mft_tensor_release(h);
    return y;
}

/* reductions */
FN(f_sum, mft_sum(in[0], 2, (const int[]){1, 3}, true))
FN(f_sum_all, mft_sum(in[0], 0, NULL, false))
FN(f_mean, mft_mean(in[0], 2, (const int[]){2, 3}, false))
FN(f_amax, mft_amax(in[0], 1, (const int[]){1}, true))
FN(f_amin, mft_amin(in[0], 2, (const int[]){0, 2}, false))
FN(f_var, mft_var(in[0], 2, (const int[]){2, 3}, 1.0, true))
FN(f_std, mft_std(in[0], 0, NULL, 1.0, false))
FN(f_std_dim, mft_std(in[0], 1, (const int[]){-1}, 0.0, false))
FN(f_sum_to_size, mft_sum_to_size(in[0], 4, SB))

/* convolutions */
FN(f_conv2d, mft_conv2d(in[0], in[1], in[2], (const int64_t[]){1, 1}, (const int64_t[]){1, 1},
                        (const int64_t[]){1, 1}, 1))
FN(f_conv2d_strided, mft_conv2d(in[0], in[1], in[2], (const int64_t[]){2, 1},
                                (const int64_t[]){1, 1}, (const int64_t[]){1, 2}, 1))
FN(f_conv_transpose2d,
   mft_conv_transpose2d(in[0], in[1], in[2], (const int64_t[]){2, 2}, (const int64_t[]){1, 1},
                        (const int64_t[]){1, 1}, (const int64_t[]){1, 1}, 1))
FN(f_conv3d, mft_conv3d(in[0], in[1], in[2], (const int64_t[]){1, 2, 1},
                        (const int64_t[]){1, 0, 1}, (const int64_t[]){1, 1, 1}, 1))
FN(f_conv1d, mft_conv1d(in[0], in[1], in[2], (const int64_t[]){2}, (const int64_t[]){1},
                        (const int64_t[]){1}, 1))

/* pools (distinct values: no ties between window elements) */
FN(f_max_pool1d, mft_max_pool1d(in[0], (const int64_t[]){3}, (const int64_t[]){2},
                                (const int64_t[]){1}, (const int64_t[]){1}, false))
FN(f_max_pool2d, mft_max_pool2d(in[0], (const int64_t[]){3, 3}, (const int64_t[]){2, 2},
                                (const int64_t[]){1, 1}, (const int64_t[]){1, 1}, false))
FN(f_max_pool3d, mft_max_pool3d(in[0], (const int64_t[]){2, 2, 2}, (const int64_t[]){1, 2, 2},
                                (const int64_t[]){0, 0, 0}, (const int64_t[]){1, 1, 1}, false))
FN(f_avg_pool1d, mft_avg_pool1d(in[0], (const int64_t[]){3}, (const int64_t[]){2},
                                (const int64_t[]){1}, false, false))
FN(f_avg_pool2d, mft_avg_pool2d(in[0], (const int64_t[]){3, 3}, (const int64_t[]){2, 2},
                                (const int64_t[]){1, 1}, true, true, 0))
FN(f_avg_pool3d, mft_avg_pool3d(in[0], (const int64_t[]){2, 3, 3}, (const int64_t[]){1, 2, 2},
                                (const int64_t[]){0, 1, 1}, false, false, 5))
FN(f_adaptive_avg_pool2d, mft_adaptive_avg_pool2d(in[0], (const int64_t[]){3, 2}))
FN(f_adaptive_max_pool2d, mft_adaptive_max_pool2d(in[0], (const int64_t[]){3, 3}))
FN(f_adaptive_avg_pool3d, mft_adaptive_avg_pool3d(in[0], (const int64_t[]){2, 3, 2}))
FN(f_adaptive_max_pool3d, mft_adaptive_max_pool3d(in[0], (const int64_t[]){2, 2, 3}))
FN(f_relu_max_pool2d, mft_relu_max_pool2d(in[0], (const int64_t[]){2, 2}, (const int64_t[]){2, 2},
                                          (const int64_t[]){0, 0}, (const int64_t[]){1, 1}, false))

/* The *_with_indices forms: the values are the differentiable output; the
 * I64 indices are dropped. */
static mft_tensor *drop_indices(mft_tensor *y, mft_tensor *idx) {
    mft_tensor_release(idx);
    return y;
}
static mft_tensor *f_max_pool1d_wi(void *ctx, mft_tensor *const *in) {
    (void)ctx;
    mft_tensor *idx = NULL;
    mft_tensor *y = mft_max_pool1d_with_indices(in[0], (const int64_t[]){2}, (const int64_t[]){2},
                                                (const int64_t[]){0}, (const int64_t[]){1},
                                                false, &idx);
    return drop_indices(y, idx);
}
static mft_tensor *f_max_pool2d_wi(void *ctx, mft_tensor *const *in) {
    (void)ctx;
    mft_tensor *idx = NULL;
    mft_tensor *y = mft_max_pool2d_with_indices(in[0], (const int64_t[]){2, 3},
                                                (const int64_t[]){2, 1}, (const int64_t[]){1, 1},
                                                (const int64_t[]){1, 1}, true, &idx);
    return drop_indices(y, idx);
}
static mft_tensor *f_max_pool3d_wi(void *ctx, mft_tensor *const *in) {
    (void)ctx;
    mft_tensor *idx = NULL;
    mft_tensor *y = mft_max_pool3d_with_indices(in[0], (const int64_t[]){2, 2, 2},
                                                (const int64_t[]){1, 2, 2},
                                                (const int64_t[]){1, 0, 1},
                                                (const int64_t[]){1, 1, 1}, false, &idx);
    return drop_indices(y, idx);
}
static mft_tensor *f_adaptive_max_pool2d_wi(void *ctx, mft_tensor *const *in) {
    (void)ctx;
    mft_tensor *idx = NULL;
    mft_tensor *y = mft_adaptive_max_pool2d_with_indices(in[0], (const int64_t[]){3, 2}, &idx);
    return drop_indices(y, idx);
}
static mft_tensor *f_adaptive_max_pool3d_wi(void *ctx, mft_tensor *const *in) {
    (void)ctx;
    mft_tensor *idx = NULL;
    mft_tensor *y = mft_adaptive_max_pool3d_with_indices(in[0], (const int64_t[]){3, 3, 2}, &idx);
    return drop_indices(y, idx);
}
static mft_tensor *f_relu_max_pool2d_wi(void *ctx, mft_tensor *const *in) {
    (void)ctx;
    mft_tensor *idx = NULL;
    mft_tensor *y = mft_relu_max_pool2d_with_indices(in[0], (const int64_t[]){3, 3},
                                                     (const int64_t[]){2, 2},
                                                     (const int64_t[]){1, 1},
                                                     (const int64_t[]){1, 1}, false, &idx);
    return drop_indices(y, idx);
}

/* interpolate, one sample per mode */
FN(f_interp_nearest, mft_interpolate(in[0], (const int64_t[]){6, 5}, MFT_INTERP_NEAREST, false))
FN(f_interp_nearest_exact,
   mft_interpolate(in[0], (const int64_t[]){3, 7}, MFT_INTERP_NEAREST_EXACT, false))
FN(f_interp_nearest_3d,
   mft_interpolate(in[0], (const int64_t[]){2, 6, 3}, MFT_INTERP_NEAREST, false))
FN(f_interp_linear, mft_interpolate(in[0], (const int64_t[]){9}, MFT_INTERP_LINEAR, false))
FN(f_interp_bilinear,
   mft_interpolate(in[0], (const int64_t[]){7, 5}, MFT_INTERP_BILINEAR, false))
FN(f_interp_bilinear_ac,
   mft_interpolate(in[0], (const int64_t[]){3, 6}, MFT_INTERP_BILINEAR, true))
FN(f_interp_bicubic, mft_interpolate(in[0], (const int64_t[]){6, 7}, MFT_INTERP_BICUBIC, false))
FN(f_interp_trilinear,
   mft_interpolate(in[0], (const int64_t[]){4, 3, 5}, MFT_INTERP_TRILINEAR, true))

/* pad, one sample per mode (+ a crop and a 3-D reflect) */
FN(f_pad_constant, mft_pad(in[0], 4, (const int64_t[]){1, 2, 0, 1}, MFT_PAD_CONSTANT, 0.5))
FN(f_pad_crop, mft_pad(in[0], 4, (const int64_t[]){-1, 1, 1, -1}, MFT_PAD_CONSTANT, 0.0))
FN(f_pad_reflect, mft_pad(in[0], 4, (const int64_t[]){2, 1, 1, 3}, MFT_PAD_REFLECT, 0.0))
FN(f_pad_replicate, mft_pad(in[0], 4, (const int64_t[]){1, 3, 2, 0}, MFT_PAD_REPLICATE, 0.0))
FN(f_pad_reflect_3d,
   mft_pad(in[0], 6, (const int64_t[]){1, 1, 2, 0, 1, 2}, MFT_PAD_REFLECT, 0.0))

/* norms */
FN(f_batch_norm_train, mft_batch_norm(in[0], in[3], in[4], in[1], in[2], true, 0.1, 1e-5))
FN(f_batch_norm_eval, mft_batch_norm(in[0], in[3], in[4], in[1], in[2], false, 0.1, 1e-5))
FN(f_group_norm, mft_group_norm(in[0], 2, in[1], in[2], 1e-5))
FN(f_instance_norm, mft_instance_norm(in[0], in[1], in[2], 1e-5))
FN(f_layer_norm, mft_layer_norm(in[0], 2, (const int64_t[]){4, 4}, in[1], in[2], 1e-5))
static mft_tensor *drop_stats(mft_tensor *y, mft_tensor *a, mft_tensor *b) {
    mft_tensor_release(a);
    mft_tensor_release(b);
    return y;
}
/* _ex forms: the normalised output; the saved statistics are dropped */
static mft_tensor *f_batch_norm_ex(void *ctx, mft_tensor *const *in) {
    (void)ctx;
    mft_tensor *m = NULL, *s = NULL;
    mft_tensor *y = mft_batch_norm_ex(in[0], NULL, NULL, in[1], in[2], true, 0.1, 1e-5, &m, &s);
    return drop_stats(y, m, s);
}
static mft_tensor *f_group_norm_ex(void *ctx, mft_tensor *const *in) {
    (void)ctx;
    mft_tensor *m = NULL, *s = NULL;
    mft_tensor *y = mft_group_norm_ex(in[0], 4, in[1], in[2], 1e-5, &m, &s);
    return drop_stats(y, m, s);
}
static mft_tensor *f_layer_norm_ex(void *ctx, mft_tensor *const *in) {
    (void)ctx;
    mft_tensor *m = NULL, *s = NULL;
    mft_tensor *y = mft_layer_norm_ex(in[0], 3, (const int64_t[]){3, 4, 4}, in[1], NULL, 1e-5,
                                      &m, &s);
    return drop_stats(y, m, s);
}

/* softmax */
FN(f_softmax, mft_softmax(in[0], 1))
FN(f_log_softmax, mft_log_softmax(in[0], -1))

/* Dropout, the training path with 0 < p < 1: the mask is a pure function of
 * (seed, logical index) (mft/resize.h), so every call gradcheck makes
 * draws the same mask and the function is exactly x * mask / (1 - p). (p = 0
 * or eval returns x itself and records nothing: no backward to check.) */
FN(f_dropout, mft_dropout(in[0], 0.4, true, 1234))
FN(f_dropout2d, mft_dropout2d(in[0], 0.5, true, 99))

/* shape */
static mft_tensor *f_cat(void *ctx, mft_tensor *const *in) {
    (void)ctx;
    const mft_tensor *ts[3] = {in[0], in[1], in[2]};
    return mft_cat(3, ts, 1);
}
static mft_tensor *f_stack(void *ctx, mft_tensor *const *in) {
    (void)ctx;
    const mft_tensor *ts[3] = {in[0], in[1], in[2]};
    return mft_stack(3, ts, 2);
}
/* split H = 5 into chunks 2, 2, 1: y = chunk0 - 2 * chunk1 (chunk 2 unused:
 * its part of the gradient is zeros) */
static mft_tensor *f_split(void *ctx, mft_tensor *const *in) {
    (void)ctx;
    mft_tensor *ch[4] = {0};
    int n = 0;
    if (mft_split(in[0], 2, 2, 4, ch, &n) != MFT_OK) return NULL;
    mft_tensor *y = n == 3 ? mft_add_alpha(ch[0], ch[1], -2.0) : NULL;
    for (int i = 0; i < n; i++) mft_tensor_release(ch[i]);
    return y;
}

/* linear algebra and losses */
FN(f_linear, mft_linear(in[0], in[1], in[2]))
FN(f_flatten_linear, mft_flatten_linear(in[0], in[1], in[2]))
FN(f_flatten_linear_nobias, mft_flatten_linear(in[0], in[1], NULL))
FN(f_matmul, mft_matmul(in[0], in[1]))
FN(f_cross_entropy,
   mft_cross_entropy(in[0], in[1], in[2], MFT_IGNORE_INDEX_DEFAULT, 0.1, MFT_REDUCTION_MEAN))
FN(f_cross_entropy_prob,
   mft_cross_entropy(in[0], in[1], NULL, MFT_IGNORE_INDEX_DEFAULT, 0.0, MFT_REDUCTION_SUM))
FN(f_nll_loss, mft_nll_loss(in[0], in[1], in[2], MFT_IGNORE_INDEX_DEFAULT, MFT_REDUCTION_MEAN))
FN(f_nll_loss_none,
   mft_nll_loss(in[0], in[1], in[2], MFT_IGNORE_INDEX_DEFAULT, MFT_REDUCTION_NONE))
FN(f_mse_loss, mft_mse_loss(in[0], in[1], MFT_REDUCTION_MEAN))
FN(f_bce_logits, mft_binary_cross_entropy_with_logits(in[0], in[1], in[2], in[3],
                                                      MFT_REDUCTION_SUM))

/* views */
FN(f_permute, mft_permute(in[0], (const int[]){0, 2, 3, 1}))
FN(f_transpose, mft_transpose(in[0], 1, 3))
FN(f_narrow, mft_narrow(in[0], 2, 1, 2))
FN(f_select, mft_select(in[0], 3, -1))
FN(f_slice, mft_slice(in[0], 1, 0, 3, 2))
FN(f_slice_w, mft_slice(in[0], 3, 1, 4, 2))
FN(f_unsqueeze, mft_unsqueeze(in[0], 2))
FN(f_squeeze, mft_squeeze(in[0], 2))
FN(f_squeeze_noop, mft_squeeze(in[0], 1))
FN(f_expand, mft_expand(in[0], 4, (const int64_t[]){2, -1, 4, 4}))
FN(f_view, mft_view(in[0], 2, (const int64_t[]){6, -1}))
FN(f_reshape, mft_reshape(in[0], 3, (const int64_t[]){2, 12, 4}))
FN(f_flatten, mft_flatten(in[0], 1, 3))

/* conversions: always to the other format, so each call copies and records */
FN(f_contiguous, mft_contiguous(in[0], other(mft_tensor_format(in[0]))))
FN(f_to_format, mft_to_format(in[0], other(mft_tensor_format(in[0]))))
/* into nChw16c (C = 3: one partial block, 13 pad lanes per pixel); an
 * nChw16c input goes to nChw8c (its own layout would give it back) */
static mft_tensor *f_to_layout(void *ctx, mft_tensor *const *in) {
    (void)ctx;
    mft_layout l;
    const mft_layout_tag tag =
        mft_tensor_format(in[0]) == MFT_NCHW16C ? MFT_LAYOUT_NCHW8C : MFT_LAYOUT_NCHW16C;
    if (mft_layout_for_tag(mft_tensor_ndim(in[0]), mft_tensor_sizes(in[0]), tag, &l) != MFT_OK)
        return NULL;
    return mft_to_layout(in[0], &l);
}
FN(f_clone, mft_clone(in[0], MFT_PRESERVE))

/* ---------------------------------------------------------------- the table */
enum { F_CT = 1, F_BOTH = 3 }; /* F_BOTH: also with the activation channels-last */

typedef struct sample {
    const char *op;      /* the registry row's name */
    const char *variant; /* what this sample covers when an op has several */
    mft_grad_fn fn;
    build_fn build;
    int formats;
    double eps; /* central-difference step; 0: gradcheck's default */
} sample;

static const sample SAMPLES[] = {
    /* elementwise: unary */
    {"neg", "", f_neg, b_x, F_BOTH, 0},
    {"abs", "", f_abs, b_x, F_BOTH, 0},
    {"sqrt", "", f_sqrt, b_pos, F_BOTH, 0},
    {"rsqrt", "", f_rsqrt, b_pos, F_BOTH, 0},
    {"exp", "", f_exp, b_x, F_BOTH, 0},
    {"log", "", f_log, b_pos, F_BOTH, 0},
    {"sin", "", f_sin, b_x, F_BOTH, 0},
    {"cos", "", f_cos, b_x, F_BOTH, 0},
    {"tanh", "", f_tanh, b_x, F_BOTH, 0},
    {"sigmoid", "", f_sigmoid, b_x, F_BOTH, 0},
    {"relu", "", f_relu, b_x, F_BOTH, 0},
    {"gelu", "", f_gelu, b_x, F_BOTH, 0},
    {"silu", "", f_silu, b_x, F_BOTH, 0},
    {"square", "", f_square, b_x, F_BOTH, 0},
    {"reciprocal", "", f_reciprocal, b_pos, F_BOTH, 0},
    {"sign", "", f_sign, b_x, F_BOTH, 0},
    {"floor", "", f_floor, b_x, F_BOTH, 0},
    {"ceil", "", f_ceil, b_x, F_BOTH, 0},
    {"round", "", f_round, b_x, F_BOTH, 0},
    {"clamp", "", f_clamp, b_x, F_BOTH, 0},
    {"hardtanh", "", f_hardtanh, b_x, F_BOTH, 0},
    /* elementwise: with a scalar */
    {"add_scalar", "", f_add_scalar, b_x, F_BOTH, 0},
    {"sub_scalar", "", f_sub_scalar, b_x, F_BOTH, 0},
    {"rsub_scalar", "", f_rsub_scalar, b_x, F_BOTH, 0},
    {"mul_scalar", "", f_mul_scalar, b_x, F_BOTH, 0},
    {"div_scalar", "", f_div_scalar, b_x, F_BOTH, 0},
    {"maximum_scalar", "", f_maximum_scalar, b_x, F_BOTH, 0},
    {"minimum_scalar", "", f_minimum_scalar, b_x, F_BOTH, 0},
    {"pow_scalar", "x > 0, p 2.5", f_pow_scalar, b_pos, F_BOTH, 0},
    {"pow_scalar", "p 3", f_pow_scalar_int, b_x, F_CT, 0},
    {"leaky_relu", "", f_leaky_relu, b_x, F_BOTH, 0},
    {"lerp_scalar", "", f_lerp_scalar, b_two, F_BOTH, 0},
    /* elementwise: binary (b (1,3,1,4) broadcast) and ternary */
    {"add", "", f_add, b_bin, F_BOTH, 0},
    {"sub", "", f_sub, b_bin, F_BOTH, 0},
    {"mul", "", f_mul, b_bin, F_BOTH, 0},
    {"div", "", f_div, b_bin_pos, F_BOTH, 0},
    {"maximum", "", f_maximum, b_bin, F_BOTH, 0},
    {"minimum", "", f_minimum, b_bin, F_BOTH, 0},
    {"pow", "", f_pow, b_bin_pow, F_BOTH, 0},
    {"add_alpha", "", f_add_alpha, b_two, F_BOTH, 0},
    {"where", "", f_where, b_where, F_BOTH, 0},
    {"addcmul", "", f_addcmul, b_addcmul, F_BOTH, 0},
    {"lerp", "", f_lerp, b_lerp, F_BOTH, 0},
    {"to_dtype", "f64 -> f32 -> f64", f_to_dtype, b_x, F_BOTH, 1e-2},
    /* reductions */
    {"sum", "dims 1,3 keepdim", f_sum, b_x, F_BOTH, 0},
    {"sum", "all", f_sum_all, b_x, F_CT, 0},
    {"mean", "", f_mean, b_x, F_BOTH, 0},
    {"amax", "", f_amax, b_x, F_BOTH, 0},
    {"amin", "", f_amin, b_x, F_BOTH, 0},
    {"var", "", f_var, b_x, F_BOTH, 0},
    {"std", "all", f_std, b_x, F_BOTH, 0},
    {"std", "dim -1, correction 0", f_std_dim, b_x, F_CT, 0},
    {"sum_to_size", "", f_sum_to_size, b_x, F_BOTH, 0},
    /* convolutions */
    {"conv2d", "pad 1, bias", f_conv2d, b_conv2d, F_BOTH, 0},
    {"conv2d", "stride, dilation", f_conv2d_strided, b_conv2d, F_BOTH, 0},
    {"conv_transpose2d", "", f_conv_transpose2d, b_convt2d, F_BOTH, 0},
    {"conv3d", "", f_conv3d, b_conv3d, F_BOTH, 0},
    {"conv1d", "", f_conv1d, b_conv1d, F_BOTH, 0},
    /* pools */
    {"max_pool1d", "", f_max_pool1d, b_x3, F_BOTH, 0},
    {"max_pool2d", "", f_max_pool2d, b_x, F_BOTH, 0},
    {"max_pool3d", "", f_max_pool3d, b_x5, F_BOTH, 0},
    {"avg_pool1d", "", f_avg_pool1d, b_x3, F_BOTH, 0},
    {"avg_pool2d", "ceil_mode, count_include_pad", f_avg_pool2d, b_x, F_BOTH, 0},
    {"avg_pool3d", "divisor_override", f_avg_pool3d, b_x5, F_BOTH, 0},
    {"adaptive_avg_pool2d", "", f_adaptive_avg_pool2d, b_x, F_BOTH, 0},
    {"adaptive_max_pool2d", "", f_adaptive_max_pool2d, b_x, F_BOTH, 0},
    {"adaptive_avg_pool3d", "", f_adaptive_avg_pool3d, b_x5, F_BOTH, 0},
    {"adaptive_max_pool3d", "", f_adaptive_max_pool3d, b_x5, F_BOTH, 0},
    {"max_pool1d_with_indices", "", f_max_pool1d_wi, b_x3, F_BOTH, 0},
    {"max_pool2d_with_indices", "ceil_mode", f_max_pool2d_wi, b_x, F_BOTH, 0},
    {"max_pool3d_with_indices", "", f_max_pool3d_wi, b_x5, F_BOTH, 0},
    {"adaptive_max_pool2d_with_indices", "", f_adaptive_max_pool2d_wi, b_x, F_BOTH, 0},
    {"adaptive_max_pool3d_with_indices", "", f_adaptive_max_pool3d_wi, b_x5, F_BOTH, 0},
    {"relu_max_pool2d", "", f_relu_max_pool2d, b_x, F_BOTH, 0},
    {"relu_max_pool2d_with_indices", "", f_relu_max_pool2d_wi, b_x, F_BOTH, 0},
    /* interpolate */
    {"interpolate", "nearest", f_interp_nearest, b_x, F_BOTH, 0},
    {"interpolate", "nearest_exact", f_interp_nearest_exact, b_x, F_BOTH, 0},
    {"interpolate", "nearest 3-d", f_interp_nearest_3d, b_x5, F_BOTH, 0},
    {"interpolate", "linear", f_interp_linear, b_x3, F_BOTH, 0},
    {"interpolate", "bilinear", f_interp_bilinear, b_x, F_BOTH, 0},
    {"interpolate", "bilinear align_corners", f_interp_bilinear_ac, b_x, F_BOTH, 0},
    {"interpolate", "bicubic", f_interp_bicubic, b_x, F_BOTH, 0},
    {"interpolate", "trilinear align_corners", f_interp_trilinear, b_x5, F_BOTH, 0},
    /* pad */
    {"pad", "constant", f_pad_constant, b_x, F_BOTH, 0},
    {"pad", "constant crop", f_pad_crop, b_x, F_BOTH, 0},
    {"pad", "reflect", f_pad_reflect, b_x, F_BOTH, 0},
    {"pad", "replicate", f_pad_replicate, b_x, F_BOTH, 0},
    {"pad", "reflect 3-d", f_pad_reflect_3d, b_x5, F_BOTH, 0},
    /* norms */
    {"batch_norm", "training, running stats", f_batch_norm_train, b_bn_train, F_BOTH, 0},
    {"batch_norm", "eval", f_batch_norm_eval, b_bn_eval, F_BOTH, 0},
    {"group_norm", "", f_group_norm, b_gn, F_BOTH, 0},
    {"batch_norm_ex", "training", f_batch_norm_ex, b_x_bnone, F_BOTH, 0},
    {"group_norm_ex", "", f_group_norm_ex, b_gn, F_BOTH, 0},
    {"instance_norm", "", f_instance_norm, b_x_bnone, F_BOTH, 0},
    {"layer_norm", "", f_layer_norm, b_ln, F_BOTH, 0},
    {"layer_norm_ex", "", f_layer_norm_ex, b_ln3, F_BOTH, 0},
    /* softmax, dropout */
    {"softmax", "", f_softmax, b_x, F_BOTH, 0},
    {"log_softmax", "", f_log_softmax, b_x, F_BOTH, 0},
    {"dropout", "training, p 0.4", f_dropout, b_x, F_BOTH, 0},
    {"dropout2d", "training, p 0.5", f_dropout2d, b_x, F_BOTH, 0},
    /* shape */
    {"cat", "", f_cat, b_cat, F_BOTH, 0},
    {"stack", "", f_stack, b_stack, F_BOTH, 0},
    {"split", "", f_split, b_x_split, F_BOTH, 0},
    /* linear algebra, losses */
    {"linear", "", f_linear, b_linear, F_CT, 0},
    {"flatten_linear", "bias", f_flatten_linear, b_flatten_linear, F_BOTH, 0},
    {"flatten_linear", "no bias", f_flatten_linear_nobias, b_flatten_linear_nobias, F_BOTH, 0},
    {"matmul", "", f_matmul, b_matmul, F_CT, 0},
    {"matmul", "batch broadcast", f_matmul, b_matmul_bcast, F_CT, 0},
    {"cross_entropy", "class indices", f_cross_entropy, b_ce_idx, F_BOTH, 0},
    {"cross_entropy", "probabilities", f_cross_entropy_prob, b_ce_prob, F_BOTH, 0},
    {"nll_loss", "mean", f_nll_loss, b_ce_idx, F_BOTH, 0},
    {"nll_loss", "none", f_nll_loss_none, b_ce_idx, F_CT, 0},
    {"mse_loss", "", f_mse_loss, b_two, F_BOTH, 0},
    {"binary_cross_entropy_with_logits", "", f_bce_logits, b_bce, F_BOTH, 0},
    /* views */
    {"permute", "", f_permute, b_x, F_BOTH, 0},
    {"transpose", "", f_transpose, b_x, F_BOTH, 0},
    {"narrow", "", f_narrow, b_x, F_BOTH, 0},
    {"select", "", f_select, b_x, F_BOTH, 0},
    {"slice", "", f_slice, b_x, F_BOTH, 0},
    {"slice", "step 2 along W", f_slice_w, b_x, F_BOTH, 0},
    {"unsqueeze", "", f_unsqueeze, b_x, F_BOTH, 0},
    {"squeeze", "", f_squeeze, b_x_sq, F_CT, 0},
    {"squeeze", "dim of size > 1", f_squeeze_noop, b_x_sq, F_CT, 0},
    {"expand", "", f_expand, b_x_exp, F_CT, 0},
    {"view", "", f_view, b_x, F_CT, 0},
    {"reshape", "", f_reshape, b_x, F_BOTH, 0},
    {"flatten", "", f_flatten, b_x, F_BOTH, 0},
    /* conversions */
    {"contiguous", "to the other format", f_contiguous, b_x, F_BOTH, 0},
    {"to_format", "to the other format", f_to_format, b_x, F_BOTH, 0},
    {"to_layout", "to nChw16c", f_to_layout, b_x, F_BOTH, 0},
    {"clone", "preserve", f_clone, b_x, F_BOTH, 0},
};
#define NSAMPLES ((int)(sizeof SAMPLES / sizeof *SAMPLES))

/* ---------------------------------------------------------------- coverage */
static int count_samples(const char *op) {
    int n = 0;
    for (int s = 0; s < NSAMPLES; s++)
        if (strcmp(SAMPLES[s].op, op) == 0) n++;
    return n;
}

/* Every DIFF row has a sample; every sample names a DIFF row. */
static void test_registry_coverage(void) {
    int ndiff = 0;
    CHECK(mft_op_count() > 0);
    for (int i = 0; i < mft_op_count(); i++) {
        const mft_op_info *r = mft_op_at(i);
        CHECK_MSG(r != NULL && r->name != NULL, "registry row %d is NULL", i);
        if (!r || !r->name || r->kind != MFT_OP_KIND_DIFF) continue;
        ndiff++;
        CHECK_MSG(count_samples(r->name) > 0,
                  "differentiable op '%s' (registry row %d, family %s) has no sample in the "
                  "gradcheck sweep",
                  r->name, i, r->family);
    }
    for (int s = 0; s < NSAMPLES; s++) {
        const mft_op_info *r = mft_op_find(SAMPLES[s].op);
        CHECK_MSG(r != NULL, "stale sample '%s': no registry row of that name", SAMPLES[s].op);
        if (r)
            CHECK_MSG(r->kind == MFT_OP_KIND_DIFF,
                      "stale sample '%s': its registry row is not DIFF (kind %d)", SAMPLES[s].op,
                      (int)r->kind);
        for (int t = 0; t < s; t++)
            CHECK_MSG(strcmp(SAMPLES[t].op, SAMPLES[s].op) != 0 ||
                          strcmp(SAMPLES[t].variant, SAMPLES[s].variant) != 0,
                      "sample '%s' '%s' listed twice", SAMPLES[s].op, SAMPLES[s].variant);
    }
    printf("registry: %d rows, %d DIFF; sweep: %d samples\n", mft_op_count(), ndiff, NSAMPLES);
}

/* ---------------------------------------------------------------- the sweep */
static int g_runs = 0, g_blocked_runs = 0, g_blocked_refusals = 0;
static bool g_ran_blocked[NSAMPLES];

/* The views refused on blocked tensors by design (docs/spec.md §7.8): the
 * blocked run of these samples asserts the refusal. */
typedef struct blocked_refusal {
    const char *op, *variant;
    mft_status status;
} blocked_refusal;
static const blocked_refusal BLOCKED_REFUSED[] = {
    {"permute", "", MFT_ERR_FORMAT},
    {"transpose", "", MFT_ERR_FORMAT},
    {"unsqueeze", "", MFT_ERR_FORMAT},
    {"squeeze", "", MFT_ERR_FORMAT},
    {"squeeze", "dim of size > 1", MFT_ERR_FORMAT},
    {"expand", "", MFT_ERR_FORMAT},
    {"view", "", MFT_ERR_NOT_VIEWABLE},
    /* step 2 along C, the blocked dim: an element inside a block has no stride */
    {"slice", "", MFT_ERR_NOT_VIEWABLE},
};
#define NREFUSED ((int)(sizeof BLOCKED_REFUSED / sizeof *BLOCKED_REFUSED))

/* The status the blocked run of s must fail with; MFT_OK: it runs. */
static mft_status blocked_refusal_of(const sample *s) {
    for (int k = 0; k < NREFUSED; k++)
        if (!strcmp(BLOCKED_REFUSED[k].op, s->op) &&
            !strcmp(BLOCKED_REFUSED[k].variant, s->variant))
            return BLOCKED_REFUSED[k].status;
    return MFT_OK;
}

/* Whether every sample of op is refused on blocked tensors by design. */
static bool op_refused_by_design(const char *op) {
    bool any = false;
    for (int s = 0; s < NSAMPLES; s++) {
        if (strcmp(SAMPLES[s].op, op)) continue;
        if (blocked_refusal_of(&SAMPLES[s]) == MFT_OK) return false;
        any = true;
    }
    return any;
}

/* The blocked format of sample s's blocked run: nChw8c for the samples
 * whose (op, variant) sorts at an odd position, nChw16c for the others, so
 * both block sizes meet every family. */
static mft_format blocked_format(int s) {
    int rank = 0;
    for (int t = 0; t < NSAMPLES; t++) {
        int c = strcmp(SAMPLES[t].op, SAMPLES[s].op);
        if (!c) c = strcmp(SAMPLES[t].variant, SAMPLES[s].variant);
        rank += c < 0;
    }
    return rank % 2 ? MFT_NCHW8C : MFT_NCHW16C;
}

static const char *format_label(mft_format f) {
    switch (f) {
    case CT: return "contiguous";
    case CL: return "channels_last";
    case MFT_NCHW8C: return "nchw8c";
    case MFT_NCHW16C: return "nchw16c";
    default: return mft_format_name(f);
    }
}

static bool is_blocked_format(mft_format f) { return f == MFT_NCHW8C || f == MFT_NCHW16C; }

/* One forward under a tape records a node; backward with a random
 * grad_output succeeds; every input that requires grad gets a .grad with
 * its sizes and format tag (docs/spec.md §5). */
static void check_backward(const char *what, const sample *s, int n, mft_tensor **in) {
    for (int i = 0; i < n; i++) mft_tensor_zero_grad(in[i]);
    CHECK(mft_tape_begin() == MFT_OK);
    mft_tensor *y = s->fn(NULL, in);
    bool ok = y != NULL;
    CHECK_MSG(ok, "%s: forward failed: %s", what, mft_last_error_message());
    if (ok) {
        ok = mft_tensor_requires_grad(y) && !mft_tensor_is_leaf(y) && mft_tape_size() > 0;
        CHECK_MSG(ok, "%s: no tape node recorded (requires_grad %d, leaf %d, tape %lld): no "
                  "backward",
                  what, mft_tensor_requires_grad(y), mft_tensor_is_leaf(y),
                  (long long)mft_tape_size());
    }
    if (ok) {
        mft_tensor *g = mft_randn(mft_tensor_ndim(y), mft_tensor_sizes(y), MFT_F64, CT, 99);
        mft_status st = mft_backward(y, g);
        ok = st == MFT_OK;
        CHECK_MSG(ok, "%s: backward: %s: %s", what, mft_status_str(st), mft_last_error_message());
        mft_tensor_release(g);
    }
    mft_tensor_release(y);
    CHECK(mft_tape_end() == MFT_OK);
    for (int i = 0; i < n && ok; i++) {
        if (!mft_tensor_requires_grad(in[i])) continue;
        const mft_tensor *gi = mft_tensor_grad(in[i]);
        CHECK_MSG(gi != NULL, "%s: input %d got no grad", what, i);
        if (!gi) continue;
        CHECK_MSG(tu_has_sizes(gi, mft_tensor_ndim(in[i]), mft_tensor_sizes(in[i])),
                  "%s: grad %d sizes differ from the input's", what, i);
        CHECK_MSG(mft_tensor_format(gi) == mft_tensor_format(in[i]),
                  "%s: grad %d is %s, its input %s", what, i,
                  mft_format_name(mft_tensor_format(gi)),
                  mft_format_name(mft_tensor_format(in[i])));
        if (mft_tensor_is_blocked(gi))
            CHECK_MSG(mft_tensor_check_padding(gi) == MFT_OK, "%s: grad %d has a non-zero pad: %s",
                      what, i, mft_last_error_message());
    }
    for (int i = 0; i < n; i++) mft_tensor_zero_grad(in[i]);
}

/* a and ref (F64, same sizes, any layout) agree within rtol of ref's scale */
static bool values_close(const mft_tensor *a, const mft_tensor *ref, double rtol) {
    mft_tensor *ca = mft_contiguous(a, CT), *cr = mft_contiguous(ref, CT);
    bool ok = ca && cr && mft_tensor_dtype(ca) == MFT_F64 && mft_tensor_dtype(cr) == MFT_F64;
    if (ok) {
        const double *x = mft_tensor_data(ca), *y = mft_tensor_data(cr);
        double scale = 1.0, err = 0.0;
        for (int64_t i = 0; i < mft_tensor_numel(cr); i++) {
            scale = fmax(scale, fabs(y[i]));
            err = fmax(err, fabs(x[i] - y[i]));
        }
        ok = err <= rtol * scale;
    }
    mft_tensor_release(ca);
    mft_tensor_release(cr);
    return ok;
}

/* The blocked run's result equals (bit for bit: dtype, sizes, values in
 * logical order; within rounding for the samples that say so) the result of
 * the same sample on the contiguous inputs, and a blocked result keeps its
 * pad lanes zero. */
static void check_same_as_contiguous(const char *what, const sample *s, mft_tensor **in) {
    mft_tensor *ref_in[MAXIN] = {0};
    const int n = s->build(CT, ref_in);
    mft_tensor *ref = n > 0 ? s->fn(NULL, ref_in) : NULL;
    mft_tensor *y = s->fn(NULL, in);
    CHECK_MSG(ref && y, "%s: forward failed (contiguous %p, blocked %p): %s", what, (void *)ref,
              (void *)y, mft_last_error_message());
    if (ref && y) {
        CHECK_MSG(mft_tensor_dtype(y) == mft_tensor_dtype(ref) &&
                      tu_has_sizes(y, mft_tensor_ndim(ref), mft_tensor_sizes(ref)),
                  "%s: result dtype / sizes differ from the contiguous run's", what);
        if (!strcmp(s->op, "flatten_linear")) /* sums in the blocked memory order */
            CHECK_MSG(values_close(y, ref, 1e-12),
                      "%s: result differs from the contiguous run's beyond rounding", what);
        else
            CHECK_MSG(mft_tensor_hash(y) == mft_tensor_hash(ref),
                      "%s: result differs from the contiguous run's (hash %016llx vs %016llx)",
                      what, (unsigned long long)mft_tensor_hash(y),
                      (unsigned long long)mft_tensor_hash(ref));
        if (mft_tensor_is_blocked(y))
            CHECK_MSG(mft_tensor_check_padding(y) == MFT_OK, "%s: result has a non-zero pad: %s",
                      what, mft_last_error_message());
    }
    mft_tensor_release(ref);
    mft_tensor_release(y);
    for (int i = 0; i < MAXIN; i++) mft_tensor_release(ref_in[i]);
    mft_clear_error();
}

/* A view refused on blocked tensors by design: the forward fails with that
 * status (a message naming it), records nothing and leaks nothing. */
static void check_refused(const char *what, const sample *s, mft_tensor **in, mft_status want) {
    CHECK(mft_tape_begin() == MFT_OK);
    mft_clear_error();
    mft_tensor *y = s->fn(NULL, in);
    CHECK_MSG(y == NULL && mft_last_error() == want, "%s: expected the refusal %s, got %s (%s)",
              what, mft_status_str(want), y ? "a result" : mft_status_str(mft_last_error()),
              mft_last_error_message());
    CHECK_MSG(mft_last_error_message()[0] != '\0', "%s: refusal without a message", what);
    CHECK_EQ_I(mft_tape_size(), 0);
    mft_tensor_release(y);
    CHECK(mft_tape_end() == MFT_OK);
    mft_clear_error();
    g_blocked_refusals++;
}

static void run_sample(int si, mft_format f) {
    const sample *s = &SAMPLES[si];
    char what[160];
    snprintf(what, sizeof what, "%s%s%s [x %s]", s->op, s->variant[0] ? " " : "", s->variant,
             format_label(f));
    mft_tensor *in[MAXIN] = {0};
    mft_clear_error();
    int n = s->build(f, in);
    bool ok = n > 0 && n <= MAXIN;
    for (int i = 0; i < n && ok; i++) ok = in[i] != NULL;
    CHECK_MSG(ok, "%s: building the inputs failed: %s", what, mft_last_error_message());
    const bool blocked = is_blocked_format(f);
    if (ok && blocked) {
        /* every activation is rank 3-5, so it is blocked in this run */
        ok = mft_tensor_is_blocked(in[0]) && mft_tensor_format(in[0]) == f;
        CHECK_MSG(ok, "%s: the activation is %s, not blocked", what,
                  mft_format_name(mft_tensor_format(in[0])));
    }
    const mft_status refused = blocked ? blocked_refusal_of(s) : MFT_OK;
    if (ok && refused != MFT_OK) {
        check_refused(what, s, in, refused);
    } else if (ok) {
        g_runs++;
        mft_gradcheck_opts o = {s->eps > 0 ? s->eps : 1e-6, 1e-5, 1e-3, 7};
        mft_status st = mft_gradcheck(s->fn, NULL, n, in, &o);
        CHECK_MSG(st == MFT_OK, "%s: gradcheck: %s: %s", what, mft_status_str(st),
                  mft_last_error_message());
        mft_clear_error();
        check_backward(what, s, n, in);
        mft_clear_error();
        if (blocked) {
            check_same_as_contiguous(what, s, in);
            g_blocked_runs++;
            g_ran_blocked[si] = true;
        }
    }
    CHECK_EQ_I(mft_tape_size(), 0);
    for (int i = 0; i < MAXIN; i++) mft_tensor_release(in[i]);
}

/* Every sample runs with the activation contiguous, channels-last (F_BOTH)
 * and blocked (nChw16c or nChw8c, blocked_format); every DIFF op has a
 * blocked run that is not a refusal, except the views refused by design. */
static void test_gradcheck_sweep(void) {
    g_runs = g_blocked_runs = g_blocked_refusals = 0;
    memset(g_ran_blocked, 0, sizeof g_ran_blocked);
    int n8 = 0;
    for (int s = 0; s < NSAMPLES; s++) {
        run_sample(s, CT);
        if (SAMPLES[s].formats == F_BOTH) run_sample(s, CL);
        const mft_format bf = blocked_format(s);
        n8 += bf == MFT_NCHW8C;
        run_sample(s, bf);
    }
    for (int i = 0; i < mft_op_count(); i++) {
        const mft_op_info *r = mft_op_at(i);
        if (!r || !r->name || r->kind != MFT_OP_KIND_DIFF) continue;
        bool ran = false;
        for (int s = 0; s < NSAMPLES && !ran; s++)
            ran = g_ran_blocked[s] && !strcmp(SAMPLES[s].op, r->name);
        CHECK_MSG(ran || op_refused_by_design(r->name),
                  "differentiable op '%s' has no blocked run in the gradcheck sweep", r->name);
    }
    CHECK(n8 > 0 && n8 < NSAMPLES);
    printf("sweep: %d gradchecks over %d samples; blocked: %d runs (%d nchw8c samples), %d "
           "refusals by design\n",
           g_runs, NSAMPLES, g_blocked_runs, n8, g_blocked_refusals);
}

int main(void) {
    RUN(test_registry_coverage);
    RUN(test_gradcheck_sweep);
    TEST_MAIN_END();
}
