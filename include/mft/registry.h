/* mft/registry.h — the op registry: every op of the library, one row each,
 * in one X-macro list. Everything that needs to know the ops reads this
 * list and nothing lists them a second time: the declarations of the
 * uniform elementwise ops (mft/ops.h), the internal op ids, the names the
 * dispatcher accepts, the format rule each op follows (mft_rule_for_op,
 * docs/rules.md via mft-rules), and the registry test. Adding an op is its
 * row here plus its kernel (docs/adding-an-op.md).
 *
 * MFT_OP_REGISTRY(X, A) expands X(A, ID, name, family, sig, nin, nout, rule,
 * kind, dispatch) for every row, A passed through unchanged:
 *   ID        the C identifier of the op (MFT__OP_<ID> internally);
 *   name      the op's name, mft_<name> its public function (kind KERNEL:
 *             a dispatch key with no public function of its own);
 *   family    the folder of ops/ (or layer) that implements it;
 *   sig       UNARY  mft_X(x), mft_X_(x), mft_X_out(out, x)
 *             SCALAR mft_X(x, s), mft_X_(x, s), mft_X_out(out, x, s)
 *             RANGE  mft_X(x, lo, hi) and its _ / _out forms
 *             BINARY mft_X(a, b), mft_X_(a, b), mft_X_out(out, a, b)
 *             NONE   a prototype of its own in its header;
 *   nin, nout the tensors it takes and returns (its kernel's, when
 *             dispatched; -1: any number);
 *   rule      the row of the format rules (the first column of a row of
 *             tensor/rules.def; mft_rule_for_op reads it) that gives its results
 *             their layout and its gradients theirs;
 *   kind      DIFF (differentiable: records a tape node while a tape
 *             records), PLAIN (not differentiable), BACKWARD (a public
 *             backward function), KERNEL (a backward kernel's dispatch key);
 *   dispatch  DISPATCHED (runs through the kernel table: a reference
 *             kernel, fast kernels, user kernels; mft/dispatch.h) or DIRECT.
 * The in-place and out forms (mft_X_, mft_X_out) of an op are not rows of
 * their own: they follow the "in-place and out" rule. */
#ifndef MFT_REGISTRY_H
#define MFT_REGISTRY_H

#include <stdbool.h>
#include "mft/export.h"
#include "mft/rules.h"

/* clang-format off */
#define MFT_OP_REGISTRY(X, A) \
    X(A, NEG, neg, elementwise, UNARY, 1, 1, UNARY, DIFF, DIRECT) \
    X(A, ABS, abs, elementwise, UNARY, 1, 1, UNARY, DIFF, DIRECT) \
    X(A, SQRT, sqrt, elementwise, UNARY, 1, 1, UNARY, DIFF, DIRECT) \
    X(A, RSQRT, rsqrt, elementwise, UNARY, 1, 1, UNARY, DIFF, DIRECT) \
    X(A, EXP, exp, elementwise, UNARY, 1, 1, UNARY, DIFF, DIRECT) \
    X(A, LOG, log, elementwise, UNARY, 1, 1, UNARY, DIFF, DIRECT) \
    X(A, SIN, sin, elementwise, UNARY, 1, 1, UNARY, DIFF, DIRECT) \
    X(A, COS, cos, elementwise, UNARY, 1, 1, UNARY, DIFF, DIRECT) \
    X(A, TANH, tanh, elementwise, UNARY, 1, 1, UNARY, DIFF, DIRECT) \
    X(A, SIGMOID, sigmoid, elementwise, UNARY, 1, 1, UNARY, DIFF, DIRECT) \
    X(A, RELU, relu, elementwise, UNARY, 1, 1, UNARY, DIFF, DIRECT) \
    X(A, GELU, gelu, elementwise, UNARY, 1, 1, UNARY, DIFF, DIRECT) \
    X(A, SILU, silu, elementwise, UNARY, 1, 1, UNARY, DIFF, DIRECT) \
    X(A, SQUARE, square, elementwise, UNARY, 1, 1, UNARY, DIFF, DIRECT) \
    X(A, RECIPROCAL, reciprocal, elementwise, UNARY, 1, 1, UNARY, DIFF, DIRECT) \
    X(A, SIGN, sign, elementwise, UNARY, 1, 1, UNARY, DIFF, DIRECT) \
    X(A, FLOOR, floor, elementwise, UNARY, 1, 1, UNARY, DIFF, DIRECT) \
    X(A, CEIL, ceil, elementwise, UNARY, 1, 1, UNARY, DIFF, DIRECT) \
    X(A, ROUND, round, elementwise, UNARY, 1, 1, UNARY, DIFF, DIRECT) \
    X(A, CLAMP, clamp, elementwise, RANGE, 1, 1, UNARY, DIFF, DIRECT) \
    X(A, HARDTANH, hardtanh, elementwise, RANGE, 1, 1, UNARY, DIFF, DIRECT) \
    X(A, ADD_SCALAR, add_scalar, elementwise, SCALAR, 1, 1, UNARY, DIFF, DIRECT) \
    X(A, SUB_SCALAR, sub_scalar, elementwise, SCALAR, 1, 1, UNARY, DIFF, DIRECT) \
    X(A, RSUB_SCALAR, rsub_scalar, elementwise, SCALAR, 1, 1, UNARY, DIFF, DIRECT) \
    X(A, MUL_SCALAR, mul_scalar, elementwise, SCALAR, 1, 1, UNARY, DIFF, DIRECT) \
    X(A, DIV_SCALAR, div_scalar, elementwise, SCALAR, 1, 1, UNARY, DIFF, DIRECT) \
    X(A, MAXIMUM_SCALAR, maximum_scalar, elementwise, SCALAR, 1, 1, UNARY, DIFF, DIRECT) \
    X(A, MINIMUM_SCALAR, minimum_scalar, elementwise, SCALAR, 1, 1, UNARY, DIFF, DIRECT) \
    X(A, POW_SCALAR, pow_scalar, elementwise, SCALAR, 1, 1, UNARY, DIFF, DIRECT) \
    X(A, LEAKY_RELU, leaky_relu, elementwise, SCALAR, 1, 1, UNARY, DIFF, DIRECT) \
    X(A, EQ_SCALAR, eq_scalar, elementwise, SCALAR, 1, 1, UNARY, PLAIN, DIRECT) \
    X(A, NE_SCALAR, ne_scalar, elementwise, SCALAR, 1, 1, UNARY, PLAIN, DIRECT) \
    X(A, LT_SCALAR, lt_scalar, elementwise, SCALAR, 1, 1, UNARY, PLAIN, DIRECT) \
    X(A, LE_SCALAR, le_scalar, elementwise, SCALAR, 1, 1, UNARY, PLAIN, DIRECT) \
    X(A, GT_SCALAR, gt_scalar, elementwise, SCALAR, 1, 1, UNARY, PLAIN, DIRECT) \
    X(A, GE_SCALAR, ge_scalar, elementwise, SCALAR, 1, 1, UNARY, PLAIN, DIRECT) \
    X(A, LERP_SCALAR, lerp_scalar, elementwise, NONE, 2, 1, UNARY, DIFF, DIRECT) \
    X(A, ADD, add, elementwise, BINARY, 2, 1, BINARY, DIFF, DIRECT) \
    X(A, SUB, sub, elementwise, BINARY, 2, 1, BINARY, DIFF, DIRECT) \
    X(A, MUL, mul, elementwise, BINARY, 2, 1, BINARY, DIFF, DIRECT) \
    X(A, DIV, div, elementwise, BINARY, 2, 1, BINARY, DIFF, DIRECT) \
    X(A, MAXIMUM, maximum, elementwise, BINARY, 2, 1, BINARY, DIFF, DIRECT) \
    X(A, MINIMUM, minimum, elementwise, BINARY, 2, 1, BINARY, DIFF, DIRECT) \
    X(A, POW, pow, elementwise, BINARY, 2, 1, BINARY, DIFF, DIRECT) \
    X(A, EQ, eq, elementwise, BINARY, 2, 1, BINARY, PLAIN, DIRECT) \
    X(A, NE, ne, elementwise, BINARY, 2, 1, BINARY, PLAIN, DIRECT) \
    X(A, LT, lt, elementwise, BINARY, 2, 1, BINARY, PLAIN, DIRECT) \
    X(A, LE, le, elementwise, BINARY, 2, 1, BINARY, PLAIN, DIRECT) \
    X(A, GT, gt, elementwise, BINARY, 2, 1, BINARY, PLAIN, DIRECT) \
    X(A, GE, ge, elementwise, BINARY, 2, 1, BINARY, PLAIN, DIRECT) \
    X(A, ADD_ALPHA, add_alpha, elementwise, NONE, 2, 1, BINARY, DIFF, DIRECT) \
    X(A, WHERE, where, elementwise, NONE, 3, 1, TERNARY, DIFF, DIRECT) \
    X(A, ADDCMUL, addcmul, elementwise, NONE, 3, 1, TERNARY, DIFF, DIRECT) \
    X(A, LERP, lerp, elementwise, NONE, 3, 1, TERNARY, DIFF, DIRECT) \
    X(A, TO_DTYPE, to_dtype, shape, NONE, 1, 1, CAST, DIFF, DIRECT) \
    X(A, COPY_, copy_, elementwise, NONE, 1, 1, INPLACE, PLAIN, DIRECT) \
    X(A, FILL_, fill_, elementwise, NONE, 0, 1, INPLACE, PLAIN, DIRECT) \
    X(A, ZERO_, zero_, elementwise, NONE, 0, 1, INPLACE, PLAIN, DIRECT) \
    X(A, SUM, sum, reduce, NONE, 1, 1, REDUCE, DIFF, DIRECT) \
    X(A, MEAN, mean, reduce, NONE, 1, 1, REDUCE, DIFF, DIRECT) \
    X(A, AMAX, amax, reduce, NONE, 1, 1, REDUCE, DIFF, DIRECT) \
    X(A, AMIN, amin, reduce, NONE, 1, 1, REDUCE, DIFF, DIRECT) \
    X(A, VAR, var, reduce, NONE, 1, 1, REDUCE, DIFF, DIRECT) \
    X(A, STD, std, reduce, NONE, 1, 1, REDUCE, DIFF, DIRECT) \
    X(A, ARGMAX, argmax, reduce, NONE, 1, 1, REDUCE, PLAIN, DIRECT) \
    X(A, SUM_TO_SIZE, sum_to_size, reduce, NONE, 1, 1, REDUCE_KEEPDIM, DIFF, DIRECT) \
    X(A, CONV2D, conv2d, conv, NONE, 2, 1, CONV2D, DIFF, DISPATCHED) \
    X(A, CONV_TRANSPOSE2D, conv_transpose2d, conv, NONE, 3, 1, CONV_TRANSPOSE2D, DIFF, DIRECT) \
    X(A, CONV3D, conv3d, conv, NONE, 2, 1, CONV3D, DIFF, DISPATCHED) \
    X(A, CONV1D, conv1d, conv, NONE, 3, 1, CONV1D, DIFF, DIRECT) \
    X(A, MAX_POOL1D, max_pool1d, pool, NONE, 1, 1, POOL, DIFF, DIRECT) \
    X(A, MAX_POOL2D, max_pool2d, pool, NONE, 1, 2, POOL, DIFF, DISPATCHED) \
    X(A, MAX_POOL3D, max_pool3d, pool, NONE, 1, 2, POOL, DIFF, DISPATCHED) \
    X(A, AVG_POOL1D, avg_pool1d, pool, NONE, 1, 1, POOL, DIFF, DIRECT) \
    X(A, AVG_POOL2D, avg_pool2d, pool, NONE, 1, 1, POOL, DIFF, DISPATCHED) \
    X(A, AVG_POOL3D, avg_pool3d, pool, NONE, 1, 1, POOL, DIFF, DISPATCHED) \
    X(A, ADAPTIVE_AVG_POOL2D, adaptive_avg_pool2d, pool, NONE, 1, 1, POOL, DIFF, DISPATCHED) \
    X(A, ADAPTIVE_MAX_POOL2D, adaptive_max_pool2d, pool, NONE, 1, 2, POOL, DIFF, DISPATCHED) \
    X(A, ADAPTIVE_AVG_POOL3D, adaptive_avg_pool3d, pool, NONE, 1, 1, POOL, DIFF, DISPATCHED) \
    X(A, ADAPTIVE_MAX_POOL3D, adaptive_max_pool3d, pool, NONE, 1, 2, POOL, DIFF, DISPATCHED) \
    X(A, MAX_POOL1D_WITH_INDICES, max_pool1d_with_indices, pool, NONE, 1, 2, POOL, DIFF, DIRECT) \
    X(A, MAX_POOL2D_WITH_INDICES, max_pool2d_with_indices, pool, NONE, 1, 2, POOL, DIFF, DIRECT) \
    X(A, MAX_POOL3D_WITH_INDICES, max_pool3d_with_indices, pool, NONE, 1, 2, POOL, DIFF, DIRECT) \
    X(A, ADAPTIVE_MAX_POOL2D_WITH_INDICES, adaptive_max_pool2d_with_indices, pool, NONE, 1, 2, POOL, DIFF, DIRECT) \
    X(A, ADAPTIVE_MAX_POOL3D_WITH_INDICES, adaptive_max_pool3d_with_indices, pool, NONE, 1, 2, POOL, DIFF, DIRECT) \
    X(A, RELU_MAX_POOL2D, relu_max_pool2d, pool, NONE, 1, 2, POOL, DIFF, DISPATCHED) \
    X(A, RELU_MAX_POOL2D_WITH_INDICES, relu_max_pool2d_with_indices, pool, NONE, 1, 2, POOL, DIFF, DIRECT) \
    X(A, INTERPOLATE, interpolate, resize, NONE, 1, 1, RESIZE, DIFF, DISPATCHED) \
    X(A, PAD, pad, shape, NONE, 1, 1, PAD, DIFF, DISPATCHED) \
    X(A, BATCH_NORM, batch_norm, norm, NONE, 5, 3, NORM, DIFF, DISPATCHED) \
    X(A, GROUP_NORM, group_norm, norm, NONE, 3, 3, NORM, DIFF, DISPATCHED) \
    X(A, BATCH_NORM_EX, batch_norm_ex, norm, NONE, 5, 3, NORM, DIFF, DIRECT) \
    X(A, GROUP_NORM_EX, group_norm_ex, norm, NONE, 3, 3, NORM, DIFF, DIRECT) \
    X(A, INSTANCE_NORM, instance_norm, norm, NONE, 5, 1, NORM_DEV, DIFF, DIRECT) \
    X(A, LAYER_NORM, layer_norm, norm, NONE, 3, 3, NORM_DEV, DIFF, DISPATCHED) \
    X(A, LAYER_NORM_EX, layer_norm_ex, norm, NONE, 3, 3, NORM_DEV, DIFF, DIRECT) \
    X(A, SOFTMAX, softmax, softmax, NONE, 1, 1, SOFTMAX, DIFF, DISPATCHED) \
    X(A, LOG_SOFTMAX, log_softmax, softmax, NONE, 1, 1, SOFTMAX, DIFF, DISPATCHED) \
    X(A, DROPOUT, dropout, dropout, NONE, 1, 1, DROPOUT, DIFF, DIRECT) \
    X(A, DROPOUT2D, dropout2d, dropout, NONE, 1, 1, DROPOUT, DIFF, DIRECT) \
    X(A, IDX_LOAD, idx_load, data, NONE, 0, 1, DATA, PLAIN, DIRECT) \
    X(A, MNIST_LOAD, mnist_load, data, NONE, 0, 2, DATA, PLAIN, DIRECT) \
    X(A, ACCURACY_COUNT, accuracy_count, data, NONE, 2, 0, DATA, PLAIN, DIRECT) \
    X(A, GATHER_ROWS, gather_rows, data, NONE, 1, 1, GATHER, PLAIN, DIRECT) \
    X(A, CAT, cat, shape, NONE, -1, 1, CAT, DIFF, DIRECT) \
    X(A, STACK, stack, shape, NONE, -1, 1, CAT, DIFF, DIRECT) \
    X(A, LINEAR, linear, linalg, NONE, 3, 1, LINALG, DIFF, DIRECT) \
    X(A, MATMUL, matmul, linalg, NONE, 2, 1, LINALG, DIFF, DISPATCHED) \
    X(A, FLATTEN_LINEAR, flatten_linear, linalg, NONE, 3, 1, FLATTEN_LINEAR, DIFF, DIRECT) \
    X(A, CROSS_ENTROPY, cross_entropy, loss, NONE, 3, 1, LOSS, DIFF, DIRECT) \
    X(A, NLL_LOSS, nll_loss, loss, NONE, 3, 1, LOSS, DIFF, DIRECT) \
    X(A, MSE_LOSS, mse_loss, loss, NONE, 2, 1, LOSS, DIFF, DIRECT) \
    X(A, BINARY_CROSS_ENTROPY_WITH_LOGITS, binary_cross_entropy_with_logits, loss, NONE, 4, 1, LOSS, DIFF, DIRECT) \
    X(A, PERMUTE, permute, shape, NONE, 1, 1, VIEW, DIFF, DIRECT) \
    X(A, TRANSPOSE, transpose, shape, NONE, 1, 1, VIEW, DIFF, DIRECT) \
    X(A, NARROW, narrow, shape, NONE, 1, 1, VIEW, DIFF, DIRECT) \
    X(A, SELECT, select, shape, NONE, 1, 1, VIEW, DIFF, DIRECT) \
    X(A, SLICE, slice, shape, NONE, 1, 1, VIEW, DIFF, DIRECT) \
    X(A, UNSQUEEZE, unsqueeze, shape, NONE, 1, 1, VIEW, DIFF, DIRECT) \
    X(A, SQUEEZE, squeeze, shape, NONE, 1, 1, VIEW, DIFF, DIRECT) \
    X(A, EXPAND, expand, shape, NONE, 1, 1, VIEW, DIFF, DIRECT) \
    X(A, AS_STRIDED, as_strided, shape, NONE, 1, 1, VIEW, PLAIN, DIRECT) \
    X(A, VIEW, view, shape, NONE, 1, 1, VIEW, DIFF, DIRECT) \
    X(A, SPLIT, split, shape, NONE, 1, -1, VIEW, DIFF, DIRECT) \
    X(A, RESHAPE, reshape, shape, NONE, 1, 1, RESHAPE, DIFF, DIRECT) \
    X(A, FLATTEN, flatten, shape, NONE, 1, 1, RESHAPE, DIFF, DIRECT) \
    X(A, EMPTY, empty, factory, NONE, 0, 1, FACTORY, PLAIN, DIRECT) \
    X(A, ZEROS, zeros, factory, NONE, 0, 1, FACTORY, PLAIN, DIRECT) \
    X(A, ONES, ones, factory, NONE, 0, 1, FACTORY, PLAIN, DIRECT) \
    X(A, FULL, full, factory, NONE, 0, 1, FACTORY, PLAIN, DIRECT) \
    X(A, ARANGE, arange, factory, NONE, 0, 1, FACTORY, PLAIN, DIRECT) \
    X(A, RAND, rand, factory, NONE, 0, 1, FACTORY, PLAIN, DIRECT) \
    X(A, RANDN, randn, factory, NONE, 0, 1, FACTORY, PLAIN, DIRECT) \
    X(A, IMAGES_TO_BATCH, images_to_batch, factory, NONE, 1, 1, FACTORY, PLAIN, DIRECT) \
    X(A, EMPTY_STRIDED, empty_strided, factory, NONE, 0, 1, STRIDED, PLAIN, DIRECT) \
    X(A, FROM_BLOB, from_blob, factory, NONE, 0, 1, STRIDED, PLAIN, DIRECT) \
    X(A, FROM_BLOB_LAYOUT, from_blob_layout, factory, NONE, 0, 1, FACTORY, PLAIN, DIRECT) \
    X(A, EMPTY_LAYOUT, empty_layout, factory, NONE, 0, 1, FACTORY, PLAIN, DIRECT) \
    X(A, CONTIGUOUS, contiguous, shape, NONE, 1, 1, CONVERT, DIFF, DIRECT) \
    X(A, TO_FORMAT, to_format, shape, NONE, 1, 1, CONVERT, DIFF, DIRECT) \
    X(A, TO_LAYOUT, to_layout, shape, NONE, 1, 1, CONVERT, DIFF, DIRECT) \
    X(A, CLONE, clone, shape, NONE, 1, 1, CONVERT, DIFF, DIRECT) \
    X(A, EMPTY_LIKE, empty_like, factory, NONE, 1, 1, LIKE, PLAIN, DIRECT) \
    X(A, ZEROS_LIKE, zeros_like, factory, NONE, 1, 1, LIKE, PLAIN, DIRECT) \
    X(A, CONV1D_BACKWARD, conv1d_backward, conv, NONE, 3, 3, BACKWARD, BACKWARD, DIRECT) \
    X(A, CONV2D_BACKWARD, conv2d_backward, conv, NONE, 3, 3, BACKWARD, BACKWARD, DIRECT) \
    X(A, CONV3D_BACKWARD, conv3d_backward, conv, NONE, 3, 3, BACKWARD, BACKWARD, DIRECT) \
    X(A, CONV_TRANSPOSE2D_BACKWARD, conv_transpose2d_backward, conv, NONE, 3, 3, BACKWARD, BACKWARD, DIRECT) \
    X(A, MAX_POOL2D_BACKWARD, max_pool2d_backward, pool, NONE, 2, 1, BACKWARD, BACKWARD, DISPATCHED) \
    X(A, MAX_POOL2D_BACKWARD_WINDOWS, max_pool2d_backward_windows, pool, NONE, 2, 1, BACKWARD, BACKWARD, DIRECT) \
    X(A, AVG_POOL2D_BACKWARD, avg_pool2d_backward, pool, NONE, 1, 1, BACKWARD, BACKWARD, DISPATCHED) \
    X(A, MAX_POOL1D_BACKWARD, max_pool1d_backward, pool, NONE, 3, 1, BACKWARD, BACKWARD, DIRECT) \
    X(A, AVG_POOL1D_BACKWARD, avg_pool1d_backward, pool, NONE, 2, 1, BACKWARD, BACKWARD, DIRECT) \
    X(A, MAX_POOL3D_BACKWARD, max_pool3d_backward, pool, NONE, 2, 1, BACKWARD, BACKWARD, DISPATCHED) \
    X(A, AVG_POOL3D_BACKWARD, avg_pool3d_backward, pool, NONE, 1, 1, BACKWARD, BACKWARD, DISPATCHED) \
    X(A, ADAPTIVE_AVG_POOL2D_BACKWARD, adaptive_avg_pool2d_backward, pool, NONE, 1, 1, BACKWARD, BACKWARD, DISPATCHED) \
    X(A, ADAPTIVE_MAX_POOL2D_BACKWARD, adaptive_max_pool2d_backward, pool, NONE, 3, 1, BACKWARD, BACKWARD, DIRECT) \
    X(A, ADAPTIVE_AVG_POOL3D_BACKWARD, adaptive_avg_pool3d_backward, pool, NONE, 1, 1, BACKWARD, BACKWARD, DISPATCHED) \
    X(A, ADAPTIVE_MAX_POOL3D_BACKWARD, adaptive_max_pool3d_backward, pool, NONE, 3, 1, BACKWARD, BACKWARD, DIRECT) \
    X(A, BATCH_NORM_BACKWARD, batch_norm_backward, norm, NONE, 2, 1, BACKWARD, BACKWARD, DISPATCHED) \
    X(A, LAYER_NORM_BACKWARD, layer_norm_backward, norm, NONE, 2, 1, BACKWARD, BACKWARD, DISPATCHED) \
    X(A, GROUP_NORM_BACKWARD, group_norm_backward, norm, NONE, 2, 1, BACKWARD, BACKWARD, DISPATCHED) \
    X(A, INSTANCE_NORM_BACKWARD, instance_norm_backward, norm, NONE, 5, 3, BACKWARD, BACKWARD, DIRECT) \
    X(A, SOFTMAX_BACKWARD, softmax_backward, softmax, NONE, 2, 1, BACKWARD, BACKWARD, DISPATCHED) \
    X(A, LOG_SOFTMAX_BACKWARD, log_softmax_backward, softmax, NONE, 2, 1, BACKWARD, BACKWARD, DISPATCHED) \
    X(A, INTERPOLATE_BACKWARD, interpolate_backward, resize, NONE, 1, 1, BACKWARD, BACKWARD, DISPATCHED) \
    X(A, DROPOUT_BACKWARD, dropout_backward, dropout, NONE, 1, 1, BACKWARD, BACKWARD, DIRECT) \
    X(A, DROPOUT2D_BACKWARD, dropout2d_backward, dropout, NONE, 1, 1, BACKWARD, BACKWARD, DIRECT) \
    X(A, PAD_BACKWARD, pad_backward, shape, NONE, 1, 1, BACKWARD, BACKWARD, DISPATCHED) \
    X(A, CAT_BACKWARD, cat_backward, shape, NONE, 1, -1, BACKWARD, BACKWARD, DIRECT) \
    X(A, STACK_BACKWARD, stack_backward, shape, NONE, 1, -1, BACKWARD, BACKWARD, DIRECT) \
    X(A, MATMUL_BACKWARD, matmul_backward, linalg, NONE, 3, 2, BACKWARD, BACKWARD, DIRECT) \
    X(A, LINEAR_BACKWARD, linear_backward, linalg, NONE, 3, 3, BACKWARD, BACKWARD, DIRECT) \
    X(A, FLATTEN_LINEAR_BACKWARD, flatten_linear_backward, linalg, NONE, 3, 3, BACKWARD, BACKWARD, DIRECT) \
    X(A, CROSS_ENTROPY_BACKWARD, cross_entropy_backward, loss, NONE, 3, 1, BACKWARD, BACKWARD, DIRECT) \
    X(A, NLL_LOSS_BACKWARD, nll_loss_backward, loss, NONE, 3, 1, BACKWARD, BACKWARD, DIRECT) \
    X(A, MSE_LOSS_BACKWARD, mse_loss_backward, loss, NONE, 3, 1, BACKWARD, BACKWARD, DIRECT) \
    X(A, BINARY_CROSS_ENTROPY_WITH_LOGITS_BACKWARD, binary_cross_entropy_with_logits_backward, loss, NONE, 5, 1, BACKWARD, BACKWARD, DIRECT) \
    X(A, CONV2D_BACKWARD_INPUT, conv2d_backward_input, conv, NONE, 2, 1, BACKWARD, KERNEL, DISPATCHED) \
    X(A, CONV2D_BACKWARD_WEIGHT, conv2d_backward_weight, conv, NONE, 2, 1, BACKWARD, KERNEL, DISPATCHED) \
    X(A, CONV3D_BACKWARD_INPUT, conv3d_backward_input, conv, NONE, 2, 1, BACKWARD, KERNEL, DISPATCHED) \
    X(A, CONV3D_BACKWARD_WEIGHT, conv3d_backward_weight, conv, NONE, 2, 1, BACKWARD, KERNEL, DISPATCHED)
/* clang-format on */

/* The uniform elementwise ops, each F(name): */
#define MFT__REG_PICK_UNARY_UNARY(F, name) F(name)
#define MFT__REG_PICK_UNARY_SCALAR(F, name)
#define MFT__REG_PICK_UNARY_RANGE(F, name)
#define MFT__REG_PICK_UNARY_BINARY(F, name)
#define MFT__REG_PICK_UNARY_NONE(F, name)
#define MFT__REG_PICK_SCALAR_UNARY(F, name)
#define MFT__REG_PICK_SCALAR_SCALAR(F, name) F(name)
#define MFT__REG_PICK_SCALAR_RANGE(F, name)
#define MFT__REG_PICK_SCALAR_BINARY(F, name)
#define MFT__REG_PICK_SCALAR_NONE(F, name)
#define MFT__REG_PICK_BINARY_UNARY(F, name)
#define MFT__REG_PICK_BINARY_SCALAR(F, name)
#define MFT__REG_PICK_BINARY_RANGE(F, name)
#define MFT__REG_PICK_BINARY_BINARY(F, name) F(name)
#define MFT__REG_PICK_BINARY_NONE(F, name)
#define MFT__REG_UNARY(F, ID, name, fam, sig, ...) MFT__REG_PICK_UNARY_##sig(F, name)
#define MFT__REG_SCALAR(F, ID, name, fam, sig, ...) MFT__REG_PICK_SCALAR_##sig(F, name)
#define MFT__REG_BINARY(F, ID, name, fam, sig, ...) MFT__REG_PICK_BINARY_##sig(F, name)
/* MFT_UNARY_OPS(F): F(neg) F(abs) ... for every row of sig UNARY (y = f(x));
 * MFT_SCALAR_OPS(F) for sig SCALAR (y = f(x, s)); MFT_BINARY_OPS(F) for sig
 * BINARY (c = f(a, b), broadcasting). */
#define MFT_UNARY_OPS(F) MFT_OP_REGISTRY(MFT__REG_UNARY, F)
#define MFT_SCALAR_OPS(F) MFT_OP_REGISTRY(MFT__REG_SCALAR, F)
#define MFT_BINARY_OPS(F) MFT_OP_REGISTRY(MFT__REG_BINARY, F)

/* ------------------------------------------------------------ at run time
 * The same rows as data, for tools and tests (tensor/registry.c). */
typedef enum mft_op_sig {
    MFT_OP_SIG_UNARY,
    MFT_OP_SIG_SCALAR,
    MFT_OP_SIG_RANGE,
    MFT_OP_SIG_BINARY,
    MFT_OP_SIG_NONE
} mft_op_sig;
typedef enum mft_op_kind {
    MFT_OP_KIND_DIFF,     /* differentiable: records a tape node */
    MFT_OP_KIND_PLAIN,    /* not differentiable */
    MFT_OP_KIND_BACKWARD, /* a public backward function */
    MFT_OP_KIND_KERNEL    /* a backward kernel's dispatch key (no public function) */
} mft_op_kind;
typedef struct mft_op_info {
    const char *name;            /* "conv2d": mft_conv2d */
    const char *family;          /* "conv": ops/conv/ */
    mft_op_sig sig;
    int ninputs, noutputs;       /* -1: any number */
    const mft_format_rule *rule; /* the row that gives its results their layout */
    mft_op_kind kind;
    bool dispatched;             /* runs through the kernel table (mft/dispatch.h) */
} mft_op_info;

/* Rows 0 .. mft_op_count() - 1, in registry order (borrowed, static). */
MFT_API int mft_op_count(void);
MFT_API const mft_op_info *mft_op_at(int i);
/* The row named "relu" or "mft_relu"; NULL when no row has that name (the
 * in-place and out forms "relu_", "relu_out" are not rows: mft_rule_for_op
 * resolves those). */
MFT_API const mft_op_info *mft_op_find(const char *name);

#endif
