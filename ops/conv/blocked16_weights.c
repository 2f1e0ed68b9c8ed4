/* ops/conv/blocked16_weights.c — the weights of the nChw16c convolution
 * (blocked16.c): the map from (o, i, kh, kw) to a weight's storage (Note
 * [Conv weight maps] in conv_internal.h), for plain weights at any strides
 * and for weights blocked by 16 on O and / or I, and the reorder of any
 * such weight into the kernel's OIhw16i16o scratch (docs/spec.md §7.10).
 *
 * A weight already in OIhw16i16o or Ohwi16o (O lanes innermost, I lanes
 * next) is read in place by the forward kernel: no reorder, no scratch.
 * Everything else (a plain weight; the transposed, flipped weight
 * backward_input reads) is reordered per call, one read of the weight and
 * one write of O1*I1*KH*KW*256 floats: the transposed OIhw16i16o weight as
 * 16x16 tile transposes (its pad lanes are zeros to copy); a weight whose
 * input channels are contiguous (plain OIHW 1x1, (O, I, kh, kw) with I
 * innermost) as a strided 16x16 transpose per tap and block pair, one whose
 * output channels are contiguous (the transposed view of a plain 1x1) as
 * row copies; any other element by element. On 8,256,14,14->64 with a
 * plain weight the element-by-element loop took about 0.06 ms of a 0.37 ms
 * forward, the transposes about 0.01 ms (2026-11-28, 1 thread). */
#include "conv_internal.h"

bool mft__conv_wmap_of(const mft_tensor *w, mft__conv_wmap *m) {
    if (!w || w->ndim != 4) return false;
    int64_t d1[2], d0[2];
    bool has[2] = {false, false};
    for (int d = 0; d < 2; d++) {
        d1[d] = 16 * w->strides[d];
        d0[d] = w->strides[d];
    }
    for (int k = 0; k < w->nblocks; k++) {
        const int d = w->block_dim[k];
        if ((d != 0 && d != 1) || w->block_size[k] != 16 || has[d]) return false;
        has[d] = true;
        int64_t pitch = 1; /* product of the blocks after k */
        for (int j = k + 1; j < w->nblocks; j++) pitch *= w->block_size[j];
        d1[d] = w->strides[d];
        d0[d] = pitch;
    }
    m->o1 = d1[0];
    m->o0 = d0[0];
    m->i1 = d1[1];
    m->i0 = d0[1];
    m->kh = w->strides[2];
    m->kw = w->strides[3];
    return true;
}

typedef struct reorder_ctx {
    const float *w0;
    const mft__conv_wmap *m;
    int64_t O, I, KH, KW, I1;
    bool tiles; /* whole 16o16i tiles with zero pads: transposed per tile */
    float *dst;
} reorder_ctx;

/* items ob*I1 + ib: the (kh, kw, 16i, 16o) tiles of one block pair */
static void reorder_range(void *vctx, int64_t lo, int64_t hi) {
    const reorder_ctx *c = vctx;
    const int64_t T = c->KH * c->KW;
    for (int64_t it = lo; it < hi; it++) {
        const int64_t ob = it / c->I1, ib = it % c->I1;
        float *d = c->dst + it * T * 256;
        if (c->tiles) { /* each source tile [16o][16i] is the transpose of d's */
            for (int64_t kh = 0; kh < c->KH; kh++)
                for (int64_t kw = 0; kw < c->KW; kw++)
                    mft__conv_tr_block(c->w0 + mft__wmap_at(c->m, ob * 16, ib * 16, kh, kw), 16,
                                       d + (kh * c->KW + kw) * 256, 16, 16, 16);
            continue;
        }
        const int64_t no = c->O - ob * 16 < 16 ? c->O - ob * 16 : 16;
        const int64_t ni = c->I - ib * 16 < 16 ? c->I - ib * 16 : 16;
        if (no < 16 || ni < 16) memset(d, 0, (size_t)(T * 256) * sizeof(float));
        if (c->m->i0 == 1 || c->m->o0 == 1) { /* input or output channels contiguous */
            for (int64_t t = 0; t < T; t++) {
                const float *src =
                    c->w0 + mft__wmap_at(c->m, ob * 16, ib * 16, t / c->KW, t % c->KW);
                float *dt = d + t * 256;
                if (c->m->i0 == 1) /* rows of input channels, o0 apart: transposed */
                    mft__conv_tr_block(src, c->m->o0, dt, 16, no, ni);
                else /* rows of output channels, i0 apart: copied */
                    for (int64_t ic = 0; ic < ni; ic++)
                        memcpy(dt + ic * 16, src + ic * c->m->i0, (size_t)no * sizeof(float));
            }
            continue;
        }
        for (int64_t oc = 0; oc < no; oc++)
            for (int64_t ic = 0; ic < ni; ic++) {
                const float *src = c->w0 + mft__wmap_at(c->m, ob * 16 + oc, ib * 16 + ic, 0, 0);
                for (int64_t kh = 0; kh < c->KH; kh++)
                    for (int64_t kw = 0; kw < c->KW; kw++)
                        d[(kh * c->KW + kw) * 256 + ic * 16 + oc] =
                            src[kh * c->m->kh + kw * c->m->kw];
            }
    }
}

void mft__conv_b16_reorder(const float *w0, const mft__conv_wmap *m, bool tiles, int64_t O,
                           int64_t I, int64_t KH, int64_t KW, float *dst) {
    reorder_ctx c = {w0, m, O, I, KH, KW, cdiv(I, 16), tiles && m->o0 == 16 && m->i0 == 1, dst};
    mft__parallel_for(0, cdiv(O, 16) * c.I1, 1, reorder_range, &c);
}
