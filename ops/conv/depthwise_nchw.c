/* ops/conv/depthwise_nchw.c — 2-D depthwise convolution of the fast F32
 * kernels on CONTIGUOUS (NCHW) buffers, without transposes: each (n, c)
 * plane as a stencil on a zero-bordered copy (mft__conv_pad_plane of
 * layout.c), forward, backward_input and backward_weight (Note [Depthwise
 * NCHW]). Entry: mft__conv_depthwise_nchw, called from the NCHW chains of
 * chains.c. */
#include "conv_internal.h"

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
    if (cf_mode() != 1) {
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
    if (cf_mode() != 1 && KH == 3 && KW == 3 && dH == 1 && dW == 1 && ss == 1)
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
    if (cf_mode() != 1 && T <= 16) {
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
                mft__conv_pad_plane(pb, j->PH, j->PW, src, g->H, g->W, j->offh, j->offw);
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
                mft__conv_pad_plane(pb, j->PH, j->PW, j->a + (n * g->Cout + co) * g->OH * g->OW,
                                    g->OH, g->OW, j->offh, j->offw);
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
                mft__conv_pad_plane(pb, j->PH, j->PW, j->b + (n * g->Cin + co / mult) * g->H * g->W,
                                    g->H, g->W, j->offh, j->offw);
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
bool mft__conv_depthwise_nchw(const cgeom *g, int kind, const float *a, const float *b, float *o,
                              const int64_t *gws) {
    if (cf_mode() == 2 || !is_depthwise(g) || g->D != 1 || g->OD != 1 || g->K[0] != 1 ||
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
