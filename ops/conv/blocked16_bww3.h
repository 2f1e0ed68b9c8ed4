/* ops/conv/blocked16_bww3.h — backward_weight of an nChw16c convolution
 * whose kernel is 3 wide with stride and dilation 1 along W
 * (blocked16_bww3.c, Note [nChw16c 3-wide weight gradient]), called by
 * blocked16.c for a packed nChw16c x. */
#ifndef MFT_OPS_CONV_BLOCKED16_BWW3_H
#define MFT_OPS_CONV_BLOCKED16_BWW3_H

#include "conv_internal.h"

/* grad_w (O, I, KH, 3) = the sum over images n and output pixels (oh, ow)
 * of grad_y (N, O1, OH, OW, 16, packed) times x (n, i, oh*sh - ph + kh*dh,
 * ow - pw + kw) at x + n*xN + (i/16)*xC1 + (i%16) + h*xH + w*16 (packed
 * nChw16c rows, pad lanes zero); element (o, i, kh, kw) written to
 * gw[mft__wmap_at(gm, o, i, kh, kw)], only for o < O and i < I. */
typedef struct mft__b16_bww3 {
    int64_t N, H, W, OH, OW, KH, I, O, I1, O1;
    int64_t sh, ph, dh, pw;
    const float *gy;
    const float *x;
    int64_t xN, xC1, xH;
    float *gw;
    const mft__conv_wmap *gm;
} mft__b16_bww3;

/* The most kernel rows it takes (its items keep KH x 3 tiles of 16x16). */
#define MFT_B16_BWW3_MAX_KH 3

/* Whether this build has the kernel (AVX-512). */
bool mft__conv_b16_bww3_available(void);
/* The product above, in parallel over block pairs (or block pair and
 * kernel row when there are few pairs). Deterministic: every element sums
 * over (n, oh, ow) in order from zero, whatever the thread count. */
void mft__conv_b16_bww3(const mft__b16_bww3 *b);

#endif
