/* ops/conv/conv_internal.h — what the files of the convolution family share
 * beyond ops/ops_internal.h: the reference kernels (reference.c); for the
 * fast F32 kernels, the CPU-feature switches, the test mode, the geometry
 * (cgeom) and its small helpers, the micro-kernel types (microkernels.c),
 * the layout copies (layout.c) and each algorithm's entry (indirect.c,
 * backward_weight.c, depthwise.c, depthwise_nchw.c, pointwise_nchw.c,
 * direct.c), called from the algorithm chains of chains.c; the
 * single-channel-plane kernels (plane.c), Winograd F(4x4, 3x3)
 * (winograd.c) and the native nChw16c kernels (blocked16.c, groups 1;
 * depthwise_blocked16.c, depthwise). */
#ifndef MFT_OPS_CONV_INTERNAL_H
#define MFT_OPS_CONV_INTERNAL_H

#include <string.h>
#include "mft/conv.h"
#include "ops_internal.h"

/* ---------------------------------------------------------------- ops/conv/reference.c
 * The reference kernels, for tests (declared here; ops_internal.h is shared). */
mft_kernel_fn mft__conv_reference(mft__op_id op, mft_dtype dt);

/* ---------------------------------------------------------------- the fast kernels */
#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define CF_AVX2 1
#if defined(__AVX512F__)
/* 6x32 and 6x16 micro-kernels in 16-lane registers; the rest stays AVX2 */
#define CF_AVX512 1
#define CF_SFX  "avx512_6x32"
#else
#define CF_AVX512 0
#define CF_SFX  "avx2_6x16"
#endif
#else
#define CF_AVX2 0
#define CF_AVX512 0
#define CF_SFX  "c6x16"
#endif

/* For tests: force the portable micro-kernels / the direct loops (chains.c).
 * The mode: 0 normal, 1 portable micro-kernels, 2 direct loops. Hidden, as
 * every library symbol is (mft/export.h), and said so here so that the
 * kernels' loops read it PC-relative, not through the GOT. */
void mft__conv_fast_set_mode(int mode);
extern int mft__conv_fast_mode __attribute__((visibility("hidden")));
static inline int cf_mode(void) { return mft__conv_fast_mode; }

/* Chunk of mft__parallel_for_dynamic for n independent items: about 8
 * chunks per thread (measured here: with two busy cores one ran 15% slower
 * than the other, and even halves waited for it). */
static inline int64_t cf_chunk(int64_t n) {
    const int64_t c = n / (8 * (int64_t)mft_num_threads());
    return c > 0 ? c : 1;
}

#define TILE_M         6
#define TILE_N         16

/* Row-chunked backward_weight (backward_weight.c, and its NCHW twin in
 * pointwise_nchw.c): the fixed chunks of output rows, and the most bytes of
 * accumulators per group for which it runs. */
#define BWC_CHUNKS  8
#define BWC_MAX_ACC (256 * 1024)

/* ---------------------------------------------------------------- geometry */
typedef struct cgeom {
    int64_t N, Cin, Cout, G, Cgi, Cgo;
    int64_t D, H, W, OD, OH, OW;
    int64_t K[3], T;
    int64_t s[3], p[3], d[3];
    int64_t ws[5]; /* weight strides (co, ci, kd, kh, kw) in elements */
    const float *w;
    const float *bias; /* NULL or element 0 of the bias */
    int64_t bstride;
} cgeom;

static inline float wval(const cgeom *g, int64_t co, int64_t ci, int64_t t) {
    const int64_t kw = t % g->K[2], kh = (t / g->K[2]) % g->K[1], kd = t / (g->K[2] * g->K[1]);
    return g->w[co * g->ws[0] + ci * g->ws[1] + kd * g->ws[2] + kh * g->ws[3] + kw * g->ws[4]];
}
static inline float bval(const cgeom *g, int64_t c) {
    return g->bias ? g->bias[c * g->bstride] : 0.0f;
}
static inline int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Output positions [lo, hi) of a row whose input position o*s + off lies in [0, n). */
static inline void valid_range(int64_t on, int64_t n, int64_t s, int64_t off, int64_t *lo,
                               int64_t *hi) {
    int64_t l = off >= 0 ? 0 : (-off + s - 1) / s;
    int64_t h = n - 1 - off < 0 ? 0 : (n - 1 - off) / s + 1;
    *lo = l;
    *hi = h < on ? h : on;
    if (*hi < *lo) *hi = *lo;
}

/* Depthwise: one input channel per group (depthwise.c, depthwise_nchw.c). */
static inline bool is_depthwise(const cgeom *g) { return g->Cgi == 1 && g->G == g->Cin; }
/* Pointwise: 1x1, stride 1, no padding: dst pixel q reads src pixel q. */
static inline bool is_pointwise(const cgeom *g) {
    bool ok = g->T == 1 && g->D == g->OD && g->H == g->OH && g->W == g->OW;
    for (int i = 0; i < 3; i++) ok &= g->s[i] == 1 && g->p[i] == 0;
    return ok;
}

/* ---------------------------------------------------------------- ops/conv/microkernels.c
 * orow[i][j] = b16[j] + sum over (u < nu, k < K) a_u,i[k] * w_u[k][j] for a
 * 6x16 tile; a_u,i = ptrs[6u + i], w_u = wg + taps[u]*K*16. Each row is
 * stored at its own pointer, so a tile's dst pixels need not be evenly
 * spaced (class-ordered tiles: no copy through a buffer). */
typedef void (*ind_micro_fn)(int64_t nu, const int32_t *taps, int64_t K, const float *const *ptrs,
                             const float *wg, const float *b16, float *const *orow);
/* acc (6x16, ld 16) += sum over runs q < nq, r < n of
 *   x_i[xo[q] + r*xs] * g[go[q] + r*gs + j],  x_i = xr[i], g = gp.
 * Several runs (rows of an image) per call keep the accumulators in
 * registers longer; xo/go NULL means one run at offset 0. */
typedef void (*bw_micro_fn)(int64_t nq, const int64_t *xo, const int64_t *go, int64_t n,
                            const float *const *xr, int64_t xs, const float *gp, int64_t gs,
                            float *acc);
/* The 6x32 kernels, or NULL where the 6x16 ones run alone. */
typedef void (*ind_micro2_fn)(int64_t nu, const int32_t *taps, int64_t K,
                              const float *const *ptrs, const float *wg, int64_t ws,
                              const float *b32, float *const *orow);
typedef void (*bw_micro2_fn)(int64_t nq, const int64_t *xo, const int64_t *go, int64_t n,
                             const float *const *xr, int64_t xs, const float *gp0, int64_t gs,
                             float *acc0, float *acc1);
/* The kernels of this build and test mode. */
ind_micro_fn mft__conv_pick_ind_micro(void);
ind_micro2_fn mft__conv_pick_ind_micro2(void);
bw_micro_fn mft__conv_pick_bw_micro(void);
bw_micro2_fn mft__conv_pick_bw_micro2(void);
/* The 8-row backward_weight tiles (8x16 into *m, 8x32 into *m2); false
 * (nothing written) where they do not exist: 6 rows then. */
bool mft__conv_pick_bw_micro8(bw_micro_fn *m, bw_micro2_fn *m2);

/* ---------------------------------------------------------------- ops/conv/layout.c
 * dst (cols x rows, ld dl) = src (rows x cols, ld sl)^T for one block. */
void mft__conv_tr_block(const float *src, int64_t sl, float *dst, int64_t dl, int64_t rows,
                        int64_t cols);
/* N images: src (C, S) -> dst (S, C) when to_nhwc, else back; in parallel. */
void mft__conv_transpose(const float *src, float *dst, int64_t N, int64_t C, int64_t S,
                         bool to_nhwc);
/* pb (PH x PW) = src plane (SH x SW) shifted by (offh, offw), zero outside. */
void mft__conv_pad_plane(float *pb, int64_t PH, int64_t PW, const float *src, int64_t SH,
                         int64_t SW, int64_t offh, int64_t offw);

/* ---------------------------------------------------------------- the algorithms
 * Each as its file documents; kind 0 forward (a = x, o = y), 1
 * backward_input (a = grad_y, o = grad_x), 2 backward_weight (a = grad_y,
 * b = x, o = grad_w with element strides gws (co, ci, kd, kh, kw)). A failed
 * scratch allocation is reported through mft__kernel_nomem (Note [Kernel
 * scratch]). */
/* indirect.c: forward (bwd false) or backward_input, src NHWC (or NCHW with
 * src_nchw), dst NHWC or (onchw) NCHW; false only in the direct-loop test
 * mode with an NCHW dst. */
bool mft__conv_indirect(const cgeom *g, bool bwd, const float *src, float *dst, bool onchw,
                        bool src_nchw);
/* backward_weight.c: backward_weight on NHWC grad_y and x. */
void mft__conv_backward_weight(const cgeom *g, const float *gy, const float *x, float *gw,
                               const int64_t *gws);
/* depthwise.c: groups == C_in on NHWC buffers (forward / backward_input dst
 * NCHW with onchw); always true. */
bool mft__conv_depthwise(const cgeom *g, int kind, const float *a, const float *b, float *o,
                         const int64_t *gws, bool onchw);
/* depthwise_nchw.c: 2-D depthwise on NCHW buffers; false: not applicable
 * (nothing written). */
bool mft__conv_depthwise_nchw(const cgeom *g, int kind, const float *a, const float *b, float *o,
                              const int64_t *gws);
/* pointwise_nchw.c: 1x1 forward (bwd false) or backward_input on NCHW
 * buffers; and NCHW backward_weight with grad_y read in place, false
 * (nothing written) where it does not apply. */
bool mft__conv_pointwise_nchw(const cgeom *g, bool bwd, const float *src, float *dst);
bool mft__conv_backward_weight_nchw(const cgeom *g, const float *gy, const float *x, float *gw,
                                    const int64_t *gws);
/* direct.c: the plain loops the tests force (mode 2), NHWC and NCHW. */
void mft__conv_direct_nhwc(const cgeom *g, int kind, const float *a, const float *b, float *o,
                           const int64_t *gws);
void mft__conv_direct_nchw(const cgeom *g, int kind, const float *a, const float *b, float *o,
                           const int64_t *gws);

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
typedef struct mft__conv_wmap mft__conv_wmap;
typedef struct mft__wino_geom {
    int64_t N, H, W, C, K, OH, OW, ph, pw;
    const float *w;
    int64_t ws[4];
    const float *bias;
    int64_t bstride;
    bool blocked; /* x and y (grad_y) packed nChw16c instead of NHWC (blocked16.c) */
    /* NULL, or the weight (forward) / grad_w (backward_weight) is addressed
     * by this map instead of ws / gws: a blocked weight (blocked16.c) */
    const mft__conv_wmap *wmap;
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
/* For tests: the forward's schedule (Note [Winograd on few tiles]): 0 its
 * choice, 1 tile blocks, 2 few tiles. */
void mft__conv_wino_set_schedule(int schedule);

/* ---------------------------------------------------------------- ops/conv/blocked16_weights.c
 * Note [Conv weight maps]: where weight element (o, i, kh, kw) lives, for a
 * plain weight at any strides and for a weight blocked by 16 on O and / or
 * I (OIhw16i16o, Ohwi16o, OIhw16o16i, ...):
 *   off = (o / 16)*o1 + (o % 16)*o0 + (i / 16)*i1 + (i % 16)*i0 + kh*kh_ + kw*kw_
 * (a plain stride s gives o1 = 16 s, o0 = s). kh / kw strides may be
 * negative (the flipped weight of backward_input). */
struct mft__conv_wmap {
    int64_t o1, o0, i1, i0, kh, kw;
};
static inline int64_t mft__wmap_at(const mft__conv_wmap *m, int64_t o, int64_t i, int64_t kh,
                                   int64_t kw) {
    return (o >> 4) * m->o1 + (o & 15) * m->o0 + (i >> 4) * m->i1 + (i & 15) * m->i0 +
           kh * m->kh + kw * m->kw;
}
/* The map of a rank-4 weight w: true for a plain one and for a blocked one
 * whose blocks are all of 16 on dims 0 / 1, at most one per dim (pad lanes
 * are then never addressed by a real (o, i)); false for any other. */
bool mft__conv_wmap_of(const mft_tensor *w, mft__conv_wmap *m);
/* The weight is read in place by the nChw16c direct kernel: blocked, O
 * lanes innermost (o0 1) and I lanes next (i0 16), as OIhw16i16o and
 * Ohwi16o are; else the kernel reorders it into OIhw16i16o scratch. */
static inline bool mft__wmap_direct(const mft__conv_wmap *m) { return m->o0 == 1 && m->i0 == 16; }
/* Scratch dst (O1, I1, KH, KW, 16i, 16o), zero-padded, of the weight at w0
 * through m: O, I, KH, KW its sizes; tiles: every 16x16 tile of m is
 * addressable with zero pads (both O and I blocked by 16). In parallel over
 * block pairs. */
void mft__conv_b16_reorder(const float *w0, const mft__conv_wmap *m, bool tiles, int64_t O,
                           int64_t I, int64_t KH, int64_t KW, float *dst);

/* ---------------------------------------------------------------- ops/conv/blocked16.c
 * Native nChw16c F32 conv2d, groups 1 (Note [nChw16c direct convolution]):
 * the kernels registered under (op, MFT_NCHW16C, MFT_F32) in chains.c's
 * table. y, grad_y and (backward_input) grad_x packed nChw16c; x packed
 * nChw16c or, forward and backward_weight, plain F32 at any strides; the
 * weight and grad_w plain at any strides or blocked by 16 (Note [Conv
 * weight maps]). backward_input: stride 1 and padding <= dilation*(kernel-1)
 * only (the entry checks). */
void mft__conv_b16_fwd(const mft_kernel_args *a);
void mft__conv_b16_bwd_in(const mft_kernel_args *a);
void mft__conv_b16_bwd_w(const mft_kernel_args *a);
/* grad_b (O, F32 contiguous, new) of packed nChw16c grad_y; NULL and the
 * error set (naming fn) when the allocation fails. */
mft_tensor *mft__conv_b16_grad_bias(const char *fn, const mft_tensor *gy);

/* ---------------------------------------------------------------- ops/conv/blocked16_first.c
 * The first-layer forward of blocked16.c (Note [nChw16c first-layer
 * forward]): a plain x with at most MFT__B16_FIRST_MAX (tap, channel)
 * pairs, every tap of every output pixel inside x. */
#define MFT__B16_FIRST_MAX 9
typedef struct mft__b16_first {
    int64_t N, O, O1, OH, OW; /* y (N, O, OH, OW) nChw16c, O1 = ceil(O/16) */
    const float *x;           /* output pixel (n, oh, ow) reads x + n*xN + oh*rs + ow*ps */
    int64_t xN, rs, ps;
    int na;                              /* (tap, channel) pairs, (kh, kw, channel) order */
    int64_t off[MFT__B16_FIRST_MAX];     /* x offset of pair t */
    int64_t woff[MFT__B16_FIRST_MAX];    /* weight offset of pair t: its 16 output lanes */
    const float *w;                      /* the weight at output block 0 */
    int64_t wsO1;                        /* weight stride of one output block */
    const float *b16;                    /* bias padded to O1*16 floats */
    float *y;
    uint32_t m0, m1; /* set per item by the kernel */
} mft__b16_first;
/* Whether the kernel takes this many pairs (false on non-AVX-512 builds). */
bool mft__conv_b16_first_applies(int64_t pairs);
/* y = the convolution f describes, in parallel over (n, block pair, oh). */
void mft__conv_b16_first_run(const mft__b16_first *f);

/* ---------------------------------------------------------------- ops/conv/depthwise_blocked16.c
 * Native nChw16c F32 depthwise conv2d, multiplier 1 (groups == C_in ==
 * C_out; Note [nChw16c depthwise convolution]): forward, backward_input and
 * backward_weight at any stride, padding and dilation; activations packed
 * nChw16c, weight plain (C, 1, kh, kw) at any strides, grad_w plain at its
 * strides. chains.c's nChw16c entries call these when groups > 1 (the
 * entry routes nothing else there); grad_b is mft__conv_b16_grad_bias. */
void mft__conv_dw16_fwd(const mft_kernel_args *a);
void mft__conv_dw16_bwd_in(const mft_kernel_args *a);
void mft__conv_dw16_bwd_w(const mft_kernel_args *a);

#endif
