/* tensor/reorder_internal.h — the reorder kernels between plain layouts and
 * C-blocked layouts (nChw16c / nChw8c and their 3-D and 5-D relatives), f32,
 * on raw pointers (tensor/reorder_blocked.c). Private to the tensor layer:
 * the copy path calls them once it has checked both tensors; they check
 * nothing and report nothing.
 *
 * Note [Reorder index mapping]
 * The logical tensor is (N, C, S): S is the product of the spatial dims
 * (H*W, D*H*W, L), which are packed in the same order on both sides, so one
 * flat spatial index s stands for all of them. Strides are in elements.
 *
 *   plain   element (n, c, s) at  plain[n*pn + c*pc + s*ps]
 *   blocked element (n, c, s) at  blocked[n*bn + (c/B)*bc1 + s*B + c%B]
 *
 * B is the channel block (8 or 16 take the vector paths; any B >= 1 is
 * correct through the scalar loop). A block holds S*B floats, pixel-major,
 * so bc1 >= S*B and bn >= ceil(C/B)*bc1 (packed nChw16c: bc1 = S*16,
 * bn = ceil(C/16)*S*16, as oneDNN's dnnl_nChw16c; larger strides leave gaps
 * the kernels never touch). Packed NCHW is (pn, pc, ps) = (C*S, S, 1),
 * packed NHWC (S*C, 1, C); any strides are accepted (a non-packed plain side
 * takes the scalar loop).
 *
 * Pad lanes: when C is not a multiple of B, lanes c in [C, ceil(C/B)*B) of
 * the last block exist in memory but hold no element. to_blocked writes them
 * as 0.0f whatever the buffer held (the pad-zero invariant, docs/spec.md
 * §7.2); from_blocked never copies them into the plain result.
 *
 * Preconditions (the caller's): N, C, S >= 0; src and dst do not overlap;
 * the destination's addresses are distinct for distinct elements. Results
 * are bit-identical copies whatever the thread count. */
#ifndef MFT_TENSOR_REORDER_INTERNAL_H
#define MFT_TENSOR_REORDER_INTERNAL_H

#include <stdint.h>

/* plain (pn, pc, ps) -> blocked (bn, bc1, B); pad lanes written as 0.0f. */
void mft__reorder_to_blocked_f32(const float *src, int64_t pn, int64_t pc, int64_t ps, float *dst,
                                 int64_t bn, int64_t bc1, int B, int64_t N, int64_t C, int64_t S);
/* blocked (bn, bc1, B) -> plain (pn, pc, ps); pad lanes are not read into dst. */
void mft__reorder_from_blocked_f32(const float *src, int64_t bn, int64_t bc1, int B, float *dst,
                                   int64_t pn, int64_t pc, int64_t ps, int64_t N, int64_t C,
                                   int64_t S);

#endif
