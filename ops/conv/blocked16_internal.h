/* ops/conv/blocked16_internal.h — what the nChw16c convolution files share:
 * the geometry of a forward convolution over nChw16c (or plain) x, the tap
 * range of an output position, the zero-bordered copy of x (blocked16.c,
 * Note [nChw16c padded input]) and the backward_weight kernels of
 * blocked16_bww.c. */
#ifndef MFT_OPS_CONV_BLOCKED16_INTERNAL_H
#define MFT_OPS_CONV_BLOCKED16_INTERNAL_H

#include "conv_internal.h"

/* geometry of the forward convolution x (N, I, H, W) -> y (N, O, OH, OW) */
typedef struct b16g {
    int64_t N, I, O, H, W, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw;
    int64_t I1, O1;
    /* x(n, c, h, w) = x[n*xN + (c/16)*xC1 + (c%16)*xc + h*xH + w*xW]:
     * nChw16c packed (xc 1, xW 16) or plain at its strides (xC1 16 xc) */
    int64_t xN, xC1, xc, xH, xW;
    bool xblk; /* x packed nChw16c: its pad lanes are zeros to read */
} b16g;

/* kernel index range [lo, hi) whose input i*d + base lies in [0, n) */
static inline void tap_range(int64_t base, int64_t d, int64_t K, int64_t n, int64_t *lo,
                             int64_t *hi) {
    int64_t l = base >= 0 ? 0 : (-base + d - 1) / d;
    int64_t h = n - 1 - base < 0 ? 0 : (n - 1 - base) / d + 1;
    if (h > K) h = K;
    if (l > h) l = h;
    *lo = l;
    *hi = h;
}

/* *gpo = g0 on the zero-bordered copy of x made into *xpad (freed by the
 * caller; Note [nChw16c padded input]): nChw16c for an nChw16c x, plain
 * NCHW of the real channels for a plain x or when plain (an nChw16c x of
 * one block only); false when its allocation failed (mft__kernel_nomem
 * called). */
bool mft__conv_b16_pad_copy(const b16g *g0, const float *x, bool plain, b16g *gpo,
                            float **xpad);

/* backward_weight of a plain first-layer x (Note [First-layer weight
 * gradient], blocked16_bww.c): true when it applied (ran, or failed for
 * scratch: mft__kernel_failed); false, nothing written, otherwise. */
bool mft__conv_b16_bww_first_layer(const b16g *g0, const float *gy, const float *x, float *gw,
                                   const mft__conv_wmap *gm);

/* The 16x16 tiles [tap][ic][oc] of block pair (ob, ib), taps t0 .. t0 +
 * nt - 1 (tap = kh*KW + kw, nt <= MFT_B16_TILES_MAX), into grad_w gw through
 * its map gm: its noc x nic real elements, whole (o, i, tap) runs of a
 * plain grad_w in order, or vectors of output lanes (gm->o0 == 1); the
 * tiles are only read. */
#define MFT_B16_TILES_MAX 9
void mft__conv_b16_tiles_out(float *gw, const mft__conv_wmap *gm, int64_t KW, int64_t ob,
                             int64_t ib, int64_t noc, int64_t nic, int64_t t0, int64_t nt,
                             float tiles[][16][16]);

/* backward_weight by 16x16 tiles (Note [nChw16c weight-gradient items],
 * blocked16_bww.c): grad_w of g from grad_y (packed nChw16c) and x, into
 * gw through its map gm; any kernel size, stride and dilation. */
void mft__conv_b16_bww_tiles(const b16g *g, const float *gy, const float *x, float *gw,
                             const mft__conv_wmap *gm);

/* backward_input by lanes (Note [nChw16c backward_input by lanes],
 * blocked16_bwd_lanes.c): grad_x (N, I, H, W) packed nChw16c, one block
 * (I <= MFT_B16_LANES_MAX), at gx + n*gxN + h*gxH + w*16, from grad_y (N,
 * O, OH, OW) packed nChw16c at gy + n*gyN, and the forward's weight as
 * 16x16 tiles, w(o, i, kh, kw) = w[(o/16)*ws[0] + kh*ws[2] + kw*ws[3] +
 * i*16 + o%16] (zeros past O; ws[1], the input block's, unused); stride 1,
 * padding (ph, pw), dilation (dh, dw). */
#define MFT_B16_LANES_MAX  8  /* channels of x, at most (accumulators) */
#define MFT_B16_LANES_TAPS 16 /* kernel rows and columns, at most */
typedef struct mft__b16_lanes {
    int64_t N, I, O, O1, H, W, OH, OW, KH, KW, ph, pw, dh, dw;
    const float *gy;
    int64_t gyN;
    float *gx;
    int64_t gxN, gxH;
    const float *w;
    int64_t ws[4];
} mft__b16_lanes;
/* Whether the AVX-512 kernel exists and takes these sizes. */
bool mft__conv_b16_lanes_applies(int64_t I, int64_t KH, int64_t KW);
/* The product (where mft__conv_b16_lanes_applies). */
void mft__conv_b16_lanes_bwd_in(const mft__b16_lanes *b);

#endif
