/* ops/conv/blocked16_1x1.h — the 1x1 nChw16c convolution kernels of
 * blocked16_1x1.c (Note [nChw16c 1x1 convolution]), called by blocked16.c
 * for kernels 1x1, padding 0, x (grad_y) packed nChw16c. */
#ifndef MFT_OPS_CONV_BLOCKED16_1X1_H
#define MFT_OPS_CONV_BLOCKED16_1X1_H

#include "conv_internal.h"

/* y (N, O, S) = x (N, I, S) * w + bias over S flat pixels: x pixel q of
 * image n, input block ib at x + n*xN + ib*xC1 + q*16 (its pad lanes zeros);
 * the 16x16 weight tile of blocks (ob, ib) at w + ob*wsO1 + ib*wsI1, input
 * channel ic's 16 output lanes at ic*16 (OIhw16i16o's tile, pads zeros);
 * b16 the bias padded to O1*16; y nChw16c packed, (N, O1, S, 16). */
typedef struct mft__b16_1x1 {
    int64_t N, S, I, O, I1, O1;
    const float *x;
    int64_t xN, xC1;
    const float *w;
    int64_t wsO1, wsI1;
    const float *b16;
    float *y;
} mft__b16_1x1;

/* Whether the AVX-512 1x1 kernels exist in this build. */
bool mft__conv_b16_1x1_available(void);
/* The forward above, in parallel over (image, pixel chunk). */
void mft__conv_b16_1x1_forward(const mft__b16_1x1 *f);

/* grad_w (O, I) of a 1x1 convolution: the sum over images and output
 * pixels (oh, ow) of grad_y (N, O1, OH*OW, 16, packed) times x at pixel
 * (oh*s, ow*s): x + n*xN + (i/16)*xC1 + (i%16)*xc + oh*xR + ow*xP (x nChw16c:
 * xc 1; plain: its channel stride); element (o, i)
 * written to gw[mft__wmap_at(gm, o, i, 0, 0)]. In parallel over (output
 * block group, input channel group). */
typedef struct mft__b16_1x1_bww {
    int64_t N, OH, OW, I, O, I1, O1;
    const float *gy;
    const float *x;
    int64_t xN, xC1, xc, xR, xP;
    float *gw;
    const mft__conv_wmap *gm;
} mft__b16_1x1_bww;
void mft__conv_b16_1x1_backward_weight(const mft__b16_1x1_bww *b);

#endif
