/* ops/shape/shape_internal.h — what the files of pad, cat / stack and split
 * share beyond ops/ops_internal.h: the recording helpers of their entry
 * points (record.c), pad's index map and its kernels across files (the
 * reference kernels of pad_reference.c, one of which the kernel table of
 * pad_packed.c lists).
 *
 * The files: pad.c holds pad's checks and entry points (forward, backward,
 * autograd node), pad_reference.c its naive kernels, pad_packed.c its fast
 * packed kernels and the kernel table; cat.c holds cat and stack, split.c
 * split (not dispatched: built on copies and views), each with its backward
 * and autograd node beside; record.c the recording helpers they share.
 * copy.c and views.c (the public copies and views) stand alone. */
#ifndef MFT_OPS_SHAPE_INTERNAL_H
#define MFT_OPS_SHAPE_INTERNAL_H

#include "autograd_internal.h"
#include "ops_internal.h"

/* ---------------------------------------------------------------- ops/shape/record.c
 * Each public entry point runs its forward directly when nothing records;
 * under a recording tape the forward runs with grad mode off and the user's
 * scope suspended (mft__shape_ag_begin / mft__shape_ag_end: the helpers it
 * calls neither record nor register), the node is recorded, then the
 * results are handed over like any op result (registered in the innermost
 * scope). */
bool mft__shape_ag_begin(void);
void mft__shape_ag_end(bool prev);
/* Hands y (ours) over as the op's result. */
mft_tensor *mft__shape_ag_hand_over(const char *fn, mft_tensor *y);

/* ---------------------------------------------------------------- pad */
/* Source position of output index o along a dim (see the head of pad.c); -1
 * for constant padding. */
static inline int64_t pad_src(int64_t o, int64_t before, int64_t size, mft_pad_mode mode) {
    int64_t p = o - before;
    if (p >= 0 && p < size) return p;
    if (mode == MFT_PAD_CONSTANT) return -1;
    if (mode == MFT_PAD_REPLICATE) return p < 0 ? 0 : size - 1;
    return p < 0 ? -p : 2 * (size - 1) - p; /* reflect: |pad| < size keeps this in range */
}

/* The reference kernels (pad_reference.c), for tests (declared here,
 * ops_internal.h is shared). */
mft_kernel_fn mft__pad_reference(mft_dtype dt);
mft_kernel_fn mft__pad_backward_reference(mft_dtype dt);
/* The F64 forward reference kernel, also the F64 entry of the kernel table
 * (pad_packed.c). */
void mft__pad_ref_f64(const mft_kernel_args *a);

#endif
