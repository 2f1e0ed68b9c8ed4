/* ops/pool/kernel_table.c — the built-in kernel tables of the pooling family
 * (Note [Kernel tables]; searched in this order through mft__pool_tables of
 * common.c): mft__kernels_pool for the 2-D forward ops (max_pool2d,
 * relu_max_pool2d, avg_pool2d), mft__kernels_pool_more for the rest. One row
 * per (op, format, dtype): CONTIGUOUS F32 = the fast NCHW kernel
 * (max_nchw.c, avg_nchw.c), CHANNELS_LAST F32 = the fast NHWC kernel (NDHWC at
 * rank 5; max_nhwc.c, avg_nhwc.c), CONTIGUOUS F64 = the reference
 * (reference.c); NCHW16C F32 = the native nChw16c kernels (blocked16_*.c) of
 * the 2-D max, relu max, avg and adaptive avg pools and their backward. The F32 reference kernels are not in the tables (the fast
 * NCHW kernel holds the CONTIGUOUS F32 key); the tests reach them through
 * mft__pool_reference and mft__pool_more_reference. */
#include "pool_internal.h"

#define POOL_ROWS(OP, nm, nchw, nhwc, ref)                                                    \
    {MFT__OP_##OP, MFT_CONTIGUOUS, MFT_F32, nm ".nchw.f32", nchw},                             \
    {MFT__OP_##OP, MFT_CHANNELS_LAST, MFT_F32, nm ".nhwc.f32", nhwc},                          \
    {MFT__OP_##OP, MFT_CONTIGUOUS, MFT_F64, nm ".nchw.f64.ref", ref},

const mft__kernel_def mft__kernels_pool[] = {
    POOL_ROWS(MAX_POOL2D, "max_pool2d", mft__pool_max_pool2d_nchw, mft__pool_max_pool2d_nhwc,
              mft__pool_max_pool2d_ref_F64)
    POOL_ROWS(RELU_MAX_POOL2D, "relu_max_pool2d", mft__pool_relu_max_pool2d_nchw,
              mft__pool_relu_max_pool2d_nhwc, mft__pool_relu_max_pool2d_ref_F64)
    POOL_ROWS(AVG_POOL2D, "avg_pool2d", mft__pool_avg_pool2d_nchw, mft__pool_avg_pool2d_nhwc,
              mft__pool_avg_pool2d_ref_F64)
    {MFT__OP_MAX_POOL2D, MFT_NCHW16C, MFT_F32, "max_pool2d.nchw16c.f32",
     mft__pool_max_pool2d_nchw16c},
    {MFT__OP_RELU_MAX_POOL2D, MFT_NCHW16C, MFT_F32, "relu_max_pool2d.nchw16c.f32",
     mft__pool_relu_max_pool2d_nchw16c},
    {MFT__OP_AVG_POOL2D, MFT_NCHW16C, MFT_F32, "avg_pool2d.nchw16c.f32",
     mft__pool_avg_pool2d_nchw16c},
    {0, 0, 0, NULL, NULL},
};

const mft__kernel_def mft__kernels_pool_more[] = {
    POOL_ROWS(MAX_POOL2D_BACKWARD, "max_pool2d_backward", mft__pool_max_backward_nchw,
              mft__pool_max_backward_nhwc, mft__pool_max_backward_ref)
    POOL_ROWS(AVG_POOL2D_BACKWARD, "avg_pool2d_backward", mft__pool_avg_pool2d_backward_nchw,
              mft__pool_avg_pool2d_backward_nhwc, mft__pool_avg_pool2d_backward_ref)
    POOL_ROWS(MAX_POOL3D, "max_pool3d", mft__pool_max_pool3d_nchw, mft__pool_max_pool3d_nhwc,
              mft__pool_max_pool3d_ref)
    POOL_ROWS(AVG_POOL3D, "avg_pool3d", mft__pool_avg_pool3d_nchw, mft__pool_avg_pool3d_nhwc,
              mft__pool_avg_pool3d_ref)
    POOL_ROWS(MAX_POOL3D_BACKWARD, "max_pool3d_backward", mft__pool_max_backward_nchw,
              mft__pool_max_backward_nhwc, mft__pool_max_backward_ref)
    POOL_ROWS(AVG_POOL3D_BACKWARD, "avg_pool3d_backward", mft__pool_avg_pool3d_backward_nchw,
              mft__pool_avg_pool3d_backward_nhwc, mft__pool_avg_pool3d_backward_ref)
    POOL_ROWS(ADAPTIVE_AVG_POOL2D, "adaptive_avg_pool2d", mft__pool_adaptive_avg_nchw,
              mft__pool_adaptive_avg_nhwc, mft__pool_adaptive_ref)
    POOL_ROWS(ADAPTIVE_AVG_POOL2D_BACKWARD, "adaptive_avg_pool2d_backward",
              mft__pool_adaptive_avg_backward_nchw, mft__pool_adaptive_avg_backward_nhwc,
              mft__pool_adaptive_avg_backward_ref)
    POOL_ROWS(ADAPTIVE_MAX_POOL2D, "adaptive_max_pool2d", mft__pool_adaptive_max_nchw,
              mft__pool_adaptive_max_nhwc, mft__pool_adaptive_ref)
    POOL_ROWS(ADAPTIVE_AVG_POOL3D, "adaptive_avg_pool3d", mft__pool_adaptive_avg_nchw,
              mft__pool_adaptive_avg_nhwc, mft__pool_adaptive_ref)
    POOL_ROWS(ADAPTIVE_AVG_POOL3D_BACKWARD, "adaptive_avg_pool3d_backward",
              mft__pool_adaptive_avg_backward_nchw, mft__pool_adaptive_avg_backward_nhwc,
              mft__pool_adaptive_avg_backward_ref)
    POOL_ROWS(ADAPTIVE_MAX_POOL3D, "adaptive_max_pool3d", mft__pool_adaptive_max_nchw,
              mft__pool_adaptive_max_nhwc, mft__pool_adaptive_ref)
    {MFT__OP_MAX_POOL2D_BACKWARD, MFT_NCHW16C, MFT_F32, "max_pool2d_backward.nchw16c.f32",
     mft__pool_max_backward_nchw16c},
    {MFT__OP_AVG_POOL2D_BACKWARD, MFT_NCHW16C, MFT_F32, "avg_pool2d_backward.nchw16c.f32",
     mft__pool_avg_pool2d_backward_nchw16c},
    {MFT__OP_ADAPTIVE_AVG_POOL2D, MFT_NCHW16C, MFT_F32, "adaptive_avg_pool2d.nchw16c.f32",
     mft__pool_adaptive_avg_nchw16c},
    {MFT__OP_ADAPTIVE_AVG_POOL2D_BACKWARD, MFT_NCHW16C, MFT_F32,
     "adaptive_avg_pool2d_backward.nchw16c.f32", mft__pool_adaptive_avg_backward_nchw16c},
    {0, 0, 0, NULL, NULL},
};
