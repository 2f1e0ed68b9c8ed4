/* ops/conv/fast.c — fast F32 convolution kernels (2-D and 3-D; forward,
 * backward_input, backward_weight) for the CHANNELS_LAST(_3D) and CONTIGUOUS
 * formats, registered in mft__kernels_conv_fast (searched before the
 * reference kernels of ops/conv.c). The kernel interface is mft_conv_params
 * (mft/conv.h). Everything runs on a 3-D geometry (2-D: D = OD = KD = 1).
 *
 * Structure (top to bottom): geometry, the inner kernels (included from
 * ops/conv_fast_kernels.h: 6x16 micro-kernels, AVX-512, AVX2/FMA and
 * portable C of the same tiling, and AVX-512 6x32 ones; depthwise pixel
 * kernels; 8x8 transpose), the
 * indirect-convolution driver shared by
 * forward and backward_input, the backward_weight driver, depthwise kernels,
 * plain direct loops (what the tests force with mft__conv_fast_set_mode(2)), the
 * NCHW wrappers and the kernel table.
 *
 * Note [Indirect convolution]
 * NHWC forward: the output pixels (n, od, oh, ow), flattened, are cut into
 * tiles of 6; for each tile and kernel tap the 6 input pixels it reads are
 * looked up once (a pointer to the pixel's channel vector of the group, or
 * to a zero vector when the tap falls into padding), taps where all 6 are
 * padding are dropped. The micro-kernel then runs, for each 16-wide block of
 * output channels, over (tap, c_in): broadcast 6 inputs, load 16 packed
 * weights (packed [group][co block][tap][ci][16], zero padded in co), 12
 * FMAs into 12 ymm accumulators initialised with the bias. With AVX-512,
 * two adjacent 16-wide blocks run together as one 6x32 tile (same packing:
 * the second block's weights are one block further; 2 weight loads and 6
 * broadcasts per 12 FMAs into 12 zmm accumulators, where the 6x16 tile in
 * zmm registers is load-port bound); a last odd block runs the 6x16 kernel.
 * Each tile's (tap, pixel) sources are found by stepping the pixel
 * positions and one unsigned compare per dim (ind_tile). Edge tiles (fewer
 * than 6 pixels or 16/32 channels) are written to a scratch tile and copied.
 * backward_input is the same kernel with the roles swapped: for each grad_x
 * pixel and tap, the grad_y pixel that read it (or the zero vector), weights
 * packed [group][ci block][tap][co][16].
 * Work items are fixed groups of 8 tiles, handed out in chunks to whichever
 * thread is free (mft__parallel_for_dynamic: a busy or slower core takes
 * fewer), so every output element is computed by the same instruction
 * sequence at any thread count and schedule.
 *
 * Note [backward_weight]
 * Work items are (group, 16-wide block of c_out; with AVX-512 two blocks,
 * run by the 6x32 backward micro-kernel; with AVX-512 and C_in per group a
 * multiple of 8 the ci blocks hold 8 channels, not 6: 8x16 / 8x32 tiles,
 * bw_job.bm, which waste no row on 32 channels); an item owns its slice of
 * grad_w (accumulated in a scratch buffer [tap][ci block of 6][6][16]) and
 * sums over every (n, output row) in order: for each tap, the contiguous run
 * of output columns whose input column is inside the image is one call of a
 * 6x16 micro-kernel (broadcast 6 x channels, load 16 grad_y channels) with
 * the accumulators loaded from and stored to the scratch tile. c_in edges
 * repeat the last valid channel (results discarded); grad_y with c_out per
 * group not a multiple of 16 is copied to a zero-padded scratch first.
 * When a group's accumulators for all c_out blocks fit in 64 KB (1x1 and
 * other small kernels) and there are >= 8 output rows, items are instead (group, one of 8 fixed chunks of
 * output rows) with every c_out block run on a row while its x is in L1, and
 * the 8 partials are added in chunk order (bwc_range; the NCHW pwb_range has
 * the same variant, pwbc_range): x is read once instead of once per block.
 *
 * Note [NCHW kernels]
 * The CONTIGUOUS kernels run the NHWC machinery on transposed activations
 * (8x8 AVX transposes; none when C == 1, where both layouts coincide) and
 * write the NCHW result directly: each work item computes into a small
 * pixel-major buffer that is transposed into the output (forward and
 * backward_input). With N >= 8 the work items are whole images, each
 * transposing its own src planes into a per-thread buffer (no full-size
 * scratch; the data is still in L2 when the tiles read it); smaller batches
 * transpose the whole input first. Pointwise convolutions (1x1, stride 1,
 * no padding) need no transpose at all: per image Y[Cout, HW] = W @ X[Cin,
 * HW] with the same 6x16 micro-kernel (see pw_range). backward_weight
 * transposes only x: the micro-kernel's six rows are grad_y rows read in
 * place (NCHW rows are contiguous in ow), its 16 columns x channels (see
 * pwb_range); work items are (group, 16 input channels). This is the
 * kernels' internal choice (the dispatcher does no conversion and counts
 * none).
 *
 * Winograd: 2-D 3x3 convolutions with stride 1, dilation 1 and groups 1
 * (forward, and backward_input as a forward convolution of grad_y with
 * flipped weights) run ops/conv_wino.c's F(4x4, 3x3) where its size test
 * says it pays (Note [Winograd F(4x4, 3x3)]); NCHW tensors are transposed
 * to NHWC around it. The kernel then reports the name ...winograd_f4x3
 * for the call (mft__dispatch_report_as). mft_conv_set_winograd(false)
 * keeps the direct kernels below.
 *
 * One input channel (C_in = 1, groups = 1, 2-D), forward and
 * backward_weight, NHWC and NCHW: ops/conv_plane.c on AVX-512 builds (Note
 * [Single-channel planes]), else the depthwise kernels below.
 *
 * Note [Depthwise kernels]
 * groups == C_in (one input channel per group, any multiplier; this also
 * covers C_in = 1, groups = 1, the first layer of a CNN) runs separate
 * channel-vectorised kernels: forward / backward_input per dst pixel, over
 * its in-image taps (a per-row tap table; interior pixels reuse the row's
 * list shifted; pairs of interior pixels share the weight loads), 32
 * channels per register block, streaming stores for NHWC outputs too big
 * for a last-level cache (>= 16 MB); 2-D CONTIGUOUS depthwise with unit W
 * stride (backward_input: unit strides) runs native NCHW kernels instead
 * (Note [Depthwise NCHW]);
 * backward_weight sums over 16 fixed chunks of output rows into per-chunk
 * partials (each tap's run of columns accumulated in registers) that are
 * added in chunk order. F64 has no fast kernels (the reference runs).
 * If a scratch allocation fails, the kernel reports it (mft__kernel_nomem)
 * and the op fails with MFT_ERR_NOMEM; it never computes the result another
 * way that rounds differently (Note [Kernel scratch] in ops/ops_internal.h). */
#include <string.h>
#include "mft/conv.h"
#include "conv_internal.h"
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

/* For tests: force the portable micro-kernels / the direct loops. */
void mft__conv_fast_set_mode(int mode);
static int cf_mode = 0; /* 0 normal, 1 portable micro-kernels, 2 direct loops */

/* Chunk of mft__parallel_for_dynamic for n independent items: about 8
 * chunks per thread (measured here: with two busy cores one ran 15% slower
 * than the other, and even halves waited for it). */
static int64_t cf_chunk(int64_t n) {
    const int64_t c = n / (8 * (int64_t)mft_get_num_threads());
    return c > 0 ? c : 1;
}
void mft__conv_fast_set_mode(int mode) { cf_mode = mode; }

#define TILE_M         6
#define TILE_N         16
#define TILES_PER_ITEM 8
#define BW_MAX_M       8 /* most rows of a backward_weight tile */

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

/* a: activation with the input spatial sizes; o: with the output sizes. */
static cgeom geom_of(const mft_kernel_args *a, const mft_tensor *in_sp, const mft_tensor *out_sp,
                     const mft_tensor *w) {
    const mft_conv_params *p = a->params;
    cgeom g;
    memset(&g, 0, sizeof g);
    const int ns = p->nspatial, off = 3 - ns;
    g.N = in_sp->sizes[0];
    g.Cout = w->sizes[0];
    g.G = p->groups;
    g.Cgi = w->sizes[1];
    g.Cin = g.Cgi * g.G;
    g.Cgo = g.Cout / g.G;
    int64_t isz[3] = {1, 1, 1}, osz[3] = {1, 1, 1};
    for (int i = 0; i < 3; i++) {
        g.K[i] = 1;
        g.s[i] = 1;
        g.d[i] = 1;
        g.ws[2 + i] = 0;
    }
    for (int i = 0; i < ns; i++) {
        isz[off + i] = in_sp->sizes[2 + i];
        osz[off + i] = out_sp->sizes[2 + i];
        g.K[off + i] = w->sizes[2 + i];
        g.s[off + i] = p->stride[i];
        g.p[off + i] = p->padding[i];
        g.d[off + i] = p->dilation[i];
        g.ws[2 + off + i] = w->strides[2 + i];
    }
    g.ws[0] = w->strides[0];
    g.ws[1] = w->strides[1];
    g.D = isz[0], g.H = isz[1], g.W = isz[2];
    g.OD = osz[0], g.OH = osz[1], g.OW = osz[2];
    g.T = g.K[0] * g.K[1] * g.K[2];
    g.w = (const float *)(const void *)mft__tensor_ptr(w);
    g.bias = p->bias ? (const float *)(const void *)mft__tensor_ptr(p->bias) : NULL;
    g.bstride = p->bias ? p->bias->strides[0] : 0;
    return g;
}

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

#include "microkernels.h"

/* Most taps whose offsets the indirect driver tables (interior tiles). */
#define IND_MAX_T 64

/* ---------------------------------------------------------------- indirect driver
 * Shapes (NHWC, packed): src (N, sD, sH, sW, srcC); dst (N, dD, dH, dW, dstC).
 * Forward: src = x, dst = y, K = Cgi, M = Cgo. backward_input: src = grad_y,
 * dst = grad_x, K = Cgo, M = Cgi. */
typedef struct ind_job {
    const cgeom *g;
    bool bwd;
    const float *src;
    float *dst;
    const float *wp;   /* [G][nb][T][K][16] */
    const float *bpad; /* [G][nb*16] */
    const float *zero; /* >= K zeros */
    int64_t K, M, nb, srcC, dstC;
    int64_t sD, sH, sW, dD, dH, dW;
    int64_t P, ntiles, nitems;
    ind_micro_fn micro;
    ind_micro2_fn micro2; /* NULL: 6x16 tiles only */
    bool identity; /* every dst pixel reads the same src pixel, one tap */
    bool onchw; /* dst is NCHW (N, dstC, dS): items go through a pixel-major buffer */
    int64_t dS;
    /* source pixel offset of tap t from a dst pixel's first tap source
     * (forward; unit-stride backward: negative), for interior tiles */
    int64_t toff[IND_MAX_T];
    /* the order of the dst pixels (NULL: flat): grouped into classes of the
     * same taps inside the source (interior, each edge, each corner), class
     * by class, then image by image, then position, so that a tile's
     * padding taps are padding for all its pixels and are skipped instead
     * of multiplying zeros. ord[e]: a position within an image (flat), oc[e]
     * its (d, h, w); class c holds entries [cls[c], cls[c + 1]). */
    const int64_t *ord;
    const int32_t (*oc)[3];
    const int64_t *cls;
    int ncls;
    int64_t nimg; /* images the job's pixels cover (g->N, or 1 per image) */
    _Atomic long long *nomem; /* Note [Kernel scratch]: a worker's failed allocation */
} ind_job;

/* The source position along dim dd that tap k of dst position x reads, or
 * -1 (padding, or a backward tap no strided grad_y position reaches). */
static inline int64_t ind_src_pos(const ind_job *j, int dd, int64_t x, int64_t k) {
    const cgeom *g = j->g;
    const int64_t ssz = dd == 0 ? j->sD : dd == 1 ? j->sH : j->sW;
    int64_t v;
    if (!j->bwd) {
        v = x * g->s[dd] - g->p[dd] + k * g->d[dd];
    } else {
        v = x + g->p[dd] - k * g->d[dd];
        if (v < 0 || v % g->s[dd]) return -1;
        v /= g->s[dd];
    }
    return v >= 0 && v < ssz ? v : -1;
}

/* The source pixels of tile tl (dst pixels tl*6 ..): px[u*6 + i] for its
 * u-th tap with any source pixel inside (-1: padding, or a backward tap that
 * no strided grad_y pixel reaches), those taps' indices in tp (forward in
 * tap order, backward last to first, see below); returns how many. Positions are stepped, not divided, from the tile's first pixel;
 * forward and unit-stride backward need one unsigned compare per dim. */
/* The dst pixels of tile tl: dq[i] (flat dst pixel index, -1 past the
 * end), their images nn[i] and positions ps[i] = (d, h, w); in flat order,
 * or in j->ord's class order. Stepped, not divided, pixel to pixel. */
static void ind_tile_pixels(const ind_job *j, int64_t tl, int64_t *dq, int64_t *nn,
                            int64_t (*ps)[3]) {
    const int64_t q0 = tl * TILE_M;
    if (!j->ord) {
        int64_t r = q0 / j->dW, c = q0 % j->dW;
        int64_t h = r % j->dH, a = (r / j->dH) % j->dD, n = r / (j->dH * j->dD);
        for (int i = 0; i < TILE_M; i++) {
            dq[i] = q0 + i < j->P ? q0 + i : -1;
            nn[i] = n;
            ps[i][0] = a;
            ps[i][1] = h;
            ps[i][2] = c;
            if (++c == j->dW) {
                c = 0;
                if (++h == j->dH) {
                    h = 0;
                    if (++a == j->dD) {
                        a = 0;
                        n++;
                    }
                }
            }
        }
        return;
    }
    const int64_t N = j->nimg;
    int cl = 0;
    while (cl < j->ncls && q0 >= N * j->cls[cl + 1]) cl++;
    int64_t cnt = 1, n = 0, k = 0;
    if (cl < j->ncls) {
        cnt = j->cls[cl + 1] - j->cls[cl];
        const int64_t r = q0 - N * j->cls[cl];
        n = r / cnt;
        k = r % cnt;
    }
    for (int i = 0; i < TILE_M; i++) {
        if (q0 + i >= j->P) {
            dq[i] = -1;
            nn[i] = ps[i][0] = ps[i][1] = ps[i][2] = 0;
            continue;
        }
        const int64_t e = j->cls[cl] + k;
        dq[i] = n * j->dS + j->ord[e];
        nn[i] = n;
        for (int dd = 0; dd < 3; dd++) ps[i][dd] = j->oc[e][dd];
        if (++k == cnt) {
            k = 0;
            if (++n == N && ++cl < j->ncls) {
                n = 0;
                cnt = j->cls[cl + 1] - j->cls[cl];
            }
        }
    }
}

static int64_t ind_tile(const ind_job *j, int64_t tl, int64_t *px, int32_t *tp, int64_t *dq) {
    const cgeom *g = j->g;
    const int64_t ssz[3] = {j->sD, j->sH, j->sW};
    const bool unit = !j->bwd || (g->s[0] == 1 && g->s[1] == 1 && g->s[2] == 1);
    int64_t b[TILE_M][3], nb[TILE_M], nn[TILE_M], ps[TILE_M][3];
    bool pv[TILE_M];
    ind_tile_pixels(j, tl, dq, nn, ps);
    const int64_t sgn = j->bwd ? -1 : 1;
    bool inner = unit && g->T <= IND_MAX_T; /* every tap of every pixel inside */
    for (int i = 0; i < TILE_M; i++) {
        pv[i] = dq[i] >= 0;
        inner = inner && pv[i];
        const int64_t *pos = ps[i];
        for (int dd = 0; dd < 3; dd++) {
            b[i][dd] = j->bwd ? pos[dd] + g->p[dd] : pos[dd] * g->s[dd] - g->p[dd];
            /* the taps' source positions run from b to b +- (K-1)*dilation */
            const int64_t e = b[i][dd] + sgn * (g->K[dd] - 1) * g->d[dd];
            inner = inner && (b[i][dd] < e ? b[i][dd] : e) >= 0 &&
                    (b[i][dd] > e ? b[i][dd] : e) < ssz[dd];
        }
        nb[i] = nn[i] * j->sD;
    }
    if (inner) {
        /* interior tile: tap t of pixel i reads base_i + toff[t]; every tap
         * listed, in the order below (backward last to first) */
        int64_t base[TILE_M];
        for (int i = 0; i < TILE_M; i++)
            base[i] = ((nb[i] + b[i][0]) * j->sH + b[i][1]) * j->sW + b[i][2];
        for (int64_t u = 0; u < g->T; u++) {
            const int64_t t = j->bwd ? g->T - 1 - u : u;
            tp[u] = (int32_t)t;
            for (int i = 0; i < TILE_M; i++) px[u * TILE_M + i] = base[i] + j->toff[t];
        }
        return g->T;
    }
    int64_t u = 0, kk[3] = {0, 0, 0};
    for (int64_t t = 0; t < g->T; t++) {
        const int64_t o[3] = {sgn * kk[0] * g->d[0], sgn * kk[1] * g->d[1], sgn * kk[2] * g->d[2]};
        bool any = false;
        for (int i = 0; i < TILE_M; i++) {
            int64_t sp = -1, v[3] = {b[i][0] + o[0], b[i][1] + o[1], b[i][2] + o[2]};
            bool ok = pv[i];
            if (ok && !unit)
                for (int dd = 0; dd < 3; dd++)
                    if (g->s[dd] != 1) {
                        if (v[dd] < 0 || v[dd] % g->s[dd]) ok = false;
                        v[dd] /= g->s[dd];
                    }
            ok = ok && (uint64_t)v[0] < (uint64_t)ssz[0] && (uint64_t)v[1] < (uint64_t)ssz[1] &&
                 (uint64_t)v[2] < (uint64_t)ssz[2];
            if (ok) sp = ((nb[i] + v[0]) * j->sH + v[1]) * j->sW + v[2];
            px[u * TILE_M + i] = sp;
            any |= ok;
        }
        if (any) tp[u++] = (int32_t)t;
        if (++kk[2] == g->K[2]) {
            kk[2] = 0;
            if (++kk[1] == g->K[1]) {
                kk[1] = 0;
                kk[0]++;
            }
        }
    }
    /* backward: source pixel = dst + pad - k*dilation falls as the tap
     * advances, so list the taps last to first: the source rows are then
     * read in ascending address order, which the hardware prefetcher
     * follows (measured: backward_input of 64x32x14x14 from 64 channels
     * took 1.13-1.27x the time of the forward with the same tile shape,
     * 64 -> 32 channels; listed last to first, 0.96-1.01x) */
    if (j->bwd)
        for (int64_t a1 = 0, b2 = u - 1; a1 < b2; a1++, b2--) {
            int32_t tt = tp[a1];
            tp[a1] = tp[b2];
            tp[b2] = tt;
            for (int i = 0; i < TILE_M; i++) {
                int64_t x = px[a1 * TILE_M + i];
                px[a1 * TILE_M + i] = px[b2 * TILE_M + i];
                px[b2 * TILE_M + i] = x;
            }
        }
    return u;
}

static void ind_range(void *ctx, int64_t begin, int64_t end) {
    const ind_job *j = ctx;
    const cgeom *g = j->g;
    const int64_t T = g->T, K = j->K;
    int64_t *pix = mft__alloc((size_t)(TILES_PER_ITEM * T * TILE_M) * sizeof(int64_t), 64);
    int32_t *taps = mft__alloc((size_t)(TILES_PER_ITEM * T) * sizeof(int32_t), 64);
    const float **ptrs = mft__alloc((size_t)(TILES_PER_ITEM * T * TILE_M) * sizeof(float *), 64);
    float *ibuf = j->onchw
                      ? mft__alloc((size_t)(TILES_PER_ITEM * TILE_M * j->dstC) * sizeof(float), 64)
                      : NULL;
    if (!pix || !taps || !ptrs || (j->onchw && !ibuf)) { /* Note [Kernel scratch] */
        mft__scratch_fail(j->nomem, (size_t)(TILES_PER_ITEM * T * TILE_M) *
                                        (sizeof(int64_t) + sizeof(float *)));
        mft__free(pix);
        mft__free(taps);
        mft__free(ptrs);
        mft__free(ibuf);
        return;
    }
    float tmp[TILE_M * 2 * TILE_N];
    for (int64_t it = begin; it < end; it++) {
        const int64_t t0 = it * TILES_PER_ITEM;
        const int64_t t1 = t0 + TILES_PER_ITEM < j->ntiles ? t0 + TILES_PER_ITEM : j->ntiles;
        if (j->identity && it + 1 < end) {
            /* 1x1: the next item reads the next TILES_PER_ITEM * 6 source
             * pixels, one contiguous run; fetch it while this item computes
             * (8x64x56x56 k64 1x1 from DRAM, 1 thread: 1.49-1.52 ms without,
             * 1.17-1.37 with, 1.0-1.05 in cache; prefetching the written
             * lines as well measured slower) */
            const int64_t q1 = t1 * TILE_M, q2 = q1 + TILES_PER_ITEM * TILE_M;
            const char *a = (const char *)(j->src + q1 * j->srcC);
            const char *b = (const char *)(j->src + (q2 < j->P ? q2 : j->P) * j->srcC);
            for (; a < b; a += 64) __builtin_prefetch(a, 0, 3);
        }
        int64_t nu[TILES_PER_ITEM], dqs[TILES_PER_ITEM][TILE_M];
        for (int64_t tl = t0; tl < t1; tl++) {
            const int64_t li = tl - t0;
            int64_t *px = pix + li * T * TILE_M;
            int32_t *tp = taps + li * T;
            int64_t *dq = dqs[li];
            if (j->identity) { /* 1x1, stride 1, no padding: src pixel = dst pixel */
                for (int i = 0; i < TILE_M; i++) {
                    const int64_t q = tl * TILE_M + i;
                    px[i] = dq[i] = q < j->P ? q : -1;
                }
                tp[0] = 0;
                nu[li] = 1;
            } else {
                nu[li] = ind_tile(j, tl, px, tp, dq);
            }
        }
        for (int64_t gg = 0; gg < g->G; gg++) {
            for (int64_t tl = t0; tl < t1; tl++) {
                const int64_t li = tl - t0;
                const int64_t *px = pix + li * T * TILE_M;
                const float **pt = ptrs + li * T * TILE_M;
                for (int64_t k = 0; k < nu[li] * TILE_M; k++)
                    pt[k] = px[k] >= 0 ? j->src + px[k] * j->srcC + gg * K : j->zero;
            }
            /* column blocks in pairs (6x32 tiles) where a 6x32 kernel exists */
            for (int64_t cb = 0; cb < j->nb;) {
                const bool two = j->micro2 && cb + 1 < j->nb;
                const int64_t width = two ? 2 * TILE_N : TILE_N;
                const float *wg = j->wp + (gg * j->nb + cb) * T * K * TILE_N;
                const float *b16 = j->bpad + (gg * j->nb + cb) * TILE_N;
                const int64_t cols = j->M - cb * TILE_N < width ? j->M - cb * TILE_N : width;
                for (int64_t tl = t0; tl < t1; tl++) {
                    const int64_t li = tl - t0;
                    const int64_t q0 = tl * TILE_M;
                    const int64_t rows = j->P - q0 < TILE_M ? j->P - q0 : TILE_M;
                    const int64_t *dq = dqs[li];
                    /* ibuf: rows by slot (q0 - t0 * TILE_M + i), flushed to
                     * the tile's pixels below; else the pixels' own rows */
                    float *out =
                        (ibuf ? ibuf + (q0 - t0 * TILE_M) * j->dstC : j->dst + dq[0] * j->dstC) +
                        gg * j->M + cb * TILE_N;
                    const float *const *pt = ptrs + li * T * TILE_M;
                    /* rows stored in place (each at its pixel's row: class-
                     * ordered tiles need not be consecutive) unless the
                     * tile is short or narrow: then through tmp */
                    const bool direct = rows == TILE_M && cols == width;
                    float *orow[TILE_M];
                    for (int i = 0; i < TILE_M; i++)
                        orow[i] = !direct ? tmp + i * width
                                  : out + (ibuf ? i : dq[i] - dq[0]) * j->dstC;
                    if (two)
                        j->micro2(nu[li], taps + li * T, K, pt, wg, T * K * TILE_N, b16, orow);
                    else
                        j->micro(nu[li], taps + li * T, K, pt, wg, b16, orow);
                    if (!direct)
                        for (int64_t i = 0; i < rows; i++)
                            memcpy(out + (ibuf ? i : dq[i] - dq[0]) * j->dstC, tmp + i * width,
                                   (size_t)cols * sizeof(float));
                }
                cb += two ? 2 : 1;
            }
        }
        if (ibuf) { /* pixel-major item buffer -> NCHW, by runs of consecutive
                     * pixels of one image (the slots' pixels: dqs) */
            const int64_t ns = (t1 * TILE_M < j->P ? t1 * TILE_M : j->P) - t0 * TILE_M;
            for (int64_t a = 0; a < ns;) {
                const int64_t q = dqs[a / TILE_M][a % TILE_M];
                const int64_t n = q / j->dS, s0 = q % j->dS;
                int64_t len = 1;
                while (a + len < ns && s0 + len < j->dS &&
                       dqs[(a + len) / TILE_M][(a + len) % TILE_M] == q + len)
                    len++;
                tr_block(ibuf + a * j->dstC, j->dstC, j->dst + n * j->dstC * j->dS + s0, j->dS,
                         len, j->dstC);
                a += len;
            }
        }
    }
    mft__free(pix);
    mft__free(taps);
    mft__free(ptrs);
    mft__free(ibuf);
}

typedef struct pack_job {
    const cgeom *g;
    bool bwd;
    float *wp;
    int64_t K, M, nb;
} pack_job;

static void pack_range(void *ctx, int64_t begin, int64_t end) {
    const pack_job *pj = ctx;
    const cgeom *g = pj->g;
    const int64_t T = g->T, K = pj->K;
    int64_t toff[64];
    const bool small = T <= 64;
    if (small)
        for (int64_t t = 0; t < T; t++) {
            const int64_t kw = t % g->K[2], kh = (t / g->K[2]) % g->K[1],
                          kd = t / (g->K[2] * g->K[1]);
            toff[t] = kd * g->ws[2] + kh * g->ws[3] + kw * g->ws[4];
        }
    /* forward: element (t, k, j) is w[m][k][t]; backward: w[k][m][t] (m = cb*16 + j) */
    const int64_t ks = pj->bwd ? g->ws[0] : g->ws[1], ms = pj->bwd ? g->ws[1] : g->ws[0];
    for (int64_t it = begin; it < end; it++) {
        const int64_t gg = it / pj->nb, cb = it % pj->nb;
        float *o = pj->wp + it * T * K * TILE_N;
        if (!small) {
            for (int64_t t = 0; t < T; t++)
                for (int64_t k = 0; k < K; k++, o += TILE_N)
                    for (int j = 0; j < TILE_N; j++) {
                        const int64_t m = cb * TILE_N + j;
                        float v = 0.0f;
                        if (m < pj->M)
                            v = pj->bwd ? wval(g, gg * g->Cgo + k, m, t)
                                        : wval(g, gg * g->Cgo + m, k, t);
                        o[j] = v;
                    }
            continue;
        }
        /* o written in address order, each 16-float line whole (written one
         * float per line per pass, 16 passes, the packing of 8x256x14x14
         * k256's 2.4 MB of weights took 10% of the forward) */
        const float *wg = g->w + gg * g->Cgo * g->ws[0];
        const int64_t mv = pj->M - cb * TILE_N < TILE_N ? pj->M - cb * TILE_N : TILE_N;
        const float *wm[TILE_N];
        for (int64_t j = 0; j < mv; j++) wm[j] = wg + (cb * TILE_N + j) * ms;
        if (mv == TILE_N && ms == 1) { /* a line is 16 consecutive floats of w */
            for (int64_t t = 0; t < T; t++)
                for (int64_t k = 0; k < K; k++)
                    memcpy(o + (t * K + k) * TILE_N, wm[0] + k * ks + toff[t],
                           TILE_N * sizeof(float));
            continue;
        }
        if (ks == 1) { /* per tap, the (m, k) block of w transposed (channels_last forward) */
            for (int64_t t = 0; t < T; t++) {
                float *ot = o + t * K * TILE_N;
                tr_block(wm[0] + toff[t], ms, ot, TILE_N, mv, K);
                for (int64_t k = 0; k < K && mv < TILE_N; k++)
                    memset(ot + k * TILE_N + mv, 0, (size_t)(TILE_N - mv) * sizeof(float));
            }
            continue;
        }
        for (int64_t t = 0; t < T; t++)
            for (int64_t k = 0; k < K; k++) {
                float *ol = o + (t * K + k) * TILE_N;
                const int64_t e = k * ks + toff[t];
                int64_t j = 0;
                for (; j < mv; j++) ol[j] = wm[j][e];
                for (; j < TILE_N; j++) ol[j] = 0.0f;
            }
    }
}

static void direct_nhwc(const cgeom *g, int kind, const float *a, const float *b, float *o,
                        const int64_t *gws);

static void direct_nchw(const cgeom *g, int kind, const float *a, const float *b, float *o,
                        const int64_t *gws);

/* Per-image NCHW source (ind_conv with src_nchw): work item = one image, whose
 * src planes are transposed into a per-thread NHWC buffer (hot in L2) and
 * whose tiles then run as in ind_range; no full-size scratch copy. */
static void ind_img_range(void *ctx, int64_t begin, int64_t end) {
    const ind_job *j = ctx;
    const int64_t sS = j->sD * j->sH * j->sW, C = j->srcC;
    float *buf = mft__alloc((size_t)(sS * C) * sizeof(float) + 64, 64);
    if (!buf) { /* Note [Kernel scratch] */
        mft__scratch_fail(j->nomem, (size_t)(sS * C) * sizeof(float) + 64);
        return;
    }
    for (int64_t n = begin; n < end; n++) {
        const float *s = j->src + n * C * sS;
        float *d = j->dst + n * j->dstC * j->dS;
        for (int64_t s0 = 0; s0 < sS; s0 += 64)
            for (int64_t c0 = 0; c0 < C; c0 += 64)
                tr_block(s + c0 * sS + s0, sS, buf + s0 * C + c0, C, C - c0 < 64 ? C - c0 : 64,
                         sS - s0 < 64 ? sS - s0 : 64);
        ind_job jj = *j;
        jj.src = buf;
        jj.dst = d;
        jj.P = j->dS;
        jj.ntiles = cdiv(jj.P, TILE_M);
        jj.nitems = cdiv(jj.ntiles, TILES_PER_ITEM);
        jj.nimg = 1; /* (the class order, if any, is per image) */
        ind_range(&jj, 0, jj.nitems);
    }
    mft__free(buf);
}

/* Most classes of dst pixels (distinct sets of taps inside the source)
 * j->ord may hold; more (big padding, dilation, strided backward) leave the
 * flat order. */
#define IND_MAX_CLS 64

/* Class of each position along dim dd (cl[0..n)): positions with the same
 * taps k inside the source share one, numbered in order of first
 * appearance; returns how many (0: more than IND_MAX_CLS). */
static int ind_dim_classes(const ind_job *j, int dd, int64_t n, uint8_t *cl) {
    uint64_t sig[IND_MAX_CLS];
    int nc = 0;
    for (int64_t x = 0; x < n; x++) {
        uint64_t m = 0;
        for (int64_t k = 0; k < j->g->K[dd]; k++)
            m |= (uint64_t)(ind_src_pos(j, dd, x, k) >= 0) << k;
        int c = 0;
        while (c < nc && sig[c] != m) c++;
        if (c == nc) {
            if (nc == IND_MAX_CLS) return 0;
            sig[nc++] = m;
        }
        cl[x] = (uint8_t)c;
    }
    return nc;
}

/* Sets j->ord / oc / cls / ncls (see ind_job) when the dst pixels of an
 * image fall into 2..IND_MAX_CLS classes of inside taps (a class: one class
 * along each dim); returns the memory to free (NULL: flat order kept).
 * Classes in order of their per-dim classes, positions ascending within
 * each. O(positions): no per-(pixel, tap) test. */
static void *ind_order(ind_job *j) {
    const cgeom *g = j->g;
    const int64_t S = j->dS, dn[3] = {j->dD, j->dH, j->dW};
    if (g->T < 2 || g->T > 64 || S < 2 || S > ((int64_t)1 << 20)) return NULL;
    uint8_t *dc = mft__alloc((size_t)(dn[0] + dn[1] + dn[2]), 64);
    if (!dc) return NULL;
    uint8_t *dcl[3] = {dc, dc + dn[0], dc + dn[0] + dn[1]};
    int nd[3];
    int64_t ncls = 1;
    for (int dd = 0; dd < 3; dd++) {
        nd[dd] = ind_dim_classes(j, dd, dn[dd], dcl[dd]);
        ncls *= nd[dd];
    }
    if (ncls < 2 || ncls > IND_MAX_CLS) { /* one class: the flat order is it */
        mft__free(dc);
        return NULL;
    }
    const size_t bytes = (size_t)(ncls + 1) * sizeof(int64_t) + (size_t)S * sizeof(int64_t) +
                         (size_t)S * 3 * sizeof(int32_t);
    char *mem = mft__alloc(bytes, 64);
    if (!mem) {
        mft__free(dc);
        return NULL;
    }
    int64_t *cls = (int64_t *)(void *)mem, *ord = cls + ncls + 1;
    int32_t(*oc)[3] = (int32_t(*)[3])(void *)(ord + S);
    int64_t cnt[IND_MAX_CLS], fill[IND_MAX_CLS];
    for (int64_t c = 0; c < ncls; c++) cnt[c] = 0;
    /* class of (a, h, w) = (cl_d * nh + cl_h) * nw + cl_w */
#define IND_CLASS_OF(a, h, w)                                                                      \
    (((int64_t)dcl[0][a] * nd[1] + dcl[1][h]) * nd[2] + dcl[2][w])
    for (int64_t a = 0; a < dn[0]; a++)
        for (int64_t h = 0; h < dn[1]; h++)
            for (int64_t w = 0; w < dn[2]; w++) cnt[IND_CLASS_OF(a, h, w)]++;
    /* (no class is empty: the positions are every combination of the
     * per-dim positions, so every combination of per-dim classes) */
    cls[0] = 0;
    for (int64_t c = 0; c < ncls; c++) {
        fill[c] = cls[c];
        cls[c + 1] = cls[c] + cnt[c];
    }
    int64_t q = 0;
    for (int64_t a = 0; a < dn[0]; a++)
        for (int64_t h = 0; h < dn[1]; h++)
            for (int64_t w = 0; w < dn[2]; w++, q++) {
                const int64_t e = fill[IND_CLASS_OF(a, h, w)]++;
                ord[e] = q;
                oc[e][0] = (int32_t)a;
                oc[e][1] = (int32_t)h;
                oc[e][2] = (int32_t)w;
            }
#undef IND_CLASS_OF
    mft__free(dc);
    j->ord = ord;
    j->oc = (const int32_t(*)[3])oc;
    j->cls = cls;
    j->ncls = (int)ncls;
    return mem;
}

/* Forward (bwd = false) or backward_input (bwd = true): src NHWC, dst NHWC
 * or (onchw) NCHW; src_nchw: src is NCHW and dst NCHW (onchw must be set),
 * images in parallel. True when done or when scratch was short (reported
 * through mft__kernel_nomem); false only in the direct-loop test mode with
 * an NCHW dst (the caller runs the NCHW direct loops). */
static bool ind_conv(const cgeom *g, bool bwd, const float *src, float *dst, bool onchw,
                     bool src_nchw) {
    ind_job j;
    memset(&j, 0, sizeof j);
    j.g = g;
    j.bwd = bwd;
    j.src = src;
    j.dst = dst;
    j.K = bwd ? g->Cgo : g->Cgi;
    j.M = bwd ? g->Cgi : g->Cgo;
    j.nb = cdiv(j.M, TILE_N);
    j.srcC = bwd ? g->Cout : g->Cin;
    j.dstC = bwd ? g->Cin : g->Cout;
    if (!bwd) {
        j.sD = g->D, j.sH = g->H, j.sW = g->W, j.dD = g->OD, j.dH = g->OH, j.dW = g->OW;
    } else {
        j.sD = g->OD, j.sH = g->OH, j.sW = g->OW, j.dD = g->D, j.dH = g->H, j.dW = g->W;
    }
    j.P = g->N * j.dD * j.dH * j.dW;
    j.ntiles = cdiv(j.P, TILE_M);
    j.nitems = cdiv(j.ntiles, TILES_PER_ITEM);
    j.micro = pick_ind_micro();
    j.micro2 = pick_ind_micro2();
    j.onchw = onchw;
    j.dS = j.dD * j.dH * j.dW;
    for (int64_t t = 0; t < g->T && t < IND_MAX_T; t++) {
        const int64_t kw = t % g->K[2], kh = (t / g->K[2]) % g->K[1],
                      kd = t / (g->K[2] * g->K[1]);
        const int64_t sg = bwd ? -1 : 1;
        j.toff[t] = sg * (((kd * g->d[0]) * j.sH + kh * g->d[1]) * j.sW + kw * g->d[2]);
    }
    j.identity = g->T == 1 && j.sD == j.dD && j.sH == j.dH && j.sW == j.dW;
    for (int i = 0; i < 3; i++) j.identity &= g->s[i] == 1 && g->p[i] == 0;
    const size_t wn = (size_t)(g->G * j.nb * g->T * j.K * TILE_N);
    if (cf_mode == 2) { /* tests: the direct loops */
        if (onchw) return false;
        direct_nhwc(g, bwd ? 1 : 0, src, NULL, dst, NULL);
        return true;
    }
    float *wp = mft__alloc(wn * sizeof(float), 64);
    float *bpad = mft__alloc((size_t)(g->G * j.nb * TILE_N) * sizeof(float), 64);
    float *zero = mft__alloc((size_t)(j.K + 16) * sizeof(float), 64);
    if (!wp || !bpad || !zero) { /* Note [Kernel scratch] */
        mft__free(wp);
        mft__free(bpad);
        mft__free(zero);
        mft__kernel_nomem(wn * sizeof(float));
        return true;
    }
    memset(zero, 0, (size_t)(j.K + 16) * sizeof(float));
    for (int64_t gg = 0; gg < g->G; gg++)
        for (int64_t m = 0; m < j.nb * TILE_N; m++)
            bpad[gg * j.nb * TILE_N + m] = m < j.M ? bval(g, gg * j.M + m) : 0.0f;
    pack_job pj = {g, bwd, wp, j.K, j.M, j.nb};
    mft__parallel_for(0, g->G * j.nb, 1, pack_range, &pj);
    j.wp = wp;
    j.bpad = bpad;
    j.zero = zero;
    j.nimg = g->N;
    _Atomic long long nomem = 0;
    j.nomem = &nomem;
    /* (ind_order's memory is optional: without it the flat order is used,
     * which gives the same bits) */
    void *ordmem = j.P > 0 && !j.identity ? ind_order(&j) : NULL;
    if (j.P > 0 && src_nchw) /* per image: the jobs' class orders cover one image each */
        mft__parallel_for_dynamic(0, g->N, 1, ind_img_range, &j);
    else if (j.P > 0) /* items are independent: dynamic chunks balance unequal cores */
        mft__parallel_for_dynamic(0, j.nitems, cf_chunk(j.nitems), ind_range, &j);
    if (atomic_load(&nomem)) mft__kernel_nomem((size_t)atomic_load(&nomem));
    mft__free(ordmem);
    mft__free(wp);
    mft__free(bpad);
    mft__free(zero);
    return true;
}

/* ---------------------------------------------------------------- backward_weight
 * Shapes (NHWC): grad_y (N, OD, OH, OW, Cout) (or the padded copy, channel
 * stride gs), x (N, D, H, W, Cin); grad_w any strides (gw). */
typedef struct bw_job {
    const cgeom *g;
    const float *gy;
    int64_t gs; /* grad_y pixel stride */
    int64_t nbo, nbi;
    const float *x;
    const float *gy_src; /* the unpadded grad_y (while padding) */
    float *gy_pad;
    float *gw;
    const int64_t *gws; /* grad_w strides (co, ci, kd, kh, kw) */
    bw_micro_fn micro;
    bw_micro2_fn micro2; /* NULL: bm x 16 tiles only */
    int64_t bm;          /* rows (input channels) per tile: TILE_M, or 8 (AVX-512) */
    _Atomic long long *nomem; /* Note [Kernel scratch]: a worker's failed allocation */
} bw_job;

#define BWC_ROWS 8 /* output rows per micro-kernel call */

/* Adds output rows [rb, re) (flat (n, od, oh), at most BWC_ROWS) of group gg
 * into the accumulators of c_out blocks [cb0, cb1): block cb's
 * [tap][ci block][bm][16] at acc + (cb - cb0) * T * nbi * bm * 16. One
 * micro-kernel call per (tap, c_in block, c_out block or pair) covers all
 * the rows whose input row exists for the tap, so the accumulators are
 * loaded and stored once per block of rows, not once per row. */
static void bw_rows(const bw_job *j, int64_t gg, int64_t rb, int64_t re, int64_t cb0,
                    int64_t cb1, float *acc) {
    const cgeom *g = j->g;
    const int64_t T = g->T, nbi = j->nbi, blk = T * nbi * j->bm * TILE_N;
    const int64_t goff = j->gs == g->Cout ? gg * g->Cgo : gg * j->nbo * TILE_N;
    const int64_t xs = g->s[2] * g->Cin;
    const float *xrows[BW_MAX_M];
    for (int64_t t = 0; t < T; t++) {
        const int64_t kw = t % g->K[2], kh = (t / g->K[2]) % g->K[1], kd = t / (g->K[2] * g->K[1]);
        int64_t lo, hi;
        const int64_t off = kw * g->d[2] - g->p[2];
        valid_range(g->OW, g->W, g->s[2], off, &lo, &hi);
        if (hi <= lo) continue;
        /* the rows of this block whose input row exists for tap t */
        int64_t xo[BWC_ROWS], go[BWC_ROWS], nq = 0;
        for (int64_t r = rb; r < re; r++) {
            const int64_t oh = r % g->OH, od = (r / g->OH) % g->OD, n = r / (g->OH * g->OD);
            const int64_t id = od * g->s[0] - g->p[0] + kd * g->d[0];
            const int64_t ih = oh * g->s[1] - g->p[1] + kh * g->d[1];
            if (id < 0 || id >= g->D || ih < 0 || ih >= g->H) continue;
            xo[nq] = ((n * g->D + id) * g->H + ih) * g->W * g->Cin + (lo * g->s[2] + off) * g->Cin;
            go[nq] = (r * g->OW + lo) * j->gs;
            nq++;
        }
        if (!nq) continue;
        for (int64_t ib = 0; ib < nbi; ib++) {
            for (int i = 0; i < j->bm; i++) {
                int64_t ci = ib * j->bm + i;
                if (ci >= g->Cgi) ci = g->Cgi - 1;
                xrows[i] = j->x + gg * g->Cgi + ci;
            }
            for (int64_t cb = cb0; cb < cb1;) {
                float *a0 = acc + (cb - cb0) * blk + (t * nbi + ib) * j->bm * TILE_N;
                const float *gp = j->gy + goff + cb * TILE_N;
                if (j->micro2 && cb + 1 < cb1) { /* two c_out blocks, 6x32 */
                    j->micro2(nq, xo, go, hi - lo, xrows, xs, gp, j->gs, a0, a0 + blk);
                    cb += 2;
                } else {
                    j->micro(nq, xo, go, hi - lo, xrows, xs, gp, j->gs, a0);
                    cb++;
                }
            }
        }
    }
}

static void bw_range(void *ctx, int64_t begin, int64_t end) {
    const bw_job *j = ctx;
    const cgeom *g = j->g;
    const int64_t T = g->T, nbi = j->nbi, bpi = j->micro2 ? 2 : 1; /* c_out blocks per item */
    const int64_t blk = T * nbi * j->bm * TILE_N; /* one block's accumulators */
    float *acc = mft__alloc((size_t)(bpi * blk) * sizeof(float), 64);
    if (!acc) { /* Note [Kernel scratch] */
        mft__scratch_fail(j->nomem, (size_t)(bpi * blk) * sizeof(float));
        return;
    }
    const int64_t nit = cdiv(j->nbo, bpi);
    for (int64_t it = begin; it < end; it++) {
        const int64_t gg = it / nit, cb0 = (it % nit) * bpi;
        const int64_t nblk = j->nbo - cb0 < bpi ? j->nbo - cb0 : bpi;
        const int64_t c1 = g->Cgo < (cb0 + nblk) * TILE_N ? g->Cgo : (cb0 + nblk) * TILE_N;
        memset(acc, 0, (size_t)(nblk * blk) * sizeof(float));
        const int64_t rows = g->N * g->OD * g->OH;
        for (int64_t rb = 0; rb < rows; rb += BWC_ROWS)
            bw_rows(j, gg, rb, rb + BWC_ROWS < rows ? rb + BWC_ROWS : rows, cb0, cb0 + nblk, acc);
        for (int64_t co = cb0 * TILE_N; co < c1; co++) {
            const float *ab = acc + (co / TILE_N - cb0) * blk;
            const int64_t jj = co % TILE_N;
            for (int64_t t = 0; t < T; t++) {
                const int64_t kw = t % g->K[2], kh = (t / g->K[2]) % g->K[1],
                              kd = t / (g->K[2] * g->K[1]);
                for (int64_t ci = 0; ci < g->Cgi; ci++)
                    j->gw[(gg * g->Cgo + co) * j->gws[0] + ci * j->gws[1] + kd * j->gws[2] +
                          kh * j->gws[3] + kw * j->gws[4]] =
                        ab[((t * nbi + ci / j->bm) * j->bm + ci % j->bm) * TILE_N + jj];
            }
        }
    }
    mft__free(acc);
}

static void bw_pad_range(void *ctx, int64_t begin, int64_t end) {
    const bw_job *j = ctx;
    const cgeom *g = j->g;
    float *dst = j->gy_pad;
    const float *src = j->gy_src;
    for (int64_t p = begin; p < end; p++)
        for (int64_t gg = 0; gg < g->G; gg++)
            for (int64_t c = 0; c < j->nbo * TILE_N; c++)
                dst[p * j->gs + gg * j->nbo * TILE_N + c] =
                    c < g->Cgo ? src[p * g->Cout + gg * g->Cgo + c] : 0.0f;
}

/* Row-chunked backward_weight (used when every (c_out block, tap, c_in block)
 * accumulator of a group fits in BWC_MAX_ACC bytes, e.g. 1x1 convolutions):
 * work items are (group, chunk of BWC_CHUNKS fixed output-row ranges); an item
 * sums its rows into its own partial [cb][tap][ci block][6][16], running every
 * c_out block on a block of BWC_ROWS rows while their x is in L1/L2, one
 * micro-kernel call per (tap, block of rows) (the per-(group, cb) items
 * of bw_range stream all of x once per c_out block). bwc_reduce adds the
 * partials in chunk order, so results do not depend on the thread count. */
#define BWC_CHUNKS  8
#define BWC_MAX_ACC (256 * 1024)

typedef struct bwc_job {
    const bw_job *b;
    float *part; /* [G][nch][accn] */
    int64_t nch, rows, accn;
} bwc_job;

static void bwc_range(void *ctx, int64_t begin, int64_t end) {
    const bwc_job *c = ctx;
    const bw_job *j = c->b;
    for (int64_t it = begin; it < end; it++) {
        const int64_t gg = it / c->nch, ch = it % c->nch;
        const int64_t r0 = ch * c->rows / c->nch, r1 = (ch + 1) * c->rows / c->nch;
        float *acc = c->part + it * c->accn;
        memset(acc, 0, (size_t)c->accn * sizeof(float));
        for (int64_t rb = r0; rb < r1; rb += BWC_ROWS)
            bw_rows(j, gg, rb, rb + BWC_ROWS < r1 ? rb + BWC_ROWS : r1, 0, j->nbo, acc);
    }
}

/* items (group, c_out block): grad_w = sum over chunks, in chunk order */
static void bwc_reduce(void *ctx, int64_t begin, int64_t end) {
    const bwc_job *c = ctx;
    const bw_job *j = c->b;
    const cgeom *g = j->g;
    const int64_t T = g->T, nbi = j->nbi;
    for (int64_t it = begin; it < end; it++) {
        const int64_t gg = it / j->nbo, cb = it % j->nbo;
        const int64_t cols = g->Cgo - cb * TILE_N < TILE_N ? g->Cgo - cb * TILE_N : TILE_N;
        const float *p0 = c->part + gg * c->nch * c->accn + cb * T * nbi * j->bm * TILE_N;
        for (int64_t t = 0; t < T; t++) {
            const int64_t kw = t % g->K[2], kh = (t / g->K[2]) % g->K[1],
                          kd = t / (g->K[2] * g->K[1]);
            for (int64_t ci = 0; ci < g->Cgi; ci++)
                for (int64_t jj = 0; jj < cols; jj++) {
                    const int64_t e = ((t * nbi + ci / j->bm) * j->bm + ci % j->bm) * TILE_N + jj;
                    float s = p0[e];
                    for (int64_t ch = 1; ch < c->nch; ch++) s += p0[ch * c->accn + e];
                    j->gw[(gg * g->Cgo + cb * TILE_N + jj) * j->gws[0] + ci * j->gws[1] +
                          kd * j->gws[2] + kh * j->gws[3] + kw * j->gws[4]] = s;
                }
        }
    }
}

static void bw_conv(const cgeom *g, const float *gy, const float *x, float *gw,
                    const int64_t *gws) {
    bw_job j;
    memset(&j, 0, sizeof j);
    j.g = g;
    j.nbo = cdiv(g->Cgo, TILE_N);
    /* rows (input channels) per tile: 8 on AVX-512 when they divide the
     * channels (32 channels: 6 blocks of 6 would waste 4 rows) */
    j.micro = pick_bw_micro();
    j.micro2 = pick_bw_micro2();
    j.bm = g->Cgi % 8 == 0 && pick_bw_micro8(&j.micro, &j.micro2) ? 8 : TILE_M;
    j.nbi = cdiv(g->Cgi, j.bm);
    j.gw = gw;
    j.gws = gws;
    if (cf_mode == 2) {
        direct_nhwc(g, 2, gy, x, gw, gws);
        return;
    }
    float *pad = NULL;
    const int64_t P = g->N * g->OD * g->OH * g->OW;
    _Atomic long long nomem = 0;
    j.nomem = &nomem;
    if (g->Cgo % TILE_N) {
        j.gs = g->G * j.nbo * TILE_N;
        pad = mft__alloc((size_t)(P * j.gs) * sizeof(float) + 64, 64);
        if (!pad) { /* Note [Kernel scratch] */
            mft__kernel_nomem((size_t)(P * j.gs) * sizeof(float) + 64);
            return;
        }
        j.gy = pad;
        j.gy_pad = pad;
        j.gy_src = gy;
        mft__parallel_for(0, P, 1024, bw_pad_range, &j);
    } else {
        j.gs = g->Cout;
        j.gy = gy;
    }
    j.x = x;
    bwc_job c;
    c.b = &j;
    c.rows = g->N * g->OD * g->OH;
    c.nch = BWC_CHUNKS;
    c.accn = g->T * j.nbo * j.nbi * j.bm * TILE_N;
    c.part = NULL;
    if (c.rows >= BWC_CHUNKS && c.accn * (int64_t)sizeof(float) <= BWC_MAX_ACC) {
        const size_t bytes = (size_t)(g->G * c.nch * c.accn) * sizeof(float);
        c.part = mft__alloc(bytes, 64);
        if (!c.part) /* Note [Kernel scratch]: not bw_range, which sums in another order */
            mft__kernel_nomem(bytes);
        else {
            mft__parallel_for_dynamic(0, g->G * c.nch, cf_chunk(g->G * c.nch), bwc_range, &c);
            mft__parallel_for(0, g->G * j.nbo, 1, bwc_reduce, &c);
            mft__free(c.part);
        }
    } else {
        mft__parallel_for(0, g->G * cdiv(j.nbo, j.micro2 ? 2 : 1), 1, bw_range, &j);
        if (atomic_load(&nomem)) mft__kernel_nomem((size_t)atomic_load(&nomem));
    }
    mft__free(pad);
}

/* ---------------------------------------------------------------- depthwise
 * groups == C_in (one input channel per group), multiplier mult = Cgo:
 * output channel co reads input channel co / mult. NHWC buffers; weights
 * packed [tap][Cout]. */
typedef struct dw_job {
    const cgeom *g;
    int kind; /* 0 forward, 1 backward_input, 2 backward_weight */
    const float *a, *b;
    float *o;
    const float *wp;
    const float *bpad; /* bias of the dst channels, packed */
    float *part;       /* backward_weight: [chunks][T][Cout] */
    int64_t nchunks, rows;
    bool onchw; /* forward / backward_input: o is NCHW */
    _Atomic long long *nomem; /* Note [Kernel scratch]: a worker's failed allocation */
} dw_job;

/* acc[co] += a[co / mult] * w[co] */
static inline void dw_fma(float *restrict acc, const float *restrict a, const float *restrict w,
                          int64_t C, int64_t mult) {
    if (mult == 1) {
        for (int64_t c = 0; c < C; c++) acc[c] += a[c] * w[c];
    } else {
        for (int64_t c = 0; c < C / mult; c++) {
            const float av = a[c];
            float *restrict ac = acc + c * mult;
            const float *restrict wc = w + c * mult;
            for (int64_t m = 0; m < mult; m++) ac[m] += av * wc[m];
        }
    }
}

static void dw_range(void *ctx, int64_t begin, int64_t end) {
    const dw_job *j = ctx;
    const cgeom *g = j->g;
    const int64_t mult = g->Cgo, Cin = g->Cin, Cout = g->Cout, T = g->T;
    /* per-row tap tables (forward / backward_input) */
    const float **rtab_a = NULL, **rtab_w = NULL;
    int64_t *rtab_k = NULL;
    float *rowbuf = NULL;
    if (j->kind != 2) {
        const int64_t rowlen = j->kind == 1 ? g->W * Cin : g->OW * Cout;
        const size_t bytes = (size_t)T * (2 * sizeof(float *) + sizeof(int64_t)) +
                             (j->onchw ? (size_t)rowlen * sizeof(float) : 0);
        rtab_a = mft__alloc(bytes, 64);
        if (!rtab_a) { /* Note [Kernel scratch] */
            mft__scratch_fail(j->nomem, bytes);
            return;
        }
        rtab_w = rtab_a + T;
        rtab_k = (int64_t *)(void *)(rtab_w + T);
        if (j->onchw) rowbuf = (float *)(void *)(rtab_k + T);
    }
    for (int64_t r = begin; r < end; r++) {
        if (j->kind == 2) {
            /* chunk r of the (n, od, oh) rows: partial sums [T][Cout] */
            float *part = j->part + r * T * Cout;
            memset(part, 0, (size_t)(T * Cout) * sizeof(float));
            const int64_t r0 = r * j->rows / j->nchunks, r1 = (r + 1) * j->rows / j->nchunks;
#if CF_AVX512
            /* plain, one depth tap, <= 3 tap rows of 3 taps at unit W stride
             * and dilation: each row's interior columns slide through
             * registers (dw512_bw_slide), the per-tap loop takes the edges */
            const bool bw_slide = cf_mode != 1 && mult == 1 && Cout % 16 == 0 &&
                                  g->K[0] == 1 && g->K[1] <= 3 && g->K[2] == 3 &&
                                  g->s[2] == 1 && g->d[2] == 1;
#endif
            for (int64_t row = r0; row < r1; row++) {
                const int64_t oh = row % g->OH, od = (row / g->OH) % g->OD,
                              n = row / (g->OH * g->OD);
                int64_t L = 0, R = 0; /* the interior [L, R), done by the slide */
#if CF_AVX512
                if (bw_slide) {
                    R = g->OW;
                    for (int64_t kw = 0; kw < 3; kw++) {
                        int64_t lo, hi;
                        valid_range(g->OW, g->W, 1, kw - g->p[2], &lo, &hi);
                        L = lo > L ? lo : L;
                        R = hi < R ? hi : R;
                    }
                    const int64_t id = od * g->s[0] - g->p[0];
                    const float *xr[3];
                    int64_t tix[9];
                    int nr = 0;
                    for (int64_t kh = 0; L < R && id >= 0 && id < g->D && kh < g->K[1]; kh++) {
                        const int64_t ih = oh * g->s[1] - g->p[1] + kh * g->d[1];
                        if (ih < 0 || ih >= g->H) continue;
                        xr[nr] = j->b + (((n * g->D + id) * g->H + ih) * g->W + L - g->p[2]) * Cin;
                        for (int kw = 0; kw < 3; kw++) tix[3 * nr + kw] = kh * 3 + kw;
                        nr++;
                    }
                    if (nr > 0)
                        dw512_bw_slide(part, xr, j->a + (row * g->OW + L) * Cout, R - L, Cout, tix,
                                       nr);
                    else
                        L = R = 0;
                }
#endif
                for (int64_t t = 0; t < T; t++) {
                    const int64_t kw = t % g->K[2], kh = (t / g->K[2]) % g->K[1],
                                  kd = t / (g->K[2] * g->K[1]);
                    const int64_t id = od * g->s[0] - g->p[0] + kd * g->d[0];
                    const int64_t ih = oh * g->s[1] - g->p[1] + kh * g->d[1];
                    if (id < 0 || id >= g->D || ih < 0 || ih >= g->H) continue;
                    int64_t vlo, vhi;
                    const int64_t off = kw * g->d[2] - g->p[2];
                    valid_range(g->OW, g->W, g->s[2], off, &vlo, &vhi);
                    /* the valid columns outside the slid interior: up to two runs */
                    for (int seg = 0; seg < 2; seg++) {
                        const int64_t lo = L < R ? (seg ? (R > vlo ? R : vlo) : vlo)
                                                 : (seg ? vhi : vlo);
                        const int64_t hi = L < R ? (seg ? vhi : (L < vhi ? L : vhi)) : vhi;
                        if (hi <= lo) continue;
                        const float *gy0 = j->a + (row * g->OW + lo) * Cout;
                        const float *x0 = j->b + (((n * g->D + id) * g->H + ih) * g->W +
                                                  lo * g->s[2] + off) *
                                                     Cin;
                        float *pt = part + t * Cout;
                        if (dw_bw_run(pt, x0, g->s[2] * Cin, gy0, Cout, hi - lo, mult)) continue;
                        for (int64_t ow = lo; ow < hi; ow++) {
                            /* pt[co] += x[co / mult] * gy[co] */
                            dw_fma(pt, x0 + (ow - lo) * g->s[2] * Cin, gy0 + (ow - lo) * Cout,
                                   Cout, mult);
                        }
                    }
                }
            }
            continue;
        }
        /* forward / backward_input: one dst row (n, d, h). The row's taps
         * whose (kd, kh) lands inside the source are listed once (source row
         * pointer, kw, packed weights); each pixel keeps those whose column
         * is inside, in tap order, in chunks of DW_CHUNK (later chunks
         * accumulate onto the stored result). */
        const bool bwd = j->kind == 1;
        const int64_t dH = bwd ? g->H : g->OH, dD = bwd ? g->D : g->OD, dW = bwd ? g->W : g->OW;
        const int64_t dC = bwd ? Cin : Cout, sC = bwd ? Cout : Cin;
        const int64_t h = r % dH, dd = (r / dH) % dD, n = r / (dH * dD);
        const int64_t ssz[3] = {bwd ? g->OD : g->D, bwd ? g->OH : g->H, bwd ? g->OW : g->W};
        const int64_t sW = g->s[2], pW = g->p[2], dlW = g->d[2];
        if (!bwd && r + 1 < end) {
            /* the source row only the next dst row reads (its last tap row):
             * fetch it while this row computes (8x64x56x56 3x3 NHWC, 1 thread:
             * 0.73-0.75 -> 0.60-0.64 ms; 2 threads 0.32-0.37 -> 0.27-0.31) */
            const int64_t h1 = (r + 1) % dH, d1 = ((r + 1) / dH) % dD, n1 = (r + 1) / (dH * dD);
            const int64_t ih = h1 * g->s[1] - g->p[1] + (g->K[1] - 1) * g->d[1];
            const int64_t id = d1 * g->s[0] - g->p[0] + (g->K[0] - 1) * g->d[0];
            if (ih >= 0 && ih < g->H && id >= 0 && id < g->D) {
                const char *a = (const char *)(j->a + ((n1 * g->D + id) * g->H + ih) * g->W * Cin);
                const char *b = a + g->W * Cin * (int64_t)sizeof(float);
                for (; a < b; a += 64) __builtin_prefetch(a, 0, 3);
            }
        }
        const float *aps[DW_CHUNK], *wps[DW_CHUNK];
        /* streaming stores only for packed NHWC outputs too big to stay in a
         * last-level cache (>= 16 MB; below that, normal stores leave y in
         * cache for its consumer and measured faster) */
        const bool nt = !rowbuf && dC % 8 == 0 && ((uintptr_t)j->o % 32) == 0 &&
                        (dW * dH * dD * g->N * dC) >= ((int64_t)1 << 22);
        int64_t nr = 0, kw = -1, kh = 0, kd = 0;
        for (int64_t t = 0; t < T; t++) {
            if (++kw == g->K[2]) {
                kw = 0;
                if (++kh == g->K[1]) {
                    kh = 0;
                    kd++;
                }
            }
            const int64_t pos[2] = {dd, h}, kk[2] = {kd, kh};
            int64_t sp[2];
            bool ok = true;
            for (int i = 0; i < 2; i++) {
                if (!bwd) {
                    sp[i] = pos[i] * g->s[i] - g->p[i] + kk[i] * g->d[i];
                } else {
                    int64_t v = pos[i] + g->p[i] - kk[i] * g->d[i];
                    if (g->s[i] != 1 && (v < 0 || v % g->s[i])) ok = false;
                    sp[i] = g->s[i] != 1 ? v / g->s[i] : v;
                }
                ok &= sp[i] >= 0 && sp[i] < ssz[i];
            }
            if (!ok) continue;
            rtab_a[nr] = j->a + ((n * ssz[0] + sp[0]) * ssz[1] + sp[1]) * ssz[2] * sC;
            rtab_w[nr] = j->wp + t * Cout;
            rtab_k[nr++] = kw;
        }
        if (nr <= DW_CHUNK && (!bwd || sW == 1)) {
            /* one chunk, unit source step per kw: branch-free tap selection */
            const int64_t SW = ssz[2];
            int64_t kmin = 0, kmax = 0;
            for (int64_t e = 0; e < nr; e++) {
                rtab_k[e] *= bwd ? -dlW : dlW;
                if (e == 0 || rtab_k[e] < kmin) kmin = rtab_k[e];
                if (e == 0 || rtab_k[e] > kmax) kmax = rtab_k[e];
            }
            /* interior pixels: every listed tap inside; the tap list of the
             * first interior pixel shifted by (wcol - lo) * step */
            const int64_t step = (bwd ? 1 : sW) * sC;
            int64_t lo = dW, hi = dW;
            for (int64_t wcol = 0; wcol < dW; wcol++) {
                const int64_t b0 = bwd ? wcol + pW : wcol * sW - pW;
                const bool all = b0 + kmin >= 0 && b0 + kmax < SW;
                if (all && lo == dW) lo = wcol;
                if (!all && lo != dW) {
                    hi = wcol;
                    break;
                }
            }
            const float *api[DW_CHUNK];
            if (lo < hi) {
                const int64_t b0 = bwd ? lo + pW : lo * sW - pW;
                for (int64_t e = 0; e < nr; e++) api[e] = rtab_a[e] + (b0 + rtab_k[e]) * sC;
            }
#if CF_AVX512
            /* plain forward or backward_input, taps (row, kw 0..2) at unit
             * W stride and dilation: the interior slides through registers */
            bool slide = cf_mode != 1 && mult == 1 && dC % 16 == 0 && g->K[2] == 3 && sW == 1 &&
                         dlW == 1 && nr % 3 == 0 && nr <= 9 && lo < hi;
            for (int64_t e = 0; slide && e < nr; e++)
                slide = rtab_k[e] == (bwd ? -(e % 3) : e % 3) && rtab_a[e] == rtab_a[e - e % 3];
#endif
            for (int64_t wcol = 0; wcol < dW; wcol++) {
                float *o = rowbuf ? rowbuf + wcol * dC : j->o + (r * dW + wcol) * dC;
#if CF_AVX512
                if (slide && wcol == lo) {
                    /* taps by source column ascending: the backward's
                     * kw = 2, 1, 0 (its source column falls as kw rises) */
                    const float *rp[3], *wv[9];
                    for (int64_t e = 0; e < nr; e++) wv[e] = rtab_w[bwd ? e + 2 - 2 * (e % 3) : e];
                    for (int64_t k = 0; k < nr / 3; k++) rp[k] = api[bwd ? 3 * k + 2 : 3 * k];
                    dw512_slide(o, j->bpad, rp, wv, (int)(nr / 3), hi - lo, sC, dC, nt);
                    wcol = hi - 1;
                    continue;
                }
#endif
                if (wcol >= lo && wcol < hi) {
                    /* pairs (lo, lo+1), (lo+2, lo+3), ... share weight loads */
                    if (wcol + 1 < hi &&
                        dw_pixel2(o, o + dC, j->bpad, api, (wcol - lo) * step,
                                  (wcol + 1 - lo) * step, rtab_w, nr, dC, mult, bwd, nt)) {
                        wcol++;
                        continue;
                    }
                    dw_pixel(o, j->bpad, api, (wcol - lo) * step, rtab_w, nr, dC, mult, bwd, nt);
                    continue;
                }
                const int64_t b0 = bwd ? wcol + pW : wcol * sW - pW;
                int64_t nu = 0;
                for (int64_t e = 0; e < nr; e++) {
                    const int64_t iw = b0 + rtab_k[e];
                    const bool in = (uint64_t)iw < (uint64_t)SW;
                    aps[nu] = rtab_a[e] + (in ? iw : 0) * sC;
                    wps[nu] = rtab_w[e];
                    nu += in;
                }
                dw_pixel(o, j->bpad, aps, 0, wps, nu, dC, mult, bwd, nt);
            }
        } else {
            for (int64_t wcol = 0; wcol < dW; wcol++) {
                float *o = rowbuf ? rowbuf + wcol * dC : j->o + (r * dW + wcol) * dC;
                int64_t nu = 0;
                bool first = true;
                for (int64_t e = 0; e < nr; e++) {
                    int64_t iw;
                    if (!bwd) {
                        iw = wcol * sW - pW + rtab_k[e] * dlW;
                    } else {
                        iw = wcol + pW - rtab_k[e] * dlW;
                        if (sW != 1) iw = (iw < 0 || iw % sW) ? -1 : iw / sW;
                    }
                    if (iw >= 0 && iw < ssz[2]) {
                        aps[nu] = rtab_a[e] + iw * sC;
                        wps[nu++] = rtab_w[e];
                    }
                    if (nu == DW_CHUNK) {
                        dw_pixel(o, first ? j->bpad : o, aps, 0, wps, nu, dC, mult, bwd, false);
                        first = false;
                        nu = 0;
                    }
                }
                if (nu > 0 || first)
                    dw_pixel(o, first ? j->bpad : o, aps, 0, wps, nu, dC, mult, bwd, nt && first);
            }
        }
        if (rowbuf) { /* (dW, dC) row -> NCHW */
            const int64_t S = dD * dH * dW;
            tr_block(rowbuf, dC, j->o + n * dC * S + (dd * dH + h) * dW, S, dW, dC);
        }
    }
#if CF_AVX2
    _mm_sfence();
#endif
    mft__free(rtab_a);
}

static bool is_depthwise(const cgeom *g) { return g->Cgi == 1 && g->G == g->Cin; }

/* Always true (a failed scratch allocation is reported through
 * mft__kernel_nomem, Note [Kernel scratch]). */
static bool dw_conv(const cgeom *g, int kind, const float *a, const float *b, float *o,
                    const int64_t *gws, bool onchw) {
    dw_job j;
    memset(&j, 0, sizeof j);
    _Atomic long long nomem = 0;
    j.nomem = &nomem;
    j.g = g;
    j.kind = kind;
    j.a = a;
    j.b = b;
    j.o = o;
    j.onchw = onchw;
    const int64_t T = g->T, Cout = g->Cout;
    if (kind == 2) {
        j.rows = g->N * g->OD * g->OH;
        j.nchunks = j.rows < 16 ? j.rows : 16;
        j.part = mft__alloc((size_t)(j.nchunks * T * Cout) * sizeof(float) + 64, 64);
        if (!j.part) { /* Note [Kernel scratch] */
            mft__kernel_nomem((size_t)(j.nchunks * T * Cout) * sizeof(float) + 64);
            return true;
        }
        mft__parallel_for(0, j.nchunks, 1, dw_range, &j);
        for (int64_t co = 0; co < Cout; co++)
            for (int64_t t = 0; t < T; t++) {
                const int64_t kw = t % g->K[2], kh = (t / g->K[2]) % g->K[1],
                              kd = t / (g->K[2] * g->K[1]);
                float s = 0.0f;
                for (int64_t c = 0; c < j.nchunks; c++) s += j.part[(c * T + t) * Cout + co];
                o[co * gws[0] + kd * gws[2] + kh * gws[3] + kw * gws[4]] = s;
            }
        mft__free(j.part);
        return true;
    }
    const int64_t dC = kind == 1 ? g->Cin : Cout;
    float *wp = mft__alloc((size_t)(T * Cout) * sizeof(float) + 64, 64);
    float *bpad = mft__alloc((size_t)dC * sizeof(float) + 64, 64);
    if (!wp || !bpad) { /* Note [Kernel scratch] */
        mft__free(wp);
        mft__free(bpad);
        mft__kernel_nomem((size_t)(T * Cout + dC) * sizeof(float) + 128);
        return true;
    }
    for (int64_t c = 0; c < dC; c++) bpad[c] = bval(g, c);
    j.bpad = bpad;
    for (int64_t t = 0; t < T; t++)
        for (int64_t co = 0; co < Cout; co++) wp[t * Cout + co] = wval(g, co, 0, t);
    j.wp = wp;
    const int64_t rows = kind == 1 ? g->N * g->D * g->H : g->N * g->OD * g->OH;
    mft__parallel_for(0, rows, 1, dw_range, &j);
    if (atomic_load(&nomem)) mft__kernel_nomem((size_t)atomic_load(&nomem));
    mft__free(wp);
    mft__free(bpad);
    return true;
}

/* ---------------------------------------------------------------- depthwise NCHW
 * Note [Depthwise NCHW]: 2-D depthwise on CONTIGUOUS buffers without the
 * transpose: every (n, c) plane is an independent 2-D stencil. The source
 * plane is copied into a zero-bordered scratch plane pb (rows PH, row length
 * PW >= the vector-rounded output width + the kernel's reach) so that every
 * tap is an unconditional load, vectorised along W. Forward (unit W stride):
 * y[n][co] from x[n][co / mult] with w[co]; backward_input (unit strides):
 * the same stencil on grad_y with the flipped kernel and offset p - (K-1)d,
 * summed over the mult output channels of the input channel in order;
 * backward_weight (unit W stride): per (co, chunk of n) work item, the T
 * tap sums over the chunk's planes, added in chunk order. */
typedef struct dwn_job {
    const cgeom *g;
    int kind;
    const float *a, *b;
    float *o;
    const int64_t *gws;
    float *part; /* backward_weight: [Cout][nch][T] */
    int64_t nch, PH, PW, offh, offw;
    _Atomic long long *nomem; /* Note [Kernel scratch]: a worker's failed allocation */
} dwn_job;

/* pb (PH x PW) = src plane (SH x SW) shifted by (offh, offw), zero outside. */
static void dwn_pad(float *pb, int64_t PH, int64_t PW, const float *src, int64_t SH, int64_t SW,
                    int64_t offh, int64_t offw) {
    int64_t c0 = -offw < 0 ? 0 : -offw, c1 = SW - offw < PW ? SW - offw : PW;
    if (c1 < c0) c1 = c0;
    for (int64_t r = 0; r < PH; r++) {
        float *d = pb + r * PW;
        const int64_t sr = r + offh;
        if (sr < 0 || sr >= SH) {
            memset(d, 0, (size_t)PW * sizeof(float));
            continue;
        }
        if (c0 > 0) memset(d, 0, (size_t)c0 * sizeof(float));
        if (c1 > c0) memcpy(d + c0, src + sr * SW + c0 + offw, (size_t)(c1 - c0) * sizeof(float));
        if (c1 < PW) memset(d + c1, 0, (size_t)(PW - c1) * sizeof(float));
    }
}

#if CF_AVX2
/* lane mask of the first n (1..8) lanes */
static inline __m256i dwn_mask(int64_t n) {
    static const int32_t tab[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    return _mm256_loadu_si256((const __m256i *)(const void *)(tab + 8 - n));
}
#endif

/* One dst row o[0..OW) (+)= b + sum_{kh,kw} wt[kh*KW+kw] * pr[kh*rs + kw*dw + ow],
 * rs = dH * PW; acc: start from o instead of b. */
static void dwn_row(float *o, int64_t OW, const float *pr, int64_t rs, int64_t dw, int64_t KH,
                    int64_t KW, const float *wt, float b, bool acc) {
    int64_t ow = 0;
#if CF_AVX2
    if (cf_mode != 1) {
        const __m256 bv = _mm256_set1_ps(b);
        for (; ow + 32 <= OW; ow += 32) {
            __m256 a0 = acc ? _mm256_loadu_ps(o + ow) : bv;
            __m256 a1 = acc ? _mm256_loadu_ps(o + ow + 8) : bv;
            __m256 a2 = acc ? _mm256_loadu_ps(o + ow + 16) : bv;
            __m256 a3 = acc ? _mm256_loadu_ps(o + ow + 24) : bv;
            for (int64_t kh = 0; kh < KH; kh++)
                for (int64_t kw = 0; kw < KW; kw++) {
                    const __m256 wv = _mm256_broadcast_ss(wt + kh * KW + kw);
                    const float *p = pr + kh * rs + kw * dw + ow;
                    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(p), wv, a0);
                    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(p + 8), wv, a1);
                    a2 = _mm256_fmadd_ps(_mm256_loadu_ps(p + 16), wv, a2);
                    a3 = _mm256_fmadd_ps(_mm256_loadu_ps(p + 24), wv, a3);
                }
            _mm256_storeu_ps(o + ow, a0);
            _mm256_storeu_ps(o + ow + 8, a1);
            _mm256_storeu_ps(o + ow + 16, a2);
            _mm256_storeu_ps(o + ow + 24, a3);
        }
        for (; ow < OW; ow += 8) {
            /* the last partial vector reads inside pb (PW covers it), stores
             * the valid part (masked) */
            const int64_t n = OW - ow < 8 ? OW - ow : 8;
            const __m256i mk = dwn_mask(n);
            __m256 a0 = acc ? _mm256_blendv_ps(bv, _mm256_maskload_ps(o + ow, mk),
                                               _mm256_castsi256_ps(mk))
                            : bv;
            for (int64_t kh = 0; kh < KH; kh++)
                for (int64_t kw = 0; kw < KW; kw++)
                    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(pr + kh * rs + kw * dw + ow),
                                         _mm256_broadcast_ss(wt + kh * KW + kw), a0);
            _mm256_maskstore_ps(o + ow, mk, a0);
        }
        return;
    }
#endif
    for (; ow < OW; ow++) {
        float s = acc ? o[ow] : b;
        for (int64_t kh = 0; kh < KH; kh++)
            for (int64_t kw = 0; kw < KW; kw++) s += wt[kh * KW + kw] * pr[kh * rs + kw * dw + ow];
        o[ow] = s;
    }
}

#if CF_AVX2
/* Two dst rows o0, o1 of a 3x3 stencil with unit dilation and row step 1
 * (as dwn_row with KH = KW = 3, dw = 1; pr: the source row of o0, rs its
 * row stride): the four source rows are loaded once for both rows, weights
 * held in registers. */
static void dwn_row2_3x3(float *o0, float *o1, int64_t OW, const float *pr, int64_t rs,
                         const float *wt, float b, bool acc) {
    __m256 w[9];
    for (int i = 0; i < 9; i++) w[i] = _mm256_broadcast_ss(wt + i);
    const __m256 bv = _mm256_set1_ps(b);
    int64_t ow = 0;
    for (; ow + 16 <= OW; ow += 16) {
        __m256 a0 = acc ? _mm256_loadu_ps(o0 + ow) : bv;
        __m256 a1 = acc ? _mm256_loadu_ps(o0 + ow + 8) : bv;
        __m256 c0 = acc ? _mm256_loadu_ps(o1 + ow) : bv;
        __m256 c1 = acc ? _mm256_loadu_ps(o1 + ow + 8) : bv;
        for (int r = 0; r < 4; r++) {
            const float *p = pr + r * rs + ow;
            for (int k = 0; k < 3; k++) {
                const __m256 x0 = _mm256_loadu_ps(p + k), x1 = _mm256_loadu_ps(p + k + 8);
                if (r < 3) {
                    a0 = _mm256_fmadd_ps(x0, w[r * 3 + k], a0);
                    a1 = _mm256_fmadd_ps(x1, w[r * 3 + k], a1);
                }
                if (r > 0) {
                    c0 = _mm256_fmadd_ps(x0, w[(r - 1) * 3 + k], c0);
                    c1 = _mm256_fmadd_ps(x1, w[(r - 1) * 3 + k], c1);
                }
            }
        }
        _mm256_storeu_ps(o0 + ow, a0);
        _mm256_storeu_ps(o0 + ow + 8, a1);
        _mm256_storeu_ps(o1 + ow, c0);
        _mm256_storeu_ps(o1 + ow + 8, c1);
    }
    for (; ow < OW; ow += 8) {
        /* the last partial vector reads inside pb, stores the valid part (masked) */
        const int64_t n = OW - ow < 8 ? OW - ow : 8;
        const __m256i mk = dwn_mask(n);
        const __m256 mf = _mm256_castsi256_ps(mk);
        __m256 a0 = acc ? _mm256_blendv_ps(bv, _mm256_maskload_ps(o0 + ow, mk), mf) : bv;
        __m256 c0 = acc ? _mm256_blendv_ps(bv, _mm256_maskload_ps(o1 + ow, mk), mf) : bv;
        for (int r = 0; r < 4; r++)
            for (int k = 0; k < 3; k++) {
                const __m256 x0 = _mm256_loadu_ps(pr + r * rs + ow + k);
                if (r < 3) a0 = _mm256_fmadd_ps(x0, w[r * 3 + k], a0);
                if (r > 0) c0 = _mm256_fmadd_ps(x0, w[(r - 1) * 3 + k], c0);
            }
        _mm256_maskstore_ps(o0 + ow, mk, a0);
        _mm256_maskstore_ps(o1 + ow, mk, c0);
    }
}
#endif

/* dst rows [0, R) of a plane (row length OW, source rows ss apart in pb). */
static void dwn_rows(float *o, int64_t R, int64_t OW, const float *pb, int64_t PW, int64_t ss,
                     int64_t dH, int64_t dW, int64_t KH, int64_t KW, const float *wt, float b,
                     bool acc) {
    int64_t r = 0;
#if CF_AVX2
    if (cf_mode != 1 && KH == 3 && KW == 3 && dH == 1 && dW == 1 && ss == 1)
        for (; r + 2 <= R; r += 2)
            dwn_row2_3x3(o + r * OW, o + (r + 1) * OW, OW, pb + r * PW, PW, wt, b, acc);
#endif
    for (; r < R; r++) dwn_row(o + r * OW, OW, pb + r * ss * PW, dH * PW, dW, KH, KW, wt, b, acc);
}

/* backward_weight of one plane:
 * acc[t] += sum_{oh,ow} gy[oh][ow] * pb[oh*sH + kh*dH][ow + kw*dW]. */
static void dwn_bw_plane(double *acc, const float *gy, int64_t OH, int64_t OW, const float *pb,
                         int64_t PW, int64_t sH, int64_t dH, int64_t dW, int64_t KH, int64_t KW) {
#if CF_AVX2
    const int64_t T = KH * KW;
    if (cf_mode != 1 && T <= 16) {
        __m256 v[16];
        for (int64_t t = 0; t < T; t++) v[t] = _mm256_setzero_ps();
        for (int64_t oh = 0; oh < OH; oh++) {
            const float *gr = gy + oh * OW, *pr = pb + oh * sH * PW;
            for (int64_t ow = 0; ow < OW; ow += 8) {
                __m256 gv;
                if (OW - ow >= 8) {
                    gv = _mm256_loadu_ps(gr + ow);
                } else {
                    float tmp[8] = {0};
                    memcpy(tmp, gr + ow, (size_t)(OW - ow) * sizeof(float));
                    gv = _mm256_loadu_ps(tmp);
                }
                if (T == 9 && KW == 3) {
                    for (int64_t kh = 0; kh < 3; kh++) {
                        const float *p = pr + kh * dH * PW + ow;
                        v[kh * 3] = _mm256_fmadd_ps(gv, _mm256_loadu_ps(p), v[kh * 3]);
                        v[kh * 3 + 1] = _mm256_fmadd_ps(gv, _mm256_loadu_ps(p + dW), v[kh * 3 + 1]);
                        v[kh * 3 + 2] =
                            _mm256_fmadd_ps(gv, _mm256_loadu_ps(p + 2 * dW), v[kh * 3 + 2]);
                    }
                } else {
                    for (int64_t kh = 0; kh < KH; kh++)
                        for (int64_t kw = 0; kw < KW; kw++)
                            v[kh * KW + kw] = _mm256_fmadd_ps(
                                gv, _mm256_loadu_ps(pr + kh * dH * PW + kw * dW + ow),
                                v[kh * KW + kw]);
                }
            }
        }
        for (int64_t t = 0; t < T; t++) {
            float f[8];
            _mm256_storeu_ps(f, v[t]);
            acc[t] += (double)(((f[0] + f[1]) + (f[2] + f[3])) + ((f[4] + f[5]) + (f[6] + f[7])));
        }
        return;
    }
#endif
    for (int64_t kh = 0; kh < KH; kh++)
        for (int64_t kw = 0; kw < KW; kw++) {
            float s = 0.0f;
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++)
                    s += gy[oh * OW + ow] * pb[(oh * sH + kh * dH) * PW + kw * dW + ow];
            acc[kh * KW + kw] += (double)s;
        }
}

static void dwn_range(void *ctx, int64_t begin, int64_t end) {
    const dwn_job *j = ctx;
    const cgeom *g = j->g;
    const int64_t mult = g->Cgo, KH = g->K[1], KW = g->K[2], T = KH * KW;
    float *pb = mft__alloc((size_t)(j->PH * j->PW + T) * sizeof(float) + 64, 64);
    if (!pb) { /* Note [Kernel scratch] */
        mft__scratch_fail(j->nomem, (size_t)(j->PH * j->PW + T) * sizeof(float) + 64);
        return;
    }
    float *wt = pb + j->PH * j->PW;
    const float *padded = NULL; /* forward: the source plane now in pb */
    for (int64_t it = begin; it < end; it++) {
        if (j->kind == 0) { /* item (n, co) */
            const int64_t n = it / g->Cout, co = it % g->Cout;
            const float *src = j->a + (n * g->Cin + co / mult) * g->H * g->W;
            if (src != padded) /* consecutive co of one input channel share it (mult > 1) */
                dwn_pad(pb, j->PH, j->PW, src, g->H, g->W, j->offh, j->offw);
            padded = src;
            for (int64_t t = 0; t < T; t++) wt[t] = wval(g, co, 0, t);
            float *o = j->o + it * g->OH * g->OW;
            dwn_rows(o, g->OH, g->OW, pb, j->PW, g->s[1], g->d[1], g->d[2], KH, KW, wt,
                     bval(g, co), false);
        } else if (j->kind == 1) { /* item (n, ci), summed over its mult grad_y planes */
            const int64_t n = it / g->Cin, ci = it % g->Cin;
            float *o = j->o + it * g->H * g->W;
            for (int64_t m = 0; m < mult; m++) {
                const int64_t co = ci * mult + m;
                dwn_pad(pb, j->PH, j->PW, j->a + (n * g->Cout + co) * g->OH * g->OW, g->OH, g->OW,
                        j->offh, j->offw);
                for (int64_t t = 0; t < T; t++) wt[t] = wval(g, co, 0, T - 1 - t);
                dwn_rows(o, g->H, g->W, pb, j->PW, 1, g->d[1], g->d[2], KH, KW, wt, bval(g, ci),
                         m > 0);
            }
        } else { /* item (co, chunk of n) */
            const int64_t co = it / j->nch, ch = it % j->nch;
            const int64_t n0 = ch * g->N / j->nch, n1 = (ch + 1) * g->N / j->nch;
            double acc[64];
            double *ap = T <= 64 ? acc : NULL;
            float *pt = j->part + it * T;
            if (!ap) { /* big kernels: accumulate per plane into part directly */
                for (int64_t t = 0; t < T; t++) pt[t] = 0.0f;
            } else {
                for (int64_t t = 0; t < T; t++) ap[t] = 0.0;
            }
            for (int64_t n = n0; n < n1; n++) {
                dwn_pad(pb, j->PH, j->PW, j->b + (n * g->Cin + co / mult) * g->H * g->W, g->H, g->W,
                        j->offh, j->offw);
                const float *gy = j->a + (n * g->Cout + co) * g->OH * g->OW;
                if (ap) {
                    dwn_bw_plane(ap, gy, g->OH, g->OW, pb, j->PW, g->s[1], g->d[1], g->d[2], KH,
                                 KW);
                } else {
                    for (int64_t kh = 0; kh < KH; kh++)
                        for (int64_t kw = 0; kw < KW; kw++) {
                            float s = 0.0f;
                            for (int64_t oh = 0; oh < g->OH; oh++)
                                for (int64_t ow = 0; ow < g->OW; ow++)
                                    s += gy[oh * g->OW + ow] *
                                         pb[(oh * g->s[1] + kh * g->d[1]) * j->PW + kw * g->d[2] +
                                            ow];
                            pt[kh * KW + kw] += s;
                        }
                }
            }
            if (ap)
                for (int64_t t = 0; t < T; t++) pt[t] = (float)ap[t];
        }
    }
    mft__free(pb);
}

/* Native NCHW depthwise (Note [Depthwise NCHW]); false: not applicable
 * (nothing written). A failed scratch allocation is reported through
 * mft__kernel_nomem (Note [Kernel scratch]). */
static bool dwn_conv(const cgeom *g, int kind, const float *a, const float *b, float *o,
                     const int64_t *gws) {
    if (cf_mode == 2 || !is_depthwise(g) || g->D != 1 || g->OD != 1 || g->K[0] != 1 ||
        g->s[2] != 1 || (kind == 1 && g->s[1] != 1))
        return false;
    dwn_job j;
    memset(&j, 0, sizeof j);
    _Atomic long long nomem = 0;
    j.nomem = &nomem;
    j.g = g;
    j.kind = kind;
    j.a = a;
    j.b = b;
    j.o = o;
    j.gws = gws;
    const int64_t KH = g->K[1], KW = g->K[2], T = KH * KW;
    const int64_t dOH = kind == 1 ? g->H : g->OH, dOW = kind == 1 ? g->W : g->OW;
    const int64_t rs = kind == 1 ? 1 : g->s[1];
    j.PH = (dOH - 1) * rs + (KH - 1) * g->d[1] + 1;
    j.PW = cdiv(dOW, 8) * 8 + (KW - 1) * g->d[2];
    j.offh = kind == 1 ? g->p[1] - (KH - 1) * g->d[1] : -g->p[1];
    j.offw = kind == 1 ? g->p[2] - (KW - 1) * g->d[2] : -g->p[2];
    if (kind == 2) {
        j.nch = g->Cout >= 16 ? 1 : cdiv(16, g->Cout);
        if (j.nch > g->N) j.nch = g->N;
        j.part = mft__alloc((size_t)(g->Cout * j.nch * T) * sizeof(float) + 64, 64);
        if (!j.part) { /* Note [Kernel scratch] */
            mft__kernel_nomem((size_t)(g->Cout * j.nch * T) * sizeof(float) + 64);
            return true;
        }
        mft__parallel_for(0, g->Cout * j.nch, 1, dwn_range, &j);
        if (atomic_load(&nomem)) {
            mft__kernel_nomem((size_t)atomic_load(&nomem));
            mft__free(j.part);
            return true;
        }
        for (int64_t co = 0; co < g->Cout; co++)
            for (int64_t t = 0; t < T; t++) {
                float s = 0.0f;
                for (int64_t c = 0; c < j.nch; c++) s += j.part[(co * j.nch + c) * T + t];
                o[co * gws[0] + (t / KW) * gws[3] + (t % KW) * gws[4]] = s;
            }
        mft__free(j.part);
        return true;
    }
    mft__parallel_for(0, g->N * (kind == 1 ? g->Cin : g->Cout), 1, dwn_range, &j);
    if (atomic_load(&nomem)) mft__kernel_nomem((size_t)atomic_load(&nomem));
    return true;
}

/* ---------------------------------------------------------------- direct loops
 * The plain loops the tests force (mft__conv_fast_set_mode(2)) on packed NHWC
 * buffers: kind 0 forward
 * (a = x, o = y), 1 backward_input (a = grad_y, o = grad_x), 2
 * backward_weight (a = grad_y, b = x, o = grad_w with element strides gws). */
static void direct_nhwc(const cgeom *g, int kind, const float *a, const float *b, float *o,
                        const int64_t *gws) {
    if (kind == 1) {
        const int64_t n_out = g->N * g->D * g->H * g->W * g->Cin;
        for (int64_t i = 0; i < n_out; i++) o[i] = bval(g, i % g->Cin);
    } else if (kind == 0) {
        const int64_t n_out = g->N * g->OD * g->OH * g->OW * g->Cout;
        for (int64_t i = 0; i < n_out; i++) o[i] = bval(g, i % g->Cout);
    } else {
        for (int64_t co = 0; co < g->Cout; co++)
            for (int64_t ci = 0; ci < g->Cgi; ci++)
                for (int64_t t = 0; t < g->T; t++) {
                    const int64_t kw = t % g->K[2], kh = (t / g->K[2]) % g->K[1],
                                  kd = t / (g->K[2] * g->K[1]);
                    o[co * gws[0] + ci * gws[1] + kd * gws[2] + kh * gws[3] + kw * gws[4]] = 0.0f;
                }
    }
    for (int64_t n = 0; n < g->N; n++)
        for (int64_t od = 0; od < g->OD; od++)
            for (int64_t oh = 0; oh < g->OH; oh++)
                for (int64_t ow = 0; ow < g->OW; ow++)
                    for (int64_t t = 0; t < g->T; t++) {
                        const int64_t kw = t % g->K[2], kh = (t / g->K[2]) % g->K[1],
                                      kd = t / (g->K[2] * g->K[1]);
                        const int64_t id = od * g->s[0] - g->p[0] + kd * g->d[0];
                        const int64_t ih = oh * g->s[1] - g->p[1] + kh * g->d[1];
                        const int64_t iw = ow * g->s[2] - g->p[2] + kw * g->d[2];
                        if (id < 0 || id >= g->D || ih < 0 || ih >= g->H || iw < 0 || iw >= g->W)
                            continue;
                        const int64_t op = ((n * g->OD + od) * g->OH + oh) * g->OW + ow;
                        const int64_t ip = ((n * g->D + id) * g->H + ih) * g->W + iw;
                        for (int64_t co = 0; co < g->Cout; co++) {
                            const int64_t gg = co / g->Cgo;
                            for (int64_t ci = 0; ci < g->Cgi; ci++) {
                                const int64_t c = gg * g->Cgi + ci;
                                if (kind == 0) {
                                    o[op * g->Cout + co] += a[ip * g->Cin + c] * wval(g, co, ci, t);
                                } else if (kind == 1) {
                                    o[ip * g->Cin + c] += a[op * g->Cout + co] * wval(g, co, ci, t);
                                } else {
                                    o[co * gws[0] + ci * gws[1] + kd * gws[2] + kh * gws[3] +
                                      kw * gws[4]] += a[op * g->Cout + co] * b[ip * g->Cin + c];
                                }
                            }
                        }
                    }
}

/* ---------------------------------------------------------------- NHWC entry kernels */
static void gw_strides_of(const mft_tensor *gw, int ns, int64_t *s) {
    s[0] = gw->strides[0];
    s[1] = gw->strides[1];
    s[2] = ns == 3 ? gw->strides[2] : 0;
    s[3] = gw->strides[ns == 3 ? 3 : 2];
    s[4] = gw->strides[ns == 3 ? 4 : 3];
}

#define FPTR(t) ((float *)(void *)mft__tensor_ptr(t))

/* src NHWC; dst NHWC or (onchw) NCHW; false: nothing written (onchw only). */
/* The single-input-channel kernels' geometry (ops/conv_plane.c), or false. */
static bool plane_geom(const cgeom *g, mft__plane_geom *pg) {
    if (g->Cin != 1 || g->G != 1 || g->D != 1 || g->OD != 1 || g->K[0] != 1 || cf_mode != 0)
        return false;
    *pg = (mft__plane_geom){g->N,   g->H,    g->W,    g->OH,   g->OW,   g->Cout, g->K[1],
                            g->K[2], g->s[1], g->s[2], g->p[1], g->p[2], g->d[1], g->d[2],
                            g->w,   {g->ws[0], g->ws[1], g->ws[3], g->ws[4]},
                            g->bias, g->bstride};
    return true;
}

/* The Winograd geometry (ops/conv_wino.c) of a 2-D 3x3, stride 1, dilation
 * 1, groups 1 forward or backward_input, or false where it does not apply.
 * backward_input is the forward convolution of grad_y with padding 2 - p
 * and the weights flipped in H and W with c_in and c_out swapped (a view
 * with negative strides). */
static bool wino_geom(const cgeom *g, bool bwd, mft__wino_geom *wg) {
    if (cf_mode != 0 || g->G != 1 || g->D != 1 || g->OD != 1 || g->K[0] != 1 || g->K[1] != 3 ||
        g->K[2] != 3 || g->s[1] != 1 || g->s[2] != 1 || g->d[1] != 1 || g->d[2] != 1)
        return false;
    if (!bwd) {
        *wg = (mft__wino_geom){g->N,   g->H,   g->W,  g->Cin, g->Cout,
                               g->OH,  g->OW,  g->p[1], g->p[2], g->w,
                               {g->ws[0], g->ws[1], g->ws[3], g->ws[4]}, g->bias, g->bstride};
    } else {
        if (g->p[1] > 2 || g->p[2] > 2) return false;
        *wg = (mft__wino_geom){g->N,
                               g->OH,
                               g->OW,
                               g->Cout,
                               g->Cin,
                               g->H,
                               g->W,
                               2 - g->p[1],
                               2 - g->p[2],
                               g->w + 2 * g->ws[3] + 2 * g->ws[4],
                               {g->ws[1], g->ws[0], -g->ws[3], -g->ws[4]},
                               g->bias,
                               g->bstride};
    }
    return mft__conv_wino_applies(wg);
}

static void transpose(const float *src, float *dst, int64_t N, int64_t C, int64_t S, bool to_nhwc);

/* Winograd (kind 0 forward: a = x, o = y; 1 backward_input: a = grad_y,
 * o = grad_x; 2 backward_weight: a = grad_y, b = x, o = grad_w at gws) on
 * NHWC tensors, or on NCHW ones (nchw) transposed to NHWC into scratch and
 * a forward result transposed back (three passes over memory, small beside
 * the convolution). False, having written nothing, where it does not apply,
 * or (mft__kernel_failed then true) where memory is short; true also
 * reports the algorithm in the kernel name. */
static bool run_wino(const cgeom *g, int kind, const float *a, const float *b, float *o,
                     const int64_t *gws, bool nchw) {
    static const char *const names[2][3] = {
        {"conv2d.nhwc.f32.winograd_f4x3", "conv2d_backward_input.nhwc.f32.winograd_f4x3",
         "conv2d_backward_weight.nhwc.f32.winograd_f4x3"},
        {"conv2d.nchw.f32.via_nhwc_winograd_f4x3",
         "conv2d_backward_input.nchw.f32.via_nhwc_winograd_f4x3",
         "conv2d_backward_weight.nchw.f32.via_nhwc_winograd_f4x3"}};
    mft__wino_geom wg;
    if (!wino_geom(g, kind == 1, &wg)) return false;
    const float *src = kind == 2 ? b : a, *gy = a; /* the convolution's input, grad_y */
    float *dst = o, *t = NULL;
    const int64_t Si = wg.H * wg.W, So = wg.OH * wg.OW;
    if (nchw) {
        const size_t ni = (size_t)(wg.N * wg.C * Si), no = (size_t)(wg.N * wg.K * So);
        t = mft__alloc((ni + no) * sizeof(float) + 64, 64);
        if (!t) { /* Note [Kernel scratch] */
            mft__kernel_nomem((ni + no) * sizeof(float) + 64);
            return false;
        }
        float *t2 = t + (ni + 15) / 16 * 16;
        transpose(src, t, wg.N, wg.C, Si, true);
        src = t;
        if (kind == 2) {
            transpose(a, t2, wg.N, wg.K, So, true);
            gy = t2;
        } else {
            dst = t2;
        }
    }
    const bool ok = kind == 2 ? mft__conv_wino_backward_weight(&wg, gy, src, o, gws)
                              : mft__conv_wino_forward(&wg, src, dst);
    if (ok && nchw && kind != 2) transpose(dst, o, wg.N, wg.K, So, false);
    mft__free(t);
    if (ok) mft__dispatch_report_as(names[nchw][kind]);
    return ok;
}

/* The algorithm chains: each algorithm that does not apply returns false
 * and the next is tried; one that ran out of scratch memory stops the chain
 * (mft__kernel_failed: the dispatcher fails the op, Note [Kernel scratch]).
 * True when done (or failed); false only from the direct loops' test mode on
 * NCHW destinations. */
static bool run_fwd(const cgeom *g, const float *x, float *y, bool onchw) {
    mft__plane_geom pg;
    if (!onchw && run_wino(g, 0, x, NULL, y, NULL, false)) return true;
    if (mft__kernel_failed()) return true;
    if (!onchw && plane_geom(g, &pg) && mft__conv_plane_applies(&pg) &&
        mft__conv_plane_forward(&pg, x, y))
        return true;
    if (mft__kernel_failed()) return true;
    if (is_depthwise(g) && cf_mode != 2) return dw_conv(g, 0, x, NULL, y, NULL, onchw);
    return ind_conv(g, false, x, y, onchw, false);
}
static bool run_bwd_in(const cgeom *g, const float *gy, float *gx, bool onchw) {
    if (!onchw && run_wino(g, 1, gy, NULL, gx, NULL, false)) return true;
    if (mft__kernel_failed()) return true;
    if (is_depthwise(g) && cf_mode != 2) return dw_conv(g, 1, gy, NULL, gx, NULL, onchw);
    return ind_conv(g, true, gy, gx, onchw, false);
}
static void run_bwd_w(const cgeom *g, const float *gy, const float *x, float *gw,
                      const int64_t *gws) {
    mft__plane_geom pg;
    if (run_wino(g, 2, gy, x, gw, gws, false) || mft__kernel_failed()) return;
    if (cf_mode == 2) {
        direct_nhwc(g, 2, gy, x, gw, gws);
    } else if (plane_geom(g, &pg) && mft__conv_plane_applies(&pg) &&
               mft__conv_plane_backward_weight(&pg, gy, x, gw, gws)) {
        return;
    } else if (mft__kernel_failed()) {
        return;
    } else if (is_depthwise(g)) {
        dw_conv(g, 2, gy, x, gw, gws, false);
    } else {
        bw_conv(g, gy, x, gw, gws);
    }
}

static void conv_fwd_nhwc(const mft_kernel_args *a) {
    cgeom g = geom_of(a, a->inputs[0], a->outputs[0], a->inputs[1]);
    run_fwd(&g, FPTR(a->inputs[0]), FPTR(a->outputs[0]), false);
}
static void conv_bwd_in_nhwc(const mft_kernel_args *a) {
    cgeom g = geom_of(a, a->outputs[0], a->inputs[0], a->inputs[1]);
    run_bwd_in(&g, FPTR(a->inputs[0]), FPTR(a->outputs[0]), false);
}
static void conv_bwd_w_nhwc(const mft_kernel_args *a) {
    cgeom g = geom_of(a, a->inputs[1], a->inputs[0], a->outputs[0]);
    g.bias = NULL;
    int64_t gws[5];
    gw_strides_of(a->outputs[0], ((const mft_conv_params *)a->params)->nspatial, gws);
    run_bwd_w(&g, FPTR(a->inputs[0]), FPTR(a->inputs[1]), FPTR(a->outputs[0]), gws);
}

/* ---------------------------------------------------------------- NCHW (Note [NCHW kernels]) */
typedef struct tr_job {
    const float *src;
    float *dst;
    int64_t C, S; /* per image: src (C, S) -> dst (S, C) when to_nhwc, else back */
    bool to_nhwc;
} tr_job;

static void tr_range(void *ctx, int64_t begin, int64_t end) {
    const tr_job *j = ctx;
    const int64_t C = j->C, S = j->S, nsb = cdiv(S, 64);
    for (int64_t it = begin; it < end; it++) {
        const int64_t n = it / nsb, s0 = (it % nsb) * 64;
        const int64_t s1 = s0 + 64 < S ? s0 + 64 : S;
        const float *src = j->src + n * C * S;
        float *dst = j->dst + n * C * S;
        for (int64_t c0 = 0; c0 < C; c0 += 64) {
            const int64_t c1 = c0 + 64 < C ? c0 + 64 : C;
            if (j->to_nhwc) /* src (C, S) rows c, cols s */
                tr_block(src + c0 * S + s0, S, dst + s0 * C + c0, C, c1 - c0, s1 - s0);
            else /* src (S, C) rows s, cols c */
                tr_block(src + s0 * C + c0, C, dst + c0 * S + s0, S, s1 - s0, c1 - c0);
        }
    }
}

static void transpose(const float *src, float *dst, int64_t N, int64_t C, int64_t S, bool to_nhwc) {
    if (C == 1 || S == 1) {
        memcpy(dst, src, (size_t)(N * C * S) * sizeof(float));
        return;
    }
    tr_job j = {src, dst, C, S, to_nhwc};
    mft__parallel_for(0, N * cdiv(S, 64), 4, tr_range, &j);
}

/* Direct loops on NCHW buffers (the tests' mode 2): via element strides. */
static void direct_nchw(const cgeom *g, int kind, const float *a, const float *b, float *o,
                        const int64_t *gws) {
    const int64_t Si = g->D * g->H * g->W, So = g->OD * g->OH * g->OW;
    if (kind == 0) {
        for (int64_t i = 0; i < g->N * g->Cout * So; i++) o[i] = bval(g, (i / So) % g->Cout);
    } else if (kind == 1) {
        for (int64_t i = 0; i < g->N * g->Cin * Si; i++) o[i] = bval(g, (i / Si) % g->Cin);
    }
    for (int64_t co = 0; co < g->Cout; co++)
        for (int64_t ci = 0; ci < g->Cgi; ci++)
            for (int64_t t = 0; t < g->T; t++) {
                const int64_t kw = t % g->K[2], kh = (t / g->K[2]) % g->K[1],
                              kd = t / (g->K[2] * g->K[1]);
                const int64_t c = (co / g->Cgo) * g->Cgi + ci;
                const float wv = kind == 2 ? 0.0f : wval(g, co, ci, t);
                float s = 0.0f;
                for (int64_t n = 0; n < g->N; n++)
                    for (int64_t od = 0; od < g->OD; od++)
                        for (int64_t oh = 0; oh < g->OH; oh++)
                            for (int64_t ow = 0; ow < g->OW; ow++) {
                                const int64_t id = od * g->s[0] - g->p[0] + kd * g->d[0];
                                const int64_t ih = oh * g->s[1] - g->p[1] + kh * g->d[1];
                                const int64_t iw = ow * g->s[2] - g->p[2] + kw * g->d[2];
                                if (id < 0 || id >= g->D || ih < 0 || ih >= g->H || iw < 0 ||
                                    iw >= g->W)
                                    continue;
                                const int64_t op =
                                    (n * g->Cout + co) * So + (od * g->OH + oh) * g->OW + ow;
                                const int64_t ip =
                                    (n * g->Cin + c) * Si + (id * g->H + ih) * g->W + iw;
                                if (kind == 0)
                                    o[op] += a[ip] * wv;
                                else if (kind == 1)
                                    o[ip] += a[op] * wv;
                                else
                                    s += a[op] * b[ip];
                            }
                if (kind == 2)
                    o[co * gws[0] + ci * gws[1] + kd * gws[2] + kh * gws[3] + kw * gws[4]] = s;
            }
}

/* ---------------------------------------------------------------- pointwise NCHW
 * 1x1 kernels with stride 1 and no padding (dst pixel q reads src pixel q),
 * on NCHW buffers without transposes. Forward / backward_input: per image and
 * group Out[M, S] = A[M, K'] @ B[K', S], B and Out NCHW planes (row stride
 * S); forward A = w (M = Cgo, K = Cgi), backward_input A = w^T (M = Cgi,
 * K = Cgo); with a bias, A gets a last column holding it and B a last row of
 * ones (K' = K + 1), so the bias enters the FMA chain exactly. A is packed
 * [G][Mp][K'] (Mp a multiple of 6, zero rows). Work items are (n, group,
 * block of PW_COLS pixels); per 32-pixel panel, B is copied into two [K'][16]
 * blocks (zero padded; the copy of a full block has a constant size, which
 * the compiler turns into vector moves: the variable-size copy became a rep
 * movs that took a third of the time), the next panel's lines are
 * prefetched, and the 6x32 micro-kernel runs with six rows of A as its
 * pointer rows (16-pixel panels and the 6x16 kernel where no 6x32 exists).
 * 8x64x56x56 k64 forward: 1.75-1.83 -> 1.29-1.36 ms at 1 thread (16-pixel
 * panels, 7 loads per 6 FMAs: 0.52 of peak; now 0.66-0.76).
 * NCHW backward_weight (every dense kernel size, pwb_range): only x is
 * transposed to NHWC; items are (group, 16 input channels), each owning
 * acc[tap][Cgo (padded to 6)][16] and summing over (n, od, oh, tap) in order
 * with the 6x16 backward micro-kernel over the tap's valid run of output
 * columns: rows = six grad_y rows (NCHW, contiguous in ow), columns = 16
 * channels of the NHWC x (the buffer has 16 floats of slack for the last
 * channel block; extra columns are discarded). */
#define PW_COLS 128

typedef struct pw_job {
    const cgeom *g;
    const float *src;
    float *dst;
    const float *ap; /* [G][Mp][Kp] */
    int64_t K, Kp, M, Mp, S, srcC, dstC, nsb;
    ind_micro_fn micro;
    ind_micro2_fn micro2; /* NULL: 16-pixel panels only */
    _Atomic long long *nomem; /* Note [Kernel scratch]: a worker's failed allocation */
} pw_job;

static bool is_pointwise(const cgeom *g) {
    bool ok = g->T == 1 && g->D == g->OD && g->H == g->OH && g->W == g->OW;
    for (int i = 0; i < 3; i++) ok &= g->s[i] == 1 && g->p[i] == 0;
    return ok;
}

static void pw_range(void *ctx, int64_t begin, int64_t end) {
    const pw_job *j = ctx;
    const int64_t K = j->K, Kp = j->Kp, M = j->M, S = j->S, G = j->g->G;
    /* panel columns: 32 (two [K'][16] blocks, 6x32 tiles) or 16 */
    const int64_t pc = j->micro2 ? 2 * TILE_N : TILE_N, ws = Kp * TILE_N;
    float *panel = mft__alloc((size_t)(Kp * pc) * sizeof(float), 64);
    if (!panel) { /* Note [Kernel scratch] */
        mft__scratch_fail(j->nomem, (size_t)(Kp * pc) * sizeof(float));
        return;
    }
    static const float zero32[2 * TILE_N] = {0};
    const int32_t tap0 = 0;
    float tmp[TILE_M * 2 * TILE_N];
    for (int64_t it = begin; it < end; it++) {
        const int64_t n = it / (G * j->nsb), gg = (it / j->nsb) % G, sb = it % j->nsb;
        const int64_t s0 = sb * PW_COLS, s1 = s0 + PW_COLS < S ? s0 + PW_COLS : S;
        const float *b = j->src + (n * j->srcC + gg * K) * S;
        float *o = j->dst + (n * j->dstC + gg * M) * S;
        const float *ag = j->ap + gg * j->Mp * Kp;
        for (int64_t c0 = s0; c0 < s1; c0 += pc) {
            const int64_t cols = s1 - c0 < pc ? s1 - c0 : pc;
            /* block h of the panel holds columns c0 + 16h .. (zero padded) */
            const bool two = cols > TILE_N;
            for (int64_t h = 0; h < (two ? 2 : 1); h++) {
                const int64_t hc = h ? cols - TILE_N : (cols < TILE_N ? cols : TILE_N);
                float *blk = panel + h * ws;
                const float *bs = b + c0 + h * TILE_N;
                if (hc == TILE_N) /* (a constant size: vector moves, not a rep movs) */
                    for (int64_t k = 0; k < K; k++)
                        memcpy(blk + k * TILE_N, bs + k * S, TILE_N * sizeof(float));
                else
                    for (int64_t k = 0; k < K; k++) {
                        float *pr = blk + k * TILE_N;
                        memcpy(pr, bs + k * S, (size_t)hc * sizeof(float));
                        memset(pr + hc, 0, (size_t)(TILE_N - hc) * sizeof(float));
                    }
                if (Kp > K)
                    for (int c = 0; c < TILE_N; c++) blk[K * TILE_N + c] = 1.0f;
            }
            const int64_t width = two ? 2 * TILE_N : TILE_N;
            if (c0 + 2 * pc <= S) /* the next panel's lines, fetched while this one computes */
                for (int64_t k = 0; k < K; k++)
                    for (int64_t h = 0; h < pc; h += TILE_N)
                        __builtin_prefetch(b + k * S + c0 + pc + h, 0, 3);
            for (int64_t m0 = 0; m0 < M; m0 += TILE_M) {
                const int64_t rows = M - m0 < TILE_M ? M - m0 : TILE_M;
                const float *ptrs[TILE_M];
                for (int i = 0; i < TILE_M; i++) ptrs[i] = ag + (m0 + i) * Kp;
                float *out = o + m0 * S + c0;
                const bool direct = rows == TILE_M && cols == width;
                float *orow[TILE_M];
                for (int i = 0; i < TILE_M; i++) orow[i] = direct ? out + i * S : tmp + i * width;
                if (two)
                    j->micro2(1, &tap0, Kp, ptrs, panel, ws, zero32, orow);
                else
                    j->micro(1, &tap0, Kp, ptrs, panel, zero32, orow);
                if (!direct)
                    for (int64_t i = 0; i < rows; i++)
                        memcpy(out + i * S, tmp + i * width, (size_t)cols * sizeof(float));
            }
        }
    }
    mft__free(panel);
}

/* Forward (bwd false) or backward_input of a pointwise conv on NCHW buffers.
 * False (nothing written) when the packed weights cannot be allocated. */
static bool pw_conv(const cgeom *g, bool bwd, const float *src, float *dst) {
    pw_job j;
    memset(&j, 0, sizeof j);
    j.g = g;
    j.src = src;
    j.dst = dst;
    j.K = bwd ? g->Cgo : g->Cgi;
    j.M = bwd ? g->Cgi : g->Cgo;
    j.Kp = j.K + (g->bias ? 1 : 0);
    j.Mp = cdiv(j.M, TILE_M) * TILE_M;
    j.S = g->D * g->H * g->W;
    j.srcC = bwd ? g->Cout : g->Cin;
    j.dstC = bwd ? g->Cin : g->Cout;
    j.nsb = cdiv(j.S, PW_COLS);
    j.micro = pick_ind_micro();
    j.micro2 = pick_ind_micro2();
    float *ap = mft__alloc((size_t)(g->G * j.Mp * j.Kp) * sizeof(float) + 64, 64);
    if (!ap) { /* Note [Kernel scratch] */
        mft__kernel_nomem((size_t)(g->G * j.Mp * j.Kp) * sizeof(float) + 64);
        return true;
    }
    _Atomic long long nomem = 0;
    j.nomem = &nomem;
    for (int64_t gg = 0; gg < g->G; gg++)
        for (int64_t m = 0; m < j.Mp; m++) {
            float *r = ap + (gg * j.Mp + m) * j.Kp;
            for (int64_t k = 0; k < j.K; k++)
                r[k] = m >= j.M ? 0.0f
                       : bwd    ? wval(g, gg * g->Cgo + k, m, 0)
                                : wval(g, gg * g->Cgo + m, k, 0);
            if (j.Kp > j.K) r[j.K] = m < j.M ? bval(g, gg * j.M + m) : 0.0f;
        }
    j.ap = ap;
    if (g->N * j.S > 0)
        mft__parallel_for_dynamic(0, g->N * g->G * j.nsb, cf_chunk(g->N * g->G * j.nsb), pw_range,
                                  &j);
    if (atomic_load(&nomem)) mft__kernel_nomem((size_t)atomic_load(&nomem));
    mft__free(ap);
    return true;
}

typedef struct pwb_job {
    const cgeom *g;
    const float *gy; /* NCHW (N, Cout, S) */
    const float *x;  /* NHWC (N, S, Cin), >= 16 floats of slack at the end */
    float *gw;
    const int64_t *gws;
    int64_t nbi;
    bw_micro_fn micro;
    bw_micro2_fn micro2; /* NULL: 16 input channels per call only */
    _Atomic long long *nomem; /* Note [Kernel scratch]: a worker's failed allocation */
} pwb_job;

static void pwb_range(void *ctx, int64_t begin, int64_t end) {
    const pwb_job *j = ctx;
    const cgeom *g = j->g;
    const int64_t T = g->T, Mp = cdiv(g->Cgo, TILE_M) * TILE_M, So = g->OD * g->OH * g->OW;
    const int64_t bpi = j->micro2 ? 2 : 1, nit = cdiv(j->nbi, bpi); /* c_in blocks per item */
    const int64_t blk = T * Mp * TILE_N;
    float *acc = mft__alloc((size_t)(bpi * blk) * sizeof(float), 64);
    if (!acc) { /* Note [Kernel scratch] */
        mft__scratch_fail(j->nomem, (size_t)(bpi * blk) * sizeof(float));
        return;
    }
    for (int64_t it = begin; it < end; it++) {
        const int64_t gg = it / nit, cb = (it % nit) * bpi;
        const int64_t nblk = j->nbi - cb < bpi ? j->nbi - cb : bpi;
        const int64_t ci0 = gg * g->Cgi + cb * TILE_N;
        const int64_t cols = g->Cgi - cb * TILE_N < nblk * TILE_N ? g->Cgi - cb * TILE_N
                                                                  : nblk * TILE_N;
        memset(acc, 0, (size_t)(nblk * blk) * sizeof(float));
        const int64_t xs = g->s[2] * g->Cin;
        for (int64_t n = 0; n < g->N; n++)
            for (int64_t od = 0; od < g->OD; od++)
                for (int64_t oh = 0; oh < g->OH; oh++) {
                    const float *gyr =
                        j->gy + (n * g->Cout + gg * g->Cgo) * So + (od * g->OH + oh) * g->OW;
                    for (int64_t t = 0; t < T; t++) {
                        const int64_t kw = t % g->K[2], kh = (t / g->K[2]) % g->K[1],
                                      kd = t / (g->K[2] * g->K[1]);
                        const int64_t id = od * g->s[0] - g->p[0] + kd * g->d[0];
                        const int64_t ih = oh * g->s[1] - g->p[1] + kh * g->d[1];
                        if (id < 0 || id >= g->D || ih < 0 || ih >= g->H) continue;
                        int64_t lo, hi;
                        const int64_t off = kw * g->d[2] - g->p[2];
                        valid_range(g->OW, g->W, g->s[2], off, &lo, &hi);
                        if (hi <= lo) continue;
                        const float *xr = j->x + ((n * g->D + id) * g->H + ih) * g->W * g->Cin +
                                          (lo * g->s[2] + off) * g->Cin + ci0;
                        for (int64_t m0 = 0; m0 < g->Cgo; m0 += TILE_M) {
                            const float *rows[TILE_M];
                            for (int i = 0; i < TILE_M; i++) {
                                const int64_t co = m0 + i < g->Cgo ? m0 + i : g->Cgo - 1;
                                rows[i] = gyr + co * So + lo;
                            }
                            float *a0 = acc + (t * Mp + m0) * TILE_N;
                            if (nblk == 2)
                                j->micro2(1, NULL, NULL, hi - lo, rows, 1, xr, xs, a0, a0 + blk);
                            else
                                j->micro(1, NULL, NULL, hi - lo, rows, 1, xr, xs, a0);
                        }
                    }
                }
        for (int64_t co = 0; co < g->Cgo; co++)
            for (int64_t c = 0; c < cols; c++)
                for (int64_t t = 0; t < T; t++) {
                    const int64_t kw = t % g->K[2], kh = (t / g->K[2]) % g->K[1],
                                  kd = t / (g->K[2] * g->K[1]);
                    j->gw[(gg * g->Cgo + co) * j->gws[0] + (cb * TILE_N + c) * j->gws[1] +
                          kd * j->gws[2] + kh * j->gws[3] + kw * j->gws[4]] =
                        acc[(c / TILE_N) * blk + (t * Mp + co) * TILE_N + c % TILE_N];
                }
    }
    mft__free(acc);
}

/* Row-chunked pwb_range (when the accumulators of every c_in block of a group
 * fit in BWC_MAX_ACC bytes): items (group, chunk of BWC_CHUNKS fixed ranges of
 * (n, od, oh) rows) with partials [cb][tap][Mp][16] run every c_in block on a
 * row while it is in L1; pwbc_reduce adds them in chunk order. */
typedef struct pwbc_job {
    const pwb_job *b;
    float *part; /* [G][nch][accn] */
    int64_t nch, rows, accn, Mp;
} pwbc_job;

static void pwbc_range(void *ctx, int64_t begin, int64_t end) {
    const pwbc_job *c = ctx;
    const pwb_job *j = c->b;
    const cgeom *g = j->g;
    const int64_t T = g->T, Mp = c->Mp, So = g->OD * g->OH * g->OW, xs = g->s[2] * g->Cin;
    for (int64_t it = begin; it < end; it++) {
        const int64_t gg = it / c->nch, ch = it % c->nch;
        const int64_t r0 = ch * c->rows / c->nch, r1 = (ch + 1) * c->rows / c->nch;
        float *acc = c->part + it * c->accn;
        memset(acc, 0, (size_t)c->accn * sizeof(float));
        for (int64_t r = r0; r < r1; r++) {
            const int64_t oh = r % g->OH, od = (r / g->OH) % g->OD, n = r / (g->OH * g->OD);
            const float *gyr = j->gy + (n * g->Cout + gg * g->Cgo) * So + (od * g->OH + oh) * g->OW;
            for (int64_t t = 0; t < T; t++) {
                const int64_t kw = t % g->K[2], kh = (t / g->K[2]) % g->K[1],
                              kd = t / (g->K[2] * g->K[1]);
                const int64_t id = od * g->s[0] - g->p[0] + kd * g->d[0];
                const int64_t ih = oh * g->s[1] - g->p[1] + kh * g->d[1];
                if (id < 0 || id >= g->D || ih < 0 || ih >= g->H) continue;
                int64_t lo, hi;
                const int64_t off = kw * g->d[2] - g->p[2];
                valid_range(g->OW, g->W, g->s[2], off, &lo, &hi);
                if (hi <= lo) continue;
                const float *xr0 = j->x + ((n * g->D + id) * g->H + ih) * g->W * g->Cin +
                                   (lo * g->s[2] + off) * g->Cin + gg * g->Cgi;
                for (int64_t m0 = 0; m0 < g->Cgo; m0 += TILE_M) {
                    const float *rows[TILE_M];
                    for (int i = 0; i < TILE_M; i++) {
                        const int64_t co = m0 + i < g->Cgo ? m0 + i : g->Cgo - 1;
                        rows[i] = gyr + co * So + lo;
                    }
                    for (int64_t cb = 0; cb < j->nbi;) {
                        float *a0 = acc + ((cb * T + t) * Mp + m0) * TILE_N;
                        if (j->micro2 && cb + 1 < j->nbi) { /* 32 input channels */
                            j->micro2(1, NULL, NULL, hi - lo, rows, 1, xr0 + cb * TILE_N, xs, a0,
                                      a0 + T * Mp * TILE_N);
                            cb += 2;
                        } else {
                            j->micro(1, NULL, NULL, hi - lo, rows, 1, xr0 + cb * TILE_N, xs, a0);
                            cb++;
                        }
                    }
                }
            }
        }
    }
}

/* items (group, c_in block): grad_w = sum over chunks, in chunk order */
static void pwbc_reduce(void *ctx, int64_t begin, int64_t end) {
    const pwbc_job *c = ctx;
    const pwb_job *j = c->b;
    const cgeom *g = j->g;
    const int64_t T = g->T, Mp = c->Mp;
    for (int64_t it = begin; it < end; it++) {
        const int64_t gg = it / j->nbi, cb = it % j->nbi;
        const int64_t cols = g->Cgi - cb * TILE_N < TILE_N ? g->Cgi - cb * TILE_N : TILE_N;
        const float *p0 = c->part + gg * c->nch * c->accn + cb * T * Mp * TILE_N;
        for (int64_t co = 0; co < g->Cgo; co++)
            for (int64_t cc = 0; cc < cols; cc++)
                for (int64_t t = 0; t < T; t++) {
                    const int64_t kw = t % g->K[2], kh = (t / g->K[2]) % g->K[1],
                                  kd = t / (g->K[2] * g->K[1]);
                    const int64_t e = (t * Mp + co) * TILE_N + cc;
                    float s = p0[e];
                    for (int64_t ch = 1; ch < c->nch; ch++) s += p0[ch * c->accn + e];
                    j->gw[(gg * g->Cgo + co) * j->gws[0] + (cb * TILE_N + cc) * j->gws[1] +
                          kd * j->gws[2] + kh * j->gws[3] + kw * j->gws[4]] = s;
                }
    }
}

/* NCHW forward (bwd false) and backward_input (bwd true): the source is x
 * (C = Cin, spatial = input) or grad_y (C = Cout, spatial = output). */
static void conv_nchw_run(const mft_kernel_args *a, bool bwd) {
    const int kind = bwd ? 1 : 0;
    cgeom g = bwd ? geom_of(a, a->outputs[0], a->inputs[0], a->inputs[1])
                  : geom_of(a, a->inputs[0], a->outputs[0], a->inputs[1]);
    const float *src = FPTR(a->inputs[0]);
    float *dst = FPTR(a->outputs[0]);
    mft__plane_geom pg; /* one input channel: ops/conv_plane.c */
    if (!bwd && plane_geom(&g, &pg) && mft__conv_plane_forward_nchw(&pg, src, dst)) return;
    if (mft__kernel_failed() || dwn_conv(&g, kind, src, NULL, dst, NULL)) return;
    if (cf_mode != 2 && is_pointwise(&g) && !is_depthwise(&g) && pw_conv(&g, bwd, src, dst))
        return;
    const int64_t C = bwd ? g.Cout : g.Cin;
    const int64_t S = bwd ? g.OD * g.OH * g.OW : g.D * g.H * g.W;
    const bool c1 = C == 1; /* NCHW and NHWC coincide */
    if (!c1 && run_wino(&g, kind, src, NULL, dst, NULL, true)) return;
    if (mft__kernel_failed()) return;
    if (!c1 && g.N >= 8 && !is_depthwise(&g) && cf_mode != 2 &&
        ind_conv(&g, bwd, src, dst, true, true))
        return;
    if (cf_mode == 2) { /* tests: the direct loops */
        direct_nchw(&g, kind, src, NULL, dst, NULL);
        return;
    }
    float *t = c1 ? NULL : mft__alloc((size_t)(g.N * C * S) * sizeof(float) + 64, 64);
    if (!c1 && !t) { /* Note [Kernel scratch] */
        mft__kernel_nomem((size_t)(g.N * C * S) * sizeof(float) + 64);
        return;
    }
    if (!c1) transpose(src, t, g.N, C, S, true);
    const float *in = c1 ? src : t;
    if (bwd)
        run_bwd_in(&g, in, dst, true);
    else
        run_fwd(&g, in, dst, true);
    mft__free(t);
}

static void conv_fwd_nchw(const mft_kernel_args *a) { conv_nchw_run(a, false); }
static void conv_bwd_in_nchw(const mft_kernel_args *a) { conv_nchw_run(a, true); }

static void conv_bwd_w_nchw(const mft_kernel_args *a) {
    cgeom g = geom_of(a, a->inputs[1], a->inputs[0], a->outputs[0]);
    g.bias = NULL;
    int64_t gws[5];
    gw_strides_of(a->outputs[0], ((const mft_conv_params *)a->params)->nspatial, gws);
    mft__plane_geom pg; /* one input channel: ops/conv_plane.c */
    if (plane_geom(&g, &pg) && mft__conv_plane_backward_weight_nchw(&pg, FPTR(a->inputs[0]),
                                                                     FPTR(a->inputs[1]),
                                                                     FPTR(a->outputs[0]), gws))
        return;
    if (mft__kernel_failed() ||
        dwn_conv(&g, 2, FPTR(a->inputs[0]), FPTR(a->inputs[1]), FPTR(a->outputs[0]), gws))
        return;
    if (run_wino(&g, 2, FPTR(a->inputs[0]), FPTR(a->inputs[1]), FPTR(a->outputs[0]), gws, true) ||
        mft__kernel_failed())
        return;
    const int64_t Si = g.D * g.H * g.W, So = g.OD * g.OH * g.OW;
    const int64_t nitems = g.G * cdiv(g.Cgi, TILE_N);
    /* grad_y in place pays where the row-chunked partials fit; past that
     * (the per-c_in-block items of pwb_range), both operands to NHWC and
     * bw_conv measured faster: 8x256x14x14 k256 3x3 at 1 thread 14.0-16.9
     * -> 10.6-13.5 ms, 8x128x28x28 k128 11.0-13.5 -> 10.4-11.4 */
    const int64_t accn = g.T * cdiv(g.Cgi, TILE_N) * cdiv(g.Cgo, TILE_M) * TILE_M * TILE_N;
    const bool chunked = g.N * g.OD * g.OH >= BWC_CHUNKS &&
                         accn * (int64_t)sizeof(float) <= BWC_MAX_ACC;
    if (cf_mode != 2 && !is_depthwise(&g) &&
        (chunked || g.N * g.OD * g.OH < BWC_CHUNKS) &&
        (nitems >= 2 || nitems >= g.G * cdiv(g.Cgo, TILE_N))) {
        /* x to NHWC only; grad_y rows read in place (Note at pw_range) */
        const size_t xbytes = (size_t)(g.N * g.Cin * Si) * sizeof(float) + 64;
        float *xt = mft__alloc(xbytes, 64);
        if (!xt) { /* Note [Kernel scratch] */
            mft__kernel_nomem(xbytes);
            return;
        }
        transpose(FPTR(a->inputs[1]), xt, g.N, g.Cin, Si, true);
        _Atomic long long nomem = 0;
        pwb_job pj = {&g,      FPTR(a->inputs[0]), xt,   FPTR(a->outputs[0]), gws,
                      cdiv(g.Cgi, TILE_N), pick_bw_micro(), pick_bw_micro2(), &nomem};
        pwbc_job c;
        c.b = &pj;
        c.rows = g.N * g.OD * g.OH;
        c.nch = BWC_CHUNKS;
        c.Mp = cdiv(g.Cgo, TILE_M) * TILE_M;
        c.accn = accn;
        c.part = NULL;
        if (chunked) {
            const size_t pbytes = (size_t)(g.G * c.nch * c.accn) * sizeof(float);
            c.part = mft__alloc(pbytes, 64);
            if (!c.part) { /* Note [Kernel scratch]: not pwb_range, another order */
                mft__kernel_nomem(pbytes);
            } else {
                mft__parallel_for_dynamic(0, g.G * c.nch, cf_chunk(g.G * c.nch), pwbc_range, &c);
                mft__parallel_for(0, g.G * pj.nbi, 1, pwbc_reduce, &c);
                mft__free(c.part);
            }
        } else {
            mft__parallel_for(0, g.G * cdiv(pj.nbi, pj.micro2 ? 2 : 1), 1, pwb_range, &pj);
            if (atomic_load(&nomem)) mft__kernel_nomem((size_t)atomic_load(&nomem));
        }
        mft__free(xt);
        return;
    }
    if (cf_mode == 2) { /* tests: the direct loops */
        direct_nchw(&g, 2, FPTR(a->inputs[0]), FPTR(a->inputs[1]), FPTR(a->outputs[0]), gws);
        return;
    }
    float *gys = mft__alloc((size_t)(g.N * g.Cout * So) * sizeof(float) + 64, 64);
    float *xs = mft__alloc((size_t)(g.N * g.Cin * Si) * sizeof(float) + 64, 64);
    if (!gys || !xs) { /* Note [Kernel scratch] */
        mft__free(gys);
        mft__free(xs);
        mft__kernel_nomem((size_t)(g.N * (g.Cout * So + g.Cin * Si)) * sizeof(float) + 128);
        return;
    }
    transpose(FPTR(a->inputs[0]), gys, g.N, g.Cout, So, true);
    transpose(FPTR(a->inputs[1]), xs, g.N, g.Cin, Si, true);
    run_bwd_w(&g, gys, xs, FPTR(a->outputs[0]), gws);
    mft__free(gys);
    mft__free(xs);
}

/* ---------------------------------------------------------------- kernel table */
const mft__kernel_def mft__kernels_conv_fast[] = {
    {MFT__OP_CONV2D, MFT_CHANNELS_LAST, MFT_F32, "conv2d.nhwc.f32." CF_SFX, conv_fwd_nhwc},
    {MFT__OP_CONV2D_BACKWARD_INPUT, MFT_CHANNELS_LAST, MFT_F32,
     "conv2d_backward_input.nhwc.f32." CF_SFX, conv_bwd_in_nhwc},
    {MFT__OP_CONV2D_BACKWARD_WEIGHT, MFT_CHANNELS_LAST, MFT_F32,
     "conv2d_backward_weight.nhwc.f32." CF_SFX, conv_bwd_w_nhwc},
    {MFT__OP_CONV3D, MFT_CHANNELS_LAST, MFT_F32, "conv3d.ndhwc.f32." CF_SFX, conv_fwd_nhwc},
    {MFT__OP_CONV3D_BACKWARD_INPUT, MFT_CHANNELS_LAST, MFT_F32,
     "conv3d_backward_input.ndhwc.f32." CF_SFX, conv_bwd_in_nhwc},
    {MFT__OP_CONV3D_BACKWARD_WEIGHT, MFT_CHANNELS_LAST, MFT_F32,
     "conv3d_backward_weight.ndhwc.f32." CF_SFX, conv_bwd_w_nhwc},
    {MFT__OP_CONV2D, MFT_CONTIGUOUS, MFT_F32, "conv2d.nchw.f32.via_nhwc_" CF_SFX, conv_fwd_nchw},
    {MFT__OP_CONV2D_BACKWARD_INPUT, MFT_CONTIGUOUS, MFT_F32,
     "conv2d_backward_input.nchw.f32.via_nhwc_" CF_SFX, conv_bwd_in_nchw},
    {MFT__OP_CONV2D_BACKWARD_WEIGHT, MFT_CONTIGUOUS, MFT_F32,
     "conv2d_backward_weight.nchw.f32.via_nhwc_" CF_SFX, conv_bwd_w_nchw},
    {MFT__OP_CONV3D, MFT_CONTIGUOUS, MFT_F32, "conv3d.ncdhw.f32.via_ndhwc_" CF_SFX, conv_fwd_nchw},
    {MFT__OP_CONV3D_BACKWARD_INPUT, MFT_CONTIGUOUS, MFT_F32,
     "conv3d_backward_input.ncdhw.f32.via_ndhwc_" CF_SFX, conv_bwd_in_nchw},
    {MFT__OP_CONV3D_BACKWARD_WEIGHT, MFT_CONTIGUOUS, MFT_F32,
     "conv3d_backward_weight.ncdhw.f32.via_ndhwc_" CF_SFX, conv_bwd_w_nchw},
    {0, 0, 0, NULL, NULL},
};
