/* ops/pool/blocked16_tiled.c — the nChw16c F32 backward of windows that
 * tile the input, for max (blocked16_max_backward.c) and avg / adaptive avg
 * (blocked16_avg_backward.c): one term per grad_x element. */
#include "blocked16_internal.h"

/* ---------------------------------------------------------------- tiled backward
 * Windows that tile the input (stride == kernel, no padding, no dilation;
 * adaptive pooling whose sizes divide): input (ih, iw) lies in one window
 * only, output (ih / kh, iw / kw), or in none past the last whole or
 * clipped window. Each grad_x element is then the one term the gathered
 * backward would sum, computed the same way (0 + term, so the results are
 * bitwise those of the gather), with the output's grad_out, index and
 * 1/divisor read once per window row instead of once per element. */
typedef struct b16_tjob {
    const b16_job *j;
    const float *inv; /* avg: OH*OW factors; NULL: max */
    int64_t kh, kw;
} b16_tjob;

static void b16_tiled_rows(void *ctx, int64_t begin, int64_t end) {
    const b16_tjob *t = ctx;
    const b16_job *j = t->j;
    const int64_t H = j->H, W = j->W, OH = j->OH, OW = j->OW, kw = t->kw;
    const bv zero = bv_set1(0.0f);
    for (int64_t r = begin; r < end; r++) {
        const int64_t q = r / H, ih = r % H, oh = ih / t->kh;
        const bm keep = blk_keep(j->C, q % j->C1);
        float *gx = j->y + (q * H + ih) * W * 16;
        int64_t iw = 0;
        if (oh < OH) {
            const float *go = j->x + (q * OH + oh) * OW * 16;
            const int64_t *ind = j->ind ? j->ind + (q * OH + oh) * OW * 16 : NULL;
            for (int64_t ow = 0; ow < OW && iw < W; ow++) {
                const int64_t iw1 = iw + kw < W ? iw + kw : W;
                if (ind) {
                    for (; iw < iw1; iw++)
                        bv_st(gx + iw * 16, bv_keep(keep, bv_add_eq(zero, go + ow * 16,
                                                                    ind + ow * 16, ih * W + iw)));
                } else {
                    const bv v = bv_keep(keep, bv_add(zero, bv_mul(bv_ld(go + ow * 16),
                                                                   bv_set1(t->inv[oh * OW + ow]))));
                    for (; iw < iw1; iw++) bv_st(gx + iw * 16, v);
                }
            }
        }
        for (; iw < W; iw++) bv_st(gx + iw * 16, zero);
    }
}

/* Whether the windows tile the input; *kh, *kw their size. */
bool mft__pool_b16_tiles(const b16_job *j, bool adaptive, int64_t *kh, int64_t *kw) {
    if (adaptive) {
        if (j->OH < 1 || j->OW < 1 || j->H % j->OH || j->W % j->OW) return false;
        *kh = j->H / j->OH;
        *kw = j->W / j->OW;
        return *kh >= 1 && *kw >= 1;
    }
    const mft_pool2d_params *p = j->p;
    for (int d = 0; d < 2; d++)
        if (p->stride[d] != p->kernel[d] || p->padding[d] != 0 || p->dilation[d] > 1) return false;
    *kh = p->kernel[0];
    *kw = p->kernel[1];
    return true;
}

void mft__pool_b16_tiled(const b16_job *j, const float *inv, int64_t kh, int64_t kw) {
    b16_tjob t = {j, inv, kh, kw};
    mft__parallel_for(0, j->N * j->C1 * j->H, pool_grain(j->W * 16), b16_tiled_rows, &t);
}
