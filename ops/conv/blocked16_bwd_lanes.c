/* ops/conv/blocked16_bwd_lanes.c — backward_input of an nChw16c F32
 * convolution whose x has few channels (one block, at most
 * MFT_B16_LANES_MAX: a network's first layer kept in nChw16c), stride 1:
 * grad_x by 16-lane dot products over the output channels. AVX-512 builds
 * only; elsewhere blocked16.c keeps the direct kernel.
 *
 * Note [nChw16c backward_input by lanes]
 * The direct kernel computes grad_x as a forward convolution of grad_y
 * whose output lanes are x's channels: with C = 1 each of its FMAs makes
 * 16 lanes of which one is a channel, and 64,1,28,28->32 3x3 took 4.1 ms
 * against NHWC's 1.5. Here the lanes are the output channels instead: for
 * a pixel of grad_x and a channel i of x, every valid (output block, kh,
 * kw) adds grad_y's 16-lane vector times the weight's 16 output lanes of
 * (i, kh, kw) into one accumulator (one per channel), and the accumulator
 * is then summed across its lanes in a fixed tree (lanes l + 8, then l + 4,
 * l + 2, l + 1): each lane sums over (output block, kh, kw) in order, the
 * tree adds the lanes. The weight is read as 16x16 tiles [16i][16o], in
 * place when it is OIhw16i16o / Ohwi16o, else reordered per call
 * (blocked16.c, as for the forward). One accumulator
 * alone would wait on its FMA chain (18 dependent FMAs a pixel for 2
 * blocks of 3x3), so the pixels whose every kw lands in grad_y go in groups
 * of P (8 for one channel, 24 / I for I > 1), P x I accumulators, each weight
 * vector loaded once for the group; the border pixels go one by one. Every
 * pixel stores its whole 16-lane vector, the pad lanes as zeros. Work items
 * are rows of grad_x; the results do not depend on the thread count. */
#include "blocked16_internal.h"

#if CF_AVX512

/* v summed across its lanes: (l, l + 8), then (l, l + 4), (l, l + 2),
 * (l, l + 1) */
static inline float lanes_sum(__m512 v) {
    const __m256 a =
        _mm256_add_ps(_mm512_castps512_ps256(v),
                      _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    const __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
    return _mm_cvtss_f32(_mm_add_ss(c, _mm_shuffle_ps(c, c, 1)));
}

/* Pixels iw .. iw + P - 1 of grad_x row r (n, ih), x channels 0 .. I - 1:
 * every kw valid for all P pixels when ALL, else P is 1 and the taps
 * outside grad_y are skipped. P pixels x I channels accumulators, the
 * weight vector of each (block, kh, kw, i) loaded once for the P pixels. */
static inline __attribute__((always_inline)) void
lanes_px(const int P, const int I, const bool ALL, const mft__b16_lanes *b, const int64_t *khs,
         int64_t nkh, int64_t n, int64_t ih, int64_t iw, float *gx) {
    const int64_t ysH = b->OW * 16, ysO1 = b->OH * ysH;
    const float *gyn = b->gy + n * b->gyN;
    __m512 acc[24]; /* [p][i], P * I <= 24 */
    for (int k = 0; k < P * I; k++) acc[k] = _mm512_setzero_ps();
    for (int64_t ob = 0; ob < b->O1; ob++)
        for (int64_t t = 0; t < nkh; t++) {
            const int64_t kh = khs[t], oh = ih + b->ph - kh * b->dh;
            const float *gr = gyn + ob * ysO1 + oh * ysH;
            const float *wr = b->w + ob * b->ws[0] + kh * b->ws[2];
            for (int64_t kw = 0; kw < b->KW; kw++) {
                const int64_t ow = iw + b->pw - kw * b->dw;
                if (!ALL && (ow < 0 || ow >= b->OW)) continue;
                __m512 wv[MFT_B16_LANES_MAX];
                for (int i = 0; i < I; i++) wv[i] = _mm512_loadu_ps(wr + kw * b->ws[3] + i * 16);
                for (int p = 0; p < P; p++) {
                    const __m512 g = _mm512_loadu_ps(gr + (ow + p) * 16);
                    for (int i = 0; i < I; i++)
                        acc[p * I + i] = _mm512_fmadd_ps(g, wv[i], acc[p * I + i]);
                }
            }
        }
    for (int p = 0; p < P; p++) {
        float out[16] = {0};
        for (int i = 0; i < I; i++) out[i] = lanes_sum(acc[p * I + i]);
        _mm512_storeu_ps(gx + (iw + p) * 16, _mm512_loadu_ps(out));
    }
}

/* one row of grad_x with I channels: groups of P interior pixels (P * I <=
 * 24 accumulators), the border pixels one by one */
static inline __attribute__((always_inline)) void lanes_row(const int I, const mft__b16_lanes *b,
                                                            int64_t r) {
    const int P = I == 1 ? 8 : 24 / I; /* 8, 12, 8, 6, 4, 4, 3, 3 */
    const int64_t n = r / b->H, ih = r % b->H;
    int64_t khs[MFT_B16_LANES_TAPS], nkh = 0;
    for (int64_t kh = 0; kh < b->KH; kh++) {
        const int64_t oh = ih + b->ph - kh * b->dh;
        if (oh >= 0 && oh < b->OH) khs[nkh++] = kh;
    }
    float *gx = b->gx + n * b->gxN + ih * b->gxH;
    /* pixels whose every kw lands in grad_y: ow = iw + pw - kw*dw in [0, OW) */
    int64_t a = (b->KW - 1) * b->dw - b->pw, e = b->OW - b->pw;
    a = a < 0 ? 0 : a > b->W ? b->W : a;
    e = e < a ? a : e > b->W ? b->W : e;
    int64_t iw = 0;
    for (; iw < a; iw++) lanes_px(1, I, false, b, khs, nkh, n, ih, iw, gx);
    for (; iw + P <= e; iw += P) lanes_px(P, I, true, b, khs, nkh, n, ih, iw, gx);
    for (; iw < b->W; iw++) lanes_px(1, I, false, b, khs, nkh, n, ih, iw, gx);
}

static void lanes_rows(void *vctx, int64_t lo, int64_t hi) {
    const mft__b16_lanes *b = vctx;
    for (int64_t r = lo; r < hi; r++) {
        switch (b->I) {
        case 1: lanes_row(1, b, r); break;
        case 2: lanes_row(2, b, r); break;
        case 3: lanes_row(3, b, r); break;
        case 4: lanes_row(4, b, r); break;
        case 5: lanes_row(5, b, r); break;
        case 6: lanes_row(6, b, r); break;
        case 7: lanes_row(7, b, r); break;
        default: lanes_row(8, b, r); break;
        }
    }
}

bool mft__conv_b16_lanes_applies(int64_t I, int64_t KH, int64_t KW) {
    return I <= MFT_B16_LANES_MAX && KH <= MFT_B16_LANES_TAPS && KW <= MFT_B16_LANES_TAPS;
}

void mft__conv_b16_lanes_bwd_in(const mft__b16_lanes *b) {
    mft__parallel_for(0, b->N * b->H, 1, lanes_rows, (void *)b);
}
#else
bool mft__conv_b16_lanes_applies(int64_t I, int64_t KH, int64_t KW) {
    (void)I, (void)KH, (void)KW;
    return false;
}
void mft__conv_b16_lanes_bwd_in(const mft__b16_lanes *b) { (void)b; }
#endif
