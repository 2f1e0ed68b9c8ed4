/* ops/conv/conv_internal.h — what the files of the convolution family share
 * beyond ops/ops_internal.h: the single-channel-plane kernels (plane.c) and
 * Winograd F(4x4, 3x3) (winograd.c), called from the algorithm chains of
 * fast.c. */
#ifndef MFT_OPS_CONV_INTERNAL_H
#define MFT_OPS_CONV_INTERNAL_H

#include "ops_internal.h"

/* ---------------------------------------------------------------- ops/conv/plane.c
 * F32 NHWC convolution with one input channel (C_in = 1, groups = 1, 2-D;
 * Note [Single-channel planes]). Sizes as in PyTorch; ws: weight strides
 * (co, ci, kh, kw); bias NULL or element 0 with stride bstride; gws: grad_w
 * strides (co, ci, kd, kh, kw). The kernels return false, having written
 * nothing, when they do not apply (no AVX-512; NHWC: C_out % 16 != 0; NCHW:
 * W stride != 1): the caller then runs another kernel; or when a scratch
 * allocation fails, having called mft__kernel_nomem (the caller stops:
 * Note [Kernel scratch]). */
typedef struct mft__plane_geom {
    int64_t N, H, W, OH, OW, Cout, KH, KW, sh, sw, ph, pw, dh, dw;
    const float *w;
    int64_t ws[4];
    const float *bias;
    int64_t bstride;
} mft__plane_geom;
bool mft__conv_plane_applies(const mft__plane_geom *g);
bool mft__conv_plane_forward(const mft__plane_geom *g, const float *x, float *y);
bool mft__conv_plane_backward_weight(const mft__plane_geom *g, const float *gy, const float *x,
                                     float *gw, const int64_t *gws);
/* The same with NCHW y / grad_y (x is one plane either way); unit W stride
 * only, any C_out. */
bool mft__conv_plane_forward_nchw(const mft__plane_geom *g, const float *x, float *y);
bool mft__conv_plane_backward_weight_nchw(const mft__plane_geom *g, const float *gy,
                                          const float *x, float *gw, const int64_t *gws);

/* ---------------------------------------------------------------- ops/conv/winograd.c
 * Winograd F(4x4, 3x3) (Note [Winograd F(4x4, 3x3)]): y (N, OH, OW, K) =
 * the 3x3 correlation of x (N, H, W, C) with padding (ph, pw), stride and
 * dilation 1, plus bias; both NHWC packed. Weight element (k, c, a, b) is
 * w[k*ws[0] + c*ws[1] + a*ws[2] + b*ws[3]] (strides may be negative: the
 * flipped view of backward_input). applies: the algorithm is on and pays
 * for these sizes (or the test mode forces it); forward returns false
 * when a scratch allocation fails, having called mft__kernel_nomem (Note
 * [Kernel scratch]). */
typedef struct mft__wino_geom {
    int64_t N, H, W, C, K, OH, OW, ph, pw;
    const float *w;
    int64_t ws[4];
    const float *bias;
    int64_t bstride;
} mft__wino_geom;
bool mft__conv_wino_applies(const mft__wino_geom *g);
bool mft__conv_wino_forward(const mft__wino_geom *g, const float *x, float *y);
/* grad_w (K, C, 3, 3) at strides gws (k, c, -, kh, kw) of the forward
 * convolution g (w unused) from grad_y (N, OH, OW, K) and x, both NHWC
 * packed; false, having written nothing, where the partial sums would be
 * too big (the caller runs another kernel) or, having called
 * mft__kernel_nomem, when scratch is short (Note [Kernel scratch]). */
bool mft__conv_wino_backward_weight(const mft__wino_geom *g, const float *gy, const float *x,
                                    float *gw, const int64_t *gws);
/* For tests: 0 the size heuristic, 1 wherever legal, 2 never. */
void mft__conv_wino_set_mode(int mode);

#endif
