/* ops/conv/indirect.c — the indirect-convolution driver of the fast F32
 * kernels (2-D and 3-D), shared by forward and backward_input on NHWC
 * sources (NCHW sources per image, NCHW destinations through a pixel-major
 * buffer: Note [NCHW kernels] in chains.c): the per-tile source lookup, the
 * class order of the dst pixels, the weight packing, and the work items
 * that run the 6x16 / 6x32 micro-kernels of microkernels.c. Entry:
 * mft__conv_indirect, called from the algorithm chains of chains.c.
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
 * sequence at any thread count and schedule. */
#include "conv_internal.h"

#define TILES_PER_ITEM 8

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
                mft__conv_tr_block(ibuf + a * j->dstC, j->dstC, j->dst + n * j->dstC * j->dS + s0,
                                   j->dS, len, j->dstC);
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
                mft__conv_tr_block(wm[0] + toff[t], ms, ot, TILE_N, mv, K);
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

/* Per-image NCHW source (mft__conv_indirect with src_nchw): work item = one
 * image, whose src planes are transposed into a per-thread NHWC buffer (hot in L2) and
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
                mft__conv_tr_block(s + c0 * sS + s0, sS, buf + s0 * C + c0, C,
                                   C - c0 < 64 ? C - c0 : 64, sS - s0 < 64 ? sS - s0 : 64);
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
bool mft__conv_indirect(const cgeom *g, bool bwd, const float *src, float *dst, bool onchw,
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
    j.micro = mft__conv_pick_ind_micro();
    j.micro2 = mft__conv_pick_ind_micro2();
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
    if (cf_mode() == 2) { /* tests: the direct loops */
        if (onchw) return false;
        mft__conv_direct_nhwc(g, bwd ? 1 : 0, src, NULL, dst, NULL);
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
