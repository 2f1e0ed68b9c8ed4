/* ops/conv/blocked16_bww3.c — backward_weight of an nChw16c F32
 * convolution with a kernel 3 wide, stride and dilation 1 along W (3x3
 * stride 1 where Winograd declines: the ResNet 7x7 and small-batch shapes),
 * on a packed nChw16c x. AVX-512 builds only; elsewhere blocked16.c keeps
 * its general tile kernel.
 *
 * Note [nChw16c 3-wide weight gradient]
 * The general kernel (blocked16.c) accumulates one 16x16 tile, one tap, in
 * 16 zmm: per output pixel one grad_y vector and 16 broadcasts of x for 16
 * FMAs, 17 loads per 16 FMAs, and every tap walks grad_y and x again. Two
 * 512-bit loads per cycle then bound it as much as the two FMA ports. Here
 * the accumulators are the three taps kw = 0, 1, 2 of one kernel row times
 * 8 input channels (24 zmm) and the walk goes over x columns: column iw
 * feeds the outputs ow = iw + pw - kw, so each broadcast of x serves three
 * FMAs, one per tap, against the three grad_y vectors of that column: 3 +
 * 8 loads per 24 FMAs. A block pair (ob, ib) runs KH x 2 such walks (kernel
 * rows, input channel halves) instead of KH x 3; a half whose channels
 * are all pad lanes is skipped. The border columns, where some of the
 * three outputs fall outside the row, run only their valid taps (no
 * multiplications by a zero grad_y: 0 * inf in x would be NaN).
 *
 * For a fixed tap, iw and ow grow together, so every element still sums
 * over (n, oh, ow) in order from zero with one FMA per term: the general
 * kernel's sums, bit for bit. Work items are block pairs, all kernel rows,
 * written to grad_w (o, i, tap) in order (whole lines of a plain OIHW
 * grad_w: Note [nChw16c weight-gradient items]); with fewer than 16 pairs
 * an item is a (pair, kernel row), so two threads still share the work. */
#include "blocked16_bww3.h"
#include "blocked16_internal.h"

#if CF_AVX512
#define W3_IC 8 /* input channels per walk */

/* x column xc (8 channels) into the taps of mask m: tap k takes the grad_y
 * vector of output q - k of row gr */
static inline __attribute__((always_inline)) void w3_col(__m512 acc[3][W3_IC], const float *xc,
                                                         const float *gr, int64_t q, const int m) {
    __m512 g[3];
    for (int k = 0; k < 3; k++)
        g[k] = (m >> k & 1) ? _mm512_loadu_ps(gr + (q - k) * 16) : _mm512_setzero_ps();
    for (int i = 0; i < W3_IC; i++) {
        const __m512 b = _mm512_set1_ps(xc[i]);
        for (int k = 0; k < 3; k++)
            if (m >> k & 1) acc[k][i] = _mm512_fmadd_ps(b, g[k], acc[k][i]);
    }
}

/* a border column: only the taps whose output lies in [0, OW) */
static inline __attribute__((always_inline)) void w3_edge(__m512 acc[3][W3_IC], const float *xc,
                                                          const float *gr, int64_t q, int64_t OW) {
    int m = 0;
    for (int k = 0; k < 3; k++) m |= (q - k >= 0 && q - k < OW) << k;
    switch (m) {
    case 1: w3_col(acc, xc, gr, q, 1); break;
    case 2: w3_col(acc, xc, gr, q, 2); break;
    case 3: w3_col(acc, xc, gr, q, 3); break;
    case 4: w3_col(acc, xc, gr, q, 4); break;
    case 6: w3_col(acc, xc, gr, q, 6); break;
    case 7: w3_col(acc, xc, gr, q, 7); break;
    default: /* 5 needs OW == 1 and q == 1: taps 0 and 2 are 2 apart */
        if (m & 1) w3_col(acc, xc, gr, q, 1);
        if (m & 4) w3_col(acc, xc, gr, q, 4);
        break;
    }
}

static inline int64_t clamp64(int64_t v, int64_t lo, int64_t hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

/* The three 8x16 tiles [kw][ic][oc] of kernel row kh, input channels
 * ib*16 + h*8 + [0, 8), output block ob: into grad_w itself when its
 * output lanes are contiguous (OIhw16i16o, Ohwi16o: the real lanes of each
 * vector, masked), else into t[kw][h*8 + ic][oc] for the caller. */
static void w3_walk(const mft__b16_bww3 *b, int64_t ob, int64_t ib, int64_t kh, int64_t h,
                    float t[3][16][16]) {
    const int64_t ysH = b->OW * 16, ysO1 = b->OH * ysH, ysN = b->O1 * ysO1, OW = b->OW;
    int64_t ohlo, ohhi;
    valid_range(b->OH, b->H, b->sh, kh * b->dh - b->ph, &ohlo, &ohhi);
    /* x columns that feed some output, and those that feed all three taps */
    const int64_t lo = b->pw < 0 ? -b->pw : 0, hi = clamp64(OW + 2 - b->pw, lo, b->W);
    const int64_t ca = clamp64(2 - b->pw, lo, hi), cb = clamp64(OW - b->pw, ca, hi);
    __m512 acc[3][W3_IC];
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < W3_IC; i++) acc[k][i] = _mm512_setzero_ps();
    for (int64_t n = 0; n < b->N; n++)
        for (int64_t oh = ohlo; oh < ohhi; oh++) {
            const float *gr = b->gy + n * ysN + ob * ysO1 + oh * ysH;
            const float *xr = b->x + n * b->xN + ib * b->xC1 +
                              (oh * b->sh - b->ph + kh * b->dh) * b->xH + h * W3_IC;
            int64_t iw = lo;
            for (; iw < ca; iw++) w3_edge(acc, xr + iw * 16, gr, iw + b->pw, OW);
            for (; iw < cb; iw++) w3_col(acc, xr + iw * 16, gr, iw + b->pw, 7);
            for (; iw < hi; iw++) w3_edge(acc, xr + iw * 16, gr, iw + b->pw, OW);
        }
    if (b->gm->o0 == 1) {
        const int64_t noc = b->O - ob * 16 < 16 ? b->O - ob * 16 : 16;
        const int64_t i0 = ib * 16 + h * W3_IC, ni = b->I - i0 < W3_IC ? b->I - i0 : W3_IC;
        const __mmask16 m = (__mmask16)((1u << noc) - 1);
        for (int k = 0; k < 3; k++)
            for (int i = 0; i < ni; i++)
                _mm512_mask_storeu_ps(b->gw + mft__wmap_at(b->gm, ob * 16, i0 + i, kh, k), m,
                                      acc[k][i]);
        return;
    }
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < W3_IC; i++) _mm512_storeu_ps(t[k][h * W3_IC + i], acc[k][i]);
}

typedef struct w3_ctx {
    const mft__b16_bww3 *b;
    int64_t rows; /* kernel rows per item: KH (pair items) or 1 */
} w3_ctx;

static void w3_range(void *vctx, int64_t lo, int64_t hi) {
    const w3_ctx *c = vctx;
    const mft__b16_bww3 *b = c->b;
    const int64_t R = b->KH / c->rows; /* items per pair */
    for (int64_t it = lo; it < hi; it++) {
        const int64_t pr = it / R, kh0 = it % R * c->rows, ib = pr % b->I1, ob = pr / b->I1;
        const int64_t nic = b->I - ib * 16 < 16 ? b->I - ib * 16 : 16;
        const int64_t noc = b->O - ob * 16 < 16 ? b->O - ob * 16 : 16;
        float t[MFT_B16_BWW3_MAX_KH * 3][16][16]; /* [kh][kw][ic][oc] */
        for (int64_t r = 0; r < c->rows; r++)
            for (int64_t h = 0; h * W3_IC < nic; h++) w3_walk(b, ob, ib, kh0 + r, h, t + 3 * r);
        if (b->gm->o0 != 1) /* else written by w3_walk */
            mft__conv_b16_tiles_out(b->gw, b->gm, 3, ob, ib, noc, nic, kh0 * 3, c->rows * 3, t);
    }
}

bool mft__conv_b16_bww3_available(void) { return true; }

void mft__conv_b16_bww3(const mft__b16_bww3 *b) {
    const int64_t pairs = b->O1 * b->I1;
    const w3_ctx c = {b, pairs >= 16 ? b->KH : 1};
    mft__parallel_for_dynamic(0, pairs * (b->KH / c.rows), 1, w3_range, (void *)&c);
}
#else
bool mft__conv_b16_bww3_available(void) { return false; }
void mft__conv_b16_bww3(const mft__b16_bww3 *b) { (void)b; }
#endif
